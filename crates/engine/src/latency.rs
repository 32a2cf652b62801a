//! Latency: per-command histograms (INFO latencystats, LATENCY HISTOGRAM, the metrics
//! endpoint) and the latency monitor (LATENCY LATEST/HISTORY/GRAPH/DOCTOR), as Redis 7.0.
//!
//! Histograms. Every worker thread keeps one histogram per command it ran (next to its
//! INFO commandstats row, `stats.rs`), never shared, so recording is a handful of
//! instructions on a cache line only that thread writes: no atomics, no lock. Readers send a
//! job to every shard and merge the copies (`Histogram::merge`), as INFO commandstats does.
//! The buckets are log-linear: 16 sub-buckets per power of two of nanoseconds, so any value
//! is within 1/16 (6%) of its bucket's bounds, from 1 ns to 2^41 ns (36 minutes; longer
//! counts in the last bucket). That is 38 x 16 = 608 counters, 4.75 KiB per command per thread,
//! allocated the first time a thread runs the command. Redis's hdr_histogram keeps 2
//! significant digits; percentiles here are coarser (6%) but cost one `leading_zeros` and
//! an add to record, where an hdr histogram costs a logarithm-free but longer index.
//!
//! A pipelined batch measures its group once (`exec.rs`): each command of a run of one
//! command is recorded at the run's mean duration, so the histogram's count is exact and
//! its values are per-command means within one batch.
//!
//! The latency monitor ([`LatencyMonitor`], one per engine: `Recorders::latency`, built at
//! start). Code that may stall (a command over the threshold, a table growth step, a
//! snapshot, a log write or fsync, an eviction or expiry cycle) calls
//! [`LatencyMonitor::sample`]`(event, ms)`; when `latency-monitor-threshold` is set and the
//! time reaches it, the event keeps the sample in a ring of the last [`HISTORY_LEN`] (one
//! per second: samples within one second keep their maximum), plus its all-time maximum.
//! Samples are rare by construction (only stalls past a threshold of milliseconds), so one
//! mutex is enough. The monitor keeps its settings (`latency-monitor-threshold`,
//! `latency-tracking`) in atomics of its own, set from the configuration
//! (`Recorders::configure`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// Sub-buckets per power of two (log2).
const SUB_BITS: u32 = 4;
const SUBS: usize = 1 << SUB_BITS;
/// Powers of two covered: values up to 2^(POWERS-1+SUB_BITS) ns.
const POWERS: usize = 37;
pub const BUCKETS: usize = POWERS * SUBS + SUBS;

/// One command's latency histogram, in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    pub total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: Box::new([0; BUCKETS]), total: 0 }
    }
}

/// The bucket of a value: values below 16 have a bucket each; above, the power of two and
/// the next 4 bits.
#[inline]
fn bucket_of(ns: u64) -> usize {
    if ns < SUBS as u64 {
        return ns as usize;
    }
    let power = 63 - ns.leading_zeros(); // >= SUB_BITS
    let shift = power - SUB_BITS;
    let sub = ((ns >> shift) as usize) & (SUBS - 1);
    let i = (shift as usize + 1) * SUBS + sub;
    i.min(BUCKETS - 1)
}

/// The highest value in bucket `i` (what a percentile in it reports, as hdr_histogram's
/// `highest_equivalent_value`).
fn bucket_high(i: usize) -> u64 {
    if i < SUBS {
        return i as u64;
    }
    let shift = (i / SUBS - 1) as u32;
    let sub = (i % SUBS) as u64;
    ((SUBS as u64 + sub + 1) << shift) - 1
}

impl Histogram {
    /// Counts `n` calls that took `ns` nanoseconds each.
    #[inline]
    pub fn record(&mut self, ns: u64, n: u64) {
        self.counts[bucket_of(ns)] += n;
        self.total += n;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        self.total += other.total;
    }

