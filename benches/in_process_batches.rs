//! The in-process figure the HTTP service is compared with: `next_ids(n)` on the default
//! layout and clock, from one thread, for a few seconds. Prints one JSON line:
//! `{"n": N, "seconds": S, "ids": I, "ids_per_second": R}`.
//!
//! `cargo bench --bench in_process_batches -- 1000` (n defaults to 1000).

use std::time::{Duration, Instant};

use idgen::Generator;

fn main() {
    // Cargo passes `--bench`; the batch size is the first plain number, if any.
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(1000);
    let generator = Generator::builder().build().expect("default generator");
    let run = Duration::from_secs(3);
    let started = Instant::now();
    let mut ids = 0u64;
    let mut last = None;
    while started.elapsed() < run {
        let batch = generator.next_ids(n).expect("next_ids");
        assert!(last < batch.first().copied(), "batches must increase");
        last = batch.last().copied();
        ids += batch.len() as u64;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"n\": {n}, \"seconds\": {seconds:.3}, \"ids\": {ids}, \"ids_per_second\": {:.0}}}",
        ids as f64 / seconds
    );
}
