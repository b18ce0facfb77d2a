//! What the store writes under its namespace and how it is read back: the holder key's token
//! and the revision of an answer (the text forms every store shares are in `lease::records`).
//! Uses nothing else of the folder.

use crate::lease::records::unique_claim;
pub(super) use crate::lease::records::{
    AFTER_RESTORE, RESTORE_FOUND, after_restore_ms, namespace_prefix, parse_mark, restore_found_ms,
    wall_unix_ms,
};

pub(super) fn revision_of(response: &etcd_client::TxnResponse) -> i64 {
    response.header().map_or(0, |header| header.revision())
}

/// A value no other claim has: the holder's name, then [`unique_claim`]'s (this process
/// and host, the time, a per-process count and 128 random bits).
pub(super) fn claim_token(holder: &str) -> Result<String, crate::Error> {
    let claim = unique_claim()?;
    Ok(if holder.is_empty() {
        claim
    } else {
        format!("{holder}{HOLDER_SEPARATOR}{claim}")
    })
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
