//! Dense sequence values: `POST /v1/sequences/{name}/next` and `idgen seq next`, over a block
//! store (the embedded file store by default, or PostgreSQL).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Args;
use idgen::Error;
use idgen::blocks::{BlockAllocator, BlockStore, FileStore, PostgresStore, SequenceName};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::Failure;
use crate::api::{
    BodyRefusals, ErrorBody, SEQUENCE_BODY_FIELDS, SequencePath, SequenceRequest, SequenceValues,
};
use crate::kinds;
use crate::serve::{ApiError, read_json_object};
use idgen_cli::input::count_from_json;

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

/// Which sequences are served: the ones an operator declared, and with
/// `--create-sequences` any valid name.
#[derive(Args, Clone)]
pub struct DeclaredArgs {
    /// The sequences served, comma-separated (`orders,invoices`); a request for another
    /// name is a 404 that says how to declare it. `idgen seq next` takes these too.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        env = "IDGEN_SEQUENCES"
    )]
    sequences: Vec<String>,
    /// A file declaring sequences: one name per line; blank lines and lines starting with
    /// `#` are skipped.
    #[arg(long, value_name = "FILE", env = "IDGEN_SEQUENCES_FILE")]
    sequences_file: Option<PathBuf>,
    /// Serve any valid name, creating its sequence on first use (a thread of the service
    /// and a record in the store for each, up to --max-sequences): only where every client
    /// is trusted, since any client can then make new sequences.
    #[arg(long, env = "IDGEN_CREATE_SEQUENCES")]
    create_sequences: bool,
}

/// The largest sequences file read.
const MAX_SEQUENCES_FILE_BYTES: u64 = 1 << 20;

/// The sequences served.
pub struct Declared {
    names: BTreeSet<SequenceName>,
    create: bool,
}

impl DeclaredArgs {
    /// The declared names, each checked; a bad one is bad input, named with its line.
    pub fn declared(&self) -> Result<Declared, Failure> {
        let mut names = BTreeSet::new();
        for name in &self.sequences {
            names.insert(
                SequenceName::new(name)
                    .map_err(|error| Failure::input(format!("--sequences: {error}")))?,
            );
        }
        if let Some(path) = &self.sequences_file {
            let flag = "--sequences-file";
            let file = crate::operator_files::read(
                path,
                flag,
                "a list of sequences",
                MAX_SEQUENCES_FILE_BYTES,
            )?;
            for (number, line) in file.text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                names.insert(SequenceName::new(line).map_err(|error| {
                    Failure::input(format!(
                        "{flag} {} line {}: {error}",
                        path.display(),
                        number + 1
                    ))
                })?);
            }
        }
        Ok(Declared {
            names,
            create: self.create_sequences,
        })
    }
}

impl Declared {
    /// Whether `name` is served.
    pub fn allows(&self, name: &SequenceName) -> bool {
        self.create || self.names.contains(name)
    }

    /// Why `name` is not served, and how to serve it.
    pub fn refusal(&self, name: &SequenceName) -> String {
        format!(
            "sequence {name} is not declared: only declared sequences are served; declare it \
             with --sequences NAME,... or a line of --sequences-file FILE (or start the \
             service with --create-sequences to create any name on first use)"
        )
    }

    /// The names a request may use, for the document's enum: `None` when any name is (with
    /// `--create-sequences`), or when none is declared (every request is then a 404).
    pub fn enumerated(&self) -> Option<Vec<&str>> {
        (!self.create && !self.names.is_empty())
            .then(|| self.names.iter().map(SequenceName::as_str).collect())
    }

    /// How many sequences at most: the declared ones, or, with `--create-sequences`, any.
    pub fn count(&self) -> Option<usize> {
        (!self.create).then_some(self.names.len())
    }
}

/// The service's sequences: one allocator per name, made on first use.
pub struct Sequences {
    /// The store, or why there is none (the default directory could not be opened: the
    /// service runs, and sequence requests say why they cannot be served).
    store: Result<Arc<dyn BlockStore>, String>,
    /// `None` once closed for shutdown.
    allocators: Mutex<Option<HashMap<SequenceName, Arc<BlockAllocator>>>>,
    max_sequences: usize,
    max_batch: usize,
    declared: Declared,
    pub values_issued: AtomicU64,
}

