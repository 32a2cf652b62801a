//! SUMMARY.QUERY's merge: stored summary keys in, one row per group out.
//!
//! A query names a summary, an optional time range of buckets (`FROM t` inclusive, `TO t`
//! exclusive, Unix seconds, compared with each bucket's start), dimension values to keep
//! (`WHERE dim value ...`, all must match) and how to group: by nothing (one row), by some
//! dimensions, or by bucket. Each shard folds the keys it owns into [`Group`]s
//! ([`Query::group_of`] says which group a key belongs to), and the coordinator merges the
//! shards' groups ([`Group::merge`]): counts and sums add, minima and maxima keep the
//! extreme, `last` keeps the value of the latest bucket, HLL sketches union (the result is
//! the union's cardinality), distinct sets union (the result is the union's size).

use std::collections::HashSet;
use std::fmt;

use abacus_hll::Hll;

use abacus_int::wire::{put_bytes, put_number, Reader};
use abacus_int::Number;

use crate::batch::{add_numbers, Acc};
use crate::keys::KeyParts;
use crate::rules::{Bucket, MetricKind, Rules, Summary};

#[derive(Debug, Clone, PartialEq)]
pub enum GroupBy {
    All,
    Dims(Vec<usize>),
    Bucket,
}

/// A parsed SUMMARY.QUERY.
#[derive(Debug, Clone)]
pub struct Query {
    pub summary: usize,
    pub from: Option<i64>,
    pub to: Option<i64>,
    /// (dimension position, value).
    pub wheres: Vec<(usize, String)>,
    pub group: GroupBy,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueryError(pub String);

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn text(a: &[u8]) -> Result<&str, QueryError> {
    std::str::from_utf8(a).map_err(|_| QueryError("ERR syntax error".into()))
}

impl Query {
    /// Parses `name [FROM t] [TO t] [WHERE dim value ...] [GROUPBY dim ... | GROUPBY BUCKET]`
    /// (the arguments after the command name).
    pub fn parse(rules: &Rules, args: &[&[u8]]) -> Result<Query, QueryError> {
        let name = text(args.first().ok_or_else(|| QueryError("ERR wrong number of arguments".into()))?)?;
        let summary = rules.summary(name).ok_or_else(|| QueryError(format!("ERR no such summary '{name}'")))?;
        let s = &rules.summaries[summary];
        let mut q = Query { summary, from: None, to: None, wheres: Vec::new(), group: GroupBy::All };
        let dim = |a: &[u8]| -> Result<usize, QueryError> {
            let d = text(a)?;
            s.dim_names.iter().position(|n| n == d).ok_or_else(|| QueryError(format!("ERR '{d}' is not a dimension of summary '{}'", s.name)))
        };
        let keyword = |a: &[u8]| ["from", "to", "where", "groupby"].iter().any(|k| a.eq_ignore_ascii_case(k.as_bytes()));
        let mut i = 1;
        let mut grouped = false;
        while i < args.len() {
            let a = args[i];
            if a.eq_ignore_ascii_case(b"from") || a.eq_ignore_ascii_case(b"to") {
                let v = args.get(i + 1).ok_or_else(|| QueryError("ERR syntax error".into()))?;
                let t = text(v)?.parse::<i64>().map_err(|_| QueryError("ERR FROM and TO take Unix seconds (an integer)".into()))?;
                if a.eq_ignore_ascii_case(b"from") {
                    q.from = Some(t);
                } else {
                    q.to = Some(t);
                }
                i += 2;
            } else if a.eq_ignore_ascii_case(b"where") {
                i += 1;
                let start = i;
                while i + 1 < args.len() && !keyword(args[i]) {
                    q.wheres.push((dim(args[i])?, text(args[i + 1])?.to_string()));
                    i += 2;
                }
                if i == start {
                    return Err(QueryError("ERR WHERE needs dimension value pairs".into()));
                }
            } else if a.eq_ignore_ascii_case(b"groupby") {
                if grouped {
                    return Err(QueryError("ERR GROUPBY given twice".into()));
                }
                grouped = true;
                i += 1;
                if args.get(i).is_some_and(|b| b.eq_ignore_ascii_case(b"bucket")) {
                    if s.bucket == Bucket::None {
                        return Err(QueryError(format!("ERR summary '{}' has no time bucket", s.name)));
                    }
                    q.group = GroupBy::Bucket;
                    i += 1;
                    continue;
                }
                let mut dims = Vec::new();
                while i < args.len() && !keyword(args[i]) {
                    let d = dim(args[i])?;
                    if !dims.contains(&d) {
                        dims.push(d);
                    }
                    i += 1;
                }
                if dims.is_empty() {
                    return Err(QueryError("ERR GROUPBY needs dimensions or BUCKET".into()));
                }
                q.group = GroupBy::Dims(dims);
            } else {
                return Err(QueryError("ERR syntax error".into()));
            }
        }
        Ok(q)
    }

