//! [`LeaseStore`] for the file store: binding its layout, raising its horizon, taking the
//! lowest free number of a range (`acquire_as`, in named steps), and surveying a range.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use super::claim::FileClaim;
use super::identity::{open_record, same_file};
use super::record::Record;
use super::roster::Roster;
use super::{FileStore, LAYOUT, ROSTER, io_error, not_a_plain_file};
use crate::lease::store::{check_layout, unreadable_layout};
use crate::lease::{Claim, LeaseStore, NumberRecord, NumberState, WorkerRange};
use crate::store_files::FileIdentity;
use crate::{Error, Layout};

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
        let recorded = self.read_horizon()?;
        let ours = u64::try_from(horizon.as_millis()).unwrap_or(u64::MAX);
        if let Some(recorded) = recorded.filter(|&recorded| recorded >= ours) {
            return Ok(Duration::from_millis(recorded));
        }
        self.write_horizon(ours)?;
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
            numbers.push(self.survey_number(&roster, datacenter, worker)?);
        }
        Ok(numbers)
    }

    fn acquire_as(&self, range: &WorkerRange, holder: &str) -> Result<Box<dyn Claim>, Error> {
        self.check_dir()?;
        // The roster's lock serialises acquires on this host, so nobody reads it half
        // written. A number goes on the roster before its claim is handed out, so before any
        // ID: a crash in between leaves an empty record of a number never used.
        let roster_path = self.dir.join(ROSTER);
        let mut roster_file = self.lock_roster_to_append(&roster_path)?;
        let roster = self.roster()?;
        let datacenter = range.datacenter();
        let mut held = 0;
        let mut unusable = Vec::new();
        for worker in range.workers() {
            let claim = match self.take_number(&roster, datacenter, worker, holder)? {
                Attempt::Held => {
                    held += 1;
                    continue;
                }
                Attempt::Unusable(reason) => {
                    unusable.push(reason);
                    continue;
                }
                Attempt::Taken(claim) => claim,
            };
            if !roster.handed_out(datacenter, worker) {
                roster_file
                    .write_all(Roster::line(datacenter, worker).as_bytes())
                    .and_then(|()| roster_file.sync_data())
                    .map_err(|error| io_error(&roster_path, "write", &error))?;
            }
            return Ok(Box::new(claim));
        }
        Err(Error::LeaseRangeFull {
            range: range.to_string(),
            held,
            unusable,
        })
    }
}

/// What trying one number of a range came to.
enum Attempt {
    /// A live process holds it.
    Held,
    /// Its record cannot be used or trusted; why, for [`Error::LeaseRangeFull`].
    Unusable(String),
    Taken(FileClaim),
}

impl FileStore {
    /// What a survey reports of one number. Takes its liveness lock for a moment to probe
    /// it, so the caller holds the roster's lock.
    fn survey_number(
        &self,
        roster: &Roster,
        datacenter: u64,
        worker: u64,
    ) -> Result<NumberRecord, Error> {
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
            _ if !plain => Err(
                "not a plain file (a symbolic link, a FIFO, a directory); lease \
                                files must be plain files"
                    .to_string(),
            ),
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
        Ok(number)
    }

    /// The roster, open to append to and locked; a missing one is the error reading it
    /// gives.
    fn lock_roster_to_append(&self, roster_path: &Path) -> Result<File, Error> {
        let roster_file = match OpenOptions::new().read(true).append(true).open(roster_path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.roster().err().unwrap_or_else(|| {
                    self.uninitialised(format!("{} is missing", roster_path.display()))
                }));
            }
            Err(error) => return Err(io_error(roster_path, "open", &error)),
        };
        same_file(roster_path, &roster_file)?;
        roster_file
            .lock()
            .map_err(|error| io_error(roster_path, "lock", &error))?;
        Ok(roster_file)
    }

    /// Takes the number unless a live process holds it or its record cannot be used: its
    /// liveness lock, then its record's lock, then the previous holder's mark.
    fn take_number(
        &self,
        roster: &Roster,
        datacenter: u64,
        worker: u64,
        holder: &str,
    ) -> Result<Attempt, Error> {
        let Some(liveness) = self.take_liveness(datacenter, worker)? else {
            return Ok(Attempt::Held);
        };
        let path = self.record_path(datacenter, worker);
        // A record that cannot be used (a link, a FIFO, one others may write) makes its
        // number unusable, not the range.
        let mut file = match self.open_usable_record(&path) {
            Ok(file) => file,
            Err(error) => {
                log::error!("idgen: {error}; worker {worker} skipped");
                return Ok(Attempt::Unusable(error.to_string()));
            }
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(Attempt::Held),
            Err(TryLockError::Error(error)) => return Err(io_error(&path, "lock", &error)),
        }
        let identity = FileIdentity::of(&file).map_err(|error| io_error(&path, "stat", &error))?;
        let handed_out = roster.handed_out(datacenter, worker);
        let record = read_record(&mut file);
        let (previous, unknown) =
            match previous_mark(record, handed_out, datacenter, worker, identity, &path) {
                Ok(previous) => previous,
                Err(reason) => {
                    // Without a trustworthy mark the number cannot be reused safely.
                    log::error!(
                        "idgen: {}: {reason}; worker {worker} skipped",
                        path.display()
                    );
                    return Ok(Attempt::Unusable(format!("{} ({reason})", path.display())));
                }
            };
        Ok(Attempt::Taken(FileClaim {
            datacenter,
            worker,
            path,
            file: Some(file),
            identity,
            liveness: Some(liveness),
            previous,
            unknown,
            holder: holder.to_string(),
        }))
    }

    /// A number's record file, opened (created if missing) and fit to hold: a plain file,
    /// private.
    fn open_usable_record(&self, path: &Path) -> Result<File, Error> {
        let (file, created) = open_record(path)?;
        if created {
            self.make_private(path, &file)?;
        }
        let metadata = file
            .metadata()
            .map_err(|error| io_error(path, "stat", &error))?;
        if !metadata.file_type().is_file() {
            return Err(not_a_plain_file(path));
        }
        self.check_writers(path, &metadata)?;
        Ok(file)
    }
}

/// The record in a file just locked, read from its start.
fn read_record(file: &mut File) -> Result<Option<Record>, String> {
    let mut text = String::new();
    let read = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut text));
    match read {
        Ok(_) => Record::parse(&text),
        Err(error) => Err(format!("unreadable: {error}")),
    }
}

/// The previous holder's mark, and whether the number's history is lost (the next holder
/// then waits an outage horizon), from the record of a number just locked: `identity` is
/// the file it is in. Why not, when the record cannot be trusted.
fn previous_mark(
    record: Result<Option<Record>, String>,
    handed_out: bool,
    datacenter: u64,
    worker: u64,
    identity: FileIdentity,
    path: &Path,
) -> Result<(Option<u64>, bool), String> {
    match record? {
        None => {
            if handed_out {
                log::warn!(
                    "idgen: the record of worker {worker} of datacenter {datacenter} \
                     was deleted or emptied; its next holder waits an outage horizon for any \
                     earlier holder to stop"
                );
            }
            Ok((None, handed_out))
        }
        Some(record) => {
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
            Ok((Some(record.mark), !ours))
        }
    }
}
