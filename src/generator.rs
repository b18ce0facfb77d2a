//! The generator: one packed atomic state advanced by compare-and-swap. This file holds the
//! crate's only CAS loop, [`Core::reserve`], shared by every kind of ID; the decisions it
//! applies live in [`crate::state`].

use std::fmt;

use crossbeam_utils::CachePadded;

use crate::DefaultClock;
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::error::{Error, Field};
use crate::id::Id;
use crate::layout::{IdParts, Layout};
use crate::state::{FastPath, Rules, Step, Tenure};
use crate::sync::{AtomicU64, Ordering};

/// Default of [`Builder::clock_back_tolerance_ms`].
pub const DEFAULT_CLOCK_BACK_TOLERANCE_MS: u64 = 10;

/// Issues unique, strictly increasing IDs for one (datacenter, worker) node.
///
/// Share one generator between threads through `&self` (an `Arc`, a `static`, a
/// reference): its whole state is one cache-padded `AtomicU64`, advanced with
/// compare-and-swap, so threads never take a lock. See the crate docs for the guarantees
/// and [`crate::design`] for why they hold.
///
/// ```
/// use idgen::Generator;
///
/// let generator = Generator::builder().datacenter(1).worker(7).build()?;
/// let a = generator.next_id()?;
/// let b = generator.next_id()?;
/// assert!(a < b);
/// assert_eq!(generator.decode(b).worker, 7);
/// # Ok::<(), idgen::Error>(())
/// ```
pub struct Generator<C: Clock = DefaultClock> {
    core: Core<C, Node>,
    /// The ID this generator was resumed after, if any: part of its high-water mark.
    resumed_after: Option<Id>,
}

/// What every kind of ID shares: the packed (millisecond, sequence) state, the rules of its
/// transition, the clock, what the kind checks besides the clock, and the slow-path
/// counters. [`Core::reserve`] is the crate's only CAS loop; the Snowflake [`Generator`]
/// and the 128-bit kinds (`counted.rs`) are thin layers over it.
pub(crate) struct Core<C, G> {
    /// The next free (millisecond, sequence) slot: see `state.rs`. On a cache line of its own,
    /// so that neither the read-only fields below nor neighbouring data ping-pong with it.
    state: CachePadded<AtomicU64>,
    /// `rules`' common case, checked by [`Core::try_issue_one`] before anything else.
    fast: FastPath,
    rules: Rules,
    epoch_unix_ms: u64,
    clock: C,
    /// Read with every read of the state, so it sits with the read-only fields: one line
    /// serves the whole fast path.
    gate: G,
    counters: CachePadded<Counters>,
}

/// What a kind checks besides the clock before it takes slots. `read` runs after every read
/// of the state and `admit` before every swap, on the reading that goes with the state (see
/// [`Core::reserve`]). The 128-bit kinds check nothing: `()`.
pub(crate) trait Gate {
    type Pass: Copy;
    fn read(&self) -> Self::Pass;
    fn admit(&self, pass: Self::Pass, first_slot: u64) -> Result<(), Error>;
}

impl Gate for () {
    type Pass = ();

    #[inline]
    fn read(&self) {}

    #[inline]
    fn admit(&self, _: (), _: u64) -> Result<(), Error> {
        Ok(())
    }
}

/// The Snowflake generator's gate: the node it issues as, its lease ceiling, and how a slot
/// becomes an ID on that node.
struct Node {
    /// The node and its ceiling, packed (see [`Tenure`]). Only a lease keeper writes it, and
    /// rarely.
    tenure: AtomicU64,
    sequence_bits: u32,
    /// Where the time field starts in an ID.
    time_shift: u32,
    /// The datacenter and worker fields of an ID, in place.
    node_mask: u64,
    sequence_mask: u64,
    layout: Layout,
}

impl Gate for Node {
    type Pass = Tenure;

    #[inline]
    fn read(&self) -> Tenure {
        Tenure(self.tenure.load(Ordering::Acquire))
    }

    #[inline]
    fn admit(&self, tenure: Tenure, first_slot: u64) -> Result<(), Error> {
        if tenure.allows(self.compose(first_slot, tenure).as_u64()) {
            Ok(())
        } else {
            Err(self.lease_expired(tenure))
        }
    }
}

