//! The lease flags of `serve`, `next` and `idgen leases`: where worker numbers come from
//! (the store, the range, the outage horizon), and the store and source they open.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use clap::builder::NonEmptyStringValueParser;
use idgen::lease::{AcquireWatch, FileStore, LeaseStore, LeasedGenerator, WorkerRange};
use idgen::{Generator, Layout};

use crate::failure::Failure;

/// Which store, shared by `serve`, `next` and `leases init`.
#[derive(Args, Clone)]
#[command(group(clap::ArgGroup::new("networked_store").args(["etcd", "lease_postgres"])))]
pub struct StoreArgs {
    /// The lease directory shared by the idgen processes of this host that must never take
    /// the same worker number (default:
    /// $XDG_STATE_HOME/idgen/leases, /var/lib/idgen/leases for root, else
    /// ~/.local/state/idgen/leases; created private, 0700).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "networked_store",
        env = "IDGEN_LEASE_DIR"
    )]
    pub lease_dir: Option<PathBuf>,
    /// Lease worker numbers from etcd instead: client URLs, comma-separated (needs a build
    /// with `--features etcd`, which needs Debian's protobuf-compiler and libprotobuf-dev).
    #[arg(
        long,
        value_name = "URL,...",
        env = "IDGEN_ETCD",
        hide_env_values = true,
        value_parser = NonEmptyStringValueParser::new()
    )]
    pub etcd: Option<String>,
    /// Lease worker numbers from PostgreSQL instead: a connection URL
    /// (`postgresql://user@host:port/db`). The tables idgen_leases and
    /// idgen_lease_namespaces are created if absent. (`--postgres` is the block store's.)
    #[arg(
        long,
        value_name = "URL",
        env = "IDGEN_LEASE_POSTGRES",
        hide_env_values = true,
        conflicts_with = "etcd",
        value_parser = NonEmptyStringValueParser::new()
    )]
    pub lease_postgres: Option<String>,
    /// The PostgreSQL schema of idgen's tables, for the lease store (`--lease-postgres`)
    /// and the block store (`--postgres`) alike (default: the one schema of the database
    /// that has them, else public). Every statement names it: the URL's or the role's
    /// search_path plays no part. Give every process of a fleet the same one; copies of the
    /// tables in two schemas are refused.
    #[arg(
        long,
        value_name = "NAME",
        env = "IDGEN_POSTGRES_SCHEMA",
        value_parser = NonEmptyStringValueParser::new()
    )]
    pub postgres_schema: Option<String>,
    /// The namespace of an etcd or PostgreSQL store: several fleets (ID spaces) share one
    /// server under different namespaces.
    #[arg(
        long,
        default_value = "/idgen",
        requires = "networked_store",
        env = "IDGEN_NAMESPACE"
    )]
    pub namespace: String,
    /// The lease's TTL, such as `3s`, `500ms` or `1m` (default: 3s on the file store, 30s
    /// on etcd, which takes whole seconds from 2s, and on PostgreSQL, from 1s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, env = "IDGEN_LEASE_TTL")]
    pub lease_ttl: Option<Duration>,
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
    /// etcd and PostgreSQL; never below the TTL).
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
    pub fn range(&self, layout: &Layout) -> Result<WorkerRange, Failure> {
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

/// `500ms`, `3s`, `5m`, `1h`, `365d`: a whole number and a unit.
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
        "d" => 86_400_000,
        _ => return Err(format!("{text:?}: the unit must be ms, s, m, h or d")),
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
    /// The store as the metrics name it (`StoreArgs::label`).
    pub store_label: String,
}

impl LeaseArgs {
    /// The PostgreSQL schema named for idgen's tables (`--postgres-schema`), if any.
    pub fn postgres_schema(&self) -> Option<&str> {
        self.store.postgres_schema.as_deref()
    }

    /// The store the status page surveys (see [`StoreArgs::survey_store`]).
    pub fn survey_store(
        &self,
        serving: &Arc<dyn LeaseStore>,
    ) -> Result<Arc<dyn LeaseStore>, Failure> {
        self.store.survey_store(serving)
    }
}

