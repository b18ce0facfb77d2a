//! The lease API: worker numbers for generators that run elsewhere (`/v1/generators`). A
//! program in another language leases a number from the service's own store and range,
//! issues IDs itself within the terms it gets, renews, and releases. Off unless `serve` is
//! given `--lease-api-token-file`; every request needs `Authorization: Bearer <token>`.

pub mod bodies;
pub mod store_calls;
mod token;

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use idgen::lease::{ExternalLease, ExternalTerms};
use idgen::{Error, Layout, SystemClock};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{
    BodyRefusals, ErrorBody, LayoutInfo, LeaseApiRefusals, LeasePath, LeaseRequest, LeaseTerms,
    ReleaseRequest, StoreAway,
};
use crate::args::lease::LeaseSource;
use crate::http::plumbing::{ApiError, read_json_object};
use crate::log::LEASE_API_TARGET;
use crate::own_lease::OwnLease;
use bodies::{holder_name, last_used_ms};
use store_calls::off_runtime;
pub use token::read_token;
use token::same_token;

/// How long an ended lease still answers 410 (rather than 404) to its holder.
const ENDED_KEPT: Duration = Duration::from_secs(600);

/// The lease API's state: the store and range it leases from, and the leases it handed out.
pub struct LeaseApi {
    token: Vec<u8>,
    source: LeaseSource,
    layout: Layout,
    /// The service's own number: until it is taken, no number is leased to clients (they
    /// could take every number that comes free first).
    own: Arc<OwnLease>,
    leases: Mutex<HashMap<String, Entry>>,
}

enum Entry {
    Held {
        lease: Arc<Mutex<Option<ExternalLease>>>,
        holder: String,
        renewed: Instant,
        /// The (datacenter, worker) it holds, for the metrics (a lease keeps its number).
        number: (u64, u64),
    },
    Ended {
        why: &'static str,
        at: Instant,
    },
}

impl LeaseApi {
    /// The API on `source`, answering requests that carry `token` (see [`read_token`]).
    pub fn new(
        token: Vec<u8>,
        source: LeaseSource,
        layout: Layout,
        own: Arc<OwnLease>,
    ) -> LeaseApi {
        LeaseApi {
            token,
            source,
            layout,
            own,
            leases: Mutex::new(HashMap::new()),
        }
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the leases not renewed within a TTL: their numbers go back to the store (free
    /// once the store's lease ends, usable once the last mark passes). Forgets ended ones
    /// after a while. Run every half second by the service.
    pub fn expire(&self) {
        let ttl = self.source.store.ttl();
        let mut expired = Vec::new();
        let mut leases = self.leases();
        leases.retain(|_, entry| match entry {
            Entry::Ended { at, .. } => at.elapsed() < ENDED_KEPT,
            Entry::Held { .. } => true,
        });
        for entry in leases.values_mut() {
            if let Entry::Held {
                lease,
                renewed,
                holder,
                ..
            } = entry
                && renewed.elapsed() > ttl
            {
                // A renewal in progress holds the lease's lock: its client is alive.
                let mut held = match lease.try_lock() {
                    Ok(held) => held,
                    Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) => continue,
                };
                tracing::warn!(
                    target: LEASE_API_TARGET,
                    holder = %holder,
                    "the lease API's lease was not renewed within {ttl:?}; its number goes \
                     back to the store"
                );
                // Dropped, not released: the last mark written stands.
                expired.push(held.take());
                drop(held);
                *entry = Entry::Ended {
                    why: "expired: it was not renewed within the TTL",
                    at: Instant::now(),
                };
            }
        }
        drop(leases);
        drop(expired);
    }

    /// How many leases are held now.
    pub fn held(&self) -> usize {
        self.leases()
            .values()
            .filter(|entry| matches!(entry, Entry::Held { .. }))
            .count()
    }

    /// The (datacenter, worker) of each lease whose holder may issue IDs at `now_unix_ms`:
    /// after the previous holder's mark and up to its own (a lease whose renewals fail
    /// past its mark, or whose client still waits for the previous mark, issues nothing).
    /// A lease being renewed right now counts (its client is alive).
    pub fn issuing_numbers(&self, now_unix_ms: u64) -> Vec<(u64, u64)> {
        self.leases()
            .values()
            .filter_map(|entry| match entry {
                Entry::Held { number, lease, .. } => {
                    let issuing = match lease.try_lock() {
                        Ok(held) => held.as_ref().is_some_and(|held| {
                            let terms = held.terms();
                            terms.resume_after_unix_ms < now_unix_ms
                                && now_unix_ms < terms.valid_until_unix_ms
                        }),
                        Err(std::sync::TryLockError::WouldBlock) => true,
                        Err(std::sync::TryLockError::Poisoned(_)) => false,
                    };
                    issuing.then_some(*number)
                }
                Entry::Ended { .. } => None,
            })
            .collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `/v1/generators` routes, and what the document says of them; without an API, each
/// answers 404 saying how to turn it on.
pub fn routes() -> OpenApiRouter<Option<Arc<LeaseApi>>> {
    OpenApiRouter::new()
        .routes(routes!(lease))
        .routes(routes!(renew))
        .routes(routes!(release))
}

type ApiState = State<Option<Arc<LeaseApi>>>;

/// The API, if it is on and the request carries its token.
pub fn authorised(
    api: Option<Arc<LeaseApi>>,
    headers: &HeaderMap,
) -> Result<Arc<LeaseApi>, ApiError> {
    let Some(api) = api else {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            "the lease API is off: start idgen serve with --lease-api-token-file FILE".into(),
        ));
    };
    let given = bearer_token(headers);
    match given {
        Some(given) if same_token(given.as_bytes(), &api.token) => Ok(api),
        Some(_) => Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "the bearer token is wrong".into(),
        )),
        None => Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "send Authorization: Bearer <token>".into(),
        )),
    }
}

