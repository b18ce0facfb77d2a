//! The generator's state and its pure transition.
//!
//! The state is one `u64`: the next free (millisecond, sequence) slot, packed as
//! `elapsed_ms << sequence_bits | sequence`. Every slot below it has been issued (or
//! skipped), none at or above it has. Packed this way, "same millisecond: sequence + 1" and
//! "millisecond used up: next millisecond, sequence 0" are both plain `+ 1`, and the state
//! only ever grows. `0` is a valid start: nothing issued yet.
//!
//! Every kind of ID runs on this one state. They differ in where a new millisecond starts
//! its sequence, the `seed` the caller passes: Snowflake IDs start at 0; UUIDv7 and ULID
//! start their counter at random bits with the top bit clear (RFC 9562, section 6.2,
//! method 1), so that it can still count within the millisecond. A seed only applies when
//! the state has issued nothing in the clock's millisecond yet; a millisecond already
//! started goes on from its next slot, whoever seeded it.
//!
//! The arithmetic needs `(max_elapsed_ms + 1) << sequence_bits` to fit in a `u64`: the
//! Snowflake layouts keep time and sequence within 63 bits, the 128-bit kinds spend 64 bits
//! and keep their last millisecond out of use instead.
//!
//! [`Rules::advance`] decides, from a state and a clock reading, what one attempt does. It
//! takes time as an argument and touches no atomics, so it is tested exhaustively without
//! threads or clocks; the compare-and-swap loop in `core.rs` only applies its verdict.

/// What one attempt to reserve slots should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Reserve slots `first..next` by moving the state from its current value to `next`.
    Issue { first: u64, next: u64 },
    /// As `Issue`, but the clock is behind the last issued millisecond (within tolerance):
    /// the slots continue that millisecond.
    IssueBehind { first: u64, next: u64 },
    /// Nothing free until the clock reads `until_ms`; `clock_behind` tells whether the
    /// clock stepped back (within tolerance) or the sequence simply ran out.
    Wait { until_ms: u64, clock_behind: bool },
    /// The clock is behind the last issued millisecond by more than the tolerance.
    ClockBehind { behind_ms: u64 },
    /// The clock, or the next free slot, lies past the layout's last millisecond.
    Exhausted,
}

/// The parameters of the transition, fixed when the generator is built.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    pub(crate) sequence_bits: u32,
    /// The last millisecond (since the epoch) the layout can represent.
    pub(crate) max_elapsed_ms: u64,
    /// How far the clock may be behind the last issued millisecond (beyond the borrow)
    /// before a call is refused instead of waiting.
    pub(crate) tolerance_ms: u64,
    /// How many milliseconds ahead of the clock a busy generator may issue.
    pub(crate) borrow_ms: u64,
}

impl Rules {
    /// The verdict for reserving up to `want` (at least 1) slots from `next_free` when the
    /// clock reads `now_ms` milliseconds since the epoch. At most the rest of one millisecond
    /// is reserved at once. A millisecond nothing was issued in starts at sequence `seed`
    /// (below `2^sequence_bits`).
    #[inline]
    pub(crate) fn advance(&self, next_free: u64, now_ms: u64, want: u64, seed: u64) -> Step {
        if now_ms > self.max_elapsed_ms {
            return Step::Exhausted;
        }
        let bits = self.sequence_bits;
        // No shift overflows: (max_elapsed_ms + 1) << bits fits (see the module docs).
        let start = first_slot(next_free, now_ms << bits, seed);
        let start_ms = start >> bits;
        let allowed_ms = now_ms.saturating_add(self.borrow_ms);
        if start_ms <= allowed_ms {
            if start_ms > self.max_elapsed_ms {
                return Step::Exhausted;
            }
            return Step::Issue {
                first: start,
                next: self.take(start, want),
            };
        }
        self.advance_slow(next_free, now_ms, want)
    }

    /// The next free slot is ahead of what the clock allows: the sequence ran out, or the
    /// clock stepped back. Here `next_free > now_ms << bits`, so `next_free >= 1`.
    #[cold]
    fn advance_slow(&self, next_free: u64, now_ms: u64, want: u64) -> Step {
        let bits = self.sequence_bits;
        let start_ms = next_free >> bits;
        let last_ms = (next_free - 1) >> bits;
        let allowed_ms = now_ms.saturating_add(self.borrow_ms);
        if start_ms > self.max_elapsed_ms {
            return Step::Exhausted;
        }
        if last_ms <= allowed_ms {
            // Sequence used up in the last allowed millisecond: wait for the next one.
            return Step::Wait {
                until_ms: start_ms - self.borrow_ms,
                clock_behind: false,
            };
        }
        if last_ms - allowed_ms > self.tolerance_ms {
            return Step::ClockBehind {
                behind_ms: last_ms - now_ms,
            };
        }
        if start_ms == last_ms {
            return Step::IssueBehind {
                first: next_free,
                next: self.take(next_free, want),
            };
        }
        Step::Wait {
            until_ms: start_ms - self.borrow_ms,
            clock_behind: true,
        }
    }

