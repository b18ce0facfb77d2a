//! The cycle-walk that makes Speck64/128, a permutation of 64-bit values, into one of the
//! 63-bit values an ID can take; and the cipher calls it walks with. Uses nothing else of
//! the folder.

use cipher::{BlockCipherDecrypt, BlockCipherEncrypt};
use speck_cipher::Speck64_128;

/// The values a walk stays within: 63 bits.
pub(super) const DOMAIN_END: u64 = 1 << 63;

/// Applies `step` to `value` until the result is in the domain (below `end`). With `step` a
/// permutation of a set that holds the domain, this is a permutation of the domain: the
/// cycle through `value` comes back to the domain, and no two values of the domain share
/// the path to it (cycle-walking).
pub(super) fn walk(value: u64, end: u64, step: impl Fn(u64) -> u64) -> u64 {
    let mut next = step(value);
    while next >= end {
        next = step(next);
    }
    next
}

/// [`walk`] for every value of `values` into `out` (same length), several at a time: a
/// cipher call's rounds depend on each other, so one walk waits on each round; walks of
/// different values do not, and the processor overlaps them. A walk that lands hands its
/// lane to the next value.
pub(super) fn walk_all(values: &[u64], out: &mut [u64], end: u64, step: impl Fn(u64) -> u64) {
    const LANES: usize = 4;
    debug_assert_eq!(values.len(), out.len());
    let mut current = [0u64; LANES];
    // The index of the value each lane walks; `None`: idle (fewer values than lanes left).
    let mut owner = [None::<usize>; LANES];
    let mut taken = 0;
    for lane in 0..LANES.min(values.len()) {
        current[lane] = values[taken];
        owner[lane] = Some(taken);
        taken += 1;
    }
    while owner.iter().any(Option::is_some) {
        for value in &mut current {
            *value = step(*value);
        }
        for lane in 0..LANES {
            let Some(index) = owner[lane] else { continue };
            if current[lane] < end {
                out[index] = current[lane];
                owner[lane] = (taken < values.len()).then_some(taken);
                if taken < values.len() {
                    current[lane] = values[taken];
                    taken += 1;
                }
            }
        }
    }
}

/// One Speck64/128 encryption of `value`, its high 32 bits as the cipher's first word (`x`
/// in the paper), so the paper's test vectors read as written.
pub(super) fn encrypt(cipher: &Speck64_128, value: u64) -> u64 {
    let mut block = value.to_be_bytes().into();
    cipher.encrypt_block(&mut block);
    u64::from_be_bytes(block.into())
}

