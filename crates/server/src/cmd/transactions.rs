//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Queued commands are checked (lookup, arity, auth) when queued, as Redis does. EXEC locks
//! every shard the transaction touches (its commands' keys, its watched keys, or all shards
//! when a queued command visits every shard), checks the WATCH flag under those locks, runs
//! the commands in order through the ordinary dispatcher with the locked access, and releases.
//! Between the check and the last command no other client can touch those shards, so the
//! transaction is atomic and WATCH is exact.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::{Handler, Spec};
use crate::conn::{Conn, Multi};
use abacus_engine::exec::{command_keys, Access};
use abacus_engine::shard::shard_of;

const G: &str = "transactions";

pub const COMMANDS: &[Spec] = &[
    Spec::conn("multi", 1, CONTROLS_MULTI | TX_BEGIN | FAST | LOADING | STALE, (0, 0, 0), conn_fn!(|conn, _, _| multi(conn)), G, "Starts a transaction.")
        .docs("1.2.0", "O(1)")
        .noscript()
        .allow_busy(),
    Spec::conn("exec", 1, CONTROLS_MULTI | TX_END | RUNS_QUEUED | LOADING | STALE, (0, 0, 0), conn_fn!(|conn, _, _| exec(conn).await), G, "Executes all commands in a transaction.")
        .docs("1.2.0", "Depends on commands in the transaction")
        .noscript()
        .skip_slowlog(),
    Spec::conn("discard", 1, CONTROLS_MULTI | TX_END | FAST | LOADING | STALE, (0, 0, 0), conn_fn!(|conn, _, _| discard(conn).await), G, "Discards a transaction.")
        .docs("2.0.0", "O(N), when N is the number of queued commands")
        .noscript()
        .allow_busy(),
    Spec::conn("watch", -2, CONTROLS_MULTI | FAST | LOADING | STALE, (1, -1, 1), conn_fn!(|conn, _, call| watch(conn, &call.args).await), G, "Monitors changes to keys to determine the execution of a transaction.")
        .docs("2.2.0", "O(1) for every key.")
        .key_specs("RO")
        .noscript()
        .allow_busy()
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    // Not CONTROLS_MULTI: as in Redis, UNWATCH inside MULTI is queued (and a no-op in EXEC).
    Spec::conn("unwatch", 1, FAST | NOOP_IN_EXEC | LOADING | STALE, (0, 0, 0), conn_fn!(|conn, _, _| unwatch(conn).await), G, "Forgets about watched keys of a transaction.")
        .docs("2.2.0", "O(1)")
        .noscript()
        .allow_busy(),
];

pub fn multi(conn: &mut Conn) -> Frame {
    if conn.multi.is_some() {
        return err("ERR MULTI calls can not be nested");
    }
    conn.multi = Some(Multi { queued: Vec::new(), failed: false, monitor_args: Vec::new() });
    conn.client.meta.multi_len.store(0, Ordering::Relaxed);
    Frame::ok()
}

pub async fn discard(conn: &mut Conn) -> Frame {
    if conn.multi.take().is_none() {
        return err("ERR DISCARD without MULTI");
    }
    conn.client.meta.multi_len.store(usize::MAX, Ordering::Relaxed);
    conn.client.meta.multi_mem.store(0, Ordering::Relaxed);
    conn.unwatch_all().await;
    Frame::ok()
}

pub async fn exec(conn: &mut Conn) -> Frame {
    let Some(mut multi) = conn.multi.take() else { return err("ERR EXEC without MULTI") };
    // ACL rules are checked again at EXEC, as Redis does: a queued command the user's rules
    // no longer allow does not run, and its place in the reply holds the error.
    let mut denied: Vec<(usize, Frame)> = Vec::new();
    if !conn.client.user.is_open() && !multi.failed {
        let mut kept = Vec::with_capacity(multi.queued.len());
        for (i, call) in std::mem::take(&mut multi.queued).into_iter().enumerate() {
            match conn.client.user.check(call.spec, &call.args) {
                Ok(()) => kept.push(call),
                Err(d) => {
                    conn.acl_log(d.reason(), "multi", d.object(call.spec, &call.args));
                    denied.push((i, Frame::error(d.exec_error())));
                }
            }
        }
        multi.queued = kept;
    }
    match exec_queued(conn, multi).await {
        Frame::Array(mut replies) if !denied.is_empty() => {
            for (i, e) in denied {
                replies.insert(i.min(replies.len()), e);
            }
            Frame::Array(replies)
        }
        other => other,
    }
}

