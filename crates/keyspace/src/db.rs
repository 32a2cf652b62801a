//! One numbered database of a shard: the key -> entry map, its expiry index and WATCH hooks.
//!
//! Design:
//! - The map is an `abacus_table::Table`: a segmented (extendible-hashing) table that grows
//!   one small segment at a time, so no command ever waits for a whole-table rehash, with
//!   short keys stored inline in the slot. Its SCAN cursor is a position in hash space, which
//!   keeps Redis's guarantee (every key present for a whole iteration is returned) across
//!   growth; RANDOMKEY and active expiry use its random-entry sampling.
//! - Expiry: each entry carries its absolute expiry time in milliseconds (0 = none), and the
//!   keys that have one are also in `volatile`, a second table sampled by active expiry the
//!   way Redis samples its `expires` dict. Lookups expire lazily.
//! - WATCH: a client watching a key registers a shared flag here; every modification of the
//!   key (reported by the server through [`Db::signal_modified`], plus expiry and flushes done
//!   here) raises the flags. The check costs one `is_empty` when nobody watches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use abacus_table::Table;

use crate::glob::glob_match;
use crate::value::Value;
use crate::Key;

/// Raised when a watched key is modified; owned jointly by the client and the databases.
pub type WatchFlag = Arc<AtomicBool>;

/// A key's value with its metadata. `Default` (an empty string, no allocation) is what a free
/// table slot holds.
#[derive(Clone, Debug, Default)]
pub struct Entry {
    pub value: Value,
    /// Absolute expiry time in Unix milliseconds; 0 means no expiry.
    pub expire_at_ms: u64,
    /// Last access time in Unix seconds (OBJECT IDLETIME; LRU eviction later).
    pub accessed_s: u32,
    /// Modified in place (APPEND, SETRANGE, SETBIT): Redis reports such strings as "raw"
    /// whatever their bytes.
    pub raw_encoding: bool,
}

impl Entry {
    pub fn new(value: Value) -> Entry {
        Entry { value, expire_at_ms: 0, accessed_s: 0, raw_encoding: false }
    }

    /// The encoding OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        if self.raw_encoding {
            "raw"
        } else {
            self.value.encoding()
        }
    }

    fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms != 0 && self.expire_at_ms <= now_ms
    }
}

/// Per-entry bookkeeping bytes counted by [`Db::approx_bytes`] beyond the table's own
/// memory: none today (the table accounts its slots and out-of-line keys exactly).
/// foldhash for the small WATCH map.
type Hasher = foldhash::fast::RandomState;

/// One database.
#[derive(Default)]
pub struct Db {
    map: Table<Entry>,
    /// Keys that have an expiry (the value is unused).
    volatile: Table<()>,
    watched: HashMap<Key, Vec<WatchFlag>, Hasher>,
    /// Keys removed by expiry (lazy or active) since the database was created.
    pub expired_keys_total: u64,
    /// Lookups through [`Db::get`] that found / did not find their key (INFO keyspace_hits).
    pub hits_total: u64,
    pub misses_total: u64,
    /// Keys removed to stay under `maxmemory`.
    pub evicted_keys_total: u64,
}

/// Which keys `maxmemory` may evict (Redis's policy names). LFU policies are not offered yet:
/// entries keep an access time but no frequency counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionPolicy {
    NoEviction,
    AllKeysLru,
    AllKeysRandom,
    VolatileLru,
    VolatileRandom,
    VolatileTtl,
}

impl EvictionPolicy {
    pub const NAMES: &'static [&'static str] =
        &["noeviction", "allkeys-lru", "allkeys-random", "volatile-lru", "volatile-random", "volatile-ttl"];

    pub fn from_name(name: &str) -> Option<EvictionPolicy> {
        use EvictionPolicy::*;
        Some(match name {
            "noeviction" => NoEviction,
            "allkeys-lru" => AllKeysLru,
            "allkeys-random" => AllKeysRandom,
            "volatile-lru" => VolatileLru,
            "volatile-random" => VolatileRandom,
            "volatile-ttl" => VolatileTtl,
            _ => return None,
        })
    }

    fn volatile_only(self) -> bool {
        matches!(self, EvictionPolicy::VolatileLru | EvictionPolicy::VolatileRandom | EvictionPolicy::VolatileTtl)
    }
}

/// Fixed bytes an entry costs beyond its key and value heap bytes (slot, control byte, load
/// factor slack), for the estimate of what an eviction frees.
const ENTRY_SLOT_BYTES: usize = 96;

