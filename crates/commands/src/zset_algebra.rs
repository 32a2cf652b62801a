//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms, and ZINTERCARD.
//!
//! Operands may be sorted sets or plain sets (a set member scores 1), as in Redis. The
//! arithmetic follows Redis 7.0's `zunionInterDiffGenericCommand` step for step, so results
//! agree bit for bit: weights multiply each score (a NaN product, 0 x inf, becomes 0), SUM
//! turns inf + -inf into 0, MIN/MAX compare with `<`/`>`; the operands are taken smallest
//! first (a stable sort by cardinality) for union and intersection, and the first operand
//! stays first for a difference.
//!
//! Results are computed as a sorted `Vec` and only built into a `ZSet` for the STORE forms,
//! where the listpack's rules apply (a small result is a listpack, which has no -0); a reply
//! shows the scores as computed, as Redis's temporary skiplist does.
//!
//! Keys on several shards: like `set_algebra.rs`, these are single-shard handlers; `exec.rs`
//! checks the operands (and the destination: `Spec::key_indexes` lists it first) out into a
//! scratch keyspace. The numkeys position is declared with `Spec::with_numkeys`.

use std::collections::HashMap;

use abacus_collections::{IdSet, ZSet};
use abacus_protocol::{Arg, Frame};

use super::args::*;
use super::zsets::{parse_score, store_result, G};
use crate::command::flags::*;
use crate::command::Spec;
use crate::ctx::{Ctx, KeysModified};

