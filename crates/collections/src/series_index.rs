//! `SeriesIndex`: a database's label index over its time series keys (TS.MGET, TS.MRANGE,
//! TS.QUERYINDEX, TS.WATERFALL answer FILTER through it).
//!
//! Why this shape: a FILTER names at least one `label=value` (or `label=(a,b)`) matcher, so
//! the candidates are the intersection of a few posting lists, never a scan of every series.
//! Each series gets a dense u32 id; a posting list is a Roaring bitmap of ids, so a label a
//! million series share costs about two bytes per series, and the key is stored once.
//!
//! Label names and values are interned (u32 ids), and each id keeps its registered labels as
//! (name id, value id) pairs. A query matching a million series (the W7 waterfall) then
//! checks its other matchers and groups its series by comparing small integers in the
//! index's own arrays, instead of reading each series' label strings through the keyspace
//! (several cache misses and `memcmp` calls per series; see docs/PERFORMANCE.md, W7).
//!
//! What the index promises: for every key that holds a live series, the key's latest
//! registration carries the series' current labels, and the postings hold exactly the
//! latest registration of each id (a re-registration with other labels moves the id). The
//! keyspace registers a series whenever one is stored under a key (TS.CREATE, TS.ALTER,
//! RENAME, COPY, restore, loading), and labels change nowhere else. It does not unregister
//! on deletion, overwrite or expiry, which happen in many places that know nothing of
//! series; so an id may be stale (its key gone or no longer a series), and the caller
//! checks that each candidate's key still holds a series, telling the index to forget an id
//! whose key does not. The labels of a live candidate need no second check.
//!
//! Groups (TS.WATERFALL): a waterfall groups its series by all their labels but one (the
//! source label). Computing that per query cost a label read, a sort and a hash lookup per
//! series and an identity string and a sort per group (a third of the waterfall's CPU over a
//! million series; docs/PERFORMANCE.md, W7). So the index keeps, for the source label last
//! asked for ([`Groups`]), each id's group id and source value id in arrays addressed by id,
//! each group's identity bytes once, and the groups' order by identity. They depend only on
//! the registered labels, so they are updated by the one path that changes those
//! (`register`/`unpost`), incrementally: a new label set appends a group, placed in the
//! order at the next waterfall (a binary search per new group and one renumbering pass, not
//! a sort of every group); samples arriving change nothing here. Why not the
//! series bodies in an array by id as well: the keyspace owns them (DEL, RENAME, MOVE,
//! SWAPDB, expiry, eviction, FLUSHDB ASYNC and DUMP/RESTORE move or drop values in many
//! places that know nothing of series), and `collections/src/series_floor_tests.rs` measured
//! that a body reached by id still costs about 390 ns per series to read one day out of its
//! Gorilla chunk, so the array would not reach the target by itself either.

use std::collections::HashMap;

use roaring::{MultiOps, RoaringBitmap};

type Map<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Strings to dense u32 ids and back.
#[derive(Clone, Debug, Default)]
struct Interner {
    ids: Map<Box<[u8]>, u32>,
    names: Vec<Box<[u8]>>,
}

impl Interner {
    fn intern(&mut self, s: &[u8]) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.into());
        self.ids.insert(s.into(), i);
        i
    }

    fn get(&self, s: &[u8]) -> Option<u32> {
        self.ids.get(s).copied()
    }

    fn bytes(&self) -> usize {
        self.names.iter().map(|n| n.len() * 2 + 48).sum()
    }
}

/// A FILTER matcher resolved to ids (see [`SeriesIndex::resolve`]).
#[derive(Clone, Debug)]
pub enum IdMatcher {
    /// The label (`None`: a name no series has) has one of the values (sorted ids).
    In(Option<u32>, Vec<u32>),
    /// The label is absent or has none of the values.
    NotIn(Option<u32>, Vec<u32>),
    /// The label is absent.
    Absent(Option<u32>),
    /// The label is present.
    Present(Option<u32>),
}

