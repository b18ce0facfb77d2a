//! Per-core sharding: several generators, one worker number each, and every thread pinned
//! to one of them, so threads on different cores never touch the same cache line.

use std::cell::Cell;
use std::fmt;
use std::ops::Range;

use crossbeam_utils::CachePadded;

use crate::DefaultClock;
use crate::clock::Clock;
use crate::engine::Stats;
use crate::error::Error;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

use super::builder::Builder;
use super::generator::Generator;
use super::id::Id;
use super::layout::{IdParts, Layout};

/// Hands each new thread the next number, round-robin over every sharded generator.
static NEXT_THREAD_SLOT: AtomicU32 = AtomicU32::new(0);

/// Names each sharded generator for the per-thread cache below (0 is never used).
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number, drawn on its first call and kept for its life: the same thread
    /// always lands on the same shard, so its IDs keep increasing.
    static THREAD_SLOT: Cell<Option<u32>> = const { Cell::new(None) };
    /// The last sharded generator this thread used, and its shard there: saves computing
    /// the shard on every call.
    static LAST_SHARD: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
}

fn thread_slot() -> u32 {
    THREAD_SLOT.with(|slot| match slot.get() {
        Some(n) => n,
        None => {
            let n = NEXT_THREAD_SLOT.fetch_add(1, Ordering::Relaxed);
            slot.set(Some(n));
            n
        }
    })
}

/// Several [`Generator`]s behind one handle: one per shard, each with its own worker number
/// from a contiguous range, each on its own cache lines.
///
/// Each thread is pinned, on its first call, to one shard (round-robin by the order in which
/// threads first call any sharded generator) and stays there for its life. So threads on
/// different shards never contend, each thread's IDs are strictly increasing, and IDs are
/// unique across shards because their worker numbers differ. IDs of different threads are
/// ordered by millisecond only, not by call order.
///
/// Same API and errors as [`Generator`]. With more threads than shards, threads share a
/// shard exactly as they would share a `Generator`.
///
/// ```
/// use idgen::ShardedGenerator;
///
/// // Workers 8..16 of datacenter 1, one shard per core (at most 8).
/// let sharded = ShardedGenerator::builder().datacenter(1).workers(8..16).build()?;
/// let a = sharded.next_id()?;
/// let b = sharded.next_id()?;
/// assert!(a < b); // the same thread stays on its shard
/// assert!((8..16).contains(&sharded.decode(a).worker));
/// # Ok::<(), idgen::Error>(())
/// ```
pub struct ShardedGenerator<C: Clock = DefaultClock> {
    shards: Box<[CachePadded<Generator<C>>]>,
    pins: Pins,
}

/// Which shard a thread is pinned to, for one set of `len` shards: shared by
/// [`ShardedGenerator`] and the leased sharded generator.
#[derive(Debug)]
pub(crate) struct Pins {
    instance: u64,
    len: usize,
    /// Lemire's multiplier for `slot % len` without a division on the hot path.
    fastmod_multiplier: u64,
}

impl Pins {
    /// Pins for `len` (at least 1) shards.
    pub(crate) fn new(len: usize) -> Pins {
        Pins {
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            len,
            fastmod_multiplier: (u64::MAX / len as u64).wrapping_add(1),
        }
    }

    /// This thread's shard.
    #[inline]
    pub(crate) fn index(&self) -> usize {
        let (instance, index) = LAST_SHARD.get();
        if instance == self.instance {
            index
        } else {
            self.pin_thread()
        }
    }

    /// Works out this thread's shard and caches it for the next calls.
    #[cold]
    fn pin_thread(&self) -> usize {
        let index = self.shard_index(thread_slot());
        LAST_SHARD.set((self.instance, index));
        index
    }

    /// `slot % len` by multiplication (Lemire, "Faster remainder by direct computation").
    #[inline]
    fn shard_index(&self, slot: u32) -> usize {
        let low = self.fastmod_multiplier.wrapping_mul(u64::from(slot));
        ((u128::from(low) * self.len as u128) >> 64) as usize
    }
}

/// Configures and builds a [`ShardedGenerator`]; start from [`ShardedGenerator::builder`].
#[derive(Clone)]
pub struct ShardedBuilder<C> {
    generator: Builder<C>,
    workers: Range<u64>,
    shards: Option<usize>,
}

impl ShardedGenerator<DefaultClock> {
    /// A builder with the defaults of [`Generator::builder`], workers `0..` as many as there
    /// are shards, and one shard per available core.
    pub fn builder() -> ShardedBuilder<DefaultClock> {
        ShardedBuilder {
            generator: Generator::builder(),
            workers: 0..u64::MAX,
            shards: None,
        }
    }
}

