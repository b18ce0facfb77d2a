//! Opaque IDs as an outsider sees them. The properties:
//!
//! 1. Encoding then decoding gives every ID back, under every key of a codec, one at a time
//!    and in batches; the edges (0, 1, 2^63 - 1) included.
//! 2. Consecutive IDs, as a generator issues them, give opaque IDs that differ in half their
//!    63 bits on average (0.5 within 1% over 1,000,000 pairs), and each bit is set half of
//!    the time.
//! 3. Encoded order says nothing of the IDs' order: for increasing IDs, the next opaque ID
//!    is the larger one half of the time (within 1% over 1,000,000).
//! 4. Another key, or a key with one bit changed, does not give the ID back.
//! 5. Parsing any string never panics, and accepts exactly what `Display` writes.
//!
//! "Within 1%" is relative: 0.5 +- 0.005. For the order and for each bit that is ten standard
//! deviations of a fair coin's mean over a million draws, and far more for the mean of 63
//! bits, so a sound codec never fails by chance; a biased one is caught (one bit that never
//! changes moves the mean by 1/126, 0.8%, and that bit's own share to 0 or 1).

use idgen::opaque::{Codec, OpaqueId, OpaqueKey, parse_keys};
use idgen::{Error, Generator, Id, ManualClock};
use proptest::prelude::*;

const PAIRS: usize = 1_000_000;

fn codec(hex: &str) -> Codec {
    Codec::new(&[OpaqueKey::from_hex(1, hex).unwrap()]).unwrap()
}

/// `count` IDs as a generator issues them: runs of 1 to 4,096 in one millisecond (the
/// sequence counting up), then 1 to 5 milliseconds later the next run.
fn issued_ids(count: usize) -> Vec<Id> {
    let clock = ManualClock::new(idgen::DEFAULT_EPOCH_UNIX_MS + 86_400_000 * 700);
    let generator = Generator::builder()
        .datacenter(3)
        .worker(17)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut ids = Vec::with_capacity(count);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut draw = |below: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % below
    };
    while ids.len() < count {
        let run = 1 + draw(4_096) as usize;
        for _ in 0..run.min(count - ids.len()) {
            ids.push(generator.try_next_id().unwrap());
        }
        clock.advance(1 + draw(5));
    }
    ids
}

#[test]
fn consecutive_ids_differ_in_half_their_bits_and_every_bit_is_balanced() {
    let codec = codec("0f1e2d3c4b5a69788796a5b4c3d2e1f0");
    let ids = issued_ids(PAIRS + 1);
    let opaque: Vec<u64> = codec.encode_all(&ids).iter().map(OpaqueId::value).collect();
    let differing: u64 = opaque
        .windows(2)
        .map(|pair| u64::from((pair[0] ^ pair[1]).count_ones()))
        .sum();
    let avalanche = differing as f64 / (PAIRS as f64 * 63.0);
    println!("avalanche over {PAIRS} consecutive pairs: {avalanche:.5}");
    assert!(
        (avalanche - 0.5).abs() <= 0.005,
        "consecutive IDs' opaque forms differ in {avalanche:.5} of their bits"
    );
    for bit in 0..63 {
        let set = opaque.iter().filter(|&&v| v >> bit & 1 == 1).count();
        let share = set as f64 / opaque.len() as f64;
        assert!(
            (share - 0.5).abs() <= 0.005,
            "bit {bit} is set in {share:.5} of opaque IDs"
        );
    }
    assert!(opaque.iter().all(|&v| v < 1 << 63));
}

#[test]
fn encoded_order_tells_nothing_of_the_order_of_ids() {
    let codec = codec("a1b2c3d4e5f60718293a4b5c6d7e8f90");
    let ids = issued_ids(PAIRS + 1);
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    let opaque = codec.encode_all(&ids);
    let larger = opaque
        .windows(2)
        .filter(|pair| pair[1].value() > pair[0].value())
        .count();
    let share = larger as f64 / PAIRS as f64;
    println!("next opaque ID larger for {share:.5} of {PAIRS} increasing IDs");
    assert!(
        (share - 0.5).abs() <= 0.005,
        "the next opaque ID is larger for {share:.5} of increasing IDs"
    );
}

#[test]
fn one_bit_of_key_changes_every_opaque_id() {
    let hex = "00112233445566778899aabbccddeeff";
    let right = codec(hex);
    let ids = issued_ids(10_000);
    let made = right.encode_all(&ids);
    for bit in [0, 1, 63, 64, 127] {
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        bytes[bit / 8] ^= 1 << (bit % 8);
        let near = Codec::new(&[OpaqueKey::new(1, bytes).unwrap()]).unwrap();
        let back = near.decode_all(&made).unwrap();
        let same = ids.iter().zip(&back).filter(|(a, b)| a == b).count();
        assert_eq!(same, 0, "flipping key bit {bit} still decodes {same} IDs");
        let encoded_same = near
            .encode_all(&ids)
            .iter()
            .zip(&made)
            .filter(|(a, b)| a == b)
            .count();
        assert_eq!(
            encoded_same, 0,
            "key bit {bit} left {encoded_same} opaque IDs as they were"
        );
    }
}

