//! Operating the service: the labels `idgen_worker_info` carries for the alert rules
//! (`ops/prometheus/idgen.rules.yml`), and the rules loaded into a real Prometheus that
//! scrapes two real services and fires the duplicate-claim alert when both hold one
//! number. (`promtool test rules` and `systemd-analyze verify` run in the test command.)

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{PATIENCE, Service, new_lease_dir, temp_dir, wait_until};

/// The samples of `name` in `service`'s `/metrics`: each one's labels and value.
fn samples(service: &Service, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let text = service.get("/metrics").body;
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (name, value) = pair.split_once("=\"").unwrap();
                    (name.to_string(), value.trim_end_matches('"').to_string())
                })
                .collect();
            Some((labels, value.parse().unwrap()))
        })
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

#[test]
fn every_number_held_is_reported_with_its_id_space_and_store() {
    let dir = new_lease_dir("ops-labels");
    let token = dir.with_file_name("token");
    std::fs::write(&token, "t0k3n\n").unwrap();
    let service = Service::start(
        &dir,
        &[
            "--workers",
            "0-3",
            "--datacenter",
            "2",
            "--id-space",
            "staging-eu",
            "--lease-api-token-file",
            token.to_str().unwrap(),
        ],
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let store = format!(
        "file:{}:{}",
        host.trim(),
        std::fs::canonicalize(&dir).unwrap().display()
    );
    let own = labels(&[
        ("space", "staging-eu"),
        ("layout", "41.5.5.12@1704067200000"),
        ("store", &store),
        ("holder", "service"),
        ("datacenter", "2"),
        ("worker", &service.worker.to_string()),
    ]);
    assert_eq!(
        samples(&service, "idgen_worker_info"),
        vec![(own.clone(), 1.0)]
    );
    // A number leased through the lease API joins it, and leaves with its lease.
    let leased = service.request(
        "POST",
        "/v1/generators/lease",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer t0k3n"),
        ],
        br#"{"holder": "a client"}"#,
    );
    assert_eq!(leased.status, 200, "{}", leased.body);
    let terms = leased.json();
    let mut theirs = own.clone();
    theirs.insert("holder".into(), "lease_api".into());
    theirs.insert("worker".into(), terms["worker"].to_string());
    let mut reported = samples(&service, "idgen_worker_info");
    reported.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![(own.clone(), 1.0), (theirs, 1.0)];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(reported, expected);
    let lease_id = terms["leaseId"].as_str().unwrap();
    let released = service.request(
        "DELETE",
        &format!("/v1/generators/{lease_id}"),
        &[("Authorization", "Bearer t0k3n")],
        b"",
    );
    assert_eq!(released.status, 204, "{}", released.body);
    assert_eq!(samples(&service, "idgen_worker_info"), vec![(own, 1.0)]);
}

/// The lease API's request with the token of these tests.
fn lease_api(service: &Service, method: &str, path: &str, body: &str) -> common::Reply {
    service.request(
        method,
        path,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer t0k3n"),
        ],
        body.as_bytes(),
    )
}

