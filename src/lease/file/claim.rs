//! A held number ([`Claim`]): renewing its mark in place, and releasing it.

use std::fmt;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

use super::identity::Liveness;
use super::io_error;
use super::record::Record;
use crate::Error;
use crate::lease::Claim;
use crate::store_files::FileIdentity;

/// A number this process holds: its record file open and locked, and its liveness lock.
pub(super) struct FileClaim {
    pub(super) datacenter: u64,
    pub(super) worker: u64,
    pub(super) path: PathBuf,
    /// Open, and locked, until released.
    pub(super) file: Option<File>,
    pub(super) identity: FileIdentity,
    /// Bound until released or lost.
    pub(super) liveness: Option<Liveness>,
    pub(super) previous: Option<u64>,
    pub(super) unknown: bool,
    /// The holder's name, written into the record for the fleet view.
    pub(super) holder: String,
}

impl FileClaim {
    /// The claim is lost, but its liveness lock stays bound until the claim is dropped:
    /// the keeper cuts the generator's ceiling first, so no successor can take the number
    /// while a call that read the old ceiling may still issue on it.
    fn lost(&self) -> Error {
        Error::LeaseLost {
            datacenter: self.datacenter,
            worker: self.worker,
        }
    }

    /// Whether the path still names the file we hold the lock on.
    fn still_ours(&self) -> std::io::Result<bool> {
        self.identity.matches(FileIdentity::of_path(&self.path))
    }

    fn write_mark(&self, file: &File, mark_unix_ms: u64) -> std::io::Result<()> {
        let record = Record::format(
            self.datacenter,
            self.worker,
            self.identity,
            mark_unix_ms,
            std::process::id(),
            &self.holder,
        );
        let mut file = file;
        file.seek(SeekFrom::Start(0))?;
        // One short write: a crash leaves the old record, the new one, or a torn one that
        // fails its checksum, never a wrong mark that looks right.
        file.write_all(record.as_bytes())?;
        file.set_len(record.len() as u64)?;
        file.sync_data()
    }
}

impl Claim for FileClaim {
    fn datacenter(&self) -> u64 {
        self.datacenter
    }

    fn worker(&self) -> u64 {
        self.worker
    }

    fn previous_mark_unix_ms(&self) -> Option<u64> {
        self.previous
    }

    fn previous_mark_unknown(&self) -> bool {
        self.unknown
    }

    fn renew(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        if self.file.is_none() {
            return Err(self.lost());
        }
        match self.still_ours() {
            Ok(true) => {}
            Ok(false) => return Err(self.lost()),
            Err(error) => return Err(io_error(&self.path, "check", &error)),
        }
        let file = self.file.as_ref().expect("checked above");
        self.write_mark(file, mark_unix_ms)
            .map_err(|error| io_error(&self.path, "write", &error))
    }

    fn release(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let written = match self.still_ours() {
            Ok(true) => self
                .write_mark(&file, mark_unix_ms)
                .map_err(|error| io_error(&self.path, "write", &error)),
            Ok(false) => Ok(()),
            Err(error) => Err(io_error(&self.path, "check", &error)),
        };
        // Closing the file drops the lock, whatever happened above; the liveness lock goes
        // last, once the mark is on disk.
        drop(file);
        self.liveness = None;
        written
    }
}

impl fmt::Debug for FileClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileClaim")
            .field("path", &self.path)
            .field("held", &self.file.is_some())
            .field("previous_mark_unix_ms", &self.previous)
            .field("previous_mark_unknown", &self.unknown)
            .finish()
    }
}
