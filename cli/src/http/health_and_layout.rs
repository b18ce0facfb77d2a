//! What this instance is and whether it issues: `GET /v1/layout`, the layout its Snowflake
//! IDs follow, and `GET /healthz`, where its lease stands, for a balancer.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use idgen::lease::LeaseState;
use idgen::{Clock, SystemClock};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{self, Health, LayoutInfo};
use crate::http::state::Service;
use crate::own_lease::Pending;

/// The routes of this module, and what the document says of them.
pub fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(layout))
        .routes(routes!(healthz))
}

/// The layout this service's Snowflake IDs follow.
#[utoipa::path(
    get,
    path = "/v1/layout",
    tag = "operations",
    responses((status = 200, description = "The layout's bits and arithmetic", body = LayoutInfo))
)]
async fn layout(State(service): State<Arc<Service>>) -> Response {
    axum::Json(LayoutInfo::of(&service.layout)).into_response()
}

/// Whether Snowflake IDs are issued: for a balancer (UUIDv7s and ULIDs need no lease, but
/// the instance is taken out all the same).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses(
        (status = 200, description = "Issuing: the lease is valid, or in an outage that has \
            not reached the mark", body = Health),
        (status = 503, description = "Not issuing: starting (taking a number, waiting for \
            the previous holder's mark, `startsInMs`, or for a number to come free, \
            `givesUpInMs`), or the lease is not valid", body = Health),
    )
)]
async fn healthz(State(service): State<Arc<Service>>) -> Response {
    let (status, body) = health(&service);
    (status, axum::Json(body)).into_response()
}

/// Where the service's own lease stands, and whether that is issuing (200) or not (503).
pub fn health(service: &Service) -> (StatusCode, Health) {
    let Some(generator) = service.own.generator() else {
        let (pending, now) = (service.own.pending(), SystemClock.now_unix_ms());
        let mut body = Health {
            lease: api::LeaseHealth::Taking,
            datacenter: None,
            worker: None,
            valid_for_ms: 0,
            outage_since_ms: None,
            starts_in_ms: None,
            gives_up_in_ms: None,
        };
        match pending {
            Pending::Taking => {}
            Pending::Mark {
                datacenter,
                worker,
                until_unix_ms,
            } => {
                body.lease = api::LeaseHealth::WaitingForMark;
                (body.datacenter, body.worker) = (Some(datacenter), Some(worker));
                body.starts_in_ms = Some(until_unix_ms.saturating_sub(now));
            }
            Pending::Number {
                gives_up_unix_ms, ..
            } => {
                body.lease = api::LeaseHealth::WaitingForNumber;
                body.gives_up_in_ms = Some(gives_up_unix_ms.saturating_sub(now));
            }
        }
        return (StatusCode::SERVICE_UNAVAILABLE, body);
    };
    let stats = generator.lease_stats();
    let lease = match stats.state {
        LeaseState::Valid => api::LeaseHealth::Valid,
        LeaseState::Outage => api::LeaseHealth::Outage,
        LeaseState::Expired => api::LeaseHealth::Expired,
        LeaseState::Lost => api::LeaseHealth::Lost,
        LeaseState::Released => api::LeaseHealth::Released,
        _ => api::LeaseHealth::Unknown,
    };
    let status = if matches!(stats.state, LeaseState::Valid | LeaseState::Outage) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = Health {
        lease,
        datacenter: Some(stats.datacenter),
        worker: Some(stats.worker),
        valid_for_ms: u64::try_from(stats.valid_for_ms).unwrap_or(0),
        // Still issuing, up to the mark: validForMs says how long.
        outage_since_ms: stats.outage_since_unix_ms,
        starts_in_ms: None,
        gives_up_in_ms: None,
    };
    (status, body)
}
