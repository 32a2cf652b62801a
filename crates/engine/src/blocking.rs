//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP,
//! XREAD and XREADGROUP with BLOCK): the one mechanism every blocking family uses.
//!
//! A blocking command's handler is its non-blocking form: it serves what it can and replies
//! null when every key is empty (what a transaction gets, and what a timeout replies). Its
//! table entry says where the timeout is ([`abacus_commands::command::Spec::blocking`]). Outside a
//! transaction the connection runs it alone (`conn/block.rs`):
//!
//! 1. **Try and register atomically.** When all its keys live on one shard, one job on that
//!    shard runs the handler and, if it found nothing, registers a [`Waiter`] right there: no
//!    write can slip between the check and the registration. The waiter keeps the command, its
//!    database and a channel to the connection; [`abacus_keyspace::Db::block_key`] makes the
//!    database report the key when it is modified.
//! 2. **Served by the shard, in blocking order.** After the shard runs work (a batch, a job,
//!    an operation that held its lock) it calls [`serve_ready`]: for every key modified since
//!    (`Db::take_ready`) it goes through that key's waiters in the order they blocked and
//!    runs each one's command on the spot, before anything else runs on the shard, as Redis's
//!    `handleClientsBlockedOnKeys` does after each command. A waiter is run only when the key
//!    holds the type its family waits for (XREADGROUP's also when the key is gone or holds
//!    another type), serving from that key alone; a null reply keeps it waiting, any other
//!    (errors included: BLMOVE's destination of another type) is removed and sent. This
//!    is the one place where a change is weighed against a wait (see `serve_key`). The served command writes its effect to the log as any write does (BLPOP's is an
//!    LPOP), and the log record is written before the reply leaves the shard, as everywhere.
//!    A waiter's own write (BLMOVE's push) can make another key ready: the loop runs until no
//!    key is ready.
//! 3. **Keys on several shards.** The command's try runs as any multi-shard command (the
//!    shards locked, the keys checked out), and while the locks are still held the waiter is
//!    registered on each shard with a *retry* mark. A ready key then wakes it (it is removed
//!    from every shard) and the connection tries again from step 3: the key that woke it,
//!    then each of its other keys as if it had woken it, so that a key readied while it was
//!    registered nowhere is not missed. Weaker than the one-shard
//!    case: another client's pop may win the race, and the order among such waiters is not
//!    kept. Redis Cluster refuses such commands altogether (CROSSSLOT); standalone Redis serves
//!    them, so Abacus does too.
//! 4. **Timeout, CLIENT UNBLOCK, disconnect, kill.** The connection waits for its channel,
//!    the deadline, CLIENT UNBLOCK / CLIENT KILL (`ClientMeta::unblock`), and its socket's end.
//!    To stop waiting it sends a job removing the waiter from each shard and only then looks
//!    at the channel once more: a reply the shard sent before the removal (the element already
//!    popped) is delivered, never lost. A waiter whose connection is gone (closed channel) is
//!    dropped unserved when its key is next ready.
//!
//! Cost when nobody is blocked: one `is_empty` per shard job and per modified key.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use abacus_keyspace::{Db, ValueType};
use abacus_protocol::{Bytes, Frame};

use crate::config::CmdConfig;
use crate::exec::Call;
use crate::shard::Shard;

/// What a blocked connection receives.
#[derive(Debug)]
pub enum Outcome {
    /// Its command ran on the shard and served this reply.
    Served(Frame),
    /// A key it waits on on another shard became ready (this one, in its database): try
    /// again (step 3).
    Retry(Bytes),
}

/// One blocked client's registration on one shard.
pub struct Waiter {
    pub db: usize,
    pub call: Call,
    /// The command's keys on this shard, each registered once.
    pub keys: Vec<Bytes>,
    pub tx: mpsc::UnboundedSender<Outcome>,
    /// Every key of the command lives on this shard: the shard serves it (step 2). Otherwise
    /// it is only woken (step 3).
    pub serve_here: bool,
}

