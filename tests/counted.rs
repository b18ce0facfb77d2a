//! UUIDv7 and ULID generators: order across threads, version and variant bits, clock steps
//! and a used-up counter on an injected clock, and two generators in the same milliseconds.
//! Every test runs for both kinds.

use std::sync::{Arc, Barrier};
use std::thread;

use idgen::{
    COUNTED_EPOCH_UNIX_MS, COUNTER_BITS, Clock, CountedGenerator, CountedId, Error, ManualClock,
    Ulid, Uuid7, Uuid7Generator,
};

/// 2025-06-01T00:00:00Z.
const T0: u64 = 1_748_736_000_000;

/// What the tests need of a kind beyond `CountedId`.
trait Kind: CountedId {
    fn next<C: Clock>(generator: &CountedGenerator<Self, C>) -> Result<Self, Error>;
    fn try_next<C: Clock>(generator: &CountedGenerator<Self, C>) -> Result<Self, Error>;
    fn batch<C: Clock>(generator: &CountedGenerator<Self, C>, n: usize)
    -> Result<Vec<Self>, Error>;
    fn fill<C: Clock>(generator: &CountedGenerator<Self, C>, out: &mut [Self])
    -> Result<(), Error>;
    fn zero() -> Self;
    fn unix_ms(self) -> u64;
    fn counter(self) -> u64;
    fn bits(self) -> u128;
}

impl Kind for Uuid7 {
    fn next<C: Clock>(generator: &CountedGenerator<Self, C>) -> Result<Self, Error> {
        generator.next_uuid()
    }
    fn try_next<C: Clock>(generator: &CountedGenerator<Self, C>) -> Result<Self, Error> {
        generator.try_next_uuid()
    }
    fn batch<C: Clock>(
        generator: &CountedGenerator<Self, C>,
        n: usize,
    ) -> Result<Vec<Self>, Error> {
        generator.next_uuids(n)
    }
    fn fill<C: Clock>(
        generator: &CountedGenerator<Self, C>,
        out: &mut [Self],
    ) -> Result<(), Error> {
        generator.fill_uuids(out)
    }
    fn zero() -> Self {
        "00000000-0000-7000-8000-000000000000".parse().unwrap()
    }
    fn unix_ms(self) -> u64 {
        Uuid7::unix_ms(&self)
    }
    fn counter(self) -> u64 {
        // rand_a, then the top 10 bits of rand_b.
        let bits = self.bits();
        (((bits >> 64) & 0xfff) as u64) << 10 | ((bits >> 52) & 0x3ff) as u64
    }
    fn bits(self) -> u128 {
        u128::from_be_bytes(*self.as_bytes())
    }
}

impl Kind for Ulid {
    fn next<C: Clock>(generator: &CountedGenerator<Self, C>) -> Result<Self, Error> {
        generator.next_ulid()
    }
    fn try_next<C: Clock>(generator: &CountedGenerator<Self, C>) -> Result<Self, Error> {
        generator.try_next_ulid()
    }
    fn batch<C: Clock>(
        generator: &CountedGenerator<Self, C>,
        n: usize,
    ) -> Result<Vec<Self>, Error> {
        generator.next_ulids(n)
    }
    fn fill<C: Clock>(
        generator: &CountedGenerator<Self, C>,
        out: &mut [Self],
    ) -> Result<(), Error> {
        generator.fill_ulids(out)
    }
    fn zero() -> Self {
        Ulid::from_u128(0)
    }
    fn unix_ms(self) -> u64 {
        Ulid::unix_ms(&self)
    }
    fn counter(self) -> u64 {
        (self.as_u128() >> (80 - COUNTER_BITS)) as u64 & ((1 << COUNTER_BITS) - 1)
    }
    fn bits(self) -> u128 {
        self.as_u128()
    }
}

fn generator<T: Kind>(clock: &ManualClock) -> CountedGenerator<T, ManualClock> {
    CountedGenerator::<T>::builder()
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn assert_strictly_increasing<T: Kind>(ids: &[T]) {
    if let Some(i) = (1..ids.len()).find(|&i| ids[i - 1] >= ids[i]) {
        panic!("not increasing at {i}: {:?} then {:?}", ids[i - 1], ids[i]);
    }
}

fn eight_threads_share_one_generator<T: Kind>() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 250_000;
    let generator = Arc::new(CountedGenerator::<T>::new().unwrap());
    let start = Arc::new(Barrier::new(THREADS));
    let lists: Vec<Vec<T>> = (0..THREADS)
        .map(|_| {
            let (generator, start) = (generator.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                (0..PER_THREAD)
                    .map(|_| T::next(&generator))
                    .collect::<Result<Vec<T>, Error>>()
                    .unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|handle| handle.join().unwrap())
        .collect();
    for list in &lists {
        assert_strictly_increasing(list);
    }
    let mut all: Vec<T> = lists.concat();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), THREADS * PER_THREAD, "duplicates");
}

