//! Random picks for SRANDMEMBER, SPOP and HRANDFIELD.
//!
//! Every pick is a uniform rank in `0..len` mapped to a member. Listpacks and
//! hashtables map a rank with one index. A bitmap maps a rank with `select`,
//! which walks the containers (~1 us on a 10M set), so for many ranks at once
//! it sorts them and walks the bitmap's members once instead (~2 ns per
//! member): `select` wins while `ranks * 512 < len`.
//!
//! Distinct picks use Floyd's algorithm (k draws, a hash set of k ranks, no
//! O(len) copy), then a shuffle, since Floyd's output order is not uniform
//! and a sorted bitmap walk is not random at all. Picks with repeats (negative
//! SRANDMEMBER counts) are k independent uniform ranks. The caller bounds k.

use std::collections::HashSet;

use rand::seq::SliceRandom;
use rand::Rng;

use crate::idset::{IdSet, Repr};
use crate::int::{IntMember, Member};

/// `count` distinct ranks drawn uniformly from `0..len` (needs count <= len).
pub(crate) fn sample_distinct(len: u64, count: u64, rng: &mut impl Rng) -> Vec<u64> {
    assert!(
        count <= len,
        "cannot draw {count} distinct ranks from {len}"
    );
    let mut chosen = HashSet::with_capacity(count as usize);
    let mut ranks = Vec::with_capacity(count as usize);
    for upper in len - count..len {
        let draw = rng.gen_range(0..=upper);
        let rank = if chosen.contains(&draw) { upper } else { draw };
        chosen.insert(rank);
        ranks.push(rank);
    }
    ranks.shuffle(rng);
    ranks
}

/// `count` independent uniform ranks from `0..len` (needs len > 0).
pub(crate) fn sample_with_repeats(len: u64, count: u64, rng: &mut impl Rng) -> Vec<u64> {
    (0..count).map(|_| rng.gen_range(0..len)).collect()
}

impl IdSet {
    /// One uniformly random member (SRANDMEMBER without count).
    pub fn random_member(&self, rng: &mut impl Rng) -> Option<Member<'_>> {
        if self.is_empty() {
            return None;
        }
        let rank = rng.gen_range(0..self.len() as u64);
        Some(self.members_at_ranks(&mut [rank], rng).remove(0))
    }

    /// `count` distinct random members in random order, or the whole set (in
    /// encoding order) when `count >= len` (SRANDMEMBER with positive count).
    pub fn random_members_distinct(&self, count: usize, rng: &mut impl Rng) -> Vec<Member<'_>> {
        if count >= self.len() {
            return self.iter().collect();
        }
        let mut ranks = sample_distinct(self.len() as u64, count as u64, rng);
        self.members_at_ranks(&mut ranks, rng)
    }

    /// `count` independent random members, repeats allowed (SRANDMEMBER with
    /// negative count). Empty when the set is.
    pub fn random_members_with_repeats(&self, count: usize, rng: &mut impl Rng) -> Vec<Member<'_>> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut ranks = sample_with_repeats(self.len() as u64, count as u64, rng);
        self.members_at_ranks(&mut ranks, rng)
    }

    /// Removes and returns one random member (SPOP without count).
    pub fn pop_random(&mut self, rng: &mut impl Rng) -> Option<Vec<u8>> {
        let member = self.random_member(rng)?.to_vec();
        self.remove(&member);
        Some(member)
    }

    /// Removes and returns `count` distinct random members, or all of them
    /// when `count >= len` (SPOP with count).
    pub fn pop_random_many(&mut self, count: usize, rng: &mut impl Rng) -> Vec<Vec<u8>> {
        if count >= self.len() {
            let members = self.iter().map(|m| m.to_vec()).collect();
            self.clear();
            return members;
        }
        let members: Vec<Vec<u8>> = self
            .random_members_distinct(count, rng)
            .iter()
            .map(|m| m.to_vec())
            .collect();
        for member in &members {
            self.remove(member);
        }
        members
    }

    /// Members at the given ranks (each < len), in the order of `ranks`.
    fn members_at_ranks(&self, ranks: &mut [u64], rng: &mut impl Rng) -> Vec<Member<'_>> {
        match &self.repr {
            Repr::Bitmap(bitmap) => {
                let select = |rank: u64| bitmap.select(rank).expect("rank < len");
                if (ranks.len() as u64).saturating_mul(512) < bitmap.len() {
                    return ranks
                        .iter()
                        .map(|&r| Member::Int(IntMember::from_key(select(r))))
                        .collect();
                }
                // One ascending walk over the bitmap, then shuffle back into a
                // random order (the callers' ranks were uniform, so a fresh
                // shuffle keeps the output distribution the same).
                ranks.sort_unstable();
                let mut keys = bitmap.iter();
                let mut members = Vec::with_capacity(ranks.len());
                let (mut position, mut current) = (0u64, keys.next());
                for &rank in ranks.iter() {
                    if rank > position {
                        current = keys.nth((rank - position - 1) as usize);
                        position = rank;
                    }
                    members.push(Member::Int(IntMember::from_key(
                        current.expect("rank < len"),
                    )));
                }
                members.shuffle(rng);
                members
            }
            Repr::Listpack(list) => ranks
                .iter()
                .map(|&r| Member::Bytes(&list[r as usize]))
                .collect(),
            Repr::Hashtable(table) => ranks
                .iter()
                .map(|&r| Member::Bytes(table.members.get_index(r as usize).expect("rank < len")))
                .collect(),
        }
    }
}
