//! What the store keeps in PostgreSQL: its two tables and a sequence, created only if
//! absent, in one named schema, and every statement it sends. Uses nothing else of the
//! folder.
//!
//! The statements are written with bare names (`idgen_leases`); [`qualify`] puts the
//! store's schema before every one, so that no statement depends on the `search_path`.
//!
//! Each statement stands alone (autocommit): the guards are in its `WHERE`, which
//! PostgreSQL evaluates again on the newest row version when a concurrent write got there
//! first (`READ COMMITTED`'s rule for `UPDATE`), so two racing acquires of one number
//! cannot both match. No advisory lock, no session state beyond the connection's timeouts.

use crate::postgres_session::{SetupFailure, check_privileges, create_in_schema, quoted};

/// One row per namespace: its state, the cluster it was initialised on, its layout and the
/// largest outage horizon any holder recorded.
pub(super) const NAMESPACES: &str = "idgen_lease_namespaces";

/// One row per number of a namespace: its holder, when the holding expires on the server's
/// clock, its mark (`NULL`: unknown, the row was deleted and made again), and a version
/// that every write raises, to at least the history's next value ([`HISTORY`]): so a row
/// made again after a deletion is newer than any its earlier holders wrote, and a row a
/// restore brought back is older than what they confirmed.
pub(super) const LEASES: &str = "idgen_leases";

/// The sequence every write of a number's row draws from: a count of the whole schema's
/// history that never goes back on the same data (a crash recovery only skips ahead), and
/// goes back with a restore. Each process keeps the highest it was given as a high-water
/// mark and refuses a store behind it.
pub(super) const HISTORY: &str = "idgen_lease_history";

/// How far the restore step moves the history on: past any high-water mark a process kept
/// of the history the restore lost (2^40 writes: 70 years at 500 a second).
pub(super) const HISTORY_LEAP: i64 = 1 << 40;

const CREATE_NAMESPACES: &str = "CREATE TABLE idgen_lease_namespaces (
    namespace text PRIMARY KEY,
    state text NOT NULL,
    cluster text NOT NULL,
    layout text,
    horizon_ms bigint NOT NULL DEFAULT 0,
    server_start timestamptz
)";

const CREATE_HISTORY: &str = "CREATE SEQUENCE idgen_lease_history AS bigint";

/// The column a table made by an earlier version lacks: when the server ran that wrote the
/// namespace's row (created it, or the restore step).
/// Under a short lock timeout: `ADD COLUMN` waits for an exclusive lock, and every
/// renewal of the fleet (the previous version's too) would queue behind it while a long
/// reader (a `pg_dump`) holds the table. Failed, it is tried again at the next connection.
const ADD_SERVER_START: &str = "BEGIN; SET LOCAL lock_timeout = '200ms';
    ALTER TABLE idgen_lease_namespaces ADD COLUMN IF NOT EXISTS server_start timestamptz;
    COMMIT";

const HAS_SERVER_START: &str = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute      WHERE attrelid = 'idgen_lease_namespaces'::regclass AND attname = 'server_start'      AND NOT attisdropped)";

const CREATE_LEASES: &str = "CREATE TABLE idgen_leases (
    namespace text NOT NULL,
    datacenter bigint NOT NULL,
    worker bigint NOT NULL,
    token text,
    holder text,
    expires_at timestamptz,
    mark_ms bigint CHECK (mark_ms >= 0),
    version bigint NOT NULL CHECK (version >= 1),
    PRIMARY KEY (namespace, datacenter, worker)
)";

/// Which database the store now talks to: the cluster's system identifier (a new one for
/// a cluster restored with `initdb` and a dump), its timeline (a new one when a standby is
/// promoted, or a backup is recovered by archive recovery), and the leases table's OID (a
/// new one when the table is dropped and made again, as `pg_dump --clean` restores it).
/// Each of these can mean marks confirmed to a holder are gone. A rollback that changes
/// none of them (a data-only reload, a disk snapshot put back) is not seen here: its live
/// holders find it at their next renewal, and the restore step is the operator's.
macro_rules! cluster {
    () => {
        "((SELECT system_identifier::text FROM pg_control_system()) || '/' || \
         substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' || \
         'idgen_leases'::regclass::oid::text)"
    };
}

