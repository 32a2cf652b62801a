//! One segment: a small open-addressing table holding the keys of one range of hash space.
//!
//! Layout: a control array (`ctrl.rs`) and a slot array of `(key, value)` pairs, both of
//! `cap` entries. Linear probing over the control bytes, eight at a time: a lookup reads the
//! control bytes from the home slot (usually one cache line) and then the one slot whose tag
//! matches (one more line). At the maximum load of 90% linear probing's clusters are long
//! (about 50 slots for a miss), but 50 control bytes are still one or two cache lines.
//!
//! Home slot: a segment of depth `d` holds the hashes whose top `d` bits are its prefix. The
//! next 32 bits, `x`, pick the home slot as `(x * cap) >> 32`, which is monotonic in the
//! hash: within a segment, slots are in hash order apart from linear probing's displacement
//! and the wrap-around at the end. SCAN depends on that (see [`Segment::scan_slots`]).
//!
//! Deletion leaves a tombstone (DELETED) unless the next slot is empty, in which case the
//! slot and the tombstones before it become EMPTY again. This keeps the probing invariant
//! "no EMPTY slot between an entry's home and its slot", which both lookups and SCAN rely
//! on. `used` counts full slots and tombstones; a segment is full when `used` reaches
//! `used_max` (90% of `cap`), and the table then rebuilds or splits it (`growth.rs`), which
//! also drops the tombstones.
//!
//! A lookup prefetches the home slot's line while it reads the control bytes: the key is
//! usually within a slot or two of its home, so the two cache misses overlap instead of
//! running one after the other (in our measurements this about halved lookup time at 10M
//! entries).
//!
//! Empty slots hold `Default` keys and values: safe code, at the price of `V: Default`.

use crate::ctrl::{is_full, tag, Group, DELETED, EMPTY, GROUP};
use crate::growth::{class_cap, used_max};
use crate::key::KeyKind;
use crate::prefetch::prefetch_read;
use crate::Seed;

// One cache line per header: a lookup reads the header's pointers, lengths and depth.
#[repr(align(64))]
pub(crate) struct Segment<K: KeyKind, V> {
    pub(crate) ctrl: Box<[u8]>,
    pub(crate) slots: Box<[(K::Stored, V)]>,
    pub(crate) cap: u32,
    pub(crate) used_max: u32,
    /// Full slots.
    pub(crate) live: u32,
    /// Full slots plus tombstones.
    pub(crate) used: u32,
    pub(crate) depth: u8,
    pub(crate) class: u16,
}

#[inline(always)]
pub(crate) fn wrap(i: usize, cap: usize) -> usize {
    if i >= cap {
        i - cap
    } else {
        i
    }
}

impl<K: KeyKind, V: Default> Segment<K, V> {
    pub(crate) fn new(class: u16, depth: u8) -> Segment<K, V> {
        let cap = class_cap(class);
        Segment {
            ctrl: vec![EMPTY; cap + GROUP].into_boxed_slice(),
            slots: (0..cap).map(|_| Default::default()).collect(),
            cap: cap as u32,
            used_max: used_max(cap) as u32,
            live: 0,
            used: 0,
            depth,
            class,
        }
    }

    /// A segment with no slots and no allocation; never reachable from the directory.
    pub(crate) fn placeholder() -> Segment<K, V> {
        Segment {
            ctrl: Box::new([]),
            slots: Box::new([]),
            cap: 0,
            used_max: 0,
            live: 0,
            used: 0,
            depth: 0,
            class: 0,
        }
    }

    pub(crate) fn class(&self) -> u16 {
        self.class
    }

    #[inline(always)]
    pub(crate) fn cap(&self) -> usize {
        self.cap as usize
    }

    /// Bytes allocated for the control and slot arrays.
    pub(crate) fn alloc_bytes(&self) -> usize {
        self.ctrl.len() + self.slots.len() * std::mem::size_of::<(K::Stored, V)>()
    }

    #[inline(always)]
    pub(crate) fn is_full_at(&self, i: usize) -> bool {
        is_full(self.ctrl[i])
    }

