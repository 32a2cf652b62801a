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
            // Retention drops whole chunks only: the samples older than the window may linger
            // (stored, counted by TS.DEL), but a read sees exactly the model's samples at or
            // after the newest minus RETENTION.
            let last = model.keys().next_back().copied();
            let min = match (retention, last) {
                (0, _) | (_, None) => 0,
                (r, Some(l)) => l.saturating_sub(r),
            };
            prop_assert_eq!(s.retention_floor(), min);
            let stored: Vec<(u64, f64)> = s.range_stored(0, u64::MAX).collect();
            let got_window: Vec<(u64, u64)> = s.range(0, u64::MAX).map(|x| (x.0, x.1.to_bits())).collect();
            let want_window: Vec<(u64, u64)> = model.range(min..).map(|(k, v)| (*k, v.to_bits())).collect();
            prop_assert_eq!(&got_window, &want_window);
            prop_assert_eq!(s.len_in_window() as usize, want_window.len());
            prop_assert_eq!(s.first().map(|x| x.0), model.range(min..).next().map(|x| *x.0));
            for (k, v) in &stored {
                prop_assert_eq!(model.get(k).map(|x| x.to_bits()), Some(v.to_bits()));
                // The point read: every stored timestamp, and the one after it, in the window only.
                let seen = |t: u64| if t >= min { model.get(&t).map(|x| x.to_bits()) } else { None };
                prop_assert_eq!(s.get(*k).map(f64::to_bits), seen(*k));
                prop_assert_eq!(s.get(k + 1).map(f64::to_bits), seen(k + 1));
            }
            // Model samples the series dropped with their chunk: forget them.
            let kept: std::collections::BTreeSet<u64> = stored.iter().map(|x| x.0).collect();
            model.retain(|k, _| kept.contains(k));
            prop_assert_eq!(s.len() as usize, model.len());
            prop_assert_eq!(s.last().map(|x| x.0), model.keys().next_back().copied());
        }
        // Sub-ranges, neighbours and the byte form (reads see the window only).
        let min = s.retention_floor();
        for (a, b) in [(0u64, 100u64), (500, 1500), (2999, 3000), (100, 50)] {
            let got: Vec<u64> = s.range(a, b).map(|x| x.0).collect();
            let want: Vec<u64> = if a.max(min) <= b { model.range(a.max(min)..=b).map(|x| *x.0).collect() } else { vec![] };
            prop_assert_eq!(got, want);
            prop_assert_eq!(s.before(a).map(|x| x.0), model.range(..a).next_back().map(|x| *x.0).filter(|&t| t >= min));
            prop_assert_eq!(s.get(a).map(f64::to_bits), model.get(&a).filter(|_| a >= min).map(|x| x.to_bits()));
            prop_assert_eq!(s.after(a).map(|x| x.0), model.range((a + 1).max(min)..).next().map(|x| *x.0));
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
    // The mean of two DBL_MAX is DBL_MAX, although their sum overflows.
    let big = [(1u64, f64::MAX), (2, f64::MAX)];
    assert_eq!(A::Avg.fold(&big, 0, 10, None, None), f64::MAX);
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
    let q = |ix: &crate::SeriesIndex| ix.query(&[ix.resolve(crate::LabelMatcher::In(b"x", &[b"1", b"2"]))]);
    assert_eq!(q(&ix).len(), 2);
    ix.forget(b"a");
    assert_eq!(q(&ix).iter().map(|&id| ix.key(id).unwrap().to_vec()).collect::<Vec<_>>(), vec![b"b".to_vec()]);
}

