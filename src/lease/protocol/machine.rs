//! One number's lease as a state machine: taken, marked, waited for, held, renewed through
//! outages, lost and taken again, released.
//!
//! The driver loop is: [`Machine::poll`] with the time now, send the [`Request`] it returns
//! (at most one is outstanding), feed the store's answer to [`Machine::handle`], apply
//! every [`Output`] from [`Machine::take_output`] to the generator in order, and call
//! `poll` again no later than [`Machine::wake_at_mono_ms`]. An answer that never comes is
//! fed as an error (a timeout): every request is one whose effect may or may not have
//! happened, and the machine never relies on a failed request having done nothing.

use std::collections::VecDeque;

use crate::error::Error;

use super::super::{NumberState, WorkerRange};
use super::marks::{
    Survey, check_claim, infer_horizon, next_mark, passed_by_mark, previous_mark, survey, wait_ms,
};
#[cfg(test)]
use super::mutation::Mutation;

/// What the holder's clocks read: its wall clock in Unix milliseconds (marks and IDs are
/// dated on it) and a monotonic clock in milliseconds from any origin (renewals are
/// scheduled and waits bounded on it, so a wall clock step moves neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    pub(crate) unix_ms: u64,
    pub(crate) mono_ms: u64,
}

/// The machine's tuning, in milliseconds (see `timing.rs` for how it is checked).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) ttl_ms: u64,
    /// How far ahead of each write the mark is: how long a holder cut off from its store
    /// goes on issuing.
    pub(crate) horizon_ms: u64,
    /// The largest recorded horizon a lost mark is inferred with (a day).
    pub(crate) max_horizon_ms: u64,
    pub(crate) renew_every_ms: u64,
    /// The longest wait for a previous holder's mark.
    pub(crate) startup_wait_ms: u64,
    /// Whether the machine itself waits for the previous mark and renews once more before
    /// the number is used (a leased generator), or hands the number out at once with the
    /// mark to start after (the lease API, whose holder waits on its own clock).
    pub(crate) wait_for_previous: bool,
    /// How many times the first taking is tried in all when the store fails; a taking
    /// after a loss is tried again on the renewal backoff, without end.
    pub(crate) take_attempts: u32,
    /// The defect to build in, for the simulator's mutation tests.
    #[cfg(test)]
    pub(crate) mutation: Option<Mutation>,
}

impl Settings {
    #[cfg(test)]
    fn mutated(&self, mutation: Mutation) -> bool {
        self.mutation == Some(mutation)
    }
}

/// Whether a defect is built in: always `false` outside the crate's own tests.
macro_rules! mutated {
    ($settings:expr, $mutation:ident) => {{
        #[cfg(test)]
        let mutated = $settings.mutated(Mutation::$mutation);
        #[cfg(not(test))]
        let mutated = false;
        mutated
    }};
}

/// What the machine asks of the store. The numbers are of the machine's range's
/// datacenter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    /// Check the store serves the holder's layout (record it if none is).
    BindLayout,
    /// Record this horizon if it is the largest; answer the largest recorded.
    RaiseHorizon { horizon_ms: u64 },
    /// What the store knows of each number of the range.
    Survey,
    /// Take this one number, if free.
    Acquire { worker: u64 },
    /// Prove the claim on the number still holds, extend it, and write the mark.
    Renew { worker: u64, mark_unix_ms: u64 },
    /// Write the mark and free the number.
    Release { worker: u64, mark_unix_ms: u64 },
    /// Drop the claim without a word to the store (it is lost already).
    Forget { worker: u64 },
}

/// A successful answer of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Done, nothing to say (a bound layout, a renewal, a release).
    Done,
    /// The largest horizon recorded.
    Horizon { recorded_ms: u64 },
    /// A survey of the range.
    Numbers(Vec<Surveyed>),
    /// A number taken.
    Acquired(Acquired),
}

/// One number as a survey saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Surveyed {
    pub(crate) worker: u64,
    pub(crate) state: NumberState,
    pub(crate) mark_unix_ms: Option<u64>,
    /// What is wrong with a number that cannot be trusted, as the store says it.
    pub(crate) detail: Option<String>,
}

/// A number the store handed out, with what it knows of the previous holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Acquired {
    pub(crate) datacenter: u64,
    pub(crate) worker: u64,
    pub(crate) previous_mark_unix_ms: Option<u64>,
    /// The store lost the number's history: its mark is at best a lower bound.
    pub(crate) previous_unknown: bool,
}

/// What the generator must do, in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Issue as this number, strictly after `after_unix_ms` (the previous holder's mark,
    /// if any) and after every ID issued before as another number, below `ceiling`
    /// (exclusive, Unix ms).
    Tenure {
        datacenter: u64,
        worker: u64,
        after_unix_ms: Option<u64>,
        ceiling: u64,
    },
    /// The number held may be used below this ceiling now.
    Ceiling { ceiling: u64 },
    /// Issue nothing more as the number held (ceiling 0).
    Stop,
}

