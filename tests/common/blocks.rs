//! Helpers for the block tests: an in-memory store with a switch and a count, value checks,
//! and a private PostgreSQL server for tests that restart it.

#![allow(dead_code)] // each test binary uses some of these

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;
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

#[path = "postgres.rs"]
mod postgres;
#[allow(unused_imports)] // not every block test starts a server
pub use postgres::{PostgresServer, postgres_url};
