//! The service's start: it listens at once, and while its worker number is being taken
//! (waiting for a previous holder's mark, or for a number of a full range to come free,
//! as a replacement started right after a crash does) it answers 503s that say what it
//! waits for and how long, logs it, and stops at once on a signal.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{PATIENCE, Service, idgen_command, new_lease_dir, wait_until};

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `idgen serve` on the lease directory (blocks beside it) with `extra`, waited for only
/// until it listens.
fn listening(dir: &std::path::Path, extra: &[&str]) -> Service {
    let blocks = dir.with_file_name("blocks");
    Service::start_listening_in(
        idgen_command()
            .args(["serve", "--listen", "127.0.0.1:0", "--lease-dir"])
            .arg(dir)
            .arg("--blocks-dir")
            .arg(blocks)
            .args(extra),
    )
}

#[test]
fn a_replacement_for_a_full_range_listens_and_takes_the_first_number_that_comes_free() {
    let dir = new_lease_dir("startup-full");
    let first = Service::start(&dir, &["--workers", "0-1"]);
    let second = Service::start(&dir, &["--workers", "0-1"]);
    // Both numbers held: the replacement neither exits nor goes silent.
    let replacement = listening(&dir, &["--workers", "0-1", "--wait-for-number", "5m"]);
    wait_until("the replacement to wait for a number", PATIENCE, || {
        let health = replacement.get("/healthz");
        health.status == 503 && health.json()["lease"] == "WaitingForNumber"
    });
    let health = replacement.get("/healthz").json();
    let gives_up = health["givesUpInMs"].as_u64().unwrap();
    assert!(gives_up > 0 && gives_up <= 300_000, "{health}");
    assert!(health.get("worker").is_none(), "{health}");
    let refused = replacement.get("/v1/ids?count=3");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    assert!(
        refused.error().contains("no free worker number"),
        "{}",
        refused.body
    );
    // The kinds that need no number are served meanwhile.
    let uuids = replacement.get("/v1/ids?count=3&kind=uuidv7");
    assert_eq!(uuids.status, 200, "{}", uuids.body);
    assert_eq!(uuids.json()["ids"].as_array().unwrap().len(), 3);
    replacement.wait_for_log("waiting for one to come free");
    // One holder stops: its number is free at once, and the replacement takes it.
    let freed = first.worker;
    assert_eq!(first.terminate().code(), Some(0));
    let mut replacement = replacement;
    replacement.wait_until_serving();
    assert_eq!(replacement.worker, freed);
    assert_ne!(replacement.worker, second.worker);
    assert_eq!(replacement.get("/v1/ids?count=3").ids().len(), 3);
    assert_eq!(replacement.get("/healthz").json()["lease"], "Valid");
}

#[test]
fn a_replacement_exits_once_its_bound_has_passed_with_no_number_free() {
    let dir = new_lease_dir("startup-bound");
    let holder = Service::start(&dir, &["--workers", "0-0"]);
    for bound in ["0s", "1s"] {
        let replacement = listening(&dir, &["--workers", "0-0", "--wait-for-number", bound]);
        let (status, log) = replacement.wait_for_exit_with_log();
        assert_eq!(status.code(), Some(1), "{bound}: {log}");
        assert!(log.contains("no free worker number"), "{bound}: {log}");
    }
    assert_eq!(holder.get("/healthz").json()["lease"], "Valid");
}

#[cfg(feature = "etcd")]
mod etcd {
    use super::*;

    fn endpoints() -> String {
        std::env::var("IDGEN_ETCD_ENDPOINTS").expect(
            "IDGEN_ETCD_ENDPOINTS is not set: run the tests through .ci/test, which starts etcd",
        )
    }

    /// A two-number layout: `init` writes two marks.
    const LAYOUT: [&str; 6] = [
        "--datacenter-bits",
        "0",
        "--worker-bits",
        "1",
        "--sequence-bits",
        "21",
    ];

