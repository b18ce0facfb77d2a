//! A model of the PostgreSQL store (`lease::PostgresStore`, feature `postgres`): the rows of
//! `idgen_leases` (token, expiry on the server's clock, mark, version) and the namespace's
//! row (state, recorded cluster, layout, horizon), each statement of `schema.rs` applied as
//! one atomic step, and what faults do to them: the server's clock stepped, rows deleted or
//! freed by hand, the tables restored from an older copy (dropped and restored, a new table
//! identity; or data only, the identity kept), a failover to a standby that was behind (a
//! new timeline and another server's clock), the namespace wiped, and the operator's `init`
//! or `init --after-restore` after each. The decisions are the real ones: the model calls
//! `lease::postgres::verdict` where `claim.rs`, `acquire.rs` and `store.rs` do, so a defect
//! there shows up here.

use crate::error::Error;
use crate::lease::postgres::verdict::{
    self, Evidence, Namespace, NamespaceRow, SurveyRow, Verdict,
};
use crate::lease::records::{AFTER_RESTORE, RESTORE_FOUND};

use super::super::protocol::{Acquired, Answer, Surveyed};
use super::store::{Claim, RowClaim, StoreAnswer, StoreRequest, full, lost};

/// A deliberate defect of the PostgreSQL semantics, built into the model by a simulator
/// test: each must be caught, or the PostgreSQL runs have lost their teeth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PostgresDefect {
    /// Acquiring ignores the recorded cluster: a promoted standby or a restored table
    /// hands out numbers before `init --after-restore`.
    AcquireIgnoresCluster,
    /// A row made again after a deletion (mark `NULL`) is taken as a number never held:
    /// its taker infers no mark and waits for nobody.
    UnknownMarkTakenAsNone,
    /// `init --after-restore` only raises marks and leaves holdings in place (the first
    /// version of `RAISE_MARKS`): a claim the restore brought back renews after the step
    /// while the number's later holder, which the restore forgot, still issues.
    RestoreStepKeepsHoldings,
    /// A renewal takes an expired holding back in any namespace (the first version of
    /// `RENEW`): a claim a restored table brought back takes its number again before the
    /// step, while another process that took it meanwhile still issues.
    TakeBackAnywhere,
    /// Acquiring ignores the gate after a server start: a process that starts as a
    /// base backup comes back (its identity and timeline kept) takes a number whose
    /// holder the backup forgot, while that holder still issues.
    NoStartGate,
}

/// Which PostgreSQL semantics a run models, and the defect built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PostgresRun {
    pub(crate) defect: Option<PostgresDefect>,
}

#[derive(Debug, Clone)]
struct Row {
    token: Option<u64>,
    /// On the server's clock.
    expires_at: u64,
    /// `None`: unknown (the row was made again after a deletion).
    mark: Option<u64>,
    version: u64,
    /// True time of the last write of the mark, for the fault schedule's preconditions.
    last_write_ms: u64,
}

/// Which database answers: `system identifier / timeline / table OID`, as `schema.rs`'s
/// `cluster!()` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cluster {
    system: u64,
    timeline: u64,
    table: u64,
}

impl Cluster {
    fn record(self) -> String {
        format!("{}/{:08X}/{}", self.system, self.timeline, self.table)
    }
}

#[derive(Debug, Clone)]
struct NamespaceRecord {
    state: String,
    cluster: Cluster,
    layout: Option<u32>,
    horizon_ms: u64,
    /// The server start (on its clock) under which the row was created or reset.
    server_start: u64,
}

/// Both tables' rows of the namespace and the history: what a backup, a dump or a standby
/// holds.
#[derive(Debug, Clone)]
struct Tables {
    namespace: Option<NamespaceRecord>,
    rows: Vec<Option<Row>>,
    /// The sequence `idgen_lease_history`'s last value.
    history: u64,
}

