//! The taking of a number for [`LeasedBuilder::acquire_async`](super::LeasedBuilder::acquire_async):
//! the loop of the driver's `take_blocking` with its waits on Tokio's timers, and each
//! request to the store (blocking I/O in every built-in store) on Tokio's blocking pool.
//!
//! The lease being taken sits in a slot both the task and a request under way reach, so
//! that an acquire dropped at any point gives its number back: while it waits, its `Drop`
//! hands the lease to a thread that releases it; during a request, the request releases it
//! when it ends.

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::Error;
use crate::snowflake::Layout;
use crate::sync::Arc;

use super::driver::{Driving, Lease, Tenure};
use super::keeper::{Control, Keeper, Prepared};
use super::protocol::{Machine, Output};
use super::timing::TAKE_ATTEMPTS;
use super::watch::MarkWait;
use super::{LeaseStore, WorkerRange};

thread_local! {
    /// Set while a job of [`on_blocking_pool`] runs on this thread.
    static ON_BLOCKING_POOL: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread runs a job of [`on_blocking_pool`]: a store that refuses to block
/// inside a Tokio runtime (etcd's) may block here, as the pool's threads are for that.
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
pub(super) fn may_block_here() -> bool {
    ON_BLOCKING_POOL.with(Cell::get)
}

/// Runs `job`, which may block on a store, on Tokio's blocking pool, and waits for it
/// without holding the caller's thread.
pub(super) async fn on_blocking_pool<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(move || {
        struct Mark;
        impl Drop for Mark {
            fn drop(&mut self) {
                ON_BLOCKING_POOL.with(|on| on.set(false));
            }
        }
        ON_BLOCKING_POOL.with(|on| on.set(true));
        let _mark = Mark;
        job()
    })
    .await
    .map_err(|error| Error::LeaseStore {
        reason: format!("a request to the lease store failed on Tokio's blocking pool: {error}"),
    })
}

/// What the requests go to, owned, so that a request on the blocking pool can reach it.
struct Target {
    store: Arc<dyn LeaseStore>,
    range: WorkerRange,
    layout: Layout,
    holder: String,
    origin: Instant,
}

impl Target {
    fn driving(&self) -> Driving<'_> {
        Driving {
            store: &*self.store,
            range: &self.range,
            layout: &self.layout,
            holder: &self.holder,
            origin: self.origin,
        }
    }
}

/// The lease being taken, and whether the acquire that took it is gone.
struct Slot {
    lease: Option<Lease>,
    abandoned: bool,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // Every unlock leaves the slot whole: a panic elsewhere leaves nothing half-done.
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A number being taken by a task: given back if the task is dropped before it ends.
struct Taking<C: Clock + Clone + Send + Sync + 'static> {
    slot: Arc<Mutex<Slot>>,
    target: Arc<Target>,
    clock: C,
    /// Its watch says no wait once the taking is over, however it ends.
    control: Arc<Control>,
    /// The taking ended: the lease went to a keeper, or the machine gave it up itself.
    ended: bool,
}

impl<C: Clock + Clone + Send + Sync + 'static> Taking<C> {
    /// Runs `f` on the lease, which is in its slot whenever no request is under way.
    fn with<R>(&self, f: impl FnOnce(&mut Lease, &Driving<'_>) -> R) -> Result<R, Error> {
        let mut slot = lock(&self.slot);
        match slot.lease.as_mut() {
            Some(lease) => Ok(f(lease, &self.target.driving())),
            None => Err(Error::LeaseStore {
                reason: "the lease being taken was lost by its request".to_string(),
            }),
        }
    }

    /// `Lease::step` for a task: sends every request due, each on the blocking pool, and
    /// hands each output to `apply`.
    async fn step(&self, apply: &mut (dyn FnMut(Output) + Send)) -> Result<(), Error> {
        loop {
            let request = self.with(|lease, driving| {
                let request = lease.machine.poll(driving.now(&self.clock));
                lease.drain(driving, apply);
                request
            })?;
            let Some(request) = request else {
                break;
            };
            let (slot, target, clock) = (
                Arc::clone(&self.slot),
                Arc::clone(&self.target),
                self.clock.clone(),
            );
            on_blocking_pool(move || {
                let Some(mut lease) = lock(&slot).lease.take() else {
                    return; // the acquire was dropped, and its lease given back
                };
                let driving = target.driving();
                let answer = lease.execute(&driving, request);
                lease.machine.handle(driving.now(&clock), answer);
                let mut slot = lock(&slot);
                if slot.abandoned {
                    drop(slot);
                    give_back(lease, &target, &clock);
                } else {
                    slot.lease = Some(lease);
                }
            })
            .await?;
            self.with(|lease, driving| lease.drain(driving, apply))?;
        }
        self.with(|lease, _| lease.report_wait(&self.clock))
    }

    /// Gives the number back with its previous mark (nothing was issued on it).
    async fn give_up(&mut self) -> Result<(), Error> {
        self.with(|lease, _| lease.machine.release(0))?;
        let stepped = self.step(&mut |_| {}).await;
        self.ended = true;
        stepped
    }
}

