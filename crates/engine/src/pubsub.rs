//! Pub/sub: the subscriptions of every connection, shared by all threads, and the delivery of
//! published messages to the subscribers' connections.
//!
//! Why this shape. A subscriber's connection lives on one worker thread; a publisher may be on
//! any other (or be a shard thread, for keyspace notifications: [`publish`] can be called from
//! anywhere). Redis, with one thread, appends a message to each subscriber's output buffer in
//! the PUBLISH call itself. Here PUBLISH appends it to each subscriber's *queue* (a mutex'd
//! `VecDeque` of already-encoded messages), and wakes the subscriber's connection task only when
//! the queue was empty; that task writes whatever has queued up with one write. So a burst of
//! messages costs one wake-up and one `write(2)` per subscriber, not one per message.
//!
//! The publish path allocates once per message (and once more per matching pattern, whose
//! `pmessage` names the pattern): the message is encoded once, as RESP2, into a `Bytes` shared
//! by every subscriber's queue (a reference count each, no copy). A RESP3 subscriber gets the
//! same bytes with the array header `*` turned into the push header `>` as its connection copies
//! them into its write buffer (the rest of the encoding is the same in both protocols).
//!
//! The registry: channels and shard channels are hash maps from name to subscriber list, split
//! into [`STRIPES`] read-write-locked stripes by the name's hash, so publishers on different
//! threads only share a read lock and (un)subscribes of different channels rarely meet.
//! Patterns are one list of (pattern, subscribers) that a publish scans only when it is not
//! empty (one relaxed atomic load otherwise), as Redis scans its pattern dict.
//!
//! Order: a publisher's messages enter each subscriber's queue in publication order (one
//! PUBLISH finishes all its pushes before the next starts), and queues are FIFO, so every
//! subscriber sees each publisher's messages in order. Messages of different publishers
//! interleave as their PUBLISH calls did.
//!
//! Slow subscribers: each subscriber counts the bytes published to it and not yet written to
//! its socket (queued, or being written). Past `client-output-buffer-limit`'s pubsub hard limit,
//! or past its soft limit for longer than the soft seconds, the client is cut off (logged as
//! Redis logs it, counted in INFO stats `client_output_buffer_limit_disconnections`) instead of
//! holding memory for it. As in Redis the check runs when a message is added.
//!
//! Connections never move to another thread while subscribed (`conn/migrate.rs`): their
//! subscriber record and wake-ups belong to the thread they are on.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::BufMut;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use abacus_keyspace::glob_match;
use abacus_protocol::{Bytes, BytesMut};

pub use crate::config::OutputLimit;

/// What pub/sub needs of a subscribed client. The connections' `ClientMeta` implements it
/// (`clients.rs`), so pub/sub sits below the connections and the keyspace notifications
/// publish without naming them.
pub trait SubscriberClient: Send + Sync {
    /// Bytes published to it and not written yet (CLIENT LIST's `omem`).
    fn set_output_bytes(&self, n: usize);
    /// Its subscription counts (CLIENT LIST's `sub`, `psub`, `ssub`).
    fn set_subscriptions(&self, channels: usize, patterns: usize, shard: usize);
    /// Closes it (past its output limit).
    fn kill(&self);
    /// Its CLIENT LIST line, for the log line that says why it was closed.
    fn describe(&self, now_ms: u64) -> String;
}

/// Stripes of each channel map.
pub const STRIPES: usize = 16;

/// The three name spaces of subscriptions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE: glob patterns over the channels of PUBLISH.
    Pattern,
    /// SSUBSCRIBE / SPUBLISH: shard channels (a name space of their own).
    Shard,
}

