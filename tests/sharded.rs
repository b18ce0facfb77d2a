//! A sharded generator: unique across shards, increasing per thread, pinned threads, and
//! more threads than shards.

use std::collections::HashSet;

use idgen::{Error, Id, ManualClock, ShardedGenerator};

mod common;
use common::produce_on_threads as run;

#[test]
fn sixteen_threads_on_four_shards_issue_millions_of_unique_ids() {
    let sharded = ShardedGenerator::builder()
        .datacenter(2)
        .workers(20..24)
        .shards(4)
        .build()
        .unwrap();
    let per_thread = run(16, || {
        (0..250_000).map(|_| sharded.next_id().unwrap()).collect()
    });
    assert_eq!(per_thread.iter().map(Vec::len).sum::<usize>(), 4_000_000);
    for ids in &per_thread {
        // Pinned: one thread, one shard, one worker number.
        let workers: HashSet<u64> = ids.iter().map(|&id| sharded.decode(id).worker).collect();
        assert_eq!(
            workers.len(),
            1,
            "a thread moved between shards: {workers:?}"
        );
        assert!(workers.iter().all(|w| (20..24).contains(w)));
        assert!(ids.iter().all(|&id| sharded.decode(id).datacenter == 2));
    }
}

#[test]
fn more_threads_than_shards_with_batches() {
    let sharded = ShardedGenerator::builder().workers(0..3).build().unwrap();
    assert!(sharded.shard_count() <= 3);
    let per_thread = run(7, || {
        let mut ids = Vec::new();
        for n in [1, 100, 4096, 5000].iter().cycle().take(40) {
            ids.extend(sharded.next_ids(*n).unwrap());
        }
        ids
    });
    assert_eq!(per_thread.len(), 7);
}

#[test]
fn a_thread_keeps_its_shard_across_calls_and_apis() {
    let clock = ManualClock::new(idgen::DEFAULT_EPOCH_UNIX_MS + 5);
    let sharded = ShardedGenerator::builder()
        .workers(4..12)
        .shards(8)
        .clock(clock)
        .build()
        .unwrap();
    let worker = sharded.shard().worker();
    let single = sharded.next_id().unwrap();
    let batch = sharded.next_ids(10).unwrap();
    let mut buffer = [Id::MIN; 5];
    sharded.fill_ids(&mut buffer).unwrap();
    for id in std::iter::once(single).chain(batch).chain(buffer) {
        assert_eq!(sharded.decode(id).worker, worker);
    }
    assert_eq!(
        sharded.shards().map(|g| g.worker()).collect::<Vec<_>>(),
        (4..12).collect::<Vec<_>>()
    );
}

#[test]
fn bad_shard_configurations_are_rejected() {
    let build = |workers: std::ops::Range<u64>, shards| {
        ShardedGenerator::builder()
            .workers(workers)
            .shards(shards)
            .build()
            .map(|_| ())
    };
    assert_eq!(
        build(0..4, 0),
        Err(Error::ShardWorkers {
            shards: 0,
            workers: 4
        })
    );
    assert_eq!(
        build(0..4, 5),
        Err(Error::ShardWorkers {
            shards: 5,
            workers: 4
        })
    );
    #[allow(clippy::reversed_empty_ranges)] // on purpose: an empty range from a config
    let empty = 9..3;
    assert_eq!(
        build(empty, 1),
        Err(Error::ShardWorkers {
            shards: 1,
            workers: 0
        })
    );
    assert!(build(28..32, 4).is_ok());
}

#[test]
fn stats_add_up_over_the_shards() {
    let clock = ManualClock::new(idgen::DEFAULT_EPOCH_UNIX_MS + 5);
    let sharded = ShardedGenerator::builder()
        .workers(0..2)
        .shards(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    for shard in sharded.shards() {
        shard.next_ids(4096).unwrap();
        assert!(matches!(shard.try_next_id(), Err(Error::WouldBlock { .. })));
    }
    assert_eq!(sharded.stats().sequence_exhausted, 2);
}

#[test]
fn every_shard_resumes_after_a_millisecond_mark() {
    let now = idgen::DEFAULT_EPOCH_UNIX_MS + 1_000_000;
    let clock = ManualClock::new(now);
    // An earlier run of the same worker range issued IDs up to 50 ms ahead of this clock
    // (stepped back since): no shard issues before the clock has passed that mark.
    let sharded = ShardedGenerator::builder()
        .workers(0..4)
        .shards(4)
        .clock(clock.clone())
        .clock_back_tolerance_ms(100)
        .resume_after_unix_ms(now + 50)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let wait = sharded.try_next_id();
                assert!(
                    matches!(wait, Err(Error::WouldBlock { wait_ms: 51 })),
                    "{wait:?}"
                );
            });
        }
    });
    clock.set(now + 51);
    let per_thread = run(4, || (0..100).map(|_| sharded.next_id().unwrap()).collect());
    for ids in &per_thread {
        assert!(ids.iter().all(|&id| sharded.decode(id).unix_ms == now + 51));
    }
}
