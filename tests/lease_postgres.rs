//! Worker-number leases on PostgreSQL (feature `postgres`), on private servers the tests
//! start: holders SIGKILLed and replaced, the server stopped with SIGSTOP past the TTL and
//! crashed with `pg_ctl restart -m immediate` under load, a row deleted and the tables
//! restored from an older dump under a live holder, the server's clock stepped (libfaketime
//! on the server alone), and a failover to an asynchronous standby that was behind. What
//! every store promises is in `lease_conformance.rs`.

#![cfg(feature = "postgres")]

#[path = "common/leases.rs"]
mod leases;
#[path = "common/postgres.rs"]
mod postgres_server;

use std::fs;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen::lease::{LeaseState, LeaseStore, LeasedGenerator, PostgresStore, WorkerRange};
use idgen::{Clock, Error, Id, Layout};
use leases::{Issuer, assert_no_duplicates, finish_end_to_end, wait_for_within};
use postgres_server::PostgresServer;

const CHILD: &str = "child_process";

/// Long enough for any wait here on a loaded machine: a bound, not an expectation.
const PATIENCE: Duration = Duration::from_secs(90);

/// The stores' TTL: short, to keep the runs short, and three renewals a TTL, so that a
/// keeper starved of the CPU for a second (two CPU burners beside the tests) keeps its
/// number.
const TTL: Duration = Duration::from_secs(3);

/// A namespace no other test (or earlier run) uses.
fn namespace(test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("/idgen-test/{test}-{}-{nanos}", std::process::id())
}

