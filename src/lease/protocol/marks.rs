//! The arithmetic of marks, in Unix milliseconds on the holder's own clock: pure functions
//! of their arguments, shared by the [`Machine`](super::Machine) and the lease API.

use crate::error::Error;

use super::super::{NumberState, WorkerRange};
use super::Surveyed;

/// The mark a write sent at `sent_unix_ms` carries: a horizon ahead, and never below
/// `floor` (the last mark written, the previous holder's, one's own last ID), so a clock
/// stepped back never lowers a promise already made.
pub(crate) fn next_mark(sent_unix_ms: u64, horizon_ms: u64, floor: u64) -> u64 {
    sent_unix_ms.saturating_add(horizon_ms).max(floor)
}

/// The horizon a lost mark is inferred with: the largest any holder recorded (at most
/// `max_ms`, or one's own if that is larger), never below one's own. One of ours shorter
/// than a cut-off holder's would let the two issue side by side.
pub(crate) fn infer_horizon(recorded_ms: u64, own_ms: u64, max_ms: u64) -> u64 {
    recorded_ms.clamp(own_ms, max_ms.max(own_ms))
}

/// The previous holder's mark to start after. When the store lost the number's history,
/// one inferred horizon after now: every earlier holder's IDs are dated at or before its
/// last mark, which it wrote at most a horizon after its last renewal, before now.
pub(crate) fn previous_mark(
    stored: Option<u64>,
    unknown: bool,
    now_unix_ms: u64,
    infer_ms: u64,
) -> Option<u64> {
    if !unknown {
        return stored;
    }
    Some(
        stored
            .unwrap_or(0)
            .max(now_unix_ms.saturating_add(infer_ms)),
    )
}

/// How long until `previous` passes, on a clock reading `now_unix_ms`.
pub(crate) fn wait_ms(previous: Option<u64>, now_unix_ms: u64) -> u64 {
    previous.map_or(0, |previous| {
        previous.saturating_add(1).saturating_sub(now_unix_ms)
    })
}

/// The free numbers of a survey whose mark has passed, the one that passed longest ago
/// first (never held counts as oldest; equal marks: the lowest number): the most room
/// against clocks that disagree.
pub(crate) fn passed_by_mark(numbers: &[Surveyed], now_unix_ms: u64) -> Vec<u64> {
    let mut passed: Vec<(u64, u64)> = numbers
        .iter()
        .filter(|number| number.state == NumberState::Free)
        .filter_map(|number| match number.mark_unix_ms {
            None => Some((0, number.worker)),
            Some(mark) if mark < now_unix_ms => Some((mark, number.worker)),
            Some(_) => None,
        })
        .collect();
    passed.sort_unstable();
    passed.into_iter().map(|(_, worker)| worker).collect()
}

/// What a survey says beyond the numbers whose mark passed: the free numbers whose mark
/// is ahead, nearest first, and why the others cannot be taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Survey {
    /// `(mark, worker, inferred)`, the nearest last: a number whose history was lost counts
    /// with its mark inferred a horizon from now (only taking the number writes it down,
    /// so that it stops moving ahead with the clock).
    ahead: Vec<(u64, u64, bool)>,
    /// Numbers held by live processes.
    pub(crate) held: u64,
    /// Numbers that cannot be trusted, and why.
    pub(crate) unusable: Vec<String>,
}

impl Survey {
    /// Nothing ahead yet; `held` numbers held, `unusable` ones not to be trusted.
    pub(crate) fn counted(held: u64, unusable: Vec<String>) -> Survey {
        Survey {
            ahead: Vec::new(),
            held,
            unusable,
        }
    }