    /// The home slot of `hash`: monotonic in the hash within this segment's range.
    #[inline(always)]
    pub(crate) fn home(&self, hash: u64) -> usize {
        let x = (hash << self.depth) >> 32;
        ((x * self.cap as u64) >> 32) as usize
    }

    #[inline(always)]
    pub(crate) fn prefetch_ctrl(&self, home: usize) {
        prefetch_read(self.ctrl.as_ptr().wrapping_add(home));
    }

    #[inline(always)]
    pub(crate) fn set_ctrl(&mut self, i: usize, c: u8) {
        self.ctrl[i] = c;
        if i < GROUP {
            self.ctrl[self.cap as usize + i] = c;
        }
    }

    /// The slot holding `key`, if any.
    #[inline(always)]
    pub(crate) fn find(&self, hash: u64, key: K::Key<'_>) -> Option<usize> {
        let home = self.home(hash);
        prefetch_read(self.slots.as_ptr().wrapping_add(home));
        self.find_from(home, hash, key)
    }

    /// [`Self::find`] without the slot prefetch, for inserts (see `HashTable::locate`).
    #[inline(always)]
    pub(crate) fn find_from(&self, home: usize, hash: u64, key: K::Key<'_>) -> Option<usize> {
        let (cap, t) = (self.cap as usize, tag(hash));
        let mut pos = home;
        loop {
            let g = Group::load(&self.ctrl, pos);
            for b in g.match_tag(t) {
                let i = wrap(pos + b, cap);
                if K::eq(&self.slots[i].0, key) {
                    return Some(i);
                }
            }
            if g.match_empty().any() {
                return None;
            }
            pos = wrap(pos + GROUP, cap);
        }
    }

    /// One probe for an insert: `Ok(slot)` holding `key`, or `Err(free)` with the first free
    /// slot on its probe path if the segment may take one more entry there (as
    /// [`Self::free_with_room`]), `Err(None)` if it may not. One pass over the control bytes
    /// where [`Self::find`] followed by [`Self::free_with_room`] would make two: the first
    /// free slot always lies at or before the EMPTY slot that ends the search.
    #[inline(always)]
    pub(crate) fn find_or_free(&self, hash: u64, key: K::Key<'_>) -> Result<usize, Option<usize>> {
        let (cap, t) = (self.cap as usize, tag(hash));
        let home = self.home(hash);
        prefetch_read(self.slots.as_ptr().wrapping_add(home));
        let mut pos = home;
        let mut free = None;
        loop {
            let g = Group::load(&self.ctrl, pos);
            for b in g.match_tag(t) {
                let i = wrap(pos + b, cap);
                if K::eq(&self.slots[i].0, key) {
                    return Ok(i);
                }
            }
            if free.is_none() {
                free = g.match_free().lowest().map(|b| wrap(pos + b, cap));
            }
            if g.match_empty().any() {
                let i = free.expect("an EMPTY slot is a free slot");
                return Err((self.ctrl[i] == DELETED || self.used < self.used_max).then_some(i));
            }
            pos = wrap(pos + GROUP, cap);
        }
    }

    /// The first free slot on the probe path of `hash` (where an absent key goes), if the
    /// segment may take one more entry there: reusing a tombstone always may, a new slot only
    /// below the load limit.
    #[inline]
    pub(crate) fn free_with_room(&self, hash: u64) -> Option<usize> {
        let cap = self.cap as usize;
        let mut pos = self.home(hash);
        loop {
            if let Some(b) = Group::load(&self.ctrl, pos).match_free().lowest() {
                let i = wrap(pos + b, cap);
                return (self.ctrl[i] == DELETED || self.used < self.used_max).then_some(i);
            }
            pos = wrap(pos + GROUP, cap);
        }
    }

    /// Fills free slot `i`.
    #[inline]
    pub(crate) fn put(&mut self, i: usize, hash: u64, key: K::Stored, value: V) {
        debug_assert!(!is_full(self.ctrl[i]));
        self.used += (self.ctrl[i] == EMPTY) as u32;
        self.live += 1;
        self.set_ctrl(i, tag(hash));
        self.slots[i] = (key, value);
        debug_assert!(self.used <= self.used_max);
    }

