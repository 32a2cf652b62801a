//! The Abacus server: the Redis protocol over TCP on top of sharded keyspaces.
//!
//! Layout (a reader should find any command within a minute):
//! - `config.rs`   every configuration parameter, declared once (CLI, file, CONFIG, mirrors)
//! - `server.rs`   start-up (data directory lock, banner), threads, listeners, signals
//! - `shard.rs`    a shard's data and its job loop; key -> shard mapping; the hooks a
//!   handler's `Ctx` reaches the server through (`Ctx` itself is `abacus-commands`')
//! - `exec.rs`     running commands on shards: batches, multi-shard atomicity, fan-outs
//! - `hop.rs`      coalescing the batches bound for other shards: one message per tick
//! - `order.rs`    a connection's commands take effect in order across shards
//! - `direct.rs`   a shard's thread writing a batch's replies to the client itself
//! - `conn/`       one client connection: the socket loop (`mod.rs`: read, run, write),
//!   the checks before a command runs (`admit.rs`), moving to another thread (`migrate.rs`)
//! - `command.rs`  the command table (names, arity, flags, keys, handlers: the one place a
//!   command is known; code that must recognise a command tests an entry's flag or names
//!   its family's entry, never a name string): `abacus-commands`' families and this
//!   crate's, and the typing of connection-level handlers (`ConnFn`)
//! - `cmd/`        the command families that need the server, one file each (connection,
//!   server, persistence, transactions, scan for KEYS/SCAN/RANDOMKEY, the fan-outs of sort
//!   and attribute, MEMORY's server-wide subcommands, pubsub, the multi-series time-series commands
//!   (`ts_multi.rs`: TS.MGET, TS.MRANGE, TS.QUERYINDEX, TS.WATERFALL), summary, ...);
//!   the data families (strings, keys, expiry, bits, hashes, sets, lists, sorted sets, geo,
//!   streams, HLL, PF, DUMP/RESTORE, MEMORY USAGE, one-series TS.*) are `abacus-commands`', re-exported there
//!   under their names
//! - `durability.rs`: the server's log and snapshot handles (`Durability`, in `Server`),
//!   passed explicitly: each shard's `ShardLog` holds them with its pending log commands, so
//!   no static or thread-local is on the write path
//! - `aof.rs`, `snapshot.rs`, `recovery.rs`: the log (fed by handlers' stated effects, from
//!   each shard's `ShardLog`), snapshots without fork, and loading at start
//! - `monitor.rs`  MONITOR's stream
//! - `notify.rs`   keyspace notifications (notify-keyspace-events): events gathered by `Ctx`
//!   (`abacus_commands::notify`), published after each command
//! - `blocking.rs` blocked clients (BLPOP...): registered and served on the shard, in order
//! - `pubsub.rs`   pub/sub: the subscriptions shared by all threads, delivery to subscribers
//!   (the commands are in `cmd/pubsub.rs`)
//! - `clients.rs`, `stats.rs`, `memory.rs`: client registry, counters, process figures
//! - `slowlog.rs`, `latency.rs`: SLOWLOG, per-command latency histograms and the latency
//!   monitor (the commands are in `cmd/latency.rs`); `metrics.rs`: the Prometheus endpoint
//! - `replication/`: the replication stream, the primary's and the replica's side of a link
//!   (the commands are in `cmd/replication.rs`)
//!
//! What it is not: the data structures and the keyspace (`abacus-collections`,
//! `abacus-keyspace`), the on-disk formats (`abacus-persist`), the protocol codec
//! (`abacus-protocol`), the data command families (`abacus-commands`, below the network
//! layer).

#![forbid(unsafe_code)]

pub mod acl;
pub mod aof;
pub mod blocking;
pub mod client_pause;
pub mod clients;
pub mod cmd;
pub mod command;
pub mod config;
pub mod conn;
pub mod direct;
pub mod durability;
pub mod engine;
#[cfg(test)]
mod effects_tests;
pub mod exec;
pub mod hop;
pub mod memory;
pub mod monitor;
pub mod notify;
pub mod order;
pub mod pubsub;
pub mod recovery;
pub mod replication;
pub mod server;
pub mod snapshot;
pub mod shard;
pub mod stats;
pub mod summarizer;
pub mod latency;
pub mod log_marks;
pub mod slowlog;
pub mod metrics;
pub mod keyspec;
pub mod command_docs;
pub mod tracking;
pub mod command_flags;
pub mod command_docs_args;
pub mod ingest_port;

pub use config::Config;
pub use server::run;
