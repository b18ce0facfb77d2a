//! A model of the etcd store with the semantics the protocol's proof relies on: leases with
//! a TTL counted on the store's clock, a revision that grows with every write, the holder
//! key and the mark key of each number, writes that check the claim's token and the mark
//! key's revision, take-back of a lapsed lease, and what faults do to it (a leader change
//! resets every TTL; a snapshot restore rolls revisions back; keys deleted; a namespace
//! wiped and initialised again).

use crate::error::Error;

use super::super::NumberState;
use super::super::protocol::{Acquired, Answer, Surveyed};

/// A request as it travels to the store: the machine's, with the claim the holder keeps.
#[derive(Debug, Clone)]
pub(super) enum StoreRequest {
    BindLayout {
        layout: u32,
    },
    RaiseHorizon {
        horizon_ms: u64,
    },
    Survey,
    Acquire {
        worker: u64,
        /// The holder's wall clock when it sent the request (what the PostgreSQL claim
        /// keeps as the time of its last confirmed write; the etcd model needs none).
        #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
        sent_unix_ms: u64,
    },
    Renew {
        worker: u64,
        mark: u64,
        claim: Claim,
        /// Marks the claim sent since its last confirmed write (their answers lost).
        unconfirmed: Vec<u64>,
        #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
        sent_unix_ms: u64,
    },
    Release {
        worker: u64,
        mark: u64,
        claim: Claim,
        unconfirmed: Vec<u64>,
        #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
        sent_unix_ms: u64,
    },
}

#[cfg(feature = "postgres")]
/// What a holder keeps of a row it took: `PostgresClaim`'s fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowClaim {
    pub(super) token: u64,
    /// The row's version after the claim's last confirmed write.
    pub(super) version: u64,
    pub(super) wrote: bool,
    /// The holder's wall clock when it sent its last confirmed write (the acquire's at
    /// first): what `restore_step_covers` compares with the operator's step.
    pub(super) confirmed_unix_ms: u64,
    pub(super) previous: Option<u64>,
    pub(super) unknown: bool,
    /// The claim found its number gone: it answers without the store from then on.
    pub(super) released: bool,
    /// When the store granted the claim (true time), for the checker's order of tenures.
    pub(super) granted_ms: u64,
    /// The highest value of the history the claim's writes were given: the process's
    /// high-water mark, as far as this claim saw it.
    pub(super) seen: u64,
}

/// What a holder keeps of the number it holds: the etcd claim's token or the PostgreSQL
/// claim's row, as the model it talks to hands them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    Etcd(Token),
    #[cfg(feature = "postgres")]
    Postgres(RowClaim),
}

impl Claim {
    /// When the store granted the claim (true time) and its token: the order of a
    /// number's tenures, for the checker.
    pub(super) fn granted(&self) -> (u64, u64) {
        match self {
            Claim::Etcd(token) => (token.granted_ms, token.id),
            #[cfg(feature = "postgres")]
            Claim::Postgres(row) => (row.granted_ms, row.token),
        }
    }

    /// Whether the claim already knows its number is gone (the PostgreSQL claim answers
    /// its renewals and releases without asking the store then).
    pub(super) fn released(&self) -> bool {
        match self {
            Claim::Etcd(_) => false,
            #[cfg(feature = "postgres")]
            Claim::Postgres(row) => row.released,
        }
    }

    fn etcd(&self) -> Token {
        match self {
            Claim::Etcd(token) => *token,
            #[cfg(feature = "postgres")]
            Claim::Postgres(_) => unreachable!("a PostgreSQL claim sent to the etcd model"),
        }
    }
}

/// Whether the client still waits for the answer when the store applies a request: a
/// write whose first transaction fails is followed by a second (the claim writes its mark
/// again over one deleted or raised by hand) only then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waiting {
    Yes,
    GaveUp,
}

/// What a holder's claim carries into each write: its token, and the mark key's revision
/// of its own last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token {
    pub(super) id: u64,
    pub(super) last_write_revision: u64,
    /// Whether the claim wrote a mark yet (a take-back needs one).
    pub(super) wrote: bool,
    /// The last mark the claim wrote.
    pub(super) written_mark: u64,
    /// When the store granted the claim (true time): the order of a number's tenures.
    pub(super) granted_ms: u64,
}

