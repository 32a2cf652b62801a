//! Sparse representation: a run-length encoding of the 16384 registers that
//! follows the 16-byte header, with three opcodes:
//!
//! * `ZERO`  `00xxxxxx`          — 1..=64 registers set to 0,
//! * `XZERO` `01xxxxxx yyyyyyyy` — 1..=16384 registers set to 0,
//! * `VAL`   `1vvvvvxx`          — 1..=4 registers set to 1..=32.
//!
//! [`set`] is a line-by-line port of Redis 7.0 `hllSparseSet` (opcode
//! splitting, the 5-opcode merge pass, promotion to dense when a value is
//! above 32 or the string would grow past `hll-sparse-max-bytes`), so that
//! the produced bytes are identical to Redis's. The other functions port
//! `hllSparseToDense`, `hllSparseRegHisto` and the sparse half of `hllMerge`.
//!
//! Corrupt input never panics: everything is bounds-checked and a run that
//! goes past register 16383 makes the value invalid (as in Redis).
//!
//! An `XZERO` truncated at the end of the string reads its second byte from
//! the byte after the string: the SDS terminator in Redis, `term` here. It is
//! normally 0, but splitting such an opcode makes Redis write the new last
//! opcode's second byte there; `term` tracks that so even corrupt values
//! evolve exactly as in Redis while the value lives in one [`crate::RedisHll`].

use crate::dense;
use crate::{HllError, DENSE_SIZE, ENCODING_DENSE, ENCODING_OFFSET, HDR_SIZE, HLL_REGISTERS};

const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;

/// The byte at `i`, or the terminator `term` past the end.
#[inline]
fn byte_at(bytes: &[u8], term: u8, i: usize) -> u8 {
    bytes.get(i).copied().unwrap_or(term)
}
#[inline]
fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}
#[inline]
fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}
#[inline]
fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}
#[inline]
fn zero_len(b: u8) -> usize {
    usize::from(b & 0x3f) + 1
}
#[inline]
fn xzero_len(b0: u8, b1: u8) -> usize {
    ((usize::from(b0 & 0x3f) << 8) | usize::from(b1)) + 1
}
#[inline]
fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}
#[inline]
fn val_len(b: u8) -> usize {
    usize::from(b & 0x3) + 1
}
/// `HLL_SPARSE_VAL_SET`: `val` in 1..=32, `len` in 1..=4.
#[inline]
fn val_op(val: u8, len: usize) -> u8 {
    ((val - 1) << 2) | ((len - 1) as u8) | 0x80
}
/// Appends a ZERO or XZERO opcode for `len` (1..=16384) zero registers.
#[inline]
fn push_zeros(seq: &mut [u8; 5], n: &mut usize, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        seq[*n] = ((l >> 8) as u8) | 0x40;
        seq[*n + 1] = (l & 0xff) as u8;
        *n += 2;
    } else {
        seq[*n] = (len - 1) as u8;
        *n += 1;
    }
}

/// One decoded opcode: a run of `len` registers with value `val` (0 for
/// ZERO/XZERO), taking `oplen` bytes.
struct Op {
    val: u8,
    len: usize,
    oplen: usize,
}

#[inline]
fn decode(bytes: &[u8], term: u8, p: usize) -> Op {
    let b = bytes[p];
    if is_zero(b) {
        Op {
            val: 0,
            len: zero_len(b),
            oplen: 1,
        }
    } else if is_xzero(b) {
        Op {
            val: 0,
            len: xzero_len(b, byte_at(bytes, term, p + 1)),
            oplen: 2,
        }
    } else {
        Op {
            val: val_value(b),
            len: val_len(b),
            oplen: 1,
        }
    }
}

/// Walks the opcodes of a whole sparse object (header included), calling
/// `f(first_register, value, run_length)` for every run. Returns false —
/// Redis's "invalid" — unless the runs cover exactly 16384 registers.
/// Stops early at the first run that would go past the last register.
fn walk(bytes: &[u8], term: u8, mut f: impl FnMut(usize, u8, usize)) -> bool {
    let mut idx = 0usize;
    let mut p = HDR_SIZE;
    while p < bytes.len() {
        let op = decode(bytes, term, p);
        if idx + op.len > HLL_REGISTERS {
            return false;
        }
        f(idx, op.val, op.len);
        idx += op.len;
        p += op.oplen;
    }
    idx == HLL_REGISTERS
}

/// True if the sparse body describes exactly 16384 registers.
pub(crate) fn is_valid(bytes: &[u8], term: u8) -> bool {
    walk(bytes, term, |_, _, _| {})
}

/// `hllSparseRegHisto`; false if the representation is invalid.
pub(crate) fn histogram(bytes: &[u8], term: u8, histo: &mut [u32; 64]) -> bool {
    walk(bytes, term, |_, val, len| {
        histo[usize::from(val)] += len as u32
    })
}

/// Sparse half of `hllMerge`; false if the representation is invalid.
pub(crate) fn merge_into(bytes: &[u8], term: u8, max: &mut [u8; HLL_REGISTERS]) -> bool {
    walk(bytes, term, |first, val, len| {
        if val != 0 {
            for m in &mut max[first..first + len] {
                if val > *m {
                    *m = val;
                }
            }
        }
    })
}

