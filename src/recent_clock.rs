//! The fast clock: a cached reading kept current by a background thread. Not built under
//! loom, whose models run no real threads; loom models inject a lagging clock instead.

use std::fmt;
use std::time::Duration;

use crate::clock::{Clock, MonotonicClock};
use crate::error::Error;
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};

/// Default refresh interval of [`RecentClock`]'s upkeep thread.
pub const RECENT_CLOCK_INTERVAL: Duration = Duration::from_micros(500);

/// The fast clock: a [`MonotonicClock`] read by a background thread every
/// [`RECENT_CLOCK_INTERVAL`], so that [`Clock::recent_unix_ms`] costs one atomic load
/// instead of a clock read.
///
/// A generator on this clock issues below-ceiling IDs with one load of the cached reading
/// and one compare-and-swap. Its precise reading ([`Clock::now_unix_ms`]) is the underlying
/// `MonotonicClock`, which the generator consults whenever the cached one would make it
/// wait or refuse: so IDs are never dated ahead of the precise clock, a used-up millisecond
/// moves on as soon as the precise clock does, and the cached reading's lag (the interval
/// plus the thread's wake-up latency, well under 1 ms on an idle machine, more on an
/// overloaded one) only ever makes an ID's time a little early.
///
/// Clones share one upkeep thread; it stops, and is joined, when the last clone is dropped.
///
/// ```
/// use idgen::{Generator, RecentClock};
/// let generator = Generator::builder().clock(RecentClock::new()?).build()?;
/// let (a, b) = (generator.next_id()?, generator.next_id()?);
/// assert!(a < b);
/// # Ok::<(), idgen::Error>(())
/// ```
#[derive(Clone)]
pub struct RecentClock {
    shared: Arc<RecentShared>,
    _upkeep: Arc<Upkeep>,
}

struct RecentShared {
    precise: MonotonicClock,
    recent_unix_ms: AtomicU64,
    stop: AtomicBool,
}

/// Owns the upkeep thread: dropped with the last clone of the clock, it stops the thread.
struct Upkeep {
    shared: Arc<RecentShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecentClock {
    /// A recent clock over a new [`MonotonicClock`], refreshed every
    /// [`RECENT_CLOCK_INTERVAL`]. Fails only if the upkeep thread cannot be started.
    pub fn new() -> Result<Self, Error> {
        Self::with_interval(MonotonicClock::new(), RECENT_CLOCK_INTERVAL)
    }

    /// A recent clock over `precise`, refreshed every `interval`.
    pub fn with_interval(precise: MonotonicClock, interval: Duration) -> Result<Self, Error> {
        let shared = Arc::new(RecentShared {
            recent_unix_ms: AtomicU64::new(precise.now_unix_ms()),
            precise,
            stop: AtomicBool::new(false),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("idgen-recent-clock".into())
            .spawn(move || {
                while !worker.stop.load(Ordering::Acquire) {
                    let now = worker.precise.now_unix_ms();
                    worker.recent_unix_ms.store(now, Ordering::Release);
                    std::thread::park_timeout(interval);
                }
            })
            .map_err(|error| Error::ClockThread {
                reason: error.to_string(),
            })?;
        Ok(RecentClock {
            _upkeep: Arc::new(Upkeep {
                shared: shared.clone(),
                thread: Some(thread),
            }),
            shared,
        })
    }
}

impl Drop for Upkeep {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // The thread only loads, stores and parks: it cannot panic, and a join error
            // would carry nothing to act on.
            let _ = thread.join();
        }
    }
}

impl Clock for RecentClock {
    #[inline]
    fn now_unix_ms(&self) -> u64 {
        self.shared.precise.now_unix_ms()
    }

    #[inline]
    fn recent_unix_ms(&self) -> u64 {
        self.shared.recent_unix_ms.load(Ordering::Acquire)
    }
}

impl fmt::Debug for RecentClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecentClock")
            .field("recent_unix_ms", &self.recent_unix_ms())
            .field("precise", &self.shared.precise)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_clock_lags_the_precise_reading_by_little_and_never_leads_it() {
        let clock = RecentClock::new().unwrap();
        let mut lags = Vec::new();
        for _ in 0..200 {
            let recent = clock.recent_unix_ms();
            let precise = clock.now_unix_ms();
            assert!(
                recent <= precise,
                "recent {recent} ahead of precise {precise}"
            );
            lags.push(precise - recent);
            std::thread::sleep(Duration::from_micros(250));
        }
        // A loaded machine can delay the upkeep thread now and then; most readings are
        // within a millisecond or two.
        lags.sort_unstable();
        assert!(
            lags[lags.len() / 2] <= 2,
            "median lag {} ms",
            lags[lags.len() / 2]
        );
    }

    #[test]
    fn recent_clock_stops_its_thread_when_the_last_clone_is_dropped() {
        let clock = RecentClock::new().unwrap();
        let probe = Arc::downgrade(&clock.shared);
        let clone = clock.clone();
        drop(clock);
        // The upkeep thread still refreshes the reading for the remaining clone.
        let before = clone.recent_unix_ms();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while clone.recent_unix_ms() == before {
            assert!(
                std::time::Instant::now() < deadline,
                "reading stopped moving"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(clone);
        // The upkeep thread held the last other reference: joined means released.
        assert!(probe.upgrade().is_none(), "upkeep thread still running");
    }
}
