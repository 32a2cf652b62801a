//! Shards: the partitions of the keyspace, each owned by exactly one worker thread.
//!
//! A key belongs to slot `crc16(key) mod 16384` (with Redis Cluster's `{hash tag}` rule, so
//! users can co-locate keys and cluster support can reuse the mapping), and slot `s` belongs to
//! shard `s mod shards`. Each worker thread owns one shard and runs its [`shard_loop`]: a task
//! that executes jobs sent to the shard one at a time, so a shard's data is only ever touched
//! by its thread and needs no lock.
//!
//! Jobs are closures over `&mut Shard`. A connection on the owning thread may run a job
//! directly (no message) when the shard is not locked; others send it through the shard's
//! bounded queue (bounded so that a flood of requests pushes back on the connections instead
//! of growing memory).
//!
//! Locking, for atomic multi-shard work: a `Lock` message makes the shard hand a private job
//! channel to the requester and then run only jobs from that channel until the requester drops
//! it. A requester's `Lock` messages enter their queues together (`order.rs`), so two
//! multi-shard operations can never wait on each other in a cycle; other work on a locked
//! shard simply queues behind the lock. The
//! waiting is `async`, so a thread whose shard is locked keeps serving its connections.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::rc::Rc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use abacus_keyspace::Db;

/// Work for a shard.
pub type Job = Box<dyn FnOnce(&mut Shard) + Send>;

pub enum ShardMsg {
    Run(Job),
    /// A part of a multi-shard operation, counted in `Order::pending` until it has run
    /// (see `order.rs`).
    RunOrdered(Job),
    /// Hand over a private job channel and serve only it until it is dropped.
    Lock(oneshot::Sender<mpsc::UnboundedSender<Job>>),
}

/// Capacity of a shard's queue, in messages (each may carry a batch of commands).
pub const SHARD_QUEUE_CAPACITY: usize = 1024;

/// Redis Cluster's slot count: the key -> shard map goes through slots.
pub const SLOTS: usize = 16384;

/// Slice-by-16 tables (8 KiB): every keyed command hashes its key here to find its shard, and
/// the byte-at-a-time default table cost about 3% of a pipelined GET's CPU.
const CRC16: crc::Crc<u16, crc::Table<16>> = crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

/// Keys shorter than this take the slice-by-4 loop over [`CRC16_TABLES`]: the crate's
/// slice-by-16 routine has a fixed cost of ~110 instructions (callgrind, for the 16-byte keys
/// of `bench/hll.sh`), against ~3 per byte for the loop.
const CRC16_SHORT_KEY: usize = 64;

