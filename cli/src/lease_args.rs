//! The lease flags of `serve` and `next`: where the worker number comes from.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use clap::builder::NonEmptyStringValueParser;
use idgen::lease::{
    AcquireWatch, FileStore, LeaseStore, LeasedGenerator, NumberState, WorkerRange,
};
use idgen::{Generator, Layout};

use crate::Failure;
use crate::layout_args::LayoutArgs;

/// Which store, shared by `serve`, `next` and `leases init`.
#[derive(Args, Clone)]
pub struct StoreArgs {
    /// The lease directory shared by the idgen processes of this host that must never take
    /// the same worker number (default:
    /// $XDG_STATE_HOME/idgen/leases, /var/lib/idgen/leases for root, else
    /// ~/.local/state/idgen/leases; created private, 0700).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "etcd",
        env = "IDGEN_LEASE_DIR"
    )]
    lease_dir: Option<PathBuf>,
    /// Lease worker numbers from etcd instead: client URLs, comma-separated (needs a build
    /// with `--features etcd`, which needs Debian's protobuf-compiler and libprotobuf-dev).
    #[arg(
        long,
        value_name = "URL,...",
        env = "IDGEN_ETCD",
        hide_env_values = true,
        value_parser = NonEmptyStringValueParser::new()
    )]
    etcd: Option<String>,
    /// The etcd key prefix.
    #[arg(
        long,
        default_value = "/idgen",
        requires = "etcd",
        env = "IDGEN_NAMESPACE"
    )]
    namespace: String,
    /// The lease's TTL, such as `3s`, `500ms` or `1m` (default: 3s on the file store, 30s
    /// on etcd, which takes whole seconds from 2s). `leases init` writes etcd marks this
    /// far ahead.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, env = "IDGEN_LEASE_TTL")]
    lease_ttl: Option<Duration>,
}

#[derive(Args, Clone)]
pub struct LeaseArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    range: RangeArgs,
    /// How long to go on issuing while the lease store cannot be reached, such as `30s`
    /// or `5m`: each renewal writes the mark this far ahead, and the number of a holder
    /// that crashed stays unusable this long (default: the TTL on the file store, 3m on
    /// etcd; never below the TTL).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, env = "IDGEN_OUTAGE_HORIZON")]
    outage_horizon: Option<Duration>,
}

/// `--datacenter` and `--workers`: the numbers a process may take, or a listing shows.
#[derive(Args, Clone)]
pub struct RangeArgs {
    /// The datacenter number.
    #[arg(long, default_value_t = 0, env = "IDGEN_DATACENTER")]
    datacenter: u64,
    /// The worker numbers, `A-B` (default: all of the layout's).
    #[arg(
        long,
        value_name = "A-B",
        env = "IDGEN_WORKERS",
        value_parser = NonEmptyStringValueParser::new()
    )]
    workers: Option<String>,
}

impl RangeArgs {
    /// The range, checked against the layout.
    fn range(&self, layout: &Layout) -> Result<WorkerRange, Failure> {
        let range = match &self.workers {
            Some(text) => WorkerRange::parse(self.datacenter, text)
                .map_err(|error| Failure::input(format!("--workers: {error}")))?,
            None => WorkerRange::all(layout, self.datacenter),
        };
        range
            .check(layout)
            .map_err(|error| Failure::input(error.to_string()))?;
        Ok(range)
    }
}

/// `500ms`, `3s`, `5m`, `1h`: a whole number and a unit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let canonical = !number.is_empty() && (number == "0" || !number.starts_with('0'));
    let number: u64 = match number.parse() {
        Ok(number) if canonical => number,
        _ => {
            return Err(format!(
                "{text:?} is not a duration such as 500ms, 3s or 5m"
            ));
        }
    };
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("{text:?}: the unit must be ms, s, m or h")),
    };
    number
        .checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// What `serve` leases from: the store, shared by its own generator and its lease API, the
/// range, and the horizon.
#[derive(Clone)]
pub struct LeaseSource {
    pub store: Arc<dyn LeaseStore>,
    pub range: WorkerRange,
    pub horizon: Option<Duration>,
    /// The name recorded with the process's own number (default: `pid <pid> on <host>`).
    pub holder: Option<String>,
}

