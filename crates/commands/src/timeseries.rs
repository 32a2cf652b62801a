//! The time series family on one key, in RedisTimeSeries 1.10's dialect: TS.CREATE, TS.ALTER,
//! TS.ADD, TS.MADD, TS.INCRBY, TS.DECRBY, TS.DEL, TS.GET, TS.RANGE, TS.REVRANGE, TS.INFO,
//! TS.CREATERULE, TS.DELETERULE. (Multi-series commands: their shard side in `ts_filter.rs`
//! and `ts_waterfall.rs`, their fan-out and merge in the server's `cmd/ts_multi.rs`; range
//! options: `ts_range.rs`; the data structure: `abacus_collections::Series`.)
//!
//! Replies and error texts are RedisTimeSeries's, checked byte for byte against the module
//! (tests/e2e/test_timeseries.py runs the same requests against both when the module is
//! present). Options are keywords found anywhere after the fixed arguments, as the module
//! parses them.
//!
//! Compaction rules: a rule lives on its source series (destination key, aggregator, bucket,
//! alignment, and the start of the bucket still open). When a sample arrives in a later
//! bucket, the open bucket is folded from the source's own samples and written to the
//! destination; a sample that lands in an already closed bucket (backfill) folds that bucket
//! again and overwrites it. The destination must live on the source's shard, so TS.CREATERULE
//! requires both keys in one hash slot (a `{hash tag}`), as Redis Cluster does for any
//! multi-key command. Rules follow their keys through RENAME, DEL, COPY and RESTORE as the
//! module's do (`ts_links.rs`).
//!
//! Effects: TS.ADD `*`, TS.INCRBY/DECRBY without TIMESTAMP and TS.MADD `*` propagate the
//! timestamp they used, so replaying the log gives the same samples.

use abacus_collections::{bucket_start, AddError, Aggregator, DuplicatePolicy, Labels, Rule, Series};
use abacus_keyspace::{Db, Value};
use abacus_protocol::{Arg, Bytes, Frame};

use crate::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::ctx::{Call, Ctx};
use crate::ts_links;
use crate::ts_range::{self, find, samples_frame};

const K1: (i32, i32, i32) = (1, 1, 1);
const K2: (i32, i32, i32) = (1, 2, 1);
const G: &str = "timeseries";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("ts.create", -2, WRITE | DENYOOM, K1, ts_create, G, "Create a new time series")
        .abacus_docs("O(N) where N is the number of labels.")
        .key_specs("RW insert"),
    Spec::keyed("ts.alter", -2, WRITE | DENYOOM, K1, ts_alter, G, "Update the retention, chunk size, duplicate policy, and labels of an existing time series")
        .abacus_docs("O(N) where N is the number of labels."),
    Spec::keyed("ts.add", -4, WRITE | DENYOOM, K1, ts_add, G, "Append a sample to a time series")
        .abacus_docs("O(M) where M is the number of compaction rules, O(1) with none.")
        .key_specs("RW access insert"),
    TS_MADD,
    Spec::keyed("ts.incrby", -3, WRITE | DENYOOM, K1, ts_incrby, G, "Increase the value of the sample with the maximum existing timestamp, or create a new sample with a value equal to the value of the sample with the maximum existing timestamp with a given increment")
        .abacus_docs("O(M) where M is the number of compaction rules, O(1) with none.")
        .key_specs("RW access update"),
    Spec::keyed("ts.decrby", -3, WRITE | DENYOOM, K1, ts_decrby, G, "Decrease the value of the sample with the maximum existing timestamp, or create a new sample with a value equal to the value of the sample with the maximum existing timestamp with a given decrement")
        .abacus_docs("O(M) where M is the number of compaction rules, O(1) with none.")
        .key_specs("RW access update"),
    Spec::keyed("ts.del", 4, WRITE, K1, ts_del, G, "Delete all samples between two timestamps for a given time series")
        .abacus_docs("O(N) where N is the number of samples removed.")
        .key_specs("RW delete"),
    Spec::keyed("ts.get", -2, READONLY, K1, ts_get, G, "Get the sample with the highest timestamp from a given time series")
        .abacus_docs("O(1)"),
    Spec::keyed("ts.range", -4, READONLY, K1, ts_range, G, "Query a range in forward direction")
        .abacus_docs("O(N/C + M) where N is the number of samples, C the chunk size and M the samples returned."),
    Spec::keyed("ts.revrange", -4, READONLY, K1, ts_revrange, G, "Query a range in reverse direction")
        .abacus_docs("O(N/C + M) where N is the number of samples, C the chunk size and M the samples returned."),
    Spec::keyed("ts.info", -2, READONLY, K1, ts_info, G, "Returns information and statistics for a time series")
        .abacus_docs("O(1)"),
    Spec::keyed("ts.createrule", -6, WRITE, K2, ts_createrule, G, "Create a compaction rule")
        .abacus_docs("O(1)")
        .key_specs("RW access update; RW update"),
    Spec::keyed("ts.deleterule", 3, WRITE, K2, ts_deleterule, G, "Delete a compaction rule")
        .abacus_docs("O(1)")
        .key_specs("RW access update; RW update"),
];

