//! Random bits for the 128-bit kinds: one ChaCha8 generator per thread (eight rounds: see
//! the design notes for why not twelve), seeded from the operating system, reseeded after
//! every 64 KiB it produces and, in a forked child, before its first draw.
//!
//! A draw (one `u64`) is a word of the thread's current block of ChaCha output (256 bytes,
//! computed at once) and no system call: the operating system is asked once per 8,192
//! draws. If it fails then, the generator goes on with its current key (still a sound
//! ChaCha stream) and asks again two blocks later; only a thread's first seeding, and a
//! forked child's, must succeed.
//!
//! A forked child starts with a copy of its parent's generators,
//! which would give both processes the same bits; the fork check (`forkguard`: a
//! `pthread_atfork` handler bumps a counter, so the check is one load; where the handler
//! cannot be registered, the process ID is compared on every draw) makes the child reseed
//! first.

use std::cell::RefCell;

use rand_chacha::ChaCha8Core;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::rand_core::block::Generator;

use crate::error::Error;
use crate::fork_check::ForkCheck;

/// Words in one ChaCha output block (four 64-byte blocks, computed at once).
const BLOCK_WORDS: usize = 32;

/// Blocks a generator produces before it is seeded again from the operating system: 64 KiB,
/// as `rand`'s `ThreadRng` does.
const RESEED_AFTER_BLOCKS: u32 = 64 * 1024 / (BLOCK_WORDS as u32 * 8);

/// Blocks until a failed periodic reseed is tried again.
const RESEED_RETRY_BLOCKS: u32 = 2;

thread_local! {
    static THREAD_RANDOM: RefCell<Option<ThreadRandom>> = const { RefCell::new(None) };
}

struct ThreadRandom {
    core: ChaCha8Core,
    /// The current block of output; `words[next..]` are still to be drawn.
    words: [u64; BLOCK_WORDS],
    next: usize,
    /// Blocks left before the next reseed.
    blocks_left: u32,
    fork: ForkCheck,
}

impl ThreadRandom {
    /// A generator for this thread: its first, or a new one in a forked child.
    fn seeded() -> Result<ThreadRandom, Error> {
        // A thread's first draw may be a forked child's first: whatever thread notices first
        // tells the default clock, whose upkeep thread stayed with the parent.
        crate::clock::notice_fork();
        Ok(ThreadRandom {
            core: ChaCha8Core::from_seed(os_seed()?),
            words: [0; BLOCK_WORDS],
            next: BLOCK_WORDS,
            blocks_left: RESEED_AFTER_BLOCKS,
            fork: ForkCheck::new(),
        })
    }

    /// The next block, from a fresh key from the operating system when one is due (if that
    /// fails, the current stream goes on for a little longer).
    #[cold]
    fn refill(&mut self) {
        if self.blocks_left == 0 {
            match os_seed() {
                Ok(seed) => {
                    self.core = ChaCha8Core::from_seed(seed);
                    self.blocks_left = RESEED_AFTER_BLOCKS;
                }
                Err(_) => self.blocks_left = RESEED_RETRY_BLOCKS,
            }
        }
        self.blocks_left -= 1;
        let mut block = [0u32; 2 * BLOCK_WORDS];
        self.core.generate(&mut block);
        for (word, halves) in self.words.iter_mut().zip(block.chunks_exact(2)) {
            *word = u64::from(halves[0]) | u64::from(halves[1]) << 32;
        }
        self.next = 0;
    }

    #[inline]
    fn take(&mut self) -> u64 {
        if self.next == BLOCK_WORDS {
            self.refill();
        }
        self.next += 1;
        self.words[self.next - 1]
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
        if random.next == BLOCK_WORDS || random.fork.forked() {
            return None;
        }
        random.next += 1;
        Some(random.words[random.next - 1])
    });
    match fast {
        Ok(Some(word)) => Ok(word),
        _ => draw_after_seeding(),
    }
}

