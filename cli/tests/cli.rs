//! The operator commands: `next`, `decode`, `layout`, and their errors.

mod common;

use std::os::unix::process::CommandExt;

use common::{idgen, idgen_with_env, new_lease_dir, temp_dir};

#[test]
fn next_prints_increasing_ids_in_each_format() {
    let dir = new_lease_dir("next");
    let dir = dir.to_str().unwrap();
    let (status, stdout, _) = idgen(&["next", "-n", "5", "--lease-dir", dir]);
    assert!(status.success());
    let ids: Vec<u64> = stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 5);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));

    let (status, stdout, _) = idgen(&["next", "-n", "3", "--format", "json", "--lease-dir", dir]);
    assert!(status.success());
    let json: Vec<String> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json.len(), 3);
    assert!(
        json[0].parse::<u64>().unwrap() > ids[4],
        "a later run starts above the last"
    );

    let (status, stdout, _) = idgen(&["next", "-n", "2", "--format", "base32", "--lease-dir", dir]);
    assert!(status.success());
    for line in stdout.lines() {
        assert_eq!(line.len(), 13);
        assert!(idgen::Id::from_base32(line).is_ok());
    }
}

#[test]
fn next_refuses_bad_arguments() {
    let dir = new_lease_dir("next-bad");
    let dir = dir.to_str().unwrap();
    for (args, message) in [
        (vec!["next", "-n", "0"], "at least 1"),
        (vec!["next", "-n", "-1"], "unexpected argument"),
        (vec!["next", "--format", "xml"], "invalid value"),
        (vec!["next", "--workers", "9-3"], "is empty"),
        (vec!["next", "--workers", "0-40"], "does not fit"),
        (vec!["next", "--datacenter", "99"], "does not fit"),
        (
            vec!["next", "--etcd", "127.0.0.1:2379", "--lease-dir", "/tmp"],
            "cannot be used with",
        ),
    ] {
        let mut full = args.clone();
        if !args.contains(&"--lease-dir") {
            full.extend(["--lease-dir", dir]);
        }
        let (status, _, stderr) = idgen(&full);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn decode_shows_the_parts_of_decimal_and_base32_ids() {
    // 2026-10-11T12:35:21.659Z, datacenter 3, worker 17, sequence 0, built by hand.
    let ms = 1_791_722_121_659u64 - 1_704_067_200_000;
    let id = ms << 22 | 3 << 17 | 17 << 12;
    let base32 = idgen::Id::try_from(id).unwrap().to_base32().to_string();
    let (status, stdout, _) = idgen(&["decode", &id.to_string(), &base32]);
    assert!(status.success());
    let expected = format!("{id}  2026-10-11T12:35:21.659Z  datacenter 3  worker 17  sequence 0");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [expected.as_str(), expected.as_str()]
    );
    let (status, stdout, _) = idgen(&["decode", "--json", &id.to_string()]);
    assert!(status.success());
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"id": id.to_string(), "kind": "snowflake",
                           "createdAt": "2026-10-11T12:35:21.659Z",
                           "datacenter": 3, "worker": 17, "sequence": 0})
    );
}

#[test]
fn decode_recognises_uuidv7_and_ulid_by_their_text() {
    // RFC 9562's vector (2022-02-22T19:22:22Z) in upper case, and the ULID spec's example.
    let (status, stdout, stderr) = idgen(&[
        "decode",
        "017F22E2-79B0-7CC3-98C4-DC0C0C07398F",
        "01arz3ndektsv4rrffq69g5fav",
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "017f22e2-79b0-7cc3-98c4-dc0c0c07398f  2022-02-22T19:22:22.000Z  uuidv7",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV  2016-07-30T23:54:10.259Z  ulid",
        ]
    );
    let (status, stdout, _) = idgen(&["decode", "--json", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]);
    assert!(status.success());
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        serde_json::json!({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "kind": "ulid",
                           "createdAt": "2016-07-30T23:54:10.259Z"})
    );
    // A version 4 UUID, a ULID past 128 bits, a UUID with braces: each refused with why.
    let (status, _, stderr) = idgen(&[
        "decode",
        "017f22e2-79b0-4cc3-98c4-dc0c0c07398f",
        "80000000000000000000000000",
        "{17f22e2-79b0-7cc3-98c4-dc0c0c07398f}",
    ]);
    assert_eq!(status.code(), Some(2));
    for reason in ["version 4", "at most 7", "not allowed here"] {
        assert!(stderr.contains(reason), "{reason}: {stderr}");
    }
}

