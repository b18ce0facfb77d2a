//! [`PostgresStore`]: connecting, its settings, the namespace check every acquire and
//! survey makes, and the `init` steps that write the rows. Uses `schema` and `verdict`.

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use super::schema::{
    self, COUNT_ROWS, CREATE_NAMESPACE, HISTORY_LEAP, HORIZON, LEAP_HISTORY, MARK_RESTORE_FOUND,
    NAMESPACE, RAISE_MARKS, RESET_NAMESPACE, WRITE_MISSING,
};
use super::verdict::{self, Namespace, NamespaceRow};
use crate::Error;
use crate::lease::records::{AFTER_RESTORE, RESTORE_FOUND, namespace_prefix, wall_unix_ms};
use crate::lease::{LeaseStore, MAX_OUTAGE_HORIZON};
use crate::postgres_session::{Session, SetupFailure, check_schema_name, resolve_schema};
use crate::sync::{AtomicU64, Ordering};

/// The default TTL of a PostgreSQL store: 30 s, renewed every 10 s. A renewal is one
/// single-row `UPDATE`: 1,000 numbers cost 100 a second, 5,000 cost 500, a small share of
/// what one server sustains (see `docs/fleet.md`); a crashed holder's number is free again
/// 30 s after its last renewal (then its mark, an outage horizon ahead, still holds it).
pub const POSTGRES_DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The default outage horizon of a PostgreSQL store: 3 minutes, as on etcd. A restart of
/// the server takes well under that, so holders issue through it; a crashed holder's
/// number stays unusable this long. (A failover is a restore: see [`PostgresStore`].)
pub const POSTGRES_DEFAULT_OUTAGE_HORIZON: Duration = Duration::from_secs(180);

/// Leases worker numbers from two PostgreSQL tables (feature `postgres`), for a fleet that
/// runs PostgreSQL and not etcd.
///
/// `idgen_lease_namespaces` has a row per namespace (its state, the cluster it was
/// initialised on, its layout, largest outage horizon and the server start it was written
/// under); `idgen_leases` a row per number (its holder's token and name, when the holding
/// expires on the **server's** clock, its mark, and a version every write raises to at
/// least the next value of the sequence `idgen_lease_history`). All three are created if
/// absent, in one schema that every statement names (see [`PostgresStore::connect_in`]). Every acquire, renewal and release is one statement whose `WHERE`
/// carries its guards, safe under `READ COMMITTED`; no advisory lock and no transaction
/// spans two statements. The store keeps **one connection** (on a thread of its own),
/// however many numbers the process holds: 5,000 numbers renew through it at 500
/// statements a second at the default TTL.
///
/// Expiry is measured on the server's `clock_timestamp()`, the one clock every holder's
/// row is compared with. A server clock stepped forward ends holdings early: the next
/// acquire takes such a number, waits past its mark, and the holder's next renewal finds
/// its token gone and stops. A step back makes holdings last longer. Neither can issue an
/// ID twice: that rests on the marks alone (see `docs/leases.md`).
///
/// A promoted standby, a backup recovered by archive recovery or a table dropped and
/// restored is a database in which marks confirmed to holders may be gone: the store
/// records the cluster's system identifier, timeline and the table's OID at `init`, and a
/// namespace found on another is refused for acquiring ([`Error::LeaseStoreRestored`])
/// until `idgen leases init --after-restore`, which ends every holding. A restore that
/// keeps all three (a base backup or a disk snapshot started without recovery) is found by
/// the history: a holder whose row is older than its own last write, whatever the row holds
/// now, or a process given a value of the history below one it was given before, records
/// the restore; and for the largest outage horizon recorded plus 24 s after a server start,
/// no number whose namespace was written before that start is handed out
/// ([`Error::LeaseStoreStarting`], which a leased generator waits through), so that every
/// live holder's renewal comes first, or its mark passes. `docs/leases.md` lists each kind
/// of restore and what finds it.
///
/// Renewals of one process go one after another on its connection: each is a commit, so
/// 5,000 numbers renewed every 10 s need a commit in under 2 ms (this machine's loopback
/// server does one in about 0.5 ms; a server across zones, or one waiting for a synchronous
/// standby, may not, and then a process should hold fewer numbers).
pub struct PostgresStore {
    pub(super) session: Arc<Session>,
    /// The schema of the tables, found or named at the first connection.
    pub(super) schema: Arc<str>,
    /// The renewal, in the schema: sent most, so qualified once.
    pub(super) renew: Arc<str>,
    pub(super) namespace: String,
    pub(super) ttl: Duration,
    pub(super) outage_horizon: Duration,
    /// The highest value of the history this process was given by a committed write: a
    /// store behind it went back. Shared by the store and every claim made through it.
    pub(super) seen: Arc<AtomicU64>,
}

