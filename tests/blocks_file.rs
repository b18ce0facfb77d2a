//! The embedded block store: no value granted twice across threads (processes killed
//! mid-block are in blocks_processes.rs); a block given back only while it is the latest
//! change; deleted, replaced or damaged files never restart a sequence; no sequence name
//! reaches the store's own files, and a store of the old layout keeps what it knew.

use std::path::{Path, PathBuf};
use std::time::Duration;

use idgen::Error;
use idgen::blocks::{BlockStore, FileStore, Grant, SequenceName};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idgen-blocks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Waits (bounded) until this process has `path` open `count` times, as
/// `/proc/self/fd` shows: a grant opens the directory it then waits to lock.
fn wait_until_open(path: &Path, count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let open = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .filter(|target| target == path)
            .count();
        if open >= count {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} open {open} times, not {count}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn orders() -> SequenceName {
    SequenceName::new("orders").unwrap()
}

/// The roster's file name is part of the documented layout, which these tests hold it to.
const ROSTER: &str = "roster.idgen";

/// Where older versions kept the roster.
const LEGACY_ROSTER: &str = "roster";

/// Refused as a sequence whose files are gone, not restarted at 1.
fn assert_files_gone(store: &FileStore, sequence: &SequenceName) {
    match store.grant(sequence, 10) {
        Err(Error::BlockStore { reason }) => assert!(reason.contains("are gone"), "{reason}"),
        other => panic!("{sequence}: expected its files to be missed, got {other:?}"),
    }
}

/// Copies a sequence's record files from one store directory to another.
fn copy_sequence_files(from: &Path, to: &Path, sequence: &SequenceName) {
    std::fs::create_dir(to.join(sequence.as_str())).unwrap();
    for file in ["next", "copy"] {
        let path = Path::new(sequence.as_str()).join(file);
        std::fs::copy(from.join(&path), to.join(&path)).unwrap();
    }
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
    // The waiter has opened the directory, so it waits on that one, whatever comes next.
    wait_until_open(&dir.join("orders"), 2);
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

#[test]
fn a_sequence_named_roster_leaves_every_other_sequence_working_across_a_restart() {
    // Issue 24: the sequence `roster` made its directory where the roster file belonged,
    // and every sequence failed from then on, before and after a restart.
    let dir = temp_dir("named-roster");
    let roster = SequenceName::new("roster").unwrap();
    let invoices = SequenceName::new("invoices").unwrap();
    let store = FileStore::open(&dir).unwrap();
    assert_eq!(store.grant(&roster, 10).unwrap().first, 1);
    assert_eq!(store.grant(&orders(), 10).unwrap().first, 1);
    let restarted = FileStore::open(&dir).unwrap();
    assert_eq!(restarted.grant(&invoices, 10).unwrap().first, 1);
    assert_eq!(restarted.grant(&orders(), 10).unwrap().first, 11);
    assert_eq!(restarted.grant(&roster, 10).unwrap().first, 11);
    // `roster` is on the roster like any other sequence.
    std::fs::remove_dir_all(dir.join("roster")).unwrap();
    assert_files_gone(&FileStore::open(&dir).unwrap(), &roster);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_store_broken_by_a_sequence_named_roster_under_an_older_version_works_again() {
    // What an older version left after a first request for `roster`: the sequence's
    // directory with an empty copy (its grant failed, so nothing was handed out).
    let dir = temp_dir("broken-by-roster");
    std::fs::create_dir_all(dir.join(LEGACY_ROSTER)).unwrap();
    std::fs::write(dir.join(LEGACY_ROSTER).join("copy"), "").unwrap();
    let store = FileStore::open(&dir).unwrap();
    assert_eq!(store.grant(&orders(), 10).unwrap().first, 1);
    let roster = SequenceName::new("roster").unwrap();
    assert_eq!(store.grant(&roster, 10).unwrap().first, 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_store_of_the_old_layout_keeps_knowing_its_sequences() {
    let invoices = SequenceName::new("invoices").unwrap();
    // Sequence files are the same in every version: make them in a scratch store.
    let scratch = temp_dir("old-layout-scratch");
    let scratch_store = FileStore::open(&scratch).unwrap();
    scratch_store.grant(&orders(), 10).unwrap();
    scratch_store.grant(&invoices, 10).unwrap();
    // A store an older version made: `orders`, on the legacy roster.
    let dir = temp_dir("old-layout");
    std::fs::create_dir(&dir).unwrap();
    copy_sequence_files(&scratch, &dir, &orders());
    std::fs::write(dir.join(LEGACY_ROSTER), "orders\n").unwrap();
    let store = FileStore::open(&dir).unwrap();
    // The legacy file holds the place of the sequence `roster`: that one name is refused,
    // saying why, and touches nothing.
    match store.grant(&SequenceName::new("roster").unwrap(), 10) {
        Err(Error::BlockStore { reason }) => assert!(reason.contains("older idgen"), "{reason}"),
        other => panic!("expected the sequence roster to be refused, got {other:?}"),
    }
    assert_eq!(std::fs::read(dir.join(LEGACY_ROSTER)).unwrap(), b"orders\n");
    // An older process beside this one, in a rolling upgrade, starts `invoices` and lists it
    // on the legacy roster only.
    copy_sequence_files(&scratch, &dir, &invoices);
    let mut legacy = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join(LEGACY_ROSTER))
        .unwrap();
    std::io::Write::write_all(&mut legacy, b"invoices\n").unwrap();
    drop(legacy);
    for sequence in [orders(), invoices] {
        std::fs::remove_dir_all(dir.join(sequence.as_str())).unwrap();
        assert_files_gone(&store, &sequence);
    }
    // What the legacy roster held when the store was opened was carried over: it counts
    // without the legacy file.
    std::fs::remove_file(dir.join(LEGACY_ROSTER)).unwrap();
    assert_files_gone(&FileStore::open(&dir).unwrap(), &orders());
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&scratch).ok();
}

#[test]
fn a_failing_enrolment_grants_nothing_so_retries_burn_no_block() {
    let dir = temp_dir("enrol-fails");
    let first_process = FileStore::open(&dir).unwrap();
    assert_eq!(first_process.grant(&orders(), 10).unwrap().end, 11);
    // Another process: it has not seen `orders` on the roster yet, so its grant reads it.
    let second_process = FileStore::open(&dir).unwrap();
    let roster = dir.join(ROSTER);
    let listed = std::fs::read(&roster).unwrap();
    std::fs::remove_file(&roster).unwrap();
    std::fs::create_dir(&roster).unwrap();
    for _ in 0..3 {
        match second_process.grant(&orders(), 10) {
            Err(Error::BlockStore { reason }) => assert!(reason.contains(ROSTER), "{reason}"),
            other => panic!("expected the roster to be unreadable, got {other:?}"),
        }
    }
    std::fs::remove_dir(&roster).unwrap();
    std::fs::write(&roster, listed).unwrap();
    assert_eq!(second_process.grant(&orders(), 10).unwrap().first, 11);
    std::fs::remove_dir_all(&dir).ok();
}

/// The roster deleted by hand: it is made again from the sequences whose files are still
/// there, so losing a sequence's files afterwards is still an error, not a restart at 1.
#[test]
fn a_deleted_roster_is_made_again_from_the_sequences_on_disk() {
    let dir = temp_dir("roster-deleted");
    let orders = orders();
    let first = FileStore::open(&dir).unwrap().grant(&orders, 10).unwrap();
    assert_eq!(first.first, 1);
    std::fs::remove_file(dir.join("roster.idgen")).unwrap();
    let store = FileStore::open(&dir).unwrap();
    std::fs::remove_dir_all(dir.join("orders")).unwrap();
    let refused = store.grant(&orders, 10);
    assert!(refused.is_err(), "restarted: {refused:?}");
    std::fs::remove_dir_all(&dir).ok();
}