/// Named: effect records call it (`ctx::Call::of`).
pub const TS_MADD: Spec = Spec::keyed("ts.madd", -4, WRITE | DENYOOM, (1, -1, 3), ts_madd, G, "Append new samples to one or more time series")
    .abacus_docs("O(N*M) where N is the number of samples and M the number of compaction rules.")
    .key_specs("RW access insert");

pub const ERR_NO_KEY: &str = "ERR TSDB: the key does not exist";
const ERR_NOT_TS: &str = "ERR TSDB: the key is not a TSDB key";
const ERR_WRONGTYPE_TS: &str = "ERR WRONGTYPE Operation against a key holding the wrong kind of value";
const ERR_BLOCKED: &str = "ERR TSDB: Error at upsert, update is not supported when DUPLICATE_POLICY is set to BLOCK mode";
const ERR_TOO_OLD: &str = "ERR TSDB: Timestamp is older than retention";

/// The module's default duplicate policy (its DUPLICATE_POLICY load-time argument).
const DEFAULT_POLICY: DuplicatePolicy = DuplicatePolicy::Block;

/// Options of TS.CREATE / TS.ALTER / TS.ADD / TS.INCRBY (each `None` when absent).
#[derive(Default)]
struct SeriesOpts {
    retention: Option<u64>,
    chunk: Option<u64>,
    policy: Option<DuplicatePolicy>,
    uncompressed: Option<bool>,
    labels: Option<Labels>,
}

fn parse_series_opts(a: &[Arg], first: usize, policy_kw: &str) -> Result<SeriesOpts, Frame> {
    let mut o = SeriesOpts::default();
    if let Some(i) = find(a, first, "retention") {
        o.retention = Some(match a.get(i + 1).map(|v| parse_i64(v)) {
            Some(Ok(v)) if v >= 0 => v as u64,
            Some(Ok(_)) => return Err(err("TSDB: Couldn't parse RETENTION")),
            _ => return Err(err("ERR TSDB: Couldn't parse RETENTION")),
        });
    }
    if let Some(i) = find(a, first, "chunk_size") {
        o.chunk = Some(match a.get(i + 1).map(|v| parse_i64(v)) {
            Some(Ok(v)) if (48..=1_048_576).contains(&v) && v % 8 == 0 => v as u64,
            Some(Ok(_)) => return Err(err("ERR TSDB: CHUNK_SIZE value must be a multiple of 8 in the range [48 .. 1048576]")),
            _ => return Err(err("ERR TSDB: Couldn't parse CHUNK_SIZE")),
        });
    }
    if let Some(i) = find(a, first, "encoding") {
        o.uncompressed = Some(match a.get(i + 1) {
            Some(v) if is(v, "compressed") => false,
            Some(v) if is(v, "uncompressed") => true,
            _ => return Err(err("ERR TSDB: unknown ENCODING parameter")),
        });
    }
    if let Some(i) = find(a, first, policy_kw) {
        // The module ignores an ON_DUPLICATE without its argument, and cannot parse a
        // DUPLICATE_POLICY without one.
        match a.get(i + 1) {
            Some(v) => o.policy = Some(DuplicatePolicy::parse(v).ok_or_else(|| err("ERR TSDB: Unknown DUPLICATE_POLICY"))?),
            None if policy_kw == "on_duplicate" => {}
            None => return Err(err("ERR TSDB: Couldn't parse DUPLICATE_POLICY")),
        }
    }
    if let Some(i) = find(a, first, "labels") {
        let rest = &a[i + 1..];
        // A value with a filter's syntax in it could never be matched: the module refuses it.
        if rest.chunks_exact(2).any(|p| p[1].iter().any(|c| matches!(c, b'(' | b')' | b','))) {
            return Err(err("ERR TSDB: Couldn't parse LABELS"));
        }
        o.labels = Some(rest.chunks_exact(2).map(|p| (Box::<[u8]>::from(&p[0][..]), Box::<[u8]>::from(&p[1][..]))).collect());
    }
    Ok(o)
}

