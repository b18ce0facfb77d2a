//! loom models of the real generator code: every atomic, spin and yield of the generator
//! goes through `src/sync.rs`, so loom explores the interleavings of the actual CAS loop.
//!
//! Run: `RUSTFLAGS="--cfg idgen_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom`
#![cfg(idgen_loom)]

use idgen::{Error, Generator, Id, Layout, ManualClock, Uuid7, Uuid7Generator};
use loom::sync::Arc;
use loom::thread;

#[path = "../tests/common/mod.rs"]
mod common;
use common::LaggingClock;

const T0: u64 = idgen::DEFAULT_EPOCH_UNIX_MS + 1_000;

fn generator(
    sequence_bits: u32,
    tolerance_ms: u64,
    clock: &ManualClock,
) -> Arc<Generator<ManualClock>> {
    Arc::new(
        Generator::builder()
            .layout(Layout::new(63 - 10 - sequence_bits, 5, 5, sequence_bits).unwrap())
            .clock(clock.clone())
            .clock_back_tolerance_ms(tolerance_ms)
            .build()
            .unwrap(),
    )
}

fn spawn_ids(generator: &Arc<Generator<ManualClock>>, count: usize) -> thread::JoinHandle<Vec<Id>> {
    let generator = generator.clone();
    thread::spawn(move || (0..count).map(|_| generator.next_id().unwrap()).collect())
}

/// Moves the clock one millisecond forward once a call is waiting for it. (A ticker that
/// moved it unconditionally could move it before any ID is issued, and leave the last
/// caller waiting for a millisecond that never comes: loom finds that schedule.)
fn spawn_ticker(
    generator: &Arc<Generator<ManualClock>>,
    clock: &ManualClock,
) -> thread::JoinHandle<()> {
    let (generator, clock) = (generator.clone(), clock.clone());
    thread::spawn(move || {
        while generator.stats().sequence_exhausted == 0 {
            thread::yield_now();
        }
        clock.advance(1);
    })
}

/// Two `next_id` calls from another thread while a keeper changes the tenure: the IDs
/// issued, with refusals for a lease not valid at that moment left out (any other error
/// fails the model).
fn spawn_issuer<C: idgen::Clock + 'static>(
    generator: &Arc<Generator<C>>,
) -> thread::JoinHandle<Vec<Id>> {
    let generator = generator.clone();
    thread::spawn(move || {
        let mut ids = Vec::new();
        for _ in 0..2 {
            match generator.next_id() {
                Ok(id) => ids.push(id),
                Err(Error::LeaseExpired { .. }) => {}
                Err(error) => panic!("{error}"),
            }
        }
        ids
    })
}

/// Each list strictly increasing, and no ID in two places.
fn assert_unique_and_increasing(lists: &[Vec<Id>]) -> Vec<Id> {
    for ids in lists {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "not increasing: {ids:?}"
        );
    }
    let mut all: Vec<Id> = lists.concat();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "duplicates in {lists:?}");
    all
}

#[test]
fn concurrent_next_id_is_unique_and_increasing_per_thread() {
    loom::model(|| {
        let clock = ManualClock::new(T0);
        let generator = generator(12, 10, &clock);
        let a = spawn_ids(&generator, 2);
        let b = spawn_ids(&generator, 2);
        let mine: Vec<Id> = (0..1).map(|_| generator.next_id().unwrap()).collect();
        let all = assert_unique_and_increasing(&[a.join().unwrap(), b.join().unwrap(), mine]);
        let sequences: Vec<u64> = all
            .iter()
            .map(|&id| generator.decode(id).sequence)
            .collect();
        assert_eq!(sequences, [0, 1, 2, 3, 4]);
    });
}

#[test]
fn sequence_overflow_waits_for_the_clock_instead_of_wrapping() {
    loom::model(|| {
        // Two IDs per millisecond, three asked for: someone must wait for the next one.
        let clock = ManualClock::new(T0);
        let generator = generator(1, 10, &clock);
        let a = spawn_ids(&generator, 2);
        let b = spawn_ids(&generator, 1);
        spawn_ticker(&generator, &clock).join().unwrap();
        let all = assert_unique_and_increasing(&[a.join().unwrap(), b.join().unwrap()]);
        let parts: Vec<(u64, u64)> = all
            .iter()
            .map(|&id| generator.decode(id))
            .map(|p| (p.unix_ms - T0, p.sequence))
            .collect();
        // The third ID waited for the next millisecond and started its sequence at 0.
        assert_eq!(parts, [(0, 0), (0, 1), (1, 0)]);
    });
}

