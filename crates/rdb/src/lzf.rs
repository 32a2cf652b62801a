//! LZF, the compression Redis applies to RDB strings longer than 20 bytes (`rdbcompression`).
//!
//! Hand-written rather than the `lzf` crate: that crate binds the C liblzf (a `cc` build and
//! an `unsafe` FFI boundary), while the format is small enough to implement here in safe
//! Rust, with the decoder checking every back reference against the output written so far.
//!
//! Format (liblzf's `lzf_d.c`): a control byte `c`. If `c < 32`, `c + 1` literal bytes
//! follow. Otherwise it is a back reference: length `c >> 5` (7 means "add the next byte"),
//! plus 2; offset `((c & 31) << 8) + next byte + 1` bytes back in the output.
//!
//! The compressor is greedy with a 3-byte hash table, like liblzf's fast mode: any valid
//! stream is fine, since readers (Redis included) only decode.

/// Longest back reference: 7 + 255 + 2 bytes.
const MAX_REF_LEN: usize = 264;
/// Farthest back reference: 13 bits of offset, plus one.
const MAX_OFFSET: usize = 1 << 13;
/// Longest literal run one control byte announces.
const MAX_LITERAL: usize = 32;
const HASH_BITS: u32 = 14;

/// Decompresses `input` into exactly `out_len` bytes; `None` when the stream is malformed
/// (a reference before the start, output longer or shorter than `out_len`).
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let c = input[i] as usize;
        i += 1;
        if c < 32 {
            let run = c + 1;
            let lit = input.get(i..i + run)?;
            if out.len() + run > out_len {
                return None;
            }
            out.extend_from_slice(lit);
            i += run;
        } else {
            let mut len = c >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            len += 2;
            let offset = ((c & 31) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            if offset > out.len() || out.len() + len > out_len {
                return None;
            }
            let start = out.len() - offset;
            if offset >= len {
                out.extend_from_within(start..start + len);
            } else {
                // The reference overlaps the bytes it produces (a run): copy in steps of
                // `offset`, each step's source already written.
                let mut left = len;
                while left > 0 {
                    let step = left.min(offset);
                    let from = out.len() - offset;
                    out.extend_from_within(from..from + step);
                    left -= step;
                }
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

/// Compresses `input`; `None` when the result would not be shorter than `max_out` bytes
/// (the caller then stores the bytes verbatim, as Redis does).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let n = input.len();
    let mut out = Vec::with_capacity(max_out.min(n + n / 32 + 1));
    let mut table = vec![usize::MAX; 1 << HASH_BITS];
    let hash = |p: usize| -> usize {
        let v = (input[p] as u32) << 16 | (input[p + 1] as u32) << 8 | input[p + 2] as u32;
        (v.wrapping_mul(2654435761) >> (32 - HASH_BITS)) as usize
    };
    let mut lit_start = 0;
    let mut i = 0;
    let flush_literals = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut s = from;
        while s < to {
            let run = (to - s).min(MAX_LITERAL);
            out.push((run - 1) as u8);
            out.extend_from_slice(&input[s..s + run]);
            s += run;
        }
    };
    while i + 2 < n {
        let h = hash(i);
        let cand = table[h];
        table[h] = i;
        if cand != usize::MAX && i - cand <= MAX_OFFSET && input[cand..cand + 3] == input[i..i + 3] {
            let mut len = 3;
            while i + len < n && len < MAX_REF_LEN && input[cand + len] == input[i + len] {
                len += 1;
            }
            flush_literals(&mut out, lit_start, i);
            let off = i - cand - 1;
            let l = len - 2;
            if l < 7 {
                out.push(((l << 5) | (off >> 8)) as u8);
            } else {
                out.push(((7 << 5) | (off >> 8)) as u8);
                out.push((l - 7) as u8);
            }
            out.push(off as u8);
            i += len;
            lit_start = i;
            if out.len() >= max_out {
                return None;
            }
        } else {
            i += 1;
        }
    }
    flush_literals(&mut out, lit_start, n);
    (out.len() < max_out).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn runs_compress_and_round_trip() {
        let data = vec![b'a'; 1000];
        let c = compress(&data, data.len()).expect("a run compresses");
        assert!(c.len() < 30, "{}", c.len());
        assert_eq!(decompress(&c, 1000).unwrap(), data);
    }

    #[test]
    fn incompressible_is_refused() {
        let data: Vec<u8> = (0..64u32).map(|i| (i * 97 % 251) as u8).collect();
        assert!(compress(&data, data.len() - 4).is_none());
    }

    #[test]
    fn malformed_streams_are_refused() {
        // A back reference with nothing before it.
        assert!(decompress(&[0x20, 0x00], 3).is_none());
        // A literal run cut short.
        assert!(decompress(&[0x05, b'a'], 6).is_none());
        // Declared length disagrees.
        assert!(decompress(&[0x00, b'a'], 2).is_none());
        assert!(decompress(&[0x01, b'a', b'b'], 1).is_none());
    }

    #[test]
    fn liblzf_output_decodes() {
        // 50 a's as Redis 7.0's DUMP stores them: two literals, a 46-byte reference at
        // offset 1, two literals.
        let stream = [0x01, b'a', b'a', 0xe0, 37, 0x00, 0x01, b'a', b'a'];
        assert_eq!(decompress(&stream, 50).unwrap(), vec![b'a'; 50]);
    }

    proptest! {
        #[test]
        fn round_trip(data in proptest::collection::vec(prop_oneof![Just(b'x'), Just(b'y'), any::<u8>()], 0..5000)) {
            if let Some(c) = compress(&data, data.len() + 64) {
                prop_assert_eq!(decompress(&c, data.len()).unwrap(), data);
            }
        }
    }
}
