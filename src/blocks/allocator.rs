//! [`BlockAllocator`]: one sequence served from blocks, lock-free between block switches.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cursor::BlockCursor;
use super::{BlockStore, Grant, SequenceName};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::fork_check::BirthMark;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// The default size of the first block.
pub const DEFAULT_BLOCK_SIZE: u64 = 1_000;
/// The default smallest block the size adapts down to.
pub const DEFAULT_MIN_BLOCK_SIZE: u64 = 10;
/// The default largest block the size adapts up to.
pub const DEFAULT_MAX_BLOCK_SIZE: u64 = 1_000_000;
/// The default share of a block used before the next one is fetched.
pub const DEFAULT_REFILL_AT: f64 = 0.1;
/// The default longest a call waits for the store when both blocks are used up.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(2);
/// The default lifetime a block should last: shorter grows the size, twice as long shrinks it.
pub const DEFAULT_TARGET_BLOCK_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// The first wait after a failed fetch; it doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(10);
const MAX_RETRY: Duration = Duration::from_secs(1);

/// While blocks last less than a millisecond, the fetcher thread waits for the next request
/// this long by polling before it parks: waking a parked thread takes tens of microseconds
/// here, longer than a small block lasts.
const FETCHER_SPIN: Duration = Duration::from_millis(1);
/// A caller that runs out while a fetch is under way polls for it this long before it
/// blocks (a fetch from a fast store ends sooner than a blocked thread wakes).
const CALLER_SPIN: Duration = Duration::from_micros(50);

/// Values of one named sequence, served from blocks a [`BlockStore`] grants.
///
/// `next` and `next_n` take values from the current block with one compare-and-swap, from
/// any number of threads at once. When a configurable share of the block is used
/// ([`AllocatorBuilder::refill_at`], 10% by default) a background thread fetches the next
/// block, so that callers wait on the store only when both are used up, and then at most
/// [`AllocatorBuilder::max_wait`] before [`Error::BlocksUnavailable`]. The block size
/// doubles when a block lasted less than the target lifetime (15 minutes by default) and
/// halves when it lasted more than twice as long, within a minimum and a maximum.
///
/// Values are unique across every allocator of the same sequence and store, increase
/// within each allocator (and so within each thread), and fit a positive `i64`. Across
/// allocators they interleave block by block. On [`close`](BlockAllocator::close) (or
/// drop) the unused values go back to the store if nobody has taken a block since, so a
/// clean restart leaves no gap; a crash leaves a gap of at most two blocks.
///
/// ```
/// use idgen::blocks::{BlockAllocator, FileStore};
/// # let dir = std::env::temp_dir().join(format!("idgen-doc-alloc-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let orders = BlockAllocator::builder(store, "orders")?.block_size(100).build()?;
/// assert_eq!(orders.next()?, 1);
/// assert_eq!(orders.next_n(3)?, vec![2, 3, 4]);
/// orders.close()?; // gives 5..101 back: the next process starts at 5
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idgen::Error>(())
/// ```
pub struct BlockAllocator {
    shared: Arc<Shared>,
    fetcher: Mutex<Option<JoinHandle<()>>>,
}

/// What the callers, the fetcher thread and `close` share.
struct Shared {
    sequence: SequenceName,
    store: Box<dyn BlockStore>,
    clock: Box<dyn Clock>,
    config: Config,
    cursor: BlockCursor,
    /// The value whose taker asks for the next block (past the current block: none).
    refill_at: AtomicU64,
    state: Mutex<State>,
    /// Signalled when a fetch ends, a block is installed, a fetch is wanted, or on close.
    changed: Condvar,
    round_trips: AtomicU64,
    failed_round_trips: AtomicU64,
    waits: AtomicU64,
    /// A fetch is wanted: set by the caller at the refill point (or one that ran out),
    /// cleared by a fetch that succeeds.
    wanted: AtomicBool,
    /// The fetcher thread is parked on `changed` (so asking for a fetch must wake it).
    fetcher_parked: AtomicBool,
    /// `state.prefetched` holds a block (readable without the lock).
    ready: AtomicBool,
    /// `state.closed`, readable without the lock.
    closing: AtomicBool,
    /// The last block was used up within the millisecond it was installed.
    hot: AtomicBool,
    /// The process that built the allocator: a forked child has a copy of its blocks,
    /// which the parent also serves.
    birth: BirthMark,
}

