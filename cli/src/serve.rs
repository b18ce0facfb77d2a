//! `idgen serve`: the HTTP service. JSON in and out, every ID as a string (Snowflake IDs in decimal).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use clap::Args;
use idgen::Layout;
use idgen::lease::{LeaseState, LeasedGenerator};
use idgen::opaque::Codec;
use idgen::{Clock, SystemClock};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{
    self, BodyRefusals, Decoded, Defect, ErrorBody, Health, IdList, IdPath, IdsQuery, IdsRefused,
    LayoutInfo,
};
use crate::generators::{self, LeaseApi};
use crate::kinds::{CountedGenerators, KINDS, Kind};
use crate::layout_args::LayoutArgs;
use crate::lease_args::{LeaseArgs, acquire_failure, parse_duration};
use crate::log::LogFormat;
use crate::opaque::{self, Form};
use crate::own_lease::{OwnLease, Pending};
use crate::sequences::{self, BlockArgs, DeclaredArgs, Sequences};
use crate::{Failure, kinds, layout_info};
use idgen_cli::input;

/// Request bodies above this are refused with 413: `{"count": N}` needs a few bytes.
pub const MAX_BODY_BYTES: usize = 4 * 1024;

/// Batches up to this size, and up to a quarter of one millisecond's sequence, are made on
/// the request's own task; larger ones may wait for later milliseconds, so they go to a
/// blocking thread instead of holding up an async worker.
const INLINE_BATCH: usize = 1024;

/// The longest `--wait-for-number`: a day, as the longest outage horizon.
const MAX_WAIT_FOR_NUMBER: Duration = idgen::lease::MAX_OUTAGE_HORIZON;

/// How long a request body may take to arrive.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080", env = "IDGEN_LISTEN")]
    listen: SocketAddr,
    /// The largest `count` one request may ask for.
    #[arg(long, default_value_t = 10_000, env = "IDGEN_MAX_BATCH")]
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
    #[arg(long, value_name = "FILE", env = opaque::KEY_FILE_VARIABLE, hide_env_values = true)]
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
    #[command(flatten)]
    blocks: BlockArgs,
    #[command(flatten)]
    declared: DeclaredArgs,
    #[command(flatten)]
    lease: LeaseArgs,
    #[command(flatten)]
    layout: LayoutArgs,
}

struct Service {
    /// The service's own worker number, for Snowflake IDs: taken, or being taken.
    own: Arc<OwnLease>,
    /// The OpenAPI document served, naming the declared sequences.
    document: String,
    /// UUIDv7s and ULIDs: no worker number, no lease.
    counted: CountedGenerators,
    lease_api: Option<Arc<LeaseApi>>,
    sequences: Arc<Sequences>,
    /// With `--opaque-key-file`: `form=opaque`, and opaque IDs at the decode endpoint.
    opaque: Option<Codec>,
    layout: Layout,
    max_batch: usize,
    /// Batches up to this size are made inline (see [`INLINE_BATCH`]).
    inline_batch: usize,
    ids_issued: AtomicU64,
    /// IDs issued by kind, in the order of [`KINDS`].
    issued_by_kind: [AtomicU64; 3],
    /// Responses by status code, 100 to 599.
    responses: Vec<AtomicU64>,
    /// Request latency by endpoint and method.
    latency: Family<Labels, Histogram, fn() -> Histogram>,
}

/// The method as a label: one of the few the service answers, else `other`, so that no
/// client can add series by inventing methods.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// A metric's labels: (name, value) pairs.
type Labels = Vec<(String, String)>;

/// 50 µs to 1.6 s, doubling: a batch made inline takes microseconds, one that waits for
/// later milliseconds or a block store up to seconds.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

pub fn run(args: ServeArgs) -> Result<(), Failure> {
    crate::log::init(args.log_format)?;
    // Once the log is up, a failure is one of its lines (JSON too), not a line of its own.
    run_logged(args).map_err(|failure| {
        // A RUST_LOG that hides this line (`off`, or directives for other targets only)
        // leaves the message to main, so that a failure is never silent.
        if tracing::enabled!(tracing::Level::ERROR) {
            tracing::error!("{}", failure.message);
            failure.logged()
        } else {
            failure
        }
    })
}