impl LeaseArgs {
    /// Checks the range and the layout's epoch, and opens the store.
    pub fn source(&self, layout: Layout) -> Result<LeaseSource, Failure> {
        let range = self.range.range(&layout)?;
        // A layout whose epoch is still to come is bad input, found before any lease.
        layout
            .check_epoch(idgen::Clock::now_unix_ms(&idgen::SystemClock))
            .map_err(|error| Failure::input(error.to_string()))?;
        let store = Arc::from(self.store.open()?);
        Ok(LeaseSource {
            store,
            range,
            horizon: self.outage_horizon,
            holder: None,
            store_label: self.store.label(),
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

    /// How far ahead of a clock that agrees with theirs the fleet's holders write their
    /// marks: the TTL plus the larger of this process's outage horizon and the store's
    /// default (the fleet view's "mark far ahead" beyond it; a member started with a still
    /// larger `--outage-horizon` shows there too).
    pub fn fleet_mark_bound(&self) -> Duration {
        let horizon = self.horizon.unwrap_or_default();
        self.store
            .ttl()
            .saturating_add(horizon.max(self.store.default_outage_horizon()))
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
    pub fn refuse_missing_dir(&self) -> Result<(), Failure> {
        if self.etcd.is_some() || self.lease_postgres.is_some() {
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

    /// The store as the metrics name it (`idgen_worker_info{store}`): its kind and place,
    /// read from the parsed address so that no user, password or option can show:
    /// `file:HOST:DIR`, `etcd:HOST:PORT,... NAMESPACE`, `postgres:HOST:PORT,.../DB NAMESPACE`.
    pub fn label(&self) -> String {
        if let Some(url) = &self.lease_postgres {
            return format!("postgres:{} {}", postgres_place(url), self.namespace);
        }
        if let Some(endpoints) = &self.etcd {
            let places: Vec<String> = endpoints.split(',').map(http_place).collect();
            return format!("etcd:{} {}", places.join(","), self.namespace);
        }
        let dir = match &self.lease_dir {
            Some(dir) => Some(dir.clone()),
            None => idgen::lease::default_lease_dir().ok(),
        };
        // Two hosts' directories are two stores at one path: the host tells them apart.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_string())
            .unwrap_or_default();
        match dir {
            Some(dir) => {
                let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
                format!("file:{host}:{}", dir.display())
            }
            None => format!("file:{host}:"),
        }
    }

    /// The store the status page's fleet view surveys: for etcd and PostgreSQL one of its
    /// own, on a connection apart from `serving`'s (whose requests go one at a time: a slow
    /// survey would queue the service's renewals behind it); for a directory, `serving`
    /// itself (a survey reads files and takes no lock that a renewal waits for).
    pub fn survey_store(
        &self,
        serving: &Arc<dyn LeaseStore>,
    ) -> Result<Arc<dyn LeaseStore>, Failure> {
        if self.lease_postgres.is_some() || self.etcd.is_some() {
            return self.open().map(Arc::from);
        }
        Ok(Arc::clone(serving))
    }

    pub fn open(&self) -> Result<Box<dyn LeaseStore>, Failure> {
        if let Some(url) = &self.lease_postgres {
            let schema = self.postgres_schema.as_deref();
            return connect_postgres(url, schema, &self.namespace, self.lease_ttl)
                .map(|store| Box::new(store) as Box<dyn LeaseStore>);
        }
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
        Ok(Box::new(store.map_err(store_failure)?))
    }
}

/// The PostgreSQL lease store at `url`, under `namespace`, its tables in `schema` (or the
/// one found, see `PostgresStore::connect`).
pub fn connect_postgres(
    url: &str,
    schema: Option<&str>,
    namespace: &str,
    ttl: Option<Duration>,
) -> Result<idgen::lease::PostgresStore, Failure> {
    match schema {
        Some(schema) => idgen::lease::PostgresStore::connect_in(url, schema, namespace),
        None => idgen::lease::PostgresStore::connect(url, namespace),
    }
    .and_then(|store| match ttl {
        Some(ttl) => store.with_ttl(ttl),
        None => Ok(store),
    })
    .map_err(store_failure)
}

/// A store's configuration is bad input (exit 2); anything else a runtime failure.
fn store_failure(error: idgen::Error) -> Failure {
    match error {
        idgen::Error::LeaseConfig { .. } => Failure::input(error.to_string()),
        _ => Failure::runtime(error.to_string()),
    }
}

#[cfg(feature = "etcd")]
pub fn etcd_store(
    endpoints: &str,
    namespace: &str,
    ttl: Option<Duration>,
) -> Result<Box<dyn LeaseStore>, Failure> {
    connect_etcd(endpoints, namespace, ttl).map(|store| Box::new(store) as Box<dyn LeaseStore>)
}

#[cfg(feature = "etcd")]
pub fn connect_etcd(
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
        .map_err(store_failure)
}

#[cfg(not(feature = "etcd"))]
pub fn etcd_store(
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

/// The hosts, ports and database of a PostgreSQL connection string, as the client parses
/// it: `postgresql://idgen:secret@db:5432/ids?sslmode=require` is `db:5432/ids`.
fn postgres_place(url: &str) -> String {
    use std::str::FromStr;
    let Ok(config) = postgres::Config::from_str(url) else {
        return "(unparsed)".to_string();
    };
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let host = match host {
                postgres::config::Host::Tcp(name) => name.clone(),
                postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            // One port for every host, or one each; 5432 when none is given.
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    format!(
        "{}/{}",
        hosts.join(","),
        config.get_dbname().unwrap_or_default()
    )
}

/// The host and port of an etcd endpoint, as an HTTP client parses it.
fn http_place(endpoint: &str) -> String {
    match endpoint.trim().parse::<axum::http::Uri>() {
        Ok(uri) => match (uri.host(), uri.port_u16()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            _ => "(unparsed)".to_string(),
        },
        Err(_) => "(unparsed)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{http_place, postgres_place};

    #[test]
    fn a_store_label_shows_no_password() {
        for (url, place) in [
            (
                "postgresql://idgen:s3cret@db:5432/ids?sslmode=require&password=x",
                "db:5432/ids",
            ),
            ("postgresql://idgen:pa/ss@db/ids", "db:5432/ids"),
            ("postgresql://idgen:pa?ss@db/ids", "db:5432/ids"),
            ("postgresql://idgen:p%40ss@db:6543/ids", "db:6543/ids"),
            ("postgresql://idgen@a:1,b:2/ids", "a:1,b:2/ids"),
            (
                "host=db port=5433 dbname=ids password=secret",
                "db:5433/ids",
            ),
        ] {
            let shown = postgres_place(url);
            assert_eq!(shown, place, "{url}");
            assert!(
                !shown.contains("ss") && !shown.contains("secret"),
                "{shown}"
            );
        }
        assert_eq!(http_place("http://user:pw@etcd-1:2379"), "etcd-1:2379");
        assert_eq!(http_place("http://127.0.0.1:2379/"), "127.0.0.1:2379");
        assert_eq!(http_place("http://[::1]:2379"), "[::1]:2379");
        assert_eq!(http_place("not a url at all"), "(unparsed)");
    }
}
