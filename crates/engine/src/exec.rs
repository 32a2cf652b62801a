//! Running commands on shards: single-shard batches, atomic multi-shard commands, fan-outs.
//!
//! Three paths, from cheapest to dearest:
//! 1. Batches (the pipelining fast path). Consecutive single-shard commands of one connection
//!    are grouped by shard; each group travels as ONE job (one message, one wake-up) and a
//!    batch entirely on the connection's own shard runs in place without a message. The
//!    groups of a batch spanning shards run concurrently, but enter their queues together
//!    (`order.rs`), so the batch takes effect at once, in order, for every other client.
//! 2. Multi-shard commands (MSET, DEL a b, RENAME, COPY... whose keys hash to several shards).
//!    The coordinator locks the involved shards (`Worker::lock`), checks the command's keys
//!    out of them (moving the entries, not copying), runs the ordinary handler on a scratch
//!    keyspace holding just those keys, and checks the results back in before releasing the
//!    locks. No client can observe half of it, and every handler stays a plain single-shard
//!    function: there is no second implementation of any command for the cross-shard case.
//! 3. Fan-outs (DBSIZE, KEYS, SCAN, FLUSHALL...) send one job to every shard.
//!
//! Every path takes an [`Access`]: `Free` (normal queues) or `Locked` (the private channels of
//! shards this coordinator already holds, inside MULTI/EXEC or a locked fan-out).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use abacus_keyspace::{Db, Detached, EvictionPolicy};
use abacus_protocol::{Arg, Args, Bytes, Frame};

use abacus_commands::command::{Handler, Spec};
use crate::aof::ShardLog;
use crate::config::CmdConfig;
use crate::durability::Durability;
use crate::hop::Hops;
use crate::engine::Engine;
use crate::shard::{Effect, now_ms, shard_of, Ctx, Job, KeysModified, Shard, ShardMsg};
use crate::latency::LatencyMonitor;
use crate::memory;
use crate::recorders::{Recorders, ShardRecorders};

/// Shards held by a coordinator: their private job channels, and the log commands of the
/// atomic operation running under them.
pub struct Locks {
    held: BTreeMap<usize, mpsc::UnboundedSender<Job>>,
    /// Log commands gathered from every shard the operation ran on; written as one record
    /// when the locks are released (see `aof.rs`).
    log: RefCell<Vec<u8>>,
    /// The server's log, where that record goes.
    durability: Arc<Durability>,
}

impl Locks {
    pub fn holds(&self, shard: usize) -> bool {
        self.held.contains_key(&shard)
    }

    /// The private job channels of the held shards but `except`: a script running on
    /// `except` reaches the others through them (the server's `scripting.rs`).
    pub fn senders_except(&self, except: usize) -> BTreeMap<usize, mpsc::UnboundedSender<Job>> {
        self.held.iter().filter(|(s, _)| **s != except).map(|(s, tx)| (*s, tx.clone())).collect()
    }

    /// Adds log commands produced under these locks.
    pub fn add_log(&self, payload: Vec<u8>) {
        if payload.is_empty() {
            return;
        }
        let mut log = self.log.borrow_mut();
        if log.is_empty() {
            *log = payload;
        } else {
            log.extend_from_slice(&payload);
        }
    }

    /// Logs one server-level write (FLUSHALL, SWAPDB...) run under these locks.
    pub fn log_command<A: AsRef<[u8]>>(&self, now_ms: u64, db: usize, args: &[A]) {
        if self.durability.effects_on() {
            let mut log = self.log.borrow_mut();
            // Always with its time: payloads of other operations are joined to this one.
            abacus_persist::log::push_command(&mut log, &mut None, now_ms, db as u16, args);
        }
    }
}

impl Drop for Locks {
    /// Writes the operation's log commands as one record. This runs before the fields drop,
    /// that is before the shards are released: nothing can slip in between.
    fn drop(&mut self) {
        let log = self.log.get_mut();
        if !log.is_empty() {
            self.durability.write_record(log, false, true);
        }
    }
}

/// How a coordinator reaches shards.
#[derive(Clone, Copy)]
pub enum Access<'a> {
    Free,
    Locked(&'a Locks),
}

/// Reply used when a shard is gone (the server is shutting down).
pub fn shutting_down() -> Frame {
    Frame::error("ERR server is shutting down")
}

/// A worker thread's view: the shared server and the shard this thread owns.
pub struct Worker {
    pub engine: Arc<Engine>,
    pub shard_id: usize,
    pub shard: Rc<RefCell<Shard>>,
    /// This thread's outgoing groups for other shards, coalesced per tick (see `hop.rs`).
    pub hops: Rc<Hops>,
}

/// A command ready to run: its spec and arguments (name first).
pub struct Call {
    pub spec: &'static Spec,
    pub args: Args,
    /// The client that sent it (its `ClientMeta::id`): CLIENT TRACKING's NOLOOP skips the
    /// invalidations of a client's own writes (`tracking::set_writer`).
    pub client: u64,
    /// The client had CLIENT NO-TOUCH on when it sent the command: its lookups leave the
    /// keys' access times alone (`no_touch`).
    pub no_touch: bool,
}

/// CLIENT NO-TOUCH: whether a call of a client that asked for it skips the keys' access-time
/// updates. TOUCH still touches (Redis 7.2's lookupKey).
#[inline]
fn untouching(spec: &Spec, no_touch: bool) -> bool {
    no_touch && spec.name != abacus_commands::keys::TOUCH.name
}

