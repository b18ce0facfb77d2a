//! Keeping numbers once taken: one thread drives every number of a process (renewals and
//! mark writes, retries through an outage, taking another after a loss) through the lease
//! [`Machine`](super::protocol::Machine), applies what it decides to the generator, and
//! publishes what [`LeaseStats`] reports. The decisions are all the machine's.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::Error;
use crate::snowflake::{Builder, Generator, Layout};
use crate::sync::{Arc, AtomicU64, Ordering};

use super::driver::{Driving, Lease};
use super::protocol::Output;
use super::stats::{LeaseState, LeaseStats};
use super::timing::Timing;
use super::watch::{AcquireWatch, MarkWait};
use super::{LeaseStore, WorkerRange};

/// What [`Keeper::stats`] reads without waiting for a store call under way: copied from
/// the machine after each step.
#[derive(Default)]
struct Published {
    state: AtomicU64,
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    reacquisitions: AtomicU64,
    outages: AtomicU64,
    /// The last mark written to the store.
    written_unix_ms: AtomicU64,
    /// The previous holder's mark of the number held now (0: none).
    previous_unix_ms: AtomicU64,
    /// When the last proven lease ends at the earliest: request sent + TTL.
    lease_end_unix_ms: AtomicU64,
    /// When the current outage began; 0: renewals succeed.
    outage_since_unix_ms: AtomicU64,
}

const STATE_HELD: u64 = 0;
const STATE_LOST: u64 = 1;
const STATE_RELEASED: u64 = 2;

/// One number a process keeps: its generator, and the machine that keeps its lease.
pub(super) struct Keeper<C: Clock> {
    pub(super) generator: Generator<C>,
    pub(super) store: Arc<dyn LeaseStore>,
    pub(super) range: WorkerRange,
    /// The name recorded with each claim, for the fleet view.
    pub(super) holder: String,
    lease: Mutex<Lease>,
    published: Published,
    /// Shared by every number the one keeper thread keeps.
    pub(super) control: Arc<Control>,
}

/// Stops the keeper thread, and wakes it to notice; shows its waits for a mark; the origin
/// of the machines' monotonic milliseconds.
pub(super) struct Control {
    stop: Mutex<bool>,
    wake: Condvar,
    pub(super) watch: AcquireWatch,
    pub(super) origin: Instant,
}

impl Control {
    pub(super) fn watched(watch: AcquireWatch) -> Control {
        Control {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            watch,
            origin: Instant::now(),
        }
    }

    pub(super) fn stop(&self) {
        *lock(&self.stop) = true;
        self.wake.notify_all();
    }
}

