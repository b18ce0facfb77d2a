//! [`MonotonicClock`]: a `quanta` clock anchored once to wall time, never going backwards
//! inside a process, and following the wall clock's forward steps only when they are small
//! or have lasted.

use std::fmt;

use crate::sync::{Arc, AtomicU64, Ordering};

use super::{Clock, SystemClock};

/// How often, in the clock's own milliseconds, [`MonotonicClock`] compares itself with the
/// wall clock to catch up with a forward step.
pub const WALL_CHECK_INTERVAL_MS: u64 = 100;

/// The largest forward step of the wall clock that [`MonotonicClock`] follows at once (an
/// NTP correction). A larger one is followed only once it has lasted
/// [`WALL_STEP_CONFIRM_MS`].
pub const WALL_SMALL_STEP_MS: u64 = 1_000;

/// How long, in the clock's own milliseconds, the wall clock must stay more than
/// [`WALL_SMALL_STEP_MS`] ahead at every check before [`MonotonicClock`] follows it (a
/// resumed VM, an operator's real correction); a step that goes away sooner (a bogus
/// reading, a mistyped `date -s` put right) is never followed.
pub const WALL_STEP_CONFIRM_MS: u64 = 2_000;

/// `MonotonicInner::large_step_since_ms` when no large step is pending.
const NO_STEP: u64 = u64::MAX;

/// The default clock: monotonic inside the process, anchored once to wall time.
///
/// It reads a long-lived `quanta::Clock` (the TSC where it is reliable, else the OS
/// monotonic clock) and adds it to the wall time read once at start, so it never goes
/// backwards when NTP or an operator steps the wall clock back. Every
/// [`WALL_CHECK_INTERVAL_MS`] it compares itself with the wall clock and, when the wall
/// clock is ahead:
///
/// - by at most [`WALL_SMALL_STEP_MS`] (an NTP correction), jumps forward to it at once;
/// - by more (a suspended VM resumed, an operator's correction, or a bogus reading), follows
///   only once the wall clock has stayed that far ahead at every check for
///   [`WALL_STEP_CONFIRM_MS`]. A step that goes away sooner is never followed: one wrong
///   reading cannot date every later ID a day ahead, or past the layout's end, for the
///   life of the process. Both outcomes are logged (`log` crate, warn) and counted
///   ([`MonotonicClock::wall_steps_followed`], [`MonotonicClock::wall_steps_ignored`]).
///
/// It never follows the wall clock backwards.
///
/// Clones share the anchor and the catch-up, so clone one clock rather than building many
/// (the first `quanta::Clock` in a process calibrates, which can take ~200 ms).
///
/// Caveat: between restarts it is only as good as the wall clock at start. A process that
/// starts while the wall clock is behind where an earlier process stopped sees the earlier
/// IDs in its future; the generator's clock-back check and the resume mark guard that case.
#[derive(Clone)]
pub struct MonotonicClock {
    inner: Arc<MonotonicInner>,
}

struct MonotonicInner {
    source: quanta::Clock,
    start_raw: u64,
    anchor_unix_ms: u64,
    /// Total forward jumps taken to catch up with the wall clock.
    caught_up_ms: AtomicU64,
    /// Elapsed milliseconds (of `source`) at which the wall clock is read next.
    next_wall_check_ms: AtomicU64,
    /// Elapsed milliseconds at which the wall clock was first seen more than a small step
    /// ahead, in the run of checks that saw it so ever since; [`NO_STEP`] when not.
    large_step_since_ms: AtomicU64,
    wall_steps_followed: AtomicU64,
    wall_steps_ignored: AtomicU64,
    wall: Box<dyn Clock>,
}

impl MonotonicClock {
    /// A clock on a fresh `quanta::Clock`, anchored to [`SystemClock`].
    pub fn new() -> Self {
        Self::with_sources(quanta::Clock::new(), SystemClock)
    }

    /// A clock on the given monotonic source, anchored to (and catching up with) `wall`.
    /// Tests pass `quanta::Clock::mock()` and a [`ManualClock`](super::ManualClock) to drive both sides.
    pub fn with_sources(source: quanta::Clock, wall: impl Clock + 'static) -> Self {
        let start_raw = source.raw();
        let anchor_unix_ms = wall.now_unix_ms();
        MonotonicClock {
            inner: Arc::new(MonotonicInner {
                source,
                start_raw,
                anchor_unix_ms,
                caught_up_ms: AtomicU64::new(0),
                next_wall_check_ms: AtomicU64::new(WALL_CHECK_INTERVAL_MS),
                large_step_since_ms: AtomicU64::new(NO_STEP),
                wall_steps_followed: AtomicU64::new(0),
                wall_steps_ignored: AtomicU64::new(0),
                wall: Box::new(wall),
            }),
        }
    }

