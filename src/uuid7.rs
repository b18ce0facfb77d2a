//! RFC 9562 version 7 UUIDs, as values: 16 bytes whose order is byte order, so UUIDs of
//! later milliseconds sort after earlier ones. Their generator is built on the crate's core.

use std::fmt;
use std::str::FromStr;

/// A version 7 UUID (RFC 9562, section 5.7): 48 bits of Unix milliseconds, the version
/// `0111`, 12 bits, the variant `10`, 62 bits.
///
/// `Ord` is the order of the bytes, which is the order of creation for UUIDs of different
/// milliseconds. Text is the canonical lowercase `8-4-4-4-12` form; parsing takes that form
/// in either case and nothing else.
///
/// ```
/// use idgen::Uuid7;
/// let uuid: Uuid7 = "017F22E2-79B0-7CC3-98C4-DC0C0C07398F".parse()?;
/// assert_eq!(uuid.to_string(), "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
/// assert_eq!(uuid.unix_ms(), 0x017F_22E2_79B0); // 2022-02-22T19:22:22Z
/// # Ok::<(), idgen::ParseUuid7Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid7([u8; 16]);

/// Why a string or 16 bytes are not a version 7 UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseUuid7Error {
    /// Not 36 bytes long.
    #[error(
        "a UUID has 36 characters (8-4-4-4-12 hex digits and hyphens), this string has {len} bytes"
    )]
    WrongLength {
        /// Length of the input in bytes.
        len: usize,
    },
    /// A byte that is not a hex digit where one belongs, or not a hyphen at offsets 8, 13,
    /// 18 and 23.
    #[error("byte {index} is not allowed here (the form is 8-4-4-4-12 hex digits)")]
    InvalidByte {
        /// Offset of the first offending byte.
        index: usize,
    },
    /// The version nibble is not 7.
    #[error("this is a version {version} UUID, not version 7")]
    WrongVersion {
        /// The version found.
        version: u8,
    },
    /// The variant bits are not `10` (RFC 9562).
    #[error("the variant bits are not those of RFC 9562 (10)")]
    WrongVariant,
}

impl Uuid7 {
    /// The UUID with these bytes, if they carry version 7 and the RFC 9562 variant.
    pub const fn from_bytes(bytes: [u8; 16]) -> Result<Uuid7, ParseUuid7Error> {
        let version = bytes[6] >> 4;
        if version != 7 {
            return Err(ParseUuid7Error::WrongVersion { version });
        }
        if bytes[8] >> 6 != 0b10 {
            return Err(ParseUuid7Error::WrongVariant);
        }
        Ok(Uuid7(bytes))
    }

    /// The 16 bytes, most significant first.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The Unix millisecond in its first 48 bits.
    pub const fn unix_ms(&self) -> u64 {
        let b = &self.0;
        (b[0] as u64) << 40
            | (b[1] as u64) << 32
            | (b[2] as u64) << 24
            | (b[3] as u64) << 16
            | (b[4] as u64) << 8
            | b[5] as u64
    }
}

/// Offsets of the hyphens in the canonical form.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl FromStr for Uuid7 {
    type Err = ParseUuid7Error;

    fn from_str(text: &str) -> Result<Uuid7, ParseUuid7Error> {
        let bytes = text.as_bytes();
        if bytes.len() != 36 {
            return Err(ParseUuid7Error::WrongLength { len: bytes.len() });
        }
        let mut out = [0u8; 16];
        let mut nibbles = 0;
        for (index, &byte) in bytes.iter().enumerate() {
            if HYPHENS.contains(&index) {
                if byte != b'-' {
                    return Err(ParseUuid7Error::InvalidByte { index });
                }
                continue;
            }
            let value = match byte {
                b'0'..=b'9' => byte - b'0',
                b'a'..=b'f' => byte - b'a' + 10,
                b'A'..=b'F' => byte - b'A' + 10,
                _ => return Err(ParseUuid7Error::InvalidByte { index }),
            };
            out[nibbles / 2] |= value << if nibbles % 2 == 0 { 4 } else { 0 };
            nibbles += 1;
        }
        Uuid7::from_bytes(out)
    }
}

impl fmt::Display for Uuid7 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Uuid7 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid7({self})")
    }
}

/// With the `uuid` feature: the type Rust database drivers and web frameworks accept.
#[cfg(feature = "uuid")]
impl From<Uuid7> for uuid::Uuid {
    fn from(value: Uuid7) -> uuid::Uuid {
        uuid::Uuid::from_bytes(value.0)
    }
}

