//! The service's own worker number, taken on a thread of its own while the service already
//! listens: a wait for a previous holder's mark, or for a number of a full range to come
//! free (a replacement started right after a crash), is answered with 503s that say what
//! is waited for and how long, instead of with silence or an exit.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, mpsc};
use std::time::{Duration, Instant};

use idgen::Layout;
use idgen::lease::{AcquireWatch, LeasedGenerator};

use crate::args::lease::{LeaseSource, acquire_failure};
use crate::failure::Failure;

/// How often a wait says in the log what it waits for.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// The first pause before a full range is asked again for a free number; it doubles, up
/// to a quarter of the TTL (at most [`RETRY_AT_MOST`]): each ask is a scan of the range.
const RETRY_FIRST: Duration = Duration::from_millis(250);

/// The longest pause between two asks of a full range.
const RETRY_AT_MOST: Duration = Duration::from_secs(5);

/// How long a stop waits for the thread taking the number once told to give up: a store
/// call under way may hang (a lock held by a paused process). Past it the process exits
/// without it: its locks and its etcd lease end with it, and its mark is written ahead.
const GIVE_UP_WITHIN: Duration = Duration::from_secs(5);

/// The thread taking the service's number; its result comes on `done`.
pub struct Taking {
    done: mpsc::Receiver<Result<(), Failure>>,
}

impl Taking {
    /// The thread's result once it ended, within [`GIVE_UP_WITHIN`]; `None` if it did not.
    pub fn result(self) -> Option<Result<(), Failure>> {
        match self.done.recv_timeout(GIVE_UP_WITHIN) {
            Ok(result) => Some(result),
            Err(mpsc::RecvTimeoutError::Disconnected) => Some(Err(Failure::runtime(
                "the thread taking the worker number panicked",
            ))),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
        }
    }
}

/// Calls its function on drop unless disarmed: a thread that panics stops the service too.
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(call) = self.0.take() {
            call();
        }
    }
}

/// The service's own lease: taken, or being taken.
pub struct OwnLease {
    generator: OnceLock<LeasedGenerator>,
    /// A wait for a free number under way: why, and when it gives up (Unix ms).
    number_wait: Mutex<Option<(String, u64)>>,
    watch: AcquireWatch,
}

/// Where the service's own lease stands while it has none.
pub enum Pending {
    /// Asking the store.
    Taking,
    /// Holding `worker` of `datacenter`, and issuing nothing until `until_unix_ms`.
    Mark {
        datacenter: u64,
        worker: u64,
        until_unix_ms: u64,
    },
    /// Every number of the range is held: `why`, and the service exits at `gives_up_unix_ms`
    /// if none comes free by then.
    Number { why: String, gives_up_unix_ms: u64 },
}

impl OwnLease {
    /// Starts taking a number of `source` on a thread of its own. A range whose numbers
    /// are held by live processes is asked again until `wait_for_number` has passed; every
    /// other failure, or that one past the bound, is the thread's result, after `failed`
    /// was called (to stop the service), as it is if the thread panics.
    pub fn start(
        source: LeaseSource,
        layout: Layout,
        wait_for_number: Duration,
        failed: impl FnOnce() + Send + 'static,
    ) -> Result<(Arc<OwnLease>, Taking), Failure> {
        let own = Arc::new(OwnLease {
            generator: OnceLock::new(),
            number_wait: Mutex::new(None),
            watch: AcquireWatch::new(),
        });
        let (sender, done) = mpsc::channel();
        {
            let own = Arc::clone(&own);
            std::thread::Builder::new()
                .name("idgen-own-lease".into())
                .spawn(move || {
                    let mut failed = OnDrop(Some(failed));
                    let taken = own.take(&source, layout, wait_for_number);
                    if taken.is_ok() {
                        failed.0 = None;
                    }
                    drop(failed);
                    let _ = sender.send(taken);
                })
                .map_err(|error| {
                    Failure::runtime(format!("cannot start the lease thread: {error}"))
                })?;
        }
        Ok((own, Taking { done }))
    }

