//! The one place that names `std` or `loom` synchronisation primitives.
//!
//! Built with `--cfg idgen_loom`, every atomic, `Arc`, spin hint and yield in the crate
//! becomes loom's, so the loom models in `loom_tests/` explore the real generator code,
//! including every busy-wait (loom's scheduler is unfair and only moves on at a yield).

#[cfg(idgen_loom)]
pub(crate) use loom::{
    hint::spin_loop,
    sync::Arc,
    sync::atomic::{AtomicU64, Ordering},
    thread::yield_now,
};

#[cfg(not(idgen_loom))]
pub(crate) use std::{
    hint::spin_loop,
    sync::Arc,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    thread::yield_now,
};

// Only the etcd store's preferred-member index uses it; named apart so a build without the
// feature has no unused import.
#[cfg(all(idgen_loom, feature = "etcd"))]
pub(crate) use loom::sync::atomic::AtomicUsize;
#[cfg(all(not(idgen_loom), feature = "etcd"))]
pub(crate) use std::sync::atomic::AtomicUsize;
