//! Exponential backoff for the two waits of the generator: a lost compare-and-swap race
//! (spin briefly, the winner is already done) and a millisecond whose sequence is used up
//! (spin, then give the core away, because the wait can last up to a millisecond).
//!
//! crossbeam-utils has a `Backoff` of the same shape, but it calls `std`'s hints directly;
//! this one goes through [`crate::sync`] so that loom sees every wait.

use crate::sync::{spin_loop, yield_now};

/// Spins run in rounds of `2^step` hints; past this step a snooze yields instead.
#[cfg(not(idgen_loom))]
const SPIN_LIMIT: u32 = 6;
/// Under loom every hint is a scheduling point: one or two let the others run.
#[cfg(idgen_loom)]
const SPIN_LIMIT: u32 = 1;

#[derive(Debug, Default)]
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    pub(crate) const fn new() -> Self {
        Backoff { step: 0 }
    }

    /// After a lost compare-and-swap: another thread made progress, retry soon.
    #[inline]
    pub(crate) fn spin(&mut self) {
        for _ in 0..1u32 << self.step.min(SPIN_LIMIT) {
            spin_loop();
        }
        if self.step <= SPIN_LIMIT {
            self.step += 1;
        }
    }

    /// While waiting for the clock: spin a few rounds, then yield the core each round.
    pub(crate) fn snooze(&mut self) {
        if self.step <= SPIN_LIMIT {
            for _ in 0..1u32 << self.step {
                spin_loop();
            }
            self.step += 1;
        } else {
            yield_now();
        }
    }
}
