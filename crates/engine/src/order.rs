//! Order across shards: a connection's commands take effect in the order it sent them, as
//! every other client sees them, whatever shards they run on.
//!
//! Within a shard this is free: one thread runs the shard's work one job at a time. Across
//! shards it is not: a pipelined batch with commands on shards X and Y runs a part on each,
//! and if the parts ran independently, another client could see the batch's later command
//! (on Y) and miss its earlier one (on X), or read Y before and X after the batch.
//!
//! The rule: the parts of every multi-shard operation (a batch spanning shards, the `Lock`
//! messages of a multi-shard command or EXEC, a fan-out's jobs) enter their shards' queues
//! *together*: under
//! one mutex, [`Order::send_all`] puts one message in each shard's queue. Queues are FIFO, so
//! every shard receives the multi-shard operations in the same relative order, and runs
//! them in that order: the operations are serializable, each one atomic towards every other
//! client (a cycle "A before B on X, B before A on Y" would need two queues that received
//! them in opposite orders). A single-shard batch touches one shard and cannot form such a
//! cycle; it needs nothing.
//!
//! One shortcut jumps a queue: a shard's own thread runs a connection's commands in place,
//! without a message. That is only allowed while no ordered part waits in that shard's queue
//! ([`Order::pending`]): otherwise a connection's read could run before a multi-shard batch
//! whose other part it has already seen. Each shard counts its queued ordered parts and
//! `Lock`s not yet granted (a granted lock is seen through `Shard::locked` instead): the
//! sender adds them under the mutex, for all the operation's queues before it sends to any
//! (so no thread can see one part queued while its own counter still reads 0), and the
//! shard subtracts each part once it has run, each lock once it has granted it.
//!
//! The sender's own shard's part may still run in place: [`Order::send_all`] hands it back
//! when nothing ordered waits in that queue (and the shard is not locked), and the caller
//! runs it before its next await, which is the same as running it first in the queue.
//!
//! Cost: a multi-shard batch no longer runs its own-shard part before the others are sent,
//! but right after. The mutex is held for a few channel sends (never across an await: queue
//! capacity is reserved before it is taken). `relaxed-batch-order` turns the ordering of
//! batches off (their parts then run as soon as they arrive); the locks of multi-shard
//! commands and fan-outs are always sent this way.
//!
//! Deadlock: none. Lockers' `Lock` messages also enter all their queues together, so any two
//! lockers are granted their shards in the same order everywhere; a locker waits only for
//! grants, and shard loops never wait for queue capacity.

use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::mpsc;

use crate::shard::ShardMsg;

/// One shard's count of ordered parts in its queue, alone on its cache line (every shard's
/// thread reads its own on each in-place batch; senders write them).
#[repr(align(64))]
#[derive(Default)]
struct Pending(AtomicU32);

pub struct Order {
    /// Held while an operation's parts enter their queues.
    sending: parking_lot::Mutex<()>,
    pending: Vec<Pending>,
}

impl Order {
    pub fn new(shards: usize) -> Order {
        Order { sending: parking_lot::Mutex::new(()), pending: (0..shards).map(|_| Pending::default()).collect() }
    }

    /// Whether ordered parts wait in `shard`'s queue: its thread must not run a connection's
    /// commands in place (they would jump ahead of those parts).
    #[inline]
    pub fn pending(&self, shard: usize) -> bool {
        self.pending.get(shard).is_some_and(|p| p.0.load(Ordering::Acquire) != 0)
    }

    /// Called on `shard`'s thread once one of its ordered parts has run, or a lock has been
    /// granted (the shard is then `locked`).
    pub fn part_done(&self, shard: usize) {
        if let Some(p) = self.pending.get(shard) {
            let before = p.0.fetch_sub(1, Ordering::Release);
            debug_assert!(before > 0, "an ordered part ran that was never counted");
        }
    }

