//! Coalesced cross-thread hops: the groups of single-shard commands that connections on this
//! thread send to other shards travel together, one message per shard per event-loop tick.
//!
//! Why: a pipelined batch with random keys has a group for every shard. Sent one message per
//! connection, each group costs a boxed job, a queue slot, a cross-thread wake-up of the shard
//! thread (often an `eventfd` write and a context switch), and a second wake-up for its reply.
//! When the event loop finds many connections readable at once, their groups for shard B are
//! instead queued here; the first one queued spawns a flush task, which the local task queue
//! runs after the connections already woken in this tick. The flush sends ONE job per shard
//! carrying every queued group, the shard runs them one after the other (each group exactly as
//! `run_batch` would have run it alone) and sends ONE reply back; the flush hands each group's
//! replies to its connection through a same-thread channel, which wakes no other thread.
//!
//! Correctness: a group only ever holds commands of one connection, all on one shard, and a
//! connection waits for its whole batch before going on, exactly as before. Running several
//! connections' groups in one job is equivalent to receiving them back to back, which the
//! queue already allowed. Locks are unaffected: the job queues behind a `Lock` like any other.
//!
//! A group may instead carry a [`Sink`]: then the shard writes its replies to the client's
//! socket itself (see `direct.rs`), and a job whose groups all do so sends nothing back.
//!
//! Order (`order.rs`): the groups of a batch that spans shards are queued with
//! [`Hops::send_ordered`], its own shard's group included. A flush that carries one sends
//! all its jobs together through `Order::send_all`; its own shard's job runs in place right
//! after, unless ordered work waits in that shard's queue. Every group of the flush then
//! takes effect at the flush's place in the order of multi-shard work.
//!
//! Bounds: at most `max-pipeline-commands` calls per group and one pending group per
//! connection, so a flush carries at most (connections on this thread) groups; the shard
//! queue stays bounded and its back-pressure holds the flush (and so the connections).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::oneshot;

use abacus_protocol::Frame;

use crate::config::CmdConfig;
use crate::direct::{Joint, Sink};
use crate::exec::{run_groups, Call, Group};
use crate::engine::Engine;
use crate::shard::{Shard, ShardMsg};

/// Where a group's replies go.
enum Deliver {
    /// Back to the connection's thread.
    Back(oneshot::Sender<Vec<(usize, Frame)>>),
    /// Straight to the client, from the shard's thread.
    Direct(Sink),
    /// Into a sink shared with the batch's other parts (see `direct.rs`).
    Joint(Arc<Joint>),
}

/// Where a job's group sends its replies itself.
enum Target {
    Sink(Sink),
    Joint(Arc<Joint>),
}

/// One connection's group waiting for the flush.
struct Pending {
    group: Group,
    deliver: Deliver,
}

/// The groups this thread's connections queued for each shard during the current tick.
pub struct Hops {
    engine: Arc<Engine>,
    /// This thread's shard.
    shard_id: usize,
    shard: Rc<RefCell<Shard>>,
    /// Indexed by destination shard.
    queued: RefCell<Vec<Vec<Pending>>>,
    /// A group of a multi-shard batch is queued: the flush sends in order (`order.rs`).
    ordered: Cell<bool>,
    /// A flush task has been spawned and has not yet taken the queue.
    flush_spawned: Cell<bool>,
}

impl Hops {
    pub fn new(engine: Arc<Engine>, shard_id: usize, shard: Rc<RefCell<Shard>>) -> Rc<Hops> {
        let shards = engine.senders.len();
        Rc::new(Hops {
            engine,
            shard_id,
            shard,
            queued: RefCell::new((0..shards).map(|_| Vec::new()).collect()),
            ordered: Cell::new(false),
            flush_spawned: Cell::new(false),
        })
    }

    /// [`Hops::send`] for a group of a batch that spans shards (this thread's own shard may
    /// be one of them): the flush sends it in order with the batch's other groups.
    pub fn send_ordered(self: &Rc<Self>, shard: usize, db: usize, calls: Vec<(usize, Call)>, cfg: CmdConfig) -> oneshot::Receiver<Vec<(usize, Frame)>> {
        self.ordered.set(true);
        self.send(shard, db, calls, cfg)
    }

    /// Queues `calls` (indexes into the caller's batch, all for `shard`) to run on `shard` in
    /// database `db`; the receiver yields their replies, or an error if the shard is gone.
    /// Must be called from this thread's `LocalSet` (it spawns the flush there).
    pub fn send(self: &Rc<Self>, shard: usize, db: usize, calls: Vec<(usize, Call)>, cfg: CmdConfig) -> oneshot::Receiver<Vec<(usize, Frame)>> {
        let (tx, rx) = oneshot::channel();
        // No such shard: the dropped sender reports it.
        self.queue(shard, Pending { group: Group { db, calls, cfg }, deliver: Deliver::Back(tx) });
        rx
    }

