//! Client-side caching (CLIENT TRACKING): which clients may hold which keys, and the
//! invalidation messages they get when those keys change. Redis 7.0's semantics.
//!
//! The problem. In Redis one thread both serves the read that a client caches and runs the
//! write that makes the cache stale. Here reads and writes run on the shards (one thread
//! each), and a shard does not know which connection sent a command. So the two halves are
//! split along what each side knows:
//! - The connection knows the keys its read commands read (`Spec::key_indexes`, the one place
//!   key positions are declared): it records "client C may cache key K" in the tracking
//!   table ([`remember`]) *before* the read is sent to its shard. A write that lands between
//!   the record and the read only causes an early (harmless) invalidation; recording after
//!   the read could miss a write, which would leave a stale cache for ever.
//! - The shards know which keys a write modified: every modification already reaches
//!   `Db::signal_modified` (WATCH and blocked clients use it; expiry and eviction too). The
//!   keyspace calls an observer installed from here while tracking is on
//!   ([`abacus_keyspace::observe_modifications`]), so with no tracking client a write costs
//!   one relaxed load more, nothing else.
//!
//! The table (Redis's `TrackingTable`): key -> ids of the clients that read it, regardless of
//! the database, as Redis. An invalidation removes the key (it is sent once: the client reads
//! it again to cache it again). Broadcasting clients (BCAST) are not in it: every prefix
//! maps to its clients, and every modified key matching a prefix is sent to them.
//! `tracking-table-max-keys` bounds the table: past it, keys are invalidated (to their
//! clients) until it fits, as Redis's `trackingLimitUsedSlots`, before each batch of commands.
//!
//! Delivery. Every client has an [`Inbox`] in its `ClientMeta` (so any client can be reached
//! by id, which REDIRECT needs): a mutex'd list of encoded messages and a wake-up. A shard (or
//! the connection running FLUSHALL) appends the message; the receiving connection writes
//! what waits before the replies of its next batch, or at once when idle (its socket loop
//! waits on the inbox while it tracks or is subscribed). What is sent, as Redis's
//! `sendTrackingMessage`: to a RESP3 client a push `invalidate [keys]`; with REDIRECT to a
//! RESP2 client in pub/sub mode, a `message` on `__redis__:invalidate`; with REDIRECT to a
//! client that is gone, `tracking-redir-broken` to a RESP3 tracking client; nothing
//! otherwise. FLUSHALL/FLUSHDB send a null instead of the keys to every tracking client.
//! The writer's own invalidations reach it after the write's reply (Redis 7.0 defers them
//! too). NOLOOP: the writing client's id is set around the shard's run of each command
//! ([`set_writer`]), and invalidations for keys a NOLOOP client wrote itself are skipped.
//!
//! Bounds: an inbox holds at most [`INBOX_MAX_MESSAGES`]; a client that does not read its
//! invalidations past that is disconnected (its cache is then void), not buffered for ever.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use bytes::BufMut;
use parking_lot::Mutex;
use tokio::sync::Notify;

use abacus_protocol::{Bytes, BytesMut};

use crate::clients::ClientMeta;
use abacus_engine::pubsub::bulk;

/// Messages an inbox holds before its client is disconnected.
pub const INBOX_MAX_MESSAGES: usize = 1 << 20;

/// The pub/sub channel RESP2 clients receive redirected invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

pub use abacus_engine::shard::{tracking_active as active, set_writer};
use abacus_engine::shard::{current_writer, set_tracking_active};

/// Invalidation messages waiting for one client's connection.
#[derive(Default)]
pub struct Inbox {
    queue: Mutex<Vec<Bytes>>,
    pending: AtomicBool,
    wake: Notify,
}

