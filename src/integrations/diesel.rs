//! With the `diesel` feature: [`Id`](crate::Id) as diesel's PostgreSQL `BIGINT` and
//! [`Uuid7`](crate::Uuid7) as its `UUID` (`ToSql`, `FromSql`; the `AsExpression` and
//! `FromSqlRow` derives sit on the types), so that both go in `table!` columns, filters
//! and `Queryable` structs as they are.
//!
//! As with the `postgres` feature: an `Id` is the `BIGINT` of the same value (every ID
//! fits, and `ORDER BY` is ID order); reading a negative `BIGINT` as an `Id`, or a `UUID`
//! of another version as a `Uuid7`, is an error, never a different ID.

use std::io::Write;

use diesel::deserialize::{self, FromSql};
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{self, IsNull, Output, ToSql};
use diesel::sql_types::{BigInt, Uuid};

use crate::{Id, Uuid7};

impl ToSql<BigInt, Pg> for Id {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        out.write_all(&self.as_i64().to_be_bytes())?;
        Ok(IsNull::No)
    }
}

impl FromSql<BigInt, Pg> for Id {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Id> {
        let value = <i64 as FromSql<BigInt, Pg>>::from_sql(value)?;
        Ok(Id::try_from(value)?)
    }
}

impl ToSql<Uuid, Pg> for Uuid7 {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        out.write_all(self.as_bytes())?;
        Ok(IsNull::No)
    }
}

impl FromSql<Uuid, Pg> for Uuid7 {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Uuid7> {
        let raw = value.as_bytes();
        let bytes: [u8; 16] = raw
            .try_into()
            .map_err(|_| format!("a UUID is 16 bytes, not {}", raw.len()))?;
        Ok(Uuid7::from_bytes(bytes)?)
    }
}
