//! [`OpaqueId`] and its text form: `o`, the key's number, `_`, and 11 characters of base62.
//! Uses `walk` (the domain's end) and `key` (the largest key number).

use std::fmt;
use std::str::FromStr;

use super::key::MAX_KEY_ID;
use super::walk::DOMAIN_END;
use crate::Error;

/// Base62 digits in order of value.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// 62^11 > 2^63 > 62^10: eleven characters hold any value below 2^63.
pub(super) const TEXT_DIGITS: usize = 11;

/// An opaque ID: a value below 2^63 and the number of the key that made it.
///
/// Text: `o<key number>_` and exactly 11 characters of base62 (`o1_3L0eJ7bQ2xP`), which no
/// decimal or base32 ID, UUID or ULID can be. [`FromStr`] accepts exactly the strings
/// [`Display`](fmt::Display) writes. Comparing opaque IDs tells nothing of the IDs' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpaqueId {
    pub(super) key_id: u32,
    pub(super) value: u64,
}

impl OpaqueId {
    /// The number of the key that made it.
    pub fn key_id(&self) -> u32 {
        self.key_id
    }

    /// The encrypted value, below 2^63: it fits a `BIGINT` like an [`Id`](crate::Id).
    pub fn value(&self) -> u64 {
        self.value
    }

    /// The opaque ID of key `key_id` and encrypted `value`, as [`OpaqueId::key_id`] and
    /// [`OpaqueId::value`] gave them (stored as two numbers, say). Fails with
    /// [`Error::OpaqueText`] for a key number outside 1 to [`MAX_KEY_ID`] or a value of 2^63
    /// or more, which no codec makes.
    pub fn from_parts(key_id: u32, value: u64) -> Result<OpaqueId, Error> {
        let refuse = |reason: String| Error::OpaqueText {
            text: format!("key {key_id}, value {value}"),
            reason,
        };
        if !(1..=MAX_KEY_ID).contains(&key_id) {
            return Err(refuse(format!("the key number is 1 to {MAX_KEY_ID}")));
        }
        if value >= DOMAIN_END {
            return Err(refuse("the value is 2^63 or more: not an opaque ID".into()));
        }
        Ok(OpaqueId { key_id, value })
    }

    /// Tells whether `text` looks like an opaque ID (starts with `o` and a digit): enough to
    /// tell it from every other ID form before parsing it as one.
    pub fn looks_like(text: &str) -> bool {
        let bytes = text.as_bytes();
        bytes.len() >= 2 && bytes[0] == b'o' && bytes[1].is_ascii_digit()
    }
}

impl fmt::Display for OpaqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut digits = [b'0'; TEXT_DIGITS];
        let mut rest = self.value;
        for slot in digits.iter_mut().rev() {
            *slot = BASE62[(rest % 62) as usize];
            rest /= 62;
        }
        let text = std::str::from_utf8(&digits).map_err(|_| fmt::Error)?;
        write!(f, "o{}_{text}", self.key_id)
    }
}

impl FromStr for OpaqueId {
    type Err = Error;

    fn from_str(text: &str) -> Result<OpaqueId, Error> {
        let refuse = |reason: &str| {
            Err(Error::OpaqueText {
                text: text.chars().take(64).collect(),
                reason: reason.to_string(),
            })
        };
        let Some(rest) = text.strip_prefix('o') else {
            return refuse("an opaque ID starts with o and its key number, as in o1_");
        };
        let Some((key, digits)) = rest.split_once('_') else {
            return refuse("no _ after the key number");
        };
        let key_ok = !key.is_empty()
            && key.len() <= 9
            && key.bytes().all(|b| b.is_ascii_digit())
            && !key.starts_with('0');
        let Some(key_id) = key_ok.then(|| key.parse::<u32>().ok()).flatten() else {
            return refuse("the key number is 1 to 999999999, without leading zeros");
        };
        if digits.len() != TEXT_DIGITS {
            return refuse("exactly 11 characters of base62 follow the _");
        }
        let mut value: u128 = 0;
        for byte in digits.bytes() {
            let Some(digit) = BASE62.iter().position(|&b| b == byte) else {
                return refuse("only 0-9, A-Z and a-z follow the _");
            };
            value = value * 62 + digit as u128;
        }
        if value >= u128::from(DOMAIN_END) {
            return refuse("the value is 2^63 or more: not an opaque ID");
        }
        Ok(OpaqueId {
            key_id,
            value: value as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_is_not_an_opaque_id_is_refused() {
        let largest = OpaqueId {
            key_id: MAX_KEY_ID,
            value: DOMAIN_END - 1,
        };
        assert_eq!(largest.to_string().parse::<OpaqueId>(), Ok(largest));
        for text in [
            "",
            "o",
            "o1_",
            "1_00000000000",
            "O1_00000000000",
            "o0_00000000000",
            "o01_00000000000",
            "o1-00000000000",
            "o1_0000000000",
            "o1_000000000000",
            "o1_0000000000-",
            "o1_0000000000_",
            " o1_00000000000",
            "o1_00000000000 ",
            "o+1_00000000000",
            // 2^63 itself, and the largest 11 characters can say.
            "o1_AzL8n0Y58m8",
            "o1_zzzzzzzzzzz",
            "oX_00000000000",
            "o1000000000_00000000000",
            "o4294967296_00000000000",
            "385628494224322560",
            "0ANG6J1H2B800",
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "o1_00000000é00",
            "o1_0000000000é",
        ] {
            assert!(
                matches!(text.parse::<OpaqueId>(), Err(Error::OpaqueText { .. })),
                "{text:?} was accepted"
            );
        }
        assert_eq!(
            "o1_AzL8n0Y58m7".parse::<OpaqueId>().map(|o| o.value()),
            Ok(DOMAIN_END - 1)
        );
    }
}
