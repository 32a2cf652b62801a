//! Spare segments: a large table's growth steps write no fresh page themselves.
//!
//! Why: a growth step writes a fresh segment (up to 6.5K slots, 110-240 KB), and the first
//! write to each of its pages is a page fault. Most cost microseconds, but now and then the
//! kernel's page allocator holds the faulting thread for 0.3-0.6 ms with interrupts off
//! (`__rmqueue_pcplist` refilling its per-CPU lists, measured in this project's 2-core VM),
//! and one step touching 30-60 fresh pages sometimes met two or three of those: W2's
//! slowest growing inserts at 500 million keys were 1.8-5.2 ms of CPU, where the step's own
//! moves take 0.1-0.5 ms (docs/PERFORMANCE.md, W2).
//!
//! So a table of at least [`SPARES_FROM_BYTES`] keeps up to [`SPARES_MAX`] spares: the
//! allocations of segments of the classes its last growth steps created (with uniform
//! hashes, the segments of one ladder and depth step up together, so the next step usually
//! wants a class just used), allocated right after a step and faulted in one page per later
//! insert ([`Spares::touch_one`]). A step whose class has a spare takes it, resident (or
//! nearly: a spare taken early has its last pages touched then); one without allocates as
//! before. An insert then pays at most one page fault
//! of a spare's, where a growth step paid dozens; the faults are the same in number, spread
//! over the inserts between two steps (about a thousand at 500M keys, against 30-60 pages
//! to touch).
//!
//! Memory: the spares are counted by [`HashTable::memory_bytes`]; at most
//! `SPARES_MAX` segments of the top class (0.9 MB for `u64 -> u64`, 2 MB for the
//! keyspace's 37-byte slots), against a table of at least `SPARES_FROM_BYTES` (under 1.6%
//! there, less as it grows).
//!
//! What it does not remove: a growth step whose class has no spare (about 1 in 1,000 at
//! 150M keys) still faults its segment in, and the W2 runs still show one to six growing
//! inserts of 1-11 ms of CPU per 500M keys that no work of the table's explains: `perf`
//! finds no sample in them for milliseconds, inside user-space code (the vCPU was not
//! running, and that VM's kernel charged the time to the thread), or one page fault whose
//! zeroing took 3 ms (docs/PERFORMANCE.md, W2, "What the remaining slow growing inserts
//! are").
//!
//! [`HashTable::memory_bytes`]: crate::HashTable::memory_bytes

use std::alloc::Layout;

use crate::segment::Spare;

/// Spares kept at most (the oldest goes first). W2 at 60M keys: 2,244 of 76,000 growth
/// steps' segments found no spare with four kept, 136 with eight.
pub(crate) const SPARES_MAX: usize = 8;

/// Segment bytes from which a table keeps spares by default: smaller tables' steps write
/// few pages, and eight spares (1-2 MB) would be a noticeable share of their memory.
pub(crate) const SPARES_FROM_BYTES: usize = 128 << 20;

/// A table's spares, oldest first.
pub(crate) struct Spares {
    list: Vec<Spare>,
    /// Segment bytes from which the table keeps spares ([`crate::Config::spares_from_bytes`]).
    pub(crate) from_bytes: usize,
    /// Whether some spare has pages not yet touched (what every insert checks).
    pub(crate) untouched: bool,
    /// Growth steps' segments that came from a spare, and those that did not while the
    /// table kept spares (for the W2 bench's report).
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

impl Spares {
    /// None yet, kept once the table's segments reach `from_bytes`.
    pub(crate) fn from_bytes(from_bytes: usize) -> Spares {
        Spares {
            list: Vec::new(),
            from_bytes,
            untouched: false,
            hits: 0,
            misses: 0,
        }
    }

    /// A spare of `class`, if one is kept.
    pub(crate) fn take(&mut self, class: u16) -> Option<Spare> {
        let i = self.list.iter().position(|s| s.class() == class)?;
        Some(self.list.remove(i))
    }

    /// Touches one page of the oldest spare with pages left (see the module comment).
    #[cold]
    #[inline(never)]
    pub(crate) fn touch_one(&mut self) {
        self.untouched = self.list.iter_mut().any(Spare::touch);
    }

    /// After a growth step that created segments of `classes`: keeps a spare of each (as
    /// many as the step created of it), dropping the oldest beyond [`SPARES_MAX`].
    pub(crate) fn restock(&mut self, classes: &[u16], pair: Layout, give_slack: bool) {
        for (i, &c) in classes.iter().enumerate() {
            let want = classes[..=i].iter().filter(|&&x| x == c).count();
            if self.list.iter().filter(|s| s.class() == c).count() < want {
                self.list.push(Spare::new(c, pair, give_slack));
                self.untouched = true;
            }
        }
        if self.list.len() > SPARES_MAX {
            self.list.drain(..self.list.len() - SPARES_MAX);
        }
    }

    /// Bytes the spares hold.
    pub(crate) fn bytes(&self) -> usize {
        self.list.iter().map(Spare::alloc_bytes).sum()
    }
}
