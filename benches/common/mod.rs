//! Shared pieces of the benches: the baselines and a helper that times a closure on N
//! threads released together.

#![allow(dead_code)] // each bench uses a different part

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use idgen::{Clock, Generator, Layout, MonotonicClock, RecentClock};

/// 41 bits of time, 22 of sequence: 4 billion IDs per second, never used up in a bench.
pub fn roomy_layout() -> Layout {
    Layout::new(41, 0, 0, 22).unwrap()
}

pub use bursts::clock;

/// One calibrated monotonic clock per bench process, cloned everywhere.
pub fn monotonic_clock() -> MonotonicClock {
    static CLOCK: std::sync::OnceLock<MonotonicClock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(MonotonicClock::new).clone()
}

/// One recent clock (one upkeep thread) per bench process.
pub fn recent_clock() -> RecentClock {
    static CLOCK: std::sync::OnceLock<RecentClock> = std::sync::OnceLock::new();
    CLOCK
        .get_or_init(|| {
            RecentClock::with_interval(monotonic_clock(), idgen::RECENT_CLOCK_INTERVAL).unwrap()
        })
        .clone()
}

pub fn idgen_on<C: Clock>(layout: Layout, clock: C) -> Generator<C> {
    Generator::builder()
        .layout(layout)
        .clock(clock)
        .build()
        .unwrap()
}

/// Runs `per_thread(iters)` on `threads` threads that start together; returns the wall time
/// from the start to the last thread's end, which criterion divides by `iters`: time per
/// call as seen by each thread.
pub fn time_on_threads(threads: usize, iters: u64, per_thread: impl Fn(u64) + Sync) -> Duration {
    let barrier = Barrier::new(threads + 1);
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                per_thread(iters);
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every thread before returning.
        start
    })
    .elapsed()
}

/// The floor: one bare atomic read-modify-write per ID, no clock, no layout.
#[derive(Default)]
pub struct FetchAdd(AtomicU64);

impl FetchAdd {
    #[inline]
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// The floor of any compare-and-swap generator: load, add one, compare-and-swap, retry.
#[derive(Default)]
pub struct CasLoop(AtomicU64);

impl CasLoop {
    #[inline]
    pub fn next(&self) -> u64 {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            match self.0.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return current,
                Err(actual) => current = actual,
            }
        }
    }
}

/// The same rules as idgen's generator (read the clock, same millisecond: sequence + 1,
/// new millisecond: sequence 0, used up: wait for the next, cheap clock reading first and
/// the precise one when it would wait), guarded by a `Mutex`.
pub struct MutexGenerator<C> {
    state: Mutex<(u64, u64)>,
    clock: C,
    epoch_unix_ms: u64,
    sequence_bits: u32,
}

impl<C: Clock> MutexGenerator<C> {
    pub fn new(layout: Layout, clock: C) -> Self {
        MutexGenerator {
            state: Mutex::new((0, 0)),
            clock,
            epoch_unix_ms: layout.epoch_unix_ms(),
            sequence_bits: layout.sequence_bits(),
        }
    }

    #[inline]
    pub fn next(&self) -> u64 {
        let max_sequence = (1u64 << self.sequence_bits) - 1;
        let mut now_unix_ms = self.clock.recent_unix_ms();
        loop {
            let now = now_unix_ms - self.epoch_unix_ms;
            let mut state = self.state.lock().unwrap();
            let (last_ms, sequence) = *state;
            if now > last_ms {
                *state = (now, 0);
                return now << self.sequence_bits;
            }
            if sequence < max_sequence {
                *state = (last_ms, sequence + 1);
                return (last_ms << self.sequence_bits) | (sequence + 1);
            }
            drop(state);
            std::hint::spin_loop();
            now_unix_ms = self.clock.now_unix_ms();
        }
    }
}

/// Keeps the optimiser from dropping a result.
#[inline]
pub fn keep<T>(value: T) {
    black_box(value);
}
pub mod bursts;
pub mod entrants;
pub mod peers;
