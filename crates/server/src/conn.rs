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
//! Migration: a command for another thread's shard costs a hop there and back (a message, a
//! wake-up of that thread, its reply). A client that only ever touches one remote shard
//! (one hot counter, keys under one `{hash tag}`) pays that for every batch, and the owning
//! thread does the work of every client of its keys anyway. So once `migrate-connections-after`
//! consecutive single-shard commands of a connection went to one other shard, the connection
//! moves to that shard's thread, between two batches, once the run has outlasted the batch
//! in which it began (one long pipeline of another shard's keys does not move a client whose
//! other batches go elsewhere): when every reply so far is written (and
//! durable, with `appendfsync always`), so nothing is in flight. What moves is the socket
//! (deregistered from this thread's reactor, registered with the other's), the unparsed input
//! and the parser's position in it, and the connection's state (database, protocol,
//! authentication, CLIENT REPLY mode). The client's registry record (id, name, kill signal)
//! stays the same. Not moved: a connection inside MULTI or with WATCHed keys (their
//! registrations live on the shards), which keeps its thread until it is out of both. A run
//! of random keys over N shards reaches the threshold with probability (1/N)^(threshold-1):
//! never, in practice, at the default of 256.

use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::futures::Notified;

use abacus_keyspace::WatchFlag;
use abacus_protocol::{encode, Arg, Args, Bytes, BytesMut, Frame, Limits, Protocol, RequestParser};

use crate::clients::ClientMeta;
use crate::command::{self, flags, Handler, Spec};
use crate::direct::{Completion, Joint, Leftover, Sink};
use crate::exec::{Access, Call, Worker};
use crate::shard::now_ms;
use crate::stats::{self, ServerStats};

/// Size of each read; big enough for a deep pipeline of small commands.
const READ_CHUNK_BYTES: usize = 16 * 1024;

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
    pub worker: Rc<Worker>,
    pub meta: Arc<ClientMeta>,
    /// The client's place in the registry; None once handed to another thread.
    registration: Option<Registration>,
    pub proto: Protocol,
    pub db: usize,
    pub authenticated: bool,
    pub multi: Option<Multi>,
    pub watch_flag: WatchFlag,
    pub watched: Vec<(usize, Bytes)>,
    /// WATCH registrations sent to other threads' shards and not yet confirmed: awaited
    /// before anything else than a batch runs and before any reply is written
    /// ([`Conn::settle_watches`]).
    pub watch_pending: Vec<tokio::sync::oneshot::Receiver<()>>,
    pub reply_mode: ReplyMode,
    /// Set by QUIT (and fatal errors): close once the pending replies are written.
    pub close_after_reply: bool,
    pub peer_is_loopback: bool,
    /// A write command ran since the last replies were sent: with `appendfsync always` the
    /// replies wait for the log to be durable.
    wrote: bool,
    /// The log position right after this connection's writes ran: what `appendfsync always`
    /// waits for. Read as soon as the writes return, so that later records of other clients
    /// do not make this one wait for an extra fsync.
    wait_lsn: u64,
    out: BytesMut,
    /// The command table entry of the previous request: a pipeline repeats one command, and
    /// comparing its name is cheaper than lowercasing and hashing it again.
    last_root: Option<&'static Spec>,
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
    /// The socket as a second descriptor, for shards to write direct replies to; made on the
    /// first such batch.
    shared_socket: Option<Arc<std::net::TcpStream>>,
    /// MONITOR: the lines this client receives (see `monitor.rs`). A monitoring connection
    /// stays on its thread.
    pub monitor: Option<tokio::sync::mpsc::Receiver<Bytes>>,
}

/// Removes a client from the registry when dropped, so that whatever ends a connection (a
/// close, an error, a panic in its task, a move whose message is never received) forgets the
/// client exactly once.
struct Registration {
    server: Arc<crate::server::Server>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.server.clients.unregister(self.id);
    }
}

