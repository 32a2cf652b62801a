//! One segment: a small open-addressing table holding the keys of one range of hash space.
//!
//! Layout: a control array (`ctrl.rs`) and a slot array of `(key, value)` pairs, both of
//! `cap` entries. Linear probing over the control bytes, a group (16 on x86_64) at a time: a lookup reads the
//! control bytes from the home slot (usually one cache line) and then the one slot whose tag
//! matches (one more line). At the maximum load of 90% linear probing's clusters are long
//! (about 50 slots for a miss; 130 at a dense table's 94%), but 50 control bytes are still one
//! or two cache lines (130: two or three).
//!
//! Home slot: a segment of depth `d` holds the hashes whose top `d` bits are its prefix. The
//! next 32 bits, `x`, pick the home slot as `(x * cap) >> 32`, which is monotonic in the
//! hash: within a segment, slots are in hash order apart from linear probing's displacement
//! and the wrap-around at the end. SCAN depends on that (see [`Segment::scan_slots`]).
//!
//! Deletion leaves a tombstone (DELETED) unless the next slot is empty, in which case the
//! slot and the tombstones before it become EMPTY again. This keeps the probing invariant
//! "no EMPTY slot between an entry's home and its slot", which both lookups and SCAN rely
//! on. A segment is full when its full slots and tombstones reach `Growth::used_max(cap)`
//! (90% of `cap`, 94% in a dense table), and the table then rebuilds or splits it
//! (`growth.rs`), which also drops the tombstones. The count of slots it may still fill,
//! its *room*, is kept by the table in one compact array (`HashTable::room`), not in the
//! segment: an insert then touches no segment header at all (see `table.rs`).
//!
//! A lookup prefetches the home slot's line while it reads the control bytes: the key is
//! usually within a slot or two of its home, so the two cache misses overlap instead of
//! running one after the other (in our measurements this about halved lookup time at 10M
//! entries).
//!
//! Storage: two raw allocations per segment, `cap + GROUP` control bytes and `cap` slots,
//! the slots uninitialised until filled. This file holds the crate's `unsafe` storage code,
//! under one invariant (see [`Segment`]): a slot is initialised exactly when its control
//! byte is full. Why not boxed slices of initialised slots (as before): a fresh segment then
//! had every slot written with a default value before the rebuild wrote it again, a move
//! out of a slot wrote a default back into memory about to be freed (and `V: Default` was
//! required), and the directory could not address a segment's arrays without reading its
//! header first ([`DirEntry`]).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::ctrl::{is_full, tag, Group, DELETED, EMPTY, GROUP};
use crate::growth::{class_cap, Growth};
use crate::key::KeyKind;
use crate::prefetch::prefetch_read;
use crate::Seed;

/// A slot: a key and its value.
pub(crate) type Pair<K, V> = (<K as KeyKind>::Stored, V);

/// Alignment of a segment's slot array: a cache line, so that 16-byte slots never straddle
/// two lines.
const SLOTS_ALIGN: usize = 64;

/// The layout of the control bytes of a segment of `cap` slots.
fn ctrl_layout(cap: usize) -> Layout {
    Layout::from_size_align(cap + GROUP, GROUP).expect("control bytes layout")
}

/// The layout of the slot array of a segment of `cap` slots of `T`.
fn slots_layout<T>(cap: usize) -> Layout {
    slots_layout_of(Layout::new::<T>(), cap)
}

/// The layout of the slot array of a segment of `cap` slots of layout `pair`.
fn slots_layout_of(pair: Layout, cap: usize) -> Layout {
    let size = cap
        .checked_mul(pair.size())
        .expect("segment size overflows");
    Layout::from_size_align(size, SLOTS_ALIGN.max(pair.align())).expect("slots layout")
}

/// Allocates `layout` (non-zero size), or reports the failure as `alloc` does.
fn allocate(layout: Layout) -> NonNull<u8> {
    assert!(layout.size() > 0);
    // SAFETY: the layout's size is non-zero (checked).
    let p = unsafe { alloc(layout) };
    NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout))
}

/// A slot array of `layout` (non-zero size); `give_slack`: hand its allocator slack back to
/// the OS (see [`return_allocation_slack`]).
fn allocate_slots(layout: Layout, give_slack: bool) -> NonNull<u8> {
    let p = allocate(layout);
    if give_slack {
        return_slack(p, layout.size());
    }
    p
}

/// How the global allocator tells an allocation's usable size (see [`return_allocation_slack`]).
pub type UsableSize = unsafe fn(*const u8) -> usize;

/// Set once by [`return_allocation_slack`]; unset, segments keep their slack.
static USABLE_SIZE: OnceLock<UsableSize> = OnceLock::new();