    /// The group a key belongs to (its values for the grouping), or None if the query skips it.
    pub fn group_of(&self, s: &Summary, parts: &KeyParts) -> Option<Vec<String>> {
        if let Some(b) = parts.bucket {
            if self.from.is_some_and(|f| b < f) || self.to.is_some_and(|t| b >= t) {
                return None;
            }
        }
        if self.wheres.iter().any(|(d, v)| &parts.dims[*d] != v) {
            return None;
        }
        let _ = s;
        Some(match &self.group {
            GroupBy::All => Vec::new(),
            GroupBy::Dims(ds) => ds.iter().map(|&d| parts.dims[d].clone()).collect(),
            GroupBy::Bucket => vec![parts.bucket.unwrap_or(0).to_string()],
        })
    }

    /// The names of the grouping columns, in row order.
    pub fn group_names(&self, s: &Summary) -> Vec<String> {
        match &self.group {
            GroupBy::All => Vec::new(),
            GroupBy::Dims(ds) => ds.iter().map(|&d| s.dim_names[d].clone()).collect(),
            GroupBy::Bucket => vec!["bucket".into()],
        }
    }
}

/// One group's merged metrics (indexes like the summary's metrics).
#[derive(Debug, Clone)]
pub struct Group {
    pub key: Vec<String>,
    accs: Vec<Option<Acc>>,
    /// For `last` metrics: the bucket the value came from.
    last_at: Vec<i64>,
    hlls: Vec<Option<Hll>>,
    sets: Vec<Option<HashSet<Vec<u8>>>>,
}

/// A cell of a result row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Int(i64),
    /// A sum, minimum or maximum: exact decimal or double (see `abacus_int::Number`).
    Num(Number),
    Text(String),
}

impl Group {
    pub fn new(s: &Summary, key: Vec<String>) -> Group {
        let n = s.metrics.len();
        Group { key, accs: vec![None; n], last_at: vec![i64::MIN; n], hlls: vec![None; n], sets: vec![None; n] }
    }

    /// Folds in a stored hash field's text (`metric` is the field's metric index).
    pub fn add_field(&mut self, s: &Summary, metric: usize, value: &[u8], bucket: Option<i64>) {
        let Ok(v) = std::str::from_utf8(value) else { return };
        let x = Number::parse(value);
        let acc = &mut self.accs[metric];
        match (s.metrics[metric].kind, acc.as_mut()) {
            (MetricKind::Count, Some(Acc::Count(n))) => *n += v.parse::<i64>().unwrap_or(0),
            (MetricKind::Count, None) => *acc = Some(Acc::Count(v.parse::<i64>().unwrap_or(0))),
            (MetricKind::Sum(_), Some(Acc::Sum(t))) => *t = add_numbers(*t, x.unwrap_or(Number::ZERO)),
            (MetricKind::Sum(_), None) => *acc = x.map(Acc::Sum),
            (MetricKind::Min(_), Some(Acc::Min(m))) => *m = min_number(*m, x),
            (MetricKind::Min(_), None) => *acc = x.map(Acc::Min),
            (MetricKind::Max(_), Some(Acc::Max(m))) => *m = max_number(*m, x),
            (MetricKind::Max(_), None) => *acc = x.map(Acc::Max),
            (MetricKind::Last(_), _) => {
                let at = bucket.unwrap_or(0);
                if at >= self.last_at[metric] {
                    self.last_at[metric] = at;
                    *acc = Some(Acc::Last(v.to_string()));
                }
            }
            _ => {}
        }
    }

