//! Control bytes: one byte per slot saying whether it is empty, deleted (a tombstone) or
//! full, and for a full slot 7 bits of its key's hash (the tag).
//!
//! Probing reads control bytes a group at a time: sixteen in an SSE2 register on x86_64 (as
//! hashbrown), elsewhere eight as one `u64` matched with SWAR bit tricks. A lookup compares keys only where the tag matches, so a miss on a 1-in-128 tag touches no
//! slot. A segment's control array has `cap + GROUP` bytes: the last `GROUP` bytes mirror
//! the first ones, so a group read starting near the end sees the wrapped-around bytes
//! without a second load.
//!
//! Encoding (as hashbrown): EMPTY = 0xFF, DELETED = 0x80, FULL = the tag, 0x00..=0x7F. So
//! "free" (empty or deleted) is the high bit, and "empty" is the high bit and the next one.

pub(crate) const EMPTY: u8 = 0xFF;
pub(crate) const DELETED: u8 = 0x80;

/// The tag of a hash: its low 7 bits (the segment and the home slot use the high bits).
#[inline(always)]
pub(crate) fn tag(hash: u64) -> u8 {
    (hash & 0x7F) as u8
}

#[inline(always)]
pub(crate) fn is_full(c: u8) -> bool {
    c & 0x80 == 0
}

#[cfg(target_arch = "x86_64")]
pub(crate) use sse2::{Group, GROUP};
#[cfg(not(target_arch = "x86_64"))]
pub(crate) use swar::{Group, GROUP};

/// Sixteen control bytes in an SSE2 register (x86_64's baseline, as hashbrown does). Why
/// not the portable eight-byte form below: at this table's 70-90% load an eight-byte group
/// often holds no empty byte, so an insert's probe loop ran a second round, a branch the CPU
/// mispredicted and paid for with the control bytes' cache miss; sixteen bytes end most
/// probes in one round.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use super::{BitMask, DELETED, EMPTY};
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };

    pub(crate) const GROUP: usize = 16;

    #[derive(Clone, Copy)]
    pub(crate) struct Group(__m128i);

    impl Group {
        #[inline(always)]
        pub(crate) fn load(ctrl: &[u8], pos: usize) -> Group {
            let bytes: &[u8; GROUP] = ctrl[pos..pos + GROUP].try_into().expect("GROUP bytes");
            // SAFETY: SSE2 is in the x86_64 baseline; the load reads exactly the 16 bytes of
            // `bytes` (unaligned load, no alignment needed).
            Group(unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) })
        }

        #[inline(always)]
        fn eq(self, b: u8) -> BitMask {
            // SAFETY: SSE2 is in the x86_64 baseline; register-only operations.
            let m = unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(self.0, _mm_set1_epi8(b as i8))) };
            BitMask(m as u16 as u64)
        }

        /// Bytes equal to `tag` (exact: a set bit is always a full slot).
        #[inline(always)]
        pub(crate) fn match_tag(self, tag: u8) -> BitMask {
            self.eq(tag)
        }

        #[inline(always)]
        pub(crate) fn match_empty(self) -> BitMask {
            self.eq(EMPTY)
        }

        /// Empty or deleted bytes: the high bit.
        #[inline(always)]
        pub(crate) fn match_free(self) -> BitMask {
            // SAFETY: SSE2 is in the x86_64 baseline; register-only operation.
            BitMask(unsafe { _mm_movemask_epi8(self.0) } as u16 as u64)
        }

        #[inline(always)]
        pub(crate) fn match_full(self) -> BitMask {
            BitMask(!self.match_free().0 & 0xFFFF)
        }
    }

    const _: () = assert!(DELETED & 0x80 != 0);
}

/// Eight control bytes read as one `u64`, matched with SWAR bit tricks (portable, safe).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
mod swar {
    use super::BitMask;

    pub(crate) const GROUP: usize = 8;
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;

    #[derive(Clone, Copy)]
    pub(crate) struct Group(u64);

