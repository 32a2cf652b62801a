//! `CompactHash`: the value of a Redis hash (field -> value), two encodings.
//!
//! - `Listpack`: up to [`EncodingLimits::max_listpack_entries`] pairs whose
//!   fields and values are at most `max_listpack_value_bytes` long, in one
//!   `Vec` in insertion order. For <= 128 short fields a linear scan beats
//!   hashing, and a pair costs two boxed strings plus 32 bytes of Vec slot
//!   instead of a table entry plus buckets. Summaries (hashes of counters,
//!   mostly small) live here.
//! - `Hashtable`: an `IndexMap`, so HRANDFIELD picks by index and HSCAN uses
//!   descending positions as cursors ([`crate::descending_window`]).
//!
//! The listpack becomes a hashtable when an insert would exceed either limit
//! (Redis's `hashTypeTryConversion` / `hashTypeConvert`, including for an
//! over-long value written to an existing field), never back.
//! Removing from a listpack keeps order (`Vec::remove`, <= 128 moves); from a
//! hashtable it is `swap_remove`, O(1).

use indexmap::IndexMap;
use rand::Rng;

use crate::random::{sample_distinct, sample_with_repeats};
use crate::{boxed_bytes, descending_window, EncodingLimits};

type Pair = (Box<[u8]>, Box<[u8]>);

/// A borrowed (field, value) pair as handed out by iteration, scans and picks.
pub type FieldValue<'a> = (&'a [u8], &'a [u8]);

/// A Redis hash value. See the module documentation for the encodings.
#[derive(Clone, Debug)]
pub struct CompactHash {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    Listpack(Vec<Pair>),
    Hashtable(Table),
}

/// The hashtable encoding with a running count of field and value heap bytes.
#[derive(Clone, Debug, Default)]
struct Table {
    map: IndexMap<Box<[u8]>, Box<[u8]>>,
    payload_heap_bytes: usize,
}

impl Default for CompactHash {
    fn default() -> Self {
        Self {
            repr: Repr::Listpack(Vec::new()),
        }
    }
}

