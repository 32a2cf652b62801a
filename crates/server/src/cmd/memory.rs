//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP, with Redis 7.0's reply shapes and
//! figures from Abacus's own accounting.
//!
//! Where the figures come from:
//! - a key's size (USAGE) is keyed, so it lives below the network layer
//!   (`abacus_commands::memory`, which says how it is measured); its entry is listed here
//!   among MEMORY's subcommands;
//! - totals (STATS) are jemalloc's, as Redis's: `total.allocated` is `used_memory`, the
//!   allocator's active and resident bytes give the fragmentation figures, the process's
//!   RSS comes from /proc; the per-database overhead is the exact size of the shards' hash
//!   tables and expiry indexes. `dataset.bytes` is what remains, as in Redis.
//! - Figures Abacus has no accounting for yet (client buffers, replication backlog, scripts)
//!   are 0, which is what an instance without those features reports in Redis too.
//!
//! PURGE replies OK as Redis does, but forces no purge: jemalloc's background threads
//! (`memory::enable_background_purge`) already return freed pages after `dirty_decay_ms`,
//! and forcing it now would need a raw `mallctl` call that this crate's
//! `forbid(unsafe_code)` keeps out.

use std::fmt::Write as _;

use abacus_protocol::{Bytes, Frame};

use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::Access;
use abacus_engine::memory;

const S: &str = "server";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("memory", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), S, "A container for memory diagnostics commands.").with_subcommands(MEMORY)
        .docs("4.0.0", "Depends on subcommand."),
];

const MEMORY: &[Spec] = &[
    abacus_commands::memory::USAGE,
    Spec::conn("memory|stats", 2, 0, NONE, conn_fn!(|conn, access, _| stats_reply(conn, access).await), S, "Returns details about memory usage.")
        .docs("4.0.0", "O(1)")
        .tips("nondeterministic_output request_policy:all_shards response_policy:special"),
    Spec::conn("memory|doctor", 2, 0, NONE, conn_fn!(|conn, access, _| doctor(conn, access).await), S, "Outputs a memory problems report.")
        .docs("4.0.0", "O(1)")
        .tips("nondeterministic_output request_policy:all_shards response_policy:special"),
    Spec::conn("memory|malloc-stats", 2, 0, NONE, conn_fn!(|_, _, _| malloc_stats()), S, "Returns the allocator statistics.")
        .docs("4.0.0", "Depends on how much memory is allocated, could be slow")
        .tips("nondeterministic_output request_policy:all_shards response_policy:special"),
    Spec::conn("memory|purge", 2, 0, NONE, conn_fn!(|_, _, _| Frame::ok()), S, "Asks the allocator to release memory.")
        .docs("4.0.0", "Depends on how much memory is allocated, could be slow")
        .tips("request_policy:all_shards response_policy:all_succeeded"),
    Spec::conn("memory|help", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| help()), S, "Returns helpful text about the different subcommands.")
        .docs("4.0.0", "O(1)"),
];

/// Per database, summed over the shards: (keys, main table bytes, expiry index bytes).
type DbFigures = Vec<(usize, usize, usize)>;

async fn db_figures(conn: &mut Conn, access: Access<'_>) -> Option<DbFigures> {
    let per_shard = conn
        .worker
        .run_all(access, |s| {
            s.dbs
                .iter()
                .map(|d| {
                    let (main, expires) = d.table_bytes_split();
                    (d.len(), main, expires)
                })
                .collect::<Vec<_>>()
        })
        .await?;
    let mut total: DbFigures = Vec::new();
    for shard in per_shard {
        total.resize(total.len().max(shard.len()), (0, 0, 0));
        for (i, (k, m, e)) in shard.into_iter().enumerate() {
            total[i].0 += k;
            total[i].1 += m;
            total[i].2 += e;
        }
    }
    Some(total)
}

/// The figures of MEMORY STATS (and what DOCTOR judges).
struct Stats {
    peak: u64,
    allocated: u64,
    startup: u64,
    dbs: DbFigures,
    active: u64,
    resident: u64,
    rss: u64,
}

impl Stats {
    fn overhead(&self) -> u64 {
        self.startup + self.dbs.iter().map(|d| (d.1 + d.2) as u64).sum::<u64>()
    }

    fn keys(&self) -> u64 {
        self.dbs.iter().map(|d| d.0 as u64).sum()
    }
}

