//! Lease records and keys deleted, replaced or re-created under a live holder (an operator
//! tidying "stale lock files", a cleanup script, `etcdctl del --prefix`): a second process
//! must never issue as the same worker number while the first can still issue, so the two
//! never share an ID. Real `idgen serve` processes, real files, a real etcd.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use common::{Service, idgen, new_lease_dir};

/// Both services answer `count=1000` requests for `for_how_long`, and after that until each
/// has answered more than 10,000 IDs (at most [`common::PATIENCE`] more); every ID either
/// issued must be issued by one only. A 503 (a service between numbers) is allowed and
/// counted; any other failure is not.
fn assert_never_share_an_id(first: &Service, second: &Service, for_how_long: Duration) {
    let collect = |service: &Service| {
        let mut ids = Vec::new();
        let mut refused = 0;
        let deadline = Instant::now() + for_how_long;
        let limit = deadline + common::PATIENCE;
        while Instant::now() < deadline || (ids.len() <= 10_000 && Instant::now() < limit) {
            let reply = service.get("/v1/ids?count=1000");
            match reply.status {
                200 => ids.extend(reply.ids()),
                503 => {
                    assert!(reply.error().contains("not valid"), "{reply:?}");
                    refused += 1;
                }
                _ => panic!("unexpected reply {reply:?}"),
            }
        }
        (ids, refused)
    };
    let ((a, a_refused), (b, b_refused)) = thread::scope(|s| {
        let a = s.spawn(|| collect(first));
        let b = s.spawn(|| collect(second));
        (a.join().unwrap(), b.join().unwrap())
    });
    let seen: HashSet<u64> = a.iter().copied().collect();
    let shared = b.iter().filter(|id| seen.contains(id)).count();
    println!(
        "{} IDs from the first ({a_refused} refusals), {} from the second ({b_refused}); {shared} shared",
        a.len(),
        b.len()
    );
    assert!(
        a.len() > 10_000 && b.len() > 10_000,
        "too few IDs to mean anything"
    );
    assert_eq!(shared, 0, "IDs issued by both services");
}

/// Tampers with `first`'s store (`tamper`), then starts a second service on it with `args`,
/// while `first` is stopped (SIGSTOP): live, its number held (its locks, its lease), but
/// unable to find the tampering at a renewal and give the number up, which would free it
/// for the second however soon that one started. `first` goes on once the second is up.
fn tamper_and_start_beside(
    first: &Service,
    tamper: impl FnOnce(),
    dir: &Path,
    args: &[&str],
) -> Service {
    common::signal(first.child.id(), "STOP");
    tamper();
    let second = Service::start(dir, args);
    common::signal(first.child.id(), "CONT");
    second
}

fn record(dir: &Path) -> std::path::PathBuf {
    dir.join("dc0-worker0.lease")
}

#[test]
fn a_deleted_record_under_a_live_holder_never_hands_its_number_to_a_second_process() {
    let dir = new_lease_dir("tamper-delete");
    let first = Service::start(&dir, &["--workers", "0-1"]);
    assert_eq!(first.worker, 0);
    let second = tamper_and_start_beside(
        &first,
        || std::fs::remove_file(record(&dir)).unwrap(),
        &dir,
        &["--workers", "0-1"],
    );
    assert_eq!(second.worker, 1, "worker 0 is still held by a live process");
    assert_never_share_an_id(&first, &second, Duration::from_millis(1_500));
}

#[test]
fn a_replaced_or_recreated_record_under_a_live_holder_never_hands_its_number_over() {
    for tamper in ["copy-over", "recreate-empty"] {
        let dir = new_lease_dir(&format!("tamper-{tamper}"));
        let first = Service::start(&dir, &["--workers", "0-1"]);
        assert_eq!(first.worker, 0);
        let path = record(&dir);
        let tampering = || match tamper {
            // An editor's save: a new file with the same bytes moved over the old one.
            "copy-over" => {
                let copy = dir.join("copy");
                std::fs::copy(&path, &copy).unwrap();
                std::fs::rename(&copy, &path).unwrap();
            }
            _ => {
                std::fs::remove_file(&path).unwrap();
                std::fs::write(&path, b"").unwrap();
            }
        };
        let second = tamper_and_start_beside(&first, tampering, &dir, &["--workers", "0-1"]);
        assert_eq!(
            second.worker, 1,
            "{tamper}: worker 0 is held by a live process"
        );
        assert_never_share_an_id(&first, &second, Duration::from_millis(1_000));
    }
}

