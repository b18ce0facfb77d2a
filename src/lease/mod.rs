//! Worker-number leases: a process holds its worker number by lease, a generator built from
//! a lease never issues an ID dated after the mark it wrote, and no later holder of the
//! number issues one dated at or before it.
//!
//! The protocol and its timing argument are in [`crate::design`] and `docs/leases.md`; in
//! short:
//!
//! - A [`LeaseStore`] hands out the lowest free worker number of a [`WorkerRange`] as a
//!   [`Claim`], together with the previous holder's **mark**: a Unix millisecond that every
//!   ID the previous holder issued is dated at or before.
//! - [`LeasedGenerator`] writes its own mark (an **outage horizon** ahead of the moment the
//!   acquire or renewal request was sent, never less than the TTL), starts strictly after
//!   the previous mark, and gives its [`Generator`](crate::Generator) a **ceiling**: its
//!   mark, raised only once the store confirmed it. The hot path compares each ID's
//!   millisecond with the ceiling (one atomic load, no system call); past it, calls fail
//!   with [`Error::LeaseExpired`](crate::Error::LeaseExpired). So a holder cut off from its
//!   store goes on issuing up to its mark, and no later holder starts before that mark.
//! - A background keeper renews every `ttl / 3`, retries failures with backoff (reporting an
//!   outage in [`LeaseStats`] while they fail), takes a new
//!   number if the old one is lost for good, and releases the number (writing the real
//!   high-water mark, so a successor need not wait) on [`LeasedGenerator::release`] or drop.
//!
//! Where each part lives:
//!
//! - `store.rs`, `range.rs`: the store trait every backend implements, and the range of
//!   numbers a process may take.
//! - `file/`: the embedded store, a directory on one host; `etcd/` and `postgres/`: the
//!   fleet stores; `records.rs`: the text forms both write (marks, restore markers, tokens).
//! - `protocol/`: the protocol itself as a pure state machine (which number to take, how
//!   long to wait for its previous mark, which marks to write, what an outage, a loss and a
//!   release do); `driver.rs` runs it on a real store, `keeper.rs` on one thread for every
//!   number of a process.
//! - `take_async.rs`: the taking of a number for [`LeasedBuilder::acquire_async`] (feature
//!   `tokio`): the driver's loop with its waits on Tokio's timers and each store request
//!   on the blocking pool.
//! - `leased.rs`: the generators a user holds; `stats.rs`, `timing.rs`, `watch.rs`: what
//!   they report, how they are tuned, and how a caller watches an acquire that waits.
//! - `external.rs`: a lease held for a process in another language.
//!
//! It may use the Snowflake generator (whose node and ceiling the keeper drives), the
//! clocks, `crate::sync` and `crate::error`; the ID paths never call into it.

mod driver;
#[cfg(feature = "etcd")]
mod etcd;
mod external;
mod file;
#[cfg(fuzzing)]
pub(crate) use file::fuzz_read as fuzz_read_files;
mod keeper;
mod leased;
#[cfg(feature = "postgres")]
mod postgres;
mod protocol;
mod range;
#[cfg(any(feature = "etcd", feature = "postgres"))]
mod records;
#[cfg(test)]
mod simulation;
mod stats;
mod store;
#[cfg(feature = "tokio")]
mod take_async;
mod timing;
mod watch;

#[cfg(feature = "etcd")]
pub use etcd::{ETCD_DEFAULT_OUTAGE_HORIZON, ETCD_DEFAULT_TTL, EtcdStore};
pub use external::{ExternalLease, ExternalTerms};
#[cfg(feature = "blocks")]
pub(crate) use file::default_state_dir;
pub use file::{
    FILE_STORE_DEFAULT_TTL, FILE_STORE_MAX_TTL, FileStore, default_lease_dir, legacy_lease_dir,
};
pub use leased::{LeasedBuilder, LeasedGenerator, LeasedShardedGenerator};
#[cfg(feature = "postgres")]
pub use postgres::{POSTGRES_DEFAULT_OUTAGE_HORIZON, POSTGRES_DEFAULT_TTL, PostgresStore};
pub use range::WorkerRange;
pub use stats::{LeaseState, LeaseStats};
pub use store::{Claim, LeaseStore, NumberRecord, NumberState};
pub use timing::MAX_OUTAGE_HORIZON;
pub use watch::{AcquireWatch, MarkWait};
