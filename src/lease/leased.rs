//! The leased generator and its builder: taking a number, then handing it to the keeper.

use std::fmt;
use std::ops::Deref;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::DefaultClock;
use crate::clock::Clock;
use crate::engine::Stats;
use crate::error::Error;
use crate::snowflake::{Builder, Generator, Id, IdParts, Layout, Pins};
use crate::sync::Arc;

use super::driver::{Driving, Lease, default_holder};
use super::keeper::{Control, Keeper, Prepared, keep};
use super::protocol::Machine;
use super::stats::LeaseStats;
use super::timing::{TAKE_ATTEMPTS, Timing};
use super::watch::{AcquireWatch, MarkWait};
use super::{LeaseStore, WorkerRange};

/// Configures a [`LeasedGenerator`]; start from [`LeasedGenerator::builder`].
#[derive(Debug)]
pub struct LeasedBuilder<C> {
    store: Arc<dyn LeaseStore>,
    range: WorkerRange,
    generator: Builder<C>,
    renew_every: Option<Duration>,
    margin: Option<Duration>,
    startup_wait: Option<Duration>,
    horizon: Option<Duration>,
    holder: Option<String>,
    watch: Option<AcquireWatch>,
}

impl LeasedGenerator<DefaultClock> {
    /// A builder for a generator whose worker number is leased from `store`, within
    /// `range`. Layout, clock and tolerances come from [`LeasedBuilder::generator`]; the
    /// datacenter and worker set there are replaced by the lease's.
    pub fn builder(
        store: impl LeaseStore + 'static,
        range: WorkerRange,
    ) -> LeasedBuilder<DefaultClock> {
        LeasedBuilder {
            store: Arc::new(store),
            range,
            generator: Generator::builder(),
            renew_every: None,
            margin: None,
            startup_wait: None,
            horizon: None,
            holder: None,
            watch: None,
        }
    }
}

