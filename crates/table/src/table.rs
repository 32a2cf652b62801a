//! The table: a directory of segments (extendible hashing) that grows one segment at a time.
//!
//! Why: a table that doubles by rehashing everything (Redis's dict in one step, hashbrown,
//! std) stalls for seconds at a billion keys and holds the old and the new array at once
//! (1.5x the table). Redis spreads the rehash over later operations but still holds both
//! arrays for the whole migration. Here no operation ever touches more than one segment:
//!
//! - The directory is an array of `2^global_depth` entries indexed by the hash's top
//!   `global_depth` bits, stored in fixed-size pages (`pages.rs`), as are the segments and
//!   their room: no insert reallocates or copies an array that grows with the table. A segment of local depth `d` owns the `2^(global_depth - d)`
//!   consecutive directory entries that share its `d`-bit prefix. Each entry holds the
//!   segment's id and a copy of its array addresses, capacity and depth (24 bytes): at 100
//!   million entries the directory has about 32K entries (768 KB) and stays in cache.
//! - When an insert finds its segment full (90% of its slots used, 94% in a dense table), the
//!   segment is rebuilt one growth step larger or split in two (`growth.rs`); only a split of a segment as
//!   deep as the directory doubles the directory. A directory of 1024 entries or more is
//!   not copied then: the doubled one was built ahead, 512 entries per growth step, kept
//!   current by every directory update since (`growth.rs`), and the doubling swaps it in;
//!   the old one is freed two pages per growth step. So the slowest insert
//!   costs one rebuild of at most `1.59 * segment_slots` slots (6.5K by default, a few
//!   hundred microseconds, mostly page faults on the fresh segment), and the extra memory
//!   at any moment is about one segment.
//!
//! Lookups cost one directory read (cached), then one cache line of control bytes and one
//! slot line, fetched in parallel: the same two misses as hashbrown's. The segment header is
//! not on that path (it was: a dependent load that cost W2 about as much as the control
//! bytes' own miss), and an insert updates only its segment's *room* in a compact array
//! (4 bytes per segment). `hash_key` / `prefetch` / `*_hashed` let a caller overlap the
//! misses across a batch of keys, as a server does for a pipeline.

use crate::ctrl::tag;
use crate::growth::{class_cap, Growth};
use crate::key::KeyKind;
use crate::pages::Pages;
use crate::prefetch::prefetch_read;
use crate::segment::{DirEntry, Probe, Segment};
use crate::spare::Spares;
use crate::Seed;

/// Deepest a segment may get: the home slot uses the 32 hash bits below a segment's prefix,
/// so prefix and home bits must fit in 64 (and 2^32 segments is beyond any machine).
pub(crate) const MAX_DEPTH: u8 = 32;

/// Directories smaller than this double in one step (a bounded copy of at most this many
/// entries); larger ones are doubled incrementally (`growth.rs`).
pub(crate) const DIR_AT_ONCE: usize = crate::pages::PAGE;

/// Result of [`HashTable::locate`]: the slot holding the key, or `(segment, slot)` free
/// for it.
enum Slot {
    Found(usize),
    Free(usize, usize),
}

/// Where [`HashTable::find_hashed`] found a key: its segment and slot. It stays valid until
/// the table is next modified (an insert may move entries); [`HashTable::at_mut`] reads it.
/// It exists so a caller can look a key up, decide something that needs `&mut` access to
/// itself (reclaim an expired entry, say), and only then borrow the value, without a second
/// probe: returning a borrow from one branch of a match is what the borrow checker refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    seg: usize,
    slot: usize,
}

/// Tuning and reproducibility knobs. `Default` suits most tables; a table whose slots are
/// most of its memory (the keyspace's) runs [`Density::Dense`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Slots of a segment right after a split (0.89x this with [`Density::Dense`]); a power
    /// of two, at least 16. The largest segment (just before it splits) has 1.59x this
    /// many (1.78x at 16 with `Dense`). Larger segments mean a smaller directory but a
    /// longer slowest insert. Tests use 16 to force many splits.
    pub segment_slots: usize,
    /// Hash seed; `None` draws a random one (the default, against hash flooding).
    pub seed: Option<u64>,
    /// How full segments run: memory per entry against growth work (`growth.rs`).
    pub density: Density,
    /// Segment bytes from which the table allocates the segments of its next growth steps
    /// ahead and faults them in a page per insert (`spare.rs`), so that a growth step
    /// writes no fresh page. `usize::MAX`: never. Tests use 0 to exercise it.
    pub spares_from_bytes: usize,
}

