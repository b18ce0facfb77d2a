//! `idgen seq next`: values of a sequence straight from the block store, for an operator.

use clap::Args;
use idgen::blocks::SequenceName;

use crate::args::blocks::{BlockArgs, SchemaArgs};
use crate::args::sequences::DeclaredArgs;
use crate::failure::Failure;

#[derive(Args)]
pub struct SeqArgs {
    #[command(subcommand)]
    command: SeqCommand,
}

#[derive(clap::Subcommand)]
enum SeqCommand {
    /// Take the next values of a sequence straight from the store (one block of exactly
    /// that many values), one per line. Short only at the end of the i64 range (exit 1);
    /// values not written (a closed pipe) are a gap.
    Next(SeqNextArgs),
}

#[derive(Args)]
struct SeqNextArgs {
    /// The sequence: 1 to 64 of a-z, 0-9, _ and -.
    name: String,
    /// How many values (at most 1,000,000).
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    count: u64,
    #[command(flatten)]
    store: BlockArgs,
    #[command(flatten)]
    schema: SchemaArgs,
    #[command(flatten)]
    declared: DeclaredArgs,
}

/// The most values `idgen seq next` prints at once.
const MAX_SEQ_COUNT: u64 = 1_000_000;

impl SeqArgs {
    pub fn run(self) -> Result<(), Failure> {
        let SeqCommand::Next(args) = self.command;
        let name =
            SequenceName::new(&args.name).map_err(|error| Failure::input(error.to_string()))?;
        let declared = args.declared.declared()?;
        if !declared.allows(&name) {
            return Err(Failure::input(declared.refusal(&name)));
        }
        if !(1..=MAX_SEQ_COUNT).contains(&args.count) {
            return Err(Failure::input(format!(
                "-n must be from 1 to {MAX_SEQ_COUNT}; got {}",
                args.count
            )));
        }
        if !args.store.named() {
            // The operator's command must not make a store of its own by accident (another
            // user's default directory, say), where the sequence would start again at 1.
            let dir = idgen::blocks::default_blocks_dir()
                .map_err(|error| Failure::runtime(error.to_string()))?;
            if !dir.is_dir() {
                return Err(Failure::runtime(format!(
                    "no block store at {} (the service makes it on first use); name the \
                     service's with --blocks-dir or --postgres",
                    dir.display()
                )));
            }
        }
        let store = args.store.store(args.schema.postgres_schema.as_deref())?;
        let grant = store
            .grant(&name, args.count)
            .map_err(|error| Failure::runtime(error.to_string()))?;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let written = (grant.first..grant.end)
            .try_for_each(|value| std::io::Write::write_fmt(&mut out, format_args!("{value}\n")))
            .and_then(|()| std::io::Write::flush(&mut out));
        written.map_err(|error| Failure::runtime(format!("writing the values: {error}")))?;
        if grant.len() < args.count {
            return Err(Failure::runtime(format!(
                "sequence {name} reached the end of the i64 range after {} values",
                grant.len()
            )));
        }
        Ok(())
    }
}
