//! What a [`BlockAllocator`](super::BlockAllocator)'s callers, its fetcher thread and
//! `close` share ([`Shared`]), and the fetching: asking the store for the next block ahead
//! of need, installing it, adapting the block size, retrying with backoff.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::cursor::BlockCursor;
use super::{BlockStore, Grant, SequenceName};
use crate::clock::Clock;
use crate::error::Error;
use crate::fork_check::BirthMark;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// The first wait after a failed fetch; it doubles up to [`MAX_RETRY`].
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(10);
pub(super) const MAX_RETRY: Duration = Duration::from_secs(1);

/// While blocks last less than a millisecond, the fetcher thread waits for the next request
/// this long by polling before it parks: waking a parked thread takes tens of microseconds
/// here, longer than a small block lasts.
pub(super) const FETCHER_SPIN: Duration = Duration::from_millis(1);
/// A caller that runs out while a fetch is under way polls for it this long before it
/// blocks (a fetch from a fast store ends sooner than a blocked thread wakes).
pub(super) const CALLER_SPIN: Duration = Duration::from_micros(50);

/// What the callers, the fetcher thread and `close` share.
pub(super) struct Shared {
    pub(super) sequence: SequenceName,
    pub(super) store: Box<dyn BlockStore>,
    pub(super) clock: Box<dyn Clock>,
    pub(super) config: Config,
    pub(super) cursor: BlockCursor,
    /// The value whose taker asks for the next block (past the current block: none).
    pub(super) refill_at: AtomicU64,
    pub(super) state: Mutex<State>,
    /// Signalled when a fetch ends, a block is installed, a fetch is wanted, or on close.
    pub(super) changed: Condvar,
    /// `changed` for the async callers (`next_async`), signalled with it.
    #[cfg(feature = "tokio")]
    pub(super) changed_async: tokio::sync::Notify,
    pub(super) round_trips: AtomicU64,
    pub(super) failed_round_trips: AtomicU64,
    pub(super) waits: AtomicU64,
    /// A fetch is wanted: set by the caller at the refill point (or one that ran out),
    /// cleared by a fetch that succeeds.
    pub(super) wanted: AtomicBool,
    /// The fetcher thread is parked on `changed` (so asking for a fetch must wake it).
    pub(super) fetcher_parked: AtomicBool,
    /// `state.prefetched` holds a block (readable without the lock).
    pub(super) ready: AtomicBool,
    /// `state.closed`, readable without the lock.
    pub(super) closing: AtomicBool,
    /// The last block was used up within the millisecond it was installed.
    pub(super) hot: AtomicBool,
    /// The process that built the allocator: a forked child has a copy of its blocks,
    /// which the parent also serves.
    pub(super) birth: BirthMark,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Config {
    pub(super) initial: u64,
    pub(super) min: u64,
    pub(super) max: u64,
    pub(super) refill_share: f64,
    pub(super) max_wait: Duration,
    pub(super) target_lifetime_ms: u64,
}

/// Under the lock: the blocks and what is happening to them.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) current: Option<Grant>,
    pub(super) installed_at_ms: u64,
    pub(super) prefetched: Option<Grant>,
    /// A fetch is under way (only one at a time).
    pub(super) fetching: bool,
    /// Callers (and `close`) blocked on `changed`.
    pub(super) waiters: usize,
    /// The size of the next block to ask for.
    pub(super) size: u64,
    pub(super) blocks: u64,
    pub(super) last_error: Option<Error>,
    /// The store said the sequence has no values left.
    pub(super) exhausted: bool,
    pub(super) closed: bool,
}

impl Shared {
    pub(super) fn new(
        sequence: SequenceName,
        store: Box<dyn BlockStore>,
        clock: Box<dyn Clock>,
        config: Config,
    ) -> Shared {
        Shared {
            sequence,
            store,
            clock,
            config,
            cursor: BlockCursor::new(),
            refill_at: AtomicU64::new(u64::MAX),
            state: Mutex::new(State {
                size: config.initial,
                ..State::default()
            }),
            changed: Condvar::new(),
            #[cfg(feature = "tokio")]
            changed_async: tokio::sync::Notify::new(),
            round_trips: AtomicU64::new(0),
            failed_round_trips: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
            fetcher_parked: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            hot: AtomicBool::new(false),
            birth: BirthMark::new(),
        }
    }

