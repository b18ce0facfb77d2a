//! `/v1/ids`: IDs of every kind, asked for in the query (`GET`) or a JSON body (`POST`),
//! and `/v1/ids/{id}/decode`, what an ID says.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use idgen::{Clock, SystemClock};
use idgen_cli::input;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{
    self, BodyRefusals, Decoded, Defect, ErrorBody, IdList, IdPath, IdsQuery, IdsRefused,
};
use crate::decoding::decode_any;
use crate::http::plumbing::{ApiError, method_not_allowed, read_json_object};
use crate::http::state::Service;
use crate::kinds::{Kind, as_text};
use crate::opaque::Form;

/// `--max-batch` unless given: the largest count one request may ask for.
pub const DEFAULT_MAX_BATCH: usize = 10_000;

/// Batches up to this size, and up to a quarter of one millisecond's sequence, are made on
/// the request's own task; larger ones may wait for later milliseconds, so they go to a
/// blocking thread instead of holding up an async worker.
pub const INLINE_BATCH: usize = 1024;

/// The routes of this module, and what the document says of them.
pub fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(get_ids, post_ids))
        .routes(routes!(decode))
}

/// IDs: Snowflake IDs unless `kind` says otherwise.
#[utoipa::path(
    get,
    path = "/v1/ids",
    tag = "ids",
    params(IdsQuery),
    responses(
        (status = 200, description = "The IDs, in increasing order", body = IdList),
        (status = 400, description = "The count missing, given twice, not a whole number, \
            0 or above the maximum; an unknown parameter, kind or form; form `opaque` with \
            another kind, or on a service without a key file", body = ErrorBody),
        IdsRefused,
        Defect,
    )
)]
async fn get_ids(
    State(service): State<Arc<Service>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = input::query_pairs(query.as_deref().unwrap_or("")).map_err(ApiError::bad)?;
    let count = input::count_from_query(&pairs, service.max_batch).map_err(ApiError::bad)?;
    let kind = input::once_in_query(&pairs, &["kind"], "give the kind once, as kind=...")
        .map_err(ApiError::bad)?
        .map(Kind::parse)
        .transpose()
        .map_err(ApiError::bad)?
        .unwrap_or(Kind::Snowflake);
    let form = input::once_in_query(&pairs, &["form"], "give the form once, as form=...")
        .map_err(ApiError::bad)?
        .map(Form::parse)
        .transpose()
        .map_err(ApiError::bad)?
        .unwrap_or(Form::Plain);
    issue(service, count, kind, form).await
}

