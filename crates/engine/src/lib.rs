//! The Abacus engine: the machinery that runs commands on shards and keeps their effects,
//! below the network layer (`abacus-server` holds the connections above it).
//!
//! Layout:
//! - `engine.rs`   the [`engine::Engine`] value built at start: configuration, the shards'
//!   queues, the order of multi-shard work, durability, counters
//! - `config.rs`   every configuration parameter, declared once (CLI, file, CONFIG, mirrors)
//! - `shard.rs`    a shard's data and its job loop; key -> shard mapping; the hooks a
//!   handler's `Ctx` reaches the engine through (`Ctx` itself is `abacus-commands`')
//! - `exec.rs`     running commands on shards: batches, multi-shard atomicity, fan-outs; the
//!   engine's `Worker` (one per thread)
//! - `hop.rs`      coalescing the batches bound for other shards: one message per tick
//! - `order.rs`    a connection's commands take effect in order across shards
//! - `direct.rs`   a shard's thread writing a batch's replies to the client itself
//! - `blocking.rs` blocked clients: registered on shards, re-evaluated when what they wait on
//!   changes, served in order
//! - `notify.rs`, `pubsub.rs`: keyspace notifications and the delivery of published messages
//!   to subscribers (whatever the connection is: `pubsub::SubscriberClient`)
//! - `memory.rs`   memory accounting and the freeing of big values off the shard threads
//! - `durability.rs`, `aof.rs`, `snapshot.rs`, `recovery.rs`, `log_marks.rs`: the log (fed
//!   by handlers' stated effects), snapshots without fork, loading at start; replication
//!   consumes the effects stream through `durability::Feed`
//! - `recorders.rs` the engine's recorders, values built at start: INFO commandstats per
//!   shard, error replies, loading progress, the slow log, the latency monitor (`stats.rs`,
//!   `slowlog.rs`, `latency.rs` hold their types)
//!
//! What it is not: connections, the connection-level commands, ACL, MONITOR, client-side
//! caching, replication and the command table (`abacus-server`); the data command families
//! (`abacus-commands`, below it). Nothing here names the connection layer: what the engine
//! needs of it is a trait or a function given at start.

#![forbid(unsafe_code)]

pub mod aof;
pub mod blocking;
pub mod clock;
pub mod config;
pub mod direct;
pub mod durability;
pub mod engine;
pub mod exec;
pub mod hop;
pub mod latency;
pub mod log_marks;
pub mod memory;
pub mod notify;
pub mod order;
pub mod pubsub;
pub mod recorders;
pub mod recovery;
pub mod shard;
pub mod slowlog;
pub mod snapshot;
pub mod snapshot_state;
pub mod stats;

pub use config::Config;