#[derive(Clone, Debug, Default)]
pub struct SeriesIndex {
    ids: Map<Box<[u8]>, u32>,
    /// id -> key; `None` once forgotten (ids are not reused).
    keys: Vec<Option<Box<[u8]>>>,
    label_names: Interner,
    label_values: Interner,
    /// id -> its registered labels, (name id, value id), in the order given.
    labels: Vec<Box<[(u32, u32)]>>,
    /// name id -> value id -> ids of the series whose registered labels have that pair.
    postings: Vec<Map<u32, RoaringBitmap>>,
    live: RoaringBitmap,
    /// The waterfall's groups for one source label, kept current by `register`/`unpost`.
    groups: Option<Groups>,
}

/// No group / no source value.
pub const NO_ID: u32 = u32::MAX;

/// Each live id's group (its registered labels but `label`) and `label`'s value, in arrays
/// addressed by id (see the design comment above).
#[derive(Clone, Debug, Default)]
pub struct Groups {
    label: u32,
    /// id -> group id, [`NO_ID`] while the id is not live.
    group: Vec<u32>,
    /// id -> the value id of `label` (its first), [`NO_ID`] when absent or not live.
    source: Vec<u32>,
    /// A group's labels but `label`, as sorted (name id, value id) pairs -> group id.
    by_pairs: Map<Box<[(u32, u32)]>, u32>,
    /// group id -> its identity's (start, length) in `arena` and its name's length. An
    /// identity is the name (`l=v` joined by `,`, sorted by label then value), a NUL, then
    /// each label and value length-prefixed (u32 LE), so two groups whose names read alike
    /// still differ.
    idents: Vec<(u64, u32, u32)>,
    /// The identities, laid out in identity order when the order is brought up to date (new
    /// groups are appended until then): a waterfall copies the identities of its groups in
    /// that order, so it reads this front to back instead of one allocation per group
    /// scattered over the heap (`perf`: that copy missed the cache for most of its 26 ms per
    /// shard over W7's 200,000 groups).
    arena: Vec<u8>,
    /// Identity bytes appended since the arena was last laid out in order.
    unordered: usize,
    /// Group ids in identity order (the placed ones).
    sorted: Vec<u32>,
    /// group id -> its position in `sorted`; valid when `pending` is empty.
    order: Vec<u32>,
    /// Groups created since the order was last brought up to date.
    pending: Vec<u32>,
}

impl Groups {
    /// The source label's name id these groups are for.
    pub fn label(&self) -> u32 {
        self.label
    }

    pub fn group_of(&self, id: u32) -> u32 {
        self.group.get(id as usize).copied().unwrap_or(NO_ID)
    }

    pub fn source_of(&self, id: u32) -> u32 {
        self.source.get(id as usize).copied().unwrap_or(NO_ID)
    }

    /// A group's identity bytes and its name's length.
    pub fn ident(&self, g: u32) -> (&[u8], u32) {
        let (at, len, n) = self.idents[g as usize];
        (&self.arena[at as usize..at as usize + len as usize], n)
    }

    /// The address of group `g`'s entry in the identities (what [`Groups::ident`] reads
    /// first), for a prefetch a stage before its bytes'; null when out of range.
    pub fn ident_entry_ptr(&self, g: u32) -> *const u8 {
        self.idents.get(g as usize).map_or(std::ptr::null(), |e| (e as *const (u64, u32, u32)).cast())
    }

    /// A group's position in identity order (call [`SeriesIndex::groups_for`] first).
    pub fn rank(&self, g: u32) -> u32 {
        debug_assert!(self.pending.is_empty());
        self.order[g as usize]
    }

    /// How many groups have a position in identity order (positions are `0..placed()`).
    pub fn placed(&self) -> usize {
        self.sorted.len()
    }

