//! `--summary NAME`: one row per group (dimension values and bucket) of a summary.
//!
//! The exporter reads the summary's definition from the server (SUMMARY.RULES GET, parsed by
//! `abacus-summarizer`), finds its keys by name (SCAN, split back into dimension values,
//! bucket and metric by the summarizer's own `parse_key`), and reads each key whole (HGETALL,
//! GET of an HLL's bytes, SMEMBERS): one atomic read per key. Columns: each dimension (text,
//! named as the dimension), `bucket` (TIMESTAMP ms, UTC; absent for `bucket = "none"`), then
//! each metric named as the metric: `count` INT64; `sum`, `min`, `max` and `last`
//! DECIMAL(38, s) where every value of the column is a decimal (s the most decimals seen;
//! exact, see `abacus_int::Dec`), else DOUBLE where every value is a number, else (a `last` of
//! text) STRING; `hll` the postgresql-hll bytes (BLOB); `distinct` a LIST of the members,
//! INT64 if every member of the column is an integer, else STRING. A group without a metric
//! (no key for it) has a null there.
//!
//! Memory: the summary's groups are held until written (the decimal scale and the column
//! types are known only once every value was seen), about the summary's own size.

use std::collections::BTreeMap;
use std::sync::Arc;

use abacus_int::{string2ll, Dec, Number};
use abacus_summarizer::{parse_key, Bucket, MetricKind, Rules, Summary};
use arrow_array::builder::{BinaryBuilder, Decimal128Builder, Float64Builder, Int64Builder, ListBuilder, StringBuilder, TimestampMillisecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use crate::resp::{glob_escape, Reply, PIPELINE};
use crate::source::Source;
use crate::sink::{Codec, Sink, BATCH_ROWS};
use crate::Report;

/// One group's keys' contents, per metric index (hash metrics from the hash's fields).
#[derive(Default)]
struct Row {
    hash: Option<Vec<u8>>,
    metric_keys: Vec<(usize, Vec<u8>)>,
    values: Vec<Option<Value>>,
}

/// A group's identity (dimension values, bucket) and its row.
type Group = ((Vec<String>, Option<i64>), Row);

enum Value {
    Text(Vec<u8>),
    Members(Vec<Vec<u8>>),
}

pub struct Range {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

pub fn export(c: &mut dyn Source, name: &str, range: &Range, out: &std::path::Path, codec: Codec, progress: bool) -> Result<Report, String> {
    let Some(text) = c.rules()? else { return Err("no summarizer rules loaded".into()) };
    let rules = Rules::parse(&text).map_err(|e| format!("the rules do not parse: {e}"))?;
    let s = match rules.summary(name) {
        Some(i) => &rules.summaries[i],
        None => {
            let names: Vec<&str> = rules.summaries.iter().map(|s| s.name.as_str()).collect();
            return Err(format!("no such summary '{name}' (the server's rules have: {})", names.join(", ")));
        }
    };
    let mut groups: BTreeMap<(Vec<String>, Option<i64>), Row> = BTreeMap::new();
    for key in c.keys(format!("{}*", glob_escape(&s.name)).as_bytes(), None)? {
        let Some(parts) = parse_key(s, &key) else { continue };
        if let Some(b) = parts.bucket {
            if range.from.is_some_and(|f| b < f) || range.to.is_some_and(|t| b >= t) {
                continue;
            }
        }
        let row = groups.entry((parts.dims, parts.bucket)).or_insert_with(|| Row { values: (0..s.metrics.len()).map(|_| None).collect(), ..Row::default() });
        match parts.metric.as_deref().and_then(|m| s.metric(m)) {
            None => row.hash = Some(key),
            Some(mi) => row.metric_keys.push((mi, key)),
        }
    }
    read_rows(c, s, &mut groups)?;
    let rows: Vec<Group> = groups.into_iter().collect();
    let (schema, kinds) = schema(s, &rows)?;
    let mut sink = Sink::create(out, schema.clone(), codec, progress)?;
    for chunk in rows.chunks(BATCH_ROWS) {
        sink.write(&batch(s, &schema, &kinds, chunk)?)?;
    }
    let rows_written = sink.rows;
    let bytes = sink.finish()?;
    Ok(Report { rows: rows_written, bytes })
}

/// Reads every group's keys, [`PIPELINE`] groups a round trip, each reply folded into its
/// row as it arrives (never all replies at once), the key names dropped once read.
fn read_rows(c: &mut dyn Source, s: &Summary, groups: &mut BTreeMap<(Vec<String>, Option<i64>), Row>) -> Result<(), String> {
    let mut rows: Vec<&mut Row> = groups.values_mut().collect();
    for chunk in rows.chunks_mut(PIPELINE) {
        for row in chunk.iter() {
            if let Some(h) = &row.hash {
                c.queue(&[b"HGETALL", h]);
            }
            for (mi, k) in &row.metric_keys {
                let cmd: &[u8] = if matches!(s.metrics[*mi].kind, MetricKind::Hll(_)) { b"GET" } else { b"SMEMBERS" };
                c.queue(&[cmd, k]);
            }
        }
        c.flush()?;
        for row in chunk.iter_mut() {
            if let Some(h) = row.hash.take() {
                let what = format!("HGETALL {}", String::from_utf8_lossy(&h));
                let mut it = c.read()?.array(&what)?.into_iter();
                while let (Some(f), Some(v)) = (it.next(), it.next()) {
                    let (Some(f), Some(v)) = (f.bytes(&what)?, v.bytes(&what)?) else { continue };
                    if let Some(mi) = std::str::from_utf8(&f).ok().and_then(|f| s.metric(f)).filter(|&mi| s.metrics[mi].kind.in_hash()) {
                        row.values[mi] = Some(Value::Text(v));
                    }
                }
            }
            for (mi, key) in std::mem::take(&mut row.metric_keys) {
                let what = String::from_utf8_lossy(&key).into_owned();
                row.values[mi] = match (s.metrics[mi].kind, c.read()?) {
                    (_, Reply::Bulk(None)) => None, // gone since the scan
                    (MetricKind::Hll(_), r) => r.bytes(&what)?.map(Value::Text),
                    (_, r) => Some(Value::Members(r.array(&what)?.into_iter().filter_map(|m| m.bytes("SMEMBERS").ok().flatten()).collect())),
                };
            }
        }
    }
    Ok(())
}

/// How a metric column is written.
#[derive(Clone, Copy)]
enum Col {
    Int,
    Decimal(u8),
    Double,
    Text,
    Blob,
    IntList,
    TextList,
}

fn schema(s: &Summary, rows: &[Group]) -> Result<(Arc<Schema>, Vec<Col>), String> {
    let mut fields: Vec<Field> = s.dim_names.iter().map(|d| Field::new(d, DataType::Utf8, false)).collect();
    if s.bucket != Bucket::None {
        fields.push(Field::new("bucket", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false));
    }
    let mut kinds = Vec::new();
    for (mi, m) in s.metrics.iter().enumerate() {
        let texts = || rows.iter().filter_map(move |(_, r)| match &r.values[mi] {
            Some(Value::Text(t)) => Some(t.as_slice()),
            _ => None,
        });
        let col = match m.kind {
            MetricKind::Count => Col::Int,
            MetricKind::Hll(_) => Col::Blob,
            MetricKind::Distinct(_) => {
                let all_int = rows.iter().all(|(_, r)| match &r.values[mi] {
                    Some(Value::Members(ms)) => ms.iter().all(|m| string2ll(m).is_some()),
                    _ => true,
                });
                if all_int {
                    Col::IntList
                } else {
                    Col::TextList
                }
            }
            _ => {
                let nums: Option<Vec<Number>> = texts().map(Number::parse).collect();
                match nums {
                    None => Col::Text,
                    Some(nums) => {
                        let decs: Option<Vec<Dec>> = nums.iter().map(|n| match n {
                            Number::Dec(d) => Some(*d),
                            Number::Float(_) => None,
                        }).collect();
                        match decs {
                            Some(decs) => {
                                let scale = decs.iter().map(|d| d.scale()).max().unwrap_or(0);
                                if decs.iter().all(|d| d.rescale(scale).is_some()) {
                                    Col::Decimal(scale)
                                } else {
                                    Col::Double
                                }
                            }
                            None => Col::Double,
                        }
                    }
                }
            }
        };
        let dt = match col {
            Col::Int => DataType::Int64,
            Col::Decimal(scale) => DataType::Decimal128(38, scale as i8),
            Col::Double => DataType::Float64,
            Col::Text => DataType::Utf8,
            Col::Blob => DataType::Binary,
            Col::IntList => DataType::List(Arc::new(Field::new("item", DataType::Int64, false))),
            Col::TextList => DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
        };
        fields.push(Field::new(&m.name, dt, true));
        kinds.push(col);
    }
    Ok((Arc::new(Schema::new(fields)), kinds))
}

fn batch(s: &Summary, schema: &Arc<Schema>, kinds: &[Col], rows: &[Group]) -> Result<RecordBatch, String> {
    let mut cols: Vec<ArrayRef> = Vec::new();
    for d in 0..s.dims.len() {
        let mut b = StringBuilder::new();
        rows.iter().for_each(|((dims, _), _)| b.append_value(&dims[d]));
        cols.push(Arc::new(b.finish()));
    }
    if s.bucket != Bucket::None {
        let mut b = TimestampMillisecondBuilder::new();
        rows.iter().for_each(|((_, bucket), _)| b.append_value(bucket.unwrap_or(0).saturating_mul(1000)));
        cols.push(Arc::new(b.finish().with_timezone("UTC")));
    }
    for (mi, col) in kinds.iter().enumerate() {
        let text = |r: &Row| match &r.values[mi] {
            Some(Value::Text(t)) => Some(t.clone()),
            _ => None,
        };
        let array: ArrayRef = match *col {
            Col::Int => {
                let mut b = Int64Builder::new();
                rows.iter().for_each(|(_, r)| b.append_option(text(r).and_then(|t| string2ll(&t))));
                Arc::new(b.finish())
            }
            Col::Decimal(scale) => {
                let mut b = Decimal128Builder::new();
                rows.iter().for_each(|(_, r)| {
                    b.append_option(text(r).and_then(|t| Dec::parse(&t)).and_then(|d| d.rescale(scale)).map(Dec::mantissa));
                });
                Arc::new(b.finish().with_precision_and_scale(38, scale as i8).map_err(|e| e.to_string())?)
            }
            Col::Double => {
                let mut b = Float64Builder::new();
                rows.iter().for_each(|(_, r)| b.append_option(text(r).and_then(|t| Number::parse(&t)).map(Number::to_f64)));
                Arc::new(b.finish())
            }
            Col::Text => {
                let mut b = StringBuilder::new();
                for (_, r) in rows {
                    match text(r) {
                        Some(t) => b.append_value(String::from_utf8(t).map_err(|_| format!("metric '{}' holds bytes that are not UTF-8", s.metrics[mi].name))?),
                        None => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            Col::Blob => {
                let mut b = BinaryBuilder::new();
                rows.iter().for_each(|(_, r)| b.append_option(text(r)));
                Arc::new(b.finish())
            }
            Col::IntList => {
                let field = Arc::new(Field::new("item", DataType::Int64, false));
                let mut b = ListBuilder::new(Int64Builder::new()).with_field(field);
                for (_, r) in rows {
                    match &r.values[mi] {
                        Some(Value::Members(ms)) => {
                            let mut v: Vec<i64> = ms.iter().filter_map(|m| string2ll(m)).collect();
                            v.sort_unstable();
                            b.values().append_slice(&v);
                            b.append(true);
                        }
                        _ => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
            Col::TextList => {
                let field = Arc::new(Field::new("item", DataType::Utf8, false));
                let mut b = ListBuilder::new(StringBuilder::new()).with_field(field);
                for (_, r) in rows {
                    match &r.values[mi] {
                        Some(Value::Members(ms)) => {
                            let mut v = ms.clone();
                            v.sort();
                            for m in v {
                                b.values().append_value(String::from_utf8(m).map_err(|_| format!("metric '{}' has a member that is not UTF-8", s.metrics[mi].name))?);
                            }
                            b.append(true);
                        }
                        _ => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
        };
        cols.push(array);
    }
    RecordBatch::try_new(schema.clone(), cols).map_err(|e| format!("building a batch: {e}"))
}
