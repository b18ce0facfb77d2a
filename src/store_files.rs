//! Helpers shared by the file stores (the lease store, `lease/file/`, and the block store,
//! `blocks/file/`): the FNV-1a checksum their records end with and the check of a written
//! one, the reason text of a failed file operation, private files and directories, which
//! file a handle or a path is, and a directory's `fsync`.
//!
//! What the two keep apart, each for a reason given where it lives: the record formats and
//! rosters (different files, each read by older versions of its store), the error variant
//! an I/O failure becomes (`Error::LeaseStore` or `Error::BlockStore`: callers tell the two
//! apart), how each creates its directory (the lease store whole with its roster, the block
//! store parent by parent, durably), and whether a path is looked at through a symbolic link
//! ([`FileIdentity::of_path`] for the lease store, [`FileIdentity::of_target`] for the block
//! store).
//!
//! Nothing here knows either store: only `std`.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

/// FNV-1a, 64 bits: catches torn and hand-edited records; not a defence against forgery.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The checksum a record's `check=` field carries, of the record's text before it.
pub(crate) fn checksum(body: &str) -> u64 {
    fnv1a(body.as_bytes())
}

/// Whether `check` is the checksum of `body` exactly as written: 16 lower-case hex digits
/// (`from_str_radix` alone would also take upper case and a sign, so a record idgen never
/// writes would read as valid).
pub(crate) fn checksum_matches(body: &str, check: &str) -> bool {
    let written = check.len() == 16
        && check
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    written && u64::from_str_radix(check, 16) == Ok(checksum(body))
}

/// What a failed file operation says: each store wraps it in its own error variant.
pub(crate) fn io_reason(path: &Path, action: &str, error: &std::io::Error) -> String {
    format!("could not {action} {}: {error}", path.display())
}

/// Creates a new file (never an existing one, nor through a link) readable and writable by
/// its owner only.
pub(crate) fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Creates one directory (its parent must exist) usable by its owner only.
pub(crate) fn private_dir(path: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(path)
}

/// Makes a directory's entries (files created, renamed or linked in it) durable.
// Only the block store renames records into place; the lease store rewrites its in place.
#[cfg(feature = "blocks")]
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|dir| dir.sync_all())
}

/// Which file something is: device and inode. A lease record names the file it was written
/// into with it, so its width and meaning are part of that format. Outside Unix every file
/// is the same (0, 0): there the check passes whenever the path exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    pub(crate) device: u64,
    pub(crate) inode: u64,
}

impl FileIdentity {
    /// The file an open handle refers to.
    #[cfg(unix)]
    pub(crate) fn of(file: &File) -> std::io::Result<FileIdentity> {
        file.metadata()
            .map(|metadata| FileIdentity::from(&metadata))
    }

    // Every identity is the same there: no system call to fail.
    #[cfg(not(unix))]
    pub(crate) fn of(_file: &File) -> std::io::Result<FileIdentity> {
        Ok(FileIdentity {
            device: 0,
            inode: 0,
        })
    }

    /// The entry at `path` itself: a symbolic link is the link, not its target.
    pub(crate) fn of_path(path: &Path) -> std::io::Result<FileIdentity> {
        fs::symlink_metadata(path).map(|metadata| FileIdentity::from(&metadata))
    }

    /// What `path` leads to, through any symbolic links, as opening it does.
    #[cfg(feature = "blocks")]
    pub(crate) fn of_target(path: &Path) -> std::io::Result<FileIdentity> {
        fs::metadata(path).map(|metadata| FileIdentity::from(&metadata))
    }

    /// Whether `named` (the identity of what a path names now) is this file: `false` once
    /// the path is gone, an error only when it could not be looked at.
    pub(crate) fn matches(self, named: std::io::Result<FileIdentity>) -> std::io::Result<bool> {
        match named {
            Ok(named) => Ok(named == self),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }
}

impl From<&fs::Metadata> for FileIdentity {
    #[cfg(unix)]
    fn from(metadata: &fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            device: metadata.dev(),
            inode: metadata.ino(),
        }
    }

    #[cfg(not(unix))]
    fn from(_metadata: &fs::Metadata) -> FileIdentity {
        FileIdentity {
            device: 0,
            inode: 0,
        }
    }
}
