//! The store's directory: where the default one is, creating a store whole, refusing a
//! directory or file that others may write, and the old default directory, where an older
//! idgen may still hold numbers.

use std::fs::{self, File, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::roster::Roster;
use super::{FileStore, ROSTER, io_error};
use crate::Error;
use crate::store_files::{private_dir, private_file};

/// Where [`FileStore::open_default`] keeps its store, the first that applies:
/// `$XDG_STATE_HOME/idgen/leases`, then `/var/lib/idgen/leases` for root, then
/// `$HOME/.local/state/idgen/leases`. Persistent (a temp dir emptied at reboot would lose
/// every mark, and with it the guard against a clock stepped back across the restart) and
/// private to one user (a shared temp dir lets anyone forge, delete or hold records).
pub fn default_lease_dir() -> Result<PathBuf, Error> {
    default_state_dir("leases").ok_or_else(|| Error::LeaseConfig {
        reason: "no default lease directory: neither XDG_STATE_HOME nor HOME is set; give one \
                 explicitly (--lease-dir)"
            .to_string(),
    })
}

/// `idgen/<leaf>` under the first of `$XDG_STATE_HOME`, `/var/lib` for root, and
/// `$HOME/.local/state`: persistent and private to one user. `None` when neither variable
/// is set for a user other than root.
pub(crate) fn default_state_dir(leaf: &str) -> Option<PathBuf> {
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|dir| !dir.is_empty()) {
        return Some(PathBuf::from(state).join("idgen").join(leaf));
    }
    if effective_uid() == Some(0) {
        return Some(PathBuf::from("/var/lib/idgen").join(leaf));
    }
    let home = std::env::var_os("HOME").filter(|dir| !dir.is_empty())?;
    Some(PathBuf::from(home).join(".local/state/idgen").join(leaf))
}

/// Where idgen kept its leases before the default moved: numbers held there by a running
/// older idgen must not be taken again from the new default.
pub fn legacy_lease_dir() -> PathBuf {
    std::env::temp_dir().join("idgen-leases")
}

/// The effective user ID, from `/proc/self/status` (Linux); `None` elsewhere.
fn effective_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

impl FileStore {
    pub(super) fn check_dir(&self) -> Result<(), Error> {
        match fs::metadata(&self.dir) {
            Ok(metadata) if metadata.is_dir() => self.check_writers(&self.dir, &metadata),
            Ok(_) => Err(Error::LeaseConfig {
                reason: format!("{} is not a directory", self.dir.display()),
            }),
            Err(error) => Err(io_error(&self.dir, "open the lease directory", &error)),
        }
    }

    /// Refuses a file or directory that others may write (and its group, unless allowed).
    #[cfg(unix)]
    pub(super) fn check_writers(&self, path: &Path, metadata: &fs::Metadata) -> Result<(), Error> {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode();
        let others = mode & 0o002 != 0;
        let group = mode & 0o020 != 0 && self.default;
        if !others && !group {
            return Ok(());
        }
        let who = if others { "any user" } else { "its group" };
        Err(Error::LeaseConfig {
            reason: format!(
                "{} is writable by {who} (mode {:o}), who could forge, delete or hold lease \
                 records; make it private (chmod {} {})",
                path.display(),
                mode & 0o7777,
                if others && !self.default {
                    "o-w"
                } else {
                    "go-w"
                },
                path.display()
            ),
        })
    }

    #[cfg(not(unix))]
    pub(super) fn check_writers(
        &self,
        _path: &Path,
        _metadata: &fs::Metadata,
    ) -> Result<(), Error> {
        Ok(())
    }

    /// Record and roster files: readable and writable by the owner, and by the group when
    /// the directory is shared with it.
    #[cfg(unix)]
    pub(super) fn make_private(&self, path: &Path, file: &File) -> Result<(), Error> {
        use std::os::unix::fs::PermissionsExt;
        let shared = fs::metadata(&self.dir)
            .map(|metadata| metadata.permissions().mode() & 0o020 != 0)
            .unwrap_or(false);
        let mode = if shared { 0o660 } else { 0o600 };
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|error| io_error(path, "set the permissions of", &error))
    }

    #[cfg(not(unix))]
    pub(super) fn make_private(&self, _path: &Path, _file: &File) -> Result<(), Error> {
        Ok(())
    }
}

/// Creates `dir` as a store with an empty roster, all at once: the roster is written in a
/// sibling directory that is then renamed into place. Losing the race to another creator
/// is fine: that one wrote a whole store.
pub(super) fn create_store(dir: &Path) -> Result<(), Error> {
    let parent = match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // The parents as `create_dir_all` makes them, unlike the block store's (each private,
    // each `fsync`ed): only the store itself must be private, and what it holds is made
    // durable by the rename below.
    fs::create_dir_all(parent).map_err(|error| io_error(parent, "create", &error))?;
    let name = dir.file_name().ok_or_else(|| Error::LeaseConfig {
        reason: format!("{} does not name a directory", dir.display()),
    })?;
    // Unique to this call: other threads and processes may be creating the same store.
    let thread = format!("{:?}", std::thread::current().id());
    let staging = parent.join(format!(
        ".{}.creating-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        thread.trim_start_matches("ThreadId(").trim_end_matches(')')
    ));
    let _ = fs::remove_dir_all(&staging);
    private_dir(&staging).map_err(|error| io_error(&staging, "create", &error))?;
    let roster = staging.join(ROSTER);
    let written = private_file(&roster)
        .and_then(|mut file| {
            file.write_all(Roster::HEADER.as_bytes())?;
            file.sync_all()
        })
        .map_err(|error| io_error(&roster, "write", &error));
    let placed = written.and_then(|()| match fs::rename(&staging, dir) {
        Ok(()) => Ok(()),
        // Another process created it first.
        Err(_) if dir.is_dir() => Ok(()),
        Err(error) => Err(io_error(dir, "create", &error)),
    });
    let _ = fs::remove_dir_all(&staging);
    placed
}

/// Fails while a process holds a lock on any record in `dir`, the old default: an older
/// idgen is issuing as that number, and a store elsewhere would not know.
pub(super) fn check_legacy_dir(dir: &Path) -> Result<(), Error> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    let mut held = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_record = path
            .extension()
            .is_some_and(|extension| extension == "lease");
        let plain = entry.file_type().is_ok_and(|kind| kind.is_file());
        if !is_record || !plain {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if let Err(TryLockError::WouldBlock) = file.try_lock_shared() {
            held.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    if held.is_empty() {
        return Ok(());
    }
    held.sort();
    Err(Error::LeaseConfig {
        reason: format!(
            "an older idgen still holds worker numbers in the old default lease directory {} \
             ({}); stop it before starting with the new default, or pass --lease-dir {} to \
             share its numbers",
            dir.display(),
            held.join(", "),
            dir.display()
        ),
    })
}