/// An answer, with the store's revision when it was made.
#[derive(Debug, Clone)]
pub(super) struct StoreAnswer {
    pub(super) revision: u64,
    /// How many times the operator's procedure ran (`<ns>/store` rewritten): a revision
    /// gone back is accepted once the procedure ran after the holder last looked.
    pub(super) procedures: u64,
    pub(super) result: Result<Answer, Error>,
    /// The claim a successful acquire, renew or release leaves the holder with (on the
    /// PostgreSQL model, also a failed one that found the number gone).
    pub(super) token: Option<Claim>,
    /// The PostgreSQL model's row mark after a renewal or release that wrote it (the larger
    /// of the row's and the one sent: a late renewal's lower mark leaves it as it was);
    /// `None` on etcd, whose writes take the mark sent.
    pub(super) row_mark: Option<u64>,
}

#[derive(Debug, Clone, Default)]
struct Number {
    /// The holder key's value: the token of the claim that holds the number.
    holder: Option<u64>,
    /// When the number's etcd lease ends (store clock; 0: none). The lease's ID is the
    /// number's, so a successor's lease has the same ID as the one before it.
    lease_ends: u64,
    mark: Option<u64>,
    mark_revision: u64,
    /// The mark key was deleted (or the namespace wiped): the next holder infers one.
    history_lost: bool,
    /// True time of the last mark write, for the fault schedule's preconditions.
    last_write_ms: u64,
}

/// The store's whole state: what a snapshot saves and a restore brings back.
#[derive(Debug, Clone)]
pub(super) struct Store {
    revision: u64,
    layout: Option<u32>,
    horizon_ms: u64,
    numbers: Vec<Number>,
    next_token: u64,
    ttl_ms: u64,
    /// Lapsed leases taken back by their holder's renewal.
    pub(super) take_backs: u64,
    pub(super) procedures: u64,
}

impl Store {
    /// A store initialised with `--new`: every number's mark at `now_ms`.
    pub(super) fn new(numbers: u64, ttl_ms: u64, now_ms: u64) -> Store {
        let number = Number {
            mark: Some(now_ms),
            ..Number::default()
        };
        Store {
            revision: 1,
            layout: None,
            horizon_ms: 0,
            numbers: vec![number; numbers as usize],
            next_token: 1,
            ttl_ms,
            take_backs: 0,
            procedures: 0,
        }
    }

    fn live_lease(&self, worker: u64, now_ms: u64) -> bool {
        self.numbers[worker as usize].lease_ends > now_ms
    }

    /// Applies one request at `now_ms` (the store's clock, the true time).
    pub(super) fn apply(
        &mut self,
        request: &StoreRequest,
        now_ms: u64,
        waiting: Waiting,
    ) -> StoreAnswer {
        let (result, token) = match *request {
            StoreRequest::BindLayout { layout } => match self.layout {
                None => {
                    self.layout = Some(layout);
                    self.revision += 1;
                    (Ok(Answer::Done), None)
                }
                Some(recorded) if recorded == layout => (Ok(Answer::Done), None),
                Some(recorded) => (
                    Err(Error::LayoutMismatch {
                        store: "simulated".to_string(),
                        recorded: format!("layout {recorded}"),
                        ours: format!("layout {layout}"),
                    }),
                    None,
                ),
            },
            StoreRequest::RaiseHorizon { horizon_ms } => {
                if horizon_ms > self.horizon_ms {
                    self.horizon_ms = horizon_ms;
                    self.revision += 1;
                }
                (
                    Ok(Answer::Horizon {
                        recorded_ms: self.horizon_ms,
                    }),
                    None,
                )
            }
            StoreRequest::Survey => {
                let numbers = (0..self.numbers.len() as u64)
                    .map(|worker| {
                        let number = &self.numbers[worker as usize];
                        let state = if self.live_lease(worker, now_ms) {
                            NumberState::Held
                        } else if number.history_lost {
                            NumberState::Missing
                        } else {
                            NumberState::Free
                        };
                        Surveyed {
                            worker,
                            state,
                            mark_unix_ms: number.mark,
                            detail: None,
                        }
                    })
                    .collect();
                (Ok(Answer::Numbers(numbers)), None)
            }
            StoreRequest::Acquire { worker, .. } => {
                if self.live_lease(worker, now_ms) {
                    (Err(full(worker)), None)
                } else {
                    let token = self.next_token;
                    self.next_token += 1;
                    self.revision += 1;
                    let number = &mut self.numbers[worker as usize];
                    number.holder = Some(token);
                    number.lease_ends = now_ms + self.ttl_ms;
                    let acquired = Acquired {
                        datacenter: 0,
                        worker,
                        previous_mark_unix_ms: number.mark,
                        previous_unknown: number.history_lost,
                    };
                    let token = Token {
                        id: token,
                        last_write_revision: number.mark_revision,
                        wrote: false,
                        written_mark: 0,
                        granted_ms: now_ms,
                    };
                    (Ok(Answer::Acquired(acquired)), Some(Claim::Etcd(token)))
                }
            }
            StoreRequest::Renew {
                worker,
                mark,
                claim,
                ref unconfirmed,
                ..
            } => self.write(
                worker,
                mark,
                claim.etcd(),
                unconfirmed,
                now_ms,
                (false, waiting),
            ),
            StoreRequest::Release {
                worker,
                mark,
                claim,
                ref unconfirmed,
                ..
            } => self.write(
                worker,
                mark,
                claim.etcd(),
                unconfirmed,
                now_ms,
                (true, waiting),
            ),
        };
        StoreAnswer {
            revision: self.revision,
            procedures: self.procedures,
            result,
            token,
            row_mark: None,
        }
    }