#[test]
fn small_clock_step_back_never_repeats_or_decreases() {
    loom::model(|| {
        let clock = ManualClock::new(T0);
        let generator = generator(12, 5, &clock);
        let first = generator.next_id().unwrap();
        let stepper = {
            let clock = clock.clone();
            thread::spawn(move || clock.set(T0 - 2))
        };
        let a = spawn_ids(&generator, 2);
        let b = spawn_ids(&generator, 1);
        stepper.join().unwrap();
        let all =
            assert_unique_and_increasing(&[vec![first], a.join().unwrap(), b.join().unwrap()]);
        assert_eq!(all[0], first);
        assert!(all.iter().all(|&id| generator.decode(id).unix_ms == T0));
    });
}

#[test]
fn big_clock_step_back_refuses_and_leaves_the_state_alone() {
    loom::model(|| {
        let clock = ManualClock::new(T0 + 10);
        let generator = generator(12, 1, &clock);
        let first = generator.next_id().unwrap();
        let stepper = {
            let clock = clock.clone();
            thread::spawn(move || clock.set(T0))
        };
        let attempt = |generator: Arc<Generator<ManualClock>>| {
            thread::spawn(move || match generator.next_id() {
                Ok(id) => Some(id),
                Err(Error::ClockMovedBackwards { behind_ms: 10 }) => None,
                Err(other) => panic!("unexpected {other}"),
            })
        };
        let a = attempt(generator.clone());
        let b = attempt(generator.clone());
        stepper.join().unwrap();
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert!(a.iter().chain(&b).all(|&id| id > first));
        // A refused call issued nothing: the high-water mark is the last ID really issued.
        let all = assert_unique_and_increasing(&[
            vec![first],
            a.into_iter().collect(),
            b.into_iter().collect(),
        ]);
        assert_eq!(generator.high_water_mark(), all.last().copied());
        // With the clock still behind, calls keep failing; once it is back they go on above.
        assert!(generator.next_id().is_err());
        clock.set(T0 + 11);
        let later = generator.next_id().unwrap();
        assert!(later > *all.last().unwrap());
    });
}

#[test]
fn next_ids_racing_next_id_gives_disjoint_ids() {
    loom::model(|| {
        // Four IDs per millisecond, five asked for: the batch or a single spills over.
        let clock = ManualClock::new(T0);
        let generator = generator(2, 10, &clock);
        let batch = {
            let generator = generator.clone();
            thread::spawn(move || generator.next_ids(3).unwrap())
        };
        let singles = spawn_ids(&generator, 2);
        spawn_ticker(&generator, &clock).join().unwrap();
        let batch = batch.join().unwrap();
        assert_eq!(batch.len(), 3);
        let all = assert_unique_and_increasing(&[batch, singles.join().unwrap()]);
        let millis: Vec<u64> = all
            .iter()
            .map(|&id| generator.decode(id).unix_ms - T0)
            .collect();
        assert_eq!(millis, [0, 0, 0, 0, 1]);
    });
}

#[test]
fn a_fresher_clock_reading_is_never_mistaken_for_a_step_back() {
    // Tolerance 0: any state ahead of the clock a thread reads is refused. A thread that sees
    // a state built from a newer clock reading must also see that reading (Acquire/Release
    // on the state), or it would refuse although the clock never went back.
    loom::model(|| {
        let clock = ManualClock::new(T0);
        let generator = generator(12, 0, &clock);
        let mover = {
            let (generator, clock) = (generator.clone(), clock.clone());
            thread::spawn(move || {
                clock.set(T0 + 1);
                generator.next_id().unwrap()
            })
        };
        let other = spawn_ids(&generator, 1);
        let ids = [vec![mover.join().unwrap()], other.join().unwrap()];
        assert_unique_and_increasing(&ids);
    });
}

