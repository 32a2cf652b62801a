//! Growth: capacity classes, and the rebuilds and splits that move a full segment's entries.
//!
//! Why classes: with uniform hashes, all segments of one depth fill up together, so a table
//! whose segments only split in two would swing, all at once, between 90% and 45% full:
//! at the wrong moment 38 bytes per `u64 -> u64` entry, worse than hashbrown's average. So a
//! segment's capacity steps up its *ladder* of classes 1.26x apart (`16 * 2^(class/24)`,
//! every eighth class): a full segment is rebuilt one rung up, and only a segment at the top
//! of its ladder (at most 1.59x `segment_slots`) splits, into two halves at the bottom.
//! Either way its load drops from 90% to about 71%, never lower, so the table costs at most
//! 17 / 0.71 = 24 bytes per `u64 -> u64` entry and about 21 on average. The price: an entry moves
//! about four times per doubling of the table instead of once. Each move stays inside one
//! segment, which streams through the cache; a whole-table rehash instead writes every
//! entry to a random cache line of a new array as large as the table.
//!
//! Staggered ladders: with one ladder for all segments, uniform hashes would still move the
//! whole table up a class within a few million inserts (every segment of one depth reaches
//! 90% at about the same size), so the table's load would swing between 71% and 90% as it
//! grows, and a benchmark or a user's data set would land anywhere on that sawtooth. So
//! classes are eighths of a step apart (`2^(1/24)`), and a segment's ladder (its class
//! modulo 8) is chosen by the top three bits of its hash prefix, its *phase*
//! ([`ladder_of`]): the eight groups of segments step up at eight evenly spaced sizes, and
//! the table's load stays near the 80% average at every size (measured by
//! `examples/load_curve.rs`). Phase 7's ladder is the top one (its largest class is 1.59x
//! `segment_slots`); the others are up to 7/24 of a doubling smaller, so no segment gets
//! larger, and the slowest growth step stays as it was. Segments of depth below 3 (tables
//! of at most four segments) all use phase 7's ladder.
//!
//! A full segment with many tombstones is rebuilt in the class that fits its live entries,
//! possibly a smaller one: that is also how deletions give memory back (segments never
//! merge, so the directory does not shrink).
//!
//! The directory's doubling: a split of a segment as deep as the directory needs a
//! directory one level deeper, twice the size. Copying it then would make that insert's
//! cost grow with the table (at 500 million keys, 2^17 entries: milliseconds). So once the
//! directory has [`DIR_AT_ONCE`] entries, every growth step copies [`DIR_STEP`] more of its
//! entries into the next directory, which directory updates keep current; a doubling then
//! only swaps it in. With uniform hashes the build finishes long before it is needed: a
//! segment created as deep as the directory must gain about twice its entries before it
//! splits, and by then the table has taken several growth steps per directory entry. Should
//! a doubling come first (hashes far from uniform), it finishes the build itself.
//!
//! Moving is the hot loop of growth: the old segment, first detached from the directory
//! (which then points at the fresh segments), is drained a group of control bytes at a time
//! (one branch per group, no control byte written per pair: [`Segment::drain`]), each key
//! is hashed once, and its slot in the fresh segment is found in an occupancy bitmap rather
//! than the control bytes (see [`Segment::place`]).

use crate::ctrl::tag;
use crate::key::KeyKind;
use crate::segment::Segment;
use crate::table::{HashTable, DIR_AT_ONCE, MAX_DEPTH};
use crate::Seed;

/// The smallest segment capacity (two groups).
pub(crate) const MIN_CAP: usize = 16;

/// Classes per doubling of capacity: a growth step is 8 of them (x1.26, see [`LADDER`]).
pub(crate) const CLASSES_PER_DOUBLING: u16 = 24;

/// Directory entries copied into the next directory per growth step (each written twice:
/// 24 KB of writes, a few microseconds, beside a segment rebuild's tens to hundreds).
const DIR_STEP: usize = 512;

