//! With the `sqlx` feature: [`Id`](crate::Id) and [`Uuid7`](crate::Uuid7) as sqlx's
//! `Type`/`Encode`/`Decode` for PostgreSQL (`BIGINT` and `UUID`, arrays included), with the
//! same rules as the `postgres` feature's: a wrong value is an error, never a different ID.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueRef};
use sqlx::{Decode, Encode, Postgres, Type};

use crate::{Id, Uuid7};

impl Type<Postgres> for Id {
    fn type_info() -> PgTypeInfo {
        <i64 as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <i64 as Type<Postgres>>::compatible(ty)
    }
}

impl PgHasArrayType for Id {
    fn array_type_info() -> PgTypeInfo {
        <i64 as PgHasArrayType>::array_type_info()
    }
}

impl Encode<'_, Postgres> for Id {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<Postgres>>::encode_by_ref(&self.as_i64(), buf)
    }
}

impl<'r> Decode<'r, Postgres> for Id {
    fn decode(value: PgValueRef<'r>) -> Result<Id, BoxDynError> {
        let value = <i64 as Decode<Postgres>>::decode(value)?;
        Ok(Id::try_from(value)?)
    }
}

impl Type<Postgres> for Uuid7 {
    fn type_info() -> PgTypeInfo {
        // By OID (PostgreSQL's fixed `uuid` and `uuid[]`): no catalog lookup, no
        // search_path.
        PgTypeInfo::with_oid(Oid(2950))
    }
}

impl PgHasArrayType for Uuid7 {
    fn array_type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(Oid(2951))
    }
}

impl Encode<'_, Postgres> for Uuid7 {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        buf.extend_from_slice(self.as_bytes());
        Ok(IsNull::No)
    }
}

impl<'r> Decode<'r, Postgres> for Uuid7 {
    fn decode(value: PgValueRef<'r>) -> Result<Uuid7, BoxDynError> {
        let bytes: [u8; 16] = match value.format() {
            sqlx::postgres::PgValueFormat::Binary => value.as_bytes()?.try_into()?,
            sqlx::postgres::PgValueFormat::Text => {
                return Ok(value.as_str()?.parse::<Uuid7>()?);
            }
        };
        Ok(Uuid7::from_bytes(bytes)?)
    }
}
