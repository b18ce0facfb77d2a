//! etcd's documented disaster recovery, `etcdctl snapshot restore`, under running `idgen
//! serve` processes, on a private etcd (it is stopped and restored). The snapshot is taken
//! before the first service took its number, so the restored namespace knows nothing of
//! it: with the restore step (`idgen leases init --after-restore`) no ID is issued twice;
//! without it, the first service stops at its next renewal, and from then on no process
//! takes a number from the namespace until the step has run.

#![cfg(feature = "etcd")]

mod common;
#[path = "../../tests/common/etcd.rs"]
mod etcd;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Instant;

use common::{PATIENCE, Service, idgen, wait_until};
use etcd::EtcdServer;

/// The store flags every process of a test uses: a 2 s TTL and a 2 s horizon, so waits
/// for marks stay short.
fn store_flags(server: &EtcdServer) -> Vec<String> {
    [
        "--etcd",
        server.endpoint.as_str(),
        "--namespace",
        "/idgen-restore",
        "--lease-ttl",
        "2s",
        "--outage-horizon",
        "2s",
    ]
    .map(String::from)
    .to_vec()
}

/// The store flags and a layout of 16 worker numbers, so that `init` and the restore
/// step write 16 marks, not 1,024.
fn store_args(server: &EtcdServer) -> Vec<String> {
    let mut args = store_flags(server);
    args.extend(
        [
            "--datacenter-bits",
            "0",
            "--worker-bits",
            "4",
            "--sequence-bits",
            "18",
        ]
        .map(String::from),
    );
    args
}

fn run(args: &[String], extra: &[&str]) -> String {
    let mut all: Vec<&str> = extra.to_vec();
    all.extend(args.iter().map(String::as_str));
    let (status, stdout, stderr) = idgen(&all);
    assert!(status.success(), "idgen {all:?}: {stdout}{stderr}");
    stdout
}

fn serve(args: &[String], workers: &str) -> Service {
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["--workers", workers]);
    Service::start_with(&all)
}

/// The IDs `service` has handed out over HTTP (its `idgen_ids_issued_total`).
fn issued(service: &Service) -> u64 {
    let metrics = service.get("/metrics").body;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("idgen_ids_issued_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no idgen_ids_issued_total in\n{metrics}"))
}

fn renewal_failures(service: &Service) -> u64 {
    let metrics = service.get("/metrics").body;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("idgen_lease_renewal_failures_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no renewal failures in\n{metrics}"))
}

/// Requests `count=500` from `service` until `stop`; the IDs, and how many 503s.
fn collect(service: &Service, stop: &AtomicBool) -> (Vec<u64>, u64) {
    let (mut ids, mut refused) = (Vec::new(), 0);
    while !stop.load(Ordering::SeqCst) {
        let reply = service.get("/v1/ids?count=500");
        match reply.status {
            200 => ids.extend(reply.ids()),
            503 => refused += 1,
            _ => panic!("unexpected reply {reply:?}"),
        }
    }
    (ids, refused)
}

/// A namespace initialised, a snapshot, then the first service on worker 0 or 1.
fn before_the_restore(name: &str) -> (EtcdServer, Vec<String>, std::path::PathBuf, Service) {
    let server = EtcdServer::start(name);
    let args = store_args(&server);
    run(&args, &["leases", "init"]);
    let snapshot = server.snapshot("before-the-first-service.db");
    let first = serve(&args, "0-1");
    assert_eq!(first.get("/v1/ids?count=10").ids().len(), 10);
    (server, args, snapshot, first)
}

