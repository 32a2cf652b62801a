//! Growth: capacity classes, and the rebuilds and splits that move a full segment's entries.
//!
//! Why classes: with uniform hashes, all segments of one depth fill up together, so a table
//! whose segments only split in two would swing, all at once, between 90% and 45% full:
//! at the wrong moment 38 bytes per `u64 -> u64` entry, worse than hashbrown's average. So a
//! segment's capacity steps up its *ladder* of classes (`16 * 2^(class/24)`, every `ladder`th
//! class): a full segment is rebuilt one rung up, and only a segment at the top of its
//! ladder (at most 1.59x `segment_slots`) splits, into two halves one rung above half of it.
//! Either way its load drops by one step, never lower.
//!
//! How far apart the rungs are and how full a segment gets is the table's [`Growth`],
//! chosen by its `Density`. A segment that steps by `g` at a maximum load `T` runs between
//! `T / g` and `T` full, `T ln g / (g - 1)` on average over sizes; a step moves all its
//! entries, and the next comes after it gained `g - 1` times as many, so an insert pays for
//! `g / (g - 1)` moves:
//!
//! | density | step `g` | max `T` | load after a step | average load | moves per insert |
//! |---|---|---|---|---|---|
//! | `Balanced` | 8 classes, x1.26 | 115/128, 90% | 71% | 80% | 4.8 |
//! | `Dense` | 4 classes, x1.12 | 120/128, 94% | 84% | 88% | 9.2 |
//!
//! `Balanced` (the default, W2's `u64 -> u64` table) costs at most 17 / 0.71 = 24 bytes per
//! entry, about 21 on average, and keeps the moves few: they are most of an insert's cost
//! when a slot is 17 bytes. `Dense` (the keyspace's, 37-byte slots (40 before issue 27), unless the server runs
//! with `keyspace-density balanced`) saves 4.8 of the 51
//! bytes a slot costs per key at 80%, for twice the moves and longer probes: linear probing
//! at 94% has runs of about 130 slots for a miss (8 groups of control bytes, two cache
//! lines), against 50 at 90%; above ~95% they lengthen fast (230 at 95.3%, 500 at 97%), so
//! `T` stays at 120/128. Each move stays inside one segment, which streams through the
//! cache; a whole-table rehash instead writes every entry to a random cache line of a new
//! array as large as the table.
//!
//! Staggered ladders: with one ladder for all segments, uniform hashes would still move the
//! whole table up a step within a few million inserts (every segment of one depth reaches
//! `T` at about the same size), so the table's load would swing between `T / g` and `T` as
//! it grows, and a benchmark or a user's data set would land anywhere on that sawtooth. So
//! classes are a fraction of a step apart (`2^(1/24)`), there are as many ladders as classes
//! in a step (8 or 4), and a segment's ladder (its class modulo `ladder`) is chosen by the
//! top 3 or 2 bits of its hash prefix, its *phase* ([`Growth::ladder_of`]): the groups of
//! segments step up at evenly spaced sizes, and the table's load stays near its average at
//! every size (measured by `examples/load_curve.rs`: 0.795-0.801 and 0.882-0.887 from 1M to
//! 20M entries). The last phase's ladder is the top one (its largest class is 1.59x
//! `segment_slots`); the others are up to a step smaller, so no segment gets larger, and the
//! slowest growth step is the same at either density. Segments shallower than the phase
//! bits (tables of at most a few segments) all use the top ladder.
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

/// Classes per doubling of capacity: a growth step is [`Growth::ladder`] of them (8: x1.26,
/// or 4: x1.12).
pub(crate) const CLASSES_PER_DOUBLING: u16 = 24;

/// Directory entries copied into the next directory per growth step (each written twice:
/// 24 KB of writes, a few microseconds, beside a segment rebuild's tens to hundreds).
const DIR_STEP: usize = 512;

/// Pages of a replaced directory freed per growth step: it took `2^g / DIR_STEP` steps to
/// build the directory of `2^(g+1)` entries, and its predecessor has `2^g / PAGE` pages.
const DIR_PAGES_FREED_PER_STEP: usize = 2;

