//! Regular expressions of exactly the text the service reads, for the OpenAPI document: a
//! client (or a contract checker) that keeps to them is never refused for the form of what
//! it sends. Each is checked against the parser it describes (`tests` below).

/// Crockford's base32 letters (the digits aside), in either case: what a base32 Snowflake
/// ID and a ULID use beside `0-9`.
const CROCKFORD_LETTERS: &str = "A-HJKMNP-TV-Za-hjkmnp-tv-z";

/// Base62's digits, in value order: an opaque ID's text.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A character class of `alphabet[low..=high]`.
fn class(alphabet: &[u8], low: usize, high: usize) -> String {
    let chars: String = alphabet[low..=high].iter().map(|&b| b as char).collect();
    if low == high {
        chars
    } else {
        format!("[{chars}]")
    }
}

/// Fixed-width numbers of `max.len()` digits of `alphabet` (their values in its order),
/// from the smallest whose first digit is at least `alphabet[first_low]` up to `max`: a
/// prefix of `max`, then a smaller digit, then any; or `max` itself.
fn fixed_width_up_to(alphabet: &[u8], max: &[usize], first_low: usize) -> Vec<String> {
    let any = class(alphabet, 0, alphabet.len() - 1);
    let prefix =
        |end: usize| -> String { max[..end].iter().map(|&d| alphabet[d] as char).collect() };
    let mut alternatives = Vec::new();
    for (i, &digit) in max.iter().enumerate() {
        let low = if i == 0 { first_low } else { 0 };
        if digit > low {
            let rest = max.len() - i - 1;
            let tail = match rest {
                0 => String::new(),
                1 => any.clone(),
                _ => format!("{any}{{{rest}}}"),
            };
            alternatives.push(format!(
                "{}{}{tail}",
                prefix(i),
                class(alphabet, low, digit - 1)
            ));
        }
    }
    alternatives.push(prefix(max.len()));
    alternatives
}

/// The canonical decimal numbers from 0 to `max` (no leading zeros), `max` of 2 digits
/// or more.
pub fn decimal_up_to(max: u64) -> String {
    let digits: Vec<usize> = max
        .to_string()
        .bytes()
        .map(|b| (b - b'0') as usize)
        .collect();
    let mut alternatives = vec!["0".to_string()];
    alternatives.push(match digits.len() {
        2 => "[1-9]".to_string(),
        n => format!("[1-9][0-9]{{0,{}}}", n - 2),
    });
    alternatives.extend(fixed_width_up_to(b"0123456789", &digits, 1));
    alternatives.join("|")
}

/// A Snowflake ID: canonical decimal, or 13 characters of base32 (the first at most 7, and
/// at least one a letter: 13 digits are read as decimal).
pub fn snowflake_id() -> String {
    let digit_then_letter: Vec<String> = (0..12)
        .map(|digits| {
            let (before, after) = (digits, 11 - digits);
            let before = match before {
                0 => String::new(),
                1 => "[0-9]".to_string(),
                n => format!("[0-9]{{{n}}}"),
            };
            let after = match after {
                0 => String::new(),
                n => format!("[0-9{CROCKFORD_LETTERS}]{{{n}}}"),
            };
            format!("{before}[{CROCKFORD_LETTERS}]{after}")
        })
        .collect();
    format!(
        "{}|[0-7](?:{})",
        decimal_up_to(i64::MAX as u64),
        digit_then_letter.join("|")
    )
}

/// A UUIDv7, in either case.
pub const UUID7: &str =
    "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}";

/// A ULID, in either case (the first character at most 7: 128 bits).
pub fn ulid() -> String {
    format!("[0-7][0-9{CROCKFORD_LETTERS}]{{25}}")
}

/// An opaque ID of one of `keys` (any key number when `None`): `o`, the key number, `_`,
/// and 11 characters of base62 below 2^63.
pub fn opaque_id(keys: Option<&[u32]>) -> String {
    let keys = match keys {
        Some(keys) => {
            let numbers: Vec<String> = keys.iter().map(u32::to_string).collect();
            format!("(?:{})", numbers.join("|"))
        }
        None => "[1-9][0-9]{0,8}".to_string(),
    };
    let mut max = [0usize; 11];
    let mut rest = i64::MAX as u64;
    for slot in max.iter_mut().rev() {
        *slot = (rest % 62) as usize;
        rest /= 62;
    }
    format!(
        "o{keys}_(?:{})",
        fixed_width_up_to(BASE62, &max, 0).join("|")
    )
}

