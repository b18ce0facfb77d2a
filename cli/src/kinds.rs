//! The three kinds of ID the command hands out, shared by `idgen next`, `idgen decode` and
//! the service: the names clients use for them, and the 128-bit generators (which need no
//! worker number). Reading any of the three from text is `decoding`'s.

use clap::ValueEnum;
use idgen::{Error, UlidGenerator, Uuid7Generator};
use idgen_cli::input::shown;
use serde::Serialize;
use utoipa::ToSchema;

use crate::failure::Failure;

/// A kind of ID, as `kind` names it in requests and `--kind` on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// 64-bit Snowflake IDs from the leased worker number.
    Snowflake,
    /// RFC 9562 version 7 UUIDs, canonical lowercase text.
    Uuidv7,
    /// ULIDs, 26 characters of Crockford base32.
    Ulid,
}

/// Every kind, in a fixed order (the service's per-kind counters follow it).
pub const KINDS: [Kind; 3] = [Kind::Snowflake, Kind::Uuidv7, Kind::Ulid];

impl Kind {
    pub const NAMES: &str = r#""snowflake", "uuidv7" or "ulid""#;

    /// Where the kind is in [`KINDS`] (and in the service's per-kind counters).
    pub fn index(self) -> usize {
        match self {
            Kind::Snowflake => 0,
            Kind::Uuidv7 => 1,
            Kind::Ulid => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Snowflake => "snowflake",
            Kind::Uuidv7 => "uuidv7",
            Kind::Ulid => "ulid",
        }
    }

    /// The kind a request names, exactly (no other spelling, no other case).
    pub fn parse(text: &str) -> Result<Kind, String> {
        KINDS
            .into_iter()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| format!("kind must be {}; got {:?}", Kind::NAMES, shown(text)))
    }
}

/// One generator of each 128-bit kind, built once for the process.
pub struct CountedGenerators {
    uuid7: Uuid7Generator,
    ulid: UlidGenerator,
}

impl CountedGenerators {
    pub fn new() -> Result<CountedGenerators, Failure> {
        let failed = |error: Error| Failure::runtime(format!("cannot start a generator: {error}"));
        Ok(CountedGenerators {
            uuid7: Uuid7Generator::new().map_err(failed)?,
            ulid: UlidGenerator::new().map_err(failed)?,
        })
    }

    /// Their slow-path counters, added up.
    pub fn stats(&self) -> idgen::Stats {
        self.uuid7.stats() + self.ulid.stats()
    }

    /// `count` IDs of a 128-bit kind, in increasing order, as text; `None` for Snowflake
    /// IDs, which come from the leased generator.
    pub fn issue(&self, kind: Kind, count: usize) -> Option<Result<Vec<String>, Error>> {
        match kind {
            Kind::Snowflake => None,
            Kind::Uuidv7 => Some(self.uuid7.next_uuids(count).map(as_text)),
            Kind::Ulid => Some(self.ulid.next_ulids(count).map(as_text)),
        }
    }
}

/// IDs as their text forms.
pub fn as_text<T: ToString>(ids: Vec<T>) -> Vec<String> {
    ids.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_at_its_index() {
        for (at, kind) in KINDS.iter().enumerate() {
            assert_eq!(kind.index(), at, "{kind:?}");
        }
    }
}
