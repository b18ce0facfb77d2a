//! The status page (`/status`, `/`) and what it reads (`/v1/status`): holder names only with
//! the lease API's token or `--status-shows-holders`, one shared survey of the store however
//! many requests come, a content security policy; and the page itself in Debian's chromium
//! (`tests/browser/status_page.mjs`, through puppeteer-core and the browser's own
//! executable): loaded from a live service, its values read, an ID decoded through its box,
//! a hostile holder name shown as text and running nothing, no sideways scroll at 390 px,
//! and screenshots kept (`target/tmp/status-page/`).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{PATIENCE, Service, new_lease_dir, run, wait_until};

const TOKEN: &str = "st4tus-t0k3n";

/// The holder name a hostile lease API client gives.
const HOSTILE: &str = r#"<img src=x onerror="window.pwned=1;document.title='pwned'">"#;

/// A service on a new lease directory with the lease API on (`TOKEN`), TTLs long enough
/// that a number leased through the API stays held for the whole test.
fn service_with_lease_api(name: &str, extra: &[&str]) -> Service {
    let dir = new_lease_dir(name);
    let token = dir.with_file_name("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let mut args = vec![
        "--lease-api-token-file",
        token.to_str().unwrap(),
        "--lease-ttl",
        "60s",
    ];
    args.extend(extra);
    Service::start(&dir, &args)
}

/// Leases a number through the API as `holder`; its worker number.
fn lease_as(service: &Service, holder: &str) -> u64 {
    let body = serde_json::json!({ "holder": holder }).to_string();
    let leased = service.request(
        "POST",
        "/v1/generators/lease",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &format!("Bearer {TOKEN}")),
        ],
        body.as_bytes(),
    );
    assert_eq!(leased.status, 200, "{}", leased.body);
    leased.json()["worker"].as_u64().unwrap()
}

/// `/v1/status`, with these headers.
fn status(service: &Service, headers: &[(&str, &str)]) -> serde_json::Value {
    let reply = service.request("GET", "/v1/status", headers, b"");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("cache-control").as_deref(), Some("no-store"));
    reply.json()
}

