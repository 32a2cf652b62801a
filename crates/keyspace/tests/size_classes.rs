//! `StrBuf` sizes its heap buffers to jemalloc's size classes, computed by formula so that the
//! keyspace crate does not depend on the allocator. This checks the formula against
//! jemalloc's own answer (`nallocx`: the usable size of an allocation of n bytes), and that a
//! buffer's capacity is what jemalloc really hands out.

use abacus_keyspace::strbuf::size_class;
use abacus_keyspace::StrBuf;

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn nallocx(n: usize) -> usize {
    // SAFETY: nallocx only computes a size; flags 0 = default alignment and arena.
    unsafe { tikv_jemalloc_sys::nallocx(n, 0) }
}

#[test]
fn size_class_is_jemallocs() {
    let mut n = 1usize;
    while n <= 64 << 20 {
        // Every size up to 64 KiB, then a sparse walk with the boundaries around each class.
        assert_eq!(size_class(n), nallocx(n), "size {n}");
        n = if n < 65_536 { n + 1 } else { n + n / 97 };
        if n >= 65_536 {
            let c = nallocx(n);
            assert_eq!(size_class(c), c, "class {c}");
            assert_eq!(size_class(c + 1), nallocx(c + 1), "class {c} + 1");
        }
    }
}

#[test]
fn capacity_is_the_usable_size() {
    let mut s = StrBuf::new();
    for i in 0..5_000u32 {
        s.extend_from_slice(&i.to_le_bytes());
        if !s.is_inline() {
            // SAFETY: the pointer is a live jemalloc allocation (the buffer of `s`).
            let usable = unsafe { tikv_jemallocator::usable_size(s.as_ptr()) };
            assert_eq!(s.capacity(), usable, "len {}", s.len());
        }
    }
}
