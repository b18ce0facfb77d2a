//! With the `utoipa` feature: [`Id`](crate::Id), [`Uuid7`](crate::Uuid7) and
//! [`Ulid`](crate::Ulid) as utoipa schemas (`PartialSchema`, `ToSchema`), for OpenAPI
//! documents of services that take or return them: each a string (the form serde writes,
//! and reads with the `serde` feature) whose pattern is exactly the text its parser reads,
//! so a client that keeps to the pattern is never refused for the form of an ID. Their
//! component names are `Id`, `Uuid7` and `Ulid`.
//!
//! `idgen serve`'s own document lists its IDs with these schemas; its tests check each
//! pattern against the parser it describes.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::{Id, Ulid, Uuid7};

/// Every text `Id::from_str` (and so serde) reads: canonical decimal from 0 to
/// 2^63 - 1, or 13 characters of Crockford base32 with at least one letter.
const ID_PATTERN: &str = concat!(
    "^(?:",
    // Decimal, no leading zeros, up to 9223372036854775807.
    "0|",
    "[1-9][0-9]{0,17}|",
    "[12345678][0123456789]{18}|",
    "9[01][0123456789]{17}|",
    "92[01][0123456789]{16}|",
    "922[012][0123456789]{15}|",
    "9223[012][0123456789]{14}|",
    "92233[0123456][0123456789]{13}|",
    "922337[01][0123456789]{12}|",
    "92233720[012][0123456789]{10}|",
    "922337203[012345][0123456789]{9}|",
    "9223372036[01234567][0123456789]{8}|",
    "92233720368[01234][0123456789]{7}|",
    "922337203685[0123][0123456789]{6}|",
    "9223372036854[0123456][0123456789]{5}|",
    "92233720368547[0123456][0123456789]{4}|",
    "922337203685477[01234][0123456789]{3}|",
    "9223372036854775[01234567][0123456789]{2}|",
    "922337203685477580[0123456]|",
    "9223372036854775807|",
    // Base32: the first character at most 7, at least one letter.
    "[0-7](?:",
    "[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{11}|",
    "[0-9][A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{10}|",
    "[0-9]{2}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{9}|",
    "[0-9]{3}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{8}|",
    "[0-9]{4}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{7}|",
    "[0-9]{5}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{6}|",
    "[0-9]{6}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{5}|",
    "[0-9]{7}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{4}|",
    "[0-9]{8}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{3}|",
    "[0-9]{9}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{2}|",
    "[0-9]{10}[A-HJKMNP-TV-Za-hjkmnp-tv-z][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{1}|",
    "[0-9]{11}[A-HJKMNP-TV-Za-hjkmnp-tv-z]",
    "))$",
);

/// A UUIDv7 in its hyphenated form, in either case, with version 7 and the RFC 9562 variant.
const UUID7_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$";

/// A ULID: 26 characters of Crockford base32, in either case, the first at most 7.
const ULID_PATTERN: &str = "^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$";

fn text_schema(
    pattern: &str,
    length: (usize, usize),
    description: &str,
    example: &str,
) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .min_length(Some(length.0))
        .max_length(Some(length.1))
        .description(Some(description))
        .examples([example])
        .into()
}

impl PartialSchema for Id {
    fn schema() -> RefOr<Schema> {
        text_schema(
            ID_PATTERN,
            (1, 19),
            "A 64-bit Snowflake ID as a string of its decimal form (JavaScript numbers lose \
             precision above 2^53); 13 characters of Crockford base32 are read too.",
            "385628494224322560",
        )
    }
}

impl ToSchema for Id {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Id")
    }
}

impl PartialSchema for Uuid7 {
    fn schema() -> RefOr<Schema> {
        text_schema(
            UUID7_PATTERN,
            (36, 36),
            "An RFC 9562 UUID version 7, hyphenated (written in lower case).",
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
        )
    }
}

impl ToSchema for Uuid7 {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Uuid7")
    }
}

impl PartialSchema for Ulid {
    fn schema() -> RefOr<Schema> {
        text_schema(
            ULID_PATTERN,
            (26, 26),
            "A ULID: 26 characters of Crockford base32 (written in upper case).",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        )
    }
}

impl ToSchema for Ulid {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Ulid")
    }
}
