//! The embedded block store: one directory on one host, two files per sequence.
//!
//! `<name>.next` holds the sequence's next value, replaced atomically (written to a
//! temporary file, `fsync`ed, renamed over, and the directory `fsync`ed) before a grant is
//! returned. `<name>.lock` is what processes lock (`flock`, exclusive) around a grant, and it
//! keeps a second copy of the next value, written after the first: a sequence continues
//! from the larger of the two, so deleting either file loses nothing. Deleting both, or the
//! directory, restarts the sequence at 1; the default directory is persistent and private
//! for that reason (a temp dir is emptied at reboot).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{BlockStore, Grant, MAX_VALUE, SequenceName, grant_from};
use crate::error::Error;

/// First line of every file this store writes.
const HEADER: &str = "idgen-blocks v1";

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
            Err(_) => {
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fs::create_dir_all(parent).map_err(|e| io_error(parent, "create", &e))?;
                }
                let mut builder = fs::DirBuilder::new();
                #[cfg(unix)]
                {
                    use std::os::unix::fs::DirBuilderExt;
                    builder.mode(0o700);
                }
                match builder.create(&dir) {
                    Ok(()) => {}
                    // Another process created it first.
                    Err(_) if dir.is_dir() => {}
                    Err(error) => return Err(io_error(&dir, "create", &error)),
                }
            }
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

    /// Locks the sequence for this process (waiting for any other holder) and reads its next
    /// value: the larger of the record's and the lock file's copy, 1 when neither has one.
    fn lock(&self, sequence: &SequenceName) -> Result<Locked, Error> {
        let path = self.dir.join(format!("{sequence}.lock"));
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
        file.lock()
            .map_err(|error| io_error(&path, "lock", &error))?;
        let in_lock = read_next(&mut file, &path)?;
        let record = self.record_path(sequence);
        let in_record = match File::open(&record) {
            Ok(mut file) => read_next(&mut file, &record)?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(io_error(&record, "open", &error)),
        };
        let next = in_lock.max(in_record).unwrap_or(1);
        Ok(Locked { file, path, next })
    }

    /// Makes `next` the sequence's next value, durably, in both copies.
    fn store_next(
        &self,
        sequence: &SequenceName,
        locked: &mut Locked,
        next: u64,
    ) -> Result<(), Error> {
        let record = self.record_path(sequence);
        let staging = self.dir.join(format!("{sequence}.next.writing"));
        let written = File::create(&staging)
            .and_then(|mut file| {
                file.write_all(text_of(next).as_bytes())?;
                file.sync_all()
            })
            .map_err(|error| io_error(&staging, "write", &error));
        written?;
        fs::rename(&staging, &record).map_err(|error| io_error(&record, "replace", &error))?;
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|error| io_error(&self.dir, "sync", &error))?;
        // The second copy, in place: fixed width, one write. The record above holds the
        // value already; a torn copy is refused when read, never guessed from.
        let file = &mut locked.file;
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(text_of(next).as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(|error| io_error(&locked.path, "write", &error))?;
        locked.next = next;
        Ok(())
    }
}

/// A sequence locked by this process; the lock goes with the file.
struct Locked {
    file: File,
    path: PathBuf,
    next: u64,
}

impl BlockStore for FileStore {
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error> {
        let mut locked = self.lock(sequence)?;
        let grant = grant_from(sequence, locked.next, size)?;
        self.store_next(sequence, &mut locked, grant.end)?;
        Ok(grant)
    }

    fn give_back(&self, sequence: &SequenceName, unused: Grant) -> Result<bool, Error> {
        if unused.first == 0 || unused.first > unused.end || unused.end > MAX_VALUE + 1 {
            return Err(Error::BlockStore {
                reason: format!(
                    "cannot give back {}..{}: not a block of a sequence",
                    unused.first, unused.end
                ),
            });
        }
        let mut locked = self.lock(sequence)?;
        if unused.is_empty() || locked.next != unused.end {
            return Ok(false);
        }
        self.store_next(sequence, &mut locked, unused.first)?;
        Ok(true)
    }
}

/// The file text for a next value: the header, then the value in 20 fixed-width digits.
fn text_of(next: u64) -> String {
    format!("{HEADER}\nnext={next:020}\n")
}

/// The next value a file holds; `None` for an empty file (a lock file never written).
fn read_next(file: &mut File, path: &Path) -> Result<Option<u64>, Error> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut text))
        .map_err(|error| io_error(path, "read", &error))?;
    if text.is_empty() {
        return Ok(None);
    }
    let value = text
        .strip_prefix(HEADER)
        .and_then(|rest| rest.strip_prefix("\nnext="))
        .and_then(|rest| rest.strip_suffix('\n'))
        .filter(|digits| digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|digits| digits.parse::<u64>().ok())
        .filter(|&next| (1..=MAX_VALUE + 1).contains(&next));
    match value {
        Some(next) => Ok(Some(next)),
        None => Err(Error::BlockStore {
            reason: format!(
                "{} is not a block record written by idgen; refusing to guess where the \
                 sequence stands",
                path.display()
            ),
        }),
    }
}

fn io_error(path: &Path, action: &str, error: &std::io::Error) -> Error {
    Error::BlockStore {
        reason: format!("could not {action} {}: {error}", path.display()),
    }
}
