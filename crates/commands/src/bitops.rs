//! Bitmaps as operands: BITOP (AND, OR, XOR, NOT over whole strings) and BITFIELD /
//! BITFIELD_RO (integers of 1 to 64 bits at any bit offset).
//!
//! Bits are numbered as in `bits.rs`: bit 0 is the most significant bit of byte 0, so a field
//! aligned on bytes reads as big-endian.
//!
//! BITOP borrows every source at once (no copies: 30 sources of 12.5 MB are 375 MB that a copy
//! would move for nothing) and builds the result in one buffer. The buffer is computed in blocks
//! of `BLOCK_BYTES`: each source in turn is folded into the block 8 bytes (one u64 word) at a
//! time, so the block stays in cache while the sources stream through it once, and memory
//! traffic is one read of every source plus one write of the result. Redis 7.0 does the same
//! work a byte at a time per source whenever there are more than 16 sources. Semantics are
//! Redis 7.0's `bitopCommand`: sources are type-checked in order (the first non-string is
//! WRONGTYPE, nothing written), missing keys are empty strings, shorter strings are padded with
//! zero bytes, the result is as long as the longest source, and an empty result deletes the
//! destination. The destination is overwritten whatever it held, TTL included.
//!
//! BITFIELD parses every subcommand before touching the key (Redis's `bitfieldGeneric`), so a
//! bad argument anywhere fails the whole command with nothing changed. Writes first grow the
//! string with zero bytes to cover the highest bit any SET/INCRBY reaches, as SETBIT does. A
//! field is read and written through a 128-bit big-endian window over the (at most 9) bytes it
//! spans. The overflow rules are Redis's `check{Signed,Unsigned}BitfieldOverflow`, reproduced
//! with their two's-complement arithmetic (including their answers for SET values far outside
//! the type's range).

use abacus_keyspace::{StrBuf, Value};
use abacus_protocol::{Arg, Frame};

