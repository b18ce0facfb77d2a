//! Snowflake IDs: 63-bit [`Id`]s of a [`Layout`] (time, datacenter, worker, sequence), issued
//! by a [`Generator`] per (datacenter, worker) node or by a [`ShardedGenerator`] that keeps one
//! per core.
//!
//! - `layout.rs`, `id.rs`: the bit maths and the ID type with its text forms. Pure.
//! - `presets.rs`: well-known layouts of other systems' IDs, to decode, and to make where
//!   they fit a [`Layout`]. Pure.
//! - `node.rs`: the node a generator issues as and its lease ceiling, packed in one word.
//! - `generator.rs`, `builder.rs`: the generator over the shared engine, and its
//!   configuration.
//! - `resume.rs`: where a resumed generator starts, above everything an earlier holder
//!   issued.
//! - `sharded.rs`: one generator per core, each thread pinned to one.
//! - `waiting.rs`: the generator's calls that can wait, as `async` ones on Tokio's timers
//!   (feature `tokio`).
//!
//! It may use the engine, the clocks, `crate::sync` and `crate::error`. The lease layer
//! (`crate::lease`) drives a generator's node and ceiling from outside, through the
//! crate-private `Generator::set_tenure` and `Generator::move_to`.

mod builder;
mod generator;
mod id;
mod layout;
mod node;
mod presets;
mod resume;
#[cfg(not(idgen_loom))]
mod sharded;
#[cfg(all(feature = "tokio", not(idgen_loom)))]
mod waiting;

pub use self::builder::{Builder, DEFAULT_CLOCK_BACK_TOLERANCE_MS};
pub use self::generator::Generator;
pub use self::id::{Base32, Id};
pub use self::layout::{DEFAULT_EPOCH_UNIX_MS, IdParts, Layout};
pub use self::presets::{NotAPresetId, Preset, PresetField, PresetParts, UnknownPreset};
#[cfg(not(idgen_loom))]
pub(crate) use self::sharded::Pins;
#[cfg(not(idgen_loom))]
pub use self::sharded::{ShardedBuilder, ShardedGenerator};
