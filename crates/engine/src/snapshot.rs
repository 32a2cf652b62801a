//! Snapshots without fork, and log compaction.
//!
//! A snapshot starts at one point in every shard's history: the coordinator locks all shards
//! (no command runs anywhere), tells every database to begin (`Db::snapshot_begin`), starts a
//! new log segment, and releases. That takes microseconds; nothing is copied. From then on
//! each shard hands the snapshot every key's state as of that point exactly once: its sweep
//! walks the table a slice at a time between other work (`Shard::snapshot_step`), and a write
//! to a key the sweep has not reached yet first hands over the key's old state (copy before
//! write, per key, not per page as fork does). Memory overhead is therefore bounded by the
//! blocks in flight to the writer ([`BLOCKS_IN_FLIGHT`] x [`BLOCK_BYTES`]), not by the write
//! rate or the dataset: there is no doubling as with fork's copy-on-write under writes.
//!
//! Blocks go through a bounded channel to a writer thread that compresses and writes them
//! (`abacus_persist::snapshot`). When every shard is done the file is fsynced and renamed,
//! and the manifest is replaced: the new snapshot plus the log segment started with it.
//! Older snapshots and segments are then deleted. That is also log compaction
//! (BGREWRITEAOF, and automatically when the log has grown by `auto-aof-rewrite-percentage`):
//! the log's size is bounded by the writes since the last snapshot, and compaction never
//! blocks writes.
//!
//! Triggers: BGSAVE, SAVE (waits for the background snapshot; other clients keep being
//! served), BGREWRITEAOF, the `save` schedule, log growth, SHUTDOWN and SIGTERM when
//! snapshots are configured and the log is off.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abacus_keyspace::Entry;
use abacus_persist::manifest::{sync_dir, Manifest};

use crate::durability::Durability;
use crate::exec::{Access, Worker};
use crate::shard::{now_ms, Shard};

/// Raw bytes per snapshot block before compression.
pub const BLOCK_BYTES: usize = 1 << 20;
/// Blocks queued for the writer at most; a shard whose block does not fit waits (bounded
/// memory beats a snapshot that can outgrow the machine).
pub const BLOCKS_IN_FLIGHT: usize = 16;
/// Entries a shard's sweep visits per step, between other work.
pub const SWEEP_STEP_ENTRIES: usize = 1024;

enum Msg {
    Block { shard: u16, raw: Vec<u8>, keys: u64 },
    /// A key the snapshot cannot hold (see [`ShardBuf::add`]): the snapshot fails.
    Refused(String),
    Done,
}

/// A shard's part of a running snapshot: the block being filled.
pub struct ShardSnapshot {
    buf: Arc<Mutex<ShardBuf>>,
}

struct ShardBuf {
    shard: u16,
    raw: Vec<u8>,
    keys: u64,
    tx: SyncSender<Msg>,
}

impl ShardBuf {
    /// Adds one key's encoding to the block being filled. A key whose encoding alone would
    /// make a block larger than a reader accepts (`MAX_BLOCK_BYTES`: a value or collection
    /// of about a gigabyte, possible with `proto-max-bulk-len` raised) is refused: the
    /// snapshot fails with an error naming it, and the previous snapshot and the log (which
    /// hold the key) stay. Writing it would make a file the next start rejects.
    fn add(&mut self, db: u16, key: &[u8], e: &Entry, expire_at_ms: u64) {
        let before = self.raw.len();
        abacus_persist::entry::encode(&mut self.raw, db, key, e, expire_at_ms);
        let size = self.raw.len() - before;
        let max = abacus_persist::snapshot::MAX_BLOCK_BYTES as usize;
        if self.raw.len() > max {
            self.raw.truncate(before);
            if size > max {
                let shown = String::from_utf8_lossy(&key[..key.len().min(128)]).into_owned();
                let _ = self.tx.send(Msg::Refused(format!(
                    "key '{shown}' (database {db}) takes {size} bytes, more than a snapshot block holds ({max} bytes)"
                )));
                return;
            }
            // It fits in a block of its own.
            self.send();
            abacus_persist::entry::encode(&mut self.raw, db, key, e, expire_at_ms);
        }
        self.keys += 1;
        if self.raw.len() >= BLOCK_BYTES {
            self.send();
        }
    }