    /// A namespace of its own, initialised as new, whose worker 0 has a mark `ahead_ms` from
    /// now (as a holder that crashed leaves it); returns the namespace and the mark.
    fn namespace_with_a_mark_ahead(test: &str, ahead_ms: u64) -> (String, u64) {
        let namespace = format!(
            "/idgen-test/startup-{test}-{}-{}",
            std::process::id(),
            unix_ms()
        );
        let mut init = vec!["leases", "init", "--new", "--etcd"];
        let url = endpoints();
        init.extend([url.as_str(), "--namespace", &namespace]);
        init.extend(LAYOUT);
        let (status, _, stderr) = common::idgen(&init);
        assert!(status.success(), "{stderr}");
        let mark = unix_ms() + ahead_ms;
        let put = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={url}"))
            .args([
                "put",
                &format!("{namespace}/dc/0/mark/0"),
                &mark.to_string(),
            ])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("etcdctl (Debian's etcd-client) is needed");
        assert!(put.success());
        (namespace, mark)
    }

    fn serve(namespace: &str) -> Service {
        let blocks = common::temp_dir(&format!("startup-blocks-{}", unix_ms())).join("blocks");
        Service::start_listening_in(
            idgen_command()
                .args(["serve", "--listen", "127.0.0.1:0", "--etcd", &endpoints()])
                .args(["--namespace", namespace, "--workers", "0-0", "--blocks-dir"])
                .arg(blocks)
                .args(LAYOUT),
        )
    }

    #[test]
    fn while_it_waits_for_a_mark_the_service_listens_says_how_long_and_logs_every_10_s() {
        let (namespace, mark) = namespace_with_a_mark_ahead("mark", 15_000);
        let mut service = serve(&namespace);
        wait_until("the service to wait for the mark", PATIENCE, || {
            service.get("/healthz").json()["lease"] == "WaitingForMark"
        });
        let health = service.get("/healthz");
        assert_eq!(health.status, 503);
        let health = health.json();
        assert_eq!(health["worker"], 0, "{health}");
        let starts_in = health["startsInMs"].as_u64().unwrap();
        assert!(starts_in > 0 && starts_in <= 15_000, "{health}");
        let refused = service.get("/v1/ids?count=1");
        assert_eq!(refused.status, 503, "{}", refused.body);
        let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=15).contains(&retry_after), "{retry_after}");
        assert!(refused.error().contains("mark"), "{}", refused.body);
        // Every 10 s, how long is left.
        let line = service.wait_for_log("ms more for its mark");
        assert!(line.contains("worker 0"), "{line}");
        // Once the mark has passed: IDs, every one dated after it.
        service.wait_until_serving();
        assert_eq!(service.worker, 0);
        let ids = service.get("/v1/ids?count=100").ids();
        let epoch_ms = 1_704_067_200_000;
        assert!(ids.iter().all(|id| (id >> 22) + epoch_ms > mark));
    }

    #[test]
    fn a_signal_while_it_waits_for_a_mark_stops_it_at_once_and_frees_the_number() {
        // A mark 2 minutes ahead (within the 3-minute start-up wait): a stop that waited for
        // it would pass every bound here.
        let (namespace, mark) = namespace_with_a_mark_ahead("signal", 120_000);
        let service = serve(&namespace);
        wait_until("the service to wait for the mark", PATIENCE, || {
            service.get("/healthz").json()["lease"] == "WaitingForMark"
        });
        let (status, log) = service.terminate_with_log();
        assert_eq!(status.code(), Some(0), "{log}");
        assert!(
            log.contains("stopped before a worker number was taken"),
            "{log}"
        );
        let mut survey = vec!["leases", "--json", "--etcd"];
        let url = endpoints();
        survey.extend([url.as_str(), "--namespace", &namespace, "--workers", "0-0"]);
        survey.extend(LAYOUT);
        let (status, stdout, stderr) = common::idgen(&survey);
        assert!(status.success(), "{stderr}");
        let numbers: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_ne!(numbers[0]["state"], "held", "{numbers}");
        // Released with the crashed holder's mark kept: no successor starts before it.
        assert!(numbers[0]["markMs"].as_u64().unwrap() >= mark, "{numbers}");
    }
}
