//! Opaque public IDs in the command: the key file, `idgen opaque encode|decode`, and the
//! `form` the service's `/v1/ids` takes.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use idgen::opaque::{Codec, KeyFile, OpaqueId};

use crate::{Failure, kinds, parse_id};

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
                kinds::shown(text)
            )),
        }
    }
}

#[derive(Args)]
pub struct OpaqueArgs {
    #[command(subcommand)]
    command: OpaqueCommand,
}

#[derive(Subcommand)]
enum OpaqueCommand {
    /// Print the opaque form of each Snowflake ID (decimal or base32), one per line, made
    /// with the key file's first key.
    Encode(CodecArgs),
    /// Print the Snowflake ID (decimal) behind each opaque ID, one per line; any key of the
    /// key file decodes.
    Decode(CodecArgs),
}

#[derive(Args)]
struct CodecArgs {
    /// The key file: one key per line, `HEX` or `ID HEX` (at least 32 hex digits); the
    /// first line encodes, every line decodes.
    #[arg(long, value_name = "FILE", env = KEY_FILE_VARIABLE, hide_env_values = true)]
    key_file: PathBuf,
    /// The IDs (encode) or opaque IDs (decode).
    #[arg(required = true, value_name = "TEXT")]
    inputs: Vec<String>,
}

impl OpaqueArgs {
    /// Every input is checked before anything is printed: with one bad input, nothing goes
    /// to stdout, every bad input is listed, and the exit code is 2, so a script never
    /// pairs results with the wrong inputs.
    pub fn run(self) -> Result<(), Failure> {
        let (args, encoding) = match self.command {
            OpaqueCommand::Encode(args) => (args, true),
            OpaqueCommand::Decode(args) => (args, false),
        };
        let codec = load_codec(&args.key_file, |warning| {
            eprintln!("idgen: warning: {warning}");
        })?;
        let mut bad = Vec::new();
        let mut results = Vec::with_capacity(args.inputs.len());
        for text in &args.inputs {
            let result = if encoding {
                encode_text(&codec, text)
            } else {
                decode_text(&codec, text).map(|id| id.to_string())
            };
            match result {
                Ok(line) => results.push(line),
                Err(reason) => bad.push(reason),
            }
        }
        if !bad.is_empty() {
            return Err(Failure::input(bad.join("\nidgen: ")));
        }
        crate::write_lines(&results)
    }
}

fn encode_text(codec: &Codec, text: &str) -> Result<String, String> {
    if text.parse::<OpaqueId>().is_ok() {
        return Err(format!(
            "{:?} is already an opaque ID: encode takes Snowflake IDs",
            kinds::shown(text)
        ));
    }
    Ok(codec.encode(parse_id(text)?).to_string())
}

/// The Snowflake ID behind the opaque ID `text`, or why there is none.
fn decode_text(codec: &Codec, text: &str) -> Result<idgen::Id, String> {
    let opaque: OpaqueId = text
        .parse()
        .map_err(|error: idgen::Error| error.to_string())?;
    decode_parsed(codec, text, opaque)
}

/// The Snowflake ID behind `opaque`, parsed from `text`.
pub fn decode_parsed(codec: &Codec, text: &str, opaque: OpaqueId) -> Result<idgen::Id, String> {
    codec
        .decode(opaque)
        .map_err(|error| format!("{:?}: {error}", kinds::shown(text)))
}
