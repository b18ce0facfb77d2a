//! The embedded default store: one directory, one record file per worker number, each held
//! with an OS advisory lock, plus the store's own bookkeeping file.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::store::{check_layout, unreadable_layout};
use super::{Claim, LeaseStore, NumberRecord, NumberState, WorkerRange};
use crate::error::Error;
use crate::layout::Layout;

/// The file store's default TTL: how far ahead of each renewal its mark is written, and so
/// the longest a successor waits after a holder crashed.
pub const FILE_STORE_DEFAULT_TTL: Duration = Duration::from_secs(3);

/// The longest TTL a file store takes: a day. Marks are written at least a TTL ahead, so a longer one
/// would only block a crashed holder's number for longer.
pub const FILE_STORE_MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The store's bookkeeping file: which numbers were ever handed out.
const ROSTER: &str = "store.idgen";

/// The layout the store serves ([`Layout::record`]'s line), written once.
const LAYOUT: &str = "layout.idgen";

/// The largest outage horizon any holder used, in decimal milliseconds.
const HORIZON: &str = "horizon.idgen";

/// The longest layout or horizon file read: each is one short line.
const MAX_SMALL_FILE_BYTES: u64 = 4096;

/// Leases worker numbers to the processes of one host through a shared directory.
///
/// Each worker number has a record file, `dc<D>-worker<W>.lease`. A process holds a number
/// by holding an exclusive advisory lock on its file (`flock` on Unix, `LockFileEx` on
/// Windows, through `std::fs::File::try_lock`): the OS drops the lock when the process
/// exits, however it exits, so a crashed or killed holder frees its number at once, and a
/// live holder can never lose it to a neighbour. The record keeps the holder's mark, with a
/// checksum; a record that does not parse is reported, and its number is never reused.
///
/// Files can be deleted under a live holder, which then keeps its lock on a file nobody can
/// reach any more. Two things keep that from handing its number to a second process:
///
/// - **A liveness lock that no file operation removes** (Linux): a holder also binds an
///   abstract Unix socket named after the directory and the number (and, in the default
///   directory, a host-wide one named after the number alone). The kernel frees the name
///   when the holder exits; `rm` cannot. A number whose name is bound is held.
/// - **The roster**, `store.idgen`, lists every number ever handed out. A record that is
///   missing, empty, or not the file its holder wrote (replaced, copied or renamed) for a
///   number on the roster means the number's history is lost: the claim says so
///   ([`Claim::previous_mark_unknown`]) and the next holder waits an outage horizon past the moment it
///   took the number, after which every earlier holder has stopped. A directory without a
///   roster is refused ([`Error::LeaseStoreUninitialised`]) until `idgen leases init`
///   ([`FileStore::init`]) writes one; [`FileStore::open`] writes it when it creates the
///   directory itself.
///
/// The directory must be on a local file system: advisory locks over NFS are not to be
/// trusted.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    ttl: Duration,
    /// Whether this is the default directory ([`FileStore::open_default`]): a directory
    /// writable by its group is refused, and the liveness locks are the host's, shared by
    /// the default stores of every user (see `liveness_name`).
    default: bool,
}

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

    fn check_dir(&self) -> Result<(), Error> {
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
    fn check_writers(&self, path: &Path, metadata: &fs::Metadata) -> Result<(), Error> {
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
    fn check_writers(&self, _path: &Path, _metadata: &fs::Metadata) -> Result<(), Error> {
        Ok(())
    }

    /// Record and roster files: readable and writable by the owner, and by the group when
    /// the directory is shared with it.
    #[cfg(unix)]
    fn make_private(&self, path: &Path, file: &File) -> Result<(), Error> {
        use std::os::unix::fs::PermissionsExt;
        let shared = fs::metadata(&self.dir)
            .map(|metadata| metadata.permissions().mode() & 0o020 != 0)
            .unwrap_or(false);
        let mode = if shared { 0o660 } else { 0o600 };
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|error| io_error(path, "set the permissions of", &error))
    }

    #[cfg(not(unix))]
    fn make_private(&self, _path: &Path, _file: &File) -> Result<(), Error> {
        Ok(())
    }

    fn uninitialised(&self, why: String) -> Error {
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
    fn roster(&self) -> Result<Roster, Error> {
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

    /// The layout file's text, `None` when there is none; a file that is not a plain
    /// one, or that others may write, or too long for a layout record, is an error.
    fn read_layout(&self) -> Result<Option<String>, Error> {
        let path = self.dir.join(LAYOUT);
        match fs::symlink_metadata(&path) {
            Ok(metadata) if !metadata.file_type().is_file() => Err(not_a_plain_file(&path)),
            Ok(metadata) if metadata.len() > MAX_SMALL_FILE_BYTES => Err(Error::LeaseStore {
                reason: format!("{} is not an idgen layout record", path.display()),
            }),
            Ok(metadata) => {
                self.check_writers(&path, &metadata)?;
                let text = fs::read(&path).map_err(|error| io_error(&path, "read", &error))?;
                Ok(Some(String::from_utf8_lossy(&text).into_owned()))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&path, "read", &error)),
        }
    }

    /// Writes `record` as the layout file unless one exists: written whole in a file of its
    /// own, then linked into place, which fails if another process linked first.
    fn record_layout(&self, record: &str) -> Result<bool, Error> {
        let path = self.dir.join(LAYOUT);
        let thread = format!("{:?}", std::thread::current().id());
        let staging = self.dir.join(format!(
            ".{LAYOUT}.writing-{}-{}",
            std::process::id(),
            thread.trim_start_matches("ThreadId(").trim_end_matches(')')
        ));
        let _ = fs::remove_file(&staging);
        let written = private_file(&staging)
            .map_err(|error| io_error(&staging, "create", &error))
            .and_then(|mut file| {
                self.make_private(&staging, &file)?;
                file.write_all(format!("{record}\n").as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|error| io_error(&staging, "write", &error))
            });
        let linked = written.and_then(|()| match fs::hard_link(&staging, &path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(io_error(&path, "create", &error)),
        });
        let _ = fs::remove_file(&staging);
        linked
    }

    /// The liveness locks of a number, or `None` when a live process holds one: the
    /// directory's (its canonical path, hashed to fit a name's 107 bytes), and for the
    /// default directory, which differs per user (root's `/var/lib/idgen`, a user's
    /// `~/.local/state`), also one host-wide name per number, so a user's `idgen next`
    /// never takes the number a root service holds.
    fn take_liveness(&self, datacenter: u64, worker: u64) -> Result<Option<Liveness>, Error> {
        let canonical =
            fs::canonicalize(&self.dir).map_err(|error| io_error(&self.dir, "resolve", &error))?;
        let hash = fnv1a(canonical.to_string_lossy().as_bytes());
        let number = format!("dc{datacenter}-worker{worker}");
        let Some(directory) = Liveness::take(&format!("idgen-lease/{hash:016x}/{number}"))? else {
            return Ok(None);
        };
        if !self.default {
            return Ok(Some(directory));
        }
        Ok(Liveness::take(&format!("idgen-lease/default/{number}"))?
            .map(|host| directory.with(host)))
    }
}

/// Creates `dir` as a store with an empty roster, all at once: the roster is written in a
/// sibling directory that is then renamed into place. Losing the race to another creator
/// is fine: that one wrote a whole store.
fn create_store(dir: &Path) -> Result<(), Error> {
    let parent = match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
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
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(&staging)
        .map_err(|error| io_error(&staging, "create", &error))?;
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

/// Creates a new file readable and writable by its owner only.
fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Fails while a process holds a lock on any record in `dir`, the old default: an older
/// idgen is issuing as that number, and a store elsewhere would not know.
fn check_legacy_dir(dir: &Path) -> Result<(), Error> {
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

/// Which numbers were ever handed out: `idgen-lease-store v1`, then one line per number
/// (`dc<D>-worker<W>`), or the line `every-number` after `idgen leases init` found a
/// directory without a roster. A line that does not parse (a torn append) counts as
/// `every-number`: the safe reading.
struct Roster {
    every_number: bool,
    numbers: BTreeSet<(u64, u64)>,
}

impl Roster {
    const HEADER: &'static str = "idgen-lease-store v1\n";
    const EVERY_NUMBER: &'static str = "idgen-lease-store v1\nevery-number\n";

    fn parse(text: &str) -> Option<Roster> {
        let rest = text.strip_prefix(Roster::HEADER)?;
        let mut roster = Roster {
            every_number: false,
            numbers: BTreeSet::new(),
        };
        for line in rest.split_inclusive('\n') {
            let number = line
                .strip_suffix('\n')
                .and_then(|line| line.strip_prefix("dc"))
                .and_then(|line| line.split_once("-worker"))
                .and_then(|(dc, worker)| Some((canonical(dc)?, canonical(worker)?)));
            match number {
                Some(number) => {
                    roster.numbers.insert(number);
                }
                None => roster.every_number = true,
            }
        }
        Some(roster)
    }

    fn handed_out(&self, datacenter: u64, worker: u64) -> bool {
        self.every_number || self.numbers.contains(&(datacenter, worker))
    }

    fn line(datacenter: u64, worker: u64) -> String {
        format!("dc{datacenter}-worker{worker}\n")
    }
}

fn canonical(text: &str) -> Option<u64> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    (digits && (text == "0" || !text.starts_with('0')))
        .then(|| text.parse().ok())
        .flatten()
}

impl LeaseStore for FileStore {
    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn bind_layout(&self, layout: &Layout) -> Result<(), Error> {
        self.check_dir()?;
        self.roster()?;
        let ours = layout.record();
        let recorded = match self.read_layout()? {
            Some(text) => text,
            None => {
                if self.record_layout(&ours)? {
                    log::info!(
                        "idgen: the lease directory {} had no layout; it now serves {layout}",
                        self.dir.display()
                    );
                }
                self.read_layout()?.unwrap_or_default()
            }
        };
        check_layout(
            &self.dir.join(LAYOUT).display().to_string(),
            &recorded,
            layout,
        )
    }

    fn raise_horizon(&self, horizon: Duration) -> Result<Duration, Error> {
        self.check_dir()?;
        // A store without its roster is refused with the command that mends it.
        self.roster()?;
        // Under the roster's lock, as acquires are: two holders raising it at once cannot
        // lower it.
        let roster_path = self.dir.join(ROSTER);
        let roster_file =
            File::open(&roster_path).map_err(|error| io_error(&roster_path, "open", &error))?;
        same_file(&roster_path, &roster_file)?;
        roster_file
            .lock()
            .map_err(|error| io_error(&roster_path, "lock", &error))?;
        let path = self.dir.join(HORIZON);
        let recorded = match fs::symlink_metadata(&path) {
            Ok(metadata) if !metadata.file_type().is_file() => {
                return Err(not_a_plain_file(&path));
            }
            Ok(metadata) => {
                self.check_writers(&path, &metadata)?;
                // A damaged record (too long, not text, not a number) counts as none: the
                // holder's own horizon still applies, and is written over it.
                let text = (metadata.len() <= MAX_SMALL_FILE_BYTES)
                    .then(|| fs::read(&path))
                    .transpose()
                    .map_err(|error| io_error(&path, "read", &error))?
                    .and_then(|bytes| String::from_utf8(bytes).ok());
                text.as_deref()
                    .and_then(|text| text.strip_suffix('\n'))
                    .and_then(canonical)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(io_error(&path, "read", &error)),
        };
        let ours = u64::try_from(horizon.as_millis()).unwrap_or(u64::MAX);
        if let Some(recorded) = recorded.filter(|&recorded| recorded >= ours) {
            return Ok(Duration::from_millis(recorded));
        }
        let staging = self
            .dir
            .join(format!(".{HORIZON}.writing-{}", std::process::id()));
        let _ = fs::remove_file(&staging);
        let mut file =
            private_file(&staging).map_err(|error| io_error(&staging, "create", &error))?;
        self.make_private(&staging, &file)?;
        file.write_all(format!("{ours}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|error| io_error(&staging, "write", &error))?;
        fs::rename(&staging, &path).map_err(|error| io_error(&path, "replace", &error))?;
        Ok(horizon)
    }

    fn recorded_layout(&self) -> Result<Option<Layout>, Error> {
        let Some(text) = self.read_layout()? else {
            return Ok(None);
        };
        let path = self.dir.join(LAYOUT);
        Layout::from_record(&text)
            .map(Some)
            .ok_or_else(|| unreadable_layout(&path.display().to_string()))
    }

    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        self.acquire_as(range, "")
    }

    fn survey(&self, range: &WorkerRange) -> Result<Vec<NumberRecord>, Error> {
        self.check_dir()?;
        // Under the roster's lock, as acquires are: the liveness probes below would
        // otherwise make an acquire running at the same moment skip a free number.
        let roster_path = self.dir.join(ROSTER);
        let roster_file =
            File::open(&roster_path).map_err(|error| io_error(&roster_path, "open", &error))?;
        roster_file
            .lock()
            .map_err(|error| io_error(&roster_path, "lock", &error))?;
        let roster = self.roster()?;
        let datacenter = range.datacenter();
        let mut numbers = Vec::new();
        for worker in range.workers() {
            let path = self.record_path(datacenter, worker);
            let handed_out = roster.handed_out(datacenter, worker);
            // Only a plain file is opened: opening a FIFO would block, a link lead elsewhere.
            let metadata = fs::symlink_metadata(&path);
            let plain = metadata.as_ref().is_ok_and(|m| m.file_type().is_file());
            // Read and write, as acquires open it: that never blocks, even on a FIFO that
            // replaced the file since the check. Nothing is written.
            let open_plain = || OpenOptions::new().read(true).write(true).open(&path);
            // Held: its liveness name is bound, or its record is locked.
            let held = match self.take_liveness(datacenter, worker)? {
                None => true,
                Some(_free) => {
                    plain
                        && open_plain().is_ok_and(|file| {
                            matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock))
                        })
                }
            };
            let text = match metadata {
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
                _ if !plain => Err("not a plain file".to_string()),
                _ => open_plain()
                    .and_then(|mut file| {
                        let mut text = String::new();
                        file.read_to_string(&mut text).map(|_| text)
                    })
                    .map_err(|error| error.to_string()),
            };
            let mut number = NumberRecord::new(datacenter, worker);
            number.state = if held {
                NumberState::Held
            } else {
                NumberState::Free
            };
            match text.and_then(|text| Record::parse(&text)) {
                Err(reason) => {
                    number.state = NumberState::Corrupt;
                    number.detail = Some(format!("{}: {reason}", path.display()));
                }
                Ok(None) if handed_out && !held => {
                    number.state = NumberState::Missing;
                    number.detail = Some(format!(
                        "{}: missing or empty, but the number was handed out",
                        path.display()
                    ));
                }
                Ok(None) => {}
                Ok(Some(record)) => {
                    number.mark_unix_ms = Some(record.mark);
                    number.holder = record.holder;
                    let named = record.datacenter == Some(datacenter)
                        && record.worker == Some(worker)
                        && FileIdentity::of_path(&path).ok() == record.file;
                    if !named && !held {
                        number.state = NumberState::Missing;
                        number.detail = Some(format!(
                            "{}: not the record its holder wrote (replaced, copied or \
                             renamed); its mark is not trusted",
                            path.display()
                        ));
                    }
                }
            }
            numbers.push(number);
        }
        Ok(numbers)
    }

    fn acquire_as(&self, range: &WorkerRange, holder: &str) -> Result<Box<dyn Claim>, Error> {
        self.check_dir()?;
        // The roster's lock serialises acquires on this host, so nobody reads it half
        // written. A number goes on the roster before its claim is handed out, so before any
        // ID: a crash in between leaves an empty record of a number never used.
        let roster_path = self.dir.join(ROSTER);
        let mut roster_file = match OpenOptions::new()
            .read(true)
            .append(true)
            .open(&roster_path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.roster().err().unwrap_or_else(|| {
                    self.uninitialised(format!("{} is missing", roster_path.display()))
                }));
            }
            Err(error) => return Err(io_error(&roster_path, "open", &error)),
        };
        same_file(&roster_path, &roster_file)?;
        roster_file
            .lock()
            .map_err(|error| io_error(&roster_path, "lock", &error))?;
        let roster = self.roster()?;
        let datacenter = range.datacenter();
        let mut held = 0;
        let mut unusable = Vec::new();
        for worker in range.workers() {
            let Some(liveness) = self.take_liveness(datacenter, worker)? else {
                held += 1;
                continue;
            };
            let path = self.record_path(datacenter, worker);
            // A record that cannot be used (a link, a FIFO, one others may write) makes its
            // number unusable, not the range.
            let opened = open_record(&path).and_then(|(file, created)| {
                if created {
                    self.make_private(&path, &file)?;
                }
                let metadata = file
                    .metadata()
                    .map_err(|error| io_error(&path, "stat", &error))?;
                if !metadata.file_type().is_file() {
                    return Err(not_a_plain_file(&path));
                }
                self.check_writers(&path, &metadata)?;
                Ok(file)
            });
            let mut file = match opened {
                Ok(file) => file,
                Err(error) => {
                    log::error!("idgen: {error}; worker {worker} skipped");
                    unusable.push(error.to_string());
                    continue;
                }
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    held += 1;
                    continue;
                }
                Err(TryLockError::Error(error)) => return Err(io_error(&path, "lock", &error)),
            }
            let identity =
                FileIdentity::of(&file).map_err(|error| io_error(&path, "stat", &error))?;
            let mut text = String::new();
            let read = file
                .seek(SeekFrom::Start(0))
                .and_then(|_| file.read_to_string(&mut text));
            let record = match read {
                Ok(_) => Record::parse(&text),
                Err(error) => Err(format!("unreadable: {error}")),
            };
            let handed_out = roster.handed_out(datacenter, worker);
            let (previous, unknown) = match record {
                Ok(None) => {
                    if handed_out {
                        log::warn!(
                            "idgen: the record of worker {worker} of datacenter {datacenter} \
                             was deleted or emptied; its next holder waits an outage horizon for any \
                             earlier holder to stop"
                        );
                    }
                    (None, handed_out)
                }
                Ok(Some(record)) => {
                    let ours = record.datacenter == Some(datacenter)
                        && record.worker == Some(worker)
                        && record.file == Some(identity);
                    if !ours {
                        log::warn!(
                            "idgen: {} is not the record its holder wrote (replaced, copied, \
                             renamed, or from an older idgen); its mark is not trusted",
                            path.display()
                        );
                    }
                    (Some(record.mark), !ours)
                }
                Err(reason) => {
                    // Without a trustworthy mark the number cannot be reused safely.
                    log::error!(
                        "idgen: {}: {reason}; worker {worker} skipped",
                        path.display()
                    );
                    unusable.push(format!("{} ({reason})", path.display()));
                    continue;
                }
            };
            if !handed_out {
                roster_file
                    .write_all(Roster::line(datacenter, worker).as_bytes())
                    .and_then(|()| roster_file.sync_data())
                    .map_err(|error| io_error(&roster_path, "write", &error))?;
            }
            return Ok(Box::new(FileClaim {
                datacenter,
                worker,
                path,
                file: Some(file),
                identity,
                liveness: Some(liveness),
                previous,
                unknown,
                holder: holder.to_string(),
            }));
        }
        Err(Error::LeaseRangeFull {
            range: range.to_string(),
            held,
            unusable,
        })
    }
}

