//! Helpers for the block tests: an in-memory store with a switch and a count, value checks,
//! and a private PostgreSQL server for tests that restart it.

#![allow(dead_code)] // each test binary uses some of these

use std::collections::HashSet;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idgen::Error;
use idgen::blocks::{BlockStore, Grant, MAX_VALUE, SequenceName};

/// A store in memory: one counter per test, grants that can be made to fail or to hang
/// until released, and a log of every grant's size.
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<MemoryInner>,
}

#[derive(Default)]
pub struct MemoryInner {
    /// The sequence's record: (next value, serial).
    record: Mutex<(u64, u64)>,
    pub failing: AtomicBool,
    pub hanging: AtomicBool,
    pub grants: AtomicU64,
    pub sizes: Mutex<Vec<u64>>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        let store = MemoryStore::default();
        *store.inner.record.lock().unwrap() = (1, 0);
        store
    }

    /// A store whose next value is `next` (to test the end of the range).
    pub fn starting_at(next: u64) -> MemoryStore {
        let store = MemoryStore::new();
        store.inner.record.lock().unwrap().0 = next;
        store
    }

    pub fn next_value(&self) -> u64 {
        self.inner.record.lock().unwrap().0
    }

    pub fn set_next(&self, next: u64) {
        self.inner.record.lock().unwrap().0 = next;
    }

    pub fn fail(&self, on: bool) {
        self.inner.failing.store(on, Ordering::SeqCst);
    }

    pub fn hang(&self, on: bool) {
        self.inner.hanging.store(on, Ordering::SeqCst);
    }

    pub fn grants(&self) -> u64 {
        self.inner.grants.load(Ordering::SeqCst)
    }

    pub fn sizes(&self) -> Vec<u64> {
        self.inner.sizes.lock().unwrap().clone()
    }
}

impl BlockStore for MemoryStore {
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error> {
        while self.inner.hanging.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.inner.grants.fetch_add(1, Ordering::SeqCst);
        if self.inner.failing.load(Ordering::SeqCst) {
            return Err(Error::BlockStore {
                reason: "the test store is failing".into(),
            });
        }
        let mut record = self.inner.record.lock().unwrap();
        if record.0 > MAX_VALUE {
            return Err(Error::SequenceExhausted {
                sequence: sequence.to_string(),
            });
        }
        let first = record.0;
        let end = first.saturating_add(size.max(1)).min(MAX_VALUE + 1);
        record.0 = end;
        record.1 += 1;
        self.inner.sizes.lock().unwrap().push(end - first);
        Ok(Grant {
            first,
            end,
            serial: record.1,
        })
    }

    fn give_back(&self, _: &SequenceName, grant: &Grant, unused_from: u64) -> Result<bool, Error> {
        let mut record = self.inner.record.lock().unwrap();
        if *record != (grant.end, grant.serial) {
            return Ok(false);
        }
        *record = (unused_from, record.1 + 1);
        Ok(true)
    }
}

/// Fails if any value appears twice; returns how many there were.
pub fn assert_unique<'a>(runs: impl IntoIterator<Item = &'a Vec<u64>>) -> usize {
    let mut seen = HashSet::new();
    for values in runs {
        for &value in values {
            assert!(seen.insert(value), "value {value} handed out twice");
        }
    }
    seen.len()
}

/// Fails unless `values` strictly increase.
pub fn assert_increasing(what: &str, values: &[u64]) {
    if let Some(pair) = values.windows(2).find(|pair| pair[0] >= pair[1]) {
        panic!("{what}: {} then {}", pair[0], pair[1]);
    }
}

/// The longest a call may wait for a real store (the file store `fsync`s each grant, and
/// PostgreSQL commits it) in tests about something else than that wait: under load, with
/// other processes writing to the same disk, a grant can take longer than the default 2 s.
pub const PATIENT_WAIT: Duration = Duration::from_secs(60);

/// Polls `done` every 2 ms for up to 10 s; fails naming `what` if it never holds.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A fresh directory path (not created) under the system temp dir.
pub fn temp_path(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("idgen-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&path);
    path
}

/// The shared PostgreSQL server `.ci/test` starts.
pub fn postgres_url() -> String {
    std::env::var("IDGEN_POSTGRES_URL").expect(
        "IDGEN_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL",
    )
}

/// A private PostgreSQL server on loopback in a temporary directory, for tests that
/// restart it; stopped and removed on drop. As root it runs as the `postgres` user (the
/// server refuses root).
pub struct PostgresServer {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
}

impl PostgresServer {
    pub fn start(name: &str) -> PostgresServer {
        let bin = postgres_bin();
        let dir = temp_path(&format!("pg-{name}"));
        fs::create_dir_all(&dir).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = PostgresServer { dir, bin, port };
        if is_root() {
            let status = Command::new("chown")
                .arg("postgres:")
                .arg(&server.dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
        server.run(
            "initdb",
            &["-D", &server.data(), "-A", "trust", "-U", "postgres"],
        );
        server.pg_ctl("start");
        server
    }

    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast`: clients are disconnected, the server is back when it returns.
    pub fn restart_fast(&self) {
        self.pg_ctl("restart");
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn pg_ctl(&self, action: &str) {
        let options = format!("-k {} -p {} -h 127.0.0.1", self.dir.display(), self.port);
        let log = self.dir.join("log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log,
                "-m",
                "fast",
                "-w",
                action,
            ],
        );
    }

    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let output = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .output()
        } else {
            Command::new(&program).args(args).output()
        }
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
        assert!(
            output.status.success(),
            "{} {args:?} failed: {}{}",
            program.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let _ = Command::new(if is_root() { "runuser" } else { "env" })
            .args(if is_root() {
                vec!["-u", "postgres", "--"]
            } else {
                vec![]
            })
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb` (Debian's layout).
fn postgres_bin() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir(root)
        .unwrap_or_else(|error| panic!("no PostgreSQL under {}: {error}", root.display()))
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .unwrap_or_else(|| panic!("no initdb under {}", root.display()))
        .1
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0")
}
