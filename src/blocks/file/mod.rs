//! The embedded block store: one directory on one host, a directory per sequence.
//!
//! `<name>/next` holds the sequence's record (next value, a serial counting every change,
//! the last block's size, a checksum), replaced atomically (written to a temporary file,
//! `fsync`ed, renamed over, and the directory `fsync`ed) before a grant is returned.
//! `<name>/` itself is what processes lock (`flock`, exclusive) around a change: a lock on
//! the directory that holds the record cannot be sidestepped by deleting a lock file.
//! `<name>/copy` keeps a second copy of the record, written after the first: a sequence
//! continues from the copy with the higher serial, so deleting either file loses nothing.
//!
//! `roster.idgen` lists every sequence the directory has known, so deleting a sequence's
//! files is an error rather than a restart at 1. Its name has a dot, which no sequence name
//! has, so no request can reach it. `FileStore::open` creates it when it is missing, whole:
//! written aside, `fsync`ed, then linked into place (a link, unlike a rename, never replaces
//! a roster another process placed first and may have appended to since). A sequence goes
//! on the roster once its first record (next 1, nothing granted) is durable and before
//! its first grant, and a process that has not yet seen a sequence listed lists it before
//! changing its record: a listed name never lacks files, and a failing roster grants
//! nothing, so retrying burns no block.
//!
//! Older versions kept the roster at `roster`, a name a sequence can have: the sequence
//! `roster` took its place and every grant failed (issue 24). When `roster.idgen` is
//! created, a legacy `roster` file is copied into it; the file stays, and is still read,
//! because an older process beside this one goes on appending to it. A `roster` that is a
//! directory is the sequence of that name; while `roster` is the legacy file, that one
//! name is refused. An older process sharing the directory reads and writes only
//! `roster`: it does not know the sequences only `roster.idgen` lists (deleting their files
//! restarts them at 1 there), and once the sequence `roster` exists its grants fail ("Is a
//! directory"; all of them once it restarts), each burning a block of an existing sequence.
//!
//! Deleting the store's directory restarts every sequence; the default directory is
//! persistent and private for that reason (a temp dir is emptied at reboot).
//!
//! This file holds the store, [`FileStore`]: its files' names, locking a sequence, reading
//! and replacing its record, and [`BlockStore`] for it. Beside it, each using only this
//! file, the one above it, the blocks types (`crate::blocks`) and `crate::store_files`
//! (helpers shared with the lease store):
//!
//! - `record.rs`: the record's format. Plain text in, plain text out: no files.
//! - `roster.rs`: the roster: creating it, reading it, and listing a sequence in it.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{BlockStore, Grant, SequenceName, grant_from, has_values_to_give_back};
use crate::Error;
use crate::store_files::{self, FileIdentity, io_reason, private_dir};

mod record;
mod roster;

use record::Record;
#[cfg(fuzzing)]
pub(crate) use record::fuzz_read;

/// The roster's file name: with a dot, so that no sequence can have it.
// A roster of its own, not the lease store's (a header, then `dc<D>-worker<W>` lines, a torn
// line read as every number): each is read by older versions of its own store, and a torn
// line means something else here (a name not yet listed).
const ROSTER: &str = "roster.idgen";

/// Where older versions kept the roster, a name that is also a sequence's.
const LEGACY_ROSTER: &str = "roster";

/// How often a lock is taken again when the directory was replaced under us before giving up.
const LOCK_ATTEMPTS: u32 = 100;

/// How long a grant waits by default for another holder of a sequence's lock before it
/// fails (a stopped or stuck process must not hang every other one, nor their `close`).
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The store in [`default_blocks_dir`] is `$XDG_STATE_HOME/idgen/blocks`, then
/// `/var/lib/idgen/blocks` for root, then `$HOME/.local/state/idgen/blocks`: persistent and
/// private to one user, like the lease store's.
pub fn default_blocks_dir() -> Result<PathBuf, Error> {
    crate::lease::default_state_dir("blocks").ok_or_else(|| Error::BlockStore {
        reason: "no default blocks directory: neither XDG_STATE_HOME nor HOME is set; give one \
                 explicitly"
            .to_string(),
    })
}

/// Blocks of named sequences from files in one directory, for every process of one host.
///
/// ```
/// use idgen::blocks::{BlockStore, FileStore, SequenceName};
/// # let dir = std::env::temp_dir().join(format!("idgen-doc-blocks-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let orders = SequenceName::new("orders")?;
/// let first = store.grant(&orders, 1_000)?;
/// assert_eq!((first.first, first.end), (1, 1_001));
/// let second = store.grant(&orders, 1_000)?;
/// assert_eq!(second.first, 1_001);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idgen::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    lock_timeout: Duration,
    /// Sequences this store has seen listed in the roster (so a grant reads it once).
    enrolled: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<SequenceName>>>,
}

