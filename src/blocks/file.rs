//! The embedded block store: one directory on one host, two files per sequence.
//!
//! `<name>.next` holds the sequence's record (next value, a serial counting every change, the
//! last block's size, a checksum), replaced atomically (written to a temporary file,
//! `fsync`ed, renamed over, and the directory `fsync`ed) before a grant is returned.
//! `<name>.lock` is what processes lock (`flock`, exclusive) around a change, and it keeps a
//! second copy of the record, written after the first: a sequence continues from the copy
//! with the higher serial, so deleting either file loses nothing. `roster` lists every
//! sequence the directory has known, so deleting both files of one is an error rather than
//! a restart at 1. Deleting the directory restarts every sequence; the default directory is
//! persistent and private for that reason (a temp dir is emptied at reboot).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{BlockStore, Grant, MAX_VALUE, SequenceName, check_give_back, grant_from};
use crate::error::Error;

/// First line of every record this store writes.
const HEADER: &str = "idgen-blocks v2";

/// The roster's file name (no sequence file has a name without a dot).
const ROSTER: &str = "roster";

/// How often a lock is taken again when its file was replaced under us before giving up.
const LOCK_ATTEMPTS: u32 = 100;

/// How long a grant waits for another holder of a sequence's lock before it fails (a
/// stopped or stuck process must not hang every other one, nor their `close`).
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

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
}

impl FileStore {
    /// The store in `dir`, created private (`0700`) if missing.
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
        Ok(FileStore { dir })
    }

    /// The store in [`default_blocks_dir`].
    pub fn open_default() -> Result<FileStore, Error> {
        FileStore::open(default_blocks_dir()?)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn record_path(&self, sequence: &SequenceName) -> PathBuf {
        self.dir.join(format!("{sequence}.next"))
    }

    /// Locks the sequence for this process (waiting for any other holder) and reads where it
    /// stands: the copy with the higher serial (on a tie, the higher next value), or a new
    /// sequence's start.
    fn lock(&self, sequence: &SequenceName) -> Result<Locked, Error> {
        let path = self.dir.join(format!("{sequence}.lock"));
        for _ in 0..LOCK_ATTEMPTS {
            let mut options = OpenOptions::new();
            options.read(true).write(true).create(true).truncate(false);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options
                .open(&path)
                .map_err(|error| io_error(&path, "open", &error))?;
            lock_within(&file, &path, LOCK_TIMEOUT)?;
            // A lock on a file that was deleted or replaced while we waited excludes nobody
            // who opens the path now: take the lock again on what the path names.
            if !still_at_path(&file, &path)? {
                continue;
            }
            let record_path = self.record_path(sequence);
            let in_record = match File::open(&record_path) {
                Ok(mut file) => read_record(&mut file, &record_path)?,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => return Err(io_error(&record_path, "open", &error)),
            };
            // The lock file's copy is rewritten in place: a crash or a full disk can leave
            // it torn. The record, replaced atomically and written first, then stands alone.
            let in_lock = match read_record(&mut file, &path) {
                Ok(record) => record,
                Err(_) if in_record.is_some() => None,
                Err(error) => return Err(error),
            };
            let record = match (in_lock, in_record) {
                // The later change wins; two writers that both thought they held the lock
                // (a lock file replaced under one) leave equal serials: the higher next.
                (Some(a), Some(b)) => Some(std::cmp::max_by_key(a, b, |r| (r.serial, r.next))),
                (a, b) => a.or(b),
            };
            let (record, new) = match record {
                Some(record) => (record, false),
                None => (self.new_sequence(sequence)?, true),
            };
            return Ok(Locked {
                file,
                path,
                record,
                new,
            });
        }
        Err(Error::BlockStore {
            reason: format!(
                "{} was replaced {LOCK_ATTEMPTS} times while being locked; is something \
                 deleting the store's files?",
                path.display()
            ),
        })
    }

    /// A sequence with no record: new if the roster has never known it, an error if it has
    /// (its files were deleted; starting again at 1 would hand out every value twice).
    fn new_sequence(&self, sequence: &SequenceName) -> Result<Record, Error> {
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

    /// Whether the roster lists the sequence (a last line without its newline, cut by a
    /// crash, does not count).
    fn roster_knows(&self, sequence: &SequenceName) -> Result<bool, Error> {
        let roster = self.dir.join(ROSTER);
        match fs::read_to_string(&roster) {
            Ok(text) => Ok(text
                .split_inclusive('\n')
                .any(|line| line.strip_suffix('\n') == Some(sequence.as_str()))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(io_error(&roster, "read", &error)),
        }
    }

    /// Adds the sequence to the roster, once its record is durable (so that a failed first
    /// grant leaves no name without files). One append of a short line, after a newline if
    /// a crash cut the last one: whole even when several processes append at once.
    fn enrol(&self, sequence: &SequenceName) -> Result<(), Error> {
        if self.roster_knows(sequence)? {
            return Ok(());
        }
        let roster = self.dir.join(ROSTER);
        let cut = fs::read(&roster).is_ok_and(|text| text.last().is_some_and(|&b| b != b'\n'));
        let line = if cut {
            format!("\n{sequence}\n")
        } else {
            format!("{sequence}\n")
        };
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&roster)
            .and_then(|mut file| {
                file.write_all(line.as_bytes())?;
                file.sync_all()
            })
            .map_err(|error| io_error(&roster, "write", &error))?;
        sync_dir(&self.dir)
    }

    /// Makes `record` the sequence's record, durably, in both copies.
    fn store(
        &self,
        sequence: &SequenceName,
        locked: &mut Locked,
        record: Record,
    ) -> Result<(), Error> {
        let text = record.text();
        let path = self.record_path(sequence);
        let staging = self.dir.join(format!("{sequence}.next.writing"));
        File::create(&staging)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())?;
                file.sync_all()
            })
            .map_err(|error| io_error(&staging, "write", &error))?;
        fs::rename(&staging, &path).map_err(|error| io_error(&path, "replace", &error))?;
        sync_dir(&self.dir)?;
        // The second copy, in place: fixed width, one write. The record above holds it
        // already; a torn copy fails its checksum and the record's copy is used.
        let file = &mut locked.file;
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(text.as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(|error| io_error(&locked.path, "write", &error))?;
        locked.record = record;
        if locked.new {
            self.enrol(sequence)?;
            locked.new = false;
        }
        // Had the lock file been replaced since we locked it, another process could have
        // locked the new one and read the record before our rename: our change is then
        // not ours alone, and its values are not used (a gap, never a duplicate).
        if !still_at_path(&locked.file, &locked.path)? {
            return Err(Error::BlockStore {
                reason: format!(
                    "{} was replaced during a change; the change is dropped",
                    locked.path.display()
                ),
            });
        }
        Ok(())
    }
}