/// floor(1024 * 2^(i / 24)); entries 0, 8 and 16 are the three steps of a doubling.
#[rustfmt::skip]
const MUL_1024: [usize; CLASSES_PER_DOUBLING as usize] = [
    1024, 1054, 1084, 1116, 1149, 1183, 1217, 1253, 1290, 1327, 1366, 1406,
    1448, 1490, 1534, 1579, 1625, 1673, 1722, 1772, 1824, 1878, 1933, 1989,
];

/// Capacity of a class: `MIN_CAP * 2^(class / 24)`, rounded down.
pub(crate) fn class_cap(class: u16) -> usize {
    let d = CLASSES_PER_DOUBLING;
    (MIN_CAP << (class / d)) * MUL_1024[(class % d) as usize] / 1024
}

/// Slack, in 128ths of a fresh segment, between the entries a growth step leaves in it and
/// [`Growth::fill_max`]: room for the uneven halves of a split (a half of a 6.5K-slot
/// segment differs from its mean by about 1% of its slots) and for `class_cap`'s rounding.
const FILL_SLACK_128: usize = 6;

/// A table's growth parameters: how far apart its rungs are and how full a segment gets
/// (see the module comment for the trade). Chosen per table by [`crate::Density`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Growth {
    /// Classes between consecutive rungs of one segment's ladder, a growth step: 8 (x1.26)
    /// or 4 (x1.12). Also the number of ladders (phases), so they stay evenly staggered.
    pub(crate) ladder: u16,
    /// `log2(ladder)`: the hash prefix bits that pick a segment's phase.
    phase_bits: u8,
    /// Full slots and tombstones a segment may hold, in 128ths of its slots.
    used_max_128: u16,
    /// Entries a fresh segment is given at most, in 128ths of its slots.
    fill_max_128: u16,
    /// Whether new segments give their allocator slack back (`segment.rs`,
    /// `return_allocation_slack`): dense tables only, which trade CPU for memory.
    pub(crate) return_slack: bool,
}

impl Growth {
    /// Growth by `ladder` classes (4 or 8) at a maximum load of `used_max_128` / 128.
    pub(crate) const fn new(ladder: u16, used_max_128: u16) -> Growth {
        assert!(
            ladder == 4 || ladder == 8,
            "a growth step of 4 or 8 classes"
        );
        assert!(
            used_max_128 >= 64 && used_max_128 <= 124,
            "a maximum load of 50% to 97%"
        );
        // After a growth step a segment holds `used_max` of the old capacity in one
        // `2^(ladder/24)` times larger: that load, rounded up, plus the slack, is what a
        // fresh segment may be given; a fresh segment must still have room.
        let after_step = (used_max_128 as usize * 1024).div_ceil(MUL_1024[ladder as usize]);
        let fill = after_step + FILL_SLACK_128;
        assert!(
            fill + 4 <= used_max_128 as usize,
            "a fresh segment has room"
        );
        Growth {
            ladder,
            phase_bits: ladder.trailing_zeros() as u8,
            used_max_128,
            fill_max_128: fill as u16,
            return_slack: false,
        }
    }

    /// The same growth, with new segments giving their allocator slack back.
    pub(crate) const fn returning_slack(mut self) -> Growth {
        self.return_slack = true;
        self
    }

    /// Full slots and tombstones a segment of `cap` slots may hold.
    pub(crate) fn used_max(&self, cap: usize) -> usize {
        cap * self.used_max_128 as usize / 128
    }

    /// Entries a fresh segment of `cap` slots is given at most: the load after a growth
    /// step (`used_max` / `2^(ladder/24)`), plus a margin for the uneven halves of a split.
    pub(crate) fn fill_max(&self, cap: usize) -> usize {
        cap * self.fill_max_128 as usize / 128
    }