/// How full a table's segments run (`growth.rs`): the trade between bytes per entry and the
/// work of growing, which every insert pays a share of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Density {
    /// Growth steps of x1.26 at 90% full: segments run 71-90% full, 80% on average, and an
    /// entry moves about 4 times per doubling of the table. For small slots, where the
    /// moves are most of an insert's cost (`u64 -> u64`: W2).
    #[default]
    Balanced,
    /// Growth steps of x1.12 at 94% full: segments run 84-94% full, 88% on average, and an
    /// entry moves about 8 times per doubling, through longer probe runs. For large slots,
    /// where memory is the cost that matters (the keyspace's 37-byte slots).
    Dense,
}

impl Density {
    pub(crate) fn growth(self) -> Growth {
        match self {
            Density::Balanced => Growth::new(8, 115),
            Density::Dense => Growth::new(4, 120).returning_slack(),
        }
    }
}

impl Config {
    /// What `Default` gives, usable in constants.
    pub const DEFAULT: Config = Config {
        segment_slots: 4096,
        seed: None,
        density: Density::Balanced,
        spares_from_bytes: crate::spare::SPARES_FROM_BYTES,
    };
}

impl Default for Config {
    fn default() -> Config {
        Config::DEFAULT
    }
}

/// A hash table keyed by `K` (see [`crate::Table`] and [`crate::U64Table`]).
pub struct HashTable<K: KeyKind, V> {
    /// Segments indexed by the top `global_depth` bits of a hash: each entry holds the
    /// segment's id and what a lookup needs of it (address, capacity, depth), always equal
    /// to `segs[id].dir_entry(id)` (see [`Self::sync_dir`]). Empty until the first insert,
    /// so an unused table allocates nothing.
    pub(crate) dir: Pages<DirEntry>,
    /// The directory one level deeper, built a bounded number of entries per growth step
    /// ahead of the split that will need it (see `growth.rs`): entries `2j` and `2j + 1`
    /// equal `dir[j]` for every `j < next_dir.len() / 2`. Empty while the directory is
    /// smaller than [`DIR_AT_ONCE`] (such a directory doubles at once).
    pub(crate) next_dir: Pages<DirEntry>,
    /// The directory a doubling replaced, freed a few pages per growth step (freeing all of
    /// it in the insert that doubled would be work proportional to its size).
    pub(crate) old_dir: Pages<DirEntry>,
    pub(crate) segs: Pages<Segment<K, V>>,
    /// Per segment (same index as `segs`), how many more EMPTY slots it may fill before it
    /// must grow. Kept here rather than in the segment header: 4 bytes per segment (100 KB
    /// at 100M entries) stay in the L1/L2 cache, where an insert that read and wrote a
    /// 32-byte header per segment waited on it (15% of W2's insert time).
    pub(crate) room: Pages<u32>,
    /// Directory entries written by growth so far (doubling, building `next_dir`, pointing
    /// entries at new segments): the work a growing insert does in the directory, which
    /// tests bound per insert.
    pub(crate) dir_writes: u64,
    /// `63 - global_depth`: `(hash >> 1) >> dir_shift` is the directory index, also for depth 0.
    pub(crate) dir_shift: u32,
    pub(crate) global_depth: u8,
    /// The largest class (of the top ladder, `growth.rs`): a full segment at the top of its
    /// ladder splits instead of growing.
    pub(crate) split_class: u16,
    /// Growth step and load limits ([`Config::density`]).
    pub(crate) growth: Growth,
    /// Largest class any segment has had (bounds random sampling).
    pub(crate) max_class: u16,
    pub(crate) len: usize,
    /// Bytes of all segments' control and slot arrays.
    pub(crate) seg_bytes: usize,
    /// Bytes of keys stored out of line.
    pub(crate) heap_key_bytes: usize,
    pub(crate) seed: Seed,
    /// Future segments' allocations, faulted in ahead of growth (`spare.rs`).
    pub(crate) spares: Spares,
}

