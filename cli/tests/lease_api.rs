//! The lease API (`/v1/generators`) of a real `idgen serve`: its contract, its refusals of
//! bad input, and a Node.js client that issues IDs itself on a leased number.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{Reply, Service, new_lease_dir, temp_dir};
use serde_json::Value;

const TOKEN: &str = "s3cret-token-for-tests";

fn token_file(name: &str) -> PathBuf {
    let dir = temp_dir(&format!("token-{name}"));
    let path = dir.join("token");
    std::fs::write(&path, format!("  {TOKEN}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    path
}

fn with_api(lease_dir: &Path, token: &Path, extra: &[&str]) -> Service {
    let mut args = vec!["--lease-api-token-file", token.to_str().unwrap()];
    args.extend(extra);
    Service::start(lease_dir, &args)
}

fn call(service: &Service, method: &str, path: &str, token: Option<&str>, body: &str) -> Reply {
    let authorization = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(value) = &authorization {
        headers.push(("Authorization", value.as_str()));
    }
    service.request(method, path, &headers, body.as_bytes())
}

fn lease(service: &Service, holder: &str) -> Reply {
    call(
        service,
        "POST",
        "/v1/generators/lease",
        Some(TOKEN),
        &serde_json::json!({ "holder": holder }).to_string(),
    )
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_lease_renews_releases_and_then_is_gone() {
    let dir = new_lease_dir("api-contract");
    let service = with_api(&dir, &token_file("contract"), &["--workers", "0-1"]);
    let before = unix_ms();
    let reply = lease(&service, "billing-7f9c");
    assert_eq!(reply.status, 200, "{reply:?}");
    let terms = reply.json();
    let lease_id = terms["leaseId"].as_str().unwrap().to_string();
    assert_eq!(lease_id.len(), 32, "{terms}");
    assert_eq!(terms["datacenter"], 0);
    assert_ne!(
        terms["worker"], service.worker,
        "the service's own number is not leased"
    );
    assert_eq!(terms["ttlMs"], 3_000);
    assert_eq!(terms["renewEveryMs"], 1_000);
    let valid_until = terms["validUntilMs"].as_u64().unwrap();
    // File store: the horizon is the TTL.
    assert!(
        valid_until > before + 2_900 && valid_until <= unix_ms() + 3_001,
        "{terms}"
    );
    assert_eq!(terms["layout"], service.get("/v1/layout").json());
    assert_eq!(
        service
            .get("/metrics")
            .body
            .lines()
            .find(|line| line.starts_with("idgen_lease_api_leases "))
            .unwrap(),
        "idgen_lease_api_leases 1"
    );

    // Renewed, for the same number, to a later end: once the clock has moved on from the
    // millisecond of the lease (renewals within it keep the end it had, never an earlier).
    common::wait_until("a renewal to a later end", common::PATIENCE, || {
        let renewed = call(
            &service,
            "POST",
            &format!("/v1/generators/{lease_id}/renew"),
            Some(TOKEN),
            "",
        );
        assert_eq!(renewed.status, 200, "{renewed:?}");
        let renewed = renewed.json();
        assert_eq!(renewed["worker"], terms["worker"]);
        let until = renewed["validUntilMs"].as_u64().unwrap();
        assert!(until >= valid_until, "{renewed}");
        until > valid_until
    });

    let released = call(
        &service,
        "DELETE",
        &format!("/v1/generators/{lease_id}"),
        Some(TOKEN),
        &format!(r#"{{"lastUsedMs": {}}}"#, unix_ms()),
    );
    assert_eq!(released.status, 204, "{released:?}");
    for (method, path) in [
        ("POST", format!("/v1/generators/{lease_id}/renew")),
        ("DELETE", format!("/v1/generators/{lease_id}")),
    ] {
        let reply = call(&service, method, &path, Some(TOKEN), "");
        assert_eq!(reply.status, 410, "{method} {path}: {reply:?}");
        assert!(reply.error().contains("released"), "{reply:?}");
    }
    // The number is free again: the next lease gets it.
    let again = lease(&service, "billing-7f9c").json();
    assert_eq!(again["worker"], terms["worker"]);
}

#[test]
fn the_lease_api_speaks_http_auth_and_json_numbers_as_the_document_says() {
    let dir = new_lease_dir("api-http");
    let service = with_api(&dir, &token_file("http"), &["--workers", "0-1"]);
    let json = ("Content-Type", "application/json");
    let body = br#"{"holder": "auth"}"#;
    for authorization in [None, Some("Bearer wrong".to_string())] {
        let mut headers = vec![json];
        headers.extend(
            authorization
                .as_deref()
                .map(|value| ("Authorization", value)),
        );
        let refused = service.request("POST", "/v1/generators/lease", &headers, body);
        assert_eq!(refused.status, 401, "{refused:?}");
        assert_eq!(
            refused.header("WWW-Authenticate").as_deref(),
            Some("Bearer")
        );
    }
    // The scheme's name in any case, as HTTP has it.
    let lower = format!("bearer {TOKEN}");
    let headers = [json, ("Authorization", lower.as_str())];
    let leased = service.request("POST", "/v1/generators/lease", &headers, body);
    assert_eq!(leased.status, 200, "{leased:?}");
    let terms = leased.json();
    // A whole number written as JSON may write it: 1767225600000.0 is 1767225600000.
    let last_used = format!(r#"{{"lastUsedMs": {}.0}}"#, terms["resumeAfterMs"]);
    let path = format!("/v1/generators/{}", terms["leaseId"].as_str().unwrap());
    let released = service.request("DELETE", &path, &headers, last_used.as_bytes());
    assert_eq!(released.status, 204, "{released:?}");
}

#[test]
fn bad_requests_get_a_clear_json_error() {
    let dir = new_lease_dir("api-bad");
    let service = with_api(&dir, &token_file("bad"), &["--workers", "0-1"]);
    let holder = |holder: &str| serde_json::json!({ "holder": holder }).to_string();
    let huge = holder(&"x".repeat(10_000));
    // (method, path, token, body, status, part of the error message)
    type Case<'a> = (&'a str, String, Option<&'a str>, String, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/v1/generators/lease".into(),
            None,
            holder("a"),
            401,
            "Bearer",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some("wrong"),
            holder("a"),
            401,
            "wrong",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            "{".into(),
            400,
            "malformed JSON",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            "[]".into(),
            400,
            "JSON object",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            "{}".into(),
            400,
            "holder is missing",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            holder(""),
            400,
            "1 to 128",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            holder(&"y".repeat(129)),
            400,
            "1 to 128",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            holder("tab\there"),
            400,
            "printable",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            r#"{"holder": 7}"#.into(),
            400,
            "string",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            r#"{"holder": "a", "x": 1}"#.into(),
            400,
            "unknown field",
        ),
        (
            "POST",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            huge,
            413,
            "larger than",
        ),
        (
            "GET",
            "/v1/generators/lease".into(),
            Some(TOKEN),
            String::new(),
            405,
            "method",
        ),
        (
            "POST",
            "/v1/generators/0123/renew".into(),
            Some(TOKEN),
            String::new(),
            404,
            "no lease",
        ),
        (
            "DELETE",
            "/v1/generators/0123".into(),
            Some(TOKEN),
            String::new(),
            404,
            "no lease",
        ),
        (
            "PUT",
            "/v1/generators/0123".into(),
            Some(TOKEN),
            String::new(),
            405,
            "method",
        ),
        (
            "DELETE",
            "/v1/generators/0123".into(),
            Some(TOKEN),
            r#"{"lastUsedMs": -1}"#.into(),
            400,
            "lastUsedMs",
        ),
        (
            // Above 2^63 - 1: not an int64, as the document has it.
            "DELETE",
            "/v1/generators/0123".into(),
            Some(TOKEN),
            r#"{"lastUsedMs": 9223372036854775808}"#.into(),
            400,
            "lastUsedMs",
        ),
    ];
    for (method, path, token, body, status, message) in cases {
        let reply = call(&service, method, &path, token, &body);
        assert_eq!(
            reply.status, status,
            "{method} {path} {body:.80}: {reply:?}"
        );
        assert_eq!(reply.content_type, "application/json", "{reply:?}");
        assert!(
            reply.error().contains(message),
            "{method} {path}: {:?} lacks {message:?}",
            reply.error()
        );
    }
    // The range 0-1: the service holds 0, a lease takes 1, and then the range is full.
    assert_eq!(lease(&service, "first").status, 200);
    let full = lease(&service, "second");
    assert_eq!(full.status, 409, "{full:?}");
    assert!(full.error().contains("no worker number"), "{full:?}");
    // Still serving its own IDs after all that.
    assert_eq!(service.get("/v1/ids?count=3").status, 200);
}

#[test]
fn without_a_token_file_the_api_is_off_and_a_bad_token_file_is_refused() {
    let dir = new_lease_dir("api-off");
    let service = Service::start(&dir, &[]);
    let reply = lease(&service, "a");
    assert_eq!(reply.status, 404, "{reply:?}");
    assert!(
        reply.error().contains("--lease-api-token-file"),
        "{reply:?}"
    );
    drop(service);
    let empty = temp_dir("token-empty").join("token");
    std::fs::write(&empty, "  \n").unwrap();
    for (file, message) in [
        (empty.clone(), "empty"),
        (empty.with_file_name("missing"), "No such file"),
    ] {
        let (status, _, stderr) = common::idgen(&[
            "serve",
            "--lease-dir",
            dir.to_str().unwrap(),
            "--lease-api-token-file",
            file.to_str().unwrap(),
        ]);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
    }
}

#[test]
fn a_node_client_issues_on_a_leased_number_stops_at_its_terms_and_never_collides() {
    // The service holds worker 0 and leases worker 1 to a Node.js client that makes its
    // own IDs. The service is then SIGKILLed: the client's renewals fail, it keeps the terms
    // it has and stops at validUntilMs. A second service on the same range takes a number
    // once its mark passes. No ID of the three is shared.
    let dir = new_lease_dir("api-node");
    let token = token_file("node");
    let flags = [
        "--workers",
        "0-1",
        "--lease-ttl",
        "1s",
        "--outage-horizon",
        "2s",
    ];
    let first = with_api(&dir, &token, &flags);
    assert_eq!(first.worker, 0);
    let ids_file = temp_dir("node-ids").join("ids");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/lease_client.mjs");
    let client = Command::new("node")
        .args([
            script,
            &format!("http://{}", first.address),
            token.to_str().unwrap(),
            "30000",
            ids_file.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("node (Node.js 18 or later) is needed for the lease client test");
    // Killed if the test fails before it ends on its own.
    let mut client = KillOnDrop(Some(client));
    // The service's IDs, `count=500` at a time, until `done`.
    let collect = |service: &Service, what: &str, done: &mut dyn FnMut(usize) -> bool| {
        let mut ids = Vec::new();
        let deadline = Instant::now() + common::PATIENCE;
        for requests in 0.. {
            if done(requests) {
                break;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            let reply = service.get("/v1/ids?count=500");
            assert_eq!(reply.status, 200, "{reply:?}");
            ids.extend(reply.ids());
        }
        ids
    };
    // Until the client has renewed: the service has answered its second renewal, which the
    // client asks for only once it has counted the first.
    let mut service_ids = collect(&first, "two renewals by the client", &mut |_| {
        renewals_answered(&first) >= 2
    });
    common::signal(first.child.id(), "KILL");
    let killed_at = unix_ms();
    drop(first);
    let second = Service::start(&dir, &flags);
    // Until the client has stopped, and at least 10 requests.
    service_ids.extend(collect(&second, "the client to stop", &mut |requests| {
        requests >= 10 && client.0.as_mut().unwrap().try_wait().unwrap().is_some()
    }));

    let output = client.0.take().unwrap().wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    println!(
        "node client: {summary}; second service took worker {}",
        second.worker
    );
    assert_eq!(summary["worker"], 1);
    assert_eq!(summary["stoppedBy"], "validUntil", "{summary}");
    assert!(summary["renewals"].as_u64().unwrap() >= 1, "{summary}");
    let valid_until = summary["validUntilMs"].as_u64().unwrap();
    assert!(valid_until <= killed_at + 2_001, "{summary}");
    let node_ids: Vec<u64> = std::fs::read_to_string(&ids_file)
        .unwrap()
        .lines()
        .map(|line| line.parse().unwrap())
        .collect();
    assert_eq!(node_ids.len() as u64, summary["count"].as_u64().unwrap());
    assert!(node_ids.len() > 10_000, "{summary}");
    let layout = idgen::Layout::DEFAULT;
    for &id in &node_ids {
        let parts = layout.decode(idgen::Id::try_from(id).unwrap());
        assert_eq!((parts.datacenter, parts.worker), (0, 1));
        assert!(parts.unix_ms < valid_until, "an ID at or past validUntilMs");
        assert!(parts.unix_ms > summary["resumeAfterMs"].as_u64().unwrap());
    }
    assert!(
        node_ids.windows(2).all(|w| w[0] < w[1]),
        "node IDs out of order"
    );
    let seen: HashSet<u64> = service_ids.iter().copied().collect();
    assert_eq!(seen.len(), service_ids.len(), "the services repeated an ID");
    let shared = node_ids.iter().filter(|id| seen.contains(id)).count();
    println!(
        "{} IDs from the services, {} from the node client, {shared} shared",
        service_ids.len(),
        node_ids.len()
    );
    assert_eq!(shared, 0);
}

/// The lease API's renewals `service` has answered.
fn renewals_answered(service: &Service) -> u64 {
    let series = "idgen_http_request_duration_seconds_count{endpoint=\"/v1/generators/{leaseId}/renew\",method=\"POST\"} ";
    service
        .get("/metrics")
        .body
        .lines()
        .find_map(|line| line.strip_prefix(series))
        .map_or(0, |count| count.parse().unwrap())
}

#[test]
fn the_fleet_view_lists_every_number_with_its_holder_mark_and_anomalies() {
    use idgen::lease::{FileStore, LeaseStore, WorkerRange};
    let dir = new_lease_dir("fleet");
    let lease_dir = dir.to_str().unwrap();
    let service = with_api(&dir, &token_file("fleet"), &["--workers", "0-1"]);
    assert_eq!(service.worker, 0);
    assert_eq!(lease(&service, "billing-7f9c").json()["worker"], 1);
    // 2: handed out, then its record deleted; 3: its record overwritten with garbage;
    // 4: released with a mark a day ahead; 5: never held.
    for worker in ["2-2", "3-3"] {
        let (status, _, stderr) =
            common::idgen(&["next", "--lease-dir", lease_dir, "--workers", worker]);
        assert!(status.success(), "{stderr}");
    }
    std::fs::remove_file(dir.join("dc0-worker2.lease")).unwrap();
    std::fs::write(dir.join("dc0-worker3.lease"), "garbage\n").unwrap();
    let day_ahead = unix_ms() + 86_400_000;
    let store = FileStore::open(&dir).unwrap();
    let mut claim = store
        .acquire(&WorkerRange::parse(0, "4-4").unwrap())
        .unwrap();
    claim.release(day_ahead).unwrap();

    let (status, stdout, stderr) = common::idgen(&[
        "leases",
        "--lease-dir",
        lease_dir,
        "--workers",
        "0-5",
        "--json",
    ]);
    assert!(status.success(), "{stderr}");
    let rows: Value = serde_json::from_str(&stdout).unwrap();
    let row = |worker: usize| &rows[worker];
    let states: Vec<&str> = (0..6).map(|w| row(w)["state"].as_str().unwrap()).collect();
    assert_eq!(
        states,
        ["held", "held", "missing", "corrupt", "free", "free"],
        "{rows:#}"
    );
    assert!(
        row(0)["holder"]
            .as_str()
            .unwrap()
            .starts_with("idgen serve, pid "),
        "{rows:#}"
    );
    assert_eq!(row(1)["holder"], "billing-7f9c");
    for w in [0, 1] {
        let left = row(w)["validForMs"].as_i64().unwrap();
        assert!(left > 0 && left <= 3_000, "{rows:#}");
        assert_eq!(row(w)["anomalies"], serde_json::json!([]));
    }
    assert!(
        row(2)["anomalies"][0].as_str().unwrap().contains("missing"),
        "{rows:#}"
    );
    assert!(
        row(3)["anomalies"][0]
            .as_str()
            .unwrap()
            .contains("not an idgen lease record")
    );
    assert_eq!(row(4)["markMs"], day_ahead);
    assert!(
        row(4)["anomalies"][0].as_str().unwrap().contains("ahead"),
        "{rows:#}"
    );
    assert_eq!(row(5)["markMs"], Value::Null);
    // The text form says the same, a line per number and a count.
    let (status, text, _) =
        common::idgen(&["leases", "--lease-dir", lease_dir, "--workers", "0-5"]);
    assert!(status.success());
    assert!(text.contains("holder \"billing-7f9c\""), "{text}");
    assert!(
        text.contains("6 numbers: 2 free, 2 held, 1 corrupt, 1 missing"),
        "{text}"
    );
    // Listing a directory that is not there creates nothing.
    let none = temp_dir("fleet-none").join("leases");
    let (status, _, stderr) = common::idgen(&["leases", "--lease-dir", none.to_str().unwrap()]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no lease directory"), "{stderr}");
    assert!(!none.exists());
}

/// A child process killed when dropped (unless taken out first).
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_token_file_that_is_not_a_regular_private_file_is_refused_or_warned_about_never_quoted() {
    use std::os::unix::fs::PermissionsExt;
    let dir = new_lease_dir("api-token-file");
    let files = temp_dir("token-kinds");
    // A FIFO: opening it would wait for a writer for ever; refused before it is opened.
    let fifo = files.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // A directory, an oversized file (whose content must not be quoted), a symlink to a
    // FIFO.
    let directory = files.join("directory");
    std::fs::create_dir(&directory).unwrap();
    let oversized = files.join("oversized");
    std::fs::write(&oversized, "s3cr3t-".repeat(1_000)).unwrap();
    let link = files.join("link-to-fifo");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for (file, message) in [
        (&fifo, "not a regular file"),
        (&directory, "not a regular file"),
        (&link, "not a regular file"),
        (&oversized, "larger than 4096 bytes"),
    ] {
        let (status, stdout, stderr) = common::idgen(&[
            "serve",
            "--lease-dir",
            dir.to_str().unwrap(),
            "--lease-api-token-file",
            file.to_str().unwrap(),
        ]);
        assert_eq!(status.code(), Some(2), "{file:?}: {stderr}");
        assert!(stderr.contains(message), "{file:?}: {stderr}");
        assert!(!format!("{stdout}{stderr}").contains("s3cr3t"), "{stderr}");
    }
    // A regular file its group may read: served, with a warning naming the mode, and the
    // token itself never in the log. A symlink to a private file is followed (a mounted
    // secret is one), without a warning.
    let token = files.join("token");
    std::fs::write(&token, "group-readable-token\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o640)).unwrap();
    let service = Service::start(&dir, &["--lease-api-token-file", token.to_str().unwrap()]);
    let log = service.wait_for_log("chmod 600");
    assert!(log.contains("mode 0640"), "{log}");
    assert!(!log.contains("group-readable-token"), "{log}");
    drop(service);
    let private = files.join("private");
    std::fs::write(&private, "private-token\n").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mounted = files.join("mounted");
    std::os::unix::fs::symlink(&private, &mounted).unwrap();
    let service = Service::start(&dir, &["--lease-api-token-file", mounted.to_str().unwrap()]);
    let reply = call(
        &service,
        "POST",
        "/v1/generators/lease",
        Some("private-token"),
        r#"{"holder": "a"}"#,
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let (_, log) = service.terminate_with_log();
    assert!(!log.contains("chmod"), "{log}");
    assert!(!log.contains("private-token"), "{log}");
}
