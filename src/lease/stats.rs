//! What a leased generator reports about its lease: [`LeaseStats`] and its [`LeaseState`].
//! Plain data, shared by the keeper that fills it in and the generators that hand it out.

/// Where a leased generator stands, in [`LeaseStats::state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseState {
    /// The lease is valid: IDs are issued.
    Valid,
    /// Renewals are failing (the store cannot be reached), but the mark written before
    /// the failures is still ahead: IDs are issued up to it
    /// ([`LeaseStats::valid_for_ms`] says for how long), then refused.
    Outage,
    /// Renewals have failed for so long that the clock passed the mark: calls fail with
    /// [`Error::LeaseExpired`](crate::Error::LeaseExpired) until a renewal gets through.
    Expired,
    /// The store says the number is gone: the keeper is trying to take a new one.
    Lost,
    /// Released; nothing more is issued.
    Released,
}

/// A snapshot of a leased generator's lease ([`LeasedGenerator::lease_stats`](super::LeasedGenerator::lease_stats)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseStats {
    /// The state now.
    pub state: LeaseState,
    /// The datacenter held now.
    pub datacenter: u64,
    /// The worker number held now.
    pub worker: u64,
    /// Successful renewals.
    pub renewals: u64,
    /// Failed renewal attempts (each retry counts).
    pub renewal_failures: u64,
    /// Worker numbers taken after the one before was lost.
    pub reacquisitions: u64,
    /// Outages so far: runs of failed renewals, each counted once when it begins.
    pub outages: u64,
    /// When the current outage began (the first failed renewal since the last success),
    /// Unix ms on the generator's clock; `None` while renewals succeed.
    pub outage_since_unix_ms: Option<u64>,
    /// Milliseconds of validity left (negative: expired that long ago), on the generator's
    /// clock; 0 once the lease is lost or released.
    pub valid_for_ms: i64,
    /// The first Unix millisecond (generator's clock) in which no ID is issued: the
    /// millisecond after the mark.
    pub valid_until_unix_ms: u64,
    /// The earliest moment the store may hand the number to someone else: when the last
    /// successful acquire or renewal request was sent, plus the TTL.
    pub lease_end_unix_ms: u64,
    /// The last mark written to the store.
    pub mark_unix_ms: u64,
    /// The mark the previous holder of the number held now had left, if any.
    pub previous_mark_unix_ms: Option<u64>,
}
