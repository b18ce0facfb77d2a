//! Worker-number leases on etcd (feature `etcd`): a real server, real child processes,
//! SIGKILL, and an etcd stopped with SIGSTOP under a running holder.
//!
//! Most tests use the server `.ci/test` starts (`IDGEN_ETCD_ENDPOINTS`), each under a
//! namespace of its own; the outage test starts a private server, because it stops it.

#![cfg(feature = "etcd")]

#[path = "common/leases.rs"]
mod leases;

use std::collections::BTreeSet;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen::lease::{EtcdStore, LeaseState, LeaseStore, LeasedGenerator, WorkerRange};
use idgen::{Clock, Error, Id, Layout};
use leases::{ChildSpec, EtcdServer, Issuer, finish_end_to_end, max_id, temp_dir, wait_for};

const CHILD: &str = "child_process";

fn endpoints() -> String {
    std::env::var("IDGEN_ETCD_ENDPOINTS").expect(
        "IDGEN_ETCD_ENDPOINTS is not set: run the tests through .ci/test, which starts etcd",
    )
}

/// A namespace no other test (or earlier run) uses.
fn namespace(test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("/idgen-test/{test}-{}-{nanos}", std::process::id())
}

/// A store with a 2 s TTL on an initialised namespace (`init` is idempotent).
fn store(endpoints: &str, namespace: &str) -> EtcdStore {
    let store = connected(endpoints, namespace);
    // Marks a TTL ahead of an hour ago: already passed, so nothing waits for them.
    let an_hour_ago = idgen::SystemClock.now_unix_ms() - 3_600_000;
    store.init(0..=0, 0..=31, an_hour_ago).unwrap();
    store
}

/// A store with a 2 s TTL on a namespace as it is (for one initialised already: `init`
/// writes a mark per number, which many stores at once need not repeat).
fn connected(endpoints: &str, namespace: &str) -> EtcdStore {
    EtcdStore::connect(&endpoints.split(',').collect::<Vec<_>>(), namespace)
        .unwrap()
        .with_ttl(Duration::from_secs(2))
        .unwrap()
}

fn range(text: &str) -> WorkerRange {
    WorkerRange::parse(0, text).unwrap()
}

/// Waits (bounded) until no live holder has `worker` of datacenter 0: its etcd lease ran
/// out, with nothing renewing it.
fn wait_until_free(store: &EtcdStore, worker: u64) {
    let range = range(&format!("{worker}-{worker}"));
    wait_for(&format!("worker {worker}'s lease to run out"), || {
        let record = &store.survey(&range).unwrap()[0];
        record.state != idgen::lease::NumberState::Held
    });
}

fn unix_ms_of(id: u64) -> u64 {
    Layout::DEFAULT.decode(Id::try_from(id).unwrap()).unix_ms
}

/// Run by the other tests in a child process: `IDGEN_TEST_CHILD_STORE` is
/// `<endpoints>|<namespace>`.
#[test]
#[ignore = "a child process of the other tests"]
fn child_process() {
    let spec = std::env::var(leases::ENV_STORE).unwrap();
    let (endpoints, namespace) = spec.split_once('|').unwrap();
    // The parent initialised the namespace: one `init` per test, not one per child.
    leases::child_main(connected(endpoints, namespace));
}