/// Runs `f` with the keyspace's access-time updates off on this thread (CLIENT NO-TOUCH)
/// when `on`; calls without it pay one branch.
#[inline]
fn with_no_touch<T>(on: bool, f: impl FnOnce() -> T) -> T {
    if !on {
        return f();
    }
    let before = abacus_keyspace::set_no_touch(true);
    let out = f();
    abacus_keyspace::set_no_touch(before);
    out
}

/// One connection's single-shard calls for one shard, with their indexes in its batch.
pub struct Group {
    pub db: usize,
    pub calls: Vec<(usize, Call)>,
    /// The configuration read when the batch was formed.
    pub cfg: CmdConfig,
}

/// Runs several connections' groups on one shard, one after the other, each exactly as
/// [`Worker::run_batch`] runs a lone group (the coalesced path of `hop.rs`).
pub fn run_groups(s: &mut Shard, groups: Vec<Group>, shards: usize) -> Vec<Vec<(usize, Frame)>> {
    // A fresh vector: collecting in place would shrink `groups`' buffer with a realloc.
    let mut out = Vec::with_capacity(groups.len());
    for g in groups {
        out.push(run_group(s, g.db, g.calls, g.cfg, shards));
    }
    // One log record for all of this tick's groups, written before any reply goes back.
    s.log.flush_pending();
    out
}

/// [`run_group`], then its log record: what a lone group does.
fn run_group_logged(s: &mut Shard, db: usize, group: Vec<(usize, Call)>, cfg: CmdConfig, shards: usize) -> Vec<(usize, Frame)> {
    let out = run_group(s, db, group, cfg, shards);
    s.log.flush_pending();
    out
}

/// [`run_group`] on this thread's own shard for one of its connections, whose replies wait
/// for the log: its log commands are deferred so that the connections woken in the same
/// tick share one write (the connection flushes them before replying: `Conn::serve`; for a
/// batch whose replies another thread writes, `hop.rs` writes them before the batch leaves).
pub fn run_group_deferred(s: &mut Shard, db: usize, group: Vec<(usize, Call)>, cfg: CmdConfig, shards: usize) -> Vec<(usize, Frame)> {
    let out = run_group(s, db, group, cfg, shards);
    s.log.defer_pending();
    out
}

/// Runs a keyed command's handler against `dbs` and does the bookkeeping every write needs
/// (WATCH signals and the append-only log: every keyed write goes through here, and its
/// effect goes to `log`, the buffer of the shard it runs on). It is counted in `rec`, that
/// shard's recorders, as a command of their current client (`ShardRecorders::client`).
#[allow(clippy::too_many_arguments)]
pub fn exec_keyed(dbs: &mut [Db], log: &mut ShardLog, rec: &mut ShardRecorders, db: usize, spec: &'static Spec, args: &[Arg], now_ms: u64, cfg: CmdConfig) -> Frame {
    let started = Instant::now();
    let reply = exec_keyed_untimed(dbs, log, db, spec, args, now_ms, cfg);
    let took = started.elapsed();
    rec.timed(spec, took, args, reply.is_error());
    reply
}

/// [`exec_keyed`] without the per-command clock reads: batches time the whole group once.
/// Recovery replays the log through it too.
pub fn exec_keyed_untimed(dbs: &mut [Db], log: &mut ShardLog, db: usize, spec: &'static Spec, args: &[Arg], now_ms: u64, cfg: CmdConfig) -> Frame {
    let (reply, modified) = exec_unsignalled(dbs, log, db, spec, args, now_ms, cfg);
    if !modified.is_none() {
        signal_modified(dbs, db, spec, args, modified);
    }
    reply
}

/// [`exec_keyed`] on checked-out keys (a scratch keyspace, which nobody watches): the keys it
/// modified are returned, for the caller to signal on their shards, with the time it took,
/// for the caller to count (the coordinator's shard is not borrowed while it runs).
pub fn exec_checked_out(dbs: &mut [Db], log: &mut ShardLog, db: usize, spec: &'static Spec, args: &[Arg], now_ms: u64, cfg: CmdConfig) -> (Frame, KeysModified, std::time::Duration) {
    let started = Instant::now();
    let (reply, modified) = exec_unsignalled(dbs, log, db, spec, args, now_ms, cfg);
    (reply, modified, started.elapsed())
}

/// Runs the handler, logs a successful write and counts it for the `save` schedule; returns
/// the reply and the keys the handler says it modified (none for a read or a failure).
fn exec_unsignalled(dbs: &mut [Db], log: &mut ShardLog, db: usize, spec: &'static Spec, args: &[Arg], now_ms: u64, cfg: CmdConfig) -> (Frame, KeysModified) {
    let (reply, modified, effect) = run_handler(dbs, db, spec, args, now_ms, cfg);
    match effect {
        Some(effect) => {
            log.log_effect(args, &effect, now_ms, db);
            log.note_change();
            (reply, modified)
        }
        None => (reply, KeysModified::NONE),
    }
}