impl Kind {
    pub fn subscribe_verb(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    pub fn unsubscribe_verb(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// Clients cut off for exceeding their output buffer limit (INFO stats).
pub static OBUF_LIMIT_DISCONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// What publishers and the subscriber's connection share, under one lock (taken once per
/// message by a publisher, once per write by the connection).
#[derive(Default)]
struct Queue {
    /// Encoded messages (RESP2 form) waiting for the connection to write them.
    msgs: VecDeque<Bytes>,
    /// Bytes published to this subscriber and not yet written to its socket.
    pending: usize,
    /// When the pending bytes first went over the soft limit (ms; 0 = they are under it).
    soft_since_ms: u64,
}

/// One subscribed connection, as publishers see it.
pub struct Subscriber {
    meta: Arc<dyn SubscriberClient>,
    limit: Arc<OutputLimit>,
    queue: Mutex<Queue>,
    /// Cut off for exceeding its output limit: publishers skip it.
    dead: AtomicBool,
    /// Wakes the connection task when its queue stops being empty.
    wake: Notify,
}

impl Subscriber {
    pub fn new(meta: Arc<dyn SubscriberClient>, limit: Arc<OutputLimit>) -> Subscriber {
        Subscriber {
            meta,
            limit,
            queue: Mutex::new(Queue::default()),
            dead: AtomicBool::new(false),
            wake: Notify::new(),
        }
    }

    /// Queues one message; false if this subscriber no longer receives (cut off).
    fn deliver(&self, msg: &Bytes) -> bool {
        if self.dead.load(Ordering::Relaxed) {
            return false;
        }
        let mut q = self.queue.lock();
        q.pending += msg.len();
        self.meta.set_output_bytes(q.pending);
        if self.over_limit(&mut q) {
            let pending = q.pending;
            drop(q);
            self.cut_off(pending);
            // Counted as received, as Redis counts a client it schedules to close.
            return true;
        }
        let was_empty = q.msgs.is_empty();
        q.msgs.push_back(msg.clone());
        drop(q);
        if was_empty {
            self.wake.notify_one();
        }
        true
    }

    /// Redis's checkClientOutputBufferLimits for the pubsub class.
    fn over_limit(&self, q: &mut Queue) -> bool {
        let (hard, soft, soft_secs) = self.limit.get();
        let pending = q.pending as u64;
        if hard > 0 && pending >= hard {
            return true;
        }
        if soft > 0 && pending >= soft {
            let now = crate::clock::now_ms().max(1);
            if q.soft_since_ms == 0 {
                q.soft_since_ms = now;
                return false;
            }
            return now.saturating_sub(q.soft_since_ms) > soft_secs.saturating_mul(1000);
        }
        q.soft_since_ms = 0;
        false
    }

    fn cut_off(&self, pending: usize) {
        if self.dead.swap(true, Ordering::AcqRel) {
            return;
        }
        // The memory goes now; the connection closes as soon as its task sees the kill.
        let dropped = std::mem::take(&mut self.queue.lock().msgs);
        drop(dropped);
        OBUF_LIMIT_DISCONNECTIONS.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "Client {} scheduled to be closed ASAP for overcoming of output buffer limits ({pending} bytes pending).",
            self.meta.describe(crate::clock::now_ms())
        );
        self.meta.kill();
    }

    /// Waits until messages may have been queued (spurious wake-ups are possible).
    pub async fn ready(&self) {
        self.wake.notified().await;
    }

    /// Moves queued messages into `taken`, up to about `max` bytes; returns how many bytes.
    /// The lock is held only to move them (not to copy them, nor to drop the references).
    fn take(&self, taken: &mut Vec<Bytes>, max: usize) -> usize {
        let mut q = self.queue.lock();
        let mut n = 0;
        while n < max {
            let Some(m) = q.msgs.pop_front() else { break };
            n += m.len();
            taken.push(m);
        }
        n
    }

    /// `n` bytes of drained messages reached the socket.
    pub fn written(&self, n: usize) {
        if n > 0 {
            let mut q = self.queue.lock();
            q.pending = q.pending.saturating_sub(n);
            self.meta.set_output_bytes(q.pending);
        }
    }

    /// Bytes published to this subscriber and not written yet.
    pub fn pending(&self) -> usize {
        self.queue.lock().pending
    }
}

type SubList = Vec<Arc<Subscriber>>;
type Map = HashMap<Bytes, SubList, foldhash::fast::FixedState>;

/// Channels (or shard channels): name -> subscribers, in stripes.
struct Channels {
    stripes: [RwLock<Map>; STRIPES],
    /// Channels with at least one subscriber.
    count: AtomicUsize,
}

impl Channels {
    fn new() -> Channels {
        Channels { stripes: std::array::from_fn(|_| RwLock::new(Map::default())), count: AtomicUsize::new(0) }
    }

    fn stripe(&self, name: &[u8]) -> &RwLock<Map> {
        let h = foldhash::fast::FixedState::default().hash_one(name);
        &self.stripes[(h as usize) % STRIPES]
    }

    fn add(&self, name: &Bytes, s: &Arc<Subscriber>) {
        let mut m = self.stripe(name).write();
        let list = m.entry(name.clone()).or_insert_with(|| {
            self.count.fetch_add(1, Ordering::Relaxed);
            Vec::new()
        });
        list.push(s.clone());
    }

    fn remove(&self, name: &[u8], s: &Arc<Subscriber>) {
        let mut m = self.stripe(name).write();
        if let Some(list) = m.get_mut(name) {
            if let Some(i) = list.iter().position(|x| Arc::ptr_eq(x, s)) {
                list.swap_remove(i);
            }
            if list.is_empty() {
                m.remove(name);
                self.count.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Delivers to the channel's subscribers; the message is encoded only if there is one.
    fn deliver(&self, name: &[u8], encode: impl FnOnce() -> Bytes) -> usize {
        let m = self.stripe(name).read();
        let Some(list) = m.get(name) else { return 0 };
        let msg = encode();
        list.iter().filter(|s| s.deliver(&msg)).count()
    }

    fn numsub(&self, name: &[u8]) -> usize {
        self.stripe(name).read().get(name).map_or(0, |l| l.len())
    }

    fn names(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let mut out = Vec::new();
        for stripe in &self.stripes {
            let m = stripe.read();
            out.extend(m.keys().filter(|k| pattern.is_none_or(|p| glob_match(p, k, false))).cloned());
        }
        out
    }
}

/// Patterns and their subscribers, in the order they were first subscribed.
struct Patterns {
    list: RwLock<Vec<(Bytes, SubList)>>,
    count: AtomicUsize,
}

impl Patterns {
    fn add(&self, pattern: &Bytes, s: &Arc<Subscriber>) {
        let mut list = self.list.write();
        match list.iter_mut().find(|(p, _)| p == pattern) {
            Some((_, subs)) => subs.push(s.clone()),
            None => list.push((pattern.clone(), vec![s.clone()])),
        }
        self.count.store(list.len(), Ordering::Relaxed);
    }

    fn remove(&self, pattern: &[u8], s: &Arc<Subscriber>) {
        let mut list = self.list.write();
        if let Some(at) = list.iter().position(|(p, _)| p[..] == *pattern) {
            let subs = &mut list[at].1;
            if let Some(i) = subs.iter().position(|x| Arc::ptr_eq(x, s)) {
                subs.swap_remove(i);
            }
            if subs.is_empty() {
                list.remove(at);
            }
        }
        self.count.store(list.len(), Ordering::Relaxed);
    }
}

/// Every subscription of the server.
pub struct Registry {
    channels: Channels,
    shard: Channels,
    patterns: Patterns,
}

/// The process's registry (one server per process).
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry { channels: Channels::new(), shard: Channels::new(), patterns: Patterns { list: RwLock::new(Vec::new()), count: AtomicUsize::new(0) } })
}

/// PUBLISH from anywhere (a connection, a shard thread): delivers `message` to the subscribers
/// of `channel` and of every pattern matching it; returns how many received it.
pub fn publish(channel: &[u8], message: &[u8]) -> usize {
    registry().publish(channel, message)
}

/// SPUBLISH: to the subscribers of shard channel `channel`.
pub fn spublish(channel: &[u8], message: &[u8]) -> usize {
    registry().shard.deliver(channel, || encode_message(b"smessage", None, channel, message))
}

impl Registry {
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> usize {
        let mut n = self.channels.deliver(channel, || encode_message(b"message", None, channel, message));
        if self.patterns.count.load(Ordering::Relaxed) > 0 {
            let list = self.patterns.list.read();
            for (pattern, subs) in list.iter() {
                if glob_match(pattern, channel, false) {
                    let msg = encode_message(b"pmessage", Some(pattern), channel, message);
                    n += subs.iter().filter(|s| s.deliver(&msg)).count();
                }
            }
        }
        n
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS.
    pub fn channel_names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        match kind {
            Kind::Shard => self.shard.names(pattern),
            _ => self.channels.names(pattern),
        }
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB of one channel.
    pub fn numsub(&self, kind: Kind, channel: &[u8]) -> usize {
        match kind {
            Kind::Shard => self.shard.numsub(channel),
            _ => self.channels.numsub(channel),
        }
    }

    /// INFO / PUBSUB NUMPAT: channels, distinct patterns and shard channels with subscribers.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.channels.count.load(Ordering::Relaxed), self.patterns.count.load(Ordering::Relaxed), self.shard.count.load(Ordering::Relaxed))
    }

    fn add(&self, kind: Kind, name: &Bytes, s: &Arc<Subscriber>) {
        match kind {
            Kind::Channel => self.channels.add(name, s),
            Kind::Pattern => self.patterns.add(name, s),
            Kind::Shard => self.shard.add(name, s),
        }
    }

    fn remove(&self, kind: Kind, name: &[u8], s: &Arc<Subscriber>) {
        match kind {
            Kind::Channel => self.channels.remove(name, s),
            Kind::Pattern => self.patterns.remove(name, s),
            Kind::Shard => self.shard.remove(name, s),
        }
    }
}

/// A message as Redis sends it (RESP2 framing): `message`/`smessage` channel payload, or
/// `pmessage` pattern channel payload.
pub fn encode_message(kind: &[u8], pattern: Option<&[u8]>, channel: &[u8], payload: &[u8]) -> Bytes {
    let parts = 1 + usize::from(pattern.is_some()) + 2;
    let size = 4 + kind.len() + pattern.map_or(0, |p| p.len()) + channel.len() + payload.len() + parts * 16;
    let mut out = BytesMut::with_capacity(size);
    out.put_slice(if pattern.is_some() { b"*4\r\n" } else { b"*3\r\n" });
    bulk(&mut out, kind);
    if let Some(p) = pattern {
        bulk(&mut out, p);
    }
    bulk(&mut out, channel);
    bulk(&mut out, payload);
    out.freeze()
}

/// One RESP bulk string (also CLIENT TRACKING's invalidation messages, `tracking.rs`).
pub fn bulk(out: &mut impl BufMut, b: &[u8]) {
    let mut n = itoa::Buffer::new();
    out.put_u8(b'$');
    out.put_slice(n.format(b.len()).as_bytes());
    out.put_slice(b"\r\n");
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// A connection's subscriptions. Dropping it leaves every one (connection closed, RESET, or
/// the last one left).
pub struct Subscriptions {
    pub sub: Arc<Subscriber>,
    /// Messages taken from the queue on their way to the output (kept for its capacity).
    taken: Vec<Bytes>,
    channels: HashSet<Bytes, foldhash::fast::FixedState>,
    /// In subscription order, as Redis's list (PUNSUBSCRIBE without arguments follows it).
    patterns: Vec<Bytes>,
    shard: HashSet<Bytes, foldhash::fast::FixedState>,
}

impl Subscriptions {
    pub fn new(meta: Arc<dyn SubscriberClient>, limit: Arc<OutputLimit>) -> Subscriptions {
        Subscriptions { sub: Arc::new(Subscriber::new(meta, limit)), taken: Vec::new(), channels: HashSet::default(), patterns: Vec::new(), shard: HashSet::default() }
    }

    /// Moves queued messages into `out` (RESP3 as pushes), up to about `max` bytes; returns
    /// how many bytes moved. Give them back with [`Subscriber::written`] once written.
    pub fn drain_into(&mut self, out: &mut BytesMut, resp3: bool, max: usize) -> usize {
        let n = self.sub.take(&mut self.taken, max);
        out.reserve(n);
        for m in self.taken.drain(..) {
            let start = out.len();
            out.extend_from_slice(&m);
            if resp3 {
                out[start] = b'>';
            }
        }
        n
    }

    /// Subscribes (a no-op if already subscribed).
    pub fn subscribe(&mut self, kind: Kind, name: &[u8]) {
        let name = Bytes::copy_from_slice(name);
        let new = match kind {
            Kind::Channel => self.channels.insert(name.clone()),
            Kind::Shard => self.shard.insert(name.clone()),
            Kind::Pattern => {
                let new = !self.patterns.contains(&name);
                if new {
                    self.patterns.push(name.clone());
                }
                new
            }
        };
        if new {
            registry().add(kind, &name, &self.sub);
            self.publish_counts();
        }
    }

    /// Unsubscribes (a no-op if not subscribed).
    pub fn unsubscribe(&mut self, kind: Kind, name: &[u8]) {
        let was = match kind {
            Kind::Channel => self.channels.remove(name),
            Kind::Shard => self.shard.remove(name),
            Kind::Pattern => match self.patterns.iter().position(|p| p[..] == *name) {
                Some(i) => {
                    self.patterns.remove(i);
                    true
                }
                None => false,
            },
        };
        if was {
            registry().remove(kind, name, &self.sub);
            self.publish_counts();
        }
    }

    /// The names subscribed to, for an unsubscribe of them all.
    pub fn names(&self, kind: Kind) -> Vec<Bytes> {
        match kind {
            Kind::Channel => self.channels.iter().cloned().collect(),
            Kind::Pattern => self.patterns.clone(),
            Kind::Shard => self.shard.iter().cloned().collect(),
        }
    }

    /// The count Redis's confirmations show: channels and patterns together for those two
    /// kinds, shard channels alone for theirs.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    pub fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }

    fn publish_counts(&self) {
        self.sub.meta.set_subscriptions(self.channels.len(), self.patterns.len(), self.shard.len());
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        let r = registry();
        for c in self.channels.drain() {
            r.remove(Kind::Channel, &c, &self.sub);
        }
        for p in std::mem::take(&mut self.patterns) {
            r.remove(Kind::Pattern, &p, &self.sub);
        }
        for c in self.shard.drain() {
            r.remove(Kind::Shard, &c, &self.sub);
        }
        self.publish_counts();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subscribed client as the connection layer's would be, its counters kept.
    #[derive(Default)]
    struct TestClient {
        omem: AtomicUsize,
        killed: AtomicBool,
    }

    impl SubscriberClient for TestClient {
        fn set_output_bytes(&self, n: usize) {
            self.omem.store(n, Ordering::Relaxed);
        }
        fn set_subscriptions(&self, _: usize, _: usize, _: usize) {}
        fn kill(&self) {
            self.killed.store(true, Ordering::Release);
        }
        fn describe(&self, _: u64) -> String {
            "id=1 addr=127.0.0.1:1".into()
        }
    }

    fn client(limit: &Arc<OutputLimit>) -> Subscriptions {
        Subscriptions::new(Arc::new(TestClient::default()), limit.clone())
    }

    fn drained(s: &mut Subscriptions, resp3: bool) -> Vec<u8> {
        let mut out = BytesMut::new();
        let n = s.drain_into(&mut out, resp3, usize::MAX);
        s.sub.written(n);
        out.to_vec()
    }

    // The registry is the process's: each test uses channel names of its own.
    #[test]
    fn messages_reach_channel_and_pattern_subscribers_in_order() {
        let limit = Arc::new(OutputLimit::default());
        let mut a = client(&limit);
        let mut b = client(&limit);
        a.subscribe(Kind::Channel, b"t1.news");
        a.subscribe(Kind::Pattern, b"t1.*");
        b.subscribe(Kind::Pattern, b"t1.n?ws");
        assert_eq!((a.count(Kind::Channel), a.count(Kind::Pattern), a.count(Kind::Shard)), (2, 2, 0));
        assert_eq!(publish(b"t1.news", b"hi"), 3);
        assert_eq!(publish(b"t1.other", b"x"), 1);
        assert_eq!(publish(b"t1-none", b"x"), 0);
        assert_eq!(
            drained(&mut a, false),
            b"*3\r\n$7\r\nmessage\r\n$7\r\nt1.news\r\n$2\r\nhi\r\n*4\r\n$8\r\npmessage\r\n$4\r\nt1.*\r\n$7\r\nt1.news\r\n$2\r\nhi\r\n*4\r\n$8\r\npmessage\r\n$4\r\nt1.*\r\n$8\r\nt1.other\r\n$1\r\nx\r\n".to_vec()
        );
        assert_eq!(drained(&mut b, true), b">4\r\n$8\r\npmessage\r\n$7\r\nt1.n?ws\r\n$7\r\nt1.news\r\n$2\r\nhi\r\n".to_vec());
        assert_eq!(registry().numsub(Kind::Channel, b"t1.news"), 1);
        drop(a);
        assert_eq!(registry().numsub(Kind::Channel, b"t1.news"), 0);
        assert_eq!(publish(b"t1.news", b"hi"), 1);
        b.unsubscribe(Kind::Pattern, b"t1.n?ws");
        assert_eq!(publish(b"t1.news", b"hi"), 0);
        assert_eq!(b.total(), 0);
    }

    #[test]
    fn publishers_on_many_threads_keep_their_order_for_every_subscriber() {
        let limit = Arc::new(OutputLimit::default());
        let mut subs: Vec<Subscriptions> = (0..3).map(|_| client(&limit)).collect();
        for s in &mut subs {
            s.subscribe(Kind::Channel, b"t5.c");
        }
        let threads: Vec<_> = (0..4)
            .map(|p| {
                std::thread::spawn(move || {
                    for k in 0..1000 {
                        assert_eq!(publish(b"t5.c", format!("{p}:{k}").as_bytes()), 3);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for s in &mut subs {
            let out = drained(s, false);
            let tokens: Vec<&[u8]> = out.split(|&b| b == b'\n').map(|t| t.strip_suffix(b"\r").unwrap_or(t)).collect();
            let mut next = [0u32; 4];
            let payloads: Vec<&[u8]> = tokens.iter().skip(6).step_by(7).copied().collect();
            assert_eq!(payloads.len(), 4000);
            for m in payloads {
                let m = std::str::from_utf8(m).unwrap();
                let (p, k) = m.split_once(':').unwrap();
                let (p, k): (usize, u32) = (p.parse().unwrap(), k.parse().unwrap());
                assert_eq!(k, next[p], "publisher {p} out of order");
                next[p] += 1;
            }
        }
    }

    #[test]
    fn shard_channels_are_a_name_space_of_their_own() {
        let limit = Arc::new(OutputLimit::default());
        let mut a = client(&limit);
        a.subscribe(Kind::Shard, b"t2.s");
        assert_eq!(publish(b"t2.s", b"m"), 0);
        assert_eq!(spublish(b"t2.s", b"m"), 1);
        assert_eq!(drained(&mut a, false), b"*3\r\n$8\r\nsmessage\r\n$4\r\nt2.s\r\n$1\r\nm\r\n".to_vec());
        assert!(registry().channel_names(Kind::Shard, Some(b"t2.*")).contains(&Bytes::from_static(b"t2.s")));
        assert!(registry().channel_names(Kind::Channel, Some(b"t2.*")).is_empty());
    }

    #[test]
    fn a_subscriber_past_its_hard_limit_is_cut_off() {
        let limit = Arc::new(OutputLimit::default());
        limit.set(1000, 0, 0);
        let mut a = client(&limit);
        a.subscribe(Kind::Channel, b"t3.c");
        let payload = [b'x'; 100];
        let mut delivered = 0;
        for _ in 0..20 {
            delivered += publish(b"t3.c", &payload);
        }
        assert!(a.sub.dead.load(Ordering::Acquire));
        // Once cut off it receives nothing more.
        assert!(delivered < 20);
        assert_eq!(publish(b"t3.c", &payload), 0);
        assert!(a.sub.queue.lock().msgs.is_empty());
    }

    #[test]
    fn written_messages_do_not_count_against_the_limit() {
        let limit = Arc::new(OutputLimit::default());
        limit.set(1000, 0, 0);
        let mut a = client(&limit);
        a.subscribe(Kind::Channel, b"t4.c");
        for _ in 0..100 {
            assert_eq!(publish(b"t4.c", &[b'x'; 100]), 1);
            drained(&mut a, false);
        }
        assert!(!a.sub.dead.load(Ordering::Acquire));
        assert_eq!(a.sub.pending(), 0);
    }
}
