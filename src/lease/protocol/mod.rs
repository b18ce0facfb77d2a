//! The lease protocol as a pure state machine: which number to take, how long to wait for
//! its previous holder's mark, which marks to write and when, what the generator may issue
//! (its ceiling) after each answer, what an outage and a loss do, and what a release
//! writes. No threads, sleeps, clocks or store calls: the time comes in as an argument (the
//! holder's own wall and monotonic readings, [`Now`]), the store's answers come in as
//! values, and the machine hands out the [`Request`]s to send and the [`Output`]s the
//! generator must apply.
//!
//! Two drivers run it: `keeper.rs` (one thread, the real [`LeaseStore`](super::LeaseStore)
//! and [`Generator`](crate::Generator)) and, in the tests, the fleet simulator in
//! `simulation/`, which runs thousands of machines against a model of etcd under faults.
//! `docs/leases.md` has the state diagram.
//!
//! - `machine.rs`: the [`Machine`], one per number a process keeps.
//! - `marks.rs`: the arithmetic of marks (the next mark, an inferred one, the release mark,
//!   the survey's choice), shared by the machine and the lease API.
//! - `mutation.rs` (tests only): deliberate defects the simulator must catch.

mod machine;
mod marks;
#[cfg(test)]
mod mutation;

pub(crate) use machine::{
    Acquired, Answer, Machine, Note, Now, Output, Request, Settings, Surveyed,
};
pub(crate) use marks::next_mark;
#[cfg(test)]
pub(crate) use mutation::Mutation;
