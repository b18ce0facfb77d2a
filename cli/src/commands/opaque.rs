//! `idgen opaque encode|decode`: opaque public IDs from Snowflake IDs and back, with a key
//! file.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use idgen::opaque::{Codec, OpaqueId};
use idgen_cli::input::shown;

use crate::decoding::parse_id;
use crate::failure::Failure;
use crate::opaque::{KEY_FILE_VARIABLE, decode_parsed, load_codec};
use crate::output::write_lines;

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
        write_lines(&results)
    }
}

fn encode_text(codec: &Codec, text: &str) -> Result<String, String> {
    if text.parse::<OpaqueId>().is_ok() {
        return Err(format!(
            "{:?} is already an opaque ID: encode takes Snowflake IDs",
            shown(text)
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