    /// Milliseconds the clock has jumped forward so far to catch up with the wall clock.
    pub fn caught_up_ms(&self) -> u64 {
        self.inner.caught_up_ms.load(Ordering::Relaxed)
    }

    /// Forward steps of the wall clock larger than [`WALL_SMALL_STEP_MS`] that lasted and
    /// were followed.
    pub fn wall_steps_followed(&self) -> u64 {
        self.inner.wall_steps_followed.load(Ordering::Relaxed)
    }

    /// Forward steps of the wall clock larger than [`WALL_SMALL_STEP_MS`] that went away
    /// before [`WALL_STEP_CONFIRM_MS`] and were never followed.
    pub fn wall_steps_ignored(&self) -> u64 {
        self.inner.wall_steps_ignored.load(Ordering::Relaxed)
    }

    #[cold]
    fn catch_up(&self, elapsed_ms: u64, due_ms: u64) -> u64 {
        let inner = &*self.inner;
        let mut caught_up = inner.caught_up_ms.load(Ordering::Acquire);
        // One thread per interval reads the wall clock; the others go on without waiting.
        if inner
            .next_wall_check_ms
            .compare_exchange(
                due_ms,
                elapsed_ms.saturating_add(WALL_CHECK_INTERVAL_MS),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            let wall = inner.wall.now_unix_ms();
            let needed = wall.saturating_sub(inner.anchor_unix_ms.saturating_add(elapsed_ms));
            if self.follow(elapsed_ms, needed.saturating_sub(caught_up)) {
                // fetch_max: the correction only grows, so the clock never goes back.
                caught_up = inner
                    .caught_up_ms
                    .fetch_max(needed, Ordering::AcqRel)
                    .max(needed);
            }
        }
        inner
            .anchor_unix_ms
            .saturating_add(elapsed_ms)
            .saturating_add(caught_up)
    }

    /// Whether to jump forward by `ahead_ms` (the wall clock's lead at this check): the
    /// policy in the type's docs. Only the one thread that won this check calls it.
    fn follow(&self, elapsed_ms: u64, ahead_ms: u64) -> bool {
        let inner = &*self.inner;
        let since = inner.large_step_since_ms.load(Ordering::Relaxed);
        if ahead_ms <= WALL_SMALL_STEP_MS {
            if since != NO_STEP {
                inner.large_step_since_ms.store(NO_STEP, Ordering::Relaxed);
                inner.wall_steps_ignored.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "idgen: the wall clock's forward step went away after {} ms; it was not \
                     followed",
                    elapsed_ms.saturating_sub(since)
                );
            }
            return ahead_ms > 0;
        }
        if since == NO_STEP {
            inner
                .large_step_since_ms
                .store(elapsed_ms, Ordering::Relaxed);
            log::warn!(
                "idgen: the wall clock is {ahead_ms} ms ahead of the monotonic clock; following \
                 it only if it stays ahead for {WALL_STEP_CONFIRM_MS} ms"
            );
            return false;
        }
        if elapsed_ms.saturating_sub(since) < WALL_STEP_CONFIRM_MS {
            return false;
        }
        inner.large_step_since_ms.store(NO_STEP, Ordering::Relaxed);
        inner.wall_steps_followed.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "idgen: the wall clock stayed {ahead_ms} ms ahead for {WALL_STEP_CONFIRM_MS} ms; \
             following it"
        );
        true
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now_unix_ms(&self) -> u64 {
        let inner = &*self.inner;
        let elapsed_ms = inner
            .source
            .delta_as_nanos(inner.start_raw, inner.source.raw())
            / 1_000_000;
        let due_ms = inner.next_wall_check_ms.load(Ordering::Relaxed);
        if elapsed_ms >= due_ms {
            return self.catch_up(elapsed_ms, due_ms);
        }
        inner
            .anchor_unix_ms
            .saturating_add(elapsed_ms)
            .saturating_add(inner.caught_up_ms.load(Ordering::Acquire))
    }
}

