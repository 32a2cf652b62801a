//! Running a script (EVAL, FCALL) on the shards: the [`Host`] a script's `redis.call`
//! reaches, and the jobs that run the script.
//!
//! First, optimistically, on its keys' shard alone ([`run_local`]): a script whose declared
//! keys all live on one shard runs there as one job (in place when that is the connection's
//! own shard), with no lock and nothing sent anywhere else, like a command on those keys;
//! scripts on different shards run in parallel. If it reaches for a key of another shard (a
//! key it did not declare), or for something only the all-shards mode offers (PUBLISH,
//! DBSIZE, a write while keyspace notifications are on, a write to a value too large to keep
//! a copy of), it steps back: each value it wrote was copied before its first write (so the
//! copies are small: at most `UNDO_VALUE_BYTES` each), the copies are put back, its log
//! commands are dropped, and it runs again in the all-shards mode below. Stepping back
//! leaves no trace a client can see: the job holds its shard throughout, and nothing it did
//! left the shard (replies, log, notifications). What can repeat: `redis.log` lines and the
//! draws of `math.random` (the rerun draws the next numbers).
//!
//! The all-shards mode, how a script is atomic across shards with keys it did not declare:
//! the connection locks every shard (`Worker::lock`, in the order of multi-shard work:
//! `order.rs`), then sends the script as one job to the shard of its first declared key (its
//! own shard without keys), whose thread runs the Lua state it owns. A command on that
//! shard's keys runs in place; a command on another shard's keys is sent over the private
//! channel of that shard's lock and the script's thread waits for its reply; a command on
//! keys of several shards checks them out as a multi-key command does (`exec.rs`). Nothing
//! else runs on any shard meanwhile, so no client sees a script half done, and a key the
//! script did not declare is simply another command to route. Why every shard and not the
//! declared keys' shards, taking others when first touched: taking a shard in the middle of
//! a script, while holding others, can wait in a cycle with another locker (each holds what
//! the other wants), and a script that already wrote cannot step back to avoid it. The
//! price: scripts run one at a time, as in Redis. See `docs/ARCHITECTURE.md`, "Scripts".
//!
//! The script's thread may block on another shard's reply: that shard is locked by this
//! script, so its task runs nothing but this script's jobs and never waits on anything.
//!
//! Effects, not scripts, are logged: each command's log records join, in order, the lock's
//! record, written as one when the locks are released, so replay and replicas apply the
//! script's effects atomically and never run Lua (random numbers, TIME and SPOP give the
//! same data everywhere).

use std::collections::BTreeMap;
use std::sync::Arc;

use abacus_engine::config::CmdConfig;
use abacus_engine::exec::{self, command_keys, Call};
use abacus_engine::shard::{now_ms, shard_of, Job, Shard};
use abacus_keyspace::{Db, Detached};
use abacus_protocol::{Args, Bytes, Frame};
use abacus_scripting::{Host, Invocation, Library, Shared, Vm};
use tokio::sync::mpsc::UnboundedSender;

use crate::command::{self, flags, Handler};

/// What a script job runs.
pub enum Script {
    Eval { sha: String, body: Bytes },
    Function { lib: Library, name: String },
}

/// A script invocation, as the connection hands it to the shard that runs it.
pub struct ScriptRun {
    pub script: Script,
    pub keys: Vec<Bytes>,
    pub args: Vec<Bytes>,
    pub db: usize,
    pub client: u64,
    pub user: Arc<crate::acl::User>,
    /// EVAL_RO, FCALL_RO, `no-writes`: write commands are refused.
    pub read_only: bool,
    pub caller_resp3: bool,
    /// Cluster mode: what the script's commands are checked against.
    pub cluster: Option<ScriptCluster>,
}

/// Cluster mode: a script's commands may reach only keys this node serves, as Redis 7.0's
/// `scriptVerifyClusterState` checks them: each command goes through the redirection check
/// with the caller's ASKING and READONLY, and what would be redirected (or refused: cluster
/// down, keys of several slots in one command) fails with Redis's script error instead.
/// Keys of different slots in different commands are allowed, as in 7.0.
#[derive(Clone)]
pub struct ScriptCluster {
    pub node: Arc<crate::cluster::ClusterNode>,
    pub engine: Arc<abacus_engine::engine::Engine>,
    pub asking: bool,
    pub readonly: bool,
    pub tls: bool,
}