/// The keeper thread: steps every number in `keepers` when its machine is due, until
/// `control` stops it.
pub(super) fn keep<C: Clock>(keepers: &[Keeper<C>], control: &Control) {
    loop {
        {
            let mut stop = lock(&control.stop);
            loop {
                if *stop {
                    return;
                }
                let now = Instant::now();
                let due = keepers
                    .iter()
                    .filter_map(Keeper::wake_at)
                    .min()
                    .unwrap_or(now + Duration::from_secs(1));
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
        let mut waiting = None;
        for keeper in keepers {
            keeper.step();
            waiting = waiting.or_else(|| keeper.waiting());
        }
        control.watch.set_waiting(waiting);
    }
}

impl<C: Clock> Keeper<C> {
    /// The keeper of `generator`, on the number `lease`'s machine has just made usable.
    pub(super) fn new(
        generator: Generator<C>,
        store: Arc<dyn LeaseStore>,
        range: WorkerRange,
        holder: String,
        lease: Lease,
        control: Arc<Control>,
    ) -> Keeper<C> {
        let keeper = Keeper {
            generator,
            store,
            range,
            holder,
            lease: Mutex::new(lease),
            published: Published::default(),
            control,
        };
        keeper.publish(&lock(&keeper.lease));
        keeper
    }

    /// Runs the machine as far as it goes now (renewing when due, taking a number after a
    /// loss) and applies its decisions to the generator.
    pub(super) fn step(&self) {
        let mut lease = lock(&self.lease);
        lease.machine.set_own_unix_ms(self.used_unix_ms());
        let driving = self.driving();
        let mut refused = false;
        lease.step(&driving, self.generator.clock(), &mut |output| {
            refused |= !self.apply(output);
        });
        if refused {
            // The generator stayed on its old number (at ceiling 0): the new one goes
            // back, and another is taken.
            lease
                .machine
                .refuse_number(driving.now(self.generator.clock()));
            lease.step(&driving, self.generator.clock(), &mut |output| {
                self.apply(output);
            });
        }
        self.publish(&lease);
    }

    fn driving(&self) -> Driving<'_> {
        Driving {
            store: &*self.store,
            range: &self.range,
            layout: self.generator.layout(),
            holder: &self.holder,
            origin: self.control.origin,
        }
    }

    /// Applies one decision of the machine; `false` when the generator cannot move onto
    /// the number made usable.
    fn apply(&self, output: Output) -> bool {
        let (datacenter, worker) = (self.generator.datacenter(), self.generator.worker());
        match output {
            Output::Ceiling { ceiling } => self.generator.set_tenure(datacenter, worker, ceiling),
            Output::Stop => self.generator.set_tenure(datacenter, worker, 0),
            Output::Tenure {
                datacenter,
                worker,
                after_unix_ms,
                ceiling,
            } => {
                // The state moves past the previous mark (and every ID issued as the number
                // lost) before the new node is published.
                let moved =
                    self.generator
                        .move_to(datacenter, worker, after_unix_ms.unwrap_or(0), ceiling);
                if let Err(error) = moved {
                    // `move_to` fails before it changes anything: the generator is still
                    // on the number it lost, at ceiling 0.
                    log::error!(
                        target: "idgen::lease::keeper",
                        "idgen: cannot issue as worker {worker} of datacenter {datacenter}: \
                         {error}"
                    );
                    return false;
                }
            }
        }
        true
    }

    /// When the machine must be stepped next.
    fn wake_at(&self) -> Option<Instant> {
        let lease = lock(&self.lease);
        let driving = self.driving();
        let now = driving.now(self.generator.clock());
        let wake = lease.machine.wake_at_mono_ms(now)?;
        // A wait for a mark follows the wall clock: polled every millisecond.
        let wake = if lease.machine.waiting_for().is_some() {
            wake.min(now.mono_ms + 1)
        } else {
            wake
        };
        Some(driving.instant(wake))
    }

    fn waiting(&self) -> Option<MarkWait> {
        let (datacenter, worker, until_unix_ms) = lock(&self.lease).machine.waiting_for()?;
        Some(MarkWait {
            datacenter,
            worker,
            until_unix_ms,
        })
    }

    /// The millisecond of the last ID issued (or stood behind), 0 before any.
    fn used_unix_ms(&self) -> u64 {
        self.generator
            .high_water_mark()
            .map_or(0, |id| self.generator.decode(id).unix_ms)
    }

    fn publish(&self, lease: &Lease) {
        let machine = &lease.machine;
        let counters = machine.counters();
        let published = &self.published;
        let state = if machine.usable_worker().is_some() {
            STATE_HELD
        } else if machine.is_lost() {
            STATE_LOST
        } else {
            STATE_RELEASED
        };
        published.state.store(state, Ordering::Relaxed);
        published
            .renewals
            .store(counters.renewals, Ordering::Relaxed);
        published
            .renewal_failures
            .store(counters.renewal_failures, Ordering::Relaxed);
        published
            .reacquisitions
            .store(counters.reacquisitions, Ordering::Relaxed);
        published.outages.store(counters.outages, Ordering::Relaxed);
        published
            .written_unix_ms
            .store(machine.written_unix_ms(), Ordering::Relaxed);
        published
            .previous_unix_ms
            .store(machine.previous_unix_ms().unwrap_or(0), Ordering::Relaxed);
        published
            .lease_end_unix_ms
            .store(machine.lease_end_unix_ms(), Ordering::Relaxed);
        published.outage_since_unix_ms.store(
            machine.outage_since_unix_ms().unwrap_or(0),
            Ordering::Relaxed,
        );
    }

    /// Stops issuing and frees the number, writing the last millisecond used as its mark
    /// (never below the previous holder's), so a successor need not wait.
    pub(super) fn release(&self) -> Result<(), Error> {
        let mut lease = lock(&self.lease);
        // Nothing is issued past this point, so the real high-water mark, read after the
        // stop, is a safe promise.
        let (datacenter, worker) = (self.generator.datacenter(), self.generator.worker());
        self.generator.set_tenure(datacenter, worker, 0);
        let used = self.used_unix_ms();
        // A give-back's answer from earlier is not this release's.
        let _ = lease.take_released();
        lease.machine.release(used);
        let driving = self.driving();
        lease.step(&driving, self.generator.clock(), &mut |output| {
            self.apply(output);
        });
        self.publish(&lease);
        lease.take_released()
    }

    pub(super) fn valid_for_ms(&self) -> i64 {
        let ceiling = self.generator.ceiling_unix_ms() as i64;
        ceiling - self.generator.clock().now_unix_ms() as i64
    }

    pub(super) fn stats(&self) -> LeaseStats {
        let published = &self.published;
        let mut valid_for_ms = self.valid_for_ms();
        let outage_since = published.outage_since_unix_ms.load(Ordering::Relaxed);
        let state = match published.state.load(Ordering::Relaxed) {
            STATE_LOST => LeaseState::Lost,
            STATE_RELEASED => LeaseState::Released,
            _ if valid_for_ms <= 0 => LeaseState::Expired,
            _ if outage_since != 0 => LeaseState::Outage,
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
            renewals: published.renewals.load(Ordering::Relaxed),
            renewal_failures: published.renewal_failures.load(Ordering::Relaxed),
            reacquisitions: published.reacquisitions.load(Ordering::Relaxed),
            outages: published.outages.load(Ordering::Relaxed),
            outage_since_unix_ms: (outage_since != 0).then_some(outage_since),
            valid_for_ms,
            valid_until_unix_ms: self.generator.ceiling_unix_ms(),
            lease_end_unix_ms: published.lease_end_unix_ms.load(Ordering::Relaxed),
            mark_unix_ms: published.written_unix_ms.load(Ordering::Relaxed),
            previous_mark_unix_ms: match published.previous_unix_ms.load(Ordering::Relaxed) {
                0 => None,
                mark => Some(mark),
            },
        }
    }
}

/// Locks a mutex of the keeper's; a panic elsewhere while holding it leaves plain data
/// behind, so the lock is taken over rather than turned into a second panic.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What an acquire takes its numbers with: checked timing, the generator's parts, the
/// holder's name, and the control the keeper will share.
pub(super) struct Prepared<C> {
    pub(super) timing: Timing,
    pub(super) generator_builder: Builder<C>,
    pub(super) clock: C,
    pub(super) layout: Layout,
    pub(super) holder: String,
    pub(super) control: Arc<Control>,
}
