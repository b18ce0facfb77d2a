//! [`Id`] and [`Uuid7`] as database values: a PostgreSQL `BIGINT` and `UUID`, through the
//! `postgres` crate (feature `postgres`) and through sqlx (feature `sqlx`).
//!
//! An [`Id`] is stored as the `BIGINT` of the same value: IDs are below 2^63, so every ID
//! fits, and `ORDER BY` on the column is the order of the IDs. Reading a negative `BIGINT`
//! fails (it is not an ID), as does reading a `UUID` that is not version 7 into a
//! [`Uuid7`]: a wrong value is an error, never a different ID.

#[cfg(feature = "postgres")]
mod postgres_types_impls {
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
}

#[cfg(feature = "sqlx")]
mod sqlx_impls {
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
}
