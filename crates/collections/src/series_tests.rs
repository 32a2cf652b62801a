//! Property tests for `Series` and its Gorilla chunks against a model: a `BTreeMap` from
//! timestamp to value with the duplicate policies and retention applied by hand.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::gorilla::Chunk;
use crate::{AddError, DuplicatePolicy, Series};

fn value_strategy() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1000i64..1000).prop_map(|v| v as f64),
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
        (0u32..4).prop_map(|v| v as f64 * 0.1),
    ]
}

fn ts_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..200, 0u64..u64::MAX / 2, Just(u64::MAX - 1)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A chunk decodes to exactly what was appended, whatever the gaps and values, and its
    /// byte form round-trips.
    #[test]
    fn chunk_round_trips(mut ts in proptest::collection::vec(ts_strategy(), 0..300), vals in proptest::collection::vec(value_strategy(), 300)) {
        ts.sort_unstable();
        ts.dedup();
        let samples: Vec<(u64, f64)> = ts.iter().zip(vals.iter()).map(|(&t, &v)| (t, v)).collect();
        let c = Chunk::from_samples(&samples);
        let back = c.samples();
        prop_assert_eq!(back.len(), samples.len());
        for (a, b) in back.iter().zip(samples.iter()) {
            prop_assert_eq!(a.0, b.0);
            prop_assert_eq!(a.1.to_bits(), b.1.to_bits());
        }
        let mut bytes = Vec::new();
        c.serialize_into(&mut bytes);
        let (d, used) = Chunk::deserialize(&bytes).map_err(TestCaseError::fail)?;
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(d.samples().len(), samples.len());
        for cut in [0, bytes.len() / 2, bytes.len().saturating_sub(1)] {
            if cut < bytes.len() {
                prop_assert!(Chunk::deserialize(&bytes[..cut]).is_err());
            }
        }
    }

    /// Adds (in any order, with any policy), deletions and retention behave like the model.
    #[test]
    fn series_behaves_like_a_map(ops in proptest::collection::vec((0u8..10, 0u64..3000, value_strategy(), 0usize..6), 1..400), chunk in 32u64..300, retention in prop_oneof![Just(0u64), 100u64..2000]) {
        let mut s = Series::new();
        s.chunk_size_bytes = chunk;
        s.retention_ms = retention;
        let mut model: BTreeMap<u64, f64> = BTreeMap::new();
        for (op, t, v, p) in ops {
            let policy = DuplicatePolicy::ALL[p];
            if op < 8 {
                let last = model.keys().next_back().copied();
                let got = s.add(t, v, policy);
                let too_old = retention != 0 && last.is_some_and(|l| t < l.saturating_sub(retention));
                if too_old {
                    prop_assert_eq!(got, Err(AddError::TooOld));
                    continue;
                }
                match model.get(&t).copied() {
                    Some(old) => match policy.resolve(old, v) {
                        None => prop_assert_eq!(got, Err(AddError::Blocked)),
                        Some(nv) => {
                            prop_assert_eq!(got.map(f64::to_bits), Ok(nv.to_bits()));
                            model.insert(t, nv);
                        }
                    },
                    None => {
                        prop_assert_eq!(got.map(f64::to_bits), Ok(v.to_bits()));
                        model.insert(t, v);
                    }
                }
            } else {
                let (a, b) = (t.min(t / 2 + 50), t);
                let n = s.delete_range(a, b);
                let before = model.len();
                model.retain(|k, _| *k < a || *k > b);
                prop_assert_eq!(n as usize, before - model.len());
            }
            // Retention drops whole chunks only: every live model sample inside the window
            // must be there; older ones may linger until their chunk goes.
            let last = model.keys().next_back().copied();
            let min = match (retention, last) {
                (0, _) | (_, None) => 0,
                (r, Some(l)) => l.saturating_sub(r),
            };
            let got: Vec<(u64, f64)> = s.range(0, u64::MAX).collect();
            let got_window: Vec<(u64, u64)> = got.iter().filter(|x| x.0 >= min).map(|x| (x.0, x.1.to_bits())).collect();
            let want_window: Vec<(u64, u64)> = model.range(min..).map(|(k, v)| (*k, v.to_bits())).collect();
            prop_assert_eq!(got_window, want_window);
            for (k, v) in &got {
                prop_assert_eq!(model.get(k).map(|x| x.to_bits()), Some(v.to_bits()));
            }
            // Model samples the series dropped: forget them (retention).
            let kept: std::collections::BTreeSet<u64> = got.iter().map(|x| x.0).collect();
            model.retain(|k, _| kept.contains(k));
            prop_assert_eq!(s.len() as usize, model.len());
            prop_assert_eq!(s.last().map(|x| x.0), model.keys().next_back().copied());
        }
        // Sub-ranges, neighbours and the byte form.
        for (a, b) in [(0u64, 100u64), (500, 1500), (2999, 3000), (100, 50)] {
            let got: Vec<u64> = s.range(a, b).map(|x| x.0).collect();
            let want: Vec<u64> = if a <= b { model.range(a..=b).map(|x| *x.0).collect() } else { vec![] };
            prop_assert_eq!(got, want);
            prop_assert_eq!(s.before(a).map(|x| x.0), model.range(..a).next_back().map(|x| *x.0));
            prop_assert_eq!(s.after(a).map(|x| x.0), model.range(a + 1..).next().map(|x| *x.0));
        }
        let mut bytes = Vec::new();
        s.serialize_into(&mut bytes);
        let back = Series::deserialize(&bytes).map_err(TestCaseError::fail)?;
        prop_assert!(back == s);
        prop_assert!(Series::deserialize(&bytes[..bytes.len() - 1]).is_err());
    }
}

