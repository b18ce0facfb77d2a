//! What the lease API's requests send, read and checked: the holder's name of a new lease,
//! and the last millisecond a release says it used.

use axum::http::{HeaderMap, header};
use idgen_cli::input::whole_number;
use serde_json::{Map, Value};

use crate::api::{LEASE_BODY_FIELDS, RELEASE_BODY_FIELDS};
use crate::http::plumbing::{ApiError, read_json_object};

/// The longest holder name, in characters.
pub const MAX_HOLDER_CHARS: usize = 128;

/// `holder`: 1 to 128 characters, none of them a control character.
pub fn holder_name(fields: &Map<String, Value>) -> Result<String, ApiError> {
    if let Some(other) = fields
        .keys()
        .find(|key| !LEASE_BODY_FIELDS.contains(&key.as_str()))
    {
        return Err(ApiError::bad(format!(
            "unknown field {other:?}: send {{\"holder\": \"a name for operators\"}}"
        )));
    }
    let holder = match fields.get("holder") {
        Some(Value::String(holder)) => holder,
        Some(_) => return Err(ApiError::bad("holder must be a string")),
        None => {
            return Err(ApiError::bad(
                r#"holder is missing: send {"holder": "a name for operators"}"#,
            ));
        }
    };
    let chars = holder.chars().count();
    if chars == 0 || chars > MAX_HOLDER_CHARS {
        return Err(ApiError::bad(format!(
            "holder must be 1 to {MAX_HOLDER_CHARS} characters; got {chars}"
        )));
    }
    if holder.chars().any(char::is_control) {
        return Err(ApiError::bad(
            "holder must be printable: no control characters",
        ));
    }
    Ok(holder.clone())
}

/// The optional body of a release: nothing, or `{"lastUsedMs": N}`.
pub async fn last_used_ms(
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Option<u64>, ApiError> {
    let empty = headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|length| length == "0")
        || (!headers.contains_key(header::CONTENT_TYPE)
            && !headers.contains_key(header::CONTENT_LENGTH)
            && !headers.contains_key(header::TRANSFER_ENCODING));
    if empty {
        return Ok(None);
    }
    let fields = read_json_object(headers, body, r#"{"lastUsedMs": 1767225600000}"#).await?;
    if let Some(other) = fields
        .keys()
        .find(|key| !RELEASE_BODY_FIELDS.contains(&key.as_str()))
    {
        return Err(ApiError::bad(format!(
            "unknown field {other:?}: send nothing, or {{\"lastUsedMs\": N}}"
        )));
    }
    match fields.get("lastUsedMs") {
        None => Ok(None),
        // At most 2^63 - 1, as the document says (an int64): a later mark would be clamped
        // to the last one written anyway.
        Some(value) => whole_number(value)
            .filter(|&ms| i64::try_from(ms).is_ok())
            .map(Some)
            .ok_or_else(|| {
                ApiError::bad(
                    "lastUsedMs must be a whole number of Unix milliseconds, 0 to 2^63 - 1",
                )
            }),
    }
}
