//! `idgen next`: IDs on stdout, Snowflake IDs from a worker number leased for the run, or
//! UUIDv7s and ULIDs, which need none.

use clap::{Args, ValueEnum};

use crate::args::layout::LayoutArgs;
use crate::args::lease::LeaseArgs;
use crate::failure::Failure;
use crate::kinds::{CountedGenerators, Kind, as_text};
use crate::output::{write_json_array, write_lines};

#[derive(Args)]
pub struct NextArgs {
    /// How many IDs.
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    count: usize,
    /// Which kind: Snowflake IDs from a leased worker number, or UUIDv7s or ULIDs (128
    /// bits, no worker number needed: nothing is leased, and the lease flags are not used).
    #[arg(long, value_enum, default_value_t = Kind::Snowflake)]
    kind: Kind,
    /// Output format: one per line in decimal or base32, or a JSON array of strings.
    /// UUIDv7s and ULIDs are written in their own text form: decimal or json only.
    #[arg(long, value_enum, default_value_t = Format::Decimal)]
    format: Format,
    #[command(flatten)]
    lease: LeaseArgs,
    #[command(flatten)]
    layout: LayoutArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Decimal,
    Base32,
    Json,
}

impl NextArgs {
    pub fn run(self) -> Result<(), Failure> {
        if self.count == 0 {
            return Err(Failure::input("-n must be at least 1"));
        }
        // Checked for every kind, so that a bad flag is never silently ignored.
        let layout = self.layout.layout()?;
        if self.kind != Kind::Snowflake {
            return self.next_counted();
        }
        let generator = self.lease.acquire(layout)?;
        let ids = generator
            .next_ids(self.count)
            .map_err(|error| Failure::runtime(error.to_string()))?;
        generator
            .release()
            .map_err(|error| Failure::runtime(error.to_string()))?;
        let text = match self.format {
            Format::Base32 => as_text(ids.iter().map(|id| id.to_base32()).collect()),
            _ => as_text(ids),
        };
        write_ids(&text, self.format)
    }

    /// `idgen next --kind uuidv7|ulid`: no worker number, so nothing to lease.
    fn next_counted(self) -> Result<(), Failure> {
        if matches!(self.format, Format::Base32) {
            return Err(Failure::input(format!(
                "--format base32 is for Snowflake IDs; a {} has its own text form (use decimal or json)",
                self.kind.name()
            )));
        }
        let ids = CountedGenerators::new()?
            .issue(self.kind, self.count)
            .unwrap_or(Ok(Vec::new()))
            .map_err(|error| Failure::runtime(error.to_string()))?;
        write_ids(&ids, self.format)
    }
}

/// One ID per line, or (`--format json`) one JSON array of strings.
fn write_ids(ids: &[String], format: Format) -> Result<(), Failure> {
    match format {
        Format::Json => write_json_array(ids),
        _ => write_lines(ids),
    }
}
