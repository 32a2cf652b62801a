//! The PF family: Redis's HyperLogLog commands PFADD, PFCOUNT and PFMERGE, with Redis 7's
//! semantics, replies and errors (`hyperloglog.c`).
//!
//! A Redis HyperLogLog is a plain string in Redis's own HYLL encoding (sparse or dense, 16384
//! registers); the `abacus-redis-hll` crate implements Redis's algorithms on exactly those
//! bytes, so values copied from Redis (GET/SET, replication) behave identically here. The
//! value stays [`Value::Str`]: each command moves the bytes out of the entry
//! (`std::mem::take`, no copy), works on them and puts them back.
//!
//! Errors are Redis's: a string that is not a HyperLogLog (including a decoded HLL.* sketch,
//! whose bytes never start with "HYLL") is `WRONGTYPE Key is not a valid HyperLogLog string
//! value.`, a corrupt sparse body `INVALIDOBJ Corrupted HLL object detected`, and a set or a
//! hash the generic `WRONGTYPE Operation against a key holding the wrong kind of value`.
//!
//! PFDEBUG (GETREG, DECODE, ENCODING, TODENSE) and PFSELFTEST are Redis 7's debugging
//! commands with its replies. One difference: as a write command, a successful PFDEBUG here
//! signals WATCH on its key, where Redis only counts it as dirty.
//!
//! PFCOUNT on a single key is flagged read-only, as in Redis, but writes the recomputed
//! cardinality into the value's cache; like Redis it then signals the key as modified (WATCH).

use abacus_keyspace::{Value, ValueRef};
use abacus_protocol::{Arg, Frame};
use abacus_redis_hll::{HllError, RedisHll, HLL_REGISTERS};

use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Ctx, KeysModified};

const ALL: (i32, i32, i32) = (1, -1, 1);
const G: &str = "hyperloglog";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("pfadd", -2, WRITE | DENYOOM | FAST | PREFETCH_VALUE, (1, 1, 1), pfadd, G, "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.")
        .docs("2.8.9", "O(1) to add every element.")
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            element type=string flags=optional,multiple
        "),
    Spec::keyed("pfcount", -2, READONLY, ALL, pfcount, G, "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).")
        .docs("2.8.9", "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.")
        .key_specs("RW access")
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    Spec::keyed("pfmerge", -2, WRITE | DENYOOM, ALL, pfmerge, G, "Merges one or more HyperLogLog values into a single key.")
        .docs("2.8.9", "O(N) to merge N HyperLogLogs, but with high constant times.")
        .key_specs("RW access insert; RO access")
        .args("
            destkey type=key key_spec_index=0
            sourcekey type=key key_spec_index=1 flags=multiple
        "),
    Spec::keyed("pfdebug", 3, WRITE | DENYOOM | ADMIN, (2, 2, 1), pfdebug, G, "Internal commands for debugging HyperLogLog values.")
        .docs("2.8.9", "N/A")
        .syscmd()
        .key_specs("RW access")
        .args("
            subcommand type=string
            key type=key key_spec_index=0
        "),
    Spec::keyed("pfselftest", 1, ADMIN, (0, 0, 0), pfselftest, G, "An internal command for testing HyperLogLog values.")
        .docs("2.8.9", "N/A")
        .syscmd(),
];

fn hll_error(e: HllError) -> Frame {
    Frame::error(e.redis_message())
}

/// How [`with_hll`] looks a key up, as Redis does for each command.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// lookupKeyRead: counted in keyspace hits/misses.
    Read,
    /// lookupKeyRead, then dbUnshareStringValue (single-key PFCOUNT may rewrite the cache).
    ReadUnshare,
    /// lookupKeyWrite + dbUnshareStringValue.
    Write,
}

/// Runs `f` on the HyperLogLog at `key`, moved out of its entry and put back afterwards.
/// Ok(None) if the key is missing; Err(reply) if the value is not a HyperLogLog (unchanged).
fn with_hll<R>(ctx: &mut Ctx, key: &[u8], lookup: Lookup, f: impl FnOnce(&mut RedisHll) -> R) -> Result<Option<R>, Frame> {
    let now = ctx.now_ms;
    let db = ctx.db();
    let found = if lookup == Lookup::Write { db.get_mut(key, now) } else { db.get_read_mut(key, now) };
    let Some(e) = found else { return Ok(None) };
    match e.value() {
        ValueRef::Str(_) => {}
        ValueRef::Hll(_) => return Err(hll_error(HllError::NotHll)),
        // Redis's isHLLObjectOrReply checks the type first: the generic WRONGTYPE text.
        ValueRef::Set(_) | ValueRef::Hash(_) | ValueRef::List(_) | ValueRef::ZSet(_) | ValueRef::Series(_) | ValueRef::Stream(_) => return Err(Frame::error(super::args::ERR_WRONGTYPE)),
    }
    let Value::Str(bytes) = e.take_value() else { unreachable!("checked to be a string") };
    let mut h = match RedisHll::from_vec(bytes.into_vec()) {
        Ok(h) => h,
        Err((err, back)) => {
            e.replace_value(Value::Str(back.into()));
            return Err(hll_error(err));
        }
    };
    let r = f(&mut h);
    e.replace_value(Value::Str(h.into_bytes().into()));
    if lookup != Lookup::Read {
        // An unshared string is "raw" in Redis whatever its length (OBJECT ENCODING).
        e.set_raw_encoding(true);
    }
    Ok(Some(r))
}

/// Stores a new HyperLogLog as Redis's createHLLObject does (a "raw" string).
fn store_new(ctx: &mut Ctx, key: &[u8], h: RedisHll) {
    let now = ctx.now_ms;
    let db = ctx.db();
    db.set(key, Value::Str(h.into_bytes().into()), 0, now);
    if let Some(e) = db.get_mut(key, now) {
        e.set_raw_encoding(true);
    }
}