impl Inbox {
    fn push(&self, meta: &ClientMeta, msg: Bytes) {
        let mut q = self.queue.lock();
        if q.len() >= INBOX_MAX_MESSAGES {
            q.clear();
            drop(q);
            tracing::warn!(client = meta.id, "closing a tracking client that left {INBOX_MAX_MESSAGES} invalidation messages unread");
            meta.kill();
            return;
        }
        let was_empty = q.is_empty();
        q.push(msg);
        self.pending.store(true, Ordering::Relaxed);
        drop(q);
        if was_empty {
            self.wake.notify_one();
        }
    }

    /// Whether messages may be waiting (one relaxed load).
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Waits until a message may have been queued (spurious wake-ups are possible).
    pub async fn ready(&self) {
        self.wake.notified().await;
    }

    /// Moves the waiting messages into `out` (as pushes for a RESP3 connection); returns how
    /// many bytes moved.
    pub fn drain_into(&self, out: &mut BytesMut, resp3: bool) -> usize {
        let msgs = {
            let mut q = self.queue.lock();
            self.pending.store(false, Ordering::Relaxed);
            std::mem::take(&mut *q)
        };
        let mut n = 0;
        for m in msgs {
            let start = out.len();
            out.extend_from_slice(&m);
            if resp3 && m.first() == Some(&b'*') {
                out[start] = b'>';
            }
            n += m.len();
        }
        n
    }
}

/// A client's tracking options (CLIENT TRACKING ON ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mode {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// REDIRECT's client id; 0 = none.
    pub redirect: u64,
    /// BCAST's prefixes, sorted ("" when BCAST was given none).
    pub prefixes: Vec<Bytes>,
}

/// A tracking connection's own view: its mode, and CLIENT CACHING's one-command flag.
#[derive(Debug, Default)]
pub struct ConnTracking {
    pub mode: Mode,
    /// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) was given for the next command.
    pub caching: bool,
}

struct Tracked {
    meta: Arc<ClientMeta>,
    mode: Mode,
    redirect_to: Option<Weak<ClientMeta>>,
    /// The redirect client went away (TRACKINGINFO's `broken_redirect`).
    broken: bool,
}

#[derive(Default)]
struct State {
    clients: HashMap<u64, Tracked>,
    /// Key -> clients that may cache it.
    keys: HashMap<Bytes, Vec<u64>>,
    /// Client ids in `keys`, all keys together (INFO tracking_total_items).
    items: usize,
    /// BCAST prefix -> its clients.
    prefixes: BTreeMap<Bytes, Vec<u64>>,
    /// Consecutive [`limit`] calls that could not bring the table under its bound.
    over_limit_runs: u32,
}

/// The tracking table. Why a static and not a field of the `Server`: it is fed by the
/// keyspace's modification observer, a plain `fn(&[u8])` with no context argument
/// (`abacus_keyspace::set_modified_observer`, called on the shard threads for every modified
/// key while a client tracks), so the table must be reachable without a handle.
static STATE: LazyLock<Mutex<State>> = LazyLock::new(Default::default);

/// The "value" part of a message: an array of one key.
fn one_key(key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(key.len() + 24);
    v.extend_from_slice(b"*1\r\n");
    bulk(&mut v, key);
    v
}

/// Sends one invalidation (`value`: the encoded keys array, or a null) to `t`'s receiver, as
/// Redis's `sendTrackingMessage`.
fn send(t: &mut Tracked, value: &[u8]) {
    let target = if t.mode.redirect != 0 {
        match t.redirect_to.as_ref().and_then(Weak::upgrade).filter(|m| !m.killed.load(Ordering::Relaxed)) {
            Some(m) => m,
            None => {
                t.broken = true;
                if t.meta.resp.load(Ordering::Relaxed) == 3 {
                    let mut m = BytesMut::with_capacity(64);
                    m.put_slice(b"*2\r\n");
                    bulk(&mut m, b"tracking-redir-broken");
                    m.put_slice(format!(":{}\r\n", t.mode.redirect).as_bytes());
                    t.meta.inbox.push(&t.meta, m.freeze());
                }
                return;
            }
        }
    } else {
        t.meta.clone()
    };
    let mut m = BytesMut::with_capacity(value.len() + 48);
    if target.resp.load(Ordering::Relaxed) == 3 {
        m.put_slice(b"*2\r\n");
        bulk(&mut m, b"invalidate");
    } else if t.mode.redirect != 0 && target.is_pubsub() {
        m.put_slice(b"*3\r\n");
        bulk(&mut m, b"message");
        bulk(&mut m, CHANNEL);
    } else {
        // RESP2 without a redirect to a subscriber: nowhere to send it.
        return;
    }
    m.put_slice(value);
    target.inbox.push(&target, m.freeze());
}

