//! `GET /metrics`: the service's counters, gauges and request-latency histogram, in the
//! OpenMetrics text Prometheus reads.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use idgen::lease::{LeaseState, LeasedGenerator};
use idgen::{Clock, SystemClock};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::Defect;
use crate::http::plumbing::{ApiError, Labels};
use crate::http::state::Service;
use crate::kinds::KINDS;

/// The route of this module, and what the document says of it.
pub fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new().routes(routes!(metrics))
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
            .traffic
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
        "idgen_layout_seconds_left",
        "Seconds until the layout's last millisecond, after which no Snowflake ID can be \
         made (0: past it)",
        Labels::new(),
        crate::lifetime::left_ms(&service.layout, SystemClock.now_unix_ms()) / 1_000,
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
    }
    // Every number IDs are issued on now, the service's own and the lease API's, in its
    // ID space: a number whose lease expired or was lost issues nothing, and its next
    // holder reporting it is no duplicate.
    let now_unix_ms = SystemClock.now_unix_ms();
    let held = lease
        .filter(|lease| matches!(lease.state, LeaseState::Valid | LeaseState::Outage))
        .map(|lease| ("service", (lease.datacenter, lease.worker)))
        .into_iter()
        .chain(
            service
                .lease_api
                .iter()
                .flat_map(|api| api.issuing_numbers(now_unix_ms))
                .map(|number| ("lease_api", number)),
        );
    let info = Family::<Labels, Gauge>::default();
    let space = &service.holder_labels;
    for (holder, (datacenter, worker)) in held {
        let labels: Labels = [
            ("space", space.space.as_str()),
            ("layout", space.layout.as_str()),
            ("store", space.store.as_str()),
            ("holder", holder),
            ("datacenter", &datacenter.to_string()),
            ("worker", &worker.to_string()),
        ]
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        info.get_or_create(&labels).set(1);
    }
    registry.register(
        "idgen_worker_info",
        "1 for every worker number IDs are issued on now, the service's own (holder=service, \
         while its lease is valid or in an outage before the mark) and each one leased \
         through the lease API (holder=lease_api, between the previous mark and its own), \
         labelled with its ID space (space: --id-space; layout: widths and epoch) and store: \
         two holders of one (space, datacenter, worker) issue the same IDs, an alert",
        info,
    );
    registry.register(
        "idgen_http_request_duration_seconds",
        "Time from a request's arrival to its response, by endpoint (the route's pattern, or \
         unmatched) and method (GET, POST, DELETE, HEAD or other)",
        service.traffic.latency.clone(),
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