use super::args::*;
use super::strings::{read_str, str_mut};
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Ctx, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
/// BITOP operation destkey srckey...: every argument from the destination on is a key.
const DEST_AND_SOURCES: (i32, i32, i32) = (2, -1, 1);
const G: &str = "bitmap";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("bitop", -4, WRITE | DENYOOM, DEST_AND_SOURCES, bitop, G, "Performs bitwise operations on multiple strings, and stores the result.")
        .docs("2.6.0", "O(N)")
        .key_specs("OW update; RO access")
        .args("
            operation type=string
            destkey type=key key_spec_index=0
            key type=key key_spec_index=1 flags=multiple
        "),
    Spec::keyed("bitfield", -2, WRITE | DENYOOM, K1, bitfield, G, "Performs arbitrary bitfield integer operations on strings.")
        .docs("3.2.0", "O(1) for each subcommand specified")
        .key_specs("RW access update variable_flags")
        .args("
            key type=key key_spec_index=0
            operation type=oneof flags=optional,multiple
              encoding_offset type=block token=GET
                encoding type=string
                offset type=integer
              write type=block
                wrap_sat_fail type=oneof token=OVERFLOW flags=optional
                  wrap type=pure-token token=WRAP
                  sat type=pure-token token=SAT
                  fail type=pure-token token=FAIL
                write_operation type=oneof
                  encoding_offset_value type=block token=SET
                    encoding type=string
                    offset type=integer
                    value type=integer
                  encoding_offset_increment type=block token=INCRBY
                    encoding type=string
                    offset type=integer
                    increment type=integer
        "),
    Spec::keyed("bitfield_ro", -2, READONLY | FAST, K1, bitfield_ro, G, "Performs arbitrary read-only bitfield integer operations on strings.")
        .docs("6.0.0", "O(1) for each subcommand specified")
        .args("
            key type=key key_spec_index=0
            encoding_offset type=block token=GET flags=optional,multiple,multiple_token
              encoding type=string
              offset type=integer
        "),
];

// ---------------------------------------------------------------------------------------------
// BITOP

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// Bytes of the result computed at a time: small enough to stay in L1/L2 while every source
/// is folded into it, large enough that the per-block overhead (one slice per source) is noise.
const BLOCK_BYTES: usize = 16 << 10;

fn bitop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let op = match &a[1] {
        o if is(o, "and") => BitOp::And,
        o if is(o, "or") => BitOp::Or,
        o if is(o, "xor") => BitOp::Xor,
        o if is(o, "not") => BitOp::Not,
        _ => return err(ERR_SYNTAX),
    };
    if op == BitOp::Not && a.len() != 4 {
        return err("ERR BITOP NOT must be called with a single source key.");
    }
    let (dest, sources) = (&a[2], &a[3..]);
    let now = ctx.now_ms;
    let db = ctx.db();
    // Each source is looked up on its own first, in order, as Redis's lookupKeyRead: lazy
    // expiry, hit/miss counts, a decoded sketch serialized back to its bytes, and the type
    // check that stops at the first non-string.
    for key in sources {
        if let Some(e) = db.get_read_mut(key, now) {
            e.sketch_to_string();
            if e.str_bytes().is_none() {
                return err(ERR_WRONGTYPE);
            }
        }
    }
    let db = &*db;
    let srcs: Vec<&[u8]> = sources.iter().map(|k| db.get_shared(k, now).and_then(|e| e.str_bytes()).unwrap_or(&[])).collect();
    let len = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    if len == 0 {
        // As Redis: the destination is signalled only if it existed (it is deleted).
        let removed = ctx.db().remove(dest, now);
        if removed {
            ctx.notify(notify::GENERIC, "del", dest);
        }
        ctx.modified_only(if removed { KeysModified::key(0) } else { KeysModified::NONE });
        return Frame::Integer(0);
    }
    let mut out = StrBuf::new();
    out.resize(len, 0);
    combine(op, &srcs, &mut out);
    ctx.db().set(dest, Value::Str(out), 0, now);
    ctx.notify(notify::STRING, "set", dest);
    // The destination only, not the sources (Redis's signalModifiedKey).
    ctx.modified_only(KeysModified::key(0));
    // Redis stores the result as a fresh sds object: OBJECT ENCODING says "raw" at any length.
    if let Some(e) = ctx.db().get_mut(dest, now) {
        e.set_raw_encoding(true);
    }
    Frame::Integer(len as i64)
}

/// Computes `op` over `srcs` into `out` (as long as the longest source, zero-filled on entry),
/// each source read as padded with zero bytes to `out`'s length.
fn combine(op: BitOp, srcs: &[&[u8]], out: &mut [u8]) {
    debug_assert!(srcs.iter().all(|s| s.len() <= out.len()));
    debug_assert!(op != BitOp::Not || srcs.len() == 1);
    let len = out.len();
    for (block_index, block) in out.chunks_mut(BLOCK_BYTES).enumerate() {
        let start = block_index * BLOCK_BYTES;
        let end = start + block.len();
        debug_assert!(end <= len);
        match op {
            BitOp::Not => fold_words(block, block_part(srcs[0], start, end), |_, s| !s),
            BitOp::Or => srcs.iter().for_each(|s| fold_words(block, block_part(s, start, end), |o, s| o | s)),
            BitOp::Xor => srcs.iter().for_each(|s| fold_words(block, block_part(s, start, end), |o, s| o ^ s)),
            BitOp::And => {
                let first = block_part(srcs[0], start, end);
                block[..first.len()].copy_from_slice(first);
                for s in &srcs[1..] {
                    let s = block_part(s, start, end);
                    // Past a source's end its bytes are zero, and so is the AND.
                    block[s.len()..].fill(0);
                    fold_words(block, s, |o, s| o & s);
                }
            }
        }
    }
}

/// The part of source `s` that falls in the block [start, end): shorter, or empty, past its end.
fn block_part(s: &[u8], start: usize, end: usize) -> &[u8] {
    s.get(start..end.min(s.len())).unwrap_or(&[])
}

/// `out[i] = f(out[i], src[i])` over the first `src.len()` bytes, eight bytes at a time.
/// `f` must act bytewise (and, or, xor, not), so the tail can use it on single bytes.
#[inline(always)]
fn fold_words(out: &mut [u8], src: &[u8], f: impl Fn(u64, u64) -> u64) {
    debug_assert!(src.len() <= out.len());
    let out = &mut out[..src.len()];
    let mut out_words = out.chunks_exact_mut(8);
    let mut src_words = src.chunks_exact(8);
    for (o, s) in (&mut out_words).zip(&mut src_words) {
        let word = f(u64::from_ne_bytes(o.try_into().expect("8 bytes")), u64::from_ne_bytes(s.try_into().expect("8 bytes")));
        o.copy_from_slice(&word.to_ne_bytes());
    }
    for (o, s) in out_words.into_remainder().iter_mut().zip(src_words.remainder()) {
        *o = f(*o as u64, *s as u64) as u8;
    }
}

// ---------------------------------------------------------------------------------------------
// BITFIELD

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FieldOpKind {
    Get,
    Set,
    Incrby,
}

/// One parsed subcommand.
#[derive(Clone, Copy, Debug)]
struct FieldOp {
    kind: FieldOpKind,
    signed: bool,
    /// 1..=64 signed, 1..=63 unsigned.
    bits: u32,
    /// In bits; `offset >> 3 < proto-max-bulk-len`.
    offset: u64,
    /// SET's value or INCRBY's increment.
    value: i64,
    overflow: Overflow,
}

/// The parsed subcommands, and the highest bit a SET/INCRBY writes (None when all are GETs).
struct FieldOps {
    ops: Vec<FieldOp>,
    highest_write_bit: Option<u64>,
}

const ERR_BITFIELD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// A type argument, `i1`..`i64` or `u1`..`u63` (lower case only), as getBitfieldTypeFromArgument
/// reads it: the width is the C string after the sign letter, so it ends at a NUL byte.
fn field_type(a: &[u8]) -> Result<(bool, u32), Frame> {
    let e = || err(ERR_BITFIELD_TYPE);
    let signed = match a.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(e()),
    };
    let width = &a[1..];
    let width = &width[..width.iter().position(|&b| b == 0).unwrap_or(width.len())];
    match abacus_keyspace::value::parse_canonical_i64(width) {
        Some(bits @ 1..=64) if signed => Ok((true, bits as u32)),
        Some(bits @ 1..=63) => Ok((false, bits as u32)),
        _ => Err(e()),
    }
}

