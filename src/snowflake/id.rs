//! The `Id` type and its text forms.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, ParseIdError};

/// A 63-bit, time-sortable ID.
///
/// Always between 0 and `i64::MAX`, so it fits a signed 64-bit column and never turns
/// negative. Ordering is numeric, which is creation order to the millisecond.
///
/// Text forms:
/// - [`Display`](fmt::Display) / [`FromStr`]: canonical decimal. Parsing accepts only what
///   `Display` writes: ASCII digits, no sign, no spaces, no leading zeros, at most `i64::MAX`.
/// - [`Id::to_base32`] / [`Id::from_base32`]: 13 characters of Crockford base32, zero-padded
///   so that the strings sort like the numbers; URL-safe.
/// - With the `serde` feature: a JSON **string** holding the decimal form, because
///   JavaScript numbers lose precision above 2^53.
///
/// ```
/// use idgen::Id;
///
/// let id: Id = "1234567890123456789".parse()?;
/// assert_eq!(u64::from(id), 1_234_567_890_123_456_789);
/// assert_eq!(id.to_string(), "1234567890123456789");
/// assert_eq!(Id::from_base32(id.to_base32().as_str())?, id);
///
/// assert!("+1".parse::<Id>().is_err());
/// assert!("007".parse::<Id>().is_err());
/// assert!("9223372036854775808".parse::<Id>().is_err()); // i64::MAX + 1
/// assert!(Id::try_from(-1i64).is_err());
/// # Ok::<(), idgen::Error>(())
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    all(feature = "diesel", not(idgen_loom)),
    derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow),
    diesel(sql_type = diesel::sql_types::BigInt)
)]
#[repr(transparent)]
pub struct Id(u64);

/// Crockford's base32 alphabet: digits and upper-case letters without I, L, O and U.
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// 13 characters of 5 bits cover the 63 bits of an ID (the top 2 bits are always 0).
const BASE32_LEN: usize = 13;
/// Longest canonical decimal ID: `i64::MAX` has 19 digits.
const DECIMAL_MAX_LEN: usize = 19;

impl Id {
    /// The smallest ID, 0.
    pub const MIN: Id = Id(0);
    /// The largest ID, `i64::MAX`.
    pub const MAX: Id = Id(i64::MAX as u64);

    /// For values the caller has already bounded by 63 bits.
    pub(crate) const fn from_raw(raw: u64) -> Id {
        debug_assert!(raw <= i64::MAX as u64);
        Id(raw)
    }

    /// The ID as an unsigned number.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The ID as a signed number; never negative.
    pub const fn as_i64(self) -> i64 {
        self.0 as i64
    }

    /// The 13-character Crockford base32 form (upper case, zero-padded): URL-safe, and
    /// sorting the strings sorts the IDs.
    pub const fn to_base32(self) -> Base32 {
        let mut out = [0u8; BASE32_LEN];
        let mut i = 0;
        while i < BASE32_LEN {
            let shift = 5 * (BASE32_LEN - 1 - i);
            out[i] = CROCKFORD[((self.0 >> shift) & 0x1f) as usize];
            i += 1;
        }
        Base32(out)
    }

    /// Parses the 13-character Crockford base32 form. Lower case is accepted; Crockford's
    /// look-alike substitutions (I, L, O) are not, so every ID has exactly one spelling
    /// up to case.
    ///
    /// ```
    /// use idgen::Id;
    /// let id = Id::try_from(1u64 << 40)?;
    /// assert_eq!(id.to_base32().as_str(), "0000100000000");
    /// assert_eq!(Id::from_base32("0000100000000")?, id);
    /// assert!(Id::from_base32("000000010000").is_err()); // 12 characters
    /// assert!(Id::from_base32("8000000000000").is_err()); // above i64::MAX
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn from_base32(text: &str) -> Result<Id, Error> {
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return Err(ParseIdError::Empty.into());
        }
        if bytes.len() != BASE32_LEN {
            return Err(ParseIdError::WrongLength { len: bytes.len() }.into());
        }
        let mut value: u64 = 0;
        for (index, &byte) in bytes.iter().enumerate() {
            let digit = crockford_value(byte).ok_or(ParseIdError::InvalidByte { index })?;
            if index == 0 && digit >= 8 {
                // The first character carries bits 60..64; bits 63 and 64 must be 0.
                return Err(ParseIdError::TooLarge.into());
            }
            value = (value << 5) | u64::from(digit);
        }
        Ok(Id(value))
    }
}

fn crockford_value(byte: u8) -> Option<u8> {
    let upper = byte.to_ascii_uppercase();
    CROCKFORD.iter().position(|&c| c == upper).map(|p| p as u8)
}

/// The Crockford base32 text of an [`Id`], without allocating. See [`Id::to_base32`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Base32([u8; BASE32_LEN]);

impl Base32 {
    /// The text.
    pub fn as_str(&self) -> &str {
        // Every byte comes from the ASCII alphabet above.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for Base32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Base32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Base32({})", self.as_str())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.0)
    }
}

impl FromStr for Id {
    type Err = Error;

    /// Accepts only canonical decimal; see [`Id`].
    fn from_str(text: &str) -> Result<Id, Error> {
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return Err(ParseIdError::Empty.into());
        }
        if let Some(index) = bytes.iter().position(|b| !b.is_ascii_digit()) {
            return Err(ParseIdError::InvalidByte { index }.into());
        }
        if bytes.len() > 1 && bytes[0] == b'0' {
            return Err(ParseIdError::LeadingZero.into());
        }
        if bytes.len() > DECIMAL_MAX_LEN {
            return Err(ParseIdError::TooLarge.into());
        }
        // At most 19 digits: the sum fits in u64 (10^19 - 1 < 2^64).
        let value = bytes
            .iter()
            .fold(0u64, |acc, b| acc * 10 + u64::from(b - b'0'));
        if value > i64::MAX as u64 {
            return Err(ParseIdError::TooLarge.into());
        }
        Ok(Id(value))
    }
}

impl From<Id> for u64 {
    fn from(id: Id) -> u64 {
        id.0
    }
}

impl From<Id> for i64 {
    fn from(id: Id) -> i64 {
        id.as_i64()
    }
}

impl TryFrom<u64> for Id {
    type Error = Error;
    /// Fails above `i64::MAX`.
    fn try_from(value: u64) -> Result<Id, Error> {
        if value > i64::MAX as u64 {
            return Err(Error::IdOutOfRange {
                value: i128::from(value),
            });
        }
        Ok(Id(value))
    }
}

impl TryFrom<i64> for Id {
    type Error = Error;
    /// Fails below 0.
    fn try_from(value: i64) -> Result<Id, Error> {
        u64::try_from(value)
            .map(Id)
            .map_err(|_| Error::IdOutOfRange {
                value: i128::from(value),
            })
    }
}
