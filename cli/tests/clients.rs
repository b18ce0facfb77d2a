//! The client packages (`clients/node`, `clients/python`) against a real `idgen serve`, each
//! through a test process of its own (`test/issuer.mjs`, `test/issuer.py`) that speaks one
//! protocol: many client processes of both languages and the service issuing at once; a
//! non-default layout read back by `idgen decode`; and, for each language, a number given
//! back on SIGTERM, clients whose wall clocks are seconds apart handing one number on, the
//! service SIGKILLed under a client, renewals answered with 503s, a lease ended under a
//! client (410), and a client paused past its lease.

mod common;
#[path = "faults/proxy.rs"]
#[allow(dead_code)] // its blackhole is the fault harness's
mod proxy;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{PROCESS_PATIENCE, Service, idgen, new_lease_dir, temp_dir, wait_until};
use proxy::Proxy;
use serde_json::Value;

const TOKEN: &str = "clients-test-token";

#[derive(Clone, Copy, Debug)]
enum Language {
    Node,
    Python,
}

impl Language {
    fn command(self) -> Command {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../clients");
        let mut command = match self {
            Language::Node => Command::new("node"),
            Language::Python => Command::new("python3"),
        };
        command.arg(match self {
            Language::Node => format!("{root}/node/test/issuer.mjs"),
            Language::Python => format!("{root}/python/test/issuer.py"),
        });
        command
    }
}

fn token_file(name: &str) -> PathBuf {
    let path = temp_dir(&format!("clients-token-{name}")).join("token");
    std::fs::write(&path, TOKEN).unwrap();
    path
}

/// A service whose lease API has the numbers of `workers` but the service's own.
fn service_with_lease_api(name: &str, workers: &str, extra: &[&str]) -> (Service, PathBuf) {
    let token = token_file(name);
    let lease_dir = new_lease_dir(&format!("clients-{name}"));
    let mut flags = vec![
        "--workers",
        workers,
        "--lease-api-token-file",
        token.to_str().unwrap(),
    ];
    flags.extend(extra);
    (Service::start(&lease_dir, &flags), token)
}