#[derive(Debug, Clone, Copy)]
struct Config {
    initial: u64,
    min: u64,
    max: u64,
    refill_share: f64,
    max_wait: Duration,
    target_lifetime_ms: u64,
}

/// Under the lock: the blocks and what is happening to them.
#[derive(Debug, Default)]
struct State {
    current: Option<Grant>,
    installed_at_ms: u64,
    prefetched: Option<Grant>,
    /// A fetch is under way (only one at a time).
    fetching: bool,
    /// Callers (and `close`) blocked on `changed`.
    waiters: usize,
    /// The size of the next block to ask for.
    size: u64,
    blocks: u64,
    last_error: Option<Error>,
    /// The store said the sequence has no values left.
    exhausted: bool,
    closed: bool,
}

/// Counters of a [`BlockAllocator`], from [`BlockAllocator::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AllocatorStats {
    /// Grant requests sent to the store (failed ones included).
    pub round_trips: u64,
    /// Grant requests that failed (the store away, or refusing).
    pub failed_round_trips: u64,
    /// Blocks installed.
    pub blocks: u64,
    /// The size the next block is asked for with.
    pub block_size: u64,
    /// Calls that found both blocks used up and waited on the store.
    pub waits: u64,
}

/// Configures a [`BlockAllocator`]; from [`BlockAllocator::builder`].
pub struct AllocatorBuilder {
    sequence: SequenceName,
    store: Box<dyn BlockStore>,
    clock: Box<dyn Clock>,
    config: Config,
}

impl BlockAllocator {
    /// A builder for the sequence `name` (1 to 64 of `a-z`, `0-9`, `_`, `-`) on `store`.
    pub fn builder(
        store: impl BlockStore + 'static,
        name: &str,
    ) -> Result<AllocatorBuilder, Error> {
        Ok(AllocatorBuilder {
            sequence: SequenceName::new(name)?,
            store: Box::new(store),
            clock: Box::new(SystemClock),
            config: Config {
                initial: DEFAULT_BLOCK_SIZE,
                min: DEFAULT_MIN_BLOCK_SIZE,
                max: DEFAULT_MAX_BLOCK_SIZE,
                refill_share: DEFAULT_REFILL_AT,
                max_wait: DEFAULT_MAX_WAIT,
                target_lifetime_ms: DEFAULT_TARGET_BLOCK_LIFETIME.as_millis() as u64,
            },
        })
    }

    /// The sequence.
    pub fn sequence(&self) -> &SequenceName {
        &self.shared.sequence
    }

    /// The next value.
    ///
    /// Fails with [`Error::BlocksUnavailable`] (transient) when both blocks are used up and
    /// the store gave none within the configured wait, [`Error::SequenceExhausted`] at the
    /// end of the `i64` range, and [`Error::AllocatorClosed`] after [`close`](Self::close).
    #[inline]
    pub fn next(&self) -> Result<u64, Error> {
        self.shared.check_process()?;
        if let Some((first, upto)) = self.shared.cursor.take(1) {
            self.shared.after_take(first, upto);
            return Ok(first);
        }
        self.next_slow()
    }

    #[cold]
    fn next_slow(&self) -> Result<u64, Error> {
        let mut values = [0];
        self.fill(&mut values)?;
        Ok(values[0])
    }

