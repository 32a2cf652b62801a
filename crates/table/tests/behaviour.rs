//! Targeted tests: value drops, memory accounting, growth bounds, SCAN across heavy growth,
//! tombstone churn and the uniformity of random sampling.

use std::collections::HashSet;
use std::rc::Rc;

use abacus_table::{Config, Density, Table, U64Table};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Tiny segments (many splits); odd seeds grow by the dense parameters, so every test
/// that draws seeds covers both. No spare segments (see `spare_segments_*`).
fn small(seed: u64) -> Config {
    Config {
        segment_slots: 16,
        seed: Some(seed),
        density: if seed % 2 == 1 {
            Density::Dense
        } else {
            Density::Balanced
        },
        spares_from_bytes: usize::MAX,
    }
}

/// Spare segments in a small table, sized for Miri (the storage's `unsafe` code): keys
/// boxed and inline, values that count their drops, growth that takes spares and drops
/// unused ones, removals, and the table dropped with spares still held.
#[test]
fn spare_segments_keep_every_entry_and_free_everything() {
    let marker = Rc::new(());
    {
        let mut t: Table<Rc<()>> = Table::with_config(Config { spares_from_bytes: 0, ..small(8) });
        for i in 0..400u32 {
            let key = format!("{}:{i}", if i % 2 == 0 { "k" } else { "a-key-long-enough-to-be-boxed" });
            t.insert(key.as_bytes(), marker.clone());
            if i % 7 == 0 {
                t.remove(format!("k:{}", i / 2).as_bytes());
            }
        }
        t.check_invariants().unwrap();
        assert!(t.spare_stats().0 > 0, "no growth step took a spare");
        assert_eq!(Rc::strong_count(&marker), 1 + t.len());
    }
    assert_eq!(Rc::strong_count(&marker), 1);
}

/// Spare segments (`spare.rs`): growth steps mostly take them, nothing is lost, their
/// bytes are counted, and a table below the threshold keeps none. Two tables with the same
/// seed and inserts have the same segments, so they differ in memory by the spares alone.
#[test]
#[cfg_attr(miri, ignore)]
fn spare_segments_feed_growth_and_are_counted() {
    for seed in [4, 5] {
        let mut with: U64Table<u64> = U64Table::with_config(Config {
            spares_from_bytes: 0,
            segment_slots: 4096,
            ..small(seed)
        });
        let mut without: U64Table<u64> = U64Table::with_config(Config {
            segment_slots: 4096,
            ..small(seed)
        });
        let mut rng = StdRng::seed_from_u64(seed);
        let keys: Vec<u64> = (0..1_500_000).map(|_| rng.gen()).collect();
        for (i, &k) in keys.iter().enumerate() {
            with.insert(k, i as u64);
            without.insert(k, i as u64);
        }
        with.check_invariants().unwrap();
        let (hits, misses) = with.spare_stats();
        assert!(
            hits > 4 * misses,
            "seed {seed}: {hits} segments from spares, {misses} without"
        );
        assert_eq!(without.spare_stats(), (0, 0));
        assert!(keys
            .iter()
            .enumerate()
            .all(|(i, k)| with.get(*k) == Some(&(i as u64))));
        // At most eight spares of the largest class (at most 1.59 x 4096 slots of 17 bytes,
        // and a control byte each), and at least one.
        let extra = with.memory_bytes() - without.memory_bytes();
        assert!(
            extra > 0 && extra <= 8 * 6600 * 18,
            "seed {seed}: spares of {extra} bytes"
        );
        with.clear();
        assert_eq!(with.memory_bytes(), 0);
    }
}

#[test]
fn every_value_is_dropped_exactly_once() {
    let marker = Rc::new(());
    {
        let mut t: Table<Option<Rc<()>>> = Table::with_config(small(1));
        for i in 0..2000u32 {
            t.insert(format!("key:{i}").as_bytes(), Some(marker.clone()));
        }
        for i in 0..2000u32 {
            // Overwrites return the old value; removes return theirs.
            assert!(t
                .insert(format!("key:{i}").as_bytes(), Some(marker.clone()))
                .is_some());
            if i % 3 == 0 {
                assert!(t.remove(format!("key:{i}").as_bytes()).is_some());
            }
        }
        t.retain(|k, _| k.len() % 2 == 0);
        let old = t.take();
        assert_eq!(Rc::strong_count(&marker), 1 + old.len());
        drop(old);
        assert_eq!(Rc::strong_count(&marker), 1);
        for i in 0..500u32 {
            t.insert(format!("again:{i}").as_bytes(), Some(marker.clone()));
        }
        t.clear();
        assert_eq!(Rc::strong_count(&marker), 1);
        t.insert(b"last", Some(marker.clone()));
    }
    assert_eq!(Rc::strong_count(&marker), 1);
}