    /// The value (ns) at percentile `p` (0..=100): the highest value of the bucket holding the
    /// ceil(p% of total)-th call, as hdr_value_at_percentile; 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i);
            }
        }
        bucket_high(BUCKETS - 1)
    }

    /// LATENCY HISTOGRAM's `histogram_usec`: (upper bound in µs, cumulative calls) for the
    /// powers of two of microseconds (1, 2, 4, ...) whose cumulative count grew, as Redis's
    /// log iteration from 1024 ns in steps of 2 (values under 1 µs count in the first).
    pub fn cumulative_usec(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut cumulative = 0u64;
        let mut previous = 0u64;
        let mut i = 0;
        // Bucket bounds 1024 * 2^k - 1 ns; Redis reports them as (1024 * 2^k) / 1000 µs.
        let mut k = 0u32;
        while i < BUCKETS && k < 40 {
            let limit_ns = 1024u64 << k; // exclusive upper bound of this step
            while i < BUCKETS && bucket_high(i) < limit_ns {
                cumulative += self.counts[i];
                i += 1;
            }
            if cumulative > previous {
                out.push((limit_ns / 1000, cumulative));
            }
            previous = cumulative;
            if cumulative == self.total {
                break;
            }
            k += 1;
        }
        out
    }

    /// The Prometheus buckets: (upper bound in seconds, cumulative count) at powers of two
    /// of microseconds from 1 µs to about 1 s.
    pub fn prometheus_buckets(&self) -> Vec<(f64, u64)> {
        let mut out = Vec::new();
        let mut cumulative = 0u64;
        let mut i = 0;
        for k in 0..21u32 {
            let limit_ns = 1000u64 << k;
            while i < BUCKETS && bucket_high(i) < limit_ns {
                cumulative += self.counts[i];
                i += 1;
            }
            out.push(((1u64 << k) as f64 / 1e6, cumulative));
        }
        out
    }
}

/// Parses `latency-tracking-info-percentiles` as Redis 7.0: the value split at every single
/// space ("" = none), each part a number (strtold's: hexadecimal integers too) from 0 to 100,
/// with Redis's two error texts.
pub fn parse_percentiles(value: &str) -> Result<Vec<f64>, String> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for w in value.split(' ') {
        let hex = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X"));
        let parsed = match hex {
            Some(digits) if !digits.is_empty() => u64::from_str_radix(digits, 16).ok().map(|v| v as f64),
            _ => w.parse::<f64>().ok(),
        };
        let p = match parsed {
            Some(p) if !p.is_nan() => p,
            _ => return Err("Invalid latency-tracking-info-percentiles parameters".into()),
        };
        if !(0.0..=100.0).contains(&p) {
            return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
        }
        out.push(p);
    }
    Ok(out)
}

