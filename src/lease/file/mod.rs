//! The embedded default store, [`FileStore`]: one directory, one record file per worker
//! number, each held with an OS advisory lock, plus the store's own bookkeeping files.
//!
//! This file holds the store's type, the names of its files and the errors every part
//! raises. The others, each using only this file, the files above it in this list, the
//! lease traits (`crate::lease`) and `crate::store_files` (helpers shared with the block
//! store):
//!
//! - `roster.rs`: the roster's format (which numbers were ever handed out). Plain text in,
//!   plain text out: no files.
//! - `record.rs`: the record's format (a number's mark, holder and file, checksummed), and
//!   the fuzz target's entry point, which reads both formats.
//! - `identity.rs`: the OS's side: opening a record without following links, checking a
//!   path still names the file opened, and the liveness locks no file operation removes.
//! - `dir.rs`: the directory: the default ones, creating a store whole, refusing one that
//!   others may write, and the old default an older idgen may still hold numbers in.
//! - `open.rs`: opening and initialising a store, and reading its roster.
//! - `settings.rs`: the store-wide files: the layout it serves and the longest outage
//!   horizon.
//! - `claim.rs`: a held number, [`Claim`](crate::lease::Claim): renewing and releasing it.
//! - `acquire.rs`: [`LeaseStore`](crate::lease::LeaseStore) for the store: taking the lowest
//!   free number of a range, and surveying a range.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Error;
use crate::store_files::io_reason;

mod acquire;
mod claim;
mod dir;
mod identity;
mod open;
mod record;
mod roster;
mod settings;

// Only the block store looks for its default directory beside the leases.
#[cfg(feature = "blocks")]
pub(crate) use dir::default_state_dir;
pub use dir::{default_lease_dir, legacy_lease_dir};
#[cfg(fuzzing)]
pub(crate) use record::fuzz_read;

/// The file store's default TTL: how far ahead of each renewal its mark is written, and so
/// the longest a successor waits after a holder crashed.
pub const FILE_STORE_DEFAULT_TTL: Duration = Duration::from_secs(3);

/// The longest TTL a file store takes: a day. Marks are written at least a TTL ahead, so a longer one
/// would only block a crashed holder's number for longer.
pub const FILE_STORE_MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The store's bookkeeping file: which numbers were ever handed out.
const ROSTER: &str = "store.idgen";

/// The layout the store serves ([`Layout::record`](crate::Layout::record)'s line), written once.
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
///   ([`Claim::previous_mark_unknown`](crate::lease::Claim::previous_mark_unknown)) and the next holder waits an outage horizon past the moment it
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

// The lease store's own variant, not the block store's: a caller, and the message ("lease
// store: ..."), can tell which store failed.
fn io_error(path: &Path, action: &str, error: &std::io::Error) -> Error {
    Error::LeaseStore {
        reason: io_reason(path, action, error),
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
