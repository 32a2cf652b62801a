//! Property tests for `ZSet` against a reference model: a `BTreeSet` of (score, member) in
//! Redis's order plus a member -> score map. Small limits (and a long-member pool) make the
//! listpack -> skiplist conversion happen at random points; a large-set test drives the
//! skiplist through chunk splits, removals down to empty, and arena compaction. Every step
//! checks length, encoding, scores, ranks, range queries both ways, and a serialize round
//! trip that keeps the encoding.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;

use crate::{EncodingLimits, ZSet};

type Bytes = Vec<u8>;

/// A score ordered as Redis orders them (no NaN in play), so the model sorts as `ZSet` does.
#[derive(Clone, Copy, Debug)]
struct Score(f64);

impl PartialEq for Score {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Score {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.partial_cmp(&o.0).expect("no NaN")
    }
}

#[derive(Default)]
struct Model {
    order: BTreeSet<(Score, Bytes)>,
    scores: HashMap<Bytes, f64>,
    listpack: bool,
}

impl Model {
    fn insert(&mut self, m: &[u8], s: f64, limits: &EncodingLimits) -> Option<f64> {
        let old = self.scores.get(m).copied();
        if old.is_none() && (self.scores.len() + 1 > limits.max_listpack_entries || m.len() > limits.max_listpack_value_bytes) {
            self.listpack = false;
        }
        let s = if self.listpack { s + 0.0 } else { s };
        match old {
            Some(o) if o == s => {}
            _ => {
                if let Some(o) = old {
                    self.order.remove(&(Score(o), m.to_vec()));
                }
                self.order.insert((Score(s), m.to_vec()));
                self.scores.insert(m.to_vec(), s);
            }
        }
        old
    }

    fn remove(&mut self, m: &[u8]) -> Option<f64> {
        let s = self.scores.remove(m)?;
        self.order.remove(&(Score(s), m.to_vec()));
        Some(s)
    }

    fn sorted(&self) -> Vec<(Bytes, f64)> {
        self.order.iter().map(|(s, m)| (m.clone(), s.0)).collect()
    }
}

fn member() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        30 => (0u16..60).prop_map(|i| format!("m{i}").into_bytes()),
        1 => prop::collection::vec(b'x'..=b'z', 8..12),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        10 => (-5i32..5).prop_map(f64::from),
        3 => -10.0f64..10.0,
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(-0.0),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Bytes, f64),
    Remove(Bytes),
    RemoveRange(usize, usize),
    Bound(f64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (member(), score()).prop_map(|(m, s)| Op::Insert(m, s)),
        3 => member().prop_map(Op::Remove),
        1 => (0usize..70, 0usize..6).prop_map(|(a, n)| Op::RemoveRange(a, a + n)),
        2 => score().prop_map(Op::Bound),
    ]
}

