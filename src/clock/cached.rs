//! The cached clocks: a reading kept current by a background thread, so a call costs one
//! atomic load. [`DefaultClock`] shares one thread per process and parks it when idle;
//! [`RecentClock`] has a thread of its own. The clocks are not built under loom, whose
//! models run no real threads (loom models inject a lagging clock instead); the protocol of
//! the default clock's shared word, [`CachedReading`], is, and has a model of its own.

#[cfg(not(idgen_loom))]
use std::fmt;
#[cfg(not(idgen_loom))]
use std::sync::{Mutex, OnceLock, PoisonError, Weak};
#[cfg(not(idgen_loom))]
use std::time::{Duration, Instant};

#[cfg(not(idgen_loom))]
use crate::clock::{Clock, MonotonicClock};
#[cfg(not(idgen_loom))]
use crate::error::Error;
#[cfg(not(idgen_loom))]
use crate::sync::{Arc, AtomicBool};
use crate::sync::{AtomicU64, Ordering};

/// The shared word of [`DefaultClock`]: `unix_ms << 2 | parked << 1 | asked`.
///
/// One load gives a reader the reading and both flags, so the fast path pays one load and
/// one (never taken) branch: it takes the reading when `asked` is set and `parked` clear.
/// Readers set `asked` when they find it clear, once per idle period, not once per call.
/// The upkeep thread keeps the bit through its refreshes, clears it at the end of each
/// period, and sets `parked` at the end of a period in which nobody set it (or when it
/// stops). A reader that finds `parked` reads the precise clock itself, raises the word to
/// that reading (clearing `parked`, setting `asked`) and wakes the thread.
///
/// Every store raises the reading to a precise reading taken before it, or keeps it; none
/// lowers it, parked or not, in any generation of upkeep thread (the word is one static).
/// So the word is never ahead of the precise clock, and the readings one reader gets,
/// cached or precise, never go backwards.
#[derive(Debug)]
#[doc(hidden)]
pub struct CachedReading(AtomicU64);

const ASKED: u64 = 1;
const PARKED: u64 = 2;
const FLAGS: u64 = ASKED | PARKED;
/// The largest reading the word holds; a precise clock past it (`u64::MAX >> 2` ms, far
/// beyond any layout) is held at it, which is still never ahead.
const MAX_READING: u64 = u64::MAX >> 2;

impl CachedReading {
    /// A word no thread keeps current yet.
    #[cfg(not(idgen_loom))]
    const fn idle() -> Self {
        CachedReading(AtomicU64::new(PARKED))
    }

    /// A word no thread keeps current yet (loom's atomics are not `const`).
    #[cfg(idgen_loom)]
    pub fn idle() -> Self {
        CachedReading(AtomicU64::new(PARKED))
    }

    /// The cached reading, or `None` while no thread keeps it current (then read the precise
    /// clock and call [`CachedReading::resume`]).
    #[inline]
    pub fn read(&self) -> Option<u64> {
        let word = self.0.load(Ordering::Acquire);
        if word & FLAGS != ASKED {
            return self.note_demand(word);
        }
        Some(word >> 2)
    }

    #[cold]
    fn note_demand(&self, word: u64) -> Option<u64> {
        if word & PARKED != 0 {
            return None;
        }
        // Failure means the upkeep thread stored a newer word: this period is noted by the
        // next call that finds the bit clear, or the thread parks and the next call wakes it.
        let _ = self
            .0
            .compare_exchange(word, word | ASKED, Ordering::Relaxed, Ordering::Relaxed);
        Some(word >> 2)
    }

    /// After a reader found the word parked and read the precise clock itself: raises the
    /// word to that reading, unparked, with demand noted. The caller then wakes the upkeep
    /// thread. A reader that returned this precise reading can only see a word at least as
    /// high after.
    pub fn resume(&self, precise_unix_ms: u64) {
        self.update(|word| raised(word, precise_unix_ms) | ASKED);
    }

    /// The upkeep thread's refresh with a precise reading: raises the reading and keeps
    /// `asked`; a parked word (a thread just started or woken) is unparked and counted as
    /// asked.
    pub fn refresh(&self, precise_unix_ms: u64) {
        self.update(|word| {
            let asked = if word & PARKED != 0 {
                ASKED
            } else {
                word & ASKED
            };
            raised(word, precise_unix_ms) | asked
        });
    }

    /// The end of an upkeep period: `true` (busy) if a reader asked during it, and the bit
    /// is cleared for the next; `false` (idle) if nobody did, and the word is now parked:
    /// the thread should park until a reader wakes it.
    pub fn end_period(&self) -> bool {
        let before = self.update(|word| {
            if word & ASKED != 0 {
                word & !ASKED
            } else {
                word | PARKED
            }
        });
        before & ASKED != 0
    }

    /// Whether no thread keeps the word current (`parked`).
    pub fn is_idle(&self) -> bool {
        self.0.load(Ordering::Acquire) & PARKED != 0
    }

