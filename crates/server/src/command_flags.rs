//! COMMAND INFO's flags that change nothing in Abacus but that Redis 7.0 reports, so that a
//! tool reading them (a proxy deciding what a script may call, a client library's command
//! table, redis-cli's hints) sees what it would see from Redis.
//!
//! Why a table apart: the command table's flags (`command::flags`) each drive behaviour
//! (WRITE: replication and MISCONF; LOADING: served while the data loads; FAST: the @fast
//! category, ...). These do not: Abacus has no scripting (`noscript`), no busy script to
//! interrupt (`allow_busy`), no asynchronous replica loading (`no_async_loading`), and EXEC
//! already stays out of the slow log (it is timed command by command). Keeping them here,
//! by name, leaves the family files' entries readable and touches none of them. Only
//! `pubsub` is derived rather than listed: it is Redis's flag of the pubsub group's
//! commands, as the @pubsub category is (`cmd::connection::acl_categories`).
//!
//! The lists are Redis 7.0.15's flags (its `src/commands/*.json`) for the commands Abacus
//! shares with it; `tests/e2e/test_command_info.py` compares every shared command's flags
//! with a running Redis, and a unit test checks that every name here is a real command.

use crate::command::Spec;

/// Redis's `noscript`: commands a script may not call.
const NOSCRIPT: &[&str] = &[
    "acl|cat", "acl|deluser", "acl|dryrun", "acl|genpass", "acl|getuser", "acl|list", "acl|load", "acl|log", "acl|save", "acl|setuser", "acl|users", "acl|whoami",
    "auth", "bgrewriteaof", "bgsave", "blmove", "blpop", "brpop", "brpoplpush", "bzpopmax", "bzpopmin",
    "client|caching", "client|getname", "client|getredir", "client|id", "client|info", "client|kill", "client|list", "client|no-evict", "client|pause", "client|reply",
    "client|setname", "client|tracking", "client|trackinginfo", "client|unblock", "client|unpause",
    "config|get", "config|resetstat", "config|rewrite", "config|set", "debug", "discard", "exec", "function|flush", "hello",
    "latency|doctor", "latency|graph", "latency|histogram", "latency|history", "latency|latest", "latency|reset",
    "monitor", "multi", "psubscribe", "psync", "punsubscribe", "quit", "replconf", "replicaof", "reset", "role", "save", "shutdown", "slaveof",
    "ssubscribe", "subscribe", "sunsubscribe", "unsubscribe", "unwatch", "wait", "watch",
];

/// Redis's `allow_busy`: commands served while a script or function runs too long.
const ALLOW_BUSY: &[&str] = &["auth", "discard", "hello", "multi", "quit", "replconf", "reset", "shutdown", "unwatch", "watch"];

/// Redis's `no_async_loading`: commands refused while a replica loads its primary's data
/// in the background.
const NO_ASYNC_LOADING: &[&str] = &["bgrewriteaof", "bgsave", "psync", "replicaof", "save", "slaveof"];

/// Redis's `skip_slowlog`: commands the slow log leaves out (their queued commands are
/// logged instead).
const SKIP_SLOWLOG: &[&str] = &["exec"];

/// Every table, for the unit test.
#[cfg(test)]
const TABLES: [&[&str]; 4] = [NOSCRIPT, ALLOW_BUSY, NO_ASYNC_LOADING, SKIP_SLOWLOG];

/// Where each of this file's flags falls in Redis's order of COMMAND INFO's flags
/// (`addReplyCommandFlags`), before the command table's flag at the same position.
pub enum Position {
    /// After `admin`: `pubsub`, `noscript`.
    AfterAdmin,
    /// After `stale`: `skip_slowlog`.
    AfterStale,
    /// After `no_auth`: `no_async_loading`.
    AfterNoAuth,
    /// Last: `allow_busy`.
    Last,
}

/// The flags of this table that `spec` has at `position`, in Redis's order.
pub fn extra(spec: &Spec, position: Position) -> Vec<&'static str> {
    let has = |table: &[&str]| table.contains(&spec.name);
    let mut out = Vec::new();
    match position {
        Position::AfterAdmin => {
            let container = !spec.subcommands.is_empty();
            out.extend((spec.group == "pubsub" && !container && !spec.name.ends_with("|help")).then_some("pubsub"));
            out.extend(has(NOSCRIPT).then_some("noscript"));
        }
        Position::AfterStale => out.extend(has(SKIP_SLOWLOG).then_some("skip_slowlog")),
        Position::AfterNoAuth => out.extend(has(NO_ASYNC_LOADING).then_some("no_async_loading")),
        Position::Last => out.extend(has(ALLOW_BUSY).then_some("allow_busy")),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_command() {
        let names: std::collections::HashSet<&str> = crate::command::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())).map(|s| s.name).collect();
        for table in TABLES {
            for name in table {
                assert!(names.contains(name), "{name} is in command_flags.rs but is no command");
            }
        }
    }
}
