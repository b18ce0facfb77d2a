//! Test helpers shared by the integration tests and the loom models.

use idgen::{Clock, ManualClock};

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
