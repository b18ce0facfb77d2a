//! `Uuid7` and `Ulid` from text never panic, and what parses writes back to the same text
//! (up to case, which both forms accept either way).
#![no_main]

use idgen::{Ulid, Uuid7};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(uuid) = text.parse::<Uuid7>() {
        assert!(uuid.to_string().eq_ignore_ascii_case(text));
        assert_eq!(Uuid7::from_bytes(*uuid.as_bytes()), Ok(uuid));
    }
    if let Ok(ulid) = text.parse::<Ulid>() {
        assert!(ulid.to_string().eq_ignore_ascii_case(text));
    }
});