    /// The largest class of a table of `segment_slots` (a power of two, at least
    /// [`MIN_CAP`]), that of its top ladder: 1.59x `segment_slots` whatever the step, so
    /// the largest segment, and with it the slowest growth step, does not depend on the
    /// density. (At least one doubling less a step, so that the halves of a split have a
    /// class: tables of tiny segments only.)
    pub(crate) fn split_class(&self, segment_slots: usize) -> u16 {
        let base = CLASSES_PER_DOUBLING * (segment_slots / MIN_CAP).trailing_zeros() as u16;
        (base + 16).max(CLASSES_PER_DOUBLING - self.ladder)
    }

    /// The class the halves of a split of a segment of class `split` start in: one step
    /// above half of it (`segment_slots` for steps of 8, 0.89x it for steps of 4).
    pub(crate) fn split_half_class(&self, split: u16) -> u16 {
        split - (CLASSES_PER_DOUBLING - self.ladder)
    }

    /// The ladder (class modulo `ladder`) of a segment of `depth` whose hash range holds
    /// `hash`: the top `phase_bits` bits of the hash prefix, the last phase being the
    /// table's top ladder (see the module comment). Segments shallower than `phase_bits`
    /// (tables of at most a few segments) all use the top ladder.
    pub(crate) fn ladder_of(&self, hash: u64, depth: u8) -> u16 {
        let phase = if depth >= self.phase_bits {
            (hash >> (64 - self.phase_bits as u32)) as u16
        } else {
            self.ladder - 1
        };
        (phase + 1) % self.ladder
    }

    /// The largest class of `ladder` that is at most `top`: where a segment of that ladder
    /// splits.
    pub(crate) fn ladder_top(&self, top: u16, ladder: u16) -> u16 {
        top - (top + self.ladder - ladder) % self.ladder
    }