    /// The constants of [`FastPath::issue_one`] for these rules.
    pub(crate) const fn fast_path(&self) -> FastPath {
        let bits = self.sequence_bits;
        if self.borrow_ms >= self.max_elapsed_ms {
            // A borrow that reaches the end of the layout: every call takes the full
            // transition (no `now_ms` is below 0).
            return FastPath {
                sequence_bits: bits,
                until_ms: 0,
                window: 0,
            };
        }
        FastPath {
            sequence_bits: bits,
            until_ms: self.max_elapsed_ms - self.borrow_ms,
            // Fits: borrow_ms + 1 <= max_elapsed_ms, and (max_elapsed_ms + 1) << bits fits.
            window: (self.borrow_ms + 1) << bits,
        }
    }

    /// The end of a reservation of up to `want` slots from `start`, inside its millisecond.
    #[inline]
    fn take(&self, start: u64, want: u64) -> u64 {
        if want == 1 {
            // Every slot has room for itself; spelled out so `next_id` skips the arithmetic.
            return start + 1;
        }
        let end_of_ms = ((start >> self.sequence_bits) + 1) << self.sequence_bits;
        start + want.min(end_of_ms - start)
    }
}

/// The slot a call starts from: the next free one, or, when nothing has been issued in the
/// clock's millisecond (whose first slot is `floor`), that millisecond's slot `seed`.
#[inline]
fn first_slot(next_free: u64, floor: u64, seed: u64) -> u64 {
    if next_free > floor {
        next_free
    } else {
        floor + seed
    }
}

/// The fast path for one slot: the common case of [`Rules::advance`] with `want == 1`,
/// decided with one range check of the clock and one of the slot.
///
/// [`FastPath::issue_one`] gives `Some(first)` only where `advance` gives `Issue { first,
/// next: first + 1 }`, and gives it for every such case except in the last `borrow_ms`
/// milliseconds of the layout; `None` sends the call to the full transition. The two
/// checks stand for all of `advance`'s: `now_ms < until_ms` covers a clock before the epoch
/// (the caller's wrapping subtraction makes it huge) and the end of the layout, and
/// `first - floor < window` says the slot's millisecond is at most `now_ms + borrow_ms`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastPath {
    sequence_bits: u32,
    /// `max_elapsed_ms - borrow_ms`: below it, every slot the window allows lies inside the
    /// layout.
    until_ms: u64,
    /// `(borrow_ms + 1) << sequence_bits`: how far past the clock's first slot a slot may be.
    window: u64,
}