/// The keyspace's modification observer: invalidates `key` for its clients.
fn on_modified(key: &[u8]) {
    let writer = current_writer();
    let mut st = STATE.lock();
    invalidate(&mut st, key, writer);
}

fn invalidate(st: &mut State, key: &[u8], writer: u64) {
    let State { clients, keys, items, prefixes, .. } = st;
    let mut value = None;
    if let Some(ids) = keys.remove(key) {
        *items = items.saturating_sub(ids.len());
        for id in ids {
            // Ids of clients that stopped tracking (or switched to BCAST) stay in the table
            // until their keys are invalidated, as in Redis.
            let Some(t) = clients.get_mut(&id) else { continue };
            if t.mode.bcast || (t.mode.noloop && id == writer) {
                continue;
            }
            send(t, value.get_or_insert_with(|| one_key(key)));
        }
    }
    if !prefixes.is_empty() {
        for (p, ids) in prefixes.iter() {
            if !key.starts_with(p) {
                continue;
            }
            for &id in ids {
                let Some(t) = clients.get_mut(&id) else { continue };
                if t.mode.noloop && id == writer {
                    continue;
                }
                send(t, value.get_or_insert_with(|| one_key(key)));
            }
        }
    }
}

/// Whether two prefixes overlap (one starts the other), as Redis's `stringCheckPrefix`.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Redis's `checkPrefixCollisionsOrReply`: the error for prefixes that overlap the client's
/// existing ones or each other.
pub fn prefix_collision(existing: &[Bytes], new: &[Bytes]) -> Option<String> {
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(e)
            ));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(q)
            ));
        }
    }
    None
}

/// Turns tracking on (or changes its options) for `meta`'s client, as Redis's
/// `enableTracking`: BCAST prefixes add to those the client has. Returns the mode in force.
pub fn enable(meta: &Arc<ClientMeta>, mut mode: Mode, redirect_to: Option<&Arc<ClientMeta>>) -> Mode {
    abacus_keyspace::set_modified_observer(on_modified);
    let mut st = STATE.lock();
    let old = st.clients.remove(&meta.id);
    if mode.bcast {
        let mut prefixes = old.as_ref().map(|t| t.mode.prefixes.clone()).unwrap_or_default();
        let new = if mode.prefixes.is_empty() { vec![Bytes::new()] } else { std::mem::take(&mut mode.prefixes) };
        for p in new {
            if !prefixes.contains(&p) {
                let ids = st.prefixes.entry(p.clone()).or_default();
                if !ids.contains(&meta.id) {
                    ids.push(meta.id);
                }
                prefixes.push(p);
            }
        }
        prefixes.sort();
        mode.prefixes = prefixes;
    } else {
        mode.prefixes.clear();
    }
    let t = Tracked { meta: meta.clone(), mode: mode.clone(), redirect_to: redirect_to.map(Arc::downgrade), broken: false };
    st.clients.insert(meta.id, t);
    meta.tracking_redir.store(mode.redirect as i64, Ordering::Relaxed);
    set_tracking_active(true);
    abacus_keyspace::observe_modifications(true);
    mode
}

