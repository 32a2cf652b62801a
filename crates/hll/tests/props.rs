//! Property tests: adds against a naive reference model for random
//! parameters, serialization round trips, union laws, and robustness of
//! `from_bytes` against random, bit-flipped, truncated and extended input.

use abacus_hll::{Hll, Kind, Params};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// Reference model written independently of the crate, straight from the
/// notes: a set until the threshold, then registers keeping the max rho.
#[derive(Debug, Clone)]
enum Model {
    Empty,
    Explicit(BTreeSet<i64>),
    Regs(Vec<u8>),
}

fn rho(hash: i64, p: Params) -> (usize, u8) {
    let index = (hash as u64 % (1u64 << p.log2m())) as usize;
    let mut rest = hash as u64 >> p.log2m();
    if rest == 0 {
        return (index, 0);
    }
    let mut run = 1u32;
    while rest & 1 == 0 {
        rest >>= 1;
        run += 1;
    }
    (index, run.min((1 << p.regwidth()) - 1) as u8)
}

fn regs_of<'a>(p: Params, values: impl IntoIterator<Item = &'a i64>) -> Vec<u8> {
    let mut regs = vec![0u8; 1 << p.log2m()];
    for &v in values {
        let (i, r) = rho(v, p);
        regs[i] = regs[i].max(r);
    }
    regs
}

impl Model {
    /// Returns whether the state changed.
    fn add(&mut self, p: Params, hash: i64) -> bool {
        let threshold = p.explicit_threshold();
        match self {
            Model::Empty if threshold == 0 => *self = Model::Regs(regs_of(p, &[hash])),
            Model::Empty => *self = Model::Explicit(BTreeSet::from([hash])),
            Model::Explicit(set) if set.contains(&hash) => return false,
            Model::Explicit(set) if set.len() == threshold => {
                set.insert(hash);
                *self = Model::Regs(regs_of(p, set.iter()));
            }
            Model::Explicit(set) => {
                set.insert(hash);
            }
            Model::Regs(regs) => {
                let (i, r) = rho(hash, p);
                if regs[i] >= r {
                    return false;
                }
                regs[i] = r;
            }
        }
        true
    }

    fn cardinality(&self, p: Params) -> f64 {
        match self {
            Model::Empty => 0.0,
            Model::Explicit(set) => set.len() as f64,
            Model::Regs(regs) => {
                let m = regs.len() as f64;
                let sum: f64 = regs.iter().map(|&r| 2f64.powi(-i32::from(r))).sum();
                let zeros = regs.iter().filter(|&&r| r == 0).count() as f64;
                let alpha = match regs.len() {
                    16 => 0.673,
                    32 => 0.697,
                    64 => 0.709,
                    _ => 0.7213 / (1.0 + 1.079 / m),
                };
                let e = alpha * m * m / sum;
                let two_l = 2f64.powi((1 << p.regwidth()) - 2 + p.log2m() as i32);
                if zeros > 0.0 && e < 2.5 * m {
                    m * (m / zeros).ln()
                } else if e <= two_l / 30.0 {
                    e
                } else {
                    -two_l * (1.0 - e / two_l).ln()
                }
            }
        }
    }
}

fn params_strategy() -> impl Strategy<Value = Params> {
    let expthresh = prop_oneof![Just(-1i64), Just(0i64), (0u32..=7).prop_map(|k| 1i64 << k)];
    (4i64..=12, 1i64..=8, expthresh, any::<bool>())
        .prop_map(|(l, r, e, s)| Params::new(l, r, e, s).unwrap())
}

/// Hashes with the awkward cases over-represented: tiny values (no bits above
/// the index), long runs of trailing zeros, the extremes, and repeats.
fn hash_strategy() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => any::<i64>(),
        1 => -64i64..64,
        1 => (any::<i64>(), 0u32..64).prop_map(|(v, k)| v.wrapping_shl(k)),
        1 => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), Just(-1i64)],
    ]
}

fn build(p: Params, hashes: &[i64]) -> Hll {
    let mut hll = Hll::new(p);
    for &h in hashes {
        hll.add_raw(h);
    }
    hll
}

