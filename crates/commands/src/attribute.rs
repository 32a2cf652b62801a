//! ATTRIBUTE's per-shard parts: parsing the call, the job each shard runs over its streams
//! (one user's stream for KEY, every matching stream for MATCH), and the reply's frames. The
//! command itself (the server's `cmd/attribute.rs`, which documents its syntax, models and
//! reply) runs in the connection task, because MATCH visits every shard and adds their sums;
//! these run on one shard's database, with no connection. The rules are
//! `abacus_collections::attribution`'s.

use abacus_collections::attribution::{Attribution, Model, Path, Query};
use abacus_int::Number;
use abacus_keyspace::Db;
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;

const DAY_MS: u64 = 86_400_000;

/// A duration: a number with a unit (ms, s, m, h, d), or bare milliseconds.
pub fn parse_duration(a: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(a).ok()?.to_ascii_lowercase();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s.as_str(), "ms"),
    };
    let mult: f64 = match unit {
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => DAY_MS as f64,
        _ => return None,
    };
    if num.is_empty() || num.starts_with('.') && num.len() == 1 {
        return None;
    }
    let v: f64 = num.parse().ok()?;
    let ms = v * mult;
    (ms.is_finite() && ms >= 0.0 && ms < 9.0e15).then(|| ms.round() as u64)
}

/// What ATTRIBUTE runs over: streams whose keys match a pattern, or one key.
pub enum Scope {
    Match(Bytes),
    Key(Bytes),
}

const KEYWORDS: [&str; 8] = ["match", "key", "channel", "conversion", "value", "models", "halflife", "lookback"];

/// Parses an ATTRIBUTE call (its syntax: the server's `cmd/attribute.rs`), with its errors.
pub fn parse(a: &[Arg]) -> Result<(Scope, Query), Frame> {
    let mut scope = None;
    let (mut channel, mut conversion, mut value_field) = (None, None, None);
    let mut models: Vec<Model> = Vec::new();
    let (mut halflife, mut lookback) = (7 * DAY_MS, 30 * DAY_MS);
    let mut i = 1;
    let need = |i: usize, n: usize| if i + n < a.len() { Ok(()) } else { Err(err(ERR_SYNTAX)) };
    while i < a.len() {
        let o = &a[i][..];
        if is(o, "match") || is(o, "key") {
            need(i, 1)?;
            if scope.is_some() {
                return Err(err("ERR ATTRIBUTE takes one of MATCH pattern or KEY key"));
            }
            let v = Bytes::copy_from_slice(&a[i + 1]);
            scope = Some(if is(o, "match") { Scope::Match(v) } else { Scope::Key(v) });
            i += 2;
        } else if is(o, "channel") {
            need(i, 1)?;
            channel = Some(a[i + 1].to_vec());
            i += 2;
        } else if is(o, "conversion") {
            need(i, 2)?;
            conversion = Some((a[i + 1].to_vec(), a[i + 2].to_vec()));
            i += 3;
        } else if is(o, "value") {
            need(i, 1)?;
            value_field = Some(a[i + 1].to_vec());
            i += 2;
        } else if is(o, "models") {
            i += 1;
            while i < a.len() && !KEYWORDS.iter().any(|k| is(&a[i], k)) {
                let m = Model::parse(&a[i]).ok_or_else(|| err_quoting("ERR unknown attribution model '", &a[i], "' (models: first, last, linear, position, decay)"))?;
                if models.contains(&m) {
                    return Err(err_quoting("ERR attribution model '", &a[i], "' given twice"));
                }
                models.push(m);
                i += 1;
            }
        } else if is(o, "halflife") || is(o, "lookback") {
            need(i, 1)?;
            let what = if is(o, "halflife") { "HALFLIFE" } else { "LOOKBACK" };
            let d = parse_duration(&a[i + 1]).filter(|&d| d > 0 || what == "LOOKBACK").ok_or_else(|| {
                err_quoting(&format!("ERR invalid {what} duration '"), &a[i + 1], "' (a positive number with ms, s, m, h or d)")
            })?;
            if what == "HALFLIFE" {
                halflife = d;
            } else {
                lookback = d;
            }
            i += 2;
        } else {
            return Err(err(ERR_SYNTAX));
        }
    }
    let scope = scope.ok_or_else(|| err("ERR ATTRIBUTE needs MATCH pattern or KEY key"))?;
    let channel = channel.ok_or_else(|| err("ERR ATTRIBUTE needs CHANNEL field"))?;
    let (conversion_field, conversion_value) = conversion.ok_or_else(|| err("ERR ATTRIBUTE needs CONVERSION field value"))?;
    if models.is_empty() {
        return Err(err("ERR ATTRIBUTE needs MODELS and at least one model (first, last, linear, position, decay)"));
    }
    Ok((scope, Query { channel, conversion_field, conversion_value, value_field, models, halflife_ms: halflife, lookback_ms: lookback }))
}

