//! RFC 9562 version 7 UUIDs: the value, 16 bytes whose order is byte order, and its
//! generator, a thin layer over the crate's core (`counted.rs`).

use std::fmt;
use std::str::FromStr;

use super::counted::{COUNTER_BITS, CountedGenerator, CountedId, sealed};
use super::{LAST_UNIX_MS, check_unix_ms};
use crate::DefaultClock;
use crate::bounds::{IdSpan, span_of};
use crate::clock::Clock;
use crate::error::Error;

/// Issues RFC 9562 version 7 UUIDs, strictly increasing across all threads, lock-free.
///
/// Each UUID carries the Unix millisecond, the version and variant, a 22-bit counter in the
/// most significant bits of the random fields (RFC 9562, section 6.2, method 1: the 12 bits
/// of `rand_a` and the top 10 of `rand_b`), seeded with random bits at each new millisecond
/// and counting up within it, and 52 random bits of its own. See [`CountedGenerator`] for
/// the builder, the limits and the clock behaviour.
///
/// ```
/// use idgen::Uuid7Generator;
///
/// let generator = Uuid7Generator::new()?;
/// let a = generator.next_uuid()?;
/// let b = generator.next_uuid()?;
/// assert!(a < b);
/// assert!(a.to_string() < b.to_string(), "the text sorts the same way");
/// let batch = generator.next_uuids(1_000)?;
/// assert!(batch.windows(2).all(|pair| pair[0] < pair[1]) && b < batch[0]);
/// # Ok::<(), idgen::Error>(())
/// ```
pub type Uuid7Generator<C = DefaultClock> = CountedGenerator<Uuid7, C>;

impl<C: Clock> CountedGenerator<Uuid7, C> {
    /// The next UUID, greater than every UUID this generator issued before.
    ///
    /// Waits (spinning, then yielding) when the millisecond's counter is used up, or when
    /// the clock is behind the last issued millisecond within the tolerance and its counter
    /// is used up. Fails with [`Error::ClockMovedBackwards`] when the clock is further
    /// behind, [`Error::TimeExhausted`] after 2163, and [`Error::RandomSource`] if the
    /// operating system's random source fails; a failed call issues nothing.
    #[inline]
    pub fn next_uuid(&self) -> Result<Uuid7, Error> {
        self.next()
    }

    /// As [`next_uuid`](Self::next_uuid), but never waits: where it would, it returns
    /// [`Error::WouldBlock`].
    pub fn try_next_uuid(&self) -> Result<Uuid7, Error> {
        self.try_next()
    }

    /// `n` UUIDs in increasing order, one compare-and-swap per millisecond spanned. On an
    /// error the whole batch fails; what it had reserved is never issued (a gap).
    pub fn next_uuids(&self, n: usize) -> Result<Vec<Uuid7>, Error> {
        self.next_many(n)
    }

    /// Fills `out` with UUIDs in increasing order; otherwise as
    /// [`next_uuids`](Self::next_uuids).
    pub fn fill_uuids(&self, out: &mut [Uuid7]) -> Result<(), Error> {
        self.fill(out)
    }
}

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
#[cfg_attr(
    all(feature = "diesel", not(idgen_loom)),
    derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Uuid)
)]
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

impl sealed::Sealed for Uuid7 {}

impl CountedId for Uuid7 {
    #[inline]
    fn from_counted(unix_ms: u64, counter: u64, random: u64) -> Uuid7 {
        Uuid7::from_fields(unix_ms, counter, random)
    }
}

/// Bits of `rand_b` below the counter.
const RANDOM_BITS: u32 = 62 - (COUNTER_BITS - 12);

impl Uuid7 {
    /// The UUID of a Unix millisecond (48 bits), a 22-bit counter (the 12 bits of `rand_a`,
    /// then the top 10 of `rand_b`) and random bits (the low 52 of `random` fill the rest of
    /// `rand_b`), with the version and variant in place. Wider inputs are cut to their
    /// fields.
    #[inline]
    pub(crate) const fn from_fields(unix_ms: u64, counter: u64, random: u64) -> Uuid7 {
        let counter = counter & ((1 << COUNTER_BITS) - 1);
        let high = (unix_ms & 0xFFFF_FFFF_FFFF) << 16 | 0x7 << 12 | counter >> (COUNTER_BITS - 12);
        let low = 0b10 << 62
            | (counter & ((1 << (COUNTER_BITS - 12)) - 1)) << RANDOM_BITS
            | random & ((1 << RANDOM_BITS) - 1);
        Uuid7(((high as u128) << 64 | low as u128).to_be_bytes())
    }