/// Opens a record, creating it if missing; says whether this call created it. Never
/// follows a symbolic link: a planted link is an error, not a file written somewhere else.
fn open_record(path: &Path) -> Result<(File, bool), Error> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => {
            return Err(not_a_plain_file(path));
        }
        Ok(_) => {
            let file = options
                .open(path)
                .map_err(|error| io_error(path, "open", &error))?;
            same_file(path, &file)?;
            return Ok((file, false));
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io_error(path, "open", &error)),
    }
    // O_CREAT | O_EXCL: fails on any existing path, a dangling link included.
    let mut creating = options.clone();
    creating.create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        creating.mode(0o600);
    }
    match creating.open(path) {
        Ok(file) => Ok((file, true)),
        // Created by someone else in between: theirs to lock.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let file = options
                .open(path)
                .map_err(|error| io_error(path, "open", &error))?;
            same_file(path, &file)?;
            Ok((file, false))
        }
        Err(error) => Err(io_error(path, "create", &error)),
    }
}

/// Fails unless `path` itself (not a link's target) is the file opened.
fn same_file(path: &Path, file: &File) -> Result<(), Error> {
    let opened = FileIdentity::of(file).map_err(|error| io_error(path, "stat", &error))?;
    match FileIdentity::of_path(path) {
        Ok(named) if named == opened => Ok(()),
        _ => Err(not_a_plain_file(path)),
    }
}

