//! The fleet store: worker numbers as etcd keys attached to an etcd lease.

use std::fmt;
use std::future::Future;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, LeaseGrantOptions, PutOptions, Txn,
    TxnOp, TxnOpResponse,
};

use super::{Claim, LeaseStore, NumberRecord, NumberState, WorkerRange};
use crate::error::Error;
use crate::layout::Layout;
use crate::sync::{AtomicU64, Ordering};

/// etcd's default TTL here, as the issue of leases asks: 30 s, renewed every 10 s.
pub const ETCD_DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The default outage horizon of an etcd store: how long a holder goes on issuing when it
/// cannot reach etcd (an upgrade, a lost quorum), and how long a crashed holder's number
/// stays unusable.
pub const ETCD_DEFAULT_OUTAGE_HORIZON: Duration = Duration::from_secs(180);

/// How long one request to etcd may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

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
    connection: Arc<Connection>,
    prefix: String,
    ttl: Duration,
    outage_horizon: Duration,
}

/// The client and the runtime its connection lives on, shared by the store and its claims.
struct Connection {
    /// Always `Some` until dropped.
    runtime: Option<tokio::runtime::Runtime>,
    client: Client,
    endpoints: Vec<String>,
    /// The namespace's key prefix.
    prefix: String,
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
    /// The refusal of a store found gone back in time, with the procedure that ends it.
    fn restored_error(&self) -> Error {
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
    fn restore_found(&self, seen: &str, confirmed_unix_ms: u64) -> Result<bool, Error> {
        if after_restore_ms(seen).is_some_and(|step| step >= confirmed_unix_ms) {
            return Ok(false);
        }
        if restore_found_ms(seen).is_none() {
            let mut client = self.client.clone();
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

    fn run<T>(&self, request: impl Future<Output = Result<T, String>>) -> Result<T, Error> {
        outside_runtime()?;
        let runtime = self.runtime.as_ref().ok_or_else(|| Error::LeaseStore {
            reason: "the etcd client's runtime is shut down".to_string(),
        })?;
        runtime
            .block_on(request)
            .map_err(|reason| Error::LeaseStore {
                reason: format!("etcd at {}: {reason}", self.endpoints.join(",")),
            })
    }
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
        let mut client = runtime
            .block_on(timed(Client::connect(&endpoints, Some(options))))
            .map_err(|error| unreachable(&error))?;
        // The connection may be lazy: one real request proves the cluster answers.
        runtime
            .block_on(timed(client.status()))
            .map_err(|error| unreachable(&error))?;
        Ok(EtcdStore {
            connection: Arc::new(Connection {
                runtime: Some(runtime),
                client,
                endpoints,
                prefix: prefix.clone(),
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
        let mut client = self.connection.client.clone();
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
        let mut client = self.connection.client.clone();
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
        let mut client = self.connection.client.clone();
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
        let mut client = self.connection.client.clone();
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
        let mut client = self.connection.client.clone();
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
    /// [`MAX_OUTAGE_HORIZON`](super::MAX_OUTAGE_HORIZON).
    fn largest_horizon(&self) -> Result<Duration, Error> {
        let mut client = self.connection.client.clone();
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
            .min(super::MAX_OUTAGE_HORIZON))
    }

    fn horizon_key(&self) -> String {
        format!("{}horizon", self.prefix)
    }

    fn layout_key(&self) -> String {
        format!("{}layout", self.prefix)
    }

    fn store_key(&self) -> String {
        format!("{}store", self.prefix)
    }

    fn uninitialised(&self) -> Error {
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
    fn lease_id(&self, datacenter: u64, worker: u64) -> i64 {
        let name = format!("idgen-lease {}dc/{datacenter}/worker/{worker}", self.prefix);
        let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        // Positive and non-zero: etcd reads 0 as "choose one for me".
        (hash >> 1).max(1) as i64
    }

    fn holder_key(&self, datacenter: u64, worker: u64) -> String {
        format!("{}dc/{datacenter}/holder/{worker}", self.prefix)
    }

    fn mark_key(&self, datacenter: u64, worker: u64) -> String {
        format!("{}dc/{datacenter}/mark/{worker}", self.prefix)
    }

    fn run<T>(&self, request: impl Future<Output = Result<T, String>>) -> Result<T, Error> {
        self.connection.run(request)
    }
}

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
        let mut client = self.connection.client.clone();
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
        super::store::check_layout(
            &format!("etcd key {layout_key}"),
            &recorded.unwrap_or_default(),
            layout,
        )
    }

    fn raise_horizon(&self, horizon: Duration) -> Result<Duration, Error> {
        let mut client = self.connection.client.clone();
        let key = self.horizon_key();
        let ours = u64::try_from(horizon.as_millis()).unwrap_or(u64::MAX);
        let (largest, _) = self.run(raise_key(&mut client, &key, ours))?;
        Ok(Duration::from_millis(largest))
    }

    fn recorded_layout(&self) -> Result<Option<Layout>, Error> {
        let mut client = self.connection.client.clone();
        let layout_key = self.layout_key();
        let text = self.run(async {
            let got = timed(client.get(layout_key.as_str(), None)).await?;
            Ok(got
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
        })?;
        text.map(|text| {
            Layout::from_record(&text)
                .ok_or_else(|| super::store::unreadable_layout(&format!("etcd key {layout_key}")))
        })
        .transpose()
    }

    fn survey(&self, range: &WorkerRange) -> Result<Vec<NumberRecord>, Error> {
        let mut client = self.connection.client.clone();
        let store_key = self.store_key();
        let datacenter = range.datacenter();
        let holders = format!("{}dc/{datacenter}/holder/", self.prefix);
        let marks = format!("{}dc/{datacenter}/mark/", self.prefix);
        // (initialised, holders: worker -> (value, lease), marks: worker -> value)
        type Listed = (bool, Vec<(u64, String, i64)>, Vec<(u64, String)>);
        let (initialised, held, marked): Listed = self.run(async {
            let initialised = !timed(client.get(store_key.as_str(), None))
                .await?
                .kvs()
                .is_empty();
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
            Ok((initialised, listed.pop().unwrap_or_default(), marked))
        })?;
        if !initialised {
            return Err(self.uninitialised());
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
        let mut client = self.connection.client.clone();
        let store_key = self.store_key();
        let store_value = self.run(async {
            let got = timed(client.get(store_key.as_str(), None)).await?;
            Ok(got
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
        })?;
        let Some(store_value) = store_value else {
            return Err(self.uninitialised());
        };
        if restore_found_ms(&store_value).is_some() {
            return Err(self.connection.restored_error());
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
            let token = claim_token(holder_name);
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
        let mut client = self.connection.client.clone();
        let _ = self.run(async {
            timed(client.lease_revoke(lease)).await?;
            Ok(())
        });
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

struct EtcdClaim {
    connection: Arc<Connection>,
    datacenter: u64,
    worker: u64,
    holder: String,
    /// The holder key's value written by this claim (see `claim_token`).
    token: String,
    mark_key: String,
    /// The etcd lease, until released.
    lease: Option<i64>,
    /// The number's lease ID (see `EtcdStore::lease_id`), granted again to take the
    /// number back.
    number_lease: i64,
    ttl_secs: i64,
    /// The revision at which this claim put its holder key (again, after a take-back).
    claim_revision: i64,
    /// When (this host's wall clock) the last write the store confirmed was sent.
    confirmed_unix_ms: u64,
    /// The revision at which this claim last wrote the mark; 0 before its first write.
    mark_revision: i64,
    previous: Option<u64>,
    unknown: bool,
}

impl EtcdClaim {
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
        mark_revision: i64,
    ) -> Result<MarkWrite, String> {
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
            when.push(Compare::mod_revision(
                claim.mark_key.as_str(),
                CompareOp::Equal,
                mark_revision,
            ));
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
        if evidence.went_back(mark_revision) || claim.forgotten(client).await? {
            return Ok(MarkWrite::Restored(evidence.store_value));
        }
        if !evidence.holder_is(claim) {
            return Ok(MarkWrite::Lost);
        }
        // Still ours, but the mark key was deleted or rewritten since our last write (by
        // hand, or by `init --after-restore`): ours to write again.
        let txn = Txn::new().when(ours).and_then(then);
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
        mark_revision: i64,
        mark_unix_ms: u64,
    ) -> Result<MarkWrite, String> {
        let options = LeaseGrantOptions::new().with_id(claim.lease);
        match timed(client.lease_grant(ttl_secs, Some(options))).await {
            Ok(_) => {}
            Err(reason) if reason.contains("lease already exists") => {
                // Another process holds the number's lease: it took the number, or it is
                // only looking at it (a scan for a free number gives back what it does not
                // keep, without writing). Lost only once it wrote a mark.
                let txn = Txn::new().and_then(claim.evidence());
                let evidence = Evidence::of(&timed(client.txn(txn)).await?);
                if evidence.went_back(mark_revision) || claim.forgotten(client).await? {
                    return Ok(MarkWrite::Restored(evidence.store_value));
                }
                if evidence.mark_revision == Some(mark_revision) {
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
        let txn = Txn::new()
            .when(vec![
                Compare::version(claim.holder.as_str(), CompareOp::Equal, 0),
                Compare::mod_revision(claim.mark_key.as_str(), CompareOp::Equal, mark_revision),
            ])
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
        if evidence.went_back(mark_revision) || claim.forgotten(client).await? {
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
            mark_revision: mark.map(|kv| kv.mod_revision()),
            store_value: store
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
                .unwrap_or_default(),
        }
    }

    /// Whether the store is older than our last confirmed write at `mark_revision`: its
    /// revision below it, or our mark key changed last before it. Neither can happen
    /// while the store only moves forward; a snapshot restore does both.
    fn went_back(&self, mark_revision: i64) -> bool {
        mark_revision != 0
            && (self.revision < mark_revision
                || self
                    .mark_revision
                    .is_some_and(|changed| changed < mark_revision))
    }

    fn holder_is(&self, claim: &Ours) -> bool {
        self.holder
            .as_ref()
            .is_some_and(|(token, lease)| *token == claim.token && *lease == claim.lease)
    }
}

fn revision_of(response: &etcd_client::TxnResponse) -> i64 {
    response.header().map_or(0, |header| header.revision())
}

/// A value no other claim has: the holder's name, this process and host, the time, and a
/// per-process count.
fn claim_token(holder: &str) -> String {
    static CLAIMS: AtomicU64 = AtomicU64::new(0);
    let count = CLAIMS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let claim = format!(
        "pid {} on {} claim {nanos}-{count}",
        std::process::id(),
        host_name()
    );
    if holder.is_empty() {
        claim
    } else {
        format!("{holder}{HOLDER_SEPARATOR}{claim}")
    }
}

/// Between a holder's name and the rest of its token.
const HOLDER_SEPARATOR: &str = " | ";

/// The holder's name in a holder key's value: the part before the claim, or all of it.
fn holder_of(token: &str) -> String {
    token
        .rsplit_once(HOLDER_SEPARATOR)
        .map_or(token, |(holder, _)| holder)
        .to_string()
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
        let mut client = self.connection.client.clone();
        let ours = self.ours(lease);
        let (ttl_secs, mark_revision) = (self.ttl_secs, self.mark_revision);
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
                    EtcdClaim::take_back(&mut client, &ours, ttl_secs, mark_revision, mark_unix_ms)
                        .await?;
                if let MarkWrite::TakenBack(_) = taken {
                    log::info!(
                        "idgen: etcd key {}: the lease ran out while etcd was unreachable; \
                         nobody took the number meanwhile, so it was taken back",
                        ours.holder
                    );
                }
                return Ok(taken);
            }
            EtcdClaim::write_mark(&mut client, &ours, mark_unix_ms, false, mark_revision).await
        })?;
        match written {
            MarkWrite::Written(revision) => {
                self.mark_revision = revision;
                self.confirmed_unix_ms = sent_unix_ms;
                self.lease = Some(self.number_lease);
                Ok(())
            }
            MarkWrite::TakenBack(revision) => {
                self.mark_revision = revision;
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
        let mut client = self.connection.client.clone();
        let ours = self.ours(lease);
        let (wrote, previous) = (self.mark_revision != 0, self.previous.unwrap_or(0));
        let mark_revision = self.mark_revision;
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
            match EtcdClaim::write_mark(&mut client, &ours, mark_unix_ms, true, mark_revision)
                .await?
            {
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

/// Runs one request with the request timeout, turning both failures into text.
async fn timed<T, E: fmt::Display>(
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
    }
}

fn outside_runtime() -> Result<(), Error> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::LeaseConfig {
            reason: "the etcd store blocks; call it from a plain thread (for example \
                     tokio::task::spawn_blocking), not from inside a Tokio runtime"
                .to_string(),
        });
    }
    Ok(())
}

/// `"/idgen/prod"` → `"/idgen/prod/"`, after checking it is a sensible key prefix.
fn namespace_prefix(namespace: &str) -> Result<String, Error> {
    let trimmed = namespace.trim_end_matches('/');
    let sensible = !trimmed.is_empty()
        && trimmed.len() <= 200
        && !trimmed.contains("//")
        && trimmed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b));
    if !sensible {
        return Err(Error::LeaseConfig {
            reason: format!(
                "the etcd namespace {namespace:?} is not a key prefix such as /idgen/prod \
                 (letters, digits, '/', '-', '_', '.'; not empty, no '//')"
            ),
        });
    }
    Ok(format!("{trimmed}/"))
}

/// In the `store` key's value after `init --after-restore`, before the Unix ms it ran at.
const AFTER_RESTORE: &str = "after-restore ";

/// Raises the decimal value of `key` to at least `floor`, never lowering it: a writer that
/// raises it meanwhile makes the compare fail, and the value is read again. A value that
/// does not parse counts as none. The value now, and whether this call wrote it.
async fn raise_key(client: &mut Client, key: &str, floor: u64) -> Result<(u64, bool), String> {
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

/// In the `store` key's value once a holder found the store gone back in time.
const RESTORE_FOUND: &str = "restore-found ";

/// When a holder found the store gone back in time, if this `store` key value says so.
fn restore_found_ms(store_value: &str) -> Option<u64> {
    let (_, rest) = store_value.split_once(RESTORE_FOUND)?;
    parse_mark(rest.split(' ').next()?).ok()
}

/// Unix milliseconds on this host's wall clock: what the restore step's time is compared
/// with (both are wall-clock readings, of the operator's host and of the holder's).
fn wall_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// When `init --after-restore` wrote this `store` key value, if it did.
fn after_restore_ms(store_value: &str) -> Option<u64> {
    let (_, rest) = store_value.split_once(AFTER_RESTORE)?;
    parse_mark(rest.split(' ').next()?).ok()
}

fn parse_mark(text: &str) -> Result<u64, String> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    match text.parse() {
        Ok(mark) if canonical => Ok(mark),
        _ => Err(format!(
            "the mark {text:?} is not a decimal Unix millisecond"
        )),
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "unknown host".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_checked() {
        assert_eq!(namespace_prefix("/idgen/prod").unwrap(), "/idgen/prod/");
        assert_eq!(namespace_prefix("idgen/").unwrap(), "idgen/");
        for bad in ["", "/", "a b", "x//y", "naïve", "a\0b"] {
            assert!(namespace_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn marks_are_canonical_decimal() {
        assert_eq!(parse_mark("1764000000000"), Ok(1_764_000_000_000));
        for bad in ["", "-1", "01", "1e3", " 1", "18446744073709551616"] {
            assert!(parse_mark(bad).is_err(), "{bad:?}");
        }
    }
}
