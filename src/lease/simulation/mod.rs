//! A deterministic simulation of a whole fleet of lease holders (tests only): thousands of
//! holders, each driving the real lease [`Machine`](super::protocol::Machine) and the real
//! [`Generator`](crate::Generator) on clocks of its own, against a model of etcd or of
//! PostgreSQL, with faults of the network, the store, the clocks and the processes drawn
//! from a seed. A run checks safety (no ID issued twice, each holder's IDs increasing, none
//! dated past the mark its holder saw confirmed) and then liveness (after the faults heal,
//! every holder that wants a number and can have one issues). The same seed replays the
//! same run, event for event (its trace hash says so); a failure prints the seed and the
//! last events.
//!
//! - `store.rs`: the etcd model and the claims both models hand out; `postgres_store.rs`
//!   (feature `postgres`): the PostgreSQL model, on the real `lease::postgres::verdict`;
//!   `holder.rs`: a holder process; `world.rs`: the events, the network and the fault
//!   schedule; `check.rs`: the checkers and the trace.
//! - `tests.rs`: the seeds the test command runs, the mutations they must catch, the
//!   scenarios of earlier duplicate reports, and a long run of any shape
//!   (`IDGEN_SIM_SHAPE`, `IDGEN_SIM_SEEDS`; see `docs/leases.md`).

mod check;
mod holder;
#[cfg(feature = "postgres")]
mod postgres_store;
mod store;
mod tests;
mod world;

use std::collections::BTreeMap;

pub(crate) use super::protocol::Mutation;
#[cfg(feature = "postgres")]
pub(crate) use postgres_store::{PostgresDefect, PostgresRun};

/// Which store the fleet runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Model {
    Etcd,
    /// The PostgreSQL model: which semantics, and a defect of them built in or none.
    #[cfg(feature = "postgres")]
    Postgres(PostgresRun),
}

/// A small deterministic generator (SplitMix64): every choice of a run comes from it.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5eed_1d6e_2026_1203)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// Uniform in `-bound..=bound`.
    pub(crate) fn signed(&mut self, bound: u64) -> i64 {
        self.below(2 * bound + 1) as i64 - bound as i64
    }

    pub(crate) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1_000) < per_mille
    }
}

/// A fault the schedule injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A holder cut off from the store (both directions) for up to 4 TTLs or the largest
    /// horizon.
    Partition,
    /// The store down for up to 2 TTLs, then a leader change.
    StoreRestart,
    LeaderChange,
    /// A snapshot taken (for a later restore).
    Snapshot,
    /// The last snapshot restored, then the operator's procedure.
    Restore,
    /// The namespace wiped, then initialised again by the operator.
    Wipe,
    /// A number's mark key deleted (one written longer ago than clocks disagree).
    DeleteMark,
    /// A number's holder key deleted.
    DeleteHolder,
    /// A holder's wall clock stepped (forward or back), and half the time stepped back
    /// again within 3 TTLs (a bad time source, corrected).
    ClockStep,
    /// A holder paused for up to 3 TTLs (it issues first thing on resuming).
    Pause,
    /// A holder killed, restarted later (with or without its high-water mark).
    Crash,
    /// A holder released its number, started again later.
    Stop,
    /// PostgreSQL: the server's clock stepped (forward or back), and half the time back
    /// again within 3 TTLs.
    #[cfg(feature = "postgres")]
    ServerClockStep,
    /// PostgreSQL: a number's row deleted (one written longer ago than clocks disagree).
    #[cfg(feature = "postgres")]
    DeleteRow,
    /// PostgreSQL: a number's token cleared by hand, its mark kept.
    #[cfg(feature = "postgres")]
    FreeRow,
    /// PostgreSQL: the tables dropped and restored from the last copy (a new table OID),
    /// then the operator's step.
    #[cfg(feature = "postgres")]
    TableRestored,
    /// PostgreSQL: the rows replaced by the last copy's, data only (the identity kept),
    /// the server unreachable until the operator's step.
    #[cfg(feature = "postgres")]
    DataRestored,
    /// PostgreSQL: a failover to a standby that stood at the last copy (a new timeline, its
    /// own clock), then the operator's step.
    #[cfg(feature = "postgres")]
    Failover,
    /// PostgreSQL: the server restarted on the last copy, its identity and timeline kept (a
    /// base backup started without recovery, a disk snapshot put back), the history with
    /// it; the fleet runs against it until the operator's step.
    #[cfg(feature = "postgres")]
    BackupRestored,
}

