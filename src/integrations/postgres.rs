//! With the `postgres` feature: [`Id`](crate::Id) and [`Uuid7`](crate::Uuid7) as the
//! `postgres` crate's `ToSql`/`FromSql`: a `BIGINT` of the same value and a `UUID`.
//!
//! An `Id` is stored as the `BIGINT` of the same value: IDs are below 2^63, so every ID
//! fits, and `ORDER BY` on the column is the order of the IDs. Reading a negative `BIGINT`
//! fails (it is not an ID), as does reading a `UUID` that is not version 7 into a `Uuid7`:
//! a wrong value is an error, never a different ID.

use std::error::Error as StdError;

use bytes::BytesMut;
use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::{Id, Uuid7};

type Boxed = Box<dyn StdError + Sync + Send>;

impl ToSql for Id {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Boxed> {
        self.as_i64().to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Id {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Id, Boxed> {
        let value = i64::from_sql(ty, raw)?;
        Ok(Id::try_from(value)?)
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as FromSql>::accepts(ty)
    }
}

impl ToSql for Uuid7 {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Boxed> {
        out.extend_from_slice(self.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Uuid7 {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Uuid7, Boxed> {
        let bytes: [u8; 16] = raw
            .try_into()
            .map_err(|_| format!("a UUID is 16 bytes, not {}", raw.len()))?;
        Ok(Uuid7::from_bytes(bytes)?)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }
}