/// Lets the table hand back to the OS the pages its segments' slot arrays are given but never
/// use: `usable_size` must be the global allocator's own answer to "how many bytes from this
/// pointer belong to its allocation" (jemalloc's `sallocx`: `tikv_jemallocator::usable_size`).
/// Returns false if it was already set.
///
/// Why: an allocator rounds a request up to its size class, four classes per doubling above
/// 16 KiB in jemalloc, so a segment's slot array (tens to hundreds of KiB, sized by the
/// table's own finer growth ladder) comes with 0-25% more bytes than it asked for, about 9%
/// on average: 270 MB of a 2.16 GB table at 50 million keys. Those bytes are never written by
/// the table, but they are resident all the same whenever the allocator serves the segment
/// from memory freed earlier (the norm: growth frees a segment for every one it makes), so
/// they cost RSS like live data. Each new segment of a dense table ([`crate::Density::Dense`],
/// the memory-first setting) therefore `madvise(MADV_DONTNEED)`s the whole pages of its
/// slack: one system call per segment made (a few per thousand inserts). Not balanced
/// tables: while a table grows, segments are freed soon after they are made, and the
/// allocator hands those pages out again, now to be faulted in anew: W1 over the network
/// (7.3M keys made by appends, dense) ran 1.53-1.69M appends/s with it against 1.70-1.79M
/// without, three runs each; a balanced table keeps its speed. (Giving back
/// only the slack of segments that have lived a while, from a periodic sweep, would avoid
/// most of that cost: not built.)
/// Segments cannot use the slack as extra slots instead: the growth ladder's capacities
/// (`growth.rs`) are finer than the allocator's classes, so neighbouring capacities would
/// collapse into one.
///
/// # Safety
/// For every pointer `p` the global allocator returned and has not yet freed,
/// `usable_size(p)` must be at most the number of bytes from `p` that belong to that
/// allocation alone (those pages are zeroed by the table while it owns them).
pub unsafe fn return_allocation_slack(usable_size: UsableSize) -> bool {
    USABLE_SIZE.set(usable_size).is_ok()
}

/// The whole pages of `[start + used, start + usable)`, as (address, length), if any.
fn slack_pages(start: usize, used: usize, usable: usize, page: usize) -> Option<(usize, usize)> {
    let from = (start + used).next_multiple_of(page);
    let to = (start + usable) / page * page;
    (to > from).then(|| (from, to - from))
}

