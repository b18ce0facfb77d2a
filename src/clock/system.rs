//! The raw wall clock.

use std::time::{SystemTime, UNIX_EPOCH};

use super::Clock;

/// The raw wall clock (`SystemTime`). It follows every step of NTP or an operator, backwards
/// too; use it when IDs must carry wall time, or to see the clock-back handling at work.
/// A wall clock before 1970 reads as 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}
