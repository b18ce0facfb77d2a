//! Batches: `next_ids(n)` and `fill_ids` cost per ID, beside one `next_id()` call, on a
//! layout whose sequence never runs out (22 bits).

mod common;

use common::{clock, idgen_on, keep, roomy_layout};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use idgen::Id;

fn batches(c: &mut Criterion) {
    let mut group = c.benchmark_group("batches");
    let generator = idgen_on(roomy_layout(), clock());
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("next_id", 1), |b| {
        b.iter(|| keep(generator.next_id().unwrap()))
    });
    for n in [16usize, 256, 4096] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("next_ids", n), &n, |b, &n| {
            b.iter(|| keep(generator.next_ids(n).unwrap()))
        });
        let mut buffer = vec![Id::MIN; n];
        group.bench_with_input(BenchmarkId::new("fill_ids", n), &n, |b, _| {
            b.iter(|| {
                generator.fill_ids(&mut buffer).unwrap();
                keep(buffer[0]);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, batches);
criterion_main!(benches);
