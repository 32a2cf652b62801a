//! Migration from Redis: a replica whose primary is a real Redis (7.0) loads the RDB file of
//! its full sync, then applies Redis's command stream like any primary's.
//!
//! The full sync's payload tells the two primaries apart: Redis sends an RDB file (it starts
//! with `REDIS`), Abacus its own snapshot. The RDB is received whole into a temporary file
//! first (either framing Redis uses: `$<length>` from a disk-based sync, `$EOF:<mark>` from a
//! diskless one, see `replica.rs`), then decoded whole — every value, and the CRC64 after EOF —
//! before anything of the current data set is touched: a damaged or unreadable file (an RDB
//! version newer than 10, a type that cannot be skipped) costs nothing but a log line and a
//! retry. Only then, holding every shard (no client reads a half-loaded data set), each shard
//! drops its keys and inserts its share of the decoded ones.
//!
//! What is not loaded is reported, never silently: keys of a type Abacus lacks (module types)
//! and values Redis's own loader would refuse are logged by name and counted in INFO
//! replication's `replica_sync_keys_skipped`. Redis Functions libraries replace this
//! server's, as a Redis replica's full sync does. Keys
//! whose expiry has already passed are dropped (as a Redis primary's loader does); the others
//! keep their absolute expiry time.
//!
//! The cost: the decoded file is held in memory once (as plain vectors) next to the old data
//! set until the swap; a streaming loader that decodes under the shard locks would avoid that
//! at the price of a longer stall for clients.
//!
//! The stream that follows is applied through the master's connection (`replica.rs`); a
//! command Abacus cannot apply (an error reply where the primary succeeded) is logged with
//! its name and counted in `replica_apply_errors` ([`count_errors`]).

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use abacus_protocol::{parse_frame, Bytes, Frame};
use abacus_rdb::file::{read_file, Entry};
use abacus_rdb::DecodeLimits;
use parking_lot::Mutex;

use abacus_commands::dump::{from_rdb, BuildLimits};
use abacus_engine::exec::Access;
use crate::node::Node;
use abacus_engine::shard::{now_ms, shard_of, Shard};

/// Whether a received full-sync payload is a Redis RDB file rather than an Abacus snapshot.
pub fn is_rdb(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 5];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && &head == b"REDIS"
}

/// One shard's share of the file.
type Bucket = Vec<Entry>;

