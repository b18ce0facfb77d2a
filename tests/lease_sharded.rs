//! A sharded generator on leased numbers, in a test binary of its own so that the keeper
//! threads it counts are its own.

#[path = "common/leases.rs"]
mod leases;

use std::thread;
use std::time::Duration;

use idgen::lease::{FileStore, LeaseState, LeasedGenerator, WorkerRange};
use idgen::{Clock, SystemClock};
use leases::{new_store_dir, wait_for};

fn range(text: &str) -> WorkerRange {
    WorkerRange::parse(0, text).unwrap()
}

#[test]
fn a_sharded_generator_takes_one_number_per_shard_keeps_them_with_one_thread_and_frees_them_together()
 {
    let dir = new_store_dir("sharded");
    let sharded = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-7"))
        .renew_every(Duration::from_millis(50))
        .acquire_sharded(3)
        .unwrap();
    let mut workers: Vec<u64> = sharded.shards().map(|shard| shard.worker()).collect();
    workers.sort_unstable();
    assert_eq!(workers, [0, 1, 2]);
    // Another process's view: those three are held.
    let other = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-7"))
        .acquire()
        .unwrap();
    assert_eq!(other.worker(), 3);
    other.release().unwrap();
    // One keeper renews all three.
    wait_for("renewals of every shard", || {
        sharded
            .lease_stats()
            .iter()
            .all(|stats| stats.renewals >= 2)
    });
    let lease_threads = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "idgen-lease")
        .count();
    assert_eq!(lease_threads, 1, "one keeper thread for every shard");
    // Four threads on three shards: every ID unique, each thread's increasing.
    let per_thread: Vec<Vec<idgen::Id>> = thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| (0..20_000).map(|_| sharded.next_id().unwrap()).collect()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = Vec::new();
    for ids in &per_thread {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "a thread's IDs went down"
        );
        let worker = sharded.decode(ids[0]).worker;
        assert!(ids.iter().all(|&id| sharded.decode(id).worker == worker));
        all.extend(ids.iter().copied());
    }
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count, "duplicates across shards");
    assert!(
        sharded
            .lease_stats()
            .iter()
            .all(|s| s.state == LeaseState::Valid)
    );
    sharded.release().unwrap();
    // Released together, with marks at most this millisecond: once it has passed, the next
    // three take the same numbers at once.
    let released_at = SystemClock.now_unix_ms();
    wait_for("the release's millisecond to pass", || {
        SystemClock.now_unix_ms() > released_at
    });
    let again = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-2"))
        .acquire_sharded(3)
        .unwrap();
    let mut workers: Vec<u64> = again.shards().map(|shard| shard.worker()).collect();
    workers.sort_unstable();
    assert_eq!(workers, [0, 1, 2]);
}
