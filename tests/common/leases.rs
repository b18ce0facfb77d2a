//! Helpers for the lease tests: child processes that hold a leased generator and write the
//! IDs they issue to a file, a private etcd server, and ID-file checks.

#![allow(dead_code)] // the file-store tests use no etcd server

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use idgen::Generator;
use idgen::lease::{LeaseStore, LeasedGenerator, WorkerRange};

/// Polls `done` every 5 ms for up to 30 s; fails the test naming `what` if it never holds.
pub fn wait_for(what: &str, done: impl FnMut() -> bool) {
    wait_for_within(Duration::from_secs(30), what, done);
}

/// [`wait_for`] with a bound of the caller's.
pub fn wait_for_within(bound: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {bound:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `call` again while it fails with a store error (a server slow to answer on a
/// loaded machine, which is not what the tests are about), for up to a minute; any other
/// result is returned. Only for calls that may run twice: a connection, a survey, a
/// namespace's initialisation, a layout's binding; never an acquire, whose first attempt
/// may have taken a number without the answer arriving.
pub fn patiently<T>(
    what: &str,
    mut call: impl FnMut() -> Result<T, idgen::Error>,
) -> Result<T, idgen::Error> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match call() {
            Err(idgen::Error::LeaseStore { reason }) if Instant::now() < deadline => {
                eprintln!("{what}: trying again after: {reason}");
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// How long a child gets to start, or to stop once told, beyond any wait it was given: a
/// bound on a hang, not a speed the test expects.
const CHILD_BOUND: Duration = Duration::from_secs(60);

/// Environment variables a child reads (set by [`ChildSpec::spawn`]).
pub const ENV_STORE: &str = "IDGEN_TEST_CHILD_STORE";
const ENV_OUT: &str = "IDGEN_TEST_CHILD_OUT";
const ENV_RANGE: &str = "IDGEN_TEST_CHILD_RANGE";
const ENV_STOP: &str = "IDGEN_TEST_CHILD_STOP";
const ENV_STARTUP_WAIT_MS: &str = "IDGEN_TEST_CHILD_STARTUP_WAIT_MS";
const ENV_HORIZON_MS: &str = "IDGEN_TEST_CHILD_HORIZON_MS";
const ENV_EXPIRED_IS_FATAL: &str = "IDGEN_TEST_CHILD_EXPIRED_IS_FATAL";

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idgen-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path for a new lease directory (inside a fresh [`temp_dir`]): `FileStore::open`
/// creates it, and so initialises it.
pub fn new_store_dir(name: &str) -> PathBuf {
    temp_dir(name).join("leases")
}

/// How to start a child process of the current test binary.
pub struct ChildSpec<'a> {
    /// The `#[ignore]`d test that runs [`child_main`].
    pub test_name: &'a str,
    /// What the child's `store_from_env` reads.
    pub store: String,
    pub range: &'a str,
    pub out: PathBuf,
    /// The child stops (and releases) when this file exists.
    pub stop_file: PathBuf,
    /// Run under `faketime -f <offset>` with the monotonic clock left alone.
    pub faketime: Option<&'a str>,
    pub startup_wait: Duration,
    /// How far ahead the child writes its marks: how long its keeper may be starved of the
    /// CPU before it stops issuing, and how long its successor may wait. `None`: the TTL.
    pub horizon: Option<Duration>,
    /// Whether a refusal with `LeaseExpired` fails the child: where the test's point is
    /// that a holder is valid at once and stays so. Elsewhere it is a holder doing its job
    /// (a renewal held up, by a disk whose fsync stalls under load, past the mark): the
    /// child waits and tries again, and the test checks what it is about.
    pub expired_is_fatal: bool,
}

/// A running child, and the worker number it reported holding.
pub struct RunningChild {
    pub child: Child,
    pub worker: u64,
    pub previous_mark: Option<u64>,
    pub out: PathBuf,
    /// The child's stdout, a line at a time, from a reader thread (so every wait on it is
    /// bounded); closed when the child exits.
    lines: Receiver<String>,
}

/// Reads `child`'s stdout on a thread of its own and sends each line.
fn stdout_lines(child: &mut Child) -> Receiver<String> {
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

impl ChildSpec<'_> {
    // The child is returned to the caller, who kills or waits for it.
    #[allow(clippy::zombie_processes)]
    pub fn spawn(&self) -> RunningChild {
        let exe = std::env::current_exe().unwrap();
        let mut command = match self.faketime {
            Some(offset) => {
                let mut command = Command::new("faketime");
                command
                    .env("DONT_FAKE_MONOTONIC", "1")
                    .arg("-f")
                    .arg(offset)
                    .arg(&exe);
                command
            }
            None => Command::new(&exe),
        };
        command
            .args([
                "--ignored",
                "--exact",
                self.test_name,
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV_STORE, &self.store)
            .env(ENV_OUT, &self.out)
            .env(ENV_RANGE, self.range)
            .env(ENV_STOP, &self.stop_file)
            .env(
                ENV_STARTUP_WAIT_MS,
                self.startup_wait.as_millis().to_string(),
            )
            .env(ENV_EXPIRED_IS_FATAL, self.expired_is_fatal.to_string())
            .env(
                ENV_HORIZON_MS,
                self.horizon
                    .map_or(0, |horizon| horizon.as_millis())
                    .to_string(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().unwrap_or_else(|error| {
            panic!("cannot start the child process (is faketime installed?): {error}")
        });
        let lines = stdout_lines(&mut child);
        let deadline = Instant::now() + self.startup_wait + CHILD_BOUND;
        loop {
            let line = match lines.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => line,
                Err(RecvTimeoutError::Disconnected) => {
                    let status = child.wait();
                    panic!("the child exited ({status:?}) before it held a worker number");
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "the child held no worker number within {:?}",
                        self.startup_wait + CHILD_BOUND
                    );
                }
            };
            // libtest prints "test child_process ... " without a newline before it.
            if let Some((_, rest)) = line.trim().split_once("HELD ") {
                let mut fields = rest.split(' ');
                let worker = fields.next().unwrap().parse().unwrap();
                let previous_mark = match fields.next().unwrap() {
                    "none" => None,
                    mark => Some(mark.parse().unwrap()),
                };
                return RunningChild {
                    child,
                    worker,
                    previous_mark,
                    out: self.out.clone(),
                    lines,
                };
            }
        }
    }
}

impl RunningChild {
    /// SIGKILL: no release, no flush, no destructor. Fails if the child had already exited
    /// (it stops only when told to, so that was a failure).
    pub fn kill(mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let rest: Vec<String> = self.lines.try_iter().collect();
            panic!("the child exited ({status}) before it was killed: {rest:?}");
        }
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// How many whole IDs the child has written so far.
    pub fn written(&self) -> usize {
        fs::metadata(&self.out).map_or(0, |meta| meta.len() as usize / 8)
    }

    /// Waits (bounded) until the child has written `more` IDs beyond what it had now: it
    /// is issuing, whatever the machine's load.
    pub fn wait_for_more_ids(&self, more: usize) {
        let target = self.written() + more;
        wait_for_within(
            CHILD_BOUND,
            &format!("{more} more IDs from the child"),
            || self.written() >= target,
        );
    }

    /// Waits (bounded) for the child to exit on its own (after the stop file appears) and
    /// returns the count of IDs it reported writing.
    pub fn finish(mut self) -> u64 {
        let deadline = Instant::now() + CHILD_BOUND;
        let mut rest = Vec::new();
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => rest.push(line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!("the child did not stop within {CHILD_BOUND:?}: {rest:?}");
                }
            }
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "child exited with {status}: {rest:?}");
        rest.iter()
            .find_map(|line| Some(line.split_once("DONE ")?.1))
            .unwrap_or_else(|| panic!("the child did not report: {rest:?}"))
            .trim()
            .parse()
            .unwrap()
    }
}

/// A test that fails midway leaves no child issuing behind it (and holding its output).
impl Drop for RunningChild {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The body of a child process: lease a worker number from `store`, print `HELD <worker>
/// <previous mark|none>`, then issue IDs in small batches, appending each to the output
/// file as 8 little-endian bytes, until the stop file appears; release, print `DONE <n>`.
pub fn child_main(store: impl LeaseStore + 'static) {
    let range = WorkerRange::parse(0, &std::env::var(ENV_RANGE).unwrap()).unwrap();
    let out_path = PathBuf::from(std::env::var(ENV_OUT).unwrap());
    let stop = PathBuf::from(std::env::var(ENV_STOP).unwrap());
    let startup_wait: u64 = std::env::var(ENV_STARTUP_WAIT_MS).unwrap().parse().unwrap();
    // Marks a TTL ahead unless told otherwise, as before outage horizons: a killed holder's
    // number is free again after a TTL, which keeps these runs short. (The horizon has
    // tests of its own.)
    let horizon_ms: u64 = std::env::var(ENV_HORIZON_MS).unwrap().parse().unwrap();
    let expired_is_fatal: bool = std::env::var(ENV_EXPIRED_IS_FATAL)
        .unwrap()
        .parse()
        .unwrap();
    let horizon = match horizon_ms {
        0 => store.ttl(),
        ms => Duration::from_millis(ms),
    };
    let generator = LeasedGenerator::builder(store, range)
        .generator(Generator::builder())
        .outage_horizon(horizon)
        .startup_wait(Duration::from_millis(startup_wait))
        .acquire()
        .unwrap();
    let mut stdout = std::io::stdout();
    let previous = generator
        .lease_stats()
        .previous_mark_unix_ms
        .map_or("none".to_string(), |mark| mark.to_string());
    let worker = generator.worker();
    writeln!(stdout, "HELD {worker} {previous}").unwrap();
    stdout.flush().unwrap();
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out_path)
        .unwrap();
    let mut written = 0u64;
    let mut buffer = Vec::with_capacity(128 * 8);
    let mut last_check = Instant::now();
    loop {
        if last_check.elapsed() > Duration::from_millis(10) {
            last_check = Instant::now();
            if stop.exists() {
                break;
            }
        }
        match generator.next_ids(128) {
            Ok(ids) => {
                buffer.clear();
                for id in &ids {
                    buffer.extend_from_slice(&id.as_u64().to_le_bytes());
                }
                out.write_all(&buffer).unwrap();
                written += ids.len() as u64;
            }
            // Only while the number is still ours and not lost: a loss is the step before
            // a duplicate, and fails the child.
            Err(idgen::Error::LeaseExpired { .. })
                if !expired_is_fatal
                    && generator.worker() == worker
                    && generator.lease_stats().state != idgen::lease::LeaseState::Lost =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            // No other error is expected: a holder that just took its number over is valid
            // at once, and renewals keep it so.
            Err(error) => panic!(
                "child: {error} (at {} ms; {:?})",
                idgen::Clock::now_unix_ms(&idgen::SystemClock),
                generator.lease_stats()
            ),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    match generator.release() {
        Ok(()) => {}
        // A store still recovering (a crash the test caused) may not answer the release in
        // time: the number is then left to expire, which is no concern of the ID checks.
        Err(idgen::Error::LeaseStore { reason }) => {
            eprintln!("child: the release did not reach the store: {reason}")
        }
        Err(error) => panic!("child: release: {error}"),
    }
    writeln!(stdout, "DONE {written}").unwrap();
}

/// Enough IDs, across every process of an end-to-end run, for its duplicate check to mean
/// something.
const END_TO_END_IDS: usize = 50_000;

/// Ends an end-to-end run: waits (bounded) until the files hold [`END_TO_END_IDS`] and
/// every running child has issued since its start, tells the children to stop, waits for
/// them, and checks the union of every ID written (by the killed ones too) for
/// duplicates. Returns the count.
pub fn finish_end_to_end(
    label: &str,
    running: Vec<RunningChild>,
    files: &[PathBuf],
    stop: &Path,
) -> usize {
    // Every child still running is issuing at the end, not only at its start.
    for child in &running {
        child.wait_for_more_ids(1_000);
    }
    wait_for_within(CHILD_BOUND, &format!("{END_TO_END_IDS} IDs"), || {
        read_ids(files).len() > END_TO_END_IDS
    });
    fs::write(stop, b"").unwrap();
    let reported: u64 = running.into_iter().map(RunningChild::finish).sum();
    let ids = read_ids(files);
    println!(
        "end-to-end ({label}): {} IDs from {} processes",
        ids.len(),
        files.len()
    );
    assert!(ids.len() as u64 >= reported);
    assert!(ids.len() > END_TO_END_IDS, "{} IDs", ids.len());
    assert_no_duplicates(&ids);
    ids.len()
}

/// Every whole ID in the files (a trailing partial record from a killed writer is dropped).
pub fn read_ids(paths: &[PathBuf]) -> Vec<u64> {
    let mut ids = Vec::new();
    for path in paths {
        let Ok(bytes) = fs::read(path) else { continue };
        ids.extend(
            bytes
                .chunks_exact(8)
                .map(|chunk| u64::from_le_bytes(chunk.try_into().unwrap())),
        );
    }
    ids
}

/// Panics, naming one, if any ID appears twice.
pub fn assert_no_duplicates(ids: &[u64]) {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        let count = sorted.windows(2).filter(|pair| pair[0] == pair[1]).count();
        panic!("{count} duplicate IDs, for example {}", pair[0]);
    }
}

/// The largest ID a file holds.
pub fn max_id(path: &Path) -> Option<u64> {
    read_ids(&[path.to_path_buf()]).into_iter().max()
}

#[path = "etcd.rs"]
mod etcd;
#[allow(unused_imports)] // the file-store tests start no etcd server
pub use etcd::EtcdServer;

/// `count` layouts that all differ: the sequence field from 8 bits up, the worker field
/// taking the rest of 22 node-and-sequence bits.
pub fn distinct_layouts(count: u32) -> Vec<idgen::Layout> {
    (0..count)
        .map(|i| idgen::Layout::new(41, 0, 14 - i, 8 + i).unwrap())
        .collect()
}

/// Binds `layouts[i]` through `stores[i]`, all from threads released at once, and checks
/// that exactly one recorded its own: that one succeeds, every other is refused naming
/// both the winner's layout and its own, and the store then serves the winner's.
pub fn assert_exactly_one_layout_wins(stores: Vec<Box<dyn LeaseStore>>, layouts: &[idgen::Layout]) {
    let barrier = std::sync::Barrier::new(stores.len());
    let results: Vec<Result<(), idgen::Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .zip(layouts)
            .map(|(store, layout)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    // A binding that timed out may have been recorded: binding the same
                    // layout again then succeeds, so exactly one winner still holds.
                    patiently("binding a layout", || store.bind_layout(layout))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<usize> = (0..results.len()).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let winner = layouts[winners[0]];
    for (result, layout) in results.iter().zip(layouts) {
        match result {
            Ok(()) => {}
            Err(idgen::Error::LayoutMismatch { recorded, ours, .. }) => {
                assert_eq!(recorded, &winner.to_string());
                assert_eq!(ours, &layout.to_string());
            }
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
    assert_eq!(stores[0].recorded_layout().unwrap(), Some(winner));
}

/// What an issuer got: every ID, and every refusal with the time it came.
pub type Issued = (Vec<u64>, Vec<(u64, idgen::Error)>);

/// One holder issuing flat out on its own thread, as a service would: every call's result.
pub struct Issuer {
    pub generator: Arc<LeasedGenerator>,
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Issued>,
}

impl Issuer {
    pub fn start(generator: LeasedGenerator) -> Issuer {
        let generator = Arc::new(generator);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (generator, stop) = (Arc::clone(&generator), Arc::clone(&stop));
            thread::spawn(move || {
                let (mut ids, mut refusals) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    match generator.next_id() {
                        Ok(id) => ids.push(id.as_u64()),
                        Err(error) => {
                            refusals.push((idgen::Clock::now_unix_ms(generator.clock()), error));
                            thread::sleep(Duration::from_millis(5));
                        }
                    }
                    thread::sleep(Duration::from_micros(200));
                }
                (ids, refusals)
            })
        };
        Issuer {
            generator,
            stop,
            thread,
        }
    }

    pub fn finish(self) -> Issued {
        self.stop.store(true, Ordering::Relaxed);
        let results = self.thread.join().unwrap();
        Arc::try_unwrap(self.generator).unwrap().release().unwrap();
        results
    }
}

/// Child processes of one end-to-end run: each issues on `range` of the store `store`
/// names, writes its IDs to a file of its own under `dir`, and stops when the run's stop
/// file appears.
pub struct ChildFleet<'a> {
    pub test_name: &'a str,
    pub store: String,
    pub range: &'a str,
    pub dir: PathBuf,
    pub horizon: Duration,
    pub started: usize,
}

impl ChildFleet<'_> {
    pub fn stop_file(&self) -> PathBuf {
        self.dir.join("stop")
    }

    /// Starts one more child (under libfaketime's `faketime` offset, if given).
    pub fn spawn(&mut self, faketime: Option<&'static str>) -> RunningChild {
        self.started += 1;
        ChildSpec {
            test_name: self.test_name,
            store: self.store.clone(),
            range: self.range,
            out: self.dir.join(format!("ids-{}", self.started)),
            stop_file: self.stop_file(),
            faketime,
            // Children issuing beside each other (and beside other tests): a keeper may
            // be starved of the CPU for a while, which a mark a few seconds ahead rides out.
            startup_wait: Duration::from_secs(10),
            horizon: Some(self.horizon),
            expired_is_fatal: false,
        }
        .spawn()
    }

    /// SIGKILLs `running[kill]` a few thousand IDs in, waits (bounded) until `watcher`
    /// shows a number not held (a spare, or the killed one's once its holding ran out) and
    /// starts a replacement, pushed onto `running`; returns the killed child's number and
    /// the replacement's (worker, previous mark).
    pub fn kill_and_replace(
        &mut self,
        running: &mut Vec<RunningChild>,
        kill: usize,
        faketime: Option<&'static str>,
        watcher: &dyn LeaseStore,
    ) -> (u64, (u64, Option<u64>)) {
        running[kill].wait_for_more_ids(2_000);
        let victim = running.remove(kill);
        let killed = victim.worker;
        victim.kill();
        let range = WorkerRange::parse(0, self.range).unwrap();
        // (A survey the store is too busy to answer is asked again.)
        wait_for("a free number for the replacement", || {
            watcher.survey(&range).is_ok_and(|numbers| {
                numbers
                    .iter()
                    .any(|number| number.state != idgen::lease::NumberState::Held)
            })
        });
        let replacement = self.spawn(faketime);
        let taken = (replacement.worker, replacement.previous_mark);
        running.push(replacement);
        (killed, taken)
    }
}
