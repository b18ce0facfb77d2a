//! Worker-number leases on the embedded file store: real threads, real child processes,
//! SIGKILL, and a clock stepped back across a restart (libfaketime).

#[path = "common/leases.rs"]
mod leases;

use std::collections::BTreeSet;
use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idgen::lease::{
    AcquireWatch, Claim, FileStore, LeaseState, LeaseStore, LeasedGenerator, WorkerRange,
};
use idgen::{Clock, Error, Generator, Layout, ManualClock};
use leases::{ChildSpec, finish_end_to_end, max_id, new_store_dir, temp_dir, wait_for};

const CHILD: &str = "child_process";

/// Run by the other tests in a child process (see `leases::child_main`).
#[test]
#[ignore = "a child process of the other tests"]
fn child_process() {
    let dir = std::env::var(leases::ENV_STORE).unwrap();
    let store = FileStore::open(dir)
        .unwrap()
        .with_ttl(Duration::from_secs(1))
        .unwrap();
    leases::child_main(store);
}

fn range(text: &str) -> WorkerRange {
    WorkerRange::parse(0, text).unwrap()
}

#[test]
fn a_released_number_is_free_at_once_and_its_successor_starts_above_it() {
    let dir = new_store_dir("release");
    // One number: the successor can only have the number released (with more, it takes
    // the one whose mark passed longest ago, a never-held one first).
    let first = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-0"))
        .acquire()
        .unwrap();
    assert_eq!(first.worker(), 0);
    let issued = first.next_ids(5_000).unwrap();
    let last = *issued.last().unwrap();
    first.release().unwrap();
    // The release's mark is the last millisecond used, which may be this one: a number
    // whose mark has not passed yet is taken only when none has (two free numbers here),
    // so let it pass.
    wait_for("the last millisecond used to pass", || {
        idgen::SystemClock.now_unix_ms() > first_decode(last)
    });

    // No startup wait allowed: had the successor anything to wait for, it would fail.
    let second = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-0"))
        .startup_wait(Duration::ZERO)
        .acquire()
        .unwrap();
    assert_eq!(
        second.worker(),
        0,
        "released, so the lowest number is free again"
    );
    // The release wrote the last millisecond actually used, not one a TTL ahead, so the
    // successor had nothing to wait for: that millisecond had passed when it started.
    let previous = second.lease_stats().previous_mark_unix_ms.unwrap();
    assert_eq!(previous, first_decode(last));
    assert!(second.next_id().unwrap() > last);
}

fn first_decode(id: idgen::Id) -> u64 {
    Layout::DEFAULT.decode(id).unix_ms
}

#[test]
fn a_killed_holder_frees_its_number_at_once_and_the_next_holder_issues_above_it() {
    let dir = new_store_dir("killed");
    let spec = |name: &str| ChildSpec {
        test_name: CHILD,
        store: dir.display().to_string(),
        range: "0-0",
        out: dir.join(name),
        stop_file: dir.join("stop"),
        faketime: None,
        startup_wait: Duration::from_secs(3),
        horizon: None,
        expired_is_fatal: true,
    };
    let child = spec("killed.ids").spawn();
    assert_eq!(child.worker, 0);
    child.wait_for_more_ids(1_000);
    let out = child.out.clone();
    child.kill();
    let killed_at = Instant::now();
    let store = FileStore::open(&dir).unwrap();
    // At once: the first attempt after the kill gets it (a lock dies with its process).
    let claim = store.acquire(&range("0-0")).unwrap();
    println!(
        "SIGKILLed holder's number taken again after {:?}",
        killed_at.elapsed()
    );
    // The killed holder's record promises a mark at or after everything it issued.
    let their_max = max_id(&out).expect("the child wrote IDs");
    let mark = claim.previous_mark_unix_ms().unwrap();
    assert!(mark >= first_decode(idgen::Id::try_from(their_max).unwrap()));
    drop(claim);

    let next = LeasedGenerator::builder(store, range("0-0"))
        .acquire()
        .unwrap();
    let id = next.next_id().unwrap();
    assert!(id.as_u64() > their_max);
    assert!(first_decode(id) > mark);
}

#[test]
fn a_number_taken_over_from_a_killed_holder_is_valid_at_once_twenty_times_in_a_row() {
    // Each holder is SIGKILLed while issuing; the next takes its number at once, waits for
    // the killed holder's mark (up to a TTL, 1 s here), and must then issue without a single
    // LeaseExpired: the child panics on any error, and `kill` fails on a child that exited.
    let dir = temp_dir("takeover");
    let store = dir.join("leases");
    let spec = |round: usize| ChildSpec {
        test_name: CHILD,
        store: store.display().to_string(),
        range: "0-0",
        out: dir.join(format!("ids-{round}")),
        stop_file: dir.join("stop"),
        faketime: None,
        startup_wait: Duration::from_secs(3),
        horizon: None,
        expired_is_fatal: true,
    };
    let mut holder = spec(0).spawn();
    let mut files = vec![holder.out.clone()];
    for round in 1..=20 {
        holder.wait_for_more_ids(200);
        holder.kill();
        holder = spec(round).spawn();
        assert_eq!(holder.worker, 0);
        assert!(holder.previous_mark.is_some());
        files.push(holder.out.clone());
    }
    holder.wait_for_more_ids(1_000);
    let ids = finish_takeovers(holder, &files, &dir.join("stop"));
    println!("20 takeovers: {ids} IDs, none repeated, no LeaseExpired");
}

