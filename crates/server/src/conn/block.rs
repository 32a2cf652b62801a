//! A blocking command on its connection: try, register, wait, and stop waiting without
//! losing what a shard served meanwhile. The mechanism and its guarantees are described in
//! `blocking.rs`; this file is the connection's half.
//!
//! While it waits, the connection reads nothing more: commands pipelined behind a blocking
//! one run after it, as in Redis. It watches its socket only for the end of the connection
//! (a `peek`); once the client has sent more input it stops watching (the input is read
//! after the command), so a client that pipelines behind a blocking command and then
//! disconnects is noticed when the command ends.

use std::sync::atomic::Ordering;
use std::time::Duration;

use abacus_tls::Stream;
use tokio::sync::mpsc;

use abacus_protocol::{Args, Bytes, Frame};

use super::Conn;
use abacus_engine::blocking::{self, Outcome, Waiter};
use crate::clients::{UNBLOCK_ERROR, UNBLOCK_ROLE, UNBLOCK_TIMEOUT};
use crate::command::Spec;
use abacus_engine::exec::{self, shutting_down, Access, Call};
use abacus_engine::shard::{now_ms, shard_of, Shard};

/// What a try gave.
enum Attempt {
    /// Served, or an error: the reply.
    Done(Frame),
    /// Registered: it waits.
    Blocked,
}

/// Why the wait ended.
enum Woken {
    Outcome(Outcome),
    Timeout,
    /// CLIENT UNBLOCK with this mode.
    Unblocked(u8),
    /// The connection ends (EOF, CLIENT KILL) or the server shuts down.
    Gone,
}

