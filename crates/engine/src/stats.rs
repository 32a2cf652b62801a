//! Command statistics (INFO commandstats), error replies (INFO errorstats), server-wide
//! counters (INFO stats) and the loading progress, as values: none of them is a static.
//!
//! Command counters are per shard, that is per worker thread ([`CommandStats`], a field of
//! the shard's `recorders::ShardRecorders`): every thread counts the commands it executes
//! without sharing a cache line with the other threads, and INFO sums the threads' tables by
//! sending a job to each shard (one shard per thread). Counters that change once per
//! connection or per error reply, not per command, are atomics (or one lock) in values the
//! engine holds (`Engine::stats`, `Recorders::errors`, `Recorders::loading`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

#[derive(Clone, Copy, Default, Debug)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// One thread's command table: rows in first-seen order, an index by name, and the row of the
/// last command counted. Pipelines repeat one command, so `record` usually compares one
/// pointer instead of hashing the name (the hash lookup was about 1% of a pipelined GET).
#[derive(Default)]
struct Table {
    rows: Vec<(&'static str, CmdStat)>,
    index: HashMap<&'static str, usize, foldhash::fast::FixedState>,
    /// (name address, row) of the last name looked up; names are the command table's
    /// `&'static str`s, so one command always comes with the same address. (An address,
    /// not a pointer: the shard holding this table travels between threads at start.)
    last: Option<(usize, usize)>,
    /// Each row's latency histogram (`latency.rs`), made the first time it is recorded.
    hists: Vec<Option<crate::latency::Histogram>>,
}

impl Table {
    fn row(&mut self, name: &'static str) -> &mut CmdStat {
        let i = self.index_of(name);
        &mut self.rows[i].1
    }

    #[inline]
    fn index_of(&mut self, name: &'static str) -> usize {
        let i = match self.last {
            Some((p, i)) if p == name.as_ptr() as usize && self.rows[i].0.len() == name.len() => i,
            _ => {
                let rows = &mut self.rows;
                let i = *self.index.entry(name).or_insert_with(|| {
                    rows.push((name, CmdStat::default()));
                    rows.len() - 1
                });
                self.last = Some((name.as_ptr() as usize, i));
                i
            }
        };
        i
    }
}

/// One shard's (one worker thread's) INFO commandstats and latency histograms: written only
/// by its thread, read through a job sent to the shard.
#[derive(Default)]
pub struct CommandStats {
    table: Table,
    /// Commands executed by this thread since it started (never reset), for ops/sec.
    calls_total: u64,
}

/// Instantaneous ops/sec of one thread, Redis-style: the mean of the last 16 samples taken
/// at every background tick.
pub struct OpsMeter {
    samples: [f64; 16],
    next: usize,
    last_calls: u64,
    last_at: std::time::Instant,
}

impl Default for OpsMeter {
    fn default() -> Self {
        OpsMeter { samples: [0.0; 16], next: 0, last_calls: 0, last_at: std::time::Instant::now() }
    }
}

impl OpsMeter {
    /// Takes a sample of a thread that has run `calls` commands so far
    /// ([`CommandStats::calls_total`]); returns the current mean rate.
    pub fn sample(&mut self, calls: u64) -> u64 {
        let secs = self.last_at.elapsed().as_secs_f64();
        if secs > 0.0 {
            self.samples[self.next % 16] = (calls - self.last_calls) as f64 / secs;
            self.next += 1;
        }
        self.last_calls = calls;
        self.last_at = std::time::Instant::now();
        (self.samples.iter().sum::<f64>() / 16.0) as u64
    }
}

impl CommandStats {
    /// Commands this thread has executed since it started.
    pub fn calls_total(&self) -> u64 {
        self.calls_total
    }

    /// Counts one execution of `name`.
    pub fn record(&mut self, name: &'static str, took: Duration, failed: bool, tracking: bool) {
        self.record_many(name, 1, took, u64::from(failed), tracking);
    }

