//! The Snowflake [`Generator`]: a [`Node`] gate over the shared engine's [`Core`], turning
//! its slots into [`Id`]s of one (datacenter, worker) node, one at a time or in batches.

use std::fmt;

use crate::DefaultClock;
use crate::clock::Clock;
use crate::engine::{Core, Gate, Stats, Waiting};
use crate::error::Error;

use super::id::Id;
use super::layout::{IdParts, Layout};
use super::node::{Node, Tenure};
use super::resume::{Mark, first_slot_after};
use crate::sync::Ordering;

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
    pub(super) core: Core<C, Node>,
    /// The ID this generator was resumed after, if any: part of its high-water mark.
    pub(super) resumed_after: Option<Id>,
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

    /// Up to `want` IDs of one millisecond, or [`Error::WouldBlock`] where that would wait
    /// (counted as a wait unless `again`: the call was refused before): the async calls'
    /// step.
    #[cfg(feature = "tokio")]
    pub(super) fn try_run(
        &self,
        want: usize,
        again: bool,
    ) -> Result<impl ExactSizeIterator<Item = Id> + use<C>, Error> {
        let waiting = if again {
            Waiting::RefusedAgain
        } else {
            Waiting::Refused
        };
        let (first, count, tenure) = self.core.reserve(want as u64, waiting, 0)?;
        let first_id = self.node().compose(first, tenure).as_u64();
        Ok(IdRun {
            next: first_id,
            end: first_id + count,
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
        self.core.gate()
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
            .saturating_sub(self.core.epoch_unix_ms())
            .min(self.core.max_elapsed_ms() + 1);
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
        self.core.epoch_unix_ms() + self.tenure().ceiling_ms(self.node().time_shift)
    }

    /// Moves the generator to another worker number whose previous holder's IDs are all
    /// dated at or before `past_unix_ms`: first the state past that mark and into a
    /// millisecond of its own, then (Release) the new node with its ceiling. See
    /// `Core::reserve` for why this order is enough.
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

    /// The largest ID this generator has used or stands behind: issued, reserved by a batch,
    /// skipped over, or covered by its resume mark (the ID it was resumed after, or, after
    /// [`Builder::resume_after_unix_ms`](crate::Builder::resume_after_unix_ms), the last ID of that millisecond on this node).
    /// Every ID issued later is greater, so it is the mark to persist and to
    /// [`Builder::resume_after`](crate::Builder::resume_after) on a restart. `None` only before the first ID of a
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
        self.core.clock()
    }

    /// The slow-path counters so far.
    pub fn stats(&self) -> Stats {
        self.core.stats()
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
