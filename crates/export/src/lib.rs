//! `abacus export`: a running server's summaries, streams, time series and generic keys to
//! one Parquet file, read back by DuckDB, pandas (pyarrow) and Spark.
//!
//! What it is for: data out, typed and exact. It talks RESP to the server like any client
//! (`resp.rs`: one blocking connection, pipelined reads, each key read whole by one command,
//! so each key is exported as of one moment), builds Arrow record batches per layout
//! (`summary.rs`, `streams.rs`, `series.rs`, `keys.rs`, each documenting its columns) and
//! writes them with the `parquet` crate (`sink.rs`: zstd or snappy, row groups of about
//! 128 MB, a temporary file renamed over `--out` only when complete, removed on any error).
//!
//! What it is not: a server-side exporter (the server never writes the file), nor, yet, an
//! offline reader of a data directory. Summaries' sums, minima and maxima are exact decimals
//! (`abacus_int::Dec`, Parquet DECIMAL(38, scale)) wherever the server holds decimals.
#![forbid(unsafe_code)]

mod keys;
mod resp;
mod series;
mod sink;
mod streams;
mod summary;

use std::path::PathBuf;
use std::time::Instant;

pub use resp::{Client, Reply};
pub use sink::Codec;
pub use summary::Range;

/// What to export.
#[derive(Debug, Clone)]
pub enum What {
    Summary { name: String, from: Option<i64>, to: Option<i64> },
    Streams { pattern: String, flat: bool },
    Series { filters: Vec<String> },
    Keys { pattern: String },
}

#[derive(Debug, Clone)]
pub struct Options {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub pass: Option<String>,
    /// `--tls` and the rest of redis-cli's TLS options.
    pub tls: abacus_tls::ClientOptions,
    pub out: PathBuf,
    pub what: What,
    pub codec: Codec,
    /// A progress line on standard error when it is a terminal.
    pub progress: bool,
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    pub rows: u64,
    pub bytes: u64,
}

/// Runs the export; the line to print on success.
pub fn run(o: &Options) -> Result<String, String> {
    let started = Instant::now();
    if o.out.is_dir() {
        return Err(format!("--out {}: is a directory", o.out.display()));
    }
    let mut c = Client::connect(&o.host, o.port, &o.tls, o.user.as_deref(), o.pass.as_deref())?;
    let mut skipped = 0;
    let r = match &o.what {
        What::Summary { name, from, to } => summary::export(&mut c, name, &Range { from: *from, to: *to }, &o.out, o.codec, o.progress)?,
        What::Streams { pattern, flat } => streams::export(&mut c, pattern, *flat, &o.out, o.codec, o.progress)?,
        What::Series { filters } => series::export(&mut c, filters, &o.out, o.codec, o.progress)?,
        What::Keys { pattern } => {
            let (r, s) = keys::export(&mut c, pattern, &o.out, o.codec, o.progress)?;
            skipped = s;
            r
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let mut line = format!("{} rows, {} bytes to {} in {:.2} s ({:.0} rows/s)", r.rows, r.bytes, o.out.display(), secs, r.rows as f64 / secs.max(1e-6));
    if skipped > 0 {
        line.push_str(&format!("; {skipped} keys of other types skipped (streams: --streams, series: --series)"));
    }
    Ok(line)
}