#[test]
fn memory_counts_out_of_line_keys_exactly() {
    let mut t: Table<u64> = Table::with_capacity(1000);
    let base = t.memory_bytes();
    t.insert(&[7u8; 15], 1); // inline: no heap bytes
    t.insert(b"key:000000012345", 1); // 16 bytes ending in a character: inline too
    assert_eq!(t.memory_bytes(), base);
    t.insert(&[7u8; 16], 1); // 16 bytes whose last byte is a length tag: boxed
    assert_eq!(t.memory_bytes(), base + 16);
    t.insert(&[7u8; 23], 1);
    assert_eq!(t.memory_bytes(), base + 39);
    t.insert(&[9u8; 1000], 1);
    assert_eq!(t.memory_bytes(), base + 1039);
    t.insert(&[9u8; 1000], 2); // overwrite keeps the stored key
    assert_eq!(t.memory_bytes(), base + 1039);
    t.remove(&[7u8; 23]);
    assert_eq!(t.memory_bytes(), base + 1016);
    t.retain(|_, _| false);
    assert_eq!(t.memory_bytes(), base);
    t.clear();
    assert_eq!(t.memory_bytes(), 0);
}

/// Bytes per `u64 -> u64` entry at `density`, sampled from 50K to 300K entries: at most
/// `max` (17-byte slots at the load after a growth step, plus directory and headers).
fn u64_entries_cost_at_most(density: Density, max: f64) {
    let mut t: U64Table<u64> = U64Table::with_config(Config {
        density,
        ..Config::default()
    });
    let mut rng = StdRng::seed_from_u64(3);
    for n in 1..=300_000u64 {
        t.insert(rng.gen(), n);
        if n >= 50_000 && n % 10_000 == 0 {
            let per_entry = t.memory_bytes() as f64 / t.len() as f64;
            assert!(
                per_entry < max,
                "{density:?}: {per_entry} bytes per entry at {n}"
            );
        }
    }
    t.check_invariants().unwrap();
}

#[test]
// Millions of operations: too slow under Miri, and no code path the others miss.
#[cfg_attr(miri, ignore)]
fn u64_entries_cost_at_most_24_bytes_after_growth() {
    // 17 / 0.71 = 23.9.
    u64_entries_cost_at_most(Density::Balanced, 24.5);
}

#[test]
// Millions of operations: too slow under Miri, and no code path the others miss.
#[cfg_attr(miri, ignore)]
fn dense_u64_entries_cost_at_most_21_bytes_after_growth() {
    // 17 / 0.835 = 20.4 at worst; the staggered ladders keep it near 17 / 0.88 = 19.3
    // (19.5 here at most; the balanced growth reaches 21.6).
    u64_entries_cost_at_most(Density::Dense, 20.5);
}

/// The load of a table of 512-slot segments at `density`, sampled from 100K to 1M
/// entries: (lowest, highest).
fn load_range(density: Density) -> (f64, f64) {
    let mut t: U64Table<u64> = U64Table::with_config(Config {
        segment_slots: 512,
        seed: Some(5),
        density,
        spares_from_bytes: usize::MAX,
    });
    let mut rng = StdRng::seed_from_u64(5);
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for n in 1..=1_000_000u64 {
        t.insert(rng.gen(), n);
        if n >= 100_000 && n % 5_000 == 0 {
            let load = t.len() as f64 / t.capacity() as f64;
            (lo, hi) = (lo.min(load), hi.max(load));
        }
    }
    t.check_invariants().unwrap();
    (lo, hi)
}

/// The staggered ladders (growth.rs): segments of the eight phases step up at different
/// sizes, so the load stays near its 80% average as the table grows instead of swinging
/// with the table (0.787-0.803 here; 0.758-0.835 with a single ladder, which fails).
#[test]
// Millions of operations: too slow under Miri, and no code path the others miss.
#[cfg_attr(miri, ignore)]
fn load_stays_near_its_average_as_the_table_grows() {
    let (lo, hi) = load_range(Density::Balanced);
    assert!(lo > 0.775 && hi < 0.815, "load between {lo:.3} and {hi:.3}");
}

