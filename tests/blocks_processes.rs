//! No value handed out twice by block allocators in 6 processes, SIGKILLed or stopped
//! cleanly mid-block and restarted, on the file store and on PostgreSQL (feature
//! `postgres`, the server `.ci/test` starts).

#[path = "common/blocks.rs"]
mod blocks;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blocks::{assert_increasing, temp_path};
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

/// A child: an allocator with small, adapting blocks, printing `V <value>` for each value
/// it hands out until its stdin closes; then it closes the allocator and prints
/// `CLOSED <given back>`.
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
        .max_wait(Duration::from_secs(10))
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
    while !stop.load(Ordering::SeqCst) {
        for value in alloc.next_n(3).unwrap() {
            println!("V {value}");
        }
    }
    println!("CLOSED {}", alloc.close().unwrap());
}

/// Runs 3 rounds of 6 children on `store`: in each, 4 are SIGKILLed and 2 stopped
/// cleanly; every value any of them printed is unique, and each child's increase.
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
        let readers: Vec<_> = children
            .iter_mut()
            .map(|child| {
                let out = BufReader::new(child.stdout.take().unwrap());
                std::thread::spawn(move || out.lines().map_while(Result::ok).collect::<Vec<_>>())
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300 + 100 * round));
        for (i, child) in children.iter_mut().enumerate() {
            if i < 4 {
                // SIGKILL: wherever it is, mid-block, mid-grant or mid-print.
                child.kill().unwrap();
            } else {
                drop(child.stdin.take()); // a clean stop: close and give back
            }
        }
        for (i, (mut child, reader)) in children.into_iter().zip(readers).enumerate() {
            let status = child.wait().unwrap();
            let lines = reader.join().unwrap();
            if i < 4 {
                assert_eq!(status.signal(), Some(9), "child {i}: {status}");
            } else {
                assert!(status.success(), "child {i}: {status}");
                assert!(
                    lines.iter().any(|line| line.contains("CLOSED ")),
                    "child {i} did not close"
                );
            }
            // A line cut by the kill is a value never handed out.
            let values: Vec<u64> = lines
                .iter()
                .filter_map(|line| line.trim().strip_prefix("V ")?.parse().ok())
                .collect();
            assert!(values.len() > 20, "child {i} handed out {}", values.len());
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
