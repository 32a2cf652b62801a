//! The waterfall's shard side and the label index against a model of the keyspace, through
//! every way a series key goes, moves or changes at the keyspace's level (DEL/UNLINK,
//! RENAME, COPY, MOVE, SWAPDB, FLUSHDB, a value over it, RESTORE, expiry, eviction, new
//! labels). The index keeps each series' group and source value by id and learns only
//! lazily that a key went (see `SeriesIndex`), so each step checks `waterfall_shard` and the
//! FILTER's matches against the model, in both databases. (The merge of the shards' parts
//! is the server's, and is tested there: `cmd/ts_multi_tests.rs`.)

use std::collections::BTreeMap;

use abacus_collections::{Aggregator, DuplicatePolicy, Rule, Series};
use abacus_keyspace::{Db, EvictionPolicy, Value};

use super::*;
use crate::ts_filter::{each_match, parse_values, Matcher};

/// The wall clock in milliseconds, as the server's shards read it.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

type Model = BTreeMap<String, (Vec<(String, String)>, Vec<(u64, f64)>)>;

/// Whether any matching series has the source label, and group name -> points (t, v, rank,
/// the member's key: the connection's merge across shards breaks rank ties by it).
type Answer = (bool, BTreeMap<String, Vec<(u64, f64, u32, String)>>);

/// A group's members: (rank, key, samples).
type Members<'a> = Vec<(u32, &'a String, &'a Vec<(u64, f64)>)>;

fn value(labels: &[(String, String)], samples: &[(u64, f64)]) -> Value {
    let mut s = Series::new();
    s.labels = labels.iter().map(|(l, v)| (l.as_bytes().into(), v.as_bytes().into())).collect();
    for &(t, v) in samples {
        s.add(t, v, DuplicatePolicy::Last).unwrap();
    }
    Value::Series(Box::new(s))
}

fn query(sources: &[&str]) -> WfQuery {
    ranged(sources, 0, 40)
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

/// Group name -> points from a shard's part.
fn answer(db: &mut Db, q: &WfQuery) -> Answer {
    answer_by(db, q, |db, q, now| waterfall_shard(db, q, 0, now))
}

/// [`answer`] through one of the shard's paths.
fn answer_by(db: &mut Db, q: &WfQuery, path: fn(&mut Db, &WfQuery, u64) -> WfPart) -> Answer {
    let part = path(db, q, now_ms());
    let mut out = BTreeMap::new();
    let mut names = Vec::new();
    for (g, grp) in part.groups.iter().enumerate() {
        let name = String::from_utf8(part.id(g)[..grp.name_len as usize].to_vec()).unwrap();
        let pts = part.points[grp.points.0 as usize..grp.points.1 as usize].iter().map(|p| (p.t, p.v, p.rank, String::from_utf8(part.key(p.member).to_vec()).unwrap())).collect();
        names.push(part.id(g).to_vec());
        out.insert(name, pts);
    }
    assert!(names.windows(2).all(|w| w[0] < w[1]), "groups in identity order");
    (part.labelled, out)
}

/// The same from the model, by the waterfall's definition.
fn reference(model: &Model, q: &WfQuery) -> Answer {
    let mut labelled = false;
    let mut groups: BTreeMap<String, Members<'_>> = BTreeMap::new();
    for (key, (labels, samples)) in model {
        let Some(src) = labels.iter().find(|p| p.0 == "source") else { continue };
        labelled = true;
        let Some(rank) = q.sources.iter().position(|s| **s == *src.1.as_bytes()) else { continue };
        let mut rest: Vec<&(String, String)> = labels.iter().filter(|p| p.0 != "source").collect();
        rest.sort();
        let name = rest.iter().map(|(l, v)| format!("{l}={v}")).collect::<Vec<_>>().join(",");
        groups.entry(name).or_default().push((rank as u32, key, samples));
    }
    let out = groups
        .into_iter()
        .map(|(name, mut members)| {
            members.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            let mut pts: BTreeMap<u64, (f64, u32, String)> = BTreeMap::new();
            for (rank, key, samples) in members {
                for &(t, v) in samples.iter().filter(|s| s.0 >= q.from && s.0 <= q.to) {
                    pts.entry(t).or_insert((v, rank, key.clone()));
                }
            }
            (name, pts.into_iter().map(|(t, (v, r, k))| (t, v, r, k)).collect())
        })
        .collect();
    (labelled, out)
}

fn check(dbs: &mut [Db; 2], models: &[Model; 2], step: usize) {
    for d in 0..2 {
        for sources in [&["s1", "s2", "s3"][..], &["s3", "s1"][..]] {
            // One timestamp (the early-stopping walk), at times with and without samples and
            // past every sample; the general path must agree with it and the reference. The
            // walk goes first, while the index still holds this step's stale ids (a query
            // forgets those it looks up).
            for t in [step as u64 % 45, (step as u64 * 7 + 3) % 45, 44, 50] {
                let q = ranged(sources, t, t);
                let want = reference(&models[d], &q);
                assert_eq!(answer_by(&mut dbs[d], &q, waterfall_point), want, "step {step}, db {d}, {sources:?}, point {t}");
                assert_eq!(answer_by(&mut dbs[d], &q, waterfall_range), want, "step {step}, db {d}, {sources:?}, range {t}..={t}");
            }
            let q = query(sources);
            assert_eq!(answer(&mut dbs[d], &q), reference(&models[d], &q), "step {step}, db {d}, {sources:?}");
            let mut keys: Vec<String> = each_match(&mut dbs[d], &q.filter, now_ms(), |_, k, _| Some(String::from_utf8(k.to_vec()).unwrap()));
            keys.sort();
            assert_eq!(keys, models[d].keys().cloned().collect::<Vec<_>>(), "step {step}, db {d}: FILTER's matches");
        }
    }
}

/// A seeded xorshift64 draw below `n`: the randomized tests' generator.
fn xorshift(mut rng: u64) -> impl FnMut(u64) -> u64 {
    move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    }
}

