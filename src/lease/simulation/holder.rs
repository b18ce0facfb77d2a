//! A simulated holder process: its own clocks (an offset, a drift, steps of the wall
//! clock), the real lease [`Machine`] and the real [`Generator`], and the claim it keeps
//! for the store (token and last write's revision, as the etcd store's claim does, or
//! token and row version, as the PostgreSQL claim does), including the etcd connection's
//! check that the store's revision never goes back (the PostgreSQL model answers revision
//! 0, which never trips it: that store has no such check).

use std::collections::BTreeMap;

use crate::clock::Clock;
use crate::error::Error;
use crate::snowflake::{Generator, Layout};
use crate::sync::{Arc, AtomicU64, Ordering};

use super::super::WorkerRange;
use super::super::protocol::{Answer, Machine, Now, Output, Request, Settings};
use super::store::{Claim, StoreAnswer, StoreRequest};

/// The generator's clock: the holder's wall clock, set by the simulator before each call.
#[derive(Debug, Clone, Default)]
pub(super) struct SimClock(Arc<AtomicU64>);

impl Clock for SimClock {
    fn now_unix_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A holder's clocks against the true time: the wall clock runs `drift_ppm` fast (or
/// slow) from `offset_ms` since the run's start, and steps move it; the monotonic one
/// (milliseconds since the run's start) drifts but never steps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clocks {
    pub(super) start_ms: u64,
    pub(super) offset_ms: i64,
    pub(super) drift_ppm: i64,
}

impl Clocks {
    pub(super) fn wall(&self, true_ms: u64) -> u64 {
        let mono = self.mono(true_ms) as i64;
        (self.start_ms as i64 + mono + self.offset_ms).max(0) as u64
    }

    pub(super) fn mono(&self, true_ms: u64) -> u64 {
        let elapsed = true_ms.saturating_sub(self.start_ms) as i64;
        (elapsed + elapsed * self.drift_ppm / 1_000_000).max(0) as u64
    }

    /// The first true millisecond at which the monotonic clock reads `mono_ms` or more.
    pub(super) fn true_at_mono(&self, mono_ms: u64) -> u64 {
        let rate = 1_000_000 + self.drift_ppm;
        let elapsed = (mono_ms as i128 * 1_000_000 / rate as i128).max(0) as u64;
        let mut estimate = self.start_ms + elapsed.saturating_sub(1);
        while self.mono(estimate) < mono_ms {
            estimate += 1;
        }
        estimate
    }
}

/// An ID a holder issued, for the checker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Issued {
    pub(super) raw: u64,
    pub(super) unix_ms: u64,
    pub(super) worker: u64,
    /// The last mark the store confirmed for that number to this holder.
    pub(super) confirmed_mark: Option<u64>,
    /// When the store granted the claim this ID was issued on, and the claim's token:
    /// the order of the number's tenures.
    pub(super) granted: (u64, u64),
}

/// A request on its way, as the holder keeps it.
#[derive(Debug, Clone)]
pub(super) struct Outstanding {
    pub(super) id: u64,
    pub(super) request: Request,
    /// The newest revision seen before it was sent.
    revision_before: u64,
}

/// One holder process (one incarnation at a time: a crash starts a new one).
#[derive(Debug)]
pub(super) struct Holder {
    pub(super) incarnation: u32,
    pub(super) clocks: Clocks,
    pub(super) settings: Settings,
    pub(super) range: WorkerRange,
    pub(super) layout: Layout,
    pub(super) layout_id: u32,
    pub(super) machine: Option<Machine>,
    pub(super) generator: Option<Generator<SimClock>>,
    clock: SimClock,
    claim: Option<(u64, Claim)>,
    /// Marks sent for the claim since its last confirmed write.
    unconfirmed: Vec<u64>,
    pub(super) outstanding: Option<Outstanding>,
    next_request: u64,
    newest_revision: u64,
    /// The store's procedure count with the newest revision seen.
    procedures_seen: u64,
    confirmed: BTreeMap<u64, u64>,
    /// The last ID issued, while the holder remembers it (across a restart only when it
    /// keeps its high-water mark).
    pub(super) last_id: Option<u64>,
    pub(super) keeps_high_water: bool,
    pub(super) paused_until: u64,
    pub(super) partitioned_until: u64,
    pub(super) wake_at: Option<u64>,
    pub(super) last_issue_ms: u64,
    pub(super) restored_seen: u64,
    /// How many numbers this incarnation was made usable on.
    pub(super) tenure: u32,
    /// The grant of the claim the generator issues on now (see [`Issued::granted`]).
    granted: (u64, u64),
    /// The latest millisecond this incarnation issued an ID in, by number.
    pub(super) issued_up_to: BTreeMap<u64, u64>,
}

