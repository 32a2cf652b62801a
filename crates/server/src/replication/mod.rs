//! Replication: a primary streams its writes to replicas, with Redis's handshake and commands.
//!
//! The stream. Every write already states its effect and reaches the log writer (`aof.rs`)
//! as a record, at flush points that keep every shard's execution order, and a multi-shard
//! operation as ONE record written while it still holds its shards. The replication stream is
//! exactly that sequence of records, taken where the log appends them ([`write_record`]):
//! one global order and one global offset, as Redis's. Each record
//! is re-encoded as RESP commands (a `SELECT` when the database changes, as Redis sends), and
//! a record of several commands written by a coordinator (a transaction, MSET over shards,
//! FLUSHALL...) is wrapped in `MULTI`/`EXEC`, so the replica applies it atomically too. The
//! offset counts those RESP bytes, so Redis's tools and Sentinel read offsets that mean what
//! they mean in Redis.
//!
//! The backlog (`repl-backlog-size`) keeps the last bytes of the stream, so a replica that
//! lost its link (or restarted, keeping its replication ID and offset) resumes with
//! `PSYNC replid offset` → `+CONTINUE`, receiving only what it missed. Each attached replica
//! also has its own queue of stream bytes (`client-output-buffer-limit replica`'s hard limit
//! bounds it), which holds what arrives while its full sync's snapshot is written and sent.
//!
//! A full sync is a snapshot as Abacus takes them (`snapshot.rs`: no fork, the primary keeps
//! serving, per-key copy before write): its point in time is taken with every shard held, and
//! the replication offset is read at that same point ([`snapshot_point`]), so the snapshot
//! plus the stream after that offset is exactly the primary's history. The file is sent as
//! Redis sends an RDB (`$<length>\r\n<bytes>`), then the replica's queue.
//!
//! The replica (`replica.rs`) receives the snapshot into a temporary file, checks it whole
//! (every block's checksum) before touching its data, then, holding every shard (no client
//! reads a half-loaded data set: they wait), drops its keys and loads the snapshot. It then
//! applies the stream through an ordinary connection (`Conn`) flagged as the master's: its
//! replies are discarded, it may write on a read-only replica, and commands take effect in
//! stream order (a connection's commands always do, see "Order across shards"). The offset
//! advances only by whole commands applied, and a replica never applies a write it could
//! later lose: everything it applies is in the primary's stream, which only ever grows.
//!
//! The primary learns what each replica applied from `REPLCONF ACK <offset>` (every second,
//! and in answer to `REPLCONF GETACK *`, which WAIT puts into the stream): WAIT, the `lag`
//! and `offset` of INFO's slave lines and `min-replicas-to-write` read those.
//!
//! Promotion (`REPLICAOF NO ONE`): the link stops between two applied chunks, the replication
//! ID moves to `master_replid2` (valid up to `second_repl_offset`), a new ID is drawn, and
//! the node's own writes start feeding the backlog, which holds the old primary's bytes
//! before them: a sibling replica repointed here continues with a partial resync.
//!
//! A real Redis (7.0) may be the primary (migration, `from_redis.rs`): its full sync is an
//! RDB file, which is decoded whole and checked before it replaces the data set; its stream
//! is applied like Abacus's, and a command that fails here is logged and counted in INFO
//! (`replica_apply_errors`), as a key of a type Abacus lacks is (`replica_sync_keys_skipped`).
//!
//! Restarts. A restarted node keeps its replication ID and offset (Redis keeps them in its
//! RDB's `repl-id`/`repl-offset` aux fields), so a restarted replica, or an old primary
//! repointed at the replica that replaced it, continues with a partial resync. A partial
//! resync from a wrong offset would corrupt data silently (a command applied twice or
//! skipped), so the offset comes from the log itself, never from a file written beside it:
//! the log holds position marks, log commands named [`POSITION_MARK`] with (replid, offset,
//! the stream's database), that recovery reads and never runs, and a node claims the
//! position of the last mark only if NO other command follows it in the log. Then the data
//! recovered is exactly the stream's first `offset` bytes; otherwise it claims nothing and
//! its next sync is a full one. Where the marks are written:
//! - a primary feeding a stream ends every log record with the offset after that record's
//!   stream bytes. [`write_record`] appends the record to the log and its RESP form to the
//!   backlog under the replication lock, so the log's order is the stream's (a `SELECT` in
//!   the stream depends on the record before it). One mark per record (per batch, not per
//!   command: some 60 bytes, in the same `write(2)`). `REPLCONF GETACK` (WAIT puts it in
//!   the stream) changes no data, but replicas count it: a mark of its own follows it, so
//!   a primary restarted after a WAIT is at the offset its replicas acknowledged and they
//!   continue (one small append per WAIT that asks replicas, beside a network round trip);
//! - a replica, after applying a chunk (holding the apply lock), writes the mark of the
//!   offset after it with the chunk's last log commands. The chunk's effects on other
//!   shards are already in the log (a record is written before its command replies, and
//!   the chunk's replies are in), so a mark never precedes data it counts. A crash in the
//!   middle of a chunk leaves commands after the last mark: full sync;
//! - a new log segment (a snapshot's point in time, every shard held) starts with the
//!   node's position, when it is exact then (a replica with no chunk being applied), since
//!   the older segments and their marks go once the snapshot is durable.
//!
//! Whatever `appendfsync` lets a crash of the machine cut off, it cuts off the log's tail:
//! the recovered data is a prefix of the log, and the mark rule holds for any prefix. A
//! restored node starts with an empty backlog at its offset and feeds its writes into the
//! stream from then on (as Redis creates its backlog on a restart with replication info),
//! so a replica at exactly that offset continues too. PSYNC then follows Redis's rule: the
//! new primary continues a request of its previous ID up to `second_repl_offset`, i.e. when
//! the old primary had nothing the new one lacks; otherwise the old primary's extra history
//! is dropped by a full sync. A node with `appendonly no` (snapshots only) has no marks:
//! after a restart it full-syncs.
//!
//! Chained. A replica serves PSYNC too (while its own link is up, else Redis's
//! NOMASTERLINK): it shares its primary's replication ID and forwards the stream byte for
//! byte, since what it applied goes to its backlog and to its sub-replicas' queues
//! ([`feed_applied`]); its own writes (the applied commands' log records) never feed the
//! stream. A partial resync works as on a primary. A full sync needs a snapshot whose
//! point in time is a point of the primary's stream: the sub-replica's full sync holds the
//! apply lock while it starts the snapshot (`sync_point`), and a snapshot started otherwise
//! on a replica (its schedule) leaves waiting sub-replicas for the next one. The stream
//! after that point is the primary's, which selects no database again: the database it is
//! in goes as a third word of `+FULLRESYNC replid offset db` (Redis's RDB carries it as
//! the `repl-stream-db` aux field; a Redis replica reads the first two words and would not
//! read our snapshot anyway). A replica that full-syncs or whose primary changes its ID
//! disconnects its sub-replicas, which then sync again.
//!
//! Not built: diskless loading (a full sync always goes through a temporary file, also
//! when Redis sends it diskless), per-shard parallel streams, the position in a snapshot
//! file of its own (`appendonly no`), Redis Functions libraries and module types of a Redis
//! primary (skipped, reported). See docs/ARCHITECTURE.md, "Replication".

