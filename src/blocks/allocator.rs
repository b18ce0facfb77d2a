//! [`BlockAllocator`]: one sequence served from blocks, lock-free between block switches.
//! What it shares with its fetcher thread, and the fetching, are in `fetcher.rs`; its
//! configuration in `allocator_builder.rs`.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::SequenceName;
use super::fetcher::Shared;
use crate::error::Error;
use crate::sync::Ordering;

/// Values of one named sequence, served from blocks a [`BlockStore`](super::BlockStore) grants.
///
/// `next` and `next_n` take values from the current block with one compare-and-swap, from
/// any number of threads at once. When a configurable share of the block is used
/// ([`AllocatorBuilder::refill_at`](super::AllocatorBuilder::refill_at), 10% by default) a background thread fetches the next
/// block, so that callers wait on the store only when both are used up, and then at most
/// [`AllocatorBuilder::max_wait`](super::AllocatorBuilder::max_wait) before [`Error::BlocksUnavailable`]. The block size
/// doubles when a block lasted less than the target lifetime (15 minutes by default) and
/// halves when it lasted more than twice as long, within a minimum and a maximum.
///
/// Values are unique across every allocator of the same sequence and store, increase
/// within each allocator (and so within each thread), and fit a positive `i64`. Across
/// allocators they interleave block by block. On [`close`](BlockAllocator::close) (or
/// drop) the unused values go back to the store if nobody has taken a block since, so a
/// clean restart leaves no gap; a crash leaves a gap of at most two blocks.
///
/// ```
/// use idgen::blocks::{BlockAllocator, FileStore};
/// # let dir = std::env::temp_dir().join(format!("idgen-doc-alloc-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let orders = BlockAllocator::builder(store, "orders")?.block_size(100).build()?;
/// assert_eq!(orders.next()?, 1);
/// assert_eq!(orders.next_n(3)?, vec![2, 3, 4]);
/// orders.close()?; // gives 5..101 back: the next process starts at 5
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idgen::Error>(())
/// ```
pub struct BlockAllocator {
    pub(super) shared: Arc<Shared>,
    pub(super) fetcher: Mutex<Option<JoinHandle<()>>>,
}

/// Counters of a [`BlockAllocator`], from [`BlockAllocator::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AllocatorStats {
    /// Grant requests sent to the store (failed ones included).
    pub round_trips: u64,
    /// Grant requests that failed (the store away, or refusing).
    pub failed_round_trips: u64,
    /// Blocks installed.
    pub blocks: u64,
    /// The size the next block is asked for with.
    pub block_size: u64,
    /// Calls that found both blocks used up and waited on the store.
    pub waits: u64,
}

impl BlockAllocator {
    /// The sequence.
    pub fn sequence(&self) -> &SequenceName {
        &self.shared.sequence
    }

    /// The next value.
    ///
    /// Fails with [`Error::BlocksUnavailable`] (transient) when both blocks are used up and
    /// the store gave none within the configured wait, [`Error::SequenceExhausted`] at the
    /// end of the `i64` range, and [`Error::AllocatorClosed`] after [`close`](Self::close).
    #[inline]
    pub fn next(&self) -> Result<u64, Error> {
        self.shared.check_process()?;
        if let Some((first, upto)) = self.shared.cursor.take(1) {
            self.shared.after_take(first, upto);
            return Ok(first);
        }
        self.next_slow()
    }

    #[cold]
    fn next_slow(&self) -> Result<u64, Error> {
        let mut values = [0];
        self.fill(&mut values)?;
        Ok(values[0])
    }

    /// `n` values, increasing. Fails as [`next`](Self::next) does, and with
    /// [`Error::BatchTooLarge`] when the vector cannot be allocated; values taken before a
    /// failure are dropped (a gap, never handed out).
    pub fn next_n(&self, n: usize) -> Result<Vec<u64>, Error> {
        let mut values = Vec::new();
        values
            .try_reserve_exact(n)
            .map_err(|_| Error::BatchTooLarge { requested: n })?;
        values.resize(n, 0);
        self.fill(&mut values)?;
        Ok(values)
    }

