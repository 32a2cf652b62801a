//! The registry of connected clients, for CLIENT LIST/KILL/INFO and INFO clients.
//!
//! Connections live on different worker threads; the registry is the one structure they
//! share, and it is touched on connect, disconnect, and by the CLIENT commands, never per
//! request. Per-request fields (last command, database, idle time) are atomics or small
//! mutexes inside each client's own record.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// What other connections may see of, and do to, a client.
pub struct ClientMeta {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub created: Instant,
    pub last_interaction_ms: AtomicU64,
    pub name: Mutex<Option<String>>,
    pub lib_name: Mutex<Option<String>>,
    pub db: AtomicUsize,
    pub resp: AtomicUsize,
    pub last_cmd: Mutex<&'static str>,
    pub multi_len: AtomicUsize,
    /// Subscriptions to channels, patterns and shard channels (`pubsub.rs` keeps them).
    pub sub: AtomicUsize,
    pub psub: AtomicUsize,
    pub ssub: AtomicUsize,
    pub no_evict: AtomicBool,
    /// CLIENT NO-TOUCH (flag T): the client's commands leave keys' access times alone.
    pub no_touch: AtomicBool,
    pub killed: AtomicBool,
    pub kill: Notify,
    /// Waiting in a blocking command (BLPOP...): CLIENT LIST's `b` flag, CLIENT UNBLOCK.
    pub blocked: AtomicBool,
    /// CLIENT UNBLOCK's request ([`UNBLOCK_TIMEOUT`] or [`UNBLOCK_ERROR`]; 0 = none) and its
    /// wake-up (also raised by CLIENT KILL, so a blocked client notices at once).
    pub unblock_mode: std::sync::atomic::AtomicU8,
    pub unblock: Notify,
    /// CLIENT LIST's buffer figures, published by the connection once per batch (a few
    /// relaxed stores, never per command): unparsed request bytes (`qbuf`) and the request
    /// buffer's free capacity (`qbuf-free`), the request and reply buffers' capacity (in
    /// `tot-mem`), the bytes of commands queued in MULTI (`multi-mem`), and published
    /// messages not yet written (`omem`, kept by `pubsub.rs`).
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
    pub buffers_capacity: AtomicUsize,
    pub multi_mem: AtomicUsize,
    pub omem: AtomicUsize,
    /// The ACL user the client is authenticated as (CLIENT LIST's `user`).
    pub user: Mutex<Arc<str>>,
    /// The client's replication role: 0, [`REPL_MASTER`] (a replica's link to its primary)
    /// or [`REPL_REPLICA`] (a replica attached to this primary).
    pub repl_kind: std::sync::atomic::AtomicU8,
    /// CLIENT TRACKING: the redirect client's id (0 = none) while tracking, -1 when not
    /// (CLIENT LIST's `redir` and `t` flag), and the invalidations waiting (`tracking.rs`).
    pub tracking_redir: std::sync::atomic::AtomicI64,
    pub inbox: crate::tracking::Inbox,
}

/// `repl_kind` of the primary's link on a replica (CLIENT flag M, type master).
pub const REPL_MASTER: u8 = 1;
/// `repl_kind` of a replica's link on its primary (CLIENT flag S, type replica/slave).
pub const REPL_REPLICA: u8 = 2;

/// CLIENT UNBLOCK id TIMEOUT: the command returns as if it timed out.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK id ERROR: the command fails with `-UNBLOCKED`.
pub const UNBLOCK_ERROR: u8 = 2;
/// The server became a replica (REPLICAOF host port): the command fails with Redis 7.0's
/// `-UNBLOCKED ... instance state changed` and the connection closes after the reply, as
/// Redis's disconnectAllBlockedClients (a blocked pop's wait made sense on a primary only).
pub const UNBLOCK_ROLE: u8 = 3;

impl abacus_engine::pubsub::SubscriberClient for ClientMeta {
    fn set_output_bytes(&self, n: usize) {
        self.omem.store(n, Ordering::Relaxed);
    }

    fn set_subscriptions(&self, channels: usize, patterns: usize, shard: usize) {
        self.sub.store(channels, Ordering::Relaxed);
        self.psub.store(patterns, Ordering::Relaxed);
        self.ssub.store(shard, Ordering::Relaxed);
    }

    fn kill(&self) {
        ClientMeta::kill(self);
    }

    fn describe(&self, now_ms: u64) -> String {
        self.info_line(now_ms)
    }
}

impl ClientMeta {
    /// Its address and name, as a slow log entry shows them.
    pub fn slowlog_label(&self) -> abacus_engine::slowlog::ClientLabel {
        (self.addr.to_string(), self.name.lock().clone().unwrap_or_default())
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill.notify_one();
        self.unblock.notify_waiters();
    }

    /// CLIENT UNBLOCK: wakes the client if it is blocked; whether it was.
    pub fn request_unblock(&self, mode: u8) -> bool {
        if !self.blocked.load(Ordering::Acquire) {
            return false;
        }
        self.unblock_mode.store(mode, Ordering::Release);
        self.unblock.notify_waiters();
        true
    }

    /// CLIENT NO-TOUCH is on.
    #[inline]
    pub fn no_touch(&self) -> bool {
        self.no_touch.load(Ordering::Relaxed)
    }

