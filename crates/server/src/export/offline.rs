//! The exporter's in-process source (`abacus_export::Source`): a stopped server's data
//! directory loaded read-only (`abacus export --dir DATA_DIR`).
//!
//! Loading is the server's own recovery (`abacus_engine::recovery::recover_with`, the
//! snapshot then the log replayed through the command table) with
//! [`Access::ReadOnly`]: nothing in the directory is opened for writing, no lock is taken
//! (a shared `flock` probe only, to refuse a directory a running server holds), and a torn
//! log tail is refused unless the caller asked to skip it (then the records before it are
//! read and the file left as it is). The exported data is exactly the snapshot plus the log.
//!
//! Reads go through `super::run_read` (the command table's entries, as a client's).

use std::path::Path;

use abacus_engine::config::{CmdConfig, Config};
use abacus_engine::recovery::{recover_with, Access};
use abacus_engine::shard::{now_ms, Shard};
use abacus_export::{Replies, Reply, Source};
use abacus_protocol::{Args, Bytes, BytesMut, Frame, Protocol};

/// A data directory loaded in process.
pub struct Loaded {
    shards: Vec<Shard>,
    cfg: CmdConfig,
    rules: Option<String>,
    replies: Replies,
    scratch: BytesMut,
    now_ms: u64,
    pub keys_loaded: u64,
    pub commands_replayed: u64,
    /// A torn log tail read past (`skip_torn_tail`), to say.
    pub skipped_tail: Option<String>,
}

impl Loaded {
    /// Loads `dir` without writing to it. `rules`: the summarizer rules' text, for
    /// `--summary` (the rules are the server's configuration, not in the directory).
    pub fn open(dir: &Path, rules: Option<String>, skip_torn_tail: bool) -> Result<Loaded, String> {
        if !dir.is_dir() {
            return Err(format!("data directory {}: no such directory", dir.display()));
        }
        if let Some(holder) = holder(dir) {
            return Err(format!(
                "data directory {} is in use by a running server ({holder}): export from the server (--host/--port), or stop it first",
                dir.display()
            ));
        }
        let manifest = abacus_persist::manifest::Manifest::read(dir)?
            .ok_or_else(|| format!("data directory {}: no manifest (not an Abacus data directory, or nothing was ever written there)", dir.display()))?;
        // One shard per snapshot shard: each loads its own blocks on its own thread.
        let threads = match &manifest.snapshot {
            Some(s) => abacus_persist::snapshot::index(&dir.join(s))?.shards.max(1) as usize,
            None => 1,
        };
        // The command table replays the log and runs the reads (installed once; idempotent).
        crate::cmd::install_table();
        let config = Config::default();
        let databases = config.get_u64(abacus_engine::param!("databases")) as usize;
        let recorders = abacus_engine::recorders::Recorders::new(&config);
        let r = recover_with(&config, dir, threads, databases, crate::conn::handler::replayer(), &recorders, Access::ReadOnly { skip_torn_tail })?;
        Ok(Loaded {
            shards: r.shards,
            cfg: config.cmd_config(),
            rules,
            replies: Replies::default(),
            scratch: BytesMut::new(),
            now_ms: now_ms(),
            keys_loaded: r.keys_loaded,
            commands_replayed: r.commands_replayed,
            skipped_tail: r.skipped_tail,
        })
    }

    /// Runs one read command on the shard of its key.
    fn run(&mut self, args: &[&[u8]]) -> Frame {
        let args = Args::from_vec(args.iter().map(|a| Bytes::copy_from_slice(a)).collect());
        let spec = match super::read_spec(&args) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let owner = super::shard_of_read(spec, &args, self.shards.len());
        let shard = &mut self.shards[owner];
        super::run_read(&mut shard.dbs, &mut shard.log, spec, &args, self.now_ms, self.cfg)
    }
}

/// Who holds `dir`'s lock (a running server), probed with a shared `flock` on a descriptor
/// opened read-only: nothing is created or written.
fn holder(dir: &Path) -> Option<String> {
    let mut f = std::fs::File::open(dir.join(abacus_persist::dirlock::LOCK_FILE)).ok()?;
    match f.try_lock_shared() {
        Ok(()) => {
            let _ = f.unlock();
            None
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut f, &mut text);
            Some(if text.trim().is_empty() { "holder unknown".into() } else { text.trim().chars().take(200).collect() })
        }
        Err(std::fs::TryLockError::Error(_)) => None,
    }
}

impl Source for Loaded {
    fn queue(&mut self, args: &[&[u8]]) {
        let frame = self.run(args);
        self.scratch.clear();
        abacus_protocol::encode(&frame, Protocol::Resp2, &mut self.scratch);
        self.replies.buffer().extend_from_slice(&self.scratch);
    }

    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn read(&mut self) -> Result<Reply, String> {
        self.replies.read()
    }

    fn keys(&mut self, pattern: &[u8], kind: Option<&str>) -> Result<Vec<Vec<u8>>, String> {
        let mut keys = Vec::new();
        for s in &self.shards {
            let mut cursor = 0;
            loop {
                let (next, _) = s.dbs[0].scan(cursor, 4096, self.now_ms, |k, e| {
                    if kind.is_none_or(|t| e.value().value_type().name() == t) && abacus_keyspace::glob_match(pattern, k, false) {
                        keys.push(k.to_vec());
                    }
                });
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    fn rules(&mut self) -> Result<Option<String>, String> {
        match &self.rules {
            Some(r) => Ok(Some(r.clone())),
            None => Err("--summary offline needs the server's summarizer rules: --rules FILE".into()),
        }
    }

    fn series(&mut self, filters: &[String]) -> Result<Vec<Vec<u8>>, String> {
        let args = Args::from_vec(filters.iter().map(|f| Bytes::copy_from_slice(f.as_bytes())).collect());
        let filter = abacus_commands::ts_filter::parse_filter(&args).map_err(|e| match e {
            Frame::Error(t) => String::from_utf8_lossy(&t).into_owned(),
            _ => "bad filter".into(),
        })?;
        let now = self.now_ms;
        let mut keys: Vec<Vec<u8>> = self.shards.iter_mut().flat_map(|s| abacus_commands::ts_filter::each_match(&mut s.dbs[0], &filter, now, |_, k, _| Some(k.to_vec()))).collect();
        keys.sort();
        Ok(keys)
    }
}
