//! EXPORT: the server writes a Parquet file, as `abacus export` would, into `export-dir`.
//!
//! ```text
//! EXPORT SUMMARY name [FROM t] [TO t] FILE name [COMPRESSION zstd|snappy|none]
//! EXPORT STREAMS pattern [FLAT] FILE name [COMPRESSION ...]
//! EXPORT SERIES filter [filter ...] FILE name [COMPRESSION ...]
//! EXPORT KEYS pattern FILE name [COMPRESSION ...]
//! ```
//!
//! The layouts are the CLI's (`--summary`, `--streams [--flat]`, `--series`, `--keys`; the
//! same `abacus-export` writers), read from this server's keyspace by a background thread
//! (`export/live.rs`): the reply comes at once (`+Background export started`), other clients
//! are never blocked for longer than one step of it, and INFO's persistence section shows
//! `export_in_progress`, `export_keys_total`, `export_reads` and the last export's status,
//! file, rows, bytes, time and error. One export at a time.
//!
//! Where: `export-dir` (config file or CONFIG SET), empty by default, which refuses EXPORT.
//! FILE is a plain name inside it: no `/` or `\`, no leading `.` (nor `.` or `..`, and
//! the exporter's temporaries start with one), no NUL; the file appears only when complete
//! (a temporary renamed over it), as with the CLI.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;

use abacus_export::{Codec, What};
use abacus_protocol::{Arg, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;

const G: &str = "server";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[Spec::conn("export", -5, ADMIN | NO_MULTI, NONE, conn_fn!(|conn, _, call| export(conn, &call.args)), G, "Writes a summary, streams, time series or keys to a Parquet file under export-dir, in the background: EXPORT SUMMARY name [FROM t] [TO t] | STREAMS pattern [FLAT] | SERIES filter ... | KEYS pattern FILE name [COMPRESSION zstd|snappy|none].")
    .abacus_docs("O(N) where N is the number of elements exported (in the background).")
    .noscript()];

/// Longest FILE name.
const MAX_NAME_BYTES: usize = 255;

fn export(conn: &mut Conn, a: &[Arg]) -> Frame {
    let server = conn.worker.server.clone();
    let dir = server.config.get(abacus_engine::param!("export-dir"));
    if dir.is_empty() {
        return Frame::error("ERR EXPORT is disabled: set export-dir (in the config file, or CONFIG SET export-dir /path) to the directory the server may write exports to");
    }
    let (what, file, codec) = match parse(a) {
        Ok(p) => p,
        Err(e) => return Frame::error(e),
    };
    if let Err(e) = check_name(&file) {
        return Frame::error(e);
    }
    let dir = PathBuf::from(dir);
    if !dir.is_dir() {
        return Frame::error(format!("ERR export-dir {} is not a directory", dir.display()));
    }
    let path = dir.join(&file);
    let exports = &server.export;
    if exports.in_progress.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Frame::error("ERR an export is already in progress (INFO persistence: export_in_progress)");
    }
    exports.keys_total.store(0, Ordering::Relaxed);
    exports.reads.store(0, Ordering::Relaxed);
    let s = server.clone();
    let spawned = std::thread::Builder::new().name("abacus-export".into()).spawn(move || {
        let started = Instant::now();
        let mut live = crate::export::live::Live::new(s.clone());
        let result = abacus_export::write(&mut live, &what, &path, codec, false);
        let mut last = crate::export::progress::Last { file, secs: started.elapsed().as_secs_f64(), ..Default::default() };
        match result {
            Ok((r, _)) => {
                tracing::info!("EXPORT to {}: {} rows, {} bytes in {:.2} s", path.display(), r.rows, r.bytes, last.secs);
                (last.status, last.rows, last.bytes) = ("ok", r.rows, r.bytes);
            }
            Err(e) => {
                tracing::warn!("EXPORT to {} failed: {e}", path.display());
                (last.status, last.error) = ("err", e);
            }
        }
        *s.export.last.lock().unwrap_or_else(|e| e.into_inner()) = last;
        s.export.in_progress.store(false, Ordering::Release);
    });
    match spawned {
        Ok(_) => Frame::simple("Background export started"),
        Err(e) => {
            exports.in_progress.store(false, Ordering::Release);
            Frame::error(format!("ERR cannot start the export thread: {e}"))
        }
    }
}

fn text(a: &[u8]) -> Result<String, String> {
    String::from_utf8(a.to_vec()).map_err(|_| "ERR EXPORT arguments must be UTF-8".to_string())
}

/// What, the file name and the codec.
fn parse(a: &[Arg]) -> Result<(What, String, Codec), String> {
    let syntax = || ERR_SYNTAX.to_string();
    let kind = a.get(1).ok_or_else(syntax)?;
    let mut i = 2;
    let mut what = if is(kind, "summary") {
        i += 1;
        What::Summary { name: text(a.get(2).ok_or_else(syntax)?)?, from: None, to: None }
    } else if is(kind, "streams") {
        i += 1;
        What::Streams { pattern: text(a.get(2).ok_or_else(syntax)?)?, flat: false }
    } else if is(kind, "keys") {
        i += 1;
        What::Keys { pattern: text(a.get(2).ok_or_else(syntax)?)? }
    } else if is(kind, "series") {
        // Filters up to FILE (a filter always holds '=').
        let mut filters = Vec::new();
        while i < a.len() && !is(&a[i], "file") {
            filters.push(text(&a[i])?);
            i += 1;
        }
        if filters.is_empty() {
            return Err(syntax());
        }
        What::Series { filters }
    } else {
        return Err("ERR EXPORT: expected SUMMARY, STREAMS, SERIES or KEYS".into());
    };
    let (mut file, mut codec) = (None, Codec::Zstd);
    while i < a.len() {
        let value = a.get(i + 1);
        match (&mut what, value) {
            (What::Streams { flat, .. }, _) if is(&a[i], "flat") => {
                *flat = true;
                i += 1;
                continue;
            }
            (What::Summary { from, .. }, Some(v)) if is(&a[i], "from") => *from = Some(parse_i64(v).map_err(|_| "ERR value is not an integer or out of range")?),
            (What::Summary { to, .. }, Some(v)) if is(&a[i], "to") => *to = Some(parse_i64(v).map_err(|_| "ERR value is not an integer or out of range")?),
            (_, Some(v)) if is(&a[i], "file") => file = Some(text(v)?),
            (_, Some(v)) if is(&a[i], "compression") => codec = Codec::parse(&text(v)?).map_err(|e| format!("ERR {e}"))?,
            _ => return Err(syntax()),
        }
        i += 2;
    }
    let file = file.ok_or("ERR EXPORT needs FILE name (a file name inside export-dir)")?;
    Ok((what, file, codec))
}

/// FILE must name a file directly inside export-dir.
fn check_name(f: &str) -> Result<(), String> {
    let bad = f.is_empty() || f.len() > MAX_NAME_BYTES || f.starts_with('.') || f.contains(['/', '\\', '\0']) || std::path::Path::new(f).is_absolute();
    if bad {
        return Err(format!("ERR bad export file name '{}': a plain file name inside export-dir (no '/', '\\', leading '.', or more than {MAX_NAME_BYTES} bytes)", f.escape_debug()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_stay_inside_export_dir() {
        for bad in ["", ".", "..", "../x.parquet", "/tmp/x", "a/b", "a\\b", ".hidden", "x\0y", &"n".repeat(256)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["x.parquet", "campaigns 2026.parquet", "a..b", "é.parquet"] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
    }
}
