//! A hash table for big in-memory keyspaces: it never stalls to grow, and its entries are
//! compact.
//!
//! What it is for: the key -> value map under Abacus's keyspace, and any embedded use with
//! byte-string or 64-bit integer keys and millions to billions of entries, where a
//! stop-the-world resize (seconds at a billion keys) or a 2x memory spike is not acceptable.
//! What it is not: a concurrent map (one writer, like a shard), an ordered map, or a store
//! with expiry or eviction policy (the keyspace builds those on [`HashTable::scan`],
//! [`HashTable::random_entry`] and [`HashTable::memory_bytes`]). No I/O, no threads.
//!
//! Design in brief (each file's header has the details):
//! - Extendible hashing (`table.rs`): a directory indexed by the hash's top bits points at
//!   segments (4K-6.5K slots once the table is large). No operation touches more than one
//!   segment, so the slowest insert costs one segment rebuild (hundreds of microseconds)
//!   and memory never doubles. Nothing an insert does grows with the table: the directory
//!   doubles incrementally (built ahead, a bounded part per growth step), and it and the
//!   per-segment arrays live in fixed-size pages (`pages.rs`), never reallocated whole. A directory entry holds its segment's address and shape, so
//!   a lookup goes from the directory straight to the control bytes, and the only
//!   per-segment figure an insert updates (its room) sits in a compact array.
//! - Growth (`growth.rs`): a full segment is rebuilt one capacity class larger (x1.26) or
//!   split in two, so segments stay 71-90% full; eight staggered ladders of classes keep
//!   the whole table near 80% full at every size, rather than swinging between the two.
//!   A large table allocates its next steps' segments ahead and faults them in a page per
//!   insert (`spare.rs`), so that a growth step writes no fresh page itself.
//!   [`Density::Dense`] (the server keyspace's, unless `keyspace-density balanced`) steps by x1.12 up to 94%: 84-94% full, 88% on
//!   average, for twice the entry moves.
//! - Segments (`segment.rs`, `ctrl.rs`): open addressing with linear probing over one
//!   control byte per slot (a 7-bit tag), read sixteen at a time (SSE2; eight with SWAR
//!   elsewhere); one allocation per segment, control bytes then slots.
//! - Entries (`key.rs`, `small_key.rs`): the key and the value sit inline in the slot. Byte
//!   keys of up to 15 bytes, and most 16-byte ones, are stored inline (16-byte [`SmallKey`]),
//!   longer ones boxed; `u64` keys take 8 bytes. A `u64 -> u64` entry costs 17 bytes per slot, 21-24 bytes per entry.
//! - SCAN (`walk.rs`): the cursor is a position in hash space, so Redis's guarantee (every
//!   entry present throughout an iteration is returned) holds across any number of segment
//!   splits between calls.
//! - Safety: the `unsafe` code is in three places, each with its invariant stated where it
//!   is: segment storage (`segment.rs`: a slot is initialised exactly when its control byte
//!   is full; directory entries equal their segment's address and shape; a spare owns its
//!   two allocations until a segment takes them over; with
//!   [`return_allocation_slack`], a new segment's allocator slack, whole pages past its slot
//!   array and inside its allocation, is given back with `madvise`), the two
//!   representations of a [`SmallKey`] (`small_key.rs`, a union), and the SSE2 and prefetch
//!   intrinsics (`ctrl.rs`, `prefetch.rs`). The tests check the storage against a model map
//!   with values that count their drops, and run under Miri.
//!
//! ```
//! use abacus_table::{Table, U64Table};
//!
//! let mut t: Table<u32> = Table::new();
//! assert_eq!(t.insert(b"user:1", 10), None);
//! assert_eq!(t.insert(b"user:1", 11), Some(10));
//! *t.get_or_insert_with(b"user:2", || 0).0 += 5;
//! assert_eq!(t.get(b"user:2"), Some(&5));
//!
//! // A pipeline: hash every key, prefetch, then execute.
//! let keys: [&[u8]; 2] = [b"user:1", b"user:3"];
//! let hashes: Vec<u64> = keys.iter().map(|k| t.hash_key(k)).collect();
//! hashes.iter().for_each(|&h| t.prefetch(h));
//! let found: Vec<_> = keys.iter().zip(&hashes).map(|(k, &h)| t.get_hashed(h, k).copied()).collect();
//! assert_eq!(found, [Some(11), None]);
//!
//! // SCAN: resumable from a cursor, 0 starts and ends.
//! let (mut cursor, mut seen) = (0, 0);
//! loop {
//!     cursor = t.scan(cursor, 10, |_key, _value| seen += 1);
//!     if cursor == 0 { break; }
//! }
//! assert_eq!(seen, t.len());
//!
//! // Integer keys in 8 bytes.
//! let mut ids: U64Table<u64> = U64Table::with_capacity(1000);
//! ids.insert(42, 1);
//! assert_eq!(ids.remove(42), Some(1));
//! let old = t.take(); // drop `old` elsewhere; `t` is empty and usable
//! assert_eq!((old.len(), t.len()), (2, 0));
//! ```

mod check;
mod ctrl;
mod growth;
mod hash;
mod key;
mod pages;
mod prefetch;
mod segment;
mod small_key;
mod spare;
mod table;
mod walk;

pub use hash::Seed;
pub use key::{BytesKey, KeyKind, SmallKey, U64Key, INLINE_KEY_MAX};
pub use prefetch::prefetch_read;
pub use segment::{return_allocation_slack, UsableSize};
pub use table::{Config, Density, Found, HashTable};

/// A table keyed by byte strings (`&[u8]`).
pub type Table<V> = HashTable<BytesKey, V>;

/// A table keyed by `u64`, stored in 8 bytes.
pub type U64Table<V> = HashTable<U64Key, V>;
