//! The Abacus server: the Redis protocol over TCP on top of sharded keyspaces.
//!
//! Layout (a reader should find any command within a minute):
//! - `config.rs`   every configuration parameter, CLI/file/CONFIG SET parsing
//! - `server.rs`   start-up, threads, listeners, signals
//! - `shard.rs`    a shard's data and its job loop; key -> shard mapping
//! - `exec.rs`     running commands on shards: batches, multi-shard atomicity, fan-outs
//! - `hop.rs`      coalescing the batches bound for other shards: one message per tick
//! - `order.rs`    a connection's commands take effect in order across shards
//! - `conn.rs`     one client connection: read, parse, check, dispatch, write
//! - `command.rs`  the command table (names, arity, flags, keys, handlers)
//! - `cmd/`        one file per command family (strings, bits, keys, expiry, connection,
//!   server, transactions, hll for HLL.*, pf for PF*, hashes, sets, set_algebra for
//!   SINTER/SUNION/SDIFF and their STORE/CARD forms)
//! - `clients.rs`, `stats.rs`, `memory.rs`: client registry, counters, process figures
//!
//! What it is not: persistence, replication and the compact keyspace engine are separate
//! issues; their hooks are noted where they will attach (`exec::exec_keyed` for the log).

#![forbid(unsafe_code)]

pub mod aof;
pub mod clients;
pub mod cmd;
pub mod command;
pub mod config;
pub mod conn;
pub mod direct;
#[cfg(test)]
mod effects_tests;
pub mod exec;
pub mod hop;
pub mod memory;
pub mod monitor;
pub mod order;
pub mod recovery;
pub mod server;
pub mod snapshot;
pub mod shard;
pub mod stats;

pub use config::Config;
pub use server::run;
