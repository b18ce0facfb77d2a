//! Opaque public IDs in the command: the key file, the `form` the service's `/v1/ids`
//! takes, and the Snowflake ID behind an opaque one. `idgen opaque encode|decode` is
//! `commands::opaque`.

use std::path::Path;

use idgen::opaque::{Codec, KeyFile, OpaqueId};
use idgen_cli::input::shown;

use crate::failure::Failure;

/// The variable that names the key file when the flag is not given.
pub const KEY_FILE_VARIABLE: &str = "IDGEN_OPAQUE_KEY_FILE";

/// The codec of the key file at `path`. A key file others can read is used, with a
/// warning given to `warn`; no message ever shows a key.
pub fn load_codec(path: &Path, warn: impl Fn(&str)) -> Result<Codec, Failure> {
    let file = KeyFile::read(path).map_err(|error| Failure::input(error.to_string()))?;
    if let Some(mode) = file.loose_permissions() {
        warn(&format!(
            "the opaque key file {} has mode {mode:04o}: others than its owner may read the \
             keys (chmod 600 it)",
            path.display()
        ));
    }
    Ok(file.codec())
}

/// How `/v1/ids` writes Snowflake IDs: as they are, or as opaque IDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    Plain,
    Opaque,
}

impl Form {
    pub const NAMES: &str = r#""plain" or "opaque""#;

    /// The form a request names, exactly.
    pub fn parse(text: &str) -> Result<Form, String> {
        match text {
            "plain" => Ok(Form::Plain),
            "opaque" => Ok(Form::Opaque),
            _ => Err(format!(
                "form must be {}; got {:?}",
                Form::NAMES,
                shown(text)
            )),
        }
    }
}

/// The Snowflake ID behind `opaque`, parsed from `text`.
pub fn decode_parsed(codec: &Codec, text: &str, opaque: OpaqueId) -> Result<idgen::Id, String> {
    codec
        .decode(opaque)
        .map_err(|error| format!("{:?}: {error}", shown(text)))
}
