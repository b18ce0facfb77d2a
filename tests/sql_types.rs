//! `Id` and `Uuid7` in a real PostgreSQL (the one `.ci/test` starts), through the
//! `postgres` crate and through sqlx: written and read back unchanged, ordered by the
//! database as they order themselves, and a value that is not one (a negative `BIGINT`, a
//! UUID of another version) refused on the way in to Rust.

#[path = "common/blocks.rs"]
mod blocks;

use blocks::postgres_url;
use idgen::{Generator, Id, Uuid7, Uuid7Generator};

/// IDs of every shape: the edges and a generator's run across milliseconds.
fn ids() -> Vec<Id> {
    let generator = Generator::builder().worker(5).build().unwrap();
    let mut ids = vec![Id::MIN, Id::try_from(1u64).unwrap(), Id::MAX];
    ids.extend(generator.next_ids(500).unwrap());
    ids
}

fn uuids(count: usize) -> Vec<Uuid7> {
    Uuid7Generator::new().unwrap().next_uuids(count).unwrap()
}

/// `back` is `sent`, sorted: written in reverse and read back `ORDER BY` the column.
fn assert_sorted_back<T: Ord + Clone + std::fmt::Debug>(sent: &[T], back: &[T]) {
    let mut expected = sent.to_vec();
    expected.sort();
    assert_eq!(back.len(), expected.len());
    if let Some(i) = (0..back.len()).find(|&i| back[i] != expected[i]) {
        panic!(
            "row {i}: {:?} read back, {:?} written",
            back[i], expected[i]
        );
    }
}

const TABLE: &str = "CREATE TEMP TABLE things (id BIGINT PRIMARY KEY, uuid UUID NOT NULL UNIQUE)";

#[test]
fn ids_and_uuid7s_round_trip_through_the_postgres_crate() {
    let mut client = postgres::Client::connect(&postgres_url(), postgres::NoTls).unwrap();
    client.batch_execute(TABLE).unwrap();
    let ids = ids();
    let uuids = uuids(ids.len());
    for (id, uuid) in ids.iter().zip(&uuids).rev() {
        client
            .execute("INSERT INTO things VALUES ($1, $2)", &[id, uuid])
            .unwrap();
    }
    let rows = client
        .query("SELECT id, uuid FROM things ORDER BY id", &[])
        .unwrap();
    let back: Vec<Id> = rows.iter().map(|row| row.get(0)).collect();
    assert_sorted_back(&ids, &back);
    // ORDER BY on the UUID column is the order of the UUIDs.
    let rows = client
        .query("SELECT uuid FROM things ORDER BY uuid", &[])
        .unwrap();
    let back: Vec<Uuid7> = rows.iter().map(|row| row.get(0)).collect();
    assert_sorted_back(&uuids, &back);
    // A value found by an ID parameter, and the same text the database shows.
    let row = client
        .query_one(
            "SELECT id::text, uuid::text FROM things WHERE id = $1",
            &[&Id::MAX],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), Id::MAX.to_string());
    assert!(row.get::<_, String>(1).parse::<Uuid7>().is_ok());

    // What is not an ID or a UUIDv7 is an error, never another value.
    let negative = client.query_one("SELECT -1::BIGINT", &[]).unwrap();
    assert!(negative.try_get::<_, Id>(0).is_err());
    let v4 = client
        .query_one("SELECT '2f1e0d4c-3b2a-4918-8f7e-6d5c4b3a2918'::UUID", &[])
        .unwrap();
    let error = v4.try_get::<_, Uuid7>(0).unwrap_err();
    assert!(error.to_string().contains("error deserializing"), "{error}");
    // And a type that does not fit is refused before anything is sent.
    let wrong = client.execute("INSERT INTO things VALUES ($1, $2)", &[&uuids[0], &ids[0]]);
    assert!(wrong.is_err());
}

#[test]
fn ids_and_uuid7s_round_trip_through_sqlx() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use sqlx::{Connection, Row};
        let mut db = sqlx::PgConnection::connect(&postgres_url()).await.unwrap();
        sqlx::query(TABLE).execute(&mut db).await.unwrap();
        let ids = ids();
        let uuids = uuids(ids.len());
        for (id, uuid) in ids.iter().zip(&uuids).rev() {
            sqlx::query("INSERT INTO things VALUES ($1, $2)")
                .bind(id)
                .bind(uuid)
                .execute(&mut db)
                .await
                .unwrap();
        }
        let rows = sqlx::query("SELECT id, uuid FROM things ORDER BY id")
            .fetch_all(&mut db)
            .await
            .unwrap();
        let back: Vec<Id> = rows.iter().map(|row| row.get("id")).collect();
        assert_sorted_back(&ids, &back);
        let back: Vec<Uuid7> = sqlx::query("SELECT uuid FROM things ORDER BY uuid")
            .fetch_all(&mut db)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert_sorted_back(&uuids, &back);
        // Arrays bind too: one round trip for a batch of IDs.
        let count: i64 = sqlx::query("SELECT count(*) FROM things WHERE id = ANY($1)")
            .bind(&ids[..10])
            .fetch_one(&mut db)
            .await
            .unwrap()
            .get(0);
        assert_eq!(count, 10);
        let count: i64 = sqlx::query("SELECT count(*) FROM things WHERE uuid = ANY($1)")
            .bind(&uuids[..7])
            .fetch_one(&mut db)
            .await
            .unwrap()
            .get(0);
        assert_eq!(count, 7);
        let back: Vec<Uuid7> = sqlx::query("SELECT array_agg(uuid ORDER BY uuid) FROM things")
            .fetch_one(&mut db)
            .await
            .unwrap()
            .get(0);
        assert_sorted_back(&uuids, &back);

        let negative = sqlx::query("SELECT -1::BIGINT")
            .fetch_one(&mut db)
            .await
            .unwrap();
        assert!(negative.try_get::<Id, _>(0).is_err());
        let v4 = sqlx::query("SELECT '2f1e0d4c-3b2a-4918-8f7e-6d5c4b3a2918'::UUID")
            .fetch_one(&mut db)
            .await
            .unwrap();
        assert!(v4.try_get::<Uuid7, _>(0).is_err());
        // An ID is not a UUID: the server refuses the BIGINT where a UUID is wanted, so
        // nothing is written as something else.
        let wrong = sqlx::query("SELECT $1::UUID")
            .bind(ids[3])
            .fetch_one(&mut db)
            .await;
        assert!(wrong.is_err());
    });
}
