//! The generic key family: DEL, EXISTS, TYPE, RENAME, COPY, MOVE, OBJECT, KEYS, SCAN...
//!
//! Keyed commands run on the shard of their keys (atomically across shards when their keys
//! span several; see the server's `exec.rs`). KEYS, SCAN and RANDOMKEY visit the shards from
//! the connection: they are the server's (`abacus_server::cmd::scan`).

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Ctx, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const G: &str = "generic";

pub const COMMANDS: &[Spec] = &[
    DEL,
    Spec::keyed("unlink", -2, WRITE | FAST, ALL, unlink, G, "Asynchronously deletes one or more keys.")
        .docs("4.0.0", "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.")
        .tips("request_policy:multi_shard response_policy:agg_sum")
        .key_specs("RM delete")
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    Spec::keyed("exists", -2, READONLY | FAST, ALL, exists, G, "Determines whether one or more keys exist.")
        .docs("1.0.0", "O(N) where N is the number of keys to check.")
        .history(&[("3.0.3", "Accepts multiple `key` arguments.")])
        .tips("request_policy:multi_shard response_policy:agg_sum")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    TOUCH,
    Spec::keyed("type", 2, READONLY | FAST, K1, type_cmd, G, "Determines the type of value stored at a key.")
        .docs("1.0.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("rename", 3, WRITE, (1, 2, 1), rename, G, "Renames a key and overwrites the destination.")
        .docs("1.0.0", "O(1)")
        .key_specs("RW access delete; OW update")
        .args("
            key type=key key_spec_index=0
            newkey type=key key_spec_index=1
        "),
    Spec::keyed("renamenx", 3, WRITE | FAST, (1, 2, 1), renamenx, G, "Renames a key only when the target key name doesn't exist.")
        .docs("1.0.0", "O(1)")
        .history(&[("3.2.0", "The command no longer returns an error when source and destination names are the same.")])
        .key_specs("RW access delete; OW insert")
        .args("
            key type=key key_spec_index=0
            newkey type=key key_spec_index=1
        "),
    Spec::keyed("move", 3, WRITE | FAST, K1, move_cmd, G, "Moves a key to another database.")
        .docs("1.0.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            db type=integer
        "),
    COPY,
    Spec::container("object", -2, 0, G, "A container for object introspection commands.", OBJECT)
        .docs("2.2.3", "Depends on subcommand."),
];

/// COPY's entry: its destination lives in the database its `DB` option names (the server's `exec.rs`).
pub const COPY: Spec = Spec::keyed("copy", -3, WRITE | DENYOOM, (1, 2, 1), copy, G, "Copies the value of a key to a new key.")
    .docs("6.2.0", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.")
    .key_specs("RO access; OW update")
    .args("
        source type=key key_spec_index=0
        destination type=key key_spec_index=1
        destination-db type=integer token=DB flags=optional
        replace type=pure-token token=REPLACE flags=optional
    ");

/// TOUCH's entry: the one lookup CLIENT NO-TOUCH leaves touching (the server's `exec.rs`).
pub const TOUCH: Spec = Spec::keyed("touch", -2, READONLY | FAST, ALL, exists, G, "Returns the number of existing keys out of those specified after updating the time they were last accessed.")
    .docs("3.2.1", "O(N) where N is the number of keys that will be touched.")
    .tips("request_policy:multi_shard response_policy:agg_sum")
    .key_specs("RO")
    .args("
        key type=key key_spec_index=0 flags=multiple
    ");

/// DEL's entry, named by callers that run or log a DEL (MIGRATE).
pub const DEL: Spec = Spec::keyed("del", -2, WRITE, ALL, del, G, "Deletes one or more keys.")
    .docs("1.0.0", "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).")
    .tips("request_policy:multi_shard response_policy:agg_sum")
    .key_specs("RM delete")
    .args("
        key type=key key_spec_index=0 flags=multiple
    ");

const OBJECT: &[Spec] = &[
    Spec::keyed("object|encoding", 3, READONLY, (2, 2, 1), object_encoding, G, "Returns the internal encoding of a Redis object.")
        .docs("2.2.3", "O(1)")
        .tips("nondeterministic_output")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("object|freq", 3, READONLY, (2, 2, 1), object_freq, G, "Returns the logarithmic access frequency counter of a Redis object.")
        .docs("4.0.0", "O(1)")
        .tips("nondeterministic_output")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("object|idletime", 3, READONLY, (2, 2, 1), object_idletime, G, "Returns the time since the last access to a Redis object.")
        .docs("2.2.3", "O(1)")
        .tips("nondeterministic_output")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("object|refcount", 3, READONLY, (2, 2, 1), object_refcount, G, "Returns the reference count of a value of a key.")
        .docs("2.2.3", "O(1)")
        .tips("nondeterministic_output")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("object|help", 2, LOADING | STALE, (0, 0, 0), object_help, G, "Returns helpful text about the different subcommands.")
        .docs("6.2.0", "O(1)"),
];

fn del(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let mut removed = KeysModified::NONE;
    let mut count = 0;
    for (position, k) in a[1..].iter().enumerate() {
        if ctx.db().remove(k, now) {
            removed = removed.and(position);
            count += 1;
            ctx.notify(notify::GENERIC, "del", k);
        }
    }
    // As Redis: only the keys that existed are signalled.
    ctx.modified_only(removed);
    Frame::Integer(count)
}

/// DEL, but values above the lazy-free threshold are freed on the background thread, so
/// unlinking a 100M-member set returns at once.
fn unlink(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let mut removed = 0;
    let mut modified = KeysModified::NONE;
    for (position, k) in a[1..].iter().enumerate() {
        if !ctx.db().contains(k, now) {
            continue;
        }
        if let Some(e) = ctx.db().remove_entry(k) {
            removed += 1;
            modified = modified.and(position);
            ctx.notify(notify::GENERIC, "del", k);
            if e.entry.heap_bytes() > ctx.hooks.lazyfree_threshold_bytes {
                (ctx.hooks.free_later)(Box::new(e.entry));
            }
        }
    }
    ctx.modified_only(modified);
    Frame::Integer(removed)
}

fn exists(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    Frame::Integer(a[1..].iter().filter(|k| ctx.db().get(k, now).is_some()).count() as i64)
}

fn type_cmd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    match ctx.db().peek(&a[1], now) {
        Some(e) => Frame::simple(e.value().value_type().name()),
        None => {
            ctx.notify(notify::KEY_MISS, "keymiss", &a[1]);
            Frame::simple("none")
        }
    }
}

fn rename_generic(ctx: &mut Ctx, a: &[Arg], nx: bool) -> Frame {
    let now = ctx.now_ms;
    if !ctx.db().contains(&a[1], now) {
        return err(ERR_NO_SUCH_KEY);
    }
    if a[1] == a[2] {
        return ctx.unchanged(if nx { Frame::Integer(0) } else { Frame::ok() });
    }
    // Looked up in every case, as Redis does (an expired destination is reclaimed first).
    if ctx.db().contains(&a[2], now) && nx {
        return ctx.unchanged(Frame::Integer(0));
    }
    if let Some(e) = ctx.db().remove_entry(&a[1]) {
        // Redis deletes the destination, then adds it: a "new" key whatever was there.
        let linked = e.entry.as_series().is_some_and(|s| s.src_key.is_some() || !s.rules.is_empty());
        ctx.db().insert_entry(&a[2], e);
        ctx.db().created(&a[2]);
        if linked {
            crate::ts_links::follow_rename(ctx.db(), &a[1], &a[2], now);
        }
    }
    ctx.notify(notify::GENERIC, "rename_from", &a[1]);
    ctx.notify(notify::GENERIC, "rename_to", &a[2]);
    if nx {
        Frame::Integer(1)
    } else {
        Frame::ok()
    }
}

fn rename(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    rename_generic(ctx, a, false)
}

fn renamenx(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    rename_generic(ctx, a, true)
}

fn db_index(ctx: &Ctx, a: &[u8]) -> Result<usize, Frame> {
    let n = parse_i32(a)?;
    if n < 0 || n as usize >= ctx.dbs.len() {
        return Err(err("ERR DB index is out of range"));
    }
    Ok(n as usize)
}

fn move_cmd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let target = match db_index(ctx, &a[2]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if target == ctx.db {
        return err("ERR source and destination objects are the same");
    }
    let now = ctx.now_ms;
    if !ctx.db().contains(&a[1], now) || ctx.dbs[target].contains(&a[1], now) {
        return ctx.unchanged(Frame::Integer(0));
    }
    if let Some(e) = ctx.db().remove_entry(&a[1]) {
        ctx.dbs[target].insert_entry(&a[1], e);
        ctx.dbs[target].created(&a[1]);
        ctx.dbs[target].signal_modified(&a[1]);
    }
    ctx.notify(notify::GENERIC, "move_from", &a[1]);
    ctx.notify_in(target, notify::GENERIC, "move_to", &a[1]);
    Frame::Integer(1)
}

fn copy(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (mut target, mut replace) = (ctx.db, false);
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "replace") {
            replace = true;
        } else if is(&a[i], "db") && i + 1 < a.len() {
            target = match db_index(ctx, &a[i + 1]) {
                Ok(t) => t,
                Err(e) => return e,
            };
            i += 1;
        } else {
            return err(ERR_SYNTAX);
        }
        i += 1;
    }
    if target == ctx.db && a[1] == a[2] {
        return err("ERR source and destination objects are the same");
    }
    let now = ctx.now_ms;
    let Some(mut entry) = ctx.db().get(&a[1], now).cloned() else { return ctx.unchanged(Frame::Integer(0)) };
    crate::ts_links::unlink_series(entry.as_series_mut());
    let src = abacus_keyspace::Detached { entry, expire_at_ms: ctx.db().expire_at(&a[1]) };
    if ctx.dbs[target].contains(&a[2], now) {
        if !replace {
            return ctx.unchanged(Frame::Integer(0));
        }
        ctx.dbs[target].remove_entry(&a[2]);
    }
    ctx.dbs[target].insert_entry(&a[2], src);
    ctx.dbs[target].created(&a[2]);
    ctx.notify_in(target, notify::GENERIC, "copy_to", &a[2]);
    // Only the destination changed; the signal finds it in database `target` (see
    // `exec::signal_modified`), on whichever shard it lives.
    ctx.modified_only(KeysModified::key(1));
    Frame::Integer(1)
}

fn object_encoding(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    match ctx.db().peek(&a[2], now) {
        Some(e) => Frame::bulk(e.encoding().as_bytes()),
        None => Frame::Null,
    }
}

/// OBJECT FREQ: the decayed LFU counter, under an LFU policy only (Redis's replies: the key is
/// looked up first, so a missing key is nil whatever the policy).
fn object_freq(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let tracking = ctx.db().tracking();
    match ctx.db().peek(&a[2], now) {
        None => Frame::Null,
        Some(_) if !tracking.policy.is_lfu() => err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        Some(e) => Frame::Integer(e.lfu_freq(now, tracking.lfu_decay_time_min) as i64),
    }
}

/// OBJECT IDLETIME: seconds since the last access. Under LFU Redis refuses (the clock is kept
/// in minutes there); under allkeys-fifo accesses are not recorded at all (the clock holds
/// the insertion sequence), so Abacus refuses the same way.
fn object_idletime(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let policy = ctx.db().tracking().policy;
    match ctx.db().peek(&a[2], now) {
        None => Frame::Null,
        Some(_) if policy.is_lfu() => err("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        Some(_) if policy.is_fifo() => err("ERR A FIFO maxmemory policy is selected, idle time not tracked."),
        Some(e) => Frame::Integer(e.idle_s(now) as i64),
    }
}

fn object_refcount(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    match ctx.db().peek(&a[2], now) {
        // Values are never shared between keys here: every value has exactly one owner.
        Some(_) => Frame::Integer(1),
        None => Frame::Null,
    }
}

fn object_help(_ctx: &mut Ctx, _a: &[Arg]) -> Frame {
    let lines = [
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    Frame::Array(lines.iter().map(|l| Frame::Simple(Bytes::from_static(l.as_bytes()))).collect())
}
