//! W1 embedded: big-memory appends through the keyspace API, no server.
//!
//! Each record appends 16 bytes to the value of a uniformly random 64-bit key (stored as its
//! 8 big-endian bytes). Defaults are one tenth of the reference run: 21.2 million records
//! onto 7.8 million keys. `W1_FULL=1` runs the reference (212M onto 78M); `W1_RECORDS` and
//! `W1_KEYS` set other sizes.
//!
//!     cargo bench -p abacus-keyspace --bench w1
//!     W1_FULL=1 cargo bench -p abacus-keyspace --bench w1
//!
//! Which key a record goes to: record r opens a new key when fewer than floor(rK/N) + 1 are
//! open, so new keys arrive evenly through the run (the table grows all along, which is what
//! exposes growth stalls) and exactly K keys exist at the end. Every other record appends to
//! an existing key chosen with a skew toward older keys (index = used * u^2, u uniform), a
//! Zipf-like spread of value sizes, capped at 16 KiB per value (1,024 appends) as in W1's
//! definition: a key at the cap sends the record to a uniformly chosen key instead. The cap
//! needs a 2-byte counter per key, which the harness allocates up front and subtracts from
//! the memory figures.
//!
//! Reported: throughput for every million records (a growth stall shows up as a slow
//! million), overall appends/s, peak RSS (VmHWM), and bytes per key of RSS growth (final
//! VmRSS minus the baseline and the harness's counters) and of peak RSS. The allocator is
//! jemalloc with its background purge threads, as in the `abacus` binary.

use std::time::Instant;

use abacus_keyspace::{Db, Value};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const RECORD: &[u8; 16] = b"0123456789abcdef";
const MAX_APPENDS: u16 = 1024;
/// Records per prefetched batch (`W1_PREFETCH=0` turns prefetching off).
const BATCH: usize = 16;

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of index `i`: a random-looking 64-bit integer (distinct indexes give distinct
/// keys: splitmix64's finalizer is a bijection).
fn key_of(i: u64) -> [u8; 8] {
    splitmix(i ^ 0x5EED).to_be_bytes()
}

fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
}