    /// The upkeep thread is stopping: no reading is kept current from now on.
    #[cfg(not(idgen_loom))]
    fn clear(&self) {
        self.update(|word| (word & !ASKED) | PARKED);
    }

    /// Applies `next` until it sticks; returns the word it replaced.
    fn update(&self, next: impl Fn(u64) -> u64) -> u64 {
        let mut word = self.0.load(Ordering::Relaxed);
        loop {
            match self.0.compare_exchange_weak(
                word,
                next(word),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(before) => return before,
                Err(actual) => word = actual,
            }
        }
    }
}

/// `word`'s reading raised to `precise_unix_ms` (held at [`MAX_READING`]), with no flags.
fn raised(word: u64, precise_unix_ms: u64) -> u64 {
    (word >> 2).max(precise_unix_ms.min(MAX_READING)) << 2
}

/// Default refresh interval of [`RecentClock`]'s upkeep thread.
#[cfg(not(idgen_loom))]
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
#[cfg(not(idgen_loom))]
pub struct RecentClock {
    shared: Arc<RecentShared>,
    _upkeep: Arc<Upkeep>,
}

#[cfg(not(idgen_loom))]
struct RecentShared {
    precise: MonotonicClock,
    recent_unix_ms: AtomicU64,
    stop: AtomicBool,
}

/// Owns the upkeep thread: dropped with the last clone of the clock, it stops the thread.
#[cfg(not(idgen_loom))]
struct Upkeep {
    shared: Arc<RecentShared>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The process that started the thread (a forked child has no thread to join).
    pid: u32,
}

#[cfg(not(idgen_loom))]
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
                pid: std::process::id(),
            }),
            shared,
        })
    }
}

#[cfg(not(idgen_loom))]
impl Drop for Upkeep {
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            stop_upkeep(&self.shared.stop, self.thread.take());
        }
    }
}

/// Tells an upkeep thread to stop, wakes it and joins it.
#[cfg(not(idgen_loom))]
fn stop_upkeep(stop: &AtomicBool, thread: Option<std::thread::JoinHandle<()>>) {
    stop.store(true, Ordering::Release);
    if let Some(thread) = thread {
        thread.thread().unpark();
        // The thread only loads, stores and parks: it cannot panic, and a join error would
        // carry nothing to act on.
        let _ = thread.join();
    }
}

#[cfg(not(idgen_loom))]
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
#[cfg(not(idgen_loom))]
pub const DEFAULT_CLOCK_IDLE: Duration = Duration::from_millis(100);

/// The default clock of [`Generator`](crate::Generator), [`ShardedGenerator`](crate::ShardedGenerator)
/// and [`LeasedGenerator`](crate::lease::LeasedGenerator): a cached [`MonotonicClock`]
/// reading kept current by one upkeep thread that every `DefaultClock` of the process
/// shares.
///
/// A call costs one atomic load (of one process-wide word) instead of a clock read. The thread refreshes the
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
#[cfg(not(idgen_loom))]
pub struct DefaultClock {
    shared: Arc<DefaultShared>,
    _upkeep: Arc<DefaultUpkeep>,
}

/// The reading every `DefaultClock` of the process shares, on a cache line of its own: a
/// static, so that a read is one load from a fixed address.
#[cfg(not(idgen_loom))]
static DEFAULT_READING: crossbeam_utils::CachePadded<CachedReading> =
    crossbeam_utils::CachePadded::new(CachedReading::idle());

#[cfg(not(idgen_loom))]
struct DefaultShared {
    precise: MonotonicClock,
    /// The process whose upkeep thread this is: a forked child has a copy of this, but not
    /// the thread.
    pid: u32,
    stop: AtomicBool,
    /// Refreshes so far, for tests and the curious.
    refreshes: AtomicU64,
    thread: OnceLock<std::thread::Thread>,
}