fn not_a_plain_file(path: &Path) -> Error {
    Error::LeaseStore {
        reason: format!(
            "{} is not a plain file (a symbolic link, a FIFO, a directory), or was swapped \
             while being opened; lease files must be plain files",
            path.display()
        ),
    }
}

/// Which file a record is: device and inode. A record names the file it was written into,
/// so a copy, a replacement or a re-created file does not pass for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    device: u64,
    inode: u64,
}

impl FileIdentity {
    #[cfg(unix)]
    fn of(file: &File) -> std::io::Result<FileIdentity> {
        use std::os::unix::fs::MetadataExt;
        let metadata = file.metadata()?;
        Ok(FileIdentity {
            device: metadata.dev(),
            inode: metadata.ino(),
        })
    }

    #[cfg(not(unix))]
    fn of(_file: &File) -> std::io::Result<FileIdentity> {
        Ok(FileIdentity {
            device: 0,
            inode: 0,
        })
    }

    #[cfg(unix)]
    fn of_path(path: &Path) -> std::io::Result<FileIdentity> {
        use std::os::unix::fs::MetadataExt;
        let metadata = fs::symlink_metadata(path)?;
        Ok(FileIdentity {
            device: metadata.dev(),
            inode: metadata.ino(),
        })
    }

    #[cfg(not(unix))]
    fn of_path(path: &Path) -> std::io::Result<FileIdentity> {
        fs::symlink_metadata(path).map(|_| FileIdentity {
            device: 0,
            inode: 0,
        })
    }
}