    /// Unions a stored sketch into the group's.
    pub fn add_hll(&mut self, metric: usize, h: &Hll) -> Result<(), String> {
        match &mut self.hlls[metric] {
            Some(mine) => mine.union(h).map(|_| ()).map_err(|e| e.to_string()),
            slot @ None => {
                *slot = Some(h.clone());
                Ok(())
            }
        }
    }

    pub fn add_members(&mut self, metric: usize, members: impl Iterator<Item = Vec<u8>>) {
        self.sets[metric].get_or_insert_with(HashSet::new).extend(members);
    }

    /// Merges another shard's part of the same group.
    pub fn merge(&mut self, s: &Summary, other: Group) -> Result<(), String> {
        for (mi, acc) in other.accs.into_iter().enumerate() {
            let Some(acc) = acc else { continue };
            match (&mut self.accs[mi], acc) {
                (Some(Acc::Count(a)), Acc::Count(b)) => *a += b,
                (Some(Acc::Sum(a)), Acc::Sum(b)) => *a = add_numbers(*a, b),
                (Some(Acc::Min(a)), Acc::Min(b)) => *a = min_number(*a, Some(b)),
                (Some(Acc::Max(a)), Acc::Max(b)) => *a = max_number(*a, Some(b)),
                (mine @ Some(Acc::Last(_)), b @ Acc::Last(_)) => {
                    if other.last_at[mi] >= self.last_at[mi] {
                        self.last_at[mi] = other.last_at[mi];
                        *mine = Some(b);
                    }
                }
                (mine, b) => {
                    self.last_at[mi] = other.last_at[mi];
                    *mine = Some(b);
                }
            }
        }
        for (mi, h) in other.hlls.into_iter().enumerate() {
            if let Some(h) = h {
                self.add_hll(mi, &h)?;
            }
        }
        for (mi, set) in other.sets.into_iter().enumerate() {
            if let Some(set) = set {
                self.add_members(mi, set.into_iter());
            }
        }
        let _ = s;
        Ok(())
    }

    /// The row's metric cells, in the summary's metric order: a count is an integer, a sum,
    /// minimum or maximum a number (exact decimal where its inputs were), last the stored
    /// text, an HLL the union's cardinality rounded to an integer (postgresql-hll's
    /// `round(hll_cardinality(...))`: half away from zero), distinct the union's size. A
    /// metric no key had is 0 (or an empty text for last).
    pub fn cells(&self, s: &Summary) -> Vec<(String, Cell)> {
        s.metrics
            .iter()
            .enumerate()
            .map(|(mi, m)| {
                let cell = match (m.kind, &self.accs[mi]) {
                    (MetricKind::Hll(_), _) => Cell::Int(self.hlls[mi].as_ref().and_then(|h| h.cardinality()).unwrap_or(0.0).round() as i64),
                    (MetricKind::Distinct(_), _) => Cell::Int(self.sets[mi].as_ref().map_or(0, |s| s.len() as i64)),
                    (_, Some(Acc::Count(n))) => Cell::Int(*n),
                    (_, Some(Acc::Sum(x) | Acc::Min(x) | Acc::Max(x))) => Cell::Num(*x),
                    (_, Some(Acc::Last(t))) => Cell::Text(t.clone()),
                    (MetricKind::Count, None) => Cell::Int(0),
                    (MetricKind::Last(_), None) => Cell::Text(String::new()),
                    (_, None) => Cell::Num(Number::ZERO),
                };
                (m.name.clone(), cell)
            })
            .collect()
    }
}

