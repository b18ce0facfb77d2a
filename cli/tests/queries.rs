//! IDs in SQL, in the PostgreSQL `.ci/test` starts, each test in a schema of its own:
//! `idgen sql`'s functions against the Rust decode (the edges of each layout and 100,000
//! random IDs, for the default layout and two others; `made_in` against the Rust bounds), and `idgen bounds`' `WHERE` clauses
//! returning exactly the rows made in their span, for every kind.

mod common;

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use common::idgen;
use idgen::{Id, IdParts, Layout, Ulid, Uuid7};
use postgres::{Client, NoTls};

fn postgres_url() -> String {
    std::env::var("IDGEN_POSTGRES_URL").expect(
        "IDGEN_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL",
    )
}

/// A connection whose `search_path` is a new schema no other test (or earlier run) uses.
fn own_schema(test: &str) -> Client {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("idgen_test_{test}_{}_{nanos}", std::process::id());
    let mut client = Client::connect(&postgres_url(), NoTls).unwrap();
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {schema}; SET search_path TO {schema}"
        ))
        .unwrap();
    client
}

/// xorshift64*: the same numbers on every run.
struct Numbers(u64);

impl Numbers {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, end: u64) -> u64 {
        self.next() % end
    }
}

/// The layout flags for `idgen`, and the layout they give.
fn layout_flags(layout: &Layout) -> Vec<String> {
    vec![
        format!("--time-bits={}", layout.time_bits()),
        format!("--datacenter-bits={}", layout.datacenter_bits()),
        format!("--worker-bits={}", layout.worker_bits()),
        format!("--sequence-bits={}", layout.sequence_bits()),
        format!("--epoch={}", layout.epoch_unix_ms()),
    ]
}

/// `idgen` with `args`, which must succeed: its stdout.
fn idgen_ok(args: &[String]) -> String {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, stdout, stderr) = idgen(&args);
    assert!(status.success(), "idgen {args:?}: {stderr}");
    stdout
}

