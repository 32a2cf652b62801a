//! `StrBuf`: a string value's bytes in 24 bytes, inline up to 23 bytes, on the heap beyond.
//!
//! Why not `Vec<u8>`: a `Vec` is 24 bytes of header *plus* a heap object for every value,
//! however small. Most values of a big keyspace are short (a counter, a 16-byte record, a
//! flag), so the heap object and its pointer chase are most of their cost. `StrBuf` keeps
//! strings of up to [`INLINE_CAP`] (23) bytes inside its own 24 bytes, and only longer ones
//! on the heap; the last byte says which.
//!
//! Layout (`repr(C)`, 24 bytes, 8-aligned):
//!
//! ```text
//! inline: [ bytes 0..23                                   ][ tag = len (0..=23) ]
//! heap:   [ ptr: *mut u8 ][ len: usize ][ cap: 56-bit LE  ][ tag = HEAP (24)    ]
//! ```
//!
//! The tag is a `repr(u8)` enum with 25 valid values, so the other 231 byte values are a
//! niche: `Value` (this plus three boxed variants) stays 24 bytes, which keeps the table's
//! entry at 32 bytes (asserted in `value.rs` and `db.rs`).
//!
//! Growth (`grow`): when an append needs more room than the heap buffer has, the buffer grows
//! to the allocator's next size class ([`size_class`]) above its current one, or to the class
//! of what is needed if that is larger — never 2x as `Vec` and Redis's sds do. jemalloc's
//! classes are four per doubling (..., 1024, 1280, 1536, 1792, 2048, ...), so one step is a
//! factor of 1.14-1.25 (1.33-1.5 below 64 bytes, where a step is 16 bytes). Why: append-heavy
//! values (W1: millions of values growing 16 bytes at a time) sit mostly just after a growth,
//! so doubling keeps up to half of every buffer empty; one class step bounds the slack to 20%
//! of the buffer (above 64 bytes) while the copies stay amortized O(1): a value of final
//! size n was copied at most n / (1 - 1/1.14), about 8n bytes, in all (about 6n typically;
//! doubling copies n). Growing to "1.25x, rounded up to a class" instead would often skip a
//! class (896 x 1.25 = 1120 rounds up to 1280, 1.43x). Sizing every buffer to a class costs
//! nothing (the allocator hands out the whole class anyway) and makes
//! [`StrBuf::capacity`] the bytes really allocated, so memory estimates from capacities are
//! exact for strings under jemalloc.
//!
//! Safety: all `unsafe` of the keyspace's values is in this file. The invariants:
//! - `tag` is `Heap` exactly when `ptr` is a live allocation of `cap` bytes (align 1) owned by
//!   this value, with `INLINE_CAP < cap`, and `len <= cap`; those bytes up to `len` are
//!   initialized (they are only ever written from initialized slices or `write_bytes`).
//! - Otherwise the value is inline: its first `tag as usize` bytes are the string, and the
//!   fields `ptr`, `len`, `cap` are just storage for bytes (never dereferenced).
//!
//! Tests: a property test against `Vec<u8>` over random operation sequences (through the
//! inline/heap transitions and the `Value` enum's niche), and the same tests under Miri
//! (`MIRIFLAGS=-Zmiri-disable-isolation cargo +nightly miri test -p abacus-keyspace --lib
//! strbuf`; passed on 2026-11-21, 19 minutes on this machine); `tests/size_classes.rs`
//! checks the size classes against jemalloc.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr;

/// Longest string stored inline.
pub const INLINE_CAP: usize = 23;

/// The tag byte: an inline length (0..=23) or `Heap`. Its unused values are the niche that
/// lets enums around a `StrBuf` (such as `Value`) need no extra tag word.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[rustfmt::skip]
enum Tag {
    L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15, L16, L17, L18, L19,
    L20, L21, L22, L23, Heap,
}

