//! EXPORT's progress and outcome, shared by the export thread (`live.rs`), the command
//! (`cmd/export.rs`) and INFO; a value of the `Server`, with no dependency on it (so the
//! server's `node.rs` holds it without a circle through `live.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The server's exports: the one running and the last one's outcome.
#[derive(Default)]
pub struct Exports {
    pub in_progress: AtomicBool,
    /// Keys the running export found (streams, series, summary keys, keys).
    pub keys_total: AtomicU64,
    /// Per-key reads done so far.
    pub reads: AtomicU64,
    pub last: Mutex<Last>,
}

/// The last finished export.
#[derive(Default, Clone)]
pub struct Last {
    /// `ok`, `err`, or empty before the first.
    pub status: &'static str,
    pub file: String,
    pub rows: u64,
    pub bytes: u64,
    pub secs: f64,
    pub error: String,
}

impl Exports {
    /// INFO's `export_*` fields (in the persistence section).
    pub fn info(&self) -> String {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // One line each: an error text never breaks INFO's lines, nor, with a comma, a client's
        // parse of the value (`a=1,b=2` fields).
        let error = last.error.replace(['\r', '\n'], " ").replace(',', ";");
        format!(
            "export_in_progress:{}\r\nexport_keys_total:{}\r\nexport_reads:{}\r\nexport_last_status:{}\r\nexport_last_file:{}\r\nexport_last_rows:{}\r\nexport_last_bytes:{}\r\nexport_last_time_sec:{:.3}\r\nexport_last_error:{}\r\n",
            self.in_progress.load(Ordering::Acquire) as u8,
            self.keys_total.load(Ordering::Relaxed),
            self.reads.load(Ordering::Relaxed),
            if last.status.is_empty() { "none" } else { last.status },
            last.file,
            last.rows,
            last.bytes,
            last.secs,
            error
        )
    }
}

