//! `fork()`: a child process starts with a copy of its parent's generators, their state and
//! their random streams. Its UUIDv7s and ULIDs must share no bits of randomness with the
//! parent's (or the two would issue the same IDs from the same state), and must carry the
//! child's own time although the default clock's upkeep thread stayed with the parent.
//!
//! Its own binary without the test harness: `fork()` copies only the calling thread, so the
//! process forks from `main` with no harness threads holding locks.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen::{Generator, UlidGenerator, Uuid7Generator};

const PER_PROCESS: usize = 1_000;

fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// How far an ID's time may lie outside the wall-clock readings taken around it (a cached
/// reading's lag, the monotonic clock's drift from the wall): far less than `PAUSE`.
const SLACK_MS: u64 = 50;
/// The pause after the fork before the times are taken: a clock frozen at the fork is then
/// this far behind, beyond `SLACK_MS`.
const PAUSE: Duration = Duration::from_millis(300);
/// The longest the parent waits for the child's report and its exit.
const CHILD_WITHIN: Duration = Duration::from_secs(60);

/// What one process issues after the fork, as text lines: UUIDs, ULIDs, then three
/// times (a UUID's, a ULID's and a Snowflake ID's, in Unix ms) between two wall-clock
/// readings, after a pause longer than any cached reading may lag. The UUID and ULID
/// come first: building the Snowflake generator builds a default clock, which notices the
/// fork by itself.
fn issue(uuids: &Uuid7Generator, ulids: &UlidGenerator) -> Vec<String> {
    let mut lines: Vec<String> = (0..PER_PROCESS)
        .map(|_| uuids.next_uuid().unwrap().to_string())
        .collect();
    lines.extend((0..PER_PROCESS).map(|_| ulids.next_ulid().unwrap().to_string()));
    // Elapsed time is the point: a clock that stood still since the fork falls behind.
    std::thread::sleep(PAUSE);
    let before = unix_ms_now();
    let uuid_ms = uuids.next_uuid().unwrap().unix_ms();
    let ulid_ms = ulids.next_ulid().unwrap().unix_ms();
    let snowflakes = Generator::builder().build().unwrap();
    let id = snowflakes.next_id().unwrap();
    let after = unix_ms_now();
    lines.push(format!(
        "times {uuid_ms} {ulid_ms} {} {before} {after}",
        snowflakes.decode(id).unix_ms,
    ));
    lines
}

/// Each time lies between the wall-clock readings around it (within `SLACK_MS`), however
/// long the process was kept off the CPU between them.
fn check_times(who: &str, line: &str) {
    let numbers: Vec<u64> = line
        .trim_start_matches("times ")
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    let (before, after) = (numbers[3], numbers[4]);
    for (kind, &unix_ms) in ["uuidv7", "ulid", "snowflake"].iter().zip(&numbers[..3]) {
        assert!(
            unix_ms + SLACK_MS >= before && unix_ms <= after + SLACK_MS,
            "{who}: a {kind} dated {unix_ms}, the wall clock read {before} before and {after} \
             after (a clock frozen at the fork?)"
        );
    }
}

