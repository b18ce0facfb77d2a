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
//! 5. For every kind (Snowflake IDs in every layout), an ID lies in the bounds of a span of
//!    time `[from, to)` if and only if its embedded time does (a span holding none of the
//!    kind's milliseconds holds no ID), and between the first and last ID of its
//!    millisecond; and every ID real generators issue over a stretch of
//!    milliseconds (borrowing ahead when a millisecond's sequence runs out) lies in the
//!    bounds of a window exactly when its embedded time does.

use idgen::{
    COUNTER_BITS, Error, Generator, Id, IdParts, IdSpan, Layout, ManualClock, Ulid, UlidGenerator,
    Uuid7, Uuid7Generator,
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

/// Whether `unix_ms` lies in `[from, to)`.
fn made_in(unix_ms: u64, from: u64, to: u64) -> bool {
    from <= unix_ms && unix_ms < to
}

/// Whether `span` holds `id`, made at `unix_ms`, exactly when `[from, to)` holds `unix_ms`.
fn check_span<T: Ord + Copy + std::fmt::Debug>(
    span: &IdSpan<T>,
    id: T,
    unix_ms: u64,
    from: u64,
    to: u64,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        span.contains(&id),
        made_in(unix_ms, from, to),
        "{:?} made at {}",
        id,
        unix_ms
    );
    Ok(())
}

/// A UUIDv7 or ULID millisecond (all 48 bits), random bits, and a span around it.
fn ms_bits_and_span() -> impl Strategy<Value = (u64, u128, u64, u64)> {
    let last = (1u64 << 48) - 1;
    (0..=last, any::<u128>()).prop_flat_map(move |(unix_ms, bits)| {
        let near = move |ms: u64| ms.saturating_sub(3)..=(ms + 3).min(last + 2);
        // Reversed and empty spans too: they hold nothing.
        (Just(unix_ms), Just(bits), near(unix_ms), near(unix_ms))
    })
}

proptest! {
    #[test]
    fn a_snowflake_id_is_in_a_spans_bounds_exactly_when_made_in_the_span(
        (layout, parts) in layout_and_parts(),
        before in 0u64..4,
        after in 0u64..4,
        shift in -3i64..=3,
    ) {
        let made = parts.unix_ms;
        let id = layout.compose(parts).unwrap();
        prop_assert!(layout.first_id_at(made).unwrap() <= id);
        prop_assert!(id <= layout.last_id_at(made).unwrap());
        // Spans around the ID's millisecond, some reaching before the epoch or past the end.
        let from = (made as i64 + shift - before as i64).max(0) as u64;
        let to = (made as i64 + shift + after as i64 + 1).max(0) as u64;
        let span = layout.span(from, to);
        // The ID, and the first and last of its millisecond (the edges of any span).
        for id in [id, layout.first_id_at(made).unwrap(), layout.last_id_at(made).unwrap()] {
            check_span(&span, id, made, from, to)?;
        }
        let holds_a_millisecond = from < to
            && from <= layout.last_unix_ms()
            && to > layout.epoch_unix_ms();
        prop_assert_eq!(span.is_empty(), !holds_a_millisecond);
    }

    #[test]
    fn a_uuid7_and_a_ulid_are_in_a_spans_bounds_exactly_when_made_in_the_span(
        (unix_ms, bits, from, to) in ms_bits_and_span(),
    ) {
        let version_and_variant = |bytes: u128| (bytes & !(0xF << 76) & !(0b11 << 62)) | 0x7 << 76 | 0b10 << 62;
        let below_time = bits & ((1 << 80) - 1);
        let uuid = Uuid7::from_bytes(version_and_variant((unix_ms as u128) << 80 | below_time).to_be_bytes()).unwrap();
        let ulid = Ulid::from_u128((unix_ms as u128) << 80 | below_time);
        prop_assert!(Uuid7::first_at(unix_ms).unwrap() <= uuid && uuid <= Uuid7::last_at(unix_ms).unwrap());
        prop_assert!(Ulid::first_at(unix_ms).unwrap() <= ulid && ulid <= Ulid::last_at(unix_ms).unwrap());
        let (uuids, ulids) = (Uuid7::span(from, to), Ulid::span(from, to));
        let edges = [Uuid7::first_at(unix_ms).unwrap(), Uuid7::last_at(unix_ms).unwrap()];
        for uuid in [uuid].into_iter().chain(edges) {
            check_span(&uuids, uuid, unix_ms, from, to)?;
        }
        let edges = [Ulid::first_at(unix_ms).unwrap(), Ulid::last_at(unix_ms).unwrap()];
        for ulid in [ulid].into_iter().chain(edges) {
            check_span(&ulids, ulid, unix_ms, from, to)?;
        }
        prop_assert_eq!(uuids.is_empty(), from >= to || from >= 1 << 48);
        prop_assert_eq!(ulids.is_empty(), from >= to || from >= 1 << 48);
    }
}