/// A path the machine took: for logs, counters and the simulator's coverage counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    /// A free number found by the survey, its mark passed (or never held), taken.
    TookPassed { worker: u64 },
    /// A number taken by asking for each in turn (the store could not survey).
    TookScanned { worker: u64 },
    /// Every free number's mark was ahead: the nearest taken, to wait for.
    TookNearest { worker: u64, wait_ms: u64 },
    /// A number taken turned out to have its mark ahead, and was given back.
    GaveBack { worker: u64 },
    /// The store had lost the number's history: the previous mark was inferred.
    InferredMark { worker: u64, mark_unix_ms: u64 },
    /// Waiting for the previous holder's mark to pass.
    Waiting { worker: u64, until_unix_ms: u64 },
    /// The number may be used (after a loss: a new one).
    Usable { worker: u64, reacquired: bool },
    /// A renewal got through, `late_ms` after it fell due if that is more than half an
    /// interval.
    Renewed { late_ms: Option<u64> },
    /// The first failed renewal since the last success.
    OutageBegan { error: Error, left_ms: i64 },
    /// A renewal got through after an outage of this long (wall clock).
    OutageEnded { after_ms: u64 },
    /// A renewal failed again during an outage.
    RenewalFailed { error: Error },
    /// The store says the number is gone: stopped, another will be taken.
    Lost { worker: u64, error: Error },
    /// A try at taking a number failed and will be tried again.
    TakeRetried { error: Error },
    /// A taking failed for good (the first one), or this try after a loss failed.
    TakeFailed { error: Error, after_loss: bool },
    /// The generator could not move onto the number made usable (its previous mark lies
    /// past the layout's end): given back, another will be taken.
    Refused { worker: u64 },
}

/// What the machine counts, for [`LeaseStats`](crate::lease::LeaseStats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub(crate) renewals: u64,
    pub(crate) renewal_failures: u64,
    pub(crate) reacquisitions: u64,
    pub(crate) outages: u64,
}

/// Where a taking stands; `sent_unix_ms` is the clock read before its first request.
#[derive(Debug, Clone, Copy)]
struct Take {
    attempt: u32,
    sent_unix_ms: u64,
    infer_ms: u64,
    scans: u32,
    /// The store could survey: a number taken since is looked for by surveying again,
    /// not by asking for every number in turn.
    surveyed: bool,
}

/// A number taken and not yet usable, with the mark to start after.
#[derive(Debug, Clone, Copy)]
struct Taken {
    datacenter: u64,
    worker: u64,
    previous: Option<u64>,
}

/// The states of [`Machine`] (the diagram is in `docs/leases.md`).
#[derive(Debug, Clone)]
enum Phase {
    /// A taking's next try begins at `at_mono_ms`.
    Start {
        attempt: u32,
        at_mono_ms: u64,
    },
    Binding(Take),
    Raising(Take),
    Surveying(Take),
    /// Asking for the survey's passed numbers in order.
    TryingPassed {
        take: Take,
        candidates: Vec<u64>,
        next: usize,
        survey: Survey,
    },
    /// Asking for each number in turn, remembering the nearest mark ahead.
    Scanning {
        take: Take,
        next_worker: u64,
        nearest: Option<(u64, u64)>,
        held: u64,
        unusable: Vec<String>,
    },
    /// Asking for the number whose mark passes first; with a survey, the marks after it
    /// (tried next if it is taken meanwhile, or cannot be used).
    TakingNearest {
        take: Take,
        worker: u64,
        rest: Option<Survey>,
    },
    /// Writing the first mark.
    Marking {
        take: Take,
        taken: Taken,
        mark: u64,
    },
    /// Waiting for the clock to pass the previous mark; renewing the claim meanwhile.
    Waiting {
        take: Take,
        taken: Taken,
        mark: u64,
        deadline_mono_ms: u64,
        next_renewal_mono_ms: u64,
        renewing: bool,
    },
    /// Renewing once more after the wait, with a mark a horizon from now.
    Confirming {
        take: Take,
        taken: Taken,
        sent_unix_ms: u64,
        mark: u64,
    },
    /// Usable; the next renewal is due at `due_mono_ms`.
    Held {
        due_mono_ms: u64,
    },
    /// A renewal is out.
    Renewing {
        due_mono_ms: u64,
        sent_unix_ms: u64,
        mark: u64,
    },
    /// Lost; the next try at another number is at `at_mono_ms`.
    Lost {
        at_mono_ms: u64,
    },
    Released,
    /// The first taking failed.
    Failed(Error),
}

/// Which answer the machine waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    /// The current phase's request.
    Phase,
    /// A give-back, a forget or a release, whose answer changes nothing.
    Ignored,
}

/// One number's lease (see the module docs for the driver loop).
#[derive(Debug)]
pub(crate) struct Machine {
    settings: Settings,
    range: WorkerRange,
    phase: Phase,
    awaiting: Option<Awaiting>,
    /// Requests to send before the phase's own: give-backs, forgets, a release.
    queued: VecDeque<Request>,
    outputs: VecDeque<Output>,
    notes: VecDeque<Note>,
    /// The number usable now, or last usable.
    datacenter: u64,
    worker: Option<u64>,
    /// The last mark the store confirmed.
    written_unix_ms: u64,
    /// The previous holder's mark of the number held now.
    previous_unix_ms: Option<u64>,
    /// Request sent + TTL of the last confirmed write.
    lease_end_unix_ms: u64,
    outage_since_unix_ms: Option<u64>,
    /// The generator's last ID's millisecond (any number), set by the driver.
    own_unix_ms: u64,
    retry_ms: u64,
    ever_usable: bool,
    /// A release was sent before the ceiling dropped (a mutation): stop at its answer.
    stop_at_answer: bool,
    /// The store confirmed it serves the layout (during the first taking).
    bound: bool,
    /// Failed tries of the first taking's layout check.
    bind_failures: u32,
    counters: Counters,
}

