//! The connection to etcd the store and its claims share: the client, the private runtime
//! its requests run on, the request timeout, the refusal to block inside another Tokio
//! runtime, and the namespace's verdict once a claim found it restored. Uses `keys`.

use crate::sync::{AtomicUsize, Ordering};
use std::fmt;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};

use super::keys::{RESTORE_FOUND, after_restore_ms, parse_mark, restore_found_ms, wall_unix_ms};
use crate::Error;

/// How long one request to etcd may take before it counts as failed.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The clients and the runtime their connections live on, shared by the store and its
/// claims.
///
/// One client per endpoint, and requests go to one of them, the preferred, until a request
/// fails: then the next endpoint is preferred. A balanced client over every endpoint would
/// go on sending to a member that accepts connections but does not answer (paused, or cut
/// off from its peers): each request there waits out its timeout, and a holder whose
/// renewals all land there runs past its mark although the cluster has a quorum.
pub(super) struct Connection {
    /// Always `Some` until dropped.
    pub(super) runtime: Option<tokio::runtime::Runtime>,
    /// One per endpoint, in the order given.
    pub(super) clients: Vec<Client>,
    /// The index (modulo the count) of the client requests go to.
    pub(super) preferred: AtomicUsize,
    pub(super) endpoints: Vec<String>,
    /// The namespace's key prefix.
    pub(super) prefix: String,
    /// The newest revision an answer on this connection carried, and when.
    pub(super) newest: Mutex<Newest>,
}

/// A revision of the store, and the wall time (Unix ms) it was first seen.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Newest {
    revision: i64,
    seen_unix_ms: u64,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which Tokio forbids (with a panic) inside another
        // runtime; shutting it down in the background never blocks, wherever the last
        // store or claim is dropped.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Connection {
    /// The client requests go to now.
    pub(super) fn client(&self) -> Client {
        let index = self.preferred.load(Ordering::Relaxed) % self.clients.len();
        self.clients[index].clone()
    }

    /// The refusal of a store found gone back in time, with the procedure that ends it.
    pub(super) fn restored_error(&self) -> Error {
        let namespace = self.prefix.trim_end_matches('/');
        Error::LeaseStoreRestored {
            store: format!("etcd namespace {namespace}"),
            fix: format!(
                "run: idgen leases init --after-restore --etcd {} --namespace {namespace} \
                 (with the fleet's layout flags and its largest --outage-horizon): until \
                 then no process takes a number from this namespace",
                self.endpoints.join(",")
            ),
        }
    }

    /// After a claim found the store gone back in time, with the `store` key's value `seen`:
    /// whether the namespace is to be refused as restored (`true`), or the restore step
    /// already ran after the claim's last confirmed write at `confirmed_unix_ms` (`false`:
    /// the marks are raised past everything the claim wrote, so it is only lost). Marks
    /// the namespace `restore-found`, so that every process, not only this one, refuses to
    /// take numbers until `init --after-restore` has run.
    pub(super) fn restore_found(&self, seen: &str, confirmed_unix_ms: u64) -> Result<bool, Error> {
        if after_restore_ms(seen).is_some_and(|step| step >= confirmed_unix_ms) {
            return Ok(false);
        }
        if restore_found_ms(seen).is_none() {
            let mut client = self.client();
            let store_key = format!("{}store", self.prefix);
            let value = format!(
                "idgen-lease-store v1 {RESTORE_FOUND}{} by pid {}",
                wall_unix_ms(),
                std::process::id()
            );
            let seen = seen.to_string();
            // Only over what was seen: a restore step that ran meanwhile is not undone
            // (the next write of this claim decides again).
            self.run(async {
                let unchanged = if seen.is_empty() {
                    Compare::version(store_key.as_str(), CompareOp::Equal, 0)
                } else {
                    Compare::value(store_key.as_str(), CompareOp::Equal, seen.as_str())
                };
                let txn = Txn::new().when(vec![unchanged]).and_then(vec![TxnOp::put(
                    store_key.as_str(),
                    value.as_str(),
                    None,
                )]);
                timed(client.txn(txn)).await?;
                Ok(())
            })?;
        }
        log::error!(
            "idgen: etcd namespace {} went back in time (restored from a snapshot?): stopped \
             issuing; {}",
            self.prefix.trim_end_matches('/'),
            self.restored_error()
        );
        Ok(true)
    }

    /// The newest revision an answer on this connection carried so far, to compare the
    /// answer of a request sent now with (see [`check_not_gone_back`](Self::check_not_gone_back)).
    pub(super) fn newest(&self) -> Newest {
        *self.newest.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes the revision an answer carried.
    pub(super) fn saw(&self, revision: i64) {
        let mut newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        if revision > newest.revision {
            *newest = Newest {
                revision,
                seen_unix_ms: wall_unix_ms(),
            };
        }
    }

    /// Before a number is taken, with the `store` key's value, the revision of the answer
    /// that carried it, and what was [`newest`](Self::newest) before that request was sent:
    /// refuses a store whose revision went back (restored from a snapshot, or another
    /// cluster behind the endpoints), unless the restore step ran since that look, and
    /// marks the namespace as [`restore_found`](Self::restore_found). etcd's revision only
    /// grows, and a linearizable answer, from whichever member, is never older than one
    /// received before its request was sent (an answer to a request sent earlier, on
    /// another thread, may be). Without this, a process already waiting for a number would
    /// take one the restored store shows free while its holder from before the restore
    /// still issues as it, until that holder's next renewal finds the restore.
    pub(super) fn check_not_gone_back(
        &self,
        before: Newest,
        revision: i64,
        store_value: &str,
    ) -> Result<(), Error> {
        if revision >= before.revision {
            self.saw(revision);
            return Ok(());
        }
        if self.restore_found(store_value, before.seen_unix_ms)? {
            return Err(self.restored_error());
        }
        // The restore step ran after that look: the restored store's revisions are the
        // ones to go by from now on.
        *self.newest.lock().unwrap_or_else(PoisonError::into_inner) = Newest {
            revision,
            seen_unix_ms: wall_unix_ms(),
        };
        Ok(())
    }

    pub(super) fn run<T>(
        &self,
        request: impl Future<Output = Result<T, String>>,
    ) -> Result<T, Error> {
        outside_runtime()?;
        let runtime = self.runtime.as_ref().ok_or_else(|| Error::LeaseStore {
            reason: "the etcd client's runtime is shut down".to_string(),
        })?;
        runtime.block_on(request).map_err(|reason| {
            // Whatever failed, the next request goes to the next member: a logical refusal
            // costs nothing there, and a member that does not answer is left behind.
            self.preferred.fetch_add(1, Ordering::Relaxed);
            Error::LeaseStore {
                reason: format!("etcd at {}: {reason}", self.endpoints.join(",")),
            }
        })
    }
}

