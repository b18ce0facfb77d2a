//! Worker-number leases: a process holds its worker number by lease, and a generator built
//! from a lease stops issuing before anyone else could take the number.
//!
//! The protocol and its timing argument are in [`crate::design`] and `docs/leases.md`; in
//! short:
//!
//! - A [`LeaseStore`] hands out the lowest free worker number of a [`WorkerRange`] as a
//!   [`Claim`], together with the previous holder's **mark**: a Unix millisecond that every
//!   ID the previous holder issued is dated at or before.
//! - [`LeasedGenerator`] writes its own mark (a TTL ahead of the moment the request was
//!   sent) at acquire and at each renewal, starts strictly after the previous mark, and
//!   gives its [`Generator`] a **ceiling**: the earlier of its mark and the end of the
//!   lease's validity minus a safety margin, both measured from when the acquire or renewal
//!   request was *sent*. The hot path compares each ID's millisecond with the ceiling (one
//!   atomic load, no system call); past it, calls fail with [`Error::LeaseExpired`].
//! - A background keeper renews every `ttl / 3`, retries failures with backoff, takes a new
//!   number if the old one is lost for good, and releases the number (writing the real
//!   high-water mark, so a successor need not wait) on [`LeasedGenerator::release`] or drop.

#[cfg(feature = "etcd")]
mod etcd;
mod file;

#[cfg(feature = "etcd")]
pub use etcd::{ETCD_DEFAULT_TTL, EtcdStore};
pub use file::{
    FILE_STORE_DEFAULT_TTL, FILE_STORE_MAX_TTL, FileStore, default_lease_dir, legacy_lease_dir,
};

use std::fmt;
use std::ops::{Deref, RangeInclusive};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::DefaultClock;
use crate::clock::Clock;
use crate::error::{Error, Field};
use crate::generator::{Builder, Generator};
use crate::layout::Layout;
use crate::sync::{Arc, AtomicU64, Ordering};

/// The worker numbers a process may lease: one datacenter and an inclusive range of worker
/// numbers in it (for example production `0-799`, staging `800-1023`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkerRange {
    datacenter: u64,
    first: u64,
    last: u64,
}

impl WorkerRange {
    /// Workers `workers` of `datacenter`. Fails when the range is empty (`5..=4`).
    pub fn new(datacenter: u64, workers: RangeInclusive<u64>) -> Result<WorkerRange, Error> {
        let (first, last) = workers.into_inner();
        if first > last {
            return Err(Error::LeaseConfig {
                reason: format!("the worker range {first}-{last} is empty"),
            });
        }
        Ok(WorkerRange {
            datacenter,
            first,
            last,
        })
    }

    /// Parses `"A-B"` (inclusive) or a single `"A"`, in canonical decimal.
    ///
    /// ```
    /// use idgen::lease::WorkerRange;
    /// let range = WorkerRange::parse(2, "800-1023")?;
    /// assert_eq!((range.first(), range.last()), (800, 1023));
    /// assert!(WorkerRange::parse(2, "10-3").is_err());
    /// assert!(WorkerRange::parse(2, "-3").is_err());
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn parse(datacenter: u64, text: &str) -> Result<WorkerRange, Error> {
        let number = |part: &str| -> Result<u64, Error> {
            let canonical = !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && (part == "0" || !part.starts_with('0'));
            match part.parse::<u64>() {
                Ok(value) if canonical => Ok(value),
                _ => Err(Error::LeaseConfig {
                    reason: format!(
                        "the worker range {text:?} is not A-B or A with decimal numbers \
                         (the part {part:?} is not one)"
                    ),
                }),
            }
        };
        let (first, last) = match text.split_once('-') {
            Some((first, last)) => (number(first)?, number(last)?),
            None => {
                let only = number(text)?;
                (only, only)
            }
        };
        WorkerRange::new(datacenter, first..=last)
    }

    /// Every worker number of a layout, in `datacenter`.
    pub fn all(layout: &Layout, datacenter: u64) -> WorkerRange {
        WorkerRange {
            datacenter,
            first: 0,
            last: layout.max_worker(),
        }
    }

    /// The datacenter.
    pub fn datacenter(&self) -> u64 {
        self.datacenter
    }

    /// The lowest worker number of the range.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The highest worker number of the range.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The worker numbers, lowest first.
    pub fn workers(&self) -> RangeInclusive<u64> {
        self.first..=self.last
    }