    /// Refuses every call in a forked child: its copy of the blocks is the parent's too.
    #[inline]
    pub(super) fn check_process(&self) -> Result<(), Error> {
        if self.birth.in_forked_child() {
            return Err(Error::AllocatorForked {
                sequence: self.sequence.to_string(),
            });
        }
        Ok(())
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent at every unlock: a panic elsewhere leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn wait_timeout<'a>(
        &self,
        state: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(state, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// Takes values from the current block into the start of `out` (at most its length),
    /// and returns how many: 0 when the block is used up.
    pub(super) fn take_into(&self, out: &mut [u64]) -> usize {
        let Some((first, upto)) = self.cursor.take(out.len() as u64) else {
            return 0;
        };
        self.after_take(first, upto);
        for (slot, value) in out.iter_mut().zip(first..upto) {
            *slot = value;
        }
        (upto - first) as usize
    }

    /// Wakes everyone waiting on `changed`, thread or task.
    pub(super) fn signal(&self) {
        self.changed.notify_all();
        #[cfg(feature = "tokio")]
        self.changed_async.notify_waiters();
    }

    /// The taker of the refill point asks the fetcher for the next block.
    #[inline]
    pub(super) fn after_take(&self, first: u64, upto: u64) {
        let refill_at = self.refill_at.load(Ordering::Relaxed);
        if (first..upto).contains(&refill_at) {
            self.want_fetch(None);
        }
    }

    /// Asks the fetcher thread for a block, waking it only if it is parked. `locked` is the
    /// state's guard when the caller holds it.
    pub(super) fn want_fetch(&self, locked: Option<&MutexGuard<'_, State>>) {
        // SeqCst on `wanted` and `fetcher_parked`, here and in the fetcher: either this
        // sees it parked and wakes it, or it sees `wanted` before it parks.
        if self.wanted.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.fetcher_parked.load(Ordering::SeqCst) {
            match locked {
                Some(_) => self.signal(),
                None => {
                    let _state = self.lock();
                    self.signal();
                }
            }
        }
    }

    /// Makes a new block current, once the current one is used up: the prefetched block,
    /// else the one the fetcher thread is asked for, waiting until `deadline`. Callers never
    /// call the store themselves, so a store that hangs delays them by `max_wait` at most.
    pub(super) fn refill(&self, deadline: Option<Instant>) -> Result<(), Error> {
        let mut state = self.lock();
        let mut counted = false;
        let mut polled = false;
        loop {
            if let Some(decided) = self.refill_decided(&mut state, &mut counted) {
                return decided;
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(self.unavailable(&state));
            }
            if !polled && state.last_error.is_none() {
                // Poll briefly, without the lock, before blocking.
                polled = true;
                drop(state);
                let until = now + deadline.map_or(CALLER_SPIN, |d| CALLER_SPIN.min(d - now));
                while !self.ready.load(Ordering::Acquire) && Instant::now() < until {
                    std::hint::spin_loop();
                }
                state = self.lock();
                continue;
            }
            state.waiters += 1;
            state = match deadline {
                Some(deadline) => self.wait_timeout(state, deadline - now),
                None => self.wait(state),
            };
            state.waiters -= 1;
        }
    }

    /// What a caller that ran out does now, under the lock: `Some` when it is decided (a
    /// block became current, or the allocator cannot serve), `None` when it must wait for
    /// the fetcher (which it has asked for a block). Counts the caller's wait once.
    pub(super) fn refill_decided(
        &self,
        state: &mut MutexGuard<'_, State>,
        counted: &mut bool,
    ) -> Option<Result<(), Error>> {
        if state.closed {
            return Some(Err(Error::AllocatorClosed {
                sequence: self.sequence.to_string(),
            }));
        }
        if !self.cursor.is_used_up() {
            return Some(Ok(())); // another caller installed a block
        }
        if let Some(grant) = state.prefetched.take() {
            self.ready.store(false, Ordering::Release);
            return Some(self.install(state, grant));
        }
        if state.exhausted {
            return Some(Err(Error::SequenceExhausted {
                sequence: self.sequence.to_string(),
            }));
        }
        if !*counted {
            *counted = true;
            self.waits.fetch_add(1, Ordering::Relaxed);
        }
        self.want_fetch(Some(&*state));
        None
    }

    /// The error of a caller whose wait for a block ran out.
    pub(super) fn unavailable(&self, state: &State) -> Error {
        Error::BlocksUnavailable {
            sequence: self.sequence.to_string(),
            waited_ms: self.config.max_wait.as_millis() as u64,
            reason: state
                .last_error
                .as_ref()
                .map_or_else(|| "the store has not answered".into(), |e| e.to_string()),
        }
    }

    /// One fetch from the store, with the lock released meanwhile; the block goes to
    /// `prefetched`. Only while no other fetch is under way.
    pub(super) fn fetch<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        debug_assert!(!state.fetching && state.prefetched.is_none());
        state.fetching = true;
        let size = state.size;
        drop(state);
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        // A store that panics must not leave `fetching` set for ever (every later call
        // would wait for a fetch that never ends): its panic is an error like any other.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.store.grant(&self.sequence, size)
        }))
        .unwrap_or_else(|_| {
            Err(Error::BlockStore {
                reason: "the store panicked while granting a block".into(),
            })
        })
        .and_then(|grant| self.checked(grant));
        let mut state = self.lock();
        state.fetching = false;
        match result {
            Ok(grant) => {
                state.prefetched = Some(grant);
                self.ready.store(true, Ordering::Release);
                self.wanted.store(false, Ordering::SeqCst);
                state.last_error = None;
            }
            Err(error) => {
                self.failed_round_trips.fetch_add(1, Ordering::Relaxed);
                if matches!(error, Error::SequenceExhausted { .. }) {
                    state.exhausted = true;
                    self.wanted.store(false, Ordering::SeqCst);
                }
                state.last_error = Some(error);
            }
        }
        if state.waiters > 0 {
            self.signal();
        }
        state
    }

    /// A grant that can hold values of a sequence, or an error naming the store's fault.
    pub(super) fn checked(&self, grant: Grant) -> Result<Grant, Error> {
        if grant.first == 0 || grant.first >= grant.end || grant.end > super::MAX_VALUE + 1 {
            return Err(Error::BlockStore {
                reason: format!(
                    "the store granted {}..{} of {}: not a block of values from 1 to 2^63 - 1",
                    grant.first, grant.end, self.sequence
                ),
            });
        }
        Ok(grant)
    }

    pub(super) fn install(&self, state: &mut State, grant: Grant) -> Result<(), Error> {
        let now_ms = self.clock.now_unix_ms();
        if let Some(current) = state.current {
            self.hot
                .store(now_ms <= state.installed_at_ms, Ordering::Relaxed);
            // Blocks only go up (see the cursor); one that does not is a store that lost
            // its state, and serving it could hand out values again.
            if grant.first < current.end {
                state.closed = true;
                self.closing.store(true, Ordering::SeqCst);
                self.signal();
                return Err(Error::BlockStore {
                    reason: format!(
                        "the store granted {}..{} of {} after {}..{}: it went back; stopping \
                         rather than handing out values twice",
                        grant.first, grant.end, self.sequence, current.first, current.end
                    ),
                });
            }
            self.adapt(state);
        }
        let len = grant.len();
        let refill_at = grant.first + (len as f64 * self.config.refill_share) as u64;
        self.refill_at
            .store(refill_at.min(grant.end - 1), Ordering::Relaxed);
        self.cursor.install(grant.first, grant.end);
        state.current = Some(grant);
        state.installed_at_ms = now_ms;
        state.blocks += 1;
        if state.waiters > 0 {
            self.signal();
        }
        Ok(())
    }

    /// Doubles the size after a block that lasted less than the target, halves it after
    /// one that lasted more than twice the target.
    pub(super) fn adapt(&self, state: &mut State) {
        let lasted = self
            .clock
            .now_unix_ms()
            .saturating_sub(state.installed_at_ms);
        let target = self.config.target_lifetime_ms;
        state.size = if lasted < target {
            state.size.saturating_mul(2).min(self.config.max)
        } else if lasted / 2 > target {
            (state.size / 2).max(self.config.min)
        } else {
            state.size
        };
    }

    /// The fetcher thread: fetches when asked, until the allocator closes. A failed fetch
    /// is tried again after a pause that doubles up to a second; callers see the error
    /// only if they run out meanwhile.
    pub(super) fn run_fetcher(&self) {
        let mut retry = FIRST_RETRY;
        let mut not_before: Option<Instant> = None;
        loop {
            if !self.wait_until_wanted() {
                return;
            }
            let mut state = self.lock();
            if state.closed {
                return;
            }
            if state.fetching || state.prefetched.is_some() || state.exhausted {
                self.wanted.store(false, Ordering::SeqCst);
                continue;
            }
            if let Some(at) = not_before {
                let now = Instant::now();
                if now < at {
                    drop(self.wait_timeout(state, at - now));
                    continue;
                }
            }
            state = self.fetch(state);
            if state.last_error.is_some() && !state.exhausted {
                if state.waiters == 0 {
                    // Only a prefetch failed: nobody waits, so stop asking the store; the
                    // first caller to run out asks again.
                    self.wanted.store(false, Ordering::SeqCst);
                    not_before = None;
                    retry = FIRST_RETRY;
                } else {
                    not_before = Some(Instant::now() + retry);
                    retry = (retry * 2).min(MAX_RETRY);
                }
            } else {
                not_before = None;
                retry = FIRST_RETRY;
            }
        }
    }

    /// Waits until a fetch is wanted (`true`) or the allocator closes (`false`): polling
    /// for [`FETCHER_SPIN`] while blocks go fast, else parked on `changed`.
    pub(super) fn wait_until_wanted(&self) -> bool {
        let poll_until = self
            .hot
            .load(Ordering::Relaxed)
            .then(|| Instant::now() + FETCHER_SPIN);
        let mut spins = 0u32;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return false;
            }
            if self.wanted.load(Ordering::SeqCst) {
                return true;
            }
            if poll_until.is_some_and(|until| Instant::now() < until) {
                spins += 1;
                if spins.is_multiple_of(64) {
                    // Two cores may be all there is: let the callers run.
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            let state = self.lock();
            self.fetcher_parked.store(true, Ordering::SeqCst);
            if !self.wanted.load(Ordering::SeqCst) && !state.closed {
                drop(self.wait(state));
            }
            self.fetcher_parked.store(false, Ordering::SeqCst);
        }
    }
}