impl PostgresStore {
    /// Connects to `url` (`postgresql://user@host:port/db`, or the key-value form) for
    /// `namespace` (a name such as `/idgen/prod`: letters, digits, `/`, `-`, `_`, `.`),
    /// with [`POSTGRES_DEFAULT_TTL`], and creates the tables if absent, in the one schema
    /// of the database that has them, else in [`DEFAULT_POSTGRES_SCHEMA`](crate::DEFAULT_POSTGRES_SCHEMA)
    /// (see [`PostgresStore::connect_in`]). Fails with [`Error::LeaseConfig`] for a bad URL
    /// or namespace and [`Error::LeaseStore`] when the server cannot be reached, or when
    /// the database has the tables in two schemas.
    pub fn connect(url: &str, namespace: &str) -> Result<PostgresStore, Error> {
        PostgresStore::open(url, None, namespace)
    }

    /// As [`PostgresStore::connect`], with the tables in `schema` (a lower-case name such
    /// as `idgen`), whatever the URL's or the role's `search_path`: every statement names
    /// it. Refused ([`Error::LeaseStore`]) when the tables also exist in another schema of
    /// the database (two stores of one namespace), and, naming the `GRANT` it needs, when
    /// the role may not create them there.
    pub fn connect_in(url: &str, schema: &str, namespace: &str) -> Result<PostgresStore, Error> {
        check_schema_name(schema).map_err(|reason| Error::LeaseConfig { reason })?;
        PostgresStore::open(url, Some(schema), namespace)
    }

    fn open(url: &str, named: Option<&str>, namespace: &str) -> Result<PostgresStore, Error> {
        let namespace = namespace_prefix(namespace)?
            .trim_end_matches('/')
            .to_string();
        if url.parse::<postgres::Config>().is_err() {
            return Err(Error::LeaseConfig {
                reason: "the lease store's PostgreSQL URL does not parse (expected \
                         postgresql://user@host:port/db or key=value pairs)"
                    .to_string(),
            });
        }
        let resolved = Arc::new(std::sync::OnceLock::<String>::new());
        let (found, named) = (Arc::clone(&resolved), named.map(str::to_string));
        let setup = Box::new(move |client: &mut postgres::Client| {
            let schema = resolve_schema(
                client,
                named.as_deref(),
                schema::LEASES,
                "and run `idgen leases init --after-restore` on the one kept once the others \
                 are dropped (holders of a dropped copy may have written marks it lacks)",
            )?;
            // A reconnection finds the schema again: it must be the one the statements
            // name (a copy made elsewhere since is refused above).
            if let Some(first) = found.get()
                && *first != schema
            {
                return Err(SetupFailure::Refused(format!(
                    "PostgreSQL: idgen's lease tables are now found in schema {schema}, not \
                     in {first} where this process began; name one with --postgres-schema"
                )));
            }
            schema::create_tables(client, &schema)?;
            let _ = found.set(schema);
            Ok(())
        });
        let session = Session::connect(url, "idgen-lease-pg", setup, |reason| Error::LeaseStore {
            reason,
        })?;
        let schema = resolved.get().cloned().unwrap_or_default();
        Ok(PostgresStore {
            session: Arc::new(session),
            renew: schema::qualify(schema::RENEW, &schema).into(),
            schema: schema.into(),
            namespace,
            ttl: POSTGRES_DEFAULT_TTL,
            outage_horizon: POSTGRES_DEFAULT_OUTAGE_HORIZON,
            seen: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The schema of the store's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// `template` with the store's names in its schema.
    pub(super) fn sql(&self, template: &str) -> String {
        schema::qualify(template, &self.schema)
    }

    /// The high-water mark of the history this process keeps.
    pub(super) fn seen(&self) -> i64 {
        i64::try_from(self.seen.load(Ordering::SeqCst)).unwrap_or(i64::MAX)
    }

    /// Takes in a value of the history a committed write was given: an error, after
    /// recording the restore, if it is behind `floor`, what this process had seen before it
    /// sent the write. (Read before sending: other calls on the connection raise the mark
    /// meanwhile, with values given after this write's.)
    pub(super) fn take_history(&self, given: i64, floor: i64) -> Result<(), Error> {
        if given < floor {
            self.mark_history_behind(floor, given);
            return Err(self.restored_error());
        }
        self.seen
            .fetch_max(u64::try_from(given).unwrap_or(0), Ordering::SeqCst);
        Ok(())
    }

    /// Sets the TTL: whole milliseconds, from 1 s to a day (a crashed holder's number
    /// stays taken for a TTL).
    pub fn with_ttl(mut self, ttl: Duration) -> Result<PostgresStore, Error> {
        let day = Duration::from_secs(24 * 60 * 60);
        if !ttl.subsec_nanos().is_multiple_of(1_000_000)
            || ttl < Duration::from_secs(1)
            || ttl > day
        {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "a PostgreSQL lease TTL must be whole milliseconds, from 1 s to a day; got \
                     {ttl:?}"
                ),
            });
        }
        self.ttl = ttl;
        Ok(self)
    }

