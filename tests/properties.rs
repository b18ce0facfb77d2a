//! Property tests. The invariants:
//!
//! 1. For every valid layout and every in-range set of fields, `compose` then `decode`
//!    gives the fields back, and the ID fits in 63 bits; out-of-range fields are refused.
//! 2. Any sequence of clock moves (forward, standing still, backwards by a little or a lot)
//!    makes a generator issue exactly what a plain reference model of the rules issues: the
//!    same (millisecond, sequence) or the same refusal. So IDs never repeat or decrease.
//! 3. Every text form round-trips, base32 strings sort like the numbers, and a decimal
//!    string parses if and only if it is exactly what `Display` writes.
//! 4. The same clock moves make a UUIDv7 generator follow the same rules with a seeded
//!    counter: a new millisecond starts at a seed with the counter's top bit clear, the same
//!    millisecond (or one the clock is behind, within tolerance) counts on by one, and
//!    beyond the tolerance the call is refused; so UUIDs never repeat or decrease.

use idgen::{
    COUNTER_BITS, Error, Generator, Id, IdParts, Layout, ManualClock, Uuid7, Uuid7Generator,
};
use proptest::prelude::*;

const EPOCH: u64 = idgen::DEFAULT_EPOCH_UNIX_MS;

fn layouts() -> impl Strategy<Value = Layout> {
    (1u32..=62)
        .prop_flat_map(|time| (Just(time), 1u32..=63 - time))
        .prop_flat_map(|(time, sequence)| {
            let node = 63 - time - sequence;
            (Just(time), Just(sequence), 0..=node)
        })
        .prop_map(|(time, sequence, datacenter)| {
            let worker = 63 - time - sequence - datacenter;
            Layout::new(time, datacenter, worker, sequence).unwrap()
        })
}

fn layout_and_parts() -> impl Strategy<Value = (Layout, IdParts)> {
    layouts().prop_flat_map(|layout| {
        (
            Just(layout),
            0..=layout.max_elapsed_ms(),
            0..=layout.max_datacenter(),
            0..=layout.max_worker(),
            0..=layout.max_sequence(),
        )
            .prop_map(|(layout, elapsed, datacenter, worker, sequence)| {
                let parts = IdParts {
                    unix_ms: layout.epoch_unix_ms() + elapsed,
                    datacenter,
                    worker,
                    sequence,
                };
                (layout, parts)
            })
    })
}

proptest! {
    #[test]
    fn fields_round_trip_through_compose_and_decode((layout, parts) in layout_and_parts()) {
        let id = layout.compose(parts).unwrap();
        prop_assert!(id.as_u64() <= i64::MAX as u64);
        prop_assert_eq!(layout.decode(id), parts);
    }

    #[test]
    fn out_of_range_fields_are_refused((layout, parts) in layout_and_parts(), which in 0..4usize) {
        let mut bad = parts;
        match which {
            0 => bad.unix_ms = layout.last_unix_ms() + 1,
            1 => bad.datacenter = layout.max_datacenter() + 1,
            2 => bad.worker = layout.max_worker() + 1,
            _ => bad.sequence = layout.max_sequence() + 1,
        }
        let refused = matches!(layout.compose(bad), Err(Error::FieldOutOfRange { .. }));
        prop_assert!(refused);
    }

    #[test]
    fn ids_sort_like_their_fields((layout, a) in layout_and_parts(), b_ms in any::<u64>(), b_seq in any::<u64>()) {
        let b = IdParts {
            unix_ms: layout.epoch_unix_ms() + b_ms % (layout.max_elapsed_ms() + 1),
            sequence: b_seq & layout.max_sequence(),
            ..a
        };
        let (ida, idb) = (layout.compose(a).unwrap(), layout.compose(b).unwrap());
        prop_assert_eq!(ida.cmp(&idb), (a.unix_ms, a.sequence).cmp(&(b.unix_ms, b.sequence)));
    }
}

/// The rules, written as plainly as possible (no packing, no borrow), for the generator to
/// be checked against.
struct Reference {
    last: Option<(u64, u64)>,
    max_sequence: u64,
    tolerance_ms: u64,
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Issued { ms: u64, sequence: u64 },
    WouldBlock { wait_ms: u64 },
    ClockBehind { behind_ms: u64 },
}

impl Reference {
    fn next(&mut self, now: u64) -> Outcome {
        let (ms, sequence) = match self.last {
            None => (now, 0),
            Some((last_ms, _)) if now > last_ms => (now, 0),
            Some((last_ms, _)) if last_ms - now > self.tolerance_ms => {
                return Outcome::ClockBehind {
                    behind_ms: last_ms - now,
                };
            }
            Some((last_ms, last_seq)) if last_seq < self.max_sequence => (last_ms, last_seq + 1),
            Some((last_ms, _)) => {
                return Outcome::WouldBlock {
                    wait_ms: last_ms + 1 - now,
                };
            }
        };
        self.last = Some((ms, sequence));
        Outcome::Issued { ms, sequence }
    }
}

#[derive(Debug, Clone)]
enum Move {
    Forward(u64),
    Back(u64),
    Issue(usize),
}

