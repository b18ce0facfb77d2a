//! Threads are dealt to shards round-robin. Alone in its own test binary, because the
//! deal is process-wide: threads of other tests running in parallel would take turns too.

use std::collections::HashMap;
use std::thread;

use idgen::ShardedGenerator;

#[test]
fn threads_are_dealt_to_shards_round_robin() {
    let sharded = ShardedGenerator::builder()
        .workers(0..4)
        .shards(4)
        .build()
        .unwrap();
    // One thread at a time, so the deal order is the spawn order.
    let workers: Vec<u64> = (0..12)
        .map(|_| {
            thread::scope(|s| {
                s.spawn(|| sharded.decode(sharded.next_id().unwrap()).worker)
                    .join()
                    .unwrap()
            })
        })
        .collect();
    let mut per_worker: HashMap<u64, usize> = HashMap::new();
    for &w in &workers {
        *per_worker.entry(w).or_default() += 1;
    }
    assert_eq!(per_worker.len(), 4, "{workers:?}");
    assert!(per_worker.values().all(|&n| n == 3), "{workers:?}");
    // Consecutive threads land on consecutive shards.
    assert!(
        workers.windows(2).all(|w| w[1] == (w[0] + 1) % 4),
        "{workers:?}"
    );
}