/// CRC-16/XMODEM (Redis Cluster's `crc16`, polynomial 0x1021) tables for four bytes at a
/// time: `CRC16_TABLES[k][v]` is the CRC of byte `v` followed by `k` zero bytes.
const CRC16_TABLES: [[u16; 256]; 4] = {
    let mut t = [[0u16; 256]; 4];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 4 {
        let mut i = 0;
        while i < 256 {
            // One more zero byte: the byte-wise step with input 0.
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// CRC-16/XMODEM of `data`, as Redis Cluster computes slots.
#[inline]
fn crc16(data: &[u8]) -> u16 {
    if data.len() >= CRC16_SHORT_KEY {
        return CRC16.checksum(data);
    }
    let t = &CRC16_TABLES;
    let mut crc = 0u16;
    let mut quads = data.chunks_exact(4);
    for q in &mut quads {
        // The CRC is linear: the state with the first two bytes folded in goes through four
        // byte steps (its high byte) and three (its low byte), the other two bytes through
        // two and one.
        let x = crc ^ u16::from_be_bytes([q[0], q[1]]);
        crc = t[3][usize::from(x >> 8)] ^ t[2][usize::from(x & 0xff)] ^ t[1][usize::from(q[2])] ^ t[0][usize::from(q[3])];
    }
    for &b in quads.remainder() {
        crc = (crc << 8) ^ t[0][usize::from((crc >> 8) as u8 ^ b)];
    }
    crc
}

/// Where the first `{` of `key` is. Every keyed command asks, so short keys get a word-at-a-
/// time scan: `position`'s byte loop costs ~9 instructions per byte and `memchr`'s vector
/// set-up ~50 whatever the length (callgrind, a 3-byte key); this is ~5 per 8 bytes.
#[inline]
fn find_open_brace(key: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const BRACES: u64 = 0x7b7b_7b7b_7b7b_7b7b; // b'{' in every byte
    // Index of the first `{` byte in the word (little-endian: byte 0 lowest). The classic
    // zero-byte test may also flag a byte above a real zero, never below one, so the lowest
    // flag is exact.
    fn first_in(word: u64) -> Option<usize> {
        let x = word ^ BRACES;
        let m = x.wrapping_sub(ONES) & !x & HIGHS;
        (m != 0).then(|| (m.trailing_zeros() / 8) as usize)
    }
    let n = key.len();
    if n > 32 {
        return memchr::memchr(b'{', key);
    }
    if n < 8 {
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(key);
        return first_in(u64::from_le_bytes(buf));
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&key[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let mut i = 0;
    while i + 8 <= n {
        if let Some(p) = first_in(word(i)) {
            return Some(i + p);
        }
        i += 8;
    }
    if i == n {
        return None;
    }
    // The last eight bytes, overlapping what was scanned: none of those held a `{`, so a
    // hit here is the first one.
    first_in(word(n - 8)).map(|p| n - 8 + p)
}

/// The slot of a key, with Redis Cluster's hash-tag rule: if the key contains `{...}` with a
/// non-empty body, only the body is hashed.
pub fn key_slot(key: &[u8]) -> usize {
    let hashed = match find_open_brace(key) {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) as usize & (SLOTS - 1)
}

pub fn shard_of(key: &[u8], shards: usize) -> usize {
    key_slot(key) % shards
}

pub use crate::clock::{now_ms, now_us};

/// Whether any client tracks keys (CLIENT TRACKING, `tracking.rs`): the write path's one
/// check. A process-wide flag because the keyspace's change observer it guards is one too
/// (`abacus_keyspace::set_modified_observer`).
static TRACKING_ACTIVE: AtomicBool = AtomicBool::new(false);

#[inline]
pub fn tracking_active() -> bool {
    TRACKING_ACTIVE.load(Ordering::Relaxed)
}

pub fn set_tracking_active(on: bool) {
    TRACKING_ACTIVE.store(on, Ordering::Relaxed);
}

thread_local! {
    /// The client whose command this thread's shard runs (0 = none): CLIENT TRACKING's
    /// NOLOOP skips the invalidations of a client's own writes.
    static WRITER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Sets the client whose commands this thread runs next (0 when done); returns the previous.
#[inline]
pub fn set_writer(id: u64) -> u64 {
    WRITER.with(|w| w.replace(id))
}

/// The client whose command runs now on this thread (0 = none).
pub fn current_writer() -> u64 {
    WRITER.with(|w| w.get())
}

/// Whether shards run active expiry (DEBUG SET-ACTIVE-EXPIRE, as Redis: tests that need
/// keys to expire only when accessed turn it off).
pub static ACTIVE_EXPIRE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// One shard's data.
pub struct Shard {
    pub id: usize,
    pub dbs: Vec<Db>,
    /// True while a multi-shard operation holds this shard; direct local access must then go
    /// through the queue like everyone else.
    pub locked: bool,
    /// This shard's part of a running snapshot (see `snapshot.rs`).
    pub snapshot: Option<crate::snapshot::ShardSnapshot>,
    /// Clients blocked on this shard's keys (see `blocking.rs`).
    pub blocked: crate::blocking::Blocked,
    /// This shard's log commands not yet written and writes not yet counted, with the
    /// server's log and snapshots (see `aof.rs`, `durability.rs`).
    pub log: crate::aof::ShardLog,
    /// This shard's thread's INFO commandstats and the engine's shared recorders (see
    /// `recorders.rs`).
    pub rec: crate::recorders::ShardRecorders,
    /// This shard's Lua state, made by the first script that runs here (the server's
    /// `scripting.rs`).
    pub lua: Option<Box<abacus_scripting::Vm>>,
}

impl Shard {
    pub fn new(id: usize, databases: usize, durability: std::sync::Arc<crate::durability::Durability>, recorders: std::sync::Arc<crate::recorders::Recorders>) -> Shard {
        Shard {
            id,
            dbs: (0..databases).map(|_| Db::new()).collect(),
            locked: false,
            snapshot: None,
            blocked: Default::default(),
            log: crate::aof::ShardLog::new(durability),
            rec: crate::recorders::ShardRecorders::new(recorders),
            lua: None,
        }
    }

    /// Active expiry: Redis's algorithm, per database sample 20 keys with a TTL and repeat while
    /// more than a quarter of the sample had expired, within a time budget per call.
    pub fn active_expire(&mut self, budget: Duration, notify_flags: u32) {
        // The keys it reclaims are published as "expired" (x), in the order reclaimed.
        crate::notify::publish_journals(&mut self.dbs, notify_flags);
        if !ACTIVE_EXPIRE.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let start = std::time::Instant::now();
        let now = now_ms();
        for db in &mut self.dbs {
            loop {
                let (sampled, expired) = db.expire_sample(20, now);
                if sampled == 0 || expired * 4 <= sampled || start.elapsed() > budget {
                    break;
                }
            }
        }
        self.rec.latency.sample_duration("expire-cycle", start.elapsed());
        crate::notify::publish_journals(&mut self.dbs, notify_flags);
    }
}

/// What a keyed handler sees, what it states it changed and propagates: defined with the
/// handlers, below the network layer.
pub use abacus_commands::ctx::{Ctx, Effect, Hooks, KeysModified};

/// What handlers reach in the server through their [`Ctx`]: the background freeing thread
/// (`memory.rs`) and the blocked client being served (`blocking.rs`).
pub static HOOKS: Hooks = Hooks {
    free_later: crate::memory::free_later::<Box<dyn Send>>,
    lazyfree_threshold_bytes: crate::memory::LAZYFREE_THRESHOLD_BYTES,
    serving_key: crate::blocking::serving_key,
    key_slot,
};

/// Runs one job from the queue; returns the shard's id.
fn run_job(shard: &RefCell<Shard>, job: Job, snapshotting: bool) -> usize {
    let mut s = shard.borrow_mut();
    job(&mut s);
    // Under a full queue the idle branch of `shard_loop` never runs: the sweep also
    // advances a little after every job, so a snapshot always completes.
    if snapshotting {
        s.snapshot_step(crate::snapshot::SWEEP_STEP_ENTRIES / 8);
    }
    s.id
}

/// Serves the clients blocked on keys that the last job made ready (`blocking.rs`).
fn serve_blocked(shard: &RefCell<Shard>, server: &crate::engine::Engine) {
    let mut s = shard.borrow_mut();
    if !s.blocked.is_empty() {
        crate::blocking::serve_ready(&mut s, server.config.cmd_config(), server.senders.len());
    }
}

/// Runs the jobs sent to `shard` until every sender is gone, and its active expiry.
pub async fn shard_loop(shard: Rc<RefCell<Shard>>, mut rx: mpsc::Receiver<ShardMsg>, server: std::sync::Arc<crate::engine::Engine>) {
    let hz = server.config.get_u64(crate::param!("hz"));
    let mut meter = crate::stats::OpsMeter::default();
    let period = Duration::from_millis(1000 / hz.clamp(1, 500));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let snapshotting = shard.borrow().snapshot_active();
        tokio::select! {
            biased;
            msg = rx.recv() => match msg {
                None => break,
                Some(ShardMsg::Run(job)) => {
                    run_job(&shard, job, snapshotting);
                    serve_blocked(&shard, &server);
                }
                Some(ShardMsg::RunOrdered(job)) => {
                    let id = run_job(&shard, job, snapshotting);
                    server.order.part_done(id);
                    serve_blocked(&shard, &server);
                }
                Some(ShardMsg::Lock(grant)) => {
                    // Log commands deferred for a shared write (`ShardLog::defer_pending`) ran
                    // before the operation that locks: they go to the log before any of its
                    // records (a snapshot's new segment, a FLUSHALL...).
                    shard.borrow_mut().log.flush_pending();
                    // Unbounded, but the lock holder sends one job and awaits it before the next.
                    let (tx, mut private) = mpsc::unbounded_channel::<Job>();
                    shard.borrow_mut().locked = true;
                    // Granted: no longer waiting in the queue (`order.rs`).
                    let id = shard.borrow().id;
                    server.order.part_done(id);
                    if grant.send(tx).is_ok() {
                        while let Some(job) = private.recv().await {
                            job(&mut shard.borrow_mut());
                        }
                    }
                    shard.borrow_mut().locked = false;
                    // The operation's log record is written (`Locks::drop`) before the
                    // release: what it made ready is served after it, in the log too.
                    serve_blocked(&shard, &server);
                }
            },
            _ = tick.tick() => {
                // A quarter of the period at most, so expiry never starves requests.
                let id = {
                    let mut s = shard.borrow_mut();
                    s.active_expire(period / 4, server.config.cmd_config().notify);
                    s.log.fold_changes();
                    s.id
                };
                if let Some(slot) = server.stats.ops_per_sec.get(id) {
                    slot.store(meter.sample(shard.borrow().rec.commands.calls_total()), std::sync::atomic::Ordering::Relaxed);
                }
                if id == 0 {
                    crate::memory::allocated_bytes();
                }
            }
            _ = tokio::task::yield_now(), if snapshotting => {
                // Idle: sweep a slice, then let the connections of this thread run.
                shard.borrow_mut().snapshot_step(crate::snapshot::SWEEP_STEP_ENTRIES);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster() {
        // Reference values from Redis Cluster (CLUSTER KEYSLOT).
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
    }

    #[test]
    fn brace_search_matches_memchr() {
        // Every length up to past the word-scan limit, a brace at every position (and none),
        // with other bytes around it that differ from `{` by one bit or one unit.
        for len in 0..48usize {
            let base: Vec<u8> = (0..len).map(|i| [b'z', b'|', b'{' ^ 0x80, b'a', 0x7a, 0xfb][i % 6]).collect();
            assert_eq!(find_open_brace(&base), memchr::memchr(b'{', &base), "{base:?}");
            for at in 0..len {
                let mut k = base.clone();
                k[at] = b'{';
                assert_eq!(find_open_brace(&k), Some(at), "{k:?}");
                if at + 3 < len {
                    k[at + 3] = b'{';
                    assert_eq!(find_open_brace(&k), Some(at), "{k:?}");
                }
            }
        }
    }

    #[test]
    fn short_key_crc_matches_the_table_driven_one() {
        // Every length on both sides of CRC16_SHORT_KEY, with varied bytes.
        let data: Vec<u8> = (0..160u32).map(|i| (i.wrapping_mul(97) ^ (i >> 3).wrapping_mul(31)) as u8).collect();
        for start in 0..8 {
            for end in start..data.len() {
                let d = &data[start..end];
                assert_eq!(crc16(d), CRC16.checksum(d), "{d:?}");
            }
        }
        assert_eq!(crc16(b"123456789"), 0x31c3); // CRC-16/XMODEM check value
    }
}
