//! Other crates' traits implemented for idgen's types, one file per crate, each behind the
//! feature of the same name: `serde.rs`, `uuid.rs`, `ulid.rs`, `postgres.rs`, `sqlx.rs`,
//! `diesel.rs`, `utoipa.rs`.
//!
//! Nothing here adds behaviour: each file converts through the types' public API, so it may
//! use only the crate root's public items. (diesel's `AsExpression` and `FromSqlRow` are
//! derives, so they sit on the types themselves.)

#[cfg(feature = "diesel")]
mod diesel;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "serde")]
mod serde;
#[cfg(feature = "sqlx")]
mod sqlx;
#[cfg(feature = "ulid")]
mod ulid;
#[cfg(feature = "utoipa")]
mod utoipa;
#[cfg(feature = "uuid")]
mod uuid;
