//! The set family, one key at a time: SADD, SREM, SISMEMBER, SMISMEMBER, SCARD, SMEMBERS,
//! SRANDMEMBER, SPOP, SMOVE, SSCAN. The multi-key algebra (SINTER, SUNION, SDIFF and their
//! STORE and CARD forms) is `set_algebra.rs`.
//!
//! A set is an `abacus_collections::IdSet`: a Roaring bitmap while every member is a canonical
//! 64-bit integer, then a listpack or a hashtable (see that crate). This file only parses
//! arguments, looks keys up and shapes replies with Redis 7's semantics and error texts
//! (`t_set.c`); a key never holds an empty set (the last removal deletes it).
//!
//! SADD is the hot path of loading ID sets (W6: 1,000 integer members per call): it hands the
//! whole argument slice to `IdSet::insert_many_with_limits`, which sorts integer batches
//! before inserting them into the bitmap.
//!
//! Replies: SMEMBERS, SPOP with a count and the algebra are RESP3 sets; SRANDMEMBER with a
//! count is an array (Redis 7.0's choice, since it may repeat members).

use abacus_collections::{IdSet, Member};
use abacus_keyspace::Value;
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Call, Ctx, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "set";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("sadd", -3, WRITE | DENYOOM | FAST, K1, sadd, G, "Adds one or more members to a set. Creates the key if it doesn't exist.")
        .docs("1.0.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .history(&[("2.4.0", "Accepts multiple `member` arguments.")])
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            member type=string flags=multiple
        "),
    SREM,
    Spec::keyed("sismember", 3, READONLY | FAST, K1, sismember, G, "Determines whether a member belongs to a set.")
        .docs("1.0.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
            member type=string
        "),
    Spec::keyed("smismember", -3, READONLY | FAST, K1, smismember, G, "Determines whether multiple members belong to a set.")
        .docs("6.2.0", "O(N) where N is the number of elements being checked for membership")
        .args("
            key type=key key_spec_index=0
            member type=string flags=multiple
        "),
    Spec::keyed("scard", 2, READONLY | FAST, K1, scard, G, "Returns the number of members in a set.")
        .docs("1.0.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("smembers", 2, READONLY, K1, smembers, G, "Returns all members of a set.")
        .docs("1.0.0", "O(N) where N is the set cardinality.")
        .tips("nondeterministic_output_order")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("srandmember", -2, READONLY, K1, srandmember, G, "Get one or multiple random members from a set")
        .docs("1.0.0", "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.")
        .history(&[("2.6.0", "Added the optional `count` argument.")])
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            count type=integer since=2.6.0 flags=optional
        "),
    Spec::keyed("spop", -2, WRITE | FAST, K1, spop, G, "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.")
        .docs("1.0.0", "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.")
        .history(&[("3.2.0", "Added the `count` argument.")])
        .tips("nondeterministic_output")
        .key_specs("RW access delete")
        .args("
            key type=key key_spec_index=0
            count type=integer since=3.2.0 flags=optional
        "),
    Spec::keyed("smove", 4, WRITE | FAST, (1, 2, 1), smove, G, "Moves a member from one set to another.")
        .docs("1.0.0", "O(1)")
        .key_specs("RW access delete; RW insert")
        .args("
            source type=key key_spec_index=0
            destination type=key key_spec_index=1
            member type=string
        "),
    Spec::keyed("sscan", -3, READONLY, K1, sscan, G, "Iterates over members of a set.")
        .docs("2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..")
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            cursor type=integer
            pattern type=pattern token=MATCH flags=optional
            count type=integer token=COUNT flags=optional
        "),
];

/// Named: effect records call it (`ctx::Call::of`).
pub const SREM: Spec = Spec::keyed("srem", -3, WRITE | FAST, K1, srem, G, "Removes one or more members from a set. Deletes the set if the last member was removed.")
    .docs("1.0.0", "O(N) where N is the number of members to be removed.")
    .history(&[("2.4.0", "Accepts multiple `member` arguments.")])
    .key_specs("RW delete")
    .args("
        key type=key key_spec_index=0
        member type=string flags=multiple
    ");

/// The set at `key` for reading, counted in keyspace hits/misses. Ok(None) if missing.
pub fn read_set<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a IdSet>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get(key, now) {
        None => Ok(None),
        Some(e) => e.as_set().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// The set at `key` for modification (Redis's lookupKeyWrite: not counted). Ok(None) if
/// missing.
fn set_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut IdSet>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        None => Ok(None),
        Some(e) => e.as_set_mut().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// Stores a new set (callers never store an empty one).
fn store_new(ctx: &mut Ctx, key: &[u8], set: IdSet) {
    debug_assert!(!set.is_empty(), "a key never holds an empty set");
    let now = ctx.now_ms;
    ctx.db().set(key, Value::Set(Box::new(set)), 0, now);
}

/// Deletes `key` after its set became empty.
fn delete(ctx: &mut Ctx, key: &[u8]) {
    let now = ctx.now_ms;
    ctx.db().remove(key, now);
}

pub fn member_frames<'a>(members: impl Iterator<Item = Member<'a>>) -> Vec<Frame> {
    members.map(|m| bulk(&m)).collect()
}

fn sadd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let limits = ctx.set_limits;
    match set_mut(ctx, &a[1]) {
        Ok(Some(set)) => match set.insert_many_with_limits(&a[2..], &limits) {
            0 => ctx.unchanged(Frame::Integer(0)),
            added => Frame::Integer(added as i64),
        },
        Ok(None) => {
            let mut set = IdSet::new();
            let added = set.insert_many_with_limits(&a[2..], &limits);
            store_new(ctx, &a[1], set);
            Frame::Integer(added as i64)
        }
        Err(e) => e,
    }
}

fn srem(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (removed, now_empty) = match set_mut(ctx, &a[1]) {
        Ok(Some(set)) => (a[2..].iter().filter(|m| set.remove(m)).count(), set.is_empty()),
        Ok(None) => return ctx.unchanged(Frame::Integer(0)),
        Err(e) => return e,
    };
    if removed == 0 {
        return ctx.unchanged(Frame::Integer(0));
    }
    ctx.notify(notify::SET, "srem", &a[1]);
    if now_empty {
        delete(ctx, &a[1]);
        ctx.notify(notify::GENERIC, "del", &a[1]);
    }
    Frame::Integer(removed as i64)
}

fn sismember(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_set(ctx, &a[1]) {
        Ok(set) => Frame::Integer(set.is_some_and(|s| s.contains(&a[2])).into()),
        Err(e) => e,
    }
}

fn smismember(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_set(ctx, &a[1]) {
        Ok(set) => Frame::Array(a[2..].iter().map(|m| Frame::Integer(set.is_some_and(|s| s.contains(m)).into())).collect()),
        Err(e) => e,
    }
}

fn scard(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_set(ctx, &a[1]) {
        Ok(set) => Frame::Integer(set.map_or(0, IdSet::len) as i64),
        Err(e) => e,
    }
}

fn smembers(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_set(ctx, &a[1]) {
        Ok(Some(set)) => Frame::Set(member_frames(set.iter())),
        Ok(None) => Frame::Set(Vec::new()),
        Err(e) => e,
    }
}

fn srandmember(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if a.len() > 3 {
        return err(ERR_SYNTAX);
    }
    let count = match a.get(2).map(|c| parse_random_count(c)) {
        Some(Ok(count)) => Some(count),
        Some(Err(e)) => return e,
        None => None,
    };
    let set = match read_set(ctx, &a[1]) {
        Ok(set) => set,
        Err(e) => return e,
    };
    // Only an existing set has a reply to bound: a missing key answers [] whatever the count.
    if set.is_some() && count.is_some_and(|c| c.unsigned_abs() > RANDOM_WITH_REPEATS_MAX && c < 0) {
        return err_too_many_repeats();
    }
    let mut rng = rand::thread_rng();
    match (set, count) {
        (None, None) => Frame::Null,
        (Some(set), None) => set.random_member(&mut rng).map_or(Frame::Null, |m| bulk(&m)),
        (None, Some(_)) => Frame::Array(Vec::new()),
        (Some(set), Some(count)) if count >= 0 => {
            Frame::Array(member_frames(set.random_members_distinct(count as usize, &mut rng).into_iter()))
        }
        (Some(set), Some(count)) => {
            Frame::Array(member_frames(set.random_members_with_repeats(count.unsigned_abs() as usize, &mut rng).into_iter()))
        }
    }
}

fn spop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if a.len() > 3 {
        return err(ERR_SYNTAX);
    }
    let count = match a.get(2).map(|c| parse_i64(c)) {
        Some(Ok(count)) if count >= 0 => Some(count as usize),
        Some(_) => return err("ERR value is out of range, must be positive"),
        None => None,
    };
    let mut rng = rand::thread_rng();
    let (reply, now_empty) = match (set_mut(ctx, &a[1]), count) {
        (Err(e), _) => return e,
        (Ok(None), None) => {
            ctx.propagate_nothing();
            return ctx.unchanged(Frame::Null);
        }
        (Ok(None), Some(_)) | (Ok(Some(_)), Some(0)) => {
            ctx.propagate_nothing();
            return ctx.unchanged(Frame::Set(Vec::new()));
        }
        (Ok(Some(set)), None) => {
            let member = set.pop_random(&mut rng).expect("a stored set is never empty");
            (Frame::Bulk(member.into()), set.is_empty())
        }
        (Ok(Some(set)), Some(count)) => {
            let members = set.pop_random_many(count, &mut rng);
            (Frame::Set(members.into_iter().map(|m| Frame::Bulk(m.into())).collect()), set.is_empty())
        }
    };
    ctx.notify(notify::SET, "spop", &a[1]);
    if now_empty {
        delete(ctx, &a[1]);
        ctx.notify(notify::GENERIC, "del", &a[1]);
    }
    // The members were drawn at random: propagated as SREM of the ones drawn.
    let mut effect = Call::of(&SREM).arg(Bytes::copy_from_slice(&a[1]));
    match &reply {
        Frame::Bulk(m) => effect.push(m.clone()),
        Frame::Set(ms) => effect.extend(ms.iter().filter_map(|m| if let Frame::Bulk(m) = m { Some(m.clone()) } else { None })),
        _ => {}
    }
    ctx.propagate_as(effect);
    reply
}

fn smove(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (src, dst, member) = (&a[1], &a[2], &a[3]);
    let limits = ctx.set_limits;
    // As Redis: a missing source answers 0 before the destination's type is checked.
    // As Redis: both keys are looked up (an expired one reclaimed) before any check.
    let src_found = set_mut(ctx, src).map(|s| s.is_some());
    let dst_checked = set_mut(ctx, dst).map(|_| ());
    match src_found {
        Ok(true) => {}
        Ok(false) => return ctx.unchanged(Frame::Integer(0)),
        Err(e) => return e,
    }
    if let Err(e) = dst_checked {
        return e;
    }
    if src == dst {
        let member_of = matches!(set_mut(ctx, src), Ok(Some(set)) if set.contains(member));
        return ctx.unchanged(Frame::Integer(member_of.into()));
    }
    let src_empty = match set_mut(ctx, src) {
        Ok(Some(set)) => {
            if !set.remove(member) {
                return ctx.unchanged(Frame::Integer(0));
            }
            set.is_empty()
        }
        _ => return ctx.unchanged(Frame::Integer(0)),
    };
    ctx.notify(notify::SET, "srem", src);
    if src_empty {
        delete(ctx, src);
        ctx.notify(notify::GENERIC, "del", src);
    }
    // As Redis: the destination is signalled only if the member was new to it.
    let added = match set_mut(ctx, dst) {
        Ok(Some(set)) => set.insert_with_limits(member, &limits),
        _ => {
            let mut set = IdSet::new();
            set.insert_with_limits(member, &limits);
            store_new(ctx, dst, set);
            true
        }
    };
    if added {
        ctx.notify(notify::SET, "sadd", dst);
    }
    ctx.modified_only(if added { KeysModified::key(0).and(1) } else { KeysModified::key(0) });
    Frame::Integer(1)
}

fn sscan(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let cursor = match parse_cursor(&a[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // As Redis: the key is looked up before the options are parsed, so a missing key answers
    // an empty page whatever the options.
    let set = match read_set(ctx, &a[1]) {
        Ok(Some(set)) => set,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match ScanOpts::parse(&a[3..]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (next, members) = set.scan(cursor, opts.count);
    scan_reply(next, members.iter().filter(|m| opts.matches(m)).map(|m| bulk(m)).collect())
}

#[cfg(test)]
mod tests {
    use abacus_keyspace::Db;
    use abacus_protocol::{Args, Bytes, Frame};

    fn run(dbs: &mut [Db], line: &str) -> Frame {
        let args = Args::from_vec(line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect());
        crate::testing::run_args(dbs, &args)
    }

    fn encoding(dbs: &mut [Db], key: &str) -> &'static str {
        dbs[0].peek(key.as_bytes(), 1).map_or("none", |e| e.encoding())
    }

    #[test]
    fn a_key_never_holds_an_empty_set() {
        let mut dbs = vec![Db::new()];
        for (line, reply) in [
            ("sadd s 1 x", 2),
            ("srem s 1 x", 2),
            ("sadd s 1", 1),
            ("smove s t 1", 1),
            ("spop t 5", -1),
            ("sadd a 1", 1),
            ("sinterstore d a nokey", 0),
            ("sdiffstore d a a", 0),
            ("srem a 1", 1),
        ] {
            let got = run(&mut dbs, line);
            if reply >= 0 {
                assert_eq!(got, Frame::Integer(reply), "{line}");
            }
        }
        assert!(dbs[0].is_empty(), "{} keys left", dbs[0].len());
    }

    #[test]
    fn integer_batches_stay_bitmaps_until_a_string_arrives() {
        let mut dbs = vec![Db::new()];
        let members: Vec<String> = (0..1000).rev().map(|i| (i * 7).to_string()).collect();
        assert_eq!(run(&mut dbs, &format!("sadd s {}", members.join(" "))), Frame::Integer(1000));
        assert_eq!(encoding(&mut dbs, "s"), "bitmap");
        assert_eq!(run(&mut dbs, "sadd s 7 14 01"), Frame::Integer(1));
        assert_eq!(encoding(&mut dbs, "s"), "hashtable");
        assert_eq!(run(&mut dbs, "sismember s 6993"), Frame::Integer(1));
        assert_eq!(run(&mut dbs, "scard s"), Frame::Integer(1001));
    }
}
