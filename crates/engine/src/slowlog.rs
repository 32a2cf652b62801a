//! The slow log (SLOWLOG GET/LEN/RESET), as Redis 7.0: commands that took at least
//! `slowlog-log-slower-than` microseconds (negative: off; 0: every command), the newest
//! `slowlog-max-len` of them.
//!
//! Commands run on every worker thread; slow ones are rare by definition, so the log is one
//! list behind a mutex in the engine's [`SlowLog`] (`Recorders::slowlog`, built at start),
//! and the only per-command cost is comparing a duration the caller measured anyway with a
//! threshold kept in an atomic beside the list (set from the configuration,
//! `Recorders::configure`). An entry keeps what Redis keeps, truncated as Redis truncates it
//! so that a huge command cannot make the log huge: at most [`ARGC_MAX`] arguments (the last
//! one replaced by "... (N more arguments)") and [`STRING_MAX`] bytes of each ("... (N more
//! bytes)").
//!
//! Client address and name: a connection-level command knows its client. A keyed command
//! runs on its shard's thread, which serves several connections' batches at once; its `Call`
//! carries the client's id (kept in the shard's recorders, `ShardRecorders::client`, where no
//! `Call` reaches the timing), and only when the command is slow is the id looked up in the
//! server's client registry ([`SlowLog::set_client_lookup`]) for the address and name, as
//! Redis records them.
//!
//! Pipelined commands: a shard runs a connection's pipeline as one group (`exec::run_group`)
//! and reads the system clock twice for the whole group, which INFO commandstats shares
//! among its commands. The slow log and the latency monitor need each command's own
//! duration, but only of commands that reach their threshold, and a command can only be
//! that slow if its group was. So each command reads the cycle counter ([`SlowLog::cycles`]: the
//! TSC through `quanta`, a few instructions where `Instant::now()` is a vDSO call and a
//! conversion, which measured 3-5% of a pipelined GET's instructions), and only a group whose
//! wall time reached `Recorders::threshold_us` turns its commands' cycles into durations: each its
//! share of the group's wall time in proportion to its cycles ([`share`]), so the durations
//! add up to the group's time as the system clock measured it and none exceeds it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;

use abacus_protocol::{Arg, Bytes, Frame};
use parking_lot::Mutex;

/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
pub const ARGC_MAX: usize = 32;
pub const STRING_MAX: usize = 128;

pub struct Entry {
    pub id: u64,
    pub unix_s: u64,
    pub duration_us: u64,
    pub argv: Vec<Bytes>,
    pub addr: String,
    pub name: String,
}

struct Log {
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// An entry's client: its address and name (CLIENT LIST's `addr` and `name`).
pub type ClientLabel = (String, String);

/// Names a client by id, from the connections' registry: installed by the server at start,
/// so that the slow log sits below the connections.
pub type ClientLookup = Box<dyn Fn(u64) -> Option<ClientLabel> + Send + Sync>;

/// The slow log (see the file comment): one per engine.
pub struct SlowLog {
    /// `slowlog-log-slower-than` (µs; negative = off) and `slowlog-max-len`, from the
    /// configuration (`Recorders::configure`).
    threshold_us: AtomicI64,
    max_len: AtomicU64,
    log: Mutex<Log>,
    clients: OnceLock<ClientLookup>,
    /// The cycle counter of the per-command reads in a group: calibrated when the engine is
    /// built (its calibration takes milliseconds, which no command pays), falling back to
    /// the monotonic clock where there is no usable TSC (quanta checks for an invariant one).
    clock: quanta::Clock,
}

impl Default for SlowLog {
    /// Redis's defaults: 10 ms, 128 entries.
    fn default() -> SlowLog {
        SlowLog {
            threshold_us: AtomicI64::new(10_000),
            max_len: AtomicU64::new(128),
            log: Mutex::new(Log { entries: VecDeque::new(), next_id: 0 }),
            clients: OnceLock::new(),
            clock: quanta::Clock::new(),
        }
    }
}

impl SlowLog {
    /// Sets `slowlog-log-slower-than` and `slowlog-max-len`; a lowered length trims the log
    /// at once, as Redis's CONFIG SET does.
    pub fn configure(&self, threshold_us: i64, max_len: u64) {
        self.threshold_us.store(threshold_us, Ordering::Relaxed);
        self.max_len.store(max_len, Ordering::Relaxed);
        self.trim();
    }