#[test]
fn a_lease_api_number_is_reported_only_once_its_previous_holders_mark_has_passed() {
    let dir = new_lease_dir("ops-resume");
    let token = dir.with_file_name("token");
    std::fs::write(&token, "t0k3n\n").unwrap();
    // Two numbers: the service's own, and one for the lease API.
    let service = Service::start(
        &dir,
        &[
            "--workers",
            "0-1",
            "--lease-ttl",
            "10s",
            "--outage-horizon",
            "10s",
            "--lease-api-token-file",
            token.to_str().unwrap(),
        ],
    );
    let api_numbers = |service: &Service| {
        samples(service, "idgen_worker_info")
            .into_iter()
            .filter(|(labels, _)| labels["holder"] == "lease_api")
            .map(|(labels, _)| labels["worker"].clone())
            .collect::<Vec<_>>()
    };
    // The first client releases without saying when it last issued: its mark, written
    // ahead, stands, and the next holder of the number waits for it.
    let first = lease_api(
        &service,
        "POST",
        "/v1/generators/lease",
        r#"{"holder": "first"}"#,
    );
    assert_eq!(first.status, 200, "{}", first.body);
    let first = first.json();
    let released = lease_api(
        &service,
        "DELETE",
        &format!("/v1/generators/{}", first["leaseId"].as_str().unwrap()),
        "",
    );
    assert_eq!(released.status, 204, "{}", released.body);
    let second = lease_api(
        &service,
        "POST",
        "/v1/generators/lease",
        r#"{"holder": "second"}"#,
    );
    assert_eq!(second.status, 200, "{}", second.body);
    let second = second.json();
    assert_eq!(second["worker"], first["worker"]);
    let resume_after = second["resumeAfterMs"].as_u64().unwrap();
    let reported_before = api_numbers(&service);
    let sampled_at = common::unix_ms();
    assert!(
        sampled_at < resume_after,
        "the sample came after the mark ({sampled_at} >= {resume_after}): nothing was checked"
    );
    assert_eq!(
        reported_before,
        Vec::<String>::new(),
        "reported before the previous mark"
    );
    // Once the mark has passed, the number is issued on, and reported (the client renews
    // meanwhile, as a client does, every second).
    let worker = second["worker"].to_string();
    let renew = format!(
        "/v1/generators/{}/renew",
        second["leaseId"].as_str().unwrap()
    );
    let mut renewed = std::time::Instant::now();
    wait_until("the number reported after the mark", PATIENCE, || {
        if renewed.elapsed() >= Duration::from_secs(1) {
            let reply = lease_api(&service, "POST", &renew, "");
            assert_eq!(reply.status, 200, "{}", reply.body);
            renewed = std::time::Instant::now();
        }
        api_numbers(&service) == [worker.clone()]
    });
    assert!(common::unix_ms() > resume_after);
}

#[test]
fn an_id_space_name_is_checked() {
    for bad in ["", "prod eu", "prod/eu", &"x".repeat(65), "naïve"] {
        let dir = new_lease_dir("ops-space");
        let (status, _, stderr) = common::idgen(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--lease-dir",
            dir.to_str().unwrap(),
            "--id-space",
            bad,
        ]);
        assert_eq!(status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(
            stderr.contains("is not an ID space name"),
            "{bad:?}: {stderr}"
        );
    }
}

/// A Prometheus server on loopback with its own data directory; killed on drop.
struct Prometheus {
    child: Child,
    address: String,
}

