//! The holders the fault harness runs at once, each issuing in a loop and recording every
//! ID it got, when, and every refusal with its reason: `idgen serve` processes (asked over
//! HTTP), embedded `LeasedGenerator`s and a `LeasedShardedGenerator` (one log per thread,
//! since a thread sees its own shard's IDs increase). They are paced (a batch of 100, then
//! a few milliseconds) so that every ID of a long run can be kept and checked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use idgen::lease::{EtcdStore, LeasedGenerator, LeasedShardedGenerator, WorkerRange};
use idgen::{Generator, Layout};

use super::checker::Log;
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
            move || {
                issuing
                    .next_ids(BATCH)
                    .map(|ids| ids.into_iter().map(u64::from).collect())
                    .map_err(|error| error.to_string())
            },
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
                    move || {
                        issuing
                            .next_ids(BATCH)
                            .map(|ids| ids.into_iter().map(u64::from).collect())
                            .map_err(|error| error.to_string())
                    },
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
