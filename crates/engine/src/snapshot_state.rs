//! The snapshot state one server holds in its `Durability`: the data directory's manifest,
//! whether a snapshot runs, and the figures INFO and LASTSAVE report. Apart from the taking of
//! snapshots (`snapshot.rs`), which runs on the shards, so that the durability handles sit
//! below it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

use abacus_persist::manifest::Manifest;

use crate::clock::now_ms;

/// Snapshot state shared by the whole server.
pub struct Snapshots {
    pub dir: PathBuf,
    pub(crate) manifest: Mutex<Manifest>,
    pub in_progress: AtomicBool,
    /// BGSAVE SCHEDULE arrived while one was running: the driver starts another after it.
    pub scheduled: AtomicBool,
    /// Unix seconds of the last successful snapshot (LASTSAVE).
    pub last_save_s: AtomicU64,
    pub last_ok: AtomicBool,
    pub last_duration_ms: AtomicU64,
    pub last_keys: AtomicU64,
    pub last_bytes: AtomicU64,
    /// The last snapshot's blocks before compression: the base of
    /// auto-aof-rewrite-percentage (see [`driver`]).
    pub last_raw_bytes: AtomicU64,
    pub started_ms: AtomicU64,
    /// Writes since the last successful snapshot (rdb_changes_since_last_save).
    pub changes: AtomicU64,
    pub(crate) changes_at_start: AtomicU64,
    /// Completed snapshots (successful or not), for SAVE to wait on.
    pub(crate) done_tx: tokio::sync::watch::Sender<u64>,
    /// Why the running snapshot was taken (SAVE, BGSAVE, the save schedule...), for the log.
    /// Set by [`start`] under `in_progress`, so one snapshot at a time writes it.
    pub(crate) reason: Mutex<&'static str>,
}

impl Snapshots {
    /// The snapshot state of a data directory whose manifest is `manifest` (after recovery);
    /// held by the server's `Durability`.
    pub fn open(dir: PathBuf, manifest: Manifest) -> Snapshots {
        let index = manifest.snapshot.as_ref().and_then(|s| abacus_persist::snapshot::index(&dir.join(s)).ok());
        let last = index.as_ref().map_or(now_ms(), |i| i.created_ms);
        let (snapshot_bytes, raw_bytes) = index.as_ref().map_or((0, 0), |i| (i.file_bytes, i.raw_bytes()));
        let (done_tx, _) = tokio::sync::watch::channel(0);
        Snapshots {
            dir,
            manifest: Mutex::new(manifest),
            in_progress: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            reason: Mutex::new(""),
            last_save_s: AtomicU64::new(last / 1000),
            last_ok: AtomicBool::new(true),
            last_duration_ms: AtomicU64::new(0),
            last_keys: AtomicU64::new(0),
            last_bytes: AtomicU64::new(snapshot_bytes),
            last_raw_bytes: AtomicU64::new(raw_bytes),
            started_ms: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            changes_at_start: AtomicU64::new(0),
            done_tx,
        }
    }
}

