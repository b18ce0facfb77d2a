//! The embedded block store: no value granted twice, across threads and across processes
//! killed mid-grant; a block given back only when nobody took one since; deleted or
//! damaged files never restart a sequence.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use idgen::Error;
use idgen::blocks::{BlockStore, FileStore, Grant, MAX_VALUE, SequenceName};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idgen-blocks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn orders() -> SequenceName {
    SequenceName::new("orders").unwrap()
}

/// Blocks sorted by first value: none overlaps the next.
fn assert_disjoint(grants: &mut [Grant]) {
    grants.sort_by_key(|grant| grant.first);
    for pair in grants.windows(2) {
        assert!(pair[0].end <= pair[1].first, "overlap: {pair:?}");
    }
}

#[test]
fn threads_with_their_own_stores_never_share_a_value_and_leave_no_gap() {
    let dir = temp_dir("threads");
    let mut grants: Vec<Grant> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8u64)
            .map(|thread| {
                let dir = dir.clone();
                scope.spawn(move || {
                    let store = FileStore::open(&dir).unwrap();
                    (0..40)
                        .map(|i| store.grant(&orders(), 1 + (thread * 7 + i) % 50).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    });
    assert_disjoint(&mut grants);
    assert_eq!(grants[0].first, 1);
    assert!(
        grants.windows(2).all(|pair| pair[0].end == pair[1].first),
        "dense"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Run as a child process by the test below: grants blocks until killed, printing each
/// right after the store returned it.
#[test]
fn worker_process() {
    let Ok(dir) = std::env::var("IDGEN_BLOCKS_WORKER_DIR") else {
        return;
    };
    let store = FileStore::open(dir).unwrap();
    for i in 0.. {
        let grant = store.grant(&orders(), 1 + i % 97).unwrap();
        println!("grant {} {}", grant.first, grant.end);
    }
}

#[test]
fn processes_killed_mid_grant_and_restarted_never_share_a_value() {
    let dir = temp_dir("processes");
    FileStore::open(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut grants = Vec::new();
    for round in 0..3u64 {
        let mut children: Vec<_> = (0..6)
            .map(|_| {
                Command::new(&exe)
                    .args([
                        "--exact",
                        "worker_process",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("IDGEN_BLOCKS_WORKER_DIR", &dir)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150 + 50 * round));
        for child in &mut children {
            // SIGKILL: wherever it is, in a grant or between two.
            child.kill().unwrap();
        }
        for mut child in children {
            child.wait().unwrap();
            let out = BufReader::new(child.stdout.take().unwrap());
            for line in out.lines().map_while(Result::ok) {
                let mut words = line.split(' ');
                if words.next() != Some("grant") {
                    continue;
                }
                let (Some(first), Some(end)) = (words.next(), words.next()) else {
                    continue; // a line cut by the kill
                };
                if let (Ok(first), Ok(end)) = (first.parse(), end.parse()) {
                    grants.push(Grant { first, end });
                }
            }
        }
    }
    assert!(grants.len() > 100, "only {} grants seen", grants.len());
    assert_disjoint(&mut grants);
    // And the store goes on above everything any of them was granted.
    let next = FileStore::open(&dir).unwrap().grant(&orders(), 1).unwrap();
    assert!(next.first >= grants.last().unwrap().end);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_block_is_taken_back_only_when_nobody_was_granted_since() {
    let dir = temp_dir("give-back");
    let store = FileStore::open(&dir).unwrap();
    let block = store.grant(&orders(), 100).unwrap();
    let unused = Grant {
        first: block.first + 40,
        end: block.end,
    };
    assert_eq!(store.give_back(&orders(), unused), Ok(true));
    assert_eq!(store.grant(&orders(), 10).unwrap().first, unused.first);
    // Someone was granted a block since: the tail is a gap, not handed out again.
    let mine = store.grant(&orders(), 100).unwrap();
    let theirs = store.grant(&orders(), 5).unwrap();
    let tail = Grant {
        first: mine.first + 50,
        end: mine.end,
    };
    assert_eq!(store.give_back(&orders(), tail), Ok(false));
    assert_eq!(store.grant(&orders(), 1).unwrap().first, theirs.end);
    assert!(matches!(
        store.give_back(&orders(), Grant { first: 0, end: 5 }),
        Err(Error::BlockStore { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

fn write_record(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn deleting_either_file_loses_nothing_and_a_damaged_one_is_refused() {
    let dir = temp_dir("tamper");
    let store = FileStore::open(&dir).unwrap();
    let first = store.grant(&orders(), 10).unwrap();
    std::fs::remove_file(dir.join("orders.next")).unwrap();
    let second = store.grant(&orders(), 10).unwrap();
    assert_eq!(
        second.first, first.end,
        "continued from the lock file's copy"
    );
    std::fs::remove_file(dir.join("orders.lock")).unwrap();
    let third = store.grant(&orders(), 10).unwrap();
    assert_eq!(third.first, second.end, "continued from the record");
    write_record(&dir.join("orders.next"), "next=1\n");
    assert!(matches!(
        store.grant(&orders(), 10),
        Err(Error::BlockStore { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_end_of_the_i64_range_is_a_clear_error() {
    let dir = temp_dir("end");
    let store = FileStore::open(&dir).unwrap();
    store.grant(&orders(), 1).unwrap();
    let near_end = MAX_VALUE - 2;
    write_record(
        &dir.join("orders.next"),
        &format!("idgen-blocks v1\nnext={near_end:020}\n"),
    );
    let last = store.grant(&orders(), 1_000).unwrap();
    assert_eq!((last.first, last.end), (near_end, MAX_VALUE + 1));
    assert_eq!(
        store.grant(&orders(), 1),
        Err(Error::SequenceExhausted {
            sequence: "orders".into()
        })
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_path_that_is_not_a_directory_is_refused() {
    let dir = temp_dir("not-a-dir");
    std::fs::write(&dir, "a file").unwrap();
    assert!(matches!(
        FileStore::open(&dir),
        Err(Error::BlockStore { .. })
    ));
    std::fs::remove_file(&dir).ok();
}