    /// Sets the store's outage horizon: the default of the leased generators built on it,
    /// and how far ahead [`PostgresStore::init`] writes the marks it creates (default
    /// [`POSTGRES_DEFAULT_OUTAGE_HORIZON`]; never below the TTL).
    pub fn with_outage_horizon(mut self, horizon: Duration) -> PostgresStore {
        self.outage_horizon = horizon;
        self
    }

    /// The namespace, as the tables record it.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Initialises the namespace for `idgen leases init`: a row for every number of
    /// `datacenters` × `workers` that has none, its mark `now_unix_ms` plus the store's
    /// outage horizon (rows that exist are kept), then the namespace's row, recording the
    /// cluster. Returns how many rows were written.
    ///
    /// A missing row may have been deleted with its holder's history, and that holder may
    /// be cut off and still issuing up to its own mark: so the mark written is a horizon
    /// ahead, as on etcd; rows found without their namespace's row have their marks raised
    /// that far and their holdings ended. A namespace found restored is refused: only
    /// [`PostgresStore::init_after_restore`] lifts that. Running it again is harmless.
    pub fn init(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now_unix_ms: u64,
    ) -> Result<u64, Error> {
        let state = self.namespace_state()?;
        match state {
            Namespace::Usable | Namespace::Uninitialised | Namespace::Starting { .. } => {}
            Namespace::Copies { .. } => return self.check_namespace(false).map(|()| 0),
            Namespace::RestoreFound
            | Namespace::ClusterChanged { .. }
            | Namespace::HistoryBehind { .. } => {
                return Err(self.restored_error());
            }
        }
        let mark = self.ahead_of(now_unix_ms)?;
        // Rows without their namespace's row: the namespace was deleted by hand, or only
        // the leases table came back from a backup. Their marks are not to be trusted:
        // raised (and their holdings ended) as by the restore step.
        let mut written = 0;
        if state == Namespace::Uninitialised && self.count_rows()? > 0 {
            written += self.write_rows(datacenters.clone(), workers.clone(), mark, RAISE_MARKS)?;
        }
        written += self.write_rows(datacenters, workers, mark, WRITE_MISSING)?;
        self.put_namespace(CREATE_NAMESPACE, "initialised")?;
        Ok(written)
    }

