//! Seeded hashing of keys: one 64-bit hash per key, all of whose bits are used.
//!
//! The table takes three things from one hash (see `segment.rs`): the top bits choose the
//! segment through the directory, the 32 bits below a segment's depth choose the home slot,
//! and the low 7 bits are the tag kept in the control byte. So every bit must be well mixed,
//! including the top ones that a plain multiplicative hash leaves weak.
//!
//! - `u64` keys: one folded multiply (the 128-bit product's halves xored) by a random odd
//!   seed, as foldhash does: both halves' top bits are well mixed and the high half's low
//!   bits (the tag) depend on every key bit. Instructions matter here: a lookup that misses
//!   the cache is bounded by how many lookups the CPU's reorder window holds at once, so a
//!   shorter hash lets more of them overlap.
//! - byte keys: the wyhash / rapidhash construction (read the key as at most two overlapping
//!   64-bit words when it is at most 16 bytes long, fold 16 bytes per round otherwise, then
//!   one folded multiply with the length mixed in). Short keys cost one multiply round.
//!
//! Every table draws its own random seed, so keys that collide in one table (or process) do
//! not collide in another: a client cannot precompute a flood of colliding keys. Tests fix
//! the seed for reproducibility.

use std::hash::{BuildHasher, RandomState};

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;

/// A table's hash seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seed {
    a: u64,
    b: u64,
}

impl Seed {
    /// A fresh random seed. std's `RandomState` is seeded from the OS once per thread and
    /// stepped for every instance, so two tables never share a seed.
    pub fn random() -> Seed {
        let s = RandomState::new();
        Seed::from_u64(s.hash_one(0x5eed_u64))
    }

    /// A fixed seed (tests, reproducible benchmarks).
    pub fn from_u64(seed: u64) -> Seed {
        let a = fold_mul(seed ^ P0, P1);
        // Odd (a bijection on keys) with the top bit set (no tiny multipliers).
        let b = fold_mul(seed ^ P2, P0) | 1 | (1 << 63);
        Seed { a, b }
    }
}

#[inline(always)]
fn fold_mul(x: u64, y: u64) -> u64 {
    let p = x as u128 * y as u128;
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
pub(crate) fn hash_u64(seed: Seed, k: u64) -> u64 {
    fold_mul(k ^ seed.a, seed.b)
}

#[inline(always)]
fn r64(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn r32(b: &[u8], i: usize) -> u64 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes")) as u64
}

#[inline]
pub(crate) fn hash_bytes(seed: Seed, b: &[u8]) -> u64 {
    let len = b.len();
    let mut s = seed.a;
    let (x, y) = if len <= 16 {
        if len >= 4 {
            let q = (len >> 3) << 2;
            (
                (r32(b, 0) << 32) | r32(b, q),
                (r32(b, len - 4) << 32) | r32(b, len - 4 - q),
            )
        } else if len > 0 {
            (
                ((b[0] as u64) << 16) | ((b[len >> 1] as u64) << 8) | b[len - 1] as u64,
                0,
            )
        } else {
            (0, 0)
        }
    } else {
        let mut i = 0;
        while len - i > 16 {
            s = fold_mul(r64(b, i) ^ P1, r64(b, i + 8) ^ s);
            i += 16;
        }
        (r64(b, len - 16), r64(b, len - 8))
    };
    let p = (x ^ P1) as u128 * (y ^ s) as u128;
    fold_mul((p as u64) ^ P0 ^ len as u64, ((p >> 64) as u64) ^ seed.b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn byte_hashes_differ_across_lengths_and_contents() {
        let seed = Seed::from_u64(7);
        let mut seen = HashSet::new();
        for len in 0..80usize {
            for fill in [0u8, 1, 0xff] {
                if len == 0 && fill != 0 {
                    continue;
                }
                let key = vec![fill; len];
                assert!(
                    seen.insert(hash_bytes(seed, &key)),
                    "collision at len {len} fill {fill}"
                );
            }
        }
    }

    #[test]
    fn seeds_change_hashes_and_top_bits_are_balanced() {
        let (s1, s2) = (Seed::from_u64(1), Seed::from_u64(2));
        assert_ne!(hash_u64(s1, 42), hash_u64(s2, 42));
        assert_ne!(Seed::random(), Seed::random());
        // Sequential keys must spread over the top bits (the directory index).
        let mut buckets = [0u32; 16];
        for k in 0..16_000u64 {
            buckets[(hash_u64(s1, k) >> 60) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&n| (800..1200).contains(&n)),
            "{buckets:?}"
        );
    }
}
