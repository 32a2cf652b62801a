//! Cluster mode (`cluster-enabled yes`): the node's view of its cluster (`abacus_cluster`'s
//! state machine), the bus that keeps it (a thread of its own on `cluster-port`, speaking
//! Redis 7.0's cluster bus through `abacus_cluster_bus`), nodes.conf, and the redirection of
//! commands whose keys this node does not serve (`-MOVED`, `-CROSSSLOT`, `-CLUSTERDOWN`).
//!
//! Why a thread of its own: the bus is a handful of links exchanging a message per node per
//! second or so, and its rules take a lock on the whole view; on a worker thread its timer and
//! its locks would sit between the shards' requests. Commands (`cmd/cluster.rs`) lock the same
//! view briefly; the per-command redirection check reads each slot's state (`slot_state`:
//! not mine, mine, or migrating from here) and `ok` without the lock (published after every
//! change), so a node that serves its keys pays two atomic loads per keyed command.
//!
//! A slot migrating from here (and any slot not served here) is decided under the view's
//! lock, from the view: its commands get [`Redirect::CheckKeys`], decided on the slot's shard
//! (`conn/cluster_keys.rs`: -ASK, -TRYAGAIN), and CLUSTER SETSLOT answers after
//! [`admission_barrier`]. Manual failover's pause and release of writes are carried out here
//! (`Action::PauseWrites`/`Unpause`), the
//! release after the new slot map is published. The bus reads the replication offset and
//! data age before each event (headers, replica ranking, `cluster-replica-validity-factor`).
//!
//! COUNTKEYSINSLOT/GETKEYSINSLOT (and SETSLOT's key check) read the owning shard's index of
//! keys by slot (`abacus_keyspace`'s `slots.rs`). PUBLISH reaches every node over the bus
//! (SPUBLISH the nodes of this node's shard), as Redis propagates it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abacus_cluster::nodes_conf;
use abacus_cluster::{Action, Cluster, Config as ClusterConfig, LinkId, ReplStatus};
use abacus_cluster_bus::{encode, NodeName, Reader, SLOTS};
use abacus_engine::{param, Config};
use abacus_protocol::{Arg, Frame};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use abacus_tls::Stream;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::command::Spec;

/// The most bytes one bus message may announce: a PING with gossip about 2,000 nodes and its
/// extensions is under 250 KB; a peer announcing more is cut off.
const MAX_MESSAGE: u32 = 1 << 20;

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A slot's state from here ([`ClusterNode::slot_state`]).
const NOT_MINE: u8 = 0;
const MINE: u8 = 1;
/// Served here and migrating from here (CLUSTER SETSLOT MIGRATING).
const MIGRATING: u8 = 2;

/// The cluster as the rest of the server sees it.
pub struct ClusterNode {
    pub state: Mutex<Cluster>,
    /// Each slot's state from here (`NOT_MINE`, `MINE`, `MIGRATING`): a copy of the view's,
    /// read without its lock. One atomic per slot, so that a command is checked against one
    /// state: with two flags (served, migrating), a check reading "served" before a CLUSTER
    /// SETSLOT NODE and "not migrating" after it ran a write on a slot that had just left,
    /// recreating a key MIGRATE had moved (issue 49's race).
    slot_state: Box<[AtomicU8]>,
    /// Whether the cluster is OK from here.
    ok: AtomicBool,
    /// The view's `slots_version` that `mine` was copied at (`u64::MAX`: never).
    published: std::sync::atomic::AtomicU64,
    /// nodes.conf's path.
    file: PathBuf,
    /// The epochs (current, this node's config epoch, last vote) nodes.conf was last fsynced
    /// with: see [`ClusterNode::save`].
    synced_epochs: Mutex<[u64; 3]>,
    /// A command changed the view in a way nodes.conf keeps, but no epoch: the bus thread
    /// writes it (see [`ClusterNode::save`]).
    save_pending: AtomicBool,
    /// The client port this node listens on.
    port: u16,
    /// Wakes the bus's driver when a command left it something to send.
    wake: tokio::sync::Notify,
    /// Cluster-wide queries this node coordinated, and the parts of them a replica answered
    /// for a primary that did not in time (`fanout.rs`; INFO cluster).
    pub fanout_queries: std::sync::atomic::AtomicU64,
    pub fanout_standby: std::sync::atomic::AtomicU64,
}

