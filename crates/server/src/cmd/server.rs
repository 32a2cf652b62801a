//! The server family: INFO, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, CONFIG, DEBUG.
//!
//! These visit every shard. Commands that change every shard (FLUSHALL, FLUSHDB, SWAPDB) lock
//! all shards first, so no client sees a half-flushed or half-swapped keyspace. FLUSH ASYNC
//! detaches the old databases and drops them on a background thread, so the reply does not
//! wait for freeing memory.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use abacus_protocol::{Arg, Bytes, Frame, Protocol};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::{shutting_down, Access, Locks};
use abacus_engine::memory;
use crate::node::{ABACUS_VERSION, REDIS_VERSION};
use abacus_engine::stats::CmdStat;

const G: &str = "server";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("info", -1, LOADING | STALE | ALL_SHARDS | ACL_DANGEROUS, NONE, conn_fn!(|conn, access, call| info(conn, access, &call.args).await), G, "Returns information and statistics about the server.")
        .docs("1.0.0", "O(1)")
        .history(&[("7.0.0", "Added support for taking multiple section arguments.")])
        .tips("nondeterministic_output request_policy:all_shards response_policy:special")
        .args("
            section type=string flags=optional,multiple
        "),
    Spec::conn("dbsize", 1, READONLY | FAST | ALL_SHARDS | ACL_KEYSPACE, NONE, conn_fn!(|conn, access, _| dbsize(conn, access).await), G, "Returns the number of keys in the database.")
        .docs("1.0.0", "O(1)")
        .tips("request_policy:all_shards response_policy:agg_sum"),
    Spec::conn("flushdb", -1, WRITE | ALL_SHARDS | ACL_KEYSPACE | ACL_DANGEROUS, NONE, conn_fn!(replay = Some(replay_flushdb), |conn, access, call| flush(conn, access, call, true).await), G, "Removes all keys from the current database.")
        .docs("1.0.0", "O(N) where N is the number of keys in the selected database")
        .history(&[
            ("4.0.0", "Added the `ASYNC` flushing mode modifier."),
            ("6.2.0", "Added the `SYNC` flushing mode modifier."),
        ])
        .tips("request_policy:all_shards response_policy:all_succeeded")
        .args("
            async type=oneof flags=optional
              async type=pure-token token=ASYNC since=4.0.0
              sync type=pure-token token=SYNC since=6.2.0
        "),
    Spec::conn("flushall", -1, WRITE | ALL_SHARDS | ACL_KEYSPACE | ACL_DANGEROUS, NONE, conn_fn!(replay = Some(replay_flushall), |conn, access, call| flush(conn, access, call, false).await), G, "Removes all keys from all databases.")
        .docs("1.0.0", "O(N) where N is the total number of keys in all databases")
        .history(&[
            ("4.0.0", "Added the `ASYNC` flushing mode modifier."),
            ("6.2.0", "Added the `SYNC` flushing mode modifier."),
        ])
        .tips("request_policy:all_shards response_policy:all_succeeded")
        .args("
            async type=oneof flags=optional
              async type=pure-token token=ASYNC since=4.0.0
              sync type=pure-token token=SYNC since=6.2.0
        "),
    SWAPDB,
    Spec::conn("debug", -2, ADMIN | LOADING | STALE | ALL_SHARDS, NONE, conn_fn!(replay = Some(replay_debug), |conn, access, call| debug(conn, access, &call.args).await), G, "A container for debugging commands.")
        .docs("1.0.0", "Depends on subcommand.")
        .syscmd()
        .noscript(),
    Spec::conn("lolwut", -1, READONLY | FAST, NONE, conn_fn!(|conn, _, call| lolwut(conn, &call.args)), G, "Displays computer art and the Redis version")
        .docs("5.0.0", "")
        .args("
            version type=integer token=VERSION flags=optional
        "),
    Spec::conn("monitor", 1, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, access, _| monitor(conn, access)), G, "Listens for all requests received by the server in real-time.")
        .docs("1.0.0", "")
        .noscript(),
    Spec::conn("config", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), G, "A container for server configuration commands.").with_subcommands(CONFIG)
        .docs("2.0.0", "Depends on subcommand."),
];

/// Named: its effect record names it.
pub const SWAPDB: Spec = Spec::conn("swapdb", 3, WRITE | FAST | ALL_SHARDS | ACL_KEYSPACE | ACL_DANGEROUS, NONE, conn_fn!(replay = Some(replay_swapdb), |conn, access, call| swapdb(conn, access, &call.args).await), G, "Swaps two Redis databases.")
    .docs("4.0.0", "O(N) where N is the count of clients watching or blocking on keys from both databases.")
    .args("
        index1 type=integer
        index2 type=integer
    ");

const CONFIG: &[Spec] = &[
    Spec::conn("config|get", -3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, access, call| config(conn, access, ConfigSub::Get, &call.args).await), G, "Returns the effective values of configuration parameters.")
        .docs("2.0.0", "O(N) when N is the number of configuration parameters provided")
        .history(&[("7.0.0", "Added the ability to pass multiple pattern parameters in one call")])
        .noscript()
        .args("
            parameter type=block flags=multiple
              parameter type=string
        "),
    Spec::conn("config|set", -4, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, access, call| config(conn, access, ConfigSub::Set, &call.args).await), G, "Sets configuration parameters in-flight.")
        .docs("2.0.0", "O(N) when N is the number of configuration parameters provided")
        .history(&[("7.0.0", "Added the ability to set multiple parameters in one call.")])
        .tips("request_policy:all_nodes response_policy:all_succeeded")
        .noscript()
        .args("
            parameter_value type=block flags=multiple
              parameter type=string
              value type=string
        "),
    Spec::conn("config|resetstat", 2, ADMIN | LOADING | STALE | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| config(conn, access, ConfigSub::ResetStat, &call.args).await), G, "Resets the server's statistics.")
        .docs("2.0.0", "O(1)")
        .noscript(),
    Spec::conn("config|help", 2, LOADING | STALE, NONE, conn_fn!(|conn, access, call| config(conn, access, ConfigSub::Help, &call.args).await), G, "Returns helpful text about the different subcommands.")
        .docs("5.0.0", "O(1)"),
    Spec::conn("config|rewrite", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| super::replication::config_rewrite(conn)), G, "Persists the effective configuration to file.")
        .docs("2.8.0", "O(1)")
        .noscript(),
];


