//! The append-only log: every acknowledged write reaches it before its reply leaves.
//!
//! One path for every write. A command that changes data is logged as its handler's stated
//! effect by [`ShardLog::log_effect`] (its arguments, or the command it propagates as: absolute
//! expiries, SPOP's members...; this file never interprets a command), called from the
//! single place keyed commands run (`exec::exec_keyed`), and
//! the few server-level writes (FLUSHALL, FLUSHDB, SWAPDB, DEBUG POPULATE, evictions) call
//! [`ShardLog::log_command`] themselves. Log commands collect in the shard's buffer (its
//! [`ShardLog`], `Shard::log`) and leave it at a flush point that keeps the log in execution
//! order:
//! - the end of a batch on a shard (`exec::run_group`, on the shard's thread, before its
//!   replies are handed back): one record per batch; for a batch a connection runs on its
//!   own thread's shard, the commands are deferred instead ([`ShardLog::defer_pending`]): the
//!   connection yields once, so that the other connections woken in the same event-loop
//!   tick add theirs, and the first to resume writes them all as one record before any of
//!   them replies (one `write(2)` per tick instead of one per connection). Any other flush
//!   of the shard's buffer, and every lock of the shard (transactions, snapshots), writes
//!   deferred commands first, so the log keeps the shard's execution order;
//! - the end of an atomic multi-shard operation (a transaction, MSET over shards, FLUSHALL):
//!   the coordinator gathers the buffers of every shard it ran on into its `Locks` and writes
//!   them as ONE record before it releases the locks, so a crash never leaves half of it.
//!
//! A record is written (`write(2)`, to the page cache) before any reply of its commands is
//! sent, so a process crash (SIGKILL, panic, OOM kill) loses no acknowledged write in any
//! mode. What `appendfsync` decides is when the page cache reaches the disk:
//! - `always`: a connection that wrote waits for an fsync covering its records before
//!   sending its replies. One fsync thread syncs whatever has been written since the last
//!   one, so all the clients whose writes landed during an fsync share the next one: group
//!   commit, and throughput does not collapse to one write per disk flush;
//! - `everysec` (the default): the fsync thread syncs once a second;
//! - `no`: the kernel decides.
//!
//! Why one file for all shards and not one per shard: records of different shards touch
//! different keys, so their interleaving does not matter, but multi-shard records must sit
//! at one point of every shard's history; in a single file the order of appends is that
//! point. Appends take a mutex for one `write(2)` per record (a tick's batches), not per command.
//!
//! Where the log lives: in the server's [`Durability`](crate::durability::Durability), which
//! every shard's [`ShardLog`] holds a handle to; the command path reaches the log through the
//! shard it runs on, never through a static (see `durability.rs`). Each shard's buffer is that
//! shard's history in order: a shard runs on one thread, and its buffer is only touched with
//! the shard in hand (a job's `&mut Shard`, or the worker's own `Rc<RefCell<Shard>>` between
//! jobs). A command a coordinator runs on checked-out keys logs into a `ShardLog` of its own,
//! which goes into the coordinator's `Locks` (`exec::run_checked_out`).
//!
//! The log is split into segments (`log-NNNNNN.aof`): a snapshot starts a new segment at its
//! point in time, and once the snapshot is durable the manifest drops the older segments
//! (see `snapshot.rs`). That is log compaction, and it never blocks writes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use abacus_persist::log as fmt;
use abacus_protocol::Arg;

use crate::durability::Durability;

/// When the log reaches stable storage (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    Always = 0,
    EverySec = 1,
    No = 2,
}