impl fmt::Debug for MonotonicClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MonotonicClock")
            .field("anchor_unix_ms", &self.inner.anchor_unix_ms)
            .field("caught_up_ms", &self.caught_up_ms())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(idgen_loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

    const START: u64 = 1_750_000_000_000;

    fn mocked() -> (MonotonicClock, std::sync::Arc<quanta::Mock>, ManualClock) {
        let (source, mock) = quanta::Clock::mock();
        let wall = ManualClock::new(START);
        (
            MonotonicClock::with_sources(source, wall.clone()),
            mock,
            wall,
        )
    }

    #[test]
    fn monotonic_clock_starts_at_the_wall_clock_and_follows_its_source() {
        let (clock, mock, _wall) = mocked();
        assert_eq!(clock.now_unix_ms(), START);
        mock.increment(Duration::from_micros(2_500));
        assert_eq!(clock.now_unix_ms(), START + 2);
    }

    #[test]
    fn monotonic_clock_ignores_a_backward_wall_step() {
        let (clock, mock, wall) = mocked();
        mock.increment(Duration::from_millis(50));
        wall.set(START - 60_000);
        let mut last = clock.now_unix_ms();
        assert_eq!(last, START + 50);
        for _ in 0..10 {
            mock.increment(Duration::from_millis(WALL_CHECK_INTERVAL_MS));
            let now = clock.now_unix_ms();
            assert!(now > last, "went from {last} to {now}");
            last = now;
        }
        assert_eq!(last, START + 50 + 10 * WALL_CHECK_INTERVAL_MS);
        assert_eq!(clock.caught_up_ms(), 0);
    }

    #[test]
    fn monotonic_clock_follows_a_small_forward_step_at_the_next_check() {
        let (clock, mock, wall) = mocked();
        // An NTP correction of 800 ms.
        wall.set(START + WALL_CHECK_INTERVAL_MS + 800);
        mock.increment(Duration::from_millis(WALL_CHECK_INTERVAL_MS - 1));
        assert_eq!(clock.now_unix_ms(), START + WALL_CHECK_INTERVAL_MS - 1);
        mock.increment(Duration::from_millis(1));
        assert_eq!(clock.now_unix_ms(), START + WALL_CHECK_INTERVAL_MS + 800);
        assert_eq!(clock.caught_up_ms(), 800);
        // And keeps counting from there with its own source.
        mock.increment(Duration::from_millis(7));
        assert_eq!(clock.now_unix_ms(), START + WALL_CHECK_INTERVAL_MS + 807);
        assert_eq!(
            (clock.wall_steps_followed(), clock.wall_steps_ignored()),
            (0, 0)
        );
    }

    /// Advances the source by one check interval and reads the clock.
    fn next_check(clock: &MonotonicClock, mock: &quanta::Mock) -> u64 {
        mock.increment(Duration::from_millis(WALL_CHECK_INTERVAL_MS));
        clock.now_unix_ms()
    }

    #[test]
    fn monotonic_clock_follows_a_large_forward_step_only_once_it_has_lasted() {
        let (clock, mock, wall) = mocked();
        // A VM suspended for 30 s: the monotonic source barely moved, the wall clock did.
        let mut elapsed = 0;
        let checks = WALL_STEP_CONFIRM_MS / WALL_CHECK_INTERVAL_MS;
        for _ in 0..checks {
            elapsed += WALL_CHECK_INTERVAL_MS;
            wall.set(START + elapsed + 30_000);
            assert_eq!(
                next_check(&clock, &mock),
                START + elapsed,
                "not followed yet"
            );
        }
        elapsed += WALL_CHECK_INTERVAL_MS;
        wall.set(START + elapsed + 30_000);
        assert_eq!(next_check(&clock, &mock), START + elapsed + 30_000);
        assert_eq!(
            (clock.wall_steps_followed(), clock.wall_steps_ignored()),
            (1, 0)
        );
    }

    #[test]
    fn monotonic_clock_never_follows_a_forward_spike_that_goes_away() {
        let (clock, mock, wall) = mocked();
        // A day ahead for 600 ms (a bogus reading, a mistyped date put right), then back.
        let mut elapsed = 0;
        for _ in 0..6 {
            elapsed += WALL_CHECK_INTERVAL_MS;
            wall.set(START + elapsed + 86_400_000);
            assert_eq!(next_check(&clock, &mock), START + elapsed);
        }
        for _ in 0..30 {
            elapsed += WALL_CHECK_INTERVAL_MS;
            wall.set(START + elapsed);
            assert_eq!(next_check(&clock, &mock), START + elapsed);
        }
        assert_eq!(clock.caught_up_ms(), 0);
        assert_eq!(
            (clock.wall_steps_followed(), clock.wall_steps_ignored()),
            (0, 1)
        );
    }

    #[test]
    fn monotonic_clock_clones_share_the_catch_up() {
        let (clock, mock, wall) = mocked();
        let other = clock.clone();
        wall.set(START + WALL_CHECK_INTERVAL_MS + 500);
        mock.increment(Duration::from_millis(WALL_CHECK_INTERVAL_MS));
        assert_eq!(clock.now_unix_ms(), START + WALL_CHECK_INTERVAL_MS + 500);
        assert_eq!(other.now_unix_ms(), START + WALL_CHECK_INTERVAL_MS + 500);
    }

    #[test]
    fn real_monotonic_clock_is_close_to_the_wall_clock_and_never_decreases() {
        let clock = MonotonicClock::new();
        let wall = SystemClock.now_unix_ms();
        let mut last = clock.now_unix_ms();
        assert!(last.abs_diff(wall) <= 5, "monotonic {last} vs wall {wall}");
        for _ in 0..100_000 {
            let now = clock.now_unix_ms();
            assert!(now >= last);
            last = now;
        }
    }
}