    /// `n` values, increasing. Fails as [`next`](Self::next) does, and with
    /// [`Error::BatchTooLarge`] when the vector cannot be allocated; values taken before a
    /// failure are dropped (a gap, never handed out).
    pub fn next_n(&self, n: usize) -> Result<Vec<u64>, Error> {
        let mut values = Vec::new();
        values
            .try_reserve_exact(n)
            .map_err(|_| Error::BatchTooLarge { requested: n })?;
        values.resize(n, 0);
        self.fill(&mut values)?;
        Ok(values)
    }

    /// Fills `out` with increasing values, taking them a run at a time.
    pub fn fill(&self, out: &mut [u64]) -> Result<(), Error> {
        let shared = &*self.shared;
        shared.check_process()?;
        let mut filled = 0;
        let mut deadline = None;
        while filled < out.len() {
            let want = (out.len() - filled) as u64;
            match shared.cursor.take(want) {
                Some((first, upto)) => {
                    shared.after_take(first, upto);
                    for (slot, value) in out[filled..].iter_mut().zip(first..upto) {
                        *slot = value;
                    }
                    filled += (upto - first) as usize;
                }
                None => {
                    // No deadline for a wait too long to add (`Duration::MAX`: wait for ever).
                    let deadline = *deadline
                        .get_or_insert_with(|| Instant::now().checked_add(shared.config.max_wait));
                    shared.refill(deadline)?;
                }
            }
        }
        Ok(())
    }

    /// Counters: round trips, blocks, the next block's size, waits.
    pub fn stats(&self) -> AllocatorStats {
        let shared = &*self.shared;
        let state = shared.lock();
        AllocatorStats {
            round_trips: shared.round_trips.load(Ordering::Relaxed),
            failed_round_trips: shared.failed_round_trips.load(Ordering::Relaxed),
            blocks: state.blocks,
            block_size: state.size,
            waits: shared.waits.load(Ordering::Relaxed),
        }
    }

    /// Stops handing out values and gives the unused ones back to the store, if nobody has
    /// taken a block of the sequence since (then `true`: a restart continues without a
    /// gap). A fetch under way gets up to `max_wait` to end; if it has not, nothing is
    /// given back (`Ok(false)`: the unused values are a gap). Later calls fail with
    /// [`Error::AllocatorClosed`]; closing again returns `Ok(false)`. Dropping the
    /// allocator closes it too, logging a failure instead of returning it. In a forked
    /// child it does nothing: the blocks are the parent's.
    pub fn close(&self) -> Result<bool, Error> {
        let shared = &*self.shared;
        if shared.birth.in_forked_child() {
            // The parent still serves these blocks, and this process has no fetcher thread
            // (its lock may even be held by a thread that did not come along): touch nothing.
            return Ok(false);
        }
        let (unused_from, current, prefetched) = {
            let mut state = shared.lock();
            if state.closed {
                return Ok(false);
            }
            state.closed = true;
            shared.closing.store(true, Ordering::SeqCst);
            shared.changed.notify_all();
            // A fetch under way gets `max_wait` to end; past that its block, if it ever
            // comes, is a gap, and nothing is given back.
            let deadline = Instant::now().checked_add(shared.config.max_wait);
            while state.fetching {
                let now = Instant::now();
                let Some(left) = deadline.map(|deadline| deadline.saturating_duration_since(now))
                else {
                    state.waiters += 1;
                    state = shared.wait(state);
                    state.waiters -= 1;
                    continue;
                };
                if left.is_zero() {
                    shared.cursor.close();
                    return Ok(false);
                }
                state.waiters += 1;
                state = shared.wait_timeout(state, left);
                state.waiters -= 1;
            }
            (
                shared.cursor.close(),
                state.current,
                state.prefetched.take(),
            )
        };
        let fetcher = self
            .fetcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(fetcher) = fetcher {
            // No fetch is under way, and it exits as soon as it sees `closing`.
            let _ = fetcher.join();
        }
        let sequence = &shared.sequence;
        match (current, prefetched) {
            (current, Some(next)) => {
                // The current block's tail joins the prefetched block when they touch.
                let from = match current {
                    Some(current) if current.end == next.first => unused_from,
                    _ => next.first,
                };
                shared.store.give_back(sequence, &next, from)
            }
            (Some(current), None) if unused_from < current.end => {
                shared.store.give_back(sequence, &current, unused_from)
            }
            _ => Ok(false),
        }
    }
}

