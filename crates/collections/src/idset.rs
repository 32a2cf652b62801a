//! `IdSet`: the value of a Redis set, with three encodings.
//!
//! - `Bitmap`: every member is a canonical i64 ([`crate::parse_canonical_i64`]),
//!   kept in a 64-bit Roaring bitmap. Membership is a parse plus a container
//!   lookup; algebra between bitmap sets runs container by container
//!   (`algebra.rs`) and never formats a member. 9.5M random IDs below 100M
//!   cost about 1.3 bytes each here, against ~69 in a Redis hashtable set.
//! - `Listpack`: up to [`EncodingLimits::max_listpack_entries`] members of at
//!   most `max_listpack_value_bytes` each, in one `Vec` in insertion order.
//!   Linear search over <= 128 short members costs less than hashing.
//! - `Hashtable`: an `IndexSet`, i.e. a hash index over a dense entry vector,
//!   so a random member is one index away (SRANDMEMBER/SPOP) and SSCAN can use
//!   positions as cursors (see [`crate::descending_window`]).
//!
//! A new set starts as an empty bitmap. The first non-integer member converts
//! it to a listpack (if everything fits) or a hashtable, at that moment and
//! for good; a listpack that outgrows its limits becomes a hashtable. That is
//! Redis 7.2's `setTypeAddAux`, with our bitmap in place of its intset (which
//! also converts past 512 entries; a bitmap never needs to).
//!
//! Why the `roaring` crate (pure Rust `RoaringTreemap`) and not CRoaring
//! (`croaring`, `Bitmap64`): measured on this machine with two sets of 9.5M
//! random IDs below 100M, intersection cardinality takes 2.4 ms with either,
//! andnot 11 ms with either, and only union is faster in CRoaring (5-6 ms vs
//! 11 ms, its AVX2 kernels). That does not pay for a C build, an `unsafe` FFI
//! boundary and losing Miri; both serialize to the portable Roaring format, so
//! persistence can switch later without a format change. A treemap is a
//! `BTreeMap<u32, RoaringBitmap>` keyed by the high 32 bits; IDs below 2^32
//! all land in one 32-bit bitmap, which is the fast case.

use indexmap::IndexSet;
use roaring::RoaringTreemap;

use crate::int::{key_of, parse_canonical_i64, IntMember, Member};
use crate::{boxed_bytes, descending_window, EncodingLimits};

/// A Redis set value. See the module documentation for the encodings.
#[derive(Clone, Debug, Default)]
pub struct IdSet {
    pub(crate) repr: Repr,
}

#[derive(Clone, Debug)]
pub(crate) enum Repr {
    Bitmap(RoaringTreemap),
    Listpack(Vec<Box<[u8]>>),
    Hashtable(Table),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Bitmap(RoaringTreemap::new())
    }
}

/// The hashtable encoding, with a running count of member heap bytes so
/// [`IdSet::heap_bytes`] stays O(1) on large sets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Table {
    pub(crate) members: IndexSet<Box<[u8]>>,
    member_heap_bytes: usize,
}

impl Table {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            members: IndexSet::with_capacity(capacity),
            member_heap_bytes: 0,
        }
    }

    pub(crate) fn insert(&mut self, member: Box<[u8]>) -> bool {
        let bytes = boxed_bytes(member.len());
        let inserted = self.members.insert(member);
        if inserted {
            self.member_heap_bytes += bytes;
        }
        inserted
    }

    fn remove(&mut self, member: &[u8]) -> bool {
        let removed = self.members.swap_remove(member);
        if removed {
            self.member_heap_bytes -= boxed_bytes(member.len());
        }
        removed
    }
}

impl IdSet {
    /// An empty set (an empty bitmap until a non-integer arrives).
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn from_bitmap(bitmap: RoaringTreemap) -> Self {
        Self {
            repr: Repr::Bitmap(bitmap),
        }
    }

    pub(crate) fn bitmap(&self) -> Option<&RoaringTreemap> {
        match &self.repr {
            Repr::Bitmap(bitmap) => Some(bitmap),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Bitmap(bitmap) => bitmap.len() as usize,
            Repr::Listpack(list) => list.len(),
            Repr::Hashtable(table) => table.members.len(),
        }
    }

