//! Dense numbers from a ticket store: values of named sequences (`"orders"`), handed out in
//! whole blocks by a [`BlockStore`], so that a process can serve a block from memory.
//!
//! A store grants a block of a sequence by moving the sequence's next value past it, durably,
//! before the block is used: every value is granted once, whichever process asks, whatever
//! crashes. Values start at 1 and stay below 2^63 (they fit any `BIGINT` column). A block
//! that was not used can be given back, and is taken back only if nobody has been granted a
//! block of that sequence since, so a clean restart leaves no gap.
//!
//! [`BlockAllocator`] serves one sequence from such blocks: a lock-free cursor inside the
//! current block, the next block fetched in the background before it is needed, and a block
//! size that adapts to the rate of use. [`FileStore`] is the embedded store for one host;
//! [`PostgresStore`] (feature `postgres`) serves a fleet. The protocol, the guarantees and
//! the failure behaviour are in the [design notes](crate::design::blocks).
//!
//! Where each part lives: `allocator.rs` and `allocator_builder.rs` (the allocator and its
//! configuration), `cursor.rs` (its lock-free hot path, loom-checked), `fetcher.rs` (what
//! the callers and the fetcher thread share, and the fetching), `waiting.rs` (the async
//! calls, feature `tokio`), `file/` and `postgres.rs` (the stores). It may use the clocks, `crate::sync`, `crate::error`, `crate::fork_check`
//! and the shared file-store helpers; nothing of the ID kinds.

mod allocator;
mod allocator_builder;
mod cursor;
mod fetcher;
mod file;
#[cfg(fuzzing)]
pub(crate) use file::fuzz_read as fuzz_read_files;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "tokio")]
mod waiting;

pub use allocator::{AllocatorStats, BlockAllocator};
pub use allocator_builder::{
    AllocatorBuilder, DEFAULT_BLOCK_SIZE, DEFAULT_MAX_BLOCK_SIZE, DEFAULT_MAX_WAIT,
    DEFAULT_MIN_BLOCK_SIZE, DEFAULT_REFILL_AT, DEFAULT_TARGET_BLOCK_LIFETIME,
};
pub use file::{DEFAULT_LOCK_TIMEOUT, FileStore, default_blocks_dir};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, TABLE};

use std::fmt;

use crate::error::Error;

/// The largest value a sequence hands out: the largest positive `i64`.
pub const MAX_VALUE: u64 = i64::MAX as u64;

/// The most characters in a sequence name.
pub const MAX_NAME_LEN: usize = 64;

/// A sequence's name: 1 to 64 of `a-z`, `0-9`, `_` and `-`, so that it is safe as a file
/// name, a SQL value and a URL path segment alike.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SequenceName(String);

impl SequenceName {
    /// The name, if it is 1 to [`MAX_NAME_LEN`] of `a-z`, `0-9`, `_` and `-`.
    ///
    /// ```
    /// use idgen::blocks::SequenceName;
    /// assert_eq!(SequenceName::new("orders-eu_2")?.as_str(), "orders-eu_2");
    /// assert!(SequenceName::new("Orders").is_err());
    /// assert!(SequenceName::new("../orders").is_err());
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn new(name: &str) -> Result<SequenceName, Error> {
        let refuse = |reason| {
            Err(Error::SequenceName {
                name: name.chars().take(MAX_NAME_LEN).collect(),
                reason,
            })
        };
        if name.is_empty() {
            return refuse("it is empty");
        }
        if name.len() > MAX_NAME_LEN {
            return refuse("it is longer than 64 characters");
        }
        let allowed =
            |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-';
        if !name.bytes().all(allowed) {
            return refuse("only a-z, 0-9, _ and - are allowed");
        }
        Ok(SequenceName(name.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SequenceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SequenceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SequenceName({})", self.0)
    }
}

/// A block of a sequence: the values `first..end`, granted to one holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The first value of the block (at least 1).
    pub first: u64,
    /// One past the last value (at most [`MAX_VALUE`] + 1).
    pub end: u64,
    /// The sequence's change counter after this grant: a give-back is taken only while it
    /// is still the latest change, so a give-back repeated (say after a lost reply) or one
    /// for an older block can never put values back that someone else holds.
    pub serial: u64,
}

impl Grant {
    /// How many values the block holds.
    pub const fn len(&self) -> u64 {
        self.end - self.first
    }