#[test]
fn next_makes_uuidv7s_and_ulids_without_a_lease() {
    // No lease directory is named or created: these kinds need no worker number.
    let dir = temp_dir("next-kinds");
    for (kind, len) in [("uuidv7", 36), ("ulid", 26)] {
        let (status, stdout, stderr) = idgen(&[
            "next",
            "--kind",
            kind,
            "-n",
            "1000",
            "--lease-dir",
            dir.join("never").to_str().unwrap(),
        ]);
        assert!(status.success(), "{stderr}");
        let ids: Vec<&str> = stdout.lines().collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| id.len() == len), "{kind}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{kind}: text in order");
        let (status, stdout, _) = idgen(&["next", "--kind", kind, "-n", "3", "--format", "json"]);
        assert!(status.success());
        let json: Vec<String> = serde_json::from_str(&stdout).unwrap();
        assert_eq!(json.len(), 3);
        let (status, _, stderr) = idgen(&["next", "--kind", kind, "--format", "base32"]);
        assert_eq!(status.code(), Some(2));
        assert!(stderr.contains("base32 is for Snowflake IDs"), "{stderr}");
    }
    assert!(!dir.join("never").exists());
    let (status, _, stderr) = idgen(&["next", "--kind", "uuid4"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("uuidv7"), "{stderr}");
}

