//! The lease [`Machine`]'s driver on a real [`LeaseStore`]: each request the machine hands
//! out becomes one blocking store call (the [`Claim`] it takes is kept here, beside the
//! machine), its answer goes back in, and the machine's notes become log lines. The keeper
//! thread (`keeper.rs`), the builders and the lease API all drive numbers through this.

use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::Error;
use crate::snowflake::{Builder, Generator, Layout};

use super::protocol::{Acquired, Answer, Machine, Note, Now, Output, Request, Surveyed};
use super::timing::millis;
use super::{Claim, LeaseStore, WorkerRange};

/// What the requests of one process go to: its store, range, layout and name, and the
/// origin of the monotonic milliseconds its machines count in.
pub(super) struct Driving<'a> {
    pub(super) store: &'a dyn LeaseStore,
    pub(super) range: &'a WorkerRange,
    pub(super) layout: &'a Layout,
    pub(super) holder: &'a str,
    pub(super) origin: Instant,
}

impl Driving<'_> {
    /// The holder's clocks now: `clock` for marks, `Instant` for schedules.
    pub(super) fn now<C: Clock>(&self, clock: &C) -> Now {
        Now {
            unix_ms: clock.now_unix_ms(),
            mono_ms: millis(self.origin.elapsed()),
        }
    }

    /// The `Instant` of a monotonic millisecond of the machines.
    pub(super) fn instant(&self, mono_ms: u64) -> Instant {
        self.origin + Duration::from_millis(mono_ms)
    }
}

/// One machine and the claim it holds.
#[derive(Debug)]
pub(super) struct Lease {
    pub(super) machine: Machine,
    claim: Option<Box<dyn Claim>>,
    /// The answer to the last release sent (give-backs too: [`Lease::take_released`]
    /// before a release of one's own clears it).
    released: Option<Result<(), Error>>,
    /// When a wait for a mark next says how long is left.
    next_report: Option<Instant>,
}

/// How often a wait for a mark says in the log how long is left.
const WAIT_REPORT_EVERY: Duration = Duration::from_secs(10);

impl Lease {
    pub(super) fn new(machine: Machine) -> Lease {
        Lease {
            machine,
            claim: None,
            released: None,
            next_report: None,
        }
    }

    /// Runs the machine as far as it goes now: sends every request due, in order, feeds
    /// back each answer, and hands each output to `apply` (in order, as soon as it is
    /// made) and each note to the log.
    pub(super) fn step<C: Clock>(
        &mut self,
        to: &Driving<'_>,
        clock: &C,
        apply: &mut dyn FnMut(Output),
    ) {
        loop {
            let request = self.machine.poll(to.now(clock));
            self.drain(to, apply);
            let Some(request) = request else {
                break;
            };
            let answer = self.execute(to, request);
            self.machine.handle(to.now(clock), answer);
            self.drain(to, apply);
        }
        self.report_wait(clock);
    }

    pub(super) fn drain(&mut self, to: &Driving<'_>, apply: &mut dyn FnMut(Output)) {
        while let Some(output) = self.machine.take_output() {
            apply(output);
        }
        let held = self.machine.usable_worker();
        while let Some(note) = self.machine.take_note() {
            log_note(to.range, held, &note);
        }
    }

