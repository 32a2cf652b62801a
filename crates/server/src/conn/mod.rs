//! One client connection: read, parse, dispatch, write.
//!
//! The loop reads whatever the socket has, parses every complete command in it (up to
//! `max-pipeline-commands` at a time), executes them and writes all their replies with one
//! write: a pipelined client costs one read and one write per batch, not per command.
//!
//! Per command, before anything runs: lookup (unknown command), arity, authentication, and
//! MULTI queueing, each with Redis's exact error text. Then routing: consecutive commands
//! whose keys live on one shard are gathered into a batch (see `exec.rs`); anything else
//! (connection commands, fan-outs, multi-shard commands) first completes the batch so that
//! replies stay in request order.
//!
//! Files: this one holds the connection's state and its socket loop (read, run, write,
//! direct replies); `admit.rs` the checks before a command runs (lookup, arity,
//! authentication, MULTI queueing, routing); `migrate.rs` moving a connection to the thread
//! that owns its keys.

mod admit;
mod cluster_keys;
pub mod handler;
mod block;
mod migrate;

use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use abacus_tls::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::futures::Notified;

use abacus_keyspace::WatchFlag;
use abacus_protocol::{encode, Arg, Args, Bytes, BytesMut, Frame, Limits, Protocol, RequestParser};

use crate::clients::ClientMeta;
use crate::command::{self, flags, Handler, Spec};
use abacus_engine::direct::{Completion, Joint, Leftover, Sink};
use abacus_engine::exec::{Access, Call};
use crate::node::Node;
use abacus_engine::shard::now_ms;
use abacus_engine::stats::ServerStats;

pub use admit::{error_arity, error_unknown_command};
pub use migrate::{resume, Moved};

use admit::Step;
use migrate::{Handoff, Registration};

/// Size of each read; big enough for a deep pipeline of small commands.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// An output buffer that grew past this is given back once written.
const OUT_KEEP_BYTES: usize = 4 * 1024 * 1024;

/// Pre-encoded replies at least this large are taken as the output buffer when it is empty,
/// instead of being copied into it (`Conn::emit`).
const ADOPT_REPLY_BYTES: usize = 1 << 20;

/// A transaction being queued.
pub struct Multi {
    pub queued: Vec<Call>,
    /// A command was refused while queueing: EXEC must abort.
    pub failed: bool,
    /// While a client monitors: the queued commands' arguments, shown when EXEC runs them.
    pub monitor_args: Vec<Vec<Bytes>>,
}

/// Whether replies are sent (CLIENT REPLY).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Suppress this many more replies, then go back to On.
    Skip(u8),
}

pub struct Conn {
    pub worker: Rc<Node>,
    /// Who the client is and what its commands set: the state that goes with it when the
    /// connection moves to another thread (`migrate.rs`). Everything else below belongs to
    /// this thread's serving of the socket and starts afresh after a move.
    pub client: Client,
    pub multi: Option<Multi>,
    pub watched: Vec<(usize, Bytes)>,
    /// WATCH registrations sent to other threads' shards and not yet confirmed: awaited
    /// before anything else than a batch runs and before any reply is written
    /// ([`Conn::settle_watches`]).
    pub watch_pending: Vec<tokio::sync::oneshot::Receiver<()>>,
    /// Set by QUIT (and fatal errors): close once the pending replies are written.
    pub close_after_reply: bool,
    /// A write command ran since the last replies were sent: with `appendfsync always` the
    /// replies wait for the log to be durable.
    wrote: bool,
    out: BytesMut,
    /// The shard of the latest single-shard command, and how many consecutive ones went
    /// there (connection commands do not count; a multi-shard command restarts the count):
    /// what decides a migration.
    streak_shard: usize,
    streak: u64,
    /// The streak began after the last migration check: it must outlast one more batch
    /// before it can move the connection, so that one long batch alone never does.
    streak_fresh: bool,
    /// A batch another thread's shard runs and replies to (see `direct.rs`): settled before
    /// anything else is processed or written.
    inflight: Option<Arc<Completion>>,
    /// MONITOR: the lines this client receives (see `monitor.rs`). A monitoring connection
    /// stays on its thread.
    pub monitor: Option<tokio::sync::mpsc::Receiver<Bytes>>,
    /// The client's subscriptions, while it has any (see `pubsub.rs`). A subscribed
    /// connection stays on its thread.
    pub pubsub: Option<Box<abacus_engine::pubsub::Subscriptions>>,
    /// Bytes of published messages moved into `out` and not yet written: given back to the
    /// subscriber's output accounting once written.
    pubsub_unreleased: usize,
    /// The primary's link on a replica (`replication/replica.rs`): may write on a read-only
    /// replica; its replies are discarded.
    pub is_master: bool,
    /// PSYNC was received: once the replies before it are out, the socket becomes a replica
    /// link (`replication/primary.rs`).
    pub psync: Option<crate::replication::primary::PsyncRequest>,
    /// REPLCONF listening-port: the port a replica announces before its PSYNC.
    pub repl_listening_port: u16,
    /// CLIENT TRACKING's state while it is on (see `tracking.rs`). A tracking connection
    /// stays on its thread.
    pub tracking: Option<Box<crate::tracking::ConnTracking>>,
}