    /// Files `id` with `pairs` (its registered labels) under its group.
    fn add(&mut self, id: u32, pairs: &[(u32, u32)], names: &Interner, values: &Interner) {
        let i = id as usize;
        if self.group.len() <= i {
            self.group.resize(i + 1, NO_ID);
            self.source.resize(i + 1, NO_ID);
        }
        self.source[i] = pairs.iter().find(|p| p.0 == self.label).map_or(NO_ID, |p| p.1);
        // Every pair but the source label's (a name given twice keeps both pairs, as the
        // group's name shows them).
        let mut rest: Vec<(u32, u32)> = pairs.iter().filter(|p| p.0 != self.label).copied().collect();
        rest.sort_unstable();
        let g = match self.by_pairs.get(&rest[..]) {
            Some(&g) => g,
            None => {
                let g = self.idents.len() as u32;
                let mut named: Vec<(&[u8], &[u8])> = rest.iter().map(|&(l, v)| (&*names.names[l as usize], &*values.names[v as usize])).collect();
                named.sort_unstable();
                let mut idn: Vec<u8> = Vec::new();
                for (n, (l, v)) in named.iter().enumerate() {
                    if n > 0 {
                        idn.push(b',');
                    }
                    idn.extend_from_slice(l);
                    idn.push(b'=');
                    idn.extend_from_slice(v);
                }
                let name_len = idn.len() as u32;
                idn.push(0);
                for &(l, v) in &named {
                    for x in [l, v] {
                        idn.extend_from_slice(&(x.len() as u32).to_le_bytes());
                        idn.extend_from_slice(x);
                    }
                }
                self.idents.push((self.arena.len() as u64, idn.len() as u32, name_len));
                self.arena.extend_from_slice(&idn);
                self.unordered += idn.len();
                self.by_pairs.insert(rest.into(), g);
                self.pending.push(g);
                g
            }
        };
        self.group[i] = g;
    }

    fn remove(&mut self, id: u32) {
        if let Some(g) = self.group.get_mut(id as usize) {
            *g = NO_ID;
            self.source[id as usize] = NO_ID;
        }
    }

    fn bytes(&self) -> usize {
        self.group.len() * 8 + self.arena.capacity() + self.idents.len() * 16 + self.by_pairs.len() * 56 + (self.order.len() + self.sorted.len()) * 4
    }
}

impl SeriesIndex {
    pub fn new() -> SeriesIndex {
        SeriesIndex::default()
    }