/// A group's partial state on the wire between cluster nodes (the server's `fanout.rs`):
/// what [`Group::merge`] folds, exactly (decimals as mantissa and scale, doubles as their
/// bits, sketches in postgresql-hll's bytes). Little-endian; lengths as u32.
impl Group {
    pub fn to_wire(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.key.len() as u32).to_le_bytes());
        for k in &self.key {
            put_bytes(&mut out, k.as_bytes());
        }
        out.extend_from_slice(&(self.accs.len() as u32).to_le_bytes());
        for mi in 0..self.accs.len() {
            match &self.accs[mi] {
                None => out.push(0),
                Some(Acc::Count(n)) => {
                    out.push(1);
                    out.extend_from_slice(&n.to_le_bytes());
                }
                Some(Acc::Sum(x)) => {
                    out.push(2);
                    put_number(&mut out, *x);
                }
                Some(Acc::Min(x)) => {
                    out.push(3);
                    put_number(&mut out, *x);
                }
                Some(Acc::Max(x)) => {
                    out.push(4);
                    put_number(&mut out, *x);
                }
                Some(Acc::Last(t)) => {
                    out.push(5);
                    put_bytes(&mut out, t.as_bytes());
                }
            }
            out.extend_from_slice(&self.last_at[mi].to_le_bytes());
            match &self.hlls[mi] {
                None => out.push(0),
                Some(h) => {
                    out.push(1);
                    put_bytes(&mut out, &h.to_bytes());
                }
            }
            match &self.sets[mi] {
                None => out.push(0),
                Some(set) => {
                    out.push(1);
                    out.extend_from_slice(&(set.len() as u32).to_le_bytes());
                    for m in set {
                        put_bytes(&mut out, m);
                    }
                }
            }
        }
        out
    }

    /// [`Group::to_wire`]'s bytes back, for summary `s`; None if they are malformed.
    pub fn from_wire(s: &Summary, bytes: &[u8]) -> Option<Group> {
        let mut r = Reader(bytes);
        let keys = r.len()?;
        let mut key = Vec::with_capacity(keys.min(64));
        for _ in 0..keys {
            key.push(String::from_utf8(r.bytes()?).ok()?);
        }
        let mut g = Group::new(s, key);
        if r.len()? != g.accs.len() {
            return None;
        }
        for mi in 0..g.accs.len() {
            g.accs[mi] = match r.byte()? {
                0 => None,
                1 => Some(Acc::Count(r.i64()?)),
                2 => Some(Acc::Sum(r.number()?)),
                3 => Some(Acc::Min(r.number()?)),
                4 => Some(Acc::Max(r.number()?)),
                5 => Some(Acc::Last(String::from_utf8(r.bytes()?).ok()?)),
                _ => return None,
            };
            g.last_at[mi] = r.i64()?;
            if r.byte()? == 1 {
                g.hlls[mi] = Some(Hll::from_bytes(&r.bytes()?).ok()?);
            }
            if r.byte()? == 1 {
                let n = r.len()?;
                let mut set = HashSet::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    set.insert(r.bytes()?);
                }
                g.sets[mi] = Some(set);
            }
        }
        r.is_empty().then_some(g)
    }
}

/// The smaller of `m` and `x` (`m` when `x` is not a number).
fn min_number(m: Number, x: Option<Number>) -> Number {
    match x {
        Some(x) if x.cmp_value(m).is_lt() => x,
        _ => m,
    }
}

/// The larger of `m` and `x` (`m` when `x` is not a number).
fn max_number(m: Number, x: Option<Number>) -> Number {
    match x {
        Some(x) if x.cmp_value(m).is_gt() => x,
        _ => m,
    }
}
