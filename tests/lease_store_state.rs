//! What a lease store records about itself, and the rules that follow from it: the one
//! layout it serves (checked on every number taken, not only the first), the largest
//! outage horizon any holder used (capped at a day), and, on etcd, a restore a holder
//! found (refused to every process until the restore step).

#[path = "common/leases.rs"]
mod leases;

use std::fs;
use std::time::{Duration, Instant};

use idgen::lease::{
    FileStore, LeaseState, LeaseStore, LeasedGenerator, MAX_OUTAGE_HORIZON, WorkerRange,
};
use idgen::{Error, Generator, Layout};
use leases::new_store_dir;

fn range(text: &str) -> WorkerRange {
    WorkerRange::parse(0, text).unwrap()
}

#[test]
fn the_refusal_of_another_layout_names_both_in_one_readable_sentence() {
    let dir = new_store_dir("layout-message");
    let store = FileStore::open(&dir).unwrap();
    store
        .bind_layout(&Layout::new(41, 0, 8, 14).unwrap())
        .unwrap();
    let message = store.bind_layout(&Layout::DEFAULT).unwrap_err().to_string();
    assert!(!message.contains("  "), "{message}");
    assert!(
        message.contains("serves the layout time=41 datacenter=0 worker=8 sequence=14"),
        "{message}"
    );
}

/// A holder loses its number (its directory deleted); the store comes back serving another
/// layout. Taking a new number checks the layout again: the holder stays stopped rather
/// than issue the old layout's bit patterns beside the new one's.
#[test]
fn a_holder_that_lost_its_number_takes_none_from_a_store_now_serving_another_layout() {
    let dir = new_store_dir("layout-reacquire");
    let ttl = Duration::from_millis(300);
    let store = || FileStore::open(&dir).unwrap().with_ttl(ttl).unwrap();
    let generator = LeasedGenerator::builder(store(), range("0-3"))
        .generator(Generator::builder().layout(Layout::new(41, 0, 8, 14).unwrap()))
        .acquire()
        .unwrap();
    generator.next_id().unwrap();
    fs::remove_dir_all(&dir).unwrap();
    store().bind_layout(&Layout::DEFAULT).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = generator.lease_stats();
        assert_eq!(stats.reacquisitions, 0, "took a number: {stats:?}");
        if stats.state == LeaseState::Lost && stats.renewal_failures >= 4 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no attempt at a new number: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(generator.next_id().is_err());
}

#[test]
fn an_outage_horizon_above_a_day_is_refused_and_a_recorded_one_counts_at_most_a_day() {
    let dir = new_store_dir("horizon-cap");
    let store = || {
        FileStore::open(&dir)
            .unwrap()
            .with_ttl(Duration::from_secs(1))
            .unwrap()
    };
    let thirty_days = Duration::from_secs(30 * 24 * 60 * 60);
    let refused = LeasedGenerator::builder(store(), range("0-0"))
        .outage_horizon(thirty_days)
        .acquire();
    assert!(
        matches!(refused, Err(Error::LeaseConfig { .. })),
        "{refused:?}"
    );
    // A record written by hand (or by an older build) above the cap: a lost mark is
    // inferred at most a day ahead.
    let mut claim = store().acquire(&range("0-0")).unwrap();
    claim.renew(1).unwrap();
    claim.release(1).unwrap();
    drop(claim);
    fs::write(
        dir.join("horizon.idgen"),
        format!("{}\n", thirty_days.as_millis()),
    )
    .unwrap();
    fs::remove_file(store().record_path(0, 0)).unwrap();
    let successor = LeasedGenerator::builder(store(), range("0-0"))
        .startup_wait(Duration::from_millis(100))
        .acquire();
    match successor {
        Err(Error::ClockBehindMark { behind_ms }) => {
            let day = MAX_OUTAGE_HORIZON.as_millis() as u64;
            assert!(
                behind_ms > day - 60_000 && behind_ms <= day + 1,
                "{behind_ms}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[cfg(feature = "etcd")]
mod etcd {
    use super::*;
    use idgen::Clock;
    use idgen::lease::EtcdStore;
    use leases::EtcdServer;

    fn connect(endpoint: &str, namespace: &str) -> EtcdStore {
        EtcdStore::connect(&[endpoint], namespace)
            .unwrap()
            .with_ttl(Duration::from_secs(2))
            .unwrap()
            .with_outage_horizon(Duration::from_secs(2))
    }

    /// A private etcd, its namespace initialised, a snapshot, then worker 0 taken and marked
    /// after it, and the snapshot restored under the holder: (server, store, claim, the
    /// Unix ms the claim's mark was written at).
    fn held_then_restored(
        name: &str,
        namespace: &str,
    ) -> (EtcdServer, EtcdStore, Box<dyn idgen::lease::Claim>, u64) {
        let mut server = EtcdServer::start(name);
        let store = connect(&server.endpoint, namespace);
        let an_hour_ago = idgen::SystemClock.now_unix_ms() - 3_600_000;
        store.init(0..=0, 0..=3, an_hour_ago).unwrap();
        let snapshot = server.snapshot("before.db");
        let mut claim = store.acquire(&range("0-0")).unwrap();
        let now = idgen::SystemClock.now_unix_ms();
        claim.renew(now + 2_000).unwrap();
        server.restore(&snapshot);
        (server, store, claim, now)
    }

    /// Once a holder found the store restored, every process is refused (not only the one
    /// that found it), and so is a plain `init`, which raises no mark; the restore step
    /// lifts it.
    #[test]
    fn a_restore_one_holder_found_is_refused_to_every_process_until_the_restore_step() {
        let namespace = "/idgen-test/restore-everyone";
        let (server, _store, mut claim, now) = held_then_restored("restore-everyone", namespace);
        let found = claim.renew(now + 2_001);
        assert!(
            matches!(found, Err(Error::LeaseStoreRestored { .. })),
            "{found:?}"
        );
        let fresh = connect(&server.endpoint, namespace);
        let refused = fresh.acquire(&range("0-3"));
        assert!(
            matches!(refused, Err(Error::LeaseStoreRestored { .. })),
            "{refused:?}"
        );
        let plain_init = fresh.init(0..=0, 0..=3, now);
        assert!(
            matches!(plain_init, Err(Error::LeaseStoreRestored { .. })),
            "{plain_init:?}"
        );
        let before = idgen::SystemClock.now_unix_ms();
        fresh.init_after_restore(0..=0, 0..=3, before).unwrap();
        let taken = fresh.acquire(&range("0-3")).unwrap();
        assert!(taken.previous_mark_unix_ms().unwrap() >= before + 2_000);
    }

    /// The documented order: restore, then the restore step at once, before the running
    /// holder's next renewal. The holder finds the store went back, but the step already
    /// covered every mark it wrote: it is only lost, and takes a number again (past the
    /// raised marks) instead of waiting for a second run of the step.
    #[test]
    fn a_holder_that_finds_the_restore_after_the_restore_step_takes_a_number_again() {
        let namespace = "/idgen-test/restore-step-first";
        let (server, store, mut claim, now) = held_then_restored("restore-step-first", namespace);
        let before = idgen::SystemClock.now_unix_ms();
        connect(&server.endpoint, namespace)
            .init_after_restore(0..=0, 0..=3, before)
            .unwrap();
        let found = claim.renew(now + 2_001);
        assert!(matches!(found, Err(Error::LeaseLost { .. })), "{found:?}");
        let taken = store.acquire(&range("0-3")).unwrap();
        assert!(taken.previous_mark_unix_ms().unwrap() >= before + 2_000);
    }
}