#[test]
fn a_rotated_codec_encodes_with_the_new_key_and_decodes_old_and_new() {
    let keys = parse_keys(
        "2 3b9f1c7d2e4a6b8c0d1e2f3a4b5c6d7e\n\
         1 00112233445566778899aabbccddeeff\n",
    )
    .unwrap();
    let old = Codec::new(&keys[1..]).unwrap();
    let rotated = Codec::new(&keys).unwrap();
    let ids = issued_ids(1_000);
    let before = old.encode_all(&ids);
    let after = rotated.encode_all(&ids);
    assert!(after.iter().all(|o| o.key_id() == 2));
    assert!(
        before
            .iter()
            .zip(&after)
            .all(|(b, a)| b.value() != a.value())
    );
    assert_eq!(rotated.decode_all(&before).unwrap(), ids);
    assert_eq!(rotated.decode_all(&after).unwrap(), ids);
    assert_eq!(
        old.decode(after[0]),
        Err(Error::UnknownOpaqueKey { key_id: 2 })
    );
}

fn any_key() -> impl Strategy<Value = OpaqueKey> {
    (1u32..=999_999_999, any::<[u8; 16]>())
        .prop_filter("not all zeros", |(_, bytes)| *bytes != [0; 16])
        .prop_map(|(id, bytes)| OpaqueKey::new(id, bytes).unwrap())
}

fn any_id() -> impl Strategy<Value = Id> {
    prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(i64::MAX as u64),
        0..=i64::MAX as u64,
    ]
    .prop_map(|v| Id::try_from(v).unwrap())
}

/// Strings near the opaque form (the prefix, digits, `_`, base62 and other characters, of
/// lengths around 14) as well as any string at all.
fn near_opaque_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "o[0-9]{0,11}_[0-9A-Za-z]{0,13}",
        "o[0-9]{1,3}[_-][0-9A-Za-z_é\\-+ ]{9,13}",
        "[oO0][0-9_a-z]{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_id_round_trips_under_every_key(
        keys in proptest::collection::vec(any_key(), 1..4),
        ids in proptest::collection::vec(any_id(), 1..20),
    ) {
        let mut seen = std::collections::HashSet::new();
        let keys: Vec<OpaqueKey> = keys.into_iter().filter(|k| seen.insert(k.id())).collect();
        for first in 0..keys.len() {
            let mut order = keys.clone();
            order.rotate_left(first);
            let codec = Codec::new(&order).unwrap();
            let batch = codec.encode_all(&ids);
            for (&id, &opaque) in ids.iter().zip(&batch) {
                prop_assert_eq!(codec.encode(id), opaque);
                prop_assert_eq!(opaque.key_id(), order[0].id());
                prop_assert!(opaque.value() < 1 << 63);
                let text = opaque.to_string();
                prop_assert_eq!(text.parse::<OpaqueId>().unwrap(), opaque);
                prop_assert_eq!(codec.decode(opaque).unwrap(), id);
            }
            // Every codec over the same keys decodes what any of them made.
            let first_codec = Codec::new(&keys).unwrap();
            prop_assert_eq!(first_codec.decode_all(&batch).unwrap(), ids.clone());
        }
    }

    #[test]
    fn a_wrong_key_does_not_give_the_id_back(
        right in any_key(),
        wrong_bytes in any::<[u8; 16]>(),
        id in any_id(),
    ) {
        let wrong = OpaqueKey::new(right.id(), wrong_bytes);
        prop_assume!(wrong.as_ref().is_ok_and(|w| *w != right));
        let made = Codec::new(&[right]).unwrap().encode(id);
        let back = Codec::new(&[wrong.unwrap()]).unwrap().decode(made).unwrap();
        prop_assert_ne!(back, id);
    }

    #[test]
    fn parsing_any_string_never_panics_and_accepts_only_the_canonical_form(
        text in near_opaque_text(),
    ) {
        match text.parse::<OpaqueId>() {
            Ok(opaque) => {
                prop_assert_eq!(&opaque.to_string(), &text);
                prop_assert!(OpaqueId::looks_like(&text));
            }
            Err(Error::OpaqueText { text: shown, .. }) => {
                prop_assert!(shown.chars().count() <= 64);
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }

    #[test]
    fn key_text_never_panics_and_errors_never_quote_it(text in "[ -~\n\t]{0,200}") {
        match parse_keys(&text) {
            Ok(keys) => prop_assert!(!keys.is_empty()),
            Err(Error::OpaqueKey { reason }) => {
                // Any run of 8 hex digits of the input would be a piece of a key.
                for word in text.split_whitespace().filter(|w| w.len() >= 8) {
                    prop_assert!(!reason.contains(word), "{reason:?} quotes {word:?}");
                }
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }
}