    /// Whether the block holds no value.
    pub const fn is_empty(&self) -> bool {
        self.end == self.first
    }
}

/// Where blocks come from. Every implementation grants each value of a sequence at most
/// once, across all its users, and makes a grant durable before it returns it.
pub trait BlockStore: Send + Sync {
    /// A block of up to `size` (at least 1) values of `sequence`, starting at its next value
    /// (1 for a sequence never used). The block is shorter only at the end of the range.
    ///
    /// Fails with [`Error::SequenceExhausted`] once the sequence has handed out
    /// [`MAX_VALUE`], and with [`Error::BlockStore`] when the store fails (the block is
    /// then never used: at worst a gap, if the change was made and its answer lost).
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error>;

    /// Gives the values `unused_from..grant.end` back to `sequence`, where `grant` is the
    /// latest block this store granted to the caller and none of those values was handed
    /// out. `unused_from` may lie below `grant.first` when the caller also holds, unused,
    /// the values just below it (the tail of its previous block, which ended at
    /// `grant.first`).
    ///
    /// Taken back (`true`) only if the sequence has not changed since `grant` (same
    /// serial), so its next value becomes `unused_from` and a clean restart leaves no gap;
    /// otherwise nothing changes (`false`) and the values are a gap, never handed out twice.
    fn give_back(
        &self,
        sequence: &SequenceName,
        grant: &Grant,
        unused_from: u64,
    ) -> Result<bool, Error>;
}

macro_rules! forward_block_store {
    ($($pointer:ident)::+) => {
        impl<S: BlockStore + ?Sized> BlockStore for $($pointer)::+<S> {
            fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error> {
                (**self).grant(sequence, size)
            }

            fn give_back(
                &self,
                sequence: &SequenceName,
                grant: &Grant,
                unused_from: u64,
            ) -> Result<bool, Error> {
                (**self).give_back(sequence, grant, unused_from)
            }
        }
    };
}

// One store shared by many allocators (one per sequence), or chosen at run time.
forward_block_store!(Box);
forward_block_store!(std::sync::Arc);

/// The grant of `size` values from `next`, as change `serial`, or why not.
fn grant_from(sequence: &SequenceName, next: u64, size: u64, serial: u64) -> Result<Grant, Error> {
    if next > MAX_VALUE {
        return Err(Error::SequenceExhausted {
            sequence: sequence.to_string(),
        });
    }
    let end = next.saturating_add(size.max(1)).min(MAX_VALUE + 1);
    Ok(Grant {
        first: next,
        end,
        serial,
    })
}

/// Whether a give-back has values to give (`false`: `unused_from` is the grant's end);
/// refuses one that cannot describe values of a sequence.
fn has_values_to_give_back(grant: &Grant, unused_from: u64) -> Result<bool, Error> {
    if grant.first == 0 || grant.first > grant.end || grant.end > MAX_VALUE + 1 {
        return Err(Error::BlockStore {
            reason: format!(
                "cannot give back {}..{}: not a block of a sequence",
                grant.first, grant.end
            ),
        });
    }
    if unused_from == 0 || unused_from > grant.end {
        return Err(Error::BlockStore {
            reason: format!(
                "cannot give back from {unused_from}: not within the values before {}",
                grant.end
            ),
        });
    }
    Ok(unused_from < grant.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_1_to_64_of_a_safe_alphabet() {
        for good in ["a", "orders", "orders-eu_2", &"x".repeat(64)] {
            assert!(SequenceName::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Orders",
            "a b",
            "a/b",
            "..",
            "é",
            "a.b",
            &"x".repeat(65),
        ] {
            assert!(
                matches!(SequenceName::new(bad), Err(Error::SequenceName { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_grant_stops_at_the_end_of_the_i64_range_and_then_fails() {
        let name = SequenceName::new("s").unwrap();
        assert_eq!(
            grant_from(&name, MAX_VALUE - 1, 10, 3),
            Ok(Grant {
                first: MAX_VALUE - 1,
                end: MAX_VALUE + 1,
                serial: 3,
            })
        );
        assert_eq!(
            grant_from(&name, MAX_VALUE + 1, 1, 1),
            Err(Error::SequenceExhausted {
                sequence: "s".into()
            })
        );
        assert_eq!(grant_from(&name, 1, 0, 1).unwrap().len(), 1, "at least one");
    }
}
