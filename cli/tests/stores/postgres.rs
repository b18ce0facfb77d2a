//! `--lease-postgres`: `idgen leases init`, `next`, `leases` and a `serve` with its lease
//! API, all on PostgreSQL (the server `.ci/test` starts), each test under a namespace of
//! its own; and a second process with another layout refused.

use crate::common::{Service, idgen, temp_dir};
use crate::namespace;

fn postgres_url() -> String {
    std::env::var("IDGEN_POSTGRES_URL").expect(
        "IDGEN_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL",
    )
}

#[test]
fn a_fleet_on_postgres_initialises_issues_lists_and_refuses_a_second_layout() {
    let (url, namespace) = (postgres_url(), namespace("fleet"));
    let store = [
        "--lease-postgres",
        url.as_str(),
        "--namespace",
        namespace.as_str(),
    ];
    let with = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        all.extend(store.iter().map(|arg| arg.to_string()));
        all
    };
    let run = |args: &[&str]| {
        let args = with(args);
        idgen(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };

    // Before init: refused, saying what to run.
    let (status, _, stderr) = run(&["next"]);
    assert!(!status.success());
    assert!(
        stderr.contains("idgen leases init --lease-postgres"),
        "{stderr}"
    );

    let (status, stdout, stderr) = run(&[
        "leases",
        "init",
        "--new",
        "--worker-bits",
        "7",
        "--sequence-bits",
        "10",
    ]);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("1024 marks written") || stdout.contains("4096 marks written"),
        "{stdout}"
    );

    // A service holds a number, and leases another through its API.
    let token = temp_dir("pg-token").join("token");
    std::fs::write(&token, "a-token-for-the-postgres-test\n").unwrap();
    let blocks = temp_dir("pg-blocks");
    let service_args = with(&[
        "--worker-bits",
        "7",
        "--sequence-bits",
        "10",
        "--lease-api-token-file",
        token.to_str().unwrap(),
        "--blocks-dir",
        blocks.to_str().unwrap(),
    ]);
    let service = Service::start_with(&service_args.iter().map(String::as_str).collect::<Vec<_>>());
    let reply = service.request(
        "POST",
        "/v1/generators/lease",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer a-token-for-the-postgres-test"),
        ],
        br#"{"holder": "billing-7f9c"}"#,
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let terms = reply.json();
    assert_ne!(terms["worker"], service.worker);
    // The status page's fleet view (a PostgreSQL session of its own) shows both numbers.
    let bearer = [("Authorization", "Bearer a-token-for-the-postgres-test")];
    let held_by = |status: &serde_json::Value, holder: &str| {
        status["fleet"]["numbers"]
            .as_array()
            .is_some_and(|numbers| {
                numbers
                    .iter()
                    .any(|number| number["state"] == "held" && number["holder"] == holder)
            })
    };
    crate::common::wait_until(
        "the status showing both holders",
        crate::common::PATIENCE,
        || {
            let status = service.request("GET", "/v1/status", &bearer, b"").json();
            let own = format!("idgen serve, pid {}", service.child.id());
            held_by(&status, "billing-7f9c") && held_by(&status, &own)
        },
    );

    // The same layout from another process: a number of its own.
    let (status, stdout, stderr) = run(&[
        "next",
        "--worker-bits",
        "7",
        "--sequence-bits",
        "10",
        "--count",
        "3",
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");

    // Another layout: refused as bad input, naming both.
    let (status, _, stderr) = run(&["next"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sequence=10") && stderr.contains("sequence=12"),
        "{stderr}"
    );

    // The survey lists the service's number and the lease API's, with their holders.
    let (status, stdout, stderr) = run(&[
        "leases",
        "--worker-bits",
        "7",
        "--sequence-bits",
        "10",
        "--workers",
        "0-31",
    ]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("billing-7f9c"), "{stdout}");
    let own = format!("worker {:>4}  held", service.worker);
    assert!(stdout.contains(&own), "{own:?} in {stdout}");
    drop(service);
}

#[test]
fn the_postgres_flag_is_checked_before_anything_is_opened() {
    // Not with etcd, nor with a lease directory; a namespace needs a networked store.
    for args in [
        &[
            "next",
            "--lease-postgres",
            "postgresql://x@127.0.0.1:1/db",
            "--etcd",
            "http://127.0.0.1:1",
        ][..],
        &[
            "next",
            "--lease-postgres",
            "postgresql://x@127.0.0.1:1/db",
            "--lease-dir",
            "/tmp/x",
        ][..],
        &["next", "--namespace", "/x"][..],
        &["next", "--lease-postgres", "not a url at all ==="][..],
        &[
            "next",
            "--lease-postgres",
            "postgresql://x@127.0.0.1:1/db",
            "--namespace",
            "a b",
        ][..],
    ] {
        let (status, _, stderr) = idgen(args);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
    }
    // A password in the URL never shows in the error.
    let (status, _, stderr) = idgen(&[
        "next",
        "--lease-postgres",
        "postgresql://idgen:hunter2@127.0.0.1:1/db",
    ]);
    assert!(!status.success());
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// `--postgres-schema` names where idgen's tables are, for leases and sequences alike. On the
/// shared server the tables are in `public`: naming it works; naming another schema is
/// refused with both places named, and makes nothing there (a second table would be a
/// second store); a name that is not a schema name is refused before connecting.
#[test]
fn the_postgres_schema_flag_names_the_tables_and_a_second_copy_is_refused() {
    let (url, namespace) = (postgres_url(), namespace("schema-flag"));
    let (status, _, stderr) = idgen(&[
        "leases",
        "init",
        "--new",
        "--lease-postgres",
        &url,
        "--namespace",
        &namespace,
        "--postgres-schema",
        "public",
    ]);
    assert!(status.success(), "{stderr}");
    let (status, stdout, stderr) = idgen(&[
        "next",
        "--lease-postgres",
        &url,
        "--namespace",
        &namespace,
        "--postgres-schema",
        "public",
    ]);
    assert!(status.success(), "{stderr}");
    assert!(!stdout.trim().is_empty());
    // "schema-flag-<pid>-<nanos>": a sequence name no other run uses.
    let sequence = namespace.trim_start_matches("/idgen-cli-test/");
    let (status, stdout, stderr) = idgen(&[
        "seq",
        "next",
        sequence,
        "-n",
        "3",
        "--postgres",
        &url,
        "--postgres-schema",
        "public",
        "--create-sequences",
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout.split_whitespace().collect::<Vec<_>>(),
        ["1", "2", "3"]
    );

    let schema = format!("idgen_flag_{}", std::process::id());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .unwrap();
    let (lease_status, _, lease_stderr) = idgen(&[
        "next",
        "--lease-postgres",
        &url,
        "--namespace",
        &namespace,
        "--postgres-schema",
        &schema,
    ]);
    let (seq_status, _, seq_stderr) = idgen(&[
        "seq",
        "next",
        sequence,
        "--postgres",
        &url,
        "--postgres-schema",
        &schema,
        "--create-sequences",
    ]);
    let made: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1",
            &[&schema],
        )
        .unwrap()
        .get(0);
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
    assert!(!lease_status.success());
    assert!(
        lease_stderr.contains("public.idgen_leases") && lease_stderr.contains(&schema),
        "{lease_stderr}"
    );
    assert!(!seq_status.success());
    assert!(
        seq_stderr.contains("public.idgen_sequences") && seq_stderr.contains(&schema),
        "{seq_stderr}"
    );
    assert_eq!(made, 0, "a table was made in {schema}");

    let (status, _, stderr) = idgen(&[
        "next",
        "--lease-postgres",
        &url,
        "--namespace",
        &namespace,
        "--postgres-schema",
        "Not A Schema",
    ]);
    assert!(!status.success());
    assert!(stderr.contains("lower-case name"), "{stderr}");
}
