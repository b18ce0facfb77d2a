//! The holders the fault harness runs at once, each issuing in a loop and recording every
//! ID it got, when, and every refusal with its reason: `idgen serve` processes (asked over
//! HTTP), a lease API client that issues IDs itself on a number leased over HTTP, embedded `LeasedGenerator`s and a `LeasedShardedGenerator` (one log per thread,
//! since a thread sees its own shard's IDs increase). They are paced (a batch of 100, then
//! a few milliseconds) so that every ID of a long run can be kept and checked.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use idgen::lease::{EtcdStore, LeasedGenerator, LeasedShardedGenerator, WorkerRange};
use idgen::{Generator, Layout};

use super::checker::{Fields, Log};
use super::unix_ms;
use crate::common::Service;

/// The pause between two batches of one issuing loop.
const PACE: Duration = Duration::from_millis(50);
const BATCH: usize = 100;

/// One issuing loop: its log, filled as it goes, and the thread.
pub struct Issuer {
    pub log: Arc<Mutex<Log>>,
    thread: Option<JoinHandle<()>>,
}

impl Issuer {
    fn spawn(
        name: String,
        mut issue: impl FnMut() -> Result<Vec<u64>, String> + Send + 'static,
        stop: Arc<AtomicBool>,
    ) -> Issuer {
        let log = Arc::new(Mutex::new(Log::new(name)));
        let writer = Arc::clone(&log);
        let thread = thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let sent = unix_ms();
                let result = issue();
                let at = unix_ms();
                {
                    let mut log = writer.lock().unwrap();
                    match result {
                        Ok(ids) => log.answered(sent, at, &ids),
                        Err(reason) => log.refused(sent, at, reason),
                    }
                }
                thread::sleep(PACE);
            }
        });
        Issuer {
            log,
            thread: Some(thread),
        }
    }

    pub fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            thread.join().expect("an issuing loop panicked");
        }
    }
}

/// An `idgen serve` process and the loop asking it for IDs.
pub struct Served {
    pub service: Service,
    pub issuer: Issuer,
}

impl Served {
    pub fn start(name: &str, service: Service, stop: &Arc<AtomicBool>) -> Served {
        let client = service.client();
        let issuer = Issuer::spawn(
            name.to_string(),
            move || {
                let reply = match client.try_get(&format!("/v1/ids?count={BATCH}")) {
                    Ok(reply) => reply,
                    Err(error) => return Err(format!("unreachable: {error}")),
                };
                match reply.status {
                    200 => Ok(reply.ids()),
                    503 => Err(reply.error()),
                    status => panic!("unexpected reply {status}: {}", reply.body),
                }
            },
            Arc::clone(stop),
        );
        Served { service, issuer }
    }

    pub fn pid(&self) -> u32 {
        self.service.child.id()
    }
}

/// A batch as the logs keep it: the IDs as numbers, or the refusal's reason.
fn numbers(batch: Result<Vec<idgen::Id>, idgen::Error>) -> Result<Vec<u64>, String> {
    batch
        .map(|ids| ids.into_iter().map(u64::from).collect())
        .map_err(|error| error.to_string())
}

/// An embedded `LeasedGenerator` and the loop calling `next_ids`.
pub struct Embedded {
    pub generator: Arc<LeasedGenerator>,
    pub issuer: Issuer,
}

impl Embedded {
    pub fn start(name: &str, generator: LeasedGenerator, stop: &Arc<AtomicBool>) -> Embedded {
        let generator = Arc::new(generator);
        let issuing = Arc::clone(&generator);
        let issuer = Issuer::spawn(
            name.to_string(),
            move || numbers(issuing.next_ids(BATCH)),
            Arc::clone(stop),
        );
        Embedded { generator, issuer }
    }
}

/// A `LeasedShardedGenerator` and one loop per shard's thread.
pub struct Sharded {
    pub generator: Arc<LeasedShardedGenerator>,
    pub issuers: Vec<Issuer>,
}