/// Pages of a replaced directory freed per growth step: it took `2^g / DIR_STEP` steps to
/// build the directory of `2^(g+1)` entries, and its predecessor has `2^g / PAGE` pages.
const DIR_PAGES_FREED_PER_STEP: usize = 2;

/// Classes between consecutive rungs of one segment's ladder: a growth step.
pub(crate) const LADDER: u16 = 8;

/// Capacity of a class: `MIN_CAP * 2^(class / 24)`, rounded down.
pub(crate) fn class_cap(class: u16) -> usize {
    // floor(1024 * 2^(i / 24)); entries 0, 8 and 16 are the three steps of a doubling.
    #[rustfmt::skip]
    const MUL_1024: [usize; CLASSES_PER_DOUBLING as usize] = [
        1024, 1054, 1084, 1116, 1149, 1183, 1217, 1253, 1290, 1327, 1366, 1406,
        1448, 1490, 1534, 1579, 1625, 1673, 1722, 1772, 1824, 1878, 1933, 1989,
    ];
    let d = CLASSES_PER_DOUBLING;
    (MIN_CAP << (class / d)) * MUL_1024[(class % d) as usize] / 1024
}

/// The ladder (class modulo [`LADDER`]) of a segment of `depth` whose hash range holds
/// `hash`, in a table whose largest class is `top` (a multiple of [`LADDER`]): the top
/// three bits of the hash prefix, phase 7 being `top`'s own ladder (see the module comment).
pub(crate) fn ladder_of(hash: u64, depth: u8) -> u16 {
    let phase = if depth >= 3 { (hash >> 61) as u16 } else { 7 };
    (phase + 1) % LADDER
}

/// The largest class of `ladder` that is at most `top`: where a segment of that ladder splits.
pub(crate) fn ladder_top(top: u16, ladder: u16) -> u16 {
    top - (top + LADDER - ladder) % LADDER
}

/// Full slots and tombstones a segment of `cap` slots may hold: 115/128, about 90%.
pub(crate) fn used_max(cap: usize) -> usize {
    cap * 115 / 128
}

/// Entries a fresh segment of `cap` slots is given at most: 98/128, 77% (90% / 1.26 = 71%
/// after a growth step, plus a margin for the uneven halves of a split).
pub(crate) fn fill_max(cap: usize) -> usize {
    cap * 98 / 128
}

/// The smallest class of `ladder` (a class modulo [`LADDER`]) into which `n` entries fit
/// (see [`fill_max`]).
pub(crate) fn class_for(n: usize, ladder: u16) -> u16 {
    let mut c = ladder;
    while fill_max(class_cap(c)) < n {
        c += LADDER;
    }
    c
}

/// Buffers of one rebuild or split, dropped after it (a few KB; a table keeping them would
/// carry them for good, a visible cost for small tables).
#[derive(Default)]
pub(crate) struct Scratch {
    /// The hashes of the segment being split, by slot.
    hashes: Vec<u64>,
    /// Occupancy bitmaps of the segments being filled.
    occupied: [Vec<u64>; 2],
}

/// Resets `bits` to the occupancy bitmap of an empty segment of `cap` slots: one bit per
/// slot, and the bits past `cap` in the last word set so they are never free.
fn occupancy(bits: &mut Vec<u64>, cap: usize) -> &mut [u64] {
    bits.clear();
    bits.resize(cap.div_ceil(64), 0);
    if !cap.is_multiple_of(64) {
        bits[cap / 64] = !0 << (cap % 64);
    }
    bits
}

