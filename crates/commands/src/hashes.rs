//! The hash family: HSET, HSETNX, HGET, HMGET, HMSET, HGETALL, HDEL, HLEN, HEXISTS, HKEYS,
//! HVALS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN.
//!
//! A hash is an `abacus_collections::CompactHash`: a listpack (one `Vec` of pairs scanned
//! linearly) up to `hash-max-listpack-entries` fields of at most `hash-max-listpack-value`
//! bytes, then an insertion-ordered hashtable. Summaries (hashes of counters) are mostly
//! small, so HINCRBY on a listpack is the common case. Semantics, replies and errors are
//! Redis 7's (`t_hash.c`); a key never holds an empty hash (the last HDEL deletes it).
//!
//! HINCRBYFLOAT computes like INCRBYFLOAT (Redis's long double arithmetic printed with 17
//! decimals, emulated exactly in `ldouble`).

use abacus_collections::{CompactHash, FieldValue};
use abacus_keyspace::Value;
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use super::ldouble;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Call, Ctx};

const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "hash";

pub const COMMANDS: &[Spec] = &[
    HSET,
    Spec::keyed("hmset", -4, WRITE | DENYOOM | FAST, K1, hmset, G, "Sets the values of multiple fields.")
        .docs("2.0.0", "O(N) where N is the number of fields being set.")
        .deprecated("4.0.0", "`HSET` with multiple field-value pairs")
        .args("
            key type=key key_spec_index=0
            field_value type=block flags=multiple
              field type=string
              value type=string
        "),
    Spec::keyed("hsetnx", 4, WRITE | DENYOOM | FAST, K1, hsetnx, G, "Sets the value of a field in a hash only when the field doesn't exist.")
        .docs("2.0.0", "O(1)")
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            field type=string
            value type=string
        "),
    Spec::keyed("hget", 3, READONLY | FAST, K1, hget, G, "Returns the value of a field in a hash.")
        .docs("2.0.0", "O(1)")
        .args("
            key type=key key_spec_index=0
            field type=string
        "),
    Spec::keyed("hmget", -3, READONLY | FAST, K1, hmget, G, "Returns the values of all fields in a hash.")
        .docs("2.0.0", "O(N) where N is the number of fields being requested.")
        .args("
            key type=key key_spec_index=0
            field type=string flags=multiple
        "),
    Spec::keyed("hgetall", 2, READONLY, K1, hgetall, G, "Returns all fields and values in a hash.")
        .docs("2.0.0", "O(N) where N is the size of the hash.")
        .tips("nondeterministic_output_order")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("hdel", -3, WRITE | FAST, K1, hdel, G, "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.")
        .docs("2.0.0", "O(N) where N is the number of fields to be removed.")
        .history(&[("2.4.0", "Accepts multiple `field` arguments.")])
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            field type=string flags=multiple
        "),
    Spec::keyed("hlen", 2, READONLY | FAST, K1, hlen, G, "Returns the number of fields in a hash.")
        .docs("2.0.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("hexists", 3, READONLY | FAST, K1, hexists, G, "Determines whether a field exists in a hash.")
        .docs("2.0.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
            field type=string
        "),
    Spec::keyed("hkeys", 2, READONLY, K1, hkeys, G, "Returns all fields in a hash.")
        .docs("2.0.0", "O(N) where N is the size of the hash.")
        .tips("nondeterministic_output_order")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("hvals", 2, READONLY, K1, hvals, G, "Returns all values in a hash.")
        .docs("2.0.0", "O(N) where N is the size of the hash.")
        .tips("nondeterministic_output_order")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("hstrlen", 3, READONLY | FAST, K1, hstrlen, G, "Returns the length of the value of a field.")
        .docs("3.2.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
            field type=string
        "),
    Spec::keyed("hincrby", 4, WRITE | DENYOOM | FAST, K1, hincrby, G, "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.")
        .docs("2.0.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            field type=string
            increment type=integer
        "),
    Spec::keyed("hincrbyfloat", 4, WRITE | DENYOOM | FAST, K1, hincrbyfloat, G, "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.")
        .docs("2.6.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            field type=string
            increment type=double
        "),
    Spec::keyed("hrandfield", -2, READONLY, K1, hrandfield, G, "Returns one or more random fields from a hash.")
        .docs("6.2.0", "O(N) where N is the number of fields returned")
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            options type=block flags=optional
              count type=integer
              withvalues type=pure-token token=WITHVALUES flags=optional
        "),
    Spec::keyed("hscan", -3, READONLY, K1, hscan, G, "Iterates over fields and values of a hash.")
        .docs("2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..")
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            cursor type=integer
            pattern type=pattern token=MATCH flags=optional
            count type=integer token=COUNT flags=optional
        "),
];

/// HSET's entry, named by callers that run it (the summarizer's exactly-once offsets).
pub const HSET: Spec = Spec::keyed("hset", -4, WRITE | DENYOOM | FAST, K1, hset, G, "Creates or modifies the value of a field in a hash.")
    .docs("2.0.0", "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.")
    .history(&[("4.0.0", "Accepts multiple `field` and `value` arguments.")])
    .args("
        key type=key key_spec_index=0
        field_value type=block flags=multiple
          field type=string
          value type=string
    ");

/// The hash at `key` for reading, counted in keyspace hits/misses. Ok(None) if missing.
fn read_hash<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a CompactHash>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get(key, now) {
        None => Ok(None),
        Some(e) => e.as_hash().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// The hash at `key` for modification. Ok(None) if missing.
fn hash_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut CompactHash>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        None => Ok(None),
        Some(e) => e.as_hash_mut().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// The hash at `key` for modification, created empty if missing. Callers add a field before
/// returning, so no empty hash outlives the command.
fn hash_mut_or_new<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<&'a mut CompactHash, Frame> {
    let now = ctx.now_ms;
    if !ctx.db().contains(key, now) {
        ctx.db().set(key, Value::Hash(Box::new(CompactHash::new())), 0, now);
    }
    match hash_mut(ctx, key)? {
        Some(hash) => Ok(hash),
        None => Err(err("ERR internal error: key vanished")),
    }
}

fn err_arity(a: &[Arg]) -> Frame {
    Frame::error(format!("ERR wrong number of arguments for '{}' command", String::from_utf8_lossy(&a[0]).to_ascii_lowercase()))
}

/// HSET / HMSET: sets every pair; the number of new fields.
fn set_pairs(ctx: &mut Ctx, a: &[Arg]) -> Result<usize, Frame> {
    if !a.len().is_multiple_of(2) {
        return Err(err_arity(a));
    }
    let limits = ctx.hash_limits;
    let hash = hash_mut_or_new(ctx, &a[1])?;
    Ok(a[2..].chunks(2).filter(|pair| hash.insert_with_limits(&pair[0], &pair[1], &limits)).count())
}

fn hset(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match set_pairs(ctx, a) {
        Ok(added) => Frame::Integer(added as i64),
        Err(e) => e,
    }
}

fn hmset(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match set_pairs(ctx, a) {
        Ok(_) => {
            ctx.notify(notify::HASH, "hset", &a[1]);
            Frame::ok()
        }
        Err(e) => e,
    }
}

fn hsetnx(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if let Ok(Some(hash)) = hash_mut(ctx, &a[1]) {
        if hash.contains(&a[2]) {
            return ctx.unchanged(Frame::Integer(0));
        }
    }
    let limits = ctx.hash_limits;
    match hash_mut_or_new(ctx, &a[1]) {
        Ok(hash) => {
            let added = hash.insert_with_limits(&a[2], &a[3], &limits);
            ctx.notify(notify::HASH, "hset", &a[1]);
            Frame::Integer(added.into())
        }
        Err(e) => e,
    }
}

fn hget(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => hash.and_then(|h| h.get(&a[2])).map_or(Frame::Null, bulk),
        Err(e) => e,
    }
}

fn hmget(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => Frame::Array(a[2..].iter().map(|f| hash.and_then(|h| h.get(f)).map_or(Frame::Null, bulk)).collect()),
        Err(e) => e,
    }
}

fn hgetall(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => Frame::Map(hash.into_iter().flat_map(CompactHash::iter).map(|(f, v)| (bulk(f), bulk(v))).collect()),
        Err(e) => e,
    }
}

fn hdel(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (removed, now_empty) = match hash_mut(ctx, &a[1]) {
        Ok(Some(hash)) => (a[2..].iter().filter(|f| hash.remove(f)).count(), hash.is_empty()),
        Ok(None) => return ctx.unchanged(Frame::Integer(0)),
        Err(e) => return e,
    };
    if removed == 0 {
        return ctx.unchanged(Frame::Integer(0));
    }
    ctx.notify(notify::HASH, "hdel", &a[1]);
    if now_empty {
        let now = ctx.now_ms;
        ctx.db().remove(&a[1], now);
        ctx.notify(notify::GENERIC, "del", &a[1]);
    }
    Frame::Integer(removed as i64)
}

fn hlen(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => Frame::Integer(hash.map_or(0, CompactHash::len) as i64),
        Err(e) => e,
    }
}

fn hexists(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => Frame::Integer(hash.is_some_and(|h| h.contains(&a[2])).into()),
        Err(e) => e,
    }
}

fn hkeys(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => Frame::Array(hash.into_iter().flat_map(CompactHash::iter).map(|(f, _)| bulk(f)).collect()),
        Err(e) => e,
    }
}

fn hvals(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => Frame::Array(hash.into_iter().flat_map(CompactHash::iter).map(|(_, v)| bulk(v)).collect()),
        Err(e) => e,
    }
}

fn hstrlen(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_hash(ctx, &a[1]) {
        Ok(hash) => Frame::Integer(hash.and_then(|h| h.get(&a[2])).map_or(0, <[u8]>::len) as i64),
        Err(e) => e,
    }
}

fn hincrby(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let by = match parse_i64(&a[3]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let limits = ctx.hash_limits;
    let current = match read_field(ctx, a) {
        Ok(Some(text)) => match abacus_keyspace::value::parse_canonical_i64(&text) {
            Some(v) => v,
            None => return err("ERR hash value is not an integer"),
        },
        Ok(None) => 0,
        Err(e) => return e,
    };
    let Some(new) = current.checked_add(by) else { return err(ERR_OVERFLOW) };
    match hash_mut_or_new(ctx, &a[1]) {
        Ok(hash) => {
            hash.insert_with_limits(&a[2], itoa::Buffer::new().format(new).as_bytes(), &limits);
            Frame::Integer(new)
        }
        Err(e) => e,
    }
}

fn hincrbyfloat(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let by = match ldouble::parse(&a[3]) {
        Some(ldouble::Ld::Inf { .. }) => return err("ERR value is NaN or Infinity"),
        Some(v) => v,
        None => return err(ERR_NOT_FLOAT),
    };
    let limits = ctx.hash_limits;
    let current = match read_field(ctx, a) {
        Ok(Some(text)) => match ldouble::parse(&text) {
            Some(v) => v,
            None => return err("ERR hash value is not a float"),
        },
        Ok(None) => ldouble::ZERO,
        Err(e) => return e,
    };
    let Some(sum) = ldouble::add(current, by) else {
        return err("ERR increment would produce NaN or Infinity");
    };
    let text = ldouble::to_human(sum);
    match hash_mut_or_new(ctx, &a[1]) {
        Ok(hash) => {
            hash.insert_with_limits(&a[2], &text, &limits);
            // As Redis: the result is propagated, not the increment.
            let text = Bytes::from(text);
            ctx.propagate_as(Call::of(&HSET).arg(Bytes::copy_from_slice(&a[1])).arg(Bytes::copy_from_slice(&a[2])).arg(text.clone()));
            Frame::Bulk(text)
        }
        Err(e) => e,
    }
}

/// The current value of field `a[2]` of hash `a[1]` (HINCRBY*), copied: None if either is
/// missing.
fn read_field(ctx: &mut Ctx, a: &[Arg]) -> Result<Option<Vec<u8>>, Frame> {
    Ok(hash_mut(ctx, &a[1])?.and_then(|h| h.get(&a[2])).map(<[u8]>::to_vec))
}

fn pair_frames(pairs: Vec<FieldValue<'_>>, with_values: bool) -> Frame {
    if with_values {
        Frame::Pairs(pairs.into_iter().map(|(f, v)| (bulk(f), bulk(v))).collect())
    } else {
        Frame::Array(pairs.into_iter().map(|(f, _)| bulk(f)).collect())
    }
}

/// HRANDFIELD key [count [WITHVALUES]].
fn hrandfield(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let count = match a.get(2).map(|c| parse_random_count(c)) {
        Some(Ok(count)) => Some(count),
        Some(Err(e)) => return e,
        None => None,
    };
    let with_values = match a.len() {
        5.. => return err(ERR_SYNTAX),
        4 if !is(&a[3], "withvalues") => return err(ERR_SYNTAX),
        4 => true,
        _ => false,
    };
    if let Some(count) = count {
        // Redis bounds a WITHVALUES count to half the range, since the reply has 2n items.
        if with_values && count.unsigned_abs() > (i64::MAX / 2) as u64 {
            return err("ERR value is out of range");
        }
    }
    let hash = match read_hash(ctx, &a[1]) {
        Ok(hash) => hash,
        Err(e) => return e,
    };
    // Only an existing hash has a reply to bound: a missing key answers [] whatever the count.
    if hash.is_some() && count.is_some_and(|c| c < 0 && c.unsigned_abs() > RANDOM_WITH_REPEATS_MAX) {
        return err_too_many_repeats();
    }
    let mut rng = rand::thread_rng();
    match (hash, count) {
        (None, None) => Frame::Null,
        (Some(hash), None) => hash.random_field(&mut rng).map_or(Frame::Null, |(f, _)| bulk(f)),
        (None, Some(_)) => Frame::Array(Vec::new()),
        (Some(hash), Some(count)) if count >= 0 => pair_frames(hash.random_fields_distinct(count as usize, &mut rng), with_values),
        (Some(hash), Some(count)) => {
            pair_frames(hash.random_fields_with_repeats(count.unsigned_abs() as usize, &mut rng), with_values)
        }
    }
}

fn hscan(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let cursor = match parse_cursor(&a[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // As Redis: the key is looked up before the options are parsed.
    let hash = match read_hash(ctx, &a[1]) {
        Ok(Some(hash)) => hash,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match ScanOpts::parse(&a[3..]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (next, pairs) = hash.scan(cursor, opts.count);
    let items = pairs.into_iter().filter(|(f, _)| opts.matches(f)).flat_map(|(f, v)| [bulk(f), bulk(v)]).collect();
    scan_reply(next, items)
}
