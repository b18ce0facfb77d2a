//! The OpenAPI documents: the whole contract (`idgen openapi`, `docs/openapi.json`), and
//! what a service serves, the same shaped to what it has on; both naming exactly the
//! fields, parameters, values and routes the service takes. (schemathesis, in `cli/tests/contract/run`, checks the answers.)

mod common;

use std::collections::BTreeSet;

use common::{Service, idgen, new_lease_dir, temp_dir};
use regex::Regex;
use serde_json::Value;

const TOKEN: &str = "openapi-test-token";

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");

fn committed() -> String {
    std::fs::read_to_string(COMMITTED).unwrap()
}

/// A service with every optional part off but the stores a test needs.
fn plain(name: &str) -> Service {
    Service::start(&new_lease_dir(name), &[])
}

/// A service with the lease API and opaque IDs on.
fn configured(name: &str) -> Service {
    configured_with(name, &[])
}

/// [`configured`], with `extra` flags.
fn configured_with(name: &str, extra: &[&str]) -> Service {
    let dir = temp_dir(&format!("{name}-files"));
    let (token, keys) = (dir.join("token"), dir.join("keys"));
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::write(&keys, "1 00112233445566778899aabbccddeeff\n").unwrap();
    #[cfg(unix)]
    for file in [&token, &keys] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut flags = vec![
        "--lease-api-token-file",
        token.to_str().unwrap(),
        "--opaque-key-file",
        keys.to_str().unwrap(),
    ];
    flags.extend(extra);
    Service::start(&new_lease_dir(name), &flags)
}

fn document() -> Value {
    serde_json::from_str(&committed()).unwrap()
}

/// `document` as a service with the lease API off and no opaque key serves it, but for
/// the counts' maximum and the decode pattern, which the caller checks.
fn without_lease_api_and_opaque_ids(mut document: Value) -> Value {
    let paths = document["paths"].as_object_mut().unwrap();
    paths.retain(|path, _| !path.starts_with("/v1/generators"));
    // No token shows holder names there: the status takes none, and refuses none as wrong.
    let status = paths["/v1/status"]["get"].as_object_mut().unwrap();
    status.remove("security");
    status["responses"].as_object_mut().unwrap().remove("401");
    let tags = document["tags"].as_array_mut().unwrap();
    tags.retain(|tag| tag["name"] != "lease API");
    let components = document["components"].as_object_mut().unwrap();
    components.remove("securitySchemes");
    let schemas = components["schemas"].as_object_mut().unwrap();
    for body in ["LeaseRequest", "ReleaseRequest", "LeaseTerms"] {
        schemas.remove(body);
    }
    schemas["Form"]["enum"] = serde_json::json!(["plain"]);
    // No opaque ID is ever listed.
    schemas.remove("OpaqueId");
    schemas["AnyId"]["oneOf"]
        .as_array_mut()
        .unwrap()
        .retain(|kind| kind["$ref"] != "#/components/schemas/OpaqueId");
    document
}

/// The schema of the parameter `name` of `method` on `path`.
fn parameter<'d>(document: &'d mut Value, path: &str, method: &str, name: &str) -> &'d mut Value {
    document["paths"][path][method]["parameters"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|parameter| parameter["name"] == name)
        .map(|parameter| &mut parameter["schema"])
        .unwrap_or_else(|| panic!("no parameter {name} on {method} {path}"))
}

/// Sets every count's maximum in `document` to `max`.
fn with_counts_up_to(mut document: Value, max: u64) -> Value {
    parameter(&mut document, "/v1/ids", "get", "count")["maximum"] = max.into();
    for body in ["IdsRequest", "SequenceRequest"] {
        document["components"]["schemas"][body]["properties"]["count"]["maximum"] = max.into();
    }
    document
}

#[test]
fn idgen_openapi_prints_the_committed_whole_contract() {
    let (status, stdout, stderr) = idgen(&["openapi"]);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout == committed(),
        "docs/openapi.json is not what idgen openapi prints: \
         cargo run -- openapi > docs/openapi.json"
    );
    let document = document();
    assert_eq!(document["openapi"], "3.1.0");
    // Every part, at the default limits.
    assert!(document["paths"]["/v1/generators/lease"].is_object());
    assert_eq!(
        document["components"]["schemas"]["Form"]["enum"],
        serde_json::json!(["plain", "opaque"])
    );
    assert_eq!(
        document["components"]["schemas"]["IdsRequest"]["properties"]["count"]["maximum"],
        10_000
    );
}