/// The first retry after a failed renewal; doubled after each, up to the renewal interval
/// and [`RETRY_MAX_MS`].
pub(crate) const RETRY_FIRST_MS: u64 = 50;
/// The longest wait between retries: once the store is back, a holder finds out within
/// about this long (plus one request), however long the outage was.
pub(crate) const RETRY_MAX_MS: u64 = 1_000;
/// The pause before the second try of a first taking that failed in the store (doubled
/// after each): a store of several members answers the next request from another one.
const TAKE_RETRY_FIRST_MS: u64 = 50;
/// How many times the range is scanned for the nearest mark.
const SCANS: u32 = 3;

impl Machine {
    /// A machine that takes a number of `range`, beginning at the first [`Machine::poll`].
    pub(crate) fn take(settings: Settings, range: WorkerRange) -> Machine {
        Machine {
            settings,
            range,
            phase: Phase::Start {
                attempt: 1,
                at_mono_ms: 0,
            },
            awaiting: None,
            queued: VecDeque::new(),
            outputs: VecDeque::new(),
            notes: VecDeque::new(),
            datacenter: range.datacenter(),
            worker: None,
            written_unix_ms: 0,
            previous_unix_ms: None,
            lease_end_unix_ms: 0,
            outage_since_unix_ms: None,
            own_unix_ms: 0,
            retry_ms: RETRY_FIRST_MS,
            ever_usable: false,
            stop_at_answer: false,
            bound: false,
            bind_failures: 0,
            counters: Counters::default(),
        }
    }

    /// The next request to send, if one is due and none is outstanding.
    pub(crate) fn poll(&mut self, now: Now) -> Option<Request> {
        if self.awaiting.is_some() {
            return None;
        }
        if let Some(request) = self.queued.pop_front() {
            self.awaiting = Some(Awaiting::Ignored);
            return Some(request);
        }
        self.advance(now);
        let request = self.phase_request()?;
        self.awaiting = Some(Awaiting::Phase);
        Some(request)
    }

    /// Moves on with time alone: a try that is due, a wait that ended or ran out, a
    /// renewal that fell due.
    fn advance(&mut self, now: Now) {
        match self.phase {
            Phase::Start {
                attempt,
                at_mono_ms,
            } if now.mono_ms >= at_mono_ms => {
                let take = Take {
                    attempt,
                    sent_unix_ms: now.unix_ms,
                    infer_ms: self.settings.horizon_ms,
                    scans: 0,
                    surveyed: false,
                };
                // The first taking checks the layout once (with tries of its own); a
                // taking after a loss checks it every time: the store may have been
                // initialised again for another layout since (a wiped namespace).
                let skip = mutated!(self.settings, SkipLayoutCheck);
                self.phase = if skip || (self.bound && !self.ever_usable) {
                    Phase::Raising(take)
                } else {
                    Phase::Binding(take)
                };
            }
            Phase::Lost { at_mono_ms } if now.mono_ms >= at_mono_ms => {
                self.phase = Phase::Start {
                    attempt: self.settings.take_attempts,
                    at_mono_ms,
                };
                self.advance(now);
            }
            Phase::Waiting {
                take,
                taken,
                mark,
                deadline_mono_ms,
                ..
            } => {
                let previous = taken.previous.unwrap_or(0);
                if now.unix_ms > previous {
                    let mark = next_mark(now.unix_ms, self.settings.horizon_ms, mark);
                    self.phase = Phase::Confirming {
                        take,
                        taken,
                        sent_unix_ms: now.unix_ms,
                        mark,
                    };
                } else if now.mono_ms >= deadline_mono_ms {
                    let behind_ms = wait_ms(taken.previous, now.unix_ms);
                    self.take_failed(now, Error::ClockBehindMark { behind_ms });
                } else if let Phase::Waiting {
                    next_renewal_mono_ms,
                    renewing,
                    ..
                } = &mut self.phase
                    && now.mono_ms >= *next_renewal_mono_ms
                {
                    // The claim is renewed with the same mark while the wait lasts, so a
                    // wait as long as a TTL never lets it lapse.
                    *renewing = true;
                }
            }
            Phase::Held { due_mono_ms } if now.mono_ms >= due_mono_ms => {
                let floor = if mutated!(self.settings, MarkBelowWritten) {
                    0
                } else {
                    self.written_unix_ms
                };
                let mark = next_mark(now.unix_ms, self.settings.horizon_ms, floor);
                self.phase = Phase::Renewing {
                    due_mono_ms,
                    sent_unix_ms: now.unix_ms,
                    mark,
                };
                if mutated!(self.settings, CeilingBeforeConfirmed) {
                    self.outputs.push_back(Output::Ceiling {
                        ceiling: mark.saturating_add(1),
                    });
                }
            }
            _ => {}
        }
    }

    /// The request the current phase waits for the answer to, if it sends one now.
    fn phase_request(&mut self) -> Option<Request> {
        Some(match &mut self.phase {
            Phase::Binding(_) => Request::BindLayout,
            Phase::Raising(_) => Request::RaiseHorizon {
                horizon_ms: self.settings.horizon_ms,
            },
            Phase::Surveying(_) => Request::Survey,
            Phase::TryingPassed {
                candidates, next, ..
            } => Request::Acquire {
                worker: candidates[*next],
            },
            Phase::Scanning { next_worker, .. } => Request::Acquire {
                worker: *next_worker,
            },
            Phase::TakingNearest { worker, .. } => Request::Acquire { worker: *worker },
            Phase::Marking { taken, mark, .. } | Phase::Confirming { taken, mark, .. } => {
                Request::Renew {
                    worker: taken.worker,
                    mark_unix_ms: *mark,
                }
            }
            Phase::Waiting {
                taken,
                mark,
                renewing,
                ..
            } => {
                if !*renewing {
                    return None;
                }
                Request::Renew {
                    worker: taken.worker,
                    mark_unix_ms: *mark,
                }
            }
            Phase::Renewing { mark, .. } => Request::Renew {
                worker: self.worker?,
                mark_unix_ms: *mark,
            },
            Phase::Start { .. }
            | Phase::Held { .. }
            | Phase::Lost { .. }
            | Phase::Released
            | Phase::Failed(_) => return None,
        })
    }

