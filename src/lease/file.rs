//! The embedded default store: one directory, one record file per worker number, each held
//! with an OS advisory lock.

use std::fmt;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Claim, LeaseStore, WorkerRange};
use crate::error::Error;

/// The file store's default TTL: how far ahead of each renewal its mark is written, and so
/// the longest a successor waits after a holder crashed.
pub const FILE_STORE_DEFAULT_TTL: Duration = Duration::from_secs(3);

/// Leases worker numbers to the processes of one host through a shared directory.
///
/// Each worker number has a record file, `dc<D>-worker<W>.lease`. A process holds a number
/// by holding an exclusive advisory lock on its file (`flock` on Unix, `LockFileEx` on
/// Windows, through `std::fs::File::try_lock`): the OS drops the lock when the process
/// exits, however it exits, so a crashed or killed holder frees its number at once, and a
/// live holder can never lose it to a neighbour. The record keeps the holder's mark, with a
/// checksum; a record that does not parse is reported, and its number is never reused.
///
/// The lock cannot expire, so renewals here write the mark and check that the file is
/// still the one locked (not deleted or replaced by hand).
///
/// The directory must be on a local file system: advisory locks over NFS are not to be
/// trusted.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    ttl: Duration,
}

impl FileStore {
    /// A store in `dir`, created if missing, with [`FILE_STORE_DEFAULT_TTL`].
    pub fn open(dir: impl AsRef<Path>) -> Result<FileStore, Error> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|error| io_error(&dir, "create the directory", &error))?;
        if !dir.is_dir() {
            return Err(Error::LeaseConfig {
                reason: format!("{} is not a directory", dir.display()),
            });
        }
        Ok(FileStore {
            dir,
            ttl: FILE_STORE_DEFAULT_TTL,
        })
    }

    /// Sets the TTL (at least 100 ms).
    pub fn with_ttl(mut self, ttl: Duration) -> Result<FileStore, Error> {
        if ttl < Duration::from_millis(100) {
            return Err(Error::LeaseConfig {
                reason: format!("a file store TTL of {ttl:?} is below the minimum of 100 ms"),
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
}

impl LeaseStore for FileStore {
    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        let mut held = 0;
        let mut unusable = Vec::new();
        for worker in range.workers() {
            let path = self.record_path(range.datacenter(), worker);
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|error| io_error(&path, "open", &error))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    held += 1;
                    continue;
                }
                Err(TryLockError::Error(error)) => return Err(io_error(&path, "lock", &error)),
            }
            let mut text = String::new();
            let read = file
                .seek(SeekFrom::Start(0))
                .and_then(|_| file.read_to_string(&mut text));
            let previous = match read {
                Ok(_) => Record::parse(&text),
                Err(error) => Err(format!("unreadable: {error}")),
            };
            match previous {
                Ok(previous) => {
                    return Ok(Box::new(FileClaim {
                        datacenter: range.datacenter(),
                        worker,
                        path,
                        file: Some(file),
                        previous,
                    }));
                }
                Err(reason) => {
                    // Without a trustworthy mark the number cannot be reused safely.
                    log::error!(
                        "idgen: {}: {reason}; worker {worker} skipped",
                        path.display()
                    );
                    unusable.push(format!("{} ({reason})", path.display()));
                }
            }
        }
        Err(Error::LeaseRangeFull {
            range: range.to_string(),
            held,
            unusable,
        })
    }
}

/// One record: the holder's mark and process ID, with a checksum of both.
///
/// `idgen-lease v1 mark=<unix ms> pid=<pid> check=<16 hex digits>\n`; an empty file is a
/// number never held.
struct Record;

impl Record {
    const PREFIX: &'static str = "idgen-lease v1 ";

    fn format(mark_unix_ms: u64, pid: u32) -> String {
        // A fixed width, so every record of a file has the same length.
        let body = format!("mark={mark_unix_ms:020} pid={pid:010}");
        format!("{}{body} check={:016x}\n", Record::PREFIX, checksum(&body))
    }

