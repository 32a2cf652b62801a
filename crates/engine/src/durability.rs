//! The durability handles one server owns: its log, its snapshots, and whether writes feed
//! the effects stream. Passed explicitly, never reached through a static.
//!
//! Why a struct passed down and not process-wide statics: the command path used to find the
//! log through a static (`aof::global()`) and keep its pending log commands in thread-locals,
//! because a handler on some shard thread had no server handle. It now has one on every path:
//! a [`Durability`] is created with the `Server` (`Server::durability`), each shard holds a
//! clone in its [`ShardLog`] (`Shard::log`: the shard's pending log commands and its count of
//! writes for `save`), and every place a write runs reaches that shard (`exec::exec_keyed`,
//! `run_group`, the jobs of transactions and multi-shard commands, blocked clients, the
//! summarizer's direct path), or the `Worker`/`Server` it runs under. Two servers in one
//! process therefore never share a log (see the test below), and what a write path logs to is
//! visible in its signature.
//!
//! Run-time slots: the log opens once the data is loaded (not when the server is built:
//! clients may connect while it loads), and snapshots once the manifest is read, so both are
//! `OnceLock`s inside this server-owned struct, set once each; reading one is an atomic load.
//!
//! What is not here: replication. The effects stream's other consumer registers itself as
//! this server's [`Feed`] at start (`replication::Feed`), so the log and snapshots never name
//! replication: every record goes through [`Durability::write_record`], which hands it to the
//! feed when there is one (once per batch, not per command).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use abacus_persist::manifest::Manifest;

use crate::aof::{Aof, Fsync};
use crate::snapshot_state::Snapshots;

pub use crate::aof::ShardLog;

/// What the effects stream feeds besides the log: replication, which registers itself with
/// [`Durability::set_feed`] at start. A trait object, so that the log, snapshots and
/// recovery sit below replication and never name it.
pub trait Feed: Send + Sync {
    /// Writes one record of log commands (`buf`, after [`abacus_persist::log::HEADER_BYTES`]
    /// reserved bytes when `framed`) to `log` and to the stream; the log position after it
    /// (0 without a log).
    fn write_record(&self, log: Option<&Aof>, buf: &mut Vec<u8>, framed: bool, atomic: bool) -> u64;
    /// A snapshot started log segment `aof` now writes: its head records the position.
    fn at_rotation(&self, aof: &Aof, snapshot: &str);
    /// Snapshot `name` captured the data set now (replicas waiting for a full sync).
    fn at_snapshot(&self, name: &str);
}

/// One server's log and snapshots (see the file comment).
#[derive(Default)]
pub struct Durability {
    /// The effects stream's consumer besides the log, once registered.
    feed: OnceLock<Arc<dyn Feed>>,
    /// The append-only log, once `appendonly yes` opened it (after loading).
    log: OnceLock<Arc<Aof>>,
    /// Whether write commands produce log commands (the effects stream): on once the log is
    /// open or replication feeds on it; off while loading, so replays are not logged again.
    effects: AtomicBool,
    /// Snapshot state, once the data directory's manifest is read.
    snapshots: OnceLock<Arc<Snapshots>>,
    /// The final snapshot's requests at shutdown (see `snapshot::driver`): set by the driver
    /// on worker 0, used by the main thread when a signal arrives. Not on the request path.
    pub final_save: OnceLock<tokio::sync::mpsc::UnboundedSender<std::sync::mpsc::Sender<bool>>>,
}

impl Durability {
    pub fn new() -> Arc<Durability> {
        Arc::new(Durability::default())
    }

    /// The log, if `appendonly` opened it.
    #[inline]
    pub fn log(&self) -> Option<&Aof> {
        self.log.get().map(|a| &**a)
    }

    /// Whether write commands are logged (or fed to replicas): one atomic load.
    #[inline]
    pub fn effects_on(&self) -> bool {
        self.effects.load(Ordering::Relaxed)
    }

    /// Turns the effects stream on without a log file: replication feeds on it (see
    /// `replication/mod.rs`). Nothing is written to disk unless `appendonly` opened the log.
    pub fn enable_effects(&self) {
        self.effects.store(true, Ordering::Release);
    }

    /// Opens (or creates) segment `name` in `dir`, starts its fsync thread and turns logging
    /// on. Once per server. The log reports its stalls to `recorders`' latency monitor.
    pub fn start_log(&self, dir: &Path, name: &str, mode: Fsync, recorders: Arc<crate::recorders::Recorders>) -> Result<&Aof, String> {
        let aof = Arc::new(Aof::open(dir, name, mode, recorders)?);
        self.log.set(aof.clone()).map_err(|_| "the log is already started".to_string())?;
        std::thread::Builder::new().name("abacus-fsync".into()).spawn(move || aof.fsync_loop()).map_err(|e| format!("cannot start the fsync thread: {e}"))?;
        self.enable_effects();
        self.log().ok_or_else(|| "log not started".to_string())
    }