/// `sql` with every name of the store's (`idgen_lease...`) in `schema`.
pub(super) fn qualify(sql: &str, schema: &str) -> String {
    sql.replace("idgen_lease", &format!("{}.idgen_lease", quoted(schema)))
}

/// Creates what is absent in `schema` (see [`create_in_schema`]), adds the column an
/// earlier version's namespaces table lacks, and checks what every statement relies on: the
/// session can read the cluster's identity (a role a hardening script denied
/// `pg_control_system()` fails here, by name, not at every renewal), and commits are
/// durable (`synchronous_commit` not `off`: a pooler that dropped the connection's own
/// setting would let a crash lose a confirmed claim).
pub(super) fn create_tables(
    client: &mut postgres::Client,
    schema: &str,
) -> Result<(), SetupFailure> {
    let q = |sql: &str| qualify(sql, schema);
    create_in_schema(
        client,
        schema,
        &[
            (NAMESPACES, &q(CREATE_NAMESPACES)),
            (LEASES, &q(CREATE_LEASES)),
            (HISTORY, &q(CREATE_HISTORY)),
        ],
    )?;
    check_privileges(client, schema, &[NAMESPACES, LEASES], &[HISTORY])?;
    // A table the previous version wrote has versions counted from 1 by its writes: the
    // history starts past them, so that a row made again is newer than any written before.
    client.execute(&q(HISTORY_PAST_ROWS), &[])?;
    let has_server_start: bool = client.query_one(&q(HAS_SERVER_START), &[])?.try_get(0)?;
    if !has_server_start {
        match client.batch_execute(&q(ADD_SERVER_START)) {
            Ok(()) => {}
            Err(error)
                if error.code() == Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) =>
            {
                return Err(SetupFailure::Refused(format!(
                    "{}: this version of idgen adds a column to {}.{NAMESPACES}, which only \
                     the table's owner may do: run any idgen command on this store once as \
                     the owner, or run as it: {};",
                    crate::postgres_session::describe(&error),
                    quoted(schema),
                    q(ADD_SERVER_START)
                )));
            }
            Err(error) => {
                let _ = client.batch_execute("ROLLBACK");
                return Err(error.into());
            }
        }
    }
    client.query_one(&q(concat!("SELECT ", cluster!())), &[])?;
    client.batch_execute(
        "DO $$ BEGIN IF current_setting('synchronous_commit') = 'off' THEN \
         RAISE EXCEPTION 'idgen leases need synchronous_commit on (it is off for this \
         session: a pooler that drops startup options, or a role default)'; END IF; END $$",
    )?;
    Ok(())
}

/// Whether namespace `$1` (the row `s`) may hand out a number now, after a server start:
/// its row was written while this very server runs (created, or the restore step), or the
/// largest outage horizon recorded (at most a day, as `MAX_OUTAGE_HORIZON`: a hostile value
/// neither overflows nor shuts the gate for good) and 24 s (two requests' timeouts: a
/// renewal and the look at why it failed) passed since the server started.
/// A restore that keeps the cluster's identity and timeline (a base backup started without
/// recovery, a disk snapshot) needs a restart, and its tables have forgotten holders that
/// may still issue: until the gate opens, their renewals (which find their rows gone back
/// and record the restore) or the end of their marks come first. A fresh process has no
/// history of its own to compare with: this is what covers it.
macro_rules! gate_open {
    () => {
        "(s.server_start = pg_postmaster_start_time() OR clock_timestamp() >= \
         pg_postmaster_start_time() + (LEAST(GREATEST(s.horizon_ms, 0), 86400000) + 24000) * interval '1 millisecond')"
    };
}

/// Whether namespace `$1` may hand out numbers now: initialised on this very cluster, no
/// restore found since, and past the gate after a server start ([`gate_open!`]). What an
/// acquire, and a renewal's take-back of an expired holding, require.
macro_rules! open {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM idgen_lease_namespaces s WHERE s.namespace = $1 \
             AND s.cluster = ",
            cluster!(),
            " AND s.state NOT LIKE '%restore-found %' AND ",
            gate_open!(),
            ")"
        )
    };
}

