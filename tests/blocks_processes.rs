//! No value handed out twice by block allocators in 6 processes, SIGKILLed or stopped
//! cleanly mid-block and restarted, on the file store and on PostgreSQL (feature
//! `postgres`, the server `.ci/test` starts).

#[path = "common/blocks.rs"]
mod blocks;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use blocks::{PATIENT_WAIT, assert_increasing, temp_path};
use idgen::blocks::{BlockAllocator, BlockStore, FileStore};

const ENV_STORE: &str = "IDGEN_TEST_BLOCKS_STORE";
const ENV_SEQUENCE: &str = "IDGEN_TEST_BLOCKS_SEQUENCE";

fn store_from(spec: &str) -> Box<dyn BlockStore> {
    match spec.split_once(':') {
        Some(("file", dir)) => Box::new(FileStore::open(dir).unwrap()),
        #[cfg(feature = "postgres")]
        Some(("postgres", url)) => Box::new(idgen::blocks::PostgresStore::connect(url).unwrap()),
        _ => panic!("unknown store {spec}"),
    }
}

/// The line a child prints before its first value. The test harness prints
/// `test child_process ... ` without a newline just before the test starts, so the first line
/// a child prints shares that line; this one is expendable, the values come after it.
const STARTED: &str = "STARTED";
/// Values each child must have printed in a round before it is stopped: 3 rounds of 6
/// children then see more than 1,000 values.
const VALUES_PER_ROUND: usize = 60;
/// The longest the parent waits for the children's values in a round.
const ROUND_WITHIN: Duration = Duration::from_secs(60);

/// A child: an allocator with small, adapting blocks, printing `STARTED`, then `V <value>`
/// for each value it hands out until its stdin closes; then it closes the allocator and
/// prints `CLOSED <given back>`.
#[test]
#[ignore = "run by the tests below as a child process"]
fn child_process() {
    let store = store_from(&std::env::var(ENV_STORE).unwrap());
    let sequence = std::env::var(ENV_SEQUENCE).unwrap();
    let alloc = BlockAllocator::builder(store, &sequence)
        .unwrap()
        .block_size(20)
        .block_size_bounds(5, 80)
        .target_block_lifetime(Duration::from_millis(5))
        .max_wait(PATIENT_WAIT)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            stop.store(true, Ordering::SeqCst);
        });
    }
    println!("{STARTED}");
    while !stop.load(Ordering::SeqCst) {
        for value in alloc.next_n(3).unwrap() {
            println!("V {value}");
        }
    }
    println!("CLOSED {}", alloc.close().unwrap());
}

/// What a child's reader thread tells the parent.
enum Event {
    /// The child printed a value.
    Value(usize),
    /// The child's stdout closed (it ended, or was killed).
    Ended(usize),
}

/// Reads child `i`'s stdout, keeping only whole lines (one cut by a kill has no newline: a
/// value never handed out), and reports each value line and the end on `events`.
fn read_child(
    i: usize,
    out: std::process::ChildStdout,
    events: mpsc::Sender<Event>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut out = BufReader::new(out);
        let mut lines = Vec::new();
        let failed = loop {
            let mut line = String::new();
            match out.read_line(&mut line) {
                Ok(0) => break None,
                Ok(_) if !line.ends_with('\n') => break None, // cut by a kill
                Ok(_) => {
                    line.pop();
                    if value_of(&line).is_some() {
                        // The parent may have stopped listening: it has seen enough.
                        let _ = events.send(Event::Value(i));
                    }
                    lines.push(line);
                }
                Err(error) => break Some(error),
            }
        };
        let _ = events.send(Event::Ended(i));
        if let Some(error) = failed {
            panic!("child {i}: reading its output: {error}");
        }
        lines
    })
}

/// The value a `V <value>` line holds.
fn value_of(line: &str) -> Option<u64> {
    line.strip_prefix("V ")?.parse().ok()
}

