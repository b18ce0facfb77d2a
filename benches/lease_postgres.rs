//! What worker-number leases cost one PostgreSQL server: renewals per second it sustains
//! for 1,000 and 5,000 held numbers, beside its own single-row `UPDATE` rate, measured in
//! the same run on the same connections. A bench binary, not a test; it prints a report.
//!
//! Run with `IDGEN_POSTGRES_URL` set (`.ci/test` starts such a server; the README's dev
//! notes show one): `cargo bench --bench lease_postgres --features postgres`.
//!
//! - The baseline: `CONNECTIONS` threads, each with its own connection and its own row of a
//!   scratch table, run `UPDATE ... SET v = v + 1 WHERE id = $1` flat out for a window.
//! - The renewals: the same number of `PostgresStore`s (one connection each, as one process
//!   has) hold N numbers between them and renew them, one `Claim::renew` after another,
//!   flat out for a window: the store's one statement per renewal, from the Rust API.
//! - The statements side by side: this version's renewal statement (the history drawn, the
//!   gate in the take-back) and the previous version's (commit 7e16f1f), each sent raw on
//!   rows of the same tables by the same number of connections, in turn: this one's rate as
//!   a share of the previous one's. (The renewals above also cross to each store's
//!   connection thread and back, which both versions do: comparing them with a raw
//!   statement would charge that crossing to the statement.)
//! - A fleet at the default TTL (30 s, renewed every 10 s) asks N / 10 renewals a second:
//!   the report gives that demand as a share of the measured capacity of both kinds.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use idgen::lease::{Claim, LeaseStore, POSTGRES_DEFAULT_TTL, PostgresStore, WorkerRange};

/// Connections (stores) at once: two per core of this machine's two.
const CONNECTIONS: usize = 4;
/// How long each measurement runs.
const WINDOW: Duration = Duration::from_secs(5);

fn main() {
    let Ok(url) = std::env::var("IDGEN_POSTGRES_URL") else {
        println!("lease_postgres: set IDGEN_POSTGRES_URL to a PostgreSQL server to measure");
        return;
    };
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return; // `cargo test --benches` and `cargo bench -- --list`: nothing to list.
    }
    let version: String = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .query_one("SHOW server_version", &[])
        .unwrap()
        .get(0);
    println!("PostgreSQL {version}, {CONNECTIONS} connections, {WINDOW:?} windows\n");
    let before = update_rate(&url);
    let mut rows = Vec::new();
    for numbers in [1_000u64, 5_000] {
        // Side by side, twice each in turn: the machine's noise falls on both.
        let (mut renewals, mut current, mut previous) = (0.0, 0.0, 0.0);
        for _ in 0..2 {
            renewals += renewal_rate(&url, numbers) / 2.0;
            current += raw_renewal_rate(&url, numbers, CURRENT_RENEW) / 2.0;
            previous += raw_renewal_rate(&url, numbers, PREVIOUS_RENEW) / 2.0;
        }
        println!(
            "{numbers} numbers: renewals through the store {renewals:.0}/s; the statements \
             sent raw: this version's {current:.0}/s, the previous version's {previous:.0}/s: \
             {:.1} %",
            100.0 * current / previous
        );
        rows.push((numbers, renewals));
    }
    let after = update_rate(&url);
    let updates = (before + after) / 2.0;
    println!("| | per second | share of the UPDATE rate |");
    println!("|---|---:|---:|");
    println!("| single-row UPDATE (before {before:.0}, after {after:.0}) | {updates:.0} | 100 % |");
    let renew_every = POSTGRES_DEFAULT_TTL.as_secs_f64() / 3.0;
    for (numbers, renewals) in rows {
        println!(
            "| renewals, {numbers} numbers held, flat out | {renewals:.0} | {:.0} % |",
            100.0 * renewals / updates
        );
        let demand = numbers as f64 / renew_every;
        println!(
            "| renewals a fleet of {numbers} asks at the default TTL | {demand:.0} | {:.1} % ({:.1} % of the renewal capacity) |",
            100.0 * demand / updates,
            100.0 * demand / renewals
        );
    }
}

