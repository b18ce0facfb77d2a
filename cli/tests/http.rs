//! The HTTP service, driven over loopback: every endpoint, every kind of bad input, many
//! concurrent clients, two services sharing a lease directory, graceful shutdown, and the
//! JSON contract checked by a real JavaScript client (Node.js).

mod common;

use std::collections::HashSet;
use std::process::Command;
use std::thread;

use common::{Service, idgen, new_lease_dir, temp_dir};

#[test]
fn ids_come_as_increasing_decimal_strings_from_get_and_post() {
    let dir = new_lease_dir("ids");
    let service = Service::start(&dir, &[]);
    let one = service.get("/v1/ids?count=1");
    assert_eq!(one.status, 200);
    assert!(one.content_type.starts_with("application/json"));
    assert_eq!(one.ids().len(), 1);
    for path in [
        "/v1/ids?count=500",
        "/v1/ids?n=500",
        "/v1/ids?&count=500&",
        "/v1/ids?c%6Funt=5%300",
    ] {
        let ids = service.get(path).ids();
        assert_eq!(ids.len(), 500, "{path}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }
    let posted = service.post_json("/v1/ids", r#"{"count": 10000}"#).ids();
    assert_eq!(posted.len(), 10_000);
    assert!(posted.windows(2).all(|w| w[0] < w[1]));
    assert!(posted[0] > one.ids()[0]);
    // Content-Type with parameters is still JSON.
    let reply = service.request(
        "POST",
        "/v1/ids",
        &[("Content-Type", "application/json; charset=utf-8")],
        br#"{"count": 2}"#,
    );
    assert_eq!(reply.ids().len(), 2);
}

#[test]
fn uuidv7s_and_ulids_come_from_get_and_post_and_decode_to_their_kind() {
    let dir = new_lease_dir("kinds");
    let service = Service::start(&dir, &[]);
    for (kind, len) in [("uuidv7", 36), ("ulid", 26)] {
        let got = service.get(&format!("/v1/ids?count=300&kind={kind}"));
        assert_eq!(got.status, 200, "{}", got.body);
        let posted = service.post_json(
            "/v1/ids",
            &format!(r#"{{"count": 10000, "kind": "{kind}"}}"#),
        );
        assert_eq!(posted.status, 200, "{}", posted.body);
        let text = |reply: &common::Reply| -> Vec<String> {
            reply.json()["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|id| id.as_str().unwrap().to_string())
                .collect()
        };
        let mut all = text(&got);
        all.extend(text(&posted));
        assert_eq!(all.len(), 10_300);
        assert!(all.iter().all(|id| id.len() == len), "{kind}");
        assert!(
            all.windows(2).all(|w| w[0] < w[1]),
            "{kind}: text increases"
        );
        let decoded = service.get(&format!("/v1/ids/{}/decode", all[0])).json();
        assert_eq!(decoded["kind"], kind);
        assert_eq!(decoded["id"], all[0].as_str());
        assert!(decoded["createdAt"].as_str().unwrap().ends_with('Z'));
    }
    // The default is still Snowflake, and so is asking for it by name.
    let named = service.post_json("/v1/ids", r#"{"count": 2, "kind": "snowflake"}"#);
    assert_eq!(named.ids().len(), 2);
    let decoded = service
        .get(&format!("/v1/ids/{}/decode", named.ids()[0]))
        .json();
    assert_eq!(decoded["kind"], "snowflake");
    // Percent-encoding is decoded: `k%69nd=uuid%76` is `kind=uuidv` + `7`.
    let decoded = service.get("/v1/ids?count=3&k%69nd=uuid%767").json();
    assert!(decoded["ids"][0].as_str().unwrap().len() == 36, "{decoded}");
    // Anything else is a 400 with the names that would do, never another kind than asked.
    for (path, body) in [
        ("/v1/ids?count=1&Kind=ulid", None),
        ("/v1/ids?count=1&type=ulid", None),
        ("/v1/ids?kind=ulid", Some(r#"{"count": 1}"#)),
        ("/v1/ids", Some(r#"{"count": 1, "type": "uuidv7"}"#)),
        ("/v1/ids", Some(r#"{"count": 1, "Kind": "uuidv7"}"#)),
        ("/v1/ids?count=1&kind=uuid", None),
        ("/v1/ids?count=1&kind=UUIDV7", None),
        ("/v1/ids?count=1&kind=", None),
        ("/v1/ids?count=1&kind=ulid&kind=ulid", None),
        ("/v1/ids", Some(r#"{"count": 1, "kind": "ulid4"}"#)),
        ("/v1/ids", Some(r#"{"count": 1, "kind": 7}"#)),
        ("/v1/ids", Some(r#"{"count": 1, "kind": null}"#)),
        ("/v1/ids", Some(r#"{"count": 0, "kind": "ulid"}"#)),
        ("/v1/ids", Some(r#"{"count": 10001, "kind": "uuidv7"}"#)),
    ] {
        let reply = match body {
            None => service.get(path),
            Some(body) => service.post_json(path, body),
        };
        assert_eq!(reply.status, 400, "{path} {body:?}: {}", reply.body);
        assert!(!reply.error().is_empty());
    }
    assert!(
        service
            .get("/v1/ids?count=1&kind=uuid")
            .error()
            .contains(r#""snowflake", "uuidv7" or "ulid""#)
    );
    for bad in [
        "017f22e2-79b0-4cc3-98c4-dc0c0c07398f",
        "80000000000000000000000000",
        "0123",
    ] {
        let reply = service.get(&format!("/v1/ids/{bad}/decode"));
        assert_eq!(reply.status, 400, "{bad}: {}", reply.body);
    }
    assert_eq!(service.get("/healthz").status, 200, "still serving");
    // Counted by kind: 10,300 of each 128-bit kind, 2 Snowflake IDs.
    let metrics = service.get("/metrics").body;
    for line in [
        "idgen_ids_issued_by_kind_total{kind=\"uuidv7\"} 10303\n",
        "idgen_ids_issued_by_kind_total{kind=\"ulid\"} 10300\n",
        "idgen_ids_issued_by_kind_total{kind=\"snowflake\"} 2\n",
        "idgen_ids_issued_total 20605\n",
    ] {
        assert!(metrics.contains(line), "{line}{metrics}");
    }
}

#[test]
fn decode_layout_healthz_and_metrics_answer() {
    let dir = new_lease_dir("endpoints");
    let service = Service::start(&dir, &["--datacenter", "3", "--workers", "17-20"]);
    assert_eq!(service.worker, 17);
    let id = service.get("/v1/ids?count=1").ids()[0];
    for form in [id.to_string(), base32(id)] {
        let decoded = service.get(&format!("/v1/ids/{form}/decode"));
        assert_eq!(decoded.status, 200, "{}", decoded.body);
        let json = decoded.json();
        assert_eq!(json["id"], id.to_string());
        assert_eq!(json["datacenter"], 3);
        assert_eq!(json["worker"], 17);
        assert_eq!(json["sequence"], id & 0xfff);
        let created = json["createdAt"].as_str().unwrap();
        assert_eq!(created.len(), "2026-10-11T12:35:21.659Z".len(), "{created}");
        assert!(created.ends_with('Z') && created.starts_with("20"));
    }
    let layout = service.get("/v1/layout").json();
    assert_eq!(layout["timeBits"], 41);
    assert_eq!(layout["sequenceBits"], 12);
    assert_eq!(layout["idsPerSecondPerNode"], 4_096_000);
    assert_eq!(layout["lastInstant"], "2093-09-06T15:47:35.551Z");
    let health = service.get("/healthz");
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["lease"], "Valid");
    let metrics = service.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        metrics.content_type
    );
    assert!(metrics.body.ends_with("# EOF\n"), "{}", metrics.body);
    for line in [
        "# TYPE idgen_ids_issued counter\n",
        "# TYPE idgen_lease_valid gauge\n",
        "# TYPE idgen_http_request_duration_seconds histogram\n",
        // The latency of each request before this one, by the route's pattern (the two
        // decoded IDs share one series) and method.
        "idgen_http_request_duration_seconds_count{endpoint=\"/v1/ids\",method=\"GET\"} 1\n",
        "idgen_http_request_duration_seconds_count{endpoint=\"/v1/ids/{id}/decode\",method=\"GET\"} 2\n",
        "idgen_http_request_duration_seconds_count{endpoint=\"/healthz\",method=\"GET\"} 1\n",
        "idgen_http_request_duration_seconds_bucket{le=\"+Inf\",endpoint=\"/v1/layout\",method=\"GET\"} 1\n",
        "idgen_ids_issued_total 1\n",
        "idgen_http_requests_total{status=\"200\"} 5\n",
        "idgen_overflow_waits_total ",
        "idgen_refusals_total{reason=\"clock_behind\"} 0\n",
        "idgen_refusals_total{reason=\"lease\"} 0\n",
        "idgen_refusals_total{reason=\"exhausted\"} 0\n",
        "idgen_lease_renewals_total ",
        "idgen_lease_renewal_failures_total 0\n",
        "idgen_lease_valid 1\n",
        "idgen_worker{datacenter=\"3\"} 17\n",
    ] {
        assert!(
            metrics.body.contains(line),
            "{line:?} missing from\n{}",
            metrics.body
        );
    }
}

fn base32(id: u64) -> String {
    idgen::Id::try_from(id).unwrap().to_base32().to_string()
}

#[test]
fn every_bad_input_gets_a_4xx_with_a_reason_and_the_service_lives_on() {
    let dir = new_lease_dir("bad");
    let service = Service::start(&dir, &["--max-batch", "1000"]);
    let cases: Vec<(&str, common::Reply, u16, &str)> = vec![
        (
            "GET without count",
            service.get("/v1/ids"),
            400,
            "count is missing",
        ),
        (
            "GET count=0",
            service.get("/v1/ids?count=0"),
            400,
            "at least 1",
        ),
        (
            "GET count=-3",
            service.get("/v1/ids?count=-3"),
            400,
            "at least 1; got -3",
        ),
        (
            "GET count=abc",
            service.get("/v1/ids?count=abc"),
            400,
            "whole number",
        ),
        (
            "GET count=1.5",
            service.get("/v1/ids?count=1.5"),
            400,
            "whole number",
        ),
        (
            "GET count=",
            service.get("/v1/ids?count="),
            400,
            "whole number",
        ),
        (
            "GET count twice",
            service.get("/v1/ids?count=1&n=2"),
            400,
            "once",
        ),
        (
            "GET above max",
            service.get("/v1/ids?count=1001"),
            400,
            "above the maximum of 1000",
        ),
        (
            "GET huge",
            service.get("/v1/ids?count=99999999999999999999999"),
            400,
            "above the maximum",
        ),
        (
            "POST no count",
            service.post_json("/v1/ids", "{}"),
            400,
            "count is missing",
        ),
        (
            "POST zero",
            service.post_json("/v1/ids", r#"{"count": 0}"#),
            400,
            "at least 1",
        ),
        (
            "POST negative",
            service.post_json("/v1/ids", r#"{"count": -5}"#),
            400,
            "at least 1; got -5",
        ),
        (
            "POST string",
            service.post_json("/v1/ids", r#"{"count": "5"}"#),
            400,
            "must be a number",
        ),
        (
            "POST null",
            service.post_json("/v1/ids", r#"{"count": null}"#),
            400,
            "must be a number",
        ),
        (
            "POST fraction",
            service.post_json("/v1/ids", r#"{"count": 2.5}"#),
            400,
            "whole number",
        ),
        (
            "POST above max",
            service.post_json("/v1/ids", r#"{"count": 1001}"#),
            400,
            "above the maximum",
        ),
        (
            "POST 1e30",
            service.post_json("/v1/ids", r#"{"count": 1e30}"#),
            400,
            "above the maximum",
        ),
        (
            "POST array",
            service.post_json("/v1/ids", "[1]"),
            400,
            "JSON object",
        ),
        (
            "POST malformed",
            service.post_json("/v1/ids", r#"{"count": 5"#),
            400,
            "malformed JSON",
        ),
        (
            "POST empty",
            service.post_json("/v1/ids", ""),
            400,
            "malformed JSON",
        ),
        (
            "POST not UTF-8",
            service.request(
                "POST",
                "/v1/ids",
                &[("Content-Type", "application/json")],
                b"\xff\xfe",
            ),
            400,
            "malformed JSON",
        ),
        (
            "POST text/plain",
            service.request(
                "POST",
                "/v1/ids",
                &[("Content-Type", "text/plain")],
                br#"{"count": 1}"#,
            ),
            415,
            "application/json",
        ),
        (
            "POST no type",
            service.request("POST", "/v1/ids", &[], br#"{"count": 1}"#),
            415,
            "application/json",
        ),
        (
            "POST 1 MB",
            service.post_json(
                "/v1/ids",
                &format!(r#"{{"count": 1, "pad": "{}"}}"#, "x".repeat(1 << 20)),
            ),
            413,
            "larger than",
        ),
        (
            "decode leading zero",
            service.get("/v1/ids/0123/decode"),
            400,
            "invalid ID",
        ),
        (
            "decode 2^63",
            service.get("/v1/ids/9223372036854775808/decode"),
            400,
            "invalid ID",
        ),
        (
            "decode negative",
            service.get("/v1/ids/-1/decode"),
            400,
            "invalid ID",
        ),
        (
            "decode garbage",
            service.get("/v1/ids/hello/decode"),
            400,
            "invalid ID",
        ),
        (
            "decode bad base32",
            service.get("/v1/ids/UUUUUUUUUUUUU/decode"),
            400,
            "invalid ID",
        ),
        (
            "decode percent junk",
            service.get("/v1/ids/%FF%FE/decode"),
            400,
            "",
        ),
        (
            "unknown path",
            service.get("/v2/ids"),
            404,
            "no such endpoint",
        ),
        (
            "wrong method",
            service.request("DELETE", "/v1/ids", &[], b""),
            405,
            "not allowed",
        ),
    ];
    for (name, reply, status, message) in cases {
        assert_eq!(reply.status, status, "{name}: {}", reply.body);
        assert!(
            reply.error().contains(message),
            "{name}: {:?}",
            reply.error()
        );
    }
    // Still serving, and it counted the refusals by status.
    assert_eq!(service.get("/v1/ids?count=3").ids().len(), 3);
    let metrics = service.get("/metrics").body;
    assert!(
        metrics.contains("idgen_http_requests_total{status=\"400\"} 27\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("idgen_http_requests_total{status=\"415\"} 2\n"),
        "{metrics}"
    );
}

#[test]
fn many_concurrent_clients_never_see_a_duplicate() {
    let dir = new_lease_dir("concurrent");
    let service = Service::start(&dir, &[]);
    let clients = 16;
    let per_client: Vec<Vec<u64>> = thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|i| {
                let service = &service;
                s.spawn(move || {
                    let mut ids = Vec::new();
                    for round in 0..100 {
                        let reply = if (i + round) % 2 == 0 {
                            service.get("/v1/ids?count=250")
                        } else {
                            service.post_json("/v1/ids", r#"{"count": 250}"#)
                        };
                        ids.extend(reply.ids());
                    }
                    ids
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = HashSet::new();
    for ids in &per_client {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "a client saw IDs go down"
        );
        for id in ids {
            assert!(all.insert(*id), "duplicate {id}");
        }
    }
    assert_eq!(all.len(), 16 * 100 * 250);
}

#[test]
fn two_services_on_one_lease_dir_get_different_workers_and_never_overlap() {
    let dir = new_lease_dir("two");
    let first = Service::start(&dir, &["--workers", "0-1"]);
    let second = Service::start(&dir, &["--workers", "0-1"]);
    assert_eq!((first.worker, second.worker), (0, 1));
    // A third finds the range full and says so.
    let (status, _, stderr) = idgen(&[
        "next",
        "--lease-dir",
        dir.to_str().unwrap(),
        "--workers",
        "0-1",
    ]);
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("no free worker number"), "{stderr}");
    let mut all = HashSet::new();
    for service in [&first, &second] {
        for _ in 0..20 {
            for id in service.get("/v1/ids?count=1000").ids() {
                assert!(all.insert(id), "duplicate {id}");
            }
        }
    }
    assert_eq!(all.len(), 40_000);
}

#[test]
fn sigterm_finishes_and_releases_the_worker_number() {
    let dir = new_lease_dir("shutdown");
    let service = Service::start(&dir, &["--workers", "5-5"]);
    assert_eq!(service.get("/v1/ids?count=10").ids().len(), 10);
    let status = service.terminate();
    assert!(status.success(), "{status}");
    // Released, not left to expire: the next process takes worker 5 at once.
    let (status, stdout, stderr) = idgen(&[
        "next",
        "--lease-dir",
        dir.to_str().unwrap(),
        "--workers",
        "5-5",
    ]);
    assert!(status.success(), "{stderr}");
    let id: u64 = stdout.trim().parse().unwrap();
    assert_eq!((id >> 12) & 0x1f, 5);
}

#[test]
fn requests_in_flight_at_sigterm_complete_then_the_number_is_freed() {
    let dir = new_lease_dir("in-flight");
    // 8 IDs per millisecond: a batch of 8,000 needs at least a second of the clock, and four
    // of them sharing the generator about four. The grace period is far longer than that.
    let layout = ["--time-bits", "50", "--sequence-bits", "3"];
    let mut args = vec!["--workers", "5-5", "--shutdown-grace", "60"];
    args.extend(layout);
    let service = Service::start(&dir, &args);
    let requests: Vec<common::Sent> = (0..4)
        .map(|_| service.send("GET", "/v1/ids?count=8000", &[], b""))
        .collect();
    // In flight: the service has read each request (none is left in the listen queue,
    // which a shutdown closes unanswered), and none can be finished yet.
    let clients: Vec<_> = requests.iter().map(common::Sent::local_addr).collect();
    service.wait_until_read("the four requests", &clients);
    let sigterm_unix_ms = unix_ms_now();
    common::signal(service.child.id(), "TERM");
    let batches: Vec<Vec<u64>> = requests
        .into_iter()
        .map(|request| request.reply().ids())
        .collect();
    let epoch_unix_ms = 1_704_067_200_000;
    let unix_ms = |id: u64| (id >> 13) + epoch_unix_ms;
    for ids in &batches {
        assert_eq!(ids.len(), 8000);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        // Read before the signal, finished after it: in flight when it arrived.
        let (first, last) = (unix_ms(ids[0]), unix_ms(ids[7999]));
        assert!(
            sigterm_unix_ms < last,
            "batch from {first} to {last}, SIGTERM at {sigterm_unix_ms}"
        );
    }
    let status = service.wait_for_exit();
    assert!(status.success(), "{status}");
    // Released with its mark: the next holder of worker 5 takes it at once and issues
    // above every ID of the finished batches.
    let mut next = vec![
        "next",
        "--lease-dir",
        dir.to_str().unwrap(),
        "--workers",
        "5-5",
    ];
    next.extend(layout);
    let (status, stdout, stderr) = idgen(&next);
    assert!(status.success(), "{stderr}");
    let successor: u64 = stdout.trim().parse().unwrap();
    let highest = batches.iter().flatten().max().unwrap();
    assert!(successor > *highest, "{successor} after {highest}");
}

fn unix_ms_now() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_millis() as u64
}

#[test]
fn a_javascript_client_gets_ids_that_survive_json_parse_exactly() {
    let dir = new_lease_dir("node");
    let service = Service::start(&dir, &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/contract.test.mjs");
    // Bounded: node's own test timeout is unlimited by default.
    let (status, stdout, stderr) = common::run(
        Command::new("node")
            .args(["--test", script])
            .env("IDGEN_URL", format!("http://{}", service.address)),
        "node --test (Node.js 18 or later is needed for the JSON contract test)",
    );
    let report = String::from_utf8_lossy(&stdout);
    assert!(
        status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&stderr)
    );
    assert!(report.contains("# pass 4"), "{report}");
    assert!(report.contains("# fail 0"), "{report}");
}

#[test]
fn a_lost_lease_gives_503_with_the_reason_until_a_number_is_held_again() {
    let dir = temp_dir("lost");
    let leases = dir.join("leases");
    let service = Service::start(&leases, &[]);
    assert_eq!(service.get("/v1/ids?count=1").status, 200);
    // The lease directory disappears (an operator's rm -rf): the next renewal finds the
    // record gone, the number counts as lost, and no new one can be taken.
    std::fs::remove_dir_all(&leases).unwrap();
    let deadline = std::time::Instant::now() + common::PATIENCE;
    let refused = loop {
        let reply = service.get("/v1/ids?count=1");
        if reply.status == 503 {
            break reply;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never refused: {reply:?}"
        );
        thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(refused.error().contains("not valid"), "{}", refused.error());
    let health = service.get("/healthz");
    assert_eq!(health.status, 503);
    assert_eq!(health.json()["lease"], "Lost");
    // Nothing is issued, so no time is left: 0, not the distance to the Unix epoch.
    assert_eq!(health.json()["validForMs"], 0, "{}", health.body);
    let metrics = service.get("/metrics").body;
    assert!(metrics.contains("idgen_lease_valid 0\n"), "{metrics}");
    // Counted as lease trouble, not clock trouble.
    assert!(
        metric_value(&metrics, "idgen_refusals_total{reason=\"lease\"}") >= 1,
        "{metrics}"
    );
    assert!(metrics.contains("idgen_refusals_total{reason=\"clock_behind\"} 0\n"));
    assert!(metrics.contains("idgen_refusals_total{reason=\"exhausted\"} 0\n"));
    // The directory comes back empty: without its roster it is not a store the keeper may
    // trust (what it knew of earlier holders is gone), so the service stays unavailable ...
    std::fs::create_dir_all(&leases).unwrap();
    // Two more attempts at a number, both after the directory came back.
    let failures = || {
        metric_value(
            &service.get("/metrics").body,
            "idgen_lease_renewal_failures_total",
        )
    };
    let before = failures();
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while failures() < before + 2 {
        assert!(std::time::Instant::now() < deadline, "no new attempt");
        thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(service.get("/healthz").status, 503);
    assert_eq!(service.get("/v1/ids?count=1").status, 503);
    // ... until an operator initialises it; then the keeper takes a number again (after
    // waiting a TTL, since the roster written now counts every number as used before).
    let (status, stdout, stderr) =
        idgen(&["leases", "init", "--lease-dir", leases.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("initialised the lease directory"),
        "{stdout}"
    );
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while service.get("/healthz").status != 200 {
        assert!(std::time::Instant::now() < deadline, "never recovered");
        thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(service.get("/v1/ids?count=5").ids().len(), 5);
}

/// The value of one sample line of Prometheus text, by its name and labels.
fn metric_value(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} missing from\n{metrics}"))
        .parse()
        .unwrap()
}

/// Runs `idgen serve` under libfaketime, its wall clock offset by what `offset_file` says
/// (re-read at every reading), the monotonic clock left alone.
fn start_under_faketime(lease_dir: &std::path::Path, offset_file: &std::path::Path) -> Service {
    Service::start_in(
        common::idgen_command()
            .env("LD_PRELOAD", common::libfaketime())
            .env("FAKETIME_TIMESTAMP_FILE", offset_file)
            .env("FAKETIME_NO_CACHE", "1")
            .env("DONT_FAKE_MONOTONIC", "1")
            .args(["serve", "--listen", "127.0.0.1:0", "--lease-dir"])
            .arg(lease_dir),
    )
}

/// One `count=10` request: when it was sent and answered (this process's wall clock, which
/// is not faked) and the date of its newest ID, all in Unix ms.
#[derive(Debug)]
struct Sample {
    sent: i64,
    dated: i64,
    answered: i64,
}

impl Sample {
    /// How far the ID's date, less `shift`, lies outside the time of its request (0 within):
    /// the time the request took is no part of it.
    fn off_by(&self, shift: i64) -> i64 {
        let dated = self.dated - shift;
        if dated < self.sent {
            dated - self.sent
        } else {
            (dated - self.answered).max(0)
        }
    }

    /// Dated within a second of the time of its request, `shift` taken off.
    fn on_time(&self, shift: i64) -> bool {
        self.off_by(shift).abs() < 1_000
    }
}

/// Asks for IDs, a request every 5 ms or so, until `enough` says the samples so far are
/// enough (at most [`common::PATIENCE`]; `what` names the wait). With `lease_may_lapse`, a
/// 503 for a lease that is not valid (its ceiling was passed by a clock that jumped ahead,
/// until the next renewal) is skipped; any other failure fails the test.
fn sample_until(
    service: &Service,
    what: &str,
    lease_may_lapse: bool,
    mut enough: impl FnMut(&[Sample]) -> bool,
) -> Vec<Sample> {
    const EPOCH_UNIX_MS: i64 = 1_704_067_200_000;
    let deadline = std::time::Instant::now() + common::PATIENCE;
    let mut samples = Vec::new();
    while !enough(&samples) {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {samples:?}\n{}",
            service.log()
        );
        let sent = unix_ms_now() as i64;
        let reply = service.get("/v1/ids?count=10");
        let answered = unix_ms_now() as i64;
        if lease_may_lapse && reply.status == 503 {
            assert!(reply.error().contains("not valid"), "{reply:?}");
            continue;
        }
        let ids = reply.ids();
        let dated = (*ids.last().unwrap() >> 22) as i64 + EPOCH_UNIX_MS;
        samples.push(Sample {
            sent,
            dated,
            answered,
        });
        thread::sleep(std::time::Duration::from_millis(5));
    }
    samples
}

#[test]
fn a_wall_clock_spike_is_never_followed_and_a_lasting_step_is() {
    let dir = temp_dir("clock-spike");
    let offset = dir.join("offset");
    std::fs::write(&offset, "+0").unwrap();
    let service = start_under_faketime(&dir.join("leases"), &offset);
    let on_time = |samples: &[Sample]| samples.iter().all(|sample| sample.on_time(0));
    let before = sample_until(&service, "20 samples", false, |s| s.len() >= 20);
    assert!(on_time(&before), "{before:?}");
    // The wall clock a day ahead until the service has seen it (and 20 requests more),
    // then put right, long before the two seconds a step must last to be followed.
    std::fs::write(&offset, "+1d").unwrap();
    let seen = "ahead of the monotonic clock; following it only if it stays ahead";
    let mut seen_at = None;
    let during = sample_until(&service, "the service to see the spike", false, |s| {
        if seen_at.is_none() && service.log().contains(seen) {
            seen_at = Some(s.len());
        }
        seen_at.is_some_and(|at| s.len() >= at + 20)
    });
    std::fs::write(&offset, "+0").unwrap();
    let gone = "forward step went away after";
    let mut gone_at = None;
    let after = sample_until(&service, "the service to see the spike end", false, |s| {
        if gone_at.is_none() && service.log().contains(gone) {
            gone_at = Some(s.len());
        }
        gone_at.is_some_and(|at| s.len() >= at + 20)
    });
    assert!(on_time(&during), "followed the spike: {during:?}");
    assert!(on_time(&after), "dated ahead after the spike: {after:?}");
    // Never followed: the line that says it follows a step has not been written.
    let log = service.log();
    assert!(!log.contains("the wall clock stayed"), "{log}");
    // A step of 30 s that lasts (a resumed VM, a real correction) is followed once it has
    // lasted two seconds: never by an ID answered before two seconds after the step.
    let stepped = unix_ms_now() as i64;
    std::fs::write(&offset, "+30").unwrap();
    let lasting = sample_until(&service, "the step to be followed", true, |s| {
        s.last().is_some_and(|sample| sample.on_time(30_000))
    });
    let too_soon: Vec<&Sample> = lasting
        .iter()
        .filter(|sample| sample.answered < stepped + 2_000 && !sample.on_time(0))
        .collect();
    assert!(
        too_soon.is_empty(),
        "followed before it lasted (stepped at {stepped}): {too_soon:?}"
    );
    // And the window was looked at: enough answers came within it to have caught it.
    let within = lasting
        .iter()
        .filter(|sample| sample.answered < stepped + 2_000)
        .count();
    assert!(
        within >= 10,
        "only {within} answers within the 2 s: {lasting:?}"
    );
}

#[test]
fn head_issues_nothing_and_whole_numbers_with_a_fraction_part_are_counts() {
    let dir = new_lease_dir("head");
    let service = Service::start(&dir, &[]);
    let head = service.request("HEAD", "/v1/ids?count=5", &[], b"");
    assert_eq!(head.status, 405);
    assert_eq!(head.header("Allow").as_deref(), Some("GET, POST"));
    let metrics = service.get("/metrics").body;
    assert!(metrics.contains("idgen_ids_issued_total 0\n"), "{metrics}");
    assert_eq!(
        service
            .post_json("/v1/ids", r#"{"count": 5.0}"#)
            .ids()
            .len(),
        5
    );
    assert_eq!(
        service
            .post_json("/v1/ids", r#"{"count": 2e3}"#)
            .ids()
            .len(),
        2000
    );
    let fraction = service.post_json("/v1/ids", r#"{"count": 5.5}"#);
    assert_eq!(fraction.status, 400);
    assert!(
        fraction.error().contains("whole number"),
        "{}",
        fraction.error()
    );
}

#[test]
fn batches_that_wait_for_the_clock_never_hold_up_other_requests() {
    // Two IDs per millisecond: three batches of 1,000 share the clock for 1.5 s. Made on the
    // async workers (two on a 2-core machine), they would hold up every other request until
    // one of them finished; made elsewhere, other requests are answered meanwhile.
    let dir = new_lease_dir("blocking");
    let service = Service::start(&dir, &["--time-bits", "52", "--sequence-bits", "1"]);
    let requests: Vec<common::Sent> = (0..3)
        .map(|_| service.send("GET", "/v1/ids?count=1000", &[], b""))
        .collect();
    let clients: Vec<_> = requests.iter().map(common::Sent::local_addr).collect();
    let (probes_done, first_batch_done) = thread::scope(|s| {
        let batches: Vec<_> = requests
            .into_iter()
            .map(|request| {
                s.spawn(move || {
                    assert_eq!(request.reply().ids().len(), 1000);
                    std::time::Instant::now()
                })
            })
            .collect();
        // All three batches open: the service has read every request.
        service.wait_until_read("the three batch requests", &clients);
        for _ in 0..5 {
            assert_eq!(service.get("/healthz").status, 200);
        }
        let probes_done = std::time::Instant::now();
        let first_batch_done = batches
            .into_iter()
            .map(|batch| batch.join().unwrap())
            .min()
            .unwrap();
        (probes_done, first_batch_done)
    });
    // An order, not a speed: every probe was answered while all three batches were open.
    assert!(
        probes_done < first_batch_done,
        "the probes waited for a batch to finish"
    );
}

/// Opens a connection and sends the start of a request, never the end; returns once the
/// service has read it.
fn stall(service: &Service, partial: &[u8]) -> common::Sent {
    let stalled = service.send_raw(partial);
    service.wait_until_read("the start of the stalled request", &[stalled.local_addr()]);
    stalled
}

#[test]
fn a_stalled_client_cannot_hold_up_shutdown_and_a_second_signal_stops_at_once() {
    // One grace period: a client that never finishes its request headers.
    let dir = new_lease_dir("stalled");
    let service = Service::start(&dir, &["--workers", "3-3", "--shutdown-grace", "1"]);
    let _stalled = stall(&service, b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: x\r\n");
    let started = std::time::Instant::now();
    let (status, log) = service.terminate_with_log();
    assert!(status.success(), "{status}: {log}");
    println!("stopped {:?} after SIGTERM", started.elapsed());
    // The stalled request held the shutdown until the grace period ended it.
    assert!(
        log.contains("open requests did not finish within 1 s; stopping anyway"),
        "{log}"
    );
    let (status, _, stderr) = idgen(&[
        "next",
        "--lease-dir",
        dir.to_str().unwrap(),
        "--workers",
        "3-3",
    ]);
    assert!(status.success(), "released: {stderr}");

    // A second signal: no waiting for the (default, 10 s) grace period, nor for the 5 s
    // after which the stalled body would be answered 408.
    let mut service = Service::start(&dir, &["--workers", "3-3"]);
    let _stalled = stall(&service, b"POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"co");
    let started = std::time::Instant::now();
    common::signal(service.child.id(), "TERM");
    service.wait_for_log("shutting down: finishing open requests");
    // The service listens for the second signal a moment after it logged the first; one
    // that comes before is not seen, so the second is sent again until the service ends.
    common::wait_until(
        "the service to stop on a second signal",
        common::PATIENCE,
        || {
            common::signal(service.child.id(), "TERM");
            common::within(std::time::Duration::from_millis(100), || {
                service.exited().is_some()
            })
        },
    );
    let (status, log) = service.wait_for_exit_with_log();
    assert!(status.success(), "{status}: {log}");
    println!("stopped {:?} after the first SIGTERM", started.elapsed());
    assert!(log.contains("second signal; stopping now"), "{log}");
    assert!(!log.contains("did not finish within"), "{log}");
}

#[test]
fn a_body_that_never_arrives_is_answered_408() {
    let dir = new_lease_dir("slow-body");
    let service = Service::start(&dir, &[]);
    let reply = service
        .send_raw(b"POST /v1/ids HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"co")
        .reply();
    assert_eq!(reply.status, 408, "{reply:?}");
    assert!(reply.error().contains("did not arrive"), "{reply:?}");
}

#[test]
fn the_service_takes_its_settings_from_variables() {
    let dir = new_lease_dir("variables");
    let mut command = common::idgen_command();
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("IDGEN_LEASE_DIR", &dir)
        .env("IDGEN_BLOCKS_DIR", dir.with_file_name("blocks"))
        .env("IDGEN_MAX_BATCH", "5")
        .env("IDGEN_WORKERS", "3-3");
    let service = Service::start_in(&mut command);
    assert_eq!(service.worker, 3);
    assert_eq!(service.get("/v1/ids?count=5").ids().len(), 5);
    let reply = service.get("/v1/ids?count=6");
    assert_eq!(reply.status, 400);
    assert!(reply.error().contains("maximum of 5"), "{}", reply.error());
    assert!(dir.join("store.idgen").exists());
}

#[test]
fn invented_methods_add_no_metric_series() {
    let dir = new_lease_dir("methods");
    let service = Service::start(&dir, &[]);
    for i in 0..30 {
        let reply = service.request(&format!("FOO{i}"), "/v1/ids", &[], b"");
        assert_eq!(reply.status, 405);
    }
    let metrics = service.get("/metrics").body;
    assert!(!metrics.contains("FOO"), "{metrics}");
    assert!(
        metrics.contains(
            "idgen_http_request_duration_seconds_count{endpoint=\"/v1/ids\",method=\"other\"} 30\n"
        ),
        "{metrics}"
    );
}

#[test]
fn bounds_come_from_the_service_as_from_the_command_and_bad_spans_are_refused() {
    let layout = [
        "--time-bits=40",
        "--sequence-bits=13",
        "--epoch=2020-01-01T00:00:00Z",
    ];
    let dir = new_lease_dir("bounds");
    let service = Service::start(&dir, &layout);
    let issued = service.get("/v1/ids?count=5").ids();
    let now = unix_ms_now();
    let (from, to) = (now - 60_000, now + 60_000);
    for kind in ["snowflake", "uuidv7", "ulid"] {
        let served = service.get(&format!("/v1/bounds?from={from}&to={to}&kind={kind}"));
        assert_eq!(served.status, 200, "{}", served.body);
        let mut args = vec![
            "bounds".to_string(),
            from.to_string(),
            to.to_string(),
            format!("--kind={kind}"),
            "--json".to_string(),
        ];
        args.extend(layout.iter().map(|flag| flag.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, stdout, stderr) = idgen(&args);
        assert!(status.success(), "{stderr}");
        let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(served.json(), printed, "{kind}");
    }
    // The service's own IDs, made just now, lie in the bounds of the two minutes around it.
    let bounds = service
        .get(&format!("/v1/bounds?from={from}&to={to}"))
        .json();
    let bound = |name: &str| bounds[name].as_str().unwrap().parse::<u64>().unwrap();
    for id in issued {
        assert!(bound("start") <= id && id < bound("end"), "{id}: {bounds}");
    }
    // A span that holds nothing says why, and selects nothing.
    let nothing = service.get("/v1/bounds?from=5&to=5").json();
    assert_eq!(nothing["nothing"], "to is not after from");
    assert_eq!(nothing["where"], "WHERE false");
    // The default kind with times as RFC 3339.
    let by_text = service.get("/v1/bounds?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:01.5Z");
    assert_eq!(by_text.status, 200, "{}", by_text.body);
    assert_eq!(by_text.json()["to"], "2026-01-01T00:00:01.500Z");

    let refused = [
        ("from=1&to=2&kind=opaque", "opaque IDs are encrypted"),
        ("to=2", "from is required"),
        ("from=1", "to is required"),
        ("from=1&from=2&to=3", "give from once"),
        (
            "from=yesterday&to=5",
            "from: \"yesterday\" is not a UTC time",
        ),
        ("from=1&to=2&kind=uuid", "kind must be"),
        ("from=1&to=2&count=3", "unknown parameter \"count\""),
        ("from=1&to=99999999999999999999", "too large"),
    ];
    for (query, reason) in refused {
        let reply = service.get(&format!("/v1/bounds?{query}"));
        assert_eq!(reply.status, 400, "{query}: {}", reply.body);
        let error = reply.json()["error"].as_str().unwrap().to_string();
        assert!(error.contains(reason), "{query}: {error}");
    }
    // The layout's time left, as a metric.
    let left_s = (idgen::Layout::new(40, 5, 5, 13)
        .and_then(|layout| layout.with_epoch_unix_ms(1_577_836_800_000))
        .unwrap()
        .last_unix_ms()
        + 1
        - unix_ms_now())
        / 1_000;
    let metric = metric_value(&service.get("/metrics").body, "idgen_layout_seconds_left");
    assert!(
        metric <= left_s + 1 && metric + 60 >= left_s,
        "{metric} vs {left_s}"
    );
}