/// A sequence locked by this process; the lock goes with the file.
struct Locked {
    file: File,
    path: PathBuf,
    record: Record,
    /// No record existed: the roster learns the name once the first one is durable.
    new: bool,
}

/// Where a sequence stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    /// The next value to grant.
    next: u64,
    /// How many grants and give-backs the sequence has seen.
    serial: u64,
    /// The size of the last block granted.
    size: u64,
}

impl Record {
    /// Fixed-width text with an FNV-1a checksum of everything before it.
    fn text(&self) -> String {
        let body = format!(
            "{HEADER}\nnext={:020}\nserial={:020}\nsize={:020}\n",
            self.next, self.serial, self.size
        );
        let check = fnv1a(body.as_bytes());
        format!("{body}check={check:016x}\n")
    }

    fn parse(text: &str) -> Option<Record> {
        let (body, check) = text.strip_suffix('\n')?.rsplit_once("check=")?;
        if check.len() != 16 || u64::from_str_radix(check, 16).ok()? != fnv1a(body.as_bytes()) {
            return None;
        }
        let mut lines = body.strip_prefix(HEADER)?.strip_prefix('\n')?.lines();
        let mut field = |name: &str| -> Option<u64> {
            let digits = lines.next()?.strip_prefix(name)?.strip_prefix('=')?;
            (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse().ok())?
        };
        let record = Record {
            next: field("next")?,
            serial: field("serial")?,
            size: field("size")?,
        };
        let sane = (1..=MAX_VALUE + 1).contains(&record.next) && record.serial <= MAX_VALUE;
        (lines.next().is_none() && sane).then_some(record)
    }
}

impl BlockStore for FileStore {
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error> {
        let mut locked = self.lock(sequence)?;
        let current = locked.record;
        let serial = current.serial + 1;
        let grant = grant_from(sequence, current.next, size, serial)?;
        let record = Record {
            next: grant.end,
            serial,
            size: grant.len(),
        };
        self.store(sequence, &mut locked, record)?;
        Ok(grant)
    }

