//! A full consistency check of a table, for tests: the directory's shape, every segment's
//! counters and control bytes, the probing invariant of every entry, and the memory
//! figures. It walks everything, so it is for tests and debugging only.

use crate::ctrl::{is_full, tag, EMPTY, GROUP};
use crate::growth::{class_cap, Growth};
use crate::key::KeyKind;
use crate::segment::{wrap, Segment};
use crate::table::{HashTable, DIR_AT_ONCE, MAX_DEPTH};
use crate::Seed;

impl<K: KeyKind, V> HashTable<K, V> {
    /// Checks every invariant the table relies on; `Err` names the first one broken.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.dir.is_empty() {
            return if self.segs.is_empty()
                && self.len == 0
                && self.seg_bytes == 0
                && self.heap_key_bytes == 0
            {
                Ok(())
            } else {
                Err("an empty directory with entries or segments".into())
            };
        }
        let gd = self.global_depth;
        if gd > MAX_DEPTH || self.dir.len() != 1 << gd || self.dir_shift != 63 - gd as u32 {
            return Err(format!(
                "directory of {} entries at global depth {gd}",
                self.dir.len()
            ));
        }
        // The next directory, built ahead of the doubling: each entry it has twice, in order.
        if !self.next_dir.len().is_multiple_of(2)
            || self.next_dir.len() > 2 * self.dir.len()
            || (!self.next_dir.is_empty() && self.dir.len() < DIR_AT_ONCE)
            || (0..self.next_dir.len()).any(|i| self.next_dir[i] != self.dir[i / 2])
        {
            return Err(format!(
                "next directory of {} entries does not match the directory",
                self.next_dir.len()
            ));
        }
        // Each segment owns exactly one aligned block of 2^(gd - depth) directory entries.
        let mut first = vec![usize::MAX; self.segs.len()];
        let mut count = vec![0usize; self.segs.len()];
        for (i, e) in self.dir.iter().enumerate() {
            let id = e.id as usize;
            if id >= self.segs.len() {
                return Err(format!("directory entry {i} points past the segments"));
            }
            // What makes lookups through the directory sound (`HashTable::probe`).
            if *e != self.segs[id].dir_entry(e.id) {
                return Err(format!("directory entry {i} is out of date"));
            }
            first[id] = first[id].min(i);
            count[id] += 1;
        }
        let (mut live, mut heap, mut bytes) = (0, 0, 0);
        for (id, seg) in self.segs.iter().enumerate() {
            let span = 1usize
                << (gd
                    .checked_sub(seg.depth)
                    .ok_or("segment deeper than the directory")?);
            if count[id] != span
                || first[id] % span != 0
                || (first[id]..first[id] + span).any(|i| self.dir[i].id as usize != id)
            {
                return Err(format!(
                    "segment {id} does not own one aligned block of {span} entries"
                ));
            }
            if seg.class() > self.max_class {
                return Err(format!("segment {id} has a class above max_class"));
            }
            // The ladder of the segment's phase (growth.rs), read from any hash it owns: the
            // first of its directory block, shifted into the top bits.
            let prefix = if gd == 0 {
                0
            } else {
                (first[id] as u64) << (64 - gd as u32)
            };
            if seg.class() % self.growth.ladder != self.growth.ladder_of(prefix, seg.depth) {
                return Err(format!("segment {id} is on the wrong ladder"));
            }
            let room = *self.room.get(id).ok_or("no room entry")?;
            heap += seg
                .check(self.seed, room, self.growth, |h| self.seg_id(h) == id)
                .map_err(|e| format!("segment {id}: {e}"))?;
            live += seg.count_full();
            bytes += Segment::alloc_bytes(seg);
        }
        if self.room.len() != self.segs.len() {
            return Err("room and segments differ in length".into());
        }
        if live != self.len || heap != self.heap_key_bytes || bytes != self.seg_bytes {
            return Err(format!(
                "totals: live {live} / len {}, heap {heap} / {}, bytes {bytes} / {}",
                self.len, self.heap_key_bytes, self.seg_bytes
            ));
        }
        Ok(())
    }
}

impl<K: KeyKind, V> Segment<K, V> {
    /// Checks this segment's invariants (see [`crate::HashTable::check_invariants`]);
    /// `room` is the table's room figure for it, `owns(hash)` says whether the directory
    /// routes `hash` here. Returns the heap bytes of its keys.
    pub(crate) fn check(
        &self,
        seed: Seed,
        room: u32,
        growth: Growth,
        owns: impl Fn(u64) -> bool,
    ) -> Result<usize, String> {
        let cap = self.cap as usize;
        let err = |m: String| Err(format!("segment (cap {cap}, depth {}): {m}", self.depth));
        if self.ctrl().len() != cap + GROUP
            || self.alloc_bytes() < cap + GROUP + cap * std::mem::size_of::<(K::Stored, V)>()
        {
            return err("array lengths".into());
        }
        if cap != class_cap(self.class) || self.ctrl()[cap..] != self.ctrl()[..GROUP] {
            return err("class or mirrored control bytes".into());
        }
        let full = self.ctrl()[..cap].iter().filter(|&&c| is_full(c)).count();
        let used = self.ctrl()[..cap].iter().filter(|&&c| c != EMPTY).count();
        if full != self.count_full() || used + room as usize != growth.used_max(cap) {
            return err(format!(
                "counts: {full} full / {}, {used} used + room {room} / {}",
                self.count_full(),
                growth.used_max(cap)
            ));
        }
        let mut heap = 0;
        for i in (0..cap).filter(|&i| is_full(self.ctrl()[i])) {
            let h = K::hash(seed, K::key(&self.slot(i).0));
            if tag(h) != self.ctrl()[i] || !owns(h) {
                return err(format!("slot {i}: wrong tag or segment"));
            }
            let mut j = self.home(h);
            while j != i {
                if self.ctrl()[j] == EMPTY {
                    return err(format!("slot {i}: empty slot {j} on its probe path"));
                }
                j = wrap(j + 1, cap);
            }
            heap += K::heap_bytes(&self.slot(i).0);
        }
        Ok(heap)
    }
}