impl FileStore {
    /// The store in `dir`, created private (`0700`) if missing, with its roster.
    pub fn open(dir: impl Into<PathBuf>) -> Result<FileStore, Error> {
        let dir = dir.into();
        match fs::symlink_metadata(&dir) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(Error::BlockStore {
                    reason: format!("{} is not a directory", dir.display()),
                });
            }
            Err(_) => create_private_dir(&dir)?,
        }
        let store = FileStore {
            dir,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            enrolled: Default::default(),
        };
        store.create_roster()?;
        Ok(store)
    }

    /// How long a grant waits for another process holding the sequence's lock (default
    /// 10 s) before it fails with [`Error::BlockStore`].
    pub fn with_lock_timeout(mut self, timeout: Duration) -> FileStore {
        self.lock_timeout = timeout;
        self
    }

    /// The store in [`default_blocks_dir`].
    pub fn open_default() -> Result<FileStore, Error> {
        FileStore::open(default_blocks_dir()?)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Locks the sequence for this process (waiting for any other holder) and reads where it
    /// stands: the copy with the higher serial (on a tie, the higher next value), or a new
    /// sequence's start.
    fn lock(&self, sequence: &SequenceName) -> Result<Locked, Error> {
        let dir = self.dir.join(sequence.as_str());
        for _ in 0..LOCK_ATTEMPTS {
            if !dir.is_dir() {
                if sequence.as_str() == LEGACY_ROSTER && dir.is_file() {
                    return Err(Error::BlockStore {
                        reason: format!(
                            "the sequence roster cannot be kept in {}: {} is an older idgen's \
                             roster; once no older idgen uses the directory, append it to \
                             {ROSTER} and delete it",
                            self.dir.display(),
                            dir.display()
                        ),
                    });
                }
                create_private_dir(&dir)?;
            }
            let lock = File::open(&dir).map_err(|error| io_error(&dir, "open", &error))?;
            lock_within(&lock, &dir, self.lock_timeout)?;
            // Locked a directory that was moved or replaced while we waited: the path now
            // names another, which others lock. Lock that one.
            if !still_at_path(&lock, &dir)? {
                continue;
            }
            let record_path = dir.join("next");
            let in_record = match File::open(&record_path) {
                Ok(mut file) => Some(read_record(&mut file, &record_path)?),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => return Err(io_error(&record_path, "open", &error)),
            };
            let copy_path = dir.join("copy");
            let mut options = OpenOptions::new();
            options.read(true).write(true).create(true).truncate(false);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut copy = options
                .open(&copy_path)
                .map_err(|error| io_error(&copy_path, "open", &error))?;
            // The copy is rewritten in place: a crash or a full disk can leave it torn or
            // empty. The record, replaced atomically and written first, then stands alone.
            let in_copy = match read_copy(&mut copy, &copy_path) {
                Ok(record) => record,
                Err(_) if in_record.is_some() => None,
                Err(error) => return Err(error),
            };
            let record = match (in_copy, in_record) {
                // The later change wins; on a tie (a restored copy), the higher next value.
                (Some(a), Some(b)) => Some(std::cmp::max_by_key(a, b, |r| (r.serial, r.next))),
                (a, b) => a.or(b),
            };
            let (record, new) = match record {
                Some(record) => (record, false),
                None => (self.new_sequence(sequence)?, true),
            };
            return Ok(Locked {
                _lock: lock,
                dir,
                copy,
                copy_path,
                record,
                new,
            });
        }
        Err(Error::BlockStore {
            reason: format!(
                "{} was replaced {LOCK_ATTEMPTS} times while being locked; is something \
                 moving the store's directories?",
                dir.display()
            ),
        })
    }

    /// Makes `record` the sequence's record, durably, in both copies.
    fn store(&self, locked: &mut Locked, record: Record) -> Result<(), Error> {
        let text = record.text();
        let path = locked.dir.join("next");
        let staging = locked.dir.join("next.writing");
        File::create(&staging)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())?;
                file.sync_all()
            })
            .map_err(|error| io_error(&staging, "write", &error))?;
        fs::rename(&staging, &path).map_err(|error| io_error(&path, "replace", &error))?;
        sync_dir(&locked.dir)?;
        // The second copy, in place: fixed width, one write. The record above holds it
        // already; a torn copy fails its checksum and the record is used.
        let copy = &mut locked.copy;
        copy.seek(SeekFrom::Start(0))
            .and_then(|_| copy.write_all(text.as_bytes()))
            .and_then(|()| copy.sync_all())
            .map_err(|error| io_error(&locked.copy_path, "write", &error))?;
        locked.record = record;
        locked.new = false;
        Ok(())
    }
}