#[test]
fn a_lease_directory_deleted_whole_under_a_live_holder_never_hands_its_number_over() {
    let dir = new_lease_dir("tamper-rm-rf");
    let first = Service::start(&dir, &["--workers", "0-1"]);
    assert_eq!(first.worker, 0);
    // The next process creates a brand-new store at the same path.
    let second = tamper_and_start_beside(
        &first,
        || std::fs::remove_dir_all(&dir).unwrap(),
        &dir,
        &["--workers", "0-1"],
    );
    assert_eq!(second.worker, 1, "worker 0 is still held by a live process");
    assert_never_share_an_id(&first, &second, Duration::from_millis(1_500));
}

#[test]
fn a_directory_without_its_roster_is_refused_until_initialised() {
    let dir = new_lease_dir("uninitialised");
    std::fs::create_dir_all(&dir).unwrap();
    let lease_dir = dir.to_str().unwrap();
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is not initialised"), "{stderr}");
    assert!(
        stderr.contains(&format!("idgen leases init --lease-dir {lease_dir}")),
        "{stderr}"
    );
    let (status, stdout, stderr) = idgen(&["leases", "init", "--lease-dir", lease_dir]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("initialised the lease directory"));
    let (status, stdout, _) = idgen(&["leases", "init", "--lease-dir", lease_dir]);
    assert!(status.success());
    assert!(stdout.contains("was initialised already"), "{stdout}");
    // Every number counts as used before: the first holder waits a TTL, then issues.
    let started = Instant::now();
    let (status, stdout, stderr) = idgen(&["next", "--lease-dir", lease_dir]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.trim().parse::<u64>().is_ok());
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[cfg(feature = "etcd")]
mod etcd {
    use super::*;

    fn endpoints() -> String {
        std::env::var("IDGEN_ETCD_ENDPOINTS").expect(
            "IDGEN_ETCD_ENDPOINTS is not set: run the tests through .ci/test, which starts etcd",
        )
    }

    fn etcdctl(args: &[&str]) {
        let status = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", endpoints()))
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("etcdctl (Debian's etcd-client) is needed");
        assert!(status.success());
    }

    #[test]
    fn a_wiped_namespace_is_refused_until_initialised_and_never_hands_a_live_number_over() {
        let endpoints = endpoints();
        // Its own, never initialised: pids come round again on a busy host.
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let namespace = format!("/idgen-cli-test/wipe-{}-{unix_ms}", std::process::id());
        let etcd = [
            "--etcd",
            endpoints.as_str(),
            "--namespace",
            namespace.as_str(),
            "--lease-ttl",
            "2s",
        ];
        let with_workers = |workers: &'static str| {
            let mut args = etcd.to_vec();
            args.extend(["--workers", workers]);
            args
        };
        // A namespace never initialised is refused, with the command to run.
        let mut next = vec!["next"];
        next.extend(with_workers("0-1"));
        let (status, _, stderr) = idgen(&next);
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("is not initialised"), "{stderr}");
        assert!(stderr.contains("idgen leases init --etcd"), "{stderr}");
        let mut init = vec!["leases", "init", "--outage-horizon", "2s"];
        init.extend(etcd);
        let (status, stdout, stderr) = idgen(&init);
        assert!(status.success(), "{stderr}");
        assert!(stdout.contains("1024 marks written"), "{stdout}");

        // Usually worker 0; another when `init`'s marks pass while it scans (all equal, a
        // horizon ahead: a number found passed is taken before the nearest ahead).
        let first = Service::start_with(&with_workers("0-2"));
        assert!(first.worker <= 2, "{}", first.worker);
        // An operator wipes the namespace: holder and mark keys, and the store key.
        etcdctl(&["del", "--prefix", &namespace]);
        let (status, _, stderr) = idgen(&next);
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("is not initialised"), "{stderr}");
        let (status, _, stderr) = idgen(&init);
        assert!(status.success(), "{stderr}");
        // While the first process keeps its number's lease alive, the second cannot have
        // it. The first stops at its next renewal (the holder key is gone) and lets the
        // lease lapse, so on a slow run the second may take that number after that, past
        // the mark `init` wrote a horizon ahead. Either way no ID may be issued by both.
        // Three numbers: the first, having lost 0, takes another, and one is left for the
        // second while 0's lease lives on.
        let second = Service::start_with(&with_workers("0-2"));
        assert_never_share_an_id(&first, &second, Duration::from_millis(3_000));
    }
}