/// A store with the [`TTL`] on `namespace` as it is. Connecting is tried again for a while:
/// a server slow to answer on a loaded machine is not what these tests are about.
fn connected(url: &str, namespace: &str) -> PostgresStore {
    let started = Instant::now();
    let store = loop {
        match PostgresStore::connect(url, namespace) {
            Ok(store) => break store,
            Err(Error::LeaseStore { reason }) if started.elapsed() < PATIENCE => {
                eprintln!("connecting again: {reason}");
                thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("{error}"),
        }
    };
    store.with_ttl(TTL).unwrap()
}

/// [`connected`], the namespace initialised with marks long passed.
fn store(url: &str, namespace: &str) -> PostgresStore {
    let store = connected(url, namespace);
    let an_hour_ago = idgen::SystemClock.now_unix_ms() - 3_600_000;
    store.init(0..=0, 0..=31, an_hour_ago).unwrap();
    store
}

fn range(text: &str) -> WorkerRange {
    WorkerRange::parse(0, text).unwrap()
}

fn unix_ms_of(id: u64) -> u64 {
    Layout::DEFAULT.decode(Id::try_from(id).unwrap()).unix_ms
}

/// A holder issuing on its own thread, on the [`TTL`] and `horizon`.
fn holder(store: PostgresStore, workers: &str, horizon: Duration) -> Issuer {
    Issuer::start(
        LeasedGenerator::builder(store, range(workers))
            .outage_horizon(horizon)
            .startup_wait(PATIENCE)
            .acquire()
            .unwrap(),
    )
}

/// Waits (bounded) until `issuer`'s generator issues: a holder just started on a loaded
/// machine may be between a late renewal and the next.
fn wait_until_issuing(issuer: &Issuer) -> u64 {
    let mut issued = None;
    wait_for_within(PATIENCE, "a holder issuing", || {
        issued = issuer.generator.next_id().ok();
        issued.is_some()
    });
    issued.unwrap().as_u64()
}

/// Waits (bounded) until `issuer` has had `more` renewals confirmed beyond what it had.
fn wait_for_renewals(issuer: &Issuer, more: u64) {
    let target = issuer.generator.lease_stats().renewals + more;
    wait_for_within(PATIENCE, "renewals", || {
        issuer.generator.lease_stats().renewals >= target
    });
}

/// Runs `sql` on `url`.
fn execute(url: &str, sql: &str) -> u64 {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client.execute(sql, &[]).unwrap()
}

/// Checks that two holders' IDs never meet: none shared, and on each worker number the
/// two holders' IDs lie in spans of time that do not overlap (one holder's tenure there
/// ended before the other's began). A holder that stopped may take another number later,
/// beside the other holder: that is no overlap.
fn assert_successor_after(before: &[u64], after: &[u64]) {
    let mut all = before.to_vec();
    all.extend_from_slice(after);
    assert_no_duplicates(&all);
    let span = |ids: &[u64], worker: u64| -> Option<(u64, u64)> {
        let times: Vec<u64> = ids
            .iter()
            .map(|&id| Layout::DEFAULT.decode(Id::try_from(id).unwrap()))
            .filter(|decoded| decoded.worker == worker)
            .map(|decoded| decoded.unix_ms)
            .collect();
        Some((*times.iter().min()?, *times.iter().max()?))
    };
    for worker in 0..32 {
        if let (Some(a), Some(b)) = (span(before, worker), span(after, worker)) {
            assert!(
                a.1 < b.0 || b.1 < a.0,
                "worker {worker}: one holder issued from {} to {} ms, the other from {} to {} ms",
                a.0,
                a.1,
                b.0,
                b.1
            );
        }
    }
}

/// Run by the other tests in a child process: `IDGEN_TEST_CHILD_STORE` is `<url>|<namespace>`.
#[test]
#[ignore = "a child process of the other tests"]
fn child_process() {
    let spec = std::env::var(leases::ENV_STORE).unwrap();
    let (url, namespace) = spec.split_once('|').unwrap();
    leases::child_main(connected(url, namespace));
}

#[test]
fn killed_holders_are_replaced_and_a_million_ids_hold_no_duplicate() {
    // Four processes on six numbers; four times one is SIGKILLed mid-issue and a
    // replacement started at once (one with its wall clock 2 s behind): it takes a spare
    // number, or a killed holder's once that holding ran out, after its mark.
    let server = PostgresServer::start("lease-kill");
    let (url, namespace) = (server.url(), namespace("kill"));
    store(&url, &namespace);
    let mut fleet = leases::ChildFleet {
        test_name: CHILD,
        store: format!("{url}|{namespace}"),
        range: "0-5",
        dir: leases::temp_dir("pg-lease-kill"),
        horizon: Duration::from_secs(4),
        started: 0,
    };
    let stop = fleet.stop_file();
    let mut running: Vec<_> = (0..4).map(|_| fleet.spawn(None)).collect();
    let watcher = connected(&url, &namespace);
    let mut taken = Vec::new();
    for (kill, faketime) in [(0usize, None), (1, Some("-2s")), (0, None), (2, None)] {
        let (_, replacement) = fleet.kill_and_replace(&mut running, kill, faketime, &watcher);
        taken.push(replacement);
    }
    let files: Vec<_> = (1..=fleet.started)
        .map(|n| fleet.dir.join(format!("ids-{n}")))
        .collect();
    let written = |files: &[PathBuf]| -> u64 {
        files
            .iter()
            .map(|file| fs::metadata(file).map_or(0, |meta| meta.len() / 8))
            .sum()
    };
    wait_for_within(PATIENCE * 2, "a million IDs", || {
        written(&files) >= 1_000_000
    });
    let count = finish_end_to_end("postgres", running, &files, &stop);
    println!("replacements took (worker, previous mark) {taken:?}; {count} IDs in all");
    assert!(count >= 1_000_000);
}

#[test]
fn a_database_stopped_past_the_ttl_lets_holders_issue_to_their_marks_then_resume_on_their_numbers()
{
    let server = PostgresServer::start("lease-stop");
    let (url, namespace) = (server.url(), namespace("stop"));
    store(&url, &namespace);
    let holders: Vec<Issuer> = (0..2)
        .map(|_| holder(connected(&url, &namespace), "0-3", Duration::from_secs(6)))
        .collect();
    for holder in &holders {
        wait_for_renewals(holder, 1);
    }
    let workers: Vec<u64> = holders.iter().map(|h| h.generator.worker()).collect();
    server.signal_all("STOP");
    let stopped_at = idgen::SystemClock.now_unix_ms();
    // No renewal can be confirmed from here on: each holder's mark is final until the end.
    let marks: Vec<u64> = holders
        .iter()
        .map(|h| h.generator.lease_stats().mark_unix_ms)
        .collect();
    // Past the TTL, the holders still issue (up to their marks).
    while idgen::SystemClock.now_unix_ms() < stopped_at + TTL.as_millis() as u64 + 500 {
        thread::sleep(Duration::from_millis(20));
    }
    for (holder, mark) in holders.iter().zip(&marks) {
        if idgen::SystemClock.now_unix_ms() + 50 < *mark {
            holder.generator.next_id().unwrap();
        }
    }
    let last_mark = *marks.iter().max().unwrap();
    while idgen::SystemClock.now_unix_ms() < last_mark + 1_000 {
        thread::sleep(Duration::from_millis(50));
    }
    for holder in &holders {
        let error = holder.generator.next_id().unwrap_err();
        assert!(matches!(error, Error::LeaseExpired { .. }), "{error:?}");
    }
    server.signal_all("CONT");
    let back_at = Instant::now();
    for holder in &holders {
        wait_for_within(PATIENCE, "a holder issuing again", || {
            holder.generator.next_id().is_ok()
        });
    }
    println!(
        "the holders issued again {:?} after the server resumed",
        back_at.elapsed()
    );
    let after: Vec<u64> = holders.iter().map(|h| h.generator.worker()).collect();
    assert_eq!(after, workers, "the numbers were taken back, not replaced");
    let mut all = Vec::new();
    for (holder, mark) in holders.into_iter().zip(marks) {
        let (ids, _) = holder.finish();
        // Nothing dated past the mark was issued while the server was stopped.
        let stopped: Vec<u64> = ids
            .iter()
            .map(|&id| unix_ms_of(id))
            .filter(|&ms| ms >= stopped_at && ms <= last_mark + 1_000)
            .collect();
        assert!(
            stopped.iter().all(|&ms| ms <= mark),
            "an ID past the mark {mark}"
        );
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
        all.extend(ids);
    }
    assert_no_duplicates(&all);
}

#[test]
fn a_server_crash_under_load_costs_no_number_and_no_duplicate() {
    let server = PostgresServer::start("lease-crash");
    let (url, namespace) = (server.url(), namespace("crash"));
    store(&url, &namespace);
    let mut fleet = leases::ChildFleet {
        test_name: CHILD,
        store: format!("{url}|{namespace}"),
        range: "0-3",
        dir: leases::temp_dir("pg-lease-crash"),
        // Rides through the crash and recovery.
        horizon: Duration::from_secs(20),
        started: 0,
    };
    let stop = fleet.stop_file();
    let running: Vec<_> = (0..3).map(|_| fleet.spawn(None)).collect();
    let files: Vec<_> = running.iter().map(|child| child.out.clone()).collect();
    let workers: Vec<u64> = running.iter().map(|child| child.worker).collect();
    for _ in 0..2 {
        for child in &running {
            child.wait_for_more_ids(5_000);
        }
        server.restart_immediate();
    }
    // Each child still holds the number it started with: none was lost (a loss fails the
    // child), and each issues after the crashes (a holding that ran out meanwhile, on a
    // loaded machine, is taken back at the next renewal).
    let watcher = connected(&url, &namespace);
    wait_for_within(PATIENCE, "every child's number held again", || {
        let survey = watcher.survey(&range("0-3")).unwrap();
        workers
            .iter()
            .all(|&worker| survey[worker as usize].state == idgen::lease::NumberState::Held)
    });
    finish_end_to_end("postgres crash", running, &files, &stop);
}

#[test]
fn a_row_deleted_under_a_live_holder_never_hands_its_number_over_early() {
    let server = PostgresServer::start("lease-delete");
    let (url, namespace) = (server.url(), namespace("delete"));
    store(&url, &namespace);
    let first = holder(connected(&url, &namespace), "0-0", Duration::from_secs(4));
    wait_for_renewals(&first, 1);
    let deleted = execute(
        &url,
        &format!("DELETE FROM idgen_leases WHERE namespace = '{namespace}' AND worker = 0"),
    );
    assert_eq!(deleted, 1);
    // Whoever takes number 0 next (a newcomer, or the holder itself after its renewal
    // found the row gone) finds its mark unknown and waits a horizon.
    let second = holder(connected(&url, &namespace), "0-0", Duration::from_secs(4));
    wait_until_issuing(&second);
    let first_stats = first.generator.lease_stats();
    let (first_ids, _) = first.finish();
    let (second_ids, _) = second.finish();
    println!(
        "the first holder: {:?}; {} and {} IDs",
        first_stats.state,
        first_ids.len(),
        second_ids.len()
    );
    assert_successor_after(&first_ids, &second_ids);
}

/// After a restore or failover under `first`, a live holder: it stops; no process takes a
/// number until the restore step (with the fleet's 4 s horizon); then a new holder takes
/// one and issues after every ID of the first.
fn the_holder_stops_and_numbers_wait_for_the_restore_step(
    url: &str,
    namespace: &str,
    first: Issuer,
) {
    wait_for_within(
        PATIENCE,
        "the holder to find the store went back and stop",
        || {
            first.generator.lease_stats().state != LeaseState::Valid
                && first.generator.next_id().is_err()
        },
    );
    // (With the fleet's horizon: a process records its own before it asks for a number.)
    let error = LeasedGenerator::builder(connected(url, namespace), range("0-1"))
        .outage_horizon(Duration::from_secs(4))
        .startup_wait(Duration::ZERO)
        .acquire()
        .unwrap_err();
    assert!(
        matches!(error, Error::LeaseStoreRestored { .. }),
        "{error:?}"
    );
    let raised = connected(url, namespace)
        .with_outage_horizon(Duration::from_secs(4))
        .init_after_restore(0..=0, 0..=31, idgen::SystemClock.now_unix_ms())
        .unwrap();
    assert!(raised >= 32, "{raised}");
    let second = holder(connected(url, namespace), "0-1", Duration::from_secs(4));
    wait_until_issuing(&second);
    let (first_ids, _) = first.finish();
    let (second_ids, _) = second.finish();
    assert_successor_after(&first_ids, &second_ids);
}

#[test]
fn tables_restored_from_an_older_dump_stop_the_holder_and_refuse_numbers_until_the_restore_step() {
    let server = PostgresServer::start("lease-dump");
    let (url, namespace) = (server.url(), namespace("dump"));
    store(&url, &namespace);
    let first = holder(connected(&url, &namespace), "0-1", Duration::from_secs(4));
    wait_for_renewals(&first, 1);
    let dump = server.dump(&["idgen_leases", "idgen_lease_namespaces"], "leases.sql");
    // Marks written after the dump are the ones a restore loses.
    wait_for_renewals(&first, 3);
    server.run_sql_file(&dump);
    the_holder_stops_and_numbers_wait_for_the_restore_step(&url, &namespace, first);
}

#[test]
fn a_server_clock_step_ends_or_stretches_holdings_and_never_lets_two_holders_meet() {
    // libfaketime on the server alone: its clock_timestamp() moves with the file, every
    // holder's clocks stay true.
    let library = fs::read_dir("/usr/lib")
        .unwrap()
        .filter_map(|entry| Some(entry.ok()?.path().join("faketime/libfaketime.so.1")))
        .find(|path| path.exists())
        .expect("no /usr/lib/*/faketime/libfaketime.so.1: Debian's libfaketime is needed");
    let library = library.display().to_string();
    let offset = leases::temp_dir("pg-clock").join("offset");
    fs::write(&offset, "+0\n").unwrap();
    let offset_text = offset.display().to_string();
    let server = PostgresServer::start_with(
        "lease-clock",
        &[
            ("LD_PRELOAD", library.as_str()),
            ("FAKETIME_TIMESTAMP_FILE", &offset_text),
            ("FAKETIME_NO_CACHE", "1"),
            ("DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    let (url, namespace) = (server.url(), namespace("clock"));
    store(&url, &namespace);
    let server_now = || -> f64 {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let row = client
            .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
            .unwrap();
        row.get::<_, f64>(0) * 1_000.0
    };
    // A holder between two renewals (a claim renewed by hand, so that no keeper renews it
    // in the window the test looks at), its mark 3 s ahead.
    let store = connected(&url, &namespace);
    let mut first = store.acquire(&range("0-0")).unwrap();
    let mark = idgen::SystemClock.now_unix_ms() + 3_000;
    first.renew(mark).unwrap();

    // Forward an hour: the holding ends at once on the server's clock. A newcomer takes
    // the number and waits past the holder's mark; the holder's next renewal finds its
    // token gone and stops.
    fs::write(&offset, "+3600\n").unwrap();
    let skew = server_now() - idgen::SystemClock.now_unix_ms() as f64;
    assert!(
        skew > 3_500_000.0,
        "the server's clock did not move: {skew} ms"
    );
    let second = holder(connected(&url, &namespace), "0-0", TTL);
    let stats = second.generator.lease_stats();
    assert_eq!(stats.previous_mark_unix_ms, Some(mark));
    let id = wait_until_issuing(&second);
    assert!(unix_ms_of(id) > mark);
    let error = first.renew(mark + 3_000).unwrap_err();
    assert!(matches!(error, Error::LeaseLost { .. }), "{error:?}");
    second.finish();

    // Back an hour, after a holding was written: it ends an hour late on the server's
    // clock, so an abandoned number stays taken longer, never shorter.
    let store = connected(&url, &namespace);
    let mut abandoned = store.acquire(&range("5-5")).unwrap();
    abandoned
        .renew(idgen::SystemClock.now_unix_ms() + 1_000)
        .unwrap();
    drop(abandoned);
    fs::write(&offset, "+0\n").unwrap();
    let dropped_at = Instant::now();
    while dropped_at.elapsed() < TTL + Duration::from_secs(1) {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        store.survey(&range("5-5")).unwrap()[0].state,
        idgen::lease::NumberState::Held,
        "a TTL and a second later on the holder's clock, still within the holding on the server's"
    );
}

#[test]
fn a_failover_to_a_standby_that_was_behind_stops_the_holder_and_refuses_numbers_until_the_restore_step()
 {
    // An asynchronous standby streaming through a proxy the test cuts: the marks the
    // primary confirms after the cut never reach it. The primary is then lost and the
    // standby promoted (a new timeline). Holders connect to whichever of the two takes
    // writes.
    let primary = PostgresServer::start("failover-primary");
    let proxy = postgres_server::CuttableProxy::start(primary.port);
    let namespace = namespace("failover");
    store(&primary.url(), &namespace);
    let standby = PostgresServer::standby_of(proxy.port, "failover-standby");
    let url = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=postgres \
         target_session_attrs=read-write connect_timeout=2",
        primary.port, standby.port
    );
    let first = holder(connected(&url, &namespace), "0-1", Duration::from_secs(4));
    wait_for_renewals(&first, 1);
    let replicated = |sql: &str| -> i64 {
        let mut client = postgres::Client::connect(&standby.url(), postgres::NoTls).unwrap();
        client.query_one(sql, &[]).unwrap().get(0)
    };
    let held = format!(
        "SELECT count(*) FROM idgen_leases WHERE namespace = '{namespace}' AND token IS NOT NULL"
    );
    wait_for_within(PATIENCE, "the holding to reach the standby", || {
        replicated(&held) == 1
    });
    proxy.cut();
    wait_for_renewals(&first, 3);
    primary.stop_immediate();
    standby.promote();
    the_holder_stops_and_numbers_wait_for_the_restore_step(&url, &namespace, first);
}

#[test]
fn rows_whose_history_is_gone_are_waited_for_once_and_never_trusted() {
    let server = PostgresServer::start("lease-remade");
    let (url, namespace) = (server.url(), namespace("remade"));
    let store = store(&url, &namespace);
    // A row deleted: its next taker's mark is unknown; given back with the mark it
    // inferred, the row keeps that mark, so the next taker waits for it and no longer.
    execute(
        &url,
        &format!("DELETE FROM idgen_leases WHERE namespace = '{namespace}' AND worker = 7"),
    );
    let mut taker = store.acquire(&range("7-7")).unwrap();
    assert!(taker.previous_mark_unknown());
    let inferred = idgen::SystemClock.now_unix_ms() + 2_000;
    taker.release(inferred).unwrap();
    let next = store.acquire(&range("7-7")).unwrap();
    assert!(!next.previous_mark_unknown());
    assert_eq!(next.previous_mark_unix_ms(), Some(inferred));
    drop(next);

    // The namespace's row deleted and every mark rolled back by hand (only the leases
    // table came back from a backup): `init` does not trust the rows it finds.
    execute(
        &url,
        &format!("DELETE FROM idgen_lease_namespaces WHERE namespace = '{namespace}'"),
    );
    execute(
        &url,
        &format!("UPDATE idgen_leases SET mark_ms = 0 WHERE namespace = '{namespace}'"),
    );
    let before = idgen::SystemClock.now_unix_ms();
    let horizon = Duration::from_secs(5);
    let initialised = connected(&url, &namespace).with_outage_horizon(horizon);
    initialised.init(0..=0, 0..=31, before).unwrap();
    let after = initialised.acquire(&range("3-3")).unwrap();
    assert!(
        after.previous_mark_unix_ms().unwrap() >= before + 5_000,
        "{:?} vs {before}",
        after.previous_mark_unix_ms()
    );
}

/// The namespace's state, as an operator reads it.
fn namespace_state(url: &str, namespace: &str) -> String {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client
        .query_one(
            "SELECT state FROM public.idgen_lease_namespaces WHERE namespace = $1",
            &[&namespace],
        )
        .unwrap()
        .get(0)
}

/// When the server at `url` started, in Unix milliseconds (its own clock).
fn postmaster_start_unix_ms(url: &str) -> u64 {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let ms: f64 = client
        .query_one(
            "SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000)::float8",
            &[],
        )
        .unwrap()
        .get(0);
    ms as u64
}

/// After a base-backup restore under `first` (with `waiter`'s outcome, if one waited): the
/// namespace is recorded as restored, and after the restore step a new holder issues after
/// every ID of the first.
fn after_the_restore_step(url: &str, namespace: &str, first: Issuer) {
    let state = namespace_state(url, namespace);
    assert!(state.contains("restore-found"), "not recorded: {state}");
    connected(url, namespace)
        .with_outage_horizon(Duration::from_secs(4))
        .init_after_restore(0..=0, 0..=31, idgen::SystemClock.now_unix_ms())
        .unwrap();
    // (The first holder takes a number again too, now that the step ran: two numbers.)
    let second = holder(connected(url, namespace), "0-1", Duration::from_secs(4));
    wait_until_issuing(&second);
    let (first_ids, _) = first.finish();
    let (second_ids, _) = second.finish();
    assert!(!first_ids.is_empty());
    assert_successor_after(&first_ids, &second_ids);
}

/// A base backup taken while worker 0 was free, started as it was (no `recovery.signal`:
/// crash recovery on the same timeline, the same system identifier and table) while a holder
/// issues as worker 0: the holder's next renewal finds its row older than its own last
/// write, records the restore and stops; a process started as the server comes back (no
/// history of its own) waits through the gate after the server's start and is refused,
/// never taking worker 0 from the restored row. Before the fix, it took it while the
/// holder went on issuing (481,808 IDs issued by both in the issue's run).
#[test]
fn a_base_backup_started_as_it_was_stops_the_holder_and_a_new_process_takes_none_of_its_numbers() {
    let server = PostgresServer::start("lease-basebackup");
    let (url, namespace) = (server.url(), namespace("basebackup"));
    store(&url, &namespace);
    let backup = server.base_backup("backup");
    let first = holder(connected(&url, &namespace), "0-0", Duration::from_secs(4));
    wait_until_issuing(&first);
    wait_for_renewals(&first, 2);
    server.restore_base_backup(&backup);
    let back_at = Instant::now();
    let newcomer = {
        let (url, namespace) = (url.clone(), namespace.clone());
        thread::spawn(move || {
            LeasedGenerator::builder(connected(&url, &namespace), range("0-0"))
                .outage_horizon(Duration::from_secs(4))
                .startup_wait(PATIENCE)
                .acquire()
                .map(|generator| generator.worker())
        })
    };
    // What the issue bounds: the restore is recorded (and the holder refused) within a
    // renewal interval and a request's wait of the server answering again. Measured, not
    // asserted (a loaded machine stretches it); the test asserts that it happens.
    wait_for_within(PATIENCE, "the holder to record the restore", || {
        namespace_state(&url, &namespace).contains("restore-found")
    });
    println!(
        "the restore was recorded {:?} after the server answered again (TTL {TTL:?}, \
         renewals every {:?}, a request waits at most 12 s)",
        back_at.elapsed(),
        TTL / 3
    );
    wait_for_within(PATIENCE, "the holder to stop", || {
        first.generator.lease_stats().state != LeaseState::Valid
            && first.generator.next_id().is_err()
    });
    let taken = newcomer.join().unwrap();
    assert!(
        matches!(taken, Err(Error::LeaseStoreRestored { .. })),
        "the new process: {taken:?}"
    );
    after_the_restore_step(&url, &namespace, first);
}

/// As above with a process that waits for a number (the range full: the holder has it)
/// through the restore, as `serve --wait-for-number` does: it never takes worker 0 while the
/// holder issues, and is refused once the restore is recorded (or, on a machine loaded so
/// far that the holder's renewal comes late, takes it only past the gate, which every
/// forgotten holder's mark has passed: no ID shared either way). Before the fix, it took the
/// number from the restored row (24,944 IDs issued by both in one of the issue's runs).
#[test]
fn a_process_waiting_for_a_number_through_a_base_backup_restore_takes_none_of_a_live_holders() {
    let server = PostgresServer::start("lease-basebackup-wait");
    let (url, namespace) = (server.url(), namespace("basebackup-wait"));
    store(&url, &namespace);
    let backup = server.base_backup("backup");
    let first = holder(connected(&url, &namespace), "0-0", Duration::from_secs(4));
    wait_until_issuing(&first);
    wait_for_renewals(&first, 1);
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let waiter = {
        let (url, namespace, tries) = (url.clone(), namespace.clone(), tries.clone());
        thread::spawn(move || {
            // One store for the whole wait: the process keeps its history across tries.
            let store = std::sync::Arc::new(connected(&url, &namespace));
            let deadline = Instant::now() + PATIENCE * 2;
            loop {
                tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let outcome = LeasedGenerator::builder(std::sync::Arc::clone(&store), range("0-0"))
                    .outage_horizon(Duration::from_secs(4))
                    .startup_wait(PATIENCE)
                    .acquire();
                match outcome {
                    Err(Error::LeaseRangeFull { .. } | Error::LeaseStore { .. })
                        if Instant::now() < deadline =>
                    {
                        thread::sleep(Duration::from_millis(50));
                    }
                    other => return other.map(Issuer::start),
                }
            }
        })
    };
    // The waiter has found the range full at least twice before the restore.
    wait_for_within(PATIENCE, "the waiter to wait", || {
        tries.load(std::sync::atomic::Ordering::SeqCst) >= 2
    });
    // A renewal of the holder's just before the restore; or the waiter took worker 0
    // already (a keeper starved past the TTL on a loaded machine: an ordinary handover,
    // after which the holder renews no more).
    let target = first.generator.lease_stats().renewals + 1;
    wait_for_within(PATIENCE, "a renewal, or the waiter's take", || {
        first.generator.lease_stats().renewals >= target || waiter.is_finished()
    });
    server.restore_base_backup(&backup);
    wait_for_within(PATIENCE, "the holder to find the restore and stop", || {
        first.generator.lease_stats().state != LeaseState::Valid
            && first.generator.next_id().is_err()
    });
    match waiter.join().unwrap() {
        Err(Error::LeaseStoreRestored { .. }) => after_the_restore_step(&url, &namespace, first),
        Ok(taken) => {
            // Seen once in 35 runs beside two CPU burners: the waiter took worker 0 before
            // the restore, in an ordinary handover (the holder's keeper starved past the
            // TTL). The waiter may also take it after the restore, once the gate is open.
            // What holds either way: every holding from before the restore issues only up
            // to its mark, at most the 4 s horizon past its last write, which came before
            // the server stopped; a take after the restore issues only once the gate (the
            // largest recorded horizon and 24 s past the server's start) is open. So no ID
            // of either process is dated from 4 s to 24 s past the server's start (the
            // original bug: the waiter issuing at once on the restored row, while the
            // holder still issued), none is issued twice, and the restore is recorded.
            wait_for_within(PATIENCE, "a holder to record the restore", || {
                namespace_state(&url, &namespace).contains("restore-found")
            });
            let start_ms = postmaster_start_unix_ms(&url);
            // The mark the waiter's number came with: the holder's (a few seconds old) in a
            // handover; the restored row's, from `init` an hour ago, in a take after the
            // restore, which must wait for the gate.
            let previous = taken.generator.lease_stats().previous_mark_unix_ms;
            let from_restored_row = previous.is_none_or(|mark| mark + 600_000 < start_ms);
            let (taken_ids, _) = taken.finish();
            let (first_ids, _) = first.finish();
            for (who, ids) in [("holder", &first_ids), ("waiter", &taken_ids)] {
                let inside: Vec<u64> = ids
                    .iter()
                    .map(|&id| unix_ms_of(id))
                    .filter(|ms| (start_ms + 4_000..start_ms + 24_000).contains(ms))
                    .collect();
                assert!(
                    inside.is_empty(),
                    "the {who} issued {} IDs between the restored server's start + 4 s and the \
                     gate ({start_ms} + 24 s), the first at {}",
                    inside.len(),
                    inside[0]
                );
            }
            let first_taken = taken_ids.iter().map(|&id| unix_ms_of(id)).min();
            assert!(
                !from_restored_row || first_taken.is_none_or(|ms| ms >= start_ms + 24_000),
                "the waiter took worker 0 from the restored row (previous mark {previous:?}) \
                 and issued at {first_taken:?}, before the gate ({start_ms} + 24 s)"
            );
            println!(
                "the waiter took worker 0 (server started at {start_ms}; the waiter issued \
                 from {:?}; the holder's last ID at {:?})",
                taken_ids.iter().map(|&id| unix_ms_of(id)).min(),
                first_ids.iter().map(|&id| unix_ms_of(id)).max()
            );
            let mut all = first_ids;
            all.extend_from_slice(&taken_ids);
            assert_no_duplicates(&all);
        }
        Err(error) => panic!("the waiter: {error:?}"),
    }
}

/// Many threads of one process on one store (as `serve` with its lease API): renewals and
/// surveys interleave on its connection, each renewal raising the process's high-water
/// mark of the history while a survey's read of it is on its way back. None of that is a
/// restore: the namespace stays usable and every renewal succeeds.
#[test]
fn renewals_and_surveys_of_many_threads_on_one_store_find_no_restore() {
    let (url, namespace) = (
        postgres_server::postgres_url(),
        namespace("one-store-threads"),
    );
    let store = std::sync::Arc::new(store(&url, &namespace));
    let claims: Vec<_> = (0..16)
        .map(|_| store.acquire(&range("0-31")).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    thread::scope(|scope| {
        for mut claim in claims {
            scope.spawn(move || {
                while Instant::now() < deadline {
                    let mark = idgen::SystemClock.now_unix_ms() + 3_000;
                    claim.renew(mark).unwrap();
                }
                claim.release(0).unwrap();
            });
        }
        for _ in 0..16 {
            let store = std::sync::Arc::clone(&store);
            scope.spawn(move || {
                while Instant::now() < deadline {
                    store.survey(&range("0-31")).unwrap();
                }
            });
        }
    });
    let state = namespace_state(&url, &namespace);
    assert!(!state.contains("restore-found"), "{state}");
}