impl Node {
    /// The ID for a packed slot on the tenure's node.
    #[inline]
    fn compose(&self, slot: u64, tenure: Tenure) -> Id {
        let elapsed_ms = slot >> self.sequence_bits;
        Id::from_raw(
            (elapsed_ms << self.time_shift)
                | tenure.node_bits(self.node_mask)
                | (slot & self.sequence_mask),
        )
    }

    fn node_fields(&self, tenure: Tenure) -> (u64, u64) {
        let node = tenure.node_bits(self.node_mask) >> self.sequence_bits;
        (
            node >> self.layout.worker_bits(),
            node & self.layout.max_worker(),
        )
    }

    #[cold]
    fn lease_expired(&self, tenure: Tenure) -> Error {
        let (datacenter, worker) = self.node_fields(tenure);
        Error::LeaseExpired { datacenter, worker }
    }
}

/// Slow-path events, counted where they happen; the fast path never touches them.
struct Counters {
    sequence_exhausted: AtomicU64,
    clock_behind: AtomicU64,
    refused_clock_behind: AtomicU64,
    refused_lease: AtomicU64,
    refused_time_exhausted: AtomicU64,
}

/// A snapshot of a generator's slow-path counters ([`Generator::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Calls that found their millisecond's sequence used up and waited for the next
    /// millisecond (or, from a `try_` method, returned [`Error::WouldBlock`]).
    pub sequence_exhausted: u64,
    /// Calls that found the clock behind the last issued millisecond, within tolerance, and
    /// went on in that millisecond or waited.
    pub clock_behind: u64,
    /// Calls refused with an error by the generator's rules: the sum of the `refused_*`
    /// fields. (A UUIDv7 or ULID call that fails because the operating system's random
    /// source does, [`Error::RandomSource`], is not counted here.)
    pub refused: u64,
    /// Calls refused because the clock was wrong: behind the last issued millisecond beyond
    /// the tolerance ([`Error::ClockMovedBackwards`]) or before the layout's epoch
    /// ([`Error::BeforeEpoch`]).
    pub refused_clock_behind: u64,
    /// Calls refused because the lease was not valid for the ID ([`Error::LeaseExpired`]).
    pub refused_lease: u64,
    /// Calls refused because the layout's time field has run out ([`Error::TimeExhausted`]).
    pub refused_time_exhausted: u64,
}

impl std::ops::Add for Stats {
    type Output = Stats;

    /// Field by field, e.g. to total the shards of a sharded generator.
    fn add(self, other: Stats) -> Stats {
        Stats {
            sequence_exhausted: self.sequence_exhausted + other.sequence_exhausted,
            clock_behind: self.clock_behind + other.clock_behind,
            refused: self.refused + other.refused,
            refused_clock_behind: self.refused_clock_behind + other.refused_clock_behind,
            refused_lease: self.refused_lease + other.refused_lease,
            refused_time_exhausted: self.refused_time_exhausted + other.refused_time_exhausted,
        }
    }
}

/// Whether a call may wait for the clock.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    Allowed,
    Refused,
}

/// Where the builder gets its clock: the default is only built if none was given, because
/// the first `quanta::Clock` of a process calibrates.
#[derive(Clone)]
pub(crate) enum ClockSource<C> {
    Default(fn() -> C),
    Given(C),
}

impl<C> ClockSource<C> {
    /// The clock given, or the default built now.
    pub(crate) fn into_clock(self) -> C {
        match self {
            ClockSource::Default(make) => make(),
            ClockSource::Given(clock) => clock,
        }
    }
}

impl<C: fmt::Debug> fmt::Debug for ClockSource<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockSource::Default(_) => f.write_str("default"),
            ClockSource::Given(clock) => clock.fmt(f),
        }
    }
}

/// Where a resumed generator starts: everything up to this was issued by an earlier holder.
#[derive(Debug, Clone, Copy)]
enum Mark {
    Id(Id),
    UnixMs(u64),
}

/// Configures and builds a [`Generator`]; start from [`Generator::builder`].
#[derive(Clone)]
pub struct Builder<C> {
    layout: Layout,
    datacenter: u64,
    worker: u64,
    clock: ClockSource<C>,
    tolerance_ms: u64,
    borrow_ms: u64,
    mark: Option<Mark>,
}

