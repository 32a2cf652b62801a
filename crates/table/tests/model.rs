//! The table against `std::collections::HashMap` as the model: random operation sequences
//! with keys of every length from 0 to 64 bytes (across the 22-byte inline limit), 16-slot
//! segments so that a few hundred keys force dozens of rebuilds and splits, SCAN iterations
//! interleaved with all of it, and a full invariant check after every operation.

use std::collections::{HashMap, HashSet};

use abacus_table::{Config, Density, Table, U64Table};
use proptest::prelude::*;
use rand::{rngs::StdRng, SeedableRng};

/// Key `i` of the shared pool: lengths cycle through 0..=64, contents are distinct for
/// lengths >= 2 (shorter keys collide on purpose: the model has the same collisions).
fn pool_key(i: u16) -> Vec<u8> {
    let len = i as usize % 65;
    let mut k: Vec<u8> = i
        .to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(len.min(2))
        .collect();
    k.extend((2..len).map(|j| b'a' + (j % 26) as u8));
    k
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u16..400).prop_map(pool_key),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>, u32),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    GetOrInsert(Vec<u8>, u32),
    Scan(usize),
    Random,
    Retain(u32),
    Take,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (key(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        10 => key().prop_map(Op::Remove),
        10 => key().prop_map(Op::Get),
        5 => (key(), any::<u32>()).prop_map(|(k, v)| Op::GetOrInsert(k, v)),
        10 => (1usize..20).prop_map(Op::Scan),
        2 => Just(Op::Random),
        1 => (2u32..6).prop_map(Op::Retain),
        1 => Just(Op::Take),
    ]
}

/// An iteration in progress: what was present at its start, what changed since, what it saw.
#[derive(Default)]
struct ScanState {
    cursor: u64,
    started: bool,
    present_at_start: HashSet<Vec<u8>>,
    removed: HashSet<Vec<u8>>,
    modified: bool,
    seen: HashMap<Vec<u8>, usize>,
}

impl ScanState {
    fn removed(&mut self, k: &[u8]) {
        self.removed.insert(k.to_vec());
        self.modified = true;
    }
}

