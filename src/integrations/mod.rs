//! Other crates' traits implemented for idgen's types, one file per crate, each behind the
//! feature of the same name: `serde.rs`, `uuid.rs`, `ulid.rs`, `postgres.rs`, `sqlx.rs`.
//!
//! Nothing here adds behaviour: each file converts through the types' public API, so it may
//! use only the crate root's public items.

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "serde")]
mod serde;
#[cfg(feature = "sqlx")]
mod sqlx;
#[cfg(feature = "ulid")]
mod ulid;
#[cfg(feature = "uuid")]
mod uuid;
