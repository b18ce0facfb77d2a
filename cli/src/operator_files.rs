//! Small files an operator names by flag (the lease API's token, the list of sequences):
//! read so that a wrong path can neither hang the start nor print a secret.

use std::io::Read;
use std::path::Path;

use crate::failure::Failure;

/// A small text file's content and its permission bits (0 off Unix).
pub struct OperatorFile {
    pub text: String,
    pub mode: u32,
}

/// Reads `path`, named by `flag`: checked before it is opened (opening a FIFO waits for a
/// writer, maybe for ever), refused unless a regular file (a symlink to one is followed,
/// as for a mounted secret), at most `max_bytes` (`what` names the file's kind in that
/// refusal), UTF-8, and never quoted in an error.
pub fn read(path: &Path, flag: &str, what: &str, max_bytes: u64) -> Result<OperatorFile, Failure> {
    let failed = |reason: &dyn std::fmt::Display| {
        Failure::input(format!("{flag} {}: {reason}", path.display()))
    };
    let kind = std::fs::metadata(path).map_err(|error| failed(&error))?;
    if !kind.is_file() {
        return Err(failed(&"not a regular file"));
    }
    let file = std::fs::File::open(path).map_err(|error| failed(&error))?;
    // The file opened may not be the one looked at: checked again.
    let metadata = file.metadata().map_err(|error| failed(&error))?;
    if !metadata.is_file() {
        return Err(failed(&"not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| failed(&error))?;
    if bytes.len() as u64 > max_bytes {
        return Err(failed(&format!(
            "larger than {max_bytes} bytes: not {what}"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| failed(&"not UTF-8 text"))?;
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        metadata.permissions().mode() & 0o777
    };
    #[cfg(not(unix))]
    let mode = 0;
    Ok(OperatorFile { text, mode })
}
