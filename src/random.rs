//! Random bits for the 128-bit kinds: one ChaCha12 generator per thread, seeded from the
//! operating system, reseeded after every 64 KiB it produces and, in a forked child, before
//! its first draw.
//!
//! A draw (one `u64`) costs a few nanoseconds of ChaCha and no system call: the operating
//! system is asked once per 8,192 draws. If it fails then, the generator goes on with its
//! current key (still a sound ChaCha stream) and asks again 64 draws later; only a thread's
//! first seeding, and a forked child's, must succeed. A forked child starts with a copy of its parent's generators,
//! which would give both processes the same bits; the fork check (`forkguard`: a
//! `pthread_atfork` handler bumps a counter, so the check is one load; where the handler
//! cannot be registered, the process ID is compared on every draw) makes the child reseed
//! first.

use std::cell::RefCell;

use rand_chacha::ChaCha12Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};

use crate::error::Error;

/// Bytes a generator produces before it is seeded again from the operating system (what
/// `rand`'s `ThreadRng` does too).
const RESEED_AFTER_BYTES: u32 = 64 * 1024;

/// Bytes in one draw.
const DRAW_BYTES: u32 = 8;

/// Draws until a failed periodic reseed is tried again.
const RESEED_RETRY_DRAWS: u32 = 64;

thread_local! {
    static THREAD_RANDOM: RefCell<Option<ThreadRandom>> = const { RefCell::new(None) };
}

struct ThreadRandom {
    rng: ChaCha12Rng,
    /// Draws left before the next reseed.
    draws_left: u32,
    fork: ForkCheck,
}

/// Whether this process is a fork of the one that seeded the generator.
enum ForkCheck {
    #[cfg(unix)]
    Handler(forkguard::atfork::Guard),
    ProcessId(forkguard::pid::Guard),
}

impl ForkCheck {
    fn new() -> ForkCheck {
        #[cfg(unix)]
        if let Ok(guard) = forkguard::atfork::Guard::try_new() {
            return ForkCheck::Handler(guard);
        }
        ForkCheck::ProcessId(forkguard::pid::Guard::default())
    }

    #[inline]
    fn forked(&mut self) -> bool {
        match self {
            #[cfg(unix)]
            ForkCheck::Handler(guard) => guard.detected_fork(),
            ForkCheck::ProcessId(guard) => guard.detected_fork(),
        }
    }
}

impl ThreadRandom {
    fn seeded() -> Result<ThreadRandom, Error> {
        Ok(ThreadRandom {
            rng: ChaCha12Rng::from_seed(os_seed()?),
            draws_left: RESEED_AFTER_BYTES / DRAW_BYTES,
            fork: ForkCheck::new(),
        })
    }
}

impl ThreadRandom {
    /// A fresh key from the operating system, or, if it fails, the current stream for a
    /// while longer.
    #[cold]
    fn reseed(&mut self) {
        match os_seed() {
            Ok(seed) => {
                self.rng = ChaCha12Rng::from_seed(seed);
                self.draws_left = RESEED_AFTER_BYTES / DRAW_BYTES;
            }
            Err(_) => self.draws_left = RESEED_RETRY_DRAWS,
        }
    }
}

fn os_seed() -> Result<[u8; 32], Error> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|error| Error::RandomSource {
        reason: error.to_string(),
    })?;
    Ok(seed)
}

/// 64 fresh random bits from this thread's generator.
///
/// Fails only when the operating system's random source fails on a thread's first draw or
/// on a forked child's first draw; nothing is drawn then.
#[inline]
pub(crate) fn draw() -> Result<u64, Error> {
    // The common case in a few instructions; seeding, reseeding and the fork apart.
    match THREAD_RANDOM.with_borrow_mut(|slot| {
        let random = slot.as_mut()?;
        if random.draws_left == 0 || random.fork.forked() {
            return None;
        }
        random.draws_left -= 1;
        Some(random.rng.next_u64())
    }) {
        Some(word) => Ok(word),
        None => draw_after_seeding(),
    }
}

/// A draw after seeding the thread's generator: for its first draw, in a forked child, or
/// when it is due to be seeded again.
#[cold]
#[inline(never)]
fn draw_after_seeding() -> Result<u64, Error> {
    THREAD_RANDOM.with_borrow_mut(|slot| {
        // Only due, not forked: then a failed reseed may go on with the current stream. (The
        // fast path asks about a fork only while draws are left, so a fork it has seen comes
        // here with draws left, and is reseeded below.)
        let due_in_this_process = slot
            .as_mut()
            .is_some_and(|random| random.draws_left == 0 && !random.fork.forked());
        let random = match slot {
            Some(random) if due_in_this_process => {
                random.reseed();
                random
            }
            // First draw, or the parent's stream in a child: never to be used again here.
            _ => slot.insert(ThreadRandom::seeded()?),
        };
        random.draws_left -= 1;
        Ok(random.rng.next_u64())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ_and_go_on_across_a_reseed() {
        let draws: std::collections::HashSet<u64> = (0..3 * RESEED_AFTER_BYTES / DRAW_BYTES)
            .map(|_| draw().unwrap())
            .collect();
        assert_eq!(draws.len() as u32, 3 * RESEED_AFTER_BYTES / DRAW_BYTES);
    }

    #[test]
    fn each_thread_draws_its_own_bits() {
        let here = draw().unwrap();
        let there = std::thread::spawn(|| draw().unwrap()).join().unwrap();
        assert_ne!(here, there);
    }
}