pub mod primary;
pub mod replica;
pub mod from_redis;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use abacus_persist::log as fmt;
use abacus_protocol::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use abacus_engine::shard::now_ms;

/// A replica's state as INFO shows it.
pub const WAIT_BGSAVE: u8 = 0;
pub const SEND_BULK: u8 = 1;
pub const ONLINE: u8 = 2;

/// What the primary knows of one attached replica.
pub struct ReplicaInfo {
    pub client_id: u64,
    pub ip: String,
    pub port: AtomicU64,
    pub state: AtomicU8,
    pub ack_offset: AtomicU64,
    pub ack_ms: AtomicU64,
    /// Stream bytes queued for it and not yet written.
    pub queued: AtomicU64,
    /// Set when its queue passed the limit: its task closes the link.
    pub overflowed: AtomicBool,
}

struct Attached {
    info: Arc<ReplicaInfo>,
    tx: mpsc::UnboundedSender<Bytes>,
}

/// A replica waiting for the next snapshot's point in time.
pub struct Waiter {
    pub info: Arc<ReplicaInfo>,
    pub tx: mpsc::UnboundedSender<Bytes>,
    /// Gets the offset, the snapshot's file name and, on a replica, the database the
    /// stream is in at that offset (a primary's stream selects one first).
    pub at: tokio::sync::oneshot::Sender<(u64, String, Option<usize>)>,
}

/// Where this node replicates from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterAddr {
    pub host: String,
    pub port: u16,
}

/// The replica side's link, as INFO and ROLE show it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LinkState {
    Connect,
    Connecting,
    Sync,
    Connected,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

struct Inner {
    replid: String,
    replid2: String,
    /// Offset up to which `replid2` is valid, plus one (Redis's `second_repl_offset`); -1.
    second_offset: i64,
    /// `master_repl_offset`: bytes of stream ever produced (or, on a replica, applied).
    offset: u64,
    backlog: VecDeque<u8>,
    backlog_cap: usize,
    /// Database of the last command in the stream; None forces a SELECT before the next.
    last_db: Option<u16>,
    replicas: Vec<Attached>,
    waiting: Vec<Waiter>,
    master: Option<MasterAddr>,
    /// Bumped by every REPLICAOF: a link task whose generation is stale stops.
    generation: u64,
    link: LinkState,
    link_down_since_ms: u64,
    last_io_ms: u64,
    /// The database the master's stream is in (kept across a partial resync).
    master_db: usize,
    /// The database the stream is in at a full sync's point (see [`set_stream_db`]).
    sync_db: usize,
}

pub struct Repl {
    inner: Mutex<Inner>,
    /// This node's local writes feed the stream (a primary that has had a replica).
    feeding: AtomicBool,
    replica: AtomicBool,
    /// Mirrors for cheap reads.
    offset: AtomicU64,
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// Wakes WAIT when an ACK arrives.
    pub acks: tokio::sync::Notify,
    /// Wakes the link task when REPLICAOF changes the master.
    pub relink: tokio::sync::Notify,
    /// Limit of a replica's queue (client-output-buffer-limit replica hard limit; 0 = none).
    pub queue_limit: AtomicU64,
    /// Held by the replica's link while it applies a chunk, and by REPLICAOF while it
    /// changes the role: the link stops only between two applied chunks.
    pub apply_lock: tokio::sync::Mutex<()>,
    /// Commands of the primary's stream that failed here (`from_redis::count_errors`).
    pub apply_errors: AtomicU64,
    /// Keys of a primary's full sync that were not loaded (types Abacus lacks).
    pub sync_keys_skipped: AtomicU64,
    /// Set by a sub-replica's full sync on a replica while it holds `apply_lock`: a
    /// snapshot's point in time is then between two applied chunks (see "Chained").
    pub sync_point: AtomicBool,
}