/// What a connection keeps when it moves to another thread: its client and the state its
/// commands set (database, protocol, authentication, CLIENT REPLY, the log position it waits
/// for). A new connection starts from [`Carried::fresh`].
struct Carried {
    registration: Registration,
    meta: Arc<ClientMeta>,
    proto: Protocol,
    db: usize,
    authenticated: bool,
    watch_flag: WatchFlag,
    reply_mode: ReplyMode,
    peer_is_loopback: bool,
    wait_lsn: u64,
    last_root: Option<&'static Spec>,
    shared_socket: Option<Arc<std::net::TcpStream>>,
}

impl Carried {
    fn fresh(server: &Arc<crate::server::Server>, meta: Arc<ClientMeta>, addr: SocketAddr) -> Carried {
        Carried {
            registration: Registration { server: server.clone(), id: meta.id },
            meta,
            proto: Protocol::Resp2,
            db: 0,
            authenticated: server.config.requirepass().is_none(),
            watch_flag: Arc::new(AtomicBool::new(false)),
            reply_mode: ReplyMode::On,
            peer_is_loopback: addr.ip().is_loopback(),
            wait_lsn: 0,
            last_root: None,
            shared_socket: None,
        }
    }
}

/// A connection on its way to another worker thread (see "Migration" above).
pub struct Moved {
    carried: Carried,
    stream: std::net::TcpStream,
    addr: SocketAddr,
    parser: RequestParser,
    rbuf: BytesMut,
}

/// Where [`Conn::run`] left a connection that is to move.
struct Handoff {
    stream: TcpStream,
    parser: RequestParser,
    rbuf: BytesMut,
    target: usize,
}

/// What pre-dispatch checks decided for one request.
enum Step {
    Reply(Frame),
    /// A malformed EXEC: the transaction (if any) and every WATCH end, then this reply.
    AbortExec(Frame),
    Batch(usize, Call),
    Dispatch(Call),
}