/// A percentile as Redis prints it (`%f`, trailing zeros and dot trimmed): 50, 99, 99.9.
pub fn format_percentile(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// The canonical form of `latency-tracking-info-percentiles` (CONFIG GET).
pub fn canonical_percentiles(value: &str) -> Result<String, String> {
    Ok(parse_percentiles(value)?.iter().map(|p| format_percentile(*p)).collect::<Vec<_>>().join(" "))
}

/// INFO's `# Latencystats` section from merged histograms.
pub fn info_section(hists: &BTreeMap<&'static str, Histogram>, percentiles: &[f64]) -> String {
    use std::fmt::Write;
    let mut out = String::from("# Latencystats\r\n");
    for (name, h) in hists {
        if h.total == 0 {
            continue;
        }
        let _ = write!(out, "latency_percentiles_usec_{name}:");
        for (j, p) in percentiles.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            let _ = write!(out, "p{}={:.3}", format_percentile(*p), h.percentile(*p) as f64 / 1000.0);
        }
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out
}

/// Samples an event keeps (Redis's LATENCY_TS_LEN).
pub const HISTORY_LEN: usize = 160;

/// One event's samples: (unix seconds, milliseconds), oldest first.
#[derive(Default, Clone)]
pub struct Event {
    pub samples: std::collections::VecDeque<(u64, u64)>,
    pub max_ms: u64,
}

fn unix_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The latency monitor and the `latency-tracking` switch (see the file comment).
pub struct LatencyMonitor {
    /// `latency-tracking` (read on every batch).
    tracking: AtomicBool,
    /// `latency-monitor-threshold` in milliseconds (0 = off).
    threshold_ms: AtomicU64,
    events: Mutex<BTreeMap<&'static str, Event>>,
}

impl Default for LatencyMonitor {
    /// Redis's defaults: tracking on, the monitor off.
    fn default() -> LatencyMonitor {
        LatencyMonitor { tracking: AtomicBool::new(true), threshold_ms: AtomicU64::new(0), events: Mutex::new(BTreeMap::new()) }
    }
}

impl LatencyMonitor {
    /// Sets `latency-tracking` and `latency-monitor-threshold`.
    pub fn configure(&self, tracking: bool, threshold_ms: u64) {
        self.tracking.store(tracking, Ordering::Relaxed);
        self.threshold_ms.store(threshold_ms, Ordering::Relaxed);
    }

    /// `latency-tracking`: commands' durations go into their histograms.
    #[inline]
    pub fn tracking(&self) -> bool {
        self.tracking.load(Ordering::Relaxed)
    }

    /// `latency-monitor-threshold` (ms; 0 = off).
    #[inline]
    pub fn threshold_ms(&self) -> u64 {
        self.threshold_ms.load(Ordering::Relaxed)
    }

    /// Records that `event` took `ms` milliseconds, if the monitor is on and it reached the
    /// threshold (Redis's latencyAddSampleIfNeeded).
    #[inline]
    pub fn sample(&self, event: &'static str, ms: u64) {
        let threshold = self.threshold_ms();
        if threshold > 0 && ms >= threshold {
            self.add_sample(event, ms, unix_s());
        }
    }

    /// [`LatencyMonitor::sample`] of a duration.
    #[inline]
    pub fn sample_duration(&self, event: &'static str, took: std::time::Duration) {
        self.sample(event, took.as_secs().saturating_mul(1000).saturating_add(u64::from(took.subsec_millis())));
    }

    /// The start of a timed event when the monitor is on; `None` (no clock read) when it is off.
    #[inline]
    pub fn timer(&self) -> Option<std::time::Instant> {
        (self.threshold_ms() > 0).then(std::time::Instant::now)
    }

    /// Ends a [`LatencyMonitor::timer`]: samples `event` if it ran long enough.
    #[inline]
    pub fn sample_since(&self, event: &'static str, started: Option<std::time::Instant>) {
        if let Some(t) = started {
            self.sample_duration(event, t.elapsed());
        }
    }

    fn add_sample(&self, event: &'static str, ms: u64, now_s: u64) {
        let mut events = self.events.lock();
        let e = events.entry(event).or_default();
        e.max_ms = e.max_ms.max(ms);
        if let Some(last) = e.samples.back_mut() {
            if last.0 == now_s {
                last.1 = last.1.max(ms);
                return;
            }
        }
        if e.samples.len() == HISTORY_LEN {
            e.samples.pop_front();
        }
        e.samples.push_back((now_s, ms));
    }

    /// Every event with samples.
    pub fn events(&self) -> BTreeMap<&'static str, Event> {
        self.events.lock().iter().filter(|(_, e)| !e.samples.is_empty()).map(|(k, v)| (*k, v.clone())).collect()
    }

    /// LATENCY RESET: clears the named events (all when none); how many had samples.
    pub fn reset(&self, names: &[&[u8]]) -> usize {
        let mut events = self.events.lock();
        if names.is_empty() {
            let n = events.values().filter(|e| !e.samples.is_empty()).count();
            events.clear();
            return n;
        }
        let mut n = 0;
        for name in names {
            let key = events.keys().find(|k| k.as_bytes() == *name).copied();
            if let Some(k) = key {
                if events.remove(k).is_some_and(|e| !e.samples.is_empty()) {
                    n += 1;
                }
            }
        }
        n
    }

    /// LATENCY DOCTOR's report.
    pub fn doctor(&self) -> String {
        doctor(self.threshold_ms(), &self.events())
    }
}

