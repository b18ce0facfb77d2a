//! `idgen serve`'s life once its flags are resolved: the runtime and the listener, the
//! service's own worker number taken meanwhile, serving until a signal (with a grace period
//! for open requests), and the stop, which releases the number and gives unused sequence
//! values back. The handlers are in `http`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use idgen::Layout;
use idgen::opaque::Codec;

use crate::args::lease::LeaseSource;
use crate::failure::Failure;
use crate::http;
use crate::http::ids::INLINE_BATCH;
use crate::http::lease_api::LeaseApi;
use crate::http::plumbing::Traffic;
use crate::http::sequences::Sequences;
use crate::http::state::{Service, StatusView};
use crate::kinds::CountedGenerators;
use crate::own_lease::OwnLease;

/// What `idgen serve`'s flags resolve to: checked, their files read and their stores open.
pub struct Plan {
    pub listen: SocketAddr,
    pub layout: Layout,
    pub max_batch: usize,
    /// How long open requests get to finish after a signal.
    pub grace: Duration,
    /// The lease API's bearer token, when the API is on.
    pub lease_api_token: Option<Vec<u8>>,
    pub opaque: Option<Codec>,
    pub counted: CountedGenerators,
    /// The OpenAPI document served, naming the declared sequences.
    pub document: String,
    pub sequences: Arc<Sequences>,
    /// Where the service's own number comes from, and the lease API's.
    pub source: LeaseSource,
    pub wait_for_number: Duration,
    /// The ID space's name, for the metrics.
    pub id_space: String,
    /// The status page's fleet survey, and who sees holder names.
    pub status: StatusView,
}

/// Runs the service `plan` describes until a signal, or the loss of its worker number,
/// stops it; then gives the number and the unused sequence values back.
pub fn run(plan: Plan) -> Result<(), Failure> {
    let Plan {
        listen: address,
        layout,
        max_batch,
        grace,
        lease_api_token,
        opaque,
        counted,
        document,
        sequences,
        source,
        wait_for_number,
        id_space,
        status,
    } = plan;
    let api_source = source.clone();
    let holder_labels = crate::http::state::HolderLabels {
        space: id_space,
        layout: layout_fingerprint(&layout),
        store: source.store_label.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::runtime(format!("cannot start the runtime: {error}")))?;
    let listener = runtime.block_on(listen(address))?;
    // The number is taken on a thread of its own (the etcd store refuses to run inside a
    // Tokio runtime), while the service listens: a wait for a mark or a free number is
    // answered, not silent. A failure to take one stops the service.
    let lease_failed = Arc::new(tokio::sync::Notify::new());
    let (own, taking) = OwnLease::start(source, layout, wait_for_number, {
        let lease_failed = Arc::clone(&lease_failed);
        move || lease_failed.notify_one()
    })?;
    let lease_api = lease_api_token
        .map(|token| Arc::new(LeaseApi::new(token, api_source, layout, Arc::clone(&own))));
    let service = Arc::new(Service {
        own: Arc::clone(&own),
        document,
        counted,
        lease_api,
        sequences: Arc::clone(&sequences),
        opaque,
        layout,
        max_batch,
        inline_batch: INLINE_BATCH.min((layout.max_sequence() as usize + 1) / 4),
        ids_issued: AtomicU64::new(0),
        issued_by_kind: Default::default(),
        traffic: Arc::new(Traffic::new()),
        holder_labels,
        status,
    });
    drop(own);
    let served = runtime.block_on(serve(Arc::clone(&service), listener, lease_failed, grace));
    // Connections still open after the grace period are dropped with the runtime; a batch
    // still running on a blocking thread gets a moment, and the runtime goes before the
    // lease is released.
    runtime.shutdown_timeout(Duration::from_secs(1));
    // A number still being taken is given up (a wait for a mark or a free number ends at
    // once; the signal did so already); the thread's own failure, if it stopped the
    // service, is the process's. A thread stuck in a store call is left behind.
    service.own.cancel();
    let taken = taking.result().unwrap_or_else(|| {
        tracing::warn!(
            "the worker number was still being taken when the service stopped (a store call \
             that does not return); exiting without it"
        );
        Ok(())
    });
    let released = match Arc::try_unwrap(service).map(|service| Arc::try_unwrap(service.own)) {
        Ok(Ok(own)) => match own.into_generator() {
            Some(generator) => generator.release().map(|()| NumberAtStop::Released),
            None => Ok(NumberAtStop::NoneHeld),
        },
        // A batch still running on a blocking thread: the number cannot be released under
        // it. The process exits; the lock goes with it, and the mark written a horizon ahead
        // keeps a successor after every ID the batch may still issue. (Or the thread taking
        // the number is stuck: whatever it takes ends with the process the same way.)
        _ => Ok(NumberAtStop::LeftToExpire),
    };
    // After the lease (a slow block store must not hold the worker number), the unused
    // sequence values go back, so that a clean restart leaves no gap.
    let given_back = sequences.close(grace);
    taken?;
    served?;
    given_back?;
    let released =
        released.map_err(|error| Failure::runtime(format!("releasing the lease: {error}")))?;
    match released {
        NumberAtStop::Released => tracing::info!("stopped; worker number released"),
        NumberAtStop::NoneHeld => tracing::info!("stopped; no worker number was held"),
        NumberAtStop::LeftToExpire => tracing::warn!(
            "stopped with work still running; the worker number is left to expire (its \
             successor waits for the mark)"
        ),
    }
    Ok(())
}

