//! What a fleet costs: a fleet of worker-number holders on a real 3-member etcd cluster
//! (the fault harness's, `cli/tests/faults/cluster.rs`: each member in a network namespace
//! of its own, reached from the host over a veth), measured. A bench
//! binary, not a test; it prints a plain-text report (markdown tables) at the end.
//!
//! 1. The fleet: holder processes (this binary run again with `IDGEN_FLEET_ROLE=hold`) hold
//!    1,000, 5,000 and 10,000 numbers of `Layout::new(41, 0, 14, 8)` through
//!    `LeasedGenerator`s on the real `EtcdStore` and keeper. One process holds the numbers
//!    that later restart (at most 1,000); the rest are split over three more. Each process
//!    shares one store (one connection) among its generators, taken by 8 threads at once
//!    (`IDGEN_FLEET_ACQUIRERS`). By default each number is one `LeasedGenerator` with its
//!    own keeper thread, as in a fleet of one-number processes; `IDGEN_FLEET_GROUP=n` holds
//!    them as `LeasedShardedGenerator`s of n numbers (0: one per process) instead. A sharded
//!    generator's one keeper renews its numbers one after the other, which falls behind at
//!    a short TTL once it keeps a few hundred; and `acquire_sharded` renews the numbers it
//!    already took only while it waits for a mark, so numbers taken early in an acquire
//!    slower than a TTL (thousands, on a busy cluster) run out and are taken back at the
//!    first renewal (seen as `LeaseGrant`s in the steady window). The report says how many
//!    renewals were made of those due.
//! 2. At each TTL (default: `ETCD_DEFAULT_TTL`, 30 s, and 5 s), while the fleet just holds
//!    (over a window, default 20 s, after one renewal interval to settle): etcd requests
//!    per second from the members' Prometheus endpoints, summed over the three members
//!    (`grpc_server_msg_received_total` and `grpc_server_started_total` of
//!    `LeaseKeepAlive`, `grpc_server_handled_total` of `Txn`, `Range`, `Put`, `LeaseGrant`,
//!    `LeaseRevoke`), and from the leader `etcd_server_proposals_committed_total`,
//!    `etcd_mvcc_put_total` and `etcd_debugging_lease_renewed_total`; the leader's CPU
//!    (`/proc/PID/stat` utime + stime over the window), all three members' CPU, and the
//!    leader's RSS (`VmRSS`).
//! 3. Start to first ID: (a) idle: 200 new `LeasedGenerator`s one after another on a range
//!    of spare numbers whose marks have passed (acquire and first `next_id` on a store
//!    already connected; then release), while the fleet holds; (b) a mass restart: the
//!    process holding 1,000 numbers is SIGKILLed and a new process
//!    (`IDGEN_FLEET_ROLE=restart`) starts 1,000 holders at once, one thread, one store
//!    connection and one `LeasedGenerator` each, on a range of the killed numbers plus as many spares (the 2N
//!    range `docs/leases.md` recommends); each holder's time from the process's start to its
//!    first ID, and the part of it spent waiting for a previous holder's mark. The killed
//!    numbers stay held until their etcd leases run out (a TTL), and their marks stay an
//!    outage horizon (3 minutes) ahead, so the restarted holders take the spares.
//! 4. The cluster's write capacity in the same run: 32 clients (`etcd-client`, each its own
//!    connection) doing `put` of small keys for 10 s.
//!
//! Clients reach the members directly, not through the harness's client proxies (which
//! would copy every byte through this process's threads); the direct client URL of each
//! member is read from its command line in `/proc`. The members run in network namespaces
//! of their own and reach each other over veth links, so nothing of theirs passes through
//! this process. By default every client (holders, probes, the capacity clients) talks to
//! the leader alone, as the measurements in `docs/fleet.md` were made; `--spread`
//! (`IDGEN_FLEET_SPREAD=1`) gives clients all three members, as a real fleet would, and
//! etcd 3.4 followers then forward each keep-alive to the leader over HTTP on their peer
//! URL. The cluster makes network namespaces: run as root.
//!
//! Run (15 to 20 minutes on 2 cores, most of it taking the 10,000 numbers: every acquire
//! reads all holder and mark keys): `cargo bench --bench fleet --features etcd`
//! Small: `cargo bench --bench fleet --features etcd -- --quick` (sizes 100 and 500, TTL
//! 5 s, a 5 s window), or any of `--sizes 1000,5000`, `--ttls 30,5`, `--window 20`,
//! `--samples 200`, `--restart 1000`, `--group 1`, `--acquirers 8`, `--processes 4`, and the
//! same as `IDGEN_FLEET_SIZES`, `IDGEN_FLEET_TTLS`, `IDGEN_FLEET_WINDOW`,
//! `IDGEN_FLEET_SAMPLES`, `IDGEN_FLEET_RESTART`, `IDGEN_FLEET_GROUP`, `IDGEN_FLEET_ACQUIRERS`,
//! `IDGEN_FLEET_PROCESSES` (`IDGEN_FLEET_QUICK=1` for `--quick`). A size and TTL whose mark
//! writes alone (3 × N / TTL a second) would exceed half the measured write capacity is not
//! run unless `--all` is given (`IDGEN_FLEET_ALL=1`): 10,000 at 5 s needs 6,000 Txn/s. The
//! mass restart runs at the first TTL of each size only (the killed numbers' marks are a
//! horizon ahead whatever the TTL); it is given up after 30 s.
//! Needs `etcd` and `etcdctl` (Debian: etcd-server, etcd-client).

#[allow(dead_code)]
#[path = "../cli/tests/faults/proxy.rs"]
mod proxy;

