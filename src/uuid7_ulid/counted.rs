//! What UUIDv7 and ULID share: a generator of (Unix millisecond, counter, random bits) on the
//! crate's core.
//!
//! The core's state is the packed (millisecond, counter): milliseconds since
//! [`COUNTED_EPOCH_UNIX_MS`] in the top [`COUNTED_TIME_BITS`] bits, the counter in the low
//! [`COUNTER_BITS`]. It advances through the same pure transition and CAS loop as the
//! Snowflake generator; the one difference is the seed: a new millisecond starts its
//! counter at random bits with the top bit clear (RFC 9562, section 6.2, method 1), so at
//! least `2^21` values follow in that millisecond. Each kind composes its value from the
//! millisecond, the counter and fresh random bits drawn per ID (`random.rs`).

use std::fmt;
use std::marker::PhantomData;

use crate::DefaultClock;
use crate::clock::Clock;
use crate::engine::{ClockSource, Core, Rules, Stats, Waiting};
use crate::error::Error;
use crate::snowflake::DEFAULT_CLOCK_BACK_TOLERANCE_MS;

use super::random;

/// The first millisecond the 128-bit kinds can issue in: 2024-01-01T00:00:00Z. It is not
/// part of their values (those carry Unix milliseconds), only of the generator's state.
pub const COUNTED_EPOCH_UNIX_MS: u64 = 1_704_067_200_000;

/// Bits of milliseconds since [`COUNTED_EPOCH_UNIX_MS`] in the state: `2^42` ms is 139
/// years, until 2163-05-15. The last of those milliseconds is kept out of use, so that the
/// transition's `+ 1` past the last slot still fits the 64 bits.
pub const COUNTED_TIME_BITS: u32 = 42;

/// Bits of the counter: `2^22` values per millisecond, of which at least `2^21` follow any
/// seed (seeds are below `2^21`). A generator that uses them up within one millisecond
/// waits for the next.
pub const COUNTER_BITS: u32 = 64 - COUNTED_TIME_BITS;

/// A kind of 128-bit ID made of a Unix millisecond, a [`COUNTER_BITS`]-bit counter and
/// random bits: [`Uuid7`](crate::Uuid7) and [`Ulid`](crate::Ulid).
pub trait CountedId: sealed::Sealed + Copy + Ord + fmt::Debug + Send + Sync + 'static {
    /// The value with these fields: the counter in the most significant bits below the
    /// millisecond (and the version and variant, for a UUID), then as many of `random`'s
    /// low bits as the rest holds.
    #[doc(hidden)]
    fn from_counted(unix_ms: u64, counter: u64, random: u64) -> Self;
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Issues [`CountedId`]s, strictly increasing across all threads, lock-free: the generator
/// behind [`Uuid7Generator`](crate::Uuid7Generator) and [`UlidGenerator`](crate::UlidGenerator).
///
/// Share it through `&self` like a [`Generator`](crate::Generator). It needs no worker
/// number: two generators (in one process or in many) stay apart through the random bits,
/// a 21-bit seed per millisecond and 52 (UUIDv7) or 58 (ULID) bits per ID.
pub struct CountedGenerator<T: CountedId, C: Clock = DefaultClock> {
    core: Core<C, ()>,
    counter_mask: u64,
    /// Seeds have the counter's top bit clear.
    seed_mask: u64,
    kind: PhantomData<fn() -> T>,
}

/// Configures and builds a [`CountedGenerator`]; start from
/// [`Uuid7Generator::builder`](crate::Uuid7Generator) or
/// [`UlidGenerator::builder`](crate::UlidGenerator).
pub struct CountedBuilder<T: CountedId, C> {
    clock: ClockSource<C>,
    tolerance_ms: u64,
    counter_bits: u32,
    kind: PhantomData<fn() -> T>,
}

impl<T: CountedId> CountedGenerator<T, DefaultClock> {
    /// A builder with the [`DefaultClock`] and a clock step-back tolerance of
    /// [`DEFAULT_CLOCK_BACK_TOLERANCE_MS`].
    pub fn builder() -> CountedBuilder<T, DefaultClock> {
        CountedBuilder {
            clock: ClockSource::Default(DefaultClock::new),
            tolerance_ms: DEFAULT_CLOCK_BACK_TOLERANCE_MS,
            counter_bits: COUNTER_BITS,
            kind: PhantomData,
        }
    }

    /// A generator on the [`DefaultClock`] with the default tolerance.
    ///
    /// Fails with [`Error::EpochInFuture`] when the clock reads before
    /// [`COUNTED_EPOCH_UNIX_MS`], and with [`Error::TimeExhausted`] past its 139 years.
    pub fn new() -> Result<Self, Error> {
        Self::builder().build()
    }
}

impl<T: CountedId, C: Clock> CountedBuilder<T, C> {
    /// The clock to read (default: the process's [`DefaultClock`]).
    pub fn clock<D: Clock>(self, clock: D) -> CountedBuilder<T, D> {
        CountedBuilder {
            clock: ClockSource::Given(clock),
            tolerance_ms: self.tolerance_ms,
            counter_bits: self.counter_bits,
            kind: PhantomData,
        }
    }

    /// How far the clock may be behind the last issued millisecond before calls are
    /// refused with [`Error::ClockMovedBackwards`]; within it, calls go on counting in that
    /// millisecond, then wait for the clock. As
    /// [`Builder::clock_back_tolerance_ms`](crate::Builder::clock_back_tolerance_ms).
    pub fn clock_back_tolerance_ms(mut self, ms: u64) -> Self {
        self.tolerance_ms = ms;
        self
    }

