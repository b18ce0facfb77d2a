//! The fleet view behind the status page: one survey of the store's range shared by every
//! request, made again (on a thread of its own, off the runtime) when a request finds it
//! older than [`FLEET_MAX_AGE`]. However many pages are open, the store is surveyed at most
//! once per [`FLEET_MAX_AGE`], and never twice at once. The store is one of its own (a
//! connection apart from the one the service's lease renews through: see
//! `StoreArgs::survey_store`), so that a slow survey never queues a renewal.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idgen::lease::{LeaseStore, NumberRecord, WorkerRange};
use idgen::{Clock, SystemClock};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::http::lease_api::store_calls::off_runtime;

/// The oldest survey a request is answered with before a new one starts.
pub const FLEET_MAX_AGE: Duration = Duration::from_secs(2);

/// How long a request waits for a survey while none has ended yet.
const FIRST_SURVEY_WAIT: Duration = Duration::from_secs(1);

/// A survey under way this long is reported: the store does not answer.
const SURVEY_STALLED: Duration = Duration::from_secs(10);

/// A survey, and the last good records if it failed.
pub struct Surveyed {
    /// The records of the latest survey that succeeded.
    pub records: Vec<NumberRecord>,
    /// When that survey was made (Unix ms); `None` if none has succeeded.
    pub at_unix_ms: Option<u64>,
    /// Why the latest survey failed, if it did.
    pub error: Option<String>,
    /// When the latest survey started, for its age.
    started: Instant,
}

/// The shared, cached survey of one store's range.
pub struct FleetCache {
    store: Arc<dyn LeaseStore>,
    range: WorkerRange,
    far_ahead_ms: u64,
    max_age: Duration,
    latest: watch::Sender<Option<Arc<Surveyed>>>,
    /// When the survey under way started, if one is.
    under_way: Mutex<Option<Instant>>,
}

impl FleetCache {
    /// The cache of `store`'s `range`, where a mark more than `far_ahead` ahead of this
    /// clock is an anomaly (the fleet's TTL and outage horizon: no holder on a clock that
    /// agrees with this one writes one further).
    pub fn new(store: Arc<dyn LeaseStore>, range: WorkerRange, far_ahead: Duration) -> Arc<Self> {
        FleetCache::with_max_age(store, range, far_ahead, FLEET_MAX_AGE)
    }

    fn with_max_age(
        store: Arc<dyn LeaseStore>,
        range: WorkerRange,
        far_ahead: Duration,
        max_age: Duration,
    ) -> Arc<Self> {
        Arc::new(FleetCache {
            store,
            range,
            far_ahead_ms: u64::try_from(far_ahead.as_millis()).unwrap_or(u64::MAX),
            max_age,
            latest: watch::Sender::new(None),
            under_way: Mutex::new(None),
        })
    }

    /// How far ahead of this clock a mark is an anomaly, in milliseconds.
    pub fn far_ahead_ms(&self) -> u64 {
        self.far_ahead_ms
    }

    /// The latest survey; one is started if it is older than the maximum age (or none was
    /// made), and waited for up to [`FIRST_SURVEY_WAIT`] while none has ended.
    pub async fn latest(self: &Arc<Self>) -> Option<Arc<Surveyed>> {
        let mut updates = self.latest.subscribe();
        let current = updates.borrow_and_update().clone();
        if self.is_stale(current.as_deref()) {
            self.start_survey();
        }
        if current.is_some() {
            return current;
        }
        let _ = tokio::time::timeout(FIRST_SURVEY_WAIT, updates.changed()).await;
        updates.borrow().clone()
    }

    /// How long the survey under way has run, once that is past [`SURVEY_STALLED`].
    pub fn stalled_for(&self) -> Option<Duration> {
        let started = (*lock(&self.under_way))?;
        Some(started.elapsed()).filter(|running| *running >= SURVEY_STALLED)
    }

    fn is_stale(&self, surveyed: Option<&Surveyed>) -> bool {
        surveyed.is_none_or(|surveyed| surveyed.started.elapsed() >= self.max_age)
    }

