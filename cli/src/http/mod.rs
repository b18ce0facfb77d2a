//! The HTTP service: JSON in and out, every ID as a string (Snowflake IDs in decimal). A
//! module per resource (`ids`, `bounds`, `health_and_layout`, `sequences`, `lease_api`,
//! `metrics`, `openapi`, and `status`, the page for people), what they share in `plumbing`
//! and `state`; here, the router and the OpenAPI document, both made from the same route
//! lists. `serve` runs it.

pub mod bounds;
pub mod health_and_layout;
pub mod ids;
pub mod lease_api;
pub mod metrics;
pub mod openapi;
pub mod plumbing;
pub mod sequences;
pub mod state;
pub mod status;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use utoipa_axum::router::OpenApiRouter;

use plumbing::{MAX_BODY_BYTES, count_responses, method_not_allowed, not_found};
use state::Service;

/// The routes on the service's shared state, in the order the document lists them.
fn service_routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .merge(ids::routes())
        .merge(bounds::routes())
        .merge(health_and_layout::routes())
        .merge(metrics::routes())
        .merge(openapi::routes())
        .merge(status::routes())
}

/// The OpenAPI document of every endpoint, from the same route lists the router is built
/// of; `openapi::written` shapes it to what a service has on.
fn document() -> utoipa::openapi::OpenApi {
    openapi::framed([
        service_routes().into_openapi(),
        sequences::routes().into_openapi(),
        lease_api::routes().into_openapi(),
    ])
}

/// The document with every part on (`idgen openapi`, committed as `docs/openapi.json`):
/// pretty, with a final newline.
pub fn document_text() -> String {
    document_text_shaped(&openapi::Shape::EVERY_PART)
}

/// The document of a service shaped as `shape` says: what it serves.
pub fn document_text_shaped(shape: &openapi::Shape<'_>) -> String {
    openapi::written(document(), shape)
}

/// The service's router: every route on its state, the fallbacks, the body limit, and
/// the counting middleware.
pub fn router(service: Arc<Service>) -> Router {
    let (shared, _) = service_routes().split_for_parts();
    let (sequences, _) = sequences::routes().split_for_parts();
    let (lease_api, _) = lease_api::routes().split_for_parts();
    shared
        // HEAD would run the GET handler and issue IDs nobody sees: not allowed.
        .route("/v1/ids", axum::routing::head(ids::head_not_allowed))
        .with_state(Arc::clone(&service))
        .merge(lease_api.with_state(service.lease_api.clone()))
        .merge(sequences.with_state(Arc::clone(&service.sequences)))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&service.traffic),
            count_responses,
        ))
}
