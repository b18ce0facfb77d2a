//! Where the generators get the time: the [`Clock`] trait and its clocks.
//!
//! - `system.rs`: [`SystemClock`], the raw wall clock.
//! - `manual.rs`: [`ManualClock`], set by hand, for tests and models.
//! - `monotonic.rs`: [`MonotonicClock`], monotonic inside the process and anchored to wall
//!   time, catching up with the wall clock's forward steps.
//! - `cached.rs`: the cached clocks, a reading kept current by a background thread:
//!   [`DefaultClock`] (one shared thread per process, the clock most users get) and
//!   [`RecentClock`] (a thread of its own).
//!
//! It may use `crate::sync`, `crate::error` and `crate::fork_check`; nothing here knows
//! about IDs.

mod cached;
mod manual;
mod monotonic;
mod system;

#[cfg(idgen_loom)]
pub use self::cached::CachedReading;
#[cfg(feature = "uuid7-ulid")]
pub(crate) use self::cached::notice_fork;
#[cfg(not(idgen_loom))]
pub use self::cached::{DEFAULT_CLOCK_IDLE, DefaultClock, RECENT_CLOCK_INTERVAL, RecentClock};
pub use self::manual::ManualClock;
/// Under loom the default clock is the plain [`MonotonicClock`]: loom runs no real threads.
#[cfg(idgen_loom)]
pub use self::monotonic::MonotonicClock as DefaultClock;
pub use self::monotonic::{
    MonotonicClock, WALL_CHECK_INTERVAL_MS, WALL_SMALL_STEP_MS, WALL_STEP_CONFIRM_MS,
};
pub use self::system::SystemClock;

/// A source of Unix milliseconds.
///
/// Every clock-dependent path in idgen reads time through this trait, so tests and loom
/// models inject a [`ManualClock`] and step it exactly. A clock may go backwards; the
/// generator guards against that (see the crate docs, "Clock behaviour").
pub trait Clock: Send + Sync {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    fn now_unix_ms(&self) -> u64;

    /// A cheaper reading that may lag [`Clock::now_unix_ms`] by about a millisecond, but is
    /// never ahead of it. The generator takes this one on its fast path and falls back to
    /// `now_unix_ms` before it waits or refuses, so a lagging reading can date an ID slightly
    /// early but never make a call wait or fail. Default: `now_unix_ms`.
    #[inline]
    fn recent_unix_ms(&self) -> u64 {
        self.now_unix_ms()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_unix_ms(&self) -> u64 {
        (**self).now_unix_ms()
    }
    fn recent_unix_ms(&self) -> u64 {
        (**self).recent_unix_ms()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_unix_ms(&self) -> u64 {
        (**self).now_unix_ms()
    }
    fn recent_unix_ms(&self) -> u64 {
        (**self).recent_unix_ms()
    }
}

impl<C: Clock + ?Sized> Clock for Box<C> {
    fn now_unix_ms(&self) -> u64 {
        (**self).now_unix_ms()
    }
    fn recent_unix_ms(&self) -> u64 {
        (**self).recent_unix_ms()
    }
}
