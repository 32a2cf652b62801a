//! Summary key names: `name:dim1:dim2:bucket` for the hash, `...:metric` for an HLL or
//! distinct metric.
//!
//! A dimension value is written with `%` and `:` escaped (`%25`, `%3A`) so a key always
//! splits back into exactly its parts: the query reads dimension values and buckets from the
//! keys themselves, so they stay ordinary keys with no side index to keep in step (a side
//! index would have to be logged, snapshotted and replayed with them).

use crate::rules::{Bucket, Summary};

/// Appends `v` to `out` with `%` and `:` escaped.
pub fn escape(v: &str, out: &mut String) {
    // A byte scan, not `contains(['%', ':'])` (a char searcher, 5% of a v1 ingest's fold).
    if !v.bytes().any(|b| b == b'%' || b == b':') {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

fn unescape(v: &str) -> Option<String> {
    if !v.contains('%') {
        return Some(v.to_string());
    }
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        match rest.get(i + 1..i + 3) {
            Some("25") => out.push('%'),
            Some("3A") => out.push(':'),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The hash key of a summary's group: its name, the dimension values, the bucket start.
pub fn summary_key<'a>(summary: &Summary, dims: impl Iterator<Item = &'a str>, bucket: Option<i64>) -> String {
    let mut k = String::with_capacity(summary.name.len() + 32);
    summary_key_into(&mut k, summary, dims, bucket);
    k
}

/// [`summary_key`] into `k` (cleared first), reusing its buffer.
pub fn summary_key_into<'a>(k: &mut String, summary: &Summary, dims: impl Iterator<Item = &'a str>, bucket: Option<i64>) {
    k.clear();
    k.push_str(&summary.name);
    for d in dims {
        k.push(':');
        escape(d, k);
    }
    if let Some(b) = bucket {
        // itoa, not `write!`: `core::fmt` cost more than the rest of the key.
        k.push(':');
        k.push_str(itoa::Buffer::new().format(b));
    }
}

/// A summary key split back into its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyParts {
    pub dims: Vec<String>,
    pub bucket: Option<i64>,
    /// The metric name for an HLL or distinct key; None for the hash.
    pub metric: Option<String>,
}

/// Splits `key` as a key of `summary`; None if it is not one.
pub fn parse_key(summary: &Summary, key: &[u8]) -> Option<KeyParts> {
    let key = std::str::from_utf8(key).ok()?;
    let rest = key.strip_prefix(summary.name.as_str())?;
    let parts: Vec<&str> = if rest.is_empty() { Vec::new() } else { rest.strip_prefix(':')?.split(':').collect() };
    let base = summary.dims.len() + usize::from(summary.bucket != Bucket::None);
    let metric = match parts.len() {
        n if n == base => None,
        n if n == base + 1 => {
            let m = parts[base];
            summary.metric(m).filter(|&i| !summary.metrics[i].kind.in_hash())?;
            Some(m.to_string())
        }
        _ => return None,
    };
    let dims = parts[..summary.dims.len()].iter().map(|d| unescape(d)).collect::<Option<Vec<_>>>()?;
    let bucket = if summary.bucket == Bucket::None { None } else { Some(parts[summary.dims.len()].parse::<i64>().ok()?) };
    Some(KeyParts { dims, bucket, metric })
}
