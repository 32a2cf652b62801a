//! [`SmallKey`]: a byte key in 16 bytes, inline when short, boxed otherwise. A union, hence
//! `unsafe` code (one of the crate's three places, see the crate docs).
//!
//! Why 16 bytes: the keyspace's slot is the key plus a 32-byte entry, so the key's size is a
//! third of every slot (56 -> 48 bytes, and bytes per key follow). Why this layout: most
//! keys of a Redis-style keyspace are short ("user:1234567", W1's 8-byte ids), and the
//! common 16-byte ones end in a printable character (redis-benchmark's `key:000000012345`),
//! so the last byte can both tag the representation and, for those keys, be key data:
//!
//! | last byte `b[15]` | meaning |
//! |---|---|
//! | `0..=15` | inline key of that length in `b[..len]`, the rest zero |
//! | [`HEAP_TAG`] (`0xFF`) | heap key: `b[..8]` the pointer of a `Box<[u8]>`, `b[8..15]` its length (56 bits, little-endian) |
//! | anything else | inline key of exactly 16 bytes, all of `b` |
//!
//! Alignment 1: the pointer is stored in bytes and read unaligned, so that a slot of key and
//! entry is the sum of their sizes (the keyspace's 37-byte slot, not 40: a slot of alignment 8
//! rounds up). The bytes are `MaybeUninit<u8>` so that a copy of the key keeps the pointer's
//! provenance (as in the keyspace's `packed.rs`: plain `u8`s would not, and Miri would report
//! the dereference).
//!
//! A 16-byte key whose last byte is `0..=15` or `0xFF` (binary keys only) is boxed, as is any
//! key of 17 bytes or more: a heap allocation of the key's length, counted by the table's
//! memory figure.

use std::mem::MaybeUninit;

/// Tag (last byte) of a boxed key.
const HEAP_TAG: u8 = 0xFF;
/// Longest key that is always inline; 16-byte keys are inline unless their last byte is a tag.
pub const INLINE_KEY_MAX: usize = 15;
const SIZE: usize = 16;

/// The two views of a key's 16 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
union Repr {
    inline: [u8; SIZE],
    heap: Heap,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Heap {
    /// Start of the boxed bytes (from `Box::<[u8]>::into_raw`), written and read unaligned.
    ptr: [MaybeUninit<u8>; 8],
    /// The length in the first 7 bytes (little-endian), [`HEAP_TAG`] in the last.
    len_tag: [u8; 8],
}

/// A byte key as stored in a slot (see the module documentation for the layout).
pub struct SmallKey(Repr);

// SAFETY: a `SmallKey` owns its bytes exactly as a `Box<[u8]>` would (the heap form is one,
// taken apart); `Box<[u8]>` is `Send` and `Sync`, and no shared mutable state is involved.
unsafe impl Send for SmallKey {}
// SAFETY: as above; `&SmallKey` only gives out `&[u8]`.
unsafe impl Sync for SmallKey {}

impl SmallKey {
    pub fn new(key: &[u8]) -> SmallKey {
        let mut b = [0u8; SIZE];
        if key.len() <= INLINE_KEY_MAX {
            b[..key.len()].copy_from_slice(key);
            b[SIZE - 1] = key.len() as u8;
            return SmallKey(Repr { inline: b });
        }
        if key.len() == SIZE && key[SIZE - 1] as usize > INLINE_KEY_MAX && key[SIZE - 1] != HEAP_TAG
        {
            b.copy_from_slice(key);
            return SmallKey(Repr { inline: b });
        }
        let len = key.len() as u64;
        assert!(len < 1 << 56, "key of {len} bytes");
        let boxed: Box<[u8]> = key.into();
        let ptr = Box::into_raw(boxed) as *mut u8;
        let mut len_tag = len.to_le_bytes();
        len_tag[7] = HEAP_TAG;
        let mut heap = Heap {
            ptr: [MaybeUninit::new(0); 8],
            len_tag,
        };
        // SAFETY: `heap.ptr` is 8 writable bytes; the write is unaligned by construction.
        unsafe { std::ptr::write_unaligned(heap.ptr.as_mut_ptr().cast::<*mut u8>(), ptr) };
        SmallKey(Repr { heap })
    }

    /// The boxed bytes' start. Only called when the tag says the heap view is the one written.
    #[inline(always)]
    fn heap_ptr(&self) -> *mut u8 {
        // SAFETY: the heap view was written by `new`, whose `write_unaligned` stored a pointer
        // in these 8 bytes (with its provenance, which `MaybeUninit` bytes keep when the key
        // is moved); read unaligned since the key has alignment 1.
        unsafe { std::ptr::read_unaligned(self.0.heap.ptr.as_ptr().cast::<*mut u8>()) }
    }