impl Generator<DefaultClock> {
    /// A builder with the default layout, node 0/0, the [`DefaultClock`], a clock
    /// step-back tolerance of [`DEFAULT_CLOCK_BACK_TOLERANCE_MS`] and no borrowing.
    pub fn builder() -> Builder<DefaultClock> {
        Builder {
            layout: Layout::DEFAULT,
            datacenter: 0,
            worker: 0,
            clock: ClockSource::Default(DefaultClock::new),
            tolerance_ms: DEFAULT_CLOCK_BACK_TOLERANCE_MS,
            borrow_ms: 0,
            mark: None,
        }
    }
}

impl<C: Clock> Builder<C> {
    /// The bit layout (default: [`Layout::DEFAULT`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The datacenter number; checked against the layout by [`Builder::build`].
    pub fn datacenter(mut self, datacenter: u64) -> Self {
        self.datacenter = datacenter;
        self
    }

    /// The worker number; checked against the layout by [`Builder::build`].
    pub fn worker(mut self, worker: u64) -> Self {
        self.worker = worker;
        self
    }

    /// The clock to read (default: the process's [`DefaultClock`]; pass a
    /// [`MonotonicClock`](crate::MonotonicClock) where no thread may be started).
    pub fn clock<D: Clock>(self, clock: D) -> Builder<D> {
        Builder {
            layout: self.layout,
            datacenter: self.datacenter,
            worker: self.worker,
            clock: ClockSource::Given(clock),
            tolerance_ms: self.tolerance_ms,
            borrow_ms: self.borrow_ms,
            mark: self.mark,
        }
    }

    /// How far the clock may be behind the last issued millisecond before calls are
    /// refused with [`Error::ClockMovedBackwards`]. Within it, calls go on in the last
    /// millisecond while its sequence lasts, then wait for the clock. Default:
    /// [`DEFAULT_CLOCK_BACK_TOLERANCE_MS`]; 0 refuses at once.
    pub fn clock_back_tolerance_ms(mut self, ms: u64) -> Self {
        self.tolerance_ms = ms;
        self
    }

    /// Lets a generator whose millisecond is used up go on in up to `ms` milliseconds ahead
    /// of the clock instead of waiting. Bursts then run above the per-millisecond ceiling;
    /// IDs may carry a time up to `ms` in the future. Default 0: never ahead of the clock.
    /// The clock-back check allows for it: a call is refused once the clock is behind the
    /// last issued millisecond by more than tolerance + borrow.
    pub fn borrow_ahead_ms(mut self, ms: u64) -> Self {
        self.borrow_ms = ms;
        self
    }

    /// Resumes after an ID issued by an earlier holder of this node: every ID the new
    /// generator issues is greater than `last`.
    pub fn resume_after(mut self, last: Id) -> Self {
        self.mark = Some(Mark::Id(last));
        self
    }

    /// Resumes after a millisecond (Unix) in which an earlier holder of this node may have
    /// issued IDs: the new generator starts in the millisecond after it.
    pub fn resume_after_unix_ms(mut self, unix_ms: u64) -> Self {
        self.mark = Some(Mark::UnixMs(unix_ms));
        self
    }

    /// Builds the clock now (if none was given), so that clones of this builder share it.
    #[cfg(not(idgen_loom))]
    pub(crate) fn resolve_clock(self) -> Self {
        match self.clock {
            ClockSource::Default(make) => Builder {
                clock: ClockSource::Given(make()),
                ..self
            },
            ClockSource::Given(_) => self,
        }
    }

    /// The clock, built now if none was given, and the layout.
    #[cfg(not(idgen_loom))]
    pub(crate) fn resolved_parts(self) -> (Self, C, Layout)
    where
        C: Clone,
    {
        let resolved = self.resolve_clock();
        let clock = match &resolved.clock {
            ClockSource::Given(clock) => clock.clone(),
            ClockSource::Default(make) => make(),
        };
        let layout = resolved.layout;
        (resolved, clock, layout)
    }

