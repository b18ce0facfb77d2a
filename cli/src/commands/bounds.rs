//! `idgen bounds FROM TO`: the IDs made in a span of time, as the two bounding IDs and a
//! ready `WHERE` clause (or JSON), for range queries and cursors.

use clap::Args;

use crate::args::layout::LayoutArgs;
use crate::bounds::{bounds, instant, kind};
use crate::failure::Failure;
use crate::kinds::Kind;
use crate::output::json_text;

#[derive(Args)]
pub struct BoundsArgs {
    /// The span's start: RFC 3339 in UTC (2026-01-01T00:00:00Z) or Unix milliseconds. IDs
    /// made at or after it are inside, by the time embedded in them.
    from: String,
    /// The span's end, in the same forms: IDs made before it are inside.
    to: String,
    /// snowflake (in the layout the flags give), uuidv7 or ulid. Opaque IDs show no time:
    /// they have no bounds.
    #[arg(long, default_value = "snowflake", value_parser = kind)]
    kind: Kind,
    /// As a JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    layout: LayoutArgs,
}

impl BoundsArgs {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        let from = instant("FROM", &self.from).map_err(Failure::input)?;
        let to = instant("TO", &self.to).map_err(Failure::input)?;
        let bounds = bounds(self.kind, &layout, from, to);
        if self.json {
            println!("{}", json_text(&bounds));
            return Ok(());
        }
        match (&bounds.nothing, &bounds.end) {
            (Some(why), _) => println!("[{}, {}) holds no ID: {why}", bounds.from, bounds.to),
            (None, Some(end)) => {
                println!("from {} (inclusive): {}", bounds.from, bounds.start);
                println!("to   {} (exclusive): {end}", bounds.to);
            }
            (None, None) => {
                println!("from {} (inclusive): {}", bounds.from, bounds.start);
                println!(
                    "to   {}: past the last millisecond these IDs can hold, no end",
                    bounds.to
                );
            }
        }
        println!("{}", bounds.where_clause);
        Ok(())
    }
}