/// The replication state. Why a static and not a field of the `Server`: a process is one
/// replication node (one replication ID, one backlog, one link to a primary), and the state is
/// read where no server handle reaches yet (recovery's position before the server is built,
/// the effects stream's `Feed`, which durability holds as a trait object). Moving it into the
/// `Server` is the next step once those paths carry the handle.
static REPL: OnceLock<Repl> = OnceLock::new();

/// The smallest backlog (Redis's `CONFIG_REPL_BACKLOG_MIN_SIZE`).
const MIN_BACKLOG_BYTES: usize = 16 * 1024;

pub fn new_replid() -> String {
    format!("{:040x}", rand::random::<u128>() ^ ((rand::random::<u64>() as u128) << 32))[..40].to_string()
}

/// The process's replication state.
pub fn state() -> &'static Repl {
    REPL.get_or_init(|| Repl {
        inner: Mutex::new(Inner {
            replid: new_replid(),
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 0,
            backlog: VecDeque::new(),
            backlog_cap: 1 << 20,
            last_db: None,
            replicas: Vec::new(),
            waiting: Vec::new(),
            master: None,
            generation: 0,
            link: LinkState::Connect,
            link_down_since_ms: 0,
            last_io_ms: 0,
            master_db: 0,
            sync_db: 0,
        }),
        feeding: AtomicBool::new(false),
        replica: AtomicBool::new(false),
        offset: AtomicU64::new(0),
        sync_full: AtomicU64::new(0),
        sync_partial_ok: AtomicU64::new(0),
        sync_partial_err: AtomicU64::new(0),
        acks: tokio::sync::Notify::new(),
        relink: tokio::sync::Notify::new(),
        queue_limit: AtomicU64::new(256 << 20),
        apply_lock: tokio::sync::Mutex::new(()),
        apply_errors: AtomicU64::new(0),
        sync_keys_skipped: AtomicU64::new(0),
        sync_point: AtomicBool::new(false),
    })
}

/// Whether this node is a replica (REPLICAOF host port).
pub fn is_replica() -> bool {
    REPL.get().is_some_and(|r| r.replica.load(Ordering::Acquire))
}

/// Applies `repl-backlog-size` (and the replica queue limit) from the configuration.
pub fn configure(config: &abacus_engine::config::Config) {
    let r = state();
    let mut cap = config.get(abacus_engine::param!("repl-backlog-size")).parse::<u64>().unwrap_or(1 << 20) as usize;
    if cap < MIN_BACKLOG_BYTES {
        // As Redis: a smaller value is raised to the minimum, and CONFIG GET shows it.
        cap = MIN_BACKLOG_BYTES;
        let _ = config.set_many(&[("repl-backlog-size".to_string(), cap.to_string())]);
    }
    let mut g = r.inner.lock();
    g.backlog_cap = cap;
    while g.backlog.len() > cap {
        g.backlog.pop_front();
    }
    let limit = config.get(abacus_engine::param!("client-output-buffer-limit"));
    let words: Vec<&str> = limit.split_whitespace().collect();
    if let Some(i) = words.iter().position(|w| *w == "slave" || *w == "replica") {
        if let Some(hard) = words.get(i + 1).and_then(|h| h.parse::<u64>().ok()) {
            r.queue_limit.store(hard, Ordering::Relaxed);
        }
    }
}

impl Repl {
    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    pub fn replid(&self) -> String {
        self.inner.lock().replid.clone()
    }

    pub fn master(&self) -> Option<MasterAddr> {
        self.inner.lock().master.clone()
    }

    pub fn link(&self) -> LinkState {
        self.inner.lock().link
    }

    /// Starts feeding local writes into the stream (the first replica's PSYNC).
    pub fn start_feeding(&self, durability: &abacus_engine::durability::Durability) {
        if !self.feeding.swap(true, Ordering::AcqRel) {
            durability.enable_effects();
        }
    }

    /// Appends stream bytes: to the backlog and to every attached replica's queue.
    fn append_locked(&self, g: &mut Inner, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        g.offset += bytes.len() as u64;
        self.offset.store(g.offset, Ordering::Release);
        g.backlog.extend(bytes.iter().copied());
        let cap = g.backlog_cap;
        if g.backlog.len() > cap {
            let over = g.backlog.len() - cap;
            g.backlog.drain(..over);
        }
        if g.replicas.is_empty() && g.waiting.is_empty() {
            return;
        }
        let chunk = Bytes::copy_from_slice(bytes);
        let limit = self.queue_limit.load(Ordering::Relaxed);
        g.replicas.retain(|a| {
            let q = a.info.queued.fetch_add(chunk.len() as u64, Ordering::AcqRel) + chunk.len() as u64;
            if limit > 0 && q > limit {
                tracing::warn!("replica {}:{} fell {q} bytes behind (limit {limit}): closing its link", a.info.ip, a.info.port.load(Ordering::Relaxed));
                a.info.overflowed.store(true, Ordering::Release);
                return false;
            }
            a.tx.send(chunk.clone()).is_ok()
        });
    }

