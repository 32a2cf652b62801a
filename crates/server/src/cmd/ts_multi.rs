//! Multi-series time series commands: TS.MGET, TS.MRANGE, TS.MREVRANGE, TS.QUERYINDEX (in
//! RedisTimeSeries 1.10's dialect) and TS.WATERFALL (Abacus's source waterfall): their table
//! entries, the fan-out and the merge of the shards' parts on the connection.
//!
//! Each runs on every shard at once (`run_all`): a shard answers its FILTER from its label
//! index and evaluates the range on its own series (`abacus_commands::ts_filter`: matching
//! and each shard's rows, encoded there; `abacus_commands::ts_waterfall`: the waterfall's
//! groups); the connection merges the shards' parts. One round trip for the client whatever
//! the number of series.
//!
//! The merges: TS.MGET, TS.MRANGE and TS.QUERYINDEX get each shard's rows encoded and sorted
//! by key (`Rows`), and merge the sorted runs by copying bytes into a `Frame::Encoded` reply
//! ([`merge_rows`]). TS.MRANGE's GROUPBY still goes through frames: its groups need every
//! member's samples on the connection.
//!
//! TS.WATERFALL from to SOURCES s1 s2 ... [SOURCELABEL label] FILTER ... [WITHSOURCE] [LATEST]:
//! the matching series are grouped by all their labels but the source label (`source` by
//! default); in each group every timestamp of [from, to] gets the value of the first source,
//! in the given order, that has a sample there. Each shard returns its groups sorted by
//! identity (`WfPart`); the connection walks the shards' sorted groups together, merges the
//! parts of a group found on several shards by the same rule, and encodes the reply as it
//! goes. Replies have TS.MRANGE's shape: per group its key (the group's labels as `l=v` joined
//! by `,` in label order), its labels, and its points (`[ts, value]`, or `[ts, value, source]`
//! WITH SOURCE), groups in the order of their names.

use abacus_collections::{Aggregator, Series};

/// A series' samples of a range, oldest first.
type Samples = Vec<(u64, f64)>;
use abacus_keyspace::Db;
use abacus_protocol::{Arg, Bytes, Frame, Protocol};

use super::args::*;
use super::ts_filter::{self, filter_args, labels_wanted, parse_filter, put_bulk, put_len, put_sample, LabelsWanted, Rows};
use super::ts_range::{self, find, samples_frame, RangeOpts};
use super::ts_waterfall::{put_group_head, waterfall_shard, WfPart, WfQuery};
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

/// Cluster mode: the other shard groups' parts of this command's reply (`fanout.rs`), as
/// rows to merge with this node's; none outside cluster mode, on a coordinator's connection,
/// or inside MULTI (a transaction's shards are held: it answers with this node's data).
async fn peer_parts(conn: &Conn, access: Access<'_>, a: &[Arg], resp3: bool) -> Result<Vec<Bytes>, Frame> {
    if matches!(access, Access::Locked(_)) {
        return Ok(Vec::new());
    }
    let peers = crate::fanout::peers(conn);
    if peers.is_empty() {
        return Ok(Vec::new());
    }
    crate::fanout::ask_all(&conn.worker.server, &peers, a.iter().map(|x| x.to_vec()).collect(), resp3).await
}

/// This node's shards' rows and the peers' parts (see [`peer_parts`]) merged in key order.
fn merge_all(mut parts: Vec<Rows>, peers: Result<Vec<Bytes>, Frame>, prefix: u8) -> Frame {
    let peers = match peers {
        Ok(p) => p,
        Err(e) => return e,
    };
    for p in &peers {
        match crate::fanout::rows(p) {
            Ok(r) => parts.push(r),
            Err(e) => return e,
        }
    }
    Frame::Encoded(merge_rows(&parts, prefix))
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
    let (parts, peers) = tokio::join!(
        conn.worker.run_all(access, move |sh| ts_filter::mget_rows(&mut sh.dbs[db], &filter, &wanted, latest, resp3, now_ms())),
        peer_parts(conn, access, a, resp3)
    );
    let Some(parts) = parts else { return shutting_down() };
    merge_all(parts, peers, if resp3 { b'%' } else { b'*' })
}

