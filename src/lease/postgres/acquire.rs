//! How [`PostgresStore`] is a [`LeaseStore`]: acquiring a number (one statement that takes
//! a free or expired row), surveying a range, and the namespace's layout and horizon
//! records. Uses `store`, `claim`, `schema` and `verdict`.

use std::sync::Arc;
use std::time::Duration;

use super::claim::PostgresClaim;
use super::schema::{
    ACQUIRE, ACQUIRE_MISSING, BIND_LAYOUT, CANDIDATES, LAYOUT, RAISE_HORIZON, SURVEY,
};
use super::store::PostgresStore;
use super::verdict::{self, SurveyRow};
use crate::lease::records::{unique_claim, wall_unix_ms};
use crate::lease::{Claim, LeaseStore, NumberRecord, WorkerRange};
use crate::{Error, Layout};

/// A number or datacenter as PostgreSQL's `bigint` holds it (every layout's fit).
fn sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl LeaseStore for PostgresStore {
    fn default_outage_horizon(&self) -> Duration {
        self.outage_horizon.max(self.ttl)
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        self.acquire_as(range, "")
    }

    fn acquire_as(&self, range: &WorkerRange, holder_name: &str) -> Result<Box<dyn Claim>, Error> {
        self.check_namespace(true)?;
        let datacenter = range.datacenter();
        let ttl_ms = sql(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX));
        let holder = (!holder_name.is_empty()).then(|| holder_name.to_string());
        let (first, last) = (sql(range.first()), sql(range.last()));
        let (namespace, candidates) = (self.namespace.clone(), self.sql(CANDIDATES));
        let candidates: Vec<u64> = self.session.run(move |client| {
            client
                .query(&candidates, &[&namespace, &sql(datacenter), &first, &last])?
                .iter()
                .map(|row| Ok(u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(u64::MAX)))
                .collect()
        })?;
        let size = range.last() - range.first() + 1;
        let mut held = size.saturating_sub(candidates.len() as u64);
        for worker in candidates {
            let token = unique_claim()?;
            let claimed_at = wall_unix_ms();
            let (namespace, taken_token, taken_holder) =
                (self.namespace.clone(), token.clone(), holder.clone());
            let (acquire, acquire_missing) = (self.sql(ACQUIRE), self.sql(ACQUIRE_MISSING));
            let floor = self.seen();
            // The row taken (the previous mark, the version, the history's value), or made
            // again after a deletion (its version and the history's value; the mark
            // unknown), or neither.
            type Taken = (Option<i64>, i64, i64);
            let taken: Option<Taken> = self.session.run(move |client| {
                let key = (sql(datacenter), sql(worker));
                let params: [&(dyn postgres::types::ToSql + Sync); 6] = [
                    &namespace,
                    &key.0,
                    &key.1,
                    &taken_token,
                    &taken_holder,
                    &ttl_ms,
                ];
                if let Some(row) = client.query_opt(&acquire, &params)? {
                    return Ok(Some((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)));
                }
                match client.query_opt(&acquire_missing, &params)? {
                    Some(row) => Ok(Some((None, row.try_get(0)?, row.try_get(1)?))),
                    None => Ok(None),
                }
            })?;
            let Some((mark_ms, version, history)) = taken else {
                held += 1;
                continue;
            };
            // Taken in a store behind this process's history: the number stays taken
            // (the restore step ends every holding), nothing is issued on it.
            self.take_history(history, floor)?;
            let (previous, unknown) = verdict::previous_mark(mark_ms);
            if unknown {
                log::warn!(
                    "idgen: {}: worker {worker}'s mark is unknown (its row was deleted); its \
                     next holder waits an outage horizon for any earlier holder to stop",
                    self.place()
                );
            }
            return Ok(Box::new(PostgresClaim {
                store: self.handle(),
                datacenter,
                worker,
                token,
                version,
                wrote: false,
                confirmed_unix_ms: claimed_at,
                previous,
                unknown,
                released: false,
            }));
        }
        // Nothing taken: held, or the namespace stopped being usable since the check.
        self.check_namespace(true)?;
        Err(Error::LeaseRangeFull {
            range: range.to_string(),
            held,
            unusable: Vec::new(),
        })
    }

    fn bind_layout(&self, layout: &Layout) -> Result<(), Error> {
        let namespace = self.namespace.clone();
        let ours = layout.record();
        let (bind, read) = (self.sql(BIND_LAYOUT), self.sql(LAYOUT));
        let (created, recorded) = self.session.run(move |client| {
            let created = client.execute(&bind, &[&namespace, &ours])? == 1;
            let recorded: Option<Option<String>> = client
                .query_opt(&read, &[&namespace])?
                .map(|row| row.try_get(0))
                .transpose()?;
            Ok((created, recorded))
        })?;
        let Some(recorded) = recorded else {
            return Err(self.uninitialised());
        };
        if created {
            log::info!(
                "idgen: {} had no layout; it now serves {layout}",
                self.place()
            );
        }
        crate::lease::store::check_layout(
            &self.layout_place(),
            &recorded.unwrap_or_default(),
            layout,
        )
    }

    fn raise_horizon(&self, horizon: Duration) -> Result<Duration, Error> {
        let (namespace, raise) = (self.namespace.clone(), self.sql(RAISE_HORIZON));
        let ours = sql(u64::try_from(horizon.as_millis()).unwrap_or(u64::MAX));
        let largest: Option<i64> = self.session.run(move |client| {
            client
                .query_opt(&raise, &[&namespace, &ours])?
                .map(|row| row.try_get(0))
                .transpose()
        })?;
        let largest = largest.ok_or_else(|| self.uninitialised())?;
        Ok(Duration::from_millis(u64::try_from(largest).unwrap_or(0)))
    }

    fn recorded_layout(&self) -> Result<Option<Layout>, Error> {
        let (namespace, read) = (self.namespace.clone(), self.sql(LAYOUT));
        let text: Option<Option<String>> = self.session.run(move |client| {
            client
                .query_opt(&read, &[&namespace])?
                .map(|row| row.try_get(0))
                .transpose()
        })?;
        text.flatten()
            .map(|text| {
                Layout::from_record(&text)
                    .ok_or_else(|| crate::lease::store::unreadable_layout(&self.layout_place()))
            })
            .transpose()
    }

    fn survey(&self, range: &WorkerRange) -> Result<Vec<NumberRecord>, Error> {
        // As at an acquire: a process that only surveys while it waits for a number finds
        // a restore too.
        self.check_namespace(false)?;
        let (namespace, survey) = (self.namespace.clone(), self.sql(SURVEY));
        let datacenter = range.datacenter();
        let (first, last) = (sql(range.first()), sql(range.last()));
        let rows: Vec<SurveyRow> = self.session.run(move |client| {
            client
                .query(&survey, &[&namespace, &sql(datacenter), &first, &last])?
                .iter()
                .map(|row| {
                    Ok(SurveyRow {
                        worker: u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(u64::MAX),
                        held: row.try_get(1)?,
                        holder: row.try_get(2)?,
                        mark_ms: row.try_get(3)?,
                    })
                })
                .collect()
        })?;
        let place = format!("{} (table {}.idgen_leases)", self.place(), self.schema);
        Ok(range
            .workers()
            .map(|worker| {
                let row = rows.iter().find(|row| row.worker == worker);
                verdict::number_record(datacenter, worker, row, &place)
            })
            .collect())
    }
}

impl PostgresStore {
    fn layout_place(&self) -> String {
        format!(
            "PostgreSQL table {}.idgen_lease_namespaces (namespace {}, column layout)",
            self.schema, self.namespace
        )
    }

    /// What a claim keeps of the store: the connection, the namespace and the TTL.
    fn handle(&self) -> PostgresStore {
        PostgresStore {
            session: Arc::clone(&self.session),
            schema: Arc::clone(&self.schema),
            renew: Arc::clone(&self.renew),
            namespace: self.namespace.clone(),
            ttl: self.ttl,
            outage_horizon: self.outage_horizon,
            seen: Arc::clone(&self.seen),
        }
    }
}