fn new_series(o: &SeriesOpts) -> Series {
    let mut s = Series::new();
    s.retention_ms = o.retention.unwrap_or(0);
    if let Some(c) = o.chunk {
        s.chunk_size_bytes = c;
    }
    s.duplicate_policy = o.policy;
    s.uncompressed = o.uncompressed.unwrap_or(false);
    s.labels = o.labels.clone().unwrap_or_default();
    s
}

/// The series at `key` for reading (`Ok(None)` when missing), with the module's type error.
fn read<'a>(db: &'a Db, key: &[u8], now: u64) -> Result<Option<&'a Series>, Frame> {
    match db.get_shared(key, now) {
        None => Ok(None),
        Some(e) => e.as_series().map(Some).ok_or_else(|| err(ERR_WRONGTYPE_TS)),
    }
}

fn read_existing<'a>(db: &'a Db, key: &[u8], now: u64) -> Result<&'a Series, Frame> {
    read(db, key, now)?.ok_or_else(|| err(ERR_NO_KEY))
}

fn ts_create(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let o = match parse_series_opts(a, 2, "duplicate_policy") {
        Ok(o) => o,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    if ctx.db().contains(&a[1], now) {
        return err("ERR TSDB: key already exists");
    }
    ctx.db().set(&a[1], Value::Series(Box::new(new_series(&o))), 0, now);
    ctx.notify(crate::notify::MODULE, "ts.create", &a[1]);
    Frame::ok()
}

fn ts_alter(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let o = match parse_series_opts(a, 2, "duplicate_policy") {
        Ok(o) => o,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    let db = ctx.db();
    let Some(e) = db.get_mut(&a[1], now) else { return err(ERR_NO_KEY) };
    let Some(s) = e.as_series_mut() else { return err(ERR_WRONGTYPE_TS) };
    if let Some(r) = o.retention {
        s.set_retention(r);
    }
    if let Some(c) = o.chunk {
        s.chunk_size_bytes = c;
    }
    if let Some(p) = o.policy {
        s.duplicate_policy = Some(p);
    }
    if let Some(l) = o.labels {
        s.labels = l;
        let labels = s.labels.clone();
        db.series_index.register(&a[1], labels.iter().map(|(l, v)| (&**l, &**v)));
    }
    ctx.notify(crate::notify::MODULE, "ts.alter", &a[1]);
    Frame::ok()
}

/// A sample timestamp argument: `*` is now.
fn parse_sample_ts(a: &[u8], now: u64) -> Result<u64, Frame> {
    if a == b"*" {
        return Ok(now);
    }
    match parse_i64(a) {
        Ok(t) if t >= 0 => Ok(t as u64),
        Ok(_) => Err(err("ERR TSDB: invalid timestamp, must be a nonnegative integer")),
        Err(_) => Err(err("ERR TSDB: invalid timestamp")),
    }
}

fn parse_value(a: &[u8]) -> Result<f64, Frame> {
    match parse_f64(a) {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(err("ERR TSDB: invalid value")),
    }
}

/// Adds one sample to the series at `key` (created with `opts` when missing and `create`),
/// then runs its compaction rules. Returns the reply (the timestamp, or the error).
fn add_sample(db: &mut Db, key: &[u8], t: u64, v: f64, on_dup: Option<DuplicatePolicy>, opts: Option<&SeriesOpts>, now: u64) -> Result<u64, Frame> {
    let exists = match db.get_shared(key, now) {
        None => false,
        Some(e) if e.as_series().is_some() => true,
        Some(_) => return Err(err(ERR_NOT_TS)),
    };
    if !exists {
        // TS.MADD (no options) says "not a TSDB key" of a missing key, as the module does.
        let Some(o) = opts else { return Err(err(ERR_NOT_TS)) };
        db.set(key, Value::Series(Box::new(new_series(o))), 0, now);
    }
    let s = db.get_mut(key, now).and_then(|e| e.as_series_mut()).expect("a series");
    let policy = on_dup.or(s.duplicate_policy).unwrap_or(DEFAULT_POLICY);
    let appended = s.last().is_none_or(|(l, _)| t > l);
    match s.add(t, v, policy) {
        Ok(_) => {}
        Err(AddError::Blocked) => return Err(err(ERR_BLOCKED)),
        Err(AddError::TooOld) => return Err(err(ERR_TOO_OLD)),
    }
    if !s.rules.is_empty() {
        run_rules(db, key, t, appended, now);
    }
    Ok(t)
}

/// Folds bucket `[start, start + bucket)` of `s` with `agg`, from its samples at `from` or
/// later; `None` when there is none.
fn fold_bucket(s: &Series, agg: Aggregator, from: u64, start: u64, bucket: u64) -> Option<f64> {
    let end = start.saturating_add(bucket);
    let samples: Vec<(u64, f64)> = s.range(from.max(start), end - 1).collect();
    if samples.is_empty() {
        return None;
    }
    let prev = s.before(start);
    let next = s.after(end - 1);
    Some(agg.fold(&samples, start, end, prev, next))
}

/// Updates the compaction rules of the series at `src` after a sample at `t` was added, as
/// the module does. An append (`t` after every sample the series had) into a later bucket
/// closes the open one: its aggregate (of the samples since `fold_from_ms`) goes to the
/// destination. An upsert (at or before the newest sample) into the newest sample's bucket
/// makes the open aggregate start from that bucket's start (whether or not the rule had
/// opened it); an upsert into an older bucket folds that bucket again and overwrites it in
/// the destination.
fn run_rules(db: &mut Db, src: &[u8], t: u64, appended: bool, now: u64) {
    let mut writes: Vec<(Box<[u8]>, u64, Option<f64>)> = Vec::new();
    let mut states: Vec<(Option<u64>, u64)> = Vec::new();
    {
        let Some(s) = db.get_shared(src, now).and_then(|e| e.as_series()) else { return };
        let last = s.last().map_or(t, |x| x.0);
        for r in &s.rules {
            let agg = Aggregator::from_code(r.agg).unwrap_or(Aggregator::Avg);
            let b = bucket_start(t, r.bucket_ms, r.align_ms);
            // An upsert's "current" bucket is the newest sample's, whatever the rule has open.
            let current = bucket_start(last, r.bucket_ms, r.align_ms);
            let state = match (appended, r.open_bucket) {
                (true, None) => (Some(b), r.fold_from_ms.min(t)),
                (true, Some(o)) if b > o => {
                    writes.push((r.dest.clone(), o, fold_bucket(s, agg, r.fold_from_ms, o, r.bucket_ms)));
                    (Some(b), b)
                }
                (true, open) => (open, r.fold_from_ms),
                (false, open) if b >= current => (open, current),
                (false, open) => {
                    writes.push((r.dest.clone(), b, fold_bucket(s, agg, b, b, r.bucket_ms)));
                    (open, r.fold_from_ms)
                }
            };
            states.push(state);
        }
    }
    let mut dead: Vec<Box<[u8]>> = Vec::new();
    for (dest, at, v) in writes {
        let Some(v) = v else { continue };
        match db.get_mut(&dest, now).and_then(|e| e.as_series_mut()) {
            Some(d) if d.src_key.as_deref() == Some(src) => {
                let _ = d.add(at, v, DuplicatePolicy::Last);
            }
            _ => dead.push(dest),
        }
    }
    if let Some(s) = db.get_mut(src, now).and_then(|e| e.as_series_mut()) {
        for (r, (open, from)) in s.rules.iter_mut().zip(states) {
            r.open_bucket = open;
            r.fold_from_ms = from;
        }
        s.rules.retain(|r| !dead.contains(&r.dest));
    }
}

/// Options after the fixed arguments of TS.ADD, with the propagated form of `*`.
fn ts_add(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let t = match parse_sample_ts(&a[2], now) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let v = match parse_value(&a[3]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let o = match parse_series_opts(a, 4, "on_duplicate") {
        Ok(o) => o,
        Err(e) => return e,
    };
    match add_sample(ctx.db(), &a[1], t, v, o.policy, Some(&SeriesOpts { policy: None, ..o_clone(&o) }), now) {
        Ok(t) => {
            if &a[2][..] == b"*" {
                let mut args: Vec<Bytes> = a.iter().map(|x| Bytes::copy_from_slice(x)).collect();
                args[2] = Bytes::from(t.to_string());
                ctx.propagate_as(Call::as_sent(args));
            }
            ctx.notify(crate::notify::MODULE, "ts.add", &a[1]);
            Frame::Integer(t as i64)
        }
        Err(e) => {
            ctx.propagate_nothing();
            ctx.unchanged(e)
        }
    }
}

fn o_clone(o: &SeriesOpts) -> SeriesOpts {
    SeriesOpts { retention: o.retention, chunk: o.chunk, policy: o.policy, uncompressed: o.uncompressed, labels: o.labels.clone() }
}

fn ts_madd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if !(a.len() - 1).is_multiple_of(3) {
        return err("ERR wrong number of arguments for 'ts.madd' command");
    }
    let now = ctx.now_ms;
    let mut replies = Vec::new();
    let mut prop = Call::of(&TS_MADD);
    for trip in a[1..].chunks_exact(3) {
        let r = parse_sample_ts(&trip[1], now).and_then(|t| parse_value(&trip[2]).map(|v| (t, v)));
        let r = r.and_then(|(t, v)| add_sample(ctx.db(), &trip[0], t, v, None, None, now));
        match r {
            Ok(t) => {
                prop.extend([Bytes::copy_from_slice(&trip[0]), Bytes::from(t.to_string()), Bytes::copy_from_slice(&trip[2])]);
                ctx.notify(crate::notify::MODULE, "ts.add", &trip[0]);
                replies.push(Frame::Integer(t as i64));
            }
            Err(e) => replies.push(e),
        }
    }
    if prop.args() == 0 {
        ctx.propagate_nothing();
        return ctx.unchanged(Frame::Array(replies));
    }
    ctx.propagate_as(prop);
    Frame::Array(replies)
}

fn ts_incrby(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    incr(ctx, a, 1.0)
}

fn ts_decrby(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    incr(ctx, a, -1.0)
}

fn incr(ctx: &mut Ctx, a: &[Arg], sign: f64) -> Frame {
    let now = ctx.now_ms;
    let by = match parse_f64(&a[2]) {
        Ok(v) if v.is_finite() => v,
        _ => return err("ERR TSDB: invalid increase/decrease value"),
    };
    let o = match parse_series_opts(a, 3, "duplicate_policy") {
        Ok(o) => o,
        Err(e) => return e,
    };
    let t = match find(a, 3, "timestamp") {
        Some(i) => match a.get(i + 1).map(|v| parse_sample_ts(v, now)) {
            Some(Ok(t)) => t,
            Some(Err(e)) => return e,
            None => return err("ERR TSDB: invalid timestamp"),
        },
        None => now,
    };
    let db = ctx.db();
    let last = match read(db, &a[1], now) {
        Ok(s) => s.and_then(|s| s.last()),
        Err(_) => return err(ERR_NOT_TS),
    };
    if let Some((lt, _)) = last {
        if t < lt {
            return err("TSDB: timestamp must be equal to or higher than the maximum existing timestamp");
        }
    }
    let v = last.map_or(0.0, |l| l.1) + sign * by;
    match add_sample(db, &a[1], t, v, Some(DuplicatePolicy::Last), Some(&o), now) {
        Ok(t) => {
            if find(a, 3, "timestamp").is_none() {
                let mut args: Vec<Bytes> = a.iter().map(|x| Bytes::copy_from_slice(x)).collect();
                args.extend([Bytes::from_static(b"TIMESTAMP"), Bytes::from(t.to_string())]);
                ctx.propagate_as(Call::as_sent(args));
            }
            ctx.notify(crate::notify::MODULE, if sign > 0.0 { "ts.incrby" } else { "ts.decrby" }, &a[1]);
            Frame::Integer(t as i64)
        }
        Err(e) => {
            ctx.propagate_nothing();
            ctx.unchanged(e)
        }
    }
}

fn ts_del(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let from = match ts_range::parse_ts_bound(&a[2], "fromTimestamp") {
        Ok(v) => v,
        Err(e) => return e,
    };
    let to = match ts_range::parse_ts_bound(&a[3], "toTimestamp") {
        Ok(v) => v,
        Err(e) => return e,
    };
    let key = &a[1][..];
    let db = ctx.db();
    let Some(e) = db.get_shared(key, now) else { return err(ERR_NO_KEY) };
    let Some(s) = e.as_series() else { return err(ERR_WRONGTYPE_TS) };
    let rules: Vec<Rule> = ts_links::live_rules(db, key, s, now).cloned().collect();
    if s.retention_ms != 0 && !rules.is_empty() {
        // The module refuses to touch a bucket that starts before the retention window, as
        // it could not fold it again.
        let min = s.last().map_or(0, |(l, _)| l.saturating_sub(s.retention_ms));
        if rules.iter().any(|r| bucket_start(from, r.bucket_ms, r.align_ms) < min) {
            return err("ERR TSDB: When a series has compactions, deleting samples or compaction buckets beyond the series retention period is not possible");
        }
    }
    let last = s.last().map(|x| x.0);
    let Some(s) = db.get_mut(key, now).and_then(|e| e.as_series_mut()) else { return err(ERR_NO_KEY) };
    let n = s.delete_range(from, to);
    if let (false, Some(last)) = (rules.is_empty(), last) {
        refold_deleted(db, key, &rules, from, to, last, now);
    }
    if n == 0 {
        ctx.propagate_nothing();
        return ctx.unchanged(Frame::Integer(0));
    }
    ctx.notify(crate::notify::MODULE, "ts.del", &a[1]);
    Frame::Integer(n as i64)
}

/// After TS.DEL removed `[from, to]` from the series at `src` (whose newest sample was at
/// `newest`): each rule's buckets before the newest sample's that met the range are deleted
/// from its destination, the two at its ends folded again from the samples left (the ones
/// between lost every sample); the newest sample's bucket, if in the range, is the open
/// aggregate's, folded again from its start (whether or not the rule had opened it), as the
/// module does.
fn refold_deleted(db: &mut Db, src: &[u8], rules: &[Rule], from: u64, to: u64, newest: u64, now: u64) {
    for r in rules {
        let agg = Aggregator::from_code(r.agg).unwrap_or(Aggregator::Avg);
        let first = bucket_start(from, r.bucket_ms, r.align_ms);
        let last = bucket_start(to, r.bucket_ms, r.align_ms);
        let open = bucket_start(newest, r.bucket_ms, r.align_ms);
        let closed_last = if last >= open { open.checked_sub(1) } else { Some(last.saturating_add(r.bucket_ms - 1)) };
        let mut writes: Vec<(u64, f64)> = Vec::new();
        if let Some(s) = db.get_shared(src, now).and_then(|e| e.as_series()) {
            for b in [first, last] {
                if b < open && !writes.iter().any(|w| w.0 == b) {
                    if let Some(v) = fold_bucket(s, agg, b, b, r.bucket_ms) {
                        writes.push((b, v));
                    }
                }
            }
        }
        if let Some(d) = db.get_mut(&r.dest, now).and_then(|e| e.as_series_mut()) {
            if let Some(end) = closed_last.filter(|&e| e >= first) {
                d.delete_range(first, end);
            }
            for (b, v) in writes {
                let _ = d.add(b, v, DuplicatePolicy::Last);
            }
        }
        if first <= open && open <= last {
            if let Some(s) = db.get_mut(src, now).and_then(|e| e.as_series_mut()) {
                if let Some(rr) = s.rules.iter_mut().find(|x| x.dest == r.dest) {
                    rr.fold_from_ms = open;
                }
            }
        }
    }
}

/// LATEST: the partial bucket a compaction's source still holds open, if `s` is one.
pub fn latest_extra(db: &Db, key: &[u8], s: &Series, now: u64) -> Option<(u64, f64)> {
    let src = db.get_shared(s.src_key.as_deref()?, now)?.as_series()?;
    let r = src.rules.iter().find(|r| &*r.dest == key)?;
    let o = r.open_bucket?;
    let v = fold_bucket(src, Aggregator::from_code(r.agg)?, r.fold_from_ms, o, r.bucket_ms)?;
    Some((o, v))
}

fn ts_get(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let db = ctx.db();
    let s = match read_existing(db, &a[1], now) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let latest = find(a, 2, "latest").is_some();
    let extra = if latest { latest_extra(db, &a[1], s, now) } else { None };
    match extra.or(s.last()) {
        Some((t, v)) => ts_range::sample_frame(t, v),
        None => Frame::Array(vec![]),
    }
}

fn range_command(ctx: &mut Ctx, a: &[Arg], rev: bool) -> Frame {
    let now = ctx.now_ms;
    let o = match ts_range::parse_range_opts(a, 4) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let db = ctx.db();
    let s = match read_existing(db, &a[1], now) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let extra = if o.latest { latest_extra(db, &a[1], s, now) } else { None };
    samples_frame(&ts_range::evaluate(s, &o, rev, extra))
}

fn ts_range(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_command(ctx, a, false)
}

fn ts_revrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_command(ctx, a, true)
}

/// A series' labels as RedisTimeSeries replies them.
pub fn labels_frame(s: &Series) -> Frame {
    Frame::PairMap(s.labels.iter().map(|(l, v)| (Frame::Bulk(Bytes::copy_from_slice(l)), Frame::Bulk(Bytes::copy_from_slice(v)))).collect())
}

fn ts_info(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let db = ctx.db();
    let s = match read_existing(db, &a[1], now) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let k = |n: &'static str| Frame::simple(n);
    let first = s.first().map_or(0, |x| x.0);
    let last = s.last().map_or(0, |x| x.0);
    let rules = ts_links::live_rules(db, &a[1], s, now)
        .map(|r| {
            Frame::Array(vec![
                Frame::Bulk(Bytes::copy_from_slice(&r.dest)),
                Frame::Integer(r.bucket_ms as i64),
                Frame::Simple(Bytes::from(Aggregator::from_code(r.agg).map_or("avg", |g| g.name()).to_ascii_uppercase())),
                Frame::Integer(r.align_ms as i64),
            ])
        })
        .collect();
    Frame::Map(vec![
        (k("totalSamples"), Frame::Integer(s.len_in_window() as i64)),
        (k("memoryUsage"), Frame::Integer((std::mem::size_of::<Series>() + s.heap_bytes()) as i64)),
        (k("firstTimestamp"), Frame::Integer(first as i64)),
        (k("lastTimestamp"), Frame::Integer(last as i64)),
        (k("retentionTime"), Frame::Integer(s.retention_ms as i64)),
        (k("chunkCount"), Frame::Integer(s.chunk_count() as i64)),
        (k("chunkSize"), Frame::Integer(s.chunk_size_bytes as i64)),
        (k("chunkType"), k(if s.uncompressed { "uncompressed" } else { "compressed" })),
        (k("duplicatePolicy"), s.duplicate_policy.map_or(Frame::Null, |p| Frame::simple(p.name()))),
        (k("labels"), labels_frame(s)),
        (k("sourceKey"), ts_links::live_source(db, &a[1], s, now).map_or(Frame::Null, |k| Frame::Bulk(Bytes::copy_from_slice(k)))),
        (k("rules"), Frame::Array(rules)),
    ])
}

fn ts_createrule(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    if !is(&a[3], "aggregation") {
        return err(ERR_SYNTAX);
    }
    let Some(agg) = Aggregator::parse(&a[4]) else { return err("ERR TSDB: Unknown aggregation type") };
    let bucket = match parse_i64(&a[5]) {
        Ok(b) if b > 0 => b as u64,
        Ok(_) => return err("ERR TSDB: bucketDuration must be greater than zero"),
        Err(_) => return err("ERR TSDB: Couldn't parse AGGREGATION"),
    };
    let align = match a.get(6).map(|v| parse_i64(v)) {
        None => 0,
        Some(Ok(t)) if t >= 0 => t as u64,
        Some(_) => return err("ERR TSDB: Couldn't parse alignTimestamp"),
    };
    let (src, dst) = (&a[1][..], &a[2][..]);
    if src == dst {
        return err("ERR TSDB: the source key and destination key should be different");
    }
    if (ctx.hooks.key_slot)(src) != (ctx.hooks.key_slot)(dst) {
        return err("ERR TSDB: the source key and the destination key must be in the same hash slot (use a {hash tag})");
    }
    let db = ctx.db();
    // The module's order: the source, whether it is a destination, then the destination.
    let s = match read(db, src, now) {
        Ok(Some(s)) => s,
        Ok(None) => return err(ERR_NO_KEY),
        Err(e) => return e,
    };
    if ts_links::live_source(db, src, s, now).is_some() {
        return err("ERR TSDB: the source key already has a source rule");
    }
    let d = match read(db, dst, now) {
        Ok(Some(d)) => d,
        Ok(None) => return err(ERR_NO_KEY),
        Err(e) => return e,
    };
    if ts_links::live_source(db, dst, d, now).is_some() {
        return err("ERR TSDB: the destination key already has a src rule");
    }
    if ts_links::live_rules(db, dst, d, now).next().is_some() {
        return err("ERR TSDB: the destination key already has a dst rule");
    }
    // Stale halves go first, so a rule that once linked these keys cannot come back.
    ts_links::prune(db, src, now);
    ts_links::prune(db, dst, now);
    if let Some(s) = db.get_mut(src, now).and_then(|e| e.as_series_mut()) {
        // As the module's: no bucket open, whatever samples the source has (they are not
        // compacted; the first sample appended opens the first bucket).
        s.rules.push(Rule { dest: dst.into(), agg: agg.code(), bucket_ms: bucket, align_ms: align, open_bucket: None, fold_from_ms: u64::MAX });
    }
    if let Some(d) = db.get_mut(dst, now).and_then(|e| e.as_series_mut()) {
        d.src_key = Some(src.into());
    }
    Frame::ok()
}

fn ts_deleterule(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let (src, dst) = (&a[1][..], &a[2][..]);
    let db = ctx.db();
    match (read(db, src, now), read(db, dst, now)) {
        (Ok(Some(s)), _) if ts_links::live_rules(db, src, s, now).any(|r| &*r.dest == dst) => {}
        (Err(e), _) => return e,
        (Ok(None), _) => return err(ERR_NO_KEY),
        _ => return err("ERR TSDB: compaction rule does not exist"),
    }
    if let Some(s) = db.get_mut(src, now).and_then(|e| e.as_series_mut()) {
        s.rules.retain(|r| &*r.dest != dst);
    }
    if let Some(d) = db.get_mut(dst, now).and_then(|e| e.as_series_mut()) {
        if d.src_key.as_deref() == Some(src) {
            d.src_key = None;
        }
    }
    Frame::ok()
}