    /// A mark write by the claim `claim`, as the etcd claim makes it: a renewal (which
    /// extends the lease, or takes a lapsed one back if the claim wrote a mark and nobody
    /// wrote the mark key since) or a release (which frees the number; one never used
    /// leaves the mark as it was). A mark key deleted or rewritten under a live claim is
    /// written again, when the client still waits for its answer.
    fn write(
        &mut self,
        worker: u64,
        mark: u64,
        claim: Token,
        unconfirmed: &[u64],
        now_ms: u64,
        (release, waiting): (bool, Waiting),
    ) -> (Result<Answer, Error>, Option<Claim>) {
        let number = &self.numbers[worker as usize];
        // The store is older than the claim's own last write, or holds another value at
        // its very revision: it was restored from a snapshot (the etcd claim finds this
        // when its write's check fails).
        let reused = claim.wrote
            && number.mark_revision == claim.last_write_revision
            && number.mark != Some(claim.written_mark);
        if claim.last_write_revision > self.revision || reused {
            return (
                Err(Error::LeaseStoreRestored {
                    store: "simulated".to_string(),
                    fix: "the procedure".to_string(),
                }),
                None,
            );
        }
        let live = self.live_lease(worker, now_ms);
        let number = &self.numbers[worker as usize];
        // The mark key still holds this claim's last write: its revision and its value (a
        // restore hands out revision numbers again, so the revision alone can match a
        // write that is not ours).
        let unchanged = number.mark_revision == claim.last_write_revision
            && (!claim.wrote || number.mark == Some(claim.written_mark));
        // A mark key deleted, or rewritten no higher than the claim's own last mark, is
        // written again; one raised above it (by the procedure after a restore) is not.
        let rewritable = number
            .mark
            .is_none_or(|mark| mark <= claim.written_mark || unconfirmed.contains(&mark));
        let ours = if live {
            // The keep-alive succeeds (it may be a successor's lease: same ID), and the
            // write checks the holder key holds this claim's token.
            number.holder == Some(claim.id)
                && (unchanged || (waiting == Waiting::Yes && rewritable))
        } else {
            // The lease lapsed: taken back only if this claim wrote a mark and the mark
            // key is still at that write (nobody issued as the number since).
            !release && claim.wrote && unchanged && !number.history_lost
        };
        if !ours {
            return (Err(lost(worker)), None);
        }
        if !live {
            self.take_backs += 1;
        }
        self.revision += 1;
        let revision = self.revision;
        let ttl = self.ttl_ms;
        let number = &mut self.numbers[worker as usize];
        let never_used = release && !claim.wrote && mark <= number.mark.unwrap_or(0);
        if !never_used {
            number.mark = Some(mark);
            number.mark_revision = revision;
            number.history_lost = false;
            number.last_write_ms = now_ms;
        }
        if release {
            (number.holder, number.lease_ends) = (None, 0);
        } else {
            (number.holder, number.lease_ends) = (Some(claim.id), now_ms + ttl);
        }
        let token = Token {
            id: claim.id,
            last_write_revision: number.mark_revision,
            wrote: claim.wrote || !never_used,
            written_mark: if never_used { claim.written_mark } else { mark },
            granted_ms: claim.granted_ms,
        };
        (Ok(Answer::Done), Some(Claim::Etcd(token)))
    }