/// A client's identity and the state its commands set, declared once: what a connection
/// keeps when it moves to another thread (`migrate.rs`). A new connection starts from
/// [`Client::fresh`].
pub struct Client {
    /// The client's place in the registry, held for its `Drop`, which forgets the client.
    _registration: Registration,
    pub meta: Arc<ClientMeta>,
    pub proto: Protocol,
    pub db: usize,
    pub authenticated: bool,
    /// The ACL user (`acl.rs`): its `is_open` is the hot path's one check.
    pub user: Arc<crate::acl::User>,
    pub watch_flag: WatchFlag,
    pub reply_mode: ReplyMode,
    pub peer_is_loopback: bool,
    /// The log position right after this connection's writes ran: what `appendfsync always`
    /// waits for. Read as soon as the writes return, so that later records of other clients
    /// do not make this one wait for an extra fsync.
    wait_lsn: u64,
    /// The command table entry of the previous request: a pipeline repeats one command, and
    /// comparing its name is cheaper than lowercasing and hashing it again.
    last_root: Option<&'static Spec>,
    /// The socket as a second descriptor, for shards to write direct replies to; made on the
    /// first such batch.
    shared_socket: Option<Arc<std::net::TcpStream>>,
    /// Cluster mode: ASKING was sent (the next command may use an importing slot).
    pub asking: bool,
    /// Cluster mode: whether ASKING applied to the command now running (a script's commands
    /// are checked with it: Redis's script client copies its caller's flag).
    pub asked: bool,
    /// Cluster mode: READONLY (reads of the primary's slots run on this replica).
    pub readonly: bool,
    /// Cluster mode: ABACUS.LOCAL (a coordinator's connection: multi-series commands answer
    /// with this node's data only, `fanout.rs`).
    pub local_only: bool,
    /// The connection is TLS (such a connection never moves, so this holds for its life).
    pub tls: bool,
}

impl Client {
    fn fresh(server: &Arc<crate::node::Server>, meta: Arc<ClientMeta>, addr: SocketAddr) -> Client {
        Client {
            _registration: Registration::new(server, meta.id),
            meta,
            proto: Protocol::Resp2,
            db: 0,
            authenticated: !server.acl.auth_required(),
            user: server.acl.default_user(),
            watch_flag: Arc::new(AtomicBool::new(false)),
            reply_mode: ReplyMode::On,
            peer_is_loopback: addr.ip().is_loopback(),
            wait_lsn: 0,
            last_root: None,
            shared_socket: None,
            asking: false,
            asked: false,
            local_only: false,
            readonly: false,
            tls: false,
        }
    }
}

fn killed_error() -> std::io::Error {
    std::io::Error::other("killed by CLIENT KILL")
}

/// Writes `bytes` to the client, unless it is killed (CLIENT KILL) first: a client that does
/// not read its replies must not keep its connection, blocked in a write, after a kill.
async fn write_unless_killed(stream: &mut Stream, bytes: &[u8], killed: &mut Pin<&mut Notified<'_>>) -> std::io::Result<()> {
    // Biased: the write is tried first, so a reply the socket takes at once still goes out
    // after a kill (CLIENT KILL of oneself replies, then closes); only a write that would
    // block gives way to the kill.
    tokio::select! {
        biased;
        r = stream.send(bytes) => r,
        _ = killed.as_mut() => Err(killed_error()),
    }
}

pub async fn serve(worker: Rc<Node>, stream: Stream, addr: SocketAddr) {
    let server = worker.server.clone();
    let laddr = stream.tcp().local_addr().unwrap_or(addr);
    let _ = stream.tcp().set_nodelay(true);
    ServerStats::add(&server.stats.connections_received_total, 1);
    let Some(meta) = server.clients.register(addr, laddr, server.config.maxclients() as usize, now_ms()) else {
        ServerStats::add(&server.stats.connections_rejected_total, 1);
        let mut stream = stream;
        let _ = stream.send(b"-ERR max number of clients reached\r\n").await;
        return;
    };
    let mut conn = Conn::new(worker, Client::fresh(&server, meta, addr));
    conn.client.tls = stream.is_tls();
    let parser = RequestParser::new(conn.limits());
    conn.serve_until_closed(stream, addr, parser, BytesMut::with_capacity(READ_CHUNK_BYTES)).await;
}

