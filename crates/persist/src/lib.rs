//! Abacus's on-disk formats, and nothing else.
//!
//! What this crate is for: the bytes Abacus writes so that it loses no acknowledged write.
//! - [`log`]: the append-only command log. A record is a group of write commands (one
//!   pipelined batch of one client, one transaction, one multi-shard command) framed with its
//!   length and a CRC32, so that recovery can tell a torn tail (the last record cut short by a
//!   crash: dropped with a warning) from corruption in the middle (refused, with the command
//!   that repairs it).
//! - [`snapshot`]: point-in-time snapshots: blocks of serialized entries, each LZ4-compressed
//!   and CRC32-checked, ended by a trailer that counts them, so a truncated or damaged
//!   snapshot is always detected.
//! - [`entry`]: the byte form of one key (value of any type, expiry).
//! - [`manifest`]: which snapshot and which log segments make up the current state, replaced
//!   atomically (write, fsync, rename, fsync the directory).
//! - [`dirlock`]: the lock that keeps a second process from writing into a data directory
//!   a server is using.
//!
//! No `unsafe` code.
//!
//! What it is not: it decides no policy (when to fsync, when to snapshot) and runs no threads;
//! the server does that. It knows commands only as argument lists: replaying them is the
//! server's job, through the same code path that executed them.

#![forbid(unsafe_code)]

pub mod dirlock;
pub mod entry;
pub mod log;
pub mod manifest;
pub mod snapshot;

/// Durability errors carry a message a user can act on.
pub type Result<T> = std::result::Result<T, String>;