#[test]
fn decode_reports_every_bad_id_and_fails() {
    let (status, stdout, stderr) = idgen(&["decode", "12", "0123", "9223372036854775808", "abc"]);
    assert_eq!(status.code(), Some(2));
    assert_eq!(stdout.lines().count(), 1, "the good one is still decoded");
    for bad in ["\"0123\"", "\"9223372036854775808\"", "\"abc\""] {
        assert!(stderr.contains(bad), "{bad}: {stderr}");
    }
    let (status, _, stderr) = idgen(&["decode"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
}

#[test]
fn presets_read_other_systems_ids_and_make_twitters() {
    // The example of Discord's API documentation, and a Discord ID past 2^63.
    let (status, stdout, stderr) = idgen(&[
        "decode",
        "--preset",
        "discord",
        "175928847299117063",
        "18446744073709551615",
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "175928847299117063  2016-04-30T11:18:25.796Z  worker 1  process 0  increment 7",
            "18446744073709551615  2154-05-15T07:35:11.103Z  worker 31  process 31  increment 4095",
        ]
    );
    // Mastodon's field name has a space: camel case in JSON.
    let (status, stdout, stderr) = idgen(&[
        "decode",
        "--json",
        "--preset",
        "Mastodon",
        "98850828346879853",
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        serde_json::json!({"id": "98850828346879853", "kind": "snowflake", "preset": "mastodon",
                           "createdAt": "2017-10-18T16:25:38.398Z", "unixMs": 1_508_343_938_398u64,
                           "sequenceData": 28525})
    );
    assert!(
        stdout.starts_with(r#"{"id":"98850828346879853","kind":"snowflake","#),
        "{stdout}"
    );
    // The variable, as the flag; empty, as unset.
    let discord = [("IDGEN_PRESET", std::path::Path::new("discord"))];
    let (status, stdout, stderr) = idgen_with_env(&["decode", "175928847299117063"], &discord);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.ends_with("worker 1  process 0  increment 7\n"),
        "{stdout}"
    );
    let empty = [("IDGEN_PRESET", std::path::Path::new(""))];
    let (status, stdout, stderr) = idgen_with_env(&["decode", "385628494224322560"], &empty);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("2026-11-30"), "{stdout}");
    // Bad IDs for the preset, each named; the good one still decoded.
    let (status, stdout, stderr) = idgen(&[
        "decode",
        "--preset",
        "twitter",
        "1541815603606036480",
        "9223372036854775808",
        "+1",
        "0123",
        "18446744073709551616",
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(
        stdout.trim(),
        "1541815603606036480  2022-06-28T16:07:40.105Z  datacenter 11  worker 26  sequence 0"
    );
    for bad in [
        "invalid twitter ID \"9223372036854775808\"",
        "from 0 to 9223372036854775807",
        "\"+1\"",
        "\"0123\"",
        "\"18446744073709551616\"",
    ] {
        assert!(stderr.contains(bad), "{bad}: {stderr}");
    }
    // An unknown preset, a preset beside the layout flags, a read-only preset where IDs
    // are made: refused with why.
    let (status, _, stderr) = idgen(&["decode", "--preset", "snowflake", "1"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("one of twitter, discord"), "{stderr}");
    let (status, _, stderr) = idgen(&["layout", "--preset", "twitter", "--time-bits", "40"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let dir = new_lease_dir("presets");
    let dir = dir.to_str().unwrap();
    let (status, _, stderr) = idgen(&["next", "--preset", "sonyflake", "--lease-dir", dir]);
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr.contains("idgen decode --preset sonyflake"),
        "{stderr}"
    );
    // Twitter's fits: idgen makes its IDs, and reads them back under the preset.
    let (status, stdout, stderr) =
        idgen(&["next", "-n", "3", "--preset", "twitter", "--lease-dir", dir]);
    assert!(status.success(), "{stderr}");
    let ids: Vec<&str> = stdout.lines().collect();
    assert_eq!(ids.len(), 3);
    let now = common::unix_ms();
    let mut args = vec!["decode", "--json", "--preset", "twitter"];
    args.extend(&ids);
    let (status, stdout, stderr) = idgen(&args);
    assert!(status.success(), "{stderr}");
    for line in stdout.lines() {
        let decoded: serde_json::Value = serde_json::from_str(line).unwrap();
        let made = decoded["unixMs"].as_u64().unwrap();
        assert!(
            made <= now && now - made < 60_000,
            "{line} is not from now ({now})"
        );
        assert_eq!(decoded["datacenter"], 0, "{line}");
    }
}

#[test]
fn layout_shows_the_arithmetic_and_refuses_bad_layouts() {
    let (status, stdout, _) = idgen(&["layout"]);
    assert!(status.success());
    for line in [
        "lifetime: 69.7 years, until 2093-09-06T15:47:35.551Z",
        "nodes: 1024 (32 datacenters x 32 workers)",
        "IDs per second per worker: 4096000",
        "cluster maximum: 4194304000 IDs per second",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    let (status, stdout, _) = idgen(&[
        "layout",
        "--json",
        "--time-bits",
        "39",
        "--datacenter-bits",
        "0",
        "--worker-bits",
        "12",
        "--epoch",
        "2020-01-01T00:00:00Z",
    ]);
    assert!(status.success());
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["lifetimeYears"], 17.4);
    assert_eq!(json["nodes"], 4096);
    assert_eq!(json["epoch"], "2020-01-01T00:00:00.000Z");
    for (args, message) in [
        (vec!["--time-bits", "40"], "add up to 62"),
        (
            vec!["--sequence-bits", "0", "--time-bits", "53"],
            "at least one bit",
        ),
        (vec!["--epoch", "1969-12-31T00:00:00Z"], "UTC time"),
        (vec!["--epoch=-5"], "before the Unix epoch"),
        (vec!["--epoch", "tomorrow"], "UTC time"),
        (vec!["--time-bits", "x"], "invalid value"),
    ] {
        let mut full = vec!["layout"];
        full.extend(&args);
        let (status, _, stderr) = idgen(&full);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn the_default_lease_directory_is_persistent_private_and_refused_when_others_may_write() {
    let home = temp_dir("default-dir");
    let state = home.join("state");
    let env = [
        ("XDG_STATE_HOME", state.as_path()),
        ("TMPDIR", home.as_path()),
    ];
    let (status, stdout, stderr) = idgen_with_env(&["next"], &env);
    assert!(status.success(), "{stderr}");
    assert!(stdout.trim().parse::<u64>().is_ok());
    let dir = state.join("idgen/leases");
    assert_eq!(mode(&dir), 0o700);
    // (Which number it took depends on the default stores other tests hold meanwhile.)
    let records: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "lease"))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(mode(&records[0]), 0o600);
    assert_eq!(mode(&dir.join("store.idgen")), 0o600);
    // Its group may not write the default directory ...
    chmod(&dir, 0o770);
    let (status, _, stderr) = idgen_with_env(&["next"], &env);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("writable by its group"), "{stderr}");
    // ... but may write one given explicitly (services under different users) ...
    let explicit = dir.to_str().unwrap();
    let (status, _, stderr) = idgen_with_env(&["next", "--lease-dir", explicit], &env);
    assert!(status.success(), "{stderr}");
    // ... and nobody else may write either, nor any record in it.
    chmod(&dir, 0o777);
    let (status, _, stderr) = idgen_with_env(&["next", "--lease-dir", explicit], &env);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("writable by any user"), "{stderr}");
    chmod(&dir, 0o700);
    let (status, _, stderr) =
        idgen_with_env(&["next", "--lease-dir", explicit, "--workers", "0-0"], &env);
    assert!(status.success(), "{stderr}");
    chmod(&dir.join("dc0-worker0.lease"), 0o666);
    let (status, _, stderr) =
        idgen_with_env(&["next", "--lease-dir", explicit, "--workers", "0-0"], &env);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("dc0-worker0.lease is writable by any user"),
        "{stderr}"
    );
}

#[test]
fn a_symbolic_link_planted_as_a_record_is_never_followed() {
    let home = temp_dir("symlink");
    let dir = home.join("leases");
    let lease_dir = dir.to_str().unwrap();
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir, "--workers", "0-0"]);
    assert!(status.success(), "{stderr}");
    let target = home.join("elsewhere");
    std::fs::write(&target, b"precious").unwrap();
    let record = dir.join("dc0-worker0.lease");
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink(&target, &record).unwrap();
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir, "--workers", "0-0"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
}

#[test]
fn numbers_held_by_an_older_idgen_in_the_old_default_block_the_new_default() {
    let home = temp_dir("legacy");
    let state = home.join("state");
    let old = home.join("idgen-leases");
    std::fs::create_dir_all(&old).unwrap();
    let record = old.join("dc0-worker0.lease");
    std::fs::write(&record, b"").unwrap();
    // An older idgen holding worker 0 there: a process with the record locked (flock), in
    // a process group of its own, so that the test can end it and its child together.
    let holder = std::process::Command::new("flock")
        .arg("--close") // the lock stays with flock itself, and goes when it is killed
        .arg(&record)
        .args(["sleep", "300"])
        .process_group(0)
        .spawn()
        .expect("flock (util-linux) is needed");
    // Its group killed however the test ends, so a failed assert leaves no lock behind.
    let mut holder = GroupKilledOnDrop(holder);
    let env = [
        ("XDG_STATE_HOME", state.as_path()),
        ("TMPDIR", home.as_path()),
    ];
    // Refused once flock holds the lock.
    let deadline = std::time::Instant::now() + common::PATIENCE;
    let stderr = loop {
        let (status, _, stderr) = idgen_with_env(&["next"], &env);
        if !status.success() {
            break stderr;
        }
        assert!(std::time::Instant::now() < deadline, "never refused");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        stderr.contains("an older idgen still holds worker numbers"),
        "{stderr}"
    );
    assert!(stderr.contains("dc0-worker0.lease"), "{stderr}");
    assert!(holder.kill_group());
    holder.0.wait().unwrap();
    // Once the old holder is gone (its forked child may hold the lock a moment longer, until
    // it is killed too), the new default is usable.
    let deadline = std::time::Instant::now() + common::PATIENCE;
    loop {
        let (status, _, stderr) = idgen_with_env(&["next"], &env);
        if status.success() {
            break;
        }
        assert!(stderr.contains("an older idgen"), "{stderr}");
        assert!(std::time::Instant::now() < deadline, "{stderr}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn an_epoch_still_to_come_is_bad_input() {
    let dir = new_lease_dir("future-epoch");
    let lease_dir = dir.to_str().unwrap();
    for command in ["next", "serve"] {
        let (status, _, stderr) = idgen(&[
            command,
            "--lease-dir",
            lease_dir,
            "--epoch",
            "2999-01-01T00:00:00Z",
        ]);
        assert_eq!(status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("in the future"), "{command}: {stderr}");
    }
}

#[test]
fn lease_ttls_are_durations_checked_against_the_store() {
    let dir = new_lease_dir("ttl");
    let lease_dir = dir.to_str().unwrap();
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir, "--lease-ttl", "500ms"]);
    assert!(status.success(), "{stderr}");
    for (ttl, message) in [
        ("3", "unit"),
        ("3 s", "unit"),
        ("-3s", "not a duration"),
        ("03s", "not a duration"),
        ("99999999999999999999h", "not a duration"),
        ("9999999999999999h", "too long"),
        ("50ms", "outside 100 ms"),
        ("2w", "unit"),
        // Days are a unit (for --lifetime-warning); a TTL of two is still refused.
        ("2d", "outside 100 ms to 86400s"),
    ] {
        let flag = format!("--lease-ttl={ttl}");
        let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir, &flag]);
        assert_eq!(status.code(), Some(2), "{ttl}: {stderr}");
        assert!(stderr.contains(message), "{ttl}: {stderr}");
    }
}