impl Holder {
    pub(super) fn new(
        clocks: Clocks,
        settings: Settings,
        range: WorkerRange,
        layout: Layout,
        layout_id: u32,
    ) -> Holder {
        Holder {
            incarnation: 0,
            clocks,
            settings,
            range,
            layout,
            layout_id,
            machine: None,
            generator: None,
            clock: SimClock::default(),
            claim: None,
            unconfirmed: Vec::new(),
            outstanding: None,
            next_request: 0,
            newest_revision: 0,
            procedures_seen: 0,
            confirmed: BTreeMap::new(),
            last_id: None,
            keeps_high_water: false,
            paused_until: 0,
            partitioned_until: 0,
            wake_at: None,
            last_issue_ms: 0,
            restored_seen: 0,
            tenure: 0,
            granted: (0, 0),
            issued_up_to: BTreeMap::new(),
        }
    }

    pub(super) fn now(&self, true_ms: u64) -> Now {
        Now {
            unix_ms: self.clocks.wall(true_ms),
            mono_ms: self.clocks.mono(true_ms),
        }
    }

    /// A new incarnation that wants a number: everything of the last one is gone but,
    /// when it keeps one, the high-water mark.
    pub(super) fn start(&mut self) {
        self.incarnation += 1;
        self.machine = Some(Machine::take(self.settings, self.range));
        self.generator = None;
        self.claim = None;
        self.outstanding = None;
        self.newest_revision = 0;
        self.procedures_seen = 0;
        self.confirmed.clear();
        if !self.keeps_high_water {
            self.last_id = None;
        }
        self.wake_at = None;
        self.tenure = 0;
        self.issued_up_to.clear();
    }

    /// The process is gone: nothing of it acts again.
    pub(super) fn crash(&mut self) {
        self.incarnation += 1;
        self.machine = None;
        self.generator = None;
        self.claim = None;
        self.outstanding = None;
        self.wake_at = None;
    }

    /// The generator's high-water mark's millisecond, as the keeper passes it (it covers
    /// the mark the generator resumed after); the last ID's when it has none.
    fn used_unix_ms(&self) -> u64 {
        let from_generator = self.generator.as_ref().and_then(|generator| {
            generator
                .high_water_mark()
                .map(|id| generator.decode(id).unix_ms)
        });
        from_generator.unwrap_or_else(|| self.last_id_unix_ms().unwrap_or(0))
    }

    fn last_id_unix_ms(&self) -> Option<u64> {
        self.last_id
            .map(|raw| (raw >> self.layout.time_shift()) + self.layout.epoch_unix_ms())
    }

    /// A graceful stop: the machine releases its number.
    pub(super) fn release(&mut self) {
        let used = self.used_unix_ms();
        if let Some(machine) = &mut self.machine {
            machine.release(used);
        }
    }