fn pfadd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let max_bytes = ctx.hll.sparse_max_bytes;
    // On a corrupt body Redis stops at that element; earlier ones stay added.
    let added = with_hll(ctx, &a[1], Lookup::Write, |h| h.add_all(a[2..].iter().map(|el| &el[..]), max_bytes));
    match added {
        // As Redis: no register changed, no signal.
        Ok(Some(Ok(false))) => ctx.unchanged(Frame::Integer(0)),
        Ok(Some(Ok(true))) => Frame::Integer(1),
        Ok(Some(Err(e))) => hll_error(e),
        Err(reply) => reply,
        Ok(None) => {
            let mut h = RedisHll::new();
            // A fresh value is never corrupt: adding cannot fail here.
            let _ = h.add_all(a[2..].iter().map(|el| &el[..]), max_bytes);
            h.invalidate_cache();
            store_new(ctx, &a[1], h);
            Frame::Integer(1)
        }
    }
}

fn pfcount(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if a.len() == 2 {
        let counted = with_hll(ctx, &a[1], Lookup::ReadUnshare, |h| {
            let stale = h.cached_count().is_none();
            h.count().map(|card| (card, stale))
        });
        return match counted {
            Ok(Some(Ok((card, stale)))) => {
                if stale {
                    ctx.db().signal_modified(&a[1]);
                    // The cache bytes are part of the value (GET shows them): log the refresh.
                    ctx.propagate_command();
                }
                // Redis replies with addReplyLongLong.
                Frame::Integer(card as i64)
            }
            Ok(Some(Err(e))) => hll_error(e),
            Ok(None) => Frame::Integer(0),
            Err(reply) => reply,
        };
    }
    let mut max = Box::new([0u8; HLL_REGISTERS]);
    for key in &a[1..] {
        match with_hll(ctx, key, Lookup::Read, |h| h.merge_into(&mut max)) {
            Ok(Some(Err(e))) => return hll_error(e),
            Err(reply) => return reply,
            Ok(_) => {}
        }
    }
    Frame::Integer(RedisHll::count_registers(&max) as i64)
}

fn pfmerge(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    // As Redis: the destination (if it exists) and every existing source, in order, are
    // checked and merged into `max`; then the destination gets `max`.
    let mut max = Box::new([0u8; HLL_REGISTERS]);
    let mut use_dense = false;
    for key in &a[1..] {
        let merged = with_hll(ctx, key, Lookup::Read, |h| {
            use_dense |= h.is_dense();
            h.merge_into(&mut max)
        });
        match merged {
            Ok(Some(Err(e))) => return hll_error(e),
            Err(reply) => return reply,
            Ok(_) => {}
        }
    }
    let max_bytes = ctx.hll.sparse_max_bytes;
    // As Redis: the destination is signalled (even if no register changed), never the sources;
    // its event is PFADD's.
    ctx.modified_only(KeysModified::key(0));
    let reply = match with_hll(ctx, &a[1], Lookup::Write, |h| h.store_merged(&max, use_dense, max_bytes)) {
        Ok(Some(Ok(()))) => Frame::ok(),
        Ok(Some(Err(e))) => hll_error(e),
        Err(reply) => reply,
        Ok(None) => {
            let mut h = RedisHll::new();
            if let Err(e) = h.store_merged(&max, use_dense, max_bytes) {
                return hll_error(e);
            }
            store_new(ctx, &a[1], h);
            Frame::ok()
        }
    };
    ctx.notify(notify::STRING, "pfadd", &a[1]);
    reply
}

/// PFDEBUG subcommand key: Redis looks the key up (for writing) and checks it is a
/// HyperLogLog before it reads the subcommand's name.
fn pfdebug(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let sub = a[1].to_ascii_lowercase();
    let replied = with_hll(ctx, &a[2], Lookup::Write, |h| -> Frame {
        match &sub[..] {
            b"getreg" => {
                if let Err(e) = h.to_dense() {
                    return hll_error(e);
                }
                let regs = h.dense_registers().unwrap_or_default();
                Frame::Array(regs.into_iter().map(|r| Frame::Integer(r.into())).collect())
            }
            b"decode" => match h.describe_sparse() {
                // Redis 7 sends this one as a bulk string (ENCODING is a status).
                Some(text) => Frame::bulk(text),
                None => Frame::error("ERR HLL encoding is not sparse"),
            },
            b"encoding" => Frame::simple(if h.is_dense() { "dense" } else { "sparse" }),
            b"todense" => {
                let converted = !h.is_dense();
                match h.to_dense() {
                    Ok(()) => Frame::Integer(converted.into()),
                    Err(e) => hll_error(e),
                }
            }
            _ => {
                // addReplyErrorFormat turns line breaks into spaces.
                let name: String = String::from_utf8_lossy(&a[1]).chars().map(|c| if c == '\r' || c == '\n' { ' ' } else { c }).collect();
                Frame::error(format!("ERR Unknown PFDEBUG subcommand '{name}'"))
            }
        }
    });
    // A conversion to dense is an encoding change, not a modification: Redis signals
    // nothing (it only propagates it).
    ctx.modified_only(KeysModified::NONE);
    ctx.notify_none();
    match replied {
        Ok(Some(reply)) => reply,
        Ok(None) => Frame::error("ERR The specified key does not exist"),
        Err(reply) => reply,
    }
}

fn pfselftest(_ctx: &mut Ctx, _a: &[Arg]) -> Frame {
    match abacus_redis_hll::self_test() {
        Ok(()) => Frame::ok(),
        Err(text) => Frame::error(text),
    }
}