/// Waits for the child `pid` to exit, at most `CHILD_WITHIN`; kills it and fails naming
/// `what` if it does not. Its wait status.
fn wait_child(what: &str, pid: libc::pid_t) -> libc::c_int {
    let deadline = Instant::now() + CHILD_WITHIN;
    loop {
        let mut status = 0;
        // SAFETY: polls the child forked by the caller.
        let ended = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(ended >= 0, "{what}: waitpid failed");
        if ended == pid {
            return status;
        }
        if Instant::now() >= deadline {
            // SAFETY: ends and reaps the child forked by the caller.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("{what}: the child did not exit within {CHILD_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Busy before the fork, on `warm`'s thread or threads: the random streams seeded, the
/// clock's thread running. Then a fork; each process issues, and they are compared.
fn fork_round(name: &str, warm: impl FnOnce(&Uuid7Generator, &UlidGenerator)) {
    let uuids = Uuid7Generator::new().unwrap();
    let ulids = UlidGenerator::new().unwrap();
    warm(&uuids, &ulids);
    let (mut to_parent, from_child) = UnixStream::pair().unwrap();
    // SAFETY: the process has no threads but this one and the default clock's upkeep thread,
    // which holds no lock while it sleeps or refreshes; the child ends with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let report =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| issue(&uuids, &ulids)));
        let code = match report {
            Ok(lines) => {
                let _ = to_parent.write_all((lines.join("\n") + "\n").as_bytes());
                0
            }
            Err(_) => 1,
        };
        drop(to_parent);
        // SAFETY: ends the child without running the parent's exit handlers twice.
        unsafe { libc::_exit(code) };
    }
    drop(to_parent);
    let mine = issue(&uuids, &ulids);
    from_child.set_read_timeout(Some(CHILD_WITHIN)).unwrap();
    let theirs: Vec<String> = BufReader::new(from_child)
        .lines()
        .map(|line| line.unwrap_or_else(|error| panic!("{name}: the child's report: {error}")))
        .collect();
    let status = wait_child(name, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{name}: child failed: {status}"
    );
    assert_eq!(
        theirs.len(),
        mine.len(),
        "{name}: the child reported everything"
    );

    let ids = 2 * PER_PROCESS;
    let in_common: Vec<&String> = mine[..ids]
        .iter()
        .filter(|id| theirs[..ids].contains(id))
        .collect();
    assert!(
        in_common.is_empty(),
        "{name}: issued by both processes: {in_common:?}"
    );
    // Not only the IDs: the random bits differ everywhere (the same state is copied, so
    // without a reseed they would match ID for ID).
    let same_tail = mine[..ids]
        .iter()
        .zip(&theirs[..ids])
        .filter(|(a, b)| a[a.len() - 8..] == b[b.len() - 8..])
        .count();
    assert_eq!(
        same_tail, 0,
        "{name}: IDs ending in the same random characters"
    );
    check_times(&format!("{name}, parent"), &mine[ids]);
    check_times(&format!("{name}, child"), &theirs[ids]);
    println!("fork ({name}): {ids} IDs per process, none in common; times right in both");
}

fn warm(uuids: &Uuid7Generator, ulids: &UlidGenerator) {
    for _ in 0..10_000 {
        uuids.next_uuid().unwrap();
        ulids.next_ulid().unwrap();
    }
}

/// A block allocator in a forked child: its blocks are the parent's too, so every call is
/// refused, and dropping it gives nothing back; the parent goes on, and the store stays
/// above everything the parent may hand out.
fn fork_block_allocator() {
    use idgen::blocks::{BlockAllocator, BlockStore, FileStore, SequenceName};
    let dir = std::env::temp_dir().join(format!("idgen-fork-blocks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = FileStore::open(&dir).unwrap();
    let orders = BlockAllocator::builder(store.clone(), "orders")
        .unwrap()
        .fixed_block_size(100)
        // The file store `fsync`s each grant: under load it may take longer than 2 s.
        .max_wait(CHILD_WITHIN)
        .build()
        .unwrap();
    assert_eq!(orders.next().unwrap(), 1);
    // SAFETY: as above; the allocator's fetcher thread is parked, holding no lock.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let refused = matches!(orders.next(), Err(idgen::Error::AllocatorForked { .. }))
            && matches!(orders.next_n(3), Err(idgen::Error::AllocatorForked { .. }));
        drop(orders); // must not give 2..101 back: the parent serves them
        // SAFETY: ends the child without running the parent's exit handlers twice.
        unsafe { libc::_exit(if refused { 0 } else { 1 }) };
    }
    let status = wait_child("block allocator", pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's allocator was not refused: {status}"
    );
    assert_eq!(orders.next().unwrap(), 2, "the parent goes on");
    let above = store
        .grant(&SequenceName::new("orders").unwrap(), 1)
        .unwrap();
    assert!(
        above.first >= 101,
        "the child gave the parent's block back: {above:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
    println!("fork (block allocator): refused in the child, nothing given back");
}

fn main() {
    // Only another thread drew: in the child, the first draw is its thread's first (this
    // thread has drawn nothing yet in this process), and nothing but that draw tells the
    // default clock that its thread stayed behind.
    fork_round("another thread drew", |uuids, ulids| {
        std::thread::scope(|scope| {
            scope.spawn(|| warm(uuids, ulids));
        });
    });
    // The forking thread has drawn: the child starts with a copy of its stream.
    fork_round("the forking thread drew", warm);
    fork_block_allocator();
}
