//! What the networked stores write as text and read back: namespaces, marks in decimal,
//! the restore markers of a store's state, and claim tokens. Shared by `etcd/` and
//! `postgres/`, so that an operator reads the same forms in both.

use crate::Error;
use crate::sync::{AtomicU64, Ordering};

/// `"/idgen/prod"` → `"/idgen/prod/"`, after checking it is a sensible name: letters,
/// digits, `/`, `-`, `_`, `.`; not empty, no `//`, at most 200 bytes.
pub(crate) fn namespace_prefix(namespace: &str) -> Result<String, Error> {
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
                "the lease namespace {namespace:?} is not a name such as /idgen/prod \
                 (letters, digits, '/', '-', '_', '.'; not empty, no '//')"
            ),
        });
    }
    Ok(format!("{trimmed}/"))
}

/// In a store's state after `init --after-restore`, before the Unix ms it ran at.
pub(crate) const AFTER_RESTORE: &str = "after-restore ";

/// In a store's state once a holder found the store gone back in time.
pub(crate) const RESTORE_FOUND: &str = "restore-found ";

/// When a holder found the store gone back in time, if this state says so.
pub(crate) fn restore_found_ms(state: &str) -> Option<u64> {
    let (_, rest) = state.split_once(RESTORE_FOUND)?;
    parse_mark(rest.split(' ').next()?).ok()
}

/// When `init --after-restore` wrote this state, if it did.
pub(crate) fn after_restore_ms(state: &str) -> Option<u64> {
    let (_, rest) = state.split_once(AFTER_RESTORE)?;
    parse_mark(rest.split(' ').next()?).ok()
}

/// Unix milliseconds on this host's wall clock: what the restore step's time is compared
/// with (both are wall-clock readings, of the operator's host and of the holder's).
pub(crate) fn wall_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

pub(crate) fn parse_mark(text: &str) -> Result<u64, String> {
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

/// A value no other claim has: this process and host, the time and a per-process count
/// (for the operator reading it), and 128 random bits from the operating system, which
/// alone keep it unique where the rest repeats (a container's pid and host name reused, a
/// clock stepped back). Fails with [`Error::LeaseStore`] when the OS's random source
/// cannot be read: a token that might repeat is not handed to a store.
pub(crate) fn unique_claim() -> Result<String, Error> {
    static CLAIMS: AtomicU64 = AtomicU64::new(0);
    let count = CLAIMS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let random = os_random_128().map_err(|error| Error::LeaseStore {
        reason: format!("cannot read 128 random bits for a claim token from /dev/urandom: {error}"),
    })?;
    Ok(format!(
        "pid {} on {} claim {nanos}-{count} {random:032x}",
        std::process::id(),
        host_name()
    ))
}

/// 128 bits from the operating system's random source.
fn os_random_128() -> std::io::Result<u128> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(u128::from_le_bytes(bytes))
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
        for bad in ["", "/", "a b", "x//y", "naïve", "a\0b", "a'b"] {
            assert!(namespace_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn claim_tokens_carry_128_random_bits_that_differ_each_time() {
        let tokens: Vec<String> = (0..64).map(|_| unique_claim().unwrap()).collect();
        let randoms: std::collections::HashSet<&str> = tokens
            .iter()
            .map(|token| token.rsplit(' ').next().unwrap())
            .collect();
        assert_eq!(randoms.len(), tokens.len(), "{tokens:?}");
        for random in randoms {
            assert_eq!(random.len(), 32, "{random}");
            assert!(random.bytes().all(|b| b.is_ascii_hexdigit()), "{random}");
        }
        // The readable part is still there for the operator.
        assert!(tokens[0].starts_with(&format!("pid {} on ", std::process::id())));
    }

    #[test]
    fn marks_are_canonical_decimal() {
        assert_eq!(parse_mark("1764000000000"), Ok(1_764_000_000_000));
        for bad in ["", "-1", "01", "1e3", " 1", "18446744073709551616"] {
            assert!(parse_mark(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn restore_markers_read_back() {
        assert_eq!(restore_found_ms("restore-found 17 by pid 3"), Some(17));
        assert_eq!(
            after_restore_ms("idgen-lease-store v1 after-restore 42"),
            Some(42)
        );
        assert_eq!(restore_found_ms("initialised"), None);
        assert_eq!(after_restore_ms("after-restore x"), None);
    }
}
