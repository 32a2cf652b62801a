//! Tests of `Stream` against a plain model (a map of IDs to field/value lists), and of its
//! Redis-compatible node layout.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::stream::{Stream, StreamId, StreamLimits, Trim};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn flat(fields: &Fields) -> Vec<Vec<u8>> {
    fields.iter().flat_map(|(f, v)| [f.clone(), v.clone()]).collect()
}

fn append(s: &mut Stream, id: StreamId, fields: &Fields, limits: &StreamLimits) -> bool {
    let parts = flat(fields);
    let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
    s.append(id, &refs, limits).is_ok()
}

fn entries(s: &Stream, start: StreamId, end: StreamId, rev: bool) -> Vec<(StreamId, Fields)> {
    s.range(start, end, rev).map(|e| (e.id, e.pairs().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())).collect()
}

fn model_range(m: &BTreeMap<StreamId, Fields>, start: StreamId, end: StreamId, rev: bool) -> Vec<(StreamId, Fields)> {
    if start > end {
        return Vec::new();
    }
    let mut v: Vec<(StreamId, Fields)> = m.range(start..=end).map(|(k, f)| (*k, f.clone())).collect();
    if rev {
        v.reverse();
    }
    v
}

fn value(i: u32) -> Vec<u8> {
    match i % 9 {
        0 => b"google".to_vec(),
        1 => b"click".to_vec(),
        2 => (i / 9).to_string().into_bytes(),
        3 => format!("-{}", u64::from(i) * 1000).into_bytes(),
        4 => b"".to_vec(),
        5 => vec![b'x'; 64 + (i as usize % 200)],
        6 => b"007".to_vec(),
        7 => format!("v{}", i % 300).into_bytes(),
        _ => b"9223372036854775807".to_vec(),
    }
}

fn fields_for(shape: u8, i: u32) -> Fields {
    match shape % 4 {
        0 | 1 => vec![(b"channel".to_vec(), value(i)), (b"event".to_vec(), value(i / 3)), (b"n".to_vec(), value(i / 7))],
        2 => vec![(b"a".to_vec(), value(i))],
        _ => (0..(i % 5)).map(|k| (format!("f{k}").into_bytes(), value(i + k))).collect(),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add { ms_step: u8, seq_step: u8, shape: u8, v: u32 },
    Del(u16),
    TrimLen { keep: u16, approx: bool, limit: u16 },
    TrimMin { at: u16, approx: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..4, 0u8..80, any::<u8>(), any::<u32>()).prop_map(|(ms_step, seq_step, shape, v)| Op::Add { ms_step, seq_step, shape, v }),
        2 => any::<u16>().prop_map(Op::Del),
        1 => (any::<u16>(), any::<bool>(), 0u16..300).prop_map(|(keep, approx, limit)| Op::TrimLen { keep, approx, limit }),
        1 => (any::<u16>(), any::<bool>()).prop_map(|(at, approx)| Op::TrimMin { at, approx }),
    ]
}