    /// One bit per byte (the byte's index) from a mask of byte high bits.
    #[inline(always)]
    fn compress(high_bits: u64) -> BitMask {
        // Each byte's high bit moves to bit `index` of the result: multiply gathers them.
        BitMask(((high_bits >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56)
    }

    impl Group {
        #[inline(always)]
        pub(crate) fn load(ctrl: &[u8], pos: usize) -> Group {
            Group(u64::from_le_bytes(
                ctrl[pos..pos + GROUP].try_into().expect("GROUP bytes"),
            ))
        }

        /// Bytes equal to `tag` (exact: no false positives, so a set bit is always a full slot).
        #[inline(always)]
        pub(crate) fn match_tag(self, tag: u8) -> BitMask {
            let x = self.0 ^ (LO * tag as u64);
            // Per byte: (b & 0x7F) + 0x7F sets the high bit iff the low 7 bits are non-zero;
            // or-ing b adds its own high bit. No carry crosses a byte. High bit clear iff b == 0.
            compress(!(((x & !HI) + !HI) | x | !HI))
        }

        #[inline(always)]
        pub(crate) fn match_empty(self) -> BitMask {
            compress(self.0 & (self.0 << 1) & HI)
        }

        #[inline(always)]
        pub(crate) fn match_full(self) -> BitMask {
            compress(!self.0 & HI)
        }

        /// Empty or deleted bytes.
        #[inline(always)]
        pub(crate) fn match_free(self) -> BitMask {
            compress(self.0 & HI)
        }
    }
}

/// One bit per matching byte of a group (bit `i` for byte `i`); iterates the byte indices
/// in ascending order.
#[derive(Clone, Copy)]
pub(crate) struct BitMask(u64);

impl BitMask {
    #[inline(always)]
    pub(crate) fn any(self) -> bool {
        self.0 != 0
    }

    #[inline(always)]
    pub(crate) fn lowest(self) -> Option<usize> {
        if self.0 == 0 {
            None
        } else {
            Some(self.0.trailing_zeros() as usize)
        }
    }

    /// How many bytes matched.
    #[inline(always)]
    pub(crate) fn ones(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Only the matches among the first `n` bytes.
    #[inline(always)]
    pub(crate) fn below(self, n: usize) -> BitMask {
        if n >= 64 {
            self
        } else {
            BitMask(self.0 & ((1u64 << n) - 1))
        }
    }
}

impl Iterator for BitMask {
    type Item = usize;
    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        let i = self.lowest()?;
        self.0 &= self.0 - 1;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn byte() -> impl Strategy<Value = u8> {
        prop_oneof![Just(EMPTY), Just(DELETED), 0u8..0x80, Just(0u8), Just(1u8)]
    }

    fn check<G: Copy>(
        bytes: &[u8],
        tag: u8,
        load: fn(&[u8], usize) -> G,
        matches: [fn(G) -> BitMask; 4],
        tag_match: fn(G, u8) -> BitMask,
    ) -> Result<(), TestCaseError> {
        let g = load(bytes, 0);
        let want = |f: &dyn Fn(u8) -> bool| -> Vec<usize> {
            (0..bytes.len()).filter(|&i| f(bytes[i])).collect()
        };
        let [empty, free, full, _] = matches;
        prop_assert_eq!(tag_match(g, tag).collect::<Vec<_>>(), want(&|b| b == tag));
        prop_assert_eq!(empty(g).collect::<Vec<_>>(), want(&|b| b == EMPTY));
        prop_assert_eq!(free(g).collect::<Vec<_>>(), want(&|b| !is_full(b)));
        prop_assert_eq!(full(g).collect::<Vec<_>>(), want(&|b| is_full(b)));
        prop_assert_eq!(
            full(g).below(3).collect::<Vec<_>>(),
            want(&|b| is_full(b))
                .into_iter()
                .filter(|&i| i < 3)
                .collect::<Vec<_>>()
        );
        Ok(())
    }

    proptest! {
        // Under Miri a few cases: it interprets every proptest step (256 cases of the SSE2
        // test ran for over 25 minutes).
        #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 8 } else { 256 }, ..ProptestConfig::default() })]

        /// The SWAR matches agree with a byte-by-byte loop on every mix of control bytes.
        #[test]
        fn swar_matches_naive(bytes in proptest::collection::vec(byte(), swar::GROUP), tag in 0u8..0x80) {
            use swar::Group as G;
            check(&bytes, tag, G::load, [G::match_empty, G::match_free, G::match_full, G::match_full], G::match_tag)?;
        }

        /// So do the SSE2 ones.
        #[cfg(target_arch = "x86_64")]
        #[test]
        fn sse2_matches_naive(bytes in proptest::collection::vec(byte(), sse2::GROUP), tag in 0u8..0x80) {
            use sse2::Group as G;
            check(&bytes, tag, G::load, [G::match_empty, G::match_free, G::match_full, G::match_full], G::match_tag)?;
        }
    }
}
