//! Worker-number leases: a process holds its worker number by lease, and a generator built
//! from a lease stops issuing before anyone else could take the number.
//!
//! The protocol and its timing argument are in [`crate::design`] and `docs/leases.md`; in
//! short:
//!
//! - A [`LeaseStore`] hands out the lowest free worker number of a [`WorkerRange`] as a
//!   [`Claim`], together with the previous holder's **mark**: a Unix millisecond that every
//!   ID the previous holder issued is dated at or before.
//! - [`LeasedGenerator`] writes its own mark (a TTL ahead of the moment the request was
//!   sent) at acquire and at each renewal, starts strictly after the previous mark, and
//!   gives its [`Generator`] a **ceiling**: the earlier of its mark and the end of the
//!   lease's validity minus a safety margin, both measured from when the acquire or renewal
//!   request was *sent*. The hot path compares each ID's millisecond with the ceiling (one
//!   atomic load, no system call); past it, calls fail with [`Error::LeaseExpired`].
//! - A background keeper renews every `ttl / 3`, retries failures with backoff, takes a new
//!   number if the old one is lost for good, and releases the number (writing the real
//!   high-water mark, so a successor need not wait) on [`LeasedGenerator::release`] or drop.

#[cfg(feature = "etcd")]
mod etcd;
mod file;
mod keeper;
mod leased;
mod range;
mod store;

#[cfg(feature = "etcd")]
pub use etcd::{ETCD_DEFAULT_OUTAGE_HORIZON, ETCD_DEFAULT_TTL, EtcdStore};
pub use file::{
    FILE_STORE_DEFAULT_TTL, FILE_STORE_MAX_TTL, FileStore, default_lease_dir, legacy_lease_dir,
};
pub use leased::{LeaseState, LeaseStats, LeasedBuilder, LeasedGenerator};
pub use range::WorkerRange;
pub use store::{Claim, LeaseStore};
