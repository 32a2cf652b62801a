//! Range queries over one time series: the options TS.RANGE, TS.REVRANGE, TS.MRANGE,
//! TS.MREVRANGE and TS.WATERFALL share (FILTER_BY_TS, FILTER_BY_VALUE, COUNT, ALIGN,
//! AGGREGATION with BUCKETTIMESTAMP and EMPTY, LATEST), and the evaluation.
//!
//! Options are found by keyword anywhere after the fixed arguments, as RedisTimeSeries 1.10
//! parses them (so their order is free and unknown words are ignored), with its error texts.
//! Evaluation streams the samples of `[from, to]` out of the chunks, applies the filters,
//! then folds buckets: one pass, no copy of the range beyond the reply.

use abacus_collections::{bucket_start, Aggregator, Series};
use abacus_protocol::{Arg, Frame};

use crate::args::*;

/// Where buckets start (ALIGN).
#[derive(Clone, Copy, Debug)]
pub enum Align {
    Start,
    End,
    At(u64),
}

/// Which timestamp a bucket reports (BUCKETTIMESTAMP).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BucketTs {
    Start,
    End,
    Mid,
}

#[derive(Clone, Debug)]
pub struct AggSpec {
    pub agg: Aggregator,
    pub bucket_ms: u64,
    pub align: Align,
    pub bucket_ts: BucketTs,
    pub empty: bool,
}

#[derive(Clone, Debug)]
pub struct RangeOpts {
    pub from: u64,
    pub to: u64,
    pub latest: bool,
    pub filter_ts: Option<Vec<u64>>,
    pub filter_value: Option<(f64, f64)>,
    pub count: Option<usize>,
    pub agg: Option<AggSpec>,
}

/// Index of keyword `kw` among `a[from..]` (case-insensitive), as RMUtil_ArgIndex.
pub fn find(a: &[Arg], from: usize, kw: &str) -> Option<usize> {
    (from..a.len()).find(|&i| is(&a[i], kw))
}

/// A timestamp argument: `-` / `+` for the ends, else a non-negative integer.
pub fn parse_ts_bound(a: &[u8], which: &'static str) -> Result<u64, Frame> {
    match a {
        b"-" => Ok(0),
        b"+" => Ok(i64::MAX as u64),
        _ => match parse_i64(a) {
            Ok(v) if v >= 0 => Ok(v as u64),
            _ => Err(err(&format!("ERR TSDB: wrong {which}"))),
        },
    }
}