impl<K: KeyKind, V> Segment<K, V> {
    /// Places an entry known to be absent into a fresh segment (no tombstones) with room;
    /// the caller sets the segment's room from the number placed ([`Segment::room_with`]).
    ///
    /// `occupied` is a bitmap of this segment's full slots ([`occupancy`]), kept by the
    /// rebuild on the side: finding the first empty slot from the home is then one word load
    /// and a count of trailing ones, with no loop the branch predictor must guess. Reading
    /// control bytes instead would overlap the byte just written (rebuilds place entries in
    /// nearly ascending order) and stall on store forwarding at every entry.
    #[inline(always)]
    fn place(&mut self, occupied: &mut [u64], hash: u64, key: K::Stored, value: V) {
        let cap = self.cap as usize;
        let mut i = self.home(hash);
        loop {
            // Bits past `cap` are set, so a free bit is always a real slot.
            let free = !occupied[i / 64] >> (i % 64);
            if free != 0 {
                i += free.trailing_zeros() as usize;
                break;
            }
            i = (i / 64 + 1) * 64;
            if i >= cap {
                i = 0;
            }
        }
        occupied[i / 64] |= 1 << (i % 64);
        self.write_slot(i, tag(hash), (key, value));
    }

    /// Moves every entry of `old` into this fresh segment; returns how many.
    pub(crate) fn absorb(
        &mut self,
        old: &mut Segment<K, V>,
        seed: Seed,
        scratch: &mut Scratch,
    ) -> usize {
        let occupied = occupancy(&mut scratch.occupied[0], self.cap as usize);
        let mut n = 0;
        old.drain(|_, (k, v)| {
            self.place(occupied, K::hash(seed, K::key(&k)), k, v);
            n += 1;
        });
        n
    }

    /// The counting pass of a split of `seg` by hash bit `bit`: fills `scratch.hashes` with
    /// each full slot's hash (so each key is hashed once) and returns the entries of the low
    /// and the high half.
    fn split_counts(
        seg: &Segment<K, V>,
        seed: Seed,
        bit: u64,
        scratch: &mut Scratch,
    ) -> [usize; 2] {
        let hashes = &mut scratch.hashes;
        hashes.clear();
        hashes.resize(seg.cap(), 0);
        let (mut n, mut n_high) = (0, 0);
        Self::for_each_full(seg, |i| {
            let h = K::hash(seed, K::key(&seg.slot(i).0));
            hashes[i] = h;
            n_high += (h & bit != 0) as usize;
            n += 1;
        });
        [n - n_high, n_high]
    }

    /// The moving pass of a split: every entry of `old` into the half its bit picks.
    fn split_moves(
        old: &mut Segment<K, V>,
        halves: [&mut Segment<K, V>; 2],
        bit: u64,
        scratch: &mut Scratch,
    ) {
        let Scratch { hashes, occupied } = scratch;
        let [occupied_low, occupied_high] = occupied;
        let occupied = [
            occupancy(occupied_low, halves[0].cap()),
            occupancy(occupied_high, halves[1].cap()),
        ];
        let [low, high] = halves;
        old.drain(|i, (k, v)| {
            let h = hashes[i];
            if h & bit == 0 {
                low.place(occupied[0], h, k, v);
            } else {
                high.place(occupied[1], h, k, v);
            }
        });
    }
}

impl<K: KeyKind, V> HashTable<K, V> {
    /// Makes room in full segment `id` (which holds `hash`).
    pub(crate) fn grow(&mut self, id: usize, hash: u64) {
        self.build_next_dir(DIR_STEP);
        let seg = &self.segs[id];
        let ladder = seg.class() % LADDER;
        let class = class_for(seg.count_full() + 1, ladder);
        if class > ladder_top(self.split_class, ladder) && seg.depth < MAX_DEPTH {
            self.split(id, hash);
        } else {
            self.rebuild(id, class, hash);
        }
    }

    /// Moves segment `id`'s entries into a fresh segment of `class`.
    fn rebuild(&mut self, id: usize, class: u16, hash: u64) {
        let fresh = Segment::new(class, self.segs[id].depth);
        self.seg_bytes = self.seg_bytes - self.segs[id].alloc_bytes() + fresh.alloc_bytes();
        self.max_class = self.max_class.max(class);
        // Detach the old segment before moving anything: the directory points at the fresh
        // one (empty, no room until the moves are done), so if anything panicked midway no
        // directory entry would lead to moved or freed pairs.
        let mut old = std::mem::replace(&mut self.segs[id], fresh);
        self.room[id] = 0;
        self.sync_dir(id, hash);
        let n = self.segs[id].absorb(&mut old, self.seed, &mut Scratch::default());
        self.room[id] = self.segs[id].room_with(n);
    }

