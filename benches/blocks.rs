//! The block allocator, measured (a bench binary; writes `target/idgen-bench/blocks.json` for
//! `benches/report.py`):
//!
//! 1. ns per value from 1 and 2 threads sharing an allocator with blocks of 1,000, side by
//!    side with a bare `AtomicU64::fetch_add` (the store is in memory, so this is the
//!    allocator's own cost);
//! 2. store round trips per million values, with blocks fixed at 1,000 and adapting;
//! 3. with `--features postgres` and `IDGEN_POSTGRES_URL`: one million values through
//!    PostgreSQL's `nextval()`, one call each, against the allocator on PostgreSQL;
//! 4. key locality: 1,000,000 rows inserted into PostgreSQL in batches of 1,000, keyed by
//!    Snowflake `BIGINT`s, block values, UUIDv7s and UUIDv4s: time and index size.
//!
//! Run: `IDGEN_POSTGRES_URL=postgresql://... cargo bench --bench blocks --features postgres`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use idgen::Error;
use idgen::blocks::{BlockAllocator, BlockStore, Grant, SequenceName};

/// A store in memory: what the allocator costs by itself.
#[derive(Default)]
struct MemoryStore {
    record: Mutex<(u64, u64)>,
}

impl BlockStore for MemoryStore {
    fn grant(&self, _: &SequenceName, size: u64) -> Result<Grant, Error> {
        let mut record = self.record.lock().unwrap();
        let first = record.0.max(1);
        *record = (first + size, record.1 + 1);
        Ok(Grant {
            first,
            end: first + size,
            serial: record.1,
        })
    }

    fn give_back(&self, _: &SequenceName, _: &Grant, _: u64) -> Result<bool, Error> {
        Ok(false)
    }
}

/// Wall time per call as each thread sees it: `threads` threads released together, each
/// making `calls` calls; the wall time from release to the last return, over `calls`.
fn per_call(threads: usize, calls: u64, call: &(impl Fn() + Sync)) -> f64 {
    let barrier = Barrier::new(threads + 1);
    let started = Mutex::new(None::<Instant>);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    for _ in 0..calls {
                        call();
                    }
                    Instant::now()
                })
            })
            .collect();
        *started.lock().unwrap() = Some(Instant::now());
        barrier.wait();
        let last = workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .max()
            .unwrap();
        let start = started.lock().unwrap().unwrap();
        last.duration_since(start).as_nanos() as f64 / calls as f64
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn fixed_allocator(store: impl BlockStore + 'static, size: u64) -> BlockAllocator {
    BlockAllocator::builder(store, "bench")
        .unwrap()
        .fixed_block_size(size)
        .build()
        .unwrap()
}

struct Json(Vec<String>);

impl Json {
    fn number(&mut self, key: &str, value: f64) {
        self.0.push(format!("  \"{key}\": {value}"));
        println!("{key}: {value}");
    }
}

fn hot_path(json: &mut Json) {
    const CALLS: u64 = 5_000_000;
    const ROUNDS: usize = 7;
    for threads in [1, 2] {
        let (mut bare, mut blocks) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let counter = AtomicU64::new(0);
            bare.push(per_call(threads, CALLS, &|| {
                black_box(counter.fetch_add(1, Ordering::Relaxed));
            }));
            let alloc = fixed_allocator(MemoryStore::default(), 1_000);
            blocks.push(per_call(threads, CALLS, &|| {
                black_box(alloc.next().unwrap());
            }));
        }
        json.number(&format!("fetch_add_ns_{threads}"), median(bare));
        json.number(&format!("allocator_ns_{threads}"), median(blocks));
    }
}

/// Round trips for a million values, and the wall time they took.
fn million(alloc: &BlockAllocator) -> (u64, Duration) {
    let started = Instant::now();
    for _ in 0..1_000_000 {
        black_box(alloc.next().unwrap());
    }
    (alloc.stats().round_trips, started.elapsed())
}

fn round_trips(json: &mut Json) {
    let alloc = fixed_allocator(MemoryStore::default(), 1_000);
    let (fixed, _) = million(&alloc);
    json.number("round_trips_fixed_1000", fixed as f64);
    // The blocks the million values came from (the requests also count the next block,
    // prefetched as the last one passed its refill point).
    json.number("blocks_fixed_1000", alloc.stats().blocks as f64);
    let adaptive = BlockAllocator::builder(MemoryStore::default(), "bench")
        .unwrap()
        .build()
        .unwrap();
    let (adapted, _) = million(&adaptive);
    json.number("round_trips_adaptive", adapted as f64);
}

/// Rows in each key-locality table, and rows per insert.
#[cfg(feature = "postgres")]
const ROWS: usize = 1_000_000;
#[cfg(feature = "postgres")]
const BATCH: usize = 1_000;

