//! Software prefetch.
//!
//! A server that executes a pipeline of commands can hash all their keys first, prefetch
//! each key's control bytes and home slot, and then run the commands: the cache misses of
//! the whole batch overlap instead of being paid one after another. On x86_64 this is the
//! `prefetcht0` instruction; elsewhere it compiles to nothing.

/// Hints the CPU to bring the cache line at `p` into all cache levels.
#[inline(always)]
pub fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` requires SSE, which every x86_64 CPU has (it is in the
    // x86_64 baseline the compiler targets). A prefetch is only a hint: it never faults,
    // even on an invalid or unmapped address, and has no architecturally visible effect, so
    // no pointer validity is required. Callers pass pointers into live arrays anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
