//! `PackedValue`: a [`Value`] in 17 bytes with alignment 1, so that a table entry (value,
//! flags, 24-bit access field) is 21 bytes and a keyspace slot 37 with its 16-byte key.
//!
//! Why: a `Value` is 24 bytes with alignment 8 (a `StrBuf` or a box), so an entry holding it
//! and its metadata rounds up to 32 bytes, and a slot to 48: at the table's 80% load
//! 60 bytes per key before any data. Packing the value into 17 unaligned bytes saves 8 bytes
//! per slot, 10 per key, for every key of every workload (W1's 78M keys: 0.74 GiB). The price
//! is paid only at the edges: strings of 17-23 bytes, inline in a `StrBuf`, live on the heap
//! here (a 32-byte allocation), and every access goes through the accessors below rather than
//! a `&Value`. (Inline strings went from 17 bytes to 16 with issue 27's 37-byte slot: the
//! payload is exactly a heap string's pointer, length and capacity, and the byte saved is
//! one of the three a slot lost; 16-byte values, the issue's, stay inline.)
//!
//! Layout (the last byte is the kind):
//!
//! ```text
//! kind 0..=16  inline string of that length:   [ bytes 0..kind                ][ kind ]
//! HEAP (18)    string buffer on the heap:      [ ptr: 8 ][ len: u32 ][ cap: u32 ][ kind ]
//! HLL  (19)    Box<Hll>        as a pointer:   [ ptr: 8 ][ ........ ][ kind ]
//! SET  (20)    Box<IdSet>
//! HASH (21)    Box<CompactHash>
//! BIG  (22)    Box<StrBuf>: a string whose length or buffer is 4 GiB or more
//! LIST (23)    Box<List>
//! ZSET (24)    Box<ZSet>
//! SERIES (30)  Box<Series> (a time series; 30 leaves room for other families' kinds)
//! STREAM (25)  Box<Stream>
//! ```
//!
//! (Kind 17, an inline string of 17 bytes before issue 27, is no longer written.)
//!
//! Reading (`get`) lends the parts in place: the inline bytes, or a reference through the
//! pointer, both borrowed from `&self`. Changing a string in place (`str_mut`) takes the
//! `StrBuf` out (the slot holds the empty string meanwhile) and [`StrMut`] packs it back when
//! dropped, so a string is never owned twice (a leaked `StrMut` leaks the string, nothing
//! worse). Sets, hashes and sketches are changed through `&mut` to their box.
//!
//! Safety: all `unsafe` of this file rests on one invariant: for kinds above 16 the pointer
//! bytes are the sole owner of what `Value` would own — a `StrBuf` heap buffer given up by
//! `StrBuf::into_heap_parts` (HEAP, with its `len` and `cap`), or a `Box::into_raw` of the
//! kind's type. Every function that writes a pointer kind writes it from exactly such a
//! source, and every function that turns it back into an owner (`unpack`) consumes the
//! `PackedValue` (or replaces it with the empty string first). Pointers are stored and read
//! with `write_unaligned`/`read_unaligned` as pointers into `MaybeUninit` bytes, which keep
//! their provenance when the value is moved (plain `u8`s would not: Miri caught that).
//! Tests: the property test at the bottom against `Value`, with 64 cases under Miri
//! (`MIRIFLAGS=-Zmiri-disable-isolation cargo +nightly miri test -p abacus-keyspace --lib
//! packed`; the flag lets proptest read its regression file).

use std::fmt;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::ptr;

use abacus_collections::{CompactHash, IdSet, List, Series, Stream, ZSet};
use abacus_hll::Hll;

use crate::strbuf::{HeapParts, StrBuf};
use crate::value::{Value, ValueRef};

/// Longest string stored inline.
pub const PACKED_INLINE_MAX: usize = 16;

const HEAP: u8 = 18;
const HLL: u8 = 19;
const SET: u8 = 20;
const HASH: u8 = 21;
const BIG: u8 = 22;
const LIST: u8 = 23;
const ZSET: u8 = 24;
const SERIES: u8 = 30;
const STREAM: u8 = 25;

