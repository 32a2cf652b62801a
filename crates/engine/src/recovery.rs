//! Recovery on start: the latest snapshot, then the log segments written after it.
//!
//! The manifest (`abacus-persist::manifest`) names the files. The snapshot is loaded with
//! one thread per shard when it was written with the current shard count (each shard's
//! blocks go straight into that shard), else key by key through the slot map. The log is
//! then replayed command by command through the same code that ran the commands live
//! (`exec::exec_keyed_untimed`), at the time each command ran, so expiries and lazy
//! deletions come out as they did.
//!
//! Damage: a torn tail of the last segment (a crash in the middle of a write) is cut off with
//! a warning that says how many bytes were dropped (`aof-load-truncated yes`, the default);
//! anything else — a bad record with data after it, a damaged snapshot — stops the start with
//! a message naming the file, the offset and the command that repairs it. Abacus never
//! starts on a guess.
//!
//! Recovery runs with logging off while clients get -LOADING (INFO works and shows the
//! `loading_*` fields). The log tells the story: what is about to load, a progress line every
//! second (percent of the bytes, keys and commands so far, rate, ETA) and at the end of the
//! snapshot, then the summary. The server ends the loading state, and logs "Ready to accept
//! connections", once the loaded shards are in place.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use abacus_persist::log::{self as fmt, Problem};
use abacus_persist::manifest::Manifest;
use abacus_persist::snapshot;
use abacus_protocol::{Args, Bytes};

use abacus_commands::command::{Handler, Spec};
use abacus_protocol::Arg;
use crate::config::{CmdConfig, Config};
use crate::exec::{command_keys, exec_keyed_untimed};
use crate::shard::{shard_of, Shard};
use crate::recorders::Recorders;
use crate::stats::Loading;

/// Entries whose table slots are prefetched together while loading a snapshot.
const PREFETCH_RUN: usize = 16;

/// What recovery found.
pub struct Recovered {
    pub shards: Vec<Shard>,
    pub manifest: Manifest,
    pub keys_loaded: u64,
    pub commands_replayed: u64,
    /// The replication position the log ends at, if its last record is a position mark
    /// (see "Restarts" in `replication/mod.rs`); None when anything follows the last mark.
    pub position: Option<crate::log_marks::Position>,
    /// With `Access::ReadOnly { skip_torn_tail: true }`: the torn tail read past, said for
    /// the reader to show (the server's start logs its own cut).
    pub skipped_tail: Option<String>,
    /// The FUNCTION libraries' code (the snapshot's, then the log's FUNCTION commands), in
    /// name order: the server compiles them once loading is done.
    pub functions: Vec<Bytes>,
}

/// The FUNCTION libraries' code by library name, as replay changes it.
pub type FunctionCodes = std::collections::BTreeMap<String, Bytes>;

/// What a replayed connection-level write may change: the shards, and the FUNCTION
/// libraries (whose code replay keeps; Lua runs only once loading is done).
pub struct Replay<'a> {
    pub shards: &'a mut [Shard],
    pub functions: &'a mut FunctionCodes,
}

/// How recovery replays a logged connection-level write (FLUSHALL, SWAPDB, DEBUG POPULATE)
/// over every shard, with no connection or worker running yet: the command's entry says it
/// (`command::ConnEntry`), so the log's reader never matches command names.
pub type ReplayFn = fn(r: &mut Replay<'_>, db: usize, args: &[Arg], now_ms: u64) -> Result<(), String>;

/// The command table as recovery reads it: given by the server, whose table holds the
/// connection-level families above this layer (`command::replayer`).
#[derive(Clone, Copy)]
pub struct Replayer {
    /// A logged command's entry (subcommands resolved), None for an unknown one.
    pub lookup: fn(&[Arg]) -> Option<&'static Spec>,
    /// A connection-level entry's replay, None for one that cannot be replayed.
    pub replay: fn(Handler) -> Option<ReplayFn>,
}

/// What recovery may do to the data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The server's start: a torn tail of the last segment is cut off on disk when
    /// `aof-load-truncated` is yes (the server appends after it), else refused.
    Server,
    /// A reader of a stopped server's directory (`abacus export --dir`): nothing is written.
    /// A torn tail is refused, or, with `skip_torn_tail`, read up to the last complete record
    /// (what the server would load) and the file left as it is.
    ReadOnly { skip_torn_tail: bool },
}