    /// `slowlog-log-slower-than` (µs; negative = off).
    #[inline]
    pub fn threshold_us_setting(&self) -> i64 {
        self.threshold_us.load(Ordering::Relaxed)
    }

    /// Whether the slow log is on (commands must then be timed one by one).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.threshold_us_setting() >= 0
    }

    /// Whether a command that took `us` microseconds goes into the log.
    #[inline]
    pub fn is_slow(&self, us: u64) -> bool {
        let t = self.threshold_us_setting();
        t >= 0 && us >= t as u64
    }

    /// Installs how the entries of keyed commands name their clients (see [`ClientLookup`]);
    /// once (the server's start).
    pub fn set_client_lookup(&self, lookup: ClientLookup) {
        let _ = self.clients.set(lookup);
    }

    /// Logs a command that took `took`, if it is slow; `client` when known, else the client
    /// with id `client_id` (0 = unknown), looked up only then.
    #[inline]
    pub fn check(&self, took: std::time::Duration, args: &[Arg], client: Option<&dyn Fn() -> ClientLabel>, client_id: u64) {
        let us = took.as_secs().saturating_mul(1_000_000).saturating_add(u64::from(took.subsec_micros()));
        if self.is_slow(us) {
            let (addr, name) = match client {
                Some(c) => c(),
                None => self.lookup(client_id),
            };
            self.push(us, args, addr, name);
        }
    }

    #[cold]
    fn lookup(&self, client_id: u64) -> ClientLabel {
        let found = if client_id == 0 { None } else { self.clients.get().and_then(|f| f(client_id)) };
        found.unwrap_or_default()
    }

    /// The cycle counter now (units unknown: only ratios of differences are used, [`share`]).
    #[inline]
    pub fn cycles(&self) -> u64 {
        self.clock.raw()
    }

    fn push(&self, duration_us: u64, args: &[Arg], addr: String, name: String) {
        let argv = truncated_argv(args);
        let unix_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let max = self.max_len.load(Ordering::Relaxed) as usize;
        let mut log = self.log.lock();
        let id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(Entry { id, unix_s, duration_us, argv, addr, name });
        while log.entries.len() > max {
            log.entries.pop_back();
        }
    }

    /// SLOWLOG GET: the newest `count` entries, newest first.
    pub fn get(&self, count: usize) -> Frame {
        let log = self.log.lock();
        Frame::Array(
            log.entries
                .iter()
                .take(count)
                .map(|e| {
                    Frame::Array(vec![
                        Frame::Integer(e.id as i64),
                        Frame::Integer(e.unix_s as i64),
                        Frame::Integer(e.duration_us.min(i64::MAX as u64) as i64),
                        Frame::Array(e.argv.iter().map(|a| Frame::Bulk(a.clone())).collect()),
                        Frame::Bulk(Bytes::from(e.addr.clone())),
                        Frame::Bulk(Bytes::from(e.name.clone())),
                    ])
                })
                .collect(),
        )
    }