    /// Fails unless the datacenter and every worker number fit `layout`.
    pub fn check(&self, layout: &Layout) -> Result<(), Error> {
        for (field, value, max) in [
            (Field::Datacenter, self.datacenter, layout.max_datacenter()),
            (Field::Worker, self.last, layout.max_worker()),
        ] {
            if value > max {
                return Err(Error::FieldOutOfRange { field, value, max });
            }
        }
        Ok(())
    }
}

impl fmt::Display for WorkerRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "datacenter {} workers {}-{}",
            self.datacenter, self.first, self.last
        )
    }
}

/// Where worker numbers are leased from. [`FileStore`] (one host) and, with the `etcd`
/// feature, `EtcdStore` (a fleet) are the two built in; a store of your own implements
/// these two methods with the same promises.
pub trait LeaseStore: Send + Sync + fmt::Debug {
    /// How long a claim stays valid after the request that acquired or last renewed it was
    /// sent, if it is not renewed. After that, the store may hand the number to another
    /// process.
    fn ttl(&self) -> Duration;

    /// Claims the lowest free worker number in `range`: free means no live holder, and a
    /// record that can be trusted. Fails with [`Error::LeaseRangeFull`] when there is none,
    /// and with [`Error::LeaseStore`] when the store cannot be reached.
    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error>;
}

/// A boxed store is a store, so one can be chosen at run time (`Box<dyn LeaseStore>`).
impl<S: LeaseStore + ?Sized> LeaseStore for Box<S> {
    fn ttl(&self) -> Duration {
        (**self).ttl()
    }

    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        (**self).acquire(range)
    }
}

/// One worker number, held. Dropping a claim without [`Claim::release`] leaves the number
/// to expire (the file store frees it at once, as the OS drops the lock).
pub trait Claim: Send + fmt::Debug {
    /// The datacenter.
    fn datacenter(&self) -> u64;

    /// The worker number.
    fn worker(&self) -> u64;

    /// The mark the previous holder left: every ID it issued is dated at or before this
    /// Unix millisecond. `None` when the number was never held.
    fn previous_mark_unix_ms(&self) -> Option<u64>;

    /// Whether the store has lost what it knew of this number's earlier holders: its record
    /// or mark was deleted, emptied, re-created or replaced, so
    /// [`Claim::previous_mark_unix_ms`] is at best a lower bound. A leased generator then
    /// takes the previous mark to be one TTL after it took the number: any earlier holder,
    /// even one still running, has stopped issuing by then (it renews within a TTL, finds
    /// the number gone, and its IDs are dated at or before its last mark), on clocks that
    /// agree within the TTL: a predecessor whose clock ran further ahead may have dated IDs
    /// later, and only its deleted mark knew. Default: `false`.
    fn previous_mark_unknown(&self) -> bool {
        false
    }

    /// Proves the claim still holds, extends it by the store's TTL from now, and records
    /// `mark_unix_ms` as the holder's new promise. [`Error::LeaseLost`] when the number is
    /// gone for good; any other error is transient (the store could not be reached).
    fn renew(&mut self, mark_unix_ms: u64) -> Result<(), Error>;

    /// Records `mark_unix_ms` (the last millisecond actually used) and frees the number at
    /// once.
    fn release(&mut self, mark_unix_ms: u64) -> Result<(), Error>;
}

/// Where a leased generator stands, in [`LeaseStats::state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseState {
    /// The lease is valid: IDs are issued.
    Valid,
    /// Renewals have failed for so long that the validity ran out: calls fail with
    /// [`Error::LeaseExpired`] until a renewal gets through.
    Expired,
    /// The store says the number is gone: the keeper is trying to take a new one.
    Lost,
    /// Released; nothing more is issued.
    Released,
}

