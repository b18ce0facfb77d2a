//! The one error type of the core.

use std::fmt;

/// Everything that can go wrong in idgen's core.
///
/// Errors fall in two kinds; [`Error::is_transient`] tells them apart:
///
/// - **Transient**: the same call can succeed later without any change on your side.
///   [`Error::ClockMovedBackwards`] (the clock is behind the last issued millisecond by more
///   than the tolerance; retry after `behind_ms`, or let an operator look at the clock) and
///   [`Error::WouldBlock`] (only from the `try_` methods: the current millisecond is used up),
///   and the lease errors: [`Error::LeaseExpired`], [`Error::LeaseLost`],
///   [`Error::LeaseRangeFull`], [`Error::LeaseStore`] and [`Error::ClockBehindMark`] (a
///   renewal, a freed number, a store back online or a clock catching up can each end them),
///   and the block errors [`Error::BlockStore`] and [`Error::BlocksUnavailable`].
/// - **Permanent**: retrying the same call cannot help. A bad layout or node number, an ID
///   string that is not an ID, a clock set before the layout's epoch, or a layout whose time
///   range is used up ([`Error::TimeExhausted`]).
///
/// A refused `next_id` issues nothing and changes no state (on a leased generator, a call
/// refused with [`Error::LeaseExpired`] may leave one ID unused); a batch that fails part-way
/// discards the IDs it had reserved (they are never issued). Either way later calls return
/// IDs above every ID issued before.
///
/// [`Error::BeforeEpoch`] and [`Error::TimeExhausted`] count as permanent: they mean a
/// misconfigured layout or clock, which retrying cannot fix. A refusal changes nothing, so
/// once the clock is put right calls succeed again. A bogus reading that was *used* is
/// another matter: IDs never go back, so after an ID dated in a millisecond the clock never
/// really reached, the generator stays past it, and calls fail with
/// [`Error::ClockMovedBackwards`] until the clock gets there (or, past the layout's end, with
/// [`Error::TimeExhausted`] for good). [`MonotonicClock`](crate::MonotonicClock), the
/// default, follows a large forward step of the wall clock only once it has lasted, so one
/// bogus wall-clock reading never gets that far.
///
/// The messages are part of the API and meant for operators; the fields are meant for code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The layout's field widths do not add up to 63 bits (the sign bit is always 0).
    #[error("invalid layout: the field widths add up to {total} bits, but they must add up to 63")]
    LayoutWidthSum {
        /// Sum of the four widths that were asked for.
        total: u32,
    },
    /// The time or sequence field was given zero bits.
    #[error("invalid layout: the {field} field needs at least one bit")]
    LayoutZeroWidth {
        /// The field that got no bits.
        field: Field,
    },
    /// The custom epoch lies before 1970-01-01T00:00:00Z.
    #[error("invalid epoch: {epoch_unix_ms} ms is before the Unix epoch (1970-01-01T00:00:00Z)")]
    EpochBefore1970 {
        /// The epoch that was asked for, in Unix milliseconds.
        epoch_unix_ms: i64,
    },
    /// The custom epoch lies after the generator's clock.
    #[error(
        "invalid epoch: {epoch_unix_ms} (Unix ms) is in the future; the clock reads {now_unix_ms}"
    )]
    EpochInFuture {
        /// The layout's epoch, in Unix milliseconds.
        epoch_unix_ms: u64,
        /// What the generator's clock read.
        now_unix_ms: u64,
    },
    /// A value does not fit its field of the layout (a datacenter or worker number at
    /// build time, any field when composing an ID from parts).
    #[error("{field} {value} does not fit the layout: the largest allowed is {max}")]
    FieldOutOfRange {
        /// Which field.
        field: Field,
        /// The value that was given (for time: Unix milliseconds).
        value: u64,
        /// The largest value the field accepts (for time: the last Unix millisecond).
        max: u64,
    },
    /// A timestamp lies before the layout's epoch: the clock reads earlier than the epoch,
    /// or parts to compose name such an instant.
    #[error("{unix_ms} (Unix ms) is before the layout's epoch {epoch_unix_ms}")]
    BeforeEpoch {
        /// The instant, in Unix milliseconds.
        unix_ms: u64,
        /// The layout's epoch, in Unix milliseconds.
        epoch_unix_ms: u64,
    },
    /// The clock is behind the last issued millisecond by more than the configured
    /// tolerance. Transient: nothing was issued and the state is unchanged; the call can
    /// succeed once the clock has caught up, after about `behind_ms`.
    #[error("clock moved backwards: it is {behind_ms} ms behind the last issued millisecond")]
    ClockMovedBackwards {
        /// How far the clock is behind the last issued millisecond.
        behind_ms: u64,
    },
    /// The clock has passed the last instant the layout can represent (or every ID up to
    /// it has been issued). Permanent for this layout.
    #[error("time exhausted: the layout cannot represent instants after {last_unix_ms} (Unix ms)")]
    TimeExhausted {
        /// The last Unix millisecond the layout can represent.
        last_unix_ms: u64,
    },
    /// Only from the `try_` methods: the sequence of the current millisecond is used up
    /// (or the clock is behind within tolerance), and waiting was not allowed. Transient.
    #[error("would block: the next ID can be issued in {wait_ms} ms")]
    WouldBlock {
        /// How long until the clock reaches a millisecond with free sequence numbers.
        wait_ms: u64,
    },
    /// A number is not a valid ID: IDs are between 0 and 2^63 - 1 (`i64::MAX`).
    #[error("{value} is not a valid ID: IDs lie between 0 and 9223372036854775807")]
    IdOutOfRange {
        /// The number that was given.
        value: i128,
    },
    /// A string is not the canonical text form of an ID.
    #[error("invalid ID string: {0}")]
    ParseId(#[from] ParseIdError),
    /// A sharded generator needs at least one shard, and a worker number for each.
    #[error(
        "cannot build {shards} shards from {workers} worker numbers (each shard needs its own, and there must be at least one shard)"
    )]
    ShardWorkers {
        /// Shards asked for.
        shards: usize,
        /// Worker numbers in the range given.
        workers: u64,
    },
    /// The background thread of a [`RecentClock`](crate::RecentClock) could not be started.
    #[error("cannot start the clock's upkeep thread: {reason}")]
    ClockThread {
        /// What the operating system said.
        reason: String,
    },
    /// The operating system's random source failed while seeding the random bits of a
    /// UUIDv7 or ULID; nothing was issued. Transient: a later call asks it again.
    #[error("the operating system's random source failed: {reason}")]
    RandomSource {
        /// What the operating system said.
        reason: String,
    },
    /// A sequence name outside 1 to 64 of `a-z`, `0-9`, `_` and `-`.
    #[error("invalid sequence name {name:?}: {reason}")]
    SequenceName {
        /// The name given (at most 64 characters of it).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A sequence has handed out every value a positive `i64` holds. Permanent.
    #[error("sequence {sequence} has no values left below 2^63")]
    SequenceExhausted {
        /// The sequence.
        sequence: String,
    },
    /// The block store could not be reached, read or written, or holds something it did not
    /// write. No value of the failed call is handed out (a grant whose answer was lost is a
    /// gap). Transient: a store back online ends it (a damaged file needs an operator first).
    #[error("block store: {reason}")]
    BlockStore {
        /// What failed.
        reason: String,
    },
    /// Both blocks of an allocator are used up and the store gave no new one within the
    /// allocator's wait. Transient.
    #[error("sequence {sequence}: no block from the store within {waited_ms} ms: {reason}")]
    BlocksUnavailable {
        /// The sequence.
        sequence: String,
        /// How long the call waited.
        waited_ms: u64,
        /// The store's last error, or that it has not answered.
        reason: String,
    },
    /// The allocator was closed (by `close`, by a drop, or after a store that went back):
    /// it hands out nothing more.
    #[error("sequence {sequence}: the allocator is closed")]
    AllocatorClosed {
        /// The sequence.
        sequence: String,
    },
    /// The allocator was built by the parent of this forked process: the parent serves the
    /// same blocks, so the child refuses every call. Build a new allocator in the child.
    #[error(
        "sequence {sequence}: this allocator was built before a fork(); build one in this process"
    )]
    AllocatorForked {
        /// The sequence.
        sequence: String,
    },
    /// An opaque-ID key (or key set) is not usable.
    #[error("opaque ID key: {reason}")]
    OpaqueKey {
        /// What is wrong.
        reason: String,
    },
    /// An opaque ID names a key the codec does not hold.
    #[error("opaque ID made with key {key_id}, which this codec does not hold")]
    UnknownOpaqueKey {
        /// The key number in the opaque ID.
        key_id: u32,
    },
    /// Text that is not an opaque ID.
    #[error("{text:?} is not an opaque ID: {reason}")]
    OpaqueText {
        /// The text (at most 64 characters of it).
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A block allocator's settings do not make sense.
    #[error("invalid block allocator settings: {reason}")]
    BlockConfig {
        /// What is wrong.
        reason: String,
    },
    /// A batch so large that its vector cannot be allocated.
    #[error("a batch of {requested} IDs cannot be allocated")]
    BatchTooLarge {
        /// The number of IDs asked for.
        requested: usize,
    },
    /// A leased generator's lease is not proven valid for the millisecond an ID would
    /// carry: renewals have failed for too long, the number was lost, or it was released.
    /// Transient: a successful renewal, or a new number, lets calls succeed again.
    #[error(
        "the lease on worker {worker} of datacenter {datacenter} is not valid now; no IDs until it is renewed or another number is taken"
    )]
    LeaseExpired {
        /// The datacenter of the lease.
        datacenter: u64,
        /// The worker number of the lease.
        worker: u64,
    },
    /// A store reports that a held worker number is gone for good (its lease expired in
    /// the store, or its record was removed).
    #[error("worker {worker} of datacenter {datacenter} is no longer held by this process")]
    LeaseLost {
        /// The datacenter of the lease.
        datacenter: u64,
        /// The worker number that was lost.
        worker: u64,
    },
    /// No worker number of the range is free.
    #[error(
        "no free worker number in {range}: {held} held by live processes, {} unusable{}",
        unusable.len(),
        if unusable.is_empty() { String::new() } else { format!(" ({})", unusable.join("; ")) }
    )]
    LeaseRangeFull {
        /// The range asked for.
        range: String,
        /// Numbers held by other live processes.
        held: u64,
        /// Numbers whose record cannot be trusted (corrupted), with the reason: never
        /// reused until an operator repairs or removes the record.
        unusable: Vec<String>,
    },
    /// The lease store could not be reached or read.
    #[error("lease store: {reason}")]
    LeaseStore {
        /// What failed.
        reason: String,
    },
    /// A lease setting makes no sense (an empty range, a bad namespace, a TTL out of range).
    #[error("invalid lease configuration: {reason}")]
    LeaseConfig {
        /// What is wrong.
        reason: String,
    },
    /// A lease store that exists but was never initialised, or whose own bookkeeping was
    /// deleted or replaced (a lease directory without its `store.idgen`, an etcd namespace
    /// without its `store` key, as after `etcdctl del --prefix`): what it knew of earlier
    /// holders may be gone, so it is not used until an operator initialises it again.
    /// Permanent: run the command in `fix`.
    #[error("the lease store {store} is not initialised ({why}); {fix}")]
    LeaseStoreUninitialised {
        /// The directory or etcd namespace.
        store: String,
        /// What was found.
        why: String,
        /// What to run.
        fix: String,
    },
    /// The lease store serves another layout. Two layouts on one store put one bit pattern
    /// on two nodes (a worker number of one is a sequence range of the other), or, with
    /// another epoch, on two moments: their IDs collide. Permanent: use the store's layout,
    /// or move to a new store as `docs/leases.md` ("Moving to a new layout") says.
    #[error(
        "the lease store {store} serves the layout {recorded}; this process uses {ours}: IDs \
         of two layouts on one store collide. Use the store's layout (the layout flags or \
         IDGEN_* variables of the processes that use it), or move to a new store after \
         `idgen leases move-check`"
    )]
    LayoutMismatch {
        /// The directory or etcd namespace.
        store: String,
        /// The layout the store serves.
        recorded: String,
        /// The layout of the caller.
        ours: String,
    },
    /// The lease store went back in time (restored from a snapshot or a backup): it lost
    /// this holder's last confirmed mark, so it may have handed this number, or others, to
    /// a second process. Issuing stopped. Permanent until an operator runs the procedure
    /// in `fix` (see `docs/leases.md`, "Restoring a store from a backup").
    #[error(
        "the lease store {store} went back in time (restored from a snapshot or a backup?): \
         it lost this holder's last mark, and another process may hold this number; stopped \
         issuing. {fix}"
    )]
    LeaseStoreRestored {
        /// The directory or etcd namespace.
        store: String,
        /// What to run.
        fix: String,
    },
    /// The lease store's server started a short while ago, and its namespace was written
    /// before that start: it may have been restored from a backup that kept its identity,
    /// forgetting holders that still issue. No number is handed out until every live
    /// holder's renewal has reached it (and found such a restore) or its mark has passed.
    /// Transient: a leased generator waits through it and tries again.
    #[error(
        "the lease store {store} started a short while ago: no number is handed out for \
         {wait_ms} ms more, so that every live holder's renewal reaches it first (a restore \
         that kept the database's identity is found that way)"
    )]
    LeaseStoreStarting {
        /// The store.
        store: String,
        /// How long until numbers are handed out.
        wait_ms: u64,
    },
    /// The clock is further behind the previous holder's mark than a leased generator may
    /// wait at start: this host's clock and the previous holder's disagree.
    #[error(
        "the clock is {behind_ms} ms behind the mark left by the previous holder of this worker number"
    )]
    ClockBehindMark {
        /// How far behind.
        behind_ms: u64,
    },
}