    /// Checks the configuration and builds the generator.
    ///
    /// Fails with [`Error::FieldOutOfRange`] for a datacenter or worker number the layout
    /// cannot hold, [`Error::EpochInFuture`] when the layout's epoch is after the clock, and
    /// [`Error::TimeExhausted`] when the resume mark leaves no millisecond to issue in.
    pub fn build(self) -> Result<Generator<C>, Error> {
        let layout = self.layout;
        for (field, value, max) in [
            (Field::Datacenter, self.datacenter, layout.max_datacenter()),
            (Field::Worker, self.worker, layout.max_worker()),
        ] {
            if value > max {
                return Err(Error::FieldOutOfRange { field, value, max });
            }
        }
        let clock = self.clock.into_clock();
        let now_unix_ms = clock.now_unix_ms();
        layout.check_epoch(now_unix_ms)?;
        if now_unix_ms > layout.last_unix_ms() {
            return Err(Error::TimeExhausted {
                last_unix_ms: layout.last_unix_ms(),
            });
        }
        let node_bits = layout.node_bits(self.datacenter, self.worker);
        let tenure = Tenure::new(layout.max_elapsed_ms() + 1, node_bits, layout.time_shift());
        let next_free = match self.mark {
            None => 0,
            Some(mark) => first_slot_after(&layout, node_bits, mark)?,
        };
        let rules = Rules {
            sequence_bits: layout.sequence_bits(),
            max_elapsed_ms: layout.max_elapsed_ms(),
            tolerance_ms: self.tolerance_ms,
            borrow_ms: self.borrow_ms,
        };
        let node = Node {
            tenure: AtomicU64::new(tenure.0),
            sequence_bits: layout.sequence_bits(),
            time_shift: layout.time_shift(),
            node_mask: ((1 << layout.time_shift()) - 1) & !layout.max_sequence(),
            sequence_mask: layout.max_sequence(),
            layout,
        };
        Ok(Generator {
            core: Core::new(rules, layout.epoch_unix_ms(), clock, node, next_free),
            resumed_after: match self.mark {
                Some(Mark::Id(id)) => Some(id),
                _ => None,
            },
        })
    }
}

/// The lowest packed slot whose ID, on this node, is above everything the mark covers.
fn first_slot_after(layout: &Layout, node_bits: u64, mark: Mark) -> Result<u64, Error> {
    let bits = layout.sequence_bits();
    let exhausted = Error::TimeExhausted {
        last_unix_ms: layout.last_unix_ms(),
    };
    let slot = match mark {
        Mark::UnixMs(unix_ms) => match unix_ms.checked_sub(layout.epoch_unix_ms()) {
            // Nothing can have been issued before the epoch.
            None => 0,
            Some(elapsed) if elapsed >= layout.max_elapsed_ms() => return Err(exhausted),
            Some(elapsed) => (elapsed + 1) << bits,
        },
        Mark::Id(last) => {
            let raw = last.as_u64();
            let elapsed = raw >> layout.time_shift();
            let their_node = raw & !layout.max_sequence() & ((1 << layout.time_shift()) - 1);
            let sequence = raw & layout.max_sequence();
            if node_bits == their_node {
                ((elapsed << bits) | sequence) + 1
            } else if node_bits > their_node {
                // Our IDs in the same millisecond already sort above theirs.
                elapsed << bits
            } else {
                (elapsed + 1) << bits
            }
        }
    };
    if slot > (layout.max_elapsed_ms() << bits | layout.max_sequence()) {
        return Err(exhausted);
    }
    Ok(slot)
}

impl<C: Clock> Generator<C> {
    /// The next ID.
    ///
    /// Waits (spinning, then yielding) when this millisecond's sequence is used up, or when
    /// the clock is behind the last issued millisecond within the tolerance and that
    /// millisecond is used up. Fails with [`Error::ClockMovedBackwards`] when the clock is
    /// further behind, and with [`Error::TimeExhausted`] past the layout's last instant.
    /// A failed call issues nothing and changes no state, with one exception: on a leased
    /// generator, a call that finds the lease past its ceiling may leave one ID unused (a
    /// gap), because the fast path checks the ceiling after its compare-and-swap.
    #[inline]
    pub fn next_id(&self) -> Result<Id, Error> {
        // Snowflake sequences start at 0 in every millisecond.
        if let Some((first, tenure)) = self.core.try_issue_one(|| 0) {
            let id = self.node().compose(first, tenure);
            if tenure.allows(id.as_u64()) {
                return Ok(id);
            }
            // Past the ceiling: the slot just taken is left unused (a gap, never an ID).
            return Err(self.core.refuse(self.node().lease_expired(tenure)));
        }
        self.next_id_slow()
    }

    #[cold]
    #[inline(never)]
    fn next_id_slow(&self) -> Result<Id, Error> {
        let (first, _, tenure) = self.core.reserve(1, Waiting::Allowed, 0)?;
        Ok(self.node().compose(first, tenure))
    }