fn run_logged(args: ServeArgs) -> Result<(), Failure> {
    if args.max_batch == 0 {
        return Err(Failure::input("--max-batch must be at least 1"));
    }
    let layout = args.layout.layout()?;
    let token = args
        .lease_api_token_file
        .as_deref()
        .map(generators::read_token)
        .transpose()?;
    let opaque = args
        .opaque_key_file
        .as_deref()
        .map(|path| opaque::load_codec(path, |warning| tracing::warn!("{warning}")))
        .transpose()?;
    // Before the lease, so that a clock these kinds refuse leaves no number to release.
    let counted = CountedGenerators::new()?;
    if args.max_sequences == 0 {
        return Err(Failure::input("--max-sequences must be at least 1"));
    }
    let declared = args.declared.declared()?;
    if let Some(count) = declared.count()
        && count > args.max_sequences
    {
        return Err(Failure::input(format!(
            "{count} sequences are declared, more than --max-sequences {}",
            args.max_sequences
        )));
    }
    // The document served names the declared sequences.
    let document = document_text_naming(declared.enumerated().as_deref());
    // Connecting to PostgreSQL blocks: before the runtime, like the lease. A store named by
    // a flag must open; the default directory may fail (no HOME, a read-only disk) without
    // stopping the IDs: sequence requests then get a 503 saying why.
    let store = match args.blocks.store() {
        Ok(store) => Ok(store),
        Err(failure) if !args.blocks.named() => {
            tracing::warn!("sequences unavailable: {}", failure.message);
            Err(format!("no block store: {}", failure.message))
        }
        Err(failure) => return Err(failure),
    };
    let sequences = Arc::new(Sequences::new(
        store,
        declared,
        args.max_sequences,
        args.max_batch,
    ));
    let mut source = args.lease.source(layout)?;
    source.holder = Some(format!("idgen serve, pid {}", std::process::id()));
    // A store that serves another layout, or an etcd namespace never initialised, is bad
    // input: refused before listening.
    source.store.bind_layout(&layout).map_err(acquire_failure)?;
    let wait_for_number = args
        .wait_for_number
        .unwrap_or_else(|| source.crashed_holder_bound() + Duration::from_secs(1));
    if wait_for_number > MAX_WAIT_FOR_NUMBER {
        return Err(Failure::input(format!(
            "--wait-for-number must be at most a day ({} s); got {} s",
            MAX_WAIT_FOR_NUMBER.as_secs(),
            wait_for_number.as_secs()
        )));
    }
    let api_source = source.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::runtime(format!("cannot start the runtime: {error}")))?;
    let listener = runtime.block_on(listen(args.listen))?;
    // The number is taken on a thread of its own (the etcd store refuses to run inside a
    // Tokio runtime), while the service listens: a wait for a mark or a free number is
    // answered, not silent. A failure to take one stops the service.
    let lease_failed = Arc::new(tokio::sync::Notify::new());
    let (own, taking) = OwnLease::start(source, layout, wait_for_number, {
        let lease_failed = Arc::clone(&lease_failed);
        move || lease_failed.notify_one()
    })?;
    let lease_api =
        token.map(|token| Arc::new(LeaseApi::new(token, api_source, layout, Arc::clone(&own))));
    let service = Arc::new(Service {
        own: Arc::clone(&own),
        document,
        counted,
        lease_api,
        sequences: Arc::clone(&sequences),
        opaque,
        layout,
        max_batch: args.max_batch,
        inline_batch: INLINE_BATCH.min((layout.max_sequence() as usize + 1) / 4),
        ids_issued: AtomicU64::new(0),
        issued_by_kind: Default::default(),
        responses: (0..500).map(|_| AtomicU64::new(0)).collect(),
        latency: Family::new_with_constructor(latency_histogram),
    });
    drop(own);
    let grace = Duration::from_secs(args.shutdown_grace);
    let served = runtime.block_on(serve(Arc::clone(&service), listener, lease_failed, grace));
    // Connections still open after the grace period are dropped with the runtime; a batch
    // still running on a blocking thread gets a moment, and the runtime goes before the
    // lease is released.
    runtime.shutdown_timeout(Duration::from_secs(1));
    // A number still being taken is given up (a wait for a mark or a free number ends at
    // once; the signal did so already); the thread's own failure, if it stopped the
    // service, is the process's. A thread stuck in a store call is left behind.
    service.own.cancel();
    let taken = taking.result().unwrap_or_else(|| {
        tracing::warn!(
            "the worker number was still being taken when the service stopped (a store call \
             that does not return); exiting without it"
        );
        Ok(())
    });
    let released = match Arc::try_unwrap(service).map(|service| Arc::try_unwrap(service.own)) {
        Ok(Ok(own)) => match own.into_generator() {
            Some(generator) => generator.release().map(|()| NumberAtStop::Released),
            None => Ok(NumberAtStop::NoneHeld),
        },
        // A batch still running on a blocking thread: the number cannot be released under
        // it. The process exits; the lock goes with it, and the mark written a horizon ahead
        // keeps a successor after every ID the batch may still issue. (Or the thread taking
        // the number is stuck: whatever it takes ends with the process the same way.)
        _ => Ok(NumberAtStop::LeftToExpire),
    };
    // After the lease (a slow block store must not hold the worker number), the unused
    // sequence values go back, so that a clean restart leaves no gap.
    let given_back = sequences.close(grace);
    taken?;
    served?;
    given_back?;
    let released =
        released.map_err(|error| Failure::runtime(format!("releasing the lease: {error}")))?;
    match released {
        NumberAtStop::Released => tracing::info!("stopped; worker number released"),
        NumberAtStop::NoneHeld => tracing::info!("stopped; no worker number was held"),
        NumberAtStop::LeftToExpire => tracing::warn!(
            "stopped with work still running; the worker number is left to expire (its \
             successor waits for the mark)"
        ),
    }
    Ok(())
}

