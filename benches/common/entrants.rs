//! idgen and the two baselines in the same shape as the peers (`peers::Peer`), so every
//! scenario runs each entrant through one code path.

use std::sync::Mutex;

use idgen::{
    Clock, DefaultClock, Generator, Id, Layout, RecentClock, ShardedGenerator, UlidGenerator,
    Uuid7Generator,
};

use super::peers::{Batch, Peer};
use super::{CasLoop, FetchAdd, MutexGenerator, clock, recent_clock};

/// A clock an idgen entrant can run on, and the entrant's name with it.
pub trait EntrantClock: Clock + Sized {
    const NAME: &'static str;
    fn shared() -> Self;
}

impl EntrantClock for DefaultClock {
    const NAME: &'static str = "idgen";
    fn shared() -> Self {
        clock()
    }
}

impl EntrantClock for RecentClock {
    const NAME: &'static str = "idgen_recent";
    fn shared() -> Self {
        recent_clock()
    }
}

/// idgen's `Generator` at its defaults (default layout) on the clock `C`.
pub struct IdgenOn<C: Clock> {
    generator: Generator<C>,
    /// `fill_ids`'s buffer, kept between calls.
    reused: Mutex<Vec<Id>>,
}

/// The default: `DefaultClock`.
pub type Idgen = IdgenOn<DefaultClock>;
/// On `RecentClock`.
pub type IdgenRecent = IdgenOn<RecentClock>;

impl<C: EntrantClock> Peer for IdgenOn<C> {
    const NAME: &'static str = C::NAME;
    fn new() -> Self {
        IdgenOn {
            generator: Generator::builder().clock(C::shared()).build().unwrap(),
            reused: Mutex::new(Vec::new()),
        }
    }
    #[inline]
    fn next(&self) -> u128 {
        u128::from(self.generator.next_id().unwrap().as_u64())
    }
    fn next_batch(&self, n: usize, batch: Batch) -> Option<usize> {
        Some(match batch {
            Batch::Fresh => std::hint::black_box(self.generator.next_ids(n).unwrap()).len(),
            Batch::Reused => {
                let mut out = self.reused.lock().unwrap();
                out.resize(n, Id::MIN);
                self.generator.fill_ids(&mut out).unwrap();
                std::hint::black_box(&*out).len()
            }
        })
    }
}

/// idgen's `ShardedGenerator` on `RecentClock`, default layout, one shard per core.
pub struct IdgenSharded(ShardedGenerator<RecentClock>);

impl Peer for IdgenSharded {
    const NAME: &'static str = "idgen_sharded";
    fn new() -> Self {
        IdgenSharded(
            ShardedGenerator::builder()
                .clock(recent_clock())
                .build()
                .unwrap(),
        )
    }
    #[inline]
    fn next(&self) -> u128 {
        u128::from(self.0.next_id().unwrap().as_u64())
    }
}

/// idgen's `Uuid7Generator` at its defaults (`DefaultClock`), one shared instance.
pub struct IdgenUuid7(Uuid7Generator);

impl Peer for IdgenUuid7 {
    const NAME: &'static str = "idgen_uuid7";
    fn new() -> Self {
        IdgenUuid7(Uuid7Generator::builder().clock(clock()).build().unwrap())
    }
    #[inline]
    fn next(&self) -> u128 {
        u128::from_be_bytes(*self.0.next_uuid().unwrap().as_bytes())
    }
}

/// idgen's `UlidGenerator` at its defaults (`DefaultClock`), one shared instance.
pub struct IdgenUlid(UlidGenerator);

impl Peer for IdgenUlid {
    const NAME: &'static str = "idgen_ulid";
    fn new() -> Self {
        IdgenUlid(UlidGenerator::builder().clock(clock()).build().unwrap())
    }
    #[inline]
    fn next(&self) -> u128 {
        self.0.next_ulid().unwrap().as_u128()
    }
}

/// Baseline: one bare `fetch_add` per ID.
pub struct BareFetchAdd(FetchAdd);

impl Peer for BareFetchAdd {
    const NAME: &'static str = "fetch_add";
    fn new() -> Self {
        BareFetchAdd(FetchAdd::default())
    }
    #[inline]
    fn next(&self) -> u128 {
        u128::from(self.0.next())
    }
}

/// Baseline: the floor of any compare-and-swap generator, one load and one
/// compare-and-swap per ID with no clock and no rules.
pub struct BareCasLoop(CasLoop);

impl Peer for BareCasLoop {
    const NAME: &'static str = "cas_loop";
    fn new() -> Self {
        BareCasLoop(CasLoop::default())
    }
    #[inline]
    fn next(&self) -> u128 {
        u128::from(self.0.next())
    }
}

/// Baseline: idgen's rules under a `Mutex`, default layout, `RecentClock`.
pub struct MutexBaseline(MutexGenerator<RecentClock>);

impl Peer for MutexBaseline {
    const NAME: &'static str = "mutex";
    fn new() -> Self {
        MutexBaseline(MutexGenerator::new(Layout::DEFAULT, recent_clock()))
    }
    #[inline]
    fn next(&self) -> u128 {
        u128::from(self.0.next())
    }
}
