//! With the `ulid` feature: [`Ulid`] to and from `ulid::Ulid`, the same 128 bits.

use crate::Ulid;

/// With the `ulid` feature: the `ulid` crate's type, same 128 bits.
impl From<Ulid> for ulid::Ulid {
    fn from(value: Ulid) -> ulid::Ulid {
        ulid::Ulid(value.as_u128())
    }
}

/// With the `ulid` feature: every `ulid::Ulid` is a ULID.
impl From<ulid::Ulid> for Ulid {
    fn from(value: ulid::Ulid) -> Ulid {
        Ulid::from_u128(value.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC_EXAMPLE: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

    #[test]
    fn converts_to_and_from_the_ulid_crate() {
        let ulid: Ulid = SPEC_EXAMPLE.parse().unwrap();
        let theirs: ulid::Ulid = ulid.into();
        assert_eq!(theirs.to_string(), SPEC_EXAMPLE);
        assert_eq!(Ulid::from(theirs), ulid);
    }
}
