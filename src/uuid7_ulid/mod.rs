//! The 128-bit kinds, RFC 9562 [`Uuid7`] and [`Ulid`]: (Unix millisecond, counter, random
//! bits) on the same engine as the Snowflake generator, needing no worker number.
//!
//! - `counted.rs`: [`CountedGenerator`], what both kinds share: the engine's state as
//!   (millisecond, counter), and a new millisecond's counter seeded at random.
//! - `random.rs`: the per-thread ChaCha8 generators behind the random bits, reseeded every
//!   64 KiB and in a forked child.
//! - `uuid7.rs`, `ulid.rs`: each kind's value, its text form and its generator.
//!
//! It may use the engine, the clocks, `crate::error`, `crate::bounds` and `crate::fork_check`.

use crate::error::Error;

/// The last Unix millisecond the 48 bits of a UUIDv7's or ULID's time hold.
const LAST_UNIX_MS: u64 = (1 << 48) - 1;

/// `unix_ms`, if the 48 bits of a UUIDv7's or ULID's time hold it.
fn check_unix_ms(unix_ms: u64) -> Result<u64, Error> {
    if unix_ms > LAST_UNIX_MS {
        return Err(Error::TimeExhausted {
            last_unix_ms: LAST_UNIX_MS,
        });
    }
    Ok(unix_ms)
}

mod counted;
mod random;
mod ulid;
mod uuid7;

pub use self::counted::{
    COUNTED_EPOCH_UNIX_MS, COUNTED_TIME_BITS, COUNTER_BITS, CountedBuilder, CountedGenerator,
    CountedId,
};
pub use self::ulid::{ParseUlidError, Ulid, UlidGenerator};
pub use self::uuid7::{ParseUuid7Error, Uuid7, Uuid7Generator};
