//! What every lease store promises, checked on each: the file store, etcd (feature `etcd`,
//! on the server `.ci/test` starts) and PostgreSQL (feature `postgres`, likewise). Each
//! check is one function over a [`Backend`]; a module per store runs them all. A store's
//! own tests (its files, its keys, its rows) stay in `lease_file.rs`, `lease_etcd.rs` and
//! `lease_postgres.rs`.

#[path = "common/leases.rs"]
mod leases;

use std::collections::BTreeSet;
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use idgen::lease::{FileStore, LeaseStore, NumberState, WorkerRange};
use idgen::{Clock, Error};

/// The stores' TTL (etcd's shortest): short, since two checks wait for holdings to run out,
/// yet long enough that a holding a check relies on outlives a thread starved of the CPU
/// (two CPU burners beside the tests) between its last write and the next look.
const TTL: Duration = Duration::from_secs(2);

/// A kind of store, and how a test gets a place of its own in it.
#[derive(Clone, Copy)]
enum Backend {
    File,
    #[cfg(feature = "etcd")]
    Etcd,
    #[cfg(feature = "postgres")]
    Postgres,
}

/// A name no other test (or earlier run) uses.
#[cfg(any(feature = "etcd", feature = "postgres"))]
fn unique(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "/idgen-test/conformance-{test}-{}-{nanos}",
        std::process::id()
    )
}

/// Marks an hour and a horizon behind: passed, so nothing waits for them.
#[cfg(any(feature = "etcd", feature = "postgres"))]
fn an_hour_ago() -> u64 {
    idgen::SystemClock.now_unix_ms() - 3_600_000
}

