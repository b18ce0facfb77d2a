//! The OpenAPI 3.1 document: its frame (title, description, tags, security scheme), how it
//! is written, and `GET /openapi.json`, which serves it. Its paths and schemas come from
//! the handlers' `#[utoipa::path]` annotations, through the route lists in `http`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::state::Service;
use crate::{api, patterns};

/// The route of this module, and what the document says of it.
pub fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new().routes(routes!(openapi))
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document of this service as it \
        runs: its largest count (`--max-batch`), its declared sequences, the lease API and \
        opaque IDs only when they are on", body = Object, content_type = "application/json"))
)]
async fn openapi(State(service): State<Arc<Service>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        service.document.clone(),
    )
        .into_response()
}

/// The document of the routers' `parts`, in their order, in its frame.
pub fn framed(
    parts: impl IntoIterator<Item = utoipa::openapi::OpenApi>,
) -> utoipa::openapi::OpenApi {
    let mut document = info();
    for part in parts {
        document.merge(part);
    }
    document
}

/// What a service has on, which the document it serves says: a client (or a contract
/// checker) keeping to it is never refused for what it sends.
pub struct Shape<'a> {
    /// The largest count one request may ask for.
    pub max_batch: usize,
    /// The declared sequences, when the names served are only those.
    pub sequences: Option<&'a [&'a str]>,
    /// Whether the lease API is on.
    pub lease_api: bool,
    /// Opaque IDs: off (`None`), with these key numbers, or (`Some(None)`) any.
    pub opaque: Option<Option<&'a [u32]>>,
}

impl Shape<'static> {
    /// Every part on, at the default limits: the whole contract, for generating a client
    /// (`idgen openapi`, `docs/openapi.json`).
    pub const EVERY_PART: Shape<'static> = Shape {
        max_batch: crate::http::ids::DEFAULT_MAX_BATCH,
        sequences: None,
        lease_api: true,
        opaque: Some(None),
    };
}

/// `document` as text, shaped to `shape`: pretty, with a final newline.
pub fn written(document: utoipa::openapi::OpenApi, shape: &Shape<'_>) -> String {
    let written = serde_json::to_value(document).and_then(|mut document| {
        optional_bodies_not_null(&mut document);
        if let Some(sequences) = shape.sequences {
            name_sequences(&mut document, sequences);
        }
        limit_counts(&mut document, shape.max_batch);
        let decodable = patterns::decodable_id(shape.opaque);
        for parameter in parameters(&mut document, "/v1/ids/{id}/decode", "get") {
            if parameter["name"] == "id" {
                parameter["schema"]["pattern"] = serde_json::json!(decodable);
            }
        }
        for parameter in parameters(&mut document, "/v1/bounds", "get") {
            if parameter["name"] == "from" || parameter["name"] == "to" {
                parameter["schema"]["pattern"] = serde_json::json!(patterns::instant());
            }
        }
        document["components"]["schemas"]["LeaseRequest"]["properties"]["holder"]["pattern"] =
            serde_json::json!(patterns::HOLDER);
        let schemas = &mut document["components"]["schemas"];
        match shape.opaque {
            Some(keys) => {
                schemas[api::OPAQUE_ID_SCHEMA]["pattern"] =
                    serde_json::json!(format!("^(?:{})$", patterns::opaque_id(keys)));
            }
            None => {
                schemas["Form"]["enum"] = serde_json::json!(["plain"]);
                // No opaque ID is ever listed.
                if let Some(schemas) = schemas.as_object_mut() {
                    schemas.remove(api::OPAQUE_ID_SCHEMA);
                }
                let opaque_ref = format!("#/components/schemas/{}", api::OPAQUE_ID_SCHEMA);
                if let Some(kinds) = schemas["AnyId"]["oneOf"].as_array_mut() {
                    kinds.retain(|kind| kind["$ref"] != opaque_ref.as_str());
                }
            }
        }
        if !shape.lease_api {
            without_lease_api(&mut document);
        }
        serde_json::to_string_pretty(&document)
    });
    // Plain data: it cannot fail; if it ever did, the document says so (and the test that
    // compares it with docs/openapi.json fails).
    written.unwrap_or_else(|error| format!("{{\"error\": {:?}}}", error.to_string())) + "\n"
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "idgen",
        description = "Unique, time-sortable IDs over HTTP: 64-bit Snowflake IDs (as decimal \
                       strings), UUIDv7s, ULIDs and opaque IDs; dense sequence values; and \
                       worker-number leases for generators in other languages."
    ),
    tags(
        (name = "ids", description = "IDs of every kind, and what they say"),
        (name = "sequences", description = "Dense values of named sequences"),
        (name = "lease API", description = "Worker numbers for generators that run elsewhere \
                                            (`--lease-api-token-file`)"),
        (name = "operations", description = "Health, metrics, layout and this document"),
    ),
    modifiers(&BearerToken)
)]
struct Info;

