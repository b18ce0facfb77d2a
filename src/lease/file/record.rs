//! The record format: one line per worker number, naming the number, the file it was
//! written into and the holder, with the holder's mark and a checksum. Pure text: reading
//! and writing the file is the claim's and the acquire's.

#[cfg(fuzzing)]
use super::roster::Roster;
use crate::store_files::{FileIdentity, checksum, checksum_matches};

/// One record: the number it belongs to, the file it was written into, the holder's mark
/// and process ID, with a checksum of all of them.
///
/// `idgen-lease v2 dc=<D> worker=<W> file=<device>:<inode> mark=<unix ms> pid=<pid>
/// [holder=<hex of the holder's name>] check=<16 hex digits>\n`, numbers at fixed widths;
/// an empty file is a number never held. Records of version 1 (`mark` and `pid` only)
/// still parse, as not naming their file. Fields are found by name, so a reader that does
/// not know `holder` (the version before it) reads the record as before.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Record {
    pub(super) datacenter: Option<u64>,
    pub(super) worker: Option<u64>,
    pub(super) file: Option<FileIdentity>,
    pub(super) mark: u64,
    pub(super) holder: Option<String>,
}

impl Record {
    const V1: &'static str = "idgen-lease v1 ";
    const V2: &'static str = "idgen-lease v2 ";

    pub(super) fn format(
        datacenter: u64,
        worker: u64,
        file: FileIdentity,
        mark: u64,
        pid: u32,
        holder: &str,
    ) -> String {
        let mut body = format!(
            "dc={datacenter:020} worker={worker:020} file={:020}:{:020} mark={mark:020} \
             pid={pid:010}",
            file.device, file.inode
        );
        // Always present and always as wide, so every record of this version has the
        // same length: a rewrite covers the old record whole, leaving no torn tail even
        // for a moment.
        body += " holder=";
        let name = holder_bytes(holder);
        body.extend(name.iter().map(|byte| format!("{byte:02x}")));
        body.extend(std::iter::repeat_n("00", MAX_HOLDER_BYTES - name.len()));
        format!("{}{body} check={:016x}\n", Record::V2, checksum(&body))
    }

    /// The record, `None` for an empty (never held) file, or why it is not to be trusted.
    pub(super) fn parse(text: &str) -> Result<Option<Record>, String> {
        if text.is_empty() {
            return Ok(None);
        }
        let line = text
            .strip_suffix('\n')
            .ok_or_else(|| "not an idgen lease record (or a torn write)".to_string())?;
        let (version, line) = if let Some(line) = line.strip_prefix(Record::V2) {
            (2, line)
        } else if let Some(line) = line.strip_prefix(Record::V1) {
            (1, line)
        } else {
            return Err("not an idgen lease record (or a torn write)".to_string());
        };
        let (body, check) = line
            .rsplit_once(" check=")
            .ok_or_else(|| "the record has no checksum".to_string())?;
        if !checksum_matches(body, check) {
            return Err("the record's checksum does not match".to_string());
        }
        let field = |name: &str| -> Option<&str> {
            body.split(' ')
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        };
        let number = |text: &str| -> Option<u64> {
            (text.len() == 20 && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse().ok())
                .flatten()
        };
        let mark = field("mark")
            .and_then(number)
            .ok_or_else(|| "the record has no readable mark".to_string())?;
        if version == 1 {
            return Ok(Some(Record {
                datacenter: None,
                worker: None,
                file: None,
                mark,
                holder: None,
            }));
        }
        let unreadable = || "the record's number or file is unreadable".to_string();
        let (device, inode) = field("file")
            .and_then(|file| file.split_once(':'))
            .ok_or_else(unreadable)?;
        Ok(Some(Record {
            datacenter: Some(field("dc").and_then(number).ok_or_else(unreadable)?),
            worker: Some(field("worker").and_then(number).ok_or_else(unreadable)?),
            file: Some(FileIdentity {
                device: number(device).ok_or_else(unreadable)?,
                inode: number(inode).ok_or_else(unreadable)?,
            }),
            mark,
            holder: field("holder").and_then(unhex),
        }))
    }
}

/// The longest holder name a record keeps, in bytes; longer ones are cut at a character.
const MAX_HOLDER_BYTES: usize = 128;

/// `holder` cut to [`MAX_HOLDER_BYTES`] at a character boundary.
fn holder_bytes(holder: &str) -> &[u8] {
    let mut end = holder.len().min(MAX_HOLDER_BYTES);
    while !holder.is_char_boundary(end) {
        end -= 1;
    }
    &holder.as_bytes()[..end]
}

/// The holder name written as hex (padded with zero bytes); `None` for anything else or
/// for no name.
fn unhex(hex: &str) -> Option<String> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            // Lower-case hex digits only, as written (from_str_radix would take a sign).
            let pair = hex.get(i..i + 2)?;
            let lower = pair.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            lower.then(|| u8::from_str_radix(pair, 16).ok()).flatten()
        })
        .collect();
    let mut bytes = bytes?;
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    String::from_utf8(bytes)
        .ok()
        .filter(|name| !name.is_empty())
}