#[test]
fn regular_counter_costs_under_two_bytes_per_sample() {
    let mut s = Series::new();
    for i in 0..100_000u64 {
        s.add(1_700_000_000_000 + i * 1000, i as f64, DuplicatePolicy::Block).unwrap();
    }
    let per = s.data_bytes() as f64 / s.len() as f64;
    assert!(per <= 2.0, "{per} bytes per sample");
}

#[test]
fn aggregators_fold_as_defined() {
    use crate::Aggregator as A;
    let s = [(10u64, 1.0), (12, 3.0), (14, 8.0)];
    assert_eq!(A::Avg.fold(&s, 10, 20, None, None), 4.0);
    assert_eq!(A::Range.fold(&s, 10, 20, None, None), 7.0);
    assert_eq!(A::Count.fold(&s, 10, 20, None, None), 3.0);
    assert_eq!(A::VarP.fold(&s, 10, 20, None, None), 26.0 / 3.0);
    assert_eq!(A::VarS.fold(&s, 10, 20, None, None), 13.0);
    // twa without neighbours: trapezoids over [10, 14] = (2*2 + 2*5.5) / 4.
    assert_eq!(A::Twa.fold(&s, 10, 20, None, None), 15.0 / 4.0);
    assert_eq!(crate::bucket_start(25, 10, 0), 20);
    assert_eq!(crate::bucket_start(25, 10, 3), 23);
    assert_eq!(crate::bucket_start(22, 10, 3), 13);
}

#[test]
fn index_intersects_and_forgets() {
    let mut ix = crate::SeriesIndex::new();
    ix.register(b"a", [(&b"x"[..], &b"1"[..])].into_iter());
    ix.register(b"b", [(&b"x"[..], &b"2"[..])].into_iter());
    let m = ix.matching(b"x", &[b"1", b"2"]);
    assert_eq!(m.len(), 2);
    ix.forget(b"a");
    let m = ix.matching(b"x", &[b"1", b"2"]);
    assert_eq!(m.iter().map(|id| ix.key(id).unwrap().to_vec()).collect::<Vec<_>>(), vec![b"b".to_vec()]);
}