    /// A number found with its mark ahead after the survey (used and given back since).
    pub(crate) fn add_ahead(&mut self, mark: u64, worker: u64) {
        self.ahead.retain(|&(_, other, _)| other != worker);
        self.ahead.push((mark, worker, false));
        self.ahead.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// The nearest mark ahead not tried yet, as `(mark, worker, inferred)`.
    pub(crate) fn take_nearest(&mut self) -> Option<(u64, u64, bool)> {
        self.ahead.pop()
    }
}

/// The [`Survey`] of `numbers` on a clock reading `now_unix_ms`.
pub(crate) fn survey(numbers: &[Surveyed], now_unix_ms: u64, infer_ms: u64) -> Survey {
    let mut survey = Survey::default();
    for number in numbers {
        let ahead = match number.state {
            NumberState::Free => number
                .mark_unix_ms
                .filter(|&mark| mark >= now_unix_ms)
                .map(|mark| (mark, false)),
            NumberState::Missing => previous_mark(number.mark_unix_ms, true, now_unix_ms, infer_ms)
                .map(|mark| (mark, true)),
            NumberState::Held => {
                survey.held += 1;
                None
            }
            _ => {
                survey
                    .unusable
                    .push(number.detail.clone().unwrap_or_else(|| {
                        format!("worker {}: {}", number.worker, number.state.as_str())
                    }));
                None
            }
        };
        if let Some((mark, inferred)) = ahead {
            survey.ahead.push((mark, number.worker, inferred));
        }
    }
    survey.ahead.sort_unstable_by(|a, b| b.cmp(a));
    survey
}

/// A store's claim must be a number of the range asked for: one from elsewhere (a store of
/// one's own with a defect) could be another process's number, or not fit the layout.
pub(crate) fn check_claim(datacenter: u64, worker: u64, range: &WorkerRange) -> Result<(), Error> {
    if datacenter == range.datacenter() && range.workers().contains(&worker) {
        return Ok(());
    }
    Err(Error::LeaseStore {
        reason: format!(
            "the store handed out worker {worker} of datacenter {datacenter}, outside the range \
             asked for ({range})"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_never_goes_below_its_floor() {
        assert_eq!(next_mark(1_000, 500, 0), 1_500);
        assert_eq!(next_mark(1_000, 500, 9_000), 9_000);
        assert_eq!(next_mark(u64::MAX - 1, 500, 0), u64::MAX);
    }

    #[test]
    fn an_inferred_mark_uses_the_largest_recorded_horizon_within_the_maximum() {
        assert_eq!(infer_horizon(60_000, 30_000, 86_400_000), 60_000);
        assert_eq!(infer_horizon(10_000, 30_000, 86_400_000), 30_000);
        assert_eq!(infer_horizon(u64::MAX, 30_000, 86_400_000), 86_400_000);
        assert_eq!(previous_mark(Some(5), true, 1_000, 60_000), Some(61_000));
        assert_eq!(
            previous_mark(Some(99_000), true, 1_000, 60_000),
            Some(99_000)
        );
        assert_eq!(previous_mark(Some(5), false, 1_000, 60_000), Some(5));
    }

    #[test]
    fn the_survey_prefers_the_mark_that_passed_longest_ago() {
        let number = |worker, free: bool, mark_unix_ms| Surveyed {
            worker,
            state: if free {
                NumberState::Free
            } else {
                NumberState::Held
            },
            mark_unix_ms,
            detail: None,
        };
        let numbers = [
            number(0, true, Some(900)),
            number(1, false, None),
            number(2, true, Some(100)),
            number(3, true, Some(5_000)),
            number(4, true, None),
            number(5, true, Some(100)),
        ];
        assert_eq!(passed_by_mark(&numbers, 1_000), vec![4, 2, 5, 0]);
        let mut seen = survey(&numbers, 1_000, 60_000);
        assert_eq!(seen.held, 1);
        assert_eq!(seen.take_nearest(), Some((5_000, 3, false)));
        assert_eq!(seen.take_nearest(), None);
    }

    #[test]
    fn a_survey_counts_a_lost_history_with_its_inferred_mark() {
        let numbers = [
            Surveyed {
                worker: 0,
                state: NumberState::Missing,
                mark_unix_ms: None,
                detail: None,
            },
            Surveyed {
                worker: 1,
                state: NumberState::Free,
                mark_unix_ms: Some(90_000),
                detail: None,
            },
            Surveyed {
                worker: 2,
                state: NumberState::Corrupt,
                mark_unix_ms: None,
                detail: None,
            },
        ];
        let mut seen = survey(&numbers, 1_000, 60_000);
        seen.add_ahead(30_000, 5);
        assert_eq!(seen.take_nearest(), Some((30_000, 5, false)));
        assert_eq!(seen.take_nearest(), Some((61_000, 0, true)));
        assert_eq!(seen.take_nearest(), Some((90_000, 1, false)));
        assert_eq!(seen.unusable, vec!["worker 2: corrupt".to_string()]);
    }
}
