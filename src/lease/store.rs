//! What a lease store promises: the traits every backend implements.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::snowflake::Layout;

use super::WorkerRange;

/// Where worker numbers are leased from. [`FileStore`](super::FileStore) (one host) and,
/// for a fleet, `EtcdStore` (feature `etcd`) and `PostgresStore` (feature `postgres`) are
/// built in; a store of your own implements these methods with the same promises (the
/// suite in `tests/lease_conformance.rs` checks them).
pub trait LeaseStore: Send + Sync + fmt::Debug {
    /// How long a claim stays valid after the request that acquired or last renewed it was
    /// sent, if it is not renewed. After that, the store may hand the number to another
    /// process.
    fn ttl(&self) -> Duration;

    /// How far ahead of each renewal a leased generator writes its mark by default, and so
    /// how long it goes on issuing through a store outage (see
    /// [`LeasedBuilder::outage_horizon`](super::LeasedBuilder::outage_horizon)). Default:
    /// the TTL, which rides through nothing; a networked store gives minutes.
    fn default_outage_horizon(&self) -> Duration {
        self.ttl()
    }

    /// Claims the lowest free worker number in `range`: free means no live holder, and a
    /// record that can be trusted. Fails with [`Error::LeaseRangeFull`] when there is none,
    /// and with [`Error::LeaseStore`] when the store cannot be reached.
    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error>;

    /// As [`LeaseStore::acquire`], recording `holder` (a name for operators) with the
    /// claim where the store can, for [`LeaseStore::survey`]. Default: `acquire`.
    fn acquire_as(&self, range: &WorkerRange, holder: &str) -> Result<Box<dyn Claim>, Error> {
        let _ = holder;
        self.acquire(range)
    }

    /// Records `layout` as the one the store serves if it has none yet, and fails with
    /// [`Error::LayoutMismatch`] if it serves another (every width and the epoch count):
    /// two layouts on one store issue the same IDs. Of two processes with different layouts
    /// racing to be first, exactly one records its own.
    /// [`LeasedBuilder::acquire`](super::LeasedBuilder::acquire) and
    /// [`ExternalLease::acquire`](super::ExternalLease::acquire) call it before taking a
    /// number. Default: records
    /// nothing and accepts every layout, so a store of your own should implement it.
    fn bind_layout(&self, layout: &Layout) -> Result<(), Error> {
        let _ = layout;
        Ok(())
    }

    /// Records that a holder writes its marks up to `horizon` ahead, if no larger horizon
    /// is recorded, and returns the largest recorded. A holder calls it before it writes a
    /// mark that far ahead, and a successor that must infer a lost mark infers one this far
    /// ahead: a horizon of its own that is shorter than a cut-off holder's would let the
    /// two overlap. Default: `horizon` (nothing recorded).
    fn raise_horizon(&self, horizon: Duration) -> Result<Duration, Error> {
        Ok(horizon)
    }

    /// The layout the store serves, if one is recorded (see [`LeaseStore::bind_layout`]).
    /// Default: `None`.
    fn recorded_layout(&self) -> Result<Option<Layout>, Error> {
        Ok(None)
    }

    /// What the store knows of each number of `range`, read without taking any: the fleet
    /// view. Default: an error saying this store cannot list its numbers.
    fn survey(&self, range: &WorkerRange) -> Result<Vec<NumberRecord>, Error> {
        Err(Error::LeaseStore {
            reason: format!("{self:?} cannot list the numbers of {range}"),
        })
    }
}

/// One number as [`LeaseStore::survey`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NumberRecord {
    /// The datacenter.
    pub datacenter: u64,
    /// The worker number.
    pub worker: u64,
    /// Free, held, or not to be trusted.
    pub state: NumberState,
    /// The name its holder gave, if the store keeps one.
    pub holder: Option<String>,
    /// The last mark written, if readable: no later holder issues an ID dated at or before
    /// it.
    pub mark_unix_ms: Option<u64>,
    /// What is wrong with a corrupt or missing record, or anything else worth knowing.
    pub detail: Option<String>,
}

impl NumberRecord {
    /// A free number with nothing recorded.
    pub fn new(datacenter: u64, worker: u64) -> NumberRecord {
        NumberRecord {
            datacenter,
            worker,
            state: NumberState::Free,
            holder: None,
            mark_unix_ms: None,
            detail: None,
        }
    }
}

/// The state of a number in [`NumberRecord::state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NumberState {
    /// No live holder: the next acquire may take it (once its mark has passed).
    Free,
    /// A live holder has it.
    Held,
    /// Its record or key cannot be read or trusted: never handed out until repaired.
    Corrupt,
    /// Its record or mark was deleted or replaced: its next holder waits a horizon.
    Missing,
}