impl FastPath {
    /// The slot to take from `next_free` when the clock reads `now_ms` (milliseconds since
    /// the epoch, wrapped if before it) and a new millisecond starts at `seed()`, or `None`
    /// for the full transition to decide. `seed` is only called for a new millisecond, so a
    /// kind that draws its seeds at random pays for the draw once per millisecond.
    #[inline]
    pub(crate) fn issue_one(
        &self,
        next_free: u64,
        now_ms: u64,
        seed: impl FnOnce() -> u64,
    ) -> Option<u64> {
        if now_ms >= self.until_ms {
            return None;
        }
        let floor = now_ms << self.sequence_bits;
        let first = if next_free > floor {
            next_free
        } else {
            floor + seed()
        };
        if first - floor < self.window {
            Some(first)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: Rules = Rules {
        sequence_bits: 2,
        max_elapsed_ms: 1000,
        tolerance_ms: 5,
        borrow_ms: 0,
    };

    fn slot(ms: u64, seq: u64) -> u64 {
        (ms << 2) | seq
    }

    #[test]
    fn nothing_issued_starts_at_the_clock_with_sequence_zero() {
        assert_eq!(
            RULES.advance(0, 7, 1, 0),
            Step::Issue {
                first: slot(7, 0),
                next: slot(7, 1)
            }
        );
    }

    #[test]
    fn same_millisecond_counts_up_and_a_new_one_restarts_at_zero() {
        assert_eq!(
            RULES.advance(slot(7, 1), 7, 1, 0),
            Step::Issue {
                first: slot(7, 1),
                next: slot(7, 2)
            }
        );
        assert_eq!(
            RULES.advance(slot(7, 2), 9, 1, 0),
            Step::Issue {
                first: slot(9, 0),
                next: slot(9, 1)
            }
        );
    }

    #[test]
    fn a_used_up_millisecond_waits_for_the_next() {
        assert_eq!(
            RULES.advance(slot(8, 0), 7, 1, 0),
            Step::Wait {
                until_ms: 8,
                clock_behind: false
            }
        );
    }

    #[test]
    fn borrowing_moves_on_without_waiting_but_only_as_far_as_allowed() {
        let rules = Rules {
            borrow_ms: 2,
            ..RULES
        };
        assert_eq!(
            rules.advance(slot(8, 0), 7, 1, 0),
            Step::Issue {
                first: slot(8, 0),
                next: slot(8, 1)
            }
        );
        assert_eq!(
            rules.advance(slot(10, 0), 7, 1, 0),
            Step::Wait {
                until_ms: 8,
                clock_behind: false
            }
        );
    }

    #[test]
    fn a_batch_stops_at_the_end_of_its_millisecond() {
        assert_eq!(
            RULES.advance(slot(7, 1), 7, 100, 0),
            Step::Issue {
                first: slot(7, 1),
                next: slot(8, 0)
            }
        );
    }

    #[test]
    fn clock_behind_within_tolerance_continues_the_last_millisecond_then_waits() {
        assert_eq!(
            RULES.advance(slot(20, 2), 17, 1, 0),
            Step::IssueBehind {
                first: slot(20, 2),
                next: slot(20, 3)
            }
        );
        assert_eq!(
            RULES.advance(slot(21, 0), 17, 1, 0),
            Step::Wait {
                until_ms: 21,
                clock_behind: true
            }
        );
    }

    #[test]
    fn clock_behind_beyond_tolerance_is_refused() {
        assert_eq!(
            RULES.advance(slot(20, 2), 14, 1, 0),
            Step::ClockBehind { behind_ms: 6 }
        );
    }

    #[test]
    fn the_end_of_time_is_exhausted_never_wrapped() {
        assert_eq!(RULES.advance(0, 1001, 1, 0), Step::Exhausted);
        assert_eq!(
            RULES.advance(slot(1000, 3), 1000, 5, 0),
            Step::Issue {
                first: slot(1000, 3),
                next: slot(1001, 0)
            }
        );
        assert_eq!(RULES.advance(slot(1001, 0), 1000, 1, 0), Step::Exhausted);
        let borrowing = Rules {
            borrow_ms: 3,
            ..RULES
        };
        assert_eq!(borrowing.advance(slot(1001, 0), 999, 1, 0), Step::Exhausted);
    }

    #[test]
    fn a_new_millisecond_starts_at_the_seed_and_a_started_one_ignores_it() {
        // Nothing issued in ms 7 yet (state at its first slot, or below it): the seed.
        for next_free in [0, slot(5, 3), slot(7, 0)] {
            assert_eq!(
                RULES.advance(next_free, 7, 1, 1),
                Step::Issue {
                    first: slot(7, 1),
                    next: slot(7, 2)
                }
            );
        }
        // Ms 7 started elsewhere with a lower seed: go on from its next slot, not from ours.
        assert_eq!(
            RULES.advance(slot(7, 1), 7, 1, 3),
            Step::Issue {
                first: slot(7, 1),
                next: slot(7, 2)
            }
        );
        // A batch from a seed still stops at the end of its millisecond.
        assert_eq!(
            RULES.advance(slot(6, 2), 7, 100, 1),
            Step::Issue {
                first: slot(7, 1),
                next: slot(8, 0)
            }
        );
    }

    /// Every state and reading of a small layout, with and without borrowing, with every
    /// seed a counter may start at: the fast path issues exactly where the full transition
    /// says `Issue` for one slot (outside the last `borrow_ms` milliseconds, where it
    /// defers), and the same slot.
    #[test]
    fn the_fast_path_agrees_with_the_full_transition() {
        // 999 is the largest borrow that leaves the fast path one millisecond; from 1000 on
        // it is off, and every call must be deferred.
        for (sequence_bits, borrow_ms) in [1, 2]
            .into_iter()
            .flat_map(|bits| [0, 1, 3, 999, 1000, 5000].map(|borrow| (bits, borrow)))
        {
            let rules = Rules {
                sequence_bits,
                borrow_ms,
                ..RULES
            };
            let fast = rules.fast_path();
            let end = (RULES.max_elapsed_ms + 2) << sequence_bits;
            // Seeds have their top bit clear.
            for seed in 0..1 << (sequence_bits - 1) {
                for next_free in 0..end {
                    for now_ms in (0..RULES.max_elapsed_ms + 3).chain([u64::MAX - 1, u64::MAX]) {
                        let full = rules.advance(next_free, now_ms, 1, seed);
                        match fast.issue_one(next_free, now_ms, || seed) {
                            Some(first) => assert_eq!(
                                full,
                                Step::Issue {
                                    first,
                                    next: first + 1
                                },
                                "bits {sequence_bits}, borrow {borrow_ms}, seed {seed}, \
                                 state {next_free}, now {now_ms}"
                            ),
                            None => assert!(
                                !matches!(full, Step::Issue { .. })
                                    || now_ms + borrow_ms >= RULES.max_elapsed_ms,
                                "deferred an Issue: bits {sequence_bits}, borrow {borrow_ms}, \
                                 seed {seed}, state {next_free}, now {now_ms}: {full:?}"
                            ),
                        }
                    }
                }
            }
        }
    }
}