const DST: (i32, i32, i32) = (1, 1, 1);
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("zunion", -3, READONLY, NONE, zunion, G, "Returns the union of multiple sorted sets.").with_numkeys(1)
        .docs("6.2.0", "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.")
        .args("
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            weight type=integer token=WEIGHTS flags=optional,multiple
            aggregate type=oneof token=AGGREGATE flags=optional
              sum type=pure-token token=SUM
              min type=pure-token token=MIN
              max type=pure-token token=MAX
            withscores type=pure-token token=WITHSCORES flags=optional
        "),
    Spec::keyed("zinter", -3, READONLY, NONE, zinter, G, "Returns the intersect of multiple sorted sets.").with_numkeys(1)
        .docs("6.2.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.")
        .args("
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            weight type=integer token=WEIGHTS flags=optional,multiple
            aggregate type=oneof token=AGGREGATE flags=optional
              sum type=pure-token token=SUM
              min type=pure-token token=MIN
              max type=pure-token token=MAX
            withscores type=pure-token token=WITHSCORES flags=optional
        "),
    Spec::keyed("zdiff", -3, READONLY, NONE, zdiff, G, "Returns the difference between multiple sorted sets.").with_numkeys(1)
        .docs("6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.")
        .args("
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            withscores type=pure-token token=WITHSCORES flags=optional
        "),
    Spec::keyed("zunionstore", -4, WRITE | DENYOOM, DST, zunionstore, G, "Stores the union of multiple sorted sets in a key.").with_numkeys(2)
        .docs("2.0.0", "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.")
        .key_specs("OW update; RO access")
        .args("
            destination type=key key_spec_index=0
            numkeys type=integer
            key type=key key_spec_index=1 flags=multiple
            weight type=integer token=WEIGHTS flags=optional,multiple
            aggregate type=oneof token=AGGREGATE flags=optional
              sum type=pure-token token=SUM
              min type=pure-token token=MIN
              max type=pure-token token=MAX
        "),
    Spec::keyed("zinterstore", -4, WRITE | DENYOOM, DST, zinterstore, G, "Stores the intersect of multiple sorted sets in a key.").with_numkeys(2)
        .docs("2.0.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.")
        .key_specs("OW update; RO access")
        .args("
            destination type=key key_spec_index=0
            numkeys type=integer
            key type=key key_spec_index=1 flags=multiple
            weight type=integer token=WEIGHTS flags=optional,multiple
            aggregate type=oneof token=AGGREGATE flags=optional
              sum type=pure-token token=SUM
              min type=pure-token token=MIN
              max type=pure-token token=MAX
        "),
    Spec::keyed("zdiffstore", -4, WRITE | DENYOOM, DST, zdiffstore, G, "Stores the difference of multiple sorted sets in a key.").with_numkeys(2)
        .docs("6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.")
        .key_specs("OW update; RO access")
        .args("
            destination type=key key_spec_index=0
            numkeys type=integer
            key type=key key_spec_index=1 flags=multiple
        "),
    Spec::keyed("zintercard", -3, READONLY, NONE, zintercard, G, "Returns the number of members of the intersect of multiple sorted sets.").with_numkeys(1)
        .docs("7.0.0", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.")
        .args("
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            limit type=integer token=LIMIT flags=optional
        "),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, val: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += val;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

/// One operand: a sorted set or a set (members score 1), or missing (empty).
#[derive(Clone, Copy)]
enum Source<'a> {
    Missing,
    Z(&'a ZSet),
    S(&'a IdSet),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::Z(z) => z.len(),
            Source::S(s) => s.len(),
        }
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Z(z) => z.score(m),
            Source::S(s) => s.contains(m).then_some(1.0),
        }
    }

    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Source::Missing => {}
            Source::Z(z) => z.iter().for_each(|(m, s)| f(m, s)),
            Source::S(s) => s.iter().for_each(|m| f(&m, 1.0)),
        }
    }

    fn same_as(&self, other: &Source<'_>) -> bool {
        match (self, other) {
            (Source::Z(a), Source::Z(b)) => std::ptr::eq(*a, *b),
            (Source::S(a), Source::S(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

/// A parsed call: the operand keys' range in the arguments, and the options.
struct Call {
    keys: std::ops::Range<usize>,
    weights: Vec<f64>,
    how: Aggregate,
    with_scores: bool,
    limit: usize,
}

/// Numkeys (at `a[at]`), then the keys are type-checked (before the options are parsed, as
/// Redis does), then the options.
fn parse_and_check(ctx: &mut Ctx, a: &[Arg], at: usize, op: Op, store: bool, card_only: bool) -> Result<Call, Frame> {
    let setnum = parse_i64(&a[at])?;
    if setnum < 1 {
        let name = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
        return Err(Frame::error(format!("ERR at least 1 input key is needed for '{name}' command")));
    }
    if setnum as u64 > (a.len() - at - 1) as u64 {
        return Err(err(ERR_SYNTAX));
    }
    let keys = at + 1..at + 1 + setnum as usize;
    let now = ctx.now_ms;
    let db = ctx.db();
    for key in &a[keys.clone()] {
        // Read lookups, stores included (Redis 7.0's lookupKeyRead: hits, misses, "keymiss").
        let found = db.get(key, now);
        if found.is_some_and(|e| e.as_zset().is_none() && e.as_set().is_none()) {
            return Err(err(ERR_WRONGTYPE));
        }
    }
    let n = keys.len();
    let mut call = Call { keys, weights: vec![1.0; n], how: Aggregate::Sum, with_scores: false, limit: 0 };
    let mut j = call.keys.end;
    while j < a.len() {
        let remaining = a.len() - j;
        let opt = &a[j];
        if op != Op::Diff && !card_only && remaining > n && is(opt, "weights") {
            for (i, w) in a[j + 1..j + 1 + n].iter().enumerate() {
                call.weights[i] = parse_score(w).map_err(|_| err("ERR weight value is not a float"))?;
            }
            j += 1 + n;
        } else if op != Op::Diff && !card_only && remaining >= 2 && is(opt, "aggregate") {
            call.how = match &a[j + 1] {
                v if is(v, "sum") => Aggregate::Sum,
                v if is(v, "min") => Aggregate::Min,
                v if is(v, "max") => Aggregate::Max,
                _ => return Err(err(ERR_SYNTAX)),
            };
            j += 2;
        } else if !store && !card_only && is(opt, "withscores") {
            call.with_scores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(opt, "limit") {
            call.limit = match parse_i64(&a[j + 1]) {
                Ok(l) if l >= 0 => usize::try_from(l).unwrap_or(usize::MAX),
                _ => return Err(err("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(err(ERR_SYNTAX));
        }
    }
    Ok(call)
}

fn sources<'a>(ctx: &'a mut Ctx, a: &[Arg], call: &Call) -> Vec<(Source<'a>, f64)> {
    let now = ctx.now_ms;
    let db = &*ctx.db();
    a[call.keys.clone()]
        .iter()
        .zip(&call.weights)
        .map(|(key, &w)| {
            let src = match db.get_shared(key, now) {
                None => Source::Missing,
                Some(e) => match (e.as_zset(), e.as_set()) {
                    (Some(z), _) => Source::Z(z),
                    (None, Some(s)) => Source::S(s),
                    _ => Source::Missing,
                },
            };
            (src, w)
        })
        .collect()
}

fn weighted(score: f64, weight: f64) -> f64 {
    let v = score * weight;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// The result in Redis's order, (member, score); or only its cardinality (ZINTERCARD).
fn compute(mut srcs: Vec<(Source<'_>, f64)>, op: Op, how: Aggregate, card_limit: Option<usize>) -> (Vec<(Vec<u8>, f64)>, usize) {
    if op != Op::Diff {
        srcs.sort_by_key(|(s, _)| s.len());
    }
    let mut out: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut card = 0usize;
    match op {
        Op::Inter => {
            let (first, w0) = srcs[0];
            if first.len() > 0 {
                let mut done = false;
                first.for_each(|m, s| {
                    if done {
                        return;
                    }
                    let mut score = weighted(s, w0);
                    for (src, w) in &srcs[1..] {
                        let value = if src.same_as(&first) { Some(s * w) } else { src.score(m).map(|v| v * w) };
                        match value {
                            Some(v) => aggregate(&mut score, v, how),
                            None => return,
                        }
                    }
                    match card_limit {
                        Some(limit) => {
                            card += 1;
                            if limit > 0 && card >= limit {
                                done = true;
                            }
                        }
                        None => out.push((m.to_vec(), score)),
                    }
                });
            }
        }
        Op::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (src, w) in &srcs {
                src.for_each(|m, s| {
                    let score = weighted(s, *w);
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, score, how),
                        None => {
                            acc.insert(m.to_vec(), score);
                        }
                    }
                });
            }
            out = acc.into_iter().collect();
        }
        Op::Diff => {
            let (first, _) = srcs[0];
            first.for_each(|m, s| {
                if !srcs[1..].iter().any(|(o, _)| o.score(m).is_some()) {
                    out.push((m.to_vec(), s));
                }
            });
        }
    }
    out.sort_by(|(ma, sa), (mb, sb)| sa.partial_cmp(sb).unwrap_or(std::cmp::Ordering::Equal).then_with(|| ma.cmp(mb)));
    (out, card)
}

fn reply(ctx: &mut Ctx, a: &[Arg], op: Op) -> Frame {
    let call = match parse_and_check(ctx, a, 1, op, false, false) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let how = call.how;
    let with_scores = call.with_scores;
    let (result, _) = compute(sources(ctx, a, &call), op, how, None);
    if with_scores {
        Frame::Pairs(result.into_iter().map(|(m, s)| (Frame::Bulk(m.into()), Frame::Score(s))).collect())
    } else {
        Frame::Array(result.into_iter().map(|(m, _)| Frame::Bulk(m.into())).collect())
    }
}

fn store(ctx: &mut Ctx, a: &[Arg], op: Op) -> Frame {
    let call = match parse_and_check(ctx, a, 2, op, true, false) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let limits = ctx.zset_limits;
    let (result, _) = compute(sources(ctx, a, &call), op, call.how, None);
    let Some(z) = ZSet::from_sorted(result, &limits) else { return err("ERR internal error: unsorted result") };
    let card = z.len();
    // As Redis: the destination is signalled, never the sources; an empty result only if it
    // deleted a destination.
    let event = match op {
        Op::Union => "zunionstore",
        Op::Inter => "zinterstore",
        Op::Diff => "zdiffstore",
    };
    let wrote = store_result(ctx, &a[1], z, event);
    ctx.modified_only(if wrote { KeysModified::key(0) } else { KeysModified::NONE });
    if !wrote {
        ctx.propagate_nothing();
    }
    Frame::Integer(card as i64)
}

fn zunion(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    reply(ctx, a, Op::Union)
}

fn zinter(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    reply(ctx, a, Op::Inter)
}

fn zdiff(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    reply(ctx, a, Op::Diff)
}

fn zunionstore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    store(ctx, a, Op::Union)
}

fn zinterstore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    store(ctx, a, Op::Inter)
}

fn zdiffstore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    store(ctx, a, Op::Diff)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]: counts without building the result.
fn zintercard(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let call = match parse_and_check(ctx, a, 1, Op::Inter, false, true) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let limit = call.limit;
    let (_, card) = compute(sources(ctx, a, &call), Op::Inter, Aggregate::Sum, Some(limit));
    Frame::Integer(card as i64)
}
