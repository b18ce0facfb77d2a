//! The service manual, `docs/service.md`, names every flag and variable that `idgen serve
//! --help` lists and every path of the OpenAPI document, so the manual cannot fall behind
//! the service.

mod common;

use std::collections::BTreeSet;

use common::idgen;
use serde_json::Value;

const MANUAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/service.md");
const OPENAPI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("cannot read {path}: {error}"))
}

/// Whether `text` holds `name` as a whole name: not followed by a character that `continues`
/// it, so `--sequences` is not found inside `--sequences-file`, nor `/v1/ids` inside
/// `/v1/ids/{id}/decode`.
fn names(text: &str, name: &str, continues: fn(char) -> bool) -> bool {
    text.match_indices(name)
        .any(|(at, _)| !text[at + name.len()..].starts_with(continues))
}

/// What may follow a flag's name within a longer flag.
fn continues_flag(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

/// What may follow a variable's name within a longer variable.
fn continues_variable(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// What may follow a path within a longer path.
fn continues_path(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/{}_-.".contains(c)
}

/// The long flags and the variables of `idgen serve --help`.
fn serve_help() -> (BTreeSet<String>, BTreeSet<String>) {
    let (status, help, stderr) = idgen(&["serve", "--help"]);
    assert!(status.success(), "idgen serve --help: {stderr}");
    // An option's line starts with its flags (`-h, --help`, `--listen <LISTEN>`); the lines
    // of its description do not start with a dash.
    let flags = help
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with("--") || line.starts_with("-h, "))
        .filter_map(|line| {
            line.split_whitespace()
                .find(|word| word.starts_with("--"))
                .map(|flag| flag.trim_end_matches(',').to_string())
        })
        .collect();
    // `[env: IDGEN_LISTEN=]`, or `[env: IDGEN_ETCD]` for a variable whose value is hidden.
    let variables = help
        .split("[env: ")
        .skip(1)
        .map(|rest| {
            let end = rest.find(['=', ']']).expect("[env: NAME=] or [env: NAME]");
            rest[..end].to_string()
        })
        .collect();
    (flags, variables)
}

/// The paths of the OpenAPI document, such as `/v1/sequences/{name}/next`.
fn openapi_paths() -> BTreeSet<String> {
    let document: Value = serde_json::from_str(&read(OPENAPI)).unwrap();
    document["paths"]
        .as_object()
        .expect("the OpenAPI document has paths")
        .keys()
        .cloned()
        .collect()
}

/// What the manual must name: a description, the names, and which characters may follow a
/// name without making it another (`--sequences` inside `--sequences-file`).
type Wanted<'a> = (&'static str, &'a BTreeSet<String>, fn(char) -> bool);

#[test]
fn the_service_manual_names_every_flag_variable_and_path() {
    let manual = read(MANUAL);
    let (flags, variables) = serve_help();
    let paths = openapi_paths();
    // What the parsing above finds, so a change of the help's format cannot pass unseen.
    assert!(flags.len() >= 20 && flags.contains("--listen"), "{flags:?}");
    assert!(
        variables.len() >= 20 && variables.contains("IDGEN_LISTEN"),
        "{variables:?}"
    );
    assert!(paths.contains("/v1/sequences/{name}/next"), "{paths:?}");

    let mut missing = Vec::new();
    let wanted: [Wanted; 3] = [
        ("flags (idgen serve --help)", &flags, continues_flag),
        (
            "variables (idgen serve --help)",
            &variables,
            continues_variable,
        ),
        ("paths (docs/openapi.json)", &paths, continues_path),
    ];
    for (what, all, continues) in wanted {
        let absent: Vec<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|name| !names(&manual, name, continues))
            .collect();
        if !absent.is_empty() {
            missing.push(format!("{what}: {}", absent.join(", ")));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/service.md does not name these; add them to it:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_name_inside_a_longer_one_does_not_count() {
    for (text, named) in [("`--sequences-file`", false), ("`--sequences NAME`", true)] {
        assert_eq!(names(text, "--sequences", continues_flag), named, "{text}");
    }
    for (text, named) in [("`IDGEN_ETCD_ENDPOINTS`", false), ("`IDGEN_ETCD`", true)] {
        assert_eq!(
            names(text, "IDGEN_ETCD", continues_variable),
            named,
            "{text}"
        );
    }
    for (text, named) in [("`/v1/ids/{id}/decode`", false), ("`GET /v1/ids`", true)] {
        assert_eq!(names(text, "/v1/ids", continues_path), named, "{text}");
    }
}
