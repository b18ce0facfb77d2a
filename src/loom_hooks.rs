//! What the loom models in `loom_tests/` reach that a user cannot, compiled only with
//! `--cfg idgen_loom` and hidden from the docs: the protocol words checked on their own
//! ([`BlockCursor`], [`CachedReading`]), and the crate-private steps a model drives (what a
//! lease keeper does to a generator, a counter small enough to run out, an ID with chosen
//! random bits). Nothing else in the crate exists for loom's sake.

use crate::clock::Clock;
#[cfg(feature = "uuid7-ulid")]
use crate::engine::Waiting;
use crate::error::Error;
use crate::snowflake::Generator;
#[cfg(feature = "uuid7-ulid")]
use crate::uuid7_ulid::{CountedBuilder, CountedGenerator, CountedId};

// The block allocator's cursor; the rest of `blocks` (files, threads) is not built under
// loom. The path is relative to `src/`.
#[path = "blocks/cursor.rs"]
mod block_cursor;

pub use self::block_cursor::BlockCursor;
pub use crate::clock::CachedReading;

/// What a lease keeper does to the tenure after a renewal (or, with ceiling 0, a loss).
pub fn set_tenure<C: Clock>(
    generator: &Generator<C>,
    datacenter: u64,
    worker: u64,
    ceiling_unix_ms: u64,
) {
    generator.set_tenure(datacenter, worker, ceiling_unix_ms);
}

/// A lease keeper moving the generator to another worker number of its datacenter.
pub fn move_to<C: Clock>(
    generator: &Generator<C>,
    worker: u64,
    past_unix_ms: u64,
    ceiling_unix_ms: u64,
) -> Result<(), Error> {
    generator.move_to(
        generator.datacenter(),
        worker,
        past_unix_ms,
        ceiling_unix_ms,
    )
}

#[cfg(feature = "uuid7-ulid")]
/// A builder whose counter has `bits` bits, so that a model can run it out.
pub fn counter_bits<T: CountedId, C: Clock>(
    builder: CountedBuilder<T, C>,
    bits: u32,
) -> CountedBuilder<T, C> {
    builder.counter_bits(bits)
}

#[cfg(feature = "uuid7-ulid")]
/// The next ID, a new millisecond's counter starting at `seed`, with `random` bits.
pub fn next_with<T: CountedId, C: Clock>(
    generator: &CountedGenerator<T, C>,
    seed: u64,
    random: u64,
) -> Result<T, Error> {
    generator.next_with(random, || seed, Waiting::Allowed)
}
