//! Opening and initialising a store, and reading its roster, which every operation checks
//! first.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::dir::{check_legacy_dir, create_store, default_lease_dir, legacy_lease_dir};
use super::roster::Roster;
use super::{
    FILE_STORE_DEFAULT_TTL, FILE_STORE_MAX_TTL, FileStore, ROSTER, io_error, not_a_plain_file,
};
use crate::Error;
use crate::store_files::private_file;

impl FileStore {
    /// The store in `dir`, with [`FILE_STORE_DEFAULT_TTL`].
    ///
    /// When `dir` does not exist, this call creates it with its roster (atomically: another
    /// process opening it at the same moment sees either nothing or a whole store). An
    /// existing directory must hold a roster: otherwise it fails with
    /// [`Error::LeaseStoreUninitialised`], which says what to run.
    ///
    /// A directory (or a record in it) writable by users other than its owner and group is
    /// refused: anyone could forge, delete or hold its records. A directory shared by one
    /// group (`0770`) is accepted, for services under different users.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileStore, Error> {
        FileStore::open_with(dir.as_ref(), false)
    }

    /// The store in [`default_lease_dir`], created private (`0700`) if missing. Besides what
    /// [`FileStore::open`] refuses, this refuses a directory writable by its group, and a
    /// symbolic link in place of the directory. It also refuses to start while an older
    /// idgen still holds numbers in the old default, [`legacy_lease_dir`]: the new store
    /// does not know of them.
    pub fn open_default() -> Result<FileStore, Error> {
        let dir = default_lease_dir()?;
        check_legacy_dir(&legacy_lease_dir())?;
        if let Ok(metadata) = fs::symlink_metadata(&dir)
            && metadata.file_type().is_symlink()
        {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "the default lease directory {} is a symbolic link; give the directory \
                     itself (--lease-dir)",
                    dir.display()
                ),
            });
        }
        FileStore::open_with(&dir, true)
    }

    fn open_with(dir: &Path, default: bool) -> Result<FileStore, Error> {
        if fs::symlink_metadata(dir).is_err() {
            create_store(dir)?;
        }
        let store = FileStore {
            dir: dir.to_path_buf(),
            ttl: FILE_STORE_DEFAULT_TTL,
            default,
        };
        store.check_dir()?;
        store.roster()?;
        Ok(store)
    }

    /// Initialises the store in `dir` for `idgen leases init`: creates the directory if
    /// missing, and writes a roster if there is none or it cannot be trusted. A roster
    /// written here lists every number as handed out before, since nothing tells which
    /// were: a number whose record is missing then waits an outage horizon once. Returns whether a
    /// roster was written (`false`: the store was initialised already).
    pub fn init(dir: impl AsRef<Path>) -> Result<bool, Error> {
        let dir = dir.as_ref();
        if fs::symlink_metadata(dir).is_err() {
            create_store(dir)?;
            return Ok(true);
        }
        let store = FileStore {
            dir: dir.to_path_buf(),
            ttl: FILE_STORE_DEFAULT_TTL,
            default: false,
        };
        store.check_dir()?;
        if store.roster().is_ok() {
            return Ok(false);
        }
        let path = dir.join(ROSTER);
        // A roster that is there but cannot be trusted is replaced, never written through.
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(io_error(&path, "remove", &error)),
        }
        let mut file = private_file(&path).map_err(|error| io_error(&path, "create", &error))?;
        store.make_private(&path, &file)?;
        file.write_all(Roster::EVERY_NUMBER.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|error| io_error(&path, "write", &error))?;
        Ok(true)
    }

    /// Sets the TTL: at least 100 ms, at most [`FILE_STORE_MAX_TTL`].
    pub fn with_ttl(mut self, ttl: Duration) -> Result<FileStore, Error> {
        if ttl < Duration::from_millis(100) || ttl > FILE_STORE_MAX_TTL {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "a file store TTL of {ttl:?} is outside 100 ms to {FILE_STORE_MAX_TTL:?}"
                ),
            });
        }
        self.ttl = ttl;
        Ok(self)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The record file of a worker number.
    pub fn record_path(&self, datacenter: u64, worker: u64) -> PathBuf {
        self.dir
            .join(format!("dc{datacenter}-worker{worker}.lease"))
    }

    pub(super) fn uninitialised(&self, why: String) -> Error {
        Error::LeaseStoreUninitialised {
            store: self.dir.display().to_string(),
            why,
            fix: format!(
                "if no idgen process is using it, run: idgen leases init --lease-dir {}",
                self.dir.display()
            ),
        }
    }

    /// Reads the roster.
    pub(super) fn roster(&self) -> Result<Roster, Error> {
        let path = self.dir.join(ROSTER);
        match fs::symlink_metadata(&path) {
            Ok(metadata) if !metadata.file_type().is_file() => {
                return Err(not_a_plain_file(&path));
            }
            Ok(metadata) => self.check_writers(&path, &metadata)?,
            Err(_) => {}
        }
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.uninitialised(format!(
                    "{} is missing: the directory is new, was emptied, or its files were deleted",
                    path.display()
                )));
            }
            Err(error) => return Err(io_error(&path, "read", &error)),
        };
        Roster::parse(&text)
            .ok_or_else(|| self.uninitialised(format!("{} is not an idgen roster", path.display())))
    }
}