    /// The smallest class of `ladder` (a class modulo [`Growth::ladder`]) into which `n`
    /// entries fit (see [`Growth::fill_max`]).
    pub(crate) fn class_for(&self, n: usize, ladder: u16) -> u16 {
        let mut c = ladder;
        while self.fill_max(class_cap(c)) < n {
            c += self.ladder;
        }
        c
    }
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
        let g = self.growth;
        let ladder = seg.class() % g.ladder;
        let class = g.class_for(seg.count_full() + 1, ladder);
        if class > g.ladder_top(self.split_class, ladder) && seg.depth < MAX_DEPTH {
            let classes = self.split(id, hash);
            self.restock_spares(&classes);
        } else {
            self.rebuild(id, class, hash);
            self.restock_spares(&[class]);
        }
    }

    /// A fresh segment of `class`: a spare's allocations if one is kept (`spare.rs`).
    fn new_segment(&mut self, class: u16, depth: u8) -> Segment<K, V> {
        match self.spares.take(class) {
            Some(s) => {
                self.spares.hits += 1;
                Segment::from_spare(s, depth)
            }
            None => {
                self.spares.misses += u64::from(self.keeps_spares());
                Segment::new(class, depth, self.growth.return_slack)
            }
        }
    }

    /// Whether the table is large enough to keep spares.
    fn keeps_spares(&self) -> bool {
        self.seg_bytes >= self.spares.from_bytes
    }

    /// After a growth step that created segments of `classes`: spares of them, if the
    /// table keeps spares.
    fn restock_spares(&mut self, classes: &[u16]) {
        if !self.keeps_spares() {
            return;
        }
        if let Some(pair) = Segment::<K, V>::pair_layout() {
            self.spares.restock(classes, pair, self.growth.return_slack);
        }
    }

    /// Moves segment `id`'s entries into a fresh segment of `class`.
    fn rebuild(&mut self, id: usize, class: u16, hash: u64) {
        let fresh = self.new_segment(class, self.segs[id].depth);
        self.seg_bytes = self.seg_bytes - self.segs[id].alloc_bytes() + fresh.alloc_bytes();
        self.max_class = self.max_class.max(class);
        // Detach the old segment before moving anything: the directory points at the fresh
        // one (empty, no room until the moves are done), so if anything panicked midway no
        // directory entry would lead to moved or freed pairs.
        let mut old = std::mem::replace(&mut self.segs[id], fresh);
        self.room[id] = 0;
        self.sync_dir(id, hash);
        let n = self.segs[id].absorb(&mut old, self.seed, &mut Scratch::default());
        self.room[id] = self.segs[id].room_with(n, self.growth);
    }

    /// Splits segment `id` (which holds `hash`) by the hash bit below its prefix; returns
    /// the classes of the two halves.
    fn split(&mut self, id: usize, hash: u64) -> [u16; 2] {
        let depth = self.segs[id].depth;
        if depth == self.global_depth {
            self.double_dir();
        }
        let bit = 1u64 << (63 - depth);
        // Any hash of each half: the split bit clear or set below the shared prefix.
        let ladders = [
            self.growth.ladder_of(hash & !bit, depth + 1),
            self.growth.ladder_of(hash | bit, depth + 1),
        ];
        let scratch = &mut Scratch::default();
        let counts = Segment::split_counts(&self.segs[id], self.seed, bit, scratch);
        let classes = [0, 1].map(|h| self.growth.class_for(counts[h], ladders[h]));
        let low = self.new_segment(classes[0], depth + 1);
        let high = self.new_segment(classes[1], depth + 1);
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
        self.room[id] = self.segs[id].room_with(counts[0], self.growth);
        self.room[high_id] = self.segs[high_id].room_with(counts[1], self.growth);
        classes
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

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: [Growth; 2] = [Growth::new(8, 115), Growth::new(4, 120)];

    /// A full segment is rebuilt exactly one rung up (not two: a step of `g` must take the
    /// load from `T` to `T / g`, the minimum the averages rely on), and leaves room; from
    /// 128 slots up (below, whole-slot rounding may skip a rung, which only costs memory).
    #[test]
    fn a_full_segment_moves_up_one_rung() {
        for g in BOTH {
            for class in 72..300u16 {
                let full = g.used_max(class_cap(class));
                let next = g.class_for(full + 1, class % g.ladder);
                assert_eq!(next, class + g.ladder, "{g:?} class {class}");
                let cap = class_cap(next);
                assert!(full + 1 < g.used_max(cap), "{g:?} class {class}: no room");
                // The load after the step is within a point of `T / g` (below 256 slots,
                // the rounding of capacities and limits to whole slots moves it more).
                let (load, max) = (full as f64 / cap as f64, g.used_max_128 as f64 / 128.0);
                let step = 2f64.powf(g.ladder as f64 / 24.0);
                let off = (load - max / step).abs();
                assert!(cap < 256 || off < 0.01, "{g:?} class {class}: load {load}");
            }
        }
    }

    /// The halves of a split of a full top segment start one rung above half of it, even
    /// when the split is uneven by three standard deviations (at the default segment size
    /// and above; in smaller segments such a half starts a rung higher, which is harmless).
    #[test]
    fn the_halves_of_a_split_start_at_the_bottom_rung() {
        for g in BOTH {
            for slots in [4096, 1 << 16] {
                let top = g.split_class(slots);
                assert_eq!(
                    class_cap(top),
                    slots * 1625 / 1024,
                    "{g:?}: the top is 1.59x"
                );
                let n = g.used_max(class_cap(top)) + 1;
                let uneven = n / 2 + (3.0 * (n as f64).sqrt() / 2.0) as usize;
                let half = g.split_half_class(top);
                assert_eq!(half % g.ladder, 0, "{g:?}: the halves are on a ladder");
                assert_eq!(g.class_for(uneven, half % g.ladder), half, "{g:?} {slots}");
            }
        }
    }

    /// Each phase gets its own ladder, the last one the top's.
    #[test]
    fn phases_map_to_distinct_ladders() {
        for g in BOTH {
            let ladders: Vec<u16> = (0..g.ladder as u64)
                .map(|p| g.ladder_of(p << (64 - g.phase_bits), g.phase_bits))
                .collect();
            let mut sorted = ladders.clone();
            sorted.sort();
            assert_eq!(sorted, (0..g.ladder).collect::<Vec<_>>());
            assert_eq!(ladders[g.ladder as usize - 1], 0);
            assert_eq!(
                g.ladder_of(u64::MAX, 0),
                0,
                "shallow segments: the top ladder"
            );
        }
    }
}