/// The lease API's `Authorization: Bearer <token>`.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            // The name the lease API's operations give their security requirement.
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document's title, description, tags and security scheme; the paths and schemas come
/// from the routers (see `http::document`).
fn info() -> utoipa::openapi::OpenApi {
    let mut openapi = Info::openapi();
    openapi.info.version = env!("CARGO_PKG_VERSION").to_string();
    openapi
}

/// utoipa writes an optional request body (`Option<T>`) as "a `T` or JSON `null`"; the
/// service takes no body or a `T`, and refuses `null`: the body's schema becomes `T` alone
/// (the body stays optional: not `required`).
fn optional_bodies_not_null(document: &mut serde_json::Value) {
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    let operations = paths
        .values_mut()
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut());
    for operation in operations {
        let content = operation
            .get_mut("requestBody")
            .and_then(|body| body.get_mut("content"))
            .and_then(|content| content.as_object_mut());
        for media in content.into_iter().flat_map(|content| content.values_mut()) {
            if let Some(schema) = media.get_mut("schema")
                && let Some(choices) = schema.get("oneOf").and_then(|choices| choices.as_array())
            {
                let not_null: Vec<_> = choices
                    .iter()
                    .filter(|choice| choice["type"] != "null")
                    .cloned()
                    .collect();
                if let [only] = &not_null[..] {
                    *schema = only.clone();
                }
            }
        }
    }
}

/// The parameters of the operation `method` on `path`.
fn parameters<'d>(
    document: &'d mut serde_json::Value,
    path: &str,
    method: &str,
) -> impl Iterator<Item = &'d mut serde_json::Value> {
    document["paths"][path][method]["parameters"]
        .as_array_mut()
        .into_iter()
        .flatten()
}

/// Limits the sequence path's `name` to `sequences` (an enum beside its pattern), so that a
/// generated client and a contract checker see the rule the service applies.
fn name_sequences(document: &mut serde_json::Value, sequences: &[&str]) {
    for parameter in parameters(document, "/v1/sequences/{name}/next", "post") {
        if parameter["name"] == "name" {
            parameter["schema"]["enum"] = serde_json::json!(sequences);
        }
    }
}

/// Every count's largest value: `max_batch`.
fn limit_counts(document: &mut serde_json::Value, max_batch: usize) {
    for parameter in parameters(document, "/v1/ids", "get") {
        if parameter["name"] == "count" {
            parameter["schema"]["maximum"] = serde_json::json!(max_batch);
        }
    }
    for body in ["IdsRequest", "SequenceRequest"] {
        document["components"]["schemas"][body]["properties"]["count"]["maximum"] =
            serde_json::json!(max_batch);
    }
}

/// The document without the lease API: its paths, tag, token scheme and bodies.
fn without_lease_api(document: &mut serde_json::Value) {
    if let Some(paths) = document["paths"].as_object_mut() {
        paths.retain(|path, _| !path.starts_with("/v1/generators"));
    }
    // No token shows the status's holder names: it takes none, and refuses none as wrong.
    if let Some(status) = document["paths"]["/v1/status"]["get"].as_object_mut() {
        status.remove("security");
        if let Some(responses) = status.get_mut("responses").and_then(|r| r.as_object_mut()) {
            responses.remove("401");
        }
    }
    if let Some(tags) = document["tags"].as_array_mut() {
        tags.retain(|tag| tag["name"] != "lease API");
    }
    if let Some(components) = document["components"].as_object_mut() {
        components.remove("securitySchemes");
        if let Some(schemas) = components
            .get_mut("schemas")
            .and_then(|schemas| schemas.as_object_mut())
        {
            for body in ["LeaseRequest", "ReleaseRequest", "LeaseTerms"] {
                schemas.remove(body);
            }
        }
    }
}