    /// As [`Generator::next_id`], but never waits: where it would, it returns
    /// [`Error::WouldBlock`] with the time to wait. For event loops that must not block.
    pub fn try_next_id(&self) -> Result<Id, Error> {
        let (first, _, tenure) = self.core.reserve(1, Waiting::Refused, 0)?;
        Ok(self.node().compose(first, tenure))
    }

    /// `n` IDs in increasing order.
    ///
    /// Each compare-and-swap reserves as many IDs as the current millisecond still has, so
    /// a batch costs one atomic operation per millisecond it spans, not one per ID. Waits
    /// like [`Generator::next_id`] when it needs another millisecond. On an error the whole
    /// batch fails; IDs reserved for it are never issued again (they leave a gap).
    ///
    /// ```
    /// let generator = idgen::Generator::builder().build()?;
    /// let ids = generator.next_ids(10_000)?; // more than one millisecond holds
    /// assert_eq!(ids.len(), 10_000);
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn next_ids(&self, n: usize) -> Result<Vec<Id>, Error> {
        let mut ids = Vec::new();
        ids.try_reserve_exact(n)
            .map_err(|_| Error::BatchTooLarge { requested: n })?;
        self.reserve_each(n, |run| ids.extend(run))?;
        Ok(ids)
    }

    /// Fills `out` with IDs in increasing order; otherwise as [`Generator::next_ids`].
    pub fn fill_ids(&self, out: &mut [Id]) -> Result<(), Error> {
        let mut rest = &mut out[..];
        self.reserve_each(rest.len(), |run| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(run.len());
            for (slot, id) in head.iter_mut().zip(run) {
                *slot = id;
            }
            rest = tail;
        })
    }

    /// Reserves `n` slots, millisecond by millisecond, handing each run of IDs to `sink`.
    fn reserve_each(&self, n: usize, mut sink: impl FnMut(IdRun)) -> Result<(), Error> {
        self.core.reserve_runs(
            n,
            || Ok(0),
            |first, count, tenure| {
                // Inside one millisecond the sequence is the lowest field, so the IDs of a
                // run are consecutive integers.
                let first_id = self.node().compose(first, tenure).as_u64();
                sink(IdRun {
                    next: first_id,
                    end: first_id + count,
                });
                Ok(())
            },
        )
    }

    #[inline]
    fn node(&self) -> &Node {
        &self.core.gate
    }

    #[inline]
    fn tenure(&self) -> Tenure {
        self.node().read()
    }

    /// Lets the generator issue IDs as `(datacenter, worker)` in milliseconds before
    /// `ceiling_unix_ms` only. Called by a lease keeper after every renewal (same node, a
    /// later ceiling), when the lease runs out or is lost (ceiling 0), and after taking a
    /// new worker number (through [`Generator::move_to`]).
    pub(crate) fn set_tenure(&self, datacenter: u64, worker: u64, ceiling_unix_ms: u64) {
        let ceiling_ms = ceiling_unix_ms
            .saturating_sub(self.core.epoch_unix_ms)
            .min(self.core.rules.max_elapsed_ms + 1);
        let node = self.node();
        let node_bits = node.layout.node_bits(datacenter, worker);
        node.tenure.store(
            Tenure::new(ceiling_ms, node_bits, node.time_shift).0,
            Ordering::Release,
        );
    }

    #[cfg(not(idgen_loom))]
    /// The first Unix millisecond in which this generator may no longer issue an ID.
    pub(crate) fn ceiling_unix_ms(&self) -> u64 {
        self.core.epoch_unix_ms + self.tenure().ceiling_ms(self.node().time_shift)
    }

    /// Moves the generator to another worker number whose previous holder's IDs are all
    /// dated at or before `past_unix_ms`: first the state past that mark and into a
    /// millisecond of its own, then (Release) the new node with its ceiling. See
    /// [`Core::reserve`] for why this order is enough.
    ///
    /// The fresh millisecond matters when the new node is a lower number: inside one
    /// millisecond a lower node's IDs sort below a higher node's, so going on in the
    /// millisecond of the last ID (which can lie ahead of both the clock and the mark when
    /// borrowing ahead) would issue a smaller ID than the one before. A call that still
    /// holds the old tenure cannot take a slot of the fresh millisecond either: its
    /// compare-and-swap expected a state from before the move, fails, and the retry reads
    /// the tenure again (ceiling 0, or the new node).
    pub(crate) fn move_to(
        &self,
        datacenter: u64,
        worker: u64,
        past_unix_ms: u64,
        ceiling_unix_ms: u64,
    ) -> Result<(), Error> {
        let floor = first_slot_after(&self.node().layout, 0, Mark::UnixMs(past_unix_ms))?;
        // Nothing more as the old node (the keeper has done this already when a number was
        // lost): a call that reads the tenure after the move below sees at least this.
        let (old_datacenter, old_worker) = self.node().node_fields(self.tenure());
        self.set_tenure(old_datacenter, old_worker, 0);
        self.core.move_to_fresh_ms(floor);
        self.set_tenure(datacenter, worker, ceiling_unix_ms);
        Ok(())
    }

    /// For the loom models only: what a lease keeper does to the tenure.
    #[cfg(idgen_loom)]
    #[doc(hidden)]
    pub fn loom_set_tenure(&self, datacenter: u64, worker: u64, ceiling_unix_ms: u64) {
        self.set_tenure(datacenter, worker, ceiling_unix_ms);
    }

    /// For the loom models only: a lease keeper moving to a new worker number.
    #[cfg(idgen_loom)]
    #[doc(hidden)]
    pub fn loom_move_to(
        &self,
        worker: u64,
        past_unix_ms: u64,
        ceiling_unix_ms: u64,
    ) -> Result<(), Error> {
        self.move_to(self.datacenter(), worker, past_unix_ms, ceiling_unix_ms)
    }

    /// The largest ID this generator has used or stands behind: issued, reserved by a batch,
    /// skipped over, or covered by its resume mark (the ID it was resumed after, or, after
    /// [`Builder::resume_after_unix_ms`], the last ID of that millisecond on this node).
    /// Every ID issued later is greater, so it is the mark to persist and to
    /// [`Builder::resume_after`] on a restart. `None` only before the first ID of a
    /// generator built with no resume mark at all.
    pub fn high_water_mark(&self) -> Option<Id> {
        let tenure = self.tenure();
        let used = self
            .core
            .last_used_slot()
            .map(|slot| self.node().compose(slot, tenure));
        used.max(self.resumed_after)
    }

    /// Splits an ID of this generator's layout into its fields.
    pub fn decode(&self, id: Id) -> IdParts {
        self.node().layout.decode(id)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.node().layout
    }

    /// The datacenter number (for a leased generator: of the lease held now).
    pub fn datacenter(&self) -> u64 {
        self.node().node_fields(self.tenure()).0
    }

    /// The worker number (for a leased generator: of the lease held now).
    pub fn worker(&self) -> u64 {
        self.node().node_fields(self.tenure()).1
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.core.clock
    }

    /// The slow-path counters so far.
    pub fn stats(&self) -> Stats {
        self.core.stats()
    }
}