/// The token of the first `Authorization` header of the Bearer scheme (its name in any
/// case, as HTTP has it); headers of other schemes (a proxy's Basic credentials) are not
/// this service's.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .find_map(|value| {
            let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("Bearer")
                .then_some(token.trim())
        })
}

/// Lease a worker number from the service's store and range, to issue IDs with elsewhere.
#[utoipa::path(
    post,
    path = "/v1/generators/lease",
    tag = "lease API",
    security(("bearer" = [])),
    request_body = LeaseRequest,
    responses(
        (status = 200, description = "A number, and the terms to issue IDs by: only IDs \
            dated after resumeAfterMs and before validUntilMs", body = LeaseTerms),
        BodyRefusals,
        (status = 409, description = "No number to lease: the range is full, or the clock \
            is behind a mark", body = ErrorBody),
        LeaseApiRefusals,
        StoreAway,
    )
)]
async fn lease(State(api): ApiState, headers: HeaderMap, body: axum::body::Body) -> Response {
    respond(lease_inner(api, headers, body).await, Retry::After1s)
}

async fn lease_inner(
    api: Option<Arc<LeaseApi>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let api = authorised(api, &headers)?;
    let fields = read_json_object(&headers, body, r#"{"holder": "billing-7f9c"}"#).await?;
    let holder = holder_name(&fields)?;
    if api.own.generator().is_none() {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the service is still taking its own worker number; no number is leased before \
             it has one"
                .into(),
        ));
    }
    let taken = {
        let (api, holder) = (Arc::clone(&api), holder.clone());
        off_runtime(move || {
            ExternalLease::acquire(
                &*api.source.store,
                &api.layout,
                &api.source.range,
                &holder,
                api.source.horizon,
                &SystemClock,
            )
            .map(|lease| Undelivered(Some(lease)))
        })
        .await?
    };
    let lease = taken
        .map(Undelivered::deliver)
        .map_err(|error| match error {
            Error::LeaseRangeFull { .. } | Error::ClockBehindMark { .. } => ApiError(
                StatusCode::CONFLICT,
                format!("no worker number to lease: {error}"),
            ),
            _ => store_unreachable(&error),
        })?;
    let lease = lease.ok_or_else(|| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the lease was lost on its way".into(),
        )
    })?;
    let terms = lease.terms();
    let lease_id = new_lease_id();
    api.leases().insert(
        lease_id.clone(),
        Entry::Held {
            lease: Arc::new(Mutex::new(Some(lease))),
            holder,
            renewed: Instant::now(),
            number: (terms.datacenter, terms.worker),
        },
    );
    Ok(axum::Json(lease_terms(&lease_id, &terms, &api.layout)).into_response())
}

