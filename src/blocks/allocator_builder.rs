//! Configuring a [`BlockAllocator`]: the [`AllocatorBuilder`] and its defaults.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::allocator::BlockAllocator;
use super::fetcher::{Config, Shared};
use super::{BlockStore, SequenceName};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;

/// The default size of the first block.
pub const DEFAULT_BLOCK_SIZE: u64 = 1_000;
/// The default smallest block the size adapts down to.
pub const DEFAULT_MIN_BLOCK_SIZE: u64 = 10;
/// The default largest block the size adapts up to.
pub const DEFAULT_MAX_BLOCK_SIZE: u64 = 1_000_000;
/// The default share of a block used before the next one is fetched.
pub const DEFAULT_REFILL_AT: f64 = 0.1;
/// The default longest a call waits for the store when both blocks are used up.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(2);
/// The default lifetime a block should last: shorter grows the size, twice as long shrinks it.
pub const DEFAULT_TARGET_BLOCK_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Configures a [`BlockAllocator`]; from [`BlockAllocator::builder`].
pub struct AllocatorBuilder {
    sequence: SequenceName,
    store: Box<dyn BlockStore>,
    clock: Box<dyn Clock>,
    config: Config,
}

impl BlockAllocator {
    /// A builder for the sequence `name` (1 to 64 of `a-z`, `0-9`, `_`, `-`) on `store`.
    pub fn builder(
        store: impl BlockStore + 'static,
        name: &str,
    ) -> Result<AllocatorBuilder, Error> {
        Ok(AllocatorBuilder {
            sequence: SequenceName::new(name)?,
            store: Box::new(store),
            clock: Box::new(SystemClock),
            config: Config {
                initial: DEFAULT_BLOCK_SIZE,
                min: DEFAULT_MIN_BLOCK_SIZE,
                max: DEFAULT_MAX_BLOCK_SIZE,
                refill_share: DEFAULT_REFILL_AT,
                max_wait: DEFAULT_MAX_WAIT,
                target_lifetime_ms: DEFAULT_TARGET_BLOCK_LIFETIME.as_millis() as u64,
            },
        })
    }
}

impl AllocatorBuilder {
    /// The size of the first block (default 1,000), also the size it adapts from.
    pub fn block_size(mut self, size: u64) -> Self {
        self.config.initial = size;
        self
    }

    /// The smallest (default 10) and largest (default 1,000,000) size it adapts within.
    /// Equal bounds fix the size.
    pub fn block_size_bounds(mut self, min: u64, max: u64) -> Self {
        self.config.min = min;
        self.config.max = max;
        self
    }

    /// Every block `size` values: no adapting.
    pub fn fixed_block_size(self, size: u64) -> Self {
        self.block_size(size).block_size_bounds(size, size)
    }

    /// The share of a block (0 to below 1, default 0.1) used before the next block is
    /// fetched in the background.
    pub fn refill_at(mut self, share: f64) -> Self {
        self.config.refill_share = share;
        self
    }

    /// The longest a call waits for the store when both blocks are used up (default 2 s),
    /// and the longest `close` waits for a fetch under way. `Duration::MAX` waits for ever;
    /// zero fails every call that finds both blocks used up, the first call included.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.config.max_wait = wait;
        self
    }

    /// How long a block should last (default 15 minutes): the size doubles after a block
    /// that lasted less, and halves after one that lasted more than twice as long.
    pub fn target_block_lifetime(mut self, lifetime: Duration) -> Self {
        self.config.target_lifetime_ms = lifetime.as_millis().min(u128::from(u64::MAX)) as u64;
        self
    }

    /// The clock that times how long blocks last (default [`SystemClock`]).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// The allocator, with its fetcher thread. It takes its first block on the first call.
    pub fn build(self) -> Result<BlockAllocator, Error> {
        let config = self.config;
        let refuse = |reason: String| Err(Error::BlockConfig { reason });
        if config.min == 0 || config.min > config.initial || config.initial > config.max {
            return refuse(format!(
                "block sizes must satisfy 1 <= min <= initial <= max; got min {}, initial {}, \
                 max {}",
                config.min, config.initial, config.max
            ));
        }
        if !(0.0..1.0).contains(&config.refill_share) {
            return refuse(format!(
                "the refill point must be a share from 0 to below 1; got {}",
                config.refill_share
            ));
        }
        let shared = Arc::new(Shared::new(self.sequence, self.store, self.clock, config));
        let worker = Arc::clone(&shared);
        let fetcher = std::thread::Builder::new()
            .name(format!("idgen-blocks-{}", shared.sequence))
            .spawn(move || worker.run_fetcher())
            .map_err(|error| Error::BlockConfig {
                reason: format!("could not start the fetcher thread: {error}"),
            })?;
        Ok(BlockAllocator {
            shared,
            fetcher: Mutex::new(Some(fetcher)),
        })
    }
}

impl fmt::Debug for AllocatorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AllocatorBuilder")
            .field("sequence", &self.sequence)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