#[test]
fn with_the_restore_step_two_services_never_share_an_id() {
    let (mut server, args, snapshot, first) = before_the_restore("cli-restore-step");
    server.restore(&snapshot);
    let stdout = run(&args, &["leases", "init", "--after-restore"]);
    assert!(stdout.contains("after a restore"), "{stdout}");
    // The second service waits past every mark the restore step raised; the first stops
    // at its next renewal, or issues only up to a mark no successor starts before.
    let stop = AtomicBool::new(false);
    let second = std::sync::OnceLock::new();
    let ((a, _), (b, _)) = thread::scope(|scope| {
        let _stop = common::SetOnDrop(&[&stop]);
        let a = scope.spawn(|| collect(&first, &stop));
        let second: &Service = second.get_or_init(|| serve(&args, "0-1"));
        let b = scope.spawn(|| collect(second, &stop));
        // IDs handed out by the second (not only its health): the collector has some.
        wait_until("the second service's IDs", PATIENCE, || issued(second) > 0);
        // Both have had a chance at their next renewals.
        let failures = renewal_failures(&first);
        wait_until("the first service's next renewal", PATIENCE, || {
            renewal_failures(&first) > failures || first.get("/healthz").status == 200
        });
        stop.store(true, Ordering::SeqCst);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(!b.is_empty(), "the second service issued nothing");
    let first_ids: HashSet<u64> = a.iter().copied().collect();
    let shared = b.iter().filter(|id| first_ids.contains(id)).count();
    assert_eq!(shared, 0, "{shared} IDs issued by both");
    // The first service, stopped or not by the restore, issues again: on the other number
    // once its raised mark passed (the step needs running once, whatever the order).
    wait_until("the first service to issue again", PATIENCE, || {
        first.get("/healthz").status == 200
    });
}

/// The restore step with another layout's flags would raise the marks of some numbers
/// only: it is refused before anything is written.
#[test]
fn the_restore_step_with_another_layouts_flags_changes_nothing() {
    let server = EtcdServer::start("cli-restore-layout");
    let args = store_flags(&server);
    let fleet = [
        "--datacenter-bits",
        "0",
        "--worker-bits",
        "5",
        "--sequence-bits",
        "17",
    ];
    let mut init: Vec<&str> = vec!["leases", "init"];
    init.extend(fleet);
    run(&args, &init);
    let before = etcd_get(&server, "/idgen-restore/store");
    let mark = etcd_get(&server, "/idgen-restore/dc/0/mark/20");
    let mut all: Vec<&str> = vec!["leases", "init", "--after-restore"];
    all.extend(args.iter().map(String::as_str));
    let (status, _, stderr) = idgen(&all);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("serves the layout"), "{stderr}");
    assert_eq!(etcd_get(&server, "/idgen-restore/store"), before);
    assert_eq!(etcd_get(&server, "/idgen-restore/dc/0/mark/20"), mark);
}

/// The value of one key, through etcdctl.
fn etcd_get(server: &EtcdServer, key: &str) -> String {
    let output = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", server.endpoint))
        .args(["get", "--print-value-only", key])
        .output()
        .expect("etcdctl (Debian's etcd-client) is needed");
    assert!(output.status.success());
    let value = String::from_utf8(output.stdout).unwrap();
    assert!(!value.is_empty(), "{key} is missing");
    value
}

#[test]
fn without_the_restore_step_the_holder_stops_and_every_process_is_refused_until_it_runs() {
    let (mut server, args, snapshot, first) = before_the_restore("cli-restore-skipped");
    server.restore(&snapshot);
    let restored_at = Instant::now();
    // The restored namespace has no trace of the first service: a process started now
    // takes a number at once (perhaps the first's), unless the first service has already
    // found the restore, which then refuses it.
    let next = |workers: &str| {
        let mut all: Vec<&str> = vec!["next", "--workers", workers];
        all.extend(args.iter().map(String::as_str));
        idgen(&all)
    };
    let (status, stdout, stderr) = next("0-0");
    let refused = stderr.contains("went back in time");
    assert!(status.success() || refused, "{stdout}{stderr}");
    wait_until("the first service to stop", PATIENCE, || {
        first.get("/v1/ids?count=1").status == 503
    });
    println!(
        "the first service stopped within {:?} of etcd answering again (a second process \
         was refused: {refused})",
        restored_at.elapsed()
    );
    let health = first.get("/healthz").json();
    assert_eq!(health["lease"], "Lost", "{health}");
    assert_eq!(health["validForMs"], 0, "{health}");
    // Found once, refused to every process, this one included: worker 1 is free and its
    // mark long passed, yet three attempts of the first service and a new process are all
    // refused, naming the step.
    let (status, _, stderr) = next("0-1");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("idgen leases init --after-restore"),
        "{stderr}"
    );
    let failures = renewal_failures(&first);
    wait_until("three attempts at a number", PATIENCE, || {
        renewal_failures(&first) >= failures + 3
    });
    assert_eq!(first.get("/healthz").status, 503);
    assert_eq!(first.get("/v1/ids?count=1").status, 503);
    // The restore step ends it: the first service takes a number once its raised mark
    // passed, and so does a new process.
    run(&args, &["leases", "init", "--after-restore"]);
    wait_until("the first service to take a number again", PATIENCE, || {
        first.get("/healthz").status == 200
    });
    let (status, _, stderr) = next("0-1");
    assert!(status.success(), "{stderr}");
    let (_, log) = first.terminate_with_log();
    assert!(log.contains("went back in time"), "{log}");
    assert!(log.contains("idgen leases init --after-restore"), "{log}");
}

