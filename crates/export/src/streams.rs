//! `--streams PATTERN`: every stream whose key matches, one row per stream, nested:
//! `key` STRING, `entries` LIST<STRUCT<id STRING, fields MAP<STRING, STRING>>> in stream
//! order (the record Dremel stripes: Parquet stores `entries.id`, `entries.fields.key` and
//! `entries.fields.value` as three columns with their repetition levels). `--flat`: one row
//! per entry, `key`, `id`, `fields`.
//!
//! Each stream is read whole by one XRANGE (atomic per key), 256 streams per round trip;
//! rows are handed to the writer every [`BATCH_ROWS`] entries or [`BATCH_BYTES`] bytes, so
//! the exporter holds one batch plus the writer's row group in progress, whatever the data
//! size (and the largest single stream). Field names and values must be UTF-8 (a STRING);
//! a stream holding other bytes is a clear error, never a lossy copy.

use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, StringBuilder};
use arrow_array::{ArrayRef, ListArray, MapArray, RecordBatch, StructArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields, Schema};

use crate::resp::{Reply, PIPELINE};
use crate::source::Source;
use crate::sink::{Codec, Sink, BATCH_BYTES, BATCH_ROWS};
use crate::Report;

fn map_field() -> Arc<Field> {
    let entries = Fields::from(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, true)]);
    Arc::new(Field::new("entries", DataType::Struct(entries), false))
}

fn map_type() -> DataType {
    DataType::Map(map_field(), false)
}

fn entry_fields() -> Fields {
    Fields::from(vec![Field::new("id", DataType::Utf8, false), Field::new("fields", map_type(), false)])
}

pub fn schema(flat: bool) -> Arc<Schema> {
    if flat {
        Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("id", DataType::Utf8, false), Field::new("fields", map_type(), false)]))
    } else {
        let item = Arc::new(Field::new("item", DataType::Struct(entry_fields()), false));
        Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("entries", DataType::List(item), false)]))
    }
}

/// The columns of the rows buffered so far.
struct Buffers {
    keys: StringBuilder,
    /// Per stream (nested) the offset of its first entry; unused when flat.
    list_offsets: Vec<i32>,
    ids: StringBuilder,
    map_offsets: Vec<i32>,
    names: StringBuilder,
    values: StringBuilder,
    entries: usize,
    bytes: usize,
}

impl Buffers {
    fn new() -> Buffers {
        Buffers { keys: StringBuilder::new(), list_offsets: vec![0], ids: StringBuilder::new(), map_offsets: vec![0], names: StringBuilder::new(), values: StringBuilder::new(), entries: 0, bytes: 0 }
    }

    fn batch(&mut self, schema: &Arc<Schema>, flat: bool) -> Result<RecordBatch, String> {
        let e = |e: arrow_schema::ArrowError| format!("building a batch: {e}");
        let map_entries = StructArray::try_new(
            match map_field().data_type() {
                DataType::Struct(f) => f.clone(),
                _ => unreachable!("a map's entries are a struct"),
            },
            vec![Arc::new(self.names.finish()) as ArrayRef, Arc::new(self.values.finish())],
            None,
        )
        .map_err(e)?;
        let offsets = OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(&mut self.map_offsets, vec![0])));
        let map = MapArray::try_new(map_field(), offsets, map_entries, None, false).map_err(e)?;
        let ids: ArrayRef = Arc::new(self.ids.finish());
        let cols: Vec<ArrayRef> = if flat {
            vec![Arc::new(self.keys.finish()), ids, Arc::new(map)]
        } else {
            let structs = StructArray::try_new(entry_fields(), vec![ids, Arc::new(map)], None).map_err(e)?;
            let item = Arc::new(Field::new("item", DataType::Struct(entry_fields()), false));
            let offsets = OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(&mut self.list_offsets, vec![0])));
            let list = ListArray::try_new(item, offsets, Arc::new(structs), None).map_err(e)?;
            vec![Arc::new(self.keys.finish()), Arc::new(list)]
        };
        self.entries = 0;
        self.bytes = 0;
        RecordBatch::try_new(schema.clone(), cols).map_err(e)
    }
}

fn text(b: Vec<u8>, key: &[u8]) -> Result<String, String> {
    String::from_utf8(b).map_err(|_| format!("stream '{}' holds bytes that are not UTF-8 (a STRING column needs UTF-8)", String::from_utf8_lossy(key)))
}

pub fn export(c: &mut dyn Source, pattern: &str, flat: bool, out: &std::path::Path, codec: Codec, progress: bool) -> Result<Report, String> {
    let keys = c.keys(pattern.as_bytes(), Some("stream"))?;
    if keys.is_empty() {
        return Err(format!("no stream key matches '{pattern}'"));
    }
    let schema = schema(flat);
    let mut sink = Sink::create(out, schema.clone(), codec, progress)?;
    let mut buf = Buffers::new();
    for chunk in keys.chunks(PIPELINE) {
        for k in chunk {
            c.queue(&[b"XRANGE", k, b"-", b"+"]);
        }
        c.flush()?;
        for k in chunk {
            let what = format!("XRANGE {}", String::from_utf8_lossy(k));
            let entries = match c.read()? {
                // Deleted since the scan, or no longer a stream: not exported.
                Reply::Err(e) if e.starts_with("WRONGTYPE") => continue,
                r => r.array(&what)?,
            };
            if entries.is_empty() && !flat {
                // A stream that exists has entries, or was emptied: a row with none.
                buf.keys.append_value(text(k.clone(), k)?);
                buf.list_offsets.push(buf.entries as i32);
                continue;
            }
            let key = text(k.clone(), k)?;
            for entry in entries {
                let mut it = entry.array(&what)?.into_iter();
                let id = it.next().ok_or("XRANGE: no id")?.bytes(&what)?.unwrap_or_default();
                buf.bytes += id.len();
                buf.ids.append_value(text(id, k)?);
                let mut fv = it.next().ok_or("XRANGE: no fields")?.array(&what)?.into_iter();
                while let (Some(f), Some(v)) = (fv.next(), fv.next()) {
                    let (f, v) = (f.bytes(&what)?.unwrap_or_default(), v.bytes(&what)?.unwrap_or_default());
                    buf.bytes += f.len() + v.len();
                    buf.names.append_value(text(f, k)?);
                    buf.values.append_value(text(v, k)?);
                }
                buf.map_offsets.push(buf.names.len() as i32);
                buf.entries += 1;
                if flat {
                    buf.keys.append_value(&key);
                }
            }
            if !flat {
                buf.keys.append_value(&key);
                buf.list_offsets.push(buf.entries as i32);
            }
            if buf.entries >= BATCH_ROWS || buf.bytes >= BATCH_BYTES {
                sink.write(&buf.batch(&schema, flat)?)?;
            }
        }
    }
    if buf.keys.len() > 0 {
        sink.write(&buf.batch(&schema, flat)?)?;
    }
    let rows = sink.rows;
    let bytes = sink.finish()?;
    Ok(Report { rows, bytes })
}
