//! The service's log: text or JSON lines on stderr, chosen by `--log-format`, filtered by
//! `RUST_LOG`; a line for the start, the lease taken, each request (at debug), a late
//! renewal, and the stop. (The outage's lines are checked in `outage.rs`.)

mod common;

use std::time::Duration;

use common::{Service, idgen, new_lease_dir, signal};

fn start(name: &str, format: &str, rust_log: Option<&str>) -> Service {
    let dir = new_lease_dir(name);
    let mut command = common::idgen_command();
    command.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--lease-dir",
        dir.to_str().unwrap(),
        "--blocks-dir",
        dir.with_file_name("blocks").to_str().unwrap(),
        "--log-format",
        format,
    ]);
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    Service::start_in(&mut command)
}

#[test]
fn json_lines_tell_the_start_the_lease_each_request_a_late_renewal_and_the_stop() {
    let service = start("log-json", "json", Some("debug"));
    let worker = service.worker;
    assert_eq!(service.get("/v1/ids?count=3&kind=snowflake").ids().len(), 3);
    assert_eq!(service.get("/nowhere").status, 404);
    // Stopped for longer than the renewal interval (1 s with the file store's 3 s TTL) plus
    // half of it: the renewal that falls due meanwhile is late by 0.6 s at least. (The
    // sleep is the stop itself: a stopped process does nothing to wait for.)
    let late_before = service.log().matches("ms late").count();
    signal(service.child.id(), "STOP");
    std::thread::sleep(Duration::from_millis(1_600));
    signal(service.child.id(), "CONT");
    // That renewal, once the service runs again (one more than any before the stop).
    common::wait_until("the late renewal", common::PATIENCE, || {
        service.log().matches("ms late").count() > late_before
    });
    let (status, log) = service.terminate_with_log();
    assert!(status.success(), "{log}");

    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let find = |message: &str| {
        lines
            .iter()
            .find(|line| line["message"].as_str().unwrap_or("").contains(message))
            .unwrap_or_else(|| panic!("no {message:?} line in:\n{log}"))
    };
    let taken = find("lease taken");
    assert_eq!(taken["level"], "INFO");
    assert_eq!(taken["worker"], worker);
    assert!(taken["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(
        find("listening")["address"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    let requests: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|line| line["message"] == "request")
        .collect();
    assert_eq!(requests.len(), 2, "{log}");
    assert_eq!(requests[0]["level"], "DEBUG");
    assert_eq!(requests[0]["method"], "GET");
    // The path, never the query.
    assert_eq!(requests[0]["path"], "/v1/ids");
    assert_eq!(requests[0]["status"], 200);
    assert_eq!(requests[1]["status"], 404);
    // The library's own record, through the `log` facade.
    let late = find("ms late");
    assert_eq!(late["level"], "WARN");
    assert_eq!(late["log.target"], "idgen::lease::keeper");
    assert_eq!(find("stopped; worker number released")["level"], "INFO");
}

#[test]
fn text_lines_at_info_by_default_and_a_bad_filter_is_refused() {
    let service = start("log-text", "text", None);
    assert_eq!(service.get("/v1/ids?count=1").ids().len(), 1);
    let (status, log) = service.terminate_with_log();
    assert!(status.success(), "{log}");
    let taken = log
        .lines()
        .find(|line| line.contains("lease taken"))
        .unwrap();
    assert!(
        taken.contains(" INFO ") && taken.contains("worker="),
        "{taken}"
    );
    assert!(log.contains("stopped; worker number released"), "{log}");
    // Requests are at debug: not shown at the default level.
    assert!(!log.contains("idgen::serve: request"), "{log}");
    assert!(!log.contains('{'), "text lines are not JSON: {log}");

    let dir = new_lease_dir("log-bad");
    let (status, stdout, stderr) = common::idgen_with_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--lease-dir",
            dir.to_str().unwrap(),
        ],
        &[("RUST_LOG", std::path::Path::new("idgen=loud"))],
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("RUST_LOG"), "{stderr}");
    // A failure after the log is up is never silent, even with a filter that hides it.
    for filter in ["off", "hyper=debug", "info"] {
        let (status, _, stderr) = common::idgen_with_env(
            &[
                "serve",
                "--lease-dir",
                dir.to_str().unwrap(),
                "--max-batch",
                "0",
            ],
            &[("RUST_LOG", std::path::Path::new(filter))],
        );
        assert_eq!(status.code(), Some(2), "{filter}: {stderr}");
        assert!(
            stderr.contains("--max-batch must be at least 1"),
            "{filter}: {stderr}"
        );
    }
    let (status, _, stderr) = idgen(&["serve", "--log-format", "xml"]);
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr.contains("text") && stderr.contains("json"),
        "{stderr}"
    );
}