    /// The latest monotonic time by which [`Machine::poll`] must be called again; `None`
    /// while an answer is awaited, or when nothing more will happen by itself. While
    /// waiting for a mark, an estimate from the wall clock: the driver may poll sooner.
    pub(crate) fn wake_at_mono_ms(&self, now: Now) -> Option<u64> {
        if self.awaiting.is_some() {
            return None;
        }
        if !self.queued.is_empty() {
            return Some(now.mono_ms);
        }
        match &self.phase {
            Phase::Start { at_mono_ms, .. } | Phase::Lost { at_mono_ms } => Some(*at_mono_ms),
            Phase::Held { due_mono_ms } => Some(*due_mono_ms),
            Phase::Waiting {
                taken,
                deadline_mono_ms,
                next_renewal_mono_ms,
                ..
            } => {
                let passes = now
                    .mono_ms
                    .saturating_add(wait_ms(taken.previous, now.unix_ms));
                Some(passes.min(*deadline_mono_ms).min(*next_renewal_mono_ms))
            }
            Phase::Released | Phase::Failed(_) => None,
            _ => Some(now.mono_ms),
        }
    }

    /// The store's answer to the request [`Machine::poll`] returned last (a timeout or an
    /// unreachable store as an error).
    pub(crate) fn handle(&mut self, now: Now, answer: Result<Answer, Error>) {
        match self.awaiting.take() {
            None => {}
            Some(Awaiting::Ignored) if std::mem::take(&mut self.stop_at_answer) => {
                self.outputs.push_back(Output::Stop);
            }
            Some(Awaiting::Ignored) => {}
            Some(Awaiting::Phase) => self.answered(now, answer),
        }
    }

