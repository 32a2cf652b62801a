//! Set algebra for SINTER, SINTERCARD, SUNION, SDIFF and their STORE forms.
//!
//! The rule that matters for W6: when every operand is a bitmap, the work is
//! Roaring container operations (and / or / andnot, and `intersection_len`
//! for cardinalities, which counts without building a result); no member is
//! ever formatted, hashed or compared as bytes. Two 9.5M-member bitmaps
//! intersect-count in a few milliseconds this way, where iterating members
//! would cost seconds.
//!
//! Mixed operands: the bitmap operands are first combined among themselves,
//! then the combined bitmap and the general sets are filtered against each
//! other by iterating whichever side is smaller and probing the rest.
//! Intersections start from the smallest operand (operands are sorted by
//! size), and an empty intermediate stops the work.
//!
//! Result encodings follow Redis's `sinterGenericCommand` /
//! `sunionDiffGenericCommand`, which build every result from an empty intset:
//! a result whose members are all canonical integers is a bitmap, whatever
//! the operands' encodings were. Results of bitmap-only algebra are bitmaps
//! by construction; general results are built by `insert_with_limits`, so
//! they pick listpack or hashtable by the same thresholds as SADD.

use std::borrow::Cow;

use roaring::RoaringTreemap;

use crate::idset::IdSet;
use crate::int::{key_of, parse_canonical_i64, IntMember, Member};
use crate::EncodingLimits;

/// Operands split by encoding, each list sorted by ascending size.
struct Operands<'a> {
    bitmaps: Vec<&'a RoaringTreemap>,
    generals: Vec<&'a IdSet>,
}

impl<'a> Operands<'a> {
    fn split(sets: &[&'a IdSet]) -> Self {
        let mut sorted = sets.to_vec();
        sorted.sort_by_key(|set| set.len());
        let (mut bitmaps, mut generals) = (Vec::new(), Vec::new());
        for set in sorted {
            match set.bitmap() {
                Some(bitmap) => bitmaps.push(bitmap),
                None => generals.push(set),
            }
        }
        Self { bitmaps, generals }
    }
}

/// AND of all bitmaps, smallest first; borrowed when there is only one.
fn and_all<'a>(bitmaps: &[&'a RoaringTreemap]) -> Option<Cow<'a, RoaringTreemap>> {
    match bitmaps {
        [] => None,
        [only] => Some(Cow::Borrowed(only)),
        [first, second, rest @ ..] => {
            let mut acc = *first & *second;
            for bitmap in rest {
                if acc.is_empty() {
                    break;
                }
                acc &= *bitmap;
            }
            Some(Cow::Owned(acc))
        }
    }
}

/// Calls `visit` with each key in `bitmap` whose member every general set
/// holds, until `visit` returns false. Iterates the smaller side.
fn visit_mixed_common(
    bitmap: &RoaringTreemap,
    generals: &[&IdSet],
    mut visit: impl FnMut(u64) -> bool,
) {
    let Some((smallest, rest)) = generals.split_first() else {
        return;
    };
    if bitmap.len() <= smallest.len() as u64 {
        for key in bitmap.iter() {
            let member = IntMember::from_key(key);
            if generals.iter().all(|set| set.contains(member.as_bytes())) && !visit(key) {
                return;
            }
        }
    } else {
        for member in smallest.iter() {
            let Some(value) = parse_canonical_i64(&member) else {
                continue;
            };
            if bitmap.contains(key_of(value))
                && rest.iter().all(|set| set.contains(&member))
                && !visit(key_of(value))
            {
                return;
            }
        }
    }
}

/// Calls `visit` with each member of the smallest general set that every
/// other one holds, until `visit` returns false.
fn visit_general_common<'a>(generals: &[&'a IdSet], mut visit: impl FnMut(Member<'a>) -> bool) {
    let Some((smallest, rest)) = generals.split_first() else {
        return;
    };
    for member in smallest.iter() {
        if rest.iter().all(|set| set.contains(&member)) && !visit(member) {
            return;
        }
    }
}

impl IdSet {
    /// SINTER: members in every set (empty for no sets).
    pub fn intersection(sets: &[&IdSet]) -> IdSet {
        Self::intersection_with_limits(sets, &EncodingLimits::REDIS_DEFAULT)
    }

