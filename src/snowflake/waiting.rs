//! The calls of a [`Generator`] that can wait, as `async` ones (feature `tokio`): where
//! [`Generator::next_id`] spins and yields its thread until the clock reaches a millisecond
//! with free sequence numbers, [`Generator::next_id_async`] sleeps on the runtime's timer,
//! so that the executor's thread serves other tasks meanwhile. Both take their IDs through
//! the same compare-and-swap, so sync and async callers share one generator.

use std::time::Duration;

use crate::clock::Clock;
use crate::error::Error;

use super::generator::Generator;
use super::id::Id;

impl<C: Clock> Generator<C> {
    /// As [`Generator::next_id`], but a call that would wait for the next millisecond (its
    /// sequence used up, or the clock behind within the tolerance) sleeps on Tokio's timer
    /// instead of holding its thread: 10,000 such calls at once hold no thread of their
    /// own, and a current-thread runtime runs its other tasks meanwhile. Needs a Tokio
    /// runtime with the time driver enabled (`enable_time`, or `enable_all`).
    ///
    /// Cancel-safe: a call dropped while it waits has taken nothing. It fails as
    /// `next_id` does, never with [`Error::WouldBlock`], and counts in
    /// [`Stats::sequence_exhausted`](crate::Stats::sequence_exhausted) once per wait, as
    /// `next_id` does. Under Tokio's paused time (tests), give the generator a clock that
    /// reads Tokio's: the runtime's clock then moves the generator's.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let generator = idgen::Generator::builder().worker(3).build()?;
    /// let a = generator.next_id_async().await?;
    /// let b = generator.next_id_async().await?;
    /// assert!(a < b);
    /// # Ok::<(), idgen::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn next_id_async(&self) -> Result<Id, Error> {
        let mut again = false;
        loop {
            match self.try_run(1, again) {
                Ok(mut run) => {
                    if let Some(id) = run.next() {
                        return Ok(id);
                    }
                }
                Err(Error::WouldBlock { wait_ms }) => sleep_ms(wait_ms).await,
                Err(error) => return Err(error),
            }
            again = true;
        }
    }

    /// As [`Generator::next_ids`], waiting as [`Generator::next_id_async`] does: `n` IDs in
    /// increasing order, one compare-and-swap per millisecond the batch spans.
    ///
    /// A batch dropped before it ends leaves the IDs it had reserved unused (a gap, never
    /// issued), as a failed batch does.
    pub async fn next_ids_async(&self, n: usize) -> Result<Vec<Id>, Error> {
        let mut ids = Vec::new();
        ids.try_reserve_exact(n)
            .map_err(|_| Error::BatchTooLarge { requested: n })?;
        // Each wait for a millisecond is counted once, as a sync batch counts it.
        let mut again = false;
        while ids.len() < n {
            match self.try_run(n - ids.len(), again) {
                Ok(run) => {
                    ids.extend(run);
                    again = false;
                }
                Err(Error::WouldBlock { wait_ms }) => {
                    sleep_ms(wait_ms).await;
                    again = true;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(ids)
    }
}

/// Sleeps on the runtime's timer until the millisecond a `WouldBlock` named (at least one:
/// the timer's resolution).
async fn sleep_ms(wait_ms: u64) {
    tokio::time::sleep(Duration::from_millis(wait_ms.max(1))).await;
}
