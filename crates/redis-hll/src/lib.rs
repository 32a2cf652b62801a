//! Redis 7.0 HyperLogLog values, byte-for-byte.
//!
//! A Redis HyperLogLog is an ordinary string: a 16-byte header
//! (`"HYLL"`, encoding byte 0 = dense / 1 = sparse, 3 unused bytes, 8 bytes
//! of little-endian cached cardinality whose top bit set means "stale")
//! followed by either 12288 bytes of packed 6-bit registers (dense) or a
//! run-length encoding of them (sparse). [`RedisHll`] keeps exactly those
//! bytes and ports the algorithms of Redis 7.0 `src/hyperloglog.c` so that
//! `GET`/`SET`, replication and values copied from Redis just work: the same
//! PFADD on the same bytes yields the same bytes, reply and counts.
//!
//! No I/O and no `unsafe`; nothing panics on any input.
//!
//! # Implementing the commands (mirrors `pfaddCommand` & co.)
//!
//! Let `max_bytes` be the `hll-sparse-max-bytes` setting
//! ([`DEFAULT_SPARSE_MAX_BYTES`]). For each existing key, in argument order,
//! first check it is a string (otherwise the usual
//! `WRONGTYPE Operation against a key holding the wrong kind of value`) and
//! then call [`RedisHll::from_bytes`]; reply [`HllError::redis_message`] on
//! any `Err`.
//!
//! * **PFADD key el...** — missing key: `h = RedisHll::new()`,
//!   `h.invalidate_cache()`, reply 1 whatever the elements. Existing key:
//!   `updated |= h.add(el, max_bytes)?` for each element; on `Err` reply the
//!   error but still store `h` (Redis modifies the value in place, so earlier
//!   elements stay added). Store `h` and reply 1 if anything was updated, else
//!   0 (then the value is unchanged).
//! * **PFCOUNT key** — missing: 0. Else `h.count()` and store `h` back: a
//!   stale cache is recomputed and written into the value (Redis counts that
//!   as a write). Reply the `u64` **as `i64`** (Redis uses
//!   `addReplyLongLong`; only hand-made dense strings can exceed `i64::MAX`).
//! * **PFCOUNT k1 k2...** — `let mut regs = [0u8; HLL_REGISTERS]`, then
//!   `h.merge_into(&mut regs)?` per existing key in order, reply
//!   `RedisHll::count_registers(&regs) as i64`. Values are not modified.
//! * **PFMERGE dest src...** — for `dest` (if it exists) then each source
//!   that exists, in order: `use_dense |= h.is_dense(); h.merge_into(&mut
//!   regs)?`. Then `d = existing dest or RedisHll::new()`,
//!   `d.store_merged(&regs, use_dense, max_bytes)?`, store `d`, reply OK.
//!   [`RedisHll::pfmerge`] does all of that for already-parsed values.
//!
//! # Errors
//!
//! * [`HllError::NotHll`] → `WRONGTYPE Key is not a valid HyperLogLog string
//!   value.` (`isHLLObjectOrReply`: shorter than 16 bytes, bad magic,
//!   encoding > 1, dense not exactly 12304 bytes).
//! * [`HllError::Corrupted`] → `INVALIDOBJ Corrupted HLL object detected`
//!   (a sparse body that does not describe exactly 16384 registers, found
//!   when the body is used). Like Redis, [`RedisHll::from_bytes`] does not
//!   scan the sparse body, so e.g. PFCOUNT on a corrupt body with a valid
//!   cached cardinality returns the cache; [`RedisHll::validate`] scans it.
//!
//! Known differences from Redis 7.0, on hand-crafted corrupt values only:
//! register counters are not C `int`s, so a sparse body of ~512 KiB whose
//! runs wrap a 32-bit counter back to 16384 is `Corrupted` here (Redis
//! 7.0.15's CVE-2025-32023); and a truncated trailing `XZERO` reads its
//! second byte from the byte after the string, which Redis keeps in memory
//! across commands but a `RedisHll` only during its lifetime
//! ([`RedisHll::from_bytes`] starts from 0, like a freshly `SET` value).

#![forbid(unsafe_code)]

mod debug;
mod dense;
mod estimate;
mod murmur;
mod sparse;

pub use debug::self_test;
pub use murmur::{murmurhash64a, HLL_HASH_SEED};

use std::fmt;