impl Conn {
    /// Runs a blocking command outside a transaction (see `blocking.rs`). None: the
    /// connection ended while it waited (EOF, CLIENT KILL): nothing is to be written.
    pub(super) async fn run_blocking(&mut self, call: Call, stream: &Stream) -> Option<Frame> {
        let Some(Ok(timeout_ms)) = call.spec.block_timeout_ms(&call.args) else {
            // A bad timeout: the handler replies its error.
            return Some(self.dispatch(Access::Free, call).await);
        };
        // A deadline past what the clock can hold (XREAD BLOCK 2^63-1 ms) waits forever.
        let deadline = (timeout_ms > 0).then(|| tokio::time::Instant::now().checked_add(Duration::from_millis(timeout_ms))).flatten();
        let spec = call.spec;
        // Detached from the read buffer's block: a client may wait for hours.
        let mut argv: Vec<Bytes> = call.args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        drop(call);
        let db = self.client.db;
        let n = self.worker.shards();
        let keys = exec::command_keys(spec, &Args::from_vec(argv.clone()), db);
        let mut shards: Vec<usize> = keys.iter().map(|(_, k)| shard_of(k, n)).collect();
        shards.sort_unstable();
        shards.dedup();
        let mut socket_open = true;
        // The key whose readiness woke a waiter on several shards: its next try serves that
        // key as a shard would have (XREAD's stream readers answer for it alone).
        let mut ready: Option<Bytes> = None;
        loop {
            let id = blocking::next_waiter_id();
            // Unbounded, but it holds at most one outcome per shard this waiter is registered on: a
            // shard sends once (served, woken or timed out) and forgets the waiter.
            let (tx, mut rx) = mpsc::unbounded_channel();
            let attempt = if shards.len() <= 1 {
                let shard = shards.first().copied().unwrap_or(self.worker.shard_id);
                self.try_on_shard(spec, &argv, &keys, shard, id, tx).await
            } else {
                self.try_across(spec, &mut argv, &keys, &shards, id, tx, ready.take()).await
            };
            match attempt {
                None => return Some(shutting_down()),
                Some(Attempt::Done(reply)) => return Some(reply),
                Some(Attempt::Blocked) => {}
            }
            let woken = self.wait_blocked(&mut rx, deadline, stream, &mut socket_open).await;
            if let Woken::Outcome(Outcome::Served(reply)) = woken {
                // Removed from the shard by the shard itself (one-shard waiters only).
                return Some(reply);
            }
            // Stop waiting everywhere, then take what a shard served before the removal.
            for &shard in &shards {
                self.worker.run(Access::Free, shard, move |s: &mut Shard| {
                    s.blocked.remove(&mut s.dbs, id);
                }).await;
            }
            let served = match rx.try_recv() {
                Ok(Outcome::Served(reply)) => Some(reply),
                _ => None,
            };
            return match woken {
                // Served after all: the reply goes out (or, if the client is gone, the
                // element went to a closed socket, as it would have in Redis).
                _ if served.is_some() => served,
                Woken::Outcome(Outcome::Retry(key)) => {
                    ready = Some(key);
                    continue;
                }
                Woken::Outcome(_) => continue,
                // Redis 7.0 answers every timed-out wait with a null array (its
                // replyToBlockedClientTimedOut), BLMOVE's and BRPOPLPUSH's too, although
                // their null inside MULTI is a null bulk string.
                Woken::Timeout => Some(Frame::NullArray),
                Woken::Unblocked(UNBLOCK_ERROR) => Some(Frame::error("UNBLOCKED client unblocked via CLIENT UNBLOCK")),
                Woken::Unblocked(UNBLOCK_ROLE) => {
                    self.close_after_reply = true;
                    Some(Frame::error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"))
                }
                Woken::Unblocked(_) => Some(Frame::NullArray),
                Woken::Gone if self.shutting_down() => Some(shutting_down()),
                Woken::Gone => None,
            };
        }
    }

    /// Whether the server is stopping (a shard dropped its waiters).
    fn shutting_down(&self) -> bool {
        !self.client.meta.killed.load(Ordering::Acquire) && self.worker.server.senders.iter().any(|s| s.is_closed())
    }

    /// Every key on one shard: one job tries the command and, if it found nothing,
    /// registers the waiter (step 1 of `blocking.rs`).
    async fn try_on_shard(&mut self, spec: &'static Spec, argv: &[Bytes], keys: &[(usize, Bytes)], shard: usize, id: u64, tx: mpsc::UnboundedSender<Outcome>) -> Option<Attempt> {
        let db = self.client.db;
        let cfg = self.worker.server.config.cmd_config();
        let total = self.worker.shards();
        let args = Args::from_vec(argv.to_vec());
        let keys: Vec<Bytes> = keys.iter().map(|(_, k)| k.clone()).collect();
        self.worker
            .run(Access::Free, shard, move |s: &mut Shard| {
                let now = now_ms();
                // XREAD's `$`: the last ID now, so that the wait is for what comes after.
                let args = match spec.wait_args.and_then(|f| f(&mut s.dbs, db, &args, now, &|_| true)) {
                    Some(rewritten) => Args::from_vec(rewritten),
                    None => args,
                };
                let reply = exec::run_lone(&mut s.dbs, &mut s.log, &mut s.rec, db, spec, &args, now, cfg, total);
                // What the try wrote (a consumer XREADGROUP created) is logged either way.
                s.log.flush_pending();
                if !blocking::is_null(&reply) {
                    return Attempt::Done(reply);
                }
                let waiter = Waiter { db, call: Call { spec, args, client: 0, no_touch: false }, keys, tx, serve_here: true };
                s.blocked.register(&mut s.dbs, id, waiter);
                Attempt::Blocked
            })
            .await
    }

    /// Keys on several shards: the try runs under the shards' locks, and the waiter is
    /// registered on each of them before the locks go (step 3 of `blocking.rs`).
    async fn try_across(&mut self, spec: &'static Spec, argv: &mut Vec<Bytes>, keys: &[(usize, Bytes)], shards: &[usize], id: u64, tx: mpsc::UnboundedSender<Outcome>, ready: Option<Bytes>) -> Option<Attempt> {
        let db = self.client.db;
        let n = self.worker.shards();
        let locks = self.worker.lock(shards.iter().copied()).await?;
        if let Some(f) = spec.wait_args {
            // Each shard rewrites what its keys decide (XREAD's `$`), under the locks; the
            // rewritten arguments are kept for the tries after a wake-up.
            for &shard in shards {
                let current = Args::from_vec(argv.clone());
                let rewritten = self
                    .worker
                    .run(Access::Locked(&locks), shard, move |s: &mut Shard| f(&mut s.dbs, db, &current, now_ms(), &|k| shard_of(k, n) == shard))
                    .await?;
                if let Some(r) = rewritten {
                    *argv = r;
                }
            }
        }
        let call = Call { spec, args: Args::from_vec(argv.to_vec()), client: self.client.meta.id, no_touch: self.client.meta.no_touch() };
        let woken_by = ready.clone();
        let mut reply = self.worker.run_keyed_serving(Access::Locked(&locks), db, call, ready).await;
        if let Some(woken_by) = woken_by {
            // The key that woke it had nothing for it, but between that wake-up and these
            // locks it was registered nowhere: another key of it may have become ready
            // meanwhile (BRPOPLPUSH woken by its destination while the source got an
            // element). Each of its other keys is served as if it had woken it, so no
            // wake-up is lost and none is invented (a key of another type serves nothing).
            for (_, key) in keys.iter().filter(|(_, k)| *k != woken_by) {
                if !blocking::is_null(&reply) {
                    break;
                }
                let call = Call { spec, args: Args::from_vec(argv.to_vec()), client: self.client.meta.id, no_touch: self.client.meta.no_touch() };
                reply = self.worker.run_keyed_serving(Access::Locked(&locks), db, call, Some(key.clone())).await;
            }
        }
        if !blocking::is_null(&reply) {
            return Some(Attempt::Done(reply));
        }
        for &shard in shards {
            let here: Vec<Bytes> = keys.iter().filter(|(_, k)| shard_of(k, n) == shard).map(|(_, k)| k.clone()).collect();
            let waiter = Waiter { db, call: Call { spec, args: Args::from_vec(argv.to_vec()), client: 0, no_touch: false }, keys: here, tx: tx.clone(), serve_here: false };
            self.worker.run(Access::Locked(&locks), shard, move |s: &mut Shard| s.blocked.register(&mut s.dbs, id, waiter)).await?;
        }
        Some(Attempt::Blocked)
    }

    /// Waits for a shard's outcome, the deadline, CLIENT UNBLOCK / KILL, or the socket's end.
    async fn wait_blocked(&mut self, rx: &mut mpsc::UnboundedReceiver<Outcome>, deadline: Option<tokio::time::Instant>, stream: &Stream, socket_open: &mut bool) -> Woken {
        let meta = self.client.meta.clone();
        let stats = &self.worker.server.stats;
        meta.unblock_mode.store(0, Ordering::Release);
        meta.blocked.store(true, Ordering::Release);
        stats.blocked_clients.fetch_add(1, Ordering::Relaxed);
        let woken = loop {
            // Armed before the flags are read, so a request in between is not missed.
            let unblock = meta.unblock.notified();
            tokio::pin!(unblock);
            unblock.as_mut().enable();
            if meta.killed.load(Ordering::Acquire) {
                break Woken::Gone;
            }
            let mode = meta.unblock_mode.swap(0, Ordering::AcqRel);
            if mode == UNBLOCK_TIMEOUT || mode == UNBLOCK_ERROR || mode == UNBLOCK_ROLE {
                break Woken::Unblocked(mode);
            }
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let mut probe = [0u8; 1];
            let eof = async {
                if *socket_open {
                    // The TCP socket's: a close shows there, encrypted or not.
                    stream.tcp().peek(&mut probe).await
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                outcome = rx.recv() => break match outcome {
                    Some(o) => Woken::Outcome(o),
                    // The shard dropped the waiter: it is shutting down.
                    None => Woken::Gone,
                },
                _ = sleep => break Woken::Timeout,
                _ = &mut unblock => continue,
                r = eof => match r {
                    Ok(0) | Err(_) => break Woken::Gone,
                    // More input: it waits until the command ends.
                    Ok(_) => *socket_open = false,
                },
            }
        };
        meta.blocked.store(false, Ordering::Release);
        stats.blocked_clients.fetch_sub(1, Ordering::Relaxed);
        woken
    }
}
