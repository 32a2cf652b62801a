//! Property tests for `List` against a `VecDeque<Vec<u8>>` model: random sequences of every
//! operation, with node limits small enough (a few entries or bytes) that pushes, inserts
//! and LSETs cross node boundaries and split nodes, and elements drawn to hit every entry
//! encoding (small and large integers of both signs, non-canonical integer text such as
//! "007" and "-0", short and long strings). After each step the list must read as the
//! model forwards, backwards and by index, keep its node invariants, and round-trip through
//! its byte form.

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::list::{check_invariants, encoded_len, node_count};
use crate::{List, ListLimits};

type Bytes = Vec<u8>;

fn element() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        6 => (0i64..4).prop_map(|i| i.to_string().into_bytes()),
        4 => any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        2 => (-70000i64..70000).prop_map(|i| i.to_string().into_bytes()),
        2 => prop::sample::select(vec![
            i64::MIN, i64::MAX, 127, 128, 16383, 16384, (1 << 21) - 1, 1 << 21, (1 << 28) - 1,
            1 << 28, (1 << 32) - 1, 1 << 32, -1, -256, -257, -65536, -65537, -(1 << 32), -(1 << 32) - 1,
        ]).prop_map(|i| i.to_string().into_bytes()),
        2 => prop::sample::select(vec!["007", "-0", "+1", " 1", "", "1.0", "9223372036854775808", "a"])
            .prop_map(|s| s.as_bytes().to_vec()),
        3 => prop::collection::vec(any::<u8>(), 0..20),
        1 => prop::collection::vec(any::<u8>(), 250..300),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    PushBack(Bytes),
    PushFront(Bytes),
    PopBack,
    PopFront,
    Get(usize),
    Set(usize, Bytes),
    Insert(usize, Bytes),
    Remove(Bytes, i64),
    Trim(usize, usize),
    Position(Bytes),
    IterFrom(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => element().prop_map(Op::PushBack),
        6 => element().prop_map(Op::PushFront),
        4 => Just(Op::PopBack),
        4 => Just(Op::PopFront),
        2 => (0usize..60).prop_map(Op::Get),
        2 => (0usize..60, element()).prop_map(|(i, v)| Op::Set(i, v)),
        3 => (0usize..60, element()).prop_map(|(i, v)| Op::Insert(i, v)),
        2 => (element(), -3i64..4).prop_map(|(v, c)| Op::Remove(v, c)),
        1 => (0usize..40, 0usize..80).prop_map(|(a, b)| Op::Trim(a, b)),
        1 => element().prop_map(Op::Position),
        1 => (0usize..60).prop_map(Op::IterFrom),
    ]
}

fn limits() -> impl Strategy<Value = ListLimits> {
    prop_oneof![
        Just(ListLimits::REDIS_DEFAULT),
        (1usize..5).prop_map(|n| ListLimits { max_entries: n, max_bytes: 8192 }),
        (1usize..40).prop_map(|b| ListLimits { max_entries: usize::MAX, max_bytes: b }),
    ]
}