/// The range options after the fixed arguments `a[..first]` (`from` and `to` at
/// `first - 2` and `first - 1`).
pub fn parse_range_opts(a: &[Arg], first: usize) -> Result<RangeOpts, Frame> {
    let from = parse_ts_bound(&a[first - 2], "fromTimestamp")?;
    let to = parse_ts_bound(&a[first - 1], "toTimestamp")?;
    let mut o = RangeOpts { from, to, latest: find(a, first, "latest").is_some(), filter_ts: None, filter_value: None, count: None, agg: None };
    if let Some(i) = find(a, first, "filter_by_ts") {
        let mut ts = Vec::new();
        for v in &a[i + 1..] {
            match parse_i64(v) {
                Ok(t) if t >= 0 => ts.push(t as u64),
                _ => break,
            }
        }
        if ts.is_empty() {
            return Err(err("ERR TSDB: FILTER_BY_TS one or more arguments are missing"));
        }
        ts.sort_unstable();
        ts.dedup();
        o.filter_ts = Some(ts);
    }
    if let Some(i) = find(a, first, "filter_by_value") {
        if i + 2 >= a.len() {
            return Err(err("ERR TSDB: FILTER_BY_VALUE one or more arguments are missing"));
        }
        let min = parse_f64(&a[i + 1]).map_err(|_| err("ERR TSDB: Couldn't parse MIN"))?;
        let max = parse_f64(&a[i + 2]).map_err(|_| err("ERR TSDB: Couldn't parse MAX"))?;
        o.filter_value = Some((min, max));
    }
    // "count" is also an aggregator's name: the word right after AGGREGATION is not COUNT.
    let count_at = (first..a.len()).find(|&i| is(&a[i], "count") && !(i > first && is(&a[i - 1], "aggregation")));
    if let Some(i) = count_at {
        match a.get(i + 1).map(|v| parse_i64(v)) {
            Some(Ok(n)) if n > 0 => o.count = Some(n as usize),
            Some(Ok(_)) => return Err(err("ERR TSDB: Invalid COUNT value")),
            _ => return Err(err("ERR TSDB: Couldn't parse COUNT")),
        }
    }
    let align_at = find(a, first, "align");
    if let Some(i) = find(a, first, "aggregation") {
        let (Some(name), Some(bucket)) = (a.get(i + 1), a.get(i + 2)) else {
            return Err(err("ERR TSDB: Couldn't parse AGGREGATION"));
        };
        let agg = Aggregator::parse(name).ok_or_else(|| err("ERR TSDB: Unknown aggregation type"))?;
        let bucket_ms = match parse_i64(bucket) {
            Ok(b) if b > 0 => b as u64,
            Ok(_) => return Err(err("ERR TSDB: bucketDuration must be greater than zero")),
            Err(_) => return Err(err("ERR TSDB: Couldn't parse AGGREGATION")),
        };
        let align = match align_at {
            None => Align::At(0),
            Some(j) => match a.get(j + 1).map(|v| &v[..]) {
                Some(v) if v == b"-" || v.eq_ignore_ascii_case(b"start") => Align::Start,
                Some(v) if v == b"+" || v.eq_ignore_ascii_case(b"end") => Align::End,
                Some(v) => match parse_i64(v) {
                    Ok(t) if t >= 0 => Align::At(t as u64),
                    _ => return Err(err("ERR TSDB: unknown ALIGN parameter")),
                },
                None => return Err(err("ERR TSDB: unknown ALIGN parameter")),
            },
        };
        let bucket_ts = match find(a, first, "buckettimestamp") {
            None => BucketTs::Start,
            Some(j) if j != i + 3 && j != i + 4 => return Err(err("ERR TSDB: BUCKETTIMESTAMP flag should be the 3rd or 4th flag after AGGREGATION flag")),
            Some(j) => match a.get(j + 1).map(|v| &v[..]) {
                Some(v) if v == b"-" || v.eq_ignore_ascii_case(b"start") => BucketTs::Start,
                Some(v) if v == b"+" || v.eq_ignore_ascii_case(b"end") => BucketTs::End,
                Some(v) if v == b"~" || v.eq_ignore_ascii_case(b"mid") => BucketTs::Mid,
                _ => return Err(err("ERR TSDB: unknown BUCKETTIMESTAMP parameter")),
            },
        };
        o.agg = Some(AggSpec { agg, bucket_ms, align, bucket_ts, empty: find(a, first, "empty").is_some() });
    } else if align_at.is_some() {
        return Err(err("ERR TSDB: ALIGN parameter can only be used with AGGREGATION"));
    }
    Ok(o)
}

/// The raw samples of the range after FILTER_BY_TS and FILTER_BY_VALUE, oldest first, with
/// `extra` (LATEST's partial bucket of a compaction) appended when it falls in the range.
pub fn filtered(s: &Series, o: &RangeOpts, extra: Option<(u64, f64)>) -> Vec<(u64, f64)> {
    let keep = |t: u64, v: f64| {
        o.filter_ts.as_ref().is_none_or(|ts| ts.binary_search(&t).is_ok()) && o.filter_value.is_none_or(|(lo, hi)| v >= lo && v <= hi)
    };
    let mut out: Vec<(u64, f64)> = s.range(o.from, o.to).filter(|&(t, v)| keep(t, v)).collect();
    if let Some((t, v)) = extra {
        if t >= o.from && t <= o.to && out.last().is_none_or(|l| l.0 < t) && keep(t, v) {
            out.push((t, v));
        }
    }
    out
}

/// Evaluates a range: the samples (or buckets) to reply, newest first when `rev`.
pub fn evaluate(s: &Series, o: &RangeOpts, rev: bool, extra: Option<(u64, f64)>) -> Vec<(u64, f64)> {
    let samples = filtered(s, o, extra);
    let mut out = match &o.agg {
        None => samples,
        // A reverse range folds its buckets in reverse: its `first` is the newest sample of
        // a bucket, as the module iterates.
        Some(spec) if rev && matches!(spec.agg, Aggregator::First | Aggregator::Last) => {
            let agg = if spec.agg == Aggregator::First { Aggregator::Last } else { Aggregator::First };
            aggregate(s, &samples, o, &AggSpec { agg, ..spec.clone() })
        }
        Some(spec) => aggregate(s, &samples, o, spec),
    };
    if rev {
        out.reverse();
    }
    if let Some(n) = o.count {
        out.truncate(n);
    }
    out
}