#[rustfmt::skip]
const INLINE_TAGS: [Tag; INLINE_CAP + 1] = [
    Tag::L0, Tag::L1, Tag::L2, Tag::L3, Tag::L4, Tag::L5, Tag::L6, Tag::L7, Tag::L8, Tag::L9,
    Tag::L10, Tag::L11, Tag::L12, Tag::L13, Tag::L14, Tag::L15, Tag::L16, Tag::L17, Tag::L18,
    Tag::L19, Tag::L20, Tag::L21, Tag::L22, Tag::L23,
];

/// A string value's bytes: inline up to [`INLINE_CAP`] bytes, a heap buffer beyond. Behaves
/// like a `Vec<u8>` for the operations string commands need (deref to `[u8]`, append,
/// resize, truncate).
#[repr(C)]
pub struct StrBuf {
    ptr: *mut u8,
    len: usize,
    cap: [u8; 7],
    tag: Tag,
}

const _: () = assert!(std::mem::size_of::<StrBuf>() == 24);
const _: () = assert!(std::mem::size_of::<Option<StrBuf>>() == 24);

// SAFETY: a `StrBuf` owns its heap buffer exclusively (like `Vec<u8>`); no shared state.
unsafe impl Send for StrBuf {}
// SAFETY: `&StrBuf` only gives `&[u8]`; mutation needs `&mut`.
unsafe impl Sync for StrBuf {}

/// Largest buffer [`StrBuf::grow`] moves by hand rather than with `realloc`: jemalloc's
/// largest small size class (14 KiB with 4 KiB pages); larger ones can grow in place.
const SMALL_MOVE_MAX: usize = 14 * 1024;

/// The allocator's size class for a request of `n` bytes: the bytes jemalloc really hands
/// out (`nallocx`), computed here so that this crate does not depend on which allocator the
/// program uses. jemalloc (with its default 16-byte quantum) has classes 8 and 16, then four
/// classes per doubling (32, 48, 64, 80, 96, 112, 128, 160, 192, ..., 1280, 1536, ...), i.e.
/// multiples of max(16, 2^(k-2)) for sizes in (2^k, 2^(k+1)]. Under another allocator the
/// figure is still a sound capacity, only not necessarily the exact bytes used.
/// `tests/size_classes.rs` checks it against jemalloc's `nallocx`.
pub fn size_class(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 16 {
        return 16;
    }
    // n in (2^k, 2^(k+1)]: k = floor(log2(n - 1)).
    let k = usize::BITS - 1 - (n - 1).leading_zeros();
    let spacing = (1usize << (k - 2)).max(16);
    // Checked: a wrapped sum would be a capacity below `n` (sizes near usize::MAX are refused
    // by `Layout` anyway; this keeps the bound from relying on it).
    n.checked_add(spacing - 1).expect("string size overflow") & !(spacing - 1)
}

impl StrBuf {
    /// The empty string (inline, no allocation).
    pub const fn new() -> StrBuf {
        StrBuf {
            ptr: ptr::null_mut(),
            len: 0,
            cap: [0; 7],
            tag: Tag::L0,
        }
    }

    /// A copy of `bytes`: inline when they fit, else one allocation of their size class.
    pub fn from_slice(bytes: &[u8]) -> StrBuf {
        let mut s = StrBuf::new();
        if bytes.len() > INLINE_CAP {
            s.set_heap(
                alloc_bytes(size_class(bytes.len())),
                0,
                size_class(bytes.len()),
            );
        }
        s.extend_from_slice(bytes);
        s
    }

    #[inline]
    pub fn is_inline(&self) -> bool {
        self.tag != Tag::Heap
    }