/// A lease not yet handed to its client. If the request goes away first (the client hung
/// up), nothing can have been issued on it, so it is released with the previous holder's
/// mark: the number is free again at once instead of blocked for a horizon.
struct Undelivered(Option<ExternalLease>);

impl Undelivered {
    fn deliver(mut self) -> Option<ExternalLease> {
        self.0.take()
    }
}

impl Drop for Undelivered {
    fn drop(&mut self) {
        if let Some(lease) = self.0.take() {
            // Possibly on a runtime thread (dropped with the request), where the etcd
            // store refuses to block: release on a thread of its own.
            let released = std::thread::Builder::new()
                .name("idgen-lease-api".into())
                .spawn(move || {
                    let previous = lease.terms().resume_after_unix_ms;
                    if let Err(error) = lease.release(Some(previous)) {
                        tracing::warn!(target: LEASE_API_TARGET, "giving back a lease nobody received failed: {error}");
                    }
                });
            if let Err(error) = released {
                tracing::warn!(target: LEASE_API_TARGET, "giving back a lease nobody received failed: {error}");
            }
        }
    }
}

/// Renew a lease: the same terms, with validUntilMs moved on. Renew every renewEveryMs.
#[utoipa::path(
    post,
    path = "/v1/generators/{leaseId}/renew",
    tag = "lease API",
    security(("bearer" = [])),
    params(LeasePath),
    responses(
        (status = 200, description = "The terms, validUntilMs moved on", body = LeaseTerms),
        (status = 400, description = "The lease ID is not UTF-8", body = ErrorBody),
        (status = 410, description = "The lease was lost, expired or released: stop issuing \
            with its number now", body = ErrorBody),
        LeaseApiRefusals,
        StoreAway,
    )
)]
async fn renew(
    State(api): ApiState,
    headers: HeaderMap,
    lease_id: Result<UrlPath<String>, axum::extract::rejection::PathRejection>,
) -> Response {
    respond(renew_inner(api, headers, lease_id).await, Retry::After1s)
}

async fn renew_inner(
    api: Option<Arc<LeaseApi>>,
    headers: HeaderMap,
    lease_id: Result<UrlPath<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, ApiError> {
    let api = authorised(api, &headers)?;
    let UrlPath(lease_id) = lease_id.map_err(|rejection| ApiError::bad(rejection.body_text()))?;
    let lease = held(&api, &lease_id)?;
    // The client is alive, whether or not the store answers: during a store outage its
    // lease is kept (and taken back afterwards), not expired.
    if let Some(Entry::Held { renewed, .. }) = api.leases().get_mut(&lease_id) {
        *renewed = Instant::now();
    }
    let renewed = {
        let lease = Arc::clone(&lease);
        off_runtime(move || lock(&lease).as_mut().map(|held| held.renew(&SystemClock))).await?
    };
    match renewed {
        // Expired or released while this request waited for the lock.
        None => Err(gone(&api, &lease_id)),
        Some(Ok(terms)) => {
            let still_held = matches!(api.leases().get(&lease_id), Some(Entry::Held { .. }));
            if !still_held {
                // Released or expired while this renewal ran.
                return Err(gone(&api, &lease_id));
            }
            Ok(axum::Json(lease_terms(&lease_id, &terms, &api.layout)).into_response())
        }
        Some(Err(error @ (Error::LeaseLost { .. } | Error::LeaseStoreRestored { .. }))) => {
            drop(lock(&lease).take());
            api.leases().insert(
                lease_id,
                Entry::Ended {
                    why: "lost: the store gave the number up",
                    at: Instant::now(),
                },
            );
            Err(ApiError(
                StatusCode::GONE,
                format!("{error}: stop issuing with this number now"),
            ))
        }
        Some(Err(error)) => Err(store_unreachable(&error)),
    }
}

/// Give the number back, optionally saying the last millisecond used.
#[utoipa::path(
    delete,
    path = "/v1/generators/{leaseId}",
    tag = "lease API",
    security(("bearer" = [])),
    params(LeasePath),
    request_body(content = Option<ReleaseRequest>, description = "Optional: nothing, or \
        {\"lastUsedMs\": N}"),
    responses(
        (status = 204, description = "Released"),
        BodyRefusals,
        (status = 410, description = "The lease had already ended", body = ErrorBody),
        LeaseApiRefusals,
        (status = 503, description = "The store could not be told (its slots for store \
            calls were busy, or no thread could be started to tell it): the number is given up all the same, and frees itself when \
            its store lease ends. Do not retry: the lease has ended (a retry gets 410)",
            body = ErrorBody),
    )
)]
async fn release(
    State(api): ApiState,
    headers: HeaderMap,
    lease_id: Result<UrlPath<String>, axum::extract::rejection::PathRejection>,
    body: axum::body::Body,
) -> Response {
    // Its 503 has ended the lease all the same: a retry would only get 410.
    respond(
        release_inner(api, headers, lease_id, body).await,
        Retry::Never,
    )
}

