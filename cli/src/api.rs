//! The service's contract: the bodies it reads and writes, as types. The OpenAPI 3.1
//! document is made from them and from each handler's `#[utoipa::path]` (see `http`;
//! served at `GET /openapi.json`, printed by `idgen openapi`, committed as
//! `docs/openapi.json`); `idgen decode --json` and `idgen layout --json` write two of them.
//!
//! Responses are these types, serialised: what the document says of a body is what the
//! handler sends. Request bodies and query strings are read by hand (`idgen_cli::input`),
//! for errors that say what is wrong: the handlers refuse any field or parameter but the
//! ones in the constants here (and `input::ID_PARAMETERS`), and the tests below hold the
//! document's names, limits and values to those constants.

use std::borrow::Cow;

use idgen::{Id, Layout, Ulid, Uuid7};
use serde::Serialize;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoParams, IntoResponses, PartialSchema, ToSchema};

use crate::fleet::FleetNumber;
use crate::kinds::Kind;
use crate::opaque::Form;
use crate::time;

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
    #[schema(value_type = Vec<AnyId>)]
    pub ids: Vec<String>,
}

/// The schema of an ID of any kind as text: one of the library's `Id`, `Uuid7` and `Ulid`
/// schemas (each a string with the pattern its parser reads), or an `OpaqueId`. Written
/// as plain strings; this type only describes them.
pub struct AnyId;

/// The schema of the ID a decoding names: as [`AnyId`], opaque IDs aside (their Snowflake
/// ID is named).
pub struct DecodedId;

/// The component name of an opaque ID's schema (its pattern follows the keys served).
pub const OPAQUE_ID_SCHEMA: &str = "OpaqueId";

fn one_of(names: &[Cow<'static, str>]) -> RefOr<Schema> {
    names
        .iter()
        .fold(OneOfBuilder::new(), |one_of, name| {
            one_of.item(Ref::from_schema_name(name.clone()))
        })
        .into()
}

fn library_schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((Id::name().into(), Id::schema()));
    schemas.push((Uuid7::name().into(), Uuid7::schema()));
    schemas.push((Ulid::name().into(), Ulid::schema()));
}

impl PartialSchema for AnyId {
    fn schema() -> RefOr<Schema> {
        one_of(&[
            Id::name(),
            Uuid7::name(),
            Ulid::name(),
            OPAQUE_ID_SCHEMA.into(),
        ])
    }
}

impl ToSchema for AnyId {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        library_schemas(schemas);
        let opaque = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(format!("^(?:{})$", crate::patterns::opaque_id(None))))
            .description(Some(
                "An opaque public ID: `o`, the key number, `_`, and 11 characters of base62.",
            ))
            .into();
        schemas.push((OPAQUE_ID_SCHEMA.to_string(), opaque));
    }
}

impl PartialSchema for DecodedId {
    fn schema() -> RefOr<Schema> {
        one_of(&[Id::name(), Uuid7::name(), Ulid::name()])
    }
}

impl ToSchema for DecodedId {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        library_schemas(schemas);
    }
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
    #[schema(value_type = DecodedId)]
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

impl Decoded {
    /// What a Snowflake ID says, as `layout` reads it.
    pub fn snowflake(layout: &Layout, id: Id) -> Decoded {
        let parts = layout.decode(id);
        Decoded {
            id: id.to_string(),
            kind: Kind::Snowflake,
            created_at: time::rfc3339_ms(parts.unix_ms),
            datacenter: Some(parts.datacenter),
            worker: Some(parts.worker),
            sequence: Some(parts.sequence),
            opaque: None,
        }
    }

