//! Taking a number from the store: which free number to take, how long to wait for its
//! previous holder's mark, and writing the first mark of one's own. Called by the keeper's
//! thread (on a loss) and by the builders, never on an ID path.

use std::time::Duration;

use crate::clock::Clock;
use crate::error::Error;

use super::timing::{MAX_OUTAGE_HORIZON, Timing, millis};
use super::{Claim, LeaseStore, NumberState, WorkerRange};

/// Takes a free number of `range` and the mark to start after (see [`previous_mark`]):
/// the free number whose mark passed longest ago (never held counts as oldest), when the
/// store can survey; else the lowest free number whose mark has passed; when every free
/// number's mark is still ahead, the one whose mark passes first, if that is within the
/// startup wait. Each number is asked for on its own and one whose mark is ahead is given
/// back at once (with the mark it was taken with; for a number whose history was lost, the
/// inferred one), so a scan never holds more than one number: a neighbour starting at the
/// same moment never finds the range full because of it. When even the nearest mark is
/// further than the startup wait, fails with [`Error::ClockBehindMark`], which says how
/// far.
pub(super) fn take_number<C: Clock>(
    store: &dyn LeaseStore,
    range: &WorkerRange,
    clock: &C,
    timing: &Timing,
    holder: &str,
) -> Result<Taken, Error> {
    // A lost mark is inferred with the largest horizon any holder recorded: one of ours
    // shorter than a cut-off holder's would let the two issue side by side.
    let infer = store
        .raise_horizon(timing.horizon)?
        .clamp(timing.horizon, MAX_OUTAGE_HORIZON.max(timing.horizon));
    if let Some(taken) = take_passed_by_mark(store, range, clock, infer, holder)? {
        return Ok(taken);
    }
    // The nearest mark may be taken by another process between the scan and asking for it
    // again: then the scan is made again, a few times at most.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (worker, mark) = match scan(store, range, clock, infer, holder)? {
            Scan::Taken(taken) => return Ok(taken),
            Scan::Ahead { worker, mark } => (worker, mark),
        };
        let wait = wait_ms(clock, Some(mark));
        if wait > millis(timing.startup_wait) {
            return Err(Error::ClockBehindMark { behind_ms: wait });
        }
        let single = WorkerRange::new(range.datacenter(), worker..=worker)?;
        let claim = match store.acquire_as(&single, holder) {
            Ok(claim) => claim,
            Err(Error::LeaseRangeFull { .. }) if attempts < SCANS => continue,
            // Said of the range asked for, not of the one number tried last.
            Err(Error::LeaseRangeFull { unusable, .. }) => {
                return Err(Error::LeaseRangeFull {
                    range: range.to_string(),
                    held: range.workers().count() as u64 - unusable.len() as u64,
                    unusable,
                });
            }
            Err(error) => return Err(error),
        };
        check_claim(&*claim, range)?;
        let previous = previous_mark(&*claim, clock, infer);
        let wait = wait_ms(clock, previous);
        if wait > millis(timing.startup_wait) {
            let mut claim = claim;
            let _ = claim.release(previous.unwrap_or(0));
            return Err(Error::ClockBehindMark { behind_ms: wait });
        }
        if wait > 0 {
            // The keeper's target, as before the taking moved to a file of its own, so that
            // `RUST_LOG` filters on it keep showing the wait.
            log::info!(
                target: "idgen::lease::keeper",
                "idgen: every free number of {range} has a mark ahead; worker {worker} waits \
                 {wait} ms for its mark"
            );
        }
        return Ok((claim, previous));
    }
}

/// How often a wait for a mark says in the log how long is left.
pub(super) const WAIT_REPORT_EVERY: Duration = Duration::from_secs(10);

/// How many times [`take_number`] scans the range for the nearest mark.
const SCANS: u32 = 3;

/// How long until a mark passes, on `clock` now.
fn wait_ms<C: Clock>(clock: &C, previous: Option<u64>) -> u64 {
    previous.map_or(0, |previous| {
        previous
            .saturating_add(1)
            .saturating_sub(clock.now_unix_ms())
    })
}