impl Error {
    /// Whether the same call may succeed later without any change on the caller's side.
    ///
    /// ```
    /// use idgen::Error;
    /// assert!(Error::ClockMovedBackwards { behind_ms: 3 }.is_transient());
    /// assert!(!Error::LayoutWidthSum { total: 64 }.is_transient());
    /// ```
    pub const fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::ClockMovedBackwards { .. }
                | Error::RandomSource { .. }
                | Error::WouldBlock { .. }
                | Error::LeaseExpired { .. }
                | Error::LeaseLost { .. }
                | Error::LeaseRangeFull { .. }
                | Error::LeaseStore { .. }
                | Error::LeaseStoreStarting { .. }
                | Error::ClockBehindMark { .. }
                | Error::BlockStore { .. }
                | Error::BlocksUnavailable { .. }
        )
    }
}

/// The fields of an ID, to name one in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// Milliseconds since the layout's epoch.
    Time,
    /// The datacenter (or region) number.
    Datacenter,
    /// The worker number inside a datacenter.
    Worker,
    /// The sequence number inside one millisecond.
    Sequence,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Time => "time",
            Field::Datacenter => "datacenter",
            Field::Worker => "worker",
            Field::Sequence => "sequence",
        })
    }
}

/// Why a string is not an ID. Positions are byte offsets into the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseIdError {
    /// The string is empty.
    #[error("the string is empty")]
    Empty,
    /// A byte that is not allowed in this form (a sign, a space, a letter in decimal, a
    /// letter outside Crockford's alphabet, a non-ASCII byte).
    #[error(
        "byte {index} is not allowed here (decimal IDs are digits 0-9 only; base32 IDs use Crockford's alphabet)"
    )]
    InvalidByte {
        /// Offset of the first offending byte.
        index: usize,
    },
    /// A decimal ID with a leading zero: only `0` itself may start with `0`.
    #[error("leading zeros are not allowed")]
    LeadingZero,
    /// The value is above 2^63 - 1.
    #[error("the value is above 9223372036854775807, the largest ID")]
    TooLarge,
    /// A base32 ID that is not exactly 13 characters long.
    #[error("a base32 ID has exactly 13 characters, this string has {len} bytes")]
    WrongLength {
        /// Length of the input in bytes.
        len: usize,
    },
}
