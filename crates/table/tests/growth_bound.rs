//! Growth costs the same at any size: no insert writes more than a fixed number of
//! directory entries, or makes an allocation larger than a fixed size, however large the
//! table. Measured by counting (directory entries written, bytes per allocation), never by
//! timing. A table whose directory doubled in one step (or whose per-segment arrays were
//! `Vec`s) fails both: at the sizes reached here its last doubling alone writes 2^16
//! entries into a 1.5 MB allocation.
//!
//! Its own test binary, so that its counting allocator sees one thread's allocations: each
//! thread counts its own largest request.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use abacus_table::{Config, U64Table};

struct LargestRequest;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(bytes: usize) {
    // `try_with`: during thread teardown the slot may be gone; that allocation is not ours.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(bytes)));
}

// SAFETY: every method forwards to the system allocator with the caller's arguments
// unchanged, upholding GlobalAlloc's contract as `System` does; the counter is bookkeeping.
unsafe impl GlobalAlloc for LargestRequest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: LargestRequest = LargestRequest;

/// Directory entries one insert may write: a growth step copies 512 entries into the next
/// directory (twice each) and points the blocks of at most two new segments at them (in
/// both directories); a directory below 1024 entries doubles at once (2048 writes).
const DIR_WRITES_PER_INSERT_MAX: u64 = 4096;

/// Bytes one insert may ask the allocator for at once: a page of 1024 directory entries or
/// segment headers (24 KB), or a segment of these tests' sizes (a few KB).
const ALLOC_PER_INSERT_MAX: usize = 32 << 10;

fn grow_and_check(segment_slots: usize, n: u64, dir_min: usize) {
    let mut t: U64Table<u64> = U64Table::with_config(Config {
        segment_slots,
        seed: Some(7),
        ..Config::default()
    });
    let (mut writes_max, mut alloc_max) = (0, 0);
    let next = |k: u64| {
        k.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
    };
    let mut key = 0x5eedu64;
    for i in 0..n {
        key = next(key);
        // The directory is mid-build most of the time: check it (and everything) now and then.
        if i % (n / 8) == 0 {
            t.check_invariants().unwrap();
        }
        let before = t.directory_stats().1;
        LARGEST.with(|l| l.set(0));
        t.insert(key, key);
        alloc_max = alloc_max.max(LARGEST.with(Cell::get));
        writes_max = writes_max.max(t.directory_stats().1 - before);
    }
    let (dir_len, _) = t.directory_stats();
    // The table got big enough that one-step growth would have broken both bounds.
    assert!(
        dir_len >= dir_min,
        "directory of {dir_len} entries, wanted {dir_min}"
    );
    assert!(2 * dir_len as u64 > DIR_WRITES_PER_INSERT_MAX);
    assert!(dir_len * 24 > ALLOC_PER_INSERT_MAX);
    assert!(
        writes_max <= DIR_WRITES_PER_INSERT_MAX,
        "an insert wrote {writes_max} directory entries"
    );
    assert!(
        alloc_max <= ALLOC_PER_INSERT_MAX,
        "an insert allocated {alloc_max} bytes at once"
    );
    assert_eq!(t.len() as u64, n);
    t.check_invariants().unwrap();
    // Every key is found through the directory swapped in along the way; half go again.
    let mut key = 0x5eedu64;
    for i in 0..n {
        key = next(key);
        assert_eq!(t.get(key), Some(&key));
        if i % 2 == 0 {
            assert_eq!(t.remove(key), Some(key));
        }
    }
    assert_eq!(t.len() as u64, n / 2);
    t.check_invariants().unwrap();
}

#[test]
#[cfg_attr(miri, ignore)] // hundreds of thousands of inserts
fn no_insert_does_work_proportional_to_the_table() {
    // Tiny segments: many of them, splits often uneven, a deep directory.
    grow_and_check(16, 400_000, 1 << 15);
    // Larger ones, closer to the default's behaviour.
    grow_and_check(64, 1_000_000, 1 << 15);
}
