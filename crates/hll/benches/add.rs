//! Throughput of the hot paths: `add_raw` on a FULL sketch, and the union of
//! two FULL sketches (register-wise max), for the default parameters.
//! Run with `cargo bench -p abacus-hll`; reported as elements per second.

use abacus_hll::{hash_bigint, Hll, Params};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

fn full_sketch(offset: i64) -> Hll {
    let mut hll = Hll::new(Params::default());
    for i in 0..100_000 {
        hll.add_raw(hash_bigint(i + offset, 0));
    }
    hll
}

fn bench_add(c: &mut Criterion) {
    // Pre-hashed values, so only the add is measured.
    let hashes: Vec<i64> = (0..4096).map(|i| hash_bigint(1_000_000 + i, 0)).collect();
    let mut group = c.benchmark_group("add_raw");
    group.throughput(Throughput::Elements(hashes.len() as u64));
    group.bench_function("full_11_5", |b| {
        let mut hll = full_sketch(0);
        b.iter(|| {
            for &h in &hashes {
                hll.add_raw(black_box(h));
            }
        })
    });
    group.finish();
}

fn bench_union(c: &mut Criterion) {
    let (a, other) = (full_sketch(0), full_sketch(50_000));
    let mut group = c.benchmark_group("union");
    group.throughput(Throughput::Elements(
        Params::default().num_registers() as u64
    ));
    group.bench_function("full_11_5", |b| {
        b.iter(|| {
            let mut x = a.clone();
            x.union(black_box(&other)).unwrap();
            x
        })
    });
    group.finish();
}

criterion_group!(benches, bench_add, bench_union);
criterion_main!(benches);