/// What [`scan`] found.
enum Scan {
    /// A free number whose mark has passed, taken.
    Taken(Taken),
    /// Every free number's mark is ahead: the nearest (by mark, then the lowest number).
    Ahead { worker: u64, mark: u64 },
}

/// Asks for each number of `range` on its own, lowest first: the first free one whose mark
/// has passed is kept; each other is given back at once, remembering its mark.
fn scan<C: Clock>(
    store: &dyn LeaseStore,
    range: &WorkerRange,
    clock: &C,
    infer: Duration,
    holder: &str,
) -> Result<Scan, Error> {
    let mut nearest: Option<(u64, u64)> = None;
    let (mut held, mut unusable) = (0, Vec::new());
    for worker in range.workers() {
        let single = WorkerRange::new(range.datacenter(), worker..=worker)?;
        let mut claim = match store.acquire_as(&single, holder) {
            Ok(claim) => claim,
            Err(Error::LeaseRangeFull {
                held: more_held,
                unusable: more_unusable,
                ..
            }) => {
                held += more_held;
                unusable.extend(more_unusable);
                continue;
            }
            Err(error) => return Err(error),
        };
        check_claim(&*claim, range)?;
        let previous = previous_mark(&*claim, clock, infer);
        match previous {
            Some(mark) if wait_ms(clock, previous) > 0 => {
                let _ = claim.release(mark);
                if nearest.is_none_or(|(_, nearest_mark)| mark < nearest_mark) {
                    nearest = Some((worker, mark));
                }
            }
            _ => return Ok(Scan::Taken((claim, previous))),
        }
    }
    match nearest {
        Some((worker, mark)) => Ok(Scan::Ahead { worker, mark }),
        None => Err(Error::LeaseRangeFull {
            range: range.to_string(),
            held,
            unusable,
        }),
    }
}

/// A claim and the previous holder's mark to start after.
type Taken = (Box<dyn Claim>, Option<u64>);

/// The free number whose mark passed longest ago (a number never held first), found by the
/// store's survey and asked for on its own: the most room against clocks that disagree.
/// `None` when the store cannot survey or no free number's mark has passed.
fn take_passed_by_mark<C: Clock>(
    store: &dyn LeaseStore,
    range: &WorkerRange,
    clock: &C,
    infer: Duration,
    holder: &str,
) -> Result<Option<Taken>, Error> {
    let Ok(numbers) = store.survey(range) else {
        return Ok(None);
    };
    let now = clock.now_unix_ms();
    let mut passed: Vec<(u64, u64)> = numbers
        .iter()
        .filter(|number| number.state == NumberState::Free)
        .filter_map(|number| match number.mark_unix_ms {
            None => Some((0, number.worker)),
            Some(mark) if mark < now => Some((mark, number.worker)),
            Some(_) => None,
        })
        .collect();
    passed.sort_unstable();
    for (_, worker) in passed {
        let single = WorkerRange::new(range.datacenter(), worker..=worker)?;
        let mut claim = match store.acquire_as(&single, holder) {
            Ok(claim) => claim,
            // Taken (or found unusable) since the survey: the next.
            Err(Error::LeaseRangeFull { .. }) => continue,
            Err(error) => return Err(error),
        };
        check_claim(&*claim, range)?;
        let previous = previous_mark(&*claim, clock, infer);
        let passed = previous.is_none_or(|previous| previous < clock.now_unix_ms());
        if passed {
            return Ok(Some((claim, previous)));
        }
        // Used and given back since the survey: leave it as it is now.
        let _ = claim.release(previous.unwrap_or(0));
    }
    Ok(None)
}

/// A number just taken and marked, from [`take_and_mark`].
pub(super) struct Marked {
    pub(super) claim: Box<dyn Claim>,
    /// The previous holder's mark, if any.
    pub(super) previous: Option<u64>,
    /// When the request that took it was sent.
    pub(super) sent_unix_ms: u64,
    /// The mark written.
    pub(super) mark: u64,
}

