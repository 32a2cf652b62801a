//! Serialization (HLL storage specification v1.0.0) as postgresql-hll 2.17.
//!
//! Writing: register arrays are written SPARSE when sparseon is set and
//! k * (log2m + regwidth) < m * regwidth (strictly, k = non-zero registers),
//! else FULL: postgresql-hll's `multiset_pack` with its default automatic
//! sparse cutoff. An all-zero array with sparseon is therefore a SPARSE value
//! with no entries (just the header).
//!
//! Reading is strict: anything postgresql-hll rejects is rejected, and so is
//! anything it would never write even where it happens to accept it (those
//! cases are marked "stricter" below). What it accepts and we keep accepting:
//! an EXPLICIT list longer than the threshold (up to 16383 values, or the
//! threshold when larger), an EXPLICIT value with expthresh 0, an EXPLICIT
//! value with no elements, a SPARSE value with sparseon 0, and a FULL value
//! that would have been written SPARSE. Such inputs are re-written in
//! canonical form by `to_bytes`.

use crate::bits::{BitReader, BitWriter};
use crate::error::{corrupt, HllError};
use crate::params::{Params, PG_MAX_EXPLICIT};
use crate::sketch::{Hll, Kind, State};

const TYPE_UNDEFINED: u8 = 0;
const TYPE_EMPTY: u8 = 1;
const TYPE_EXPLICIT: u8 = 2;
const TYPE_SPARSE: u8 = 3;
const TYPE_FULL: u8 = 4;

/// Whether a register array with `nonzero` filled registers is written SPARSE.
fn use_sparse(params: Params, nonzero: usize) -> bool {
    let chunk = u64::from(params.log2m() + params.regwidth());
    let full_bits = params.num_registers() as u64 * u64::from(params.regwidth());
    params.sparseon() && (nonzero as u64) * chunk < full_bits
}

fn count_nonzero(regs: &[u8]) -> usize {
    regs.iter().map(|&r| usize::from(r != 0)).sum()
}

pub(crate) fn kind_and_count(hll: &Hll) -> (Kind, usize) {
    match &hll.state {
        State::Undefined => (Kind::Undefined, 0),
        State::Empty => (Kind::Empty, 0),
        State::Explicit(values) => (Kind::Explicit, values.len()),
        State::Registers(regs) => {
            let nonzero = count_nonzero(regs);
            let kind = if use_sparse(hll.params, nonzero) {
                Kind::Sparse
            } else {
                Kind::Full
            };
            (kind, nonzero)
        }
    }
}

pub(crate) fn serialized_len(hll: &Hll, kind: Kind, count: usize) -> usize {
    let p = hll.params;
    3 + match kind {
        Kind::Undefined | Kind::Empty => 0,
        Kind::Explicit => 8 * count,
        Kind::Sparse => (count as u64 * u64::from(p.log2m() + p.regwidth())).div_ceil(8) as usize,
        Kind::Full => p.full_payload_len() as usize,
    }
}

impl Hll {
    /// The serialized form, byte-identical to what postgresql-hll writes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_bytes(&mut out);
        out
    }

    /// Appends the serialized form to `out`.
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        let p = self.params;
        let (kind, count) = kind_and_count(self);
        out.reserve(serialized_len(self, kind, count));
        let type_code = match kind {
            Kind::Undefined => TYPE_UNDEFINED,
            Kind::Empty => TYPE_EMPTY,
            Kind::Explicit => TYPE_EXPLICIT,
            Kind::Sparse => TYPE_SPARSE,
            Kind::Full => TYPE_FULL,
        };
        out.extend_from_slice(&p.header(type_code));
        match &self.state {
            State::Undefined | State::Empty => {}
            State::Explicit(values) => {
                for v in values {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            State::Registers(regs) => {
                let width = p.regwidth();
                let mut w = BitWriter::new(out);
                if kind == Kind::Sparse {
                    for (index, &r) in regs.iter().enumerate().filter(|(_, &r)| r != 0) {
                        w.write((index as u64) << width | u64::from(r), p.log2m() + width);
                    }
                } else {
                    for &r in regs {
                        w.write(u64::from(r), width);
                    }
                }
                w.finish();
            }
        }
    }

    /// Parses a serialized value (postgresql-hll or java-hll output). Never
    /// panics: malformed input of any kind is an [`HllError::Corrupt`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Hll, HllError> {
        let [b0, b1, b2, ..] = *bytes else {
            return Err(corrupt(format!(
                "{} bytes is shorter than the 3-byte header",
                bytes.len()
            )));
        };
        let version = b0 >> 4;
        if version != 1 {
            return Err(corrupt(format!(
                "unknown schema version {version} (only 1 is supported)"
            )));
        }
        let type_code = b0 & 0x0f;
        if type_code > TYPE_FULL {
            return Err(corrupt(format!(
                "unknown type {type_code} (expected 0 to 4)"
            )));
        }
        let params = Params::from_header(b1, b2)?;
        let payload = &bytes[3..];
        let state = match type_code {
            TYPE_UNDEFINED | TYPE_EMPTY => {
                if !payload.is_empty() {
                    let name = if type_code == TYPE_EMPTY {
                        "empty"
                    } else {
                        "undefined"
                    };
                    return Err(corrupt(format!(
                        "{name} value followed by {} bytes",
                        payload.len()
                    )));
                }
                if type_code == TYPE_EMPTY {
                    State::Empty
                } else {
                    State::Undefined
                }
            }
            TYPE_EXPLICIT => State::Explicit(read_explicit(params, payload)?),
            TYPE_SPARSE => State::Registers(read_sparse(params, payload)?),
            _ => State::Registers(read_full(params, payload)?),
        };
        Ok(Hll { params, state })
    }
}