impl<K: KeyKind, V> Default for HashTable<K, V> {
    fn default() -> Self {
        HashTable::new()
    }
}

impl<K: KeyKind, V> std::fmt::Debug for HashTable<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashTable")
            .field("len", &self.len)
            .field("segments", &self.segs.len())
            .field("global_depth", &self.global_depth)
            .finish()
    }
}

impl<K: KeyKind, V> HashTable<K, V> {
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// A table that holds `n` entries without growing.
    pub fn with_capacity(n: usize) -> Self {
        Self::with_capacity_and_config(n, Config::default())
    }

    pub fn with_config(config: Config) -> Self {
        let s = config.segment_slots;
        assert!(
            s.is_power_of_two() && (16..=1 << 24).contains(&s),
            "segment_slots must be a power of two in 16..=2^24"
        );
        let growth = config.density.growth();
        let split_class = growth.split_class(s);
        HashTable {
            dir: Pages::new(),
            next_dir: Pages::new(),
            old_dir: Pages::new(),
            segs: Pages::new(),
            room: Pages::new(),
            dir_writes: 0,
            dir_shift: 63,
            global_depth: 0,
            split_class,
            growth,
            max_class: 0,
            len: 0,
            seg_bytes: 0,
            heap_key_bytes: 0,
            seed: config.seed.map_or_else(Seed::random, Seed::from_u64),
            spares: Spares::from_bytes(config.spares_from_bytes),
        }
    }

    pub fn with_capacity_and_config(n: usize, config: Config) -> Self {
        let mut t = Self::with_config(config);
        if n == 0 {
            return t;
        }
        // Enough segments of the post-split class that n entries spread evenly fit at 77%,
        // each in the smallest class of its ladder that holds its share.
        let g = t.growth;
        let per_segment = g.fill_max(class_cap(g.split_half_class(t.split_class)));
        let depth = if g.class_for(n, g.ladder_of(0, 0)) <= t.split_class {
            0
        } else {
            (n.div_ceil(per_segment).next_power_of_two().trailing_zeros() as u8).min(MAX_DEPTH)
        };
        let share = n.div_ceil(1 << depth);
        t.segs = (0..1u64 << depth)
            .map(|i| {
                let hash = if depth == 0 {
                    0
                } else {
                    i << (64 - depth as u32)
                };
                Segment::new(
                    g.class_for(share, g.ladder_of(hash, depth)),
                    depth,
                    g.return_slack,
                )
            })
            .collect();
        t.dir = t
            .segs
            .iter()
            .zip(0..)
            .map(|(s, id)| s.dir_entry(id))
            .collect();
        t.global_depth = depth;
        t.dir_shift = 63 - depth as u32;
        t.room = t.segs.iter().map(|s| s.room_with(0, g)).collect();
        t.max_class = t.segs.iter().map(Segment::class).max().unwrap_or(0);
        t.seg_bytes = t.segs.iter().map(Segment::alloc_bytes).sum();
        t
    }

