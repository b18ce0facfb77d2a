//! What the handlers of `/v1/ids`, `/v1/layout`, `/healthz`, `/metrics` and `/openapi.json`
//! share: the service's generators, its layout and limits, and its counters.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use idgen::Layout;
use idgen::opaque::Codec;

use crate::http::lease_api::LeaseApi;
use crate::http::plumbing::Traffic;
use crate::http::sequences::Sequences;
use crate::http::status::fleet_cache::FleetCache;
use crate::kinds::CountedGenerators;
use crate::own_lease::OwnLease;

/// The service's state, shared by its handlers.
pub struct Service {
    /// The service's own worker number, for Snowflake IDs: taken, or being taken.
    pub own: Arc<OwnLease>,
    /// The OpenAPI document served, naming the declared sequences.
    pub document: String,
    /// UUIDv7s and ULIDs: no worker number, no lease.
    pub counted: CountedGenerators,
    pub lease_api: Option<Arc<LeaseApi>>,
    pub sequences: Arc<Sequences>,
    /// With `--opaque-key-file`: `form=opaque`, and opaque IDs at the decode endpoint.
    pub opaque: Option<Codec>,
    pub layout: Layout,
    pub max_batch: usize,
    /// Batches up to this size are made inline (see `ids::INLINE_BATCH`).
    pub inline_batch: usize,
    pub ids_issued: AtomicU64,
    /// IDs issued by kind, in the order of `kinds::KINDS`.
    pub issued_by_kind: [AtomicU64; 3],
    /// Responses and request latency, filled by the counting middleware.
    pub traffic: Arc<Traffic>,
    /// What `idgen_worker_info` says of every number held besides the number itself.
    pub holder_labels: HolderLabels,
    /// The status page's fleet survey, and who sees holder names.
    pub status: StatusView,
}

/// The ID space a number is held in, and where from: the labels that let one Prometheus
/// alert on two holders of one number without matching two ID spaces.
pub struct HolderLabels {
    /// `--id-space`.
    pub space: String,
    /// The layout's widths and epoch (`serve::layout_fingerprint`).
    pub layout: String,
    /// The lease store (`StoreArgs::label`).
    pub store: String,
}

/// What the status page needs beside the rest of the state.
pub struct StatusView {
    /// The fleet view: one survey of the store, shared by every request.
    pub fleet: Arc<FleetCache>,
    /// `--status-shows-holders`: holder names to every viewer.
    pub shows_holders: bool,
}
