//! The server as its connections and commands see it: the shared [`Server`] (the engine
//! beside the client registry, ACL, MONITOR and CLIENT PAUSE) and each worker thread's
//! [`Node`]. Start-up, which builds them and wires everything together, is `server.rs`; this
//! file holds the values only, so that what reads them (connections, command families,
//! replication) does not reach the start-up code.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use abacus_engine::engine::Engine;
use abacus_engine::exec::Worker;

use crate::clients::Clients;

/// The Redis version Abacus reports (INFO, HELLO): the command set and replies follow it.
pub const REDIS_VERSION: &str = "7.0.15";
/// Redis 7.0.15 as `REDIS_VERSION_NUM` (0x00MMmmpp).
pub const REDIS_VERSION_NUM: u32 = 0x0007_000f;
pub const ABACUS_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a worker thread's connection queue brings it.
pub enum Incoming {
    /// A freshly accepted connection.
    New(std::net::TcpStream, SocketAddr),
    /// A freshly accepted connection on a `tls-port`: its handshake runs on the worker.
    NewTls(std::net::TcpStream, SocketAddr),
    /// A connection moving in from another worker (`conn/migrate.rs`).
    /// Boxed: a moving connection carries its buffers and state, and is rare.
    Moved(Box<crate::conn::Moved>),
    /// Work for a worker thread from a thread that is none (the cluster bus promoting this
    /// node or pointing it at a new primary).
    Run(Box<dyn FnOnce(Rc<Node>) + Send>),
}

/// State shared by all worker threads: the engine's (`engine.rs`), and what only the
/// connection layer needs. Reads of the engine's fields go through it (`Deref`).
pub struct Server {
    pub engine: Arc<Engine>,
    /// Each worker's connection queue, indexed like the engine's `senders`.
    pub conn_queues: Vec<mpsc::UnboundedSender<Incoming>>,
    pub clients: Clients,
    pub started: Instant,
    pub run_id: String,
    pub port: u16,
    pub threads: usize,
    /// DEBUG SLEEP's pause of every connection.
    pub pause: Pause,
    /// The clients in MONITOR mode (see `monitor.rs`).
    pub monitors: crate::monitor::Monitors,
    /// ACL users and log (`acl.rs`).
    pub acl: crate::acl::Acl,
    /// CLIENT PAUSE (`client_pause.rs`).
    pub client_pause: crate::client_pause::ClientPause,
    /// The summarizer's rules, counts and queue (`summarizer.rs`).
    pub summarizer: crate::summarizer::Summarizer,
    /// Cluster mode's view and bus (`cluster.rs`); None with `cluster-enabled no`.
    pub cluster: Option<Arc<crate::cluster::ClusterNode>>,
    /// The TLS configuration in use and its counters (`tls.rs`).
    pub tls: Arc<abacus_tls::Tls>,
    /// EXPORT's running and last export (`export/live.rs`).
    pub export: crate::export::progress::Exports,
}

impl std::ops::Deref for Server {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

/// A worker thread as the connection layer sees it: the engine's [`Worker`] (its shard, its
/// hops, its way to other shards) and the [`Server`]. Reads of the worker's fields and
/// methods go through it (`Deref`); `worker` is what engine functions that keep a worker
/// take (snapshots' driver).
pub struct Node {
    pub server: Arc<Server>,
    pub worker: Rc<Worker>,
    /// Connections to MIGRATE targets kept for the next MIGRATE (`cmd/migrate.rs`).
    pub migrate_links: crate::migrate_links::Links,
}

impl std::ops::Deref for Node {
    type Target = Worker;
    fn deref(&self) -> &Worker {
        &self.worker
    }
}

/// A pause of the whole server (DEBUG SLEEP, as Redis's, which blocks its only thread). The
/// pauser holds every shard, so no command on data runs; connections also wait here before
/// each batch, so connection-level commands (PING, INFO...) wait too. Not paused, a
/// connection pays one atomic load per batch.
///
/// No deadlock: the pauser takes the gate only once it holds every shard (so two pausers
/// cannot each hold a part), and a connection waits at the gate holding nothing.
#[derive(Default)]
pub struct Pause {
    active: std::sync::atomic::AtomicBool,
    gate: tokio::sync::RwLock<()>,
}

impl Pause {
    /// Waits while the server is paused.
    pub async fn wait(&self) {
        if self.active.load(std::sync::atomic::Ordering::Acquire) {
            drop(self.gate.read().await);
        }
    }

    /// Pauses the server until the guard drops. The caller must hold every shard.
    pub async fn hold(&self) -> PauseGuard<'_> {
        let gate = self.gate.write().await;
        self.active.store(true, std::sync::atomic::Ordering::Release);
        PauseGuard { pause: self, _gate: gate }
    }
}

/// The server is paused while this lives.
pub struct PauseGuard<'a> {
    pause: &'a Pause,
    _gate: tokio::sync::RwLockWriteGuard<'a, ()>,
}

impl Drop for PauseGuard<'_> {
    /// Clears the flag before the gate opens (the fields drop after this).
    fn drop(&mut self) {
        self.pause.active.store(false, std::sync::atomic::Ordering::Release);
    }
}