    #[inline]
    pub fn len(&self) -> usize {
        if self.is_inline() {
            self.tag as usize
        } else {
            self.len
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the string can hold without reallocating: [`INLINE_CAP`] inline, the buffer's
    /// size (a size class) on the heap.
    #[inline]
    pub fn capacity(&self) -> usize {
        if self.is_inline() {
            INLINE_CAP
        } else {
            self.heap_cap()
        }
    }

    /// Bytes owned on the heap (0 inline).
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        if self.is_inline() {
            0
        } else {
            self.heap_cap()
        }
    }

    #[inline]
    fn heap_cap(&self) -> usize {
        let mut b = [0u8; 8];
        b[..7].copy_from_slice(&self.cap);
        u64::from_le_bytes(b) as usize
    }

    /// Records a heap buffer (the previous contents' bytes are already copied or moved).
    fn set_heap(&mut self, ptr: *mut u8, len: usize, cap: usize) {
        debug_assert!(cap > INLINE_CAP && len <= cap && !ptr.is_null());
        assert!(cap < 1 << 56, "string capacity over 2^56 bytes");
        self.ptr = ptr;
        self.len = len;
        self.cap.copy_from_slice(&(cap as u64).to_le_bytes()[..7]);
        self.tag = Tag::Heap;
    }

    #[inline]
    fn data_ptr(&self) -> *const u8 {
        if self.is_inline() {
            self as *const StrBuf as *const u8
        } else {
            self.ptr
        }
    }

    #[inline]
    fn data_ptr_mut(&mut self) -> *mut u8 {
        if self.is_inline() {
            self as *mut StrBuf as *mut u8
        } else {
            self.ptr
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: inline, the first `len <= 23` bytes of `self` are initialized storage (every
        // field is plain data, fully written by `new`); on the heap, `ptr` holds `len`
        // initialized bytes (module invariants). The borrow of `self` bounds the lifetime.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), self.len()) }
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len();
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive. Writing arbitrary
        // bytes over the inline storage is fine: those fields are integers and a raw pointer
        // that is never dereferenced while inline; the tag (byte 23) is outside the slice.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr_mut(), len) }
    }

    /// Sets the length; bytes up to `new_len` must be initialized and fit the capacity.
    #[inline]
    fn set_len(&mut self, new_len: usize) {
        assert!(new_len <= self.capacity());
        if self.is_inline() {
            self.tag = INLINE_TAGS[new_len];
        } else {
            self.len = new_len;
        }
    }

    /// Makes room for `additional` more bytes (see the module's header for the policy).
    #[inline]
    pub fn reserve(&mut self, additional: usize) {
        let needed = self
            .len()
            .checked_add(additional)
            .expect("string length overflow");
        if needed > self.capacity() {
            self.grow(needed);
        }
    }

    #[cold]
    fn grow(&mut self, needed: usize) {
        let old_cap = self.capacity();
        // One size class up (x1.14-1.25), not 2x: see the module header.
        let new_cap = size_class(needed.max(old_cap + 1));
        assert!(new_cap >= needed);
        let len = self.len();
        if self.is_inline() {
            let p = alloc_bytes(new_cap);
            // SAFETY: `p` is a fresh allocation of `new_cap > 23 >= len` bytes; the source is
            // our own initialized inline bytes; the two cannot overlap.
            unsafe { ptr::copy_nonoverlapping(self as *const StrBuf as *const u8, p, len) };
            self.set_heap(p, len, new_cap);
        } else if new_cap <= SMALL_MOVE_MAX {
            // Small buffers move to their new class anyway (no allocator grows a small
            // allocation in place), so move them ourselves: `realloc` would first look up
            // the old allocation's size in jemalloc's page map (a cache miss per call; `free`
            // with the size, as `dealloc` passes it, skips that). With every APPEND of W1
            // reallocating, `rallocx` was 10% of the server's CPU.
            let p = alloc_bytes(new_cap);
            // SAFETY: `p` is a fresh allocation of `new_cap > old_cap >= len` bytes and
            // `ptr` holds `len` initialized bytes (invariant); they cannot overlap. `ptr`
            // was allocated with `layout(old_cap)` and is not used after it is freed.
            unsafe {
                ptr::copy_nonoverlapping(self.ptr, p, len);
                alloc::dealloc(self.ptr, layout(old_cap));
            }
            self.set_heap(p, len, new_cap);
        } else {
            // Large buffers may grow in place (whole pages), without a copy.
            // SAFETY: `ptr` was allocated by the global allocator with `layout(old_cap)`
            // (invariant), `new_cap` is non-zero and a valid layout size (checked by
            // `layout`); realloc keeps the first `len` bytes.
            let p = unsafe { alloc::realloc(self.ptr, layout(old_cap), layout(new_cap).size()) };
            if p.is_null() {
                alloc::handle_alloc_error(layout(new_cap));
            }
            self.set_heap(p, len, new_cap);
        }
    }

    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        let len = self.len();
        // SAFETY: `reserve` made the capacity at least `len + bytes.len()`; the destination
        // is our own storage past the initialized part, which `bytes` (a shared borrow that
        // cannot alias our `&mut self`) does not overlap.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), self.data_ptr_mut().add(len), bytes.len())
        };
        self.set_len(len + bytes.len());
    }

    pub fn push(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }

    /// Grows with `fill` bytes or truncates to `new_len`, as `Vec::resize`.
    pub fn resize(&mut self, new_len: usize, fill: u8) {
        let len = self.len();
        if new_len <= len {
            self.truncate(new_len);
            return;
        }
        self.reserve(new_len - len);
        // SAFETY: `reserve` made the capacity at least `new_len`; we write the bytes between
        // the initialized part and `new_len`, inside our own storage.
        unsafe { ptr::write_bytes(self.data_ptr_mut().add(len), fill, new_len - len) };
        self.set_len(new_len);
    }

    /// Shortens to `new_len` (no effect if already shorter). Keeps the buffer.
    pub fn truncate(&mut self, new_len: usize) {
        if new_len < self.len() {
            self.set_len(new_len);
        }
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// The bytes as a `Vec<u8>`, handing over the heap buffer when there is one.
    pub fn into_vec(self) -> Vec<u8> {
        if self.is_inline() {
            return self.as_slice().to_vec();
        }
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the buffer was allocated by the global allocator with size `cap`, align 1 —
        // exactly `Layout::array::<u8>(cap)`, what `Vec<u8>` requires — and holds `len`
        // initialized bytes; `ManuallyDrop` makes the `Vec` its only owner.
        unsafe { Vec::from_raw_parts(this.ptr, this.len, this.heap_cap()) }
    }
}

/// A string's heap buffer taken out of its [`StrBuf`] (see `packed.rs`): `len` initialized
/// bytes at `ptr`, an allocation of the global allocator with layout `Layout::array::<u8>(cap)`,
/// `INLINE_CAP < cap`. Whoever holds it owns the buffer; [`StrBuf::from_heap_parts`] gives
/// it back to a `StrBuf` (dropping a `HeapParts` leaks the buffer, never frees it twice).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeapParts {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) cap: usize,
}

impl StrBuf {
    /// Hands the heap buffer over (`Err(self)` for an inline string).
    pub(crate) fn into_heap_parts(self) -> Result<HeapParts, StrBuf> {
        if self.is_inline() {
            return Err(self);
        }
        let this = std::mem::ManuallyDrop::new(self);
        Ok(HeapParts {
            ptr: this.ptr,
            len: this.len,
            cap: this.heap_cap(),
        })
    }