impl ClusterNode {
    /// Runs `f` on the view, then saves nodes.conf if it changed and publishes the slots this
    /// node serves. Other actions (links to close, messages) are left for the bus thread.
    pub fn with<R>(&self, f: impl FnOnce(&mut Cluster) -> R) -> R {
        let mut c = self.state.lock();
        let r = f(&mut c);
        let actions = c.take_actions();
        let mut rest = Vec::new();
        let mut save = false;
        for a in actions {
            match a {
                Action::SaveConfig => save = true,
                other => rest.push(other),
            }
        }
        let mut wake = !rest.is_empty();
        for a in rest {
            c.requeue(a);
        }
        if save {
            if self.epochs_changed(&c) {
                self.save(&c);
            } else {
                // Written by the bus thread, after this command answers: see `save`.
                self.save_pending.store(true, Ordering::Relaxed);
                wake = true;
            }
        }
        if wake {
            self.wake.notify_one();
        }
        self.publish(&c);
        r
    }

    /// Copies what the redirection check reads: the served slots only when a slot changed
    /// owner (the driver publishes after every message), and the cluster state.
    fn publish(&self, c: &Cluster) {
        if self.published.swap(c.slots_version, Ordering::Relaxed) != c.slots_version {
            let mut states: Vec<u8> = vec![NOT_MINE; SLOTS];
            for s in c.me().slots.iter() {
                states[s as usize] = MINE;
            }
            for &s in c.migrating.keys() {
                if states[s as usize] == MINE {
                    states[s as usize] = MIGRATING;
                }
            }
            for (cell, state) in self.slot_state.iter().zip(states) {
                if cell.load(Ordering::Relaxed) != state {
                    cell.store(state, Ordering::Relaxed);
                }
            }
        }
        self.ok.store(c.ok, Ordering::Relaxed);
    }

    /// Whether an epoch changed since nodes.conf was last fsynced.
    fn epochs_changed(&self, c: &Cluster) -> bool {
        *self.synced_epochs.lock() != [c.current_epoch, c.me().config_epoch, c.last_vote_epoch]
    }

