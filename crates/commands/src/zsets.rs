//! The sorted-set family, one key at a time: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE,
//! ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT, the ZRANGE family (ZRANGE with BYSCORE/BYLEX/REV/LIMIT,
//! ZRANGESTORE, ZREVRANGE, Z[REV]RANGEBYSCORE, Z[REV]RANGEBYLEX), ZREMRANGEBYRANK/SCORE/LEX,
//! ZRANDMEMBER, ZPOPMIN, ZPOPMAX, ZMPOP, ZSCAN. The multi-key algebra (ZUNION, ZINTER, ZDIFF,
//! their STORE forms, ZINTERCARD) is `zset_algebra.rs`.
//!
//! A sorted set is an `abacus_collections::ZSet` (listpack up to `zset-max-listpack-*`, then
//! an arena-backed order-statistics structure that OBJECT ENCODING calls "skiplist"). Every
//! range query is two rank lookups ([`ZSet::rank_where`] for the range's start and end) and a
//! walk of the ranks between, so score, lex and rank ranges share one path.
//!
//! Semantics, replies and error texts are Redis 7.0's (`t_zset.c`), including its score
//! formatting: scores reply as `%.17g` (`Frame::Score`; `1.1` is "1.1000000000000001"), a bulk
//! string in RESP2 and a double in RESP3. Pairs of (member, score) are RESP3 two-element
//! arrays and RESP2 flat arrays (`Frame::Pairs`), except ZPOPMIN/ZPOPMAX without a count (a
//! flat pair in both) and ZMPOP (nested in both), as Redis. A key never holds an empty sorted
//! set: every removal that empties one deletes the key.
//!
//! Effects: ZADD/ZINCRBY replay as sent (IEEE addition is deterministic, and snapshots keep
//! scores bit for bit); ZMPOP is propagated as ZPOPMIN/ZPOPMAX with the count, as Redis.
//!
//! For the blocking commands (BZPOPMIN, BZPOPMAX, BZMPOP), built with the blocking mechanism
//! elsewhere: [`pop_from_first`] pops from the first non-empty sorted set among `keys` on a
//! shard's `Ctx` (WRONGTYPE on the first key of another type, as Redis checks them in order),
//! states the effect (ZPOPMIN/ZPOPMAX key count) and returns what it popped, or `None` when
//! every key is missing; [`bzpop_reply`] and [`zmpop_reply`] shape Redis's replies.