#[allow(dead_code)]
#[path = "../cli/tests/faults/cluster.rs"]
mod cluster;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen::lease::{
    ETCD_DEFAULT_TTL, EtcdStore, LeaseState, LeaseStats, LeasedGenerator, LeasedShardedGenerator,
    WorkerRange,
};
use idgen::{Generator, Layout};

use cluster::Cluster;

const NAMESPACE_ROOT: &str = "/idgen-fleet";
/// Spare numbers, after the restart's spares, that the idle probes take and give back.
const PROBE_NUMBERS: u64 = 16;
/// How long the mass restart may take before its holders still starting are given up.
const RESTART_DEADLINE: Duration = Duration::from_secs(30);
/// How long a fleet may take to acquire its numbers.
const ACQUIRE_DEADLINE: Duration = Duration::from_secs(600);

fn layout() -> Layout {
    Layout::new(41, 0, 14, 8).expect("a valid layout")
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn env_u64(name: &str) -> u64 {
    env(name)
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number"))
}

fn main() {
    match std::env::var("IDGEN_FLEET_ROLE").as_deref() {
        Ok("hold") => hold(),
        Ok("restart") => restart(),
        _ => bench(),
    }
}

// ----------------------------------------------------------------------------------------
// The child processes.

/// Connects a store as the environment says.
fn child_connect() -> Result<EtcdStore, idgen::Error> {
    let endpoints: Vec<String> = env("IDGEN_FLEET_ENDPOINTS")
        .split(',')
        .map(str::to_string)
        .collect();
    EtcdStore::connect(&endpoints, &env("IDGEN_FLEET_NS"))
        .and_then(|store| store.with_ttl(Duration::from_secs(env_u64("IDGEN_FLEET_TTL"))))
}

/// Connects the child's one store, shared by all its generators.
fn child_store() -> Arc<EtcdStore> {
    Arc::new(child_connect().unwrap_or_else(|error| panic!("connecting to etcd: {error}")))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Numbers a holder process holds: one `LeasedGenerator` (its own keeper thread) each, or
/// a `LeasedShardedGenerator` for several.
enum Held {
    One(LeasedGenerator),
    Sharded(LeasedShardedGenerator),
}

impl Held {
    fn stats(&self) -> Vec<LeaseStats> {
        match self {
            Held::One(generator) => vec![generator.lease_stats()],
            Held::Sharded(sharded) => sharded.lease_stats(),
        }
    }

    fn release(self) {
        let _ = match self {
            Held::One(generator) => generator.release(),
            Held::Sharded(sharded) => sharded.release(),
        };
    }
}

/// Releases everything from 16 threads.
fn release_all(mut held: Vec<Held>) {
    let per_thread = held.len().div_ceil(16).max(1);
    let mut threads = Vec::new();
    while !held.is_empty() {
        let batch: Vec<Held> = held.drain(..per_thread.min(held.len())).collect();
        threads.push(thread::spawn(move || {
            batch.into_iter().for_each(Held::release)
        }));
    }
    for thread in threads {
        let _ = thread.join();
    }
}

/// `IDGEN_FLEET_ROLE=hold`: holds `IDGEN_FLEET_COUNT` numbers from `IDGEN_FLEET_FIRST` on,
/// taken by `IDGEN_FLEET_ACQUIRERS` threads, each on its own slice of the range: one
/// `LeasedGenerator` per number (`IDGEN_FLEET_GROUP=1`), or `LeasedShardedGenerator`s of
/// `IDGEN_FLEET_GROUP` numbers (0: one for all). Says `ready <ms>` once all are held;
/// answers `stats` with `stats <renewals> <failures> <not valid>`; at the end of its input
/// releases everything and says `released <ms>`.
fn hold() {
    let store = child_store();
    let (first, count) = (env_u64("IDGEN_FLEET_FIRST"), env_u64("IDGEN_FLEET_COUNT"));
    let group = match env_u64("IDGEN_FLEET_GROUP") {
        0 => count,
        group => group,
    };
    let acquirers = if group >= count {
        1
    } else {
        env_u64("IDGEN_FLEET_ACQUIRERS").clamp(1, count)
    };
    let started = Instant::now();
    let per = count.div_ceil(acquirers);
    let workers: Vec<_> = (0..acquirers)
        .map(|i| (first + i * per, (first + (i + 1) * per).min(first + count)))
        .filter(|(start, end)| start < end)
        .map(|(start, end)| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let builder = |range: WorkerRange| {
                    LeasedGenerator::builder(Arc::clone(&store), range)
                        .generator(Generator::builder().layout(layout()))
                };
                let mut held = Vec::new();
                if group == 1 {
                    let range = WorkerRange::new(0, start..=end - 1).expect("a valid range");
                    for _ in start..end {
                        let generator = builder(range)
                            .acquire()
                            .unwrap_or_else(|error| panic!("holding in {range}: {error}"));
                        generator.next_id().expect("a first ID");
                        held.push(Held::One(generator));
                    }
                } else {
                    let mut from = start;
                    while from < end {
                        let to = (from + group).min(end);
                        let range = WorkerRange::new(0, from..=to - 1).expect("a valid range");
                        let sharded = builder(range)
                            .acquire_sharded((to - from) as usize)
                            .unwrap_or_else(|error| panic!("holding {range}: {error}"));
                        sharded.next_id().expect("a first ID");
                        held.push(Held::Sharded(sharded));
                        from = to;
                    }
                }
                held
            })
        })
        .collect();
    let held: Vec<Held> = workers
        .into_iter()
        .flat_map(|worker| worker.join().expect("an acquiring thread"))
        .collect();
    say(&format!("ready {}", started.elapsed().as_millis()));
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "stats" {
            let (mut renewals, mut failures, mut not_valid) = (0, 0, 0);
            for stats in held.iter().flat_map(Held::stats) {
                renewals += stats.renewals;
                failures += stats.renewal_failures;
                not_valid += u64::from(stats.state != LeaseState::Valid);
            }
            say(&format!("stats {renewals} {failures} {not_valid}"));
        }
    }
    let started = Instant::now();
    release_all(held);
    say(&format!("released {}", started.elapsed().as_millis()));
}