    /// The string owning `parts`' buffer.
    ///
    /// # Safety
    /// `parts` must come from [`StrBuf::into_heap_parts`] (possibly stored and reloaded
    /// bit for bit), and no other `StrBuf` may own the buffer.
    pub(crate) unsafe fn from_heap_parts(parts: HeapParts) -> StrBuf {
        let mut s = StrBuf::new();
        s.set_heap(parts.ptr, parts.len, parts.cap);
        s
    }

    /// Moves an inline string into a heap buffer of the smallest heap size class (a no-op on
    /// the heap): for storage whose own inline room is smaller than [`INLINE_CAP`].
    pub(crate) fn move_to_heap(&mut self) {
        if !self.is_inline() {
            return;
        }
        let len = self.len();
        let cap = size_class(INLINE_CAP + 1);
        let p = alloc_bytes(cap);
        // SAFETY: `p` is a fresh allocation of `cap > INLINE_CAP >= len` bytes; the source is
        // our own initialized inline bytes; they cannot overlap.
        unsafe { ptr::copy_nonoverlapping(self as *const StrBuf as *const u8, p, len) };
        self.set_heap(p, len, cap);
    }
}

/// The layout of a heap buffer of `cap` bytes.
fn layout(cap: usize) -> Layout {
    Layout::array::<u8>(cap).expect("string capacity overflow")
}

/// A fresh allocation of `cap > 0` bytes (uninitialized).
fn alloc_bytes(cap: usize) -> *mut u8 {
    debug_assert!(cap > 0);
    let l = layout(cap);
    // SAFETY: `l` has a non-zero size.
    let p = unsafe { alloc::alloc(l) };
    if p.is_null() {
        alloc::handle_alloc_error(l);
    }
    p
}

impl Drop for StrBuf {
    fn drop(&mut self) {
        if !self.is_inline() {
            // SAFETY: heap invariant: `ptr` is our allocation of `layout(cap)`; it is not used
            // again (the value is being dropped).
            unsafe { alloc::dealloc(self.ptr, layout(self.heap_cap())) };
        }
    }
}

impl From<Vec<u8>> for StrBuf {
    /// Takes over the vector's buffer when the bytes do not fit inline (no copy).
    fn from(v: Vec<u8>) -> StrBuf {
        if v.len() <= INLINE_CAP {
            return StrBuf::from_slice(&v);
        }
        let mut v = std::mem::ManuallyDrop::new(v);
        let (p, len, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
        let mut s = StrBuf::new();
        // `Vec<u8>` allocates `Layout::array::<u8>(cap)` with the global allocator, which is
        // the heap invariant's layout; `cap >= len > INLINE_CAP`, and `ManuallyDrop` makes the
        // `StrBuf` the buffer's only owner.
        s.set_heap(p, len, cap);
        s
    }
}

impl From<&[u8]> for StrBuf {
    fn from(b: &[u8]) -> StrBuf {
        StrBuf::from_slice(b)
    }
}

impl Default for StrBuf {
    fn default() -> StrBuf {
        StrBuf::new()
    }
}

impl Clone for StrBuf {
    fn clone(&self) -> StrBuf {
        StrBuf::from_slice(self.as_slice())
    }
}

impl Deref for StrBuf {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for StrBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AsRef<[u8]> for StrBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for StrBuf {
    fn eq(&self, other: &StrBuf) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for StrBuf {}

impl PartialEq<[u8]> for StrBuf {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Vec<u8>> for StrBuf {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.as_slice() == &other[..]
    }
}

impl fmt::Debug for StrBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_strings_are_inline_and_long_ones_on_the_heap() {
        for len in 0..=100usize {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            let s = StrBuf::from_slice(&bytes);
            assert_eq!(s.as_slice(), &bytes[..]);
            assert_eq!(s.is_inline(), len <= INLINE_CAP, "len {len}");
            assert_eq!(
                s.heap_bytes(),
                if len <= INLINE_CAP {
                    0
                } else {
                    size_class(len)
                }
            );
            assert_eq!(StrBuf::from(bytes.clone()), s);
            assert_eq!(s.clone().into_vec(), bytes);
        }
    }

