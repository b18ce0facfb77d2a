//! Worker numbers leased for generators that run elsewhere: a program in another language
//! holds a number through the service's lease API, renews it, and issues IDs itself, dated
//! after the previous holder's mark and before its own.

use std::fmt;
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::Error;
use crate::snowflake::Layout;

use super::driver::{Driving, Lease};
use super::protocol::{Machine, next_mark};
use super::timing::{TAKE_ATTEMPTS, Timing, millis};
use super::{Claim, LeaseStore, WorkerRange};

/// A worker number held for a generator outside this process: the same claim, marks and
/// horizon as a [`LeasedGenerator`](super::LeasedGenerator)'s, with the issuing left to
/// the holder. It must issue only IDs dated after [`ExternalTerms::resume_after_unix_ms`]
/// and before [`ExternalTerms::valid_until_unix_ms`] (Unix ms, on its own clock), and renew
/// every [`ExternalTerms::renew_every`].
///
/// Dropping it without [`ExternalLease::release`] leaves the number to its store: free when
/// the lease ends, and unusable until the last mark written passes.
pub struct ExternalLease {
    claim: Box<dyn Claim>,
    timing: Timing,
    previous_unix_ms: u64,
    mark_unix_ms: u64,
}

/// What the holder of an [`ExternalLease`] may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExternalTerms {
    /// The datacenter.
    pub datacenter: u64,
    /// The worker number.
    pub worker: u64,
    /// The previous holder's mark (0: none): issue only IDs dated after it.
    pub resume_after_unix_ms: u64,
    /// The mark written plus one: issue only IDs dated before it.
    pub valid_until_unix_ms: u64,
    /// The store's TTL.
    pub ttl: Duration,
    /// How often to renew.
    pub renew_every: Duration,
}

impl ExternalLease {
    /// Takes a number of `range` from `store` for `holder` (a name for operators) as a
    /// leased generator would (the lowest free number whose mark has passed, else the
    /// nearest mark within a horizon and a second), and writes a mark `horizon` ahead of
    /// `clock` (default: the store's
    /// [`LeaseStore::default_outage_horizon`]; never below the TTL). The holder issues IDs
    /// of `layout`, which the store must serve ([`LeaseStore::bind_layout`]).
    pub fn acquire<C: Clock>(
        store: &dyn LeaseStore,
        layout: &Layout,
        range: &WorkerRange,
        holder: &str,
        horizon: Option<Duration>,
        clock: &C,
    ) -> Result<ExternalLease, Error> {
        let timing = Timing::for_store(store, None, horizon, None)?;
        range.check(layout)?;
        let driving = Driving {
            store,
            range,
            layout,
            holder,
            origin: Instant::now(),
        };
        // The holder waits for the previous mark on its own clock: the machine hands the
        // number out as soon as its first mark is written.
        let mut lease = Lease::new(Machine::take(timing.settings(false, TAKE_ATTEMPTS), *range));
        let tenure = lease.take_blocking(&driving, clock, &|_| {}, &|| false)?;
        let claim = lease.take_claim().ok_or_else(|| Error::LeaseStore {
            reason: "the number taken has no claim".to_string(),
        })?;
        Ok(ExternalLease {
            claim,
            timing,
            previous_unix_ms: tenure.after_unix_ms.unwrap_or(0),
            mark_unix_ms: tenure.ceiling.saturating_sub(1),
        })
    }

    /// The terms now.
    pub fn terms(&self) -> ExternalTerms {
        ExternalTerms {
            datacenter: self.claim.datacenter(),
            worker: self.claim.worker(),
            resume_after_unix_ms: self.previous_unix_ms,
            valid_until_unix_ms: self.mark_unix_ms.saturating_add(1),
            ttl: self.timing.ttl,
            renew_every: self.timing.renew_every,
        }
    }

    /// Proves the claim still holds and writes a mark a horizon ahead of `clock`.
    /// [`Error::LeaseLost`] or [`Error::LeaseStoreRestored`] when the number is gone for
    /// good (stop issuing at once); any
    /// other error is transient, and the terms stay as they were.
    pub fn renew<C: Clock>(&mut self, clock: &C) -> Result<ExternalTerms, Error> {
        let mark = next_mark(
            clock.now_unix_ms(),
            millis(self.timing.horizon),
            self.mark_unix_ms,
        );
        self.claim.renew(mark)?;
        self.mark_unix_ms = mark;
        Ok(self.terms())
    }

    /// Frees the number with `last_used_unix_ms` as its mark (clamped between the previous
    /// holder's mark and the last mark written), or the last mark written when not given.
    pub fn release(mut self, last_used_unix_ms: Option<u64>) -> Result<(), Error> {
        let mark = last_used_unix_ms.map_or(self.mark_unix_ms, |used| {
            used.min(self.mark_unix_ms).max(self.previous_unix_ms)
        });
        self.claim.release(mark)
    }
}

impl fmt::Debug for ExternalLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternalLease")
            .field("claim", &self.claim)
            .field("terms", &self.terms())
            .finish()
    }
}
