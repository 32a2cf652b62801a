//! The command table: every command's name, arity, flags, key positions and handler.
//!
//! As in Redis, this single table is read by the dispatcher (arity, authentication, routing),
//! by COMMAND INFO/DOCS/LIST/COUNT, and by anything that needs a command's keys (shard routing,
//! WATCH, and later replication and cluster slots). A command family's file declares its own
//! entries next to its handlers: the data families in `abacus-commands` (below the network
//! layer), the connection-level ones in `cmd/`. The entry itself ([`Spec`]) is defined there
//! too; this file only stitches the families together, types the connection-level handlers
//! ([`ConnFn`]) and finds commands by name without allocating.

use std::collections::HashMap;
use std::sync::OnceLock;

use abacus_protocol::{Arg, Frame};

pub use abacus_commands::command::{flags, is_name, Handler, KeyFinder, KeyIndexes, KeyRangeFinder, KeyedFn, Spec, TimeoutArg, WaitArgsFn};

use crate::cmd;

/// What a connection-level handler returns: it may wait (for shards, a snapshot, a lock).
pub type ConnFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Frame> + 'a>>;

/// A handler that runs in the connection's task, given the shard access of its caller (free,
/// or the locks of the EXEC running it). Written with `conn_fn!` in the family files, and
/// stored type-erased in [`Handler::Conn`] (the entry is defined below the network layer,
/// which cannot name `Conn`): [`conn_handler`] gives it back.
pub type ConnFn = for<'a> fn(&'a mut crate::conn::Conn, crate::exec::Access<'a>, &'a crate::exec::Call) -> ConnFuture<'a>;

pub use crate::recovery::ReplayFn;

/// This table as recovery reads the log with it (`recovery::Replayer`).
pub fn replayer() -> crate::recovery::Replayer {
    crate::recovery::Replayer { lookup: lookup_call, replay: replay_handler }
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

type Table = HashMap<&'static str, &'static Spec, foldhash::fast::FixedState>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = Table::default();
        for family in abacus_commands::FAMILIES.iter().chain(cmd::FAMILIES) {
            for spec in family.iter() {
                let prev = m.insert(spec.name, spec);
                assert!(prev.is_none(), "command {} declared twice", spec.name);
            }
        }
        m
    })
}

/// All commands, in no particular order.
pub fn all() -> impl Iterator<Item = &'static Spec> {
    table().values().copied()
}

/// Finds a command by name, case-insensitively, without allocating for names up to 32 bytes.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let lower = std::str::from_utf8(&buf[..name.len()]).ok()?;
    table().get(lower).copied()
}