/// Logs a server-level write with the atomic operation holding the shards: the caller's own
/// locks, or the transaction's.
pub(crate) fn log_under<A: AsRef<[u8]>>(access: Access<'_>, own: Option<&Locks>, db: usize, args: &[A]) {
    let now = abacus_engine::shard::now_ms();
    match (own, access) {
        (Some(l), _) | (None, Access::Locked(l)) => l.log_command(now, db, args),
        (None, Access::Free) => {}
    }
}

/// Locks every shard unless the caller already holds them (inside EXEC).
pub(crate) async fn lock_all_if_free(conn: &Conn, access: Access<'_>) -> Option<Option<Locks>> {
    match access {
        Access::Locked(_) => Some(None),
        Access::Free => conn.worker.lock(0..conn.worker.shards()).await.map(Some),
    }
}

pub async fn dbsize(conn: &mut Conn, access: Access<'_>) -> Frame {
    let db = conn.client.db;
    match conn.worker.run_all(access, move |s| s.dbs[db].len()).await {
        Some(v) => Frame::Integer(v.iter().sum::<usize>() as i64),
        None => shutting_down(),
    }
}

fn flush_mode(a: &[Arg], at: usize) -> Result<bool, Frame> {
    match a.len() {
        n if n == at => Ok(false),
        n if n == at + 1 && is(&a[at], "async") => Ok(true),
        n if n == at + 1 && is(&a[at], "sync") => Ok(false),
        _ => Err(err(ERR_SYNTAX)),
    }
}

/// FLUSHDB (`current_db_only`) and FLUSHALL; logged under the command's own name.
pub async fn flush(conn: &mut Conn, access: Access<'_>, call: &abacus_engine::exec::Call, current_db_only: bool) -> Frame {
    let a = &call.args;
    let asynchronous = match flush_mode(a, 1) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let Some(own) = lock_all_if_free(conn, access).await else { return shutting_down() };
    let access = match &own {
        Some(l) => Access::Locked(l),
        None => access,
    };
    let only = current_db_only.then_some(conn.client.db);
    log_under(access, own.as_ref(), conn.client.db, &[call.spec.name.as_bytes()]);
    let olds = conn
        .worker
        .run_all(access, move |s| {
            let mut old = Vec::new();
            for (i, db) in s.dbs.iter_mut().enumerate() {
                if only.is_none_or(|o| o == i) {
                    old.push(db.take_all());
                }
            }
            old
        })
        .await;
    drop(own);
    let Some(olds) = olds else { return shutting_down() };
    crate::tracking::on_flush();
    if asynchronous {
        // Freeing millions of entries takes time; the client need not wait for it.
        memory::free_later(olds);
    } else {
        drop(olds);
    }
    Frame::ok()
}