    /// Registers `key` with `labels` (replacing any earlier registration of the key).
    pub fn register<'a>(&mut self, key: &[u8], labels: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
        let pairs: Box<[(u32, u32)]> = labels.map(|(l, v)| (self.label_names.intern(l), self.label_values.intern(v))).collect();
        let id = match self.ids.get(key) {
            Some(&id) => {
                if self.live.contains(id) && self.labels[id as usize] == pairs {
                    return;
                }
                self.unpost(id);
                id
            }
            None => {
                let id = self.keys.len() as u32;
                self.keys.push(Some(key.into()));
                self.labels.push(Box::default());
                self.ids.insert(key.into(), id);
                id
            }
        };
        self.live.insert(id);
        for (i, &(l, v)) in pairs.iter().enumerate() {
            // A name given twice: its first value is the series' (as `Series::label`).
            if pairs[..i].iter().any(|p| p.0 == l) {
                continue;
            }
            if self.postings.len() <= l as usize {
                self.postings.resize_with(l as usize + 1, Map::default);
            }
            self.postings[l as usize].entry(v).or_default().insert(id);
        }
        if let Some(g) = &mut self.groups {
            g.add(id, &pairs, &self.label_names, &self.label_values);
        }
        self.labels[id as usize] = pairs;
    }

    /// The waterfall's groups for source label `label` (a name id), ordered: built on the
    /// first call for a label (one pass over the live ids), then kept current by
    /// registrations; new groups are placed in the order here.
    pub fn groups_for(&mut self, label: u32) -> &Groups {
        if self.groups.as_ref().is_none_or(|g| g.label != label) {
            let mut g = Groups { label, ..Groups::default() };
            for id in self.live.iter() {
                g.add(id, &self.labels[id as usize], &self.label_names, &self.label_values);
            }
            self.groups = Some(g);
        }
        let g = self.groups.as_mut().expect("just built");
        if !g.pending.is_empty() {
            let mut new = std::mem::take(&mut g.pending);
            let (idents, arena) = (&g.idents, &g.arena);
            let ident = |x: u32| {
                let (at, len, _) = idents[x as usize];
                &arena[at as usize..at as usize + len as usize]
            };
            new.sort_unstable_by(|&a, &b| ident(a).cmp(ident(b)));
            let old = std::mem::take(&mut g.sorted);
            g.sorted = if new.len() >= old.len() / 8 {
                // Many (a first build): one sort of all.
                let mut all = old;
                all.extend_from_slice(&new);
                all.sort_unstable_by(|&a, &b| ident(a).cmp(ident(b)));
                all
            } else {
                // A few: each found by binary search, then one merging copy (identities are
                // unique: distinct label sets spell distinct identities).
                let mut merged = Vec::with_capacity(old.len() + new.len());
                let mut from = 0;
                for n in new {
                    let at = from + old[from..].partition_point(|&x| ident(x) < ident(n));
                    merged.extend_from_slice(&old[from..at]);
                    merged.push(n);
                    from = at;
                }
                merged.extend_from_slice(&old[from..]);
                merged
            };
            g.order.resize(g.idents.len(), 0);
            for (pos, &gid) in g.sorted.iter().enumerate() {
                g.order[gid as usize] = pos as u32;
            }
            // The arena in identity order again once an eighth of it is out of place: a copy
            // of every identity, so not on every few groups created.
            if g.unordered * 8 >= g.arena.len() {
                let mut arena = Vec::with_capacity(g.arena.len());
                for &gid in &g.sorted {
                    let e = &mut g.idents[gid as usize];
                    let start = arena.len() as u64;
                    arena.extend_from_slice(&g.arena[e.0 as usize..e.0 as usize + e.1 as usize]);
                    e.0 = start;
                }
                g.arena = arena;
                g.unordered = 0;
            }
        }
        g
    }

    /// The groups last built by [`SeriesIndex::groups_for`], if still for `label`.
    pub fn groups(&self, label: u32) -> Option<&Groups> {
        self.groups.as_ref().filter(|g| g.label == label && g.pending.is_empty())
    }

    /// Removes `id` from the postings of its registered labels.
    fn unpost(&mut self, id: u32) {
        if let Some(g) = &mut self.groups {
            g.remove(id);
        }
        let pairs = std::mem::take(&mut self.labels[id as usize]);
        for &(l, v) in pairs.iter() {
            if let Some(b) = self.postings.get_mut(l as usize).and_then(|m| m.get_mut(&v)) {
                b.remove(id);
                if b.is_empty() {
                    self.postings[l as usize].remove(&v);
                }
            }
        }
    }

    /// Forgets `key` (its key no longer holds a series).
    pub fn forget(&mut self, key: &[u8]) {
        if let Some(id) = self.ids.remove(key) {
            self.unpost(id);
            self.keys[id as usize] = None;
            self.live.remove(id);
        }
    }

    /// Resolves a matcher's label and values to ids (values no series has are dropped).
    pub fn resolve(&self, m: Matcher<'_>) -> IdMatcher {
        let vals = |vs: &[&[u8]]| {
            let mut v: Vec<u32> = vs.iter().filter_map(|v| self.label_values.get(v)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        match m {
            Matcher::In(l, vs) => IdMatcher::In(self.label_names.get(l), vals(vs)),
            Matcher::NotIn(l, vs) => IdMatcher::NotIn(self.label_names.get(l), vals(vs)),
            Matcher::Absent(l) => IdMatcher::Absent(self.label_names.get(l)),
            Matcher::Present(l) => IdMatcher::Present(self.label_names.get(l)),
        }
    }

    /// Ids whose label `l` is one of `values`.
    fn matching(&self, l: Option<u32>, values: &[u32]) -> RoaringBitmap {
        match l.and_then(|l| self.postings.get(l as usize)) {
            // One multi-way union (it ORs containers in place, key by key), not a union per
            // value: a waterfall FILTER names thousands of instruments.
            Some(m) => values.iter().filter_map(|v| m.get(v)).union(),
            None => RoaringBitmap::new(),
        }
    }

    /// How many ids the postings of a matcher hold: what it would cost, to intersect the
    /// cheapest first.
    fn estimate(&self, l: Option<u32>, values: &[u32]) -> u64 {
        l.and_then(|l| self.postings.get(l as usize)).map_or(0, |m| values.iter().filter_map(|v| m.get(v)).map(RoaringBitmap::len).sum())
    }

    /// The first registered value of label `l` on `id`.
    fn value_of(&self, id: u32, l: Option<u32>) -> Option<u32> {
        let l = l?;
        self.labels[id as usize].iter().find(|p| p.0 == l).map(|p| p.1)
    }

    /// Live ids (registered labels) matching every matcher, in increasing order; empty
    /// unless at least one matcher is `In`.
    pub fn query(&self, matchers: &[IdMatcher]) -> Vec<u32> {
        let mut order: Vec<(u64, usize)> = matchers
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match m {
                IdMatcher::In(l, vs) => Some((self.estimate(*l, vs), i)),
                _ => None,
            })
            .collect();
        if order.is_empty() {
            return Vec::new();
        }
        order.sort_unstable();
        let mut acc: Option<RoaringBitmap> = None;
        for &(_, i) in &order {
            if acc.as_ref().is_some_and(RoaringBitmap::is_empty) {
                break;
            }
            let IdMatcher::In(l, vs) = &matchers[i] else { continue };
            let b = self.matching(*l, vs);
            acc = Some(match acc {
                None => b,
                Some(x) => x & b,
            });
        }
        let mut acc = acc.unwrap_or_default();
        acc &= &self.live;
        let rest: Vec<&IdMatcher> = matchers.iter().filter(|m| !matches!(m, IdMatcher::In(..))).collect();
        acc.iter()
            .filter(|&id| {
                rest.iter().all(|m| match m {
                    IdMatcher::NotIn(l, vs) => self.value_of(id, *l).is_none_or(|v| vs.binary_search(&v).is_err()),
                    IdMatcher::Absent(l) => self.value_of(id, *l).is_none(),
                    IdMatcher::Present(l) => self.value_of(id, *l).is_some(),
                    IdMatcher::In(..) => true,
                })
            })
            .collect()
    }

    /// The registered labels of `id`, as (name id, value id) pairs in the order given.
    pub fn labels_of(&self, id: u32) -> &[(u32, u32)] {
        self.labels.get(id as usize).map_or(&[], |l| &l[..])
    }

    /// Addresses for a batch query's prefetch: `id`'s key bytes and registered labels.
    pub fn prefetch_ptrs(&self, id: u32) -> [*const u8; 2] {
        let key = self.keys.get(id as usize).and_then(|k| k.as_deref()).map_or(std::ptr::null(), <[u8]>::as_ptr);
        let labels = self.labels.get(id as usize).map_or(std::ptr::null(), |l| l.as_ptr().cast());
        [key, labels]
    }

    /// The address of `id`'s entry in the id -> key array (what [`SeriesIndex::key`] reads
    /// first), for a prefetch a stage before its key bytes'; null when out of range.
    pub fn key_entry_ptr(&self, id: u32) -> *const u8 {
        self.keys.get(id as usize).map_or(std::ptr::null(), |k| (k as *const Option<Box<[u8]>>).cast())
    }

    /// The id of a label name, if any series has it.
    pub fn name_id(&self, name: &[u8]) -> Option<u32> {
        self.label_names.get(name)
    }

    /// The id of a label value, if any series has it.
    pub fn value_id(&self, value: &[u8]) -> Option<u32> {
        self.label_values.get(value)
    }

    pub fn name(&self, id: u32) -> &[u8] {
        &self.label_names.names[id as usize]
    }

    pub fn value(&self, id: u32) -> &[u8] {
        &self.label_values.names[id as usize]
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
            + self.labels.iter().map(|l| l.len() * 8 + 16).sum::<usize>()
            + self.label_names.bytes()
            + self.label_values.bytes()
            + self.postings.iter().flat_map(|m| m.values()).map(|b| b.serialized_size() + 48).sum::<usize>()
            + self.groups.as_ref().map_or(0, Groups::bytes)
    }
}