impl<C: Clock + Clone + Send + Sync + 'static> LeasedBuilder<C> {
    /// The generator's layout, clock and tolerances.
    pub fn generator<D: Clock>(self, generator: Builder<D>) -> LeasedBuilder<D> {
        LeasedBuilder {
            store: self.store,
            range: self.range,
            generator,
            renew_every: self.renew_every,
            margin: self.margin,
            startup_wait: self.startup_wait,
            horizon: self.horizon,
            holder: self.holder,
            watch: self.watch,
        }
    }

    /// How often the keeper renews (default: a third of the store's TTL, so two renewals
    /// in a row can fail before the lease runs out).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }

    /// How long before the lease's end at the store a renewal must have been made (default:
    /// a tenth of the TTL): the renewal interval plus this margin must be less than the
    /// TTL, so that in normal running the store never sees the lease lapse, even with
    /// clock-rate differences between this host and the store.
    pub fn safety_margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// A name for operators, recorded with the claim where the store keeps one and shown by
    /// [`LeaseStore::survey`] (`idgen leases`). Default: `pid <pid> on <host>`.
    pub fn holder(mut self, name: impl Into<String>) -> Self {
        self.holder = Some(name.into());
        self
    }

    /// How far ahead of each renewal the generator writes its mark, and so how long it goes
    /// on issuing when renewals stop getting through (a store outage): it issues up to the
    /// mark, then refuses with [`Error::LeaseExpired`] until a renewal succeeds. Never below
    /// the TTL, never above [`MAX_OUTAGE_HORIZON`](super::MAX_OUTAGE_HORIZON) (a day). Default: the store's [`LeaseStore::default_outage_horizon`] (the TTL for
    /// the file store, whose crashed holders should not block their number for long;
    /// minutes for etcd). The price: a number whose holder crashed stays unusable until its
    /// mark passes, up to a horizon (see `docs/leases.md`).
    pub fn outage_horizon(mut self, horizon: Duration) -> Self {
        self.horizon = Some(horizon);
        self
    }

    /// How long [`LeasedBuilder::acquire`] may wait for the clock to pass the previous
    /// holder's mark, when every free number's mark is still ahead (default: the outage
    /// horizon plus one second: a crashed holder's mark is at most a horizon ahead of its
    /// last renewal). Further than that, acquiring fails with [`Error::ClockBehindMark`],
    /// which says how far.
    pub fn startup_wait(mut self, wait: Duration) -> Self {
        self.startup_wait = Some(wait);
        self
    }

    /// Reports this generator's waits for a mark to `watch` (at start and after a loss),
    /// and lets `watch` cancel the acquire: see [`AcquireWatch`].
    pub fn watch(mut self, watch: &AcquireWatch) -> Self {
        self.watch = Some(watch.clone());
        self
    }

    fn timing(&self) -> Result<Timing, Error> {
        Timing::for_store(
            &*self.store,
            self.renew_every,
            self.horizon,
            self.startup_wait,
        )
        .and_then(|timing| timing.check_margin(self.margin))
    }

    /// Takes the lowest free worker number of the range, writes this holder's mark, waits
    /// for the clock to pass the previous holder's mark, renews, and starts the keeper.
    pub fn acquire(self) -> Result<LeasedGenerator<C>, Error> {
        Ok(LeasedGenerator {
            kept: self.acquire_numbers(1)?,
        })
    }

    /// As [`LeasedBuilder::acquire`], but every wait (for the previous holder's mark, for a
    /// free number, between the store's retries) sleeps on Tokio's timers, so a current-thread
    /// runtime serves its other tasks meanwhile. Each request to the store is blocking I/O
    /// in every built-in store (a file lock, the PostgreSQL client, etcd's own runtime): it
    /// goes to Tokio's blocking pool, one at a time, bounded by the store's request timeout,
    /// and is the only time the acquire occupies a thread. Needs a Tokio runtime with the
    /// time driver enabled. The keeper that renews the lease afterwards is a thread, as for
    /// `acquire`.
    ///
    /// Cancel-safe: an acquire dropped while it waits gives the number it had taken back
    /// (from a thread of its own, with the previous holder's mark), as a cancelled
    /// [`AcquireWatch`] does; one dropped during a request gives it back when the request
    /// ends.
    #[cfg(feature = "tokio")]
    pub async fn acquire_async(self) -> Result<LeasedGenerator<C>, Error> {
        let prepared = self.prepare()?;
        let control = Arc::clone(&prepared.control);
        let keeper = super::take_async::take_one(&self.store, &self.range, prepared).await?;
        // A cancel that came after the last wait still counts: nothing was issued yet.
        if control.watch.gives_up() {
            super::take_async::release(keeper).await?;
            return Err(Error::LeaseStore {
                reason: "the acquire was cancelled".to_string(),
            });
        }
        control.watch.acquired();
        Ok(LeasedGenerator {
            kept: Kept::start(vec![keeper], control)?,
        })
    }

    /// A [`LeasedShardedGenerator`]: `shards` leased numbers of the range, one per shard, all
    /// kept by one keeper thread and released together. Each number is taken as
    /// [`LeasedBuilder::acquire`] takes one; if any cannot be, those taken are released.
    pub fn acquire_sharded(self, shards: usize) -> Result<LeasedShardedGenerator<C>, Error> {
        if shards == 0 {
            return Err(Error::ShardWorkers { shards, workers: 0 });
        }
        let kept = self.acquire_numbers(shards)?;
        Ok(LeasedShardedGenerator {
            pins: Pins::new(shards),
            kept,
        })
    }

    /// What every acquire checks and builds before it takes a number.
    fn prepare(&self) -> Result<Prepared<C>, Error> {
        let timing = self.timing()?;
        let (generator_builder, clock, layout) = self.generator.clone().resolved_parts();
        self.range.check(&layout)?;
        // A generator that cannot be built (a clock before the epoch, a layout it cannot
        // serve) fails before a number is taken and waited for, not after.
        generator_builder
            .clone()
            .datacenter(self.range.datacenter())
            .worker(*self.range.workers().start())
            .build()?;
        Ok(Prepared {
            timing,
            generator_builder,
            clock,
            layout,
            holder: self.holder.clone().unwrap_or_else(default_holder),
            control: Arc::new(Control::watched(self.watch.clone().unwrap_or_default())),
        })
    }

    fn acquire_numbers(self, count: usize) -> Result<Kept<C>, Error> {
        let Prepared {
            timing,
            generator_builder,
            clock,
            layout,
            holder,
            control,
        } = self.prepare()?;
        let mut keepers: Vec<Keeper<C>> = Vec::with_capacity(count);
        let cancelled = || Error::LeaseStore {
            reason: "the acquire was cancelled".to_string(),
        };
        for _ in 0..count {
            if control.watch.gives_up() {
                for keeper in &keepers {
                    let _ = keeper.release();
                }
                return Err(cancelled());
            }
            let taken = Taking {
                store: &self.store,
                range: &self.range,
                generator_builder: &generator_builder,
                clock: &clock,
                layout: &layout,
                timing,
                holder: &holder,
                control: &control,
            }
            .take_one(&keepers);
            match taken {
                Ok(keeper) => keepers.push(keeper),
                Err(error) => {
                    for keeper in &keepers {
                        let _ = keeper.release();
                    }
                    return Err(error);
                }
            }
        }
        // A cancel that came after the last wait still counts: nothing was issued yet.
        if control.watch.gives_up() {
            for keeper in &keepers {
                let _ = keeper.release();
            }
            return Err(cancelled());
        }
        control.watch.acquired();
        Kept::start(keepers, control)
    }
}

