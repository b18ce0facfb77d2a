//! `idgen serve`: the service's flags, checked and resolved (files read, stores opened)
//! before anything listens; `serve::run` then runs the service.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use idgen::{Clock, SystemClock};

use crate::args::blocks::BlockArgs;
use crate::args::layout::LayoutArgs;
use crate::args::lease::{LeaseArgs, acquire_failure, parse_duration};
use crate::args::sequences::DeclaredArgs;
use crate::failure::Failure;
use crate::http::document_text_shaped;
use crate::http::ids::DEFAULT_MAX_BATCH;
use crate::http::lease_api::read_token;
use crate::http::openapi::Shape;
use crate::http::sequences::Sequences;
use crate::http::state::StatusView;
use crate::http::status::fleet_cache::FleetCache;
use crate::kinds::CountedGenerators;
use crate::lifetime;
use crate::log::{LogFormat, SERVICE_TARGET};
use crate::opaque::{KEY_FILE_VARIABLE, load_codec};
use crate::serve::{self, Plan};

/// The longest `--wait-for-number`: a day, as the longest outage horizon.
const MAX_WAIT_FOR_NUMBER: Duration = idgen::lease::MAX_OUTAGE_HORIZON;

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080", env = "IDGEN_LISTEN")]
    listen: SocketAddr,
    /// The largest `count` one request may ask for.
    #[arg(long, default_value_t = DEFAULT_MAX_BATCH, env = "IDGEN_MAX_BATCH")]
    max_batch: usize,
    /// After SIGINT or SIGTERM, how many seconds open requests get to finish before the
    /// service stops anyway (a second signal stops it at once). The worker number is then
    /// released, unless a batch is still being made: it is then left to expire.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10,
        env = "IDGEN_SHUTDOWN_GRACE"
    )]
    shutdown_grace: u64,
    /// Turn on the lease API (`/v1/generators`): programs in other languages lease worker
    /// numbers from this service's store and range and issue IDs themselves. Every request
    /// needs `Authorization: Bearer <token>`, the token being this file's content, trimmed.
    #[arg(long, value_name = "FILE", env = "IDGEN_LEASE_API_TOKEN_FILE")]
    lease_api_token_file: Option<std::path::PathBuf>,
    /// The most sequences `/v1/sequences/{name}/next` serves (each keeps a fetcher thread
    /// and two blocks); a new name beyond it gets a 503.
    #[arg(long, default_value_t = 1_000, env = "IDGEN_MAX_SEQUENCES")]
    max_sequences: usize,
    /// Opaque public IDs: the key file (one key per line, `HEX` or `ID HEX`, at least 32
    /// hex digits; the first line encodes, every line decodes). Adds `form=opaque` to
    /// `/v1/ids`, and `/v1/ids/{text}/decode` then takes opaque IDs too.
    #[arg(long, value_name = "FILE", env = KEY_FILE_VARIABLE, hide_env_values = true)]
    opaque_key_file: Option<std::path::PathBuf>,
    /// How log lines (on stderr) are written; `RUST_LOG` picks which (default `info`;
    /// `debug` adds a line per request).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "IDGEN_LOG_FORMAT")]
    log_format: LogFormat,
    /// When every worker number of the range is held (a replacement started right after
    /// a crash, before the crashed holder's lease ended): how long to wait for one to come
    /// free, listening and answering 503 meanwhile, before exiting (default: the lease TTL
    /// plus the outage horizon plus one second; 0s: exit at once).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, env = "IDGEN_WAIT_FOR_NUMBER")]
    wait_for_number: Option<Duration>,
    /// Warn at start when the layout has less than this left before its last millisecond,
    /// after which no Snowflake ID can be made (under a day, the service refuses to start).
    /// `/metrics` exports the time left as `idgen_layout_seconds_left`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "365d",
        env = "IDGEN_LIFETIME_WARNING")]
    lifetime_warning: Duration,
    /// The ID space's name (1 to 64 of `A-Z`, `a-z`, `0-9`, `.`, `_`, `-`), reported with
    /// every worker number held (`idgen_worker_info{space}`), so that an alert on two
    /// holders of one number tells the fleets one Prometheus scrapes apart (staging,
    /// production).
    #[arg(long, value_name = "NAME", default_value = "default", env = "IDGEN_ID_SPACE",
        value_parser = parse_id_space)]
    id_space: String,
    /// Show holder names, and the store's own words on a bad record or a failed survey, on
    /// the status page (`/status`, `/v1/status`) to everyone who can reach the service;
    /// without it, only a request with the lease API's token sees them.
    #[arg(long, env = "IDGEN_STATUS_SHOWS_HOLDERS")]
    status_shows_holders: bool,
    #[command(flatten)]
    blocks: BlockArgs,
    #[command(flatten)]
    declared: DeclaredArgs,
    #[command(flatten)]
    lease: LeaseArgs,
    #[command(flatten)]
    layout: LayoutArgs,
}