fn check(list: &List, model: &VecDeque<Bytes>, limits: &ListLimits) -> Result<(), TestCaseError> {
    check_invariants(list, limits);
    prop_assert_eq!(list.len(), model.len());
    let forward: Vec<Bytes> = list.iter().map(|i| i.to_vec()).collect();
    prop_assert_eq!(&forward, &model.iter().cloned().collect::<Vec<_>>());
    let backward: Vec<Bytes> = list.iter_rev().map(|i| i.to_vec()).collect();
    prop_assert_eq!(backward, model.iter().rev().cloned().collect::<Vec<_>>());
    let mut bytes = Vec::new();
    list.serialize_into(&mut bytes);
    let back = List::deserialize(&bytes, limits).expect("round trip");
    prop_assert_eq!(back.iter().map(|i| i.to_vec()).collect::<Vec<_>>(), forward);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn behaves_like_a_deque(limits in limits(), ops in prop::collection::vec(op(), 1..120)) {
        let mut list = List::new();
        let mut model: VecDeque<Bytes> = VecDeque::new();
        for op in ops {
            match op {
                Op::PushBack(v) => { list.push_back(&v, &limits); model.push_back(v); }
                Op::PushFront(v) => { list.push_front(&v, &limits); model.push_front(v); }
                Op::PopBack => prop_assert_eq!(list.pop_back(), model.pop_back()),
                Op::PopFront => prop_assert_eq!(list.pop_front(), model.pop_front()),
                Op::Get(i) => prop_assert_eq!(list.get(i).map(|x| x.to_vec()), model.get(i).cloned()),
                Op::Set(i, v) => {
                    let want = i < model.len();
                    if want { model[i] = v.clone(); }
                    prop_assert_eq!(list.set(i, &v, &limits), want);
                }
                Op::Insert(i, v) => {
                    let i = i.min(model.len());
                    list.insert(i, &v, &limits);
                    model.insert(i, v);
                }
                Op::Remove(v, count) => {
                    let hits: Vec<usize> = (0..model.len()).filter(|&i| model[i] == v).collect();
                    let gone: Vec<usize> = match count {
                        0 => hits,
                        c if c > 0 => hits.into_iter().take(c as usize).collect(),
                        c => { let n = hits.len().saturating_sub(c.unsigned_abs() as usize); hits[n..].to_vec() }
                    };
                    let mut i = 0;
                    model.retain(|_| { i += 1; !gone.contains(&(i - 1)) });
                    prop_assert_eq!(list.remove(&v, count), gone.len());
                }
                Op::Trim(start, end) => {
                    list.retain_range(start, end);
                    let end = end.min(model.len());
                    model = if start < end { model.range(start..end).cloned().collect() } else { VecDeque::new() };
                }
                Op::Position(v) => prop_assert_eq!(list.position(&v), model.iter().position(|m| *m == v)),
                Op::IterFrom(i) => {
                    let got: Vec<Bytes> = list.iter_from(i).map(|x| x.to_vec()).collect();
                    prop_assert_eq!(got, model.iter().skip(i).cloned().collect::<Vec<_>>());
                    prop_assert_eq!(list.iter_from(i).len(), model.len().saturating_sub(i));
                }
            }
            check(&list, &model, &limits)?;
        }
    }

    /// Truncated and corrupted byte forms are errors (or decode to some list), never panics.
    #[test]
    fn decoding_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = List::deserialize(&bytes, &ListLimits::REDIS_DEFAULT);
    }
}

#[test]
fn small_integers_pack_into_three_bytes_or_fewer() {
    assert_eq!(encoded_len(b"0"), 1);
    assert_eq!(encoded_len(b"127"), 1);
    assert_eq!(encoded_len(b"16383"), 2);
    assert_eq!(encoded_len(b"999999"), 3);
    assert_eq!(encoded_len(b"007"), 5, "non-canonical text is a string");
    let limits = ListLimits::REDIS_DEFAULT;
    let mut list = List::new();
    for i in 0..1_000_000 {
        list.push_back(i.to_string().as_bytes(), &limits);
    }
    let per_element = list.heap_bytes() as f64 / 1e6;
    assert!(per_element < 3.2, "{per_element} bytes per element");
    assert!(node_count(&list) < 400);
}

#[test]
fn truncations_of_a_byte_form_are_errors() {
    let limits = ListLimits::REDIS_DEFAULT;
    let mut list = List::new();
    for v in ["1", "-5", "x", "007", &"y".repeat(300), &i64::MIN.to_string()] {
        list.push_back(v.as_bytes(), &limits);
    }
    let mut out = Vec::new();
    list.serialize_into(&mut out);
    for cut in 0..out.len() {
        assert!(List::deserialize(&out[..cut], &limits).is_err(), "cut at {cut}");
    }
    assert!(List::deserialize(&[0, 0, 0, 0, 0, 0, 0, 0, 0xFF], &limits).is_err());
}

#[test]
fn repeated_tail_pops_keep_the_offset_cache_right() {
    let limits = ListLimits::REDIS_DEFAULT;
    let mut list = List::new();
    for i in 0..5000 {
        list.push_back(i.to_string().as_bytes(), &limits);
    }
    for i in (2500..5000).rev() {
        assert_eq!(list.pop_back(), Some(i.to_string().into_bytes()));
        if i % 7 == 0 {
            list.push_back(b"x", &limits);
            assert_eq!(list.pop_back(), Some(b"x".to_vec()));
        }
    }
    check_invariants(&list, &limits);
    assert_eq!(list.len(), 2500);
}