#[test]
fn a_service_serves_the_whole_contract_shaped_to_what_it_has_on() {
    let mut whole = document();
    let decode_pattern = |document: &mut Value| -> String {
        parameter(document, "/v1/ids/{id}/decode", "get", "id")["pattern"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let any_key = decode_pattern(&mut whole);
    assert!(any_key.contains("o[1-9][0-9]{0,8}_"), "{any_key}");

    // A default service: no lease API, no opaque IDs.
    let mut served: Value = plain("openapi-default").get("/openapi.json").json();
    let no_opaque = decode_pattern(&mut served);
    let matches = |pattern: &str, text: &str| Regex::new(pattern).unwrap().is_match(text);
    assert!(matches(&any_key, "o1_00000000001") && !matches(&no_opaque, "o1_00000000001"));
    assert!(matches(&no_opaque, "385628494224322560"));
    *parameter(&mut served, "/v1/ids/{id}/decode", "get", "id") =
        parameter(&mut whole, "/v1/ids/{id}/decode", "get", "id").clone();
    assert_eq!(served, without_lease_api_and_opaque_ids(whole.clone()));

    // Every part on, a smaller batch, two sequences declared: the lease API is there, the
    // counts' maximum is 500, the names are an enum, opaque IDs are of key 1 only.
    let service = configured_with(
        "openapi-configured",
        &["--max-batch", "500", "--sequences", "orders,invoices"],
    );
    let mut served: Value = service.get("/openapi.json").json();
    let key_one = decode_pattern(&mut served);
    assert_eq!(key_one, any_key.replace("o[1-9][0-9]{0,8}_", "o(?:1)_"));
    *parameter(&mut served, "/v1/ids/{id}/decode", "get", "id") =
        parameter(&mut whole, "/v1/ids/{id}/decode", "get", "id").clone();
    let names = parameter(&mut served, "/v1/sequences/{name}/next", "post", "name")
        .as_object_mut()
        .unwrap()
        .remove("enum")
        .unwrap();
    assert_eq!(names, serde_json::json!(["invoices", "orders"]));
    // The ID lists' opaque IDs are of key 1 only, too.
    let opaque_ids = served["components"]["schemas"]["OpaqueId"]["pattern"].take();
    let opaque_ids = opaque_ids.as_str().unwrap().to_string();
    let any_opaque = whole["components"]["schemas"]["OpaqueId"]["pattern"]
        .as_str()
        .unwrap();
    assert_eq!(
        opaque_ids,
        any_opaque.replace("o[1-9][0-9]{0,8}_", "o(?:1)_")
    );
    served["components"]["schemas"]["OpaqueId"]["pattern"] = any_opaque.into();
    assert_eq!(served, with_counts_up_to(whole, 500));
    // What the document allows is taken: 500 IDs, opaque ones, and a count over it refused.
    assert_eq!(service.get("/v1/ids?count=500").ids().len(), 500);
    assert_eq!(service.get("/v1/ids?count=501").status, 400);
    let opaque = service.get("/v1/ids?count=1&form=opaque").json();
    let text = opaque["ids"][0].as_str().unwrap().to_string();
    assert!(
        matches(&key_one, &text) && !matches(&key_one, "o2_00000000001"),
        "{text}"
    );
    assert!(
        matches(&opaque_ids, &text),
        "{text} against the ID list's {opaque_ids}"
    );
    assert_eq!(service.get(&format!("/v1/ids/{text}/decode")).status, 200);
}

/// Every operation the document names, as (method, path).
fn operations(document: &Value) -> BTreeSet<(String, String)> {
    let mut operations = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            operations.insert((method.to_uppercase(), path.clone()));
        }
    }
    operations
}

