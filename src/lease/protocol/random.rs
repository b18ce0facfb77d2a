//! A small deterministic generator (SplitMix64): the machine's jitter, and every choice of
//! a simulated run. The machine stays pure: its seed comes in with its settings.

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
    #[cfg(test)]
    pub(crate) fn signed(&mut self, bound: u64) -> i64 {
        self.below(2 * bound + 1) as i64 - bound as i64
    }

    #[cfg(test)]
    pub(crate) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1_000) < per_mille
    }

    /// Uniform in `at_least..=at_most` (`at_least` when the bounds are crossed).
    pub(crate) fn between(&mut self, at_least: u64, at_most: u64) -> u64 {
        at_least + self.below(at_most.saturating_sub(at_least).saturating_add(1))
    }
}
