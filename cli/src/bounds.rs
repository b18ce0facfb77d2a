//! IDs as time bounds, for `idgen bounds` and `GET /v1/bounds`: a span of creation times
//! `[from, to)` as the first ID that can be made at `from` and the first at `to`, with a
//! ready `WHERE` clause. The arithmetic is the library's (`idgen::bounds`).

use idgen::{IdSpan, Layout, Ulid, Uuid7};
use idgen_cli::input::shown;

use crate::api::Bounds;
use crate::kinds::Kind;
use crate::time;

/// Why opaque IDs have no bounds.
pub const OPAQUE_REFUSED: &str = "opaque IDs are encrypted, so their order says nothing of \
    when they were made: no ID bounds a span of time (bound the Snowflake IDs they hide, or \
    keep a column of creation times)";

/// The kind a bounds request names: opaque refused, saying why.
pub fn kind(text: &str) -> Result<Kind, String> {
    if text == "opaque" {
        return Err(OPAQUE_REFUSED.to_string());
    }
    Kind::parse(text)
}

/// An instant as a request or the command line gives it (`name` says which): RFC 3339 in
/// UTC with a four-digit year, or Unix milliseconds of at most 19 digits (the service's
/// document gives exactly these forms as a pattern).
pub fn instant(name: &str, text: &str) -> Result<u64, String> {
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        return text
            .parse()
            .ok()
            .filter(|_| text.len() <= 19)
            .ok_or_else(|| {
                format!(
                    "{name}: {:?} is too large: Unix milliseconds have at most 19 digits",
                    shown(text)
                )
            });
    }
    if text.starts_with('+') {
        return Err(format!(
            "{name}: {:?}: years after 9999 are not taken here",
            shown(text)
        ));
    }
    time::parse_rfc3339_ms(text).map_err(|reason| format!("{name}: {reason}, or Unix milliseconds"))
}

/// The IDs of `kind` (Snowflake IDs in `layout`) made in `[from_unix_ms, to_unix_ms)`. A
/// span that holds none says why, and its clause selects nothing.
pub fn bounds(kind: Kind, layout: &Layout, from_unix_ms: u64, to_unix_ms: u64) -> Bounds {
    fn texts<T: ToString + Ord>(span: IdSpan<T>) -> (bool, String, Option<String>) {
        let empty = span.is_empty();
        (
            empty,
            span.start.to_string(),
            span.end.map(|end| end.to_string()),
        )
    }
    let (empty, start, end) = match kind {
        Kind::Snowflake => texts(layout.span(from_unix_ms, to_unix_ms)),
        Kind::Uuidv7 => texts(Uuid7::span(from_unix_ms, to_unix_ms)),
        Kind::Ulid => texts(Ulid::span(from_unix_ms, to_unix_ms)),
    };
    let literal = |id: &str| match kind {
        Kind::Snowflake => id.to_string(),
        Kind::Uuidv7 => format!("'{id}'::uuid"),
        Kind::Ulid => format!("'{id}'"),
    };
    let clause = match &end {
        _ if empty => "WHERE false".to_string(),
        Some(end) => format!("WHERE id >= {} AND id < {}", literal(&start), literal(end)),
        None => format!("WHERE id >= {}", literal(&start)),
    };
    let nothing = if to_unix_ms <= from_unix_ms {
        Some("to is not after from")
    } else if empty {
        Some("no such ID can be made then")
    } else {
        None
    };
    Bounds {
        kind,
        from: time::rfc3339_ms(from_unix_ms),
        to: time::rfc3339_ms(to_unix_ms),
        start,
        end,
        nothing: nothing.map(str::to_string),
        where_clause: clause,
    }
}
