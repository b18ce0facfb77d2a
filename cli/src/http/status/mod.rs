//! The status page: `GET /status` (and `/` for a browser) is one HTML page with its script
//! and style sheet (`/status/page.js`, `/status/page.css`, built into the binary: no
//! external asset), which polls `GET /v1/status` every second: this instance's lease, the
//! IDs it hands out per second by kind, the fleet of its store's range (from a shared,
//! cached survey: `fleet_cache`), and a box that decodes an ID through `/v1/ids/{id}/decode`.
//!
//! The page writes everything it shows as text, never as markup, and its content security
//! policy allows no script but its own file: a holder named `<img src=x onerror=...>` is
//! shown as those characters. Holder names are shown only to a request with the lease
//! API's token, or by a service started with `--status-shows-holders`.

pub mod fleet_cache;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use idgen::{Clock, SystemClock};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{Defect, ErrorBody, FleetStatus, IssuedByKind, Status};
use crate::fleet::{Shown, fleet_numbers};
use crate::http::health_and_layout::health;
use crate::http::lease_api::{authorised, bearer_token};
use crate::http::plumbing::ApiError;
use crate::http::state::Service;
use crate::kinds::Kind;

/// The page's policy: its own script, style sheet and requests only; no inline script or
/// style, no plugin, no frame around it, no form sent anywhere. (`data:` images: its empty
/// icon, which spares the browser a request for `/favicon.ico`.)
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_JS: &str = include_str!("page.js");
const PAGE_CSS: &str = include_str!("page.css");

/// The routes of this module, and what the document says of them.
pub fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(root_page))
        .routes(routes!(status_page))
        .routes(routes!(page_script))
        .routes(routes!(page_style))
        .routes(routes!(status))
}

/// The status page, for a browser.
#[utoipa::path(
    get,
    path = "/",
    tag = "operations",
    responses((status = 200, description = "The status page (as `/status`)", body = String,
        content_type = "text/html"))
)]
async fn root_page() -> Response {
    page()
}

/// The status page: this instance's lease and rates, the fleet, and a box that decodes IDs;
/// it reads `/v1/status` every second.
#[utoipa::path(
    get,
    path = "/status",
    tag = "operations",
    responses((status = 200, description = "The status page", body = String,
        content_type = "text/html"))
)]
async fn status_page() -> Response {
    page()
}

/// The status page's script.
#[utoipa::path(
    get,
    path = "/status/page.js",
    tag = "operations",
    responses((status = 200, description = "The status page's script", body = String,
        content_type = "text/javascript"))
)]
async fn page_script() -> Response {
    asset("text/javascript; charset=utf-8", PAGE_JS)
}

/// The status page's style sheet.
#[utoipa::path(
    get,
    path = "/status/page.css",
    tag = "operations",
    responses((status = 200, description = "The status page's style sheet", body = String,
        content_type = "text/css"))
)]
async fn page_style() -> Response {
    asset("text/css; charset=utf-8", PAGE_CSS)
}

fn page() -> Response {
    let mut response = asset("text/html; charset=utf-8", PAGE_HTML);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// A file of the page, never sniffed as another type, and not sent to another site's
/// requests as a referrer.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// What the status page shows, as JSON: this instance's lease, the IDs it issued by kind,
/// and the fleet of its range from a survey shared by every request (at most 2 s old; while
/// none has ended, a request waits up to a second for one).
/// Holder names only with the lease API's token, or on a service started with
/// `--status-shows-holders`.
#[utoipa::path(
    get,
    path = "/v1/status",
    tag = "operations",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The status", body = Status),
        (status = 400, description = "A query string: this endpoint takes no parameters",
            body = ErrorBody),
        (status = 401, description = "A bearer token that is not the lease API's (other \
            schemes are ignored)", body = ErrorBody),
        (status = 404, description = "A bearer token on a service without the lease API: \
            no token shows holder names there", body = ErrorBody),
        Defect,
    )
)]
async fn status(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if query.is_some_and(|query| !query.is_empty()) {
        return Err(ApiError::bad("/v1/status takes no parameters"));
    }
    // A bearer token given is checked even where the flag shows every name: a wrong one is
    // said. Other schemes are not for this service (a proxy's Basic credentials, which a
    // browser sends with every request of the page): they show nothing, and refuse nothing.
    let shown = if bearer_token(&headers).is_some() {
        authorised(service.lease_api.clone(), &headers)?;
        Shown::All
    } else if service.status.shows_holders {
        Shown::All
    } else {
        Shown::WithoutHolders
    };
    let fleet_cache = &service.status.fleet;
    let surveyed = fleet_cache.latest().await;
    let stalled = fleet_cache.stalled_for().map(|running| {
        format!(
            "a survey of the store has been under way for {} s: the store does not answer",
            running.as_secs()
        )
    });
    let (_, lease) = health(&service);
    let now_ms = SystemClock.now_unix_ms();
    let issued = |kind: Kind| service.issued_by_kind[kind.index()].load(Ordering::Relaxed);
    let fleet = match surveyed {
        Some(surveyed) => FleetStatus {
            surveyed_at_ms: surveyed.at_unix_ms,
            holders_shown: shown == Shown::All,
            numbers: fleet_numbers(&surveyed.records, now_ms, fleet_cache.far_ahead_ms(), shown),
            error: stalled.or_else(|| {
                surveyed.error.as_ref().map(|error| match shown {
                    Shown::All => error.clone(),
                    // A store's error can name its files or hosts.
                    Shown::WithoutHolders => {
                        "the latest survey of the store failed (the lease API's token shows why)"
                            .into()
                    }
                })
            }),
        },
        None => FleetStatus {
            surveyed_at_ms: None,
            holders_shown: shown == Shown::All,
            numbers: Vec::new(),
            error: stalled,
        },
    };
    let body = Status {
        now_ms,
        id_space: service.holder_labels.space.clone(),
        layout: service.holder_labels.layout.clone(),
        store: service.holder_labels.store.clone(),
        lease,
        issued: IssuedByKind {
            snowflake: issued(Kind::Snowflake),
            uuidv7: issued(Kind::Uuidv7),
            ulid: issued(Kind::Ulid),
        },
        fleet,
    };
    Ok(([(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response())
}
