//! What the store's answers mean, decided without I/O: whether a namespace may hand out
//! numbers, what a renewal or release that matched nothing found, and one number as a
//! survey reports it. Uses nothing else of the folder; the simulator's PostgreSQL model
//! calls the same functions.

use crate::lease::records::{after_restore_ms, restore_found_ms};
use crate::lease::{NumberRecord, NumberState};

/// The namespace's row, as [`super::schema::NAMESPACE`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NamespaceRow {
    pub(crate) state: String,
    /// The cluster recorded at `init` (system identifier / timeline / table OID).
    pub(crate) recorded_cluster: String,
    /// Whether the database the session talks to now is that one.
    pub(crate) same_cluster: bool,
    /// The history's last value ([`super::schema::HISTORY`]).
    pub(crate) history: i64,
    /// How long until the gate after a server start opens (0 or less: open).
    pub(crate) gate_ms: i64,
    /// In how many schemas of the database the leases table is.
    pub(crate) copies: i64,
}

/// Whether a namespace may hand out numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Namespace {
    Usable,
    /// No row: never initialised, or wiped.
    Uninitialised,
    /// A holder found the store gone back: refused until the restore step.
    RestoreFound,
    /// The database is not the one the namespace was initialised on: a promoted standby,
    /// a recovered backup, a table dropped and restored. Confirmed marks may be gone.
    ClusterChanged {
        recorded: String,
        /// The state read with it.
        state: String,
    },
    /// The history is behind the high-water mark this process keeps of it: the data went
    /// back (a restore that kept the cluster's identity and timeline).
    HistoryBehind {
        seen: i64,
        now: i64,
        /// The state read with it.
        state: String,
    },
    /// Usable, but the server started less than the gate ago and the namespace's row is
    /// older than that: no number is handed out for `wait_ms` more.
    Starting {
        wait_ms: u64,
    },
    /// The leases table is now in `copies` schemas: two stores of one namespace.
    Copies {
        copies: i64,
    },
}

/// What the namespace's `row` means to a process that has seen the history up to `seen`.
pub(crate) fn namespace(row: Option<&NamespaceRow>, seen: i64) -> Namespace {
    match row {
        None => Namespace::Uninitialised,
        Some(row) if row.copies > 1 => Namespace::Copies { copies: row.copies },
        Some(row) if restore_found_ms(&row.state).is_some() => Namespace::RestoreFound,
        Some(row) if !row.same_cluster => Namespace::ClusterChanged {
            recorded: row.recorded_cluster.clone(),
            state: row.state.clone(),
        },
        Some(row) if row.history < seen => Namespace::HistoryBehind {
            seen,
            now: row.history,
            state: row.state.clone(),
        },
        Some(row) if row.gate_ms > 0 => Namespace::Starting {
            wait_ms: u64::try_from(row.gate_ms).unwrap_or(0),
        },
        Some(_) => Namespace::Usable,
    }
}

/// Why a store whose history stands at `now` is refused by a process that saw `seen`.
pub(crate) fn history_behind(seen: i64, now: i64) -> String {
    format!(
        "the store's history stands at {now}, behind the {seen} this process was given \
         earlier: the database went back (restored from a base backup or a disk snapshot, \
         which keep the cluster's identity and timeline)"
    )
}

/// What a renewal or release that matched no row found ([`super::schema::EVIDENCE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// The number's row: its token and version, if the row exists.
    pub(crate) row: Option<(Option<String>, i64)>,
    /// The namespace's state, if its row exists.
    pub(crate) state: Option<String>,
    /// Whether the namespace's recorded cluster is the one answering.
    pub(crate) same_cluster: Option<bool>,
    /// The history's last value.
    pub(crate) history: i64,
}

/// What became of a claim whose write matched nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The number passed to another holder, was freed, or its row was deleted: the
    /// claim stops; its last confirmed mark is in the row or was deleted with it (then the
    /// next holder waits a horizon).
    Lost,
    /// The store went back in time under the claim: its row is older than the claim's own
    /// last write, or the database is another cluster. Marks confirmed to other holders may
    /// be gone too, so the namespace is refused until the restore step, unless the step
    /// already ran after the claim's last confirmed write.
    WentBack(String),
    /// The row is the claim's, as new as its last write: nothing explains the miss.
    Unclear,
}

