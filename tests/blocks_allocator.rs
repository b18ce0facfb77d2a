//! The block allocator: unique, per-thread increasing values under contention; the next
//! block fetched in the background at the refill point; a bounded, typed wait when the
//! store is away; the size adapting to the rate of use; unused values given back on close.

#[path = "common/blocks.rs"]
mod blocks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use blocks::{MemoryStore, PATIENT_WAIT, assert_increasing, assert_unique, temp_path, wait_for};
use idgen::blocks::{BlockAllocator, DEFAULT_MAX_WAIT, FileStore, MAX_VALUE};
use idgen::{Error, ManualClock};

/// An allocator of "orders" on `store`, configured by `configure`.
fn built(
    store: impl idgen::blocks::BlockStore + 'static,
    configure: impl FnOnce(idgen::blocks::AllocatorBuilder) -> idgen::blocks::AllocatorBuilder,
) -> BlockAllocator {
    configure(BlockAllocator::builder(store, "orders").unwrap())
        .build()
        .unwrap()
}

fn allocator(store: &MemoryStore, size: u64) -> BlockAllocator {
    BlockAllocator::builder(store.clone(), "orders")
        .unwrap()
        .fixed_block_size(size)
        .build()
        .unwrap()
}

/// A bound on a hang, far above any wait the tests give (100 ms to 5 s): a call that
/// returns within it returned on its own deadline, not the store's.
const HANG: Duration = Duration::from_secs(30);
#[test]
fn threads_sharing_an_allocator_get_unique_increasing_values_in_millions() {
    let store = MemoryStore::new();
    let shared = Arc::new(allocator(&store, 1_000));
    let per_thread: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|thread| {
                let shared = &shared;
                scope.spawn(move || {
                    let mut values = Vec::with_capacity(250_000);
                    for i in 0..250_000 {
                        if (i + thread) % 97 == 0 {
                            values.extend(shared.next_n(13).unwrap());
                        } else {
                            values.push(shared.next().unwrap());
                        }
                    }
                    values
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (thread, values) in per_thread.iter().enumerate() {
        assert_increasing(&format!("thread {thread}"), values);
    }
    let total = assert_unique(&per_thread);
    assert!(total >= 8 * 250_000);
    assert!(
        per_thread
            .iter()
            .flatten()
            .all(|&v| (1..=MAX_VALUE).contains(&v)),
        "positive i64"
    );
    // Dense: at most the two blocks in hand are missing below the store's next value.
    assert!(store.next_value() - 1 - total as u64 <= 2_000);
}

#[test]
fn allocators_in_separate_threads_on_one_file_store_never_share_a_value() {
    let dir = temp_path("alloc-file-threads");
    let per_thread: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let dir = dir.clone();
                scope.spawn(move || {
                    let store = FileStore::open(&dir).unwrap();
                    let alloc = BlockAllocator::builder(store, "orders")
                        .unwrap()
                        .fixed_block_size(37)
                        .max_wait(PATIENT_WAIT)
                        .build()
                        .unwrap();
                    let values: Vec<u64> = (0..2_000).map(|_| alloc.next().unwrap()).collect();
                    alloc.close().unwrap();
                    values
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for values in &per_thread {
        assert_increasing("allocator", values);
    }
    assert_eq!(assert_unique(&per_thread), 8_000);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_next_block_is_fetched_when_the_refill_share_is_used() {
    let store = MemoryStore::new();
    // A name of its own: its fetcher thread is found by name ("idgen-blocks-re", cut to 15).
    let alloc = BlockAllocator::builder(store.clone(), "refill-share")
        .unwrap()
        .fixed_block_size(100)
        .refill_at(0.25)
        .build()
        .unwrap();
    for _ in 0..25 {
        alloc.next().unwrap();
    }
    // A fetch asked for by any of these calls would have woken the fetcher: once it is
    // parked again, such a fetch is over and counted.
    wait_for("the fetcher to park", || {
        thread_states("idgen-blocks-re") == ['S']
    });
    assert_eq!(store.grants(), 1, "nothing fetched before the refill point");
    assert_eq!(alloc.next().unwrap(), 26); // the value at first + 25% asks for the next block
    wait_for("the prefetch", || store.grants() == 2);
    // The store now hangs: the rest of this block and all of the prefetched one are served
    // without it.
    store.hang(true);
    let values: Vec<u64> = (0..174).map(|_| alloc.next().unwrap()).collect();
    assert_eq!(values, (27..201).collect::<Vec<_>>());
    assert_eq!(alloc.stats().waits, 1, "only the very first call waited");
    store.hang(false);
}

#[test]
fn with_the_store_away_a_call_waits_at_most_the_configured_time_then_fails_typed() {
    let store = MemoryStore::new();
    let alloc = built(store.clone(), |b| {
        b.fixed_block_size(10).max_wait(Duration::from_millis(200))
    });
    assert_eq!(alloc.next().unwrap(), 1);
    store.fail(true);
    // The rest of this block, then the wait: the prefetch failed.
    let mut started;
    let error = loop {
        started = Instant::now();
        match alloc.next() {
            Ok(value) => assert!(value <= 10, "{value}"),
            Err(error) => break error,
        }
    };
    let waited = started.elapsed();
    match &error {
        Error::BlocksUnavailable {
            sequence,
            waited_ms,
            reason,
        } => {
            assert_eq!(sequence, "orders");
            assert_eq!(*waited_ms, 200);
            assert!(reason.contains("the test store is failing"), "{reason}");
        }
        other => panic!("expected BlocksUnavailable, got {other:?}"),
    }
    assert!(error.is_transient());
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    // A bound on a hang, not a speed: the wait it was given is what waited_ms says.
    assert!(waited < HANG, "{waited:?}");
    // The store comes back: so do the values, above everything handed out before.
    store.fail(false);
    // Failed grants granted nothing: no gap either.
    assert_eq!(alloc.next().unwrap(), 11);
}

#[test]
fn a_hanging_store_is_a_timeout_not_a_hang() {
    let store = MemoryStore::new();
    let alloc = built(store.clone(), |b| {
        b.fixed_block_size(5).max_wait(Duration::from_millis(100))
    });
    store.hang(true);
    let started = Instant::now();
    assert!(matches!(alloc.next(), Err(Error::BlocksUnavailable { .. })));
    // Returned while the store still hangs: a timeout. (The bound is on a hang.)
    assert!(started.elapsed() < HANG);
    store.hang(false);
    assert_eq!(alloc.next().unwrap(), 1);
}

#[test]
fn the_block_size_doubles_when_blocks_go_fast_and_halves_when_they_go_slowly() {
    let store = MemoryStore::new();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let alloc = built(store.clone(), |b| {
        b.block_size(100)
            .block_size_bounds(25, 800)
            .target_block_lifetime(Duration::from_secs(60))
            .clock(Arc::clone(&clock))
    });
    // Fast: every block used up in 1 s.
    let mut handed = 0u64;
    while alloc.stats().block_size < 800 {
        clock.advance(1_000);
        handed += alloc.next_n(100).unwrap().len() as u64;
        assert!(handed < 100_000, "never reached the maximum");
    }
    for _ in 0..5 {
        clock.advance(1_000);
        alloc.next_n(800).unwrap();
    }
    assert_eq!(alloc.stats().block_size, 800, "capped at the maximum");
    // Slow: every block lasts 10 minutes.
    while alloc.stats().block_size > 25 {
        let block = alloc.stats().block_size;
        for _ in 0..10 {
            clock.advance(60_000);
            alloc.next_n((block / 10 + 1) as usize).unwrap();
        }
    }
    for _ in 0..20 {
        clock.advance(600_000);
        alloc.next_n(30).unwrap();
    }
    assert_eq!(alloc.stats().block_size, 25, "floored at the minimum");
    // Each grant recorded its size: they went up by doubling and down by halving.
    let sizes = store.sizes();
    assert_eq!(sizes[0], 100);
    assert!(sizes.contains(&800) && sizes.contains(&25), "{sizes:?}");
    for pair in sizes.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            b == a || b == (a * 2).min(800) || b == (a / 2).max(25),
            "{a} then {b}"
        );
    }
}

#[test]
fn a_clean_close_gives_back_both_blocks_so_a_restart_leaves_no_gap() {
    let dir = temp_path("alloc-close");
    let open = || {
        // Patient: `close` gives back only once the prefetch under way has ended.
        BlockAllocator::builder(FileStore::open(&dir).unwrap(), "orders")
            .unwrap()
            .fixed_block_size(100)
            .max_wait(PATIENT_WAIT)
            .build()
            .unwrap()
    };
    let first = open();
    let values = first.next_n(50).unwrap(); // past the refill point: the next block is taken
    wait_for("the prefetch", || first.stats().round_trips == 2);
    assert_eq!(first.close(), Ok(true));
    assert!(matches!(first.next(), Err(Error::AllocatorClosed { .. })));
    assert_eq!(first.close(), Ok(false), "closing twice changes nothing");
    let second = open();
    assert_eq!(second.next().unwrap(), values.last().unwrap() + 1);
    drop(second); // dropping closes too
    let third = open();
    assert_eq!(third.next().unwrap(), values.last().unwrap() + 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_close_after_someone_else_took_a_block_leaves_a_gap_not_a_duplicate() {
    let store = MemoryStore::new();
    let mine = allocator(&store, 100);
    let theirs = allocator(&store, 100);
    assert_eq!(mine.next().unwrap(), 1);
    assert_eq!(theirs.next().unwrap(), 101);
    assert_eq!(mine.close(), Ok(false));
    let later = allocator(&store, 100);
    assert!(later.next().unwrap() > 200);
    drop(theirs);
}

#[test]
fn after_a_crash_the_gap_is_at_most_two_blocks() {
    let store = MemoryStore::new();
    let crashed = allocator(&store, 100);
    let last = *crashed.next_n(60).unwrap().last().unwrap();
    wait_for("the prefetch", || store.grants() == 2);
    std::mem::forget(crashed); // no close, no give-back: what SIGKILL leaves
    let restarted = allocator(&store, 100);
    let next = restarted.next().unwrap();
    assert!(
        next > last && next - last <= 1 + 2 * 100,
        "{last} -> {next}"
    );
}

#[test]
fn the_end_of_the_i64_range_is_a_clear_error() {
    let store = MemoryStore::starting_at(MAX_VALUE - 4);
    let alloc = allocator(&store, 3);
    let values = alloc.next_n(5).unwrap();
    assert_eq!(values, (MAX_VALUE - 4..=MAX_VALUE).collect::<Vec<_>>());
    assert_eq!(
        alloc.next(),
        Err(Error::SequenceExhausted {
            sequence: "orders".into()
        })
    );
}

#[test]
fn a_store_that_goes_back_stops_the_allocator() {
    let store = MemoryStore::new();
    let alloc = allocator(&store, 10);
    alloc.next_n(2).unwrap(); // past the refill point
    wait_for("the prefetch", || store.grants() == 2);
    for _ in 0..8 {
        alloc.next().unwrap(); // the first block, 1..=10; the second (11..=20) is in hand
    }
    store.set_next(5); // the store lost its state before the third block
    let error = loop {
        match alloc.next() {
            Ok(value) => assert!(value <= 20, "{value} came from a store that went back"),
            Err(error) => break error,
        }
    };
    assert!(matches!(error, Error::BlockStore { .. }), "{error:?}");
    assert!(matches!(alloc.next(), Err(Error::AllocatorClosed { .. })));
}

#[test]
fn bad_names_and_settings_are_clear_errors() {
    let store = MemoryStore::new();
    for name in ["", "Orders", "a/b", &"x".repeat(65)] {
        assert!(matches!(
            BlockAllocator::builder(store.clone(), name),
            Err(Error::SequenceName { .. })
        ));
    }
    let builder = || BlockAllocator::builder(store.clone(), "s").unwrap();
    for bad in [
        builder().fixed_block_size(0),
        builder().block_size(5).block_size_bounds(10, 20),
        builder().block_size(50).block_size_bounds(10, 20),
        builder().refill_at(1.0),
        builder().refill_at(-0.1),
        builder().refill_at(f64::NAN),
    ] {
        assert!(matches!(bad.build(), Err(Error::BlockConfig { .. })));
    }
}

/// A store that panics on its first grant, then works.
struct PanicsOnce(MemoryStore, std::sync::atomic::AtomicBool);

impl idgen::blocks::BlockStore for PanicsOnce {
    fn grant(
        &self,
        sequence: &idgen::blocks::SequenceName,
        size: u64,
    ) -> Result<idgen::blocks::Grant, Error> {
        if !self.1.swap(true, std::sync::atomic::Ordering::SeqCst) {
            panic!("a store bug");
        }
        self.0.grant(sequence, size)
    }

    fn give_back(
        &self,
        sequence: &idgen::blocks::SequenceName,
        grant: &idgen::blocks::Grant,
        unused_from: u64,
    ) -> Result<bool, Error> {
        self.0.give_back(sequence, grant, unused_from)
    }
}

#[test]
fn a_store_that_panics_is_an_error_and_the_allocator_recovers() {
    let store = PanicsOnce(MemoryStore::new(), Default::default());
    let alloc = built(store, |b| {
        b.fixed_block_size(10).max_wait(Duration::from_secs(5))
    });
    // The first fetch panics; the retry (10 ms later) succeeds within the wait.
    assert_eq!(alloc.next().unwrap(), 1);
    assert_eq!(alloc.stats().failed_round_trips, 1);
    let started = Instant::now();
    alloc.close().unwrap();
    assert!(started.elapsed() < HANG);
}

#[test]
fn close_and_drop_give_up_on_a_hanging_store_after_max_wait() {
    let store = MemoryStore::new();
    let alloc = built(store.clone(), |b| {
        b.fixed_block_size(10).max_wait(Duration::from_millis(200))
    });
    alloc.next().unwrap();
    store.hang(true);
    alloc.next().unwrap(); // the refill point: a fetch starts, and hangs
    wait_for("the fetch to start", || alloc.stats().round_trips == 2);
    let started = Instant::now();
    assert_eq!(alloc.close(), Ok(false), "nothing given back under a fetch");
    // Returned while the store still hangs (it hangs until the end of the test).
    let took = started.elapsed();
    assert!(took < HANG, "{took:?}");
    assert!(matches!(alloc.next(), Err(Error::AllocatorClosed { .. })));
    store.hang(false);
}

#[test]
fn a_wait_of_duration_max_means_no_deadline() {
    let store = MemoryStore::new();
    let alloc = built(store.clone(), |b| b.max_wait(Duration::MAX));
    store.hang(true);
    let (values, waited) = std::thread::scope(|scope| {
        scope.spawn(|| {
            wait_for("the fetch to start", || alloc.stats().round_trips == 1);
            // Elapsed time is the point: the store stays away longer than the default
            // wait, after which a call with a deadline would have failed.
            std::thread::sleep(DEFAULT_MAX_WAIT + Duration::from_millis(500));
            store.hang(false);
        });
        let started = Instant::now();
        (alloc.next_n(3).unwrap(), started.elapsed())
    });
    assert_eq!(values, vec![1, 2, 3]);
    assert!(waited > DEFAULT_MAX_WAIT, "waited only {waited:?}");
    alloc.close().unwrap();
}

#[test]
fn tiny_blocks_refilled_at_once_never_leave_a_caller_without_a_wake_up() {
    // Blocks of 1 to 3, a fetch asked for at the first value of each: the fetcher's
    // hand-over (poll, park, wake) runs hundreds of thousands of times against 4 threads.
    // A lost wake-up would surface as BlocksUnavailable after the wait.
    let store = MemoryStore::new();
    let alloc = built(store, |b| {
        b.block_size(2)
            .block_size_bounds(1, 3)
            .refill_at(0.0)
            .max_wait(Duration::from_secs(5))
    });
    let runs: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| (0..50_000).map(|_| alloc.next().unwrap()).collect()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in &runs {
        assert_increasing("thread", run);
    }
    assert_eq!(assert_unique(&runs), 200_000);
}

/// The `/proc/self/task/*/stat` fields after the parenthesised name (the state first) of
/// this process's threads named `prefix...`. A thread that ends meanwhile is skipped.
fn thread_stats(prefix: &str) -> Vec<Vec<String>> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !name.starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue; // it ended
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        threads.push(after.split(' ').map(str::to_string).collect());
    }
    threads
}

/// The state (`R` running, `S` sleeping, ...) of each thread named `prefix...`.
fn thread_states(prefix: &str) -> Vec<char> {
    thread_stats(prefix)
        .iter()
        .map(|fields| fields[0].chars().next().unwrap())
        .collect()
}

/// CPU time (user + system, in clock ticks) of this process's threads named `prefix...`.
fn thread_ticks(prefix: &str) -> u64 {
    thread_stats(prefix)
        .iter()
        // Fields after the parenthesised name: state is the 3rd field, utime the 14th.
        .map(|fields| fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap())
        .sum()
}

#[test]
fn an_idle_allocator_parks_its_fetcher() {
    let store = MemoryStore::new();
    let alloc = BlockAllocator::builder(store, "idle-fetcher")
        .unwrap()
        .fixed_block_size(100)
        .build()
        .unwrap();
    // Fast blocks: the fetcher polls while they last.
    for _ in 0..10_000 {
        alloc.next().unwrap();
    }
    // Past its millisecond of polling, it parks (sleeps, where polling runs).
    wait_for("the fetcher to park", || {
        thread_states("idgen-blocks-id") == ['S']
    });
    let before = thread_ticks("idgen-blocks-id");
    // Elapsed time is the point: the CPU an idle fetcher uses over a second of idling.
    std::thread::sleep(Duration::from_millis(1_000));
    let used = thread_ticks("idgen-blocks-id") - before;
    // A clock tick is 10 ms: a fetcher that kept polling would use about 100.
    assert!(used <= 2, "the idle fetcher used {used} ticks in 1 s");
}

/// A store that grants nonsense.
struct Nonsense;

impl idgen::blocks::BlockStore for Nonsense {
    fn grant(
        &self,
        _: &idgen::blocks::SequenceName,
        _: u64,
    ) -> Result<idgen::blocks::Grant, Error> {
        Ok(idgen::blocks::Grant {
            first: 0,
            end: 5,
            serial: 1,
        })
    }

    fn give_back(
        &self,
        _: &idgen::blocks::SequenceName,
        _: &idgen::blocks::Grant,
        _: u64,
    ) -> Result<bool, Error> {
        Ok(false)
    }
}

#[test]
fn a_grant_that_is_not_a_block_of_values_is_a_store_error() {
    let alloc = built(Nonsense, |b| b.max_wait(Duration::from_millis(50)));
    match alloc.next() {
        Err(Error::BlocksUnavailable { reason, .. }) => {
            assert!(reason.contains("not a block"), "{reason}")
        }
        other => panic!("expected BlocksUnavailable, got {other:?}"),
    }
}