fn check(z: &ZSet, model: &Model) -> Result<(), TestCaseError> {
    let want = model.sorted();
    prop_assert_eq!(z.len(), want.len());
    prop_assert_eq!(z.is_listpack(), model.listpack);
    let got: Vec<(Bytes, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
    prop_assert_eq!(&got.iter().map(|(m, s)| (m.clone(), s.to_bits())).collect::<Vec<_>>(), &want.iter().map(|(m, s)| (m.clone(), s.to_bits())).collect::<Vec<_>>());
    let rev: Vec<(Bytes, f64)> = z.iter().rev().map(|(m, s)| (m.to_vec(), s)).collect();
    prop_assert!(rev.iter().eq(want.iter().rev()));
    for (rank, (m, s)) in want.iter().enumerate() {
        prop_assert_eq!(z.score(m).map(f64::to_bits), Some(s.to_bits()));
        prop_assert_eq!(z.rank(m), Some(rank));
        prop_assert_eq!(z.get_by_rank(rank).map(|(m, s)| (m.to_vec(), s.to_bits())), Some((m.clone(), s.to_bits())));
    }
    prop_assert_eq!(z.get_by_rank(want.len()), None);
    // Ranges starting and ending anywhere, both directions.
    for start in [0, 1, want.len() / 2, want.len().saturating_sub(1), want.len()] {
        for end in [start, start + 1, start + 3, want.len(), usize::MAX] {
            let got: Vec<Bytes> = z.range(start, end).map(|(m, _)| m.to_vec()).collect();
            let exp: Vec<Bytes> = want.iter().skip(start).take(end.saturating_sub(start)).map(|(m, _)| m.clone()).collect();
            prop_assert_eq!(&got, &exp);
            let got_rev: Vec<Bytes> = z.range(start, end).rev().map(|(m, _)| m.to_vec()).collect();
            prop_assert_eq!(got_rev, exp.into_iter().rev().collect::<Vec<_>>());
        }
    }
    let mut bytes = Vec::new();
    z.serialize_into(&mut bytes);
    let back = ZSet::deserialize(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(back.is_listpack(), z.is_listpack());
    prop_assert!(back.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).eq(z.iter().map(|(m, s)| (m.to_vec(), s.to_bits()))));
    for cut in [0, bytes.len() / 2, bytes.len().saturating_sub(1)] {
        if cut < bytes.len() {
            prop_assert!(ZSet::deserialize(&bytes[..cut]).is_err());
        }
    }
    Ok(())
}

fn run(ops: Vec<Op>, limits: EncodingLimits) -> Result<(), TestCaseError> {
    let mut z = ZSet::new();
    let mut model = Model { listpack: true, ..Model::default() };
    for op in ops {
        match op {
            Op::Insert(m, s) => {
                let got = z.insert(&m, s, &limits).map(f64::to_bits);
                prop_assert_eq!(got, model.insert(&m, s, &limits).map(f64::to_bits));
            }
            Op::Remove(m) => prop_assert_eq!(z.remove(&m).map(f64::to_bits), model.remove(&m).map(f64::to_bits)),
            Op::RemoveRange(a, b) => {
                let want: Vec<(Bytes, f64)> = model.sorted().into_iter().skip(a).take(b - a).collect();
                for (m, _) in &want {
                    model.remove(m);
                }
                let got = z.remove_range(a, b);
                prop_assert_eq!(got.iter().map(|(m, s)| (m.clone(), s.to_bits())).collect::<Vec<_>>(), want.iter().map(|(m, s)| (m.clone(), s.to_bits())).collect::<Vec<_>>());
            }
            Op::Bound(b) => {
                let below = model.order.iter().filter(|(s, _)| s.0 < b).count();
                let at_most = model.order.iter().filter(|(s, _)| s.0 <= b).count();
                prop_assert_eq!(z.rank_where(|s, _| s < b), below);
                prop_assert_eq!(z.rank_where(|s, _| s <= b), at_most);
                let lex = model.order.iter().filter(|(_, m)| m.as_slice() < b"m3".as_slice()).count();
                if model.order.iter().all(|(s, _)| s.0 == 0.0) {
                    prop_assert_eq!(z.rank_where(|_, m| m < b"m3".as_slice()), lex);
                }
            }
        }
        check(&z, &model)?;
    }
    // A scan from 0 visits every member exactly once when nothing changes.
    let mut seen = Vec::new();
    let mut cursor = 0;
    loop {
        let (next, page) = z.scan(cursor, 7);
        seen.extend(page.into_iter().map(|(m, _)| m.to_vec()));
        if next == 0 {
            break;
        }
        cursor = next;
    }
    seen.sort();
    let mut all: Vec<Bytes> = model.scores.keys().cloned().collect();
    all.sort();
    prop_assert_eq!(seen, all);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn behaves_like_the_model_across_the_conversion(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, EncodingLimits { max_listpack_entries: 16, max_listpack_value_bytes: 10 })?;
    }

    #[test]
    fn skiplist_from_the_start(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, EncodingLimits { max_listpack_entries: 0, max_listpack_value_bytes: 64 })?;
    }
}

/// Many members: chunk splits, Fenwick rebuilds, removal to empty and arena compaction.
#[test]
fn large_set_through_splits_and_compaction() {
    let limits = crate::ZSET_DEFAULT_LIMITS;
    let mut z = ZSet::new();
    let mut model = Model { listpack: true, ..Model::default() };
    let mut x: u64 = 12345;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..3 {
        for _ in 0..6000 {
            let m = format!("member:{}", next() % 5000).into_bytes();
            let s = (next() % 200) as f64 - 100.0;
            assert_eq!(z.insert(&m, s, &limits), model.insert(&m, s, &limits));
        }
        for _ in 0..4000 {
            let m = format!("member:{}", next() % 5000).into_bytes();
            assert_eq!(z.remove(&m), model.remove(&m));
        }
        let want = model.sorted();
        assert!(z.iter().map(|(m, s)| (m.to_vec(), s)).eq(want.iter().cloned()), "round {round}");
        for (rank, (m, _)) in want.iter().enumerate().step_by(37) {
            assert_eq!(z.rank(m), Some(rank));
        }
        assert_eq!(z.rank_where(|s, _| s < 0.0), want.iter().filter(|(_, s)| *s < 0.0).count());
    }
    let n = z.len();
    let all = z.remove_range(0, n);
    assert_eq!(all.len(), n);
    assert!(z.is_empty() && z.iter().next().is_none());
    assert_eq!(z.insert(b"again", 1.0, &limits), None);
    assert_eq!(z.rank(b"again"), Some(0));
    assert_eq!(z.encoding(), "skiplist");
}
