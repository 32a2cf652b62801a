//! The shard side of the multi-series time-series commands (TS.MGET, TS.MRANGE,
//! TS.MREVRANGE, TS.QUERYINDEX; TS.WATERFALL's filter, with its groups in
//! `ts_waterfall.rs`): FILTER's parsing and matching, label selection, and each shard's rows
//! of a reply, encoded. The commands themselves (the server's `cmd/ts_multi.rs`: their table
//! entries, the fan-out to every shard with `run_all`, the merge of the shards' parts) run in
//! the connection task; these run on one shard's databases, with no connection.
//!
//! Matching: a shard answers its FILTER from its label index (`abacus_collections::
//! SeriesIndex`: posting lists of the `label=value` matchers, intersected), then looks up
//! every candidate's key to check that it still holds a series (the index learns lazily that
//! a key went, and forgets it then).
//!
//! Why the rows are encoded here: a FILTER may match hundreds of thousands of series, and a
//! frame tree (a key, a labels map and a sample array per series) built on the shard, sorted
//! and encoded on the connection's thread cost several microseconds per series, all on one
//! thread. So each shard encodes its rows straight into one buffer ([`Rows`]), sorted by key,
//! in parallel with the other shards, and the connection merges the sorted runs by copying
//! bytes. (TS.MRANGE's GROUPBY still goes through frames: its groups need every member's
//! samples on the connection; [`group_rows`] gives them.)

use abacus_collections::{IdMatcher, LabelMatcher, Series};
use abacus_keyspace::{prefetch_read, Db};
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use super::timeseries::latest_extra;
use super::ts_range::{self, find, RangeOpts};

/// One FILTER expression.
#[derive(Clone, Debug)]
pub enum Matcher {
    /// `l=v`, `l=(a,b)`: the label has one of the values.
    In(Box<[u8]>, Values),
    /// `l!=v`, `l!=(a,b)`: the label is absent or has none of the values.
    NotIn(Box<[u8]>, Values),
    /// `l=`: the label is absent.
    Absent(Box<[u8]>),
    /// `l!=`: the label is present.
    Present(Box<[u8]>),
}

pub type Filter = Vec<Matcher>;

/// A matcher's values, sorted and deduplicated.
#[derive(Clone, Debug)]
pub struct Values {
    sorted: Vec<Box<[u8]>>,
}