/// What became of the service's own number at the stop.
enum NumberAtStop {
    Released,
    NoneHeld,
    LeftToExpire,
}

/// The listener, its address printed as the first line of output (read by scripts and
/// tests to find the port); the worker number follows on a line of its own once taken.
async fn listen(listen: SocketAddr) -> Result<tokio::net::TcpListener, Failure> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|error| Failure::runtime(format!("cannot listen on {listen}: {error}")))?;
    let address = listener
        .local_addr()
        .map_err(|error| Failure::runtime(error.to_string()))?;
    println!("idgen: listening on http://{address} (taking a worker number)");
    tracing::info!(%address, "listening");
    Ok(listener)
}

async fn serve(
    service: Arc<Service>,
    listener: tokio::net::TcpListener,
    lease_failed: Arc<tokio::sync::Notify>,
    grace: Duration,
) -> Result<(), Failure> {
    if let Some(api) = service.lease_api.clone() {
        // Leases not renewed within a TTL go back to the store.
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            loop {
                every.tick().await;
                // Drops claims only: no store request (the store, which outlives them, keeps
                // any connection), so it runs here.
                api.expire();
            }
        });
    }
    let own = Arc::clone(&service.own);
    let app = router(service);
    let stopping = Arc::new(tokio::sync::Notify::new());
    let server = axum::serve(listener, app).with_graceful_shutdown({
        let stopping = Arc::clone(&stopping);
        async move {
            tokio::select! {
                () = shutdown_signal() => {
                    tracing::info!("shutting down: finishing open requests");
                    // A wait for a number or a mark ends now, not after the open requests.
                    own.cancel();
                }
                () = lease_failed.notified() => {
                    tracing::info!("no worker number: shutting down, finishing open requests");
                }
            }
            stopping.notify_one();
        }
    });
    // Graceful shutdown waits for every connection to close, which a slow or stalled
    // client could put off for ever: after the grace period, or a second signal, stop.
    let deadline = async {
        stopping.notified().await;
        tokio::select! {
            _ = tokio::time::sleep(grace) => tracing::warn!(
                "open requests did not finish within {} s; stopping anyway",
                grace.as_secs()
            ),
            _ = shutdown_signal() => tracing::warn!("second signal; stopping now"),
        }
    };
    tokio::select! {
        served = server => served
            .map_err(|error| Failure::runtime(format!("the server failed: {error}"))),
        () = deadline => Ok(()),
    }
}

