//! The [`Hll`] value: its in-memory states, adding and union.
//!
//! In memory a sketch is one of four states; SPARSE and FULL are only two
//! ways of *writing* the same register array, chosen at serialization time
//! exactly as postgresql-hll does (see `codec.rs`), so the in-memory form is
//! always a plain array with one byte per register and an add costs an index
//! mask, a trailing-zero count and a compare. Explicit values are a sorted
//! `Vec<i64>` (signed order, as written): sets are small (<= 16383 in
//! postgresql-hll) and binary search plus insert beats a hash set there.
//!
//! Transitions follow postgresql-hll's `multiset_add` / `multiset_union`
//! literally, including its corner cases for inputs it accepts but never
//! writes: an explicit list read with more values than the threshold keeps
//! growing on add, because postgresql-hll promotes only when the count
//! *equals* the threshold (we stop that growth at 16383 values, where
//! postgresql-hll would overrun its buffer), while a union with anything new
//! promotes it. Adding or merging into UNDEFINED changes nothing.

use crate::error::HllError;
use crate::params::{Params, PG_MAX_EXPLICIT};

#[derive(Clone, PartialEq, Eq)]
pub(crate) enum State {
    /// Absorbs everything; cardinality is NULL/None. Only read from bytes.
    Undefined,
    Empty,
    /// Distinct hashed values, strictly ascending as signed integers.
    Explicit(Vec<i64>),
    /// One byte per register (SPARSE or FULL when written).
    Registers(Vec<u8>),
}

/// Capacity of a new explicit list (32 bytes).
const EXPLICIT_FIRST_CAPACITY: usize = 4;

/// A HyperLogLog sketch, byte-compatible with postgresql-hll 2.17.
#[derive(Clone, PartialEq, Eq)]
pub struct Hll {
    pub(crate) params: Params,
    pub(crate) state: State,
}

/// Serialized representation kinds (the type nibble of the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Type 0: the result of combining with an undefined value.
    Undefined,
    /// Type 1: no value added yet.
    Empty,
    /// Type 2: the distinct hashed values themselves.
    Explicit,
    /// Type 3: (index, value) of each non-zero register.
    Sparse,
    /// Type 4: every register.
    Full,
}

impl Kind {
    /// Upper-case name: `UNDEFINED`, `EMPTY`, `EXPLICIT`, `SPARSE` or `FULL`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Undefined => "UNDEFINED",
            Kind::Empty => "EMPTY",
            Kind::Explicit => "EXPLICIT",
            Kind::Sparse => "SPARSE",
            Kind::Full => "FULL",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`Hll::info`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// How [`Hll::to_bytes`] would write the sketch now.
    pub kind: Kind,
    /// Number of explicit values, or of non-zero registers (SPARSE/FULL);
    /// 0 for EMPTY and UNDEFINED.
    pub count: usize,
    /// Length of [`Hll::to_bytes`]'s output.
    pub serialized_len: usize,
}

/// Sets register `hash & (m - 1)` to max(itself, rho) where rho is one more than
/// the trailing zeros of the remaining bits, capped at 2^regwidth - 1
/// (postgresql-hll's `compressed_add`). Returns whether the register grew.
#[inline(always)]
fn add_to_registers(regs: &mut [u8], log2m: u32, regwidth: u32, hash: i64) -> bool {
    let hash = hash as u64;
    let index = (hash & ((1u64 << log2m) - 1)) as usize;
    let rest = hash >> log2m;
    if rest == 0 {
        return false;
    }
    let rho = (rest.trailing_zeros() + 1).min((1 << regwidth) - 1) as u8;
    let reg = &mut regs[index];
    if *reg < rho {
        *reg = rho;
        true
    } else {
        false
    }
}

impl Hll {
    /// A new EMPTY sketch.
    pub fn new(params: Params) -> Hll {
        Hll {
            params,
            state: State::Empty,
        }
    }

    /// The sketch's parameters.
    pub fn params(&self) -> Params {
        self.params
    }

    /// Adds an already-hashed value (e.g. from [`hash_bigint`](crate::hash_bigint)),
    /// like postgresql-hll's `hll_add`. Returns true when the sketch changed
    /// (a value was inserted, the representation was promoted, or a register
    /// grew). Adding to an UNDEFINED sketch does nothing.
    #[inline]
    pub fn add_raw(&mut self, hash: i64) -> bool {
        if let State::Registers(regs) = &mut self.state {
            return add_to_registers(regs, self.params.log2m(), self.params.regwidth(), hash);
        }
        self.add_slow(hash)
    }