impl LeaseArgs {
    /// Checks the range and the layout's epoch, and opens the store.
    pub fn source(&self, layout: Layout) -> Result<LeaseSource, Failure> {
        let range = self.range.range(&layout)?;
        // A layout whose epoch is still to come is bad input, found before any lease.
        layout
            .check_epoch(idgen::Clock::now_unix_ms(&idgen::SystemClock))
            .map_err(|error| Failure::input(error.to_string()))?;
        Ok(LeaseSource {
            store: Arc::from(self.store.open()?),
            range,
            horizon: self.outage_horizon,
            holder: None,
        })
    }

    pub fn acquire(&self, layout: Layout) -> Result<LeasedGenerator, Failure> {
        self.source(layout)?.acquire(layout)
    }
}

impl LeaseSource {
    /// A leased generator on the layout.
    pub fn acquire(&self, layout: Layout) -> Result<LeasedGenerator, Failure> {
        self.acquire_watched(layout, &AcquireWatch::new())
            .map_err(acquire_failure)
    }

    /// A leased generator on the layout, its waits for a mark shown to (and cancelled by)
    /// `watch`; the library's error as it is, for a caller that retries some.
    pub fn acquire_watched(
        &self,
        layout: Layout,
        watch: &AcquireWatch,
    ) -> Result<LeasedGenerator, idgen::Error> {
        let mut builder = LeasedGenerator::builder(Arc::clone(&self.store), self.range)
            .generator(Generator::builder().layout(layout))
            .watch(watch);
        if let Some(horizon) = self.horizon {
            builder = builder.outage_horizon(horizon);
        }
        if let Some(holder) = &self.holder {
            builder = builder.holder(holder.clone());
        }
        builder.acquire()
    }

    /// How long a holder of this store goes on issuing after its last renewal at most: the
    /// TTL plus the outage horizon (the flag's, else the store's default).
    pub fn crashed_holder_bound(&self) -> Duration {
        self.store.ttl().saturating_add(
            self.horizon
                .unwrap_or_else(|| self.store.default_outage_horizon()),
        )
    }
}

/// What a command says when it cannot lease a number: bad input (exit 2) for the store's
/// configuration or another layout, else a runtime failure.
pub fn acquire_failure(error: idgen::Error) -> Failure {
    match error {
        idgen::Error::LeaseConfig { .. } | idgen::Error::LayoutMismatch { .. } => {
            Failure::input(format!("{error}"))
        }
        _ => Failure::runtime(format!("cannot lease a worker number: {error}")),
    }
}

impl StoreArgs {
    /// A command that only reads a store must not create it (a mistyped directory).
    fn refuse_missing_dir(&self) -> Result<(), Failure> {
        if self.etcd.is_some() {
            return Ok(());
        }
        let dir = match &self.lease_dir {
            Some(dir) => dir.clone(),
            None => idgen::lease::default_lease_dir()
                .map_err(|error| Failure::input(error.to_string()))?,
        };
        if dir.exists() {
            return Ok(());
        }
        Err(Failure::input(format!(
            "no lease directory at {}: nothing to read",
            dir.display()
        )))
    }

    fn open(&self) -> Result<Box<dyn LeaseStore>, Failure> {
        if let Some(endpoints) = &self.etcd {
            return etcd_store(endpoints, &self.namespace, self.lease_ttl);
        }
        let store = match &self.lease_dir {
            Some(dir) => FileStore::open(dir),
            None => FileStore::open_default(),
        };
        let store = match self.lease_ttl {
            Some(ttl) => store.and_then(|store| store.with_ttl(ttl)),
            None => store,
        };
        let store = store.map_err(|error| match error {
            idgen::Error::LeaseConfig { .. } => Failure::input(error.to_string()),
            _ => Failure::runtime(error.to_string()),
        })?;
        Ok(Box::new(store))
    }
}

/// `idgen leases`: the fleet view.
#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    range: RangeArgs,
    /// One JSON array of objects instead of lines of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    layout: LayoutArgs,
}