    #[inline(always)]
    fn tag(&self) -> u8 {
        // SAFETY: every representation initializes all 16 bytes, and byte 15 is a plain `u8`
        // in both views (the inline array's last byte, the heap view's `len_tag[7]`).
        unsafe { self.0.inline[SIZE - 1] }
    }

    /// Whether the key's bytes are on the heap.
    #[inline(always)]
    pub fn is_heap(&self) -> bool {
        self.tag() == HEAP_TAG
    }

    #[inline(always)]
    fn heap_len(&self) -> usize {
        // SAFETY: only called when the tag says the heap view is the one written.
        let mut b = unsafe { self.0.heap.len_tag };
        b[7] = 0;
        u64::from_le_bytes(b) as usize
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        let tag = self.tag();
        if tag as usize <= INLINE_KEY_MAX {
            // SAFETY: the inline view was written (the tag is a length); `tag <= 15 < 16`.
            unsafe { self.0.inline.get_unchecked(..tag as usize) }
        } else if tag != HEAP_TAG {
            // SAFETY: a full 16-byte inline key: the inline view was written.
            unsafe { &self.0.inline }
        } else {
            // SAFETY: the heap view was written by `new` from `Box::into_raw` of a slice of
            // exactly `heap_len()` bytes, which this key owns until `drop`; the returned
            // borrow is tied to `&self`.
            unsafe { std::slice::from_raw_parts(self.heap_ptr(), self.heap_len()) }
        }
    }

    /// Bytes this key owns on the heap (0 when inline).
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        if self.is_heap() {
            self.heap_len()
        } else {
            0
        }
    }
}

impl Drop for SmallKey {
    fn drop(&mut self) {
        if self.is_heap() {
            let len = self.heap_len();
            // SAFETY: the heap view holds the pointer and length of a `Box<[u8]>` leaked by
            // `new` and owned by this key alone (`Clone` copies the bytes, never the
            // pointer); rebuilding the box once here frees it exactly once.
            unsafe {
                let slice = std::ptr::slice_from_raw_parts_mut(self.heap_ptr(), len);
                drop(Box::from_raw(slice));
            }
        }
    }
}

impl Default for SmallKey {
    /// The empty key (what a free slot holds): inline, no allocation.
    fn default() -> SmallKey {
        SmallKey(Repr { inline: [0; SIZE] })
    }
}

impl Clone for SmallKey {
    fn clone(&self) -> SmallKey {
        if self.is_heap() {
            SmallKey::new(self.as_bytes())
        } else {
            // Inline keys are plain bytes.
            SmallKey(self.0)
        }
    }
}

impl PartialEq for SmallKey {
    fn eq(&self, other: &SmallKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for SmallKey {}

impl std::fmt::Debug for SmallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SmallKey").field(&self.as_bytes()).finish()
    }
}

const _: () = assert!(std::mem::size_of::<SmallKey>() == 16);
const _: () = assert!(std::mem::align_of::<SmallKey>() == 1);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn expect_heap(key: &[u8]) -> bool {
        key.len() > SIZE
            || (key.len() == SIZE
                && (key[SIZE - 1] as usize <= INLINE_KEY_MAX || key[SIZE - 1] == HEAP_TAG))
    }

    #[test]
    fn every_length_and_every_last_byte_round_trips() {
        for len in 0..=64usize {
            for last in [0u8, 1, 15, 16, b'0', b'z', 0x80, 0xFE, 0xFF] {
                let mut key: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                if let Some(l) = key.last_mut() {
                    *l = last;
                }
                let k = SmallKey::new(&key);
                assert_eq!(k.as_bytes(), &key[..], "len {len} last {last}");
                assert_eq!(k.is_heap(), expect_heap(&key), "len {len} last {last}");
                assert_eq!(k.heap_bytes(), if expect_heap(&key) { len } else { 0 });
                let c = k.clone();
                assert_eq!(c, k);
                drop(k);
                assert_eq!(c.as_bytes(), &key[..]);
            }
        }
        assert_eq!(SmallKey::default().as_bytes(), b"");
        assert!(
            SmallKey::new(b"key:000000012345").heap_bytes() == 0,
            "redis-benchmark keys stay inline"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_keys_round_trip(key in proptest::collection::vec(any::<u8>(), 0..40)) {
            let k = SmallKey::new(&key);
            prop_assert_eq!(k.as_bytes(), &key[..]);
            prop_assert_eq!(k.is_heap(), expect_heap(&key));
            let v: Vec<SmallKey> = (0..3).map(|_| k.clone()).collect();
            drop(k);
            for c in v {
                prop_assert_eq!(c.as_bytes(), &key[..]);
            }
        }
    }
}
