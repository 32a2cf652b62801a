//! W2 hash table benchmark: `u64 -> u64` inserts of uniformly random keys, then lookups of
//! all of them, for `abacus_table::U64Table` and `hashbrown::HashMap` (what std's HashMap is,
//! here with its default hasher foldhash) in the same binary.
//!
//! Run: `cargo bench -p abacus-table --bench w2` (N = 100 million; `W2_N=1000000` for a
//! quick run; `W2_SINGLE=0` skips the per-insert timing pass; `W2_TRACE=1` prints each
//! growing insert over 0.5 ms of CPU with its page faults; `W2_ONLY=abacus` runs Abacus's
//! table alone, for sizes at which both tables do not fit; `W2_BATCHED=0` skips the last
//! pass, batched inserts and lookups; `W2_DENSITY=dense` grows Abacus's table as the
//! keyspace's; `W2_SEGMENT_SLOTS=N` gives it segments of N slots instead of 4096; `W2_BG=0`
//! leaves jemalloc's background threads off, see `main`).
//! Needs ~5 GB at 100M (both), ~11 GB at 500M (Abacus alone).
//!
//! Reported per table: inserts/s and lookups/s (untimed-per-operation runs), peak and final
//! bytes per entry from a counting global allocator over jemalloc, as `abacus serve` allocates (every byte the table asked for, not
//! RSS), the slowest batch of 1000 inserts in the throughput run both in wall time and in
//! the thread's CPU time (on a shared machine the wall time includes being descheduled; the
//! CPU time, page faults included, is the table's own work and bounds any single insert in
//! the batch), and the slowest single insert by wall time in a second run that times every
//! insert (~20 ns of clock overhead each, so that run is not used for throughput). In that
//! run the inserts that grow the table (a segment rebuild or split for abacus, the doubling
//! for hashbrown) are also timed in the thread's CPU time, page faults included: the cost of
//! the slowest insert itself, which the wall time on a shared machine mixes with being
//! descheduled. Keys come
//! from a splitmix64 stream, regenerated for the lookups, so no key array distorts the
//! memory figures.

use std::alloc::{GlobalAlloc, Layout};

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tikv_jemallocator::Jemalloc;

use abacus_table::{Config, Density, U64Table};

