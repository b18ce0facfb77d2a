//! `idgen serve` on etcd through a store outage, with real processes: the service's etcd
//! traffic goes through a TCP proxy the test can cut, while etcd itself stays up for
//! everyone else. A holder cut off keeps issuing up to its mark; a second process may hold
//! the same worker number at the same time, and the mark alone keeps their IDs apart.

#![cfg(feature = "etcd")]

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{PATIENCE, Service, idgen, wait_until};

fn endpoints() -> String {
    std::env::var("IDGEN_ETCD_ENDPOINTS").expect(
        "IDGEN_ETCD_ENDPOINTS is not set: run the tests through .ci/test, which starts etcd",
    )
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A TCP proxy to etcd that the test can cut: while cut, every connection through it is
/// closed and new ones are closed as soon as they are accepted.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: &str) -> Proxy {
        let target = target
            .trim_start_matches("http://")
            .split(',')
            .next()
            .unwrap()
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::<TcpStream>::new()));
        {
            let (cut, open) = (Arc::clone(&cut), Arc::clone(&open));
            thread::spawn(move || {
                for client in listener.incoming() {
                    let Ok(client) = client else { continue };
                    if cut.load(Ordering::SeqCst) {
                        let _ = client.shutdown(Shutdown::Both);
                        continue;
                    }
                    let Ok(server) = TcpStream::connect(&target) else {
                        continue;
                    };
                    let mut open = open.lock().unwrap();
                    open.push(client.try_clone().unwrap());
                    open.push(server.try_clone().unwrap());
                    for (mut from, mut to) in [
                        (client.try_clone().unwrap(), server.try_clone().unwrap()),
                        (server, client),
                    ] {
                        thread::spawn(move || {
                            let mut buffer = [0u8; 16 * 1024];
                            while let Ok(n) = from.read(&mut buffer) {
                                if n == 0 || to.write_all(&buffer[..n]).is_err() {
                                    break;
                                }
                            }
                            let _ = to.shutdown(Shutdown::Both);
                        });
                    }
                }
            });
        }
        Proxy { port, cut, open }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// A layout of 16 worker numbers (no datacenter bits), for every process of these tests:
/// `init` writes 16 marks, not 1,024 (a thousand requests, each of which may meet a slow
/// etcd on a loaded machine).
const LAYOUT: [&str; 6] = [
    "--datacenter-bits",
    "0",
    "--worker-bits",
    "4",
    "--sequence-bits",
    "18",
];

/// The worker number of an ID of [`LAYOUT`].
fn worker_of(id: u64) -> u64 {
    (id >> 18) & 0xf
}

/// `args` and [`LAYOUT`].
fn with_layout<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(LAYOUT);
    all
}

/// A namespace of its own, initialised with `idgen leases init` (marks a TTL ahead).
fn initialised_namespace(test: &str) -> String {
    let namespace = format!(
        "/idgen-cli-test/{test}-{}-{}",
        std::process::id(),
        unix_ms()
    );
    let (status, _, stderr) = idgen(&with_layout(&[
        "leases",
        "init",
        "--etcd",
        &endpoints(),
        "--namespace",
        &namespace,
        "--lease-ttl",
        "2s",
        // A new namespace: marks a TTL ahead are enough.
        "--outage-horizon",
        "2s",
    ]));
    assert!(status.success(), "{stderr}");
    namespace
}

/// Whether etcd has a live holder of `worker` in `namespace` (its holder key, which goes
/// with the holder's etcd lease), as the fleet view reads it straight from etcd.
fn held_at_etcd(namespace: &str, worker: u64) -> bool {
    let workers = format!("{worker}-{worker}");
    let (status, stdout, stderr) = idgen(&with_layout(&[
        "leases",
        "--etcd",
        &endpoints(),
        "--namespace",
        namespace,
        "--workers",
        &workers,
        "--json",
    ]));
    assert!(status.success(), "{stderr}");
    let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    rows[0]["state"] == "held"
}

/// The IDs `service` has handed out so far.
fn issued(service: &Service) -> u64 {
    let line = metric(service, "idgen_ids_issued_total ");
    line["idgen_ids_issued_total ".len()..].parse().unwrap()
}

fn metric(service: &Service, line_start: &str) -> String {
    let text = service.get("/metrics").body;
    text.lines()
        .find(|line| line.starts_with(line_start))
        .unwrap_or_else(|| panic!("no {line_start} in {text}"))
        .to_string()
}