/// Runs the handler: its reply, the keys it modified, and what it propagates (None for a
/// read or a failure; a read that changed stored bytes, PFCOUNT's cache, propagates too,
/// and has signalled WATCH itself).
pub fn run_handler(dbs: &mut [Db], db: usize, spec: &'static Spec, args: &[Arg], now_ms: u64, cfg: CmdConfig) -> (Frame, KeysModified, Option<Effect>) {
    let Handler::Keyed(f) = spec.handler else {
        return (Frame::error("ERR internal error: not a keyed command"), KeysModified::NONE, None);
    };
    // The eviction policy decides how lookups maintain the entries' metadata; databases learn
    // a change here (one comparison per command otherwise).
    let tracking = cfg.tracking();
    if dbs.first().is_some_and(|d| d.tracking() != tracking) {
        dbs.iter_mut().for_each(|d| d.set_tracking(tracking));
    }
    let (reply, modified, effect) = {
        let mut ctx = Ctx {
            dbs: &mut *dbs,
            db,
            now_ms,
            max_string_len: cfg.max_string_len,
            hll: cfg.hll,
            set_limits: cfg.set_limits,
            hash_limits: cfg.hash_limits,
            list_limits: cfg.list_limits,
            zset_limits: cfg.zset_limits,
            stream_limits: cfg.stream_limits,
            modified: KeysModified::ALL,
            effect: if spec.is_write() { Effect::Args } else { Effect::Nothing },
            notify_flags: cfg.notify,
            events: Vec::new(),
            events_said: false,
            hooks: &crate::shard::HOOKS,
        };
        // Notifications off: this one branch. (Turned off, the databases' journals stop
        // recording at the shard's next tick: `Shard::active_expire`.)
        if cfg.notify != 0 {
            return run_notifying(ctx, f, spec, args);
        }
        let reply = f(&mut ctx, args);
        (reply, ctx.modified, ctx.effect)
    };
    finish(reply, modified, effect, spec)
}

/// The end of [`run_handler`]: what the command returns for its reply.
#[inline(always)]
fn finish(reply: Frame, modified: KeysModified, effect: Effect, spec: &Spec) -> (Frame, KeysModified, Option<Effect>) {
    if reply.is_error() {
        return (reply, KeysModified::NONE, None);
    }
    if !spec.is_write() {
        return (reply, KeysModified::NONE, (effect != Effect::Nothing).then_some(effect));
    }
    (reply, modified, Some(effect))
}

/// [`run_handler`] with keyspace notifications on (or just turned off): the handler's events,
/// the databases' own, and the default ones of a write, published once it has run.
#[cold]
#[inline(never)]
fn run_notifying(mut ctx: Ctx<'_>, f: abacus_commands::command::KeyedFn, spec: &'static Spec, args: &[Arg]) -> (Frame, KeysModified, Option<Effect>) {
    let flags = ctx.notify_flags;
    // Events recorded outside any command (keys reclaimed by a fan-out...) happened before.
    crate::notify::publish_journals(ctx.dbs, flags);
    let reply = f(&mut ctx, args);
    crate::notify::drain_journals(ctx.dbs, &mut ctx.events);
    let (modified, effect) = (ctx.modified, ctx.effect);
    let mut events = std::mem::take(&mut ctx.events);
    if flags != 0 && spec.is_write() && !reply.is_error() && !ctx.events_said && !modified.is_none() {
        // Every modified key the handler said nothing about fires the command's name.
        let class = crate::notify::default_class(spec.group);
        if flags & class != 0 {
            let copy_db = copy_destination_db(spec, args);
            for (position, i) in spec.key_indexes(args).enumerate() {
                let key = &args[i][..];
                let d = if position == 1 { copy_db.unwrap_or(ctx.db) } else { ctx.db };
                if modified.contains(position) && !events.iter().any(|e| e.explicit && e.class != crate::notify::KEY_MISS && e.db == d && e.key == key) {
                    events.push(crate::notify::Event { db: d, class, name: spec.name, key: key.to_vec(), explicit: true });
                }
            }
        }
    }
    if reply.is_error() {
        // A failed command changed nothing; what its lookups did (an expired key reclaimed,
        // a miss) stands, as in Redis.
        events.retain(|e| e.class & (crate::notify::EXPIRED | crate::notify::KEY_MISS) != 0);
    }
    if flags & crate::notify::KEY_MISS != 0 && spec.is_write() && !crate::notify::write_reads(spec.name) {
        // Handlers of writes share read helpers; Redis's writes look keys up for writing,
        // which misses silently, except those in `notify::write_reads`.
        events.retain(|e| e.class != crate::notify::KEY_MISS);
    }
    crate::notify::publish_all(flags, &events);
    finish(reply, modified, effect, spec)
}

/// Raises the WATCH flags of the keys a write modified, each in its database.
fn signal_modified(dbs: &mut [Db], db: usize, spec: &Spec, args: &[Arg], modified: KeysModified) {
    let copy_db = copy_destination_db(spec, args);
    for (position, i) in spec.key_indexes(args).enumerate() {
        if modified.contains(position) {
            let d = if position == 1 { copy_db.unwrap_or(db) } else { db };
            if let Some(d) = dbs.get_mut(d) {
                d.signal_modified(&args[i]);
            }
        }
    }
}

/// Runs one keyed call on the shard that owns its keys, as a lone command: the `maxmemory`
/// gate, then the command (EXEC of a one-shard transaction).
pub fn run_on_shard(s: &mut Shard, db: usize, call: &Call, now: u64, cfg: CmdConfig, shards: usize) -> Frame {
    let writer = crate::shard::tracking_active().then(|| crate::shard::set_writer(call.client));
    let client = s.rec.set_client(call.client);
    let reply = with_no_touch(untouching(call.spec, call.no_touch), || run_lone(&mut s.dbs, &mut s.log, &mut s.rec, db, call.spec, &call.args, now, cfg, shards));
    s.rec.set_client(client);
    if let Some(w) = writer {
        crate::shard::set_writer(w);
    }
    reply
}

/// [`run_on_shard`] over a shard's databases, log buffer and recorders (a blocked client
/// served by `blocking.rs`).
#[allow(clippy::too_many_arguments)]
pub fn run_lone(dbs: &mut [Db], log: &mut ShardLog, rec: &mut ShardRecorders, db: usize, spec: &'static Spec, args: &[Arg], now: u64, cfg: CmdConfig, shards: usize) -> Frame {
    match admit(dbs, log, &rec.latency, spec, args, now, &cfg, shards) {
        Some(refused) => refused,
        None => exec_keyed(dbs, log, rec, db, spec, args, now, cfg),
    }
}

