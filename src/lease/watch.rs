//! A window on a leased generator's waits for a previous holder's mark, open before
//! [`LeasedBuilder::acquire`](super::LeasedBuilder::acquire) returns, and a way to give an
//! acquire up.

use std::sync::{Mutex, PoisonError};

use crate::sync::{Arc, AtomicBool, Ordering};

/// A wait for a previous holder's mark: the number is held, and nothing is issued on it
/// before `until_unix_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MarkWait {
    /// The datacenter of the number waited on.
    pub datacenter: u64,
    /// The worker number waited on.
    pub worker: u64,
    /// The first Unix millisecond at which it may issue: the previous holder's mark plus one.
    pub until_unix_ms: u64,
}

/// Shows a process that waits for a mark what it waits for, and lets it give the wait up.
///
/// Give a clone to [`LeasedBuilder::watch`](super::LeasedBuilder::watch) and keep one: from
/// another thread, [`AcquireWatch::mark_wait`] says which number waits and until when,
/// while [`acquire`](super::LeasedBuilder::acquire) waits (at start) and while the keeper
/// waits for the mark of a number it took after a loss. [`AcquireWatch::cancel`] makes an
/// acquire still under way release what it holds and fail; once the acquire has returned,
/// it changes nothing (release the generator instead).
///
/// ```
/// use idgen::lease::{AcquireWatch, FileStore, LeasedGenerator, WorkerRange};
///
/// let dir = std::env::temp_dir().join(format!("idgen-doc-watch-{}", std::process::id()));
/// let watch = AcquireWatch::new();
/// let generator = LeasedGenerator::builder(FileStore::open(&dir)?, WorkerRange::parse(0, "0-3")?)
///     .watch(&watch)
///     .acquire()?;
/// // A new store: no previous holder, nothing waited for.
/// assert_eq!(watch.mark_wait(), None);
/// generator.release()?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idgen::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct AcquireWatch {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    waiting: Mutex<Option<MarkWait>>,
    cancelled: AtomicBool,
    /// Set when the acquire returned a generator: a cancel after it changes nothing.
    acquired: AtomicBool,
}

impl AcquireWatch {
    /// A watch on nothing yet.
    pub fn new() -> AcquireWatch {
        AcquireWatch::default()
    }

    /// The wait for a mark under way, if any.
    pub fn mark_wait(&self) -> Option<MarkWait> {
        *self
            .shared
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives up an acquire under way, or one not yet started: a wait for a mark ends at its
    /// next check (within a millisecond or two), and the acquire releases what it took and
    /// fails, at the latest when its store call under way returns. After the acquire
    /// returned a generator, nothing.
    pub fn cancel(&self) {
        self.shared.cancelled.store(true, Ordering::Release);
    }

    /// Whether [`AcquireWatch::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Acquire)
    }

    /// Whether an acquire still under way should give up.
    pub(super) fn gives_up(&self) -> bool {
        self.is_cancelled() && !self.shared.acquired.load(Ordering::Acquire)
    }

    pub(super) fn acquired(&self) {
        self.shared.acquired.store(true, Ordering::Release);
    }

    pub(super) fn set_waiting(&self, wait: Option<MarkWait>) {
        *self
            .shared
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = wait;
    }
}