use abacus_collections::{EncodingLimits, ZSet};
use abacus_keyspace::Value;
use abacus_protocol::{Arg, Bytes, BulksBuilder, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Call, Ctx, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
pub const G: &str = "sorted-set";

pub const COMMANDS: &[Spec] = &[
    ZADD,
    Spec::keyed("zincrby", 4, WRITE | DENYOOM | FAST, K1, zincrby, G, "Increments the score of a member in a sorted set.")
        .docs("1.2.0", "O(log(N)) where N is the number of elements in the sorted set.")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            increment type=integer
            member type=string
        "),
    Spec::keyed("zrem", -3, WRITE | FAST, K1, zrem, G, "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.")
        .docs("1.2.0", "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.")
        .history(&[("2.4.0", "Accepts multiple elements.")])
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            member type=string flags=multiple
        "),
    Spec::keyed("zcard", 2, READONLY | FAST, K1, zcard, G, "Returns the number of members in a sorted set.")
        .docs("1.2.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("zscore", 3, READONLY | FAST, K1, zscore, G, "Returns the score of a member in a sorted set.")
        .docs("1.2.0", "O(1)")
        .args("
            key type=key key_spec_index=0
            member type=string
        "),
    Spec::keyed("zmscore", -3, READONLY | FAST, K1, zmscore, G, "Returns the score of one or more members in a sorted set.")
        .docs("6.2.0", "O(N) where N is the number of members being requested.")
        .args("
            key type=key key_spec_index=0
            member type=string flags=multiple
        "),
    Spec::keyed("zrank", 3, READONLY | FAST, K1, zrank, G, "Returns the index of a member in a sorted set ordered by ascending scores.")
        .docs("2.0.0", "O(log(N))")
        .args("
            key type=key key_spec_index=0
            member type=string
        "),
    Spec::keyed("zrevrank", 3, READONLY | FAST, K1, zrevrank, G, "Returns the index of a member in a sorted set ordered by descending scores.")
        .docs("2.0.0", "O(log(N))")
        .args("
            key type=key key_spec_index=0
            member type=string
        "),
    Spec::keyed("zcount", 4, READONLY | FAST, K1, zcount, G, "Returns the count of members in a sorted set that have scores within a range.")
        .docs("2.0.0", "O(log(N)) with N being the number of elements in the sorted set.")
        .args("
            key type=key key_spec_index=0
            min type=double
            max type=double
        "),
    Spec::keyed("zlexcount", 4, READONLY | FAST, K1, zlexcount, G, "Returns the number of members in a sorted set within a lexicographical range.")
        .docs("2.8.9", "O(log(N)) with N being the number of elements in the sorted set.")
        .args("
            key type=key key_spec_index=0
            min type=string
            max type=string
        "),
    Spec::keyed("zrange", -4, READONLY, K1, zrange, G, "Returns members in a sorted set within a range of indexes.")
        .docs("1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.")
        .history(&[("6.2.0", "Added the `REV`, `BYSCORE`, `BYLEX` and `LIMIT` options.")])
        .args("
            key type=key key_spec_index=0
            start type=string
            stop type=string
            sortby type=oneof since=6.2.0 flags=optional
              byscore type=pure-token token=BYSCORE
              bylex type=pure-token token=BYLEX
            rev type=pure-token token=REV since=6.2.0 flags=optional
            offset_count type=block token=LIMIT since=6.2.0 flags=optional
              offset type=integer
              count type=integer
            withscores type=pure-token token=WITHSCORES flags=optional
        "),
    Spec::keyed("zrangestore", -5, WRITE | DENYOOM, (1, 2, 1), zrangestore, G, "Stores a range of members from sorted set in a key.")
        .docs("6.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.")
        .key_specs("OW update; RO access")
        .args("
            dst type=key key_spec_index=0
            src type=key key_spec_index=1
            min type=string
            max type=string
            sortby type=oneof flags=optional
              byscore type=pure-token token=BYSCORE
              bylex type=pure-token token=BYLEX
            rev type=pure-token token=REV flags=optional
            offset_count type=block token=LIMIT flags=optional
              offset type=integer
              count type=integer
        "),
    Spec::keyed("zrevrange", -4, READONLY, K1, zrevrange, G, "Returns members in a sorted set within a range of indexes in reverse order.")
        .docs("1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.")
        .deprecated("6.2.0", "`ZRANGE` with the `REV` argument")
        .args("
            key type=key key_spec_index=0
            start type=integer
            stop type=integer
            withscores type=pure-token token=WITHSCORES flags=optional
        "),
    Spec::keyed("zrangebyscore", -4, READONLY, K1, zrangebyscore, G, "Returns members in a sorted set within a range of scores.")
        .docs("1.0.5", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .deprecated("6.2.0", "`ZRANGE` with the `BYSCORE` argument")
        .history(&[("2.0.0", "Added the `WITHSCORES` modifier.")])
        .args("
            key type=key key_spec_index=0
            min type=double
            max type=double
            withscores type=pure-token token=WITHSCORES since=2.0.0 flags=optional
            offset_count type=block token=LIMIT flags=optional
              offset type=integer
              count type=integer
        "),
    Spec::keyed("zrevrangebyscore", -4, READONLY, K1, zrevrangebyscore, G, "Returns members in a sorted set within a range of scores in reverse order.")
        .docs("2.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYSCORE` arguments")
        .history(&[("2.1.6", "`min` and `max` can be exclusive.")])
        .args("
            key type=key key_spec_index=0
            max type=double
            min type=double
            withscores type=pure-token token=WITHSCORES flags=optional
            offset_count type=block token=LIMIT flags=optional
              offset type=integer
              count type=integer
        "),
    Spec::keyed("zrangebylex", -4, READONLY, K1, zrangebylex, G, "Returns members in a sorted set within a lexicographical range.")
        .docs("2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .deprecated("6.2.0", "`ZRANGE` with the `BYLEX` argument")
        .args("
            key type=key key_spec_index=0
            min type=string
            max type=string
            offset_count type=block token=LIMIT flags=optional
              offset type=integer
              count type=integer
        "),
    Spec::keyed("zrevrangebylex", -4, READONLY, K1, zrevrangebylex, G, "Returns members in a sorted set within a lexicographical range in reverse order.")
        .docs("2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYLEX` arguments")
        .args("
            key type=key key_spec_index=0
            max type=string
            min type=string
            offset_count type=block token=LIMIT flags=optional
              offset type=integer
              count type=integer
        "),
    Spec::keyed("zremrangebyrank", 4, WRITE, K1, zremrangebyrank, G, "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.")
        .docs("2.0.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            start type=integer
            stop type=integer
        "),
    Spec::keyed("zremrangebyscore", 4, WRITE, K1, zremrangebyscore, G, "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.")
        .docs("1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            min type=double
            max type=double
        "),
    Spec::keyed("zremrangebylex", 4, WRITE, K1, zremrangebylex, G, "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.")
        .docs("2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            min type=string
            max type=string
        "),
    Spec::keyed("zrandmember", -2, READONLY, K1, zrandmember, G, "Returns one or more random members from a sorted set.")
        .docs("6.2.0", "O(N) where N is the number of elements returned")
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            options type=block flags=optional
              count type=integer
              withscores type=pure-token token=WITHSCORES flags=optional
        "),
    ZPOPMIN,
    ZPOPMAX,
    Spec::keyed("zmpop", -4, WRITE, (0, 0, 0), zmpop, G, "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.").with_numkeys(1)
        .docs("7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.")
        .key_specs("RW access delete")
        .args("
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            where type=oneof
              min type=pure-token token=MIN
              max type=pure-token token=MAX
            count type=integer token=COUNT flags=optional
        "),
    Spec::keyed("zscan", -3, READONLY, K1, zscan, G, "Iterates over members and scores of a sorted set.")
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
pub const ZPOPMIN: Spec = Spec::keyed("zpopmin", -2, WRITE | FAST, K1, zpopmin, G, "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.")
    .docs("5.0.0", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.")
    .key_specs("RW access delete")
    .args("
        key type=key key_spec_index=0
        count type=integer flags=optional
    ");

/// Named: effect records call it (`ctx::Call::of`).
pub const ZPOPMAX: Spec = Spec::keyed("zpopmax", -2, WRITE | FAST, K1, zpopmax, G, "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.")
    .docs("5.0.0", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.")
    .key_specs("RW access delete")
    .args("
        key type=key key_spec_index=0
        count type=integer flags=optional
    ");

/// Named: effect records call it (`ctx::Call::of`).
pub const ZADD: Spec = Spec::keyed("zadd", -4, WRITE | DENYOOM | FAST, K1, zadd, G, "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.")
    .docs("1.2.0", "O(log(N)) for each item added, where N is the number of elements in the sorted set.")
    .history(&[
        ("2.4.0", "Accepts multiple elements."),
        ("3.0.2", "Added the `XX`, `NX`, `CH` and `INCR` options."),
        ("6.2.0", "Added the `GT` and `LT` options."),
    ])
    .args("
        key type=key key_spec_index=0
        condition type=oneof since=3.0.2 flags=optional
          nx type=pure-token token=NX
          xx type=pure-token token=XX
        comparison type=oneof since=6.2.0 flags=optional
          gt type=pure-token token=GT
          lt type=pure-token token=LT
        change type=pure-token token=CH since=3.0.2 flags=optional
        increment type=pure-token token=INCR since=3.0.2 flags=optional
        score_member type=block flags=multiple
          score type=double
          member type=string
    ");

// ---------------------------------------------------------------------------------------
// Lookups

/// The sorted set at `key` for reading, counted in keyspace hits/misses. Ok(None) if missing.
pub fn read_zset<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a ZSet>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get(key, now) {
        None => Ok(None),
        Some(e) => e.as_zset().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// The sorted set at `key` for modification. Ok(None) if missing.
pub fn zset_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut ZSet>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        None => Ok(None),
        Some(e) => e.as_zset_mut().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// Replaces `key` with `z` (any previous value and TTL go, as Redis's setKey) and fires
/// `event`, or deletes it when `z` is empty ("del" if there was one). True if the key
/// existed or now exists (something was written).
pub fn store_result(ctx: &mut Ctx, key: &[u8], z: ZSet, event: &'static str) -> bool {
    let now = ctx.now_ms;
    if z.is_empty() {
        let existed = ctx.db().remove(key, now);
        if existed {
            ctx.notify(notify::GENERIC, "del", key);
        }
        existed
    } else {
        ctx.db().set(key, Value::ZSet(Box::new(z)), 0, now);
        ctx.notify(notify::ZSET, event, key);
        true
    }
}

/// Deletes `key` when its sorted set became empty, with Redis's "del" event (after the
/// command's own).
fn delete_if_empty(ctx: &mut Ctx, key: &[u8], empty: bool) {
    if empty {
        let now = ctx.now_ms;
        ctx.db().remove(key, now);
        ctx.notify(notify::GENERIC, "del", key);
    }
}

// ---------------------------------------------------------------------------------------
// Parsing

pub const ERR_NAN: &str = "ERR resulting score is not a number (NaN)";
const ERR_MINMAX_FLOAT: &str = "ERR min or max is not a float";
const ERR_MINMAX_LEX: &str = "ERR min or max not valid string range item";

/// A score argument as Redis's `getDoubleFromObject` reads it (strtod): decimal, exponent
/// and hex forms, "inf"/"infinity" with a sign; no spaces, no NaN, and no overflow to
/// infinity or underflow to zero (strtod's ERANGE; subnormal results are accepted).
pub fn parse_score(a: &[u8]) -> Result<f64, Frame> {
    let v = parse_f64(a)?;
    let text = a.to_ascii_lowercase();
    let digits = text.strip_prefix(b"-").or_else(|| text.strip_prefix(b"+")).unwrap_or(&text);
    if v.is_infinite() && !digits.starts_with(b"inf") {
        return Err(err(ERR_NOT_FLOAT));
    }
    if v == 0.0 {
        let (hex, body) = match digits.strip_prefix(b"0x") {
            Some(rest) => (true, rest),
            None => (false, digits),
        };
        let mantissa = body.split(|&c| c == if hex { b'p' } else { b'e' }).next().unwrap_or(&[]);
        let nonzero = mantissa.iter().any(|&c| c.is_ascii_hexdigit() && c != b'0' && (hex || c.is_ascii_digit()));
        if nonzero {
            return Err(err(ERR_NOT_FLOAT));
        }
    }
    Ok(v)
}

/// A score range bound as Redis's `zslParseRange` reads it: `(` for exclusive, then strtod
/// with only the end checked (leading spaces, overflow and an empty text are accepted).
fn parse_range_bound(a: &[u8]) -> Option<(f64, bool)> {
    let (ex, text) = match a.first() {
        Some(b'(') => (true, &a[1..]),
        _ => (false, a),
    };
    if text.is_empty() {
        return Some((0.0, ex));
    }
    let trimmed = {
        let start = text.iter().position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')).unwrap_or(text.len());
        &text[start..]
    };
    if trimmed.is_empty() || trimmed.last().is_some_and(|c| c.is_ascii_whitespace()) {
        return None;
    }
    let v = parse_f64(trimmed).ok()?;
    Some((v, ex))
}

/// A score range: members with min (<|<=) score (<|<=) max.
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    min: f64,
    min_ex: bool,
    max: f64,
    max_ex: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Frame> {
        match (parse_range_bound(min), parse_range_bound(max)) {
            (Some((min, min_ex)), Some((max, max_ex))) => Ok(ScoreRange { min, min_ex, max, max_ex }),
            _ => Err(err(ERR_MINMAX_FLOAT)),
        }
    }

    /// The ascending ranks `start..end` of the members in range (empty when end <= start).
    pub fn ranks(&self, z: &ZSet) -> (usize, usize) {
        let r = *self;
        let start = z.rank_where(|s, _| if r.min_ex { s <= r.min } else { s < r.min });
        let end = z.rank_where(|s, _| if r.max_ex { s < r.max } else { s <= r.max });
        (start, end.max(start))
    }
}

#[derive(Clone, Debug)]
enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

impl LexBound {
    fn parse(a: &[u8]) -> Option<LexBound> {
        match a.first()? {
            b'+' if a.len() == 1 => Some(LexBound::PosInf),
            b'-' if a.len() == 1 => Some(LexBound::NegInf),
            b'(' => Some(LexBound::Excl(a[1..].to_vec())),
            b'[' => Some(LexBound::Incl(a[1..].to_vec())),
            _ => None,
        }
    }
}

/// A lexicographical range (ZRANGEBYLEX): meaningful when every member has the same score.
#[derive(Clone, Debug)]
pub struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, Frame> {
        match (LexBound::parse(min), LexBound::parse(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(err(ERR_MINMAX_LEX)),
        }
    }

    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        let start = z.rank_where(|_, m| match &self.min {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(x) => m < x.as_slice(),
            LexBound::Excl(x) => m <= x.as_slice(),
        });
        let end = z.rank_where(|_, m| match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(x) => m <= x.as_slice(),
            LexBound::Excl(x) => m < x.as_slice(),
        });
        (start, end.max(start))
    }
}

/// Redis's rank range rules (ZRANGE, ZREMRANGEBYRANK): negative indexes from the end,
/// clamped; the ascending ranks `start..end`, empty if nothing is in range.
fn rank_range(start: i64, end: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return (0, 0);
    }
    if end >= len {
        end = len - 1;
    }
    (start as usize, end as usize + 1)
}

fn pair(m: &[u8], s: f64) -> (Frame, Frame) {
    (bulk(m), Frame::Score(s))
}

// ---------------------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK

#[derive(Clone, Copy, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
}

/// What one zsetAdd did.
enum Added {
    New(f64),
    Updated(f64),
    Same(f64),
    Nop,
}

/// Redis's `zsetAdd` on an existing set: NX/XX/GT/LT/INCR for one member. Err on a NaN result.
fn zset_add(z: &mut ZSet, member: &[u8], score: f64, f: AddFlags, limits: &EncodingLimits) -> Result<Added, ()> {
    match z.score(member) {
        Some(cur) => {
            if f.nx {
                return Ok(Added::Nop);
            }
            let score = if f.incr { score + cur } else { score };
            if score.is_nan() {
                return Err(());
            }
            if (f.lt && score >= cur) || (f.gt && score <= cur) {
                return Ok(Added::Nop);
            }
            if score != cur {
                z.insert(member, score, limits);
                Ok(Added::Updated(score))
            } else {
                Ok(Added::Same(score))
            }
        }
        None if f.xx => Ok(Added::Nop),
        None => {
            z.insert(member, score, limits);
            Ok(Added::New(score))
        }
    }
}

pub fn zadd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let mut f = AddFlags::default();
    let mut ch = false;
    let mut at = 2;
    while at < a.len() {
        let opt = &a[at];
        if is(opt, "nx") {
            f.nx = true;
        } else if is(opt, "xx") {
            f.xx = true;
        } else if is(opt, "ch") {
            ch = true;
        } else if is(opt, "incr") {
            f.incr = true;
        } else if is(opt, "gt") {
            f.gt = true;
        } else if is(opt, "lt") {
            f.lt = true;
        } else {
            break;
        }
        at += 1;
    }
    let elements = a.len() - at;
    if elements % 2 == 1 || elements == 0 {
        return err(ERR_SYNTAX);
    }
    if f.nx && f.xx {
        return err("ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && elements > 2 {
        return err("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(elements / 2);
    for pair in a[at..].chunks(2) {
        match parse_score(&pair[0]) {
            Ok(s) => scores.push(s),
            Err(e) => return e,
        }
    }
    add_generic(ctx, &a[1], &a[at..], &scores, f, ch)
}

fn add_generic(ctx: &mut Ctx, key: &[u8], pairs: &[Arg], scores: &[f64], f: AddFlags, ch: bool) -> Frame {
    let limits = ctx.zset_limits;
    let created = match zset_mut(ctx, key) {
        Err(e) => return e,
        Ok(Some(_)) => false,
        Ok(None) if f.xx => {
            return ctx.unchanged(if f.incr { Frame::Null } else { Frame::Integer(0) });
        }
        Ok(None) => {
            let now = ctx.now_ms;
            ctx.db().set(key, Value::ZSet(Box::default()), 0, now);
            true
        }
    };
    let Ok(Some(z)) = zset_mut(ctx, key) else { return err("ERR internal error: key vanished") };
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0);
    let mut last = 0.0;
    for (pair, &score) in pairs.chunks(2).zip(scores) {
        match zset_add(z, &pair[1], score, f, &limits) {
            Err(()) => {
                let changed = added + updated > 0;
                let empty = z.is_empty();
                delete_if_empty(ctx, key, empty);
                if !changed && !created {
                    ctx.modified_only(KeysModified::NONE);
                }
                return err(ERR_NAN);
            }
            Ok(Added::New(s)) => (added, processed, last) = (added + 1, processed + 1, s),
            Ok(Added::Updated(s)) => (updated, processed, last) = (updated + 1, processed + 1, s),
            Ok(Added::Same(s)) => (processed, last) = (processed + 1, s),
            Ok(Added::Nop) => {}
        }
    }
    debug_assert!(!z.is_empty() || !created);
    let reply = if f.incr {
        if processed > 0 {
            Frame::Score(last)
        } else {
            Frame::Null
        }
    } else {
        Frame::Integer(if ch { added + updated } else { added })
    };
    if added + updated == 0 {
        return ctx.unchanged(reply);
    }
    // ZINCRBY and ZADD INCR fire "zincr"; GEOADD, which runs ZADD, fires "zadd" as in Redis.
    ctx.notify(notify::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    reply
}

fn zincrby(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let score = match parse_score(&a[2]) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let f = AddFlags { incr: true, ..AddFlags::default() };
    add_generic(ctx, &a[1], &a[2..4], &[score], f, false)
}

fn zrem(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (removed, empty) = match zset_mut(ctx, &a[1]) {
        Ok(Some(z)) => (a[2..].iter().filter(|m| z.remove(m).is_some()).count(), z.is_empty()),
        Ok(None) => return ctx.unchanged(Frame::Integer(0)),
        Err(e) => return e,
    };
    if removed == 0 {
        return ctx.unchanged(Frame::Integer(0));
    }
    ctx.notify(notify::ZSET, "zrem", &a[1]);
    delete_if_empty(ctx, &a[1], empty);
    Frame::Integer(removed as i64)
}

fn zcard(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_zset(ctx, &a[1]) {
        Ok(z) => Frame::Integer(z.map_or(0, ZSet::len) as i64),
        Err(e) => e,
    }
}

fn zscore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_zset(ctx, &a[1]) {
        Ok(z) => z.and_then(|z| z.score(&a[2])).map_or(Frame::Null, Frame::Score),
        Err(e) => e,
    }
}

fn zmscore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_zset(ctx, &a[1]) {
        Ok(z) => Frame::Array(a[2..].iter().map(|m| z.and_then(|z| z.score(m)).map_or(Frame::Null, Frame::Score)).collect()),
        Err(e) => e,
    }
}

fn rank_generic(ctx: &mut Ctx, a: &[Arg], rev: bool) -> Frame {
    match read_zset(ctx, &a[1]) {
        Ok(Some(z)) => match z.rank(&a[2]) {
            Some(r) => Frame::Integer(if rev { z.len() - 1 - r } else { r } as i64),
            None => Frame::Null,
        },
        Ok(None) => Frame::Null,
        Err(e) => e,
    }
}

fn zrank(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    rank_generic(ctx, a, false)
}

fn zrevrank(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    rank_generic(ctx, a, true)
}

fn zcount(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let range = match ScoreRange::parse(&a[2], &a[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read_zset(ctx, &a[1]) {
        Ok(Some(z)) => {
            let (start, end) = range.ranks(z);
            Frame::Integer((end - start) as i64)
        }
        Ok(None) => Frame::Integer(0),
        Err(e) => e,
    }
}

fn zlexcount(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let range = match LexRange::parse(&a[2], &a[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read_zset(ctx, &a[1]) {
        Ok(Some(z)) => {
            let (start, end) = range.ranks(z);
            Frame::Integer((end - start) as i64)
        }
        Ok(None) => Frame::Integer(0),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------
// The ZRANGE family

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

enum Range {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// A parsed ZRANGE-like request.
struct RangeRequest {
    range: Range,
    rev: bool,
    with_scores: bool,
    offset: i64,
    limit: i64,
}

/// Redis's `zrangeGenericCommand` argument parsing: `src` at `a[src]`, min and max after it,
/// then options; `store` forbids WITHSCORES. Preset type/direction for the legacy commands.
fn parse_range_request(a: &[Arg], src: usize, store: bool, mut kind: RangeType, mut dir: Direction) -> Result<RangeRequest, Frame> {
    let (mut with_scores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = src + 3;
    while j < a.len() {
        let left = a.len() - j - 1;
        let opt = &a[j];
        if !store && is(opt, "withscores") {
            with_scores = true;
        } else if is(opt, "limit") && left >= 2 {
            offset = parse_i64(&a[j + 1])?;
            limit = parse_i64(&a[j + 2])?;
            j += 2;
        } else if dir == Direction::Auto && is(opt, "rev") {
            dir = Direction::Reverse;
        } else if kind == RangeType::Auto && is(opt, "bylex") {
            kind = RangeType::Lex;
        } else if kind == RangeType::Auto && is(opt, "byscore") {
            kind = RangeType::Score;
        } else {
            return Err(err(ERR_SYNTAX));
        }
        j += 1;
    }
    let rev = dir == Direction::Reverse;
    if kind == RangeType::Auto {
        kind = RangeType::Rank;
    }
    // As Redis: only a count other than -1 counts as a LIMIT here.
    if limit != -1 && kind == RangeType::Rank {
        return Err(err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if with_scores && kind == RangeType::Lex {
        return Err(err("ERR syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut min, mut max) = (&a[src + 1], &a[src + 2]);
    if rev && kind != RangeType::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let range = match kind {
        RangeType::Score => Range::Score(ScoreRange::parse(min, max)?),
        RangeType::Lex => Range::Lex(LexRange::parse(min, max)?),
        _ => Range::Rank(parse_i64(min)?, parse_i64(max)?),
    };
    Ok(RangeRequest { range, rev, with_scores, offset, limit })
}

/// The members a range request selects, in reply order.
fn select<'a>(z: &'a ZSet, req: &RangeRequest) -> Vec<(&'a [u8], f64)> {
    let (start, end, limited) = match &req.range {
        Range::Rank(s, e) => {
            let (start, end) = rank_range(*s, *e, z.len());
            if req.rev {
                // Reverse ranks count from the end.
                (z.len() - end, z.len() - start, false)
            } else {
                (start, end, false)
            }
        }
        Range::Score(r) => {
            let (s, e) = r.ranks(z);
            (s, e, true)
        }
        Range::Lex(r) => {
            let (s, e) = r.ranks(z);
            (s, e, true)
        }
    };
    let (skip, take) = if limited {
        if req.offset < 0 || (req.offset > 0 && req.offset as u64 >= z.len() as u64) {
            return Vec::new();
        }
        (req.offset as usize, if req.limit < 0 { usize::MAX } else { req.limit as usize })
    } else {
        (0, usize::MAX)
    };
    let it = z.range(start, end);
    if req.rev {
        it.rev().skip(skip).take(take).collect()
    } else {
        it.skip(skip).take(take).collect()
    }
}

fn range_reply(ctx: &mut Ctx, a: &[Arg], kind: RangeType, dir: Direction) -> Frame {
    let req = match parse_range_request(a, 1, false, kind, dir) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let z = match read_zset(ctx, &a[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Frame::Array(Vec::new()),
        Err(e) => return e,
    };
    let members = select(z, &req);
    if req.with_scores {
        Frame::Pairs(members.into_iter().map(|(m, s)| pair(m, s)).collect())
    } else {
        // One buffer for the whole reply (Frame::Bulks), not an allocation per member.
        let bytes = members.iter().map(|(m, _)| m.len()).sum();
        let mut out = BulksBuilder::with_capacity(members.len(), bytes);
        for (m, _) in members {
            out.push(m);
        }
        out.finish()
    }
}

fn zrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_reply(ctx, a, RangeType::Auto, Direction::Auto)
}

fn zrevrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_reply(ctx, a, RangeType::Rank, Direction::Reverse)
}

fn zrangebyscore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_reply(ctx, a, RangeType::Score, Direction::Forward)
}

fn zrevrangebyscore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_reply(ctx, a, RangeType::Score, Direction::Reverse)
}

fn zrangebylex(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_reply(ctx, a, RangeType::Lex, Direction::Forward)
}

fn zrevrangebylex(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_reply(ctx, a, RangeType::Lex, Direction::Reverse)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
fn zrangestore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let req = match parse_range_request(a, 2, true, RangeType::Auto, Direction::Auto) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let limits = ctx.zset_limits;
    let result = match read_zset(ctx, &a[2]) {
        Ok(Some(z)) => {
            let mut picked = select(z, &req);
            // As Redis 7.0 (zrangeResultBeginStore): a rank range longer than a listpack
            // may be is built as a skiplist from the start (scores kept exactly, -0
            // included); anything else is added member by member to a listpack.
            if matches!(req.range, Range::Rank(..)) && picked.len() > limits.max_listpack_entries {
                if req.rev {
                    picked.reverse();
                }
                let items = picked.into_iter().map(|(m, s)| (m.to_vec(), s)).collect();
                match ZSet::from_sorted(items, &limits) {
                    Some(z) => z,
                    None => return err("ERR internal error: unsorted range"),
                }
            } else {
                let mut out = ZSet::new();
                for (m, s) in picked {
                    out.insert(m, s, &limits);
                }
                out
            }
        }
        Ok(None) => ZSet::new(),
        Err(e) => return e,
    };
    let card = result.len();
    // As Redis: only the destination is signalled, and an empty result only if it deleted one.
    let wrote = store_result(ctx, &a[1], result, "zrangestore");
    ctx.modified_only(if wrote { KeysModified::key(0) } else { KeysModified::NONE });
    if !wrote {
        ctx.propagate_nothing();
    }
    Frame::Integer(card as i64)
}

// ---------------------------------------------------------------------------------------
// ZREMRANGEBY*

fn remove_ranks(ctx: &mut Ctx, key: &[u8], event: &'static str, ranks: impl FnOnce(&ZSet) -> (usize, usize)) -> Frame {
    let (removed, empty) = match zset_mut(ctx, key) {
        Ok(Some(z)) => {
            let (start, end) = ranks(z);
            let removed = if end > start { z.remove_range(start, end).len() } else { 0 };
            (removed, z.is_empty())
        }
        Ok(None) => return ctx.unchanged(Frame::Integer(0)),
        Err(e) => return e,
    };
    if removed == 0 {
        return ctx.unchanged(Frame::Integer(0));
    }
    ctx.notify(notify::ZSET, event, key);
    delete_if_empty(ctx, key, empty);
    Frame::Integer(removed as i64)
}

fn zremrangebyrank(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (start, end) = match (parse_i64(&a[2]), parse_i64(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    remove_ranks(ctx, &a[1], "zremrangebyrank", |z| rank_range(start, end, z.len()))
}

fn zremrangebyscore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match ScoreRange::parse(&a[2], &a[3]) {
        Ok(r) => remove_ranks(ctx, &a[1], "zremrangebyscore", |z| r.ranks(z)),
        Err(e) => e,
    }
}

fn zremrangebylex(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match LexRange::parse(&a[2], &a[3]) {
        Ok(r) => remove_ranks(ctx, &a[1], "zremrangebylex", |z| r.ranks(z)),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN

fn zrandmember(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let count = match a.get(2).map(|c| parse_random_count(c)) {
        Some(Ok(count)) => Some(count),
        Some(Err(e)) => return e,
        None => None,
    };
    let with_scores = match a.len() {
        5.. => return err(ERR_SYNTAX),
        4 if !is(&a[3], "withscores") => return err(ERR_SYNTAX),
        4 => true,
        _ => false,
    };
    if let Some(count) = count {
        if with_scores && count.unsigned_abs() > (i64::MAX / 2) as u64 {
            return err("ERR value is out of range");
        }
    }
    let z = match read_zset(ctx, &a[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    if z.is_some() && count.is_some_and(|c| c < 0 && c.unsigned_abs() > RANDOM_WITH_REPEATS_MAX) {
        return err_too_many_repeats();
    }
    let mut rng = rand::thread_rng();
    let picked = match (z, count) {
        (None, None) => return Frame::Null,
        (Some(z), None) => return z.random(&mut rng).map_or(Frame::Null, |(m, _)| bulk(m)),
        (None, Some(_)) => return Frame::Array(Vec::new()),
        // As Redis 7.0 (which walks a listpack from its tail): the whole set, highest first.
        (Some(z), Some(c)) if c >= 0 && c as u64 >= z.len() as u64 => z.iter().rev().collect(),
        (Some(z), Some(c)) if c >= 0 => z.random_distinct(c as usize, &mut rng),
        (Some(z), Some(c)) => z.random_with_repeats(c.unsigned_abs() as usize, &mut rng),
    };
    if with_scores {
        Frame::Pairs(picked.into_iter().map(|(m, s)| pair(m, s)).collect())
    } else {
        Frame::Array(picked.into_iter().map(|(m, _)| bulk(m)).collect())
    }
}

/// A score as ZSCAN replies it: a bulk string of `%.17g` in both protocols (Redis builds the
/// reply from strings).
fn score_text(s: f64) -> Frame {
    let mut out = Vec::new();
    abacus_protocol::format_double_g17(s, &mut out);
    Frame::Bulk(out.into())
}

fn zscan(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let cursor = match parse_cursor(&a[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let z = match read_zset(ctx, &a[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match ScanOpts::parse(&a[3..]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (next, members) = z.scan(cursor, opts.count);
    scan_reply(next, members.into_iter().filter(|(m, _)| opts.matches(m)).flat_map(|(m, s)| [bulk(m), score_text(s)]).collect())
}

// ---------------------------------------------------------------------------------------
// ZPOPMIN, ZPOPMAX, ZMPOP and the blocking commands' entry point

/// What [`pop_from_first`] popped: the key's position in `keys`, and the members in order.
pub struct Popped {
    pub key_index: usize,
    pub members: Vec<(Vec<u8>, f64)>,
}

/// Pops up to `count` (>= 1) lowest (or highest, `max`) members from the first key of `keys`
/// that holds a sorted set, deleting it if emptied; missing keys are skipped, a key of another
/// type is WRONGTYPE (Redis checks in order and stops at the first existing key). `Ok(None)`
/// when every key is missing. States the effect (ZPOPMIN/ZPOPMAX key count) and that only the
/// popped key was modified. For ZPOPMIN/ZPOPMAX/ZMPOP here and BZPOPMIN/BZPOPMAX/BZMPOP.
pub fn pop_from_first(ctx: &mut Ctx, keys: &[Arg], max: bool, count: usize) -> Result<Option<Popped>, Frame> {
    let serving = ctx.serving();
    for (key_index, key) in keys.iter().enumerate() {
        if !ctx.may_serve_from(key) {
            continue;
        }
        let found = match zset_mut(ctx, key) {
            Err(_) if serving => continue,
            found => found?,
        };
        let (members, empty) = match found {
            None => continue,
            Some(z) => {
                let n = count.min(z.len());
                let members = if max {
                    let len = z.len();
                    let mut m = z.remove_range(len - n, len);
                    m.reverse();
                    m
                } else {
                    z.remove_range(0, n)
                };
                (members, z.is_empty())
            }
        };
        ctx.notify(notify::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        delete_if_empty(ctx, key, empty);
        ctx.propagate_as(Call::of(if max { &ZPOPMAX } else { &ZPOPMIN }).arg(Bytes::copy_from_slice(key)).arg(Bytes::from(int_bytes(members.len() as i64))));
        ctx.modified_only(KeysModified::key(key_index));
        return Ok(Some(Popped { key_index, members }));
    }
    ctx.propagate_nothing();
    ctx.modified_only(KeysModified::NONE);
    Ok(None)
}

/// BZPOPMIN/BZPOPMAX's reply: [key, member, score].
pub fn bzpop_reply(key: &[u8], popped: &Popped) -> Frame {
    match popped.members.first() {
        Some((m, s)) => Frame::Array(vec![bulk(key), bulk(m), Frame::Score(*s)]),
        None => Frame::NullArray,
    }
}

/// ZMPOP/BZMPOP's reply: [key, [[member, score], ...]] (nested in both protocols).
pub fn zmpop_reply(key: &[u8], popped: &Popped) -> Frame {
    let items = popped.members.iter().map(|(m, s)| Frame::Array(vec![bulk(m), Frame::Score(*s)])).collect();
    Frame::Array(vec![bulk(key), Frame::Array(items)])
}

fn zpop(ctx: &mut Ctx, a: &[Arg], max: bool) -> Frame {
    if a.len() > 3 {
        return err(ERR_SYNTAX);
    }
    let count = match a.get(2) {
        None => None,
        // As Redis 7.0: one error text for a non-integer and a negative count.
        Some(c) => match parse_i64(c) {
            Ok(n) if n >= 0 => Some(n as u64),
            _ => return err("ERR value is out of range, must be positive"),
        },
    };
    if count == Some(0) {
        // As Redis 7.0: the key is type-checked before a zero count answers [].
        ctx.propagate_nothing();
        return match zset_mut(ctx, &a[1]) {
            Err(e) => e,
            Ok(_) => ctx.unchanged(Frame::Array(Vec::new())),
        };
    }
    let n = count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX));
    match pop_from_first(ctx, &a[1..2], max, n) {
        Err(e) => e,
        Ok(None) => Frame::Array(Vec::new()),
        Ok(Some(p)) => {
            if count.is_some() {
                Frame::Pairs(p.members.iter().map(|(m, s)| pair(m, *s)).collect())
            } else {
                Frame::Array(p.members.iter().flat_map(|(m, s)| [bulk(m), Frame::Score(*s)]).collect())
            }
        }
    }
}

fn zpopmin(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    zpop(ctx, a, false)
}

fn zpopmax(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    zpop(ctx, a, true)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: parses as Redis's zmpopGenericCommand.
/// Returns (keys, max, count) for ZMPOP and BZMPOP (`first` = index of numkeys).
pub fn parse_zmpop(a: &[Arg], first: usize) -> Result<(std::ops::Range<usize>, bool, usize), Frame> {
    let numkeys = match parse_i64(&a[first]) {
        Ok(n) if n >= 1 => n as u64,
        _ => return Err(err("ERR numkeys should be greater than 0")),
    };
    let where_at = (first as u64 + 1).saturating_add(numkeys);
    if where_at >= a.len() as u64 {
        return Err(err(ERR_SYNTAX));
    }
    let where_at = where_at as usize;
    let max = if is(&a[where_at], "min") {
        false
    } else if is(&a[where_at], "max") {
        true
    } else {
        return Err(err(ERR_SYNTAX));
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < a.len() {
        if count.is_none() && is(&a[j], "count") && j + 1 < a.len() {
            j += 1;
            match parse_i64(&a[j]) {
                Ok(n) if n >= 1 => count = Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => return Err(err("ERR count should be greater than 0")),
            }
        } else {
            return Err(err(ERR_SYNTAX));
        }
        j += 1;
    }
    Ok((first + 1..where_at, max, count.unwrap_or(1)))
}

fn zmpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (keys, max, count) = match parse_zmpop(a, 1) {
        Ok(p) => p,
        Err(e) => return e,
    };
    match pop_from_first(ctx, &a[keys.clone()], max, count) {
        Err(e) => e,
        Ok(None) => Frame::NullArray,
        Ok(Some(p)) => zmpop_reply(&a[keys.start + p.key_index], &p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_strtod_with_erange() {
        assert_eq!(parse_score(b"1.5").unwrap(), 1.5);
        assert_eq!(parse_score(b"-inf").unwrap(), f64::NEG_INFINITY);
        assert_eq!(parse_score(b"+Infinity").unwrap(), f64::INFINITY);
        assert_eq!(parse_score(b"0x10").unwrap(), 16.0);
        assert!(parse_score(b"0").unwrap() == 0.0 && parse_score(b"-0.0e-999").is_ok());
        assert!(parse_score(b"1e-310").is_ok(), "subnormal");
        for bad in [&b"1e400"[..], b"1e-400", b"nan", b"", b" 1", b"1 ", b"1x", b"0x1p-2000"] {
            assert!(parse_score(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_range_bound(b"(1e400"), Some((f64::INFINITY, true)));
        assert_eq!(parse_range_bound(b" 2"), Some((2.0, false)));
        assert_eq!(parse_range_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_range_bound(b"[1"), None);
        assert_eq!(parse_range_bound(b"nan"), None);
    }

    #[test]
    fn a_key_never_holds_an_empty_sorted_set() {
        let mut dbs = vec![abacus_keyspace::Db::new()];
        let mut run = |line: &str| crate::testing::run_keyed(&mut dbs, &line.split(' ').map(str::as_bytes).collect::<Vec<_>>());
        for (line, reply) in [
            ("zadd z 1 a 2 b", Frame::Integer(2)),
            ("zrem z a b", Frame::Integer(2)),
            ("zadd z 1 a", Frame::Integer(1)),
            ("zpopmin z 5", Frame::Pairs(vec![(bulk(b"a"), Frame::Score(1.0))])),
            ("zadd z 1 a 2 b", Frame::Integer(2)),
            ("zremrangebyscore z -inf +inf", Frame::Integer(2)),
            ("zadd z 1 a", Frame::Integer(1)),
            ("zremrangebyrank z 0 -1", Frame::Integer(1)),
            ("zadd z 0 a", Frame::Integer(1)),
            ("zremrangebylex z - +", Frame::Integer(1)),
            ("zadd z 1 a", Frame::Integer(1)),
            ("zinterstore d 2 z nokey", Frame::Integer(0)),
            ("zrangestore d z 5 10", Frame::Integer(0)),
            ("zmpop 1 z max count 9", Frame::Array(vec![bulk(b"z"), Frame::Array(vec![Frame::Array(vec![bulk(b"a"), Frame::Score(1.0)])])])),
            ("zadd z xx 1 a", Frame::Integer(0)),
            ("zadd z xx incr 1 a", Frame::Null),
        ] {
            assert_eq!(run(line), reply, "{line}");
        }
        assert!(dbs[0].is_empty(), "{} keys left", dbs[0].len());
    }

    #[test]
    fn rank_ranges_follow_redis() {
        assert_eq!(rank_range(0, -1, 5), (0, 5));
        assert_eq!(rank_range(-100, 100, 5), (0, 5));
        assert_eq!(rank_range(3, 1, 5), (0, 0));
        assert_eq!(rank_range(5, 10, 5), (0, 0));
        assert_eq!(rank_range(-2, -1, 5), (3, 5));
    }
}