    /// Runs the machine at `true_ms`: every local step, and at most one request to send,
    /// returned with its id.
    pub(super) fn drive(
        &mut self,
        true_ms: u64,
        paths: &mut Vec<Output>,
    ) -> Option<(u64, StoreRequest)> {
        loop {
            let now = self.now(true_ms);
            let used = self.used_unix_ms();
            let machine = self.machine.as_mut()?;
            machine.set_own_unix_ms(used);
            let request = machine.poll(now);
            self.apply_outputs(now, paths);
            let request = request?;
            let local: Option<Result<Answer, Error>> = match &request {
                Request::Forget { .. } => {
                    self.claim = None;
                    Some(Ok(Answer::Done))
                }
                // A claim that knows its number is gone answers without the store, as the
                // PostgreSQL claim does once it found its row taken or gone back.
                Request::Renew { worker, .. } if !self.holds(*worker) || self.released(*worker) => {
                    Some(Err(Error::LeaseLost {
                        datacenter: 0,
                        worker: *worker,
                    }))
                }
                Request::Release { worker, .. }
                    if !self.holds(*worker) || self.released(*worker) =>
                {
                    Some(Ok(Answer::Done))
                }
                _ => None,
            };
            if let Some(answer) = local {
                self.machine.as_mut()?.handle(now, answer);
                continue;
            }
            let id = self.next_request;
            self.next_request += 1;
            let store_request = self.store_request(&request, now.unix_ms)?;
            if let Request::Renew { mark_unix_ms, .. } = request {
                self.unconfirmed.push(mark_unix_ms);
            }
            self.outstanding = Some(Outstanding {
                id,
                request,
                revision_before: self.newest_revision,
            });
            return Some((id, store_request));
        }
    }

    fn holds(&self, worker: u64) -> bool {
        self.claim.is_some_and(|(held, _)| held == worker)
    }

    fn released(&self, worker: u64) -> bool {
        self.claim
            .is_some_and(|(held, claim)| held == worker && claim.released())
    }

    fn store_request(&self, request: &Request, sent_unix_ms: u64) -> Option<StoreRequest> {
        let token = |worker: u64| {
            self.claim
                .filter(|(held, _)| *held == worker)
                .map(|(_, token)| token)
        };
        Some(match *request {
            Request::BindLayout => StoreRequest::BindLayout {
                layout: self.layout_id,
            },
            Request::RaiseHorizon { horizon_ms } => StoreRequest::RaiseHorizon { horizon_ms },
            Request::Survey => StoreRequest::Survey,
            Request::Acquire { worker } => StoreRequest::Acquire {
                worker,
                sent_unix_ms,
            },
            Request::Renew {
                worker,
                mark_unix_ms,
            } => StoreRequest::Renew {
                worker,
                mark: mark_unix_ms,
                claim: token(worker)?,
                unconfirmed: self.unconfirmed.clone(),
                sent_unix_ms,
            },
            Request::Release {
                worker,
                mark_unix_ms,
            } => StoreRequest::Release {
                worker,
                mark: mark_unix_ms,
                claim: token(worker)?,
                unconfirmed: self.unconfirmed.clone(),
                sent_unix_ms,
            },
            Request::Forget { .. } => return None,
        })
    }

    /// The answer to the request `id`, at `true_ms` (`None`: it timed out). Answers to
    /// anything but the outstanding request are dropped, as a connection drops a late
    /// reply to a request it gave up on.
    pub(super) fn answer(&mut self, true_ms: u64, id: u64, answer: Option<StoreAnswer>) {
        let Some(outstanding) = self.outstanding.take_if(|outstanding| outstanding.id == id) else {
            return;
        };
        let now = self.now(true_ms);
        let result = match answer {
            None => Err(Error::LeaseStore {
                reason: "timed out".to_string(),
            }),
            // The etcd connection's check: a store whose revision went back since before
            // the request was sent has been restored.
            Some(answer)
                if answer.revision < outstanding.revision_before
                    && answer.procedures <= self.procedures_seen =>
            {
                Err(Error::LeaseStoreRestored {
                    store: "simulated".to_string(),
                    fix: "the procedure".to_string(),
                })
            }
            Some(answer) => {
                if answer.procedures > self.procedures_seen {
                    // The procedure ran since: the store's history starts again here.
                    self.procedures_seen = answer.procedures;
                    self.newest_revision = answer.revision;
                } else {
                    self.newest_revision = self.newest_revision.max(answer.revision);
                }
                match (&outstanding.request, answer.token, &answer.result) {
                    (Request::Acquire { worker }, Some(token), Ok(_)) => {
                        self.claim = Some((*worker, token));
                        self.unconfirmed.clear();
                        self.confirmed.remove(worker);
                    }
                    (
                        Request::Renew {
                            worker,
                            mark_unix_ms,
                        },
                        Some(token),
                        Ok(_),
                    ) => {
                        self.claim = Some((*worker, token));
                        self.unconfirmed.clear();
                        self.confirmed.insert(*worker, *mark_unix_ms);
                    }
                    // A renewal that found its number gone: the claim says so from now on.
                    (Request::Renew { worker, .. }, Some(token), Err(_)) if self.holds(*worker) => {
                        self.claim = Some((*worker, token));
                    }
                    _ => {}
                }
                answer.result
            }
        };
        if let Err(Error::LeaseStoreRestored { .. }) = result {
            self.restored_seen += 1;
        }
        if let Request::Release { worker, .. } = outstanding.request
            && self.holds(worker)
        {
            self.claim = None;
        }
        if let Some(machine) = &mut self.machine {
            machine.handle(now, result);
        }
    }