/// An offset argument: bits, or `#N` for N fields of `bits` (the product wraps as Redis's
/// `long long` multiplication does in practice), below proto-max-bulk-len bytes.
fn field_offset(a: &[u8], bits: u32, max_string_len: u64) -> Result<u64, Frame> {
    let e = || err(ERR_BIT_OFFSET);
    let (hash, digits) = match a.split_first() {
        Some((b'#', rest)) => (true, rest),
        _ => (false, a),
    };
    let mut v = abacus_keyspace::value::parse_canonical_i64(digits).ok_or_else(e)?;
    if hash {
        v = v.wrapping_mul(bits as i64);
    }
    if v < 0 || (v as u64) >> 3 >= max_string_len {
        return Err(e());
    }
    Ok(v as u64)
}

fn parse_field_ops(a: &[Arg], max_string_len: u64) -> Result<FieldOps, Frame> {
    let mut parsed = FieldOps { ops: Vec::new(), highest_write_bit: None };
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < a.len() {
        let remaining = a.len() - j - 1;
        let sub = &a[j];
        let kind = if is(sub, "get") && remaining >= 2 {
            FieldOpKind::Get
        } else if is(sub, "set") && remaining >= 3 {
            FieldOpKind::Set
        } else if is(sub, "incrby") && remaining >= 3 {
            FieldOpKind::Incrby
        } else if is(sub, "overflow") && remaining >= 1 {
            overflow = match &a[j + 1] {
                o if is(o, "wrap") => Overflow::Wrap,
                o if is(o, "sat") => Overflow::Sat,
                o if is(o, "fail") => Overflow::Fail,
                _ => return Err(err("ERR Invalid OVERFLOW type specified")),
            };
            j += 2;
            continue;
        } else {
            return Err(err(ERR_SYNTAX));
        };
        let (signed, bits) = field_type(&a[j + 1])?;
        let offset = field_offset(&a[j + 2], bits, max_string_len)?;
        let mut value = 0;
        if kind != FieldOpKind::Get {
            let last = offset + bits as u64 - 1;
            parsed.highest_write_bit = Some(parsed.highest_write_bit.map_or(last, |h| h.max(last)));
            value = parse_i64(&a[j + 3])?;
        }
        parsed.ops.push(FieldOp { kind, signed, bits, offset, value, overflow });
        j += if kind == FieldOpKind::Get { 3 } else { 4 };
    }
    Ok(parsed)
}

fn bitfield(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    bitfield_generic(ctx, a, false)
}

fn bitfield_ro(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    bitfield_generic(ctx, a, true)
}

fn bitfield_generic(ctx: &mut Ctx, a: &[Arg], readonly_command: bool) -> Frame {
    let parsed = match parse_field_ops(a, ctx.max_string_len) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let Some(highest_bit) = parsed.highest_write_bit else {
        // Only GETs: a read lookup, which neither creates nor grows the key: nothing to
        // signal or propagate.
        ctx.propagate_nothing();
        ctx.modified_only(KeysModified::NONE);
        return match read_str(ctx, &a[1]) {
            Ok(s) => Frame::Array(parsed.ops.iter().map(|op| Frame::Integer(get_field(s.unwrap_or(&[]), op))).collect()),
            Err(e) => e,
        };
    };
    if readonly_command {
        return err("ERR BITFIELD_RO only supports the GET subcommand");
    }
    // As lookupStringForBitCommand: the type check, then the string grown (created if
    // missing) to cover the highest bit written, whether or not a write then fails.
    let len_needed = (highest_bit >> 3) + 1;
    let now = ctx.now_ms;
    let len_now = match ctx.db().get_mut(&a[1], now) {
        None => 0,
        Some(e) => {
            e.sketch_to_string();
            match e.str_bytes() {
                Some(s) => s.len() as u64,
                None => return err(ERR_WRONGTYPE),
            }
        }
    };
    if len_now < len_needed {
        if let Err(e) = check_allocatable(len_needed) {
            return e;
        }
    }
    let notify_on = ctx.notify_flags & notify::STRING != 0;
    let mut s = match str_mut(ctx, &a[1]) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let grew = (s.len() as u64) < len_needed;
    if grew {
        s.resize(len_needed as usize, 0);
    }
    // Redis fires "setbit" only when the string grew or its bytes changed: with
    // notifications on, the bytes the writes cover are kept to compare.
    let covered = (parsed.ops.iter().filter(|op| op.kind != FieldOpKind::Get).map(|op| op.offset >> 3).min().unwrap_or(0) as usize)..(len_needed as usize);
    let before = (notify_on && !grew).then(|| s[covered.clone()].to_vec());
    let replies: Vec<Frame> = parsed.ops.iter().map(|op| run_field_op(&mut s, op)).collect();
    let changed = grew || before.is_some_and(|b| b[..] != s[covered]);
    drop(s);
    // As Redis: WATCH is signalled when a SET or INCRBY took effect (an OVERFLOW FAIL one
    // did not), even though the string may have grown for nothing. The write is logged in
    // every case: a grown string is state.
    let writes_done = parsed.ops.iter().zip(&replies).filter(|(op, r)| op.kind != FieldOpKind::Get && !matches!(r, Frame::Null)).count();
    if writes_done == 0 {
        ctx.modified_only(KeysModified::NONE);
    } else if changed {
        ctx.notify(notify::STRING, "setbit", &a[1]);
    } else {
        ctx.notify_none();
    }
    Frame::Array(replies)
}