/// The verdict on a write of the claim holding `token`, whose last confirmed write left
/// the row at `confirmed_version`, that matched no row, in a process that has seen the
/// history up to `seen`.
///
/// A row's version only grows while the data does not go back: every write raises it. So
/// a row below the claim's own last write went back, whatever it holds now (free, or
/// another token); and a row another claim holds at no more than that version does not
/// follow from ours either. Only a newer row is an ordinary loss.
pub(crate) fn after_failed_write(
    evidence: &Evidence,
    token: &str,
    confirmed_version: i64,
    seen: i64,
) -> Verdict {
    if evidence.same_cluster == Some(false) {
        return Verdict::WentBack(
            "the database is not the cluster, timeline or table the namespace was \
             initialised on (a promoted standby, a recovered backup, a restored table)"
                .to_string(),
        );
    }
    if evidence.history < seen {
        return Verdict::WentBack(history_behind(seen, evidence.history));
    }
    match &evidence.row {
        None => Verdict::Lost,
        Some((found, version))
            if *version < confirmed_version
                || (*version == confirmed_version
                    && found.as_deref().is_some_and(|found| found != token)) =>
        {
            Verdict::WentBack(format!(
                "the number's row is at version {version} ({}), not newer than this \
                 holder's own last write ({confirmed_version}): the table went back in time",
                if found.as_deref() == Some(token) {
                    "still this holder's"
                } else if found.is_some() {
                    "another holder's"
                } else {
                    "free"
                }
            ))
        }
        Some((Some(found), _)) if found == token => {
            if evidence
                .state
                .as_deref()
                .is_none_or(|state| restore_found_ms(state).is_some())
            {
                // Ours and as new as our write, but expired in a namespace that refuses
                // (a take-back is allowed only in a usable one): nothing to renew until
                // the restore step.
                Verdict::WentBack(
                    "the holding expired while the namespace is refused (a restore was \
                     found, or its row is gone)"
                        .to_string(),
                )
            } else {
                Verdict::Unclear
            }
        }
        Some(_) => Verdict::Lost,
    }
}

/// Whether a claim that found the store gone back, with the namespace in `state`, is only
/// lost: the restore step ran after the claim's last confirmed write (sent at
/// `confirmed_unix_ms`), so it raised every mark past what the claim wrote.
pub(crate) fn restore_step_covers(state: Option<&str>, confirmed_unix_ms: u64) -> bool {
    state
        .and_then(after_restore_ms)
        .is_some_and(|step| step >= confirmed_unix_ms)
}

/// The previous holder's mark from the row an acquire took: `(mark, unknown)`. A `NULL`
/// mark is a row made again after it was deleted: unknown.
pub(crate) fn previous_mark(mark_ms: Option<i64>) -> (Option<u64>, bool) {
    match mark_ms.and_then(|mark| u64::try_from(mark).ok()) {
        Some(mark) => (Some(mark), false),
        None => (None, true),
    }
}

/// One row of [`super::schema::SURVEY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SurveyRow {
    pub(crate) worker: u64,
    pub(crate) held: bool,
    pub(crate) holder: Option<String>,
    pub(crate) mark_ms: Option<i64>,
}