#[test]
fn a_lagging_cheap_reading_never_causes_a_wait_a_refusal_or_a_duplicate() {
    loom::model(|| {
        // Two slots per millisecond; the cheap reading allows one millisecond, the precise
        // one two: exactly the four IDs asked for, with no wait, even at tolerance 0.
        let clock = LaggingClock {
            recent: ManualClock::new(T0),
            precise: ManualClock::new(T0 + 1),
        };
        let generator = Arc::new(
            Generator::builder()
                .layout(Layout::new(52, 5, 5, 1).unwrap())
                .clock(clock)
                .clock_back_tolerance_ms(0)
                .build()
                .unwrap(),
        );
        let spawn = |generator: &Arc<Generator<LaggingClock>>| {
            let generator = generator.clone();
            thread::spawn(move || {
                (0..2)
                    .map(|_| generator.try_next_id().unwrap())
                    .collect::<Vec<Id>>()
            })
        };
        let (a, b) = (spawn(&generator), spawn(&generator));
        let all = assert_unique_and_increasing(&[a.join().unwrap(), b.join().unwrap()]);
        let millis: Vec<u64> = all
            .iter()
            .map(|&id| generator.decode(id).unix_ms - T0)
            .collect();
        assert_eq!(millis, [0, 0, 1, 1]);
    });
}