/// A snapshot of a leased generator's lease ([`LeasedGenerator::lease_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseStats {
    /// The state now.
    pub state: LeaseState,
    /// The datacenter held now.
    pub datacenter: u64,
    /// The worker number held now.
    pub worker: u64,
    /// Successful renewals.
    pub renewals: u64,
    /// Failed renewal attempts (each retry counts).
    pub renewal_failures: u64,
    /// Worker numbers taken after the one before was lost.
    pub reacquisitions: u64,
    /// Milliseconds of validity left (negative: expired that long ago), on the generator's
    /// clock.
    pub valid_for_ms: i64,
    /// The first Unix millisecond (generator's clock) in which no ID is issued: the end of
    /// the validity minus the safety margin, or the mark, whichever is earlier.
    pub valid_until_unix_ms: u64,
    /// The earliest moment the store may hand the number to someone else: when the last
    /// successful acquire or renewal request was sent, plus the TTL.
    pub lease_end_unix_ms: u64,
    /// The last mark written to the store.
    pub mark_unix_ms: u64,
    /// The mark the previous holder of the number held now had left, if any.
    pub previous_mark_unix_ms: Option<u64>,
}

/// Tuning of a [`LeasedGenerator`]; the defaults follow the store's TTL.
#[derive(Debug, Clone, Copy)]
struct Timing {
    ttl: Duration,
    renew_every: Duration,
    margin: Duration,
    startup_wait: Duration,
}

/// Configures a [`LeasedGenerator`]; start from [`LeasedGenerator::builder`].
#[derive(Debug)]
pub struct LeasedBuilder<C> {
    store: Arc<dyn LeaseStore>,
    range: WorkerRange,
    generator: Builder<C>,
    renew_every: Option<Duration>,
    margin: Option<Duration>,
    startup_wait: Option<Duration>,
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
        }
    }

    /// How often the keeper renews (default: a third of the store's TTL, so two renewals
    /// in a row can fail before the lease runs out).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }

    /// How long before the lease's end the generator stops issuing (default: a tenth of
    /// the TTL). Covers clock-rate differences between this host and the store.
    pub fn safety_margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// How long [`LeasedBuilder::acquire`] may wait for the clock to pass the previous
    /// holder's mark (default: the TTL plus one second: a crashed holder's mark is at most
    /// a TTL ahead of its last renewal). Further behind than that, the clocks disagree and
    /// acquiring fails with [`Error::ClockBehindMark`].
    pub fn startup_wait(mut self, wait: Duration) -> Self {
        self.startup_wait = Some(wait);
        self
    }

    fn timing(&self) -> Result<Timing, Error> {
        let ttl = self.store.ttl();
        let renew_every = self.renew_every.unwrap_or(ttl / 3);
        let margin = self.margin.unwrap_or(ttl / 10);
        let timing = Timing {
            ttl,
            renew_every,
            margin,
            startup_wait: self
                .startup_wait
                .unwrap_or(ttl.saturating_add(Duration::from_secs(1))),
        };
        if renew_every.is_zero() || margin.saturating_add(renew_every) >= ttl {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "renewing every {renew_every:?} with a safety margin of {margin:?} \
                     leaves no validity within a TTL of {ttl:?}: both must be non-zero \
                     and add up to less than the TTL"
                ),
            });
        }
        Ok(timing)
    }

    /// Takes the lowest free worker number of the range, writes this holder's mark, waits
    /// for the clock to pass the previous holder's mark, renews, and starts the keeper.
    pub fn acquire(self) -> Result<LeasedGenerator<C>, Error> {
        let timing = self.timing()?;
        let (generator_builder, clock, layout) = self.generator.resolved_parts();
        self.range.check(&layout)?;
        let sent_unix_ms = clock.now_unix_ms();
        let (mut claim, previous) = take_number(&*self.store, &self.range, &clock, &timing)?;
        let mark = sent_unix_ms
            .saturating_add(millis(timing.ttl))
            .max(previous.unwrap_or(0));
        if let Err(error) = claim.renew(mark) {
            // Best effort: the number is ours, give it back rather than let it expire.
            let _ = claim.release(mark);
            return Err(error);
        }
        let mut generator_builder = generator_builder
            .datacenter(claim.datacenter())
            .worker(claim.worker());
        if let Some(previous) = previous {
            generator_builder = generator_builder.resume_after_unix_ms(previous);
        }
        let generator = match generator_builder.build() {
            Ok(generator) => generator,
            Err(error) => {
                let _ = claim.release(mark);
                return Err(error);
            }
        };
        let keeper = Keeper {
            generator,
            store: self.store,
            range: self.range,
            timing,
            claim: Mutex::new(None),
            marks: Marks {
                written_unix_ms: AtomicU64::new(mark),
                previous_unix_ms: AtomicU64::new(previous.unwrap_or(0)),
                lease_end_unix_ms: AtomicU64::new(0),
            },
            counters: Counters::default(),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        };
        keeper.grant(claim.datacenter(), claim.worker(), sent_unix_ms, mark);
        let waited = previous.is_some();
        let wait = keeper.wait_past(previous, timing.startup_wait, &mut *claim, mark);
        *keeper.lock_claim() = Some(claim);
        if let Err(error) = wait {
            let _ = keeper.release();
            return Err(error);
        }
        // The wait used up validity counted from before it: renew at once, so the number
        // is valid for a whole TTL from now.
        if waited && !keeper.renew() {
            let error = Error::LeaseStore {
                reason: format!(
                    "renewing worker {} of datacenter {} right after the wait for the previous \
                     holder's mark failed",
                    keeper.generator.worker(),
                    keeper.generator.datacenter()
                ),
            };
            let _ = keeper.release();
            return Err(error);
        }
        let keeper = Arc::new(keeper);
        let thread = {
            let keeper = Arc::clone(&keeper);
            std::thread::Builder::new()
                .name("idgen-lease".into())
                .spawn(move || keeper.run())
                .map_err(|error| Error::ClockThread {
                    reason: error.to_string(),
                })
        };
        let thread = match thread {
            Ok(thread) => thread,
            Err(error) => {
                let _ = keeper.release();
                return Err(error);
            }
        };
        Ok(LeasedGenerator {
            keeper,
            thread: Some(thread),
        })
    }
}

