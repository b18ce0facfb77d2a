//! With the `serde` feature: [`Id`] as a JSON string of its decimal form (JavaScript numbers
//! lose precision above 2^53), read back only from such a string; `Uuid7` and `Ulid` as
//! their canonical strings.

use crate::Id;
use serde::de::{Deserializer, Visitor};
use serde::ser::Serializer;
use std::fmt;

impl serde::Serialize for Id {
    /// As a decimal string: `"123"`, never a JSON number.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Id {
    /// From a canonical decimal string only; a JSON number is refused, because a
    /// JavaScript sender may already have rounded it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        deserializer.deserialize_str(IdVisitor)
    }
}

struct IdVisitor;

impl Visitor<'_> for IdVisitor {
    type Value = Id;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ID as a decimal string, such as \"1234567890123456789\"")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Id, E> {
        text.parse().map_err(E::custom)
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Id, E> {
        Err(E::custom(
            "IDs travel as decimal strings, not numbers (numbers above 2^53 lose precision in JavaScript)",
        ))
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Id, E> {
        self.visit_u64(value as u64)
    }
}

/// Serialize as the `Display` text, deserialize from a string through `FromStr`: how the
/// 128-bit kinds travel in JSON. `$expecting` finishes "invalid type: ..., expected".
#[cfg(feature = "uuid7-ulid")]
macro_rules! serde_as_text {
    ($kind:ty, $expecting:literal) => {
        impl serde::Serialize for $kind {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $kind {
            fn deserialize<D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<$kind, D::Error> {
                struct Text;
                impl serde::de::Visitor<'_> for Text {
                    type Value = $kind;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<$kind, E> {
                        text.parse().map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(Text)
            }
        }
    };
}

#[cfg(feature = "uuid7-ulid")]
serde_as_text!(
    crate::Uuid7,
    "a version 7 UUID as a string, 8-4-4-4-12 hex digits"
);
#[cfg(feature = "uuid7-ulid")]
serde_as_text!(
    crate::Ulid,
    "a ULID as a string of 26 Crockford base32 characters"
);

#[cfg(test)]
mod tests {
    use crate::Id;

    #[test]
    fn serializes_as_a_json_string_and_reads_back() {
        let id = Id::try_from(9_007_199_254_740_993u64).unwrap(); // 2^53 + 1
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"9007199254740993\"");
        assert_eq!(serde_json::from_str::<Id>(&json).unwrap(), id);
    }

    #[test]
    fn refuses_numbers_and_malformed_strings() {
        for bad in [
            "9007199254740993",
            "\"\"",
            "\"-1\"",
            "\"01\"",
            "null",
            "\"1 \"",
        ] {
            let err = serde_json::from_str::<Id>(bad);
            assert!(err.is_err(), "{bad} was accepted");
        }
    }

    #[cfg(feature = "uuid7-ulid")]
    #[test]
    fn uuid7_travels_as_its_canonical_string() {
        const VECTOR: &str = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";
        let uuid: crate::Uuid7 = VECTOR.parse().unwrap();
        let json = serde_json::to_string(&uuid).unwrap();
        assert_eq!(json, format!("\"{VECTOR}\""));
        assert_eq!(serde_json::from_str::<crate::Uuid7>(&json).unwrap(), uuid);
        assert!(serde_json::from_str::<crate::Uuid7>("\"not a uuid\"").is_err());
        assert!(serde_json::from_str::<crate::Uuid7>("7").is_err());
    }

    #[cfg(feature = "uuid7-ulid")]
    #[test]
    fn ulid_travels_as_its_26_character_string() {
        const SPEC_EXAMPLE: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
        let ulid: crate::Ulid = SPEC_EXAMPLE.parse().unwrap();
        let json = serde_json::to_string(&ulid).unwrap();
        assert_eq!(json, format!("\"{SPEC_EXAMPLE}\""));
        assert_eq!(serde_json::from_str::<crate::Ulid>(&json).unwrap(), ulid);
        assert!(serde_json::from_str::<crate::Ulid>("\"8ZZZZZZZZZZZZZZZZZZZZZZZZZ\"").is_err());
    }
}
