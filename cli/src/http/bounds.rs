//! `GET /v1/bounds`: the IDs made in a span of time, as the two bounding IDs and a ready
//! `WHERE` clause, for range queries and cursors.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use idgen_cli::input;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{BOUNDS_PARAMETERS, Bounds, BoundsQuery, ErrorBody};
use crate::bounds::{bounds, instant, kind};
use crate::http::plumbing::ApiError;
use crate::http::state::Service;
use crate::kinds::Kind;

/// The routes of this module, and what the document says of them.
pub fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new().routes(routes!(get_bounds))
}

/// The IDs made in `[from, to)` by the time embedded in them (Snowflake IDs in this
/// service's layout): the first ID that can be made at `from`, the first at `to`, and a
/// ready `WHERE` clause.
#[utoipa::path(
    get,
    path = "/v1/bounds",
    tag = "ids",
    params(BoundsQuery),
    responses(
        (status = 200, description = "The bounds (a span that holds no ID says why in \
            `nothing`)", body = Bounds),
        (status = 400, description = "`from` or `to` missing, given twice, or neither RFC \
            3339 in UTC nor Unix milliseconds; an unknown parameter or kind; kind `opaque`",
            body = ErrorBody),
    )
)]
async fn get_bounds(
    State(service): State<Arc<Service>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = input::query_pairs_among(
        query.as_deref().unwrap_or(""),
        &BOUNDS_PARAMETERS,
        "/v1/bounds takes from, to and kind",
    )
    .map_err(ApiError::bad)?;
    let once = |name: &str| {
        input::once_in_query(&pairs, &[name], &format!("give {name} once")).map_err(ApiError::bad)
    };
    let required =
        |name: &str| once(name)?.ok_or_else(|| ApiError::bad(format!("{name} is required")));
    let from = instant("from", required("from")?).map_err(ApiError::bad)?;
    let to = instant("to", required("to")?).map_err(ApiError::bad)?;
    let kind = once("kind")?
        .map(kind)
        .transpose()
        .map_err(ApiError::bad)?
        .unwrap_or(Kind::Snowflake);
    Ok(axum::Json(bounds(kind, &service.layout, from, to)).into_response())
}