#[test]
fn uuids_strictly_increase_per_thread_and_never_repeat_from_8_threads() {
    eight_threads_share_one_generator::<Uuid7>();
}

#[test]
fn ulids_strictly_increase_per_thread_and_never_repeat_from_8_threads() {
    eight_threads_share_one_generator::<Ulid>();
}

#[test]
fn every_uuid_carries_version_7_and_the_rfc_variant() {
    let generator = Uuid7Generator::new().unwrap();
    let mut uuids = generator.next_uuids(100_000).unwrap();
    uuids.extend((0..1_000).map(|_| generator.next_uuid().unwrap()));
    for uuid in uuids {
        let bytes = uuid.as_bytes();
        assert_eq!(bytes[6] >> 4, 7, "{uuid}");
        assert_eq!(bytes[8] >> 6, 0b10, "{uuid}");
        // The text says so too, and parses back to the same UUID.
        let text = uuid.to_string();
        assert_eq!(&text[14..15], "7");
        assert!(matches!(&text[19..20], "8" | "9" | "a" | "b"), "{text}");
        assert_eq!(text.parse::<Uuid7>(), Ok(uuid));
    }
}

fn a_new_millisecond_seeds_with_the_top_bit_clear_and_counts_on<T: Kind>() {
    let clock = ManualClock::new(T0);
    let generator = generator::<T>(&clock);
    let mut seeds = Vec::new();
    for _ in 0..64 {
        let first = T::next(&generator).unwrap();
        let second = T::next(&generator).unwrap();
        assert_eq!(first.unix_ms(), clock.now_unix_ms());
        assert!(first.counter() < 1 << (COUNTER_BITS - 1), "{first:?}");
        assert_eq!(second.counter(), first.counter() + 1);
        seeds.push(first.counter());
        clock.advance(1);
    }
    seeds.sort_unstable();
    seeds.dedup();
    assert!(seeds.len() > 60, "seeds are random: {seeds:?}");
}

#[test]
fn a_uuid_millisecond_seeds_with_the_top_bit_clear_and_counts_on() {
    a_new_millisecond_seeds_with_the_top_bit_clear_and_counts_on::<Uuid7>();
}

#[test]
fn a_ulid_millisecond_seeds_with_the_top_bit_clear_and_counts_on() {
    a_new_millisecond_seeds_with_the_top_bit_clear_and_counts_on::<Ulid>();
}

fn clock_steps_back<T: Kind>() {
    let clock = ManualClock::new(T0);
    let generator = generator::<T>(&clock);
    let before = T::next(&generator).unwrap();
    // 5 ms back, within the default 10 ms tolerance: counting goes on in the last
    // millisecond, still increasing, and the IDs keep its time.
    clock.set(T0 - 5);
    let behind: Vec<T> = (0..1_000).map(|_| T::next(&generator).unwrap()).collect();
    assert!(before < behind[0]);
    assert_strictly_increasing(&behind);
    assert!(behind.iter().all(|id| id.unix_ms() == T0));
    assert_eq!(generator.stats().clock_behind, 1_000);
    // 1 s back: refused, nothing issued.
    clock.set(T0 - 1_000);
    assert_eq!(
        T::next(&generator),
        Err(Error::ClockMovedBackwards { behind_ms: 1_000 })
    );
    assert_eq!(
        T::batch(&generator, 3),
        Err(Error::ClockMovedBackwards { behind_ms: 1_000 })
    );
    assert_eq!(generator.stats().refused_clock_behind, 2);
    // The clock comes back: on from where it left off.
    clock.set(T0 + 1);
    let after = T::next(&generator).unwrap();
    assert!(behind[999] < after);
    assert_eq!(after.unix_ms(), T0 + 1);
}

#[test]
fn uuids_ride_a_5_ms_step_back_and_refuse_a_1_s_one() {
    clock_steps_back::<Uuid7>();
}

#[test]
fn ulids_ride_a_5_ms_step_back_and_refuse_a_1_s_one() {
    clock_steps_back::<Ulid>();
}

fn counter_used_up<T: Kind>() {
    let clock = ManualClock::new(T0);
    let generator = generator::<T>(&clock);
    // At least 2^21 follow any seed: this batch never waits.
    let mut ids = T::batch(&generator, 1 << (COUNTER_BITS - 1)).unwrap();
    loop {
        match T::try_next(&generator) {
            Ok(id) => ids.push(id),
            Err(Error::WouldBlock { wait_ms: 1 }) => break,
            Err(error) => panic!("{error}"),
        }
    }
    assert_strictly_increasing(&ids);
    assert!(ids.iter().all(|id| id.unix_ms() == T0));
    let last = ids.last().copied().unwrap();
    assert_eq!(
        last.counter(),
        (1 << COUNTER_BITS) - 1,
        "ran to the last value"
    );
    assert_eq!(
        ids.len() as u64,
        (1 << COUNTER_BITS) - ids[0].counter(),
        "every value from the seed up"
    );
    assert_eq!(generator.stats().sequence_exhausted, 1);
    // The next millisecond seeds again.
    clock.advance(1);
    let next = T::next(&generator).unwrap();
    assert!(last < next);
    assert_eq!(next.unix_ms(), T0 + 1);
    assert!(next.counter() < 1 << (COUNTER_BITS - 1));
}