/// `hllSparseToDense`: the dense object, with the header (magic, unused
/// bytes and cached cardinality) copied from the sparse one. `None` if the
/// sparse representation is invalid.
/// PFDEBUG DECODE's text: each opcode as `z:len` (ZERO), `Z:len` (XZERO) or `v:value,len`
/// (VAL), separated by spaces, read exactly as Redis reads them (no validation of the runs;
/// a truncated XZERO reads the terminator).
pub(crate) fn describe(bytes: &[u8], term: u8) -> String {
    let mut out = String::new();
    let mut p = HDR_SIZE;
    while p < bytes.len() {
        if !out.is_empty() {
            out.push(' ');
        }
        let b = bytes[p];
        let op = decode(bytes, term, p);
        if is_zero(b) {
            out.push_str(&format!("z:{}", op.len));
        } else if is_xzero(b) {
            out.push_str(&format!("Z:{}", op.len));
        } else {
            out.push_str(&format!("v:{},{}", op.val, op.len));
        }
        p += op.oplen;
    }
    out
}

pub(crate) fn to_dense(bytes: &[u8], term: u8) -> Option<Vec<u8>> {
    let mut out = vec![0u8; DENSE_SIZE];
    out[..HDR_SIZE].copy_from_slice(&bytes[..HDR_SIZE]);
    out[ENCODING_OFFSET] = ENCODING_DENSE;
    let regs = &mut out[HDR_SIZE..];
    let valid = walk(bytes, term, |first, val, len| {
        if val != 0 {
            for i in first..first + len {
                dense::set(regs, i, val);
            }
        }
    });
    valid.then_some(out)
}

/// `hllSparseSet`: raise register `index` (< 16384) to `count` (1..=63) in
/// the sparse object `bytes`, possibly promoting it to dense. Returns
/// whether a register changed. The cached cardinality is invalidated when
/// the sparse form is updated in place (not on promotion: the caller does it
/// as PFADD does). `term` is the byte after the string (see module docs);
/// it is 0 after a promotion.
pub(crate) fn set(
    bytes: &mut Vec<u8>,
    term: &mut u8,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    if count > VAL_MAX_VALUE {
        return promote(bytes, term, index, count);
    }

    // Step 1: locate the opcode covering `index`.
    let end = bytes.len();
    let mut p = HDR_SIZE;
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let mut span = 0usize;
    while p < end {
        let op = decode(bytes, *term, p);
        span = op.len;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += op.oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(HllError::Corrupted);
    }

    let b = bytes[p];
    let (zero, xzero) = (is_zero(b), is_xzero(b));
    let runlen = span;

    // Cases A and B: a VAL opcode.
    if is_val(b) {
        if val_value(b) >= count {
            return Ok(false);
        }
        if runlen == 1 {
            bytes[p] = val_op(count, 1);
            return Ok(updated(bytes, term, prev));
        }
    }
    // Case C: ZERO of length 1.
    if zero && runlen == 1 {
        bytes[p] = val_op(count, 1);
        return Ok(updated(bytes, term, prev));
    }

    // Case D: split the opcode into up to three.
    let mut seq = [0u8; 5];
    let mut n = 0usize;
    let last = first + span - 1;
    if zero || xzero {
        if index != first {
            push_zeros(&mut seq, &mut n, index - first);
        }
        seq[n] = val_op(count, 1);
        n += 1;
        if index != last {
            push_zeros(&mut seq, &mut n, last - index);
        }
    } else {
        let curval = val_value(b);
        if index != first {
            seq[n] = val_op(curval, index - first);
            n += 1;
        }
        seq[n] = val_op(count, 1);
        n += 1;
        if index != last {
            seq[n] = val_op(curval, last - index);
            n += 1;
        }
    }

    // Step 3: substitute the new sequence for the old opcode.
    let oldlen = if xzero { 2 } else { 1 };
    if n > oldlen && end + (n - oldlen) > sparse_max_bytes {
        return promote(bytes, term, index, count);
    }
    let new_len = end + n - oldlen;
    // An XZERO truncated at the end only has one byte in the string; Redis
    // then copies the whole sequence at `p`, so its last byte lands on the
    // terminator. Otherwise `sdsIncrLen` leaves a zero terminator.
    let tail = (p + oldlen).min(end);
    bytes.splice(p..tail, seq[..n].iter().copied());
    bytes.truncate(new_len);
    *term = if p + oldlen > end { seq[n - 1] } else { 0 };
    Ok(updated(bytes, term, prev))
}

/// Step 4 of `hllSparseSet`: merge adjacent VAL opcodes with equal values,
/// scanning up to 5 opcodes from `prev`; then invalidate the cache.
fn updated(bytes: &mut Vec<u8>, term: &mut u8, prev: Option<usize>) -> bool {
    let mut p = prev.unwrap_or(HDR_SIZE);
    let mut scanlen = 5;
    while p < bytes.len() && scanlen > 0 {
        scanlen -= 1;
        let b = bytes[p];
        if is_xzero(b) {
            p += 2;
            continue;
        } else if is_zero(b) {
            p += 1;
            continue;
        }
        if let Some(&b1) = bytes.get(p + 1) {
            if is_val(b1) && val_value(b) == val_value(b1) {
                let len = val_len(b) + val_len(b1);
                if len <= VAL_MAX_LEN {
                    bytes[p + 1] = val_op(val_value(b), len);
                    bytes.remove(p);
                    *term = 0;
                    continue;
                }
            }
        }
        p += 1;
    }
    crate::invalidate(bytes);
    true
}

/// The `promote:` label: convert to dense, then `hllDenseSet`.
fn promote(bytes: &mut Vec<u8>, term: &mut u8, index: usize, count: u8) -> Result<bool, HllError> {
    let mut dense = to_dense(bytes, *term).ok_or(HllError::Corrupted)?;
    let changed = dense::set_if_greater(&mut dense[HDR_SIZE..], index, count);
    *bytes = dense;
    *term = 0;
    Ok(changed)
}
