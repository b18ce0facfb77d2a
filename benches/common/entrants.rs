//! idgen and the two baselines in the same shape as the peers (`peers::Peer`), so every
//! scenario runs each entrant through one code path.

use idgen::{Generator, Layout, RecentClock, ShardedGenerator};

use super::peers::Peer;
use super::{FetchAdd, MutexGenerator, clock, recent_clock};

/// idgen's `Generator` at its defaults: default layout, `MonotonicClock`.
pub struct Idgen(Generator);

impl Peer for Idgen {
    const NAME: &'static str = "idgen";
    fn new() -> Self {
        Idgen(Generator::builder().clock(clock()).build().unwrap())
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

/// idgen's `Generator` on `RecentClock`, default layout.
pub struct IdgenRecent(Generator<RecentClock>);

impl Peer for IdgenRecent {
    const NAME: &'static str = "idgen_recent";
    fn new() -> Self {
        IdgenRecent(Generator::builder().clock(recent_clock()).build().unwrap())
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
