//! `POST /v1/sequences/{name}/next` and `idgen seq next`: dense, increasing values as
//! decimal strings, the same input rules as `/v1/ids`, a clean restart without a gap, and
//! PostgreSQL behind the same endpoint.

mod common;

use common::{Service, idgen, new_lease_dir, temp_dir};

/// The values of a 200 reply, checked to be strings holding canonical decimals.
fn values(reply: &common::Reply) -> Vec<u64> {
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.json()["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|value| {
            let text = value.as_str().expect("values travel as strings");
            let parsed: u64 = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text, "canonical decimal");
            parsed
        })
        .collect()
}

#[test]
fn values_are_dense_increasing_strings_and_a_clean_restart_leaves_no_gap() {
    let lease_dir = new_lease_dir("seq-restart");
    let declared = ["--sequences", "orders,invoices-eu_2"];
    let service = Service::start(&lease_dir, &declared);
    assert_eq!(
        values(&service.post_json("/v1/sequences/orders/next", r#"{"count": 3}"#)),
        vec![1, 2, 3]
    );
    assert_eq!(
        values(&service.post_json("/v1/sequences/orders/next", r#"{"count": 2}"#)),
        vec![4, 5]
    );
    // Another sequence starts at 1 of its own.
    assert_eq!(
        values(&service.post_json("/v1/sequences/invoices-eu_2/next", r#"{"count": 1}"#)),
        vec![1]
    );
    let metrics = service.get("/metrics").body;
    assert!(
        metrics.contains("idgen_sequence_values_issued_total 6"),
        "{metrics}"
    );
    assert!(service.terminate().success());
    // SIGTERM closed the allocators: the unused values went back.
    let service = Service::start(&lease_dir, &declared);
    assert_eq!(
        values(&service.post_json("/v1/sequences/orders/next", r#"{"count": 2}"#)),
        vec![6, 7]
    );
    assert!(service.terminate().success());
    // The operator's command takes exactly what it asks for, from the same store.
    let blocks_dir = lease_dir.with_file_name("blocks");
    let (status, out, err) = idgen(&[
        "seq",
        "next",
        "orders",
        "-n",
        "3",
        "--blocks-dir",
        blocks_dir.to_str().unwrap(),
        "--sequences",
        "orders",
    ]);
    assert!(status.success(), "{err}");
    assert_eq!(out, "8\n9\n10\n");
}

#[test]
fn bad_names_counts_and_bodies_are_400s() {
    let service = Service::start(
        &new_lease_dir("seq-bad"),
        &["--max-batch", "100", "--create-sequences"],
    );
    for name in ["Orders", "a.b", "a%2Fb", "%C3%A9", "a%20b", &"x".repeat(65)] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(reply.status, 400, "{name}: {:?}", reply.body);
        assert!(reply.error().contains("sequence name"), "{}", reply.error());
    }
    assert_eq!(
        values(&service.post_json(
            &format!("/v1/sequences/{}/next", "x".repeat(64)),
            r#"{"count": 1}"#
        )),
        vec![1]
    );
    for body in [
        r#"{}"#,
        r#"{"count": 0}"#,
        r#"{"count": -1}"#,
        r#"{"count": "5"}"#,
        r#"{"count": 1.5}"#,
        r#"{"count": 101}"#,
        r#"{"count": 1, "kind": "ulid"}"#,
        r#"[1]"#,
        r#"{"count": 1"#,
    ] {
        let reply = service.post_json("/v1/sequences/orders/next", body);
        assert_eq!(reply.status, 400, "{body}: {:?}", reply.body);
    }
    let reply = service.post_json("/v1/sequences/orders/next?count=1", r#"{"count": 1}"#);
    assert_eq!(reply.status, 400);
    let reply = service.request("POST", "/v1/sequences/orders/next", &[], br#"{"count": 1}"#);
    assert_eq!(reply.status, 415);
    assert_eq!(service.get("/v1/sequences/orders/next").status, 405);
    assert_eq!(service.post_json("/v1/sequences/orders", "{}").status, 404);
    // Nothing refused took a value.
    assert_eq!(
        values(&service.post_json("/v1/sequences/orders/next", r#"{"count": 100}"#)),
        (1..=100).collect::<Vec<_>>()
    );
}

#[test]
fn a_service_caps_the_number_of_sequences() {
    let service = Service::start(
        &new_lease_dir("seq-cap"),
        &["--max-sequences", "2", "--create-sequences"],
    );
    for name in ["a", "b"] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(values(&reply), vec![1]);
    }
    let reply = service.post_json("/v1/sequences/c/next", r#"{"count": 1}"#);
    assert_eq!(reply.status, 503);
    assert!(
        reply.error().contains("--max-sequences"),
        "{}",
        reply.error()
    );
    assert_eq!(
        values(&service.post_json("/v1/sequences/a/next", r#"{"count": 1}"#)),
        vec![2]
    );
}

#[test]
fn the_seq_command_refuses_bad_input_with_exit_2() {
    let dir = temp_dir("seq-cli");
    let dir = dir.to_str().unwrap();
    for args in [
        vec!["seq", "next", "Orders", "--blocks-dir", dir],
        vec!["seq", "next", "orders", "-n", "0", "--blocks-dir", dir],
        vec![
            "seq",
            "next",
            "orders",
            "-n",
            "1000001",
            "--blocks-dir",
            dir,
        ],
        vec!["seq", "next", "orders", "-n", "-3", "--blocks-dir", dir],
    ] {
        let (status, out, _) = idgen(&args);
        assert_eq!(status.code(), Some(2), "{args:?}");
        assert!(out.is_empty());
    }
    let (status, _, err) = idgen(&[
        "seq",
        "next",
        "orders",
        "--blocks-dir",
        dir,
        "--postgres",
        "postgresql://x@127.0.0.1/x",
    ]);
    assert_eq!(status.code(), Some(2), "{err}");
    let (status, out, err) = idgen(&[
        "seq",
        "next",
        "orders",
        "-n",
        "2",
        "--blocks-dir",
        dir,
        "--sequences",
        "orders",
    ]);
    assert!(status.success(), "{err}");
    assert_eq!(out, "1\n2\n");
}

#[test]
fn postgres_behind_the_same_endpoint_and_the_end_of_the_range_is_a_409() {
    let url = std::env::var("IDGEN_POSTGRES_URL").expect(
        "IDGEN_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL",
    );
    // Names of their own in the shared table: pids come round again on a busy host.
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    let name = format!("cli-pg-{unique}");
    let pg_service = |test: &str| {
        let lease_dir = new_lease_dir(test);
        Service::start_with(&[
            "--lease-dir",
            lease_dir.to_str().unwrap(),
            "--postgres",
            &url,
            "--create-sequences",
        ])
    };
    let service = pg_service("seq-pg");
    let path = format!("/v1/sequences/{name}/next");
    assert_eq!(
        values(&service.post_json(&path, r#"{"count": 4}"#)),
        vec![1, 2, 3, 4]
    );
    // Another process (the operator's command) shares the sequence: no value twice.
    let (status, out, err) = idgen(&[
        "seq",
        "next",
        &name,
        "-n",
        "2",
        "--postgres",
        &url,
        "--sequences",
        &name,
    ]);
    assert!(status.success(), "{err}");
    let theirs: Vec<u64> = out.lines().map(|line| line.parse().unwrap()).collect();
    assert!(theirs.iter().all(|v| *v > 4), "{theirs:?}");
    drop(service);
    // The end of the range.
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let end_name = format!("cli-pg-end-{unique}");
    client
        .execute(
            "INSERT INTO idgen_sequences (name, last_value, serial, block_size) \
             VALUES ($1, 9223372036854775806, 1, 1)",
            &[&end_name],
        )
        .unwrap();
    let service = pg_service("seq-pg-end");
    let path = format!("/v1/sequences/{end_name}/next");
    assert_eq!(
        values(&service.post_json(&path, r#"{"count": 1}"#)),
        vec![i64::MAX as u64]
    );
    let reply = service.post_json(&path, r#"{"count": 1}"#);
    assert_eq!(reply.status, 409, "{:?}", reply.body);
    assert!(
        reply.error().contains("no values left"),
        "{}",
        reply.error()
    );
}

#[test]
fn a_damaged_store_is_a_503_and_a_name_that_is_not_utf8_a_json_400() {
    let lease_dir = new_lease_dir("seq-damaged");
    let blocks_dir = lease_dir.with_file_name("blocks");
    std::fs::create_dir_all(blocks_dir.join("orders")).unwrap();
    std::fs::write(blocks_dir.join("orders/next"), "not a record").unwrap();
    let service = Service::start(&lease_dir, &["--sequences", "orders,invoices"]);
    let reply = service.post_json("/v1/sequences/orders/next", r#"{"count": 1}"#);
    assert_eq!(reply.status, 503, "{:?}", reply.body);
    assert!(
        reply.error().contains("not a block record"),
        "{}",
        reply.error()
    );
    let reply = service.post_json("/v1/sequences/%FF/next", r#"{"count": 1}"#);
    assert_eq!(reply.status, 400, "{:?}", reply.body);
    assert!(reply.error().contains("sequence name"), "{}", reply.error());
    // Another sequence is served all the same.
    assert_eq!(
        values(&service.post_json("/v1/sequences/invoices/next", r#"{"count": 1}"#)),
        vec![1]
    );
}

#[test]
fn without_a_usable_default_store_ids_are_served_and_sequences_say_why_not() {
    let lease_dir = new_lease_dir("seq-no-store");
    // XDG_STATE_HOME names a file: the default blocks directory cannot be made.
    let not_a_dir = lease_dir.with_file_name("state-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let service = Service::start_in(
        common::idgen_command()
            .args(["serve", "--listen", "127.0.0.1:0", "--sequences", "orders"])
            .arg("--lease-dir")
            .arg(&lease_dir)
            .env("XDG_STATE_HOME", &not_a_dir),
    );
    assert_eq!(
        service.post_json("/v1/ids", r#"{"count": 2}"#).ids().len(),
        2
    );
    let reply = service.post_json("/v1/sequences/orders/next", r#"{"count": 1}"#);
    assert_eq!(reply.status, 503, "{:?}", reply.body);
    assert!(
        reply.error().contains("no block store"),
        "{}",
        reply.error()
    );
    // The operator's command does not make a store of its own either.
    let (status, out, err) = common::idgen_with_env(
        &["seq", "next", "orders", "--sequences", "orders"],
        &[("XDG_STATE_HOME", &not_a_dir)],
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(out.is_empty());
    let (_, _, err) = idgen(&["serve", "--max-sequences", "0"]);
    assert!(err.contains("--max-sequences must be at least 1"), "{err}");
}

#[test]
fn a_sequence_named_roster_is_served_and_stops_no_other() {
    // Issue 24: on a fresh blocks directory, `roster` took the place of the store's roster
    // file, and every other sequence was a 503 from then on, across restarts.
    let lease_dir = new_lease_dir("seq-roster");
    // Any name a client sends, as a service that creates sequences on first use takes it.
    let service = Service::start(&lease_dir, &["--create-sequences"]);
    for name in ["roster", "orders"] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(values(&reply), vec![1], "{name}");
    }
    assert!(service.terminate().success());
    let service = Service::start(&lease_dir, &["--create-sequences"]);
    assert_eq!(
        values(&service.post_json("/v1/sequences/invoices/next", r#"{"count": 1}"#)),
        vec![1]
    );
    // The clean stop gave the unused values back: both go on from 2.
    for name in ["roster", "orders"] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(values(&reply), vec![2], "{name}");
    }
}

#[test]
fn only_declared_sequences_are_served_and_an_undeclared_name_is_a_404_that_says_how() {
    let lease_dir = new_lease_dir("seq-declared");
    let blocks_dir = lease_dir.with_file_name("blocks");
    let list = lease_dir.with_file_name("sequences");
    std::fs::write(&list, "# the operator's list\ninvoices\n\n  refunds  \n").unwrap();
    let service = Service::start(
        &lease_dir,
        &[
            "--sequences",
            "orders",
            "--sequences-file",
            list.to_str().unwrap(),
        ],
    );
    for name in ["orders", "invoices", "refunds"] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(values(&reply), vec![1], "{name}");
    }
    // Undeclared: a 404 naming the ways to declare it, and nothing made for it: no
    // allocator (the metric), no directory in the store.
    for name in ["payments", "roster", "x"] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(reply.status, 404, "{name}: {}", reply.body);
        let error = reply.error();
        assert!(
            error.contains("not declared")
                && error.contains("--sequences")
                && error.contains("--create-sequences"),
            "{error}"
        );
        assert!(!blocks_dir.join(name).exists(), "{name}");
    }
    let metrics = service.get("/metrics").body;
    assert!(metrics.contains("idgen_sequences 3\n"), "{metrics}");
    // The served document names exactly the declared sequences.
    let document: serde_json::Value = service.get("/openapi.json").json();
    let parameters = &document["paths"]["/v1/sequences/{name}/next"]["post"]["parameters"];
    let name = parameters
        .as_array()
        .unwrap()
        .iter()
        .find(|parameter| parameter["name"] == "name")
        .unwrap();
    assert_eq!(
        name["schema"]["enum"],
        serde_json::json!(["invoices", "orders", "refunds"])
    );
    assert!(document["paths"]["/v1/sequences/{name}/next"]["post"]["responses"]["404"].is_object());
    // The operator's command reads the same declarations.
    let blocks = blocks_dir.to_str().unwrap();
    let (status, out, err) = idgen(&["seq", "next", "payments", "--blocks-dir", blocks]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(out.is_empty() && err.contains("not declared"), "{err}");
    let (status, out, err) = idgen(&[
        "seq",
        "next",
        "refunds",
        "--blocks-dir",
        blocks,
        "--sequences-file",
        list.to_str().unwrap(),
    ]);
    assert!(status.success(), "{err}");
    assert!(out.trim().parse::<u64>().unwrap() > 1, "{out}");
}

#[test]
fn bad_declarations_are_refused_at_start_with_exit_2() {
    let dir = temp_dir("seq-bad-declared");
    let list = dir.join("sequences");
    std::fs::write(&list, "orders\nNot-A-Name\n").unwrap();
    let fifo = dir.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let lease_dir = dir.join("leases");
    let lease_dir = lease_dir.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--sequences", "orders,Bad"], "--sequences"),
        (&["--sequences-file", list.to_str().unwrap()], "line 2"),
        // A FIFO would block the start for ever if it were opened.
        (
            &["--sequences-file", fifo.to_str().unwrap()],
            "not a regular file",
        ),
        (
            &["--sequences", "a,b,c", "--max-sequences", "2"],
            "more than --max-sequences",
        ),
    ];
    for (flags, said) in cases {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--lease-dir", lease_dir];
        args.extend(flags);
        let (status, out, err) = idgen(&args);
        assert_eq!(status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(said), "{flags:?}: {err}");
        assert!(!out.contains("listening"), "{flags:?}: {out}");
    }
}

#[test]
fn a_sequence_whose_first_grant_fails_is_not_kept() {
    // A store that refuses every grant (the blocks directory is not writable: a file
    // stands where the sequence's directory would go, for each name tried).
    let lease_dir = new_lease_dir("seq-failed-grant");
    let blocks_dir = lease_dir.with_file_name("blocks");
    let service = Service::start(&lease_dir, &["--create-sequences", "--max-sequences", "2"]);
    for name in ["a", "b", "c", "d"] {
        std::fs::write(blocks_dir.join(name), "in the way").unwrap();
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(reply.status, 503, "{name}: {}", reply.body);
        // Never "serves at most 2 sequences": the failed names took no slot.
        assert!(
            !reply.error().contains("--max-sequences"),
            "{}",
            reply.error()
        );
    }
    let metrics = service.get("/metrics").body;
    assert!(metrics.contains("idgen_sequences 0\n"), "{metrics}");
    for name in ["e", "f"] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(values(&reply), vec![1], "{name}");
    }
}

#[test]
fn a_sequence_another_request_still_uses_is_not_closed_under_it() {
    // A store that refuses every grant of `broken` at once (a file where its directory
    // goes): each request waits out its allocator's 2 s, then gets a 503.
    let lease_dir = new_lease_dir("seq-shared-failure");
    let blocks_dir = lease_dir.with_file_name("blocks");
    let service = Service::start(&lease_dir, &["--sequences", "broken"]);
    std::fs::write(blocks_dir.join("broken"), "in the way").unwrap();
    let body = br#"{"count": 1}"#;
    let json = [("Content-Type", "application/json")];
    let first = service.send("POST", "/v1/sequences/broken/next", &json, body);
    service.wait_until_read("the first request", &[first.local_addr()]);
    // The second comes while the first waits: both use the one allocator.
    let second = service.send("POST", "/v1/sequences/broken/next", &json, body);
    for (which, reply) in [("first", first.reply()), ("second", second.reply())] {
        // A 503 (the store is away: retry), never a 500 "the allocator is closed", which
        // says the sequence stopped for good.
        assert_eq!(reply.status, 503, "{which}: {}", reply.body);
    }
    // The failures stay counted though the allocator is gone.
    let metrics = service.get("/metrics").body;
    assert!(metrics.contains("idgen_sequences 0\n"), "{metrics}");
    let failed = metrics
        .lines()
        .find_map(|line| line.strip_prefix("idgen_block_round_trips_failed_total "))
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(failed > 0, "{metrics}");
}

#[test]
fn declarations_forgive_spaces_empty_items_and_a_byte_order_mark() {
    let lease_dir = new_lease_dir("seq-lenient");
    let list = lease_dir.with_file_name("sequences");
    std::fs::write(&list, "\u{feff}refunds\n").unwrap();
    let service = Service::start(
        &lease_dir,
        &[
            "--sequences",
            " orders, invoices,",
            "--sequences-file",
            list.to_str().unwrap(),
        ],
    );
    for name in ["orders", "invoices", "refunds"] {
        let reply = service.post_json(&format!("/v1/sequences/{name}/next"), r#"{"count": 1}"#);
        assert_eq!(values(&reply), vec![1], "{name}");
    }
    // An undeclared name is a 404 whatever its body.
    let reply = service.post_json("/v1/sequences/payments/next", "not json");
    assert_eq!(reply.status, 404, "{}", reply.body);
}