impl CompactHash {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty hash with room for `fields` fields in its compact encoding (a writer that
    /// knows how many it is about to insert skips the vector's growth steps).
    pub fn with_capacity(fields: usize) -> Self {
        Self {
            repr: Repr::Listpack(Vec::with_capacity(fields)),
        }
    }

    pub(crate) fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Listpack(_))
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(pairs) => pairs.len(),
            Repr::Hashtable(table) => table.map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What OBJECT ENCODING reports: "listpack" or "hashtable".
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Hashtable(_) => "hashtable",
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Listpack(pairs) => pairs.iter().find(|(f, _)| **f == *field).map(|(_, v)| &**v),
            Repr::Hashtable(table) => table.map.get(field).map(|v| &**v),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value` with Redis's default limits; true if the field
    /// is new (HSET's count), false if an existing value was replaced.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.insert_with_limits(field, value, &EncodingLimits::REDIS_DEFAULT)
    }

    pub fn insert_with_limits(
        &mut self,
        field: &[u8],
        value: &[u8],
        limits: &EncodingLimits,
    ) -> bool {
        if let Repr::Listpack(pairs) = &mut self.repr {
            let short_enough = limits.fits(0, field.len().max(value.len()));
            let room_for_one_more = limits.fits(pairs.len() + 1, 0);
            let existing = pairs.iter_mut().find(|(f, _)| **f == *field);
            match existing {
                Some((_, old)) if short_enough => {
                    *old = value.into();
                    return false;
                }
                None if short_enough && room_for_one_more => {
                    pairs.push((field.into(), value.into()));
                    return true;
                }
                _ => self.convert_to_table(),
            }
        }
        let Repr::Hashtable(table) = &mut self.repr else {
            unreachable!("converted to a hashtable above")
        };
        let value_bytes = boxed_bytes(value.len());
        match table.map.get_mut(field) {
            Some(old) => {
                table.payload_heap_bytes =
                    table.payload_heap_bytes - boxed_bytes(old.len()) + value_bytes;
                *old = value.into();
                false
            }
            None => {
                table.payload_heap_bytes += boxed_bytes(field.len()) + value_bytes;
                table.map.insert(field.into(), value.into());
                true
            }
        }
    }

    /// Removes `field`; true if it was present. Never changes the encoding.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Listpack(pairs) => match pairs.iter().position(|(f, _)| **f == *field) {
                Some(index) => {
                    pairs.remove(index);
                    true
                }
                None => false,
            },
            Repr::Hashtable(table) => match table.map.swap_remove(field) {
                Some(value) => {
                    table.payload_heap_bytes -= boxed_bytes(field.len()) + boxed_bytes(value.len());
                    true
                }
                None => false,
            },
        }
    }

    fn convert_to_table(&mut self) {
        let Repr::Listpack(pairs) = &mut self.repr else {
            return;
        };
        let mut table = Table {
            map: IndexMap::with_capacity(pairs.len() + 1),
            payload_heap_bytes: 0,
        };
        for (field, value) in pairs.drain(..) {
            table.payload_heap_bytes += boxed_bytes(field.len()) + boxed_bytes(value.len());
            table.map.insert(field, value);
        }
        self.repr = Repr::Hashtable(table);
    }

    /// (field, value) pairs in encoding order (insertion order for a listpack).
    pub fn iter(&self) -> HashIter<'_> {
        match &self.repr {
            Repr::Listpack(pairs) => HashIter::Listpack(pairs.iter()),
            Repr::Hashtable(table) => HashIter::Hashtable(table.map.iter()),
        }
    }

    fn pair_at(&self, index: usize) -> FieldValue<'_> {
        match &self.repr {
            Repr::Listpack(pairs) => (&pairs[index].0, &pairs[index].1),
            Repr::Hashtable(table) => {
                let (field, value) = table.map.get_index(index).expect("index < len");
                (field, value)
            }
        }
    }

    /// One uniformly random pair (HRANDFIELD without count).
    pub fn random_field(&self, rng: &mut impl Rng) -> Option<FieldValue<'_>> {
        (!self.is_empty()).then(|| self.pair_at(rng.gen_range(0..self.len())))
    }

    /// `count` distinct random pairs in random order, or all of them (in
    /// encoding order) when `count >= len` (HRANDFIELD with positive count).
    pub fn random_fields_distinct(&self, count: usize, rng: &mut impl Rng) -> Vec<FieldValue<'_>> {
        if count >= self.len() {
            return self.iter().collect();
        }
        let ranks = sample_distinct(self.len() as u64, count as u64, rng);
        ranks
            .into_iter()
            .map(|rank| self.pair_at(rank as usize))
            .collect()
    }

    /// `count` independent random pairs, repeats allowed (negative count).
    pub fn random_fields_with_repeats(
        &self,
        count: usize,
        rng: &mut impl Rng,
    ) -> Vec<FieldValue<'_>> {
        if self.is_empty() {
            return Vec::new();
        }
        let ranks = sample_with_repeats(self.len() as u64, count as u64, rng);
        ranks
            .into_iter()
            .map(|rank| self.pair_at(rank as usize))
            .collect()
    }

    /// One HSCAN step; same guarantees as [`crate::IdSet::scan`]. A listpack
    /// is returned whole with cursor 0, like Redis.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<FieldValue<'_>>) {
        match &self.repr {
            Repr::Listpack(_) => (0, self.iter().collect()),
            Repr::Hashtable(table) => {
                let (next, window) = descending_window(cursor, count, table.map.len());
                (
                    next,
                    window.rev().map(|index| self.pair_at(index)).collect(),
                )
            }
        }
    }

    /// Approximate heap bytes owned by the hash, for memory accounting:
    /// O(entries <= 128) for a listpack, O(1) for a hashtable.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Listpack(pairs) => {
                pairs.capacity() * std::mem::size_of::<Pair>()
                    + pairs
                        .iter()
                        .map(|(f, v)| boxed_bytes(f.len()) + boxed_bytes(v.len()))
                        .sum::<usize>()
            }
            Repr::Hashtable(table) => {
                // indexmap entry: hash + two boxed slices = 40 B; index: a
                // usize and a control byte per hashbrown bucket.
                let capacity = table.map.capacity();
                let buckets = if capacity == 0 {
                    0
                } else {
                    (capacity * 8 / 7).next_power_of_two()
                };
                capacity * 40 + buckets * 9 + table.payload_heap_bytes
            }
        }
    }
}

/// Iterator over a [`CompactHash`]'s pairs; see [`CompactHash::iter`].
pub enum HashIter<'a> {
    Listpack(std::slice::Iter<'a, Pair>),
    Hashtable(indexmap::map::Iter<'a, Box<[u8]>, Box<[u8]>>),
}

impl<'a> Iterator for HashIter<'a> {
    type Item = FieldValue<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            HashIter::Listpack(pairs) => pairs.next().map(|(f, v)| (&**f, &**v)),
            HashIter::Hashtable(pairs) => pairs.next().map(|(f, v)| (&**f, &**v)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            HashIter::Listpack(pairs) => pairs.size_hint(),
            HashIter::Hashtable(pairs) => pairs.size_hint(),
        }
    }
}

/// A hash from decoded pairs in the given encoding (snapshot loading); None on a duplicate
/// field.
pub(crate) fn from_pairs(pairs: Vec<Pair>, listpack: bool) -> Option<CompactHash> {
    if listpack {
        for (i, (f, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(g, _)| g == f) {
                return None;
            }
        }
        return Some(CompactHash { repr: Repr::Listpack(pairs) });
    }
    let mut table = Table { map: IndexMap::with_capacity(pairs.len()), payload_heap_bytes: 0 };
    for (field, value) in pairs {
        table.payload_heap_bytes += boxed_bytes(field.len()) + boxed_bytes(value.len());
        if table.map.insert(field, value).is_some() {
            return None;
        }
    }
    Some(CompactHash { repr: Repr::Hashtable(table) })
}
