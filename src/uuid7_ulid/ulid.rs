//! ULIDs: the value, 128 bits written as 26 characters of Crockford's base32, and its
//! generator, a thin layer over the crate's core (`counted.rs`).

use std::fmt;
use std::str::FromStr;

use super::counted::{COUNTER_BITS, CountedGenerator, CountedId, sealed};
use super::{LAST_UNIX_MS, check_unix_ms};
use crate::DefaultClock;
use crate::bounds::{IdSpan, span_of};
use crate::clock::Clock;
use crate::error::Error;

/// Issues ULIDs, strictly increasing across all threads, lock-free.
///
/// Each ULID carries the Unix millisecond in its top 48 bits; of the 80 bits below, the top
/// 22 are a counter, seeded with random bits (top bit clear) at each new millisecond and
/// counting up within it, and the other 58 are random per ULID. The ULID specification's
/// monotonic mode instead adds 1 to all 80 bits; this keeps the same order guarantee
/// (strictly increasing within a millisecond, and across them) with a counter that fits the
/// crate's one-`AtomicU64` core, so many threads share a generator without a lock. Within a
/// millisecond a generator issues at least `2^21` ULIDs, then waits for the next one. See
/// [`CountedGenerator`] for the builder, the limits and the clock behaviour.
///
/// ```
/// use idgen::UlidGenerator;
///
/// let generator = UlidGenerator::new()?;
/// let a = generator.next_ulid()?;
/// let b = generator.next_ulid()?;
/// assert!(a < b && a.to_string() < b.to_string());
/// assert_eq!(b.to_string().len(), 26);
/// # Ok::<(), idgen::Error>(())
/// ```
pub type UlidGenerator<C = DefaultClock> = CountedGenerator<Ulid, C>;

impl<C: Clock> CountedGenerator<Ulid, C> {
    /// The next ULID, greater than every ULID this generator issued before. Waits and fails
    /// as [`Uuid7Generator::next_uuid`](crate::Uuid7Generator).
    #[inline]
    pub fn next_ulid(&self) -> Result<Ulid, Error> {
        self.next()
    }

    /// As [`next_ulid`](Self::next_ulid), but never waits: where it would, it returns
    /// [`Error::WouldBlock`].
    pub fn try_next_ulid(&self) -> Result<Ulid, Error> {
        self.try_next()
    }

    /// `n` ULIDs in increasing order, one compare-and-swap per millisecond spanned. On an
    /// error the whole batch fails; what it had reserved is never issued (a gap).
    pub fn next_ulids(&self, n: usize) -> Result<Vec<Ulid>, Error> {
        self.next_many(n)
    }

    /// Fills `out` with ULIDs in increasing order; otherwise as
    /// [`next_ulids`](Self::next_ulids).
    pub fn fill_ulids(&self, out: &mut [Ulid]) -> Result<(), Error> {
        self.fill(out)
    }
}

/// A ULID: 48 bits of Unix milliseconds, then 80 bits below them. `Ord` is the order of the
/// 128-bit number, which is the order of the text and the order of creation for ULIDs of
/// different milliseconds.
///
/// Text is 26 characters of Crockford's base32 (`0-9`, `A-Z` without `I`, `L`, `O`, `U`),
/// written in upper case; parsing takes either case and nothing else. The first character
/// carries only 3 bits, so `7ZZZZZZZZZZZZZZZZZZZZZZZZZ` is the largest ULID.
///
/// ```
/// use idgen::Ulid;
/// let ulid: Ulid = "01arz3ndektsv4rrffq69g5fav".parse()?;
/// assert_eq!(ulid.to_string(), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
/// assert_eq!(ulid.unix_ms(), 1_469_922_850_259);
/// # Ok::<(), idgen::ParseUlidError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ulid(u128);