impl<C: Clock + Clone> ShardedBuilder<C> {
    /// The bit layout (default: [`Layout::DEFAULT`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.generator = self.generator.layout(layout);
        self
    }

    /// The datacenter number shared by every shard.
    pub fn datacenter(mut self, datacenter: u64) -> Self {
        self.generator = self.generator.datacenter(datacenter);
        self
    }

    /// The worker numbers the shards may take: shard `i` gets `workers.start + i`. Must hold
    /// at least as many numbers as there are shards, and fit the layout.
    pub fn workers(mut self, workers: Range<u64>) -> Self {
        self.workers = workers;
        self
    }

    /// How many shards (default: `std::thread::available_parallelism`, capped by the size of
    /// an explicit worker range).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// The clock every shard reads (cloned into each).
    pub fn clock<D: Clock + Clone>(self, clock: D) -> ShardedBuilder<D> {
        ShardedBuilder {
            generator: self.generator.clock(clock),
            workers: self.workers,
            shards: self.shards,
        }
    }

    /// See [`Builder::clock_back_tolerance_ms`].
    pub fn clock_back_tolerance_ms(mut self, ms: u64) -> Self {
        self.generator = self.generator.clock_back_tolerance_ms(ms);
        self
    }

    /// See [`Builder::borrow_ahead_ms`].
    pub fn borrow_ahead_ms(mut self, ms: u64) -> Self {
        self.generator = self.generator.borrow_ahead_ms(ms);
        self
    }

    /// Resumes every shard after a millisecond (Unix) in which an earlier holder of this
    /// worker range may have issued IDs: each shard starts in the millisecond after it. Use
    /// the latest of the shards' marks, for example the time of the last ID a previous run
    /// issued, or a lease's mark.
    pub fn resume_after_unix_ms(mut self, unix_ms: u64) -> Self {
        self.generator = self.generator.resume_after_unix_ms(unix_ms);
        self
    }

    /// Checks the configuration and builds every shard.
    ///
    /// Fails with [`Error::ShardWorkers`] when there are no shards or the worker range is
    /// too small for them, with [`Error::FieldOutOfRange`] when a worker number does not
    /// fit the layout, and otherwise as [`Builder::build`].
    pub fn build(self) -> Result<ShardedGenerator<C>, Error> {
        let available = self.workers.end.saturating_sub(self.workers.start);
        let shards = match self.shards {
            Some(n) => n,
            None => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(usize::try_from(available).unwrap_or(usize::MAX)),
        };
        if shards == 0 || (shards as u64) > available {
            return Err(Error::ShardWorkers {
                shards,
                workers: available,
            });
        }
        if shards > u32::MAX as usize {
            return Err(Error::ShardWorkers {
                shards,
                workers: available,
            });
        }
        let generator = self.generator.resolve_clock();
        let shards: Box<[CachePadded<Generator<C>>]> = (0..shards as u64)
            .map(|i| {
                let worker = self.workers.start + i;
                generator
                    .clone()
                    .worker(worker)
                    .build()
                    .map(CachePadded::new)
            })
            .collect::<Result<_, _>>()?;
        Ok(ShardedGenerator {
            pins: Pins::new(shards.len()),
            shards,
        })
    }
}

impl<C: Clock> ShardedGenerator<C> {
    /// The shard this thread is pinned to.
    #[inline]
    pub fn shard(&self) -> &Generator<C> {
        &self.shards[self.pins.index()]
    }

    /// The next ID from this thread's shard; see [`Generator::next_id`].
    #[inline]
    pub fn next_id(&self) -> Result<Id, Error> {
        self.shard().next_id()
    }

    /// See [`Generator::try_next_id`].
    pub fn try_next_id(&self) -> Result<Id, Error> {
        self.shard().try_next_id()
    }

    /// `n` increasing IDs from this thread's shard; see [`Generator::next_ids`].
    pub fn next_ids(&self, n: usize) -> Result<Vec<Id>, Error> {
        self.shard().next_ids(n)
    }

    /// See [`Generator::fill_ids`].
    pub fn fill_ids(&self, out: &mut [Id]) -> Result<(), Error> {
        self.shard().fill_ids(out)
    }

    /// Every shard, in worker order.
    pub fn shards(&self) -> impl ExactSizeIterator<Item = &Generator<C>> {
        self.shards.iter().map(|shard| &**shard)
    }

    /// The number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The layout shared by every shard.
    pub fn layout(&self) -> &Layout {
        self.shards[0].layout()
    }

    /// Splits an ID into its fields.
    pub fn decode(&self, id: Id) -> IdParts {
        self.layout().decode(id)
    }

    /// The slow-path counters of all shards, added up.
    pub fn stats(&self) -> Stats {
        self.shards()
            .map(Generator::stats)
            .fold(Stats::default(), |a, b| a + b)
    }
}

impl<C: Clock + fmt::Debug> fmt::Debug for ShardedGenerator<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedGenerator")
            .field("shards", &self.shards.len())
            .field("layout", self.layout())
            .field(
                "workers",
                &(self.shards[0].worker()..self.shards[0].worker() + self.shards.len() as u64),
            )
            .field("stats", &self.stats())
            .finish()
    }
}

impl<C: fmt::Debug> fmt::Debug for ShardedBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedBuilder")
            .field("generator", &self.generator)
            .field("workers", &self.workers)
            .field("shards", &self.shards)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Field;

    #[test]
    fn fast_modulo_matches_the_remainder() {
        for shards in 1..=17u64 {
            let multiplier = (u64::MAX / shards).wrapping_add(1);
            for slot in (0..5000u32).chain([u32::MAX - 3, u32::MAX - 1, u32::MAX]) {
                let low = multiplier.wrapping_mul(u64::from(slot));
                let index = ((u128::from(low) * shards as u128) >> 64) as u64;
                assert_eq!(index, u64::from(slot) % shards, "slot {slot} of {shards}");
            }
        }
    }

    #[test]
    fn a_worker_range_past_the_layout_is_rejected() {
        // Reported through the same error as a single generator's worker number.
        let error = ShardedGenerator::builder()
            .workers(30..34)
            .shards(4)
            .build();
        assert!(matches!(
            error,
            Err(Error::FieldOutOfRange {
                field: Field::Worker,
                value: 32,
                max: 31
            })
        ));
    }
}