/// Returns the whole pages past `used` bytes of the allocation at `p` to the OS (see
/// [`return_allocation_slack`]). Only slot arrays of at least 16 KiB are worth a system call.
fn return_slack(p: NonNull<u8>, used: usize) {
    const MIN_BYTES: usize = 16 << 10;
    let Some(usable_size) = USABLE_SIZE.get() else {
        return;
    };
    if used < MIN_BYTES {
        return;
    }
    // SAFETY: `p` was just returned by the global allocator and is live; the caller of
    // `return_allocation_slack` vouched for `usable_size` on such pointers.
    let usable = unsafe { usable_size(p.as_ptr()) };
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = *PAGE.get_or_init(|| {
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(4096)
    });
    if let Some((from, len)) = slack_pages(p.as_ptr() as usize, used, usable, page) {
        // SAFETY: [from, from + len) is whole pages inside the allocation at `p` (at most
        // `usable` bytes from it, which belong to it alone), past the `used` bytes the
        // segment will ever read or write; MADV_DONTNEED only makes them read as zeros
        // again, which the allocator accepts of memory it handed out. A failure leaves
        // them resident, nothing worse.
        unsafe { libc::madvise(from as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    }
}

/// One segment's storage and counters.
///
/// Invariant (what every `unsafe` block below relies on): if `cap > 0`, `ctrl` is an
/// allocation of `ctrl_layout(cap)` and `slots` one of `slots_layout::<Pair<K, V>>(cap)`,
/// both owned by this segment; the `cap + GROUP` control bytes are always initialised, and
/// slot `i < cap` holds an initialised pair exactly when control byte `i` is full. (`cap`
/// is at least 16; the `cap == 0` cases below are defensive.)
///
/// Why two allocations: the control bytes, 1/17 of a `u64 -> u64` segment, are what every
/// probe reads first. Allocated apart, they are packed together by the allocator (small
/// size classes), so the page-table entries for all of them stay cached; inside each
/// segment's slot allocation, every probe of a big table also missed in the TLB walk for
/// the control bytes' page (W2 at 100M: the insert's stall was on that load).
pub(crate) struct Segment<K: KeyKind, V> {
    ctrl: NonNull<u8>,
    slots: NonNull<u8>,
    pub(crate) cap: u32,
    pub(crate) depth: u8,
    pub(crate) class: u16,
    /// Set while [`Self::drain`] moves the pairs out: the segment no longer owns any of
    /// them, and dropping it only frees its arrays (so a panic midway leaks the pairs not
    /// yet moved instead of dropping moved ones twice).
    draining: bool,
    _owns: PhantomData<Pair<K, V>>,
}

// SAFETY: a segment owns its pairs as a `Box<[(K::Stored, V)]>` would (the raw pointer is
// only its allocation), so it may move to or be shared with another thread exactly when
// the pairs may.
unsafe impl<K: KeyKind, V: Send> Send for Segment<K, V> where K::Stored: Send {}
// SAFETY: as for `Send`: `&Segment` only hands out `&` to its pairs.
unsafe impl<K: KeyKind, V: Sync> Sync for Segment<K, V> where K::Stored: Sync {}

#[inline(always)]
pub(crate) fn wrap(i: usize, cap: usize) -> usize {
    if i >= cap {
        i - cap
    } else {
        i
    }
}

/// A future segment's two allocations, made before a growth step needs them and faulted in
/// a page per insert meanwhile (`spare.rs`), so that the step writes no fresh page itself.
/// It owns `ctrl` (an allocation of `ctrl_layout(cap)`) and `slots` (one of `slots`'s
/// layout, non-zero size) until [`Segment::from_spare`] takes them over or it is dropped;
/// their bytes are uninitialised apart from what [`Spare::touch`] wrote.
pub(crate) struct Spare {
    ctrl: NonNull<u8>,
    slots: NonNull<u8>,
    slots_layout: Layout,
    class: u16,
    /// Steps of [`Spare::touch`] done: the control bytes, then one page of slots each.
    touched: usize,
}

// SAFETY: a spare owns two allocations of plain bytes and no value, like a `Box<[u8]>`.
unsafe impl Send for Spare {}
// SAFETY: as for `Send`; `&Spare` gives no access to the bytes.
unsafe impl Sync for Spare {}

/// Bytes between two touches of a spare's slot array: the smallest page size.
const TOUCH_STRIDE: usize = 4096;

impl Spare {
    /// The allocations of a future segment of `class` whose pairs are `pair` (a layout of
    /// non-zero size), not yet faulted in; `give_slack` as in [`Segment::new`].
    pub(crate) fn new(class: u16, pair: Layout, give_slack: bool) -> Spare {
        let cap = class_cap(class);
        let ctrl = allocate(ctrl_layout(cap));
        let slots_layout = slots_layout_of(pair, cap);
        let slots = allocate_slots(slots_layout, give_slack);
        Spare {
            ctrl,
            slots,
            slots_layout,
            class,
            touched: 0,
        }
    }

    pub(crate) fn class(&self) -> u16 {
        self.class
    }

    /// Bytes allocated, as [`Segment::alloc_bytes`] counts a segment's.
    pub(crate) fn alloc_bytes(&self) -> usize {
        ctrl_layout(class_cap(self.class)).size() + self.slots_layout.size()
    }

    /// Whether every page has been touched.
    pub(crate) fn is_touched(&self) -> bool {
        self.touched > self.slots_layout.size().div_ceil(TOUCH_STRIDE)
    }

    /// Takes one step of faulting the allocations in: first the control bytes, all set
    /// EMPTY (what a fresh segment needs; a page or two), then one byte of the next page of
    /// slots. Returns whether anything was left to touch.
    pub(crate) fn touch(&mut self) -> bool {
        if self.is_touched() {
            return false;
        }
        if self.touched == 0 {
            let n = ctrl_layout(class_cap(self.class)).size();
            // SAFETY: the control allocation has `cap + GROUP` bytes, owned by this spare.
            unsafe { self.ctrl.as_ptr().write_bytes(EMPTY, n) };
        } else {
            let at = (self.touched - 1) * TOUCH_STRIDE;
            // SAFETY: `at < slots_layout.size()` (`touched` is at most the page count here),
            // inside the slot allocation this spare owns; a plain byte write of memory no
            // one reads (volatile, so that it is not dropped as a dead store: its point is
            // the page fault).
            unsafe { self.slots.as_ptr().add(at).write_volatile(0) };
        }
        self.touched += 1;
        true
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts, owned by this spare (a spare given
        // to `Segment::from_spare` is not dropped).
        unsafe {
            dealloc(self.ctrl.as_ptr(), ctrl_layout(class_cap(self.class)));
            dealloc(self.slots.as_ptr(), self.slots_layout);
        }
    }
}

impl<K: KeyKind, V> Segment<K, V> {
    /// The layout of one pair, for [`Spare::new`]; `None` for a zero-sized pair (which needs
    /// no slot allocation, so no spare).
    pub(crate) fn pair_layout() -> Option<Layout> {
        let l = Layout::new::<Pair<K, V>>();
        (l.size() > 0).then_some(l)
    }

    /// A segment on `spare`'s allocations (touching what is left of them first).
    pub(crate) fn from_spare(mut spare: Spare, depth: u8) -> Segment<K, V> {
        let cap = class_cap(spare.class);
        assert_eq!(
            spare.slots_layout,
            slots_layout::<Pair<K, V>>(cap),
            "a spare of another pair type"
        );
        while spare.touch() {}
        let spare = std::mem::ManuallyDrop::new(spare);
        // The invariant holds: the allocations have this segment's layouts and are now its
        // own (the spare is not dropped), the control bytes are all EMPTY (its first touch),
        // so no slot is initialised.
        Self::from_parts(spare.ctrl, spare.slots, spare.class, depth)
    }

    /// A segment of `class` on allocations of its layouts whose control bytes are all
    /// EMPTY (the callers' half of the invariant).
    fn from_parts(ctrl: NonNull<u8>, slots: NonNull<u8>, class: u16, depth: u8) -> Segment<K, V> {
        Segment {
            ctrl,
            slots,
            cap: class_cap(class) as u32,
            depth,
            class,
            draining: false,
            _owns: PhantomData,
        }
    }

    /// A segment of `class`'s capacity; `give_slack`: hand its slot array's allocator slack
    /// back to the OS (see [`return_allocation_slack`]).
    pub(crate) fn new(class: u16, depth: u8, give_slack: bool) -> Segment<K, V> {
        let cap = class_cap(class);
        let ctrl = allocate(ctrl_layout(cap));
        // A zero-sized pair type needs no allocation: a dangling, aligned pointer will do.
        let slots = if std::mem::size_of::<Pair<K, V>>() == 0 {
            NonNull::<Pair<K, V>>::dangling().cast()
        } else {
            allocate_slots(slots_layout::<Pair<K, V>>(cap), give_slack)
        };
        // SAFETY: the control allocation has `cap + GROUP` bytes.
        unsafe { ctrl.as_ptr().write_bytes(EMPTY, cap + GROUP) };
        Self::from_parts(ctrl, slots, class, depth)
    }

    pub(crate) fn class(&self) -> u16 {
        self.class
    }

    #[inline(always)]
    pub(crate) fn cap(&self) -> usize {
        self.cap as usize
    }

    /// Bytes allocated for the control bytes and slots.
    pub(crate) fn alloc_bytes(&self) -> usize {
        if self.cap == 0 {
            0
        } else {
            ctrl_layout(self.cap()).size() + slots_layout::<Pair<K, V>>(self.cap()).size()
        }
    }

    /// The control bytes: `cap` bytes and `GROUP` mirrored ones.
    #[inline(always)]
    pub(crate) fn ctrl(&self) -> &[u8] {
        if self.cap == 0 {
            return &[];
        }
        // SAFETY: by the invariant, `cap + GROUP` initialised bytes at `ctrl`, owned by
        // self and changed only through `&mut self`.
        unsafe { std::slice::from_raw_parts(self.ctrl.as_ptr(), self.cap() + GROUP) }
    }

    #[inline(always)]
    fn slots_ptr(&self) -> *mut Pair<K, V> {
        self.slots.as_ptr().cast()
    }

    /// The pair in full slot `i`; panics if `i` is not a full slot.
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> &Pair<K, V> {
        assert!(self.is_full_at(i), "slot {i} is not full");
        // SAFETY: `i < cap` and full (checked), so initialised by the invariant.
        unsafe { &*self.slots_ptr().add(i) }
    }

    /// The pair in full slot `i`, mutably; panics if `i` is not a full slot.
    #[inline]
    pub(crate) fn slot_mut(&mut self, i: usize) -> &mut Pair<K, V> {
        assert!(self.is_full_at(i), "slot {i} is not full");
        // SAFETY: as in `slot`; `&mut self` makes the borrow unique.
        unsafe { &mut *self.slots_ptr().add(i) }
    }

    /// [`Self::slot`] without the check, for slots a probe has just seen full.
    ///
    /// # Safety
    /// `i < cap` and control byte `i` is full.
    #[inline(always)]
    pub(crate) unsafe fn slot_unchecked(&self, i: usize) -> &Pair<K, V> {
        debug_assert!(self.is_full_at(i));
        // SAFETY: the caller's contract and the invariant.
        unsafe { &*self.slots_ptr().add(i) }
    }

    /// Writes a pair into slot `i`, which must be free, and sets its control byte to `c`
    /// (full). Counters are the caller's. (Writing a full slot would leak its pair, not
    /// break the invariant; debug builds check.)
    #[inline(always)]
    pub(crate) fn write_slot(&mut self, i: usize, c: u8, pair: Pair<K, V>) {
        debug_assert!(!is_full(self.ctrl()[i]) && is_full(c));
        // SAFETY: the arrays and cap are this segment's own; `&mut self` makes the access
        // unique.
        unsafe { write_slot_raw(self.ctrl, self.slots, self.cap(), i, c, pair) }
    }

    /// Moves the pair out of full slot `i` (panics otherwise) and marks the slot `c` (free).
    /// Counters are the caller's.
    #[inline(always)]
    fn read_slot(&mut self, i: usize, c: u8) -> Pair<K, V> {
        assert!(self.is_full_at(i), "slot {i} is not full");
        debug_assert!(!is_full(c));
        // SAFETY: full, so initialised; the control byte is set free at once, so the pair is
        // never read or dropped again from here.
        let pair = unsafe { self.slots_ptr().add(i).read() };
        self.set_ctrl(i, c);
        pair
    }

    /// Calls `f` with the index of every full slot, in ascending order; a branch per group
    /// rather than per slot.
    #[inline(always)]
    pub(crate) fn for_each_full(seg: &Segment<K, V>, mut f: impl FnMut(usize)) {
        let cap = seg.cap();
        let mut base = 0;
        while base < cap {
            let full = Group::load(seg.ctrl(), base).match_full();
            // The last group may extend into the mirrored bytes: keep only real slots.
            for b in full.below(cap - base) {
                f(base + b);
            }
            base += GROUP;
        }
    }

    /// Moves every pair out, in slot order, passing each with its slot to `f`, and leaves
    /// the segment empty. Growth calls it on a segment already detached from the directory
    /// (nothing can probe it meanwhile); a panic in `f` leaks the pairs not yet moved.
    /// Cheaper than [`Self::take`] per slot: no control byte is read or written per pair.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(usize, Pair<K, V>)) {
        let cap = self.cap();
        self.draining = true;
        let slots = self.slots_ptr();
        Self::for_each_full(self, |i| {
            // SAFETY: `i < cap` and its control byte is full, so the slot holds an
            // initialised pair; each slot is visited once, and `draining` keeps the segment
            // from dropping it again (the control bytes are cleared below).
            f(i, unsafe { slots.add(i).read() })
        });
        // SAFETY: the control allocation has `cap + GROUP` bytes; every pair has been moved
        // out, so marking all slots EMPTY restores the invariant.
        unsafe { self.ctrl.as_ptr().write_bytes(EMPTY, cap + GROUP) };
        self.draining = false;
    }

    #[inline(always)]
    pub(crate) fn is_full_at(&self, i: usize) -> bool {
        i < self.cap() && is_full(self.ctrl()[i])
    }

    /// What the directory keeps of this segment (`table.rs`).
    pub(crate) fn dir_entry(&self, id: u32) -> DirEntry {
        // `shape` packs both: lookups would go out of bounds if either did not fit.
        assert!(
            self.cap < 1 << 26 && self.depth < 64,
            "segment shape out of range"
        );
        DirEntry {
            ctrl: self.ctrl,
            slots: self.slots,
            shape: self.cap << 6 | self.depth as u32,
            id,
        }
    }

    /// The home slot of `hash`: monotonic in the hash within this segment's range.
    #[inline(always)]
    pub(crate) fn home(&self, hash: u64) -> usize {
        home(hash, self.depth as u32, self.cap())
    }

    /// Sets control byte `i` (and its mirror). Private: a full byte must never become free
    /// (or the reverse) without its slot being moved out (or written), see
    /// [`Self::write_slot`], [`Self::read_slot`].
    #[inline(always)]
    fn set_ctrl(&mut self, i: usize, c: u8) {
        // SAFETY: ctrl and cap are this segment's own; `&mut self` makes the write unique.
        unsafe { set_ctrl_raw(self.ctrl, self.cap(), i, c) }
    }

    /// Whether filling free slot `i` uses room (an EMPTY slot; a tombstone does not).
    #[inline(always)]
    pub(crate) fn uses_room(&self, i: usize) -> bool {
        self.ctrl()[i] == EMPTY
    }

    /// The first free slot on the probe path of `hash` (where an absent key goes).
    #[inline]
    pub(crate) fn first_free(&self, hash: u64) -> usize {
        let cap = self.cap as usize;
        let mut pos = self.home(hash);
        loop {
            if let Some(b) = Group::load(self.ctrl(), pos).match_free().lowest() {
                return wrap(pos + b, cap);
            }
            pos = wrap(pos + GROUP, cap);
        }
    }

    /// Empties full slot `i`, returning its entry and how many slots became EMPTY (room
    /// given back: 0 if it became a tombstone).
    pub(crate) fn take(&mut self, i: usize) -> ((K::Stored, V), u32) {
        let cap = self.cap as usize;
        if self.ctrl()[wrap(i + 1, cap)] == EMPTY {
            // No probe path runs through `i`: it and the tombstones before it become empty.
            let entry = self.read_slot(i, EMPTY);
            let mut freed = 1;
            let mut j = i;
            loop {
                j = if j == 0 { cap - 1 } else { j - 1 };
                if self.ctrl()[j] != DELETED {
                    break;
                }
                self.set_ctrl(j, EMPTY);
                freed += 1;
            }
            (entry, freed)
        } else {
            (self.read_slot(i, DELETED), 0)
        }
    }

    /// Full slots (entries): a count over the control bytes, for growth and checks.
    pub(crate) fn count_full(&self) -> usize {
        let cap = self.cap();
        (0..cap)
            .step_by(GROUP)
            .map(|p| {
                Group::load(self.ctrl(), p)
                    .match_full()
                    .below(cap - p)
                    .ones()
            })
            .sum()
    }

    /// The room of a segment holding `used` full slots and tombstones.
    pub(crate) fn room_with(&self, used: usize, growth: Growth) -> u32 {
        let max = growth.used_max(self.cap());
        assert!(used <= max, "a segment over its load limit");
        (max - used) as u32
    }

    /// Indices of the full slots, ascending.
    fn full_slots(ctrl: &[u8], cap: usize) -> impl Iterator<Item = usize> + '_ {
        ctrl[..cap]
            .iter()
            .enumerate()
            .filter(|(_, c)| is_full(**c))
            .map(|(i, _)| i)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Pair<K, V>> {
        // SAFETY: each index is a full slot below `cap`.
        Self::full_slots(self.ctrl(), self.cap()).map(|i| unsafe { self.slot_unchecked(i) })
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Pair<K, V>> {
        let slots = self.slots_ptr();
        let (ctrl, cap) = (self.ctrl(), self.cap());
        // SAFETY: each index is a full slot below `cap` (initialised), each visited once, so
        // the `&mut` are disjoint; they live as long as the `&mut self` this borrows, and
        // the control bytes are only read meanwhile.
        Self::full_slots(ctrl, cap).map(move |i| unsafe { &mut *slots.add(i) })
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
            let c = self.ctrl()[s];
            if c == EMPTY && out.len() - first >= want {
                return Some(self.boundary(cursor, s));
            }
            if is_full(c) {
                let (k, _) = self.slot(s);
                let h = K::hash(seed, K::key(k));
                if h >= cursor && self.home(h) <= s {
                    out.push(s);
                }
            }
        }
        // The run of full slots at the start may hold entries that wrapped around the end.
        for s in 0..cap {
            let c = self.ctrl()[s];
            if c == EMPTY {
                break;
            }
            if is_full(c) {
                let (k, _) = self.slot(s);
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

/// Sets control byte `i` (and its mirror) of the segment whose control bytes are at `ctrl`,
/// with `cap` slots.
///
/// # Safety
/// `ctrl` and `cap` are a live segment's, to which the caller has exclusive access; a
/// full byte must not become free (or the reverse) unless the slot is moved out (written).
#[inline(always)]
unsafe fn set_ctrl_raw(ctrl: NonNull<u8>, cap: usize, i: usize, c: u8) {
    assert!(i < cap, "slot {i} out of range");
    // SAFETY: `i < cap` and `cap + i < cap + GROUP` when `i < GROUP`: both within the
    // control bytes; exclusive access is the caller's contract.
    unsafe {
        let ctrl = ctrl.as_ptr();
        ctrl.add(i).write(c);
        if i < GROUP {
            ctrl.add(cap + i).write(c);
        }
    }
}

/// Writes `pair` into slot `i` of the segment with arrays `ctrl`, `slots` and `cap` slots, and sets its
/// control byte to `c` (full). Writing a slot that is already full would leak its pair, not
/// break the segment invariant.
///
/// # Safety
/// As for [`set_ctrl_raw`], and `T` is the segment's pair type.
#[inline(always)]
unsafe fn write_slot_raw<T>(
    ctrl: NonNull<u8>,
    slots: NonNull<u8>,
    cap: usize,
    i: usize,
    c: u8,
    pair: T,
) {
    assert!(i < cap, "slot {i} out of range");
    debug_assert!(is_full(c));
    // SAFETY: `i < cap`, so the slot is inside the allocation (a plain write, nothing
    // dropped). The control byte is set right after: the invariant holds again before
    // anything reads.
    unsafe {
        slots.as_ptr().cast::<T>().add(i).write(pair);
        set_ctrl_raw(ctrl, cap, i, c);
    }
}

/// The home slot of `hash` in a segment of `depth` and `cap` slots.
#[inline(always)]
fn home(hash: u64, depth: u32, cap: usize) -> usize {
    let x = (hash << depth) >> 32;
    ((x * cap as u64) >> 32) as usize
}

/// A segment's address and shape, as each of its directory entries holds them: a lookup
/// goes from the directory straight to the control bytes, without reading the segment's
/// header first (in W2 that dependent load was as costly as the control bytes' own miss).
/// `table.rs` keeps every entry equal to `segs[id].dir_entry(id)` (checked by
/// `check_invariants`); that is what makes [`DirEntry::probe`] sound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirEntry {
    ctrl: NonNull<u8>,
    slots: NonNull<u8>,
    /// `cap << 6 | depth`.
    shape: u32,
    /// The segment's index in `segs`.
    pub(crate) id: u32,
}

// SAFETY: a directory entry is an address and two numbers; it is only dereferenced through
// `probe`, whose caller holds a borrow of the table that owns the segment (and the table is
// `Send`/`Sync` only as its segments are).
unsafe impl Send for DirEntry {}
// SAFETY: as for `Send`.
unsafe impl Sync for DirEntry {}

impl DirEntry {
    /// A lookup view of the segment this entry describes.
    ///
    /// # Safety
    /// The entry equals `seg.dir_entry(_)` for a live segment `seg` (same allocation, cap
    /// and depth) of `K`, `V` that is neither dropped nor changed while the probe, or any
    /// reference derived from it, is used ('a is the caller's borrow of the table).
    #[inline(always)]
    pub(crate) unsafe fn probe<'a, K: KeyKind, V>(self) -> Probe<'a, K, V> {
        Probe {
            ctrl: self.ctrl,
            slots: self.slots,
            cap: self.cap(),
            depth: self.shape & 63,
            _seg: PhantomData,
        }
    }

    #[inline(always)]
    fn cap(self) -> usize {
        (self.shape >> 6) as usize
    }

    /// Address of slot `i` of the segment this entry describes (not read here).
    #[inline(always)]
    pub(crate) fn slot_ptr<K: KeyKind, V>(self, i: usize) -> *mut Pair<K, V> {
        self.slots.as_ptr().cast::<Pair<K, V>>().wrapping_add(i)
    }

    /// Fills free slot `i` of the segment this entry describes with `pair`, tagged `c`;
    /// returns whether the slot was EMPTY (a tombstone reused takes no room). Through the
    /// directory entry, as lookups: an insert touches no segment header.
    ///
    /// # Safety
    /// As for [`Self::probe`], and the caller has exclusive access to the segment (holds
    /// the table mutably).
    #[inline(always)]
    pub(crate) unsafe fn fill<K: KeyKind, V>(self, i: usize, c: u8, pair: Pair<K, V>) -> bool {
        let cap = self.cap();
        assert!(i < cap, "slot {i} out of range");
        // SAFETY: the caller's contract: a live segment's control bytes, `i < cap`.
        let was = unsafe { self.ctrl.as_ptr().add(i).read() };
        debug_assert!(!is_full(was));
        // SAFETY: the caller's contract (exclusive access to a live segment of `K`, `V`).
        unsafe { write_slot_raw(self.ctrl, self.slots, cap, i, c, pair) };
        was == EMPTY
    }
}

/// A read-only view of one segment's control bytes and slots, made from the segment
/// from a directory entry ([`DirEntry::probe`]).
#[derive(Clone, Copy)]
pub(crate) struct Probe<'a, K: KeyKind, V> {
    ctrl: NonNull<u8>,
    slots: NonNull<u8>,
    cap: usize,
    depth: u32,
    _seg: PhantomData<&'a Segment<K, V>>,
}

impl<'a, K: KeyKind, V> Probe<'a, K, V> {
    #[inline(always)]
    pub(crate) fn home(&self, hash: u64) -> usize {
        home(hash, self.depth, self.cap)
    }

    #[inline(always)]
    fn ctrl(&self) -> &'a [u8] {
        // SAFETY: a probe describes a live segment (see its constructors), whose first
        // `cap + GROUP` bytes are initialised control bytes, unchanged during 'a.
        unsafe { std::slice::from_raw_parts(self.ctrl.as_ptr(), self.cap + GROUP) }
    }

    /// Address of slot `i < cap` (initialised only if the slot is full).
    #[inline(always)]
    pub(crate) fn slot_ptr(&self, i: usize) -> *mut Pair<K, V> {
        self.slots.as_ptr().cast::<Pair<K, V>>().wrapping_add(i)
    }

    /// The pair in slot `i`.
    ///
    /// # Safety
    /// `i < cap` and slot `i` is full.
    #[inline(always)]
    pub(crate) unsafe fn slot(&self, i: usize) -> &'a Pair<K, V> {
        // SAFETY: the caller's contract and the segment invariant.
        unsafe { &*self.slot_ptr(i) }
    }

    /// Starts loading the control bytes and the slot at `hash`'s home into the cache.
    #[inline(always)]
    pub(crate) fn prefetch(&self, hash: u64) {
        let home = self.home(hash);
        prefetch_read(self.slot_ptr(home));
        prefetch_read(self.ctrl.as_ptr().wrapping_add(home));
    }

    /// The slot of group `g` (read at `pos`) whose tag is `t` and whose key is `key`.
    #[inline(always)]
    fn match_key(&self, g: Group, pos: usize, t: u8, key: K::Key<'_>) -> Option<usize> {
        g.match_tag(t).map(|b| wrap(pos + b, self.cap)).find(|&i| {
            // SAFETY: `i < cap` (wrapped), and a tag only matches a full byte.
            K::eq(unsafe { &self.slot(i).0 }, key)
        })
    }

    /// The slot holding `key`, if any.
    #[inline(always)]
    pub(crate) fn find(&self, hash: u64, key: K::Key<'_>) -> Option<usize> {
        let home = self.home(hash);
        prefetch_read(self.slot_ptr(home));
        let (cap, t) = (self.cap, tag(hash));
        let mut pos = home;
        loop {
            let g = Group::load(self.ctrl(), pos);
            if let Some(i) = self.match_key(g, pos, t, key) {
                return Some(i);
            }
            if g.match_empty().any() {
                return None;
            }
            pos = wrap(pos + GROUP, cap);
        }
    }

    /// One probe for an insert: `Ok(slot)` holding `key`, or `Err(free)` with the first free
    /// slot on its probe path (where the key goes; whether the segment has room is
    /// `HashTable::has_room`). One pass over the control bytes where a `find` and a search
    /// for a free slot would make two: the first free slot always lies at or before the
    /// EMPTY slot that ends the search.
    #[inline(always)]
    pub(crate) fn find_or_free(&self, hash: u64, key: K::Key<'_>) -> Result<usize, usize> {
        let (cap, t) = (self.cap, tag(hash));
        let home = self.home(hash);
        prefetch_read(self.slot_ptr(home));
        let mut pos = home;
        let mut free = None;
        loop {
            let g = Group::load(self.ctrl(), pos);
            if let Some(i) = self.match_key(g, pos, t, key) {
                return Ok(i);
            }
            if free.is_none() {
                free = g.match_free().lowest().map(|b| wrap(pos + b, cap));
            }
            if g.match_empty().any() {
                return Err(free.expect("an EMPTY slot is a free slot"));
            }
            pos = wrap(pos + GROUP, cap);
        }
    }
}

impl<K: KeyKind, V> Drop for Segment<K, V> {
    fn drop(&mut self) {
        if self.cap == 0 {
            return;
        }
        if std::mem::needs_drop::<Pair<K, V>>() && !self.draining {
            let slots = self.slots_ptr();
            for i in Self::full_slots(self.ctrl(), self.cap()) {
                // SAFETY: a full slot, initialised, dropped once (the segment goes away).
                unsafe { slots.add(i).drop_in_place() };
            }
        }
        // SAFETY: allocated in `new` with this layout (cap is never changed).
        unsafe {
            dealloc(self.ctrl.as_ptr(), ctrl_layout(self.cap()));
            if std::mem::size_of::<Pair<K, V>>() != 0 {
                dealloc(self.slots.as_ptr(), slots_layout::<Pair<K, V>>(self.cap()));
            }
        }
    }
}

#[cfg(test)]
mod slack_tests {
    use super::slack_pages;

    #[test]
    fn slack_is_whole_pages_past_the_used_bytes_and_inside_the_allocation() {
        const P: usize = 4096;
        // 151,552 bytes asked (4096 slots of 37 bytes), 163,840 usable: 3 whole pages.
        assert_eq!(
            slack_pages(1 << 20, 151_552, 163_840, P),
            Some(((1 << 20) + 151_552, 12_288))
        );
        // A start that is not page-aligned (jemalloc's cache-oblivious offset): the partly
        // used page and the partly owned last page are both kept.
        assert_eq!(
            slack_pages((1 << 20) + 64, 151_552, 163_840, P),
            Some(((1 << 20) + 155_648, 8_192))
        );
        // No whole page of slack.
        assert_eq!(slack_pages(1 << 20, 160_000, 163_840, P), None);
        assert_eq!(slack_pages(1 << 20, 163_840, 163_840, P), None);
        for start in (0..3 * P).step_by(40) {
            for used in [16_384, 20_000, 150_001] {
                for usable in [used, used + 100, used + 4095, used + 9000, used + 40_000] {
                    if let Some((from, len)) = slack_pages(start, used, usable, P) {
                        assert!(from.is_multiple_of(P) && len.is_multiple_of(P) && len > 0);
                        assert!(from >= start + used && from + len <= start + usable);
                    }
                }
            }
        }
    }
}