    /// [`CommandStats::record`] for `calls` executions of one command that took `took`
    /// together, `failed` of them with an error: a pipelined group repeats one command, and
    /// one table row lookup per run costs less than one per command. `tracking`:
    /// `latency-tracking` is on (the calls go into the command's histogram too).
    #[inline]
    pub fn record_many(&mut self, name: &'static str, calls: u64, took: Duration, failed: u64, tracking: bool) {
        self.calls_total += calls;
        let c = &mut self.table;
        let i = c.index_of(name);
        let s = &mut c.rows[i].1;
        s.calls += calls;
        s.usec += took.as_micros() as u64;
        s.failed_calls += failed;
        // INFO latencystats: every call at the mean of its run (one bucket add per run).
        if tracking && calls > 0 {
            if c.hists.len() <= i {
                c.hists.resize_with(i + 1, || None);
            }
            // u64 arithmetic: a u128 division is a library call (a run of 2^64 ns is 584 years).
            let each_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX) / calls;
            c.hists[i].get_or_insert_with(Default::default).record(each_ns, calls);
        }
    }

    /// This thread's latency histograms, by command.
    pub fn histograms(&self) -> Vec<(&'static str, crate::latency::Histogram)> {
        let c = &self.table;
        c.hists.iter().enumerate().filter_map(|(i, h)| h.as_ref().map(|h| (c.rows[i].0, h.clone()))).collect()
    }

    /// Counts a command refused before execution (arity, auth, unknown subcommand...).
    pub fn record_rejected(&mut self, name: &'static str) {
        self.table.row(name).rejected_calls += 1;
    }

    /// This thread's table.
    pub fn snapshot(&self) -> HashMap<&'static str, CmdStat> {
        self.table.rows.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// Clears this thread's table and latency histograms (CONFIG RESETSTAT); the total for
    /// ops/sec goes on.
    pub fn reset(&mut self) {
        self.table = Table::default();
    }
}

/// Most distinct error codes INFO errorstats lists (Redis's ERROR_STATS_NUMBER): a client
/// inventing codes cannot grow the table; later new codes are counted only in the total.
pub const ERROR_CODES_MAX: usize = 128;

/// Error replies by code (INFO errorstats) and in all (INFO stats `total_error_replies`), as
/// Redis's `afterErrorReply` counts them: every error reply a client gets, queued commands'
/// inside EXEC included. Errors are rare next to commands: one lock is enough.
#[derive(Default)]
pub struct ErrorStats {
    codes: parking_lot::Mutex<std::collections::BTreeMap<Box<[u8]>, u64>>,
    total: AtomicU64,
}