impl Sequences {
    pub fn new(
        store: Result<Arc<dyn BlockStore>, String>,
        declared: Declared,
        max_sequences: usize,
        max_batch: usize,
    ) -> Sequences {
        Sequences {
            declared,
            store,
            allocators: Mutex::new(Some(HashMap::new())),
            max_sequences,
            max_batch,
            values_issued: AtomicU64::new(0),
        }
    }

    /// The allocator of `name`, made if new (each has a fetcher thread, hence the cap),
    /// and whether this call made it.
    fn allocator(&self, name: &SequenceName) -> Result<(Arc<BlockAllocator>, bool), ApiError> {
        if !self.declared.allows(name) {
            return Err(ApiError(StatusCode::NOT_FOUND, self.declared.refusal(name)));
        }
        let unavailable = |message: String| ApiError(StatusCode::SERVICE_UNAVAILABLE, message);
        let store = self
            .store
            .as_ref()
            .map_err(|reason| unavailable(reason.clone()))?;
        let mut allocators = self
            .allocators
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(allocators) = allocators.as_mut() else {
            return Err(unavailable("the service is shutting down".into()));
        };
        if let Some(allocator) = allocators.get(name) {
            return Ok((Arc::clone(allocator), false));
        }
        if allocators.len() >= self.max_sequences {
            return Err(ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "this service serves at most {} sequences (--max-sequences)",
                    self.max_sequences
                ),
            ));
        }
        let allocator = BlockAllocator::builder(Arc::clone(store), name.as_str())
            .and_then(|builder| builder.build())
            .map_err(|error| ApiError(StatusCode::SERVICE_UNAVAILABLE, error.to_string()))?;
        let allocator = Arc::new(allocator);
        allocators.insert(name.clone(), Arc::clone(&allocator));
        Ok((allocator, true))
    }

    /// Values of `name`. A sequence made for this call whose first grant failed is not
    /// kept: no thread, no slot of --max-sequences, for a name that never got a value.
    fn next_values(&self, name: &SequenceName, count: usize) -> Result<Vec<u64>, ApiError> {
        let (allocator, made) = self.allocator(name)?;
        let values = allocator.next_n(count).map_err(api_error);
        if values.is_err() && made {
            let stats = allocator.stats();
            let never_granted = stats.round_trips == stats.failed_round_trips;
            let forgotten = never_granted && {
                let mut allocators = self
                    .allocators
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                allocators.as_mut().is_some_and(|allocators| {
                    let ours = allocators
                        .get(name)
                        .is_some_and(|kept| Arc::ptr_eq(kept, &allocator));
                    ours && allocators.remove(name).is_some()
                })
            };
            if forgotten {
                // Nothing to give back: this only stops its fetcher.
                let _ = allocator.close();
            }
        }
        values
    }

    /// Store round trips of every allocator, and how many allocators there are.
    pub fn round_trips(&self) -> (u64, u64, usize) {
        let allocators = self
            .allocators
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(allocators) = allocators.as_ref() else {
            return (0, 0, 0);
        };
        let (mut trips, mut failed) = (0, 0);
        for allocator in allocators.values() {
            let stats = allocator.stats();
            trips += stats.round_trips;
            failed += stats.failed_round_trips;
        }
        (trips, failed, allocators.len())
    }

    /// Closes every allocator at once, giving unused values back, within `grace`; says
    /// how many gave values back. Later requests get a 503. Blocks on the store: call it
    /// outside async code.
    pub fn close(&self, grace: Duration) -> Result<usize, Failure> {
        let allocators = self
            .allocators
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default();
        let count = allocators.len();
        let (done, results) = std::sync::mpsc::channel();
        for (name, allocator) in allocators {
            let done = done.clone();
            std::thread::spawn(move || {
                let _ = done.send((name, allocator.close()));
            });
        }
        drop(done);
        let deadline = Instant::now() + grace;
        let (mut given_back, mut failures) = (0, Vec::new());
        for _ in 0..count {
            let left = deadline.saturating_duration_since(Instant::now());
            match results.recv_timeout(left) {
                Ok((_, Ok(true))) => given_back += 1,
                Ok((_, Ok(false))) => {}
                Ok((name, Err(error))) => failures.push(format!("sequence {name}: {error}")),
                Err(_) => {
                    failures.push(format!(
                        "some sequences were still closing after {} s; their unused values \
                         are a gap",
                        grace.as_secs()
                    ));
                    break;
                }
            }
        }
        if failures.is_empty() {
            Ok(given_back)
        } else {
            Err(Failure::runtime(format!(
                "unused sequence values not given back: {}",
                failures.join("; ")
            )))
        }
    }
}