/// What became of the service's own number at the stop.
enum NumberAtStop {
    Released,
    NoneHeld,
    LeftToExpire,
}

/// The listener, its address printed as the first line of output (read by scripts and
/// tests to find the port); the worker number follows on a line of its own once taken.
async fn listen(listen: SocketAddr) -> Result<tokio::net::TcpListener, Failure> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|error| Failure::runtime(format!("cannot listen on {listen}: {error}")))?;
    let address = listener
        .local_addr()
        .map_err(|error| Failure::runtime(error.to_string()))?;
    println!("idgen: listening on http://{address} (taking a worker number)");
    tracing::info!(%address, "listening");
    Ok(listener)
}

async fn serve(
    service: Arc<Service>,
    listener: tokio::net::TcpListener,
    lease_failed: Arc<tokio::sync::Notify>,
    grace: Duration,
) -> Result<(), Failure> {
    if let Some(api) = service.lease_api.clone() {
        // Leases not renewed within a TTL go back to the store.
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            loop {
                every.tick().await;
                // Drops claims only: no store request (the store, which outlives them, keeps
                // any connection), so it runs here.
                api.expire();
            }
        });
    }
    let own = Arc::clone(&service.own);
    let app = http::router(service);
    let stopping = Arc::new(tokio::sync::Notify::new());
    let server = axum::serve(listener, app).with_graceful_shutdown({
        let stopping = Arc::clone(&stopping);
        async move {
            tokio::select! {
                () = shutdown_signal() => {
                    tracing::info!("shutting down: finishing open requests");
                    // A wait for a number or a mark ends now, not after the open requests.
                    own.cancel();
                }
                () = lease_failed.notified() => {
                    tracing::info!("no worker number: shutting down, finishing open requests");
                }
            }
            stopping.notify_one();
        }
    });
    // Graceful shutdown waits for every connection to close, which a slow or stalled
    // client could put off for ever: after the grace period, or a second signal, stop.
    let deadline = async {
        stopping.notified().await;
        tokio::select! {
            _ = tokio::time::sleep(grace) => tracing::warn!(
                "open requests did not finish within {} s; stopping anyway",
                grace.as_secs()
            ),
            _ = shutdown_signal() => tracing::warn!("second signal; stopping now"),
        }
    };
    tokio::select! {
        served = server => served
            .map_err(|error| Failure::runtime(format!("the server failed: {error}"))),
        () = deadline => Ok(()),
    }
}

/// Resolves on SIGINT or SIGTERM: axum then stops accepting and finishes open requests.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

/// A layout as the metrics name it: its widths (time, datacenter, worker, sequence) and
/// epoch, `41.5.5.12@1704067200000`: two layouts are one ID space only if this is equal.
pub fn layout_fingerprint(layout: &Layout) -> String {
    format!(
        "{}.{}.{}.{}@{}",
        layout.time_bits(),
        layout.datacenter_bits(),
        layout.worker_bits(),
        layout.sequence_bits(),
        layout.epoch_unix_ms()
    )
}