impl Backend {
    /// A new place (directory, namespace) for `test`, initialised.
    fn fresh(self, test: &str) -> String {
        match self {
            Backend::File => leases::new_store_dir(&format!("conformance-{test}"))
                .display()
                .to_string(),
            #[cfg(feature = "etcd")]
            Backend::Etcd => {
                let namespace = unique(test);
                leases::patiently("initialising", || {
                    idgen::lease::EtcdStore::connect(&[etcd_endpoints()], &namespace)?.init(
                        0..=0,
                        0..=31,
                        an_hour_ago(),
                    )
                })
                .unwrap();
                namespace
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres => {
                let namespace = unique(test);
                leases::patiently("initialising", || {
                    idgen::lease::PostgresStore::connect(&postgres_url(), &namespace)?.init(
                        0..=0,
                        0..=31,
                        an_hour_ago(),
                    )
                })
                .unwrap();
                namespace
            }
        }
    }

    /// A handle on `place`, as another process would open it, with the [`TTL`].
    fn open(self, place: &str) -> Box<dyn LeaseStore> {
        match self {
            Backend::File => Box::new(FileStore::open(place).unwrap().with_ttl(TTL).unwrap()),
            #[cfg(feature = "etcd")]
            Backend::Etcd => Box::new(
                leases::patiently("connecting", || {
                    idgen::lease::EtcdStore::connect(&[etcd_endpoints()], place)
                })
                .unwrap()
                .with_ttl(TTL)
                .unwrap(),
            ),
            #[cfg(feature = "postgres")]
            Backend::Postgres => Box::new(
                leases::patiently("connecting", || {
                    idgen::lease::PostgresStore::connect(&postgres_url(), place)
                })
                .unwrap()
                .with_ttl(TTL)
                .unwrap(),
            ),
        }
    }

    /// Whether a holding ends on its own when its holder stops renewing while it lives (a
    /// networked store), rather than only when the process ends (the file store's lock).
    fn expires(self) -> bool {
        !matches!(self, Backend::File)
    }
}

#[cfg(feature = "etcd")]
fn etcd_endpoints() -> String {
    std::env::var("IDGEN_ETCD_ENDPOINTS").expect(
        "IDGEN_ETCD_ENDPOINTS is not set: run the tests through .ci/test, which starts etcd",
    )
}

#[cfg(feature = "postgres")]
fn postgres_url() -> String {
    std::env::var("IDGEN_POSTGRES_URL").expect(
        "IDGEN_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL",
    )
}

fn range(text: &str) -> WorkerRange {
    WorkerRange::parse(0, text).unwrap()
}

/// Waits (bounded) until `worker` has no live holder: its holding ran out.
fn wait_until_free(store: &dyn LeaseStore, worker: u64) {
    let range = range(&format!("{worker}-{worker}"));
    leases::wait_for(&format!("worker {worker}'s holding to run out"), || {
        leases::patiently("surveying", || store.survey(&range)).unwrap()[0].state
            != NumberState::Held
    });
}

fn threads_get_distinct_numbers_then_the_range_is_full(backend: Backend) {
    let place = backend.fresh("distinct");
    let threads = 6;
    let barrier = Barrier::new(threads);
    let claims: Vec<_> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let store = backend.open(&place);
                    barrier.wait();
                    let claim = store.acquire(&range("10-15")).unwrap();
                    (store, claim)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let workers: BTreeSet<u64> = claims.iter().map(|(_, claim)| claim.worker()).collect();
    assert_eq!(workers, (10..=15).collect());
    let error = backend.open(&place).acquire(&range("10-15")).unwrap_err();
    assert!(
        matches!(error, Error::LeaseRangeFull { held: 6, .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("no free worker number in datacenter 0 workers 10-15: 6 held"),
        "{error}"
    );
    for (_, mut claim) in claims {
        claim.release(0).unwrap();
    }
    let again = backend.open(&place).acquire(&range("10-15")).unwrap();
    assert_eq!(again.worker(), 10, "released, so the lowest is free again");
}

fn a_released_mark_is_the_next_holders_previous_mark(backend: Backend) {
    let place = backend.fresh("released");
    let store = backend.open(&place);
    let mut first = store.acquire(&range("3-3")).unwrap();
    let now = idgen::SystemClock.now_unix_ms();
    first.renew(now + 5_000).unwrap();
    first.release(now + 1_234).unwrap();
    let second = backend.open(&place).acquire(&range("3-3")).unwrap();
    assert_eq!(second.worker(), 3);
    assert_eq!(second.previous_mark_unix_ms(), Some(now + 1_234));
    assert!(!second.previous_mark_unknown());
}

fn an_abandoned_claims_last_mark_is_the_next_holders_previous_mark(backend: Backend) {
    let place = backend.fresh("abandoned");
    let store = backend.open(&place);
    let mut first = store.acquire(&range("4-4")).unwrap();
    let now = idgen::SystemClock.now_unix_ms();
    first.renew(now + 2_000).unwrap();
    first.renew(now + 2_500).unwrap();
    // Dropped unreleased: a holder that stopped renewing (crashed, or cut off).
    drop(first);
    wait_until_free(store.as_ref(), 4);
    let second = backend.open(&place).acquire(&range("4-4")).unwrap();
    assert_eq!(second.previous_mark_unix_ms(), Some(now + 2_500));
}

fn of_processes_racing_with_layouts_exactly_one_records_its_own(backend: Backend) {
    let layouts = leases::distinct_layouts(6);
    for round in 0..5 {
        let place = backend.fresh(&format!("layout-race-{round}"));
        let stores = layouts.iter().map(|_| backend.open(&place)).collect();
        leases::assert_exactly_one_layout_wins(stores, &layouts);
        // And it stays so for a process that comes later.
        let late = backend.open(&place);
        let error = late.bind_layout(&idgen::Layout::DEFAULT).unwrap_err();
        assert!(matches!(error, Error::LayoutMismatch { .. }), "{error:?}");
    }
}

fn the_survey_shows_holders_names_and_marks(backend: Backend) {
    let place = backend.fresh("survey");
    let store = backend.open(&place);
    let mut held = store.acquire_as(&range("5-5"), "web-7 (pid 1)").unwrap();
    let mut freed = store.acquire(&range("6-6")).unwrap();
    let now = idgen::SystemClock.now_unix_ms();
    held.renew(now + 4_000).unwrap();
    freed.renew(now + 3_000).unwrap();
    freed.release(now + 1_000).unwrap();
    let numbers = backend.open(&place).survey(&range("5-6")).unwrap();
    assert_eq!(numbers[0].worker, 5);
    assert_eq!(numbers[0].state, NumberState::Held);
    assert_eq!(numbers[0].holder.as_deref(), Some("web-7 (pid 1)"));
    assert_eq!(numbers[0].mark_unix_ms, Some(now + 4_000));
    assert_eq!(numbers[1].state, NumberState::Free);
    assert_eq!(numbers[1].mark_unix_ms, Some(now + 1_000));
    held.release(now).unwrap();
}

fn the_recorded_horizon_only_grows(backend: Backend) {
    let place = backend.fresh("horizon");
    let store = backend.open(&place);
    let minute = Duration::from_secs(60);
    assert_eq!(store.raise_horizon(minute).unwrap(), minute);
    assert_eq!(store.raise_horizon(minute * 3).unwrap(), minute * 3);
    assert_eq!(
        backend.open(&place).raise_horizon(minute).unwrap(),
        minute * 3
    );
}

/// A holder cut off for longer than the TTL: nobody took its number, so its next renewal
/// takes it back; had anyone taken it meanwhile, the renewal says it is lost; and the
/// lapsed holder's writes never pass for its successor's.
fn a_lapsed_holder_takes_back_only_an_untouched_number(backend: Backend) {
    if !backend.expires() {
        return;
    }
    let place = backend.fresh("lapsed");
    let store = backend.open(&place);
    let now = idgen::SystemClock.now_unix_ms();
    let mut a = store.acquire(&range("0-0")).unwrap();
    a.renew(now + 2_000).unwrap();
    wait_until_free(store.as_ref(), 0);
    a.renew(now + 3_000).unwrap(); // taken back
    assert!(matches!(
        store.acquire(&range("0-0")),
        Err(Error::LeaseRangeFull { held: 1, .. })
    ));
    wait_until_free(store.as_ref(), 0);
    let mut b = backend.open(&place).acquire(&range("0-0")).unwrap();
    assert_eq!(b.previous_mark_unix_ms(), Some(now + 3_000));
    b.renew(now + 10_000).unwrap();
    let error = a.renew(now + 20_000).unwrap_err();
    assert!(matches!(error, Error::LeaseLost { .. }), "{error:?}");
    // A's release neither lowers B's mark nor frees B's number.
    a.release(1).unwrap();
    b.renew(now + 10_000).unwrap();
    assert!(matches!(
        store.acquire(&range("0-0")),
        Err(Error::LeaseRangeFull { held: 1, .. })
    ));
    b.release(now + 10_000).unwrap();
    let c = store.acquire(&range("0-0")).unwrap();
    assert_eq!(c.previous_mark_unix_ms(), Some(now + 10_000));
}

/// A module per store, each running every check above.
macro_rules! conformance {
    ($($(#[$attr:meta])* $module:ident => $backend:expr;)*) => {$(
        $(#[$attr])*
        mod $module {
            use super::*;

            #[test]
            fn threads_get_distinct_numbers_then_the_range_is_full() {
                super::threads_get_distinct_numbers_then_the_range_is_full($backend);
            }

            #[test]
            fn a_released_mark_is_the_next_holders_previous_mark() {
                super::a_released_mark_is_the_next_holders_previous_mark($backend);
            }

            #[test]
            fn an_abandoned_claims_last_mark_is_the_next_holders_previous_mark() {
                super::an_abandoned_claims_last_mark_is_the_next_holders_previous_mark($backend);
            }

            #[test]
            fn of_processes_racing_with_layouts_exactly_one_records_its_own() {
                super::of_processes_racing_with_layouts_exactly_one_records_its_own($backend);
            }

            #[test]
            fn the_survey_shows_holders_names_and_marks() {
                super::the_survey_shows_holders_names_and_marks($backend);
            }

            #[test]
            fn the_recorded_horizon_only_grows() {
                super::the_recorded_horizon_only_grows($backend);
            }

            #[test]
            fn a_lapsed_holder_takes_back_only_an_untouched_number() {
                super::a_lapsed_holder_takes_back_only_an_untouched_number($backend);
            }
        }
    )*};
}

conformance! {
    file => Backend::File;
    #[cfg(feature = "etcd")]
    etcd => Backend::Etcd;
    #[cfg(feature = "postgres")]
    postgres => Backend::Postgres;
}