/// Redis's reply when a write would exceed `maxmemory` and nothing can be evicted.
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Most keys one command may evict before it runs: bounds the latency a single write can
/// take; the next writes continue where it stopped.
const MAX_EVICTIONS_PER_COMMAND: usize = 256;

/// The `maxmemory` gate, run on a shard before each command that may grow memory (DENYOOM).
/// Over the limit, it evicts keys of this shard by the configured policy — this shard's share
/// of the excess, since every shard sees the same process-wide figure — and refuses the
/// command with Redis's OOM error only if nothing could be evicted. A long eviction cycle is
/// reported to `latency`.
#[allow(clippy::too_many_arguments)]
fn admit(dbs: &mut [Db], log: &mut ShardLog, latency: &LatencyMonitor, spec: &Spec, args: &[Arg], now: u64, cfg: &CmdConfig, shards: usize) -> Option<Frame> {
    if cfg.maxmemory == 0 || !spec.has(abacus_commands::command::flags::DENYOOM) {
        return None;
    }
    let used = memory::used_bytes_cached(now);
    if used <= cfg.maxmemory {
        // The write may grow memory by about its arguments' size.
        memory::note_used(args.iter().map(|a| a.len() as u64).sum());
        return None;
    }
    if cfg.eviction == EvictionPolicy::NoEviction {
        return Some(Frame::error(ERR_OOM));
    }
    let mut to_free = (used - cfg.maxmemory) / shards.max(1) as u64 + 1;
    let mut evicted = 0;
    let eviction_started = latency.timer();
    let start = rand::random::<usize>();
    'evict: while evicted < MAX_EVICTIONS_PER_COMMAND {
        // Visit the databases from a random one so no database is always evicted first.
        for k in 0..dbs.len() {
            let d = (start + k) % dbs.len();
            if let Some((key, freed)) = dbs[d].evict_one(cfg.eviction, cfg.eviction_samples) {
                // Replay must not depend on which keys a random sample chose.
                log.log_command(now, d, &[abacus_commands::keys::DEL.name.as_bytes(), &key]);
                crate::notify::publish(cfg.notify, crate::notify::EVICTED, d, "evicted", &key);
                evicted += 1;
                memory::note_freed(freed as u64);
                to_free = to_free.saturating_sub(freed as u64);
                if to_free == 0 {
                    break 'evict;
                }
                continue 'evict;
            }
        }
        break;
    }
    latency.sample_since("eviction-cycle", eviction_started);
    if evicted == 0 {
        return Some(Frame::error(ERR_OOM));
    }
    None
}

/// The (database, key) pairs a command touches. Key positions come from the command table
/// ([`Spec::key_indexes`], numkeys commands included); COPY's `DB n` option names a second
/// database.
pub fn command_keys(spec: &Spec, args: &Args, db: usize) -> Vec<(usize, Bytes)> {
    let mut keys: Vec<(usize, Bytes)> = spec.key_indexes(args).map(|i| (db, args.bytes(i))).collect();
    if let (Some(n), Some(destination)) = (copy_destination_db(spec, args), keys.get_mut(1)) {
        destination.0 = n;
    }
    keys
}

/// The database named by COPY's `DB n` option (the last one given), where its second key,
/// the destination, lives: the only key of any command outside the selected database.
fn copy_destination_db(spec: &Spec, args: &[Arg]) -> Option<usize> {
    if spec.name != abacus_commands::keys::COPY.name {
        return None;
    }
    let mut found = None;
    let mut i = 3;
    while i + 1 < args.len() {
        if args[i].eq_ignore_ascii_case(b"db") {
            if let Some(n) = std::str::from_utf8(&args[i + 1]).ok().and_then(|s| s.parse::<usize>().ok()) {
                found = Some(n);
            }
        }
        i += 1;
    }
    found
}

impl Worker {
    pub fn shards(&self) -> usize {
        self.engine.senders.len()
    }

    /// Counts a connection-level command of this thread in INFO commandstats (its shard's
    /// table: this thread's). Not called while a job holds the shard.
    pub fn record(&self, name: &'static str, took: std::time::Duration, failed: bool) {
        self.shard.borrow_mut().rec.record(name, took, failed);
    }

    /// Counts a command of this thread refused before execution (INFO commandstats
    /// `rejected_calls`).
    pub fn record_rejected(&self, name: &'static str) {
        self.shard.borrow_mut().rec.commands.record_rejected(name);
    }

    /// The shard that owns every key of the call, or None if its keys span shards. Keyless
    /// keyed commands (e.g. OBJECT HELP) run on the local shard. The keys are those of
    /// [`command_keys`] (both read [`Spec::key_indexes`]); a second database (COPY ... DB n)
    /// does not change the shard, which depends on the key name only.
    pub fn single_shard(&self, call: &Call) -> Option<usize> {
        let n = self.shards();
        if n == 1 {
            return Some(0);
        }
        let mut it = call.spec.key_indexes(&call.args);
        let Some(first) = it.next() else { return Some(self.shard_id) };
        let s = shard_of(&call.args[first], n);
        if n == 1 || it.all(|i| shard_of(&call.args[i], n) == s) {
            Some(s)
        } else {
            None
        }
    }

