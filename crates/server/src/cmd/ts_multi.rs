//! Multi-series time series commands: TS.MGET, TS.MRANGE, TS.MREVRANGE, TS.QUERYINDEX (in
//! RedisTimeSeries 1.10's dialect) and TS.WATERFALL (Abacus's source waterfall).
//!
//! Each runs on every shard at once (`run_all`): a shard answers its FILTER from its label
//! index (`abacus_collections::SeriesIndex`: posting lists of the `label=value` matchers,
//! intersected, then every candidate checked against the whole filter on the live key), and
//! evaluates the range on its own series; the connection merges the shards' parts. One round
//! trip for the client whatever the number of series.
//!
//! TS.WATERFALL from to SOURCES s1 s2 ... [SOURCELABEL label] FILTER ... [WITHSOURCE] [LATEST]:
//! the matching series are grouped by all their labels but the source label (`source` by
//! default); in each group every timestamp of [from, to] gets the value of the first source,
//! in the given order, that has a sample there. Shards return each group's per-source samples
//! (already in time order); the merge is a k-way walk over at most one list per source, so it
//! costs a few comparisons per point. Replies have TS.MRANGE's shape: per group its key (the
//! group's labels as `l=v` joined by `,` in label order), its labels, and its points
//! (`[ts, value]`, or `[ts, value, source]` WITH SOURCE).

use std::collections::HashMap;

use abacus_collections::{Aggregator, Labels, Series};

/// A series' samples of a range, oldest first.
type Samples = Vec<(u64, f64)>;
use abacus_keyspace::Db;
use abacus_protocol::{Arg, Bytes, Frame, Protocol};

use super::args::*;
use super::timeseries::{labels_frame, latest_extra};
use super::ts_range::{self, find, samples_frame, RangeOpts};
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use crate::exec::{shutting_down, Access};
use crate::shard::now_ms;

const NONE: (i32, i32, i32) = (0, 0, 0);
const G: &str = "timeseries";

pub const COMMANDS: &[Spec] = &[
    Spec::conn("ts.mget", -3, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| mget(conn, access, &call.args).await), G, "Get the sample with the highest timestamp from each time series matching a specific filter"),
    Spec::conn("ts.mrange", -4, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| mrange(conn, access, &call.args, false).await), G, "Query a range across multiple time series by filters in forward direction"),
    Spec::conn("ts.mrevrange", -4, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| mrange(conn, access, &call.args, true).await), G, "Query a range across multiple time series by filters in reverse direction"),
    Spec::conn("ts.queryindex", -2, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| queryindex(conn, access, &call.args).await), G, "Get all time series keys matching a filter list"),
    Spec::conn("ts.waterfall", -4, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| waterfall(conn, access, &call.args).await), G, "For each point of the matching series grouped by all labels but the source, the value of the first source in precedence order that has it"),
];

/// One FILTER expression.
#[derive(Clone, Debug)]
enum Matcher {
    /// `l=v`, `l=(a,b)`: the label has one of the values.
    In(Box<[u8]>, Vec<Box<[u8]>>),
    /// `l!=v`, `l!=(a,b)`: the label is absent or has none of the values.
    NotIn(Box<[u8]>, Vec<Box<[u8]>>),
    /// `l=`: the label is absent.
    Absent(Box<[u8]>),
    /// `l!=`: the label is present.
    Present(Box<[u8]>),
}

type Filter = Vec<Matcher>;

/// A matcher's values, sorted so that checking a candidate is a binary search (a waterfall
/// FILTER lists thousands of instruments).
fn parse_values(v: &[u8]) -> Vec<Box<[u8]>> {
    let mut vs: Vec<Box<[u8]>> = if v.len() >= 2 && v[0] == b'(' && v[v.len() - 1] == b')' {
        v[1..v.len() - 1].split(|&c| c == b',').map(Box::from).collect()
    } else {
        vec![v.into()]
    };
    vs.sort_unstable();
    vs.dedup();
    vs
}

