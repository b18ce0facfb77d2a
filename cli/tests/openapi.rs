//! The OpenAPI document: one document whatever the flags (but the declared sequences'
//! names), the same as `docs/openapi.json` and `idgen openapi`, and naming exactly the
//! fields, parameters, values and routes the service takes. (schemathesis, in `cli/tests/contract/run`, checks the answers.)

mod common;

use std::collections::BTreeSet;

use common::{Service, idgen, new_lease_dir, temp_dir};
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

#[test]
fn the_served_document_is_the_committed_one_whatever_the_flags() {
    let stale = "docs/openapi.json is not what the service serves: \
                 cargo run -- openapi > docs/openapi.json";
    for service in [plain("openapi-plain"), configured("openapi-configured")] {
        let reply = service.get("/openapi.json");
        assert_eq!(reply.status, 200);
        assert_eq!(reply.content_type, "application/json");
        assert!(reply.body == committed(), "{stale}");
    }
    let (status, stdout, stderr) = idgen(&["openapi"]);
    assert!(status.success(), "{stderr}");
    assert!(stdout == committed(), "idgen openapi: {stale}");
    assert_eq!(document()["openapi"], "3.1.0");
    // With sequences declared, the one difference: the sequence name is one of them.
    let service = Service::start(
        &new_lease_dir("openapi-declared"),
        &["--sequences", "orders,invoices"],
    );
    let mut served: Value = service.get("/openapi.json").json();
    let parameters = served["paths"]["/v1/sequences/{name}/next"]["post"]["parameters"]
        .as_array_mut()
        .unwrap();
    let name = parameters
        .iter_mut()
        .find(|parameter| parameter["name"] == "name")
        .unwrap();
    let names = name["schema"]
        .as_object_mut()
        .unwrap()
        .remove("enum")
        .unwrap();
    assert_eq!(names, serde_json::json!(["invoices", "orders"]));
    assert_eq!(served, document());
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
        ("POST", "/v1/sequences/{name}/next"),
        ("GET", "/v1/layout"),
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
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
    assert_eq!(
        parameters,
        ["count", "n", "kind", "form"].map(String::from).into()
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
