//! Migration of a connection to another worker thread.
//!
//! Why: a command for another thread's shard costs a hop there and back (a message, a
//! wake-up of that thread, its reply). A client that only ever touches one remote shard
//! (one hot counter, keys under one `{hash tag}`) pays that for every batch, and the owning
//! thread does the work of every client of its keys anyway. So once `migrate-connections-after`
//! consecutive single-shard commands of a connection went to one other shard, the connection
//! moves to that shard's thread, between two batches, once the run has outlasted the batch
//! in which it began (one long pipeline of another shard's keys does not move a client whose
//! other batches go elsewhere): when every reply so far is written (and
//! durable, with `appendfsync always`), so nothing is in flight. What moves is the socket
//! (deregistered from this thread's reactor, registered with the other's), the unparsed input
//! and the parser's position in it, and the connection's `Client` (database, protocol,
//! authentication, CLIENT REPLY mode). The client's registry record (id, name, kill signal)
//! stays the same. Not moved: a connection inside MULTI or with WATCHed keys (their
//! registrations live on the shards), which keeps its thread until it is out of both. A run
//! of random keys over N shards reaches the threshold with probability (1/N)^(threshold-1):
//! never, in practice, at the default of 256.

use super::*;

/// Removes a client from the registry when dropped, so that whatever ends a connection (a
/// close, an error, a panic in its task, a move whose message is never received) forgets the
/// client exactly once.
pub(super) struct Registration {
    server: Arc<crate::node::Server>,
    id: u64,
}

impl Registration {
    pub(super) fn new(server: &Arc<crate::node::Server>, id: u64) -> Registration {
        Registration { server: server.clone(), id }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.server.clients.unregister(self.id);
    }
}

/// A connection on its way to another worker thread (see the file comment).
pub struct Moved {
    client: Client,
    stream: std::net::TcpStream,
    addr: SocketAddr,
    parser: RequestParser,
    rbuf: BytesMut,
}

/// Where [`Conn::run`] left a connection that is to move.
pub(super) struct Handoff {
    pub(super) stream: Stream,
    pub(super) parser: RequestParser,
    pub(super) rbuf: BytesMut,
    pub(super) target: usize,
}

/// Continues serving a connection that moved to this thread (see the file comment).
pub async fn resume(worker: Rc<Node>, m: Moved) {
    let stream = match tokio::net::TcpStream::from_std(m.stream) {
        Ok(stream) => Stream::Plain(stream),
        Err(e) => {
            // Dropping `m` forgets the client.
            tracing::debug!(client = m.client.meta.id, "connection closed while moving: {e}");
            return;
        }
    };
    let conn = Conn::new(worker, m.client);
    conn.serve_until_closed(stream, m.addr, m.parser, m.rbuf).await;
}

impl Conn {
    pub(super) fn new(worker: Rc<Node>, client: Client) -> Conn {
        Conn {
            worker,
            client,
            multi: None,
            watched: Vec::new(),
            watch_pending: Vec::new(),
            close_after_reply: false,
            wrote: false,
            out: BytesMut::with_capacity(READ_CHUNK_BYTES),
            streak_shard: 0,
            streak: 0,
            streak_fresh: false,
            inflight: None,
            monitor: None,
            pubsub: None,
            pubsub_unreleased: 0,
            is_master: false,
            psync: None,
            repl_listening_port: 0,
            tracking: None,
        }
    }

    /// The shard this connection should move to now, if any: between batches, with nothing
    /// pending (see the file comment).
    pub(super) fn migration_target(&mut self) -> Option<usize> {
        if std::mem::take(&mut self.streak_fresh) {
            return None;
        }
        self.migration_due().filter(|_| self.inflight.is_none())
    }

    /// Whether the connection should move to another shard's thread, replies in flight
    /// aside.
    pub(super) fn migration_due(&self) -> Option<usize> {
        let after = self.worker.server.config.migrate_after();
        let move_it = after > 0
            && self.monitor.is_none()
            && self.pubsub.is_none()
            && self.tracking.is_none()
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

    /// Sends the connection to `h.target`'s thread, its client with it. On error the socket
    /// is closed and the client forgotten (a connection that may move has no subscriptions,
    /// watches, MONITOR or tracking to clean up: see `migration_due`).
    pub(super) fn hand_off(self, h: Handoff, addr: SocketAddr) -> std::io::Result<()> {
        let server = self.worker.server.clone();
        let stream = h.stream.into_plain().map_err(|_| std::io::Error::other("a TLS connection cannot move"))?.into_std()?;
        let client = self.client;
        let moved = Moved { client, stream, addr, parser: h.parser, rbuf: h.rbuf };
        let queue = server.conn_queues.get(h.target).ok_or_else(|| std::io::Error::other("no such worker"))?;
        queue.send(crate::node::Incoming::Moved(Box::new(moved))).map_err(|_| std::io::Error::other("worker stopped"))?;
        ServerStats::add(&server.stats.migrated_connections, 1);
        Ok(())
    }

    /// Counts a command toward a migration: `shard` is where it runs, None for a command
    /// whose keys span shards.
    pub(super) fn note_route(&mut self, shard: Option<usize>) {
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
}