/// The routes of this module, and what the document says of them.
fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(get_ids, post_ids))
        .routes(routes!(decode))
        .routes(routes!(layout))
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
}

/// The OpenAPI document: every endpoint, whatever the flags (an endpoint a flag turns on
/// says what it answers without it), from the same route lists the router is built of.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut document = api::info();
    document.merge(routes().into_openapi());
    document.merge(sequences::routes().into_openapi());
    document.merge(generators::routes().into_openapi());
    document
}

/// The document as committed (`docs/openapi.json`) and served when no sequence is
/// declared: pretty, with a final newline.
pub fn document_text() -> String {
    document_text_naming(None)
}

/// The document, the sequence path's `name` limited to `sequences` when given (the
/// declared ones).
fn document_text_naming(sequences: Option<&[&str]>) -> String {
    let written = serde_json::to_value(document()).and_then(|mut document| {
        api::optional_bodies_not_null(&mut document);
        if let Some(sequences) = sequences {
            api::name_sequences(&mut document, sequences);
        }
        serde_json::to_string_pretty(&document)
    });
    // Plain data: it cannot fail; if it ever did, the document says so (and the test that
    // compares it with docs/openapi.json fails).
    written.unwrap_or_else(|error| format!("{{\"error\": {:?}}}", error.to_string())) + "\n"
}

fn router(service: Arc<Service>) -> Router {
    let (ids, _) = routes().split_for_parts();
    let (sequences, _) = sequences::routes().split_for_parts();
    let (generators, _) = generators::routes().split_for_parts();
    ids
        // HEAD would run the GET handler and issue IDs nobody sees: not allowed.
        .route("/v1/ids", axum::routing::head(head_not_allowed))
        .with_state(Arc::clone(&service))
        .merge(generators.with_state(service.lease_api.clone()))
        .merge(sequences.with_state(Arc::clone(&service.sequences)))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&service),
            count_responses,
        ))
}

/// Resolves on SIGINT or SIGTERM: axum then stops accepting and finishes open requests.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

/// An error response: the status and `{"error": "..."}`.
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(ErrorBody { error: self.1 })).into_response()
    }
}

async fn count_responses(
    State(service): State<Arc<Service>>,
    request: Request,
    next: Next,
) -> Response {
    // The path without its query: a line per request, at debug.
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    // The route's pattern, so that the histogram has a series per endpoint, not per ID.
    let endpoint = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    service
        .latency
        .get_or_create(&vec![
            ("endpoint".to_string(), endpoint),
            ("method".to_string(), method_label(&method).to_string()),
        ])
        .observe(started.elapsed().as_secs_f64());
    tracing::debug!(
        %method,
        path = %kinds::shown(&path),
        status = response.status().as_u16(),
        micros = started.elapsed().as_micros() as u64,
        "request"
    );
    let status = usize::from(response.status().as_u16());
    if let Some(counter) = status
        .checked_sub(100)
        .and_then(|i| service.responses.get(i))
    {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    response
}

/// IDs: Snowflake IDs unless `kind` says otherwise.
#[utoipa::path(
    get,
    path = "/v1/ids",
    tag = "ids",
    params(IdsQuery),
    responses(
        (status = 200, description = "The IDs, in increasing order", body = IdList),
        (status = 400, description = "The count missing, given twice, not a whole number, \
            0 or above the maximum; an unknown parameter, kind or form; form `opaque` with \
            another kind, or on a service without a key file", body = ErrorBody),
        IdsRefused,
        Defect,
    )
)]
async fn get_ids(
    State(service): State<Arc<Service>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = input::query_pairs(query.as_deref().unwrap_or("")).map_err(ApiError::bad)?;
    let count = input::count_from_query(&pairs, service.max_batch).map_err(ApiError::bad)?;
    let kind = input::once_in_query(&pairs, &["kind"], "give the kind once, as kind=...")
        .map_err(ApiError::bad)?
        .map(Kind::parse)
        .transpose()
        .map_err(ApiError::bad)?
        .unwrap_or(Kind::Snowflake);
    let form = input::once_in_query(&pairs, &["form"], "give the form once, as form=...")
        .map_err(ApiError::bad)?
        .map(Form::parse)
        .transpose()
        .map_err(ApiError::bad)?
        .unwrap_or(Form::Plain);
    issue(service, count, kind, form).await
}