    /// The mark, `None` for an empty (never held) record, or why the record is not to be
    /// trusted.
    fn parse(text: &str) -> Result<Option<u64>, String> {
        if text.is_empty() {
            return Ok(None);
        }
        let line = text
            .strip_suffix('\n')
            .and_then(|line| line.strip_prefix(Record::PREFIX))
            .ok_or_else(|| "not an idgen lease record (or a torn write)".to_string())?;
        let (body, check) = line
            .rsplit_once(" check=")
            .ok_or_else(|| "the record has no checksum".to_string())?;
        if check.len() != 16 || u64::from_str_radix(check, 16) != Ok(checksum(body)) {
            return Err("the record's checksum does not match".to_string());
        }
        let mark = body
            .strip_prefix("mark=")
            .and_then(|rest| rest.split_once(" pid="))
            .and_then(|(mark, _)| mark.parse::<u64>().ok())
            .ok_or_else(|| "the record has no readable mark".to_string())?;
        Ok(Some(mark))
    }
}

/// FNV-1a, 64 bits: catches torn and hand-edited records; not a defence against forgery.
fn checksum(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

struct FileClaim {
    datacenter: u64,
    worker: u64,
    path: PathBuf,
    /// Open, and locked, until released.
    file: Option<File>,
    previous: Option<u64>,
}

impl FileClaim {
    fn lost(&self) -> Error {
        Error::LeaseLost {
            datacenter: self.datacenter,
            worker: self.worker,
        }
    }

    /// Whether the path still names the file we hold the lock on.
    #[cfg(unix)]
    fn still_ours(&self, file: &File) -> std::io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let held = file.metadata()?;
        match fs::metadata(&self.path) {
            Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }

    #[cfg(not(unix))]
    fn still_ours(&self, _file: &File) -> std::io::Result<bool> {
        Ok(self.path.exists())
    }

    fn write_mark(&self, file: &File, mark_unix_ms: u64) -> std::io::Result<()> {
        let record = Record::format(mark_unix_ms, std::process::id());
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

    fn renew(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        let Some(file) = &self.file else {
            return Err(self.lost());
        };
        match self.still_ours(file) {
            Ok(true) => {}
            Ok(false) => return Err(self.lost()),
            Err(error) => return Err(io_error(&self.path, "check", &error)),
        }
        self.write_mark(file, mark_unix_ms)
            .map_err(|error| io_error(&self.path, "write", &error))
    }

    fn release(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let written = match self.still_ours(&file) {
            Ok(true) => self
                .write_mark(&file, mark_unix_ms)
                .map_err(|error| io_error(&self.path, "write", &error)),
            Ok(false) => Ok(()),
            Err(error) => Err(io_error(&self.path, "check", &error)),
        };
        // Closing the file drops the lock, whatever happened above.
        drop(file);
        written
    }
}

impl fmt::Debug for FileClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileClaim")
            .field("path", &self.path)
            .field("held", &self.file.is_some())
            .field("previous_mark_unix_ms", &self.previous)
            .finish()
    }
}

fn io_error(path: &Path, action: &str, error: &std::io::Error) -> Error {
    Error::LeaseStore {
        reason: format!("could not {action} {}: {error}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_tampering() {
        let text = Record::format(1_764_000_000_123, 4242);
        assert_eq!(text.len(), Record::format(0, 0).len());
        assert_eq!(Record::parse(&text), Ok(Some(1_764_000_000_123)));
        assert_eq!(Record::parse(""), Ok(None));
        let tampered = text.replace("1764000000123", "1764000000124");
        assert!(Record::parse(&tampered).unwrap_err().contains("checksum"));
        assert!(Record::parse(&text[..text.len() - 5]).is_err());
        assert!(Record::parse("garbage\n").is_err());
        assert!(Record::parse("\0\0\0\0").is_err());
    }
}
