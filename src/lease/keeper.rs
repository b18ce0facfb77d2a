//! Keeping a number once taken (see `acquire.rs` for the taking): renewals and mark writes,
//! retries through an outage, reacquiring after a loss, releasing. One thread keeps every
//! number of a process.

use std::cell::Cell;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::Error;
use crate::snowflake::Generator;
use crate::sync::{Arc, AtomicU64, Ordering};

use super::acquire::{WAIT_REPORT_EVERY, take_number};
use super::stats::{LeaseState, LeaseStats};
use super::timing::{Timing, millis};
use super::watch::{AcquireWatch, MarkWait};
use super::{Claim, LeaseStore, WorkerRange};

#[derive(Default)]
pub(super) struct Counters {
    pub(super) renewals: AtomicU64,
    pub(super) outages: AtomicU64,
    pub(super) renewal_failures: AtomicU64,
    pub(super) reacquisitions: AtomicU64,
    /// A [`LeaseState`] as a number, for the states the ceiling does not tell.
    pub(super) state: AtomicU64,
}

pub(super) const STATE_HELD: u64 = 0;
pub(super) const STATE_LOST: u64 = 1;
pub(super) const STATE_RELEASED: u64 = 2;

pub(super) struct Marks {
    /// The last mark written to the store.
    pub(super) written_unix_ms: AtomicU64,
    /// The previous holder's mark of the number held now (0: none).
    pub(super) previous_unix_ms: AtomicU64,
    /// When the last proven lease ends at the earliest: request sent + TTL.
    pub(super) lease_end_unix_ms: AtomicU64,
    /// When the current outage began (the first failed renewal since the last success);
    /// 0: renewals succeed.
    pub(super) outage_since_unix_ms: AtomicU64,
}

/// Everything the keeper thread and the generator's owner share.
pub(super) struct Keeper<C: Clock> {
    pub(super) generator: Generator<C>,
    pub(super) store: Arc<dyn LeaseStore>,
    pub(super) range: WorkerRange,
    pub(super) timing: Timing,
    /// The name recorded with each claim, for the fleet view.
    pub(super) holder: String,
    pub(super) claim: Mutex<Option<Box<dyn Claim>>>,
    pub(super) marks: Marks,
    pub(super) counters: Counters,
    /// Shared by every number the one keeper thread keeps.
    pub(super) control: Arc<Control>,
}

/// Stops the keeper thread, and wakes it to notice; shows its waits for a mark.
#[derive(Default)]
pub(super) struct Control {
    stop: Mutex<bool>,
    wake: Condvar,
    pub(super) watch: AcquireWatch,
}

impl Control {
    pub(super) fn watched(watch: AcquireWatch) -> Control {
        Control {
            watch,
            ..Control::default()
        }
    }

    pub(super) fn stopped(&self) -> bool {
        *lock(&self.stop)
    }

    pub(super) fn stop(&self) {
        *lock(&self.stop) = true;
        self.wake.notify_all();
    }
}

