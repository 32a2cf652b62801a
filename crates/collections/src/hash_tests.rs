//! Property tests for `CompactHash` against a `BTreeMap` model that also
//! predicts the encoding, with field pools and value lengths chosen to cross
//! both listpack thresholds (128 entries, 64-byte fields/values) at random
//! points, including an over-long value written to an existing field.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::{CompactHash, EncodingLimits};

type Bytes = Vec<u8>;

fn field() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        20 => (0u16..200).prop_map(|i| format!("f{i}").into_bytes()),
        1 => prop::collection::vec(b'x'..=b'z', 60..70),
    ]
}

fn value(long_weight: u32) -> impl Strategy<Value = Bytes> {
    prop_oneof![
        40 => prop::collection::vec(any::<u8>(), 0..12),
        long_weight => prop::collection::vec(any::<u8>(), 60..70),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Bytes, Bytes),
    InsertMany(Vec<(Bytes, Bytes)>),
    Remove(Bytes),
    Get(Bytes),
    RandomDistinct(usize),
    RandomWithRepeats(usize),
}

fn op(long_weight: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (field(), value(long_weight)).prop_map(|(f, v)| Op::Insert(f, v)),
        1 => prop::collection::vec((field(), value(long_weight)), 30..150).prop_map(Op::InsertMany),
        3 => field().prop_map(Op::Remove),
        3 => field().prop_map(Op::Get),
        1 => (0usize..300).prop_map(Op::RandomDistinct),
        1 => (0usize..40).prop_map(Op::RandomWithRepeats),
    ]
}

struct Model {
    pairs: BTreeMap<Bytes, Bytes>,
    encoding: &'static str,
}

impl Model {
    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        let is_new = !self.pairs.contains_key(field);
        let fits = field.len() <= 64 && value.len() <= 64 && (!is_new || self.pairs.len() < 128);
        if !fits {
            self.encoding = "hashtable";
        }
        self.pairs.insert(field.to_vec(), value.to_vec());
        is_new
    }
}

fn full_scan(hash: &CompactHash, count: usize) -> BTreeMap<Bytes, Bytes> {
    let (mut cursor, mut seen) = (0, Vec::new());
    loop {
        let (next, page) = hash.scan(cursor, count);
        seen.extend(page.into_iter().map(|(f, v)| (f.to_vec(), v.to_vec())));
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(
            seen.len() <= hash.len(),
            "scan returned more than the hash holds"
        );
    }
    let unique: BTreeMap<Bytes, Bytes> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "scan returned a field twice");
    unique
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn operations_match_model(ops in (0u32..3).prop_flat_map(|w| prop::collection::vec(op(w), 0..100)), seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut hash, mut model) = (CompactHash::new(), Model { pairs: BTreeMap::new(), encoding: "listpack" });
        for op in ops {
            match op {
                Op::Insert(f, v) => prop_assert_eq!(hash.insert(&f, &v), model.insert(&f, &v)),
                Op::InsertMany(pairs) => for (f, v) in pairs {
                    prop_assert_eq!(hash.insert(&f, &v), model.insert(&f, &v));
                    prop_assert_eq!(hash.encoding(), model.encoding);
                },
                Op::Remove(f) => prop_assert_eq!(hash.remove(&f), model.pairs.remove(&f).is_some()),
                Op::Get(f) => {
                    prop_assert_eq!(hash.get(&f), model.pairs.get(&f).map(|v| v.as_slice()));
                    prop_assert_eq!(hash.contains(&f), model.pairs.contains_key(&f));
                }
                Op::RandomDistinct(k) => {
                    let picked = hash.random_fields_distinct(k, &mut rng);
                    prop_assert_eq!(picked.len(), k.min(model.pairs.len()));
                    prop_assert_eq!(picked.iter().map(|(f, _)| *f).collect::<BTreeSet<_>>().len(), picked.len());
                    for (f, v) in picked { prop_assert_eq!(model.pairs.get(f).map(|v| v.as_slice()), Some(v)); }
                }
                Op::RandomWithRepeats(k) => {
                    let picked = hash.random_fields_with_repeats(k, &mut rng);
                    prop_assert_eq!(picked.len(), if model.pairs.is_empty() { 0 } else { k });
                    for (f, v) in picked { prop_assert_eq!(model.pairs.get(f).map(|v| v.as_slice()), Some(v)); }
                }
            }
            prop_assert_eq!(hash.len(), model.pairs.len());
            prop_assert_eq!(hash.encoding(), model.encoding);
        }
        let iterated: BTreeMap<Bytes, Bytes> = hash.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        prop_assert_eq!(&iterated, &model.pairs);
        prop_assert_eq!(hash.iter().count(), model.pairs.len());
        prop_assert_eq!(&full_scan(&hash, 1 + (seed % 13) as usize), &model.pairs);
        if let Some((f, v)) = hash.random_field(&mut rng) {
            prop_assert_eq!(model.pairs.get(f).map(|v| v.as_slice()), Some(v));
        }
    }
}

#[test]
fn listpack_keeps_insertion_order_and_converts_on_long_value_update() {
    let mut hash = CompactHash::new();
    for f in ["c", "a", "b"] {
        assert!(hash.insert(f.as_bytes(), b"1"));
    }
    assert!(hash.remove(b"a"));
    let fields: Vec<&[u8]> = hash.iter().map(|(f, _)| f).collect();
    assert_eq!(fields, [b"c", b"b"]);
    assert!(!hash.insert(b"c", &[b'v'; 65]));
    assert_eq!(hash.encoding(), "hashtable");
    assert_eq!(hash.get(b"c"), Some(&[b'v'; 65][..]));
}

#[test]
fn thresholds_are_parameters() {
    let limits = EncodingLimits {
        max_listpack_entries: 2,
        max_listpack_value_bytes: 8,
    };
    let mut hash = CompactHash::new();
    hash.insert_with_limits(b"a", b"1", &limits);
    hash.insert_with_limits(b"b", b"1", &limits);
    assert_eq!(hash.encoding(), "listpack");
    hash.insert_with_limits(b"c", b"1", &limits);
    assert_eq!(hash.encoding(), "hashtable");
    let before = hash.heap_bytes();
    for i in 0..1000 {
        hash.insert_with_limits(format!("field{i}").as_bytes(), b"value", &limits);
    }
    assert!(
        hash.heap_bytes() > before + 1000 * 40,
        "heap estimate grows with entries"
    );
}