async fn release_inner(
    api: Option<Arc<LeaseApi>>,
    headers: HeaderMap,
    lease_id: Result<UrlPath<String>, axum::extract::rejection::PathRejection>,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let api = authorised(api, &headers)?;
    let UrlPath(lease_id) = lease_id.map_err(|rejection| ApiError::bad(rejection.body_text()))?;
    let last_used = last_used_ms(&headers, body).await?;
    let lease = held(&api, &lease_id)?;
    api.leases().insert(
        lease_id.clone(),
        Entry::Ended {
            why: "released",
            at: Instant::now(),
        },
    );
    let released =
        off_runtime(move || lock(&lease).take().map(|held| held.release(last_used))).await?;
    match released {
        None => Err(gone(&api, &lease_id)),
        Some(Ok(())) => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(Err(error)) => Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "releasing failed ({error}); the number is given up anyway and frees itself \
                 when its lease ends"
            ),
        )),
    }
}

/// The lease `lease_id` while it is held; 404 or 410 otherwise.
fn held(api: &LeaseApi, lease_id: &str) -> Result<Arc<Mutex<Option<ExternalLease>>>, ApiError> {
    let leases = api.leases();
    match leases.get(lease_id) {
        Some(Entry::Held { lease, .. }) => Ok(Arc::clone(lease)),
        Some(Entry::Ended { why, .. }) => Err(ended(lease_id, why)),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no lease {lease_id:?}"),
        )),
    }
}

/// 410 for a lease that ended after the request looked it up.
fn gone(api: &LeaseApi, lease_id: &str) -> ApiError {
    let why = match api.leases().get(lease_id) {
        Some(Entry::Ended { why, .. }) => *why,
        _ => "ended",
    };
    ended(lease_id, why)
}

fn ended(lease_id: &str, why: &str) -> ApiError {
    ApiError(
        StatusCode::GONE,
        format!("lease {lease_id:?} has ended ({why}): lease a new number"),
    )
}

fn store_unreachable(error: &Error) -> ApiError {
    ApiError(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the lease store cannot be reached ({error}); keep to the terms you have and retry"
        ),
    )
}

/// Whether a 503 asks to be retried.
#[derive(PartialEq)]
enum Retry {
    After1s,
    Never,
}

/// A 503 gets `Retry-After: 1` where retrying can help; a 401 says which scheme it wants.
fn respond(result: Result<Response, ApiError>, retry: Retry) -> Response {
    match result {
        Ok(response) => response,
        Err(error) => {
            let status = error.0;
            let mut response = error.into_response();
            let headers = response.headers_mut();
            if status == StatusCode::SERVICE_UNAVAILABLE && retry == Retry::After1s {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            if status == StatusCode::UNAUTHORIZED {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}

fn lease_terms(lease_id: &str, terms: &ExternalTerms, layout: &Layout) -> LeaseTerms {
    LeaseTerms {
        lease_id: lease_id.to_string(),
        datacenter: terms.datacenter,
        worker: terms.worker,
        ttl_ms: terms.ttl.as_millis() as u64,
        resume_after_ms: terms.resume_after_unix_ms,
        valid_until_ms: terms.valid_until_unix_ms,
        renew_every_ms: terms.renew_every.as_millis() as u64,
        // So a client can see how far its clock is from the one that wrote the marks.
        server_now_ms: idgen::Clock::now_unix_ms(&SystemClock),
        layout: LayoutInfo::of(layout),
    }
}

/// 128 random bits, hex: unguessable, so one client cannot renew or release another's
/// lease by counting.
pub fn new_lease_id() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut file| file.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: the standard library's per-process random hasher keys.
        use std::hash::{BuildHasher, Hasher};
        for chunk in bytes.chunks_mut(8) {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_nanos()),
            );
            chunk.copy_from_slice(&hasher.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
