//! Distribution sanity for random picks: fixed seeds (so the tests are
//! deterministic, never flaky) and a chi-square bound of df + 6*sqrt(2*df),
//! i.e. about six standard deviations, which a correct sampler passes with
//! any seed and a biased one (off-by-one rank, a lost shuffle, a skewed
//! select path) fails by far.

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::{CompactHash, IdSet};

fn assert_uniform(counts: &[u64], what: &str) {
    let total: u64 = counts.iter().sum();
    let expected = total as f64 / counts.len() as f64;
    assert!(
        expected >= 20.0,
        "{what}: too few draws for a chi-square test"
    );
    let chi2: f64 = counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum();
    let df = (counts.len() - 1) as f64;
    let bound = df + 6.0 * (2.0 * df).sqrt();
    assert!(
        chi2 < bound,
        "{what}: chi-square {chi2:.1} over bound {bound:.1} (df {df})"
    );
}

/// Sets of `len` members in each encoding; members are "0".."len-1" (or
/// "m0".. for general sets) so a member's index is easy to recover.
fn sets(len: usize) -> Vec<(&'static str, IdSet)> {
    let mut bitmap = IdSet::new();
    let mut general = IdSet::new();
    for i in 0..len {
        bitmap.insert(i.to_string().as_bytes());
        general.insert(format!("m{i}").as_bytes());
    }
    vec![("bitmap", bitmap), ("general", general)]
}

fn index_of(member: &[u8]) -> usize {
    let text = std::str::from_utf8(member).unwrap();
    text.trim_start_matches('m').parse().unwrap()
}

#[test]
fn random_member_is_uniform_in_every_encoding() {
    for len in [50, 1000] {
        for (name, set) in sets(len) {
            let mut rng = StdRng::seed_from_u64(7);
            let mut counts = vec![0u64; len];
            for _ in 0..len * 100 {
                counts[index_of(&set.random_member(&mut rng).unwrap())] += 1;
            }
            assert_uniform(
                &counts,
                &format!("random_member {name} ({})", set.encoding()),
            );
        }
    }
}

#[test]
fn distinct_picks_are_uniform_on_both_bitmap_paths_and_in_random_order() {
    // 1000 members, 10 picks: the sorted-walk path; 6000 members, 10 picks:
    // the select path (10 * 512 < 6000).
    for len in [1000usize, 6000] {
        for (name, set) in sets(len) {
            let mut rng = StdRng::seed_from_u64(11);
            let (mut inclusion, mut first_position) = (vec![0u64; len], vec![0u64; 10]);
            for _ in 0..len * 4 {
                let picked = set.random_members_distinct(10, &mut rng);
                assert_eq!(picked.len(), 10);
                for member in &picked {
                    inclusion[index_of(member)] += 1;
                }
                let smallest = (0..10).min_by_key(|&i| index_of(&picked[i])).unwrap();
                first_position[smallest] += 1;
            }
            assert_uniform(&inclusion, &format!("distinct inclusion {name} len {len}"));
            assert_uniform(&first_position, &format!("distinct order {name} len {len}"));
        }
    }
}

#[test]
fn picks_with_repeats_are_uniform() {
    for (name, set) in sets(300) {
        let mut rng = StdRng::seed_from_u64(13);
        let mut counts = vec![0u64; 300];
        for member in set.random_members_with_repeats(300 * 60, &mut rng) {
            counts[index_of(&member)] += 1;
        }
        assert_uniform(&counts, &format!("with repeats {name}"));
    }
}

#[test]
fn pop_takes_a_uniform_member() {
    let mut rng = StdRng::seed_from_u64(17);
    let mut counts = vec![0u64; 20];
    for _ in 0..4000 {
        for (_, mut set) in sets(20) {
            counts[index_of(&set.pop_random(&mut rng).unwrap())] += 1;
            assert_eq!(set.len(), 19);
        }
    }
    assert_uniform(&counts, "pop_random");
}

#[test]
fn random_field_is_uniform_in_both_hash_encodings() {
    for len in [40usize, 500] {
        let mut hash = CompactHash::new();
        for i in 0..len {
            hash.insert(format!("m{i}").as_bytes(), b"v");
        }
        let mut rng = StdRng::seed_from_u64(19);
        let (mut single, mut distinct) = (vec![0u64; len], vec![0u64; len]);
        for _ in 0..len * 50 {
            single[index_of(hash.random_field(&mut rng).unwrap().0)] += 1;
        }
        for _ in 0..len * 10 {
            for (field, _) in hash.random_fields_distinct(5, &mut rng) {
                distinct[index_of(field)] += 1;
            }
        }
        assert_uniform(&single, &format!("random_field {}", hash.encoding()));
        assert_uniform(
            &distinct,
            &format!("random_fields_distinct {}", hash.encoding()),
        );
    }
}
