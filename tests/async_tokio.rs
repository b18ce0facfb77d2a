//! The async calls (feature `tokio`) wait on the runtime's timers: under Tokio's paused
//! time they finish (a call that held its thread would stop the paused clock for ever),
//! a current-thread runtime runs its other tasks while one waits, 10,000 waiting calls
//! hold no thread beyond the runtime's workers, and leases are taken from every store.
//!
//! Each runtime runs on a thread of its own, watched for [`HANG`]: a call that blocks its
//! thread instead of sleeping shows as a named failure, not a hung test binary.

#[path = "common/blocks.rs"]
mod blocks;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use blocks::MemoryStore;
use idgen::blocks::BlockAllocator;
use idgen::lease::{
    AcquireWatch, FileStore, LeaseStore, LeasedBuilder, LeasedGenerator, NumberState, WorkerRange,
};
use idgen::{Clock, Error, Generator, Id, Layout, ManualClock, SystemClock};

/// Far above any wait here (real seconds): a call that has not returned by then held its
/// thread instead of sleeping.
const HANG: Duration = Duration::from_secs(120);

/// Runs `test` on a runtime made by `runtime` on a thread of its own, failing if it does
/// not end within [`HANG`].
fn on_runtime<T: Send + 'static>(
    what: &str,
    runtime: impl FnOnce() -> tokio::runtime::Runtime + Send + 'static,
    test: impl AsyncFnOnce() -> T + Send + 'static,
) -> T {
    let (done, ended) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = runtime();
        let _ = done.send(runtime.block_on(test()));
    });
    match ended.recv_timeout(HANG) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "{what}: not done within {HANG:?}: a call held its thread instead of sleeping, \
                 or missed its wakeup"
            )
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!("{what}: the runtime's thread panicked")
        }
    }
}

/// A current-thread runtime whose clock is paused: time moves only when every task waits
/// on a timer, and then jumps to the next one.
fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Unix milliseconds read from Tokio's clock (paused, in these tests), from any thread:
/// the lease keeper's reads it too.
#[derive(Clone, Debug)]
struct TokioClock {
    runtime: tokio::runtime::Handle,
    start: tokio::time::Instant,
    start_unix_ms: u64,
}

impl TokioClock {
    /// Now, on the current runtime's clock.
    fn new() -> TokioClock {
        TokioClock {
            runtime: tokio::runtime::Handle::current(),
            start: tokio::time::Instant::now(),
            start_unix_ms: SystemClock.now_unix_ms(),
        }
    }

    fn elapsed_ms(&self) -> u64 {
        let _runtime = self.runtime.enter();
        self.start.elapsed().as_millis() as u64
    }
}

impl Clock for TokioClock {
    fn now_unix_ms(&self) -> u64 {
        self.start_unix_ms + self.elapsed_ms()
    }
}

/// 16 IDs per millisecond: a few hundred make a call wait.
fn narrow_layout() -> Layout {
    Layout::new(41, 5, 13, 4).unwrap()
}

fn assert_strictly_increasing(ids: &[Id]) {
    for pair in ids.windows(2) {
        assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
    }
}

#[test]
fn calls_that_wait_for_the_next_millisecond_sleep_on_paused_time() {
    on_runtime("waiting calls", paused, async || {
        let clock = TokioClock::new();
        let generator = Generator::builder()
            .layout(narrow_layout())
            .clock(clock.clone())
            .build()
            .unwrap();
        let start_ms = clock.now_unix_ms();
        let mut ids = Vec::new();
        for _ in 0..1_000 {
            ids.push(generator.next_id_async().await.unwrap());
        }
        ids.extend(generator.next_ids_async(10_000).await.unwrap());
        assert_eq!(ids.len(), 11_000);
        assert_strictly_increasing(&ids);
        // 11,000 IDs at 16 a millisecond span 688 milliseconds of the paused clock, which
        // moved only because the calls slept on its timers.
        let spanned = clock.now_unix_ms() - start_ms;
        assert!(spanned >= 687, "the paused clock moved {spanned} ms");
        let last = generator.decode(*ids.last().unwrap());
        assert!(last.unix_ms >= start_ms + 687, "{last:?}");
        assert!(generator.stats().sequence_exhausted >= 687);
    });
}