/// Loads the data directory's snapshot and log into `threads` fresh shards, with the
/// progress in `recorders.loading`.
pub fn recover(config: &Config, dir: &Path, threads: usize, databases: usize, commands: Replayer, recorders: &Arc<Recorders>) -> Result<Recovered, String> {
    recover_with(config, dir, threads, databases, commands, recorders, Access::Server)
}

/// [`recover`], saying what it may write.
pub fn recover_with(config: &Config, dir: &Path, threads: usize, databases: usize, commands: Replayer, recorders: &Arc<Recorders>, access: Access) -> Result<Recovered, String> {
    let loading = &recorders.loading;
    // Durability of their own, whose effects stay off: what is replayed came from the log and
    // is not logged again (the server's log opens once loading is done).
    let unlogged = crate::durability::Durability::new();
    let mut shards: Vec<Shard> = (0..threads).map(|i| Shard::new(i, databases, unlogged.clone(), recorders.clone())).collect();
    // Loaded keys get the access field of the policy in force (see `Db::insert_loaded`).
    let tracking = config.cmd_config().tracking();
    shards.iter_mut().flat_map(|s| s.dbs.iter_mut()).for_each(|d| d.set_tracking(tracking));
    let Some(manifest) = Manifest::read(dir)? else {
        return Ok(Recovered { shards, manifest: Manifest::default(), keys_loaded: 0, commands_replayed: 0, position: None, functions: Vec::new(), skipped_tail: None });
    };
    let started = Instant::now();
    let log_bytes: u64 = manifest.logs.iter().map(|l| std::fs::metadata(dir.join(l)).map_or(0, |m| m.len())).sum();
    let snap_bytes = manifest.snapshot.as_ref().map_or(0, |s| std::fs::metadata(dir.join(s)).map_or(0, |m| m.len()));
    loading.start(snap_bytes + log_bytes);
    tracing::info!(
        "Loading the data set from {}: {}{} log segment(s) ({:.1} MB)",
        dir.display(),
        manifest.snapshot.as_ref().map(|s| format!("snapshot {s} ({:.1} MB), ", snap_bytes as f64 / 1e6)).unwrap_or_default(),
        manifest.logs.len(),
        log_bytes as f64 / 1e6
    );
    let _progress = Progress::start(recorders.clone());
    let mut functions = FunctionCodes::new();
    let mut skipped_tail = None;
    let result = (|| {
        let mut keys_loaded = 0;
        if let Some(snap) = &manifest.snapshot {
            let codes;
            (keys_loaded, codes) = load_snapshot(&dir.join(snap), &mut shards, databases, loading)?;
            for code in codes {
                let (name, _) = abacus_scripting::parse_library_header(&code).map_err(|e| format!("snapshot {snap}: a FUNCTION library: {e}"))?;
                functions.insert(name, Bytes::from(code));
            }
            tracing::info!("snapshot {snap} loaded: {keys_loaded} keys in {:.2}s", started.elapsed().as_secs_f64());
            tracing::info!("{}", loading.progress_line());
        }
        loading.loaded.store(snap_bytes, Ordering::Relaxed);
        let mut commands_replayed = 0;
        let cfg = config.cmd_config();
        let mut position = Positions { snapshot: manifest.snapshot.clone(), at: None, broken: false };
        let skipped = &mut skipped_tail;
        for (i, name) in manifest.logs.iter().enumerate() {
            let last = i + 1 == manifest.logs.len();
            let mut r = Replay { shards: &mut shards, functions: &mut functions };
            commands_replayed += replay_log(config, &dir.join(name), last, access, skipped, &mut r, databases, cfg, snap_bytes, &mut position, commands, loading)?;
        }
        let position = position.at;
        Ok::<_, String>((keys_loaded, commands_replayed, position))
    })();
    let (keys_loaded, commands_replayed, position) = result?;
    if keys_loaded > 0 || commands_replayed > 0 {
        tracing::info!(
            "DB loaded from disk: {keys_loaded} keys from the snapshot, {commands_replayed} commands from the log, {:.3} seconds",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(Recovered { shards, manifest, keys_loaded, commands_replayed, position, functions: functions.into_values().collect(), skipped_tail })
}

/// Loads a snapshot into the shards; returns the number of keys and the FUNCTION libraries'
/// code.
fn load_snapshot(path: &Path, shards: &mut [Shard], databases: usize, loading: &Loading) -> Result<(u64, Vec<Vec<u8>>), String> {
    let mut idx = snapshot::index(path)?;
    let functions = std::mem::take(&mut idx.functions);
    let now = crate::shard::now_ms();
    let n = shards.len();
    let check_db = |db: u16| -> Result<usize, String> {
        let db = db as usize;
        if db >= databases {
            Err(format!("snapshot {} holds keys of database {db}, but only {databases} databases are configured (raise 'databases')", path.display()))
        } else {
            Ok(db)
        }
    };
    if idx.shards as usize == n {
        // Each shard loads its own blocks, all shards at once.
        let results: Vec<Result<u64, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = shards
                .iter_mut()
                .map(|shard| {
                    let idx = &idx;
                    scope.spawn(move || -> Result<u64, String> {
                        let f = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
                        let mut keys = 0;
                        // Most snapshots are mostly database 0: size its table once instead
                        // of growing it segment by segment.
                        shard.dbs[0].reserve(idx.keys as usize / n);
                        let id = shard.id;
                        for b in idx.blocks.iter().filter(|b| b.shard as usize == id) {
                            let raw = snapshot::read_block(&f, path, b)?;
                            let mut bad = None;
                            // Inserting random keys is bound by cache misses: decode a run
                            // of entries, start all their slots' loads, then insert.
                            let mut run: Vec<abacus_persist::entry::Decoded<'_>> = Vec::with_capacity(PREFETCH_RUN);
                            let mut insert_run = |run: &mut Vec<abacus_persist::entry::Decoded<'_>>, shard: &mut Shard| {
                                for d in run.iter() {
                                    if let Some(db) = shard.dbs.get(d.db as usize) {
                                        db.prefetch(d.key);
                                    }
                                }
                                for d in run.drain(..) {
                                    match check_db(d.db) {
                                        Ok(db) => shard.dbs[db].insert_loaded(d.key, d.entry, now),
                                        Err(e) => bad = Some(e),
                                    }
                                }
                            };
                            let block_keys = snapshot::for_each_entry(&raw, |d| {
                                run.push(d);
                                if run.len() == PREFETCH_RUN {
                                    insert_run(&mut run, shard);
                                }
                            })?;
                            keys += block_keys;
                            insert_run(&mut run, shard);
                            if let Some(e) = bad {
                                return Err(e);
                            }
                            loading.keys.fetch_add(block_keys, Ordering::Relaxed);
                            loading.loaded.fetch_add(b.compressed_len as u64, Ordering::Relaxed);
                        }
                        Ok(keys)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("snapshot loader thread panicked".into()))).collect()
        });
        let mut total = 0;
        for r in results {
            total += r?;
        }
        return Ok((total, functions));
    }
    // A different shard count: route every key by its slot.
    let f = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut total = 0;
    for b in &idx.blocks {
        let raw = snapshot::read_block(&f, path, b)?;
        let mut bad = None;
        let block_keys = snapshot::for_each_entry(&raw, |d| match check_db(d.db) {
            Ok(db) => shards[shard_of(d.key, n)].dbs[db].insert_loaded(d.key, d.entry, now),
            Err(e) => bad = Some(e),
        })?;
        total += block_keys;
        if let Some(e) = bad {
            return Err(e);
        }
        loading.keys.fetch_add(block_keys, Ordering::Relaxed);
        loading.loaded.fetch_add(b.compressed_len as u64, Ordering::Relaxed);
    }
    Ok((total, functions))
}

/// The replication position the replayed log has reached (see "Restarts" in
/// `replication/mod.rs`).
struct Positions {
    /// The snapshot recovery loaded.
    snapshot: Option<String>,
    at: Option<crate::log_marks::Position>,
    /// After a barrier (a full sync's load) not followed by the head of the segment of the
    /// snapshot loaded: the data is not the log's history, no mark after it counts.
    broken: bool,
}

impl Positions {
    fn mark(&mut self, args: &[&[u8]]) {
        use crate::log_marks::Mark;
        match crate::log_marks::parse_mark(args) {
            Mark::Barrier => {
                self.broken = true;
                self.at = None;
            }
            Mark::Segment(p, snap) if self.snapshot.as_deref() == Some(snap.as_str()) => {
                self.broken = false;
                self.at = Some(p);
            }
            Mark::Segment(p, _) | Mark::At(p) => {
                if !self.broken {
                    self.at = Some(p);
                }
            }
        }
    }
}

/// Replays one log segment; returns the number of commands. `position` follows the log: a
/// position mark sets it, any other command clears it (the data moved past the mark).
#[allow(clippy::too_many_arguments)]
fn replay_log(
    config: &Config,
    path: &Path,
    last: bool,
    access: Access,
    skipped: &mut Option<String>,
    r: &mut Replay<'_>,
    databases: usize,
    cfg: CmdConfig,
    base: u64,
    position: &mut Positions,
    commands: Replayer,
    loading: &Loading,
) -> Result<u64, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        // A segment created by a rotation that crashed before its first write.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && last => return Ok(0),
        Err(e) => return Err(format!("cannot read log {}: {e}", path.display())),
    };
    let scan = fmt::scan(&bytes);
    match &scan.problem {
        None => {}
        Some(Problem::TornTail { offset, dropped_bytes }) if last && access != Access::Server => {
            if access == (Access::ReadOnly { skip_torn_tail: false }) {
                return Err(format!(
                    "log {} ends with an incomplete record at offset {offset} ({dropped_bytes} bytes: a crash during a write). \
                     Nothing was written; pass --skip-torn-tail to read up to the last complete record (what the server \
                     loads with aof-load-truncated yes)",
                    path.display()
                ));
            }
            *skipped = Some(format!("log {}: skipped an incomplete record of {dropped_bytes} bytes at offset {offset} (the file is left as it is)", path.display()));
        }
        Some(Problem::TornTail { offset, dropped_bytes }) if last => {
            if !config.get_bool(crate::param!("aof-load-truncated")) {
                return Err(format!(
                    "log {} ends with an incomplete record at offset {offset} ({dropped_bytes} bytes). Start with \
                     aof-load-truncated yes to drop it, or run `abacus check-aof --fix {}`",
                    path.display(),
                    path.display()
                ));
            }
            tracing::warn!(
                "log {} ends with an incomplete record (a crash during a write): dropping the last {dropped_bytes} bytes \
                 from offset {offset}; everything before them is loaded",
                path.display()
            );
            let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            f.set_len(scan.valid_len).and_then(|_| f.sync_all()).map_err(|e| format!("cannot truncate {}: {e}", path.display()))?;
        }
        Some(Problem::TornTail { offset, .. }) | Some(Problem::Corrupt { offset, .. }) => {
            let reason = match &scan.problem {
                Some(Problem::Corrupt { reason, .. }) => reason.clone(),
                _ => "incomplete record in a segment that is not the last".into(),
            };
            return Err(format!(
                "log {} is corrupt at offset {offset} ({reason}), with {} bytes after it. {}. \
                 `abacus check-aof --fix {}` truncates the log there (losing those bytes); keep a copy first",
                path.display(),
                bytes.len() as u64 - offset,
                if access == Access::Server { "Refusing to start" } else { "Refusing to read it" },
                path.display()
            ));
        }
    }
    let mut n = 0u64;
    for rec in &scan.records {
        let mut in_record = 0;
        for c in fmt::commands(&bytes[rec.range.clone()], rec.format)? {
            if c.args.first().is_some_and(|n| n.eq_ignore_ascii_case(crate::log_marks::POSITION_MARK)) {
                position.mark(&c.args);
                continue;
            }
            position.at = None;
            replay_command(r, &c, databases, cfg, commands).map_err(|e| format!("log {} offset {}: {e}", path.display(), rec.range.start))?;
            in_record += 1;
        }
        n += in_record;
        loading.commands.fetch_add(in_record, Ordering::Relaxed);
        loading.loaded.store(base + rec.range.end as u64, Ordering::Relaxed);
    }
    Ok(n)
}

