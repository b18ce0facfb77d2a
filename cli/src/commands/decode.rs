//! `idgen decode`: what IDs of any kind say, as lines or JSON.

use clap::Args;

use crate::api::Decoded;
use crate::args::layout::LayoutArgs;
use crate::decoding::decode_any;
use crate::failure::Failure;
use crate::output::json_text;

#[derive(Args)]
pub struct DecodeArgs {
    /// IDs: Snowflake IDs in canonical decimal or 13-character base32, UUIDv7s (36
    /// characters) or ULIDs (26). Opaque IDs are decoded by `idgen opaque decode`.
    #[arg(required = true)]
    ids: Vec<String>,
    /// One JSON object per ID, one per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    layout: LayoutArgs,
}

impl DecodeArgs {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        let mut bad = Vec::new();
        for text in &self.ids {
            let opaque = Err("which idgen opaque decode --key-file FILE decodes");
            match decode_any(&layout, opaque, text) {
                Ok(decoded) if self.json => println!("{}", json_text(&decoded)),
                Ok(decoded) => println!("{}", decoded_line(&decoded)),
                Err(reason) => bad.push(reason),
            }
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(Failure::input(bad.join("\nidgen: ")))
        }
    }
}

/// One line of `idgen decode`'s text output for a decoded ID.
fn decoded_line(decoded: &Decoded) -> String {
    match (decoded.datacenter, decoded.worker, decoded.sequence) {
        (Some(datacenter), Some(worker), Some(sequence)) => format!(
            "{}  {}  datacenter {datacenter}  worker {worker}  sequence {sequence}",
            decoded.id, decoded.created_at
        ),
        _ => format!(
            "{}  {}  {}",
            decoded.id,
            decoded.created_at,
            decoded.kind.name()
        ),
    }
}