    pub fn len(&self) -> usize {
        self.log.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// SLOWLOG RESET (ids go on from where they were, as Redis's).
    pub fn reset(&self) {
        self.log.lock().entries.clear();
    }

    /// Drops the oldest entries past `slowlog-max-len`.
    fn trim(&self) {
        let max = self.max_len.load(Ordering::Relaxed) as usize;
        let mut log = self.log.lock();
        while log.entries.len() > max {
            log.entries.pop_back();
        }
    }
}

/// The lower threshold, in microseconds, of `slowlog-log-slower-than` (µs; negative: off)
/// and `latency-monitor-threshold` (ms; 0: off); `None` when both are off.
#[inline]
pub fn lower_threshold_us(slow_us: i64, monitor_ms: u64) -> Option<u64> {
    let slow = u64::try_from(slow_us).ok();
    let monitor = (monitor_ms > 0).then(|| monitor_ms.saturating_mul(1000));
    match (slow, monitor) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One command's share of its group's wall time `wall`: `cycles` of the group's
/// `cycles_total` (the sum of all its commands' cycles, so the shares add up to `wall`). A
/// counter that did not advance (`cycles_total` 0) gives each of the `n` commands an equal
/// share, as INFO commandstats does.
pub fn share(wall: std::time::Duration, cycles: u64, cycles_total: u64, n: u32) -> std::time::Duration {
    if cycles_total == 0 {
        return wall / n.max(1);
    }
    let cycles = cycles.min(cycles_total);
    if cycles == cycles_total {
        return wall;
    }
    let wall_ns = wall.as_nanos();
    let ns = match wall_ns.checked_mul(u128::from(cycles)) {
        Some(product) => product / u128::from(cycles_total),
        // Past 10^19 seconds of wall time: divide first (a share rounded down).
        None => wall_ns / u128::from(cycles_total) * u128::from(cycles),
    };
    // At most `wall`, so the seconds fit.
    std::time::Duration::new(u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX), (ns % 1_000_000_000) as u32)
}

/// The arguments as an entry keeps them (Redis's slowlogCreateEntry).
pub fn truncated_argv(args: &[Arg]) -> Vec<Bytes> {
    let argc = args.len().min(ARGC_MAX);
    let mut out = Vec::with_capacity(argc);
    for (j, a) in args.iter().take(argc).enumerate() {
        if argc != args.len() && j == argc - 1 {
            out.push(Bytes::from(format!("... ({} more arguments)", args.len() - argc + 1)));
        } else if a.len() > STRING_MAX {
            let mut b = a[..STRING_MAX].to_vec();
            b.extend_from_slice(format!("... ({} more bytes)", a.len() - STRING_MAX).as_bytes());
            out.push(Bytes::from(b));
        } else {
            out.push(Bytes::copy_from_slice(a));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&[u8]]) -> abacus_protocol::Args {
        abacus_protocol::Args::from_vec(v.iter().map(|a| Bytes::copy_from_slice(a)).collect())
    }

    #[test]
    fn shares_follow_the_cycles_and_add_up_to_the_wall_time() {
        use std::time::Duration;
        let wall = Duration::from_micros(30_000);
        // A group of three: the middle command took 8 of 10 cycles.
        let cycles = [1u64, 8, 1];
        let shares: Vec<Duration> = cycles.iter().map(|&c| share(wall, c, 10, 3)).collect();
        assert_eq!(shares, [Duration::from_micros(3_000), Duration::from_micros(24_000), Duration::from_micros(3_000)]);
        assert_eq!(shares.iter().sum::<Duration>(), wall);
        // Rounding down never makes the shares exceed the wall time.
        let odd: Vec<Duration> = [1u64, 1, 1].iter().map(|&c| share(Duration::from_nanos(100), c, 3, 3)).collect();
        assert!(odd.iter().sum::<Duration>() <= Duration::from_nanos(100));
        assert_eq!(odd[0], Duration::from_nanos(33));
        // A counter that did not move: equal shares.
        assert_eq!(share(wall, 0, 0, 3), Duration::from_micros(10_000));
        // Huge figures do not overflow.
        assert_eq!(share(Duration::from_secs(u64::MAX / 4), u64::MAX, u64::MAX, 1), Duration::from_secs(u64::MAX / 4));
        assert_eq!(share(wall, 5, 0, 0), wall);
        let huge = Duration::from_secs(u64::MAX / 4);
        let half = share(huge, u64::MAX / 2, u64::MAX, 2);
        assert!(half <= huge / 2 && half >= huge / 2 - huge / 1_000_000, "{half:?}");
    }

    #[test]
    fn the_threshold_is_the_lower_of_the_two_consumers() {
        assert_eq!(lower_threshold_us(10_000, 0), Some(10_000));
        assert_eq!(lower_threshold_us(10_000, 5), Some(5_000));
        assert_eq!(lower_threshold_us(3_000, 5), Some(3_000));
        assert_eq!(lower_threshold_us(-1, 5), Some(5_000));
        assert_eq!(lower_threshold_us(-1, 0), None);
        assert_eq!(lower_threshold_us(0, 100), Some(0));
        assert_eq!(lower_threshold_us(i64::MAX, u64::MAX), Some(i64::MAX as u64));
    }

    #[test]
    fn long_commands_are_truncated_as_redis_truncates_them() {
        let many: Vec<Vec<u8>> = (0..40).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(|v| v.as_slice()).collect();
        let out = truncated_argv(&args(&refs));
        assert_eq!(out.len(), 32);
        assert_eq!(&out[30][..], b"30");
        assert_eq!(&out[31][..], b"... (9 more arguments)");
        let long = vec![b'x'; 200];
        let out = truncated_argv(&args(&[b"set", b"k", &long]));
        assert_eq!(out[2].len(), 128 + "... (72 more bytes)".len());
        assert!(out[2].ends_with(b"... (72 more bytes)"));
    }
}