    fn answered(&mut self, now: Now, answer: Result<Answer, Error>) {
        // A copy: the phase stays in place until an arm moves on, so that a failure sees
        // the taking it ends (its try count, the number to give back).
        let phase = self.phase.clone();
        match (phase, answer) {
            (Phase::Binding(take), Ok(_)) => {
                self.bound = true;
                self.phase = Phase::Raising(take);
            }
            (Phase::Raising(mut take), Ok(answer)) => {
                let recorded_ms = match answer {
                    Answer::Horizon { recorded_ms } => recorded_ms,
                    _ => self.settings.horizon_ms,
                };
                let own = self.settings.horizon_ms;
                take.infer_ms = if mutated!(self.settings, InferWithOwnHorizon) {
                    own
                } else {
                    infer_horizon(recorded_ms, own, self.settings.max_horizon_ms)
                };
                self.phase = Phase::Surveying(take);
            }
            (Phase::Surveying(mut take), Ok(Answer::Numbers(numbers))) => {
                take.surveyed = true;
                let candidates = passed_by_mark(&numbers, now.unix_ms);
                let survey = survey(&numbers, now.unix_ms, take.infer_ms);
                self.try_passed(now, take, candidates, 0, survey);
            }
            // A store that cannot survey (or failed to): ask for each number in turn. One
            // that refuses (restored, not initialised) refuses the taking.
            (Phase::Surveying(take), Err(Error::LeaseStore { .. }) | Ok(_)) => {
                self.scan_from(take, self.first_worker());
            }
            (Phase::Surveying(_), Err(error)) => self.take_failed(now, error),
            (
                Phase::TryingPassed {
                    take,
                    candidates,
                    next,
                    survey,
                },
                answer,
            ) => match answer {
                Ok(Answer::Acquired(acquired)) => {
                    let Some(taken) = self.check(now, take, &acquired) else {
                        return;
                    };
                    if taken.previous.is_none_or(|previous| previous < now.unix_ms) {
                        self.notes.push_back(Note::TookPassed {
                            worker: taken.worker,
                        });
                        self.mark(now, take, taken);
                    } else {
                        // Used and given back since the survey: leave it as it is now, and
                        // count it with the marks ahead.
                        let previous = taken.previous.unwrap_or(0);
                        self.give_back(taken.worker, previous);
                        let mut survey = survey;
                        survey.add_ahead(previous, taken.worker);
                        self.try_passed(now, take, candidates, next + 1, survey);
                    }
                }
                // Taken (or found unusable) since the survey: the next. What the store
                // said of it is what a full range reports.
                Err(Error::LeaseRangeFull { held, unusable, .. }) => {
                    let mut survey = survey;
                    survey.held += held;
                    survey.unusable.extend(unusable);
                    self.try_passed(now, take, candidates, next + 1, survey);
                }
                Ok(_) => self.try_passed(now, take, candidates, next + 1, survey),
                Err(error) => self.take_failed(now, error),
            },
            (
                Phase::Scanning {
                    take,
                    next_worker,
                    mut nearest,
                    mut held,
                    mut unusable,
                },
                answer,
            ) => {
                match answer {
                    Ok(Answer::Acquired(acquired)) => {
                        let Some(taken) = self.check(now, take, &acquired) else {
                            return;
                        };
                        match taken.previous {
                            Some(mark) if wait_ms(taken.previous, now.unix_ms) > 0 => {
                                self.give_back(taken.worker, mark);
                                if nearest.is_none_or(|(_, nearest_mark)| mark < nearest_mark) {
                                    nearest = Some((taken.worker, mark));
                                }
                            }
                            _ => {
                                self.notes.push_back(Note::TookScanned {
                                    worker: taken.worker,
                                });
                                return self.mark(now, take, taken);
                            }
                        }
                    }
                    Err(Error::LeaseRangeFull {
                        held: more_held,
                        unusable: more_unusable,
                        ..
                    }) => {
                        held += more_held;
                        unusable.extend(more_unusable);
                    }
                    Ok(_) => {}
                    Err(error) => return self.take_failed(now, error),
                }
                self.scan_on(take, next_worker + 1, nearest, held, unusable, now);
            }
            (Phase::TakingNearest { take, .. }, Ok(Answer::Acquired(acquired))) => {
                let Some(taken) = self.check(now, take, &acquired) else {
                    return;
                };
                let wait = wait_ms(taken.previous, now.unix_ms);
                if wait > self.settings.startup_wait_ms {
                    self.give_back(taken.worker, taken.previous.unwrap_or(0));
                    return self.take_failed(now, Error::ClockBehindMark { behind_ms: wait });
                }
                self.notes.push_back(Note::TookNearest {
                    worker: taken.worker,
                    wait_ms: wait,
                });
                self.mark(now, take, taken);
            }
            // Taken since the survey, or one the store cannot use: the next mark ahead, and
            // what the store said of this one counts toward a full range.
            (
                Phase::TakingNearest {
                    take,
                    rest: Some(mut survey),
                    ..
                },
                Err(Error::LeaseRangeFull { held, unusable, .. }),
            ) => {
                survey.held += held;
                survey.unusable.extend(unusable);
                self.take_next_ahead(now, take, survey);
            }
            (
                Phase::TakingNearest {
                    take, rest: None, ..
                },
                Err(Error::LeaseRangeFull { unusable, .. }),
            ) if take.scans >= SCANS => {
                // Said of the range asked for, not of the one number tried last.
                let range = self.range;
                self.take_failed(
                    now,
                    Error::LeaseRangeFull {
                        range: range.to_string(),
                        held: range.workers().count() as u64 - unusable.len() as u64,
                        unusable,
                    },
                );
            }
            // Taken since the scan: scan again.
            (Phase::TakingNearest { take, .. }, Err(Error::LeaseRangeFull { .. })) => {
                self.scan_from(take, self.first_worker());
            }
            (Phase::TakingNearest { .. }, Ok(_)) => self.take_failed(now, unexpected()),
            (Phase::Marking { take, taken, mark }, Ok(_)) => self.marked(now, take, taken, mark),
            (
                Phase::Waiting {
                    take,
                    taken,
                    mark,
                    deadline_mono_ms,
                    ..
                },
                Ok(_),
            ) => {
                self.phase = Phase::Waiting {
                    take,
                    taken,
                    mark,
                    deadline_mono_ms,
                    next_renewal_mono_ms: now.mono_ms.saturating_add(self.settings.renew_every_ms),
                    renewing: false,
                };
            }
            (
                Phase::Confirming {
                    taken,
                    sent_unix_ms,
                    mark,
                    ..
                },
                Ok(_),
            ) => {
                // The renewal right after a first taking's wait is counted as one.
                if !self.ever_usable {
                    self.counters.renewals += 1;
                }
                self.usable(now, taken, sent_unix_ms, mark);
            }
            (
                Phase::Renewing {
                    due_mono_ms,
                    sent_unix_ms,
                    mark,
                },
                answer,
            ) => self.renewal_answered(now, due_mono_ms, sent_unix_ms, mark, answer),
            // Every other failure of a taking.
            (
                Phase::Binding(_)
                | Phase::Raising(_)
                | Phase::TakingNearest { .. }
                | Phase::Marking { .. }
                | Phase::Waiting { .. }
                | Phase::Confirming { .. },
                Err(error),
            ) => self.take_failed(now, error),
            // Nothing was awaited in these phases: keep them.
            (
                phase @ (Phase::Start { .. }
                | Phase::Held { .. }
                | Phase::Lost { .. }
                | Phase::Released
                | Phase::Failed(_)),
                _,
            ) => self.phase = phase,
        }
    }

    fn first_worker(&self) -> u64 {
        *self.range.workers().start()
    }

    /// Asks for the next passed candidate. With none left, takes the free number whose
    /// mark passes first, as the survey saw it (one whose history was lost counts with
    /// its inferred mark): a survey spares a fleet waiting for numbers the request per
    /// number a scan costs. With none, the range is full.
    fn try_passed(
        &mut self,
        now: Now,
        take: Take,
        candidates: Vec<u64>,
        next: usize,
        survey: Survey,
    ) {
        if next < candidates.len() {
            self.phase = Phase::TryingPassed {
                take,
                candidates,
                next,
                survey,
            };
            return;
        }
        self.take_next_ahead(now, take, survey);
    }

    /// Takes the survey's nearest mark ahead not tried yet; with none, the range is full.
    /// An inferred mark too far ahead is still taken, and given back with it: written
    /// down, it passes in time.
    fn take_next_ahead(&mut self, now: Now, take: Take, mut survey: Survey) {
        match survey.take_nearest() {
            Some((mark, worker, inferred)) => {
                let wait = wait_ms(Some(mark), now.unix_ms);
                if wait > self.settings.startup_wait_ms && !inferred {
                    return self.take_failed(now, Error::ClockBehindMark { behind_ms: wait });
                }
                // A scan looks again when the number is taken meanwhile; a survey tries
                // its next mark ahead.
                let rest = take.surveyed.then_some(survey);
                self.phase = Phase::TakingNearest { take, worker, rest };
            }
            None => self.take_failed(
                now,
                Error::LeaseRangeFull {
                    range: self.range.to_string(),
                    held: survey.held,
                    unusable: survey.unusable,
                },
            ),
        }
    }

