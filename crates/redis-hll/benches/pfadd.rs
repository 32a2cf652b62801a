//! PFADD cost per element on a sparse value (kept below the promotion
//! threshold) and on a dense value.

use abacus_redis_hll::{RedisHll, DEFAULT_SPARSE_MAX_BYTES};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};

fn elements(n: usize, tag: &str) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}:{i}").into_bytes()).collect()
}

fn bench_add(c: &mut Criterion) {
    // Sparse: ~1000 distinct elements fit under the default 3000 bytes.
    let sparse_els = elements(1000, "sparse");
    c.bench_function("add_sparse_1000_new_elements", |b| {
        b.iter_batched(
            RedisHll::new,
            |mut h| {
                for e in &sparse_els {
                    black_box(h.add(e, DEFAULT_SPARSE_MAX_BYTES).unwrap());
                }
                assert!(!h.is_dense());
                h
            },
            BatchSize::SmallInput,
        )
    });

    let mut dense = RedisHll::new();
    for e in elements(20_000, "fill") {
        dense.add(&e, DEFAULT_SPARSE_MAX_BYTES).unwrap();
    }
    assert!(dense.is_dense());
    let dense_els = elements(1000, "dense");
    c.bench_function("add_dense_1000_elements", |b| {
        b.iter_batched(
            || dense.clone(),
            |mut h| {
                for e in &dense_els {
                    black_box(h.add(e, DEFAULT_SPARSE_MAX_BYTES).unwrap());
                }
                h
            },
            BatchSize::SmallInput,
        )
    });

    let mut full = dense.clone();
    c.bench_function("count_dense_uncached", |b| {
        b.iter(|| {
            full.invalidate_cache();
            black_box(full.count().unwrap())
        })
    });
}

criterion_group!(benches, bench_add);
criterion_main!(benches);