/// `$1` namespace → its state, its recorded cluster, whether that is this one, the
/// history's last value, how many ms are left before the gate after a server start opens
/// (0: open), and in how many schemas the leases table is (a copy made since this process
/// connected, by a previous version along its `search_path`, splits the store: the name is
/// spelt in two so that `qualify` leaves it alone).
pub(super) const NAMESPACE: &str = concat!(
    "SELECT state, cluster, cluster = ",
    cluster!(),
    ", (SELECT last_value FROM idgen_lease_history), \
     CASE WHEN ",
    gate_open!(),
    " THEN 0::bigint ELSE ceil(extract(epoch FROM pg_postmaster_start_time() + \
     (LEAST(GREATEST(s.horizon_ms, 0), 86400000) + 24000) * interval '1 millisecond' - clock_timestamp()) * 1000)::bigint END \
     , (SELECT count(*) FROM pg_catalog.pg_class c \
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
     WHERE c.relname = 'idgen_' || 'leases' AND c.relkind IN ('r', 'p') \
     AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast%') \
     FROM idgen_lease_namespaces s WHERE namespace = $1"
);

/// `$1` namespace, `$2` state, `$3` only if the namespace has no row.
pub(super) const CREATE_NAMESPACE: &str = concat!(
    "INSERT INTO idgen_lease_namespaces (namespace, state, cluster, server_start) \
     VALUES ($1, $2, ",
    cluster!(),
    ", pg_postmaster_start_time()) ON CONFLICT (namespace) DO NOTHING"
);

/// `$1` namespace, `$2` state: the state and this cluster, after a restore.
pub(super) const RESET_NAMESPACE: &str = concat!(
    "INSERT INTO idgen_lease_namespaces (namespace, state, cluster, server_start) \
     VALUES ($1, $2, ",
    cluster!(),
    ", pg_postmaster_start_time()) ON CONFLICT (namespace) DO UPDATE SET \
     state = EXCLUDED.state, cluster = EXCLUDED.cluster, server_start = EXCLUDED.server_start"
);

/// The restore step's leap of the history: [`HISTORY_LEAP`] past its value now, and at
/// least to the step's time in microseconds times 1,024, so that a later step leaps past
/// an earlier one even from an older copy (the same backup restored twice), as long as
/// the fleet writes fewer than a thousand rows a microsecond. Until the year 2255.
pub(super) const LEAP_HISTORY: &str = "SELECT setval('idgen_lease_history', \
     GREATEST((SELECT GREATEST(last_value, 0) FROM idgen_lease_history) + $1::bigint, \
     (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 1024))";

/// The history moved past every row's version, if behind (a table the previous version
/// wrote, or the sequence dropped and made again).
const HISTORY_PAST_ROWS: &str = "SELECT setval('idgen_lease_history', \
     (SELECT max(version) FROM idgen_leases)) \
     WHERE (SELECT max(version) FROM idgen_leases) > \
     (SELECT last_value FROM idgen_lease_history)";

/// `$1` namespace, `$2` the state a holder found, `$3` the state it read before it
/// decided: the namespace refused until the restore step, unless its state changed since
/// (the step ran meanwhile: a verdict reached before it must not undo it). `$3` empty: a
/// finding that the history stands behind `$4`, the process's high-water mark, recorded
/// whatever the state unless the history has passed `$4` since (the restore step's leap).
pub(super) const MARK_RESTORE_FOUND: &str = "UPDATE idgen_lease_namespaces SET state = $2
    WHERE namespace = $1 AND state NOT LIKE '%restore-found %' AND (state = $3
        OR ($3 = '' AND (SELECT last_value FROM idgen_lease_history) < $4::bigint))";

/// `$1` namespace, `$2` layout record: recorded where none is; the row after it.
pub(super) const BIND_LAYOUT: &str = "UPDATE idgen_lease_namespaces SET layout = $2
    WHERE namespace = $1 AND layout IS NULL";

/// `$1` namespace → its layout record.
pub(super) const LAYOUT: &str = "SELECT layout FROM idgen_lease_namespaces WHERE namespace = $1";

/// `$1` namespace, `$2` horizon in ms → the largest recorded.
pub(super) const RAISE_HORIZON: &str = "UPDATE idgen_lease_namespaces
    SET horizon_ms = GREATEST(horizon_ms, $2) WHERE namespace = $1 RETURNING horizon_ms";