#[test]
fn through_an_outage_healthz_says_so_and_ids_flow_until_the_mark() {
    let namespace = initialised_namespace("healthz");
    let proxy = Proxy::start(&endpoints());
    let etcd = proxy.endpoint();
    let service = Service::start_with(&with_layout(&[
        "--etcd",
        &etcd,
        "--namespace",
        &namespace,
        "--lease-ttl",
        "2s",
        // The mark 10 s after the last renewal: long after the lease's end at etcd.
        "--outage-horizon",
        "10s",
        "--workers",
        "0-3",
    ]));
    let worker = service.worker;
    assert_eq!(service.get("/healthz").json()["lease"], "Valid");
    let place = etcd.trim_start_matches("http://");
    assert_eq!(
        metric(&service, "idgen_worker_info"),
        format!(
            "idgen_worker_info{{space=\"default\",layout=\"{}\",store=\"etcd:{place} \
             {namespace}\",holder=\"service\",datacenter=\"0\",worker=\"{worker}\"}} 1",
            // LAYOUT's widths, on the default epoch.
            "41.0.4.18@1704067200000"
        )
    );

    proxy.cut();
    let cut_at = unix_ms();
    wait_until("the outage", PATIENCE, || {
        service.get("/healthz").json()["lease"] == "Outage"
    });
    // Past the lease's end at etcd (its TTL after the last keep-alive), still answering.
    wait_until("etcd to end the service's lease", PATIENCE, || {
        !held_at_etcd(&namespace, worker)
    });
    let health = service.get("/healthz");
    assert_eq!(health.status, 200, "{health:?}");
    let body = health.json();
    assert_eq!(body["lease"], "Outage");
    let left = body["validForMs"].as_i64().unwrap();
    assert!(left > 0 && left <= 10_000, "{body}");
    let since = body["outageSinceMs"].as_u64().unwrap();
    assert!(
        since >= cut_at.saturating_sub(1_000) && since <= unix_ms(),
        "{body}"
    );
    assert_eq!(service.get("/v1/ids?count=10").status, 200);
    assert_eq!(
        metric(&service, "idgen_lease_outage "),
        "idgen_lease_outage 1"
    );
    assert_eq!(
        metric(&service, "idgen_lease_outages_total"),
        "idgen_lease_outages_total 1"
    );

    // Past the mark: refused, and /healthz says why.
    wait_until("the mark", PATIENCE, || {
        service.get("/v1/ids?count=1").status == 503
    });
    let health = service.get("/healthz");
    assert_eq!(health.status, 503);
    assert_eq!(health.json()["lease"], "Expired");
    // It issues on no number now: it reports none, so that the number's next holder is no
    // duplicate to the alert rules.
    let metrics = service.get("/metrics").body;
    assert!(
        !metrics
            .lines()
            .any(|line| line.starts_with("idgen_worker_info{")),
        "{metrics}"
    );

    // etcd reachable again: the lease ran out there, but nobody touched the number, so
    // the service takes it back and answers again (after its retry interval).
    proxy.restore();
    let took = wait_until("recovery", PATIENCE, || {
        service.get("/v1/ids?count=1").status == 200
    });
    println!("answering again {took:?} after etcd was reachable");
    let health = service.get("/healthz").json();
    assert_eq!(health["lease"], "Valid");
    metric(&service, "idgen_worker_info{");
    assert_eq!(health["worker"], worker);
    assert_eq!(
        metric(&service, "idgen_lease_outage "),
        "idgen_lease_outage 0"
    );
    // The log has a line for the outage's start and one for its end.
    let (status, log) = service.terminate_with_log();
    assert!(status.success(), "{log}");
    assert!(log.contains("lease store outage"), "{log}");
    assert!(log.contains("reachable again"), "{log}");
}

/// Collects `count=100` batches from `service` until `stop`: every ID, and the wall-clock
/// span (Unix ms) from the first answered request to the last.
fn collect(service: &Service, stop: &AtomicBool) -> (Vec<u64>, Option<(u64, u64)>, u64) {
    let (mut ids, mut span, mut refused) = (Vec::new(), None::<(u64, u64)>, 0);
    while !stop.load(Ordering::Relaxed) {
        let reply = service.get("/v1/ids?count=100");
        match reply.status {
            200 => {
                ids.extend(reply.ids());
                let now = unix_ms();
                span = Some(span.map_or((now, now), |(first, _)| (first, now)));
            }
            503 => {
                assert!(reply.error().contains("not valid"), "{reply:?}");
                refused += 1;
                thread::sleep(Duration::from_millis(20));
            }
            _ => panic!("unexpected reply {reply:?}"),
        }
    }
    (ids, span, refused)
}

