//! Many threads, one generator, the real clock: millions of IDs, all unique, and each
//! thread's IDs strictly increasing.

use idgen::{Generator, Id, Layout};

mod common;

const THREADS: usize = 8;

/// Checks the IDs of `THREADS` threads released together (see `common`) and counts them.
fn check_shared<F>(produce: F) -> usize
where
    F: Fn() -> Vec<Id> + Sync,
{
    common::produce_on_threads(THREADS, produce)
        .iter()
        .map(Vec::len)
        .sum()
}

#[test]
fn eight_threads_share_one_generator_with_next_id() {
    let generator = Generator::builder().build().unwrap();
    let total = check_shared(|| (0..500_000).map(|_| generator.next_id().unwrap()).collect());
    assert_eq!(total, 4_000_000);
    assert!(
        generator.stats().sequence_exhausted > 0,
        "never reached the ceiling"
    );
}

#[test]
fn eight_threads_share_one_generator_with_next_ids() {
    let generator = Generator::builder().build().unwrap();
    let total = check_shared(|| {
        let mut ids = Vec::with_capacity(500_000);
        for size in [1, 7, 100, 1000, 4096, 5000].iter().cycle().take(300) {
            ids.extend(generator.next_ids(*size).unwrap());
        }
        ids
    });
    assert_eq!(total, 8 * 50 * (1 + 7 + 100 + 1000 + 4096 + 5000));
}

#[test]
fn eight_threads_mixing_single_ids_and_batches_on_a_tiny_sequence() {
    // 64 IDs per millisecond: nearly every call waits for the clock.
    let generator = Generator::builder()
        .layout(Layout::new(47, 5, 5, 6).unwrap())
        .build()
        .unwrap();
    let total = check_shared(|| {
        let mut ids = Vec::new();
        for round in 0..1_000 {
            if round % 10 == 0 {
                ids.extend(generator.next_ids(50).unwrap());
            } else {
                ids.push(generator.next_id().unwrap());
            }
        }
        ids
    });
    assert_eq!(total, 8 * (100 * 50 + 900));
}

#[test]
fn eight_threads_share_one_generator_on_the_recent_clock() {
    let generator = Generator::builder()
        .clock(idgen::RecentClock::new().unwrap())
        .build()
        .unwrap();
    let total = check_shared(|| (0..500_000).map(|_| generator.next_id().unwrap()).collect());
    assert_eq!(total, 4_000_000);
    let now = idgen::Clock::now_unix_ms(generator.clock());
    let newest = generator
        .decode(generator.high_water_mark().unwrap())
        .unix_ms;
    assert!(
        newest <= now,
        "an ID dated {newest}, after the clock's {now}"
    );
}