fn moves() -> impl Strategy<Value = Vec<Move>> {
    prop::collection::vec(
        prop_oneof![
            (0u64..3).prop_map(Move::Forward),
            (0u64..20).prop_map(Move::Back),
            (1usize..7).prop_map(Move::Issue),
        ],
        1..60,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn clock_moves_match_the_reference_model(
        sequence_bits in 1u32..4,
        tolerance_ms in 0u64..8,
        moves in moves(),
    ) {
        let start = EPOCH + 1_000;
        let clock = ManualClock::new(start);
        let generator = Generator::builder()
            .layout(Layout::new(63 - 10 - sequence_bits, 5, 5, sequence_bits).unwrap())
            .clock(clock.clone())
            .clock_back_tolerance_ms(tolerance_ms)
            .build()
            .unwrap();
        let mut reference = Reference {
            last: None,
            max_sequence: (1 << sequence_bits) - 1,
            tolerance_ms,
        };
        let mut now = start;
        let mut issued: Vec<Id> = Vec::new();
        for step in moves {
            match step {
                Move::Forward(ms) => now += ms,
                Move::Back(ms) => now -= ms,
                Move::Issue(count) => {
                    for _ in 0..count {
                        let expected = reference.next(now - EPOCH);
                        let actual = match generator.try_next_id() {
                            Ok(id) => {
                                let parts = generator.decode(id);
                                prop_assert!(issued.last().is_none_or(|&last| last < id));
                                issued.push(id);
                                Outcome::Issued { ms: parts.unix_ms - EPOCH, sequence: parts.sequence }
                            }
                            Err(Error::WouldBlock { wait_ms }) => Outcome::WouldBlock { wait_ms },
                            Err(Error::ClockMovedBackwards { behind_ms }) => Outcome::ClockBehind { behind_ms },
                            Err(other) => panic!("unexpected error {other}"),
                        };
                        prop_assert_eq!(actual, expected);
                    }
                }
            }
            clock.set(now);
        }
    }
}

proptest! {
    #[test]
    fn base32_round_trips_and_sorts_like_the_numbers(a in 0..=i64::MAX as u64, b in 0..=i64::MAX as u64) {
        let (a, b) = (Id::try_from(a).unwrap(), Id::try_from(b).unwrap());
        let (ta, tb) = (a.to_base32(), b.to_base32());
        prop_assert_eq!(Id::from_base32(ta.as_str()).unwrap(), a);
        prop_assert_eq!(Id::from_base32(&ta.as_str().to_ascii_lowercase()).unwrap(), a);
        prop_assert_eq!(ta.as_str().cmp(tb.as_str()), a.cmp(&b));
    }

    #[test]
    fn decimal_round_trips_below_the_limit_and_fails_above(value in any::<u64>()) {
        let parsed = value.to_string().parse::<Id>();
        if value <= i64::MAX as u64 {
            prop_assert_eq!(parsed.unwrap().as_u64(), value);
        } else {
            prop_assert!(parsed.is_err());
        }
    }

    #[test]
    fn a_decimal_string_parses_only_if_it_is_canonical(text in "[-+ 0-9a_\u{e9}]{0,21}|[0-9]{0,21}") {
        match text.parse::<Id>() {
            Ok(id) => prop_assert_eq!(id.to_string(), text),
            Err(_) => {
                let canonical = text.parse::<u64>().ok()
                    .filter(|&v| v <= i64::MAX as u64 && v.to_string() == text);
                prop_assert!(canonical.is_none(), "refused canonical {text:?}");
            }
        }
    }
}

/// The counter of a UUID: `rand_a`, then the top 10 bits of `rand_b`.
fn uuid_counter(uuid: Uuid7) -> u64 {
    let bits = u128::from_be_bytes(*uuid.as_bytes());
    (((bits >> 64) & 0xfff) as u64) << 10 | ((bits >> 52) & 0x3ff) as u64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn uuid_counters_follow_the_rules_through_clock_moves(
        tolerance_ms in 0u64..8,
        moves in moves(),
    ) {
        let start = 1_750_000_000_000;
        let clock = ManualClock::new(start);
        let generator = Uuid7Generator::builder()
            .clock(clock.clone())
            .clock_back_tolerance_ms(tolerance_ms)
            .build()
            .unwrap();
        let mut last: Option<Uuid7> = None;
        let mut now = start;
        for step in moves {
            match step {
                Move::Forward(ms) => now += ms,
                Move::Back(ms) => now -= ms,
                Move::Issue(count) => {
                    for _ in 0..count {
                        let result = generator.try_next_uuid();
                        match (last, result) {
                            (None, Ok(uuid)) => {
                                prop_assert_eq!(uuid.unix_ms(), now);
                                prop_assert!(uuid_counter(uuid) < 1 << (COUNTER_BITS - 1));
                                last = Some(uuid);
                            }
                            (Some(previous), Ok(uuid)) => {
                                prop_assert!(previous < uuid);
                                if now > previous.unix_ms() {
                                    prop_assert_eq!(uuid.unix_ms(), now);
                                    prop_assert!(uuid_counter(uuid) < 1 << (COUNTER_BITS - 1), "seeded");
                                } else {
                                    prop_assert!(previous.unix_ms() - now <= tolerance_ms);
                                    prop_assert_eq!(uuid.unix_ms(), previous.unix_ms());
                                    prop_assert_eq!(uuid_counter(uuid), uuid_counter(previous) + 1);
                                }
                                last = Some(uuid);
                            }
                            (Some(previous), Err(Error::ClockMovedBackwards { behind_ms })) => {
                                prop_assert_eq!(behind_ms, previous.unix_ms() - now);
                                prop_assert!(behind_ms > tolerance_ms);
                            }
                            (_, Err(other)) => panic!("unexpected error {other}"),
                        }
                    }
                }
            }
            clock.set(now);
        }
    }
}