/// A number as the survey reports it, from its row (`None`: the row is missing).
pub(crate) fn number_record(
    datacenter: u64,
    worker: u64,
    row: Option<&SurveyRow>,
    place: &str,
) -> NumberRecord {
    let mut number = NumberRecord::new(datacenter, worker);
    let Some(row) = row else {
        number.state = NumberState::Missing;
        number.detail = Some(format!(
            "{place}: no row for worker {worker} (deleted?): its next holder waits an outage \
             horizon"
        ));
        return number;
    };
    if row.held {
        number.state = NumberState::Held;
        number.holder = row.holder.clone();
    }
    match row.mark_ms.map(u64::try_from) {
        Some(Ok(mark)) => number.mark_unix_ms = Some(mark),
        Some(Err(_)) => {
            number.state = NumberState::Corrupt;
            number.detail = Some(format!("{place}: worker {worker} has a negative mark"));
        }
        None if !row.held => {
            number.state = NumberState::Missing;
            number.detail = Some(format!(
                "{place}: worker {worker}'s row was made again after a deletion: its mark is \
                 unknown, and its next holder waits an outage horizon"
            ));
        }
        None => {}
    }
    number
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(row: Option<(Option<&str>, i64)>, same_cluster: bool) -> Evidence {
        Evidence {
            row: row.map(|(token, version)| (token.map(str::to_string), version)),
            state: Some("initialised".to_string()),
            same_cluster: Some(same_cluster),
            history: 100,
        }
    }

    #[test]
    fn a_row_taken_freed_or_deleted_is_lost() {
        assert_eq!(
            after_failed_write(&evidence(None, true), "ours", 5, 50),
            Verdict::Lost
        );
        let theirs = evidence(Some((Some("theirs"), 9)), true);
        assert_eq!(after_failed_write(&theirs, "ours", 5, 50), Verdict::Lost);
        let freed = evidence(Some((None, 6)), true);
        assert_eq!(after_failed_write(&freed, "ours", 5, 50), Verdict::Lost);
    }

    #[test]
    fn a_row_not_newer_than_our_last_write_went_back_whatever_it_holds() {
        // A base backup restored under the holder: its row came back free, or another
        // process took it from there; both are older than the holder's own last write.
        let freed = evidence(Some((None, 4)), true);
        assert!(matches!(
            after_failed_write(&freed, "ours", 5, 50),
            Verdict::WentBack(_)
        ));
        let taken_from_the_past = evidence(Some((Some("theirs"), 5)), true);
        assert!(matches!(
            after_failed_write(&taken_from_the_past, "ours", 5, 50),
            Verdict::WentBack(_)
        ));
        // Freed by hand at our version (no write of its own): a loss, not a restore.
        let freed_by_hand = evidence(Some((None, 5)), true);
        assert_eq!(
            after_failed_write(&freed_by_hand, "ours", 5, 50),
            Verdict::Lost
        );
    }

    #[test]
    fn a_history_behind_the_process_went_back_whatever_the_row_says() {
        let newer = evidence(Some((Some("theirs"), 90)), true);
        assert_eq!(after_failed_write(&newer, "ours", 5, 100), Verdict::Lost);
        assert!(matches!(
            after_failed_write(&newer, "ours", 5, 101),
            Verdict::WentBack(_)
        ));
    }

    #[test]
    fn a_row_older_than_our_last_write_went_back() {
        let older = evidence(Some((Some("ours"), 4)), true);
        assert!(matches!(
            after_failed_write(&older, "ours", 5, 50),
            Verdict::WentBack(_)
        ));
        let same = evidence(Some((Some("ours"), 5)), true);
        assert_eq!(after_failed_write(&same, "ours", 5, 50), Verdict::Unclear);
        let mut refused = evidence(Some((Some("ours"), 5)), true);
        refused.state = Some("idgen-lease-store v1 restore-found 9 by pid 1: x".to_string());
        assert!(matches!(
            after_failed_write(&refused, "ours", 5, 50),
            Verdict::WentBack(_)
        ));
        refused.state = None;
        assert!(matches!(
            after_failed_write(&refused, "ours", 5, 50),
            Verdict::WentBack(_)
        ));
    }

    #[test]
    fn another_cluster_went_back_whatever_the_row_says() {
        for row in [None, Some((Some("ours"), 7)), Some((Some("theirs"), 7))] {
            let found = after_failed_write(&evidence(row, false), "ours", 5, 50);
            assert!(matches!(found, Verdict::WentBack(_)), "{row:?}");
        }
    }

    #[test]
    fn the_restore_step_covers_only_claims_confirmed_before_it() {
        let state = "idgen-lease-store v1 after-restore 1000";
        assert!(restore_step_covers(Some(state), 999));
        assert!(restore_step_covers(Some(state), 1000));
        assert!(!restore_step_covers(Some(state), 1001));
        assert!(!restore_step_covers(Some("initialised"), 1));
        assert!(!restore_step_covers(None, 1));
    }

    #[test]
    fn namespaces_are_usable_only_on_their_own_cluster_and_unrestored() {
        let row = |state: &str, same_cluster| NamespaceRow {
            state: state.to_string(),
            recorded_cluster: "1/00000001/16384".to_string(),
            same_cluster,
            history: 100,
            gate_ms: 0,
            copies: 1,
        };
        assert_eq!(namespace(None, 0), Namespace::Uninitialised);
        assert_eq!(
            namespace(Some(&row("initialised", true)), 100),
            Namespace::Usable
        );
        assert_eq!(
            namespace(Some(&row("restore-found 5 by pid 1", true)), 0),
            Namespace::RestoreFound
        );
        assert!(matches!(
            namespace(Some(&row("initialised", false)), 0),
            Namespace::ClusterChanged { .. }
        ));
        assert!(matches!(
            namespace(Some(&row("initialised", true)), 101),
            Namespace::HistoryBehind {
                seen: 101,
                now: 100,
                ..
            }
        ));
        let starting = NamespaceRow {
            gate_ms: 1500,
            ..row("initialised", true)
        };
        assert_eq!(
            namespace(Some(&starting), 0),
            Namespace::Starting { wait_ms: 1500 }
        );
        let split = NamespaceRow {
            copies: 2,
            ..row("initialised", true)
        };
        assert_eq!(namespace(Some(&split), 0), Namespace::Copies { copies: 2 });
    }

    #[test]
    fn unknown_and_negative_marks_are_unknown() {
        assert_eq!(previous_mark(Some(7)), (Some(7), false));
        assert_eq!(previous_mark(None), (None, true));
        assert_eq!(previous_mark(Some(-1)), (None, true));
    }

    #[test]
    fn survey_rows_become_records() {
        let row = |held, mark_ms| SurveyRow {
            worker: 3,
            held,
            holder: held.then(|| "web-1".to_string()),
            mark_ms,
        };
        let place = "idgen_leases";
        assert_eq!(number_record(0, 3, None, place).state, NumberState::Missing);
        let held = number_record(0, 3, Some(&row(true, Some(10))), place);
        assert_eq!(
            (held.state, held.mark_unix_ms),
            (NumberState::Held, Some(10))
        );
        assert_eq!(held.holder.as_deref(), Some("web-1"));
        let free = number_record(0, 3, Some(&row(false, Some(10))), place);
        assert_eq!(free.state, NumberState::Free);
        let remade = number_record(0, 3, Some(&row(false, None)), place);
        assert_eq!(remade.state, NumberState::Missing);
        let negative = number_record(0, 3, Some(&row(false, Some(-5))), place);
        assert_eq!(negative.state, NumberState::Corrupt);
    }
}
