//! Dense representation: 16384 registers of 6 bits packed LSB-first into
//! 12288 bytes that follow the 16-byte header.
//!
//! Redis's macros read (and write) the byte after the register being
//! accessed, relying on the SDS null terminator for the last register. Here
//! that byte is read as 0 when it lies past the slice, and the write to it
//! (always a no-op for the last register) is skipped, so no access can go out
//! of bounds.

use crate::{HLL_BITS, HLL_REGISTERS};

const REGISTER_MAX: u32 = (1 << HLL_BITS) - 1;

/// Number of bytes of packed registers (12288).
pub(crate) const DENSE_REGS_BYTES: usize = (HLL_REGISTERS * HLL_BITS as usize).div_ceil(8);

/// `HLL_DENSE_GET_REGISTER`. `regs` is the register area (after the header).
#[inline]
pub(crate) fn get(regs: &[u8], index: usize) -> u8 {
    let byte = index * HLL_BITS as usize / 8;
    let fb = (index * HLL_BITS as usize) & 7;
    let b0 = u32::from(regs.get(byte).copied().unwrap_or(0));
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX) as u8
}

/// `HLL_DENSE_SET_REGISTER`; `val` must be `<= 63`.
#[inline]
pub(crate) fn set(regs: &mut [u8], index: usize, val: u8) {
    let byte = index * HLL_BITS as usize / 8;
    let fb = (index * HLL_BITS as usize) & 7;
    let v = u32::from(val) & REGISTER_MAX;
    if let Some(b) = regs.get_mut(byte) {
        *b &= !((REGISTER_MAX << fb) as u8);
        *b |= (v << fb) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((REGISTER_MAX >> (8 - fb)) as u8);
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// `hllDenseSet`: raise register `index` to `count`; true if it changed.
///
/// A register spans at most two bytes (6 bits starting at bit 0..=7 of its first byte), so
/// it is read and written as one little-endian `u16`; only the last register, whose second
/// byte would lie past the end, takes the byte-wise path.
#[inline]
pub(crate) fn set_if_greater(regs: &mut [u8], index: usize, count: u8) -> bool {
    let byte = index * HLL_BITS as usize / 8;
    let fb = (index * HLL_BITS as usize) & 7;
    if let Some(pair) = regs.get_mut(byte..byte + 2) {
        let w = u16::from_le_bytes([pair[0], pair[1]]);
        let mask = (REGISTER_MAX as u16) << fb;
        let val = u16::from(count) & REGISTER_MAX as u16;
        if val <= (w & mask) >> fb {
            return false;
        }
        let w = (w & !mask) | (val << fb);
        pair.copy_from_slice(&w.to_le_bytes());
        return true;
    }
    if count > get(regs, index) {
        set(regs, index, count);
        true
    } else {
        false
    }
}

/// Calls `f(register_value)` for each of the 16384 registers in order,
/// four registers per three bytes (as `hllDenseRegHisto` does).
#[inline]
fn for_each(regs: &[u8], mut f: impl FnMut(usize, u8)) {
    let mut i = 0;
    for c in regs.chunks_exact(3).take(HLL_REGISTERS / 4) {
        let (b0, b1, b2) = (c[0], c[1], c[2]);
        f(i, b0 & 63);
        f(i + 1, ((b0 >> 6) | (b1 << 2)) & 63);
        f(i + 2, ((b1 >> 4) | (b2 << 4)) & 63);
        f(i + 3, b2 >> 2);
        i += 4;
    }
}

/// `hllDenseRegHisto`: histogram of register values (index 0..=63).
pub(crate) fn histogram(regs: &[u8], histo: &mut [u32; 64]) {
    for_each(regs, |_, v| histo[v as usize] += 1);
}

/// `hllMerge` for a dense source: `max[i] = MAX(max[i], reg[i])`.
pub(crate) fn merge_into(regs: &[u8], max: &mut [u8; HLL_REGISTERS]) {
    for_each(regs, |i, v| {
        if v > max[i] {
            max[i] = v;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_set_roundtrip_and_isolation() {
        let mut regs = vec![0u8; DENSE_REGS_BYTES];
        let mut shadow = vec![0u8; HLL_REGISTERS];
        let mut x: u32 = 12345;
        for _ in 0..3 {
            for (i, s) in shadow.iter_mut().enumerate() {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let v = ((x >> 16) & 63) as u8;
                *s = v;
                set(&mut regs, i, v);
            }
            for (i, &s) in shadow.iter().enumerate() {
                assert_eq!(get(&regs, i), s, "register {i}");
            }
            let mut max = [0u8; HLL_REGISTERS];
            merge_into(&regs, &mut max);
            assert_eq!(&max[..], &shadow[..]);
        }
    }

    #[test]
    fn set_if_greater_matches_get_and_set() {
        // Every register (the last one included, whose second byte is past the end), raised
        // in a scrambled order with random values, against a plain array.
        let mut regs = vec![0u8; DENSE_REGS_BYTES];
        let mut shadow = vec![0u8; HLL_REGISTERS];
        let mut x: u32 = 777;
        for round in 0..4 * HLL_REGISTERS {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let i = if round % 1000 == 0 { HLL_REGISTERS - 1 } else { (x >> 8) as usize % HLL_REGISTERS };
            let v = ((x >> 20) % 64) as u8;
            let grew = set_if_greater(&mut regs, i, v);
            assert_eq!(grew, v > shadow[i], "register {i}");
            shadow[i] = shadow[i].max(v);
            assert_eq!(get(&regs, i), shadow[i]);
        }
        for (i, &s) in shadow.iter().enumerate() {
            assert_eq!(get(&regs, i), s, "register {i}");
        }
    }
}