/// Takes one number through the lease machine (see `protocol/`): the free number whose
/// mark passed longest ago, marked, waited for, renewed; then builds its generator after
/// the previous mark.
struct Taking<'a, C> {
    store: &'a Arc<dyn LeaseStore>,
    range: &'a WorkerRange,
    generator_builder: &'a Builder<C>,
    clock: &'a C,
    layout: &'a Layout,
    timing: Timing,
    holder: &'a str,
    control: &'a Arc<Control>,
}

impl<C: Clock + Clone> Taking<'_, C> {
    /// While this number is taken, the numbers in `held` are renewed as they fall due.
    fn take_one(&self, held: &[Keeper<C>]) -> Result<Keeper<C>, Error> {
        let Taking {
            store,
            range,
            generator_builder,
            clock,
            layout,
            timing,
            holder,
            control,
        } = *self;
        let driving = Driving {
            store: &**store,
            range,
            layout,
            holder,
            origin: control.origin,
        };
        let mut lease = Lease::new(Machine::take(timing.settings(true, TAKE_ATTEMPTS), *range));
        let meanwhile = |waiting: Option<(u64, u64, u64)>| {
            control
                .watch
                .set_waiting(waiting.map(|(datacenter, worker, until_unix_ms)| MarkWait {
                    datacenter,
                    worker,
                    until_unix_ms,
                }));
            for keeper in held {
                keeper.step();
            }
        };
        let tenure =
            lease.take_blocking(&driving, clock, &meanwhile, &|| control.watch.gives_up())?;
        let generator = match tenure.generator(generator_builder.clone()) {
            Ok(generator) => generator,
            Err(error) => {
                // Nothing was issued: the number goes back with the previous mark.
                lease.machine.release(0);
                lease.step(&driving, clock, &mut |_| {});
                return Err(error);
            }
        };
        Ok(Keeper::new(
            generator,
            Arc::clone(store),
            *range,
            holder.to_string(),
            lease,
            Arc::clone(control),
        ))
    }
}

/// Numbers held and the one thread that keeps them: released together, on `release` or
/// drop.
struct Kept<C: Clock> {
    keepers: Arc<Vec<Keeper<C>>>,
    control: Arc<Control>,
    thread: Option<JoinHandle<()>>,
}

impl<C: Clock + Clone + Send + Sync + 'static> Kept<C> {
    fn start(keepers: Vec<Keeper<C>>, control: Arc<Control>) -> Result<Kept<C>, Error> {
        let keepers = Arc::new(keepers);
        let thread = {
            let (keepers, control) = (Arc::clone(&keepers), Arc::clone(&control));
            std::thread::Builder::new()
                .name("idgen-lease".into())
                .spawn(move || keep(&keepers, &control))
        };
        match thread {
            Ok(thread) => Ok(Kept {
                keepers,
                control,
                thread: Some(thread),
            }),
            Err(error) => {
                for keeper in keepers.iter() {
                    let _ = keeper.release();
                }
                Err(Error::ClockThread {
                    reason: error.to_string(),
                })
            }
        }
    }
}