    fn send(&mut self) {
        if !self.raw.is_empty() {
            let raw = std::mem::replace(&mut self.raw, Vec::with_capacity(BLOCK_BYTES + 64 * 1024));
            let _ = self.tx.send(Msg::Block { shard: self.shard, raw, keys: std::mem::take(&mut self.keys) });
        }
    }
}

impl Shard {
    pub fn snapshot_active(&self) -> bool {
        self.snapshot.is_some()
    }

    /// One slice of the sweep over this shard's databases; sends the shard's last block and
    /// its completion when all are done.
    pub fn snapshot_step(&mut self, budget: usize) {
        if self.snapshot.is_none() {
            return;
        }
        for db in &mut self.dbs {
            if db.snapshot_active() {
                let started = self.rec.latency.timer();
                db.snapshot_step(budget);
                self.rec.latency.sample_since("snapshot-step", started);
                return;
            }
        }
        if let Some(s) = self.snapshot.take() {
            let mut b = s.buf.lock().unwrap_or_else(|p| p.into_inner());
            b.send();
            let _ = b.tx.send(Msg::Done);
        }
    }
}

pub use crate::snapshot_state::Snapshots;

fn snapshot_name(seq: u64) -> String {
    format!("snap-{seq:06}.abs")
}

/// Starts a snapshot (and a new log segment). Returns the number of snapshots completed
/// before this one, for [`wait`].
/// `why` names the cause in the log ("SAVE", "BGSAVE", "the save schedule"...).
pub async fn start(worker: &Worker, access: Access<'_>, why: &'static str) -> Result<u64, String> {
    let snaps = worker.engine.durability.snapshots().cloned().ok_or("ERR snapshots are not initialised")?;
    if snaps.in_progress.swap(true, Ordering::AcqRel) {
        return Err("ERR Background save already in progress".into());
    }
    *snaps.reason.lock().unwrap_or_else(|p| p.into_inner()) = why;
    let before = *snaps.done_tx.borrow();
    match begin(worker, access, &snaps).await {
        Ok(()) => Ok(before),
        Err(e) => {
            snaps.in_progress.store(false, Ordering::Release);
            snaps.last_ok.store(false, Ordering::Relaxed);
            tracing::error!("snapshot failed to start: {e}");
            Err(format!("ERR {e}"))
        }
    }
}

fn reason(snaps: &Snapshots) -> &'static str {
    *snaps.reason.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until more than `before` snapshots have completed; Ok if the last one succeeded.
pub async fn wait(durability: &Durability, before: u64) -> Result<(), String> {
    let snaps = durability.snapshots().ok_or("ERR snapshots are not initialised")?;
    let mut rx = snaps.done_tx.subscribe();
    rx.wait_for(|&n| n > before).await.map_err(|_| "ERR server is shutting down".to_string())?;
    if snaps.last_ok.load(Ordering::Acquire) {
        Ok(())
    } else {
        Err("ERR snapshot failed: see the server log".into())
    }
}

