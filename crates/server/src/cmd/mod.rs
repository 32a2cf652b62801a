//! Command families, one file each, and the dispatcher of connection-level commands.
//!
//! Each family file declares its commands' table entries (`COMMANDS`) next to their handlers.
//! Keyed handlers are plain functions over a shard's databases (`Ctx`); connection-level
//! handlers are functions over the connection, given in their table entries with
//! [`conn_fn!`]: the table is the one place a command's name is tied to its code.

/// A connection-level handler for a table entry: `conn_fn!(|conn, access, call| body)`, where
/// `body` is a `Frame` expression that may `.await` (the caller's `&mut Conn`, its
/// [`Access`](crate::exec::Access) and the [`Call`](crate::exec::Call)).
macro_rules! conn_fn {
    (|$conn:pat_param, $access:pat_param, $call:pat_param| $body:expr) => {{
        fn handler<'a>(
            $conn: &'a mut crate::conn::Conn,
            $access: crate::exec::Access<'a>,
            $call: &'a crate::exec::Call,
        ) -> crate::command::ConnFuture<'a> {
            Box::pin(async move { $body })
        }
        handler as crate::command::ConnFn
    }};
}

pub mod acl;
pub mod args;
pub mod attribute;
pub mod bitops;
pub mod bits;
pub mod blocking;
pub mod connection;
pub mod dump;
pub mod expiry;
pub mod geo;
pub mod getkeys;
pub mod hashes;
pub mod hll;
pub mod keys;
pub mod ldouble;
pub mod lists;
pub mod memory;
pub mod migrate;
pub mod persistence;
pub mod pf;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod set_algebra;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod summary;
pub mod timeseries;
pub mod transactions;
pub mod ts_multi;
pub mod ts_range;
pub mod zset_algebra;
pub mod zsets;
pub mod latency;
pub mod tracking;

#[cfg(test)]
use abacus_protocol::Frame;

use crate::command::Spec;

/// The handler of a container's own entry (CLIENT, CONFIG, OBJECT...): never called, since a
/// container runs only as one of its subcommands (`Conn::resolve` picks it, or replies the
/// arity or unknown-subcommand error).
pub(crate) fn container() -> abacus_protocol::Frame {
    abacus_protocol::Frame::error("ERR internal error: a container command has no handler of its own")
}

/// Every family's table, read by `command.rs`.
pub const FAMILIES: &[&[Spec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    strings::COMMANDS,
    bits::COMMANDS,
    bitops::COMMANDS,
    keys::COMMANDS,
    expiry::COMMANDS,
    transactions::COMMANDS,
    hll::COMMANDS,
    pf::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    set_algebra::COMMANDS,
    lists::COMMANDS,
    blocking::COMMANDS,
    sort::COMMANDS,
    zsets::COMMANDS,
    zset_algebra::COMMANDS,
    geo::COMMANDS,
    streams::COMMANDS,
    attribute::COMMANDS,
    persistence::COMMANDS,
    pubsub::COMMANDS,
    summary::COMMANDS,
    dump::COMMANDS,
    memory::COMMANDS,
    migrate::COMMANDS,
    timeseries::COMMANDS,
    ts_multi::COMMANDS,
    latency::COMMANDS,
    acl::COMMANDS,
    replication::COMMANDS,
];

/// Runs one keyed command on `dbs` (database 0, one shard, the default configuration): for
/// the command families' unit tests.
#[cfg(test)]
pub(crate) fn run_keyed(dbs: &mut [abacus_keyspace::Db], args: &[&[u8]]) -> Frame {
    let args = abacus_protocol::Args::from_vec(args.iter().map(|a| abacus_protocol::Bytes::copy_from_slice(a)).collect());
    let spec = crate::command::lookup(&args[0]).expect("a known command");
    let cfg = crate::config::Config::default().cmd_config();
    crate::exec::exec_keyed(dbs, 0, spec, &args, 1, cfg)
}