/// IDs, as `GET /v1/ids` makes them, asked for in a JSON body.
#[utoipa::path(
    post,
    path = "/v1/ids",
    tag = "ids",
    request_body = api::IdsRequest,
    responses(
        (status = 200, description = "The IDs, in increasing order", body = IdList),
        BodyRefusals,
        IdsRefused,
        Defect,
    )
)]
async fn post_ids(
    State(service): State<Arc<Service>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    if query.is_some_and(|query| !query.is_empty()) {
        return Err(ApiError::bad(
            r#"POST /v1/ids takes its parameters in the body, {"count": N, "kind": "...", "form": "..."}, not the query"#,
        ));
    }
    let fields = read_json_object(&headers, body, r#"{"count": 10}"#).await?;
    if let Some(field) = fields
        .keys()
        .find(|field| !api::ID_BODY_FIELDS.contains(&field.as_str()))
    {
        return Err(ApiError::bad(format!(
            "unknown field {:?}: the body is {{\"count\": N, \"kind\": \"...\", \"form\": \"...\"}}",
            kinds::shown(field)
        )));
    }
    let count = match fields.get("count") {
        None => return Err(ApiError::bad(r#"count is missing: send {"count": N}"#)),
        Some(count) => input::count_from_json(count, service.max_batch).map_err(ApiError::bad)?,
    };
    let kind = input::named_field(&fields, "kind", Kind::NAMES, Kind::parse)
        .map_err(ApiError::bad)?
        .unwrap_or(Kind::Snowflake);
    let form = input::named_field(&fields, "form", Form::NAMES, Form::parse)
        .map_err(ApiError::bad)?
        .unwrap_or(Form::Plain);
    issue(service, count, kind, form).await
}

/// A JSON object body, sent with `Content-Type: application/json`; `example` shows one in
/// the error for anything else.
pub async fn read_json_object(
    headers: &HeaderMap,
    body: axum::body::Body,
    example: &str,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err(ApiError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON, sent with Content-Type: application/json".into(),
        ));
    }
    let body = read_body(body).await?;
    input::json_object(&body, example).map_err(ApiError::bad)
}

/// The whole body, at most [`MAX_BODY_BYTES`], within [`BODY_READ_TIMEOUT`].
async fn read_body(body: axum::body::Body) -> Result<Bytes, ApiError> {
    let read = tokio::time::timeout(
        BODY_READ_TIMEOUT,
        axum::body::to_bytes(body, MAX_BODY_BYTES),
    );
    match read.await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error)) => {
            let too_large = std::error::Error::source(&error)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            if too_large {
                Err(ApiError(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body is larger than {MAX_BODY_BYTES} bytes"),
                ))
            } else {
                Err(ApiError::bad(format!("cannot read the body: {error}")))
            }
        }
        Err(_) => Err(ApiError(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ),
        )),
    }
}