/// Why a string is not a ULID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseUlidError {
    /// Not 26 bytes long.
    #[error("a ULID has 26 characters, this string has {len} bytes")]
    WrongLength {
        /// Length of the input in bytes.
        len: usize,
    },
    /// A byte that is not a Crockford base32 digit.
    #[error("byte {index} is not a Crockford base32 digit (0-9, A-Z without I, L, O, U)")]
    InvalidByte {
        /// Offset of the first offending byte.
        index: usize,
    },
    /// The first character is above `7`: the value needs more than 128 bits.
    #[error("the first character of a ULID is at most 7 (the value would exceed 128 bits)")]
    Overflow,
}

/// Crockford's base32 digits.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Characters in the text form.
const TEXT_LEN: usize = 26;

/// Bits below the counter.
const RANDOM_BITS: u32 = 80 - COUNTER_BITS;

impl sealed::Sealed for Ulid {}

impl CountedId for Ulid {
    #[inline]
    fn from_counted(unix_ms: u64, counter: u64, random: u64) -> Ulid {
        Ulid::from_fields(unix_ms, counter, random)
    }
}

impl Ulid {
    /// The largest ULID, `7ZZZZZZZZZZZZZZZZZZZZZZZZZ`.
    pub const MAX: Ulid = Ulid(u128::MAX);

    /// The ULID of a Unix millisecond (48 bits), a 22-bit counter at the top of the 80 bits
    /// below it, and random bits (the low 58 of `random`) under the counter. Wider inputs
    /// are cut to their fields.
    #[inline]
    pub(crate) const fn from_fields(unix_ms: u64, counter: u64, random: u64) -> Ulid {
        let unix_ms = (unix_ms & 0xFFFF_FFFF_FFFF) as u128;
        let counter = (counter & ((1 << COUNTER_BITS) - 1)) as u128;
        let random = (random & ((1 << RANDOM_BITS) - 1)) as u128;
        Ulid(unix_ms << 80 | counter << RANDOM_BITS | random)
    }

    /// The smallest ULID of the Unix millisecond `unix_ms`: the 80 bits after the time
    /// zero. For range queries: see [`Ulid::span`].
    ///
    /// ```
    /// use idgen::Ulid;
    /// assert_eq!(Ulid::first_at(1_469_922_850_259)?.to_string(), "01ARZ3NDEK0000000000000000");
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn first_at(unix_ms: u64) -> Result<Ulid, Error> {
        let unix_ms = check_unix_ms(unix_ms)?;
        Ok(Ulid((unix_ms as u128) << 80))
    }

    /// The largest ULID of the Unix millisecond `unix_ms`: the 80 bits after the time set.
    ///
    /// ```
    /// use idgen::Ulid;
    /// assert_eq!(Ulid::last_at(1_469_922_850_259)?.to_string(), "01ARZ3NDEKZZZZZZZZZZZZZZZZ");
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn last_at(unix_ms: u64) -> Result<Ulid, Error> {
        let unix_ms = check_unix_ms(unix_ms)?;
        Ok(Ulid((unix_ms as u128) << 80 | ((1 << 80) - 1)))
    }

    /// The ULIDs made in `[from_unix_ms, to_unix_ms)` by their embedded time (see
    /// [`crate::bounds`]): for `WHERE id >= start AND id < end` on the text form (its order
    /// is the value's) or on the 16 bytes. A span past the last millisecond 48 bits hold
    /// (in the year 10889) has no end.
    /// A span that holds no millisecond (`to` not after `from`, or `from` past the last) is
    /// empty.
    pub fn span(from_unix_ms: u64, to_unix_ms: u64) -> IdSpan<Ulid> {
        span_of(
            from_unix_ms,
            to_unix_ms,
            0,
            LAST_UNIX_MS,
            |unix_ms| Ulid((unix_ms as u128) << 80),
            Ulid::MAX,
        )
    }

    /// The ULID with these 128 bits.
    pub const fn from_u128(value: u128) -> Ulid {
        Ulid(value)
    }

    /// The 128 bits.
    pub const fn as_u128(&self) -> u128 {
        self.0
    }

    /// The Unix millisecond in its top 48 bits.
    pub const fn unix_ms(&self) -> u64 {
        (self.0 >> 80) as u64
    }
}

impl FromStr for Ulid {
    type Err = ParseUlidError;

