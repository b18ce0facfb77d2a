//! The service's contract: the bodies it reads and writes, as types, and the OpenAPI 3.1
//! document made from them and from each handler's `#[utoipa::path]` (served at
//! `GET /openapi.json`, printed by `idgen openapi`, committed as `docs/openapi.json`).
//!
//! Responses are these types, serialised: what the document says of a body is what the
//! handler sends. Request bodies and query strings are read by hand (`idgen_cli::input`),
//! for errors that say what is wrong: the handlers refuse any field or parameter but the
//! ones in the constants here (and `input::ID_PARAMETERS`), and the tests below hold the
//! document's names, limits and values to those constants.

use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, IntoResponses, Modify, OpenApi, ToSchema};

use crate::kinds::Kind;
use crate::opaque::Form;

/// The fields of `POST /v1/ids`'s body.
pub const ID_BODY_FIELDS: [&str; 3] = ["count", "kind", "form"];

/// The field of `POST /v1/sequences/{name}/next`'s body.
pub const SEQUENCE_BODY_FIELDS: [&str; 1] = ["count"];

/// The field of `POST /v1/generators/lease`'s body.
pub const LEASE_BODY_FIELDS: [&str; 1] = ["holder"];

/// The field of `DELETE /v1/generators/{leaseId}`'s optional body.
pub const RELEASE_BODY_FIELDS: [&str; 1] = ["lastUsedMs"];

/// Every ID as text: Snowflake IDs in decimal (JavaScript numbers lose precision above
/// 2^53), opaque IDs, UUIDv7s and ULIDs in their own forms. In increasing order of
/// creation (opaque IDs show no order).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ids": ["385628494224322560", "385628494224322561"]}))]
pub struct IdList {
    pub ids: Vec<String>,
}

/// Dense values of one sequence, increasing, in decimal.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"values": ["1001", "1002"]}))]
pub struct SequenceValues {
    pub values: Vec<String>,
}

/// What an ID says. Snowflake IDs (and the one behind an opaque ID) add their datacenter,
/// worker and sequence, as this service's layout reads them.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"id": "385628494224322560", "kind": "snowflake",
    "createdAt": "2026-10-11T12:35:21.659Z", "datacenter": 3, "worker": 17, "sequence": 0}))]
pub struct Decoded {
    /// The ID in its canonical text (a Snowflake ID in decimal, whichever form was given).
    pub id: String,
    pub kind: Kind,
    /// When it was made: RFC 3339, UTC, to the millisecond.
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub datacenter: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub worker: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub sequence: Option<u64>,
    /// The opaque ID given, when one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub opaque: Option<String>,
}

/// A layout's bits and what follows from them.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LayoutInfo {
    pub time_bits: u32,
    pub datacenter_bits: u32,
    pub worker_bits: u32,
    pub sequence_bits: u32,
    /// The instant time 0 stands for: RFC 3339, UTC, to the millisecond.
    pub epoch: String,
    /// To a tenth of a year.
    pub lifetime_years: f64,
    /// The last millisecond the time field can hold.
    pub last_instant: String,
    pub datacenters: u64,
    pub workers_per_datacenter: u64,
    pub nodes: u64,
    /// Exact where it fits 64 bits (every realistic layout), else a float.
    #[schema(value_type = f64)]
    pub ids_per_second_per_node: serde_json::Value,
    #[schema(value_type = f64)]
    pub cluster_ids_per_second: serde_json::Value,
}

/// Where the service's own lease stands: IDs are issued while it is `Valid` or `Outage`.
#[derive(Serialize, ToSchema)]
pub enum LeaseHealth {
    /// Renewed: IDs are issued.
    Valid,
    /// Renewals fail, and IDs are issued up to the mark (`validForMs` says how long).
    Outage,
    /// Past the mark: nothing is issued until a renewal gets through.
    Expired,
    /// The store gave the number up; a new one is being taken.
    Lost,
    /// Released at shutdown.
    Released,
    /// Starting: asking the store for a number.
    Taking,
    /// Starting: a number is held, and IDs wait until its previous holder's mark has
    /// passed (`startsInMs` says how long).
    WaitingForMark,
    /// Starting: every number of the range is held; the service waits for one to come free
    /// (a holder that crashed frees its number within its TTL), and exits if none does
    /// within `givesUpInMs`.
    WaitingForNumber,
    /// A state this build has no name for: treated as not issuing.
    Unknown,
}