/// An issuer process, killed if the test ends first.
struct Issuer {
    child: Child,
    lines: mpsc::Receiver<String>,
    out: PathBuf,
    /// The lines read so far, for a failure's message.
    seen: Vec<String>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Issuer {
    /// `plan` on the service at `url`, the process's wall clock moved by `skew` (as
    /// libfaketime reads it, such as `+3s`) if any; `name` is unique among the tests.
    fn start(
        language: Language,
        name: &str,
        url: &str,
        token: &Path,
        plan: &str,
        skew: Option<&str>,
    ) -> Issuer {
        let out = temp_dir(&format!("clients-ids-{name}")).join("ids");
        let mut command = language.command();
        command
            .args([url, token.to_str().unwrap(), out.to_str().unwrap(), plan])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        if let Some(skew) = skew {
            command
                .env("LD_PRELOAD", common::libfaketime())
                .env("FAKETIME", skew)
                .env("DONT_FAKE_MONOTONIC", "1");
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|error| panic!("{language:?} is needed for the client tests: {error}"));
        let (sender, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Issuer {
            child,
            lines,
            out,
            seen: Vec::new(),
        }
    }

    /// The next JSON line, waited for at most `PROCESS_PATIENCE`.
    fn line(&mut self) -> Value {
        let line = match self.lines.recv_timeout(PROCESS_PATIENCE) {
            Ok(line) => line,
            Err(error) => {
                let status = self.child.try_wait();
                panic!(
                    "no line from the issuer ({error}; {status:?}) after {:?}",
                    self.seen
                )
            }
        };
        self.seen.push(line.clone());
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not a JSON line: {line:?}"))
    }

    /// The next line that is a `key` line (`leased`, `ended`, `renewed`), skipping the
    /// `renewed` lines before it.
    fn next(&mut self, key: &str) -> Value {
        loop {
            let line = self.line();
            if let Some(value) = line.get(key) {
                return value.clone();
            }
            assert!(line.get("renewed").is_some(), "wanted {key}, got {line}");
        }
    }

    /// Waits (bounded) for the process to end, successfully.
    fn wait(&mut self) {
        let deadline = Instant::now() + PROCESS_PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "issuer: {status}; it said {:?}",
                    self.seen
                );
                return;
            }
            assert!(Instant::now() < deadline, "the issuer did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded) until the issuer has written IDs.
    fn wait_for_ids(&self) {
        wait_until("the issuer's first IDs", PROCESS_PATIENCE, || {
            std::fs::metadata(&self.out).is_ok_and(|meta| meta.len() >= 8)
        });
    }

    fn ids(&self) -> Vec<u64> {
        std::fs::read(&self.out)
            .unwrap()
            .chunks_exact(8)
            .map(|bytes| u64::from_le_bytes(bytes.try_into().unwrap()))
            .collect()
    }
}

/// Checks that `ids`, issued under `terms`, increase, carry its node (datacenter and
/// worker) and are dated after its `resumeAfterMs` and before `valid_until_ms`; answers
/// their dates.
fn check_term(terms: &Value, ids: &[u64], valid_until_ms: u64) -> Vec<u64> {
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "a client's IDs decrease"
    );
    let layout = &terms["layout"];
    let bits = |name: &str| layout[name].as_u64().unwrap();
    let (worker_bits, sequence_bits) = (bits("workerBits"), bits("sequenceBits"));
    let time_shift = bits("datacenterBits") + worker_bits + sequence_bits;
    let epoch = unix_ms_of(layout["epoch"].as_str().unwrap());
    let datacenter_bits = bits("datacenterBits");
    let leased_node = (
        terms["datacenter"].as_u64().unwrap(),
        terms["worker"].as_u64().unwrap(),
    );
    let resume_after = terms["resumeAfterMs"].as_u64().unwrap();
    ids.iter()
        .map(|&id| {
            let date = (id >> time_shift) + epoch;
            let worker = (id >> sequence_bits) & ((1 << worker_bits) - 1);
            let datacenter = (id >> (sequence_bits + worker_bits)) & ((1 << datacenter_bits) - 1);
            assert_eq!((datacenter, worker), leased_node, "{id}");
            assert!(
                resume_after < date && date < valid_until_ms,
                "{id} dated {date}, outside ({resume_after}, {valid_until_ms})"
            );
            date
        })
        .collect()
}

fn ended_mark(ended: &Value) -> u64 {
    ended["validUntilMs"].as_u64().unwrap()
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.mmm]Z` (years 1970 to 2099) into Unix ms.
fn unix_ms_of(text: &str) -> u64 {
    let number = |range: std::ops::Range<usize>| text[range].parse::<u64>().unwrap();
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let days_before_month = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let leap_days = (1970..year).filter(|y| y % 4 == 0).count() as u64;
    let leap_this = u64::from(year % 4 == 0 && month > 2);
    let days =
        (year - 1970) * 365 + leap_days + days_before_month[month as usize - 1] + leap_this + day
            - 1;
    let millis = if text.as_bytes().get(19) == Some(&b'.') {
        number(20..23)
    } else {
        0
    };
    ((days * 24 + number(11..13)) * 60 + number(14..16)) * 60_000 + number(17..19) * 1_000 + millis
}

fn url(service: &Service) -> String {
    format!("http://{}", service.address)
}

#[test]
fn client_processes_of_both_languages_and_the_service_never_issue_an_id_twice() {
    let (service, token) = service_with_lease_api("many", "0-7", &[]);
    let plans = [
        (Language::Node, "3750000"),
        (Language::Node, "3750000"),
        (Language::Python, "1250000"),
        (Language::Python, "1250000"),
    ];
    let mut issuers: Vec<Issuer> = plans
        .iter()
        .enumerate()
        .map(|(i, &(language, plan))| {
            Issuer::start(
                language,
                &format!("many-{i}"),
                &url(&service),
                &token,
                plan,
                None,
            )
        })
        .collect();
    let mut terms = Vec::new();
    for issuer in &mut issuers {
        terms.push(issuer.next("leased"));
    }
    let mut workers: Vec<u64> = terms
        .iter()
        .map(|t| t["worker"].as_u64().unwrap())
        .collect();
    workers.push(service.worker);
    workers.sort_unstable();
    workers.dedup();
    assert_eq!(workers.len(), 5, "a number held twice: {terms:?}");
    // The service issues beside them until they are done.
    let mut all = Vec::new();
    let deadline = Instant::now() + PROCESS_PATIENCE * 4;
    while issuers
        .iter_mut()
        .any(|issuer| issuer.child.try_wait().unwrap().is_none())
    {
        assert!(Instant::now() < deadline, "the issuers did not end");
        all.extend(service.get("/v1/ids?count=1000").ids());
    }
    let served = all.len();
    for ((issuer, terms), (_, plan)) in issuers.iter_mut().zip(&terms).zip(plans) {
        issuer.wait();
        let ended = issuer.next("ended");
        let ids = issuer.ids();
        assert_eq!(ids.len().to_string(), plan);
        assert_eq!(ended["count"].as_u64(), Some(ids.len() as u64));
        check_term(terms, &ids, ended_mark(&ended));
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

fn another_layout_and_epoch_read_back_by_idgen_decode(language: Language, name: &str) {
    let layout = [
        "--time-bits=40",
        "--datacenter-bits=3",
        "--worker-bits=7",
        "--sequence-bits=13",
        "--epoch=2020-01-01T00:00:00Z",
    ];
    let mut flags = vec!["--datacenter", "5"];
    flags.extend(layout);
    let (service, token) = service_with_lease_api(name, "0-127", &flags);
    let before = common::unix_ms();
    let mut issuer = Issuer::start(language, name, &url(&service), &token, "20000", None);
    let terms = issuer.next("leased");
    let ended = issuer.next("ended");
    issuer.wait();
    let after = common::unix_ms();
    let ids = issuer.ids();
    assert_eq!(ids.len(), 20_000);
    check_term(&terms, &ids, ended_mark(&ended));
    let sample: Vec<String> = ids.iter().step_by(200).map(u64::to_string).collect();
    let mut args = vec!["decode", "--json"];
    args.extend(sample.iter().map(String::as_str));
    args.extend(layout);
    let (status, stdout, stderr) = idgen(&args);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), sample.len());
    for line in stdout.lines() {
        let decoded: Value = serde_json::from_str(line).unwrap();
        assert_eq!(decoded["datacenter"], 5, "{line}");
        assert_eq!(decoded["worker"], terms["worker"], "{line}");
        let ms = unix_ms_of(decoded["createdAt"].as_str().unwrap());
        assert!(
            before <= ms && ms <= after,
            "{line} outside [{before}, {after}]"
        );
    }
}

fn sigterm_gives_the_number_back_within_a_second(language: Language, name: &str) {
    // The service holds number 0: the lease API has only number 1.
    let (service, token) = service_with_lease_api(name, "0-1", &[]);
    let mut issuer = Issuer::start(language, name, &url(&service), &token, "until-signal", None);
    assert_eq!(issuer.next("leased")["worker"], 1);
    issuer.wait_for_ids();
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", bearer.as_str()),
    ];
    let lease = || {
        service.request(
            "POST",
            "/v1/generators/lease",
            &headers,
            br#"{"holder": "second"}"#,
        )
    };
    let refused = lease();
    assert_eq!(refused.status, 409, "the number is held: {}", refused.body);
    common::signal(issuer.child.id(), "TERM");
    let signalled = Instant::now();
    let status = issuer.child.wait().unwrap();
    assert!(
        !status.success(),
        "ended by the signal, as it would have been: {status}"
    );
    let reply = lease();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["worker"], 1);
    assert!(
        signalled.elapsed() < Duration::from_secs(1),
        "{:?}",
        signalled.elapsed()
    );
}

/// Clients in turn on the one number of the lease API, their wall clocks 3 s ahead, 3 s
/// ahead, right, and 3 s behind: each waits out its predecessor's IDs rather than dating
/// below them, and the second waits out its predecessor's term on the monotonic clock,
/// though its own wall clock has already passed it.
fn clients_with_skewed_clocks_hand_a_number_on(language: Language, name: &str) {
    // Marks 10 s ahead: a client 3 s ahead dates its IDs up to 7 s past its renewal.
    let (service, token) = service_with_lease_api(name, "0-1", &["--outage-horizon", "10s"]);
    let mut last_date = 0;
    let turns = [Some("+3s"), Some("+3s"), None, Some("-3s")];
    for (turn, skew) in turns.into_iter().enumerate() {
        let name = format!("{name}-{turn}");
        let mut issuer = Issuer::start(language, &name, &url(&service), &token, "200000", skew);
        let terms = issuer.next("leased");
        let ended = issuer.next("ended");
        issuer.wait();
        let ids = issuer.ids();
        assert_eq!(ids.len(), 200_000);
        let dates = check_term(&terms, &ids, ended_mark(&ended));
        assert!(
            dates[0] > last_date,
            "turn {turn} ({skew:?}) dated {} after its predecessor's {last_date}",
            dates[0]
        );
        if turn > 0 {
            let waits = &ended["waits"];
            let waited =
                waits["not-yet"].as_u64().unwrap() + waits["clock-behind"].as_u64().unwrap();
            assert!(waited > 0, "turn {turn} ({skew:?}) never waited: {ended}");
        }
        if turn == 1 {
            // Its predecessor's term ended 3 s after the lease on the service's clock: it
            // issued no sooner, when its own clock read 3 s later than that.
            let resume_after = terms["resumeAfterMs"].as_u64().unwrap();
            assert!(
                dates[0] > resume_after + 2_000,
                "it issued at {} on its clock, the term ending at {resume_after}",
                dates[0]
            );
        }
        last_date = *dates.last().unwrap();
    }
}

/// The service SIGKILLed under two clients whose wall clocks are 3 s ahead and 3 s behind:
/// each issues on until its deadline on the monotonic clock or its wall clock reaching its
/// mark, whichever is first, not past it; clients of the restarted service take the numbers
/// on above their IDs.
fn service_killed_under_skewed_clients(language: Language, name: &str) {
    let token = token_file(name);
    let lease_dir = new_lease_dir(&format!("clients-{name}"));
    let flags = [
        "--workers",
        "0-2",
        "--lease-api-token-file",
        token.to_str().unwrap(),
        // Marks 8 s ahead: the client 3 s ahead has 5 s to date IDs in.
        "--outage-horizon",
        "8s",
    ];
    let mut service = Service::start(&lease_dir, &flags);
    let skews: [(i64, &str); 2] = [(3_000, "+3s"), (-3_000, "-3s")];
    let mut clients: Vec<(Issuer, Value)> = skews
        .iter()
        .map(|&(_, skew)| {
            let name = format!("{name}{skew}");
            let mut issuer = Issuer::start(
                language,
                &name,
                &url(&service),
                &token,
                "until-stopped",
                Some(skew),
            );
            let terms = issuer.next("leased");
            (issuer, terms)
        })
        .collect();
    for (issuer, _) in &clients {
        issuer.wait_for_ids();
    }
    service.child.kill().unwrap();
    let killed_at = common::unix_ms();
    let mut lasts = Vec::new();
    for ((issuer, terms), (skew_ms, skew)) in clients.iter_mut().zip(skews) {
        let ended = issuer.next("ended");
        let ended_at = common::unix_ms();
        issuer.wait();
        assert_eq!(ended["stoppedBy"], "expired", "{skew}: {ended}");
        let mark = ended_mark(&ended);
        let dates = check_term(terms, &issuer.ids(), mark);
        let last = *dates.last().unwrap();
        let last_real = last.saturating_add_signed(-skew_ms);
        assert!(
            last_real > killed_at + 500,
            "{skew}: it stopped with the service: its last ID at {last_real}, the kill at {killed_at}"
        );
        // The client 3 s behind stops at its deadline, 3 s before its wall clock would
        // reach the mark; the one ahead at the mark, 3 s before the deadline.
        let deadline = if skew_ms < 0 { mark } else { mark - 3_000 };
        assert!(
            ended_at < deadline + 1_500,
            "{skew}: it ended at {ended_at}, past its deadline {deadline}"
        );
        assert!(
            ended_at - last_real < 1_000,
            "{skew}: its last ID came {} ms before it ended",
            ended_at - last_real
        );
        lasts.push((terms["worker"].as_u64().unwrap(), last));
    }
    drop(service);
    let service = Service::start(&lease_dir, &flags);
    // Each number's next holder: the restarted service itself, or one of two clients that
    // hold the lease API's two numbers at once.
    let mut checked = 0;
    if let Some((_, last)) = lasts.iter().find(|(worker, _)| *worker == service.worker) {
        let layout = service.get("/v1/layout").json();
        let time_shift = ["datacenterBits", "workerBits", "sequenceBits"]
            .iter()
            .map(|name| layout[name].as_u64().unwrap())
            .sum::<u64>();
        let first = service.get("/v1/ids?count=1").ids()[0];
        let date = (first >> time_shift) + unix_ms_of(layout["epoch"].as_str().unwrap());
        assert!(date > *last, "the service's {date} <= {last}");
        checked += 1;
    }
    let mut successors: Vec<(Issuer, Value)> = (0..2)
        .map(|turn| {
            let name = format!("{name}-next-{turn}");
            let mut next = Issuer::start(
                language,
                &name,
                &url(&service),
                &token,
                "until-signal",
                None,
            );
            let terms = next.next("leased");
            (next, terms)
        })
        .collect();
    for (next, next_terms) in &mut successors {
        next.wait_for_ids();
        common::signal(next.child.id(), "TERM");
        let _ = next.child.wait().unwrap();
        let next_dates = check_term(next_terms, &next.ids(), u64::MAX);
        if let Some((_, last)) = lasts
            .iter()
            .find(|(worker, _)| *worker == next_terms["worker"])
        {
            assert!(next_dates[0] > *last, "{} <= {last}", next_dates[0]);
            checked += 1;
        }
    }
    assert_eq!(checked, 2, "a number had no next holder: {lasts:?}");
}

/// Renewals answered with 503s (a proxy in front of the service): the client keeps its
/// terms and renews once they pass; when they never pass, it stops at its deadline, and
/// the next holder's IDs are above its own.
fn renewals_answered_with_503(language: Language, name: &str) {
    let (service, token) = service_with_lease_api(name, "0-1", &["--lease-ttl", "6s"]);
    let proxy = Proxy::start(service.address.port());
    let mut first = Issuer::start(language, name, &proxy.url(), &token, "until-stopped", None);
    let terms = first.next("leased");
    first.wait_for_ids();
    proxy.answer_503();
    // One renewal refused, then the service again: it renews, still issuing.
    let failed = loop {
        let renewed = first.next("renewed");
        if renewed["failedRenewals"].as_u64().unwrap() > 0 {
            break renewed;
        }
    };
    proxy.restore();
    loop {
        let renewed = first.next("renewed");
        if renewed["renewals"].as_u64() > failed["renewals"].as_u64() {
            break;
        }
    }
    assert!(
        first.child.try_wait().unwrap().is_none(),
        "{:?}",
        first.seen
    );
    // Refused for good: it issues until its deadline and stops.
    proxy.answer_503();
    let answered = proxy.answered_503();
    let ended = first.next("ended");
    first.wait();
    assert_eq!(ended["stoppedBy"], "expired", "{ended}");
    assert!(proxy.answered_503() > answered, "no renewal was refused");
    let mark = ended_mark(&ended);
    let dates = check_term(&terms, &first.ids(), mark);
    let last = *dates.last().unwrap();
    assert!(
        mark - last < 1_000,
        "it stopped {} ms before its deadline",
        mark - last
    );
    next_holder_issues_above(language, &format!("{name}-next"), &service, &token, last);
}

/// A lease ended under a client (released by someone else): its next renewal gets a 410
/// and it stops at once; the next holder's IDs are above its own.
fn lease_ended_under_a_client(language: Language, name: &str) {
    let (service, token) = service_with_lease_api(name, "0-1", &[]);
    let mut first = Issuer::start(
        language,
        name,
        &url(&service),
        &token,
        "until-stopped",
        None,
    );
    let terms = first.next("leased");
    first.wait_for_ids();
    let bearer = format!("Bearer {TOKEN}");
    let path = format!("/v1/generators/{}", terms["leaseId"].as_str().unwrap());
    let released = service.request("DELETE", &path, &[("Authorization", &bearer)], b"");
    assert_eq!(released.status, 204, "{}", released.body);
    let released_at = Instant::now();
    let ended = first.next("ended");
    // At its next renewal (every second), not at the end of its term (3 s on).
    let renew_every = Duration::from_millis(terms["renewEveryMs"].as_u64().unwrap());
    assert!(
        released_at.elapsed() < renew_every * 2,
        "it stopped {:?} after the release",
        released_at.elapsed()
    );
    first.wait();
    assert_eq!(ended["stoppedBy"], "lost", "{ended}");
    let dates = check_term(&terms, &first.ids(), ended_mark(&ended));
    next_holder_issues_above(
        language,
        &format!("{name}-next"),
        &service,
        &token,
        *dates.last().unwrap(),
    );
}

/// A client that leases number 1 next (waiting for it) and issues 100,000 IDs, all dated
/// after `last`, the previous holder's last ID's date.
fn next_holder_issues_above(
    language: Language,
    name: &str,
    service: &Service,
    token: &Path,
    last: u64,
) {
    let mut next = Issuer::start(language, name, &url(service), token, "100000", None);
    let next_terms = next.next("leased");
    assert_eq!(next_terms["worker"], 1);
    let next_ended = next.next("ended");
    next.wait();
    let next_dates = check_term(&next_terms, &next.ids(), ended_mark(&next_ended));
    assert!(next_dates[0] > last, "{} <= {last}", next_dates[0]);
}

/// A client SIGSTOPped past its lease: another takes the number; resumed, the first issues
/// nothing on its old lease, and issues again only once it holds the number again.
fn client_paused_past_its_lease(language: Language, name: &str) {
    let (service, token) = service_with_lease_api(name, "0-1", &[]);
    let plan = "until-stopped+100000";
    let mut paused = Issuer::start(language, name, &url(&service), &token, plan, None);
    let terms = paused.next("leased");
    paused.wait_for_ids();
    common::signal(paused.child.id(), "STOP");
    let next_name = format!("{name}-next");
    let mut next = Issuer::start(language, &next_name, &url(&service), &token, "200000", None);
    let next_terms = next.next("leased");
    assert_eq!(next_terms["worker"], 1);
    let resumed_at = common::unix_ms();
    common::signal(paused.child.id(), "CONT");
    let ended = paused.next("ended");
    assert!(
        ["expired", "lost"].contains(&ended["stoppedBy"].as_str().unwrap()),
        "{ended}"
    );
    let next_ended = next.next("ended");
    next.wait();
    let again = paused.next("leased");
    let again_ended = paused.next("ended");
    paused.wait();
    let ids = paused.ids();
    let before = ended["count"].as_u64().unwrap() as usize;
    assert_eq!(ids.len(), before + 100_000);
    let dates = check_term(&terms, &ids[..before], ended_mark(&ended));
    assert!(
        *dates.last().unwrap() < resumed_at,
        "an ID dated {} after the resume at {resumed_at}",
        dates.last().unwrap()
    );
    let next_dates = check_term(&next_terms, &next.ids(), ended_mark(&next_ended));
    assert!(next_dates[0] > *dates.last().unwrap());
    let again_dates = check_term(&again, &ids[before..], ended_mark(&again_ended));
    assert!(again_dates[0] > *next_dates.last().unwrap());
}

/// Each test above, once per language (its name says which in the test's temp dirs).
macro_rules! for_each_language {
    ($($test:ident),* $(,)?) => {
        mod node {
            $(#[test]
            fn $test() {
                super::$test(super::Language::Node, concat!("node-", stringify!($test)));
            })*
        }

        mod python {
            $(#[test]
            fn $test() {
                super::$test(super::Language::Python, concat!("python-", stringify!($test)));
            })*
        }
    };
}

for_each_language!(
    another_layout_and_epoch_read_back_by_idgen_decode,
    sigterm_gives_the_number_back_within_a_second,
    clients_with_skewed_clocks_hand_a_number_on,
    service_killed_under_skewed_clients,
    renewals_answered_with_503,
    lease_ended_under_a_client,
    client_paused_past_its_lease,
);
