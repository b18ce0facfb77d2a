//! One run: the event queue in true time, the network between holders and the store (delay,
//! loss, duplication, reordering, partitions), the store model the run chose (etcd or
//! PostgreSQL), the fault schedule, and the checks.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::error::Error;
use crate::snowflake::Layout;

use super::super::WorkerRange;
use super::super::protocol::{Note, Output, Settings};
use super::check::{Issuer, Safety, Trace};
use super::holder::{Clocks, Holder, Issued};
#[cfg(feature = "postgres")]
use super::postgres_store::PostgresModel;
use super::store::{Store, StoreAnswer, StoreRequest, Waiting};
use super::{Fault, Model, Report, Rng, Shape};

/// The store model a run talks to.
enum Backend {
    Etcd(Store),
    #[cfg(feature = "postgres")]
    Postgres(Box<PostgresModel>),
}

impl Backend {
    fn apply(&mut self, request: &StoreRequest, now_ms: u64, waiting: Waiting) -> StoreAnswer {
        match self {
            Backend::Etcd(store) => store.apply(request, now_ms, waiting),
            #[cfg(feature = "postgres")]
            Backend::Postgres(model) => model.apply(request, now_ms),
        }
    }

    fn etcd(&mut self) -> Option<&mut Store> {
        match self {
            Backend::Etcd(store) => Some(store),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => None,
        }
    }

