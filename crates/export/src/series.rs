//! `--series LABEL=VALUE ...`: every time series the filters select (TS.QUERYINDEX's
//! syntax), one row per sample: `key` STRING, `labels` MAP<STRING, STRING>, `ts` TIMESTAMP
//! (ms, UTC), `value` DOUBLE.
//!
//! Each series is read by one TS.RANGE `-` `+` (atomic per key) with its labels from TS.INFO,
//! 128 series per round trip; rows go to the writer in batches as for streams.

use std::sync::Arc;

use arrow_array::builder::{Float64Builder, MapBuilder, MapFieldNames, StringBuilder, TimestampMillisecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};

use crate::resp::Reply;
use crate::source::Source;
use crate::sink::{Codec, Sink, BATCH_ROWS};
use crate::Report;

fn map_type() -> DataType {
    let entries = Fields::from(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, true)]);
    DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false)
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("labels", map_type(), false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false),
        Field::new("value", DataType::Float64, false),
    ]))
}

struct Buffers {
    keys: StringBuilder,
    labels: MapBuilder<StringBuilder, StringBuilder>,
    ts: TimestampMillisecondBuilder,
    values: Float64Builder,
}

impl Buffers {
    fn new() -> Buffers {
        let names = MapFieldNames { entry: "entries".into(), key: "key".into(), value: "value".into() };
        Buffers { keys: StringBuilder::new(), labels: MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new()), ts: TimestampMillisecondBuilder::new(), values: Float64Builder::new() }
    }

    fn batch(&mut self, schema: &Arc<Schema>) -> Result<RecordBatch, String> {
        let labels = self.labels.finish();
        // The builder's value field is nullable and its entries field named as given: the
        // schema's, checked by `try_new`.
        let labels = arrow_array::MapArray::try_new(
            match schema.field(1).data_type() {
                DataType::Map(f, _) => f.clone(),
                _ => unreachable!("labels is a map"),
            },
            labels.offsets().clone(),
            labels.entries().clone(),
            None,
            false,
        )
        .map_err(|e| format!("building a batch: {e}"))?;
        let cols: Vec<ArrayRef> = vec![Arc::new(self.keys.finish()), Arc::new(labels), Arc::new(self.ts.finish().with_timezone("UTC")), Arc::new(self.values.finish())];
        RecordBatch::try_new(schema.clone(), cols).map_err(|e| format!("building a batch: {e}"))
    }
}

fn utf8(b: Vec<u8>) -> Result<String, String> {
    String::from_utf8(b).map_err(|_| "a series key or label is not UTF-8".to_string())
}

/// TS.INFO's `labels`: pairs of label and value.
fn labels(info: Reply, what: &str) -> Result<Vec<(String, String)>, String> {
    let mut it = info.array(what)?.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if k.clone().bytes(what)?.as_deref() == Some(b"labels") {
            let mut out = Vec::new();
            for pair in v.array(what)? {
                let mut p = pair.array(what)?.into_iter();
                let (Some(l), Some(v)) = (p.next(), p.next()) else { continue };
                out.push((utf8(l.bytes(what)?.unwrap_or_default())?, utf8(v.bytes(what)?.unwrap_or_default())?));
            }
            return Ok(out);
        }
    }
    Ok(Vec::new())
}

pub fn export(c: &mut dyn Source, filters: &[String], out: &std::path::Path, codec: Codec, progress: bool) -> Result<Report, String> {
    let keys = c.series(filters)?;
    if keys.is_empty() {
        return Err(format!("no time series matches {}", filters.join(" ")));
    }
    let schema = schema();
    let mut sink = Sink::create(out, schema.clone(), codec, progress)?;
    let mut buf = Buffers::new();
    let mut rows = 0usize;
    for chunk in keys.chunks(128) {
        for k in chunk {
            c.queue(&[b"TS.INFO", k]);
            c.queue(&[b"TS.RANGE", k, b"-", b"+"]);
        }
        c.flush()?;
        for k in chunk {
            let what = format!("series '{}'", String::from_utf8_lossy(k));
            let (info, range) = (c.read()?, c.read()?);
            let (info, range) = match (info, range) {
                // Deleted since the query: not exported.
                (Reply::Err(e), _) if e.contains("does not exist") || e.starts_with("WRONGTYPE") => continue,
                (i, r) => (i, r.array(&what)?),
            };
            let labels = labels(info, &what)?;
            let key = utf8(k.clone())?;
            for sample in range {
                let mut s = sample.array(&what)?.into_iter();
                let ts = s.next().ok_or("TS.RANGE: no time")?.int(&what)?;
                let v = s.next().ok_or("TS.RANGE: no value")?.bytes(&what)?.unwrap_or_default();
                let v = std::str::from_utf8(&v).ok().and_then(|t| t.parse::<f64>().ok()).ok_or_else(|| format!("{what}: a value is not a number"))?;
                buf.keys.append_value(&key);
                for (l, lv) in &labels {
                    buf.labels.keys().append_value(l);
                    buf.labels.values().append_value(lv);
                }
                buf.labels.append(true).map_err(|e| e.to_string())?;
                buf.ts.append_value(ts);
                buf.values.append_value(v);
                rows += 1;
                if rows.is_multiple_of(BATCH_ROWS) {
                    sink.write(&buf.batch(&schema)?)?;
                }
            }
        }
    }
    if !rows.is_multiple_of(BATCH_ROWS) {
        sink.write(&buf.batch(&schema)?)?;
    }
    let rows = sink.rows;
    let bytes = sink.finish()?;
    Ok(Report { rows, bytes })
}