/// A service already waiting for a number when etcd is restored finds the restore itself:
/// the restored store shows the number free (its holder took it after the snapshot), but
/// that holder goes on issuing as it until its next renewal. The waiting service had seen
/// the store at a newer revision, so it refuses the store instead of taking the number.
#[test]
fn a_service_waiting_for_a_number_through_a_restore_does_not_take_the_holders_number() {
    let mut server = EtcdServer::start("cli-restore-waiting");
    let args = store_args(&server);
    run(&args, &["leases", "init"]);
    let snapshot = server.snapshot("before-the-holder.db");
    // The holder renews every 10 s (TTL 30 s): long after etcd is back, it still issues.
    let mut holder_args = args.clone();
    for flag in ["--lease-ttl", "--outage-horizon"] {
        let at = holder_args.iter().position(|arg| arg == flag).unwrap();
        holder_args[at + 1] = "30s".to_string();
    }
    let holder = serve(&holder_args, "0-0");
    assert_eq!(holder.get("/v1/ids?count=10").ids().len(), 10);
    let waiting = Service::start_listening_in(
        common::idgen_command()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(&args)
            .args(["--workers", "0-0", "--wait-for-number", "300s"]),
    );
    wait_until("the second service to wait for a number", PATIENCE, || {
        let health = waiting.get("/healthz");
        health.status == 503 && health.json()["lease"] == "WaitingForNumber"
    });
    server.restore(&snapshot);
    // It either takes the number (the defect: the holder still issues as worker 0 until
    // its next renewal, up to 10 s away) or refuses the restored store and exits.
    let deadline = Instant::now() + PATIENCE;
    let mut waiting = waiting;
    while waiting.exited().is_none() && !waiting.log().contains("lease taken") {
        assert!(
            Instant::now() < deadline,
            "the waiting service neither took a number nor stopped:\n{}",
            waiting.log()
        );
        thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        !waiting.log().contains("lease taken"),
        "the waiting service took a number of the restored store:\n{}",
        waiting.log()
    );
    let (status, log) = waiting.wait_for_exit_with_log();
    assert!(!status.success(), "{log}");
    assert!(log.contains("went back in time"), "{log}");
    assert!(log.contains("idgen leases init --after-restore"), "{log}");
    // The namespace is marked: the holder stops at its next renewal, and waits for the step.
    wait_until("the holder to stop", PATIENCE, || {
        holder.get("/v1/ids?count=1").status == 503
    });
}

#[test]
fn the_restore_step_is_refused_on_a_lease_directory_with_the_reason() {
    let dir = common::new_lease_dir("restore-dir");
    let (status, _, stderr) = idgen(&[
        "leases",
        "init",
        "--after-restore",
        "--lease-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("Restoring a store from a backup"),
        "{stderr}"
    );
}
