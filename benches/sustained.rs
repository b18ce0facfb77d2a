//! Sustained IDs per second over a few seconds, 1 and 2 threads sharing one instance of each
//! entrant at its default configuration, with every ID kept and duplicates counted.
//! Writes `target/idgen-bench/sustained.json` for `benches/report.py`.
//!
//! A bench binary rather than a criterion bench: the point is a long, fixed run that counts
//! what it produced, not a statistic over many short ones.

mod common;

use std::fmt::Write as _;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::entrants::{Idgen, IdgenRecent, IdgenUlid, IdgenUuid7};
use common::peers::{
    Ferroid, IdGenerator, Peer, RsSnowflake, Scru128, SnowflakeMe, Snowflaked, Sonyflake, Ulid,
    UuidContextV7, UuidV7,
};

const RUN: Duration = Duration::from_secs(3);

struct Row {
    name: &'static str,
    threads: usize,
    ids: usize,
    seconds: f64,
    duplicates: usize,
    out_of_order: usize,
}

fn run<P: Peer>(rows: &mut Vec<Row>) {
    let peer = P::new();
    for threads in [1usize, 2] {
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(threads + 1);
        let (per_thread, seconds) = thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut ids: Vec<u128> = Vec::with_capacity(16 << 20);
                        barrier.wait();
                        while !stop.load(Ordering::Relaxed) {
                            for _ in 0..256 {
                                ids.push(peer.next());
                            }
                        }
                        ids
                    })
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            thread::sleep(RUN);
            stop.store(true, Ordering::Relaxed);
            let per_thread: Vec<Vec<u128>> =
                handles.into_iter().map(|h| h.join().unwrap()).collect();
            (per_thread, start.elapsed().as_secs_f64())
        });
        let out_of_order = per_thread
            .iter()
            .map(|ids| ids.windows(2).filter(|w| w[0] >= w[1]).count())
            .sum();
        let mut all: Vec<u128> = per_thread.concat();
        let ids = all.len();
        all.sort_unstable();
        all.dedup();
        let row = Row {
            name: P::NAME,
            threads,
            ids,
            seconds,
            duplicates: ids - all.len(),
            out_of_order,
        };
        eprintln!(
            "{:>14} {} thread(s): {:>12.0} IDs/s, {} duplicates, {} out of order",
            row.name,
            threads,
            ids as f64 / seconds,
            row.duplicates,
            row.out_of_order
        );
        rows.push(row);
    }
}

fn main() {
    // `cargo bench` passes harness flags; a filter argument that names no entrant here
    // (e.g. `cargo bench --bench peers`) skips this binary.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.as_deref().is_some_and(|f| f != "sustained") {
        return;
    }
    let mut rows = Vec::new();
    run::<Idgen>(&mut rows);
    run::<IdgenRecent>(&mut rows);
    run::<Ferroid>(&mut rows);
    run::<SnowflakeMe>(&mut rows);
    run::<Snowflaked>(&mut rows);
    run::<RsSnowflake>(&mut rows);
    run::<Sonyflake>(&mut rows);
    run::<IdGenerator>(&mut rows);
    run::<IdgenUuid7>(&mut rows);
    run::<UuidV7>(&mut rows);
    run::<UuidContextV7>(&mut rows);
    run::<IdgenUlid>(&mut rows);
    run::<Ulid>(&mut rows);
    run::<Scru128>(&mut rows);

    let mut json = String::from("[\n");
    for (i, row) in rows.iter().enumerate() {
        let _ = writeln!(
            json,
            "  {{\"name\": \"{}\", \"threads\": {}, \"ids\": {}, \"seconds\": {:.4}, \"duplicates\": {}, \"out_of_order\": {}}}{}",
            row.name,
            row.threads,
            row.ids,
            row.seconds,
            row.duplicates,
            row.out_of_order,
            if i + 1 < rows.len() { "," } else { "" }
        );
    }
    json.push_str("]\n");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/idgen-bench");
    std::fs::create_dir_all(&dir).expect("create target/idgen-bench");
    std::fs::write(dir.join("sustained.json"), json).expect("write sustained.json");
}