    /// Writes nodes.conf atomically (a temporary file renamed over the old one), fsynced
    /// when an epoch changed since the last fsync, as Redis fsyncs it (CLUSTER_TODO_FSYNC_CONFIG)
    /// only for what must survive a machine's crash: a config epoch, which two nodes must
    /// never share, and a vote, which must not be given twice in one epoch; such a change is
    /// saved before the command that made it answers. Other changes (slot moves by CLUSTER
    /// SETSLOT) are written by the bus thread just after, without an fsync: an fsync per
    /// SETSLOT made a reshard of 4,096 slots take a minute and more, and a write on the
    /// command's path half a millisecond more per SETSLOT (ext4 starts writing a file back
    /// when it is renamed over another). A node that lost them (a power cut, or a crash in
    /// the moment between) learns the slot map again from its peers, as Redis's does.
    fn save(&self, c: &Cluster) {
        self.save_pending.store(false, Ordering::Relaxed);
        let text = nodes_conf::render(&c.nodes_conf(true));
        let epochs = [c.current_epoch, c.me().config_epoch, c.last_vote_epoch];
        let mut synced = self.synced_epochs.lock();
        let fsync = *synced != epochs;
        let tmp = self.file.with_extension("tmp");
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut f, text.as_bytes())?;
            if fsync {
                f.sync_all()?;
            }
            std::fs::rename(&tmp, &self.file)
        })();
        if written.is_ok() && fsync {
            *synced = epochs;
        }
        if let Err(e) = written {
            tracing::warn!("Could not save the cluster configuration to {}: {e}", self.file.display());
        }
    }

    /// Whether this node serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slot_state[slot as usize].load(Ordering::Relaxed) != NOT_MINE
    }

    /// The redirection a keyed command gets (Redis's getNodeByQuery), or None to run it here.
    /// `asking`: the client sent ASKING (an importing slot is served); `readonly`: READONLY
    /// on a replica lets reads of its primary's slots run here. A command of a slot in
    /// migration gets [`Redirect::CheckKeys`]: which of its keys exist decides.
    /// `tls`: the client is on a TLS connection; a plaintext one is sent to the nodes'
    /// plaintext ports when the cluster runs over TLS (Redis's `pport`).
    pub fn redirect(&self, spec: &Spec, args: &[Arg], asking: bool, readonly: bool, tls: bool, config: &Config) -> Option<Redirect> {
        let port = |n: &abacus_cluster::state::Node| if !tls && n.pport != 0 { n.pport } else { n.port };
        let mut slot: Option<u16> = None;
        let mut keys = 0usize;
        for i in spec.key_indexes(args) {
            let Some(k) = args.get(i) else { continue };
            keys += 1;
            let s = abacus_cluster_bus::key_hash_slot(k);
            match slot {
                None => slot = Some(s),
                Some(prev) if prev != s => return Some(Redirect::Reply(Frame::error("CROSSSLOT Keys in request don't hash to the same slot"))),
                _ => {}
            }
        }
        let slot = slot?;
        // Only commands the keyspace's shards run depend on their keys' existence; the
        // connection-level ones (MIGRATE, WATCH, shard pub/sub) are served by the owner.
        let keyed = matches!(spec.handler, crate::command::Handler::Keyed(_));
        let state = self.slot_state[slot as usize].load(Ordering::Relaxed);
        if state == MINE || (state == MIGRATING && !keyed) {
            if !self.ok.load(Ordering::Relaxed) {
                return down(spec, config).map(Redirect::Reply);
            }
            return None;
        }
        // A slot in migration, or not served here: decided under the view's lock, from the
        // view itself (a CLUSTER SETSLOT NODE may have ended the migration since the load
        // above; deciding "served here" from the stale state would run a write on a slot
        // that just left, recreating a key MIGRATE moved).
        let c = self.state.lock();
        if c.owner(slot) == Some(c.myself) {
            if !c.ok {
                return down(spec, config).map(Redirect::Reply);
            }
            if keyed {
                if let Some(t) = c.migrating.get(&slot).and_then(|t| c.nodes.get(t)) {
                    return Some(Redirect::CheckKeys(KeyCheck { slot, ask: Some(format!("{}:{}", endpoint(t, config), port(t))), multiple_keys: keys > 1 }));
                }
            }
            return None;
        }
        if (asking || spec.doc.info & abacus_commands::command::info::ASKING != 0) && c.importing.contains_key(&slot) {
            // A multi-key command is served only if every key already arrived.
            if keyed && keys > 1 {
                return Some(Redirect::CheckKeys(KeyCheck { slot, ask: None, multiple_keys: true }));
            }
            return None;
        }
        let Some(owner) = c.owner(slot) else { return Some(Redirect::Reply(Frame::error("CLUSTERDOWN Hash slot not served"))) };
        if !c.ok {
            if let Some(down) = down(spec, config) {
                return Some(Redirect::Reply(down));
            }
        }
        if readonly && spec.has(crate::command::flags::READONLY) && c.me().primary == Some(owner) {
            return None;
        }
        let n = &c.nodes[&owner];
        Some(Redirect::Reply(Frame::error(format!("MOVED {slot} {}:{}", endpoint(n, config), port(n)))))
    }
}

/// What the redirection check decided for a command it does not run as is.
pub enum Redirect {
    /// Refused with this error (-MOVED, -CROSSSLOT, -CLUSTERDOWN).
    Reply(Frame),
    /// Its slot is migrating from here, or importing here and the client sent ASKING: the
    /// answer depends on which of its keys exist, which only the shard owning the slot knows
    /// (`conn/cluster_keys.rs` asks it). Only commands of a slot in migration pay for it.
    CheckKeys(KeyCheck),
}