    /// Whether the client has a subscription (Redis's CLIENT_PUBSUB flag, type `pubsub`).
    pub fn is_pubsub(&self) -> bool {
        self.sub.load(Ordering::Relaxed) + self.psub.load(Ordering::Relaxed) + self.ssub.load(Ordering::Relaxed) > 0
    }

    /// One CLIENT LIST / CLIENT INFO line, with Redis's field names.
    pub fn info_line(&self, now_ms: u64) -> String {
        let age = self.created.elapsed().as_secs();
        let idle = now_ms.saturating_sub(self.last_interaction_ms.load(Ordering::Relaxed)) / 1000;
        let name = self.name.lock().clone().unwrap_or_default();
        // Redis's letters, in its order; N when none applies.
        let mut flags = String::new();
        match self.repl_kind.load(Ordering::Relaxed) {
            REPL_MASTER => flags.push('M'),
            REPL_REPLICA => flags.push('S'),
            _ => {}
        }
        if self.is_pubsub() {
            flags.push('P');
        }
        let multi = match self.multi_len.load(Ordering::Relaxed) {
            usize::MAX => -1,
            n => {
                flags.push('x');
                n as i64
            }
        };
        if self.blocked.load(Ordering::Relaxed) {
            flags.push('b');
        }
        let redir = self.tracking_redir.load(Ordering::Relaxed);
        if redir >= 0 {
            flags.push('t');
        }
        if self.no_evict.load(Ordering::Relaxed) {
            flags.push('e');
        }
        if self.no_touch() {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let qbuf = self.qbuf.load(Ordering::Relaxed);
        let qbuf_free = self.qbuf_free.load(Ordering::Relaxed);
        let buffers = self.buffers_capacity.load(Ordering::Relaxed);
        let multi_mem = self.multi_mem.load(Ordering::Relaxed);
        let omem = self.omem.load(Ordering::Relaxed);
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={qbuf} qbuf-free={} argv-mem=0 multi-mem={multi_mem} rbs={} rbp=0 obl=0 oll=0 omem={omem} tot-mem={} events=r cmd={} user={} redir={redir} resp={}",
            self.id,
            self.addr,
            self.laddr,
            name,
            age,
            idle,
            flags,
            self.db.load(Ordering::Relaxed),
            self.sub.load(Ordering::Relaxed),
            self.psub.load(Ordering::Relaxed),
            self.ssub.load(Ordering::Relaxed),
            multi,
            qbuf_free,
            qbuf + qbuf_free,
            // The connection's own record and buffers, what it queued and what waits for it.
            std::mem::size_of::<ClientMeta>() + buffers + multi_mem + omem,
            self.last_cmd.lock(),
            self.user.lock(),
            self.resp.load(Ordering::Relaxed),
        )
    }
}

/// All connected clients by id.
#[derive(Default)]
pub struct Clients {
    next_id: AtomicU64,
    map: Mutex<BTreeMap<u64, Arc<ClientMeta>>>,
}

impl Clients {
    /// Registers a new client unless `maxclients` are already connected.
    pub fn register(&self, addr: SocketAddr, laddr: SocketAddr, maxclients: usize, now_ms: u64) -> Option<Arc<ClientMeta>> {
        let mut map = self.map.lock();
        if map.len() >= maxclients {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let meta = Arc::new(ClientMeta {
            id,
            addr,
            laddr,
            created: Instant::now(),
            last_interaction_ms: AtomicU64::new(now_ms),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            db: AtomicUsize::new(0),
            resp: AtomicUsize::new(2),
            last_cmd: Mutex::new("NULL"),
            multi_len: AtomicUsize::new(usize::MAX),
            sub: AtomicUsize::new(0),
            psub: AtomicUsize::new(0),
            ssub: AtomicUsize::new(0),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            blocked: AtomicBool::new(false),
            unblock_mode: std::sync::atomic::AtomicU8::new(0),
            unblock: Notify::new(),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            buffers_capacity: AtomicUsize::new(0),
            multi_mem: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            user: Mutex::new(Arc::from("default")),
            repl_kind: std::sync::atomic::AtomicU8::new(0),
            tracking_redir: std::sync::atomic::AtomicI64::new(-1),
            inbox: crate::tracking::Inbox::default(),
        });
        map.insert(id, meta.clone());
        Some(meta)
    }

    pub fn unregister(&self, id: u64) {
        self.map.lock().remove(&id);
    }

    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every client not killed yet. A killed client stays registered until its connection
    /// task has wound down (its socket may already be closed); Redis frees another client
    /// synchronously in CLIENT KILL, so to CLIENT LIST and a second CLIENT KILL it is gone.
    pub fn all(&self) -> Vec<Arc<ClientMeta>> {
        self.map.lock().values().filter(|c| !c.killed.load(Ordering::Acquire)).cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientMeta>> {
        self.map.lock().get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_client_is_no_longer_listed_before_it_unregisters() {
        let clients = Clients::default();
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let a = clients.register(addr, addr, 10, 0).unwrap();
        let b = clients.register(addr, addr, 10, 0).unwrap();
        a.kill();
        let ids: Vec<u64> = clients.all().iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![b.id]);
        // Still registered (counted against maxclients) until its connection unregisters it.
        assert_eq!(clients.len(), 2);
        clients.unregister(a.id);
        assert_eq!(clients.len(), 1);
    }
}