/// Events the server reports, with what each one times (LATENCY DOCTOR's advice).
pub const EVENT_ADVICE: &[(&str, &str)] = &[
    ("command", "a slow command (not flagged fast): check SLOWLOG GET for which one and its arguments; prefer commands of constant cost, or smaller ranges and batches."),
    ("fast-command", "a command of constant cost took long: the machine may be overloaded or swapping (check the swap and the CPU steal time)."),
    ("table-growth", "a hash table growth step: Abacus grows tables in segments, so a long step means a very large segment; check memory pressure."),
    ("snapshot", "a snapshot's work on a worker thread: consider a less frequent `save` schedule."),
    ("aof-write", "writing the append-only log: the disk is slow or busy."),
    ("aof-fsync-always", "an fsync of the append-only log under `appendfsync always`: consider `everysec`, or a faster disk."),
    ("eviction-cycle", "evicting keys to stay under maxmemory: consider a larger maxmemory or a cheaper policy."),
    ("expire-cycle", "the active expiry cycle: many keys expire at once; spread their TTLs."),
];

/// LATENCY DOCTOR's report on `events`, with the monitor's threshold `threshold` (ms).
fn doctor(threshold: u64, events: &BTreeMap<&'static str, Event>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if threshold == 0 && events.is_empty() {
        out.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Abacus instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n");
        return out;
    }
    if events.is_empty() {
        out.push_str("Dave, no latency spike was observed during the lifetime of this Abacus instance, not in the slightest bit. I honestly think you ought to sleep tonight.\n");
        return out;
    }
    out.push_str("Dave, I have observed latency spikes in this Abacus instance. You don't mind talking about it, do you Dave?\n\n");
    for (i, (name, e)) in events.iter().enumerate() {
        let n = e.samples.len().max(1) as u64;
        let avg = e.samples.iter().map(|s| s.1).sum::<u64>() / n;
        let first = e.samples.front().map_or(0, |s| s.0);
        let last = e.samples.back().map_or(0, |s| s.0);
        let period = if e.samples.len() > 1 { (last - first) / (e.samples.len() as u64 - 1) } else { 0 };
        let _ = writeln!(
            out,
            "{}. {name}: {} latency spikes (average {avg}ms, mean deviation {}ms, period {period} sec). Worst all time event {}ms.",
            i + 1,
            e.samples.len(),
            e.samples.iter().map(|s| s.1.abs_diff(avg)).sum::<u64>() / n,
            e.max_ms
        );
    }
    out.push_str("\nI have a few advices for you:\n\n");
    for name in events.keys() {
        let advice = EVENT_ADVICE.iter().find(|(n, _)| n == name).map_or("an event Abacus has no advice for.", |(_, a)| a);
        let _ = writeln!(out, "- {name}: {advice}");
    }
    out
}

