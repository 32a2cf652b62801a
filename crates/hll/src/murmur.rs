//! MurmurHash3 x64 128-bit, as postgresql-hll's `hll_hash_*` functions use it.
//!
//! postgresql-hll ships Austin Appleby's reference `MurmurHash3_x64_128`
//! (little-endian block reads) and returns the first 64-bit output word as a
//! signed `bigint`. Its 32-bit seed parameter is a `uint32_t`, so a negative
//! SQL seed is reinterpreted as unsigned and then zero-extended into both
//! 64-bit lanes; `seed as u32 as u64` below does the same. A `bigint` is hashed
//! as its 8 little-endian bytes (the in-memory `int64` on x86-64), `bytea` and
//! `text` as their payload bytes.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[inline]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// The up to 8 bytes of `b` as a little-endian integer (missing high bytes are 0), with at
/// most three loads: every HLL.ADD element is hashed, and most are shorter than a block.
#[inline(always)]
fn load_le_partial(b: &[u8]) -> u64 {
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

/// MurmurHash3_x64_128 of `data` with a 32-bit seed; returns both output words.
#[inline]
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);

    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let k1 = u64::from_le_bytes(block[0..8].try_into().unwrap());
        let k2 = u64::from_le_bytes(block[8..16].try_into().unwrap());
        h1 ^= mix_k1(k1);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }

    // Tail: up to 15 bytes, little-endian into k1 (bytes 0..8) and k2 (8..15). The reference
    // code's `switch` falls through byte by byte; whole-word loads give the same words.
    let tail = blocks.remainder();
    if tail.len() > 8 {
        h2 ^= mix_k2(load_le_partial(&tail[8..]));
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(load_le_partial(&tail[..tail.len().min(8)]));
    }

    // The reference code xors in an `int` length; inputs here are < 2 GiB in
    // practice, and the length is non-negative, so this is the same value.
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// `hll_hash_bigint(value, seed)`: the value to feed to [`Hll::add_raw`](crate::Hll::add_raw)
/// for an integer element. Seed 0 is postgresql-hll's default; negative seeds
/// work but postgresql-hll warns that they are not portable to java-hll.
#[inline]
pub fn hash_bigint(value: i64, seed: i32) -> i64 {
    murmur3_x64_128(&value.to_le_bytes(), seed as u32).0 as i64
}

/// `hll_hash_bytea(bytes, seed)` (and `hll_hash_text` over the UTF-8 bytes).
#[inline]
pub fn hash_bytes(bytes: &[u8], seed: i32) -> i64 {
    murmur3_x64_128(bytes, seed as u32).0 as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values_from_postgresql_hll() {
        assert_eq!(hash_bigint(0, 0), 2945182322382062539);
        assert_eq!(hash_bigint(100, 0), 8349353095166695771);
        assert_eq!(hash_bytes(b"A", 0), 243126998722523514);
        // Checked against a live postgresql-hll 2.17 (negative seeds too).
        assert_eq!(hash_bigint(1, -1), 2145454048499925717);
        assert_eq!(hash_bytes(&[1], -5), -5608785468070332465);
        assert_eq!(hash_bytes(b"", 0), 0);
    }

    #[test]
    fn smhasher_reference_vectors() {
        // Published MurmurHash3_x64_128 outputs (seed 0); h1 agrees with postgresql-hll.
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
        assert_eq!(
            murmur3_x64_128(b"hello", 0),
            (0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19)
        );
        assert_eq!(
            murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0).0,
            0xe34bbc7bbc071b6c
        );
        // 19 bytes: one block plus a 3-byte tail, non-zero seed (postgresql-hll).
        assert_eq!(hash_bytes(b"0123456789abcdefXYZ", 42), 4587199098581384134);
    }

    /// The reference implementation's byte-at-a-time tail, to check the word loads against.
    fn tail_words_bytewise(tail: &[u8]) -> (u64, u64) {
        let (mut k1, mut k2) = (0u64, 0u64);
        for (i, &b) in tail.iter().enumerate() {
            if i < 8 {
                k1 ^= u64::from(b) << (8 * i);
            } else {
                k2 ^= u64::from(b) << (8 * (i - 8));
            }
        }
        (k1, k2)
    }

    #[test]
    fn partial_loads_match_the_byte_loop() {
        let data: Vec<u8> = (1u8..=15).map(|i| i.wrapping_mul(53) ^ 0x5a).collect();
        for n in 0..=15 {
            let tail = &data[..n];
            let k1 = load_le_partial(&tail[..n.min(8)]);
            let k2 = if n > 8 { load_le_partial(&tail[8..]) } else { 0 };
            assert_eq!((k1, k2), tail_words_bytewise(tail), "length {n}");
        }
    }

    #[test]
    fn every_tail_length_is_distinct() {
        // Exercises all 16 tail lengths and the block loop.
        let data: Vec<u8> = (0u8..40).collect();
        let mut seen = std::collections::HashSet::new();
        for n in 0..=40 {
            assert!(seen.insert(murmur3_x64_128(&data[..n], 7)));
        }
    }
}