    /// An empty table with the same seed and segment size.
    fn fresh(&self) -> Self {
        HashTable {
            dir: Pages::new(),
            next_dir: Pages::new(),
            old_dir: Pages::new(),
            segs: Pages::new(),
            room: Pages::new(),
            dir_writes: 0,
            dir_shift: 63,
            global_depth: 0,
            max_class: 0,
            len: 0,
            seg_bytes: 0,
            heap_key_bytes: 0,
            spares: Spares::from_bytes(self.spares.from_bytes),
            ..*self
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated (full or not).
    pub fn capacity(&self) -> usize {
        self.segs.iter().map(Segment::cap).sum()
    }

    /// Bytes this table allocated: segments, directory and out-of-line keys. Excludes what
    /// values own on the heap (the caller accounts for that).
    pub fn memory_bytes(&self) -> usize {
        self.dir.alloc_bytes()
            + self.next_dir.alloc_bytes()
            + self.old_dir.alloc_bytes()
            + self.segs.alloc_bytes()
            + self.room.alloc_bytes()
            + self.seg_bytes
            + self.heap_key_bytes
            + self.spares.bytes()
    }

    /// Growth steps' segments that came from a spare, and those that found none while the
    /// table kept spares (`spare.rs`; for benchmarks).
    #[doc(hidden)]
    pub fn spare_stats(&self) -> (u64, u64) {
        (self.spares.hits, self.spares.misses)
    }

    /// The hash of `key` in this table, for the `*_hashed` methods and [`Self::prefetch`].
    #[inline]
    pub fn hash_key(&self, key: K::Key<'_>) -> u64 {
        K::hash(self.seed, key)
    }

    #[inline(always)]
    pub(crate) fn dir_entry(&self, hash: u64) -> DirEntry {
        self.dir[((hash >> 1) >> self.dir_shift) as usize]
    }

    #[inline(always)]
    pub(crate) fn seg_id(&self, hash: u64) -> usize {
        self.dir_entry(hash).id as usize
    }

    /// A lookup view of `hash`'s segment, straight from its directory entry; the table must
    /// have a directory.
    #[inline(always)]
    fn probe(&self, hash: u64) -> (usize, Probe<'_, K, V>) {
        let e = self.dir_entry(hash);
        // SAFETY: every directory entry equals `segs[id].dir_entry(id)` (the invariant kept
        // by `sync_dir` and checked by `check_invariants`), and `&self` keeps the segment
        // alive and unchanged for the probe's lifetime.
        (e.id as usize, unsafe { e.probe() })
    }

    /// The value in slot `i` of `hash`'s segment, through the directory entry (no segment
    /// header load, as lookups).
    ///
    /// # Safety
    /// Slot `i` of `hash`'s segment is full (a probe under this borrow found or filled it).
    #[inline(always)]
    unsafe fn value_mut(&mut self, hash: u64, i: usize) -> &mut V {
        let e = self.dir_entry(hash);
        // SAFETY: the entry describes a live segment (see `probe`); slot `i` is below its
        // cap and full (the caller's contract), so it holds an initialised pair; `&mut self`
        // makes the borrow unique for its lifetime.
        unsafe { &mut (*e.slot_ptr::<K, V>(i)).1 }
    }

    /// Points the directory entries of segment `id` (which holds `hash`) at it again, after
    /// it was created, rebuilt or split: the invariant that makes [`Self::probe`] sound.
    pub(crate) fn sync_dir(&mut self, id: usize, hash: u64) {
        let seg = &self.segs[id];
        let span = 1usize << (self.global_depth - seg.depth);
        let start = (((hash >> 1) >> self.dir_shift) as usize) & !(span - 1);
        let e = seg.dir_entry(u32::try_from(id).expect("at most 2^32 segments"));
        self.dir.fill(start..start + span, e);
        // The part of the block the next directory already holds: twice as many entries.
        let built = self.next_dir.len() / 2;
        if start < built {
            self.next_dir
                .fill(2 * start..2 * (start + span).min(built), e);
        }
        self.dir_writes += (span + 2 * (start + span).min(built).saturating_sub(start)) as u64;
    }

    /// Starts loading `hash`'s directory entry into the cache: the first step of a two-step
    /// batch prefetch ([`Self::prefetch`] needs the entry to find the slot). The directory
    /// is small and usually cached already, so this step matters little.
    #[inline]
    pub fn prefetch_segment(&self, hash: u64) {
        if self.dir.is_empty() {
            return;
        }
        prefetch_read(&self.dir[((hash >> 1) >> self.dir_shift) as usize] as *const DirEntry);
    }

    /// Starts loading the control bytes and home slot of `hash` into the cache.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if self.dir.is_empty() {
            return;
        }
        self.probe(hash).1.prefetch(hash);
    }

    #[inline]
    pub fn get(&self, key: K::Key<'_>) -> Option<&V> {
        self.get_hashed(self.hash_key(key), key)
    }

