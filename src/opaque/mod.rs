//! Opaque public IDs: a keyed pseudorandom permutation of the 63-bit ID space, reversible
//! only with the key.
//!
//! An [`Id`] tells anyone who sees it when it was made, on which node, and (through the
//! sequence and the gaps between IDs) roughly how many were made. Where that matters (order
//! numbers competitors could count), keep the [`Id`] internal and show its [`OpaqueId`]:
//! consecutive IDs give unrelated opaque IDs, and only a holder of the key gets the ID
//! back.
//!
//! ```
//! use idgen::opaque::{Codec, OpaqueId, OpaqueKey};
//! use idgen::Id;
//!
//! let key = OpaqueKey::from_hex(1, "000102030405060708090a0b0c0d0e0f")?;
//! let codec = Codec::new(&[key])?;
//! let id = Id::try_from(385_628_494_224_322_560u64)?;
//! let public = codec.encode(id);
//! let text = public.to_string(); // "o1_" and 11 characters of base62
//! assert!(text.starts_with("o1_") && text.len() == 14);
//! assert_eq!(codec.decode(text.parse::<OpaqueId>()?)?, id);
//! # Ok::<(), idgen::Error>(())
//! ```
//!
//! # The scheme
//!
//! - **Cipher**: Speck64/128 (Beaulieu et al., NSA 2013), a published 64-bit block cipher
//!   with a 128-bit key, from RustCrypto's `speck-cipher`. Nothing here is home-made but the
//!   two functions around it: the walk below and the text form.
//! - **63 bits by cycle-walking**: the cipher permutes all 2^64 values; an encryption that
//!   lands at 2^63 or above is encrypted again until it lands below, so an opaque ID is a
//!   positive `i64` like an [`Id`], and decoding walks back the same way. This is a
//!   permutation of the 63-bit space (Black and Rogaway, "Ciphers with arbitrary finite
//!   domains", 2002). It takes two encryptions on average (half the values land above).
//! - **Text**: `o`, the key's number, `_`, and exactly 11 characters of base62
//!   (`0-9A-Za-z`, in that order of value), zero-padded: `o1_3L0eJ7bQ2xP`. The `o` and `_`
//!   keep it from being mistaken for a decimal or base32 ID, a UUID or a ULID. Parsing
//!   refuses every other string, including values of 2^63 or more.
//! - **Keys and rotation**: a [`Codec`] encodes with its first key and decodes with any of
//!   them, picked by the number in the text. To rotate, put a new key (with a new number)
//!   first and keep the old ones: old opaque IDs still decode, new ones use the new key.
//!   The same ID has a different opaque ID under each key.
//!
//! What the scheme hides and what it does not is in
//! [`design::opaque`](crate::design::opaque).
//!
//! The code: `walk.rs` the cycle-walk and the cipher calls, `key.rs` keys and key files,
//! `codec.rs` the codec, `text.rs` the opaque ID and its text form.
//!
//! [`Id`]: crate::Id

mod codec;
mod key;
mod text;
mod walk;

pub use codec::Codec;
pub use key::{KeyFile, MAX_KEY_ID, OpaqueKey, parse_keys};
pub use text::OpaqueId;