impl Fsync {
    pub fn from_name(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// The open log segment.
struct Segment {
    name: String,
    file: Arc<File>,
    /// Bytes in this segment.
    bytes: u64,
    /// A record whose write failed (disk full...), retried before anything else is written.
    retry: Vec<u8>,
}

pub struct Aof {
    dir: PathBuf,
    segment: Mutex<Segment>,
    /// Bytes appended to the log since start (a log sequence number).
    appended: AtomicU64,
    /// Appended bytes known to be on stable storage.
    durable: AtomicU64,
    durable_tx: tokio::sync::watch::Sender<u64>,
    mode: AtomicU8,
    /// Wakes the fsync thread (appendfsync always).
    wake: (Mutex<bool>, Condvar),
    /// The last write or fsync error, if the last attempt failed (INFO aof_last_write_status),
    /// and the system's text for it alone (what Redis's MISCONF error quotes).
    pub error: Mutex<Option<(String, String)>>,
    /// Set while a record could not be written: write commands are refused (MISCONF) until
    /// the fsync thread manages to write it, so no further write goes unlogged.
    failed: AtomicBool,
    pub last_fsync_ms: AtomicU64,
    /// Where writes and fsyncs report their stalls (LATENCY `aof-write`, `aof-fsync*`).
    recorders: Arc<crate::recorders::Recorders>,
}

/// Capacity a shard's pending buffer keeps between batches.
const PENDING_KEEP_BYTES: usize = 64 * 1024;

/// The segment file name for sequence number `seq`.
pub fn segment_name(seq: u64) -> String {
    format!("log-{seq:06}.aof")
}

/// Sequence number of a segment or snapshot file name (`log-000012.aof` -> 12).
pub fn file_seq(name: &str) -> u64 {
    name.trim_start_matches(|c: char| !c.is_ascii_digit()).split('.').next().and_then(|d| d.parse().ok()).unwrap_or(0)
}

fn open_segment(dir: &Path, name: &str) -> Result<Segment, String> {
    let path = dir.join(name);
    let mut file = OpenOptions::new().create(true).append(true).read(true).open(&path).map_err(|e| format!("cannot open log {}: {e}", path.display()))?;
    let mut bytes = file.metadata().map_err(|e| format!("cannot stat {}: {e}", path.display()))?.len();
    if bytes == 0 {
        file.write_all(fmt::MAGIC).and_then(|_| file.sync_data()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        bytes = fmt::MAGIC.len() as u64;
    }
    Ok(Segment { name: name.to_string(), file: Arc::new(file), bytes, retry: Vec::new() })
}

impl Aof {
    /// Opens (or creates) segment `name` in `dir`. The caller starts [`Aof::fsync_loop`] on a
    /// thread of its own and turns logging on (`Durability::start_log`).
    pub fn open(dir: &Path, name: &str, mode: Fsync, recorders: Arc<crate::recorders::Recorders>) -> Result<Aof, String> {
        let seg = open_segment(dir, name)?;
        let (durable_tx, _) = tokio::sync::watch::channel(0u64);
        Ok(Aof {
            dir: dir.to_path_buf(),
            segment: Mutex::new(seg),
            appended: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            durable_tx,
            mode: AtomicU8::new(mode as u8),
            wake: (Mutex::new(false), Condvar::new()),
            error: Mutex::new(None),
            failed: AtomicBool::new(false),
            last_fsync_ms: AtomicU64::new(crate::clock::now_ms()),
            recorders,
        })
    }

    pub fn mode(&self) -> Fsync {
        match self.mode.load(Ordering::Relaxed) {
            0 => Fsync::Always,
            1 => Fsync::EverySec,
            _ => Fsync::No,
        }
    }

    pub fn set_mode(&self, mode: Fsync) {
        self.mode.store(mode as u8, Ordering::Relaxed);
        self.kick();
    }

    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Bytes in the current segment, and its name.
    pub fn segment(&self) -> (String, u64) {
        let s = self.segment.lock().unwrap_or_else(|p| p.into_inner());
        (s.name.clone(), s.bytes)
    }

    /// Whether writes are refused because the log cannot be written (the MISCONF error).
    pub fn refusing_writes(&self) -> Option<String> {
        if self.failed.load(Ordering::Relaxed) {
            Some(format!("MISCONF Errors writing to the AOF file: {}", self.error_text(true)))
        } else {
            None
        }
    }

    /// Writes `payload` (log commands) as one record. Returns the log position after it.
    ///
    /// If the write fails (disk full...), the record is kept and retried by the fsync thread
    /// every second, and write commands are refused meanwhile; with `appendfsync always`,
    /// whose clients were promised durability before the reply, the process exits instead,
    /// as Redis does.
    pub fn append(&self, payload: &[u8]) -> u64 {
        if payload.is_empty() {
            return self.appended();
        }
        let mut rec = Vec::with_capacity(fmt::HEADER_BYTES + payload.len());
        rec.extend_from_slice(&fmt::header(payload));
        rec.extend_from_slice(payload);
        let mut seg = self.segment.lock().unwrap_or_else(|p| p.into_inner());
        if !seg.retry.is_empty() {
            // Order matters: the failed record goes first.
            let mut all = std::mem::take(&mut seg.retry);
            all.extend_from_slice(&rec);
            rec = all;
        }
        self.write_locked(&mut seg, &rec)
    }

    /// Writes a buffer of log commands that starts with [`fmt::HEADER_BYTES`] reserved bytes
    /// as one record: the header is filled in place, no copy of the commands is made.
    pub fn append_framed(&self, buf: &mut [u8]) -> u64 {
        if buf.len() <= fmt::HEADER_BYTES {
            return self.appended();
        }
        let header = fmt::header(&buf[fmt::HEADER_BYTES..]);
        buf[..fmt::HEADER_BYTES].copy_from_slice(&header);
        let mut seg = self.segment.lock().unwrap_or_else(|p| p.into_inner());
        if seg.retry.is_empty() {
            return self.write_locked(&mut seg, buf);
        }
        let mut all = std::mem::take(&mut seg.retry);
        all.extend_from_slice(buf);
        self.write_locked(&mut seg, &all)
    }

    /// Writes `rec` to the segment (one write(2)) with the segment lock held.
    fn write_locked(&self, seg: &mut Segment, rec: &[u8]) -> u64 {
        let started = self.recorders.latency.timer();
        let written = (&*seg.file).write_all(rec);
        self.recorders.latency.sample_since("aof-write", started);
        match written {
            Ok(()) => {
                seg.bytes += rec.len() as u64;
                let at = self.appended.fetch_add(rec.len() as u64, Ordering::AcqRel) + rec.len() as u64;
                self.clear_failure();
                if self.mode() == Fsync::Always {
                    self.kick();
                }
                at
            }
            Err(e) => {
                // A partial write leaves a torn record; cut it off so the retry starts clean.
                let _ = seg.file.set_len(seg.bytes);
                self.fail("writing the append-only log failed", &e);
                seg.retry = rec.to_vec();
                self.appended()
            }
        }
    }

    fn fail(&self, what: &str, e: &std::io::Error) {
        let msg = format!("{what}: {e}");
        tracing::error!("{msg}");
        if self.mode() == Fsync::Always {
            tracing::error!("cannot keep the promise of appendfsync always: exiting");
            std::process::exit(1);
        }
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some((msg, os_error_text(e)));
        self.failed.store(true, Ordering::Release);
    }

    /// The last error: the system's text alone (`os`, as Redis quotes it) or the full message.
    fn error_text(&self, os: bool) -> String {
        let e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        e.as_ref().map(|(msg, os_text)| if os { os_text.clone() } else { msg.clone() }).unwrap_or_default()
    }

    fn clear_failure(&self) {
        if self.failed.swap(false, Ordering::AcqRel) {
            tracing::warn!("the append-only log is writable again");
            *self.error.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    /// Whether the log is failing (writes are refused until it recovers).
    pub fn failing(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Retries a failed write and then fsyncs (the fsync thread, every second, and shutdown):
    /// the log is healthy again once both succeed. Returns whether it is.
    fn recover(&self) -> bool {
        {
            let mut seg = self.segment.lock().unwrap_or_else(|p| p.into_inner());
            if !seg.retry.is_empty() {
                let rec = std::mem::take(&mut seg.retry);
                self.write_locked(&mut seg, &rec);
                if !seg.retry.is_empty() {
                    return false;
                }
            }
        }
        self.sync_now()
    }

    /// What a clean stop needs: every record written (retrying a failed one) and fsynced.
    /// An error means acknowledged writes are only in memory: the caller must not exit.
    pub fn finish(&self) -> Result<(), String> {
        if self.recover() {
            Ok(())
        } else {
            Err(self.error_text(false))
        }
    }

    fn kick(&self) {
        let (m, cv) = &self.wake;
        *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_one();
    }

    /// Waits until everything appended up to `at` is on stable storage (appendfsync always).
    pub async fn wait_durable(&self, at: u64) {
        if self.durable() >= at {
            return;
        }
        let mut rx = self.durable_tx.subscribe();
        let _ = rx.wait_for(|&d| d >= at).await;
    }

    /// fsyncs what has been appended so far; returns once it is durable (true), or false if
    /// the fsync failed.
    pub fn sync_now(&self) -> bool {
        let (file, upto, retry_pending) = {
            let seg = self.segment.lock().unwrap_or_else(|p| p.into_inner());
            (seg.file.clone(), self.appended(), !seg.retry.is_empty())
        };
        let started = self.recorders.latency.timer();
        if let Err(e) = file.sync_data() {
            self.fail("fsync of the append-only log failed", &e);
            return false;
        }
        // LATENCY: Redis's event names for the log's fsync under each policy.
        let event = if self.mode() == Fsync::Always { "aof-fsync-always" } else { "aof-fsync" };
        self.recorders.latency.sample_since(event, started);
        self.last_fsync_ms.store(crate::clock::now_ms(), Ordering::Relaxed);
        if self.durable.fetch_max(upto, Ordering::AcqRel) < upto {
            self.durable_tx.send_replace(upto);
        }
        if !retry_pending {
            // An earlier fsync failure is over once one succeeds.
            self.clear_failure();
        }
        !retry_pending
    }

    /// The fsync thread's loop (see the file comment); never returns.
    pub fn fsync_loop(&self) {
        loop {
            let mode = self.mode();
            {
                let (m, cv) = &self.wake;
                let mut woken = m.lock().unwrap_or_else(|p| p.into_inner());
                if !*woken {
                    let wait = if mode == Fsync::Always { Duration::from_millis(100) } else { Duration::from_secs(1) };
                    woken = cv.wait_timeout(woken, wait).unwrap_or_else(|p| p.into_inner()).0;
                }
                *woken = false;
            }
            if self.failed.load(Ordering::Acquire) {
                self.recover();
            } else if self.mode() != Fsync::No && self.appended() > self.durable() {
                self.sync_now();
            }
        }
    }

    /// Creates segment `name` (durably, with its magic) for [`Aof::rotate`]; on error no file
    /// is left behind. Refused while the log is failing: a record waiting for its retry
    /// belongs before the new segment's point in time.
    pub fn prepare_segment(&self, name: &str) -> Result<NewSegment, String> {
        if self.failing() {
            return Err(format!("the append-only log cannot be written ({})", self.error_text(true)));
        }
        let seg = open_segment(&self.dir, name).and_then(|s| abacus_persist::manifest::sync_dir(&self.dir).map(|_| s));
        match seg {
            Ok(s) => Ok(NewSegment(s)),
            Err(e) => {
                let _ = std::fs::remove_file(self.dir.join(name));
                Err(e)
            }
        }
    }

    /// Starts the new segment: everything appended from now on goes there. The old segment
    /// is fsynced first, so it is complete on disk (if that fails, the switch still happens:
    /// the manifest names both segments, and the failure is reported like any fsync's).
    /// Callers hold every shard (no write is running), so the switch is a point in every
    /// shard's history.
    pub fn rotate(&self, new: NewSegment) {
        let mut seg = self.segment.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = seg.file.sync_data() {
            self.fail("fsync of the append-only log failed", &e);
        }
        *seg = new.0;
    }
}

/// A segment created for a coming [`Aof::rotate`].
pub struct NewSegment(Segment);

/// The system's text for an I/O error without Rust's " (os error N)" suffix: what Redis's
/// MISCONF reply quotes (`strerror`).
fn os_error_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// A shard's part of durability: its log commands not yet written, and its writes not yet
/// counted for the `save` schedule. Lives in the shard (`Shard::log`), so every path that
/// runs a write reaches it through the shard it writes to; holds the server's
/// [`Durability`] to write records to.
pub struct ShardLog {
    durability: Arc<Durability>,
    /// Log commands of the work run on this shard, not yet written. At an `await` point it
    /// holds at most the deferred commands (see [`ShardLog::defer_pending`]).
    pending: Vec<u8>,
    /// Length of the prefix of `pending` that is deferred: commands that ran and whose
    /// connections wait (without having replied) for a later flush. 0 when none.
    deferred: usize,
    /// Time of the last command in `pending` after the last point where it may be cut
    /// ([`ShardLog::defer_pending`]); `None` makes the next command carry its time (see
    /// [`fmt::push_command`]).
    last_ms: Option<u64>,
    /// Writes counted since the last fold into the snapshots' counter
    /// ([`ShardLog::fold_changes`], each shard tick): a plain add per write.
    changes: u64,
}

impl ShardLog {
    pub fn new(durability: Arc<Durability>) -> ShardLog {
        ShardLog { durability, pending: Vec::new(), deferred: 0, last_ms: None, changes: 0 }
    }

    /// The server's durability handles.
    #[inline]
    pub fn durability(&self) -> &Arc<Durability> {
        &self.durability
    }

    /// Appends one command to this shard's pending log commands.
    pub fn log_command<A: AsRef<[u8]>>(&mut self, now_ms: u64, db: usize, args: &[A]) {
        self.log_command_iter(now_ms, db, args.len(), args.iter().map(|a| a.as_ref()));
    }

    /// [`ShardLog::log_command`] with the arguments from an iterator (the summarizer's direct
    /// writes).
    pub fn log_command_iter<'a, I: Iterator<Item = &'a [u8]> + Clone>(&mut self, now_ms: u64, db: usize, count: usize, args: I) {
        if self.durability.effects_on() {
            let p = &mut self.pending;
            if p.is_empty() {
                // Room for the record header, filled in at the flush: the record then goes
                // to the file from this buffer as it is, without another copy.
                p.extend_from_slice(&[0; fmt::HEADER_BYTES]);
                self.last_ms = None;
            }
            fmt::push_command_iter(p, &mut self.last_ms, now_ms, db as u16, count, args);
        }
    }

    /// Counts one write for the `save` schedule (folded in by [`ShardLog::fold_changes`]).
    #[inline]
    pub fn note_change(&mut self) {
        self.changes += 1;
    }

    /// Adds this shard's counted writes to the snapshots' counter (each shard tick, and at a
    /// snapshot's start).
    pub fn fold_changes(&mut self) {
        let n = std::mem::take(&mut self.changes);
        if n > 0 {
            if let Some(s) = self.durability.snapshots() {
                s.changes.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Writes this shard's pending log commands as one record; returns the log position after
    /// them (0 if nothing was pending or logging is off).
    pub fn flush_pending(&mut self) -> u64 {
        if self.pending.is_empty() || !self.durability.effects_on() {
            return 0;
        }
        let at = self.durability.write_record(&mut self.pending, true, false);
        self.pending.clear();
        self.deferred = 0;
        // A big batch must not leave its buffer behind: it would count against maxmemory
        // for as long as the shard lives (Redis likewise keeps AOF buffers out of the way).
        if self.pending.capacity() > PENDING_KEEP_BYTES {
            self.pending.shrink_to(PENDING_KEEP_BYTES);
        }
        at
    }

    /// Leaves this shard's pending log commands for a later flush instead of writing them
    /// now: the connections woken in the same event-loop tick then share one record and one
    /// `write(2)` (the write's fixed cost in the kernel, not the bytes, is what the log costs
    /// at high request rates). The caller must not reply before [`ShardLog::flush_deferred`]
    /// (or any other flush of this shard's buffer) has run; until then the commands are not
    /// acknowledged, so a crash in between loses nothing that was promised.
    pub fn defer_pending(&mut self) {
        if self.durability.effects_on() {
            self.deferred = self.pending.len();
            // `take_pending` may cut the buffer here: what follows must not lean on what precedes.
            self.last_ms = None;
        }
    }

    /// Whether deferred log commands wait in this shard's buffer.
    #[inline]
    pub fn has_deferred(&self) -> bool {
        self.deferred > 0
    }

    /// Writes the deferred log commands, if another flush has not already.
    pub fn flush_deferred(&mut self) {
        if self.has_deferred() {
            self.flush_pending();
        }
    }

    /// Takes this shard's pending log commands (for a coordinator to write them with the rest
    /// of an atomic operation).
    pub fn take_pending(&mut self) -> Vec<u8> {
        if !self.durability.effects_on() {
            return Vec::new();
        }
        let deferred = std::mem::take(&mut self.deferred);
        let mut v = std::mem::take(&mut self.pending);
        if deferred > fmt::HEADER_BYTES {
            // Commands of other connections ran before the operation's: they are written first,
            // as their own record, and the operation takes only what came after them.
            let tail = v.split_off(deferred);
            self.durability.write_record(&mut v, true, false);
            return tail;
        }
        // Without the reserved header: the coordinator frames the whole operation.
        v.drain(..v.len().min(fmt::HEADER_BYTES));
        v
    }

    /// Logs a successful write as its handler stated it ([`Effect`]): its own arguments, the
    /// command it propagates as (absolute expiries, SPOP's chosen members...), or nothing. The
    /// log never interprets a command: what a write means is its handler's to say.
    ///
    /// [`Effect`]: abacus_commands::ctx::Effect
    #[inline]
    pub fn log_effect(&mut self, args: &[Arg], effect: &abacus_commands::ctx::Effect, now_ms: u64, db: usize) {
        if !self.durability.effects_on() {
            return;
        }
        match effect {
            abacus_commands::ctx::Effect::Args => self.log_command(now_ms, db, args),
            abacus_commands::ctx::Effect::As(command) => self.log_command(now_ms, db, command),
            abacus_commands::ctx::Effect::Nothing => {}
        }
    }
}
