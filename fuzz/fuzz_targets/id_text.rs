//! `Id` from text: decimal and base32 never panic, and what parses is canonical (written
//! back to exactly the same text).
#![no_main]

use idgen::Id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(id) = text.parse::<Id>() {
        assert_eq!(id.to_string(), text);
    }
    if let Ok(id) = Id::from_base32(text) {
        assert_eq!(Id::from_base32(&id.to_base32().to_string()), Ok(id));
        assert!(id.as_u64() <= i64::MAX as u64);
    }
    // The JSON form: a string of the decimal.
    if let Ok(id) = serde_json::from_slice::<Id>(bytes) {
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{id}\""));
    }
});
