//! Property tests: no input, however corrupt, makes the API panic, and every
//! value we produce still passes Redis's header checks.

use abacus_redis_hll::{HllError, RedisHll, HLL_REGISTERS};
use proptest::prelude::*;

/// Runs every operation on `bytes` (if accepted) and checks invariants.
fn exercise(bytes: Vec<u8>, elements: &[Vec<u8>], max_bytes: usize) {
    let Ok(mut h) = RedisHll::from_bytes(bytes) else {
        return;
    };
    let valid = h.validate().is_ok();
    let mut regs = [0u8; HLL_REGISTERS];
    assert_eq!(h.merge_into(&mut regs).is_ok(), valid);
    let _ = RedisHll::count_union(&[&h, &h]);
    let _ = h.clone().count();
    let mut d = h.clone();
    assert_eq!(d.to_dense().is_ok(), valid);
    let _ = RedisHll::pfmerge(Some(h.clone()), &[&d], max_bytes);
    let _ = RedisHll::pfmerge(None, &[&h], max_bytes);
    for e in elements {
        match h.add(e, max_bytes) {
            Ok(_) | Err(HllError::Corrupted) => {}
            Err(HllError::NotHll) => panic!("add returned NotHll"),
        }
        assert!(RedisHll::from_bytes(h.as_bytes().to_vec()).is_ok());
    }
    h.invalidate_cache();
    let r = h.count();
    if h.validate().is_ok() {
        assert!(r.is_ok());
    }
    let mut m = RedisHll::new();
    let _ = m.store_merged(&regs, valid, max_bytes);
    assert!(RedisHll::from_bytes(m.into_bytes()).is_ok());
}

fn valid_sketch() -> impl Strategy<Value = Vec<u8>> {
    (prop::collection::vec(any::<u32>(), 0..1500), 0usize..4000).prop_map(|(els, max)| {
        let mut h = RedisHll::new();
        for e in els {
            h.add(&e.to_le_bytes(), max).unwrap();
        }
        h.into_bytes()
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
    Append(Vec<u8>),
}

fn mutate(mut v: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let n = v.len().max(1);
        match m {
            Mutation::Flip(i, b) => {
                if !v.is_empty() {
                    v[i % n] ^= 1 << (b % 8);
                }
            }
            Mutation::Set(i, b) => {
                if !v.is_empty() {
                    v[i % n] = *b;
                }
            }
            Mutation::Truncate(i) => v.truncate(16 + i % n),
            Mutation::Insert(i, b) => {
                let at = (16 + i % n).min(v.len());
                v.insert(at, *b);
            }
            Mutation::Append(bytes) => v.extend_from_slice(bytes),
        }
    }
    v
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        prop::collection::vec(any::<u8>(), 1..8).prop_map(Mutation::Append),
    ]
}

fn elements() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64), els in elements(), max in 0usize..5000) {
        exercise(bytes, &els, max);
    }

    #[test]
    fn random_sparse_bodies(hdr in prop::collection::vec(any::<u8>(), 11), body in prop::collection::vec(any::<u8>(), 0..300), els in elements(), max in 0usize..5000) {
        let mut v = b"HYLL\x01".to_vec();
        v.extend_from_slice(&hdr);
        v.extend_from_slice(&body);
        exercise(v, &els, max);
    }

    #[test]
    fn random_dense_bodies(seed in any::<u64>(), els in elements()) {
        let mut x = seed;
        let mut v = b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
        v.extend((0..12288).map(|_| { x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (x >> 56) as u8 }));
        exercise(v, &els, 3000);
    }

    #[test]
    fn mutated_valid_sketches(v in valid_sketch(), muts in prop::collection::vec(mutation(), 1..4), els in elements(), max in 0usize..5000) {
        exercise(mutate(v, &muts), &els, max);
    }

    #[test]
    fn sparse_limit_is_respected(els in prop::collection::vec(any::<u64>(), 0..2000), max in 0usize..4000) {
        let mut h = RedisHll::new();
        for e in els {
            let before = h.as_bytes().len();
            h.add(&e.to_le_bytes(), max).unwrap();
            let after = h.as_bytes().len();
            // A sparse value only grows up to the limit; otherwise it is promoted.
            prop_assert!(h.is_dense() || after <= before || after <= max);
        }
        prop_assert!(h.validate().is_ok());
    }
}