impl Shared {
    /// Refuses every call in a forked child: its copy of the blocks is the parent's too.
    #[inline]
    fn check_process(&self) -> Result<(), Error> {
        if self.birth.in_forked_child() {
            return Err(Error::AllocatorForked {
                sequence: self.sequence.to_string(),
            });
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent at every unlock: a panic elsewhere leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_timeout<'a>(
        &self,
        state: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(state, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// The taker of the refill point asks the fetcher for the next block.
    #[inline]
    fn after_take(&self, first: u64, upto: u64) {
        let refill_at = self.refill_at.load(Ordering::Relaxed);
        if (first..upto).contains(&refill_at) {
            self.want_fetch(None);
        }
    }

    /// Asks the fetcher thread for a block, waking it only if it is parked. `locked` is the
    /// state's guard when the caller holds it.
    fn want_fetch(&self, locked: Option<&MutexGuard<'_, State>>) {
        // SeqCst on `wanted` and `fetcher_parked`, here and in the fetcher: either this
        // sees it parked and wakes it, or it sees `wanted` before it parks.
        if self.wanted.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.fetcher_parked.load(Ordering::SeqCst) {
            match locked {
                Some(_) => self.changed.notify_all(),
                None => {
                    let _state = self.lock();
                    self.changed.notify_all();
                }
            }
        }
    }

    /// Makes a new block current, once the current one is used up: the prefetched block,
    /// else the one the fetcher thread is asked for, waiting until `deadline`. Callers never
    /// call the store themselves, so a store that hangs delays them by `max_wait` at most.
    fn refill(&self, deadline: Option<Instant>) -> Result<(), Error> {
        let mut state = self.lock();
        let mut counted = false;
        let mut polled = false;
        loop {
            if state.closed {
                return Err(Error::AllocatorClosed {
                    sequence: self.sequence.to_string(),
                });
            }
            if !self.cursor.is_used_up() {
                return Ok(()); // another caller installed a block
            }
            if let Some(grant) = state.prefetched.take() {
                self.ready.store(false, Ordering::Release);
                return self.install(&mut state, grant);
            }
            if state.exhausted {
                return Err(Error::SequenceExhausted {
                    sequence: self.sequence.to_string(),
                });
            }
            if !counted {
                counted = true;
                self.waits.fetch_add(1, Ordering::Relaxed);
            }
            self.want_fetch(Some(&state));
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(Error::BlocksUnavailable {
                    sequence: self.sequence.to_string(),
                    waited_ms: self.config.max_wait.as_millis() as u64,
                    reason: state
                        .last_error
                        .as_ref()
                        .map_or_else(|| "the store has not answered".into(), |e| e.to_string()),
                });
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

    /// One fetch from the store, with the lock released meanwhile; the block goes to
    /// `prefetched`. Only while no other fetch is under way.
    fn fetch<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
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
            self.changed.notify_all();
        }
        state
    }

    /// A grant that can hold values of a sequence, or an error naming the store's fault.
    fn checked(&self, grant: Grant) -> Result<Grant, Error> {
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

    fn install(&self, state: &mut State, grant: Grant) -> Result<(), Error> {
        let now_ms = self.clock.now_unix_ms();
        if let Some(current) = state.current {
            self.hot
                .store(now_ms <= state.installed_at_ms, Ordering::Relaxed);
            // Blocks only go up (see the cursor); one that does not is a store that lost
            // its state, and serving it could hand out values again.
            if grant.first < current.end {
                state.closed = true;
                self.closing.store(true, Ordering::SeqCst);
                self.changed.notify_all();
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
            self.changed.notify_all();
        }
        Ok(())
    }

    /// Doubles the size after a block that lasted less than the target, halves it after
    /// one that lasted more than twice the target.
    fn adapt(&self, state: &mut State) {
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
    fn run_fetcher(&self) {
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
    fn wait_until_wanted(&self) -> bool {
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

impl AllocatorBuilder {
    /// The size of the first block (default 1,000), also the size it adapts from.
    pub fn block_size(mut self, size: u64) -> Self {
        self.config.initial = size;
        self
    }

    /// The smallest (default 10) and largest (default 1,000,000) size it adapts within.
    /// Equal bounds fix the size.
    pub fn block_size_bounds(mut self, min: u64, max: u64) -> Self {
        self.config.min = min;
        self.config.max = max;
        self
    }

    /// Every block `size` values: no adapting.
    pub fn fixed_block_size(self, size: u64) -> Self {
        self.block_size(size).block_size_bounds(size, size)
    }

    /// The share of a block (0 to below 1, default 0.1) used before the next block is
    /// fetched in the background.
    pub fn refill_at(mut self, share: f64) -> Self {
        self.config.refill_share = share;
        self
    }

    /// The longest a call waits for the store when both blocks are used up (default 2 s),
    /// and the longest `close` waits for a fetch under way. `Duration::MAX` waits for ever;
    /// zero fails every call that finds both blocks used up, the first call included.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.config.max_wait = wait;
        self
    }

    /// How long a block should last (default 15 minutes): the size doubles after a block
    /// that lasted less, and halves after one that lasted more than twice as long.
    pub fn target_block_lifetime(mut self, lifetime: Duration) -> Self {
        self.config.target_lifetime_ms = lifetime.as_millis().min(u128::from(u64::MAX)) as u64;
        self
    }

    /// The clock that times how long blocks last (default [`SystemClock`]).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// The allocator, with its fetcher thread. It takes its first block on the first call.
    pub fn build(self) -> Result<BlockAllocator, Error> {
        let config = self.config;
        let refuse = |reason: String| Err(Error::BlockConfig { reason });
        if config.min == 0 || config.min > config.initial || config.initial > config.max {
            return refuse(format!(
                "block sizes must satisfy 1 <= min <= initial <= max; got min {}, initial {}, \
                 max {}",
                config.min, config.initial, config.max
            ));
        }
        if !(0.0..1.0).contains(&config.refill_share) {
            return refuse(format!(
                "the refill point must be a share from 0 to below 1; got {}",
                config.refill_share
            ));
        }
        let shared = Arc::new(Shared {
            sequence: self.sequence,
            store: self.store,
            clock: self.clock,
            config,
            cursor: BlockCursor::new(),
            refill_at: AtomicU64::new(u64::MAX),
            state: Mutex::new(State {
                size: config.initial,
                ..State::default()
            }),
            changed: Condvar::new(),
            round_trips: AtomicU64::new(0),
            failed_round_trips: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
            fetcher_parked: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            hot: AtomicBool::new(false),
            birth: BirthMark::new(),
        });
        let worker = Arc::clone(&shared);
        let fetcher = std::thread::Builder::new()
            .name(format!("idgen-blocks-{}", shared.sequence))
            .spawn(move || worker.run_fetcher())
            .map_err(|error| Error::BlockConfig {
                reason: format!("could not start the fetcher thread: {error}"),
            })?;
        Ok(BlockAllocator {
            shared,
            fetcher: Mutex::new(Some(fetcher)),
        })
    }
}

impl Drop for BlockAllocator {
    /// Closes: may block on the store (at most `max_wait` for a fetch under way, then a
    /// give-back); from async code, close or drop it with `spawn_blocking`.
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            log::warn!(
                "sequence {}: the unused values were not given back: {error}",
                self.shared.sequence
            );
        }
    }
}

impl fmt::Debug for BlockAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockAllocator")
            .field("sequence", &self.shared.sequence)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for AllocatorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AllocatorBuilder")
            .field("sequence", &self.sequence)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