async fn begin(worker: &Worker, access: Access<'_>, snaps: &Arc<Snapshots>) -> Result<(), String> {
    let shards = worker.shards();
    let (seq, tmp, name) = {
        let m = snaps.manifest.lock().unwrap_or_else(|p| p.into_inner());
        let seq = m.files().map(|f| crate::aof::file_seq(f)).max().unwrap_or(0) + 1;
        (seq, snaps.dir.join(format!("{}.tmp", snapshot_name(seq))), snapshot_name(seq))
    };
    let started = now_ms();
    // Also when the start fails: the driver retries a failed snapshot only after a pause.
    snaps.started_ms.store(started, Ordering::Relaxed);
    let writer = abacus_persist::snapshot::Writer::create(&tmp, started, shards as u32)?;
    let result = begin_with(worker, access, snaps, writer, seq, &tmp, &name, started).await;
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn begin_with(
    worker: &Worker,
    access: Access<'_>,
    snaps: &Arc<Snapshots>,
    writer: abacus_persist::snapshot::Writer,
    seq: u64,
    tmp: &std::path::Path,
    name: &str,
    started: u64,
) -> Result<(), String> {
    let shards = worker.shards();
    let (tx, rx) = sync_channel::<Msg>(BLOCKS_IN_FLIGHT);
    // The point in time: every shard held, so no command runs between the first database's
    // begin and the log's switch to the new segment.
    let own;
    let access = match access {
        Access::Locked(_) => access,
        Access::Free => {
            own = worker.lock(0..shards).await.ok_or("server is shutting down")?;
            Access::Locked(&own)
        }
    };
    // The FUNCTION libraries as of this point: they change only with every shard held
    // (the server's FUNCTION LOAD, DELETE, FLUSH and RESTORE), so they match the keys.
    let mut writer = writer;
    writer.write_functions(&worker.engine.scripts.library_codes())?;
    // The new log segment first, while every shard is held: if the disk refuses it (full,
    // failing), nothing has changed yet and the snapshot simply fails to start. The manifest
    // names the new segment before the first write goes there: a crash in between finds an
    // empty last segment, never writes it does not know of.
    let mut logs_after = Vec::new();
    if let Some(aof) = worker.engine.durability.log() {
        // Commands deferred for a shared write (`ShardLog::defer_pending`) before this point were
        // written when the shards were locked (`shard_loop`): they are in the old segment.
        let seg = crate::aof::segment_name(seq);
        let new = aof.prepare_segment(&seg)?;
        let mut m = snaps.manifest.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = m.clone();
        next.logs.push(seg.clone());
        if let Err(e) = next.write(&snaps.dir) {
            let _ = std::fs::remove_file(snaps.dir.join(&seg));
            return Err(e);
        }
        *m = next;
        aof.rotate(new);
        // The new segment starts at a known replication position (when there is one).
        if let Some(feed) = worker.engine.durability.feed() {
            feed.at_rotation(aof, name);
        }
        logs_after.push(seg);
    }
    let tx_for_shards = tx.clone();
    worker
        .run_all(access, move |s: &mut Shard| {
            let buf = Arc::new(Mutex::new(ShardBuf {
                shard: s.id as u16,
                raw: Vec::with_capacity(BLOCK_BYTES + 64 * 1024),
                keys: 0,
                tx: tx_for_shards.clone(),
            }));
            for (i, db) in s.dbs.iter_mut().enumerate() {
                let buf = buf.clone();
                db.snapshot_begin(Box::new(move |key: &[u8], e: &Entry, expire_at_ms: u64| {
                    buf.lock().unwrap_or_else(|p| p.into_inner()).add(i as u16, key, e, expire_at_ms);
                }));
            }
            s.snapshot = Some(ShardSnapshot { buf });
            s.log.fold_changes();
        })
        .await
        .ok_or("server is shutting down")?;
    drop(tx);
    // Replicas waiting for a full sync start their stream at this point in time.
    if let Some(feed) = worker.engine.durability.feed() {
        feed.at_snapshot(name);
    }
    snaps.changes_at_start.store(snaps.changes.load(Ordering::Relaxed), Ordering::Relaxed);
    // Snapshots never fork and never stop the server: SAVE only waits for one to finish.
    tracing::info!("Snapshot {name} started for {}: the server keeps serving while it is written", reason(snaps));
    let (tmp, name, snaps) = (tmp.to_path_buf(), name.to_string(), snaps.clone());
    std::thread::Builder::new()
        .name("abacus-snapshot".into())
        .spawn(move || write_snapshot(&snaps, writer, rx, shards, tmp, name, logs_after, started))
        .map_err(|e| format!("cannot start the snapshot writer: {e}"))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn write_snapshot(
    snaps: &Snapshots,
    mut writer: abacus_persist::snapshot::Writer,
    rx: Receiver<Msg>,
    shards: usize,
    tmp: PathBuf,
    name: String,
    logs_after: Vec<String>,
    started: u64,
) {
    let t0 = Instant::now();
    let mut error: Option<String> = None;
    let mut done = 0;
    // Drain every message even after an error: the shards must finish their sweeps.
    while done < shards {
        match rx.recv() {
            Ok(Msg::Block { shard, raw, keys }) => {
                if error.is_none() {
                    if let Err(e) = writer.write_block(shard, &raw, keys) {
                        error = Some(e);
                    }
                }
            }
            Ok(Msg::Refused(why)) => {
                error.get_or_insert(why);
            }
            Ok(Msg::Done) => done += 1,
            Err(_) => {
                error.get_or_insert_with(|| "a shard stopped before finishing its snapshot".into());
                break;
            }
        }
    }
    let result = match error {
        Some(e) => Err(e),
        None => writer.finish().and_then(|written| {
            let path = snaps.dir.join(&name);
            std::fs::rename(&tmp, &path).map_err(|e| format!("cannot rename {}: {e}", tmp.display()))?;
            sync_dir(&snaps.dir)?;
            let old = {
                let mut m = snaps.manifest.lock().unwrap_or_else(|p| p.into_inner());
                let next = Manifest { snapshot: Some(name.clone()), logs: logs_after.clone() };
                next.write(&snaps.dir)?;
                std::mem::replace(&mut *m, next)
            };
            for f in old.files() {
                if Some(f) != Some(&name) && !logs_after.contains(f) {
                    let _ = std::fs::remove_file(snaps.dir.join(f));
                }
            }
            Ok(written)
        }),
    };
    match result {
        Ok(abacus_persist::snapshot::Written { keys, bytes, raw_bytes }) => {
            snaps.last_ok.store(true, Ordering::Release);
            snaps.last_save_s.store(started / 1000, Ordering::Relaxed);
            snaps.last_keys.store(keys, Ordering::Relaxed);
            snaps.last_bytes.store(bytes, Ordering::Relaxed);
            snaps.last_raw_bytes.store(raw_bytes, Ordering::Relaxed);
            let at_start = snaps.changes_at_start.load(Ordering::Relaxed);
            let _ = snaps.changes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some(c.saturating_sub(at_start)));
            tracing::info!("Snapshot {name} saved on disk ({}): {keys} keys, {bytes} bytes, {:.2}s", reason(snaps), t0.elapsed().as_secs_f64());
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            snaps.last_ok.store(false, Ordering::Release);
            tracing::error!("Snapshot {name} failed ({}): {e}", reason(snaps));
        }
    }
    snaps.last_duration_ms.store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
    snaps.in_progress.store(false, Ordering::Release);
    snaps.done_tx.send_modify(|n| *n += 1);
}

pub use crate::config::parse_schedule;

/// Starts snapshots when the `save` schedule or the log's growth calls for one, and serves
/// shutdown's final snapshot. Runs on worker 0.
pub async fn driver(worker: std::rc::Rc<Worker>) {
    // Unbounded, but fed once per shutdown signal.
    let (tx, mut final_rx) = tokio::sync::mpsc::unbounded_channel();
    let durability = worker.engine.durability.clone();
    // Requests for a final snapshot at shutdown, from the main thread (`final_save_blocking`).
    let _ = durability.final_save.set(tx);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            req = final_rx.recv() => {
                if let Some(done) = req {
                    let result = match start(&worker, Access::Free, "the final save before exiting").await {
                        Ok(before) => wait(&durability, before).await,
                        Err(e) => match durability.snapshots() {
                            // One is running already: wait for it, then take ours.
                            Some(s) if s.in_progress.load(Ordering::Acquire) => {
                                let n = *s.done_tx.borrow();
                                let _ = wait(&durability, n).await;
                                match start(&worker, Access::Free, "the final save before exiting").await {
                                    Ok(before) => wait(&durability, before).await,
                                    Err(e) => Err(e),
                                }
                            }
                            _ => Err(e),
                        },
                    };
                    let _ = done.send(result.is_ok());
                }
                continue;
            }
        }
        let Some(snaps) = durability.snapshots() else { continue };
        if worker.engine.recorders.loading.active() || snaps.in_progress.load(Ordering::Acquire) {
            continue;
        }
        let cfg = &worker.engine.config;
        let now_s = now_ms() / 1000;
        let since = now_s.saturating_sub(snaps.last_save_s.load(Ordering::Relaxed));
        let changes = snaps.changes.load(Ordering::Relaxed);
        let scheduled = parse_schedule(&cfg.get(crate::param!("save"))).unwrap_or_default().iter().any(|&(secs, n)| changes >= n.max(1) && since >= secs);
        // A failed snapshot is retried after a pause, not in a loop.
        let retry_ok = snaps.last_ok.load(Ordering::Relaxed) || now_s.saturating_sub(snaps.started_ms.load(Ordering::Relaxed) / 1000) >= 5;
        let mut grow = false;
        if let Some(aof) = durability.log() {
            let pct = cfg.get_u64(crate::param!("auto-aof-rewrite-percentage"));
            let min = cfg.get_u64(crate::param!("auto-aof-rewrite-min-size"));
            // As Redis's rule, with the snapshot as the rewritten base: compact when the data
            // on disk (snapshot + log since) is at least the minimum and the log has grown by
            // the percentage of the snapshot. Without a snapshot, at the minimum.
            //
            // The percentage is of the snapshot's data before compression. The log is not
            // compressed, and what the rule weighs is replaying the log against loading the
            // snapshot, both proportional to uncompressed bytes. Against the LZ4 file size,
            // data that compresses well (W1's repeated 16-byte appends: 4x) was compacted four
            // times as often as the same data in Redis, whose RDB base leaves short strings
            // uncompressed.
            let file = snaps.last_bytes.load(Ordering::Relaxed);
            let base = snaps.last_raw_bytes.load(Ordering::Relaxed);
            let (_, log) = aof.segment();
            grow = pct > 0 && file + log >= min && log.saturating_mul(100) / base.max(1) >= pct;
        }
        let requested = snaps.scheduled.swap(false, Ordering::AcqRel);
        if requested || ((scheduled || grow) && retry_ok) {
            let why = if requested { "BGSAVE SCHEDULE" } else if grow { "the log grew past auto-aof-rewrite-percentage" } else { "the save schedule" };
            let _ = start(&worker, Access::Free, why).await;
        }
    }
}

