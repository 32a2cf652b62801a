//! Direct replies: the shard thread that runs a connection's whole batch writes its replies
//! to the client's socket itself.
//!
//! Why: a batch whose commands all live on another thread's shard (every unpipelined request
//! for a key of the other shard, a pipeline on one remote hot key) otherwise costs two
//! cross-thread wake-ups: one to send the commands to the shard's thread and one to bring the
//! replies back to the connection's thread, which then writes them. On this kind of machine a
//! wake-up of a sleeping thread (an `eventfd` write, an inter-processor interrupt, a context
//! switch) costs more than the commands themselves. The second one is not needed: the shard's
//! thread can write the replies, and the connection's thread only has to learn, before it
//! writes anything else to that socket, that they are out.
//!
//! A batch on two shards, the connection's own and one other (a pipeline of random keys
//! with two threads), qualifies too: its commands on the own shard run first, on the
//! connection's thread, and their replies travel with the batch in the [`Sink`], so the other
//! thread writes the whole batch's replies in order. Their log commands, deferred on the
//! connection's thread so that its connections share one write per tick, are written
//! before the batch leaves (`hop.rs`), so no reply goes out before its write is in the log.
//!
//! A batch on several shards that must take effect in order (`order.rs`) runs all its parts
//! through the shards' queues, its own shard's too; its [`Sink`] is then shared by the parts
//! in a [`Joint`]: each part adds its replies, and the part that finishes last sends them
//! all, in batch order, from whichever thread it runs on.
//!
//! How: the connection shares its socket as a second file descriptor (`dup`, once per
//! connection) and sends, with the commands, a [`Sink`]: that descriptor, the protocol to
//! encode in, and a [`Completion`]. The shard runs the commands, writes the log record (no
//! reply leaves before the writes it reflects are in the log, as on every path), encodes the
//! replies and sends them with one non-blocking `send`. Then it marks the completion done,
//! and wakes the connection's task only if that task asked to be woken (it is waiting
//! eagerly) or needs to act (the socket was full, the send failed, or the replies must wait
//! for an fsync). The connection's task, meanwhile, is back to waiting for its socket: the
//! client's next request is what normally wakes it, and by then the completion is done.
//!
//! Order and safety:
//! - The connection settles its completion (waits for it, writes what the shard could not)
//!   before it processes more input, writes anything, shuts the socket down or moves to
//!   another thread, so replies keep request order and never interleave.
//! - The shard's descriptor keeps the socket open: a connection that ends while its replies
//!   are in flight (CLIENT KILL, EOF) cannot have its descriptor number reused under the
//!   shard's `send`.
//! - A sink dropped without being used (the shard queue closed at shutdown, a panic) completes
//!   with an error, so the connection never waits forever.
//! - With `appendfsync always` the replies must wait for the fsync that covers them: the shard
//!   hands them back instead of sending them (the connection does not delegate in that mode
//!   either; this covers a CONFIG SET racing with the batch).
//!
//! Who wakes whom, without lost wake-ups: the shard stores "done" and then reads "eager"; the
//! connection stores "eager" and then reads "done" (both sequentially consistent), so at least
//! one of them sees the other's store, and a notification sent before the connection waits is
//! kept by the `Notify` as a permit.

use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use abacus_protocol::{encode, BytesMut, Frame, Protocol};

use crate::engine::Engine;
use crate::stats::ServerStats;

/// What the connection must do itself once the shard is done.
pub enum Leftover {
    /// The socket took only part of the replies: these bytes follow.
    Bytes(Vec<u8>),
    /// The replies were not sent (they wait for the log's fsync first); `lsn` is the log
    /// position after their writes.
    Replies { frames: Vec<Frame>, lsn: u64 },
    /// The send failed, or the shard dropped the batch: the connection closes.
    Failed(std::io::Error),
}

/// The shared state of one delegated batch.
#[derive(Default)]
pub struct Completion {
    done: AtomicBool,
    /// The connection waits for this completion and must be woken.
    eager: AtomicBool,
    notify: Notify,
    leftover: Mutex<Option<Leftover>>,
}

impl Completion {
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    /// Completes only when the shard needs the connection to act (see [`Leftover`]): a
    /// connection waiting for its socket selects on this too.
    pub async fn attention(&self) {
        self.notify.notified().await;
    }

    /// Waits until the shard is done, asking to be woken.
    pub async fn wait(&self) {
        if self.is_done() {
            return;
        }
        self.eager.store(true, Ordering::SeqCst);
        while !self.is_done() {
            self.notify.notified().await;
        }
    }

    /// What the connection has to do itself, once done.
    pub fn take_leftover(&self) -> Option<Leftover> {
        self.leftover.lock().take()
    }

    fn finish(&self, leftover: Option<Leftover>) {
        let attention = leftover.is_some();
        if attention {
            *self.leftover.lock() = leftover;
        }
        self.done.store(true, Ordering::SeqCst);
        if attention || self.eager.load(Ordering::SeqCst) {
            self.notify.notify_one();
        }
    }
}

