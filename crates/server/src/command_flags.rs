//! The command facts COMMAND INFO and ACL derive from a table entry rather than read from it:
//! a command's ACL categories ([`acl_categories`]) and the informational flags in Redis's
//! order ([`extra`]).
//!
//! The informational flags (`noscript`, `allow_busy`, `no_async_loading`, `skip_slowlog`)
//! change nothing in Abacus yet but Redis 7.0 reports them, so that a tool reading them (a
//! proxy deciding what a script may call, a client library's command table, redis-cli's
//! hints) sees what it would see from Redis. Each entry says its own (`.noscript()`, ...;
//! `abacus_commands::command::info`); only `pubsub` is derived: it is Redis's flag of the
//! pubsub group's commands, as the @pubsub category is. `tests/e2e/test_command_info.py`
//! compares every shared command's flags and categories with a running Redis.

use crate::command::Spec;

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

/// Where each of this file's flags falls in Redis's order of COMMAND INFO's flags
/// (`addReplyCommandFlags`), before the command table's flag at the same position.
pub enum Position {
    /// After `admin`: `pubsub`, `noscript`.
    AfterAdmin,
    /// After `stale`: `skip_slowlog`, `asking`.
    AfterStale,
    /// After `no_auth`: `no_async_loading`.
    AfterNoAuth,
    /// Last: `allow_busy`.
    Last,
}

/// The flags of this table that `spec` has at `position`, in Redis's order.
pub fn extra(spec: &Spec, position: Position) -> Vec<&'static str> {
    use abacus_commands::command::info::{ALLOW_BUSY, ASKING, NOSCRIPT, NO_ASYNC_LOADING, NO_MANDATORY_KEYS, SKIP_MONITOR, SKIP_SLOWLOG};
    let has = |bit: u8| spec.doc.info & bit != 0;
    let mut out = Vec::new();
    match position {
        Position::AfterAdmin => {
            let container = !spec.subcommands.is_empty();
            out.extend((spec.group == "pubsub" && !container && !spec.name.ends_with("|help")).then_some("pubsub"));
            out.extend(has(NOSCRIPT).then_some("noscript"));
        }
        Position::AfterStale => {
            out.extend(has(SKIP_MONITOR).then_some("skip_monitor"));
            out.extend(has(SKIP_SLOWLOG).then_some("skip_slowlog"));
            out.extend(has(ASKING).then_some("asking"));
        }
        Position::AfterNoAuth => {
            out.extend(has(NO_MANDATORY_KEYS).then_some("no_mandatory_keys"));
            out.extend(has(NO_ASYNC_LOADING).then_some("no_async_loading"));
        }
        Position::Last => out.extend(has(ALLOW_BUSY).then_some("allow_busy")),
    }
    out
}