#[test]
fn every_operation_in_the_document_is_routed_and_every_route_is_in_it() {
    let documented = operations(&document());
    let expected: BTreeSet<(String, String)> = [
        ("GET", "/v1/ids"),
        ("POST", "/v1/ids"),
        ("GET", "/v1/ids/{id}/decode"),
        ("GET", "/v1/bounds"),
        ("POST", "/v1/sequences/{name}/next"),
        ("GET", "/v1/layout"),
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/"),
        ("GET", "/status"),
        ("GET", "/status/page.js"),
        ("GET", "/status/page.css"),
        ("GET", "/v1/status"),
        ("POST", "/v1/generators/lease"),
        ("POST", "/v1/generators/{leaseId}/renew"),
        ("DELETE", "/v1/generators/{leaseId}"),
    ]
    .into_iter()
    .map(|(method, path)| (method.to_string(), path.to_string()))
    .collect();
    assert_eq!(documented, expected);
    // Each one reaches a handler: not the fallback's 404 nor a 405.
    let service = configured("openapi-routes");
    for (method, path) in &documented {
        let path = path
            .replace("{id}", "1")
            .replace("{name}", "orders")
            .replace("{leaseId}", "0123");
        let reply = service.request(method, &path, &[], b"");
        assert_ne!(reply.status, 405, "{method} {path}: {}", reply.body);
        if reply.status == 404 {
            assert!(
                !reply.body.contains("no such endpoint"),
                "{method} {path} is not routed"
            );
        }
    }
    // A method the document does not give a path is refused with 405.
    for (method, path) in [
        ("DELETE", "/v1/ids"),
        ("PUT", "/healthz"),
        ("HEAD", "/v1/ids"),
    ] {
        let reply = service.request(method, path, &[], b"");
        assert_eq!(reply.status, 405, "{method} {path}");
    }
}

/// The property names of the schema `name`.
fn properties(document: &Value, name: &str) -> BTreeSet<String> {
    document["components"]["schemas"][name]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no schema {name}"))
        .keys()
        .cloned()
        .collect()
}

#[test]
fn the_documented_body_fields_are_exactly_the_ones_the_service_takes() {
    let document = document();
    // The sequence the body test posts to is declared (another is a 404 whatever its body).
    let service = configured_with("openapi-fields", &["--sequences", "orders"]);
    let bearer = format!("Bearer {TOKEN}");
    let json = ("Content-Type", "application/json");
    let auth = ("Authorization", bearer.as_str());
    let cases = [
        ("IdsRequest", "POST", "/v1/ids", vec![json]),
        (
            "SequenceRequest",
            "POST",
            "/v1/sequences/orders/next",
            vec![json],
        ),
        (
            "LeaseRequest",
            "POST",
            "/v1/generators/lease",
            vec![json, auth],
        ),
        (
            "ReleaseRequest",
            "DELETE",
            &format!("/v1/generators/{}", "0".repeat(32)),
            vec![json, auth],
        ),
    ];
    for (schema, method, path, headers) in cases {
        let fields = properties(&document, schema);
        assert!(!fields.is_empty(), "{schema}");
        assert_eq!(
            document["components"]["schemas"][schema]["additionalProperties"],
            false
        );
        for field in &fields {
            // A documented field with a bad value: refused for its value, not its name.
            let body = format!(r#"{{"{field}": []}}"#);
            let reply = service.request(method, path, &headers, body.as_bytes());
            assert_eq!(reply.status, 400, "{schema}.{field}: {}", reply.body);
            assert!(!reply.error().contains("unknown field"), "{schema}.{field}");
        }
        let reply = service.request(method, path, &headers, br#"{"undocumented": 1}"#);
        assert_eq!(reply.status, 400, "{schema}: {}", reply.body);
        assert!(reply.error().contains("unknown field"), "{schema}");
    }
}

#[test]
fn the_documented_query_parameters_and_values_are_the_ones_the_service_takes() {
    let document = document();
    let parameters: BTreeSet<String> = document["paths"]["/v1/ids"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|parameter| parameter["name"].as_str().unwrap().to_string())
        .collect();
    // `n`, the alias of `count` older clients send, is read but not named: OpenAPI cannot
    // say "one of two".
    assert_eq!(
        parameters,
        ["count", "kind", "form"].map(String::from).into()
    );
    let service = configured("openapi-values");
    for parameter in ["count", "n"] {
        assert_eq!(
            service.get(&format!("/v1/ids?{parameter}=2")).ids().len(),
            2
        );
    }
    let values = |schema: &str| -> Vec<String> {
        document["components"]["schemas"][schema]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{schema} has no enum"))
            .iter()
            .map(|value| value.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(values("Kind"), ["snowflake", "uuidv7", "ulid"]);
    for kind in values("Kind") {
        let reply = service.get(&format!("/v1/ids?count=1&kind={kind}"));
        assert_eq!(reply.status, 200, "kind {kind}: {}", reply.body);
    }
    assert_eq!(values("Form"), ["plain", "opaque"]);
    for form in values("Form") {
        let reply = service.get(&format!("/v1/ids?count=1&form={form}"));
        assert_eq!(reply.status, 200, "form {form}: {}", reply.body);
    }
    let reply = service.get("/v1/ids?count=1&undocumented=1");
    assert!(
        reply.error().contains("unknown parameter"),
        "{}",
        reply.body
    );
}