impl NumberState {
    /// `free`, `held`, `corrupt` or `missing`.
    pub fn as_str(self) -> &'static str {
        match self {
            NumberState::Free => "free",
            NumberState::Held => "held",
            NumberState::Corrupt => "corrupt",
            NumberState::Missing => "missing",
        }
    }
}

/// Implements [`LeaseStore`] for a pointer to a store by forwarding every method.
macro_rules! forward_store {
    ($pointer:ident) => {
        impl<S: LeaseStore + ?Sized> LeaseStore for $pointer<S> {
            fn ttl(&self) -> Duration {
                (**self).ttl()
            }

            fn default_outage_horizon(&self) -> Duration {
                (**self).default_outage_horizon()
            }

            fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
                (**self).acquire(range)
            }

            fn acquire_as(
                &self,
                range: &WorkerRange,
                holder: &str,
            ) -> Result<Box<dyn Claim>, Error> {
                (**self).acquire_as(range, holder)
            }

            fn survey(&self, range: &WorkerRange) -> Result<Vec<NumberRecord>, Error> {
                (**self).survey(range)
            }

            fn bind_layout(&self, layout: &Layout) -> Result<(), Error> {
                (**self).bind_layout(layout)
            }

            fn recorded_layout(&self) -> Result<Option<Layout>, Error> {
                (**self).recorded_layout()
            }

            fn raise_horizon(&self, horizon: Duration) -> Result<Duration, Error> {
                (**self).raise_horizon(horizon)
            }
        }
    };
}

// A boxed store is a store, so one can be chosen at run time (`Box<dyn LeaseStore>`).
forward_store!(Box);
// A shared store is a store, so one process can lease through it from several places (its
// own generator, and the lease API it serves).
forward_store!(Arc);

/// One worker number, held. Dropping a claim without [`Claim::release`] leaves the number
/// to expire (the file store frees it at once, as the OS drops the lock).
pub trait Claim: Send + fmt::Debug {
    /// The datacenter.
    fn datacenter(&self) -> u64;

    /// The worker number.
    fn worker(&self) -> u64;

    /// The mark the previous holder left: every ID it issued is dated at or before this
    /// Unix millisecond. `None` when the number was never held.
    fn previous_mark_unix_ms(&self) -> Option<u64>;

    /// Whether the store has lost what it knew of this number's earlier holders: its record
    /// or mark was deleted, emptied, re-created or replaced, so
    /// [`Claim::previous_mark_unix_ms`] is at best a lower bound. A leased generator then
    /// takes the previous mark to be one outage horizon after it took the number: every
    /// earlier holder's IDs are dated at or before its last mark, written at most a horizon
    /// after its last renewal, before now; on clocks that agree within the time between
    /// that renewal and now (see `docs/leases.md`, "Uniqueness follows from the mark
    /// alone"). Default: `false`.
    fn previous_mark_unknown(&self) -> bool {
        false
    }

    /// Proves the claim still holds, extends it by the store's TTL from now, and records
    /// `mark_unix_ms` as the holder's new promise. [`Error::LeaseLost`] (or
    /// [`Error::LeaseStoreRestored`], when the store went back in time) when the number is
    /// gone for good; any other error is transient (the store could not be reached).
    fn renew(&mut self, mark_unix_ms: u64) -> Result<(), Error>;

    /// Records `mark_unix_ms` (the last millisecond actually used) and frees the number at
    /// once.
    fn release(&mut self, mark_unix_ms: u64) -> Result<(), Error>;
}

/// Whether `recorded` (a store's layout record, found at `place`) is `layout`.
pub(super) fn check_layout(place: &str, recorded: &str, layout: &Layout) -> Result<(), Error> {
    match Layout::from_record(recorded) {
        Some(theirs) if theirs == *layout => Ok(()),
        Some(theirs) => Err(Error::LayoutMismatch {
            store: place.to_string(),
            recorded: theirs.to_string(),
            ours: layout.to_string(),
        }),
        None => Err(unreadable_layout(place)),
    }
}

/// A layout record that does not parse: never guessed at, never overwritten.
pub(super) fn unreadable_layout(place: &str) -> Error {
    Error::LeaseStore {
        reason: format!(
            "{place} is not an idgen layout record (damaged or edited by hand); restore it, or \
             write the store's layout there as one line: idgen-layout v1 time=T datacenter=D \
             worker=W sequence=S epoch=UNIX_MS"
        ),
    }
}
