//! Property tests for `IdSet` against a `BTreeSet<Vec<u8>>` model.
//!
//! Members mix canonical integers (small ones that collide often, spread ones
//! that land in different Roaring containers and 32-bit buckets, i64::MIN/MAX),
//! non-canonical integers ("01", "+1", "-0", " 1") and arbitrary bytes
//! (including > 64-byte ones), with a per-case "noise" weight so some cases
//! stay bitmaps throughout and others convert at a random point. The model
//! also predicts the exact encoding, so every conversion rule is checked.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;
use proptest::strategy::Union;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::{parse_canonical_i64, EncodingLimits, IdSet};

const NON_CANONICAL: &[&str] = &[
    "01",
    "+1",
    "-0",
    " 1",
    "1 ",
    "00",
    "-01",
    "",
    "-",
    "9223372036854775808",
    "1e3",
];

fn int_bytes(value: i64) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// Members; `noise` (0..=3) weighs non-integers (0: none at all).
pub(crate) fn member(noise: u32) -> BoxedStrategy<Vec<u8>> {
    let mut arms: Vec<(u32, BoxedStrategy<Vec<u8>>)> = vec![
        (12, (-40i64..200).prop_map(int_bytes).boxed()),
        (
            3,
            (0i64..6, 0i64..40)
                .prop_map(|(chunk, low)| int_bytes(chunk * 70_000 + low))
                .boxed(),
        ),
        (2, any::<i64>().prop_map(int_bytes).boxed()),
        (
            1,
            prop::sample::select(vec![
                i64::MIN,
                i64::MAX,
                0,
                -1,
                1 << 32,
                -(1 << 32),
                (1 << 32) - 1,
            ])
            .prop_map(int_bytes)
            .boxed(),
        ),
    ];
    if noise > 0 {
        arms.push((
            noise,
            prop::sample::select(NON_CANONICAL)
                .prop_map(|s| s.as_bytes().to_vec())
                .boxed(),
        ));
        arms.push((noise, prop::collection::vec(any::<u8>(), 0..6).boxed()));
        arms.push((1, prop::collection::vec(b'a'..=b'c', 60..70).boxed()));
    }
    Union::new_weighted(arms).boxed()
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>),
    InsertMany(Vec<Vec<u8>>),
    Remove(Vec<u8>),
    Contains(Vec<u8>),
    Pop,
    PopMany(usize),
    RandomDistinct(usize),
    RandomWithRepeats(usize),
}

fn op(noise: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => member(noise).prop_map(Op::Insert),
        1 => prop::collection::vec(member(noise), 50..200).prop_map(Op::InsertMany),
        3 => member(noise).prop_map(Op::Remove),
        2 => member(noise).prop_map(Op::Contains),
        1 => Just(Op::Pop),
        1 => (0usize..20).prop_map(Op::PopMany),
        1 => (0usize..300).prop_map(Op::RandomDistinct),
        1 => (0usize..50).prop_map(Op::RandomWithRepeats),
    ]
}

/// The reference: members plus the encoding Redis's rules predict.
#[derive(Default)]
struct Model {
    members: BTreeSet<Vec<u8>>,
    encoding: &'static str,
}

impl Model {
    fn insert(&mut self, member: &[u8]) -> bool {
        if self.members.contains(member) {
            return false;
        }
        let fits = self.members.len() < 128 && member.len() <= 64;
        self.encoding = match self.encoding {
            "bitmap" if parse_canonical_i64(member).is_some() => "bitmap",
            "bitmap" | "listpack" if fits => "listpack",
            _ => "hashtable",
        };
        self.members.insert(member.to_vec())
    }
}

/// The encoding any algebra result must have: decided by its members alone.
fn expected_result_encoding(members: &BTreeSet<Vec<u8>>) -> &'static str {
    if members.iter().all(|m| parse_canonical_i64(m).is_some()) {
        "bitmap"
    } else if members.len() <= 128 && members.iter().all(|m| m.len() <= 64) {
        "listpack"
    } else {
        "hashtable"
    }
}

pub(crate) fn contents(set: &IdSet) -> BTreeSet<Vec<u8>> {
    let members: Vec<Vec<u8>> = set.iter().map(|m| m.to_vec()).collect();
    let unique: BTreeSet<Vec<u8>> = members.iter().cloned().collect();
    assert_eq!(unique.len(), members.len(), "iter yielded a duplicate");
    assert_eq!(unique.len(), set.len());
    unique
}