#[test]
fn a_current_thread_runtime_serves_other_tasks_while_a_call_waits() {
    on_runtime("a ticker beside a waiting batch", paused, async || {
        let generator = Generator::builder()
            .layout(narrow_layout())
            .clock(TokioClock::new())
            .build()
            .unwrap();
        let (ticks, ticker) = ticker();
        let before = ticks.load(Ordering::SeqCst);
        // 200 milliseconds' worth: the ticker can only tick while the batch sleeps.
        let ids = generator.next_ids_async(16 * 200).await.unwrap();
        let during = ticks.load(Ordering::SeqCst) - before;
        ticker.abort();
        assert_eq!(ids.len(), 3_200);
        assert_strictly_increasing(&ids);
        assert!(
            during >= 150,
            "the ticker ran {during} times during the batch"
        );
    });
}

/// How many threads of this process bear `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

#[test]
fn ten_thousand_waiting_calls_use_no_more_threads_than_the_runtime_has() {
    const WORKERS: usize = 2;
    const CALLS: usize = 10_000;
    const PER_MS: usize = 64;
    // Unique to this test: the runtime's workers and any blocking-pool thread bear it.
    let name = format!("idg-{}", std::process::id() % 100_000);
    // A clock that moves only when the test moves it: while it stands, every call past the
    // millisecond's 64 waits, for as long as the test likes.
    let clock = ManualClock::new(SystemClock.now_unix_ms());
    let generator = Arc::new(
        Generator::builder()
            .layout(Layout::new(41, 5, 11, 6).unwrap()) // 64 IDs per millisecond
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let done = Arc::new(AtomicBool::new(false));
    // Samples the runtime's threads until the calls are done.
    let sampler = std::thread::spawn({
        let (done, name) = (Arc::clone(&done), name.clone());
        move || {
            let mut most = 0;
            while !done.load(Ordering::SeqCst) {
                most = most.max(threads_named(&name));
                std::thread::yield_now();
            }
            most.max(threads_named(&name))
        }
    });
    let (ids, threads_while_all_wait) = on_runtime(
        "10,000 waiting calls",
        {
            let name = name.clone();
            move || {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(WORKERS)
                    .thread_name(name)
                    .enable_all()
                    .build()
                    .unwrap()
            }
        },
        {
            let (generator, name) = (Arc::clone(&generator), name.clone());
            async move || {
                let finished = Arc::new(AtomicUsize::new(0));
                let calls: Vec<_> = (0..CALLS)
                    .map(|_| {
                        let (generator, finished) = (Arc::clone(&generator), Arc::clone(&finished));
                        tokio::spawn(async move {
                            let id = generator.next_id_async().await;
                            finished.fetch_add(1, Ordering::SeqCst);
                            id
                        })
                    })
                    .collect();
                // Waits (on the runtime) until `ready` holds.
                let until = async |ready: &dyn Fn() -> bool| {
                    while !ready() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                };
                // Every call but the millisecond's 64 has been refused once and sleeps.
                until(&|| {
                    generator.stats().sequence_exhausted == (CALLS - PER_MS) as u64
                        && finished.load(Ordering::SeqCst) == PER_MS
                })
                .await;
                let threads_while_all_wait = threads_named(&name);
                // Then the clock moves a millisecond at a time: 64 more calls end each time.
                for step in 2..=CALLS.div_ceil(PER_MS) {
                    clock.advance(1);
                    until(&|| finished.load(Ordering::SeqCst) == (step * PER_MS).min(CALLS)).await;
                }
                let mut ids = Vec::with_capacity(CALLS);
                for call in calls {
                    ids.push(call.await.unwrap().unwrap());
                }
                (ids, threads_while_all_wait)
            }
        },
    );
    done.store(true, Ordering::SeqCst);
    let most_threads = sampler.join().unwrap();
    assert!(
        threads_while_all_wait <= WORKERS && (1..=WORKERS).contains(&most_threads),
        "{threads_while_all_wait} threads of the runtime while {} calls waited, {most_threads} \
         at most (it has {WORKERS} workers)",
        CALLS - PER_MS
    );
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), CALLS, "an ID was issued twice");
    // Each call that waited is counted once, however often it woke.
    assert_eq!(
        generator.stats().sequence_exhausted,
        (CALLS - PER_MS) as u64
    );
}

#[test]
fn a_batch_on_a_leased_generator_is_async_too() {
    on_runtime("a leased generator's batch", paused, async || {
        let dir = blocks::temp_path("async-leased-batch");
        let generator = LeasedGenerator::builder(
            FileStore::open(&dir).unwrap(),
            WorkerRange::parse(0, "0-3").unwrap(),
        )
        .generator(
            Generator::builder()
                .layout(narrow_layout())
                .clock(TokioClock::new()),
        )
        .acquire_async()
        .await
        .unwrap();
        let ids = generator.next_ids_async(1_000).await.unwrap();
        assert_eq!(ids.len(), 1_000);
        assert_strictly_increasing(&ids);
        assert!(
            ids.iter()
                .all(|&id| generator.decode(id).worker == generator.worker())
        );
        generator.release_async().await.unwrap();
        std::fs::remove_dir_all(&dir).ok();
    });
}