    /// The smallest version 7 UUID of the Unix millisecond `unix_ms`: every bit after the
    /// time zero but the version and variant. For range queries: see [`Uuid7::span`].
    ///
    /// ```
    /// use idgen::Uuid7;
    /// let first = Uuid7::first_at(0x017F_22E2_79B0)?;
    /// assert_eq!(first.to_string(), "017f22e2-79b0-7000-8000-000000000000");
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn first_at(unix_ms: u64) -> Result<Uuid7, Error> {
        let unix_ms = check_unix_ms(unix_ms)?;
        Ok(Uuid7::with_filler(unix_ms, 0))
    }

    /// The largest version 7 UUID of the Unix millisecond `unix_ms`: every bit after the
    /// time set but the version and variant.
    ///
    /// ```
    /// use idgen::Uuid7;
    /// let last = Uuid7::last_at(0x017F_22E2_79B0)?;
    /// assert_eq!(last.to_string(), "017f22e2-79b0-7fff-bfff-ffffffffffff");
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn last_at(unix_ms: u64) -> Result<Uuid7, Error> {
        let unix_ms = check_unix_ms(unix_ms)?;
        Ok(Uuid7::with_filler(unix_ms, u128::MAX))
    }

    /// The version 7 UUIDs made in `[from_unix_ms, to_unix_ms)` by their embedded time (see
    /// [`crate::bounds`]): for `WHERE id >= start AND id < end` on a `uuid` column, whose
    /// order is the bytes' order. A span past the last millisecond 48 bits hold (in the
    /// year 10889) has no end.
    /// A span that holds no millisecond (`to` not after `from`, or `from` past the last) is
    /// empty.
    pub fn span(from_unix_ms: u64, to_unix_ms: u64) -> IdSpan<Uuid7> {
        span_of(
            from_unix_ms,
            to_unix_ms,
            0,
            LAST_UNIX_MS,
            |unix_ms| Uuid7::with_filler(unix_ms, 0),
            Uuid7::with_filler(LAST_UNIX_MS, u128::MAX),
        )
    }

    /// The UUID of `unix_ms` (in range) with `filler`'s bits below the time, the version
    /// and variant in place.
    const fn with_filler(unix_ms: u64, filler: u128) -> Uuid7 {
        const VERSION: u128 = 0xF << 76;
        const VARIANT: u128 = 0b11 << 62;
        const BELOW_TIME: u128 = (1 << 80) - 1;
        let bits = (unix_ms as u128) << 80
            | (filler & BELOW_TIME & !VERSION & !VARIANT)
            | 0x7 << 76
            | 0b10 << 62;
        Uuid7(bits.to_be_bytes())
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9562, appendix A.6.
    const VECTOR: &str = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";

    #[test]
    fn the_rfc_9562_vector_is_composed_from_its_fields() {
        // unix_ts_ms 0x017F22E279B0, rand_a 0xCC3, rand_b 0x18C4DC0C0C07398F: the counter
        // is rand_a and the top 10 bits of rand_b, the random bits the low 52.
        let rand_b: u64 = 0x18C4_DC0C_0C07_398F;
        let counter = 0xCC3 << 10 | rand_b >> 52;
        let uuid = Uuid7::from_fields(0x017F_22E2_79B0, counter, rand_b & ((1 << 52) - 1));
        assert_eq!(uuid.to_string(), VECTOR);
        assert_eq!(uuid, VECTOR.parse().unwrap());
        // rand_a's top bit is set: no freshly seeded counter (top bit clear) starts there.
        assert_ne!(counter >> (COUNTER_BITS - 1), 0);
    }

    #[test]
    fn every_composed_uuid_has_version_7_and_the_rfc_variant() {
        for (unix_ms, counter, random) in [(0, 0, 0), (u64::MAX, u64::MAX, u64::MAX)] {
            let uuid = Uuid7::from_fields(unix_ms, counter, random);
            assert_eq!(Uuid7::from_bytes(*uuid.as_bytes()), Ok(uuid));
        }
    }

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
}
