//! The engine every kind of ID runs on (private): one packed (millisecond, sequence) state,
//! the pure transition that decides what one attempt does with it, and the one
//! compare-and-swap loop that applies the decision.
//!
//! - `transition.rs`: [`Rules::advance`], pure: a state and a clock reading in, a [`Step`]
//!   out. No atomics, no clock; tested exhaustively.
//! - `core.rs`: [`Core`], the state's atomic and the CAS loop, the [`Gate`] a kind checks
//!   besides the clock, and the slow-path [`Stats`].
//! - `backoff.rs`: the spin-then-yield waits of the loop.
//!
//! It may use `crate::sync`, `crate::clock` and `crate::error`, nothing of any kind of ID:
//! the kinds (`snowflake`, `uuid7_ulid`) are built on it, never the other way round.

mod backoff;
mod core;
mod transition;

pub use self::core::Stats;
pub(crate) use self::core::{ClockSource, Core, Gate, Waiting};
pub(crate) use self::transition::Rules;
#[cfg(doc)]
use self::transition::Step;