/// The service's lease, for a balancer or an operator.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub lease: LeaseHealth,
    /// The number held; absent while none is (`Taking`, `WaitingForNumber`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub datacenter: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub worker: Option<u64>,
    /// Milliseconds left in which IDs are issued: before the mark while the lease is
    /// `Valid` or in an `Outage`, 0 otherwise.
    pub valid_for_ms: u64,
    /// During an outage: when it began, in Unix milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub outage_since_ms: Option<u64>,
    /// `WaitingForMark`: milliseconds until the previous holder's mark has passed and IDs
    /// flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub starts_in_ms: Option<u64>,
    /// `WaitingForNumber`: milliseconds before the service gives up and exits.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub gives_up_in_ms: Option<u64>,
}

/// A worker number leased through the lease API, and the terms to issue IDs by.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseTerms {
    /// Names the lease in later requests; unguessable.
    pub lease_id: String,
    pub datacenter: u64,
    pub worker: u64,
    pub ttl_ms: u64,
    /// Issue only IDs dated after this Unix millisecond (the previous holder's mark).
    pub resume_after_ms: u64,
    /// ... and before this one, unless a renewal moves it on.
    pub valid_until_ms: u64,
    pub renew_every_ms: u64,
    /// The service's clock, to see how far the client's is from it.
    pub server_now_ms: u64,
    pub layout: LayoutInfo,
}

/// Every refusal and failure: what is wrong, in words.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"error": "count must be at least 1; got 0"}))]
pub struct ErrorBody {
    pub error: String,
}

pub use described::*;

/// What the handlers read by hand, and the refusals they share, as the document gives
/// them: described here, never built.
#[allow(dead_code)]
mod described {
    use super::*;

    /// `POST /v1/ids`. Refused: any other field, a `form` of `opaque` with another kind or on a
    /// service without a key file.
    #[derive(ToSchema)]
    #[serde(deny_unknown_fields)]
    #[schema(example = json!({"count": 10, "kind": "snowflake"}))]
    pub struct IdsRequest {
        /// How many; at most `--max-batch` (default 10,000).
        #[schema(minimum = 1)]
        pub count: u64,
        /// Default `snowflake`.
        #[schema(nullable = false)]
        pub kind: Option<Kind>,
        /// Default `plain`; `opaque` needs `--opaque-key-file`.
        #[schema(nullable = false)]
        pub form: Option<Form>,
    }

    /// `GET /v1/ids`: the count once, as `count` or `n`; no other parameter.
    #[derive(IntoParams)]
    #[into_params(parameter_in = Query)]
    pub struct IdsQuery {
        /// How many; at most `--max-batch` (default 10,000). Required, as `count` or `n`.
        #[param(nullable = false, minimum = 1)]
        pub count: Option<u64>,
        /// `count` by another name.
        #[param(nullable = false, minimum = 1)]
        pub n: Option<u64>,
        /// Default `snowflake`.
        #[param(nullable = false)]
        pub kind: Option<Kind>,
        /// Default `plain`.
        #[param(nullable = false)]
        pub form: Option<Form>,
    }

    /// The ID a decode request names.
    #[derive(IntoParams)]
    #[into_params(parameter_in = Path)]
    pub struct IdPath {
        /// A Snowflake ID (canonical decimal, or 13 characters of base32), a UUIDv7, a
        /// ULID, or an opaque ID of a key the service holds.
        #[param(min_length = 1)]
        pub id: String,
    }

    /// The sequence a request names.
    #[derive(IntoParams)]
    #[into_params(parameter_in = Path)]
    pub struct SequencePath {
        /// 1 to 64 of `a-z`, `0-9`, `_` and `-`.
        #[param(pattern = "^[a-z0-9_-]{1,64}$")]
        pub name: String,
    }

    /// The lease a request names: the `leaseId` its lease answer gave.
    #[derive(IntoParams)]
    #[into_params(parameter_in = Path, rename_all = "camelCase")]
    pub struct LeasePath {
        /// 32 lower-case hex digits.
        #[param(pattern = "^[0-9a-f]{32}$")]
        pub lease_id: String,
    }