/// A sequence locked by this process; the lock goes with the directory's handle.
struct Locked {
    _lock: File,
    dir: PathBuf,
    copy: File,
    copy_path: PathBuf,
    record: Record,
    /// No record existed yet.
    new: bool,
}

impl BlockStore for FileStore {
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error> {
        let mut locked = self.lock(sequence)?;
        if locked.new {
            let start = locked.record;
            self.store(&mut locked, start)?;
        }
        self.enrol(sequence)?;
        let current = locked.record;
        let serial = current.serial + 1;
        let grant = grant_from(sequence, current.next, size, serial)?;
        let record = Record {
            next: grant.end,
            serial,
            size: grant.len(),
        };
        self.store(&mut locked, record)?;
        Ok(grant)
    }

    fn give_back(
        &self,
        sequence: &SequenceName,
        grant: &Grant,
        unused_from: u64,
    ) -> Result<bool, Error> {
        if !has_values_to_give_back(grant, unused_from)? {
            return Ok(false);
        }
        let mut locked = self.lock(sequence)?;
        let current = locked.record;
        if current.serial != grant.serial || current.next != grant.end {
            return Ok(false);
        }
        let record = Record {
            next: unused_from,
            serial: current.serial + 1,
            size: current.size,
        };
        self.enrol(sequence)?;
        self.store(&mut locked, record)?;
        Ok(true)
    }
}

/// Takes `file`'s exclusive lock, waiting at most `timeout` for another holder.
fn lock_within(file: &File, path: &Path, timeout: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(50);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::BlockStore {
                    reason: format!(
                        "{} has been locked by another process for more than {timeout:?}",
                        path.display()
                    ),
                });
            }
            Err(std::fs::TryLockError::Error(error)) => {
                return Err(io_error(path, "lock", &error));
            }
        }
    }
}

/// Whether `file` is still what `path` names (it was not deleted or replaced).
fn still_at_path(file: &File, path: &Path) -> Result<bool, Error> {
    // Asked of the handle even outside Unix, where the identities compare equal anyway: a
    // handle that cannot be inspected is an error there too.
    let held = file
        .metadata()
        .map_err(|error| io_error(path, "inspect", &error))?;
    // Through links, unlike the lease store's check: the directory was opened, and locked,
    // through the path as it is, so a sequence directory reached by a link is the one
    // every process locks.
    FileIdentity::from(&held)
        .matches(FileIdentity::of_target(path))
        .map_err(|error| io_error(path, "inspect", &error))
}

/// The copy a `copy` file holds; `None` for an empty one (created, never written).
fn read_copy(file: &mut File, path: &Path) -> Result<Option<Record>, Error> {
    let len = file
        .metadata()
        .map_err(|error| io_error(path, "inspect", &error))?
        .len();
    if len == 0 {
        return Ok(None);
    }
    read_record(file, path).map(Some)
}

/// The record a file holds. A record is never empty (it is written whole, then renamed
/// into place): an empty one is damage like any other.
fn read_record(file: &mut File, path: &Path) -> Result<Record, Error> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut text))
        .map_err(|error| io_error(path, "read", &error))?;
    Record::parse(&text).ok_or_else(|| Error::BlockStore {
        reason: format!(
            "{} is not a block record written by idgen (or it is damaged); refusing to guess \
             where the sequence stands",
            path.display()
        ),
    })
}

/// Creates `dir` (and its parents) private, and makes the new entries durable.
fn create_private_dir(dir: &Path) -> Result<(), Error> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        create_private_dir(parent)?;
    }
    match private_dir(dir) {
        Ok(()) => {}
        // Another process created it first.
        Err(_) if dir.is_dir() => return Ok(()),
        Err(error) => return Err(io_error(dir, "create", &error)),
    }
    match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    store_files::sync_dir(dir).map_err(|error| io_error(dir, "sync", &error))
}