    /// A leader change: every live lease gets its whole TTL again (etcd's rule).
    pub(super) fn leader_change(&mut self, now_ms: u64) {
        let ttl = self.ttl_ms;
        for number in &mut self.numbers {
            if number.lease_ends > now_ms {
                number.lease_ends = now_ms + ttl;
            }
        }
    }

    /// The operator's procedure after a restore or a wipe (`init --after-restore`, or
    /// `init` with the fleet's largest horizon): every mark raised to a horizon from now.
    pub(super) fn raise_every_mark(&mut self, now_ms: u64, horizon_ms: u64, layout: u32) {
        self.revision += 1;
        self.procedures += 1;
        self.layout.get_or_insert(layout);
        let revision = self.revision;
        self.horizon_ms = self.horizon_ms.max(horizon_ms);
        for number in &mut self.numbers {
            number.mark = Some(number.mark.unwrap_or(0).max(now_ms + horizon_ms));
            number.history_lost = false;
            number.mark_revision = revision;
        }
    }

    /// A restore from `snapshot`: holder keys, leases and marks written since are gone,
    /// and the revision goes back; the leases restored get a whole TTL.
    pub(super) fn restore(&mut self, snapshot: &Store, now_ms: u64) {
        *self = snapshot.clone();
        for number in &mut self.numbers {
            if number.lease_ends > 0 {
                number.lease_ends = now_ms + self.ttl_ms;
            }
        }
    }

    /// `etcdctl del` of a number's mark key.
    pub(super) fn delete_mark(&mut self, worker: u64) {
        self.revision += 1;
        let number = &mut self.numbers[worker as usize];
        number.mark = None;
        number.history_lost = true;
        number.mark_revision = self.revision;
    }

    /// A snapshot at `now_ms`: what etcd saves (leases that ran out are gone, with their
    /// holder keys).
    pub(super) fn snapshot(&self, now_ms: u64) -> Store {
        let mut snapshot = self.clone();
        for number in &mut snapshot.numbers {
            if number.lease_ends <= now_ms {
                (number.holder, number.lease_ends) = (None, 0);
            }
        }
        snapshot
    }

    /// `etcdctl del` of a number's holder key (its lease lives on, unused).
    pub(super) fn delete_holder(&mut self, worker: u64) {
        self.revision += 1;
        self.numbers[worker as usize].holder = None;
    }

    /// `etcdctl del --prefix` of the namespace: every key, the layout and the horizon
    /// (leases are not keys: they live on until they run out).
    pub(super) fn wipe(&mut self) {
        self.revision += 1;
        self.layout = None;
        self.horizon_ms = 0;
        for number in &mut self.numbers {
            *number = Number {
                history_lost: true,
                lease_ends: number.lease_ends,
                ..Number::default()
            };
        }
    }

    /// Numbers whose mark was last written before `before_ms` (true time): the ones a
    /// deletion may hit within the documented clock assumption.
    pub(super) fn written_before(&self, before_ms: u64) -> Vec<u64> {
        (0..self.numbers.len() as u64)
            .filter(|&worker| self.numbers[worker as usize].last_write_ms < before_ms)
            .collect()
    }

    /// The store's revision now.
    pub(super) fn revision(&self) -> u64 {
        self.revision
    }

    /// Whether `layout` is the one recorded.
    pub(super) fn serves(&self, layout: u32) -> bool {
        self.layout == Some(layout)
    }

    pub(super) fn numbers(&self) -> u64 {
        self.numbers.len() as u64
    }
}

pub(super) fn full(worker: u64) -> Error {
    Error::LeaseRangeFull {
        range: format!("datacenter 0, worker {worker}"),
        held: 1,
        unusable: Vec::new(),
    }
}

pub(super) fn lost(worker: u64) -> Error {
    Error::LeaseLost {
        datacenter: 0,
        worker,
    }
}
