//! The embedded block store: no value granted twice across threads (processes killed
//! mid-block are in blocks_processes.rs); a block given back only while it is the latest
//! change; deleted, replaced or damaged files never restart a sequence.

use std::path::PathBuf;
use std::time::Duration;

use idgen::Error;
use idgen::blocks::{BlockStore, FileStore, Grant, SequenceName};

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

#[test]
fn a_block_is_taken_back_only_while_it_is_the_latest_change() {
    let dir = temp_dir("give-back");
    let store = FileStore::open(&dir).unwrap();
    let block = store.grant(&orders(), 100).unwrap();
    assert_eq!(
        store.give_back(&orders(), &block, block.first + 40),
        Ok(true)
    );
    assert_eq!(store.grant(&orders(), 10).unwrap().first, block.first + 40);
    // Someone was granted a block since: the tail is a gap, not handed out again.
    let mine = store.grant(&orders(), 100).unwrap();
    let theirs = store.grant(&orders(), 5).unwrap();
    assert_eq!(
        store.give_back(&orders(), &mine, mine.first + 50),
        Ok(false)
    );
    assert_eq!(store.grant(&orders(), 1).unwrap().first, theirs.end);
    // A give-back repeated (a lost reply, a retry) is refused the second time, even when a
    // later block happens to end where the first did.
    let again = store.grant(&orders(), 10).unwrap();
    assert_eq!(store.give_back(&orders(), &again, again.first), Ok(true));
    let reissued = store.grant(&orders(), 10).unwrap();
    assert_eq!((reissued.first, reissued.end), (again.first, again.end));
    assert_eq!(store.give_back(&orders(), &again, again.first), Ok(false));
    assert_eq!(store.grant(&orders(), 1).unwrap().first, reissued.end);
    for (first, end, from) in [(0, 5, 1), (5, 4, 5), (1, 5, 0), (1, 5, 6)] {
        let grant = Grant {
            first,
            end,
            serial: 1,
        };
        assert!(matches!(
            store.give_back(&orders(), &grant, from),
            Err(Error::BlockStore { .. })
        ));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn deleting_either_file_loses_nothing_and_a_damaged_one_is_refused() {
    let dir = temp_dir("tamper");
    let store = FileStore::open(&dir).unwrap();
    let first = store.grant(&orders(), 10).unwrap();
    std::fs::remove_file(dir.join("orders/next")).unwrap();
    let second = store.grant(&orders(), 10).unwrap();
    assert_eq!(second.first, first.end, "continued from the copy");
    std::fs::remove_file(dir.join("orders/copy")).unwrap();
    let third = store.grant(&orders(), 10).unwrap();
    assert_eq!(third.first, second.end, "continued from the record");
    // Deleted again, and again: each time the other file carries on.
    for _ in 0..2 {
        std::fs::remove_file(dir.join("orders/copy")).unwrap();
        let before = store.grant(&orders(), 10).unwrap();
        std::fs::remove_file(dir.join("orders/next")).unwrap();
        assert_eq!(store.grant(&orders(), 10).unwrap().first, before.end);
    }
    std::fs::write(dir.join("orders/next"), "next=1\n").unwrap();
    assert!(matches!(
        store.grant(&orders(), 10),
        Err(Error::BlockStore { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn deleting_both_files_of_a_known_sequence_is_an_error_not_a_restart_at_1() {
    let dir = temp_dir("both-gone");
    let store = FileStore::open(&dir).unwrap();
    store.grant(&orders(), 10).unwrap();
    std::fs::remove_file(dir.join("orders/next")).unwrap();
    std::fs::remove_file(dir.join("orders/copy")).unwrap();
    match store.grant(&orders(), 10) {
        Err(Error::BlockStore { reason }) => assert!(reason.contains("are gone"), "{reason}"),
        other => panic!("expected an error, got {other:?}"),
    }
    // So is the sequence's whole directory, for a store opened afresh (no memory of it).
    std::fs::remove_dir_all(dir.join("orders")).unwrap();
    assert!(matches!(
        FileStore::open(&dir).unwrap().grant(&orders(), 10),
        Err(Error::BlockStore { .. })
    ));
    // Another sequence is new, and starts at 1.
    let invoices = SequenceName::new("invoices").unwrap();
    assert_eq!(store.grant(&invoices, 10).unwrap().first, 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_sequence_directory_moved_while_a_grant_waits_is_locked_again() {
    // A holder keeps the lock while the directory is moved away and a copy put in its
    // place: a grant that waited on the old one must not go ahead while another can lock
    // the new one.
    let dir = temp_dir("moved-dir");
    let store = FileStore::open(&dir).unwrap();
    store.grant(&orders(), 10).unwrap();
    let held = std::fs::File::open(dir.join("orders")).unwrap();
    held.lock().unwrap();
    let waiter = {
        let store = store.clone();
        std::thread::spawn(move || store.grant(&orders(), 10).unwrap())
    };
    std::thread::sleep(Duration::from_millis(100));
    std::fs::rename(dir.join("orders"), dir.join("orders-old")).unwrap();
    std::fs::create_dir(dir.join("orders")).unwrap();
    for file in ["next", "copy"] {
        std::fs::copy(
            dir.join("orders-old").join(file),
            dir.join("orders").join(file),
        )
        .unwrap();
    }
    // A grant takes the new directory's lock now, while the waiter still waits on the old.
    let meanwhile = store.grant(&orders(), 10).unwrap();
    drop(held);
    let waited = waiter.join().unwrap();
    assert_disjoint(&mut [meanwhile, waited]);
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