/// Where a shard sends a delegated batch's replies.
pub struct Sink {
    socket: Arc<std::net::TcpStream>,
    proto: Protocol,
    completion: Arc<Completion>,
    /// Replies of the batch's commands on the connection's own shard, which ran there first
    /// (indexes into the batch, in order).
    local: Vec<(usize, Frame)>,
    finished: bool,
}

thread_local! {
    /// The shard thread's encoding buffer, reused across batches.
    static ENCODED: RefCell<BytesMut> = RefCell::new(BytesMut::with_capacity(16 * 1024));
}

/// Above this, the encoding buffer is given back after use instead of kept.
const KEEP_BUFFER_BYTES: usize = 1 << 20;

impl Sink {
    pub fn new(socket: Arc<std::net::TcpStream>, proto: Protocol, completion: Arc<Completion>, local: Vec<(usize, Frame)>) -> Sink {
        Sink { socket, proto, completion, local, finished: false }
    }

    /// Some of the replies were made on the connection's own shard, whose log commands must
    /// be written before this sink's replies can go out (see `hop.rs`).
    pub fn has_local(&self) -> bool {
        !self.local.is_empty()
    }

    /// Sends `replies` with the local ones, in batch order, to the client, on the shard's
    /// thread, after the batch's log records are written.
    pub fn deliver(mut self, replies: Vec<(usize, Frame)>, server: &Engine) {
        let stats = &server.stats;
        // `finished` is set right before each `finish`: if anything in between panicked,
        // the drop would still complete the batch (with an error) and free the connection.
        let local = std::mem::take(&mut self.local);
        if let Some(aof) = server.durability.log() {
            if aof.mode() == crate::aof::Fsync::Always {
                let lsn = aof.appended();
                let frames = merged(local, replies).map(|(_, f)| f).collect();
                self.finished = true;
                self.completion.finish(Some(Leftover::Replies { frames, lsn }));
                return;
            }
        }
        let leftover = ENCODED.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            for (_, frame) in merged(local, replies) {
                server.recorders.errors.count_reply(&frame);
                encode(&frame, self.proto, &mut buf);
            }
            ServerStats::add(&stats.net_output_bytes_total, buf.len() as u64);
            ServerStats::add(&stats.direct_replies, 1);
            let leftover = send_some(&self.socket, &buf);
            if matches!(leftover, Some(Leftover::Bytes(_))) {
                ServerStats::add(&stats.direct_replies_partial, 1);
            }
            if buf.capacity() > KEEP_BUFFER_BYTES {
                *buf = BytesMut::with_capacity(16 * 1024);
            }
            leftover
        });
        self.finished = true;
        self.completion.finish(leftover);
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if !self.finished {
            self.completion.finish(Some(Leftover::Failed(std::io::Error::other("the shard dropped the batch (shutting down)"))));
        }
    }
}

/// A [`Sink`] shared by the parts of one batch that run on different shards: the last part
/// to finish delivers every part's replies. If the parts are dropped unrun (shutting down),
/// the sink drops with the last of them and completes with an error.
pub struct Joint {
    state: Mutex<JointState>,
}

struct JointState {
    parts_left: usize,
    /// The replies so far, in batch order.
    replies: Vec<(usize, Frame)>,
    sink: Option<Sink>,
}

impl Joint {
    pub fn new(sink: Sink, parts: usize) -> Arc<Joint> {
        assert!(parts > 0 && !sink.has_local(), "a joint sink gathers every reply from its parts");
        Arc::new(Joint { state: Mutex::new(JointState { parts_left: parts, replies: Vec::new(), sink: Some(sink) }) })
    }

    /// One part's replies (indexes into the batch, in order); the last part sends them all
    /// (merged in batch order: with two parts, the second part's replies are merged once).
    pub fn part_done(&self, replies: Vec<(usize, Frame)>, server: &Engine) {
        let ready = {
            let mut s = self.state.lock();
            s.replies = if s.replies.is_empty() { replies } else { merged(std::mem::take(&mut s.replies), replies).collect() };
            s.parts_left -= 1;
            (s.parts_left == 0).then(|| (s.sink.take(), std::mem::take(&mut s.replies)))
        };
        if let Some((Some(sink), all)) = ready {
            sink.deliver(all, server);
        }
    }
}

/// Two runs of replies, each in batch order, merged into batch order.
fn merged(a: Vec<(usize, Frame)>, b: Vec<(usize, Frame)>) -> impl Iterator<Item = (usize, Frame)> {
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some((i, _)), Some((j, _))) => if i < j { a.next() } else { b.next() },
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

/// One non-blocking send of `bytes` (the descriptor shares the connection's non-blocking
/// mode); what it did not take is returned.
fn send_some(socket: &std::net::TcpStream, bytes: &[u8]) -> Option<Leftover> {
    let mut sent = 0;
    while sent < bytes.len() {
        match (&*socket).write(&bytes[sent..]) {
            Ok(0) => return Some(Leftover::Failed(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Some(Leftover::Bytes(bytes[sent..].to_vec())),
            Err(e) => return Some(Leftover::Failed(e)),
        }
    }
    None
}