/// Redis's texts for a script's command that the cluster does not serve here.
fn cluster_refusal(redirect_error: &[u8]) -> Frame {
    Frame::error(if redirect_error.starts_with(b"CLUSTERDOWN The cluster is down and only accepts read commands") {
        "ERR Script attempted to execute a write command while the cluster is down and readonly"
    } else if redirect_error.starts_with(b"CLUSTERDOWN The cluster is down") {
        "ERR Script attempted to execute a command while the cluster is down"
    } else {
        "ERR Script attempted to access a non local key in a cluster node"
    })
}

/// What a script job gives back.
pub struct Outcome {
    pub reply: Frame,
    /// The script's effects, in order, for the lock's one record.
    pub log: Vec<u8>,
}

/// Runs a script on `s`, the shard of its first key, every other shard reachable through
/// `remote` (locked by the caller).
pub fn run(s: &mut Shard, run: ScriptRun, remote: BTreeMap<usize, UnboundedSender<Job>>, shared: Arc<Shared>, cfg: CmdConfig, shards: usize, durability: Arc<abacus_engine::durability::Durability>) -> Outcome {
    let mut vm = match vm_of(s, &shared) {
        Ok(vm) => vm,
        Err(e) => return Outcome { reply: e, log: Vec::new() },
    };
    let id = s.id;
    let wrote = Arc::new(std::sync::atomic::AtomicBool::new(false));
    shared.start(id, run.running(), vm.kill_flag(), wrote.clone());
    let ScriptRun { script, keys, args, db, client, user, read_only, caller_resp3, cluster } = run;
    let inv = Invocation { keys: &keys, args: &args, caller_resp3 };
    let mut host = ShardHost { s, remote, db, client, user, read_only, cfg, shards, durability, log: Vec::new(), repl: 3, wrote, local: None, cluster };
    let reply = match &script {
        Script::Eval { sha, body } => vm.eval(sha, body, inv, &mut host),
        Script::Function { lib, name } => vm.fcall(lib, name, inv, &mut host),
    };
    let log = std::mem::take(&mut host.log);
    shared.finish(id);
    shared.note_lua_memory(id, vm.used_memory() as u64);
    s.lua = Some(vm);
    Outcome { reply, log }
}

/// The largest value a script running on one shard copies before writing it (see the file
/// comment): a write to a larger one moves the script to the all-shards mode first.
pub const UNDO_VALUE_BYTES: usize = 64 << 10;

fn vm_of(s: &mut Shard, shared: &Arc<Shared>) -> Result<Box<Vm>, Frame> {
    match s.lua.take() {
        Some(vm) => Ok(vm),
        None => match Vm::new(shared.clone(), crate::node::REDIS_VERSION, REDIS_VERSION_NUM) {
            Ok(vm) => Ok(Box::new(vm)),
            Err(e) => Err(Frame::error(format!("ERR cannot start the Lua engine: {e}"))),
        },
    }
}

/// Runs a script on `s` alone (see the file comment). `Err` gives the invocation back when
/// the script must run again with every shard held; nothing it did remains.
pub fn run_local(s: &mut Shard, run: ScriptRun, shared: Arc<Shared>, cfg: CmdConfig, shards: usize, durability: Arc<abacus_engine::durability::Durability>) -> Result<Frame, ScriptRun> {
    let mut vm = match vm_of(s, &shared) {
        Ok(vm) => vm,
        Err(e) => return Ok(e),
    };
    // Whatever this thread's earlier batches left in the log buffer goes first: the buffer
    // then holds this script's effects only.
    s.log.flush_pending();
    let id = s.id;
    let kill = vm.kill_flag();
    let wrote = Arc::new(std::sync::atomic::AtomicBool::new(false));
    shared.start(id, run.running(), kill.clone(), wrote.clone());
    let ScriptRun { script, keys, args, db, client, user, read_only, caller_resp3, cluster } = run;
    let (reply, undo, escalated) = {
        let inv = Invocation { keys: &keys, args: &args, caller_resp3 };
        let mut host = ShardHost {
            s: &mut *s,
            remote: BTreeMap::new(),
            db,
            client,
            user: user.clone(),
            read_only,
            cfg,
            shards,
            durability,
            log: Vec::new(),
            repl: 3,
            wrote: wrote.clone(),
            local: Some(Local { undo: Vec::new(), escalated: false, kill }),
            cluster: cluster.clone(),
        };
        let reply = match &script {
            Script::Eval { sha, body } => vm.eval(sha, body, inv, &mut host),
            Script::Function { lib, name } => vm.fcall(lib, name, inv, &mut host),
        };
        let local = host.local.take().unwrap_or(Local { undo: Vec::new(), escalated: false, kill: Arc::default() });
        (reply, local.undo, local.escalated)
    };
    shared.finish(id);
    shared.note_lua_memory(id, vm.used_memory() as u64);
    s.lua = Some(vm);
    if escalated {
        drop(s.log.take_pending());
        for (d, k, copy) in undo.into_iter().rev() {
            s.dbs[d].remove_entry(&k);
            if let Some(copy) = copy {
                s.dbs[d].insert_entry(&k, copy);
            }
        }
        return Err(ScriptRun { script, keys, args, db, client, user, read_only, caller_resp3, cluster });
    }
    // The script's effects: one record, before its reply leaves.
    s.log.flush_pending();
    Ok(reply)
}