/// A draw after seeding the thread's generator: for its first draw, in a forked child, or
/// when its block is used up (and, every 64 KiB, it is due to be seeded again). Once the
/// thread's generator is gone (a draw from a thread-local destructor), straight from the
/// operating system.
#[cold]
#[inline(never)]
fn draw_after_seeding() -> Result<u64, Error> {
    let drawn = THREAD_RANDOM.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return os_word();
        };
        // Only a used-up block, not forked: then the generator goes on. (The fast path asks
        // about a fork only while words are left, so a fork it has seen comes here with words
        // left, and is reseeded below.)
        let used_up_in_this_process = slot
            .as_mut()
            .is_some_and(|random| random.next == BLOCK_WORDS && !random.fork.forked());
        let random = match &mut *slot {
            Some(random) if used_up_in_this_process => random,
            // First draw, or the parent's stream in a child: never to be used again here,
            // not even when seeding fails.
            other => {
                *other = None;
                other.insert(ThreadRandom::seeded()?)
            }
        };
        Ok(random.take())
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
        let count = 3 * RESEED_AFTER_BLOCKS as usize * BLOCK_WORDS;
        let draws: std::collections::HashSet<u64> = (0..count).map(|_| draw().unwrap()).collect();
        assert_eq!(draws.len(), count);
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
            let mut parent = ThreadRandom {
                core: random.core.clone(),
                words: random.words,
                next: random.next,
                blocks_left: random.blocks_left,
                fork: ForkCheck::Simulated(false),
            };
            (0..64).map(|_| parent.take()).collect()
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

    /// The next block of a generator's current key, without drawing it.
    fn next_block_of_this_key(random: &ThreadRandom) -> u64 {
        let mut block = [0u32; 2 * BLOCK_WORDS];
        random.core.clone().generate(&mut block);
        u64::from(block[0]) | u64::from(block[1]) << 32
    }

    #[test]
    fn a_failed_periodic_reseed_goes_on_with_the_stream_and_retries_soon() {
        draw().unwrap();
        let expected = with_generator(|random| {
            random.next = BLOCK_WORDS;
            random.blocks_left = 0;
            next_block_of_this_key(random)
        });
        FAIL_OS.with(|fail| fail.set(true));
        assert_eq!(draw(), Ok(expected));
        FAIL_OS.with(|fail| fail.set(false));
        assert_eq!(
            with_generator(|random| random.blocks_left),
            RESEED_RETRY_BLOCKS - 1
        );
    }

    #[test]
    fn a_thread_reseeds_by_itself_after_64_kib() {
        std::thread::spawn(|| {
            let first: Vec<u64> = (0..BLOCK_WORDS).map(|_| draw().unwrap()).collect();
            let rest = (RESEED_AFTER_BLOCKS as usize - 1) * BLOCK_WORDS;
            (0..rest).for_each(|_| {
                draw().unwrap();
            });
            assert_eq!(with_generator(|random| random.blocks_left), 0);
            let old_key = with_generator(|random| next_block_of_this_key(random));
            assert_ne!(draw(), Ok(old_key));
            assert_eq!(
                with_generator(|random| random.blocks_left),
                RESEED_AFTER_BLOCKS - 1
            );
            assert!(!first.contains(&old_key));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_block_is_every_word_of_chacha_output_once_in_order() {
        draw().unwrap();
        let expected: Vec<u64> = with_generator(|random| {
            random.next = BLOCK_WORDS;
            let mut block = [0u32; 2 * BLOCK_WORDS];
            random.core.clone().generate(&mut block);
            block
                .chunks_exact(2)
                .map(|pair| u64::from(pair[0]) | u64::from(pair[1]) << 32)
                .collect()
        });
        let drawn: Vec<u64> = (0..BLOCK_WORDS).map(|_| draw().unwrap()).collect();
        assert_eq!(drawn, expected);
    }

    #[test]
    fn a_fork_seen_as_the_block_runs_out_never_draws_the_parents_next_block() {
        draw().unwrap();
        with_generator(|random| {
            random.next = BLOCK_WORDS;
            random.fork = ForkCheck::Simulated(true);
        });
        FAIL_OS.with(|fail| fail.set(true));
        assert!(matches!(draw(), Err(Error::RandomSource { .. })));
        FAIL_OS.with(|fail| fail.set(false));
    }

    #[test]
    fn a_due_reseed_takes_a_new_key() {
        draw().unwrap();
        let old_key = with_generator(|random| {
            random.next = BLOCK_WORDS;
            random.blocks_left = 0;
            next_block_of_this_key(random)
        });
        assert_ne!(draw(), Ok(old_key));
        assert_eq!(
            with_generator(|random| random.blocks_left),
            RESEED_AFTER_BLOCKS - 1
        );
    }

    #[test]
    fn a_draw_from_a_thread_local_destructor_never_panics() {
        struct DrawsOnDrop(std::sync::mpsc::Sender<Result<u64, Error>>);
        impl Drop for DrawsOnDrop {
            fn drop(&mut self) {
                // Whether the generator is gone by now depends on whether its type needs a
                // destructor; either way the draw must neither panic nor fail.
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
