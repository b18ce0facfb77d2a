//! `POST /v1/sequences/{name}/next`: dense values of the declared sequences, over a block
//! store (the embedded file store by default, or PostgreSQL), one allocator per sequence.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use idgen::Error;
use idgen::blocks::{BlockAllocator, BlockStore, SequenceName};
use idgen_cli::input::{count_from_json, shown};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{
    BodyRefusals, ErrorBody, SEQUENCE_BODY_FIELDS, SequencePath, SequenceRequest, SequenceValues,
};
use crate::args::sequences::Declared;
use crate::failure::Failure;
use crate::http::plumbing::{ApiError, read_json_object};

/// The service's sequences: one allocator per name, made on first use.
pub struct Sequences {
    /// The store, or why there is none (the default directory could not be opened: the
    /// service runs, and sequence requests say why they cannot be served).
    store: Result<Arc<dyn BlockStore>, String>,
    /// `None` once closed for shutdown.
    allocators: Mutex<Option<HashMap<SequenceName, Arc<BlockAllocator>>>>,
    max_sequences: usize,
    max_batch: usize,
    declared: Declared,
    pub values_issued: AtomicU64,
    /// Round trips of allocators no longer kept, so that the totals never go down.
    retired_round_trips: AtomicU64,
    retired_failed_round_trips: AtomicU64,
}

impl Sequences {
    pub fn new(
        store: Result<Arc<dyn BlockStore>, String>,
        declared: Declared,
        max_sequences: usize,
        max_batch: usize,
    ) -> Sequences {
        Sequences {
            declared,
            store,
            allocators: Mutex::new(Some(HashMap::new())),
            max_sequences,
            max_batch,
            values_issued: AtomicU64::new(0),
            retired_round_trips: AtomicU64::new(0),
            retired_failed_round_trips: AtomicU64::new(0),
        }
    }

    /// The allocator of `name`, made if new (each has a fetcher thread, hence the cap).
    fn allocator(&self, name: &SequenceName) -> Result<Arc<BlockAllocator>, ApiError> {
        if !self.declared.allows(name) {
            return Err(ApiError(StatusCode::NOT_FOUND, self.declared.refusal(name)));
        }
        let unavailable = |message: String| ApiError(StatusCode::SERVICE_UNAVAILABLE, message);
        let store = self
            .store
            .as_ref()
            .map_err(|reason| unavailable(reason.clone()))?;
        let mut allocators = self
            .allocators
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(allocators) = allocators.as_mut() else {
            return Err(unavailable("the service is shutting down".into()));
        };
        if let Some(allocator) = allocators.get(name) {
            return Ok(Arc::clone(allocator));
        }
        if allocators.len() >= self.max_sequences {
            return Err(ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "this service serves at most {} sequences (--max-sequences)",
                    self.max_sequences
                ),
            ));
        }
        let allocator = BlockAllocator::builder(Arc::clone(store), name.as_str())
            .and_then(|builder| builder.build())
            .map_err(|error| ApiError(StatusCode::SERVICE_UNAVAILABLE, error.to_string()))?;
        let allocator = Arc::new(allocator);
        allocators.insert(name.clone(), Arc::clone(&allocator));
        Ok(allocator)
    }

    /// Values of `name`. A sequence whose store never granted it a block is not kept once
    /// its last request failed: no thread, no slot of --max-sequences, for a name that
    /// never got a value. One another request still uses stays (closing it would fail
    /// that request for good).
    fn next_values(&self, name: &SequenceName, count: usize) -> Result<Vec<u64>, ApiError> {
        let allocator = self.allocator(name)?;
        let values = allocator.next_n(count).map_err(api_error);
        if values.is_err() {
            let forgotten = {
                // Under the map's lock no other request can take a new handle on it.
                let mut allocators = self
                    .allocators
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                allocators.as_mut().is_some_and(|allocators| {
                    let stats = allocator.stats();
                    let never_granted = stats.round_trips == stats.failed_round_trips;
                    // Held by the map and by this call only.
                    let unused_elsewhere = Arc::strong_count(&allocator) == 2;
                    let ours = allocators
                        .get(name)
                        .is_some_and(|kept| Arc::ptr_eq(kept, &allocator));
                    never_granted && unused_elsewhere && ours && allocators.remove(name).is_some()
                })
            };
            if forgotten {
                // Nothing to give back: this only stops its fetcher. Its failed round trips
                // stay counted.
                let _ = allocator.close();
                let stats = allocator.stats();
                self.retired_round_trips
                    .fetch_add(stats.round_trips, Ordering::Relaxed);
                self.retired_failed_round_trips
                    .fetch_add(stats.failed_round_trips, Ordering::Relaxed);
            }
        }
        values
    }

    /// Store round trips of every allocator, and how many allocators there are.
    pub fn round_trips(&self) -> (u64, u64, usize) {
        let allocators = self
            .allocators
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (mut trips, mut failed) = (
            self.retired_round_trips.load(Ordering::Relaxed),
            self.retired_failed_round_trips.load(Ordering::Relaxed),
        );
        let Some(allocators) = allocators.as_ref() else {
            return (trips, failed, 0);
        };
        for allocator in allocators.values() {
            let stats = allocator.stats();
            trips += stats.round_trips;
            failed += stats.failed_round_trips;
        }
        (trips, failed, allocators.len())
    }

    /// Closes every allocator at once, giving unused values back, within `grace`; says
    /// how many gave values back. Later requests get a 503. Blocks on the store: call it
    /// outside async code.
    pub fn close(&self, grace: Duration) -> Result<usize, Failure> {
        let allocators = self
            .allocators
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default();
        let count = allocators.len();
        let (done, results) = std::sync::mpsc::channel();
        for (name, allocator) in allocators {
            let done = done.clone();
            std::thread::spawn(move || {
                let _ = done.send((name, allocator.close()));
            });
        }
        drop(done);
        let deadline = Instant::now() + grace;
        let (mut given_back, mut failures) = (0, Vec::new());
        for _ in 0..count {
            let left = deadline.saturating_duration_since(Instant::now());
            match results.recv_timeout(left) {
                Ok((_, Ok(true))) => given_back += 1,
                Ok((_, Ok(false))) => {}
                Ok((name, Err(error))) => failures.push(format!("sequence {name}: {error}")),
                Err(_) => {
                    failures.push(format!(
                        "some sequences were still closing after {} s; their unused values \
                         are a gap",
                        grace.as_secs()
                    ));
                    break;
                }
            }
        }
        if failures.is_empty() {
            Ok(given_back)
        } else {
            Err(Failure::runtime(format!(
                "unused sequence values not given back: {}",
                failures.join("; ")
            )))
        }
    }
}