/// Checks `idgen sql`'s functions for `layout`, named with `prefix`, against the Rust
/// decode, in a schema of the test's own.
fn sql_functions_match_the_rust_decode(test: &str, layout: Layout, prefix: &str) {
    let mut client = own_schema(test);
    let mut args = vec!["sql".to_string(), format!("--prefix={prefix}")];
    args.extend(layout_flags(&layout));
    client.batch_execute(&idgen_ok(&args)).unwrap();

    // The edges: the first and last IDs, each field at its largest, the first and last
    // milliseconds; then 100,000 random IDs of the layout's lifetime.
    let mut ids: Vec<i64> = vec![0, 1, i64::MAX];
    for unix_ms in [layout.epoch_unix_ms(), layout.last_unix_ms()] {
        ids.push(layout.first_id_at(unix_ms).unwrap().as_i64());
        ids.push(layout.last_id_at(unix_ms).unwrap().as_i64());
    }
    let fields = [
        (layout.max_datacenter(), 0, 0),
        (0, layout.max_worker(), 0),
        (0, 0, layout.max_sequence()),
    ];
    for (datacenter, worker, sequence) in fields {
        let parts = IdParts {
            unix_ms: layout.epoch_unix_ms() + 1,
            datacenter,
            worker,
            sequence,
        };
        ids.push(layout.compose(parts).unwrap().as_i64());
    }
    let mut numbers = Numbers(0x9e37_79b9_7f4a_7c15 ^ u64::from(layout.time_bits()));
    ids.extend((0..100_000).map(|_| (numbers.next() >> 1) as i64));

    let rows = client
        .query(
            &format!(
                "SELECT id, {prefix}unix_ms(id), {prefix}datacenter(id), {prefix}worker(id), \
                 {prefix}sequence(id), \
                 (extract(epoch FROM {prefix}created_at(id)) * 1000)::bigint \
                 FROM unnest($1::bigint[]) AS id"
            ),
            &[&ids],
        )
        .unwrap();
    assert_eq!(rows.len(), ids.len());
    for row in rows {
        let id: i64 = row.get(0);
        let parts = layout.decode(Id::try_from(id).unwrap());
        let in_sql: [i64; 5] = [row.get(1), row.get(2), row.get(3), row.get(4), row.get(5)];
        let in_rust = [
            parts.unix_ms,
            parts.datacenter,
            parts.worker,
            parts.sequence,
            parts.unix_ms,
        ]
        .map(|value| value as i64);
        assert_eq!(in_sql, in_rust, "ID {id} in {layout}");
    }

    // The first ID of a time: at whole milliseconds and inside them, before the epoch (0)
    // and after the last millisecond (NULL).
    let (epoch, last) = (layout.epoch_unix_ms(), layout.last_unix_ms());
    let (epoch_i, last_i) = (epoch as i64, last as i64);
    let mut micros: Vec<i64> = [epoch_i - 1, epoch_i, last_i, last_i + 1]
        .iter()
        .map(|&ms| ms * 1_000)
        .collect();
    micros.push((epoch as i64 - 1) * 1_000 + 999);
    micros.push(last as i64 * 1_000 + 999);
    micros.extend((0..1_000).map(|_| {
        let ms = epoch + numbers.below(last - epoch + 1);
        (ms * 1_000 + numbers.below(1_000)) as i64
    }));
    let rows = client
        .query(
            &format!(
                "SELECT us, {prefix}first_id_at(timestamptz 'epoch' + us * interval '1 microsecond') \
                 FROM unnest($1::bigint[]) AS us"
            ),
            &[&micros],
        )
        .unwrap();
    for row in rows {
        let unix_ms = row.get::<_, i64>(0).div_euclid(1_000);
        let expected = if unix_ms < epoch_i {
            Some(0)
        } else if unix_ms > last_i {
            None
        } else {
            Some(layout.first_id_at(unix_ms as u64).unwrap().as_i64())
        };
        assert_eq!(row.get::<_, Option<i64>>(1), expected, "at {unix_ms} ms");
    }

    // made_in: the IDs of a span, spans past the end, before the epoch and reversed too.
    let mut spans = vec![
        (epoch_i, last_i + 1),
        (epoch_i - 5, epoch_i + 5),
        (last_i - 5, last_i + 1_000),
        (last_i + 1, last_i + 2),
        (epoch_i + 10, epoch_i + 3),
    ];
    for _ in 0..8 {
        let from = epoch + numbers.below(last - epoch + 1);
        let magnitude = numbers.below(40);
        let length = 1 + numbers.below(1 << magnitude);
        spans.push((from as i64, from as i64 + length as i64));
    }
    // The edges and 20,000 of the random IDs.
    let ids = &ids[..20_000];
    for (from, to) in spans {
        let span = layout.span(from.max(0) as u64, to.max(0) as u64);
        let expected = ids
            .iter()
            .filter(|&&id| span.contains(&Id::try_from(id).unwrap()))
            .count() as i64;
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*) FROM unnest($1::bigint[]) AS id WHERE {prefix}made_in(id, \
                     timestamptz 'epoch' + $2::bigint * interval '1 millisecond', \
                     timestamptz 'epoch' + $3::bigint * interval '1 millisecond')"
                ),
                &[&ids.to_vec(), &from, &to],
            )
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), expected, "[{from}, {to}) in {layout}");
    }

    // Inlined by the planner: a range over the primary key's index, not a call per row.
    client
        .batch_execute("CREATE TABLE ids (id bigint PRIMARY KEY); SET enable_seqscan = off")
        .unwrap();
    let plan: Vec<String> = client
        .query(
            &format!(
                "EXPLAIN SELECT id FROM ids WHERE {prefix}made_in(id, \
                 timestamptz 'epoch' + {epoch} * interval '1 millisecond', now())"
            ),
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        plan.iter().any(|line| line.contains("Index Only Scan")),
        "{plan:#?}"
    );
}

#[test]
fn sql_functions_of_the_default_layout_match_the_rust_decode() {
    sql_functions_match_the_rust_decode("sql_default", Layout::DEFAULT, "idgen_");
}

