//! Command families, one file each, and the dispatcher of connection-level commands.
//!
//! Each family file declares its commands' table entries (`COMMANDS`) next to their handlers.
//! Keyed handlers are plain functions over a shard's databases (`Ctx`); the data families
//! (strings, keys, expiry, bits, hashes, sets, lists and their blocking forms, sorted sets,
//! geo, streams, HLL, PF, DUMP/RESTORE, MEMORY USAGE; SORT's and ATTRIBUTE's per-shard jobs)
//! live
//! below the network layer in `abacus-commands` and are re-exported here under their names.
//! The files here are the families that need the server: connection-level handlers,
//! functions over the connection, given in their table entries with [`conn_fn!`] (the table
//! is the one place a command's name is tied to its code), and keyed families not moved yet.

/// A connection-level handler for a table entry: `conn_fn!(|conn, access, call| body)`, where
/// `body` is a `Frame` expression that may `.await` (the caller's `&mut Conn`, its
/// [`Access`](crate::exec::Access) and the [`Call`](crate::exec::Call)).
/// It gives a `&'static ConnFn`, which the entry stores type-erased (`Handler::Conn`).
macro_rules! conn_fn {
    (|$conn:pat_param, $access:pat_param, $call:pat_param| $body:expr) => {
        conn_fn!(replay = None, |$conn, $access, $call| $body)
    };
    // A write that recovery replays from the log: `replay` is a `command::ReplayFn`.
    (replay = $replay:expr, |$conn:pat_param, $access:pat_param, $call:pat_param| $body:expr) => {{
        fn handler<'a>(
            $conn: &'a mut crate::conn::Conn,
            $access: crate::exec::Access<'a>,
            $call: &'a crate::exec::Call,
        ) -> crate::command::ConnFuture<'a> {
            Box::pin(async move { $body })
        }
        const HANDLER: crate::command::ConnEntry = crate::command::ConnEntry { run: handler, replay: $replay };
        &HANDLER
    }};
}

pub mod acl;
pub use abacus_commands::args;
pub mod attribute;
pub use abacus_commands::bitops;
pub use abacus_commands::bits;
pub use abacus_commands::blocking;
pub mod connection;
pub use abacus_commands::dump;
pub use abacus_commands::expiry;
pub use abacus_commands::geo;
pub mod getkeys;
pub use abacus_commands::hashes;
pub use abacus_commands::hll;
pub use abacus_commands::keys;
pub use abacus_commands::ldouble;
pub use abacus_commands::lists;
pub mod memory;
pub mod migrate;
pub mod persistence;
pub use abacus_commands::pf;
pub mod pubsub;
pub mod scan;
pub mod replication;
pub mod server;
pub use abacus_commands::set_algebra;
pub use abacus_commands::sets;
pub mod sort;
pub use abacus_commands::streams;
pub use abacus_commands::strings;
pub mod summary;
pub use abacus_commands::timeseries;
pub mod transactions;
pub mod ts_multi;
pub use abacus_commands::ts_range;
pub use abacus_commands::zset_algebra;
pub use abacus_commands::zsets;
pub mod latency;
pub mod tracking;

use crate::command::Spec;

/// The handler of a container's own entry (CLIENT, CONFIG, OBJECT...): never called, since a
/// container runs only as one of its subcommands (`Conn::resolve` picks it, or replies the
/// arity or unknown-subcommand error).
pub(crate) fn container() -> abacus_protocol::Frame {
    abacus_protocol::Frame::error("ERR internal error: a container command has no handler of its own")
}

/// This crate's families' tables, read by `command.rs` after `abacus_commands::FAMILIES`.
pub const FAMILIES: &[&[Spec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    scan::COMMANDS,
    transactions::COMMANDS,
    sort::COMMANDS,
    attribute::COMMANDS,
    persistence::COMMANDS,
    pubsub::COMMANDS,
    summary::COMMANDS,
    memory::COMMANDS,
    migrate::COMMANDS,
    ts_multi::COMMANDS,
    latency::COMMANDS,
    acl::COMMANDS,
    replication::COMMANDS,
];