/// Owns the shared upkeep thread: dropped with the last `DefaultClock`, it stops it.
#[cfg(not(idgen_loom))]
struct DefaultUpkeep {
    shared: Arc<DefaultShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The process's upkeep, while any `DefaultClock` lives.
#[cfg(not(idgen_loom))]
static DEFAULT_UPKEEP: Mutex<Weak<DefaultUpkeep>> = Mutex::new(Weak::new());

/// The `MonotonicClock` under every `DefaultClock`: built once, since the first
/// `quanta::Clock` of a process calibrates.
#[cfg(not(idgen_loom))]
fn default_precise() -> MonotonicClock {
    static PRECISE: OnceLock<MonotonicClock> = OnceLock::new();
    PRECISE.get_or_init(MonotonicClock::new).clone()
}

#[cfg(not(idgen_loom))]
impl DefaultClock {
    /// The process's default clock, starting its upkeep thread if none runs.
    pub fn new() -> Self {
        let mut current = DEFAULT_UPKEEP
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let pid = std::process::id();
        match current.upgrade() {
            Some(upkeep) if upkeep.shared.pid == pid => {
                return DefaultClock {
                    shared: upkeep.shared.clone(),
                    _upkeep: upkeep,
                };
            }
            // The parent's, in a forked child: its thread is not here, and the word it kept
            // current has stood still since the fork. Readers go to the precise clock until
            // this process's own thread (started below) raises it.
            Some(_) => DEFAULT_READING.clear(),
            None => {}
        }
        let shared = Arc::new(DefaultShared {
            precise: default_precise(),
            pid,
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
            UPKEEP_PID.store(u64::from(pid), Ordering::Release);
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
        let now = shared.precise.now_unix_ms();
        // Without a thread (it could not be started, or this is a forked child and the
        // thread was its parent's) the word stays parked, so every call reads the precise
        // clock rather than a reading nobody refreshes.
        if let Some(thread) = shared.thread.get()
            && shared.pid == std::process::id()
        {
            DEFAULT_READING.resume(now);
            thread.unpark();
        }
        now
    }
}

#[cfg(not(idgen_loom))]
impl DefaultShared {
    fn upkeep(&self) {
        let mut checked = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            DEFAULT_READING.refresh(self.precise.now_unix_ms());
            self.refreshes.fetch_add(1, Ordering::Relaxed);
            if checked.elapsed() >= DEFAULT_CLOCK_IDLE {
                if !DEFAULT_READING.end_period() {
                    // Nobody asked for a whole period: the word is parked, so readers read
                    // the precise clock, raise the word to it, and unpark this thread.
                    while DEFAULT_READING.is_idle() && !self.stop.load(Ordering::Acquire) {
                        std::thread::park();
                    }
                }
                checked = Instant::now();
                continue;
            }
            std::thread::park_timeout(RECENT_CLOCK_INTERVAL);
        }
        // Nothing keeps the reading current now: readers go to the precise clock until
        // another upkeep thread starts.
        DEFAULT_READING.clear();
    }
}

#[cfg(not(idgen_loom))]
impl Drop for DefaultUpkeep {
    fn drop(&mut self) {
        // In a forked child the thread is not there to join.
        if self.shared.pid == std::process::id() {
            stop_upkeep(&self.shared.stop, self.thread.take());
        }
    }
}

/// The process that started the default clock's current upkeep thread (0: none yet).
#[cfg(not(idgen_loom))]
static UPKEEP_PID: AtomicU64 = AtomicU64::new(0);

/// Called where a forked child may first show itself (a thread's first random draw, see
/// `random.rs`): if the default clock's upkeep thread belongs to another process, its word
/// stood still at the fork. Parking it sends readers to the precise clock, and a
/// `DefaultClock` built in this process starts a thread of its own that raises it again.
/// Cold: it asks the operating system for the process ID.
#[cfg(not(idgen_loom))]
#[cfg_attr(not(feature = "uuid7-ulid"), allow(dead_code))]
pub(crate) fn notice_fork() {
    let upkeep_pid = UPKEEP_PID.load(Ordering::Acquire);
    if upkeep_pid != 0 && upkeep_pid != u64::from(std::process::id()) {
        DEFAULT_READING.clear();
    }
}

/// Under loom there is no default clock thread, and no fork.
#[cfg(idgen_loom)]
pub(crate) fn notice_fork() {}

#[cfg(not(idgen_loom))]
impl Default for DefaultClock {
    fn default() -> Self {
        DefaultClock::new()
    }
}

#[cfg(not(idgen_loom))]
impl Clock for DefaultClock {
    #[inline]
    fn now_unix_ms(&self) -> u64 {
        self.shared.precise.now_unix_ms()
    }

    #[inline]
    fn recent_unix_ms(&self) -> u64 {
        match DEFAULT_READING.read() {
            Some(recent) => recent,
            None => self.read_and_wake(),
        }
    }
}

#[cfg(not(idgen_loom))]
impl fmt::Debug for DefaultClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultClock")
            .field("cached", &*DEFAULT_READING)
            .field("refreshes", &self.refreshes())
            .field("precise", &self.shared.precise)
            .finish()
    }
}

#[cfg(not(idgen_loom))]
impl fmt::Debug for RecentClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecentClock")
            .field("recent_unix_ms", &self.recent_unix_ms())
            .field("precise", &self.shared.precise)
            .finish()
    }
}

#[cfg(all(test, not(idgen_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_cached_word_holds_an_absurd_reading_without_wrapping_or_lowering() {
        let word = CachedReading::idle();
        assert_eq!(word.read(), None);
        word.refresh(10);
        assert_eq!(word.read(), Some(10));
        word.refresh(1 << 63 | 5);
        assert_eq!(word.read(), Some(MAX_READING));
        word.refresh(20);
        assert_eq!(word.read(), Some(MAX_READING));
    }

    #[test]
    fn a_parked_word_keeps_its_reading_and_a_late_resume_never_lowers_it() {
        let word = CachedReading::idle();
        word.resume(105);
        assert!(word.end_period(), "a resume notes demand");
        assert!(!word.end_period(), "a period without demand parks");
        assert!(word.is_idle());
        assert_eq!(word.read(), None);
        // A reader that read the precise clock before the 105 raises the word only now.
        word.resume(100);
        assert_eq!(word.read(), Some(105));
    }

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