impl ErrorStats {
    /// Counts one error reply: its code is the text up to the first space within the first
    /// 32 bytes (`WRONGTYPE`, `ERR`, `NOAUTH`...), else `ERR`, as Redis.
    pub fn count(&self, text: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let head = &text[..text.len().min(32)];
        let code = match memchr::memchr(b' ', head) {
            Some(end) if end > 0 => &text[..end],
            _ => b"ERR",
        };
        let mut codes = self.codes.lock();
        if let Some(n) = codes.get_mut(code) {
            *n += 1;
        } else if codes.len() < ERROR_CODES_MAX {
            codes.insert(code.into(), 1);
        }
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// INFO's `# Errorstats` lines.
    pub fn info(&self) -> String {
        use std::fmt::Write;
        let mut out = String::from("# Errorstats\r\n");
        for (code, n) in self.codes.lock().iter() {
            let _ = write!(out, "errorstat_{}:count={n}\r\n", String::from_utf8_lossy(code));
        }
        out.push_str("\r\n");
        out
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        self.codes.lock().clear();
        self.total.store(0, Ordering::Relaxed);
    }

    /// Counts the error reply `frame`, if it is one (the frame itself, not inside arrays:
    /// EXEC counts its queued commands' errors as they run).
    #[inline]
    pub fn count_reply(&self, frame: &abacus_protocol::Frame) {
        if let abacus_protocol::Frame::Error(text) = frame {
            self.count(text);
        }
    }
}


/// Server-wide counters.
pub struct ServerStats {
    pub connections_received_total: AtomicU64,
    pub connections_rejected_total: AtomicU64,
    pub net_input_bytes_total: AtomicU64,
    pub net_output_bytes_total: AtomicU64,
    /// Connections moved to the thread owning their keys (`migrate-connections-after`).
    pub migrated_connections: AtomicU64,
    /// Batches whose replies the shard's thread wrote to the client (`direct-replies`), and
    /// how many of them the socket took only in part (the connection's thread wrote the rest).
    pub direct_replies: AtomicU64,
    pub direct_replies_partial: AtomicU64,
    /// Clients waiting in a blocking command now (INFO clients `blocked_clients`).
    pub blocked_clients: AtomicU64,
    /// Per shard thread: its instantaneous ops/sec, published by its background tick.
    pub ops_per_sec: Vec<AtomicU64>,
}

impl ServerStats {
    pub fn new(shards: usize) -> ServerStats {
        ServerStats {
            connections_received_total: AtomicU64::new(0),
            connections_rejected_total: AtomicU64::new(0),
            net_input_bytes_total: AtomicU64::new(0),
            net_output_bytes_total: AtomicU64::new(0),
            migrated_connections: AtomicU64::new(0),
            direct_replies: AtomicU64::new(0),
            direct_replies_partial: AtomicU64::new(0),
            blocked_clients: AtomicU64::new(0),
            ops_per_sec: (0..shards).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn reset(&self) {
        for c in [&self.connections_received_total, &self.connections_rejected_total, &self.net_input_bytes_total, &self.net_output_bytes_total, &self.migrated_connections, &self.direct_replies, &self.direct_replies_partial] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Progress of loading the data at start (INFO persistence `loading*` fields).
#[derive(Default)]
pub struct Loading {
    pub active: AtomicBool,
    /// Bytes to load (snapshot and log files) and bytes loaded so far.
    pub total: AtomicU64,
    pub loaded: AtomicU64,
    pub start_ms: AtomicU64,
    /// Keys read from the snapshot and commands replayed from the log so far (progress lines).
    pub keys: AtomicU64,
    pub commands: AtomicU64,
}

impl Loading {
    /// Whether the data is loading (clients get -LOADING).
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub fn start(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
        self.loaded.store(0, Ordering::Relaxed);
        self.keys.store(0, Ordering::Relaxed);
        self.commands.store(0, Ordering::Relaxed);
        self.start_ms.store(crate::clock::now_ms(), Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    pub fn finish(&self) {
        self.active.store(false, Ordering::Release);
    }

    /// One line of progress for the log: share of the bytes, keys and commands so far, rate
    /// and the time left at that rate.
    pub fn progress_line(&self) -> String {
        const MB: f64 = 1e6;
        let total = self.total.load(Ordering::Relaxed).max(1);
        let done = self.loaded.load(Ordering::Relaxed).min(total);
        let elapsed_s = (crate::clock::now_ms().saturating_sub(self.start_ms.load(Ordering::Relaxed))) as f64 / 1000.0;
        let rate = if elapsed_s > 0.0 { done as f64 / elapsed_s } else { 0.0 };
        let eta = if rate > 0.0 { format!("{:.0}s", (total - done) as f64 / rate) } else { "unknown".to_string() };
        format!(
            "Loading: {:.1}% ({:.1} of {:.1} MB), {} keys and {} log commands so far, {:.1} MB/s, ETA {eta}",
            done as f64 * 100.0 / total as f64,
            done as f64 / MB,
            total as f64 / MB,
            self.keys.load(Ordering::Relaxed),
            self.commands.load(Ordering::Relaxed),
            rate / MB,
        )
    }
}
