//! A number held in etcd ([`EtcdClaim`]): renewing it (and taking it back after its lease
//! ran out while etcd was unreachable), writing its mark only while the holder key is still
//! its own, telling a lost number from a store gone back in time, and releasing it. Uses
//! `connection` and `keys`.

use std::fmt;
use std::sync::Arc;

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, LeaseGrantOptions, PutOptions, Txn, TxnOp,
    TxnOpResponse,
};

use super::connection::{Connection, timed};
use super::keys::{parse_mark, revision_of, wall_unix_ms};
use crate::Error;
use crate::lease::Claim;

pub(super) struct EtcdClaim {
    pub(super) connection: Arc<Connection>,
    pub(super) datacenter: u64,
    pub(super) worker: u64,
    pub(super) holder: String,
    /// The holder key's value written by this claim (see `claim_token`).
    pub(super) token: String,
    pub(super) mark_key: String,
    /// The etcd lease, until released.
    pub(super) lease: Option<i64>,
    /// The number's lease ID (see `EtcdStore::lease_id`), granted again to take the
    /// number back.
    pub(super) number_lease: i64,
    pub(super) ttl_secs: i64,
    /// The revision at which this claim put its holder key (again, after a take-back).
    pub(super) claim_revision: i64,
    /// When (this host's wall clock) the last write the store confirmed was sent.
    pub(super) confirmed_unix_ms: u64,
    /// The revision at which this claim last wrote the mark; 0 before its first write.
    pub(super) mark_revision: i64,
    /// The last mark the store confirmed for this claim; 0 before its first write.
    pub(super) written_unix_ms: u64,
    /// Marks sent since that write whose answers never came (they may have landed).
    pub(super) unconfirmed: Vec<u64>,
    pub(super) previous: Option<u64>,
    pub(super) unknown: bool,
}

impl EtcdClaim {
    fn our_mark(&self) -> OurMark {
        OurMark {
            revision: self.mark_revision,
            written: self.written_unix_ms,
            unconfirmed: self.unconfirmed.clone(),
        }
    }

    fn lost(&self) -> Error {
        Error::LeaseLost {
            datacenter: self.datacenter,
            worker: self.worker,
        }
    }

    /// The error for a claim that found the store gone back in time (see
    /// [`Connection::restore_found`]): lost, if the restore step already covered it.
    fn restored(&self, store_value: &str) -> Error {
        match self
            .connection
            .restore_found(store_value, self.confirmed_unix_ms)
        {
            Ok(true) => self.connection.restored_error(),
            Ok(false) => self.lost(),
            // Stop all the same; the next attempt decides again.
            Err(error) => {
                log::error!("idgen: marking the namespace as restored failed: {error}");
                self.connection.restored_error()
            }
        }
    }

    /// Writes the mark if, and only if, the holder key is still this claim's (our token, on
    /// our lease) and the store still has this claim's last mark (`mark_revision`, 0 before
    /// the first write): a mark key older than that means the store went back in time.
    async fn write_mark(
        client: &mut Client,
        claim: &Ours,
        mark_unix_ms: u64,
        delete_holder: bool,
        last: &OurMark,
    ) -> Result<MarkWrite, String> {
        let (mark_revision, written_unix_ms) = (last.revision, last.written);
        let mut then = vec![TxnOp::put(
            claim.mark_key.as_str(),
            mark_unix_ms.to_string(),
            None,
        )];
        if delete_holder {
            then.push(TxnOp::delete(claim.holder.as_str(), None));
        }
        let ours = vec![
            Compare::value(
                claim.holder.as_str(),
                CompareOp::Equal,
                claim.token.as_str(),
            ),
            Compare::lease(claim.holder.as_str(), CompareOp::Equal, claim.lease),
        ];
        let mut when = ours.clone();
        if mark_revision != 0 {
            when.extend(still_our_mark(claim, mark_revision, written_unix_ms));
        }
        let txn = Txn::new()
            .when(when)
            .and_then(then.clone())
            .or_else(claim.evidence());
        let response = timed(client.txn(txn)).await?;
        if response.succeeded() {
            return Ok(MarkWrite::Written(revision_of(&response)));
        }
        let evidence = Evidence::of(&response);
        if evidence.went_back(last) || claim.forgotten(client).await? {
            return Ok(MarkWrite::Restored(evidence.store_value));
        }
        if !evidence.holder_is(claim) {
            return Ok(MarkWrite::Lost);
        }
        // Still ours, but the mark key was deleted or rewritten since our last confirmed
        // write. Raised above our own marks, it was raised by someone else: `init
        // --after-restore`, after a restore that forgot a later holder of this number,
        // which may go on issuing up to it. Going on would issue below it, so the number is
        // given up (and another taken, after the wait). Found by the fleet simulator.
        // Deleted, rewritten lower (by hand), or a write of ours whose answer was lost:
        // ours to write again, if nobody writes it meanwhile.
        if evidence
            .mark_value
            .is_some_and(|value| !last.may_be_ours(value))
        {
            return Ok(MarkWrite::Lost);
        }
        let mut when = ours;
        when.push(Compare::mod_revision(
            claim.mark_key.as_str(),
            CompareOp::Equal,
            evidence.mark_revision.unwrap_or(0),
        ));
        let txn = Txn::new().when(when).and_then(then);
        let response = timed(client.txn(txn)).await?;
        Ok(if response.succeeded() {
            MarkWrite::Written(revision_of(&response))
        } else {
            MarkWrite::Lost
        })
    }