/// A lease keeper moves the generator to another worker number while a thread issues: the
/// old number is stopped (ceiling 0), the clock passes the new number's mark, the state is
/// raised past the mark and the new node published. The issuer's cheap clock reading lags
/// at T0, as `RecentClock`'s may, so only the raised state keeps it from dating an ID of
/// the new node at or before the mark. Every ID must be the old node's below its ceiling,
/// or the new node's above the new number's mark. (Publishing the node before raising the
/// state fails this model.)
#[test]
fn moving_to_another_worker_number_never_crosses_either_mark() {
    const OLD_CEILING: u64 = T0 + 1;
    const NEW_MARK: u64 = T0 + 5;
    loom::model(|| {
        let clock = LaggingClock {
            recent: ManualClock::new(T0),
            precise: ManualClock::new(T0),
        };
        let generator = Arc::new(
            Generator::builder()
                .layout(Layout::new(51, 5, 5, 2).unwrap())
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        idgen::loom_hooks::set_tenure(&generator, 0, 0, OLD_CEILING);
        let issuer = spawn_issuer(&generator);
        idgen::loom_hooks::set_tenure(&generator, 0, 0, 0);
        // The keeper waits for the (precise) clock to pass the new number's mark.
        clock.precise.set(NEW_MARK + 1);
        idgen::loom_hooks::move_to(&generator, 1, NEW_MARK, T0 + 100).unwrap();
        let ids = issuer.join().unwrap();
        assert_unique_and_increasing(std::slice::from_ref(&ids));
        for id in ids {
            let parts = generator.decode(id);
            match parts.worker {
                0 => assert!(parts.unix_ms < OLD_CEILING, "{parts:?}"),
                1 => assert!(parts.unix_ms > NEW_MARK, "{parts:?}"),
                other => panic!("worker {other}"),
            }
        }
    });
}

#[test]
fn moving_to_a_lower_worker_number_with_an_older_mark_keeps_ids_increasing() {
    // Inside one millisecond worker 0's IDs sort below worker 1's: after the move, the
    // generator must start a fresh millisecond, whatever an issuer does meanwhile.
    const OLD_MARK: u64 = T0 - 5;
    loom::model(|| {
        let clock = ManualClock::new(T0);
        let generator = Arc::new(
            Generator::builder()
                .layout(Layout::new(51, 5, 5, 2).unwrap())
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        idgen::loom_hooks::set_tenure(&generator, 0, 1, T0 + 100);
        let first = generator.next_id().unwrap();
        let issuer = spawn_issuer(&generator);
        idgen::loom_hooks::set_tenure(&generator, 0, 1, 0);
        idgen::loom_hooks::move_to(&generator, 0, OLD_MARK, T0 + 100).unwrap();
        // The fresh millisecond is the next one: the clock gets there.
        clock.set(T0 + 1);
        // Every ID in the order the swaps succeeded: the first before the issuer started,
        // the issuer's, then one after it finished.
        let mut ids = vec![first];
        ids.extend(issuer.join().unwrap());
        ids.push(generator.next_id().unwrap());
        assert_unique_and_increasing(std::slice::from_ref(&ids));
        assert_eq!(generator.decode(*ids.last().unwrap()).worker, 0);
    });
}

/// The fast path (`FastPath::issue_one`) decides most calls on its own, and defers in the
/// last `borrow_ms` milliseconds of the layout: two threads race through its window and
/// past it, then the full transition takes over at the end of the layout. (A fast path
/// that let a slot past the window or past the layout through would issue an ID dated
/// ahead of the borrow, or after the layout's last millisecond: this model checks every
/// ID's time and the refusal at the end.)
#[test]
fn the_fast_path_hands_over_to_the_full_transition_at_the_end_of_the_layout() {
    loom::model(|| {
        // 4 time bits: milliseconds 0..=15 since the epoch; 2 IDs per millisecond; 1 ms of
        // borrowing, so the fast path serves readings below 14 and defers from 14 on.
        let layout = Layout::new(4, 29, 29, 1).unwrap();
        let epoch = layout.epoch_unix_ms();
        let clock = ManualClock::new(epoch + 12);
        let generator = Arc::new(
            Generator::builder()
                .layout(layout)
                .clock(clock.clone())
                .clock_back_tolerance_ms(0)
                .borrow_ahead_ms(1)
                .build()
                .unwrap(),
        );
        // Milliseconds 12 and 13 (borrowed) hold four IDs; the fifth must wait for the
        // clock to reach 13, which the ticker moves it to once a call waits.
        let a = spawn_ids(&generator, 3);
        let b = spawn_ids(&generator, 2);
        spawn_ticker(&generator, &clock).join().unwrap();
        let mut lists = vec![a.join().unwrap(), b.join().unwrap()];
        // From 14 the full transition decides; 15 is the last millisecond, 16 past the end.
        clock.set(epoch + 15);
        let late = vec![generator.next_id().unwrap(), generator.next_id().unwrap()];
        assert!(matches!(
            generator.next_id(),
            Err(Error::TimeExhausted { .. })
        ));
        lists.push(late);
        let all = assert_unique_and_increasing(&lists);
        let times: Vec<u64> = all
            .iter()
            .map(|&id| generator.decode(id).unix_ms - epoch)
            .collect();
        assert_eq!(times, [12, 12, 13, 13, 14, 15, 15]);
    });
}

/// The default clock's shared word (`CachedReading`): a reader racing the upkeep thread's
/// refreshes and end of period never sees a reading ahead of the clock or going backwards,
/// and a reader that finds the thread parked gets the precise reading and leaves demand
/// noted, so the thread resumes rather than parking on a word readers depend on.
#[test]
fn the_default_clocks_word_never_leads_the_clock_nor_goes_back() {
    use idgen::Clock;
    use idgen::loom_hooks::CachedReading;
    loom::model(|| {
        let clock = ManualClock::new(T0);
        let word = Arc::new(CachedReading::idle());
        let upkeep = {
            let (clock, word) = (clock.clone(), word.clone());
            thread::spawn(move || {
                word.refresh(clock.now_unix_ms());
                word.refresh(clock.now_unix_ms());
                // The first refresh counted as asked; the second end of period is idle
                // unless the reader asked in between.
                word.end_period();
                word.end_period()
            })
        };
        let reader = {
            let (clock, word) = (clock.clone(), word.clone());
            thread::spawn(move || {
                let mut seen = Vec::new();
                let mut resumed = false;
                // The clock moves while the upkeep thread may hold an older reading.
                clock.advance(1);
                for _ in 0..2 {
                    let reading = match word.read() {
                        Some(reading) => reading,
                        None => {
                            let precise = clock.now_unix_ms();
                            word.resume(precise);
                            resumed = true;
                            precise
                        }
                    };
                    assert!(reading <= clock.now_unix_ms(), "reading ahead of the clock");
                    seen.push(reading);
                }
                assert!(seen[0] <= seen[1], "reading went back: {seen:?}");
                resumed
            })
        };
        let resumed = reader.join().unwrap();
        let busy = upkeep.join().unwrap();
        if !busy && !resumed {
            // Parked after the reader was done: the word says so, and the next reader
            // goes to the precise clock.
            assert!(word.is_idle());
            assert_eq!(word.read(), None);
        }
        if !word.is_idle() {
            assert!(word.read().unwrap() <= clock.now_unix_ms());
        }
    });
}

/// A reader stalled between its precise reading and raising the word, while another reader
/// raised it further and the upkeep thread parked: the late raise never lowers the word,
/// so the other reader's readings never go backwards. (A word that forgot its reading when
/// parked, and took the late raise as is, fails this model.)
#[test]
fn a_late_raise_after_a_park_never_lowers_the_default_clocks_word() {
    use idgen::Clock;
    use idgen::loom_hooks::CachedReading;
    fn read_or_resume(word: &CachedReading, clock: &ManualClock) -> u64 {
        word.read().unwrap_or_else(|| {
            let precise = clock.now_unix_ms();
            word.resume(precise);
            precise
        })
    }
    loom::model(|| {
        let clock = ManualClock::new(T0);
        let word = Arc::new(CachedReading::idle());
        let stalled = {
            let (clock, word) = (clock.clone(), word.clone());
            thread::spawn(move || read_or_resume(&word, &clock))
        };
        clock.advance(1);
        let first = read_or_resume(&word, &clock);
        // The upkeep thread's two period ends: the first clears the demand, the second parks.
        word.end_period();
        word.end_period();
        let second = read_or_resume(&word, &clock);
        assert!(first <= second, "reading went back: {first} then {second}");
        assert!(second <= clock.now_unix_ms());
        stalled.join().unwrap();
    });
}

/// A UUIDv7 generator with a counter of `counter_bits` on a manual clock.
fn uuid_generator(counter_bits: u32, clock: &ManualClock) -> Arc<Uuid7Generator<ManualClock>> {
    Arc::new(
        idgen::loom_hooks::counter_bits(
            Uuid7Generator::builder().clock(clock.clone()),
            counter_bits,
        )
        .build()
        .unwrap(),
    )
}

/// The counter of a UUID of a generator with `counter_bits`: the 22-bit counter field is
/// `rand_a` and the top 10 bits of `rand_b`; a narrower counter sits at its low end.
fn uuid_counter(uuid: Uuid7, counter_bits: u32) -> u64 {
    let b = uuid.as_bytes();
    let rand_a = u64::from(b[6] & 0x0f) << 8 | u64::from(b[7]);
    let rand_b_top = u64::from(b[8] & 0x3f) << 4 | u64::from(b[9] >> 4);
    (rand_a << 10 | rand_b_top) & ((1 << counter_bits) - 1)
}

/// Two threads enter a new millisecond at once with different seeds: whichever swap wins
/// seeds the counter, and the other thread counts on from it instead of starting at its
/// own seed (so the loser's UUID is the winner's + 1, never a jump nor a repeat). A third
/// call after the clock moves seeds the next millisecond again.
#[test]
fn a_new_millisecond_is_seeded_once_and_counted_on_from() {
    loom::model(|| {
        let clock = ManualClock::new(T0);
        let generator = uuid_generator(3, &clock);
        // Seeds: 1 and 3 (top bit of 3 counter bits clear); the random words are unused
        // here beyond their low bits.
        let spawn = |seed: u64| {
            let generator = generator.clone();
            thread::spawn(move || idgen::loom_hooks::next_with(&generator, seed, seed).unwrap())
        };
        let (a, b) = (spawn(1), spawn(3));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        let (first, second) = if a < b { (a, b) } else { (b, a) };
        assert_ne!(a, b);
        assert_eq!(first.unix_ms(), T0);
        assert_eq!(second.unix_ms(), T0);
        assert!(matches!(uuid_counter(first, 3), 1 | 3), "{first:?}");
        assert_eq!(uuid_counter(second, 3), uuid_counter(first, 3) + 1);
        clock.advance(1);
        let third = idgen::loom_hooks::next_with(&generator, 2, 2).unwrap();
        assert_eq!((third.unix_ms(), uuid_counter(third, 3)), (T0 + 1, 2));
    });
}

/// The counter runs out within a millisecond while two threads count: nothing past its last
/// value is issued, the caller that finds it used up waits for the clock (moved by a third
/// thread only once someone waits), and every UUID is unique and increasing per thread.
#[test]
fn a_used_up_counter_waits_for_the_next_millisecond() {
    loom::model(|| {
        let clock = ManualClock::new(T0);
        // 2 counter bits: seed 1 leaves slots 1, 2, 3 in the millisecond.
        let generator = uuid_generator(2, &clock);
        let spawn = |count: usize| {
            let generator = generator.clone();
            thread::spawn(move || {
                (0..count)
                    .map(|_| idgen::loom_hooks::next_with(&generator, 1, 0).unwrap())
                    .collect::<Vec<_>>()
            })
        };
        let (a, b) = (spawn(2), spawn(2));
        let ticker = {
            let (generator, clock) = (generator.clone(), clock.clone());
            thread::spawn(move || {
                while generator.stats().sequence_exhausted == 0 {
                    thread::yield_now();
                }
                clock.advance(1);
            })
        };
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        ticker.join().unwrap();
        for uuids in [&a, &b] {
            assert!(uuids.windows(2).all(|w| w[0] < w[1]), "{uuids:?}");
        }
        let mut all: Vec<(u64, u64)> = a
            .iter()
            .chain(&b)
            .map(|&uuid| (uuid.unix_ms(), uuid_counter(uuid, 2)))
            .collect();
        all.sort();
        // Three in the first millisecond (seed 1, then 2 and 3), the fourth seeded anew.
        assert_eq!(all, [(T0, 1), (T0, 2), (T0, 3), (T0 + 1, 1)]);
    });
}

/// The block allocator's cursor: two takers (one taking runs of two) race each other and
/// the installs of new blocks, which either of them makes once it finds the block used up
/// (under a lock, as the allocator does). No value is taken twice, every value comes from
/// a block, and each taker's values increase. (Storing `end` before `next` in `install`
/// fails this model: a taker then takes the old block's end.)
#[test]
fn block_cursor_takers_and_installs_never_share_a_value() {
    use idgen::loom_hooks::BlockCursor;
    use loom::sync::Mutex;
    loom::model(|| {
        let cursor = Arc::new(BlockCursor::new());
        cursor.install(1, 3);
        assert_eq!(cursor.take(2), Some((1, 3)));
        // Both takers start on a used-up block. Blocks go up; the second starts above a
        // gap another process took.
        let pending = Arc::new(Mutex::new(vec![(20, 24), (10, 11)]));
        let spawn_taker = |want: u64| {
            let (cursor, pending) = (cursor.clone(), pending.clone());
            thread::spawn(move || {
                let mut got = Vec::new();
                while got.len() < 2 {
                    match cursor.take(want) {
                        Some((first, upto)) => got.extend(first..upto),
                        None => {
                            let mut pending = pending.lock().unwrap();
                            if cursor.is_used_up() {
                                let (first, end) = pending.pop().expect("enough blocks");
                                cursor.install(first, end);
                            }
                        }
                    }
                }
                got
            })
        };
        let (a, b) = (spawn_taker(1), spawn_taker(2));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        for run in [&a, &b] {
            assert!(run.windows(2).all(|pair| pair[0] < pair[1]), "{run:?}");
        }
        let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
        all.sort_unstable();
        let before = all.len();
        all.dedup();
        assert_eq!(all.len(), before, "a value taken twice: {a:?} {b:?}");
        assert!(
            all.iter().all(|v| [10, 20, 21, 22, 23].contains(v)),
            "{all:?}"
        );
    });
}

/// Closing the cursor while a taker runs: every value taken lies below the point `close`
/// reports, so giving back from there hands nothing out twice.
#[test]
fn a_closed_cursor_gives_back_only_values_never_taken() {
    use idgen::loom_hooks::BlockCursor;
    loom::model(|| {
        let cursor = Arc::new(BlockCursor::new());
        cursor.install(1, 4);
        let taker = {
            let cursor = cursor.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                while let Some((first, upto)) = cursor.take(1) {
                    got.extend(first..upto);
                }
                got
            })
        };
        let unused_from = cursor.close();
        let got = taker.join().unwrap();
        assert!(
            got.iter().all(|&v| v < unused_from),
            "{got:?} vs {unused_from}"
        );
        assert_eq!(got, (1..unused_from).collect::<Vec<_>>());
        assert_eq!(cursor.take(1), None);
    });
}