    /// A counter small enough to run out, for the loom models (`crate::loom_hooks`).
    #[cfg(idgen_loom)]
    pub(crate) fn counter_bits(mut self, bits: u32) -> Self {
        self.counter_bits = bits;
        self
    }

    /// Checks the clock and builds the generator.
    ///
    /// Fails with [`Error::EpochInFuture`] when the clock reads before
    /// [`COUNTED_EPOCH_UNIX_MS`], and with [`Error::TimeExhausted`] past the last
    /// millisecond the state holds.
    pub fn build(self) -> Result<CountedGenerator<T, C>, Error> {
        let clock = self.clock.into_clock();
        let max_elapsed_ms = (1 << (64 - self.counter_bits)) - 2;
        let now_unix_ms = clock.now_unix_ms();
        if now_unix_ms < COUNTED_EPOCH_UNIX_MS {
            return Err(Error::EpochInFuture {
                epoch_unix_ms: COUNTED_EPOCH_UNIX_MS,
                now_unix_ms,
            });
        }
        if now_unix_ms - COUNTED_EPOCH_UNIX_MS > max_elapsed_ms {
            return Err(Error::TimeExhausted {
                last_unix_ms: COUNTED_EPOCH_UNIX_MS + max_elapsed_ms,
            });
        }
        let rules = Rules {
            sequence_bits: self.counter_bits,
            max_elapsed_ms,
            tolerance_ms: self.tolerance_ms,
            borrow_ms: 0,
        };
        let counter_mask = (1 << self.counter_bits) - 1;
        Ok(CountedGenerator {
            core: Core::new(rules, COUNTED_EPOCH_UNIX_MS, clock, (), 0),
            counter_mask,
            seed_mask: counter_mask >> 1,
            kind: PhantomData,
        })
    }
}

impl<T: CountedId, C: Clock> CountedGenerator<T, C> {
    /// The next ID: see [`Uuid7Generator::next_uuid`](crate::Uuid7Generator).
    #[inline]
    pub(crate) fn next(&self) -> Result<T, Error> {
        self.next_with(random::draw()?, random_seed, Waiting::Allowed)
    }

    /// As `next`, but [`Error::WouldBlock`] where it would wait.
    pub(crate) fn try_next(&self) -> Result<T, Error> {
        self.next_with(random::draw()?, random_seed, Waiting::Refused)
    }

    /// The next ID with `random` in its random field; a new millisecond's counter starts at
    /// `seed()` with the top bit cleared.
    #[inline]
    pub(crate) fn next_with(
        &self,
        random: u64,
        seed: impl Fn() -> u64,
        waiting: Waiting,
    ) -> Result<T, Error> {
        let slot = match self.core.try_issue_one(|| seed() & self.seed_mask) {
            Some((slot, ())) => slot,
            None => self.core.reserve(1, waiting, seed() & self.seed_mask)?.0,
        };
        Ok(self.compose(slot, random))
    }

    /// `n` IDs in increasing order, one compare-and-swap per millisecond spanned.
    pub(crate) fn next_many(&self, n: usize) -> Result<Vec<T>, Error> {
        let mut ids = Vec::new();
        ids.try_reserve_exact(n)
            .map_err(|_| Error::BatchTooLarge { requested: n })?;
        self.reserve_each(n, |id| ids.push(id))?;
        Ok(ids)
    }

    /// Fills `out` with IDs in increasing order, as `next_many`.
    pub(crate) fn fill(&self, out: &mut [T]) -> Result<(), Error> {
        let mut slots = out.iter_mut();
        self.reserve_each(slots.len(), |id| {
            if let Some(slot) = slots.next() {
                *slot = id;
            }
        })
    }

    /// Reserves `n` IDs run by run; a failed draw leaves the rest of its run unused (a gap).
    fn reserve_each(&self, n: usize, mut sink: impl FnMut(T)) -> Result<(), Error> {
        // Every millisecond a batch enters gets a seed of its own.
        let seed = || random::draw().map(|word| word & self.seed_mask);
        self.core.reserve_runs(n, seed, |first, count, ()| {
            for slot in first..first + count {
                sink(self.compose(slot, random::draw()?));
            }
            Ok(())
        })
    }

    #[inline]
    fn compose(&self, slot: u64, random: u64) -> T {
        let unix_ms = self.core.epoch_unix_ms() + (slot >> self.core.sequence_bits());
        T::from_counted(unix_ms, slot & self.counter_mask, random)
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        self.core.clock()
    }

    /// The slow-path counters so far (the lease counter stays 0: these kinds hold no lease).
    pub fn stats(&self) -> Stats {
        self.core.stats()
    }
}

/// A seed for a new millisecond, drawn right after the call's own draw succeeded: this
/// thread's generator is seeded then, so the draw cannot fail (were it to, 0 is a valid
/// seed all the same).
fn random_seed() -> u64 {
    random::draw().unwrap_or(0)
}

impl<T: CountedId, C: Clock + fmt::Debug> fmt::Debug for CountedGenerator<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountedGenerator")
            .field("kind", &std::any::type_name::<T>())
            .field("clock", self.clock())
            .field("stats", &self.stats())
            .finish()
    }
}

impl<T: CountedId, C: fmt::Debug> fmt::Debug for CountedBuilder<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountedBuilder")
            .field("kind", &std::any::type_name::<T>())
            .field("clock", &self.clock)
            .field("clock_back_tolerance_ms", &self.tolerance_ms)
            .finish()
    }
}