impl Sharded {
    pub fn start(name: &str, generator: LeasedShardedGenerator, stop: &Arc<AtomicBool>) -> Sharded {
        let generator = Arc::new(generator);
        let issuers = (0..generator.shard_count())
            .map(|thread| {
                let issuing = Arc::clone(&generator);
                Issuer::spawn(
                    format!("{name}/thread{thread}"),
                    move || numbers(issuing.next_ids(BATCH)),
                    Arc::clone(stop),
                )
            })
            .collect();
        Sharded { generator, issuers }
    }
}

/// An etcd store on `endpoints` under `namespace`, with the harness's TTL and horizon.
pub fn store(endpoints: &[String], namespace: &str, ttl: Duration, horizon: Duration) -> EtcdStore {
    EtcdStore::connect(endpoints, namespace)
        .and_then(|store| store.with_ttl(ttl))
        .map(|store| store.with_outage_horizon(horizon))
        .unwrap_or_else(|error| panic!("cannot reach the cluster: {error}"))
}

/// An embedded leased generator on `workers` of `layout`, acquired now.
pub fn leased(
    endpoints: &[String],
    namespace: &str,
    layout: Layout,
    workers: std::ops::RangeInclusive<u64>,
    ttl: Duration,
    horizon: Duration,
    holder: &str,
) -> LeasedGenerator {
    LeasedGenerator::builder(
        store(endpoints, namespace, ttl, horizon),
        WorkerRange::new(0, workers).unwrap(),
    )
    .generator(Generator::builder().layout(layout))
    .holder(holder)
    .acquire()
    .unwrap_or_else(|error| panic!("{holder} could not take a number: {error}"))
}

/// A program in another language, played in process: it leases a worker number through an
/// `idgen serve`'s lease API (`/v1/generators`), builds the IDs itself on the terms it got
/// (dated after `resumeAfterMs`, before `validUntilMs`), renews every `renewEveryMs` on a
/// thread of its own (as `cli/tests/node/lease_client.mjs` does), keeps its terms while
/// renewals fail, and leases again once its lease is lost (410) or its terms ran out.
pub struct ApiClient {
    pub issuer: Issuer,
    /// Leases it has taken: the first, and one more each time it lost one.
    pub leases_taken: Arc<AtomicU64>,
}

/// A lease an [`ApiClient`] issues on, shared with the thread renewing it.
struct Terms {
    lease_id: String,
    worker: u64,
    valid_until_ms: AtomicU64,
    renew_every_ms: u64,
    /// Lost (410), or given up by the issuing loop: the renewing thread ends.
    over: AtomicBool,
}

