//! The lease flags of `serve` and `next`: where the worker number comes from.

use std::path::PathBuf;

use clap::Args;
use idgen::lease::{FileStore, LeaseStore, LeasedGenerator, WorkerRange};
use idgen::{Generator, Layout};

use crate::Failure;
use crate::layout_args::LayoutArgs;

#[derive(Args, Clone)]
pub struct LeaseArgs {
    /// The lease directory shared by the idgen processes of this host (default:
    /// $XDG_STATE_HOME/idgen/leases, /var/lib/idgen/leases for root, else
    /// ~/.local/state/idgen/leases; created private, 0700).
    #[arg(long, value_name = "DIR", conflicts_with = "etcd")]
    lease_dir: Option<PathBuf>,
    /// Lease worker numbers from etcd instead: client URLs, comma-separated (needs a build
    /// with `--features etcd`, which needs Debian's protobuf-compiler and libprotobuf-dev).
    #[arg(long, value_name = "URL,...")]
    etcd: Option<String>,
    /// The etcd key prefix.
    #[arg(long, default_value = "/idgen", requires = "etcd")]
    namespace: String,
    /// The datacenter number.
    #[arg(long, default_value_t = 0)]
    datacenter: u64,
    /// The worker numbers this process may take, `A-B` (default: all of the layout's).
    #[arg(long, value_name = "A-B")]
    workers: Option<String>,
}

impl LeaseArgs {
    pub fn acquire(&self, layout: Layout) -> Result<LeasedGenerator, Failure> {
        let range = match &self.workers {
            Some(text) => WorkerRange::parse(self.datacenter, text)
                .map_err(|error| Failure::input(format!("--workers: {error}")))?,
            None => WorkerRange::all(&layout, self.datacenter),
        };
        range
            .check(&layout)
            .map_err(|error| Failure::input(error.to_string()))?;
        // A layout whose epoch is still to come is bad input, found before any lease.
        layout
            .check_epoch(idgen::Clock::now_unix_ms(&idgen::SystemClock))
            .map_err(|error| Failure::input(error.to_string()))?;
        let store = self.store()?;
        LeasedGenerator::builder(store, range)
            .generator(Generator::builder().layout(layout))
            .acquire()
            .map_err(|error| Failure::runtime(format!("cannot lease a worker number: {error}")))
    }

    fn store(&self) -> Result<Box<dyn LeaseStore>, Failure> {
        if let Some(endpoints) = &self.etcd {
            return etcd_store(endpoints, &self.namespace);
        }
        let store = match &self.lease_dir {
            Some(dir) => FileStore::open(dir),
            None => FileStore::open_default(),
        };
        let store = store.map_err(|error| match error {
            idgen::Error::LeaseConfig { .. } => Failure::input(error.to_string()),
            _ => Failure::runtime(error.to_string()),
        })?;
        Ok(Box::new(store))
    }
}

#[derive(Args)]
pub struct InitArgs {
    /// The lease directory (default: the one `serve` and `next` use).
    #[arg(long, value_name = "DIR", conflicts_with = "etcd")]
    lease_dir: Option<PathBuf>,
    /// Initialise an etcd namespace instead: client URLs, comma-separated.
    #[arg(long, value_name = "URL,...")]
    etcd: Option<String>,
    /// The etcd key prefix.
    #[arg(long, default_value = "/idgen", requires = "etcd")]
    namespace: String,
    /// The layout of the processes that use the store: etcd gets a mark for every number.
    #[command(flatten)]
    layout: LayoutArgs,
}

impl InitArgs {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        if let Some(endpoints) = &self.etcd {
            return init_etcd(endpoints, &self.namespace, &layout);
        }
        let dir = match self.lease_dir {
            Some(dir) => dir,
            None => idgen::lease::default_lease_dir()
                .map_err(|error| Failure::input(error.to_string()))?,
        };
        let written = FileStore::init(&dir).map_err(|error| Failure::runtime(error.to_string()))?;
        if written {
            println!("initialised the lease directory {}", dir.display());
        } else {
            println!(
                "the lease directory {} was initialised already",
                dir.display()
            );
        }
        Ok(())
    }
}

#[cfg(feature = "etcd")]
fn init_etcd(endpoints: &str, namespace: &str, layout: &Layout) -> Result<(), Failure> {
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    let store = idgen::lease::EtcdStore::connect(&endpoints, namespace)
        .map_err(|error| Failure::runtime(error.to_string()))?;
    let written = store
        .init(0..=layout.max_datacenter(), 0..=layout.max_worker())
        .map_err(|error| Failure::runtime(error.to_string()))?;
    println!("initialised the etcd namespace {namespace}: {written} marks written");
    Ok(())
}

#[cfg(not(feature = "etcd"))]
fn init_etcd(_endpoints: &str, _namespace: &str, _layout: &Layout) -> Result<(), Failure> {
    etcd_store("", "").map(|_| ())
}

#[cfg(feature = "etcd")]
fn etcd_store(endpoints: &str, namespace: &str) -> Result<Box<dyn LeaseStore>, Failure> {
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    idgen::lease::EtcdStore::connect(&endpoints, namespace)
        .map(|store| Box::new(store) as Box<dyn LeaseStore>)
        .map_err(|error| match error {
            idgen::Error::LeaseConfig { .. } => Failure::input(error.to_string()),
            _ => Failure::runtime(error.to_string()),
        })
}

#[cfg(not(feature = "etcd"))]
fn etcd_store(_endpoints: &str, _namespace: &str) -> Result<Box<dyn LeaseStore>, Failure> {
    Err(Failure::input(
        "this idgen was built without etcd support; build it with --features etcd \
         (which needs protoc and the well-known .proto files: Debian's protobuf-compiler \
         and libprotobuf-dev)",
    ))
}
