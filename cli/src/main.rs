//! `idgen`: unique, time-sortable IDs (64-bit Snowflake, UUIDv7, ULID) for programs that
//! cannot embed the crate. An HTTP service (`idgen serve`) and operator commands (`next`,
//! `decode`, `layout`, `leases`, `seq`, `opaque`, and `openapi`, its contract).

mod api;
mod generators;
mod kinds;
mod layout_args;
mod lease_args;
mod log;
mod opaque;
mod operator_files;
mod own_lease;
mod sequences;
mod serve;
mod time;

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use idgen::{Id, Layout};

use layout_args::LayoutArgs;
use lease_args::LeaseArgs;

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
    Serve(serve::ServeArgs),
    /// Print IDs: Snowflake IDs from a worker number leased for the run, or UUIDv7s or ULIDs
    /// (`--kind`), which need none.
    Next(NextArgs),
    /// Show what an ID says: its kind and creation time, and for a Snowflake ID (decimal or
    /// base32) its datacenter, worker and sequence.
    Decode(DecodeArgs),
    /// Show the arithmetic of a layout: lifetime, last instant, workers, rates.
    Layout(LayoutCommand),
    /// Show every worker number of a lease store: free or held, holder, mark, anomalies.
    Leases(LeasesArgs),
    /// Dense values of named sequences (order numbers, invoice numbers) from the block
    /// store: `idgen seq next orders -n 10`.
    Seq(sequences::SeqArgs),
    /// Opaque public IDs: Snowflake IDs encrypted with a secret key, so they show no time,
    /// node or volume: `idgen opaque encode --key-file FILE ID...`, and `decode` back.
    Opaque(opaque::OpaqueArgs),
    /// Print the service's OpenAPI 3.1 document, as `GET /openapi.json` serves it (and as
    /// `docs/openapi.json` holds it), to generate a client from.
    Openapi,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
struct LeasesArgs {
    #[command(subcommand)]
    command: Option<LeasesCommand>,
    #[command(flatten)]
    list: lease_args::ListArgs,
}

#[derive(Subcommand)]
enum LeasesCommand {
    /// Initialise a lease store (an etcd namespace before first use; a lease directory
    /// whose store.idgen is missing). Safe to run again, and while holders run.
    Init(lease_args::InitArgs),
    /// Check that a fleet may move from this store's layout to the one the layout flags
    /// give: the new layout's first ID now must lie above every ID the old one could have
    /// issued up to the store's last mark. Exit 0 when it does; 1, with the first moment
    /// it would, when it does not.
    MoveCheck(lease_args::MoveCheckArgs),
}

#[derive(Args)]
struct NextArgs {
    /// How many IDs.
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    count: usize,
    /// Which kind: Snowflake IDs from a leased worker number, or UUIDv7s or ULIDs (128
    /// bits, no worker number needed: nothing is leased, and the lease flags are not used).
    #[arg(long, value_enum, default_value_t = kinds::Kind::Snowflake)]
    kind: kinds::Kind,
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

#[derive(Args)]
struct DecodeArgs {
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

#[derive(Args)]
struct LayoutCommand {
    /// As a JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    layout: LayoutArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Next(args) => next(args),
        Command::Decode(args) => decode(args),
        Command::Layout(args) => layout(args),
        Command::Leases(LeasesArgs {
            command: Some(LeasesCommand::Init(args)),
            ..
        }) => args.run(),
        Command::Leases(LeasesArgs {
            command: Some(LeasesCommand::MoveCheck(args)),
            ..
        }) => args.run(),
        Command::Leases(LeasesArgs { list, .. }) => list.run(),
        Command::Seq(args) => args.run(),
        Command::Opaque(args) => args.run(),
        Command::Openapi => write_lines(&[serve::document_text().trim_end().to_string()]),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !failure.logged {
                eprintln!("idgen: {}", failure.message);
            }
            ExitCode::from(failure.code)
        }
    }
}

/// Why a command failed, and its exit code: 2 for bad input (as clap's own usage errors),
/// 1 for anything else.
pub struct Failure {
    message: String,
    code: u8,
    /// Already written to the service's log.
    logged: bool,
}

impl Failure {
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 2,
            logged: false,
        }
    }

    pub fn runtime(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
            logged: false,
        }
    }

    /// The same failure, marked as written to the log (main prints it no more).
    pub fn logged(self) -> Failure {
        Failure {
            logged: true,
            ..self
        }
    }
}

fn next(args: NextArgs) -> Result<(), Failure> {
    if args.count == 0 {
        return Err(Failure::input("-n must be at least 1"));
    }
    // Checked for every kind, so that a bad flag is never silently ignored.
    let layout = args.layout.layout()?;
    if args.kind != kinds::Kind::Snowflake {
        return next_counted(args);
    }
    let generator = args.lease.acquire(layout)?;
    let ids = generator
        .next_ids(args.count)
        .map_err(|error| Failure::runtime(error.to_string()))?;
    generator
        .release()
        .map_err(|error| Failure::runtime(error.to_string()))?;
    let text = match args.format {
        Format::Base32 => kinds::as_text(ids.iter().map(|id| id.to_base32()).collect()),
        _ => kinds::as_text(ids),
    };
    write_ids(&text, args.format)
}