/// The keeper thread: renews every number in `keepers` on its own schedule (retrying a
/// failed one with backoff, taking a new number after a loss) until `control` stops it.
pub(super) fn keep<C: Clock>(keepers: &[Keeper<C>], control: &Control) {
    let Some(first) = keepers.first() else {
        return;
    };
    let renew_every = first.timing.renew_every;
    let next_attempt: Vec<Cell<Instant>> = keepers
        .iter()
        .map(|_| Cell::new(Instant::now() + renew_every))
        .collect();
    let retry: Vec<Cell<Duration>> = keepers.iter().map(|_| Cell::new(RETRY_FIRST)).collect();
    // One attempt for number `i` if it is due; `meanwhile` for a reacquire's wait.
    let attempt = |i: usize, meanwhile: &dyn Fn()| {
        let due = next_attempt[i].get();
        if Instant::now() < due {
            return;
        }
        let renewing = !keepers[i].is_lost();
        if keepers[i].attempt(meanwhile) {
            // Half an interval late is a store or a process too slow for comfort: the
            // margin before the lease's end is what absorbs it.
            let late = Instant::now().saturating_duration_since(due);
            if renewing && late > renew_every / 2 {
                keepers[i].renewed_late(late);
            }
            retry[i].set(RETRY_FIRST);
            next_attempt[i].set(Instant::now() + renew_every);
        } else {
            next_attempt[i].set(Instant::now() + retry[i].get());
            retry[i].set((retry[i].get() * 2).min(renew_every).min(RETRY_MAX));
        }
    };
    loop {
        {
            let mut stop = lock(&control.stop);
            loop {
                if *stop {
                    return;
                }
                let now = Instant::now();
                let due = next_attempt.iter().map(Cell::get).min().unwrap_or(now);
                if now >= due {
                    break;
                }
                stop = control
                    .wake
                    .wait_timeout(stop, due - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        for i in 0..keepers.len() {
            // While number `i` waits for a mark, the others held are renewed as they fall
            // due (never reacquired from inside another's wait).
            let others = || {
                for j in (0..keepers.len()).filter(|&j| j != i && !keepers[j].is_lost()) {
                    attempt(j, &|| {});
                }
            };
            attempt(i, &others);
        }
    }
}

impl<C: Clock> Keeper<C> {
    pub(super) fn lock_claim(&self) -> MutexGuard<'_, Option<Box<dyn Claim>>> {
        lock(&self.claim)
    }

    /// Publishes a proven lease: IDs up to the earlier of the mark and the validity's end
    /// (measured from when the request was sent) minus the margin.
    pub(super) fn grant(&self, datacenter: u64, worker: u64, sent_unix_ms: u64, mark_unix_ms: u64) {
        let ceiling = self.ceiling(sent_unix_ms, mark_unix_ms);
        self.generator.set_tenure(datacenter, worker, ceiling);
    }

    /// The ceiling of a proven lease; notes when the lease ends at the earliest.
    ///
    /// The ceiling is the mark, not the lease's end: no later holder of the number starts
    /// before the mark passes (it reads the mark, or infers one a horizon ahead), so IDs up
    /// to the mark are safe whether or not the store still knows of this lease. That is
    /// what lets a holder ride through a store outage.
    pub(super) fn ceiling(&self, sent_unix_ms: u64, mark_unix_ms: u64) -> u64 {
        let lease_end = sent_unix_ms.saturating_add(millis(self.timing.ttl));
        self.marks
            .lease_end_unix_ms
            .store(lease_end, Ordering::Relaxed);
        // The ceiling is exclusive; the mark is the last millisecond that may be used.
        mark_unix_ms.saturating_add(1)
    }

    /// A renewal got through: ends the outage, if one was running.
    fn renewed(&self) {
        let since = self.marks.outage_since_unix_ms.swap(0, Ordering::Relaxed);
        if since != 0 {
            log::info!(
                "idgen: lease store reachable again after {} ms; worker {} of datacenter {} \
                 renewed",
                self.generator.clock().now_unix_ms().saturating_sub(since),
                self.generator.worker(),
                self.generator.datacenter()
            );
        }
    }

    /// A renewal got through `late` after it fell due.
    fn renewed_late(&self, late: Duration) {
        log::warn!(
            "idgen: worker {} of datacenter {} renewed {} ms late (renewing every {} ms): the \
             lease store or this process is slow",
            self.generator.worker(),
            self.generator.datacenter(),
            late.as_millis(),
            self.timing.renew_every.as_millis()
        );
    }

    /// A renewal failed for a reason that may pass: begins an outage, if none was running.
    fn renewal_failed(&self, error: &Error) {
        self.counters
            .renewal_failures
            .fetch_add(1, Ordering::Relaxed);
        let now = self.generator.clock().now_unix_ms();
        let began = self
            .marks
            .outage_since_unix_ms
            .compare_exchange(0, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if began {
            self.counters.outages.fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "idgen: lease store outage ({error}); worker {} of datacenter {} goes on \
                 issuing up to its mark, {} ms from now",
                self.generator.worker(),
                self.generator.datacenter(),
                self.valid_for_ms()
            );
        } else {
            log::debug!(
                "idgen: renewal failed again ({error}); {} ms left before the mark",
                self.valid_for_ms()
            );
        }
    }

    /// Waits until the clock reads after the previous holder's mark, so the first ID does
    /// not fail with a clock-behind error; gives up if that is further than `limit` away.
    /// Renews `claim` with `mark` every renewal interval meanwhile, so that a wait as long
    /// as a TTL never lets the claim's own lease run out (etcd).
    /// `meanwhile` runs on every turn of the wait: the keeper thread renews the other
    /// numbers it keeps there, so one number's wait never lets another's lease lapse.
    pub(super) fn wait_past(
        &self,
        previous: Option<u64>,
        limit: Duration,
        claim: &mut dyn Claim,
        mark: u64,
        meanwhile: &dyn Fn(),
    ) -> Result<(), Error> {
        let Some(previous) = previous else {
            return Ok(());
        };
        let next_renewal = Instant::now() + self.timing.renew_every;
        let behind_ms = previous
            .saturating_add(1)
            .saturating_sub(self.generator.clock().now_unix_ms());
        if behind_ms > millis(limit) {
            return Err(Error::ClockBehindMark { behind_ms });
        }
        let deadline = Instant::now() + limit;
        let watch = &self.control.watch;
        watch.set_waiting(Some(MarkWait {
            datacenter: self.generator.datacenter(),
            worker: self.generator.worker(),
            until_unix_ms: previous.saturating_add(1),
        }));
        let waited = self.wait_for_clock(previous, deadline, next_renewal, claim, mark, meanwhile);
        watch.set_waiting(None);
        waited
    }

    /// The loop of [`Keeper::wait_past`]: renews the claim meanwhile, says every
    /// [`WAIT_REPORT_EVERY`] how long is left, and gives up on a release or a cancel.
    fn wait_for_clock(
        &self,
        previous: u64,
        deadline: Instant,
        mut next_renewal: Instant,
        claim: &mut dyn Claim,
        mark: u64,
        meanwhile: &dyn Fn(),
    ) -> Result<(), Error> {
        let mut next_report = Instant::now() + WAIT_REPORT_EVERY;
        while self.generator.clock().now_unix_ms() <= previous {
            if Instant::now() >= deadline {
                return Err(Error::ClockBehindMark {
                    behind_ms: previous
                        .saturating_add(1)
                        .saturating_sub(self.generator.clock().now_unix_ms()),
                });
            }
            if Instant::now() >= next_renewal {
                claim.renew(mark)?;
                next_renewal = Instant::now() + self.timing.renew_every;
            }
            meanwhile();
            // A release while the keeper waits here must not wait for the mark.
            if self.control.stopped() {
                return Err(Error::LeaseStore {
                    reason: "released while waiting for the previous holder's mark".to_string(),
                });
            }
            if self.control.watch.gives_up() {
                return Err(Error::LeaseStore {
                    reason: "the acquire was cancelled while waiting for the previous holder's \
                             mark"
                        .to_string(),
                });
            }
            if Instant::now() >= next_report {
                log::info!(
                    "idgen: worker {} of datacenter {} waits {} ms more for its mark",
                    self.generator.worker(),
                    self.generator.datacenter(),
                    previous
                        .saturating_add(1)
                        .saturating_sub(self.generator.clock().now_unix_ms())
                );
                next_report = Instant::now() + WAIT_REPORT_EVERY;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// One renewal, or, after a loss, one attempt at a new number.
    fn attempt(&self, meanwhile: &dyn Fn()) -> bool {
        if self.counters.state.load(Ordering::Relaxed) == STATE_LOST {
            self.reacquire(meanwhile)
        } else {
            self.renew()
        }
    }

    fn is_lost(&self) -> bool {
        self.counters.state.load(Ordering::Relaxed) == STATE_LOST
    }

    pub(super) fn renew(&self) -> bool {
        let mut claim = self.lock_claim();
        let Some(held) = claim.as_mut() else {
            return false;
        };
        let sent_unix_ms = self.generator.clock().now_unix_ms();
        let mark = sent_unix_ms
            .saturating_add(millis(self.timing.horizon))
            .max(self.marks.written_unix_ms.load(Ordering::Relaxed));
        match held.renew(mark) {
            Ok(()) => {
                self.marks.written_unix_ms.store(mark, Ordering::Relaxed);
                self.grant(held.datacenter(), held.worker(), sent_unix_ms, mark);
                self.counters.renewals.fetch_add(1, Ordering::Relaxed);
                self.renewed();
                true
            }
            Err(error @ (Error::LeaseLost { .. } | Error::LeaseStoreRestored { .. })) => {
                // Stop at once: someone else may hold the number now. The ceiling goes
                // before the claim (and with it, on the file store, the liveness lock).
                let (datacenter, worker) = (held.datacenter(), held.worker());
                self.generator.set_tenure(datacenter, worker, 0);
                self.marks.outage_since_unix_ms.store(0, Ordering::Relaxed);
                self.counters.state.store(STATE_LOST, Ordering::Relaxed);
                self.counters
                    .renewal_failures
                    .fetch_add(1, Ordering::Relaxed);
                log::error!(
                    "idgen: worker {worker} of datacenter {datacenter} was lost ({error}); \
                     taking another number from {}",
                    self.range
                );
                *claim = None;
                false
            }
            Err(error) => {
                // The mark this request carried may or may not have been written: the
                // ceiling stays at the last one known to be.
                self.renewal_failed(&error);
                false
            }
        }
    }

    /// Takes a new number after the old one was lost, and moves the generator onto it.
    pub(super) fn reacquire(&self, meanwhile: &dyn Fn()) -> bool {
        let sent_unix_ms = self.generator.clock().now_unix_ms();
        let failed = |error: Error| {
            self.counters
                .renewal_failures
                .fetch_add(1, Ordering::Relaxed);
            log::warn!("idgen: taking a new worker number failed: {error}");
            false
        };
        // The store may have been re-initialised for another layout since (a wiped
        // namespace): every number taken is checked, not only the first.
        if let Err(error) = self.store.bind_layout(self.generator.layout()) {
            return failed(error);
        }
        let (mut claim, previous) = match take_number(
            &*self.store,
            &self.range,
            self.generator.clock(),
            &self.timing,
            &self.holder,
        ) {
            Ok(taken) => taken,
            Err(error) => return failed(error),
        };
        // Our own IDs so far must stay below every later one too.
        let own = self
            .generator
            .high_water_mark()
            .map_or(0, |id| self.generator.decode(id).unix_ms);
        let mark = sent_unix_ms
            .saturating_add(millis(self.timing.horizon))
            .max(previous.unwrap_or(0))
            .max(own);
        let moved = claim
            .renew(mark)
            .and_then(|()| {
                self.wait_past(
                    previous,
                    self.timing.startup_wait,
                    &mut *claim,
                    mark,
                    meanwhile,
                )
            })
            .and_then(|()| {
                // Validity counts from after the wait.
                let sent_unix_ms = self.generator.clock().now_unix_ms();
                let renewed = sent_unix_ms
                    .saturating_add(millis(self.timing.horizon))
                    .max(mark);
                claim.renew(renewed)?;
                self.marks.written_unix_ms.store(renewed, Ordering::Relaxed);
                let ceiling = self.ceiling(sent_unix_ms, renewed);
                // The state moves past the previous mark before the new node is published.
                self.generator.move_to(
                    claim.datacenter(),
                    claim.worker(),
                    previous.unwrap_or(0),
                    ceiling,
                )
            });
        if let Err(error) = moved {
            // Nothing was issued as this number: its previous mark (never lower) is enough.
            let _ = claim.release(previous.unwrap_or(0));
            return failed(error);
        }
        self.marks
            .previous_unix_ms
            .store(previous.unwrap_or(0), Ordering::Relaxed);
        log::info!(
            "idgen: now issuing as worker {} of datacenter {}",
            claim.worker(),
            claim.datacenter()
        );
        *self.lock_claim() = Some(claim);
        self.counters.state.store(STATE_HELD, Ordering::Relaxed);
        self.counters.reacquisitions.fetch_add(1, Ordering::Relaxed);
        true
    }

    pub(super) fn release(&self) -> Result<(), Error> {
        let (datacenter, worker) = (self.generator.datacenter(), self.generator.worker());
        self.generator.set_tenure(datacenter, worker, 0);
        self.counters.state.store(STATE_RELEASED, Ordering::Relaxed);
        let Some(mut claim) = self.lock_claim().take() else {
            return Ok(());
        };
        // Nothing is issued past this point, so the real high-water mark is a safe promise,
        // and a successor does not have to wait for the one written a horizon ahead.
        let used = self
            .generator
            .high_water_mark()
            .map_or(0, |id| self.generator.decode(id).unix_ms);
        claim.release(used.max(self.marks.previous_unix_ms.load(Ordering::Relaxed)))
    }

    pub(super) fn valid_for_ms(&self) -> i64 {
        let ceiling = self.generator.ceiling_unix_ms() as i64;
        ceiling - self.generator.clock().now_unix_ms() as i64
    }

    pub(super) fn stats(&self) -> LeaseStats {
        let mut valid_for_ms = self.valid_for_ms();
        let state = match self.counters.state.load(Ordering::Relaxed) {
            STATE_LOST => LeaseState::Lost,
            STATE_RELEASED => LeaseState::Released,
            _ if valid_for_ms <= 0 => LeaseState::Expired,
            _ if self.marks.outage_since_unix_ms.load(Ordering::Relaxed) != 0 => LeaseState::Outage,
            _ => LeaseState::Valid,
        };
        // A lost or released lease has no ceiling (0): "expired since the epoch" would be
        // a number with no meaning.
        if matches!(state, LeaseState::Lost | LeaseState::Released) {
            valid_for_ms = 0;
        }
        LeaseStats {
            state,
            datacenter: self.generator.datacenter(),
            worker: self.generator.worker(),
            renewals: self.counters.renewals.load(Ordering::Relaxed),
            renewal_failures: self.counters.renewal_failures.load(Ordering::Relaxed),
            reacquisitions: self.counters.reacquisitions.load(Ordering::Relaxed),
            outages: self.counters.outages.load(Ordering::Relaxed),
            outage_since_unix_ms: match self.marks.outage_since_unix_ms.load(Ordering::Relaxed) {
                0 => None,
                since => Some(since),
            },
            valid_for_ms,
            valid_until_unix_ms: self.generator.ceiling_unix_ms(),
            lease_end_unix_ms: self.marks.lease_end_unix_ms.load(Ordering::Relaxed),
            mark_unix_ms: self.marks.written_unix_ms.load(Ordering::Relaxed),
            previous_mark_unix_ms: match self.marks.previous_unix_ms.load(Ordering::Relaxed) {
                0 => None,
                mark => Some(mark),
            },
        }
    }
}

/// The first retry after a failed renewal; each further one waits twice as long, up to the
/// renewal interval.
const RETRY_FIRST: Duration = Duration::from_millis(50);

/// The longest wait between retries: once the store is back, a holder finds out within
/// about this long (plus one request), however long the outage was.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Locks a mutex of the keeper's; a panic elsewhere while holding it leaves plain data
/// behind, so the lock is taken over rather than turned into a second panic.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