    /// Runs `f` on `shard` and returns its result; None if the shard is gone.
    pub async fn run<R, F>(&self, access: Access<'_>, shard: usize, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Shard) -> R + Send + 'static,
    {
        match access {
            Access::Locked(locks) if locks.holds(shard) => {
                let (tx, rx) = oneshot::channel();
                let job: Job = Box::new(move |s| {
                    let _ = tx.send(f(s));
                });
                locks.held.get(&shard)?.send(job).ok()?;
                rx.await.ok()
            }
            _ => {
                if shard == self.shard_id && self.local_runnable() {
                    let mut s = self.shard.borrow_mut();
                    let r = f(&mut s);
                    if !s.blocked.is_empty() {
                        crate::blocking::serve_ready(&mut s, self.engine.config.cmd_config(), self.shards());
                    }
                    return Some(r);
                }
                let (tx, rx) = oneshot::channel();
                let job: Job = Box::new(move |s| {
                    let _ = tx.send(f(s));
                });
                self.engine.senders.get(shard)?.send(ShardMsg::Run(job)).await.ok()?;
                rx.await.ok()
            }
        }
    }

    /// Runs `f` on every shard (concurrently) and returns the results in shard order.
    pub async fn run_all<R, F>(&self, access: Access<'_>, f: F) -> Option<Vec<R>>
    where
        R: Send + 'static,
        F: Fn(&mut Shard) -> R + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        if let Access::Free = access {
            // One job per shard, entering the queues together: the fan-out sees every shard
            // at one point of the order of multi-shard work (`order.rs`), as a client expects
            // of one command (KEYS never shows a batch's later key without its earlier one).
            let mut replies = Vec::with_capacity(self.shards());
            let mut messages = Vec::with_capacity(self.shards());
            let mut local = None;
            for shard in 0..self.shards() {
                let (tx, rx) = oneshot::channel();
                let f = f.clone();
                let job: Job = Box::new(move |s| {
                    let _ = tx.send(f(s));
                });
                if shard == self.shard_id {
                    local = Some((shard, ShardMsg::RunOrdered(job)));
                } else {
                    messages.push((shard, ShardMsg::RunOrdered(job)));
                }
                replies.push(rx);
            }
            let sent = self.engine.order.send_all(&self.engine.senders, messages, local, || self.shard.borrow().locked).await.ok()?;
            if let Some(ShardMsg::RunOrdered(job) | ShardMsg::Run(job)) = sent {
                job(&mut self.shard.borrow_mut());
            }
            let mut out = Vec::with_capacity(replies.len());
            for rx in replies {
                out.push(rx.await.ok()?);
            }
            return Some(out);
        }
        let mut pending = Vec::with_capacity(self.shards());
        for shard in 0..self.shards() {
            let f = f.clone();
            pending.push(self.spawn_job(access, shard, move |s: &mut Shard| f(s)).await?);
        }
        let mut out = Vec::with_capacity(pending.len());
        for rx in pending {
            out.push(rx.await.ok()?);
        }
        Some(out)
    }

    /// Sends a job without waiting for it; the receiver yields its result.
    pub async fn spawn_job<R, F>(&self, access: Access<'_>, shard: usize, f: F) -> Option<oneshot::Receiver<R>>
    where
        R: Send + 'static,
        F: FnOnce(&mut Shard) -> R + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |s| {
            let _ = tx.send(f(s));
        });
        match access {
            Access::Locked(locks) if locks.holds(shard) => locks.held.get(&shard)?.send(job).ok()?,
            _ => self.engine.senders.get(shard)?.send(ShardMsg::Run(job)).await.ok()?,
        }
        Some(rx)
    }

    /// Locks `shards`. The `Lock` messages enter their queues together (`order.rs`), so any
    /// two lockers are granted their common shards in the same order and never wait in a
    /// cycle, and the locked operation takes its place in the order of multi-shard work.
    pub async fn lock(&self, shards: impl IntoIterator<Item = usize>) -> Option<Locks> {
        let mut wanted: Vec<usize> = shards.into_iter().collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut grants = Vec::with_capacity(wanted.len());
        let mut messages = Vec::with_capacity(wanted.len());
        for &shard in &wanted {
            let (tx, rx) = oneshot::channel();
            messages.push((shard, ShardMsg::Lock(tx)));
            grants.push((shard, rx));
        }
        self.engine.order.send_all(&self.engine.senders, messages, None, || false).await.ok()?;
        let mut locks = Locks { held: BTreeMap::new(), log: RefCell::default(), durability: self.engine.durability.clone() };
        for (shard, rx) in grants {
            locks.held.insert(shard, rx.await.ok()?);
        }
        Some(locks)
    }

    /// Whether this thread may run work on its own shard in place, without a message: the
    /// shard is not locked and no part of a multi-shard operation waits in its queue
    /// (`order.rs`).
    pub fn local_runnable(&self) -> bool {
        !self.shard.borrow().locked && !self.engine.order.pending(self.shard_id)
    }

