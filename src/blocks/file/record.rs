//! The record format: where a sequence stands (next value, serial, last block's size), in
//! fixed-width lines with a checksum. Pure text: reading and writing the files is the
//! store's (`mod.rs`).

use crate::blocks::MAX_VALUE;
use crate::store_files::{checksum, checksum_matches};

/// First line of every record this store writes.
const HEADER: &str = "idgen-blocks v2";

/// Where a sequence stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Record {
    /// The next value to grant.
    pub(super) next: u64,
    /// How many grants and give-backs the sequence has seen.
    pub(super) serial: u64,
    /// The size of the last block granted.
    pub(super) size: u64,
}

impl Record {
    /// Fixed-width text with an FNV-1a checksum of everything before it.
    pub(super) fn text(&self) -> String {
        let body = format!(
            "{HEADER}\nnext={:020}\nserial={:020}\nsize={:020}\n",
            self.next, self.serial, self.size
        );
        let check = checksum(&body);
        format!("{body}check={check:016x}\n")
    }

    pub(super) fn parse(text: &str) -> Option<Record> {
        let (body, check) = text.strip_suffix('\n')?.rsplit_once("check=")?;
        if !checksum_matches(body, check) {
            return None;
        }
        // Split on \n alone: `lines` would also take \r\n, which is never written.
        let mut lines = body
            .strip_prefix(HEADER)?
            .strip_prefix('\n')?
            .split_terminator('\n');
        let mut field = |name: &str| -> Option<u64> {
            let digits = lines.next()?.strip_prefix(name)?.strip_prefix('=')?;
            (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse().ok())?
        };
        let record = Record {
            next: field("next")?,
            serial: field("serial")?,
            size: field("size")?,
        };
        let sane = (1..=MAX_VALUE + 1).contains(&record.next) && record.serial <= MAX_VALUE;
        (lines.next().is_none() && sane).then_some(record)
    }
}

/// For the fuzz target (`fuzz/fuzz_targets/store_files.rs`): reads `text` as a block record. It
/// may not panic, and a record that parses is written back to exactly the same text.
#[cfg(fuzzing)]
pub(crate) fn fuzz_read(text: &str) {
    if let Some(record) = Record::parse(text) {
        assert_eq!(record.text(), text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store_files::fnv1a;

    /// Found by the fuzz target `store_files`: a checksum in upper case was taken, so a
    /// record that idgen never writes read as valid.
    #[test]
    fn only_the_checksum_as_written_is_taken() {
        let text = Record {
            next: 4,
            serial: 1,
            size: 3,
        }
        .text();
        assert!(Record::parse(&text).is_some());
        let (body, check) = text.trim_end().rsplit_once("check=").unwrap();
        let altered = check.to_uppercase();
        assert_ne!(altered, check, "a checksum with letters, to alter");
        assert_eq!(Record::parse(&format!("{body}check={altered}\n")), None);
        // Nor Windows line ends, with a checksum made over them.
        let crlf = text.replace('\n', "\r\n");
        let (body, _) = crlf.rsplit_once("check=").unwrap();
        let forged = format!("{body}check={:016x}\n", fnv1a(body.as_bytes()));
        assert_eq!(Record::parse(&forged), None);
    }

    #[test]
    fn a_record_reads_back_and_any_damage_is_refused() {
        let record = Record {
            next: 1_001,
            serial: 7,
            size: 1_000,
        };
        let text = record.text();
        assert_eq!(Record::parse(&text), Some(record));
        // Every single-byte change and every truncation is refused.
        for at in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[at] ^= 0x01;
            if let Ok(changed) = String::from_utf8(bytes) {
                assert_eq!(Record::parse(&changed), None, "flipped at {at}");
            }
            assert_eq!(Record::parse(&text[..at]), None, "cut at {at}");
        }
    }
}
