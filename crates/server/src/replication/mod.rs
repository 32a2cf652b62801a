//! Replication: a primary streams its writes to replicas, with Redis's handshake and commands.
//!
//! The stream. Every write already states its effect and reaches the log writer (`aof.rs`)
//! as a record, at flush points that keep every shard's execution order, and a multi-shard
//! operation as ONE record written while it still holds its shards. The replication stream is
//! exactly that sequence of records, taken at the same call sites right after the log's
//! append ([`feed_record`]): one global order and one global offset, as Redis's. Each record
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
//! Not built: chained replication (a replica refuses PSYNC), diskless loading (a full sync
//! always goes through a temporary file, also when Redis sends it diskless), per-shard
//! parallel streams, Redis Functions libraries and module types of a Redis primary (skipped,
//! reported). See docs/ARCHITECTURE.md, "Replication".

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

use crate::shard::now_ms;

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
    /// Gets the offset and the snapshot's file name.
    pub at: tokio::sync::oneshot::Sender<(u64, String)>,
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
}

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
    })
}

/// Whether this node is a replica (REPLICAOF host port).
pub fn is_replica() -> bool {
    REPL.get().is_some_and(|r| r.replica.load(Ordering::Acquire))
}

/// Applies `repl-backlog-size` (and the replica queue limit) from the configuration.
pub fn configure(config: &crate::config::Config) {
    let r = state();
    let mut cap = config.get("repl-backlog-size").parse::<u64>().unwrap_or(1 << 20) as usize;
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
    let limit = config.get("client-output-buffer-limit");
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
    pub fn start_feeding(&self) {
        if !self.feeding.swap(true, Ordering::AcqRel) {
            crate::aof::enable_for_replication();
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
    pub fn request_acks(&self) {
        let mut g = self.inner.lock();
        if g.replicas.is_empty() {
            return;
        }
        self.append_locked(&mut g, b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
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

/// Feeds one log record (a payload of [`fmt::push_command`] commands) into the stream.
/// `atomic`: a coordinator's record (one multi-shard operation), applied as a transaction.
/// Called at the log's flush points, in the log's order (see the module comment).
pub fn feed_record(payload: &[u8], atomic: bool) {
    let Some(r) = REPL.get() else { return };
    if !r.feeding.load(Ordering::Acquire) || payload.is_empty() {
        return;
    }
    let commands = match fmt::commands(payload, fmt::Format::Varint) {
        Ok(c) => c,
        Err(e) => {
            // Cannot happen: the payload was just built by `push_command`.
            tracing::error!("replication: a log record cannot be read back ({e}); replicas will resynchronise");
            r.inner.lock().replicas.clear();
            return;
        }
    };
    let wrap = atomic && commands.len() > 1;
    let mut out = Vec::with_capacity(payload.len() + 32 * commands.len());
    let mut g = r.inner.lock();
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
    r.append_locked(&mut g, &out);
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
    // The stream after this point starts with a SELECT: a replica starts from a snapshot.
    g.last_db = None;
    let offset = g.offset;
    for w in std::mem::take(&mut g.waiting) {
        if w.at.send((offset, name.to_string())).is_ok() {
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
        // primary that was our replica can continue.
        g.master_db = 0;
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
pub fn become_primary() -> bool {
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
    r.start_feeding();
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
    g.master_db = 0;
    r.offset.store(offset, Ordering::Release);
    true
}

/// After `+CONTINUE <newid>`: the primary changed its ID (it was promoted).
pub(crate) fn switch_id(replid: &str) {
    let mut g = state().inner.lock();
    if g.replid != replid {
        g.replid2 = std::mem::replace(&mut g.replid, replid.to_string());
        g.second_offset = g.offset as i64 + 1;
    }
}

/// The write refusals of replication (checked before a write runs; `master` is the
/// master's own link): READONLY on a read-only replica, MASTERDOWN when stale data must not
/// be served, NOREPLICAS under `min-replicas-to-write`.
pub fn refuse(config: &crate::config::Config, write: bool, stale_ok: bool, master: bool) -> Option<abacus_protocol::Frame> {
    if master {
        return None;
    }
    let r = REPL.get()?;
    if r.replica.load(Ordering::Acquire) {
        if !stale_ok && r.link() != LinkState::Connected && !config.get_bool("replica-serve-stale-data") {
            return Some(abacus_protocol::Frame::error("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."));
        }
        if write && config.get_bool("replica-read-only") {
            return Some(abacus_protocol::Frame::error("READONLY You can't write against a read only replica."));
        }
        return None;
    }
    if write {
        let min: usize = config.get("min-replicas-to-write").parse().unwrap_or(0);
        if min > 0 {
            let lag: u64 = config.get("min-replicas-max-lag").parse().unwrap_or(10);
            if r.good_replicas(lag) < min {
                return Some(abacus_protocol::Frame::error("NOREPLICAS Not enough good replicas to write."));
            }
        }
    }
    None
}

/// INFO's `# Replication` section, with Redis's field names.
pub fn info(config: &crate::config::Config) -> String {
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
            config.get("replica-priority"),
            config.get_bool("replica-read-only") as u8
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