    #[test]
    fn size_classes_are_jemallocs_shape() {
        let expected = [
            (1, 8),
            (8, 8),
            (9, 16),
            (16, 16),
            (17, 32),
            (32, 32),
            (33, 48),
            (48, 48),
            (49, 64),
            (65, 80),
            (113, 128),
            (129, 160),
            (257, 320),
            (1025, 1280),
            (16385, 20480),
        ];
        for (n, class) in expected {
            assert_eq!(size_class(n), class, "size_class({n})");
        }
        // Less than 25% slack above 64 bytes (spacing 2^(k-2) for n > 2^k), and monotonic.
        let mut prev = 0;
        for n in 1..100_000 {
            let c = size_class(n);
            assert!(c >= n && c >= prev);
            if n > 64 {
                assert!((c - n) * 4 < n, "class {c} for {n}");
            }
            prev = c;
        }
    }

    #[test]
    fn appends_grow_by_a_quarter_not_double() {
        let mut s = StrBuf::new();
        let mut caps = vec![];
        let mut reallocs = 0;
        for _ in 0..10_000 {
            let before = s.capacity();
            s.extend_from_slice(b"0123456789abcdef");
            if s.capacity() != before {
                reallocs += 1;
                caps.push(s.capacity());
            }
            // Slack at most a fifth of the buffer past the small classes; doubling leaves half.
            if s.len() > 64 {
                assert!(
                    s.capacity() * 4 / 5 <= s.len(),
                    "len {} cap {}",
                    s.len(),
                    s.capacity()
                );
            }
        }
        assert_eq!(s.len(), 160_000);
        for w in caps.windows(2) {
            // One class step: x1.14-1.25 above 64 bytes (x1.5 at most below).
            let ratio = w[1] as f64 / w[0] as f64;
            assert!(
                ratio <= 1.5 && (w[0] < 64 || (1.14..=1.25).contains(&ratio)),
                "{caps:?}"
            );
        }
        // Amortized: reallocations are logarithmic in the length (four per doubling: 160 KB
        // is about 13 doublings above 23 bytes, plus the 16-byte steps below 128).
        assert!(reallocs <= 4 * 13 + 8, "{reallocs} reallocations: {caps:?}");
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn an_impossible_size_panics_instead_of_wrapping() {
        // size_class(usize::MAX) would wrap to 0 with unchecked arithmetic, and the buffer
        // would be written past its end.
        let mut s = StrBuf::from_slice(&[1; 40]);
        s.reserve(usize::MAX - 40);
    }

    #[test]
    fn value_stays_three_words() {
        assert_eq!(std::mem::size_of::<crate::Value>(), 24);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Extend(Vec<u8>),
        Push(u8),
        Resize(usize, u8),
        Truncate(usize),
        Write(usize, u8),
        Clear,
        CloneSwap,
        ViaVec,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Op::Extend),
            1 => any::<u8>().prop_map(Op::Push),
            2 => (0usize..200, any::<u8>()).prop_map(|(n, b)| Op::Resize(n, b)),
            1 => (0usize..60).prop_map(Op::Truncate),
            2 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Op::Write(i, b)),
            1 => Just(Op::Clear),
            1 => Just(Op::CloneSwap),
            1 => Just(Op::ViaVec),
        ]
    }