/// A value packed in 17 bytes (see the module comment).
#[repr(C)]
pub struct PackedValue {
    /// Always initialized (written only with initialized bytes). `MaybeUninit` for the
    /// pointer kinds' sake: copying `u8`s strips a pointer's provenance, so a moved
    /// `PackedValue` of plain bytes would hold an address but no right to use it (Miri
    /// reports the dereference as undefined behaviour); `MaybeUninit` bytes are copied with
    /// their provenance.
    payload: [MaybeUninit<u8>; PACKED_INLINE_MAX],
    kind: u8,
}

const _: () = assert!(std::mem::size_of::<PackedValue>() == 17);
const _: () = assert!(std::mem::align_of::<PackedValue>() == 1);

// SAFETY: a `PackedValue` owns what a `Value` owns (the module invariant) and gives shared
// access only through `&self`, mutable access only through `&mut self`, as `Value` does;
// `Value` is `Send` and `Sync`.
unsafe impl Send for PackedValue {}
// SAFETY: as for `Send`.
unsafe impl Sync for PackedValue {}

impl PackedValue {
    /// The empty string.
    pub const fn new() -> PackedValue {
        PackedValue {
            payload: [MaybeUninit::new(0); PACKED_INLINE_MAX],
            kind: 0,
        }
    }

    pub fn pack(v: Value) -> PackedValue {
        match v {
            Value::Str(s) => PackedValue::pack_str(s),
            Value::Hll(b) => PackedValue::with_ptr(HLL, Box::into_raw(b).cast()),
            Value::Set(b) => PackedValue::with_ptr(SET, Box::into_raw(b).cast()),
            Value::Hash(b) => PackedValue::with_ptr(HASH, Box::into_raw(b).cast()),
            Value::List(b) => PackedValue::with_ptr(LIST, Box::into_raw(b).cast()),
            Value::ZSet(b) => PackedValue::with_ptr(ZSET, Box::into_raw(b).cast()),
            Value::Series(b) => PackedValue::with_ptr(SERIES, Box::into_raw(b).cast()),
            Value::Stream(b) => PackedValue::with_ptr(STREAM, Box::into_raw(b).cast()),
        }
    }

    fn pack_str(mut s: StrBuf) -> PackedValue {
        if s.is_inline() && s.len() <= PACKED_INLINE_MAX {
            let mut p = PackedValue::new();
            p.bytes_mut()[..s.len()].copy_from_slice(&s);
            p.kind = s.len() as u8;
            return p;
        }
        s.move_to_heap();
        let parts = match s.into_heap_parts() {
            Ok(parts) => parts,
            Err(_) => unreachable!("moved to the heap above"),
        };
        match (u32::try_from(parts.len), u32::try_from(parts.cap)) {
            (Ok(len), Ok(cap)) => {
                let mut p = PackedValue::with_ptr(HEAP, parts.ptr);
                p.bytes_mut()[8..12].copy_from_slice(&len.to_le_bytes());
                p.bytes_mut()[12..16].copy_from_slice(&cap.to_le_bytes());
                p
            }
            _ => {
                // SAFETY: `parts` comes straight from `into_heap_parts` and nothing else owns it.
                let s = unsafe { StrBuf::from_heap_parts(parts) };
                PackedValue::with_ptr(BIG, Box::into_raw(Box::new(s)).cast())
            }
        }
    }

    /// A pointer kind; `ptr` must be the sole owner the kind names (module invariant).
    fn with_ptr(kind: u8, p: *mut u8) -> PackedValue {
        let mut v = PackedValue::new();
        // SAFETY: `payload` has at least 8 bytes; the write is unaligned-safe by construction.
        unsafe { ptr::write_unaligned(v.payload.as_mut_ptr().cast::<*mut u8>(), p) };
        v.kind = kind;
        v
    }

    #[inline]
    fn ptr(&self) -> *mut u8 {
        debug_assert!(self.kind > PACKED_INLINE_MAX as u8);
        // SAFETY: `payload` has at least 8 bytes, read unaligned; for pointer kinds they were
        // written as a pointer by `with_ptr` (so the value keeps its provenance).
        unsafe { ptr::read_unaligned(self.payload.as_ptr().cast::<*mut u8>()) }
    }

