//! The roster (`roster.idgen`, and an older version's `roster`): every sequence the
//! directory has known, so that a sequence whose files are gone is an error, not a restart
//! at 1. Creating it, reading it, and listing a sequence before its record changes.

use std::fs::{self, OpenOptions};
use std::io::Write;

use super::record::Record;
use super::{FileStore, LEGACY_ROSTER, ROSTER, io_error, sync_dir};
use crate::Error;
use crate::blocks::SequenceName;
use crate::store_files::private_file;

impl FileStore {
    /// A sequence with no record: new if the roster has never known it, an error if it has
    /// (its files were deleted; starting again at 1 would hand out every value twice).
    pub(super) fn new_sequence(&self, sequence: &SequenceName) -> Result<Record, Error> {
        if self.roster_knows(sequence)? {
            return Err(Error::BlockStore {
                reason: format!(
                    "the files of sequence {sequence} in {} are gone; restore them (starting \
                     again at 1 would hand out its values twice)",
                    self.dir.display()
                ),
            });
        }
        Ok(Record {
            next: 1,
            serial: 0,
            size: 0,
        })
    }

    /// Whether either roster lists the sequence: the legacy one may name sequences an older
    /// process started after `roster.idgen` was created.
    pub(super) fn roster_knows(&self, sequence: &SequenceName) -> Result<bool, Error> {
        let listed = |text: Option<String>| text.is_some_and(|text| lists(&text, sequence));
        Ok(listed(self.read_roster()?) || listed(self.read_legacy_roster()?))
    }

    /// The roster's text; `None` if it is missing (deleted since the store was opened).
    fn read_roster(&self) -> Result<Option<String>, Error> {
        let path = self.dir.join(ROSTER);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&path, "read", &error)),
        }
    }

    /// The legacy roster's text; `None` if there is none, or if `roster` is the directory of
    /// the sequence of that name.
    fn read_legacy_roster(&self) -> Result<Option<String>, Error> {
        let path = self.dir.join(LEGACY_ROSTER);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory
                ) =>
            {
                Ok(None)
            }
            Err(error) => Err(io_error(&path, "read", &error)),
        }
    }

    /// Creates the roster if it is missing, with what a legacy roster lists: written aside,
    /// `fsync`ed, then linked into place. Another process that placed one first wins.
    pub(super) fn create_roster(&self) -> Result<(), Error> {
        let roster = self.dir.join(ROSTER);
        match fs::symlink_metadata(&roster) {
            Ok(_) => return Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(io_error(&roster, "inspect", &error)),
        }
        let mut carried_over = self.read_legacy_roster()?.unwrap_or_default();
        // A roster deleted by hand: every sequence whose files are still here is known
        // again, so losing its files later is an error, not a restart at 1.
        if !carried_over.is_empty() && !carried_over.ends_with('\n') {
            carried_over.push('\n');
        }
        for name in self.sequences_on_disk()? {
            carried_over.push_str(&name);
            carried_over.push('\n');
        }
        static STAGED: crate::sync::AtomicU64 = crate::sync::AtomicU64::new(0);
        // Unique to this call among live processes: several threads and processes may be
        // opening the store at once. The dots keep it clear of every sequence name.
        let staging = self.dir.join(format!(
            "{ROSTER}.{}-{}.writing",
            std::process::id(),
            STAGED.fetch_add(1, crate::sync::Ordering::Relaxed)
        ));
        // One of this name was left by a crashed process with the same ID, maybe linked as a
        // roster already: unlinked, never truncated, so that a roster keeps its names.
        match fs::remove_file(&staging) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(io_error(&staging, "remove", &error)),
        }
        let placed = private_file(&staging)
            .and_then(|mut file| {
                file.write_all(carried_over.as_bytes())?;
                file.sync_all()
            })
            .map_err(|error| io_error(&staging, "write", &error))
            .and_then(|()| match fs::hard_link(&staging, &roster) {
                Ok(()) => Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(error) => Err(io_error(&roster, "create", &error)),
            });
        // A staging file left behind costs nothing: no sequence or roster has its name.
        let _ = fs::remove_file(&staging);
        placed?;
        sync_dir(&self.dir)
    }

    /// The sequences whose directory holds a record or a copy of one.
    fn sequences_on_disk(&self) -> Result<Vec<String>, Error> {
        let entries =
            fs::read_dir(&self.dir).map_err(|error| io_error(&self.dir, "list", &error))?;
        let mut names = Vec::new();
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            // A copy is made empty before the first record is written: an empty one alone
            // is a sequence that never granted anything.
            let has_record = ["next", "copy"].iter().any(|file| {
                fs::symlink_metadata(entry.path().join(file))
                    .is_ok_and(|metadata| metadata.is_file() && metadata.len() > 0)
            });
            if is_dir && has_record && SequenceName::new(&name).is_ok() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Adds the sequence to the roster unless this store has seen it there. Called before
    /// a record is changed (after a new sequence's first record is durable): a failure
    /// then grants nothing, and a name on the roster never lacks files. One append of a
    /// short line, after a newline if a crash cut the last one: whole even when several
    /// processes append.
    pub(super) fn enrol(&self, sequence: &SequenceName) -> Result<(), Error> {
        let mut enrolled = self
            .enrolled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if enrolled.contains(sequence) {
            return Ok(());
        }
        // Only this roster counts here: a name on the legacy one alone goes on this one too,
        // so that it is complete for sequences this version has served.
        let text = self.read_roster()?;
        if !text.as_deref().is_some_and(|text| lists(text, sequence)) {
            let roster = self.dir.join(ROSTER);
            let cut = text.is_some_and(|text| !text.is_empty() && !text.ends_with('\n'));
            let line = if cut {
                format!("\n{sequence}\n")
            } else {
                format!("{sequence}\n")
            };
            let open = || OpenOptions::new().append(true).open(&roster);
            let file = match open() {
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    self.create_roster()?;
                    open()
                }
                opened => opened,
            };
            file.and_then(|mut file| {
                file.write_all(line.as_bytes())?;
                file.sync_all()
            })
            .map_err(|error| io_error(&roster, "write", &error))?;
        }
        enrolled.insert(sequence.clone());
        Ok(())
    }
}

/// Whether a roster's text lists the sequence (a last line without its newline, cut by a
/// crash, does not count).
fn lists(roster: &str, sequence: &SequenceName) -> bool {
    roster
        .split_inclusive('\n')
        .any(|line| line.strip_suffix('\n') == Some(sequence.as_str()))
}
