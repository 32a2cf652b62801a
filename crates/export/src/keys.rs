//! `--keys PATTERN`: the generic types in one long layout, one row per element:
//!
//! | column | type | string | hash | set | sorted set | list |
//! |---|---|---|---|---|---|---|
//! | `key` | STRING | key | key | key | key | key |
//! | `type` | STRING | `string` | `hash` | `set` | `zset` | `list` |
//! | `member` | BLOB, null | null | field | member | member | null |
//! | `value` | BLOB, null | the value | the field's value | null | null | the element |
//! | `score` | DOUBLE, null | null | null | null | the score | null |
//! | `index` | INT64, null | null | null | null | null | position from 0 |
//!
//! An HLL sketch is a string (its postgresql-hll bytes). Streams and time series have their
//! own layouts (`--streams`, `--series`); a matching key of those types is counted in the
//! report's `skipped`, not written. Each key is read whole by one command (GET, HGETALL,
//! SMEMBERS, ZRANGE 0 -1 WITHSCORES, LRANGE 0 -1): atomic per key.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::resp::{Reply, PIPELINE};
use crate::source::Source;
use crate::sink::{Codec, Sink, BATCH_BYTES, BATCH_ROWS};
use crate::Report;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("member", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("score", DataType::Float64, true),
        Field::new("index", DataType::Int64, true),
    ]))
}

#[derive(Default)]
struct Buffers {
    key: StringBuilder,
    kind: StringBuilder,
    member: BinaryBuilder,
    value: BinaryBuilder,
    score: Float64Builder,
    index: Int64Builder,
    rows: usize,
    bytes: usize,
}

impl Buffers {
    fn row(&mut self, key: &str, kind: &str, member: Option<&[u8]>, value: Option<&[u8]>, score: Option<f64>, index: Option<i64>) {
        self.key.append_value(key);
        self.kind.append_value(kind);
        self.member.append_option(member);
        self.value.append_option(value);
        self.score.append_option(score);
        self.index.append_option(index);
        self.rows += 1;
        self.bytes += key.len() + member.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    }

    fn batch(&mut self, schema: &Arc<Schema>) -> Result<RecordBatch, String> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.key.finish()),
            Arc::new(self.kind.finish()),
            Arc::new(self.member.finish()),
            Arc::new(self.value.finish()),
            Arc::new(self.score.finish()),
            Arc::new(self.index.finish()),
        ];
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(schema.clone(), cols).map_err(|e| format!("building a batch: {e}"))
    }
}

/// The command reading a key of `kind` whole; None for the types with their own layout.
fn read_command(kind: &str) -> Option<&'static [&'static [u8]]> {
    Some(match kind {
        "string" => &[b"GET"],
        "hash" => &[b"HGETALL"],
        "set" => &[b"SMEMBERS"],
        "zset" => &[b"ZRANGE", b"0", b"-1", b"WITHSCORES"],
        "list" => &[b"LRANGE", b"0", b"-1"],
        _ => return None,
    })
}

pub fn export(c: &mut dyn Source, pattern: &str, out: &std::path::Path, codec: Codec, progress: bool) -> Result<(Report, u64), String> {
    let keys = c.keys(pattern.as_bytes(), None)?;
    if keys.is_empty() {
        return Err(format!("no key matches '{pattern}'"));
    }
    let schema = schema();
    let mut sink = Sink::create(out, schema.clone(), codec, progress)?;
    let mut buf = Buffers::default();
    let mut skipped = 0u64;
    for chunk in keys.chunks(PIPELINE) {
        for k in chunk {
            c.queue(&[b"TYPE", k]);
        }
        c.flush()?;
        let mut kinds = Vec::with_capacity(chunk.len());
        for _ in chunk {
            kinds.push(String::from_utf8_lossy(&c.read()?.bytes("TYPE")?.unwrap_or_default()).into_owned());
        }
        let mut asked = Vec::new();
        for (k, kind) in chunk.iter().zip(&kinds) {
            match read_command(kind) {
                Some(cmd) => {
                    let mut args: Vec<&[u8]> = vec![cmd[0], k];
                    args.extend_from_slice(&cmd[1..]);
                    c.queue(&args);
                    asked.push((k, kind.as_str()));
                }
                None if kind == "none" => {} // deleted since the scan
                None => skipped += 1,
            }
        }
        c.flush()?;
        for (k, kind) in asked {
            let key = String::from_utf8(k.clone()).map_err(|_| format!("key {:?} is not UTF-8 (the key column is a STRING)", String::from_utf8_lossy(k)))?;
            let what = format!("key '{key}'");
            let reply = match c.read()? {
                Reply::Err(e) if e.starts_with("WRONGTYPE") => return Err(format!("{what} changed type during the export; export again")),
                r => r,
            };
            match kind {
                "string" => {
                    if let Some(v) = reply.bytes(&what)? {
                        buf.row(&key, kind, None, Some(&v), None, None);
                    }
                }
                "set" => {
                    let mut ms: Vec<Vec<u8>> = reply.array(&what)?.into_iter().filter_map(|m| m.bytes("SMEMBERS").ok().flatten()).collect();
                    ms.sort();
                    ms.iter().for_each(|m| buf.row(&key, kind, Some(m), None, None, None));
                }
                "list" => {
                    for (i, v) in reply.array(&what)?.into_iter().enumerate() {
                        buf.row(&key, kind, None, v.bytes(&what)?.as_deref(), None, Some(i as i64));
                    }
                }
                _ => {
                    let mut it = reply.array(&what)?.into_iter();
                    while let (Some(a), Some(b)) = (it.next(), it.next()) {
                        let (a, b) = (a.bytes(&what)?.unwrap_or_default(), b.bytes(&what)?.unwrap_or_default());
                        if kind == "hash" {
                            buf.row(&key, kind, Some(&a), Some(&b), None, None);
                        } else {
                            let score = std::str::from_utf8(&b).ok().and_then(|s| s.parse::<f64>().ok()).ok_or_else(|| format!("{what}: a score is not a number"))?;
                            buf.row(&key, kind, Some(&a), None, Some(score), None);
                        }
                    }
                }
            }
            if buf.rows >= BATCH_ROWS || buf.bytes >= BATCH_BYTES {
                sink.write(&buf.batch(&schema)?)?;
            }
        }
    }
    if buf.rows > 0 {
        sink.write(&buf.batch(&schema)?)?;
    }
    let rows = sink.rows;
    let bytes = sink.finish()?;
    Ok((Report { rows, bytes }, skipped))
}
