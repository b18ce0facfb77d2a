//! The service's start: it listens at once, and while its worker number is being taken
//! (waiting for a previous holder's mark, or for a number of a full range to come free,
//! as a replacement started right after a crash does) it answers 503s that say what it
//! waits for and how long, logs it, and stops at once on a signal.

mod common;

use common::{PATIENCE, Service, idgen_command, new_lease_dir, wait_until};

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
    let token = dir.with_file_name("token");
    std::fs::write(&token, "t0k\n").unwrap();
    let replacement = listening(
        &dir,
        &[
            "--workers",
            "0-1",
            "--wait-for-number",
            "5m",
            "--lease-api-token-file",
            token.to_str().unwrap(),
        ],
    );
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
    // Nor does the lease API lease a number before the service has its own: a client
    // retrying would take every number that comes free first.
    let leased = replacement.request(
        "POST",
        "/v1/generators/lease",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer t0k"),
        ],
        br#"{"holder": "client"}"#,
    );
    assert_eq!(leased.status, 503, "{}", leased.body);
    assert!(
        leased.error().contains("its own worker number"),
        "{}",
        leased.body
    );
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

#[test]
fn a_replacement_waits_for_its_clock_to_pass_a_mark_further_ahead_than_a_start_waits() {
    // The only number's previous holder ran 12 s ahead of this host: its mark lies further
    // ahead than a start waits for (a file store's horizon and a second, 4 s), so taking
    // the number is refused as ClockBehindMark; a replacement told to wait for a number
    // waits for this clock to pass the mark instead of exiting.
    let dir = new_lease_dir("startup-mark-ahead");
    let libfaketime = common::libfaketime();
    let (status, stdout, stderr) = common::idgen_with_env(
        &[
            "next",
            "--workers",
            "0-0",
            "--lease-dir",
            dir.to_str().unwrap(),
        ],
        &[
            ("LD_PRELOAD", libfaketime.as_path()),
            ("FAKETIME", std::path::Path::new("+12s")),
            ("DONT_FAKE_MONOTONIC", std::path::Path::new("1")),
        ],
    );
    assert!(status.success(), "{stderr}");
    let ahead: u64 = stdout.trim().parse().unwrap();
    let mut replacement = listening(&dir, &["--workers", "0-0", "--wait-for-number", "1m"]);
    replacement.wait_for_log("waiting for this clock to pass it");
    replacement.wait_until_serving();
    assert_eq!(replacement.worker, 0);
    let ids = replacement.get("/v1/ids?count=3").ids();
    assert!(ids[0] > ahead, "{ids:?} after the holder ahead's {ahead}");
}