    /// What there is to say of a UUIDv7 or a ULID: its canonical text, kind and time.
    pub fn counted(id: &impl std::fmt::Display, kind: Kind, unix_ms: u64) -> Decoded {
        Decoded {
            id: id.to_string(),
            kind,
            created_at: time::rfc3339_ms(unix_ms),
            datacenter: None,
            worker: None,
            sequence: None,
            opaque: None,
        }
    }
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

impl LayoutInfo {
    /// The JSON form of a layout's arithmetic: `idgen layout --json`, `GET /v1/layout` and
    /// the lease API's terms.
    pub fn of(layout: &Layout) -> LayoutInfo {
        LayoutInfo {
            time_bits: layout.time_bits(),
            datacenter_bits: layout.datacenter_bits(),
            worker_bits: layout.worker_bits(),
            sequence_bits: layout.sequence_bits(),
            epoch: time::rfc3339_ms(layout.epoch_unix_ms()),
            lifetime_years: (layout.lifetime_years() * 10.0).round() / 10.0,
            last_instant: time::rfc3339_ms(layout.last_unix_ms()),
            datacenters: layout.datacenters(),
            workers_per_datacenter: layout.workers_per_datacenter(),
            nodes: layout.nodes(),
            ids_per_second_per_node: big_number(layout.ids_per_second_per_node()),
            cluster_ids_per_second: big_number(layout.cluster_ids_per_second()),
        }
    }
}

/// Exact as a JSON integer where it fits 64 bits (every realistic layout), else a float.
fn big_number(n: u128) -> serde_json::Value {
    u64::try_from(n).map_or_else(
        |_| serde_json::Value::from(n as f64),
        serde_json::Value::from,
    )
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

/// What the status page shows: this instance's lease, the IDs it handed out, and the fleet
/// of its store's range.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// This instant on the service's clock, in Unix milliseconds: a rate is the change of
    /// `issued` between two answers over the change of this.
    pub now_ms: u64,
    /// `--id-space`.
    pub id_space: String,
    /// The layout's widths and epoch, `time.datacenter.worker.sequence@epoch`.
    pub layout: String,
    /// The lease store (no password).
    pub store: String,
    /// This instance's lease, as `/healthz` reports it.
    pub lease: Health,
    /// IDs handed out over HTTP since the start, by kind.
    pub issued: IssuedByKind,
    pub fleet: FleetStatus,
}

/// IDs handed out over HTTP since the start, by kind.
#[derive(Serialize, ToSchema)]
pub struct IssuedByKind {
    pub snowflake: u64,
    pub uuidv7: u64,
    pub ulid: u64,
}

/// The store's worker numbers of this service's range, from a survey at most 2 s old
/// (every request shares it; none surveys the store itself).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    /// When the survey shown was made, in Unix milliseconds; null until one succeeds.
    #[schema(required = true)]
    pub surveyed_at_ms: Option<u64>,
    /// Whether holder names (and the store's words on an anomaly) are shown: only to a
    /// request with the lease API's token, or by a service started with
    /// `--status-shows-holders`.
    pub holders_shown: bool,
    pub numbers: Vec<FleetNumber>,
    /// Why the latest survey failed, or that one has been under way for long (`numbers`
    /// are then the last good ones).
    #[schema(required = true)]
    pub error: Option<String>,
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

/// The IDs made in a span of time `[from, to)` by the time embedded in them (which a
/// generator borrowing milliseconds ahead, or a skewed clock, may set apart from the wall
/// clock): for range queries and cursors.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"kind": "snowflake", "from": "2026-01-01T00:00:00.000Z",
    "to": "2026-01-02T00:00:00.000Z", "start": "264905529753600000",
    "end": "265267917619200000",
    "where": "WHERE id >= 264905529753600000 AND id < 265267917619200000"}))]
pub struct Bounds {
    pub kind: Kind,
    /// The span's start (RFC 3339, UTC): IDs made at or after it are inside.
    pub from: String,
    /// The span's end (RFC 3339, UTC): IDs made before it are inside.
    pub to: String,
    /// The first ID that can be made at `from` (for a Snowflake ID, at the layout's epoch
    /// if `from` is before it): the inclusive bound.
    pub start: String,
    /// The first ID that can be made at `to`: the exclusive bound. Absent when `to` lies
    /// past the last millisecond the kind can hold (every later ID is inside).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub end: Option<String>,
    /// Present when the span holds no ID, saying why (`to` is not after `from`, or no such
    /// ID can be made then): `end` is then at or below `start`, and `where` is
    /// `WHERE false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub nothing: Option<String>,
    /// A ready PostgreSQL condition on a column `id` (`bigint` for Snowflake IDs, `uuid`
    /// for UUIDv7s, the 26-character upper-case text for ULIDs, in a `COLLATE "C"` column).
    #[serde(rename = "where")]
    pub where_clause: String,
}