#[test]
fn ids_generators_issue_over_many_milliseconds_are_in_a_windows_bounds_exactly_when_made_in_it() {
    // A small sequence (16 IDs a millisecond), so that bursts borrow milliseconds ahead of
    // the clock: the embedded time, not the clock's, is what the bounds hold to.
    let layout = Layout::new(43, 0, 16, 4).unwrap();
    let start = EPOCH + 1_000_000;
    let clock = ManualClock::new(start);
    let snowflakes = Generator::builder()
        .layout(layout)
        .worker(3)
        .borrow_ahead_ms(10)
        .clock(clock.clone())
        .build()
        .unwrap();
    let uuids = Uuid7Generator::builder()
        .clock(clock.clone())
        .build()
        .unwrap();
    let ulids = UlidGenerator::builder()
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut issued = (Vec::new(), Vec::new(), Vec::new());
    for step in 0..200u64 {
        // Some milliseconds see a burst past the sequence, some one ID, some none.
        let burst = [0, 1, 40][(step % 3) as usize];
        for _ in 0..burst {
            issued.0.push(snowflakes.next_id().unwrap());
            issued.1.push(uuids.next_uuid().unwrap());
            issued.2.push(ulids.next_ulid().unwrap());
        }
        clock.advance(1);
    }
    let mut inside = 0;
    for (from, to) in [
        (start, start + 1),
        (start + 10, start + 57),
        (start - 5, start + 300),
        (start + 199, start + 400),
    ] {
        let span = layout.span(from, to);
        for &id in &issued.0 {
            let made = layout.decode(id).unix_ms;
            assert_eq!(
                span.contains(&id),
                made_in(made, from, to),
                "{id} made at {made}"
            );
            inside += usize::from(span.contains(&id));
        }
        let span = Uuid7::span(from, to);
        for uuid in &issued.1 {
            assert_eq!(
                span.contains(uuid),
                made_in(uuid.unix_ms(), from, to),
                "{uuid}"
            );
        }
        let span = Ulid::span(from, to);
        for ulid in &issued.2 {
            assert_eq!(
                span.contains(ulid),
                made_in(ulid.unix_ms(), from, to),
                "{ulid}"
            );
        }
    }
    // The windows saw IDs both inside and outside them.
    assert!(inside > 0 && inside < 4 * issued.0.len(), "{inside}");
}

#[test]
fn spans_at_the_extremes_hold_exactly_the_ids_made_in_them() {
    fn made_in<T: Ord + std::fmt::Debug>(
        span: &IdSpan<T>,
        id: T,
        unix_ms: u64,
        (from, to): (u64, u64),
    ) {
        assert_eq!(
            span.contains(&id),
            from <= unix_ms && unix_ms < to,
            "{id:?} at {unix_ms} in [{from}, {to})"
        );
    }
    let short = Layout::new(1, 0, 0, 62)
        .and_then(|layout| layout.with_epoch_unix_ms(0))
        .unwrap();
    let long = Layout::new(62, 0, 0, 1)
        .and_then(|layout| layout.with_epoch_unix_ms(0))
        .unwrap();
    for layout in [Layout::DEFAULT, short, long] {
        let (epoch, last) = (layout.epoch_unix_ms(), layout.last_unix_ms());
        let spans = [
            (0, u64::MAX),
            (0, 1),
            (0, epoch),
            (epoch, epoch + 1),
            (last, last + 1),
            (last, u64::MAX),
            (last + 1, u64::MAX),
            (u64::MAX - 1, u64::MAX),
            (u64::MAX, 0),
        ];
        for span_ms in spans {
            let span = layout.span(span_ms.0, span_ms.1);
            for unix_ms in [epoch, (epoch + 1).min(last), last] {
                made_in(
                    &span,
                    layout.first_id_at(unix_ms).unwrap(),
                    unix_ms,
                    span_ms,
                );
                made_in(&span, layout.last_id_at(unix_ms).unwrap(), unix_ms, span_ms);
            }
        }
    }
    let last = (1u64 << 48) - 1;
    for span_ms in [
        (0, u64::MAX),
        (0, 1),
        (last, last + 1),
        (last, u64::MAX),
        (last + 1, u64::MAX),
        (u64::MAX, 0),
    ] {
        let (uuids, ulids) = (
            Uuid7::span(span_ms.0, span_ms.1),
            Ulid::span(span_ms.0, span_ms.1),
        );
        for unix_ms in [0, 1, last] {
            made_in(&uuids, Uuid7::first_at(unix_ms).unwrap(), unix_ms, span_ms);
            made_in(&uuids, Uuid7::last_at(unix_ms).unwrap(), unix_ms, span_ms);
            made_in(&ulids, Ulid::first_at(unix_ms).unwrap(), unix_ms, span_ms);
            made_in(&ulids, Ulid::last_at(unix_ms).unwrap(), unix_ms, span_ms);
        }
    }
    assert!(Uuid7::first_at(last + 1).is_err() && Ulid::last_at(u64::MAX).is_err());
}