/// Why writes are refused because persistence is failing, if they are (Redis's
/// `writeCommandsDeniedByDiskError`, in its order): the last snapshot failed while a save
/// schedule is set and `stop-writes-on-bgsave-error` is on, or the log cannot be written.
/// One atomic load each when all is well.
pub fn refusing_writes(durability: &Durability, config: &crate::config::Config) -> Option<String> {
    if durability.snapshots().is_some_and(|s| !s.last_ok.load(Ordering::Relaxed))
        && config.get_bool(crate::param!("stop-writes-on-bgsave-error"))
        && !config.get(crate::param!("save")).trim().is_empty()
    {
        return Some(
            "MISCONF Abacus is configured to save snapshots, but it's currently unable to persist to disk. \
             Commands that may modify the data set are disabled, because this instance is configured to report \
             errors during writes if snapshotting fails (stop-writes-on-bgsave-error option). Please check the \
             Abacus logs for details about the snapshot error."
                .into(),
        );
    }
    durability.log().and_then(|a| a.refusing_writes())
}

/// Takes a final snapshot from outside the workers (SIGTERM) and waits for it; whether it
/// succeeded.
pub fn final_save_blocking(durability: &Durability) -> bool {
    if let Some(tx) = durability.final_save.get() {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        if tx.send(done_tx).is_ok() {
            return done_rx.recv_timeout(Duration::from_secs(3600)).unwrap_or(false);
        }
    }
    false
}