fn finish_takeovers(
    last: leases::RunningChild,
    files: &[std::path::PathBuf],
    stop: &std::path::Path,
) -> usize {
    fs::write(stop, b"").unwrap();
    last.finish();
    let ids = leases::read_ids(files);
    leases::assert_no_duplicates(&ids);
    ids.len()
}

#[test]
fn killed_and_restarted_processes_never_issue_a_duplicate_even_with_the_clock_stepped_back() {
    // Four worker numbers, four processes issuing at once; three times one of them is
    // SIGKILLed and a replacement started, every other replacement under libfaketime with
    // the wall clock 2 s behind. The replacement takes the freed number at once and must
    // start after the mark the killed holder left (up to 3 s ahead of its last renewal).
    let dir = temp_dir("e2e-file");
    let stop = dir.join("stop");
    let mut round = 0;
    let mut spec = |faketime: Option<&'static str>| {
        round += 1;
        ChildSpec {
            test_name: CHILD,
            store: dir.join("leases").display().to_string(),
            range: "0-3",
            out: dir.join(format!("ids-{round}")),
            stop_file: stop.clone(),
            faketime,
            // Four children issuing beside each other (and beside other tests): a
            // keeper may be starved of the CPU for a while, which a 3 s mark rides out.
            startup_wait: Duration::from_secs(10),
            horizon: Some(Duration::from_secs(3)),
            expired_is_fatal: false,
        }
        .spawn()
    };
    let mut running: Vec<_> = (0..4).map(|_| spec(None)).collect();
    let mut files: Vec<_> = running.iter().map(|c| c.out.clone()).collect();
    let workers: BTreeSet<u64> = running.iter().map(|c| c.worker).collect();
    assert_eq!(workers, (0..=3).collect());
    let mut replaced = Vec::new();
    for (kill, faketime) in [(1usize, Some("-2s")), (2, None), (0, Some("-2s"))] {
        // Killed while issuing, a few thousand IDs in.
        running[kill].wait_for_more_ids(2_000);
        let victim = running.remove(kill);
        let worker = victim.worker;
        victim.kill();
        let replacement = spec(faketime);
        assert_eq!(
            replacement.worker, worker,
            "the killed holder's number is free at once"
        );
        replaced.push((worker, replacement.previous_mark));
        files.push(replacement.out.clone());
        running.insert(kill, replacement);
    }
    finish_end_to_end("file store", running, &files, &stop);
    println!("replacements resumed after marks {replaced:?}");
}

#[test]
fn a_corrupted_record_is_reported_and_its_number_never_reused() {
    let dir = new_store_dir("corrupt");
    let store = FileStore::open(&dir).unwrap();
    fs::write(
        store.record_path(0, 0),
        "idgen-lease v1 mark=12 pid=1 check=0000\n",
    )
    .unwrap();
    let error = store.acquire(&range("0-0")).unwrap_err();
    let Error::LeaseRangeFull { held, unusable, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*held, 0);
    assert_eq!(unusable.len(), 1);
    assert!(
        error.to_string().contains("checksum does not match"),
        "{error}"
    );
    // With room in the range, the next number is taken instead.
    assert_eq!(store.acquire(&range("0-1")).unwrap().worker(), 1);
    // Garbage of any shape: still refused, never panics.
    for garbage in [
        &b"\xff\xfe\x00"[..],
        b"mark=1",
        b"idgen-lease v1 \n",
        &[b'9'; 5000],
    ] {
        fs::write(store.record_path(0, 0), garbage).unwrap();
        assert!(matches!(
            store.acquire(&range("0-0")),
            Err(Error::LeaseRangeFull { .. })
        ));
    }
}

#[test]
fn settings_that_make_no_sense_are_refused_with_a_reason() {
    let dir = new_store_dir("config");
    let (first, last) = (5, 4);
    assert!(matches!(
        WorkerRange::new(0, first..=last),
        Err(Error::LeaseConfig { .. })
    ));
    for bad in [
        "",
        "-",
        "1-",
        "a-b",
        "+1-2",
        "01-2",
        "3-1",
        "1-2-3",
        " 1-2",
        "99999999999999999999",
    ] {
        let error = WorkerRange::parse(0, bad).unwrap_err();
        assert!(
            matches!(error, Error::LeaseConfig { .. }),
            "{bad:?}: {error:?}"
        );
    }
    // A range beyond the layout.
    let error = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("30-40"))
        .acquire()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "worker 40 does not fit the layout: the largest allowed is 31"
    );
    let error = LeasedGenerator::builder(
        FileStore::open(&dir).unwrap(),
        WorkerRange::new(32, 0..=1).unwrap(),
    )
    .acquire()
    .unwrap_err();
    assert!(matches!(error, Error::FieldOutOfRange { .. }));
    // A file where the directory should be.
    fs::write(dir.join("plain-file"), b"").unwrap();
    assert!(FileStore::open(dir.join("plain-file")).is_err());
    for ttl in [
        Duration::from_millis(10),
        Duration::MAX,
        idgen::lease::FILE_STORE_MAX_TTL * 2,
    ] {
        let error = FileStore::open(&dir).unwrap().with_ttl(ttl).unwrap_err();
        assert!(
            matches!(error, Error::LeaseConfig { .. }),
            "{ttl:?}: {error:?}"
        );
    }
    assert!(
        FileStore::open(&dir)
            .unwrap()
            .with_ttl(idgen::lease::FILE_STORE_MAX_TTL)
            .is_ok()
    );
    // Renewing as often as the TTL leaves no validity.
    let error = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-1"))
        .renew_every(Duration::from_secs(3))
        .acquire()
        .unwrap_err();
    assert!(matches!(error, Error::LeaseConfig { .. }), "{error:?}");
    // Nothing was left held by the refusals.
    assert_eq!(
        FileStore::open(&dir)
            .unwrap()
            .acquire(&range("0-1"))
            .unwrap()
            .worker(),
        0
    );
}

