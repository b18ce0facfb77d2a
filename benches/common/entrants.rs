//! idgen and the two baselines in the same shape as the peers (`peers::Peer`), so every
//! scenario runs each entrant through one code path.

use idgen::{Clock, Generator, Layout, MonotonicClock, RecentClock, ShardedGenerator};

use super::peers::Peer;
use super::{FetchAdd, MutexGenerator, clock, recent_clock};

/// A clock an idgen entrant can run on, and the entrant's name with it.
pub trait EntrantClock: Clock + Sized {
    const NAME: &'static str;
    fn shared() -> Self;
}

impl EntrantClock for MonotonicClock {
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
pub struct IdgenOn<C: Clock>(Generator<C>);

/// The default: `MonotonicClock`.
pub type Idgen = IdgenOn<MonotonicClock>;
/// On `RecentClock`.
pub type IdgenRecent = IdgenOn<RecentClock>;

impl<C: EntrantClock> Peer for IdgenOn<C> {
    const NAME: &'static str = C::NAME;
    fn new() -> Self {
        IdgenOn(Generator::builder().clock(C::shared()).build().unwrap())
    }
    #[inline]
    fn next(&self) -> u128 {
        u128::from(self.0.next_id().unwrap().as_u64())
    }
    fn next_batch(&self, n: usize, out: &mut Vec<u128>) -> bool {
        out.extend(
            self.0
                .next_ids(n)
                .unwrap()
                .into_iter()
                .map(|id| u128::from(id.as_u64())),
        );
        true
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
