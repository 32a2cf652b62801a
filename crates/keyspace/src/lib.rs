//! The keyspace of one shard: numbered databases of typed values with expiry.
//!
//! This crate is the interface the server's shards program against. It owns the data of one
//! shard and nothing else: it does no I/O, spawns no threads and knows nothing about the
//! protocol. The server's shard thread is its only user at run time, so nothing here is
//! synchronised.
//!
//! What it is for: lookups with lazy expiry, inserts that follow Redis's overwrite rules (an
//! overwrite clears the TTL), an expiry index with sampled active expiry, SCAN cursors, random
//! keys, glob matching, WATCH notifications, and `maxmemory` eviction by sampling (LRU, LFU,
//! FIFO, random, TTL; see `evict.rs`).
//!
//! What it is not (yet): the compact, never-stalling hash table of the keyspace-engine issue.
//! [`Db`] is built on `indexmap` today; its public methods are the contract that engine will
//! implement, so the server does not change when the table underneath does.

pub mod db;
pub mod evict;
#[cfg(test)]
mod evict_tests;
pub mod glob;
pub mod value;

pub use db::{Db, Entry, WatchFlag};
pub use evict::{EvictionPolicy, Tracking, LFU_INIT_VAL};
pub use glob::glob_match;
pub use value::{Value, ValueType};

/// Keys are owned byte strings; boxed slices save the capacity word a `Vec` would carry.
pub type Key = Box<[u8]>;