    /// The etcd store's revision, or the PostgreSQL model's count of writes: a number for
    /// the trace that moves with the store.
    fn revision(&self) -> u64 {
        match self {
            Backend::Etcd(store) => store.revision(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(model) => model.writes(),
        }
    }

    fn serves(&self, layout: u32) -> bool {
        match self {
            Backend::Etcd(store) => store.serves(layout),
            #[cfg(feature = "postgres")]
            Backend::Postgres(model) => model.serves(layout),
        }
    }

    fn take_backs(&self) -> u64 {
        match self {
            Backend::Etcd(store) => store.take_backs,
            #[cfg(feature = "postgres")]
            Backend::Postgres(model) => model.take_backs,
        }
    }

    fn numbers(&self) -> u64 {
        match self {
            Backend::Etcd(store) => store.numbers(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(model) => model.numbers(),
        }
    }

    fn written_before(&self, before_ms: u64) -> Vec<u64> {
        match self {
            Backend::Etcd(store) => store.written_before(before_ms),
            #[cfg(feature = "postgres")]
            Backend::Postgres(model) => model.written_before(before_ms),
        }
    }
}

#[derive(Debug)]
enum Event {
    /// A holder's machine is due.
    Wake { holder: u32, incarnation: u32 },
    /// A holder issues a few IDs (every holder does, every so often).
    Issue { holder: u32 },
    ToStore {
        holder: u32,
        incarnation: u32,
        id: u64,
        request: StoreRequest,
        sent_ms: u64,
    },
    ToHolder {
        holder: u32,
        incarnation: u32,
        id: u64,
        answer: StoreAnswer,
    },
    Timeout {
        holder: u32,
        incarnation: u32,
        id: u64,
    },
    /// A holder (again) wants a number: a first start, or a restart.
    Start { holder: u32 },
    /// The next fault of the schedule.
    NextFault,
    /// The operator's procedure after a restore or a wipe, and the store back
    /// (`after_restore`: on PostgreSQL, `init --after-restore` rather than `init`).
    Procedure { after_restore: bool },
    /// The store answers again.
    StoreUp,
    /// A clock step corrected.
    ClockStep { holder: u32, step: i64 },
    /// The PostgreSQL server's clock step corrected.
    #[cfg(feature = "postgres")]
    ServerClockStep { step: i64 },
}

impl Event {
    fn holder(&self) -> Option<u32> {
        match *self {
            Event::Wake { holder, .. }
            | Event::Issue { holder }
            | Event::ToHolder { holder, .. }
            | Event::Timeout { holder, .. }
            | Event::Start { holder } => Some(holder),
            _ => None,
        }
    }
}

struct Queued {
    at: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

pub(super) struct World<'a> {
    shape: &'a Shape,
    rng: Rng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Queued>>,
    store: Backend,
    snapshot: Option<Store>,
    store_down_until: u64,
    holders: Vec<Holder>,
    /// Which holders want a number (not stopped, not crashed).
    wanting: Vec<bool>,
    last_arrival: Vec<u64>,
    safety: Safety,
    trace: Trace,
    faults: BTreeMap<&'static str, u64>,
    paths: BTreeMap<&'static str, u64>,
    issued: Vec<Issued>,
    outputs: Vec<Output>,
    start_ms: u64,
    heal_at: u64,
    end_at: u64,
    /// The largest spread of two wall clocks the schedule allows (offsets and steps).
    clock_spread_ms: u64,
}

impl<'a> World<'a> {
    pub(super) fn new(shape: &'a Shape, seed: u64, mutation: Option<super::Mutation>) -> World<'a> {
        let mut rng = Rng::new(seed);
        let start_ms = 1_790_000_000_000 + rng.below(1_000_000_000);
        // 10 worker bits and no datacenter field: room for 1,024 numbers.
        let layout = Layout::new(41, 0, 10, 12).unwrap_or_default();
        let other_layout = layout
            .with_epoch_unix_ms(layout.epoch_unix_ms() as i64 + 1_000)
            .unwrap_or(layout);
        let range = WorkerRange::new(0, 0..=shape.numbers.clamp(1, 1_024) - 1)
            .and_then(|range| range.check(&layout).map(|()| range))
            .unwrap_or_else(|error| panic!("a shape of {} numbers: {error}", shape.numbers));
        let holders = (0..shape.holders)
            .map(|index| {
                let horizon_ms =
                    shape.horizons_ms[rng.below(shape.horizons_ms.len() as u64) as usize];
                let settings = Settings {
                    ttl_ms: shape.ttl_ms,
                    horizon_ms,
                    max_horizon_ms: 86_400_000,
                    renew_every_ms: shape.ttl_ms / 3,
                    startup_wait_ms: horizon_ms + 1_000,
                    // One holder in four takes numbers as the lease API does: handed out
                    // at once, the generator itself refusing to issue before the mark.
                    wait_for_previous: rng.below(4) != 0,
                    take_attempts: 5,
                    mutation,
                };
                let clocks = Clocks {
                    start_ms,
                    offset_ms: rng.signed(shape.skew_ms),
                    drift_ppm: rng.signed(shape.drift_ppm as u64),
                };
                // One holder in a run with a misconfigured layout, when the shape asks.
                let (holder_layout, layout_id) =
                    if shape.misconfigured && index == shape.holders - 1 {
                        (other_layout, 1)
                    } else {
                        (layout, 0)
                    };
                let mut holder = Holder::new(clocks, settings, range, holder_layout, layout_id);
                holder.keeps_high_water = rng.below(2) == 0;
                holder
            })
            .collect::<Vec<_>>();
        // Liveness is checked a bound after the faults heal: a pending procedure (the
        // clocks' spread and a TTL), a wait for the marks it raised (the largest horizon
        // and the spread again), a TTL for a lease left behind, and retries.
        let clock_spread_ms = 2 * (shape.skew_ms + shape.step_ms)
            + shape.duration_ms * shape.drift_ppm as u64 / 500_000;
        let max_horizon_ms = shape.horizons_ms.iter().copied().max().unwrap_or(0);
        // (On PostgreSQL, a server start closes a gate for the largest horizon and two
        // requests' timeouts.)
        let liveness_bound_ms = 2 * clock_spread_ms
            + 3 * max_horizon_ms
            + 4 * shape.ttl_ms
            + 2 * shape.timeout_ms
            + 10_000;
        let heal_at = start_ms + shape.duration_ms * 6 / 10;
        let end_at = heal_at + (shape.duration_ms * 4 / 10).max(liveness_bound_ms);
        let store = match shape.model {
            Model::Etcd => Backend::Etcd(Store::new(shape.numbers, shape.ttl_ms, start_ms)),
            // The server's clock is one more clock off the true time, as the holders' are.
            #[cfg(feature = "postgres")]
            Model::Postgres(run) => Backend::Postgres(Box::new(PostgresModel::new(
                shape.numbers,
                shape.ttl_ms,
                start_ms,
                rng.signed(shape.skew_ms),
                run,
                2 * shape.timeout_ms,
            ))),
        };
        let mut world = World {
            shape,
            rng,
            now: start_ms,
            seq: 0,
            queue: BinaryHeap::new(),
            store,
            snapshot: None,
            store_down_until: 0,
            wanting: vec![false; holders.len()],
            last_arrival: vec![0; holders.len()],
            holders,
            safety: Safety::default(),
            trace: Trace::new(),
            faults: BTreeMap::new(),
            paths: BTreeMap::new(),
            issued: Vec::new(),
            outputs: Vec::new(),
            start_ms,
            heal_at,
            end_at,
            clock_spread_ms,
        };
        for holder in 0..shape.holders {
            let late = world.holders[holder as usize].layout_id != 0;
            let at = start_ms
                + world.rng.below(shape.ttl_ms * 2)
                + if late { 4 * shape.ttl_ms } else { 0 };
            world.schedule(at, Event::Start { holder });
            let at = at + world.rng.below(shape.issue_every_ms);
            world.schedule(at, Event::Issue { holder });
        }
        if shape.fault_every_ms > 0 {
            let at = start_ms + world.rng.below(shape.fault_every_ms);
            world.schedule(at, Event::NextFault);
        }
        world
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse(Queued {
            at,
            seq: self.seq,
            event,
        }));
    }

    pub(super) fn run(mut self, seed: u64) -> Report {
        while let Some(Reverse(queued)) = self.queue.pop() {
            if queued.at > self.end_at {
                break;
            }
            self.now = queued.at;
            // A paused holder does nothing until it resumes: its events wait.
            if let Some(holder) = queued.event.holder()
                && self.holders[holder as usize].paused_until > self.now
            {
                let held = &mut self.holders[holder as usize];
                let at = held.paused_until;
                if let Event::Wake { incarnation, .. } = queued.event {
                    // A wake of an earlier incarnation, or one a nearer wake replaced, is
                    // dropped here as it would be when due: moving the holder's wake to
                    // it would orphan the wake that is current (the holder never woke).
                    if incarnation != held.incarnation || held.wake_at != Some(self.now) {
                        continue;
                    }
                    held.wake_at = Some(at);
                }
                self.schedule(at, queued.event);
                continue;
            }
            self.handle(queued.event);
            if !self.safety.violations.is_empty() {
                break;
            }
        }
        let liveness = if self.safety.violations.is_empty() {
            self.liveness()
        } else {
            None
        };
        self.paths.insert("take back", self.store.take_backs());
        let restored: u64 = self.holders.iter().map(|holder| holder.restored_seen).sum();
        self.paths.insert("restore found", restored);
        Report {
            seed,
            holders: self.shape.holders,
            numbers: self.shape.numbers,
            simulated_ms: self.end_at - self.start_ms,
            events: self.trace.events,
            ids: self.safety.ids,
            faults: self.faults,
            paths: self.paths,
            violations: self.safety.violations,
            liveness,
            trace_hash: self.trace.hash(),
            trace: self.trace.tail(),
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Start { holder } => {
                // The misconfigured holder comes once the fleet's layout is recorded: the
                // first layout a store sees is the one it serves, whichever it is.
                if self.holders[holder as usize].layout_id != 0 && !self.store.serves(0) {
                    let at = self.now + 1_000;
                    self.schedule(at, Event::Start { holder });
                    return;
                }
                self.trace.event(self.now, holder, "start", 0, 0);
                self.wanting[holder as usize] = true;
                self.holders[holder as usize].start();
                self.drive(holder);
            }
            Event::Wake {
                holder,
                incarnation,
            } => {
                let held = &mut self.holders[holder as usize];
                if held.incarnation != incarnation || held.wake_at != Some(self.now) {
                    return;
                }
                held.wake_at = None;
                self.trace.event(self.now, holder, "wake", 0, 0);
                self.drive(holder);
            }
            Event::Issue { holder } => {
                let count = 1 + self.rng.below(u64::from(self.shape.burst)) as u32;
                self.issue(holder, count);
                let at = self.now + 1 + self.rng.below(self.shape.issue_every_ms);
                self.schedule(at, Event::Issue { holder });
            }
            Event::ToStore {
                holder,
                incarnation,
                id,
                request,
                sent_ms,
            } => {
                if self.now < self.store_down_until {
                    self.count_fault("request to a store that is down");
                    return;
                }
                let held = &self.holders[holder as usize];
                let waiting = if held.incarnation == incarnation
                    && sent_ms + self.shape.timeout_ms > self.now
                    && held.outstanding.as_ref().is_some_and(|out| out.id == id)
                {
                    Waiting::Yes
                } else {
                    Waiting::GaveUp
                };
                let answer = self.store.apply(&request, self.now, waiting);
                self.trace.detail(holder, || {
                    format!("{request:?} ({waiting:?}) -> {answer:?}")
                });
                if answer.result.is_ok() {
                    self.check_mark_write(holder, incarnation, &request, answer.row_mark);
                }
                self.trace.event(
                    self.now,
                    holder,
                    request_kind(&request),
                    id,
                    answer.revision,
                );
                self.send_to_holder(holder, incarnation, id, answer);
            }
            Event::ToHolder {
                holder,
                incarnation,
                id,
                answer,
            } => {
                if self.holders[holder as usize].incarnation != incarnation {
                    return;
                }
                // A busy process issues all the time: also just before it reads an answer,
                // on what it knew before.
                let count = 1 + self.rng.below(3) as u32;
                self.issue(holder, count);
                self.trace.event(
                    self.now,
                    holder,
                    if answer.result.is_ok() {
                        "answer ok"
                    } else {
                        "answer error"
                    },
                    id,
                    answer.revision,
                );
                self.holders[holder as usize].answer(self.now, id, Some(answer));
                self.drive(holder);
            }
            Event::Timeout {
                holder,
                incarnation,
                id,
            } => {
                let held = &mut self.holders[holder as usize];
                if held.incarnation != incarnation
                    || held.outstanding.as_ref().is_none_or(|out| out.id != id)
                {
                    return;
                }
                held.answer(self.now, id, None);
                self.trace.event(self.now, holder, "timeout", id, 0);
                self.count_path("request timed out");
                self.drive(holder);
            }
            Event::NextFault => {
                if self.now < self.heal_at {
                    self.fault();
                    let at = self.now + 1 + self.rng.below(2 * self.shape.fault_every_ms);
                    self.schedule(at, Event::NextFault);
                }
            }
            Event::Procedure { after_restore } => {
                let horizon = self.shape.horizons_ms.iter().copied().max().unwrap_or(0);
                match &mut self.store {
                    // One procedure on etcd, after a restore and after a wipe alike.
                    Backend::Etcd(store) => {
                        let _ = after_restore;
                        store.raise_every_mark(self.now, horizon, 0);
                    }
                    // The operator's host has a clock of its own: the restore step's time
                    // is compared with the holders' (`restore_step_covers`).
                    #[cfg(feature = "postgres")]
                    Backend::Postgres(model) => {
                        let operator_ms = self.now as i64 + self.rng.signed(self.shape.skew_ms);
                        let step =
                            model.procedure(operator_ms as u64, horizon, after_restore, self.now);
                        self.count_path(if step { "init --after-restore" } else { "init" });
                    }
                }
                let revision = self.store.revision();
                self.trace
                    .event(self.now, 0, "procedure", horizon, revision);
            }
            Event::ClockStep { holder, step } => {
                self.trace
                    .event(self.now, holder, "clock step back", step.unsigned_abs(), 0);
                self.step_clock(holder, step);
            }
            Event::StoreUp => {
                self.trace.event(self.now, 0, "store up", 0, 0);
                // A PostgreSQL restart keeps every row and the server's clock: nothing moves.
                if let Some(store) = self.store.etcd() {
                    store.leader_change(self.now);
                }
            }
            #[cfg(feature = "postgres")]
            Event::ServerClockStep { step } => {
                self.trace.event(
                    self.now,
                    0,
                    "server clock step back",
                    step.unsigned_abs(),
                    0,
                );
                self.step_server_clock(step);
            }
        }
    }

    /// Runs a holder's machine, sends what it asks, applies what it decides, and schedules
    /// its next wake.
    fn drive(&mut self, holder: u32) {
        let index = holder as usize;
        let mut outputs = std::mem::take(&mut self.outputs);
        let sent = self.holders[index].drive(self.now, &mut outputs);
        for output in outputs.drain(..) {
            self.count_path(match output {
                Output::Tenure { .. } => "tenure",
                Output::Ceiling { .. } => "ceiling raised",
                Output::Stop => "stop",
            });
        }
        self.outputs = outputs;
        self.count_notes(holder);
        let incarnation = self.holders[index].incarnation;
        if let Some((id, request)) = sent {
            self.trace.event(self.now, holder, "send", id, 0);
            self.send_to_store(holder, incarnation, id, request);
            let at = self.now + self.shape.timeout_ms;
            self.schedule(
                at,
                Event::Timeout {
                    holder,
                    incarnation,
                    id,
                },
            );
        }
        let held = &mut self.holders[index];
        let now = held.now(self.now);
        let wake = held
            .machine
            .as_ref()
            .and_then(|machine| machine.wake_at_mono_ms(now))
            .map(|mono| held.clocks.true_at_mono(mono).max(self.now + 1));
        let failed = held
            .machine
            .as_ref()
            .and_then(|machine| machine.failure().cloned());
        if let Some(wake) = wake
            && held.wake_at.is_none_or(|at| wake < at || at <= self.now)
        {
            held.wake_at = Some(wake);
            self.schedule(
                wake,
                Event::Wake {
                    holder,
                    incarnation,
                },
            );
        }
        // A first taking that failed for good (range full, a mark too far, a layout the
        // store does not serve): tried again later, as `idgen serve` does.
        if let Some(error) = failed {
            self.count_path(if matches!(error, Error::LayoutMismatch { .. }) {
                "layout refused"
            } else {
                "taking failed, tried again later"
            });
            self.holders[index].crash();
            let at = self.now + self.shape.retry_take_ms;
            self.schedule(at, Event::Start { holder });
        }
    }

    fn count_notes(&mut self, holder: u32) {
        let Some(machine) = self.holders[holder as usize].machine.as_mut() else {
            return;
        };
        let mut notes = Vec::new();
        while let Some(note) = machine.take_note() {
            notes.push(note);
        }
        for note in notes {
            self.trace.note(self.now, holder, &note);
            self.count_path(note_kind(&note));
        }
    }

    fn send_to_store(&mut self, holder: u32, incarnation: u32, id: u64, request: StoreRequest) {
        if self.holders[holder as usize].partitioned_until > self.now {
            self.count_fault("message lost to a partition");
            return;
        }
        let healed = self.now >= self.heal_at;
        if !healed && self.rng.chance(self.shape.loss_per_mille) {
            self.count_fault("request lost");
            return;
        }
        let copies = if !healed && self.rng.chance(self.shape.duplicate_per_mille) {
            self.count_fault("request duplicated");
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.now + self.latency();
            let last = &mut self.last_arrival[holder as usize];
            if at < *last {
                *self.faults.entry("request reordered").or_default() += 1;
            }
            *last = (*last).max(at);
            self.schedule(
                at,
                Event::ToStore {
                    holder,
                    incarnation,
                    id,
                    request: request.clone(),
                    sent_ms: self.now,
                },
            );
        }
    }

    fn send_to_holder(&mut self, holder: u32, incarnation: u32, id: u64, answer: StoreAnswer) {
        if self.holders[holder as usize].partitioned_until > self.now {
            self.count_fault("message lost to a partition");
            return;
        }
        if self.now < self.heal_at && self.rng.chance(self.shape.loss_per_mille) {
            self.count_fault("answer lost");
            return;
        }
        let at = self.now + self.latency();
        self.schedule(
            at,
            Event::ToHolder {
                holder,
                incarnation,
                id,
                answer,
            },
        );
    }

    fn latency(&mut self) -> u64 {
        let (low, high) = self.shape.latency_ms;
        // Now and then a long delay: a slow member, a retransmission.
        if self.now < self.heal_at && self.rng.chance(self.shape.delay_per_mille) {
            *self.faults.entry("message delayed").or_default() += 1;
            return high + self.rng.below(self.shape.ttl_ms * 2);
        }
        low + self.rng.below(high - low + 1)
    }

    fn issue(&mut self, holder: u32, count: u32) {
        let mut issued = std::mem::take(&mut self.issued);
        let held = &mut self.holders[holder as usize];
        let mut last = held.last_id;
        held.issue(self.now, count, &mut issued);
        let issuer = Issuer {
            holder,
            incarnation: held.incarnation,
            tenure: held.tenure,
        };
        if !issued.is_empty() {
            self.trace.event(
                self.now,
                holder,
                "issue",
                issued.len() as u64,
                issued[0].raw,
            );
        }
        for id in issued.drain(..) {
            self.safety.record(self.now, issuer, &id, last);
            last = Some(id.raw);
        }
        self.issued = issued;
    }

    /// A mark the store took from a holder must lie at or above every ID the holder issued
    /// as that number so far: the direct form of what a successor relies on.
    fn check_mark_write(
        &mut self,
        holder: u32,
        incarnation: u32,
        request: &StoreRequest,
        #[cfg_attr(not(feature = "postgres"), allow(unused_variables))] row_mark: Option<u64>,
    ) {
        let (StoreRequest::Renew { worker, mark, .. } | StoreRequest::Release { worker, mark, .. }) =
            request
        else {
            return;
        };
        // On PostgreSQL the row keeps the larger mark, and a release that found its number
        // lost answers Ok without writing: the row's mark is what a successor reads.
        let mark = match self.shape.model {
            Model::Etcd => Some(*mark),
            #[cfg(feature = "postgres")]
            Model::Postgres(_) => row_mark,
        };
        let (worker, Some(mark)) = (*worker, mark) else {
            return;
        };
        let held = &self.holders[holder as usize];
        if held.incarnation != incarnation {
            return;
        }
        if let Some(&issued) = held.issued_up_to.get(&worker)
            && issued > mark
        {
            self.safety.violation(format!(
                "t={}: the store took mark {mark} for worker {worker} from holder {holder}, \
                 which issued an ID dated {issued} as that number",
                self.now
            ));
        }
    }

    fn count_fault(&mut self, kind: &'static str) {
        *self.faults.entry(kind).or_default() += 1;
    }

    fn count_path(&mut self, kind: &'static str) {
        *self.paths.entry(kind).or_default() += 1;
    }

    /// Injects one fault of a kind the shape allows.
    fn fault(&mut self) {
        let kinds = &self.shape.faults;
        let fault = kinds[self.rng.below(kinds.len() as u64) as usize];
        let holder = self.rng.below(u64::from(self.shape.holders)) as u32;
        let index = holder as usize;
        let ttl = self.shape.ttl_ms;
        match fault {
            Fault::Partition => {
                let longest =
                    (ttl * 4).max(self.shape.horizons_ms.iter().copied().max().unwrap_or(0));
                let until = self.now + self.rng.below(longest);
                self.holders[index].partitioned_until = until;
            }
            Fault::StoreRestart => {
                let at = self.now + self.rng.below(ttl * 2);
                self.store_down_until = self.store_down_until.max(at);
                self.schedule(at, Event::StoreUp);
                #[cfg(feature = "postgres")]
                if let Backend::Postgres(model) = &mut self.store {
                    model.restart(at);
                }
            }
            Fault::LeaderChange => {
                if let Some(store) = self.store.etcd() {
                    store.leader_change(self.now);
                }
            }
            Fault::Snapshot => match &mut self.store {
                Backend::Etcd(store) => self.snapshot = Some(store.snapshot(self.now)),
                #[cfg(feature = "postgres")]
                Backend::Postgres(model) => model.take_copy(),
            },
            Fault::Restore => {
                let now = self.now;
                let (Some(snapshot), Some(store)) = (self.snapshot.clone(), self.store.etcd())
                else {
                    return;
                };
                let (take_backs, procedures) = (store.take_backs, store.procedures);
                store.restore(&snapshot, now);
                store.take_backs = take_backs;
                store.procedures = procedures;
                self.operator_procedure(true);
            }
            Fault::Wipe => match &mut self.store {
                Backend::Etcd(store) => {
                    store.wipe();
                    self.operator_procedure(true);
                }
                // The server stays up: without the namespace's row every acquire is
                // refused until the operator's `init`.
                #[cfg(feature = "postgres")]
                Backend::Postgres(model) => {
                    model.wipe();
                    let at = self.now + self.clock_spread_ms + ttl;
                    self.schedule(
                        at,
                        Event::Procedure {
                            after_restore: false,
                        },
                    );
                }
            },
            Fault::DeleteMark => {
                // Within the documented assumption: the number's last mark was written
                // longer ago than two clocks can disagree.
                let before = self.now.saturating_sub(self.clock_spread_ms + ttl);
                let numbers = self.store.written_before(before);
                if numbers.is_empty() {
                    return;
                }
                let worker = numbers[self.rng.below(numbers.len() as u64) as usize];
                if let Some(store) = self.store.etcd() {
                    store.delete_mark(worker);
                }
            }
            Fault::DeleteHolder => {
                let worker = self.rng.below(self.store.numbers());
                if let Some(store) = self.store.etcd() {
                    store.delete_holder(worker);
                }
            }
            #[cfg(feature = "postgres")]
            Fault::ServerClockStep
            | Fault::DeleteRow
            | Fault::FreeRow
            | Fault::TableRestored
            | Fault::DataRestored
            | Fault::BackupRestored
            | Fault::Failover => {
                if !self.postgres_fault(fault) {
                    return;
                }
            }
            Fault::ClockStep => {
                let step = self.rng.signed(self.shape.step_ms);
                self.step_clock(holder, step);
                if self.rng.below(2) == 0 {
                    let at = self.now + 1 + self.rng.below(3 * ttl);
                    self.schedule(
                        at,
                        Event::ClockStep {
                            holder,
                            step: -step,
                        },
                    );
                }
            }
            Fault::Pause => {
                let until = self.now + self.rng.below(ttl * 3);
                let held = &mut self.holders[index];
                held.paused_until = held.paused_until.max(until);
                // On resuming, the first thing it does is issue (with what it knew).
                self.schedule(until, Event::Issue { holder });
            }
            Fault::Crash => {
                self.holders[index].crash();
                self.wanting[index] = false;
                let at = self.now + 200 + self.rng.below(ttl * 2);
                self.schedule(at, Event::Start { holder });
            }
            Fault::Stop => {
                self.holders[index].release();
                self.drive(holder);
                self.wanting[index] = false;
                let at = self.now + 200 + self.rng.below(ttl * 2);
                self.schedule(at, Event::Start { holder });
            }
        }
        self.trace
            .event(self.now, holder, fault.name(), self.store.revision(), 0);
        self.count_fault(fault.name());
    }

    /// Steps a holder's wall clock, within the spread the shape allows.
    fn step_clock(&mut self, holder: u32, step: i64) {
        let clocks = &mut self.holders[holder as usize].clocks;
        let bound = (self.shape.skew_ms + self.shape.step_ms) as i64;
        clocks.offset_ms = (clocks.offset_ms + step).clamp(-bound, bound);
    }

    /// A restore or a wipe takes the store down until the operator has run the procedure
    /// (after longer than two clocks can disagree: an operator's minutes).
    fn operator_procedure(&mut self, after_restore: bool) {
        let at = self.now + self.clock_spread_ms + self.shape.ttl_ms;
        self.store_down_until = self.store_down_until.max(at);
        self.schedule(at, Event::Procedure { after_restore });
    }

    #[cfg(feature = "postgres")]
    fn postgres(&mut self) -> &mut PostgresModel {
        match &mut self.store {
            Backend::Postgres(model) => model,
            Backend::Etcd(_) => unreachable!("a PostgreSQL fault in an etcd run"),
        }
    }

    /// Injects a fault only the PostgreSQL model has; `false` if it had nothing to act on
    /// (no copy to restore, no row old enough to delete).
    #[cfg(feature = "postgres")]
    fn postgres_fault(&mut self, fault: Fault) -> bool {
        let ttl = self.shape.ttl_ms;
        let procedure_at = self.now + self.clock_spread_ms + ttl;
        match fault {
            Fault::ServerClockStep => {
                let step = self.rng.signed(self.shape.step_ms);
                self.step_server_clock(step);
                if self.rng.below(2) == 0 {
                    let at = self.now + 1 + self.rng.below(3 * ttl);
                    self.schedule(at, Event::ServerClockStep { step: -step });
                }
            }
            Fault::DeleteRow => {
                // Within the documented assumption, as a deleted etcd mark key.
                let before = self.now.saturating_sub(self.clock_spread_ms + ttl);
                let numbers = self.store.written_before(before);
                if numbers.is_empty() {
                    return false;
                }
                let worker = numbers[self.rng.below(numbers.len() as u64) as usize];
                self.postgres().delete_row(worker);
            }
            Fault::FreeRow => {
                let worker = self.rng.below(self.store.numbers());
                self.postgres().free_row(worker);
            }
            // Restored while the fleet runs: down only while the tables are dropped and
            // made again, then up on a new identity until the operator's step.
            Fault::TableRestored => {
                if !self.postgres().restore_table() {
                    return false;
                }
                let up = self.now + self.rng.below(ttl);
                self.store_down_until = self.store_down_until.max(up);
                self.schedule(
                    procedure_at,
                    Event::Procedure {
                        after_restore: true,
                    },
                );
            }
            // Nothing in the tables tells a data-only restore but the rows' versions: the
            // documented procedure keeps the fleet off the server until the step.
            Fault::DataRestored => {
                if !self.postgres().restore_data() {
                    return false;
                }
                self.operator_procedure(true);
            }
            // Restarted on a base backup that keeps the identity: down while it restarts,
            // then the fleet runs against it until the operator's step.
            Fault::BackupRestored => {
                let up = self.now + 1 + self.rng.below(ttl);
                let skip = self.rng.below(33);
                if !self.postgres().restore_backup(up, skip) {
                    return false;
                }
                self.store_down_until = self.store_down_until.max(up);
                self.schedule(
                    procedure_at.max(up),
                    Event::Procedure {
                        after_restore: true,
                    },
                );
            }
            Fault::Failover => {
                let offset = self.rng.signed(self.shape.skew_ms);
                if !self.postgres().failover(offset) {
                    return false;
                }
                let up = self.now + self.rng.below(ttl);
                self.store_down_until = self.store_down_until.max(up);
                self.schedule(
                    procedure_at,
                    Event::Procedure {
                        after_restore: true,
                    },
                );
            }
            _ => unreachable!("{fault:?} is no PostgreSQL fault"),
        }
        true
    }

    /// Steps the server's clock, within the spread the shape allows the holders'.
    #[cfg(feature = "postgres")]
    fn step_server_clock(&mut self, step: i64) {
        let bound = (self.shape.skew_ms + self.shape.step_ms) as i64;
        self.postgres().step_clock(step, bound);
    }

    /// After the faults heal and a bound passes (TTLs, horizons, the clocks' spread), every
    /// holder that wants a number has one and issues, or every number is in use.
    fn liveness(&self) -> Option<String> {
        let usable = |holder: &Holder| {
            holder
                .machine
                .as_ref()
                .is_some_and(|machine| machine.usable_worker().is_some())
                && holder.last_issue_ms + 3 * self.shape.issue_every_ms + self.shape.step_ms
                    >= self.end_at
        };
        let wanting: Vec<u32> = (0..self.shape.holders)
            .filter(|&holder| {
                let held = &self.holders[holder as usize];
                held.layout_id == 0 && held.incarnation > 0
            })
            .collect();
        let serving = wanting
            .iter()
            .filter(|&&holder| usable(&self.holders[holder as usize]))
            .count() as u64;
        let expected = (wanting.len() as u64).min(self.shape.numbers);
        (serving < expected).then(|| {
            format!(
                "{serving} holders issuing at the end, {expected} expected ({} want a number, {} \
                 numbers), {} ms after the faults healed",
                wanting.len(),
                self.shape.numbers,
                self.end_at - self.heal_at
            )
        })
    }
}

fn request_kind(request: &StoreRequest) -> &'static str {
    match request {
        StoreRequest::BindLayout { .. } => "store: bind layout",
        StoreRequest::RaiseHorizon { .. } => "store: raise horizon",
        StoreRequest::Survey => "store: survey",
        StoreRequest::Acquire { .. } => "store: acquire",
        StoreRequest::Renew { .. } => "store: renew",
        StoreRequest::Release { .. } => "store: release",
    }
}

fn note_kind(note: &Note) -> &'static str {
    match note {
        Note::TookPassed { .. } => "took a passed number",
        Note::TookScanned { .. } => "took a number by scanning",
        Note::TookNearest { .. } => "took the nearest mark",
        Note::GaveBack { .. } => "gave a number back",
        Note::InferredMark { .. } => "inferred a lost mark",
        Note::Waiting { .. } => "waited for a mark",
        Note::Usable {
            reacquired: false, ..
        } => "first number usable",
        Note::Usable {
            reacquired: true, ..
        } => "new number after a loss",
        Note::Renewed { late_ms: None } => "renewed",
        Note::Renewed { late_ms: Some(_) } => "renewed late",
        Note::OutageBegan { .. } => "outage began",
        Note::OutageEnded { .. } => "outage ended",
        Note::RenewalFailed { .. } => "renewal failed again",
        Note::Lost { .. } => "lost",
        Note::TakeRetried { .. } => "taking retried",
        Note::TakeFailed { .. } => "taking failed",
        Note::Refused { .. } => "number refused by the generator",
    }
}
