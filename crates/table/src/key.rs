//! Key kinds: how a key is stored in a slot, hashed and compared.
//!
//! The table is generic over a [`KeyKind`] so that one implementation serves two layouts:
//! - [`BytesKey`]: byte-string keys stored as a [`SmallKey`], 16 bytes in the slot. Keys of
//!   up to [`INLINE_KEY_MAX`] (15) bytes, and 16-byte keys that end in an ordinary character,
//!   live inline, so a typical Redis key costs no heap object at all; longer keys are boxed
//!   (the bytes on the heap, counted in the table's memory figure). `small_key.rs` has the
//!   layout.
//! - [`U64Key`]: 64-bit integer keys stored as 8 bytes, no length byte and no pointer: the
//!   W2 workload's `u64 -> u64` entry is a 16-byte slot.
//!
//! A kind's `Key<'a>` is what callers pass and receive (`&[u8]` or `u64`), so the public
//! methods take keys by their natural type.

use crate::hash::{hash_bytes, hash_u64, Seed};
pub use crate::small_key::{SmallKey, INLINE_KEY_MAX};

mod private {
    pub trait Sealed {}
}

/// How a kind of key is stored, hashed and compared. Implemented by [`BytesKey`] and
/// [`U64Key`] only.
pub trait KeyKind: private::Sealed {
    /// The key as it sits in a slot.
    type Stored;
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

/// Byte-string keys (`&[u8]`), inline up to 15 bytes (and most 16-byte ones).
#[derive(Debug)]
pub enum BytesKey {}

/// 64-bit integer keys, stored in 8 bytes.
#[derive(Debug)]
pub enum U64Key {}

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
        stored.heap_bytes()
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
