//! `idgen`: unique, time-sortable IDs (64-bit Snowflake, UUIDv7, ULID) for programs that
//! cannot embed the crate. An HTTP service (`idgen serve`) and operator commands (`next`,
//! `decode`, `layout`, `leases`, `seq`, `opaque`, and `openapi`, its contract).
//!
//! This file is the command line's shape and nothing else: each command is in `commands`,
//! the service's endpoints in `http`, and what both use in the modules beside them.

mod api;
mod args;
mod bounds;
mod commands;
mod decoding;
mod failure;
mod fleet;
mod http;
mod kinds;
mod lifetime;
mod log;
mod opaque;
mod operator_files;
mod output;
mod own_lease;
mod patterns;
mod serve;
mod time;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::bounds::BoundsArgs;
use commands::decode::DecodeArgs;
use commands::layout::LayoutCommand;
use commands::leases::LeasesArgs;
use commands::next::NextArgs;
use commands::opaque::OpaqueArgs;
use commands::seq::SeqArgs;
use commands::serve::ServeArgs;
use commands::sql::SqlArgs;

#[derive(Parser)]
#[command(
    name = "idgen",
    version,
    about = "Unique, time-sortable IDs (Snowflake, UUIDv7, ULID): an HTTP service and a CLI"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve IDs over HTTP (JSON, IDs as strings), holding a leased worker number.
    Serve(ServeArgs),
    /// Print IDs: Snowflake IDs from a worker number leased for the run, or UUIDv7s or ULIDs
    /// (`--kind`), which need none.
    Next(NextArgs),
    /// Show what an ID says: its kind and creation time, and for a Snowflake ID (decimal or
    /// base32) its datacenter, worker and sequence.
    Decode(DecodeArgs),
    /// Show the arithmetic of a layout: lifetime, last instant, workers, rates.
    Layout(LayoutCommand),
    /// Show the IDs made in a span of time [FROM, TO): the first ID at FROM, the first at
    /// TO, and a ready `WHERE id >= ... AND id < ...` for range queries and cursors.
    Bounds(BoundsArgs),
    /// Print PostgreSQL functions (plain SQL) that read a layout's IDs in the database:
    /// creation time, datacenter, worker, sequence, and the first ID of a time.
    Sql(SqlArgs),
    /// Show every worker number of a lease store: free or held, holder, mark, anomalies.
    Leases(LeasesArgs),
    /// Dense values of named sequences (order numbers, invoice numbers) from the block
    /// store: `idgen seq next orders -n 10`.
    Seq(SeqArgs),
    /// Opaque public IDs: Snowflake IDs encrypted with a secret key, so they show no time,
    /// node or volume: `idgen opaque encode --key-file FILE ID...`, and `decode` back.
    Opaque(OpaqueArgs),
    /// Print the service's OpenAPI 3.1 document, as `GET /openapi.json` serves it (and as
    /// `docs/openapi.json` holds it), to generate a client from.
    Openapi,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => args.run(),
        Command::Next(args) => args.run(),
        Command::Decode(args) => args.run(),
        Command::Layout(args) => args.run(),
        Command::Bounds(args) => args.run(),
        Command::Sql(args) => args.run(),
        Command::Leases(args) => args.run(),
        Command::Seq(args) => args.run(),
        Command::Opaque(args) => args.run(),
        Command::Openapi => commands::openapi::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.exit(),
    }
}