pub async fn swapdb(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let n = conn.worker.server.databases as i64;
    let first = match parse_i32(&a[1]) {
        Ok(v) => v,
        Err(_) => return err("ERR invalid first DB index"),
    };
    let second = match parse_i32(&a[2]) {
        Ok(v) => v,
        Err(_) => return err("ERR invalid second DB index"),
    };
    if first < 0 || first >= n || second < 0 || second >= n {
        return err("ERR DB index is out of range");
    }
    let Some(own) = lock_all_if_free(conn, access).await else { return shutting_down() };
    let access = match &own {
        Some(l) => Access::Locked(l),
        None => access,
    };
    let (x, y) = (first.min(second) as usize, first.max(second) as usize);
    log_under(access, own.as_ref(), conn.client.db, &[SWAPDB.name.as_bytes(), x.to_string().as_bytes(), y.to_string().as_bytes()]);
    let done = conn
        .worker
        .run_all(access, move |s| {
            if x != y {
                let (lo, hi) = s.dbs.split_at_mut(y);
                lo[x].swap_contents(&mut hi[0]);
            }
        })
        .await;
    drop(own);
    match done {
        Some(_) => Frame::ok(),
        None => shutting_down(),
    }
}

/// CONFIG's subcommands (each table entry names its own).
#[derive(Clone, Copy)]
pub enum ConfigSub {
    Get,
    Set,
    ResetStat,
    Help,
}

pub async fn config(conn: &mut Conn, access: Access<'_>, sub: ConfigSub, a: &[Arg]) -> Frame {
    let cfg = &conn.worker.server.config;
    match sub {
        ConfigSub::Get => {
            let patterns: Vec<&[u8]> = a[2..].iter().map(|p| &p[..]).collect();
            let pairs = cfg.get_matching(&patterns);
            // A name asked for without glob characters is echoed as given (`MAXMEMORY`), as Redis,
            // unless an earlier glob pattern matched it (then it is shown as the glob found it).
            let shown = |n: &str| {
                patterns.iter().find(|p| abacus_engine::config::pattern_matches(p, n)).filter(|p| !abacus_engine::config::is_glob(p)).map_or(n.as_bytes(), |p| *p).to_vec()
            };
            Frame::Map(pairs.into_iter().map(|(n, v)| (Frame::bulk(shown(n)), Frame::bulk(v.into_bytes()))).collect())
        }
        ConfigSub::Set => {
            if !a.len().is_multiple_of(2) {
                return err(ERR_SYNTAX);
            }
            let pairs: Vec<(String, String)> =
                a[2..].chunks(2).map(|p| (String::from_utf8_lossy(&p[0]).into_owned(), String::from_utf8_lossy(&p[1]).into_owned())).collect();
            // As Redis: the names and values are checked, set, then applied; a TLS
            // configuration that cannot be built from them (a bad certificate file) fails the
            // whole CONFIG SET, the old values are put back and the old certificates stay.
            let tls = &conn.worker.server.tls;
            // One entry per parameter: a name and its 7.0 alias (both allowed in one CONFIG
            // SET, as Redis) are one parameter, and a second entry would make putting the old
            // values back fail as a duplicate, leaving the new ones set.
            let mut old: Vec<(String, String)> = Vec::with_capacity(pairs.len());
            for p in pairs.iter().filter_map(|(n, _)| abacus_engine::config::param(n)) {
                if !old.iter().any(|(n, _)| n == p.name) {
                    if let Some(v) = cfg.get_by_name(p.name) {
                        old.push((p.name.to_string(), v));
                    }
                }
            }
            match cfg.set_many(&pairs) {
                Ok(()) => {
                    // As Redis, a parameter set to the value it had applies nothing; but a
                    // certificate file named again while TLS is in use is read again (a
                    // rotation that rewrote the file in place).
                    let changed: Vec<(String, String)> = pairs
                        .iter()
                        .filter(|(n, _)| {
                            abacus_engine::config::param(n).is_some_and(|p| {
                                (tls.is_configured() && p.name.ends_with("-file") && p.name.starts_with("tls-"))
                                    || old.iter().find(|(o, _)| o == p.name).map(|(_, v)| v.clone()) != cfg.get_by_name(p.name)
                            })
                        })
                        .cloned()
                        .collect();
                    match crate::tls::stage(tls, cfg, &changed) {
                        Ok(Some(configs)) => crate::tls::commit(tls, configs),
                        Ok(None) => {}
                        Err(e) => {
                            // The old values were valid and name each parameter once:
                            // putting them back cannot fail.
                            if let Err(restore) = cfg.set_many(&old) {
                                tracing::warn!("CONFIG SET: could not put the old values back: {restore}");
                            }
                            return Frame::error(e);
                        }
                    }
                    // The recorders keep their settings (slow log, latency monitor) apart.
                    conn.worker.server.recorders.configure(cfg);
                    if let Some(aof) = conn.worker.server.durability.log() {
                        aof.set_mode(abacus_engine::aof::Fsync::from_name(&cfg.get(abacus_engine::param!("appendfsync"))));
                    }
                    if pairs.iter().any(|(n, _)| n.eq_ignore_ascii_case("requirepass")) {
                        // requirepass is the default ACL user's password (`acl.rs`).
                        conn.worker.server.acl.set_requirepass(cfg.requirepass().as_deref());
                    }
                    crate::replication::configure(cfg);
                    Frame::ok()
                }
                Err(e) => Frame::error(e),
            }
        }
        ConfigSub::ResetStat => {
            conn.worker.server.stats.reset();
            conn.worker.server.recorders.errors.reset();
            abacus_engine::pubsub::OBUF_LIMIT_DISCONNECTIONS.store(0, Ordering::Relaxed);
            let reset = |s: &mut abacus_engine::shard::Shard| {
                s.rec.commands.reset();
                for d in &mut s.dbs {
                    d.hits_total = 0;
                    d.misses_total = 0;
                    d.expired_keys_total = 0;
                    d.evicted_keys_total = 0;
                }
            };
            match conn.worker.run_all(access, reset).await {
                Some(_) => Frame::ok(),
                None => shutting_down(),
            }
        }
        ConfigSub::Help => Frame::Array(
            ["CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET <pattern>", "SET <directive> <value>", "RESETSTAT", "HELP"]
                .iter()
                .map(|l| Frame::Simple(Bytes::from_static(l.as_bytes())))
                .collect(),
        ),
    }
}