/// Runs one request with the request timeout, turning both failures into text.
pub(super) async fn timed<T, E: fmt::Display>(
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
    }
}

pub(super) fn outside_runtime() -> Result<(), Error> {
    #[cfg(feature = "tokio")]
    if super::super::take_async::may_block_here() {
        // `acquire_async` and `release_async` send their requests from Tokio's blocking
        // pool, whose threads are inside the runtime's context but may block.
        return Ok(());
    }
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::LeaseConfig {
            reason: "the etcd store blocks; call it from a plain thread, not from inside a \
                     Tokio runtime (from async code: LeasedBuilder::acquire_async and \
                     LeasedGenerator::release_async, feature tokio)"
                .to_string(),
        });
    }
    Ok(())
}

/// Raises the decimal value of `key` to at least `floor`, never lowering it: a writer that
/// raises it meanwhile makes the compare fail, and the value is read again. A value that
/// does not parse counts as none. The value now, and whether this call wrote it.
pub(super) async fn raise_key(
    client: &mut Client,
    key: &str,
    floor: u64,
) -> Result<(u64, bool), String> {
    loop {
        let got = timed(client.get(key, None)).await?;
        let (current, changed) = match got.kvs().first() {
            Some(kv) => (
                parse_mark(&String::from_utf8_lossy(kv.value())).ok(),
                kv.mod_revision(),
            ),
            None => (None, 0),
        };
        if let Some(current) = current.filter(|&current| current >= floor) {
            return Ok((current, false));
        }
        let unchanged = if changed == 0 {
            Compare::version(key, CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(key, CompareOp::Equal, changed)
        };
        let txn = Txn::new().when(vec![unchanged]).and_then(vec![TxnOp::put(
            key,
            floor.to_string(),
            None,
        )]);
        if timed(client.txn(txn)).await?.succeeded() {
            return Ok((floor, true));
        }
    }
}
