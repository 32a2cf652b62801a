//! Command families, one file each, and the dispatcher of connection-level commands.
//!
//! Each family file declares its commands' table entries (`COMMANDS`) next to their handlers.
//! Keyed handlers are plain functions over a shard's databases (`Ctx`); connection-level
//! handlers are async functions over the connection, listed in [`dispatch_conn`].

pub mod args;
pub mod bitops;
pub mod bits;
pub mod connection;
pub mod expiry;
pub mod hashes;
pub mod hll;
pub mod keys;
pub mod ldouble;
pub mod persistence;
pub mod pf;
pub mod server;
pub mod set_algebra;
pub mod sets;
pub mod strings;
pub mod transactions;

use abacus_protocol::Frame;

use crate::command::Spec;
use crate::conn::Conn;
use crate::exec::{Access, Call};

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
    persistence::COMMANDS,
];

/// Runs a connection-level command.
pub async fn dispatch_conn(conn: &mut Conn, access: Access<'_>, call: Call) -> Frame {
    let args = &call.args;
    match call.spec.name {
        "ping" => connection::ping(conn, args),
        "echo" => Frame::Bulk(call.args.bytes(1)),
        "hello" => connection::hello(conn, args),
        "auth" => connection::auth(conn, args),
        "select" => connection::select(conn, args),
        "quit" => connection::quit(conn),
        "reset" => connection::reset(conn).await,
        "time" => connection::time(),
        n if n.starts_with("client|") => connection::client(conn, call.spec.name, args),
        n if n.starts_with("command") => connection::command(args, call.spec.name),
        "info" => server::info(conn, access, args).await,
        "dbsize" => server::dbsize(conn, access).await,
        "flushdb" | "flushall" => server::flush(conn, access, call.spec.name, args).await,
        "swapdb" => server::swapdb(conn, access, args).await,
        n if n.starts_with("config|") => server::config(conn, access, call.spec.name, args).await,
        n if n.starts_with("debug") => server::debug(conn, access, args).await,
        n if n.starts_with("function|") => server::function(call.spec.name, args),
        "save" => persistence::save(conn).await,
        "bgsave" => persistence::bgsave(conn, args).await,
        "bgrewriteaof" => persistence::bgrewriteaof(conn).await,
        "lastsave" => persistence::lastsave(),
        "shutdown" => persistence::shutdown(conn, args).await,
        "keys" => keys::keys(conn, access, args).await,
        "scan" => keys::scan(conn, access, args).await,
        "randomkey" => keys::randomkey(conn, access).await,
        "multi" => transactions::multi(conn),
        "exec" => transactions::exec(conn).await,
        "discard" => transactions::discard(conn).await,
        "watch" => transactions::watch(conn, args).await,
        "unwatch" => transactions::unwatch(conn).await,
        other => Frame::error(format!("ERR command '{other}' has no connection-level handler")),
    }
}

/// Runs one keyed command on `dbs` (database 0, one shard, the default configuration): for
/// the command families' unit tests.
#[cfg(test)]
pub(crate) fn run_keyed(dbs: &mut [abacus_keyspace::Db], args: &[&[u8]]) -> Frame {
    let args = abacus_protocol::Args::from_vec(args.iter().map(|a| abacus_protocol::Bytes::copy_from_slice(a)).collect());
    let spec = crate::command::lookup(&args[0]).expect("a known command");
    let cfg = crate::config::Config::default().cmd_config();
    crate::exec::exec_keyed(dbs, 0, spec, &args, 1, cfg)
}