/// Inserts batch `batch` of `keys` into `idgen_locality_{table}`: the keys go as one
/// array of `array` and become `key` (a cast, for UUIDs sent as text).
#[cfg(feature = "postgres")]
fn inserter<T: postgres::types::ToSql + Sync>(
    table: &'static str,
    keys: Vec<T>,
    key: &'static str,
    array: &'static str,
) -> impl FnMut(&mut postgres::Client, usize) {
    let statement = format!(
        "INSERT INTO idgen_locality_{table} (k, v) SELECT {key}, 1 FROM unnest($1::{array}[]) AS k"
    );
    move |client, batch| {
        let slice = &keys[batch * BATCH..(batch + 1) * BATCH];
        client.execute(&statement, &[&slice]).unwrap();
    }
}

#[cfg(feature = "postgres")]
fn postgres(json: &mut Json, url: &str) {
    use idgen::blocks::PostgresStore;
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let name = format!("bench-{}", std::process::id());

    // 3. nextval() per value against the allocator on PostgreSQL.
    client
        .batch_execute("DROP SEQUENCE IF EXISTS idgen_bench_seq; CREATE SEQUENCE idgen_bench_seq")
        .unwrap();
    let nextval = client.prepare("SELECT nextval('idgen_bench_seq')").unwrap();
    let started = Instant::now();
    for _ in 0..1_000_000 {
        black_box(client.query_one(&nextval, &[]).unwrap().get::<_, i64>(0));
    }
    let nextval_s = started.elapsed().as_secs_f64();
    json.number("nextval_million_s", nextval_s);
    let alloc = BlockAllocator::builder(PostgresStore::connect(url).unwrap(), &name)
        .unwrap()
        .build()
        .unwrap();
    let fixed = BlockAllocator::builder(
        PostgresStore::connect(url).unwrap(),
        &format!("{name}-fixed"),
    )
    .unwrap()
    .fixed_block_size(1_000)
    .build()
    .unwrap();
    let (trips, took) = million(&fixed);
    json.number("pg_fixed_1000_million_s", took.as_secs_f64());
    json.number("pg_fixed_1000_round_trips", trips as f64);
    let (trips, took) = million(&alloc);
    json.number("pg_adaptive_million_s", took.as_secs_f64());
    json.number("pg_adaptive_round_trips", trips as f64);

    // 4. Key locality.
    let snowflake = idgen::Generator::builder().worker(1).build().unwrap();
    let snowflakes: Vec<i64> = (0..ROWS)
        .map(|_| snowflake.next_id().unwrap().as_i64())
        .collect();
    let block_alloc = fixed_allocator(MemoryStore::default(), 1_000);
    let block_values: Vec<i64> = (0..ROWS)
        .map(|_| block_alloc.next().unwrap() as i64)
        .collect();
    let uuid7 = idgen::Uuid7Generator::new().unwrap();
    let v7: Vec<String> = (0..ROWS)
        .map(|_| uuid7.next_uuid().unwrap().to_string())
        .collect();
    let v4: Vec<String> = (0..ROWS)
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    let mut locality =
        |kind: &str, column: &str, insert: &mut dyn FnMut(&mut postgres::Client, usize)| {
            let table = format!("idgen_locality_{kind}");
            client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (k {column} PRIMARY KEY, v int NOT NULL)"
            ))
            .unwrap();
            let started = Instant::now();
            for batch in 0..ROWS / BATCH {
                insert(&mut client, batch);
            }
            let seconds = started.elapsed().as_secs_f64();
            let row = client
                .query_one(
                    &format!(
                        "SELECT pg_relation_size('{table}_pkey'), pg_relation_size('{table}')"
                    ),
                    &[],
                )
                .unwrap();
            let (index, heap): (i64, i64) = (row.get(0), row.get(1));
            json.number(&format!("locality_{kind}_s"), seconds);
            json.number(&format!("locality_{kind}_index_bytes"), index as f64);
            json.number(&format!("locality_{kind}_table_bytes"), heap as f64);
            client
                .batch_execute(&format!("DROP TABLE {table}"))
                .unwrap();
        };
    locality(
        "snowflake",
        "bigint",
        &mut inserter("snowflake", snowflakes, "k", "bigint"),
    );
    locality(
        "blocks",
        "bigint",
        &mut inserter("blocks", block_values, "k", "bigint"),
    );
    locality(
        "uuidv7",
        "uuid",
        &mut inserter("uuidv7", v7, "k::uuid", "text"),
    );
    locality(
        "uuidv4",
        "uuid",
        &mut inserter("uuidv4", v4, "k::uuid", "text"),
    );
}

fn main() {
    // `cargo bench` passes harness flags; a filter naming another bench skips this binary.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.as_deref().is_some_and(|f| f != "blocks") {
        return;
    }
    let mut json = Json(Vec::new());
    hot_path(&mut json);
    round_trips(&mut json);
    match std::env::var("IDGEN_POSTGRES_URL") {
        #[cfg(feature = "postgres")]
        Ok(url) => postgres(&mut json, &url),
        _ => println!(
            "PostgreSQL parts skipped: run with --features postgres and IDGEN_POSTGRES_URL set"
        ),
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/idgen-bench");
    std::fs::create_dir_all(&dir).expect("create target/idgen-bench");
    let text = format!("{{\n{}\n}}\n", json.0.join(",\n"));
    std::fs::write(dir.join("blocks.json"), text).expect("write blocks.json");
}