    /// O(1) for every encoding (a bitmap's `len` sums its containers: ~1 us at 10M IDs, and
    /// SREM/SPOP ask after every removal).
    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Bitmap(bitmap) => bitmap.is_empty(),
            _ => self.len() == 0,
        }
    }

    /// What OBJECT ENCODING reports: "bitmap", "listpack" or "hashtable".
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Bitmap(_) => "bitmap",
            Repr::Listpack(_) => "listpack",
            Repr::Hashtable(_) => "hashtable",
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.repr {
            Repr::Bitmap(bitmap) => {
                parse_canonical_i64(member).is_some_and(|v| bitmap.contains(key_of(v)))
            }
            Repr::Listpack(list) => list.iter().any(|m| **m == *member),
            Repr::Hashtable(table) => table.members.contains(member),
        }
    }

    /// Adds `member` with Redis's default listpack limits; true if it was new.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        self.insert_with_limits(member, &EncodingLimits::REDIS_DEFAULT)
    }

    /// Adds `member`, converting the encoding if `limits` require; true if new.
    pub fn insert_with_limits(&mut self, member: &[u8], limits: &EncodingLimits) -> bool {
        if let Repr::Bitmap(bitmap) = &mut self.repr {
            if let Some(value) = parse_canonical_i64(member) {
                return bitmap.insert(key_of(value));
            }
            self.convert_bitmap_to_general(member.len(), limits);
        }
        if let Repr::Listpack(list) = &mut self.repr {
            if list.iter().any(|m| **m == *member) {
                return false;
            }
            if limits.fits(list.len() + 1, member.len()) {
                list.push(member.into());
                return true;
            }
            self.convert_listpack_to_table();
        }
        let Repr::Hashtable(table) = &mut self.repr else {
            unreachable!("converted to a hashtable above")
        };
        table.insert(member.into())
    }

    /// Adds `members` in order (SADD); returns how many were new.
    ///
    /// The same set results as inserting them one by one, including the
    /// conversion point and listpack order. The bulk path (a bitmap receiving
    /// only canonical integers, W6's 1,000-ID SADDs) sorts the keys first, so
    /// consecutive inserts walk the containers in address order: measured
    /// with 10M draws below 100M in batches of 1,000, 222 ns per member
    /// against 268 ns unsorted. What remains is the cache misses of the
    /// container searches (a batch touches ~1,000 of ~1,500 containers, so
    /// there is nothing to merge); OR-ing a bitmap built from the batch
    /// costs 9x more, since it rewrites every container it touches.
    pub fn insert_many_with_limits<M: AsRef<[u8]>>(
        &mut self,
        members: &[M],
        limits: &EncodingLimits,
    ) -> usize {
        if let Repr::Bitmap(bitmap) = &mut self.repr {
            let keys: Option<Vec<u64>> = members
                .iter()
                .map(|m| parse_canonical_i64(m.as_ref()).map(key_of))
                .collect();
            if let Some(mut keys) = keys {
                keys.sort_unstable();
                return keys.into_iter().filter(|&key| bitmap.insert(key)).count();
            }
        }
        members
            .iter()
            .filter(|m| self.insert_with_limits(m.as_ref(), limits))
            .count()
    }

    /// Removes `member`; true if it was present. Never changes the encoding.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Bitmap(bitmap) => {
                parse_canonical_i64(member).is_some_and(|v| bitmap.remove(key_of(v)))
            }
            // Vec::remove, not swap_remove: a listpack keeps insertion order.
            Repr::Listpack(list) => match list.iter().position(|m| **m == *member) {
                Some(index) => {
                    list.remove(index);
                    true
                }
                None => false,
            },
            Repr::Hashtable(table) => table.remove(member),
        }
    }

    /// Removes every member, keeping the encoding.
    pub(crate) fn clear(&mut self) {
        match &mut self.repr {
            Repr::Bitmap(bitmap) => bitmap.clear(),
            Repr::Listpack(list) => list.clear(),
            Repr::Hashtable(table) => *table = Table::default(),
        }
    }

    /// A non-integer member of `new_member_len` bytes is about to be added.
    fn convert_bitmap_to_general(&mut self, new_member_len: usize, limits: &EncodingLimits) {
        let Repr::Bitmap(bitmap) = &self.repr else {
            return;
        };
        let len = bitmap.len() as usize;
        // The all() pass runs only when the entry count already fits, so it
        // formats at most max_listpack_entries members.
        let fits = limits.fits(len + 1, new_member_len)
            && bitmap
                .iter()
                .all(|key| limits.fits(0, IntMember::from_key(key).as_bytes().len()));
        self.repr = if fits {
            Repr::Listpack(
                bitmap
                    .iter()
                    .map(|key| IntMember::from_key(key).as_bytes().into())
                    .collect(),
            )
        } else {
            let mut table = Table::with_capacity(len + 1);
            for key in bitmap.iter() {
                table.insert(IntMember::from_key(key).as_bytes().into());
            }
            Repr::Hashtable(table)
        };
    }

    fn convert_listpack_to_table(&mut self) {
        let Repr::Listpack(list) = &mut self.repr else {
            return;
        };
        let mut table = Table::with_capacity(list.len() + 1);
        for member in list.drain(..) {
            table.insert(member);
        }
        self.repr = Repr::Hashtable(table);
    }

    /// Members in encoding order: ascending integers for a bitmap, insertion
    /// order for a listpack, table order for a hashtable.
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Bitmap(bitmap) => Iter::Bitmap(Box::new(bitmap.iter())),
            Repr::Listpack(list) => Iter::Slice(list.iter()),
            Repr::Hashtable(table) => Iter::Table(table.members.iter()),
        }
    }

    /// One SSCAN step: visits about `count` members from `cursor` (0 starts)
    /// and returns the next cursor (0 when done) with the members visited.
    ///
    /// A full scan without modifications returns each member exactly once; a
    /// member present for the whole scan is returned at least once whatever
    /// else changes. Bitmap cursors are member keys (the next member to visit;
    /// it is never 0 after the first step because keys only grow); hashtable
    /// cursors are descending positions; a listpack, like in Redis, is
    /// returned whole in one step.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<Member<'_>>) {
        match &self.repr {
            Repr::Bitmap(bitmap) => {
                // Resumed per 32-bit bitmap, not with the 64-bit iterator's `advance_to`: that
                // one skipped a whole later bitmap when the cursor's own high part had been
                // emptied between two calls (a member present throughout was missed; found
                // by `scan_survives_concurrent_changes`).
                let (cursor_high, cursor_low) = ((cursor >> 32) as u32, cursor as u32);
                let want = count.max(1);
                let mut members = Vec::with_capacity(want.min(1024));
                let mut next = 0;
                'bitmaps: for (high, low_bitmap) in bitmap.bitmaps() {
                    if high < cursor_high {
                        continue;
                    }
                    let mut lows = low_bitmap.iter();
                    if high == cursor_high {
                        lows.advance_to(cursor_low);
                    }
                    for low in lows {
                        let key = (u64::from(high) << 32) | u64::from(low);
                        if members.len() == want {
                            next = key;
                            break 'bitmaps;
                        }
                        members.push(Member::Int(IntMember::from_key(key)));
                    }
                }
                (next, members)
            }
            Repr::Listpack(list) => (0, list.iter().map(|m| Member::Bytes(m)).collect()),
            Repr::Hashtable(table) => {
                let (next, window) = descending_window(cursor, count, table.members.len());
                let members = window
                    .rev()
                    .filter_map(|i| table.members.get_index(i))
                    .map(|m| Member::Bytes(m))
                    .collect();
                (next, members)
            }
        }
    }

    /// Approximate heap bytes owned by the set, for memory accounting.
    ///
    /// Bitmap: Roaring's serialized size (2 bytes per array-container member,
    /// 8 KiB per bitmap container, 4 per run) plus container and tree-node
    /// overhead; O(number of 2^16-wide containers). Listpack: O(entries <= 128).
    /// Hashtable: O(1), from capacity and a running count of member bytes.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Bitmap(bitmap) => {
                let (mut containers, mut high_keys) = (0, 0);
                for (_, bitmap32) in bitmap.bitmaps() {
                    containers += bitmap32.statistics().n_containers as usize;
                    high_keys += 1;
                }
                // Per container: its Vec/array header and key (~32 B) minus
                // the 8 B the serialized form already counts; per 32-bit
                // bitmap: a BTreeMap slot and the container Vec (~48 B).
                bitmap.serialized_size() + containers * 24 + high_keys * 48
            }
            Repr::Listpack(list) => {
                list.capacity() * std::mem::size_of::<Box<[u8]>>()
                    + list.iter().map(|m| boxed_bytes(m.len())).sum::<usize>()
            }
            Repr::Hashtable(table) => {
                // indexmap: an entry vector of (hash, Box<[u8]>) = 24 B and a
                // hashbrown index of usize + 1 control byte per bucket.
                let capacity = table.members.capacity();
                let buckets = if capacity == 0 {
                    0
                } else {
                    (capacity * 8 / 7).next_power_of_two()
                };
                capacity * 24 + buckets * 9 + table.member_heap_bytes
            }
        }
    }
}

/// Iterator over an [`IdSet`]'s members; see [`IdSet::iter`].
pub enum Iter<'a> {
    // Boxed: roaring's iterator is ~300 bytes, the others 16.
    Bitmap(Box<roaring::treemap::Iter<'a>>),
    Slice(std::slice::Iter<'a, Box<[u8]>>),
    Table(indexmap::set::Iter<'a, Box<[u8]>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Bitmap(keys) => keys.next().map(|key| Member::Int(IntMember::from_key(key))),
            Iter::Slice(members) => members.next().map(|m| Member::Bytes(m)),
            Iter::Table(members) => members.next().map(|m| Member::Bytes(m)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Bitmap(keys) => keys.size_hint(),
            Iter::Slice(members) => members.size_hint(),
            Iter::Table(members) => members.size_hint(),
        }
    }
}
