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
//! commands, as the @pubsub category is ([`acl_categories`], also here: the command facts
//! COMMAND INFO and ACL read beside the table).
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

/// A command's ACL categories, derived as Redis 7.0 derives most of them: from its flags
/// (write, read, admin + dangerous, fast or else slow) and its command group (string, hash,
/// set, keyspace, ...), plus the categories Redis declares explicitly, which the table says
/// with its `ACL_*` flags. Listed in Redis's category order, as COMMAND INFO shows them.
pub fn acl_categories(spec: &Spec) -> Vec<&'static str> {
    use crate::command::flags::{ACL_ADMIN, ACL_COLLECTIONS, ACL_CONNECTION, ACL_DANGEROUS, ACL_KEYSPACE, ADMIN, BLOCKING, FAST, READONLY, WRITE};
    // Containers (CLIENT, OBJECT, CONFIG, FUNCTION) carry no category but @slow.
    let container = !spec.subcommands.is_empty() && !spec.has(ACL_CONNECTION);
    // Redis's explicit categories where the group alone does not give them (the table's
    // ACL_* flags).
    let group = match spec.group {
        _ if spec.has(ACL_CONNECTION) => "connection",
        _ if spec.has(ACL_KEYSPACE) => "keyspace",
        // SORT touches the three collection types (no @keyspace).
        _ if spec.has(ACL_COLLECTIONS) => "sort",
        "generic" => "keyspace",
        "transactions" => "transaction",
        "sorted-set" => "sortedset",
        "server" => "",
        g => g,
    };
    if container {
        return vec!["slow"];
    }
    let admin = spec.has(ADMIN) || spec.has(ACL_ADMIN);
    let dangerous = admin || spec.has(ACL_DANGEROUS);
    // Redis's order: keyspace, read, write, set, sortedset, list, hash, string, bitmap,
    // hyperloglog, ..., admin, fast, slow, blocking, dangerous, connection, transaction,
    // scripting.
    let mut out = Vec::new();
    out.extend((group == "keyspace").then_some("keyspace"));
    out.extend((spec.has(READONLY) && group != "scripting").then_some("read"));
    out.extend(spec.has(WRITE).then_some("write"));
    // The sorted-set group is "sorted-set" in COMMAND DOCS and "sortedset" as a category.
    let category = if group == "sorted-set" { "sortedset" } else { group };
    for g in ["set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog", "geo", "stream"] {
        out.extend((category == g || (category == "sort" && matches!(g, "set" | "sortedset" | "list"))).then_some(g));
    }
    // Redis's @pubsub comes from the command's `pubsub` flag, which PUBSUB HELP lacks.
    out.extend((group == "pubsub" && !spec.name.ends_with("|help")).then_some("pubsub"));
    out.extend(admin.then_some("admin"));
    out.push(if spec.has(FAST) { "fast" } else { "slow" });
    out.extend(spec.has(BLOCKING).then_some("blocking"));
    out.extend(dangerous.then_some("dangerous"));
    for g in ["connection", "transaction", "scripting"] {
        out.extend((group == g).then_some(g));
    }
    out
}

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
