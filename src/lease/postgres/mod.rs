//! The PostgreSQL store (feature `postgres`): worker numbers as rows of a table, held until
//! a time on the server's clock, for a fleet that runs PostgreSQL and not etcd.
//!
//! One file per idea; each may use only the files listed for it:
//!
//! - `schema.rs`: the tables (created only if absent) and every statement sent. Uses
//!   nothing else of the folder.
//! - `verdict.rs`: what the answers mean, without I/O (a namespace usable or restored,
//!   why a write matched nothing, a survey's records); the fleet simulator's PostgreSQL
//!   model calls it too. Uses nothing else of the folder.
//! - `store.rs`: [`PostgresStore`] itself: connecting, settings, the namespace check, the
//!   `init` steps. Uses `schema` and `verdict`.
//! - `claim.rs`: a held number: renewal, release. Uses `store`, `schema` and `verdict`.
//! - `acquire.rs`: `impl LeaseStore for PostgresStore`. Uses `store`, `claim`, `schema`
//!   and `verdict`.

mod acquire;
mod claim;
mod schema;
mod store;
pub(crate) mod verdict;

pub use store::{POSTGRES_DEFAULT_OUTAGE_HORIZON, POSTGRES_DEFAULT_TTL, PostgresStore};
