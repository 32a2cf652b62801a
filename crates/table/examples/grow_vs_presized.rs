//! Where W2's insert time goes: the same random `u64 -> u64` inserts into a table that grows
//! from empty, and into one created with `with_capacity` (no growth), for `U64Table` and
//! hashbrown, then lookups. The difference between the two insert rates is the cost of
//! growth; the presized rate is the probe path alone.
//!
//! Run: `cargo run --release -p abacus-table --example grow_vs_presized` (N = 20 million;
//! `N=100000000` for W2's size, about 5 GB). `ONLY=abacus` or `ONLY=hashbrown` runs one side.

use std::time::Instant;

use abacus_table::U64Table;
use tikv_jemallocator::Jemalloc;

#[global_allocator]
static ALLOC: Jemalloc = Jemalloc;

type Hashbrown = hashbrown::HashMap<u64, u64, foldhash::fast::RandomState>;

/// splitmix64, as the W2 benchmark.
fn keys(n: u64) -> impl Iterator<Item = u64> {
    let mut s = 0x5eedu64;
    (0..n).map(move |_| {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// Millions of operations per second of `f` over `n` keys.
fn rate(n: u64, f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    n as f64 / start.elapsed().as_secs_f64() / 1e6
}

fn main() {
    let n: u64 = std::env::var("N")
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(20_000_000);
    let only = std::env::var("ONLY").unwrap_or_default();
    println!("{n} random u64 -> u64 inserts; M operations/s");
    println!(
        "{:<10} {:>8} {:>10} {:>8}",
        "table", "growing", "presized", "lookups"
    );
    if only.is_empty() || only == "abacus" {
        let mut t = U64Table::<u64>::new();
        let grow = rate(n, || keys(n).for_each(|k| _ = t.insert(k, k)));
        drop(t);
        let mut t = U64Table::<u64>::with_capacity(n as usize);
        let presized = rate(n, || keys(n).for_each(|k| _ = t.insert(k, k)));
        let mut found = 0;
        let get = rate(n, || {
            keys(n).for_each(|k| found += t.get(k).is_some() as u64)
        });
        assert_eq!(found, n);
        println!("{:<10} {grow:>8.2} {presized:>10.2} {get:>8.2}", "abacus");
    }
    if only.is_empty() || only == "hashbrown" {
        let mut t = Hashbrown::default();
        let grow = rate(n, || keys(n).for_each(|k| _ = t.insert(k, k)));
        drop(t);
        let mut t = Hashbrown::with_capacity_and_hasher(n as usize, Default::default());
        let presized = rate(n, || keys(n).for_each(|k| _ = t.insert(k, k)));
        let mut found = 0;
        let get = rate(n, || {
            keys(n).for_each(|k| found += t.get(&k).is_some() as u64)
        });
        assert_eq!(found, n);
        println!(
            "{:<10} {grow:>8.2} {presized:>10.2} {get:>8.2}",
            "hashbrown"
        );
    }
}