/// A FILTER matcher by name, as the server parses it (see [`SeriesIndex::resolve`]).
#[derive(Clone, Copy, Debug)]
pub enum Matcher<'a> {
    In(&'a [u8], &'a [&'a [u8]]),
    NotIn(&'a [u8], &'a [&'a [u8]]),
    Absent(&'a [u8]),
    Present(&'a [u8]),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(ix: &mut SeriesIndex, key: &str, labels: &[(&str, &str)]) {
        ix.register(key.as_bytes(), labels.iter().map(|(l, v)| (l.as_bytes(), v.as_bytes())));
    }

    fn q(ix: &SeriesIndex, ms: &[Matcher<'_>]) -> Vec<String> {
        let ms: Vec<IdMatcher> = ms.iter().map(|m| ix.resolve(*m)).collect();
        ix.query(&ms).into_iter().map(|id| String::from_utf8(ix.key(id).unwrap().to_vec()).unwrap()).collect()
    }

    #[test]
    fn reregistration_moves_the_postings_and_forget_removes_them() {
        let mut ix = SeriesIndex::new();
        reg(&mut ix, "a", &[("x", "1"), ("y", "p")]);
        reg(&mut ix, "b", &[("x", "2")]);
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"1", b"2"])]), ["a", "b"]);
        // TS.ALTER a LABELS x 2: a leaves x=1 and y=p.
        reg(&mut ix, "a", &[("x", "2")]);
        assert!(q(&ix, &[Matcher::In(b"x", &[b"1"])]).is_empty());
        assert!(q(&ix, &[Matcher::In(b"x", &[b"2"]), Matcher::Present(b"y")]).is_empty());
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"2"]), Matcher::Absent(b"y")]), ["a", "b"]);
        ix.forget(b"a");
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"2"])]), ["b"]);
        assert_eq!(ix.len(), 1);
        // Registered again after being forgotten (a new series under the same key).
        reg(&mut ix, "a", &[("x", "3")]);
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"2", b"3"])]), ["b", "a"]);
    }

    #[test]
    fn not_in_absent_present_and_unknown_names() {
        let mut ix = SeriesIndex::new();
        reg(&mut ix, "a", &[("x", "1"), ("y", "p")]);
        reg(&mut ix, "b", &[("x", "1"), ("y", "q")]);
        reg(&mut ix, "c", &[("x", "1")]);
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"1"]), Matcher::NotIn(b"y", &[b"p"])]), ["b", "c"]);
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"1"]), Matcher::NotIn(b"y", &[b"p", b"q"])]), ["c"]);
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"1"]), Matcher::Present(b"y")]), ["a", "b"]);
        assert_eq!(q(&ix, &[Matcher::In(b"x", &[b"1"]), Matcher::Absent(b"nope")]), ["a", "b", "c"]);
        assert!(q(&ix, &[Matcher::In(b"x", &[b"1"]), Matcher::Present(b"nope")]).is_empty());
        assert!(q(&ix, &[Matcher::In(b"nope", &[b"1"])]).is_empty());
        assert!(q(&ix, &[Matcher::Present(b"x")]).is_empty());
        // A label given twice: the first value is the series' value (as `Series::label`).
        reg(&mut ix, "d", &[("z", "1"), ("z", "2")]);
        assert_eq!(q(&ix, &[Matcher::Present(b"z"), Matcher::In(b"z", &[b"1"]), Matcher::NotIn(b"z", &[b"2"])]), ["d"]);
        assert!(q(&ix, &[Matcher::In(b"z", &[b"2"])]).is_empty());
    }

    /// Each live id's group as (identity, source value), and the identities in order, from
    /// the index's kept groups.
    fn group_view(ix: &mut SeriesIndex, label: &str) -> (Vec<(String, Option<String>)>, Vec<String>) {
        let Some(l) = ix.name_id(label.as_bytes()) else { return (Vec::new(), Vec::new()) };
        let ids: Vec<u32> = ix.live.iter().collect();
        let values: Vec<Option<String>> = ids
            .iter()
            .map(|&id| {
                let s = ix.groups_for(l).source_of(id);
                (s != NO_ID).then(|| String::from_utf8(ix.value(s).to_vec()).unwrap())
            })
            .collect();
        let g = ix.groups_for(l);
        let per: Vec<(String, Option<String>)> = ids
            .iter()
            .zip(values)
            .map(|(&id, v)| (String::from_utf8_lossy(g.ident(g.group_of(id)).0).into_owned(), v))
            .collect();
        let mut used: Vec<u32> = ids.iter().map(|&id| g.group_of(id)).collect();
        used.sort_unstable_by_key(|&x| g.rank(x));
        used.dedup();
        let order = used.iter().map(|&x| String::from_utf8_lossy(g.ident(x).0).into_owned()).collect();
        (per, order)
    }

    #[test]
    fn groups_follow_registrations_and_match_a_fresh_build() {
        let mut ix = SeriesIndex::new();
        reg(&mut ix, "ibm:last:a", &[("instrument", "IBM"), ("field", "last"), ("source", "a")]);
        reg(&mut ix, "ibm:last:b", &[("field", "last"), ("source", "b"), ("instrument", "IBM")]);
        reg(&mut ix, "aapl:last:a", &[("instrument", "AAPL"), ("field", "last"), ("source", "a")]);
        let src = ix.name_id(b"source").unwrap();
        ix.groups_for(src);
        let id = |k: &str| ix.ids[k.as_bytes()];
        let (a, b, c) = (id("ibm:last:a"), id("ibm:last:b"), id("aapl:last:a"));
        let g = ix.groups(src).unwrap();
        // Label order does not matter; the source label is left out of the group.
        assert_eq!(g.group_of(a), g.group_of(b));
        assert_ne!(g.group_of(a), g.group_of(c));
        let (name, n) = g.ident(g.group_of(a));
        assert_eq!(&name[..n as usize], b"field=last,instrument=IBM");
        assert!(g.rank(g.group_of(c)) < g.rank(g.group_of(a)), "AAPL's group sorts first");
        // A new label set after the build: a new group, and the order is stale until
        // `groups_for` sorts it again.
        reg(&mut ix, "abc:last:a", &[("instrument", "ABC"), ("field", "last"), ("source", "a")]);
        assert!(ix.groups(src).is_none());
        // TS.ALTER moves a series to another group; forget drops it from its group.
        reg(&mut ix, "ibm:last:b", &[("instrument", "IBM"), ("field", "open"), ("source", "b")]);
        ix.forget(b"aapl:last:a");
        let g = ix.groups_for(src);
        assert_eq!(g.group_of(c), NO_ID);
        assert_ne!(g.group_of(a), g.group_of(b));
        // A series without the source label has a group but no source value.
        reg(&mut ix, "nolabel", &[("instrument", "IBM"), ("field", "last")]);
        let d = ix.ids[&b"nolabel"[..]];
        let g = ix.groups_for(src);
        assert_eq!(g.source_of(d), NO_ID);
        assert_eq!(g.group_of(d), g.group_of(a));
    }

    #[test]
    fn kept_groups_equal_groups_built_from_scratch_under_random_changes() {
        let mut ix = SeriesIndex::new();
        let mut rng = 7u64;
        let mut next = move |n: u64| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
        reg(&mut ix, "seed", &[("source", "s0"), ("g", "0")]);
        group_view(&mut ix, "source");
        for step in 0..2000 {
            let key = format!("k{}", next(40));
            match next(4) {
                0 => ix.forget(key.as_bytes()),
                _ => {
                    let mut labels: Vec<(String, String)> = vec![("g".into(), next(5).to_string())];
                    if next(3) > 0 {
                        labels.push(("source".into(), format!("s{}", next(3))));
                    }
                    if next(2) == 0 {
                        labels.insert(0, ("h".into(), next(3).to_string()));
                    }
                    let l: Vec<(&str, &str)> = labels.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
                    reg(&mut ix, &key, &l);
                }
            }
            if step % 50 == 0 {
                let kept = group_view(&mut ix, "source");
                let mut fresh = ix.clone();
                fresh.groups = None;
                assert_eq!(kept, group_view(&mut fresh, "source"), "step {step}");
                // Another source label rebuilds for it; asking for the first again rebuilds back.
                let other = group_view(&mut ix, "g");
                let mut fresh = ix.clone();
                fresh.groups = None;
                assert_eq!(other, group_view(&mut fresh, "g"));
            }
        }
    }

    #[test]
    fn a_few_new_groups_are_placed_in_the_order_as_a_fresh_sort_would() {
        let mut ix = SeriesIndex::new();
        for i in (0..200).step_by(2) {
            reg(&mut ix, &format!("k{i}"), &[("g", &format!("{i:03}")), ("source", "a")]);
        }
        group_view(&mut ix, "source");
        for round in 0..5 {
            // A few new groups at the start, the end and between existing ones.
            for i in [round * 40 + 1, round * 40 + 21, 999 - round] {
                reg(&mut ix, &format!("n{i}"), &[("g", &format!("{i:03}")), ("source", "b")]);
            }
            let kept = group_view(&mut ix, "source");
            let mut fresh = ix.clone();
            fresh.groups = None;
            assert_eq!(kept, group_view(&mut fresh, "source"), "round {round}");
            assert!(kept.1.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
