//! The cached clocks: a reading kept current by a background thread, so a call costs one
//! atomic load. [`DefaultClock`] shares one thread per process and parks it when idle;
//! [`RecentClock`] has a thread of its own. Not built under loom, whose models run no real
//! threads; loom models inject a lagging clock instead.

use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

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
        stop_upkeep(&self.shared.stop, self.thread.take());
    }
}

/// Tells an upkeep thread to stop, wakes it and joins it.
fn stop_upkeep(stop: &AtomicBool, thread: Option<std::thread::JoinHandle<()>>) {
    stop.store(true, Ordering::Release);
    if let Some(thread) = thread {
        thread.thread().unpark();
        // The thread only loads, stores and parks: it cannot panic, and a join error would
        // carry nothing to act on.
        let _ = thread.join();
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

/// How long the shared upkeep thread of [`DefaultClock`] goes on refreshing after the last
/// reading was asked for, before it parks.
pub const DEFAULT_CLOCK_IDLE: Duration = Duration::from_millis(100);

/// The default clock of [`Generator`](crate::Generator), [`ShardedGenerator`](crate::ShardedGenerator)
/// and [`LeasedGenerator`](crate::lease::LeasedGenerator): a cached [`MonotonicClock`]
/// reading kept current by one upkeep thread that every `DefaultClock` of the process
/// shares.
///
/// A call costs one or two atomic loads instead of a clock read. The thread refreshes the
/// reading every [`RECENT_CLOCK_INTERVAL`] while IDs are asked for, and parks once none has
/// been asked for [`DEFAULT_CLOCK_IDLE`]: an idle process pays no wake-ups at all. The
/// first call after that reads the precise clock itself and wakes the thread. It starts
/// on first use and stops (joined) when the last `DefaultClock` of the process is dropped.
///
/// Every guarantee of [`RecentClock`] holds: the cached reading is never ahead of the
/// precise one, and a generator consults the precise reading before it ever waits or
/// refuses, so the cache's lag can only date an ID a little early. If the thread cannot be
/// started, every call reads the precise clock. Choose [`MonotonicClock`] (one builder call,
/// `.clock(MonotonicClock::new())`) where a library must not start a thread.
///
/// ```
/// use idgen::{DefaultClock, Generator};
/// let generator = Generator::builder().build()?; // a DefaultClock
/// let same: Generator<DefaultClock> = generator;
/// assert!(same.next_id()? < same.next_id()?);
/// # Ok::<(), idgen::Error>(())
/// ```
#[derive(Clone)]
pub struct DefaultClock {
    shared: Arc<DefaultShared>,
    _upkeep: Arc<DefaultUpkeep>,
}

struct DefaultShared {
    precise: MonotonicClock,
    /// The cached reading, 0 while the upkeep thread is parked or not running: readers then
    /// read the precise clock and wake it.
    recent_unix_ms: AtomicU64,
    /// Set by readers when clear, cleared by the upkeep thread once per idle period.
    asked: AtomicBool,
    stop: AtomicBool,
    /// Refreshes so far, for tests and the curious.
    refreshes: AtomicU64,
    thread: OnceLock<std::thread::Thread>,
}

/// Owns the shared upkeep thread: dropped with the last `DefaultClock`, it stops it.
struct DefaultUpkeep {
    shared: Arc<DefaultShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The process's upkeep, while any `DefaultClock` lives.
static DEFAULT_UPKEEP: Mutex<Weak<DefaultUpkeep>> = Mutex::new(Weak::new());

/// The `MonotonicClock` under every `DefaultClock`: built once, since the first
/// `quanta::Clock` of a process calibrates.
fn default_precise() -> MonotonicClock {
    static PRECISE: OnceLock<MonotonicClock> = OnceLock::new();
    PRECISE.get_or_init(MonotonicClock::new).clone()
}

impl DefaultClock {
    /// The process's default clock, starting its upkeep thread if none runs.
    pub fn new() -> Self {
        let mut current = DEFAULT_UPKEEP
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(upkeep) = current.upgrade() {
            return DefaultClock {
                shared: upkeep.shared.clone(),
                _upkeep: upkeep,
            };
        }
        let shared = Arc::new(DefaultShared {
            precise: default_precise(),
            recent_unix_ms: AtomicU64::new(0),
            asked: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            refreshes: AtomicU64::new(0),
            thread: OnceLock::new(),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("idgen-default-clock".into())
            .spawn(move || worker.upkeep())
            .ok();
        if let Some(thread) = &thread {
            let _ = shared.thread.set(thread.thread().clone());
        }
        let upkeep = Arc::new(DefaultUpkeep {
            shared: shared.clone(),
            thread,
        });
        *current = Arc::downgrade(&upkeep);
        DefaultClock {
            shared,
            _upkeep: upkeep,
        }
    }

    /// How many times the upkeep thread has refreshed the cached reading.
    pub fn refreshes(&self) -> u64 {
        self.shared.refreshes.load(Ordering::Relaxed)
    }

    #[cold]
    fn read_and_wake(&self) -> u64 {
        let shared = &*self.shared;
        shared.asked.store(true, Ordering::Relaxed);
        if let Some(thread) = shared.thread.get() {
            thread.unpark();
        }
        shared.precise.now_unix_ms()
    }
}

impl DefaultShared {
    fn upkeep(&self) {
        let mut checked = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            self.recent_unix_ms
                .store(self.precise.now_unix_ms(), Ordering::Release);
            self.refreshes.fetch_add(1, Ordering::Relaxed);
            if checked.elapsed() >= DEFAULT_CLOCK_IDLE {
                checked = Instant::now();
                if !self.asked.swap(false, Ordering::Relaxed) {
                    // Nobody asked for a whole period: stop refreshing. Readers now see 0,
                    // read the precise clock, and unpark this thread.
                    self.recent_unix_ms.store(0, Ordering::Release);
                    while !self.asked.load(Ordering::Relaxed) && !self.stop.load(Ordering::Acquire)
                    {
                        std::thread::park();
                    }
                    checked = Instant::now();
                    continue;
                }
            }
            std::thread::park_timeout(RECENT_CLOCK_INTERVAL);
        }
    }
}

impl Drop for DefaultUpkeep {
    fn drop(&mut self) {
        stop_upkeep(&self.shared.stop, self.thread.take());
    }
}

impl Default for DefaultClock {
    fn default() -> Self {
        DefaultClock::new()
    }
}

impl Clock for DefaultClock {
    #[inline]
    fn now_unix_ms(&self) -> u64 {
        self.shared.precise.now_unix_ms()
    }

    #[inline]
    fn recent_unix_ms(&self) -> u64 {
        let shared = &*self.shared;
        let recent = shared.recent_unix_ms.load(Ordering::Acquire);
        if recent == 0 {
            return self.read_and_wake();
        }
        // A store only when the flag was cleared: once per idle period, not per call.
        if !shared.asked.load(Ordering::Relaxed) {
            shared.asked.store(true, Ordering::Relaxed);
        }
        recent
    }
}

impl fmt::Debug for DefaultClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultClock")
            .field(
                "recent_unix_ms",
                &self.shared.recent_unix_ms.load(Ordering::Relaxed),
            )
            .field("refreshes", &self.refreshes())
            .field("precise", &self.shared.precise)
            .finish()
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
