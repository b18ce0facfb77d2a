//! `idgen leases init`: a lease store made ready for first use (an etcd namespace's marks,
//! a lease directory's store.idgen), and the layout it serves recorded.

use std::ops::RangeInclusive;
use std::time::Duration;

use clap::Args;
use idgen::Layout;
use idgen::lease::{FileStore, LeaseStore};

use crate::args::layout::LayoutArgs;
#[cfg(feature = "etcd")]
use crate::args::lease::connect_etcd;
#[cfg(not(feature = "etcd"))]
use crate::args::lease::etcd_store;
use crate::args::lease::{StoreArgs, connect_postgres, parse_duration};
use crate::failure::Failure;

#[derive(Args)]
pub struct InitArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The layout of the processes that use the store: etcd and PostgreSQL get a mark for
    /// every number.
    #[command(flatten)]
    layout: LayoutArgs,
    /// How far ahead etcd and PostgreSQL marks are written where none exists (default: 3m, or the
    /// largest horizon a holder recorded if longer; at least the TTL): a holder cut off
    /// from etcd while its namespace was wiped may go on issuing that long. For a namespace
    /// no idgen ever used, `--new` instead.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, env = "IDGEN_OUTAGE_HORIZON")]
    outage_horizon: Option<Duration>,
    /// After `etcdctl snapshot restore`, or a PostgreSQL restore or failover: raise every mark to an outage horizon from now
    /// (the largest known), so that no successor starts before a holder the restored
    /// namespace forgot has stopped, and let holders that found the restore go on.
    #[arg(long, conflicts_with = "new")]
    after_restore: bool,
    /// The etcd or PostgreSQL namespace was never used by any idgen (not wiped, not restored): its marks
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
        let kind = if self.after_restore {
            InitKind::AfterRestore
        } else if self.new {
            InitKind::New
        } else {
            InitKind::MaybeWiped
        };
        if let Some(url) = &store.lease_postgres {
            let schema = store.postgres_schema.as_deref();
            let connected = connect_postgres(url, schema, &store.namespace, store.lease_ttl)?;
            let what = format!("PostgreSQL lease namespace {}", connected.namespace());
            return init_networked(connected, &what, self.outage_horizon, &layout, kind);
        }
        if let Some(endpoints) = &store.etcd {
            #[cfg(feature = "etcd")]
            {
                let connected = connect_etcd(endpoints, &store.namespace, store.lease_ttl)?;
                let what = format!("etcd namespace {}", store.namespace);
                return init_networked(connected, &what, self.outage_horizon, &layout, kind);
            }
            #[cfg(not(feature = "etcd"))]
            return etcd_store(endpoints, "", None).map(|_| ());
        }
        if self.new {
            return Err(Failure::input(
                "--new is for etcd and PostgreSQL; a lease directory needs no such step (a number's record \
                 in it is its own mark, and a new directory has none to wait for)",
            ));
        }
        if self.after_restore {
            return Err(Failure::input(
                "--after-restore is for etcd and PostgreSQL; a lease directory restored from a backup needs \
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

/// What `init` asks of a networked store (etcd, PostgreSQL): the three kinds of first step.
trait Initialise: LeaseStore + Sized {
    fn with_horizon(self, horizon: Duration) -> Self;
    fn maybe_wiped(
        &self,
        dcs: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now: u64,
    ) -> Result<u64, idgen::Error>;
    fn new_namespace(
        &self,
        dcs: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now: u64,
    ) -> Result<u64, idgen::Error>;
    fn after_restore(
        &self,
        dcs: RangeInclusive<u64>,
        workers: RangeInclusive<u64>,
        now: u64,
    ) -> Result<u64, idgen::Error>;
}

/// Implements [`Initialise`] for a store with `with_outage_horizon`, `init`, `init_new` and
/// `init_after_restore`.
macro_rules! initialise {
    ($store:ty) => {
        impl Initialise for $store {
            fn with_horizon(self, horizon: Duration) -> Self {
                self.with_outage_horizon(horizon)
            }
            fn maybe_wiped(
                &self,
                dcs: RangeInclusive<u64>,
                workers: RangeInclusive<u64>,
                now: u64,
            ) -> Result<u64, idgen::Error> {
                self.init(dcs, workers, now)
            }
            fn new_namespace(
                &self,
                dcs: RangeInclusive<u64>,
                workers: RangeInclusive<u64>,
                now: u64,
            ) -> Result<u64, idgen::Error> {
                self.init_new(dcs, workers, now)
            }
            fn after_restore(
                &self,
                dcs: RangeInclusive<u64>,
                workers: RangeInclusive<u64>,
                now: u64,
            ) -> Result<u64, idgen::Error> {
                self.init_after_restore(dcs, workers, now)
            }
        }
    };
}

#[cfg(feature = "etcd")]
initialise!(idgen::lease::EtcdStore);
initialise!(idgen::lease::PostgresStore);

/// `init` of a networked store, `what` naming it ("etcd namespace /idgen").
fn init_networked<S: Initialise>(
    mut store: S,
    what: &str,
    horizon: Option<Duration>,
    layout: &Layout,
    kind: InitKind,
) -> Result<(), Failure> {
    if let Some(horizon) = horizon {
        if horizon < store.ttl() {
            return Err(Failure::input(format!(
                "--outage-horizon {horizon:?} is below the TTL of {:?}",
                store.ttl()
            )));
        }
        store = store.with_horizon(horizon);
    }
    // Marks are written for the numbers of `layout`: with another one's flags, some of the
    // fleet's numbers would be left out.
    refuse_other_layout(&store, layout)?;
    let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
    let (datacenters, workers) = (0..=layout.max_datacenter(), 0..=layout.max_worker());
    match kind {
        InitKind::AfterRestore => {
            let raised = store
                .after_restore(datacenters, workers, now)
                .map_err(|error| Failure::runtime(error.to_string()))?;
            println!(
                "initialised the {what} after a restore: {raised} marks raised to an outage \
                 horizon from now"
            );
        }
        InitKind::New => {
            let written = store
                .new_namespace(datacenters, workers, now)
                .map_err(|error| match error {
                    idgen::Error::LeaseConfig { .. } => Failure::input(error.to_string()),
                    _ => Failure::runtime(error.to_string()),
                })?;
            println!("initialised the new {what}: {written} marks written, ready at once");
        }
        InitKind::MaybeWiped => {
            let ahead = store.default_outage_horizon();
            let written = store
                .maybe_wiped(datacenters, workers, now)
                .map_err(|error| Failure::runtime(error.to_string()))?;
            println!(
                "initialised the {what}: {written} marks written at least {ahead:?} ahead, so \
                 holders starting before then wait for them (in case the namespace was \
                 wiped under holders still issuing); for a namespace no idgen ever used, \
                 `idgen leases init --new` is ready at once"
            );
        }
    }
    bind_layout(&store, layout)
}