/// An instant as `/v1/bounds` reads it: Unix milliseconds (up to 19 digits), or RFC 3339
/// in UTC (`T`, `Z`, 1 to 3 digits of fraction) on a date of the calendar from 1970 to
/// 9999. Anchored.
pub fn instant() -> String {
    let year = "19[7-9][0-9]|[2-9][0-9]{3}";
    let leap_year = "19(?:7[26]|8[048]|9[26])\
                     |[2-9][0-9](?:[02468][48]|[13579][26]|[2468]0)\
                     |(?:[2468][048]|[3579][26])00";
    let month_and_day = "(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])\
                         |(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)\
                         |02-(?:0[1-9]|1[0-9]|2[0-8])";
    let date = format!("(?:{year})-(?:{month_and_day})|(?:{leap_year})-02-29");
    let time = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,3})?Z";
    format!("^(?:[0-9]{{1,19}}|(?:{date})T{time})$")
}

/// A holder's name: no control characters (Unicode's `Cc`). Anchored; the length (1 to 128
/// characters) is the schema's.
pub const HOLDER: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";

/// Any ID the decode endpoint reads: with `opaque`, opaque IDs of those keys (`Some(None)`:
/// of any key) too. Anchored.
pub fn decodable_id(opaque: Option<Option<&[u32]>>) -> String {
    let mut alternatives = vec![snowflake_id(), UUID7.to_string(), ulid()];
    if let Some(keys) = opaque {
        alternatives.push(opaque_id(keys));
    }
    format!("^(?:{})$", alternatives.join("|"))
}

#[cfg(test)]
mod tests {
    use idgen::opaque::{Codec, OpaqueKey};
    use idgen::{Id, Layout};
    use regex::Regex;

    use super::*;
    use crate::decoding::decode_any;

    /// The pattern of a schema the library gives (feature `utoipa`).
    fn library_pattern<T: utoipa::PartialSchema>() -> String {
        let schema = serde_json::to_value(T::schema()).unwrap();
        schema["pattern"].as_str().unwrap().to_string()
    }

    #[test]
    fn the_library_schemas_patterns_are_the_ones_checked_against_the_parsers_here() {
        // The tests below check these patterns against the parsers they describe; the
        // library's schemas (which the document's ID lists refer to) must be the same.
        assert_eq!(library_pattern::<Id>(), format!("^(?:{})$", snowflake_id()));
        assert_eq!(library_pattern::<idgen::Uuid7>(), format!("^{UUID7}$"));
        assert_eq!(library_pattern::<idgen::Ulid>(), format!("^{}$", ulid()));
    }

    /// xorshift64*: the same texts on every run.
    struct Numbers(u64);

