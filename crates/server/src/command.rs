//! The command table: every command's name, arity, flags, key positions and handler.
//!
//! As in Redis, this single table is read by the dispatcher (arity, authentication, routing),
//! by COMMAND INFO/DOCS/LIST/COUNT, and by anything that needs a command's keys (shard routing,
//! WATCH, and later replication and cluster slots). A command family's file declares its own
//! entries next to its handlers: the data families in `abacus-commands` (below the network
//! layer), the connection-level ones in `cmd/`. The entry itself ([`Spec`]) is defined there
//! too; this file holds the table the families are installed in at start (`install`) and finds
//! commands by name without allocating. The connection-level handlers' type is the
//! connection's (`conn::handler::ConnFn`).

use std::collections::HashMap;
use std::sync::OnceLock;

use abacus_protocol::Arg;

pub use abacus_commands::command::{flags, is_name, Handler, KeyFinder, KeyIndexes, KeyRangeFinder, KeyedFn, Spec, TimeoutArg, WaitArgsFn};


type Table = HashMap<&'static str, &'static Spec, foldhash::fast::FixedState>;

/// The table, once start-up installed it. Why a static and not a field of the `Server`: the
/// entries are `&'static Spec`s looked up from every layer, several without a server handle
/// (ACL rules parsed before the server is built, MONITOR's lines, the replication stream's
/// commands, recovery's `Replayer`, key specs); it is written once, at start, and only read
/// after.
static TABLE: OnceLock<Table> = OnceLock::new();

/// Builds the table from the families the server is made of: `cmd::install_table` at start
/// (`abacus-commands`' data families and this crate's connection-level ones). The table
/// does not name the families itself, so that what reads it (connections, ACL, key specs)
/// sits below the command families, which run on connections. Once per process: a later
/// call keeps the first table.
pub fn install(families: &[&'static [Spec]]) {
    TABLE.get_or_init(|| {
        let mut m = Table::default();
        for family in families {
            for spec in family.iter() {
                let prev = m.insert(spec.name, spec);
                assert!(prev.is_none(), "command {} declared twice", spec.name);
            }
        }
        m
    });
}

fn table() -> &'static Table {
    if let Some(t) = TABLE.get() {
        return t;
    }
    // Unit tests run without start-up: the first lookup installs the server's families.
    #[cfg(test)]
    {
        crate::cmd::install_table();
        return table();
    }
    #[allow(unreachable_code)]
    {
        panic!("the command table is read before start-up installed it (cmd::install_table)")
    }
}

/// What is derived from the table and the command families' constant texts once, on first
/// use: key specs (COMMAND INFO, GETKEYS, ACL), docs and arguments (COMMAND DOCS), and the
/// ACL's views (every command in ACL order, each category's commands).
pub struct Facts {
    pub key_specs: HashMap<&'static str, Vec<crate::keyspec::KeySpec>>,
    pub args: HashMap<&'static str, Vec<crate::command_docs::Argument>>,
    pub universe: Vec<&'static Spec>,
    pub categories: HashMap<&'static str, Vec<&'static Spec>>,
}

/// The derived facts, once built. A process-wide static beside the table it derives from
/// (see [`TABLE`]).
static FACTS: OnceLock<Facts> = OnceLock::new();

/// The table's derived facts (see [`Facts`]), built on first use.
pub fn facts() -> &'static Facts {
    FACTS.get_or_init(|| {
        let universe = crate::acl::rules::build_universe();
        let categories = crate::acl::rules::build_categories(&universe);
        let args = crate::command_docs::build_all(all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())));
        Facts { key_specs: crate::keyspec::build_all(), args, universe, categories }
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
    use crate::conn::handler::conn_handler;

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
        let cfg = abacus_engine::config::Config::default().cmd_config();
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