/// How often a line of loading progress goes to the log.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A thread that logs [`Loading::progress_line`](crate::stats::Loading::progress_line) every
/// [`PROGRESS_EVERY`] while recovery runs (snapshot blocks load on several threads and the log
/// replays on this one: a thread of its own sees them all). Dropping it stops the thread.
struct Progress {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(recorders: Arc<Recorders>) -> Progress {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("abacus-loading".into())
            .spawn(move || {
                // Disconnected (the sender dropped) ends the loop; a timeout is a tick.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(PROGRESS_EVERY) {
                    tracing::info!("{}", recorders.loading.progress_line());
                }
            })
            .ok();
        Progress { stop: Some(tx), thread }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs one logged command against the shards.
fn replay_command(r: &mut Replay<'_>, c: &fmt::Command<'_>, databases: usize, cfg: CmdConfig, commands: Replayer) -> Result<(), String> {
    let shards = &mut *r.shards;
    let db = c.db as usize;
    if db >= databases {
        return Err(format!("command on database {db}, but only {databases} databases are configured"));
    }
    let args = Args::from_vec(c.args.iter().map(|a| Bytes::copy_from_slice(a)).collect());
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let Some(spec) = (commands.lookup)(&args) else { return Err(format!("unknown command '{name}' in the log")) };
    let now = c.now_ms;
    let n = shards.len();
    match spec.handler {
        Handler::Keyed(_) => {
            let keys = command_keys(spec, &args, db);
            let mut owners: Vec<usize> = keys.iter().map(|(_, k)| shard_of(k, n)).collect();
            owners.sort_unstable();
            owners.dedup();
            if owners.len() <= 1 {
                let s = owners.first().copied().unwrap_or(0);
                let shard = &mut shards[s];
                exec_keyed_untimed(&mut shard.dbs, &mut shard.log, db, spec, &args, now, cfg);
            } else {
                // As live: check the keys out into a scratch keyspace, run, check them in.
                let mut scratch: Vec<abacus_keyspace::Db> = (0..databases).map(|_| abacus_keyspace::Db::new()).collect();
                for (d, k) in &keys {
                    if *d < databases && shards[shard_of(k, n)].dbs[*d].contains(k, now) {
                        if let Some(e) = shards[shard_of(k, n)].dbs[*d].remove_entry(k) {
                            scratch[*d].insert_entry(k, e);
                        }
                    }
                }
                // Any shard's log buffer: loading logs nothing (see `recover`).
                exec_keyed_untimed(&mut scratch, &mut shards[0].log, db, spec, &args, now, cfg);
                for (d, k) in &keys {
                    if *d < databases {
                        if let Some(e) = scratch[*d].remove_entry(k) {
                            shards[shard_of(k, n)].dbs[*d].insert_entry(k, e);
                        }
                    }
                }
            }
        }
        Handler::Conn(_) => match (commands.replay)(spec.handler) {
            Some(replay) => replay(r, db, &args, now)?,
            None => return Err(format!("command '{name}' cannot be replayed")),
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_marks::POSITION_MARK;

    const ID: &[u8] = b"0123456789abcdef0123456789abcdef01234567";

    /// Runs `log` (marks as their arguments, "data" for any other command) through the
    /// position rules after loading `snapshot`; returns the claimed offset.
    fn claim(snapshot: Option<&str>, log: &[&[&[u8]]]) -> Option<u64> {
        let mut p = Positions { snapshot: snapshot.map(str::to_string), at: None, broken: false };
        for args in log {
            if args[0] == POSITION_MARK {
                p.mark(args);
            } else {
                p.at = None;
            }
        }
        p.at.map(|p| p.offset)
    }

    #[test]
    fn the_last_mark_counts_only_with_nothing_after_it() {
        let data: &[&[u8]] = &[b"SET", b"k", b"v"];
        let at = |o: &'static [u8]| -> Vec<&'static [u8]> { vec![POSITION_MARK, ID, o, b"0"] };
        let (m10, m20) = (at(b"10"), at(b"20"));
        assert_eq!(claim(None, &[data, &m10]), Some(10));
        assert_eq!(claim(None, &[data, &m10, data, &m20]), Some(20));
        assert_eq!(claim(None, &[data, &m10, data]), None);
        assert_eq!(claim(None, &[data]), None);
        assert_eq!(claim(None, &[]), None);
    }

    #[test]
    fn a_barrier_holds_until_the_loaded_snapshots_segment() {
        let data: &[&[u8]] = &[b"SET", b"k", b"v"];
        let m10: &[&[u8]] = &[POSITION_MARK, ID, b"10", b"0"];
        let barrier: &[&[u8]] = &[POSITION_MARK];
        let head: &[&[u8]] = &[POSITION_MARK, ID, b"30", b"0", b"snap-000005.abs"];
        let m40: &[&[u8]] = &[POSITION_MARK, ID, b"40", b"0"];
        // A restart before the full sync's snapshot was durable: the old snapshot loaded.
        assert_eq!(claim(Some("snap-000002.abs"), &[m10, barrier, head, data, m40]), None);
        assert_eq!(claim(None, &[m10, barrier, head]), None);
        // After it: the manifest names that snapshot and its segment.
        assert_eq!(claim(Some("snap-000005.abs"), &[head]), Some(30));
        assert_eq!(claim(Some("snap-000005.abs"), &[head, data, m40]), Some(40));
        // A segment head of an ordinary snapshot continues an unbroken log.
        let other: &[&[u8]] = &[POSITION_MARK, ID, b"30", b"0", b"snap-000007.abs"];
        assert_eq!(claim(Some("snap-000002.abs"), &[data, m10, other]), Some(30));
    }
}
