//! The fleet store: worker numbers as etcd keys attached to an etcd lease.
//!
//! One file per idea; each may use only the files listed for it, so that no two import each
//! other:
//!
//! - `keys.rs`: what is written under the namespace and how it reads back (the namespace
//!   prefix, the holder key's token, marks, the `store` key's restore markers, the revision
//!   of an answer). Uses nothing else of the folder.
//! - `connection.rs`: the client and private runtime shared by the store and its claims,
//!   the request timeout, the refusal to block inside a Tokio runtime, raising a key, and
//!   the namespace's verdict once a claim found it restored. Uses `keys`.
//! - `store.rs`: [`EtcdStore`] itself: connecting, its settings, its key names, and the
//!   `init` steps. Uses `connection` and `keys`.
//! - `claim.rs`: a held number: renewal, take-back, the guarded mark write, the evidence of
//!   a failed write, release. Uses `connection` and `keys`.
//! - `acquire.rs`: `impl LeaseStore for EtcdStore`: acquire, survey, the layout and horizon
//!   records. Uses `store`, `claim`, `connection` and `keys`.
//!
//! This file only declares them and re-exports what `lease` publishes.

mod acquire;
mod claim;
mod connection;
mod keys;
mod store;

pub use store::{ETCD_DEFAULT_OUTAGE_HORIZON, ETCD_DEFAULT_TTL, EtcdStore};