pub(super) fn decrypt(cipher: &Speck64_128, value: u64) -> u64 {
    let mut block = value.to_be_bytes().into();
    cipher.decrypt_block(&mut block);
    u64::from_be_bytes(block.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipher::KeyInit;
    use speck_cipher::Speck32_64;

    #[test]
    fn the_published_speck64_128_vector_holds_in_the_word_order_the_codec_uses() {
        // "The Simon and Speck Families of Lightweight Block Ciphers" (2013), appendix C:
        // key 1b1a1918 13121110 0b0a0908 03020100, plaintext 3b726574 7475432d,
        // ciphertext 8c6fa548 454e028b. The key bytes go in the order speck-cipher's own
        // tests use.
        let cipher = Speck64_128::new(
            &[
                0x1b, 0x1a, 0x19, 0x18, 0x13, 0x12, 0x11, 0x10, 0x0b, 0x0a, 0x09, 0x08, 0x03, 0x02,
                0x01, 0x00,
            ]
            .into(),
        );
        assert_eq!(
            encrypt(&cipher, 0x3b72_6574_7475_432d),
            0x8c6f_a548_454e_028b
        );
        assert_eq!(
            decrypt(&cipher, 0x8c6f_a548_454e_028b),
            0x3b72_6574_7475_432d
        );
    }

    /// A permutation of `0..size` from a seeded Fisher-Yates shuffle, and its inverse.
    fn shuffled(size: usize, seed: u64) -> (Vec<u64>, Vec<u64>) {
        let mut state = seed;
        let mut forward: Vec<u64> = (0..size as u64).collect();
        for i in (1..size).rev() {
            // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let j = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) % (i as u64 + 1)) as usize;
            forward.swap(i, j);
        }
        let mut inverse = vec![0; size];
        for (x, &y) in forward.iter().enumerate() {
            inverse[y as usize] = x as u64;
        }
        (forward, inverse)
    }

    /// Every value of `0..end` is walked to exactly one value of `0..end`, one by one and
    /// in lanes alike, and walking back gives it again.
    fn assert_walk_permutes(end: u64, step: impl Fn(u64) -> u64, back: impl Fn(u64) -> u64) {
        let mut hit = vec![false; end as usize];
        let all: Vec<u64> = (0..end).collect();
        let mut in_lanes = vec![u64::MAX; all.len()];
        walk_all(&all, &mut in_lanes, end, &step);
        for x in 0..end {
            let y = walk(x, end, &step);
            assert!(y < end, "{x} walked to {y}, outside 0..{end}");
            assert!(!hit[y as usize], "{y} hit twice (walking {x})");
            hit[y as usize] = true;
            assert_eq!(in_lanes[x as usize], y, "lanes disagree for {x}");
            assert_eq!(walk(y, end, &back), x);
        }
        assert!(hit.iter().all(|&h| h));
    }

    #[test]
    fn cycle_walking_permutes_small_domains_checked_exhaustively() {
        // Shuffled permutations of 2^22 values walked into domains of 2^20, of a prime size,
        // of 1 and of the whole set.
        let (forward, inverse) = shuffled(1 << 22, 0x9e37_79b9_7f4a_7c15);
        for end in [1 << 20, 1_000_003, 1, 1 << 22] {
            assert_walk_permutes(end, |x| forward[x as usize], |x| inverse[x as usize]);
        }
    }

    /// The example: Speck32/64 walked into 2^20 values. Each walk averages 4,096
    /// encryptions, 2^32 for the domain: minutes unoptimised, so it runs in release builds
    /// (`cargo test -p idgen --release --lib -- --ignored speck32`; .ci/test runs it).
    #[test]
    #[ignore = "2^32 encryptions: run in release, as .ci/test does"]
    fn cycle_walking_speck32_into_2_to_the_20_hits_every_value_once() {
        let cipher = Speck32_64::new(&[7u8, 1, 9, 3, 0, 2, 8, 6].into());
        let step = |x: u64| {
            let mut block = (x as u32).to_be_bytes().into();
            cipher.encrypt_block(&mut block);
            u64::from(u32::from_be_bytes(block.into()))
        };
        let back = |x: u64| {
            let mut block = (x as u32).to_be_bytes().into();
            cipher.decrypt_block(&mut block);
            u64::from(u32::from_be_bytes(block.into()))
        };
        const END: u64 = 1 << 20;
        // Two threads, half the domain each; every image is checked once at the end.
        let images: Vec<u64> = std::thread::scope(|scope| {
            let halves: Vec<_> = [0..END / 2, END / 2..END]
                .into_iter()
                .map(|range| {
                    scope.spawn(move || {
                        range
                            .map(|x| {
                                let y = walk(x, END, step);
                                // Walking back is as costly: checked for 1 value in 64.
                                if x.is_multiple_of(64) {
                                    assert_eq!(walk(y, END, back), x);
                                }
                                y
                            })
                            .collect::<Vec<u64>>()
                    })
                })
                .collect();
            halves
                .into_iter()
                .flat_map(|half| half.join().unwrap())
                .collect()
        });
        let mut hit = vec![false; END as usize];
        for (x, &y) in images.iter().enumerate() {
            assert!(y < END, "{x} walked to {y}");
            assert!(!hit[y as usize], "{y} hit twice");
            hit[y as usize] = true;
        }
    }
}