/// A store that wraps the file store and can be told to fail renewals, or to report the
/// number lost, as an unreachable or partitioned store would.
#[derive(Debug, Clone)]
struct Faulty {
    inner: FileStore,
    fault: Arc<Mutex<Fault>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    Unreachable,
    LoseOnce,
}

impl LeaseStore for Faulty {
    fn ttl(&self) -> Duration {
        self.inner.ttl()
    }
    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        if *self.fault.lock().unwrap() == Fault::Unreachable {
            return Err(Error::LeaseStore {
                reason: "unreachable (test)".into(),
            });
        }
        Ok(Box::new(FaultyClaim {
            inner: self.inner.acquire(range)?,
            fault: Arc::clone(&self.fault),
        }))
    }
}

#[derive(Debug)]
struct FaultyClaim {
    inner: Box<dyn Claim>,
    fault: Arc<Mutex<Fault>>,
}

impl Claim for FaultyClaim {
    fn datacenter(&self) -> u64 {
        self.inner.datacenter()
    }
    fn worker(&self) -> u64 {
        self.inner.worker()
    }
    fn previous_mark_unix_ms(&self) -> Option<u64> {
        self.inner.previous_mark_unix_ms()
    }
    fn previous_mark_unknown(&self) -> bool {
        self.inner.previous_mark_unknown()
    }
    fn renew(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        let mut fault = self.fault.lock().unwrap();
        match *fault {
            Fault::None => self.inner.renew(mark_unix_ms),
            Fault::Unreachable => Err(Error::LeaseStore {
                reason: "unreachable (test)".into(),
            }),
            Fault::LoseOnce => {
                *fault = Fault::None;
                Err(Error::LeaseLost {
                    datacenter: self.datacenter(),
                    worker: self.worker(),
                })
            }
        }
    }
    fn release(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        self.inner.release(mark_unix_ms)
    }
}

#[test]
fn through_a_store_outage_the_generator_issues_up_to_its_mark_then_stops_exactly_there() {
    let dir = new_store_dir("outage");
    let fault = Arc::new(Mutex::new(Fault::None));
    let store = Faulty {
        inner: FileStore::open(&dir)
            .unwrap()
            .with_ttl(Duration::from_secs(3))
            .unwrap(),
        fault: Arc::clone(&fault),
    };
    const T: u64 = 1_780_000_000_000;
    let clock = ManualClock::new(T);
    let generator = LeasedGenerator::builder(store, range("0-3"))
        .generator(Generator::builder().clock(clock.clone()))
        .renew_every(Duration::from_millis(20))
        .safety_margin(Duration::from_millis(300))
        .outage_horizon(Duration::from_secs(10))
        .acquire()
        .unwrap();
    wait_for("a renewal", || generator.lease_stats().renewals >= 1);
    let stats = generator.lease_stats();
    assert_eq!((stats.state, stats.outages), (LeaseState::Valid, 0));
    assert_eq!(
        stats.mark_unix_ms,
        T + 10_000,
        "the mark is a horizon ahead"
    );
    *fault.lock().unwrap() = Fault::Unreachable;
    let failures = stats.renewal_failures;
    wait_for("a failed renewal", || {
        generator.lease_stats().renewal_failures > failures
    });
    // The clock has not moved, so every renewal was sent at this millisecond.
    let stats = generator.lease_stats();
    assert_eq!(stats.lease_end_unix_ms, T + 3_000);
    assert_eq!(stats.valid_until_unix_ms, T + 10_001);
    assert_eq!(stats.state, LeaseState::Outage);
    assert_eq!(stats.outages, 1);
    assert_eq!(stats.outage_since_unix_ms, Some(T));

    // Past the lease's end at the store, and past its margin: still issuing.
    clock.set(T + 3_000);
    let past_lease = generator.next_id().unwrap();
    assert_eq!(first_decode(past_lease), T + 3_000);
    // The mark itself is the last millisecond issued in.
    clock.set(T + 10_000);
    let last_valid = generator.next_id().unwrap();
    assert_eq!(first_decode(last_valid), T + 10_000);
    assert_eq!(generator.lease_stats().state, LeaseState::Outage);
    clock.set(T + 10_001);
    let refused = generator.next_id().unwrap_err();
    assert_eq!(
        refused,
        Error::LeaseExpired {
            datacenter: 0,
            worker: 0
        }
    );
    assert!(refused.is_transient());
    assert!(matches!(
        generator.next_ids(10),
        Err(Error::LeaseExpired { .. })
    ));
    assert_eq!(generator.lease_stats().state, LeaseState::Expired);
    assert_eq!(generator.lease_stats().valid_for_ms, 0);
    let refusals = generator.stats();
    assert_eq!((refusals.refused_lease, refusals.refused), (2, 2));
    // One outage, however many renewals failed in it.
    assert_eq!(generator.lease_stats().outages, 1);

    // The store comes back: the next renewal makes the same number usable again, with the
    // mark a horizon ahead of it.
    *fault.lock().unwrap() = Fault::None;
    wait_for("validity after the store came back", || {
        generator.lease_stats().state == LeaseState::Valid
    });
    let stats = generator.lease_stats();
    assert_eq!(stats.outage_since_unix_ms, None);
    assert_eq!(stats.mark_unix_ms, T + 20_001);
    let after = generator.next_id().unwrap();
    assert!(after > last_valid);
    assert_eq!(generator.decode(after).worker, 0);
    generator.release().unwrap();
}

