//! [`Codec`]: encoding IDs under the first key and decoding under any, one at a time or in
//! batches. Uses `walk`, `key` and `text`.

use std::fmt;

use cipher::KeyInit;
use speck_cipher::Speck64_128;

use super::key::{KeyFile, OpaqueKey, key_error};
use super::text::OpaqueId;
use super::walk::{DOMAIN_END, decrypt, encrypt, walk, walk_all};
use crate::{Error, Id};

/// Encodes IDs with the first of its keys and decodes with any of them.
///
/// `Debug` shows the key numbers, never a key. Encoding and decoding take no lock, and one
/// at a time they allocate nothing; a codec is `Send + Sync`, so one can be shared by every
/// thread. Its ciphers' round keys are wiped when it is dropped.
#[derive(Clone)]
pub struct Codec {
    encoder: Speck64_128,
    encoder_id: u32,
    decoders: Vec<(u32, Speck64_128)>,
}

impl Codec {
    /// A codec over `keys`, the first of which encodes. Fails on no keys or a key number
    /// given twice.
    pub fn new(keys: &[OpaqueKey]) -> Result<Codec, Error> {
        let Some(first) = keys.first() else {
            return Err(key_error("no key given"));
        };
        let mut decoders: Vec<(u32, Speck64_128)> = Vec::with_capacity(keys.len());
        for key in keys {
            if decoders.iter().any(|(id, _)| *id == key.id) {
                return Err(key_error(format!("key number {} is given twice", key.id)));
            }
            decoders.push((key.id, Speck64_128::new(&key.bytes.into())));
        }
        Ok(Codec {
            encoder: decoders[0].1.clone(),
            encoder_id: first.id,
            decoders,
        })
    }

    /// The number of the key that encodes.
    pub fn encoding_key_id(&self) -> u32 {
        self.encoder_id
    }

    /// The numbers of every key it decodes with, the encoding key's first.
    pub fn key_ids(&self) -> Vec<u32> {
        self.decoders.iter().map(|(id, _)| *id).collect()
    }

    /// The opaque form of `id`, under the first key.
    pub fn encode(&self, id: Id) -> OpaqueId {
        let value = walk(id.as_u64(), DOMAIN_END, |x| encrypt(&self.encoder, x));
        OpaqueId {
            key_id: self.encoder_id,
            value,
        }
    }

    /// The opaque forms of `ids`, in order: the same as [`Codec::encode`] on each, about a
    /// third faster per ID for batches (the walks of several IDs overlap).
    pub fn encode_all(&self, ids: &[Id]) -> Vec<OpaqueId> {
        let values: Vec<u64> = ids.iter().map(|id| id.as_u64()).collect();
        let mut out = vec![0; values.len()];
        walk_all(&values, &mut out, DOMAIN_END, |x| encrypt(&self.encoder, x));
        out.into_iter()
            .map(|value| OpaqueId {
                key_id: self.encoder_id,
                value,
            })
            .collect()
    }

    /// The ID behind `opaque`, under the key it names. Fails with
    /// [`Error::UnknownOpaqueKey`] when this codec does not hold that key. With the wrong
    /// key of the right number, the result is some other ID: nothing in an opaque ID tells
    /// keys apart.
    pub fn decode(&self, opaque: OpaqueId) -> Result<Id, Error> {
        let cipher = self.decoder(opaque.key_id)?;
        let value = walk(opaque.value, DOMAIN_END, |x| decrypt(cipher, x));
        Ok(Id::from_raw(value))
    }

    /// The IDs behind `opaques`, in order: the same as [`Codec::decode`] on each, with the
    /// walks of several overlapping. Fails with the first unknown key number.
    pub fn decode_all(&self, opaques: &[OpaqueId]) -> Result<Vec<Id>, Error> {
        let mut out = vec![0; opaques.len()];
        let mut start = 0;
        // Runs of one key number (usually the whole batch) are walked together.
        while start < opaques.len() {
            let key_id = opaques[start].key_id;
            let cipher = self.decoder(key_id)?;
            let run = opaques[start..]
                .iter()
                .take_while(|opaque| opaque.key_id == key_id)
                .count();
            let values: Vec<u64> = opaques[start..start + run]
                .iter()
                .map(|o| o.value)
                .collect();
            walk_all(&values, &mut out[start..start + run], DOMAIN_END, |x| {
                decrypt(cipher, x)
            });
            start += run;
        }
        Ok(out.into_iter().map(Id::from_raw).collect())
    }

    fn decoder(&self, key_id: u32) -> Result<&Speck64_128, Error> {
        self.decoders
            .iter()
            .find(|(id, _)| *id == key_id)
            .map(|(_, cipher)| cipher)
            .ok_or(Error::UnknownOpaqueKey { key_id })
    }
}

impl fmt::Debug for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u32> = self.decoders.iter().map(|(id, _)| *id).collect();
        f.debug_struct("Codec")
            .field("encoding_key_id", &self.encoder_id)
            .field("key_ids", &ids)
            .finish_non_exhaustive()
    }
}

