//! The summarizer's server-wide state: the loaded rules, and per-feed and per-summary counts
//! (INFO `summarizer`) with the first rejected lines of each feed (SUMMARY.REJECTS).
//!
//! The rules are an `Arc` behind a lock taken once per SUMMARY.* command (never per line or
//! per key): a reload swaps the pointer, and batches already parsing keep the rules they
//! started with. The counts are plain atomics-free numbers under one mutex, touched once per
//! batch. The summaries themselves are ordinary keys in the shards (see `cmd/summary.rs`);
//! nothing here needs persisting: the rules come back from `summarizer-rules` at start-up,
//! and the exactly-once offsets of sources are keys too.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use abacus_summarizer::{Batch, Rules};

/// How many rejected lines each feed keeps (the first ones; all are counted).
pub const REJECTS_KEPT: usize = 100;

/// One server's summarizer state (see the file comment): a field of the `Server`.
#[derive(Default)]
pub struct Summarizer {
    rules: RwLock<Option<Arc<Rules>>>,
    stats: Mutex<Option<Stats>>,
    queue: Arc<Queue>,
}

/// A rejected line as SUMMARY.REJECTS shows it.
#[derive(Clone, Debug)]
pub struct Rejected {
    pub source: String,
    pub line_no: u64,
    pub reason: String,
    pub line: String,
}

#[derive(Default)]
pub struct FeedStats {
    pub events: u64,
    pub rejected: u64,
    /// Events of batches dropped because the queue was full (`when_full = "drop"`).
    pub dropped: u64,
    pub bytes: u64,
    pub batches: u64,
    pub rejects: VecDeque<Rejected>,
}

struct Stats {
    since: Instant,
    feeds: BTreeMap<String, FeedStats>,
    summaries: BTreeMap<String, u64>,
}

impl Summarizer {
    /// The loaded rules, if any.
    pub fn rules(&self) -> Option<Arc<Rules>> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads, checks and installs a rules file; on error nothing changes and the message names
    /// the file, the line and the reason.
    pub fn load(&self, path: &str) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read rules file '{path}': {e}"))?;
        self.install_text(&text).map_err(|e| format!("rules file '{path}': {e}"))
    }

    /// Checks and installs rules given as text.
    pub fn install_text(&self, text: &str) -> Result<(), String> {
        let rules = Rules::parse(text).map_err(|e| e.to_string())?;
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(rules));
        Ok(())
    }

    /// Loads `summarizer-rules` at start-up, if set.
    pub fn load_at_startup(&self, config: &abacus_engine::config::Config) -> Result<(), String> {
        let path = config.get(abacus_engine::param!("summarizer-rules"));
        if path.trim().is_empty() {
            return Ok(());
        }
        self.load(path.trim())
    }

    /// Counts a batch that was applied.
    pub fn record(&self, rules: &Rules, feed: usize, batch: &Batch, source: &str) {
        self.record_batch(rules, feed, batch, source, false)
    }

    /// Counts a batch dropped because the queue was full: its events as dropped, its rejected
    /// lines as rejected (they were parsed), no update of any summary.
    pub fn record_dropped(&self, rules: &Rules, feed: usize, batch: &Batch, source: &str) {
        self.record_batch(rules, feed, batch, source, true)
    }

    fn record_batch(&self, rules: &Rules, feed: usize, batch: &Batch, source: &str, dropped: bool) {
        let mut g = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        let stats = g.get_or_insert_with(|| Stats { since: Instant::now(), feeds: BTreeMap::new(), summaries: BTreeMap::new() });
        let f = stats.feeds.entry(rules.feeds[feed].name.clone()).or_default();
        if dropped {
            f.dropped += batch.events;
        } else {
            f.events += batch.events;
        }
        f.rejected += batch.rejected;
        f.bytes += batch.bytes;
        f.batches += 1;
        for r in &batch.rejects {
            if f.rejects.len() >= REJECTS_KEPT {
                break;
            }
            f.rejects.push_back(Rejected { source: source.to_string(), line_no: r.line_no, reason: r.reason.clone(), line: r.line.clone() });
        }
        for (si, n) in batch.updates.iter().enumerate() {
            if *n > 0 && !dropped {
                *stats.summaries.entry(rules.summaries[si].name.clone()).or_default() += n;
            }
        }
    }

    /// A feed's rejected count and kept lines.
    pub fn rejects(&self, feed: &str) -> (u64, Vec<Rejected>) {
        let g = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_ref().and_then(|s| s.feeds.get(feed)) {
            Some(f) => (f.rejected, f.rejects.iter().cloned().collect()),
            None => (0, Vec::new()),
        }
    }

    /// INFO's `summarizer` section.
    pub fn info(&self) -> String {
        use std::fmt::Write;
        let mut out = String::from("# Summarizer\r\n");
        let rules = self.rules();
        let _ = write!(out, "summarizer_rules_loaded:{}\r\n", u8::from(rules.is_some()));
        if let Some(r) = &rules {
            let _ = write!(out, "summarizer_feeds:{}\r\nsummarizer_summaries:{}\r\n", r.feeds.len(), r.summaries.len());
        }
        let _ = write!(out, "summarizer_queue_batches:{}\r\nsummarizer_queue_waiting:{}\r\n", self.queue.queued.load(Ordering::Relaxed), self.queue.waiting.load(Ordering::Relaxed));
        let g = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = g.as_ref() {
            let secs = s.since.elapsed().as_secs_f64().max(1e-3);
            for (name, f) in &s.feeds {
                let _ = write!(
                    out,
                    "feed_{name}:events={},rejected={},dropped={},bytes={},batches={},events_per_sec={:.0}\r\n",
                    f.events,
                    f.rejected,
                    f.dropped,
                    f.bytes,
                    f.batches,
                    f.events as f64 / secs
                );
            }
            for (name, n) in &s.summaries {
                let _ = write!(out, "summary_{name}:updates={n}\r\n");
            }
        }
        out.push_str("\r\n");
        out
    }
}

// ---------------------------------------------------------------------------------------
// The queue between parsers and shards

/// The queue's counts, shared with the places batches hold.
#[derive(Default)]
struct Queue {
    /// Parsed batches holding a place (waiting for their shards or being applied).
    queued: AtomicUsize,
    /// Parsed batches waiting for a place.
    waiting: AtomicUsize,
    /// Wakes a waiting batch when a place frees up (any worker thread's runtime).
    room: tokio::sync::Notify,
}

/// A batch's place in the queue, given back when it drops.
pub struct Place(Arc<Queue>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::AcqRel);
        self.0.room.notify_one();
    }
}

impl Summarizer {
    /// A place if fewer than `capacity` batches hold one.
    pub fn queue_try_enter(&self, capacity: usize) -> Option<Place> {
        let q = &self.queue;
        q.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < capacity).then_some(n + 1)).ok().map(|_| Place(q.clone()))
    }

    /// Waits for a place. Waiting holds no shard, so the batches holding places always finish.
    pub async fn queue_enter(&self, capacity: usize) -> Place {
        if let Some(p) = self.queue_try_enter(capacity) {
            return p;
        }
        // Counted while waiting, also when the wait is abandoned (the connection closed).
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.queue.waiting.fetch_add(1, Ordering::Relaxed);
        let waiting = Waiting(&self.queue.waiting);
        let place = loop {
            let notified = self.queue.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(p) = self.queue_try_enter(capacity) {
                break p;
            }
            notified.await;
        };
        drop(waiting);
        // A wake-up this waiter consumed may have been meant for room another can use too.
        self.queue.room.notify_one();
        place
    }
}