/// The parameters `GET /v1/bounds` takes.
pub const BOUNDS_PARAMETERS: [&str; 3] = ["from", "to", "kind"];

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
        /// Default `plain`; `opaque` (with `--opaque-key-file`) is for Snowflake IDs only.
        #[schema(nullable = false)]
        pub form: Option<Form>,
    }

    /// `GET /v1/ids`: the count once; no other parameter. (`n=N` is read as `count=N`, for
    /// older clients, but not both; the document names `count` alone, since OpenAPI cannot
    /// say "one of two".)
    #[derive(IntoParams)]
    #[into_params(parameter_in = Query)]
    pub struct IdsQuery {
        /// How many; at most `--max-batch` (default 10,000).
        #[param(minimum = 1)]
        pub count: u64,
        /// Default `snowflake`.
        #[param(nullable = false)]
        pub kind: Option<Kind>,
        /// Default `plain`; `opaque` (with `--opaque-key-file`) is for Snowflake IDs only.
        #[param(nullable = false)]
        pub form: Option<Form>,
    }

    /// `GET /v1/bounds`: a span of time, and the kind. No other parameter.
    #[derive(IntoParams)]
    #[into_params(parameter_in = Query)]
    pub struct BoundsQuery {
        /// The span's start: RFC 3339 in UTC (`2026-01-01T00:00:00Z`, up to 3 digits of
        /// fraction) or Unix milliseconds.
        #[param(min_length = 1)]
        pub from: String,
        /// The span's end, after `from`, in the same forms.
        #[param(min_length = 1)]
        pub to: String,
        /// Default `snowflake`. Opaque IDs show no time: they have no bounds.
        #[param(nullable = false)]
        pub kind: Option<Kind>,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;
    use crate::kinds::KINDS;

    fn document() -> Value {
        serde_json::from_str(&crate::http::document_text()).unwrap()
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
    fn the_bounds_example_is_what_the_service_answers() {
        let document = document();
        let example = &document["components"]["schemas"]["Bounds"]["example"];
        let from = crate::time::parse_rfc3339_ms(example["from"].as_str().unwrap()).unwrap();
        let to = crate::time::parse_rfc3339_ms(example["to"].as_str().unwrap()).unwrap();
        let answer = crate::bounds::bounds(Kind::Snowflake, &Layout::DEFAULT, from, to);
        assert_eq!(&serde_json::to_value(answer).unwrap(), example);
    }

    #[test]
    fn the_documented_query_parameters_are_the_ones_the_handlers_take() {
        let document = document();
        let names = |path: &str| -> Vec<String> {
            document["paths"][path]["get"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|parameter| parameter["name"].as_str().unwrap().to_string())
                .collect()
        };
        // All but `n`, the undocumented alias of `count`.
        let taken: Vec<&str> = idgen_cli::input::ID_PARAMETERS
            .into_iter()
            .filter(|name| *name != "n")
            .collect();
        assert_eq!(names("/v1/ids"), taken);
        assert_eq!(names("/v1/bounds"), BOUNDS_PARAMETERS);
    }

    #[test]
    fn the_documented_limits_are_the_ones_the_handlers_apply() {
        let document = document();
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["LeaseRequest"]["properties"]["holder"]["maxLength"],
            crate::http::lease_api::bodies::MAX_HOLDER_CHARS
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
        let lease_id = crate::http::lease_api::new_lease_id();
        assert_eq!(lease_id.len(), 32);
        assert!(
            lease_id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        let refusals = &document["paths"]["/v1/ids"]["post"]["responses"];
        let timeout = format!("{} s", crate::http::plumbing::BODY_READ_TIMEOUT.as_secs());
        assert!(
            refusals["408"]["description"]
                .as_str()
                .unwrap()
                .contains(&timeout)
        );
        let size = format!("{} KiB", crate::http::plumbing::MAX_BODY_BYTES / 1024);
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
        let slots = format!(
            "{} slots",
            crate::http::lease_api::store_calls::MAX_STORE_CALLS
        );
        let wait = format!(
            "{} s",
            crate::http::lease_api::store_calls::STORE_CALL_WAIT.as_secs()
        );
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