/// Threads sharing one store take numbers at once: an answer to a request sent earlier can
/// arrive after an answer at a newer revision, which is no sign of a restore (the check
/// that a store did not go back compares with what was seen before a request was sent).
/// The fleet bench, 8 threads a store, was refused as "restored" before that was so.
#[test]
fn threads_sharing_one_store_take_every_number_at_once_and_none_is_refused_as_restored() {
    let (endpoints, namespace) = (endpoints(), namespace("shared"));
    let store = store(&endpoints, &namespace);
    let (threads, each) = (8, 4);
    let barrier = Barrier::new(threads);
    let claims: Vec<_> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    (0..each)
                        .map(|_| store.acquire(&range("0-31")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut workers = BTreeSet::new();
    let mut held = Vec::new();
    for claim in claims {
        let claim = claim.unwrap_or_else(|error| panic!("an acquire failed: {error}"));
        assert!(
            workers.insert(claim.worker()),
            "worker {} twice",
            claim.worker()
        );
        held.push(claim);
    }
    assert_eq!(workers, (0..=31).collect());
    for mut claim in held {
        claim.release(0).unwrap();
    }
}

#[test]
fn a_killed_holder_keeps_its_number_until_the_ttl_ends_then_the_next_issues_above_its_mark() {
    let (endpoints, namespace) = (endpoints(), namespace("killed"));
    let dir = temp_dir("etcd-killed");
    store(&endpoints, &namespace);
    let child = ChildSpec {
        test_name: CHILD,
        store: format!("{endpoints}|{namespace}"),
        range: "0-0",
        out: dir.join("killed.ids"),
        stop_file: dir.join("stop"),
        faketime: None,
        startup_wait: Duration::from_secs(5),
        horizon: None,
        expired_is_fatal: true,
    }
    .spawn();
    child.wait_for_more_ids(1_000);
    let out = child.out.clone();
    child.kill();
    let killed_at = Instant::now();
    let store = store(&endpoints, &namespace);
    // Still taken: the etcd lease runs until its TTL (2 s) is over.
    let error = store.acquire(&range("0-0")).unwrap_err();
    assert!(
        matches!(error, Error::LeaseRangeFull { held: 1, .. }),
        "{error:?}"
    );
    let claim = loop {
        match store.acquire(&range("0-0")) {
            Ok(claim) => break claim,
            Err(Error::LeaseRangeFull { .. }) if killed_at.elapsed() < Duration::from_secs(30) => {
                thread::sleep(Duration::from_millis(50))
            }
            Err(error) => panic!("{error}"),
        }
    };
    let free_after = killed_at.elapsed();
    println!("SIGKILLed holder's number free again after {free_after:?} (TTL 2 s)");
    assert!(free_after >= Duration::from_millis(1_000), "{free_after:?}");
    let their_max = max_id(&out).expect("the child wrote IDs");
    let mark = claim.previous_mark_unix_ms().unwrap();
    assert!(mark >= unix_ms_of(their_max));
    drop(claim);
    // The claim above was dropped unreleased: the number is held until its lease ends.
    let next = LeasedGenerator::builder(store, range("0-1"))
        .acquire()
        .unwrap();
    let id = next.next_id().unwrap();
    if next.worker() == 0 {
        assert!(id.as_u64() > their_max);
    }
    next.release().unwrap();
}

#[test]
fn holders_ride_through_an_etcd_outage_within_the_horizon_and_stop_at_their_marks_past_it() {
    // A private etcd, stopped with SIGSTOP under three holders issuing: TTL 2 s, horizon
    // 30 s. First a 20 s outage: every call is answered. Then one past the horizon: each
    // holder refuses from its mark on, and issues again soon after etcd returns.
    let server = EtcdServer::start("outage");
    let holders: Vec<Issuer> = (0..3)
        .map(|_| {
            let store = store(&server.endpoint, "/idgen-test/outage");
            Issuer::start(
                LeasedGenerator::builder(store, range("0-5"))
                    .outage_horizon(Duration::from_secs(30))
                    .acquire()
                    .unwrap(),
            )
        })
        .collect();
    let renewals = |holders: &[Issuer]| -> Vec<u64> {
        holders
            .iter()
            .map(|h| h.generator.lease_stats().renewals)
            .collect()
    };
    wait_for("a renewal by every holder before the outage", || {
        renewals(&holders).iter().all(|&n| n >= 1)
    });

    server.signal("STOP");
    thread::sleep(Duration::from_secs(20));
    for holder in &holders {
        let stats = holder.generator.lease_stats();
        assert_eq!(stats.state, LeaseState::Outage, "{stats:?}");
        assert!(stats.valid_for_ms > 5_000, "{stats:?}");
        holder.generator.next_id().unwrap();
    }
    server.signal("CONT");
    wait_for("every holder valid again after the outage", || {
        holders
            .iter()
            .all(|h| h.generator.lease_stats().state == LeaseState::Valid)
    });
    println!(
        "20 s outage: {:?}",
        holders
            .iter()
            .map(|h| h.generator.lease_stats())
            .map(|s| (s.worker, s.outages, s.renewal_failures, s.reacquisitions))
            .collect::<Vec<_>>()
    );

    // Past the horizon, from marks every holder wrote after etcd came back.
    let since = renewals(&holders);
    wait_for("a renewal by every holder after the outage", || {
        renewals(&holders)
            .iter()
            .zip(&since)
            .all(|(now, then)| now > then)
    });
    let marks: Vec<u64> = holders
        .iter()
        .map(|h| h.generator.lease_stats().mark_unix_ms)
        .collect();
    server.signal("STOP");
    let stopped_at = idgen::SystemClock.now_unix_ms();
    let last_mark = *marks.iter().max().unwrap();
    while idgen::SystemClock.now_unix_ms() < last_mark + 2_000 {
        thread::sleep(Duration::from_millis(100));
    }
    for holder in &holders {
        assert_eq!(
            holder.generator.lease_stats().state,
            LeaseState::Expired,
            "past the mark"
        );
    }
    server.signal("CONT");
    let back_at = Instant::now();
    let back_unix_ms = idgen::SystemClock.now_unix_ms();
    let mut recovered = Vec::new();
    for holder in &holders {
        // Bounded: a holder that never issues again fails here. How soon it does is
        // printed, not asserted (a loaded machine slows it).
        let id = loop {
            match holder.generator.next_id() {
                Ok(id) => break id,
                Err(Error::LeaseExpired { .. }) if back_at.elapsed() < Duration::from_secs(60) => {
                    thread::sleep(Duration::from_millis(10))
                }
                Err(error) => panic!("never recovered: {error}"),
            }
        };
        recovered.push(back_at.elapsed());
        assert!(holder.generator.decode(id).unix_ms > stopped_at);
    }
    println!(
        "outage past the horizon ({} ms): recovered {recovered:?} after etcd returned",
        idgen::SystemClock.now_unix_ms() - stopped_at
    );

    let mut all = Vec::new();
    for (holder, mark) in holders.into_iter().zip(marks) {
        let (ids, refusals) = holder.finish();
        // Refused only in the second outage, from the mark on (the first outage refused
        // nothing); never an ID past the mark while it was cut off.
        for (at, error) in &refusals {
            assert!(matches!(error, Error::LeaseExpired { .. }), "{error:?}");
            assert!(*at > mark, "refused at {at}, before the mark {mark}");
        }
        let cut_off: Vec<u64> = ids
            .iter()
            .map(|&id| unix_ms_of(id))
            .filter(|&ms| ms > stopped_at && ms < back_unix_ms)
            .collect();
        assert!(cut_off.iter().all(|&ms| ms <= mark), "an ID past the mark");
        println!(
            "holder: {} IDs, {} refusals, issuing up to {} ms after the second stop",
            ids.len(),
            refusals.len(),
            cut_off.iter().max().map_or(0, |ms| ms - stopped_at)
        );
        all.extend(ids);
    }
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count, "duplicates");
}

#[test]
fn killed_and_restarted_processes_never_issue_a_duplicate() {
    // Four processes on six worker numbers; three times one is SIGKILLed and a
    // replacement started (one of them with its wall clock 2 s behind). A killed holder's
    // number stays taken until its TTL ends, so replacements take the spare numbers and,
    // later, the killed ones, each starting after the mark its previous holder left.
    let (endpoints, namespace) = (endpoints(), namespace("e2e"));
    store(&endpoints, &namespace);
    let mut fleet = leases::ChildFleet {
        test_name: CHILD,
        store: format!("{endpoints}|{namespace}"),
        range: "0-5",
        dir: temp_dir("e2e-etcd"),
        horizon: Duration::from_secs(4),
        started: 0,
    };
    let stop = fleet.stop_file();
    let mut running: Vec<_> = (0..4).map(|_| fleet.spawn(None)).collect();
    let (mut taken, mut killed) = (Vec::new(), Vec::new());
    let watcher = connected(&endpoints, &namespace);
    for (kill, faketime) in [(0usize, None), (1, Some("-2s")), (0, None)] {
        let (victim, replacement) = fleet.kill_and_replace(&mut running, kill, faketime, &watcher);
        killed.push(victim);
        taken.push(replacement);
    }
    let files: Vec<_> = (1..=fleet.started)
        .map(|n| fleet.dir.join(format!("ids-{n}")))
        .collect();
    finish_end_to_end("etcd", running, &files, &stop);
    println!("replacements took (worker, previous mark) {taken:?}; killed {killed:?}");
    // The spares went to the first two; the last took a killed holder's number, and issued
    // only after the mark that holder left.
    let (worker, mark) = *taken.last().unwrap();
    assert!(killed.contains(&worker), "{taken:?} {killed:?}");
    let first = leases::read_ids(&files[files.len() - 1..])
        .into_iter()
        .map(unix_ms_of)
        .min()
        .unwrap();
    assert!(
        first > mark.unwrap(),
        "issued at {first}, the mark was {mark:?}"
    );
}

#[test]
fn bad_endpoints_namespaces_ttls_and_marks_get_clear_errors() {
    let started = Instant::now();
    let error = EtcdStore::connect(&["127.0.0.1:1"], "/idgen").unwrap_err();
    assert!(matches!(error, Error::LeaseStore { .. }), "{error:?}");
    assert!(error.to_string().contains("unreachable"), "{error}");
    // A bound on a hang, not a speed: an unreachable endpoint is an error, not a wait.
    assert!(started.elapsed() < Duration::from_secs(60));
    for bad in ["", "/", "has space", "a//b", "ünï"] {
        let error = EtcdStore::connect(&[endpoints()], bad).unwrap_err();
        assert!(
            matches!(error, Error::LeaseConfig { .. }),
            "{bad:?}: {error:?}"
        );
    }
    let empty: [&str; 0] = [];
    assert!(matches!(
        EtcdStore::connect(&empty, "/idgen"),
        Err(Error::LeaseConfig { .. })
    ));
    let namespace = namespace("bad");
    for ttl in [
        Duration::from_millis(1_500),
        Duration::from_millis(2_500),
        Duration::ZERO,
        Duration::from_secs(24 * 60 * 60 + 1),
        Duration::MAX,
    ] {
        assert!(store(&endpoints(), &namespace).with_ttl(ttl).is_err());
    }
    // A mark that is not a number: the number is never reused, the next one is taken.
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", endpoints()))
        .args(["put", &format!("{namespace}/dc/0/mark/0"), "not-a-mark"])
        .status()
        .expect("etcdctl (Debian's etcd-client) is needed");
    assert!(status.success());
    let store = store(&endpoints(), &namespace);
    let error = store.acquire(&range("0-0")).unwrap_err();
    assert!(error.to_string().contains("not-a-mark"), "{error}");
    assert_eq!(store.acquire(&range("0-1")).unwrap().worker(), 1);
    // From inside a Tokio runtime the blocking store refuses instead of blocking it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let error = runtime.block_on(async { store.acquire(&range("2-3")).unwrap_err() });
    assert!(matches!(error, Error::LeaseConfig { .. }), "{error:?}");
}

#[test]
fn dropping_a_store_or_a_leased_generator_inside_a_tokio_runtime_never_panics() {
    let namespace = namespace("tokio-drop");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // acquire refuses inside the runtime with its clear error, and the store it consumed is
    // dropped there too.
    let inside_store = store(&endpoints(), &namespace);
    let error = runtime
        .block_on(async { LeasedGenerator::builder(inside_store, range("0-3")).acquire() })
        .unwrap_err();
    assert!(matches!(error, Error::LeaseConfig { .. }), "{error:?}");
    assert!(error.to_string().contains("Tokio runtime"), "{error}");
    // A leased generator built outside, used and dropped inside (an async service's state
    // going out of scope): it cannot release from there, and says so, but does not panic.
    let generator = LeasedGenerator::builder(store(&endpoints(), &namespace), range("0-3"))
        .acquire()
        .unwrap();
    runtime.block_on(async move {
        generator.next_id().unwrap();
        drop(generator);
    });
}

#[test]
fn a_deleted_mark_makes_the_next_holder_wait_a_horizon() {
    let namespace = namespace("deleted-mark");
    let store = store(&endpoints(), &namespace);
    let mut first = store.acquire(&range("0-0")).unwrap();
    assert!(!first.previous_mark_unknown());
    first.release(idgen::SystemClock.now_unix_ms()).unwrap();
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", endpoints()))
        .args(["del", &format!("{namespace}/dc/0/mark/0")])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("etcdctl (Debian's etcd-client) is needed");
    assert!(status.success());
    // The history is lost: the leased generator takes the previous mark to be one outage
    // horizon (3 s here) after it took the number, since a holder cut off from etcd may
    // issue that long; it waits that out, and is then valid at once.
    let started = Instant::now();
    let before = idgen::SystemClock.now_unix_ms();
    let generator = LeasedGenerator::builder(store, range("0-0"))
        .outage_horizon(Duration::from_secs(3))
        .acquire()
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(2_900),
        "{:?}",
        started.elapsed()
    );
    let previous = generator.lease_stats().previous_mark_unix_ms.unwrap();
    assert!(previous >= before + 3_000, "{previous} vs {before}");
    generator.next_id().unwrap();
    generator.release().unwrap();
}

