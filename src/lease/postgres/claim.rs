//! A held number: the renewal (one statement), release, and what a write that matched
//! nothing found. Uses `store`, `schema` and `verdict`.

use std::fmt;
use std::sync::Arc;

use super::schema::{EVIDENCE, RELEASE};
use super::store::PostgresStore;
use super::verdict::{self, Evidence, Verdict};
use crate::Error;
use crate::lease::Claim;
use crate::lease::records::wall_unix_ms;

pub(super) struct PostgresClaim {
    pub(super) store: PostgresStore,
    pub(super) datacenter: u64,
    pub(super) worker: u64,
    /// Written into the row by the acquire: no other claim has it.
    pub(super) token: String,
    /// The row's version after the claim's last confirmed write: a row older than that
    /// went back in time.
    pub(super) version: i64,
    /// Whether a renewal of the claim was confirmed (a mark of its own is in the row).
    pub(super) wrote: bool,
    /// When the last confirmed write was sent (this host's wall clock).
    pub(super) confirmed_unix_ms: u64,
    pub(super) previous: Option<u64>,
    pub(super) unknown: bool,
    pub(super) released: bool,
}

impl PostgresClaim {
    fn key(&self) -> (String, i64, i64, String, i64) {
        let sql = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        (
            self.store.namespace.clone(),
            sql(self.datacenter),
            sql(self.worker),
            self.token.clone(),
            self.version,
        )
    }

    fn lost(&self) -> Error {
        Error::LeaseLost {
            datacenter: self.datacenter,
            worker: self.worker,
        }
    }

    /// Why a write of the claim matched nothing, as an error (or `Ok` for a miss nothing
    /// explains, which the caller retries).
    fn explain_miss(&mut self) -> Result<(), Error> {
        let (namespace, datacenter, worker, _, _) = self.key();
        let floor = self.store.seen();
        let read = self.store.sql(EVIDENCE);
        let evidence = self.store.session.run(move |client| {
            let row = client.query_one(&read, &[&namespace, &datacenter, &worker])?;
            let version: Option<i64> = row.try_get(1)?;
            Ok(Evidence {
                row: version
                    .map(|version| Ok::<_, postgres::Error>((row.try_get(0)?, version)))
                    .transpose()?,
                state: row.try_get(2)?,
                same_cluster: row.try_get(3)?,
                history: row.try_get(4)?,
            })
        })?;
        let verdict = verdict::after_failed_write(&evidence, &self.token, self.version, floor);
        match verdict {
            Verdict::Lost => {
                self.released = true;
                Err(self.lost())
            }
            Verdict::WentBack(why) => {
                self.released = true;
                if verdict::restore_step_covers(evidence.state.as_deref(), self.confirmed_unix_ms) {
                    return Err(self.lost());
                }
                self.store.mark_restore_found(
                    &format!(
                        "worker {} of datacenter {}: {why}",
                        self.worker, self.datacenter
                    ),
                    evidence.state.as_deref().unwrap_or_default(),
                );
                Err(self.store.restored_error())
            }
            Verdict::Unclear => Err(Error::LeaseStore {
                reason: format!(
                    "{}: worker {}'s write matched nothing, yet its row is this holder's; \
                     retrying",
                    self.store.place(),
                    self.worker
                ),
            }),
        }
    }
}

impl Claim for PostgresClaim {
    fn datacenter(&self) -> u64 {
        self.datacenter
    }

    fn worker(&self) -> u64 {
        self.worker
    }

    fn previous_mark_unix_ms(&self) -> Option<u64> {
        self.previous
    }

    fn previous_mark_unknown(&self) -> bool {
        self.unknown
    }

    fn renew(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        if self.released {
            return Err(self.lost());
        }
        let (namespace, datacenter, worker, token, version) = self.key();
        let mark = i64::try_from(mark_unix_ms).unwrap_or(i64::MAX);
        let ttl_ms = i64::try_from(self.store.ttl.as_millis()).unwrap_or(i64::MAX);
        let sent_unix_ms = wall_unix_ms();
        let floor = self.store.seen();
        let renewed: Option<(i64, i64)> = self.store.session.run_prepared(
            Arc::clone(&self.store.renew),
            move |client, renew| {
                client
                    .query_opt(
                        renew,
                        &[
                            &namespace,
                            &datacenter,
                            &worker,
                            &token,
                            &version,
                            &mark,
                            &ttl_ms,
                        ],
                    )?
                    .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                    .transpose()
            },
        )?;
        match renewed {
            Some((version, history)) => {
                if let Err(error) = self.store.take_history(history, floor) {
                    self.released = true;
                    return Err(error);
                }
                self.version = version;
                self.wrote = true;
                self.confirmed_unix_ms = sent_unix_ms;
                Ok(())
            }
            None => self.explain_miss(),
        }
    }

    fn release(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        // Never used (a number looked at and given back): the row keeps its mark, unless
        // the mark given is higher (for a row whose mark was unknown, the one inferred: else
        // every later taker would infer one further ahead, and never use the number).
        let mark = (self.wrote || mark_unix_ms > self.previous.unwrap_or(0))
            .then(|| i64::try_from(mark_unix_ms).unwrap_or(i64::MAX));
        let (namespace, datacenter, worker, token, version) = self.key();
        let release = self.store.sql(RELEASE);
        let freed = self.store.session.run(move |client| {
            client.execute(
                &release,
                &[&namespace, &datacenter, &worker, &token, &version, &mark],
            )
        })?;
        if freed == 1 {
            return Ok(());
        }
        self.released = false;
        match self.explain_miss() {
            // Lost meanwhile: nothing of ours to free.
            Err(Error::LeaseLost { .. }) => Ok(()),
            other => other,
        }
    }
}

impl fmt::Debug for PostgresClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresClaim")
            .field("namespace", &self.store.namespace)
            .field("datacenter", &self.datacenter)
            .field("worker", &self.worker)
            .field("previous_mark_unix_ms", &self.previous)
            .finish_non_exhaustive()
    }
}