/// The sequence route, and what the document says of it.
pub fn routes() -> OpenApiRouter<Arc<Sequences>> {
    OpenApiRouter::new().routes(routes!(next_values))
}

/// `count` values of the sequence `name`, dense and increasing, from the block store.
#[utoipa::path(
    post,
    path = "/v1/sequences/{name}/next",
    tag = "sequences",
    params(SequencePath),
    request_body = SequenceRequest,
    responses(
        (status = 200, description = "The values, increasing, with no gap between them",
            body = SequenceValues),
        BodyRefusals,
        (status = 404, description = "The sequence is not declared: only the names the \
            service was started with (--sequences, --sequences-file) are served, unless it \
            creates any name on first use (--create-sequences)", body = ErrorBody),
        (status = 409, description = "The sequence reached the end of its range \
            (2^63 - 1)", body = ErrorBody),
        (status = 500, description = "The sequence stopped for good: its store went back \
            (retrying cannot help; it stays stopped until an operator looks); or a defect \
            of the service (work that panicked: report it)",
            body = ErrorBody),
        (status = 503, description = "The block store is away, the service has no block \
            store, it serves --max-sequences already, or it is shutting down",
            body = ErrorBody),
    )
)]
async fn next_values(
    State(sequences): State<Arc<Sequences>>,
    name: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let Path(name) = name.map_err(|_| {
        ApiError::bad("invalid sequence name: not UTF-8 once percent-decoded; only a-z, 0-9, _ and - are allowed")
    })?;
    let name = SequenceName::new(&name).map_err(|error| ApiError::bad(error.to_string()))?;
    if query.is_some_and(|query| !query.is_empty()) {
        return Err(ApiError::bad(
            r#"POST /v1/sequences/{name}/next takes {"count": N} in the body, not the query"#,
        ));
    }
    let fields = read_json_object(&headers, body, r#"{"count": 10}"#).await?;
    if let Some(field) = fields
        .keys()
        .find(|field| !SEQUENCE_BODY_FIELDS.contains(&field.as_str()))
    {
        return Err(ApiError::bad(format!(
            "unknown field {:?}: the body is {{\"count\": N}}",
            kinds::shown(field)
        )));
    }
    let count = match fields.get("count") {
        None => return Err(ApiError::bad(r#"count is missing: send {"count": N}"#)),
        Some(count) => count_from_json(count, sequences.max_batch).map_err(ApiError::bad)?,
    };
    // Making an allocator starts a thread, and a call may wait on the store: neither on an
    // async worker.
    let values = {
        let sequences = Arc::clone(&sequences);
        tokio::task::spawn_blocking(move || sequences.next_values(&name, count))
            .await
            .map_err(|error| ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))??
    };
    sequences
        .values_issued
        .fetch_add(values.len() as u64, Ordering::Relaxed);
    let values = values.iter().map(u64::to_string).collect();
    Ok(axum::Json(SequenceValues { values }).into_response())
}

/// 409 at the end of the range, 503 while the store is away (transient), and 500 for an
/// allocator stopped for good (a store that went back): retrying cannot help there, and
/// the sequence stays stopped until an operator looks.
fn api_error(error: Error) -> ApiError {
    let status = match error {
        Error::SequenceExhausted { .. } => StatusCode::CONFLICT,
        Error::BatchTooLarge { .. } => StatusCode::BAD_REQUEST,
        _ if error.is_transient() => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError(status, error.to_string())
}

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
        let store = args.store.store()?;
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