    /// Puts `messages` (at most one per shard) into their shards' queues so that every queue
    /// receives them at the same position relative to every other `send_all`; a
    /// [`ShardMsg::RunOrdered`] counts as an ordered part until it has run.
    ///
    /// `local` is the calling thread's own shard's message: it is returned instead of sent
    /// when it may run in place (nothing ordered waits in that queue and `blocked` says
    /// no), and the caller must then run it before its next await, so that it takes
    /// effect at this point of the order. Err if a shard is gone (shutting down): nothing
    /// was sent.
    pub async fn send_all(
        &self,
        senders: &[mpsc::Sender<ShardMsg>],
        mut messages: Vec<(usize, ShardMsg)>,
        local: Option<(usize, ShardMsg)>,
        blocked: impl FnOnce() -> bool,
    ) -> Result<Option<ShardMsg>, ()> {
        // Capacity first, in ascending shard order, outside the mutex: a full queue makes
        // this wait without holding up anyone else's send.
        messages.sort_unstable_by_key(|(shard, _)| *shard);
        let mut permits = Vec::with_capacity(messages.len());
        for (shard, _) in &messages {
            permits.push(senders.get(*shard).ok_or(())?.reserve().await.map_err(|_| ())?);
        }
        let local_permit = match &local {
            Some((shard, _)) => Some(senders.get(*shard).ok_or(())?.reserve().await.map_err(|_| ())?),
            None => None,
        };
        let _sending = self.sending.lock();
        // Every queue's count before any message is out (see the file comment).
        for (shard, message) in &messages {
            self.count(*shard, message);
        }
        let local = match (local, local_permit) {
            (Some((shard, message)), Some(permit)) if self.pending(shard) || blocked() => {
                self.count(shard, &message);
                permit.send(message);
                None
            }
            (local, _) => Some(local.map(|(_, message)| message)),
        };
        for (permit, (_, message)) in permits.into_iter().zip(messages) {
            permit.send(message);
        }
        Ok(local.flatten())
    }

    /// Counts an ordered part or a lock about to enter `shard`'s queue.
    fn count(&self, shard: usize, message: &ShardMsg) {
        if matches!(message, ShardMsg::RunOrdered(_) | ShardMsg::Lock(_)) {
            self.pending[shard].0.fetch_add(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> ShardMsg {
        ShardMsg::RunOrdered(Box::new(|_| {}))
    }

    #[tokio::test]
    async fn ordered_parts_are_counted_until_done_and_block_in_place_runs() {
        let order = Order::new(2);
        let (tx0, mut rx0) = mpsc::channel(4);
        let (tx1, mut rx1) = mpsc::channel(4);
        let senders = vec![tx0, tx1];
        // Nothing waits on shard 0: its part comes back, to run in place.
        let back = order.send_all(&senders, vec![(1, job())], Some((0, job())), || false).await;
        assert!(matches!(back, Ok(Some(ShardMsg::RunOrdered(_)))));
        assert!(!order.pending(0) && order.pending(1));
        assert!(rx0.try_recv().is_err() && rx1.try_recv().is_ok());
        // Shard 1's part is still queued: shard 1's own part must queue behind it.
        let back = order.send_all(&senders, vec![(0, job())], Some((1, job())), || false).await;
        assert!(matches!(back, Ok(None)));
        assert!(order.pending(0) && order.pending(1));
        assert!(rx1.try_recv().is_ok() && rx0.try_recv().is_ok());
        order.part_done(1);
        assert!(order.pending(1));
        order.part_done(1);
        order.part_done(0);
        assert!(!order.pending(0) && !order.pending(1));
        // A blocked (locked) shard queues its part too; a lock counts until it is granted.
        let (grant, _) = tokio::sync::oneshot::channel();
        let back = order.send_all(&senders, vec![(1, ShardMsg::Lock(grant))], Some((0, job())), || true).await;
        assert!(matches!(back, Ok(None)));
        assert!(order.pending(0) && order.pending(1));
    }

    #[tokio::test]
    async fn a_queued_lock_keeps_the_own_part_from_running_ahead_of_it() {
        // A review found this: a Lock waiting (not yet granted) in shard 0's queue was
        // invisible, and shard 0's own part of a later operation ran in place before it.
        let order = Order::new(2);
        let (tx0, _rx0) = mpsc::channel(4);
        let (tx1, _rx1) = mpsc::channel(4);
        let senders = vec![tx0, tx1];
        let (grant, _) = tokio::sync::oneshot::channel();
        assert!(matches!(order.send_all(&senders, vec![(0, ShardMsg::Lock(grant)), (1, job())], None, || false).await, Ok(None)));
        let back = order.send_all(&senders, vec![(1, job())], Some((0, job())), || false).await;
        assert!(matches!(back, Ok(None)), "must queue behind the lock");
        // Granted: the lock no longer counts (the shard is `locked`, which `blocked` reports).
        order.part_done(0);
        order.part_done(0);
        assert!(!order.pending(0));
    }

    #[tokio::test]
    async fn a_closed_queue_sends_nothing() {
        let order = Order::new(2);
        let (tx0, mut rx0) = mpsc::channel(4);
        let (tx1, rx1) = mpsc::channel(4);
        drop(rx1);
        let senders = vec![tx0, tx1];
        assert!(order.send_all(&senders, vec![(0, job()), (1, job())], None, || false).await.is_err());
        assert!(rx0.try_recv().is_err() && !order.pending(0));
    }
}
