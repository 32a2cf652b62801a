//! Set algebra: SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE.
//!
//! The work is `abacus_collections`' algebra: between bitmap sets it runs on the Roaring
//! containers (an intersection count of two 9.5M-ID sets is a few milliseconds, where Redis
//! walks members for seconds), and SINTERCARD counts without building the intersection.
//!
//! Keys on several shards: these handlers are plain single-shard functions; `exec.rs` checks
//! the operands (and the destination) out of their shards and runs the handler on a scratch
//! keyspace holding just those keys, so a cross-shard SUNIONSTORE is as atomic as a local one.
//!
//! Semantics are Redis 7's (`t_set.c`): every operand is type-checked before anything is
//! computed (a missing key is an empty set, a key of another type is WRONGTYPE even when an
//! earlier operand is missing); a STORE command replaces the destination whatever its type,
//! deletes it when the result is empty and replies with the result's cardinality.

use abacus_collections::IdSet;
use abacus_keyspace::Value;
use abacus_protocol::{Arg, Frame};

use super::args::*;
use super::sets::member_frames;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Ctx, KeysModified};

const ALL: (i32, i32, i32) = (1, -1, 1);
const G: &str = "set";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("sinter", -2, READONLY, ALL, sinter, G, "Returns the intersect of multiple sets.")
        .docs("1.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.")
        .tips("nondeterministic_output_order")
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    Spec::keyed("sintercard", -3, READONLY, (0, 0, 0), sintercard, G, "Returns the number of members of the intersect of multiple sets.").with_numkeys(1)
        .docs("7.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.")
        .args("
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            limit type=integer token=LIMIT flags=optional
        "),
    Spec::keyed("sinterstore", -3, WRITE | DENYOOM, ALL, sinterstore, G, "Stores the intersect of multiple sets in a key.")
        .docs("1.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.")
        .key_specs("RW update; RO access")
        .args("
            destination type=key key_spec_index=0
            key type=key key_spec_index=1 flags=multiple
        "),
    Spec::keyed("sunion", -2, READONLY, ALL, sunion, G, "Returns the union of multiple sets.")
        .docs("1.0.0", "O(N) where N is the total number of elements in all given sets.")
        .tips("nondeterministic_output_order")
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    Spec::keyed("sunionstore", -3, WRITE | DENYOOM, ALL, sunionstore, G, "Stores the union of multiple sets in a key.")
        .docs("1.0.0", "O(N) where N is the total number of elements in all given sets.")
        .key_specs("OW update; RO access")
        .args("
            destination type=key key_spec_index=0
            key type=key key_spec_index=1 flags=multiple
        "),
    Spec::keyed("sdiff", -2, READONLY, ALL, sdiff, G, "Returns the difference of multiple sets.")
        .docs("1.0.0", "O(N) where N is the total number of elements in all given sets.")
        .tips("nondeterministic_output_order")
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    Spec::keyed("sdiffstore", -3, WRITE | DENYOOM, ALL, sdiffstore, G, "Stores the difference of multiple sets in a key.")
        .docs("1.0.0", "O(N) where N is the total number of elements in all given sets.")
        .key_specs("OW update; RO access")
        .args("
            destination type=key key_spec_index=0
            key type=key key_spec_index=1 flags=multiple
        "),
];

#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The sets at `keys` (None for a missing key), all borrowed at once. Each key is first
/// looked up on its own (lazy expiry, type check; reads count keyspace hits, STORE forms look
/// up for writing as Redis does), then the live sets are borrowed together.
fn operands<'a>(ctx: &'a mut Ctx, keys: &[Arg], write: bool) -> Result<Vec<Option<&'a IdSet>>, Frame> {
    let now = ctx.now_ms;
    for key in keys {
        let found = if write { ctx.db().get_mut(key, now).map(|e| &*e) } else { ctx.db().get(key, now) };
        match found {
            Some(e) if e.as_set().is_none() => return Err(err(ERR_WRONGTYPE)),
            Some(_) => {}
            // Redis 7.0 reads the sources of the STORE forms too: a missing one is a
            // "keymiss" (a read's lookup records its own).
            None if write => ctx.notify(notify::KEY_MISS, "keymiss", key),
            None => {}
        }
    }
    let db = &*ctx.db();
    Ok(keys.iter().map(|key| db.get_shared(key, now).and_then(|e| e.as_set())).collect())
}

fn compute(ctx: &mut Ctx, keys: &[Arg], write: bool, op: Op) -> Result<IdSet, Frame> {
    let limits = ctx.set_limits;
    let sets = operands(ctx, keys, write)?;
    Ok(match op {
        Op::Inter if sets.iter().any(Option::is_none) => IdSet::new(),
        Op::Inter => IdSet::intersection_with_limits(&sets.into_iter().flatten().collect::<Vec<_>>(), &limits),
        Op::Union => IdSet::union_with_limits(&sets.into_iter().flatten().collect::<Vec<_>>(), &limits),
        Op::Diff => match sets.split_first() {
            Some((Some(first), rest)) => {
                IdSet::difference_with_limits(first, &rest.iter().flatten().copied().collect::<Vec<_>>(), &limits)
            }
            _ => IdSet::new(),
        },
    })
}

fn reply(ctx: &mut Ctx, a: &[Arg], op: Op) -> Frame {
    match compute(ctx, &a[1..], false, op) {
        Ok(result) => Frame::Set(member_frames(result.iter())),
        Err(e) => e,
    }
}

fn store(ctx: &mut Ctx, a: &[Arg], op: Op) -> Frame {
    let result = match compute(ctx, &a[2..], true, op) {
        Ok(result) => result,
        Err(e) => return e,
    };
    let (now, card) = (ctx.now_ms, result.len());
    // As Redis: the destination is signalled, never the sources; an empty result only if
    // it deleted a destination.
    let existed = if result.is_empty() { ctx.db().remove(&a[1], now) } else { true };
    if result.is_empty() && existed {
        ctx.notify(notify::GENERIC, "del", &a[1]);
    }
    ctx.modified_only(if existed { KeysModified::key(0) } else { KeysModified::NONE });
    if !result.is_empty() {
        // Replaces any value (and TTL) the destination had, as Redis's dbDelete + dbAdd.
        ctx.db().set(&a[1], Value::Set(Box::new(result)), 0, now);
    }
    Frame::Integer(card as i64)
}

fn sinter(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    reply(ctx, a, Op::Inter)
}

fn sunion(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    reply(ctx, a, Op::Union)
}

fn sdiff(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    reply(ctx, a, Op::Diff)
}

fn sinterstore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    store(ctx, a, Op::Inter)
}