pub fn bulk_str(s: &'static str) -> Frame {
    Frame::Bulk(Bytes::from_static(s.as_bytes()))
}

fn id_frame(id: abacus_collections::StreamId) -> Frame {
    Frame::Bulk(Bytes::from(id.to_bytes()))
}

/// The reply's totals and per-model rows.
pub fn summary(a: &Attribution, q: &Query) -> Vec<(Frame, Frame)> {
    let models: Vec<(Frame, Frame)> = q
        .models
        .iter()
        .zip(a.by_model())
        .map(|(m, rows)| {
            let rows = rows.into_iter().map(|(ch, conv, value)| Frame::Array(vec![Frame::Bulk(Bytes::copy_from_slice(ch)), number_frame(Number::Float(conv)), number_frame(value)])).collect();
            (bulk_str(m.name()), Frame::Array(rows))
        })
        .collect();
    vec![
        (bulk_str("users"), Frame::Integer(a.users as i64)),
        (bulk_str("events"), Frame::Integer(a.events as i64)),
        (bulk_str("conversions"), Frame::Integer(a.conversions as i64)),
        (bulk_str("unattributed"), Frame::Integer(a.unattributed as i64)),
        (bulk_str("skipped"), Frame::Integer(a.skipped as i64)),
        (bulk_str("models"), Frame::Map(models)),
    ]
}

/// One conversion's path (ATTRIBUTE KEY's `paths`).
pub fn path_frame(p: &Path, q: &Query) -> Frame {
    let touches = p.touches.iter().map(|(id, ch)| Frame::Array(vec![id_frame(*id), Frame::Bulk(Bytes::copy_from_slice(ch))])).collect();
    let credits = q.models.iter().zip(&p.shares).map(|(m, s)| (bulk_str(m.name()), Frame::Array(s.iter().map(|&x| number_frame(Number::Float(x))).collect()))).collect();
    Frame::Map(vec![
        (bulk_str("conversion"), id_frame(p.conversion)),
        (bulk_str("value"), number_frame(p.value)),
        (bulk_str("touches"), Frame::Array(touches)),
        (bulk_str("credits"), Frame::Map(credits)),
    ])
}

/// ATTRIBUTE KEY's job on the key's shard: that user's stream's attribution and paths; a
/// missing key counts nothing, a key of another type is WRONGTYPE.
pub fn key_job(db: &mut Db, key: &[u8], q: &Query, now: u64) -> Result<(Attribution, Vec<Path>), Frame> {
    let mut a = Attribution::new(q);
    let mut paths = Vec::new();
    match db.get_shared(key, now) {
        None => {}
        Some(e) => match e.as_stream() {
            Some(stream) => a.add_stream(stream, q, Some(&mut paths)),
            None => return Err(err(ERR_WRONGTYPE)),
        },
    }
    Ok((a, paths))
}

/// ATTRIBUTE MATCH's job on one shard: the sums over its streams whose keys match; keys of
/// other types are skipped.
pub fn match_job(db: &mut Db, pattern: &[u8], q: &Query, now: u64) -> Attribution {
    let mut a = Attribution::new(q);
    db.for_each_matching(pattern, now, |_, e| {
        if let Some(stream) = e.as_stream() {
            a.add_stream(stream, q, None);
        }
    });
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration(b"7d"), Some(7 * DAY_MS));
        assert_eq!(parse_duration(b"12h"), Some(12 * 3_600_000));
        assert_eq!(parse_duration(b"90m"), Some(90 * 60_000));
        assert_eq!(parse_duration(b"1.5s"), Some(1500));
        assert_eq!(parse_duration(b"250ms"), Some(250));
        assert_eq!(parse_duration(b"250"), Some(250));
        assert_eq!(parse_duration(b"0"), Some(0));
        for bad in [&b"7w"[..], b"d", b"", b"-1d", b"1e3", b"x"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }
}
