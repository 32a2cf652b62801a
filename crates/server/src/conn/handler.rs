//! Connection-level handlers as table entries hold them: a function over the connection
//! ([`ConnFn`], written with `conn_fn!` in the family files), stored type-erased in the entry
//! (`Handler::Conn`: the entry is defined below the network layer, which cannot name
//! [`super::Conn`]), and given back by [`conn_handler`] when the connection dispatches.

use abacus_commands::command::Handler;
use abacus_protocol::Frame;

/// What a connection-level handler returns: it may wait (for shards, a snapshot, a lock).
pub type ConnFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Frame> + 'a>>;

/// A handler that runs in the connection's task, given the shard access of its caller (free,
/// or the locks of the EXEC running it). Written with `conn_fn!` in the family files, and
/// stored type-erased in [`Handler::Conn`] (the entry is defined below the network layer,
/// which cannot name `Conn`): [`conn_handler`] gives it back.
pub type ConnFn = for<'a> fn(&'a mut super::Conn, abacus_engine::exec::Access<'a>, &'a abacus_engine::exec::Call) -> ConnFuture<'a>;

pub use abacus_engine::recovery::ReplayFn;

/// The command table as recovery reads the log with it (`recovery::Replayer`).
pub fn replayer() -> abacus_engine::recovery::Replayer {
    abacus_engine::recovery::Replayer { lookup: crate::command::lookup_call, replay: replay_handler }
}

/// What [`Handler::Conn`] holds, type-erased: the handler, and for a write that recovery
/// must replay, how. Written with `conn_fn!` in the family files.
pub struct ConnEntry {
    pub run: ConnFn,
    pub replay: Option<ReplayFn>,
}

/// The connection-level handler of an entry: None for a container's own entry (which never
/// runs: `Conn::resolve` picks a subcommand) and for keyed entries. One type-id compare.
#[inline]
pub fn conn_handler(handler: Handler) -> Option<ConnFn> {
    match handler {
        Handler::Conn(f) => f.downcast_ref::<ConnEntry>().map(|e| e.run),
        Handler::Keyed(_) => None,
    }
}

/// How recovery replays a connection-level write (see [`ReplayFn`]); None for any other.
pub fn replay_handler(handler: Handler) -> Option<ReplayFn> {
    match handler {
        Handler::Conn(f) => f.downcast_ref::<ConnEntry>().and_then(|e| e.replay),
        Handler::Keyed(_) => None,
    }
}

