//! Multi-series time series commands: TS.MGET, TS.MRANGE, TS.MREVRANGE, TS.QUERYINDEX (in
//! RedisTimeSeries 1.10's dialect) and TS.WATERFALL (Abacus's source waterfall).
//!
//! Each runs on every shard at once (`run_all`): a shard answers its FILTER from its label
//! index (`abacus_collections::SeriesIndex`: posting lists of the `label=value` matchers,
//! intersected, then every candidate checked against the whole filter on the live key), and
//! evaluates the range on its own series; the connection merges the shards' parts. One round
//! trip for the client whatever the number of series.
//!
//! Why the replies are encoded on the shards: a FILTER may match hundreds of thousands of
//! series, and a frame tree (a key, a labels map and a sample array per series) built on the
//! shard, sorted and encoded on the connection's thread cost several microseconds per series,
//! all on one thread. So each shard encodes its rows straight into one buffer (`Rows`), sorted
//! by key, in parallel with the other shards; the connection merges the sorted runs by
//! copying bytes into a `Frame::Encoded` reply. (TS.MRANGE's GROUPBY still goes through
//! frames: its groups need every member's samples on the connection.)
//!
//! TS.WATERFALL from to SOURCES s1 s2 ... [SOURCELABEL label] FILTER ... [WITHSOURCE] [LATEST]:
//! the matching series are grouped by all their labels but the source label (`source` by
//! default); in each group every timestamp of [from, to] gets the value of the first source,
//! in the given order, that has a sample there. Each shard groups its own members through the
//! groups its label index keeps by series id (`SeriesGroups`: group id, source value, each
//! group's identity and order; no label read or hash lookup per series), merges each
//! group's members by precedence (a k-way walk over lists already in time order: a few
//! comparisons per point), and returns its groups
//! sorted by identity; the connection walks the shards' sorted groups together, merges the
//! parts of a group found on several shards by the same rule, and encodes the reply as it
//! goes. Replies have TS.MRANGE's shape: per group its key (the group's labels as `l=v` joined
//! by `,` in label order), its labels, and its points (`[ts, value]`, or `[ts, value, source]`
//! WITH SOURCE), groups in the order of their names.


use abacus_collections::{Aggregator, IdMatcher, LabelMatcher, Series, SeriesGroups, SeriesIndex, SERIES_NO_ID};

/// A series' samples of a range, oldest first.
type Samples = Vec<(u64, f64)>;
use abacus_keyspace::{prefetch_read, Db};
use abacus_protocol::{Arg, Bytes, Frame, Protocol};

use super::args::*;
use super::timeseries::latest_extra;
use super::ts_range::{self, find, samples_frame, RangeOpts};
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::{shutting_down, Access};
use abacus_engine::shard::now_ms;

const NONE: (i32, i32, i32) = (0, 0, 0);
const G: &str = "timeseries";

pub const COMMANDS: &[Spec] = &[
    Spec::conn("ts.mget", -3, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| mget(conn, access, &call.args).await), G, "Get the sample with the highest timestamp from each time series matching a specific filter")
        .abacus_docs("O(N) where N is the number of time series matching the filters."),
    Spec::conn("ts.mrange", -4, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| mrange(conn, access, &call.args, false).await), G, "Query a range across multiple time series by filters in forward direction")
        .abacus_docs("O(N*M) where N is the number of matching series and M the samples in the range."),
    Spec::conn("ts.mrevrange", -4, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| mrange(conn, access, &call.args, true).await), G, "Query a range across multiple time series by filters in reverse direction")
        .abacus_docs("O(N*M) where N is the number of matching series and M the samples in the range."),
    Spec::conn("ts.queryindex", -2, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| queryindex(conn, access, &call.args).await), G, "Get all time series keys matching a filter list")
        .abacus_docs("O(N) where N is the number of time series matching the filters."),
    Spec::conn("ts.waterfall", -4, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| waterfall(conn, access, &call.args).await), G, "For each point of the matching series grouped by all labels but the source, the value of the first source in precedence order that has it")
        .abacus_docs("O(N*M) where N is the number of matching series and M the points in the range."),
];

/// One FILTER expression.
#[derive(Clone, Debug)]
enum Matcher {
    /// `l=v`, `l=(a,b)`: the label has one of the values.
    In(Box<[u8]>, Values),
    /// `l!=v`, `l!=(a,b)`: the label is absent or has none of the values.
    NotIn(Box<[u8]>, Values),
    /// `l=`: the label is absent.
    Absent(Box<[u8]>),
    /// `l!=`: the label is present.
    Present(Box<[u8]>),
}

type Filter = Vec<Matcher>;

/// A matcher's values, sorted and deduplicated.
#[derive(Clone, Debug)]
struct Values {
    sorted: Vec<Box<[u8]>>,
}

fn parse_values(v: &[u8]) -> Values {
    let mut vs: Vec<Box<[u8]>> = if v.len() >= 2 && v[0] == b'(' && v[v.len() - 1] == b')' {
        v[1..v.len() - 1].split(|&c| c == b',').map(Box::from).collect()
    } else {
        vec![v.into()]
    };
    vs.sort_unstable();
    vs.dedup();
    Values { sorted: vs }
}

fn has(vs: &Values, v: &[u8]) -> bool {
    vs.sorted.binary_search_by(|x| (**x).cmp(v)).is_ok()
}

fn parse_filter(args: &[Arg]) -> Result<Filter, Frame> {
    let mut f = Vec::new();
    for a in args {
        let Some(eq) = a.iter().position(|&c| c == b'=') else { return Err(err("ERR TSDB: failed parsing labels")) };
        let neg = eq > 0 && a[eq - 1] == b'!';
        let label: Box<[u8]> = a[..if neg { eq - 1 } else { eq }].into();
        if label.is_empty() {
            return Err(err("ERR TSDB: failed parsing labels"));
        }
        let value = &a[eq + 1..];
        f.push(match (neg, value.is_empty()) {
            (false, true) => Matcher::Absent(label),
            (true, true) => Matcher::Present(label),
            (false, false) => Matcher::In(label, parse_values(value)),
            (true, false) => Matcher::NotIn(label, parse_values(value)),
        });
    }
    if !f.iter().any(|m| matches!(m, Matcher::In(..))) {
        return Err(err("ERR TSDB: please provide at least one matcher"));
    }
    Ok(f)
}

fn matches(s: &Series, f: &Filter) -> bool {
    f.iter().all(|m| match m {
        Matcher::In(l, vs) => s.label(l).is_some_and(|v| has(vs, v)),
        Matcher::NotIn(l, vs) => s.label(l).is_none_or(|v| !has(vs, v)),
        Matcher::Absent(l) => s.label(l).is_none(),
        Matcher::Present(l) => s.label(l).is_some(),
    })
}

fn vals(vs: &Values) -> Vec<&[u8]> {
    vs.sorted.iter().map(|v| &**v).collect()
}

/// The filter resolved to the index's ids.
fn resolve(db: &Db, filter: &Filter) -> Vec<IdMatcher> {
    filter
        .iter()
        .map(|m| {
            let ix = &db.series_index;
            match m {
                Matcher::In(l, vs) => ix.resolve(LabelMatcher::In(l, &vals(vs))),
                Matcher::NotIn(l, vs) => ix.resolve(LabelMatcher::NotIn(l, &vals(vs))),
                Matcher::Absent(l) => ix.resolve(LabelMatcher::Absent(l)),
                Matcher::Present(l) => ix.resolve(LabelMatcher::Present(l)),
            }
        })
        .collect()
}