/// Serves a connection accepted on a `tls-port`: the handshake in this task, bounded by
/// `tls-handshake-timeout` (`tls.rs`), then the ordinary loop over the encrypted stream.
pub async fn serve_tls(worker: Rc<Node>, stream: tokio::net::TcpStream, addr: SocketAddr) {
    let server = worker.server.clone();
    let timeout = Duration::from_millis(server.config.get_u64(abacus_engine::param!("tls-handshake-timeout")));
    if let Some(s) = crate::tls::handshake(&server.tls, stream, addr, timeout, "client").await {
        serve(worker, s, addr).await;
    }
}

impl Conn {
    /// The connection a replica applies its primary's stream through (see
    /// `replication/replica.rs`): registered as a client of type master, authenticated, in
    /// database `db`. None when `maxclients` are connected.
    pub fn for_master(worker: Rc<Node>, peer: SocketAddr, laddr: SocketAddr, db: usize) -> Option<Conn> {
        let server = worker.server.clone();
        let meta = server.clients.register(peer, laddr, usize::MAX, now_ms())?;
        meta.repl_kind.store(crate::clients::REPL_MASTER, Ordering::Release);
        meta.db.store(db, Ordering::Relaxed);
        let mut conn = Conn::new(worker, Client::fresh(&server, meta, peer));
        conn.client.authenticated = true;
        conn.client.db = db;
        conn.is_master = true;
        Some(conn)
    }

    /// The replies gathered so far (the master's link reads them for errors).
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// Drops the replies gathered so far (the master's link never sends any).
    pub fn discard_output(&mut self) {
        self.out.clear();
    }