    /// Queues `calls` like [`Hops::send`], with their replies going straight to the client
    /// through `sink` (see `direct.rs`).
    pub fn delegate(self: &Rc<Self>, shard: usize, db: usize, calls: Vec<(usize, Call)>, cfg: CmdConfig, sink: Sink) {
        // No such shard: the dropped sink reports it.
        self.queue(shard, Pending { group: Group { db, calls, cfg }, deliver: Deliver::Direct(sink) });
    }

    /// [`Hops::delegate`] for one part of a batch that spans shards, sent in order with the
    /// others (see [`Hops::send_ordered`]); the parts share `joint`.
    pub fn delegate_ordered(self: &Rc<Self>, shard: usize, db: usize, calls: Vec<(usize, Call)>, cfg: CmdConfig, joint: Arc<Joint>) {
        self.ordered.set(true);
        self.queue(shard, Pending { group: Group { db, calls, cfg }, deliver: Deliver::Joint(joint) });
    }

    fn queue(self: &Rc<Self>, shard: usize, pending: Pending) {
        if let Some(q) = self.queued.borrow_mut().get_mut(shard) {
            q.push(pending);
        } else {
            return;
        }
        if !self.flush_spawned.replace(true) {
            tokio::task::spawn_local(flush(self.clone()));
        }
    }
}

/// Sends everything queued so far, one job per shard, and hands out the replies.
async fn flush(hops: Rc<Hops>) {
    hops.flush_spawned.set(false);
    let ordered = hops.ordered.replace(false);
    let queued: Vec<(usize, Vec<Pending>)> = {
        let mut q = hops.queued.borrow_mut();
        q.iter_mut().enumerate().filter(|(_, p)| !p.is_empty()).map(|(shard, p)| (shard, std::mem::take(p))).collect()
    };
    let total_shards = hops.engine.senders.len();
    // A batch whose commands on this thread's shard already ran sends their replies along:
    // their log commands, deferred on this thread (one write per tick), must be in the log
    // before the other thread writes those replies.
    if queued.iter().any(|(_, p)| p.iter().any(|p| matches!(&p.deliver, Deliver::Direct(s) if s.has_local()))) {
        hops.shard.borrow_mut().log.flush_deferred();
    }
    let mut in_flight = Vec::with_capacity(queued.len());
    let mut messages = Vec::new();
    for (shard, pending) in queued {
        let (groups, delivers): (Vec<Group>, Vec<Deliver>) = pending.into_iter().map(|p| (p.group, p.deliver)).unzip();
        let mut replies = Vec::new();
        let mut sinks = Vec::new();
        for d in delivers {
            match d {
                Deliver::Back(tx) => {
                    replies.push(tx);
                    sinks.push(None);
                }
                Deliver::Direct(sink) => sinks.push(Some(Target::Sink(sink))),
                Deliver::Joint(joint) => sinks.push(Some(Target::Joint(joint))),
            }
        }
        // Only groups whose replies come back need an answer (and a wake-up of this thread).
        let (tx, rx) = if replies.is_empty() {
            (None, None)
        } else {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        };
        let server = hops.engine.clone();
        let job: crate::shard::Job = Box::new(move |s| {
            let results = run_groups(s, groups, total_shards);
            let mut back = Vec::with_capacity(results.len());
            for (sink, result) in sinks.into_iter().zip(results) {
                match sink {
                    Some(Target::Sink(sink)) => sink.deliver(result, &server),
                    Some(Target::Joint(joint)) => joint.part_done(result, &server),
                    None => back.push(result),
                }
            }
            if let Some(tx) = tx {
                let _ = tx.send(back);
            }
        });
        if ordered {
            messages.push((shard, ShardMsg::RunOrdered(job)));
        } else {
            let Some(sender) = hops.engine.senders.get(shard) else { continue };
            if sender.send(ShardMsg::Run(job)).await.is_err() {
                continue; // shutting down: dropping `replies` and the sinks tells every connection
            }
        }
        if let Some(rx) = rx {
            in_flight.push((rx, replies));
        }
    }
    if ordered {
        let own = hops.shard_id;
        let local = messages.iter().position(|(s, _)| *s == own).map(|i| messages.swap_remove(i));
        let sent = hops.engine.order.send_all(&hops.engine.senders, messages, local, || hops.shard.borrow().locked).await;
        // Not sent: this shard's job runs here and now, at the flush's place in the order.
        // (Shutting down: the dropped jobs tell every connection.)
        if let Ok(Some(ShardMsg::RunOrdered(job) | ShardMsg::Run(job))) = sent {
            job(&mut hops.shard.borrow_mut());
        }
    }
    for (rx, replies) in in_flight {
        let Ok(results) = rx.await else { continue };
        for (reply, result) in replies.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}
