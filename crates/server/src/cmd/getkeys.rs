//! COMMAND GETKEYS and GETKEYSANDFLAGS: a full command's keys, as the server itself finds
//! them.
//!
//! Both read [`Spec::key_indexes`], the one function that shard routing, MULTI/EXEC locking
//! and WATCH use too, so what a proxy or cluster-aware client learns here is exactly what
//! the server will route by. The checks and errors are Redis 7.0's `getKeysSubcommandImpl`:
//! an unknown command or subcommand, a command without key arguments, a wrong argument
//! count, and arguments that name no key (a bad `numkeys`).
//!
//! GETKEYSANDFLAGS's per-key flags are those of the key spec naming each key
//! (`keyspec.rs`): Redis 7.0's for the shared commands (DEL's key is `RM delete`, LMOVE's
//! source `RW access delete` and destination `RW insert`).

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::err;
use crate::command::{self, Spec};

/// The command named by `full[0]` (and `full[1]` for a container), or None.
fn resolve(full: &[Arg]) -> Option<&'static Spec> {
    let base = command::lookup(&full[0])?;
    if base.subcommands.is_empty() || full.len() == 1 {
        return Some(base);
    }
    base.subcommand(&full[1])
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS `a[2..]`.
pub fn getkeys(a: &[Arg], with_flags: bool) -> Frame {
    let full = &a[2..];
    let Some(spec) = resolve(full) else { return err("ERR Invalid command specified") };
    let has_keys = !crate::keyspec::of(spec).is_empty();
    if !has_keys {
        return err("ERR The command has no key arguments");
    }
    if !spec.arity_ok(full.len()) {
        return err("ERR Invalid number of arguments specified for command");
    }
    let keys: Vec<usize> = spec.key_indexes(full).filter(|&i| i < full.len()).collect();
    if keys.is_empty() {
        return err("ERR Invalid arguments specified for command");
    }
    let name = |i: usize| Frame::Bulk(Bytes::copy_from_slice(&full[i]));
    if !with_flags {
        return Frame::Array(keys.into_iter().map(name).collect());
    }
    // The flags of the key spec that names each key (`keyspec::keys`, whose positions the
    // unit tests check against `key_indexes`).
    Frame::Array(
        crate::keyspec::keys(spec, full)
            .into_iter()
            .filter(|&(i, _)| i < full.len())
            .map(|(i, f)| {
                let flags = crate::keyspec::flag_names(f).map(|n| Frame::Simple(Bytes::from_static(n.as_bytes()))).collect();
                Frame::Array(vec![name(i), Frame::Array(flags)])
            })
            .collect(),
    )
}
