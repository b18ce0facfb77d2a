//! Opaque public IDs, ns per ID: `Codec::encode` and `Codec::decode` one ID at a time
//! (parameter 1), and `encode_all` / `decode_all` over a batch (parameter 1000), on
//! consecutive Snowflake IDs. The yardstick in the same group: writing an ID as decimal
//! text, which every response does anyway.

use std::fmt::Write;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idgen::Id;
use idgen::opaque::{Codec, OpaqueKey};

const BATCH: usize = 1_000;

/// Consecutive IDs of one worker, as a batch would be.
fn ids(count: usize) -> Vec<Id> {
    let first = 385_628_494_224_322_560u64;
    (first..first + count as u64)
        .map(|v| Id::try_from(v).unwrap())
        .collect()
}

fn opaque(c: &mut Criterion) {
    let key = OpaqueKey::from_hex(1, "7f3a9c1e5b2d4f6081a3c5e7092b4d6f").unwrap();
    let codec = Codec::new(&[key]).unwrap();
    let batch = ids(BATCH);
    let opaque = codec.encode_all(&batch);
    let mut group = c.benchmark_group("opaque");

    // One at a time, cycling through the batch: walks of every length, in their mix.
    let mut i = 0;
    group.bench_function(BenchmarkId::new("encode", 1), |b| {
        b.iter(|| {
            i = (i + 1) % BATCH;
            black_box(codec.encode(black_box(batch[i])))
        })
    });
    group.bench_function(BenchmarkId::new("decode", 1), |b| {
        b.iter(|| {
            i = (i + 1) % BATCH;
            black_box(codec.decode(black_box(opaque[i])).unwrap())
        })
    });
    let mut text = String::with_capacity(32);
    group.bench_function(BenchmarkId::new("decimal_text", 1), |b| {
        b.iter(|| {
            i = (i + 1) % BATCH;
            text.clear();
            write!(text, "{}", black_box(batch[i])).unwrap();
            black_box(text.len())
        })
    });
    group.bench_function(BenchmarkId::new("encode", BATCH), |b| {
        b.iter(|| black_box(codec.encode_all(black_box(&batch))))
    });
    group.bench_function(BenchmarkId::new("decode", BATCH), |b| {
        b.iter(|| black_box(codec.decode_all(black_box(&opaque)).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, opaque);
criterion_main!(benches);