    /// Splits segment `id` (which holds `hash`) by the hash bit below its prefix.
    fn split(&mut self, id: usize, hash: u64) {
        let depth = self.segs[id].depth;
        if depth == self.global_depth {
            self.double_dir();
        }
        let bit = 1u64 << (63 - depth);
        // Any hash of each half: the split bit clear or set below the shared prefix.
        let ladders = [
            ladder_of(hash & !bit, depth + 1),
            ladder_of(hash | bit, depth + 1),
        ];
        let scratch = &mut Scratch::default();
        let counts = Segment::split_counts(&self.segs[id], self.seed, bit, scratch);
        let [low, high] = [0, 1].map(|h| Segment::new(class_for(counts[h], ladders[h]), depth + 1));
        self.seg_bytes =
            self.seg_bytes - self.segs[id].alloc_bytes() + low.alloc_bytes() + high.alloc_bytes();
        self.max_class = self.max_class.max(low.class()).max(high.class());
        // As in `rebuild`, the old segment is detached before anything moves. Its directory
        // entries: the first half (prefix bit 0) points at the low half, kept at `id`, the
        // second half at the new segment.
        let high_id = self.segs.len();
        let mut old = std::mem::replace(&mut self.segs[id], low);
        self.segs.push(high);
        self.room[id] = 0;
        self.room.push(0);
        self.sync_dir(id, hash & !bit);
        self.sync_dir(high_id, hash | bit);
        let (low, high) = self.segs.pair_mut(id, high_id);
        Segment::split_moves(&mut old, [low, high], bit, scratch);
        self.room[id] = self.segs[id].room_with(counts[0]);
        self.room[high_id] = self.segs[high_id].room_with(counts[1]);
    }

    /// Copies up to `step` more entries of the directory into the next one (each twice: the
    /// old prefix followed by 0 and 1). Called once per growth step, so a directory of `2^g`
    /// entries is built after `2^g / step` of them; with uniform hashes a segment as deep as
    /// the directory needs about three growth steps per directory entry before it splits,
    /// so the build is done thousands of times over before a doubling needs it.
    pub(crate) fn build_next_dir(&mut self, step: usize) {
        self.old_dir.release(DIR_PAGES_FREED_PER_STEP);
        if self.dir.len() < DIR_AT_ONCE {
            return;
        }
        let from = self.next_dir.len() / 2;
        let to = from.saturating_add(step).min(self.dir.len());
        for j in from..to {
            let e = self.dir[j];
            self.next_dir.push(e);
            self.next_dir.push(e);
        }
        self.dir_writes += 2 * (to - from) as u64;
    }

    /// Makes the directory one level deeper: each entry becomes two adjacent ones, the old
    /// prefix followed by 0 and 1. A large directory swaps in the next one, built ahead
    /// (finishing it first, which takes no work unless hashes are far from uniform); a
    /// small one is copied at once.
    fn double_dir(&mut self) {
        self.build_next_dir(usize::MAX);
        let next = if self.dir.len() < DIR_AT_ONCE {
            self.dir_writes += 2 * self.dir.len() as u64;
            self.dir.iter().flat_map(|&e| [e, e]).collect()
        } else {
            std::mem::take(&mut self.next_dir)
        };
        debug_assert_eq!(next.len(), 2 * self.dir.len());
        let old = std::mem::replace(&mut self.dir, next);
        if old.len() >= DIR_AT_ONCE {
            // Freed a few pages per growth step from now on (see `old_dir`); what is left of
            // the one before (only if hashes are far from uniform) goes now.
            self.old_dir = old;
        }
        self.global_depth += 1;
        self.dir_shift -= 1;
    }
}