/// A GET's reply: the field read from `s` as padded with zero bytes.
fn get_field(s: &[u8], op: &FieldOp) -> i64 {
    if op.signed {
        get_signed(s, op.offset, op.bits)
    } else {
        get_unsigned(s, op.offset, op.bits) as i64
    }
}

/// Runs one subcommand on a string that covers every bit it writes.
fn run_field_op(s: &mut [u8], op: &FieldOp) -> Frame {
    if op.kind == FieldOpKind::Get {
        return Frame::Integer(get_field(s, op));
    }
    let incr = if op.kind == FieldOpKind::Incrby { op.value } else { 0 };
    let (old, new, overflowed) = if op.signed {
        let old = get_signed(s, op.offset, op.bits);
        let base = if op.kind == FieldOpKind::Incrby { old } else { op.value };
        match signed_overflow(base, incr, op.bits, op.overflow) {
            Some(limit) => (old, limit as u64, true),
            None => (old, base.wrapping_add(incr) as u64, false),
        }
    } else {
        let old = get_unsigned(s, op.offset, op.bits);
        let base = if op.kind == FieldOpKind::Incrby { old } else { op.value as u64 };
        match unsigned_overflow(base, incr, op.bits, op.overflow) {
            Some(limit) => (old as i64, limit, true),
            None => (old as i64, base.wrapping_add(incr as u64), false),
        }
    };
    if overflowed && op.overflow == Overflow::Fail {
        return Frame::Null;
    }
    set_field(s, op.offset, op.bits, new);
    Frame::Integer(match op.kind {
        FieldOpKind::Set => old,
        // The value stored, read as the field's type.
        _ if op.signed => sign_extend(new & mask(op.bits), op.bits),
        _ => (new & mask(op.bits)) as i64,
    })
}

/// The low `bits` bits set.
fn mask(bits: u32) -> u64 {
    debug_assert!((1..=64).contains(&bits));
    u64::MAX >> (64 - bits)
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | !mask(bits)) as i64
    } else {
        v as i64
    }
}

/// The (at most 9) bytes from `offset`'s byte on, zero-padded, as a big-endian window: the
/// field's first bit is the window's bit `127 - offset % 8`.
fn window(s: &[u8], byte: usize) -> u128 {
    let mut buf = [0u8; 16];
    if byte < s.len() {
        let n = (s.len() - byte).min(9);
        buf[..n].copy_from_slice(&s[byte..byte + n]);
    }
    u128::from_be_bytes(buf)
}

/// How far to shift the window right to bring the field to its low bits.
fn window_shift(offset: u64, bits: u32) -> u32 {
    128 - (offset & 7) as u32 - bits
}

fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let byte = usize::try_from(offset >> 3).unwrap_or(usize::MAX);
    (window(s, byte) >> window_shift(offset, bits)) as u64 & mask(bits)
}

fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    sign_extend(get_unsigned(s, offset, bits), bits)
}

/// Stores the low `bits` bits of `value` at `offset`; `s` must cover the field.
fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    let first = (offset >> 3) as usize;
    let last = ((offset + bits as u64 - 1) >> 3) as usize;
    assert!(last < s.len(), "the string was grown to cover every written field");
    let n = last - first + 1;
    debug_assert!(n <= 9);
    let shift = window_shift(offset, bits);
    let field = (mask(bits) as u128) << shift;
    let w = (window(s, first) & !field) | (((value & mask(bits)) as u128) << shift);
    s[first..=last].copy_from_slice(&w.to_be_bytes()[..n]);
}

