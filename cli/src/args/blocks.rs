//! The block store flags of `serve` and `idgen seq`: where sequences' blocks come from.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use idgen::blocks::{BlockStore, FileStore, PostgresStore};

use crate::failure::Failure;

/// Where sequences' blocks come from.
#[derive(Args, Clone)]
pub struct BlockArgs {
    /// The directory of the embedded block store (default: `$XDG_STATE_HOME/idgen/blocks`,
    /// `/var/lib/idgen/blocks` for root, else `~/.local/state/idgen/blocks`; persistent and
    /// private, because a directory emptied at reboot would restart every sequence at 1).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "postgres",
        env = "IDGEN_BLOCKS_DIR"
    )]
    blocks_dir: Option<PathBuf>,
    /// Take blocks from PostgreSQL instead, for a fleet: a connection URL such as
    /// `postgresql://user@host:5432/db` (the table idgen_sequences is created if absent).
    #[arg(
        long,
        value_name = "URL",
        env = "IDGEN_POSTGRES",
        hide_env_values = true,
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    postgres: Option<String>,
}

impl BlockArgs {
    /// Whether a store was named (rather than the default directory).
    pub fn named(&self) -> bool {
        self.blocks_dir.is_some() || self.postgres.is_some()
    }

    /// The store the flags name. Blocks (connecting to PostgreSQL): call it outside async code.
    pub fn store(&self) -> Result<Arc<dyn BlockStore>, Failure> {
        let store: Arc<dyn BlockStore> = match (&self.postgres, &self.blocks_dir) {
            (Some(url), _) => Arc::new(
                PostgresStore::connect(url)
                    .map_err(|error| Failure::runtime(format!("--postgres: {error}")))?,
            ),
            (None, Some(dir)) => Arc::new(
                FileStore::open(dir)
                    .map_err(|error| Failure::runtime(format!("--blocks-dir: {error}")))?,
            ),
            (None, None) => Arc::new(
                FileStore::open_default().map_err(|error| Failure::runtime(error.to_string()))?,
            ),
        };
        Ok(store)
    }
}
