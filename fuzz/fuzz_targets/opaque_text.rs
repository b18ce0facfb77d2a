//! Opaque IDs and key files from text: parsing never panics, only the canonical text of an
//! opaque ID parses, and decoding anything that parses gives an ID that encodes back to it.
#![no_main]

use idgen::opaque::{Codec, OpaqueId, OpaqueKey, parse_keys};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(opaque) = text.parse::<OpaqueId>() {
        assert_eq!(opaque.to_string(), text);
        let key = OpaqueKey::from_hex(opaque.key_id(), "0f1e2d3c4b5a69788796a5b4c3d2e1f0").unwrap();
        let codec = Codec::new(&[key]).unwrap();
        let id = codec.decode(opaque).unwrap();
        assert_eq!(codec.encode(id), opaque);
    }
    if let Ok(keys) = parse_keys(text) {
        assert!(!keys.is_empty());
        assert!(Codec::new(&keys).is_ok());
    }
});