impl Fault {
    pub(crate) const ALL: [Fault; 12] = [
        Fault::Partition,
        Fault::StoreRestart,
        Fault::LeaderChange,
        Fault::Snapshot,
        Fault::Restore,
        Fault::Wipe,
        Fault::DeleteMark,
        Fault::DeleteHolder,
        Fault::ClockStep,
        Fault::Pause,
        Fault::Crash,
        Fault::Stop,
    ];

    /// The faults of a PostgreSQL run: the copy (`Snapshot`) is what a restore or a
    /// failover goes back to.
    #[cfg(feature = "postgres")]
    pub(crate) const POSTGRES: [Fault; 15] = [
        Fault::Partition,
        Fault::StoreRestart,
        Fault::Snapshot,
        Fault::BackupRestored,
        Fault::TableRestored,
        Fault::DataRestored,
        Fault::Failover,
        Fault::Wipe,
        Fault::DeleteRow,
        Fault::FreeRow,
        Fault::ServerClockStep,
        Fault::ClockStep,
        Fault::Pause,
        Fault::Crash,
        Fault::Stop,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::Partition => "partition",
            Fault::StoreRestart => "store restart",
            Fault::LeaderChange => "leader change",
            Fault::Snapshot => "snapshot",
            Fault::Restore => "snapshot restored",
            Fault::Wipe => "namespace wiped",
            Fault::DeleteMark => "mark key deleted",
            Fault::DeleteHolder => "holder key deleted",
            Fault::ClockStep => "clock step",
            Fault::Pause => "pause",
            Fault::Crash => "crash",
            Fault::Stop => "stop and restart",
            #[cfg(feature = "postgres")]
            Fault::ServerClockStep => "server clock step",
            #[cfg(feature = "postgres")]
            Fault::DeleteRow => "row deleted",
            #[cfg(feature = "postgres")]
            Fault::FreeRow => "row freed by hand",
            #[cfg(feature = "postgres")]
            Fault::TableRestored => "table dropped and restored",
            #[cfg(feature = "postgres")]
            Fault::DataRestored => "rows restored, data only",
            #[cfg(feature = "postgres")]
            Fault::Failover => "failover to a standby behind",
            #[cfg(feature = "postgres")]
            Fault::BackupRestored => "base backup restored, identity kept",
        }
    }
}

/// The shape of a run: the fleet, its timing, its clocks, and how often what goes wrong.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub(crate) holders: u32,
    pub(crate) numbers: u64,
    pub(crate) duration_ms: u64,
    pub(crate) ttl_ms: u64,
    /// The outage horizons holders choose from (one each).
    pub(crate) horizons_ms: Vec<u64>,
    /// Each wall clock starts up to this far from the true time.
    pub(crate) skew_ms: u64,
    pub(crate) drift_ppm: i64,
    /// The largest clock step.
    pub(crate) step_ms: u64,
    pub(crate) latency_ms: (u64, u64),
    pub(crate) loss_per_mille: u64,
    pub(crate) duplicate_per_mille: u64,
    pub(crate) delay_per_mille: u64,
    pub(crate) timeout_ms: u64,
    /// The mean time between faults (0: none).
    pub(crate) fault_every_ms: u64,
    pub(crate) faults: Vec<Fault>,
    /// How often a holder issues, and how many IDs at most each time.
    pub(crate) issue_every_ms: u64,
    pub(crate) burst: u32,
    /// How long a holder whose first taking failed (every number held, a mark too far
    /// ahead) waits before it tries again (`idgen serve` asks every half second).
    pub(crate) retry_take_ms: u64,
    /// The last holder has another layout (epoch), and starts after the others.
    pub(crate) misconfigured: bool,
    pub(crate) model: Model,
}

