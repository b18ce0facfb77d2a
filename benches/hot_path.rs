//! `next_id()` per call, against a bare `fetch_add` and a `Mutex`-guarded generator with
//! the same rules, on a layout whose sequence never runs out (22 bits), from 1 and 2
//! threads sharing one instance. Each generator runs on the default `DefaultClock` (a
//! cached reading from one process-wide upkeep thread) and on `RecentClock` (a cached
//! reading with a thread of its own); both cost one atomic load.

mod common;

use common::{
    CasLoop, FetchAdd, MutexGenerator, clock, idgen_on, keep, recent_clock, roomy_layout,
    time_on_threads,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idgen::Clock;

fn bench_clock<C: Clock>(c: &mut Criterion, suffix: &str, make_clock: impl Fn() -> C) {
    let mut group = c.benchmark_group("hot_path");
    for threads in [1usize, 2] {
        let generator = idgen_on(roomy_layout(), make_clock());
        group.bench_with_input(
            BenchmarkId::new(format!("idgen{suffix}"), threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    time_on_threads(t, iters, |n| {
                        (0..n).for_each(|_| keep(generator.next_id().unwrap()))
                    })
                })
            },
        );
        let mutex = MutexGenerator::new(roomy_layout(), make_clock());
        group.bench_with_input(
            BenchmarkId::new(format!("mutex{suffix}"), threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    time_on_threads(t, iters, |n| (0..n).for_each(|_| keep(mutex.next())))
                })
            },
        );
    }
    group.finish();
}

fn hot_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_path");
    for threads in [1usize, 2] {
        let fetch_add = FetchAdd::default();
        group.bench_with_input(BenchmarkId::new("fetch_add", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_on_threads(t, iters, |n| (0..n).for_each(|_| keep(fetch_add.next())))
            })
        });
        let cas_loop = CasLoop::default();
        group.bench_with_input(BenchmarkId::new("cas_loop", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_on_threads(t, iters, |n| (0..n).for_each(|_| keep(cas_loop.next())))
            })
        });
    }
    group.finish();
    bench_clock(c, "", clock);
    bench_clock(c, "_recent", recent_clock);
}

criterion_group!(benches, hot_path);
criterion_main!(benches);