#[test]
fn an_outage_horizon_below_the_ttl_is_refused() {
    let dir = new_store_dir("short-horizon");
    let store = FileStore::open(&dir)
        .unwrap()
        .with_ttl(Duration::from_secs(3))
        .unwrap();
    let error = LeasedGenerator::builder(store, range("0-1"))
        .outage_horizon(Duration::from_secs(2))
        .acquire()
        .unwrap_err();
    assert!(matches!(error, Error::LeaseConfig { .. }), "{error:?}");
    assert!(error.to_string().contains("below the TTL"), "{error}");
}

#[test]
fn a_free_number_whose_mark_has_passed_is_taken_before_a_lower_one_still_ahead() {
    let dir = new_store_dir("passed-first");
    let now = idgen::SystemClock.now_unix_ms();
    // Number 0: a mark 2 s ahead (within the startup wait); number 1: a mark passed.
    for (worker, mark) in [(0, now + 2_000), (1, now - 1_000)] {
        let mut claim = FileStore::open(&dir)
            .unwrap()
            .acquire(&range(&worker.to_string()))
            .unwrap();
        claim.release(mark).unwrap();
    }
    // No startup wait allowed: taking number 0 would have to wait for its mark.
    let generator = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-1"))
        .startup_wait(Duration::ZERO)
        .acquire()
        .unwrap();
    assert_eq!(generator.worker(), 1, "took the number that needs no wait");
    generator.next_id().unwrap();
    generator.release().unwrap();
    // Number 0 kept its mark.
    let claim = FileStore::open(&dir)
        .unwrap()
        .acquire(&range("0-0"))
        .unwrap();
    assert_eq!(claim.previous_mark_unix_ms(), Some(now + 2_000));
}

#[test]
fn among_free_numbers_whose_marks_passed_the_oldest_mark_is_taken_first() {
    let dir = new_store_dir("oldest-mark");
    let now = idgen::SystemClock.now_unix_ms();
    for (worker, mark) in [(0, now - 1_000), (1, now - 60_000), (2, now - 30_000)] {
        let mut claim = FileStore::open(&dir)
            .unwrap()
            .acquire(&range(&worker.to_string()))
            .unwrap();
        claim.release(mark).unwrap();
    }
    // Each taken while the ones before are still held.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(
            LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-2"))
                .acquire()
                .unwrap(),
        );
    }
    let order: Vec<u64> = held.iter().map(|generator| generator.worker()).collect();
    assert_eq!(order, [1, 2, 0]);
    for generator in held {
        generator.release().unwrap();
    }
}

#[test]
fn when_every_free_mark_is_ahead_the_nearest_is_waited_for() {
    let dir = new_store_dir("nearest-mark");
    let now = idgen::SystemClock.now_unix_ms();
    for (worker, mark) in [(0, now + 2_500), (1, now + 600)] {
        let mut claim = FileStore::open(&dir)
            .unwrap()
            .acquire(&range(&worker.to_string()))
            .unwrap();
        claim.release(mark).unwrap();
    }
    let generator = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-1"))
        .acquire()
        .unwrap();
    assert_eq!(generator.worker(), 1, "the nearest mark");
    let id = generator.next_id().unwrap();
    assert!(first_decode(id) > now + 600, "issued at or before the mark");
    generator.release().unwrap();
}

#[test]
fn a_lost_number_is_replaced_by_a_new_one_and_ids_go_on_above_both_marks() {
    let dir = new_store_dir("lost");
    let fault = Arc::new(Mutex::new(Fault::None));
    let store = Faulty {
        inner: FileStore::open(&dir).unwrap(),
        fault: Arc::clone(&fault),
    };
    // Worker 1 was held before and left a mark 5 ms ahead of this generator's clock.
    let clock = ManualClock::new(1_780_000_000_000);
    {
        let mut earlier = FileStore::open(&dir)
            .unwrap()
            .acquire(&range("1-1"))
            .unwrap();
        earlier.release(1_780_000_000_005).unwrap();
    }
    let generator = LeasedGenerator::builder(store, range("0-1"))
        .generator(Generator::builder().clock(clock.clone()))
        .renew_every(Duration::from_millis(20))
        .acquire()
        .unwrap();
    assert_eq!(generator.worker(), 0);
    let before = generator.next_id().unwrap();
    *fault.lock().unwrap() = Fault::LoseOnce;
    wait_for("the loss", || {
        generator.lease_stats().state == LeaseState::Lost
    });
    // Lost: nothing is issued until a new number is held.
    assert!(matches!(
        generator.next_id(),
        Err(Error::LeaseExpired { .. })
    ));
    // The keeper may take worker 0 again, whose last mark lies a TTL (3 s) ahead of the
    // clock: it waits for the clock to pass that mark before issuing as the new holder.
    clock.set(1_780_000_003_001);
    wait_for("the new number", || {
        generator.lease_stats().reacquisitions == 1
    });
    // Worker 0 is still locked by the (lost) first claim, which the keeper dropped; the
    // lowest free number was then 0 again or 1: either way, IDs continue above both marks.
    let stats = generator.lease_stats();
    assert_eq!(stats.state, LeaseState::Valid);
    let after = generator.next_id().unwrap();
    assert!(after > before);
    assert_eq!(generator.decode(after).worker, stats.worker);
    if stats.worker == 1 {
        assert!(first_decode(after) > 1_780_000_000_005);
    }
    generator.release().unwrap();
}