/// For the fuzz target (`fuzz/fuzz_targets/store_files.rs`): reads `text` as a lease record and
/// as a roster. Neither may panic; a record that parses, written again, parses to the same.
#[cfg(fuzzing)]
pub(crate) fn fuzz_read(text: &str) {
    if let Ok(Some(record)) = Record::parse(text)
        && let (Some(datacenter), Some(worker), Some(file)) =
            (record.datacenter, record.worker, record.file)
    {
        let holder = record.holder.clone().unwrap_or_default();
        let again = Record::format(datacenter, worker, file, record.mark, 0, &holder);
        let reread = Record::parse(&again).expect("a written record parses");
        assert_eq!(reread.map(|r| r.mark), Some(record.mark));
    }
    let _ = Roster::parse(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzz target `store_files`: a checksum in upper case was taken as the
    /// same record, so a record that idgen never writes read as valid.
    #[test]
    fn only_the_checksum_as_written_is_taken() {
        let text = Record::format(
            0,
            3,
            FileIdentity {
                device: 1,
                inode: 2,
            },
            77,
            9,
            "a",
        );
        assert!(matches!(Record::parse(&text), Ok(Some(_))));
        let (body, check) = text.trim_end().rsplit_once(" check=").unwrap();
        let altered = check.to_uppercase();
        assert_ne!(altered, check, "a checksum with letters, to alter");
        let text = format!("{body} check={altered}\n");
        assert!(Record::parse(&text).is_err(), "{text}");
    }

    #[test]
    fn records_round_trip_and_reject_tampering() {
        let file = FileIdentity {
            device: 2049,
            inode: 123_456,
        };
        let text = Record::format(1, 7, file, 1_764_000_000_123, 4242, "");
        assert_eq!(text.len(), Record::format(0, 0, file, 0, 0, "").len());
        assert_eq!(
            Record::parse(&text),
            Ok(Some(Record {
                datacenter: Some(1),
                worker: Some(7),
                file: Some(file),
                mark: 1_764_000_000_123,
                holder: None,
            }))
        );
        let named = Record::format(1, 7, file, 1_764_000_000_123, 4242, "billing 7f9c ünï");
        let record = Record::parse(&named).unwrap().unwrap();
        assert_eq!(record.holder.as_deref(), Some("billing 7f9c ünï"));
        assert_eq!(record.mark, 1_764_000_000_123);
        // Every record as long as every other, whatever the name: a rewrite never leaves
        // a tail. A name too long is cut at a character boundary.
        let long = "é".repeat(200);
        let cut = Record::format(1, 7, file, 1, 2, &long);
        assert_eq!(cut.len(), text.len());
        assert_eq!(named.len(), text.len());
        let kept = Record::parse(&cut).unwrap().unwrap().holder.unwrap();
        assert_eq!(kept, "é".repeat(64));
        assert_eq!(Record::parse(""), Ok(None));
        let tampered = text.replace("1764000000123", "1764000000124");
        assert!(Record::parse(&tampered).unwrap_err().contains("checksum"));
        assert!(Record::parse(&text[..text.len() - 5]).is_err());
        assert!(Record::parse("garbage\n").is_err());
        assert!(Record::parse("\0\0\0\0").is_err());
    }

    /// The version before this one found fields by name and checked the whole body's
    /// checksum, so a record with a holder reads there as the same mark: held, not corrupt.
    /// What that version checked: the prefix, the checksum over the whole body, the mark
    /// found by name.
    #[test]
    fn a_record_with_a_holder_reads_in_the_version_before_as_the_same_mark() {
        fn previous_parse(text: &str) -> Option<u64> {
            let line = text.strip_suffix('\n')?;
            let line = line.strip_prefix(Record::V2)?;
            let (body, check) = line.rsplit_once(" check=")?;
            if check.len() != 16 || u64::from_str_radix(check, 16) != Ok(checksum(body)) {
                return None;
            }
            let field = |name: &str| -> Option<&str> {
                body.split(' ')
                    .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            };
            field("mark")?.parse().ok()
        }
        let file = FileIdentity {
            device: 1,
            inode: 2,
        };
        let named = Record::format(0, 3, file, 1_764_000_000_999, 7, "svc a");
        assert_eq!(previous_parse(&named), Some(1_764_000_000_999));
    }

    #[test]
    fn a_version_1_record_parses_without_naming_its_file() {
        let body = format!("mark={:020} pid={:010}", 1_764_000_000_123u64, 42);
        let text = format!("idgen-lease v1 {body} check={:016x}\n", checksum(&body));
        let record = Record::parse(&text).unwrap().unwrap();
        assert_eq!((record.mark, record.file), (1_764_000_000_123, None));
    }
}
