//! The service's input rules on any bytes: a query string for `/v1/ids` and a JSON body
//! with `count`, `kind` and `form` (or a release's `lastUsedMs`). Nothing panics; an
//! accepted count is 1 to the maximum, and a whole number is the number JSON wrote.
#![no_main]

use idgen_cli::input;
use libfuzzer_sys::fuzz_target;

const MAX: usize = 10_000;

fuzz_target!(|bytes: &[u8]| {
    // The query string, as axum hands it over (any UTF-8; percent-decoding is ours).
    if let Ok(query) = std::str::from_utf8(bytes)
        && let Ok(pairs) = input::query_pairs(query)
    {
        assert!(
            pairs
                .iter()
                .all(|(key, _)| input::ID_PARAMETERS.contains(&key.as_str()))
        );
        if let Ok(count) = input::count_from_query(&pairs, MAX) {
            assert!((1..=MAX).contains(&count));
        }
        let _ = input::once_in_query(&pairs, &["kind"], "twice");
    }
    // The body.
    if let Ok(fields) = input::json_object(bytes, "{}") {
        if let Some(count) = fields.get("count")
            && let Ok(count) = input::count_from_json(count, MAX)
        {
            assert!((1..=MAX).contains(&count));
        }
        let _ = input::named_field(&fields, "kind", "a kind", |text| Ok(text.len()));
        if let Some(value) = fields.get("lastUsedMs")
            && let Some(whole) = input::whole_number(value)
        {
            let number = value.as_number().unwrap();
            match number.as_u64() {
                Some(exact) => assert_eq!(whole, exact),
                None => assert_eq!(whole as f64, number.as_f64().unwrap()),
            }
        }
    }
    let shown = input::shown(&String::from_utf8_lossy(bytes));
    assert!(shown.chars().count() <= 67);
});
