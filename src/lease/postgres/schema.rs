//! What the store keeps in PostgreSQL: its two tables, created only if absent, and every
//! statement it sends. Uses nothing else of the folder.
//!
//! Each statement stands alone (autocommit): the guards are in its `WHERE`, which
//! PostgreSQL evaluates again on the newest row version when a concurrent write got there
//! first (`READ COMMITTED`'s rule for `UPDATE`), so two racing acquires of one number
//! cannot both match. No advisory lock, no session state beyond the connection's timeouts.

use crate::postgres_session::create_table_if_absent;

/// One row per namespace: its state, the cluster it was initialised on, its layout and the
/// largest outage horizon any holder recorded.
pub(super) const NAMESPACES: &str = "idgen_lease_namespaces";

/// One row per number of a namespace: its holder, when the holding expires on the server's
/// clock, its mark (`NULL`: unknown, the row was deleted and made again), and a version
/// that every write raises.
pub(super) const LEASES: &str = "idgen_leases";

const CREATE_NAMESPACES: &str = "CREATE TABLE idgen_lease_namespaces (
    namespace text PRIMARY KEY,
    state text NOT NULL,
    cluster text NOT NULL,
    layout text,
    horizon_ms bigint NOT NULL DEFAULT 0
)";

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

/// Creates the tables if absent (see [`create_table_if_absent`]), and checks what every
/// statement relies on: the session can read the cluster's identity (a role a hardening
/// script denied `pg_control_system()` fails here, by name, not at every renewal), and
/// commits are durable (`synchronous_commit` not `off`: a pooler that dropped the
/// connection's own setting would let a crash lose a confirmed claim).
pub(super) fn create_tables(client: &mut postgres::Client) -> Result<(), postgres::Error> {
    create_table_if_absent(client, NAMESPACES, CREATE_NAMESPACES)?;
    create_table_if_absent(client, LEASES, CREATE_LEASES)?;
    client.query_one(concat!("SELECT ", cluster!()), &[])?;
    client.batch_execute(
        "DO $$ BEGIN IF current_setting('synchronous_commit') = 'off' THEN \
         RAISE EXCEPTION 'idgen leases need synchronous_commit on (it is off for this \
         session: a pooler that drops startup options, or a role default)'; END IF; END $$",
    )
}

/// Whether namespace `$1` may hand out numbers: initialised on this very cluster, and no
/// restore found since.
macro_rules! usable {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM idgen_lease_namespaces s WHERE s.namespace = $1 \
             AND s.cluster = ",
            cluster!(),
            " AND s.state NOT LIKE '%restore-found %')"
        )
    };
}

/// `$1` namespace → its state, its recorded cluster and whether that is this one.
pub(super) const NAMESPACE: &str = concat!(
    "SELECT state, cluster, cluster = ",
    cluster!(),
    " FROM idgen_lease_namespaces WHERE namespace = $1"
);

/// `$1` namespace, `$2` state, `$3` only if the namespace has no row.
pub(super) const CREATE_NAMESPACE: &str = concat!(
    "INSERT INTO idgen_lease_namespaces (namespace, state, cluster) VALUES ($1, $2, ",
    cluster!(),
    ") ON CONFLICT (namespace) DO NOTHING"
);

/// `$1` namespace, `$2` state: the state and this cluster, after a restore.
pub(super) const RESET_NAMESPACE: &str = concat!(
    "INSERT INTO idgen_lease_namespaces (namespace, state, cluster) VALUES ($1, $2, ",
    cluster!(),
    ") ON CONFLICT (namespace) DO UPDATE SET state = EXCLUDED.state, cluster = EXCLUDED.cluster"
);

/// `$1` namespace, `$2` the state a holder found, `$3` the state it read before it
/// decided: the namespace refused until the restore step, unless its state changed since
/// (the step ran meanwhile: a verdict reached before it must not undo it).
pub(super) const MARK_RESTORE_FOUND: &str = "UPDATE idgen_lease_namespaces SET state = $2
    WHERE namespace = $1 AND state = $3 AND state NOT LIKE '%restore-found %'";

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
    SELECT $1, $2, w, $5, 1 FROM generate_series($3::bigint, $4::bigint) AS w
    ON CONFLICT DO NOTHING";

