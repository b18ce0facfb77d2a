//! Keys and key files: [`OpaqueKey`], the key file's text ([`parse_keys`]) and the file
//! itself ([`KeyFile`]: read with care, its permissions reported). Uses nothing else of the
//! folder.

use std::fmt;
use std::io::Read;
use std::path::Path;

use cipher::zeroize::Zeroize;

use crate::Error;

/// The largest key number: nine digits in the text form.
pub const MAX_KEY_ID: u32 = 999_999_999;

/// A secret key of 128 bits, with the number that names it in opaque IDs' text. `Debug`
/// shows the number, never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct OpaqueKey {
    pub(super) id: u32,
    pub(super) bytes: [u8; 16],
}

impl OpaqueKey {
    /// The key `bytes`, numbered `id` (1 to [`MAX_KEY_ID`]). A key of all zero bytes is
    /// refused: it is a placeholder, not a secret.
    pub fn new(id: u32, bytes: [u8; 16]) -> Result<OpaqueKey, Error> {
        if !(1..=MAX_KEY_ID).contains(&id) {
            return Err(key_error(format!(
                "a key number is 1 to {MAX_KEY_ID}; got {id}"
            )));
        }
        if bytes == [0; 16] {
            return Err(key_error("the key is all zeros: not a secret"));
        }
        Ok(OpaqueKey { id, bytes })
    }

    /// The key written in hex: at least 32 digits (128 bits), upper or lower case, an even
    /// number of them. A longer key is folded into 128 bits by XOR of its 16-byte pieces
    /// (the cipher's key is 128 bits; extra digits add no strength beyond that). Errors
    /// never quote the text.
    pub fn from_hex(id: u32, hex: &str) -> Result<OpaqueKey, Error> {
        if let Some(position) = hex.bytes().position(|b| !b.is_ascii_hexdigit()) {
            return Err(key_error(format!(
                "a key is hex digits only (0-9, a-f, no 0x); character {} is not one",
                position + 1
            )));
        }
        if hex.len() < 32 {
            return Err(key_error(format!(
                "the key has {} hex digits; at least 32 (128 bits) are needed",
                hex.len()
            )));
        }
        if !hex.len().is_multiple_of(2) {
            return Err(key_error(format!(
                "the key has {} hex digits; an even number is needed (two per byte)",
                hex.len()
            )));
        }
        let mut bytes = [0u8; 16];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let byte = (hex_value(pair[0]) << 4) | hex_value(pair[1]);
            bytes[i % 16] ^= byte;
        }
        OpaqueKey::new(id, bytes)
    }

    /// The key's number.
    pub fn id(&self) -> u32 {
        self.id
    }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

pub(super) fn key_error(reason: impl Into<String>) -> Error {
    Error::OpaqueKey {
        reason: reason.into(),
    }
}

impl Drop for OpaqueKey {
    fn drop(&mut self) {
        self.bytes.zeroize();
    }
}

impl fmt::Debug for OpaqueKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpaqueKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The keys of a key file's text, first (the encoding key) first.
///
/// One key per line: `HEX`, or `ID HEX` (the key's number, then whitespace, then the key;
/// a bare `HEX` is key 1). Whitespace around a line is ignored, and so are empty lines and
/// lines starting with `#`, and a byte-order mark at the start. Key numbers must differ. Errors give the line number, never
/// its text.
pub fn parse_keys(text: &str) -> Result<Vec<OpaqueKey>, Error> {
    let mut keys: Vec<OpaqueKey> = Vec::new();
    // A byte-order mark, as some editors write one, is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let in_line = |error: Error| match error {
            Error::OpaqueKey { reason } => key_error(format!("line {}: {reason}", index + 1)),
            other => other,
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let key = match fields[..] {
            [hex] => OpaqueKey::from_hex(1, hex),
            [id, hex] => parse_key_id(id).and_then(|id| OpaqueKey::from_hex(id, hex)),
            _ => Err(key_error(format!(
                "a line is HEX or ID HEX; this one has {} fields",
                fields.len()
            ))),
        }
        .map_err(in_line)?;
        if keys.iter().any(|k| k.id == key.id) {
            return Err(in_line(key_error(format!(
                "key number {} is given twice",
                key.id
            ))));
        }
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(key_error(
            "no key: a key file needs at least one line HEX or ID HEX",
        ));
    }
    Ok(keys)
}

fn parse_key_id(text: &str) -> Result<u32, Error> {
    let number = (text.len() <= 9 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u32>().ok())
        .flatten()
        .filter(|id| (1..=MAX_KEY_ID).contains(id));
    number.ok_or_else(|| {
        key_error(format!(
            "the key number (before the key) is 1 to {MAX_KEY_ID}, in decimal"
        ))
    })
}

/// The largest key file read: a few keys take a few hundred bytes.
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// A key file, read and checked: its keys and whether others than its owner may read it.
#[derive(Debug)]
pub struct KeyFile {
    keys: Vec<OpaqueKey>,
    mode: u32,
}