fn main() {
    let full = std::env::var("W1_FULL").is_ok_and(|v| v == "1");
    let records = env_u64("W1_RECORDS").unwrap_or(if full { 212_000_000 } else { 21_200_000 });
    let keys = env_u64("W1_KEYS").unwrap_or(if full { 78_000_000 } else { 7_800_000 });
    assert!(
        keys >= 1 && keys <= records,
        "need 1 <= W1_KEYS <= W1_RECORDS"
    );

    let prefetch = std::env::var("W1_PREFETCH").map_or(true, |v| v != "0");
    // The server's `keyspace-density`: W1_DENSITY=dense for the dense key table.
    abacus_keyspace::set_dense_key_tables(std::env::var("W1_DENSITY").is_ok_and(|v| v == "dense"));
    // As `abacus serve` (abacus-engine's memory.rs): freed pages return to the kernel in the
    // background instead of only while allocating.
    let background_purge = tikv_jemalloc_ctl::background_thread::write(true).is_ok();
    let baseline_kb = status_kb("VmRSS:");
    let mut appends = vec![0u16; keys as usize];
    // Touch the counters now so their pages count in the baseline, not in the table's growth.
    appends.iter_mut().step_by(1024).for_each(|c| *c = 0);
    let harness_kb = status_kb("VmRSS:").saturating_sub(baseline_kb);

    println!(
        "W1 embedded: {records} appends of 16 B onto {keys} random u64 keys (abacus-keyspace Db, jemalloc, batches of {BATCH}, prefetch {prefetch}, background purge {background_purge})"
    );
    println!(
        "{:>10} {:>10} {:>12} {:>10}",
        "records_M", "keys_M", "appends/s", "rss_MiB"
    );
    let mut db = Db::new();
    let now_ms = 1_700_000_000_000u64;
    let mut used: u64 = 0;
    let (mut rng, mut slowest_million_s, mut fastest_million_s) = (0u64, 0f64, f64::MAX);
    let start = Instant::now();
    let mut chunk_start = Instant::now();
    // Records are processed in batches of BATCH: pick the keys, prefetch (as the server does
    // for a pipeline), then append. The misses of a batch
    // overlap instead of running one after the other.
    let mut batch: Vec<[u8; 8]> = Vec::with_capacity(BATCH);
    let mut hashes = [0u64; BATCH];
    for r in 0..records {
        // Record r leaves floor(r K / N) + 1 keys opened: K at the last record.
        let opens = used <= (r as u128 * keys as u128 / records as u128) as u64;
        let idx = if opens {
            used += 1;
            used - 1
        } else {
            rng = splitmix(rng);
            let u = (rng >> 11) as f64 / (1u64 << 53) as f64;
            let skewed = ((used as f64) * u * u) as u64;
            if appends[skewed as usize] < MAX_APPENDS {
                skewed
            } else {
                splitmix(rng) % used
            }
        };
        appends[idx as usize] = appends[idx as usize].saturating_add(1);
        batch.push(key_of(idx));
        if batch.len() == BATCH || r + 1 == records || (r + 1) % 1_000_000 == 0 {
            if prefetch {
                // As the server prefetches a pipeline (exec.rs): every key's segment header,
                // then every slot, then every value's bytes, each step's loads overlapping.
                for (h, key) in hashes.iter_mut().zip(&batch) {
                    *h = db.prefetch_segment(key);
                }
                for &h in &hashes[..batch.len()] {
                    db.prefetch_hashed(h);
                }
                db.prefetch_values(hashes.iter().copied().zip(batch.iter().map(|k| &k[..])));
            }
            for key in batch.drain(..) {
                match db.get_mut(&key, now_ms) {
                    Some(e) => {
                        e.append(RECORD).expect("only strings are stored");
                    }
                    None => db.set(&key, Value::str(RECORD), 0, now_ms),
                }
            }
        }
        if (r + 1) % 1_000_000 == 0 {
            let secs = chunk_start.elapsed().as_secs_f64();
            slowest_million_s = slowest_million_s.max(secs);
            fastest_million_s = fastest_million_s.min(secs);
            println!(
                "{:>10} {:>10.2} {:>12.0} {:>10}",
                (r + 1) / 1_000_000,
                db.len() as f64 / 1e6,
                1e6 / secs,
                status_kb("VmRSS:") / 1024
            );
            chunk_start = Instant::now();
        }
    }
    let total_s = start.elapsed().as_secs_f64();
    assert_eq!(db.len() as u64, keys, "every key index opened exactly once");
    let final_kb = status_kb("VmRSS:");
    let hwm_kb = status_kb("VmHWM:");
    let value_bytes = records * 16;
    println!();
    println!(
        "records {records}, keys {}, value bytes {value_bytes} ({:.1} B/key)",
        db.len(),
        value_bytes as f64 / keys as f64
    );
    println!(
        "throughput {:.2} M appends/s overall; per million: slowest {:.2} M/s, fastest {:.2} M/s",
        records as f64 / total_s / 1e6,
        1.0 / slowest_million_s,
        1.0 / fastest_million_s
    );
    println!("time {total_s:.1} s");
    let net = |kb: u64| kb.saturating_sub(baseline_kb + harness_kb) as f64 * 1024.0;
    println!(
        "peak RSS (VmHWM) {:.2} GiB; final RSS {:.2} GiB; harness counters {} MiB (subtracted below)",
        hwm_kb as f64 / 1048576.0,
        final_kb as f64 / 1048576.0,
        harness_kb / 1024
    );
    println!(
        "bytes per key: RSS growth {:.1}, peak RSS {:.1}; engine's own estimate (approx_bytes) {:.1}",
        net(final_kb) / keys as f64,
        net(hwm_kb) / keys as f64,
        db.approx_bytes() as f64 / keys as f64
    );
    // Where the bytes are: the table (slots at their load factor), the values' buffers, and
    // what the allocator holds beyond what was asked of it (size-class holes in partly used
    // slabs, its metadata, freed pages not yet returned).
    let table = db.table_bytes() as f64;
    let values = (db.approx_bytes() - db.table_bytes()) as f64;
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let je = |v: Result<usize, tikv_jemalloc_ctl::Error>| v.unwrap_or(0) as f64;
    let (allocated, active) = (
        je(tikv_jemalloc_ctl::stats::allocated::read()),
        je(tikv_jemalloc_ctl::stats::active::read()),
    );
    let (resident, metadata) = (
        je(tikv_jemalloc_ctl::stats::resident::read()),
        je(tikv_jemalloc_ctl::stats::metadata::read()),
    );
    let k = keys as f64;
    println!(
        "per key: table {:.1}, value buffers {:.1}; jemalloc allocated {:.1}, active {:.1}, metadata {:.1}, resident {:.1}",
        table / k,
        values / k,
        allocated / k,
        active / k,
        metadata / k,
        resident / k
    );
}