    proptest! {
        // Miri (`cargo +nightly miri test -p abacus-keyspace --lib strbuf`, with
        // MIRIFLAGS=-Zmiri-disable-isolation for proptest's files) runs each case ~1000x
        // slower.
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 64 } else { 2000 }))]

        /// Every operation agrees with `Vec<u8>`, through inline/heap transitions.
        #[test]
        fn behaves_like_a_vec(init in prop::collection::vec(any::<u8>(), 0..50), ops in prop::collection::vec(op(), 0..40)) {
            let mut s = StrBuf::from_slice(&init);
            let mut v = init.clone();
            for op in ops {
                match op {
                    Op::Extend(b) => { s.extend_from_slice(&b); v.extend_from_slice(&b); }
                    Op::Push(b) => { s.push(b); v.push(b); }
                    Op::Resize(n, b) => { s.resize(n, b); v.resize(n, b); }
                    Op::Truncate(n) => { s.truncate(n); v.truncate(n); }
                    Op::Write(i, b) => if !v.is_empty() {
                        let i = i % v.len();
                        s[i] = b;
                        v[i] = b;
                    },
                    Op::Clear => { s.clear(); v.clear(); }
                    Op::CloneSwap => { let c = s.clone(); drop(std::mem::replace(&mut s, c)); }
                    Op::ViaVec => { s = StrBuf::from(std::mem::take(&mut s).into_vec()); }
                }
                prop_assert_eq!(s.as_slice(), &v[..]);
                prop_assert_eq!(s.len(), v.len());
                prop_assert!(s.capacity() >= s.len());
                prop_assert_eq!(s.is_inline(), s.capacity() == INLINE_CAP);
            }
            // Through the `Value` enum (niche layout) too.
            let val = crate::Value::Str(s);
            match &val { crate::Value::Str(s) => prop_assert_eq!(&s[..], &v[..]), _ => prop_assert!(false) }
        }
    }
}