/// `$1` namespace → the largest horizon recorded.
pub(super) const HORIZON: &str =
    "SELECT horizon_ms FROM idgen_lease_namespaces WHERE namespace = $1";

/// `$1` namespace → how many numbers it has rows for.
pub(super) const COUNT_ROWS: &str = "SELECT count(*) FROM idgen_leases WHERE namespace = $1";

/// `$1` namespace, `$2` datacenter, `$3` first and `$4` last worker, `$5` mark: a row,
/// free, for every number of the range that has none. Returns how many were made.
pub(super) const WRITE_MISSING: &str = "INSERT INTO idgen_leases
    (namespace, datacenter, worker, mark_ms, version)
    SELECT $1, $2, w, $5, nextval('idgen_lease_history')
    FROM generate_series($3::bigint, $4::bigint) AS w
    ON CONFLICT DO NOTHING";

/// The restore step on the rows of `$1` namespace, `$2` datacenter, workers `$3` to `$4`:
/// every holding ends (its holder, who may have written marks the restore lost, finds it
/// lost and takes a number again, waiting past the raised marks), and every mark is raised
/// to at least `$5`. A holding left in place could be taken back by a holder whose row the
/// restore brought back, while another process took the number meanwhile and still issues
/// (found by the fleet simulator).
pub(super) const RAISE_MARKS: &str = "UPDATE idgen_leases
    SET token = NULL, holder = NULL, expires_at = NULL,
        mark_ms = GREATEST(COALESCE(mark_ms, $5), $5),
        version = GREATEST(version + 1, nextval('idgen_lease_history'))
    WHERE namespace = $1 AND datacenter = $2 AND worker BETWEEN $3 AND $4";

/// `$1` namespace, `$2` datacenter, `$3` first and `$4` last worker → the numbers of the
/// range an acquire may try, lowest first: no row (deleted), or free, or expired on the
/// server's clock. One read, so that taking the last of many numbers does not try every
/// held one before it.
pub(super) const CANDIDATES: &str = "SELECT w FROM generate_series($3::bigint, $4::bigint) AS w
    LEFT JOIN idgen_leases l ON l.namespace = $1 AND l.datacenter = $2 AND l.worker = w
    WHERE l.worker IS NULL OR l.token IS NULL OR l.expires_at <= clock_timestamp()
    ORDER BY w";

/// `$1` namespace, `$2` datacenter, `$3` worker, `$4` token, `$5` holder name, `$6` TTL in
/// ms: takes the number if its row is free or its holding expired on the server's clock,
/// in a usable namespace past the gate after a server start. Returns the previous holder's
/// mark, the new version and the history's next value.
pub(super) const ACQUIRE: &str = concat!(
    "UPDATE idgen_leases SET token = $4, holder = $5, \
     expires_at = clock_timestamp() + $6::bigint * interval '1 millisecond', \
     version = GREATEST(version + 1, nextval('idgen_lease_history')) \
     WHERE namespace = $1 AND datacenter = $2 AND worker = $3 \
     AND (token IS NULL OR expires_at <= clock_timestamp()) AND ",
    open!(),
    " RETURNING mark_ms, version, currval('idgen_lease_history')"
);

/// As [`ACQUIRE`] for a number that has no row (deleted): made again, held, its mark
/// unknown. Returns the version and the history's next value.
pub(super) const ACQUIRE_MISSING: &str = concat!(
    "INSERT INTO idgen_leases (namespace, datacenter, worker, token, holder, expires_at, \
     mark_ms, version) \
     SELECT $1, $2, $3, $4, $5, clock_timestamp() + $6::bigint * interval '1 millisecond', \
     NULL, nextval('idgen_lease_history') WHERE ",
    open!(),
    " ON CONFLICT DO NOTHING RETURNING version, currval('idgen_lease_history')"
);