/// How many times a step of taking a number that failed in the store is tried in all, and
/// the pause before the second try (doubled after each): a store of several members
/// answers the next request from another one, so a member lost, paused or in an election
/// does not fail a taking the rest of the cluster could serve.
const STORE_ATTEMPTS: u32 = 5;
const STORE_RETRY_FIRST: Duration = Duration::from_millis(50);

/// `step`, tried again after a failure of the store ([`Error::LeaseStore`]),
/// [`STORE_ATTEMPTS`] times in all. Only for steps that leave nothing behind when they
/// fail (a number taken and not marked is given back), so that trying again is safe.
pub(super) fn retrying_store<T>(
    what: &str,
    mut step: impl FnMut() -> Result<T, Error>,
) -> Result<T, Error> {
    let mut pause = STORE_RETRY_FIRST;
    let mut attempt = 1;
    loop {
        match step() {
            Err(Error::LeaseStore { reason }) if attempt < STORE_ATTEMPTS => {
                log::warn!("idgen: {what} failed in the store, trying again: {reason}");
                std::thread::sleep(pause);
                pause *= 2;
                attempt += 1;
            }
            done => return done,
        }
    }
}

/// Takes a number (see [`take_number`]) and writes this holder's mark, a horizon after the
/// clock read before the request (never below the previous mark). On a failed write the
/// number is given back with the previous mark: nothing was issued on it. A failure of the
/// store is tried again (see [`retrying_store`]).
pub(super) fn take_and_mark<C: Clock>(
    store: &dyn LeaseStore,
    range: &WorkerRange,
    clock: &C,
    timing: &Timing,
    holder: &str,
) -> Result<Marked, Error> {
    retrying_store("taking a worker number", || {
        take_and_mark_once(store, range, clock, timing, holder)
    })
}

fn take_and_mark_once<C: Clock>(
    store: &dyn LeaseStore,
    range: &WorkerRange,
    clock: &C,
    timing: &Timing,
    holder: &str,
) -> Result<Marked, Error> {
    let sent_unix_ms = clock.now_unix_ms();
    let (mut claim, previous) = take_number(store, range, clock, timing, holder)?;
    let mark = sent_unix_ms
        .saturating_add(millis(timing.horizon))
        .max(previous.unwrap_or(0));
    if let Err(error) = claim.renew(mark) {
        let _ = claim.release(previous.unwrap_or(0));
        return Err(error);
    }
    Ok(Marked {
        claim,
        previous,
        sent_unix_ms,
        mark,
    })
}

/// A store's claim must be a number of the range asked for: one from elsewhere (a store of
/// one's own with a defect) could be another process's number, or not fit the layout.
fn check_claim(claim: &dyn Claim, range: &WorkerRange) -> Result<(), Error> {
    let inside =
        claim.datacenter() == range.datacenter() && range.workers().contains(&claim.worker());
    if inside {
        return Ok(());
    }
    Err(Error::LeaseStore {
        reason: format!(
            "the store handed out worker {} of datacenter {}, outside the range asked for ({range})",
            claim.worker(),
            claim.datacenter()
        ),
    })
}

/// The previous holder's mark to start after. When the store lost the number's history,
/// one outage horizon after now on `clock`: every earlier holder's IDs are dated at or
/// before its last mark, which it wrote at most a horizon after its last renewal, before
/// now (a holder cut off from the store may go on issuing that long).
fn previous_mark<C: Clock>(claim: &dyn Claim, clock: &C, horizon: Duration) -> Option<u64> {
    let stored = claim.previous_mark_unix_ms();
    if !claim.previous_mark_unknown() {
        return stored;
    }
    let unknown = clock.now_unix_ms().saturating_add(millis(horizon));
    Some(stored.unwrap_or(0).max(unknown))
}

/// The holder name of a process that gives none: its process ID and host.
pub(super) fn default_holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "unknown host".to_string());
    format!("pid {} on {host}", std::process::id())
}