#[test]
fn a_used_up_uuid_counter_waits_for_the_next_millisecond() {
    counter_used_up::<Uuid7>();
}

#[test]
fn a_used_up_ulid_counter_waits_for_the_next_millisecond() {
    counter_used_up::<Ulid>();
}

/// Two generators on one clock, taking turns inside the same milliseconds, 10 million IDs
/// or more: their counters overlap, so only the random bits keep them apart, and they do.
/// (Each millisecond, the two runs of 50,000 from random seeds below 2^21 overlap with a
/// chance of about 5%: the test goes on past 10 million until they have, so that it never
/// passes vacuously; 40 million without an overlap is a failure, with odds of about 1e-9.)
fn two_generators_in_the_same_milliseconds<T: Kind>() {
    const TOTAL: usize = 10_000_000;
    const CAP: usize = 40_000_000;
    const PER_TURN: usize = 50_000;
    let clock = ManualClock::new(T0);
    let (a, b) = (generator::<T>(&clock), generator::<T>(&clock));
    let mut bits: Vec<u128> = Vec::with_capacity(TOTAL + 2 * PER_TURN);
    let mut shared = 0;
    let mut turn = vec![T::zero(); PER_TURN];
    while bits.len() < TOTAL || shared == 0 {
        assert!(
            bits.len() < CAP,
            "no (millisecond, counter) in common in {CAP} IDs"
        );
        // One millisecond: a turn of each generator.
        T::fill(&a, &mut turn).unwrap();
        let a_keys: std::collections::HashSet<(u64, u64)> =
            turn.iter().map(|id| (id.unix_ms(), id.counter())).collect();
        bits.extend(turn.iter().map(|id| id.bits()));
        T::fill(&b, &mut turn).unwrap();
        shared += turn
            .iter()
            .filter(|id| a_keys.contains(&(id.unix_ms(), id.counter())))
            .count();
        bits.extend(turn.iter().map(|id| id.bits()));
        clock.advance(1);
    }
    bits.sort_unstable();
    let collisions = bits.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(collisions, 0);
}

#[test]
fn two_uuid_generators_never_collide_over_10_million() {
    two_generators_in_the_same_milliseconds::<Uuid7>();
}

#[test]
fn two_ulid_generators_never_collide_over_10_million() {
    two_generators_in_the_same_milliseconds::<Ulid>();
}

fn batches_and_fill<T: Kind>() {
    let clock = ManualClock::new(T0);
    let generator = generator::<T>(&clock);
    let one = T::next(&generator).unwrap();
    let batch = T::batch(&generator, 5_000).unwrap();
    let mut filled = vec![T::zero(); 5_000];
    T::fill(&generator, &mut filled).unwrap();
    assert!(one < batch[0] && batch[4_999] < filled[0]);
    assert_strictly_increasing(&batch);
    assert_strictly_increasing(&filled);
    assert_eq!(T::batch(&generator, 0), Ok(Vec::new()));
    assert_eq!(
        T::batch(&generator, usize::MAX),
        Err(Error::BatchTooLarge {
            requested: usize::MAX
        })
    );
}

#[test]
fn uuid_batches_and_fill_continue_the_order() {
    batches_and_fill::<Uuid7>();
}

#[test]
fn ulid_batches_and_fill_continue_the_order() {
    batches_and_fill::<Ulid>();
}

#[test]
fn a_clock_before_2024_or_after_2163_is_refused_at_build() {
    let early = ManualClock::new(COUNTED_EPOCH_UNIX_MS - 1);
    assert_eq!(
        Uuid7Generator::builder().clock(early).build().err(),
        Some(Error::EpochInFuture {
            epoch_unix_ms: COUNTED_EPOCH_UNIX_MS,
            now_unix_ms: COUNTED_EPOCH_UNIX_MS - 1
        })
    );
    let last = COUNTED_EPOCH_UNIX_MS + (1 << idgen::COUNTED_TIME_BITS) - 2;
    let late = ManualClock::new(last + 1);
    assert_eq!(
        Uuid7Generator::builder().clock(late).build().err(),
        Some(Error::TimeExhausted { last_unix_ms: last })
    );
    // The last millisecond itself still issues, and the one after it is refused.
    let clock = ManualClock::new(last);
    let generator = generator::<Ulid>(&clock);
    assert_eq!(generator.next_ulid().unwrap().unix_ms(), last);
    clock.advance(1);
    assert_eq!(
        generator.next_ulid(),
        Err(Error::TimeExhausted { last_unix_ms: last })
    );
}