/// The restore step on the rows of `$1` namespace, `$2` datacenter, workers `$3` to `$4`:
/// every holding ends (its holder, who may have written marks the restore lost, finds it
/// lost and takes a number again, waiting past the raised marks), and every mark is raised
/// to at least `$5`. A holding left in place could be taken back by a holder whose row the
/// restore brought back, while another process took the number meanwhile and still issues
/// (found by the fleet simulator).
pub(super) const RAISE_MARKS: &str = "UPDATE idgen_leases
    SET token = NULL, holder = NULL, expires_at = NULL,
        mark_ms = GREATEST(COALESCE(mark_ms, $5), $5), version = version + 1
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
/// in a usable namespace. Returns the previous holder's mark and the new version.
pub(super) const ACQUIRE: &str = concat!(
    "UPDATE idgen_leases SET token = $4, holder = $5, \
     expires_at = clock_timestamp() + $6::bigint * interval '1 millisecond', \
     version = version + 1 \
     WHERE namespace = $1 AND datacenter = $2 AND worker = $3 \
     AND (token IS NULL OR expires_at <= clock_timestamp()) AND ",
    usable!(),
    " RETURNING mark_ms, version"
);

/// As [`ACQUIRE`] for a number that has no row (deleted): made again, held, its mark
/// unknown. Returns the version.
pub(super) const ACQUIRE_MISSING: &str = concat!(
    "INSERT INTO idgen_leases (namespace, datacenter, worker, token, holder, expires_at, \
     mark_ms, version) \
     SELECT $1, $2, $3, $4, $5, clock_timestamp() + $6::bigint * interval '1 millisecond', \
     NULL, 1 WHERE ",
    usable!(),
    " ON CONFLICT DO NOTHING RETURNING version"
);

/// `$1` namespace, `$2` datacenter, `$3` worker, `$4` token, `$5` the version of the
/// claim's last confirmed write, `$6` mark, `$7` TTL in ms: the one statement of a
/// renewal. It proves the row is the claim's (its token; a version no older than the
/// claim's last write, so a row rolled back is refused), extends the holding from the
/// server's clock now, and raises the mark. A holding that expired while nobody took the
/// number is taken back by the same statement (the token is still ours), but only in a
/// usable namespace: in a restored table a row can come back with an expired holding of
/// ours after another process took the number (found by the fleet simulator). Returns the
/// new version.
pub(super) const RENEW: &str = concat!(
    "UPDATE idgen_leases \
     SET mark_ms = GREATEST(mark_ms, $6), \
     expires_at = clock_timestamp() + $7::bigint * interval '1 millisecond', \
     version = version + 1 \
     WHERE namespace = $1 AND datacenter = $2 AND worker = $3 AND token = $4 \
     AND version >= $5 AND (expires_at > clock_timestamp() OR ",
    usable!(),
    ") RETURNING version"
);

/// As [`RENEW`]'s guard, `$6` the mark to leave (`NULL`: the row's own): frees the number.
pub(super) const RELEASE: &str = "UPDATE idgen_leases
    SET token = NULL, holder = NULL, expires_at = NULL, mark_ms = COALESCE($6, mark_ms),
        version = version + 1
    WHERE namespace = $1 AND datacenter = $2 AND worker = $3 AND token = $4 AND version >= $5";

/// `$1` namespace, `$2` datacenter, `$3` worker → what a write that matched nothing found:
/// the row's token and version (if it exists), the namespace's state, and whether its
/// recorded cluster is this one.
pub(super) const EVIDENCE: &str = concat!(
    "SELECT l.token, l.version, s.state, s.cluster = ",
    cluster!(),
    " FROM (SELECT 1) AS one \
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
