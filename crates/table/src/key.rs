//! Key kinds: how a key is stored in a slot, hashed and compared.
//!
//! The table is generic over a [`KeyKind`] so that one implementation serves two layouts:
//! - [`BytesKey`]: byte-string keys stored as a [`SmallKey`], 24 bytes in the slot. Keys of
//!   up to [`INLINE_KEY_MAX`] (22) bytes live inline (a length byte and the bytes), so a
//!   typical Redis key costs no heap object at all; longer keys are a `Box<[u8]>` (16 bytes
//!   in the slot, the bytes on the heap, counted in the table's memory figure).
//! - [`U64Key`]: 64-bit integer keys stored as 8 bytes, no length byte and no pointer: the
//!   W2 workload's `u64 -> u64` entry is a 16-byte slot.
//!
//! A kind's `Key<'a>` is what callers pass and receive (`&[u8]` or `u64`), so the public
//! methods take keys by their natural type.

use crate::hash::{hash_bytes, hash_u64, Seed};

/// Longest key stored inline in a [`SmallKey`].
pub const INLINE_KEY_MAX: usize = 22;

mod private {
    pub trait Sealed {}
}

/// How a kind of key is stored, hashed and compared. Implemented by [`BytesKey`] and
/// [`U64Key`] only.
pub trait KeyKind: private::Sealed {
    /// The key as it sits in a slot. `Default` is an empty slot's key.
    type Stored: Default;
    /// The key as callers see it.
    type Key<'a>: Copy;
    #[doc(hidden)]
    fn hash(seed: Seed, key: Self::Key<'_>) -> u64;
    #[doc(hidden)]
    fn key(stored: &Self::Stored) -> Self::Key<'_>;
    #[doc(hidden)]
    fn eq(stored: &Self::Stored, key: Self::Key<'_>) -> bool;
    #[doc(hidden)]
    fn store(key: Self::Key<'_>) -> Self::Stored;
    /// Bytes this stored key owns on the heap.
    #[doc(hidden)]
    fn heap_bytes(stored: &Self::Stored) -> usize;
}

/// Byte-string keys (`&[u8]`), inline up to 22 bytes.
#[derive(Debug)]
pub enum BytesKey {}

/// 64-bit integer keys, stored in 8 bytes.
#[derive(Debug)]
pub enum U64Key {}

/// A byte key as stored in a slot: inline up to [`INLINE_KEY_MAX`] bytes, boxed beyond.
/// 24 bytes either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmallKey {
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_MAX],
    },
    Heap(Box<[u8]>),
}

impl Default for SmallKey {
    fn default() -> SmallKey {
        SmallKey::Inline {
            len: 0,
            bytes: [0; INLINE_KEY_MAX],
        }
    }
}

impl SmallKey {
    pub fn new(key: &[u8]) -> SmallKey {
        if key.len() <= INLINE_KEY_MAX {
            let mut bytes = [0; INLINE_KEY_MAX];
            bytes[..key.len()].copy_from_slice(key);
            SmallKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            SmallKey::Heap(key.into())
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            SmallKey::Inline { len, bytes } => &bytes[..*len as usize],
            SmallKey::Heap(b) => b,
        }
    }
}

impl private::Sealed for BytesKey {}
impl KeyKind for BytesKey {
    type Stored = SmallKey;
    type Key<'a> = &'a [u8];

    #[inline]
    fn hash(seed: Seed, key: &[u8]) -> u64 {
        hash_bytes(seed, key)
    }
    #[inline]
    fn key(stored: &SmallKey) -> &[u8] {
        stored.as_bytes()
    }
    #[inline]
    fn eq(stored: &SmallKey, key: &[u8]) -> bool {
        stored.as_bytes() == key
    }
    fn store(key: &[u8]) -> SmallKey {
        SmallKey::new(key)
    }
    #[inline]
    fn heap_bytes(stored: &SmallKey) -> usize {
        match stored {
            SmallKey::Inline { .. } => 0,
            SmallKey::Heap(b) => b.len(),
        }
    }
}

impl private::Sealed for U64Key {}
impl KeyKind for U64Key {
    type Stored = u64;
    type Key<'a> = u64;

    #[inline(always)]
    fn hash(seed: Seed, key: u64) -> u64 {
        hash_u64(seed, key)
    }
    #[inline(always)]
    fn key(stored: &u64) -> u64 {
        *stored
    }
    #[inline(always)]
    fn eq(stored: &u64, key: u64) -> bool {
        *stored == key
    }
    #[inline(always)]
    fn store(key: u64) -> u64 {
        key
    }
    #[inline(always)]
    fn heap_bytes(_: &u64) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_key_is_24_bytes_and_inlines_up_to_22() {
        assert_eq!(std::mem::size_of::<SmallKey>(), 24);
        for len in 0..=64usize {
            let key: Vec<u8> = (0..len as u8).collect();
            let s = SmallKey::new(&key);
            assert_eq!(s.as_bytes(), &key[..]);
            assert_eq!(matches!(s, SmallKey::Inline { .. }), len <= INLINE_KEY_MAX);
            assert_eq!(
                BytesKey::heap_bytes(&s),
                if len <= INLINE_KEY_MAX { 0 } else { len }
            );
        }
    }
}