    pub fn intersection_with_limits(sets: &[&IdSet], limits: &EncodingLimits) -> IdSet {
        if sets.is_empty() || sets.iter().any(|set| set.is_empty()) {
            return IdSet::new();
        }
        let operands = Operands::split(sets);
        match and_all(&operands.bitmaps) {
            Some(acc) if operands.generals.is_empty() => IdSet::from_bitmap(acc.into_owned()),
            Some(acc) => {
                let mut result = RoaringTreemap::new();
                visit_mixed_common(&acc, &operands.generals, |key| {
                    result.insert(key);
                    true
                });
                IdSet::from_bitmap(result)
            }
            None => {
                let mut result = IdSet::new();
                visit_general_common(&operands.generals, |member| {
                    result.insert_with_limits(&member, limits);
                    true
                });
                result
            }
        }
    }

    /// SINTERCARD: the size of the intersection, counting stops at `limit`
    /// (0 means no limit).
    pub fn intersection_card(sets: &[&IdSet], limit: usize) -> usize {
        let limit = if limit == 0 { usize::MAX } else { limit };
        if sets.is_empty() || sets.iter().any(|set| set.is_empty()) {
            return 0;
        }
        let operands = Operands::split(sets);
        if operands.generals.is_empty() {
            // AND all but the largest, then count against it without
            // materializing the last intersection.
            let (largest, rest) = operands.bitmaps.split_last().expect("at least one set");
            let count = match and_all(rest) {
                Some(acc) => acc.intersection_len(largest),
                None => largest.len(),
            };
            return usize::try_from(count).unwrap_or(usize::MAX).min(limit);
        }
        let mut count = 0;
        let mut counted = |_| {
            count += 1;
            count < limit
        };
        match and_all(&operands.bitmaps) {
            Some(acc) => visit_mixed_common(&acc, &operands.generals, &mut counted),
            None => visit_general_common(&operands.generals, |_| counted(0)),
        }
        count
    }

    /// SUNION: members in any set.
    pub fn union(sets: &[&IdSet]) -> IdSet {
        Self::union_with_limits(sets, &EncodingLimits::REDIS_DEFAULT)
    }

    pub fn union_with_limits(sets: &[&IdSet], limits: &EncodingLimits) -> IdSet {
        let operands = Operands::split(sets);
        // OR into a copy of the largest bitmap: the copy is a memcpy of its
        // containers, and the smaller ones merge into it.
        let acc = match operands.bitmaps.split_last() {
            Some((largest, rest)) => {
                let mut acc = (*largest).clone();
                for bitmap in rest {
                    acc |= *bitmap;
                }
                acc
            }
            None => RoaringTreemap::new(),
        };
        let mut result = IdSet::from_bitmap(acc);
        for set in operands.generals.iter().rev() {
            for member in set.iter() {
                result.insert_with_limits(&member, limits);
            }
        }
        result
    }

    /// SDIFF: members of `first` in none of `others`.
    pub fn difference(first: &IdSet, others: &[&IdSet]) -> IdSet {
        Self::difference_with_limits(first, others, &EncodingLimits::REDIS_DEFAULT)
    }

    pub fn difference_with_limits(
        first: &IdSet,
        others: &[&IdSet],
        limits: &EncodingLimits,
    ) -> IdSet {
        let Some(bitmap) = first.bitmap() else {
            let mut result = IdSet::new();
            for member in first.iter() {
                if !others.iter().any(|set| set.contains(&member)) {
                    result.insert_with_limits(&member, limits);
                }
            }
            return result;
        };
        let mut acc = bitmap.clone();
        for other in others {
            if acc.is_empty() {
                break;
            }
            match other.bitmap() {
                Some(other_bitmap) => acc -= other_bitmap,
                None => subtract_general(&mut acc, other),
            }
        }
        IdSet::from_bitmap(acc)
    }
}

/// Removes from `acc` the integer members of the general set `other`,
/// iterating whichever side is smaller.
fn subtract_general(acc: &mut RoaringTreemap, other: &IdSet) {
    if other.len() as u64 <= acc.len() {
        for member in other.iter() {
            if let Some(value) = parse_canonical_i64(&member) {
                acc.remove(key_of(value));
            }
        }
    } else {
        let doomed: Vec<u64> = acc
            .iter()
            .filter(|&key| other.contains(IntMember::from_key(key).as_bytes()))
            .collect();
        for key in doomed {
            acc.remove(key);
        }
    }
}