/// Runs `f` on every live series of `db` matching `filter` (with its index id); forgets
/// stale index entries. The index answers the whole filter from the series' registered
/// labels (which are their live labels: see `SeriesIndex`), so a candidate costs one
/// keyspace lookup, to check that its key still holds a series and to reach its samples.
fn each_match_id<R>(db: &mut Db, filter: &Filter, ids: &[u32], mut f: impl FnMut(&Db, u32, &[u8], &Series) -> Option<R>) -> Vec<R> {
    let now = now_ms();
    let mut out = Vec::new();
    let mut stale: Vec<Box<[u8]>> = Vec::new();
    let ix = &db.series_index;
    for (i, &id) in ids.iter().enumerate() {
        // Each later candidate's first loads start now (see `PREFETCH`).
        if let Some(&id) = ids.get(i + PREFETCH[0]) {
            ix.prefetch_ptrs(id).into_iter().for_each(prefetch_read);
        }
        if let Some(k) = ids.get(i + PREFETCH[1]).and_then(|&id| ix.key(id)) {
            db.prefetch(k);
        }
        let Some(key) = ix.key(id) else { continue };
        match db.get_shared(key, now).and_then(|e| e.as_series()) {
            Some(s) => {
                debug_assert!(matches(s, filter), "the label index disagrees with the series at {key:?}");
                if let Some(r) = f(db, id, key, s) {
                    out.push(r);
                }
            }
            None => stale.push(key.into()),
        }
    }
    for k in stale {
        db.series_index.forget(&k);
    }
    out
}

/// How many candidates ahead [`each_match_id`] starts loading a candidate's key and labels
/// in the index, then its table slot. (Going further, to the series, its chunk headers and
/// stream, needs a lookup of the series per stage: measured on the loaded 2-core machine, the
/// extra lookups cost more than the overlapped misses saved.)
const PREFETCH: [usize; 2] = [16, 8];

/// The ids of the series matching `filter` by the index (stale ones included).
fn candidates(db: &Db, filter: &Filter) -> Vec<u32> {
    db.series_index.query(&resolve(db, filter))
}

/// [`each_match_id`] without the id.
fn each_match<R>(db: &mut Db, filter: &Filter, mut f: impl FnMut(&Db, &[u8], &Series) -> Option<R>) -> Vec<R> {
    let ids = candidates(db, filter);
    each_match_id(db, filter, &ids, |db, _, key, s| f(db, key, s))
}

/// WITHLABELS / SELECTED_LABELS / neither.
#[derive(Clone)]
enum LabelsWanted {
    None,
    All,
    Selected(Vec<Box<[u8]>>),
}

fn labels_wanted(a: &[Arg], first: usize, end: usize) -> Result<LabelsWanted, Frame> {
    let with = find(&a[..end], first, "withlabels");
    let sel = find(&a[..end], first, "selected_labels");
    match (with, sel) {
        (Some(_), Some(_)) => Err(err("ERR TSDB: WITHLABELS and SELECTED_LABELS are mutually exclusive")),
        (Some(_), None) => Ok(LabelsWanted::All),
        (None, Some(i)) => {
            let names: Vec<Box<[u8]>> = a[i + 1..end].iter().take_while(|x| !is_keyword(x)).map(|x| Box::from(&x[..])).collect();
            if names.is_empty() {
                return Err(err("ERR TSDB: SELECTED_LABELS requires at least one label"));
            }
            Ok(LabelsWanted::Selected(names))
        }
        (None, None) => Ok(LabelsWanted::None),
    }
}

fn is_keyword(a: &[u8]) -> bool {
    ["latest", "withlabels", "selected_labels", "filter", "count", "align", "aggregation", "filter_by_ts", "filter_by_value", "buckettimestamp", "empty", "groupby"].iter().any(|k| is(a, k))
}

fn filter_args(a: &[Arg], first: usize) -> Result<(usize, usize), Frame> {
    let Some(fi) = find(a, first, "filter") else { return Err(err("ERR TSDB: missing FILTER argument")) };
    let end = find(a, fi + 1, "groupby").unwrap_or(a.len());
    if end == fi + 1 {
        return Err(err("ERR TSDB: missing labels for filter argument"));
    }
    Ok((fi, end))
}

fn bulk_key(k: &[u8]) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(k))
}

/// The multi-series reply: RESP3 a map key -> [labels, (meta,) value]; RESP2 an array of
/// [key, labels, value].
fn multi_reply(proto: Protocol, rows: Vec<(Bytes, Frame, Option<Frame>, Frame)>) -> Frame {
    if proto == Protocol::Resp3 {
        Frame::Map(
            rows.into_iter()
                .map(|(k, labels, meta, v)| {
                    let mut parts = vec![labels];
                    parts.extend(meta);
                    parts.push(v);
                    (Frame::Bulk(k), Frame::Array(parts))
                })
                .collect(),
        )
    } else {
        Frame::Array(rows.into_iter().map(|(k, labels, _, v)| Frame::Array(vec![Frame::Bulk(k), labels, v])).collect())
    }
}

/// One shard's rows of a multi-series reply (TS.MGET, TS.MRANGE, TS.QUERYINDEX), encoded on
/// the shard's thread: each row is its key followed by its encoded element; `rows` holds
/// (row start, key end, row end) in `buf`, sorted by key, so that the connection only merges
/// the shards' sorted runs and copies bytes.
#[derive(Default)]
struct Rows {
    buf: Vec<u8>,
    rows: Vec<(u32, u32, u32)>,
}

impl Rows {
    fn key(&self, i: usize) -> &[u8] {
        let (a, k, _) = self.rows[i];
        &self.buf[a as usize..k as usize]
    }

    fn element(&self, i: usize) -> &[u8] {
        let (_, k, e) = self.rows[i];
        &self.buf[k as usize..e as usize]
    }

    /// Starts a row for `key`; the caller appends the element to `buf`, then calls `end`.
    fn start(&mut self, key: &[u8]) -> (u32, u32) {
        let a = len32(self.buf.len());
        self.buf.extend_from_slice(key);
        (a, len32(self.buf.len()))
    }

    fn end(&mut self, (a, k): (u32, u32)) {
        self.rows.push((a, k, len32(self.buf.len())));
    }

    fn sort(&mut self) {
        let buf = &self.buf;
        self.rows.sort_unstable_by(|x, y| buf[x.0 as usize..x.1 as usize].cmp(&buf[y.0 as usize..y.1 as usize]));
    }
}

/// The shards' rows merged in key order under one header (`prefix` and the row count).
fn merge_rows(parts: &[Rows], prefix: u8) -> Bytes {
    let n: usize = parts.iter().map(|p| p.rows.len()).sum();
    let bytes: usize = parts.iter().map(|p| p.buf.len()).sum();
    let mut out = Vec::with_capacity(bytes + 16);
    put_len(&mut out, prefix, n);
    let mut cur = vec![0usize; parts.len()];
    loop {
        let mut best: Option<(usize, &[u8])> = None;
        for (p, part) in parts.iter().enumerate() {
            if cur[p] < part.rows.len() {
                let k = part.key(cur[p]);
                if best.is_none_or(|(_, b)| k < b) {
                    best = Some((p, k));
                }
            }
        }
        let Some((p, _)) = best else { break };
        out.extend_from_slice(parts[p].element(cur[p]));
        cur[p] += 1;
    }
    Bytes::from(out)
}