/// A command of a slot in migration, waiting for its keys to be looked up.
pub struct KeyCheck {
    pub slot: u16,
    /// Migrating from here: the target's address for -ASK. None: importing here.
    pub ask: Option<String>,
    pub multiple_keys: bool,
}

impl KeyCheck {
    /// Redis's decision (getNodeByQuery) from how many of the command's keys exist here and
    /// how many do not: None to run it here, else -ASK or -TRYAGAIN.
    pub fn verdict(&self, existing: usize, missing: usize) -> Option<Frame> {
        if missing == 0 {
            return None;
        }
        let tryagain = || Frame::error("TRYAGAIN Multiple keys request during rehashing of slot");
        match &self.ask {
            // Some keys here, some gone already: the client must wait for the rest to move.
            Some(_) if existing > 0 => Some(tryagain()),
            Some(addr) => Some(Frame::error(format!("ASK {} {addr}", self.slot))),
            None if self.multiple_keys => Some(tryagain()),
            None => None,
        }
    }
}

/// Waits until every command admitted before now for `slot`'s shard has run there.
///
/// Why: the redirection check runs when a command is admitted, on the connection's thread,
/// and the command runs a moment later on its key's shard (through the thread's coalesced
/// hops, `abacus_engine::hop`). A thread descheduled in between would run a write admitted
/// before `CLUSTER SETSLOT ... MIGRATING` after redis-cli's next MIGRATE moved its key,
/// re-creating the key on the source: a write lost, or a reshard stopped by a key left
/// behind. Redis's single thread has no such gap. So SETSLOT answers only after this
/// barrier: every worker thread sends an empty group to the slot's shard through its hops,
/// behind whatever its connections queued there, and the barrier waits for each reply.
/// (The thread runs the request only between two tasks, so a connection preempted in the
/// middle of a batch has queued it by then.) Costs one message per worker thread per SETSLOT.
pub async fn admission_barrier(server: &crate::node::Server, shard: usize) {
    let mut waits = Vec::with_capacity(server.conn_queues.len());
    for q in &server.conn_queues {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let run = move |w: std::rc::Rc<crate::node::Node>| {
            let done = w.hops.send(shard, 0, Vec::new(), w.engine.config.cmd_config());
            tokio::task::spawn_local(async move {
                let _ = done.await;
                let _ = tx.send(());
            });
        };
        if q.send(crate::node::Incoming::Run(Box::new(run))).is_ok() {
            waits.push(rx);
        }
    }
    for rx in waits {
        let _ = rx.await;
    }
}

/// A keyed command while the cluster is down (getNodeByQuery): refused, unless
/// `cluster-allow-reads-when-down` lets a read through.
fn down(spec: &Spec, config: &Config) -> Option<Frame> {
    if !config.get_bool(param!("cluster-allow-reads-when-down")) {
        Some(Frame::error("CLUSTERDOWN The cluster is down"))
    } else if spec.is_write() {
        Some(Frame::error("CLUSTERDOWN The cluster is down and only accepts read commands"))
    } else {
        None
    }
}

/// `cluster-preferred-endpoint-type`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Ip,
    Hostname,
    Unknown,
}

pub fn endpoint_type(config: &Config) -> Endpoint {
    match config.get(param!("cluster-preferred-endpoint-type")).as_str() {
        "hostname" => Endpoint::Hostname,
        "unknown-endpoint" => Endpoint::Unknown,
        _ => Endpoint::Ip,
    }
}

/// The endpoint clients are given for a node (Redis's getPreferredEndpoint).
pub fn endpoint(n: &abacus_cluster::state::Node, config: &Config) -> String {
    match endpoint_type(config) {
        Endpoint::Ip => n.ip.clone(),
        Endpoint::Hostname if !n.hostname.is_empty() => n.hostname.clone(),
        Endpoint::Hostname => "?".into(),
        Endpoint::Unknown => String::new(),
    }
}

