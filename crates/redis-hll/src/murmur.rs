//! Hashing: Redis's endian-neutral MurmurHash64A and `hllPatLen`.
//!
//! Redis hashes every PFADD element with MurmurHash64A (seed `0xadc83b19`);
//! the low 14 bits pick the register and the position of the lowest set bit
//! among the remaining 50 (plus one) is the "pattern length" stored in it.

/// Seed Redis uses for HyperLogLog hashing (`hllPatLen`).
pub const HLL_HASH_SEED: u32 = 0xadc8_3b19;

/// MurmurHash64A exactly as in Redis `src/hyperloglog.c` (little-endian
/// reads, so identical on every architecture).
///
/// Redis passes the length as a C `int`; for inputs shorter than 2 GiB
/// (Redis's own limit on string arguments) the result is identical.
#[inline]
pub fn murmurhash64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let len = key.len() as u64;
    let mut h: u64 = u64::from(seed) ^ len.wrapping_mul(M);

    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let mut k = u64::from_le_bytes(word);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }

    // The tail (`switch (len & 7)` in Redis) xors its bytes in little-endian order.
    let tail = chunks.remainder();
    if !tail.is_empty() {
        h ^= load_le_partial(tail);
        h = h.wrapping_mul(M);
    }

    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The up to 8 bytes of `b` as a little-endian integer (missing high bytes are 0), with
/// at most three loads instead of a loop over the bytes: element tails are hashed per PFADD
/// element, and most elements are shorter than a word.
#[inline(always)]
pub(crate) fn load_le_partial(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!(n <= 8);
    if n >= 4 {
        // Two 4-byte loads that overlap when n < 8; overlapping bytes agree, so OR is exact.
        let lo = u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let hi = u64::from(u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]));
        lo | (hi << (8 * (n - 4)))
    } else if n > 0 {
        // Bytes 0, n/2 and n-1 cover every position of a 1-3 byte tail.
        u64::from(b[0]) | (u64::from(b[n / 2]) << (8 * (n / 2))) | (u64::from(b[n - 1]) << (8 * (n - 1)))
    } else {
        0
    }
}

/// `hllPatLen`: returns `(register index, count)` for an element, where
/// `count` is in `1..=51`.
#[inline]
pub(crate) fn pat_len(element: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(element, HLL_HASH_SEED);
    let index = (hash & (crate::HLL_REGISTERS as u64 - 1)) as usize;
    // Remove the index bits and set bit Q so the count is at most Q+1.
    let rest = (hash >> crate::HLL_P) | (1u64 << crate::HLL_Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_loads_match_the_byte_loop() {
        let data: Vec<u8> = (1u8..=8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
        for n in 0..=8 {
            let mut want = 0u64;
            for (i, &b) in data[..n].iter().enumerate() {
                want |= u64::from(b) << (8 * i);
            }
            assert_eq!(load_le_partial(&data[..n]), want, "length {n}");
        }
    }

    #[test]
    fn pat_len_bounds() {
        for i in 0..10_000u32 {
            let (idx, c) = pat_len(&i.to_le_bytes());
            assert!(idx < crate::HLL_REGISTERS);
            assert!((1..=51).contains(&c));
        }
    }
}