/// How a lookup treats the entry it finds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Touch {
    /// Count a hit or miss and update the access time (reads).
    Read,
    /// Update the access time only (writes).
    Write,
    /// Neither (OBJECT, TYPE).
    None,
}

impl Db {
    pub fn new() -> Db {
        Db::default()
    }

    /// Number of keys, including keys that have expired but were not reclaimed yet (as Redis's
    /// DBSIZE does).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with an expiry.
    pub fn volatile_len(&self) -> usize {
        self.volatile.len()
    }

    /// Hashes `key` for this database's table and prefetches its slot, so that a batch of
    /// commands can start all its memory loads before executing the first one.
    pub fn prefetch(&self, key: &[u8]) {
        self.map.prefetch(self.map.hash_key(key));
    }

    /// Removes `key` if it has expired. Returns true if it was removed.
    fn expire_if_needed(&mut self, key: &[u8], now_ms: u64) -> bool {
        let expired = self.map.get(key).is_some_and(|e| e.is_expired(now_ms));
        if expired {
            self.map.remove(key);
            self.volatile.remove(key);
            self.expired_keys_total += 1;
            self.signal_modified(key);
        }
        expired
    }

    /// One hash and one probe for a missing key; a live key is probed a second time with the
    /// same hash (returning the first probe's borrow conditionally is not accepted by the
    /// borrow checker); an expired key is reclaimed on the way.
    fn lookup(&mut self, key: &[u8], now_ms: u64, touch: Touch) -> Option<&mut Entry> {
        let hash = self.map.hash_key(key);
        let (absent, expired) = match self.map.get_mut_hashed(hash, key) {
            None => (true, false),
            Some(e) => (false, e.is_expired(now_ms)),
        };
        if absent || expired {
            // Absent or expired: reclaim if expired (a second lookup, only then), count a miss.
            if expired {
                self.expire_if_needed(key, now_ms);
            }
            if touch == Touch::Read {
                self.misses_total += 1;
            }
            return None;
        }
        if touch == Touch::Read {
            self.hits_total += 1;
        }
        let e = self.map.get_mut_hashed(hash, key)?;
        if touch != Touch::None {
            e.accessed_s = (now_ms / 1000) as u32;
        }
        Some(e)
    }

    /// Looks `key` up for reading; expired keys are removed and reported absent.
    pub fn get(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.lookup(key, now_ms, Touch::Read).map(|e| &*e)
    }