#[test]
fn moving_to_a_lower_number_after_a_loss_never_issues_a_smaller_id() {
    // Borrowing ahead puts the state milliseconds ahead of the clock; the number is lost
    // and the keeper takes a lower one whose mark is old. Inside one millisecond a lower
    // node's IDs sort below a higher node's, so the next ID must start a fresh millisecond.
    let dir = new_store_dir("lower");
    let fault = Arc::new(Mutex::new(Fault::None));
    let store = Faulty {
        inner: FileStore::open(&dir).unwrap(),
        fault: Arc::clone(&fault),
    };
    let now = 1_780_000_000_000;
    let clock = ManualClock::new(now);
    let mut blocker = FileStore::open(&dir)
        .unwrap()
        .acquire(&range("0-0"))
        .unwrap();
    let generator = LeasedGenerator::builder(store, range("0-1"))
        .generator(
            Generator::builder()
                .clock(clock.clone())
                .borrow_ahead_ms(10),
        )
        .renew_every(Duration::from_millis(20))
        .acquire()
        .unwrap();
    assert_eq!(generator.worker(), 1);
    let ids = generator.next_ids(3 * 4096 - 5).unwrap();
    let last = *ids.last().unwrap();
    assert_eq!(
        first_decode(last),
        now + 2,
        "borrowed two milliseconds ahead"
    );
    blocker.release(now - 100).unwrap();
    drop(blocker);
    *fault.lock().unwrap() = Fault::LoseOnce;
    wait_for("the move to worker 0", || {
        generator.lease_stats().reacquisitions == 1
    });
    assert_eq!(generator.worker(), 0);
    let next = generator.next_id().unwrap();
    assert!(next > last, "{next} after {last}");
    assert_eq!(first_decode(next), now + 3);
    generator.release().unwrap();
}

#[test]
fn a_far_future_mark_on_the_lowest_number_is_skipped_not_a_block_on_the_range() {
    let dir = new_store_dir("far-mark");
    let now = idgen::SystemClock.now_unix_ms();
    for (worker, far) in [(0, now + 3_600_000), (1, u64::MAX)] {
        let mut claim = FileStore::open(&dir)
            .unwrap()
            .acquire(&range(&worker.to_string()))
            .unwrap();
        claim.release(far).unwrap();
    }
    let generator = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-2"))
        .acquire()
        .unwrap();
    assert_eq!(generator.worker(), 2);
    generator.next_id().unwrap();
    generator.release().unwrap();
    // The numbers set aside keep their marks, and alone they are a clear error.
    let store = FileStore::open(&dir).unwrap();
    let claim = store.acquire(&range("0-0")).unwrap();
    assert_eq!(claim.previous_mark_unix_ms(), Some(now + 3_600_000));
    drop(claim);
    let error = LeasedGenerator::builder(store, range("0-1"))
        .acquire()
        .unwrap_err();
    assert!(
        matches!(error, Error::ClockBehindMark { behind_ms } if behind_ms > 3_590_000),
        "{error:?}"
    );
}

/// A store of one's own with a defect: it hands out a number outside the range asked for.
#[derive(Debug)]
struct Stray(FileStore);

impl LeaseStore for Stray {
    fn ttl(&self) -> Duration {
        self.0.ttl()
    }
    fn acquire(&self, _range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        self.0.acquire(&range("31-31"))
    }
}

#[test]
fn a_store_that_hands_out_a_number_outside_the_range_is_refused() {
    let dir = new_store_dir("stray");
    let error = LeasedGenerator::builder(Stray(FileStore::open(&dir).unwrap()), range("0-3"))
        .acquire()
        .unwrap_err();
    assert!(matches!(error, Error::LeaseStore { .. }), "{error:?}");
    assert!(error.to_string().contains("outside the range"), "{error}");
}

/// A store whose numbers are never held for long (as etcd's, when a set-aside claim's lease
/// runs out): every acquire hands out worker 0 again, its mark a year ahead.
#[derive(Debug)]
struct Forgetful;

#[derive(Debug)]
struct FarClaim;

impl Claim for FarClaim {
    fn datacenter(&self) -> u64 {
        0
    }
    fn worker(&self) -> u64 {
        0
    }
    fn previous_mark_unix_ms(&self) -> Option<u64> {
        Some(idgen::SystemClock.now_unix_ms() + 365 * 86_400_000)
    }
    fn renew(&mut self, _mark_unix_ms: u64) -> Result<(), Error> {
        Ok(())
    }
    fn release(&mut self, _mark_unix_ms: u64) -> Result<(), Error> {
        Ok(())
    }
}

impl LeaseStore for Forgetful {
    fn ttl(&self) -> Duration {
        Duration::from_secs(3)
    }
    fn acquire(&self, _range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        Ok(Box::new(FarClaim))
    }
}

#[test]
fn numbers_set_aside_are_tried_once_each_even_when_the_store_forgets_them() {
    let error = LeasedGenerator::builder(Forgetful, range("0-3"))
        .acquire()
        .unwrap_err();
    assert!(matches!(error, Error::ClockBehindMark { .. }), "{error:?}");
}