impl ApiClient {
    pub fn start(
        name: &str,
        service: SocketAddr,
        token: String,
        fields: Fields,
        stop: &Arc<AtomicBool>,
    ) -> ApiClient {
        let leases_taken = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&leases_taken);
        let holder = name.to_string();
        let renewals_stop = Arc::clone(stop);
        let mut terms: Option<Arc<Terms>> = None;
        // Last millisecond and sequence used, across leases: a new lease starts after both
        // the previous holder's mark and this client's own last ID.
        let (mut last_ms, mut sequence) = (0u64, 0u64);
        let max_sequence = (1u64 << fields.sequence_bits) - 1;
        let issuer = Issuer::spawn(
            name.to_string(),
            move || {
                if terms
                    .as_ref()
                    .is_some_and(|held| held.over.load(Ordering::SeqCst))
                {
                    terms = None;
                    return Err("lease lost: 410 from a renewal".to_string());
                }
                if terms.is_none() {
                    let body = format!(r#"{{"holder": "{holder}"}}"#);
                    let (status, reply) =
                        call(service, "POST", "/v1/generators/lease", &token, &body)?;
                    if status != 200 {
                        return Err(format!("lease: {status} {}", reply["error"]));
                    }
                    let layout = &reply["layout"];
                    assert!(
                        layout["workerBits"] == fields.worker_bits
                            && layout["sequenceBits"] == fields.sequence_bits,
                        "the lease API's layout is not the harness's: {layout}"
                    );
                    let number = |field: &str| {
                        reply[field]
                            .as_u64()
                            .ok_or_else(|| format!("lease: no {field} in {reply}"))
                    };
                    last_ms = last_ms.max(number("resumeAfterMs")?);
                    sequence = max_sequence;
                    let held = Arc::new(Terms {
                        lease_id: reply["leaseId"].as_str().unwrap_or_default().to_string(),
                        worker: number("worker")?,
                        valid_until_ms: AtomicU64::new(number("validUntilMs")?),
                        renew_every_ms: number("renewEveryMs")?,
                        over: AtomicBool::new(false),
                    });
                    renew(
                        service,
                        token.clone(),
                        Arc::clone(&held),
                        Arc::clone(&renewals_stop),
                    );
                    terms = Some(held);
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                let held = terms.as_ref().expect("leased above");
                let node = held.worker << fields.sequence_bits;
                let shift = fields.sequence_bits + fields.worker_bits;
                let mut ids = Vec::with_capacity(BATCH);
                while ids.len() < BATCH {
                    let now = unix_ms();
                    if now > last_ms {
                        (last_ms, sequence) = (now, 0);
                    } else if sequence < max_sequence {
                        sequence += 1;
                    } else {
                        continue; // this millisecond is used up: wait for the next
                    }
                    if last_ms >= held.valid_until_ms.load(Ordering::SeqCst) {
                        // Its terms ran out: issue nothing dated at or past them, and lease
                        // anew next time.
                        held.over.store(true, Ordering::SeqCst);
                        terms = None;
                        break;
                    }
                    ids.push((last_ms - idgen::DEFAULT_EPOCH_UNIX_MS) << shift | node | sequence);
                }
                if ids.is_empty() {
                    Err("lease is not valid now: past validUntilMs".to_string())
                } else {
                    Ok(ids)
                }
            },
            Arc::clone(stop),
        );
        ApiClient {
            issuer,
            leases_taken,
        }
    }
}

/// Renews `terms` every `renewEveryMs` until the lease is over or the run stops; a renewal
/// that fails (the store or the service away) leaves the terms as they are and is tried
/// again after a quarter of the interval.
fn renew(service: SocketAddr, token: String, terms: Arc<Terms>, stop: Arc<AtomicBool>) {
    thread::spawn(move || {
        let path = format!("/v1/generators/{}/renew", terms.lease_id);
        let mut wait = terms.renew_every_ms;
        loop {
            let due = unix_ms() + wait;
            while unix_ms() < due {
                if stop.load(Ordering::Relaxed) || terms.over.load(Ordering::SeqCst) {
                    return;
                }
                thread::sleep(Duration::from_millis(10));
            }
            match call(service, "POST", &path, &token, "") {
                Ok((200, reply)) => {
                    if let Some(valid_until_ms) = reply["validUntilMs"].as_u64() {
                        terms
                            .valid_until_ms
                            .fetch_max(valid_until_ms, Ordering::SeqCst);
                    }
                    wait = terms.renew_every_ms;
                }
                Ok((410, _)) => {
                    terms.over.store(true, Ordering::SeqCst);
                    return;
                }
                _ => wait = terms.renew_every_ms / 4,
            }
        }
    });
}

/// One lease API request with its bearer token, on a connection of its own, bounded at 2 s
/// each way: the status and the JSON body (`null` when there is none).
fn call(
    service: SocketAddr,
    method: &str,
    path: &str,
    token: &str,
    body: &str,
) -> Result<(u16, serde_json::Value), String> {
    let unreachable = |error: std::io::Error| format!("unreachable: {error}");
    let mut stream =
        TcpStream::connect_timeout(&service, Duration::from_secs(2)).map_err(unreachable)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(unreachable)?;
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .map_err(unreachable)?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {service}\r\nConnection: close\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(unreachable)?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).map_err(unreachable)?;
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("a reply with no end of head: {reply:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| format!("a reply with no status: {head:?}"))?;
    let json = if body.trim().is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(body)
            .map_err(|error| format!("a body that is not JSON ({error}): {body:?}"))?
    };
    Ok((status, json))
}