/// The command an argument vector runs, subcommand resolved (XGROUP CREATE is the table's
/// `xgroup|create`): how the log's commands are found at replay. None if unknown.
pub fn lookup_call(args: &[Arg]) -> Option<&'static Spec> {
    let spec = lookup(args.first()?)?;
    if spec.subcommands.is_empty() {
        return Some(spec);
    }
    match args.get(1) {
        Some(sub) => spec.subcommand(sub),
        None => Some(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for spec in all() {
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            assert!(spec.arity != 0, "{}", spec.name);
            if spec.first_key > 0 {
                assert!(spec.step > 0, "{}", spec.name);
            }
        }
        assert!(lookup(b"GeT").is_some());
        for spec in all() {
            assert!(is_name(spec.name.as_bytes(), spec.name.to_ascii_uppercase().as_bytes()), "{}", spec.name);
        }
    }

    #[test]
    fn is_name_is_a_case_insensitive_compare() {
        // Against eq_ignore_ascii_case for every byte pair at every position, including
        // non-letters whose bit 5 differs (`_` vs DEL, `.` vs 0x0e, `@` vs a backquote).
        for name in ["pfadd", "hll.add", "get", "a_b-c|d", "x"] {
            let lower = name.as_bytes();
            for i in 0..lower.len() {
                for c in 0..=255u8 {
                    let mut input = lower.to_vec();
                    input[i] = c;
                    assert_eq!(is_name(lower, &input), lower.eq_ignore_ascii_case(&input), "{name} {i} {c}");
                }
            }
            assert!(!is_name(lower, &lower[..lower.len() - 1]));
        }
        assert!(lookup(b"nosuchcommand").is_none());
    }

    fn keys_of(line: &str) -> Vec<usize> {
        let args = abacus_protocol::Args::from_vec(line.split(' ').map(|a| abacus_protocol::Bytes::copy_from_slice(a.as_bytes())).collect());
        lookup(&args[0]).unwrap().key_indexes(&args).collect()
    }

    #[test]
    fn key_positions() {
        assert_eq!(keys_of("mset a 1 b 2"), vec![1, 3]);
        assert_eq!(keys_of("get a"), vec![1]);
        assert_eq!(keys_of("pfadd h a b c"), vec![1]);
        assert_eq!(keys_of("pfadd"), Vec::<usize>::new());
        assert_eq!(keys_of("pfcount a b c"), vec![1, 2, 3]);
        assert_eq!(keys_of("del a b c"), vec![1, 2, 3]);
        assert_eq!(keys_of("ping"), Vec::<usize>::new());
        assert_eq!(keys_of("smove a b m"), vec![1, 2]);
        assert_eq!(keys_of("sinterstore d a b"), vec![1, 2, 3]);
    }

    #[test]
    fn numkeys_positions() {
        assert_eq!(keys_of("sintercard 2 a b"), vec![2, 3]);
        assert_eq!(keys_of("sintercard 1 a limit 5"), vec![2]);
        assert_eq!(keys_of("sintercard 2 a b limit 5"), vec![2, 3]);
        // A destination before the count comes first.
        assert_eq!(keys_of("zunionstore d 2 a b weights 1 2"), vec![1, 3, 4]);
        assert_eq!(keys_of("zmpop 2 a b min"), vec![2, 3]);
        assert_eq!(keys_of("zunionstore d 3 a b"), Vec::<usize>::new());
        // Invalid counts: no keys, the handler reports the error.
        for bad in ["sintercard 0 a", "sintercard 3 a b", "sintercard x a", "sintercard -1 a", "sintercard +1 a"] {
            assert_eq!(keys_of(bad), Vec::<usize>::new(), "{bad}");
        }
    }

    #[test]
    fn the_commands_crate_tests_under_the_default_configuration() {
        // `abacus_commands::testing` runs handlers outside a server with these values.
        let cfg = crate::config::Config::default().cmd_config();
        let d = abacus_commands::testing::defaults();
        assert_eq!(d.max_string_len, cfg.max_string_len);
        assert_eq!(format!("{:?}", d.hll), format!("{:?}", cfg.hll));
        assert_eq!(d.set_limits, cfg.set_limits);
        assert_eq!(d.hash_limits, cfg.hash_limits);
        assert_eq!(d.list_limits, cfg.list_limits);
        assert_eq!(d.zset_limits, cfg.zset_limits);
        assert_eq!(d.stream_limits, cfg.stream_limits);
    }

    #[test]
    fn every_family_of_the_commands_crate_is_in_the_table() {
        for spec in abacus_commands::FAMILIES.iter().flat_map(|f| f.iter()) {
            let found = lookup(spec.name.as_bytes()).unwrap();
            assert_eq!((found.arity, found.flags, found.group), (spec.arity, spec.flags, spec.group), "{}", spec.name);
        }
    }

    #[test]
    fn connection_level_handlers_come_back_typed() {
        // A type-erased handler is a `ConnEntry`, or the marker of a container's own entry.
        for spec in all() {
            if let Handler::Conn(f) = spec.handler {
                let container = f.is::<abacus_commands::command::Container>();
                assert!(container != conn_handler(spec.handler).is_some(), "{}", spec.name);
                assert!(!container || !spec.subcommands.is_empty(), "{}", spec.name);
            }
        }
        assert!(conn_handler(lookup(b"ping").unwrap().handler).is_some());
        assert!(conn_handler(lookup(b"object").unwrap().handler).is_none());
    }
}