async fn issue(
    service: Arc<Service>,
    count: usize,
    kind: Kind,
    form: Form,
) -> Result<Response, ApiError> {
    // Checked before any ID is made, so a refused request uses none.
    let opaque = form == Form::Opaque;
    if opaque && kind != Kind::Snowflake {
        return Err(ApiError::bad(format!(
            "form \"opaque\" is for Snowflake IDs; a {} has no opaque form",
            kind.name()
        )));
    }
    if opaque && service.opaque.is_none() {
        return Err(ApiError::bad(
            "form \"opaque\" needs a key, and this service has none: start it with \
             --opaque-key-file FILE",
        ));
    }
    // Snowflake IDs need the service's own number: until it is taken, a 503 saying what
    // is waited for, and for how long.
    if kind == Kind::Snowflake && service.own.generator().is_none() {
        let (pending, now) = (service.own.pending(), SystemClock.now_unix_ms());
        let mut response =
            ApiError(StatusCode::SERVICE_UNAVAILABLE, pending.refusal(now)).into_response();
        response.headers_mut().insert(
            header::RETRY_AFTER,
            axum::http::HeaderValue::from(pending.retry_after_s(now)),
        );
        return Ok(response);
    }
    let make = move |service: &Service| match service.counted.issue(kind, count) {
        Some(ids) => ids,
        None => service
            .own
            .generator()
            // Checked above; once taken, the number stays.
            .ok_or_else(|| idgen::Error::LeaseStore {
                reason: "no worker number yet".into(),
            })
            .and_then(|generator| generator.next_ids(count))
            .map(|ids| match &service.opaque {
                Some(codec) if opaque => kinds::as_text(codec.encode_all(&ids)),
                _ => kinds::as_text(ids),
            }),
    };
    let ids = if count <= service.inline_batch {
        make(&service)
    } else {
        let service = Arc::clone(&service);
        tokio::task::spawn_blocking(move || make(&service))
            .await
            .map_err(|error| ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?
    };
    let ids: Vec<String> =
        ids.map_err(|error| ApiError(StatusCode::SERVICE_UNAVAILABLE, error.to_string()))?;
    service
        .ids_issued
        .fetch_add(ids.len() as u64, Ordering::Relaxed);
    let slot = KINDS.iter().position(|&k| k == kind).unwrap_or_default();
    service.issued_by_kind[slot].fetch_add(ids.len() as u64, Ordering::Relaxed);
    Ok(axum::Json(IdList { ids }).into_response())
}

/// A debugging aid: the kind and creation time of an ID, and for a Snowflake ID its parts
/// as this service's layout reads them.
#[utoipa::path(
    get,
    path = "/v1/ids/{id}/decode",
    tag = "ids",
    params(IdPath),
    responses(
        (status = 200, description = "What the ID says", body = Decoded),
        (status = 400, description = "Not an ID of any kind, or an opaque ID the service \
            cannot decode", body = ErrorBody),
    )
)]
async fn decode(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, ApiError> {
    let Path(text) = id.map_err(|rejection| ApiError::bad(rejection.body_text()))?;
    let keys = service
        .opaque
        .as_ref()
        .ok_or("and this service has no opaque key to decode it (start it with --opaque-key-file)");
    let decoded = kinds::decode_any(&service.layout, keys, &text).map_err(ApiError::bad)?;
    Ok(axum::Json(decoded).into_response())
}

/// The layout this service's Snowflake IDs follow.
#[utoipa::path(
    get,
    path = "/v1/layout",
    tag = "operations",
    responses((status = 200, description = "The layout's bits and arithmetic", body = LayoutInfo))
)]
async fn layout(State(service): State<Arc<Service>>) -> Response {
    axum::Json(layout_info(&service.layout)).into_response()
}

/// Whether Snowflake IDs are issued: for a balancer (UUIDv7s and ULIDs need no lease, but
/// the instance is taken out all the same).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses(
        (status = 200, description = "Issuing: the lease is valid, or in an outage that has \
            not reached the mark", body = Health),
        (status = 503, description = "Not issuing: starting (taking a number, waiting for \
            the previous holder's mark, `startsInMs`, or for a number to come free, \
            `givesUpInMs`), or the lease is not valid", body = Health),
    )
)]
async fn healthz(State(service): State<Arc<Service>>) -> Response {
    let Some(generator) = service.own.generator() else {
        let (pending, now) = (service.own.pending(), SystemClock.now_unix_ms());
        let mut body = Health {
            lease: api::LeaseHealth::Taking,
            datacenter: None,
            worker: None,
            valid_for_ms: 0,
            outage_since_ms: None,
            starts_in_ms: None,
            gives_up_in_ms: None,
        };
        match pending {
            Pending::Taking => {}
            Pending::Mark {
                datacenter,
                worker,
                until_unix_ms,
            } => {
                body.lease = api::LeaseHealth::WaitingForMark;
                (body.datacenter, body.worker) = (Some(datacenter), Some(worker));
                body.starts_in_ms = Some(until_unix_ms.saturating_sub(now));
            }
            Pending::Number {
                gives_up_unix_ms, ..
            } => {
                body.lease = api::LeaseHealth::WaitingForNumber;
                body.gives_up_in_ms = Some(gives_up_unix_ms.saturating_sub(now));
            }
        }
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    };
    let stats = generator.lease_stats();
    let lease = match stats.state {
        LeaseState::Valid => api::LeaseHealth::Valid,
        LeaseState::Outage => api::LeaseHealth::Outage,
        LeaseState::Expired => api::LeaseHealth::Expired,
        LeaseState::Lost => api::LeaseHealth::Lost,
        LeaseState::Released => api::LeaseHealth::Released,
        _ => api::LeaseHealth::Unknown,
    };
    let status = if matches!(stats.state, LeaseState::Valid | LeaseState::Outage) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = Health {
        lease,
        datacenter: Some(stats.datacenter),
        worker: Some(stats.worker),
        valid_for_ms: u64::try_from(stats.valid_for_ms).unwrap_or(0),
        // Still issuing, up to the mark: validForMs says how long.
        outage_since_ms: stats.outage_since_unix_ms,
        starts_in_ms: None,
        gives_up_in_ms: None,
    };
    (status, axum::Json(body)).into_response()
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document of this service, the \
        same whatever its flags but one: with sequences declared, the sequence name is one \
        of them (an enum)", body = Object, content_type = "application/json"))
)]
async fn openapi(State(service): State<Arc<Service>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        service.document.clone(),
    )
        .into_response()
}