/// The same for the dense growth: four phases, steps of x1.12 up to 94%, 88% on average
/// (0.878-0.891 here).
#[test]
// Millions of operations: too slow under Miri, and no code path the others miss.
#[cfg_attr(miri, ignore)]
fn dense_load_stays_near_its_average_as_the_table_grows() {
    let (lo, hi) = load_range(Density::Dense);
    assert!(lo > 0.87 && hi < 0.90, "load between {lo:.3} and {hi:.3}");
}

#[test]
// Millions of operations: too slow under Miri, and no code path the others miss.
#[cfg_attr(miri, ignore)]
fn with_capacity_does_not_grow() {
    for n in [1usize, 100, 5_000, 200_000] {
        let mut t: U64Table<u32> = U64Table::with_capacity(n);
        let (capacity, memory) = (t.capacity(), t.memory_bytes());
        for k in 0..n as u64 {
            t.insert(k.wrapping_mul(0x9e37_79b9_7f4a_7c15), 0);
        }
        assert_eq!(
            (t.capacity(), t.memory_bytes()),
            (capacity, memory),
            "n = {n}"
        );
        t.check_invariants().unwrap();
    }
}

#[test]
// Hundreds of thousands of inserts: too slow under Miri; the model test interleaves SCAN
// with growth on a smaller scale.
#[cfg_attr(miri, ignore)]
fn scan_returns_everything_present_throughout_heavy_growth() {
    let mut t: Table<u32> = Table::with_config(Config {
        segment_slots: 32,
        seed: Some(5),
        ..Config::default()
    });
    for i in 0..5000u32 {
        t.insert(format!("old:{i}").as_bytes(), i);
    }
    let mut seen = HashSet::new();
    let (mut cursor, mut next_new, mut calls) = (0, 0u32, 0);
    loop {
        cursor = t.scan(cursor, 10, |k, _| {
            seen.insert(k.to_vec());
        });
        calls += 1;
        // Between calls the table grows by half a segment and loses one old key.
        for _ in 0..20 {
            t.insert(
                format!("new:{next_new}:{}", "x".repeat(next_new as usize % 40)).as_bytes(),
                0,
            );
            next_new += 1;
        }
        t.remove(format!("old:{}", calls * 7 % 5000).as_bytes());
        if cursor == 0 {
            break;
        }
    }
    assert!(t.len() > 10_000, "the table grew 2x during the scan");
    let removed: HashSet<Vec<u8>> = (1..=calls)
        .map(|c| format!("old:{}", c * 7 % 5000).into_bytes())
        .collect();
    for i in 0..5000u32 {
        let k = format!("old:{i}").into_bytes();
        assert!(seen.contains(&k) || removed.contains(&k), "missed {i}");
    }
    t.check_invariants().unwrap();
}

#[test]
// Millions of operations: too slow under Miri, and no code path the others miss.
#[cfg_attr(miri, ignore)]
fn tombstone_churn_does_not_grow_memory() {
    let mut t: U64Table<u64> = U64Table::with_config(Config {
        segment_slots: 1024,
        seed: Some(9),
        ..Config::default()
    });
    let mut rng = StdRng::seed_from_u64(9);
    let mut live: Vec<u64> = (0..20_000).map(|_| rng.gen()).collect();
    for &k in &live {
        t.insert(k, k);
    }
    let settled = t.memory_bytes();
    for _ in 0..400_000 {
        // Replace a random live key by a new one: a delete and an insert, same size.
        let i = rng.gen_range(0..live.len());
        assert_eq!(t.remove(live[i]), Some(live[i]));
        live[i] = rng.gen();
        t.insert(live[i], live[i]);
    }
    t.check_invariants().unwrap();
    assert_eq!(t.len(), live.len());
    assert!(
        t.memory_bytes() <= settled * 3 / 2,
        "{} -> {}",
        settled,
        t.memory_bytes()
    );
}