/// Single-row UPDATEs per second over every connection, each on a row of its own.
fn update_rate(url: &str) -> f64 {
    let mut setup = postgres::Client::connect(url, postgres::NoTls).unwrap();
    setup
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS idgen_bench_rows (id bigint PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO idgen_bench_rows SELECT g, 0 FROM generate_series(0, 63) g
             ON CONFLICT DO NOTHING",
        )
        .unwrap();
    let barrier = Barrier::new(CONNECTIONS);
    let total: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CONNECTIONS as i64)
            .map(|id| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
                    let update = client
                        .prepare("UPDATE idgen_bench_rows SET v = v + 1 WHERE id = $1")
                        .unwrap();
                    barrier.wait();
                    let started = Instant::now();
                    let mut done = 0;
                    while started.elapsed() < WINDOW {
                        client.execute(&update, &[&id]).unwrap();
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total as f64 / WINDOW.as_secs_f64()
}

/// Renewals per second with `numbers` numbers held over [`CONNECTIONS`] stores.
fn renewal_rate(url: &str, numbers: u64) -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let namespace = format!("/idgen-bench/renewals-{numbers}-{nanos}");
    let last = numbers - 1;
    let first_store = PostgresStore::connect(url, &namespace).unwrap();
    first_store.init(0..=0, 0..=last, 0).unwrap();
    let range = WorkerRange::parse(0, &format!("0-{last}")).unwrap();
    let stores: Vec<PostgresStore> = (0..CONNECTIONS)
        .map(|_| PostgresStore::connect(url, &namespace).unwrap())
        .collect();
    let taken = Instant::now();
    let per_store = numbers as usize / CONNECTIONS;
    let mut claims: Vec<Vec<Box<dyn Claim>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .map(|store| {
                let range = &range;
                scope.spawn(move || {
                    (0..per_store)
                        .map(|_| store.acquire(range).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!(
        "{numbers} numbers taken in {:.1} s",
        taken.elapsed().as_secs_f64()
    );
    let barrier = Barrier::new(CONNECTIONS);
    let total: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = claims
            .iter_mut()
            .map(|held| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let started = Instant::now();
                    let mut done = 0u64;
                    'window: loop {
                        for claim in held.iter_mut() {
                            if started.elapsed() >= WINDOW {
                                break 'window;
                            }
                            let mark = idgen::Clock::now_unix_ms(&idgen::SystemClock) + 180_000;
                            claim.renew(mark).unwrap();
                            done += 1;
                        }
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    for held in &mut claims {
        for claim in held.iter_mut() {
            claim.release(0).unwrap();
        }
    }
    total as f64 / WINDOW.as_secs_f64()
}

/// The previous version's `RENEW` (commit 7e16f1f), as it was sent.
const PREVIOUS_RENEW: &str = "UPDATE idgen_leases \
     SET mark_ms = GREATEST(mark_ms, $6), \
     expires_at = clock_timestamp() + $7::bigint * interval '1 millisecond', \
     version = version + 1 \
     WHERE namespace = $1 AND datacenter = $2 AND worker = $3 AND token = $4 \
     AND version >= $5 AND (expires_at > clock_timestamp() OR \
     EXISTS (SELECT 1 FROM idgen_lease_namespaces s WHERE s.namespace = $1 \
     AND s.cluster = ((SELECT system_identifier::text FROM pg_control_system()) || '/' || \
     substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' || \
     'idgen_leases'::regclass::oid::text) \
     AND s.state NOT LIKE '%restore-found %')) RETURNING version";

/// This version's `RENEW` as the store sends it on the schema `public` (the history drawn
/// from `idgen_lease_history`, the gate after a server start in the take-back).
const CURRENT_RENEW: &str = "UPDATE \"public\".idgen_leases \
     SET mark_ms = GREATEST(mark_ms, $6), \
     expires_at = clock_timestamp() + $7::bigint * interval '1 millisecond', \
     version = GREATEST(version + 1, nextval('\"public\".idgen_lease_history')) \
     WHERE namespace = $1 AND datacenter = $2 AND worker = $3 AND token = $4 \
     AND version >= $5 AND (expires_at > clock_timestamp() OR \
     EXISTS (SELECT 1 FROM \"public\".idgen_lease_namespaces s WHERE s.namespace = $1 \
     AND s.cluster = ((SELECT system_identifier::text FROM pg_control_system()) || '/' || \
     substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' || \
     '\"public\".idgen_leases'::regclass::oid::text) \
     AND s.state NOT LIKE '%restore-found %' AND (s.server_start = pg_postmaster_start_time() \
     OR clock_timestamp() >= pg_postmaster_start_time() + \
     (LEAST(GREATEST(s.horizon_ms, 0), 86400000) + 24000) * interval '1 millisecond'))) \
     RETURNING version, currval('\"public\".idgen_lease_history')";

/// Renewals per second of `statement` (one of the renewal statements above), on `numbers`
/// rows held by hand (a token each), over [`CONNECTIONS`] connections.
fn raw_renewal_rate(url: &str, numbers: u64, statement: &str) -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let namespace = format!("/idgen-bench/raw-{numbers}-{nanos}");
    let last = numbers - 1;
    let store = PostgresStore::connect(url, &namespace).unwrap();
    assert_eq!(
        store.schema(),
        "public",
        "the statements are written for the schema public"
    );
    store.init(0..=0, 0..=last, 0).unwrap();
    let mut setup = postgres::Client::connect(url, postgres::NoTls).unwrap();
    setup
        .execute(
            "UPDATE idgen_leases SET token = 'bench-' || worker, \
             expires_at = clock_timestamp() + interval '1 hour' WHERE namespace = $1",
            &[&namespace],
        )
        .unwrap();
    let per_connection = numbers as i64 / CONNECTIONS as i64;
    let ttl_ms = POSTGRES_DEFAULT_TTL.as_millis() as i64;
    let barrier = Barrier::new(CONNECTIONS);
    let total: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CONNECTIONS as i64)
            .map(|connection| {
                let (barrier, namespace) = (&barrier, &namespace);
                scope.spawn(move || {
                    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
                    let renew = client.prepare(statement).unwrap();
                    let workers = connection * per_connection..(connection + 1) * per_connection;
                    barrier.wait();
                    let started = Instant::now();
                    let mut done = 0u64;
                    'window: loop {
                        for worker in workers.clone() {
                            if started.elapsed() >= WINDOW {
                                break 'window;
                            }
                            let mark =
                                idgen::Clock::now_unix_ms(&idgen::SystemClock) as i64 + 180_000;
                            let token = format!("bench-{worker}");
                            let renewed = client
                                .query_opt(
                                    &renew,
                                    &[&namespace, &0i64, &worker, &token, &0i64, &mark, &ttl_ms],
                                )
                                .unwrap();
                            assert!(renewed.is_some(), "worker {worker} not renewed");
                            done += 1;
                        }
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total as f64 / WINDOW.as_secs_f64()
}