/// LATENCY GRAPH's ASCII chart of an event's samples (Redis's layout: a title line, then
/// columns of `#` scaled between the minimum and maximum, then each sample's age).
pub fn graph(name: &str, e: &Event) -> String {
    use std::fmt::Write;
    let now = unix_s();
    let min = e.samples.iter().map(|s| s.1).min().unwrap_or(0);
    let max = e.samples.iter().map(|s| s.1).max().unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(out, "{name} - high {max} ms, low {min} ms (all time high {} ms)", e.max_ms);
    out.push_str(&"-".repeat(80));
    out.push('\n');
    const ROWS: u64 = 4;
    for row in (1..=ROWS).rev() {
        for s in &e.samples {
            let level = if max == min { ROWS } else { 1 + (s.1 - min) * (ROWS - 1) / (max - min) };
            out.push(if level >= row { '#' } else { ' ' });
        }
        out.push('\n');
    }
    // Each sample's age, written vertically ("12s" down a column).
    let ages: Vec<String> = e.samples.iter().map(|s| format_age(now.saturating_sub(s.0))).collect();
    let height = ages.iter().map(|a| a.len()).max().unwrap_or(0);
    for r in 0..height {
        for a in &ages {
            out.push(a.as_bytes().get(r).map_or(' ', |b| *b as char));
        }
        out.push('\n');
    }
    out
}

fn format_age(s: u64) -> String {
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else if s < 86400 {
        format!("{}h", s / 3600)
    } else {
        format!("{}d", s / 86400)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_bound_their_values_within_a_sixteenth() {
        for ns in [0u64, 1, 15, 16, 17, 31, 32, 100, 1000, 1023, 1024, 999_999, 1_000_000, 123_456_789, 1 << 39] {
            let i = bucket_of(ns);
            assert!(bucket_high(i) >= ns, "{ns} in bucket {i} high {}", bucket_high(i));
            if i > 0 {
                assert!(bucket_high(i - 1) < ns, "{ns}: previous bucket reaches it");
            }
            assert!(bucket_high(i) - ns <= ns / 16 + 1, "{ns}: bucket too wide");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_and_cumulative_counts() {
        let mut h = Histogram::default();
        h.record(1_000, 50); // 1 µs
        h.record(3_000, 49); // 3 µs
        h.record(100_000, 1); // 100 µs
        let p50 = h.percentile(50.0);
        assert!((1_000..=1_063).contains(&p50), "{p50}");
        let p99 = h.percentile(99.0);
        assert!((3_000..=3_190).contains(&p99), "{p99}");
        let p999 = h.percentile(99.9);
        assert!((100_000..=106_300).contains(&p999), "{p999}");
        let mut other = Histogram::default();
        other.record(1_000, 1);
        h.merge(&other);
        assert_eq!(h.total, 101);
        // 1 µs = 1000 ns falls under 1024 ns: the first step; 3 µs under 4096 ns; 100 µs
        // under 131072 ns.
        assert_eq!(h.cumulative_usec(), vec![(1, 51), (4, 100), (131, 101)]);
    }

    #[test]
    fn percentile_parameter() {
        assert_eq!(canonical_percentiles("50 99 99.9").unwrap(), "50 99 99.9");
        assert_eq!(canonical_percentiles("").unwrap(), "");
        assert!(canonical_percentiles("101").is_err());
        assert!(canonical_percentiles("x").is_err());
        assert!(canonical_percentiles("1 ").is_err());
        assert!(canonical_percentiles("nan").is_err());
        assert_eq!(canonical_percentiles("0x10 1e1 +1").unwrap(), "16 10 1");
    }

    #[test]
    fn samples_in_one_second_keep_their_maximum_and_the_ring_is_bounded() {
        let m = LatencyMonitor::default();
        m.add_sample("test-event", 5, 100);
        m.add_sample("test-event", 9, 100);
        m.add_sample("test-event", 7, 100);
        let e = m.events()["test-event"].clone();
        assert_eq!(e.samples.iter().copied().collect::<Vec<_>>(), vec![(100, 9)]);
        for s in 0..(HISTORY_LEN as u64 + 10) {
            m.add_sample("test-event", 1, 200 + s);
        }
        let e = m.events()["test-event"].clone();
        assert_eq!(e.samples.len(), HISTORY_LEN);
        assert_eq!(e.max_ms, 9);
        assert_eq!(m.reset(&[b"test-event"]), 1);
        assert!(!m.events().contains_key("test-event"));
    }
}
