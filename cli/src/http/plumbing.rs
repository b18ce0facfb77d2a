//! What every endpoint shares: the error response, reading a JSON body within its limits,
//! the answers to an unknown path or method, and the middleware that counts each response
//! and times each request (for `/metrics`, and a log line per request at debug).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use idgen_cli::input;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use serde_json::Value;

use crate::api::ErrorBody;
use crate::log::SERVICE_TARGET;

/// Request bodies above this are refused with 413: `{"count": N}` needs a few bytes.
pub const MAX_BODY_BYTES: usize = 4 * 1024;

/// How long a request body may take to arrive.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// An error response: the status and `{"error": "..."}`.
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(ErrorBody { error: self.1 })).into_response()
    }
}

/// A JSON object body, sent with `Content-Type: application/json`; `example` shows one in
/// the error for anything else.
pub async fn read_json_object(
    headers: &HeaderMap,
    body: axum::body::Body,
    example: &str,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err(ApiError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON, sent with Content-Type: application/json".into(),
        ));
    }
    let body = read_body(body).await?;
    input::json_object(&body, example).map_err(ApiError::bad)
}

/// The whole body, at most [`MAX_BODY_BYTES`], within [`BODY_READ_TIMEOUT`].
pub async fn read_body(body: axum::body::Body) -> Result<Bytes, ApiError> {
    let read = tokio::time::timeout(
        BODY_READ_TIMEOUT,
        axum::body::to_bytes(body, MAX_BODY_BYTES),
    );
    match read.await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error)) => {
            let too_large = std::error::Error::source(&error)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            if too_large {
                Err(ApiError(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body is larger than {MAX_BODY_BYTES} bytes"),
                ))
            } else {
                Err(ApiError::bad(format!("cannot read the body: {error}")))
            }
        }
        Err(_) => Err(ApiError(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ),
        )),
    }
}

pub async fn not_found() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such endpoint; see /openapi.json for every endpoint".into(),
    )
}

pub async fn method_not_allowed() -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this endpoint".into(),
    )
}

/// What [`count_responses`] records, for `/metrics`.
pub struct Traffic {
    /// Responses by status code, 100 to 599.
    pub responses: Vec<AtomicU64>,
    /// Request latency by endpoint and method.
    pub latency: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Traffic {
    pub fn new() -> Traffic {
        Traffic {
            responses: (0..500).map(|_| AtomicU64::new(0)).collect(),
            latency: Family::new_with_constructor(latency_histogram),
        }
    }
}

/// A metric's labels: (name, value) pairs.
pub type Labels = Vec<(String, String)>;

/// 50 µs to 1.6 s, doubling: a batch made inline takes microseconds, one that waits for
/// later milliseconds or a block store up to seconds.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// The method as a label: one of the few the service answers, else `other`, so that no
/// client can add series by inventing methods.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// Times the request and counts its response, in [`Traffic`], and logs it at debug.
pub async fn count_responses(
    State(traffic): State<Arc<Traffic>>,
    request: Request,
    next: Next,
) -> Response {
    // The path without its query: a line per request, at debug.
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    // The route's pattern, so that the histogram has a series per endpoint, not per ID.
    let endpoint = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    traffic
        .latency
        .get_or_create(&vec![
            ("endpoint".to_string(), endpoint),
            ("method".to_string(), method_label(&method).to_string()),
        ])
        .observe(started.elapsed().as_secs_f64());
    tracing::debug!(
        target: SERVICE_TARGET,
        %method,
        path = %input::shown(&path),
        status = response.status().as_u16(),
        micros = started.elapsed().as_micros() as u64,
        "request"
    );
    let status = usize::from(response.status().as_u16());
    if let Some(counter) = status
        .checked_sub(100)
        .and_then(|i| traffic.responses.get(i))
    {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    response
}
