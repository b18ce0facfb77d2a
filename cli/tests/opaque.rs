//! Opaque IDs through the command and the service: `idgen opaque encode|decode`, the key
//! file and its variable, `form=opaque` on `/v1/ids`, and opaque IDs at the decode
//! endpoint. No output, error or log line ever shows a key.

mod common;

use std::path::{Path, PathBuf};

use common::{Service, idgen, idgen_with_env, new_lease_dir, temp_dir};

const NEW_KEY: &str = "9c0d4e1f2a3b5c6d7e8f90a1b2c3d4e5";
const OLD_KEY: &str = "5e6f708192a3b4c5d6e7f8091a2b3c4d";

/// A key file with `text`, private to its owner unless `mode` says otherwise.
fn key_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn assert_no_key_in(text: &str) {
    for key in [NEW_KEY, OLD_KEY] {
        for piece in key.as_bytes().chunks(8) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(
                !text.to_lowercase().contains(piece),
                "a key shows in: {text}"
            );
        }
    }
}

/// `idgen_ids_issued_total` from the service's metrics.
fn issued_total(service: &Service) -> u64 {
    let metrics = service.get("/metrics").body;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("idgen_ids_issued_total "))
        .unwrap_or_else(|| panic!("no idgen_ids_issued_total in {metrics}"))
        .trim()
        .parse()
        .unwrap()
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