    /// Whether replies to writes wait for an fsync (`appendfsync always`).
    #[inline]
    pub fn fsync_always(&self) -> bool {
        self.log().is_some_and(|a| a.mode() == Fsync::Always)
    }

    /// Snapshot state, once [`Durability::init_snapshots`] ran.
    pub fn snapshots(&self) -> Option<&Arc<Snapshots>> {
        self.snapshots.get()
    }

    /// Reads the snapshot state of the data directory (after recovery). Once per server.
    pub fn init_snapshots(&self, dir: std::path::PathBuf, manifest: Manifest) {
        let _ = self.snapshots.set(Arc::new(Snapshots::open(dir, manifest)));
    }

    /// Registers the effects stream's other consumer (see [`Feed`]). Once per server.
    pub fn set_feed(&self, feed: Arc<dyn Feed>) {
        let _ = self.feed.set(feed);
    }

    /// The registered feed, if any.
    pub fn feed(&self) -> Option<&dyn Feed> {
        self.feed.get().map(|f| &**f)
    }

    /// Writes one record of log commands to this server's log and, through its [`Feed`], to
    /// the stream; the log position after it (0 without a log).
    #[inline]
    pub fn write_record(&self, buf: &mut Vec<u8>, framed: bool, atomic: bool) -> u64 {
        match self.feed.get() {
            Some(feed) => feed.write_record(self.log(), buf, framed, atomic),
            None => append_record(self.log(), buf, framed),
        }
    }

    /// Counts one write for the `save` schedule directly (a coordinator's write, off the
    /// per-command path, which counts in its shard's `ShardLog`).
    pub fn note_change(&self) {
        if let Some(s) = self.snapshots() {
            s.changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What every exit does (SIGTERM, SIGINT, SHUTDOWN): make the log durable, whatever
    /// `appendfsync` says, so a clean stop loses nothing even on power loss right after.
    /// An error means some acknowledged writes are only in memory (the disk refuses them).
    pub fn shutdown(&self) -> Result<(), String> {
        if let Some(aof) = self.log() {
            aof.finish()?;
            tracing::info!("append-only log synced to disk");
        }
        Ok(())
    }
}

/// Appends one record to `log` alone (no feed): the log position after it, 0 without a log.
pub fn append_record(log: Option<&Aof>, buf: &mut Vec<u8>, framed: bool) -> u64 {
    match log {
        Some(a) if framed => a.append_framed(buf),
        Some(a) => a.append(buf),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("abacus-durability-{tag}-{}-{}", std::process::id(), rand::random::<u64>()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    fn logged(dir: &Path, name: &str) -> Vec<Vec<Vec<u8>>> {
        let bytes = std::fs::read(dir.join(name)).expect("log file");
        let scan = abacus_persist::log::scan(&bytes);
        assert!(scan.problem.is_none(), "{:?}", scan.problem);
        let mut out = Vec::new();
        for r in &scan.records {
            for c in abacus_persist::log::commands(&bytes[r.range.clone()], r.format.clone()).expect("commands") {
                out.push(c.args.iter().map(|a| a.to_vec()).collect());
            }
        }
        out
    }

    /// Two servers' durability in one process: each shard's writes reach its own server's
    /// log and no other (a process-wide log could hold only one of them).
    #[test]
    fn two_servers_do_not_share_a_log() {
        let (dir_a, dir_b) = (temp_dir("a"), temp_dir("b"));
        let (a, b) = (Durability::new(), Durability::new());
        a.start_log(&dir_a, "log-000001.aof", Fsync::No, Default::default()).expect("log a");
        b.start_log(&dir_b, "log-000001.aof", Fsync::No, Default::default()).expect("log b");
        let (mut shard_a, mut shard_b) = (ShardLog::new(a.clone()), ShardLog::new(b.clone()));
        shard_a.log_command(1, 0, &[&b"SET"[..], b"ka", b"1"]);
        shard_b.log_command(1, 0, &[&b"SET"[..], b"kb", b"2"]);
        shard_b.log_command(1, 0, &[&b"DEL"[..], b"kb"]);
        assert!(shard_a.flush_pending() > 0);
        assert!(shard_b.flush_pending() > 0);
        assert_eq!(logged(&dir_a, "log-000001.aof"), vec![vec![b"SET".to_vec(), b"ka".to_vec(), b"1".to_vec()]]);
        assert_eq!(logged(&dir_b, "log-000001.aof"), vec![vec![b"SET".to_vec(), b"kb".to_vec(), b"2".to_vec()], vec![b"DEL".to_vec(), b"kb".to_vec()]]);
        // A server whose log is off logs nothing, beside the two that log.
        let c = Durability::new();
        let mut shard_c = ShardLog::new(c);
        shard_c.log_command(1, 0, &[&b"SET"[..], b"kc", b"3"]);
        assert_eq!(shard_c.flush_pending(), 0);
        assert_eq!(logged(&dir_a, "log-000001.aof").len(), 1);
        let _ = std::fs::remove_dir_all(&dir_a);
        let _ = std::fs::remove_dir_all(&dir_b);
    }
}
