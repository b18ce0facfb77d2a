//! The PostgreSQL block store (feature `postgres`): grants and give-backs on a real server
//! (the one `.ci/test` starts), the end of the range, bad URLs, use from async code, and a
//! private server restarted under load.

#![cfg(feature = "postgres")]

#[path = "common/blocks.rs"]
mod blocks;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use blocks::{PATIENT_WAIT, PostgresServer, assert_increasing, assert_unique, postgres_url};
use idgen::Error;
use idgen::blocks::{BlockAllocator, BlockStore, MAX_VALUE, PostgresStore, SequenceName};

/// A sequence name no other test (or earlier run) uses.
fn fresh(test: &str) -> SequenceName {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros();
    SequenceName::new(&format!("{test}-{}-{micros}", std::process::id())).unwrap()
}

/// A schema or role name no other test (or earlier run) uses: `prefix_<pid>_<micros>`.
fn fresh_ident(prefix: &str) -> String {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros();
    format!("{prefix}_{}_{micros}", std::process::id())
}

#[test]
fn grants_are_dense_and_a_give_back_is_taken_only_while_latest() {
    let store = PostgresStore::connect(&postgres_url()).unwrap();
    let name = fresh("pg-grants");
    let first = store.grant(&name, 100).unwrap();
    assert_eq!((first.first, first.end), (1, 101));
    let second = store.grant(&name, 50).unwrap();
    assert_eq!((second.first, second.end), (101, 151));
    assert_eq!(
        store.give_back(&name, &first, 40),
        Ok(false),
        "not the latest"
    );
    assert_eq!(store.give_back(&name, &second, 120), Ok(true));
    assert_eq!(store.give_back(&name, &second, 120), Ok(false), "repeated");
    let third = store.grant(&name, 10).unwrap();
    assert_eq!((third.first, third.end), (120, 130));
}

