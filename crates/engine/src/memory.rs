//! Process memory and CPU figures for INFO.
//!
//! `used_memory` is what the allocator has handed out (jemalloc's `stats.allocated`), which is
//! what Redis reports too. It is only exact when the binary uses jemalloc as its global
//! allocator, which the `abacus` binary does; `used_memory_rss` comes from /proc.

pub const ALLOCATOR: &str = "jemalloc";

use std::sync::atomic::{AtomicU64, Ordering};

static PEAK_BYTES: AtomicU64 = AtomicU64::new(0);

/// Starts jemalloc's background threads, which return freed pages to the kernel on their
/// own schedule (dirty pages decay over `dirty_decay_ms`, 10 s by default), as Redis's
/// `jemalloc-bg-thread yes` does. Without them jemalloc purges only while allocating in the
/// same arena, so after a burst of writes (table segments are rebuilt larger and the old ones
/// freed) an idle server kept about 7 MB of freed pages per shard resident indefinitely: RSS
/// grew 12% more than `used_memory` for `DEBUG POPULATE 1000000`, 3% with these threads
/// (docs/PERFORMANCE.md, "Memory accounting"). Returns whether they run.
pub fn enable_background_purge() -> bool {
    tikv_jemalloc_ctl::background_thread::write(true).is_ok()
}

/// Bytes currently allocated through jemalloc; also updates the peak.
pub fn allocated_bytes() -> u64 {
    // jemalloc caches its statistics; advancing the epoch refreshes them.
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let v = tikv_jemalloc_ctl::stats::allocated::read().map(|v| v as u64).unwrap_or(0);
    PEAK_BYTES.fetch_max(v, Ordering::Relaxed);
    v
}

static CACHED_BYTES: AtomicU64 = AtomicU64::new(0);
static CACHED_AT_MS: AtomicU64 = AtomicU64::new(0);

/// `allocated_bytes`, re-read from jemalloc at most once per millisecond: the `maxmemory`
/// check runs before every write, and refreshing jemalloc's statistics costs microseconds.
/// Between refreshes, evictions lower the cached figure by their estimate ([`note_freed`]).
pub fn used_bytes_cached(now_ms: u64) -> u64 {
    if CACHED_AT_MS.load(Ordering::Acquire) != now_ms {
        // The figure first, then its time: a shard that sees this millisecond's time must also
        // see this millisecond's figure, not one left from long ago (when maxmemory was off and
        // nothing refreshed it), which once refused a write on an empty shard.
        CACHED_BYTES.store(allocated_bytes(), Ordering::Relaxed);
        CACHED_AT_MS.store(now_ms, Ordering::Release);
    }
    CACHED_BYTES.load(Ordering::Relaxed)
}

/// Raises the cached figure by a write's estimated growth until the next refresh, so that a
/// burst of writes within one millisecond is seen by the `maxmemory` gate.
pub fn note_used(bytes: u64) {
    CACHED_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

/// Lowers the cached figure by an eviction's estimated size until the next refresh.
pub fn note_freed(bytes: u64) {
    let _ = CACHED_BYTES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(bytes)));
}

static STARTUP_BYTES: AtomicU64 = AtomicU64::new(0);

/// Records what the server holds before it loads data or accepts clients (MEMORY STATS's
/// `startup.allocated`, as Redis measures it after initialisation).
pub fn note_startup() {
    STARTUP_BYTES.store(allocated_bytes(), Ordering::Relaxed);
}

/// See [`note_startup`]; 0 when not recorded (embedded use, tests).
pub fn startup_bytes() -> u64 {
    STARTUP_BYTES.load(Ordering::Relaxed)
}

/// jemalloc's (active, resident) bytes: pages in use by allocations, and resident pages it
/// holds (MEMORY STATS's allocator figures). Read after [`allocated_bytes`], which refreshes
/// jemalloc's statistics.
pub fn allocator_active_resident() -> (u64, u64) {
    let active = tikv_jemalloc_ctl::stats::active::read().map(|v| v as u64).unwrap_or(0);
    let resident = tikv_jemalloc_ctl::stats::resident::read().map(|v| v as u64).unwrap_or(0);
    (active, resident)
}

/// jemalloc's (metadata, mapped, retained) bytes, for MEMORY MALLOC-STATS.
pub fn allocator_other() -> (u64, u64, u64) {
    let metadata = tikv_jemalloc_ctl::stats::metadata::read().map(|v| v as u64).unwrap_or(0);
    let mapped = tikv_jemalloc_ctl::stats::mapped::read().map(|v| v as u64).unwrap_or(0);
    let retained = tikv_jemalloc_ctl::stats::retained::read().map(|v| v as u64).unwrap_or(0);
    (metadata, mapped, retained)
}

/// The largest `allocated_bytes` seen (sampled by the background tick and by INFO).
pub fn peak_bytes() -> u64 {
    PEAK_BYTES.load(Ordering::Relaxed)
}

/// Resident set size of the process, from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// (user, system) CPU seconds of the process, from /proc/self/stat (clock ticks of 1/100 s,
/// the value of `sysconf(_SC_CLK_TCK)` on Linux).
pub fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}

/// Redis's human-readable byte counts (bytesToHuman): 1.50K, 3.20M, 1.00G, 2.00T, 1.78P, and
/// plain bytes from 1024 P up.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut scale = 1024u64;
    for unit in UNITS {
        if bytes < scale * 1024 {
            return format!("{:.2}{unit}", bytes as f64 / scale as f64);
        }
        scale *= 1024;
    }
    format!("{bytes}B")
}

/// Values bigger than this are freed on the background thread by UNLINK (Redis's
/// lazyfree threshold is counted in elements; bytes is what costs time here).
pub const LAZYFREE_THRESHOLD_BYTES: usize = 64 * 1024;

/// Queue of the background freeing thread; bounded so a flood of UNLINKs cannot queue
/// unbounded memory: when it is full, the caller frees in place.
const FREE_QUEUE_CAPACITY: usize = 1024;

type Garbage = Box<dyn Send>;

/// Drops `garbage` on a background thread ("abacus-free"), so that freeing a huge value or a
/// whole database (UNLINK, FLUSHALL ASYNC) does not hold up the shard's other requests.
pub fn free_later<T: Send + 'static>(garbage: T) {
    static QUEUE: std::sync::OnceLock<Option<std::sync::mpsc::SyncSender<Garbage>>> = std::sync::OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Garbage>(FREE_QUEUE_CAPACITY);
        let spawned = std::thread::Builder::new().name("abacus-free".into()).spawn(move || {
            while let Ok(g) = rx.recv() {
                drop(g);
            }
        });
        spawned.ok().map(|_| tx)
    });
    if let Some(tx) = queue {
        // Full queue or no thread: free here (dropping the returned value).
        let _ = tx.try_send(Box::new(garbage));
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_matches_redis_bytes_to_human() {
        // Expected strings from redis-server 7.0.15's INFO maxmemory_human.
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1536), "1.50K");
        assert_eq!(human(10 * 1024 * 1024), "10.00M");
        assert_eq!(human(1 << 30), "1.00G");
        assert_eq!(human(1 << 40), "1.00T");
        assert_eq!(human(2_000_000_000_000_000), "1.78P");
        assert_eq!(human(u64::MAX), "18446744073709551615B");
    }
}