    /// Runs a batch of single-shard calls (each call's keys on one shard) and returns their
    /// replies in order. The group for this thread's own shard runs in place; the others are
    /// queued with this tick's other groups for their shards (see `hop.rs`).
    pub async fn run_batch(&self, db: usize, calls: Vec<(usize, Call)>) -> Vec<Frame> {
        let total_shards = self.shards();
        let cfg = self.engine.config.cmd_config();
        let local_free = self.local_runnable();
        let n = calls.len();
        // Fast path: everything on this thread's own, unlocked shard (always so with one
        // shard): the replies come back in order, no regrouping needed.
        if local_free && calls.iter().all(|(s, _)| *s == self.shard_id) {
            let group = calls.into_iter().enumerate().map(|(i, (_, c))| (i, c)).collect();
            let done = run_group_deferred(&mut self.shard.borrow_mut(), db, group, cfg, total_shards);
            // Pushed into a fresh vector: an in-place collect into the smaller `Frame` would
            // shrink the buffer with a realloc.
            let mut replies = Vec::with_capacity(done.len());
            replies.extend(done.into_iter().map(|(_, r)| r));
            return replies;
        }
        let mut groups: Vec<Vec<(usize, Call)>> = (0..total_shards).map(|_| Vec::new()).collect();
        for (i, (shard, call)) in calls.into_iter().enumerate() {
            if let Some(g) = groups.get_mut(shard) {
                if g.capacity() == 0 {
                    // Room for the rest of the batch at once: growing 4, 8, 16... costs a
                    // reallocation each (a pipeline on one hot key puts everything in one group).
                    g.reserve_exact(n - i);
                }
                g.push((i, call));
            }
        }
        let mut replies: Vec<Option<Frame>> = (0..n).map(|_| None).collect();
        let mut pending = Vec::new();
        let mut local = Vec::new();
        // A batch on several shards takes effect in order for every other client: its
        // groups, this shard's included, enter their queues together (`order.rs`).
        let ordered = groups.iter().filter(|g| !g.is_empty()).count() > 1 && !self.engine.config.relaxed_batch_order();
        for (shard, group) in groups.into_iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            if ordered {
                pending.push(self.hops.send_ordered(shard, db, group, cfg));
                continue;
            }
            if shard == self.shard_id && local_free {
                local = group;
                continue;
            }
            pending.push(self.hops.send(shard, db, group, cfg));
        }
        if !local.is_empty() {
            // Sending the other groups may have yielded, and a multi-shard operation (or a
            // snapshot's start) may have locked this shard meanwhile: then the group must
            // queue behind the lock like everyone else's.
            if !self.local_runnable() {
                let shard = self.shard_id;
                let job = move |s: &mut Shard| run_group_logged(s, db, local, cfg, total_shards);
                if let Some(rx) = self.spawn_job(Access::Free, shard, job).await {
                    pending.push(rx);
                }
            } else {
                let mut s = self.shard.borrow_mut();
                for (i, r) in run_group_deferred(&mut s, db, local, cfg, total_shards) {
                    replies[i] = Some(r);
                }
            }
        }
        for rx in pending {
            if let Ok(done) = rx.await {
                for (i, r) in done {
                    replies[i] = Some(r);
                }
            }
        }
        replies.into_iter().map(|r| r.unwrap_or_else(shutting_down)).collect()
    }

    /// Runs one keyed call wherever its keys are: on their shard, or atomically across
    /// several shards by checking the keys out (see the file comment).
    pub async fn run_keyed(&self, access: Access<'_>, db: usize, call: Call) -> Frame {
        self.run_keyed_serving(access, db, call, None).await
    }

    /// [`Worker::run_keyed`] for a blocked client woken by `serving`, a key of it on another
    /// shard (see `blocking::serving_key`): a command spanning shards runs here, on checked-out
    /// keys, as the serving of that key.
    pub async fn run_keyed_serving(&self, access: Access<'_>, db: usize, call: Call, serving: Option<Bytes>) -> Frame {
        let cfg = self.engine.config.cmd_config();
        let keys = command_keys(call.spec, &call.args, db);
        let n = self.shards();
        let mut shards: Vec<usize> = keys.iter().map(|(_, k)| shard_of(k, n)).collect();
        shards.sort_unstable();
        shards.dedup();
        if shards.len() <= 1 {
            let shard = shards.first().copied().unwrap_or(self.shard_id);
            let Call { spec, args, client, no_touch } = call;
            let no_touch = untouching(spec, no_touch);
            let shards_total = n;
            // Inside a transaction the log commands go back to the coordinator, which writes
            // the whole transaction as one record; otherwise they are written right here, on
            // the shard's thread, so the log keeps the shard's execution order.
            let in_tx = matches!(access, Access::Locked(l) if l.holds(shard));
            let done = self
                .run(access, shard, move |s| {
                    let now = now_ms();
                    let tracked = crate::shard::tracking_active();
                    if tracked {
                        crate::shard::set_writer(client);
                    }
                    let named = s.rec.set_client(client);
                    let reply = with_no_touch(no_touch, || match admit(&mut s.dbs, &mut s.log, &s.rec.latency, spec, &args, now, &cfg, shards_total) {
                        Some(refused) => refused,
                        None => exec_keyed(&mut s.dbs, &mut s.log, &mut s.rec, db, spec, &args, now, cfg),
                    });
                    s.rec.set_client(named);
                    if tracked {
                        crate::shard::set_writer(0);
                    }
                    let log = if in_tx { s.log.take_pending() } else { s.log.flush_pending(); Vec::new() };
                    (reply, log)
                })
                .await;
            return match done {
                Some((reply, log)) => {
                    if let Access::Locked(l) = access {
                        l.add_log(log);
                    }
                    reply
                }
                None => shutting_down(),
            };
        }
        let own_locks;
        let access = match access {
            Access::Locked(l) if shards.iter().all(|s| l.holds(*s)) => access,
            _ => {
                let Some(l) = self.lock(shards.iter().copied()).await else { return shutting_down() };
                own_locks = l;
                Access::Locked(&own_locks)
            }
        };
        self.run_checked_out(access, db, call, keys, serving).await
    }

    async fn run_checked_out(&self, access: Access<'_>, db: usize, call: Call, keys: Vec<(usize, Bytes)>, serving: Option<Bytes>) -> Frame {
        // The maxmemory gate for commands spanning shards: they cannot evict from a scratch
        // keyspace, so under noeviction they are refused here; with an eviction policy the
        // next single-shard write evicts.
        let cfg = self.engine.config.cmd_config();
        if cfg.maxmemory > 0
            && call.spec.has(abacus_commands::command::flags::DENYOOM)
            && cfg.eviction == EvictionPolicy::NoEviction
            && memory::used_bytes_cached(now_ms()) > cfg.maxmemory
        {
            return Frame::error(ERR_OOM);
        }
        let n = self.shards();
        let databases = self.engine.databases;
        let now = now_ms();
        let mut scratch: Vec<Db> = (0..databases).map(|_| Db::new()).collect();
        // Each key with its position among the command's keys (what the handler's
        // `modified` refers to).
        let mut by_shard: BTreeMap<usize, Vec<(usize, usize, Bytes)>> = BTreeMap::new();
        // Keys checked out already expired: reclaimed on the scratch keyspace, counted and
        // signalled (WATCH) on their shards at check-in, as their shard would have.
        let mut expired_out: Vec<(usize, Bytes)> = Vec::new();
        for (position, (d, k)) in keys.iter().enumerate() {
            if *d < databases {
                by_shard.entry(shard_of(k, n)).or_default().push((position, *d, k.clone()));
            }
        }
        for (&shard, ks) in &by_shard {
            let ks: Vec<(usize, Bytes)> = ks.iter().map(|(_, d, k)| (*d, k.clone())).collect();
            let taken = self
                .run(access, shard, move |s| {
                    // Expired entries travel too: the handler's lookups reclaim them, with their
                    // "expired" events in the command's order, as on one shard.
                    ks.into_iter().filter_map(|(d, k)| s.dbs[d].remove_entry(&k).map(|e| (d, k, e))).collect::<Vec<(usize, Bytes, Detached)>>()
                })
                .await;
            let Some(taken) = taken else { return shutting_down() };
            for (d, k, e) in taken {
                if e.expire_at_ms != 0 && e.expire_at_ms <= now {
                    expired_out.push((d, k.clone()));
                }
                scratch[d].insert_entry(&k, e);
            }
        }
        let cfg = self.engine.config.cmd_config();
        // The operation's log commands, for the coordinator's record (see `aof.rs`).
        let mut log = ShardLog::new(self.engine.durability.clone());
        let (reply, modified, took) = with_no_touch(untouching(call.spec, call.no_touch), || {
            crate::blocking::serving(serving, || exec_checked_out(&mut scratch, &mut log, db, call.spec, &call.args, now, cfg))
        });
        // Counted on the coordinator's thread, as a command of its client.
        self.shard.borrow_mut().rec.record(call.spec.name, took, reply.is_error());
        self.engine.recorders.observe(call.spec, took, &call.args, None, call.client);
        match access {
            Access::Locked(l) => {
                // Commands deferred on this thread's shard ran before the operation: they are
                // written first, so the log keeps this thread's order.
                self.shard.borrow_mut().log.flush_deferred();
                l.add_log(log.take_pending());
            }
            // Not reached (`run_keyed_serving` locks first); written at once if it were.
            Access::Free => {
                log.flush_pending();
            }
        }
        for (shard, ks) in by_shard {
            let back: Vec<(usize, Bytes, Option<Detached>, bool, bool)> = ks
                .into_iter()
                .map(|(position, d, k)| {
                    let e = scratch[d].remove_entry(&k);
                    let expired = expired_out.iter().any(|(ed, ek)| *ed == d && *ek == k);
                    let reclaimed = expired && e.is_none();
                    (d, k, e, modified.contains(position) || expired, reclaimed)
                })
                .collect();
            let client = call.client;
            let done = self
                .run(access, shard, move |s| {
                    let writer = crate::shard::set_writer(client);
                    for (d, k, e, signal, reclaimed) in back {
                        if let Some(e) = e {
                            s.dbs[d].insert_entry(&k, e);
                        }
                        if reclaimed {
                            s.dbs[d].expired_keys_total += 1;
                        }
                        if signal {
                            s.dbs[d].signal_modified(&k);
                        }
                    }
                    crate::shard::set_writer(writer);
                })
                .await;
            if done.is_none() {
                return shutting_down();
            }
        }
        reply
    }
}