pub async fn debug(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    // The primary's stream carries the DEBUG POPULATE its clients ran: a replica applies it.
    let allowed = conn.is_master || match conn.worker.server.config.get(abacus_engine::param!("enable-debug-command")).as_str() {
        "yes" => true,
        "local" => conn.client.peer_is_loopback,
        _ => false,
    };
    if !allowed {
        return err("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.");
    }
    if is(&a[1], "sleep") && a.len() == 3 {
        let secs = match parse_f64(&a[2]) {
            Ok(s) if (0.0..1e9).contains(&s) => s,
            _ => return err(ERR_NOT_FLOAT),
        };
        // As Redis, whose one thread sleeps: the whole server stops. Every shard is held, so
        // no command on data runs, then the connections are paused (see `server::Pause`):
        // other clients' commands wait, and run once the sleep is over. Inside EXEC the
        // transaction already holds every shard (DEBUG is ALL_SHARDS).
        let server = conn.worker.server.clone();
        let locks = match access {
            Access::Locked(_) => None,
            Access::Free => match conn.worker.lock(0..conn.worker.shards()).await {
                Some(locks) => Some(locks),
                None => return shutting_down(),
            },
        };
        let paused = server.pause.hold().await;
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        drop(paused);
        drop(locks);
        return Frame::ok();
    }
    if is(&a[1], "set-active-expire") && a.len() == 3 {
        // As Redis: 0 stops active expiry (keys then expire only when accessed), anything
        // else that is a number resumes it.
        return match parse_i64(&a[2]) {
            Ok(v) => {
                abacus_engine::shard::ACTIVE_EXPIRE.store(v != 0, std::sync::atomic::Ordering::Relaxed);
                Frame::ok()
            }
            Err(e) => e,
        };
    }
    if is(&a[1], "error") && a.len() == 3 {
        // As Redis: the argument is the whole error line (its code included), with CR and LF
        // made spaces so it stays one line.
        let text: Vec<u8> = a[2].iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
        return Frame::Error(Bytes::from(text));
    }
    if is(&a[1], "populate") && (3..=5).contains(&a.len()) {
        return populate(conn, access, a).await;
    }
    if is(&a[1], "help") {
        return Frame::Array(
            [
                "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named prefix:<num> (default prefix \"key\"), with",
                "    values value:<num> padded with zero bytes to <size>. Existing keys are kept.",
                "ERROR <string>",
                "    Return a Redis protocol error with <string> as message. Useful for clients",
                "    unit tests to simulate Redis errors.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not",
                "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
                "    default.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds> (may be fractional): other clients wait.",
                "HELP",
            ]
                .iter()
                .map(|l| Frame::Simple(Bytes::from_static(l.as_bytes())))
                .collect(),
        );
    }
    // Redis's addReplySubcommandSyntaxError (also for a known subcommand with a wrong arity)
    err_quoting("ERR unknown subcommand or wrong number of arguments for '", &a[1][..a[1].len().min(128)], "'. Try DEBUG HELP.")
}