    /// After this claim's lease ran out (etcd was unreachable for longer than the TTL):
    /// takes the number back if nobody has touched it since, which the mark proves: every
    /// holder writes the mark before it issues an ID, so a mark key still at the revision
    /// of this claim's last write means no other process issued as this number since. The
    /// number's lease is granted again (failing if anyone holds it), the holder key put
    /// back, and the new mark written, all or nothing.
    async fn take_back(
        client: &mut Client,
        claim: &Ours,
        ttl_secs: i64,
        last: &OurMark,
        mark_unix_ms: u64,
    ) -> Result<MarkWrite, String> {
        let (mark_revision, written_unix_ms) = (last.revision, last.written);
        let options = LeaseGrantOptions::new().with_id(claim.lease);
        match timed(client.lease_grant(ttl_secs, Some(options))).await {
            Ok(_) => {}
            Err(reason) if reason.contains("lease already exists") => {
                // Another process holds the number's lease: it took the number, or it is
                // only looking at it (a scan for a free number gives back what it does not
                // keep, without writing). Lost only once it wrote a mark.
                let txn = Txn::new().and_then(claim.evidence());
                let evidence = Evidence::of(&timed(client.txn(txn)).await?);
                if evidence.went_back(last) || claim.forgotten(client).await? {
                    return Ok(MarkWrite::Restored(evidence.store_value));
                }
                if evidence.mark_revision == Some(mark_revision)
                    && evidence.mark_value == Some(written_unix_ms)
                {
                    return Err(format!(
                        "{}: another process holds the number's lease but has written no \
                         mark yet; retrying",
                        claim.holder
                    ));
                }
                return Ok(MarkWrite::Lost);
            }
            Err(reason) => return Err(reason),
        }
        let mut when = vec![Compare::version(claim.holder.as_str(), CompareOp::Equal, 0)];
        when.extend(still_our_mark(claim, mark_revision, written_unix_ms));
        let txn = Txn::new()
            .when(when)
            .and_then(vec![
                TxnOp::put(
                    claim.holder.as_str(),
                    claim.token.as_str(),
                    Some(PutOptions::new().with_lease(claim.lease)),
                ),
                TxnOp::put(claim.mark_key.as_str(), mark_unix_ms.to_string(), None),
            ])
            .or_else(claim.evidence());
        let response = timed(client.txn(txn)).await?;
        if response.succeeded() {
            return Ok(MarkWrite::TakenBack(revision_of(&response)));
        }
        timed(client.lease_revoke(claim.lease)).await?;
        let evidence = Evidence::of(&response);
        if evidence.went_back(last) || claim.forgotten(client).await? {
            return Ok(MarkWrite::Restored(evidence.store_value));
        }
        Ok(MarkWrite::Lost)
    }

    fn ours(&self, lease: i64) -> Ours {
        Ours {
            holder: self.holder.clone(),
            token: self.token.clone(),
            mark_key: self.mark_key.clone(),
            store_key: format!("{}store", self.connection.prefix),
            lease,
            claim_revision: self.claim_revision,
        }
    }
}

/// What proves a claim is still ours, owned so a request future can carry it.
struct Ours {
    holder: String,
    token: String,
    mark_key: String,
    store_key: String,
    lease: i64,
    /// When the holder key was put with our token.
    claim_revision: i64,
}

impl Ours {
    /// Whether the store's history lost the write that made the number ours: the holder
    /// key as of the claim's revision is not ours, or that revision is in the store's
    /// future. In a store that only moves forward it stays ours there, however the key
    /// changed since (a successor, a deletion); a restored snapshot has another history.
    /// `false` when the history was compacted away: then only [`Evidence::went_back`]
    /// can tell.
    async fn forgotten(&self, client: &mut Client) -> Result<bool, String> {
        if self.claim_revision == 0 {
            return Ok(false);
        }
        let options = GetOptions::new().with_revision(self.claim_revision);
        match timed(client.get(self.holder.as_str(), Some(options))).await {
            Ok(got) => Ok(!got.kvs().first().is_some_and(|kv| {
                kv.mod_revision() == self.claim_revision && kv.value() == self.token.as_bytes()
            })),
            Err(reason) if reason.contains("future revision") => Ok(true),
            Err(reason) if reason.contains("compacted") => Ok(false),
            Err(reason) => Err(reason),
        }
    }