/// Takes the lowest free number of `range` whose previous mark the clock can pass within
/// the startup wait, and that mark (see [`previous_mark`]). A number with a mark further
/// ahead (a holder whose clock ran far ahead, a bogus record) is held aside while the store
/// is asked again, so it never blocks the rest of the range, then given back with the mark
/// it was taken with (for a number whose history was lost, the TTL-ahead one).
/// When every free number is that far ahead, fails with [`Error::ClockBehindMark`].
fn take_number<C: Clock>(
    store: &dyn LeaseStore,
    range: &WorkerRange,
    clock: &C,
    timing: &Timing,
) -> Result<(Box<dyn Claim>, Option<u64>), Error> {
    let mut set_aside: Vec<(Box<dyn Claim>, u64)> = Vec::new();
    let numbers = range.last() - range.first() + 1;
    let taken = loop {
        // Each number at most once: a store whose set-aside claims expire meanwhile (etcd)
        // could otherwise hand them out again for ever.
        if set_aside.len() as u64 >= numbers {
            break Err(Error::LeaseRangeFull {
                range: range.to_string(),
                held: 0,
                unusable: Vec::new(),
            });
        }
        let claim = match store.acquire(range) {
            Ok(claim) => claim,
            Err(error) => break Err(error),
        };
        if let Err(error) = check_claim(&*claim, range) {
            break Err(error);
        }
        let previous = previous_mark(&*claim, clock, timing.ttl);
        let behind_ms = previous.map_or(0, |previous| {
            previous
                .saturating_add(1)
                .saturating_sub(clock.now_unix_ms())
        });
        if behind_ms <= millis(timing.startup_wait) {
            break Ok((claim, previous));
        }
        log::warn!(
            "idgen: worker {} of datacenter {} has a mark {behind_ms} ms ahead of the clock; \
             trying another number",
            claim.worker(),
            claim.datacenter()
        );
        set_aside.push((claim, previous.unwrap_or(0)));
    };
    let nearest = set_aside
        .iter()
        .map(|(_, previous)| {
            previous
                .saturating_add(1)
                .saturating_sub(clock.now_unix_ms())
        })
        .min();
    for (mut claim, previous) in set_aside {
        let _ = claim.release(previous);
    }
    match (taken, nearest) {
        (Err(Error::LeaseRangeFull { .. }), Some(behind_ms)) => {
            Err(Error::ClockBehindMark { behind_ms })
        }
        (taken, _) => taken,
    }
}

/// A store's claim must be a number of the range asked for: one from elsewhere (a store of
/// one's own with a defect) could be another process's number, or not fit the layout.
fn check_claim(claim: &dyn Claim, range: &WorkerRange) -> Result<(), Error> {
    let inside =
        claim.datacenter() == range.datacenter() && range.workers().contains(&claim.worker());
    if inside {
        return Ok(());
    }
    Err(Error::LeaseStore {
        reason: format!(
            "the store handed out worker {} of datacenter {}, outside the range asked for ({range})",
            claim.worker(),
            claim.datacenter()
        ),
    })
}