/// Leaves `store`'s worker 0 of datacenter 0 with a mark `ahead_ms` ahead of the system
/// clock: a holder whose clock is that far ahead issues one ID and releases. Returns it.
fn leave_mark_ahead(store: impl LeaseStore + 'static, ahead_ms: u64) -> Id {
    let ahead = ManualClock::new(SystemClock.now_unix_ms() + ahead_ms);
    let holder = LeasedGenerator::builder(store, WorkerRange::parse(0, "0").unwrap())
        .generator(Generator::builder().clock(ahead))
        .acquire()
        .unwrap();
    let id = holder.next_id().unwrap();
    holder.release().unwrap();
    id
}

/// Counts the ticks of a task beside the caller, every millisecond.
fn ticker() -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let ticks = Arc::new(AtomicU64::new(0));
    let handle = tokio::spawn({
        let ticks = Arc::clone(&ticks);
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ticks.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (ticks, handle)
}

#[test]
fn acquire_async_waits_for_the_previous_mark_on_paused_time() {
    let dir = blocks::temp_path("async-acquire-mark");
    let previous = leave_mark_ahead(FileStore::open(&dir).unwrap(), 5_000);
    let store = FileStore::open(&dir).unwrap();
    on_runtime("an acquire waiting for a mark", paused, async move || {
        let clock = TokioClock::new();
        let (ticks, ticker) = ticker();
        let generator = LeasedGenerator::builder(store, WorkerRange::parse(0, "0").unwrap())
            .generator(Generator::builder().clock(clock.clone()))
            .startup_wait(Duration::from_secs(30))
            .acquire_async()
            .await
            .unwrap();
        let waited_ms = clock.elapsed_ms();
        let ticked = ticks.load(Ordering::SeqCst);
        ticker.abort();
        let first = generator.next_id_async().await.unwrap();
        assert!(
            first > previous,
            "{first} after the previous holder's {previous}"
        );
        // The paused clock crossed the mark (about 5 s ahead when the wait began) while
        // the ticker ran beside the acquire.
        assert!(waited_ms >= 4_000, "the acquire waited {waited_ms} ms");
        assert!(
            ticked >= 4_000,
            "the ticker ran {ticked} times during the acquire"
        );
        generator.release_async().await.unwrap();
    });
    std::fs::remove_dir_all(&dir).ok();
}

/// Drops an acquire from a store `open` makes after a second of its wait for a mark a
/// minute ahead, and checks that the number is free again well within the store's TTL
/// (a claim merely dropped stays taken until its lease expires), with its previous mark.
fn dropped_acquire_gives_the_number_back<S: LeaseStore + 'static>(open: impl Fn() -> S) {
    let previous = leave_mark_ahead(open(), 60_000);
    let store = open();
    let mark_before = mark_of_worker_0(&store);
    assert!(
        mark_before.is_some_and(|mark| mark > SystemClock.now_unix_ms() + 50_000),
        "{mark_before:?}"
    );
    let waiting_store = open();
    on_runtime(
        "an acquire dropped while waiting",
        paused,
        async move || {
            let watch = AcquireWatch::new();
            let acquire =
                LeasedGenerator::builder(waiting_store, WorkerRange::parse(0, "0").unwrap())
                    .generator(Generator::builder().clock(TokioClock::new()))
                    .startup_wait(Duration::from_secs(120))
                    .watch(&watch)
                    .acquire_async();
            let mut acquire = Box::pin(acquire);
            tokio::select! {
                _ = &mut acquire => panic!("the acquire ended before its mark"),
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            // A second into its minute-long wait, it holds the number and waits for the mark.
            let waiting = watch.mark_wait().expect("the acquire waits for a mark");
            assert_eq!((waiting.datacenter, waiting.worker), (0, 0));
            // The first millisecond after the previous holder's mark.
            assert_eq!(Some(waiting.until_unix_ms - 1), mark_before);
            drop(acquire);
            assert_eq!(
                watch.mark_wait(),
                None,
                "the dropped acquire's wait is over"
            );
        },
    );
    // The give-back runs on a thread of its own: wait (bounded, a third of the TTL) for it.
    let given_back = std::time::Instant::now();
    while survey_worker_0(&store).0 != NumberState::Free {
        assert!(
            given_back.elapsed() < store.ttl() / 3,
            "the dropped acquire's number is still taken: {:?}",
            survey_worker_0(&store)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        mark_of_worker_0(&store),
        mark_before,
        "the number went back with its previous holder's mark ({previous})"
    );
}

#[cfg(feature = "postgres")]
#[test]
fn an_acquire_dropped_while_it_waits_gives_its_number_back_to_postgres() {
    let url = postgres_url();
    let namespace = format!(
        "async-dropped-{}-{}",
        std::process::id(),
        SystemClock.now_unix_ms()
    );
    let open = || {
        idgen::lease::PostgresStore::connect(&url, &namespace)
            .unwrap()
            .with_ttl(Duration::from_secs(90))
            .unwrap()
    };
    open()
        .init(0..=0, 0..=0, SystemClock.now_unix_ms() - 3_600_000)
        .unwrap();
    dropped_acquire_gives_the_number_back(open);
}

#[test]
fn an_acquire_dropped_while_it_waits_gives_its_number_back_to_the_file_store() {
    let dir = blocks::temp_path("async-acquire-dropped");
    dropped_acquire_gives_the_number_back(|| FileStore::open(&dir).unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(feature = "postgres")]
fn postgres_url() -> String {
    std::env::var("IDGEN_POSTGRES_URL").expect(
        "IDGEN_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL",
    )
}

fn survey_worker_0(store: &dyn LeaseStore) -> (NumberState, Option<u64>) {
    let record = store
        .survey(&WorkerRange::parse(0, "0").unwrap())
        .unwrap()
        .into_iter()
        .find(|record| record.worker == 0)
        .unwrap();
    (record.state, record.mark_unix_ms)
}

fn mark_of_worker_0(store: &dyn LeaseStore) -> Option<u64> {
    survey_worker_0(store).1
}

/// An acquire from `store` on a current-thread runtime with real time, waiting for a mark
/// 2 s ahead, with a ticker beside it.
fn acquire_beside_a_ticker<S: LeaseStore + 'static>(what: &str, open: impl Fn() -> S) {
    let previous = leave_mark_ahead(open(), 2_000);
    let store = open();
    on_runtime(what, current_thread, async move || {
        let (ticks, ticker) = ticker();
        let generator = LeasedGenerator::builder(store, WorkerRange::parse(0, "0").unwrap())
            .generator(Generator::builder())
            .acquire_async()
            .await
            .unwrap();
        let ticked = ticks.load(Ordering::SeqCst);
        ticker.abort();
        let first = generator.next_id_async().await.unwrap();
        assert!(
            first > previous,
            "{first} after the previous holder's {previous}"
        );
        // The ticker runs only when the acquire yields the thread: during its wait for the
        // mark, 2 s of it, not once it is done.
        assert!(
            ticked >= 10,
            "the ticker ran {ticked} times during the acquire"
        );
        generator.release_async().await.unwrap();
    });
}

#[cfg(feature = "etcd")]
#[test]
fn acquire_async_takes_a_number_from_etcd() {
    let endpoints = std::env::var("IDGEN_ETCD_ENDPOINTS").expect(
        "IDGEN_ETCD_ENDPOINTS is not set: run the tests through .ci/test, which starts etcd",
    );
    let namespace = format!(
        "/idgen-test/async-{}-{}",
        std::process::id(),
        SystemClock.now_unix_ms()
    );
    let open = || {
        idgen::lease::EtcdStore::connect(&endpoints.split(',').collect::<Vec<_>>(), &namespace)
            .unwrap()
            .with_ttl(Duration::from_secs(2))
            .unwrap()
    };
    open()
        .init(0..=0, 0..=0, SystemClock.now_unix_ms() - 3_600_000)
        .unwrap();
    acquire_beside_a_ticker("an etcd acquire", open);
}

#[cfg(feature = "postgres")]
#[test]
fn acquire_async_takes_a_number_from_postgres() {
    let url = postgres_url();
    let namespace = format!("async-{}-{}", std::process::id(), SystemClock.now_unix_ms());
    let open = || idgen::lease::PostgresStore::connect(&url, &namespace).unwrap();
    open()
        .init(0..=0, 0..=0, SystemClock.now_unix_ms() - 3_600_000)
        .unwrap();
    acquire_beside_a_ticker("a PostgreSQL acquire", open);
}

#[test]
fn acquire_async_takes_a_number_from_the_file_store() {
    let dir = blocks::temp_path("async-acquire-file");
    acquire_beside_a_ticker("a file store acquire", || FileStore::open(&dir).unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn next_async_waits_for_the_fetcher_while_the_runtime_serves_others() {
    let store = MemoryStore::new();
    let allocator = BlockAllocator::builder(store.clone(), "orders")
        .unwrap()
        .fixed_block_size(10)
        .refill_at(0.5)
        .max_wait(HANG)
        .build()
        .unwrap();
    // The first block is in; the next grant (asked for at 6) hangs until the ticker lets
    // it through.
    assert_eq!(allocator.next().unwrap(), 1);
    store.hang(true);
    on_runtime(
        "next_async beside a ticker",
        current_thread,
        async move || {
            let mut values = vec![1];
            for _ in 1..10 {
                values.push(allocator.next_async().await.unwrap());
            }
            assert_eq!(values, (1..=10).collect::<Vec<_>>());
            let ticks = Arc::new(AtomicU64::new(0));
            let ticker = tokio::spawn({
                let (ticks, store) = (Arc::clone(&ticks), store.clone());
                async move {
                    for tick in 1.. {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        ticks.store(tick, Ordering::SeqCst);
                        if tick == 20 {
                            store.hang(false);
                        }
                    }
                }
            });
            // Only the ticker, on this same thread, can let the grant through: the call must
            // yield the thread while it waits.
            let next = allocator.next_async().await.unwrap();
            let ticked = ticks.load(Ordering::SeqCst);
            ticker.abort();
            assert_eq!(next, 11);
            assert!(ticked >= 20, "{ticked}");
            assert_eq!(
                allocator.next_n_async(15).await.unwrap(),
                (12..27).collect::<Vec<_>>()
            );
            assert!(allocator.stats().waits >= 1);
        },
    );
}

#[test]
fn next_async_gives_up_after_max_wait_on_paused_time() {
    let store = MemoryStore::new();
    let allocator = BlockAllocator::builder(store.clone(), "orders")
        .unwrap()
        .fixed_block_size(5)
        .refill_at(0.5)
        .max_wait(Duration::from_secs(3_600))
        .build()
        .unwrap();
    assert_eq!(allocator.next().unwrap(), 1);
    store.hang(true);
    on_runtime("next_async's deadline", paused, async move || {
        for expected in 2..=5 {
            assert_eq!(allocator.next_async().await.unwrap(), expected);
        }
        let start = tokio::time::Instant::now();
        // An hour of the paused clock: the wait is a runtime timer.
        match allocator.next_async().await {
            Err(Error::BlocksUnavailable { waited_ms, .. }) => assert_eq!(waited_ms, 3_600_000),
            other => panic!("{other:?}"),
        }
        assert!(start.elapsed() >= Duration::from_secs(3_600));
        store.hang(false);
    });
}

/// The futures can be spawned on a multi-threaded runtime: each is `Send`. (Checked by
/// the compiler; never called.)
#[allow(dead_code)]
fn the_async_calls_are_send(
    generator: &Generator,
    leased: LeasedGenerator,
    builder: LeasedBuilder<idgen::DefaultClock>,
    allocator: &BlockAllocator,
) {
    fn send<T: Send>(_: &T) {}
    send(&generator.next_id_async());
    send(&generator.next_ids_async(2));
    send(&builder.acquire_async());
    send(&leased.release_async());
    send(&allocator.next_async());
    send(&allocator.next_n_async(2));
}

#[test]
fn closing_an_allocator_wakes_the_tasks_waiting_for_a_block() {
    let store = MemoryStore::new();
    let allocator = Arc::new(
        BlockAllocator::builder(store.clone(), "orders")
            .unwrap()
            .fixed_block_size(5)
            .refill_at(0.5)
            .max_wait(Duration::from_secs(3_600))
            .build()
            .unwrap(),
    );
    assert_eq!(allocator.next().unwrap(), 1);
    // Every grant fails from now on: the fetcher retries with backoff while a task waits,
    // and stops when the allocator closes.
    store.fail(true);
    // The first call waited for the first block.
    let waits_before = allocator.stats().waits;
    let closer = std::thread::spawn({
        let allocator = Arc::clone(&allocator);
        move || {
            blocks::wait_for("a task waiting for a block", || {
                allocator.stats().waits > waits_before
            });
            allocator.close()
        }
    });
    on_runtime(
        "a task waiting for a block, then the allocator closed",
        current_thread,
        {
            let allocator = Arc::clone(&allocator);
            async move || {
                for expected in 2..=5 {
                    assert_eq!(allocator.next_async().await.unwrap(), expected);
                }
                // Woken by the close, not by its hour-long deadline.
                match allocator.next_async().await {
                    Err(Error::AllocatorClosed { .. }) => {}
                    other => panic!("{other:?}"),
                }
            }
        },
    );
    closer.join().unwrap().unwrap();
}