/// Redis's checkUnsignedBitfieldOverflow for `value + incr` in a `bits`-wide unsigned field
/// (SET checks its value with incr 0): None if it fits, else Some(what WRAP or SAT stores;
/// meaningless under FAIL).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Option<u64> {
    let max = mask(bits);
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrapped = value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if overflow == Overflow::Sat { max } else { wrapped })
    } else if incr < 0 && incr < min_incr {
        Some(if overflow == Overflow::Sat { 0 } else { wrapped })
    } else {
        None
    }
}

/// Redis's checkSignedBitfieldOverflow, likewise for a signed field, with its C arithmetic
/// (unsigned wrap-around where Redis casts, wrapping where its signed subtraction would
/// overflow).
fn signed_overflow(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = sign_extend((value as u64).wrapping_add(incr as u64) & mask(bits), bits);
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(if overflow == Overflow::Sat { max } else { wrapped })
    } else if value < min || (bits != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr) {
        Some(if overflow == Overflow::Sat { min } else { wrapped })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abacus_keyspace::Db;

    use crate::testing::run_keyed as run;

    fn ints(v: &[Option<i64>]) -> Frame {
        Frame::Array(v.iter().map(|x| x.map_or(Frame::Null, Frame::Integer)).collect())
    }

    fn bf(dbs: &mut [Db], args: &[&str]) -> Frame {
        let mut all: Vec<&[u8]> = vec![b"bitfield", b"k"];
        all.extend(args.iter().map(|a| a.as_bytes()));
        run(dbs, &all)
    }

    fn get_bytes(dbs: &mut [Db], key: &[u8]) -> Option<Vec<u8>> {
        match run(dbs, &[b"get", key]) {
            Frame::Bulk(b) => Some(b.to_vec()),
            Frame::Null => None,
            other => panic!("{other:?}"),
        }
    }

    /// (type, overflow mode, start value, increment, the reply) at the edges of each width.
    #[test]
    fn incrby_overflow_at_the_edges() {
        let cases: &[(&str, &str, i64, i64, Option<i64>)] = &[
            ("i1", "wrap", 0, 1, Some(-1)),
            ("i1", "sat", 0, 1, Some(0)),
            ("i1", "fail", 0, 1, None),
            ("i1", "wrap", -1, -1, Some(0)),
            ("i1", "sat", -1, -1, Some(-1)),
            ("i8", "wrap", 127, 1, Some(-128)),
            ("i8", "sat", 127, 1, Some(127)),
            ("i8", "fail", 127, 1, None),
            ("i8", "wrap", -128, -1, Some(127)),
            ("i8", "sat", -128, -1000, Some(-128)),
            ("i8", "fail", -128, -1, None),
            ("i8", "fail", -100, 227, Some(127)),
            ("i63", "wrap", (1 << 62) - 1, 1, Some(-(1 << 62))),
            ("i63", "sat", (1 << 62) - 1, 5, Some((1 << 62) - 1)),
            ("i63", "sat", -(1 << 62), -1, Some(-(1 << 62))),
            ("i63", "fail", -(1 << 62), -1, None),
            ("i64", "wrap", i64::MAX, 1, Some(i64::MIN)),
            ("i64", "sat", i64::MAX, i64::MAX, Some(i64::MAX)),
            ("i64", "fail", i64::MAX, 1, None),
            ("i64", "wrap", i64::MIN, -1, Some(i64::MAX)),
            ("i64", "sat", i64::MIN, i64::MIN, Some(i64::MIN)),
            ("i64", "fail", i64::MIN, -1, None),
            ("i64", "fail", -1, i64::MAX, Some(i64::MAX - 1)),
            ("u1", "wrap", 1, 1, Some(0)),
            ("u1", "sat", 1, 1, Some(1)),
            ("u1", "sat", 0, -1, Some(0)),
            ("u1", "fail", 0, -1, None),
            ("u8", "wrap", 255, 1, Some(0)),
            ("u8", "wrap", 0, -1, Some(255)),
            ("u8", "sat", 200, 100, Some(255)),
            ("u8", "sat", 10, -11, Some(0)),
            ("u8", "fail", 255, 1, None),
            ("u8", "fail", 10, -10, Some(0)),
            ("u63", "wrap", i64::MAX, 1, Some(0)),
            ("u63", "sat", i64::MAX, 1, Some(i64::MAX)),
            ("u63", "sat", 0, i64::MIN, Some(0)),
            ("u63", "fail", 0, -1, None),
            ("u63", "wrap", 0, -1, Some(i64::MAX)),
        ];
        for &(ty, mode, start, incr, want) in cases {
            let mut dbs = vec![Db::new()];
            let (start, incr) = (start.to_string(), incr.to_string());
            assert_eq!(bf(&mut dbs, &["set", ty, "3", &start]), ints(&[Some(0)]), "{ty} {start}");
            let got = bf(&mut dbs, &["overflow", mode, "incrby", ty, "3", &incr]);
            assert_eq!(got, ints(&[want]), "{ty} {mode} {start} + {incr}");
            // FAIL changes nothing; otherwise GET reads back what INCRBY answered.
            let now = bf(&mut dbs, &["get", ty, "3"]);
            assert_eq!(now, ints(&[Some(want.unwrap_or(start.parse().unwrap()))]), "{ty} {mode} {start} + {incr}");
        }
    }

    #[test]
    fn set_out_of_range_values() {
        let mut dbs = vec![Db::new()];
        // SET returns the old value and stores the new one wrapped, saturated or not at all.
        assert_eq!(bf(&mut dbs, &["set", "u8", "0", "256", "get", "u8", "0"]), ints(&[Some(0), Some(0)]));
        assert_eq!(bf(&mut dbs, &["set", "u8", "0", "-1", "get", "u8", "0"]), ints(&[Some(0), Some(255)]));
        assert_eq!(bf(&mut dbs, &["overflow", "sat", "set", "u8", "0", "-5", "get", "u8", "0"]), ints(&[Some(255), Some(255)]));
        assert_eq!(bf(&mut dbs, &["overflow", "sat", "set", "i8", "0", "300", "get", "i8", "0"]), ints(&[Some(-1), Some(127)]));
        assert_eq!(bf(&mut dbs, &["overflow", "sat", "set", "i8", "0", "-300", "get", "i8", "0"]), ints(&[Some(127), Some(-128)]));
        assert_eq!(bf(&mut dbs, &["overflow", "fail", "set", "i8", "0", "128", "get", "i8", "0"]), ints(&[None, Some(-128)]));
        assert_eq!(bf(&mut dbs, &["set", "i8", "0", "128", "get", "i8", "0"]), ints(&[Some(-128), Some(-128)]));
        assert_eq!(bf(&mut dbs, &["set", "i1", "0", "1", "get", "i1", "0", "get", "u1", "0"]), ints(&[Some(-1), Some(-1), Some(1)]));
        assert_eq!(bf(&mut dbs, &["overflow", "fail", "set", "u63", "0", "-1"]), ints(&[None]));
        assert_eq!(bf(&mut dbs, &["set", "i64", "0", "-2", "get", "u63", "0", "get", "u63", "1"]), ints(&[Some(i64::MIN), Some(i64::MAX), Some(i64::MAX - 1)]));
    }

    #[test]
    fn hash_offsets_and_byte_boundaries() {
        let mut dbs = vec![Db::new()];
        // #2 of u8 is bit 16: the third byte.
        assert_eq!(bf(&mut dbs, &["set", "u8", "#2", "255"]), ints(&[Some(0)]));
        assert_eq!(get_bytes(&mut dbs, b"k"), Some(vec![0, 0, 255]));
        assert_eq!(bf(&mut dbs, &["get", "u8", "16", "get", "u4", "#4", "get", "u4", "#5", "get", "i5", "#3", "get", "i5", "15", "get", "i5", "17"]), ints(&[Some(255), Some(15), Some(15), Some(15), Some(15), Some(-1)]));
        // Reads past the end are zero-padded and do not grow the string.
        assert_eq!(bf(&mut dbs, &["get", "i64", "20", "get", "u63", "#1000"]), ints(&[Some(0xf << 60), Some(0)]));
        assert_eq!(get_bytes(&mut dbs, b"k"), Some(vec![0, 0, 255]));

        // A 12-bit field from bit 5 spans three bytes.
        let mut dbs = vec![Db::new()];
        assert_eq!(bf(&mut dbs, &["set", "u12", "5", "4095"]), ints(&[Some(0)]));
        assert_eq!(get_bytes(&mut dbs, b"k"), Some(vec![0b0000_0111, 0xff, 0b1000_0000]));
        assert_eq!(bf(&mut dbs, &["get", "u12", "5", "get", "i12", "5", "get", "u3", "4"]), ints(&[Some(4095), Some(-1), Some(3)]));

        // 64 bits from bit 7 span nine bytes; the string grows to cover them.
        let mut dbs = vec![Db::new()];
        assert_eq!(bf(&mut dbs, &["set", "i64", "7", "-1", "get", "u63", "8", "get", "i64", "7"]), ints(&[Some(0), Some(i64::MAX), Some(-1)]));
        assert_eq!(get_bytes(&mut dbs, b"k"), Some([&[1u8][..], &[0xff; 7], &[0xfe]].concat()));
    }

    /// A tiny deterministic generator (xorshift64*), so the cross-check needs no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// SET then GET of random fields in a 200-bit string, against a bit-by-bit model.
    #[test]
    fn random_fields_match_a_bit_model() {
        const BITS: u64 = 200;
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut dbs = vec![Db::new()];
        let mut model = vec![0u8; BITS as usize];
        for round in 0..3000 {
            let signed = rng.below(2) == 0;
            let bits = if signed { 1 + rng.below(64) } else { 1 + rng.below(63) } as u32;
            let offset = rng.below(BITS - bits as u64 + 1);
            let ty = format!("{}{bits}", if signed { 'i' } else { 'u' });
            let value = rng.next() as i64 >> rng.below(64);
            let stored = value as u64 & mask(bits);
            let old = (0..bits).fold(0u64, |acc, i| acc << 1 | model[(offset + i as u64) as usize] as u64);
            let old = if signed { sign_extend(old, bits) } else { old as i64 };
            for i in 0..bits {
                model[(offset + i as u64) as usize] = (stored >> (bits - 1 - i) & 1) as u8;
            }
            let got = bf(&mut dbs, &["set", &ty, &offset.to_string(), &value.to_string()]);
            assert_eq!(got, ints(&[Some(old)]), "round {round}: SET {ty} {offset} {value}");
            // Read back a random field, compared with the model.
            let (rsigned, rbits) = (rng.below(2) == 0, 1 + rng.below(63) as u32);
            let roffset = rng.below(BITS + 16);
            let raw = (0..rbits as u64).fold(0u64, |acc, i| acc << 1 | model.get((roffset + i) as usize).copied().unwrap_or(0) as u64);
            let want = if rsigned { sign_extend(raw, rbits) } else { raw as i64 };
            let rty = format!("{}{rbits}", if rsigned { 'i' } else { 'u' });
            let got = run(&mut dbs, &[b"bitfield_ro", b"k", b"get", rty.as_bytes(), roffset.to_string().as_bytes()]);
            assert_eq!(got, ints(&[Some(want)]), "round {round}: GET {rty} {roffset}");
        }
        let bytes = get_bytes(&mut dbs, b"k").unwrap();
        for (i, bit) in model.iter().enumerate() {
            assert_eq!((bytes.get(i / 8).copied().unwrap_or(0) >> (7 - i % 8)) & 1, *bit, "bit {i}");
        }
    }

    #[test]
    fn bitfield_errors_change_nothing() {
        let mut dbs = vec![Db::new()];
        let e = |m: &str| Frame::error(m.to_string());
        assert_eq!(bf(&mut dbs, &["set", "u64", "0", "1"]), e(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut dbs, &["get", "i65", "0"]), e(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut dbs, &["get", "I8", "0"]), e(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut dbs, &["get", "u08", "0"]), e(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut dbs, &["get", "u0", "0"]), e(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut dbs, &["get", "u8", "-1"]), e(ERR_BIT_OFFSET));
        assert_eq!(bf(&mut dbs, &["get", "u8", "#-1"]), e(ERR_BIT_OFFSET));
        assert_eq!(bf(&mut dbs, &["get", "u8", "4294967296"]), e(ERR_BIT_OFFSET));
        assert_eq!(bf(&mut dbs, &["get", "u8", "##1"]), e(ERR_BIT_OFFSET));
        assert_eq!(bf(&mut dbs, &["set", "u8", "0", "x"]), e(ERR_NOT_INTEGER));
        assert_eq!(bf(&mut dbs, &["overflow", "sometimes"]), e("ERR Invalid OVERFLOW type specified"));
        assert_eq!(bf(&mut dbs, &["get", "u8"]), e(ERR_SYNTAX));
        assert_eq!(bf(&mut dbs, &["overflow"]), e(ERR_SYNTAX));
        assert_eq!(bf(&mut dbs, &["set", "u8", "0", "1", "bogus"]), e(ERR_SYNTAX));
        assert_eq!(get_bytes(&mut dbs, b"k"), None, "no write ran");
        // The last bit a string may hold (proto-max-bulk-len 512 MB) is a valid GET offset.
        assert_eq!(bf(&mut dbs, &["get", "u1", "4294967295", "get", "u8", "#536870911"]), ints(&[Some(0), Some(0)]));
        assert_eq!(get_bytes(&mut dbs, b"k"), None, "GETs create nothing");
        let ro = |dbs: &mut [Db], args: &[&[u8]]| run(dbs, &[&[b"bitfield_ro".as_slice(), b"k"][..], args].concat());
        assert_eq!(ro(&mut dbs, &[b"set", b"u8", b"0", b"1"]), e("ERR BITFIELD_RO only supports the GET subcommand"));
        assert_eq!(ro(&mut dbs, &[b"set", b"u8", b"0", b"x"]), e(ERR_NOT_INTEGER));
        assert_eq!(ro(&mut dbs, &[]), Frame::Array(vec![]));
        run(&mut dbs, &[b"sadd", b"k", b"1"]);
        assert_eq!(ro(&mut dbs, &[b"get", b"u8", b"0"]), e(ERR_WRONGTYPE));
        assert_eq!(ro(&mut dbs, &[b"incrby", b"u8", b"0", b"1"]), e("ERR BITFIELD_RO only supports the GET subcommand"));
        assert_eq!(bf(&mut dbs, &["incrby", "u8", "0", "1"]), e(ERR_WRONGTYPE));
    }

    fn bitop(dbs: &mut [Db], args: &[&[u8]]) -> Frame {
        run(dbs, &[&[b"bitop".as_slice()][..], args].concat())
    }

    #[test]
    fn bitop_pads_and_replaces() {
        let mut dbs = vec![Db::new()];
        run(&mut dbs, &[b"set", b"a", b"\xff\x0f\xf0"]);
        run(&mut dbs, &[b"set", b"b", b"\x0f"]);
        assert_eq!(bitop(&mut dbs, &[b"and", b"d", b"a", b"b"]), Frame::Integer(3));
        assert_eq!(get_bytes(&mut dbs, b"d"), Some(vec![0x0f, 0, 0]));
        assert_eq!(bitop(&mut dbs, &[b"OR", b"d", b"a", b"b", b"missing"]), Frame::Integer(3));
        assert_eq!(get_bytes(&mut dbs, b"d"), Some(vec![0xff, 0x0f, 0xf0]));
        assert_eq!(bitop(&mut dbs, &[b"xor", b"d", b"a", b"b", b"a"]), Frame::Integer(3));
        assert_eq!(get_bytes(&mut dbs, b"d"), Some(vec![0x0f, 0, 0]));
        assert_eq!(bitop(&mut dbs, &[b"not", b"d", b"b"]), Frame::Integer(1));
        assert_eq!(get_bytes(&mut dbs, b"d"), Some(vec![0xf0]));
        // A missing source makes AND all zeros, as long as the longest source.
        assert_eq!(bitop(&mut dbs, &[b"and", b"d", b"a", b"missing"]), Frame::Integer(3));
        assert_eq!(get_bytes(&mut dbs, b"d"), Some(vec![0, 0, 0]));
        // The destination may be a source; its TTL goes.
        run(&mut dbs, &[b"expire", b"a", b"100"]);
        assert_eq!(bitop(&mut dbs, &[b"not", b"a", b"a"]), Frame::Integer(3));
        assert_eq!(get_bytes(&mut dbs, b"a"), Some(vec![0, 0xf0, 0x0f]));
        assert_eq!(run(&mut dbs, &[b"ttl", b"a"]), Frame::Integer(-1));
        // All sources empty or missing: the destination is deleted.
        run(&mut dbs, &[b"set", b"e", b""]);
        assert_eq!(bitop(&mut dbs, &[b"or", b"d", b"e", b"missing"]), Frame::Integer(0));
        assert_eq!(get_bytes(&mut dbs, b"d"), None);
    }

    #[test]
    fn bitop_errors() {
        let mut dbs = vec![Db::new()];
        run(&mut dbs, &[b"set", b"a", b"x"]);
        run(&mut dbs, &[b"sadd", b"s", b"1"]);
        let e = |m: &str| Frame::error(m.to_string());
        assert_eq!(bitop(&mut dbs, &[b"nand", b"d", b"a"]), e(ERR_SYNTAX));
        assert_eq!(bitop(&mut dbs, &[b"not", b"d", b"a", b"a"]), e("ERR BITOP NOT must be called with a single source key."));
        assert_eq!(bitop(&mut dbs, &[b"or", b"d", b"missing", b"s", b"a"]), e(ERR_WRONGTYPE));
        assert_eq!(bitop(&mut dbs, &[b"not", b"d", b"s"]), e(ERR_WRONGTYPE));
        assert_eq!(get_bytes(&mut dbs, b"d"), None);
        // The destination's type does not matter.
        assert_eq!(bitop(&mut dbs, &[b"not", b"s", b"a"]), Frame::Integer(1));
        assert_eq!(get_bytes(&mut dbs, b"s"), Some(vec![!b'x']));
    }

    /// The word-at-a-time kernel against a bytewise one, over lengths that straddle words
    /// and blocks.
    #[test]
    fn combine_matches_bytewise() {
        let mut rng = Rng(7);
        for lens in [vec![0usize, 1, 7], vec![8, 9, 15, 16], vec![BLOCK_BYTES + 3, 5, BLOCK_BYTES * 2 + 9], vec![100]] {
            let srcs: Vec<Vec<u8>> = lens.iter().map(|&n| (0..n).map(|_| rng.next() as u8).collect()).collect();
            let views: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
            for op in [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not] {
                // NOT has one source, so the result is exactly as long as it.
                let views = if op == BitOp::Not { &views[views.len() - 1..] } else { &views[..] };
                let len = views.iter().map(|s| s.len()).max().unwrap();
                let mut out = vec![0u8; len];
                combine(op, views, &mut out);
                let padded = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
                let want: Vec<u8> = (0..len)
                    .map(|i| match op {
                        BitOp::Not => !padded(views[0], i),
                        BitOp::And => views.iter().fold(0xff, |acc, s| acc & padded(s, i)),
                        BitOp::Or => views.iter().fold(0, |acc, s| acc | padded(s, i)),
                        BitOp::Xor => views.iter().fold(0, |acc, s| acc ^ padded(s, i)),
                    })
                    .collect();
                assert_eq!(out, want, "{op:?} {lens:?}");
            }
        }
    }
}
