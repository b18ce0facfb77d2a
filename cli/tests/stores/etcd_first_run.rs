//! The etcd steps of the service manual (`docs/service.md`) for a newcomer, run as written
//! on a namespace no idgen ever used: `idgen leases init --new`, then `idgen serve`, which
//! takes a number and serves IDs at once. A namespace not declared new is taken to be
//! wiped: its marks are an outage horizon ahead.

use std::time::Instant;

use crate::common::{Service, etcd_endpoints as endpoints, idgen, unix_ms};
use crate::namespace;

/// The manual's commands for a new namespace, from the bullet that names that path, each
/// split into words (without the leading `idgen`), with `URL` and `NS` filled in.
fn manual_steps(url: &str, ns: &str) -> Vec<Vec<String>> {
    let manual =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/service.md"))
            .unwrap();
    let start = manual
        .find("- **A namespace no idgen ever used**")
        .expect("the etcd section of docs/service.md names the path for a new namespace");
    let bullet = &manual[start..];
    let bullet = &bullet[..bullet[2..].find("\n- ").map_or(bullet.len(), |end| end + 2)];
    let steps: Vec<Vec<String>> = bullet
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|code| code.starts_with("idgen "))
        .map(|code| {
            code.split_whitespace()
                .skip(1)
                .map(|word| word.replace("URL", url).replace("NS", ns))
                .collect()
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|step| step[0].as_str()).collect();
    assert_eq!(names, ["leases", "serve"], "{bullet}");
    steps
}

#[test]
fn the_manual_steps_on_a_new_namespace_serve_ids_at_once() {
    let (url, ns) = (endpoints(), namespace("manual-new"));
    let steps = manual_steps(&url, &ns);
    let init: Vec<&str> = steps[0].iter().map(String::as_str).collect();
    let (status, stdout, stderr) = idgen(&init);
    assert!(status.success(), "{init:?}: {stdout}{stderr}");
    assert!(stdout.contains("ready at once"), "{stdout}");
    // `serve` as written, on a port of its own and with blocks beside the test's files.
    let blocks = crate::common::temp_dir("manual-new").join("blocks");
    let mut serve: Vec<&str> = steps[1][1..].iter().map(String::as_str).collect();
    serve.extend(["--blocks-dir", blocks.to_str().unwrap()]);
    let started = Instant::now();
    let service = Service::start_with(&serve);
    let reply = service.get("/v1/ids?count=3");
    assert_eq!(reply.status, 200, "{}", reply.body);
    println!(
        "the manual's steps: first IDs {:?} after serve started",
        started.elapsed()
    );
    // At once: the number's mark had passed, so the service never waited for it.
    let log = service.log();
    assert!(!log.contains("for its mark"), "{log}");
    let health = service.get("/healthz").json();
    assert_eq!(health["lease"], "Valid", "{health}");
}

/// `idgen leases init` (and `idgen leases`) on `ns` with a two-number layout.
fn leases(url: &str, ns: &str, extra: &[&str]) -> (bool, String) {
    let mut args = vec!["leases"];
    args.extend(extra);
    args.extend(["--etcd", url, "--namespace", ns]);
    args.extend(crate::common::TWO_NUMBERS);
    let (status, stdout, stderr) = idgen(&args);
    (status.success(), format!("{stdout}{stderr}"))
}

#[test]
fn a_namespace_not_declared_new_is_taken_to_be_wiped_and_new_is_refused_once_used() {
    let url = endpoints();
    // The plain init: every mark an outage horizon (3 minutes by default) ahead, and the
    // message names the path for a new namespace.
    let ns = namespace("maybe-wiped");
    let before = unix_ms();
    let (ok, said) = leases(&url, &ns, &["init"]);
    assert!(ok, "{said}");
    assert!(said.contains("idgen leases init --new"), "{said}");
    let (ok, fleet) = leases(&url, &ns, &["--json"]);
    assert!(ok, "{fleet}");
    let fleet: serde_json::Value = serde_json::from_str(&fleet).unwrap();
    for number in fleet.as_array().unwrap() {
        let mark = number["markMs"].as_u64().unwrap();
        assert!(mark >= before + 180_000, "{number}");
    }
    // `--new` on a namespace that holds keys is refused (exit 2), and changes nothing.
    let (ok, said) = leases(&url, &ns, &["init", "--new"]);
    assert!(!ok);
    assert!(
        said.contains("is not new") && said.contains("without --new"),
        "{said}"
    );
    let (_, again) = leases(&url, &ns, &["--json"]);
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    // The same marks and states (validForMs counts down, so it is left out).
    let marks = |fleet: &serde_json::Value| -> Vec<(serde_json::Value, serde_json::Value)> {
        fleet
            .as_array()
            .unwrap()
            .iter()
            .map(|number| (number["markMs"].clone(), number["state"].clone()))
            .collect()
    };
    assert_eq!(marks(&again), marks(&fleet));
    // A new namespace with `--new`: every mark already passed.
    let fresh = namespace("declared-new");
    let (ok, said) = leases(&url, &fresh, &["init", "--new"]);
    assert!(ok, "{said}");
    let (_, fleet) = leases(&url, &fresh, &["--json"]);
    let fleet: serde_json::Value = serde_json::from_str(&fleet).unwrap();
    let now = unix_ms();
    assert_eq!(fleet.as_array().unwrap().len(), 2, "{fleet}");
    for number in fleet.as_array().unwrap() {
        assert!(number["markMs"].as_u64().unwrap() < now, "{number}");
    }
    // Not with --after-restore, nor with --lease-dir.
    let (ok, said) = leases(&url, &fresh, &["init", "--new", "--after-restore"]);
    assert!(!ok && said.contains("cannot be used with"), "{said}");
    let dir = crate::common::temp_dir("init-new-dir");
    let (status, _, stderr) = idgen(&[
        "leases",
        "init",
        "--new",
        "--lease-dir",
        dir.join("leases").to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--new is for etcd"), "{stderr}");
}