    fn give_back(
        &self,
        sequence: &SequenceName,
        grant: &Grant,
        unused_from: u64,
    ) -> Result<bool, Error> {
        check_give_back(grant, unused_from)?;
        if unused_from == grant.end {
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
        self.store(sequence, &mut locked, record)?;
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
                        "{} has been locked by another process for more than {} s",
                        path.display(),
                        timeout.as_secs()
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
    let held = file
        .metadata()
        .map_err(|error| io_error(path, "inspect", &error))?;
    let named = match fs::metadata(path) {
        Ok(named) => named,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(io_error(path, "inspect", &error)),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(held.dev() == named.dev() && held.ino() == named.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = (held, named);
        Ok(true)
    }
}

/// The record a file holds; `None` for an empty file (a lock file never written).
fn read_record(file: &mut File, path: &Path) -> Result<Option<Record>, Error> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut text))
        .map_err(|error| io_error(path, "read", &error))?;
    if text.is_empty() {
        return Ok(None);
    }
    Record::parse(&text)
        .map(Some)
        .ok_or_else(|| Error::BlockStore {
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
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    match builder.create(dir) {
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
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| io_error(dir, "sync", &error))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn io_error(path: &Path, action: &str, error: &std::io::Error) -> Error {
    Error::BlockStore {
        reason: format!("could not {action} {}: {error}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("idgen-blocks-unit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_record_reads_back_and_any_damage_is_refused() {
        let record = Record {
            next: 1_001,
            serial: 7,
            size: 1_000,
        };
        let text = record.text();
        assert_eq!(Record::parse(&text), Some(record));
        // Every single-byte change and every truncation is refused.
        for at in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[at] ^= 0x01;
            if let Ok(changed) = String::from_utf8(bytes) {
                assert_eq!(Record::parse(&changed), None, "flipped at {at}");
            }
            assert_eq!(Record::parse(&text[..at]), None, "cut at {at}");
        }
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
        fs::write(dir.join("orders.next"), record.text()).unwrap();
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
    fn a_lock_file_replaced_during_a_change_drops_that_change() {
        // A holds the lock and is about to write; the lock file is replaced; B locks the
        // new file and grants from the record A has not replaced yet. A's change must not
        // count: its values are a gap, B's are B's alone.
        let dir = temp_dir("replaced-mid-change");
        let store = FileStore::open(&dir).unwrap();
        let orders = SequenceName::new("orders").unwrap();
        store.grant(&orders, 10).unwrap();
        let mut held = store.lock(&orders).unwrap();
        let lock_path = dir.join("orders.lock");
        fs::copy(&lock_path, dir.join("copy")).unwrap();
        fs::rename(dir.join("copy"), &lock_path).unwrap();
        let theirs = store.grant(&orders, 10).unwrap();
        let mine = Record {
            next: held.record.next + 5,
            serial: held.record.serial + 1,
            size: 5,
        };
        assert!(matches!(
            store.store(&orders, &mut held, mine),
            Err(Error::BlockStore { .. })
        ));
        drop(held);
        // Both copies now say serial 3; the higher next wins, so nothing of B's comes again.
        let after = store.grant(&orders, 1).unwrap();
        assert!(after.first >= theirs.end, "{after:?} after {theirs:?}");
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_torn_lock_copy_gives_way_to_the_record() {
        let dir = temp_dir("torn-lock");
        let store = FileStore::open(&dir).unwrap();
        let orders = SequenceName::new("orders").unwrap();
        let first = store.grant(&orders, 10).unwrap();
        let text = fs::read(dir.join("orders.lock")).unwrap();
        fs::write(dir.join("orders.lock"), &text[..text.len() / 2]).unwrap();
        assert_eq!(store.grant(&orders, 10).unwrap().first, first.end);
        // A damaged record is refused, whatever the lock file says.
        fs::write(dir.join("orders.next"), b"idgen-blocks v2\nnext=1\n").unwrap();
        assert!(matches!(
            store.grant(&orders, 10),
            Err(Error::BlockStore { .. })
        ));
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_failed_first_grant_leaves_the_name_off_the_roster() {
        let dir = temp_dir("first-fails");
        let store = FileStore::open(&dir).unwrap();
        let orders = SequenceName::new("orders").unwrap();
        // The staging path is a directory: the first write fails.
        fs::create_dir(dir.join("orders.next.writing")).unwrap();
        assert!(store.grant(&orders, 10).is_err());
        fs::remove_dir(dir.join("orders.next.writing")).unwrap();
        let _ = fs::remove_file(dir.join("orders.lock"));
        assert_eq!(store.grant(&orders, 10).unwrap().first, 1);
        // Known now: both files gone is an error.
        fs::remove_file(dir.join("orders.lock")).unwrap();
        fs::remove_file(dir.join("orders.next")).unwrap();
        assert!(store.grant(&orders, 10).is_err());
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
        let older = fs::read(dir.join("orders.lock")).unwrap();
        assert!(store.give_back(&orders, &grant, 41).unwrap());
        fs::write(dir.join("orders.lock"), older).unwrap();
        assert_eq!(store.grant(&orders, 1).unwrap().first, 41);
        fs::remove_dir_all(&dir).ok();
    }
}
