//! The crate's only compare-and-swap loop, [`Core::reserve`], and what it owns: the packed
//! (millisecond, sequence) state, the clock, the gate a kind checks besides the clock, and
//! the slow-path counters ([`Stats`]). The decisions it applies are the pure transition's
//! ([`super::transition`]); every kind of ID is a thin layer over a `Core`.

use std::fmt;

use crossbeam_utils::CachePadded;

use crate::clock::Clock;
use crate::error::Error;
use crate::sync::{AtomicU64, Ordering};

use super::backoff::Backoff;
use super::transition::{FastPath, Rules, Step};

/// What every kind of ID shares: the packed (millisecond, sequence) state, the rules of its
/// transition, the clock, what the kind checks besides the clock, and the slow-path
/// counters. [`Core::reserve`] is the crate's only CAS loop; the Snowflake [`Generator`](crate::Generator)
/// and the 128-bit kinds (`uuid7_ulid::CountedGenerator`) are thin layers over it.
pub(crate) struct Core<C, G> {
    /// The next free (millisecond, sequence) slot: see `transition.rs`. On a cache line of its own,
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

/// Slow-path events, counted where they happen; the fast path never touches them.
struct Counters {
    sequence_exhausted: AtomicU64,
    clock_behind: AtomicU64,
    refused_clock_behind: AtomicU64,
    refused_lease: AtomicU64,
    refused_time_exhausted: AtomicU64,
}

/// A snapshot of a generator's slow-path counters ([`Generator::stats`](crate::Generator::stats)).
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
    /// Refused, and the call was refused before (an async call's next try, after it slept):
    /// its wait is counted once, at its first refusal.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    RefusedAgain,
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
    /// nothing was issued in starts at slot `seed` (see `transition.rs`).
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
        let mut counted = waiting == Waiting::RefusedAgain;
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
                    if waiting != Waiting::Allowed {
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

    pub(crate) fn epoch_unix_ms(&self) -> u64 {
        self.epoch_unix_ms
    }

    /// The last millisecond (since the epoch) the rules allow.
    pub(crate) fn max_elapsed_ms(&self) -> u64 {
        self.rules.max_elapsed_ms
    }

    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    #[inline]
    pub(crate) fn gate(&self) -> &G {
        &self.gate
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