async fn gather(conn: &mut Conn, access: Access<'_>) -> Option<Stats> {
    let dbs = db_figures(conn, access).await?;
    let allocated = memory::allocated_bytes();
    let (active, resident) = memory::allocator_active_resident();
    Some(Stats { peak: memory::peak_bytes(), allocated, startup: memory::startup_bytes(), dbs, active, resident, rss: memory::rss_bytes() })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

async fn stats_reply(conn: &mut Conn, access: Access<'_>) -> Frame {
    let Some(st) = gather(conn, access).await else { return abacus_engine::exec::shutting_down() };
    let int = |n: u64| Frame::Integer(n as i64);
    let diff = |a: u64, b: u64| Frame::Integer(a as i64 - b as i64);
    let key = |k: &str| Frame::Bulk(Bytes::copy_from_slice(k.as_bytes()));
    let overhead = st.overhead();
    let net = st.allocated.saturating_sub(st.startup);
    let keys = st.keys();
    let dataset = st.allocated.saturating_sub(overhead);
    let mut m: Vec<(Frame, Frame)> = vec![
        (key("peak.allocated"), int(st.peak)),
        (key("total.allocated"), int(st.allocated)),
        (key("startup.allocated"), int(st.startup)),
        (key("replication.backlog"), int(0)),
        (key("clients.slaves"), int(0)),
        (key("clients.normal"), int(0)),
        (key("cluster.links"), int(0)),
        (key("aof.buffer"), int(0)),
        (key("lua.caches"), int(0)),
        (key("functions.caches"), int(0)),
    ];
    for (i, (n, main, expires)) in st.dbs.iter().enumerate() {
        if *n == 0 {
            continue;
        }
        let inner = vec![
            (key("overhead.hashtable.main"), int(*main as u64)),
            (key("overhead.hashtable.expires"), int(*expires as u64)),
            (key("overhead.hashtable.slot-to-keys"), int(0)),
        ];
        m.push((key(&format!("db.{i}")), Frame::Map(inner)));
    }
    m.extend([
        (key("overhead.total"), int(overhead)),
        (key("keys.count"), int(keys)),
        (key("keys.bytes-per-key"), int(net.checked_div(keys).unwrap_or(0))),
        (key("dataset.bytes"), int(dataset)),
        (key("dataset.percentage"), Frame::Score(ratio(dataset * 100, net))),
        (key("peak.percentage"), Frame::Score(ratio(st.allocated * 100, st.peak))),
        (key("allocator.allocated"), int(st.allocated)),
        (key("allocator.active"), int(st.active)),
        (key("allocator.resident"), int(st.resident)),
        (key("allocator-fragmentation.ratio"), Frame::Score(ratio(st.active, st.allocated))),
        (key("allocator-fragmentation.bytes"), diff(st.active, st.allocated)),
        (key("allocator-rss.ratio"), Frame::Score(ratio(st.resident, st.active))),
        (key("allocator-rss.bytes"), diff(st.resident, st.active)),
        (key("rss-overhead.ratio"), Frame::Score(ratio(st.rss, st.resident))),
        (key("rss-overhead.bytes"), diff(st.rss, st.resident)),
        (key("fragmentation"), Frame::Score(ratio(st.rss, st.allocated))),
        (key("fragmentation.bytes"), diff(st.rss, st.allocated)),
    ]);
    Frame::Map(m)
}

/// Below this much allocated memory the doctor declines, as Redis's does (5 MB).
const DOCTOR_MIN_BYTES: u64 = 5 << 20;

/// Redis's memory doctor, for the conditions Abacus measures: a past peak, allocator
/// fragmentation, RSS far above what is allocated.
async fn doctor(conn: &mut Conn, access: Access<'_>) -> Frame {
    let Some(st) = gather(conn, access).await else { return abacus_engine::exec::shutting_down() };
    Frame::Verbatim { format: *b"txt", text: Bytes::from(doctor_report(&st)) }
}

fn doctor_report(st: &Stats) -> String {
    if st.allocated < DOCTOR_MIN_BYTES {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.".to_string();
    }
    let mut issues = String::new();
    if ratio(st.peak, st.allocated) > 1.5 {
        issues.push_str(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    let alloc_frag = ratio(st.active, st.allocated);
    if alloc_frag > 1.1 && st.active.saturating_sub(st.allocated) > 10 << 20 {
        let _ = write!(issues, " * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You may try enabling 'activedefrag' config option. (ratio {alloc_frag:.2})\n\n");
    }
    let rss_frag = ratio(st.rss, st.allocated);
    if rss_frag > 1.4 && st.rss.saturating_sub(st.allocated) > 10 << 20 {
        let _ = write!(issues, " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the process is much larger than the sum of the logical allocations it holds). (ratio {rss_frag:.2})\n\n");
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.".to_string();
    }
    format!("Sam, I detected a few issues in this instance memory implants:\n\n{issues}I'm here to keep you safe, Sam. I want to help you.\n")
}

fn malloc_stats() -> Frame {
    let allocated = memory::allocated_bytes();
    let (active, resident) = memory::allocator_active_resident();
    let (metadata, mapped, retained) = memory::allocator_other();
    let version = tikv_jemalloc_ctl::version::read().unwrap_or("unknown").trim();
    let text = format!(
        "___ Begin jemalloc statistics ___\nVersion: \"{version}\"\nAllocated: {allocated}, active: {active}, metadata: {metadata}, resident: {resident}, mapped: {mapped}, retained: {retained}\n--- End jemalloc statistics ---\n"
    );
    Frame::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

fn help() -> Frame {
    let lines = [
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
        "HELP",
        "    Prints this help.",
    ];
    Frame::Array(lines.iter().map(|l| Frame::Simple(Bytes::from_static(l.as_bytes()))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_judges_the_figures() {
        let st = |allocated, peak, active, rss| Stats { peak, allocated, startup: 0, dbs: vec![], active, resident: active, rss };
        assert!(doctor_report(&st(1 << 20, 1 << 20, 1 << 20, 1 << 20)).contains("empty or is using very little memory"));
        assert!(doctor_report(&st(100 << 20, 100 << 20, 101 << 20, 110 << 20)).contains("can't find any memory issue"));
        let r = doctor_report(&st(100 << 20, 400 << 20, 130 << 20, 300 << 20));
        assert!(r.contains("Peak memory") && r.contains("High allocator fragmentation") && r.contains("High total RSS"), "{r}");
    }
}
