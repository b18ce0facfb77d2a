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
    /// Unit tests: reports a fork once.
    #[cfg(test)]
    Simulated(bool),
}

impl ForkCheck {
    fn new() -> ForkCheck {
        #[cfg(unix)]
        if let Ok(guard) = forkguard::atfork::Guard::try_new() {
            return ForkCheck::Handler(guard);
        }
        ForkCheck::ProcessId(forkguard::pid::Guard::default())
    }

    /// Whether a fork happened since the last call (each fork is reported once).
    #[inline]
    fn forked(&mut self) -> bool {
        match self {
            #[cfg(unix)]
            ForkCheck::Handler(guard) => guard.detected_fork(),
            ForkCheck::ProcessId(guard) => guard.detected_fork(),
            #[cfg(test)]
            ForkCheck::Simulated(forked) => std::mem::take(forked),
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
    os_fill(&mut seed)?;
    Ok(seed)
}

fn os_fill(bytes: &mut [u8]) -> Result<(), Error> {
    #[cfg(test)]
    if tests::FAIL_OS.with(|fail| fail.get()) {
        return Err(Error::RandomSource {
            reason: "made to fail by a test".into(),
        });
    }
    getrandom::fill(bytes).map_err(|error| Error::RandomSource {
        reason: error.to_string(),
    })
}

/// 64 fresh random bits from this thread's generator.
///
/// Fails only when the operating system's random source fails where nothing else will do:
/// on a thread's first draw, a forked child's first draw, or a draw from a thread-local
/// destructor after this thread's generator is gone (then the operating system is asked
/// directly). Nothing is drawn then.
#[inline]
pub(crate) fn draw() -> Result<u64, Error> {
    // The common case in a few instructions; seeding, reseeding and the fork apart.
    let fast = THREAD_RANDOM.try_with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        let random = slot.as_mut()?;
        if random.draws_left == 0 || random.fork.forked() {
            return None;
        }
        random.draws_left -= 1;
        Some(random.rng.next_u64())
    });
    match fast {
        Ok(Some(word)) => Ok(word),
        _ => draw_after_seeding(),
    }
}

/// A draw after seeding the thread's generator: for its first draw, in a forked child, or
/// when it is due to be seeded again. Once the thread's generator is gone (a draw from a
/// thread-local destructor), straight from the operating system.
#[cold]
#[inline(never)]
fn draw_after_seeding() -> Result<u64, Error> {
    let drawn = THREAD_RANDOM.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return os_word();
        };
        // Only due, not forked: then a failed reseed may go on with the current stream. (The
        // fast path asks about a fork only while draws are left, so a fork it has seen comes
        // here with draws left, and is reseeded below.)
        let due_in_this_process = slot
            .as_mut()
            .is_some_and(|random| random.draws_left == 0 && !random.fork.forked());
        let random = match &mut *slot {
            Some(random) if due_in_this_process => {
                random.reseed();
                random
            }
            // First draw, or the parent's stream in a child: never to be used again here,
            // not even when seeding fails.
            other => {
                if other.take().is_some() {
                    crate::recent_clock::after_fork();
                }
                other.insert(ThreadRandom::seeded()?)
            }
        };
        random.draws_left -= 1;
        Ok(random.rng.next_u64())
    });
    drawn.unwrap_or_else(|_| os_word())
}

fn os_word() -> Result<u64, Error> {
    let mut word = [0u8; 8];
    os_fill(&mut word)?;
    Ok(u64::from_ne_bytes(word))
}

#[cfg(test)]
pub(super) mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Makes this thread's requests to the operating system fail.
        pub(super) static FAIL_OS: Cell<bool> = const { Cell::new(false) };
    }

    /// This thread's generator, for a look at its state.
    fn with_generator<R>(f: impl FnOnce(&mut ThreadRandom) -> R) -> R {
        THREAD_RANDOM.with_borrow_mut(|slot| f(slot.as_mut().unwrap()))
    }

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

    #[test]
    fn a_fork_whose_reseed_fails_never_draws_the_parents_stream() {
        draw().unwrap();
        let parent_next: Vec<u64> = with_generator(|random| {
            random.fork = ForkCheck::Simulated(true);
            let mut parent = random.rng.clone();
            (0..64).map(|_| parent.next_u64()).collect()
        });
        FAIL_OS.with(|fail| fail.set(true));
        // The fork is seen once; seeding fails, and keeps failing: the parent's stream is
        // gone, not resumed.
        for _ in 0..3 {
            assert!(matches!(draw(), Err(Error::RandomSource { .. })));
        }
        FAIL_OS.with(|fail| fail.set(false));
        let child: Vec<u64> = (0..64).map(|_| draw().unwrap()).collect();
        assert!(child.iter().all(|word| !parent_next.contains(word)));
    }

    #[test]
    fn a_failed_periodic_reseed_goes_on_with_the_stream_and_retries_soon() {
        draw().unwrap();
        let expected = with_generator(|random| {
            random.draws_left = 0;
            random.rng.clone().next_u64()
        });
        FAIL_OS.with(|fail| fail.set(true));
        assert_eq!(draw(), Ok(expected));
        FAIL_OS.with(|fail| fail.set(false));
        assert_eq!(
            with_generator(|random| random.draws_left),
            RESEED_RETRY_DRAWS - 1
        );
    }

    #[test]
    fn a_draw_from_a_thread_local_destructor_never_panics() {
        struct DrawsOnDrop(std::sync::mpsc::Sender<Result<u64, Error>>);
        impl Drop for DrawsOnDrop {
            fn drop(&mut self) {
                let _ = self.0.send(draw());
            }
        }
        thread_local! {
            static GUARD: Cell<Option<DrawsOnDrop>> = const { Cell::new(None) };
        }
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // The guard's destructor is registered first, so it runs after the generator's.
            GUARD.with(|guard| guard.set(Some(DrawsOnDrop(send))));
            draw().unwrap();
        })
        .join()
        .unwrap();
        assert!(receive.recv().unwrap().is_ok());
    }
}
