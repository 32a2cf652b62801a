//! Control bytes: one byte per slot saying whether it is empty, deleted (a tombstone) or
//! full, and for a full slot 7 bits of its key's hash (the tag).
//!
//! Probing reads control bytes eight at a time as one `u64` and finds candidates with SWAR
//! bit tricks (the portable form of hashbrown's SSE2 groups; safe code, no intrinsics). A
//! lookup compares keys only where the tag matches, so a miss on a 1-in-128 tag touches no
//! slot. A segment's control array has `cap + GROUP` bytes: the last `GROUP` bytes mirror
//! the first ones, so a group read starting near the end sees the wrapped-around bytes
//! without a second load.
//!
//! Encoding (as hashbrown): EMPTY = 0xFF, DELETED = 0x80, FULL = the tag, 0x00..=0x7F. So
//! "free" (empty or deleted) is the high bit, and "empty" is the high bit and the next one.

pub(crate) const GROUP: usize = 8;
pub(crate) const EMPTY: u8 = 0xFF;
pub(crate) const DELETED: u8 = 0x80;

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The tag of a hash: its low 7 bits (the segment and the home slot use the high bits).
#[inline(always)]
pub(crate) fn tag(hash: u64) -> u8 {
    (hash & 0x7F) as u8
}

#[inline(always)]
pub(crate) fn is_full(c: u8) -> bool {
    c & 0x80 == 0
}

/// Eight control bytes.
#[derive(Clone, Copy)]
pub(crate) struct Group(u64);

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
        // Per byte: (b & 0x7F) + 0x7F sets the high bit iff the low 7 bits are non-zero; or-ing
        // b adds its own high bit. No carry crosses a byte. The high bit is clear iff b == 0.
        BitMask(!(((x & !HI) + !HI) | x | !HI))
    }

    #[inline(always)]
    pub(crate) fn match_empty(self) -> BitMask {
        BitMask(self.0 & (self.0 << 1) & HI)
    }

    #[inline(always)]
    pub(crate) fn match_full(self) -> BitMask {
        BitMask(!self.0 & HI)
    }

    /// Empty or deleted bytes.
    #[inline(always)]
    pub(crate) fn match_free(self) -> BitMask {
        BitMask(self.0 & HI)
    }
}

/// The high bit of each matching byte; iterates the byte indices in ascending order.
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
            Some(self.0.trailing_zeros() as usize / 8)
        }
    }
}

impl BitMask {
    /// Only the matches among the first `n` bytes.
    #[inline(always)]
    pub(crate) fn below(self, n: usize) -> BitMask {
        if n >= GROUP {
            self
        } else {
            BitMask(self.0 & ((1u64 << (n * 8)) - 1))
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

    proptest! {
        /// The SWAR matches agree with a byte-by-byte loop on every mix of control bytes.
        #[test]
        fn swar_matches_naive(bytes in proptest::collection::vec(byte(), GROUP), tag in 0u8..0x80) {
            let g = Group::load(&bytes, 0);
            let want = |f: &dyn Fn(u8) -> bool| -> Vec<usize> { (0..GROUP).filter(|&i| f(bytes[i])).collect() };
            prop_assert_eq!(g.match_tag(tag).collect::<Vec<_>>(), want(&|b| b == tag));
            prop_assert_eq!(g.match_empty().collect::<Vec<_>>(), want(&|b| b == EMPTY));
            prop_assert_eq!(g.match_free().collect::<Vec<_>>(), want(&|b| !is_full(b)));
            prop_assert_eq!(g.match_full().collect::<Vec<_>>(), want(&|b| is_full(b)));
            prop_assert_eq!(g.match_full().below(3).collect::<Vec<_>>(), want(&|b| is_full(b)).into_iter().filter(|&i| i < 3).collect::<Vec<_>>());
        }
    }
}
