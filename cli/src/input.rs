//! The rules for the service's untrusted input that need no HTTP: query strings, counts,
//! JSON bodies and their fields. A library target of the command's package, so that the
//! fuzz targets in `fuzz/` call exactly what the service runs. Every error is a message
//! for a 400 answer; nothing here panics, whatever the input.

use serde_json::{Map, Value};

/// Untrusted text as an error message shows it: at most 64 characters.
pub fn shown(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// A JSON body that must be an object; `example` shows one in the error for anything else.
pub fn json_object(body: &[u8], example: &str) -> Result<Map<String, Value>, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|error| format!("malformed JSON: {error}"))?;
    match value {
        Value::Object(fields) => Ok(fields),
        _ => Err(format!("the body must be a JSON object such as {example}")),
    }
}

/// The body field `name`, if given: a string that `parse` accepts (`names` says which).
pub fn named_field<T>(
    fields: &Map<String, Value>,
    name: &str,
    names: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    match fields.get(name) {
        None => Ok(None),
        Some(Value::String(text)) => parse(text).map(Some),
        Some(other) => Err(format!("{name} must be {names}; got {other}")),
    }
}

/// The parameters `/v1/ids` takes: anything else (a misspelt `Kind=ulid`) is refused rather
/// than ignored, so a request never silently gets another kind than it asked for.
pub const ID_PARAMETERS: [&str; 4] = ["count", "n", "kind", "form"];

/// A query string's parameters, percent-decoded; any but [`ID_PARAMETERS`] is a 400.
pub fn query_pairs(query: &str) -> Result<Vec<(String, String)>, String> {
    query_pairs_among(
        query,
        &ID_PARAMETERS,
        "/v1/ids takes count (or n), kind and form",
    )
}

/// A query string's parameters, percent-decoded; any but `allowed` is refused, with
/// `takes` (what the route takes) in the error.
pub fn query_pairs_among(
    query: &str,
    allowed: &[&str],
    takes: &str,
) -> Result<Vec<(String, String)>, String> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    if let Some((key, _)) = pairs
        .iter()
        .find(|(key, _)| !allowed.contains(&key.as_str()))
    {
        return Err(format!("unknown parameter {:?}: {takes}", shown(key)));
    }
    Ok(pairs)
}

/// The value of the one parameter named by any of `keys`, if there is one; `twice` is the
/// error for a query that gives it more than once.
pub fn once_in_query<'q>(
    pairs: &'q [(String, String)],
    keys: &[&str],
    twice: &str,
) -> Result<Option<&'q str>, String> {
    let mut found = None;
    for (key, value) in pairs {
        if keys.contains(&key.as_str()) {
            if found.is_some() {
                return Err(twice.to_string());
            }
            found = Some(value.as_str());
        }
    }
    Ok(found)
}

/// `count=N` or `n=N`, exactly once.
pub fn count_from_query(pairs: &[(String, String)], max: usize) -> Result<usize, String> {
    let found = once_in_query(
        pairs,
        &["count", "n"],
        "give the count once, as count=N or n=N",
    )?;
    let Some(text) = found else {
        return Err("count is missing: ask for /v1/ids?count=N".to_string());
    };
    let digits = text.strip_prefix('-').unwrap_or(text);
    let whole = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    if !whole {
        return Err(format!("count must be a whole number; got {text:?}"));
    }
    if text.starts_with('-') {
        return Err(format!("count must be at least 1; got {text}"));
    }
    // Digits only: a failed parse can only mean too large.
    let count = text.parse::<u64>().unwrap_or(u64::MAX);
    check_count(count, max)
}

pub fn count_from_json(value: &Value, max: usize) -> Result<usize, String> {
    let Value::Number(number) = value else {
        return Err(format!("count must be a number; got {value}"));
    };
    if let Some(count) = number.as_u64() {
        return check_count(count, max);
    }
    if let Some(negative) = number.as_i64() {
        return Err(format!("count must be at least 1; got {negative}"));
    }
    match number.as_f64() {
        // A whole number written with a fraction part or an exponent (5.0, 5e3): JSON does
        // not tell them apart from 5 and 5000. Beyond 2^53 a float is not exact: too large.
        Some(float) if float.fract() == 0.0 && (1.0..=9_007_199_254_740_992.0).contains(&float) => {
            check_count(float as u64, max)
        }
        Some(float) if float.fract() == 0.0 && float >= 1.0 => check_count(u64::MAX, max),
        Some(float) if float < 1.0 && float.fract() == 0.0 => {
            Err(format!("count must be at least 1; got {number}"))
        }
        _ => Err(format!("count must be a whole number; got {number}")),
    }
}

/// A JSON number that is a whole number from 0 to 2^64 - 1, written as an integer or (JSON
/// does not tell them apart) as `5.0` or `5e3`; a float beyond 2^53 is not exact, so none.
pub fn whole_number(value: &Value) -> Option<u64> {
    let Value::Number(number) = value else {
        return None;
    };
    number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|float| float.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(float))
            .map(|float| float as u64)
    })
}

pub fn check_count(count: u64, max: usize) -> Result<usize, String> {
    if count == 0 {
        return Err("count must be at least 1; got 0".to_string());
    }
    match usize::try_from(count) {
        Ok(count) if count <= max => Ok(count),
        _ if count == u64::MAX => Err(format!("count is above the maximum of {max}")),
        _ => Err(format!("count {count} is above the maximum of {max}")),
    }
}
