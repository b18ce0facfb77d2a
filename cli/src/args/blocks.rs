//! The block store flags of `serve` and `idgen seq`: where sequences' blocks come from.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use idgen::blocks::{BlockStore, FileStore, PostgresStore};

use crate::failure::Failure;

/// The PostgreSQL schema flag for a command that has a block store and no lease store
/// (`idgen seq`); `serve` takes it from its lease flags.
#[derive(Args, Clone)]
pub struct SchemaArgs {
    /// The PostgreSQL schema of idgen's tables (default: the one schema of the database
    /// that has them, else public). Every statement names it: the URL's or the role's
    /// search_path plays no part. Give every process the same one; copies of the table in
    /// two schemas are refused.
    #[arg(
        long,
        value_name = "NAME",
        env = "IDGEN_POSTGRES_SCHEMA",
        requires = "postgres",
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub postgres_schema: Option<String>,
}

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
    /// `postgresql://user@host:5432/db` (the table idgen_sequences is created if absent, in
    /// the schema `--postgres-schema` names, else the one that has it, else public).
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

    /// The store the flags name, a PostgreSQL one's table in `schema` (`--postgres-schema`,
    /// which the command holds: `serve` shares it with its lease store). Blocks (connecting
    /// to PostgreSQL): call it outside async code.
    pub fn store(&self, schema: Option<&str>) -> Result<Arc<dyn BlockStore>, Failure> {
        let store: Arc<dyn BlockStore> = match (&self.postgres, &self.blocks_dir) {
            (Some(url), _) => Arc::new(
                match schema {
                    Some(schema) => PostgresStore::connect_in(url, schema),
                    None => PostgresStore::connect(url),
                }
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