    /// Bytes of the stream from `from` (exclusive: the bytes after offset `from`) to the
    /// end, if the backlog still holds them.
    fn backlog_from(g: &Inner, from: u64) -> Option<Vec<u8>> {
        let start = g.offset - g.backlog.len() as u64;
        if from < start || from > g.offset || g.backlog.is_empty() && from != g.offset {
            return None;
        }
        let skip = (from - start) as usize;
        Some(g.backlog.iter().skip(skip).copied().collect())
    }

    /// Injects `REPLCONF GETACK *` into the stream (WAIT).
    pub fn request_acks(&self, log: Option<&abacus_engine::aof::Aof>) {
        let mut g = self.inner.lock();
        if g.replicas.is_empty() {
            return;
        }
        self.append_locked(&mut g, b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
        // The log's position follows (see "Restarts"): a primary restarted right after a
        // WAIT is at the offset its replicas acknowledged, and they continue.
        if let Some(aof) = log {
            let mut buf = Vec::new();
            push_position(&mut buf, &Position { replid: g.replid.clone(), offset: g.offset, db: g.last_db });
            aof.append(&buf);
        }
    }

    /// Replicas that acknowledged offset `at` or beyond.
    pub fn acked(&self, at: u64) -> usize {
        self.inner.lock().replicas.iter().filter(|a| a.info.state.load(Ordering::Acquire) == ONLINE && a.info.ack_offset.load(Ordering::Acquire) >= at).count()
    }

    /// Online replicas whose last ACK is at most `max_lag_s` seconds old.
    pub fn good_replicas(&self, max_lag_s: u64) -> usize {
        let now = now_ms();
        self.inner
            .lock()
            .replicas
            .iter()
            .filter(|a| a.info.state.load(Ordering::Acquire) == ONLINE && now.saturating_sub(a.info.ack_ms.load(Ordering::Relaxed)) / 1000 <= max_lag_s)
            .count()
    }

    pub fn detach(&self, info: &Arc<ReplicaInfo>) {
        let mut g = self.inner.lock();
        g.replicas.retain(|a| !Arc::ptr_eq(&a.info, info));
        g.waiting.retain(|w| !Arc::ptr_eq(&w.info, info));
    }
}

/// Writes one log record and feeds it into the stream: the one place records leave a
/// shard (`ShardLog::flush_pending`, `ShardLog::take_pending`, a coordinator's `Locks`), to
/// `log`, the server's (`Durability::write_record`). `buf` holds
/// log commands ([`fmt::push_command`]), after [`fmt::HEADER_BYTES`] reserved bytes when
/// `framed`. `atomic`: a coordinator's record (one multi-shard operation), applied by
/// replicas as a transaction. Returns the log position after the record (0 without a log).
///
/// While the node feeds a stream and has a log, the record ends with a position mark (the
/// replication ID, the offset after this record's stream bytes, the stream's database), and
/// the log append and the stream append happen under the replication lock together, so the
/// log's order is the stream's order and the last record of the log states the offset of
/// exactly the data before it (see "Restarts" in the module comment).
/// Replication as the effects stream's feed (`durability::Feed`): registered with each
/// server's `Durability` at start.
pub struct Feed;

impl abacus_engine::durability::Feed for Feed {
    fn write_record(&self, log: Option<&abacus_engine::aof::Aof>, buf: &mut Vec<u8>, framed: bool, atomic: bool) -> u64 {
        write_record(log, buf, framed, atomic)
    }

    fn at_rotation(&self, aof: &abacus_engine::aof::Aof, snapshot: &str) {
        log_position_at_rotation(aof, snapshot)
    }