/// A lock no file operation can remove: an abstract Unix socket name, bound for as long as
/// the number is held and freed by the kernel when the process exits (Linux only; abstract
/// names belong to the network namespace, so processes sharing a lease directory must
/// share one).
#[derive(Debug)]
struct Liveness {
    #[cfg(target_os = "linux")]
    _sockets: Vec<std::os::unix::net::UnixListener>,
}

impl Liveness {
    /// The lock, or `None` when a live process holds it.
    #[cfg(target_os = "linux")]
    fn take(name: &str) -> Result<Option<Liveness>, Error> {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixListener};
        let address =
            SocketAddr::from_abstract_name(name.as_bytes()).map_err(|error| Error::LeaseStore {
                reason: format!("the liveness lock {name:?}: {error}"),
            })?;
        match UnixListener::bind_addr(&address) {
            Ok(socket) => Ok(Some(Liveness {
                _sockets: vec![socket],
            })),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => Ok(None),
            Err(error) => Err(Error::LeaseStore {
                reason: format!("could not take the liveness lock {name:?}: {error}"),
            }),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn take(_name: &str) -> Result<Option<Liveness>, Error> {
        Ok(Some(Liveness {}))
    }

    /// Both locks, held together.
    #[cfg(target_os = "linux")]
    fn with(mut self, other: Liveness) -> Liveness {
        self._sockets.extend(other._sockets);
        self
    }

    #[cfg(not(target_os = "linux"))]
    fn with(self, _other: Liveness) -> Liveness {
        self
    }
}

/// One record: the number it belongs to, the file it was written into, the holder's mark
/// and process ID, with a checksum of all of them.
///
/// `idgen-lease v2 dc=<D> worker=<W> file=<device>:<inode> mark=<unix ms> pid=<pid>
/// [holder=<hex of the holder's name>] check=<16 hex digits>\n`, numbers at fixed widths;
/// an empty file is a number never held. Records of version 1 (`mark` and `pid` only)
/// still parse, as not naming their file. Fields are found by name, so a reader that does
/// not know `holder` (the version before it) reads the record as before.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    datacenter: Option<u64>,
    worker: Option<u64>,
    file: Option<FileIdentity>,
    mark: u64,
    holder: Option<String>,
}