impl<C: Clock, G: Gate> Core<C, G> {
    pub(crate) fn new(rules: Rules, epoch_unix_ms: u64, clock: C, gate: G, next_free: u64) -> Self {
        Core {
            state: CachePadded::new(AtomicU64::new(next_free)),
            fast: rules.fast_path(),
            rules,
            epoch_unix_ms,
            clock,
            gate,
            counters: CachePadded::new(Counters {
                sequence_exhausted: AtomicU64::new(0),
                clock_behind: AtomicU64::new(0),
                refused_clock_behind: AtomicU64::new(0),
                refused_lease: AtomicU64::new(0),
                refused_time_exhausted: AtomicU64::new(0),
            }),
        }
    }

    /// One attempt at the common case, small enough to inline into the caller: the slot
    /// and the gate's reading when the fast path applies and the first swap is won,
    /// `None` for [`Core::reserve`] to decide. A new millisecond starts at slot `seed()`
    /// (called only then). The gate's check is left to the caller, after the swap.
    #[inline]
    pub(crate) fn try_issue_one(&self, seed: impl FnOnce() -> u64) -> Option<(u64, G::Pass)> {
        // The state first, then the gate: see `reserve`.
        let state = self.state.load(Ordering::Acquire);
        let pass = self.gate.read();
        // A reading before the epoch wraps to a huge value, which the fast path defers.
        let now_ms = self.clock.recent_unix_ms().wrapping_sub(self.epoch_unix_ms);
        let first = self.fast.issue_one(state, now_ms, seed)?;
        self.state
            .compare_exchange_weak(state, first + 1, Ordering::Release, Ordering::Acquire)
            .ok()?;
        Some((first, pass))
    }

