//! `below_ceiling/<entrant>/<threads>` as on the peer page (`benches/peers.rs`), for uuid's
//! `now_v7` with its `fast-rng` feature and idgen's `Uuid7Generator` beside it in the same
//! run: bursts of 1,500 UUIDs after a millisecond tick, threads released together, the
//! median burst's wall time per UUID.

#[path = "../../common/bursts.rs"]
mod bursts;

use std::hint::black_box;
use std::time::Duration;

use bursts::{BURST_IDS, wall_per};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idgen::{Clock, Uuid7Generator};

fn below_ceiling(c: &mut Criterion) {
    black_box(bursts::clock().now_unix_ms());
    let generator = Uuid7Generator::builder()
        .clock(bursts::clock())
        .build()
        .unwrap();
    let mut group = c.benchmark_group("below_ceiling");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(50))
        .measurement_time(Duration::from_millis(150));
    for threads in [1usize, 2] {
        let per_burst = BURST_IDS / threads as u64;
        group.bench_with_input(
            BenchmarkId::new("idgen_uuid7_beside_fast_rng", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    wall_per(iters, t, per_burst, 1, &|| {
                        black_box(generator.next_uuid().unwrap());
                    })
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("uuid_v7_fast_rng", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    wall_per(iters, t, per_burst, 1, &|| {
                        black_box(uuid::Uuid::now_v7());
                    })
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, below_ceiling);
criterion_main!(benches);
