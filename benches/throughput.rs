//! Sustained IDs per second on the default layout (4,096 per millisecond), from 1 and 2
//! threads sharing one generator. Every call that finds its millisecond used up waits, so
//! time per ID here measures how close the generator runs to the 4,096,000/s ceiling
//! (244.14 ns per ID).

mod common;

use common::{idgen_on, keep, recent_clock, time_on_threads};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use idgen::Layout;

fn throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("throughput_default_layout");
    group.throughput(Throughput::Elements(1));
    let default = idgen_on(Layout::DEFAULT, common::clock());
    let recent = idgen_on(Layout::DEFAULT, recent_clock());
    for threads in [1u64, 2] {
        group.bench_with_input(BenchmarkId::new("idgen", threads), &threads, |b, &t| {
            // Each thread issues its share of `iters` IDs: time / iters is time per ID.
            b.iter_custom(|iters| {
                time_on_threads(t as usize, iters.div_ceil(t), |n| {
                    (0..n).for_each(|_| keep(default.next_id().unwrap()))
                })
            })
        });
        group.bench_with_input(
            BenchmarkId::new("idgen_recent", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    time_on_threads(t as usize, iters.div_ceil(t), |n| {
                        (0..n).for_each(|_| keep(recent.next_id().unwrap()))
                    })
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
