//! COMMAND GETKEYS and GETKEYSANDFLAGS: a full command's keys, as the server itself finds
//! them.
//!
//! Both read [`Spec::key_indexes`], the one function that shard routing, MULTI/EXEC locking
//! and WATCH use too, so what a proxy or cluster-aware client learns here is exactly what
//! the server will route by. The checks and errors are Redis 7.0's `getKeysSubcommandImpl`:
//! an unknown command or subcommand, a command without key arguments, a wrong argument
//! count, and arguments that name no key (a bad `numkeys`).
//!
//! GETKEYSANDFLAGS's per-key flags come from the command's flags until the table carries
//! Redis's per-key key specs: a read-only command's keys are `RO access`, a write's
//! `RW update` (Redis refines some, e.g. DEL's key is `RM delete`).

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

fn key_flags(spec: &Spec) -> &'static [&'static str] {
    if spec.is_write() {
        &["RW", "update"]
    } else {
        &["RO", "access"]
    }
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS `a[2..]`.
pub fn getkeys(a: &[Arg], with_flags: bool) -> Frame {
    let full = &a[2..];
    let Some(spec) = resolve(full) else { return err("ERR Invalid command specified") };
    let has_keys = spec.first_key > 0 || spec.numkeys_index > 0 || spec.trailing_key.is_some();
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
    Frame::Array(
        keys.into_iter()
            .map(|i| {
                if with_flags {
                    let flags = key_flags(spec).iter().map(|f| Frame::Simple(Bytes::from_static(f.as_bytes()))).collect();
                    Frame::Array(vec![name(i), Frame::Array(flags)])
                } else {
                    name(i)
                }
            })
            .collect(),
    )
}