    fn from_str(text: &str) -> Result<Ulid, ParseUlidError> {
        let bytes = text.as_bytes();
        if bytes.len() != TEXT_LEN {
            return Err(ParseUlidError::WrongLength { len: bytes.len() });
        }
        let mut value: u128 = 0;
        for (index, &byte) in bytes.iter().enumerate() {
            let digit = ALPHABET
                .iter()
                .position(|&letter| letter == byte.to_ascii_uppercase())
                .ok_or(ParseUlidError::InvalidByte { index })?;
            if index == 0 && digit > 7 {
                return Err(ParseUlidError::Overflow);
            }
            value = value << 5 | digit as u128;
        }
        Ok(Ulid(value))
    }
}

impl fmt::Display for Ulid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = [0u8; TEXT_LEN];
        for (index, out) in text.iter_mut().enumerate() {
            let shift = 5 * (TEXT_LEN - 1 - index);
            *out = ALPHABET[(self.0 >> shift) as usize & 31];
        }
        // Every byte comes from the ASCII alphabet.
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Ulid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ulid({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the ULID specification's README.
    const SPEC_EXAMPLE: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

    #[test]
    fn the_spec_example_round_trips_with_its_time() {
        let ulid: Ulid = SPEC_EXAMPLE.parse().unwrap();
        assert_eq!(ulid.to_string(), SPEC_EXAMPLE);
        // 01ARZ3NDEK: the spec's 48-bit timestamp.
        assert_eq!(ulid.unix_ms(), 1_469_922_850_259);
        assert_eq!(SPEC_EXAMPLE.to_lowercase().parse::<Ulid>(), Ok(ulid));
    }

    #[test]
    fn the_largest_ulid_is_7zzz_and_8_overflows() {
        let max = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ";
        assert_eq!(max.parse::<Ulid>(), Ok(Ulid::MAX));
        assert_eq!(Ulid::MAX.to_string(), max);
        assert_eq!(
            "80000000000000000000000000".parse::<Ulid>(),
            Err(ParseUlidError::Overflow)
        );
        assert_eq!(
            "ZZZZZZZZZZZZZZZZZZZZZZZZZZ".parse::<Ulid>(),
            Err(ParseUlidError::Overflow)
        );
        assert_eq!("00000000000000000000000000".parse(), Ok(Ulid::from_u128(0)));
    }

    #[test]
    fn everything_but_26_crockford_digits_is_refused_with_where() {
        for (text, error) in [
            ("", ParseUlidError::WrongLength { len: 0 }),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5FA",
                ParseUlidError::WrongLength { len: 25 },
            ),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
                ParseUlidError::WrongLength { len: 27 },
            ),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5FAU",
                ParseUlidError::InvalidByte { index: 25 },
            ),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5FAI",
                ParseUlidError::InvalidByte { index: 25 },
            ),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5FAL",
                ParseUlidError::InvalidByte { index: 25 },
            ),
            (
                "0OARZ3NDEKTSV4RRFFQ69G5FAV",
                ParseUlidError::InvalidByte { index: 1 },
            ),
            (
                "01ARZ3NDEK-SV4RRFFQ69G5FAV",
                ParseUlidError::InvalidByte { index: 10 },
            ),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5FA\u{e9}",
                ParseUlidError::WrongLength { len: 27 },
            ),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5F\u{e9}",
                ParseUlidError::InvalidByte { index: 24 },
            ),
        ] {
            assert_eq!(text.parse::<Ulid>(), Err(error), "{text:?}");
        }
    }

    #[test]
    fn fields_land_in_place_and_order_is_text_order() {
        let ulid = Ulid::from_fields(0x0123_4567_89AB, (1 << COUNTER_BITS) - 1, 0);
        assert_eq!(ulid.unix_ms(), 0x0123_4567_89AB);
        assert_eq!(ulid.as_u128() & ((1 << 80) - 1), ((1 << 22) - 1) << 58);
        let next_ms = Ulid::from_fields(0x0123_4567_89AC, 0, 0);
        assert!(ulid < next_ms);
        assert!(ulid.to_string() < next_ms.to_string());
    }
}
