//! The OS's side of a record: opening it without following a link, checking that a path
//! still names the file opened, and the liveness locks that no file operation removes.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use super::{FileStore, io_error, not_a_plain_file};
use crate::Error;
use crate::store_files::{FileIdentity, fnv1a};

impl FileStore {
    /// The liveness locks of a number, or `None` when a live process holds one: the
    /// directory's (its canonical path, hashed to fit a name's 107 bytes), and for the
    /// default directory, which differs per user (root's `/var/lib/idgen`, a user's
    /// `~/.local/state`), also one host-wide name per number, so a user's `idgen next`
    /// never takes the number a root service holds.
    pub(super) fn take_liveness(
        &self,
        datacenter: u64,
        worker: u64,
    ) -> Result<Option<Liveness>, Error> {
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

/// Opens a record, creating it if missing; says whether this call created it. Never
/// follows a symbolic link: a planted link is an error, not a file written somewhere else.
pub(super) fn open_record(path: &Path) -> Result<(File, bool), Error> {
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
    // O_CREAT | O_EXCL: fails on any existing path, a dangling link included. Not
    // `store_files::private_file`: the record is read through this handle too.
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
pub(super) fn same_file(path: &Path, file: &File) -> Result<(), Error> {
    let opened = FileIdentity::of(file).map_err(|error| io_error(path, "stat", &error))?;
    match FileIdentity::of_path(path) {
        Ok(named) if named == opened => Ok(()),
        _ => Err(not_a_plain_file(path)),
    }
}

/// A lock no file operation can remove: an abstract Unix socket name, bound for as long as
/// the number is held and freed by the kernel when the process exits (Linux only; abstract
/// names belong to the network namespace, so processes sharing a lease directory must
/// share one).
#[derive(Debug)]
pub(super) struct Liveness {
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