fn read_explicit(params: Params, payload: &[u8]) -> Result<Vec<i64>, HllError> {
    if !payload.len().is_multiple_of(8) {
        return Err(corrupt(format!(
            "explicit payload of {} bytes is not a whole number of 8-byte values",
            payload.len()
        )));
    }
    let count = payload.len() / 8;
    let limit = params.explicit_threshold().max(PG_MAX_EXPLICIT);
    if count > limit {
        return Err(corrupt(format!(
            "explicit value has {count} elements, more than the limit of {limit}"
        )));
    }
    let values: Vec<i64> = payload
        .chunks_exact(8)
        .map(|c| i64::from_be_bytes(c.try_into().expect("8-byte chunk")))
        .collect();
    if let Some(i) = values.windows(2).position(|w| w[0] >= w[1]) {
        return Err(corrupt(format!(
            "explicit values must be strictly ascending: element {} ({}) is followed by {}",
            i,
            values[i],
            values[i + 1]
        )));
    }
    Ok(values)
}

fn check_register(params: Params, index: u64, value: u64) -> Result<(), HllError> {
    // Stricter: postgresql-hll stores any value that fits the register width.
    if value > u64::from(params.max_register()) {
        return Err(corrupt(format!(
            "register {index} holds {value}, more than the maximum {} for log2m {} and regwidth {}",
            params.max_register(),
            params.log2m(),
            params.regwidth()
        )));
    }
    Ok(())
}

fn read_full(params: Params, payload: &[u8]) -> Result<Vec<u8>, HllError> {
    let expected = params.full_payload_len();
    if payload.len() as u64 != expected {
        return Err(corrupt(format!(
            "full payload is {} bytes, expected {expected} for log2m {} and regwidth {}",
            payload.len(),
            params.log2m(),
            params.regwidth()
        )));
    }
    // m * regwidth is a multiple of 8 (m >= 16), so there is no padding.
    let width = params.regwidth();
    let mut reader = BitReader::new(payload);
    let mut regs = vec![0u8; params.num_registers()];
    for (index, reg) in regs.iter_mut().enumerate() {
        let value = reader.read(width);
        check_register(params, index as u64, value)?;
        *reg = value as u8;
    }
    Ok(regs)
}

fn read_sparse(params: Params, payload: &[u8]) -> Result<Vec<u8>, HllError> {
    let width = params.regwidth();
    let chunk = u64::from(params.log2m() + width);
    let bits = payload.len() as u64 * 8;
    let slots = bits / chunk;
    let mut reader = BitReader::new(payload);
    let mut regs = vec![0u8; params.num_registers()];
    let mut entries = 0u64;
    let mut last_index: Option<u64> = None;
    while entries < slots {
        let word = reader.read(chunk as u32);
        let (index, value) = (word >> width, word & ((1u64 << width) - 1));
        if value == 0 {
            // Only the zero padding can decode as a zero-valued word: when
            // log2m + regwidth < 8 the last byte's padding may hold a whole
            // word. postgresql-hll reads it as "register 0 = 0" and so loses
            // register 0; we treat it as padding (checked below).
            break;
        }
        if last_index.is_some_and(|last| index <= last) {
            // Stricter: postgresql-hll lets later entries overwrite earlier ones.
            return Err(corrupt(format!(
                "sparse entries must have strictly ascending register indexes: entry {entries} has index {index} after {}",
                last_index.unwrap_or(0)
            )));
        }
        check_register(params, index, value)?;
        regs[index as usize] = value as u8;
        last_index = Some(index);
        entries += 1;
    }
    // The payload must be exactly the entries plus less than a byte of zero
    // padding (postgresql-hll checks the length; zero padding is stricter).
    let used = entries * chunk;
    if (used.div_ceil(8)) != payload.len() as u64 {
        return Err(corrupt(format!(
            "sparse payload of {} bytes does not match its {entries} entries of {chunk} bits (or has a zero-valued entry)",
            payload.len()
        )));
    }
    let pad_bits = bits - used;
    if pad_bits > 0 && payload[payload.len() - 1] & ((1u8 << pad_bits) - 1) != 0 {
        return Err(corrupt("sparse payload has non-zero padding bits"));
    }
    Ok(regs)
}