    fn scan_from(&mut self, mut take: Take, worker: u64) {
        take.scans += 1;
        self.phase = Phase::Scanning {
            take,
            next_worker: worker,
            nearest: None,
            held: 0,
            unusable: Vec::new(),
        };
    }

    /// The scan goes on at `worker`, or, past the range's end, takes the nearest mark.
    fn scan_on(
        &mut self,
        take: Take,
        worker: u64,
        nearest: Option<(u64, u64)>,
        held: u64,
        unusable: Vec<String>,
        now: Now,
    ) {
        if worker <= *self.range.workers().end() {
            self.phase = Phase::Scanning {
                take,
                next_worker: worker,
                nearest,
                held,
                unusable,
            };
            return;
        }
        // The scan's nearest, as a survey of one number ahead.
        let mut survey = Survey::counted(held, unusable);
        if let Some((worker, mark)) = nearest {
            survey.add_ahead(mark, worker);
        }
        self.take_next_ahead(now, take, survey);
    }

    /// The number taken, checked to be of the range, with its previous mark (inferred
    /// when the store lost it); `None` after a failure.
    fn check(&mut self, now: Now, take: Take, acquired: &Acquired) -> Option<Taken> {
        if let Err(error) = check_claim(acquired.datacenter, acquired.worker, &self.range) {
            // Not ours to write to: dropped, never released.
            self.queued.push_back(Request::Forget {
                worker: acquired.worker,
            });
            self.take_failed(now, error);
            return None;
        }
        let previous = previous_mark(
            acquired.previous_mark_unix_ms,
            acquired.previous_unknown,
            now.unix_ms,
            take.infer_ms,
        );
        if acquired.previous_unknown {
            self.notes.push_back(Note::InferredMark {
                worker: acquired.worker,
                mark_unix_ms: previous.unwrap_or(0),
            });
        }
        Some(Taken {
            datacenter: acquired.datacenter,
            worker: acquired.worker,
            previous,
        })
    }

    fn give_back(&mut self, worker: u64, mark_unix_ms: u64) {
        let mark_unix_ms = if mutated!(self.settings, GiveBackWithoutMark) {
            0
        } else {
            mark_unix_ms
        };
        self.notes.push_back(Note::GaveBack { worker });
        self.queued.push_back(Request::Release {
            worker,
            mark_unix_ms,
        });
    }

    /// Writes the first mark: a horizon after the clock read before the taking began,
    /// never below the previous mark (nor, after a loss, one's own last ID).
    fn mark(&mut self, _now: Now, take: Take, taken: Taken) {
        let floor = taken.previous.unwrap_or(0).max(self.own_unix_ms);
        let mark = next_mark(take.sent_unix_ms, self.settings.horizon_ms, floor);
        self.phase = Phase::Marking { take, taken, mark };
    }

    /// The first mark is written: the number is usable at once when there is nothing to
    /// wait for, else after the wait.
    fn marked(&mut self, now: Now, take: Take, taken: Taken, mark: u64) {
        let skip_wait = mutated!(self.settings, IssueBeforePreviousMark);
        let wait = wait_ms(taken.previous, now.unix_ms);
        if taken.previous.is_none() || !self.settings.wait_for_previous || skip_wait {
            let taken = if skip_wait {
                Taken {
                    previous: None,
                    ..taken
                }
            } else {
                taken
            };
            return self.usable(now, taken, take.sent_unix_ms, mark);
        }
        if wait > self.settings.startup_wait_ms {
            return self.take_failed(now, Error::ClockBehindMark { behind_ms: wait });
        }
        self.notes.push_back(Note::Waiting {
            worker: taken.worker,
            until_unix_ms: taken.previous.unwrap_or(0).saturating_add(1),
        });
        self.phase = Phase::Waiting {
            take,
            taken,
            mark,
            deadline_mono_ms: now.mono_ms.saturating_add(self.settings.startup_wait_ms),
            next_renewal_mono_ms: now.mono_ms.saturating_add(self.settings.renew_every_ms),
            renewing: false,
        };
    }

    /// The number may be used: its tenure goes out, and renewals begin.
    fn usable(&mut self, now: Now, taken: Taken, sent_unix_ms: u64, mark: u64) {
        let reacquired = self.ever_usable;
        self.ever_usable = true;
        self.datacenter = taken.datacenter;
        self.worker = Some(taken.worker);
        self.previous_unix_ms = taken.previous;
        self.confirmed(sent_unix_ms, mark);
        self.outputs.push_back(Output::Tenure {
            datacenter: taken.datacenter,
            worker: taken.worker,
            after_unix_ms: taken.previous,
            ceiling: mark.saturating_add(1),
        });
        if reacquired {
            self.counters.reacquisitions += 1;
        }
        self.notes.push_back(Note::Usable {
            worker: taken.worker,
            reacquired,
        });
        self.retry_ms = RETRY_FIRST_MS;
        self.phase = Phase::Held {
            due_mono_ms: now.mono_ms.saturating_add(self.settings.renew_every_ms),
        };
    }

    /// A mark sent at `sent_unix_ms` is confirmed.
    fn confirmed(&mut self, sent_unix_ms: u64, mark: u64) {
        self.written_unix_ms = mark;
        self.lease_end_unix_ms = sent_unix_ms.saturating_add(self.settings.ttl_ms);
    }