impl Record {
    const V1: &'static str = "idgen-lease v1 ";
    const V2: &'static str = "idgen-lease v2 ";

    fn format(
        datacenter: u64,
        worker: u64,
        file: FileIdentity,
        mark: u64,
        pid: u32,
        holder: &str,
    ) -> String {
        let mut body = format!(
            "dc={datacenter:020} worker={worker:020} file={:020}:{:020} mark={mark:020} \
             pid={pid:010}",
            file.device, file.inode
        );
        // Always present and always as wide, so every record of this version has the
        // same length: a rewrite covers the old record whole, leaving no torn tail even
        // for a moment.
        body += " holder=";
        let name = holder_bytes(holder);
        body.extend(name.iter().map(|byte| format!("{byte:02x}")));
        body.extend(std::iter::repeat_n("00", MAX_HOLDER_BYTES - name.len()));
        format!("{}{body} check={:016x}\n", Record::V2, checksum(&body))
    }

    /// The record, `None` for an empty (never held) file, or why it is not to be trusted.
    fn parse(text: &str) -> Result<Option<Record>, String> {
        if text.is_empty() {
            return Ok(None);
        }
        let line = text
            .strip_suffix('\n')
            .ok_or_else(|| "not an idgen lease record (or a torn write)".to_string())?;
        let (version, line) = if let Some(line) = line.strip_prefix(Record::V2) {
            (2, line)
        } else if let Some(line) = line.strip_prefix(Record::V1) {
            (1, line)
        } else {
            return Err("not an idgen lease record (or a torn write)".to_string());
        };
        let (body, check) = line
            .rsplit_once(" check=")
            .ok_or_else(|| "the record has no checksum".to_string())?;
        // Exactly as written: 16 lower-case hex digits (from_str_radix alone would also take
        // upper case and a sign).
        let written = check.len() == 16
            && check
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !written || u64::from_str_radix(check, 16) != Ok(checksum(body)) {
            return Err("the record's checksum does not match".to_string());
        }
        let field = |name: &str| -> Option<&str> {
            body.split(' ')
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        };
        let number = |text: &str| -> Option<u64> {
            (text.len() == 20 && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse().ok())
                .flatten()
        };
        let mark = field("mark")
            .and_then(number)
            .ok_or_else(|| "the record has no readable mark".to_string())?;
        if version == 1 {
            return Ok(Some(Record {
                datacenter: None,
                worker: None,
                file: None,
                mark,
                holder: None,
            }));
        }
        let unreadable = || "the record's number or file is unreadable".to_string();
        let (device, inode) = field("file")
            .and_then(|file| file.split_once(':'))
            .ok_or_else(unreadable)?;
        Ok(Some(Record {
            datacenter: Some(field("dc").and_then(number).ok_or_else(unreadable)?),
            worker: Some(field("worker").and_then(number).ok_or_else(unreadable)?),
            file: Some(FileIdentity {
                device: number(device).ok_or_else(unreadable)?,
                inode: number(inode).ok_or_else(unreadable)?,
            }),
            mark,
            holder: field("holder").and_then(unhex),
        }))
    }
}