/// With the `uuid` feature: a `uuid::Uuid` that is a version 7 UUID.
#[cfg(feature = "uuid")]
impl TryFrom<uuid::Uuid> for Uuid7 {
    type Error = ParseUuid7Error;

    fn try_from(value: uuid::Uuid) -> Result<Uuid7, ParseUuid7Error> {
        Uuid7::from_bytes(value.into_bytes())
    }
}

/// With the `serde` feature: the canonical string.
#[cfg(feature = "serde")]
mod serde_impls {
    use super::Uuid7;

    impl serde::Serialize for Uuid7 {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_str(self)
        }
    }

    impl<'de> serde::Deserialize<'de> for Uuid7 {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Uuid7, D::Error> {
            struct Text;
            impl serde::de::Visitor<'_> for Text {
                type Value = Uuid7;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a version 7 UUID as a string, 8-4-4-4-12 hex digits")
                }
                fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Uuid7, E> {
                    text.parse().map_err(E::custom)
                }
            }
            deserializer.deserialize_str(Text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9562, appendix A.6.
    const VECTOR: &str = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";

    #[test]
    fn the_rfc_9562_vector_round_trips_with_its_time() {
        let uuid: Uuid7 = VECTOR.parse().unwrap();
        assert_eq!(uuid.to_string(), VECTOR);
        assert_eq!(uuid.unix_ms(), 1_645_557_742_000); // Tuesday, February 22, 2022 2:22:22 PM GMT-05:00
        assert_eq!(
            VECTOR.to_uppercase().parse::<Uuid7>().unwrap(),
            uuid,
            "either case"
        );
    }

    #[test]
    fn everything_but_the_canonical_form_is_refused_with_where() {
        for (text, error) in [
            ("", ParseUuid7Error::WrongLength { len: 0 }),
            (
                "017f22e279b07cc398c4dc0c0c07398f",
                ParseUuid7Error::WrongLength { len: 32 },
            ),
            (
                "{17f22e2-79b0-7cc3-98c4-dc0c0c07398f",
                ParseUuid7Error::InvalidByte { index: 0 },
            ),
            (
                "017f22e2_79b0-7cc3-98c4-dc0c0c07398f",
                ParseUuid7Error::InvalidByte { index: 8 },
            ),
            (
                "017f22e2-79b0-7cc3-98c4-dc0c0c07398g",
                ParseUuid7Error::InvalidByte { index: 35 },
            ),
            (
                "017f22e2-79b0-4cc3-98c4-dc0c0c07398f",
                ParseUuid7Error::WrongVersion { version: 4 },
            ),
            (
                "017f22e2-79b0-7cc3-c8c4-dc0c0c07398f",
                ParseUuid7Error::WrongVariant,
            ),
            (
                "017f22e2-79b0-7cc3-98c4-dc0c0c07398\u{e9}",
                ParseUuid7Error::WrongLength { len: 37 },
            ),
        ] {
            assert_eq!(text.parse::<Uuid7>(), Err(error), "{text:?}");
        }
    }

    #[test]
    fn order_is_byte_order_so_later_milliseconds_sort_later() {
        let earlier: Uuid7 = "017f22e2-79b0-7fff-bfff-ffffffffffff".parse().unwrap();
        let later: Uuid7 = "017f22e2-79b1-7000-8000-000000000000".parse().unwrap();
        assert!(earlier < later);
        assert!(earlier.unix_ms() < later.unix_ms());
        assert!(earlier.as_bytes() < later.as_bytes());
    }

    #[cfg(feature = "uuid")]
    #[test]
    fn converts_to_and_from_the_uuid_crate() {
        let uuid: Uuid7 = VECTOR.parse().unwrap();
        let theirs: uuid::Uuid = uuid.into();
        assert_eq!(theirs.to_string(), VECTOR);
        assert_eq!(theirs.get_version_num(), 7);
        assert_eq!(Uuid7::try_from(theirs), Ok(uuid));
        assert_eq!(
            Uuid7::try_from(uuid::Uuid::nil()),
            Err(ParseUuid7Error::WrongVersion { version: 0 })
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_uses_the_string() {
        let uuid: Uuid7 = VECTOR.parse().unwrap();
        let json = serde_json::to_string(&uuid).unwrap();
        assert_eq!(json, format!("\"{VECTOR}\""));
        assert_eq!(serde_json::from_str::<Uuid7>(&json).unwrap(), uuid);
        assert!(serde_json::from_str::<Uuid7>("\"not a uuid\"").is_err());
        assert!(serde_json::from_str::<Uuid7>("7").is_err());
    }
}