/// Decodes the RDB file whole, then replaces the data set with it holding every shard.
/// Returns the keys loaded.
pub async fn load(worker: &Rc<Node>, path: &std::path::Path, gen: u64, replid: &str, offset: u64) -> Result<u64, String> {
    let n = worker.shards();
    let cfg = worker.server.config.cmd_config();
    let max_string_bytes = usize::try_from(cfg.max_string_len).unwrap_or(usize::MAX);
    let limits = DecodeLimits { max_string_bytes, max_total_bytes: max_string_bytes.saturating_mul(8) };
    let p = path.to_path_buf();
    let (buckets, mut summary) = tokio::task::spawn_blocking(move || -> Result<(Vec<Bucket>, abacus_rdb::file::Summary), String> {
        let bytes = std::fs::read(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let mut buckets: Vec<Bucket> = (0..n).map(|_| Vec::new()).collect();
        let summary = read_file(&bytes, limits, |e| buckets[shard_of(&e.key, n)].push(e)).map_err(|e| format!("the primary's RDB cannot be loaded: {e}"))?;
        Ok((buckets, summary))
    })
    .await
    .map_err(|e| format!("decoding the RDB failed: {e}"))??;
    let repl = super::state();
    tracing::info!(
        "Loading the primary's RDB (version {}, redis-ver {}): {} keys",
        summary.version,
        summary.aux("redis-ver").map(String::from_utf8_lossy).unwrap_or_default(),
        summary.keys
    );
    for s in &summary.skipped {
        tracing::warn!("Skipping key '{}' of db {} from the primary's RDB: {}", String::from_utf8_lossy(&s.key), s.db, s.why);
    }
    if summary.module_aux_skipped > 0 {
        tracing::warn!("Skipping {} module AUX records of the primary's RDB (no such modules here)", summary.module_aux_skipped);
    }
    let skipped_total = Arc::new(std::sync::atomic::AtomicU64::new(summary.skipped.len() as u64));
    let buckets: Arc<Mutex<Vec<Option<Bucket>>>> = Arc::new(Mutex::new(buckets.into_iter().map(Some).collect()));

    let functions: Vec<Bytes> = std::mem::take(&mut summary.functions).into_iter().map(Bytes::from).collect();
    let locks = worker.lock(0..n).await.ok_or("server is shutting down")?;
    // First, so a library that does not load here leaves the data set as it was.
    abacus_scripting::install_libraries(&worker.server.scripts, functions, crate::node::REDIS_VERSION, crate::node::REDIS_VERSION_NUM)?;
    let skipped = skipped_total.clone();
    let loaded = worker
        .run_all(Access::Locked(&locks), move |s: &mut Shard| -> u64 {
            let olds: Vec<_> = s.dbs.iter_mut().map(|d| d.take_all()).collect();
            abacus_engine::memory::free_later(olds);
            let Some(bucket) = buckets.lock().get_mut(s.id).and_then(Option::take) else { return 0 };
            let build = BuildLimits { set: cfg.set_limits, hash: cfg.hash_limits, zset: cfg.zset_limits, list: cfg.list_limits, stream: cfg.stream_limits };
            let now = now_ms();
            let mut loaded = 0;
            for e in bucket {
                let expire_at = match e.expire_ms {
                    None => 0,
                    // Already expired: dropped, as a Redis primary's loader does.
                    Some(t) if t <= now as i64 => continue,
                    Some(t) => t as u64,
                };
                let Some(db) = usize::try_from(e.db).ok().and_then(|i| s.dbs.get_mut(i)) else {
                    tracing::warn!("Skipping key '{}' of the primary's RDB: db {} is beyond 'databases'", String::from_utf8_lossy(&e.key), e.db);
                    skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let Some(value) = from_rdb(e.value, &build) else {
                    tracing::warn!("Skipping key '{}' of db {} from the primary's RDB: a value Redis's loader refuses too (empty or duplicate members)", String::from_utf8_lossy(&e.key), e.db);
                    skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                db.set(&e.key, value, expire_at, now);
                loaded += 1;
            }
            loaded
        })
        .await
        .ok_or("server is shutting down")?;
    let loaded: u64 = loaded.into_iter().sum();
    repl.sync_keys_skipped.fetch_add(skipped_total.load(Ordering::Relaxed), Ordering::Relaxed);
    super::finish_full_sync(worker, &locks, gen, replid, offset, "a full sync from a Redis primary").await?;
    drop(locks);
    Ok(loaded)
}

/// Counts (and logs) the error replies among the master connection's replies to `names`
/// (the applied commands' names, in order): a command the primary executed that this server
/// could not apply. Inside a transaction, EXEC's array holds the queued commands' replies.
pub fn count_errors(names: &[Vec<u8>], out: &[u8]) -> u64 {
    let mut errors = 0u64;
    let mut at = 0;
    let mut queued: Vec<&[u8]> = Vec::new();
    let mut in_multi = false;
    let mut report = |name: &[u8], msg: &str| {
        errors += 1;
        tracing::error!("Replication from the primary: '{}' could not be applied: {msg}", String::from_utf8_lossy(name));
    };
    for name in names {
        let Ok(Some((frame, used))) = parse_frame(&out[at..]) else { break };
        at += used;
        // The table says which commands bound a transaction (MULTI; EXEC, DISCARD).
        let flags = crate::command::lookup(name).map_or(0, |spec| spec.flags);
        let is = |f: u32| flags & f != 0;
        if is(crate::command::flags::TX_BEGIN) {
            in_multi = true;
            queued.clear();
            continue;
        }
        if in_multi && !is(crate::command::flags::TX_END) {
            if let Frame::Error(e) = &frame {
                report(name, &String::from_utf8_lossy(e));
            } else {
                queued.push(name);
            }
            continue;
        }
        if in_multi && is(crate::command::flags::RUNS_QUEUED) {
            in_multi = false;
            match &frame {
                Frame::Array(items) => {
                    for (item, n) in items.iter().zip(queued.iter()) {
                        if let Frame::Error(e) = item {
                            report(n, &String::from_utf8_lossy(e));
                        }
                    }
                }
                Frame::Error(e) => report(name, &String::from_utf8_lossy(e)),
                _ => {}
            }
            continue;
        }
        in_multi = false;
        if let Frame::Error(e) = &frame {
            report(name, &String::from_utf8_lossy(e));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::count_errors;

    fn names(n: &[&str]) -> Vec<Vec<u8>> {
        n.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn error_replies_are_counted_by_command() {
        // SET ok, FUNCTION fails, PING ok.
        let out = b"+OK\r\n-ERR unknown command 'FUNCTION'\r\n+PONG\r\n";
        assert_eq!(count_errors(&names(&["SET", "FUNCTION", "PING"]), out), 1);
        assert_eq!(count_errors(&names(&["SET", "PING"]), b"+OK\r\n+PONG\r\n"), 0);
    }

    #[test]
    fn errors_inside_a_transaction_come_from_exec() {
        // MULTI, two queued commands, EXEC whose second reply is an error.
        let out = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        assert_eq!(count_errors(&names(&["MULTI", "INCR", "LPUSH", "EXEC"]), out), 1);
        // A command refused while queued, then EXECABORT: both reported.
        let out = b"+OK\r\n-ERR unknown command 'NOPE'\r\n-EXECABORT Transaction discarded because of previous errors.\r\n";
        assert_eq!(count_errors(&names(&["MULTI", "NOPE", "EXEC"]), out), 2);
        // Commands after the transaction are read again one reply each.
        let out = b"+OK\r\n+QUEUED\r\n*1\r\n:1\r\n-ERR x\r\n";
        assert_eq!(count_errors(&names(&["MULTI", "INCR", "EXEC", "SET"]), out), 1);
    }
}