    /// Sends one request to the store, blocking until it answers or fails.
    pub(super) fn execute(&mut self, to: &Driving<'_>, request: Request) -> Result<Answer, Error> {
        match request {
            Request::BindLayout => to.store.bind_layout(to.layout).map(|()| Answer::Done),
            Request::RaiseHorizon { horizon_ms } => to
                .store
                .raise_horizon(Duration::from_millis(horizon_ms))
                .map(|recorded| Answer::Horizon {
                    recorded_ms: millis(recorded),
                }),
            Request::Survey => to.store.survey(to.range).map(|numbers| {
                Answer::Numbers(
                    numbers
                        .into_iter()
                        .map(|number| Surveyed {
                            worker: number.worker,
                            state: number.state,
                            mark_unix_ms: number.mark_unix_ms,
                            detail: number.detail,
                        })
                        .collect(),
                )
            }),
            Request::Acquire { worker } => {
                let single = WorkerRange::new(to.range.datacenter(), worker..=worker)?;
                let claim = to.store.acquire_as(&single, to.holder)?;
                let acquired = Acquired {
                    datacenter: claim.datacenter(),
                    worker: claim.worker(),
                    previous_mark_unix_ms: claim.previous_mark_unix_ms(),
                    previous_unknown: claim.previous_mark_unknown(),
                };
                self.claim = Some(claim);
                Ok(Answer::Acquired(acquired))
            }
            Request::Renew {
                worker,
                mark_unix_ms,
            } => match self.claim_of(worker) {
                Some(claim) => claim.renew(mark_unix_ms).map(|()| Answer::Done),
                None => Err(not_held(to.range, worker)),
            },
            Request::Release {
                worker,
                mark_unix_ms,
            } => {
                let released = match self.claim_of(worker) {
                    Some(claim) => claim.release(mark_unix_ms),
                    None => Ok(()),
                };
                self.claim = None;
                self.released = Some(released.clone());
                released.map(|()| Answer::Done)
            }
            Request::Forget { .. } => {
                self.claim = None;
                Ok(Answer::Done)
            }
        }
    }

    fn claim_of(&mut self, worker: u64) -> Option<&mut Box<dyn Claim>> {
        self.claim.as_mut().filter(|claim| claim.worker() == worker)
    }

    /// The claim held, taken out (the lease API keeps it on its own).
    pub(super) fn take_claim(&mut self) -> Option<Box<dyn Claim>> {
        self.claim.take()
    }

    /// The answer to the last release, once (`Ok` when none was sent).
    pub(super) fn take_released(&mut self) -> Result<(), Error> {
        self.released.take().unwrap_or(Ok(()))
    }

    /// Every [`WAIT_REPORT_EVERY`] of a wait for a mark, how long is left.
    pub(super) fn report_wait<C: Clock>(&mut self, clock: &C) {
        let Some((datacenter, worker, until_unix_ms)) = self.machine.waiting_for() else {
            self.next_report = None;
            return;
        };
        let report_at = *self
            .next_report
            .get_or_insert_with(|| Instant::now() + WAIT_REPORT_EVERY);
        if Instant::now() >= report_at {
            log::info!(
                target: "idgen::lease::keeper",
                "idgen: worker {worker} of datacenter {datacenter} waits {} ms more for its mark",
                until_unix_ms.saturating_sub(clock.now_unix_ms())
            );
            self.next_report = Some(Instant::now() + WAIT_REPORT_EVERY);
        }
    }

    /// Drives a machine that takes a number until it is usable: the tenure it starts on,
    /// or why the taking failed. `meanwhile` runs between turns (the numbers already held
    /// are renewed there); `gives_up` cancels the taking (the number goes back).
    pub(super) fn take_blocking<C: Clock>(
        &mut self,
        to: &Driving<'_>,
        clock: &C,
        meanwhile: &dyn Fn(Option<(u64, u64, u64)>),
        gives_up: &dyn Fn() -> bool,
    ) -> Result<Tenure, Error> {
        let mut tenure = None;
        loop {
            if gives_up() {
                self.machine.release(0);
                self.step(to, clock, &mut |_| {});
                meanwhile(None);
                return Err(Error::LeaseStore {
                    reason: "the acquire was cancelled while taking a number".to_string(),
                });
            }
            self.step(to, clock, &mut |output| {
                if let Some(taken) = Tenure::of(output) {
                    tenure = Some(taken);
                }
            });
            if let Some(error) = self.machine.failure() {
                meanwhile(None);
                return Err(error.clone());
            }
            if let Some(tenure) = tenure {
                meanwhile(None);
                return Ok(tenure);
            }
            meanwhile(self.machine.waiting_for());
            let now = to.now(clock);
            let wake = self.machine.wake_at_mono_ms(now).unwrap_or(now.mono_ms);
            // A wait for a mark follows the wall clock, which may be moved by hand: it is
            // polled every millisecond, as the renewals of the numbers held meanwhile.
            let pause = wake.saturating_sub(now.mono_ms).clamp(0, 1);
            std::thread::sleep(Duration::from_millis(pause));
        }
    }
}