/// A shard's blocked clients.
#[derive(Default)]
pub struct Blocked {
    waiters: HashMap<u64, Waiter>,
    /// Per (database, key), the waiters in the order they blocked.
    queues: HashMap<(usize, Bytes), VecDeque<u64>>,
}

/// Waiter ids: unique in the process, so one client's registrations on several shards share
/// one.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub fn next_waiter_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

impl Blocked {
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Number of registrations (INFO's `total_blocking_keys` would count keys; this counts
    /// waiters on this shard).
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Registers `w` under `id`; its keys are reported by their database from now on.
    pub fn register(&mut self, dbs: &mut [Db], id: u64, mut w: Waiter) {
        w.keys.sort();
        w.keys.dedup();
        let Some(db) = dbs.get_mut(w.db) else { return };
        for k in &w.keys {
            db.block_key(k);
            self.queues.entry((w.db, k.clone())).or_default().push_back(id);
        }
        self.waiters.insert(id, w);
    }

    /// Removes the waiter `id` (served, timed out, gone); None if it is not here.
    pub fn remove(&mut self, dbs: &mut [Db], id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        for k in &w.keys {
            if let Some(db) = dbs.get_mut(w.db) {
                db.unblock_key(k);
            }
            let slot = (w.db, k.clone());
            if let Some(q) = self.queues.get_mut(&slot) {
                q.retain(|&x| x != id);
                if q.is_empty() {
                    self.queues.remove(&slot);
                }
            }
        }
        Some(w)
    }
}

/// A blocking command's timeout, and whether a handler served nothing (defined with the
/// command table and the blocking handlers, which read them).
pub use abacus_commands::command::{is_null, parse_timeout};

/// Serves the waiters of every key modified since the last call (step 2 of the file
/// comment). Called after each job, batch and lock release on the shard; returns at once
/// when nobody is blocked here.
#[inline]
pub fn serve_ready(s: &mut Shard, cfg: CmdConfig, shards: usize) {
    if !s.blocked.is_empty() {
        serve_ready_keys(s, cfg, shards);
    }
}

fn serve_ready_keys(s: &mut Shard, cfg: CmdConfig, shards: usize) {
    let mut served: Vec<(mpsc::UnboundedSender<Outcome>, Outcome)> = Vec::new();
    loop {
        let mut ready: Vec<(usize, Bytes)> = Vec::new();
        for (d, db) in s.dbs.iter_mut().enumerate() {
            for k in db.take_ready() {
                ready.push((d, Bytes::from(k.into_vec())));
            }
        }
        if ready.is_empty() {
            break;
        }
        for (d, key) in ready {
            serve_key(s, d, &key, cfg, shards, &mut served);
        }
    }
    if served.is_empty() {
        return;
    }
    // The served commands' log records go out before their replies (as for every write).
    s.log.flush_pending();
    for (tx, outcome) in served {
        let _ = tx.send(outcome);
    }
}

/// Serves `key`'s waiters in blocking order while the key holds something for them.
fn serve_key(s: &mut Shard, d: usize, key: &Bytes, cfg: CmdConfig, shards: usize, served: &mut Vec<(mpsc::UnboundedSender<Outcome>, Outcome)>) {
    let Some(queue) = s.blocked.queues.get(&(d, key.clone())) else { return };
    let ids: Vec<u64> = queue.iter().copied().collect();
    for id in ids {
        let now = crate::shard::now_ms();
        let Some(w) = s.blocked.waiters.get(&id) else { continue };
        // Redis 7.0 serves a waiter from a ready key only when the key holds the type its
        // command pops or reads (a list for BLPOP...): a key that is missing or of another
        // type has nothing for it, and it keeps waiting. XREADGROUP's waiters are the
        // exception: they learn that their stream is gone (deleted, flushed, swapped away,
        // overwritten), and Redis 7.0 unblocks them with an error.
        let held = s.dbs.get_mut(d).and_then(|db| db.peek(key, now)).map(|e| e.value().value_type());
        if !serves_missing(w.call.spec) && (held.is_none() || held != waits_for(w.call.spec)) {
            continue;
        }
        if w.tx.is_closed() {
            s.blocked.remove(&mut s.dbs, id);
            continue;
        }
        if !w.serve_here {
            if let Some(w) = s.blocked.remove(&mut s.dbs, id) {
                served.push((w.tx, Outcome::Retry(key.clone())));
            }
            continue;
        }
        let (db, spec, args) = (w.db, w.call.spec, &w.call.args);
        SERVING.with(|k| *k.borrow_mut() = Some(key.clone()));
        let reply = crate::exec::run_lone(&mut s.dbs, &mut s.log, &mut s.rec, db, spec, args, now, cfg, shards);
        SERVING.with(|k| *k.borrow_mut() = None);
        // Nothing for it (a command that wants what is not there: BLMOVE woken by its
        // destination, XREAD by an entry before its ID): it keeps waiting, and the next in
        // line may still be served. Anything else ends the wait, errors included: BLMOVE's
        // destination of another type (-WRONGTYPE, the element stays in the source), a
        // stream reader's group destroyed or stream gone.
        if is_null(&reply) {
            continue;
        }
        if let Some(w) = s.blocked.remove(&mut s.dbs, id) {
            served.push((w.tx, Outcome::Served(reply)));
        }
    }
}

/// Whether a waiter of this command is run when its key is missing or holds another type
/// (see `BLOCKED_SERVES_MISSING`).
fn serves_missing(spec: &abacus_commands::command::Spec) -> bool {
    spec.has(abacus_commands::command::flags::BLOCKED_SERVES_MISSING)
}

/// The type a blocking command waits for, from its family (Redis's BLOCKED_LIST,
/// BLOCKED_ZSET, BLOCKED_STREAM).
fn waits_for(spec: &abacus_commands::command::Spec) -> Option<ValueType> {
    match spec.group {
        "list" => Some(ValueType::List),
        "sorted-set" => Some(ValueType::ZSet),
        "stream" => Some(ValueType::Stream),
        _ => None,
    }
}

thread_local! {
    /// The key whose waiter the shard is serving right now (see [`serving_key`]).
    static SERVING: std::cell::RefCell<Option<Bytes>> = const { std::cell::RefCell::new(None) };
}

/// While a blocked client's command runs because a key became ready: that key. The stream
/// readers then answer as Redis serves a blocked client (only from that key, and with
/// Redis's wording for a group or stream that went away); a command run any other way sees
/// None.
pub fn serving_key() -> Option<Bytes> {
    SERVING.with(|k| k.borrow().clone())
}

/// Runs `f` as the serving of `key`'s waiter (see [`serving_key`]): a waiter on several
/// shards tries again on its connection's thread when a key of it became ready.
pub fn serving<R>(key: Option<Bytes>, f: impl FnOnce() -> R) -> R {
    SERVING.with(|k| *k.borrow_mut() = key);
    let r = f();
    SERVING.with(|k| *k.borrow_mut() = None);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_redis() {
        assert_eq!(parse_timeout(b"0").unwrap(), 0);
        assert_eq!(parse_timeout(b"1").unwrap(), 1000);
        assert_eq!(parse_timeout(b"0.0001").unwrap(), 1);
        assert_eq!(parse_timeout(b"1.5").unwrap(), 1500);
        for bad in [&b"x"[..], b"", b" 1", b"nan", b"1x"] {
            assert!(parse_timeout(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_timeout(b"-1").unwrap_err(), Frame::error("ERR timeout is negative"));
        assert_eq!(parse_timeout(b"inf").unwrap_err(), Frame::error("ERR timeout is out of range"));
    }
}
