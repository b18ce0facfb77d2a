//! The three kinds of ID the command hands out, shared by `idgen next`, `idgen decode` and
//! the service: the names clients use for them, the 128-bit generators (which need no
//! worker number), and recognising any of the three in text.

use clap::ValueEnum;
use idgen::opaque::{Codec, OpaqueId};
use idgen::{Error, Layout, Ulid, UlidGenerator, Uuid7, Uuid7Generator};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::Decoded;
use crate::{Failure, decoded, parse_id, time};

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

pub use idgen_cli::input::shown;

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

/// Where an opaque ID can be decoded, for [`decode_any`]: a codec, or the reason there is
/// none (what to do instead).
pub type OpaqueKeys<'a> = Result<&'a Codec, &'a str>;

/// The parts of an ID of any kind, told apart by their text: `o` and a digit start an
/// opaque ID (decoded with `opaque`, then shown as the Snowflake ID behind it), 36
/// characters are a UUID, 26 a ULID, anything else a Snowflake ID read with `layout`.
pub fn decode_any(layout: &Layout, opaque: OpaqueKeys<'_>, text: &str) -> Result<Decoded, String> {
    if OpaqueId::looks_like(text) {
        // Parsed first: text that only starts like one is told what is wrong with it.
        let parsed: OpaqueId = text.parse().map_err(|error: Error| error.to_string())?;
        let codec = opaque.map_err(|why| format!("{:?} is an opaque ID, {why}", shown(text)))?;
        let id = crate::opaque::decode_parsed(codec, text, parsed)?;
        return Ok(Decoded {
            opaque: Some(text.to_string()),
            ..decoded(layout, id)
        });
    }
    match text.len() {
        36 => {
            let uuid: Uuid7 = parse_as(text, "UUIDv7")?;
            Ok(decoded_counted(&uuid, Kind::Uuidv7, uuid.unix_ms()))
        }
        26 => {
            let ulid: Ulid = parse_as(text, "ULID")?;
            Ok(decoded_counted(&ulid, Kind::Ulid, ulid.unix_ms()))
        }
        _ => Ok(decoded(layout, parse_id(text)?)),
    }
}

fn parse_as<T: std::str::FromStr<Err: std::fmt::Display>>(
    text: &str,
    what: &str,
) -> Result<T, String> {
    text.parse()
        .map_err(|error| format!("invalid {what} {:?}: {error}", shown(text)))
}

/// What there is to say of a UUIDv7 or a ULID: its canonical text, kind and time.
fn decoded_counted(id: &impl std::fmt::Display, kind: Kind, unix_ms: u64) -> Decoded {
    Decoded {
        id: id.to_string(),
        kind,
        created_at: time::rfc3339_ms(unix_ms),
        datacenter: None,
        worker: None,
        sequence: None,
        opaque: None,
    }
}

/// One line of `idgen decode`'s text output for a decoded ID.
pub fn decoded_line(decoded: &Decoded) -> String {
    match (decoded.datacenter, decoded.worker, decoded.sequence) {
        (Some(datacenter), Some(worker), Some(sequence)) => format!(
            "{}  {}  datacenter {datacenter}  worker {worker}  sequence {sequence}",
            decoded.id, decoded.created_at
        ),
        _ => format!(
            "{}  {}  {}",
            decoded.id,
            decoded.created_at,
            decoded.kind.name()
        ),
    }
}