/// A script running on one shard: the copies of what it wrote, whether it stepped back.
struct Local {
    undo: Vec<(usize, Bytes, Option<Detached>)>,
    escalated: bool,
    /// The Lua state's kill flag: stepping back stops the script as SCRIPT KILL would.
    kill: Arc<std::sync::atomic::AtomicBool>,
}

impl ScriptRun {
    fn running(&self) -> abacus_scripting::Running {
        let (function, name) = match &self.script {
            Script::Eval { sha, .. } => (false, sha.clone()),
            Script::Function { name, .. } => (true, name.clone()),
        };
        abacus_scripting::Running { function, name, started_ms: now_ms() }
    }
}

pub use crate::node::REDIS_VERSION_NUM;

struct ShardHost<'a> {
    s: &'a mut Shard,
    remote: BTreeMap<usize, UnboundedSender<Job>>,
    db: usize,
    client: u64,
    user: Arc<crate::acl::User>,
    read_only: bool,
    cfg: CmdConfig,
    shards: usize,
    durability: Arc<abacus_engine::durability::Durability>,
    log: Vec<u8>,
    /// `redis.set_repl`: whether effects are propagated (any bit) or not (0).
    repl: u8,
    /// Whether the script has written (SCRIPT KILL then refuses).
    wrote: Arc<std::sync::atomic::AtomicBool>,
    /// Running on this shard alone (see the file comment); None: every shard held.
    local: Option<Local>,
    /// Cluster mode: the checks of [`ScriptCluster`].
    cluster: Option<ScriptCluster>,
}

