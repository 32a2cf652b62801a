//! Visiting entries: iteration, SCAN cursors and random sampling.
//!
//! SCAN: the cursor is a position in hash space, not in any array. A call visits the
//! segment that covers the cursor, reports its entries with hash in `[cursor, next)` (see
//! `Segment::scan_slots` for why the cut at an empty slot misses nothing) and returns `next`;
//! after the last segment (hash range ending at 2^64) it returns 0. The ranges of successive
//! calls tile `[0, 2^64)`. Between calls, segments may be rebuilt or split any number of
//! times: that moves entries between slots and segments but never changes their hashes, so
//! an entry present during the whole iteration lies in exactly one range and is reported by
//! the call that covered it. Hence Redis's guarantee holds, and more strictly than Redis
//! (whose cursor can repeat entries after its table shrinks): without concurrent inserts of
//! the same key after removal, each entry is reported exactly once. Cursor 0 starts; any
//! value a client passes is a valid position.
//!
//! Random entries: pick a directory entry uniformly (a segment with probability
//! proportional to its share of hash space), then a number in `[0, max_cap * 2^(global -
//! local depth))` and accept it if it is a full slot index. Every slot of the table is thus
//! equally likely, and an accepted draw is a uniform entry. With segments 71-90% full the
//! expected number of draws is about two; after mass deletion it grows, so the draws are
//! bounded and fall back to the first entry after a random segment (slightly biased).

use std::ops::ControlFlow;

use rand::Rng;

use crate::growth::class_cap;
use crate::key::KeyKind;
use crate::table::HashTable;

/// Segments one SCAN call may visit beyond the first (bounds a call over an emptied table).
const SCAN_SEGMENTS_MAX: usize = 16;
/// Where a SCAN step goes after one segment.
enum SegmentScan {
    /// The step ended inside the segment, at this cursor.
    Cut(u64),
    /// The segment is done; the next one starts at this cursor (0: the iteration is over).
    End(u64),
}

impl SegmentScan {
    /// Where a step goes after this segment, with `reported` of the `want` entries visited:
    /// stop and return the cursor, or go on in the next segment at it.
    fn then(self, reported: usize, want: usize) -> ControlFlow<u64, u64> {
        match self {
            SegmentScan::Cut(next) => ControlFlow::Break(next),
            SegmentScan::End(next) if next == 0 || reported >= want => ControlFlow::Break(next),
            SegmentScan::End(next) => ControlFlow::Continue(next),
        }
    }
}

/// Rejection-sampling draws before [`HashTable::random_entry`] falls back.
const RANDOM_DRAWS_MAX: usize = 64;

impl<K: KeyKind, V> HashTable<K, V> {
    /// All entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (K::Key<'_>, &V)> + '_ {
        self.segs
            .iter()
            .flat_map(|s| s.iter())
            .map(|(k, v)| (K::key(k), v))
    }

    /// All entries with mutable values, in no particular order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (K::Key<'_>, &mut V)> + '_ {
        self.segs
            .iter_mut()
            .flat_map(|s| s.iter_mut())
            .map(|(k, v)| (K::key(k), v))
    }

    /// One SCAN step: calls `visit` for about `count` entries (at least one range ending at
    /// an empty slot, so sometimes more; fewer at segment ends) from `cursor`, and returns
    /// the next cursor, 0 when the iteration is complete. Start with cursor 0.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(K::Key<'_>, &V)) -> u64 {
        let (mut cursor, mut reported, want) = (cursor, 0, count.max(1));
        let mut slots = Vec::new();
        for _ in 0..=SCAN_SEGMENTS_MAX {
            let Some((seg, next)) = self.scan_segment(cursor, want - reported, &mut slots) else {
                return 0;
            };
            for &s in &slots {
                let (k, v) = self.segs[seg].slot(s);
                visit(K::key(k), v);
            }
            reported += slots.len();
            match next.then(reported, want) {
                ControlFlow::Break(next) => return next,
                ControlFlow::Continue(next) => cursor = next,
            }
        }
        cursor
    }

    /// [`HashTable::scan`] with mutable values, for sweeps that update what they visit (a
    /// snapshot marks each entry it has written). Each segment's share of the step is found
    /// first and `heap(v)` of every value in it is prefetched, then `visit` runs on them:
    /// a sweep over values that live in their own allocations is bound by one cache miss
    /// per value, and this lets those misses overlap.
    pub fn scan_mut(
        &mut self,
        cursor: u64,
        count: usize,
        heap: impl Fn(&V) -> *const u8,
        mut visit: impl FnMut(K::Key<'_>, &mut V),
    ) -> u64 {
        let (mut cursor, mut reported, want) = (cursor, 0, count.max(1));
        let mut slots = Vec::with_capacity(want.min(4096));
        for _ in 0..=SCAN_SEGMENTS_MAX {
            let Some((seg, next)) = self.scan_segment(cursor, want - reported, &mut slots) else {
                return 0;
            };
            let seg = &mut self.segs[seg];
            for &s in &slots {
                crate::prefetch::prefetch_read(heap(&seg.slot(s).1));
            }
            for &s in &slots {
                let (k, v) = seg.slot_mut(s);
                visit(K::key(k), v);
            }
            reported += slots.len();
            match next.then(reported, want) {
                ControlFlow::Break(next) => return next,
                ControlFlow::Continue(next) => cursor = next,
            }
        }
        cursor
    }

    /// The part of a SCAN step in the segment covering `cursor`: its index, with the slots
    /// to visit in `slots` (replacing what was there), and where the step goes on. None if
    /// the table has no segment.
    fn scan_segment(
        &self,
        cursor: u64,
        want: usize,
        slots: &mut Vec<usize>,
    ) -> Option<(usize, SegmentScan)> {
        if self.dir.is_empty() {
            return None;
        }
        let id = self.seg_id(cursor);
        let seg = &self.segs[id];
        slots.clear();
        let next = match seg.scan_slots(self.seed, cursor, want, slots) {
            Some(cut) => SegmentScan::Cut(cut),
            None => {
                // Continue at the end of this segment's hash range; 0 past the last one.
                let range = u64::MAX >> seg.depth;
                SegmentScan::End((cursor & !range).wrapping_add(range).wrapping_add(1))
            }
        };
        Some((id, next))
    }

    /// A uniformly random entry    /// A uniformly random entry (see the module comment), or None if the table is empty.
    pub fn random_entry<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<(K::Key<'_>, &V)> {
        if self.is_empty() {
            return None;
        }
        let max_cap = class_cap(self.max_class) as u64;
        for _ in 0..RANDOM_DRAWS_MAX {
            let seg = &self.segs[self.dir[rng.gen_range(0..self.dir.len())].id as usize];
            let draw = rng.gen_range(0..max_cap << (self.global_depth - seg.depth)) as usize;
            if draw < seg.cap() && seg.is_full_at(draw) {
                let (k, v) = seg.slot(draw);
                return Some((K::key(k), v));
            }
        }
        let start = rng.gen_range(0..self.segs.len());
        self.segs
            .iter()
            .skip(start)
            .chain(self.segs.iter().take(start))
            .flat_map(|s| s.iter())
            .next()
            .map(|(k, v)| (K::key(k), v))
    }
}