#[test]
fn a_range_whose_numbers_are_only_unusable_is_not_waited_for() {
    // Worker 0's record is writable by every user: refused, and never coming free.
    let dir = new_lease_dir("startup-unusable");
    let (status, _, stderr) = common::idgen(&[
        "next",
        "--workers",
        "0-0",
        "--lease-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let record = dir.join("dc0-worker0.lease");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o666)).unwrap();
    // A bound of 5 minutes, far beyond this test's patience: only a refusal that does not
    // wait passes.
    let service = listening(&dir, &["--workers", "0-0", "--wait-for-number", "5m"]);
    let (status, log) = service.wait_for_exit_with_log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("no free worker number"), "{log}");
    assert!(!log.contains("waiting for one to come free"), "{log}");
}

/// A `flock` on `path` held by a process of its own, in a group of its own; the group is
/// killed on drop.
struct HeldLock(std::process::Child);

impl HeldLock {
    fn take(path: &std::path::Path) -> HeldLock {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("flock")
            .arg("--close")
            .arg(path)
            .args(["sleep", "300"])
            .process_group(0)
            .spawn()
            .expect("flock (util-linux) is needed");
        let held = HeldLock(child);
        wait_until("flock to hold the lock", PATIENCE, || {
            let tried = std::process::Command::new("flock")
                .args(["--nonblock", "--conflict-exit-code", "75"])
                .arg(path)
                .arg("true")
                .status()
                .unwrap();
            tried.code() == Some(75)
        });
        held
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .stderr(std::process::Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

#[test]
fn a_signal_stops_the_service_while_its_store_call_hangs() {
    // The store's lock held by another process (a paused one, say): taking a number hangs
    // in the store call, which no cancel reaches.
    let dir = new_lease_dir("startup-hang");
    let (status, _, stderr) = common::idgen(&["next", "--lease-dir", dir.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    let lock = HeldLock::take(&dir.join("store.idgen"));
    let service = listening(&dir, &["--shutdown-grace", "1"]);
    wait_until("the service to be taking its number", PATIENCE, || {
        service.get("/healthz").json()["lease"] == "Taking"
    });
    // SIGTERM: out within a few seconds (it waits 5 s for the store call), not when the
    // lock goes (300 s), with nothing held.
    let (status, log) = service.terminate_with_log();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("still being taken"), "{log}");
    drop(lock);
}

#[test]
fn a_closed_stdout_does_not_stop_the_service_once_its_number_is_taken() {
    use std::io::BufRead;
    // The first line read, then the pipe closed (a `| head -n 1`, a log collector that went
    // away): the line that says the number is taken goes to a closed pipe.
    let dir = new_lease_dir("startup-stdout");
    let holder = Service::start(&dir, &["--workers", "0-0"]);
    let mut child = idgen_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--lease-dir"])
        .arg(&dir)
        .arg("--blocks-dir")
        .arg(dir.with_file_name("blocks"))
        .args(["--workers", "0-0", "--wait-for-number", "5m"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    {
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        // Bounded by the test harness's own timeout only if the service never prints:
        // it prints this line before anything can wait.
        stdout.read_line(&mut first_line).unwrap();
    } // the read end closed here
    let address: std::net::SocketAddr = first_line
        .strip_prefix("idgen: listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{first_line:?}"))
        .parse()
        .unwrap();
    // The holder stops; the service takes the number and says so to the closed pipe.
    assert_eq!(holder.terminate().code(), Some(0));
    wait_until("the service to issue", PATIENCE, || {
        child.try_wait().unwrap().is_none()
            && http_get(address, "/healthz").starts_with("HTTP/1.1 200")
    });
    assert!(http_get(address, "/v1/ids?count=2").starts_with("HTTP/1.1 200"));
    common::signal(child.id(), "TERM");
    wait_until("the service to stop", PATIENCE, || {
        child.try_wait().unwrap().is_some()
    });
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// A GET on a connection of its own: the whole response as text.
fn http_get(address: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return String::new();
    };
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

#[cfg(feature = "etcd")]
mod etcd {
    use super::*;
    use common::{TWO_NUMBERS as LAYOUT, etcd_endpoints as endpoints, unix_ms};

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

/// Layout flags whose last millisecond is `left_ms` from now: 31 bits of time (24.8 days).
fn layout_ending_in(left_ms: u64) -> Vec<String> {
    let now = common::unix_ms();
    let epoch = now + left_ms - (1u64 << 31);
    [
        "--time-bits=31",
        "--sequence-bits=22",
        &format!("--epoch={epoch}"),
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn a_layout_under_a_day_from_its_end_is_refused_and_one_under_the_threshold_warned_of() {
    const DAY_MS: u64 = 86_400_000;
    // Twelve hours left: refused before anything listens or any number is taken.
    let dir = new_lease_dir("lifetime-refused");
    let flags = layout_ending_in(DAY_MS / 2);
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--lease-dir"];
    let dir_text = dir.display().to_string();
    args.push(&dir_text);
    args.extend(flags.iter().map(String::as_str));
    let (status, stdout, stderr) = common::idgen(&args);
    assert_eq!(status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("under a day left"), "{stderr}");
    assert!(!stdout.contains("listening"), "{stdout}");

    // Ten days left: it starts, warning with the default threshold (a year); with a
    // threshold of a week it says nothing.
    let flags = layout_ending_in(10 * DAY_MS);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let service = listening(&new_lease_dir("lifetime-warned"), &flags);
    let line = service.wait_for_log("under --lifetime-warning 365.0 days");
    assert!(
        line.contains("WARN") && line.contains("in 10.0 days"),
        "{line}"
    );
    let mut quiet = flags.clone();
    quiet.extend(["--lifetime-warning", "7d"]);
    let mut service_quiet = listening(&new_lease_dir("lifetime-quiet"), &quiet);
    service_quiet.wait_until_serving();
    assert!(
        !service_quiet.log().contains("--lifetime-warning"),
        "{}",
        service_quiet.log()
    );

    // `idgen layout` says when a layout ends.
    let (status, stdout, _) = common::idgen(&["layout"]);
    assert!(status.success());
    assert!(stdout.contains("ends: in 6"), "{stdout}");
    let mut past = vec![
        "layout".to_string(),
        "--time-bits=31".into(),
        "--sequence-bits=22".into(),
    ];
    past.push(format!(
        "--epoch={}",
        common::unix_ms() - (1u64 << 31) - 3 * DAY_MS
    ));
    let past: Vec<&str> = past.iter().map(String::as_str).collect();
    let (status, stdout, _) = common::idgen(&past);
    assert!(status.success());
    assert!(stdout.contains("ends: ended 3.0 days ago"), "{stdout}");
}