/// Waits until each child has printed `VALUES_PER_ROUND` values, at most `ROUND_WITHIN`;
/// fails naming the children that did not, or the first that ended before.
fn wait_for_values(round: u64, children: usize, events: &mpsc::Receiver<Event>) {
    let deadline = Instant::now() + ROUND_WITHIN;
    let mut counts = vec![0; children];
    while counts.iter().any(|&count| count < VALUES_PER_ROUND) {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(Event::Value(i)) => counts[i] += 1,
            Ok(Event::Ended(i)) => panic!(
                "round {round}: child {i} ended after {} values, before it was stopped",
                counts[i]
            ),
            Err(_) => {
                let slow: Vec<String> = (0..children)
                    .filter(|&i| counts[i] < VALUES_PER_ROUND)
                    .map(|i| format!("child {i} ({} values)", counts[i]))
                    .collect();
                panic!(
                    "round {round}: within {ROUND_WITHIN:?}, {} did not print \
                     {VALUES_PER_ROUND} values",
                    slow.join(", ")
                );
            }
        }
    }
}

/// Runs 3 rounds of 6 children on `store`: in each, once every child has handed out
/// `VALUES_PER_ROUND` values, 4 are SIGKILLed and 2 stopped cleanly; every value any of
/// them printed is unique, each child's increase, and the sequence goes on above them all.
fn six_processes_killed_and_restarted(store: &str) {
    let sequence = format!(
        "procs-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros()
    );
    let exe = std::env::current_exe().unwrap();
    let mut seen = HashSet::new();
    let mut max_seen = 0;
    for round in 0..3u64 {
        let mut children: Vec<_> = (0..6)
            .map(|_| {
                Command::new(&exe)
                    .args(["--ignored", "--exact", "child_process", "--nocapture"])
                    .args(["--test-threads=1"])
                    .env(ENV_STORE, store)
                    .env(ENV_SEQUENCE, &sequence)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let (events, received) = mpsc::channel();
        let readers: Vec<_> = children
            .iter_mut()
            .enumerate()
            .map(|(i, child)| read_child(i, child.stdout.take().unwrap(), events.clone()))
            .collect();
        drop(events);
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for_values(round, 6, &received)
        }));
        if let Err(panic) = waited {
            // Not left running: they would hold the sequence's store for nothing.
            for child in &mut children {
                let _ = child.kill();
                let _ = child.wait();
            }
            std::panic::resume_unwind(panic);
        }
        for (i, child) in children.iter_mut().enumerate() {
            if i < 4 {
                // SIGKILL: wherever it is, mid-block, mid-grant or mid-print.
                child.kill().unwrap();
            } else {
                drop(child.stdin.take()); // a clean stop: close and give back
            }
        }
        for (i, (mut child, reader)) in children.into_iter().zip(readers).enumerate() {
            // Bounded: a child that does not stop once its stdin closes fails the test.
            let deadline = Instant::now() + Duration::from_secs(60);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("child {i} did not stop within 60 s");
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            let lines = reader.join().unwrap();
            if i < 4 {
                assert_eq!(status.signal(), Some(9), "child {i}: {status}");
            } else {
                assert!(status.success(), "child {i}: {status}");
                assert!(
                    lines.iter().any(|line| line.starts_with("CLOSED ")),
                    "child {i} did not close"
                );
            }
            // Every value is on a line of its own, after the harness's text: none is lost.
            let started = lines
                .iter()
                .position(|line| line.ends_with(STARTED))
                .unwrap_or_else(|| panic!("round {round} child {i}: no {STARTED} line"));
            let values: Vec<u64> = lines[started + 1..]
                .iter()
                .filter_map(|line| value_of(line))
                .collect();
            if let Some(line) = lines
                .iter()
                .find(|line| line.contains("V ") && value_of(line).is_none())
            {
                panic!("round {round} child {i}: a value on a line not its own: {line:?}");
            }
            assert!(
                values.len() >= VALUES_PER_ROUND,
                "child {i} handed out {}",
                values.len()
            );
            assert_increasing(&format!("round {round} child {i}"), &values);
            for value in values {
                assert!(seen.insert(value), "{value} handed out twice");
                max_seen = max_seen.max(value);
            }
        }
    }
    // The sequence goes on above everything handed out.
    let store = store_from(store);
    let alloc = BlockAllocator::builder(store, &sequence)
        .unwrap()
        .max_wait(PATIENT_WAIT)
        .build()
        .unwrap();
    assert!(alloc.next().unwrap() > max_seen);
    assert!(seen.len() > 1_000, "only {} values", seen.len());
}

#[test]
fn six_processes_on_the_file_store() {
    let dir = temp_path("blocks-procs");
    six_processes_killed_and_restarted(&format!("file:{}", dir.display()));
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(feature = "postgres")]
#[test]
fn six_processes_on_postgres() {
    six_processes_killed_and_restarted(&format!("postgres:{}", blocks::postgres_url()));
}