#[test]
fn sql_functions_of_two_other_layouts_match_the_rust_decode() {
    // No datacenter bits and a 2020 epoch; a 43-bit time (278 years) from 1970.
    let narrow = Layout::new(39, 0, 10, 14)
        .and_then(|layout| layout.with_epoch_unix_ms(1_577_836_800_000))
        .unwrap();
    sql_functions_match_the_rust_decode("sql_narrow", narrow, "narrow_");
    let wide = Layout::new(43, 3, 7, 10)
        .and_then(|layout| layout.with_epoch_unix_ms(0))
        .unwrap();
    sql_functions_match_the_rust_decode("sql_wide", wide, "wide_");
}

#[test]
fn sql_prefixes_that_are_not_plain_identifiers_are_refused() {
    for prefix in ["", "x; DROP TABLE t; --", "Upper_", "1st_"] {
        let (status, stdout, stderr) = idgen(&["sql", "--prefix", prefix]);
        assert_eq!(status.code(), Some(2), "{prefix:?}: {stdout}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("--prefix"), "{stderr}");
    }
}

/// A window of 2 s, a minute ago, in Unix ms.
fn window() -> (u64, u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    (now - 60_000, now - 58_000)
}

/// The spans the bounds tests query: inside the window, at its edges, and around it.
fn spans(numbers: &mut Numbers, (start, end): (u64, u64)) -> Vec<(u64, u64)> {
    let mut spans = vec![(start, end), (start - 10, start + 1), (end - 1, end + 10)];
    spans.extend((0..6).map(|_| {
        let from = start + numbers.below(end - start);
        (from, from + 1 + numbers.below(end - from))
    }));
    spans
}

/// The rows of `table` that `idgen bounds FROM TO --kind KIND` selects, as text.
fn selected(
    client: &mut Client,
    table: &str,
    kind: &str,
    (from, to): (u64, u64),
) -> BTreeSet<String> {
    let json = idgen_ok(&[
        "bounds".into(),
        from.to_string(),
        to.to_string(),
        format!("--kind={kind}"),
        "--json".into(),
    ]);
    let bounds: serde_json::Value = serde_json::from_str(&json).unwrap();
    let clause = bounds["where"].as_str().unwrap();
    client
        .query(&format!("SELECT id::text FROM {table} {clause}"), &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[test]
fn bounds_select_exactly_the_rows_made_in_their_span_for_every_kind() {
    let mut client = own_schema("bounds");
    client
        .batch_execute(
            "CREATE TABLE snowflakes (id bigint PRIMARY KEY);
             CREATE TABLE uuids (id uuid PRIMARY KEY);
             CREATE TABLE ulids (id text COLLATE \"C\" PRIMARY KEY);",
        )
        .unwrap();
    let window = window();
    let mut numbers = Numbers(0x2545_f491_4f6c_dd1d);
    // 20,000 IDs of each kind made across the window and 20 ms either side, among them the
    // first and last IDs of every millisecond.
    let (mut snowflakes, mut uuids, mut ulids) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let layout = Layout::DEFAULT;
    for unix_ms in window.0 - 20..window.1 + 20 {
        snowflakes.insert(layout.first_id_at(unix_ms).unwrap().as_i64());
        snowflakes.insert(layout.last_id_at(unix_ms).unwrap().as_i64());
        uuids.insert(Uuid7::first_at(unix_ms).unwrap());
        uuids.insert(Uuid7::last_at(unix_ms).unwrap());
        ulids.insert(Ulid::first_at(unix_ms).unwrap());
        ulids.insert(Ulid::last_at(unix_ms).unwrap());
    }
    let span_ms = window.1 - window.0 + 40;
    while snowflakes.len() < 20_000 {
        let parts = IdParts {
            unix_ms: window.0 - 20 + numbers.below(span_ms),
            datacenter: numbers.below(32),
            worker: numbers.below(32),
            sequence: numbers.below(4096),
        };
        snowflakes.insert(layout.compose(parts).unwrap().as_i64());
        let unix_ms = window.0 - 20 + numbers.below(span_ms);
        let below_time =
            (u128::from(numbers.next()) << 64 | u128::from(numbers.next())) & ((1 << 80) - 1);
        let bits = (u128::from(unix_ms) << 80 | below_time) & !(0xF << 76) & !(0b11 << 62);
        uuids.insert(Uuid7::from_bytes((bits | 0x7 << 76 | 0b10 << 62).to_be_bytes()).unwrap());
        ulids.insert(Ulid::from_u128(u128::from(unix_ms) << 80 | below_time));
    }
    let snowflake_list: Vec<i64> = snowflakes.iter().copied().collect();
    let uuid_list: Vec<String> = uuids.iter().map(Uuid7::to_string).collect();
    let ulid_list: Vec<String> = ulids.iter().map(Ulid::to_string).collect();
    client
        .execute(
            "INSERT INTO snowflakes SELECT unnest($1::bigint[])",
            &[&snowflake_list],
        )
        .unwrap();
    client
        .execute(
            "INSERT INTO uuids SELECT unnest($1::text[])::uuid",
            &[&uuid_list],
        )
        .unwrap();
    client
        .execute("INSERT INTO ulids SELECT unnest($1::text[])", &[&ulid_list])
        .unwrap();

    for span in spans(&mut numbers, window) {
        let made = |unix_ms: u64| span.0 <= unix_ms && unix_ms < span.1;
        let expected: BTreeSet<String> = snowflakes
            .iter()
            .filter(|&&id| made(layout.decode(Id::try_from(id).unwrap()).unix_ms))
            .map(i64::to_string)
            .collect();
        assert!(!expected.is_empty());
        assert_eq!(
            selected(&mut client, "snowflakes", "snowflake", span),
            expected,
            "{span:?}"
        );
        let expected: BTreeSet<String> = uuids
            .iter()
            .filter(|uuid| made(uuid.unix_ms()))
            .map(Uuid7::to_string)
            .collect();
        assert_eq!(
            selected(&mut client, "uuids", "uuidv7", span),
            expected,
            "{span:?}"
        );
        let expected: BTreeSet<String> = ulids
            .iter()
            .filter(|ulid| made(ulid.unix_ms()))
            .map(Ulid::to_string)
            .collect();
        assert_eq!(
            selected(&mut client, "ulids", "ulid", span),
            expected,
            "{span:?}"
        );
    }
}

#[test]
fn bounds_refuse_opaque_ids_and_bad_times_clearly_and_say_when_a_span_holds_nothing() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["bounds", "0", "1", "--kind", "opaque"],
            "opaque IDs are encrypted",
        ),
        (
            &["bounds", "yesterday", "1"],
            "FROM: \"yesterday\" is not a UTC time",
        ),
        (
            &["bounds", "0", "99999999999999999999"],
            "TO: \"99999999999999999999\" is too large",
        ),
        (
            &["bounds", "1", "2", "--kind", "uuid"],
            "invalid value 'uuid'",
        ),
    ];
    for (args, reason) in cases {
        let (status, stdout, stderr) = idgen(args);
        assert_eq!(status.code(), Some(2), "{args:?}: {stdout}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
    // Past the layout's end: no upper bound.
    let (status, stdout, _) = idgen(&["bounds", "2090-01-01T00:00:00Z", "2100-01-01T00:00:00Z"]);
    assert!(status.success());
    let first = Layout::DEFAULT.first_id_at(3_786_912_000_000).unwrap();
    assert!(
        stdout.ends_with(&format!("WHERE id >= {first}\n")),
        "{stdout}"
    );
    // Spans that hold no ID say why, and select nothing.
    for (args, why) in [
        (
            ["bounds", "2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"],
            "to is not after from",
        ),
        (
            ["bounds", "2100-01-01T00:00:00Z", "2101-01-01T00:00:00Z"],
            "no such ID can be made then",
        ),
        (
            ["bounds", "2020-01-01T00:00:00Z", "2023-01-01T00:00:00Z"],
            "no such ID can be made then",
        ),
    ] {
        let (status, stdout, stderr) = idgen(&args);
        assert!(status.success(), "{stderr}");
        assert!(
            stdout.contains(why) && stdout.ends_with("WHERE false\n"),
            "{stdout}"
        );
    }
}
