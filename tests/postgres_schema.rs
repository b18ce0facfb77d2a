//! One namespace of one database is one store, whatever the role or `search_path`
//! (feature `postgres`): two roles with schemas of their own share one lease table and one
//! sequence table; copies of a table in two schemas are refused, naming both; a role that
//! may not create the tables is told the `GRANT` it needs; and the tables an earlier
//! version created along a role's `search_path` are the ones this version uses. On private
//! servers: roles and schemas of their own would disturb the tests beside them.

#![cfg(feature = "postgres")]

#[path = "common/postgres.rs"]
mod postgres_server;

use std::time::Duration;

use idgen::Error;
use idgen::blocks::{BlockStore, SequenceName};
use idgen::lease::{LeaseStore, LeasedGenerator, PostgresStore, WorkerRange};
use postgres_server::PostgresServer;

/// Runs `sql` as the superuser.
fn admin(server: &PostgresServer, sql: &str) {
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    client.batch_execute(sql).unwrap();
}

/// `server`'s URL as `role`.
fn as_role(server: &PostgresServer, role: &str) -> String {
    server.url().replacen("postgres@", &format!("{role}@"), 1)
}

/// The schemas holding a table named `table`.
fn schemas_of(server: &PostgresServer, table: &str) -> Vec<String> {
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    client
        .query(
            "SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname = $1 ORDER BY 1",
            &[&table],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Two roles, each owning a schema of its name (the usual "schema per service"; their
/// default search_path is `"$user", public`).
fn two_roles(server: &PostgresServer) {
    admin(
        server,
        "CREATE ROLE app_a LOGIN; CREATE SCHEMA app_a AUTHORIZATION app_a;
         CREATE ROLE app_b LOGIN; CREATE SCHEMA app_b AUTHORIZATION app_b;",
    );
}

fn range() -> WorkerRange {
    WorkerRange::parse(0, "0-0").unwrap()
}

fn connect(url: &str) -> Result<PostgresStore, Error> {
    PostgresStore::connect(url, "/idgen/prod")
        .map(|store| store.with_ttl(Duration::from_secs(3)).unwrap())
}

#[test]
fn two_roles_with_schemas_of_their_own_share_one_lease_table_and_one_sequence_table() {
    let server = PostgresServer::start("schema-roles");
    two_roles(&server);
    let (a, b) = (as_role(&server, "app_a"), as_role(&server, "app_b"));
    // PostgreSQL 15 lets no role but the owner create in public: told, with the GRANT.
    let refused = connect(&a).unwrap_err().to_string();
    assert!(
        refused.contains(r#"GRANT USAGE, CREATE ON SCHEMA "public" TO "app_a""#),
        "{refused}"
    );
    let refused = idgen::blocks::PostgresStore::connect(&a)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("GRANT USAGE, CREATE ON SCHEMA"),
        "{refused}"
    );
    assert_eq!(schemas_of(&server, "idgen_leases"), Vec::<String>::new());

    admin(
        &server,
        "GRANT USAGE, CREATE ON SCHEMA public TO app_a, app_b",
    );
    let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
    // Both ran `idgen leases init --new` in the issue: the second is no longer new.
    let store_a = connect(&a).unwrap();
    store_a.init_new(0..=0, 0..=0, now).unwrap();
    // app_a made the tables: app_b is told the GRANTs their owner runs, then shares them.
    let refused = connect(&b).unwrap_err().to_string();
    assert!(
        refused.contains(r#"GRANT SELECT, INSERT, UPDATE ON "public".idgen_leases TO "app_b";"#)
            && refused.contains(r#"GRANT SELECT, UPDATE ON SEQUENCE "public".idgen_lease_history"#),
        "{refused}"
    );
    let mut owner = postgres::Client::connect(&a, postgres::NoTls).unwrap();
    owner
        .batch_execute(
            "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO app_b;
             GRANT SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO app_b;",
        )
        .unwrap();
    let store_b = connect(&b).unwrap();
    let second = store_b.init_new(0..=0, 0..=0, now).unwrap_err();
    assert!(matches!(second, Error::LeaseConfig { .. }), "{second:?}");
    // Whoever holds worker 0, the other finds it held: one table.
    let held_by_a = store_a.acquire(&range()).unwrap();
    let by_b = store_b.acquire(&range()).map(|claim| claim.worker());
    assert!(
        matches!(by_b, Err(Error::LeaseRangeFull { .. })),
        "worker 0 taken twice: {by_b:?}"
    );
    drop(held_by_a);
    assert_eq!(store_a.schema(), "public");
    assert_eq!(store_b.schema(), "public");
    assert_eq!(schemas_of(&server, "idgen_leases"), vec!["public"]);
    assert_eq!(schemas_of(&server, "idgen_lease_history"), vec!["public"]);

    // Sequences: `idgen seq next orders -n 3` answered 1 2 3 for each role in the issue.
    let orders = SequenceName::new("orders").unwrap();
    let from_a = idgen::blocks::PostgresStore::connect(&a)
        .unwrap()
        .grant(&orders, 3)
        .unwrap();
    let refused = idgen::blocks::PostgresStore::connect(&b)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(r#"GRANT SELECT, INSERT, UPDATE ON "public".idgen_sequences TO "app_b";"#),
        "{refused}"
    );
    owner
        .batch_execute("GRANT SELECT, INSERT, UPDATE ON public.idgen_sequences TO app_b")
        .unwrap();
    let from_b = idgen::blocks::PostgresStore::connect(&b)
        .unwrap()
        .grant(&orders, 3)
        .unwrap();
    assert_eq!((from_a.first, from_b.first), (1, from_a.end));
    assert_eq!(schemas_of(&server, "idgen_sequences"), vec!["public"]);
}

#[test]
fn copies_of_a_table_in_two_schemas_are_refused_naming_both() {
    let server = PostgresServer::start("schema-copies");
    two_roles(&server);
    // What the previous version did for two roles: a table in each one's own schema.
    for role in ["app_a", "app_b"] {
        let mut client =
            postgres::Client::connect(&as_role(&server, role), postgres::NoTls).unwrap();
        client
            .batch_execute(&format!(
                "{PREVIOUS_TABLES}
                 CREATE TABLE idgen_sequences (name text PRIMARY KEY, last_value bigint NOT NULL,
                     serial bigint NOT NULL, block_size bigint NOT NULL);"
            ))
            .unwrap();
    }
    for url in [as_role(&server, "app_a"), server.url()] {
        let refused = connect(&url).unwrap_err().to_string();
        assert!(
            refused.contains("app_a.idgen_leases, app_b.idgen_leases"),
            "{refused}"
        );
        let refused = idgen::blocks::PostgresStore::connect(&url)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("app_a.idgen_sequences, app_b.idgen_sequences"),
            "{refused}"
        );
    }
    // Naming one does not make the other go away.
    let named = PostgresStore::connect_in(&as_role(&server, "app_a"), "app_a", "/idgen/prod")
        .unwrap_err()
        .to_string();
    assert!(named.contains("app_b.idgen_leases"), "{named}");
    // Sequences handed out values up to each copy's last: the fix says to merge them first.
    let blocks = idgen::blocks::PostgresStore::connect(&server.url())
        .unwrap_err()
        .to_string();
    assert!(
        blocks.contains("merge") && blocks.contains("largest last_value"),
        "{blocks}"
    );
    admin(
        &server,
        "DROP TABLE app_b.idgen_leases, app_b.idgen_sequences",
    );
    // One left: used, wherever it is, by every role.
    let found = PostgresStore::connect(&server.url(), "/idgen/prod");
    assert_eq!(found.unwrap().schema(), "app_a");
    // And a schema named where another holds the table: refused, not made.
    let elsewhere = PostgresStore::connect_in(&server.url(), "public", "/idgen/prod")
        .unwrap_err()
        .to_string();
    assert!(elsewhere.contains("app_a.idgen_leases"), "{elsewhere}");
    assert_eq!(schemas_of(&server, "idgen_leases"), vec!["app_a"]);
    let bad = PostgresStore::connect_in(&server.url(), "Bad-Name", "/idgen/prod").unwrap_err();
    assert!(matches!(bad, Error::LeaseConfig { .. }), "{bad:?}");
}

/// The statements of the previous version (commit 7e16f1f), which created its tables along
/// the session's search_path, and wrote a namespace and its rows.
const PREVIOUS_TABLES: &str = "CREATE TABLE idgen_lease_namespaces (
    namespace text PRIMARY KEY,
    state text NOT NULL,
    cluster text NOT NULL,
    layout text,
    horizon_ms bigint NOT NULL DEFAULT 0
);
CREATE TABLE idgen_leases (
    namespace text NOT NULL,
    datacenter bigint NOT NULL,
    worker bigint NOT NULL,
    token text,
    holder text,
    expires_at timestamptz,
    mark_ms bigint CHECK (mark_ms >= 0),
    version bigint NOT NULL CHECK (version >= 1),
    PRIMARY KEY (namespace, datacenter, worker)
);
INSERT INTO idgen_leases (namespace, datacenter, worker, mark_ms, version)
    SELECT '/idgen/prod', 0, w, 1000, 5000 + w FROM generate_series(0, 3) AS w;
INSERT INTO idgen_lease_namespaces (namespace, state, cluster) VALUES ('/idgen/prod',
    'idgen-lease-store v1 initialised new by pid 1',
    (SELECT system_identifier::text FROM pg_control_system()) || '/' ||
    substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' ||
    'idgen_leases'::regclass::oid::text);";

/// An upgrade in place: the tables the previous version made along a role's search_path
/// (in the role's own schema) are the ones this version uses, from that role and from any
/// other, with no step of the operator's; the namespace stays initialised and a number is
/// taken from its rows.
#[test]
fn the_tables_the_previous_version_made_along_the_search_path_are_the_ones_used() {
    let server = PostgresServer::start("schema-upgrade");
    two_roles(&server);
    let a = as_role(&server, "app_a");
    let mut client = postgres::Client::connect(&a, postgres::NoTls).unwrap();
    client.batch_execute(PREVIOUS_TABLES).unwrap();
    assert_eq!(schemas_of(&server, "idgen_leases"), vec!["app_a"]);
    for url in [a.clone(), server.url()] {
        let store = connect(&url).unwrap();
        assert_eq!(store.schema(), "app_a");
        // The rows the previous version wrote, read (a survey is not held by the gate).
        let survey = store
            .survey(&WorkerRange::parse(0, "0-3").unwrap())
            .unwrap();
        assert!(
            survey[1..]
                .iter()
                .all(|number| number.mark_unix_ms == Some(1000)),
            "{survey:?}"
        );
        // The namespace row predates this server's start (it has no server_start yet):
        // numbers wait out the gate after the start, then are handed out from these rows.
        let generator = LeasedGenerator::builder(store, range())
            .outage_horizon(Duration::from_secs(3))
            .startup_wait(Duration::from_secs(90))
            .acquire()
            .unwrap();
        assert_eq!(generator.worker(), 0);
        generator.next_id().unwrap();
        let holder: Option<String> = client
            .query_one(
                "SELECT token FROM app_a.idgen_leases WHERE namespace = '/idgen/prod' AND worker = 0",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(holder.is_some(), "the number was taken elsewhere");
        generator.release().unwrap();
    }
    assert_eq!(schemas_of(&server, "idgen_leases"), vec!["app_a"]);
    assert_eq!(schemas_of(&server, "idgen_lease_namespaces"), vec!["app_a"]);
    // The history starts past the versions the previous version counted (up to 5003): a
    // row made again after a deletion is newer than any written before.
    let history: i64 = client
        .query_one("SELECT last_value FROM app_a.idgen_lease_history", &[])
        .unwrap()
        .get(0);
    assert!(history >= 5003, "{history}");
}

/// A copy of the leases table made in another schema while a process runs (a previous
/// version's process along its search_path) is seen at the next acquire, not only at the
/// next connection.
#[test]
fn a_copy_made_while_a_process_runs_is_refused_at_its_next_acquire() {
    let server = PostgresServer::start("schema-copy-later");
    let store = connect(&server.url()).unwrap();
    let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
    store.init_new(0..=0, 0..=1, now).unwrap();
    drop(store.acquire(&range()).unwrap());
    admin(
        &server,
        "CREATE SCHEMA later; CREATE TABLE later.idgen_leases (namespace text)",
    );
    let refused = store.acquire(&WorkerRange::parse(0, "1-1").unwrap());
    assert!(
        matches!(&refused, Err(Error::LeaseConfig { reason }) if reason.contains("2 schemas")),
        "{refused:?}"
    );
}