/// The fleet's entry for `worker`, once a survey shows it held (the cache is at most a
/// couple of seconds old: waited for, bounded).
fn held_in_fleet(service: &Service, headers: &[(&str, &str)], worker: u64) -> serde_json::Value {
    let mut found = serde_json::Value::Null;
    wait_until("a survey showing the leased number held", PATIENCE, || {
        let status = status(service, headers);
        found = status["fleet"]["numbers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|number| number["worker"] == worker && number["state"] == "held")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        !found.is_null()
    });
    found
}

#[test]
fn holder_names_are_shown_only_with_the_lease_api_token() {
    let service = service_with_lease_api("status-token", &[]);
    let worker = lease_as(&service, HOSTILE);
    let bearer = format!("Bearer {TOKEN}");
    let with_token = [("Authorization", bearer.as_str())];

    let shown = held_in_fleet(&service, &with_token, worker);
    assert_eq!(shown["holder"], HOSTILE);
    assert_eq!(status(&service, &with_token)["fleet"]["holdersShown"], true);

    let hidden = held_in_fleet(&service, &[], worker);
    assert_eq!(hidden["holder"], serde_json::Value::Null);
    let anonymous = service.get("/v1/status");
    assert_eq!(anonymous.json()["fleet"]["holdersShown"], false);
    assert!(
        !anonymous.body.contains("onerror") && !anonymous.body.contains("idgen serve, pid"),
        "a holder's name reached a request without the token: {}",
        anonymous.body
    );

    // A token given is checked: a wrong one is refused, not ignored.
    let wrong = service.request(
        "GET",
        "/v1/status",
        &[("Authorization", "Bearer not-the-token")],
        b"",
    );
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert_eq!(wrong.error(), "the bearer token is wrong");
    let query = service.get("/v1/status?holders=1");
    assert_eq!(query.status, 400, "{}", query.body);
    assert_eq!(query.error(), "/v1/status takes no parameters");
}

#[test]
fn the_flag_shows_holder_names_to_every_viewer_and_no_token_works_without_the_api() {
    let dir = new_lease_dir("status-flag");
    let service = Service::start(&dir, &["--status-shows-holders"]);
    let own = held_in_fleet(&service, &[], service.worker);
    assert_eq!(
        own["holder"],
        format!("idgen serve, pid {}", service.child.id()),
        "{own}"
    );
    let with_token = service.request(
        "GET",
        "/v1/status",
        &[("Authorization", "Bearer anything")],
        b"",
    );
    assert_eq!(with_token.status, 404, "{}", with_token.body);
    assert!(
        with_token.error().contains("lease API is off"),
        "{}",
        with_token.body
    );
}

#[test]
fn the_status_reports_this_instances_lease_and_its_ids_by_kind() {
    let dir = new_lease_dir("status-values");
    let service = Service::start(&dir, &["--id-space", "status-test", "--workers", "3-5"]);
    for (kind, count) in [("snowflake", 12), ("uuidv7", 5), ("ulid", 2)] {
        let reply = service.post_json(
            "/v1/ids",
            &format!(r#"{{"count": {count}, "kind": "{kind}"}}"#),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    // The first survey may take longer than the second a request waits for it.
    wait_until("a first survey", PATIENCE, || {
        !status(&service, &[])["fleet"]["surveyedAtMs"].is_null()
    });
    let before = common::unix_ms();
    let status = status(&service, &[]);
    let after = common::unix_ms();
    assert!(
        (before..=after).contains(&status["nowMs"].as_u64().unwrap()),
        "{status}"
    );
    assert_eq!(status["idSpace"], "status-test");
    assert_eq!(status["layout"], "41.5.5.12@1704067200000");
    assert_eq!(status["lease"]["lease"], "Valid");
    assert_eq!(status["lease"]["worker"], service.worker);
    assert!((3..=5).contains(&service.worker));
    assert!(
        status["lease"]["validForMs"].as_u64().unwrap() > 0,
        "{status}"
    );
    assert_eq!(
        status["issued"],
        serde_json::json!({"snowflake": 12, "uuidv7": 5, "ulid": 2})
    );
    // The fleet is the service's range, and nothing else.
    let workers: Vec<u64> = status["fleet"]["numbers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|number| number["worker"].as_u64().unwrap())
        .collect();
    assert_eq!(workers, [3, 4, 5], "{status}");
}

#[test]
fn another_authorization_scheme_shows_no_name_and_refuses_nothing() {
    let service = service_with_lease_api("status-basic", &[]);
    // A proxy's Basic credentials, which a browser sends with every request of the page.
    let reply = service.request(
        "GET",
        "/v1/status",
        &[("Authorization", "Basic dXNlcjpw")],
        b"",
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["fleet"]["holdersShown"], false);
    let lower = service.request(
        "GET",
        "/v1/status",
        &[("Authorization", &format!("bearer {TOKEN}"))],
        b"",
    );
    assert_eq!(
        lower.json()["fleet"]["holdersShown"],
        true,
        "{}",
        lower.body
    );
    // Basic first, then the bearer token: the token counts.
    let both = service.request(
        "GET",
        "/v1/status",
        &[
            ("Authorization", "Basic dXNlcjpw"),
            ("Authorization", &format!("Bearer {TOKEN}")),
        ],
        b"",
    );
    assert_eq!(both.status, 200, "{}", both.body);
    assert_eq!(both.json()["fleet"]["holdersShown"], true, "{}", both.body);
}

#[test]
fn a_mark_within_the_fleets_own_horizon_is_no_anomaly() {
    // Marks are written a horizon ahead: 30 s here, ten times the store's default TTL.
    let dir = new_lease_dir("status-horizon");
    let service = Service::start(&dir, &["--lease-ttl", "2s", "--outage-horizon", "30s"]);
    let own = held_in_fleet(&service, &[], service.worker);
    assert!(own["validForMs"].as_i64().unwrap() > 20_000, "{own}");
    assert_eq!(own["anomalies"], serde_json::json!([]), "{own}");
}

#[test]
fn the_store_is_surveyed_at_most_once_per_two_seconds_however_many_requests() {
    let dir = new_lease_dir("status-cache");
    let service = Service::start(&dir, &[]);
    let started = Instant::now();
    let surveys: BTreeSet<u64> = (0..60)
        .filter_map(|_| status(&service, &[])["fleet"]["surveyedAtMs"].as_u64())
        .collect();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    // One at the first request, then one per two seconds at most (a survey started before
    // the first answer included).
    let most = 2 + elapsed_ms / 2_000;
    assert!(
        !surveys.is_empty() && surveys.len() as u64 <= most,
        "{} surveys in {elapsed_ms} ms of 60 requests (at most {most})",
        surveys.len()
    );
}

#[test]
fn the_page_and_its_files_are_served_under_a_policy_that_allows_only_their_own_script() {
    let dir = new_lease_dir("status-files");
    let service = Service::start(&dir, &[]);
    for path in ["/", "/status"] {
        let page = service.get(path);
        assert_eq!(page.status, 200);
        assert_eq!(page.content_type, "text/html; charset=utf-8");
        let policy = page.header("content-security-policy").unwrap();
        assert!(policy.contains("default-src 'none'"), "{policy}");
        assert!(policy.contains("script-src 'self'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert!(
            page.body
                .contains(r#"<script src="/status/page.js" defer></script>"#)
        );
        // Nothing inline that the policy would have to allow.
        assert_eq!(page.body.matches("<script").count(), 1);
        assert!(!page.body.contains("style=") && !page.body.contains("<style"));
        assert!(!page.body.contains("http://") && !page.body.contains("https://"));
    }
    for (path, content_type) in [
        ("/status/page.js", "text/javascript; charset=utf-8"),
        ("/status/page.css", "text/css; charset=utf-8"),
    ] {
        let file = service.get(path);
        assert_eq!(file.status, 200, "{path}");
        assert_eq!(file.content_type, content_type, "{path}");
        assert_eq!(
            file.header("x-content-type-options").as_deref(),
            Some("nosniff")
        );
        assert!(!file.body.contains("innerHTML"), "{path} writes markup");
    }
}

/// The puppeteer-core install of `tests/browser` (the test command runs `npm ci` there).
fn browser_driver_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    assert!(
        dir.join("node_modules/puppeteer-core").is_dir(),
        "{}: puppeteer-core is not installed; run `npm ci` there (the test command does)",
        dir.display()
    );
    dir
}

#[test]
fn a_browser_shows_the_status_decodes_an_id_and_runs_no_holder_name() {
    let driver = browser_driver_dir();
    let chromium = std::env::var("IDGEN_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium}: no chromium (Debian's package; the test command installs it)"
    );
    let service = service_with_lease_api("status-browser", &["--workers", "0-3"]);
    let hostile_worker = lease_as(&service, HOSTILE);
    // A long name without a space: it must wrap, not widen the page.
    lease_as(&service, &"w".repeat(128));
    let screenshots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page");
    std::fs::create_dir_all(&screenshots).unwrap();
    let base = format!("http://{}", service.address);
    let (status, stdout, stderr) = run(
        Command::new("node")
            .current_dir(&driver)
            .arg("status_page.mjs")
            .args([&base, TOKEN, &hostile_worker.to_string()])
            .arg(&screenshots)
            .env("IDGEN_CHROMIUM", &chromium),
        "node status_page.mjs",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    assert!(
        status.success(),
        "the browser run failed: {stderr}\n{stdout}"
    );
    let seen: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|error| panic!("not JSON ({error}): {stdout}"));

    assert_eq!(seen["status"], 200);
    // The one failed request the page made is the decode of text that is no ID (a 400).
    let problems = seen["problems"].as_array().unwrap();
    let unexpected: Vec<_> = problems
        .iter()
        .filter(|problem| {
            let problem = problem.as_str().unwrap();
            !(problem.contains("status of 400") && problem.contains("/v1/ids/%3Cb%3Enot"))
        })
        .collect();
    assert!(unexpected.is_empty() && problems.len() == 1, "{seen}");
    assert!(seen["csp"].as_str().unwrap().contains("script-src 'self'"));
    // Nothing came from anywhere but the service.
    assert_eq!(seen["origins"], serde_json::json!([base]), "{seen}");

    // This instance, as the page shows it.
    assert_eq!(seen["lease"], "Valid");
    assert_eq!(seen["worker"], service.worker.to_string());
    assert_eq!(seen["datacenter"], "0");
    assert!(
        seen["timeLeft"]
            .as_str()
            .unwrap()
            .ends_with("of issuing before the mark"),
        "{seen}"
    );
    assert_eq!(seen["outage"], "none");
    assert!(
        seen["identity"]
            .as_str()
            .unwrap()
            .contains("ID space default"),
        "{seen}"
    );

    // IDs issued while the page was open: totals and a rate, without a reload.
    assert_eq!(
        seen["totals"],
        serde_json::json!({"snowflake": "300", "uuidv7": "40", "ulid": "7"})
    );
    let rate: f64 = seen["rates"]["snowflake"]
        .as_str()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap();
    assert!(rate > 0.0, "{seen}");

    // The decode box: the ID's parts as the service reads them; bad input said as text.
    assert_eq!(seen["decoded"]["id"], seen["decodedId"]);
    assert_eq!(seen["decoded"]["kind"], "snowflake");
    assert_eq!(seen["decoded"]["worker"], service.worker.to_string());
    assert_eq!(seen["decoded"]["datacenter"], "0");
    assert!(
        seen["decoded"]["createdAt"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert!(
        seen["decodeError"]
            .as_str()
            .unwrap()
            .contains("<b>not an id</b>"),
        "{seen}"
    );
    assert_eq!(seen["decodeResultAfterError"], 0);

    // Holder names: hidden without the token; with it, the hostile one is its characters.
    assert_eq!(seen["holderWithoutToken"], "hidden");
    assert!(
        !seen["pageTextWithoutToken"]
            .as_str()
            .unwrap()
            .contains("onerror")
    );
    assert_eq!(seen["holderWithToken"], HOSTILE);
    assert_eq!(seen["imgElements"], 0);
    assert_eq!(seen["pwned"], serde_json::Value::Null);
    assert_eq!(seen["titleAfter"], seen["titleBefore"]);
    assert_eq!(seen["titleBefore"], "idgen status");

    // A phone: nothing wider than the screen, with the names shown.
    assert_eq!(seen["phone"]["innerWidth"], 390, "{seen}");
    assert_eq!(seen["phone"]["holder"], HOSTILE);
    assert!(
        seen["phone"]["scrollWidth"].as_u64().unwrap() <= 390,
        "{seen}"
    );
    assert!(
        seen["phone"]["bodyScrollWidth"].as_u64().unwrap() <= 390,
        "{seen}"
    );
    for screenshot in seen["screenshots"].as_array().unwrap() {
        let path = Path::new(screenshot.as_str().unwrap());
        let size = std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
        assert!(size > 10_000, "{}: {size} bytes", path.display());
    }
}