    /// [`Self::get`] with `hash == self.hash_key(key)` computed by the caller.
    #[inline]
    pub fn get_hashed(&self, hash: u64, key: K::Key<'_>) -> Option<&V> {
        if self.dir.is_empty() {
            return None;
        }
        let (_, p) = self.probe(hash);
        // SAFETY: `find` returns full slots below `cap`.
        p.find(hash, key).map(|i| unsafe { &p.slot(i).1 })
    }

    #[inline]
    pub fn get_mut(&mut self, key: K::Key<'_>) -> Option<&mut V> {
        self.get_mut_hashed(self.hash_key(key), key)
    }

    #[inline]
    pub fn get_mut_hashed(&mut self, hash: u64, key: K::Key<'_>) -> Option<&mut V> {
        if self.dir.is_empty() {
            return None;
        }
        let i = self.probe(hash).1.find(hash, key)?;
        // SAFETY: `find` returns full slots below `cap`.
        Some(unsafe { self.value_mut(hash, i) })
    }

    /// Where `key` is (`hash == self.hash_key(key)`), for [`Self::at_mut`].
    #[inline]
    pub fn find_hashed(&self, hash: u64, key: K::Key<'_>) -> Option<Found> {
        if self.dir.is_empty() {
            return None;
        }
        let (seg, p) = self.probe(hash);
        p.find(hash, key).map(|slot| Found { seg, slot })
    }

    /// The value at a position [`Self::find_hashed`] returned, with no modification of the
    /// table in between. (A stale position reads whatever entry is in that slot now, or
    /// panics if the slot is empty or no longer exists: a logic error, never undefined
    /// behaviour.)
    #[inline]
    pub fn at_mut(&mut self, found: Found) -> &mut V {
        &mut self.segs[found.seg].slot_mut(found.slot).1
    }