    /// Reserves `n` slots, millisecond by millisecond, handing each run (first slot, count,
    /// gate reading) to `sink`; a new millisecond starts at the slot `seed` gives for it.
    pub(crate) fn reserve_runs(
        &self,
        n: usize,
        mut seed: impl FnMut() -> Result<u64, Error>,
        mut sink: impl FnMut(u64, u64, G::Pass) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut remaining = n as u64;
        while remaining > 0 {
            let (first, count, pass) = self.reserve(remaining, Waiting::Allowed, seed()?)?;
            sink(first, count, pass)?;
            remaining -= count;
        }
        Ok(())
    }

    /// The CAS loop. Reserves between 1 and `want` slots inside one millisecond and returns
    /// the first slot, the count, and the gate's reading that admitted them. A millisecond
    /// nothing was issued in starts at slot `seed` (see `state.rs`).
    ///
    /// # Atomic orderings
    ///
    /// Uniqueness needs no ordering at all: every successful compare-and-swap reads the
    /// latest value in the state's modification order and replaces it with a larger one, so
    /// no two calls can reserve the same slot. Acquire on every load of the state and
    /// Release on every successful swap add one promise: a thread that sees a state built
    /// from a clock reading also sees that reading, so with a clock whose readings are
    /// ordered through memory (`ManualClock`, `MonotonicClock`'s catch-up) a call never
    /// mistakes another thread's fresher reading for the clock moving backwards.
    ///
    /// The gate (the Snowflake generator's tenure) is read after the state, every time the
    /// state is read; the check and the IDs use the reading that goes with the state
    /// swapped. A keeper that gives a generator a new node first cuts the old ceiling to 0,
    /// then moves the state into a fresh millisecond past the new node's mark (a swap that
    /// always changes it), then publishes the new tenure with Release. So a call that sees
    /// the new node can only win a swap on the moved state (the publication happened after
    /// the move, and the swap after the reading); a call that read the old tenure after a
    /// state from before the move can only win a swap on that state, before the move (its
    /// ID then lies below the fresh millisecond, and below the old ceiling, which lies below
    /// the mark the old node's next holder starts after); and every read of the tenure after
    /// the moved state sees ceiling 0 or the new node.
    #[inline]
    pub(crate) fn reserve(
        &self,
        want: u64,
        waiting: Waiting,
        seed: u64,
    ) -> Result<(u64, u64, G::Pass), Error> {
        let mut backoff = Backoff::new();
        let mut counted = false;
        // The fast path decides on the clock's cheap reading; anything but `Issue` is decided
        // again on the precise one, so a lagging reading never makes a call wait or fail.
        let mut precise = false;
        let mut state = self.state.load(Ordering::Acquire);
        let mut pass = self.gate.read();
        loop {
            // Read the clock after the state, so the reading is at least as fresh as the
            // one the state was built from.
            let unix_ms = if precise {
                self.clock.now_unix_ms()
            } else {
                self.clock.recent_unix_ms()
            };
            let Some(now_ms) = unix_ms.checked_sub(self.epoch_unix_ms) else {
                if !precise {
                    precise = true;
                    continue;
                }
                return Err(self.refuse(Error::BeforeEpoch {
                    unix_ms,
                    epoch_unix_ms: self.epoch_unix_ms,
                }));
            };
            let (first, next, behind) = match self.rules.advance(state, now_ms, want, seed) {
                Step::Issue { first, next } => (first, next, false),
                _ if !precise => {
                    precise = true;
                    continue;
                }
                Step::IssueBehind { first, next } => (first, next, true),
                Step::Wait {
                    until_ms,
                    clock_behind,
                } => {
                    if !counted {
                        counted = true;
                        let counter = if clock_behind {
                            &self.counters.clock_behind
                        } else {
                            &self.counters.sequence_exhausted
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    if waiting == Waiting::Refused {
                        return Err(Error::WouldBlock {
                            wait_ms: until_ms - now_ms,
                        });
                    }
                    backoff.snooze();
                    state = self.state.load(Ordering::Acquire);
                    pass = self.gate.read();
                    continue;
                }
                Step::ClockBehind { behind_ms } => {
                    return Err(self.refuse(Error::ClockMovedBackwards { behind_ms }));
                }
                Step::Exhausted => {
                    return Err(self.refuse(Error::TimeExhausted {
                        last_unix_ms: self.epoch_unix_ms + self.rules.max_elapsed_ms,
                    }));
                }
            };
            // A fresher reading only lies further past a ceiling.
            self.gate
                .admit(pass, first)
                .map_err(|error| self.refuse(error))?;
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if behind && !counted {
                        self.counters.clock_behind.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok((first, next - first, pass));
                }
                Err(actual) => {
                    state = actual;
                    // The state may have moved because the node did (see `move_to_fresh_ms`).
                    pass = self.gate.read();
                    backoff.spin();
                }
            }
        }
    }

    /// Moves the state to the first slot of the millisecond after the last one used (a
    /// state whose sequence is 0 has used nothing of its millisecond yet), or to `floor` if
    /// that is later. Always a change: a call that read the gate before the move and the
    /// state before this swap then fails its own swap, and reads the gate again.
    pub(crate) fn move_to_fresh_ms(&self, floor: u64) {
        let bits = self.rules.sequence_bits;
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = (((state >> bits) + 1) << bits).max(floor);
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
    }

    /// The last slot issued, reserved or skipped, if any.
    pub(crate) fn last_used_slot(&self) -> Option<u64> {
        self.state.load(Ordering::Acquire).checked_sub(1)
    }

    /// Counts a refusal under its reason and returns it.
    #[cold]
    pub(crate) fn refuse(&self, error: Error) -> Error {
        let counters = &self.counters;
        let counter = match error {
            Error::LeaseExpired { .. } => &counters.refused_lease,
            Error::TimeExhausted { .. } => &counters.refused_time_exhausted,
            // The only others: `ClockMovedBackwards` and `BeforeEpoch`.
            _ => &counters.refused_clock_behind,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        error
    }

    // For the 128-bit kinds, which build their IDs from the slot themselves.
    #[cfg_attr(not(feature = "uuid7-ulid"), allow(dead_code))]
    pub(crate) fn sequence_bits(&self) -> u32 {
        self.rules.sequence_bits
    }

    // For the 128-bit kinds, which build their IDs from the slot themselves.
    #[cfg_attr(not(feature = "uuid7-ulid"), allow(dead_code))]
    pub(crate) fn epoch_unix_ms(&self) -> u64 {
        self.epoch_unix_ms
    }

    // For the 128-bit kinds, which build their IDs from the slot themselves.
    #[cfg_attr(not(feature = "uuid7-ulid"), allow(dead_code))]
    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    pub(crate) fn stats(&self) -> Stats {
        let counters = &*self.counters;
        let refused_clock_behind = counters.refused_clock_behind.load(Ordering::Relaxed);
        let refused_lease = counters.refused_lease.load(Ordering::Relaxed);
        let refused_time_exhausted = counters.refused_time_exhausted.load(Ordering::Relaxed);
        Stats {
            sequence_exhausted: counters.sequence_exhausted.load(Ordering::Relaxed),
            clock_behind: counters.clock_behind.load(Ordering::Relaxed),
            refused: refused_clock_behind + refused_lease + refused_time_exhausted,
            refused_clock_behind,
            refused_lease,
            refused_time_exhausted,
        }
    }
}

/// A run of consecutive IDs inside one millisecond.
struct IdRun {
    next: u64,
    end: u64,
}

impl Iterator for IdRun {
    type Item = Id;

    #[inline]
    fn next(&mut self) -> Option<Id> {
        (self.next < self.end).then(|| {
            self.next += 1;
            Id::from_raw(self.next - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = (self.end - self.next) as usize;
        (len, Some(len))
    }
}

impl ExactSizeIterator for IdRun {}

impl<C: Clock + fmt::Debug> fmt::Debug for Generator<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("layout", self.layout())
            .field("datacenter", &self.datacenter())
            .field("worker", &self.worker())
            .field("high_water_mark", &self.high_water_mark())
            .field("clock", self.clock())
            .field("stats", &self.stats())
            .finish()
    }
}

impl<C: fmt::Debug> fmt::Debug for Builder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("layout", &self.layout)
            .field("datacenter", &self.datacenter)
            .field("worker", &self.worker)
            .field("clock", &self.clock)
            .field("clock_back_tolerance_ms", &self.tolerance_ms)
            .field("borrow_ahead_ms", &self.borrow_ms)
            .field("resume_after", &self.mark)
            .finish()
    }
}