fn check_round_trip(hll: &Hll) -> Result<(), TestCaseError> {
    let bytes = hll.to_bytes();
    let info = hll.info();
    prop_assert_eq!(info.serialized_len, bytes.len());
    let type_code = match info.kind {
        Kind::Undefined => 0,
        Kind::Empty => 1,
        Kind::Explicit => 2,
        Kind::Sparse => 3,
        Kind::Full => 4,
    };
    prop_assert_eq!(bytes[0], 0x10 | type_code);
    let back = Hll::from_bytes(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, hll);
    prop_assert_eq!(back.to_bytes(), bytes);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn adds_match_reference_model(p in params_strategy(), hashes in prop::collection::vec(hash_strategy(), 0..400)) {
        let mut hll = Hll::new(p);
        let mut model = Model::Empty;
        for &h in &hashes {
            prop_assert_eq!(hll.add_raw(h), model.add(p, h), "add {}", h);
        }
        match &model {
            Model::Empty => prop_assert_eq!(hll.info().kind, Kind::Empty),
            Model::Explicit(set) => {
                let expected: Vec<i64> = set.iter().copied().collect();
                prop_assert_eq!(hll.explicit_values(), Some(&expected[..]));
            }
            Model::Regs(regs) => prop_assert_eq!(hll.registers(), Some(&regs[..])),
        }
        let (ours, theirs) = (hll.cardinality().unwrap(), model.cardinality(p));
        // NaN happens legitimately (as in postgresql-hll) when the
        // large-range correction is used beyond 2^L, e.g. regwidth 1.
        let same = (ours.is_nan() && theirs.is_nan()) || (ours - theirs).abs() <= 1e-9 * theirs.max(1.0);
        prop_assert!(same, "{} vs {}", ours, theirs);
        check_round_trip(&hll)?;
    }

    #[test]
    fn union_laws(
        p in params_strategy(),
        a in prop::collection::vec(hash_strategy(), 0..200),
        b in prop::collection::vec(hash_strategy(), 0..200),
        c in prop::collection::vec(hash_strategy(), 0..200),
    ) {
        let (ha, hb, hc) = (build(p, &a), build(p, &b), build(p, &c));
        let union = |x: &Hll, y: &Hll| {
            let mut z = x.clone();
            let changed = z.union(y).unwrap();
            assert_eq!(changed, &z != x, "union's changed flag");
            z
        };
        // Commutative and associative, and the same as adding everything.
        prop_assert_eq!(union(&ha, &hb), union(&hb, &ha));
        prop_assert_eq!(union(&union(&ha, &hb), &hc), union(&ha, &union(&hb, &hc)));
        let all: Vec<i64> = a.iter().chain(&b).copied().collect();
        prop_assert_eq!(union(&ha, &hb), build(p, &all));
        // Idempotent and EMPTY is the identity.
        prop_assert_eq!(union(&ha, &ha), ha.clone());
        prop_assert_eq!(union(&ha, &Hll::new(p)), ha.clone());
        check_round_trip(&union(&ha, &hb))?;
    }

    #[test]
    fn union_refuses_different_params(p in params_strategy(), q in params_strategy()) {
        let mut a = Hll::new(p);
        let result = a.union(&Hll::new(q));
        prop_assert_eq!(result.is_err(), p != q);
        if let Err(e) = result {
            let msg = e.to_string();
            prop_assert!(["log2m", "regwidth", "expthresh", "sparseon"].iter().any(|n| msg.contains(n)), "{}", msg);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(hll) = Hll::from_bytes(&bytes) {
            check_round_trip(&hll)?;
        }
    }

    #[test]
    fn plausible_headers_never_panic(
        type_code in 0u8..6,
        b1 in any::<u8>(),
        b2 in any::<u8>(),
        payload in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        // Small log2m so that the sparse and full paths are reached often.
        let mut bytes = vec![0x10 | type_code, b1 & 0xe7, b2 & 0x7f];
        bytes.extend(payload);
        if let Ok(hll) = Hll::from_bytes(&bytes) {
            check_round_trip(&hll)?;
        }
    }

    #[test]
    fn damaged_sketches_never_panic(
        p in params_strategy(),
        hashes in prop::collection::vec(hash_strategy(), 0..300),
        bit in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        extra in prop::collection::vec(any::<u8>(), 1..9),
    ) {
        let bytes = build(p, &hashes).to_bytes();
        let mut flipped = bytes.clone();
        let i = bit.index(bytes.len() * 8);
        flipped[i / 8] ^= 1 << (i % 8);
        let truncated = &bytes[..cut.index(bytes.len())];
        let mut extended = bytes.clone();
        extended.extend(&extra);
        for damaged in [&flipped[..], truncated, &extended[..]] {
            if let Ok(hll) = Hll::from_bytes(damaged) {
                check_round_trip(&hll)?;
            }
        }
        // (A truncated or extended value may still be valid: fewer or more
        // sparse or explicit entries. It must then round-trip, as checked.)
        prop_assert!(Hll::from_bytes(&bytes[..cut.index(3)]).is_err());
    }
}