    pub fn contains_key(&self, key: K::Key<'_>) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or overwrites; returns the previous value. The key is copied into the slot.
    #[inline]
    pub fn insert(&mut self, key: K::Key<'_>, value: V) -> Option<V> {
        self.insert_hashed(self.hash_key(key), key, value)
    }

    #[inline]
    pub fn insert_hashed(&mut self, hash: u64, key: K::Key<'_>, value: V) -> Option<V> {
        match self.locate(hash, key) {
            // SAFETY: `locate` found the key in full slot `i` of `hash`'s segment.
            Slot::Found(i) => Some(std::mem::replace(unsafe { self.value_mut(hash, i) }, value)),
            Slot::Free(id, i) => {
                self.put(id, i, hash, key, value);
                None
            }
        }
    }

    /// The value of `key`, inserting `make()` first if absent; the flag says it was inserted.
    pub fn get_or_insert_with(
        &mut self,
        key: K::Key<'_>,
        make: impl FnOnce() -> V,
    ) -> (&mut V, bool) {
        self.get_or_insert_with_hashed(self.hash_key(key), key, make)
    }

    pub fn get_or_insert_with_hashed(
        &mut self,
        hash: u64,
        key: K::Key<'_>,
        make: impl FnOnce() -> V,
    ) -> (&mut V, bool) {
        let (i, inserted) = match self.locate(hash, key) {
            Slot::Found(i) => (i, false),
            Slot::Free(id, i) => {
                self.put(id, i, hash, key, make());
                (i, true)
            }
        };
        // SAFETY: slot `i` holds the key: found, or just filled by `put`.
        (unsafe { self.value_mut(hash, i) }, inserted)
    }

    #[inline]
    pub fn remove(&mut self, key: K::Key<'_>) -> Option<V> {
        self.remove_hashed(self.hash_key(key), key)
    }

    pub fn remove_hashed(&mut self, hash: u64, key: K::Key<'_>) -> Option<V> {
        if self.dir.is_empty() {
            return None;
        }
        let (id, p) = self.probe(hash);
        let i = p.find(hash, key)?;
        let ((k, v), freed) = self.segs[id].take(i);
        self.room[id] += freed;
        self.len -= 1;
        self.heap_key_bytes -= K::heap_bytes(&k);
        Some(v)
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(K::Key<'_>, &mut V) -> bool) {
        let (mut removed, mut heap) = (0, 0);
        for (seg, room) in self.segs.iter_mut().zip(self.room.iter_mut()) {
            for i in 0..seg.cap() {
                if !seg.is_full_at(i) {
                    continue;
                }
                let (k, v) = seg.slot_mut(i);
                if !keep(K::key(k), v) {
                    let ((k, _), freed) = seg.take(i);
                    *room += freed;
                    heap += K::heap_bytes(&k);
                    removed += 1;
                }
            }
        }
        self.len -= removed;
        self.heap_key_bytes -= heap;
    }

    /// Removes every entry, freeing all memory.
    pub fn clear(&mut self) {
        *self = self.fresh();
    }

    /// Empties the table and returns its old contents, so that the caller can drop a huge
    /// table on another thread (FLUSHDB ASYNC) while this one is usable at once.
    pub fn take(&mut self) -> Self {
        let fresh = self.fresh();
        std::mem::replace(self, fresh)
    }

    /// Whether inserting `key` (hashed to `hash`) would first grow its segment (a rebuild or a
    /// split): true only for an absent key whose segment is at its load limit. For benchmarks
    /// that time the inserts that grow the table apart from the others; not a stable API.
    #[doc(hidden)]
    pub fn insert_grows(&self, hash: u64, key: K::Key<'_>) -> bool {
        self.dir.is_empty() || {
            let (id, p) = self.probe(hash);
            matches!(p.find_or_free(hash, key), Err(i) if !self.has_room(id, i))
        }
    }

    /// The directory's entries and how many entries growth has written into directories
    /// so far: a test's measure of the directory work each insert does. Not a stable API.
    #[doc(hidden)]
    pub fn directory_stats(&self) -> (usize, u64) {
        (self.dir.len(), self.dir_writes)
    }

    /// Whether free slot `i` of segment `id` may be filled: reusing a tombstone always may,
    /// an EMPTY slot only while the segment has room.
    #[inline(always)]
    fn has_room(&self, id: usize, i: usize) -> bool {
        self.room[id] > 0 || !self.segs[id].uses_room(i)
    }

    /// Where `key` is, or where it goes. The common case is one pass over one segment's
    /// control bytes, inlined; the rare case (first insert, full segment) is out of line.
    #[inline(always)]
    fn locate(&mut self, hash: u64, key: K::Key<'_>) -> Slot {
        if !self.dir.is_empty() {
            let (id, p) = self.probe(hash);
            match p.find_or_free(hash, key) {
                Ok(i) => return Slot::Found(i),
                Err(i) if self.has_room(id, i) => return Slot::Free(id, i),
                Err(_) => {}
            }
        }
        self.make_room(hash)
    }

    /// A free slot for an absent key with `hash`, after creating the first segment or growing
    /// the key's segment (more than once only if a split sent nearly everything one way).
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, hash: u64) -> Slot {
        if self.dir.is_empty() {
            self.segs.push(Segment::new(0, 0, self.growth.return_slack));
            self.room.push(self.segs[0].room_with(0, self.growth));
            self.dir.push(self.segs[0].dir_entry(0));
            self.seg_bytes = self.segs[0].alloc_bytes();
        }
        loop {
            let id = self.seg_id(hash);
            let i = self.segs[id].first_free(hash);
            if self.has_room(id, i) {
                return Slot::Free(id, i);
            }
            self.grow(id, hash);
        }
    }

    #[inline]
    fn put(&mut self, id: usize, i: usize, hash: u64, key: K::Key<'_>, value: V) {
        let stored = K::store(key);
        self.heap_key_bytes += K::heap_bytes(&stored);
        let e = self.dir_entry(hash);
        debug_assert_eq!(e.id as usize, id);
        // SAFETY: directory entries describe their segments (see `probe`), and `&mut self`
        // gives exclusive access to them.
        let took_room = unsafe { e.fill::<K, V>(i, tag(hash), (stored, value)) };
        self.room[id] -= took_room as u32;
        self.len += 1;
        if self.spares.untouched {
            self.spares.touch_one();
        }
    }
}