#[test]
fn two_live_processes_hold_the_same_number_at_once_and_never_share_an_id() {
    // The first service runs 5 s behind under libfaketime and reaches etcd through the
    // proxy; the test cuts it off. Its lease ends at etcd after the 2 s TTL, so a second
    // service (on the right time, straight to etcd) takes worker 0, waits for the mark the
    // first wrote (its clock + the 10 s horizon, so about 5 s from now on real time) and
    // starts issuing, while the first goes on issuing up to that same mark, which on its
    // slow clock is about 10 s away.
    let namespace = initialised_namespace("two-holders");
    let proxy = Proxy::start(&endpoints());
    let flags = |etcd: &str| -> Vec<String> {
        with_layout(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--etcd",
            etcd,
            "--namespace",
            &namespace,
            "--lease-ttl",
            "2s",
            "--outage-horizon",
            "10s",
            "--workers",
            "0-0",
        ])
        .into_iter()
        .map(String::from)
        .collect()
    };
    let first = Service::start_in(
        common::idgen_command()
            .env("LD_PRELOAD", common::libfaketime())
            .env("FAKETIME", "-5s")
            .env("DONT_FAKE_MONOTONIC", "1")
            .args(flags(&proxy.endpoint())),
    );
    assert_eq!(first.worker, 0);
    let stop_first = AtomicBool::new(false);
    let stop_second = AtomicBool::new(false);
    let second = std::sync::OnceLock::new();
    let (first_run, second_run, second_started_at) = thread::scope(|s| {
        let _stop = common::SetOnDrop(&[&stop_first, &stop_second]);
        let first_run = s.spawn(|| collect(&first, &stop_first));
        // Issuing before it is cut off.
        wait_until("the first to issue", PATIENCE, || issued(&first) >= 1_000);
        proxy.cut();
        // The first's lease ends at etcd 2 s after its last keep-alive.
        wait_until("etcd to end the first's lease", PATIENCE, || {
            !held_at_etcd(&namespace, 0)
        });
        let second_started_at = unix_ms();
        let second: &Service = second
            .get_or_init(|| Service::start_in(common::idgen_command().args(flags(&endpoints()))));
        assert_eq!(second.worker, 0, "the same number");
        let stop_second = &stop_second;
        let second_run = s.spawn(move || collect(second, stop_second));
        // The first stops at its mark; the second goes on issuing past that.
        wait_until("the first to reach its mark", PATIENCE, || {
            first.get("/healthz").json()["lease"] == "Expired"
        });
        let second_then = issued(second);
        wait_until(
            "the second to issue past the first's mark",
            PATIENCE,
            || issued(second) >= second_then + 1_000,
        );
        stop_first.store(true, Ordering::Relaxed);
        stop_second.store(true, Ordering::Relaxed);
        (
            first_run.join().unwrap(),
            second_run.join().unwrap(),
            second_started_at,
        )
    });
    let (a, a_span, a_refused) = first_run;
    let (b, b_span, b_refused) = second_run;
    let (a_span, b_span) = (a_span.unwrap(), b_span.unwrap());
    let overlap_ms = a_span.1.min(b_span.1) as i64 - a_span.0.max(b_span.0) as i64;
    let seen: HashSet<u64> = a.iter().copied().collect();
    let shared = b.iter().filter(|id| seen.contains(id)).count();
    println!(
        "first (5 s behind, cut off): {} IDs answered from {} to {} (then {a_refused} refusals); \
         second (started at {second_started_at}): {} IDs from {} to {} ({b_refused} refusals); \
         both issuing as worker 0 for {overlap_ms} ms at once; {shared} IDs shared",
        a.len(),
        a_span.0,
        a_span.1,
        b.len(),
        b_span.0,
        b_span.1,
    );
    assert!(a.iter().chain(&b).all(|&id| worker_of(id) == 0));
    assert!(
        overlap_ms >= 1_000,
        "the two did not overlap: {overlap_ms} ms"
    );
    assert!(
        a.len() > 1_000 && b.len() > 1_000,
        "too few IDs to mean anything"
    );
    assert_eq!(shared, 0, "IDs issued by both");
    // Apart by the mark: every one of the first's IDs is below every one of the second's.
    assert!(a.iter().max() < b.iter().min());
}

#[test]
fn the_fleet_view_on_etcd_shows_the_services_and_the_api_clients_names() {
    let namespace = initialised_namespace("fleet");
    let dir = common::temp_dir("etcd-fleet-token");
    let token = dir.join("token");
    std::fs::write(&token, "t0k\n").unwrap();
    let endpoints = endpoints();
    let service = Service::start_with(&with_layout(&[
        "--etcd",
        &endpoints,
        "--namespace",
        &namespace,
        "--lease-ttl",
        "2s",
        "--workers",
        "0-3",
        "--lease-api-token-file",
        token.to_str().unwrap(),
    ]));
    let leased = service.request(
        "POST",
        "/v1/generators/lease",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer t0k"),
        ],
        br#"{"holder": "node-billing"}"#,
    );
    assert_eq!(leased.status, 200, "{leased:?}");
    let api_worker = leased.json()["worker"].as_u64().unwrap();
    let (status, stdout, stderr) = idgen(&with_layout(&[
        "leases",
        "--etcd",
        &endpoints,
        "--namespace",
        &namespace,
        "--workers",
        "0-3",
        "--json",
    ]));
    assert!(status.success(), "{stderr}");
    let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for row in rows.as_array().unwrap() {
        let worker = row["worker"].as_u64().unwrap();
        let expected = if worker == service.worker || worker == api_worker {
            "held"
        } else {
            "free"
        };
        assert_eq!(row["state"], expected, "{rows:#}");
        if worker == api_worker {
            assert_eq!(row["holder"], "node-billing");
        }
        if worker == service.worker {
            assert!(
                row["holder"]
                    .as_str()
                    .unwrap()
                    .starts_with("idgen serve, pid "),
                "{rows:#}"
            );
        }
        // `init` wrote every mark.
        assert!(row["markMs"].is_u64(), "{rows:#}");
    }
}