/// `HLL_P`: bits of the hash used to select a register.
pub const HLL_P: usize = 14;
/// `HLL_Q`: bits of the hash used for the pattern length.
pub const HLL_Q: usize = 64 - HLL_P;
/// Number of registers (16384).
pub const HLL_REGISTERS: usize = 1 << HLL_P;
/// Bits per dense register.
pub const HLL_BITS: u32 = 6;
/// Size of the header (`sizeof(struct hllhdr)`).
pub const HDR_SIZE: usize = 16;
/// Exact length of a dense value (12304).
pub const DENSE_SIZE: usize = HDR_SIZE + dense::DENSE_REGS_BYTES;
/// Redis's default `hll-sparse-max-bytes`.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;

const MAGIC: &[u8; 4] = b"HYLL";
const ENCODING_OFFSET: usize = 4;
const ENCODING_DENSE: u8 = 0;
const ENCODING_SPARSE: u8 = 1;
const CARD_OFFSET: usize = 8;

/// Why a value cannot be used as a HyperLogLog. See the crate docs for the
/// Redis reply of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HllError {
    /// Not a HyperLogLog string (`isHLLObjectOrReply` failed).
    NotHll,
    /// A sparse HyperLogLog whose body is corrupt.
    Corrupted,
}

impl HllError {
    /// The Redis error reply text (without the leading `-` and CRLF).
    pub fn redis_message(self) -> &'static str {
        match self {
            HllError::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.",
            HllError::Corrupted => "INVALIDOBJ Corrupted HLL object detected",
        }
    }
}

impl fmt::Display for HllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.redis_message())
    }
}

impl std::error::Error for HllError {}

/// A HyperLogLog in Redis's exact string layout. Equality compares the
/// string bytes.
#[derive(Clone)]
pub struct RedisHll {
    /// Always at least `HDR_SIZE` bytes with magic `HYLL` and encoding 0 or 1;
    /// exactly `DENSE_SIZE` bytes when dense.
    bytes: Vec<u8>,
    /// The byte Redis keeps after the string (SDS terminator). Only ever
    /// non-zero after updating a corrupt sparse value; see `sparse`.
    term: u8,
}

impl PartialEq for RedisHll {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for RedisHll {}

impl fmt::Debug for RedisHll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisHll")
            .field("dense", &self.is_dense())
            .field("len", &self.bytes.len())
            .field("cached_count", &self.cached_count())
            .finish()
    }
}

impl Default for RedisHll {
    fn default() -> Self {
        Self::new()
    }
}

/// Sets the "cache is stale" bit (`HLL_INVALIDATE_CACHE`).
fn invalidate(bytes: &mut [u8]) {
    bytes[CARD_OFFSET + 7] |= 0x80;
}

impl RedisHll {
    /// An empty HyperLogLog exactly as `createHLLObject`: sparse, cached
    /// cardinality 0 (valid), body `XZERO:16384`. 18 bytes.
    pub fn new() -> Self {
        let mut bytes = vec![0u8; HDR_SIZE + 2];
        bytes[..4].copy_from_slice(MAGIC);
        bytes[ENCODING_OFFSET] = ENCODING_SPARSE;
        let l = HLL_REGISTERS - 1;
        bytes[HDR_SIZE] = 0x40 | (l >> 8) as u8;
        bytes[HDR_SIZE + 1] = (l & 0xff) as u8;
        RedisHll { bytes, term: 0 }
    }