/// Runs a group of single-shard calls. The caller writes the group's log commands
/// ([`run_group_logged`], or once for several groups in [`run_groups`]) before the replies
/// leave the shard's thread. The clock is read once for the group and its time is
/// shared among the calls in INFO commandstats: two clock reads per command would cost a
/// noticeable share of a pipelined GET.
fn run_group(s: &mut Shard, db: usize, group: Vec<(usize, Call)>, cfg: CmdConfig, shards: usize) -> Vec<(usize, Frame)> {
    let started = Instant::now();
    let now = now_ms();
    let n = group.len().max(1) as u32;
    // Start every key's memory loads before executing the first command: a pipeline of random
    // keys is bound by cache misses, and this lets them overlap instead of queueing.
    // A key equal to the previous command's is already on its way (a pipeline on one hot key
    // would otherwise hash it twice per command). Two passes: every key's segment header
    // first, then (the header giving the slot's address) every slot. In one pass each
    // prefetch waited for its header when headers were out of cache, as they are while a
    // snapshot sweeps the table: 5-15% less server CPU per APPEND on W1 (7.8M keys).
    // Without a sweep and at 1M keys (W3) it measured the same as one pass.
    if let Some(d) = s.dbs.get(db) {
        if group.len() > 1 {
            // Sketch adds (HLL.ADD*, PFADD) and APPEND reach further behind the slot (see
            // `Db::prefetch_values`: a string's first lines), which needs the keys' hashes;
            // not for a group on one hot key, whose value stays in cache anyway. APPEND copies
            // its old bytes when the buffer grows: prefetching them took W1's server CPU per
            // append from 0.77-0.80 to 0.66-0.75 us (`bench/ab.sh`, no persistence).
            let reads_value = |spec: &Spec| spec.has(abacus_commands::command::flags::PREFETCH_VALUE);
            let value_reads = group.first().is_some_and(|(_, c)| reads_value(c.spec));
            let mut values: Vec<(u64, &[u8])> = Vec::new();
            let mut previous: &[u8] = &[];
            let mut hashes: Vec<u64> = Vec::with_capacity(group.len());
            for (_, c) in &group {
                if let Some(i) = c.spec.key_indexes(&c.args).next() {
                    let key = &c.args[i][..];
                    if key != previous {
                        let hash = d.prefetch_segment(key);
                        hashes.push(hash);
                        previous = key;
                        if value_reads && reads_value(c.spec) {
                            values.push((hash, key));
                        }
                    }
                }
            }
            for h in hashes {
                d.prefetch_hashed(h);
            }
            if values.len() > 1 {
                d.prefetch_values(values.into_iter());
            }
        }
    }
    // With the slow log or the latency monitor on, each command of a group of several reads
    // the cycle counter (a few instructions: `slowlog.rs` explains), and only a group whose
    // wall time reached the lower threshold has its commands' durations worked out and
    // offered to both (no command of a faster group can have reached it). A group of one
    // command needs no counter: its duration is the group's.
    let threshold = s.rec.threshold_us();
    let counting = threshold.is_some() && group.len() > 1;
    let cycles_started = if counting { s.rec.slowlog.cycles() } else { 0 };
    // CLIENT TRACKING's NOLOOP needs the writer (one connection's group): set only while
    // some client tracks.
    let writer = crate::shard::tracking_active().then(|| crate::shard::set_writer(group.first().map_or(0, |(_, c)| c.client)));
    // The calls stay in `group` (borrowed here) until the durations are known: a slow
    // command's entry keeps its arguments.
    let out: Vec<(usize, Frame, &'static str, u64)> = group
        .iter()
        .map(|(i, c)| {
            let reply = with_no_touch(untouching(c.spec, c.no_touch), || match admit(&mut s.dbs, &mut s.log, &s.rec.latency, c.spec, &c.args, now, &cfg, shards) {
                Some(refused) => refused,
                None => exec_keyed_untimed(&mut s.dbs, &mut s.log, db, c.spec, &c.args, now, cfg),
            });
            // Clients blocked on keys this command made ready are served before the next
            // command runs (`LPUSH k v; LPOP k` in one pipeline: the blocked client gets v).
            crate::blocking::serve_ready(s, cfg, shards);
            let cycles = if counting { s.rec.slowlog.cycles() } else { 0 };
            (*i, reply, c.spec.name, cycles)
        })
        .collect();
    if let Some(w) = writer {
        crate::shard::set_writer(w);
    }
    let wall = started.elapsed();
    if let Some(threshold) = threshold {
        if wall.as_micros() >= u128::from(threshold) {
            observe_group(&s.rec, &group, &out, wall, cycles_started);
        }
    }
    drop(group);
    let each = wall / n;
    // Not `into_iter().map().collect()`: collecting in place into smaller tuples makes the
    // allocator shrink the buffer, a realloc per group (a fifth of a -P 1 GET's instructions).
    let mut replies = Vec::with_capacity(out.len());
    // Statistics per run of one command (a pipeline usually repeats one).
    let mut run: (&'static str, u32, u64) = ("", 0, 0);
    for (i, reply, name, _) in out {
        // Names are the command table's `&'static str`s: comparing the pointers is enough
        // (two equal names at different addresses would only split a run).
        if name.as_ptr() != run.0.as_ptr() || name.len() != run.0.len() {
            if run.1 > 0 {
                s.rec.record_many(run.0, u64::from(run.1), each * run.1, run.2);
            }
            run = (name, 0, 0);
        }
        run.1 += 1;
        run.2 += u64::from(reply.is_error());
        replies.push((i, reply));
    }
    if run.1 > 0 {
        s.rec.record_many(run.0, u64::from(run.1), each * run.1, run.2);
    }
    replies
}

/// Offers each command of a group that took `wall` to `rec`'s slow log and latency monitor,
/// with its share of `wall` in proportion to the cycles it took (`slowlog::share`): the
/// counter was read at `cycles_started` and after each command (`out`'s last field).
#[cold]
fn observe_group(rec: &Recorders, group: &[(usize, Call)], out: &[(usize, Frame, &'static str, u64)], wall: std::time::Duration, cycles_started: u64) {
    let n = u32::try_from(group.len()).unwrap_or(u32::MAX);
    if group.len() == 1 {
        let c = &group[0].1;
        rec.observe(c.spec, wall, &c.args, None, c.client);
        return;
    }
    // Each command's cycles since the one before; a counter that went back (a thread moved
    // to a core whose counter lags) counts as none.
    let mut previous = cycles_started;
    let taken: Vec<u64> = out
        .iter()
        .map(|o| {
            let t = o.3.saturating_sub(previous);
            previous = previous.max(o.3);
            t
        })
        .collect();
    let total = taken.iter().fold(0u64, |a, &t| a.saturating_add(t));
    for ((_, c), &t) in group.iter().zip(&taken) {
        rec.observe(c.spec, crate::slowlog::share(wall, t, total, n), &c.args, None, c.client);
    }
}
