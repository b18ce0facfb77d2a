//! `Id` and `Uuid7` through diesel in a real PostgreSQL (the one `.ci/test` starts), in
//! `table!` columns as they are: inserted, filtered, read back unchanged into `Queryable`
//! structs, ordered by the database as they order themselves; a value that is not one (a
//! negative `BIGINT`, a UUID of another version) refused on the way in to Rust.

#[path = "common/blocks.rs"]
mod blocks;

use blocks::postgres_url;
use diesel::prelude::*;
use idgen::{Generator, Id, Uuid7, Uuid7Generator};

diesel::table! {
    things (id) {
        id -> BigInt,
        uuid -> Uuid,
        parent -> Nullable<BigInt>,
    }
}

#[derive(Debug, Clone, PartialEq, Queryable, Insertable, Selectable)]
#[diesel(table_name = things)]
struct Thing {
    id: Id,
    uuid: Uuid7,
    parent: Option<Id>,
}

/// A connection with its own temporary table (a session's own: no other test sees it).
fn connection() -> PgConnection {
    let mut connection = PgConnection::establish(&postgres_url()).unwrap();
    diesel::sql_query(
        "CREATE TEMP TABLE things (id BIGINT PRIMARY KEY, uuid UUID NOT NULL UNIQUE, \
         parent BIGINT)",
    )
    .execute(&mut connection)
    .unwrap();
    connection
}

/// Rows of every shape: the edge IDs, a generator's run across milliseconds, parents.
fn rows() -> Vec<Thing> {
    let generator = Generator::builder().worker(5).build().unwrap();
    let mut ids = vec![Id::MIN, Id::try_from(1u64).unwrap(), Id::MAX];
    ids.extend(generator.next_ids(500).unwrap());
    let uuids = Uuid7Generator::new()
        .unwrap()
        .next_uuids(ids.len())
        .unwrap();
    ids.iter()
        .zip(uuids)
        .enumerate()
        .map(|(i, (&id, uuid))| Thing {
            id,
            uuid,
            parent: (i % 3 == 0).then_some(ids[i / 2]),
        })
        .collect()
}

#[test]
fn ids_and_uuid7s_round_trip_through_diesel_in_their_own_order() {
    let mut connection = connection();
    let rows = rows();
    // Written in reverse: the order read back is the database's.
    let reversed: Vec<Thing> = rows.iter().rev().cloned().collect();
    let written = diesel::insert_into(things::table)
        .values(&reversed)
        .execute(&mut connection)
        .unwrap();
    assert_eq!(written, rows.len());
    let back: Vec<Thing> = things::table
        .select(Thing::as_select())
        .order(things::id)
        .load(&mut connection)
        .unwrap();
    let mut expected = rows.clone();
    expected.sort_by_key(|thing| thing.id);
    assert_eq!(back, expected, "ORDER BY id is the IDs' order");
    let by_uuid: Vec<Uuid7> = things::table
        .select(things::uuid)
        .order(things::uuid)
        .load(&mut connection)
        .unwrap();
    let mut uuids: Vec<Uuid7> = rows.iter().map(|thing| thing.uuid).collect();
    uuids.sort();
    assert_eq!(by_uuid, uuids, "ORDER BY uuid is the UUIDs' order");

    // Filters take the types as they are.
    let max = things::table
        .filter(things::id.eq(Id::MAX))
        .select(Thing::as_select())
        .first(&mut connection)
        .unwrap();
    assert_eq!(max, rows[2]);
    let some: Vec<Id> = rows.iter().step_by(7).map(|thing| thing.id).collect();
    let mut found: Vec<Id> = things::table
        .filter(things::id.eq_any(&some))
        .select(things::id)
        .load(&mut connection)
        .unwrap();
    found.sort();
    let mut some_sorted = some.clone();
    some_sorted.sort();
    assert_eq!(found, some_sorted);
    let by_uuid: Id = things::table
        .filter(things::uuid.eq(rows[100].uuid))
        .select(things::id)
        .first(&mut connection)
        .unwrap();
    assert_eq!(by_uuid, rows[100].id);
    // A generator's run is in the BIGINT range of its time: `id >= start` finds it.
    let newer: i64 = things::table
        .filter(things::id.gt(rows[3].id))
        .count()
        .get_result(&mut connection)
        .unwrap();
    assert_eq!(
        newer as usize,
        rows.iter().filter(|t| t.id > rows[3].id).count()
    );
}

#[test]
fn values_that_are_not_ids_are_refused_on_the_way_in() {
    let mut connection = connection();
    diesel::sql_query(
        "INSERT INTO things VALUES (-1, 'd2b4f0a4-3c1e-4f6e-9a1b-2c3d4e5f6a7b', NULL)",
    )
    .execute(&mut connection)
    .unwrap();
    // A negative BIGINT is no ID: an error, never another ID.
    let id = things::table
        .select(things::id)
        .first::<Id>(&mut connection);
    let error = chain(&id.expect_err("a negative BIGINT read as an Id"));
    assert!(error.contains("-1 is not a valid ID"), "{error}");
    // A version 4 UUID is no UUIDv7.
    let uuid = things::table
        .select(things::uuid)
        .first::<Uuid7>(&mut connection);
    let error = chain(&uuid.expect_err("a UUIDv4 read as a Uuid7"));
    assert!(error.contains("version 4"), "{error}");
    // Read as the plain types, the same row is there.
    let raw: (i64, String) = things::table
        .select((
            things::id,
            diesel::dsl::sql::<diesel::sql_types::Text>("uuid::text"),
        ))
        .first(&mut connection)
        .unwrap();
    assert_eq!(raw.0, -1);
}

/// An error and its sources, as one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}
