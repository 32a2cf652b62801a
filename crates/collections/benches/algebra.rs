//! W6 set algebra on two bitmap sets of ~9.5M random IDs below 100M.
//!
//! Each set is 10M uniform draws from 0..100M (fixed seeds), inserted one
//! by one as canonical decimal bytes, the way pipelined SADDs arrive. Before
//! the timed runs it prints the build time and bytes per member twice: the
//! crate's own `heap_bytes()` estimate and the process's RSS growth (Linux
//! /proc/self/statm), which is what the Redis comparison uses.
//!
//! `ABACUS_BENCH_100M=1` also builds two 100M-draw sets below 1e9 and times
//! one intersection cardinality (the "under 1 second" target). Off by default:
//! it needs ~80 s and ~300 MB.

use std::hint::black_box;
use std::time::Instant;

use abacus_collections::IdSet;
use criterion::{criterion_group, criterion_main, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn build(seed: u64, draws: usize, below: u64) -> IdSet {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut set = IdSet::new();
    let mut digits = itoa::Buffer::new();
    let (start, rss_before) = (Instant::now(), rss_bytes());
    for _ in 0..draws {
        set.insert(digits.format(rng.gen_range(0..below)).as_bytes());
    }
    let members = set.len() as f64;
    println!(
        "built {} members from {draws} draws in {:.2?}: heap_bytes {:.2} B/member, RSS growth {:.2} B/member, encoding {}",
        set.len(),
        start.elapsed(),
        set.heap_bytes() as f64 / members,
        rss_bytes().saturating_sub(rss_before) as f64 / members,
        set.encoding(),
    );
    set
}

fn algebra(c: &mut Criterion) {
    let a = build(1, 10_000_000, 100_000_000);
    let b = build(2, 10_000_000, 100_000_000);
    assert_eq!((a.encoding(), b.encoding()), ("bitmap", "bitmap"));
    println!(
        "|A & B| = {}, |A | B| = {}",
        IdSet::intersection_card(&[&a, &b], 0),
        IdSet::union(&[&a, &b]).len()
    );

    let mut group = c.benchmark_group("w6_9.5M_x_9.5M");
    group.sample_size(10);
    group.bench_function("intersection_card", |bench| {
        bench.iter(|| IdSet::intersection_card(black_box(&[&a, &b]), 0))
    });
    group.bench_function("intersection", |bench| {
        bench.iter(|| IdSet::intersection(black_box(&[&a, &b])))
    });
    group.bench_function("union", |bench| {
        bench.iter(|| IdSet::union(black_box(&[&a, &b])))
    });
    group.bench_function("difference", |bench| {
        bench.iter(|| IdSet::difference(black_box(&a), &[&b]))
    });
    group.finish();

    let mut rng = StdRng::seed_from_u64(3);
    let probes: Vec<Vec<u8>> = (0..1024)
        .map(|_| rng.gen_range(0..100_000_000u64).to_string().into_bytes())
        .collect();
    c.bench_function("contains_1024_probes", |bench| {
        bench.iter(|| probes.iter().filter(|probe| a.contains(probe)).count())
    });

    if std::env::var_os("ABACUS_BENCH_100M").is_some() {
        drop((a, b));
        let big_a = build(4, 100_000_000, 1_000_000_000);
        let big_b = build(5, 100_000_000, 1_000_000_000);
        let start = Instant::now();
        let card = IdSet::intersection_card(&[&big_a, &big_b], 0);
        println!(
            "100M x 100M intersection_card = {card} in {:.2?}",
            start.elapsed()
        );
    }
}

criterion_group!(benches, algebra);
criterion_main!(benches);