    fn apply_outputs(&mut self, now: Now, paths: &mut Vec<Output>) {
        let Some(machine) = &mut self.machine else {
            return;
        };
        let mut outputs = Vec::new();
        while let Some(output) = machine.take_output() {
            outputs.push(output);
        }
        self.clock.0.store(now.unix_ms, Ordering::Relaxed);
        for output in outputs {
            paths.push(output);
            match output {
                Output::Tenure {
                    datacenter,
                    worker,
                    after_unix_ms,
                    ceiling,
                } => self.start_as(datacenter, worker, after_unix_ms, ceiling),
                Output::Ceiling { ceiling } => {
                    if let Some(generator) = &self.generator {
                        generator.set_tenure(generator.datacenter(), generator.worker(), ceiling);
                    }
                }
                Output::Stop => {
                    if let Some(generator) = &self.generator {
                        generator.set_tenure(generator.datacenter(), generator.worker(), 0);
                    }
                }
            }
        }
    }

    /// The generator on a number made usable: built on the first (after the previous
    /// mark, and after the high-water mark kept), moved on the next.
    fn start_as(&mut self, datacenter: u64, worker: u64, after: Option<u64>, ceiling: u64) {
        self.tenure += 1;
        if let Some((held, token)) = self.claim
            && held == worker
        {
            self.granted = token.granted();
        }
        if let Some(generator) = &self.generator {
            if generator
                .move_to(datacenter, worker, after.unwrap_or(0), ceiling)
                .is_err()
            {
                generator.set_tenure(datacenter, worker, 0);
            }
            return;
        }
        let mut builder = Generator::builder()
            .clock(self.clock.clone())
            .layout(self.layout)
            .datacenter(datacenter)
            .worker(worker);
        let own = self.last_id_unix_ms();
        if let Some(after) = after.max(own) {
            builder = builder.resume_after_unix_ms(after);
        }
        if let Ok(generator) = builder.build() {
            generator.set_tenure(datacenter, worker, ceiling);
            self.generator = Some(generator);
        }
    }

    /// Issues up to `count` IDs at `true_ms`, as far as the generator allows.
    pub(super) fn issue(&mut self, true_ms: u64, count: u32, out: &mut Vec<Issued>) {
        let Some(generator) = &self.generator else {
            return;
        };
        self.clock
            .0
            .store(self.clocks.wall(true_ms), Ordering::Relaxed);
        for _ in 0..count {
            let Ok(id) = generator.try_next_id() else {
                break;
            };
            let parts = generator.decode(id);
            out.push(Issued {
                raw: id.as_u64(),
                unix_ms: parts.unix_ms,
                worker: parts.worker,
                confirmed_mark: self.confirmed.get(&parts.worker).copied(),
                granted: self.granted,
            });
            let issued = self.issued_up_to.entry(parts.worker).or_default();
            *issued = (*issued).max(parts.unix_ms);
            self.last_id = Some(id.as_u64());
            self.last_issue_ms = true_ms;
        }
    }
}