/// The service's counters, gauges and request-latency histogram.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses(
        (status = 200, description = "OpenMetrics text (Prometheus reads it)", body = String,
            content_type = "application/openmetrics-text"),
        Defect,
    )
)]
async fn metrics(State(service): State<Arc<Service>>) -> Response {
    // Waits and refusals of every kind: the leased Snowflake generator and the 128-bit ones.
    let own = service.own.generator();
    let generator = own.map(|own| own.stats()).unwrap_or_default() + service.counted.stats();
    let lease = own.map(LeasedGenerator::lease_stats);
    let (round_trips, failed_round_trips, sequences) = service.sequences.round_trips();
    // The values of this moment, in a registry of their own; the latency histogram lives
    // on and joins it. Counters are named without `_total`: the encoder adds it.
    let mut registry = Registry::default();
    // An unlabelled sample is a plain metric (no `{}` after its name), labelled ones a family.
    let mut counter = |name: &str, help: &str, samples: Vec<(Labels, u64)>| match &samples[..] {
        [(labels, value)] if labels.is_empty() => {
            let counter = Counter::<u64>::default();
            counter.inc_by(*value);
            registry.register(name, help, counter);
        }
        _ => {
            let family = Family::<Labels, Counter>::default();
            for (labels, value) in samples {
                family.get_or_create(&labels).inc_by(value);
            }
            registry.register(name, help, family);
        }
    };
    let one = |value: u64| vec![(Labels::new(), value)];
    let label = |name: &str, value: &str| vec![(name.to_string(), value.to_string())];
    counter(
        "idgen_ids_issued",
        "IDs handed out over HTTP, of every kind",
        one(service.ids_issued.load(Ordering::Relaxed)),
    );
    counter(
        "idgen_ids_issued_by_kind",
        "IDs handed out over HTTP, by kind",
        KINDS
            .iter()
            .zip(&service.issued_by_kind)
            .map(|(kind, count)| (label("kind", kind.name()), count.load(Ordering::Relaxed)))
            .collect(),
    );
    counter(
        "idgen_http_requests",
        "HTTP responses by status code",
        service
            .responses
            .iter()
            .enumerate()
            .filter_map(|(i, count)| {
                let count = count.load(Ordering::Relaxed);
                (count > 0).then(|| (label("status", &(i + 100).to_string()), count))
            })
            .collect(),
    );
    counter(
        "idgen_sequence_values_issued",
        "Sequence values handed out over HTTP, of every sequence",
        one(service.sequences.values_issued.load(Ordering::Relaxed)),
    );
    counter(
        "idgen_block_round_trips",
        "Block requests sent to the block store by the current allocators",
        one(round_trips),
    );
    counter(
        "idgen_block_round_trips_failed",
        "Block requests that failed (the store away or refusing)",
        one(failed_round_trips),
    );
    counter(
        "idgen_overflow_waits",
        "Calls that found their millisecond's sequence used up and waited",
        one(generator.sequence_exhausted),
    );
    counter(
        "idgen_clock_behind",
        "Calls that found the clock behind the last issued millisecond, within tolerance",
        one(generator.clock_behind),
    );
    counter(
        "idgen_refusals",
        "Calls refused, by reason: clock_behind (behind beyond tolerance, or before the \
         epoch), lease (not valid), exhausted (the layout's time field ran out)",
        vec![
            (
                label("reason", "clock_behind"),
                generator.refused_clock_behind,
            ),
            (label("reason", "lease"), generator.refused_lease),
            (
                label("reason", "exhausted"),
                generator.refused_time_exhausted,
            ),
        ],
    );
    counter(
        "idgen_lease_renewals",
        "Successful lease renewals",
        one(lease.map_or(0, |lease| lease.renewals)),
    );
    counter(
        "idgen_lease_renewal_failures",
        "Failed lease renewal attempts",
        one(lease.map_or(0, |lease| lease.renewal_failures)),
    );
    counter(
        "idgen_lease_reacquisitions",
        "Worker numbers taken after the previous one was lost",
        one(lease.map_or(0, |lease| lease.reacquisitions)),
    );
    counter(
        "idgen_lease_outages",
        "Lease store outages: runs of failed renewals, counted when each begins",
        one(lease.map_or(0, |lease| lease.outages)),
    );
    let mut gauge = |name: &str, help: &str, labels: Labels, value: u64| {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        if labels.is_empty() {
            let gauge = Gauge::<i64>::default();
            gauge.set(value);
            registry.register(name, help, gauge);
        } else {
            let family = Family::<Labels, Gauge>::default();
            family.get_or_create(&labels).set(value);
            registry.register(name, help, family);
        }
    };
    gauge(
        "idgen_sequences",
        "Sequences with an allocator in this process",
        Labels::new(),
        sequences as u64,
    );
    gauge(
        "idgen_lease_outage",
        "1 while renewals fail and IDs are still issued up to the mark, else 0",
        Labels::new(),
        u64::from(lease.is_some_and(|lease| lease.state == LeaseState::Outage)),
    );
    gauge(
        "idgen_lease_valid",
        "1 while IDs are issued (the lease is valid, or an outage has not reached the \
         mark), else 0",
        Labels::new(),
        u64::from(
            lease
                .is_some_and(|lease| matches!(lease.state, LeaseState::Valid | LeaseState::Outage)),
        ),
    );
    gauge(
        "idgen_lease_valid_for_milliseconds",
        "Milliseconds left before the mark (0: past it)",
        Labels::new(),
        lease.map_or(0, |lease| lease.valid_for_ms.max(0) as u64),
    );
    gauge(
        "idgen_lease_api_leases",
        "Worker numbers leased through the lease API and held now",
        Labels::new(),
        service
            .lease_api
            .as_ref()
            .map_or(0, |api| api.held() as u64),
    );
    // The number held: none while it is being taken (or waited for).
    if let Some(lease) = lease {
        gauge(
            "idgen_worker",
            "The worker number held",
            label("datacenter", &lease.datacenter.to_string()),
            lease.worker,
        );
        gauge(
            "idgen_worker_info",
            "1, labelled with the (datacenter, worker) pair held: two processes reporting \
             the same pair is an alert",
            vec![
                ("datacenter".to_string(), lease.datacenter.to_string()),
                ("worker".to_string(), lease.worker.to_string()),
            ],
            1,
        );
    }
    registry.register(
        "idgen_http_request_duration_seconds",
        "Time from a request's arrival to its response, by endpoint (the route's pattern, or \
         unmatched) and method (GET, POST, DELETE, HEAD or other)",
        service.latency.clone(),
    );
    let mut text = String::new();
    if let Err(error) = encode(&mut text, &registry) {
        return ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn not_found() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such endpoint; see /openapi.json for every endpoint".into(),
    )
}

/// `HEAD /v1/ids`: 405, naming the methods that are allowed.
async fn head_not_allowed() -> Response {
    let mut response = method_not_allowed().await.into_response();
    response.headers_mut().insert(
        header::ALLOW,
        axum::http::HeaderValue::from_static("GET, POST"),
    );
    response
}

async fn method_not_allowed() -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this endpoint".into(),
    )
}