/// The previous holder's mark to start after. When the store lost the number's history,
/// a TTL after now on `clock`: every earlier holder's IDs are dated at or before its last
/// mark, which it wrote at most a TTL after its last renewal, before now.
fn previous_mark<C: Clock>(claim: &dyn Claim, clock: &C, ttl: Duration) -> Option<u64> {
    let stored = claim.previous_mark_unix_ms();
    if !claim.previous_mark_unknown() {
        return stored;
    }
    let unknown = clock.now_unix_ms().saturating_add(millis(ttl));
    Some(stored.unwrap_or(0).max(unknown))
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
    keeper: Arc<Keeper<C>>,
    thread: Option<JoinHandle<()>>,
}

impl<C: Clock + Clone + Send + Sync + 'static> LeasedGenerator<C> {
    /// The lease's state and counters.
    pub fn lease_stats(&self) -> LeaseStats {
        self.keeper.stats()
    }

    /// Stops issuing, stops the keeper and frees the worker number at once, recording the
    /// last millisecond actually used as the mark. The error, if any, is the store's: the
    /// number then frees itself when the lease expires (at once for the file store).
    pub fn release(mut self) -> Result<(), Error> {
        self.stop_keeper();
        self.keeper.release()
    }

    fn stop_keeper(&mut self) {
        if let Some(thread) = self.thread.take() {
            *lock(&self.keeper.stop) = true;
            self.keeper.wake.notify_all();
            let _ = thread.join();
        }
    }
}

impl<C: Clock> Deref for LeasedGenerator<C> {
    type Target = Generator<C>;

    fn deref(&self) -> &Generator<C> {
        &self.keeper.generator
    }
}

impl<C: Clock> Drop for LeasedGenerator<C> {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            *lock(&self.keeper.stop) = true;
            self.keeper.wake.notify_all();
            let _ = thread.join();
            if let Err(error) = self.keeper.release() {
                log::warn!("idgen: releasing the worker number failed: {error}");
            }
        }
    }
}

impl<C: Clock + fmt::Debug> fmt::Debug for LeasedGenerator<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedGenerator")
            .field("generator", &self.keeper.generator)
            .field("store", &self.keeper.store)
            .field("range", &self.keeper.range)
            .finish()
    }
}

#[derive(Default)]
struct Counters {
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    reacquisitions: AtomicU64,
    /// A [`LeaseState`] as a number, for the states the ceiling does not tell.
    state: AtomicU64,
}

const STATE_HELD: u64 = 0;
const STATE_LOST: u64 = 1;
const STATE_RELEASED: u64 = 2;

struct Marks {
    /// The last mark written to the store.
    written_unix_ms: AtomicU64,
    /// The previous holder's mark of the number held now (0: none).
    previous_unix_ms: AtomicU64,
    /// When the last proven lease ends at the earliest: request sent + TTL.
    lease_end_unix_ms: AtomicU64,
}

/// Everything the keeper thread and the generator's owner share.
struct Keeper<C: Clock> {
    generator: Generator<C>,
    store: Arc<dyn LeaseStore>,
    range: WorkerRange,
    timing: Timing,
    claim: Mutex<Option<Box<dyn Claim>>>,
    marks: Marks,
    counters: Counters,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl<C: Clock> Keeper<C> {
    fn lock_claim(&self) -> MutexGuard<'_, Option<Box<dyn Claim>>> {
        lock(&self.claim)
    }

    /// Publishes a proven lease: IDs up to the earlier of the mark and the validity's end
    /// (measured from when the request was sent) minus the margin.
    fn grant(&self, datacenter: u64, worker: u64, sent_unix_ms: u64, mark_unix_ms: u64) {
        let ceiling = self.ceiling(sent_unix_ms, mark_unix_ms);
        self.generator.set_tenure(datacenter, worker, ceiling);
    }

    /// The ceiling of a proven lease; notes when the lease ends at the earliest.
    fn ceiling(&self, sent_unix_ms: u64, mark_unix_ms: u64) -> u64 {
        let lease_end = sent_unix_ms.saturating_add(millis(self.timing.ttl));
        self.marks
            .lease_end_unix_ms
            .store(lease_end, Ordering::Relaxed);
        let valid_until = lease_end.saturating_sub(millis(self.timing.margin));
        // The ceiling is exclusive; the mark is the last millisecond that may be used.
        valid_until.min(mark_unix_ms.saturating_add(1))
    }