/// The number a taking ended on, as the machine's [`Output::Tenure`] gave it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tenure {
    pub(super) datacenter: u64,
    pub(super) worker: u64,
    pub(super) after_unix_ms: Option<u64>,
    pub(super) ceiling: u64,
}

impl Tenure {
    /// The tenure an output starts, if it is [`Output::Tenure`].
    pub(super) fn of(output: Output) -> Option<Tenure> {
        match output {
            Output::Tenure {
                datacenter,
                worker,
                after_unix_ms,
                ceiling,
            } => Some(Tenure {
                datacenter,
                worker,
                after_unix_ms,
                ceiling,
            }),
            _ => None,
        }
    }

    /// The generator of `builder` on this tenure: its node, started after the previous
    /// holder's mark, with its ceiling.
    pub(super) fn generator<C: Clock>(&self, builder: Builder<C>) -> Result<Generator<C>, Error> {
        let mut builder = builder.datacenter(self.datacenter).worker(self.worker);
        if let Some(previous) = self.after_unix_ms {
            builder = builder.resume_after_unix_ms(previous);
        }
        let generator = builder.build()?;
        generator.set_tenure(self.datacenter, self.worker, self.ceiling);
        Ok(generator)
    }
}

fn not_held(range: &WorkerRange, worker: u64) -> Error {
    Error::LeaseLost {
        datacenter: range.datacenter(),
        worker,
    }
}

/// A note of the machine as a log line (the words of the keeper before the machine, so
/// that the service's log readers keep working); `held` is the number usable now.
fn log_note(range: &WorkerRange, held: Option<(u64, u64)>, note: &Note) {
    let (datacenter, worker) = held.unwrap_or((range.datacenter(), 0));
    match note {
        Note::OutageBegan { error, left_ms } => log::warn!(
            target: "idgen::lease::keeper",
            "idgen: lease store outage ({error}); worker {worker} of datacenter {datacenter} goes \
             on issuing up to its mark, {left_ms} ms from now"
        ),
        Note::OutageEnded { after_ms } => log::info!(
            target: "idgen::lease::keeper",
            "idgen: lease store reachable again after {after_ms} ms; worker {worker} of \
             datacenter {datacenter} renewed"
        ),
        Note::RenewalFailed { error } => log::debug!(
            target: "idgen::lease::keeper",
            "idgen: renewal failed again ({error})"
        ),
        Note::Renewed {
            late_ms: Some(late_ms),
        } => log::warn!(
            target: "idgen::lease::keeper",
            "idgen: worker {worker} of datacenter {datacenter} renewed {late_ms} ms late: the \
             lease store or this process is slow"
        ),
        Note::Lost { worker, error } => log::error!(
            target: "idgen::lease::keeper",
            "idgen: worker {worker} of datacenter {datacenter} was lost ({error}); taking \
             another number from {range}"
        ),
        Note::TakeRetried { error } => log::warn!(
            target: "idgen::lease::keeper",
            "idgen: taking a worker number failed in the store, trying again: {error}"
        ),
        Note::TakeFailed {
            error,
            after_loss: true,
        } => log::warn!(
            target: "idgen::lease::keeper",
            "idgen: taking a new worker number failed: {error}"
        ),
        Note::Refused { worker } => log::error!(
            target: "idgen::lease::keeper",
            "idgen: worker {worker} of datacenter {datacenter} cannot be used (its previous \
             mark lies past the layout's last millisecond); taking another number"
        ),
        Note::Usable {
            worker,
            reacquired: true,
        } => log::info!(
            target: "idgen::lease::keeper",
            "idgen: now issuing as worker {worker} of datacenter {datacenter}"
        ),
        Note::TookNearest { worker, wait_ms } if *wait_ms > 0 => log::info!(
            target: "idgen::lease::keeper",
            "idgen: every free number of {range} has a mark ahead; worker {worker} waits \
             {wait_ms} ms for its mark"
        ),
        other => log::debug!(target: "idgen::lease::keeper", "idgen: lease: {other:?}"),
    }
}

/// The holder name of a process that gives none: its process ID and host.
pub(super) fn default_holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "unknown host".to_string());
    format!("pid {} on {host}", std::process::id())
}