#[test]
fn waterfall_and_filter_follow_every_removal_and_rename_path() {
    let now = now_ms();
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    let mut dbs = [Db::new(), Db::new()];
    let mut models: [Model; 2] = [Model::new(), Model::new()];
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let pick = |n: u64| ["A", "B", "C", "f1", "f2", "s1", "s2", "s3", "other"][n as usize].to_string();
    for step in 0..600 {
        let k = keys[next(keys.len() as u64) as usize].clone();
        let k2 = keys[next(keys.len() as u64) as usize].clone();
        let d = next(2) as usize;
        let mut labels = vec![("instrument".to_string(), pick(next(3))), ("field".to_string(), pick(3 + next(2)))];
        match next(10) {
            0..=6 => labels.push(("source".to_string(), pick(5 + next(4)))),
            7 => labels.insert(0, ("extra".to_string(), "y".to_string())),
            _ => {}
        }
        let samples: Vec<(u64, f64)> = {
            let mut m = BTreeMap::new();
            for _ in 0..1 + next(6) {
                m.insert(next(45), next(1000) as f64 / 4.0);
            }
            m.into_iter().collect()
        };
        let has = models[d].contains_key(&k);
        match next(12) {
            // TS.CREATE (or RESTORE, loading: a series value stored under a key).
            0 | 1 => {
                dbs[d].set(k.as_bytes(), value(&labels, &samples), 0, now);
                models[d].insert(k.clone(), (labels, samples));
            }
            // TS.ALTER's new labels (the value replaced in place, registered again).
            2 if has => {
                let s = models[d][&k].1.clone();
                dbs[d].set(k.as_bytes(), value(&labels, &s), 0, now);
                models[d].insert(k.clone(), (labels, s));
            }
            // DEL / UNLINK.
            3 => {
                dbs[d].remove(k.as_bytes(), now);
                models[d].remove(&k);
            }
            // RENAME (the entry out and in again under the new name).
            4 if has => {
                let e = dbs[d].remove_entry(k.as_bytes()).unwrap();
                dbs[d].insert_entry(k2.as_bytes(), e);
                let m = models[d].remove(&k).unwrap();
                models[d].insert(k2.clone(), m);
            }
            // COPY within or across databases (REPLACE).
            5 if has => {
                let to = next(2) as usize;
                let e = dbs[d].remove_entry(k.as_bytes()).unwrap();
                dbs[d].insert_entry(k.as_bytes(), e.clone());
                let (a, b) = dbs.split_at_mut(1);
                let dst = if to == 0 { &mut a[0] } else { &mut b[0] };
                dst.insert_entry(k2.as_bytes(), e);
                let m = models[d][&k].clone();
                models[to].insert(k2.clone(), m);
            }
            // MOVE.
            6 if has && !models[1 - d].contains_key(&k) => {
                let e = dbs[d].remove_entry(k.as_bytes()).unwrap();
                dbs[1 - d].insert_entry(k.as_bytes(), e);
                let m = models[d].remove(&k).unwrap();
                models[1 - d].insert(k.clone(), m);
            }
            // SWAPDB.
            7 => {
                let (a, b) = dbs.split_at_mut(1);
                a[0].swap_contents(&mut b[0]);
                models.swap(0, 1);
            }
            // A string over it.
            8 => {
                dbs[d].set(k.as_bytes(), Value::str(b"a string"), 0, now);
                models[d].remove(&k);
            }
            // Expiry (a deadline already past: the next read finds it gone).
            9 if has => {
                dbs[d].set_expire(k.as_bytes(), 1);
                models[d].remove(&k);
            }
            // Eviction.
            10 => {
                if let Some((key, _)) = dbs[d].evict_one(EvictionPolicy::AllKeysRandom, 3) {
                    models[d].remove(std::str::from_utf8(&key).unwrap());
                }
            }
            // FLUSHDB (rarely).
            11 if next(8) == 0 => {
                drop(dbs[d].take_all());
                models[d].clear();
            }
            _ => continue,
        }
        check(&mut dbs, &models, step);
    }
}