#[test]
fn threads_with_their_own_connections_never_share_a_value() {
    let name = fresh("pg-threads");
    let runs: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let name = name.clone();
                scope.spawn(move || {
                    let alloc = BlockAllocator::builder(
                        PostgresStore::connect(&postgres_url()).unwrap(),
                        name.as_str(),
                    )
                    .unwrap()
                    .fixed_block_size(7)
                    .max_wait(PATIENT_WAIT)
                    .build()
                    .unwrap();
                    (0..700).map(|_| alloc.next().unwrap()).collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in &runs {
        assert_increasing("allocator", run);
    }
    assert_eq!(assert_unique(&runs), 4_200);
}

#[test]
fn the_end_of_the_i64_range_is_a_clear_error() {
    let url = postgres_url();
    let store = PostgresStore::connect(&url).unwrap();
    let name = fresh("pg-end");
    store.grant(&name, 1).unwrap();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let near_end = (MAX_VALUE - 3) as i64;
    client
        .execute(
            "UPDATE idgen_sequences SET last_value = $2 WHERE name = $1",
            &[&name.as_str(), &near_end],
        )
        .unwrap();
    let last = store.grant(&name, 1_000).unwrap();
    assert_eq!((last.first, last.end), (MAX_VALUE - 2, MAX_VALUE + 1));
    assert_eq!(
        store.grant(&name, 1),
        Err(Error::SequenceExhausted {
            sequence: name.to_string()
        })
    );
}

#[test]
fn a_bad_url_or_an_unreachable_server_is_a_clear_error() {
    for url in [
        "not a url at all ===",
        "postgresql://postgres@127.0.0.1:1/postgres",
    ] {
        match PostgresStore::connect(url) {
            Err(Error::BlockStore { reason }) => assert!(reason.contains("PostgreSQL"), "{reason}"),
            other => panic!("{url}: expected BlockStore, got {other:?}"),
        }
    }
}

#[test]
fn the_store_is_created_used_and_dropped_inside_async_code() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let name = fresh("pg-async");
    let values = runtime.block_on(async move {
        // Created and dropped on a worker thread: no runtime of its own is dropped here.
        let store = PostgresStore::connect(&postgres_url()).unwrap();
        let alloc = BlockAllocator::builder(store, name.as_str())
            .unwrap()
            .max_wait(PATIENT_WAIT)
            .build()
            .unwrap();
        let alloc = std::sync::Arc::new(alloc);
        let values = {
            let alloc = alloc.clone();
            tokio::task::spawn_blocking(move || alloc.next_n(5).unwrap())
                .await
                .unwrap()
        };
        drop(alloc);
        values
    });
    assert_eq!(values, vec![1, 2, 3, 4, 5]);
}

/// What one thread saw: its values with the instant each came, calls refused, and grants
/// that failed.
type Run = (Vec<(Instant, u64)>, u64, u64);

/// The restart test's block size.
const RESTART_BLOCK: u64 = 5;
/// Values each thread takes before the restart.
const BEFORE_RESTART: u64 = 20;
/// Values each thread takes after the restart: more than the two blocks it may hold (the
/// current and the prefetched) and the one being recorded as the restart ends, so at least
/// one came from a block granted after the server came back.
const AFTER_RESTART: u64 = 2 * RESTART_BLOCK + 2;
/// The longest the restart test waits for the threads' values, before and after.
const PROGRESS_WITHIN: Duration = Duration::from_secs(60);

/// Waits until every counter in `counts` reaches `target`, at most `PROGRESS_WITHIN`; fails
/// naming the threads that did not, or as soon as one of `threads` has ended (its panic is
/// then raised by the join).
fn wait_for_counts<T>(
    what: &str,
    counts: &[AtomicU64],
    target: u64,
    threads: &[std::thread::ScopedJoinHandle<'_, T>],
) {
    let deadline = Instant::now() + PROGRESS_WITHIN;
    while counts
        .iter()
        .any(|count| count.load(Ordering::SeqCst) < target)
    {
        if threads.iter().any(|thread| thread.is_finished()) {
            return; // ended early: the join says why
        }
        if Instant::now() >= deadline {
            let slow: Vec<String> = counts
                .iter()
                .enumerate()
                .map(|(i, count)| (i, count.load(Ordering::SeqCst)))
                .filter(|&(_, count)| count < target)
                .map(|(i, count)| format!("thread {i} ({count})"))
                .collect();
            panic!(
                "within {PROGRESS_WITHIN:?} {what}, {} did not take {target} values",
                slow.join(", ")
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_server_restarted_under_load_costs_no_duplicate_and_the_allocators_recover() {
    let server = PostgresServer::start("restart");
    let url = server.url();
    let stop = AtomicBool::new(false);
    let restarted = AtomicBool::new(false);
    let restarted_at: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
    let before: [AtomicU64; 3] = Default::default();
    let after: [AtomicU64; 3] = Default::default();
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let (url, stop, restarted) = (&url, &stop, &restarted);
                let (before, after) = (&before[i], &after[i]);
                scope.spawn(move || {
                    let alloc =
                        BlockAllocator::builder(PostgresStore::connect(url).unwrap(), "load")
                            .unwrap()
                            .fixed_block_size(RESTART_BLOCK)
                            .max_wait(Duration::from_millis(300))
                            .build()
                            .unwrap();
                    let (mut values, mut refused) = (Vec::new(), 0);
                    while !stop.load(Ordering::SeqCst) {
                        match alloc.next() {
                            Ok(value) => {
                                // The flag first, then the instant: a value counted as after
                                // the restart is also dated after it.
                                let counts = if restarted.load(Ordering::SeqCst) {
                                    after
                                } else {
                                    before
                                };
                                values.push((Instant::now(), value));
                                counts.fetch_add(1, Ordering::SeqCst);
                            }
                            // The only errors an outage may cause.
                            Err(Error::BlocksUnavailable { .. }) => refused += 1,
                            Err(other) => panic!("unexpected error: {other:?}"),
                        }
                    }
                    (values, refused, alloc.stats().failed_round_trips)
                })
            })
            .collect();
        // Under load: every thread has values before the restart ...
        wait_for_counts("before the restart", &before, BEFORE_RESTART, &handles);
        server.restart_fast();
        *restarted_at.lock().unwrap() = Some(Instant::now());
        restarted.store(true, Ordering::SeqCst);
        // ... and values from blocks granted after it.
        wait_for_counts("after the restart", &after, AFTER_RESTART, &handles);
        stop.store(true, Ordering::SeqCst);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let restarted_at = restarted_at.lock().unwrap().unwrap();
    let mut all = Vec::new();
    for (i, (values, _, _)) in runs.iter().enumerate() {
        let plain: Vec<u64> = values.iter().map(|&(_, v)| v).collect();
        assert_increasing(&format!("thread {i}"), &plain);
        let taken_before = values.iter().filter(|&&(at, _)| at < restarted_at).count() as u64;
        let taken_after = values.iter().filter(|&&(at, _)| at >= restarted_at).count() as u64;
        assert!(
            taken_before >= BEFORE_RESTART,
            "thread {i} took {taken_before} values before the restart"
        );
        assert!(
            taken_after >= AFTER_RESTART,
            "thread {i} did not recover after the restart: {taken_after} values"
        );
        all.push(plain);
    }
    assert_unique(&all);
    let failed: u64 = runs.iter().map(|(_, _, failed)| failed).sum();
    assert!(failed > 0, "no grant failed: the restart was never felt");
    let refused: u64 = runs.iter().map(|(_, refused, _)| refused).sum();
    eprintln!("grants failed during the restart: {failed}; calls refused: {refused}");
}

#[test]
fn a_role_with_a_schema_of_its_own_uses_the_shared_table_not_a_new_one() {
    let url = postgres_url();
    let store = PostgresStore::connect(&url).unwrap();
    let name = fresh("pg-schema");
    let first = store.grant(&name, 10).unwrap();
    let role = fresh_ident("idgen_role");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; CREATE SCHEMA {role} AUTHORIZATION {role};
             GRANT USAGE ON SCHEMA public TO {role};
             GRANT SELECT, INSERT, UPDATE ON public.idgen_sequences TO {role}"
        ))
        .unwrap();
    // The role's default search_path is "$user", public: its own schema comes first.
    let role_url = url.replacen("postgres@", &format!("{role}@"), 1);
    let outcome = PostgresStore::connect(&role_url).and_then(|theirs| theirs.grant(&name, 10));
    // Only the role's own schema: a neighbour test may have a table in a schema of its own.
    let made_in_own_schema: bool = admin
        .query_one(
            &format!("SELECT to_regclass('{role}.idgen_sequences') IS NOT NULL"),
            &[],
        )
        .unwrap()
        .get(0);
    admin
        .batch_execute(&format!(
            "DROP SCHEMA {role} CASCADE; DROP OWNED BY {role}; DROP ROLE {role}"
        ))
        .unwrap();
    let next = outcome.unwrap();
    assert_eq!(next.first, first.end, "continued in the shared table");
    assert!(
        !made_in_own_schema,
        "a second idgen_sequences was made, in the schema {role}"
    );
}

/// A `search_path` in the URL names no other table: every statement names the schema the
/// table is in (one store per database), so a process whose URL carries one (a pooler's
/// setting, a copied connection string) shares the sequences of the rest of the fleet.
#[test]
fn a_search_path_in_the_url_plays_no_part() {
    let url = postgres_url();
    let schema = fresh_ident("idgen_path");
    let name = fresh("pg-path");
    let before = PostgresStore::connect(&url)
        .unwrap()
        .grant(&name, 5)
        .unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .unwrap();
    let with_path = format!("{url}?options=-c%20search_path%3D{schema}");
    let outcome = PostgresStore::connect(&with_path).and_then(|store| store.grant(&name, 5));
    let made_there: bool = admin
        .query_one(
            &format!("SELECT to_regclass('{schema}.idgen_sequences') IS NOT NULL"),
            &[],
        )
        .unwrap()
        .get(0);
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
    assert!(!made_there, "a second idgen_sequences was made in {schema}");
    assert_eq!(
        outcome.unwrap().first,
        before.end,
        "continued in the one table"
    );
}
