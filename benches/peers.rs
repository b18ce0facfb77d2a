//! idgen beside its peers, in one run. Every entrant is one shared instance at its default
//! configuration (see `common/peers.rs` and `common/entrants.rs`).
//!
//! - `below_ceiling/<entrant>/<threads>`: wait for a millisecond tick, then time a burst of
//!   1,500 IDs (split over the threads): below the 4,096-per-ms sequence space of every
//!   Snowflake layout here, so nothing waits for the clock. The threads are released
//!   together; the median burst's wall time from release to the last ID, over all the
//!   threads' IDs. Baselines: a bare `fetch_add`, and `cas_loop` (a load and a
//!   compare-and-swap, the floor of any CAS generator).
//! - `contention/<entrant>/<threads>`: 1 to 8 threads (more than this machine's cores)
//!   calling without pause: idgen shared, idgen sharded, and the Mutex baseline, on a layout
//!   with 16 workers and 18 sequence bits so that the ceiling stays out of the way.
//! - `batches_fresh/<entrant>/<n>` and `batches_reused/<entrant>/<n>`: after a tick, one
//!   batch of `n` into a new `Vec` (`next_ids`) or into a buffer kept between calls
//!   (`fill_ids`, `next_ids_into`); time per ID. Peers without a batch API are left out.
//!
//! The 128-bit kinds (`idgen_uuid7`, `idgen_ulid`) run the below-ceiling scenario beside
//! uuid's `now_v7` (at its defaults: `getrandom` per call), a `ContextV7` behind a Mutex,
//! ulid's `Generator` behind a Mutex and scru128. uuid's `fast-rng` feature would change
//! `now_v7` for every crate in this build, so that comparison runs in its own package,
//! `benches/uuid_fast_rng`, beside idgen again.
//!
//! Sustained rates and duplicate counts are measured by `benches/sustained.rs`.

mod common;

use std::time::Duration;

use common::bursts::{BURST_IDS, wall_per};
use common::entrants::{
    BareCasLoop, BareFetchAdd, Idgen, IdgenRecent, IdgenSharded, IdgenUlid, IdgenUuid7,
    MutexBaseline,
};
use common::peers::{
    Batch, Ferroid, IdGenerator, Peer, RsSnowflake, Scru128, SnowflakeMe, Snowflaked, Sonyflake,
    Ulid, UuidContextV7, UuidV7,
};
use common::{MutexGenerator, keep, recent_clock, time_on_threads};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use idgen::{Clock, Generator, Layout, ShardedGenerator};

fn below_ceiling_for<P: Peer>(c: &mut Criterion) {
    let peer = P::new();
    let mut group = c.benchmark_group("below_ceiling");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(50))
        .measurement_time(Duration::from_millis(150));
    for threads in [1usize, 2] {
        group.bench_with_input(BenchmarkId::new(P::NAME, threads), &threads, |b, &t| {
            // An iteration is one ID, of all the threads': wall time over IDs.
            b.iter_custom(|iters| {
                wall_per(iters, t, BURST_IDS / t as u64, 1, &|| keep(peer.next()))
            })
        });
    }
    group.finish();
}

fn batches_for<P: Peer>(c: &mut Criterion) {
    let peer = P::new();
    if peer.next_batch(1, Batch::Fresh).is_none() {
        return;
    }
    for batch in Batch::ALL {
        let mut group = c.benchmark_group(format!("batches_{}", batch.name()));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(50))
            .measurement_time(Duration::from_millis(600));
        for n in [1usize, 16, 256, 4096] {
            group.throughput(Throughput::Elements(n as u64));
            // Several small batches per tick; a batch larger than a burst gets as many ticks
            // as it needs to stay below the ceiling on average (a batch of 4,096 every 3 ms).
            let per_burst = (BURST_IDS / n as u64).max(1);
            let ticks = (n as u64).div_ceil(BURST_IDS);
            group.bench_with_input(BenchmarkId::new(P::NAME, n), &n, |b, &n| {
                b.iter_custom(|iters| {
                    wall_per(iters, 1, per_burst, ticks, &|| {
                        assert_eq!(peer.next_batch(n, batch), Some(n));
                    })
                })
            });
        }
        group.finish();
    }
}

fn contention(c: &mut Criterion) {
    // 16 workers, 18 sequence bits: 262,144 IDs per ms per worker.
    let layout = Layout::new(41, 0, 4, 18).unwrap();
    let mut group = c.benchmark_group("contention");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let shared = Generator::builder()
        .layout(layout)
        .clock(recent_clock())
        .build()
        .unwrap();
    let sharded = ShardedGenerator::builder()
        .layout(layout)
        .clock(recent_clock())
        .build()
        .unwrap();
    let mutex = MutexGenerator::new(layout, recent_clock());
    for threads in [1usize, 2, 4, 8] {
        group.bench_with_input(
            BenchmarkId::new("idgen_shared", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    time_on_threads(t, iters, |n| {
                        (0..n).for_each(|_| keep(shared.next_id().unwrap()))
                    })
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("idgen_sharded", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    time_on_threads(t, iters, |n| {
                        (0..n).for_each(|_| keep(sharded.next_id().unwrap()))
                    })
                })
            },
        );
        group.bench_with_input(BenchmarkId::new("mutex", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_on_threads(t, iters, |n| (0..n).for_each(|_| keep(mutex.next())))
            })
        });
    }
    group.finish();
}

fn all(c: &mut Criterion) {
    // Calibrate the shared clocks before anything is timed.
    keep(common::clock().now_unix_ms());
    keep(recent_clock().recent_unix_ms());
    below_ceiling_for::<BareFetchAdd>(c);
    below_ceiling_for::<BareCasLoop>(c);
    below_ceiling_for::<MutexBaseline>(c);
    below_ceiling_for::<Idgen>(c);
    below_ceiling_for::<IdgenRecent>(c);
    below_ceiling_for::<IdgenSharded>(c);
    below_ceiling_for::<Ferroid>(c);
    below_ceiling_for::<SnowflakeMe>(c);
    below_ceiling_for::<Snowflaked>(c);
    below_ceiling_for::<RsSnowflake>(c);
    below_ceiling_for::<Sonyflake>(c);
    below_ceiling_for::<IdGenerator>(c);
    below_ceiling_for::<IdgenUuid7>(c);
    below_ceiling_for::<UuidV7>(c);
    below_ceiling_for::<UuidContextV7>(c);
    below_ceiling_for::<IdgenUlid>(c);
    below_ceiling_for::<Ulid>(c);
    below_ceiling_for::<Scru128>(c);
    contention(c);
    batches_for::<Idgen>(c);
    batches_for::<IdgenRecent>(c);
    batches_for::<Ferroid>(c);
    batches_for::<SnowflakeMe>(c);
    batches_for::<Snowflaked>(c);
    batches_for::<RsSnowflake>(c);
    batches_for::<Sonyflake>(c);
    batches_for::<IdGenerator>(c);
    batches_for::<UuidV7>(c);
    batches_for::<Ulid>(c);
}

criterion_group!(benches, all);
criterion_main!(benches);