    /// The payload as bytes. Read only where they are plain bytes: an inline string's, and a
    /// HEAP string's length and capacity (bytes 8..16).
    #[inline(always)]
    fn bytes(&self) -> &[u8; PACKED_INLINE_MAX] {
        // SAFETY: every payload byte is initialized (see the field), and `[MaybeUninit<u8>; N]`
        // has the layout of `[u8; N]`.
        unsafe { &*self.payload.as_ptr().cast::<[u8; PACKED_INLINE_MAX]>() }
    }

    #[inline(always)]
    fn bytes_mut(&mut self) -> &mut [u8; PACKED_INLINE_MAX] {
        // SAFETY: as in `bytes`; only initialized bytes are written through the reference.
        unsafe { &mut *self.payload.as_mut_ptr().cast::<[u8; PACKED_INLINE_MAX]>() }
    }

    #[inline]
    fn u32_at(&self, at: usize) -> usize {
        u32::from_le_bytes(self.bytes()[at..at + 4].try_into().expect("4 bytes")) as usize
    }

    #[inline]
    fn heap_parts(&self) -> HeapParts {
        debug_assert_eq!(self.kind, HEAP);
        HeapParts {
            ptr: self.ptr(),
            len: self.u32_at(8),
            cap: self.u32_at(12),
        }
    }

    /// Turns the packed value back into the `Value` it owns.
    pub fn unpack(self) -> Value {
        let this = std::mem::ManuallyDrop::new(self);
        let p = || this.ptr();
        // SAFETY (every arm): the module invariant says what the pointer owns, and `this`
        // will not be dropped or used again, so ownership passes to the returned value once.
        match this.kind {
            k if k <= PACKED_INLINE_MAX as u8 => {
                Value::Str(StrBuf::from_slice(&this.bytes()[..k as usize]))
            }
            HEAP => Value::Str(unsafe { StrBuf::from_heap_parts(this.heap_parts()) }),
            HLL => Value::Hll(unsafe { Box::from_raw(p().cast::<Hll>()) }),
            SET => Value::Set(unsafe { Box::from_raw(p().cast::<IdSet>()) }),
            HASH => Value::Hash(unsafe { Box::from_raw(p().cast::<CompactHash>()) }),
            ZSET => Value::ZSet(unsafe { Box::from_raw(p().cast::<ZSet>()) }),
            STREAM => Value::Stream(unsafe { Box::from_raw(p().cast::<Stream>()) }),
            BIG => Value::Str(*unsafe { Box::from_raw(p().cast::<StrBuf>()) }),
            LIST => Value::List(unsafe { Box::from_raw(p().cast::<List>()) }),
            SERIES => Value::Series(unsafe { Box::from_raw(p().cast::<Series>()) }),
            k => unreachable!("packed value kind {k}"),
        }
    }

    /// Takes the value out, leaving the empty string.
    pub fn take(&mut self) -> Value {
        std::mem::take(self).unpack()
    }

    /// Stores `v`, returning the previous value.
    pub fn replace(&mut self, v: Value) -> Value {
        std::mem::replace(self, PackedValue::pack(v)).unpack()
    }