/// `IDGEN_FLEET_ROLE=restart`: starts `IDGEN_FLEET_COUNT` holders at once, one thread and
/// one `LeasedGenerator` each, on `IDGEN_FLEET_FIRST..=IDGEN_FLEET_LAST`. Says `connected
/// <ms>`, then per holder `first <ms from process start> <ms acquiring> <ms waiting for a
/// mark, at most> <worker>` (or `failed <ms> <error>`); at the end of its input releases.
fn restart() {
    let t0 = Instant::now();
    let (first, last) = (env_u64("IDGEN_FLEET_FIRST"), env_u64("IDGEN_FLEET_LAST"));
    let count = env_u64("IDGEN_FLEET_COUNT") as usize;
    let barrier = Arc::new(Barrier::new(count));
    let held = Arc::new(Mutex::new(Vec::new()));
    let holders: Vec<_> = (0..count)
        .map(|_| {
            let (barrier, held) = (Arc::clone(&barrier), Arc::clone(&held));
            thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    barrier.wait();
                    let (begun, begun_unix) = (Instant::now(), unix_ms());
                    let range = WorkerRange::new(0, first..=last).expect("a valid range");
                    let mut connect_us = 0;
                    // Each holder connects on its own, as a restarted process would.
                    let acquired = child_connect().and_then(|store| {
                        connect_us = begun.elapsed().as_micros();
                        LeasedGenerator::builder(store, range)
                            .generator(Generator::builder().layout(layout()))
                            .acquire()
                            .and_then(|generator| generator.next_id().map(|_| generator))
                    });
                    match acquired {
                        Ok(generator) => {
                            let stats = generator.lease_stats();
                            // The mark waited for: from the start of the acquire to the
                            // millisecond after the previous mark, at most the whole time.
                            let waited = stats.previous_mark_unix_ms.map_or(0, |previous| {
                                (previous + 1)
                                    .saturating_sub(begun_unix)
                                    .min(begun.elapsed().as_millis() as u64)
                            });
                            say(&format!(
                                "first {} {} {waited} {} {connect_us}",
                                t0.elapsed().as_micros(),
                                begun.elapsed().as_micros(),
                                stats.worker
                            ));
                            held.lock().unwrap().push(generator);
                        }
                        Err(error) => say(&format!("failed {} {error}", t0.elapsed().as_micros())),
                    }
                })
                .expect("a holder thread")
        })
        .collect();
    for holder in holders {
        let _ = holder.join();
    }
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    let held: Vec<Held> = std::mem::take(&mut *held.lock().unwrap())
        .into_iter()
        .map(Held::One)
        .collect();
    release_all(held);
    say("released");
}

// ----------------------------------------------------------------------------------------
// The parent: cluster, measurements, report.

struct Config {
    sizes: Vec<u64>,
    ttls: Vec<u64>,
    window: Duration,
    samples: usize,
    restart: u64,
    group: u64,
    acquirers: u64,
    processes: u64,
    /// Runs even the sizes and TTLs whose mark writes alone exceed the measured capacity.
    all: bool,
    /// Clients spread over the three members instead of the leader alone.
    spread: bool,
    capacity_clients: usize,
    capacity_time: Duration,
}

impl Config {
    fn parse() -> Config {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let quick = args.iter().any(|a| a == "--quick")
            || std::env::var("IDGEN_FLEET_QUICK").is_ok_and(|v| v == "1");
        let setting = |flag: &str, var: &str| -> Option<String> {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1).cloned())
                .or_else(|| {
                    args.iter()
                        .find_map(|a| a.strip_prefix(&format!("{flag}=")).map(str::to_string))
                })
                .or_else(|| std::env::var(var).ok())
        };
        let list = |flag: &str, var: &str, default: &[u64]| -> Vec<u64> {
            setting(flag, var).map_or_else(
                || default.to_vec(),
                |text| {
                    text.split(',')
                        .map(|s| s.trim().parse().expect("a list of numbers"))
                        .collect()
                },
            )
        };
        let number = |flag: &str, var: &str, default: u64| -> u64 {
            setting(flag, var).map_or(default, |text| text.trim().parse().expect("a number"))
        };
        let default_ttl = ETCD_DEFAULT_TTL.as_secs();
        let (sizes, ttls, window, samples, restart, capacity): (&[u64], &[u64], _, _, _, _) =
            if quick {
                (&[100, 500], &[5], 5, 50, 100, 5)
            } else {
                (&[1000, 5000, 10000], &[default_ttl, 5], 20, 200, 1000, 10)
            };
        Config {
            sizes: list("--sizes", "IDGEN_FLEET_SIZES", sizes),
            ttls: list("--ttls", "IDGEN_FLEET_TTLS", ttls),
            window: Duration::from_secs(number("--window", "IDGEN_FLEET_WINDOW", window)),
            samples: number("--samples", "IDGEN_FLEET_SAMPLES", samples) as usize,
            restart: number("--restart", "IDGEN_FLEET_RESTART", restart),
            group: number("--group", "IDGEN_FLEET_GROUP", 1),
            acquirers: number("--acquirers", "IDGEN_FLEET_ACQUIRERS", 8),
            spread: args.iter().any(|a| a == "--spread")
                || std::env::var("IDGEN_FLEET_SPREAD").is_ok_and(|v| v == "1"),
            all: args.iter().any(|a| a == "--all")
                || std::env::var("IDGEN_FLEET_ALL").is_ok_and(|v| v == "1"),
            processes: number("--processes", "IDGEN_FLEET_PROCESSES", 4).max(2),
            capacity_clients: 32,
            capacity_time: Duration::from_secs(capacity),
        }
    }
}