#[test]
fn the_default_directory_given_explicitly_still_sees_the_default_stores_live_numbers() {
    // A service on the default store; the directory is deleted; a process naming the same
    // directory with --lease-dir must still not take the service's live number.
    let home = common::temp_dir("default-explicit");
    let state = home.join("state");
    let service = Service::start_in(
        common::idgen_command()
            .env("XDG_STATE_HOME", &state)
            .env("TMPDIR", &home)
            .args(["serve", "--listen", "127.0.0.1:0", "--workers", "22-23"]),
    );
    // Default-directory numbers are host-wide: a range of its own, apart from other tests
    // (another process holding one of them for a moment moves the service to the other).
    assert!([22, 23].contains(&service.worker));
    let dir = state.join("idgen/leases");
    std::fs::remove_dir_all(&dir).unwrap();
    let id = common::next_id_once_free(
        &[
            "next",
            "--lease-dir",
            dir.to_str().unwrap(),
            "--workers",
            "22-23",
        ],
        &[],
    );
    assert_ne!(
        (id >> 12) & 0x1f,
        service.worker,
        "took the worker number a live service holds"
    );
}

/// The reproduction: a service on 41/0/8/14 took worker 0; `idgen next` on the
/// default layout (a shell without the service's IDGEN_* variables) took worker 1, whose
/// IDs are the service's worker 0 at sequence 4,096 and up. It is refused now, naming both
/// layouts, and issues nothing.
#[test]
fn a_process_with_another_layout_is_refused_by_the_store_naming_both_layouts() {
    let dir = new_lease_dir("two-layouts");
    let lease_dir = dir.to_str().unwrap();
    let layout = [
        "--datacenter-bits",
        "0",
        "--worker-bits",
        "8",
        "--sequence-bits",
        "14",
    ];
    let service = Service::start(&dir, &layout);
    assert_eq!(service.get("/v1/ids?count=10").ids().len(), 10);
    let (status, stdout, stderr) = idgen(&["next", "-n", "5", "--lease-dir", lease_dir]);
    assert_eq!(status.code(), Some(2), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("serves the layout time=41 datacenter=0 worker=8 sequence=14"),
        "{stderr}"
    );
    assert!(
        stderr.contains("this process uses time=41 datacenter=5 worker=5 sequence=12"),
        "{stderr}"
    );
    // The service's own layout is welcome beside it.
    let mut same = vec!["next", "--lease-dir", lease_dir];
    same.extend(layout);
    let (status, _, stderr) = idgen(&same);
    assert!(status.success(), "{stderr}");
}

/// Moving a fleet to a new layout: `leases move-check` compares the new layout's first ID
/// now with the largest the old one could have issued up to the store's last mark.
#[test]
fn move_check_refuses_a_layout_whose_ids_lie_below_the_old_ones_and_passes_one_above() {
    let dir = new_lease_dir("move-check");
    let lease_dir = dir.to_str().unwrap();
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir]);
    assert!(status.success(), "{stderr}");
    let check = |extra: &[&str]| {
        let mut args = vec!["leases", "move-check", "--lease-dir", lease_dir];
        args.extend(extra);
        idgen(&args)
    };
    // A later epoch restarts time at 0: its IDs lie below the old ones for two years.
    let (status, stdout, stderr) = check(&["--epoch", "2026-01-01T00:00:00Z"]);
    assert_eq!(status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("refused: the new layout's IDs lie below"),
        "{stderr}"
    );
    // One less time bit, one more sequence bit, same epoch: the time field moves up a
    // bit, so every new ID (twice the old value, and more) lies above every old one.
    let (status, stdout, stderr) = check(&["--time-bits", "40", "--sequence-bits", "13"]);
    assert!(status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("ok: every ID of the new layout"),
        "{stdout}"
    );
    // One more time bit: the time field moves down, and new IDs are half the old ones.
    let (status, _, stderr) = check(&["--time-bits", "42", "--sequence-bits", "11"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("refused"), "{stderr}");
    // The same layout again: its IDs go on above its own.
    let (status, stdout, stderr) = check(&[]);
    assert!(status.success(), "{stdout}{stderr}");
}

/// `move-check` reads a store as the old fleet left it: while a number is held the fleet is
/// still issuing (its marks still move), so it refuses; a mistyped directory is not made.
#[test]
fn move_check_refuses_while_the_old_fleet_runs_and_never_creates_a_directory() {
    let dir = new_lease_dir("move-check-held");
    let service = Service::start(&dir, &[]);
    let (status, _, stderr) = idgen(&[
        "leases",
        "move-check",
        "--lease-dir",
        dir.to_str().unwrap(),
        "--time-bits",
        "40",
        "--sequence-bits",
        "13",
    ]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is held"), "{stderr}");
    drop(service);
    let missing = dir.with_file_name("no-such-leases");
    let (status, _, stderr) = idgen(&[
        "leases",
        "move-check",
        "--lease-dir",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        !missing.exists(),
        "move-check created {}",
        missing.display()
    );
}