/// Turns tracking off for client `id` (CLIENT TRACKING OFF, RESET, disconnection), as Redis's
/// `disableTracking`: its prefixes go; its ids in the key table stay until invalidated.
pub fn disable(id: u64) {
    let mut st = STATE.lock();
    let Some(t) = st.clients.remove(&id) else { return };
    t.meta.tracking_redir.store(-1, Ordering::Relaxed);
    for p in &t.mode.prefixes {
        if let Some(ids) = st.prefixes.get_mut(p) {
            ids.retain(|&c| c != id);
            if ids.is_empty() {
                st.prefixes.remove(p);
            }
        }
    }
    if st.clients.is_empty() {
        set_tracking_active(false);
        abacus_keyspace::observe_modifications(false);
    }
}

/// Records that client `id` may cache `keys` (a read command it sends now).
pub fn remember<'a>(id: u64, keys: impl Iterator<Item = &'a [u8]>) {
    let mut st = STATE.lock();
    for k in keys {
        let ids = st.keys.entry(Bytes::copy_from_slice(k)).or_default();
        if !ids.contains(&id) {
            ids.push(id);
            st.items += 1;
        }
    }
}

/// Invalidates keys until the table holds at most `max_keys` (0 = no bound), with an effort
/// growing while it stays over, as Redis's `trackingLimitUsedSlots`.
pub fn limit(max_keys: usize) {
    if max_keys == 0 {
        return;
    }
    let mut st = STATE.lock();
    if st.keys.len() <= max_keys {
        st.over_limit_runs = 0;
        return;
    }
    let mut effort = 100usize.saturating_mul(st.over_limit_runs as usize + 1);
    while effort > 0 {
        effort -= 1;
        // The map's iteration order is its (randomly seeded) hash order: an arbitrary key.
        let Some(key) = st.keys.keys().next().cloned() else { break };
        invalidate(&mut st, &key, 0);
        if st.keys.len() <= max_keys {
            st.over_limit_runs = 0;
            return;
        }
    }
    st.over_limit_runs = st.over_limit_runs.saturating_add(1);
}

/// FLUSHALL / FLUSHDB: a null invalidation to every tracking client, and an empty table.
pub fn on_flush() {
    let mut st = STATE.lock();
    for t in st.clients.values_mut() {
        let null: &[u8] = if t.meta.resp.load(Ordering::Relaxed) == 3 { b"_\r\n" } else { b"$-1\r\n" };
        send(t, null);
    }
    st.keys.clear();
    st.items = 0;
}

/// CLIENT TRACKINGINFO's facts: the mode and whether the redirect is broken.
pub fn info(id: u64) -> Option<(Mode, bool)> {
    let st = STATE.lock();
    st.clients.get(&id).map(|t| (t.mode.clone(), t.broken))
}

/// INFO's figures: tracking clients, keys in the table, (key, client) items, BCAST prefixes.
pub fn counts() -> (usize, usize, usize, usize) {
    let st = STATE.lock();
    (st.clients.len(), st.keys.len(), st.items, st.prefixes.len())
}

/// Whether `spec`'s keys are remembered for a tracking client: a read-only keyed command,
/// as Redis tracks the keys of `CMD_READONLY` commands.
fn is_tracked_read(spec: &crate::command::Spec) -> bool {
    spec.has(crate::command::flags::READONLY) && matches!(spec.handler, crate::command::Handler::Keyed(_))
}

