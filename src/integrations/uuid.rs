//! With the `uuid` feature: [`Uuid7`] to and from `uuid::Uuid`, the type Rust database
//! drivers and web frameworks accept.

use crate::{ParseUuid7Error, Uuid7};

/// With the `uuid` feature: the type Rust database drivers and web frameworks accept.
impl From<Uuid7> for uuid::Uuid {
    fn from(value: Uuid7) -> uuid::Uuid {
        uuid::Uuid::from_bytes(*value.as_bytes())
    }
}

/// With the `uuid` feature: a `uuid::Uuid` that is a version 7 UUID.
impl TryFrom<uuid::Uuid> for Uuid7 {
    type Error = ParseUuid7Error;

    fn try_from(value: uuid::Uuid) -> Result<Uuid7, ParseUuid7Error> {
        Uuid7::from_bytes(value.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: &str = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";

    #[test]
    fn converts_to_and_from_the_uuid_crate() {
        let uuid: Uuid7 = VECTOR.parse().unwrap();
        let theirs: uuid::Uuid = uuid.into();
        assert_eq!(theirs.to_string(), VECTOR);
        assert_eq!(theirs.get_version_num(), 7);
        assert_eq!(Uuid7::try_from(theirs), Ok(uuid));
        assert_eq!(
            Uuid7::try_from(uuid::Uuid::nil()),
            Err(ParseUuid7Error::WrongVersion { version: 0 })
        );
    }
}