/// IDs, as `GET /v1/ids` makes them, asked for in a JSON body.
#[utoipa::path(
    post,
    path = "/v1/ids",
    tag = "ids",
    request_body = api::IdsRequest,
    responses(
        (status = 200, description = "The IDs, in increasing order", body = IdList),
        BodyRefusals,
        IdsRefused,
        Defect,
    )
)]
async fn post_ids(
    State(service): State<Arc<Service>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    if query.is_some_and(|query| !query.is_empty()) {
        return Err(ApiError::bad(
            r#"POST /v1/ids takes its parameters in the body, {"count": N, "kind": "...", "form": "..."}, not the query"#,
        ));
    }
    let fields = read_json_object(&headers, body, r#"{"count": 10}"#).await?;
    if let Some(field) = fields
        .keys()
        .find(|field| !api::ID_BODY_FIELDS.contains(&field.as_str()))
    {
        return Err(ApiError::bad(format!(
            "unknown field {:?}: the body is {{\"count\": N, \"kind\": \"...\", \"form\": \"...\"}}",
            input::shown(field)
        )));
    }
    let count = match fields.get("count") {
        None => return Err(ApiError::bad(r#"count is missing: send {"count": N}"#)),
        Some(count) => input::count_from_json(count, service.max_batch).map_err(ApiError::bad)?,
    };
    let kind = input::named_field(&fields, "kind", Kind::NAMES, Kind::parse)
        .map_err(ApiError::bad)?
        .unwrap_or(Kind::Snowflake);
    let form = input::named_field(&fields, "form", Form::NAMES, Form::parse)
        .map_err(ApiError::bad)?
        .unwrap_or(Form::Plain);
    issue(service, count, kind, form).await
}

async fn issue(
    service: Arc<Service>,
    count: usize,
    kind: Kind,
    form: Form,
) -> Result<Response, ApiError> {
    // Checked before any ID is made, so a refused request uses none.
    let opaque = form == Form::Opaque;
    if opaque && kind != Kind::Snowflake {
        return Err(ApiError::bad(format!(
            "form \"opaque\" is for Snowflake IDs; a {} has no opaque form",
            kind.name()
        )));
    }
    if opaque && service.opaque.is_none() {
        return Err(ApiError::bad(
            "form \"opaque\" needs a key, and this service has none: start it with \
             --opaque-key-file FILE",
        ));
    }
    // Snowflake IDs need the service's own number: until it is taken, a 503 saying what
    // is waited for, and for how long.
    if kind == Kind::Snowflake && service.own.generator().is_none() {
        let (pending, now) = (service.own.pending(), SystemClock.now_unix_ms());
        let mut response =
            ApiError(StatusCode::SERVICE_UNAVAILABLE, pending.refusal(now)).into_response();
        response.headers_mut().insert(
            header::RETRY_AFTER,
            axum::http::HeaderValue::from(pending.retry_after_s(now)),
        );
        return Ok(response);
    }
    let make = move |service: &Service| match service.counted.issue(kind, count) {
        Some(ids) => ids,
        None => service
            .own
            .generator()
            // Checked above; once taken, the number stays.
            .ok_or_else(|| idgen::Error::LeaseStore {
                reason: "no worker number yet".into(),
            })
            .and_then(|generator| generator.next_ids(count))
            .map(|ids| match &service.opaque {
                Some(codec) if opaque => as_text(codec.encode_all(&ids)),
                _ => as_text(ids),
            }),
    };
    let ids = if count <= service.inline_batch {
        make(&service)
    } else {
        let service = Arc::clone(&service);
        tokio::task::spawn_blocking(move || make(&service))
            .await
            .map_err(|error| ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?
    };
    let ids: Vec<String> =
        ids.map_err(|error| ApiError(StatusCode::SERVICE_UNAVAILABLE, error.to_string()))?;
    service
        .ids_issued
        .fetch_add(ids.len() as u64, Ordering::Relaxed);
    service.issued_by_kind[kind.index()].fetch_add(ids.len() as u64, Ordering::Relaxed);
    Ok(axum::Json(IdList { ids }).into_response())
}

/// A debugging aid: the kind and creation time of an ID, and for a Snowflake ID its parts
/// as this service's layout reads them.
#[utoipa::path(
    get,
    path = "/v1/ids/{id}/decode",
    tag = "ids",
    params(IdPath),
    responses(
        (status = 200, description = "What the ID says", body = Decoded),
        (status = 400, description = "Not an ID of any kind, or an opaque ID the service \
            cannot decode", body = ErrorBody),
    )
)]
async fn decode(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, ApiError> {
    let Path(text) = id.map_err(|rejection| ApiError::bad(rejection.body_text()))?;
    let keys = service
        .opaque
        .as_ref()
        .ok_or("and this service has no opaque key to decode it (start it with --opaque-key-file)");
    let decoded = decode_any(&service.layout, keys, &text).map_err(ApiError::bad)?;
    Ok(axum::Json(decoded).into_response())
}

/// `HEAD /v1/ids`: 405, naming the methods that are allowed.
pub async fn head_not_allowed() -> Response {
    let mut response = method_not_allowed().await.into_response();
    response.headers_mut().insert(
        header::ALLOW,
        axum::http::HeaderValue::from_static("GET, POST"),
    );
    response
}
