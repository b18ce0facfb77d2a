//! `idgen leases`: the fleet view of a lease store (every worker number, free or held), and
//! its two subcommands, `init` and `move-check`.

mod init;
mod list;
mod move_check;

use clap::{Args, Subcommand};

use crate::failure::Failure;
use init::InitArgs;
use list::ListArgs;
use move_check::MoveCheckArgs;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LeasesArgs {
    #[command(subcommand)]
    command: Option<LeasesCommand>,
    #[command(flatten)]
    list: ListArgs,
}

#[derive(Subcommand)]
enum LeasesCommand {
    /// Initialise a lease store (an etcd namespace before first use; a lease directory
    /// whose store.idgen is missing). Safe to run again, and while holders run.
    Init(InitArgs),
    /// Check that a fleet may move from this store's layout to the one the layout flags
    /// give: the new layout's first ID now must lie above every ID the old one could have
    /// issued up to the store's last mark. Exit 0 when it does; 1, with the first moment
    /// it would, when it does not.
    MoveCheck(MoveCheckArgs),
}

impl LeasesArgs {
    pub fn run(self) -> Result<(), Failure> {
        match self.command {
            Some(LeasesCommand::Init(args)) => args.run(),
            Some(LeasesCommand::MoveCheck(args)) => args.run(),
            None => self.list.run(),
        }
    }
}