/// A series' labels as TS.MGET and TS.MRANGE reply them (WITHLABELS: all; SELECTED_LABELS: the
/// named ones, null when absent; neither: none), encoded.
fn put_labels(out: &mut Vec<u8>, s: &Series, w: &LabelsWanted, resp3: bool) {
    let map = if resp3 { b'%' } else { b'*' };
    let pair = |out: &mut Vec<u8>, l: &[u8], v: Option<&[u8]>| {
        if !resp3 {
            put_len(out, b'*', 2);
        }
        put_bulk(out, l);
        match v {
            Some(v) => put_bulk(out, v),
            None => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        }
    };
    match w {
        LabelsWanted::None => put_len(out, map, 0),
        LabelsWanted::All => {
            put_len(out, map, s.labels.len());
            for (l, v) in &s.labels {
                pair(out, l, Some(v));
            }
        }
        LabelsWanted::Selected(names) => {
            put_len(out, map, names.len());
            for n in names {
                pair(out, n, s.label(n));
            }
        }
    }
}

/// Samples as [`samples_frame`] encodes them.
fn put_samples(out: &mut Vec<u8>, samples: &[(u64, f64)], resp3: bool) {
    put_len(out, b'*', samples.len());
    for &(t, v) in samples {
        put_len(out, b'*', 2);
        put_sample(out, t, v, resp3);
    }
}

