//! The Node.js package (`clients/node`) against a real `idgen serve`: many client processes
//! and the service issuing at once, a non-default layout read back by `idgen decode`, and
//! a client's number given back on SIGTERM.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::{PATIENCE, Service, idgen, new_lease_dir, temp_dir};
use serde_json::Value;

const TOKEN: &str = "clients-test-token";
const ISSUER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../clients/node/test/issuer.mjs"
);

fn token_file(name: &str) -> PathBuf {
    let path = temp_dir(&format!("clients-token-{name}")).join("token");
    std::fs::write(&path, TOKEN).unwrap();
    path
}

/// An issuer process, killed if the test ends first.
struct Issuer {
    child: Child,
    lines: BufReader<ChildStdout>,
    out: PathBuf,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Issuer {
    fn start(service: &Service, token: &Path, count: &str, name: &str) -> Issuer {
        let out = temp_dir(&format!("clients-ids-{name}")).join("ids");
        let mut child = Command::new("node")
            .args([
                ISSUER,
                &format!("http://{}", service.address),
                token.to_str().unwrap(),
                count,
                out.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("node (Node.js 18 or later) is needed for the client tests");
        let lines = BufReader::new(child.stdout.take().unwrap());
        Issuer { child, lines, out }
    }

    /// The next JSON line the issuer prints.
    fn line(&mut self) -> Value {
        let mut line = String::new();
        self.lines.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not a JSON line: {line:?}"))
    }

    /// Waits (bounded) for the process to end, successfully.
    fn wait(&mut self) {
        let deadline = Instant::now() + PATIENCE * 4;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "issuer: {status}");
                return;
            }
            assert!(Instant::now() < deadline, "the issuer did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ids(&self) -> Vec<u64> {
        std::fs::read(&self.out)
            .unwrap()
            .chunks_exact(8)
            .map(|bytes| u64::from_le_bytes(bytes.try_into().unwrap()))
            .collect()
    }
}

#[test]
fn many_client_processes_and_the_service_never_issue_an_id_twice() {
    let token = token_file("many");
    let service = Service::start(
        &new_lease_dir("clients-many"),
        &[
            "--workers",
            "0-7",
            "--lease-api-token-file",
            token.to_str().unwrap(),
        ],
    );
    let mut issuers: Vec<Issuer> = (0..4)
        .map(|i| Issuer::start(&service, &token, "2600000", &format!("many-{i}")))
        .collect();
    let mut workers = HashSet::from([service.worker]);
    for issuer in &mut issuers {
        let leased = issuer.line();
        assert!(
            workers.insert(leased["leased"]["worker"].as_u64().unwrap()),
            "{leased}"
        );
    }
    // The service issues beside them until they are done.
    let mut all = Vec::new();
    let deadline = Instant::now() + PATIENCE * 4;
    while issuers
        .iter_mut()
        .any(|issuer| issuer.child.try_wait().unwrap().is_none())
    {
        assert!(Instant::now() < deadline, "the issuers did not end");
        all.extend(service.get("/v1/ids?count=1000").ids());
    }
    let served = all.len();
    for issuer in &mut issuers {
        issuer.wait();
        let ids = issuer.ids();
        assert_eq!(ids.len(), 2_600_000);
        assert!(
            ids.windows(2).all(|pair| pair[0] < pair[1]),
            "a client's IDs decrease"
        );
        all.extend(ids);
    }
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count, "{} IDs issued twice", count - all.len());
    assert!(count - served >= 10_000_000);
    println!(
        "{} IDs from 4 clients and {served} from the service, none twice",
        count - served
    );
}

#[test]
fn a_client_on_another_layout_and_epoch_makes_ids_idgen_decode_reads() {
    let token = token_file("layout");
    let layout = [
        "--time-bits=40",
        "--datacenter-bits=3",
        "--worker-bits=7",
        "--sequence-bits=13",
        "--epoch=2020-01-01T00:00:00Z",
    ];
    let mut flags = vec![
        "--datacenter",
        "5",
        "--lease-api-token-file",
        token.to_str().unwrap(),
    ];
    flags.extend(layout);
    let service = Service::start(&new_lease_dir("clients-layout"), &flags);
    let before = common::unix_ms();
    let mut issuer = Issuer::start(&service, &token, "20000", "layout");
    let terms = issuer.line()["leased"].clone();
    issuer.wait();
    let after = common::unix_ms();
    let ids = issuer.ids();
    assert_eq!(ids.len(), 20_000);
    let sample: Vec<String> = ids.iter().step_by(200).map(u64::to_string).collect();
    let mut args = vec!["decode", "--json"];
    args.extend(sample.iter().map(String::as_str));
    args.extend(layout);
    let (status, stdout, stderr) = idgen(&args);
    assert!(status.success(), "{stderr}");
    for line in stdout.lines() {
        let decoded: Value = serde_json::from_str(line).unwrap();
        assert_eq!(decoded["datacenter"], terms["datacenter"], "{line}");
        assert_eq!(decoded["datacenter"], 5);
        assert_eq!(decoded["worker"], terms["worker"], "{line}");
        let created = decoded["createdAt"].as_str().unwrap();
        let ms = unix_ms_of(created);
        assert!(
            before <= ms && ms <= after,
            "{created} outside [{before}, {after}]"
        );
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS.mmmZ` (years 1970 to 2099) into Unix ms.
fn unix_ms_of(text: &str) -> u64 {
    let number = |range: std::ops::Range<usize>| text[range].parse::<u64>().unwrap();
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let days_before_month = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let leap_days = (1969..year).filter(|y| (y + 1) % 4 == 0).count() as u64;
    let leap_this = u64::from(year % 4 == 0 && month > 2);
    let days =
        (year - 1970) * 365 + leap_days + days_before_month[month as usize - 1] + leap_this + day
            - 1;
    ((days * 24 + number(11..13)) * 60 + number(14..16)) * 60_000
        + number(17..19) * 1_000
        + number(20..23)
}

#[test]
fn sigterm_gives_a_clients_number_back_within_a_second() {
    let token = token_file("sigterm");
    // The service holds number 0: the lease API has only number 1.
    let service = Service::start(
        &new_lease_dir("clients-sigterm"),
        &[
            "--workers",
            "0-1",
            "--lease-api-token-file",
            token.to_str().unwrap(),
        ],
    );
    let mut issuer = Issuer::start(&service, &token, "until-signal", "sigterm");
    let leased = issuer.line();
    assert_eq!(leased["leased"]["worker"], 1);
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", bearer.as_str()),
    ];
    let refused = service.request(
        "POST",
        "/v1/generators/lease",
        &headers,
        br#"{"holder": "second"}"#,
    );
    assert_eq!(refused.status, 409, "the number is held: {}", refused.body);
    common::signal(issuer.child.id(), "TERM");
    let signalled = Instant::now();
    let status = issuer.child.wait().unwrap();
    assert!(
        !status.success(),
        "ended by the signal, as it would have been: {status}"
    );
    let reply = service.request(
        "POST",
        "/v1/generators/lease",
        &headers,
        br#"{"holder": "second"}"#,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["worker"], 1);
    assert!(
        signalled.elapsed() < Duration::from_secs(1),
        "{:?}",
        signalled.elapsed()
    );
}