    fn at_snapshot(&self, name: &str) {
        snapshot_point(name)
    }
}

pub fn write_record(log: Option<&abacus_engine::aof::Aof>, buf: &mut Vec<u8>, framed: bool, atomic: bool) -> u64 {
    let start = if framed { fmt::HEADER_BYTES.min(buf.len()) } else { 0 };
    let aof = log;
    let append = |buf: &mut Vec<u8>| abacus_engine::durability::append_record(aof, buf, framed);
    let feeding = REPL.get().filter(|r| r.feeding.load(Ordering::Acquire));
    let Some(r) = feeding else { return append(buf) };
    if buf.len() <= start {
        return append(buf);
    }
    let mut g = r.inner.lock();
    let Some(out) = encode_record(&mut g, &buf[start..], atomic) else {
        // Cannot happen: the payload was just built by `push_command`.
        tracing::error!("replication: a log record cannot be read back; replicas will resynchronise");
        g.replicas.clear();
        return append(buf);
    };
    let at = if aof.is_some() {
        let end = g.offset + out.len() as u64;
        push_position(buf, &Position { replid: g.replid.clone(), offset: end, db: g.last_db });
        append(buf)
    } else {
        0
    };
    r.append_locked(&mut g, &out);
    at
}

/// Re-encodes one log record as the stream's RESP commands (a `SELECT` when the database
/// changes; a coordinator's record of several commands inside `MULTI`/`EXEC`).
fn encode_record(g: &mut Inner, payload: &[u8], atomic: bool) -> Option<Vec<u8>> {
    let commands = fmt::commands(payload, fmt::Format::Varint).ok()?;
    let wrap = atomic && commands.len() > 1;
    let mut out = Vec::with_capacity(payload.len() + 32 * commands.len());
    if wrap {
        push_resp(&mut out, &[b"MULTI"]);
    }
    for c in &commands {
        if g.last_db != Some(c.db) {
            push_resp(&mut out, &[&b"SELECT"[..], c.db.to_string().as_bytes()]);
            g.last_db = Some(c.db);
        }
        push_resp(&mut out, &c.args);
    }
    if wrap {
        push_resp(&mut out, &[b"EXEC"]);
    }
    Some(out)
}

pub use abacus_engine::log_marks::{parse_mark, push_position, Mark, Position, POSITION_MARK};

/// This node's position, if it is exact now: a primary feeding a stream (every shard held by
/// the caller, so no record is on its way), or a replica between two applied chunks.
fn exact_position() -> Option<Position> {
    let r = REPL.get()?;
    if r.replica.load(Ordering::Acquire) {
        // A chunk being applied may have run on some shards and not yet on others: no exact
        // position now (the chunk's own mark follows it in the log).
        // (A sub-replica's full sync holding the lock with `sync_point` set is between two.)
        let _idle = match r.apply_lock.try_lock() {
            Ok(idle) => Some(idle),
            Err(_) if r.sync_point.load(Ordering::Acquire) => None,
            Err(_) => return None,
        };
        let g = r.inner.lock();
        if g.offset == 0 {
            return None;
        }
        return Some(Position { replid: g.replid.clone(), offset: g.offset, db: Some(g.master_db as u16) });
    }
    if !r.feeding.load(Ordering::Acquire) {
        return None;
    }
    let g = r.inner.lock();
    Some(Position { replid: g.replid.clone(), offset: g.offset, db: g.last_db })
}

/// Writes this node's position as a record of its own at the head of a new log segment
/// (`snapshot.rs`, right after the switch to it, every shard held, for `snapshot`): the
/// segment, replayed after that snapshot, starts from a known point even when older
/// segments are gone.
pub fn log_position_at_rotation(aof: &abacus_engine::aof::Aof, snapshot: &str) {
    if let Some(p) = exact_position() {
        let mut buf = Vec::new();
        let db = p.db.map_or("-1".to_string(), |d| d.to_string());
        fmt::push_command(&mut buf, &mut None, now_ms(), 0, &[POSITION_MARK, p.replid.as_bytes(), p.offset.to_string().as_bytes(), db.as_bytes(), snapshot.as_bytes()]);
        aof.append(&buf);
    }
}

/// The end of a full sync's load, the same from an Abacus primary (`replica.rs`) and from a
/// Redis one (`from_redis.rs`), called with every shard still held: take the primary's
/// replication ID and offset, write the log barrier (a restart before the snapshot below is
/// durable must not claim a replication position, since the data set was replaced without
/// log commands), and start the snapshot that makes the data directory the loaded data set.
/// Err when REPLICAOF changed during the sync.
pub(crate) async fn finish_full_sync(worker: &abacus_engine::exec::Worker, locks: &abacus_engine::exec::Locks, gen: u64, replid: &str, offset: u64, source: &'static str) -> Result<(), String> {
    if !reset_to(gen, replid, offset) {
        return Err("REPLICAOF changed during the sync".into());
    }
    let durability = &worker.engine.durability;
    log_barrier(durability.log());
    if durability.log().is_some() || durability.snapshots().is_some() {
        if let Err(e) = abacus_engine::snapshot::start(worker, abacus_engine::exec::Access::Locked(locks), source).await {
            tracing::warn!("snapshot after the full sync did not start ({e}): the data directory holds the previous data set until the next one");
        }
    }
    Ok(())
}

/// A full sync replaced the data set without log commands (`replica.rs`, every shard held,
/// before the snapshot that records the new data set): see [`Mark::Barrier`].
pub(crate) fn log_barrier(log: Option<&abacus_engine::aof::Aof>) {
    if let Some(aof) = log {
        let mut buf = Vec::new();
        fmt::push_command(&mut buf, &mut None, now_ms(), 0, &[POSITION_MARK]);
        aof.append(&buf);
    }
}

/// A replica after applying a chunk (`replica.rs`, holding the apply lock, before the
/// chunk's bytes count): the position after them goes to `log`, the pending log commands of
/// the replica link's thread's shard,
/// written with the chunk's last commands. Every other effect of the chunk is already in the
/// log: a command's record is written before its reply, and the chunk's replies are in.
pub(crate) fn log_applied_position(log: &mut abacus_engine::aof::ShardLog, applied: usize, db: usize) {
    if !log.durability().effects_on() || log.durability().log().is_none() {
        return;
    }
    let (replid, offset) = {
        let g = state().inner.lock();
        (g.replid.clone(), g.offset + applied as u64)
    };
    let db = db.to_string();
    log.log_command(now_ms(), 0, &[POSITION_MARK, replid.as_bytes(), offset.to_string().as_bytes(), db.as_bytes()]);
}

/// After recovery: the position the log ends at (see "Restarts"). The node takes that
/// replication ID and offset, with an empty backlog that starts there, and feeds its writes
/// into the stream from now on (as Redis, which keeps a backlog once it had replicas), so
/// its offset keeps meaning its data set.
pub fn restore(p: &Position, durability: &abacus_engine::durability::Durability) {
    let r = state();
    {
        let mut g = r.inner.lock();
        g.replid = p.replid.clone();
        g.offset = p.offset;
        g.backlog.clear();
        g.last_db = p.db;
        g.master_db = p.db.unwrap_or(0) as usize;
        r.offset.store(p.offset, Ordering::Release);
    }
    tracing::info!("Recovered replication ID and offset from the log: {}:{}", p.replid, p.offset);
    r.start_feeding(durability);
}

/// Feeds stream bytes a replica applied (they stay in its backlog, for after a promotion).
pub fn feed_applied(gen: u64, bytes: &[u8], master_db: usize) {
    let r = state();
    let mut g = r.inner.lock();
    if g.generation != gen {
        return;
    }
    g.master_db = master_db;
    r.append_locked(&mut g, bytes);
}

/// Encodes one command as a RESP array of bulk strings.
pub fn push_resp<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(itoa::Buffer::new().format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The snapshot's point in time (every shard held): attaches the replicas waiting for a full
/// sync at the current offset. Called by `snapshot.rs` while it holds every shard.
pub fn snapshot_point(name: &str) {
    let Some(r) = REPL.get() else { return };
    let mut g = r.inner.lock();
    if g.waiting.is_empty() {
        return;
    }
    let db = if r.replica.load(Ordering::Acquire) {
        // A replica's snapshot is a point of its primary's stream only between two applied
        // chunks: the sub-replica's full sync takes its own snapshot so (see "Chained").
        if !r.sync_point.load(Ordering::Acquire) {
            return;
        }
        Some(g.master_db)
    } else {
        // The stream after this point starts with a SELECT: a replica starts from a snapshot.
        g.last_db = None;
        None
    };
    let offset = g.offset;
    for w in std::mem::take(&mut g.waiting) {
        if w.at.send((offset, name.to_string(), db)).is_ok() {
            w.info.state.store(WAIT_BGSAVE, Ordering::Release);
            g.replicas.push(Attached { info: w.info, tx: w.tx });
        }
    }
}

/// What PSYNC decided.
pub enum Psync {
    /// `+CONTINUE`: the bytes the replica missed, and the queue of what follows.
    Continue { replid: String, missed: Vec<u8>, rx: mpsc::UnboundedReceiver<Bytes> },
    /// A full sync is needed.
    Full,
}

/// Decides a PSYNC: `+CONTINUE` when the ID is ours (or our previous one, up to where it was
/// valid) and the backlog holds every byte after `want - 1`.
pub fn try_partial(info: &Arc<ReplicaInfo>, replid: &str, want: i64) -> Psync {
    let r = state();
    let mut g = r.inner.lock();
    let ours = replid == g.replid || (replid == g.replid2 && want <= g.second_offset);
    if !ours || want < 1 || replid == "?" {
        if replid != "?" {
            r.sync_partial_err.fetch_add(1, Ordering::Relaxed);
        }
        return Psync::Full;
    }
    let Some(missed) = Repl::backlog_from(&g, (want - 1) as u64) else {
        r.sync_partial_err.fetch_add(1, Ordering::Relaxed);
        return Psync::Full;
    };
    // Bounded as a full sync's queue is (`primary.rs`): by `client-output-buffer-limit replica`.
    let (tx, rx) = mpsc::unbounded_channel();
    info.state.store(ONLINE, Ordering::Release);
    info.ack_offset.store((want - 1) as u64, Ordering::Release);
    info.ack_ms.store(now_ms(), Ordering::Relaxed);
    g.replicas.push(Attached { info: info.clone(), tx });
    r.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
    Psync::Continue { replid: g.replid.clone(), missed, rx }
}

/// Registers a replica for the next snapshot's point in time.
pub fn wait_for_snapshot(w: Waiter) {
    state().inner.lock().waiting.push(w);
}

/// REPLICAOF host port: becomes a replica (keeping its data until the sync replaces it).
/// Returns the new generation for the link task, or None if nothing changed.
pub fn become_replica(addr: MasterAddr) -> Option<u64> {
    let r = state();
    let mut g = r.inner.lock();
    if g.master.as_ref() == Some(&addr) {
        return None;
    }
    let was_primary = g.master.is_none();
    g.master = Some(addr);
    g.generation += 1;
    g.link = LinkState::Connect;
    g.link_down_since_ms = now_ms();
    // Replicas of this node are disconnected, as Redis does: they must follow the new history.
    g.replicas.clear();
    g.waiting.clear();
    if was_primary {
        // Our own history, seen as a replica's, continues from our offset: a PSYNC to a
        // primary that was our replica can continue, in the database our stream was in.
        g.master_db = g.last_db.unwrap_or(0) as usize;
    }
    r.replica.store(true, Ordering::Release);
    r.feeding.store(false, Ordering::Release);
    let gen = g.generation;
    drop(g);
    r.relink.notify_waiters();
    Some(gen)
}

/// REPLICAOF NO ONE: becomes a primary. The link task stops at a command boundary first
/// (the caller waits for it); then the replication ID moves to replid2.
pub fn become_primary(durability: &abacus_engine::durability::Durability) -> bool {
    let r = state();
    let mut g = r.inner.lock();
    if g.master.is_none() {
        return false;
    }
    g.master = None;
    g.generation += 1;
    g.link = LinkState::Connect;
    g.replid2 = std::mem::replace(&mut g.replid, new_replid());
    g.second_offset = g.offset as i64 + 1;
    g.last_db = None;
    r.replica.store(false, Ordering::Release);
    drop(g);
    r.relink.notify_waiters();
    // Our own writes now make the stream (the backlog keeps the old primary's before them).
    r.start_feeding(durability);
    true
}

pub fn generation() -> u64 {
    state().inner.lock().generation
}

/// The link's view for the replica task.
pub(crate) fn set_link(gen: u64, link: LinkState) -> bool {
    let mut g = state().inner.lock();
    if g.generation != gen {
        return false;
    }
    if link != LinkState::Connected && g.link == LinkState::Connected {
        g.link_down_since_ms = now_ms();
    }
    g.link = link;
    true
}

/// How old a replica's data may be, for the cluster's failover rule
/// (`cluster-replica-validity-factor`): 0 on a primary or while the link to the primary is
/// up, else the time since it went down. Redis measures from the last byte received while
/// connected, which its primary's pings keep under `repl-ping-replica-period`; Abacus's
/// primary sends nothing on an idle link, so an open link counts as fresh.
pub fn data_age_ms(now: u64) -> u64 {
    let g = state().inner.lock();
    if g.master.is_none() || g.link == LinkState::Connected {
        0
    } else {
        now.saturating_sub(g.link_down_since_ms)
    }
}

pub(crate) fn touch_io() {
    state().inner.lock().last_io_ms = now_ms();
}

/// The replica's identity for PSYNC: (replid, offset, master db).
pub(crate) fn psync_position() -> (String, u64, usize) {
    let g = state().inner.lock();
    (g.replid.clone(), g.offset, g.master_db)
}

/// After a full sync: the primary's ID and offset; the backlog restarts there.
pub(crate) fn reset_to(gen: u64, replid: &str, offset: u64) -> bool {
    let r = state();
    let mut g = r.inner.lock();
    if g.generation != gen {
        return false;
    }
    g.replid = replid.to_string();
    g.replid2 = "0".repeat(40);
    g.second_offset = -1;
    g.offset = offset;
    g.backlog.clear();
    g.master_db = std::mem::take(&mut g.sync_db);
    // Sub-replicas followed the history that was just replaced: they sync again.
    g.replicas.clear();
    g.waiting.clear();
    r.offset.store(offset, Ordering::Release);
    true
}

/// Before a full sync's load: the database the primary's stream is in at the snapshot's
/// point (`+FULLRESYNC`'s third word), taken by [`reset_to`].
pub(crate) fn set_stream_db(gen: u64, db: usize) {
    let mut g = state().inner.lock();
    if g.generation == gen {
        g.sync_db = db;
    }
}

/// After `+CONTINUE <newid>`: the primary changed its ID (it was promoted).
pub(crate) fn switch_id(replid: &str) {
    let mut g = state().inner.lock();
    if g.replid != replid {
        g.replid2 = std::mem::replace(&mut g.replid, replid.to_string());
        g.second_offset = g.offset as i64 + 1;
        // As Redis: sub-replicas reconnect, and learn the new ID from their +CONTINUE.
        g.replicas.clear();
    }
}

/// The write refusals of replication (checked before a write runs; `master` is the
/// master's own link): READONLY on a read-only replica, MASTERDOWN when stale data must not
/// be served, NOREPLICAS under `min-replicas-to-write`.
pub fn refuse(config: &abacus_engine::config::Config, write: bool, stale_ok: bool, master: bool) -> Option<abacus_protocol::Frame> {
    if master {
        return None;
    }
    let r = REPL.get()?;
    if r.replica.load(Ordering::Acquire) {
        if !stale_ok && r.link() != LinkState::Connected && !config.get_bool(abacus_engine::param!("replica-serve-stale-data")) {
            return Some(abacus_protocol::Frame::error("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."));
        }
        if write && config.get_bool(abacus_engine::param!("replica-read-only")) {
            return Some(abacus_protocol::Frame::error("READONLY You can't write against a read only replica."));
        }
        return None;
    }
    if write {
        // Mirrors, not the stored text: this runs before every write on a primary.
        let min = config.get_u64(abacus_engine::param!("min-replicas-to-write")) as usize;
        if min > 0 {
            let lag = config.get_u64(abacus_engine::param!("min-replicas-max-lag"));
            if r.good_replicas(lag) < min {
                return Some(abacus_protocol::Frame::error("NOREPLICAS Not enough good replicas to write."));
            }
        }
    }
    None
}

/// INFO's `# Replication` section, with Redis's field names.
pub fn info(config: &abacus_engine::config::Config) -> String {
    use std::fmt::Write;
    let r = state();
    let g = r.inner.lock();
    let now = now_ms();
    let mut out = String::from("# Replication\r\n");
    if let Some(m) = &g.master {
        let _ = write!(out, "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\n", m.host, m.port);
        let up = g.link == LinkState::Connected;
        let _ = write!(out, "master_link_status:{}\r\n", if up { "up" } else { "down" });
        let io = if g.last_io_ms == 0 { -1 } else { (now.saturating_sub(g.last_io_ms) / 1000) as i64 };
        let _ = write!(out, "master_last_io_seconds_ago:{io}\r\nmaster_sync_in_progress:{}\r\n", (g.link == LinkState::Sync) as u8);
        let _ = write!(out, "slave_read_repl_offset:{0}\r\nslave_repl_offset:{0}\r\n", g.offset);
        if !up {
            let _ = write!(out, "master_link_down_since_seconds:{}\r\n", now.saturating_sub(g.link_down_since_ms) / 1000);
        }
        let _ = write!(
            out,
            "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:1\r\n",
            config.get(abacus_engine::param!("replica-priority")),
            config.get_bool(abacus_engine::param!("replica-read-only")) as u8
        );
        let _ = write!(
            out,
            "replica_apply_errors:{}\r\nreplica_sync_keys_skipped:{}\r\n",
            r.apply_errors.load(Ordering::Relaxed),
            r.sync_keys_skipped.load(Ordering::Relaxed)
        );
    } else {
        out.push_str("role:master\r\n");
    }
    let online: Vec<&Attached> = g.replicas.iter().collect();
    let _ = write!(out, "connected_slaves:{}\r\n", online.len());
    for (i, a) in online.iter().enumerate() {
        let state = match a.info.state.load(Ordering::Acquire) {
            WAIT_BGSAVE => "wait_bgsave",
            SEND_BULK => "send_bulk",
            _ => "online",
        };
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state={state},offset={},lag={}\r\n",
            a.info.ip,
            a.info.port.load(Ordering::Relaxed),
            a.info.ack_offset.load(Ordering::Relaxed),
            now.saturating_sub(a.info.ack_ms.load(Ordering::Relaxed)) / 1000
        );
    }
    let first = g.offset - g.backlog.len() as u64 + 1;
    let _ = write!(
        out,
        "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n\r\n",
        g.replid,
        g.replid2,
        g.offset,
        g.second_offset,
        (r.feeding.load(Ordering::Relaxed) || g.master.is_some()) as u8,
        g.backlog_cap,
        first,
        g.backlog.len()
    );
    out
}

/// INFO stats' replication counters.
pub fn info_stats() -> String {
    let r = state();
    format!(
        "sync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\n",
        r.sync_full.load(Ordering::Relaxed),
        r.sync_partial_ok.load(Ordering::Relaxed),
        r.sync_partial_err.load(Ordering::Relaxed)
    )
}

/// ROLE's reply.
pub fn role() -> abacus_protocol::Frame {
    use abacus_protocol::Frame;
    let r = state();
    let g = r.inner.lock();
    let bulk = |s: &str| Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    match &g.master {
        Some(m) => Frame::Array(vec![
            bulk("slave"),
            bulk(&m.host),
            Frame::Integer(m.port as i64),
            bulk(g.link.name()),
            Frame::Integer(if g.link == LinkState::Connected || g.offset > 0 { g.offset as i64 } else { -1 }),
        ]),
        None => Frame::Array(vec![
            bulk("master"),
            Frame::Integer(g.offset as i64),
            Frame::Array(
                g.replicas
                    .iter()
                    .filter(|a| a.info.state.load(Ordering::Acquire) == ONLINE)
                    .map(|a| {
                        Frame::Array(vec![
                            bulk(&a.info.ip),
                            bulk(&a.info.port.load(Ordering::Relaxed).to_string()),
                            bulk(&a.info.ack_offset.load(Ordering::Relaxed).to_string()),
                        ])
                    })
                    .collect(),
            ),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_back(buf: &[u8]) -> Vec<Vec<Vec<u8>>> {
        fmt::commands(buf, fmt::Format::Varint).unwrap().into_iter().map(|c| c.args.iter().map(|a| a.to_vec()).collect()).collect()
    }

    fn mark_of(buf: &[u8]) -> Mark {
        let cmds = read_back(buf);
        assert_eq!(cmds.len(), 1);
        let args: Vec<&[u8]> = cmds[0].iter().map(|a| a.as_slice()).collect();
        assert!(args[0].eq_ignore_ascii_case(POSITION_MARK));
        parse_mark(&args)
    }

    #[test]
    fn position_marks_read_back() {
        let id = "0123456789abcdef0123456789abcdef01234567".to_string();
        for db in [None, Some(0), Some(3), Some(u16::MAX)] {
            let p = Position { replid: id.clone(), offset: 123_456_789_012, db };
            let mut buf = Vec::new();
            push_position(&mut buf, &p);
            assert_eq!(mark_of(&buf), Mark::At(p));
        }
        let mut buf = Vec::new();
        fmt::push_command(&mut buf, &mut None, 1, 0, &[POSITION_MARK, id.as_bytes(), b"7", b"2", b"snap-000009.abs"]);
        assert_eq!(mark_of(&buf), Mark::Segment(Position { replid: id.clone(), offset: 7, db: Some(2) }, "snap-000009.abs".into()));
    }

    #[test]
    fn damaged_marks_are_barriers() {
        let id = "0123456789abcdef0123456789abcdef01234567";
        let bad: &[&[&[u8]]] = &[
            &[POSITION_MARK],
            &[POSITION_MARK, id.as_bytes(), b"7"],
            &[POSITION_MARK, b"short", b"7", b"0"],
            &[POSITION_MARK, b"0123456789abcdef0123456789abcdef0123456z", b"7", b"0"],
            &[POSITION_MARK, id.as_bytes(), b"-7", b"0"],
            &[POSITION_MARK, id.as_bytes(), b"18446744073709551616", b"0"],
            &[POSITION_MARK, id.as_bytes(), b"7", b"65536"],
            &[POSITION_MARK, id.as_bytes(), b"7", b"-2"],
            &[POSITION_MARK, id.as_bytes(), b"7", b"x"],
        ];
        for args in bad {
            assert_eq!(parse_mark(args), Mark::Barrier, "{args:?}");
        }
    }
}