    /// Serves the connection until it closes (then, dropping its registration, forgets the
    /// client) or moves to another thread (then the client lives on there).
    async fn serve_until_closed(mut self, stream: Stream, addr: SocketAddr, parser: RequestParser, rbuf: BytesMut) {
        match self.run(stream, parser, rbuf).await {
            Ok(Some(h)) => {
                let id = self.client.meta.id;
                if let Err(e) = self.hand_off(h, addr) {
                    tracing::debug!(client = id, "connection closed while moving: {e}");
                }
                return;
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(client = self.client.meta.id, "connection closed: {e}"),
        }
        if self.monitor.take().is_some() {
            self.worker.server.monitors.remove(self.client.meta.id);
        }
        self.leave_pubsub();
        if self.tracking.take().is_some() {
            crate::tracking::disable(self.client.meta.id);
        }
        self.unwatch_all().await;
    }

    /// Serves requests until the connection closes (`None`) or is to move to another thread.
    async fn run(&mut self, mut stream: Stream, mut parser: RequestParser, mut rbuf: BytesMut) -> std::io::Result<Option<Handoff>> {
        let server = self.worker.server.clone();
        // One registration with the kill signal for the connection's life, not one per read
        // (each registration and removal takes the Notify's lock).
        let meta = self.client.meta.clone();
        let killed = meta.kill.notified();
        tokio::pin!(killed);
        if meta.killed.load(Ordering::Acquire) {
            // Killed while moving here from another thread.
            return Ok(None);
        }
        // Reused for every batch: the parsed requests are drained, the capacity stays.
        let mut calls: Vec<Args> = Vec::new();
        loop {
            if rbuf.capacity() - rbuf.len() < READ_CHUNK_BYTES / 4 {
                rbuf.reserve(READ_CHUNK_BYTES);
            }
            // As Redis, `timeout` spares subscribers: they may wait for messages for ever.
            let timeout_s = if self.pubsub.is_some() { 0 } else { server.config.timeout_s() };
            let read = async {
                if timeout_s > 0 {
                    match tokio::time::timeout(Duration::from_secs(timeout_s), stream.read_buf(&mut rbuf)).await {
                        Ok(r) => r,
                        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle timeout")),
                    }
                } else {
                    stream.read_buf(&mut rbuf).await
                }
            };
            // A batch's direct replies in flight: the shard wakes this task only if it
            // could not send them all (or they must wait for an fsync).
            let inflight = self.inflight.clone();
            let attention = async {
                match &inflight {
                    Some(c) => c.attention().await,
                    None => std::future::pending().await,
                }
            };
            let monitor_line = async {
                match &mut self.monitor {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            let subscriber = self.pubsub.as_ref().map(|p| p.sub.clone());
            let published = async {
                match &subscriber {
                    Some(s) => s.ready().await,
                    None => std::future::pending().await,
                }
            };
            // Invalidations (`tracking.rs`): waited for while this client tracks, is
            // subscribed (a redirect's receiver) or has some waiting; one relaxed load else.
            let waits = self.tracking.is_some() || self.pubsub.is_some() || (crate::tracking::active() && self.client.meta.inbox.has_pending());
            let inbox = waits.then(|| self.client.meta.clone());
            let invalidated = async {
                match &inbox {
                    Some(m) => m.inbox.ready().await,
                    None => std::future::pending().await,
                }
            };
            let n = tokio::select! {
                r = read => r?,
                _ = &mut killed => return Ok(None),
                _ = invalidated => {
                    self.settle(&mut stream, &mut killed).await?;
                    self.take_invalidations();
                    if !self.out.is_empty() {
                        write_unless_killed(&mut stream, &self.out, &mut killed).await?;
                        ServerStats::add(&server.stats.net_output_bytes_total, self.out.len() as u64);
                        self.out.clear();
                    }
                    continue;
                }
                _ = published => {
                    // What has queued goes out in writes of up to a read chunk's size... times
                    // four: few system calls, and a bounded buffer.
                    self.settle(&mut stream, &mut killed).await?;
                    while self.take_messages(4 * READ_CHUNK_BYTES) > 0 {
                        write_unless_killed(&mut stream, &self.out, &mut killed).await?;
                        ServerStats::add(&server.stats.net_output_bytes_total, self.out.len() as u64);
                        self.out.clear();
                        self.release_messages();
                    }
                    continue;
                }
                _ = attention => {
                    self.settle(&mut stream, &mut killed).await?;
                    continue;
                }
                line = monitor_line => {
                    let Some(line) = line else {
                        // Cut off for falling behind (see `monitor.rs`).
                        tracing::warn!(client = self.client.meta.id, "closing a MONITOR client that fell {} lines behind", crate::monitor::QUEUE_LINES);
                        return Ok(None);
                    };
                    // The lines waiting now go out in one write.
                    let mut lines = BytesMut::from(&line[..]);
                    while let Some(Ok(more)) = (lines.len() < READ_CHUNK_BYTES).then(|| self.monitor.as_mut().map_or(Err(()), |rx| rx.try_recv().map_err(|_| ()))) {
                        lines.extend_from_slice(&more);
                    }
                    self.settle(&mut stream, &mut killed).await?;
                    ServerStats::add(&server.stats.net_output_bytes_total, lines.len() as u64);
                    write_unless_killed(&mut stream, &lines, &mut killed).await?;
                    continue;
                }
            };
            if n == 0 {
                // The client may only have shut its side: replies in flight still go out.
                self.settle(&mut stream, &mut killed).await?;
                return Ok(None);
            }
            ServerStats::add(&server.stats.net_input_bytes_total, n as u64);
            self.client.meta.last_interaction_ms.store(now_ms(), Ordering::Relaxed);
            // CLIENT LIST's buffer figures (`ClientMeta::qbuf`), once per read: the request
            // bytes not yet run (this read's commands included, as Redis shows its own).
            self.client.meta.qbuf.store(rbuf.len(), Ordering::Relaxed);
            self.client.meta.qbuf_free.store(rbuf.capacity() - rbuf.len(), Ordering::Relaxed);
            self.client.meta.buffers_capacity.store(rbuf.capacity() + self.out.capacity(), Ordering::Relaxed);
            // Parse and execute in batches until the buffer holds no complete command.
            loop {
                // Limits are read again per batch, so a CONFIG SET proto-max-bulk-len or an AUTH
                // applies to the commands after it.
                parser.set_limits(self.limits());
                // Unauthenticated, one command per batch: a pipelined `AUTH` must lift the
                // unauthenticated request limits before the next command is parsed (as Redis,
                // which parses and runs one command at a time); a batch parsed ahead would
                // hold a large command after AUTH to them and drop the connection.
                let max = if self.client.authenticated { server.config.max_pipeline() } else { 1 };
                let mut fatal = None;
                while calls.len() < max {
                    // A pipeline's run of ordinary commands leaves the buffer in one piece;
                    // `parse` takes whatever the run stopped at.
                    if parser.parse_batch(&mut rbuf, max - calls.len(), &mut calls) > 0 {
                        continue;
                    }
                    match parser.parse(&mut rbuf) {
                        Ok(Some(args)) => calls.push(args),
                        Ok(None) => break,
                        Err(e) => {
                            fatal = Some(Frame::error(format!("ERR {e}")));
                            break;
                        }
                    }
                }
                let more = calls.len() >= max;
                // Another client's DEBUG SLEEP pauses every connection (`server::Pause`).
                server.pause.wait().await;
                // CLIENT PAUSE: one load when none is set (`client_pause.rs`).
                if server.client_pause.is_set() {
                    server.client_pause.wait(|| crate::client_pause::batch_writes(self, &calls)).await;
                }
                // Replies keep request order: the previous batch's are out before this one runs.
                self.settle(&mut stream, &mut killed).await?;
                // Messages published before this batch go out before its replies.
                if self.pubsub.is_some() {
                    self.take_messages(usize::MAX);
                }
                // So do invalidations; and the tracking table is kept within its bound.
                if crate::tracking::active() {
                    crate::tracking::limit(server.config.tracking_table_max_keys() as usize);
                    self.take_invalidations();
                }
                // Over TLS no other thread may write to the socket: the records are this task's to seal.
                let direct = fatal.is_none() && server.config.direct_replies() && !stream.is_tls();
                self.process(&mut calls, &stream, direct).await;
                if let Some(err) = fatal {
                    // Not a command's reply, so CLIENT REPLY SKIP does not count it; after
                    // CLIENT REPLY OFF Redis sends nothing, and only closes.
                    server.recorders.errors.count_reply(&err);
                    if self.client.reply_mode != ReplyMode::Off {
                        encode(&err, self.client.proto, &mut self.out);
                    }
                    self.close_after_reply = true;
                }
                if self.worker.shard.borrow().log.has_deferred() {
                    // Log commands of this thread's shard wait in its buffer (this batch's,
                    // or ones this batch may have read). A writer lets the other connections
                    // woken in this tick run theirs first, so that one record (one write(2))
                    // covers them all; then, unless one of them already has, it is written.
                    // No reply leaves before the writes it reflects are in the log.
                    if self.wrote {
                        tokio::task::yield_now().await;
                    }
                    self.worker.shard.borrow_mut().log.flush_deferred();
                    self.note_written();
                }
                if self.wrote {
                    self.wrote = false;
                    self.wait_durable().await;
                }
                if !self.out.is_empty() {
                    write_unless_killed(&mut stream, &self.out, &mut killed).await?;
                    ServerStats::add(&server.stats.net_output_bytes_total, self.out.len() as u64);
                    self.out.clear();
                    self.release_messages();
                    if self.out.capacity() > OUT_KEEP_BYTES {
                        // A burst (a subscriber's backlog, a huge reply) does not keep its
                        // buffer for the connection's life.
                        self.out = BytesMut::with_capacity(READ_CHUNK_BYTES);
                    }
                }
                if let Some(req) = self.psync.take() {
                    self.settle(&mut stream, &mut killed).await?;
                    crate::replication::primary::serve(self, stream, std::mem::take(&mut rbuf), req).await;
                    return Ok(None);
                }
                if self.close_after_reply || self.client.meta.killed.load(Ordering::Acquire) {
                    self.settle(&mut stream, &mut killed).await?;
                    let _ = stream.shutdown().await;
                    return Ok(None);
                }
                if !more {
                    break;
                }
            }
            if rbuf.len() as u64 > server.config.query_buffer_limit() {
                tracing::warn!(client = self.client.meta.id, "closing client that reached max query buffer length ({} bytes)", rbuf.len());
                return Ok(None);
            }
            if self.inflight.is_some() && !self.streak_fresh && self.migration_due().is_some() {
                self.settle(&mut stream, &mut killed).await?;
            }
            // A TLS connection stays on its thread: its session state is not a descriptor
            // another reactor could take over.
            if let Some(target) = self.migration_target().filter(|_| !stream.is_tls()) {
                return Ok(Some(Handoff { stream, parser, rbuf, target }));
            }
        }
    }

    /// With `appendfsync always`, waits until every log record written so far, which
    /// includes this connection's, is on stable storage (group commit: see `aof.rs`).
    async fn wait_durable(&self) {
        if let Some(aof) = self.worker.server.durability.log() {
            if aof.mode() == abacus_engine::aof::Fsync::Always {
                aof.wait_durable(self.client.wait_lsn).await;
            }
        }
    }

    /// Notes the log position after writes of this connection have run.
    fn note_written(&mut self) {
        if self.wrote {
            if let Some(aof) = self.worker.server.durability.log() {
                self.client.wait_lsn = self.client.wait_lsn.max(aof.appended());
            }
        }
    }

    /// Executes parsed requests in order, appending their replies to the output buffer.
    /// `requests` is left empty (its capacity is reused for the next batch). With `direct`
    /// (the connection's socket), a batch that runs entirely on another thread's shard has
    /// that thread write its replies instead (see `direct.rs`): then `inflight` is set.
    pub async fn process(&mut self, requests: &mut Vec<Args>, stream: &Stream, direct: bool) {
        let mut batch: Vec<(usize, Call)> = Vec::with_capacity(requests.len());
        let mut last: &'static str = "";
        for args in requests.drain(..) {
            if args.is_empty() {
                continue;
            }
            if self.close_after_reply {
                // QUIT or CLIENT KILL of ourselves: nothing after it runs.
                break;
            }
            // CLIENT CACHING's flag lasts for the next command (any CLIENT one keeps it).
            let keeps_caching = self.tracking.is_some() && crate::command::lookup(&args[0]).is_some_and(|s| s.has(flags::KEEPS_CLIENT_CACHING));
            let mut step = self.prepare(args);
            if let Step::ClusterKeys(check, spec, args) = step {
                // Rare (a slot in migration): the batch so far runs first, in order.
                self.flush_batch(&mut batch).await;
                step = self.cluster_keys(check, spec, args).await;
            }
            if self.tracking.is_some() {
                if let Step::Batch(_, call) | Step::Dispatch(call) = &step {
                    crate::tracking::note_command(self, call);
                }
            }
            match step {
                Step::Batch(shard, call) => {
                    if self.worker.server.monitors.active() && !call.spec.has(flags::ADMIN) {
                        self.worker.server.monitors.feed(self.client.db, &self.client.meta.addr, &call.args);
                    }
                    self.note_route(Some(shard));
                    last = call.spec.name;
                    batch.push((shard, call));
                }
                Step::Reply(frame) => {
                    self.flush_batch(&mut batch).await;
                    self.emit(frame);
                }
                Step::ClusterKeys(..) => unreachable!("handled above"),
                Step::AbortExec(frame) => {
                    self.flush_batch(&mut batch).await;
                    self.settle_watches().await;
                    self.unwatch_all().await;
                    self.emit(frame);
                }
                Step::Dispatch(call) => {
                    if let Handler::Keyed(_) = call.spec.handler {
                        self.note_route(None);
                    }
                    last = "";
                    *self.client.meta.last_cmd.lock() = call.spec.name;
                    self.flush_batch(&mut batch).await;
                    self.settle_watches().await;
                    // MONITOR shows the command once it ran (SELECT with its new database),
                    // EXEC's queued commands before EXEC, and nothing administrative.
                    let shown = (self.worker.server.monitors.active() && !call.spec.has(flags::ADMIN)).then(|| {
                        let queued = match (&mut self.multi, call.spec.has(flags::CONTROLS_MULTI)) {
                            (Some(m), true) => std::mem::take(&mut m.monitor_args),
                            _ => Vec::new(),
                        };
                        (call.args.to_vec(), queued)
                    });
                    let reply = if call.spec.blocks(&call.args) {
                        match self.run_blocking(call, stream).await {
                            Some(reply) => reply,
                            None => {
                                // The connection ended while it waited: close, reply nothing.
                                self.close_after_reply = true;
                                break;
                            }
                        }
                    } else {
                        self.dispatch(Access::Free, call).await
                    };
                    if let Some((args, queued)) = shown {
                        let monitors = &self.worker.server.monitors;
                        match &mut self.multi {
                            // Still in the transaction (a nested MULTI, WATCH inside MULTI).
                            Some(m) => m.monitor_args = queued,
                            // EXEC ran them: an array reply (not an abort).
                            None if matches!(reply, Frame::Array(_)) => {
                                queued.iter().for_each(|q| monitors.feed(self.client.db, &self.client.meta.addr, q));
                            }
                            None => {}
                        }
                        monitors.feed(self.client.db, &self.client.meta.addr, &args);
                    }
                    self.note_written();
                    self.emit(reply);
                }
            }
            if let Some(t) = self.tracking.as_deref_mut() {
                if !keeps_caching && self.multi.is_none() {
                    t.caching = false;
                }
            }
        }
        if !(direct && self.delegate(&mut batch, stream)) {
            self.flush_batch(&mut batch).await;
        }
        // WATCH's replies go out only once its keys are registered.
        self.settle_watches().await;
        if !last.is_empty() {
            *self.client.meta.last_cmd.lock() = last;
        }
    }

    /// Has another thread's shard write `batch`'s replies, if it qualifies: every command on
    /// one shard of another thread, or (with `relaxed-batch-order`) on that shard and this
    /// thread's own (whose commands run here first: their replies travel with the others),
    /// nothing of this batch replied
    /// yet, replies on (CLIENT REPLY), and no fsync to wait for before replying.
    fn delegate(&mut self, batch: &mut Vec<(usize, Call)>, stream: &Stream) -> bool {
        if stream.is_tls() {
            return false;
        }
        let own = self.worker.shard_id;
        let relaxed = self.worker.server.config.relaxed_batch_order();
        let Some(&(first, _)) = batch.first() else { return false };
        let single = batch.iter().all(|&(s, _)| s == first);
        if single && first == own {
            return false; // it runs here, in place
        }
        // With `relaxed-batch-order`, a batch on two shards runs its own-shard part in place
        // and then the other; one on more shards takes the ordinary path.
        let mut remote = None;
        if relaxed && !single {
            for &(s, _) in batch.iter() {
                if s != own {
                    match remote {
                        None => remote = Some(s),
                        Some(r) if r != s => return false,
                        Some(_) => {}
                    }
                }
            }
        }
        if !self.out.is_empty()
            || self.client.reply_mode != ReplyMode::On
            || self.close_after_reply
            || self.multi.is_some()
            || self.worker.server.durability.fsync_always()
        {
            return false;
        }
        let worker = self.worker.clone();
        // Relaxed: this thread's shard runs its part now: it must not be locked nor have
        // ordered work queued (no await from here on, so it stays so).
        let mut here = None;
        if relaxed && !single {
            if !worker.local_runnable() {
                return false;
            }
            here = Some(worker.shard.borrow_mut());
        }
        let socket = match &self.client.shared_socket {
            Some(s) => s.clone(),
            None => {
                use std::os::fd::AsFd;
                let Ok(fd) = stream.tcp().as_fd().try_clone_to_owned() else { return false };
                let s = Arc::new(std::net::TcpStream::from(fd));
                self.client.shared_socket = Some(s.clone());
                s
            }
        };
        let cfg = self.worker.server.config.cmd_config();
        let completion = Arc::new(Completion::default());
        self.inflight = Some(completion.clone());
        let batch = std::mem::take(batch);
        if single {
            let calls = batch.into_iter().enumerate().map(|(i, (_, c))| (i, c)).collect();
            worker.hops.delegate(first, self.client.db, calls, cfg, Sink::new(socket, self.client.proto, completion, Vec::new()));
            return true;
        }
        if !relaxed {
            // Every part, this shard's too, goes through the queues in order (`order.rs`);
            // the last part to finish sends the whole batch's replies.
            let mut groups: Vec<Vec<(usize, Call)>> = (0..worker.shards()).map(|_| Vec::new()).collect();
            let n = batch.len();
            for (i, (s, c)) in batch.into_iter().enumerate() {
                if groups[s].capacity() == 0 {
                    // Room for the rest of the batch at once (see `Worker::run_batch`).
                    groups[s].reserve_exact(n - i);
                }
                groups[s].push((i, c));
            }
            let parts = groups.iter().filter(|g| !g.is_empty()).count();
            let joint = Joint::new(Sink::new(socket, self.client.proto, completion, Vec::new()), parts);
            for (s, group) in groups.into_iter().enumerate() {
                if !group.is_empty() {
                    worker.hops.delegate_ordered(s, self.client.db, group, cfg, joint.clone());
                }
            }
            return true;
        }
        let mut local = Vec::new();
        let mut calls = Vec::with_capacity(batch.len());
        for (i, (s, c)) in batch.into_iter().enumerate() {
            if s == own {
                local.push((i, c));
            } else {
                calls.push((i, c));
            }
        }
        let local_replies = match &mut here {
            Some(shard) => abacus_engine::exec::run_group_deferred(shard, self.client.db, local, cfg, worker.shards()),
            None => Vec::new(),
        };
        drop(here);
        let sink = Sink::new(socket, self.client.proto, completion, local_replies);
        if let Some(shard) = remote {
            worker.hops.delegate(shard, self.client.db, calls, cfg, sink);
        }
        true
    }

    /// Waits until the shard running the batch in flight (if any) is done with its direct
    /// replies, and writes or fails as it says.
    async fn settle(&mut self, stream: &mut Stream, killed: &mut Pin<&mut Notified<'_>>) -> std::io::Result<()> {
        let Some(c) = self.inflight.take() else { return Ok(()) };
        tokio::select! {
            biased;
            _ = c.wait() => {}
            // Queued behind a long shard lock, say: CLIENT KILL need not wait for it.
            _ = killed.as_mut() => return Err(killed_error()),
        }
        match c.take_leftover() {
            None => Ok(()),
            Some(Leftover::Bytes(rest)) => write_unless_killed(stream, &rest, killed).await,
            Some(Leftover::Replies { frames, lsn }) => {
                self.client.wait_lsn = self.client.wait_lsn.max(lsn);
                self.wait_durable().await;
                let start = self.out.len();
                for f in frames {
                    self.emit(f);
                }
                let bytes = self.out.split_off(start);
                ServerStats::add(&self.worker.server.stats.net_output_bytes_total, bytes.len() as u64);
                write_unless_killed(stream, &bytes, killed).await
            }
            Some(Leftover::Failed(e)) => Err(e),
        }
    }

    async fn flush_batch(&mut self, batch: &mut Vec<(usize, Call)>) {
        if batch.is_empty() {
            return;
        }
        let calls = std::mem::take(batch);
        let replies = self.worker.run_batch(self.client.db, calls).await;
        self.note_written();
        for reply in replies {
            self.emit(reply);
        }
    }

    /// Appends a reply to the output, unless CLIENT REPLY suppresses it. Pushes (pub/sub
    /// confirmations) go out whatever CLIENT REPLY says, as Redis's do.
    pub fn emit(&mut self, frame: Frame) {
        // Counted whether or not CLIENT REPLY lets it out, as Redis counts it.
        self.worker.server.recorders.errors.count_reply(&frame);
        let push = || match &frame {
            Frame::Push(_) => true,
            Frame::Seq(v) => v.iter().all(|f| matches!(f, Frame::Push(_))),
            _ => false,
        };
        match self.client.reply_mode {
            ReplyMode::On => match frame {
                // A large reply encoded by its command (a TS.WATERFALL's tens of MB) becomes
                // the output buffer itself when nothing is waiting before it: no copy.
                Frame::Encoded(body) if self.out.is_empty() && body.len() >= ADOPT_REPLY_BYTES => {
                    match body.try_into_mut() {
                        Ok(buf) => self.out = buf,
                        Err(body) => self.out.extend_from_slice(&body),
                    }
                }
                frame => encode(&frame, self.client.proto, &mut self.out),
            },
            ReplyMode::Off => {
                if push() {
                    encode(&frame, self.client.proto, &mut self.out);
                }
            }
            ReplyMode::Skip(n) => {
                if push() {
                    encode(&frame, self.client.proto, &mut self.out);
                }
                self.client.reply_mode = if n <= 1 { ReplyMode::On } else { ReplyMode::Skip(n - 1) };
            }
        }
    }

    /// Moves published messages waiting for this client into the output (after whatever is
    /// there), up to about `max` bytes; returns how many bytes moved.
    pub fn take_messages(&mut self, max: usize) -> usize {
        let Some(p) = &mut self.pubsub else { return 0 };
        let n = p.drain_into(&mut self.out, self.client.proto == Protocol::Resp3, max);
        self.pubsub_unreleased += n;
        n
    }

    /// Moves the invalidation messages waiting for this client into the output.
    pub fn take_invalidations(&mut self) {
        if self.client.meta.inbox.has_pending() {
            self.client.meta.inbox.drain_into(&mut self.out, self.client.proto == Protocol::Resp3);
        }
    }

    /// The output holding taken messages was written: they no longer count against the
    /// client's output buffer limit.
    fn release_messages(&mut self) {
        let n = std::mem::take(&mut self.pubsub_unreleased);
        if let Some(p) = &self.pubsub {
            p.sub.written(n);
        }
    }

    /// Leaves every subscription (the last one left, RESET, or the connection closing).
    pub fn leave_pubsub(&mut self) {
        self.pubsub = None;
        self.pubsub_unreleased = 0;
    }

    /// Runs one command (keyed or connection-level) with the given shard access.
    pub async fn dispatch(&mut self, access: Access<'_>, call: Call) -> Frame {
        match call.spec.handler {
            Handler::Keyed(_) => self.worker.run_keyed(access, self.client.db, call).await,
            Handler::Conn(_) => {
                let started = std::time::Instant::now();
                let name = call.spec.name;
                let reply = match handler::conn_handler(call.spec.handler) {
                    Some(f) => f(self, access, &call).await,
                    // A container's own entry: `resolve` never lets one run.
                    None => container(),
                };
                let took = started.elapsed();
                self.worker.record(name, took, reply.is_error());
                // Not logged here: blocking commands (their wait is not their run time),
                // EXEC (its commands are logged one by one) and AUTH/HELLO (a password in
                // the arguments), as Redis's CMD_SKIP_SLOWLOG.
                use crate::command::flags::{BLOCKING, NO_AUTH, RUNS_QUEUED};
                let recorders = &self.worker.server.recorders;
                if recorders.timing_each() && !call.spec.has(BLOCKING | RUNS_QUEUED | NO_AUTH) {
                    recorders.observe(call.spec, took, &call.args, Some(&|| self.client.meta.slowlog_label()), self.client.meta.id);
                }
                reply
            }
        }
    }

    /// Waits until the WATCH registrations sent to other shards have run. WATCH does not
    /// wait for them itself: the batch after it (`WATCH k; GET k`) then travels to the shard
    /// right behind them, in the same queue, and one hop serves both.
    pub async fn settle_watches(&mut self) {
        for done in std::mem::take(&mut self.watch_pending) {
            // An error means the shard is gone (shutting down): nothing left to wait for.
            let _ = done.await;
        }
    }

    /// Removes this client's WATCH registrations from the shards.
    pub async fn unwatch_all(&mut self) {
        self.settle_watches().await;
        let watched = std::mem::take(&mut self.watched);
        let n = self.worker.shards();
        for (db, key) in watched {
            let flag = self.client.watch_flag.clone();
            let shard = abacus_engine::shard::shard_of(&key, n);
            self.worker.run(Access::Free, shard, move |s| {
                if let Some(d) = s.dbs.get_mut(db) {
                    d.unwatch(&key, &flag);
                }
            }).await;
        }
        self.client.watch_flag.store(false, Ordering::Release);
    }
}

/// The handler of a container's own entry (CLIENT, CONFIG, OBJECT...): never called, since a
/// container runs only as one of its subcommands (`Conn::resolve` picks it, or replies the
/// arity or unknown-subcommand error).
pub(crate) fn container() -> Frame {
    Frame::error("ERR internal error: a container command has no handler of its own")
}