    /// The reads that tell why a write of ours failed (see [`Evidence`]), in its order.
    fn evidence(&self) -> Vec<TxnOp> {
        vec![
            TxnOp::get(self.holder.as_str(), None),
            TxnOp::get(self.mark_key.as_str(), None),
            TxnOp::get(self.store_key.as_str(), None),
        ]
    }
}

/// What a claim knows of its own writes of the mark key: the last one confirmed (its
/// revision, 0 before the first, and value), and the values of writes sent since whose
/// answers never came (they may have landed).
#[derive(Debug, Clone, Default)]
pub(super) struct OurMark {
    pub(super) revision: i64,
    pub(super) written: u64,
    pub(super) unconfirmed: Vec<u64>,
}

impl OurMark {
    /// Whether `value`, found in the mark key, may be a write of ours.
    fn may_be_ours(&self, value: u64) -> bool {
        value <= self.written || self.unconfirmed.contains(&value)
    }
}

/// The compares that prove the mark key still holds this claim's last write: its revision,
/// and its value. The revision alone is not enough after a snapshot restore, which hands
/// out the same revision numbers again: a write by `init --after-restore` can land at
/// exactly the revision of a forgotten write of ours (found by the fleet simulator).
fn still_our_mark(claim: &Ours, mark_revision: i64, written_unix_ms: u64) -> [Compare; 2] {
    [
        Compare::mod_revision(claim.mark_key.as_str(), CompareOp::Equal, mark_revision),
        Compare::value(
            claim.mark_key.as_str(),
            CompareOp::Equal,
            written_unix_ms.to_string(),
        ),
    ]
}

/// What a claim's write found, and so what became of the claim.
enum MarkWrite {
    /// Written, at this revision.
    Written(i64),
    /// Taken back after the lease ran out: holder key and mark written at this revision.
    TakenBack(i64),
    /// The number is not ours any more.
    Lost,
    /// The store went back in time; the `store` key's value then.
    Restored(String),
}

/// The holder key, mark key and store key as a failed write of ours found them.
struct Evidence {
    /// The store's revision when it answered.
    revision: i64,
    /// The holder key's value and lease, if it exists.
    holder: Option<(String, i64)>,
    /// The mark key's last change, if it exists.
    mark_revision: Option<i64>,
    /// The mark key's value, if it exists (one that does not parse: `u64::MAX`).
    mark_value: Option<u64>,
    /// The `store` key's value ("" if missing).
    store_value: String,
}

impl Evidence {
    fn of(response: &etcd_client::TxnResponse) -> Evidence {
        let mut got = response.op_responses().into_iter().map(|op| match op {
            TxnOpResponse::Get(got) => got.kvs().first().cloned(),
            _ => None,
        });
        let (holder, mark, store) = (
            got.next().flatten(),
            got.next().flatten(),
            got.next().flatten(),
        );
        Evidence {
            revision: revision_of(response),
            holder: holder.map(|kv| (String::from_utf8_lossy(kv.value()).into_owned(), kv.lease())),
            mark_revision: mark.as_ref().map(|kv| kv.mod_revision()),
            mark_value: mark
                .map(|kv| parse_mark(&String::from_utf8_lossy(kv.value())).unwrap_or(u64::MAX)),
            store_value: store
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
                .unwrap_or_default(),
        }
    }

    /// Whether the store is older than our last confirmed write at `mark_revision`: its
    /// revision below it, or our mark key changed last before it. Neither can happen
    /// while the store only moves forward; a snapshot restore does both.
    fn went_back(&self, last: &OurMark) -> bool {
        let mark_revision = last.revision;
        mark_revision != 0
            && (self.revision < mark_revision
                || self
                    .mark_revision
                    .is_some_and(|changed| changed < mark_revision)
                // At the very revision of our last write, but another value: in a store
                // that only moves forward a revision never changes its value; a restore
                // hands revision numbers out again.
                || (self.mark_revision == Some(mark_revision)
                    && self.mark_value != Some(last.written)))
    }

    fn holder_is(&self, claim: &Ours) -> bool {
        self.holder
            .as_ref()
            .is_some_and(|(token, lease)| *token == claim.token && *lease == claim.lease)
    }
}