    /// The value, borrowed in place.
    #[inline]
    pub fn get(&self) -> ValueRef<'_> {
        // SAFETY (every arm): by the module invariant the pointer owns a live object of the
        // kind's type (or a HEAP buffer of `len` initialized bytes), which lives as long as
        // `self` is not modified; the borrow of `self` bounds the references.
        match self.kind {
            k if k <= PACKED_INLINE_MAX as u8 => ValueRef::Str(&self.bytes()[..k as usize]),
            HEAP => {
                ValueRef::Str(unsafe { std::slice::from_raw_parts(self.ptr(), self.u32_at(8)) })
            }
            HLL => ValueRef::Hll(unsafe { &*self.ptr().cast::<Hll>() }),
            SET => ValueRef::Set(unsafe { &*self.ptr().cast::<IdSet>() }),
            HASH => ValueRef::Hash(unsafe { &*self.ptr().cast::<CompactHash>() }),
            ZSET => ValueRef::ZSet(unsafe { &*self.ptr().cast::<ZSet>() }),
            STREAM => ValueRef::Stream(unsafe { &*self.ptr().cast::<Stream>() }),
            BIG => ValueRef::Str(unsafe { &*self.ptr().cast::<StrBuf>() }.as_slice()),
            LIST => ValueRef::List(unsafe { &*self.ptr().cast::<List>() }),
            SERIES => ValueRef::Series(unsafe { &*self.ptr().cast::<Series>() }),
            k => unreachable!("packed value kind {k}"),
        }
    }

    /// Bytes owned on the heap (as [`Value::heap_bytes`] counts them).
    pub fn heap_bytes(&self) -> usize {
        match self.kind {
            k if k <= PACKED_INLINE_MAX as u8 => 0,
            HEAP => self.u32_at(12),
            // SAFETY: BIG owns a live `StrBuf` (module invariant), borrowed for the call.
            BIG => {
                std::mem::size_of::<StrBuf>()
                    + unsafe { &*self.ptr().cast::<StrBuf>() }.heap_bytes()
            }
            _ => self.get().boxed_heap_bytes(),
        }
    }

    /// A plain string (not a sketch) is stored.
    pub fn is_str(&self) -> bool {
        self.kind <= HEAP || self.kind == BIG
    }

    /// The string for modification in place, if a plain string is stored (not a sketch).
    pub fn str_mut(&mut self) -> Option<StrMut<'_>> {
        if !self.is_str() {
            return None;
        }
        match self.take() {
            Value::Str(s) => Some(StrMut { slot: self, s }),
            _ => unreachable!("checked to be a string"),
        }
    }

    /// Appends `bytes` to a plain string, returning its new length (`None`, and nothing
    /// changed, if the value is not a plain string).
    ///
    /// Why not `str_mut`: APPEND is W1's hot path, and taking the `StrBuf` out and packing
    /// it back costs two moves and a dozen branches per call; when the bytes fit where they
    /// are (the inline payload, or the heap buffer's spare capacity, which size-class growth
    /// leaves on most appends) they are copied in place and only the length changes.
    #[inline]
    pub fn append(&mut self, bytes: &[u8]) -> Option<usize> {
        let n = bytes.len();
        match self.kind {
            k if k <= PACKED_INLINE_MAX as u8 && k as usize + n <= PACKED_INLINE_MAX => {
                let len = k as usize;
                self.bytes_mut()[len..len + n].copy_from_slice(bytes);
                self.kind = (len + n) as u8;
                Some(len + n)
            }
            HEAP => {
                let (len, cap) = (self.u32_at(8), self.u32_at(12));
                if len + n > cap {
                    return self.append_slow(bytes);
                }
                // SAFETY: HEAP owns a buffer of `cap` bytes (module invariant) and `&mut self`
                // makes access exclusive; `len + n <= cap`, so the copy stays inside it, and
                // `bytes` cannot overlap a buffer only this value can reach mutably.
                unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr().add(len), n) };
                // `len + n <= cap`, which fits in the u32 it was read from.
                self.bytes_mut()[8..12].copy_from_slice(&((len + n) as u32).to_le_bytes());
                Some(len + n)
            }
            _ => self.append_slow(bytes),
        }
    }

    #[cold]
    fn append_slow(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut s = self.str_mut()?;
        s.extend_from_slice(bytes);
        Some(s.len())
    }

    pub fn as_hll_mut(&mut self) -> Option<&mut Hll> {
        // SAFETY: HLL owns a live `Hll` (module invariant); `&mut self` makes the borrow
        // exclusive, and it is bounded by it.
        (self.kind == HLL).then(|| unsafe { &mut *self.ptr().cast::<Hll>() })
    }

    pub fn as_set_mut(&mut self) -> Option<&mut IdSet> {
        // SAFETY: as in `as_hll_mut`, for SET's `IdSet`.
        (self.kind == SET).then(|| unsafe { &mut *self.ptr().cast::<IdSet>() })
    }

    pub fn as_hash_mut(&mut self) -> Option<&mut CompactHash> {
        // SAFETY: as in `as_hll_mut`, for HASH's `CompactHash`.
        (self.kind == HASH).then(|| unsafe { &mut *self.ptr().cast::<CompactHash>() })
    }

    pub fn as_list_mut(&mut self) -> Option<&mut List> {
        // SAFETY: as in `as_hll_mut`, for LIST's `List`.
        (self.kind == LIST).then(|| unsafe { &mut *self.ptr().cast::<List>() })
    }

    pub fn as_zset_mut(&mut self) -> Option<&mut ZSet> {
        // SAFETY: as in `as_hll_mut`, for ZSET's `ZSet`.
        (self.kind == ZSET).then(|| unsafe { &mut *self.ptr().cast::<ZSet>() })
    }

    pub fn as_series_mut(&mut self) -> Option<&mut Series> {
        // SAFETY: as in `as_hll_mut`, for SERIES's `Series`.
        (self.kind == SERIES).then(|| unsafe { &mut *self.ptr().cast::<Series>() })
    }

    pub fn as_stream_mut(&mut self) -> Option<&mut Stream> {
        // SAFETY: as in `as_hll_mut`, for STREAM's `Stream`.
        (self.kind == STREAM).then(|| unsafe { &mut *self.ptr().cast::<Stream>() })
    }
}