impl ListArgs {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        let range = self.range.range(&layout)?;
        self.store.refuse_missing_dir()?;
        let store = self.store.open()?;
        let numbers = store
            .survey(&range)
            .map_err(|error| Failure::runtime(error.to_string()))?;
        let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
        // A mark further ahead than a horizon and a TTL was not written by a holder on a
        // clock that agrees with this one.
        let far_ms = (store.default_outage_horizon() + store.ttl()).as_millis() as u64;
        let rows: Vec<serde_json::Value> = numbers
            .iter()
            .map(|number| {
                let valid_for_ms = number.mark_unix_ms.map(|mark| mark as i64 - now as i64);
                let far = number.mark_unix_ms.is_some_and(|mark| mark > now + far_ms);
                let mut anomalies = Vec::new();
                if far {
                    anomalies.push(format!(
                        "mark more than {} s ahead of this clock",
                        far_ms / 1000
                    ));
                }
                if let Some(detail) = &number.detail {
                    anomalies.push(detail.clone());
                }
                serde_json::json!({
                    "datacenter": number.datacenter,
                    "worker": number.worker,
                    "state": number.state.as_str(),
                    "holder": number.holder,
                    "markMs": number.mark_unix_ms,
                    "validForMs": valid_for_ms,
                    "anomalies": anomalies,
                })
            })
            .collect();
        if self.json {
            println!("{}", serde_json::Value::Array(rows));
            return Ok(());
        }
        for (number, row) in numbers.iter().zip(&rows) {
            let mut line = format!(
                "dc {} worker {:>4}  {:<7}",
                number.datacenter,
                number.worker,
                number.state.as_str()
            );
            if let Some(holder) = &number.holder {
                line += &format!("  holder {holder:?}");
            }
            if let Some(mark) = number.mark_unix_ms {
                let left = mark as i64 - now as i64;
                let when = if left > 0 {
                    format!("{:.1} s from now", left as f64 / 1000.0)
                } else {
                    "passed".to_string()
                };
                line += &format!("  mark {} ({when})", crate::time::rfc3339_ms(mark));
            }
            for anomaly in row["anomalies"].as_array().into_iter().flatten() {
                line += &format!("  ! {}", anomaly.as_str().unwrap_or_default());
            }
            println!("{line}");
        }
        let count = |state: NumberState| numbers.iter().filter(|n| n.state == state).count();
        println!(
            "{} numbers: {} free, {} held, {} corrupt, {} missing",
            numbers.len(),
            count(NumberState::Free),
            count(NumberState::Held),
            count(NumberState::Corrupt),
            count(NumberState::Missing)
        );
        Ok(())
    }
}

#[derive(Args)]
pub struct InitArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The layout of the processes that use the store: etcd gets a mark for every number.
    #[command(flatten)]
    layout: LayoutArgs,
    /// How far ahead etcd marks are written where none exists (default: 3m, or the
    /// largest horizon a holder recorded if longer; at least the TTL): a holder cut off
    /// from etcd while its namespace was wiped may go on issuing that long. For a namespace
    /// no idgen ever used, `--new` instead.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, env = "IDGEN_OUTAGE_HORIZON")]
    outage_horizon: Option<Duration>,
    /// After `etcdctl snapshot restore`: raise every mark to an outage horizon from now
    /// (the largest known), so that no successor starts before a holder the restored
    /// namespace forgot has stopped, and let holders that found the restore go on.
    #[arg(long, conflicts_with = "new")]
    after_restore: bool,
    /// The etcd namespace was never used by any idgen (not wiped, not restored): its marks
    /// are now, so the first holders are ready at once. Refused if the namespace holds any
    /// key. Without it, a namespace is taken to be wiped, and its first holders wait one
    /// outage horizon (3 minutes by default) for holders it may have forgotten.
    #[arg(long, conflicts_with = "outage_horizon")]
    new: bool,
}

impl InitArgs {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        let store = self.store;
        if let Some(endpoints) = &store.etcd {
            return init_etcd(
                endpoints,
                &store.namespace,
                store.lease_ttl,
                self.outage_horizon,
                &layout,
                if self.after_restore {
                    InitKind::AfterRestore
                } else if self.new {
                    InitKind::New
                } else {
                    InitKind::MaybeWiped
                },
            );
        }
        if self.new {
            return Err(Failure::input(
                "--new is for etcd; a lease directory needs no such step (a number's record \
                 in it is its own mark, and a new directory has none to wait for)",
            ));
        }
        if self.after_restore {
            return Err(Failure::input(
                "--after-restore is for etcd; a lease directory restored from a backup needs \
                 no step of its own (restored records are new files, whose marks are not \
                 trusted, and live holders keep their numbers): see docs/leases.md, \
                 \"Restoring a store from a backup\"",
            ));
        }
        let dir = match store.lease_dir {
            Some(dir) => dir,
            None => idgen::lease::default_lease_dir()
                .map_err(|error| Failure::input(error.to_string()))?,
        };
        // A store of another layout is refused before anything is written to it.
        if dir.exists()
            && let Ok(existing) = FileStore::open(&dir)
        {
            refuse_other_layout(&existing, &layout)?;
        }
        let written = FileStore::init(&dir).map_err(|error| Failure::runtime(error.to_string()))?;
        if written {
            println!("initialised the lease directory {}", dir.display());
        } else {
            println!(
                "the lease directory {} was initialised already",
                dir.display()
            );
        }
        let store = FileStore::open(&dir).map_err(|error| Failure::runtime(error.to_string()))?;
        bind_layout(&store, &layout)
    }
}

