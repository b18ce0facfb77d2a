//! [`EtcdStore`]: connecting, its settings, the namespace's keys, and the `init` steps that
//! write the marks. Uses `connection` and `keys`.

use crate::sync::AtomicUsize;
use std::fmt;
use std::future::Future;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, GetOptions, Txn, TxnOp};

use super::connection::{Connection, REQUEST_TIMEOUT, outside_runtime, raise_key, timed};
use super::keys::{AFTER_RESTORE, namespace_prefix, parse_mark, restore_found_ms};
use crate::Error;
use crate::lease::{LeaseStore, MAX_OUTAGE_HORIZON};

/// etcd's default TTL here, as the issue of leases asks: 30 s, renewed every 10 s.
pub const ETCD_DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The default outage horizon of an etcd store: how long a holder goes on issuing when it
/// cannot reach etcd (an upgrade, a lost quorum), and how long a crashed holder's number
/// stays unusable.
pub const ETCD_DEFAULT_OUTAGE_HORIZON: Duration = Duration::from_secs(180);

/// Leases worker numbers from an etcd cluster (feature `etcd`).
///
/// Under the namespace prefix `P`, worker `W` of datacenter `D` is held by the key
/// `P/dc/D/holder/W`, created by a transaction that succeeds only if the key does not
/// exist, and attached to an etcd lease with the store's TTL; the lease is kept alive by
/// the leased generator's keeper. When the holder stops renewing, etcd deletes the key at
/// the lease's end and the number is free. The holder's mark lives beside it in
/// `P/dc/D/mark/W`, a key with no lease, so it outlives the holder; it is written only by a
/// transaction that checks the holder key still holds the claim's own token, on the
/// claim's lease.
///
/// Requests run on a private single-threaded Tokio runtime, so the store works from plain
/// threads; calling it from inside another Tokio runtime fails with a clear error instead
/// of blocking that runtime.
pub struct EtcdStore {
    pub(super) connection: Arc<Connection>,
    pub(super) prefix: String,
    pub(super) ttl: Duration,
    pub(super) outage_horizon: Duration,
}