impl Drop for PackedValue {
    fn drop(&mut self) {
        if self.kind > PACKED_INLINE_MAX as u8 {
            drop(self.take());
        }
    }
}

impl Default for PackedValue {
    fn default() -> PackedValue {
        PackedValue::new()
    }
}

impl Clone for PackedValue {
    fn clone(&self) -> PackedValue {
        PackedValue::pack(self.get().to_value())
    }
}

impl fmt::Debug for PackedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

/// A stored string out for modification (see [`PackedValue::str_mut`]): derefs to the
/// `StrBuf`, and packs it back into its slot when dropped.
pub struct StrMut<'a> {
    slot: &'a mut PackedValue,
    s: StrBuf,
}

impl Deref for StrMut<'_> {
    type Target = StrBuf;
    fn deref(&self) -> &StrBuf {
        &self.s
    }
}

impl DerefMut for StrMut<'_> {
    fn deref_mut(&mut self) -> &mut StrBuf {
        &mut self.s
    }
}

impl Drop for StrMut<'_> {
    fn drop(&mut self) {
        *self.slot = PackedValue::pack_str(std::mem::take(&mut self.s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ZSET_TEST_LIMITS: abacus_collections::EncodingLimits =
        abacus_collections::EncodingLimits { max_listpack_entries: 16, max_listpack_value_bytes: 64 };

    fn sample(kind: u8, len: usize) -> Value {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        match kind % 7 {
            0 => Value::str(&bytes),
            6 => {
                let mut x = abacus_collections::Stream::new();
                for i in 0..len {
                    let v = i.to_string();
                    x.append(abacus_collections::StreamId::new(i as u64 + 1, 0), &[b"f", v.as_bytes()], &abacus_collections::StreamLimits::REDIS_DEFAULT).unwrap();
                }
                Value::Stream(Box::new(x))
            }
            1 => {
                let mut h = Hll::new(abacus_hll::Params::default());
                for i in 0..len as i64 {
                    h.add_raw(abacus_hll::hash_bigint(i, 0));
                }
                Value::Hll(Box::new(h))
            }
            2 => {
                let mut s = IdSet::new();
                for i in 0..len {
                    s.insert(i.to_string().as_bytes());
                }
                Value::Set(Box::new(s))
            }
            4 => {
                let mut l = List::new();
                for i in 0..len {
                    l.push_back(&bytes[..i], &abacus_collections::ListLimits::REDIS_DEFAULT);
                }
                Value::List(Box::new(l))
            }
            5 => {
                let mut z = ZSet::new();
                for i in 0..len {
                    // Small limits: both encodings (listpack, skiplist) within 60 members.
                    z.insert(i.to_string().as_bytes(), i as f64 / 3.0, &ZSET_TEST_LIMITS);
                }
                Value::ZSet(Box::new(z))
            }
            _ => {
                let mut h = CompactHash::new();
                for i in 0..len {
                    h.insert(i.to_string().as_bytes(), &bytes[..i]);
                }
                Value::Hash(Box::new(h))
            }
        }
    }

    #[test]
    fn strings_of_every_length_round_trip() {
        for len in 0..80 {
            let v = Value::str(&vec![b'x'; len]);
            let p = PackedValue::pack(v.clone());
            assert_eq!(p.get(), v.as_ref(), "len {len}");
            assert_eq!(p.heap_bytes() == 0, len <= PACKED_INLINE_MAX, "len {len}");
            assert_eq!(p.clone().unpack(), v);
        }
    }

    proptest! {
        // Miri runs each case ~1000x slower.
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 64 } else { 4000 }))]

        /// Random operation sequences against a plain `Value` as the model: replace, take,
        /// appends through `StrMut` (across the inline/heap boundary), mutation of the boxed
        /// kinds, clones; the packed value must always read as the model.
        #[test]
        fn behaves_like_a_value(ops in proptest::collection::vec((0u8..7, 0u8..7, 0usize..200), 1..40)) {
            let mut model = Value::default();
            let mut p = PackedValue::new();
            for (op, kind, len) in ops {
                match op {
                    0 => {
                        let v = sample(kind, len);
                        let old = p.replace(v.clone());
                        prop_assert_eq!(old, std::mem::replace(&mut model, v));
                    }
                    1 => prop_assert_eq!(p.take(), std::mem::take(&mut model)),
                    2 => {
                        let got = p.str_mut().map(|mut s| { s.extend_from_slice(&vec![b'a'; len]); s.len() });
                        let want = match &mut model {
                            Value::Str(s) => { s.extend_from_slice(&vec![b'a'; len]); Some(s.len()) }
                            _ => None,
                        };
                        prop_assert_eq!(got, want);
                    }
                    6 => {
                        let got = p.append(&vec![b'b'; len]);
                        let want = match &mut model {
                            Value::Str(s) => { s.extend_from_slice(&vec![b'b'; len]); Some(s.len()) }
                            _ => None,
                        };
                        prop_assert_eq!(got, want);
                    }
                    3 => {
                        if let Some(mut s) = p.str_mut() { s.truncate(len); }
                        if let Value::Str(s) = &mut model { s.truncate(len); }
                    }
                    4 => {
                        let m = len.to_string();
                        if let Some(s) = p.as_set_mut() { s.insert(m.as_bytes()); }
                        if let Some(h) = p.as_hash_mut() { h.insert(m.as_bytes(), b"v"); }
                        if let Some(h) = p.as_hll_mut() { h.add_raw(abacus_hll::hash_bigint(len as i64, 1)); }
                        if let Some(l) = p.as_list_mut() { l.push_front(m.as_bytes(), &abacus_collections::ListLimits::REDIS_DEFAULT); }
                        if let Some(z) = p.as_zset_mut() { z.insert(m.as_bytes(), 1.5, &ZSET_TEST_LIMITS); }
                        let id = abacus_collections::StreamId::new(1000 + len as u64, 0);
                        let limits = abacus_collections::StreamLimits::REDIS_DEFAULT;
                        if let Some(x) = p.as_stream_mut() { let _ = x.append(id, &[b"g", m.as_bytes()], &limits); }
                        match &mut model {
                            Value::Stream(x) => { let _ = x.append(id, &[b"g", m.as_bytes()], &limits); }
                            Value::Set(s) => { s.insert(m.as_bytes()); }
                            Value::Hash(h) => { h.insert(m.as_bytes(), b"v"); }
                            Value::Hll(h) => { h.add_raw(abacus_hll::hash_bigint(len as i64, 1)); }
                            Value::List(l) => { l.push_front(m.as_bytes(), &abacus_collections::ListLimits::REDIS_DEFAULT); }
                            Value::ZSet(z) => { z.insert(m.as_bytes(), 1.5, &ZSET_TEST_LIMITS); }
                            Value::Str(_) | Value::Series(_) => {}
                        }
                    }
                    _ => {
                        let c = p.clone();
                        prop_assert_eq!(c.get(), model.as_ref());
                        prop_assert_eq!(c.unpack(), model.clone());
                    }
                }
                prop_assert_eq!(p.get(), model.as_ref());
                prop_assert_eq!(p.is_str(), matches!(model, Value::Str(_)));
                // Strings: inline up to 16 bytes, else a buffer at least as long; other kinds
                // own a box (their exact size depends on capacities, which clones do not keep).
                let ok = match &model {
                    Value::Str(s) => (p.heap_bytes() == 0 || p.heap_bytes() >= s.len()) && (p.heap_bytes() > 0 || s.len() <= PACKED_INLINE_MAX),
                    _ => p.heap_bytes() > 0,
                };
                prop_assert!(ok, "heap bytes {} for {:?}", p.heap_bytes(), model);
            }
        }
    }
}
