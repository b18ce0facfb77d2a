//! How [`EtcdStore`] is a [`LeaseStore`]: acquiring a number (the lowest free one, with its
//! previous holder's mark), surveying a range, and the namespace's layout and horizon
//! records. Uses `store`, `claim`, `connection` and `keys`.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Compare, CompareOp, GetOptions, LeaseGrantOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
};

use super::claim::EtcdClaim;
use super::connection::{raise_key, timed};
use super::keys::{
    claim_token, holder_of, parse_mark, restore_found_ms, revision_of, wall_unix_ms,
};
use super::store::EtcdStore;
use crate::lease::{Claim, LeaseStore, NumberRecord, NumberState, WorkerRange};
use crate::{Error, Layout};

impl LeaseStore for EtcdStore {
    fn default_outage_horizon(&self) -> Duration {
        self.outage_horizon.max(self.ttl)
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn acquire(&self, range: &WorkerRange) -> Result<Box<dyn Claim>, Error> {
        self.acquire_as(range, "")
    }

    fn bind_layout(&self, layout: &Layout) -> Result<(), Error> {
        let mut client = self.connection.client();
        let (layout_key, store_key) = (self.layout_key(), self.store_key());
        let ours = layout.record();
        // Recorded only in an initialised namespace, and only where none is: of two
        // processes racing, etcd runs one transaction first and the other finds its record.
        let (created, initialised, recorded) = self.run(async {
            let txn = Txn::new()
                .when(vec![
                    Compare::version(layout_key.as_str(), CompareOp::Equal, 0),
                    Compare::version(store_key.as_str(), CompareOp::Greater, 0),
                ])
                .and_then(vec![TxnOp::put(layout_key.as_str(), ours.as_str(), None)])
                .or_else(vec![
                    TxnOp::get(layout_key.as_str(), None),
                    TxnOp::get(store_key.as_str(), None),
                ]);
            let response = timed(client.txn(txn)).await?;
            if response.succeeded() {
                return Ok((true, true, Some(ours.clone())));
            }
            let mut values = response.op_responses().into_iter().map(|op| match op {
                TxnOpResponse::Get(got) => got
                    .kvs()
                    .first()
                    .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
                _ => None,
            });
            let recorded = values.next().flatten();
            let initialised = values.next().flatten().is_some();
            Ok((false, initialised, recorded))
        })?;
        if !initialised {
            return Err(self.uninitialised());
        }
        if created {
            log::info!(
                "idgen: the etcd namespace {} had no layout; it now serves {layout}",
                self.prefix.trim_end_matches('/')
            );
        }
        crate::lease::store::check_layout(
            &format!("etcd key {layout_key}"),
            &recorded.unwrap_or_default(),
            layout,
        )
    }

    fn raise_horizon(&self, horizon: Duration) -> Result<Duration, Error> {
        let mut client = self.connection.client();
        let key = self.horizon_key();
        let ours = u64::try_from(horizon.as_millis()).unwrap_or(u64::MAX);
        let (largest, _) = self.run(raise_key(&mut client, &key, ours))?;
        Ok(Duration::from_millis(largest))
    }

    fn recorded_layout(&self) -> Result<Option<Layout>, Error> {
        let mut client = self.connection.client();
        let layout_key = self.layout_key();
        let text = self.run(async {
            let got = timed(client.get(layout_key.as_str(), None)).await?;
            Ok(got
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
        })?;
        text.map(|text| {
            Layout::from_record(&text).ok_or_else(|| {
                crate::lease::store::unreadable_layout(&format!("etcd key {layout_key}"))
            })
        })
        .transpose()
    }

    fn survey(&self, range: &WorkerRange) -> Result<Vec<NumberRecord>, Error> {
        let mut client = self.connection.client();
        let store_key = self.store_key();
        let datacenter = range.datacenter();
        let holders = format!("{}dc/{datacenter}/holder/", self.prefix);
        let marks = format!("{}dc/{datacenter}/mark/", self.prefix);
        // (the store key's value, holders: worker -> (value, lease), marks: worker -> value,
        // the revision of the first answer)
        type Listed = (
            Option<String>,
            Vec<(u64, String, i64)>,
            Vec<(u64, String)>,
            Option<i64>,
        );
        let before = self.connection.newest();
        let (store_value, held, marked, revision): Listed = self.run(async {
            let got = timed(client.get(store_key.as_str(), None)).await?;
            let store_value = got
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
            let revision = got.header().map(|header| header.revision());
            let mut listed = Vec::new();
            for prefix in [&holders, &marks] {
                let got = timed(client.get(prefix.as_str(), Some(GetOptions::new().with_prefix())))
                    .await?;
                listed.push(
                    got.kvs()
                        .iter()
                        .filter_map(|kv| {
                            let worker = kv.key_str().ok()?.strip_prefix(prefix.as_str())?;
                            Some((
                                worker.parse().ok()?,
                                String::from_utf8_lossy(kv.value()).into_owned(),
                                kv.lease(),
                            ))
                        })
                        .collect::<Vec<(u64, String, i64)>>(),
                );
            }
            let marked = listed
                .pop()
                .unwrap_or_default()
                .into_iter()
                .map(|(worker, value, _)| (worker, value))
                .collect();
            Ok((
                store_value,
                listed.pop().unwrap_or_default(),
                marked,
                revision,
            ))
        })?;
        let Some(store_value) = store_value else {
            return Err(self.uninitialised());
        };
        // As at an acquire: a process that only surveys while it waits for a number (every
        // number held) finds a restore too, and a namespace marked restored is refused.
        if restore_found_ms(&store_value).is_some() {
            return Err(self.connection.restored_error());
        }
        if let Some(revision) = revision {
            self.connection
                .check_not_gone_back(before, revision, &store_value)?;
        }
        Ok(range
            .workers()
            .map(|worker| {
                let mut number = NumberRecord::new(datacenter, worker);
                if let Some((_, token, lease)) = held.iter().find(|(w, ..)| *w == worker) {
                    number.state = NumberState::Held;
                    number.holder = Some(holder_of(token));
                    if *lease == 0 {
                        number.state = NumberState::Corrupt;
                        number.detail = Some(format!(
                            "{}: a holder key without a lease, put by hand",
                            self.holder_key(datacenter, worker)
                        ));
                    }
                }
                match marked.iter().find(|(w, _)| *w == worker) {
                    Some((_, text)) => match parse_mark(text) {
                        Ok(mark) => number.mark_unix_ms = Some(mark),
                        Err(reason) => {
                            number.state = NumberState::Corrupt;
                            number.detail =
                                Some(format!("{}: {reason}", self.mark_key(datacenter, worker)));
                        }
                    },
                    None if number.state == NumberState::Free => {
                        number.state = NumberState::Missing;
                        number.detail = Some(format!(
                            "{} is missing (deleted?)",
                            self.mark_key(datacenter, worker)
                        ));
                    }
                    None => {}
                }
                number
            })
            .collect())
    }

    fn acquire_as(&self, range: &WorkerRange, holder_name: &str) -> Result<Box<dyn Claim>, Error> {
        let mut client = self.connection.client();
        let store_key = self.store_key();
        let before = self.connection.newest();
        let (store_value, revision) = self.run(async {
            let got = timed(client.get(store_key.as_str(), None)).await?;
            let value = got
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
            Ok((value, got.header().map(|header| header.revision())))
        })?;
        let Some(store_value) = store_value else {
            return Err(self.uninitialised());
        };
        if restore_found_ms(&store_value).is_some() {
            return Err(self.connection.restored_error());
        }
        // An answer without a header says nothing of the revision: not a sign of a restore.
        if let Some(revision) = revision {
            self.connection
                .check_not_gone_back(before, revision, &store_value)?;
        }
        let datacenter = range.datacenter();
        let held_prefix = format!("{}dc/{datacenter}/holder/", self.prefix);
        // Each holder key and its lease (0: none).
        let taken: Vec<(u64, i64)> = self.run(async {
            let options = GetOptions::new().with_prefix().with_keys_only();
            let listed = timed(client.get(held_prefix.as_str(), Some(options))).await?;
            Ok(listed
                .kvs()
                .iter()
                .filter_map(|kv| {
                    let worker = kv
                        .key_str()
                        .ok()?
                        .strip_prefix(&held_prefix)?
                        .parse()
                        .ok()?;
                    Some((worker, kv.lease()))
                })
                .collect())
        })?;
        let mut held = 0;
        let mut unusable = Vec::new();
        for worker in range.workers() {
            match taken.iter().find(|(taken, _)| *taken == worker) {
                // Put by hand without a lease: it never expires, and no holder renews it.
                Some((_, 0)) => {
                    let key = self.holder_key(datacenter, worker);
                    unusable.push(format!(
                        "{key} (a holder key without a lease, put by hand: it never expires; \
                         delete it once no process issues as worker {worker})"
                    ));
                    continue;
                }
                Some(_) => {
                    held += 1;
                    continue;
                }
                None => {}
            }
            // The number's own lease ID is its liveness lock: while any holder, even one
            // whose keys were deleted, keeps that lease alive, granting it again fails.
            let lease = self.lease_id(datacenter, worker);
            let ttl_secs = self.ttl.as_secs() as i64;
            let granted = self.run(async {
                let options = LeaseGrantOptions::new().with_id(lease);
                match timed(client.lease_grant(ttl_secs, Some(options))).await {
                    Ok(_) => Ok(true),
                    Err(reason) if reason.contains("lease already exists") => Ok(false),
                    Err(reason) => Err(reason),
                }
            })?;
            if !granted {
                held += 1;
                continue;
            }
            let holder = self.holder_key(datacenter, worker);
            let mark_key = self.mark_key(datacenter, worker);
            // The holder key's value names this claim alone: the lease ID is the number's,
            // so a holder whose lease ran out and was granted again to a successor would
            // otherwise pass for that successor.
            let token = claim_token(holder_name)?;
            let value = token.clone();
            let claimed_at = wall_unix_ms();
            let claimed = self.run(async {
                let txn = Txn::new()
                    .when(vec![
                        Compare::version(holder.as_str(), CompareOp::Equal, 0),
                        Compare::version(store_key.as_str(), CompareOp::Greater, 0),
                    ])
                    .and_then(vec![
                        TxnOp::put(
                            holder.as_str(),
                            value,
                            Some(PutOptions::new().with_lease(lease)),
                        ),
                        TxnOp::get(mark_key.as_str(), None),
                    ]);
                let response = timed(client.txn(txn)).await?;
                if !response.succeeded() {
                    return Ok(None);
                }
                let revision = revision_of(&response);
                let mark = response.op_responses().into_iter().find_map(|op| match op {
                    TxnOpResponse::Get(got) => Some(
                        got.kvs()
                            .first()
                            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
                    ),
                    _ => None,
                });
                Ok(Some((mark.flatten(), revision)))
            });
            // The claim itself, too, must not land on a store older than the first look
            // (endpoints that now lead to a restored copy between two requests).
            let claimed = claimed.and_then(|claimed| {
                if let Some((_, claim_revision)) = claimed.as_ref().filter(|c| c.1 != 0) {
                    self.connection
                        .check_not_gone_back(before, *claim_revision, &store_value)?;
                }
                Ok(claimed)
            });
            let (mark_text, claim_revision) = match claimed {
                Ok(Some(claimed)) => claimed,
                Ok(None) => {
                    self.revoke(lease);
                    held += 1;
                    continue;
                }
                Err(error) => {
                    self.revoke(lease);
                    return Err(error);
                }
            };
            let (previous, unknown) = match mark_text.as_deref().map(parse_mark) {
                Some(Ok(previous)) => (Some(previous), false),
                // `idgen leases init` writes a mark for every number: a missing one was
                // deleted, and with it what the number's earlier holders did.
                None => {
                    log::warn!(
                        "idgen: etcd key {mark_key} is missing (deleted?); the next holder of \
                         worker {worker} waits an outage horizon for any earlier holder to stop"
                    );
                    (None, true)
                }
                Some(Err(reason)) => {
                    // Without a trustworthy mark the number cannot be reused safely: give
                    // the key back and look further.
                    log::error!("idgen: etcd key {mark_key}: {reason}; worker {worker} skipped");
                    unusable.push(format!("{mark_key} ({reason})"));
                    self.revoke(lease);
                    continue;
                }
            };
            return Ok(Box::new(EtcdClaim {
                connection: Arc::clone(&self.connection),
                datacenter,
                worker,
                holder,
                token,
                mark_key,
                lease: Some(lease),
                number_lease: lease,
                ttl_secs,
                claim_revision,
                confirmed_unix_ms: claimed_at,
                mark_revision: 0,
                written_unix_ms: 0,
                unconfirmed: Vec::new(),
                previous,
                unknown,
            }));
        }
        Err(Error::LeaseRangeFull {
            range: range.to_string(),
            held,
            unusable,
        })
    }
}

impl EtcdStore {
    fn revoke(&self, lease: i64) {
        let mut client = self.connection.client();
        let _ = self.run(async {
            timed(client.lease_revoke(lease)).await?;
            Ok(())
        });
    }
}