    /// `POST /v1/sequences/{name}/next`.
    #[derive(ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct SequenceRequest {
        /// How many; at most `--max-batch` (default 10,000).
        #[schema(minimum = 1)]
        pub count: u64,
    }

    /// `POST /v1/generators/lease`.
    #[derive(ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct LeaseRequest {
        /// Who holds the number, for operators (`idgen leases` shows it): no control
        /// characters.
        #[schema(min_length = 1, max_length = 128)]
        pub holder: String,
    }

    /// `DELETE /v1/generators/{leaseId}`'s optional body.
    #[derive(ToSchema)]
    #[serde(deny_unknown_fields)]
    #[serde(rename_all = "camelCase")]
    pub struct ReleaseRequest {
        /// The last Unix millisecond an ID was issued for: the number is free after it, rather
        /// than after the whole term.
        #[schema(nullable = false)]
        pub last_used_ms: Option<u64>,
    }

    /// The answers to a JSON body that cannot be read.
    #[derive(IntoResponses)]
    pub enum BodyRefusals {
        /// Malformed JSON, not an object, an unknown or missing field, a bad value.
        #[response(status = 400)]
        Malformed(ErrorBody),
        /// The body did not arrive within 5 s.
        #[response(status = 408)]
        TooSlow(ErrorBody),
        /// The body is over 4 KiB.
        #[response(status = 413)]
        TooLarge(ErrorBody),
        /// Not sent as `Content-Type: application/json`.
        #[response(status = 415)]
        NotJson(ErrorBody),
    }

    /// The lease API's own answers, on every one of its endpoints.
    #[derive(IntoResponses)]
    pub enum LeaseApiRefusals {
        /// No bearer token, or the wrong one.
        #[response(
            status = 401,
            headers(("WWW-Authenticate" = String, description = "`Bearer`"))
        )]
        Unauthorised(ErrorBody),
        /// The lease API is off (the service was started without `--lease-api-token-file`),
        /// or there is no such lease.
        #[response(status = 404)]
        Off(ErrorBody),
        /// A defect of the service (the call to the lease store panicked): report it.
        #[response(status = 500)]
        Defect(ErrorBody),
    }

    /// The lease API's answer while the store cannot be called.
    #[derive(IntoResponses)]
    pub enum StoreAway {
        /// The lease store cannot be reached, or every one of the service's 64 slots for
        /// store calls stayed busy for 5 s (or no thread could be started to call it), or
        /// (a new lease) the service is still taking its own worker number: keep to the
        /// terms you have and retry.
        #[response(
            status = 503,
            headers(("Retry-After" = u32, description = "Seconds to wait: 1"))
        )]
        StoreAway(ErrorBody),
    }

    /// Why Snowflake IDs are refused.
    #[derive(IntoResponses)]
    pub enum IdsRefused {
        /// Snowflake IDs are refused: the service is still taking its worker number
        /// (waiting for the previous holder's mark, or for a number to come free; with
        /// `Retry-After`), its lease is not valid, or the clock is behind.
        #[response(
            status = 503,
            headers(("Retry-After" = u32, description = "While the service takes its worker \
                number: seconds until the mark passes, or 1"))
        )]
        Refused(ErrorBody),
    }

    /// A defect of the service: work that panicked. Report it.
    #[derive(IntoResponses)]
    pub enum Defect {
        /// A defect of the service (work that panicked): report it.
        #[response(status = 500)]
        Defect(ErrorBody),
    }
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