    /// Accepts a string value as Redis's `isHLLObjectOrReply` does: at least
    /// 16 bytes, magic `HYLL`, encoding 0 or 1, and exactly
    /// [`DENSE_SIZE`] bytes if dense. The sparse body is not scanned (see
    /// [`RedisHll::validate`]). The only error is [`HllError::NotHll`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, HllError> {
        Self::from_vec(bytes).map_err(|(e, _)| e)
    }

    /// [`RedisHll::from_bytes`] that hands the bytes back on error, for a
    /// caller that moved them out of storage (`std::mem::take`) to avoid a
    /// copy and must put them back untouched when they are not a HyperLogLog.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Self, (HllError, Vec<u8>)> {
        if bytes.len() < HDR_SIZE || &bytes[..4] != MAGIC {
            return Err((HllError::NotHll, bytes));
        }
        match bytes[ENCODING_OFFSET] {
            ENCODING_DENSE if bytes.len() == DENSE_SIZE => Ok(RedisHll { bytes, term: 0 }),
            ENCODING_SPARSE => Ok(RedisHll { bytes, term: 0 }),
            _ => Err((HllError::NotHll, bytes)),
        }
    }

    /// Strict check of the body: `Err(Corrupted)` if a sparse body does not
    /// describe exactly 16384 registers (what `hllSparseRegHisto` /
    /// `hllMerge` / `hllSparseToDense` would report). Dense is always valid.
    pub fn validate(&self) -> Result<(), HllError> {
        if self.is_dense() || sparse::is_valid(&self.bytes, self.term) {
            Ok(())
        } else {
            Err(HllError::Corrupted)
        }
    }

    /// The string value, as `GET` returns it.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The string value, by value.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// True for the dense encoding, false for sparse.
    pub fn is_dense(&self) -> bool {
        self.bytes[ENCODING_OFFSET] == ENCODING_DENSE
    }

    /// The cached cardinality if the cache is valid (`HLL_VALID_CACHE`).
    pub fn cached_count(&self) -> Option<u64> {
        let mut card = [0u8; 8];
        card.copy_from_slice(&self.bytes[CARD_OFFSET..CARD_OFFSET + 8]);
        (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
    }

    /// Marks the cached cardinality stale (`HLL_INVALIDATE_CACHE`): only the
    /// top bit of the last cache byte is set, the other bits are kept.
    pub fn invalidate_cache(&mut self) {
        invalidate(&mut self.bytes);
    }

    /// One element of PFADD (`hllAdd`): hashes it and raises its register.
    /// Returns true if a register changed, in which case the cached
    /// cardinality has been invalidated (what PFADD does after its loop).
    /// A sparse value is promoted to dense when a register needs a value
    /// above 32 or when it would grow beyond `sparse_max_bytes` (header
    /// included). `Err(Corrupted)` on a corrupt sparse body (the value may
    /// still have been updated by earlier calls; this call changed nothing).
    pub fn add(&mut self, element: &[u8], sparse_max_bytes: usize) -> Result<bool, HllError> {
        let (index, count) = murmur::pat_len(element);
        self.set_register(index, count, sparse_max_bytes)
    }

    /// PFADD's loop over its elements (`pfaddCommand`): [`RedisHll::add`] for each element
    /// in order; true if any register changed. Once the value is dense (from the start or
    /// after a promotion) the rest are added in a tight loop that hashes, raises the register
    /// and invalidates the cache once at the end, as Redis does after its loop (a dense add
    /// cannot fail, so no error can come between). `Err(Corrupted)` as for
    /// [`RedisHll::add`]: earlier elements stay added.
    pub fn add_all<'a, I>(&mut self, elements: I, sparse_max_bytes: usize) -> Result<bool, HllError>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut elements = elements.into_iter();
        let mut changed = false;
        while !self.is_dense() {
            let Some(element) = elements.next() else {
                return Ok(changed);
            };
            changed |= self.add(element, sparse_max_bytes)?;
        }
        let regs = &mut self.bytes[HDR_SIZE..];
        let mut raised = false;
        for element in elements {
            let (index, count) = murmur::pat_len(element);
            raised |= dense::set_if_greater(regs, index, count);
        }
        if raised {
            self.invalidate_cache();
        }
        Ok(changed | raised)
    }

    /// Raises register `index` to `count` (`hllDenseSet`/`hllSparseSet`) and
    /// invalidates the cache if it changed.
    fn set_register(
        &mut self,
        index: usize,
        count: u8,
        sparse_max_bytes: usize,
    ) -> Result<bool, HllError> {
        let changed = if self.is_dense() {
            dense::set_if_greater(&mut self.bytes[HDR_SIZE..], index, count)
        } else {
            sparse::set(
                &mut self.bytes,
                &mut self.term,
                index,
                count,
                sparse_max_bytes,
            )?
        };
        if changed {
            self.invalidate_cache();
        }
        Ok(changed)
    }

    /// PFCOUNT of a single key: the cached cardinality if valid, otherwise
    /// computes it (`hllCount`) and writes it into the cache bytes. Reply it
    /// as `i64`. `Err(Corrupted)` (value unchanged) on a corrupt sparse body.
    pub fn count(&mut self) -> Result<u64, HllError> {
        if let Some(card) = self.cached_count() {
            return Ok(card);
        }
        let mut histo = [0u32; 64];
        if self.is_dense() {
            dense::histogram(&self.bytes[HDR_SIZE..], &mut histo);
        } else if !sparse::histogram(&self.bytes, self.term, &mut histo) {
            return Err(HllError::Corrupted);
        }
        let card = estimate::estimate(&histo);
        self.bytes[CARD_OFFSET..CARD_OFFSET + 8].copy_from_slice(&card.to_le_bytes());
        Ok(card)
    }

    /// `hllMerge`: `max[i] = MAX(max[i], register[i])`. On `Err(Corrupted)`
    /// `max` may be partially updated (Redis then discards it).
    pub fn merge_into(&self, max: &mut [u8; HLL_REGISTERS]) -> Result<(), HllError> {
        if self.is_dense() {
            dense::merge_into(&self.bytes[HDR_SIZE..], max);
            Ok(())
        } else if sparse::merge_into(&self.bytes, self.term, max) {
            Ok(())
        } else {
            Err(HllError::Corrupted)
        }
    }

    /// The estimate for plain registers (one byte each), as multi-key PFCOUNT
    /// computes it (`hllCount` on `HLL_RAW`). Values above 63 are treated as
    /// 63.
    pub fn count_registers(registers: &[u8; HLL_REGISTERS]) -> u64 {
        let mut histo = [0u32; 64];
        for &r in registers.iter() {
            histo[usize::from(r.min(63))] += 1;
        }
        estimate::estimate(&histo)
    }

    /// PFCOUNT with several keys: the cardinality of the union. Values are
    /// not modified and their caches are not used.
    pub fn count_union(hlls: &[&RedisHll]) -> Result<u64, HllError> {
        let mut max = [0u8; HLL_REGISTERS];
        for h in hlls {
            h.merge_into(&mut max)?;
        }
        Ok(Self::count_registers(&max))
    }

    /// PFDEBUG DECODE: the sparse opcodes as Redis prints them (`Z:8436 v:1,1 ...`); None
    /// for a dense value (Redis's `HLL encoding is not sparse`).
    pub fn describe_sparse(&self) -> Option<String> {
        (!self.is_dense()).then(|| sparse::describe(&self.bytes, self.term))
    }

    /// PFDEBUG GETREG: the 16384 register values of a dense value; None if sparse (PFDEBUG
    /// converts it with [`RedisHll::to_dense`] first).
    pub fn dense_registers(&self) -> Option<Vec<u8>> {
        self.is_dense().then(|| (0..HLL_REGISTERS).map(|i| dense::get(&self.bytes[HDR_SIZE..], i)).collect())
    }

    /// Converts a sparse value to dense (`hllSparseToDense`; the header,
    /// cache included, is kept). No-op when already dense.
    pub fn to_dense(&mut self) -> Result<(), HllError> {
        if !self.is_dense() {
            self.bytes = sparse::to_dense(&self.bytes, self.term).ok_or(HllError::Corrupted)?;
            self.term = 0;
        }
        Ok(())
    }

    /// The tail of PFMERGE on the destination `self`: convert it to dense if
    /// `use_dense` (some input was dense), then raise every register to
    /// `max` in index order (a sparse destination may get promoted on the
    /// way, as in Redis), then invalidate the cache. Values in `max` above
    /// 63 are clamped to 63.
    pub fn store_merged(
        &mut self,
        max: &[u8; HLL_REGISTERS],
        use_dense: bool,
        sparse_max_bytes: usize,
    ) -> Result<(), HllError> {
        if use_dense {
            self.to_dense()?;
        }
        for (index, &count) in max.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let count = count.min(63);
            if self.is_dense() {
                dense::set_if_greater(&mut self.bytes[HDR_SIZE..], index, count);
            } else {
                // Redis ignores hllSparseSet's result here.
                let _ = sparse::set(
                    &mut self.bytes,
                    &mut self.term,
                    index,
                    count,
                    sparse_max_bytes,
                );
            }
        }
        self.invalidate_cache();
        Ok(())
    }

    /// PFMERGE for parsed values: `dest` is the destination's current value
    /// (`None` if the key does not exist), `sources` the existing source keys
    /// in argument order. Returns the new destination value.
    pub fn pfmerge(
        dest: Option<RedisHll>,
        sources: &[&RedisHll],
        sparse_max_bytes: usize,
    ) -> Result<RedisHll, HllError> {
        let mut max = [0u8; HLL_REGISTERS];
        let mut use_dense = false;
        for h in dest.iter().chain(sources.iter().copied()) {
            use_dense |= h.is_dense();
            h.merge_into(&mut max)?;
        }
        let mut out = dest.unwrap_or_default();
        out.store_merged(&max, use_dense, sparse_max_bytes)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