async fn mget(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let (fi, end) = match filter_args(a, 1) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let filter = match parse_filter(&a[fi + 1..end]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let wanted = match labels_wanted(a, 1, fi) {
        Ok(w) => w,
        Err(e) => return e,
    };
    let latest = find(&a[..fi], 1, "latest").is_some();
    let db = conn.client.db;
    let resp3 = conn.client.proto == Protocol::Resp3;
    let parts = conn
        .worker
        .run_all(access, move |sh| {
            let now = now_ms();
            let mut rows = Rows::default();
            each_match(&mut sh.dbs[db], &filter, |db, key, s| {
                let extra = if latest { latest_extra(db, key, s, now) } else { None };
                let r = rows.start(key);
                // [key, labels, sample] (RESP2), or key => [labels, sample] (RESP3).
                if resp3 {
                    put_bulk(&mut rows.buf, key);
                    put_len(&mut rows.buf, b'*', 2);
                } else {
                    put_len(&mut rows.buf, b'*', 3);
                    put_bulk(&mut rows.buf, key);
                }
                put_labels(&mut rows.buf, s, &wanted, resp3);
                match extra.or(s.last()) {
                    Some((t, v)) => {
                        put_len(&mut rows.buf, b'*', 2);
                        put_sample(&mut rows.buf, t, v, resp3);
                    }
                    None => put_len(&mut rows.buf, b'*', 0),
                }
                rows.end(r);
                Some(())
            });
            rows.sort();
            rows
        })
        .await;
    let Some(parts) = parts else { return shutting_down() };
    Frame::Encoded(merge_rows(&parts, if resp3 { b'%' } else { b'*' }))
}

async fn queryindex(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let filter = match parse_filter(&a[1..]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let db = conn.client.db;
    let parts = conn
        .worker
        .run_all(access, move |sh| {
            let mut rows = Rows::default();
            each_match(&mut sh.dbs[db], &filter, |_, key, _| {
                let r = rows.start(key);
                put_bulk(&mut rows.buf, key);
                rows.end(r);
                Some(())
            });
            rows.sort();
            rows
        })
        .await;
    let Some(parts) = parts else { return shutting_down() };
    Frame::Encoded(merge_rows(&parts, if conn.client.proto == Protocol::Resp3 { b'~' } else { b'*' }))
}

/// Reducers GROUPBY accepts.
fn parse_reducer(a: &[u8]) -> Option<Aggregator> {
    Aggregator::parse(a).filter(|g| !matches!(g, Aggregator::First | Aggregator::Last | Aggregator::Twa))
}

async fn mrange(conn: &mut Conn, access: Access<'_>, a: &[Arg], rev: bool) -> Frame {
    let (fi, end) = match filter_args(a, 3) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let filter = match parse_filter(&a[fi + 1..end]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let opts: RangeOpts = match ts_range::parse_range_opts(&a[..fi], 3) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let wanted = match labels_wanted(a, 3, fi) {
        Ok(w) => w,
        Err(e) => return e,
    };
    let group = if end < a.len() {
        if a.len() != end + 4 || !is(&a[end + 2], "reduce") {
            return err(&format!("ERR wrong number of arguments for '{}' command", if rev { "ts.mrevrange" } else { "ts.mrange" }));
        }
        let Some(r) = parse_reducer(&a[end + 3]) else { return err("ERR TSDB: Invalid reducer type") };
        Some((Bytes::copy_from_slice(&a[end + 1]), r))
    } else {
        None
    };
    let db = conn.client.db;
    let resp3 = conn.client.proto == Protocol::Resp3;
    let aggs = Frame::Map(vec![(Frame::Bulk(Bytes::from_static(b"aggregators")), Frame::Array(opts.agg.iter().map(|s| Frame::Bulk(Bytes::from(s.agg.name()))).collect()))]);
    let Some((label, reducer)) = group else {
        // Each series' row encoded on its shard: [key, labels, samples] (RESP2), or key =>
        // [labels, meta, samples] (RESP3).
        let mut meta = abacus_protocol::BytesMut::new();
        abacus_protocol::encode(&aggs, conn.client.proto, &mut meta);
        let parts = conn
            .worker
            .run_all(access, move |sh| {
                let now = now_ms();
                let mut rows = Rows::default();
                each_match(&mut sh.dbs[db], &filter, |db, key, s| {
                    let extra = if opts.latest { latest_extra(db, key, s, now) } else { None };
                    let samples = ts_range::evaluate(s, &opts, rev, extra);
                    let r = rows.start(key);
                    if resp3 {
                        put_bulk(&mut rows.buf, key);
                        put_len(&mut rows.buf, b'*', 3);
                    } else {
                        put_len(&mut rows.buf, b'*', 3);
                        put_bulk(&mut rows.buf, key);
                    }
                    put_labels(&mut rows.buf, s, &wanted, resp3);
                    if resp3 {
                        rows.buf.extend_from_slice(&meta);
                    }
                    put_samples(&mut rows.buf, &samples, resp3);
                    rows.end(r);
                    Some(())
                });
                rows.sort();
                rows
            })
            .await;
        let Some(parts) = parts else { return shutting_down() };
        return Frame::Encoded(merge_rows(&parts, if resp3 { b'%' } else { b'*' }));
    };
    let o2 = opts.clone();
    let group_wanted = wanted.clone();
    let group_label = label.clone();
    let parts = conn
        .worker
        .run_all(access, move |sh| {
            let now = now_ms();
            each_match(&mut sh.dbs[db], &filter, |db, key, s| {
                let gv = Bytes::copy_from_slice(s.label(&group_label)?);
                let extra = if o2.latest { latest_extra(db, key, s, now) } else { None };
                let samples = ts_range::evaluate(s, &o2, rev, extra);
                Some((Bytes::copy_from_slice(key), gv, samples))
            })
        })
        .await;
    let Some(parts) = parts else { return shutting_down() };
    let mut rows: Vec<_> = parts.into_iter().flatten().collect();
    rows.sort_by(|x, y| x.0.cmp(&y.0));
    let mut groups: std::collections::BTreeMap<Bytes, Vec<(Bytes, Samples)>> = Default::default();
    for (k, gv, samples) in rows {
        groups.entry(gv).or_default().push((k, samples));
    }
    let out = groups
        .into_iter()
        .map(|(v, members)| {
            let mut by_ts: std::collections::BTreeMap<u64, Vec<(u64, f64)>> = Default::default();
            for (_, samples) in &members {
                for &(t, x) in samples {
                    by_ts.entry(t).or_default().push((t, x));
                }
            }
            let mut reduced: Vec<(u64, f64)> = by_ts.into_iter().map(|(t, xs)| (t, reducer.fold(&xs, t, t + 1, None, None))).collect();
            if rev {
                reduced.reverse();
            }
            let sources: Vec<&[u8]> = members.iter().map(|m| &m.0[..]).collect();
            let sources = sources.join(&b","[..]);
            let mut name = label.to_vec();
            name.push(b'=');
            name.extend_from_slice(&v);
            // The group's labels, as the module: WITHLABELS gives the group label, the
            // reducer and the sources; SELECTED_LABELS only the group label's value.
            let labels = Frame::PairMap(match &group_wanted {
                LabelsWanted::None => vec![],
                LabelsWanted::All => vec![
                    (bulk_key(&label), bulk_key(&v)),
                    (bulk_key(b"__reducer__"), Frame::Bulk(Bytes::from(reducer.name()))),
                    (bulk_key(b"__source__"), Frame::Bulk(Bytes::from(sources.clone()))),
                ],
                LabelsWanted::Selected(names) => names.iter().map(|n| (bulk_key(n), if **n == *label { bulk_key(&v) } else { Frame::Null })).collect(),
            });
            let meta = Frame::Map(vec![
                (bulk_key(b"reducers"), Frame::Array(vec![Frame::Bulk(Bytes::from(reducer.name()))])),
                (bulk_key(b"sources"), Frame::Array(members.iter().map(|m| Frame::Bulk(m.0.clone())).collect())),
                (bulk_key(b"aggregators"), Frame::Array(opts.agg.iter().map(|s| Frame::Bulk(Bytes::from(s.agg.name()))).collect())),
            ]);
            (Bytes::from(name), labels, Some(meta), samples_frame(&reduced))
        })
        .collect();
    multi_reply(conn.client.proto, out)
}

/// Upper bound on SOURCES (the merge keeps one cursor per source).
const WATERFALL_SOURCES_MAX: usize = 64;

/// One group of one shard's waterfall part: its identity in [`WfPart::ids`] (`name`, a NUL,
/// then each label and value length-prefixed, so two groups whose names read alike still
/// differ), and its points in [`WfPart::points`], merged over the shard's own members.
struct WfGroup {
    id: (u32, u32),
    name_len: u32,
    points: (u32, u32),
}

/// A point of a shard's merged group: the source's rank and the member it came from (ties
/// between two series of one group and one source go to the smaller key).
#[derive(Clone, Copy)]
struct WfPoint {
    t: u64,
    v: f64,
    rank: u32,
    member: u32,
}

/// One shard's part of a waterfall, in flat buffers (no allocation per series): its groups
/// sorted by identity, so that the connection merges the shards' parts in one ordered walk.
#[derive(Default)]
struct WfPart {
    /// Whether any matching series has the source label.
    labelled: bool,
    ids: Vec<u8>,
    groups: Vec<WfGroup>,
    points: Vec<WfPoint>,
    keys: Vec<u8>,
    /// Member -> its key's range in `keys`.
    members: Vec<(u32, u32)>,
    /// Group heads encoded on the shard ([`wf_encode`]) for the connection to copy: each
    /// group's range in `enc`, empty when another shard encodes it.
    enc: Vec<u8>,
    heads: Vec<(u32, u32)>,
}

impl WfPart {
    fn id(&self, g: usize) -> &[u8] {
        let (a, b) = self.groups[g].id;
        &self.ids[a as usize..b as usize]
    }

    fn key(&self, m: u32) -> &[u8] {
        let (a, b) = self.members[m as usize];
        &self.keys[a as usize..b as usize]
    }
}

fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A waterfall's query, as each shard runs it.
struct WfQuery {
    filter: Filter,
    label: Box<[u8]>,
    sources: Vec<Box<[u8]>>,
    from: u64,
    to: u64,
    latest: bool,
    resp3: bool,
    shards: usize,
}

/// A shard's member: one matching series.
struct WfMember {
    rank: u32,
    samples: (u32, u32),
}

/// The shard's side of TS.WATERFALL: a one-timestamp range takes the precedence walk with
/// early stop ([`waterfall_point`]), any other range the general merge ([`waterfall_range`]).
fn waterfall_shard(db: &mut Db, q: &WfQuery, shard: usize) -> WfPart {
    let mut part = if q.from == q.to { waterfall_point(db, q) } else { waterfall_range(db, q) };
    wf_encode(&mut part, q.resp3, shard, q.shards);
    part
}

/// Encodes, on the shard and in parallel with the other shards, the heads of the groups this
/// shard owns among those of its part (RESP2 `*3`, the name, the labels; RESP3 the name,
/// `*2`, the labels map), so that the connection's merge mostly compares identities and
/// copies bytes. A group has members on most shards (one per source), so each head is
/// encoded by one owner, chosen by a hash of its name ([`wf_owner`]); the connection encodes
/// the heads whose owner has none of the group's members. (`perf`, the one-day waterfall over
/// 1,000,000 series: the connection's merge took 90 ms of the request's ~300, all on one
/// thread.) The points stay the connection's: only it knows which shard's point wins.
fn wf_encode(part: &mut WfPart, resp3: bool, shard: usize, shards: usize) {
    let WfPart { ids, groups, enc, heads, .. } = part;
    enc.reserve(groups.len() * 128 / shards.max(1));
    heads.reserve(groups.len());
    for g in groups.iter() {
        let id = &ids[g.id.0 as usize..g.id.1 as usize];
        let a = len32(enc.len());
        if wf_owner(&id[..g.name_len as usize], shards) == shard {
            put_group_head(enc, id, g.name_len as usize, resp3);
        }
        heads.push((a, len32(enc.len())));
    }
}

/// The shard that encodes a group's head: FNV-1a of its name, modulo the shards.
fn wf_owner(name: &[u8], shards: usize) -> usize {
    let h = name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    (h % shards.max(1) as u64) as usize
}

/// A group's head from its identity `id` (name of `name_len` bytes, a NUL, the labels).
fn put_group_head(out: &mut Vec<u8>, id: &[u8], name_len: usize, resp3: bool) {
    let name = &id[..name_len];
    if resp3 {
        put_bulk(out, name);
        put_len(out, b'*', 2);
    } else {
        put_len(out, b'*', 3);
        put_bulk(out, name);
    }
    let labels = group_labels(&id[name_len + 1..]);
    put_len(out, if resp3 { b'%' } else { b'*' }, labels.clone().count());
    for (l, v) in labels {
        if !resp3 {
            put_len(out, b'*', 2);
        }
        put_bulk(out, l);
        put_bulk(out, v);
    }
}

/// The waterfall's groups for `q`'s source label, placed in order, and the rank of each
/// SOURCES value as (value id, rank) (a source no series has cannot match); `None` when no
/// series has the label.
fn wf_setup(db: &mut Db, q: &WfQuery) -> Option<(u32, Vec<(u32, u32)>)> {
    let label = db.series_index.name_id(&q.label)?;
    db.series_index.groups_for(label);
    let ranks = q.sources.iter().enumerate().filter_map(|(r, x)| Some((db.series_index.value_id(x)?, r as u32))).collect();
    Some((label, ranks))
}

/// The one-timestamp waterfall (`from == to`): a group's answer is the sample at `t` of its
/// first live member in precedence order (rank, then key) that has one. So the candidates are
/// ordered by (group, rank, key) from the index's arrays alone (no keyspace lookup), and each
/// group's members are read in that order until one has `t`: with sources covering most days,
/// most groups stop at their first member, where the general path looks up and reads every
/// member (half the lookups and chunk reads on W7's data).
///
/// The reads go in rounds, each in id order: round one reads every group's first member,
/// round two the next member of the groups that round one did not settle, and so on. Why id
/// order and not group order: ids are given as series are created, so in id order the
/// index's entries, the keys and, for series loaded one after the other, the series' own
/// allocations are read front to back, where group (name) order jumps across the whole
/// heap for every member; only the table slot stays a random read. Then the groups are
/// written out in identity order.
///
/// The reply is the general path's: a group with a live member but none with `t` is still
/// returned, without points (so it visits every member); a group with no live member is not.
/// The connection's merge picks the best (rank, key) across shards, so one member per group
/// and shard is enough.
fn waterfall_point(db: &mut Db, q: &WfQuery) -> WfPart {
    let now = now_ms();
    let t = q.from;
    let mut part = WfPart::default();
    let Some((label, ranks)) = wf_setup(db, q) else { return part };
    let ids = candidates(db, &q.filter);
    let ix = &db.series_index;
    let groups = ix.groups(label).expect("wf_setup placed the groups");
    // The ranked members, in id order (`ids` is sorted).
    let mut mem: Vec<WfCand> = Vec::with_capacity(ids.len());
    let mut unranked = false;
    for &id in &ids {
        let src = groups.source_of(id);
        if src == SERIES_NO_ID {
            continue;
        }
        match ranks.iter().find(|r| r.0 == src) {
            Some(&(_, rank)) => {
                let g = groups.group_of(id);
                mem.push(WfCand { id, g, pos: groups.rank(g), rank });
            }
            None => unranked = true,
        }
    }
    let (order, gstart, gid) = wf_order(ix, &mem, groups.placed());
    let ng = gstart.len() - 1;
    // Member -> its group's slot (in `gstart`), and each group's state in one record (the
    // walk reaches groups in random order: one cache miss per member, prefetched, where
    // five arrays by group cost five).
    let mut gslot = vec![0u32; mem.len()];
    for gs in 0..ng {
        for &m in &order[gstart[gs] as usize..gstart[gs + 1] as usize] {
            gslot[m as usize] = gs as u32;
        }
    }
    let mut state: Vec<WfGroupState> = (0..ng)
        .map(|gs| WfGroupState { v: 0.0, next: gstart[gs], end: gstart[gs + 1], member: WF_NONE, rank: 0 })
        .collect();
    // The members to read in the coming round, a bit per member (so in id order).
    let mut marks = vec![0u64; mem.len().div_ceil(64)];
    for &s in &gstart[..ng] {
        let m = order[s as usize] as usize;
        marks[m / 64] |= 1 << (m % 64);
    }
    let mut stale: Vec<Box<[u8]>> = Vec::new();
    let mut visit: Vec<u32> = Vec::with_capacity(ng);
    loop {
        visit.clear();
        for (w, word) in marks.iter_mut().enumerate() {
            let mut x = std::mem::take(word);
            while x != 0 {
                visit.push((w * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        if visit.is_empty() {
            break;
        }
        let mut pf = WfPipe::new();
        for (j, &m) in visit.iter().enumerate() {
            pf.advance(db, &mem, &visit, j, t, now);
            if let Some(&a) = visit.get(j + WF_STATE_AHEAD) {
                prefetch_read(std::ptr::from_ref(&state[gslot[a as usize] as usize]));
            }
            let g = &mut state[gslot[m as usize] as usize];
            let found_here = match (ix.key(mem[m as usize].id), pf.series(j)) {
                (Some(key), Some(s)) => {
                    debug_assert!(matches(s, &q.filter), "the label index disagrees with the series at {key:?}");
                    if g.member == WF_NONE {
                        g.member = WF_LIVE;
                    }
                    // As the general path: the stored sample, else LATEST's open bucket if it
                    // is at `t`.
                    let v = s.get(t).or_else(|| if q.latest { latest_extra(db, key, s, now).filter(|x| x.0 == t).map(|x| x.1) } else { None });
                    // The key is copied now, while it is in cache.
                    v.map(|v| {
                        let k0 = len32(part.keys.len());
                        part.keys.extend_from_slice(key);
                        (g.member, g.v, g.rank) = (len32(part.members.len()), v, mem[m as usize].rank);
                        part.members.push((k0, len32(part.keys.len())));
                    })
                    .is_some()
                }
                (Some(key), None) => {
                    stale.push(key.into());
                    false
                }
                (None, _) => false,
            };
            if !found_here && g.next + 1 < g.end {
                g.next += 1;
                let n = order[g.next as usize] as usize;
                marks[n / 64] |= 1 << (n % 64);
            }
        }
    }
    // The groups in identity order, each with its point if one was found.
    part.points.reserve(ng);
    for gs in 0..ng {
        if let Some(&g) = gid.get(gs + WF_IDENT_AHEAD) {
            prefetch_read(groups.ident_entry_ptr(g));
        }
        let g = &state[gs];
        if g.member == WF_NONE {
            continue;
        }
        let p0 = len32(part.points.len());
        if g.member != WF_LIVE {
            part.points.push(WfPoint { t, v: g.v, rank: g.rank, member: g.member });
        }
        let (ident, name_len) = groups.ident(gid[gs]);
        let a = len32(part.ids.len());
        part.ids.extend_from_slice(ident);
        part.groups.push(WfGroup { id: (a, len32(part.ids.len())), name_len, points: (p0, len32(part.points.len())) });
    }
    // Whether any live match has the source label: a returned group has one; otherwise only
    // a live series whose source is not among SOURCES (never visited above) can.
    part.labelled = !part.groups.is_empty() || (unranked && ids.iter().any(|&id| wf_unranked_live(db, groups, &ranks, id, now, &mut stale)));
    for k in stale {
        db.series_index.forget(&k);
    }
    part
}

/// A group's state in a one-timestamp waterfall: the member it reads next (an index into
/// `order`) and where its members end there; what it found: [`WF_NONE`] (no live member
/// yet), [`WF_LIVE`] (live members, none with a sample at the timestamp) or the member (in
/// the part's `members`, whose key is copied when found) with its sample and rank.
struct WfGroupState {
    v: f64,
    next: u32,
    end: u32,
    member: u32,
    rank: u32,
}

/// [`WfGroupState::member`] of a group with no live member read yet.
const WF_NONE: u32 = u32::MAX;
/// [`WfGroupState::member`] of a group with live members but no sample found.
const WF_LIVE: u32 = u32::MAX - 1;

/// How many members ahead the walk loads a member's group state.
const WF_STATE_AHEAD: usize = 16;

/// A ranked member of a one-timestamp waterfall: its id, group, the group's position in
/// identity order and its source's rank.
struct WfCand {
    id: u32,
    g: u32,
    pos: u32,
    rank: u32,
}

/// The members (indices into `mem`) grouped by their group's position, each group's in
/// precedence order (rank, then key); where each group starts (with the end as a last
/// element); and each group's id. A counting sort by position when the members are many
/// against the `placed` positions (a FILTER over most series: one pass, where a comparison
/// sort of a million members measured 5% of the walk's CPU), else a comparison sort. The
/// passes after the scatter read `order`'s side arrays front to back, not `mem` by member.
fn wf_order(ix: &SeriesIndex, mem: &[WfCand], placed: usize) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let n = mem.len();
    let mut order: Vec<u32> = vec![0; n];
    // Beside `order`: each member's rank, group position and group.
    let mut rank: Vec<u32> = vec![0; n];
    let mut pos: Vec<u32> = vec![0; n];
    let mut grp: Vec<u32> = vec![0; n];
    if n >= placed / 4 {
        let mut at = vec![0u32; placed + 1];
        for c in mem {
            at[c.pos as usize + 1] += 1;
        }
        for p in 1..at.len() {
            at[p] += at[p - 1];
        }
        for (m, c) in mem.iter().enumerate() {
            let slot = &mut at[c.pos as usize];
            let k = *slot as usize;
            (order[k], rank[k], pos[k], grp[k]) = (m as u32, c.rank, c.pos, c.g);
            *slot += 1;
        }
    } else {
        let mut keyed: Vec<(u32, u32)> = mem.iter().enumerate().map(|(m, c)| (c.pos, m as u32)).collect();
        keyed.sort_unstable();
        for (k, &(p, m)) in keyed.iter().enumerate() {
            let c = &mem[m as usize];
            (order[k], rank[k], pos[k], grp[k]) = (m, c.rank, p, c.g);
        }
    }
    let mut gstart: Vec<u32> = Vec::new();
    let mut gid: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < n {
        let end = i + pos[i..].iter().take_while(|&&p| p == pos[i]).count();
        gstart.push(i as u32);
        gid.push(grp[i]);
        // A handful of members (one per source): an insertion sort; keys are compared only
        // between two members of one source.
        for k in i + 1..end {
            let mut j = k;
            let key = |m: u32| ix.key(mem[m as usize].id);
            while j > i && (rank[j - 1] > rank[j] || (rank[j - 1] == rank[j] && key(order[j - 1]) > key(order[j]))) {
                order.swap(j - 1, j);
                rank.swap(j - 1, j);
                j -= 1;
            }
        }
        i = end;
    }
    gstart.push(n as u32);
    (order, gstart, gid)
}

/// Whether `id` has a source label not among SOURCES and its key holds a series (a stale
/// key is kept in `stale`, to forget).
fn wf_unranked_live(db: &Db, groups: &SeriesGroups, ranks: &[(u32, u32)], id: u32, now: u64, stale: &mut Vec<Box<[u8]>>) -> bool {
    let src = groups.source_of(id);
    if src == SERIES_NO_ID || ranks.iter().any(|r| r.0 == src) {
        return false;
    }
    let Some(key) = db.series_index.key(id) else { return false };
    let live = db.get_shared(key, now).and_then(|e| e.as_series()).is_some();
    if !live {
        stale.push(key.into());
    }
    live
}

/// The point walk's prefetch pipeline over one round's members (in id order). Each member
/// goes through six stages, [`WF_PREFETCH`] members ahead of its read, each stage reading
/// what the one before loaded: its index entry (the pointer to its key), its key bytes, its
/// table slot (the key hashed), then its lookup (kept in `ring` for the read, so it is
/// looked up once) with its series' header, its chunk list, and its stream word at `t`.
/// Why: `perf` on the walk without the last stages showed the series', the chunk list's and
/// the stream's cache misses (three dependent loads per member) as about 35% of the shard's
/// CPU.
struct WfPipe<'a> {
    /// The next member of each stage.
    next: [usize; 6],
    /// Member n's key hash, then its lookup (the series, `None` when the key holds none), at
    /// `n % WF_RING`.
    hash: [u64; WF_RING],
    ring: [Option<&'a Series>; WF_RING],
}

impl<'a> WfPipe<'a> {
    fn new() -> WfPipe<'a> {
        WfPipe { next: [0; 6], hash: [0; WF_RING], ring: [None; WF_RING] }
    }

    /// Brings every stage up to the read of `visit[j]`.
    fn advance(&mut self, db: &'a Db, mem: &[WfCand], visit: &[u32], j: usize, t: u64, now: u64) {
        let ix = &db.series_index;
        for (stage, &d) in WF_PREFETCH.iter().enumerate() {
            let upto = (j + d + 1).min(visit.len());
            for n in std::mem::replace(&mut self.next[stage], upto)..upto {
                let id = mem[visit[n] as usize].id;
                match stage {
                    0 => prefetch_read(ix.key_entry_ptr(id)),
                    1 => prefetch_read(ix.key(id).map_or(std::ptr::null(), <[u8]>::as_ptr)),
                    2 => self.hash[n % WF_RING] = ix.key(id).map_or(0, |k| db.prefetch(k)),
                    3 => {
                        let s = ix.key(id).and_then(|k| db.get_shared_hashed(self.hash[n % WF_RING], k, now)).and_then(|e| e.as_series());
                        self.ring[n % WF_RING] = s;
                        if let Some(s) = s {
                            prefetch_read(s.head_addr());
                        }
                    }
                    4 => {
                        if let Some(s) = self.ring[n % WF_RING] {
                            // A chunk's fields span two cache lines.
                            prefetch_read(s.chunks_addr());
                            prefetch_read(s.chunks_addr().wrapping_add(64));
                        }
                    }
                    _ => {
                        if let Some(s) = self.ring[n % WF_RING] {
                            prefetch_read(s.stream_addr(t));
                        }
                    }
                }
            }
        }
    }

    /// `visit[j]`'s lookup (after [`WfPipe::advance`] to `j`).
    fn series(&self, j: usize) -> Option<&'a Series> {
        self.ring[j % WF_RING]
    }
}

/// Distances of [`WfPipe`]'s stages ahead of the read, in members: ten members between
/// dependent stages measured about 4% less CPU than six (W7's 1,000,000 series), the loads
/// of a stage still missing on the one before at six.
const WF_PREFETCH: [usize; 6] = [60, 50, 40, 30, 20, 10];

/// Hashes and lookups kept: more than the hashing stage's distance.
const WF_RING: usize = 64;

/// How many groups ahead the output pass starts loading a group's identity entry (the
/// identities' bytes are read in order: the arena is laid out so).
const WF_IDENT_AHEAD: usize = 32;

/// The general waterfall (any range): looks up and reads every matching series (through
/// [`each_match_id`]), groups them (by their labels but the source label: the index's
/// `SeriesGroups`, kept by id, with each group's identity and order), and merges each
/// group's members by precedence.
fn waterfall_range(db: &mut Db, q: &WfQuery) -> WfPart {
    let now = now_ms();
    let mut part = WfPart::default();
    let Some((label, ranks)) = wf_setup(db, q) else { return part };
    let ids = candidates(db, &q.filter);
    let mut members: Vec<WfMember> = Vec::with_capacity(ids.len());
    // Per member: (group's position in identity order << 32 | rank, member), to sort by.
    let mut order: Vec<(u64, u32)> = Vec::with_capacity(ids.len());
    let mut group_of: Vec<u32> = Vec::with_capacity(ids.len());
    let mut samples: Vec<(u64, f64)> = Vec::with_capacity(ids.len());
    part.members.reserve(ids.len());
    part.keys.reserve(ids.len() * 24);
    each_match_id(db, &q.filter, &ids, |db, id, key, s| {
        let groups = db.series_index.groups(label).expect("groups_for ran above, and registrations keep them ordered");
        let src = groups.source_of(id);
        if src == SERIES_NO_ID {
            return None;
        }
        part.labelled = true;
        let rank = ranks.iter().find(|r| r.0 == src)?.1;
        let group = groups.group_of(id);
        debug_assert!(group != SERIES_NO_ID, "a live id has a group");
        let k0 = len32(part.keys.len());
        part.keys.extend_from_slice(key);
        part.members.push((k0, len32(part.keys.len())));
        let s0 = len32(samples.len());
        samples.extend(s.range(q.from, q.to));
        if q.latest {
            let extra = latest_extra(db, key, s, now);
            if let Some(x) = extra.filter(|x| x.0 >= q.from && x.0 <= q.to && (samples.len() == s0 as usize || samples[samples.len() - 1].0 < x.0)) {
                samples.push(x);
            }
        }
        let m = len32(members.len());
        order.push((((groups.rank(group) as u64) << 32) | rank as u64, m));
        group_of.push(group);
        members.push(WfMember { rank, samples: (s0, len32(samples.len())) });
        Some(())
    });
    // Members by group (in identity order), then each group's by precedence (rank, key).
    order.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| part.key(x.1).cmp(part.key(y.1))));
    let Some(groups) = db.series_index.groups(label) else { return part };
    part.points.reserve(samples.len());
    let mut at: Vec<u32> = Vec::new();
    let mut ms: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let pos = order[i].0 >> 32;
        ms.clear();
        while i < order.len() && order[i].0 >> 32 == pos {
            ms.push(order[i].1);
            i += 1;
        }
        let (ident, name_len) = groups.ident(group_of[ms[0] as usize]);
        let a = len32(part.ids.len());
        part.ids.extend_from_slice(ident);
        let p0 = len32(part.points.len());
        let sl = |m: u32| {
            let (a, b) = members[m as usize].samples;
            &samples[a as usize..b as usize]
        };
        if let [m] = ms[..] {
            let rank = members[m as usize].rank;
            part.points.extend(sl(m).iter().map(|&(t, v)| WfPoint { t, v, rank, member: m }));
        } else {
            // The k-way merge: every timestamp any member has, from the first member (in
            // precedence order) that has it.
            at.clear();
            at.resize(ms.len(), 0);
            loop {
                let mut best: Option<(u64, usize)> = None;
                for (i, &m) in ms.iter().enumerate() {
                    if let Some(&(t, _)) = sl(m).get(at[i] as usize) {
                        if best.is_none_or(|(bt, _)| t < bt) {
                            best = Some((t, i));
                        }
                    }
                }
                let Some((t, i)) = best else { break };
                let m = ms[i];
                part.points.push(WfPoint { t, v: sl(m)[at[i] as usize].1, rank: members[m as usize].rank, member: m });
                for (j, &m) in ms.iter().enumerate() {
                    if sl(m).get(at[j] as usize).is_some_and(|s| s.0 == t) {
                        at[j] += 1;
                    }
                }
            }
        }
        part.groups.push(WfGroup { id: (a, len32(part.ids.len())), name_len, points: (p0, len32(part.points.len())) });
    }
    part
}

async fn waterfall(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let from = match ts_range::parse_ts_bound(&a[1], "fromTimestamp") {
        Ok(v) => v,
        Err(e) => return e,
    };
    let to = match ts_range::parse_ts_bound(&a[2], "toTimestamp") {
        Ok(v) => v,
        Err(e) => return e,
    };
    if from > to {
        return err("ERR TSDB: the range start is after its end");
    }
    let kw = |x: &[u8]| ["sources", "sourcelabel", "filter", "withsource", "latest"].iter().any(|k| is(x, k));
    let Some(si) = find(a, 3, "sources") else { return err("ERR TSDB: SOURCES needs at least one source") };
    let sources: Vec<Box<[u8]>> = a[si + 1..].iter().take_while(|x| !kw(x)).map(|x| Box::from(&x[..])).collect();
    if sources.is_empty() {
        return err("ERR TSDB: SOURCES needs at least one source");
    }
    if sources.len() > WATERFALL_SOURCES_MAX {
        return err(&format!("ERR TSDB: at most {WATERFALL_SOURCES_MAX} SOURCES"));
    }
    for (i, s) in sources.iter().enumerate() {
        if sources[..i].contains(s) {
            return err(&format!("ERR TSDB: source '{}' is given twice", String::from_utf8_lossy(s)));
        }
    }
    let source_label: Box<[u8]> = match find(a, 3, "sourcelabel") {
        Some(i) => match a.get(i + 1) {
            Some(l) if !kw(l) && !l.is_empty() => Box::from(&l[..]),
            _ => return err("ERR TSDB: SOURCELABEL needs a label name"),
        },
        None => Box::from(&b"source"[..]),
    };
    let Some(fi) = find(a, 3, "filter") else { return err("ERR TSDB: missing FILTER argument") };
    let nf = a[fi + 1..].iter().take_while(|x| !kw(x)).count();
    if nf == 0 {
        return err("ERR TSDB: missing labels for filter argument");
    }
    let filter = match parse_filter(&a[fi + 1..fi + 1 + nf]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let with_source = find(a, 3, "withsource").is_some();
    let latest = find(a, 3, "latest").is_some();
    let db = conn.client.db;
    let resp3 = conn.client.proto == Protocol::Resp3;
    let shards = conn.worker.shards();
    let q = WfQuery { filter, label: source_label.clone(), sources: sources.clone(), from, to, latest, resp3, shards };
    let parts = conn.worker.run_all(access, move |sh| waterfall_shard(&mut sh.dbs[db], &q, sh.id)).await;
    let Some(parts) = parts else { return shutting_down() };
    if !parts.iter().any(|p| p.labelled) {
        return err(&format!("ERR TSDB: no series matching the filter has the source label '{}'", String::from_utf8_lossy(&source_label)));
    }
    Frame::Encoded(waterfall_reply(&parts, &sources, with_source, resp3))
}

/// Groups from which [`waterfall_reply`] merges the two halves of the identity order on two
/// threads: below it a thread's start (tens of microseconds) is not worth it.
const WF_PARALLEL_MERGE_GROUPS: usize = 16_384;

/// Merges the shards' parts (each sorted by group identity, each encoded by [`wf_encode`])
/// into the reply: TS.MRANGE's shape, a group per distinct identity, in identity order (that
/// is, by name). The connection's part of the work is comparing identities, choosing each
/// timestamp's point where a group has members on several shards, and copying bytes.
///
/// A large reply is merged in two halves of the identity order at once, the second on a
/// scoped thread of its own, and its bytes appended to the first's: the merge is the
/// request's one serial step after the shards' parallel work (~26 ms of the one-day W7
/// request's ~183, measured at 23:05 UTC on 2026-11-27). Every group's members fall in one
/// half, since each part is split at the same identity.
fn waterfall_reply(parts: &[WfPart], sources: &[Box<[u8]>], with_source: bool, resp3: bool) -> Bytes {
    waterfall_reply_from(parts, sources, with_source, resp3, WF_PARALLEL_MERGE_GROUPS)
}

/// [`waterfall_reply`], merging in two halves from `parallel_from` groups (tests use 0).
fn waterfall_reply_from(parts: &[WfPart], sources: &[Box<[u8]>], with_source: bool, resp3: bool, parallel_from: usize) -> Bytes {
    // Room for the reply's header, written once the groups are counted.
    const GAP: usize = 24;
    let npoints: usize = parts.iter().map(|p| p.points.len()).sum();
    let bytes = parts.iter().map(|p| p.enc.len()).sum::<usize>() + npoints * 40;
    let mut out: Vec<u8> = Vec::with_capacity(GAP + bytes);
    out.resize(GAP, 0);
    let all: Vec<(usize, usize)> = parts.iter().map(|p| (0, p.groups.len())).collect();
    let merge = |out: &mut Vec<u8>, bounds: &[(usize, usize)]| wf_merge(parts, bounds, sources, with_source, resp3, out);
    let split = if all.iter().map(|b| b.1).sum::<usize>() >= parallel_from { wf_split(parts) } else { None };
    let ngroups = match split {
        Some(mid) => {
            let first: Vec<(usize, usize)> = mid.iter().map(|&m| (0, m)).collect();
            let second: Vec<(usize, usize)> = mid.iter().zip(&all).map(|(&m, b)| (m, b.1)).collect();
            std::thread::scope(|s| {
                let helper = std::thread::Builder::new().name("abacus-merge".into()).spawn_scoped(s, || {
                    let mut tail = Vec::with_capacity(bytes / 2 + 1024);
                    let n = merge(&mut tail, &second);
                    (tail, n)
                });
                let n = merge(&mut out, &first);
                match helper {
                    Ok(h) => match h.join() {
                        Ok((tail, m)) => {
                            out.extend_from_slice(&tail);
                            n + m
                        }
                        Err(panic) => std::panic::resume_unwind(panic),
                    },
                    // No thread to be had: the second half here.
                    Err(_) => n + merge(&mut out, &second),
                }
            })
        }
        _ => merge(&mut out, &all),
    };
    let mut head = Vec::with_capacity(GAP);
    put_len(&mut head, if resp3 { b'%' } else { b'*' }, ngroups);
    let start = GAP - head.len();
    out[start..GAP].copy_from_slice(&head);
    Bytes::from(out).slice(start..)
}

/// Where each part's groups split into two halves of the identity order: before the first
/// group not below the middle group of the largest part. `None` when there are no groups.
fn wf_split(parts: &[WfPart]) -> Option<Vec<usize>> {
    let big = parts.iter().max_by_key(|p| p.groups.len()).filter(|p| !p.groups.is_empty())?;
    let pivot = big.id(big.groups.len() / 2);
    Some(parts.iter().map(|p| p.groups.partition_point(|g| &p.ids[g.id.0 as usize..g.id.1 as usize] < pivot)).collect())
}

/// The reply's groups from `bounds` (per part, a range of its groups) appended to `out`, in
/// identity order; returns how many.
fn wf_merge(parts: &[WfPart], bounds: &[(usize, usize)], sources: &[Box<[u8]>], with_source: bool, resp3: bool, out: &mut Vec<u8>) -> usize {
    let mut ngroups = 0usize;
    let mut cur: Vec<usize> = bounds.iter().map(|b| b.0).collect();
    let mut same: Vec<usize> = Vec::with_capacity(parts.len());
    // The chosen points: (part, point).
    let mut merged: Vec<(usize, usize)> = Vec::new();
    let mut at: Vec<u32> = Vec::new();
    loop {
        let mut min: Option<&[u8]> = None;
        for (p, part) in parts.iter().enumerate() {
            if cur[p] < bounds[p].1 {
                let id = part.id(cur[p]);
                if min.is_none_or(|m| id < m) {
                    min = Some(id);
                }
            }
        }
        let Some(id) = min else { break };
        same.clear();
        for (p, part) in parts.iter().enumerate() {
            if cur[p] < bounds[p].1 && part.id(cur[p]) == id {
                same.push(p);
            }
        }
        // The group's points over the shards that have it: the best (rank, key) per timestamp.
        let span = |p: usize| {
            let g = &parts[p].groups[cur[p]];
            g.points.0 as usize..g.points.1 as usize
        };
        merged.clear();
        if let [p] = same[..] {
            merged.extend(span(p).map(|i| (p, i)));
        } else {
            at.clear();
            at.resize(same.len(), 0);
            loop {
                let mut best: Option<(usize, usize)> = None;
                for (i, &p) in same.iter().enumerate() {
                    let k = span(p).start + at[i] as usize;
                    if k >= span(p).end {
                        continue;
                    }
                    let x = &parts[p].points[k];
                    let better = match best {
                        None => true,
                        Some((bp, bk)) => {
                            let b = &parts[bp].points[bk];
                            x.t < b.t || (x.t == b.t && (x.rank, parts[p].key(x.member)) < (b.rank, parts[bp].key(b.member)))
                        }
                    };
                    if better {
                        best = Some((p, k));
                    }
                }
                let Some((bp, bk)) = best else { break };
                merged.push((bp, bk));
                let t = parts[bp].points[bk].t;
                for (i, &p) in same.iter().enumerate() {
                    let k = span(p).start + at[i] as usize;
                    if k < span(p).end && parts[p].points[k].t == t {
                        at[i] += 1;
                    }
                }
            }
        }
        match same.iter().map(|&p| (p, parts[p].heads[cur[p]])).find(|h| h.1 .0 < h.1 .1) {
            Some((p, (a, b))) => out.extend_from_slice(&parts[p].enc[a as usize..b as usize]),
            None => put_group_head(out, id, parts[same[0]].groups[cur[same[0]]].name_len as usize, resp3),
        }
        put_len(out, b'*', merged.len());
        for &(p, k) in &merged {
            let x = &parts[p].points[k];
            put_len(out, b'*', if with_source { 3 } else { 2 });
            put_sample(out, x.t, x.v, resp3);
            if with_source {
                put_bulk(out, &sources[x.rank as usize]);
            }
        }
        for &p in &same {
            cur[p] += 1;
        }
        ngroups += 1;
    }
    ngroups
}

/// The (label, value) pairs of a group identity's length-prefixed part.
fn group_labels(mut b: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
    let mut take = move || {
        let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let x = b.get(4..4 + n)?;
        b = &b[4 + n..];
        Some(x)
    };
    std::iter::from_fn(move || Some((take()?, take()?)))
}

/// `prefix n CRLF` (an aggregate's header). Lengths under 100 (every header and most bulk
/// lengths of a waterfall reply, five per group) are written as one small array: callgrind
/// counted ~120 instructions per `put_bulk` through `itoa` and three appends.
#[inline]
fn put_len(out: &mut Vec<u8>, prefix: u8, n: usize) {
    if n < 10 {
        out.extend_from_slice(&[prefix, b'0' + n as u8, b'\r', b'\n']);
    } else if n < 100 {
        out.extend_from_slice(&[prefix, b'0' + (n / 10) as u8, b'0' + (n % 10) as u8, b'\r', b'\n']);
    } else {
        out.push(prefix);
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

#[inline]
fn put_bulk(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A sample's timestamp and value, as [`ts_range::sample_frame`] encodes them (without the
/// `*2` header): `:ts` then the value (RESP3 a double, RESP2 a simple string).
fn put_sample(out: &mut Vec<u8>, t: u64, v: f64, resp3: bool) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(t as i64).as_bytes());
    out.extend_from_slice(b"\r\n");
    if resp3 {
        out.push(b',');
        abacus_protocol::format_double_g17(v, out);
    } else {
        out.push(b'+');
        abacus_protocol::format_double_ts(v, out);
    }
    out.extend_from_slice(b"\r\n");
}

/// One shard's series totals for INFO timeseries: (series, samples, encoded sample bytes,
/// heap bytes).
pub fn stats(dbs: &[Db]) -> (u64, u64, u64, u64) {
    let now = now_ms();
    let mut t = (0, 0, 0, 0);
    for db in dbs {
        for key in db.series_index.keys() {
            if let Some(s) = db.get_shared(key, now).and_then(|e| e.as_series()) {
                t.0 += 1;
                t.1 += s.len();
                t.2 += s.data_bytes() as u64;
                t.3 += (std::mem::size_of::<Series>() + s.heap_bytes()) as u64;
            }
        }
    }
    t
}

/// INFO's `# Timeseries` section from every shard's [`stats`].
pub fn stats_section(per: &[(u64, u64, u64, u64)]) -> String {
    let t = per.iter().fold((0, 0, 0, 0), |a, x| (a.0 + x.0, a.1 + x.1, a.2 + x.2, a.3 + x.3));
    let per_sample = |b: u64| if t.1 == 0 { 0.0 } else { b as f64 / t.1 as f64 };
    format!(
        "# Timeseries\r\nts_series:{}\r\nts_samples:{}\r\nts_sample_bytes:{}\r\nts_memory_bytes:{}\r\nts_bytes_per_sample:{:.3}\r\nts_memory_bytes_per_sample:{:.3}\r\n\r\n",
        t.0, t.1, t.2, t.3, per_sample(t.2), per_sample(t.3)
    )
}

#[cfg(test)]
#[path = "ts_multi_tests.rs"]
mod tests;