#[test]
fn encode_then_decode_gives_the_ids_back_and_old_keys_still_decode() {
    let dir = temp_dir("opaque-cli");
    let old = key_file(&dir, "old", &format!("{OLD_KEY}\n"), 0o600);
    let rotated = key_file(
        &dir,
        "rotated",
        &format!("2 {NEW_KEY}\n1 {OLD_KEY}\n"),
        0o600,
    );
    let ids = [
        "0",
        "1",
        "385628494224322560",
        "0APG72A2R4W00",
        "9223372036854775807",
    ];
    let decimal = [
        "0",
        "1",
        "385628494224322560",
        "385628494224322560",
        "9223372036854775807",
    ];

    let mut args = vec!["opaque", "encode", "--key-file", old.to_str().unwrap()];
    args.extend(ids);
    let (status, stdout, stderr) = idgen(&args);
    assert!(status.success(), "{stderr}");
    let made_old = lines(&stdout);
    assert_eq!(made_old.len(), ids.len());
    assert!(
        made_old
            .iter()
            .all(|o| o.starts_with("o1_") && o.len() == 14),
        "{stdout}"
    );
    // Base32 and decimal of one ID give one opaque ID.
    assert_eq!(made_old[2], made_old[3]);

    // The variable names the key file when the flag does not.
    let env = [("IDGEN_OPAQUE_KEY_FILE", rotated.as_path())];
    let mut args = vec!["opaque", "encode"];
    args.extend(ids);
    let (status, stdout, stderr) = idgen_with_env(&args, &env);
    assert!(status.success(), "{stderr}");
    let made_new = lines(&stdout);
    assert!(made_new.iter().all(|o| o.starts_with("o2_")), "{stdout}");

    // The rotated file decodes both; the old one only its own.
    let mut args = vec!["opaque", "decode"];
    args.extend(made_new.iter().chain(&made_old).map(String::as_str));
    let (status, stdout, stderr) = idgen_with_env(&args, &env);
    assert!(status.success(), "{stderr}");
    let expected: Vec<&str> = decimal.iter().chain(&decimal).copied().collect();
    assert_eq!(lines(&stdout), expected);
    let (status, stdout, stderr) = idgen(&[
        "opaque",
        "decode",
        "--key-file",
        old.to_str().unwrap(),
        &made_new[0],
    ]);
    assert_eq!(status.code(), Some(2));
    assert!(stdout.is_empty());
    assert!(stderr.contains("key 2, which"), "{stderr}");
    assert_no_key_in(&stderr);

    // Known answers (an independent Speck64/128 in Python): what a key file's key makes is
    // fixed for good, since opaque IDs get published.
    let pinned = key_file(&dir, "pinned", "9c0d4e1f2a3b5c6d7e8f90a1b2c3d4e5\n", 0o600);
    let (status, stdout, stderr) = idgen(&[
        "opaque",
        "encode",
        "--key-file",
        pinned.to_str().unwrap(),
        "0",
        "385628494224322560",
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(lines(&stdout), ["o1_6tCFgd4pPoh", "o1_6XBA2AVqhX3"]);
}

#[test]
fn a_key_given_where_its_path_belongs_is_never_shown() {
    let env = [("IDGEN_OPAQUE_KEY_FILE", Path::new(NEW_KEY))];
    let (status, stdout, stderr) = idgen_with_env(&["opaque", "encode", "1"], &env);
    assert_eq!(status.code(), Some(2));
    assert!(stdout.is_empty());
    assert!(stderr.contains("looks like a key"), "{stderr}");
    assert_no_key_in(&stderr);
    let (status, _, stderr) = idgen(&["opaque", "decode", "--key-file", NEW_KEY, "o1_00000000000"]);
    assert_eq!(status.code(), Some(2));
    assert_no_key_in(&stderr);
    // --help shows the variable's name, not its value.
    for command in [&["serve", "--help"][..], &["opaque", "encode", "--help"]] {
        let (status, stdout, stderr) = idgen_with_env(command, &env);
        assert!(status.success(), "{stderr}");
        assert!(stdout.contains("IDGEN_OPAQUE_KEY_FILE"), "{stdout}");
        assert_no_key_in(&stdout);
    }
}

#[test]
fn a_fifo_as_key_file_is_refused_at_once_rather_than_waited_on() {
    let dir = temp_dir("opaque-fifo");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("keys");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut child = common::idgen_command()
        .args([
            "opaque",
            "encode",
            "--key-file",
            fifo.to_str().unwrap(),
            "1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Waiting on the FIFO would be for ever: the bound only ends the test.
    let deadline = std::time::Instant::now() + common::PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("idgen waited on the FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

#[test]
fn every_bad_input_is_listed_and_nothing_is_printed() {
    let dir = temp_dir("opaque-bad");
    let keys = key_file(&dir, "keys", &format!("{NEW_KEY}\n"), 0o600);
    let keys = keys.to_str().unwrap();
    let (status, stdout, stderr) = idgen(&[
        "opaque",
        "encode",
        "--key-file",
        keys,
        "17",
        "x",
        "9223372036854775808",
        "o1_00000000000",
        "018c3f6e-8d20-7a3b-9c4d-5e6f70819293",
        "18",
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    for bad in ["\"x\"", "9223372036854775808", "o1_00000000000", "018c3f6e"] {
        assert!(stderr.contains(bad), "{bad} not listed: {stderr}");
    }
    assert_eq!(stderr.lines().count(), 4, "{stderr}");

    let (status, stdout, stderr) = idgen(&[
        "opaque",
        "decode",
        "--key-file",
        keys,
        "o1_00000000000",
        "o1_AzL8n0Y58m8",
        "o9_00000000000",
        "385628494224322560",
        "o1_0000000000",
        "",
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(stderr.lines().count(), 5, "{stderr}");
    assert!(stderr.contains("2^63 or more"), "{stderr}");
    assert!(stderr.contains("key 9"), "{stderr}");
    assert_no_key_in(&stderr);
}

#[test]
fn a_missing_malformed_or_short_key_file_is_a_clear_error_and_a_loose_one_a_warning() {
    let dir = temp_dir("opaque-keys");
    let short = &NEW_KEY[..30];
    for (name, text, says) in [
        (
            "short",
            format!("{short}\n"),
            "line 1: the key has 30 hex digits; at least 32",
        ),
        (
            "fields",
            format!("1 {NEW_KEY} extra\n"),
            "line 1: a line is HEX or ID HEX",
        ),
        (
            "hex",
            format!("{}zz\n", &NEW_KEY[..30]),
            "character 31 is not one",
        ),
        (
            "twice",
            format!("{NEW_KEY}\n\n{OLD_KEY}\n"),
            "line 3: key number 1 is given twice",
        ),
        ("empty", "\n# nothing yet\n".to_string(), "no key"),
    ] {
        let path = key_file(&dir, name, &text, 0o600);
        let (status, stdout, stderr) = idgen(&[
            "opaque",
            "encode",
            "--key-file",
            path.to_str().unwrap(),
            "1",
        ]);
        assert_eq!(status.code(), Some(2), "{name}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(stderr.contains(path.to_str().unwrap()), "{name}: {stderr}");
        assert_no_key_in(&stderr);
    }
    let missing = dir.join("missing");
    let (status, _, stderr) = idgen(&[
        "opaque",
        "decode",
        "--key-file",
        missing.to_str().unwrap(),
        "o1_00000000000",
    ]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("No such file"), "{stderr}");
    let (status, _, stderr) = idgen(&[
        "opaque",
        "decode",
        "--key-file",
        dir.to_str().unwrap(),
        "o1_00000000000",
    ]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("not a regular file"), "{stderr}");
    // No key file at all: clap says which flag or variable is needed.
    let (status, _, stderr) = idgen(&["opaque", "encode", "1"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("--key-file"), "{stderr}");

    let loose = key_file(&dir, "loose", &format!("{NEW_KEY}\n"), 0o644);
    let (status, stdout, stderr) = idgen(&[
        "opaque",
        "encode",
        "--key-file",
        loose.to_str().unwrap(),
        "1",
    ]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.starts_with("o1_"));
    assert!(
        stderr.contains("warning") && stderr.contains("0644"),
        "{stderr}"
    );
    assert_no_key_in(&stderr);
}

#[test]
fn the_service_issues_opaque_ids_and_decodes_them_back() {
    let dir = new_lease_dir("opaque-serve");
    // Beside the lease directory, in the same fresh directory.
    let files = dir.parent().unwrap();
    let keys = key_file(files, "keys", &format!("4 {NEW_KEY}\n1 {OLD_KEY}\n"), 0o640);
    let service = Service::start(&dir, &["--opaque-key-file", keys.to_str().unwrap()]);
    let text = |reply: &common::Reply| -> Vec<String> {
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_str().unwrap().to_string())
            .collect()
    };
    let got = text(&service.get("/v1/ids?count=500&form=opaque"));
    let posted = text(&service.post_json("/v1/ids", r#"{"count": 3000, "form": "opaque"}"#));
    let plain = service.get("/v1/ids?count=2&form=plain").ids();
    let mut all = got.clone();
    all.extend(posted);
    assert_eq!(all.len(), 3_500);
    assert!(all.iter().all(|o| o.starts_with("o4_") && o.len() == 14));
    // Behind them: strictly increasing Snowflake IDs, all below the plain ones that came
    // after. In front: no order at all.
    let ids: Vec<u64> = all
        .iter()
        .map(|opaque| {
            let decoded = service.get(&format!("/v1/ids/{opaque}/decode"));
            assert_eq!(decoded.status, 200, "{}", decoded.body);
            let json = decoded.json();
            assert_eq!(json["kind"], "snowflake");
            assert_eq!(json["opaque"], opaque.as_str());
            assert_eq!(json["worker"], service.worker);
            json["id"].as_str().unwrap().parse().unwrap()
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(ids[ids.len() - 1] < plain[0]);
    let rising = all.windows(2).filter(|w| w[0] < w[1]).count();
    assert!((1_400..2_100).contains(&rising), "{rising} of 3,499 rise");
    // The command decodes them the same way.
    let (status, stdout, stderr) = idgen(&[
        "opaque",
        "decode",
        "--key-file",
        keys.to_str().unwrap(),
        &all[0],
        &all[3_499],
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(lines(&stdout), [ids[0].to_string(), ids[3_499].to_string()]);
    // Made with the old key: still decoded.
    let old = key_file(files, "old", &format!("{OLD_KEY}\n"), 0o600);
    let (_, stdout, _) = idgen(&[
        "opaque",
        "encode",
        "--key-file",
        old.to_str().unwrap(),
        "12345",
    ]);
    let decoded = service
        .get(&format!("/v1/ids/{}/decode", stdout.trim()))
        .json();
    assert_eq!(decoded["id"], "12345");

    for (path, body, says) in [
        (
            "/v1/ids?count=1&form=opaque&kind=ulid",
            None,
            "no opaque form",
        ),
        (
            "/v1/ids",
            Some(r#"{"count": 1, "form": "opaque", "kind": "uuidv7"}"#),
            "no opaque form",
        ),
        (
            "/v1/ids?count=1&form=Opaque",
            None,
            r#""plain" or "opaque""#,
        ),
        ("/v1/ids?count=1&form=", None, r#""plain" or "opaque""#),
        ("/v1/ids?count=1&form=opaque&form=opaque", None, "form once"),
        (
            "/v1/ids",
            Some(r#"{"count": 1, "form": 1}"#),
            r#""plain" or "opaque""#,
        ),
        (
            "/v1/ids",
            Some(r#"{"count": 1, "form": null}"#),
            r#""plain" or "opaque""#,
        ),
        (
            "/v1/ids",
            Some(r#"{"count": 1, "Form": "opaque"}"#),
            "unknown field",
        ),
        ("/v1/ids?count=0&form=opaque", None, "at least 1"),
        ("/v1/ids/o9_00000000000/decode", None, "key 9"),
        ("/v1/ids/o4_AzL8n0Y58m8/decode", None, "2^63 or more"),
        ("/v1/ids/o4_0000000000/decode", None, "11 characters"),
        ("/v1/ids/o04_00000000000/decode", None, "leading zeros"),
    ] {
        let reply = match body {
            None => service.get(path),
            Some(body) => service.post_json(path, body),
        };
        assert_eq!(reply.status, 400, "{path} {body:?}: {}", reply.body);
        assert!(reply.error().contains(says), "{path}: {}", reply.error());
    }
    // The refused requests issued nothing: the count is what the accepted ones returned.
    assert_eq!(issued_total(&service), 3_500 + 2);
    let (status, log) = service.terminate_with_log();
    assert!(status.success(), "{log}");
    // Mode 0640: the service warns, and shows no key.
    assert!(log.contains("WARN") && log.contains("0640"), "{log}");
    assert_no_key_in(&log);
}

#[test]
fn without_a_key_the_service_refuses_the_opaque_form_and_says_why() {
    let dir = new_lease_dir("opaque-none");
    let service = Service::start(&dir, &[]);
    for reply in [
        service.get("/v1/ids?count=1&form=opaque"),
        service.post_json("/v1/ids", r#"{"count": 1, "form": "opaque"}"#),
    ] {
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert!(
            reply.error().contains("--opaque-key-file"),
            "{}",
            reply.error()
        );
    }
    let reply = service.get("/v1/ids/o1_00000000000/decode");
    assert_eq!(reply.status, 400);
    assert!(reply.error().contains("no opaque key"), "{}", reply.error());
    // Text that only starts like an opaque ID is told what is wrong with it.
    let reply = service.get("/v1/ids/o1/decode");
    assert_eq!(reply.status, 400);
    assert!(reply.error().contains("no _ after"), "{}", reply.error());
    assert_eq!(service.get("/v1/ids?count=1&form=plain").ids().len(), 1);
    // The refusals above issued nothing: only the plain ID was counted.
    assert_eq!(issued_total(&service), 1);
    // A bad key file stops the service before it listens (and before any lease).
    let bad = key_file(dir.parent().unwrap(), "bad", "0123\n", 0o600);
    let (status, stdout, stderr) = idgen(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--lease-dir",
        dir.to_str().unwrap(),
        "--opaque-key-file",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("line 1: the key has 4 hex digits"),
        "{stderr}"
    );
}