/// The density the run asks for: `W2_DENSITY=dense`, else the default.
fn density() -> Density {
    match std::env::var("W2_DENSITY").as_deref() {
        Ok("dense") => Density::Dense,
        _ => Density::Balanced,
    }
}

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Relaxed) + bytes;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every method forwards to jemalloc with the caller's arguments unchanged, so it
// upholds GlobalAlloc's contract exactly as `Jemalloc` does; the counters are only
// bookkeeping on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged (see the impl).
        let p = unsafe { Jemalloc.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged (see the impl).
        let p = unsafe { Jemalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { Jemalloc.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged (see the impl).
        let p = unsafe { Jemalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// splitmix64: uniformly distributed, cheap, reproducible.
struct Keys(u64);

impl Iterator for Keys {
    type Item = u64;
    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Some(z ^ (z >> 31))
    }
}

/// This thread's CPU time (user and system).
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on
    // Linux, and on failure `ts` stays zero, which only spoils a figure.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The thread's minor page faults and involuntary context switches (`W2_TRACE`'s columns;
/// its user and system times are counted in ticks, too coarse for one insert).
fn thread_usage() -> [u64; 2] {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_THREAD is supported on Linux, and on
    // failure `ru` stays zero, which only spoils a trace line.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    [ru.ru_minflt as u64, ru.ru_nivcsw as u64]
}

/// CLOCK_MONOTONIC in seconds: `W2_TRACE`'s lines can be matched with a profile recorded
/// beside the run (`perf record -k mono`).
fn monotonic_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `thread_cpu_time`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

const KEY_SEED: u64 = 0x5eed;
const BATCH: u64 = 1000;

struct Figures {
    inserts_per_s: f64,
    lookups_per_s: f64,
    /// Lookups per second of this thread's CPU time (on a shared machine, the wall-time rate
    /// also counts time the thread was descheduled).
    lookups_per_cpu_s: f64,
    peak_bytes: usize,
    final_bytes: usize,
    batch_max: Duration,
    batch_cpu_max: Duration,
    single_max: Option<Duration>,
    inserts_over_100us: u64,
    /// Over the inserts that grew the table: how many, and the largest CPU and wall time.
    growing: u64,
    /// Growing inserts that took more than 0.5 ms and 1 ms of CPU.
    growing_over: [u64; 2],
    growing_cpu_max: Duration,
    growing_wall_max: Duration,
    /// The single pass's segments from spares and not.
    spares: Option<(u64, u64)>,
    /// The slowest insert that did not grow the table (wall time).
    other_wall_max: Duration,
}

trait Map: Default {
    /// An empty map as the run asks for it.
    fn fresh() -> Self {
        Self::default()
    }
    const NAME: &'static str;
    fn put(&mut self, k: u64, v: u64);
    fn find(&self, k: u64) -> Option<u64>;
    /// Whether inserting `k` now would grow the table first.
    fn grows(&self, k: u64) -> bool;
    /// Growth steps' segments taken from a spare and not (Abacus's table).
    fn spare_stats(&self) -> Option<(u64, u64)> {
        None
    }
    /// The table's shape for the trace (Abacus's: segments and directory depth).
    fn shape(&self) -> String {
        String::new()
    }
}

impl Map for U64Table<u64> {
    const NAME: &'static str = "abacus U64Table";
    /// `W2_DENSITY=dense`: grown as the keyspace's table is (`Density::Dense`);
    /// `W2_SEGMENT_SLOTS=N`: another segment size than the default.
    fn fresh() -> Self {
        let segment_slots = std::env::var("W2_SEGMENT_SLOTS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(Config::DEFAULT.segment_slots);
        U64Table::with_config(Config {
            density: density(),
            segment_slots,
            ..Config::default()
        })
    }
    #[inline(always)]
    fn put(&mut self, k: u64, v: u64) {
        self.insert(k, v);
    }
    #[inline(always)]
    fn find(&self, k: u64) -> Option<u64> {
        self.get(k).copied()
    }
    #[inline(always)]
    fn grows(&self, k: u64) -> bool {
        self.insert_grows(self.hash_key(k), k)
    }
    fn spare_stats(&self) -> Option<(u64, u64)> {
        Some(U64Table::spare_stats(self))
    }
    fn shape(&self) -> String {
        format!("{self:?}")
    }
}

type Hashbrown = hashbrown::HashMap<u64, u64, foldhash::fast::RandomState>;

impl Map for Hashbrown {
    const NAME: &'static str = "hashbrown HashMap";
    #[inline(always)]
    fn put(&mut self, k: u64, v: u64) {
        self.insert(k, v);
    }
    #[inline(always)]
    fn find(&self, k: u64) -> Option<u64> {
        self.get(&k).copied()
    }
    #[inline(always)]
    fn grows(&self, k: u64) -> bool {
        self.len() == self.capacity() && !self.contains_key(&k)
    }
}

fn run<M: Map>(n: u64, single: bool) -> Figures {
    let base = CURRENT.load(Relaxed);
    PEAK.store(base, Relaxed);
    // W2_SINGLE_ONLY=1: only the per-insert timing pass (the slowest growing insert at sizes
    // where the throughput passes would not fit the time available).
    let throughput = std::env::var("W2_SINGLE_ONLY").map_or(true, |s| s != "1");
    let mut map = M::fresh();
    let mut keys = Keys(KEY_SEED);
    let (mut batch_max, mut batch_cpu_max) = (Duration::ZERO, Duration::ZERO);
    let start = Instant::now();
    let mut i = 0;
    while throughput && i < n {
        let (t, cpu) = (Instant::now(), thread_cpu_time());
        for _ in 0..BATCH.min(n - i) {
            let k = keys.next().unwrap_or_default();
            map.put(k, k);
        }
        batch_cpu_max = batch_cpu_max.max(thread_cpu_time().saturating_sub(cpu));
        batch_max = batch_max.max(t.elapsed());
        i += BATCH;
    }
    let insert_s = start.elapsed().as_secs_f64();
    let (peak_bytes, final_bytes) = (PEAK.load(Relaxed) - base, CURRENT.load(Relaxed) - base);

    let mut keys = Keys(KEY_SEED);
    let (start, start_cpu) = (Instant::now(), thread_cpu_time());
    let mut found = 0u64;
    for _ in 0..if throughput { n } else { 0 } {
        let k = keys.next().unwrap_or_default();
        found += map.find(black_box(k)).is_some() as u64;
    }
    let lookup_s = start.elapsed().as_secs_f64();
    let lookup_cpu_s = (thread_cpu_time() - start_cpu).as_secs_f64();
    assert!(!throughput || found == n, "{} lost keys", M::NAME);
    drop(map);

    let (mut single_max, mut inserts_over_100us) = (None, 0);
    let (mut growing, mut growing_cpu_max, mut growing_wall_max) =
        (0, Duration::ZERO, Duration::ZERO);
    let mut growing_over = [0u64; 2];
    let (mut spares, mut other_wall_max) = (None, Duration::ZERO);
    if single {
        let mut map = M::fresh();
        let mut keys = Keys(KEY_SEED);
        let mut max = Duration::ZERO;
        let mut done = 0u64;
        // W2_TRACE=1: one line per growing insert over 0.5 ms of CPU, with the page faults
        // and involuntary switches inside it and when it ended (to find it in a profile).
        let trace = std::env::var("W2_TRACE").is_ok_and(|s| s == "1");
        let mut usage = [0u64; 2];
        let mut last_depth: Option<String> = None;
        for _ in 0..n {
            let k = keys.next().unwrap_or_default();
            let grows = map.grows(k);
            if grows && trace {
                usage = thread_usage();
            }
            let cpu = if grows {
                thread_cpu_time()
            } else {
                Duration::ZERO
            };
            let t = Instant::now();
            map.put(k, k);
            let d = t.elapsed();
            if grows {
                growing += 1;
                let c = thread_cpu_time().saturating_sub(cpu);
                growing_over[0] += (c > Duration::from_micros(500)) as u64;
                growing_over[1] += (c > Duration::from_millis(1)) as u64;
                if trace && c > Duration::from_micros(500) {
                    let u = thread_usage();
                    eprintln!(
                        "  slow growing insert at {done} keys: {} us CPU ({} us wall), {} minor faults, {} involuntary switches, ended at {:.6} s monotonic {}",
                        c.as_micros(),
                        d.as_micros(),
                        u[0] - usage[0],
                        u[1] - usage[1],
                        monotonic_s(),
                        map.shape()
                    );
                }
                if trace {
                    // The directory's doublings, to tell slow steps near them from others.
                    let shape = map.shape();
                    let depth = shape.split("global_depth: ").nth(1).map(str::to_owned);
                    if depth != last_depth {
                        eprintln!("  directory deeper at {done} keys: {shape}");
                        last_depth = depth;
                    }
                }
                growing_cpu_max = growing_cpu_max.max(c);
                growing_wall_max = growing_wall_max.max(d);
            } else {
                other_wall_max = other_wall_max.max(d);
            }
            inserts_over_100us += (d > Duration::from_micros(100)) as u64;
            done += 1;
            if !throughput && done % 50_000_000 == 0 {
                eprintln!(
                    "  {done} keys: {growing} growing inserts so far, the slowest {} us of CPU",
                    growing_cpu_max.as_micros()
                );
            }
            max = max.max(d);
        }
        single_max = Some(max);
        spares = map.spare_stats();
    }
    Figures {
        inserts_per_s: n as f64 / insert_s,
        lookups_per_s: n as f64 / lookup_s,
        lookups_per_cpu_s: n as f64 / lookup_cpu_s,
        peak_bytes,
        final_bytes,
        batch_max,
        batch_cpu_max,
        single_max,
        inserts_over_100us,
        growing,
        growing_over,
        growing_cpu_max,
        growing_wall_max,
        spares,
        other_wall_max,
    }
}

/// Lookups in batches of 16: hash all, prefetch all, then look up (how a server runs a
/// pipeline). Only the table with a prefetch API has this.
fn batched_lookups(n: u64) -> (f64, f64) {
    let mut t = U64Table::<u64>::fresh();
    let mut keys = Keys(KEY_SEED);
    let mut hashes = [0u64; 16];
    let mut batch = [0u64; 16];
    let start = Instant::now();
    let mut i = 0;
    while i < n {
        let m = 16.min(n - i) as usize;
        for j in 0..m {
            batch[j] = keys.next().unwrap_or_default();
            hashes[j] = t.hash_key(batch[j]);
            t.prefetch(hashes[j]);
        }
        for j in 0..m {
            t.insert_hashed(hashes[j], batch[j], batch[j]);
        }
        i += m as u64;
    }
    let insert_s = start.elapsed().as_secs_f64();
    let mut keys = Keys(KEY_SEED);
    let start = Instant::now();
    let mut found = 0u64;
    let mut i = 0;
    while i < n {
        let m = 16.min(n - i) as usize;
        for j in 0..m {
            batch[j] = keys.next().unwrap_or_default();
            hashes[j] = t.hash_key(batch[j]);
            t.prefetch(hashes[j]);
        }
        for j in 0..m {
            found += t.get_hashed(hashes[j], batch[j]).is_some() as u64;
        }
        i += m as u64;
    }
    let lookup_s = start.elapsed().as_secs_f64();
    assert_eq!(found, n);
    (n as f64 / insert_s, n as f64 / lookup_s)
}

fn main() {
    // `cargo bench` passes `--bench`; this binary has no options of its own.
    let n: u64 = std::env::var("W2_N")
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(100_000_000);
    let single = std::env::var("W2_SINGLE").map_or(true, |s| s != "0");
    // As `abacus serve` does: freed pages are purged by jemalloc's background threads, not
    // inside the allocation calls of the insert path. `W2_BG=0` leaves them off (for a run
    // with `_RJEM_MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1`: no purge and no wake-up
    // of a purging thread inside an insert, to tell the table's own cost from the allocator's).
    let background = std::env::var("W2_BG").map_or(true, |s| s != "0");
    if background && tikv_jemalloc_ctl::background_thread::write(true).is_err() {
        eprintln!("warning: jemalloc background threads could not be started");
    }
    println!(
        "W2: {n} inserts of uniformly random u64 keys (u64 values), then {n} lookups; {:?}",
        density()
    );
    let alone = std::env::var("W2_ONLY").is_ok_and(|s| s == "abacus");
    let ours = run::<U64Table<u64>>(n, single);
    let theirs = (!alone).then(|| run::<Hashbrown>(n, single));
    let both: Vec<(&str, &Figures)> = std::iter::once((<U64Table<u64> as Map>::NAME, &ours))
        .chain(theirs.as_ref().map(|f| (<Hashbrown as Map>::NAME, f)))
        .collect();
    println!(
        "{:<18} {:>11} {:>11} {:>9} {:>9} {:>16} {:>16} {:>15} {:>8}",
        "table",
        "inserts/s",
        "lookups/s",
        "peak B/e",
        "final B/e",
        "max 1000 wall us",
        "max 1000 CPU us",
        "max single us",
        ">100us"
    );
    for &(name, f) in &both {
        println!(
            "{:<18} {:>11.0} {:>11.0} {:>9.1} {:>9.1} {:>16} {:>16} {:>15} {:>8}",
            name,
            f.inserts_per_s,
            f.lookups_per_s,
            f.peak_bytes as f64 / n as f64,
            f.final_bytes as f64 / n as f64,
            f.batch_max.as_micros(),
            f.batch_cpu_max.as_micros(),
            f.single_max
                .map_or("-".to_string(), |d| d.as_micros().to_string()),
            if single {
                f.inserts_over_100us.to_string()
            } else {
                "-".to_string()
            },
        );
    }
    for &(name, f) in &both {
        println!(
            "{name}: {:.0} lookups per second of CPU time",
            f.lookups_per_cpu_s
        );
    }
    if single {
        for &(name, f) in &both {
            println!(
                "{name}: {} inserts grew the table ({} over 0.5 ms of CPU, {} over 1 ms); the slowest of them took {} us of CPU ({} us wall)",
                f.growing,
                f.growing_over[0],
                f.growing_over[1],
                f.growing_cpu_max.as_micros(),
                f.growing_wall_max.as_micros()
            );
            println!(
                "{name}: the slowest insert that did not grow it took {} us (wall)",
                f.other_wall_max.as_micros()
            );
            if let Some((hits, misses)) = f.spares {
                println!("{name}: growth steps' segments from a spare (faulted in ahead): {hits}, without one: {misses}");
            }
        }
    }
    if let Some(theirs) = &theirs {
        println!(
            "abacus / hashbrown: inserts/s {:.2}x, lookups/s {:.2}x, peak memory {:.2}x",
            ours.inserts_per_s / theirs.inserts_per_s,
            ours.lookups_per_s / theirs.lookups_per_s,
            ours.peak_bytes as f64 / theirs.peak_bytes as f64
        );
    }
    if std::env::var("W2_BATCHED").is_ok_and(|s| s == "0") {
        return;
    }
    let (ins, look) = batched_lookups(n);
    println!("abacus U64Table, batches of 16 hashed + prefetched: inserts/s {ins:.0}, lookups/s {look:.0}");
}