    impl Numbers {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// A text of `len` characters of `alphabet`.
        fn text(&mut self, alphabet: &[u8], len: usize) -> String {
            (0..len)
                .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize] as char)
                .collect()
        }
    }

    #[test]
    fn the_decimal_pattern_takes_exactly_the_numbers_up_to_its_maximum() {
        let pattern = Regex::new(&format!("^(?:{})$", decimal_up_to(i64::MAX as u64))).unwrap();
        for text in [
            "0",
            "7",
            "10",
            "9223372036854775807",
            "9223372036854775799",
            "1000000000000000000",
        ] {
            assert!(pattern.is_match(text), "{text}");
        }
        for text in [
            "00",
            "01",
            "9223372036854775808",
            "9300000000000000000",
            "10000000000000000000",
            "",
            "-1",
        ] {
            assert!(!pattern.is_match(text), "{text}");
        }
        let small = Regex::new(&format!("^(?:{})$", decimal_up_to(42))).unwrap();
        let taken: Vec<u64> = (0..200)
            .filter(|n| small.is_match(&n.to_string()))
            .collect();
        assert_eq!(taken, (0..=42).collect::<Vec<_>>());
    }

    #[test]
    fn the_instant_pattern_matches_exactly_what_bounds_read() {
        let pattern = Regex::new(&instant()).unwrap();
        let reads = |text: &str| crate::bounds::instant("from", text).is_ok();
        let mut numbers = Numbers(0x2545_f491_4f6c_dd1d);
        let mut matched = 0;
        for round in 0..100_000 {
            let digit = |numbers: &mut Numbers, n: usize| numbers.text(b"0123456789", n);
            let year = match round % 4 {
                0 => format!("19{}", digit(&mut numbers, 2)),
                1 => format!("{}", 1900 + numbers.next() % 8200),
                _ => digit(&mut numbers, 4),
            };
            let fraction = match numbers.next() % 5 {
                0 => String::new(),
                n => format!(".{}", digit(&mut numbers, n as usize)),
            };
            let text = format!(
                "{year}-{}-{}T{}:{}:{}{fraction}{}",
                digit(&mut numbers, 2),
                ["0", "1", "2", "3"][(numbers.next() % 4) as usize].to_string()
                    + &digit(&mut numbers, 1),
                digit(&mut numbers, 2),
                digit(&mut numbers, 2),
                digit(&mut numbers, 2),
                ["Z", "Z", "Z", "z", "+00:00"][round % 5],
            );
            let text = if round % 9 == 0 {
                digit(&mut numbers, 1 + round % 22)
            } else {
                text
            };
            // Every 29 February of 1900 to 2999, and other month ends.
            let text = if round % 5 == 1 {
                let day = ["02-29", "02-30", "04-31", "06-30", "12-31"][round % 25 / 5];
                format!("{}-{day}T00:00:00Z", 1900 + numbers.next() % 1100)
            } else {
                text
            };
            assert_eq!(pattern.is_match(&text), reads(&text), "{text:?}");
            matched += usize::from(reads(&text));
        }
        assert!(matched > 5_000, "{matched}");
        for text in [
            "2000-02-29T00:00:00Z",
            "2024-02-29T23:59:59.999Z",
            "9999-12-31T23:59:59Z",
            "1970-01-01T00:00:00Z",
        ] {
            assert!(pattern.is_match(text) && reads(text), "{text}");
        }
        for text in [
            "000000000000000000001",
            "18446744073709551615",
            "+010000-01-01T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "1994-02-29T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2026-01-01T24:00:00Z",
        ] {
            assert!(!pattern.is_match(text) && !reads(text), "{text}");
        }
    }

    #[test]
    fn the_holder_pattern_refuses_exactly_the_control_characters() {
        let pattern = Regex::new(HOLDER).unwrap();
        for c in (0..=0x2000u32).filter_map(char::from_u32) {
            assert_eq!(pattern.is_match(&c.to_string()), !c.is_control(), "{c:?}");
        }
    }

    #[test]
    fn the_decode_pattern_matches_exactly_what_decodes() {
        let keys = [
            OpaqueKey::new(3, [7; 16]).unwrap(),
            OpaqueKey::new(12, [9; 16]).unwrap(),
        ];
        let codec = Codec::new(&keys).unwrap();
        let pattern = Regex::new(&decodable_id(Some(Some(&[3, 12])))).unwrap();
        let decodes = |text: &str| decode_any(&Layout::DEFAULT, Ok(&codec), text).is_ok();
        let mut numbers = Numbers(0x9e37_79b9_7f4a_7c15);
        // Texts of every form, right and wrong: lengths and alphabets around each kind's.
        let alphabets: [&[u8]; 5] = [
            b"0123456789",
            b"0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyzILOUilou",
            b"0123456789abcdefABCDEF-",
            BASE62,
            b"o_0123456789-",
        ];
        let mut matched = 0;
        for round in 0..200_000 {
            let alphabet = alphabets[round % alphabets.len()];
            let len = [1, 2, 12, 13, 14, 15, 16, 19, 20, 25, 26, 27, 35, 36, 37]
                [(numbers.next() % 15) as usize];
            let mut text = numbers.text(alphabet, len);
            if round % 7 == 0 {
                // Opaque-looking: a key number and 11 characters.
                let key = [3u64, 12, 4, 30][(numbers.next() % 4) as usize];
                text = format!("o{key}_{}", numbers.text(BASE62, 11));
            }
            if round % 11 == 0 {
                // A UUID shape with random version and variant nibbles.
                text = format!(
                    "{}-{}-{}-{}-{}",
                    numbers.text(b"0123456789abcdefABCDEF", 8),
                    numbers.text(b"0123456789abcdef", 4),
                    numbers.text(b"0123456789abcdef", 4),
                    numbers.text(b"0123456789abcdef", 4),
                    numbers.text(b"0123456789abcdef", 12)
                );
            }
            assert_eq!(pattern.is_match(&text), decodes(&text), "{text:?}");
            matched += usize::from(decodes(&text));
        }
        assert!(matched > 10_000, "{matched}");
        // And the edges.
        for text in [
            "0",
            "9223372036854775807",
            "7ZZZZZZZZZZZZ",
            &Id::MAX.to_base32().to_string(),
            "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
        ] {
            assert!(pattern.is_match(text) && decodes(text), "{text}");
        }
        for text in [
            "9223372036854775808",
            "80000000000AB",
            "1234567890123X",
            "o1_00000000000",
        ] {
            assert!(!pattern.is_match(text) && !decodes(text), "{text}");
        }
    }
}