impl<C: Clock> Kept<C> {
    /// Stops the keeper thread, then releases every number; the first error, if any.
    fn release(&mut self) -> Result<(), Error> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.control.stop();
        let _ = thread.join();
        let mut first_error = None;
        for keeper in self.keepers.iter() {
            if let Err(error) = keeper.release() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl<C: Clock> Drop for Kept<C> {
    fn drop(&mut self) {
        if let Err(error) = self.release() {
            log::warn!("idgen: releasing the worker number failed: {error}");
        }
    }
}

/// A [`Generator`] whose worker number is held by lease from a [`LeaseStore`].
///
/// It dereferences to the generator, so `next_id`, `next_ids` and the rest work as usual;
/// they fail with [`Error::LeaseExpired`] (transient) while the lease is not proven valid.
/// A background thread renews the lease; dropping the leased generator, or calling
/// [`LeasedGenerator::release`], stops that thread and frees the worker number.
///
/// ```
/// use idgen::lease::{FileStore, LeasedGenerator, WorkerRange};
///
/// let dir = std::env::temp_dir().join(format!("idgen-doc-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let generator = LeasedGenerator::builder(store, WorkerRange::parse(0, "0-31")?).acquire()?;
/// let id = generator.next_id()?;
/// assert_eq!(generator.decode(id).worker, generator.worker());
/// generator.release()?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idgen::Error>(())
/// ```
pub struct LeasedGenerator<C: Clock = DefaultClock> {
    kept: Kept<C>,
}

impl<C: Clock + Clone + Send + Sync + 'static> LeasedGenerator<C> {
    /// The lease's state and counters.
    pub fn lease_stats(&self) -> LeaseStats {
        self.kept.keepers[0].stats()
    }

    /// Stops issuing, stops the keeper and frees the worker number at once, recording the
    /// last millisecond actually used as the mark. The error, if any, is the store's: the
    /// number then frees itself when the lease expires (at once for the file store).
    pub fn release(mut self) -> Result<(), Error> {
        self.kept.release()
    }

    /// As [`LeasedGenerator::release`], from async code: the store's requests go to Tokio's
    /// blocking pool (dropping a leased generator, or `release`, blocks the thread on the
    /// store, and the etcd store refuses to block inside a runtime).
    #[cfg(feature = "tokio")]
    pub async fn release_async(self) -> Result<(), Error> {
        super::take_async::on_blocking_pool(move || self.release())
            .await
            .and_then(|released| released)
    }
}

impl<C: Clock> Deref for LeasedGenerator<C> {
    type Target = Generator<C>;

    fn deref(&self) -> &Generator<C> {
        &self.kept.keepers[0].generator
    }
}

impl<C: Clock + fmt::Debug> fmt::Debug for LeasedGenerator<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keeper = &self.kept.keepers[0];
        f.debug_struct("LeasedGenerator")
            .field("generator", &keeper.generator)
            .field("store", &keeper.store)
            .field("range", &keeper.range)
            .finish()
    }
}

/// Several leased worker numbers behind one handle, one per shard, pinned per thread as in
/// [`ShardedGenerator`](crate::ShardedGenerator): threads on different shards never contend, each thread's IDs
/// increase, and shards never share an ID because their numbers differ. One keeper thread
/// renews every number; each shard stops at its own mark and takes a new number on its own
/// if its number is lost. Dropping it, or [`LeasedShardedGenerator::release`], frees them
/// all.
///
/// ```
/// use idgen::lease::{FileStore, LeasedGenerator, WorkerRange};
///
/// let dir = std::env::temp_dir().join(format!("idgen-doc-sharded-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let sharded = LeasedGenerator::builder(store, WorkerRange::parse(0, "0-31")?)
///     .acquire_sharded(2)?;
/// let id = sharded.next_id()?;
/// assert!(sharded.next_id()? > id); // the same thread stays on its shard
/// assert_eq!(sharded.lease_stats().len(), 2);
/// sharded.release()?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idgen::Error>(())
/// ```
pub struct LeasedShardedGenerator<C: Clock = DefaultClock> {
    kept: Kept<C>,
    pins: Pins,
}

impl<C: Clock> LeasedShardedGenerator<C> {
    /// The shard this thread is pinned to.
    #[inline]
    pub fn shard(&self) -> &Generator<C> {
        &self.kept.keepers[self.pins.index()].generator
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

    /// Every shard's generator.
    pub fn shards(&self) -> impl ExactSizeIterator<Item = &Generator<C>> {
        self.kept.keepers.iter().map(|keeper| &keeper.generator)
    }

    /// The number of shards (one leased number each).
    pub fn shard_count(&self) -> usize {
        self.kept.keepers.len()
    }

    /// The layout shared by every shard.
    pub fn layout(&self) -> &Layout {
        self.kept.keepers[0].generator.layout()
    }

    /// The slow-path counters of all shards, added up.
    pub fn stats(&self) -> Stats {
        self.shards()
            .map(Generator::stats)
            .fold(Stats::default(), |a, b| a + b)
    }

    /// Each shard's lease, in shard order.
    pub fn lease_stats(&self) -> Vec<LeaseStats> {
        self.kept.keepers.iter().map(Keeper::stats).collect()
    }

    /// Splits an ID into its fields.
    pub fn decode(&self, id: Id) -> IdParts {
        self.layout().decode(id)
    }

    /// Stops issuing on every shard, stops the keeper and frees every number; the first
    /// error, if any, is the store's.
    pub fn release(mut self) -> Result<(), Error> {
        self.kept.release()
    }
}

impl<C: Clock + fmt::Debug> fmt::Debug for LeasedShardedGenerator<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedShardedGenerator")
            .field(
                "workers",
                &self
                    .shards()
                    .map(|shard| (shard.datacenter(), shard.worker()))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}
