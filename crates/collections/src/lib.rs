//! In-memory data structures behind the Redis set, hash, list and sorted-set families.
//!
//! What this crate is for: the values a key can hold when it is a set
//! ([`IdSet`]), a hash ([`CompactHash`]), a list ([`List`], a quicklist of
//! packed nodes: see `list.rs`), a sorted set ([`ZSet`], see `zset.rs`) or a time series
//! ([`Series`] in Gorilla chunks, `series.rs`, with its label index `series_index.rs`), with
//! Redis 7.2's semantics for
//! membership, random picks, cursors and set algebra, and an estimate of the
//! heap each one uses so the keyspace can account memory.
//!
//! What it is not: it does no I/O, parses no commands and knows nothing of
//! keys, expiry or the server. Argument validation, reply shaping and error
//! texts belong to the server; the byte forms snapshots store (`persist.rs`)
//! keep each value's encoding.
//!
//! Encodings (what OBJECT ENCODING reports):
//! - `bitmap` (Abacus-specific, takes the place of Redis's `intset`): a set
//!   whose members are all canonical 64-bit decimal integers, kept in a
//!   Roaring bitmap. Unlike `intset` it has no size limit: that is the point,
//!   sets of 100M user IDs cost a few bytes per ID.
//! - `listpack`: a small set or hash kept in one `Vec`, scanned linearly.
//! - `hashtable`: an insertion-ordered hash table (`indexmap`), so a random
//!   member is one index away.
//!
//! Conversions only go towards the more general encoding (bitmap -> listpack
//! -> hashtable), at the moment an insert needs it, never back, like Redis.
//! The listpack thresholds are passed in ([`EncodingLimits`]) rather than
//! stored per value, so a CONFIG SET applies to the next conversion decision
//! and no value pays 16 bytes to remember its limits.
#![forbid(unsafe_code)]

mod algebra;
pub mod attribution;
pub mod geohash;
mod hash;
mod idset;
mod int;
mod list;
mod persist;
mod random;
mod stream;
mod stream_group;
mod zset;
mod gorilla;
mod series;
mod series_agg;
mod series_index;

#[cfg(test)]
mod hash_tests;
#[cfg(test)]
mod idset_tests;
#[cfg(test)]
mod list_tests;
#[cfg(test)]
mod random_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod zset_tests;
#[cfg(test)]
mod series_tests;
#[cfg(test)]
mod series_floor_tests;

pub use hash::{CompactHash, FieldValue, HashIter};
pub use idset::{IdSet, Iter};
pub use int::{parse_canonical_i64, IntMember, Member};
pub use list::{List, ListItem, ListLimits, Needle};
pub use persist::DecodeError;
pub use stream::{AppendError, EntryView, Pairs, Range as StreamRange, Stream, StreamId, StreamLimits, Trim, Val, LISTPACK_MAX_SIZE};
pub use stream_group::{Consumer, Group, Nack, INVALID_ENTRIES_READ};
pub use zset::{Range as ZRange, ZSet, ZSET_DEFAULT_LIMITS};
pub use gorilla::Chunk;
pub use series::{AddError, DuplicatePolicy, Labels, Rule, Series, DEFAULT_CHUNK_SIZE_BYTES};
pub use series_agg::{bucket_start, Aggregator};
pub use series_index::{Groups as SeriesGroups, IdMatcher, Matcher as LabelMatcher, SeriesIndex, NO_ID as SERIES_NO_ID};

/// When a small set or hash stops being a listpack.
///
/// One type serves both families: Redis 7.2's `set-max-listpack-entries` /
/// `set-max-listpack-value` and `hash-max-listpack-entries` /
/// `hash-max-listpack-value`. Their defaults differ (sets 128 entries, hashes
/// 512; both 64 bytes): the server passes its configured limits, and the
/// limit-less `insert` methods here use the set defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    /// A listpack holds at most this many members (or field/value pairs).
    pub max_listpack_entries: usize,
    /// No member, field or value in a listpack is longer than this.
    pub max_listpack_value_bytes: usize,
}

impl EncodingLimits {
    /// Redis 7.2's set defaults: 128 entries, 64 bytes.
    pub const REDIS_DEFAULT: Self = Self {
        max_listpack_entries: 128,
        max_listpack_value_bytes: 64,
    };

    pub(crate) fn fits(&self, entries: usize, value_bytes: usize) -> bool {
        entries <= self.max_listpack_entries && value_bytes <= self.max_listpack_value_bytes
    }
}

impl Default for EncodingLimits {
    fn default() -> Self {
        Self::REDIS_DEFAULT
    }
}

/// Heap bytes one boxed byte string costs, as a glibc-malloc-like allocator
/// hands it out (16-byte granules, 8 bytes of header, 32 bytes minimum).
/// An estimate: the point is that a 3-byte member costs 32 bytes, not 3.
pub(crate) fn boxed_bytes(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        ((len + 8 + 15) & !15).max(32)
    }
}

/// The index window one SSCAN/HSCAN step visits in a hashtable, and the next
/// cursor.
///
/// Hashtables remove with `swap_remove` (the last entry moves into the hole),
/// so the scan walks indices downwards: cursor `c` means "indices `0..c` are
/// still to visit", and 0 both starts and ends a scan. A removal moves an
/// already-visited entry (the last one) into a hole, never an unvisited one
/// out of reach, and inserts append above the window; so every member present
/// for the whole scan is returned at least once, and exactly once when nothing
/// changes. A cursor from another encoding (a bitmap cursor is a member key)
/// is clamped to the length, which restarts the walk: duplicates, no misses.
pub(crate) fn descending_window(
    cursor: u64,
    count: usize,
    len: usize,
) -> (u64, std::ops::Range<usize>) {
    let end = if cursor == 0 {
        len
    } else {
        usize::try_from(cursor).unwrap_or(usize::MAX).min(len)
    };
    let start = end.saturating_sub(count.max(1));
    (start as u64, start..end)
}