/// The members' direct client URLs (their command lines name them) and pids.
struct Members {
    urls: Vec<String>,
    pids: Vec<u32>,
    /// The URLs clients are given: the leader's alone, or all three with `--spread`.
    clients: Vec<String>,
}

impl Members {
    fn of(cluster: &Cluster) -> Members {
        let pids: Vec<u32> = cluster.members.iter().map(|m| m.pid()).collect();
        let urls = pids
            .iter()
            .map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
                String::from_utf8_lossy(&cmdline)
                    .split('\0')
                    .find_map(|arg| arg.strip_prefix("--listen-client-urls="))
                    .expect("an etcd member's client URL")
                    .to_string()
            })
            .collect();
        Members {
            urls,
            pids,
            clients: Vec::new(),
        }
    }
}

/// One scrape of every member's `/metrics`: member -> series (name and labels) -> value.
type Scrape = Vec<BTreeMap<String, f64>>;

fn scrape(members: &Members) -> Scrape {
    members
        .urls
        .iter()
        .map(|url| {
            let address = url.trim_start_matches("http://");
            let mut stream = TcpStream::connect(address).expect("a member's metrics");
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            write!(
                stream,
                "GET /metrics HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut text = String::new();
            let _ = stream.read_to_string(&mut text);
            text.lines()
                .filter(|line| !line.starts_with('#'))
                .filter_map(|line| {
                    let (series, value) = line.rsplit_once(' ')?;
                    Some((series.to_string(), value.parse().ok()?))
                })
                .collect()
        })
        .collect()
}

/// The sum over one member's series named `name` whose labels contain each of `labels`.
fn metric(series: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    series
        .iter()
        .filter(|(key, _)| {
            let (key_name, key_labels) = key.split_once('{').unwrap_or((key.as_str(), ""));
            key_name == name && labels.iter().all(|label| key_labels.contains(label))
        })
        .map(|(_, value)| value)
        .sum()
}

/// CPU time of a process so far, in seconds.
fn cpu_seconds(pid: u32, ticks: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is field 3, utime 14.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    (field(14).unwrap_or(0.0) + field(15).unwrap_or(0.0)) / ticks
}

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Thousands of holders on a few store connections, and the client proxies in this process
/// (which keep every connection they forward open until it ends), need more descriptors
/// than the usual soft limit. Raises this process's limit as far as the system allows (as
/// root, the hard limit too), with `prlimit`.
fn raise_open_files() {
    let most = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .unwrap_or(1 << 20);
    let pid = std::process::id().to_string();
    for limit in [
        format!("--nofile={most}:{most}"),
        format!("--nofile={most}"),
    ] {
        let raised = Command::new("prlimit")
            .args(["--pid", &pid, &limit])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if raised {
            return;
        }
    }
}

/// Open descriptors of this process.
fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// What the cluster did over a window.
#[derive(Default, Clone)]
struct Load {
    seconds: f64,
    keepalives: f64,
    keepalive_streams: f64,
    txns: f64,
    ranges: f64,
    puts: f64,
    grants: f64,
    revokes: f64,
    proposals: f64,
    mvcc_puts: f64,
    lease_renewed: f64,
    lease_revoked: f64,
    leader_cpu: f64,
    cluster_cpu: f64,
    leader_rss_mb: f64,
}

impl Load {
    fn per_second(&self, count: f64) -> f64 {
        count / self.seconds
    }
}

/// Measures the cluster over one window: scrapes and CPU times before and after `during`.
struct Meter<'a> {
    members: &'a Members,
    /// The leader's index, as last seen.
    leader: std::cell::Cell<usize>,
    ticks: f64,
}

impl Meter<'_> {
    fn measure(&self, during: impl FnOnce()) -> Load {
        let cpu = |pid| cpu_seconds(pid, self.ticks);
        let leader_index = self.leader.get();
        let before = scrape(self.members);
        let cpu_before: Vec<f64> = self.members.pids.iter().map(|&pid| cpu(pid)).collect();
        let started = Instant::now();
        during();
        let seconds = started.elapsed().as_secs_f64();
        let cpu_after: Vec<f64> = self.members.pids.iter().map(|&pid| cpu(pid)).collect();
        let after = scrape(self.members);
        let all = |name: &str, labels: &[&str]| -> f64 {
            (0..after.len())
                .map(|i| metric(&after[i], name, labels) - metric(&before[i], name, labels))
                .sum()
        };
        let leader = |name: &str| {
            metric(&after[leader_index], name, &[]) - metric(&before[leader_index], name, &[])
        };
        let handled = |method: &str| {
            all(
                "grpc_server_handled_total",
                &[&format!("grpc_method=\"{method}\"")],
            )
        };
        Load {
            seconds,
            keepalives: all(
                "grpc_server_msg_received_total",
                &["grpc_method=\"LeaseKeepAlive\""],
            ),
            keepalive_streams: all(
                "grpc_server_started_total",
                &["grpc_method=\"LeaseKeepAlive\""],
            ),
            txns: handled("Txn"),
            ranges: handled("Range"),
            puts: handled("Put"),
            grants: handled("LeaseGrant"),
            revokes: handled("LeaseRevoke"),
            proposals: leader("etcd_server_proposals_committed_total"),
            mvcc_puts: leader("etcd_mvcc_put_total"),
            lease_renewed: leader("etcd_debugging_lease_renewed_total"),
            lease_revoked: leader("etcd_debugging_lease_revoked_total"),
            leader_cpu: cpu_after[leader_index] - cpu_before[leader_index],
            cluster_cpu: cpu_after.iter().sum::<f64>() - cpu_before.iter().sum::<f64>(),
            leader_rss_mb: rss_mb(self.members.pids[leader_index]),
        }
    }
}