fn check(s: &Stream, m: &BTreeMap<StreamId, Fields>) {
    assert_eq!(s.len(), m.len() as u64);
    assert_eq!(entries(s, StreamId::MIN, StreamId::MAX, false), model_range(m, StreamId::MIN, StreamId::MAX, false));
    assert_eq!(entries(s, StreamId::MIN, StreamId::MAX, true), model_range(m, StreamId::MIN, StreamId::MAX, true));
    assert_eq!(s.last_valid_id(), m.keys().next_back().copied());
    // Round trip through the byte form, with consumer groups.
    let mut s = s.clone();
    assert!(s.create_group(b"g", StreamId::new(1, 1), 7));
    assert!(s.create_group(b"", StreamId::MIN, crate::INVALID_ENTRIES_READ));
    let mut g = s.take_group(b"g").unwrap();
    let (alice, _) = g.consumer_or_create(b"alice", 5);
    g.create_consumer(b"bob", 6);
    for (i, id) in m.keys().take(5).enumerate() {
        let n = g.assign(*id, &alice, 10 + i as i64);
        n.delivery_count = i as u64;
    }
    s.put_group(b"g", g);
    let s = &s;
    let mut bytes = Vec::new();
    s.serialize_into(&mut bytes);
    let back = Stream::deserialize(&bytes).unwrap();
    assert!(back == *s);
    assert_eq!(back.nodes(), s.nodes());
    assert_eq!(back.group(b"g").unwrap().pel.len(), m.len().min(5));
    assert_eq!(back.group(b"g").unwrap().consumers[&b"alice"[..]].pel.len(), m.len().min(5));
    for cut in [0, bytes.len() / 3, bytes.len().saturating_sub(1)] {
        if cut < bytes.len() {
            assert!(Stream::deserialize(&bytes[..cut]).is_err());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn behaves_like_a_map(ops in proptest::collection::vec(op(), 1..300), small in any::<bool>()) {
        let limits = if small { StreamLimits { node_max_bytes: 300, node_max_entries: 7 } } else { StreamLimits::REDIS_DEFAULT };
        let mut s = Stream::new();
        let mut m: BTreeMap<StreamId, Fields> = BTreeMap::new();
        let mut last = StreamId::new(1_700_000_000_000, 0);
        for op in ops {
            match op {
                Op::Add { ms_step, seq_step, shape, v } => {
                    let id = match ms_step {
                        0 if last.seq < u64::MAX - 100 => StreamId::new(last.ms, last.seq + 1 + seq_step as u64),
                        0 => StreamId::new(last.ms + 1, 0),
                        1 => StreamId::new(last.ms + 1, seq_step as u64),
                        2 => StreamId::new(last.ms + 86_400_000 * seq_step as u64 + 1, 0),
                        _ => StreamId::new(last.ms + 3, u64::MAX - seq_step as u64),
                    };
                    let f = fields_for(shape, v);
                    prop_assert!(append(&mut s, id, &f, &limits));
                    prop_assert!(!append(&mut s, id, &f, &limits), "an ID must grow");
                    m.insert(id, f);
                    last = id;
                }
                Op::Del(i) => {
                    if m.is_empty() { continue; }
                    let id = *m.keys().nth(i as usize % m.len()).unwrap();
                    prop_assert_eq!(s.xdel(&[id, id]), 1);
                    m.remove(&id);
                    prop_assert_eq!(s.xdel(&[id]), 0);
                }
                Op::TrimLen { keep, approx, limit } => {
                    let keep = keep as u64 % (m.len() as u64 + 2);
                    let before = s.len();
                    let n = s.trim(Trim::MaxLen(keep), approx, limit as u64);
                    prop_assert_eq!(before - n, s.len());
                    if !approx && limit == 0 {
                        prop_assert_eq!(s.len(), keep.min(before));
                    }
                    // The oldest go first.
                    for _ in 0..n {
                        let k = *m.keys().next().unwrap();
                        m.remove(&k);
                    }
                }
                Op::TrimMin { at, approx } => {
                    if m.is_empty() { continue; }
                    let min = *m.keys().nth(at as usize % m.len()).unwrap();
                    let n = s.trim(Trim::MinId(min), approx, 0);
                    let gone: Vec<StreamId> = m.keys().take(n as usize).copied().collect();
                    prop_assert!(gone.iter().all(|g| *g < min));
                    for g in gone { m.remove(&g); }
                    if !approx {
                        prop_assert!(m.keys().all(|k| *k >= min));
                    }
                }
            }
            // Ranges with arbitrary bounds.
            let ids: Vec<StreamId> = m.keys().copied().collect();
            if !ids.is_empty() {
                let a = ids[(last.seq as usize) % ids.len()];
                let b = ids[(last.ms as usize / 7) % ids.len()];
                for (x, y) in [(a, b), (b, a), (a, a), (StreamId::new(a.ms, 0), StreamId::new(b.ms, u64::MAX))] {
                    prop_assert_eq!(entries(&s, x, y, false), model_range(&m, x, y, false));
                    prop_assert_eq!(entries(&s, x, y, true), model_range(&m, x, y, true));
                }
                prop_assert!(s.contains(a));
            }
        }
        check(&s, &m);
    }
}

#[test]
fn ids_and_formatting() {
    assert_eq!(StreamId::new(5, u64::MAX).incr(), Some(StreamId::new(6, 0)));
    assert_eq!(StreamId::MAX.incr(), None);
    assert_eq!(StreamId::new(6, 0).decr(), Some(StreamId::new(5, u64::MAX)));
    assert_eq!(StreamId::MIN.decr(), None);
    assert_eq!(StreamId::new(1, 2).to_bytes(), b"1-2");
}

/// Node boundaries measured on Redis 7.0.15 (`XINFO STREAM` radix-tree-keys after the same
/// XADDs): 100 entries per node for small entries, 4096 bytes otherwise.
#[test]
fn nodes_split_where_redis_splits_them() {
    let limits = StreamLimits::REDIS_DEFAULT;
    // 1000 entries `XADD s <i+1>-0 a <i>`: Redis makes 10 nodes.
    let mut s = Stream::new();
    for i in 0..1000u64 {
        let v = i.to_string();
        s.append(StreamId::new(i + 1, 0), &[b"a", v.as_bytes()], &limits).unwrap();
    }
    assert_eq!(s.nodes(), 10);
    // 1000 entries of a 100-byte value: 4096-byte nodes, 36 entries each in Redis.
    let mut s = Stream::new();
    let big = vec![b'v'; 100];
    for i in 0..1000u64 {
        s.append(StreamId::new(i + 1, 0), &[b"field", &big], &limits).unwrap();
    }
    assert_eq!(s.nodes(), 28);
}

#[test]
fn compact_for_small_events() {
    // Events of 3 short fields from small vocabularies: a few bytes each.
    let limits = StreamLimits::REDIS_DEFAULT;
    let mut s = Stream::new();
    let channels = ["google", "facebook", "email", "direct", "tiktok", "bing", "affiliate", "display"];
    let events = ["impression", "click", "visit"];
    let mut ms = 1_700_000_000_000u64;
    let n = 100_000u64;
    for i in 0..n {
        ms += 1 + (i * 7919) % 5000;
        let c = channels[(i * 31 % 8) as usize];
        let e = events[(i * 17 % 3) as usize];
        let camp = format!("c{}", i * 13 % 40);
        s.append(StreamId::new(ms, 0), &[b"channel", c.as_bytes(), b"event", e.as_bytes(), b"campaign", camp.as_bytes()], &limits).unwrap();
    }
    let per_entry = s.heap_bytes() as f64 / n as f64;
    assert!(per_entry < 12.0, "{per_entry} bytes per entry");
}

#[test]
fn auto_id_after_the_last_sequence_moves_to_the_next_millisecond() {
    // Redis's streamIncrID: `ms-(2^64-1)` is followed by `(ms+1)-0`, not by a wrap to `ms-0`
    // (which is smaller, and would make XADD * fail).
    let mut s = Stream::new();
    let top = StreamId::new(2_577_343_934_890, u64::MAX);
    assert!(append(&mut s, top, &vec![(b"f".to_vec(), b"v".to_vec())], &StreamLimits::REDIS_DEFAULT));
    assert_eq!(s.next_auto_id(0), StreamId::new(2_577_343_934_891, 0));
    assert_eq!(s.next_auto_id(2_577_343_934_895), StreamId::new(2_577_343_934_895, 0));
    let mut s = Stream::new();
    assert!(append(&mut s, StreamId::new(5, 7), &vec![(b"f".to_vec(), b"v".to_vec())], &StreamLimits::REDIS_DEFAULT));
    assert_eq!(s.next_auto_id(5), StreamId::new(5, 8));
}
