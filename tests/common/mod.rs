//! Test helpers shared by the integration tests and the loom models.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::Barrier;
use std::thread;

use idgen::{Clock, Id, ManualClock};

/// A clock whose cheap reading lags its precise one, as `RecentClock`'s may. Each side is a
/// `ManualClock`, set by hand.
#[derive(Clone, Debug)]
pub struct LaggingClock {
    pub recent: ManualClock,
    pub precise: ManualClock,
}

impl Clock for LaggingClock {
    fn now_unix_ms(&self) -> u64 {
        self.precise.now_unix_ms()
    }
    fn recent_unix_ms(&self) -> u64 {
        self.recent.now_unix_ms()
    }
}

/// Runs `produce` on `threads` real threads released together and checks what they made:
/// each thread's IDs strictly increasing, and no ID twice across all of them. Returns each
/// thread's IDs.
pub fn produce_on_threads<F>(threads: usize, produce: F) -> Vec<Vec<Id>>
where
    F: Fn() -> Vec<Id> + Sync,
{
    let barrier = Barrier::new(threads);
    let per_thread: Vec<Vec<Id>> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    produce()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (thread, ids) in per_thread.iter().enumerate() {
        if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
            panic!("thread {thread}: {:?} then {:?}", w[0], w[1]);
        }
    }
    let mut all: Vec<Id> = per_thread.concat();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "{} duplicate IDs", total - all.len());
    per_thread
}