impl Shape {
    /// A small fleet, as the test command runs them: up to 12 holders on 1 to 8 numbers,
    /// TTLs of 2 to 4 s, two and a half simulated minutes, a fault every 2 s on average.
    pub(crate) fn small(rng: &mut Rng) -> Shape {
        let ttl_ms = 2_000 + 1_000 * rng.below(3);
        Shape {
            holders: 1 + rng.below(12) as u32,
            numbers: 1 + rng.below(8),
            duration_ms: 150_000,
            ttl_ms,
            horizons_ms: vec![ttl_ms, 2 * ttl_ms, 8 * ttl_ms],
            skew_ms: rng.below(2_001),
            drift_ppm: rng.below(201) as i64,
            // Now and then steps longer than a horizon.
            step_ms: if rng.below(4) == 0 {
                rng.below(20_001)
            } else {
                rng.below(3_001)
            },
            latency_ms: (1, 1 + rng.below(50)),
            loss_per_mille: rng.below(50),
            duplicate_per_mille: rng.below(30),
            delay_per_mille: rng.below(20),
            timeout_ms: 2_000.min(ttl_ms),
            fault_every_ms: 1_000 + rng.below(3_000),
            faults: Fault::ALL.to_vec(),
            issue_every_ms: 200,
            burst: 8,
            retry_take_ms: 500,
            misconfigured: rng.below(10) == 0,
            model: Model::Etcd,
        }
    }

    /// A fleet of up to `holders` on 1 to 1,024 numbers (more holders than numbers is the
    /// interesting case), for `duration_ms`, TTLs of 2 to 30 s.
    pub(crate) fn large(rng: &mut Rng, holders: u32, duration_ms: u64) -> Shape {
        let ttl_ms = 2_000 + 1_000 * rng.below(29);
        let numbers = 1 + rng.below(1_024);
        Shape {
            holders: 1 + rng.below(u64::from(holders)) as u32,
            numbers,
            duration_ms,
            ttl_ms,
            horizons_ms: vec![ttl_ms, 3 * ttl_ms, 6 * ttl_ms],
            skew_ms: rng.below(5_001),
            drift_ppm: rng.below(201) as i64,
            step_ms: rng.below(5_001),
            latency_ms: (1, 1 + rng.below(100)),
            loss_per_mille: rng.below(30),
            duplicate_per_mille: rng.below(20),
            delay_per_mille: rng.below(10),
            timeout_ms: 2_000,
            // A restore or a wipe keeps the store down until the procedure: fewer faults,
            // or a large fleet would spend its run waiting for the store.
            fault_every_ms: 2_000 + rng.below(18_000),
            faults: Fault::ALL.to_vec(),
            // Thousands of holders: fewer IDs each, so the checker's memory stays in hand,
            // and waiting holders ask less often.
            issue_every_ms: 10_000,
            burst: 4,
            retry_take_ms: 5_000,
            misconfigured: rng.below(10) == 0,
            model: Model::Etcd,
        }
    }

    /// The same fleet against the PostgreSQL model, under the faults that store has.
    #[cfg(feature = "postgres")]
    pub(crate) fn on_postgres(mut self, run: PostgresRun) -> Shape {
        self.model = Model::Postgres(run);
        self.faults = Fault::POSTGRES.to_vec();
        self
    }
}

/// What a run did and found.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) seed: u64,
    pub(crate) holders: u32,
    pub(crate) numbers: u64,
    pub(crate) simulated_ms: u64,
    pub(crate) events: u64,
    pub(crate) ids: u64,
    pub(crate) faults: BTreeMap<&'static str, u64>,
    pub(crate) paths: BTreeMap<&'static str, u64>,
    pub(crate) violations: Vec<String>,
    pub(crate) liveness: Option<String>,
    pub(crate) trace_hash: u64,
    pub(crate) trace: String,
}

impl Report {
    /// What went wrong, with the seed to replay it and the last events; `None` if nothing.
    pub(crate) fn failure(&self) -> Option<String> {
        if self.violations.is_empty() && self.liveness.is_none() {
            return None;
        }
        Some(format!(
            "seed {} ({} holders, {} numbers): {}{}\nlast events:\n{}",
            self.seed,
            self.holders,
            self.numbers,
            self.violations.join("; "),
            self.liveness
                .as_ref()
                .map(|liveness| format!("liveness: {liveness}"))
                .unwrap_or_default(),
            self.trace
        ))
    }
}

/// Runs one seed of `shape`, with `mutation` built into every holder's machine.
pub(crate) fn run(seed: u64, shape: &Shape, mutation: Option<Mutation>) -> Report {
    world::World::new(shape, seed, mutation).run(seed)
}