/// A child process, its input, and its output lines as they come.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Proc {
    fn spawn(role: &str, vars: &[(&str, String)]) -> Proc {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .env("IDGEN_FLEET_ROLE", role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in vars {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("a child process");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            child,
            stdin,
            lines,
        }
    }

    /// The next line starting with `word`, within `limit`.
    fn expect(&self, word: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(word) => return Some(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn send(&mut self, line: &str) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }

    /// Closes its input (it releases its numbers and exits); kills it after `limit`.
    fn finish(mut self, limit: Duration) {
        self.stdin = None;
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Renewals, failed attempts and numbers not valid, summed over holder processes.
fn holder_stats(holders: &mut [Proc]) -> (u64, u64, u64) {
    let mut total = (0, 0, 0);
    for holder in holders.iter_mut() {
        holder.send("stats");
    }
    for holder in holders.iter() {
        if let Some(line) = holder.expect("stats", Duration::from_secs(30)) {
            let n: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|f| f.parse().ok())
                .collect();
            total.0 += n.first().copied().unwrap_or(0);
            total.1 += n.get(1).copied().unwrap_or(0);
            total.2 += n.get(2).copied().unwrap_or(0);
        }
    }
    total
}

#[derive(Default, Clone, Copy)]
struct Spread {
    count: usize,
    p50: f64,
    p99: f64,
    max: f64,
}

fn spread(mut values: Vec<f64>) -> Spread {
    if values.is_empty() {
        return Spread::default();
    }
    values.sort_by(f64::total_cmp);
    let at =
        |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    Spread {
        count: values.len(),
        p50: at(0.50),
        p99: at(0.99),
        max: values[values.len() - 1],
    }
}

struct Run {
    size: u64,
    ttl: u64,
    processes: usize,
    init_s: f64,
    acquire_s: f64,
    load: Load,
    renewals: u64,
    renewals_due: f64,
    failures: u64,
    not_valid: u64,
    idle: Spread,
    restart: Option<Restart>,
}

/// The mass restart's figures.
struct Restart {
    count: u64,
    connect_ms: f64,
    /// From the kill to each holder's first ID.
    total: Spread,
    /// The acquire and first ID alone.
    acquire: Spread,
    /// Waiting for a previous holder's mark (at most).
    mark_wait: Spread,
    failed: usize,
    /// From the kill until every holder started, failed, or the deadline passed.
    all_ms: f64,
    /// Failed renewals of the rest of the fleet meanwhile.
    fleet_failures: u64,
    /// The rest of the fleet's numbers not valid just after.
    fleet_not_valid: u64,
}

static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// A progress line on standard error, with the time since the bench started.
fn progress(what: &str) {
    let started = STARTED.get_or_init(Instant::now);
    eprintln!("fleet [{:6.1} s]: {what}", started.elapsed().as_secs_f64());
}

fn connect(members: &Members, namespace: &str, ttl: u64) -> EtcdStore {
    EtcdStore::connect(&members.clients, namespace)
        .and_then(|store| store.with_ttl(Duration::from_secs(ttl)))
        .unwrap_or_else(|error| panic!("connecting to etcd: {error}"))
}

/// Writes a mark for every number `0..total` of a fresh namespace: `EtcdStore::init` from
/// 8 threads on slices of the range, with the namespace's TTL of 2 s as the outage horizon
/// (the namespace is new, see `EtcdStore::init`), then waits until those marks passed.
/// (`init_new` writes one mark after another, which takes minutes for 11,000 numbers.)
fn init_namespace(members: &Members, namespace: &str, total: u64) {
    let slices = 8;
    let per = total.div_ceil(slices);
    let now = unix_ms();
    let threads: Vec<_> = (0..slices)
        .filter(|i| i * per < total)
        .map(|i| {
            let store = connect(members, namespace, 2).with_outage_horizon(Duration::from_secs(2));
            thread::spawn(move || {
                store
                    .init(0..=0, i * per..=((i + 1) * per).min(total) - 1, now)
                    .unwrap_or_else(|error| panic!("init: {error}"))
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("an init thread");
    }
    let ready = now + 2_000 + 1;
    while unix_ms() <= ready {
        thread::sleep(Duration::from_millis(20));
    }
}

fn run_fleet(
    config: &Config,
    members: &Members,
    meter: &Meter<'_>,
    size: u64,
    ttl: u64,
    with_restart: bool,
) -> Option<Run> {
    let namespace = format!("{NAMESPACE_ROOT}/n{size}-t{ttl}-{}", unix_ms());
    // The restart group is held by a process of its own even when it does not restart, so
    // that every TTL's fleet is laid out alike.
    let restart = config.restart.min(size).max(1);
    let total = size + restart + PROBE_NUMBERS;
    progress(&format!(
        "{size} holders, TTL {ttl} s: initialising {total} numbers in {namespace}"
    ));
    let started = Instant::now();
    init_namespace(members, &namespace, total);
    let init_s = started.elapsed().as_secs_f64();
    let endpoints = members.clients.join(",");
    let common = |first: u64, count: u64| {
        vec![
            ("IDGEN_FLEET_ENDPOINTS", endpoints.clone()),
            ("IDGEN_FLEET_NS", namespace.clone()),
            ("IDGEN_FLEET_TTL", ttl.to_string()),
            ("IDGEN_FLEET_FIRST", first.to_string()),
            ("IDGEN_FLEET_COUNT", count.to_string()),
            ("IDGEN_FLEET_GROUP", config.group.to_string()),
            ("IDGEN_FLEET_ACQUIRERS", config.acquirers.to_string()),
        ]
    };
    // Numbers: the others 0..size-restart, the victim size-restart..size, the restart's
    // spares size..size+restart, the probes' after them.
    let victim_first = size - restart;
    let others = config.processes - 1;
    let mut slices = Vec::new();
    if victim_first > 0 {
        let per = victim_first.div_ceil(others);
        let mut first = 0;
        while first < victim_first {
            let count = per.min(victim_first - first);
            slices.push((first, count));
            first += count;
        }
    }
    slices.push((victim_first, restart));
    progress(&format!(
        "acquiring with {} processes ({:?})",
        slices.len(),
        slices.iter().map(|s| s.1).collect::<Vec<_>>()
    ));
    let started = Instant::now();
    let mut holders: Vec<Proc> = slices
        .iter()
        .map(|&(first, count)| Proc::spawn("hold", &common(first, count)))
        .collect();
    for holder in &holders {
        if holder.expect("ready", ACQUIRE_DEADLINE).is_none() {
            progress("a holder process did not acquire its numbers; skipping");
            for holder in holders {
                holder.finish(Duration::from_secs(1));
            }
            return None;
        }
    }
    let acquire_s = started.elapsed().as_secs_f64();
    progress(&format!(
        "{size} numbers held after {acquire_s:.1} s; settling"
    ));
    let renew_every = Duration::from_secs(ttl) / 3;
    thread::sleep(renew_every + Duration::from_secs(1));

    let stats_before = holder_stats(&mut holders);
    let load = meter.measure(|| thread::sleep(config.window));
    let stats_after = holder_stats(&mut holders);
    let renewals = stats_after.0 - stats_before.0;
    let failures = stats_after.1 - stats_before.1;
    let not_valid = stats_after.2;
    let renewals_due = size as f64 * load.seconds / renew_every.as_secs_f64();
    progress(&format!(
        "{:.0} keep-alives/s, {:.0} Txn/s; {} descriptors open here; idle probes",
        load.per_second(load.keepalives),
        load.per_second(load.txns),
        open_files()
    ));

    // (a) idle: one holder after another on the probe numbers.
    let probe_first = size + restart;
    let range = WorkerRange::new(0, probe_first..=probe_first + PROBE_NUMBERS - 1).unwrap();
    let store = Arc::new(connect(members, &namespace, ttl));
    let mut idle = Vec::new();
    for _ in 0..config.samples {
        let begun = Instant::now();
        let generator = LeasedGenerator::builder(Arc::clone(&store), range)
            .generator(Generator::builder().layout(layout()))
            .acquire()
            .unwrap_or_else(|error| panic!("an idle probe: {error}"));
        generator.next_id().expect("a first ID");
        idle.push(begun.elapsed().as_secs_f64() * 1000.0);
        generator.release().expect("a release");
    }
    drop(store);

    if !with_restart || config.restart == 0 {
        progress("releasing");
        for holder in holders {
            holder.finish(Duration::from_secs(120));
        }
        return Some(Run {
            size,
            ttl,
            processes: slices.len(),
            init_s,
            acquire_s,
            load,
            renewals,
            renewals_due,
            failures,
            not_valid,
            idle: spread(idle),
            restart: None,
        });
    }

    // (b) the mass restart: SIGKILL the victim, start its replacement at once.
    progress(&format!("mass restart of {restart} holders"));
    let mut victim = holders.pop().unwrap();
    let _ = victim.child.kill();
    let killed = Instant::now();
    let _ = victim.child.wait();
    let mut vars = common(victim_first, restart);
    vars.push(("IDGEN_FLEET_LAST", (size + restart - 1).to_string()));
    let replacement = Proc::spawn("restart", &vars);
    let spawned_ms = killed.elapsed().as_secs_f64() * 1000.0;
    let deadline = Instant::now() + RESTART_DEADLINE;
    let (mut total_ms, mut acquire_ms, mut wait_ms, mut failed) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut connect_ms = Vec::new();
    while total_ms.len() + failed < restart as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = replacement.lines.recv_timeout(left) else {
            break;
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
        match fields.first() {
            Some(&"first") => {
                connect_ms.push(number(5).unwrap_or(0.0) / 1000.0);
                total_ms.push(spawned_ms + number(1).unwrap_or(0.0) / 1000.0);
                acquire_ms.push(number(2).unwrap_or(0.0) / 1000.0);
                wait_ms.push(number(3).unwrap_or(0.0));
            }
            Some(&"failed") => {
                failed += 1;
                if failed <= 3 {
                    eprintln!("fleet: restart: {line}");
                }
            }
            _ => {}
        }
    }
    let restart_all_ms = killed.elapsed().as_secs_f64() * 1000.0;
    let (_, failures_end, not_valid_end) = holder_stats(&mut holders);
    progress("releasing");
    if total_ms.len() + failed < restart as usize {
        // Holders still trying at the deadline: their numbers are left to expire (the
        // namespace is this run's alone).
        let mut replacement = replacement;
        let _ = replacement.child.kill();
        let _ = replacement.child.wait();
    } else {
        replacement.finish(Duration::from_secs(120));
    }
    for holder in holders {
        holder.finish(Duration::from_secs(120));
    }
    Some(Run {
        size,
        ttl,
        processes: slices.len(),
        init_s,
        acquire_s,
        load,
        renewals,
        renewals_due,
        failures,
        not_valid,
        idle: spread(idle),
        restart: Some(Restart {
            count: restart,
            connect_ms: spread(connect_ms).p50,
            total: spread(total_ms),
            acquire: spread(acquire_ms),
            mark_wait: spread(wait_ms),
            failed,
            all_ms: restart_all_ms,
            fleet_failures: failures_end - stats_after.1,
            fleet_not_valid: not_valid_end,
        }),
    })
}

/// The cluster's write capacity: `clients` clients, each its own connection, doing `put` of
/// small keys as fast as they are answered, for `time`.
fn capacity(members: &Members, meter: &Meter<'_>, clients: usize, time: Duration) -> (f64, Load) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let connected: Vec<etcd_client::Client> = runtime.block_on(async {
        let mut connected = Vec::new();
        for _ in 0..clients {
            connected.push(
                etcd_client::Client::connect(&members.clients, None)
                    .await
                    .expect("an etcd client"),
            );
        }
        connected
    });
    let mut done = 0u64;
    let load = meter.measure(|| {
        let end = Instant::now() + time;
        done = runtime.block_on(async {
            let tasks: Vec<_> = connected
                .into_iter()
                .enumerate()
                .map(|(i, mut client)| {
                    tokio::spawn(async move {
                        let mut n = 0u64;
                        while Instant::now() < end {
                            let key = format!("{NAMESPACE_ROOT}-capacity/{i}/{}", n % 100);
                            if client.put(key, "0123456789abcdef", None).await.is_ok() {
                                n += 1;
                            }
                        }
                        n
                    })
                })
                .collect();
            let mut total = 0;
            for task in tasks {
                total += task.await.unwrap_or(0);
            }
            total
        });
    });
    (done as f64 / load.seconds, load)
}

fn bench() {
    let config = Config::parse();
    if Command::new("etcd").arg("--version").output().is_err() {
        eprintln!("fleet: etcd is not installed (Debian: etcd-server etcd-client); skipped");
        return;
    }
    raise_open_files();
    let mut cluster = Cluster::start("fleet-bench");
    let leader = cluster.leader();
    let mut members = Members::of(&cluster);
    members.clients = if config.spread {
        members.urls.clone()
    } else {
        vec![members.urls[leader].clone()]
    };
    let meter = Meter {
        members: &members,
        leader: std::cell::Cell::new(leader),
        ticks: clock_ticks(),
    };
    progress(&format!(
        "cluster up, leader m{leader}, members {}; clients use {}",
        members.urls.join(","),
        members.clients.join(",")
    ));
    let idle = meter.measure(|| thread::sleep(Duration::from_secs(2)));
    progress(&format!(
        "write capacity, {} clients for {:?}",
        config.capacity_clients, config.capacity_time
    ));
    let (capacity_puts, capacity_load) = capacity(
        &members,
        &meter,
        config.capacity_clients,
        config.capacity_time,
    );
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    for &size in &config.sizes {
        for (i, &ttl) in config.ttls.iter().enumerate() {
            // One mark write per number every TTL/3, and twice as many keep-alives.
            let writes = size as f64 * 3.0 / ttl as f64;
            if !config.all && writes > capacity_puts / 2.0 {
                skipped.push(format!(
                    "{size} holders at TTL {ttl} s: not run, since its mark writes alone \
                     ({writes:.0} Txn/s, besides {:.0} keep-alives/s) exceed half the \
                     measured capacity of {capacity_puts:.0} put/s: it would measure a \
                     saturated cluster (`--all` runs it anyway)",
                    2.0 * writes
                ));
                continue;
            }
            if let Some(run) = run_fleet(&config, &members, &meter, size, ttl, i == 0) {
                runs.push(run);
            }
            let now = cluster.leader();
            if now != meter.leader.get() {
                notes.push(format!(
                    "The leader changed during {size} holders at TTL {ttl} s (m{} to m{now}), \
                     most likely in the mass restart: later runs' leader figures are m{now}'s, \
                     while clients still talk to m{}",
                    meter.leader.get(),
                    leader
                ));
                meter.leader.set(now);
            }
        }
    }
    report(&config, &idle, capacity_puts, &capacity_load, &runs);
    for line in skipped.iter().chain(&notes) {
        println!("\n{line}.");
    }
}

fn report(config: &Config, idle: &Load, capacity_puts: f64, capacity: &Load, runs: &[Run]) {
    let cap_proposals = capacity.per_second(capacity.proposals);
    let pct = |part: f64, whole: f64| 100.0 * part / whole;
    println!("\n# What a fleet costs (a 3-member etcd cluster, members in network namespaces)\n");
    println!(
        "Clients talk to {}. Layout 41/0/14/8; holders in {} processes (one of them the {}-number restart \
         group), one store connection per process, {}; window {} s; outage horizon 180 s (the etcd default).\n",
        if config.spread {
            "all three members"
        } else {
            "the leader alone"
        },
        config.processes,
        config.restart,
        match config.group {
            0 => "one `LeasedShardedGenerator` (one keeper thread) per process".to_string(),
            1 => "one `LeasedGenerator` (one keeper thread) per number".to_string(),
            group =>
                format!("one `LeasedShardedGenerator` (one keeper thread) per {group} numbers"),
        },
        config.window.as_secs()
    );
    println!("## Capacity (32 clients doing `put` of 16-byte values)\n");
    println!("| put/s | proposals/s | leader CPU | 3 members' CPU | leader RSS |");
    println!("|---|---|---|---|---|");
    println!(
        "| {capacity_puts:.0} | {cap_proposals:.0} | {:.0} % | {:.0} % | {:.0} MB |",
        pct(capacity.leader_cpu, capacity.seconds),
        pct(capacity.cluster_cpu, capacity.seconds),
        capacity.leader_rss_mb
    );
    println!(
        "\nIdle cluster before any holder: leader CPU {:.1} %, RSS {:.0} MB.\n",
        pct(idle.leader_cpu, idle.seconds),
        idle.leader_rss_mb
    );
    println!("## Steady state: the fleet just holds\n");
    println!(
        "| holders | TTL | keep-alives/s | keep-alive streams opened/s | leases renewed/s (leader) | Txn/s | Range/s | \
         LeaseGrant/s | leases revoked or expired/s (leader) | Put/s | proposals/s | mvcc puts/s | \
         % of capacity (proposals) | % of capacity (all requests vs put/s) | leader CPU | \
         % of leader CPU at capacity | 3 members' CPU | leader RSS | renewals made/due | \
         failed renewals | not valid |"
    );
    println!(
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for run in runs {
        let l = &run.load;
        let requests = l.keepalives + l.txns + l.ranges + l.puts + l.grants + l.revokes;
        println!(
            "| {} | {} s | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | \
             {:.0} | {:.1} % | {:.1} % | {:.0} % | {:.0} % | {:.0} % | {:.0} MB | {}/{:.0} | {} | {} |",
            run.size,
            run.ttl,
            l.per_second(l.keepalives),
            l.per_second(l.keepalive_streams),
            l.per_second(l.lease_renewed),
            l.per_second(l.txns),
            l.per_second(l.ranges),
            l.per_second(l.grants),
            l.per_second(l.lease_revoked),
            l.per_second(l.puts),
            l.per_second(l.proposals),
            l.per_second(l.mvcc_puts),
            pct(l.per_second(l.proposals), cap_proposals),
            pct(l.per_second(requests), capacity_puts),
            pct(l.leader_cpu, l.seconds),
            pct(
                l.leader_cpu / l.seconds,
                capacity.leader_cpu / capacity.seconds
            ),
            pct(l.cluster_cpu, l.seconds),
            l.leader_rss_mb,
            run.renewals,
            run.renewals_due,
            run.failures,
            run.not_valid
        );
    }
    println!("\n## Start to first ID\n");
    println!(
        "Idle: a new `LeasedGenerator` on spare numbers whose marks have passed, store \
         already connected: acquire + first `next_id`. Restart: the process holding the \
         restart group SIGKILLed, a new one started at once with one thread, one store and \
         one `LeasedGenerator` per number, all at once, on the killed numbers plus as many \
         spares; time from the kill to each holder's first ID (includes the process's start \
         and the holder's own store connection), the connect and acquire alone, and the \
         time spent waiting for a previous holder's mark (at most).\n"
    );
    println!(
        "| holders | TTL | init (s) | processes | acquire fleet (s) | idle p50 / p99 / max (ms) | \
         restart n | connect p50 (ms) | restart p50 / p99 / max (ms) | connect + acquire p50 / p99 \
         (ms) | mark wait max (ms) | failed | all started or given up (ms) | rest of the fleet \
         meanwhile: failed renewals / numbers not valid |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for run in runs {
        let restart = run.restart.as_ref().map_or_else(
            || "- | - | - | - | - | - | - | -".to_string(),
            |r| {
                format!(
                    "{}/{} | {:.0} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} | {:.0} | {} | {:.0} | {} / {}",
                    r.total.count,
                    r.count,
                    r.connect_ms,
                    r.total.p50,
                    r.total.p99,
                    r.total.max,
                    r.acquire.p50,
                    r.acquire.p99,
                    r.mark_wait.max,
                    r.failed,
                    r.all_ms,
                    r.fleet_failures,
                    r.fleet_not_valid
                )
            },
        );
        println!(
            "| {} | {} s | {:.1} | {} | {:.1} | {:.1} / {:.1} / {:.1} | {restart} |",
            run.size,
            run.ttl,
            run.init_s,
            run.processes,
            run.acquire_s,
            run.idle.p50,
            run.idle.p99,
            run.idle.max,
        );
    }
    println!("\n## Goals\n");
    println!(
        "| holders | TTL | fleet ≤ 10 % of capacity | idle p99 < 100 ms | restart p99 < 2 s |"
    );
    println!("|---|---|---|---|---|");
    let verdict = |ok: bool| if ok { "yes" } else { "**no**" };
    for run in runs {
        let share = pct(run.load.per_second(run.load.proposals), cap_proposals);
        let cpu_share = pct(
            run.load.leader_cpu / run.load.seconds,
            capacity.leader_cpu / capacity.seconds,
        );
        let restart = run.restart.as_ref().map_or_else(
            || "- (restart measured at the first TTL)".to_string(),
            |r| {
                let all = r.total.count as u64 == r.count;
                if all {
                    format!("{} ({:.0} ms)", verdict(r.total.p99 < 2000.0), r.total.p99)
                } else {
                    format!(
                        "{} ({} of {} started within {} s)",
                        verdict(false),
                        r.total.count,
                        r.count,
                        RESTART_DEADLINE.as_secs()
                    )
                }
            },
        );
        println!(
            "| {} | {} s | {} ({share:.1} % of proposals, {cpu_share:.0} % of leader CPU) | {} \
             ({:.1} ms) | {restart} |",
            run.size,
            run.ttl,
            verdict(share <= 10.0 && cpu_share <= 10.0),
            verdict(run.idle.p99 < 100.0),
            run.idle.p99,
        );
    }
    println!(
        "\nPer number and renewal (every TTL/3) the protocol costs one keep-alive stream \
         opened, two keep-alives on it (etcd-client's `lease_keep_alive` sends one as it \
         opens the stream, and the claim then sends another), and one Txn that writes the \
         mark (a Raft proposal and a put): 9 × N / TTL requests a second, 3 × N / TTL of \
         them writes. What would cut it without changing what a mark guarantees: one etcd \
         lease per process for all its numbers, kept alive on one long-lived stream (N \
         keep-alive streams and 2N keep-alives per interval become one per process); the \
         marks of a process written in one Txn per renewal (one proposal per process, not \
         per number); using the keep-alive the stream opens with instead of sending a second \
         (a third fewer requests). Each acquire also reads every holder key and every mark \
         key of the datacenter (the survey, then the holder list again per number tried), so \
         starting one holder costs O(fleet) reads, and holders starting together all try the \
         same oldest-mark numbers first: a mass restart is a thundering herd on etcd, not a \
         wait for marks."
    );
}