impl KeyFile {
    /// A codec over the file's keys.
    pub fn codec(&self) -> Codec {
        Codec::new(self.keys()).expect("parse_keys returns at least one key, each number once")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opaque::MAX_KEY_ID;
    use crate::opaque::text::TEXT_DIGITS;

    fn key(id: u32, seed: u8) -> OpaqueKey {
        OpaqueKey::new(
            id,
            std::array::from_fn(|i| seed.wrapping_mul(31) ^ (i as u8 + 1)),
        )
        .unwrap()
    }
    #[test]
    fn known_answers_pin_the_text_of_published_ids() {
        // Computed by an independent Speck64/128 (Python, checked against the paper's
        // vector in this byte order): a change of key order, fold, block byte order or
        // alphabet would change every opaque ID already published.
        for (hex, value, text) in [
            ("000102030405060708090a0b0c0d0e0f", 0, "o1_AyJykrccOzH"),
            ("000102030405060708090a0b0c0d0e0f", 1, "o1_6BfN6gS9Pli"),
            (
                "000102030405060708090a0b0c0d0e0f",
                385_628_494_224_322_560,
                "o1_7XWyFTiNUNC",
            ),
            // Four steps of walk.
            (
                "000102030405060708090a0b0c0d0e0f",
                DOMAIN_END - 1,
                "o1_12bL0xVyNDj",
            ),
            ("9c0d4e1f2a3b5c6d7e8f90a1b2c3d4e5", 0, "o1_6tCFgd4pPoh"),
            (
                "9c0d4e1f2a3b5c6d7e8f90a1b2c3d4e5",
                385_628_494_224_322_560,
                "o1_6XBA2AVqhX3",
            ),
        ] {
            let codec = Codec::new(&[OpaqueKey::from_hex(1, hex).unwrap()]).unwrap();
            let id = Id::try_from(value).unwrap();
            assert_eq!(codec.encode(id).to_string(), text, "{hex} {value}");
            assert_eq!(codec.decode(text.parse().unwrap()), Ok(id));
        }
    }

    #[test]
    fn opaque_ids_come_back_from_their_parts_and_only_from_valid_ones() {
        let codec = Codec::new(&[key(7, 3)]).unwrap();
        let opaque = codec.encode(Id::try_from(99u64).unwrap());
        let back = OpaqueId::from_parts(opaque.key_id(), opaque.value()).unwrap();
        assert_eq!(back, opaque);
        for (key_id, value) in [(0, 1), (MAX_KEY_ID + 1, 1), (1, DOMAIN_END), (1, u64::MAX)] {
            assert!(matches!(
                OpaqueId::from_parts(key_id, value),
                Err(Error::OpaqueText { .. })
            ));
        }
    }
    #[test]
    fn round_trips_for_the_edges_and_under_every_key() {
        let codec = Codec::new(&[key(2, 5), key(1, 9)]).unwrap();
        let edges = [0, 1, 2, 12_345, DOMAIN_END - 2, DOMAIN_END - 1];
        let ids: Vec<Id> = edges.iter().map(|&v| Id::try_from(v).unwrap()).collect();
        let all = codec.encode_all(&ids);
        for (&id, &in_batch) in ids.iter().zip(&all) {
            let opaque = codec.encode(id);
            assert_eq!(opaque, in_batch);
            assert_eq!(opaque.key_id(), 2);
            assert!(opaque.value() < DOMAIN_END);
            assert_eq!(codec.decode(opaque), Ok(id));
            let text = opaque.to_string();
            assert_eq!(text.len(), 3 + TEXT_DIGITS);
            assert_eq!(text.parse::<OpaqueId>(), Ok(opaque));
        }
        assert_eq!(codec.decode_all(&all), Ok(ids.clone()));
        // The old key still decodes what it made, also in a batch mixing keys.
        let old = Codec::new(&[key(1, 9)]).unwrap();
        let id = Id::try_from(77u64).unwrap();
        assert_eq!(codec.decode(old.encode(id)), Ok(id));
        let mixed = [all[0], old.encode(id), all[1]];
        assert_eq!(codec.decode_all(&mixed), Ok(vec![ids[0], id, ids[1]]));
    }

    #[test]
    fn a_wrong_key_does_not_give_the_id_back() {
        let right = Codec::new(&[key(1, 1)]).unwrap();
        let wrong = Codec::new(&[key(1, 2)]).unwrap();
        let same = (0..1_000u64)
            .filter(|&v| {
                let id = Id::try_from(v * 1_000_003).unwrap();
                wrong.decode(right.encode(id)) == Ok(id)
            })
            .count();
        assert_eq!(same, 0);
        let made = right.encode(Id::try_from(1u64).unwrap());
        let other = Codec::new(&[key(3, 1)]).unwrap();
        assert_eq!(
            other.decode(made),
            Err(Error::UnknownOpaqueKey { key_id: 1 })
        );
        assert_eq!(
            other.decode_all(&[made]),
            Err(Error::UnknownOpaqueKey { key_id: 1 })
        );
    }
    #[test]
    fn debug_never_shows_a_key() {
        let key = OpaqueKey::new(1, [0xab; 16]).unwrap();
        let codec = Codec::new(std::slice::from_ref(&key)).unwrap();
        for text in [format!("{key:?}"), format!("{codec:?}")] {
            assert!(!text.to_lowercase().contains("ab"), "{text}");
            assert!(!text.contains("171"), "{text}");
        }
    }
}