    fn renewal_answered(
        &mut self,
        now: Now,
        due_mono_ms: u64,
        sent_unix_ms: u64,
        mark: u64,
        answer: Result<Answer, Error>,
    ) {
        match answer {
            Ok(_) => {
                self.confirmed(sent_unix_ms, mark);
                self.outputs.push_back(Output::Ceiling {
                    ceiling: mark.saturating_add(1),
                });
                self.counters.renewals += 1;
                if let Some(since) = self.outage_since_unix_ms.take() {
                    self.notes.push_back(Note::OutageEnded {
                        after_ms: now.unix_ms.saturating_sub(since),
                    });
                }
                // Half an interval late is a store or a process too slow for comfort: the
                // margin before the lease's end is what absorbs it.
                let late_ms = now.mono_ms.saturating_sub(due_mono_ms);
                let late = late_ms > self.settings.renew_every_ms / 2;
                self.notes.push_back(Note::Renewed {
                    late_ms: late.then_some(late_ms),
                });
                self.retry_ms = RETRY_FIRST_MS;
                self.phase = Phase::Held {
                    due_mono_ms: now.mono_ms.saturating_add(self.settings.renew_every_ms),
                };
            }
            Err(error @ (Error::LeaseLost { .. } | Error::LeaseStoreRestored { .. })) => {
                // Stop at once: someone else may hold the number now. The ceiling goes
                // before the claim (and with it, on the file store, the liveness lock).
                let worker = self.worker.unwrap_or(0);
                if !mutated!(self.settings, KeepCeilingWhenLost) {
                    self.outputs.push_back(Output::Stop);
                }
                self.queued.push_back(Request::Forget { worker });
                self.outage_since_unix_ms = None;
                self.counters.renewal_failures += 1;
                self.notes.push_back(Note::Lost { worker, error });
                self.phase = Phase::Lost {
                    at_mono_ms: now.mono_ms.saturating_add(self.retry_ms),
                };
                self.back_off();
            }
            Err(error) => {
                // The mark this request carried may or may not have been written: the
                // ceiling stays at the last one known to be.
                self.counters.renewal_failures += 1;
                if self.outage_since_unix_ms.is_none() {
                    self.outage_since_unix_ms = Some(now.unix_ms.max(1));
                    self.counters.outages += 1;
                    let left_ms = self.written_unix_ms as i64 + 1 - now.unix_ms as i64;
                    self.notes.push_back(Note::OutageBegan { error, left_ms });
                } else {
                    self.notes.push_back(Note::RenewalFailed { error });
                }
                self.phase = Phase::Held {
                    due_mono_ms: now.mono_ms.saturating_add(self.retry_ms),
                };
                self.back_off();
            }
        }
    }

    fn back_off(&mut self) {
        let longest = self.settings.renew_every_ms.clamp(1, RETRY_MAX_MS);
        self.retry_ms = (self.retry_ms * 2).clamp(1, longest);
    }

    /// A try at taking failed: the number taken (if any) goes back with its previous mark
    /// (nothing was issued as it); the try is made again, or the taking fails.
    fn take_failed(&mut self, now: Now, error: Error) {
        let phase = std::mem::replace(&mut self.phase, Phase::Released);
        let (attempt, taken) = match phase {
            // The layout check has tries of its own; the taking's count starts after it.
            Phase::Binding(take) if !self.ever_usable => {
                self.bind_failures += 1;
                return self.retry_or_fail(now, error, self.bind_failures, take.attempt);
            }
            Phase::Binding(take)
            | Phase::Raising(take)
            | Phase::Surveying(take)
            | Phase::TryingPassed { take, .. }
            | Phase::Scanning { take, .. }
            | Phase::TakingNearest { take, .. } => (take.attempt, None),
            Phase::Marking { take, taken, .. }
            | Phase::Waiting { take, taken, .. }
            | Phase::Confirming { take, taken, .. } => (take.attempt, Some(taken)),
            Phase::Start { attempt, .. } => (attempt, None),
            _ => (self.settings.take_attempts, None),
        };
        if let Some(taken) = taken {
            self.queued.push_back(Request::Release {
                worker: taken.worker,
                mark_unix_ms: taken.previous.unwrap_or(0),
            });
        }
        // A number lost while it was being taken (its claim ran out during the wait): the
        // taking goes on with another, as after a failure of the store.
        let error = match (taken, error) {
            (Some(taken), Error::LeaseLost { .. }) => Error::LeaseStore {
                reason: format!(
                    "worker {} of datacenter {} was lost while it was being taken; another \
                     is taken",
                    taken.worker, taken.datacenter
                ),
            },
            (_, error) => error,
        };
        if self.ever_usable {
            // After a loss: again on the renewal backoff, until a number is taken.
            self.counters.renewal_failures += 1;
            self.notes.push_back(Note::TakeFailed {
                error,
                after_loss: true,
            });
            self.phase = Phase::Lost {
                at_mono_ms: now.mono_ms.saturating_add(self.retry_ms),
            };
            self.back_off();
        } else {
            self.retry_or_fail(now, error, attempt, attempt + 1);
        }
    }