thread_local! {
    /// `Tracked` values alive on this thread.
    static LIVE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

/// A value that owns a heap allocation and counts itself, so the test also checks that the
/// table drops every value exactly once (none leaked, none dropped twice; Miri sees the
/// allocation too).
#[derive(Debug, PartialEq)]
struct Tracked(Box<u32>);

impl Tracked {
    fn new(v: u32) -> Tracked {
        LIVE.with(|l| l.set(l.get() + 1));
        Tracked(Box::new(v))
    }
    fn v(&self) -> u32 {
        *self.0
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        LIVE.with(|l| l.set(l.get() - 1));
    }
}

fn live() -> isize {
    LIVE.with(|l| l.get())
}

/// Tiny segments (many splits); odd seeds grow by the dense parameters, and seeds with bit
/// 1 set keep spare segments from the start (`spare.rs`), so every test that draws seeds
/// covers all four.
fn config(seed: u64) -> Config {
    Config {
        segment_slots: 16,
        seed: Some(seed),
        density: if seed % 2 == 1 {
            Density::Dense
        } else {
            Density::Balanced
        },
        spares_from_bytes: if seed & 2 != 0 { 0 } else { usize::MAX },
    }
}

proptest! {
    // Under Miri (which checks the storage's unsafe code) a few short cases: it runs the
    // same paths about 10^4 times slower.
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 96 }, ..ProptestConfig::default() })]

    #[test]
    fn byte_table_matches_model(seed in any::<u64>(), ops in proptest::collection::vec(op(), 1..if cfg!(miri) { 300 } else { 1500 })) {
        let live_before = live();
        let mut t: Table<Tracked> = Table::with_config(config(seed));
        let mut model: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut scan = ScanState::default();
        let mut rng = StdRng::seed_from_u64(seed);
        for op in ops {
            match op {
                Op::Insert(k, v) => {
                    prop_assert_eq!(t.insert(&k, Tracked::new(v)).map(|x| x.v()), model.insert(k.clone(), v));
                    scan.modified = true;
                }
                Op::Remove(k) => {
                    prop_assert_eq!(t.remove(&k).map(|x| x.v()), model.remove(&k));
                    scan.removed(&k);
                }
                Op::Get(k) => {
                    prop_assert_eq!(t.get(&k).map(Tracked::v), model.get(&k).copied());
                    prop_assert_eq!(t.get_hashed(t.hash_key(&k), &k).map(Tracked::v), model.get(&k).copied());
                    if let Some(v) = t.get_mut(&k) {
                        *v.0 = v.v().wrapping_add(1);
                        model.insert(k, v.v());
                    }
                }
                Op::GetOrInsert(k, v) => {
                    let (got, inserted) = t.get_or_insert_with(&k, || Tracked::new(v));
                    prop_assert_eq!(inserted, !model.contains_key(&k));
                    prop_assert_eq!(got.v(), *model.entry(k).or_insert(v));
                    scan.modified |= inserted;
                }
                Op::Scan(count) => {
                    if !scan.started {
                        scan = ScanState { started: true, present_at_start: model.keys().cloned().collect(), ..ScanState::default() };
                    }
                    let mut batch = Vec::new();
                    scan.cursor = t.scan(scan.cursor, count, |k, v| batch.push((k.to_vec(), v.v())));
                    for (k, v) in batch {
                        // Everything reported is in the table right now, with its value.
                        prop_assert_eq!(model.get(&k), Some(&v));
                        *scan.seen.entry(k).or_default() += 1;
                    }
                    if scan.cursor == 0 {
                        for k in scan.present_at_start.difference(&scan.removed) {
                            prop_assert!(scan.seen.contains_key(k), "scan missed a key present throughout");
                        }
                        if !scan.modified {
                            prop_assert!(scan.seen.values().all(|&n| n == 1), "an unmodified table's scan repeated a key");
                            prop_assert_eq!(scan.seen.len(), model.len());
                        }
                        scan = ScanState::default();
                    }
                }
                Op::Random => {
                    match t.random_entry(&mut rng) {
                        Some((k, v)) => prop_assert_eq!(model.get(k), Some(&v.v())),
                        None => prop_assert!(model.is_empty()),
                    }
                }
                Op::Retain(m) => {
                    t.retain(|_, v| v.v() % m != 0);
                    let gone: Vec<Vec<u8>> = model.iter().filter(|(_, v)| **v % m == 0).map(|(k, _)| k.clone()).collect();
                    for k in gone {
                        model.remove(&k);
                        scan.removed(&k);
                    }
                }
                Op::Take => {
                    let old = t.take();
                    prop_assert_eq!(old.len(), model.len());
                    prop_assert!(t.is_empty() && t.get(b"").is_none());
                    t.insert(b"fresh", Tracked::new(1));
                    prop_assert!(t.check_invariants().is_ok());
                    t = old; // put the old contents back: the model goes on
                }
            }
            prop_assert_eq!(t.len(), model.len());
            if let Err(e) = t.check_invariants() {
                return Err(TestCaseError::fail(e));
            }
        }
        let mut all: Vec<(Vec<u8>, u32)> = t.iter().map(|(k, v)| (k.to_vec(), v.v())).collect();
        all.sort();
        let mut want: Vec<(Vec<u8>, u32)> = model.into_iter().collect();
        want.sort();
        prop_assert_eq!(all, want);
        prop_assert_eq!(live() - live_before, t.len() as isize, "values alive = entries");
        drop(t);
        prop_assert_eq!(live(), live_before, "every value dropped exactly once");
    }

    #[test]
    fn u64_table_matches_model(seed in any::<u64>(), ops in proptest::collection::vec((0u8..4, prop_oneof![0u64..300, Just(u64::MAX), any::<u64>()], any::<u64>()), 1..if cfg!(miri) { 300 } else { 2000 })) {
        let mut t: U64Table<u64> = U64Table::with_config(config(seed));
        let mut model: HashMap<u64, u64> = HashMap::new();
        for (op, k, v) in ops {
            match op {
                0 | 1 => prop_assert_eq!(t.insert(k, v), model.insert(k, v)),
                2 => prop_assert_eq!(t.remove(k), model.remove(&k)),
                _ => prop_assert_eq!(t.get(k), model.get(&k)),
            }
        }
        prop_assert_eq!(t.len(), model.len());
        if let Err(e) = t.check_invariants() {
            return Err(TestCaseError::fail(e));
        }
        // A full scan of an unmodified table reports every key exactly once, at any count.
        for count in [1, 3, 100] {
            let (mut cursor, mut seen) = (0, Vec::new());
            loop {
                cursor = t.scan(cursor, count, |k, v| seen.push((k, *v)));
                if cursor == 0 { break; }
            }
            seen.sort();
            let mut want: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
            want.sort();
            prop_assert_eq!(seen, want);
        }
    }
}