#[test]
// Millions of operations: too slow under Miri, and no code path the others miss.
#[cfg_attr(miri, ignore)]
fn random_entries_are_roughly_uniform() {
    for config in [
        small(11),
        Config {
            segment_slots: 64,
            seed: Some(12),
            ..Config::default()
        },
    ] {
        let mut t: U64Table<u32> = U64Table::with_config(config);
        for k in 0..500u64 {
            t.insert(k, 0);
        }
        for k in (0..500u64).step_by(3) {
            t.remove(k); // uneven segments: some emptier than others
        }
        let mut rng = StdRng::seed_from_u64(13);
        let mut counts = std::collections::HashMap::new();
        let draws = 200_000;
        for _ in 0..draws {
            let (k, _) = t.random_entry(&mut rng).unwrap();
            *counts.entry(k).or_insert(0u32) += 1;
        }
        let expected = draws as f64 / t.len() as f64;
        assert_eq!(counts.len(), t.len());
        for (k, &n) in &counts {
            assert!(
                (n as f64) > expected * 0.7 && (n as f64) < expected * 1.3,
                "key {k}: {n} vs {expected}"
            );
        }
    }
}

#[test]
// 10,000 keys through a default-sized table: too slow under Miri; the model tests cover the
// same paths (prefetching is a no-op there).
#[cfg_attr(miri, ignore)]
fn prefetch_and_hashed_calls_agree_with_plain_ones() {
    let mut t: Table<u32> = Table::new();
    t.prefetch(t.hash_key(b"nothing")); // empty table: a no-op
    t.prefetch_segment(t.hash_key(b"nothing"));
    let keys: Vec<Vec<u8>> = (0..10_000u32)
        .map(|i| format!("k{i}").into_bytes())
        .collect();
    let hashes: Vec<u64> = keys.iter().map(|k| t.hash_key(k)).collect();
    for (k, &h) in keys.iter().zip(&hashes) {
        t.prefetch(h);
        assert_eq!(t.insert_hashed(h, k, 1), None);
    }
    hashes.iter().for_each(|&h| t.prefetch_segment(h));
    for (k, &h) in keys.iter().zip(&hashes) {
        t.prefetch(h);
        assert_eq!(t.get_hashed(h, k), Some(&1));
        *t.get_mut_hashed(h, k).unwrap() += 1;
        assert_eq!(t.get(k), Some(&2));
    }
    assert_eq!(t.remove_hashed(hashes[0], &keys[0]), Some(2));
    assert_eq!(t.iter_mut().map(|(_, v)| *v).sum::<u32>(), 2 * 9_999);
}

#[test]
fn find_hashed_then_at_mut_reaches_the_same_value_as_get_mut() {
    // Across many splits (16-slot segments) and with tombstones: every live key's position
    // leads to its own value, and missing keys have none.
    let mut t: Table<u32> = Table::with_config(small(7));
    for i in 0..3000u32 {
        t.insert(format!("k{i}").as_bytes(), i);
        if i % 5 == 0 {
            t.remove(format!("k{}", i / 2).as_bytes());
        }
    }
    for i in 0..3000u32 {
        let key = format!("k{i}");
        let hash = t.hash_key(key.as_bytes());
        let found = t.find_hashed(hash, key.as_bytes());
        assert_eq!(found.is_some(), t.get(key.as_bytes()).is_some(), "{key}");
        if let Some(f) = found {
            *t.at_mut(f) += 1_000_000;
            assert_eq!(t.get(key.as_bytes()), Some(&(i + 1_000_000)));
        }
    }
    assert!(t.find_hashed(t.hash_key(b"absent"), b"absent").is_none());
}

#[test]
fn scan_mut_visits_every_entry_once_and_its_changes_stick() {
    let mut t: Table<u32> = Table::with_config(Config {
        segment_slots: 32,
        seed: Some(9),
        ..Config::default()
    });
    for i in 0..5000u32 {
        t.insert(format!("k:{i}").as_bytes(), 0);
    }
    let (mut cursor, mut visits) = (0, 0usize);
    loop {
        cursor = t.scan_mut(
            cursor,
            37,
            |v| (v as *const u32).cast(),
            |_, v| {
                *v += 1;
                visits += 1;
            },
        );
        // Growth between steps must not make the sweep miss or repeat an entry that was
        // present throughout.
        t.insert(format!("extra:{visits}").as_bytes(), 100);
        if cursor == 0 {
            break;
        }
    }
    for i in 0..5000u32 {
        assert_eq!(
            t.get(format!("k:{i}").as_bytes()),
            Some(&1),
            "k:{i} visited other than once"
        );
    }
    t.check_invariants().unwrap();
}
