//! `SeriesIndex`: a database's label index over its time series keys (TS.MGET, TS.MRANGE,
//! TS.QUERYINDEX, TS.WATERFALL answer FILTER through it).
//!
//! Why this shape: a FILTER names at least one `label=value` (or `label=(a,b)`) matcher, so
//! the candidates are the intersection of a few posting lists, never a scan of every series.
//! Each series gets a dense u32 id; a posting list is a Roaring bitmap of ids, so a label a
//! million series share costs about two bytes per series, and the key is stored once.
//!
//! The index is a superset, checked at query time: the keyspace registers a series whenever
//! one is stored under a key (TS.CREATE, TS.ALTER, RENAME, COPY, restore, loading), but does
//! not unregister on deletion, overwrite or expiry, which happen in many places that know
//! nothing of series. The caller verifies each candidate against the live key (it exists, is
//! a series, and its labels match the whole filter), and tells the index to forget an id
//! whose key no longer holds a series. So the index can hold stale entries but never misses
//! a series.

use std::collections::HashMap;

use roaring::{MultiOps, RoaringBitmap};

/// One label's posting lists: value -> ids of the series with that value.
type Postings = HashMap<Box<[u8]>, RoaringBitmap>;

#[derive(Clone, Debug, Default)]
pub struct SeriesIndex {
    ids: HashMap<Box<[u8]>, u32>,
    /// id -> key; `None` once forgotten (ids are not reused, so a stale posting is harmless).
    keys: Vec<Option<Box<[u8]>>>,
    postings: HashMap<Box<[u8]>, Postings>,
    live: RoaringBitmap,
}

impl SeriesIndex {
    pub fn new() -> SeriesIndex {
        SeriesIndex::default()
    }

    /// Registers `key` with `labels` (adding to any earlier registration).
    pub fn register<'a>(&mut self, key: &[u8], labels: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
        let id = match self.ids.get(key) {
            Some(&id) => id,
            None => {
                let id = self.keys.len() as u32;
                self.keys.push(Some(key.into()));
                self.ids.insert(key.into(), id);
                id
            }
        };
        self.live.insert(id);
        for (l, v) in labels {
            let by_value = match self.postings.get_mut(l) {
                Some(m) => m,
                None => self.postings.entry(l.into()).or_default(),
            };
            match by_value.get_mut(v) {
                Some(b) => {
                    b.insert(id);
                }
                None => {
                    by_value.insert(v.into(), RoaringBitmap::from_iter([id]));
                }
            }
        }
    }

    /// Forgets `key` (its key no longer holds a series).
    pub fn forget(&mut self, key: &[u8]) {
        if let Some(id) = self.ids.remove(key) {
            self.keys[id as usize] = None;
            // Postings keep the id (removing it would visit every list); `live` masks it.
            self.live.remove(id);
        }
    }

    /// Registered keys (live ids) whose `label` is one of `values`.
    pub fn matching(&self, label: &[u8], values: &[&[u8]]) -> RoaringBitmap {
        let mut out = match self.postings.get(label) {
            // One multi-way union (it ORs containers in place, key by key), not a union per
            // value: a waterfall FILTER names thousands of instruments.
            Some(m) => values.iter().filter_map(|v| m.get(*v)).union(),
            None => RoaringBitmap::new(),
        };
        out &= &self.live;
        out
    }

    /// How many ids the postings of `label` = one of `values` hold (with repeats and stale
    /// ids): what a matcher would cost, to intersect the cheapest first.
    fn estimate(&self, label: &[u8], values: &[&[u8]]) -> u64 {
        self.postings.get(label).map_or(0, |m| values.iter().filter_map(|v| m.get(*v)).map(RoaringBitmap::len).sum())
    }

    /// Live ids matching every `(label, values)` (each: the label has one of the values),
    /// in increasing order; empty when `matchers` is.
    pub fn query(&self, matchers: &[(&[u8], Vec<&[u8]>)]) -> Vec<u32> {
        let mut order: Vec<(u64, usize)> = matchers.iter().enumerate().map(|(i, (l, vs))| (self.estimate(l, vs), i)).collect();
        order.sort_unstable();
        let mut acc: Option<RoaringBitmap> = None;
        for &(_, i) in &order {
            if acc.as_ref().is_some_and(RoaringBitmap::is_empty) {
                break;
            }
            let (l, vs) = &matchers[i];
            let b = self.matching(l, vs);
            acc = Some(match acc {
                None => b,
                Some(x) => x & b,
            });
        }
        acc.map_or_else(Vec::new, |b| b.iter().collect())
    }

    /// Every registered key (live ids; stale ones included until a query forgets them).
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.live.iter().filter_map(|id| self.key(id))
    }

    pub fn key(&self, id: u32) -> Option<&[u8]> {
        self.keys.get(id as usize).and_then(|k| k.as_deref())
    }

    /// Registered series (live ids).
    pub fn len(&self) -> u64 {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.ids.keys().map(|k| k.len() * 2 + 48).sum::<usize>()
            + self.postings.values().flat_map(|m| m.iter()).map(|(v, b)| v.len() + b.serialized_size() + 48).sum::<usize>()
    }
}
