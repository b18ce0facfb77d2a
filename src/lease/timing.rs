//! How often a holder renews and how far ahead it writes its mark ([`Timing`]), checked
//! against the store's TTL, and the longest outage horizon taken.

use std::time::Duration;

use crate::error::Error;

use super::LeaseStore;
use super::protocol::Settings;

/// The longest outage horizon a leased generator takes, and the longest recorded one a
/// successor infers a lost mark with: a day. A longer one (`30d` for `30s`) would make
/// every number whose history was lost unusable for that long.
pub const MAX_OUTAGE_HORIZON: Duration = Duration::from_secs(24 * 60 * 60);

/// Tuning of a [`LeasedGenerator`](super::LeasedGenerator); the defaults follow the store's TTL.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    pub(super) ttl: Duration,
    /// How far ahead of each renewal the mark is written: how long the generator goes on
    /// issuing when renewals stop getting through.
    pub(super) horizon: Duration,
    pub(super) renew_every: Duration,
    pub(super) startup_wait: Duration,
}

impl Timing {
    /// The timing for `store`, with defaults for what is not given: renewals every third of
    /// the TTL, the store's outage horizon, a startup wait of the horizon and a second.
    pub(super) fn for_store(
        store: &dyn LeaseStore,
        renew_every: Option<Duration>,
        horizon: Option<Duration>,
        startup_wait: Option<Duration>,
    ) -> Result<Timing, Error> {
        let ttl = store.ttl();
        let horizon = horizon.unwrap_or_else(|| store.default_outage_horizon().max(ttl));
        if horizon > MAX_OUTAGE_HORIZON {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "an outage horizon of {horizon:?} is above the longest taken, a day: a \
                     crashed holder's number would stay unusable that long"
                ),
            });
        }
        if horizon < ttl {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "an outage horizon of {horizon:?} is below the TTL of {ttl:?}: the mark \
                     must stay ahead of the lease, so the horizon is at least the TTL"
                ),
            });
        }
        Ok(Timing {
            ttl,
            horizon,
            renew_every: renew_every.unwrap_or(ttl / 3),
            startup_wait: startup_wait.unwrap_or(horizon.saturating_add(Duration::from_secs(1))),
        })
    }

    /// Checks that renewals come at least `margin` (default: a tenth of the TTL) before
    /// the lease would end at the store.
    pub(super) fn check_margin(self, margin: Option<Duration>) -> Result<Timing, Error> {
        let (ttl, renew_every) = (self.ttl, self.renew_every);
        let margin = margin.unwrap_or(ttl / 10);
        if renew_every.is_zero() || margin.saturating_add(renew_every) >= ttl {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "renewing every {renew_every:?} with a safety margin of {margin:?} \
                     leaves no validity within a TTL of {ttl:?}: both must be non-zero \
                     and add up to less than the TTL"
                ),
            });
        }
        Ok(self)
    }
}

impl Timing {
    /// The lease machine's settings for this timing: `wait_for_previous` for a leased
    /// generator (the lease API's holder waits on its own), and how many times the first
    /// taking is tried when the store fails.
    pub(super) fn settings(self, wait_for_previous: bool, take_attempts: u32) -> Settings {
        Settings {
            ttl_ms: millis(self.ttl),
            horizon_ms: millis(self.horizon),
            max_horizon_ms: millis(MAX_OUTAGE_HORIZON),
            renew_every_ms: millis(self.renew_every),
            startup_wait_ms: millis(self.startup_wait),
            wait_for_previous,
            take_attempts,
            #[cfg(test)]
            mutation: None,
        }
    }
}

/// How many times a first taking that failed in the store is tried in all: a store of
/// several members answers the next request from another one, so a member lost, paused or
/// in an election does not fail a taking the rest of the cluster could serve.
pub(super) const TAKE_ATTEMPTS: u32 = 5;

/// A duration in whole milliseconds, saturating.
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