impl<C: Clock + Clone + Send + Sync + 'static> Drop for Taking<C> {
    fn drop(&mut self) {
        self.control.watch.set_waiting(None);
        if self.ended {
            return;
        }
        let mut slot = lock(&self.slot);
        match slot.lease.take() {
            Some(lease) => {
                drop(slot);
                let (target, clock) = (Arc::clone(&self.target), self.clock.clone());
                let spawned = std::thread::Builder::new()
                    .name("idgen-give-back".into())
                    .spawn(move || give_back(lease, &target, &clock));
                if let Err(error) = spawned {
                    log::warn!(
                        "idgen: a cancelled acquire could not give its number back ({error}): \
                         it frees itself when its lease expires"
                    );
                }
            }
            // A request is under way: it gives the number back when it ends.
            None => slot.abandoned = true,
        }
    }
}

/// Releases a number being taken with its previous mark, blocking on the store.
fn give_back<C: Clock>(mut lease: Lease, target: &Target, clock: &C) {
    lease.machine.release(0);
    lease.step(&target.driving(), clock, &mut |_| {});
}

/// Takes one number of `range` for `prepared`'s generator, as `Taking::take_one` in
/// `leased.rs` does, waiting on Tokio's timers.
pub(super) async fn take_one<C: Clock + Clone + Send + Sync + 'static>(
    store: &Arc<dyn LeaseStore>,
    range: &WorkerRange,
    prepared: Prepared<C>,
) -> Result<Keeper<C>, Error> {
    let Prepared {
        timing,
        generator_builder,
        clock,
        layout,
        holder,
        control,
    } = prepared;
    let target = Arc::new(Target {
        store: Arc::clone(store),
        range: *range,
        layout,
        holder,
        origin: control.origin,
    });
    let lease = Lease::new(Machine::take(timing.settings(true, TAKE_ATTEMPTS), *range));
    let mut taking = Taking {
        slot: Arc::new(Mutex::new(Slot {
            lease: Some(lease),
            abandoned: false,
        })),
        target: Arc::clone(&target),
        clock,
        control: Arc::clone(&control),
        ended: false,
    };
    let watch = &control.watch;
    let tenure = loop {
        if watch.gives_up() {
            taking.give_up().await?;
            return Err(Error::LeaseStore {
                reason: "the acquire was cancelled while taking a number".to_string(),
            });
        }
        let mut tenure = None;
        taking
            .step(&mut |output| {
                if let Some(taken) = Tenure::of(output) {
                    tenure = Some(taken);
                }
            })
            .await?;
        if let Some(error) = taking.with(|lease, _| lease.machine.failure().cloned())? {
            // The machine gave the number up itself.
            taking.ended = true;
            return Err(error);
        }
        if let Some(tenure) = tenure {
            break tenure;
        }
        let waiting = taking.with(|lease, _| lease.machine.waiting_for())?;
        watch.set_waiting(waiting.map(|(datacenter, worker, until_unix_ms)| MarkWait {
            datacenter,
            worker,
            until_unix_ms,
        }));
        // A wait for a mark follows the wall clock, which may be moved by hand: it is
        // polled every millisecond, as in `take_blocking`.
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let generator = match tenure.generator(generator_builder) {
        Ok(generator) => generator,
        Err(error) => {
            // Nothing was issued: the number goes back with the previous mark.
            taking.give_up().await?;
            return Err(error);
        }
    };
    let lease = lock(&taking.slot).lease.take();
    taking.ended = true;
    let lease = lease.ok_or_else(|| Error::LeaseStore {
        reason: "the lease taken was lost by its request".to_string(),
    })?;
    Ok(Keeper::new(
        generator,
        Arc::clone(store),
        *range,
        target.holder.clone(),
        lease,
        control,
    ))
}

/// Releases `keeper`'s number on the blocking pool (a task must not block on the store),
/// waiting for the release; if the caller is dropped meanwhile, the release still runs.
pub(super) async fn release<C: Clock + Send + Sync + 'static>(
    keeper: Keeper<C>,
) -> Result<(), Error> {
    on_blocking_pool(move || keeper.release()).await?
}