impl EtcdStore {
    /// Connects to `endpoints` (`host:port` or `http://host:port`) under `namespace` (a
    /// key prefix such as `/idgen/prod`: letters, digits, `/`, `-`, `_`, `.`), with
    /// [`ETCD_DEFAULT_TTL`]. Fails with [`Error::LeaseStore`] when no endpoint answers
    /// within a few seconds.
    pub fn connect<S: AsRef<str>>(endpoints: &[S], namespace: &str) -> Result<EtcdStore, Error> {
        let prefix = namespace_prefix(namespace)?;
        let endpoints: Vec<String> = endpoints.iter().map(|e| e.as_ref().to_string()).collect();
        if endpoints.is_empty() || endpoints.iter().any(|e| e.trim().is_empty()) {
            return Err(Error::LeaseConfig {
                reason: "the etcd endpoint list is empty, or has an empty entry".to_string(),
            });
        }
        outside_runtime()?;
        // One worker thread drives the connection's background tasks between requests.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("idgen-etcd")
            .enable_all()
            .build()
            .map_err(|error| Error::LeaseStore {
                reason: format!("could not start the etcd client's runtime: {error}"),
            })?;
        let options = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT);
        let unreachable = |error: &dyn fmt::Display| Error::LeaseStore {
            reason: format!("etcd at {} is unreachable: {error}", endpoints.join(",")),
        };
        // One client per endpoint (connections are made lazily), and the first that
        // answers a real request preferred: that proves the cluster answers.
        let mut clients = Vec::with_capacity(endpoints.len());
        for endpoint in &endpoints {
            let client = runtime
                .block_on(timed(Client::connect([endpoint], Some(options.clone()))))
                .map_err(|error| unreachable(&error))?;
            clients.push(client);
        }
        let mut answered = Err(String::new());
        let mut preferred = 0;
        for (index, client) in clients.iter().enumerate() {
            let mut client = client.clone();
            answered = runtime.block_on(timed(client.status())).map(|_| ());
            if answered.is_ok() {
                preferred = index;
                break;
            }
        }
        answered.map_err(|error| unreachable(&error))?;
        Ok(EtcdStore {
            connection: Arc::new(Connection {
                runtime: Some(runtime),
                clients,
                preferred: AtomicUsize::new(preferred),
                endpoints,
                prefix: prefix.clone(),
                newest: Mutex::default(),
            }),
            prefix,
            ttl: ETCD_DEFAULT_TTL,
            outage_horizon: ETCD_DEFAULT_OUTAGE_HORIZON,
        })
    }

    /// Sets the TTL: whole seconds, at least 2 (etcd rounds shorter leases up to 2 s, which
    /// would let a number stay taken longer than its holder believes), at most a day (a
    /// crashed holder's number stays taken for a TTL).
    pub fn with_ttl(mut self, ttl: Duration) -> Result<EtcdStore, Error> {
        let day = Duration::from_secs(24 * 60 * 60);
        if ttl.subsec_nanos() != 0 || ttl < Duration::from_secs(2) || ttl > day {
            return Err(Error::LeaseConfig {
                reason: format!(
                    "an etcd TTL must be whole seconds, from 2 s to a day; got {ttl:?}"
                ),
            });
        }
        self.ttl = ttl;
        Ok(self)
    }

    /// Sets the store's outage horizon: the default of the leased generators built on it,
    /// and how far ahead [`EtcdStore::init`] writes the marks it creates (default
    /// [`ETCD_DEFAULT_OUTAGE_HORIZON`]; never below the TTL).
    pub fn with_outage_horizon(mut self, horizon: Duration) -> EtcdStore {
        self.outage_horizon = horizon;
        self
    }

    /// Initialises the namespace for `idgen leases init`: writes a mark for every number of
    /// `datacenters` × `workers` that has none (marks that exist are kept), then the
    /// namespace's `store` key. Returns how many marks were written.
    ///
    /// A missing mark may have been deleted with its holder's history (a wiped namespace
    /// looks like a new one), and that holder may be cut off from etcd and still issuing up
    /// to its own mark, an outage horizon ahead. So the mark written is `now_unix_ms` plus
    /// the store's outage horizon (at least its TTL): a number taken within that of `init`
    /// waits until then, and one taken later does not wait at all. A namespace known to be
    /// new can be initialised with a horizon equal to the TTL. From then on a missing mark
    /// means a deleted one, and the number's next holder waits a horizon; a namespace
    /// without its `store` key (never initialised, or wiped with `etcdctl del --prefix`) is
    /// refused with [`Error::LeaseStoreUninitialised`]. Running it again is harmless.
    pub fn init(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now_unix_ms: u64,
    ) -> Result<u64, Error> {
        self.refuse_if_restore_found()?;
        let ahead = self.default_outage_horizon().max(self.largest_horizon()?);
        let mark = now_unix_ms
            .saturating_add(u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX))
            .to_string();
        let written = self.write_missing_marks(datacenters, workers, &mark)?;
        self.put_store_key("initialised")?;
        Ok(written)
    }

    /// Writes `mark` to every mark key of `datacenters` × `workers` that has none (each
    /// in a transaction that checks it is still missing); returns how many it wrote.
    fn write_missing_marks(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        mark: &str,
    ) -> Result<u64, Error> {
        let mut client = self.connection.client();
        let mut written = 0;
        for key in self.mark_keys(datacenters, workers) {
            let created = self.run(async {
                let txn = Txn::new()
                    .when(vec![Compare::version(key.as_str(), CompareOp::Equal, 0)])
                    .and_then(vec![TxnOp::put(key.as_str(), mark, None)]);
                Ok(timed(client.txn(txn)).await?.succeeded())
            })?;
            written += u64::from(created);
        }
        Ok(written)
    }

    /// Initialises a namespace the operator declares never used (`idgen leases init
    /// --new`): nothing can be issuing on its numbers, so every mark is the millisecond
    /// before `now_unix_ms` and a holder is ready at once, instead of an outage horizon later as after [`init`].
    ///
    /// etcd keeps a deleted key's history only until compaction, so a wiped namespace
    /// cannot be told from a new one after it; the declaration is the operator's. What can
    /// be checked is: the namespace holds no key at all (a namespace ever initialised keeps
    /// its `store` key and marks unless wiped), else [`Error::LeaseConfig`] says to leave
    /// `--new` out. A mark some other process wrote meanwhile is kept. Returns how many
    /// marks were written.
    ///
    /// [`init`]: EtcdStore::init
    pub fn init_new(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now_unix_ms: u64,
    ) -> Result<u64, Error> {
        let mut client = self.connection.client();
        let prefix = self.prefix.clone();
        let existing = self.run(async {
            let options = GetOptions::new().with_prefix().with_count_only();
            Ok(timed(client.get(prefix.as_str(), Some(options)))
                .await?
                .count())
        })?;
        if existing > 0 {
            let namespace = self.prefix.trim_end_matches('/');
            return Err(Error::LeaseConfig {
                reason: format!(
                    "the etcd namespace {namespace} is not new: it holds {existing} key{}; \
                     initialise it without --new (every mark an outage horizon ahead, since \
                     a holder of a wiped namespace may still be issuing)",
                    if existing == 1 { "" } else { "s" }
                ),
            });
        }
        // The millisecond before now: nothing to wait for, not even the current one.
        let mark = now_unix_ms.saturating_sub(1).to_string();
        let written = self.write_missing_marks(datacenters, workers, &mark)?;
        self.put_store_key("initialised new")?;
        Ok(written)
    }

    /// The mark keys of every number of `datacenters` × `workers`.
    fn mark_keys(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
    ) -> Vec<String> {
        datacenters
            .flat_map(|dc| workers.clone().map(move |worker| (dc, worker)))
            .map(|(datacenter, worker)| self.mark_key(datacenter, worker))
            .collect()
    }

    /// Writes the `store` key, the last step of `init`: `what` happened, and by whom.
    fn put_store_key(&self, what: &str) -> Result<(), Error> {
        let mut client = self.connection.client();
        let store_key = self.store_key();
        let value = format!("idgen-lease-store v1 {what} by pid {}", std::process::id());
        self.run(async {
            timed(client.put(store_key.as_str(), value, None)).await?;
            Ok(())
        })
    }

    /// The disaster-recovery step after `etcdctl snapshot restore` (`idgen leases init
    /// --after-restore`): the restored namespace may have lost the marks written after the
    /// snapshot, and holders it no longer knows of may still be issuing up to them. So
    /// every mark of `datacenters` × `workers` is raised to at least `now_unix_ms` plus the
    /// largest outage horizon known (the store's, and the largest any holder recorded),
    /// and the `store` key is rewritten to say so, which lets holders that found the
    /// restore take numbers again. Every successor then waits past every mark that may
    /// have been lost. Returns how many marks were raised.
    pub fn init_after_restore(
        &self,
        datacenters: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now_unix_ms: u64,
    ) -> Result<u64, Error> {
        let ahead = self.default_outage_horizon().max(self.largest_horizon()?);
        let floor =
            now_unix_ms.saturating_add(u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX));
        let mut client = self.connection.client();
        let mut raised = 0;
        for key in self.mark_keys(datacenters, workers) {
            let (_, written) = self.run(raise_key(&mut client, &key, floor))?;
            raised += u64::from(written);
        }
        self.put_store_key(&format!("{AFTER_RESTORE}{now_unix_ms}"))?;
        Ok(raised)
    }

    /// Refuses while a holder has found the namespace restored: only `init
    /// --after-restore` may lift that, since it raises every mark.
    fn refuse_if_restore_found(&self) -> Result<(), Error> {
        let mut client = self.connection.client();
        let store_key = self.store_key();
        let value = self.run(async {
            let got = timed(client.get(store_key.as_str(), None)).await?;
            Ok(got
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
        })?;
        match value {
            Some(value) if restore_found_ms(&value).is_some() => {
                Err(self.connection.restored_error())
            }
            _ => Ok(()),
        }
    }

    /// The largest outage horizon any holder recorded (zero if none), at most
    /// [`MAX_OUTAGE_HORIZON`].
    fn largest_horizon(&self) -> Result<Duration, Error> {
        let mut client = self.connection.client();
        let key = self.horizon_key();
        let recorded = self.run(async {
            let got = timed(client.get(key.as_str(), None)).await?;
            Ok(got
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
        })?;
        Ok(recorded
            .and_then(|text| parse_mark(&text).ok())
            .map_or(Duration::ZERO, Duration::from_millis)
            .min(MAX_OUTAGE_HORIZON))
    }

    pub(super) fn horizon_key(&self) -> String {
        format!("{}horizon", self.prefix)
    }

    pub(super) fn layout_key(&self) -> String {
        format!("{}layout", self.prefix)
    }

    pub(super) fn store_key(&self) -> String {
        format!("{}store", self.prefix)
    }

    pub(super) fn uninitialised(&self) -> Error {
        let namespace = self.prefix.trim_end_matches('/');
        Error::LeaseStoreUninitialised {
            store: format!("etcd namespace {namespace}"),
            why: format!(
                "the key {}store is missing: the namespace is new, or was wiped (etcdctl del \
                 --prefix)",
                self.prefix
            ),
            fix: format!(
                "run: idgen leases init --etcd {endpoints} --namespace {namespace} (with the \
                 layout flags of the processes that use it), which makes the first holders \
                 wait one outage horizon in case the namespace was wiped under holders still \
                 issuing; for a namespace no idgen ever used, add --new to be ready at once",
                endpoints = self.connection.endpoints.join(",")
            ),
        }
    }

    /// The etcd lease ID of a number: derived from the namespace and the number, so that
    /// only one live lease can exist for it.
    pub(super) fn lease_id(&self, datacenter: u64, worker: u64) -> i64 {
        let name = format!("idgen-lease {}dc/{datacenter}/worker/{worker}", self.prefix);
        let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        // Positive and non-zero: etcd reads 0 as "choose one for me".
        (hash >> 1).max(1) as i64
    }

    pub(super) fn holder_key(&self, datacenter: u64, worker: u64) -> String {
        format!("{}dc/{datacenter}/holder/{worker}", self.prefix)
    }

    pub(super) fn mark_key(&self, datacenter: u64, worker: u64) -> String {
        format!("{}dc/{datacenter}/mark/{worker}", self.prefix)
    }

    pub(super) fn run<T>(
        &self,
        request: impl Future<Output = Result<T, String>>,
    ) -> Result<T, Error> {
        self.connection.run(request)
    }
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.connection.endpoints)
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .finish()
    }
}