#[test]
fn a_release_while_the_keeper_waits_for_a_mark_returns_at_once() {
    // The number is lost; the keeper takes it again and must wait for its own old mark, a
    // TTL (10 s) ahead. Releasing meanwhile must not wait for it.
    let dir = new_store_dir("release-in-wait");
    let fault = Arc::new(Mutex::new(Fault::None));
    let store = Faulty {
        inner: FileStore::open(&dir)
            .unwrap()
            .with_ttl(Duration::from_secs(10))
            .unwrap(),
        fault: Arc::clone(&fault),
    };
    let acquires = Arc::new(AtomicU64::new(0));
    let store = Counting {
        inner: store,
        acquires: Arc::clone(&acquires),
    };
    let watch = AcquireWatch::new();
    let generator = LeasedGenerator::builder(store, range("0-0"))
        .renew_every(Duration::from_millis(20))
        .watch(&watch)
        .acquire()
        .unwrap();
    generator.next_id().unwrap();
    *fault.lock().unwrap() = Fault::LoseOnce;
    wait_for("the loss", || {
        generator.lease_stats().state == LeaseState::Lost
    });
    // The mark the keeper's second claim must wait for: the last one it wrote.
    let old_mark = generator.lease_stats().mark_unix_ms;
    wait_for("the keeper to take the number again", || {
        acquires.load(Ordering::SeqCst) >= 2
    });
    // The keeper is inside its wait for that mark (the watch shows it), not before it.
    wait_for("the keeper to wait for its old mark", || {
        watch.mark_wait().is_some()
    });
    let waiting = watch.mark_wait().unwrap();
    assert_eq!((waiting.datacenter, waiting.worker), (0, 0));
    assert_eq!(waiting.until_unix_ms, old_mark + 1);
    generator.release().unwrap();
    let returned_at = idgen::SystemClock.now_unix_ms();
    assert!(
        returned_at < old_mark,
        "the release waited for the mark: returned at {returned_at}, mark {old_mark}"
    );
}

/// A store that counts the numbers taken through it.
#[derive(Debug)]
struct Counting {
    inner: Faulty,
    acquires: Arc<AtomicU64>,
}

impl LeaseStore for Counting {
    fn ttl(&self) -> Duration {
        self.inner.ttl()
    }
    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        let claim = self.inner.acquire(range)?;
        self.acquires.fetch_add(1, Ordering::SeqCst);
        Ok(claim)
    }
}

#[test]
fn a_shard_whose_number_is_lost_takes_another_while_the_others_keep_theirs() {
    let dir = new_store_dir("sharded-lost");
    let fault = Arc::new(Mutex::new(Fault::None));
    let store = Faulty {
        inner: FileStore::open(&dir).unwrap(),
        fault: Arc::clone(&fault),
    };
    let sharded = LeasedGenerator::builder(store, range("0-7"))
        .renew_every(Duration::from_millis(20))
        .acquire_sharded(2)
        .unwrap();
    let before: Vec<u64> = sharded.shards().map(|shard| shard.worker()).collect();
    let last = sharded.next_id().unwrap();
    *fault.lock().unwrap() = Fault::LoseOnce;
    wait_for("a reacquisition", || {
        sharded.lease_stats().iter().any(|s| s.reacquisitions == 1)
            && sharded
                .lease_stats()
                .iter()
                .all(|s| s.state == LeaseState::Valid)
    });
    let after: Vec<u64> = sharded.shards().map(|shard| shard.worker()).collect();
    let changed = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    assert_eq!(changed, 1, "{before:?} -> {after:?}");
    assert!(
        after
            .iter()
            .all(|w| !before.contains(w) || after.contains(w))
    );
    // This thread's IDs still increase, whichever shard it is on.
    assert!(sharded.next_id().unwrap() > last);
    sharded.release().unwrap();
}

#[test]
fn a_lost_claim_keeps_its_number_held_until_it_is_dropped() {
    // The directory is deleted under a holder: its renewal finds the claim lost. The
    // keeper cuts the generator's ceiling and only then drops the claim; until then a
    // successor on a re-created directory must not get the number, or a call preempted
    // between reading the old ceiling and returning its ID could issue beside it.
    let dir = new_store_dir("lost-held");
    let mut claim = FileStore::open(&dir)
        .unwrap()
        .acquire(&range("3-3"))
        .unwrap();
    fs::remove_dir_all(&dir).unwrap();
    let renewed = claim.renew(u64::MAX / 2);
    assert!(
        matches!(renewed, Err(Error::LeaseLost { worker: 3, .. })),
        "{renewed:?}"
    );
    let successor = FileStore::open(&dir).unwrap();
    let early = successor.acquire(&range("3-3"));
    assert!(
        matches!(early, Err(Error::LeaseRangeFull { .. })),
        "taken while the lost claim lived: {early:?}"
    );
    drop(claim);
    let later = successor.acquire(&range("3-3")).unwrap();
    assert_eq!(later.worker(), 3);
}