/// `$1` namespace, `$2` datacenter, `$3` worker, `$4` token, `$5` the version of the
/// claim's last confirmed write, `$6` mark, `$7` TTL in ms: the one statement of a
/// renewal. It proves the row is the claim's (its token; a version no older than the
/// claim's last write, so a row rolled back is refused), extends the holding from the
/// server's clock now, and raises the mark. A holding that expired while nobody took the
/// number is taken back by the same statement (the token is still ours), but only where an
/// acquire could take it (a usable namespace, past the gate after a server start): in a
/// restored table a row can come back with an expired holding of ours after another
/// process took the number (found by the fleet simulator, for a dump restored and for a
/// base backup started as it was). Returns the
/// new version and the history's next value (a store behind this process's high-water
/// mark went back, though this row did not).
pub(super) const RENEW: &str = concat!(
    "UPDATE idgen_leases \
     SET mark_ms = GREATEST(mark_ms, $6), \
     expires_at = clock_timestamp() + $7::bigint * interval '1 millisecond', \
     version = GREATEST(version + 1, nextval('idgen_lease_history')) \
     WHERE namespace = $1 AND datacenter = $2 AND worker = $3 AND token = $4 \
     AND version >= $5 AND (expires_at > clock_timestamp() OR ",
    open!(),
    ") RETURNING version, currval('idgen_lease_history')"
);

/// As [`RENEW`]'s guard, `$6` the mark to leave (`NULL`: the row's own): frees the number.
pub(super) const RELEASE: &str = "UPDATE idgen_leases
    SET token = NULL, holder = NULL, expires_at = NULL, mark_ms = COALESCE($6, mark_ms),
        version = GREATEST(version + 1, nextval('idgen_lease_history'))
    WHERE namespace = $1 AND datacenter = $2 AND worker = $3 AND token = $4 AND version >= $5";

/// `$1` namespace, `$2` datacenter, `$3` worker → what a write that matched nothing found:
/// the row's token and version (if it exists), the namespace's state, whether its
/// recorded cluster is this one, and the history's last value.
pub(super) const EVIDENCE: &str = concat!(
    "SELECT l.token, l.version, s.state, s.cluster = ",
    cluster!(),
    ", (SELECT last_value FROM idgen_lease_history) FROM (SELECT 1) AS one \
     LEFT JOIN idgen_leases l ON l.namespace = $1 AND l.datacenter = $2 AND l.worker = $3 \
     LEFT JOIN idgen_lease_namespaces s ON s.namespace = $1"
);

/// `$1` namespace, `$2` datacenter, `$3` first and `$4` last worker → each row: worker,
/// whether held now on the server's clock, holder name, mark.
pub(super) const SURVEY: &str = "SELECT worker,
        token IS NOT NULL AND expires_at > clock_timestamp(), holder, mark_ms
    FROM idgen_leases
    WHERE namespace = $1 AND datacenter = $2 AND worker BETWEEN $3 AND $4
    ORDER BY worker";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_the_store_is_qualified_with_its_schema() {
        for statement in [
            ACQUIRE,
            ACQUIRE_MISSING,
            RENEW,
            NAMESPACE,
            EVIDENCE,
            RAISE_MARKS,
        ] {
            let qualified = qualify(statement, "app_one");
            let bare = qualified.replace("\"app_one\".idgen_lease", "");
            assert!(!bare.contains("idgen_lease"), "{qualified}");
            assert!(qualified.contains("\"app_one\".idgen_lease"), "{qualified}");
        }
        // The regclass, nextval and currval literals name the schema too.
        let acquire = qualify(ACQUIRE, "app_one");
        assert!(acquire.contains("nextval('\"app_one\".idgen_lease_history')"));
        assert!(acquire.contains("currval('\"app_one\".idgen_lease_history')"));
        assert!(acquire.contains("'\"app_one\".idgen_leases'::regclass"));
    }

    #[test]
    fn the_gate_is_the_same_in_the_acquire_and_in_the_namespace_read() {
        // Both read the gate from gate_open!(), with its 24 s margin.
        for statement in [ACQUIRE, ACQUIRE_MISSING, RENEW, NAMESPACE] {
            assert!(
                statement.contains("pg_postmaster_start_time()"),
                "{statement}"
            );
            assert!(
                statement.contains("(LEAST(GREATEST(s.horizon_ms, 0), 86400000) + 24000)"),
                "{statement}"
            );
        }
        // The take-back of an expired holding too.
        assert!(RENEW.contains("(LEAST(GREATEST(s.horizon_ms, 0), 86400000) + 24000)"));
    }
}