/// INFO's persistence section, with Redis's field names.
pub fn info_persistence(durability: &Durability, load: &crate::stats::Loading) -> String {
    use std::fmt::Write;
    let loading = load.active.load(Ordering::Acquire);
    let mut out = String::from("# Persistence\r\n");
    let _ = write!(out, "loading:{}\r\nasync_loading:0\r\n", loading as u8);
    if loading {
        let total = load.total.load(Ordering::Relaxed).max(1);
        let done = load.loaded.load(Ordering::Relaxed);
        let started = load.start_ms.load(Ordering::Relaxed);
        let elapsed_s = (now_ms().saturating_sub(started)) as f64 / 1000.0;
        let eta = if done > 0 { (total - done.min(total)) as f64 * elapsed_s / done as f64 } else { 0.0 };
        let _ = write!(
            out,
            "loading_start_time:{}\r\nloading_total_bytes:{total}\r\nloading_loaded_bytes:{done}\r\nloading_loaded_perc:{:.2}\r\nloading_eta_seconds:{}\r\n",
            started / 1000,
            done as f64 * 100.0 / total as f64,
            eta as u64
        );
    }
    let (changes, in_progress, last_save, ok, dur, started, keys, bytes) = match durability.snapshots() {
        Some(s) => (
            s.changes.load(Ordering::Relaxed),
            s.in_progress.load(Ordering::Relaxed),
            s.last_save_s.load(Ordering::Relaxed),
            s.last_ok.load(Ordering::Relaxed),
            s.last_duration_ms.load(Ordering::Relaxed),
            s.started_ms.load(Ordering::Relaxed),
            s.last_keys.load(Ordering::Relaxed),
            s.last_bytes.load(Ordering::Relaxed),
        ),
        None => (0, false, 0, true, 0, 0, 0, 0),
    };
    let status = if ok { "ok" } else { "err" };
    let saves = durability.snapshots().map_or(0, |s| *s.done_tx.borrow());
    // Redis reports -1 until the first snapshot (or rewrite) has finished.
    let last_s = if saves == 0 { -1 } else { (dur / 1000) as i64 };
    let current = if in_progress { (now_ms().saturating_sub(started) / 1000) as i64 } else { -1 };
    let _ = write!(
        out,
        "current_cow_peak:0\r\nrdb_changes_since_last_save:{changes}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{last_save}\r\n\
         rdb_last_bgsave_status:{status}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{current}\r\n\
         rdb_saves:{}\r\nrdb_last_save_keys:{keys}\r\nrdb_last_save_bytes:{bytes}\r\n",
        in_progress as u8,
        last_s,
        saves,
    );
    match durability.log() {
        Some(aof) => {
            let (name, size) = aof.segment();
            let write_ok = aof.error.lock().is_ok_and(|e| e.is_none());
            let _ = write!(
                out,
                "aof_enabled:1\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:{}\r\n\
                 aof_current_rewrite_time_sec:{current}\r\naof_last_bgrewrite_status:{status}\r\naof_last_write_status:{}\r\n\
                 aof_current_size:{}\r\naof_base_size:{}\r\naof_base_data_size:{}\r\naof_current_segment:{name}\r\naof_fsync_policy:{}\r\n\
                 aof_buffer_length:0\r\naof_pending_bio_fsync:{}\r\naof_delayed_fsync:0\r\n",
                in_progress as u8,
                last_s,
                if write_ok { "ok" } else { "err" },
                bytes + size,
                bytes,
                durability.snapshots().map_or(0, |s| s.last_raw_bytes.load(Ordering::Relaxed)),
                match aof.mode() {
                    crate::aof::Fsync::Always => "always",
                    crate::aof::Fsync::EverySec => "everysec",
                    crate::aof::Fsync::No => "no",
                },
                (aof.appended() > aof.durable()) as u8,
            );
        }
        None => {
            let _ = write!(out, "aof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_last_bgrewrite_status:ok\r\naof_last_write_status:ok\r\n");
        }
    }
    out.push_str("\r\n");
    out
}