    /// Fills `out` with increasing values, taking them a run at a time.
    pub fn fill(&self, out: &mut [u64]) -> Result<(), Error> {
        let shared = &*self.shared;
        shared.check_process()?;
        let mut filled = 0;
        let mut deadline = None;
        while filled < out.len() {
            match shared.take_into(&mut out[filled..]) {
                0 => {
                    // No deadline for a wait too long to add (`Duration::MAX`: wait for ever).
                    let deadline = *deadline
                        .get_or_insert_with(|| Instant::now().checked_add(shared.config.max_wait));
                    shared.refill(deadline)?;
                }
                taken => filled += taken,
            }
        }
        Ok(())
    }

    /// Counters: round trips, blocks, the next block's size, waits.
    pub fn stats(&self) -> AllocatorStats {
        let shared = &*self.shared;
        let state = shared.lock();
        AllocatorStats {
            round_trips: shared.round_trips.load(Ordering::Relaxed),
            failed_round_trips: shared.failed_round_trips.load(Ordering::Relaxed),
            blocks: state.blocks,
            block_size: state.size,
            waits: shared.waits.load(Ordering::Relaxed),
        }
    }

    /// Stops handing out values and gives the unused ones back to the store, if nobody has
    /// taken a block of the sequence since (then `true`: a restart continues without a
    /// gap). A fetch under way gets up to `max_wait` to end; if it has not, nothing is
    /// given back (`Ok(false)`: the unused values are a gap). Later calls fail with
    /// [`Error::AllocatorClosed`]; closing again returns `Ok(false)`. Dropping the
    /// allocator closes it too, logging a failure instead of returning it. In a forked
    /// child it does nothing: the blocks are the parent's.
    pub fn close(&self) -> Result<bool, Error> {
        let shared = &*self.shared;
        if shared.birth.in_forked_child() {
            // The parent still serves these blocks, and this process has no fetcher thread
            // (its lock may even be held by a thread that did not come along): touch nothing.
            return Ok(false);
        }
        let (unused_from, current, prefetched) = {
            let mut state = shared.lock();
            if state.closed {
                return Ok(false);
            }
            state.closed = true;
            shared.closing.store(true, Ordering::SeqCst);
            shared.signal();
            // A fetch under way gets `max_wait` to end; past that its block, if it ever
            // comes, is a gap, and nothing is given back.
            let deadline = Instant::now().checked_add(shared.config.max_wait);
            while state.fetching {
                let now = Instant::now();
                let Some(left) = deadline.map(|deadline| deadline.saturating_duration_since(now))
                else {
                    state.waiters += 1;
                    state = shared.wait(state);
                    state.waiters -= 1;
                    continue;
                };
                if left.is_zero() {
                    shared.cursor.close();
                    return Ok(false);
                }
                state.waiters += 1;
                state = shared.wait_timeout(state, left);
                state.waiters -= 1;
            }
            (
                shared.cursor.close(),
                state.current,
                state.prefetched.take(),
            )
        };
        let fetcher = self
            .fetcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(fetcher) = fetcher {
            // No fetch is under way, and it exits as soon as it sees `closing`.
            let _ = fetcher.join();
        }
        let sequence = &shared.sequence;
        match (current, prefetched) {
            (current, Some(next)) => {
                // The current block's tail joins the prefetched block when they touch.
                let from = match current {
                    Some(current) if current.end == next.first => unused_from,
                    _ => next.first,
                };
                shared.store.give_back(sequence, &next, from)
            }
            (Some(current), None) if unused_from < current.end => {
                shared.store.give_back(sequence, &current, unused_from)
            }
            _ => Ok(false),
        }
    }
}

impl Drop for BlockAllocator {
    /// Closes: may block on the store (at most `max_wait` for a fetch under way, then a
    /// give-back); from async code, close or drop it with `spawn_blocking`.
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            log::warn!(
                "sequence {}: the unused values were not given back: {error}",
                self.shared.sequence
            );
        }
    }
}

impl fmt::Debug for BlockAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockAllocator")
            .field("sequence", &self.shared.sequence)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