/// Folds `samples` into buckets per `spec`. Bucket timestamps are the buckets' own starts
/// (not clamped to the range), as the module reports them. `twa` sees the samples around
/// each bucket, inside or outside the range, and clamps its interval to the range; with
/// EMPTY its empty buckets are interpolated, up to the range's ends where a sample lies
/// beyond them.
pub fn aggregate(s: &Series, samples: &[(u64, f64)], o: &RangeOpts, spec: &AggSpec) -> Vec<(u64, f64)> {
    let align = match spec.align {
        Align::Start => o.from,
        Align::End => o.to,
        Align::At(t) => t,
    };
    let b = spec.bucket_ms;
    let twa = spec.agg == Aggregator::Twa;
    let report = |start: u64| -> u64 {
        match spec.bucket_ts {
            BucketTs::Start => start,
            BucketTs::End => start.saturating_add(b),
            BucketTs::Mid => start.saturating_add(b / 2),
        }
    };
    let lerp = |pa: (u64, f64), pb: (u64, f64), t: u64| pa.1 + (pb.1 - pa.1) * (t as f64 - pa.0 as f64) / (pb.0 as f64 - pa.0 as f64);
    // An empty bucket between samples `pa` and `pb` (EMPTY).
    let empty_value = |e: u64, pa: Option<(u64, f64)>, pb: Option<(u64, f64)>, last: Option<f64>| -> f64 {
        match spec.agg {
            Aggregator::Sum | Aggregator::Count => 0.0,
            Aggregator::Last => last.unwrap_or(f64::NAN),
            Aggregator::Twa => match (pa, pb) {
                (Some(pa), Some(pb)) => {
                    let (lo, hi) = (e.max(o.from), e.saturating_add(b).min(o.to));
                    (lerp(pa, pb, lo) + lerp(pa, pb, hi)) / 2.0
                }
                _ => f64::NAN,
            },
            _ => f64::NAN,
        }
    };
    let mut out: Vec<(u64, f64)> = Vec::new();
    if samples.is_empty() {
        return out;
    }
    let first_bucket = bucket_start(samples[0].0, b, align);
    if spec.empty && twa {
        if let Some(p) = s.before(o.from.min(samples[0].0)) {
            let mut e = bucket_start(o.from, b, align);
            while e < first_bucket {
                out.push((report(e), empty_value(e, Some(p), Some(samples[0]), None)));
                e = e.saturating_add(b);
            }
        }
    }
    let mut i = 0;
    let mut prev_bucket: Option<u64> = None;
    let mut last_value: Option<f64> = None;
    while i < samples.len() {
        let start = bucket_start(samples[i].0, b, align);
        let end = start.saturating_add(b);
        let mut j = i;
        while j < samples.len() && samples[j].0 < end {
            j += 1;
        }
        if spec.empty {
            if let Some(p) = prev_bucket {
                let mut e = p.saturating_add(b);
                while e < start {
                    out.push((report(e), empty_value(e, Some(samples[i - 1]), Some(samples[i]), last_value)));
                    e = e.saturating_add(b);
                }
            }
        }
        let bucket = &samples[i..j];
        let prev = if i > 0 { Some(samples[i - 1]) } else { s.before(samples[i].0) };
        let next = if j < samples.len() { Some(samples[j]) } else { s.after(samples[j - 1].0) };
        let (lo, hi) = if twa { (start.max(o.from), end.min(o.to)) } else { (start, end) };
        out.push((report(start), spec.agg.fold(bucket, lo, hi, prev, next)));
        last_value = Some(bucket[bucket.len() - 1].1);
        prev_bucket = Some(start);
        i = j;
    }
    if spec.empty && twa {
        let last = samples[samples.len() - 1];
        if let (Some(n), Some(p)) = (s.after(last.0.max(o.to)), prev_bucket) {
            let stop = bucket_start(o.to, b, align);
            let mut e = p.saturating_add(b);
            while e <= stop {
                out.push((report(e), empty_value(e, Some(last), Some(n), None)));
                e = e.saturating_add(b);
            }
        }
    }
    out
}

/// A reply's samples: `[[ts, value], ...]`.
pub fn samples_frame(samples: &[(u64, f64)]) -> Frame {
    Frame::Array(samples.iter().map(|&(t, v)| sample_frame(t, v)).collect())
}

pub fn sample_frame(t: u64, v: f64) -> Frame {
    Frame::Array(vec![Frame::Integer(t as i64), Frame::SampleValue(v)])
}
