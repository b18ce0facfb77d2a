//! `idgen openapi`: the service's OpenAPI 3.1 document on stdout, as `GET /openapi.json`
//! serves it and `docs/openapi.json` holds it.

use crate::failure::Failure;
use crate::http::document_text;
use crate::output::write_lines;

pub fn run() -> Result<(), Failure> {
    write_lines(&[document_text().trim_end().to_string()])
}