/// The bus port this node listens on (`cluster-port`, or the client port + 10000).
fn bus_port(config: &Config, port: u16) -> u16 {
    match config.get_u64(param!("cluster-port")) as u16 {
        0 => port.wrapping_add(abacus_cluster_bus::PORT_INCR),
        p => p,
    }
}

/// The state's settings from the configuration; `port` is the client port listened on. The
/// ports are the announced ones (`cluster-announce-port`/`-bus-port` when set).
fn cluster_config(config: &Config, port: u16) -> ClusterConfig {
    let announced = |p: u16, dflt: u16| if p == 0 { dflt } else { p };
    ClusterConfig {
        node_timeout_ms: config.get_u64(param!("cluster-node-timeout")),
        port: announced(config.get_u64(param!("cluster-announce-port")) as u16, port),
        cport: announced(config.get_u64(param!("cluster-announce-bus-port")) as u16, bus_port(config, port)),
        // `tls-cluster yes`: `port` is the TLS port; plaintext clients are sent to this one.
        pport: match config.get_u64(param!("port")) as u16 {
            plain if config.get_bool(param!("tls-cluster")) && plain != port => plain,
            _ => 0,
        },
        announce_ip: config.get(param!("cluster-announce-ip")),
        hostname: config.get(param!("cluster-announce-hostname")),
        require_full_coverage: config.get_bool(param!("cluster-require-full-coverage")),
        replica_validity_factor: config.get_u64(param!("cluster-replica-validity-factor")),
        // Redis's `repl-ping-replica-period` default; Abacus has no such parameter.
        repl_ping_period_ms: 10_000,
        replica_no_failover: config.get_bool(param!("cluster-replica-no-failover")),
        migration_barrier: config.get_u64(param!("cluster-migration-barrier")),
        allow_replica_migration: config.get_bool(param!("cluster-allow-replica-migration")),
    }
}

/// At start: loads nodes.conf from the data directory (or starts a one-node cluster and
/// writes it), and binds the bus port. None when cluster mode is off.
pub fn open(config: &Config, dir: &std::path::Path, port: u16) -> Result<Option<(Arc<ClusterNode>, std::net::TcpListener)>, String> {
    if !config.get_bool(param!("cluster-enabled")) {
        return Ok(None);
    }
    let cc = cluster_config(config, port);
    let file = dir.join(config.get(param!("cluster-config-file")));
    let now = now_ms();
    let seed = rand::random::<u64>();
    let cluster = match std::fs::read_to_string(&file) {
        Ok(text) if !text.trim().is_empty() => {
            let conf = nodes_conf::parse(&text).map_err(|e| format!("Unrecoverable error: corrupted cluster config file {}: {e}", file.display()))?;
            Cluster::load(cc.clone(), &conf, seed, now).map_err(|e| format!("Unrecoverable error: corrupted cluster config file {}: {e}", file.display()))?
        }
        Ok(_) => Cluster::new(cc.clone(), seed, now),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Cluster::new(cc.clone(), seed, now),
        Err(e) => return Err(format!("Loading the cluster node config from {}: {e}", file.display())),
    };
    let bind = config.get(param!("bind"));
    let ip = bind.split_whitespace().next().unwrap_or("127.0.0.1").trim_start_matches('-').to_string();
    let bport = bus_port(config, port);
    let listener = std::net::TcpListener::bind((ip.as_str(), bport)).map_err(|e| format!("cannot listen on the cluster bus port {ip}:{bport}: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let node = Arc::new(ClusterNode {
        state: Mutex::new(cluster),
        slot_state: (0..SLOTS).map(|_| AtomicU8::new(NOT_MINE)).collect(),
        ok: AtomicBool::new(false),
        published: std::sync::atomic::AtomicU64::new(u64::MAX),
        file,
        synced_epochs: Mutex::new([u64::MAX; 3]),
        save_pending: AtomicBool::new(false),
        port,
        wake: tokio::sync::Notify::new(),
        fanout_queries: Default::default(),
        fanout_standby: Default::default(),
    });
    {
        let c = node.state.lock();
        node.save(&c);
        node.publish(&c);
        tracing::info!("Cluster node {} (bus port {bport})", String::from_utf8_lossy(c.myself.as_bytes()));
    }
    Ok(Some((node, listener)))
}