/// LATEST at one timestamp: compaction destinations whose source still holds an open bucket
/// (reported at the bucket's start when no stored sample is there), beside plain members,
/// with gaps, duplicate (group, source) members and stale ids; the early-stopping walk must
/// give the general path's answer, members' keys included.
#[test]
fn waterfall_point_matches_the_general_path_with_latest() {
    let now = now_ms();
    let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
    let pick = |n: u64| ["A", "B", "C", "f1", "f2", "s1", "s2", "s3"][n as usize].to_string();
    let mut compared = [0usize; 2];
    for round in 0..40 {
        let mut db = Db::new();
        for k in 0..12 {
            let key = format!("d{k}");
            let (i, f, src) = (next(3), next(2), next(3));
            let labels = vec![("instrument".to_string(), pick(i)), ("field".to_string(), pick(3 + f)), ("source".to_string(), pick(5 + src))];
            // Closed buckets of 10 ms, with gaps.
            let mut stored: Vec<(u64, f64)> = Vec::new();
            for b in 0..6 {
                if next(3) > 0 {
                    stored.push((b * 10, next(100) as f64));
                }
            }
            let Value::Series(mut dest) = value(&labels, &stored) else { unreachable!() };
            if next(3) > 0 {
                // A raw source with a rule to this key and an open bucket (at times also a
                // stored sample at the open bucket's start, which must win over LATEST's).
                let raw = format!("raw{k}");
                let open = 10 * next(7);
                let Value::Series(mut src) = value(&[], &[(open + next(10), 1.5), (open + 9, 2.0)]) else { unreachable!() };
                src.rules.push(Rule { dest: key.as_bytes().into(), agg: Aggregator::Sum.code(), bucket_ms: 10, align_ms: 0, open_bucket: Some(open), fold_from_ms: open });
                db.set(raw.as_bytes(), Value::Series(src), 0, now);
                dest.src_key = Some(raw.as_bytes().into());
            }
            db.set(key.as_bytes(), Value::Series(dest), 0, now);
        }
        // Stale ids: a deleted member and one overwritten by a string.
        db.remove(format!("d{}", next(12)).as_bytes(), now);
        db.set(format!("d{}", next(12)).as_bytes(), Value::str(b"x"), 0, now);
        for t in [0, 10, 20, 30, 40, 50, 60, 5, 70] {
            for latest in [false, true] {
                for sources in [&["s1", "s2", "s3"][..], &["s3", "s1"][..], &["s2"][..]] {
                    let mut q = ranged(sources, t, t);
                    q.latest = latest;
                    // Each path goes first in every other round (the first query forgets the
                    // stale ids it looks up).
                    let (got, want) = if round % 2 == 0 {
                        let got = answer_by(&mut db, &q, waterfall_point);
                        (got, answer_by(&mut db, &q, waterfall_range))
                    } else {
                        let want = answer_by(&mut db, &q, waterfall_range);
                        (answer_by(&mut db, &q, waterfall_point), want)
                    };
                    assert_eq!(got, want, "round {round}, t {t}, latest {latest}, {sources:?}");
                    compared[latest as usize] += want.1.values().filter(|p| !p.is_empty()).count();
                }
            }
        }
    }
    // Both kinds of answer were exercised: LATEST found points that stored samples do not.
    assert!(compared[1] > compared[0], "{compared:?}");
}

#[test]
fn parts_cross_the_wire_checked() {
    let part = WfPart {
        labelled: true,
        ids: b"g1\0g2\0".to_vec(),
        groups: vec![WfGroup { id: (0, 3), name_len: 2, points: (0, 2) }, WfGroup { id: (3, 6), name_len: 2, points: (2, 3) }],
        points: vec![WfPoint { t: 1, v: 0.5, rank: 0, member: 0 }, WfPoint { t: 2, v: -1e300, rank: 1, member: 1 }, WfPoint { t: 1, v: 3.0, rank: 1, member: 1 }],
        keys: b"k1k2".to_vec(),
        members: vec![(0, 2), (2, 4)],
        enc: b"head".to_vec(),
        heads: vec![(0, 4), (4, 4)],
    };
    let wire = part.to_wire();
    let back = WfPart::from_wire(&wire, 2).expect("decodes");
    assert_eq!(back.to_wire(), wire);
    assert_eq!(back.id(1), b"g2\0");
    assert_eq!(back.points[1].v, -1e300);
    // A rank beyond the sources, a cut or padded buffer: refused, never a panic later.
    assert!(WfPart::from_wire(&wire, 1).is_none());
    for cut in 0..wire.len() {
        assert!(WfPart::from_wire(&wire[..cut], 2).is_none(), "cut at {cut}");
    }
    let mut long = wire.clone();
    long.push(0);
    assert!(WfPart::from_wire(&long, 2).is_none());
    for at in 0..wire.len() {
        let mut bad = wire.clone();
        bad[at] ^= 0xff;
        if let Some(p) = WfPart::from_wire(&bad, 2) {
            // Whatever decodes is within its own bounds.
            for g in 0..p.groups.len() {
                let _ = p.id(g);
            }
        }
    }
}