#[test]
fn outage_horizons_are_durations_no_shorter_than_the_ttl() {
    let dir = new_lease_dir("horizon");
    let lease_dir = dir.to_str().unwrap();
    let (status, _, stderr) = idgen(&[
        "next",
        "--lease-dir",
        lease_dir,
        "--lease-ttl",
        "1s",
        "--outage-horizon",
        "5m",
    ]);
    assert!(status.success(), "{stderr}");
    for (flags, message) in [
        (
            ["--lease-ttl", "3s", "--outage-horizon", "2s"],
            "below the TTL",
        ),
        (["--lease-ttl", "3s", "--outage-horizon", "2"], "unit"),
        (
            ["--lease-ttl", "3s", "--outage-horizon", "soon"],
            "not a duration",
        ),
    ] {
        let mut args = vec!["next", "--lease-dir", lease_dir];
        args.extend(flags);
        let (status, _, stderr) = idgen(&args);
        assert_eq!(status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(message), "{flags:?}: {stderr}");
    }
}

#[test]
fn the_default_stores_of_two_users_never_take_the_same_live_number() {
    // root's service in /var/lib/idgen, a user's `idgen next` in ~/.local/state: two
    // directories, one host. The second must not issue as the number the first holds.
    let home = temp_dir("two-defaults");
    let (first_state, second_state) = (home.join("root-state"), home.join("user-state"));
    let service = common::Service::start_in(
        common::idgen_command()
            .env("XDG_STATE_HOME", &first_state)
            .env("TMPDIR", &home)
            .args(["serve", "--listen", "127.0.0.1:0", "--workers", "20-21"]),
    );
    // Default-directory numbers are host-wide: a range of its own, apart from other tests.
    // (Any other process on the host that holds one of the two for a moment, a leftover
    // of another run say, moves the service to the other one, or makes the second wait.)
    assert!([20, 21].contains(&service.worker));
    let env = [
        ("XDG_STATE_HOME", second_state.as_path()),
        ("TMPDIR", home.as_path()),
    ];
    let id = common::next_id_once_free(&["next", "--workers", "20-21"], &env);
    assert_ne!(
        (id >> 12) & 0x1f,
        service.worker,
        "took the worker number a live service holds"
    );
}

