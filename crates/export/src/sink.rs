//! The Parquet file being written: a temporary name beside `--out`, renamed over it only
//! once the writer closed it and the bytes are on disk, removed on any error (the `Drop`), so
//! a reader never sees a file written half. Row groups end at [`ROW_GROUP_BYTES`] of
//! encoded data (about what Spark and DuckDB read best), and a progress line shows on a
//! terminal. Encoding and compression run on a thread of their own (`WRITER_QUEUE`), beside
//! the thread that reads and builds the batches.

use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// Most encoded bytes of one row group before it is written out.
pub const ROW_GROUP_BYTES: usize = 128 << 20;
/// Rows of one record batch handed to the writer (the exporter's own buffers hold at most
/// this many rows, or [`BATCH_BYTES`], before they are encoded).
pub const BATCH_ROWS: usize = 64 * 1024;
/// Most bytes of values the exporter buffers before handing them to the writer.
pub const BATCH_BYTES: usize = 32 << 20;

/// The compression of every column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Codec {
    Zstd,
    Snappy,
    None,
}

impl Codec {
    pub fn parse(s: &str) -> Result<Codec, String> {
        match s.to_ascii_lowercase().as_str() {
            "zstd" => Ok(Codec::Zstd),
            "snappy" => Ok(Codec::Snappy),
            "none" | "uncompressed" => Ok(Codec::None),
            _ => Err(format!("unknown compression '{s}' (zstd, snappy or none)")),
        }
    }
}

/// Batches queued for the writer thread beyond the one it encodes: the exporter builds the
/// next batch while the writer encodes and compresses the last (two cores), and memory stays
/// bounded (this many batches, each at most [`BATCH_ROWS`] rows or [`BATCH_BYTES`]).
const WRITER_QUEUE: usize = 2;

pub struct Sink {
    tx: Option<SyncSender<RecordBatch>>,
    /// The writer thread: encodes each batch into the row group in progress, and gives the
    /// file back when the queue closes.
    writer: Option<JoinHandle<Result<File, String>>>,
    /// Encoded bytes so far (the writer's count), for the progress line.
    encoded: Arc<AtomicU64>,
    tmp: PathBuf,
    out: PathBuf,
    pub rows: u64,
    started: Instant,
    progress: bool,
    last_shown: Instant,
}

impl Sink {
    pub fn create(out: &Path, schema: Arc<Schema>, codec: Codec, progress: bool) -> Result<Sink, String> {
        let name = out.file_name().ok_or_else(|| format!("--out {}: not a file name", out.display()))?;
        let tmp = out.with_file_name(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let file = File::create(&tmp).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        let compression = match codec {
            Codec::Zstd => Compression::ZSTD(ZstdLevel::default()),
            Codec::Snappy => Compression::SNAPPY,
            Codec::None => Compression::UNCOMPRESSED,
        };
        let props = WriterProperties::builder().set_compression(compression).set_max_row_group_bytes(Some(ROW_GROUP_BYTES)).build();
        let mut sink = Sink {
            tx: None,
            writer: None,
            encoded: Arc::new(AtomicU64::new(0)),
            tmp,
            out: out.to_path_buf(),
            rows: 0,
            started: Instant::now(),
            progress: progress && std::io::stderr().is_terminal(),
            last_shown: Instant::now(),
        };
        let mut w = match ArrowWriter::try_new(file, schema, Some(props)) {
            Ok(w) => w,
            Err(e) => {
                let _ = std::fs::remove_file(&sink.tmp);
                return Err(format!("parquet: {e}"));
            }
        };
        let (tx, rx) = sync_channel::<RecordBatch>(WRITER_QUEUE);
        let (shown, encoded) = (out.display().to_string(), sink.encoded.clone());
        let writer = std::thread::Builder::new().name("abacus-export-writer".into()).spawn(move || {
            for batch in rx {
                w.write(&batch).map_err(|e| format!("writing {shown}: {e}"))?;
                encoded.store((w.bytes_written() + w.in_progress_size()) as u64, Ordering::Relaxed);
            }
            w.into_inner().map_err(|e| format!("writing {shown}: {e}"))
        });
        match writer {
            Ok(h) => {
                sink.tx = Some(tx);
                sink.writer = Some(h);
                Ok(sink)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&sink.tmp);
                Err(format!("cannot start the writer thread: {e}"))
            }
        }
    }

    /// The writer thread's outcome, once its queue is closed.
    fn join(&mut self) -> Result<File, String> {
        drop(self.tx.take());
        match self.writer.take() {
            Some(h) => h.join().unwrap_or_else(|_| Err("the writer thread panicked".into())),
            None => Err("the file is closed".into()),
        }
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), String> {
        let tx = self.tx.as_ref().ok_or("the file is closed")?;
        if tx.send(batch.clone()).is_err() {
            // The writer stopped on an error: that error.
            return Err(self.join().err().unwrap_or_else(|| "the writer stopped".into()));
        }
        self.rows += batch.num_rows() as u64;
        if self.progress && self.last_shown.elapsed().as_millis() >= 250 {
            self.last_shown = Instant::now();
            let secs = self.started.elapsed().as_secs_f64().max(1e-3);
            let bytes = self.encoded.load(Ordering::Relaxed);
            eprint!("\r{} rows, {:.1} MB, {:.0} rows/s   ", self.rows, bytes as f64 / 1e6, self.rows as f64 / secs);
        }
        Ok(())
    }

    /// Closes the file, puts its bytes on disk and renames it to `--out`; returns its size.
    pub fn finish(mut self) -> Result<u64, String> {
        let file = self.join()?;
        file.sync_all().map_err(|e| format!("writing {}: {e}", self.out.display()))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        drop(file);
        if let Err(e) = std::fs::rename(&self.tmp, &self.out) {
            return Err(format!("cannot write {}: {e}", self.out.display()));
        }
        // Renamed: nothing for the `Drop` to remove.
        self.tmp = PathBuf::new();
        if self.progress {
            eprintln!();
        }
        Ok(size)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Not finished (an error on the way), or finished and failed: nothing is left behind.
        if self.writer.is_some() {
            let _ = self.join();
        }
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
            if self.progress {
                eprintln!();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field};

    fn schema() -> Arc<Schema> {
        Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]))
    }

    #[test]
    fn a_file_appears_only_when_finished() {
        let dir = std::env::temp_dir().join(format!("abacus-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("x.parquet");
        {
            let mut sink = Sink::create(&out, schema(), Codec::Zstd, false).unwrap();
            let batch = RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]).unwrap();
            sink.write(&batch).unwrap();
            // Dropped unfinished (an error on the way): nothing left, not even the temporary.
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let mut sink = Sink::create(&out, schema(), Codec::Snappy, false).unwrap();
        let batch = RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]).unwrap();
        sink.write(&batch).unwrap();
        let size = sink.finish().unwrap();
        assert_eq!(std::fs::metadata(&out).unwrap().len(), size);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn codecs() {
        assert_eq!(Codec::parse("ZSTD"), Ok(Codec::Zstd));
        assert_eq!(Codec::parse("snappy"), Ok(Codec::Snappy));
        assert!(Codec::parse("lz5").unwrap_err().contains("zstd, snappy or none"));
    }
}