async fn exec_queued(conn: &mut Conn, multi: crate::conn::Multi) -> Frame {
    conn.client.meta.multi_len.store(usize::MAX, Ordering::Relaxed);
    conn.client.meta.multi_mem.store(0, Ordering::Relaxed);
    if multi.failed {
        conn.unwatch_all().await;
        return err("EXECABORT Transaction discarded because of previous errors.");
    }
    if multi.queued.iter().any(|c| c.spec.is_write()) {
        // Persistence failed after these writes were queued: Redis refuses the EXEC (MISCONF).
        if let Some(refused) = abacus_engine::snapshot::refusing_writes(&conn.worker.server.durability, &conn.worker.server.config) {
            conn.unwatch_all().await;
            return Frame::error(refused);
        }
    }
    let n = conn.worker.shards();
    let mut all = false;
    let mut shards = BTreeSet::new();
    for call in &multi.queued {
        match call.spec.handler {
            Handler::Keyed(_) => {
                for (_, k) in command_keys(call.spec, &call.args, conn.client.db) {
                    shards.insert(shard_of(&k, n));
                }
                if call.spec.key_indexes(&call.args).next().is_none() {
                    shards.insert(conn.worker.shard_id);
                }
            }
            Handler::Conn(_) => all |= call.spec.has(ALL_SHARDS),
        }
    }
    for (_, k) in &conn.watched {
        shards.insert(shard_of(k, n));
    }
    let wanted: Vec<usize> = if all { (0..n).collect() } else { shards.into_iter().collect() };
    if let [shard] = wanted[..] {
        if multi.queued.iter().all(|c| matches!(c.spec.handler, Handler::Keyed(_))) {
            return exec_on_one_shard(conn, shard, multi.queued).await;
        }
    }
    let Some(locks) = conn.worker.lock(wanted).await else { return abacus_engine::exec::shutting_down() };
    if conn.client.watch_flag.load(Ordering::Acquire) {
        drop(locks);
        conn.unwatch_all().await;
        return Frame::NullArray;
    }
    let mut replies = Vec::with_capacity(multi.queued.len());
    let mut save = false;
    for call in multi.queued {
        if call.spec.has(NOOP_IN_EXEC) {
            // A queued UNWATCH: EXEC unwatches everything below anyway (and unwatching now
            // would wait for the shards this EXEC holds).
            replies.push(Frame::ok());
            continue;
        }
        let scheduled = call.spec.has(SCHEDULED_IN_EXEC);
        let reply = Box::pin(conn.dispatch(Access::Locked(&locks), call)).await;
        // BGSAVE/BGREWRITEAOF under EXEC's locks only replied "scheduled": start it once
        // the locks are released.
        save |= scheduled && !reply.is_error();
        // Inside the EXEC array the connection does not see it as an error: count it here.
        conn.worker.server.recorders.errors.count_reply(&reply);
        replies.push(reply);
    }
    drop(locks);
    conn.unwatch_all().await;
    if save {
        super::persistence::start_scheduled(conn).await;
    }
    Frame::Array(replies)
}

pub async fn watch(conn: &mut Conn, a: &[Arg]) -> Frame {
    if conn.multi.is_some() {
        return err("ERR WATCH inside MULTI is not allowed");
    }
    let n = conn.worker.shards();
    for key in &a[1..] {
        if conn.watched.iter().any(|(d, k)| *d == conn.client.db && k[..] == key[..]) {
            continue;
        }
        let (db, k, flag) = (conn.client.db, Bytes::copy_from_slice(key), conn.client.watch_flag.clone());
        let register = move |s: &mut abacus_engine::shard::Shard| {
            if let Some(d) = s.dbs.get_mut(db) {
                // A key already expired is reclaimed now: as in Redis 7.0, its later
                // (lazy or active) deletion is no change for this watcher.
                d.contains(&k, abacus_engine::shard::now_ms());
                d.watch(&k, &flag);
            }
        };
        let shard = shard_of(key, n);
        if shard == conn.worker.shard_id {
            // In place, or awaited behind whatever holds the shard: this thread's later
            // commands may run in place, ahead of the queue.
            if conn.worker.run(Access::Free, shard, register).await.is_none() {
                return abacus_engine::exec::shutting_down();
            }
        } else {
            // Sent, not awaited: this connection's later commands on that shard all go
            // through its queue, behind the registration, and the connection waits for it
            // before its next reply or non-batch command (`Conn::settle_watches`).
            match conn.worker.spawn_job(Access::Free, shard, register).await {
                Some(done) => conn.watch_pending.push(done),
                None => return abacus_engine::exec::shutting_down(),
            }
        }
        conn.watched.push((conn.client.db, Bytes::copy_from_slice(key)));
    }
    Frame::ok()
}

/// EXEC of a transaction whose commands are all keyed and whose keys, watched ones
/// included, all live on `shard`: one job there checks the WATCH flag, runs the commands,
/// writes their log record and forgets the watched keys. Atomic without locks (the shard
/// runs one job at a time), and one hop instead of a lock, a hop per command and a hop per
/// watched key: the time between a client's WATCH and its EXEC's check, in which another
/// client's write aborts it, is what a retry loop under contention pays for.
async fn exec_on_one_shard(conn: &mut Conn, shard: usize, calls: Vec<abacus_engine::exec::Call>) -> Frame {
    let (db, flag) = (conn.client.db, conn.client.watch_flag.clone());
    let watched = std::mem::take(&mut conn.watched);
    let cfg = conn.worker.server.config.cmd_config();
    let shards = conn.worker.shards();
    let done = conn
        .worker
        .run(Access::Free, shard, move |s| {
            // Raised by a write on this shard's thread, so exact here.
            let aborted = flag.load(Ordering::Acquire);
            let replies = (!aborted).then(|| {
                let now = abacus_engine::shard::now_ms();
                let replies: Vec<Frame> = calls.iter().map(|c| abacus_engine::exec::run_on_shard(s, db, c, now, cfg, shards)).collect();
                // The transaction's writes are one log record, written before the reply.
                s.log.flush_pending();
                replies
            });
            for (d, k) in &watched {
                if let Some(d) = s.dbs.get_mut(*d) {
                    d.unwatch(k, &flag);
                }
            }
            replies
        })
        .await;
    conn.client.watch_flag.store(false, Ordering::Release);
    match done {
        Some(Some(replies)) => {
            // Inside the EXEC array the connection does not see them as errors: count here.
            replies.iter().for_each(|r| conn.worker.server.recorders.errors.count_reply(r));
            Frame::Array(replies)
        }
        Some(None) => Frame::NullArray,
        None => abacus_engine::exec::shutting_down(),
    }
}

pub async fn unwatch(conn: &mut Conn) -> Frame {
    conn.unwatch_all().await;
    Frame::ok()
}