impl KeyFile {
    /// Reads and parses the key file at `path` (see [`parse_keys`] for its form). A missing,
    /// unreadable, oversized, non-UTF-8 or malformed file, or anything but a regular file
    /// (a FIFO would block the reader), is an [`Error::OpaqueKey`] naming the file; no error
    /// quotes its content, nor a path that looks like a key (a key given where its file's
    /// path belongs). The text read is wiped from memory once parsed.
    pub fn read(path: &Path) -> Result<KeyFile, Error> {
        let shown = shown_path(path);
        let failed = |reason: String| key_error(format!("key file {shown}: {reason}"));
        // Checked before opening: opening a FIFO waits for a writer, maybe for ever.
        let kind = std::fs::metadata(path).map_err(|error| failed(error.to_string()))?;
        if !kind.is_file() {
            return Err(failed("not a regular file".into()));
        }
        let file = std::fs::File::open(path).map_err(|error| failed(error.to_string()))?;
        let metadata = file.metadata().map_err(|error| failed(error.to_string()))?;
        if !metadata.is_file() {
            return Err(failed("not a regular file".into()));
        }
        let mut bytes = Vec::new();
        let read = file.take(MAX_KEY_FILE_BYTES + 1).read_to_end(&mut bytes);
        let mut text = match (read, String::from_utf8(bytes)) {
            (Err(error), Ok(mut text)) => {
                text.zeroize();
                return Err(failed(error.to_string()));
            }
            (_, Err(not_text)) => {
                not_text.into_bytes().zeroize();
                return Err(failed("not UTF-8 text".into()));
            }
            (Ok(_), Ok(text)) => text,
        };
        let parsed = if text.len() as u64 > MAX_KEY_FILE_BYTES {
            Err(failed(format!(
                "larger than {MAX_KEY_FILE_BYTES} bytes: not a key file"
            )))
        } else {
            parse_keys(&text).map_err(|error| match error {
                Error::OpaqueKey { reason } => failed(reason),
                other => other,
            })
        };
        text.zeroize();
        Ok(KeyFile {
            keys: parsed?,
            mode: permission_bits(&metadata),
        })
    }

    /// The keys, the encoding key first.
    pub fn keys(&self) -> &[OpaqueKey] {
        &self.keys
    }

    /// The file's permission bits (as `0o640`) when its group or others have any access,
    /// which a key file should not give: the caller warns. `None` for a file only its owner
    /// can use (and on systems without Unix permissions).
    pub fn loose_permissions(&self) -> Option<u32> {
        (self.mode & 0o077 != 0).then_some(self.mode)
    }
}

/// `path` as errors show it: in full, unless its file name is a run of 32 or more hex
/// digits, which is more likely a key than a file's name.
fn shown_path(path: &Path) -> String {
    let looks_like_key = path
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.len() >= 32 && name.bytes().all(|b| b.is_ascii_hexdigit()));
    if looks_like_key {
        "(a path that looks like a key: not shown; give the key file's path, not the key)"
            .to_string()
    } else {
        path.display().to_string()
    }
}

#[cfg(unix)]
fn permission_bits(metadata: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    metadata.permissions().mode() & 0o777
}

#[cfg(not(unix))]
fn permission_bits(_: &std::fs::Metadata) -> u32 {
    0o600
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_looks_like_a_key_is_never_shown() {
        let secret = "9c0d4e1f2a3b5c6d7e8f90a1b2c3d4e5";
        for path in [
            secret.to_string(),
            format!("/etc/{secret}"),
            format!("./{secret}aa"),
        ] {
            let error = KeyFile::read(Path::new(&path)).unwrap_err().to_string();
            assert!(!error.contains("9c0d4e1f"), "{error}");
            assert!(error.contains("looks like a key"), "{error}");
        }
        let error = KeyFile::read(Path::new("/nonexistent/keys"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent/keys"), "{error}");
    }

    #[test]
    fn keys_are_parsed_strictly_and_errors_never_quote_them() {
        let hex = "00112233445566778899aabbccddeeff";
        let keys = parse_keys(&format!(
            "  # rotated 2026-11\n\n 7\t{}  \n{hex}\n",
            hex.to_uppercase()
        ))
        .unwrap();
        assert_eq!(keys.iter().map(OpaqueKey::id).collect::<Vec<_>>(), [7, 1]);
        assert_eq!(keys[0].bytes, keys[1].bytes);
        // Saved by an editor that marks UTF-8 and ends lines the Windows way.
        let windows = parse_keys(&format!("\u{feff}{hex}\r\n2 {hex}\r\n")).unwrap();
        assert_eq!(
            windows.iter().map(OpaqueKey::id).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(windows[0].bytes, keys[0].bytes);
        // A 64-digit key folds into 128 bits, and every digit counts.
        let long = format!("{hex}{}", "0f".repeat(16));
        let folded = OpaqueKey::from_hex(1, &long).unwrap();
        assert_eq!(
            folded.bytes,
            std::array::from_fn(|i| (0x11 * i as u8) ^ 0x0f)
        );
        let secret = "5ec2e75ec2e75ec2e75ec2e75ec2e7";
        for (text, says) in [
            ("", "no key"),
            ("# only a comment", "no key"),
            (secret, "line 1: the key has 30 hex digits; at least 32"),
            (&format!("{secret}5aa"), "an even number"),
            (&format!("0x{secret}aa"), "character 2 is not one"),
            (&format!("1 {secret}zz"), "character 31 is not one"),
            (
                &format!("0 {secret}aa"),
                "line 1: the key number (before the key) is 1 to",
            ),
            (&format!("1000000000 {secret}aa"), "is 1 to 999999999"),
            (&format!("-1 {secret}aa"), "is 1 to 999999999"),
            (&format!("1 2 {secret}aa"), "this one has 3 fields"),
            (
                &format!("{secret}aa\n\n1 {secret}bb"),
                "line 3: key number 1 is given twice",
            ),
            (&"0".repeat(32), "all zeros"),
        ] {
            let error = parse_keys(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text:?}: {error}");
            assert!(
                !error.contains("5ec2e7"),
                "an error quotes the key: {error}"
            );
        }
    }
}