/// The issue's reproduction, in the library: a service on 41/0/8/14 and a process on the
/// default layout share a lease directory; the second's worker 1 is the first's worker 0
/// at sequence 4,096 and up.
#[test]
fn a_store_serves_one_layout_and_refuses_any_other_naming_both() {
    let dir = new_store_dir("one-layout");
    let service_layout = Layout::new(41, 0, 8, 14).unwrap();
    let service = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-0"))
        .generator(Generator::builder().layout(service_layout))
        .acquire()
        .unwrap();
    service.next_id().unwrap();
    let other = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("1-1"))
        .generator(Generator::builder().layout(Layout::DEFAULT))
        .acquire();
    match other {
        Err(Error::LayoutMismatch { recorded, ours, .. }) => {
            assert_eq!(recorded, service_layout.to_string());
            assert_eq!(ours, Layout::DEFAULT.to_string());
        }
        other => panic!("a second layout was let in: {other:?}"),
    }
    // The epoch is part of the layout: marks are Unix ms, so a later epoch would resume
    // after the mark and reissue old bit patterns.
    let later_epoch = service_layout
        .with_epoch_unix_ms(service_layout.epoch_unix_ms() as i64 + 86_400_000)
        .unwrap();
    let error = FileStore::open(&dir)
        .unwrap()
        .bind_layout(&later_epoch)
        .unwrap_err();
    assert!(error.to_string().contains("epoch=1704153600000"), "{error}");
    // The lease API's leases are held to it too.
    let external = idgen::lease::ExternalLease::acquire(
        &FileStore::open(&dir).unwrap(),
        &Layout::DEFAULT,
        &range("2-2"),
        "svc",
        None,
        &idgen::SystemClock,
    );
    assert!(
        matches!(external, Err(Error::LayoutMismatch { .. })),
        "{external:?}"
    );
    // The same layout is welcome.
    let same = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("1-1"))
        .generator(Generator::builder().layout(service_layout))
        .acquire()
        .unwrap();
    assert_ne!(same.next_id().unwrap(), service.next_id().unwrap());
}

#[test]
fn a_store_used_before_layouts_were_recorded_keeps_working_and_records_the_first() {
    let dir = new_store_dir("layout-legacy");
    // As an older idgen left it: a roster and a record, no layout file.
    let store = FileStore::open(&dir).unwrap();
    let mut claim = store.acquire(&range("0-0")).unwrap();
    claim.renew(1).unwrap();
    claim.release(1).unwrap();
    drop(claim);
    assert!(!dir.join("layout.idgen").exists());
    assert_eq!(store.recorded_layout().unwrap(), None);
    let generator = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-3"))
        .acquire()
        .unwrap();
    generator.next_id().unwrap();
    assert_eq!(store.recorded_layout().unwrap(), Some(Layout::DEFAULT));
    let text = fs::read_to_string(dir.join("layout.idgen")).unwrap();
    assert_eq!(text, format!("{}\n", Layout::DEFAULT.record()));
    // A damaged record is never guessed at, nor overwritten.
    drop(generator);
    fs::write(dir.join("layout.idgen"), "idgen-layout v1 time=41\n").unwrap();
    let error = store.bind_layout(&Layout::DEFAULT).unwrap_err();
    assert!(
        error.to_string().contains("not an idgen layout record"),
        "{error}"
    );
    assert_eq!(
        fs::read_to_string(dir.join("layout.idgen")).unwrap(),
        "idgen-layout v1 time=41\n"
    );
}

/// A holder on a 10 s horizon; its record deleted after it stopped; a successor on a 1 s
/// horizon of its own infers the lost mark with the holder's 10 s.
#[test]
fn a_lost_mark_is_inferred_with_the_largest_horizon_a_holder_recorded() {
    let dir = new_store_dir("horizon-record");
    let store = || {
        FileStore::open(&dir)
            .unwrap()
            .with_ttl(Duration::from_secs(1))
            .unwrap()
    };
    let holder = LeasedGenerator::builder(store(), range("0-0"))
        .outage_horizon(Duration::from_secs(10))
        .acquire()
        .unwrap();
    holder.next_id().unwrap();
    fs::remove_file(store().record_path(0, 0)).unwrap();
    drop(holder);
    let successor = LeasedGenerator::builder(store(), range("0-0"))
        .startup_wait(Duration::from_millis(100))
        .acquire();
    match successor {
        Err(Error::ClockBehindMark { behind_ms }) => {
            assert!(behind_ms > 8_000, "inferred {behind_ms} ms ahead")
        }
        other => panic!("the holder's horizon was not used: {other:?}"),
    }
}

/// A store that, after each number it hands out, lets a neighbour process try to take a
/// number of the same range (and give it straight back), recording any refusal.
#[derive(Debug)]
struct WithNeighbour {
    inner: FileStore,
    neighbour: FileStore,
    range: WorkerRange,
    calls: Mutex<u32>,
    refused: Mutex<Vec<Error>>,
}

impl LeaseStore for WithNeighbour {
    fn ttl(&self) -> Duration {
        self.inner.ttl()
    }

    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        self.acquire_as(range, "")
    }

    fn acquire_as(&self, range: &WorkerRange, holder: &str) -> Result<Box<dyn Claim>, Error> {
        *self.calls.lock().unwrap() += 1;
        let taken = self.inner.acquire_as(range, holder);
        // While the claim just taken is held, with whatever else the scan holds.
        match self.neighbour.acquire(&self.range) {
            Ok(mut claim) => claim
                .release(claim.previous_mark_unix_ms().unwrap_or(0))
                .unwrap(),
            Err(error) => self.refused.lock().unwrap().push(error),
        }
        taken
    }
}

/// Every free number's mark ahead, on a store that cannot survey (so every number is asked
/// for in turn): the process looking for the nearest holds at most one number at a time,
/// so a neighbour starting meanwhile never finds the range full. (With
/// every number of the range set aside at once, a service starting beside another that
/// was scanning after a loss was refused: `tampering::a_wiped_namespace...`, "3 held by
/// live processes".)
#[test]
fn a_scan_for_the_nearest_mark_never_makes_a_neighbour_find_the_range_full() {
    let dir = new_store_dir("scan-neighbour");
    let store = FileStore::open(&dir).unwrap();
    let ahead = idgen::SystemClock.now_unix_ms() + 1_500;
    for worker in ["0-0", "1-1", "2-2"] {
        let mut claim = store.acquire(&range(worker)).unwrap();
        claim.renew(ahead).unwrap();
        claim.release(ahead).unwrap();
    }
    let watched = Arc::new(WithNeighbour {
        inner: FileStore::open(&dir).unwrap(),
        neighbour: FileStore::open(&dir).unwrap(),
        range: range("0-2"),
        calls: Mutex::new(0),
        refused: Mutex::new(Vec::new()),
    });
    let generator = LeasedGenerator::builder(Arc::clone(&watched), range("0-2"))
        .startup_wait(Duration::from_secs(10))
        .acquire()
        .unwrap();
    generator.next_id().unwrap();
    assert!(*watched.calls.lock().unwrap() >= 3, "no scan was made");
    let refused = watched.refused.lock().unwrap();
    assert!(refused.is_empty(), "the neighbour was refused: {refused:?}");
}

