//! TS.WATERFALL's merge on the connection (`waterfall_reply`) over the shards' parts
//! (`abacus_commands::ts_waterfall`, whose shard side is tested against a model of the
//! keyspace there): parts whose group heads are encoded by their owner shards (or by the
//! connection, when the owner has none of a group's members) give the same bytes as parts
//! that carry every head, and a merge in two halves on two threads the same bytes as in one.
//! The databases go through series created, replaced, deleted and overwritten (stale index
//! entries), so that the parts have groups on one shard, on both, and none.

use abacus_collections::{DuplicatePolicy, Series};
use abacus_commands::ts_filter::{parse_values, Matcher};
use abacus_keyspace::{Db, Value};

use super::*;

fn value(labels: &[(String, String)], samples: &[(u64, f64)]) -> Value {
    let mut s = Series::new();
    s.labels = labels.iter().map(|(l, v)| (l.as_bytes().into(), v.as_bytes().into())).collect();
    for &(t, v) in samples {
        s.add(t, v, DuplicatePolicy::Last).unwrap();
    }
    Value::Series(Box::new(s))
}

fn ranged(sources: &[&str], from: u64, to: u64) -> WfQuery {
    WfQuery {
        filter: vec![Matcher::In(b"instrument".as_slice().into(), parse_values(b"(A,B,C)")), Matcher::In(b"field".as_slice().into(), parse_values(b"(f1,f2)"))],
        label: b"source".as_slice().into(),
        sources: sources.iter().map(|s| s.as_bytes().into()).collect(),
        from,
        to,
        latest: false,
        resp3: false,
        shards: 1,
    }
}

/// A seeded xorshift64 draw below `n`.
fn xorshift(mut rng: u64) -> impl FnMut(u64) -> u64 {
    move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    }
}

#[test]
fn waterfall_merge_gives_the_same_bytes_however_heads_and_halves_are_split() {
    let now = now_ms();
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    let mut dbs = [Db::new(), Db::new()];
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let pick = |n: u64| ["A", "B", "C", "f1", "f2", "s1", "s2", "s3", "other"][n as usize].to_string();
    for step in 0..400 {
        let k = keys[next(keys.len() as u64) as usize].clone();
        let d = next(2) as usize;
        let mut labels = vec![("instrument".to_string(), pick(next(3))), ("field".to_string(), pick(3 + next(2)))];
        match next(10) {
            0..=6 => labels.push(("source".to_string(), pick(5 + next(4)))),
            7 => labels.insert(0, ("extra".to_string(), "y".to_string())),
            _ => {}
        }
        let samples: Vec<(u64, f64)> = {
            let mut m = std::collections::BTreeMap::new();
            for _ in 0..1 + next(6) {
                m.insert(next(45), next(1000) as f64 / 4.0);
            }
            m.into_iter().collect()
        };
        match next(6) {
            // TS.CREATE, or new labels over a series.
            0..=3 => dbs[d].set(k.as_bytes(), value(&labels, &samples), 0, now),
            // DEL.
            4 => drop(dbs[d].remove(k.as_bytes(), now)),
            // A string over it.
            _ => dbs[d].set(k.as_bytes(), Value::str(b"a string"), 0, now),
        }
        for sources in [&["s1", "s2", "s3"][..], &["s3", "s1"][..]] {
            let srcs: Vec<Box<[u8]>> = sources.iter().map(|s| s.as_bytes().into()).collect();
            for (from, to) in [(step as u64 % 45, step as u64 % 45), (0, 40)] {
                for resp3 in [false, true] {
                    let split = WfQuery { resp3, shards: 2, ..ranged(sources, from, to) };
                    let parts = [waterfall_shard(&mut dbs[0], &split, 0, now), waterfall_shard(&mut dbs[1], &split, 1, now)];
                    let whole = WfQuery { resp3, ..ranged(sources, from, to) };
                    let all = [waterfall_shard(&mut dbs[0], &whole, 0, now), waterfall_shard(&mut dbs[1], &whole, 0, now)];
                    for with_source in [false, true] {
                        let reply = waterfall_reply(&parts, &srcs, with_source, resp3);
                        assert_eq!(
                            reply,
                            waterfall_reply(&all, &srcs, with_source, resp3),
                            "step {step}, {sources:?}, {from}..={to}, resp3 {resp3}, withsource {with_source}"
                        );
                        // Merged in two halves on two threads: the same bytes.
                        assert_eq!(
                            reply,
                            waterfall_reply_from(&parts, &srcs, with_source, resp3, 0),
                            "step {step}, {sources:?}, {from}..={to}, resp3 {resp3}, withsource {with_source}, split"
                        );
                    }
                }
            }
        }
    }
}
