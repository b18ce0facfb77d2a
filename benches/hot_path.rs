//! `next_id()` per call, against a bare `fetch_add` and a `Mutex`-guarded generator with
//! the same rules, on a layout whose sequence never runs out (22 bits), from 1 and 2
//! threads sharing one instance.

mod common;

use common::{FetchAdd, MutexGenerator, idgen, keep, roomy_layout, time_on_threads};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn hot_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_path");
    for threads in [1usize, 2] {
        let fetch_add = FetchAdd::default();
        group.bench_with_input(BenchmarkId::new("fetch_add", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_on_threads(t, iters, |n| (0..n).for_each(|_| keep(fetch_add.next())))
            })
        });
        let generator = idgen(roomy_layout());
        group.bench_with_input(BenchmarkId::new("idgen", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_on_threads(t, iters, |n| {
                    (0..n).for_each(|_| keep(generator.next_id().unwrap()))
                })
            })
        });
        let mutex = MutexGenerator::new(roomy_layout());
        group.bench_with_input(BenchmarkId::new("mutex", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_on_threads(t, iters, |n| (0..n).for_each(|_| keep(mutex.next())))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, hot_path);
criterion_main!(benches);