    /// Looks `key` up for modification; expired keys are removed and reported absent.
    /// Updates the access time.
    pub fn get_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.lookup(key, now_ms, Touch::Write)
    }

    /// Looks `key` up for a read that may re-encode the value in place (a string command
    /// reading a decoded sketch, an HLL command decoding a string): counts hits and misses
    /// like [`Db::get`] and updates the access time.
    pub fn get_read_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.lookup(key, now_ms, Touch::Read)
    }

    /// Looks `key` up without touching its access time (OBJECT IDLETIME, TYPE in SCAN).
    pub fn peek(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.lookup(key, now_ms, Touch::None).map(|e| &*e)
    }

    /// Looks a live `key` up through a shared reference, so that several values can be
    /// borrowed at once (set algebra reads all its operands together). An expired entry is
    /// reported absent but not reclaimed, and nothing is counted: callers look each key up
    /// with [`Db::get`] first for that.
    pub fn get_shared(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.map.get(key).filter(|e| !e.is_expired(now_ms))
    }

    pub fn contains(&mut self, key: &[u8], now_ms: u64) -> bool {
        self.peek(key, now_ms).is_some()
    }

    /// Stores `value` under `key` with the given absolute expiry (0 = none), replacing any
    /// previous entry and its expiry, as SET does.
    pub fn set(&mut self, key: &[u8], value: Value, expire_at_ms: u64, now_ms: u64) {
        let entry = Entry { value, expire_at_ms, accessed_s: (now_ms / 1000) as u32, raw_encoding: false };
        self.insert_entry(key, entry);
    }

    /// Inserts a whole entry (value and expiry), replacing any previous one. One hash lookup
    /// (plus the expiry index only when the key has or had an expiry).
    pub fn insert_entry(&mut self, key: &[u8], entry: Entry) {
        let volatile = entry.expire_at_ms != 0;
        let was_volatile = self.map.insert(key, entry).is_some_and(|old| old.expire_at_ms != 0);
        if volatile && !was_volatile {
            self.volatile.insert(key, ());
        } else if !volatile && was_volatile {
            self.volatile.remove(key);
        }
    }

    /// Removes `key`, returning its entry (expired or not).
    pub fn remove_entry(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.map.remove(key)?;
        if e.expire_at_ms != 0 {
            self.volatile.remove(key);
        }
        Some(e)
    }

    /// Removes `key` if it exists and has not expired. Returns whether a live key was removed.
    pub fn remove(&mut self, key: &[u8], now_ms: u64) -> bool {
        match self.remove_entry(key) {
            Some(e) if e.is_expired(now_ms) => {
                self.expired_keys_total += 1;
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Sets the absolute expiry of an existing key (0 removes it). Returns false if the key
    /// does not exist.
    pub fn set_expire(&mut self, key: &[u8], expire_at_ms: u64) -> bool {
        let Some(e) = self.map.get_mut(key) else { return false };
        let was_volatile = e.expire_at_ms != 0;
        e.expire_at_ms = expire_at_ms;
        if expire_at_ms == 0 && was_volatile {
            self.volatile.remove(key);
        } else if expire_at_ms != 0 && !was_volatile {
            self.volatile.insert(key, ());
        }
        true
    }

    /// Removes every key; returns the old contents so the caller can drop them elsewhere
    /// (FLUSHDB ASYNC drops them on a background thread).
    pub fn take_all(&mut self) -> Db {
        self.signal_all();
        Db { map: self.map.take(), volatile: self.volatile.take(), ..Db::default() }
    }

    /// Swaps the contents of two databases, keeping each database's watchers in place (SWAPDB:
    /// clients watching db 0 keep watching db 0, which now holds the other data).
    pub fn swap_contents(&mut self, other: &mut Db) {
        self.signal_all();
        other.signal_all();
        std::mem::swap(&mut self.map, &mut other.map);
        std::mem::swap(&mut self.volatile, &mut other.volatile);
    }

    /// Samples up to `samples` keys with an expiry and removes those that have expired.
    /// Returns (sampled, expired). Redis's active expiry repeats while over a quarter of a
    /// sample expired; the caller drives that loop and bounds its time.
    pub fn expire_sample(&mut self, samples: usize, now_ms: u64) -> (usize, usize) {
        let mut rng = rand::thread_rng();
        let n = samples.min(self.volatile.len());
        let mut expired = 0;
        for _ in 0..n {
            let Some(key) = self.volatile.random_entry(&mut rng).map(|(k, _)| k.to_vec()) else { break };
            if self.expire_if_needed(&key, now_ms) {
                expired += 1;
            }
        }
        (n, expired)
    }

    /// A random live key, or None if the database is empty. Expired keys met while sampling
    /// are reclaimed; the number of tries is bounded so a database of only expired keys
    /// cannot loop forever (Redis bounds this too).
    pub fn random_key(&mut self, now_ms: u64) -> Option<Key> {
        let mut rng = rand::thread_rng();
        let mut last = None;
        for _ in 0..100 {
            let (k, e) = self.map.random_entry(&mut rng)?;
            let key: Key = k.into();
            if !e.is_expired(now_ms) {
                return Some(key);
            }
            self.expire_if_needed(&key, now_ms);
            last = Some(key);
        }
        // Only expired keys seen: return one anyway, as Redis does after its bound.
        last
    }

    /// Visits about `count` entries from the hash-space position `cursor`; returns the next
    /// cursor (0 when the iteration is complete) and how many entries were visited. Expired
    /// entries are skipped, not reported.
    pub fn scan(&self, cursor: u64, count: usize, now_ms: u64, mut visit: impl FnMut(&[u8], &Entry)) -> (u64, usize) {
        let mut visited = 0;
        let next = self.map.scan(cursor, count.max(1), |k, e| {
            visited += 1;
            if !e.is_expired(now_ms) {
                visit(k, e);
            }
        });
        (next, visited)
    }

    /// Evicts one key chosen by `policy` among `samples` random candidates (Redis's
    /// approximated LRU: the least recently used of a sample; volatile policies sample keys
    /// with an expiry; volatile-ttl takes the nearest expiry). Returns an estimate of the bytes
    /// freed, or None if there is no candidate.
    pub fn evict_one(&mut self, policy: EvictionPolicy, samples: usize) -> Option<usize> {
        let mut rng = rand::thread_rng();
        let mut best: Option<(Key, u64)> = None;
        for _ in 0..samples.max(1) {
            let key: Key = if policy.volatile_only() {
                self.volatile.random_entry(&mut rng)?.0.into()
            } else {
                self.map.random_entry(&mut rng)?.0.into()
            };
            let Some(e) = self.map.get(&key) else { continue };
            let score = match policy {
                EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => e.accessed_s as u64,
                EvictionPolicy::VolatileTtl => e.expire_at_ms,
                _ => 0,
            };
            if best.as_ref().map_or(true, |(_, s)| score < *s) {
                best = Some((key, score));
            }
            if matches!(policy, EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom) {
                break;
            }
        }
        let (key, _) = best?;
        let e = self.remove_entry(&key)?;
        self.evicted_keys_total += 1;
        self.signal_modified(&key);
        Some(key.len() + e.value.heap_bytes() + ENTRY_SLOT_BYTES)
    }

    /// Keys matching the glob `pattern` that have not expired.
    pub fn keys_matching(&self, pattern: &[u8], now_ms: u64) -> Vec<Key> {
        let all = pattern == b"*";
        self.map
            .iter()
            .filter(|(k, e)| !e.is_expired(now_ms) && (all || glob_match(pattern, k, false)))
            .map(|(k, _)| k.into())
            .collect()
    }

    /// Bytes used by this database: the tables' exact memory plus the values' heap bytes.
    pub fn approx_bytes(&self) -> usize {
        self.map.memory_bytes() + self.volatile.memory_bytes() + self.map.iter().map(|(_, e)| e.value.heap_bytes()).sum::<usize>()
    }

    /// Registers `flag` to be raised when `key` is modified.
    pub fn watch(&mut self, key: &[u8], flag: &WatchFlag) {
        let flags = self.watched.entry(key.into()).or_default();
        if !flags.iter().any(|f| Arc::ptr_eq(f, flag)) {
            flags.push(flag.clone());
        }
    }

    /// Removes `flag` from `key`'s watchers.
    pub fn unwatch(&mut self, key: &[u8], flag: &WatchFlag) {
        if let Some(flags) = self.watched.get_mut(key) {
            flags.retain(|f| !Arc::ptr_eq(f, flag));
            if flags.is_empty() {
                self.watched.remove(key);
            }
        }
    }

    /// Reports that `key` was modified: raises its watchers' flags.
    pub fn signal_modified(&mut self, key: &[u8]) {
        if self.watched.is_empty() {
            return;
        }
        if let Some(flags) = self.watched.get(key) {
            for f in flags {
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Raises every watcher of this database (FLUSHDB, SWAPDB).
    pub fn signal_all(&mut self) {
        for flags in self.watched.values() {
            for f in flags {
                f.store(true, Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn s(v: &str) -> Value {
        Value::Str(v.as_bytes().to_vec())
    }

    #[test]
    fn lazy_expiry_and_overwrite_clears_ttl() {
        let mut db = Db::new();
        db.set(b"a", s("1"), 100, 0);
        assert_eq!(db.volatile_len(), 1);
        assert!(db.get(b"a", 99).is_some());
        assert!(db.get(b"a", 100).is_none());
        assert_eq!(db.len(), 0);
        assert_eq!(db.volatile_len(), 0);
        assert_eq!(db.expired_keys_total, 1);
        db.set(b"b", s("1"), 100, 0);
        db.set(b"b", s("2"), 0, 0);
        assert_eq!(db.volatile_len(), 0);
        assert!(db.get(b"b", 1000).is_some());
    }

    #[test]
    fn active_expiry_reclaims_without_access() {
        let mut db = Db::new();
        for i in 0..100 {
            db.set(format!("k{i}").as_bytes(), s("v"), 10, 0);
        }
        db.set(b"persistent", s("v"), 0, 0);
        let mut rounds = 0;
        while db.volatile_len() > 0 && rounds < 10_000 {
            db.expire_sample(20, 11);
            rounds += 1;
        }
        assert_eq!(db.len(), 1);
        assert_eq!(db.expired_keys_total, 100);
    }

    #[test]
    fn watch_flags_raise_on_modify_expire_and_flush() {
        let mut db = Db::new();
        let f: WatchFlag = Arc::new(AtomicBool::new(false));
        db.watch(b"k", &f);
        db.signal_modified(b"other");
        assert!(!f.load(Ordering::Acquire));
        db.signal_modified(b"k");
        assert!(f.load(Ordering::Acquire));
        f.store(false, Ordering::Release);
        db.set(b"k", s("v"), 5, 0);
        assert!(db.get(b"k", 6).is_none());
        assert!(f.load(Ordering::Acquire));
        f.store(false, Ordering::Release);
        db.take_all();
        assert!(f.load(Ordering::Acquire));
        db.unwatch(b"k", &f);
        f.store(false, Ordering::Release);
        db.signal_all();
        assert!(!f.load(Ordering::Acquire));
    }

    #[test]
    fn eviction_respects_the_policy() {
        let mut db = Db::new();
        for i in 0..50 {
            db.set(format!("p{i}").as_bytes(), s("v"), 0, 1_000);
        }
        assert_eq!(db.evict_one(EvictionPolicy::VolatileLru, 5), None, "no key has an expiry");
        db.set(b"soon", s("v"), 5_000_000, 1_000);
        db.set(b"later", s("v"), 9_000_000, 1_000);
        // volatile-ttl with a sample covering both volatile keys evicts the nearest expiry.
        assert!(db.evict_one(EvictionPolicy::VolatileTtl, 64).is_some());
        assert!(db.get(b"soon", 2_000).is_none());
        assert!(db.get(b"later", 2_000).is_some());
        // allkeys-lru with a large sample over three keys evicts the least recently used one
        // (a given key escapes 64 random draws with probability (2/3)^64).
        let mut lru = Db::new();
        for (k, at) in [(&b"a"[..], 3_000_000u64), (b"b", 1_000_000), (b"c", 2_000_000)] {
            lru.set(k, s("v"), 0, at);
        }
        assert!(lru.evict_one(EvictionPolicy::AllKeysLru, 64).is_some());
        assert!(lru.get_shared(b"b", 0).is_none());
        assert!(lru.get_shared(b"a", 0).is_some() && lru.get_shared(b"c", 0).is_some());
        assert_eq!(lru.evicted_keys_total, 1);
        assert_eq!(db.evicted_keys_total, 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(u8, u8, u64),
        Del(u8),
        Expire(u8, u64),
        Get(u8),
        Tick(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), any::<u8>(), prop_oneof![Just(0u64), 1u64..50]).prop_map(|(k, v, t)| Op::Set(k % 32, v, t)),
            any::<u8>().prop_map(|k| Op::Del(k % 32)),
            (any::<u8>(), 0u64..50).prop_map(|(k, t)| Op::Expire(k % 32, t)),
            any::<u8>().prop_map(|k| Op::Get(k % 32)),
            (1u64..10).prop_map(Op::Tick),
        ]
    }

    proptest! {
        /// The database agrees with a BTreeMap model under random sets, deletes, expiries,
        /// reads, time steps and active-expiry sampling; a full scan sees every live key once.
        #[test]
        fn matches_model(ops in proptest::collection::vec(op(), 1..300)) {
            let mut db = Db::new();
            let mut model: BTreeMap<u8, (u8, u64)> = BTreeMap::new();
            let mut now = 1u64;
            for op in ops {
                match op {
                    Op::Set(k, v, t) => {
                        let at = if t == 0 { 0 } else { now + t };
                        db.set(&[k], Value::Str(vec![v]), at, now);
                        model.insert(k, (v, at));
                    }
                    Op::Del(k) => {
                        let live = model.get(&k).map(|&(_, at)| at == 0 || at > now).unwrap_or(false);
                        prop_assert_eq!(db.remove(&[k], now), live);
                        model.remove(&k);
                    }
                    Op::Expire(k, t) => {
                        let live = model.get(&k).map(|&(_, at)| at == 0 || at > now).unwrap_or(false);
                        if live {
                            prop_assert!(db.set_expire(&[k], now + t + 1));
                            model.get_mut(&k).unwrap().1 = now + t + 1;
                        }
                    }
                    Op::Get(k) => {
                        let want = model.get(&k).filter(|&&(_, at)| at == 0 || at > now).map(|&(v, _)| v);
                        let got = db.get(&[k], now).map(|e| match &e.value { Value::Str(s) => s[0], _ => unreachable!("only strings are set here") });
                        prop_assert_eq!(got, want);
                    }
                    Op::Tick(d) => {
                        now += d;
                        db.expire_sample(5, now);
                    }
                }
            }
            let mut seen = Vec::new();
            let mut cursor = 0;
            loop {
                cursor = db.scan(cursor, 7, now, |k, _| seen.push(k[0])).0;
                if cursor == 0 { break; }
            }
            seen.sort();
            let want: Vec<u8> = model.iter().filter(|(_, &(_, at))| at == 0 || at > now).map(|(&k, _)| k).collect();
            prop_assert_eq!(seen, want);
        }
    }
}