    /// A first taking's `failures`th failed try: tried again (as try `next`) after a pause
    /// when the store failed and tries are left, else the taking fails.
    fn retry_or_fail(&mut self, now: Now, error: Error, failures: u32, next: u32) {
        // A store that hands out nothing for a while after its server started: a leased
        // generator waits through it, however long it says (its clock, not ours), asking
        // again at least every RETRY_MAX_MS, and spends no try. The lease API's holder (no
        // waiting of the machine's) fails at once: a request must not hold a slot of the
        // service for minutes, and the client is told to come back.
        if let Error::LeaseStoreStarting { wait_ms, .. } = error
            && self.settings.wait_for_previous
        {
            self.notes.push_back(Note::TakeRetried { error });
            self.phase = Phase::Start {
                attempt: next.saturating_sub(1).max(1),
                at_mono_ms: now.mono_ms.saturating_add(wait_ms.clamp(1, RETRY_MAX_MS)),
            };
            return;
        }
        if matches!(error, Error::LeaseStore { .. }) && failures < self.settings.take_attempts {
            self.notes.push_back(Note::TakeRetried { error });
            self.phase = Phase::Start {
                attempt: next,
                at_mono_ms: now.mono_ms.saturating_add(take_pause(failures)),
            };
        } else {
            self.notes.push_back(Note::TakeFailed {
                error: error.clone(),
                after_loss: false,
            });
            self.phase = Phase::Failed(error);
        }
    }

    /// The generator cannot use the number just made usable (a previous mark past the
    /// layout's end): it goes back with that mark, and another is taken on the backoff.
    pub(crate) fn refuse_number(&mut self, now: Now) {
        let Some(worker) = self.usable_worker().map(|(_, worker)| worker) else {
            return;
        };
        self.queued.push_back(Request::Release {
            worker,
            // Nothing was issued as it: its previous mark (never lower) is enough.
            mark_unix_ms: self.previous_unix_ms.unwrap_or(0),
        });
        self.counters.renewal_failures += 1;
        self.notes.push_back(Note::Refused { worker });
        self.phase = Phase::Lost {
            at_mono_ms: now.mono_ms.saturating_add(self.retry_ms),
        };
        self.back_off();
    }

    /// Gives the number up: the generator stops first, then the store gets the release
    /// (when a number is held): the last millisecond used (`used_unix_ms`: the generator's
    /// last ID, never below the previous holder's mark) on a usable number, the previous
    /// mark on one still being taken. Cancels a taking under way.
    pub(crate) fn release(&mut self, used_unix_ms: u64) {
        let phase = std::mem::replace(&mut self.phase, Phase::Released);
        let release = match phase {
            Phase::Held { .. } | Phase::Renewing { .. } => {
                let floor = self.previous_unix_ms.unwrap_or(0);
                self.worker.map(|worker| (worker, used_unix_ms.max(floor)))
            }
            Phase::Marking { taken, .. }
            | Phase::Waiting { taken, .. }
            | Phase::Confirming { taken, .. } => Some((taken.worker, taken.previous.unwrap_or(0))),
            _ => None,
        };
        let stop_first = !mutated!(self.settings, ReleaseBeforeStop);
        if stop_first && self.worker.is_some() {
            self.outputs.push_back(Output::Stop);
        }
        if let Some((worker, mark_unix_ms)) = release {
            self.queued.push_back(Request::Release {
                worker,
                mark_unix_ms,
            });
            self.stop_at_answer = !stop_first;
        }
        // The phase's own answer, if one is out, now changes nothing.
        if self.awaiting == Some(Awaiting::Phase) {
            self.awaiting = Some(Awaiting::Ignored);
        }
    }

    /// Tells the machine the generator's last ID's millisecond (any number it issued as):
    /// a number taken after a loss is marked above it.
    pub(crate) fn set_own_unix_ms(&mut self, unix_ms: u64) {
        self.own_unix_ms = self.own_unix_ms.max(unix_ms);
    }

    /// The next output for the generator, in order.
    pub(crate) fn take_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next path taken, in order.
    pub(crate) fn take_note(&mut self) -> Option<Note> {
        self.notes.pop_front()
    }

    /// The number usable now: held or renewing (also through an outage).
    pub(crate) fn usable_worker(&self) -> Option<(u64, u64)> {
        match self.phase {
            Phase::Held { .. } | Phase::Renewing { .. } => {
                self.worker.map(|worker| (self.datacenter, worker))
            }
            _ => None,
        }
    }

    /// Lost, and not yet usable again as another number.
    pub(crate) fn is_lost(&self) -> bool {
        self.ever_usable
            && !matches!(
                self.phase,
                Phase::Held { .. } | Phase::Renewing { .. } | Phase::Released
            )
    }

    pub(crate) fn failure(&self) -> Option<&Error> {
        match &self.phase {
            Phase::Failed(error) => Some(error),
            _ => None,
        }
    }

    /// Waiting for a previous mark: the number, and the first millisecond it may use.
    pub(crate) fn waiting_for(&self) -> Option<(u64, u64, u64)> {
        match &self.phase {
            Phase::Waiting { taken, .. } => Some((
                taken.datacenter,
                taken.worker,
                taken.previous.unwrap_or(0).saturating_add(1),
            )),
            _ => None,
        }
    }

    pub(crate) fn written_unix_ms(&self) -> u64 {
        self.written_unix_ms
    }

    pub(crate) fn previous_unix_ms(&self) -> Option<u64> {
        self.previous_unix_ms
    }

    pub(crate) fn lease_end_unix_ms(&self) -> u64 {
        self.lease_end_unix_ms
    }

    pub(crate) fn outage_since_unix_ms(&self) -> Option<u64> {
        self.outage_since_unix_ms
    }

    pub(crate) fn counters(&self) -> Counters {
        self.counters
    }
}

/// The pause after the `attempt`th failed try of a first taking: 50 ms, doubling.
fn take_pause(attempt: u32) -> u64 {
    TAKE_RETRY_FIRST_MS << attempt.saturating_sub(1).min(16)
}

fn unexpected() -> Error {
    Error::LeaseStore {
        reason: "the store answered a request with the answer to another".to_string(),
    }
}
