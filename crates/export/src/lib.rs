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
//! The layouts read through a [`Source`] (`source.rs`): the RESP client here, a data
//! directory loaded in process (`abacus export --dir`, `abacus_server::export`), or the
//! server's own keyspace (the EXPORT command): one writer per layout for all three.
//! Summaries' sums, minima and maxima are exact decimals
//! (`abacus_int::Dec`, Parquet DECIMAL(38, scale)) wherever the server holds decimals.
#![forbid(unsafe_code)]

mod keys;
mod resp;
mod series;
mod sink;
mod source;
mod streams;
mod summary;

use std::path::PathBuf;
use std::time::Instant;

pub use resp::{Client, Reply};
pub use source::{Replies, Source};
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

/// Runs the export from a running server (`o.host`, `o.port`); the line to print on success.
pub fn run(o: &Options) -> Result<String, String> {
    check_out(&o.out)?;
    let mut c = Client::connect(&o.host, o.port, &o.tls, o.user.as_deref(), o.pass.as_deref())?;
    run_on(&mut c, &o.what, &o.out, o.codec, o.progress)
}

/// Refuses an `--out` that cannot be a file before any data is read.
pub fn check_out(out: &std::path::Path) -> Result<(), String> {
    if out.is_dir() {
        return Err(format!("--out {}: is a directory", out.display()));
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!("cannot write {}: no such directory {}", out.display(), parent.display()));
    }
    Ok(())
}

/// Runs the export from any source (online, offline, server side) into `out`; the line to
/// print on success.
pub fn run_on(c: &mut dyn Source, what: &What, out: &std::path::Path, codec: Codec, progress: bool) -> Result<String, String> {
    let started = Instant::now();
    let (r, skipped) = write(c, what, out, codec, progress)?;
    let secs = started.elapsed().as_secs_f64();
    let mut line = format!("{} rows, {} bytes to {} in {:.2} s ({:.0} rows/s)", r.rows, r.bytes, out.display(), secs, r.rows as f64 / secs.max(1e-6));
    if skipped > 0 {
        line.push_str(&format!("; {skipped} keys of other types skipped (streams: --streams, series: --series)"));
    }
    Ok(line)
}

/// Writes `what` from `c` to `out`: the report and, for `--keys`, the keys of other types
/// skipped.
pub fn write(c: &mut dyn Source, what: &What, out: &std::path::Path, codec: Codec, progress: bool) -> Result<(Report, u64), String> {
    if out.is_dir() {
        return Err(format!("{}: is a directory", out.display()));
    }
    Ok(match what {
        What::Summary { name, from, to } => (summary::export(c, name, &Range { from: *from, to: *to }, out, codec, progress)?, 0),
        What::Streams { pattern, flat } => (streams::export(c, pattern, *flat, out, codec, progress)?, 0),
        What::Series { filters } => (series::export(c, filters, out, codec, progress)?, 0),
        What::Keys { pattern } => keys::export(c, pattern, out, codec, progress)?,
    })
}