    fn take(
        &self,
        source: &LeaseSource,
        layout: Layout,
        wait_for_number: Duration,
    ) -> Result<(), Failure> {
        let gives_up = Instant::now() + wait_for_number;
        let gives_up_unix_ms = now_unix_ms().saturating_add(millis(wait_for_number));
        let retry_at_most = (source.store.ttl() / 4).clamp(RETRY_FIRST, RETRY_AT_MOST);
        let mut retry = RETRY_FIRST;
        let mut next_report = Instant::now();
        let generator = loop {
            let acquired = source.acquire_watched(layout, &self.watch);
            match acquired {
                Ok(generator) => break generator,
                // Held by live processes: one may stop, or crash and free its number
                // within its TTL. (Numbers that are only unusable never come free.) Or the
                // store failed a request (a member lost, an election): it answered at
                // start, so that is an outage to wait out within the same bound; giving up
                // would stop a service that waits for a number whenever a member is lost.
                // Or the only free number's mark is further ahead of this clock than a start
                // may wait (its holder's clock ran ahead of this one's): the number was given
                // back untouched, and this clock passes the mark in time.
                Err(error)
                    if Instant::now() < gives_up
                        && !self.watch.is_cancelled()
                        && (matches!(error, idgen::Error::LeaseRangeFull { held, .. } if held > 0)
                            || matches!(
                                error,
                                idgen::Error::LeaseStore { .. }
                                    | idgen::Error::ClockBehindMark { .. }
                            )) =>
                {
                    let why = error.to_string();
                    if Instant::now() >= next_report {
                        let what = match error {
                            idgen::Error::LeaseStore { .. } => "trying again",
                            idgen::Error::ClockBehindMark { .. } => {
                                "waiting for this clock to pass it (are the hosts' clocks apart?)"
                            }
                            _ => {
                                "waiting for one to come free (a holder that crashed frees its \
                                 number within its TTL)"
                            }
                        };
                        tracing::warn!(
                            "{why}; {what}, for at most {} s more",
                            gives_up.saturating_duration_since(Instant::now()).as_secs()
                        );
                        next_report = Instant::now() + REPORT_EVERY;
                    }
                    *lock(&self.number_wait) = Some((why, gives_up_unix_ms));
                    let until = (Instant::now() + retry).min(gives_up);
                    while Instant::now() < until && !self.watch.is_cancelled() {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    retry = (retry * 2).min(retry_at_most);
                }
                // Stopped by a signal meanwhile: not a failure of the service.
                Err(error) if self.watch.is_cancelled() => {
                    tracing::info!("stopped before a worker number was taken ({error})");
                    return Ok(());
                }
                Err(error) => return Err(acquire_failure(error)),
            }
        };
        if self.watch.is_cancelled() {
            // Taken as the stop came: given back at once, nothing issued.
            let released = generator.release();
            tracing::info!("stopped as the worker number was taken; released: {released:?}");
            return Ok(());
        }
        let (worker, datacenter) = (generator.worker(), generator.datacenter());
        // Set once, by this thread: it cannot be full. Set before the line that says so.
        let _ = self.generator.set(generator);
        *lock(&self.number_wait) = None;
        tracing::info!(worker, datacenter, "lease taken");
        // The second line of output, read by scripts and tests: Snowflake IDs flow now. A
        // closed stdout (a reader gone) is no reason to stop serving.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "idgen: serving as worker {worker} of datacenter {datacenter}"
        )
        .and_then(|()| stdout.flush());
        Ok(())
    }

    /// The leased generator, once taken.
    pub fn generator(&self) -> Option<&LeasedGenerator> {
        self.generator.get()
    }

    /// What the service waits for while it has no number.
    pub fn pending(&self) -> Pending {
        if let Some(wait) = self.watch.mark_wait() {
            // A number is held: the wait for a free one is over.
            *lock(&self.number_wait) = None;
            return Pending::Mark {
                datacenter: wait.datacenter,
                worker: wait.worker,
                until_unix_ms: wait.until_unix_ms,
            };
        }
        match &*lock(&self.number_wait) {
            Some((why, gives_up_unix_ms)) => Pending::Number {
                why: why.clone(),
                gives_up_unix_ms: *gives_up_unix_ms,
            },
            None => Pending::Taking,
        }
    }

    /// Gives up taking a number (at shutdown): a wait under way ends within milliseconds.
    pub fn cancel(&self) {
        self.watch.cancel();
    }

    /// The generator, for its release, once nothing else holds this.
    pub fn into_generator(self) -> Option<LeasedGenerator> {
        self.generator.into_inner()
    }
}

impl Pending {
    /// Milliseconds from `now_unix_ms` until the mark passes, for a mark wait.
    pub fn mark_in_ms(&self, now_unix_ms: u64) -> Option<u64> {
        match self {
            Pending::Mark { until_unix_ms, .. } => Some(until_unix_ms.saturating_sub(now_unix_ms)),
            _ => None,
        }
    }

    /// Why Snowflake IDs are refused, for a 503's body.
    pub fn refusal(&self, now_unix_ms: u64) -> String {
        match self {
            Pending::Taking => "no worker number yet: the service is taking one".into(),
            Pending::Mark {
                datacenter,
                worker,
                until_unix_ms,
            } => format!(
                "no Snowflake IDs yet: worker {worker} of datacenter {datacenter} waits {} ms \
                 for its previous holder's mark",
                until_unix_ms.saturating_sub(now_unix_ms)
            ),
            Pending::Number {
                why,
                gives_up_unix_ms,
            } => format!(
                "no Snowflake IDs yet: {why}; waiting for one to come free (the service gives \
                 up in {} ms)",
                gives_up_unix_ms.saturating_sub(now_unix_ms)
            ),
        }
    }

    /// Whole seconds a client should wait before asking again: until the mark passes, or
    /// 1 while a number is being taken or waited for.
    pub fn retry_after_s(&self, now_unix_ms: u64) -> u64 {
        self.mark_in_ms(now_unix_ms)
            .map_or(1, |ms| ms.div_ceil(1000).max(1))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

pub fn now_unix_ms() -> u64 {
    idgen::Clock::now_unix_ms(&idgen::SystemClock)
}