pub fn parse_values(v: &[u8]) -> Values {
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

pub fn parse_filter(args: &[Arg]) -> Result<Filter, Frame> {
    let mut f = Vec::new();
    for a in args {
        let Some(eq) = a.iter().position(|&c| c == b'=') else { return Err(err("ERR TSDB: failed parsing labels")) };
        let neg = eq > 0 && a[eq - 1] == b'!';
        let label: Box<[u8]> = a[..if neg { eq - 1 } else { eq }].into();
        if label.is_empty() {
            return Err(err("ERR TSDB: failed parsing labels"));
        }
        let value = &a[eq + 1..];
        if value.first() == Some(&b'(') && (value.len() < 2 || value.last() != Some(&b')')) {
            return Err(err("ERR TSDB: failed parsing labels"));
        }
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

pub fn matches(s: &Series, f: &Filter) -> bool {
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
pub fn each_match_id<R>(db: &mut Db, filter: &Filter, ids: &[u32], now: u64, mut f: impl FnMut(&Db, u32, &[u8], &Series) -> Option<R>) -> Vec<R> {
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
pub fn candidates(db: &Db, filter: &Filter) -> Vec<u32> {
    db.series_index.query(&resolve(db, filter))
}

/// [`each_match_id`] without the id.
pub fn each_match<R>(db: &mut Db, filter: &Filter, now: u64, mut f: impl FnMut(&Db, &[u8], &Series) -> Option<R>) -> Vec<R> {
    let ids = candidates(db, filter);
    each_match_id(db, filter, &ids, now, |db, _, key, s| f(db, key, s))
}

/// WITHLABELS / SELECTED_LABELS / neither.
#[derive(Clone)]
pub enum LabelsWanted {
    None,
    All,
    Selected(Vec<Box<[u8]>>),
}

pub fn labels_wanted(a: &[Arg], first: usize, end: usize) -> Result<LabelsWanted, Frame> {
    let with = find(&a[..end], first, "withlabels");
    let sel = find(&a[..end], first, "selected_labels");
    match (with, sel) {
        (Some(_), Some(_)) => Err(err("ERR TSDB: cannot accept WITHLABELS and SELECT_LABELS together")),
        (Some(_), None) => Ok(LabelsWanted::All),
        (None, Some(i)) => {
            let names: Vec<Box<[u8]>> = a[i + 1..end].iter().take_while(|x| !is_keyword(x)).map(|x| Box::from(&x[..])).collect();
            if names.is_empty() {
                return Err(err("ERR TSDB: SELECT_LABELS should have at least 1 parameter"));
            }
            Ok(LabelsWanted::Selected(names))
        }
        (None, None) => Ok(LabelsWanted::None),
    }
}

fn is_keyword(a: &[u8]) -> bool {
    ["latest", "withlabels", "selected_labels", "filter", "count", "align", "aggregation", "filter_by_ts", "filter_by_value", "buckettimestamp", "empty", "groupby"].iter().any(|k| is(a, k))
}

pub fn filter_args(a: &[Arg], first: usize) -> Result<(usize, usize), Frame> {
    let Some(fi) = find(a, first, "filter") else { return Err(err("ERR TSDB: missing FILTER argument")) };
    let end = find(a, fi + 1, "groupby").unwrap_or(a.len());
    if end == fi + 1 {
        return Err(err("ERR TSDB: missing labels for filter argument"));
    }
    Ok((fi, end))
}

/// One shard's rows of a multi-series reply (TS.MGET, TS.MRANGE, TS.QUERYINDEX), encoded on
/// the shard's thread: each row is its key followed by its encoded element; `rows` holds
/// (row start, key end, row end) in `buf`, sorted by key, so that the connection only merges
/// the shards' sorted runs and copies bytes.
#[derive(Default)]
pub struct Rows {
    pub buf: Vec<u8>,
    pub rows: Vec<(u32, u32, u32)>,
}

impl Rows {
    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        let (a, k, _) = self.rows[i];
        &self.buf[a as usize..k as usize]
    }

    #[inline]
    pub fn element(&self, i: usize) -> &[u8] {
        let (_, k, e) = self.rows[i];
        &self.buf[k as usize..e as usize]
    }

    /// Starts a row for `key`; the caller appends the element to `buf`, then calls `end`.
    pub fn start(&mut self, key: &[u8]) -> (u32, u32) {
        let a = len32(self.buf.len());
        self.buf.extend_from_slice(key);
        (a, len32(self.buf.len()))
    }

    pub fn end(&mut self, (a, k): (u32, u32)) {
        self.rows.push((a, k, len32(self.buf.len())));
    }

    pub fn sort(&mut self) {
        let buf = &self.buf;
        self.rows.sort_unstable_by(|x, y| buf[x.0 as usize..x.1 as usize].cmp(&buf[y.0 as usize..y.1 as usize]));
    }
}

/// A series' labels as TS.MGET and TS.MRANGE reply them (WITHLABELS: all; SELECTED_LABELS: the
/// named ones, null when absent; neither: none), encoded.
pub fn put_labels(out: &mut Vec<u8>, s: &Series, w: &LabelsWanted, resp3: bool) {
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

/// Samples as [`ts_range::samples_frame`] encodes them.
pub fn put_samples(out: &mut Vec<u8>, samples: &[(u64, f64)], resp3: bool) {
    put_len(out, b'*', samples.len());
    for &(t, v) in samples {
        put_len(out, b'*', 2);
        put_sample(out, t, v, resp3);
    }
}

/// A shard's rows of TS.MGET over `db`: per matching series [key, labels, sample] (RESP2), or
/// key => [labels, sample] (RESP3), the sample LATEST's open bucket where `latest` finds one,
/// else the last stored one.
pub fn mget_rows(db: &mut Db, filter: &Filter, wanted: &LabelsWanted, latest: bool, resp3: bool, now: u64) -> Rows {
    let mut rows = Rows::default();
    each_match(db, filter, now, |db, key, s| {
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
        put_labels(&mut rows.buf, s, wanted, resp3);
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
}

/// A shard's rows of TS.QUERYINDEX over `db`: the matching keys.
pub fn queryindex_rows(db: &mut Db, filter: &Filter, now: u64) -> Rows {
    let mut rows = Rows::default();
    each_match(db, filter, now, |_, key, _| {
        let r = rows.start(key);
        put_bulk(&mut rows.buf, key);
        rows.end(r);
        Some(())
    });
    rows.sort();
    rows
}

/// A shard's rows of TS.MRANGE / TS.MREVRANGE (`rev`) without GROUPBY over `db`: per matching
/// series [key, labels, samples] (RESP2), or key => [labels, meta, samples] (RESP3), `meta`
/// being the reply's aggregators map, encoded once by the caller.
#[allow(clippy::too_many_arguments)]
pub fn mrange_rows(db: &mut Db, filter: &Filter, opts: &RangeOpts, rev: bool, wanted: &LabelsWanted, resp3: bool, meta: &[u8], now: u64) -> Rows {
    let mut rows = Rows::default();
    each_match(db, filter, now, |db, key, s| {
        let extra = if opts.latest { latest_extra(db, key, s, now) } else { None };
        let samples = ts_range::evaluate(s, opts, rev, extra);
        let r = rows.start(key);
        if resp3 {
            put_bulk(&mut rows.buf, key);
            put_len(&mut rows.buf, b'*', 3);
        } else {
            put_len(&mut rows.buf, b'*', 3);
            put_bulk(&mut rows.buf, key);
        }
        put_labels(&mut rows.buf, s, wanted, resp3);
        if resp3 {
            rows.buf.extend_from_slice(meta);
        }
        put_samples(&mut rows.buf, &samples, resp3);
        rows.end(r);
        Some(())
    });
    rows.sort();
    rows
}

/// A series of a GROUPBY: its key, its value of the group label, its samples of the range.
pub type GroupRow = (Bytes, Bytes, Vec<(u64, f64)>);

/// A shard's part of TS.MRANGE / TS.MREVRANGE (`rev`) with GROUPBY `label` over `db`: per
/// matching series that has the label, (key, the label's value, the range's samples); the
/// connection groups and reduces them.
pub fn group_rows(db: &mut Db, filter: &Filter, label: &[u8], opts: &RangeOpts, rev: bool, now: u64) -> Vec<GroupRow> {
    each_match(db, filter, now, |db, key, s| {
        let gv = Bytes::copy_from_slice(s.label(label)?);
        let extra = if opts.latest { latest_extra(db, key, s, now) } else { None };
        let samples = ts_range::evaluate(s, opts, rev, extra);
        Some((Bytes::copy_from_slice(key), gv, samples))
    })
}

pub fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `prefix n CRLF` (an aggregate's header). Lengths under 100 (every header and most bulk
/// lengths of a waterfall reply, five per group) are written as one small array: callgrind
/// counted ~120 instructions per `put_bulk` through `itoa` and three appends.
#[inline]
pub fn put_len(out: &mut Vec<u8>, prefix: u8, n: usize) {
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
pub fn put_bulk(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A sample's timestamp and value, as [`ts_range::sample_frame`] encodes them (without the
/// `*2` header): `:ts` then the value (RESP3 a double, RESP2 a simple string).
pub fn put_sample(out: &mut Vec<u8>, t: u64, v: f64, resp3: bool) {
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

