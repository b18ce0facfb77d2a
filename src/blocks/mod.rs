//! Dense numbers from a ticket store: values of named sequences (`"orders"`), handed out in
//! whole blocks by a [`BlockStore`], so that a process can serve a block from memory.
//!
//! A store grants a block of a sequence by moving the sequence's next value past it, durably,
//! before the block is used: every value is granted once, whichever process asks, whatever
//! crashes. Values start at 1 and stay below 2^63 (they fit any `BIGINT` column). A block
//! that was not used can be given back, and is taken back only if nobody has been granted a
//! block of that sequence since, so a clean restart leaves no gap.
//!
//! This module holds the store layer: the trait, sequence names, and [`FileStore`], the
//! embedded store for one host.

mod file;

pub use file::{FileStore, default_blocks_dir};

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
    /// [`MAX_VALUE`], and with [`Error::BlockStore`] when the store fails (nothing is
    /// granted then).
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error>;

    /// Gives `unused`, the unused tail of a block this store granted, back to `sequence`:
    /// taken back (`true`) only if no block of the sequence was granted since, so that its
    /// next value is `unused.end`; otherwise nothing changes (`false`) and the values are a
    /// gap, never handed out twice.
    fn give_back(&self, sequence: &SequenceName, unused: Grant) -> Result<bool, Error>;
}

/// The next value after granting `size` values from `next`: the grant, or why not.
fn grant_from(sequence: &SequenceName, next: u64, size: u64) -> Result<Grant, Error> {
    if next > MAX_VALUE {
        return Err(Error::SequenceExhausted {
            sequence: sequence.to_string(),
        });
    }
    let end = next.saturating_add(size.max(1)).min(MAX_VALUE + 1);
    Ok(Grant { first: next, end })
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
            grant_from(&name, MAX_VALUE - 1, 10),
            Ok(Grant {
                first: MAX_VALUE - 1,
                end: MAX_VALUE + 1
            })
        );
        assert_eq!(
            grant_from(&name, MAX_VALUE + 1, 1),
            Err(Error::SequenceExhausted {
                sequence: "s".into()
            })
        );
        assert_eq!(grant_from(&name, 1, 0).unwrap().len(), 1, "at least one");
    }
}