/// The sequence route, and what the document says of it.
pub fn routes() -> OpenApiRouter<Arc<Sequences>> {
    OpenApiRouter::new().routes(routes!(next_values))
}

/// `count` values of the sequence `name`, dense and increasing, from the block store.
#[utoipa::path(
    post,
    path = "/v1/sequences/{name}/next",
    tag = "sequences",
    params(SequencePath),
    request_body = SequenceRequest,
    responses(
        (status = 200, description = "The values, increasing, with no gap between them",
            body = SequenceValues),
        BodyRefusals,
        (status = 404, description = "The sequence is not declared: only the names the \
            service was started with (--sequences, --sequences-file) are served, unless it \
            creates any name on first use (--create-sequences)", body = ErrorBody),
        (status = 409, description = "The sequence reached the end of its range \
            (2^63 - 1)", body = ErrorBody),
        (status = 500, description = "The sequence stopped for good: its store went back \
            (retrying cannot help; it stays stopped until an operator looks); or a defect \
            of the service (work that panicked: report it)",
            body = ErrorBody),
        (status = 503, description = "The block store is away, the service has no block \
            store, it serves --max-sequences already, or it is shutting down",
            body = ErrorBody),
    )
)]
async fn next_values(
    State(sequences): State<Arc<Sequences>>,
    name: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let Path(name) = name.map_err(|_| {
        ApiError::bad("invalid sequence name: not UTF-8 once percent-decoded; only a-z, 0-9, _ and - are allowed")
    })?;
    let name = SequenceName::new(&name).map_err(|error| ApiError::bad(error.to_string()))?;
    // Before the body and before any blocking thread: a 404 never queues behind requests
    // that wait on a store.
    if !sequences.declared.allows(&name) {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            sequences.declared.refusal(&name),
        ));
    }
    if query.is_some_and(|query| !query.is_empty()) {
        return Err(ApiError::bad(
            r#"POST /v1/sequences/{name}/next takes {"count": N} in the body, not the query"#,
        ));
    }
    let fields = read_json_object(&headers, body, r#"{"count": 10}"#).await?;
    if let Some(field) = fields
        .keys()
        .find(|field| !SEQUENCE_BODY_FIELDS.contains(&field.as_str()))
    {
        return Err(ApiError::bad(format!(
            "unknown field {:?}: the body is {{\"count\": N}}",
            shown(field)
        )));
    }
    let count = match fields.get("count") {
        None => return Err(ApiError::bad(r#"count is missing: send {"count": N}"#)),
        Some(count) => count_from_json(count, sequences.max_batch).map_err(ApiError::bad)?,
    };
    // Making an allocator starts a thread, and a call may wait on the store: neither on an
    // async worker.
    let values = {
        let sequences = Arc::clone(&sequences);
        tokio::task::spawn_blocking(move || sequences.next_values(&name, count))
            .await
            .map_err(|error| ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))??
    };
    sequences
        .values_issued
        .fetch_add(values.len() as u64, Ordering::Relaxed);
    let values = values.iter().map(u64::to_string).collect();
    Ok(axum::Json(SequenceValues { values }).into_response())
}

/// 409 at the end of the range, 503 while the store is away (transient), and 500 for an
/// allocator stopped for good (a store that went back): retrying cannot help there, and
/// the sequence stays stopped until an operator looks.
fn api_error(error: Error) -> ApiError {
    let status = match error {
        Error::SequenceExhausted { .. } => StatusCode::CONFLICT,
        Error::BatchTooLarge { .. } => StatusCode::BAD_REQUEST,
        _ if error.is_transient() => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError(status, error.to_string())
}
