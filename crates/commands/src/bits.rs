//! Bit operations on strings: SETBIT, GETBIT, BITCOUNT, BITPOS.
//!
//! Bits are numbered as Redis does: bit 0 is the most significant bit of byte 0. Ranges are
//! in bytes by default or in bits with the BIT option (Redis 7), negative indexes count from
//! the end. Counting uses `count_ones` on whole bytes and masks only the partial bytes at the
//! edges of a bit range.

use abacus_protocol::{Arg, Frame};

use super::args::*;
use super::strings::{read_str, str_mut};
use crate::command::flags::*;
use crate::command::Spec;
use crate::ctx::Ctx;

const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "bitmap";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("setbit", 4, WRITE | DENYOOM, K1, setbit, G, "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.")
        .docs("2.2.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            offset type=integer
            value type=integer
        "),
    Spec::keyed("getbit", 3, READONLY | FAST, K1, getbit, G, "Returns a bit value by offset.")
        .docs("2.2.0", "O(1)")
        .args("
            key type=key key_spec_index=0
            offset type=integer
        "),
    Spec::keyed("bitcount", -2, READONLY, K1, bitcount, G, "Counts the number of set bits (population counting) in a string.")
        .docs("2.6.0", "O(N)")
        .history(&[("7.0.0", "Added the `BYTE|BIT` option.")])
        .args("
            key type=key key_spec_index=0
            index type=block flags=optional
              start type=integer
              end type=integer
              index_unit type=oneof since=7.0.0 flags=optional
                byte type=pure-token token=BYTE
                bit type=pure-token token=BIT
        "),
    Spec::keyed("bitpos", -3, READONLY, K1, bitpos, G, "Finds the first set (1) or clear (0) bit in a string.")
        .docs("2.8.7", "O(N)")
        .history(&[("7.0.0", "Added the `BYTE|BIT` option.")])
        .args("
            key type=key key_spec_index=0
            bit type=integer
            index type=block flags=optional
              start type=integer
              end_index type=block flags=optional
                end type=integer
                index_unit type=oneof since=7.0.0 flags=optional
                  byte type=pure-token token=BYTE
                  bit type=pure-token token=BIT
        "),
];

fn bit_offset(a: &[u8], max_string_len: u64) -> Result<u64, Frame> {
    let e = || err("ERR bit offset is not an integer or out of range");
    let v = abacus_keyspace::value::parse_canonical_i64(a).ok_or_else(e)?;
    if v < 0 || (v as u64) >> 3 >= max_string_len {
        return Err(e());
    }
    Ok(v as u64)
}

fn bit_at(s: &[u8], bit: u64) -> u8 {
    let byte = (bit >> 3) as usize;
    match s.get(byte) {
        Some(b) => (b >> (7 - (bit & 7))) & 1,
        None => 0,
    }
}

fn setbit(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let off = match bit_offset(&a[2], ctx.max_string_len) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let on = match &a[3][..] {
        b"1" => true,
        b"0" => false,
        _ => return err("ERR bit is not an integer or out of range"),
    };
    // As Redis: a key created or grown, or a bit that flips, is a change (WATCH).
    let grows = match read_str(ctx, &a[1]) {
        Ok(cur) if cur.is_none_or(|s| s.len() as u64 <= off >> 3) => {
            if let Err(e) = check_allocatable((off >> 3) + 1) {
                return e;
            }
            true
        }
        Ok(_) => false,
        Err(e) => return e,
    };
    let old = match str_mut(ctx, &a[1]) {
        Ok(mut s) => {
            let byte = (off >> 3) as usize;
            if s.len() <= byte {
                s.resize(byte + 1, 0);
            }
            let mask = 1u8 << (7 - (off & 7));
            let old = s[byte] & mask != 0;
            if on {
                s[byte] |= mask;
            } else {
                s[byte] &= !mask;
            }
            old
        }
        Err(e) => return e,
    };
    let reply = Frame::Integer(old.into());
    if grows || old != on { reply } else { ctx.unchanged(reply) }
}

fn getbit(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let off = match bit_offset(&a[2], ctx.max_string_len) {
        Ok(o) => o,
        Err(e) => return e,
    };
    match read_str(ctx, &a[1]) {
        Ok(v) => Frame::Integer(v.map(|s| bit_at(s, off)).unwrap_or(0) as i64),
        Err(e) => e,
    }
}

/// Resolves a (start, end) range over `total` units with Redis's negative-index rules.
/// None means the range is empty.
/// (BITCOUNT's shortcut for two negative indexes with start > end is its own: BITPOS has none,
/// so `BITPOS k 1 -8 -10` on a 3-byte string searches byte 0, both indexes clamped to it.)
fn resolve_range(mut start: i64, mut end: i64, total: i64) -> Option<(u64, u64)> {
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if total == 0 || start > end {
        return None;
    }
    Some((start as u64, end as u64))
}

/// Parses an optional BYTE|BIT unit argument.
fn unit_is_bit(a: Option<&Arg>) -> Result<bool, Frame> {
    match a {
        None => Ok(false),
        Some(u) if is(u, "byte") => Ok(false),
        Some(u) if is(u, "bit") => Ok(true),
        Some(_) => Err(err(ERR_SYNTAX)),
    }
}

/// As Redis 7.0's bitcountCommand: the key first (a missing key counts 0 and a wrong type is
/// WRONGTYPE whatever the other arguments), then the range.
fn bitcount(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let s = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Frame::Integer(0),
        Err(e) => return e,
    };
    let range = match a.len() {
        2 => None,
        4 | 5 => {
            let (start, end) = match (parse_i64(&a[2]), parse_i64(&a[3])) {
                (Ok(s), Ok(e)) => (s, e),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            // As Redis 7.0: an empty range of two negative indexes answers 0 before the unit
            // is looked at (`BITCOUNT k -1 -5 FOO` is 0, not a syntax error).
            if start < 0 && end < 0 && start > end {
                return Frame::Integer(0);
            }
            match unit_is_bit(a.get(4)) {
                Ok(bit) => Some((start, end, bit)),
                Err(e) => return e,
            }
        }
        _ => return err(ERR_SYNTAX),
    };
    let count = match range {
        None => s.iter().map(|b| b.count_ones() as u64).sum(),
        Some((start, end, false)) => match resolve_range(start, end, s.len() as i64) {
            None => 0,
            Some((st, en)) => s[st as usize..=en as usize].iter().map(|b| b.count_ones() as u64).sum(),
        },
        Some((start, end, true)) => match resolve_range(start, end, s.len() as i64 * 8) {
            None => 0,
            Some((st, en)) => count_bits(s, st, en),
        },
    };
    Frame::Integer(count as i64)
}

/// Set bits in the inclusive bit range [first, last].
fn count_bits(s: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut n: u64 = s[fb..=lb].iter().map(|b| b.count_ones() as u64).sum();
    // Remove the bits before `first` in the first byte and after `last` in the last byte.
    let before = 0xffu8.checked_shl(8 - (first & 7) as u32).unwrap_or(0);
    let after = 0xffu8.checked_shr(1 + (last & 7) as u32).unwrap_or(0);
    n -= (s[fb] & before).count_ones() as u64;
    n -= (s[lb] & after).count_ones() as u64;
    n
}

/// As Redis 7.0's bitposCommand: the bit argument, then the key (a missing key answers at
/// once, a wrong type is WRONGTYPE), then the range.
fn bitpos(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let bit = match parse_i64(&a[2]) {
        Ok(1) => 1u8,
        Ok(0) => 0u8,
        Ok(_) => return err("ERR The bit argument must be 1 or 0."),
        Err(e) => return e,
    };
    let s = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Frame::Integer(if bit == 1 { -1 } else { 0 }),
        Err(e) => return e,
    };
    if a.len() > 6 {
        return err(ERR_SYNTAX);
    }
    // Redis parses start, then the unit, then end.
    let start = match a.get(3).map(|v| parse_i64(v)).transpose() {
        Ok(v) => v,
        Err(e) => return e,
    };
    let bit_unit = match unit_is_bit(a.get(5)) {
        Ok(b) => b,
        Err(e) => return e,
    };
    let end = match a.get(4).map(|v| parse_i64(v)).transpose() {
        Ok(v) => v,
        Err(e) => return e,
    };
    let total = if bit_unit { s.len() as i64 * 8 } else { s.len() as i64 };
    let end_given = end.is_some();
    let Some((st, en)) = resolve_range(start.unwrap_or(0), end.unwrap_or(-1), total) else {
        return Frame::Integer(-1);
    };
    let (first_bit, last_bit) = if bit_unit { (st, en) } else { (st * 8, en * 8 + 7) };
    let mut pos = first_bit;
    while pos <= last_bit {
        // Skip whole bytes that cannot contain the bit we look for.
        if pos & 7 == 0 && pos + 7 <= last_bit {
            let byte = s[(pos >> 3) as usize];
            if (bit == 1 && byte == 0) || (bit == 0 && byte == 0xff) {
                pos += 8;
                continue;
            }
        }
        if bit_at(s, pos) == bit {
            return Frame::Integer(pos as i64);
        }
        pos += 1;
    }
    // Looking for a clear bit without an explicit end: the string is treated as padded with
    // zeros on the right, so the first clear bit is just past the end (Redis semantics).
    if bit == 0 && !end_given {
        return Frame::Integer(last_bit as i64 + 1);
    }
    Frame::Integer(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_ranges() {
        let s = [0b1111_0000u8, 0b0000_1111];
        assert_eq!(count_bits(&s, 0, 15), 8);
        assert_eq!(count_bits(&s, 2, 13), 4);
        assert_eq!(count_bits(&s, 4, 11), 0);
        assert_eq!(count_bits(&s, 5, 5), 0);
        assert_eq!(count_bits(&s, 3, 3), 1);
        assert_eq!(resolve_range(0, -1, 10), Some((0, 9)));
        assert_eq!(resolve_range(-3, -5, 10), None);
        assert_eq!(resolve_range(5, 100, 10), Some((5, 9)));
        // Both negative indexes clamp to 0: BITPOS searches the first unit (Redis 7.0).
        assert_eq!(resolve_range(-8, -10, 3), Some((0, 0)));
    }
}