#[test]
fn a_number_only_looked_at_after_the_lease_ran_out_is_still_taken_back() {
    // After an outage, another process scans the range: it takes A's number, finds its
    // mark ahead, and gives it back without using it. That must not cost A its number.
    let namespace = namespace("looked-at");
    let a_store = store(&endpoints(), &namespace);
    let mut a = a_store.acquire(&range("0-0")).unwrap();
    let now = idgen::SystemClock.now_unix_ms();
    a.renew(now + 60_000).unwrap();
    wait_until_free(&a_store, 0);
    let error = LeasedGenerator::builder(store(&endpoints(), &namespace), range("0-0"))
        .outage_horizon(Duration::from_secs(2))
        .startup_wait(Duration::from_millis(100))
        .acquire()
        .unwrap_err();
    assert!(matches!(error, Error::ClockBehindMark { .. }), "{error:?}");
    a.renew(now + 61_000).unwrap();
    a.release(now).unwrap();
}

#[test]
fn a_holder_key_put_by_hand_without_a_lease_is_reported_not_counted_as_held() {
    let namespace = namespace("leaseless");
    let store = store(&endpoints(), &namespace);
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", endpoints()))
        .args(["put", &format!("{namespace}/dc/0/holder/3"), "by hand"])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("etcdctl (Debian's etcd-client) is needed");
    assert!(status.success());
    let error = store.acquire(&range("3-3")).unwrap_err();
    let Error::LeaseRangeFull { held, unusable, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!((*held, unusable.len()), (0, 1), "{error}");
    assert!(error.to_string().contains("without a lease"), "{error}");
}

#[test]
fn a_namespace_serves_one_layout_and_one_never_initialised_records_none() {
    // (Racing processes: tests/lease_conformance.rs.)
    let endpoints = endpoints();
    // Two services with the issue's two layouts on one namespace: the second is refused.
    let namespace = namespace("layout-two-services");
    let service_layout = Layout::new(41, 0, 8, 14).unwrap();
    let first = LeasedGenerator::builder(store(&endpoints, &namespace), range("0-0"))
        .generator(idgen::Generator::builder().layout(service_layout))
        .acquire()
        .unwrap();
    first.next_id().unwrap();
    let second =
        LeasedGenerator::builder(connected(&endpoints, &namespace), range("1-1")).acquire();
    match second {
        Err(Error::LayoutMismatch { recorded, ours, .. }) => {
            assert_eq!(recorded, service_layout.to_string());
            assert_eq!(ours, Layout::DEFAULT.to_string());
        }
        other => panic!("a second layout was let in: {other:?}"),
    }
    // A namespace not initialised records nothing, and says what to run.
    let bare = EtcdStore::connect(&[endpoints.as_str()], &namespace_fresh()).unwrap();
    assert!(matches!(
        bare.bind_layout(&Layout::DEFAULT),
        Err(Error::LeaseStoreUninitialised { .. })
    ));
    assert_eq!(bare.recorded_layout().unwrap(), None);
}

fn namespace_fresh() -> String {
    namespace("layout-bare")
}

/// etcd's disaster recovery under a live holder: a snapshot taken before the holder took
/// its number, then restored. The restored namespace has no trace of the holder, so a
/// second process could take the number at once; the holder finds at its next renewal
/// that the store went back in time and stops, and this process takes no number again
/// until `init --after-restore` ran, after which every number waits a horizon.
#[test]
fn after_a_snapshot_restore_the_holder_stops_and_numbers_wait_until_the_restore_step() {
    let mut server = EtcdServer::start("restore");
    let endpoint = server.endpoint.clone();
    let namespace = namespace("restore");
    let connect = || {
        EtcdStore::connect(&[endpoint.as_str()], &namespace)
            .unwrap()
            .with_ttl(Duration::from_secs(2))
            .unwrap()
            .with_outage_horizon(Duration::from_secs(2))
    };
    let store = connect();
    let an_hour_ago = idgen::SystemClock.now_unix_ms() - 3_600_000;
    store.init(0..=0, 0..=3, an_hour_ago).unwrap();
    let snapshot = server.snapshot("before-the-holder.db");
    let mut claim = store.acquire(&range("0-0")).unwrap();
    let now = idgen::SystemClock.now_unix_ms();
    claim.renew(now + 2_000).unwrap();
    claim.renew(now + 2_001).unwrap();
    server.restore(&snapshot);
    // Whatever the order of the holder's renewal and a successor's acquire, the holder's
    // renewal says the store went back; it names the restore step.
    let renewed = claim.renew(now + 2_002);
    match &renewed {
        Err(Error::LeaseStoreRestored { fix, .. }) => {
            assert!(fix.contains("idgen leases init --after-restore"), "{fix}")
        }
        other => panic!("the restore went unnoticed: {other:?}"),
    }
    // This process takes no number from the restored store ...
    let refused = store.acquire(&range("0-3"));
    assert!(
        matches!(refused, Err(Error::LeaseStoreRestored { .. })),
        "{refused:?}"
    );
    // ... until the restore step ran; then every number waits a horizon from it.
    let before = idgen::SystemClock.now_unix_ms();
    let raised = connect().init_after_restore(0..=0, 0..=3, before).unwrap();
    assert_eq!(raised, 4);
    let taken = store.acquire(&range("0-3")).unwrap();
    assert!(
        taken.previous_mark_unix_ms().unwrap() >= before + 2_000,
        "{taken:?}"
    );
    // A fresh process (which saw nothing) waits the same horizon.
    let fresh = connect().acquire(&range("0-3")).unwrap();
    assert!(fresh.previous_mark_unix_ms().unwrap() >= before + 2_000);
}

/// A holder whose holder key was in the snapshot keeps its lease through the restore,
/// but the mark it confirmed since is gone: it stops too.
#[test]
fn a_holder_whose_last_mark_a_restore_took_away_stops_even_with_its_key_restored() {
    let mut server = EtcdServer::start("restore-held");
    let endpoint = server.endpoint.clone();
    let namespace = namespace("restore-held");
    let store = EtcdStore::connect(&[endpoint.as_str()], &namespace)
        .unwrap()
        .with_ttl(Duration::from_secs(2))
        .unwrap();
    let an_hour_ago = idgen::SystemClock.now_unix_ms() - 3_600_000;
    store.init(0..=0, 0..=0, an_hour_ago).unwrap();
    let mut claim = store.acquire(&range("0-0")).unwrap();
    let now = idgen::SystemClock.now_unix_ms();
    claim.renew(now + 2_000).unwrap();
    let snapshot = server.snapshot("while-held.db");
    claim.renew(now + 2_001).unwrap();
    claim.renew(now + 2_002).unwrap();
    server.restore(&snapshot);
    let renewed = claim.renew(now + 2_003);
    assert!(
        matches!(renewed, Err(Error::LeaseStoreRestored { .. })),
        "{renewed:?}"
    );
}

/// A holder whose claim came through a restore whole (its holder key and its last mark
/// were both in the snapshot) finds its mark raised by `init --after-restore`. A later
/// holder of the number, which the restore forgot, may be issuing up to the raised mark
/// (its own, at most a horizon after its last renewal): going on below it could issue the
/// same IDs, so the holder gives the number up instead of writing its own mark over the
/// raised one. Found by the fleet simulator (`src/lease/simulation/`).
#[test]
fn a_holder_whose_mark_the_restore_step_raised_gives_its_number_up() {
    let mut held = HeldOnPrivateEtcd::start("restore-raised");
    // The holder is cut off here; a later holder takes the number and issues, and etcd is
    // restored from this snapshot, which knows only the first.
    let snapshot = held.server.snapshot("held-then-raised.db");
    held.server.restore(&snapshot);
    let before = idgen::SystemClock.now_unix_ms();
    let raised = held
        .store()
        .init_after_restore(0..=0, 0..=0, before)
        .unwrap();
    assert_eq!(raised, 1);
    let renewed = held.claim.renew(held.marked_at + 2_001);
    assert!(
        matches!(renewed, Err(Error::LeaseLost { .. })),
        "a holder went on below the mark the restore step raised: {renewed:?}"
    );
}

/// A private etcd whose namespace serves worker 0 (TTL 2 s), the number taken and marked
/// 2 s after `marked_at`: where the restore tests below start.
struct HeldOnPrivateEtcd {
    server: EtcdServer,
    namespace: String,
    claim: Box<dyn idgen::lease::Claim>,
    marked_at: u64,
}

impl HeldOnPrivateEtcd {
    fn start(test: &str) -> HeldOnPrivateEtcd {
        let server = EtcdServer::start(test);
        let namespace = namespace(test);
        let store = private_store(&server, &namespace);
        let an_hour_ago = idgen::SystemClock.now_unix_ms() - 3_600_000;
        store.init(0..=0, 0..=0, an_hour_ago).unwrap();
        let mut claim = store.acquire(&range("0-0")).unwrap();
        let marked_at = idgen::SystemClock.now_unix_ms();
        claim.renew(marked_at + 2_000).unwrap();
        HeldOnPrivateEtcd {
            server,
            namespace,
            claim,
            marked_at,
        }
    }

    /// Another connection to the namespace.
    fn store(&self) -> EtcdStore {
        private_store(&self.server, &self.namespace)
    }
}

fn private_store(server: &EtcdServer, namespace: &str) -> EtcdStore {
    EtcdStore::connect(&[server.endpoint.as_str()], namespace)
        .unwrap()
        .with_ttl(Duration::from_secs(2))
        .unwrap()
}

/// etcd 3.4's `snapshot restore` hands the same revision numbers out again: after a
/// restore, a write can land on a holder's mark key at exactly the revision of the holder's
/// own last write, which the restore forgot. The mark key's revision alone would then pass
/// for the holder's own write, and the holder would write its mark over one raised by
/// hand (or by `init --after-restore`) and go on below it; its writes also check the
/// value, so it gives the number up. Found by the fleet simulator.
#[test]
fn a_mark_rewritten_at_the_revision_of_a_forgotten_write_is_not_taken_for_the_holders() {
    let mut held = HeldOnPrivateEtcd::start("restore-same-revision");
    let endpoint = held.server.endpoint.clone();
    let snapshot = held.server.snapshot("before-the-last-write.db");
    held.claim.renew(held.marked_at + 2_001).unwrap();
    let mark_key = format!("{}/dc/0/mark/0", held.namespace);
    let (_, forgotten) = etcd_revisions(&endpoint, &mark_key);
    held.server.restore(&snapshot);
    // Other writes until the store is one revision short of the forgotten write, then the
    // mark raised by hand, at exactly that revision.
    let filler = format!("{}/filler", held.namespace);
    loop {
        let (revision, _) = etcd_revisions(&endpoint, &filler);
        assert!(revision < forgotten, "the restore kept revision {revision}");
        if revision + 1 == forgotten {
            break;
        }
        etcdctl(&endpoint, &["put", &filler, "x"]);
    }
    let raised = (held.marked_at + 600_000).to_string();
    etcdctl(&endpoint, &["put", &mark_key, &raised]);
    assert_eq!(etcd_revisions(&endpoint, &mark_key).1, forgotten);
    let renewed = held.claim.renew(held.marked_at + 2_002);
    assert!(
        matches!(renewed, Err(Error::LeaseStoreRestored { .. })),
        "a mark raised at the revision of the holder's forgotten write passed for its own: \
         {renewed:?}"
    );
}

/// A renewal whose answer never came may still have been written: the mark key then holds
/// a value of the holder's own, above its last confirmed mark. That is not a mark raised
/// by someone else, and the holder keeps its number.
#[test]
fn a_mark_written_by_a_renewal_whose_answer_was_lost_is_the_holders_own() {
    let server = EtcdServer::start("lost-answer");
    let namespace = namespace("lost-answer");
    // A TTL that outlasts a request's timeout while etcd is stopped.
    let store = EtcdStore::connect(&[server.endpoint.as_str()], &namespace)
        .unwrap()
        .with_ttl(Duration::from_secs(10))
        .unwrap();
    store
        .init(0..=0, 0..=0, idgen::SystemClock.now_unix_ms() - 3_600_000)
        .unwrap();
    let mut claim = store.acquire(&range("0-0")).unwrap();
    let now = idgen::SystemClock.now_unix_ms();
    claim.renew(now + 10_000).unwrap();
    server.signal("STOP");
    let unanswered = claim.renew(now + 10_001);
    server.signal("CONT");
    assert!(
        matches!(unanswered, Err(Error::LeaseStore { .. })),
        "{unanswered:?}"
    );
    // What that renewal leaves behind had it been written, and only its answer lost.
    let mark_key = format!("{namespace}/dc/0/mark/0");
    etcdctl(
        &server.endpoint,
        &["put", &mark_key, &(now + 10_001).to_string()],
    );
    let renewed = claim.renew(now + 10_002);
    assert!(
        renewed.is_ok(),
        "a holder lost its number to its own write: {renewed:?}"
    );
}

/// `etcdctl` with `args` against `endpoint`; fails the test if it fails.
fn etcdctl(endpoint: &str, args: &[&str]) -> String {
    let output = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .output()
        .expect("etcdctl (Debian's etcd-client) is needed");
    assert!(output.status.success(), "etcdctl {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The store's revision now, and `key`'s last change (0 if it does not exist).
fn etcd_revisions(endpoint: &str, key: &str) -> (i64, i64) {
    let json: serde_json::Value =
        serde_json::from_str(&etcdctl(endpoint, &["get", key, "-w", "json"])).unwrap();
    let revision = json["header"]["revision"].as_i64().unwrap();
    let changed = json["kvs"][0]["mod_revision"].as_i64().unwrap_or(0);
    (revision, changed)
}

/// A fleet on a 10-minute horizon; a mark key deleted; `init` and a successor on shorter
/// horizons of their own infer the lost mark with the fleet's, since a holder cut off
/// from etcd may issue that long.
#[test]
fn a_lost_mark_is_inferred_with_the_largest_horizon_a_holder_recorded() {
    let namespace = namespace("horizon");
    let endpoints = endpoints();
    // Initialised once, before the key is deleted.
    store(&endpoints, &namespace);
    let short = || connected(&endpoints, &namespace).with_outage_horizon(Duration::from_secs(2));
    let (for_successor, for_init) = (short(), short());
    let fleet = LeasedGenerator::builder(short(), range("0-0"))
        .outage_horizon(Duration::from_secs(600))
        .acquire()
        .unwrap();
    fleet.next_id().unwrap();
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(["del", &format!("{namespace}/dc/0/mark/5")])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("etcdctl (Debian's etcd-client) is needed");
    assert!(status.success());
    let before = idgen::SystemClock.now_unix_ms();
    let successor = LeasedGenerator::builder(for_successor, range("5-5"))
        .outage_horizon(Duration::from_secs(2))
        .startup_wait(Duration::from_millis(100))
        .acquire();
    match successor {
        Err(Error::ClockBehindMark { behind_ms }) => {
            assert!(behind_ms > 590_000, "inferred {behind_ms} ms ahead")
        }
        other => panic!("the fleet's horizon was not used: {other:?}"),
    }
    // `init` writes the missing mark with the fleet's horizon, not its own 2 s.
    for_init.init(0..=0, 5..=5, before).unwrap();
    let marked = for_init.survey(&range("5-5")).unwrap()[0]
        .mark_unix_ms
        .unwrap();
    assert!(marked >= before + 600_000, "{marked} vs {before}");
    fleet.release().unwrap();
}

#[test]
fn a_namespace_declared_new_is_ready_at_once_and_one_with_any_key_is_refused() {
    let endpoints = endpoints();
    // Never used: every mark is now, so a holder is valid at once (no outage horizon).
    let ns = namespace("init-new");
    let fresh = connected(&endpoints, &ns);
    let now = idgen::SystemClock.now_unix_ms();
    assert_eq!(fresh.init_new(0..=0, 0..=3, now).unwrap(), 4);
    let generator = LeasedGenerator::builder(connected(&endpoints, &ns), range("0-3"))
        .startup_wait(Duration::from_millis(100))
        .acquire()
        .unwrap();
    assert_eq!(generator.lease_stats().previous_mark_unix_ms, Some(now - 1));
    generator.next_id().unwrap();
    // Used once (a holder, its marks, the store key): `--new` is refused, naming the way
    // that waits a horizon, and nothing is written.
    let error = connected(&endpoints, &ns)
        .init_new(0..=0, 0..=3, now)
        .unwrap_err();
    assert!(matches!(error, Error::LeaseConfig { .. }), "{error:?}");
    assert!(error.to_string().contains("without --new"), "{error}");
    generator.release().unwrap();
    // A namespace wiped but for one stray key is refused too; once wiped whole it is
    // indistinguishable from a new one, which is why the declaration is the operator's.
    let stray = namespace("init-new-stray");
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(["put", &format!("{stray}/dc/0/mark/7"), "1"])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("etcdctl (Debian's etcd-client) is needed");
    assert!(status.success());
    let error = connected(&endpoints, &stray)
        .init_new(0..=0, 0..=3, now)
        .unwrap_err();
    assert!(error.to_string().contains("holds 1 key;"), "{error}");
    // The plain init of a namespace not known to be new writes marks a horizon ahead.
    let maybe_wiped = namespace("init-maybe-wiped");
    let store = connected(&endpoints, &maybe_wiped).with_outage_horizon(Duration::from_secs(60));
    store.init(0..=0, 0..=0, now).unwrap();
    let mark = store.survey(&range("0-0")).unwrap()[0]
        .mark_unix_ms
        .unwrap();
    assert!(mark >= now + 60_000, "{mark} vs {now}");
}