/// A store whose only number has a mark a minute ahead, and that counts releases.
#[derive(Debug)]
struct MarkAhead {
    mark_unix_ms: u64,
    released: Arc<AtomicU64>,
}

#[derive(Debug)]
struct MarkAheadClaim {
    mark_unix_ms: u64,
    released: Arc<AtomicU64>,
}

impl Claim for MarkAheadClaim {
    fn datacenter(&self) -> u64 {
        0
    }
    fn worker(&self) -> u64 {
        2
    }
    fn previous_mark_unix_ms(&self) -> Option<u64> {
        Some(self.mark_unix_ms)
    }
    fn renew(&mut self, _mark_unix_ms: u64) -> Result<(), Error> {
        Ok(())
    }
    fn release(&mut self, _mark_unix_ms: u64) -> Result<(), Error> {
        self.released.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl LeaseStore for MarkAhead {
    fn ttl(&self) -> Duration {
        Duration::from_secs(3)
    }
    fn acquire(&self, _range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        Ok(Box::new(MarkAheadClaim {
            mark_unix_ms: self.mark_unix_ms,
            released: Arc::clone(&self.released),
        }))
    }
}

#[test]
fn a_watch_shows_the_wait_for_a_mark_at_start_and_its_cancel_releases_the_number() {
    let mark = idgen::SystemClock.now_unix_ms() + 60_000;
    let released = Arc::new(AtomicU64::new(0));
    let store = MarkAhead {
        mark_unix_ms: mark,
        released: Arc::clone(&released),
    };
    let watch = AcquireWatch::new();
    let acquiring = {
        let watch = watch.clone();
        std::thread::spawn(move || {
            LeasedGenerator::builder(store, range("2-2"))
                .startup_wait(Duration::from_secs(120))
                .watch(&watch)
                .acquire()
                .map(|generator| generator.worker())
        })
    };
    wait_for("the acquire to wait for the mark", || {
        watch.mark_wait().is_some()
    });
    let waiting = watch.mark_wait().unwrap();
    assert_eq!((waiting.datacenter, waiting.worker), (0, 2));
    assert_eq!(waiting.until_unix_ms, mark + 1);
    // (The scan for the nearest mark took the number once and gave it back.)
    let released_before = released.load(Ordering::SeqCst);
    watch.cancel();
    wait_for("the cancelled acquire to return", || {
        acquiring.is_finished()
    });
    let error = acquiring.join().unwrap().unwrap_err();
    assert!(error.to_string().contains("cancelled"), "{error}");
    // Given up well before the mark, with the number released and the wait cleared.
    assert!(idgen::SystemClock.now_unix_ms() < mark);
    assert_eq!(released.load(Ordering::SeqCst), released_before + 1);
    assert_eq!(watch.mark_wait(), None);
}

#[test]
fn a_watch_cancelled_before_the_acquire_makes_it_fail_and_hold_nothing() {
    let dir = new_store_dir("cancelled-first");
    let watch = AcquireWatch::new();
    watch.cancel();
    let error = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-0"))
        .watch(&watch)
        .acquire()
        .unwrap_err();
    assert!(error.to_string().contains("cancelled"), "{error}");
    // Nothing held: the number is free for the next process at once.
    let next = LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-0"))
        .startup_wait(Duration::ZERO)
        .acquire()
        .unwrap();
    next.next_id().unwrap();
}

#[test]
fn a_leased_sharded_generator_answers_what_an_unleased_one_does() {
    let dir = new_store_dir("sharded-parity");
    let layout = Layout::new(41, 0, 10, 12).unwrap();
    // A clock that stands still: the 4,097th ID of one shard finds its millisecond used up.
    let clock = ManualClock::new(idgen::SystemClock.now_unix_ms());
    // From the crate root, as the production front door.
    let sharded: idgen::LeasedShardedGenerator<ManualClock> =
        idgen::LeasedGenerator::builder(FileStore::open(&dir).unwrap(), range("0-7"))
            .generator(Generator::builder().layout(layout).clock(clock))
            .acquire_sharded(2)
            .unwrap();
    assert_eq!(sharded.shard_count(), 2);
    assert_eq!(sharded.layout(), &layout);
    let first = sharded.try_next_id().unwrap();
    let second = sharded.next_id().unwrap();
    assert!(first < second, "the same thread stays on its shard");
    assert_eq!(sharded.decode(second).worker, sharded.shard().worker());
    assert_eq!(sharded.stats().sequence_exhausted, 0);
    sharded.next_ids(4_094).unwrap();
    let error = sharded.try_next_id().unwrap_err();
    assert!(matches!(error, Error::WouldBlock { .. }), "{error:?}");
    // The sum over the shards: this thread's shard counted the used-up millisecond.
    assert_eq!(sharded.stats().sequence_exhausted, 1);
    sharded.release().unwrap();
}
