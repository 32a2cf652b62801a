//! The engine: what runs commands on shards and keeps their effects, shared by every worker
//! thread, below the connections.
//!
//! One [`Engine`] is built at start: the configuration, each shard's queue, the order in
//! which multi-shard work enters those queues (`order.rs`), the durability handles (log,
//! snapshots: `durability.rs`), the counters and the recorders (INFO errorstats, loading
//! progress, the slow log, the latency monitor: `recorders.rs`). The engine's modules (`shard.rs`,
//! `exec.rs`, `hop.rs`, `direct.rs`, `blocking.rs`, `aof.rs`, `snapshot.rs`, `recovery.rs`,
//! `pubsub.rs`, `notify.rs`...) reach each other and this value, never the connection layer
//! above them: the `Server` (`server.rs`) holds an `Arc<Engine>` beside what only
//! connections need (the client registry, ACL, MONITOR, CLIENT PAUSE), and reads the
//! engine's fields through it (`Deref`).

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::config::Config;
use crate::durability::Durability;
use crate::order::Order;
use crate::recorders::Recorders;
use crate::shard::ShardMsg;
use crate::stats::ServerStats;

/// State shared by all worker threads that the engine's modules need (see the file comment).
pub struct Engine {
    pub config: Config,
    /// Each shard's job queue, indexed by shard (one shard per worker thread).
    pub senders: Vec<mpsc::Sender<ShardMsg>>,
    pub stats: ServerStats,
    pub databases: usize,
    /// How multi-shard operations enter the shards' queues (see `order.rs`).
    pub order: Order,
    /// The log and snapshots (`durability.rs`): each shard holds a handle in its `ShardLog`.
    pub durability: Arc<Durability>,
    /// Error replies, loading progress, the slow log and the latency monitor; each shard
    /// holds a handle beside its own command table (`recorders.rs`).
    pub recorders: Arc<Recorders>,
    /// The script cache, FUNCTION libraries and the running script (the server's
    /// `cmd/scripting.rs`). Here because the libraries are data: snapshots hold them.
    pub scripts: Arc<abacus_scripting::Shared>,
}

impl Engine {
    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.senders.len()
    }
}