    /// Starts a survey unless one is under way, or one ended since the caller looked.
    fn start_survey(self: &Arc<Self>) {
        {
            let mut under_way = lock(&self.under_way);
            if under_way.is_some() || !self.is_stale(self.latest.borrow().as_deref()) {
                return;
            }
            *under_way = Some(Instant::now());
        }
        let cache = Arc::clone(self);
        tokio::spawn(async move {
            let started = Instant::now();
            let (store, range) = (Arc::clone(&cache.store), cache.range);
            // A survey that panics is an error like another (off_runtime says so).
            let result = off_runtime(move || {
                let records = store.survey(&range);
                (records, SystemClock.now_unix_ms())
            })
            .await;
            let previous = cache.latest.borrow().clone();
            let (records, at_unix_ms) = previous
                .map(|previous| (previous.records.clone(), previous.at_unix_ms))
                .unwrap_or_default();
            let surveyed = match result {
                Ok((Ok(records), at)) => Surveyed {
                    records,
                    at_unix_ms: Some(at),
                    error: None,
                    started,
                },
                Ok((Err(error), _)) => Surveyed {
                    records,
                    at_unix_ms,
                    error: Some(error.to_string()),
                    started,
                },
                Err(error) => Surveyed {
                    records,
                    at_unix_ms,
                    error: Some(error.1),
                    started,
                },
            };
            // The new survey is in before the next may start.
            let mut under_way = lock(&cache.under_way);
            cache.latest.send_replace(Some(Arc::new(surveyed)));
            *under_way = None;
        });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use idgen::Error;
    use idgen::lease::Claim;

    use super::*;

    /// A store whose surveys are counted, and each waits for the test's word (a `true`
    /// answers, a `false` panics).
    #[derive(Debug)]
    struct CountingStore {
        surveys: AtomicUsize,
        go: Mutex<mpsc::Receiver<bool>>,
    }

    impl LeaseStore for CountingStore {
        fn ttl(&self) -> Duration {
            Duration::from_secs(3)
        }

        fn acquire(&self, _: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
            unreachable!("the fleet view takes no number")
        }

        fn survey(&self, range: &WorkerRange) -> Result<Vec<NumberRecord>, Error> {
            self.surveys.fetch_add(1, Ordering::SeqCst);
            let answer = lock(&self.go).recv().expect("the test hung up");
            assert!(answer, "a survey that panics");
            Ok(range
                .workers()
                .map(|worker| NumberRecord::new(range.datacenter(), worker))
                .collect())
        }
    }

    async fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_requests_at_once_share_one_survey_and_a_stale_one_is_made_again_once() {
        let (go, answers) = mpsc::channel();
        let store = Arc::new(CountingStore {
            surveys: AtomicUsize::new(0),
            go: Mutex::new(answers),
        });
        let range = WorkerRange::new(0, 0..=3).unwrap();
        let cache = FleetCache::with_max_age(
            Arc::clone(&store) as Arc<dyn LeaseStore>,
            range,
            Duration::from_secs(6),
            Duration::from_secs(1),
        );
        // Fifty requests while the first survey is under way: one survey.
        let requests: Vec<_> = (0..50)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move { cache.latest().await })
            })
            .collect();
        wait_for("the first survey", || {
            store.surveys.load(Ordering::SeqCst) == 1
        })
        .await;
        go.send(true).unwrap();
        for request in requests {
            request.await.unwrap();
        }
        wait_for("the survey's result", || cache.latest.borrow().is_some()).await;
        // Read without `latest()`, which would start another once this one is stale.
        let first = cache.latest.borrow().clone().unwrap();
        assert_eq!(first.records.len(), 4);
        assert_eq!(store.surveys.load(Ordering::SeqCst), 1);
        // Stale: the next request starts one more, and fifty more requests start none.
        wait_for("the survey to age", || {
            first.started.elapsed() >= cache.max_age
        })
        .await;
        for _ in 0..50 {
            cache.latest().await;
        }
        wait_for("the second survey", || {
            store.surveys.load(Ordering::SeqCst) == 2
        })
        .await;
        // One that panics ends like a failure: reported, the last records kept, and the
        // next survey starts once it is stale.
        go.send(false).unwrap();
        wait_for("the failed survey", || {
            cache
                .latest
                .borrow()
                .as_ref()
                .is_some_and(|s| s.error.is_some())
        })
        .await;
        let failed = cache.latest.borrow().clone().unwrap();
        assert_eq!(failed.records.len(), 4);
        assert_eq!(failed.at_unix_ms, first.at_unix_ms);
        wait_for("the failed survey to age", || {
            failed.started.elapsed() >= cache.max_age
        })
        .await;
        cache.latest().await;
        wait_for("a survey after the panic", || {
            store.surveys.load(Ordering::SeqCst) == 3
        })
        .await;
        go.send(true).unwrap();
        assert_eq!(cache.stalled_for(), None);
    }
}
