//! A [`BlockAllocator`]'s calls that can wait, as `async` ones (feature `tokio`): a caller
//! that finds both blocks used up waits for the fetcher thread's block on a
//! [`tokio::sync::Notify`] signalled with the threads' condition variable, under a runtime
//! timer for `max_wait`, instead of blocking its thread.

use std::sync::MutexGuard;

use super::allocator::BlockAllocator;
use super::fetcher::{Shared, State};
use crate::error::Error;

impl BlockAllocator {
    /// As [`next`](Self::next), but a call that finds both blocks used up waits for the
    /// next block without holding its thread: it sleeps on the runtime until the fetcher
    /// thread installs the block, or until [`max_wait`](super::AllocatorBuilder::max_wait)
    /// (a Tokio timer) has passed. A current-thread runtime runs its other tasks meanwhile.
    /// Needs a Tokio runtime with the time driver enabled.
    ///
    /// Cancel-safe: a call dropped while it waits has taken nothing. `max_wait` is a timer
    /// on Tokio's clock: under paused time (tests) it passes as soon as the runtime has
    /// nothing else to do, since the fetcher is a thread the runtime does not see.
    pub async fn next_async(&self) -> Result<u64, Error> {
        self.shared.check_process()?;
        if let Some((first, upto)) = self.shared.cursor.take(1) {
            self.shared.after_take(first, upto);
            return Ok(first);
        }
        let mut values = [0];
        self.fill_async(&mut values).await?;
        Ok(values[0])
    }

    /// As [`next_n`](Self::next_n), waiting as [`next_async`](Self::next_async) does.
    /// Values taken by a call dropped before it ends are a gap, never handed out.
    pub async fn next_n_async(&self, n: usize) -> Result<Vec<u64>, Error> {
        let mut values = Vec::new();
        values
            .try_reserve_exact(n)
            .map_err(|_| Error::BatchTooLarge { requested: n })?;
        values.resize(n, 0);
        self.fill_async(&mut values).await?;
        Ok(values)
    }

    async fn fill_async(&self, out: &mut [u64]) -> Result<(), Error> {
        let shared = &*self.shared;
        shared.check_process()?;
        let mut filled = 0;
        let mut deadline = None;
        while filled < out.len() {
            match shared.take_into(&mut out[filled..]) {
                0 => {
                    // No deadline for a wait too long to add (`Duration::MAX`: for ever).
                    let deadline = *deadline.get_or_insert_with(|| {
                        tokio::time::Instant::now().checked_add(shared.config.max_wait)
                    });
                    refill_async(shared, deadline).await?;
                }
                taken => filled += taken,
            }
        }
        Ok(())
    }
}

/// [`Shared::refill`] for a task: the same decisions, a wait on `changed_async` (registered
/// before the state is read, so no signal is missed) instead of the condition variable.
async fn refill_async(
    shared: &Shared,
    deadline: Option<tokio::time::Instant>,
) -> Result<(), Error> {
    let mut counted = false;
    let mut waiter = Waiter {
        shared,
        waiting: false,
    };
    loop {
        let changed = shared.changed_async.notified();
        let mut changed = std::pin::pin!(changed);
        changed.as_mut().enable();
        {
            let mut state = shared.lock();
            // Uncounted under the lock the state is read under, as the threads do: the
            // fetcher never sees no waiter between two turns of one.
            if waiter.waiting {
                state.waiters -= 1;
                waiter.waiting = false;
            }
            if let Some(decided) = shared.refill_decided(&mut state, &mut counted) {
                return decided;
            }
            if deadline.is_some_and(|deadline| tokio::time::Instant::now() >= deadline) {
                return Err(shared.unavailable(&state));
            }
            // A fetch that ends after this unlock signals the task.
            state.waiters += 1;
            waiter.waiting = true;
        }
        match deadline {
            Some(deadline) => {
                let _ = tokio::time::timeout_at(deadline, changed).await;
            }
            None => changed.await,
        }
    }
}

/// A task that may be counted among the state's waiters (the fetcher signals and retries
/// only while someone waits): uncounted if it is dropped while it waits.
struct Waiter<'a> {
    shared: &'a Shared,
    waiting: bool,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.waiting {
            let mut state: MutexGuard<'_, State> = self.shared.lock();
            state.waiters -= 1;
        }
    }
}
