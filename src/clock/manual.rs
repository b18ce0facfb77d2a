//! A clock set by hand: what tests and loom models inject to step time exactly.

use std::fmt;

use crate::sync::{Arc, AtomicU64, Ordering};

use super::Clock;

/// A clock set and advanced by hand. Clones share one time, so a test can hold one clone and
/// step the time under a generator that holds another, from any thread.
///
/// ```
/// use idgen::{Clock, ManualClock};
/// let clock = ManualClock::new(1_750_000_000_000);
/// let view = clock.clone();
/// clock.advance(5);
/// assert_eq!(view.now_unix_ms(), 1_750_000_000_005);
/// clock.set(1_749_999_999_000); // backwards, on purpose
/// assert_eq!(view.now_unix_ms(), 1_749_999_999_000);
/// ```
#[derive(Clone)]
pub struct ManualClock {
    unix_ms: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock that reads `unix_ms` until it is moved.
    pub fn new(unix_ms: u64) -> Self {
        ManualClock {
            unix_ms: Arc::new(AtomicU64::new(unix_ms)),
        }
    }

    /// Sets the time, forwards or backwards.
    pub fn set(&self, unix_ms: u64) {
        self.unix_ms.store(unix_ms, Ordering::Release);
    }

    /// Moves the time forward by `ms` (saturating).
    pub fn advance(&self, ms: u64) {
        // A load and a store, not fetch_add: saturation needs the old value, and only the
        // test that owns the clock moves it.
        let now = self.unix_ms.load(Ordering::Acquire);
        self.set(now.saturating_add(ms));
    }
}

impl Clock for ManualClock {
    fn now_unix_ms(&self) -> u64 {
        // Acquire pairs with the generator's Release on its state: see docs/design.md.
        self.unix_ms.load(Ordering::Acquire)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("unix_ms", &self.unix_ms.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(idgen_loom)))]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_saturates_instead_of_wrapping() {
        let clock = ManualClock::new(u64::MAX - 1);
        clock.advance(10);
        assert_eq!(clock.now_unix_ms(), u64::MAX);
    }
}