/// Refuses a store that serves another layout than `layout`.
fn refuse_other_layout(store: &dyn LeaseStore, layout: &Layout) -> Result<(), Failure> {
    match store.recorded_layout() {
        // The store's own refusal, which names it.
        Ok(Some(recorded)) if recorded != *layout => store
            .bind_layout(layout)
            .map_err(|error| Failure::input(error.to_string())),
        _ => Ok(()),
    }
}

/// Records the layout in a store just initialised, or checks the one it has.
fn bind_layout(store: &dyn LeaseStore, layout: &Layout) -> Result<(), Failure> {
    store.bind_layout(layout).map_err(|error| match error {
        idgen::Error::LayoutMismatch { .. } => Failure::input(error.to_string()),
        _ => Failure::runtime(error.to_string()),
    })?;
    println!("the store serves the layout {layout}");
    Ok(())
}

/// `idgen leases move-check`: whether a fleet may leave this store's layout for the one
/// the layout flags give.
#[derive(Args)]
pub struct MoveCheckArgs {
    /// The store the fleet leaves (its recorded layout and marks are read, nothing taken).
    #[command(flatten)]
    store: StoreArgs,
    /// The layout the fleet moves to.
    #[command(flatten)]
    layout: LayoutArgs,
}

impl MoveCheckArgs {
    pub fn run(self) -> Result<(), Failure> {
        let new = self.layout.layout()?;
        self.store.refuse_missing_dir()?;
        let store = self.store.open()?;
        let runtime = |error: idgen::Error| Failure::runtime(error.to_string());
        let old = store.recorded_layout().map_err(runtime)?.ok_or_else(|| {
            Failure::input(
                "the store records no layout (it was last used by an idgen older than the \
                 layout record): start one process of the fleet's layout on it, or run \
                 `idgen leases init` with the fleet's layout flags, then check again",
            )
        })?;
        // Every mark of every number: no holder issued past the highest, and none of
        // those still running will.
        let mut last_mark = None::<u64>;
        for datacenter in 0..=old.max_datacenter() {
            let numbers = store
                .survey(&WorkerRange::all(&old, datacenter))
                .map_err(runtime)?;
            for number in numbers {
                if number.state == NumberState::Held {
                    return Err(Failure::runtime(format!(
                        "worker {} of datacenter {datacenter} is held{}: the old fleet is still \
                         issuing and its marks still move; stop it, then check again",
                        number.worker,
                        number
                            .holder
                            .as_ref()
                            .map(|holder| format!(" by {holder:?}"))
                            .unwrap_or_default()
                    )));
                }
                if number.state == NumberState::Corrupt || number.state == NumberState::Missing {
                    return Err(Failure::runtime(format!(
                        "worker {} of datacenter {datacenter} is {}: its last mark is not \
                         known, so neither is where the old layout left the ID space ({})",
                        number.worker,
                        number.state.as_str(),
                        number.detail.unwrap_or_default()
                    )));
                }
                last_mark = last_mark.max(number.mark_unix_ms);
            }
        }
        let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
        // No holder issued an ID dated after its number's last mark; a store with no mark
        // at all never had an ID issued on it.
        let until = last_mark.unwrap_or(0);
        let left_at = old.last_id_until(until);
        let new_first = new.first_unix_ms_above(left_at);
        println!("old layout: {old}");
        println!("new layout: {new}");
        println!(
            "the old layout's IDs, up to its last mark ({}): at most {}",
            crate::time::rfc3339_ms(until),
            left_at
        );
        match new_first {
            Some(from) if from <= now => {
                println!(
                    "ok: every ID of the new layout from now on lies above them (its first ID \
                     now is {})",
                    new.last_id_until(now.saturating_sub(1)).as_u64() + 1
                );
                Ok(())
            }
            Some(from) => Err(Failure::runtime(format!(
                "refused: the new layout's IDs lie below the old layout's until {} ({} ms from \
                 now); start the new fleet after that, or choose an epoch or widths whose IDs \
                 lie above",
                crate::time::rfc3339_ms(from),
                from - now
            ))),
            None => Err(Failure::runtime(
                "refused: the new layout never issues an ID above the old layout's last one \
                 (its time runs out first); choose an earlier epoch or more time bits",
            )),
        }
    }
}