/// Redis 7.0's reply to an unknown command, byte for byte: the name (at most 128 bytes), then
/// arguments quoted while the listing is under 128 bytes, each cut to what keeps it at 128.
/// Redis formats them as C strings, so each stops at its first NUL byte; other bytes are sent
/// as they are, except CR and LF, which become spaces.
pub fn error_unknown_command(args: &[Arg]) -> Frame {
    let c_str = |a: &[u8], max: usize| -> Vec<u8> {
        let end = memchr::memchr(0, a).unwrap_or(a.len()).min(max);
        a[..end].to_vec()
    };
    let mut listing: Vec<u8> = Vec::new();
    for a in args.iter().skip(1) {
        if listing.len() >= 128 {
            break;
        }
        let room = 128 - listing.len();
        listing.push(b'\'');
        listing.extend(c_str(a, room));
        listing.extend_from_slice(b"' ");
    }
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend(c_str(&args[0], 128));
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend(listing);
    for b in &mut msg {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    Frame::Error(Bytes::from(msg))
}

pub fn error_arity(name: &str) -> Frame {
    Frame::error(format!("ERR wrong number of arguments for '{name}' command"))
}

fn killed_error() -> std::io::Error {
    std::io::Error::other("killed by CLIENT KILL")
}

/// Writes `bytes` to the client, unless it is killed (CLIENT KILL) first: a client that does
/// not read its replies must not keep its connection, blocked in a write, after a kill.
async fn write_unless_killed(stream: &mut TcpStream, bytes: &[u8], killed: &mut Pin<&mut Notified<'_>>) -> std::io::Result<()> {
    // Biased: the write is tried first, so a reply the socket takes at once still goes out
    // after a kill (CLIENT KILL of oneself replies, then closes); only a write that would
    // block gives way to the kill.
    tokio::select! {
        biased;
        r = stream.write_all(bytes) => r,
        _ = killed.as_mut() => Err(killed_error()),
    }
}

pub async fn serve(worker: Rc<Worker>, stream: TcpStream, addr: SocketAddr) {
    let server = worker.server.clone();
    let laddr = stream.local_addr().unwrap_or(addr);
    let _ = stream.set_nodelay(true);
    ServerStats::add(&server.stats.connections_received_total, 1);
    let Some(meta) = server.clients.register(addr, laddr, server.config.maxclients() as usize, now_ms()) else {
        ServerStats::add(&server.stats.connections_rejected_total, 1);
        let mut stream = stream;
        let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
        return;
    };
    let conn = Conn::new(worker, Carried::fresh(&server, meta, addr));
    let parser = RequestParser::new(conn.limits());
    conn.serve_until_closed(stream, addr, parser, BytesMut::with_capacity(READ_CHUNK_BYTES)).await;
}

/// Continues serving a connection that moved to this thread (see "Migration" above).
pub async fn resume(worker: Rc<Worker>, m: Moved) {
    let stream = match TcpStream::from_std(m.stream) {
        Ok(stream) => stream,
        Err(e) => {
            // Dropping `m` forgets the client.
            tracing::debug!(client = m.carried.meta.id, "connection closed while moving: {e}");
            return;
        }
    };
    let conn = Conn::new(worker, m.carried);
    conn.serve_until_closed(stream, m.addr, m.parser, m.rbuf).await;
}


impl Conn {
    fn new(worker: Rc<Worker>, c: Carried) -> Conn {
        Conn {
            worker,
            meta: c.meta,
            registration: Some(c.registration),
            proto: c.proto,
            db: c.db,
            authenticated: c.authenticated,
            multi: None,
            watch_flag: c.watch_flag,
            watched: Vec::new(),
            watch_pending: Vec::new(),
            reply_mode: c.reply_mode,
            close_after_reply: false,
            peer_is_loopback: c.peer_is_loopback,
            wrote: false,
            wait_lsn: c.wait_lsn,
            out: BytesMut::with_capacity(READ_CHUNK_BYTES),
            last_root: c.last_root,
            streak_shard: 0,
            streak: 0,
            streak_fresh: false,
            inflight: None,
            shared_socket: c.shared_socket,
            monitor: None,
        }
    }

    /// Serves the connection until it closes (then, dropping its registration, forgets the
    /// client) or moves to another thread (then the client lives on there).
    async fn serve_until_closed(mut self, stream: TcpStream, addr: SocketAddr, parser: RequestParser, rbuf: BytesMut) {
        match self.run(stream, parser, rbuf).await {
            Ok(Some(h)) => match self.hand_off(h, addr) {
                Ok(()) => return,
                Err(e) => tracing::debug!(client = self.meta.id, "connection closed while moving: {e}"),
            },
            Ok(None) => {}
            Err(e) => tracing::debug!(client = self.meta.id, "connection closed: {e}"),
        }
        if self.monitor.take().is_some() {
            self.worker.server.monitors.remove(self.meta.id);
        }
        self.unwatch_all().await;
    }

    /// The shard this connection should move to now, if any: between batches, with nothing
    /// pending (see "Migration" above).
    fn migration_target(&mut self) -> Option<usize> {
        if std::mem::take(&mut self.streak_fresh) {
            return None;
        }
        self.migration_due().filter(|_| self.inflight.is_none())
    }

    /// Whether the connection should move to another shard's thread, replies in flight
    /// aside.
    fn migration_due(&self) -> Option<usize> {
        let after = self.worker.server.config.migrate_after();
        let move_it = after > 0
            && self.monitor.is_none()
            && self.streak >= after
            && self.streak_shard != self.worker.shard_id
            && self.streak_shard < self.worker.shards()
            && self.multi.is_none()
            && self.watched.is_empty()
            && !self.close_after_reply
            && !self.wrote
            && self.out.is_empty();
        move_it.then_some(self.streak_shard)
    }

    /// Sends the connection to `h.target`'s thread. On error the socket is closed (the
    /// caller forgets the client).
    fn hand_off(&mut self, h: Handoff, addr: SocketAddr) -> std::io::Result<()> {
        let server = self.worker.server.clone();
        let stream = h.stream.into_std()?;
        let registration = self.registration.take().ok_or_else(|| std::io::Error::other("not registered"))?;
        let carried = Carried {
            registration,
            meta: self.meta.clone(),
            proto: self.proto,
            db: self.db,
            authenticated: self.authenticated,
            watch_flag: self.watch_flag.clone(),
            reply_mode: self.reply_mode,
            peer_is_loopback: self.peer_is_loopback,
            wait_lsn: self.wait_lsn,
            last_root: self.last_root,
            shared_socket: self.shared_socket.take(),
        };
        let moved = Moved { carried, stream, addr, parser: h.parser, rbuf: h.rbuf };
        let queue = server.conn_queues.get(h.target).ok_or_else(|| std::io::Error::other("no such worker"))?;
        queue.send(crate::server::Incoming::Moved(Box::new(moved))).map_err(|_| std::io::Error::other("worker stopped"))?;
        ServerStats::add(&server.stats.migrated_connections, 1);
        Ok(())
    }

    /// Counts a command toward a migration: `shard` is where it runs, None for a command
    /// whose keys span shards.
    fn note_route(&mut self, shard: Option<usize>) {
        match shard {
            Some(s) if s == self.streak_shard => self.streak += 1,
            Some(s) => {
                self.streak_shard = s;
                self.streak = 1;
                self.streak_fresh = true;
            }
            None => {
                self.streak = 0;
                self.streak_fresh = true;
            }
        }
    }

    fn limits(&self) -> Limits {
        let c = &self.worker.server.config;
        Limits { max_bulk_len: c.proto_max_bulk_len() as usize, unauthenticated: !self.authenticated, ..Limits::default() }
    }

    /// Serves requests until the connection closes (`None`) or is to move to another thread.
    async fn run(&mut self, mut stream: TcpStream, mut parser: RequestParser, mut rbuf: BytesMut) -> std::io::Result<Option<Handoff>> {
        let server = self.worker.server.clone();
        // One registration with the kill signal for the connection's life, not one per read
        // (each registration and removal takes the Notify's lock).
        let meta = self.meta.clone();
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
            let timeout_s = server.config.timeout_s();
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
            let n = tokio::select! {
                r = read => r?,
                _ = &mut killed => return Ok(None),
                _ = attention => {
                    self.settle(&mut stream, &mut killed).await?;
                    continue;
                }
                line = monitor_line => {
                    let Some(line) = line else {
                        // Cut off for falling behind (see `monitor.rs`).
                        tracing::warn!(client = self.meta.id, "closing a MONITOR client that fell {} lines behind", crate::monitor::QUEUE_LINES);
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
            self.meta.last_interaction_ms.store(now_ms(), Ordering::Relaxed);
            // Parse and execute in batches until the buffer holds no complete command.
            loop {
                // Limits are read again per batch, so a CONFIG SET proto-max-bulk-len or an AUTH
                // applies to the commands after it.
                parser.set_limits(self.limits());
                // Unauthenticated, one command per batch: a pipelined `AUTH` must lift the
                // unauthenticated request limits before the next command is parsed (as Redis,
                // which parses and runs one command at a time); a batch parsed ahead would
                // hold a large command after AUTH to them and drop the connection.
                let max = if self.authenticated { server.config.max_pipeline() } else { 1 };
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
                // Replies keep request order: the previous batch's are out before this one runs.
                self.settle(&mut stream, &mut killed).await?;
                let direct = (fatal.is_none() && server.config.direct_replies()).then_some(&stream);
                self.process(&mut calls, direct).await;
                if let Some(err) = fatal {
                    // Not a command's reply, so CLIENT REPLY SKIP does not count it; after
                    // CLIENT REPLY OFF Redis sends nothing, and only closes.
                    stats::count_error_reply(&err);
                    if self.reply_mode != ReplyMode::Off {
                        encode(&err, self.proto, &mut self.out);
                    }
                    self.close_after_reply = true;
                }
                if crate::aof::has_deferred() {
                    // Log commands of this thread's shard wait in its buffer (this batch's,
                    // or ones this batch may have read). A writer lets the other connections
                    // woken in this tick run theirs first, so that one record (one write(2))
                    // covers them all; then, unless one of them already has, it is written.
                    // No reply leaves before the writes it reflects are in the log.
                    if self.wrote {
                        tokio::task::yield_now().await;
                    }
                    crate::aof::flush_deferred();
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
                }
                if self.close_after_reply || self.meta.killed.load(Ordering::Acquire) {
                    self.settle(&mut stream, &mut killed).await?;
                    let _ = stream.shutdown().await;
                    return Ok(None);
                }
                if !more {
                    break;
                }
            }
            if rbuf.len() as u64 > server.config.query_buffer_limit() {
                tracing::warn!(client = self.meta.id, "closing client that reached max query buffer length ({} bytes)", rbuf.len());
                return Ok(None);
            }
            if self.inflight.is_some() && !self.streak_fresh && self.migration_due().is_some() {
                self.settle(&mut stream, &mut killed).await?;
            }
            if let Some(target) = self.migration_target() {
                return Ok(Some(Handoff { stream, parser, rbuf, target }));
            }
        }
    }

    /// With `appendfsync always`, waits until every log record written so far, which
    /// includes this connection's, is on stable storage (group commit: see `aof.rs`).
    async fn wait_durable(&self) {
        if let Some(aof) = crate::aof::global() {
            if aof.mode() == crate::aof::Fsync::Always {
                aof.wait_durable(self.wait_lsn).await;
            }
        }
    }

    /// Notes the log position after writes of this connection have run.
    fn note_written(&mut self) {
        if self.wrote {
            if let Some(aof) = crate::aof::global() {
                self.wait_lsn = self.wait_lsn.max(aof.appended());
            }
        }
    }

    /// Executes parsed requests in order, appending their replies to the output buffer.
    /// `requests` is left empty (its capacity is reused for the next batch). With `direct`
    /// (the connection's socket), a batch that runs entirely on another thread's shard has
    /// that thread write its replies instead (see `direct.rs`): then `inflight` is set.
    pub async fn process(&mut self, requests: &mut Vec<Args>, direct: Option<&TcpStream>) {
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
            let step = self.prepare(args);
            match step {
                Step::Batch(shard, call) => {
                    if self.worker.server.monitors.active() && !call.spec.has(flags::ADMIN) {
                        self.worker.server.monitors.feed(self.db, &self.meta.addr, &call.args);
                    }
                    self.note_route(Some(shard));
                    last = call.spec.name;
                    batch.push((shard, call));
                }
                Step::Reply(frame) => {
                    self.flush_batch(&mut batch).await;
                    self.emit(frame);
                }
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
                    *self.meta.last_cmd.lock() = call.spec.name;
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
                    let reply = self.dispatch(Access::Free, call).await;
                    if let Some((args, queued)) = shown {
                        let monitors = &self.worker.server.monitors;
                        match &mut self.multi {
                            // Still in the transaction (a nested MULTI, WATCH inside MULTI).
                            Some(m) => m.monitor_args = queued,
                            // EXEC ran them: an array reply (not an abort).
                            None if matches!(reply, Frame::Array(_)) => {
                                queued.iter().for_each(|q| monitors.feed(self.db, &self.meta.addr, q));
                            }
                            None => {}
                        }
                        monitors.feed(self.db, &self.meta.addr, &args);
                    }
                    self.note_written();
                    self.emit(reply);
                }
            }
        }
        if !direct.is_some_and(|stream| self.delegate(&mut batch, stream)) {
            self.flush_batch(&mut batch).await;
        }
        // WATCH's replies go out only once its keys are registered.
        self.settle_watches().await;
        if !last.is_empty() {
            *self.meta.last_cmd.lock() = last;
        }
    }

    /// Has another thread's shard write `batch`'s replies, if it qualifies: every command on
    /// one shard of another thread, or (with `relaxed-batch-order`) on that shard and this
    /// thread's own (whose commands run here first: their replies travel with the others),
    /// nothing of this batch replied
    /// yet, replies on (CLIENT REPLY), and no fsync to wait for before replying.
    fn delegate(&mut self, batch: &mut Vec<(usize, Call)>, stream: &TcpStream) -> bool {
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
            || self.reply_mode != ReplyMode::On
            || self.close_after_reply
            || self.multi.is_some()
            || crate::aof::global().is_some_and(|a| a.mode() == crate::aof::Fsync::Always)
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
        let socket = match &self.shared_socket {
            Some(s) => s.clone(),
            None => {
                use std::os::fd::AsFd;
                let Ok(fd) = stream.as_fd().try_clone_to_owned() else { return false };
                let s = Arc::new(std::net::TcpStream::from(fd));
                self.shared_socket = Some(s.clone());
                s
            }
        };
        let cfg = self.worker.server.config.cmd_config();
        let completion = Arc::new(Completion::default());
        self.inflight = Some(completion.clone());
        let batch = std::mem::take(batch);
        if single {
            let calls = batch.into_iter().enumerate().map(|(i, (_, c))| (i, c)).collect();
            worker.hops.delegate(first, self.db, calls, cfg, Sink::new(socket, self.proto, completion, Vec::new()));
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
            let joint = Joint::new(Sink::new(socket, self.proto, completion, Vec::new()), parts);
            for (s, group) in groups.into_iter().enumerate() {
                if !group.is_empty() {
                    worker.hops.delegate_ordered(s, self.db, group, cfg, joint.clone());
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
            Some(shard) => crate::exec::run_group_deferred(shard, self.db, local, cfg, worker.shards()),
            None => Vec::new(),
        };
        drop(here);
        let sink = Sink::new(socket, self.proto, completion, local_replies);
        if let Some(shard) = remote {
            worker.hops.delegate(shard, self.db, calls, cfg, sink);
        }
        true
    }

    /// Waits until the shard running the batch in flight (if any) is done with its direct
    /// replies, and writes or fails as it says.
    async fn settle(&mut self, stream: &mut TcpStream, killed: &mut Pin<&mut Notified<'_>>) -> std::io::Result<()> {
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
                self.wait_lsn = self.wait_lsn.max(lsn);
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
        let replies = self.worker.run_batch(self.db, calls).await;
        self.note_written();
        for reply in replies {
            self.emit(reply);
        }
    }

    /// Appends a reply to the output, unless CLIENT REPLY suppresses it.
    pub fn emit(&mut self, frame: Frame) {
        // Counted whether or not CLIENT REPLY lets it out, as Redis counts it.
        stats::count_error_reply(&frame);
        match self.reply_mode {
            ReplyMode::On => encode(&frame, self.proto, &mut self.out),
            ReplyMode::Off => {}
            ReplyMode::Skip(n) => self.reply_mode = if n <= 1 { ReplyMode::On } else { ReplyMode::Skip(n - 1) },
        }
    }

    /// Lookup, arity, authentication and MULTI queueing; then routing.
    fn prepare(&mut self, args: Args) -> Step {
        let root = match self.last_root {
            Some(spec) if command::is_name(spec.name.as_bytes(), &args[0]) => spec,
            _ => {
                let Some(root) = command::lookup(&args[0]) else {
                    self.fail_multi();
                    return Step::Reply(error_unknown_command(&args));
                };
                self.last_root = Some(root);
                root
            }
        };
        let spec = match self.resolve(root, &args) {
            Ok(spec) => spec,
            Err(e) => {
                stats::record_rejected(root.name);
                if root.has(flags::RUNS_QUEUED) {
                    // Redis reports a malformed EXEC as the end of the transaction (and of
                    // the WATCHes, as a DISCARD).
                    self.multi = None;
                    self.meta.multi_len.store(usize::MAX, Ordering::Relaxed);
                    let text = match &e {
                        Frame::Error(t) => String::from_utf8_lossy(t).trim_start_matches("ERR ").to_string(),
                        _ => String::new(),
                    };
                    return Step::AbortExec(Frame::error(format!("EXECABORT Transaction discarded because of: {text}")));
                }
                self.fail_multi();
                return Step::Reply(e);
            }
        };
        if !spec.has(flags::LOADING) && crate::stats::LOADING.active.load(Ordering::Relaxed) {
            self.fail_multi();
            return Step::Reply(Frame::error("LOADING Abacus is loading the dataset in memory"));
        }
        if !self.authenticated && !spec.has(flags::NO_AUTH) {
            stats::record_rejected(spec.name);
            self.fail_multi();
            return Step::Reply(Frame::error("NOAUTH Authentication required."));
        }
        if spec.is_write() || spec.has(flags::DENY_ON_DISK_ERROR) {
            // Redis refuses writes, queued ones included, while persistence fails (MISCONF),
            // and PING too, so that health checks see it; a refused queued command aborts
            // the transaction like any other.
            if let Some(refused) = crate::snapshot::refusing_writes(&self.worker.server.config) {
                stats::record_rejected(spec.name);
                self.fail_multi();
                return Step::Reply(Frame::error(refused));
            }
        }
        if let Some(multi) = &mut self.multi {
            if spec.has(flags::NO_MULTI) {
                // SAVE, SHUTDOWN: refused, and the transaction aborts at EXEC (Redis 7.0).
                stats::record_rejected(spec.name);
                self.fail_multi();
                return Step::Reply(Frame::error("ERR Command not allowed inside a transaction"));
            }
            // As Redis 7.0, QUIT is never queued: it closes the connection inside MULTI too.
            if !spec.has(flags::CONTROLS_MULTI) && spec.name != "quit" {
                if self.worker.server.monitors.active() && !spec.has(flags::ADMIN) {
                    multi.monitor_args.push(args.to_vec());
                }
                multi.queued.push(Call { spec, args });
                self.meta.multi_len.store(multi.queued.len(), Ordering::Relaxed);
                return Step::Reply(Frame::simple("QUEUED"));
            }
        }
        if spec.is_write() || spec.has(flags::RUNS_QUEUED) {
            self.wrote = true;
        }
        let call = Call { spec, args };
        if let Handler::Keyed(_) = spec.handler {
            if let Some(shard) = self.worker.single_shard(&call) {
                return Step::Batch(shard, call);
            }
        }
        Step::Dispatch(call)
    }

    /// Resolves container commands (CLIENT, CONFIG, ...) to their subcommand and checks arity.
    fn resolve(&self, root: &'static Spec, args: &[Arg]) -> Result<&'static Spec, Frame> {
        if root.subcommands.is_empty() {
            return if root.arity_ok(args.len()) { Ok(root) } else { Err(error_arity(root.name)) };
        }
        if args.len() < 2 {
            // Only COMMAND may be called without a subcommand (its arity allows it).
            return if root.arity_ok(args.len()) { Ok(root) } else { Err(error_arity(root.name)) };
        }
        let Some(sub) = root.subcommand(&args[1]) else {
            // Redis's `%.128s`: the raw bytes, up to 128 and up to a NUL.
            let name = &args[1][..args[1].len().min(128)];
            let name = &name[..memchr::memchr(0, name).unwrap_or(name.len())];
            let help = format!("'. Try {} HELP.", root.name.to_ascii_uppercase());
            return Err(Frame::Error(Bytes::from([&b"ERR unknown subcommand '"[..], name, help.as_bytes()].concat())));
        };
        if sub.arity_ok(args.len()) {
            Ok(sub)
        } else {
            Err(error_arity(sub.name))
        }
    }

    fn fail_multi(&mut self) {
        if let Some(m) = &mut self.multi {
            m.failed = true;
        }
    }

    /// Runs one command (keyed or connection-level) with the given shard access.
    pub async fn dispatch(&mut self, access: Access<'_>, call: Call) -> Frame {
        match call.spec.handler {
            Handler::Keyed(_) => self.worker.run_keyed(access, self.db, call).await,
            Handler::Conn(f) => {
                let started = std::time::Instant::now();
                let name = call.spec.name;
                let reply = f(self, access, &call).await;
                stats::record(name, started.elapsed(), reply.is_error());
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
            let flag = self.watch_flag.clone();
            let shard = crate::shard::shard_of(&key, n);
            self.worker.run(Access::Free, shard, move |s| {
                if let Some(d) = s.dbs.get_mut(db) {
                    d.unwatch(&key, &flag);
                }
            }).await;
        }
        self.watch_flag.store(false, Ordering::Release);
    }
}