/// `idgen next --kind uuidv7|ulid`: no worker number, so nothing to lease.
fn next_counted(args: NextArgs) -> Result<(), Failure> {
    if matches!(args.format, Format::Base32) {
        return Err(Failure::input(format!(
            "--format base32 is for Snowflake IDs; a {} has its own text form (use decimal or json)",
            args.kind.name()
        )));
    }
    let ids = kinds::CountedGenerators::new()?
        .issue(args.kind, args.count)
        .unwrap_or(Ok(Vec::new()))
        .map_err(|error| Failure::runtime(error.to_string()))?;
    write_ids(&ids, args.format)
}

/// One ID per line, or (`--format json`) one JSON array of strings.
fn write_ids(ids: &[String], format: Format) -> Result<(), Failure> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = match format {
        Format::Json => serde_json::to_writer(&mut out, ids)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out)),
        _ => ids.iter().try_for_each(|id| writeln!(out, "{id}")),
    };
    written
        .and_then(|()| out.flush())
        .map_err(|error| Failure::runtime(format!("writing the IDs: {error}")))
}

/// One line each.
pub fn write_lines(lines: &[String]) -> Result<(), Failure> {
    write_ids(lines, Format::Decimal)
}

/// Parses an ID in either text form: canonical decimal, or 13 characters of base32.
pub fn parse_id(text: &str) -> Result<Id, String> {
    match text.parse::<Id>() {
        Ok(id) => Ok(id),
        Err(decimal) if text.len() == 13 && !text.bytes().all(|b| b.is_ascii_digit()) => {
            Id::from_base32(text).map_err(|base32| {
                format!(
                    "invalid ID {:?}: not canonical decimal ({decimal}) nor base32 ({base32})",
                    kinds::shown(text)
                )
            })
        }
        Err(decimal) => Err(format!("invalid ID {:?}: {decimal}", kinds::shown(text))),
    }
}

/// What a Snowflake ID says, shared with the HTTP service.
pub fn decoded(layout: &Layout, id: Id) -> api::Decoded {
    let parts = layout.decode(id);
    api::Decoded {
        id: id.to_string(),
        kind: kinds::Kind::Snowflake,
        created_at: time::rfc3339_ms(parts.unix_ms),
        datacenter: Some(parts.datacenter),
        worker: Some(parts.worker),
        sequence: Some(parts.sequence),
        opaque: None,
    }
}

fn decode(args: DecodeArgs) -> Result<(), Failure> {
    let layout = args.layout.layout()?;
    let mut bad = Vec::new();
    for text in &args.ids {
        let opaque = Err("which idgen opaque decode --key-file FILE decodes");
        match kinds::decode_any(&layout, opaque, text) {
            Ok(decoded) if args.json => println!("{}", json_text(&decoded)),
            Ok(decoded) => println!("{}", kinds::decoded_line(&decoded)),
            Err(reason) => bad.push(reason),
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(Failure::input(bad.join("\nidgen: ")))
    }
}

/// The JSON form of a layout's arithmetic, shared with the HTTP service.
pub fn layout_info(layout: &Layout) -> api::LayoutInfo {
    api::LayoutInfo {
        time_bits: layout.time_bits(),
        datacenter_bits: layout.datacenter_bits(),
        worker_bits: layout.worker_bits(),
        sequence_bits: layout.sequence_bits(),
        epoch: time::rfc3339_ms(layout.epoch_unix_ms()),
        lifetime_years: (layout.lifetime_years() * 10.0).round() / 10.0,
        last_instant: time::rfc3339_ms(layout.last_unix_ms()),
        datacenters: layout.datacenters(),
        workers_per_datacenter: layout.workers_per_datacenter(),
        nodes: layout.nodes(),
        ids_per_second_per_node: big_number(layout.ids_per_second_per_node()),
        cluster_ids_per_second: big_number(layout.cluster_ids_per_second()),
    }
}

/// One of the service's bodies as a line of JSON. They are plain data: nothing in them
/// can fail to serialise.
pub fn json_text(body: &impl serde::Serialize) -> String {
    serde_json::to_string(body).unwrap_or_default()
}

/// Exact as a JSON integer where it fits 64 bits (every realistic layout), else a float.
fn big_number(n: u128) -> serde_json::Value {
    u64::try_from(n).map_or_else(
        |_| serde_json::Value::from(n as f64),
        serde_json::Value::from,
    )
}

fn layout(args: LayoutCommand) -> Result<(), Failure> {
    let layout = args.layout.layout()?;
    if args.json {
        println!("{}", json_text(&layout_info(&layout)));
        return Ok(());
    }
    println!(
        "bits: time {}, datacenter {}, worker {}, sequence {}",
        layout.time_bits(),
        layout.datacenter_bits(),
        layout.worker_bits(),
        layout.sequence_bits()
    );
    println!("epoch: {}", time::rfc3339_ms(layout.epoch_unix_ms()));
    println!(
        "lifetime: {:.1} years, until {}",
        layout.lifetime_years(),
        time::rfc3339_ms(layout.last_unix_ms())
    );
    println!(
        "nodes: {} ({} datacenters x {} workers)",
        layout.nodes(),
        layout.datacenters(),
        layout.workers_per_datacenter()
    );
    println!(
        "IDs per second per worker: {}",
        layout.ids_per_second_per_node()
    );
    println!(
        "cluster maximum: {} IDs per second",
        layout.cluster_ids_per_second()
    );
    Ok(())
}