enum Event {
    /// A command left actions to carry out.
    Wake,
    Accepted(Stream),
    Connected(NodeName, Stream),
    ConnectFailed(NodeName),
    Message(LinkId, String, String, abacus_cluster_bus::Message),
    Closed(LinkId),
}

/// Starts the bus thread: accepts links, reads their messages into the view, ticks it every
/// 100 ms, and carries out its actions.
pub fn start_bus(node: Arc<ClusterNode>, listener: std::net::TcpListener, config: Arc<crate::node::Server>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("abacus-cluster".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("cluster bus: cannot start runtime: {e}");
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, bus(node, listener, config));
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the cluster bus thread: {e}"))
}

async fn bus(node: Arc<ClusterNode>, listener: std::net::TcpListener, server: Arc<crate::node::Server>) {
    let Ok(listener) = TcpListener::from_std(listener) else { return };
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let mut writers: HashMap<LinkId, mpsc::UnboundedSender<Vec<u8>>> = HashMap::new();
    let mut connecting: HashSet<NodeName> = HashSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let accept_tx = tx.clone();
    // `tls-cluster yes`: every bus link is TLS, both ways (`tls.rs`); read per link, so a
    // CONFIG SET applies to the links opened after it.
    let tls_cluster = |server: &crate::node::Server| server.config.get_bool(abacus_engine::param!("tls-cluster"));
    let accept_server = server.clone();
    tokio::task::spawn_local(async move {
        let server = accept_server;
        loop {
            let tls = server.tls.clone();
            let handshake_ms = server.config.get_u64(abacus_engine::param!("tls-handshake-timeout"));
            match listener.accept().await {
                Ok((s, addr)) if tls_cluster(&server) => {
                    // Each handshake in its own task: a peer that stalls holds up no other.
                    let (tx, tls) = (accept_tx.clone(), tls.clone());
                    tokio::task::spawn_local(async move {
                        if let Some(s) = crate::tls::handshake(&tls, s, addr, Duration::from_millis(handshake_ms), "cluster bus").await {
                            let _ = tx.send(Event::Accepted(s));
                        }
                    });
                }
                Ok((s, _)) => {
                    let _ = accept_tx.send(Event::Accepted(Stream::Plain(s)));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    });
    loop {
        let event = tokio::select! {
            e = rx.recv() => e,
            _ = tick.tick() => None,
            _ = node.wake.notified() => Some(Event::Wake),
        };
        let now = now_ms();
        let mut c = node.state.lock();
        // What each header says of this node's replication, and a replica's data age.
        c.set_repl(ReplStatus { offset: crate::replication::state().offset(), data_age_ms: crate::replication::data_age_ms(now) });
        match event {
            Some(Event::Wake) => {}
            None => {
                // Settings CONFIG SET may have changed.
                let cfg = &server.config;
                let fresh = cluster_config(cfg, node.port);
                c.set_config(fresh);
                c.tick(now);
            }
            Some(Event::Accepted(s)) => {
                let id = c.link_accepted(now);
                writers.insert(id, spawn_link(id, s, tx.clone()));
            }
            Some(Event::Connected(name, s)) => {
                connecting.remove(&name);
                if let Some(id) = c.link_connected(name, now) {
                    writers.insert(id, spawn_link(id, s, tx.clone()));
                }
            }
            Some(Event::ConnectFailed(name)) => {
                connecting.remove(&name);
                c.connect_failed(name, now);
            }
            Some(Event::Message(id, peer, local, m)) => c.message(id, &peer, &local, m, now),
            Some(Event::Closed(id)) => {
                writers.remove(&id);
                c.link_closed(id);
            }
        }
        let mut save = false;
        let mut unpause = false;
        for a in c.take_actions() {
            match a {
                Action::Send(id, m) => {
                    if let Some(w) = writers.get(&id) {
                        let _ = w.send(encode(&m));
                    }
                }
                Action::Connect { node: name, ip, cport } => {
                    if connecting.insert(name) {
                        let tx = tx.clone();
                        let tls = server.tls.clone();
                        let use_tls = tls_cluster(&server);
                        tokio::task::spawn_local(async move {
                            let r = crate::tls::connect(&tls, &ip, cport, use_tls, Duration::from_millis(1000)).await;
                            let _ = match r {
                                Ok(s) => tx.send(Event::Connected(name, s)),
                                Err(e) => {
                                    if use_tls {
                                        tracing::debug!("Cluster bus: cannot reach {ip}:{cport}: {e}");
                                    }
                                    tx.send(Event::ConnectFailed(name))
                                }
                            };
                        });
                    }
                }
                Action::Close(id) => {
                    // Dropping the writer ends the link's tasks.
                    writers.remove(&id);
                }
                Action::SaveConfig => save = true,
                // Role changes run on worker 0, where replication's tasks live.
                Action::Promoted => {
                    let _ = server.conn_queues[0].send(crate::node::Incoming::Run(Box::new(|w| {
                        tokio::task::spawn_local(async move { crate::cmd::replication::promote(&w, "cluster failover: elected to replace the failed primary").await });
                    })));
                }
                Action::ReplicaOf { ip, port } => {
                    let _ = server.conn_queues[0].send(crate::node::Incoming::Run(Box::new(move |w| {
                        tokio::task::spawn_local(async move {
                            crate::cmd::replication::replicate_from(&w, ip, port, "cluster: following the new primary of this node's slots").await;
                        });
                    })));
                }
                // A replica's manual failover: hold writes until it caught up (or timed out).
                Action::PauseWrites { until_ms } => {
                    tracing::warn!("Manual failover requested by a replica: holding writes for up to {} ms", until_ms.saturating_sub(now));
                    server.client_pause.pause(until_ms, false);
                }
                // After the slot map is published below, so that a held write resumes into
                // the new map (-MOVED to the new primary), never into the old one.
                Action::Unpause => unpause = true,
                Action::Log(line) => tracing::warn!("Cluster: {line}"),
                Action::Deliver { shard, channel, message } => {
                    let _ = if shard { abacus_engine::pubsub::spublish(&channel, &message) } else { abacus_engine::pubsub::publish(&channel, &message) };
                }
            }
        }
        if save || node.save_pending.load(Ordering::Relaxed) {
            node.save(&c);
        }
        node.publish(&c);
        if unpause {
            server.client_pause.unpause();
        }
    }
}

/// A link's reader and writer tasks; returns the writer's queue (dropping it closes the link).
fn spawn_link(id: LinkId, s: Stream, tx: mpsc::UnboundedSender<Event>) -> mpsc::UnboundedSender<Vec<u8>> {
    let _ = s.tcp().set_nodelay(true);
    let peer = s.tcp().peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let local = s.tcp().local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let (mut rd, mut wr) = tokio::io::split(s);
    let (wtx, mut wrx) = mpsc::unbounded_channel::<Vec<u8>>();
    let closed = tx.clone();
    let reader = tokio::task::spawn_local(async move {
        let mut reader = Reader::new(MAX_MESSAGE);
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            reader.feed(&buf[..n]);
            loop {
                match reader.next_message() {
                    Ok(Some(m)) => {
                        let _ = tx.send(Event::Message(id, peer.clone(), local.clone(), m));
                    }
                    Ok(None) => break,
                    Err(e) => {
                        // A bad signature or length: Redis closes the link, so do we.
                        tracing::warn!("Cluster bus: closing a link from {peer}: {e}");
                        let _ = tx.send(Event::Closed(id));
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Event::Closed(id));
    });
    tokio::task::spawn_local(async move {
        while let Some(bytes) = wrx.recv().await {
            // Flushed: over TLS the last record may wait in rustls's buffer otherwise.
            if wr.write_all(&bytes).await.is_err() || wr.flush().await.is_err() {
                break;
            }
        }
        // The writer's queue is gone (the link closed): end the reader too.
        reader.abort();
        let _ = closed.send(Event::Closed(id));
    });
    wtx
}
