//! Reading an ID of any kind from text, and what it says: Snowflake IDs (decimal or base32),
//! UUIDv7s, ULIDs and opaque IDs, for `idgen decode`, `idgen opaque` and the service's
//! decode endpoint.

use idgen::opaque::{Codec, OpaqueId};
use idgen::{Error, Id, Layout, Ulid, Uuid7};
use idgen_cli::input::shown;

use crate::api::Decoded;
use crate::kinds::Kind;
use crate::opaque::decode_parsed;

/// Parses an ID in either text form: canonical decimal, or 13 characters of base32.
pub fn parse_id(text: &str) -> Result<Id, String> {
    match text.parse::<Id>() {
        Ok(id) => Ok(id),
        Err(decimal) if text.len() == 13 && !text.bytes().all(|b| b.is_ascii_digit()) => {
            Id::from_base32(text).map_err(|base32| {
                format!(
                    "invalid ID {:?}: not canonical decimal ({decimal}) nor base32 ({base32})",
                    shown(text)
                )
            })
        }
        Err(decimal) => Err(format!("invalid ID {:?}: {decimal}", shown(text))),
    }
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
        let id = decode_parsed(codec, text, parsed)?;
        return Ok(Decoded {
            opaque: Some(text.to_string()),
            ..Decoded::snowflake(layout, id)
        });
    }
    match text.len() {
        36 => {
            let uuid: Uuid7 = parse_as(text, "UUIDv7")?;
            Ok(Decoded::counted(&uuid, Kind::Uuidv7, uuid.unix_ms()))
        }
        26 => {
            let ulid: Ulid = parse_as(text, "ULID")?;
            Ok(Decoded::counted(&ulid, Kind::Ulid, ulid.unix_ms()))
        }
        _ => Ok(Decoded::snowflake(layout, parse_id(text)?)),
    }
}

fn parse_as<T: std::str::FromStr<Err: std::fmt::Display>>(
    text: &str,
    what: &str,
) -> Result<T, String> {
    text.parse()
        .map_err(|error| format!("invalid {what} {:?}: {error}", shown(text)))
}