// The block store's own variant, not the lease store's: a caller, and the message ("block
// store: ...") can tell which store failed.
fn io_error(path: &Path, action: &str, error: &std::io::Error) -> Error {
    Error::BlockStore {
        reason: io_reason(path, action, error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::MAX_VALUE;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("idgen-blocks-unit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_end_of_the_i64_range_is_a_clear_error() {
        let dir = temp_dir("end");
        let store = FileStore::open(&dir).unwrap();
        let orders = SequenceName::new("orders").unwrap();
        store.grant(&orders, 1).unwrap();
        let near_end = MAX_VALUE - 2;
        let record = Record {
            next: near_end,
            serial: 10,
            size: 1,
        };
        fs::write(dir.join("orders/next"), record.text()).unwrap();
        let last = store.grant(&orders, 1_000).unwrap();
        assert_eq!((last.first, last.end), (near_end, MAX_VALUE + 1));
        assert_eq!(
            store.grant(&orders, 1),
            Err(Error::SequenceExhausted {
                sequence: "orders".into()
            })
        );
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_grant_waits_for_the_sequence_lock_at_most_the_lock_timeout() {
        let dir = temp_dir("lock-timeout");
        let store = FileStore::open(&dir)
            .unwrap()
            .with_lock_timeout(Duration::from_millis(100));
        let orders = SequenceName::new("orders").unwrap();
        store.grant(&orders, 10).unwrap();
        let held = File::open(dir.join("orders")).unwrap();
        held.lock().unwrap();
        let started = Instant::now();
        match store.grant(&orders, 10) {
            Err(Error::BlockStore { reason }) => assert!(reason.contains("locked"), "{reason}"),
            other => panic!("expected a lock timeout, got {other:?}"),
        }
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(2));
        drop(held);
        assert_eq!(store.grant(&orders, 10).unwrap().first, 11);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_torn_copy_gives_way_to_the_record_and_an_empty_record_is_damage() {
        let dir = temp_dir("torn-copy");
        let store = FileStore::open(&dir).unwrap();
        let orders = SequenceName::new("orders").unwrap();
        let first = store.grant(&orders, 10).unwrap();
        let text = fs::read(dir.join("orders/copy")).unwrap();
        fs::write(dir.join("orders/copy"), &text[..text.len() / 2]).unwrap();
        assert_eq!(store.grant(&orders, 10).unwrap().first, first.end);
        // A damaged record is refused, whatever the copy says; so is an empty one.
        for damage in [&b"idgen-blocks v2\nnext=1\n"[..], b""] {
            fs::write(dir.join("orders/next"), damage).unwrap();
            assert!(matches!(
                store.grant(&orders, 10),
                Err(Error::BlockStore { .. })
            ));
        }
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_failed_first_grant_leaves_the_name_off_the_roster() {
        let dir = temp_dir("first-fails");
        let store = FileStore::open(&dir).unwrap();
        let orders = SequenceName::new("orders").unwrap();
        // The staging path is a directory: the first write fails.
        fs::create_dir_all(dir.join("orders/next.writing")).unwrap();
        assert!(store.grant(&orders, 10).is_err());
        fs::remove_dir(dir.join("orders/next.writing")).unwrap();
        assert_eq!(store.grant(&orders, 10).unwrap().first, 1);
        // Known now: the sequence's directory gone is an error.
        fs::remove_dir_all(dir.join("orders")).unwrap();
        assert!(store.grant(&orders, 10).is_err());
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_name_the_roster_missed_is_added_by_the_next_grant() {
        // A crash between a first record and its roster line leaves the sequence with
        // files but off the roster: the next grant, in any process, puts it on.
        let dir = temp_dir("roster-missed");
        let orders = SequenceName::new("orders").unwrap();
        FileStore::open(&dir).unwrap().grant(&orders, 10).unwrap();
        fs::write(dir.join(ROSTER), "").unwrap();
        assert_eq!(
            FileStore::open(&dir)
                .unwrap()
                .grant(&orders, 10)
                .unwrap()
                .first,
            11
        );
        assert_eq!(fs::read_to_string(dir.join(ROSTER)).unwrap(), "orders\n");
        fs::remove_dir_all(dir.join("orders")).unwrap();
        assert!(FileStore::open(&dir).unwrap().grant(&orders, 10).is_err());
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_roster_line_cut_by_a_crash_is_not_a_name_and_the_next_starts_on_its_own_line() {
        let dir = temp_dir("roster-cut");
        let store = FileStore::open(&dir).unwrap();
        fs::write(dir.join(ROSTER), "ord").unwrap();
        let invoices = SequenceName::new("invoices").unwrap();
        store.grant(&invoices, 1).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join(ROSTER)).unwrap(),
            "ord\ninvoices\n"
        );
        assert!(
            !store
                .roster_knows(&SequenceName::new("ordinvoices").unwrap())
                .unwrap()
        );
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_copy_with_the_higher_serial_wins_even_when_its_next_is_lower() {
        // A give-back moved next down in the record; a crash left the lock file's copy at
        // the older, higher next. The give-back stands.
        let dir = temp_dir("serial");
        let store = FileStore::open(&dir).unwrap();
        let orders = SequenceName::new("orders").unwrap();
        let grant = store.grant(&orders, 100).unwrap();
        let older = fs::read(dir.join("orders/copy")).unwrap();
        assert!(store.give_back(&orders, &grant, 41).unwrap());
        fs::write(dir.join("orders/copy"), older).unwrap();
        assert_eq!(store.grant(&orders, 1).unwrap().first, 41);
        fs::remove_dir_all(&dir).ok();
    }
}