    /// Initialises a namespace the operator declares never used (`idgen leases init
    /// --new`): every mark is the millisecond before `now_unix_ms`, so a holder is ready
    /// at once. Refused with [`Error::LeaseConfig`] unless the namespace has no row at all.
    pub fn init_new(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now_unix_ms: u64,
    ) -> Result<u64, Error> {
        let namespace = self.namespace.clone();
        let (count_rows, read) = (self.sql(COUNT_ROWS), self.sql(NAMESPACE));
        let (rows, named) = self.session.run(move |client| {
            let rows: i64 = client.query_one(&count_rows, &[&namespace])?.try_get(0)?;
            let named = client.query_opt(&read, &[&namespace])?.is_some();
            Ok((rows, named))
        })?;
        if rows > 0 || named {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "the PostgreSQL lease namespace {} is not new: it has {rows} number row{}{}; \
                     initialise it without --new (every mark an outage horizon ahead, since \
                     a holder of a wiped namespace may still be issuing)",
                    self.namespace,
                    if rows == 1 { "" } else { "s" },
                    if named { " and a namespace row" } else { "" }
                ),
            });
        }
        let mark = now_unix_ms.saturating_sub(1);
        let written = self.write_rows(datacenters, workers, mark, WRITE_MISSING)?;
        self.put_namespace(CREATE_NAMESPACE, "initialised new")?;
        Ok(written)
    }

    /// The step after a restore, a failover to a standby that was behind, or a table
    /// restored from a dump (`idgen leases init --after-restore`): every mark of
    /// `datacenters` × `workers` is raised to at least `now_unix_ms` plus the largest
    /// outage horizon known, missing rows are made with that mark, and the namespace
    /// records this cluster and the step, which lets holders take numbers again. Returns
    /// how many rows were raised or made.
    pub fn init_after_restore(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now_unix_ms: u64,
    ) -> Result<u64, Error> {
        let floor = self.ahead_of(now_unix_ms)?;
        // First the history leaps past any high-water mark a process kept of the history
        // the restore lost: else such a process refuses the store for good.
        let leap = self.sql(LEAP_HISTORY);
        self.session
            .run(move |client| client.execute(&leap, &[&HISTORY_LEAP]).map(|_| ()))?;
        let raised = self.write_rows(datacenters.clone(), workers.clone(), floor, RAISE_MARKS)?;
        let made = self.write_rows(datacenters, workers, floor, WRITE_MISSING)?;
        self.put_namespace(RESET_NAMESPACE, &format!("{AFTER_RESTORE}{now_unix_ms}"))?;
        Ok(raised + made)
    }

    /// How many number rows the namespace has.
    fn count_rows(&self) -> Result<i64, Error> {
        let (namespace, count_rows) = (self.namespace.clone(), self.sql(COUNT_ROWS));
        self.session
            .run(move |client| client.query_one(&count_rows, &[&namespace])?.try_get(0))
    }

    /// `now_unix_ms` plus the store's horizon or the largest any holder recorded.
    fn ahead_of(&self, now_unix_ms: u64) -> Result<u64, Error> {
        let (namespace, horizon) = (self.namespace.clone(), self.sql(HORIZON));
        let recorded: Option<i64> = self.session.run(move |client| {
            client
                .query_opt(&horizon, &[&namespace])?
                .map(|row| row.try_get(0))
                .transpose()
        })?;
        let recorded = recorded
            .and_then(|ms| u64::try_from(ms).ok())
            .map_or(Duration::ZERO, Duration::from_millis)
            .min(MAX_OUTAGE_HORIZON);
        let ahead = self.default_outage_horizon().max(recorded);
        Ok(now_unix_ms.saturating_add(u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX)))
    }

    /// Runs `statement` (`WRITE_MISSING` or `RAISE_MARKS`) for each datacenter; returns
    /// how many rows it wrote.
    fn write_rows(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        mark: u64,
        statement: &'static str,
    ) -> Result<u64, Error> {
        let (namespace, statement) = (self.namespace.clone(), self.sql(statement));
        let as_sql = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        let (first, last, mark) = (
            as_sql(*workers.start()),
            as_sql(*workers.end()),
            as_sql(mark),
        );
        let datacenters: Vec<i64> = datacenters.map(as_sql).collect();
        self.session.run(move |client| {
            let mut written = 0;
            for datacenter in &datacenters {
                written +=
                    client.execute(&statement, &[&namespace, &datacenter, &first, &last, &mark])?;
            }
            Ok(written)
        })
    }

    /// Writes the namespace's row with `statement`, its state `what` happened and by whom.
    fn put_namespace(&self, statement: &'static str, what: &str) -> Result<(), Error> {
        let (namespace, statement) = (self.namespace.clone(), self.sql(statement));
        let state = format!("idgen-lease-store v1 {what} by pid {}", std::process::id());
        self.session.run(move |client| {
            client
                .execute(&statement, &[&namespace, &state])
                .map(|_| ())
        })
    }

    /// The namespace's row, read.
    pub(super) fn namespace_state(&self) -> Result<Namespace, Error> {
        let floor = self.seen();
        let (namespace, read) = (self.namespace.clone(), self.sql(NAMESPACE));
        let row = self.session.run(move |client| {
            client
                .query_opt(&read, &[&namespace])?
                .map(|row| {
                    Ok::<_, postgres::Error>(NamespaceRow {
                        state: row.try_get(0)?,
                        recorded_cluster: row.try_get(1)?,
                        same_cluster: row.try_get::<_, Option<bool>>(2)?.unwrap_or(false),
                        history: row.try_get(3)?,
                        gate_ms: row.try_get::<_, Option<i64>>(4)?.unwrap_or(0),
                        copies: row.try_get(5)?,
                    })
                })
                .transpose()
        })?;
        Ok(verdict::namespace(row.as_ref(), floor))
    }

    /// Refuses a namespace that may not hand out numbers (`taking`: a number is about to
    /// be taken, so the gate after a server start counts too); a changed cluster or a
    /// history behind this process's is recorded as a restore found, so that every
    /// process refuses until the restore step.
    pub(super) fn check_namespace(&self, taking: bool) -> Result<(), Error> {
        match self.namespace_state()? {
            Namespace::Usable => Ok(()),
            Namespace::Starting { .. } if !taking => Ok(()),
            Namespace::Starting { wait_ms } => Err(Error::LeaseStoreStarting {
                store: self.place(),
                wait_ms,
            }),
            Namespace::Uninitialised => Err(self.uninitialised()),
            Namespace::Copies { copies } => Err(Error::LeaseConfig {
                reason: format!(
                    "{}: the table idgen_leases is now in {copies} schemas of the database \
                     (a previous version made one along its search_path?): each copy is a \
                     store of its own; no number is taken until one is left (the error at \
                     the next connection names them all)",
                    self.place()
                ),
            }),
            Namespace::RestoreFound => Err(self.restored_error()),
            Namespace::HistoryBehind { seen, now, .. } => {
                self.mark_history_behind(seen, now);
                Err(self.restored_error())
            }
            Namespace::ClusterChanged { recorded, state } => {
                let why = format!(
                    "the database is not the one the namespace was initialised on (recorded \
                     cluster {recorded}): a promoted standby, a recovered backup or a restored \
                     table"
                );
                self.mark_restore_found(&why, &state);
                Err(self.restored_error())
            }
        }
    }

    /// Records that the history stands at `now`, behind the `floor` this process saw: the
    /// namespace's state is set whatever it is, unless the history has since passed the
    /// floor (a restore step ran meanwhile: its leap must not be undone).
    pub(super) fn mark_history_behind(&self, floor: i64, now: i64) {
        self.record_restore(&verdict::history_behind(floor, now), "", floor);
    }

    /// Records in the namespace's row that a process found the store gone back (`why`),
    /// so that no process takes a number until the restore step, if the row's state is
    /// still `seen`, the one the finding was made on (a restore step run since is kept).
    /// A failure is logged: the caller refuses all the same, and the next process to look
    /// decides again.
    pub(super) fn mark_restore_found(&self, why: &str, seen: &str) {
        self.record_restore(why, seen, 0);
    }

    /// [`PostgresStore::mark_restore_found`] (`seen` not empty) or
    /// [`PostgresStore::mark_history_behind`] (`seen` empty, `floor` the history's).
    fn record_restore(&self, why: &str, seen: &str, floor: i64) {
        log::error!(
            "idgen: PostgreSQL lease namespace {}: {why}; no process takes a number from it \
             until `idgen leases init --after-restore`",
            self.namespace
        );
        let (namespace, seen) = (self.namespace.clone(), seen.to_string());
        let mark = self.sql(MARK_RESTORE_FOUND);
        let state = format!(
            "idgen-lease-store v1 {RESTORE_FOUND}{} by pid {}: {why}",
            wall_unix_ms(),
            std::process::id()
        );
        if let Err(error) = self
            .session
            .run(move |client| client.execute(&mark, &[&namespace, &state, &seen, &floor]))
        {
            log::error!("idgen: marking the namespace as restored failed: {error}");
        }
    }

    pub(super) fn place(&self) -> String {
        format!("PostgreSQL lease namespace {}", self.namespace)
    }

    pub(super) fn restored_error(&self) -> Error {
        Error::LeaseStoreRestored {
            store: self.place(),
            fix: format!(
                "run: idgen leases init --after-restore --lease-postgres URL --namespace {} \
                 (with the fleet's layout flags and its largest --outage-horizon), once no \
                 process uses the database it was restored or failed over from: until then \
                 no process takes a number from this namespace",
                self.namespace
            ),
        }
    }

    pub(super) fn uninitialised(&self) -> Error {
        Error::LeaseStoreUninitialised {
            store: self.place(),
            why: format!(
                "{} has no row for it: the namespace is new, or its row was deleted",
                schema::NAMESPACES
            ),
            fix: format!(
                "run: idgen leases init --lease-postgres URL --namespace {} (with the layout \
                 flags of the processes that use it), which makes the first holders wait one \
                 outage horizon in case rows were deleted under holders still issuing; for a \
                 namespace no idgen ever used, add --new to be ready at once",
                self.namespace
            ),
        }
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: not shown.
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .field("namespace", &self.namespace)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}
