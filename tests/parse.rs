//! Every malformed ID string we could think of is refused, with the reason.

use idgen::{Error, Id, ParseIdError};

fn reason(text: &str) -> ParseIdError {
    match text.parse::<Id>() {
        Err(Error::ParseId(reason)) => reason,
        other => panic!("{text:?} gave {other:?}"),
    }
}

#[test]
fn canonical_decimal_is_accepted() {
    for (text, value) in [
        ("0", 0),
        ("7", 7),
        ("10", 10),
        ("9223372036854775807", i64::MAX as u64),
    ] {
        assert_eq!(text.parse::<Id>().unwrap().as_u64(), value);
    }
}

#[test]
fn malformed_decimal_strings_are_refused() {
    use ParseIdError::*;
    let cases: &[(&str, ParseIdError)] = &[
        ("", Empty),
        (" ", InvalidByte { index: 0 }),
        (" 1", InvalidByte { index: 0 }),
        ("1 ", InvalidByte { index: 1 }),
        ("1\n", InvalidByte { index: 1 }),
        ("\t1", InvalidByte { index: 0 }),
        ("+1", InvalidByte { index: 0 }),
        ("-1", InvalidByte { index: 0 }),
        ("-0", InvalidByte { index: 0 }),
        ("1_000", InvalidByte { index: 1 }),
        ("1,000", InvalidByte { index: 1 }),
        ("1.0", InvalidByte { index: 1 }),
        ("1e3", InvalidByte { index: 1 }),
        ("0x1f", InvalidByte { index: 1 }),
        ("abc", InvalidByte { index: 0 }),
        ("１２", InvalidByte { index: 0 }), // full-width digits
        ("٣", InvalidByte { index: 0 }),    // Arabic-Indic three
        ("12\u{0}", InvalidByte { index: 2 }),
        ("00", LeadingZero),
        ("01", LeadingZero),
        ("0000000000000000000001", LeadingZero),
        ("9223372036854775808", TooLarge),
        ("18446744073709551615", TooLarge),
        ("18446744073709551616", TooLarge),
        ("99999999999999999999999999", TooLarge),
    ];
    for (text, expected) in cases {
        assert_eq!(reason(text), *expected, "for {text:?}");
    }
}

#[test]
fn malformed_base32_strings_are_refused() {
    use ParseIdError::*;
    let ok = Id::try_from(123_456_789u64).unwrap().to_base32();
    assert_eq!(ok.as_str(), "00000003NQK8N");
    let cases: &[(&str, ParseIdError)] = &[
        ("", Empty),
        ("00000003NQK8", WrongLength { len: 12 }),
        ("00000003NQK8N0", WrongLength { len: 14 }),
        ("00000003NQK8I", InvalidByte { index: 12 }),
        ("00000003NQK8L", InvalidByte { index: 12 }),
        ("00000003NQK8O", InvalidByte { index: 12 }),
        ("00000003NQK8U", InvalidByte { index: 12 }),
        ("-0000003NNVGN", InvalidByte { index: 0 }),
        ("0000000 NQK8N", InvalidByte { index: 7 }),
        ("8000000000000", TooLarge),
        ("ZZZZZZZZZZZZZ", TooLarge),
        ("000000é3NQK8", InvalidByte { index: 6 }),
    ];
    for (text, expected) in cases {
        match Id::from_base32(text) {
            Err(Error::ParseId(reason)) => assert_eq!(reason, *expected, "for {text:?}"),
            other => panic!("{text:?} gave {other:?}"),
        }
    }
    assert_eq!(Id::from_base32("7ZZZZZZZZZZZZ").unwrap(), Id::MAX);
}

#[test]
fn numbers_outside_the_id_range_are_refused() {
    assert_eq!(Id::try_from(-1i64), Err(Error::IdOutOfRange { value: -1 }));
    assert_eq!(
        Id::try_from(1u64 << 63),
        Err(Error::IdOutOfRange { value: 1i128 << 63 })
    );
    assert_eq!(i64::from(Id::MAX), i64::MAX);
    assert_eq!(u64::from(Id::try_from(5i64).unwrap()), 5);
}

#[test]
fn error_messages_say_what_is_wrong() {
    let message = "01".parse::<Id>().unwrap_err().to_string();
    assert_eq!(message, "invalid ID string: leading zeros are not allowed");
    let message = "12a".parse::<Id>().unwrap_err().to_string();
    assert!(message.contains("byte 2"), "{message}");
}