impl Prometheus {
    fn start(dir: &Path, config: &str) -> Prometheus {
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus (Debian's prometheus package) is needed");
        let prometheus = Prometheus { child, address };
        wait_until("Prometheus to be ready", PATIENCE, || {
            prometheus
                .try_get("/-/ready")
                .is_some_and(|(status, _)| status == 200)
        });
        prometheus
    }

    /// `GET path` over HTTP/1.0 (so the answer is never chunked): status and body, or
    /// `None` while nothing listens.
    fn try_get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(&self.address).ok()?;
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.address
        )
        .ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        let (head, body) = answer.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some((status, body.to_string()))
    }

    fn api(&self, path: &str) -> serde_json::Value {
        let (status, body) = self.try_get(path).expect("Prometheus answers");
        assert_eq!(status, 200, "{path}: {body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["status"], "success", "{body}");
        answer["data"].clone()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn prometheus_loads_the_rules_and_alerts_on_two_services_holding_one_number() {
    // Two services meant to share a store, each pointed at one of its own: both take
    // worker 0 of datacenter 0 in the same ID space.
    let first = Service::start(&new_lease_dir("ops-prom-a"), &["--workers", "0-0"]);
    let second = Service::start(&new_lease_dir("ops-prom-b"), &["--workers", "0-0"]);
    assert_eq!((first.worker, second.worker), (0, 0));
    let rules = std::fs::canonicalize("../ops/prometheus/idgen.rules.yml").unwrap();
    let dir = temp_dir("ops-prometheus");
    let prometheus = Prometheus::start(
        &dir,
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: idgen\n    static_configs:\n      \
             - targets: ['{}', '{}']\n",
            rules.display(),
            first.address,
            second.address
        ),
    );
    // Every rule of the file is loaded, and evaluates.
    let groups = prometheus.api("/api/v1/rules");
    let group = &groups["groups"][0];
    assert_eq!(group["name"], "idgen", "{groups}");
    let loaded: Vec<&str> = group["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["name"].as_str().unwrap())
        .collect();
    let in_file = std::fs::read_to_string(&rules).unwrap();
    assert_eq!(
        loaded.len(),
        in_file.matches("- alert: ").count(),
        "{loaded:?}"
    );
    wait_until("every rule to evaluate cleanly", PATIENCE, || {
        let groups = prometheus.api("/api/v1/rules");
        groups["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|rule| rule["health"] == "ok")
    });
    // Pending for the rule's 30 s, then firing, naming the number and the space.
    wait_until(
        "the duplicate-claim alert to fire",
        Duration::from_secs(120),
        || {
            let alerts = prometheus.api("/api/v1/alerts");
            alerts["alerts"].as_array().unwrap().iter().any(|alert| {
                alert["labels"]["alertname"] == "IdgenDuplicateWorker"
                    && alert["state"] == "firing"
                    && alert["labels"]["worker"] == "0"
                    && alert["labels"]["datacenter"] == "0"
                    && alert["labels"]["space"] == "default"
            })
        },
    );
    // The two series it counted differ in their store, which the alert leaves out.
    let series = prometheus.api("/api/v1/query?query=idgen_worker_info");
    let stores: std::collections::BTreeSet<&str> = series["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sample| sample["metric"]["store"].as_str().unwrap())
        .collect();
    assert_eq!(stores.len(), 2, "{series}");
    drop(prometheus);
    std::fs::remove_dir_all(&dir).ok();
}

/// The environment `ops/systemd/idgen.service` gives the service, `%S` (the state
/// directory's parent) standing for `state`.
fn unit_environment(state: &Path) -> Vec<(String, String)> {
    let unit = std::fs::read_to_string("../ops/systemd/idgen.service").unwrap();
    unit.lines()
        .filter_map(|line| line.strip_prefix("Environment="))
        .flat_map(|assignments| assignments.split_whitespace())
        .map(|assignment| {
            let (name, value) = assignment.split_once('=').unwrap();
            (
                name.to_string(),
                value.replace("%S", state.to_str().unwrap()),
            )
        })
        .collect()
}

#[test]
fn the_service_units_environment_keeps_its_state_in_the_state_directory_with_every_store() {
    let state = temp_dir("ops-unit-state");
    let environment = unit_environment(&state);
    assert!(!environment.is_empty());
    // On the embedded default: its lease and block directories under the state directory.
    let mut command = common::idgen_command();
    command
        .envs(environment.iter().map(|(name, value)| (name, value)))
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let service = Service::start_in(&mut command);
    assert_eq!(service.get("/v1/ids?count=1").ids().len(), 1);
    assert!(state.join("idgen/leases").is_dir());
    assert!(state.join("idgen/blocks").is_dir());
    drop(service);
    // With a fleet's stores, as the environment file's examples set them: no flag of the
    // unit's conflicts with theirs (a conflict exits 2 before anything is tried). These
    // stores do not answer: the service exits 1 saying so.
    let unreachable = "postgresql://idgen@127.0.0.1:1/idgen";
    for store in [
        ("IDGEN_LEASE_POSTGRES", unreachable),
        ("IDGEN_POSTGRES", unreachable),
    ] {
        let mut command = common::idgen_command();
        command
            .envs(environment.iter().map(|(name, value)| (name, value)))
            .env(store.0, store.1)
            .args(["serve", "--listen", "127.0.0.1:0"]);
        let (status, _, stderr) = common::run(&mut command, "idgen serve");
        let stderr = String::from_utf8_lossy(&stderr);
        assert!(
            !stderr.contains("cannot be used with"),
            "{store:?}: {stderr}"
        );
        assert_ne!(status.code(), Some(2), "{store:?}: {stderr}");
    }
}
