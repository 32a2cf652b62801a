//! The table's load factor (entries / slots) and bytes per entry as it grows, sampled at
//! evenly spaced sizes: how far the growth sawtooth swings.
//!
//!     cargo run --release -p abacus-table --example load_curve [max_entries] [samples]
//!
//! Defaults: 100 million `u64 -> u64` entries, 200 samples, the default density. Prints
//! min / mean / max of the load over the samples taken above 1 million entries, and each
//! sample with `-v`; `--dense` grows the table as the keyspace's (`Density::Dense`).

use abacus_table::{Config, Density, U64Table};

fn main() {
    let flag = |f: &str| std::env::args().any(|a| a == f);
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let verbose = flag("-v");
    let density = if flag("--dense") {
        Density::Dense
    } else {
        Density::Balanced
    };
    let max: u64 = args
        .first()
        .map_or(100_000_000, |s| s.parse().expect("max_entries"));
    let samples: u64 = args.get(1).map_or(200, |s| s.parse().expect("samples"));
    let mut t: U64Table<u64> = U64Table::with_config(Config {
        density,
        ..Config::default()
    });
    let (mut x, step) = (0x9E37_79B9_7F4A_7C15u64, max / samples);
    let (mut lo, mut hi, mut sum, mut n) = (f64::MAX, 0f64, 0f64, 0u32);
    for i in 1..=max {
        // splitmix64: uniformly random keys.
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        t.insert(z ^ (z >> 31), i);
        if i % step == 0 {
            let load = t.len() as f64 / t.capacity() as f64;
            let bytes = t.memory_bytes() as f64 / t.len() as f64;
            if verbose {
                println!("{i:>12} entries  load {load:.3}  {bytes:.1} B/entry");
            }
            if i >= 1_000_000 {
                lo = lo.min(load);
                hi = hi.max(load);
                sum += load;
                n += 1;
            }
        }
    }
    println!(
        "{density:?}: load over {n} samples from 1M to {max} entries: min {lo:.3}, mean {:.3}, max {hi:.3}",
        sum / n as f64
    );
}