/// What `idgen leases init` takes an etcd namespace to be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InitKind {
    /// New, or wiped under holders that may still be issuing (the default).
    MaybeWiped,
    /// Never used, as the operator declares with `--new`.
    New,
    /// Restored from a snapshot (`--after-restore`).
    AfterRestore,
}

#[cfg(feature = "etcd")]
fn init_etcd(
    endpoints: &str,
    namespace: &str,
    ttl: Option<Duration>,
    horizon: Option<Duration>,
    layout: &Layout,
    kind: InitKind,
) -> Result<(), Failure> {
    let mut store = connect_etcd(endpoints, namespace, ttl)?;
    if let Some(horizon) = horizon {
        if horizon < store.ttl() {
            return Err(Failure::input(format!(
                "--outage-horizon {horizon:?} is below the TTL of {:?}",
                store.ttl()
            )));
        }
        store = store.with_outage_horizon(horizon);
    }
    // Marks are written for the numbers of `layout`: with another one's flags, some of the
    // fleet's numbers would be left out.
    refuse_other_layout(&store, layout)?;
    let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
    let (datacenters, workers) = (0..=layout.max_datacenter(), 0..=layout.max_worker());
    match kind {
        InitKind::AfterRestore => {
            let raised = store
                .init_after_restore(datacenters, workers, now)
                .map_err(|error| Failure::runtime(error.to_string()))?;
            println!(
                "initialised the etcd namespace {namespace} after a restore: {raised} marks \
                 raised to an outage horizon from now"
            );
        }
        InitKind::New => {
            let written =
                store
                    .init_new(datacenters, workers, now)
                    .map_err(|error| match error {
                        idgen::Error::LeaseConfig { .. } => Failure::input(error.to_string()),
                        _ => Failure::runtime(error.to_string()),
                    })?;
            println!(
                "initialised the new etcd namespace {namespace}: {written} marks written, \
                 ready at once"
            );
        }
        InitKind::MaybeWiped => {
            let ahead = store.default_outage_horizon();
            let written = store
                .init(datacenters, workers, now)
                .map_err(|error| Failure::runtime(error.to_string()))?;
            println!(
                "initialised the etcd namespace {namespace}: {written} marks written at least \
                 {ahead:?} ahead, so holders starting before then wait for them (in case the \
                 namespace was wiped under holders still issuing); for a namespace no idgen \
                 ever used, `idgen leases init --new` is ready at once"
            );
        }
    }
    bind_layout(&store, layout)
}

#[cfg(not(feature = "etcd"))]
fn init_etcd(
    _endpoints: &str,
    _namespace: &str,
    _ttl: Option<Duration>,
    _horizon: Option<Duration>,
    _layout: &Layout,
    _kind: InitKind,
) -> Result<(), Failure> {
    etcd_store("", "", None).map(|_| ())
}

#[cfg(feature = "etcd")]
fn etcd_store(
    endpoints: &str,
    namespace: &str,
    ttl: Option<Duration>,
) -> Result<Box<dyn LeaseStore>, Failure> {
    connect_etcd(endpoints, namespace, ttl).map(|store| Box::new(store) as Box<dyn LeaseStore>)
}

#[cfg(feature = "etcd")]
fn connect_etcd(
    endpoints: &str,
    namespace: &str,
    ttl: Option<Duration>,
) -> Result<idgen::lease::EtcdStore, Failure> {
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    idgen::lease::EtcdStore::connect(&endpoints, namespace)
        .and_then(|store| match ttl {
            Some(ttl) => store.with_ttl(ttl),
            None => Ok(store),
        })
        .map_err(|error| match error {
            idgen::Error::LeaseConfig { .. } => Failure::input(error.to_string()),
            _ => Failure::runtime(error.to_string()),
        })
}

#[cfg(not(feature = "etcd"))]
fn etcd_store(
    _endpoints: &str,
    _namespace: &str,
    _ttl: Option<Duration>,
) -> Result<Box<dyn LeaseStore>, Failure> {
    Err(Failure::input(
        "this idgen was built without etcd support; build it with --features etcd \
         (which needs protoc and the well-known .proto files: Debian's protobuf-compiler \
         and libprotobuf-dev)",
    ))
}