/// Full SSCAN with `count`; asserts every member comes back exactly once.
pub(crate) fn full_scan(set: &IdSet, count: usize) -> BTreeSet<Vec<u8>> {
    let (mut cursor, mut seen) = (0, Vec::new());
    for _ in 0..100_000 {
        let (next, members) = set.scan(cursor, count);
        seen.extend(members.iter().map(|m| m.to_vec()));
        cursor = next;
        if cursor == 0 {
            let unique: BTreeSet<Vec<u8>> = seen.iter().cloned().collect();
            assert_eq!(unique.len(), seen.len(), "scan returned a member twice");
            return unique;
        }
    }
    panic!("scan did not terminate");
}

fn build(members: &[Vec<u8>], removals: &[Vec<u8>]) -> (IdSet, Model) {
    let (mut set, mut model) = (
        IdSet::new(),
        Model {
            encoding: "bitmap",
            ..Model::default()
        },
    );
    for member in members {
        assert_eq!(set.insert(member), model.insert(member));
    }
    for member in removals {
        assert_eq!(set.remove(member), model.members.remove(member));
    }
    (set, model)
}

fn set_case() -> impl Strategy<Value = (Vec<Vec<u8>>, Vec<Vec<u8>>)> {
    (0u32..4, 0usize..300).prop_flat_map(|(noise, size)| {
        (
            prop::collection::vec(member(noise), size),
            prop::collection::vec(member(noise), 0..20),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn operations_match_model((ops, seed) in (0u32..4).prop_flat_map(|noise| prop::collection::vec(op(noise), 0..120)).prop_flat_map(|ops| (Just(ops), any::<u64>()))) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut set, mut model) = (IdSet::new(), Model { encoding: "bitmap", ..Model::default() });
        for op in ops {
            match op {
                Op::Insert(m) => prop_assert_eq!(set.insert(&m), model.insert(&m)),
                Op::InsertMany(ms) => for m in ms {
                    prop_assert_eq!(set.insert(&m), model.insert(&m));
                    prop_assert_eq!(set.encoding(), model.encoding);
                },
                Op::Remove(m) => prop_assert_eq!(set.remove(&m), model.members.remove(&m)),
                Op::Contains(m) => prop_assert_eq!(set.contains(&m), model.members.contains(&m)),
                Op::Pop => match set.pop_random(&mut rng) {
                    Some(m) => prop_assert!(model.members.remove(&m)),
                    None => prop_assert!(model.members.is_empty()),
                },
                Op::PopMany(k) => {
                    let popped = set.pop_random_many(k, &mut rng);
                    prop_assert_eq!(popped.len(), k.min(model.members.len()));
                    for m in popped { prop_assert!(model.members.remove(&m), "popped twice or unknown"); }
                }
                Op::RandomDistinct(k) => {
                    let picked: Vec<Vec<u8>> = set.random_members_distinct(k, &mut rng).iter().map(|m| m.to_vec()).collect();
                    prop_assert_eq!(picked.len(), k.min(model.members.len()));
                    prop_assert_eq!(picked.iter().collect::<HashSet<_>>().len(), picked.len());
                    prop_assert!(picked.iter().all(|m| model.members.contains(m)));
                }
                Op::RandomWithRepeats(k) => {
                    let picked = set.random_members_with_repeats(k, &mut rng);
                    prop_assert_eq!(picked.len(), if model.members.is_empty() { 0 } else { k });
                    prop_assert!(picked.iter().all(|m| model.members.contains(&m.to_vec())));
                }
            }
            prop_assert_eq!(set.len(), model.members.len());
            prop_assert_eq!(set.encoding(), model.encoding);
        }
        prop_assert_eq!(contents(&set), model.members.clone());
        prop_assert_eq!(full_scan(&set, 1 + (seed % 17) as usize), model.members);
        prop_assert!(set.is_empty() || set.heap_bytes() >= set.len(), "heap estimate below one byte per member");
    }

    #[test]
    fn algebra_matches_model(cases in prop::collection::vec(set_case(), 1..5), limit in prop_oneof![Just(0usize), 1usize..5, 5usize..400]) {
        let built: Vec<(IdSet, Model)> = cases.iter().map(|(members, removals)| build(members, removals)).collect();
        let sets: Vec<&IdSet> = built.iter().map(|(set, _)| set).collect();
        let models: Vec<&BTreeSet<Vec<u8>>> = built.iter().map(|(_, model)| &model.members).collect();

        let inter = models[1..].iter().fold(models[0].clone(), |acc, m| acc.intersection(m).cloned().collect());
        let union = models.iter().fold(BTreeSet::new(), |acc, m| acc.union(m).cloned().collect());
        let diff = models[1..].iter().fold(models[0].clone(), |acc, m| acc.difference(m).cloned().collect());

        let got = IdSet::intersection(&sets);
        prop_assert_eq!(got.encoding(), expected_result_encoding(&inter));
        prop_assert_eq!(contents(&got), inter.clone());
        let want_card = if limit == 0 { inter.len() } else { inter.len().min(limit) };
        prop_assert_eq!(IdSet::intersection_card(&sets, limit), want_card);

        let got = IdSet::union(&sets);
        prop_assert_eq!(got.encoding(), expected_result_encoding(&union));
        prop_assert_eq!(contents(&got), union);

        let got = IdSet::difference(sets[0], &sets[1..]);
        prop_assert_eq!(got.encoding(), expected_result_encoding(&diff));
        prop_assert_eq!(contents(&got), diff);
    }

    /// Members present for a whole scan come back at least once even while
    /// other members are added and removed between steps (and the encoding
    /// converts mid-scan).
    #[test]
    fn scan_survives_concurrent_changes((members, churn) in set_case().prop_flat_map(|(m, _)| (Just(m), prop::collection::vec(member(2), 0..400))), count in 1usize..30) {
        let mut set = IdSet::new();
        let (stable, volatile) = members.split_at(members.len() / 2);
        for m in members.iter() { set.insert(m); }
        let stable: BTreeSet<Vec<u8>> = stable.iter().filter(|m| !volatile.contains(m)).cloned().collect();
        let (mut cursor, mut seen, mut churn) = (0, BTreeSet::new(), churn.into_iter());
        for step in 0.. {
            prop_assert!(step < 100_000, "scan did not terminate");
            let (next, page) = set.scan(cursor, count);
            seen.extend(page.iter().map(|m| m.to_vec()));
            cursor = next;
            if cursor == 0 { break; }
            for m in volatile.iter().skip(step % 3).step_by(3).take(2) { set.remove(m); }
            for m in churn.by_ref().take(3) { if !stable.contains(&m) { set.insert(&m); } }
        }
        prop_assert!(stable.is_subset(&seen), "missed {:?}", stable.difference(&seen).collect::<Vec<_>>());
    }

    /// A bulk insert (SADD of many members) builds exactly the set, encoding
    /// and member order that inserting one by one does, and counts new ones.
    #[test]
    fn bulk_insert_matches_one_by_one(batches in (0u32..4).prop_flat_map(|noise| prop::collection::vec(prop::collection::vec(member(noise), 0..40), 1..6))) {
        let limits = EncodingLimits { max_listpack_entries: 16, max_listpack_value_bytes: 64 };
        let (mut bulk, mut single) = (IdSet::new(), IdSet::new());
        for batch in &batches {
            let added = batch.iter().filter(|m| single.insert_with_limits(m, &limits)).count();
            prop_assert_eq!(bulk.insert_many_with_limits(batch, &limits), added);
            prop_assert_eq!(bulk.encoding(), single.encoding());
            prop_assert_eq!(bulk.iter().collect::<Vec<_>>(), single.iter().collect::<Vec<_>>());
        }
    }
}

#[test]
fn thresholds_are_parameters() {
    let limits = EncodingLimits {
        max_listpack_entries: 2,
        max_listpack_value_bytes: 3,
    };
    let mut set = IdSet::new();
    set.insert_with_limits(b"1", &limits);
    set.insert_with_limits(b"abc", &limits);
    assert_eq!(set.encoding(), "listpack");
    set.insert_with_limits(b"x", &limits);
    assert_eq!(set.encoding(), "hashtable");
    let mut set = IdSet::new();
    set.insert_with_limits(b"abcd", &limits);
    assert_eq!(set.encoding(), "hashtable");
}

#[test]
fn bitmap_members_iterate_in_signed_order_and_keep_their_bytes() {
    let mut set = IdSet::new();
    for m in [
        "5",
        "-3",
        "9223372036854775807",
        "-9223372036854775808",
        "0",
    ] {
        set.insert(m.as_bytes());
    }
    assert_eq!(set.encoding(), "bitmap");
    let members: Vec<String> = set
        .iter()
        .map(|m| String::from_utf8(m.to_vec()).unwrap())
        .collect();
    assert_eq!(
        members,
        [
            "-9223372036854775808",
            "-3",
            "0",
            "5",
            "9223372036854775807"
        ]
    );
    assert!(!set.contains(b"05") && !set.contains(b"+5") && set.contains(b"5"));
    assert_eq!(set.iter().next().unwrap().as_int(), Some(i64::MIN));
}