/// The longest holder name a record keeps, in bytes; longer ones are cut at a character.
const MAX_HOLDER_BYTES: usize = 128;

/// `holder` cut to [`MAX_HOLDER_BYTES`] at a character boundary.
fn holder_bytes(holder: &str) -> &[u8] {
    let mut end = holder.len().min(MAX_HOLDER_BYTES);
    while !holder.is_char_boundary(end) {
        end -= 1;
    }
    &holder.as_bytes()[..end]
}

/// The holder name written as hex (padded with zero bytes); `None` for anything else or
/// for no name.
fn unhex(hex: &str) -> Option<String> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            // Lower-case hex digits only, as written (from_str_radix would take a sign).
            let pair = hex.get(i..i + 2)?;
            let lower = pair.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            lower.then(|| u8::from_str_radix(pair, 16).ok()).flatten()
        })
        .collect();
    let mut bytes = bytes?;
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    String::from_utf8(bytes)
        .ok()
        .filter(|name| !name.is_empty())
}

/// FNV-1a, 64 bits: catches torn and hand-edited records; not a defence against forgery.
fn checksum(text: &str) -> u64 {
    fnv1a(text.as_bytes())
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

struct FileClaim {
    datacenter: u64,
    worker: u64,
    path: PathBuf,
    /// Open, and locked, until released.
    file: Option<File>,
    identity: FileIdentity,
    /// Bound until released or lost.
    liveness: Option<Liveness>,
    previous: Option<u64>,
    unknown: bool,
    /// The holder's name, written into the record for the fleet view.
    holder: String,
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
        match FileIdentity::of_path(&self.path) {
            Ok(now) => Ok(now == self.identity),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
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

fn io_error(path: &Path, action: &str, error: &std::io::Error) -> Error {
    Error::LeaseStore {
        reason: format!("could not {action} {}: {error}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzz target `store_files`: a checksum in upper case was taken as the
    /// same record, so a record that idgen never writes read as valid.
    #[test]
    fn only_the_checksum_as_written_is_taken() {
        let text = Record::format(
            0,
            3,
            FileIdentity {
                device: 1,
                inode: 2,
            },
            77,
            9,
            "a",
        );
        assert!(matches!(Record::parse(&text), Ok(Some(_))));
        let (body, check) = text.trim_end().rsplit_once(" check=").unwrap();
        let altered = check.to_uppercase();
        assert_ne!(altered, check, "a checksum with letters, to alter");
        let text = format!("{body} check={altered}\n");
        assert!(Record::parse(&text).is_err(), "{text}");
    }

    #[test]
    fn records_round_trip_and_reject_tampering() {
        let file = FileIdentity {
            device: 2049,
            inode: 123_456,
        };
        let text = Record::format(1, 7, file, 1_764_000_000_123, 4242, "");
        assert_eq!(text.len(), Record::format(0, 0, file, 0, 0, "").len());
        assert_eq!(
            Record::parse(&text),
            Ok(Some(Record {
                datacenter: Some(1),
                worker: Some(7),
                file: Some(file),
                mark: 1_764_000_000_123,
                holder: None,
            }))
        );
        let named = Record::format(1, 7, file, 1_764_000_000_123, 4242, "billing 7f9c ünï");
        let record = Record::parse(&named).unwrap().unwrap();
        assert_eq!(record.holder.as_deref(), Some("billing 7f9c ünï"));
        assert_eq!(record.mark, 1_764_000_000_123);
        // Every record as long as every other, whatever the name: a rewrite never leaves
        // a tail. A name too long is cut at a character boundary.
        let long = "é".repeat(200);
        let cut = Record::format(1, 7, file, 1, 2, &long);
        assert_eq!(cut.len(), text.len());
        assert_eq!(named.len(), text.len());
        let kept = Record::parse(&cut).unwrap().unwrap().holder.unwrap();
        assert_eq!(kept, "é".repeat(64));
        assert_eq!(Record::parse(""), Ok(None));
        let tampered = text.replace("1764000000123", "1764000000124");
        assert!(Record::parse(&tampered).unwrap_err().contains("checksum"));
        assert!(Record::parse(&text[..text.len() - 5]).is_err());
        assert!(Record::parse("garbage\n").is_err());
        assert!(Record::parse("\0\0\0\0").is_err());
    }

    /// The version before this one found fields by name and checked the whole body's
    /// checksum, so a record with a holder reads there as the same mark: held, not corrupt.
    /// What that version checked: the prefix, the checksum over the whole body, the mark
    /// found by name.
    #[test]
    fn a_record_with_a_holder_reads_in_the_version_before_as_the_same_mark() {
        fn previous_parse(text: &str) -> Option<u64> {
            let line = text.strip_suffix('\n')?;
            let line = line.strip_prefix(Record::V2)?;
            let (body, check) = line.rsplit_once(" check=")?;
            if check.len() != 16 || u64::from_str_radix(check, 16) != Ok(checksum(body)) {
                return None;
            }
            let field = |name: &str| -> Option<&str> {
                body.split(' ')
                    .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            };
            field("mark")?.parse().ok()
        }
        let file = FileIdentity {
            device: 1,
            inode: 2,
        };
        let named = Record::format(0, 3, file, 1_764_000_000_999, 7, "svc a");
        assert_eq!(previous_parse(&named), Some(1_764_000_000_999));
    }

    #[test]
    fn a_version_1_record_parses_without_naming_its_file() {
        let body = format!("mark={:020} pid={:010}", 1_764_000_000_123u64, 42);
        let text = format!("idgen-lease v1 {body} check={:016x}\n", checksum(&body));
        let record = Record::parse(&text).unwrap().unwrap();
        assert_eq!((record.mark, record.file), (1_764_000_000_123, None));
    }

    #[test]
    fn the_roster_reads_torn_lines_as_every_number() {
        let roster = Roster::parse("idgen-lease-store v1\ndc0-worker3\ndc1-worker0\n").unwrap();
        assert!(roster.handed_out(0, 3) && roster.handed_out(1, 0));
        assert!(!roster.handed_out(0, 0));
        let torn = Roster::parse("idgen-lease-store v1\ndc0-worker3\ndc1-wor").unwrap();
        assert!(torn.handed_out(0, 0));
        assert!(Roster::parse("something else\n").is_none());
        assert!(
            Roster::parse(Roster::EVERY_NUMBER)
                .unwrap()
                .handed_out(5, 9)
        );
    }
}

/// For the fuzz target (`fuzz/fuzz_targets/store_files.rs`): reads `text` as a lease record and
/// as a roster. Neither may panic; a record that parses, written again, parses to the same.
#[cfg(fuzzing)]
pub(crate) fn fuzz_read(text: &str) {
    if let Ok(Some(record)) = Record::parse(text)
        && let (Some(datacenter), Some(worker), Some(file)) =
            (record.datacenter, record.worker, record.file)
    {
        let holder = record.holder.clone().unwrap_or_default();
        let again = Record::format(datacenter, worker, file, record.mark, 0, &holder);
        let reread = Record::parse(&again).expect("a written record parses");
        assert_eq!(reread.map(|r| r.mark), Some(record.mark));
    }
    let _ = Roster::parse(text);
}