    #[cold]
    fn add_slow(&mut self, hash: i64) -> bool {
        let threshold = self.params.explicit_threshold();
        match &mut self.state {
            State::Undefined => false,
            State::Registers(_) => unreachable!("handled by add_raw"),
            State::Empty if threshold == 0 => {
                let mut regs = self.zero_registers();
                add_to_registers(&mut regs, self.params.log2m(), self.params.regwidth(), hash);
                self.state = State::Registers(regs);
                true
            }
            State::Empty => {
                // Room for a few values at once: growing from one (1, 4, 8...) reallocated
                // on the second add already, and a counter rarely stays at one value.
                let mut values = Vec::with_capacity(threshold.clamp(1, EXPLICIT_FIRST_CAPACITY));
                values.push(hash);
                self.state = State::Explicit(values);
                true
            }
            State::Explicit(values) => match values.binary_search(&hash) {
                Ok(_) => false,
                // postgresql-hll promotes only when the count equals the
                // threshold; the extra bound keeps an oversized explicit input
                // from growing forever (postgresql-hll would overrun its buffer).
                Err(_)
                    if values.len() == threshold
                        || values.len() >= threshold.max(PG_MAX_EXPLICIT) =>
                {
                    let values = std::mem::take(values);
                    self.promote(&values);
                    let (log2m, regwidth) = (self.params.log2m(), self.params.regwidth());
                    if let State::Registers(regs) = &mut self.state {
                        add_to_registers(regs, log2m, regwidth, hash);
                    }
                    true
                }
                Err(pos) => {
                    values.insert(pos, hash);
                    true
                }
            },
        }
    }

    fn zero_registers(&self) -> Vec<u8> {
        vec![0; self.params.num_registers()]
    }

    /// Replaces the state with registers holding `values`.
    fn promote(&mut self, values: &[i64]) {
        let mut regs = self.zero_registers();
        for &v in values {
            add_to_registers(&mut regs, self.params.log2m(), self.params.regwidth(), v);
        }
        self.state = State::Registers(regs);
    }

    /// Merges `other` into `self` (postgresql-hll's `hll_union`). Both must have
    /// the same four parameters, else an error naming each difference.
    /// Returns true when `self` changed.
    pub fn union(&mut self, other: &Hll) -> Result<bool, HllError> {
        if let Some(diff) = self.params.mismatch(&other.params) {
            return Err(HllError::ParamMismatch(diff));
        }
        let (log2m, regwidth) = (self.params.log2m(), self.params.regwidth());
        let changed = match (&mut self.state, &other.state) {
            (State::Undefined, _) => false,
            (_, State::Undefined) => {
                self.state = State::Undefined;
                true
            }
            (_, State::Empty) => false,
            (State::Empty, b) => {
                self.state = b.clone();
                true
            }
            (State::Explicit(a), State::Explicit(b)) => {
                let merged = merge_sorted(a, b);
                if merged.len() == a.len() {
                    false
                } else {
                    // postgresql-hll appends new values while below the
                    // threshold and promotes at the first one that does not
                    // fit: i.e. it promotes iff the union is larger.
                    if merged.len() > self.params.explicit_threshold() {
                        self.promote(&merged);
                    } else {
                        *a = merged;
                    }
                    true
                }
            }
            (State::Explicit(a), State::Registers(b)) => {
                let mut regs = b.clone();
                for &v in a.iter() {
                    add_to_registers(&mut regs, log2m, regwidth, v);
                }
                self.state = State::Registers(regs);
                true
            }
            (State::Registers(a), State::Explicit(b)) => {
                let mut changed = false;
                for &v in b {
                    changed |= add_to_registers(a, log2m, regwidth, v);
                }
                changed
            }
            (State::Registers(a), State::Registers(b)) => max_registers(a, b),
        };
        Ok(changed)
    }

    /// The estimated number of distinct values, unrounded as postgresql-hll's
    /// `hll_cardinality` returns it; `None` for an UNDEFINED sketch.
    pub fn cardinality(&self) -> Option<f64> {
        match &self.state {
            State::Undefined => None,
            State::Empty => Some(0.0),
            State::Explicit(values) => Some(values.len() as f64),
            State::Registers(regs) => Some(crate::estimate::estimate(regs, self.params)),
        }
    }

    /// Representation, element or non-zero register count, and serialized size.
    pub fn info(&self) -> Info {
        let (kind, count) = crate::codec::kind_and_count(self);
        Info {
            kind,
            count,
            serialized_len: crate::codec::serialized_len(self, kind, count),
        }
    }

    /// The register array (one byte per register) when the sketch is SPARSE
    /// or FULL, else `None`.
    pub fn registers(&self) -> Option<&[u8]> {
        match &self.state {
            State::Registers(regs) => Some(regs),
            _ => None,
        }
    }

    /// The explicit values (ascending, signed) when the sketch is EXPLICIT.
    pub fn explicit_values(&self) -> Option<&[i64]> {
        match &self.state {
            State::Explicit(values) => Some(values),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Hll {
    /// A summary: registers are not listed (there may be 2^31 of them).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.info();
        f.debug_struct("Hll")
            .field("params", &self.params)
            .field("kind", &info.kind)
            .field("count", &info.count)
            .finish()
    }
}

/// Union of two strictly ascending lists.
fn merge_sorted(a: &[i64], b: &[i64]) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Register-wise max in place; written branch-free so it vectorizes.
fn max_registers(a: &mut [u8], b: &[u8]) -> bool {
    let mut grew = 0u8;
    for (x, &y) in a.iter_mut().zip(b) {
        grew |= u8::from(y > *x);
        *x = (*x).max(y);
    }
    grew != 0
}