/// utoipa writes an optional request body (`Option<T>`) as "a `T` or JSON `null`"; the
/// service takes no body or a `T`, and refuses `null`: the body's schema becomes `T` alone
/// (the body stays optional: not `required`).
pub fn optional_bodies_not_null(document: &mut serde_json::Value) {
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

/// Limits the sequence path's `name` to `sequences` (an enum beside its pattern), so that a
/// generated client and a contract checker see the rule the service applies.
pub fn name_sequences(document: &mut serde_json::Value, sequences: &[&str]) {
    let parameters = document["paths"]["/v1/sequences/{name}/next"]["post"]["parameters"]
        .as_array_mut()
        .into_iter()
        .flatten();
    for parameter in parameters.filter(|parameter| parameter["name"] == "name") {
        parameter["schema"]["enum"] = serde_json::json!(sequences);
    }
}

/// The document's title, description, tags and security scheme; the paths and schemas come
/// from the routers (see `serve::document`).
pub fn info() -> utoipa::openapi::OpenApi {
    let mut openapi = Info::openapi();
    openapi.info.version = env!("CARGO_PKG_VERSION").to_string();
    openapi
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;
    use crate::kinds::KINDS;

    fn document() -> Value {
        serde_json::from_str(&crate::serve::document_text()).unwrap()
    }

    fn keys(object: &Value) -> BTreeSet<String> {
        object.as_object().unwrap().keys().cloned().collect()
    }

    fn strings(values: &Value) -> Vec<String> {
        values
            .as_array()
            .unwrap()
            .iter()
            .map(|value| value.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn the_documented_body_fields_are_the_ones_the_handlers_take() {
        let document = document();
        let bodies = [
            ("IdsRequest", &ID_BODY_FIELDS[..]),
            ("SequenceRequest", &SEQUENCE_BODY_FIELDS[..]),
            ("LeaseRequest", &LEASE_BODY_FIELDS[..]),
            ("ReleaseRequest", &RELEASE_BODY_FIELDS[..]),
        ];
        for (name, fields) in bodies {
            let schema = &document["components"]["schemas"][name];
            let expected: BTreeSet<String> = fields.iter().map(|f| f.to_string()).collect();
            assert_eq!(keys(&schema["properties"]), expected, "{name}");
            assert_eq!(schema["additionalProperties"], false, "{name}");
        }
    }

    #[test]
    fn the_documented_query_parameters_are_the_ones_the_handler_takes() {
        let document = document();
        let parameters: Vec<String> = document["paths"]["/v1/ids"]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|parameter| parameter["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(parameters, idgen_cli::input::ID_PARAMETERS);
    }

    #[test]
    fn the_documented_limits_are_the_ones_the_handlers_apply() {
        let document = document();
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["LeaseRequest"]["properties"]["holder"]["maxLength"],
            crate::generators::MAX_HOLDER_CHARS
        );
        let parameter = |path: &str, method: &str| {
            document["paths"][path][method]["parameters"][0]["schema"].clone()
        };
        assert_eq!(
            parameter("/v1/sequences/{name}/next", "post")["pattern"],
            format!("^[a-z0-9_-]{{1,{}}}$", idgen::blocks::MAX_NAME_LEN)
        );
        // What the lease API hands out matches the pattern its paths document.
        assert_eq!(
            parameter("/v1/generators/{leaseId}", "delete")["pattern"],
            "^[0-9a-f]{32}$"
        );
        let lease_id = crate::generators::new_lease_id();
        assert_eq!(lease_id.len(), 32);
        assert!(
            lease_id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        let refusals = &document["paths"]["/v1/ids"]["post"]["responses"];
        let timeout = format!("{} s", crate::serve::BODY_READ_TIMEOUT.as_secs());
        assert!(
            refusals["408"]["description"]
                .as_str()
                .unwrap()
                .contains(&timeout)
        );
        let size = format!("{} KiB", crate::serve::MAX_BODY_BYTES / 1024);
        assert!(
            refusals["413"]["description"]
                .as_str()
                .unwrap()
                .contains(&size)
        );
        let store_away =
            document["paths"]["/v1/generators/lease"]["post"]["responses"]["503"]["description"]
                .as_str()
                .unwrap();
        let slots = format!("{} slots", crate::generators::MAX_STORE_CALLS);
        let wait = format!("{} s", crate::generators::STORE_CALL_WAIT.as_secs());
        assert!(
            store_away.contains(&slots) && store_away.contains(&wait),
            "{store_away}"
        );
    }

    #[test]
    fn the_documented_values_are_the_ones_the_handlers_take() {
        let document = document();
        let schemas = &document["components"]["schemas"];
        let kinds = strings(&schemas["Kind"]["enum"]);
        assert_eq!(kinds, KINDS.map(|kind| kind.name()));
        for kind in &kinds {
            assert!(Kind::parse(kind).is_ok(), "{kind}");
        }
        let forms = strings(&schemas["Form"]["enum"]);
        assert_eq!(forms, ["plain", "opaque"]);
        for form in &forms {
            assert!(Form::parse(form).is_ok(), "{form}");
        }
    }
}