impl Claim for EtcdClaim {
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
        let Some(lease) = self.lease else {
            return Err(self.lost());
        };
        let mut client = self.connection.client();
        let ours = self.ours(lease);
        let (ttl_secs, mark_revision) = (self.ttl_secs, self.mark_revision);
        let last = self.our_mark();
        // If its answer is lost, this write may still land: a value it leaves in the mark
        // key is ours. (Kept within bounds through a long outage: forgetting the oldest
        // only costs the number, should exactly that one have landed.)
        if self.unconfirmed.len() >= 256 {
            self.unconfirmed.remove(0);
        }
        self.unconfirmed.push(mark_unix_ms);
        let sent_unix_ms = wall_unix_ms();
        let written = self.connection.run(async move {
            let kept = async {
                let (mut keeper, mut responses) = timed(client.lease_keep_alive(lease)).await?;
                timed(keeper.keep_alive()).await?;
                match timed(responses.message()).await? {
                    Some(response) => Ok(response.ttl() > 0),
                    None => Err("the keep-alive stream closed".to_string()),
                }
            };
            let alive = match kept.await {
                Ok(alive) => alive,
                // etcd answers a keep-alive for an expired (revoked) lease either with TTL 0
                // or with ErrLeaseNotFound, "etcdserver: requested lease not found".
                Err(reason) if reason.contains("lease not found") => false,
                Err(reason) => return Err(reason),
            };
            if !alive {
                if mark_revision == 0 {
                    return Ok(MarkWrite::Lost);
                }
                let taken =
                    EtcdClaim::take_back(&mut client, &ours, ttl_secs, &last, mark_unix_ms).await?;
                if let MarkWrite::TakenBack(_) = taken {
                    log::info!(
                        "idgen: etcd key {}: the lease ran out while etcd was unreachable; \
                         nobody took the number meanwhile, so it was taken back",
                        ours.holder
                    );
                }
                return Ok(taken);
            }
            EtcdClaim::write_mark(&mut client, &ours, mark_unix_ms, false, &last).await
        })?;
        match written {
            MarkWrite::Written(revision) => {
                self.connection.saw(revision);
                self.mark_revision = revision;
                self.written_unix_ms = mark_unix_ms;
                self.unconfirmed.clear();
                self.confirmed_unix_ms = sent_unix_ms;
                self.lease = Some(self.number_lease);
                Ok(())
            }
            MarkWrite::TakenBack(revision) => {
                self.connection.saw(revision);
                self.mark_revision = revision;
                self.written_unix_ms = mark_unix_ms;
                self.unconfirmed.clear();
                self.claim_revision = revision;
                self.confirmed_unix_ms = sent_unix_ms;
                self.lease = Some(self.number_lease);
                Ok(())
            }
            MarkWrite::Lost => {
                self.lease = None;
                Err(self.lost())
            }
            MarkWrite::Restored(store_value) => {
                self.lease = None;
                Err(self.restored(&store_value))
            }
        }
    }

    fn release(&mut self, mark_unix_ms: u64) -> Result<(), Error> {
        let Some(lease) = self.lease.take() else {
            return Ok(());
        };
        let mut client = self.connection.client();
        let ours = self.ours(lease);
        let (wrote, previous) = (self.mark_revision != 0, self.previous.unwrap_or(0));
        let last = self.our_mark();
        let restored = self.connection.run(async move {
            if !wrote && mark_unix_ms <= previous {
                // Never used (a number looked at and given back): the mark stays exactly as
                // it was, so a holder cut off from etcd can still take its number back.
                let txn = Txn::new()
                    .when(vec![
                        Compare::value(ours.holder.as_str(), CompareOp::Equal, ours.token.as_str()),
                        Compare::lease(ours.holder.as_str(), CompareOp::Equal, ours.lease),
                    ])
                    .and_then(vec![TxnOp::delete(ours.holder.as_str(), None)]);
                if timed(client.txn(txn)).await?.succeeded() {
                    timed(client.lease_revoke(lease)).await?;
                }
                return Ok(None);
            }
            // Revoke only a lease proven ours: the number's lease ID may have passed to a
            // successor after ours ran out.
            match EtcdClaim::write_mark(&mut client, &ours, mark_unix_ms, true, &last).await? {
                MarkWrite::Written(_) | MarkWrite::TakenBack(_) => {
                    timed(client.lease_revoke(lease)).await?;
                    Ok(None)
                }
                MarkWrite::Lost => Ok(None),
                MarkWrite::Restored(store_value) => Ok(Some(store_value)),
            }
        })?;
        match restored {
            None => Ok(()),
            Some(store_value) => Err(self.restored(&store_value)),
        }
    }
}

impl Drop for EtcdClaim {
    fn drop(&mut self) {
        // A claim dropped without release (the keeper lost it, or acquiring failed later):
        // leave the lease to expire on its own. The number stays taken until then, and its
        // mark stays what the last renewal wrote.
        self.lease = None;
    }
}

impl fmt::Debug for EtcdClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdClaim")
            .field("holder", &self.holder)
            .field("lease", &self.lease)
            .field("previous_mark_unix_ms", &self.previous)
            .finish()
    }
}
