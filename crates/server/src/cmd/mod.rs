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
/// [`Access`](abacus_engine::exec::Access) and the [`Call`](abacus_engine::exec::Call)).
/// It gives a `&'static ConnFn`, which the entry stores type-erased (`Handler::Conn`).
macro_rules! conn_fn {
    (|$conn:pat_param, $access:pat_param, $call:pat_param| $body:expr) => {
        conn_fn!(replay = None, |$conn, $access, $call| $body)
    };
    // A write that recovery replays from the log: `replay` is a `conn::handler::ReplayFn`.
    (replay = $replay:expr, |$conn:pat_param, $access:pat_param, $call:pat_param| $body:expr) => {{
        fn handler<'a>(
            $conn: &'a mut crate::conn::Conn,
            $access: abacus_engine::exec::Access<'a>,
            $call: &'a abacus_engine::exec::Call,
        ) -> crate::conn::handler::ConnFuture<'a> {
            Box::pin(async move { $body })
        }
        const HANDLER: crate::conn::handler::ConnEntry = crate::conn::handler::ConnEntry { run: handler, replay: $replay };
        &HANDLER
    }};
}

pub mod acl;
pub use abacus_commands::args;
pub mod attribute;
pub use abacus_commands::bitops;
pub use abacus_commands::bits;
pub use abacus_commands::blocking;
pub mod cluster;
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
pub mod scripting;
pub mod replication;
pub mod server;
pub use abacus_commands::set_algebra;
pub use abacus_commands::sets;
pub mod sort;
pub use abacus_commands::streams;
pub use abacus_commands::strings;
pub mod summary;
pub use abacus_commands::summary_shard;
pub use abacus_commands::timeseries;
pub mod transactions;
pub use abacus_commands::ts_filter;
pub mod ts_multi;
pub use abacus_commands::ts_range;
pub use abacus_commands::ts_waterfall;
pub use abacus_commands::zset_algebra;
pub use abacus_commands::zsets;
pub mod latency;
pub mod tracking;
pub mod export;

use crate::command::Spec;

/// This crate's families' tables, installed in the command table after
/// `abacus_commands::FAMILIES` ([`install_table`]).
pub const FAMILIES: &[&[Spec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    scan::COMMANDS,
    transactions::COMMANDS,
    sort::COMMANDS,
    attribute::COMMANDS,
    persistence::COMMANDS,
    export::COMMANDS,
    pubsub::COMMANDS,
    summary::COMMANDS,
    memory::COMMANDS,
    migrate::COMMANDS,
    ts_multi::COMMANDS,
    latency::COMMANDS,
    acl::COMMANDS,
    replication::COMMANDS,
    cluster::COMMANDS,
    scripting::COMMANDS,
];

/// Installs the command table (`command::install`): the data families of `abacus-commands`,
/// then this crate's. Start-up's first step, before anything looks a command up.
pub fn install_table() {
    let families: Vec<&'static [Spec]> = abacus_commands::FAMILIES.iter().chain(FAMILIES).copied().collect();
    crate::command::install(&families);
}