impl ServeArgs {
    pub fn run(self) -> Result<(), Failure> {
        crate::log::init(self.log_format)?;
        // Once the log is up, a failure is one of its lines (JSON too), not a line of its own.
        self.plan().and_then(serve::run).map_err(|failure| {
            // A RUST_LOG that hides this line (`off`, or directives for other targets only)
            // leaves the message to main, so that a failure is never silent.
            if tracing::enabled!(tracing::Level::ERROR) {
                tracing::error!(target: SERVICE_TARGET, "{}", failure.message());
                failure.logged()
            } else {
                failure
            }
        })
    }

    /// The flags checked, and what they name read and opened: everything that can be
    /// refused is, before the service listens.
    fn plan(self) -> Result<Plan, Failure> {
        if self.max_batch == 0 {
            return Err(Failure::input("--max-batch must be at least 1"));
        }
        let layout = self.layout.layout()?;
        match lifetime::verdict(&layout, SystemClock.now_unix_ms(), self.lifetime_warning) {
            lifetime::Verdict::Ample => {}
            lifetime::Verdict::Warn(text) => tracing::warn!(target: SERVICE_TARGET, "{text}"),
            lifetime::Verdict::Refuse(text) => return Err(Failure::input(text)),
        }
        let token = self
            .lease_api_token_file
            .as_deref()
            .map(read_token)
            .transpose()?;
        let opaque = self
            .opaque_key_file
            .as_deref()
            .map(|path| {
                load_codec(
                    path,
                    |warning| tracing::warn!(target: SERVICE_TARGET, "{warning}"),
                )
            })
            .transpose()?;
        // Before the lease, so that a clock these kinds refuse leaves no number to release.
        let counted = CountedGenerators::new()?;
        if self.max_sequences == 0 {
            return Err(Failure::input("--max-sequences must be at least 1"));
        }
        let declared = self.declared.declared()?;
        if let Some(count) = declared.count()
            && count > self.max_sequences
        {
            return Err(Failure::input(format!(
                "{count} sequences are declared, more than --max-sequences {}",
                self.max_sequences
            )));
        }
        // The document served says what this service has on, and its limits.
        let key_ids = opaque.as_ref().map(|codec| codec.key_ids());
        let document = document_text_shaped(&Shape {
            max_batch: self.max_batch,
            sequences: declared.enumerated().as_deref(),
            lease_api: token.is_some(),
            opaque: key_ids.as_deref().map(Some),
        });
        // Connecting to PostgreSQL blocks: before the runtime, like the lease. A store named by
        // a flag must open; the default directory may fail (no HOME, a read-only disk) without
        // stopping the IDs: sequence requests then get a 503 saying why.
        let store = match self.blocks.store(self.lease.postgres_schema()) {
            Ok(store) => Ok(store),
            Err(failure) if !self.blocks.named() => {
                tracing::warn!(
                    target: SERVICE_TARGET,
                    "sequences unavailable: {}",
                    failure.message()
                );
                Err(format!("no block store: {}", failure.message()))
            }
            Err(failure) => return Err(failure),
        };
        let sequences = Arc::new(Sequences::new(
            store,
            declared,
            self.max_sequences,
            self.max_batch,
        ));
        let mut source = self.lease.source(layout)?;
        source.holder = Some(format!("idgen serve, pid {}", std::process::id()));
        // A store that serves another layout, or an etcd namespace never initialised, is bad
        // input: refused before listening.
        source.store.bind_layout(&layout).map_err(acquire_failure)?;
        // The status page's fleet view: a store of its own where requests queue (see
        // `StoreArgs::survey_store`; on PostgreSQL a second connection); a mark further
        // ahead than the fleet writes them is an anomaly.
        let survey_store = self.lease.survey_store(&source.store)?;
        survey_store.bind_layout(&layout).map_err(acquire_failure)?;
        let status = StatusView {
            fleet: FleetCache::new(survey_store, source.range, source.fleet_mark_bound()),
            shows_holders: self.status_shows_holders,
        };
        let wait_for_number = self
            .wait_for_number
            .unwrap_or_else(|| source.crashed_holder_bound() + Duration::from_secs(1));
        if wait_for_number > MAX_WAIT_FOR_NUMBER {
            return Err(Failure::input(format!(
                "--wait-for-number must be at most a day ({} s); got {} s",
                MAX_WAIT_FOR_NUMBER.as_secs(),
                wait_for_number.as_secs()
            )));
        }
        Ok(Plan {
            listen: self.listen,
            layout,
            max_batch: self.max_batch,
            grace: Duration::from_secs(self.shutdown_grace),
            lease_api_token: token,
            opaque,
            counted,
            document,
            sequences,
            source,
            wait_for_number,
            id_space: self.id_space,
            status,
        })
    }
}

/// An `--id-space` name: 1 to 64 of `A-Z`, `a-z`, `0-9`, `.`, `_` and `-`.
fn parse_id_space(text: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if (1..=64).contains(&text.len()) && text.chars().all(allowed) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?} is not an ID space name: 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'"
        ))
    }
}