/// The server: its tables, its identity and its clock.
#[derive(Debug, Clone)]
pub(super) struct PostgresModel {
    tables: Tables,
    cluster: Cluster,
    /// The server's clock against the true time.
    clock_offset_ms: i64,
    /// The latest copy taken: a backup, a dump, or where a lagging standby stands.
    copy: Option<Tables>,
    next_token: u64,
    ttl_ms: u64,
    run: PostgresRun,
    /// Expired holdings taken back by their holder's renewal.
    pub(super) take_backs: u64,
    /// Writes so far: the trace's counterpart of etcd's revision.
    writes: u64,
    /// The row's mark after the renewal or release being applied wrote it.
    row_mark: Option<u64>,
    /// When the server started, on its clock.
    started_ms: u64,
    /// The gate's margin after the largest horizon: two requests' timeouts.
    gate_margin_ms: u64,
}

const PLACE: &str = "simulated PostgreSQL namespace";

fn restored() -> Error {
    Error::LeaseStoreRestored {
        store: PLACE.to_string(),
        fix: "idgen leases init --after-restore".to_string(),
    }
}

fn token_text(token: u64) -> String {
    format!("token-{token}")
}

fn sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl PostgresModel {
    /// A namespace initialised with `init --new` at `now_ms`, on a server whose clock is
    /// `clock_offset_ms` from the true time.
    pub(super) fn new(
        numbers: u64,
        ttl_ms: u64,
        now_ms: u64,
        clock_offset_ms: i64,
        run: PostgresRun,
        gate_margin_ms: u64,
    ) -> PostgresModel {
        let cluster = Cluster {
            system: 7_000_000_000_000_000_001,
            timeline: 1,
            table: 16_384,
        };
        let row = Row {
            token: None,
            expires_at: 0,
            mark: Some(now_ms.saturating_sub(1)),
            version: 1,
            last_write_ms: now_ms,
        };
        let started_ms = (now_ms as i64 + clock_offset_ms).max(0) as u64;
        PostgresModel {
            tables: Tables {
                namespace: Some(NamespaceRecord {
                    state: "idgen-lease-store v1 initialised new by pid 1".to_string(),
                    cluster,
                    layout: None,
                    horizon_ms: 0,
                    server_start: started_ms,
                }),
                rows: vec![Some(row); numbers as usize],
                history: 1,
            },
            cluster,
            clock_offset_ms,
            copy: None,
            next_token: 1,
            ttl_ms,
            run,
            take_backs: 0,
            writes: 1,
            row_mark: None,
            started_ms,
            gate_margin_ms,
        }
    }

    /// `nextval('idgen_lease_history')`.
    fn next_history(&mut self) -> u64 {
        self.tables.history += 1;
        self.tables.history
    }

    /// A row's version after a write: every write raises it to at least the history's
    /// next value (`GREATEST(version + 1, nextval(...))`).
    fn next_version(&mut self, version: u64) -> u64 {
        let next = self.next_history();
        (version + 1).max(next)
    }

    /// `clock_timestamp()` at true time `now_ms`.
    fn server_now(&self, now_ms: u64) -> u64 {
        (now_ms as i64 + self.clock_offset_ms).max(0) as u64
    }

    fn defective(&self, defect: PostgresDefect) -> bool {
        self.run.defect == Some(defect)
    }

    /// The namespace's row as `schema::NAMESPACE` reads it at true time `now_ms`.
    fn namespace_row(&self, now_ms: u64) -> Option<NamespaceRow> {
        let server_now = self.server_now(now_ms);
        self.tables.namespace.as_ref().map(|record| NamespaceRow {
            state: record.state.clone(),
            recorded_cluster: record.cluster.record(),
            same_cluster: record.cluster == self.cluster,
            history: sql(self.tables.history),
            copies: 1,
            gate_ms: if record.server_start == self.started_ms
                || self.defective(PostgresDefect::NoStartGate)
            {
                0
            } else {
                sql(self.started_ms + record.horizon_ms + self.gate_margin_ms) - sql(server_now)
            },
        })
    }

    /// `verdict::namespace` of the row now (what `usable!()` decides inside a statement),
    /// to a process that saw the history up to `seen`.
    fn namespace_seen(&self, now_ms: u64, seen: u64) -> Namespace {
        match verdict::namespace(self.namespace_row(now_ms).as_ref(), sql(seen)) {
            Namespace::ClusterChanged { .. }
                if self.defective(PostgresDefect::AcquireIgnoresCluster) =>
            {
                Namespace::Usable
            }
            namespace => namespace,
        }
    }

    /// `PostgresStore::check_namespace`: a changed cluster is recorded as a restore found;
    /// `taking`: the gate after a server start counts.
    fn check_namespace(
        &mut self,
        holder_unix_ms: u64,
        now_ms: u64,
        taking: bool,
    ) -> Result<(), Error> {
        match self.namespace_seen(now_ms, 0) {
            Namespace::Usable => Ok(()),
            Namespace::Starting { .. } if !taking => Ok(()),
            Namespace::Starting { wait_ms } => Err(Error::LeaseStoreStarting {
                store: PLACE.to_string(),
                wait_ms,
            }),
            Namespace::HistoryBehind { .. } => {
                self.mark_restore_found(holder_unix_ms);
                Err(restored())
            }
            Namespace::Uninitialised => Err(Error::LeaseStoreUninitialised {
                store: PLACE.to_string(),
                why: "no namespace row".to_string(),
                fix: "idgen leases init".to_string(),
            }),
            Namespace::RestoreFound => Err(restored()),
            Namespace::ClusterChanged { .. } => {
                self.mark_restore_found(holder_unix_ms);
                Err(restored())
            }
            Namespace::Copies { .. } => unreachable!("the model has one copy of its tables"),
        }
    }

    /// `schema::MARK_RESTORE_FOUND`, the time on the finder's wall clock.
    fn mark_restore_found(&mut self, holder_unix_ms: u64) {
        if let Some(record) = &mut self.tables.namespace
            && !record.state.contains(RESTORE_FOUND)
        {
            record.state =
                format!("idgen-lease-store v1 {RESTORE_FOUND}{holder_unix_ms} by pid 1: simulated");
            self.writes += 1;
        }
    }

    /// Applies one request at true time `now_ms`, as one statement (or the few a call of
    /// the real store makes, which nothing else interleaves with here).
    pub(super) fn apply(&mut self, request: &StoreRequest, now_ms: u64) -> StoreAnswer {
        self.row_mark = None;
        let (result, token) = match *request {
            StoreRequest::BindLayout { layout } => (self.bind_layout(layout), None),
            StoreRequest::RaiseHorizon { horizon_ms } => match &mut self.tables.namespace {
                Some(record) => {
                    record.horizon_ms = record.horizon_ms.max(horizon_ms);
                    self.writes += 1;
                    let recorded_ms = record.horizon_ms;
                    (Ok(Answer::Horizon { recorded_ms }), None)
                }
                None => (
                    self.check_namespace(0, now_ms, false)
                        .map(|()| Answer::Done),
                    None,
                ),
            },
            StoreRequest::Survey => (self.survey(now_ms), None),
            StoreRequest::Acquire {
                worker,
                sent_unix_ms,
            } => match self.acquire(worker, now_ms, sent_unix_ms) {
                Ok((acquired, claim)) => {
                    (Ok(Answer::Acquired(acquired)), Some(Claim::Postgres(claim)))
                }
                Err(error) => (Err(error), None),
            },
            StoreRequest::Renew {
                worker,
                mark,
                claim: Claim::Postgres(claim),
                sent_unix_ms,
                ..
            } => {
                let (result, claim) = self.renew(worker, mark, claim, now_ms, sent_unix_ms);
                (result, Some(Claim::Postgres(claim)))
            }
            StoreRequest::Release {
                worker,
                mark,
                claim: Claim::Postgres(claim),
                sent_unix_ms,
                ..
            } => (
                self.release(worker, mark, claim, now_ms, sent_unix_ms),
                None,
            ),
            StoreRequest::Renew { .. } | StoreRequest::Release { .. } => {
                unreachable!("an etcd claim sent to the PostgreSQL model")
            }
        };
        StoreAnswer {
            // No revision: the holders' etcd check never trips on this store.
            revision: 0,
            procedures: 0,
            result,
            token,
            row_mark: self.row_mark.take(),
        }
    }

    fn bind_layout(&mut self, layout: u32) -> Result<Answer, Error> {
        let Some(record) = &mut self.tables.namespace else {
            return self.check_namespace(0, 0, false).map(|()| Answer::Done);
        };
        let recorded = *record.layout.get_or_insert(layout);
        if recorded == layout {
            Ok(Answer::Done)
        } else {
            Err(Error::LayoutMismatch {
                store: PLACE.to_string(),
                recorded: format!("layout {recorded}"),
                ours: format!("layout {layout}"),
            })
        }
    }

    fn survey(&mut self, now_ms: u64) -> Result<Answer, Error> {
        self.check_namespace(0, now_ms, false)?;
        let server_now = self.server_now(now_ms);
        let numbers = self
            .tables
            .rows
            .iter()
            .enumerate()
            .map(|(worker, row)| {
                let worker = worker as u64;
                let row = row.as_ref().map(|row| SurveyRow {
                    worker,
                    held: row.token.is_some() && row.expires_at > server_now,
                    holder: row.token.map(token_text),
                    mark_ms: row.mark.map(sql),
                });
                let record = verdict::number_record(0, worker, row.as_ref(), PLACE);
                Surveyed {
                    worker,
                    state: record.state,
                    mark_unix_ms: record.mark_unix_ms,
                    detail: record.detail,
                }
            })
            .collect();
        Ok(Answer::Numbers(numbers))
    }

    /// `acquire_as` for one number: the namespace check, then `ACQUIRE` (a free or
    /// expired row) or `ACQUIRE_MISSING` (no row: made again, its mark unknown).
    fn acquire(
        &mut self,
        worker: u64,
        now_ms: u64,
        sent_unix_ms: u64,
    ) -> Result<(Acquired, RowClaim), Error> {
        self.check_namespace(sent_unix_ms, now_ms, true)?;
        let server_now = self.server_now(now_ms);
        let expires_at = server_now + self.ttl_ms;
        let token = self.next_token;
        // nextval() in the row's new version: drawn only when a row matches.
        let takeable = match &self.tables.rows[worker as usize] {
            Some(row) => row.token.is_none() || row.expires_at <= server_now,
            None => true,
        };
        let history = if takeable { self.next_history() } else { 0 };
        let taken = match &mut self.tables.rows[worker as usize] {
            Some(row) if takeable => {
                row.token = Some(token);
                row.expires_at = expires_at;
                row.version = (row.version + 1).max(history);
                Some((row.mark, row.version))
            }
            Some(_) => None,
            slot @ None => {
                *slot = Some(Row {
                    token: Some(token),
                    expires_at,
                    mark: None,
                    version: history,
                    last_write_ms: now_ms,
                });
                Some((None, history))
            }
        };
        let Some((mark, version)) = taken else {
            return Err(full(worker));
        };
        self.next_token += 1;
        self.writes += 1;
        let (previous, unknown) = verdict::previous_mark(mark.map(sql));
        let unknown = unknown && !self.defective(PostgresDefect::UnknownMarkTakenAsNone);
        let acquired = Acquired {
            datacenter: 0,
            worker,
            previous_mark_unix_ms: previous,
            previous_unknown: unknown,
        };
        let claim = RowClaim {
            token,
            version,
            wrote: false,
            confirmed_unix_ms: sent_unix_ms,
            previous,
            unknown,
            released: false,
            granted_ms: now_ms,
            seen: history,
        };
        Ok((acquired, claim))
    }

    /// Whether `RENEW`'s and `RELEASE`'s guard matches the row: the claim's token, and a
    /// version no older than its last confirmed write.
    fn guard_matches(&self, worker: u64, claim: &RowClaim, now_ms: u64) -> bool {
        // An expired holding is taken back only where an acquire could take it.
        let take_back_allowed = self.run.defect == Some(PostgresDefect::TakeBackAnywhere)
            || matches!(self.namespace_seen(now_ms, 0), Namespace::Usable);
        self.tables.rows[worker as usize]
            .as_ref()
            .is_some_and(|row| {
                (take_back_allowed || row.expires_at > self.server_now(now_ms))
                    && row.token == Some(claim.token)
                    && row.version >= claim.version
            })
    }

    /// `PostgresClaim::renew`: the one statement, or the evidence of why it matched
    /// nothing. Returns the claim as the holder keeps it afterwards.
    fn renew(
        &mut self,
        worker: u64,
        mark: u64,
        mut claim: RowClaim,
        now_ms: u64,
        sent_unix_ms: u64,
    ) -> (Result<Answer, Error>, RowClaim) {
        if !self.guard_matches(worker, &claim, now_ms) {
            let result = self.explain_miss(worker, &mut claim, sent_unix_ms);
            return (result.map(|()| Answer::Done), claim);
        }
        let server_now = self.server_now(now_ms);
        let ttl = self.ttl_ms;
        let history = self.next_history();
        let Some(row) = self.tables.rows[worker as usize].as_mut() else {
            unreachable!("the guard matched a row");
        };
        if row.expires_at <= server_now {
            self.take_backs += 1;
        }
        row.mark = Some(row.mark.map_or(mark, |old| old.max(mark)));
        row.expires_at = server_now + ttl;
        row.version = (row.version + 1).max(history);
        row.last_write_ms = now_ms;
        self.row_mark = row.mark;
        claim.version = row.version;
        claim.wrote = true;
        claim.confirmed_unix_ms = sent_unix_ms;
        self.writes += 1;
        // `PostgresStore::take_history`: a value behind the claim's high-water mark.
        if history < claim.seen {
            claim.released = true;
            self.mark_restore_found(sent_unix_ms);
            return (Err(restored()), claim);
        }
        claim.seen = history;
        (Ok(Answer::Done), claim)
    }

    /// `PostgresClaim::release`: frees the row (its mark left as it is when the claim
    /// never wrote one and would not raise it, or when the previous mark was unknown).
    fn release(
        &mut self,
        worker: u64,
        mark: u64,
        mut claim: RowClaim,
        now_ms: u64,
        sent_unix_ms: u64,
    ) -> Result<Answer, Error> {
        let mark = (claim.wrote || mark > claim.previous.unwrap_or(0)).then_some(mark);
        // For a row whose mark was unknown, the inferred mark is written (it lies past any
        // the deleted row held): else every later taker infers one further ahead.
        if !self.guard_matches(worker, &claim, now_ms) {
            return match self.explain_miss(worker, &mut claim, sent_unix_ms) {
                // Lost meanwhile: nothing of ours to free.
                Err(Error::LeaseLost { .. }) => Ok(Answer::Done),
                other => other.map(|()| Answer::Done),
            };
        }
        let history = self.next_history();
        let Some(row) = self.tables.rows[worker as usize].as_mut() else {
            unreachable!("the guard matched a row");
        };
        row.token = None;
        row.expires_at = 0;
        if mark.is_some() {
            row.mark = mark;
            row.last_write_ms = now_ms;
        }
        row.version = (row.version + 1).max(history);
        self.row_mark = row.mark;
        self.writes += 1;
        Ok(Answer::Done)
    }

    /// `PostgresClaim::explain_miss`: the `EVIDENCE` row through the real verdict.
    fn explain_miss(
        &mut self,
        worker: u64,
        claim: &mut RowClaim,
        sent_unix_ms: u64,
    ) -> Result<(), Error> {
        let evidence = Evidence {
            row: self.tables.rows[worker as usize]
                .as_ref()
                .map(|row| (row.token.map(token_text), sql(row.version))),
            state: self
                .tables
                .namespace
                .as_ref()
                .map(|record| record.state.clone()),
            same_cluster: self
                .tables
                .namespace
                .as_ref()
                .map(|record| record.cluster == self.cluster),
            history: sql(self.tables.history),
        };
        let verdict = verdict::after_failed_write(
            &evidence,
            &token_text(claim.token),
            sql(claim.version),
            sql(claim.seen),
        );
        match verdict {
            Verdict::Lost => {
                claim.released = true;
                Err(lost(worker))
            }
            Verdict::WentBack(_) => {
                claim.released = true;
                if verdict::restore_step_covers(evidence.state.as_deref(), claim.confirmed_unix_ms)
                {
                    return Err(lost(worker));
                }
                self.mark_restore_found(sent_unix_ms);
                Err(restored())
            }
            Verdict::Unclear => Err(Error::LeaseStore {
                reason: "the write matched nothing, yet the row is the holder's".to_string(),
            }),
        }
    }

    /// A copy of the tables now: a backup, a dump, or where a standby stops replaying.
    pub(super) fn take_copy(&mut self) {
        self.copy = Some(self.tables.clone());
    }

    /// The tables dropped and restored from the copy (`pg_dump --clean`): a new table OID,
    /// so a new cluster identity. `false` if there is no copy.
    pub(super) fn restore_table(&mut self) -> bool {
        let Some(copy) = self.copy.clone() else {
            return false;
        };
        // A dump of the tables holds no sequence: the history goes on.
        let history = self.tables.history;
        self.tables = Tables { history, ..copy };
        self.cluster.table += 1;
        self.writes += 1;
        true
    }

    /// The rows replaced by the copy's (truncated, then restored data only): the identity
    /// stays, nothing but the rows' versions tell.
    pub(super) fn restore_data(&mut self) -> bool {
        let Some(copy) = self.copy.clone() else {
            return false;
        };
        let history = self.tables.history;
        self.tables = Tables { history, ..copy };
        self.writes += 1;
        true
    }

    /// The server restarted on the copy, its identity and timeline kept (a base backup
    /// started without recovery, a disk snapshot): every table and the history go back
    /// (the history a little ahead of the copy's, as crash recovery leaves a sequence),
    /// and the server starts now. `false` if there is no copy.
    pub(super) fn restore_backup(&mut self, now_ms: u64, skip: u64) -> bool {
        let Some(copy) = self.copy.clone() else {
            return false;
        };
        self.tables = copy;
        self.tables.history += skip;
        self.started_ms = self.server_now(now_ms);
        self.writes += 1;
        true
    }

    /// A failover to a standby that stood at the copy: a new timeline, and the standby's
    /// own clock.
    pub(super) fn failover(&mut self, clock_offset_ms: i64) -> bool {
        let Some(copy) = self.copy.clone() else {
            return false;
        };
        self.tables = copy;
        self.cluster.timeline += 1;
        self.clock_offset_ms = clock_offset_ms;
        // The standby runs since long before; its sequence stood at the copy's.
        self.writes += 1;
        true
    }

    /// The server restarted on its own data (back at true time `at_ms`): a new start.
    pub(super) fn restart(&mut self, at_ms: u64) {
        self.started_ms = self.server_now(at_ms);
    }

    /// The server's clock stepped (forward or back).
    pub(super) fn step_clock(&mut self, step_ms: i64, bound_ms: i64) {
        self.clock_offset_ms = (self.clock_offset_ms + step_ms).clamp(-bound_ms, bound_ms);
    }

    /// A number's row deleted by hand.
    pub(super) fn delete_row(&mut self, worker: u64) {
        self.tables.rows[worker as usize] = None;
        self.writes += 1;
    }

    /// A number freed by hand (`UPDATE idgen_leases SET token = NULL`), its mark kept.
    pub(super) fn free_row(&mut self, worker: u64) {
        if let Some(row) = &mut self.tables.rows[worker as usize] {
            row.token = None;
            self.writes += 1;
        }
    }

    /// The namespace deleted from both tables.
    pub(super) fn wipe(&mut self) {
        self.tables.namespace = None;
        self.tables.rows.iter_mut().for_each(|row| *row = None);
        self.writes += 1;
    }

    /// The operator's step at `operator_unix_ms` (their host's clock), with the fleet's
    /// largest horizon: `init --after-restore` when asked for or when `init` would refuse
    /// (a restore found, another cluster), else `init` (after a wipe). Returns whether it
    /// was the restore step.
    pub(super) fn procedure(
        &mut self,
        operator_unix_ms: u64,
        horizon_ms: u64,
        after_restore: bool,
        now_ms: u64,
    ) -> bool {
        let recorded = self
            .tables
            .namespace
            .as_ref()
            .map_or(0, |record| record.horizon_ms);
        let floor = operator_unix_ms + horizon_ms.max(recorded);
        let refused = matches!(
            verdict::namespace(self.namespace_row(now_ms).as_ref(), 0),
            Namespace::RestoreFound | Namespace::ClusterChanged { .. }
        );
        let restore_step = after_restore || refused;
        self.writes += 1;
        if restore_step {
            // LEAP_HISTORY, before the rows are written.
            self.tables.history += 1 << 40;
        }
        let started = self.started_ms;
        for worker in 0..self.tables.rows.len() {
            let slot = self.tables.rows[worker].clone();
            let written = match slot {
                // RAISE_MARKS (the restore step only).
                // Every holding ends, whatever its mark.
                Some(mut row)
                    if restore_step
                        && self.run.defect != Some(PostgresDefect::RestoreStepKeepsHoldings) =>
                {
                    row.token = None;
                    row.expires_at = 0;
                    row.mark = Some(row.mark.map_or(floor, |mark| mark.max(floor)));
                    row.version = self.next_version(row.version);
                    row.last_write_ms = now_ms;
                    Some(row)
                }
                Some(mut row) if restore_step => {
                    if row.mark.is_none_or(|mark| mark < floor) {
                        row.mark = Some(row.mark.map_or(floor, |mark| mark.max(floor)));
                        row.version = self.next_version(row.version);
                        row.last_write_ms = now_ms;
                    }
                    Some(row)
                }
                Some(row) => Some(row),
                // WRITE_MISSING.
                None => Some(Row {
                    token: None,
                    expires_at: 0,
                    mark: Some(floor),
                    version: self.next_history(),
                    last_write_ms: now_ms,
                }),
            };
            self.tables.rows[worker] = written;
        }
        let cluster = self.cluster;
        if restore_step {
            // RESET_NAMESPACE.
            let state = format!("idgen-lease-store v1 {AFTER_RESTORE}{operator_unix_ms} by pid 1");
            match &mut self.tables.namespace {
                Some(record) => {
                    (record.state, record.cluster, record.server_start) = (state, cluster, started);
                }
                None => {
                    self.tables.namespace = Some(NamespaceRecord {
                        state,
                        cluster,
                        layout: None,
                        horizon_ms: 0,
                        server_start: started,
                    });
                }
            }
        } else {
            // CREATE_NAMESPACE.
            self.tables
                .namespace
                .get_or_insert_with(|| NamespaceRecord {
                    state: "idgen-lease-store v1 initialised by pid 1".to_string(),
                    cluster,
                    layout: None,
                    horizon_ms: 0,
                    server_start: started,
                });
        }
        restore_step
    }

    /// Numbers whose row exists and whose mark was last written before `before_ms` (true
    /// time): the ones a deletion may hit within the documented clock assumption.
    pub(super) fn written_before(&self, before_ms: u64) -> Vec<u64> {
        (0..self.tables.rows.len() as u64)
            .filter(|&worker| {
                self.tables.rows[worker as usize]
                    .as_ref()
                    .is_some_and(|row| row.last_write_ms < before_ms)
            })
            .collect()
    }

    pub(super) fn writes(&self) -> u64 {
        self.writes
    }

    /// Whether `layout` is the one recorded.
    pub(super) fn serves(&self, layout: u32) -> bool {
        self.tables
            .namespace
            .as_ref()
            .is_some_and(|record| record.layout == Some(layout))
    }

    pub(super) fn numbers(&self) -> u64 {
        self.tables.rows.len() as u64
    }
}