    /// Waits until the clock reads after the previous holder's mark, so the first ID does
    /// not fail with a clock-behind error; gives up if that is further than `limit` away.
    /// Renews `claim` with `mark` every renewal interval meanwhile, so that a wait as long
    /// as a TTL never lets the claim's own lease run out (etcd).
    fn wait_past(
        &self,
        previous: Option<u64>,
        limit: Duration,
        claim: &mut dyn Claim,
        mark: u64,
    ) -> Result<(), Error> {
        let Some(previous) = previous else {
            return Ok(());
        };
        let mut next_renewal = Instant::now() + self.timing.renew_every;
        let behind_ms = previous
            .saturating_add(1)
            .saturating_sub(self.generator.clock().now_unix_ms());
        if behind_ms > millis(limit) {
            return Err(Error::ClockBehindMark { behind_ms });
        }
        let deadline = Instant::now() + limit;
        while self.generator.clock().now_unix_ms() <= previous {
            if Instant::now() >= deadline {
                return Err(Error::ClockBehindMark {
                    behind_ms: previous
                        .saturating_add(1)
                        .saturating_sub(self.generator.clock().now_unix_ms()),
                });
            }
            if Instant::now() >= next_renewal {
                claim.renew(mark)?;
                next_renewal = Instant::now() + self.timing.renew_every;
            }
            // A release while the keeper waits here must not wait for the mark.
            if *lock(&self.stop) {
                return Err(Error::LeaseStore {
                    reason: "released while waiting for the previous holder's mark".to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    fn run(&self) {
        let mut next_attempt = Instant::now() + self.timing.renew_every;
        let mut retry = RETRY_FIRST;
        loop {
            {
                let mut stop = lock(&self.stop);
                loop {
                    if *stop {
                        return;
                    }
                    let now = Instant::now();
                    if now >= next_attempt {
                        break;
                    }
                    stop = self
                        .wake
                        .wait_timeout(stop, next_attempt - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
            let succeeded = if self.counters.state.load(Ordering::Relaxed) == STATE_LOST {
                self.reacquire()
            } else {
                self.renew()
            };
            if succeeded {
                retry = RETRY_FIRST;
                next_attempt = Instant::now() + self.timing.renew_every;
            } else {
                next_attempt = Instant::now() + retry;
                retry = (retry * 2).min(self.timing.renew_every);
            }
        }
    }

    fn renew(&self) -> bool {
        let mut claim = self.lock_claim();
        let Some(held) = claim.as_mut() else {
            return false;
        };
        let sent_unix_ms = self.generator.clock().now_unix_ms();
        let mark = sent_unix_ms
            .saturating_add(millis(self.timing.ttl))
            .max(self.marks.written_unix_ms.load(Ordering::Relaxed));
        match held.renew(mark) {
            Ok(()) => {
                self.marks.written_unix_ms.store(mark, Ordering::Relaxed);
                self.grant(held.datacenter(), held.worker(), sent_unix_ms, mark);
                self.counters.renewals.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(Error::LeaseLost { datacenter, worker }) => {
                // Stop at once: someone else may hold the number now.
                self.generator.set_tenure(datacenter, worker, 0);
                self.counters.state.store(STATE_LOST, Ordering::Relaxed);
                self.counters
                    .renewal_failures
                    .fetch_add(1, Ordering::Relaxed);
                log::error!(
                    "idgen: worker {worker} of datacenter {datacenter} was lost; \
                     taking another number from {}",
                    self.range
                );
                *claim = None;
                false
            }
            Err(error) => {
                self.counters
                    .renewal_failures
                    .fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "idgen: renewing worker {} of datacenter {} failed ({error}); {} ms of \
                     validity left",
                    held.worker(),
                    held.datacenter(),
                    self.valid_for_ms()
                );
                false
            }
        }
    }

    /// Takes a new number after the old one was lost, and moves the generator onto it.
    fn reacquire(&self) -> bool {
        let sent_unix_ms = self.generator.clock().now_unix_ms();
        let failed = |error: Error| {
            self.counters
                .renewal_failures
                .fetch_add(1, Ordering::Relaxed);
            log::warn!("idgen: taking a new worker number failed: {error}");
            false
        };
        let (mut claim, previous) = match take_number(
            &*self.store,
            &self.range,
            self.generator.clock(),
            &self.timing,
        ) {
            Ok(taken) => taken,
            Err(error) => return failed(error),
        };
        // Our own IDs so far must stay below every later one too.
        let own = self
            .generator
            .high_water_mark()
            .map_or(0, |id| self.generator.decode(id).unix_ms);
        let mark = sent_unix_ms
            .saturating_add(millis(self.timing.ttl))
            .max(previous.unwrap_or(0))
            .max(own);
        let moved = claim
            .renew(mark)
            .and_then(|()| self.wait_past(previous, self.timing.startup_wait, &mut *claim, mark))
            .and_then(|()| {
                // Validity counts from after the wait.
                let sent_unix_ms = self.generator.clock().now_unix_ms();
                let renewed = sent_unix_ms
                    .saturating_add(millis(self.timing.ttl))
                    .max(mark);
                claim.renew(renewed)?;
                self.marks.written_unix_ms.store(renewed, Ordering::Relaxed);
                let ceiling = self.ceiling(sent_unix_ms, renewed);
                // The state moves past the previous mark before the new node is published.
                self.generator.move_to(
                    claim.datacenter(),
                    claim.worker(),
                    previous.unwrap_or(0),
                    ceiling,
                )
            });
        if let Err(error) = moved {
            // Nothing was issued as this number: its previous mark (never lower) is enough.
            let _ = claim.release(previous.unwrap_or(0));
            return failed(error);
        }
        self.marks
            .previous_unix_ms
            .store(previous.unwrap_or(0), Ordering::Relaxed);
        log::info!(
            "idgen: now issuing as worker {} of datacenter {}",
            claim.worker(),
            claim.datacenter()
        );
        *self.lock_claim() = Some(claim);
        self.counters.state.store(STATE_HELD, Ordering::Relaxed);
        self.counters.reacquisitions.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn release(&self) -> Result<(), Error> {
        let (datacenter, worker) = (self.generator.datacenter(), self.generator.worker());
        self.generator.set_tenure(datacenter, worker, 0);
        self.counters.state.store(STATE_RELEASED, Ordering::Relaxed);
        let Some(mut claim) = self.lock_claim().take() else {
            return Ok(());
        };
        // Nothing is issued past this point, so the real high-water mark is a safe promise,
        // and a successor does not have to wait for the one written a TTL ahead.
        let used = self
            .generator
            .high_water_mark()
            .map_or(0, |id| self.generator.decode(id).unix_ms);
        claim.release(used.max(self.marks.previous_unix_ms.load(Ordering::Relaxed)))
    }

    fn valid_for_ms(&self) -> i64 {
        let ceiling = self.generator.ceiling_unix_ms() as i64;
        ceiling - self.generator.clock().now_unix_ms() as i64
    }

    fn stats(&self) -> LeaseStats {
        let valid_for_ms = self.valid_for_ms();
        let state = match self.counters.state.load(Ordering::Relaxed) {
            STATE_LOST => LeaseState::Lost,
            STATE_RELEASED => LeaseState::Released,
            _ if valid_for_ms <= 0 => LeaseState::Expired,
            _ => LeaseState::Valid,
        };
        LeaseStats {
            state,
            datacenter: self.generator.datacenter(),
            worker: self.generator.worker(),
            renewals: self.counters.renewals.load(Ordering::Relaxed),
            renewal_failures: self.counters.renewal_failures.load(Ordering::Relaxed),
            reacquisitions: self.counters.reacquisitions.load(Ordering::Relaxed),
            valid_for_ms,
            valid_until_unix_ms: self.generator.ceiling_unix_ms(),
            lease_end_unix_ms: self.marks.lease_end_unix_ms.load(Ordering::Relaxed),
            mark_unix_ms: self.marks.written_unix_ms.load(Ordering::Relaxed),
            previous_mark_unix_ms: match self.marks.previous_unix_ms.load(Ordering::Relaxed) {
                0 => None,
                mark => Some(mark),
            },
        }
    }
}

/// The first retry after a failed renewal; each further one waits twice as long, up to the
/// renewal interval.
const RETRY_FIRST: Duration = Duration::from_millis(50);

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Locks a mutex of the keeper's; a panic elsewhere while holding it leaves plain data
/// behind, so the lock is taken over rather than turned into a second panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
