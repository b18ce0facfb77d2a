//! Timing in bursts below the per-millisecond ceiling: the scenario of the peer page, shared
//! with `benches/uuid_fast_rng` (which includes this file by path), so it depends on idgen
//! and std only.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use idgen::{Clock, DefaultClock};

/// The default clock, built once per bench process (its first build calibrates) and cloned.
pub fn clock() -> DefaultClock {
    static CLOCK: std::sync::OnceLock<DefaultClock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(DefaultClock::new).clone()
}

/// IDs per millisecond across all threads in the below-ceiling scenario.
pub const BURST_IDS: u64 = 1_500;

/// Waits until the millisecond changes on idgen's clock. It yields rather than spins: the
/// machine has 2 cores, and a spinning coordinator would starve the entrants' own clock
/// threads (ferroid's, `RecentClock`'s) of the core they need between bursts.
fn wait_for_tick() {
    let clock = clock();
    let start = clock.now_unix_ms();
    while clock.now_unix_ms() == start {
        thread::yield_now();
    }
}

/// Runs `bursts` bursts of `calls_per_burst` calls of `call` on each of `threads` threads,
/// each burst right after a millisecond tick, and returns the median burst's wall time
/// (from the moment a burst is released to the moment its last call returns) times
/// `bursts`. The median, not the sum: on a shared 2-core machine one burst in many loses
/// its core to another process, and a sum would charge that to the entrant.
///
/// The threads are released together: a `Barrier` wakes them after the tick, then each
/// spins until the last one has woken, which releases the burst. (Timing each thread from
/// its own wake-up would let one finish its burst before the other runs, and hide the
/// contention the burst is meant to show.)
fn in_bursts(
    threads: usize,
    bursts: u64,
    calls_per_burst: u64,
    ticks_between: u64,
    call: &(impl Fn() + Sync),
) -> Duration {
    let epoch = Instant::now();
    let nanos = || epoch.elapsed().as_nanos() as u64;
    let barrier = Barrier::new(threads + 1);
    let woken = AtomicU64::new(0);
    let released = AtomicU64::new(0);
    let released_at = AtomicU64::new(0);
    let finished = AtomicU64::new(0);
    let last_return = AtomicU64::new(0);
    let threads = threads as u64;
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for burst in 1..=bursts {
                    barrier.wait();
                    if woken.fetch_add(1, Ordering::AcqRel) + 1 == threads * burst {
                        released_at.store(nanos(), Ordering::Relaxed);
                        released.store(burst, Ordering::Release);
                    }
                    while released.load(Ordering::Acquire) < burst {
                        std::hint::spin_loop();
                    }
                    for _ in 0..calls_per_burst {
                        call();
                    }
                    last_return.fetch_max(nanos(), Ordering::AcqRel);
                    finished.fetch_add(1, Ordering::AcqRel);
                }
            });
        }
        let mut walls = Vec::with_capacity(bursts as usize);
        for burst in 1..=bursts {
            for _ in 0..ticks_between {
                wait_for_tick();
            }
            barrier.wait();
            while finished.load(Ordering::Acquire) < threads * burst {
                thread::yield_now();
            }
            walls.push(last_return.load(Ordering::Acquire) - released_at.load(Ordering::Relaxed));
        }
        walls.sort_unstable();
        Duration::from_nanos(walls[walls.len() / 2] * bursts)
    })
}

/// `in_bursts` for `ids` IDs in all, `per_burst` per thread per burst, scaled back to
/// exactly `ids`.
pub fn wall_per(
    ids: u64,
    threads: usize,
    per_burst: u64,
    ticks: u64,
    call: &(impl Fn() + Sync),
) -> Duration {
    let per_burst_all = per_burst * threads as u64;
    let bursts = ids.div_ceil(per_burst_all);
    in_bursts(threads, bursts, per_burst, ticks, call)
        .mul_f64(ids as f64 / (bursts * per_burst_all) as f64)
}