    /// Empties full slot `i`, returning its entry.
    pub(crate) fn take(&mut self, i: usize) -> (K::Stored, V) {
        debug_assert!(is_full(self.ctrl[i]));
        let cap = self.cap as usize;
        let entry = std::mem::take(&mut self.slots[i]);
        self.live -= 1;
        if self.ctrl[wrap(i + 1, cap)] == EMPTY {
            // No probe path runs through `i`: it and the tombstones before it become empty.
            self.set_ctrl(i, EMPTY);
            self.used -= 1;
            let mut j = i;
            loop {
                j = if j == 0 { cap - 1 } else { j - 1 };
                if self.ctrl[j] != DELETED {
                    break;
                }
                self.set_ctrl(j, EMPTY);
                self.used -= 1;
            }
        } else {
            self.set_ctrl(i, DELETED);
        }
        entry
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &(K::Stored, V)> {
        self.ctrl[..self.cap as usize]
            .iter()
            .zip(self.slots.iter())
            .filter(|(c, _)| is_full(**c))
            .map(|(_, e)| e)
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut (K::Stored, V)> {
        self.ctrl[..self.cap as usize]
            .iter()
            .zip(self.slots.iter_mut())
            .filter(|(c, _)| is_full(**c))
            .map(|(_, e)| e)
    }

    /// SCAN step: appends to `out` the slots of this segment's entries whose hash is in
    /// `[cursor, next)` and returns `Some(next)`, stopping once `want` slots are added; or,
    /// having reached the end of the segment, adds all entries with hash `>= cursor` and
    /// returns `None` (the caller continues at the segment's end).
    ///
    /// Why nothing is missed: homes are monotonic in the hash, so every entry with hash
    /// `>= cursor` has home `>= p = home(cursor)`, and by the probing invariant it sits at a
    /// slot `>= home` with no EMPTY slot in between, or has wrapped past the end into the run
    /// of full slots at the start. The scan walks slots from `p` and cuts only at an EMPTY
    /// slot `e`: every entry with home `< e` then sits before `e`, so the entries with home in
    /// `[p, e)` are exactly those with hash in `[cursor, boundary(e))`, and all were seen.
    /// Wrapped entries (home > slot) are left to the final step that reaches the segment end.
    /// The returned cursor is a position in hash space, not in this segment, so it stays
    /// valid however the segment is rebuilt or split before the next call.
    pub(crate) fn scan_slots(
        &self,
        seed: Seed,
        cursor: u64,
        want: usize,
        out: &mut Vec<usize>,
    ) -> Option<u64> {
        let cap = self.cap as usize;
        let first = out.len();
        for s in self.home(cursor)..cap {
            let c = self.ctrl[s];
            if c == EMPTY && out.len() - first >= want {
                return Some(self.boundary(cursor, s));
            }
            if is_full(c) {
                let (k, _) = &self.slots[s];
                let h = K::hash(seed, K::key(k));
                if h >= cursor && self.home(h) <= s {
                    out.push(s);
                }
            }
        }
        // The run of full slots at the start may hold entries that wrapped around the end.
        for s in 0..cap {
            let c = self.ctrl[s];
            if c == EMPTY {
                break;
            }
            if is_full(c) {
                let (k, _) = &self.slots[s];
                let h = K::hash(seed, K::key(k));
                if h >= cursor && self.home(h) > s {
                    out.push(s);
                }
            }
        }
        None
    }

    /// The smallest hash in this segment's range (the one `cursor` lies in) whose home is
    /// `>= e`, for `0 < e < cap`.
    fn boundary(&self, cursor: u64, e: usize) -> u64 {
        let d = self.depth as u32;
        let lo = cursor & !(u64::MAX >> d);
        let x = ((e as u64) << 32).div_ceil(self.cap as u64);
        debug_assert!(x < 1 << 32);
        lo | (x << (32 - d))
    }
}