#[test]
fn an_unusable_record_costs_its_number_not_the_range() {
    let dir = new_lease_dir("unusable");
    let lease_dir = dir.to_str().unwrap();
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir, "--workers", "0-0"]);
    assert!(status.success(), "{stderr}");
    // A FIFO where worker 0's record was (reading it would block for ever) ...
    let record = dir.join("dc0-worker0.lease");
    std::fs::remove_file(&record).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&record)
        .status()
        .unwrap();
    assert!(made.success());
    // ... and a record of worker 1 that any user may write.
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir, "--workers", "1-1"]);
    assert!(status.success(), "{stderr}");
    chmod(&dir.join("dc0-worker1.lease"), 0o666);
    let (status, stdout, stderr) = idgen(&["next", "--lease-dir", lease_dir, "--workers", "0-2"]);
    assert!(status.success(), "{stderr}");
    let id: u64 = stdout.trim().parse().unwrap();
    assert_eq!((id >> 12) & 0x1f, 2);
    let (status, _, stderr) = idgen(&["next", "--lease-dir", lease_dir, "--workers", "0-1"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 unusable"), "{stderr}");
    assert!(stderr.contains("not a plain file"), "{stderr}");
    assert!(stderr.contains("writable by any user"), "{stderr}");
}

#[test]
fn every_serve_flag_has_a_variable_named_after_it_shown_in_help() {
    let (status, help, stderr) = idgen(&["serve", "--help"]);
    assert!(status.success(), "{stderr}");
    // Each option's block: its "--flag" line and the help text under it.
    let mut flags = 0;
    for block in help.split("\n      --").skip(1) {
        let flag = block.split([' ', '\n']).next().unwrap();
        if flag == "help" {
            continue;
        }
        let variable = format!("IDGEN_{}", flag.replace('-', "_").to_uppercase());
        assert!(
            block.contains(&format!("[env: {variable}")),
            "--{flag} has no variable {variable}:\n{block}"
        );
        flags += 1;
    }
    assert!(flags >= 20, "only {flags} flags found in:\n{help}");
    let (status, version, _) = idgen(&["--version"]);
    assert!(status.success());
    assert_eq!(
        version.trim(),
        format!("idgen {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn variables_set_flags_and_never_override_a_conflicting_flag_silently() {
    let dir = temp_dir("variables");
    let leases = dir.join("leases");
    let env = [
        ("IDGEN_LEASE_DIR", leases.as_path()),
        ("IDGEN_WORKERS", std::path::Path::new("9-9")),
        ("IDGEN_DATACENTER", std::path::Path::new("2")),
    ];
    let (status, stdout, stderr) = idgen_with_env(&["next"], &env);
    assert!(status.success(), "{stderr}");
    let id: u64 = stdout.trim().parse().unwrap();
    assert_eq!((id >> 12) & 0x1f, 9, "worker");
    assert_eq!((id >> 17) & 0x1f, 2, "datacenter");
    assert!(leases.join("store.idgen").exists());
    // A flag beats its own variable...
    let (status, stdout, stderr) = idgen_with_env(&["next", "--workers", "4-4"], &env);
    assert!(status.success(), "{stderr}");
    assert_eq!((stdout.trim().parse::<u64>().unwrap() >> 12) & 0x1f, 4);
    // ... and a variable never switches the store a flag names: a conflict is an error.
    let (status, stdout, stderr) = idgen_with_env(&["next", "--etcd", "http://127.0.0.1:9"], &env);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    // A bad value from a variable is as clear as from its flag.
    let (status, _, stderr) = idgen_with_env(
        &["next"],
        &[("IDGEN_DATACENTER", std::path::Path::new("two"))],
    );
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("--datacenter"), "{stderr}");
}

#[test]
fn secrets_in_variables_stay_out_of_help_and_empty_stores_are_refused() {
    let env = [
        (
            "IDGEN_POSTGRES",
            std::path::Path::new("postgresql://u:hunter2@db/x"),
        ),
        (
            "IDGEN_ETCD",
            std::path::Path::new("http://root:hunter2@etcd:2379"),
        ),
    ];
    let (status, help, stderr) = idgen_with_env(&["serve", "--help"], &env);
    assert!(status.success(), "{stderr}");
    assert!(help.contains("[env: IDGEN_POSTGRES]"), "{help}");
    assert!(!help.contains("hunter2"), "{help}");
    for (variable, command) in [
        ("IDGEN_ETCD", &["next"][..]),
        ("IDGEN_WORKERS", &["next"]),
        ("IDGEN_POSTGRES", &["seq", "next", "orders"]),
    ] {
        let (status, stdout, stderr) =
            idgen_with_env(command, &[(variable, std::path::Path::new(""))]);
        assert_eq!(status.code(), Some(2), "{variable}: {stderr}");
        assert!(stdout.is_empty());
        assert!(
            stderr.contains("empty") || stderr.contains("a value is required"),
            "{variable}: {stderr}"
        );
    }
}

/// A child leading a process group of its own: the group is killed on drop.
struct GroupKilledOnDrop(std::process::Child);

impl GroupKilledOnDrop {
    /// SIGKILLs the whole group; whether `kill` succeeded.
    fn kill_group(&mut self) -> bool {
        let group = format!("-{}", self.0.id());
        std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }
}

impl Drop for GroupKilledOnDrop {
    fn drop(&mut self) {
        self.kill_group();
        let _ = self.0.wait();
    }
}