fn sunionstore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    store(ctx, a, Op::Union)
}

fn sdiffstore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    store(ctx, a, Op::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]. The key positions come from the numkeys
/// argument (`Spec::with_numkeys`), which routing reads too; the checks here give the errors.
fn sintercard(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let numkeys = match parse_i64(&a[1]) {
        Ok(n) if n > 0 => n as u64,
        _ => return err("ERR numkeys should be greater than 0"),
    };
    if numkeys > (a.len() - 2) as u64 {
        return err("ERR Number of keys can't be greater than number of args");
    }
    let keys_end = 2 + numkeys as usize;
    let mut limit = 0;
    for option in a[keys_end..].chunks(2) {
        match option {
            [name, value] if is(name, "limit") => match parse_i64(value) {
                Ok(l) if l >= 0 => limit = usize::try_from(l).unwrap_or(usize::MAX),
                _ => return err("ERR LIMIT can't be negative"),
            },
            _ => return err(ERR_SYNTAX),
        }
    }
    let sets = match operands(ctx, &a[2..keys_end], false) {
        Ok(sets) => sets,
        Err(e) => return e,
    };
    if sets.iter().any(Option::is_none) {
        return Frame::Integer(0);
    }
    let sets: Vec<&IdSet> = sets.into_iter().flatten().collect();
    Frame::Integer(IdSet::intersection_card(&sets, limit) as i64)
}
