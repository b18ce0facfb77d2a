//! `idgen decode`: what IDs of any kind say, as lines or JSON.

use clap::Args;
use idgen::Preset;
use idgen_cli::input::shown;
use serde_json::Value;

use crate::api::Decoded;
use crate::args::layout::LayoutArgs;
use crate::decoding::decode_any;
use crate::failure::Failure;
use crate::output::json_text;
use crate::time::rfc3339_ms;

#[derive(Args)]
pub struct DecodeArgs {
    /// IDs: Snowflake IDs in canonical decimal or 13-character base32, UUIDv7s (36
    /// characters) or ULIDs (26); with --preset, that preset's IDs in decimal (0 to
    /// 2^64 - 1 where it uses all 64 bits). Opaque IDs are decoded by `idgen opaque decode`.
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
        if let Some(preset) = self.layout.preset()? {
            return self.run_preset(preset);
        }
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

impl DecodeArgs {
    /// Decodes with a preset: its own fields, by its owner's names.
    fn run_preset(self, preset: Preset) -> Result<(), Failure> {
        let mut bad = Vec::new();
        for text in &self.ids {
            match parse_u64(text, preset).and_then(|id| {
                preset
                    .decode(id)
                    .map(|parts| (id, parts))
                    .map_err(|error| error.to_string())
            }) {
                Ok((id, parts)) if self.json => {
                    // Written by hand to keep the keys in the order plain `decode` has.
                    let mut pairs = vec![
                        ("id".to_owned(), Value::String(id.to_string())),
                        ("kind".to_owned(), Value::String("snowflake".into())),
                        ("preset".to_owned(), Value::String(preset.name().into())),
                        (
                            "createdAt".to_owned(),
                            Value::String(rfc3339_ms(parts.unix_ms)),
                        ),
                        ("unixMs".to_owned(), Value::from(parts.unix_ms)),
                    ];
                    for (name, value) in &parts.fields {
                        pairs.push((camel_case(name), Value::from(*value)));
                    }
                    let members: Vec<String> = pairs
                        .iter()
                        .map(|(key, value)| format!("{}:{value}", Value::String(key.clone())))
                        .collect();
                    println!("{{{}}}", members.join(","));
                }
                Ok((id, parts)) => {
                    let fields: Vec<String> = parts
                        .fields
                        .iter()
                        .map(|(name, value)| format!("{name} {value}"))
                        .collect();
                    println!("{id}  {}  {}", rfc3339_ms(parts.unix_ms), fields.join("  "));
                }
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

/// A decimal ID of `preset`: digits only, no sign, no leading zero, at most its largest.
fn parse_u64(text: &str, preset: Preset) -> Result<u64, String> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical
        .then(|| text.parse::<u64>().ok())
        .flatten()
        .filter(|&id| id <= preset.max_id())
        .ok_or_else(|| {
            format!(
                "invalid {preset} ID {:?} (--preset, or IDGEN_PRESET): a decimal number from 0 \
                 to {}, no sign or leading zero",
                shown(text),
                preset.max_id()
            )
        })
}

/// `sequence data` as `sequenceData`, for JSON keys.
fn camel_case(name: &str) -> String {
    let mut words = name.split(' ');
    let mut key = words.next().unwrap_or_default().to_owned();
    for word in words {
        let mut letters = word.chars();
        if let Some(first) = letters.next() {
            key.extend(first.to_uppercase());
            key.push_str(letters.as_str());
        }
    }
    key
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