/// DEBUG POPULATE count [prefix] [size], as Redis: keys `prefix:N`, values `value:N` padded
/// with zero bytes (or cut) to `size`; existing keys are left alone. Every shard creates the
/// keys that hash to it, in parallel.
async fn populate(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let positive = |v: &[u8]| match parse_i64(v) {
        Ok(n) if n >= 0 => Ok(n as u64),
        _ => Err(err("ERR value is out of range, must be positive")),
    };
    if conn.worker.server.recorders.loading.active() {
        return err("LOADING Abacus is loading the dataset in memory");
    }
    let count = match positive(&a[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let prefix = a.get(3).map_or_else(|| Bytes::from_static(b"key"), |p| Bytes::copy_from_slice(p));
    let size = match a.get(4).map(|v| positive(v)).transpose() {
        Ok(s) => s.unwrap_or(0) as usize,
        Err(e) => return e,
    };
    if size as u64 > conn.worker.server.config.proto_max_bulk_len() {
        return err(ERR_STRING_TOO_LONG);
    }
    // Before it is logged: a record whose replay aborts would stop every restart.
    if let Err(e) = check_allocatable(size as u64) {
        return e;
    }
    let db = conn.client.db;
    let shards = conn.worker.shards();
    // Under every shard's lock, so the log's single record of it is exact (it creates only
    // missing keys, which depends on the writes before it).
    let Some(own) = lock_all_if_free(conn, access).await else { return shutting_down() };
    let access = match &own {
        Some(l) => Access::Locked(l),
        None => access,
    };
    let logged: Vec<&[u8]> = a.iter().map(|x| &x[..]).collect();
    log_under(access, own.as_ref(), db, &logged);
    let now = abacus_engine::shard::now_ms();
    let job = move |s: &mut abacus_engine::shard::Shard| populate_shard(s, db, count, &prefix, size, shards, now);
    let done = conn.worker.run_all(access, job).await;
    drop(own);
    match done {
        Some(_) => Frame::ok(),
        None => shutting_down(),
    }
}

/// Recovery's FLUSHDB (see `conn::handler::ReplayFn`).
fn replay_flushdb(r: &mut abacus_engine::recovery::Replay<'_>, db: usize, _args: &[Arg], _now: u64) -> Result<(), String> {
    let shards = &mut *r.shards;
    shards.iter_mut().for_each(|s| drop(s.dbs[db].take_all()));
    Ok(())
}

/// Recovery's FLUSHALL.
fn replay_flushall(r: &mut abacus_engine::recovery::Replay<'_>, _db: usize, _args: &[Arg], _now: u64) -> Result<(), String> {
    let shards = &mut *r.shards;
    shards.iter_mut().for_each(|s| s.dbs.iter_mut().for_each(|d| drop(d.take_all())));
    Ok(())
}

/// Recovery's SWAPDB.
fn replay_swapdb(r: &mut abacus_engine::recovery::Replay<'_>, _db: usize, args: &[Arg], _now: u64) -> Result<(), String> {
    let shards = &mut *r.shards;
    let databases = shards.first().map_or(0, |s| s.dbs.len());
    let parse = |a: &Arg| std::str::from_utf8(a).ok().and_then(|s| s.parse::<usize>().ok()).filter(|&v| v < databases);
    let (Some(x), Some(y)) = (args.get(1).and_then(parse), args.get(2).and_then(parse)) else {
        return Err("bad SWAPDB in the log".into());
    };
    let (x, y) = (x.min(y), x.max(y));
    if x != y {
        for s in shards.iter_mut() {
            let (lo, hi) = s.dbs.split_at_mut(y);
            lo[x].swap_contents(&mut hi[0]);
        }
    }
    Ok(())
}

/// Recovery's DEBUG: only POPULATE writes (and is logged).
fn replay_debug(r: &mut abacus_engine::recovery::Replay<'_>, db: usize, args: &[Arg], now: u64) -> Result<(), String> {
    let shards = &mut *r.shards;
    if args.len() < 3 || !is(&args[1], "populate") {
        return Err("only DEBUG POPULATE can be replayed".into());
    }
    let num = |a: Option<&Arg>| a.and_then(|a| std::str::from_utf8(a).ok()?.parse::<u64>().ok());
    let count = num(args.get(2)).ok_or("bad DEBUG POPULATE in the log")?;
    let prefix = args.get(3).map_or(&b"key"[..], |p| &p[..]).to_vec();
    let size = num(args.get(4)).unwrap_or(0) as usize;
    let n = shards.len();
    for s in shards.iter_mut() {
        populate_shard(s, db, count, &prefix, size, n, now);
    }
    Ok(())
}

/// DEBUG POPULATE's work on one shard: creates the missing keys of the sequence that hash
/// to this shard. Recovery replays a logged DEBUG POPULATE through it too.
pub fn populate_shard(s: &mut abacus_engine::shard::Shard, db: usize, count: u64, prefix: &[u8], size: usize, shards: usize, now: u64) {
    let mut key = Vec::with_capacity(prefix.len() + 21);
    let mut digits = itoa::Buffer::new();
    for j in 0..count {
        let num = digits.format(j).as_bytes();
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(num);
        if abacus_engine::shard::shard_of(&key, shards) != s.id || s.dbs[db].contains(&key, now) {
            continue;
        }
        let mut value = Vec::with_capacity(size.max(6 + num.len()));
        value.extend_from_slice(b"value:");
        value.extend_from_slice(num);
        if size > 0 {
            value.resize(size, 0);
        }
        s.dbs[db].set(&key, abacus_keyspace::Value::Str(value.into()), 0, now);
    }
}

/// What INFO needs from one shard (and its thread).
struct ShardInfo {
    keys: Vec<(usize, usize)>,
    expired: u64,
    hits: u64,
    misses: u64,
    evicted: u64,
    commands: std::collections::HashMap<&'static str, CmdStat>,
    /// This thread's latency histograms, when `latencystats` is asked.
    histograms: Vec<(&'static str, abacus_engine::latency::Histogram)>,
}

/// INFO's sections without an argument (or `default`), as Redis 7.0 lists them; `all` and
/// `everything` add `commandstats` and `latencystats`. Output follows
/// Redis's fixed order, whatever the order asked.
const DEFAULT_SECTIONS: &[&str] = &["server", "clients", "memory", "persistence", "stats", "replication", "cpu", "modules", "errorstats", "cluster", "keyspace"];

pub async fn info(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let sections: Vec<String> = a[1..].iter().map(|s| String::from_utf8_lossy(s).to_ascii_lowercase()).collect();
    let Some(out) = info_text(&conn.worker, access, sections).await else { return shutting_down() };
    match conn.client.proto {
        Protocol::Resp3 => Frame::Verbatim { format: *b"txt", text: Bytes::from(out) },
        Protocol::Resp2 => Frame::Bulk(Bytes::from(out)),
    }
}

/// INFO's text for the sections asked (lower case; none = the default ones); None when the
/// server is shutting down. The metrics endpoint (`metrics.rs`) reads the same text.
pub async fn info_text(worker: &crate::node::Node, access: Access<'_>, mut sections: Vec<String>) -> Option<String> {
    if sections.is_empty() || sections.iter().any(|s| s == "default") {
        sections.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }
    if sections.iter().any(|s| s == "all" || s == "everything") {
        sections.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
        sections.push("commandstats".into());
        sections.push("latencystats".into());
    }
    let want = |s: &str| sections.iter().any(|x| x == s);
    let want_latency = want("latencystats");
    let mut shards = worker
        .run_all(access, move |s| ShardInfo {
            keys: s.dbs.iter().map(|d| (d.len(), d.volatile_len())).collect(),
            expired: s.dbs.iter().map(|d| d.expired_keys_total).sum(),
            hits: s.dbs.iter().map(|d| d.hits_total).sum(),
            misses: s.dbs.iter().map(|d| d.misses_total).sum(),
            evicted: s.dbs.iter().map(|d| d.evicted_keys_total).sum(),
            commands: s.rec.commands.snapshot(),
            histograms: if want_latency { s.rec.commands.histograms() } else { Vec::new() },
        })
        .await?;
    let server = &worker.server;
    let mut cmds: std::collections::BTreeMap<&'static str, CmdStat> = Default::default();
    for sh in &shards {
        for (name, st) in &sh.commands {
            let e = cmds.entry(name).or_default();
            e.calls += st.calls;
            e.usec += st.usec;
            e.rejected_calls += st.rejected_calls;
            e.failed_calls += st.failed_calls;
        }
    }
    let mut out = String::new();
    let uptime = server.started.elapsed().as_secs();
    if want("server") {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let _ = write!(
            out,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nabacus_version:{ABACUS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nthreads:{}\r\nshards:{}\r\n\r\n",
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            server.run_id,
            server.port,
            now.as_micros(),
            uptime / 86400,
            server.config.get(abacus_engine::param!("hz")),
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            server.config.config_file().map(|p| p.display().to_string()).unwrap_or_default(),
            server.threads,
            server.senders.len(),
        );
    }
    if want("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:{}\r\n\r\n",
            server.clients.len(),
            server.config.maxclients(),
            server.stats.blocked_clients.load(std::sync::atomic::Ordering::Relaxed),
            crate::tracking::counts().0,
            server.stats.blocked_clients.load(std::sync::atomic::Ordering::Relaxed),
        );
    }
    if want("memory") {
        let used = memory::allocated_bytes();
        let rss = memory::rss_bytes();
        // Scripting: every shard's Lua heap, the script cache, the libraries.
        let lua = server.scripts.lua_memory();
        let scripts = server.scripts.scripts_bytes();
        let (functions, libraries) = {
            let libs = server.scripts.libraries.read();
            (libs.libs.values().map(|l| l.functions.len()).sum::<usize>(), libs.libs.len())
        };
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{}\r\nused_memory_peak_human:{}\r\nused_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{scripts}\r\nnumber_of_cached_scripts:{}\r\nnumber_of_functions:{}\r\nnumber_of_libraries:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_allocator:{}\r\n\r\n",
            memory::human(used),
            memory::human(rss),
            memory::peak_bytes(),
            memory::human(memory::peak_bytes()),
            memory::human(lua),
            server.scripts.script_count(),
            functions,
            libraries,
            server.config.get_u64(abacus_engine::param!("maxmemory")),
            memory::human(server.config.get_u64(abacus_engine::param!("maxmemory"))),
            server.config.get(abacus_engine::param!("maxmemory-policy")),
            if used > 0 { rss as f64 / used as f64 } else { 0.0 },
            memory::ALLOCATOR,
        );
    }
    if want("persistence") {
        let mut p = abacus_engine::snapshot::info_persistence(&server.durability, &server.recorders.loading);
        // EXPORT's fields close the section (before its blank line).
        if p.ends_with("\r\n\r\n") {
            p.truncate(p.len() - 2);
        }
        p.push_str(&server.export.info());
        p.push_str("\r\n");
        out.push_str(&p);
    }
    if want("stats") {
        let st = &server.stats;
        let total: u64 = cmds.values().map(|c| c.calls).sum();
        let expired: u64 = shards.iter().map(|s| s.expired).sum();
        let pubsub = abacus_engine::pubsub::registry().counts();
        let tracking = crate::tracking::counts();
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{total}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{expired}\r\nevicted_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\ntotal_error_replies:{}\r\nunexpected_error_replies:0\r\nclient_output_buffer_limit_disconnections:{}\r\nmigrated_connections:{}\r\ndirect_replies:{}\r\ndirect_replies_partial:{}\r\n{}{}\r\n",
            st.connections_received_total.load(Ordering::Relaxed),
            st.ops_per_sec.iter().map(|o| o.load(Ordering::Relaxed)).sum::<u64>(),
            st.net_input_bytes_total.load(Ordering::Relaxed),
            st.net_output_bytes_total.load(Ordering::Relaxed),
            st.connections_rejected_total.load(Ordering::Relaxed),
            shards.iter().map(|s| s.evicted).sum::<u64>(),
            shards.iter().map(|s| s.hits).sum::<u64>(),
            shards.iter().map(|s| s.misses).sum::<u64>(),
            pubsub.0,
            pubsub.1,
            pubsub.2,
            tracking.1,
            tracking.2,
            tracking.3,
            server.recorders.errors.total(),
            abacus_engine::pubsub::OBUF_LIMIT_DISCONNECTIONS.load(Ordering::Relaxed),
            st.migrated_connections.load(Ordering::Relaxed),
            st.direct_replies.load(Ordering::Relaxed),
            st.direct_replies_partial.load(Ordering::Relaxed),
            crate::tls::info_stats(&server.tls),
            crate::replication::info_stats(),
        );
    }
    if want("replication") {
        out.push_str(&crate::replication::info(&server.config));
    }
    if want("cpu") {
        let (user, sys) = memory::cpu_seconds();
        let _ = write!(out, "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n\r\n");
    }
    if want("modules") {
        out.push_str("# Modules\r\n\r\n");
    }
    if want("commandstats") {
        out.push_str("# Commandstats\r\n");
        for (name, c) in &cmds {
            let per = if c.calls > 0 { c.usec as f64 / c.calls as f64 } else { 0.0 };
            let _ = write!(out, "cmdstat_{name}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}\r\n", c.calls, c.usec, c.rejected_calls, c.failed_calls);
        }
        out.push_str("\r\n");
    }
    if want_latency {
        let merged = super::latency::merge(shards.iter_mut().map(|s| std::mem::take(&mut s.histograms)).collect());
        let percentiles = abacus_engine::latency::parse_percentiles(&server.config.get(abacus_engine::param!("latency-tracking-info-percentiles"))).unwrap_or_default();
        out.push_str(&abacus_engine::latency::info_section(&merged, &percentiles));
    }
    if want("errorstats") {
        out.push_str(&server.recorders.errors.info());
    }
    if want("cluster") {
        let enabled = u8::from(worker.server.cluster.is_some());
        out.push_str(&format!("# Cluster\r\ncluster_enabled:{enabled}\r\n"));
        if let Some(c) = &worker.server.cluster {
            let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
            out.push_str(&format!("cluster_fanout_queries:{}\r\ncluster_fanout_standby_answers:{}\r\n", n(&c.fanout_queries), n(&c.fanout_standby)));
        }
        out.push_str("\r\n");
    }
    // Abacus's own section: only when asked by name, so that `all` and `everything` list
    // Redis 7.0's sections as Redis does.
    if want("summarizer") {
        out.push_str(&worker.server.summarizer.info());
    }
    if want("keyspace") {
        out.push_str("# Keyspace\r\n");
        for db in 0..server.databases {
            let (keys, expires) = shards.iter().fold((0, 0), |acc, s| {
                let (k, e) = s.keys.get(db).copied().unwrap_or((0, 0));
                (acc.0 + k, acc.1 + e)
            });
            if keys > 0 {
                let _ = write!(out, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
            }
        }
        out.push_str("\r\n");
    }
    if want("timeseries") {
        // Only when asked by name: it visits every series (Redis has no such section).
        let per = worker.run_all(access, |s| super::ts_multi::stats(&s.dbs)).await?;
        out.push_str(&super::ts_multi::stats_section(&per));
    }
    while out.ends_with("\r\n\r\n") {
        out.truncate(out.len() - 2);
    }
    Some(out)
}

/// LOLWUT [VERSION v [args...]]: as Redis 7.0, the version line alone (`Redis ver. 7.0.15`),
/// or for versions 5 and 6 a piece of art before it (ours is an abacus; the arguments that
/// size Redis's art must be integers and are otherwise ignored).
pub fn lolwut(conn: &Conn, a: &[Arg]) -> Frame {
    let mut version = None;
    let mut rest = &a[1..];
    if a.len() >= 3 && is(&a[1], "version") {
        match parse_i64(&a[2]) {
            Ok(v) => version = Some(v),
            Err(e) => return e,
        }
        rest = &a[3..];
    }
    let mut text = String::new();
    if matches!(version, Some(5) | Some(6)) {
        for r in rest {
            if let Err(e) = parse_i64(r) {
                return e;
            }
        }
        text.push_str(LOLWUT_ART);
        text.push_str("Abacus, counting since the first rods and beads. ");
    }
    text.push_str("Redis ver. ");
    text.push_str(REDIS_VERSION);
    text.push('\n');
    match conn.client.proto {
        Protocol::Resp3 => Frame::Verbatim { format: *b"txt", text: Bytes::from(text) },
        Protocol::Resp2 => Frame::Bulk(Bytes::from(text)),
    }
}

const LOLWUT_ART: &str = "\
+-------------------------------+
|==o=o=o========o=o=o=o=o=======|
|====o=o=o=o======o=o=o=o=o=====|
|o=o=o=o=o========o=o===========|
|======o=o=o=o=o=o==o=o=o=o=o===|
|==o=o=o=o=o=o=o=o=o============|
+-------------------------------+
";

/// MONITOR: from now on this connection also receives a line for every command the server
/// runs (see `monitor.rs`).
pub fn monitor(conn: &mut Conn, access: Access<'_>) -> Frame {
    if matches!(access, Access::Locked(_)) {
        // Inside EXEC, as Redis 7.0 (a transaction's client cannot switch to a stream).
        return err("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    if conn.monitor.is_none() {
        conn.monitor = Some(conn.worker.server.monitors.add(conn.client.meta.id));
    }
    Frame::ok()
}
