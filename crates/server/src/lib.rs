//! The Abacus server: the Redis protocol over TCP on top of sharded keyspaces.
//!
//! Layout (a reader should find any command within a minute):
//! - `server.rs`   start-up (data directory lock, banner), threads, listeners, signals; the
//!   `Server` (the engine's `Arc<Engine>` beside what only connections need) and `Node`
//! - `conn/`       one client connection: the socket loop (`mod.rs`: read, run, write),
//!   the checks before a command runs (`admit.rs`), moving to another thread (`migrate.rs`),
//!   a blocking command's wait (`block.rs`)
//! - `command.rs`  the command table (names, arity, flags, keys, handlers: the one place a
//!   command is known; code that must recognise a command tests an entry's flag or names
//!   its family's entry, never a name string): `abacus-commands`' families and this
//!   crate's, and the typing of connection-level handlers (`ConnFn`)
//! - `cmd/`        the command families that need the server, one file each (connection,
//!   server, persistence, transactions, scan for KEYS/SCAN/RANDOMKEY, the fan-outs of sort
//!   and attribute, MEMORY's server-wide subcommands, pubsub, the multi-series time-series commands
//!   (`ts_multi.rs`: TS.MGET, TS.MRANGE, TS.QUERYINDEX, TS.WATERFALL: the fan-outs and
//!   merges; the shard side is `abacus-commands`' `ts_filter.rs`, `ts_waterfall.rs`), summary, ...);
//!   the data families (strings, keys, expiry, bits, hashes, sets, lists, sorted sets, geo,
//!   streams, HLL, PF, DUMP/RESTORE, MEMORY USAGE, one-series TS.*) are `abacus-commands`', re-exported there
//!   under their names
//! - `keyspec.rs`, `command_docs.rs`, `command_flags.rs`: what COMMAND INFO / DOCS / GETKEYS
//!   derive from the table entries (key specs, argument trees, categories and flags)
//! - `monitor.rs`  MONITOR's stream
//! - `clients.rs`  the client registry (`ClientMeta`: CLIENT LIST, KILL, UNBLOCK)
//! - `acl/`, `client_pause.rs`, `tracking.rs`: ACL users, CLIENT PAUSE, client-side caching
//! - `metrics.rs`: the Prometheus endpoint; `ingest_port.rs`: the summarizer's line port
//! - `replication/`: the replication stream, the primary's and the replica's side of a link
//!   (the commands are in `cmd/replication.rs`), fed by the engine's effects stream
//!   (`abacus_engine::durability::Feed`)
//!
//! What it is not: the engine below it (`abacus-engine`: configuration, shards, running
//! commands on them, blocking, pub/sub delivery, notifications, memory, the log, snapshots,
//! recovery, counters), the data structures and the keyspace (`abacus-collections`,
//! `abacus-keyspace`), the on-disk formats (`abacus-persist`), the protocol codec
//! (`abacus-protocol`), the data command families (`abacus-commands`, below the network
//! layer).

#![forbid(unsafe_code)]

pub mod acl;
pub mod client_pause;
pub mod clients;
pub mod cluster;
pub mod cmd;
pub mod command;
pub mod conn;
pub mod fanout;
#[cfg(test)]
mod effects_tests;
pub mod migrate_links;
pub mod monitor;
pub mod node;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod summarizer;
pub mod metrics;
pub mod keyspec;
pub mod command_docs;
pub mod tracking;
pub mod command_flags;
pub mod ingest_port;
pub mod tls;
pub mod export;

pub use abacus_engine::Config;
pub use server::run;
