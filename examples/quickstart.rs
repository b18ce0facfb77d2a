//! Generates IDs on the real clock from several threads, then decodes and checks them.
//!
//! `cargo run --release --example quickstart`

use std::collections::HashSet;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use idgen::{Generator, Id};

fn main() -> Result<(), idgen::Error> {
    let generator = Arc::new(Generator::builder().datacenter(1).worker(7).build()?);
    let layout = *generator.layout();
    println!(
        "layout: {} time bits ({:.1} years from epoch {} ms), {} datacenter, {} worker, {} sequence bits",
        layout.time_bits(),
        layout.lifetime_years(),
        layout.epoch_unix_ms(),
        layout.datacenter_bits(),
        layout.worker_bits(),
        layout.sequence_bits()
    );
    println!(
        "capacity: {} nodes x {} IDs/s each",
        layout.nodes(),
        layout.ids_per_second_per_node()
    );

    let id = generator.next_id()?;
    let parts = generator.decode(id);
    println!("\none ID: {id} (base32 {})", id.to_base32());
    println!(
        "  unix_ms {} | datacenter {} | worker {} | sequence {}",
        parts.unix_ms, parts.datacenter, parts.worker, parts.sequence
    );
    let round_trip: Id = id.to_string().parse()?;
    assert_eq!(round_trip, id);

    const THREADS: usize = 4;
    const PER_THREAD: usize = 250_000;
    let started = Instant::now();
    let per_thread = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| s.spawn(|| (0..PER_THREAD).map(|_| generator.next_id()).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect::<Result<Vec<Vec<Id>>, _>>()
    })?;
    let elapsed = started.elapsed();
    let increasing = per_thread
        .iter()
        .all(|ids| ids.windows(2).all(|w| w[0] < w[1]));
    let unique: HashSet<Id> = per_thread.iter().flatten().copied().collect();
    println!(
        "\n{THREADS} threads x {PER_THREAD} IDs in {:.0} ms: {} unique, each thread increasing: {increasing}",
        elapsed.as_secs_f64() * 1000.0,
        unique.len()
    );

    let batch = generator.next_ids(10_000)?;
    let first = generator.decode(batch[0]);
    let last = generator.decode(batch[batch.len() - 1]);
    println!(
        "a batch of {} IDs from {} ms to {} ms, all above the threads' IDs: {}",
        batch.len(),
        first.unix_ms,
        last.unix_ms,
        unique.iter().all(|&id| id < batch[0])
    );
    println!("slow paths so far: {:?}", generator.stats());

    assert_eq!(unique.len(), THREADS * PER_THREAD);
    assert!(increasing);
    Ok(())
}