impl ShardHost<'_> {
    /// Runs a checked command: on this shard alone, or wherever its keys are.
    fn dispatch(&mut self, spec: &'static command::Spec, args: Args) -> Frame {
        if self.local.is_some() {
            return self.local_call(spec, args);
        }
        match spec.handler {
            Handler::Keyed(_) => self.keyed(spec, args),
            Handler::Conn(_) => self.connection_level(spec, &args),
        }
    }

    /// Cluster mode: the refusal of a command whose keys this node does not serve (see
    /// [`ScriptCluster`]); None to run it.
    fn cluster_check(&mut self, spec: &'static command::Spec, args: &Args) -> Option<Frame> {
        let c = self.cluster.as_ref()?;
        match c.node.redirect(spec, args, c.asking, c.readonly, c.tls, &c.engine.config)? {
            crate::cluster::Redirect::Reply(Frame::Error(e)) => Some(cluster_refusal(&e)),
            crate::cluster::Redirect::Reply(_) => Some(cluster_refusal(b"")),
            crate::cluster::Redirect::CheckKeys(check) => {
                // A slot in migration: which keys exist here decides, as for a client.
                let keys: Vec<Bytes> = spec.key_indexes(args).filter_map(|i| args.get(i).map(|a| Bytes::copy_from_slice(a))).collect();
                let mut existing = 0;
                for k in &keys {
                    let exists = Args::from_vec(vec![Bytes::from_static(b"EXISTS"), k.clone()]);
                    let spec = command::lookup_call(&exists)?;
                    if let Frame::Integer(1) = self.dispatch(spec, exists) {
                        existing += 1;
                    }
                }
                check.verdict(existing, keys.len() - existing).map(|_| cluster_refusal(b""))
            }
        }
    }

    /// Runs `f` on `shard` (in place, or on its thread through its lock) and waits.
    fn on<R: Send + 'static>(&mut self, shard: usize, f: impl FnOnce(&mut Shard) -> R + Send + 'static) -> Option<R> {
        if shard == self.s.id {
            return Some(f(self.s));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let job: Job = Box::new(move |s| {
            let _ = tx.send(f(s));
        });
        self.remote.get(&shard)?.send(job).ok()?;
        rx.recv().ok()
    }

    fn add_log(&mut self, payload: Vec<u8>) {
        if self.repl != 0 && !payload.is_empty() {
            self.log.extend_from_slice(&payload);
            self.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Stops a script running on one shard: it will run again with every shard held.
    fn step_back(&mut self) -> Frame {
        if let Some(l) = self.local.as_mut() {
            l.escalated = true;
            l.kill.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Frame::error("ERR the script moves to the all-shards mode")
    }

    /// A call of a script running on one shard: runs it here if it can be undone.
    fn local_call(&mut self, spec: &'static command::Spec, args: Args) -> Frame {
        if !matches!(spec.handler, Handler::Keyed(_)) {
            return match spec.name {
                "ping" | "echo" | "time" | "select" => self.connection_level(spec, &args),
                _ => self.step_back(),
            };
        }
        let keys = command_keys(spec, &args, self.db);
        let id = self.s.id;
        if keys.iter().any(|(_, k)| shard_of(k, self.shards) != id) {
            return self.step_back();
        }
        if spec.is_write() {
            if self.cfg.notify != 0 {
                return self.step_back();
            }
            let now = now_ms();
            let mut copies = Vec::with_capacity(keys.len());
            for (d, k) in &keys {
                let Some(db) = self.s.dbs.get(*d) else { continue };
                let copy = match db.get_shared(k, now) {
                    Some(e) if e.heap_bytes() > UNDO_VALUE_BYTES => return self.step_back(),
                    Some(e) => Some(Detached { entry: e.clone(), expire_at_ms: db.expire_at(k) }),
                    None => None,
                };
                copies.push((*d, k.clone(), copy));
            }
            if let Some(l) = self.local.as_mut() {
                l.undo.extend(copies);
            }
        }
        let call = Call { spec, args, client: self.client, no_touch: false };
        let reply = exec::run_on_shard(self.s, self.db, &call, now_ms(), self.cfg, self.shards);
        if self.repl == 0 {
            // redis.set_repl(redis.REPL_NONE): this command's effects are not propagated.
            drop(self.s.log.take_pending());
        } else if spec.is_write() {
            self.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        reply
    }

    fn keyed(&mut self, spec: &'static command::Spec, args: Args) -> Frame {
        let keys = command_keys(spec, &args, self.db);
        let mut shards: Vec<usize> = keys.iter().map(|(_, k)| shard_of(k, self.shards)).collect();
        shards.sort_unstable();
        shards.dedup();
        let (db, cfg, n, client) = (self.db, self.cfg, self.shards, self.client);
        if shards.len() <= 1 {
            let shard = shards.first().copied().unwrap_or(self.s.id);
            let call = Call { spec, args, client, no_touch: false };
            let done = self.on(shard, move |s| {
                let reply = exec::run_on_shard(s, db, &call, now_ms(), cfg, n);
                (reply, s.log.take_pending())
            });
            return match done {
                Some((reply, log)) => {
                    self.add_log(log);
                    reply
                }
                None => exec::shutting_down(),
            };
        }
        self.across(spec, args, keys)
    }

    /// A command whose keys span shards: checked out of them, run on a scratch keyspace,
    /// checked back in (as `Worker::run_checked_out`, synchronously).
    fn across(&mut self, spec: &'static command::Spec, args: Args, keys: Vec<(usize, Bytes)>) -> Frame {
        let databases = self.s.dbs.len();
        let mut by_shard: BTreeMap<usize, Vec<(usize, usize, Bytes)>> = BTreeMap::new();
        for (position, (d, k)) in keys.iter().enumerate() {
            if *d < databases {
                by_shard.entry(shard_of(k, self.shards)).or_default().push((position, *d, k.clone()));
            }
        }
        let mut scratch: Vec<Db> = (0..databases).map(|_| Db::new()).collect();
        for (&shard, ks) in &by_shard {
            let ks: Vec<(usize, Bytes)> = ks.iter().map(|(_, d, k)| (*d, k.clone())).collect();
            let taken = self.on(shard, move |s| ks.into_iter().filter_map(|(d, k)| s.dbs[d].remove_entry(&k).map(|e| (d, k, e))).collect::<Vec<(usize, Bytes, Detached)>>());
            let Some(taken) = taken else { return exec::shutting_down() };
            for (d, k, e) in taken {
                scratch[d].insert_entry(&k, e);
            }
        }
        let mut log = abacus_engine::aof::ShardLog::new(self.durability.clone());
        let (reply, modified, _) = exec::exec_checked_out(&mut scratch, &mut log, self.db, spec, &args, now_ms(), self.cfg);
        let payload = log.take_pending();
        self.add_log(payload);
        for (shard, ks) in by_shard {
            let back: Vec<(usize, Bytes, Option<Detached>, bool)> = ks
                .into_iter()
                .map(|(position, d, k)| {
                    let e = scratch[d].remove_entry(&k);
                    (d, k, e, modified.contains(position))
                })
                .collect();
            let done = self.on(shard, move |s| {
                for (d, k, e, signal) in back {
                    if let Some(e) = e {
                        s.dbs[d].insert_entry(&k, e);
                    }
                    if signal {
                        s.dbs[d].signal_modified(&k);
                    }
                }
            });
            if done.is_none() {
                return exec::shutting_down();
            }
        }
        reply
    }

    /// The connection-level commands a script may call (they need no connection).
    fn connection_level(&mut self, spec: &'static command::Spec, args: &Args) -> Frame {
        match spec.name {
            "ping" => match args.len() {
                1 => Frame::Simple(Bytes::from_static(b"PONG")),
                _ => Frame::Bulk(args.bytes(1)),
            },
            "echo" => Frame::Bulk(args.bytes(1)),
            "time" => {
                let us = abacus_engine::shard::now_us();
                Frame::Array(vec![Frame::Bulk(Bytes::from((us / 1_000_000).to_string())), Frame::Bulk(Bytes::from((us % 1_000_000).to_string()))])
            }
            "select" => match std::str::from_utf8(&args[1]).ok().and_then(|s| s.parse::<i64>().ok()) {
                None => Frame::error("ERR value is not an integer or out of range"),
                Some(d) if d < 0 || d as usize >= self.s.dbs.len() => Frame::error("ERR DB index is out of range"),
                Some(d) => {
                    self.db = d as usize;
                    Frame::ok()
                }
            },
            "publish" => Frame::Integer(abacus_engine::pubsub::publish(&args[1], &args[2]) as i64),
            "spublish" => Frame::Integer(abacus_engine::pubsub::spublish(&args[1], &args[2]) as i64),
            "dbsize" => {
                let db = self.db;
                let mut total = 0i64;
                for shard in 0..self.shards {
                    match self.on(shard, move |s| s.dbs.get(db).map_or(0, |d| d.len()) as i64) {
                        Some(n) => total += n,
                        None => return exec::shutting_down(),
                    }
                }
                Frame::Integer(total)
            }
            _ => Frame::error(format!("ERR Abacus does not run '{}' from scripts yet", spec.name)),
        }
    }
}

impl Host for ShardHost<'_> {
    fn call(&mut self, args: Vec<Bytes>) -> Frame {
        let args = Args::from_vec(args);
        let Some(spec) = command::lookup_call(&args) else {
            return Frame::error("ERR Unknown Redis command called from script");
        };
        if !spec.arity_ok(args.len()) {
            return Frame::error("ERR Wrong number of args calling Redis command from script");
        }
        if spec.doc.info & abacus_commands::command::info::NOSCRIPT != 0 || spec.has(flags::BLOCKING) && !matches!(spec.handler, Handler::Keyed(_)) {
            return Frame::error("ERR This Redis command is not allowed from script");
        }
        if !self.user.is_open() && self.user.check(spec, &args).is_err() {
            return Frame::error("NOPERM The user executing the script can't run this command or subcommand");
        }
        if self.read_only && spec.is_write() {
            return Frame::error("ERR Write commands are not allowed from read-only scripts.");
        }
        if let Some(refused) = self.cluster_check(spec, &args) {
            return refused;
        }
        self.dispatch(spec, args)
    }

    fn acl_check(&mut self, args: &[Bytes]) -> Option<bool> {
        let args = Args::from_vec(args.to_vec());
        let spec = command::lookup_call(&args)?;
        Some(self.user.is_open() || self.user.check(spec, &args).is_ok())
    }

    fn set_repl(&mut self, flags: u8) {
        self.repl = flags;
    }

    fn log(&mut self, level: u8, message: &str) {
        match level {
            0 => tracing::debug!(target: "script", "{message}"),
            1 | 2 => tracing::info!(target: "script", "{message}"),
            _ => tracing::warn!(target: "script", "{message}"),
        }
    }
}