fn has(vs: &[Box<[u8]>], v: &[u8]) -> bool {
    vs.binary_search_by(|x| (**x).cmp(v)).is_ok()
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

/// Runs `f` on every live series of `db` matching `filter`; forgets stale index entries.
fn each_match<R>(db: &mut Db, filter: &Filter, mut f: impl FnMut(&Db, &[u8], &Series) -> Option<R>) -> Vec<R> {
    let now = now_ms();
    let positive: Vec<(&[u8], Vec<&[u8]>)> = filter
        .iter()
        .filter_map(|m| match m {
            Matcher::In(l, vs) => Some((&**l, vs.iter().map(|v| &**v).collect())),
            _ => None,
        })
        .collect();
    let ids = db.series_index.query(&positive);
    let mut out = Vec::new();
    let mut stale: Vec<Box<[u8]>> = Vec::new();
    for id in ids {
        let Some(key) = db.series_index.key(id) else { continue };
        match db.get_shared(key, now).and_then(|e| e.as_series()) {
            Some(s) => {
                if matches(s, filter) {
                    if let Some(r) = f(db, key, s) {
                        out.push(r);
                    }
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

fn pick_labels(s: &Series, w: &LabelsWanted) -> Frame {
    match w {
        LabelsWanted::None => Frame::PairMap(vec![]),
        LabelsWanted::All => labels_frame(s),
        LabelsWanted::Selected(names) => Frame::PairMap(
            names
                .iter()
                .map(|n| (Frame::Bulk(Bytes::copy_from_slice(n)), s.label(n).map_or(Frame::Null, |v| Frame::Bulk(Bytes::copy_from_slice(v)))))
                .collect(),
        ),
    }
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
    let db = conn.db;
    let parts = conn
        .worker
        .run_all(access, move |sh| {
            let now = now_ms();
            each_match(&mut sh.dbs[db], &filter, |db, key, s| {
                let extra = if latest { latest_extra(db, key, s, now) } else { None };
                let sample = extra.or(s.last()).map_or(Frame::Array(vec![]), |(t, v)| ts_range::sample_frame(t, v));
                Some((Bytes::copy_from_slice(key), pick_labels(s, &wanted), None, sample))
            })
        })
        .await;
    let Some(parts) = parts else { return shutting_down() };
    let mut rows: Vec<_> = parts.into_iter().flatten().collect();
    rows.sort_by(|x, y| x.0.cmp(&y.0));
    multi_reply(conn.proto, rows)
}

async fn queryindex(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let filter = match parse_filter(&a[1..]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let db = conn.db;
    let Some(parts) = conn.worker.run_all(access, move |sh| each_match(&mut sh.dbs[db], &filter, |_, key, _| Some(Bytes::copy_from_slice(key)))).await else {
        return shutting_down();
    };
    let mut keys: Vec<Bytes> = parts.into_iter().flatten().collect();
    keys.sort();
    let keys = keys.into_iter().map(Frame::Bulk);
    if conn.proto == Protocol::Resp3 {
        Frame::Set(keys.collect())
    } else {
        Frame::Array(keys.collect())
    }
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
    let db = conn.db;
    let o2 = opts.clone();
    let group_wanted = wanted.clone();
    let group_label = group.as_ref().map(|g| g.0.clone());
    let parts = conn
        .worker
        .run_all(access, move |sh| {
            let now = now_ms();
            each_match(&mut sh.dbs[db], &filter, |db, key, s| {
                let gv = match &group_label {
                    Some(l) => Some(Bytes::copy_from_slice(s.label(l)?)),
                    None => None,
                };
                let extra = if o2.latest { latest_extra(db, key, s, now) } else { None };
                let samples = ts_range::evaluate(s, &o2, rev, extra);
                Some((Bytes::copy_from_slice(key), pick_labels(s, &wanted), gv, samples))
            })
        })
        .await;
    let Some(parts) = parts else { return shutting_down() };
    let mut rows: Vec<_> = parts.into_iter().flatten().collect();
    rows.sort_by(|x, y| x.0.cmp(&y.0));
    let aggs = Frame::Map(vec![(Frame::Bulk(Bytes::from_static(b"aggregators")), Frame::Array(opts.agg.iter().map(|s| Frame::Bulk(Bytes::from(s.agg.name()))).collect()))]);
    let Some((label, reducer)) = group else {
        let out = rows.into_iter().map(|(k, labels, _, samples)| (k, labels, Some(aggs.clone()), samples_frame(&samples))).collect();
        return multi_reply(conn.proto, out);
    };
    let mut groups: std::collections::BTreeMap<Bytes, Vec<(Bytes, Samples)>> = Default::default();
    for (k, _, gv, samples) in rows {
        if let Some(v) = gv {
            groups.entry(v).or_default().push((k, samples));
        }
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
    multi_reply(conn.proto, out)
}

/// One source's samples for one group, from one shard.
struct Part {
    group: Labels,
    rank: usize,
    key: Bytes,
    samples: Vec<(u64, f64)>,
}

/// Upper bound on SOURCES (the merge keeps one cursor per source).
const WATERFALL_SOURCES_MAX: usize = 64;

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
    let db = conn.db;
    let label = source_label.clone();
    let srcs = sources.clone();
    let parts = conn
        .worker
        .run_all(access, move |sh| {
            let now = now_ms();
            let mut labelled = false;
            let parts = each_match(&mut sh.dbs[db], &filter, |db, key, s| {
                let src = s.label(&label)?;
                labelled = true;
                let rank = srcs.iter().position(|x| &**x == src)?;
                let mut group: Labels = s.labels.iter().filter(|(l, _)| **l != *label).cloned().collect();
                group.sort();
                let extra = if latest { latest_extra(db, key, s, now) } else { None };
                let mut samples: Vec<(u64, f64)> = s.range(from, to).collect();
                if let Some(x) = extra.filter(|x| x.0 >= from && x.0 <= to && samples.last().is_none_or(|l| l.0 < x.0)) {
                    samples.push(x);
                }
                Some(Part { group, rank, key: Bytes::copy_from_slice(key), samples })
            });
            (labelled, parts)
        })
        .await;
    let Some(parts) = parts else { return shutting_down() };
    if !parts.iter().any(|p| p.0) && parts.iter().all(|p| p.1.is_empty()) {
        return err(&format!("ERR TSDB: no series matching the filter has the source label '{}'", String::from_utf8_lossy(&source_label)));
    }
    let mut groups: HashMap<Labels, Vec<Part>> = HashMap::new();
    for p in parts.into_iter().flat_map(|p| p.1) {
        groups.entry(p.group.clone()).or_default().push(p);
    }
    let mut out: Vec<(Bytes, Frame, Option<Frame>, Frame)> = Vec::with_capacity(groups.len());
    for (group, mut members) in groups {
        // Precedence: source rank, then key (two series of one group and source: the
        // smaller key wins, deterministically).
        members.sort_by(|x, y| (x.rank, &x.key).cmp(&(y.rank, &y.key)));
        let points = merge(&members);
        let mut name = Vec::new();
        for (i, (l, v)) in group.iter().enumerate() {
            if i > 0 {
                name.push(b',');
            }
            name.extend_from_slice(l);
            name.push(b'=');
            name.extend_from_slice(v);
        }
        let labels = Frame::PairMap(group.iter().map(|(l, v)| (bulk_key(l), bulk_key(v))).collect());
        let frames = points
            .into_iter()
            .map(|(t, v, m)| {
                let mut row = vec![Frame::Integer(t as i64), Frame::SampleValue(v)];
                if with_source {
                    row.push(bulk_key(&sources[members[m].rank]));
                }
                Frame::Array(row)
            })
            .collect();
        out.push((Bytes::from(name), labels, None, Frame::Array(frames)));
    }
    out.sort_by(|x, y| x.0.cmp(&y.0));
    multi_reply(conn.proto, out)
}

/// The k-way waterfall merge of one group: every timestamp any member has, with the value of
/// the first member (in precedence order) that has it, and that member's index.
fn merge(members: &[Part]) -> Vec<(u64, f64, usize)> {
    let mut at = vec![0usize; members.len()];
    let total: usize = members.iter().map(|m| m.samples.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(total);
    loop {
        let mut best: Option<(u64, usize)> = None;
        for (i, m) in members.iter().enumerate() {
            if let Some(&(t, _)) = m.samples.get(at[i]) {
                if best.is_none_or(|(bt, _)| t < bt) {
                    best = Some((t, i));
                }
            }
        }
        let Some((t, i)) = best else { break };
        out.push((t, members[i].samples[at[i]].1, i));
        for (j, m) in members.iter().enumerate() {
            if m.samples.get(at[j]).is_some_and(|s| s.0 == t) {
                at[j] += 1;
            }
        }
    }
    out
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