async fn queryindex(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let filter = match parse_filter(&a[1..]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let db = conn.client.db;
    let resp3 = conn.client.proto == Protocol::Resp3;
    let (parts, peers) = tokio::join!(
        conn.worker.run_all(access, move |sh| ts_filter::queryindex_rows(&mut sh.dbs[db], &filter, now_ms())),
        peer_parts(conn, access, a, resp3)
    );
    let Some(parts) = parts else { return shutting_down() };
    merge_all(parts, peers, if resp3 { b'~' } else { b'*' })
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
        let (parts, peers) = tokio::join!(
            conn.worker.run_all(access, move |sh| ts_filter::mrange_rows(&mut sh.dbs[db], &filter, &opts, rev, &wanted, resp3, &meta, now_ms())),
            peer_parts(conn, access, a, resp3)
        );
        let Some(parts) = parts else { return shutting_down() };
        return merge_all(parts, peers, if resp3 { b'%' } else { b'*' });
    };
    let o2 = opts.clone();
    let group_wanted = wanted.clone();
    let group_label = label.clone();
    // Cluster mode: each peer sends its matching series ungrouped (below), always in RESP3
    // (exact doubles); the groups are made here over every node's series.
    let (parts, peers) = tokio::join!(
        conn.worker.run_all(access, move |sh| ts_filter::group_rows(&mut sh.dbs[db], &filter, &group_label, &o2, rev, now_ms())),
        peer_parts(conn, access, a, true)
    );
    let Some(parts) = parts else { return shutting_down() };
    let mut rows: Vec<_> = parts.into_iter().flatten().collect();
    if conn.client.local_only {
        // A coordinator's request (`fanout.rs`): this node's series ungrouped, as
        // key => [group label's value, samples].
        return Frame::Map(rows.into_iter().map(|(k, gv, s)| (Frame::Bulk(k), Frame::Array(vec![Frame::Bulk(gv), samples_frame(&s)]))).collect());
    }
    match peers {
        Ok(peers) => {
            for p in peers {
                match group_rows_of(&p) {
                    Some(r) => rows.extend(r),
                    None => return err("ERR a node's part of the cluster-wide query is malformed"),
                }
            }
        }
        Err(e) => return e,
    }
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

/// A peer's ungrouped series (see `mrange`): key => [group label's value, samples].
fn group_rows_of(reply: &[u8]) -> Option<Vec<(Bytes, Bytes, Samples)>> {
    let (Frame::Map(pairs), _) = abacus_protocol::parse_frame(reply).ok()?? else { return None };
    pairs
        .into_iter()
        .map(|(k, v)| {
            let (Frame::Bulk(k), Frame::Array(mut v)) = (k, v) else { return None };
            if v.len() != 2 {
                return None;
            }
            let samples = crate::fanout::samples(&v[1])?;
            let Frame::Bulk(gv) = v.swap_remove(0) else { return None };
            Some((k, gv, samples))
        })
        .collect()
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
    let db = conn.client.db;
    let resp3 = conn.client.proto == Protocol::Resp3;
    let shards = conn.worker.shards();
    let q = WfQuery { filter, label: source_label.clone(), sources: sources.clone(), from, to, latest, resp3, shards };
    // Cluster mode: the peers' shards' parts join this node's in the one merge.
    let (parts, peers) = tokio::join!(
        conn.worker.run_all(access, move |sh| waterfall_shard(&mut sh.dbs[db], &q, sh.id, now_ms())),
        peer_parts(conn, access, a, resp3)
    );
    let Some(mut parts) = parts else { return shutting_down() };
    if conn.client.local_only {
        // A coordinator's request (`fanout.rs`): the shards' parts as they are.
        return Frame::Array(parts.iter().map(|p| Frame::Bulk(Bytes::from(p.to_wire()))).collect());
    }
    match peers {
        Ok(replies) => {
            for reply in replies {
                let Some(more) = waterfall_parts_of(&reply, sources.len()) else { return err("ERR a node's part of the cluster-wide query is malformed") };
                parts.extend(more);
            }
        }
        Err(e) => return e,
    }
    if !parts.iter().any(|p| p.labelled) {
        return err(&format!("ERR TSDB: no series matching the filter has the source label '{}'", String::from_utf8_lossy(&source_label)));
    }
    Frame::Encoded(waterfall_reply(&parts, &sources, with_source, resp3))
}

/// A peer's waterfall parts (see `waterfall`): an array of [`WfPart::to_wire`] bytes.
fn waterfall_parts_of(reply: &[u8], sources: usize) -> Option<Vec<WfPart>> {
    let (Frame::Array(items), _) = abacus_protocol::parse_frame(reply).ok()?? else { return None };
    items
        .into_iter()
        .map(|f| match f {
            Frame::Bulk(b) => WfPart::from_wire(&b, sources),
            _ => None,
        })
        .collect()
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
