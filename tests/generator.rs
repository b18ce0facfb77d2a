//! Behaviour of one generator on an injected clock: every clock step is exact.

use std::thread;
use std::time::{Duration, Instant};

use idgen::{Error, Field, Generator, Id, IdParts, Layout, ManualClock, Stats};

mod common;
use common::LaggingClock;

const EPOCH: u64 = idgen::DEFAULT_EPOCH_UNIX_MS;
const T0: u64 = EPOCH + 1_000_000;

fn generator_at(unix_ms: u64) -> (Generator<ManualClock>, ManualClock) {
    let clock = ManualClock::new(unix_ms);
    let generator = Generator::builder()
        .datacenter(3)
        .worker(9)
        .clock(clock.clone())
        .build()
        .unwrap();
    (generator, clock)
}

fn tiny_sequence(bits: u32, clock: &ManualClock) -> Generator<ManualClock> {
    Generator::builder()
        .layout(Layout::new(63 - bits - 10, 5, 5, bits).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn same_millisecond_counts_up_from_zero() {
    let (generator, _clock) = generator_at(T0);
    for expected in 0..100 {
        let parts = generator.decode(generator.next_id().unwrap());
        assert_eq!(
            parts,
            IdParts {
                unix_ms: T0,
                datacenter: 3,
                worker: 9,
                sequence: expected
            }
        );
    }
}

#[test]
fn a_new_millisecond_restarts_the_sequence() {
    let (generator, clock) = generator_at(T0);
    generator.next_id().unwrap();
    generator.next_id().unwrap();
    clock.advance(1);
    let parts = generator.decode(generator.next_id().unwrap());
    assert_eq!((parts.unix_ms, parts.sequence), (T0 + 1, 0));
}

#[test]
fn the_id_after_a_full_millisecond_is_in_the_next_one_with_sequence_zero() {
    let clock = ManualClock::new(T0);
    let generator = Generator::builder().clock(clock.clone()).build().unwrap();
    let per_ms = generator.layout().ids_per_ms_per_node();
    let mut last = None;
    for _ in 0..per_ms {
        last = Some(generator.try_next_id().unwrap());
    }
    assert_eq!(generator.decode(last.unwrap()).sequence, per_ms - 1);
    // The (2^seq + 1)-th: without waiting it is refused, never wrapped ...
    assert_eq!(
        generator.try_next_id(),
        Err(Error::WouldBlock { wait_ms: 1 })
    );
    // ... and once the clock moves it lands in the next millisecond at sequence 0.
    clock.advance(1);
    let parts = generator.decode(generator.try_next_id().unwrap());
    assert_eq!((parts.unix_ms, parts.sequence), (T0 + 1, 0));
    assert_eq!(generator.stats().sequence_exhausted, 1);
}

#[test]
fn next_id_waits_for_the_clock_when_the_millisecond_is_used_up() {
    let clock = ManualClock::new(T0);
    let generator = tiny_sequence(1, &clock);
    let first = generator.next_id().unwrap();
    let second = generator.next_id().unwrap();
    let third = thread::scope(|s| {
        let waiter = s.spawn(|| generator.next_id().unwrap());
        // The waiter has found the millisecond used up ...
        let deadline = Instant::now() + Duration::from_secs(10);
        while generator.stats().sequence_exhausted == 0 {
            assert!(
                !waiter.is_finished(),
                "issued a third ID in a 2-ID millisecond"
            );
            assert!(
                Instant::now() < deadline,
                "the third call never found its millisecond used up"
            );
            thread::sleep(Duration::from_millis(1));
        }
        // ... and, the clock standing still, goes on waiting: elapsed time is the point.
        thread::sleep(Duration::from_millis(20));
        assert!(
            !waiter.is_finished(),
            "issued a third ID in a 2-ID millisecond"
        );
        clock.advance(1);
        waiter.join().unwrap()
    });
    assert!(first < second && second < third);
    let parts = generator.decode(third);
    assert_eq!((parts.unix_ms, parts.sequence), (T0 + 1, 0));
}

#[test]
fn a_small_step_back_continues_without_repeats_or_decreases() {
    let clock = ManualClock::new(T0);
    let generator = tiny_sequence(2, &clock);
    let before = generator.next_id().unwrap();
    clock.set(T0 - 3); // within the default 10 ms tolerance
    let mut ids = vec![before];
    // The rest of the last millisecond's sequence is still used ...
    for _ in 0..3 {
        ids.push(generator.next_id().unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(ids.iter().all(|&id| generator.decode(id).unix_ms == T0));
    // ... then it waits rather than go below the last issued millisecond.
    assert!(matches!(
        generator.try_next_id(),
        Err(Error::WouldBlock { wait_ms: 4 })
    ));
    clock.set(T0 + 1);
    let after = generator.next_id().unwrap();
    assert!(after > *ids.last().unwrap());
    // Three calls went on in the last millisecond and one had to wait.
    assert_eq!(generator.stats().clock_behind, 4);
}

#[test]
fn a_big_step_back_refuses_and_changes_nothing() {
    let (generator, clock) = generator_at(T0);
    let last = generator.next_id().unwrap();
    clock.set(T0 - 11);
    for _ in 0..3 {
        assert_eq!(
            generator.next_id(),
            Err(Error::ClockMovedBackwards { behind_ms: 11 })
        );
    }
    assert_eq!(generator.high_water_mark(), Some(last));
    let stats = generator.stats();
    assert_eq!((stats.refused, stats.refused_clock_behind), (3, 3));
    // Once the clock is back, the next ID follows the last one directly.
    clock.set(T0);
    let next = generator.next_id().unwrap();
    assert_eq!(next.as_u64(), last.as_u64() + 1);
}

#[test]
fn tolerance_zero_refuses_any_step_back() {
    let clock = ManualClock::new(T0);
    let generator = Generator::builder()
        .clock(clock.clone())
        .clock_back_tolerance_ms(0)
        .build()
        .unwrap();
    generator.next_id().unwrap();
    clock.set(T0 - 1);
    assert_eq!(
        generator.next_id(),
        Err(Error::ClockMovedBackwards { behind_ms: 1 })
    );
}

#[test]
fn borrowing_runs_ahead_of_the_clock_only_as_far_as_allowed() {
    let clock = ManualClock::new(T0);
    let generator = Generator::builder()
        .layout(Layout::new(51, 5, 5, 2).unwrap())
        .clock(clock.clone())
        .borrow_ahead_ms(2)
        .build()
        .unwrap();
    let ids: Vec<Id> = (0..12).map(|_| generator.try_next_id().unwrap()).collect();
    let millis: Vec<u64> = ids
        .iter()
        .map(|&id| generator.decode(id).unix_ms - T0)
        .collect();
    assert_eq!(millis, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    assert_eq!(
        generator.try_next_id(),
        Err(Error::WouldBlock { wait_ms: 1 })
    );
}

#[test]
fn two_workers_in_the_same_millisecond_never_collide() {
    let clock = ManualClock::new(T0);
    let build = |worker| {
        Generator::builder()
            .worker(worker)
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let (a, b) = (build(1), build(2));
    let mut ids: Vec<Id> = (0..4096)
        .flat_map(|_| [a.try_next_id().unwrap(), b.try_next_id().unwrap()])
        .collect();
    assert!(ids.iter().all(|&id| a.decode(id).unix_ms == T0));
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 2 * 4096);
}

#[test]
fn ids_fit_in_63_bits_up_to_the_last_instant() {
    let layout = Layout::default();
    let clock = ManualClock::new(layout.last_unix_ms());
    let generator = Generator::builder()
        .datacenter(31)
        .worker(31)
        .clock(clock.clone())
        .build()
        .unwrap();
    let ids = generator.next_ids(4096).unwrap();
    assert_eq!(*ids.last().unwrap(), Id::MAX);
    assert!(ids.iter().all(|id| id.as_i64() >= 0));
    // Every slot used: the end of time, not a wrap and not a wait.
    let exhausted = Err(Error::TimeExhausted {
        last_unix_ms: layout.last_unix_ms(),
    });
    assert_eq!(generator.try_next_id(), exhausted);
    clock.advance(1);
    assert_eq!(generator.next_id(), exhausted);
}

#[test]
fn refusals_are_counted_by_reason() {
    let layout = Layout::default();
    let last = layout.last_unix_ms();
    let clock = ManualClock::new(last - 10);
    let generator = Generator::builder()
        .clock(clock.clone())
        .clock_back_tolerance_ms(0)
        .build()
        .unwrap();
    generator.next_id().unwrap();
    clock.set(last - 15);
    assert!(matches!(
        generator.next_id(),
        Err(Error::ClockMovedBackwards { behind_ms: 5 })
    ));
    clock.set(EPOCH - 1);
    assert!(matches!(
        generator.next_id(),
        Err(Error::BeforeEpoch { .. })
    ));
    clock.set(last);
    generator.next_ids(4096).unwrap();
    for _ in 0..2 {
        assert!(matches!(
            generator.next_id(),
            Err(Error::TimeExhausted { .. })
        ));
    }
    let stats = generator.stats();
    assert_eq!(stats.refused_time_exhausted, 2);
    assert_eq!(
        stats.refused_clock_behind, 2,
        "clock behind, and before the epoch"
    );
    assert_eq!(stats.refused_lease, 0);
    assert_eq!(stats.refused, 4);
}

#[test]
fn a_clock_before_the_epoch_is_refused() {
    let clock = ManualClock::new(T0);
    let generator = Generator::builder().clock(clock.clone()).build().unwrap();
    clock.set(EPOCH - 1);
    assert_eq!(
        generator.next_id(),
        Err(Error::BeforeEpoch {
            unix_ms: EPOCH - 1,
            epoch_unix_ms: EPOCH
        })
    );
}

#[test]
fn bad_configuration_is_rejected_at_build() {
    let clock = ManualClock::new(T0);
    let build = |dc, worker, layout| {
        Generator::builder()
            .layout(layout)
            .datacenter(dc)
            .worker(worker)
            .clock(clock.clone())
            .build()
            .map(|_| ())
    };
    assert_eq!(
        build(32, 0, Layout::DEFAULT),
        Err(Error::FieldOutOfRange {
            field: Field::Datacenter,
            value: 32,
            max: 31
        })
    );
    assert_eq!(
        build(0, 32, Layout::DEFAULT),
        Err(Error::FieldOutOfRange {
            field: Field::Worker,
            value: 32,
            max: 31
        })
    );
    let no_dc = Layout::new(41, 0, 10, 12).unwrap();
    assert!(build(1, 0, no_dc).is_err());
    assert!(build(0, 1023, no_dc).is_ok());
    let future = Layout::DEFAULT.with_epoch_unix_ms((T0 + 1) as i64).unwrap();
    assert_eq!(
        build(0, 0, future),
        Err(Error::EpochInFuture {
            epoch_unix_ms: T0 + 1,
            now_unix_ms: T0
        })
    );
}

#[test]
fn bad_layouts_are_rejected() {
    assert_eq!(
        Layout::new(41, 5, 5, 13),
        Err(Error::LayoutWidthSum { total: 64 })
    );
    assert_eq!(
        Layout::new(41, 5, 5, 11),
        Err(Error::LayoutWidthSum { total: 62 })
    );
    assert_eq!(
        Layout::new(u32::MAX, u32::MAX, 1, 1),
        Err(Error::LayoutWidthSum { total: u32::MAX })
    );
    assert_eq!(
        Layout::new(0, 20, 21, 22),
        Err(Error::LayoutZeroWidth { field: Field::Time })
    );
    assert_eq!(
        Layout::new(41, 11, 11, 0),
        Err(Error::LayoutZeroWidth {
            field: Field::Sequence
        })
    );
    assert_eq!(
        Layout::DEFAULT.with_epoch_unix_ms(-5),
        Err(Error::EpochBefore1970 { epoch_unix_ms: -5 })
    );
    assert!(Layout::new(39, 0, 12, 12).is_ok());
    assert!(Layout::new(53, 0, 10, 0).is_err());
}

#[test]
fn resuming_after_an_id_issues_only_above_it() {
    let clock = ManualClock::new(T0);
    let earlier = Generator::builder()
        .worker(4)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut last = earlier.next_id().unwrap();
    for _ in 0..10 {
        last = earlier.next_id().unwrap();
    }
    let resume = |worker| {
        Generator::builder()
            .worker(worker)
            .clock(clock.clone())
            .resume_after(last)
            .build()
            .unwrap()
    };
    // Same worker, or one that sorts above it: the same millisecond still has room.
    for worker in [4, 5] {
        let next = resume(worker).next_id().unwrap();
        assert!(next > last, "worker {worker}: {next:?} <= {last:?}");
        assert_eq!(earlier.decode(next).unix_ms, T0);
    }
    // A worker that sorts below it must move to the next millisecond.
    let below = resume(3);
    assert_eq!(below.try_next_id(), Err(Error::WouldBlock { wait_ms: 1 }));
    clock.advance(1);
    let next = below.next_id().unwrap();
    assert!(next > last);
    assert_eq!(below.decode(next).worker, 3);
}

#[test]
fn resuming_after_a_millisecond_starts_in_the_next_one_and_guards_the_clock() {
    let clock = ManualClock::new(T0);
    // The earlier holder's clock was 50 ms ahead of ours.
    let generator = Generator::builder()
        .clock(clock.clone())
        .resume_after_unix_ms(T0 + 50)
        .build()
        .unwrap();
    assert_eq!(
        generator.next_id(),
        Err(Error::ClockMovedBackwards { behind_ms: 50 })
    );
    clock.set(T0 + 50);
    assert!(matches!(
        generator.try_next_id(),
        Err(Error::WouldBlock { wait_ms: 1 })
    ));
    clock.set(T0 + 51);
    let parts = generator.decode(generator.next_id().unwrap());
    assert_eq!((parts.unix_ms, parts.sequence), (T0 + 51, 0));
    let too_late = Generator::builder()
        .clock(clock.clone())
        .resume_after_unix_ms(Layout::DEFAULT.last_unix_ms())
        .build();
    assert!(matches!(too_late, Err(Error::TimeExhausted { .. })));
}

#[test]
fn batches_are_increasing_disjoint_and_span_milliseconds() {
    let clock = ManualClock::new(T0);
    let generator = tiny_sequence(3, &clock);
    let single = generator.next_id().unwrap();
    let batch = thread::scope(|s| {
        let batch = s.spawn(|| generator.next_ids(20).unwrap());
        // 7 IDs left in this millisecond, 8 in each after: the batch needs two more. Move
        // the clock only once the batch waits for it, however late its thread runs.
        for waits in 1..=2 {
            while generator.stats().sequence_exhausted < waits {
                thread::yield_now();
            }
            clock.advance(1);
        }
        batch.join().unwrap()
    });
    assert_eq!(batch.len(), 20);
    assert!(batch[0] > single);
    assert!(batch.windows(2).all(|w| w[0] < w[1]));
    let millis: Vec<u64> = batch
        .iter()
        .map(|&id| generator.decode(id).unix_ms - T0)
        .collect();
    assert_eq!(millis, [vec![0; 7], vec![1; 8], vec![2; 5]].concat());
    let mut out = [Id::MIN; 3];
    generator.fill_ids(&mut out).unwrap();
    assert!(out[0] > batch[19] && out[0] < out[1] && out[1] < out[2]);
    assert_eq!(generator.next_ids(0).unwrap(), Vec::<Id>::new());
}

#[test]
fn an_unallocatable_batch_is_an_error_not_a_panic() {
    let (generator, _clock) = generator_at(T0);
    assert_eq!(
        generator.next_ids(usize::MAX),
        Err(Error::BatchTooLarge {
            requested: usize::MAX
        })
    );
    assert_eq!(generator.stats(), Stats::default());
}

#[test]
fn generators_are_send_and_sync_and_live_in_statics() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Generator>();
    assert_send_sync::<Generator<ManualClock>>();
    static GENERATOR: std::sync::LazyLock<Generator> =
        std::sync::LazyLock::new(|| Generator::builder().build().unwrap());
    let a = GENERATOR.next_id().unwrap();
    let b = thread::spawn(|| GENERATOR.next_id().unwrap())
        .join()
        .unwrap();
    assert!(a < b);
}

#[test]
fn a_lagging_cheap_reading_dates_ids_early_but_never_waits_or_refuses() {
    let clock = LaggingClock {
        recent: ManualClock::new(T0),
        precise: ManualClock::new(T0 + 1),
    };
    let generator = Generator::builder()
        .layout(Layout::new(51, 5, 5, 2).unwrap())
        .clock(clock.clone())
        .clock_back_tolerance_ms(0)
        .build()
        .unwrap();
    // The fast path dates IDs by the cheap reading ...
    let ids: Vec<Id> = (0..8).map(|_| generator.try_next_id().unwrap()).collect();
    let millis: Vec<u64> = ids
        .iter()
        .map(|&id| generator.decode(id).unix_ms - T0)
        .collect();
    // ... and when that millisecond is used up, the precise reading moves on without a wait,
    // although the cheap reading is now behind the last issued millisecond and tolerance is 0.
    assert_eq!(millis, [0, 0, 0, 0, 1, 1, 1, 1]);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    // Only the precise reading can make a call wait.
    assert_eq!(
        generator.try_next_id(),
        Err(Error::WouldBlock { wait_ms: 1 })
    );
    assert_eq!(generator.stats().refused, 0);
    assert_eq!(generator.stats().clock_behind, 0);
    // A cheap reading before the epoch falls back to the precise one too.
    clock.recent.set(EPOCH - 5);
    clock.precise.set(T0 + 2);
    assert_eq!(
        generator.decode(generator.next_id().unwrap()).unix_ms,
        T0 + 2
    );
}

#[test]
fn the_high_water_mark_never_falls_below_the_resume_mark() {
    let clock = ManualClock::new(T0);
    let earlier = Generator::builder()
        .worker(3)
        .clock(clock.clone())
        .build()
        .unwrap();
    let last = (0..6).map(|_| earlier.next_id().unwrap()).last().unwrap();
    // A worker that sorts above it resumes after it and persists its mark before issuing.
    let above = Generator::builder()
        .worker(7)
        .clock(clock.clone())
        .resume_after(last)
        .build()
        .unwrap();
    let mark = above.high_water_mark().unwrap();
    assert!(mark >= last, "{mark:?} < {last:?}");
    // Worker 3 coming back after that mark can not reissue anything it issued before.
    let again = Generator::builder()
        .worker(3)
        .clock(clock.clone())
        .resume_after(mark)
        .build()
        .unwrap();
    assert!(again.next_id().unwrap() > last);
}

#[test]
fn the_high_water_mark_of_a_generator_resumed_after_a_millisecond_is_that_millisecond() {
    let clock = ManualClock::new(T0);
    let fresh = Generator::builder().clock(clock.clone()).build().unwrap();
    assert_eq!(fresh.high_water_mark(), None);
    let resumed = Generator::builder()
        .worker(5)
        .clock(clock.clone())
        .resume_after_unix_ms(T0 - 10)
        .build()
        .unwrap();
    // Before any ID: the last ID of the mark's millisecond on this node, as documented.
    let mark = resumed.high_water_mark().unwrap();
    let parts = resumed.decode(mark);
    assert_eq!(
        (parts.unix_ms, parts.worker, parts.sequence),
        (T0 - 10, 5, 4095)
    );
    assert!(resumed.next_id().unwrap() > mark);
}

#[test]
fn extreme_layouts_work_end_to_end() {
    // One bit of time (2 ms of life) with 62 of sequence, and 62 of time with 1 of sequence.
    for (time, sequence) in [(1u32, 62u32), (62, 1)] {
        let layout = Layout::new(time, 0, 0, sequence).unwrap();
        assert_eq!(layout.ids_per_ms_per_node(), 1 << sequence);
        assert_eq!(layout.ids_per_second_per_node(), 1000u128 << sequence);
        assert_eq!(layout.cluster_ids_per_second(), 1000u128 << sequence);
        let clock = ManualClock::new(EPOCH + 1);
        let generator = Generator::builder()
            .layout(layout)
            .clock(clock.clone())
            .build()
            .unwrap();
        // Both layouts hold at least 2 IDs per millisecond; a third would wait for the clock.
        let ids = generator.next_ids(2).unwrap();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(
            ids.iter()
                .all(|&id| generator.decode(id).unix_ms == EPOCH + 1)
        );
        assert_eq!(
            generator.decode(ids[0]),
            IdParts {
                unix_ms: EPOCH + 1,
                datacenter: 0,
                worker: 0,
                sequence: 0
            }
        );
    }
    // Past a 1-bit layout's last instant the build is refused rather than every call.
    let clock = ManualClock::new(EPOCH + 2);
    let short = Generator::builder()
        .layout(Layout::new(1, 0, 0, 62).unwrap())
        .clock(clock)
        .build();
    assert!(
        matches!(short, Err(Error::TimeExhausted { last_unix_ms }) if last_unix_ms == EPOCH + 1)
    );
}