/// Range reads start at a chunk's seek point before `from` (gorilla.rs): every range of a
/// long series with irregular gaps and values must equal the plain filter of its samples,
/// also after the series went through its byte form (the seek points are rebuilt).
#[test]
fn range_reads_from_seek_points_equal_a_full_decode() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut s = Series::new();
    let mut all = Vec::new();
    let mut t = 1_000u64;
    let mut v = 100.0f64;
    for i in 0..5_000u64 {
        t += 1 + rng.gen::<u64>() % if i % 97 == 0 { 100_000 } else { 1_000 };
        v += (rng.gen::<u64>() % 2001) as f64 / 1000.0 - 1.0;
        let v = if i % 13 == 0 { 7.0 } else { v };
        s.add(t, v, DuplicatePolicy::Last).unwrap();
        all.push((t, v));
    }
    let mut bytes = Vec::new();
    s.serialize_into(&mut bytes);
    let back = Series::deserialize(&bytes).unwrap();
    for k in 0..400u64 {
        let from = all[0].0.saturating_sub(10) + rng.gen::<u64>() % (t - all[0].0 + 20);
        let to = from + rng.gen::<u64>() % (if k % 2 == 0 { 5_000 } else { 500_000 });
        let want: Vec<(u64, f64)> = all.iter().copied().filter(|x| x.0 >= from && x.0 <= to).collect();
        for x in [&s, &back] {
            let got: Vec<(u64, f64)> = x.range(from, to).collect();
            assert_eq!(got, want, "range {from}..{to}");
        }
        // Exact timestamps, including the first and the last of a chunk.
        let (at, val) = all[(rng.gen::<u64>() % all.len() as u64) as usize];
        assert_eq!(s.get(at), Some(val));
        assert_eq!(back.range(at, at).collect::<Vec<_>>(), vec![(at, val)]);
    }
    assert!(s.range(t + 1, u64::MAX).next().is_none());
}

#[test]
fn chunk_point_reads_match_its_samples() {
    // Long chunks (seek points every 4096 bits), with every timestamp prefix width and every
    // value form: repeated values, values inside the previous XOR window, new windows.
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let mut next = move || rng.gen::<u64>();
    for round in 0..6 {
        let mut samples = Vec::new();
        let (mut t, mut v) = (1_700_000_000_000u64, 100.0f64);
        for _ in 0..4000 {
            t += match next() % 8 {
                0 => 1000,
                1 => 1000 + next() % 100,
                2 => 1 + next() % 5000,
                3 => 1 + next() % 4_000_000,
                4 => 1 + next() % (1 << 40),
                _ => 86_400_000,
            } * (round + 1);
            v = match next() % 4 {
                0 => v,
                1 => v + 1.0,
                2 => f64::from_bits(next()),
                _ => (v * 1.01 * 10_000.0).round() / 10_000.0,
            };
            samples.push((t, v));
        }
        let c = Chunk::from_samples(&samples);
        for (k, &(t, v)) in samples.iter().enumerate() {
            assert_eq!(c.get(t).map(f64::to_bits), Some(v.to_bits()), "round {round}, sample {k}");
            let after = samples.get(k + 1).map(|s| s.0);
            if after != Some(t + 1) {
                assert_eq!(c.get(t + 1), None, "round {round}, after sample {k}");
            }
        }
        assert_eq!(c.get(samples[0].0 - 1), None);
        assert_eq!(c.get(t + 1), None);
    }
}

#[test]
fn rules_round_trip_with_and_without_a_fold_start() {
    use crate::Rule;
    let mut s = Series::new();
    s.add(5, 1.0, DuplicatePolicy::Block).unwrap();
    let rule = |dest: &str, open: Option<u64>, from: u64| Rule { dest: dest.as_bytes().into(), agg: 1, bucket_ms: 10, align_ms: 3, open_bucket: open, fold_from_ms: from };
    s.rules = vec![rule("a", None, u64::MAX), rule("b", Some(0), 0), rule("c", Some(0), 4), rule("d", None, 20)];
    let mut bytes = Vec::new();
    s.serialize_into(&mut bytes);
    let back = Series::deserialize(&bytes).unwrap();
    assert_eq!(back.rules, s.rules);
    assert!(back == s);
}
