//! The lease API's bearer token: read from the file `--lease-api-token-file` names, and
//! compared with the one a request carries.

use std::path::Path;

use crate::failure::Failure;
use crate::log::LEASE_API_TARGET;
use crate::operator_files;

/// The largest token file read: a bearer token is tens of bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The bearer token in `token_file` (its content, trimmed), treated as the opaque key file
/// is: checked before it is opened (opening a FIFO waits for a writer, maybe for ever),
/// refused unless a regular file (a symlink to one is followed, as for a mounted secret),
/// at most [`MAX_TOKEN_FILE_BYTES`], never quoted. A missing, unreadable, oversized,
/// non-UTF-8 or empty file is an input error; one its group or others may use is a warning.
pub fn read_token(token_file: &Path) -> Result<Vec<u8>, Failure> {
    let flag = "--lease-api-token-file";
    let file = operator_files::read(token_file, flag, "a token file", MAX_TOKEN_FILE_BYTES)?;
    let token = file.text.trim();
    if token.is_empty() {
        return Err(Failure::input(format!(
            "{flag} {}: the file is empty; put the bearer token in it",
            token_file.display()
        )));
    }
    if file.mode & 0o077 != 0 {
        tracing::warn!(
            target: LEASE_API_TARGET,
            "{flag} {} has mode {:04o}: others than its owner may read the token (chmod 600 \
             it)",
            token_file.display(),
            file.mode
        );
    }
    Ok(token.as_bytes().to_vec())
}

/// Compares in time that depends on the lengths only, never on where they differ.
pub fn same_token(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}