/// Remembers the keys `call` reads (or, for EXEC, the transaction's reads) for a tracking
/// connection, as Redis's `trackingRememberKeys`: not in BCAST mode, with OPTIN only after
/// CLIENT CACHING YES, with OPTOUT unless after CLIENT CACHING NO.
pub fn note_command(conn: &crate::conn::Conn, call: &abacus_engine::exec::Call) {
    let Some(t) = conn.tracking.as_deref() else { return };
    if t.mode.bcast || (t.mode.optin && !t.caching) || (t.mode.optout && t.caching) {
        return;
    }
    let id = conn.client.meta.id;
    if is_tracked_read(call.spec) {
        remember(id, call.spec.key_indexes(&call.args).map(|i| &call.args[i][..]));
    } else if call.spec.has(crate::command::flags::RUNS_QUEUED) {
        if let Some(m) = &conn.multi {
            for q in m.queued.iter().filter(|q| is_tracked_read(q.spec)) {
                remember(id, q.spec.key_indexes(&q.args).map(|i| &q.args[i][..]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlap(b"a", b"ab"));
        assert!(overlap(b"", b"x"));
        assert!(!overlap(b"ab", b"ac"));
        let e = prefix_collision(&[Bytes::from_static(b"user:")], &[Bytes::from_static(b"user:1")]).unwrap();
        assert!(e.contains("overlaps with an existing prefix 'user:'"), "{e}");
        let e = prefix_collision(&[], &[Bytes::from_static(b"a"), Bytes::from_static(b"b"), Bytes::from_static(b"bc")]).unwrap();
        assert!(e.contains("'b' overlaps with another provided prefix 'bc'"), "{e}");
        assert!(prefix_collision(&[Bytes::from_static(b"a")], &[Bytes::from_static(b"b")]).is_none());
    }

    #[test]
    fn invalidations_follow_the_table_bcast_and_noloop() {
        // Keys no other test uses: the table is the process's, and other tests' databases
        // report their modifications to it while this test has clients tracking.
        let (k, p1) = (&b"tracking-test:k"[..], &b"tracking-test-p:1"[..]);
        let clients = crate::clients::Clients::default();
        let reg = || clients.register("127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap(), 10, 0).unwrap();
        let (a, b) = (reg(), reg());
        a.resp.store(3, Ordering::Relaxed);
        b.resp.store(3, Ordering::Relaxed);
        enable(&a, Mode { noloop: true, ..Mode::default() }, None);
        let mode = enable(&b, Mode { bcast: true, prefixes: vec![Bytes::from_static(b"tracking-test-p:")], ..Mode::default() }, None);
        assert_eq!(mode.prefixes, vec![Bytes::from_static(b"tracking-test-p:")]);
        remember(a.id, [k, p1].into_iter());
        let drained = |m: &ClientMeta| {
            let mut out = BytesMut::new();
            m.inbox.drain_into(&mut out, true);
            out
        };
        // Another client's writes: `a` hears of k once (it left the table); `b`, a BCAST
        // client, is not in the key table.
        set_writer(b.id);
        on_modified(k);
        on_modified(k);
        assert_eq!(&drained(&a)[..], &b">2\r\n$10\r\ninvalidate\r\n*1\r\n$15\r\ntracking-test:k\r\n"[..]);
        assert!(drained(&b).is_empty());
        // `a`'s own write: NOLOOP skips it for `a`; `b` gets every key under its prefix.
        set_writer(a.id);
        on_modified(p1);
        assert!(drained(&a).is_empty());
        assert_eq!(&drained(&b)[..], &b">2\r\n$10\r\ninvalidate\r\n*1\r\n$17\r\ntracking-test-p:1\r\n"[..]);
        set_writer(0);
        assert_eq!(info(a.id).map(|(m, broken)| (m.noloop, broken)), Some((true, false)));
        disable(a.id);
        disable(b.id);
        assert!(info(a.id).is_none());
    }

    #[test]
    fn inbox_turns_arrays_into_pushes_for_resp3() {
        let meta = crate::clients::Clients::default().register("127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap(), 10, 0).unwrap();
        meta.inbox.push(&meta, Bytes::from_static(b"*2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"));
        assert!(meta.inbox.has_pending());
        let mut out = BytesMut::new();
        meta.inbox.drain_into(&mut out, true);
        assert_eq!(&out[..], b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
        assert!(!meta.inbox.has_pending());
    }
}
