//! What the store writes under its namespace and how it is read back: the namespace prefix,
//! the holder key's token, the marks' decimal form and the `store` key's restore markers.
//! Uses nothing else of the folder.

use crate::Error;
use crate::sync::{AtomicU64, Ordering};

pub(super) fn revision_of(response: &etcd_client::TxnResponse) -> i64 {
    response.header().map_or(0, |header| header.revision())
}

/// A value no other claim has: the holder's name, this process and host, the time, and a
/// per-process count.
pub(super) fn claim_token(holder: &str) -> String {
    static CLAIMS: AtomicU64 = AtomicU64::new(0);
    let count = CLAIMS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let claim = format!(
        "pid {} on {} claim {nanos}-{count}",
        std::process::id(),
        host_name()
    );
    if holder.is_empty() {
        claim
    } else {
        format!("{holder}{HOLDER_SEPARATOR}{claim}")
    }
}

/// Between a holder's name and the rest of its token.
const HOLDER_SEPARATOR: &str = " | ";

/// The holder's name in a holder key's value: the part before the claim, or all of it.
pub(super) fn holder_of(token: &str) -> String {
    token
        .rsplit_once(HOLDER_SEPARATOR)
        .map_or(token, |(holder, _)| holder)
        .to_string()
}

/// `"/idgen/prod"` → `"/idgen/prod/"`, after checking it is a sensible key prefix.
pub(super) fn namespace_prefix(namespace: &str) -> Result<String, Error> {
    let trimmed = namespace.trim_end_matches('/');
    let sensible = !trimmed.is_empty()
        && trimmed.len() <= 200
        && !trimmed.contains("//")
        && trimmed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b));
    if !sensible {
        return Err(Error::LeaseConfig {
            reason: format!(
                "the etcd namespace {namespace:?} is not a key prefix such as /idgen/prod \
                 (letters, digits, '/', '-', '_', '.'; not empty, no '//')"
            ),
        });
    }
    Ok(format!("{trimmed}/"))
}

/// In the `store` key's value after `init --after-restore`, before the Unix ms it ran at.
pub(super) const AFTER_RESTORE: &str = "after-restore ";

/// In the `store` key's value once a holder found the store gone back in time.
pub(super) const RESTORE_FOUND: &str = "restore-found ";

/// When a holder found the store gone back in time, if this `store` key value says so.
pub(super) fn restore_found_ms(store_value: &str) -> Option<u64> {
    let (_, rest) = store_value.split_once(RESTORE_FOUND)?;
    parse_mark(rest.split(' ').next()?).ok()
}

/// Unix milliseconds on this host's wall clock: what the restore step's time is compared
/// with (both are wall-clock readings, of the operator's host and of the holder's).
pub(super) fn wall_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// When `init --after-restore` wrote this `store` key value, if it did.
pub(super) fn after_restore_ms(store_value: &str) -> Option<u64> {
    let (_, rest) = store_value.split_once(AFTER_RESTORE)?;
    parse_mark(rest.split(' ').next()?).ok()
}

pub(super) fn parse_mark(text: &str) -> Result<u64, String> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    match text.parse() {
        Ok(mark) if canonical => Ok(mark),
        _ => Err(format!(
            "the mark {text:?} is not a decimal Unix millisecond"
        )),
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "unknown host".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_checked() {
        assert_eq!(namespace_prefix("/idgen/prod").unwrap(), "/idgen/prod/");
        assert_eq!(namespace_prefix("idgen/").unwrap(), "idgen/");
        for bad in ["", "/", "a b", "x//y", "naïve", "a\0b"] {
            assert!(namespace_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn marks_are_canonical_decimal() {
        assert_eq!(parse_mark("1764000000000"), Ok(1_764_000_000_000));
        for bad in ["", "-1", "01", "1e3", " 1", "18446744073709551616"] {
            assert!(parse_mark(bad).is_err(), "{bad:?}");
        }
    }
}
