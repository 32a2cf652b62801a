//! One numbered database of a shard: the key -> entry map, its expiry index and WATCH hooks.
//!
//! Design:
//! - The map is an `abacus_table::Table`: a segmented (extendible-hashing) table that grows
//!   one small segment at a time, so no command ever waits for a whole-table rehash, with
//!   short keys stored inline in the slot. Its SCAN cursor is a position in hash space, which
//!   keeps Redis's guarantee (every key present for a whole iteration is returned) across
//!   growth; RANDOMKEY and active expiry use its random-entry sampling.
//! - Expiry: the keys that have an expiry are in `volatile`, a second table from key to
//!   absolute expiry time in milliseconds, sampled by active expiry the way Redis samples its
//!   `expires` dict; their entries carry a flag, so a lookup probes `volatile` only for keys
//!   that have an expiry. Lookups expire lazily. Why not the time in the entry: 8 bytes in
//!   every slot (the entry is 32 bytes instead of 40) for a feature most keys do not use; a
//!   key with a TTL costs the same as before (its 8 bytes sit in `volatile`).
//! - Eviction (`evict.rs` has the policies and the metadata's layout): each entry carries a
//!   32-bit clock and an 8-bit LFU counter, maintained by lookups and inserts according to
//!   the [`Tracking`] the server sets; [`Db::evict_one`] samples candidates and removes the
//!   best by the policy.
//! - WATCH: a client watching a key registers a shared flag here; every modification of the
//!   key (reported by the server through [`Db::signal_modified`], plus expiry and flushes done
//!   here) raises the flags. The check costs one `is_empty` when nobody watches.
//! - Blocking commands (BLPOP...): the server registers the keys its blocked clients wait
//!   on ([`Db::block_key`]); a modification of such a key queues it as *ready*
//!   ([`Db::take_ready`]), and the server serves the waiters after the command (Redis's
//!   `signalKeyAsReady`). Who waits, and for what, is the server's business: this crate only
//!   knows which keys are worth reporting. Also one `is_empty` when nobody is blocked.
//! - Modification observer: the server may install one function ([`set_modified_observer`])
//!   that hears of every modified key (client-side caching's invalidations); it is called
//!   only while switched on ([`observe_modifications`]): one relaxed load per modified key
//!   otherwise.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use abacus_table::{Config, Density, Table};

use crate::evict::{
    clock_elapsed, lfu_decayed, lfu_log_incr, lfu_minutes, lfu_pack, lru_clock, SplitMix,
    CLOCK_MASK, LFU_INIT_VAL, LFU_MINUTES_MASK,
};
pub use crate::evict::{EvictionPolicy, Tracking};
use crate::glob::glob_match;
use crate::packed::{PackedValue, StrMut};
use crate::value::{Value, ValueRef};
use crate::Key;
use abacus_collections::{CompactHash, IdSet, List};
use abacus_hll::Hll;

/// Raised when a watched key is modified; owned jointly by the client and the databases.
pub type WatchFlag = Arc<AtomicBool>;

/// The function told of every modified key while [`OBSERVING`] is on (see the file comment).
static MODIFIED_OBSERVER: std::sync::OnceLock<fn(&[u8])> = std::sync::OnceLock::new();
static OBSERVING: AtomicBool = AtomicBool::new(false);

/// Installs the modification observer (the first call wins: there is one per process).
pub fn set_modified_observer(f: fn(&[u8])) {
    let _ = MODIFIED_OBSERVER.set(f);
}

/// Switches the modification observer on or off.
pub fn observe_modifications(on: bool) {
    OBSERVING.store(on, Ordering::Relaxed);
}

thread_local! {
    /// CLIENT NO-TOUCH: while set, lookups on this thread leave keys' access times (LRU/LFU)
    /// alone. The server sets it only around the commands of a client that asked for it, so
    /// other clients pay one thread-local read per lookup that touches.
    static NO_TOUCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets whether lookups on this thread skip the access-time update (CLIENT NO-TOUCH);
/// returns the previous setting.
pub fn set_no_touch(on: bool) -> bool {
    NO_TOUCH.with(|n| n.replace(on))
}

#[cold]
#[inline(never)]
fn tell_observer(key: &[u8]) {
    if let Some(f) = MODIFIED_OBSERVER.get() {
        f(key);
    }
}

/// A key's value with its metadata. `Default` (an empty string, no allocation) is what a free
/// table slot holds.
///
/// 21 bytes of alignment 1: the value packed in 17 (`packed.rs`), the flags, and a 24-bit
/// access field, so with the 16-byte key (`abacus_table::SmallKey`, also of alignment 1) a
/// slot is 37 bytes. The value is reached through accessors ([`Entry::value`],
/// [`Entry::str_mut`], [`Entry::as_set_mut`], ...), the flags and the access field through
/// getters and setters.
#[repr(C)]
#[derive(Clone, Debug)]
pub struct Entry {
    value: PackedValue,
    /// `RAW_ENCODING`, `SNAP_EPOCH`, `HAS_EXPIRY`, `TEXT_ENCODING`.
    flags: u8,
    /// Redis's 24-bit `lru` field (little-endian), read by the policy in force (see
    /// `evict.rs`): LRU, the last access time in Unix seconds modulo 2^24 (OBJECT IDLETIME);
    /// LFU, the last decrement time in minutes modulo 2^16 above the 8-bit logarithmic
    /// counter (OBJECT FREQ); FIFO, the database's insertion sequence number modulo 2^24.
    access: [u8; 3],
}

impl Default for Entry {
    /// The empty string (what a free slot holds), with [`Entry::new`]'s access field.
    fn default() -> Entry {
        Entry {
            value: PackedValue::new(),
            flags: 0,
            access: NEW_ACCESS,
        }
    }
}

/// [`Entry::new`]'s access field: LFU_INIT_VAL at minute 0 (see there).
const NEW_ACCESS: [u8; 3] = [LFU_INIT_VAL, 0, 0];

/// Modified in place (APPEND, SETRANGE, SETBIT): Redis reports such strings as "raw" whatever
/// their bytes.
const RAW_ENCODING: u8 = 1;
/// Snapshot bookkeeping: equal to the database's epoch once this entry's state as of the
/// running snapshot has been handed to the snapshot (see [`Db::snapshot_begin`]).
const SNAP_EPOCH: u8 = 2;
/// The key has an expiry: its time is in the database's `volatile` table. Maintained by the
/// database (set from the expiry given to [`Db::insert_entry`] / [`Db::set`]).
const HAS_EXPIRY: u8 = 4;
/// Stored without Redis's integer encoding attempt (INCRBYFLOAT's result): OBJECT ENCODING says
/// "embstr" or "raw" by length even when the text is an integer. Like Redis's encoding, not
/// kept across a restart (Redis re-encodes what it loads).
const TEXT_ENCODING: u8 = 8;

/// An entry out of its table (moved between databases or shards, loaded from a snapshot),
/// with its absolute expiry time in Unix milliseconds (0 = none).
#[derive(Clone, Debug, Default)]
pub struct Detached {
    pub entry: Entry,
    pub expire_at_ms: u64,
}

impl Entry {
    /// An entry whose access field is LFU_INIT_VAL at minute 0 (under LRU, a time whose age
    /// depends on the date, the field wrapping): [`Db::set`] stamps the policy's own, and
    /// entries read from a snapshot go in through [`Db::insert_loaded`], which does too.
    pub fn new(value: Value) -> Entry {
        Entry {
            value: PackedValue::pack(value),
            flags: 0,
            access: NEW_ACCESS,
        }
    }

    /// The 24-bit access field (see the field).
    #[inline(always)]
    fn access(&self) -> u32 {
        let [a, b, c] = self.access;
        u32::from_le_bytes([a, b, c, 0])
    }

    #[inline(always)]
    fn set_access(&mut self, v: u32) {
        let [a, b, c, _] = v.to_le_bytes();
        self.access = [a, b, c];
    }

    /// LRU: seconds since the last access (OBJECT IDLETIME), exact up to half the 24-bit
    /// clock's range (97 days; see [`clock_elapsed`]).
    pub fn idle_s(&self, now_ms: u64) -> u64 {
        clock_elapsed(lru_clock(now_ms), self.access(), CLOCK_MASK) as u64
    }

    /// LRU: the last access `idle_s` seconds before `now_ms` (RESTORE IDLETIME), capped at
    /// the longest idle time the clock holds.
    pub fn set_idle_s(&mut self, now_ms: u64, idle_s: u64) {
        let idle = idle_s.min((CLOCK_MASK / 2) as u64) as u32;
        self.set_access(lru_clock(now_ms).wrapping_sub(idle) & CLOCK_MASK);
    }

    /// LFU: the stored counter (before decay; OBJECT FREQ reports [`Entry::lfu_freq`]).
    pub fn lfu_counter(&self) -> u8 {
        self.access() as u8
    }

    /// LFU: sets the counter, with `now_ms` as its last decrement time (RESTORE FREQ).
    pub fn set_lfu(&mut self, counter: u8, now_ms: u64) {
        self.set_access(lfu_pack(lfu_minutes(now_ms), counter));
    }

    /// LFU: the counter decayed to `now_ms` minutes (Redis's LFUDecrAndReturn).
    fn lfu_decayed_to(&self, now_min: u32, decay_time_min: u32) -> u8 {
        let a = self.access();
        lfu_decayed(a as u8, a >> 8, now_min, decay_time_min)
    }

    /// The value, borrowed in place.
    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        self.value.get()
    }

    /// Replaces the value, returning the old one (metadata and flags unchanged): for putting
    /// back a value taken out with [`Entry::take_value`].
    pub fn replace_value(&mut self, v: Value) -> Value {
        self.value.replace(v)
    }

    /// Stores a new value object in place of the old one (INCR's result, a freshly decoded
    /// sketch), as Redis swaps in a new object: no longer "raw" from an earlier in-place
    /// change; the key's metadata stays.
    pub fn set_value(&mut self, v: Value) {
        self.value.replace(v);
        self.set_raw_encoding(false);
        self.set_flag(TEXT_ENCODING, false);
    }

    /// Marks the value as stored without the integer encoding (see `TEXT_ENCODING`).
    fn set_text_encoding(&mut self) {
        self.set_flag(TEXT_ENCODING, true);
    }

    /// Takes the value out, leaving the empty string.
    pub fn take_value(&mut self) -> Value {
        self.value.take()
    }

    /// Bytes the value owns on the heap (see [`Value::heap_bytes`]).
    pub fn heap_bytes(&self) -> usize {
        self.value.heap_bytes()
    }

    /// The string for modification, if the value is a string. A decoded sketch is serialized
    /// into a plain string first (see `value.rs`), so no string command sees anything but
    /// the bytes GET returns. `None` for sets and hashes: the caller replies WRONGTYPE.
    pub fn str_mut(&mut self) -> Option<StrMut<'_>> {
        self.sketch_to_string();
        self.value.str_mut()
    }

    /// Serializes a decoded sketch into the plain string GET returns (a no-op for any other
    /// value), for string commands, which see only those bytes.
    pub fn sketch_to_string(&mut self) {
        if let ValueRef::Hll(h) = self.value.get() {
            let bytes = h.to_bytes();
            self.value.replace(Value::Str(bytes.into()));
        }
    }

    /// Appends to the string, returning its new length; `None` (nothing changed) for sets and
    /// hashes. A decoded sketch is serialized first, as in [`Entry::str_mut`]. The fast path
    /// of APPEND: bytes that fit the value's spare room are copied in place.
    #[inline]
    pub fn append(&mut self, bytes: &[u8]) -> Option<usize> {
        self.sketch_to_string();
        self.value.append(bytes)
    }

    /// The bytes of a plain string (`None` for a decoded sketch, a set or a hash).
    pub fn str_bytes(&self) -> Option<&[u8]> {
        match self.value.get() {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_set(&self) -> Option<&IdSet> {
        self.value.get().as_set()
    }

    pub fn as_set_mut(&mut self) -> Option<&mut IdSet> {
        self.value.as_set_mut()
    }

    pub fn as_hash(&self) -> Option<&CompactHash> {
        self.value.get().as_hash()
    }

    pub fn as_hash_mut(&mut self) -> Option<&mut CompactHash> {
        self.value.as_hash_mut()
    }

    pub fn as_list(&self) -> Option<&List> {
        self.value.get().as_list()
    }

    pub fn as_list_mut(&mut self) -> Option<&mut List> {
        self.value.as_list_mut()
    }

    pub fn as_zset(&self) -> Option<&abacus_collections::ZSet> {
        self.value.get().as_zset()
    }

    pub fn as_zset_mut(&mut self) -> Option<&mut abacus_collections::ZSet> {
        self.value.as_zset_mut()
    }

    pub fn as_series(&self) -> Option<&abacus_collections::Series> {
        self.value.get().as_series()
    }

    pub fn as_series_mut(&mut self) -> Option<&mut abacus_collections::Series> {
        self.value.as_series_mut()
    }

    pub fn as_stream(&self) -> Option<&abacus_collections::Stream> {
        self.value.get().as_stream()
    }

    pub fn as_stream_mut(&mut self) -> Option<&mut abacus_collections::Stream> {
        self.value.as_stream_mut()
    }

    /// The decoded sketch, if the value is one.
    pub fn as_hll_mut(&mut self) -> Option<&mut Hll> {
        self.value.as_hll_mut()
    }

    fn flag(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    fn set_flag(&mut self, f: u8, on: bool) {
        if on {
            self.flags |= f;
        } else {
            self.flags &= !f;
        }
    }

    /// Modified in place (APPEND, SETRANGE, SETBIT): OBJECT ENCODING says "raw".
    pub fn raw_encoding(&self) -> bool {
        self.flag(RAW_ENCODING)
    }

    pub fn set_raw_encoding(&mut self, on: bool) {
        self.set_flag(RAW_ENCODING, on)
    }

    fn snap_epoch(&self) -> bool {
        self.flag(SNAP_EPOCH)
    }

    fn set_snap_epoch(&mut self, on: bool) {
        self.set_flag(SNAP_EPOCH, on)
    }

    fn has_expiry(&self) -> bool {
        self.flag(HAS_EXPIRY)
    }

    fn set_has_expiry(&mut self, on: bool) {
        self.set_flag(HAS_EXPIRY, on)
    }

    /// The LFU counter as OBJECT FREQ reports it: decayed to `now_ms`, not stored.
    pub fn lfu_freq(&self, now_ms: u64, decay_time_min: u32) -> u8 {
        self.lfu_decayed_to(lfu_minutes(now_ms), decay_time_min)
    }

    /// The encoding OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self.value() {
            _ if self.raw_encoding() => "raw",
            ValueRef::Str(s) if self.flag(TEXT_ENCODING) => ValueRef::text_encoding(s),
            v => v.encoding(),
        }
    }
}

/// Whether an entry found under `key` has expired by `now_ms`: a flag test for keys without
/// an expiry, a probe of `volatile` for the others. A free function over the two fields so
/// that callers can hold the map and the expiry table borrowed at once.
#[inline]
fn expired(volatile: &Table<u64>, key: &[u8], e: &Entry, now_ms: u64) -> bool {
    e.has_expiry() && volatile.get(key).is_some_and(|&at| at <= now_ms)
}

// The packed value (17 bytes), the flags and the 24-bit access field: 21 bytes of alignment
// 1, which with the 16-byte key (`abacus_table::SmallKey`, alignment 1) makes a 37-byte slot.
const _: () = assert!(std::mem::size_of::<Entry>() == 21);
const _: () = assert!(std::mem::align_of::<Entry>() == 1);
const _: () = assert!(std::mem::size_of::<(abacus_table::SmallKey, Entry)>() == 37);

/// Per-entry bookkeeping bytes counted by [`Db::approx_bytes`] beyond the table's own
/// memory: none today (the table accounts its slots and out-of-line keys exactly).
/// foldhash for the small WATCH map.
type Hasher = foldhash::fast::RandomState;

/// The key -> entry table. Its 37-byte slots are most of a small key's memory, so it may be
/// grown dense (`Density::Dense`: a fuller table, 88% on average instead of 80%, for more
/// growth work: entries move about twice as often, and key-creating writes cost about 14%
/// more CPU; ARCHITECTURE.md, "Compact slots"). Which one is the server's `keyspace-density`
/// parameter, set once at start-up through [`set_dense_key_tables`].
struct KeyTable(Table<Entry>);

/// Whether key tables created from now on grow dense (process-wide, like the modification
/// observer above: a start-up choice, not a per-database one).
static DENSE_KEY_TABLES: AtomicBool = AtomicBool::new(false);

/// Chooses the density of the key tables created from now on: `true` for `Density::Dense`
/// (less memory per key, more growth work per new key), `false` for balanced, this crate's
/// default for embedded users (the server's `keyspace-density` defaults to dense). Tables
/// that exist keep theirs.
pub fn set_dense_key_tables(dense: bool) {
    DENSE_KEY_TABLES.store(dense, Ordering::Relaxed);
}

/// The configuration of a new [`KeyTable`].
fn key_table_config() -> Config {
    let density = if DENSE_KEY_TABLES.load(Ordering::Relaxed) { Density::Dense } else { Density::Balanced };
    Config { density, ..Config::DEFAULT }
}

impl Default for KeyTable {
    fn default() -> KeyTable {
        KeyTable(Table::with_config(key_table_config()))
    }
}

impl std::ops::Deref for KeyTable {
    type Target = Table<Entry>;
    fn deref(&self) -> &Table<Entry> {
        &self.0
    }
}

impl std::ops::DerefMut for KeyTable {
    fn deref_mut(&mut self) -> &mut Table<Entry> {
        &mut self.0
    }
}

/// One database.
#[derive(Default)]
pub struct Db {
    map: KeyTable,
    /// Keys that have an expiry, with its absolute time in Unix milliseconds.
    volatile: Table<u64>,
    watched: HashMap<Key, Vec<WatchFlag>, Hasher>,
    /// Keys clients are blocked on, with how many registrations each has.
    blocking: HashMap<Key, u32, Hasher>,
    /// Blocked-on keys modified since the server last took them, each once, in order.
    ready: Vec<Key>,
    /// Keys removed by expiry (lazy or active) since the database was created.
    pub expired_keys_total: u64,
    /// Lookups through [`Db::get`] that found / did not find their key (INFO keyspace_hits).
    pub hits_total: u64,
    pub misses_total: u64,
    /// Keys removed to stay under `maxmemory`.
    pub evicted_keys_total: u64,
    /// How accesses update the entries' eviction metadata.
    tracking: Tracking,
    /// The latest time (Unix seconds) given to any lookup or insert: the "now" of LFU decay
    /// during eviction, as Redis uses its cached clock.
    clock_s: u32,
    /// Insertion sequence for FIFO (wraps; compared relative to the current value).
    fifo_seq: u32,
    rng: SplitMix,
    /// The snapshot epoch: entries whose `snap_epoch` differs still owe the running snapshot
    /// their state. Flipped when a snapshot begins.
    epoch: bool,
    /// The running snapshot, if any: where its sweep is and where pre-images go.
    snap: Option<Snap>,
    /// Which [`DbEvent`]s to record (bits of [`journal`]); 0, the default, records nothing
    /// and costs one branch where an event could happen.
    journal_mask: u8,
    /// Recorded events, oldest first, until the server takes them ([`Db::drain_journal`]).
    journal: Vec<(DbEvent, Key)>,
    /// The label index of the time series stored here (a superset: see `SeriesIndex`).
    /// Every insert of a series registers it, so no path that stores one can miss it.
    pub series_index: abacus_collections::SeriesIndex,
    /// Cluster mode: the keys of each hash slot, built by the first [`Db::slot_keys`] and
    /// kept from then on (`slots.rs`); None, the default, costs one branch per key added or
    /// removed.
    slots: Option<Box<crate::slots::SlotKeys>>,
}

/// What happened to a key inside the keyspace itself, for keyspace notifications: the
/// keyspace crate knows no pub/sub, so a database records these when asked and the server
/// publishes them (`notify.rs`), in order with the commands' own events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbEvent {
    /// Removed because its time had passed (lazily on access, or by active expiry).
    Expired,
    /// Created by [`Db::set`] (Redis's `dbAdd`), or said so with [`Db::created`].
    New,
    /// A read lookup ([`Db::get`], [`Db::get_read_mut`]) did not find it.
    KeyMiss,
}

/// Bits of [`Db::set_journal`]'s mask.
pub mod journal {
    pub const EXPIRED: u8 = 1;
    pub const NEW: u8 = 2;
    pub const KEYMISS: u8 = 4;
}

/// Receives the keys of a snapshot: (key, entry and expiry time (0 = none) as of the
/// snapshot's point in time).
pub type SnapshotSink = Box<dyn FnMut(&[u8], &Entry, u64) + Send>;

/// A snapshot in progress on one database.
struct Snap {
    sink: SnapshotSink,
    /// The sweep's position in hash space (a SCAN cursor); None once it has wrapped.
    cursor: Option<u64>,
}

impl std::fmt::Debug for Snap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snap")
            .field("cursor", &self.cursor)
            .finish()
    }
}

/// Fixed bytes an entry costs beyond its key and value heap bytes (slot, control byte, load
/// factor slack), for the estimate of what an eviction frees.
const ENTRY_SLOT_BYTES: usize = 64;

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

    /// Prepares an empty database for about `n` keys (loading a snapshot), so its table is
    /// sized once instead of growing. No effect on a database that holds keys.
    pub fn reserve(&mut self, n: usize) {
        if self.map.is_empty() && n > 0 {
            self.map = KeyTable(Table::with_capacity_and_config(n, key_table_config()));
        }
    }

    /// Number of keys with an expiry.
    pub fn volatile_len(&self) -> usize {
        self.volatile.len()
    }

    /// The eviction policy and LFU parameters in force.
    pub fn tracking(&self) -> Tracking {
        self.tracking
    }

    /// Sets how accesses are tracked from now on (the server calls this when the
    /// configuration changes; existing metadata is reinterpreted, see `evict.rs`).
    pub fn set_tracking(&mut self, tracking: Tracking) {
        self.tracking = tracking;
    }

    /// Hashes `key` for this database's table and prefetches its slot, so that a batch of
    /// commands can start all its memory loads before executing the first one. Returns the
    /// hash, for [`Db::prefetch_values`].
    pub fn prefetch(&self, key: &[u8]) -> u64 {
        let hash = self.map.hash_key(key);
        self.map.prefetch(hash);
        hash
    }

    /// The first step of a two-step batch prefetch: hashes `key` and starts loading its
    /// directory entry; [`Db::prefetch_hashed`] then, once every key's entry is on its way,
    /// starts the control bytes and the slot. Returns the hash.
    pub fn prefetch_segment(&self, key: &[u8]) -> u64 {
        let hash = self.map.hash_key(key);
        self.map.prefetch_segment(hash);
        hash
    }

    /// The second step after [`Db::prefetch_segment`].
    pub fn prefetch_hashed(&self, hash: u64) {
        self.map.prefetch(hash);
    }

    /// The last step of a batch's prefetch, for commands that read a value's bytes behind the
    /// slot (APPEND copies a heap string's bytes when its buffer grows), first of all sketches:
    /// a Redis HyperLogLog string's bytes (PFADD: its header and first opcodes, ~10% less
    /// server CPU per PFADD over 10k keys), or for a decoded HLL sketch two pointer hops: the
    /// `Box<Hll>`, then its explicit list, which an add binary-searches (`perf` at 10k keys:
    /// ~7% of the server's CPU waiting for the box and ~14% for the list). Call it after [`Db::prefetch`] of every key, so the slots are on
    /// their way: each key is looked up (nothing is counted or changed), its box prefetched,
    /// and the list behind the box prefetched eight keys earlier, by now arriving, is prefetched.
    /// `keys` come with the hashes [`Db::prefetch`] returned (a wrong hash finds nothing).
    pub fn prefetch_values<'k>(&self, keys: impl Iterator<Item = (u64, &'k [u8])>) {
        const LAG: usize = 8;
        let mut ring: [Option<&abacus_hll::Hll>; LAG] = [None; LAG];
        for (i, (hash, key)) in keys.enumerate() {
            let slot = &mut ring[i % LAG];
            if let Some(h) = slot.take() {
                prefetch_explicit(h);
            }
            match self.map.get_hashed(hash, key).map(Entry::value) {
                Some(ValueRef::Hll(h)) => {
                    abacus_table::prefetch_read(h as *const abacus_hll::Hll);
                    *slot = Some(h);
                }
                Some(ValueRef::Str(s)) => {
                    // A Redis HyperLogLog (PFADD): its header, then the start of the sparse
                    // opcodes that every add walks from the beginning.
                    for line in s.chunks(64).take(4) {
                        abacus_table::prefetch_read(line.as_ptr());
                    }
                }
                _ => {}
            }
        }
        for h in ring.into_iter().flatten() {
            prefetch_explicit(h);
        }
    }

    /// Hands the running snapshot `key`'s state before it changes, unless the snapshot has
    /// it already. Every mutation of an existing entry calls this first; one branch when no
    /// snapshot runs.
    #[inline]
    fn before_change(&mut self, key: &[u8]) {
        if let Some(snap) = &mut self.snap {
            if let Some(e) = self.map.get_mut(key) {
                if e.snap_epoch() != self.epoch {
                    let at = if e.has_expiry() {
                        self.volatile.get(key).copied().unwrap_or(0)
                    } else {
                        0
                    };
                    (snap.sink)(key, e, at);
                    e.set_snap_epoch(self.epoch);
                }
            }
        }
    }

    /// Starts a point-in-time snapshot of this database: from now on, each key's state as of
    /// this moment is passed to `sink` exactly once, either by the sweep
    /// ([`Db::snapshot_step`]) or, if the key is about to change first, right before it
    /// changes. Keys created afterwards are not part of it. Nothing is copied up front, so
    /// memory does not grow with the dataset: the only extra memory is what `sink` buffers.
    ///
    /// Why an epoch bit: after a completed snapshot every entry carries the database's epoch;
    /// flipping the epoch marks them all as owed to the new snapshot at once.
    pub fn snapshot_begin(&mut self, sink: SnapshotSink) {
        self.finish_snapshot();
        self.epoch = !self.epoch;
        self.snap = Some(Snap {
            sink,
            cursor: Some(0),
        });
    }

    pub fn snapshot_active(&self) -> bool {
        self.snap.is_some()
    }

    /// Advances the snapshot sweep by about `budget` entries. Returns true when the
    /// snapshot of this database is complete (it then releases its sink).
    pub fn snapshot_step(&mut self, budget: usize) -> bool {
        let Some(snap) = &mut self.snap else {
            return true;
        };
        let Some(cursor) = snap.cursor else {
            self.snap = None;
            return true;
        };
        let epoch = self.epoch;
        let volatile = &self.volatile;
        // Marks each entry in place as it goes (no second lookup per key), with the values'
        // heap data prefetched a segment's share at a time.
        let next = self.map.scan_mut(
            cursor,
            budget.max(1),
            |e: &Entry| e.value().heap_ptr(),
            |k, e| {
                if e.snap_epoch() != epoch {
                    let at = if e.has_expiry() {
                        volatile.get(k).copied().unwrap_or(0)
                    } else {
                        0
                    };
                    (snap.sink)(k, e, at);
                    e.set_snap_epoch(epoch);
                }
            },
        );
        if next == 0 {
            self.snap = None;
            return true;
        }
        if let Some(snap) = &mut self.snap {
            snap.cursor = Some(next);
        }
        false
    }

    /// Completes a running snapshot at once (before FLUSHDB, SWAPDB or a new snapshot).
    pub fn finish_snapshot(&mut self) {
        while !self.snapshot_step(4096) {}
    }

    /// Removes `key` if it has expired. Returns true if it was removed.
    fn expire_if_needed(&mut self, key: &[u8], now_ms: u64) -> bool {
        let gone = self
            .map
            .get(key)
            .is_some_and(|e| expired(&self.volatile, key, e, now_ms));
        if gone {
            self.before_change(key);
            self.map.remove(key);
            self.volatile.remove(key);
            if let Some(ix) = &mut self.slots {
                ix.removed(key);
            }
            self.expired_keys_total += 1;
            self.signal_modified(key);
            self.record(journal::EXPIRED, DbEvent::Expired, key);
        }
        gone
    }

    /// Records `event` if the journal asks for it (`bit`).
    #[inline]
    fn record(&mut self, bit: u8, event: DbEvent, key: &[u8]) {
        if self.journal_mask & bit != 0 {
            self.journal.push((event, key.into()));
        }
    }

    /// Which events to record from now on (bits of [`journal`]; 0 = none).
    pub fn set_journal(&mut self, mask: u8) {
        self.journal_mask = mask;
        if mask == 0 {
            self.journal = Vec::new();
        }
    }

    pub fn journal_mask(&self) -> u8 {
        self.journal_mask
    }

    /// Whether events wait in the journal.
    pub fn has_journal(&self) -> bool {
        !self.journal.is_empty()
    }

    /// Hands the recorded events to `f`, oldest first, and forgets them.
    pub fn drain_journal(&mut self, mut f: impl FnMut(DbEvent, &[u8])) {
        for (e, k) in self.journal.drain(..) {
            f(e, &k);
        }
    }

    /// Records that `key` was just created by a command that moved an entry in (RENAME, COPY,
    /// MOVE insert whole entries, which [`Db::insert_entry`] does not report: it also serves
    /// transfers that create nothing).
    pub fn created(&mut self, key: &[u8]) {
        self.record(journal::NEW, DbEvent::New, key);
    }

    /// One hash and one probe (the position found is reused to borrow the entry); an expired
    /// key is reclaimed on the way.
    fn lookup(&mut self, key: &[u8], now_ms: u64, touch: Touch) -> Option<&mut Entry> {
        let now_s = (now_ms / 1000) as u32;
        self.clock_s = now_s;
        let hash = self.map.hash_key(key);
        let found = self.map.find_hashed(hash, key);
        let Some(found) =
            found.filter(|&f| !expired(&self.volatile, key, self.map.at_mut(f), now_ms))
        else {
            // Absent or expired: reclaim if expired (a second lookup, only then), count a miss.
            if found.is_some() {
                self.expire_if_needed(key, now_ms);
            }
            if touch == Touch::Read {
                self.misses_total += 1;
                self.record(journal::KEYMISS, DbEvent::KeyMiss, key);
            }
            return None;
        };
        if touch == Touch::Read {
            self.hits_total += 1;
        }
        if touch == Touch::Write && self.snap.is_some() {
            // Hands the snapshot the entry's state; it does not move entries, so `found`
            // stays valid.
            self.before_change(key);
        }
        let e = self.map.at_mut(found);
        if touch != Touch::None && !NO_TOUCH.with(|n| n.get()) {
            let t = self.tracking;
            if t.policy.is_lfu() {
                // Redis's updateLFU: decay for the idle minutes, then count this access.
                let now_min = lfu_minutes(now_ms);
                let decayed = e.lfu_decayed_to(now_min, t.lfu_decay_time_min);
                let counter = lfu_log_incr(decayed, t.lfu_log_factor, self.rng.uniform());
                e.set_access(lfu_pack(now_min, counter));
            } else if !t.policy.is_fifo() {
                // `lru_clock(now_ms)`, from the seconds already divided out.
                e.set_access(now_s & CLOCK_MASK);
            }
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
        self.get_shared_hashed(self.map.hash_key(key), key, now_ms)
    }

    /// [`Db::get_shared`] with the hash [`Db::prefetch`] returned for `key` (a batch that
    /// prefetched its keys does not hash them twice; a wrong hash finds nothing).
    pub fn get_shared_hashed(&self, hash: u64, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.map
            .get_hashed(hash, key)
            .filter(|e| !expired(&self.volatile, key, e, now_ms))
    }

    /// The absolute expiry time (Unix milliseconds) of `key`, 0 if it has none or does not
    /// exist. Does not check whether the key is live: callers look it up first.
    pub fn expire_at(&self, key: &[u8]) -> u64 {
        self.volatile.get(key).copied().unwrap_or(0)
    }

    pub fn contains(&mut self, key: &[u8], now_ms: u64) -> bool {
        self.peek(key, now_ms).is_some()
    }

    /// Stores `value` under `key` with the given absolute expiry (0 = none), replacing any
    /// previous entry and its expiry, as SET does.
    pub fn set(&mut self, key: &[u8], value: Value, expire_at_ms: u64, now_ms: u64) {
        if self.journal_mask & (journal::EXPIRED | journal::NEW) != 0 {
            // Redis's setKey looks the key up first (an expired one is reclaimed, with its
            // event), then adds it when absent ("new").
            self.expire_if_needed(key, now_ms);
            if !self.map.contains_key(key) {
                self.record(journal::NEW, DbEvent::New, key);
            }
        }
        let now_s = (now_ms / 1000) as u32;
        self.clock_s = now_s;
        let mut entry = Entry::new(value);
        entry.set_access(self.insert_metadata(key, now_ms));
        self.insert_entry(
            key,
            Detached {
                entry,
                expire_at_ms,
            },
        );
    }

    /// Marks `key`'s value, just written, as stored without the integer encoding (INCRBYFLOAT:
    /// see `TEXT_ENCODING`). Not an access: the write that stored it was.
    pub fn set_text_encoding(&mut self, key: &[u8]) {
        if let Some(e) = self.map.get_mut(key) {
            e.set_text_encoding();
        }
    }

    /// The access field of a key being (re)written: FIFO stamps the next insertion sequence
    /// number; LFU keeps an overwritten live key's counter and counts the write as an access
    /// (Redis's dbOverwrite keeps the old object's LFU field after lookupKeyWrite touched
    /// it), or starts a new key at LFU_INIT_VAL; otherwise the access time.
    fn insert_metadata(&mut self, key: &[u8], now_ms: u64) -> u32 {
        let t = self.tracking;
        if t.policy.is_fifo() {
            self.fifo_seq = self.fifo_seq.wrapping_add(1);
            return self.fifo_seq & CLOCK_MASK;
        }
        if !t.policy.is_lfu() {
            return lru_clock(now_ms);
        }
        let now_min = lfu_minutes(now_ms);
        let counter = match self
            .map
            .get(key)
            .filter(|e| !expired(&self.volatile, key, e, now_ms))
        {
            Some(old) => {
                let decayed = old.lfu_decayed_to(now_min, t.lfu_decay_time_min);
                lfu_log_incr(decayed, t.lfu_log_factor, self.rng.uniform())
            }
            None => LFU_INIT_VAL,
        };
        lfu_pack(now_min, counter)
    }

    /// Inserts an entry read from a snapshot or sent by a primary, as [`Db::insert_entry`]
    /// does, with the access field of a new key under the policy in force at `now_ms` (as
    /// Redis's loaded objects get the current LRU clock, or LFU_INIT_VAL at the current
    /// minute). Needed since the field wraps: [`Entry::new`]'s fixed field would read as
    /// an arbitrary age depending on the date.
    pub fn insert_loaded(&mut self, key: &[u8], mut d: Detached, now_ms: u64) {
        let t = self.tracking.policy;
        let access = if t.is_fifo() {
            self.fifo_seq = self.fifo_seq.wrapping_add(1);
            self.fifo_seq & CLOCK_MASK
        } else if t.is_lfu() {
            lfu_pack(lfu_minutes(now_ms), LFU_INIT_VAL)
        } else {
            lru_clock(now_ms)
        };
        d.entry.set_access(access);
        self.insert_entry(key, d);
    }

    /// Inserts a whole entry (value and expiry), replacing any previous one. One hash lookup
    /// (plus the expiry index only when the key has or had an expiry).
    pub fn insert_entry(&mut self, key: &[u8], d: Detached) {
        if self.snap.is_some() {
            self.before_change(key);
        }
        let Detached {
            mut entry,
            expire_at_ms,
        } = d;
        // A new entry is never owed to a running snapshot (it did not exist at its point in
        // time, or its old state was just handed over).
        entry.set_snap_epoch(self.epoch);
        entry.set_has_expiry(expire_at_ms != 0);
        if let Some(s) = entry.as_series() {
            self.series_index.register(key, s.labels.iter().map(|(l, v)| (&**l, &**v)));
        }
        let old = self.map.insert(key, entry);
        if old.is_none() {
            if let Some(ix) = &mut self.slots {
                ix.added(key);
            }
        }
        let was_volatile = old.is_some_and(|old| old.has_expiry());
        if expire_at_ms != 0 {
            self.volatile.insert(key, expire_at_ms);
        } else if was_volatile {
            self.volatile.remove(key);
        }
    }

    /// Removes `key`, returning its entry and expiry (expired or not).
    pub fn remove_entry(&mut self, key: &[u8]) -> Option<Detached> {
        if self.snap.is_some() {
            self.before_change(key);
        }
        let entry = self.map.remove(key)?;
        if let Some(ix) = &mut self.slots {
            ix.removed(key);
        }
        let expire_at_ms = if entry.has_expiry() {
            self.volatile.remove(key).unwrap_or(0)
        } else {
            0
        };
        Some(Detached {
            entry,
            expire_at_ms,
        })
    }

    /// Removes `key` if it exists and has not expired. Returns whether a live key was removed.
    pub fn remove(&mut self, key: &[u8], now_ms: u64) -> bool {
        match self.remove_entry(key) {
            Some(d) if d.expire_at_ms != 0 && d.expire_at_ms <= now_ms => {
                self.expired_keys_total += 1;
                self.record(journal::EXPIRED, DbEvent::Expired, key);
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Sets the absolute expiry of an existing key (0 removes it). Returns false if the key
    /// does not exist.
    pub fn set_expire(&mut self, key: &[u8], expire_at_ms: u64) -> bool {
        if self.snap.is_some() {
            self.before_change(key);
        }
        let Some(e) = self.map.get_mut(key) else {
            return false;
        };
        let was_volatile = e.has_expiry();
        e.set_has_expiry(expire_at_ms != 0);
        if expire_at_ms != 0 {
            self.volatile.insert(key, expire_at_ms);
        } else if was_volatile {
            self.volatile.remove(key);
        }
        true
    }

    /// Up to `count` live keys of hash `slot` (in no particular order), and how many live
    /// keys the slot has: cluster mode's GETKEYSINSLOT / COUNTKEYSINSLOT. The first call
    /// builds the index by hash slot from the keys present (one scan), which this database
    /// then maintains (`slots.rs`); `slot_of` is the cluster's slot function (the first
    /// call's is kept).
    pub fn slot_keys(&mut self, slot: u16, count: usize, slot_of: fn(&[u8]) -> u16, now_ms: u64) -> (Vec<Key>, usize) {
        if self.slots.is_none() {
            let mut ix = crate::slots::SlotKeys::new(slot_of);
            for (k, _) in self.map.iter() {
                ix.added(k);
            }
            self.slots = Some(Box::new(ix));
        }
        let ix = self.slots.as_ref().expect("built above");
        let mut out = Vec::new();
        let mut live = 0;
        for k in ix.keys(slot) {
            let alive = self.map.get(k).is_some_and(|e| !expired(&self.volatile, k, e, now_ms));
            if alive {
                live += 1;
                if out.len() < count {
                    out.push(k.clone());
                }
            }
        }
        (out, live)
    }

    /// Removes every key; returns the old contents so the caller can drop them elsewhere
    /// (FLUSHDB ASYNC drops them on a background thread).
    pub fn take_all(&mut self) -> Db {
        self.signal_existing(None);
        // Clients blocked on a key that goes away re-evaluate their wait (XREADGROUP's get
        // Redis's -UNBLOCKED; the pops find nothing and keep waiting).
        self.ready_all_blocked();
        // A running snapshot takes what it is still owed first (this stalls for the rest of
        // the sweep; FLUSHDB during a snapshot is rare).
        self.finish_snapshot();
        if let Some(ix) = &mut self.slots {
            ix.clear();
        }
        Db {
            map: KeyTable(self.map.take()),
            volatile: self.volatile.take(),
            series_index: std::mem::take(&mut self.series_index),
            ..Db::default()
        }
    }

    /// Swaps the contents of two databases, keeping each database's watchers in place (SWAPDB:
    /// clients watching db 0 keep watching db 0, which now holds the other data).
    pub fn swap_contents(&mut self, other: &mut Db) {
        self.signal_existing(Some(other));
        other.signal_existing(Some(self));
        // A blocked-on key that held data before the swap changed too (a stream swapped
        // away ends its XREADGROUP waiters' wait, as Redis's scanDatabaseForDeletedStreams).
        self.ready_all_blocked();
        other.ready_all_blocked();
        // Each database's snapshot sink writes that database's number: finish both first.
        self.finish_snapshot();
        other.finish_snapshot();
        std::mem::swap(&mut self.epoch, &mut other.epoch);
        std::mem::swap(&mut self.map, &mut other.map);
        std::mem::swap(&mut self.volatile, &mut other.volatile);
        std::mem::swap(&mut self.series_index, &mut other.series_index);
        std::mem::swap(&mut self.slots, &mut other.slots);
        // Clients blocked on a key that now holds data are served (Redis's SWAPDB does so).
        self.ready_all_blocked();
        other.ready_all_blocked();
    }

    /// Samples up to `samples` keys with an expiry and removes those that have expired.
    /// Returns (sampled, expired). Redis's active expiry repeats while over a quarter of a
    /// sample expired; the caller drives that loop and bounds its time.
    pub fn expire_sample(&mut self, samples: usize, now_ms: u64) -> (usize, usize) {
        let mut rng = rand::thread_rng();
        let n = samples.min(self.volatile.len());
        let mut expired = 0;
        for _ in 0..n {
            let Some(key) = self
                .volatile
                .random_entry(&mut rng)
                .map(|(k, _)| k.to_vec())
            else {
                break;
            };
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
            if !expired(&self.volatile, &key, e, now_ms) {
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
    pub fn scan(
        &self,
        cursor: u64,
        count: usize,
        now_ms: u64,
        mut visit: impl FnMut(&[u8], &Entry),
    ) -> (u64, usize) {
        let mut visited = 0;
        let next = self.map.scan(cursor, count.max(1), |k, e| {
            visited += 1;
            if !expired(&self.volatile, k, e, now_ms) {
                visit(k, e);
            }
        });
        (next, visited)
    }

    /// Evicts one key chosen by `policy` among `samples` random candidates (Redis's
    /// approximated LRU/LFU: the best candidate of a sample; volatile policies sample keys
    /// with an expiry). The best candidate is the least recently accessed (LRU), the lowest
    /// decayed LFU counter, ties to the least recently accessed (LFU), the oldest insertion
    /// (FIFO) or the nearest expiry (volatile-ttl). Returns the evicted key and an estimate of
    /// the bytes freed, or None if there is no candidate (or the policy is noeviction).
    pub fn evict_one(&mut self, policy: EvictionPolicy, samples: usize) -> Option<(Key, usize)> {
        if policy == EvictionPolicy::NoEviction {
            return None;
        }
        let mut rng = rand::thread_rng();
        let now_ms = self.clock_s as u64 * 1000;
        let (now_lru, now_min) = (lru_clock(now_ms), lfu_minutes(now_ms));
        let (decay, fifo_now) = (self.tracking.lfu_decay_time_min, self.fifo_seq & CLOCK_MASK);
        // Lower scores are evicted first: the longest idle (LRU), the lowest decayed counter
        // then the longest since its last decrement (LFU), the oldest insertion (FIFO).
        let score = |e: &Entry, expire_at_ms: u64| -> u64 {
            match policy {
                EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
                    (CLOCK_MASK - clock_elapsed(now_lru, e.access(), CLOCK_MASK)) as u64
                }
                EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => {
                    let idle_min = clock_elapsed(now_min, e.access() >> 8, LFU_MINUTES_MASK);
                    (e.lfu_decayed_to(now_min, decay) as u64) << 32
                        | (LFU_MINUTES_MASK - idle_min) as u64
                }
                EvictionPolicy::AllKeysFifo => {
                    (CLOCK_MASK - (fifo_now.wrapping_sub(e.access()) & CLOCK_MASK)) as u64
                }
                EvictionPolicy::VolatileTtl => expire_at_ms,
                EvictionPolicy::AllKeysRandom
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::NoEviction => 0,
            }
        };
        let random = matches!(
            policy,
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom
        );
        // `maxmemory-samples` goes up to 2^31 - 1: bound the work by the table's size, as
        // Redis's dictGetSomeKeys does (at most the dict's size, in ten times as many steps).
        // The draws are with replacement, so a small table gets 32 per key (a key is missed
        // with probability e^-32), and never fewer than 64.
        let pool = if policy.volatile_only() { self.volatile.len() } else { self.map.len() };
        let draws = if random { 1 } else { samples.clamp(1, pool.saturating_mul(32).max(64)) };
        let mut best: Option<(Key, u64)> = None;
        for _ in 0..draws {
            let (key, s) = if policy.volatile_only() {
                let (key, &at) = self.volatile.random_entry(&mut rng)?;
                let Some(e) = self.map.get(key) else { continue };
                (key, score(e, at))
            } else {
                let (key, e) = self.map.random_entry(&mut rng)?;
                (key, score(e, 0))
            };
            if best.as_ref().is_none_or(|(_, b)| s < *b) {
                best = Some((key.into(), s));
            }
        }
        let (key, _) = best?;
        let d = self.remove_entry(&key)?;
        self.evicted_keys_total += 1;
        self.signal_modified(&key);
        let freed = key.len() + d.entry.value.heap_bytes() + ENTRY_SLOT_BYTES;
        Some((key, freed))
    }

    /// Keys matching the glob `pattern` that have not expired.
    pub fn keys_matching(&self, pattern: &[u8], now_ms: u64) -> Vec<Key> {
        let all = pattern == b"*";
        self.map
            .iter()
            .filter(|(k, e)| {
                !expired(&self.volatile, k, e, now_ms) && (all || glob_match(pattern, k, false))
            })
            .map(|(k, _)| k.into())
            .collect()
    }

    /// Visits every live key matching `pattern` (Redis's glob) with its entry, in table
    /// order, without copying keys out (ATTRIBUTE's scan over every user's stream).
    pub fn for_each_matching(&self, pattern: &[u8], now_ms: u64, mut f: impl FnMut(&[u8], &Entry)) {
        let all = pattern == b"*";
        for (k, e) in self.map.iter() {
            if !expired(&self.volatile, k, e, now_ms) && (all || glob_match(pattern, k, false)) {
                f(k, e);
            }
        }
    }

    /// Bytes used by this database: the tables' exact memory plus the values' heap bytes.
    pub fn approx_bytes(&self) -> usize {
        self.table_bytes()
            + self
                .map
                .iter()
                .map(|(_, e)| e.value.heap_bytes())
                .sum::<usize>()
    }

    /// Bytes of the tables alone (slots, control bytes, directories, out-of-line keys).
    pub fn table_bytes(&self) -> usize {
        self.map.memory_bytes() + self.volatile.memory_bytes()
    }

    /// The tables' bytes apart: (the main table, the expiry index), for MEMORY STATS's
    /// `overhead.hashtable.main` and `.expires`.
    pub fn table_bytes_split(&self) -> (usize, usize) {
        (self.map.memory_bytes(), self.volatile.memory_bytes())
    }

    /// What `key` costs (MEMORY USAGE), by the same measure eviction uses for what it frees:
    /// its slot and the table's share of overhead, the key's bytes, the value's heap bytes.
    /// Not an access; `None` if the key does not exist.
    pub fn key_memory_bytes(&mut self, key: &[u8], now_ms: u64) -> Option<usize> {
        let e = self.peek(key, now_ms)?;
        Some(ENTRY_SLOT_BYTES + key.len() + e.heap_bytes())
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

    /// Reports that `key` was modified: raises its watchers' flags, and queues it as ready
    /// if clients are blocked on it.
    pub fn signal_modified(&mut self, key: &[u8]) {
        if OBSERVING.load(Ordering::Relaxed) {
            tell_observer(key);
        }
        if !self.blocking.is_empty() && self.blocking.contains_key(key) {
            self.mark_ready(key);
        }
        if self.watched.is_empty() {
            return;
        }
        if let Some(flags) = self.watched.get(key) {
            for f in flags {
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Queues `key` as ready for the clients blocked on it, without touching its watchers:
    /// a change that Redis signals to blocked readers only (XGROUP DESTROY).
    pub fn signal_ready(&mut self, key: &[u8]) {
        if !self.blocking.is_empty() && self.blocking.contains_key(key) {
            self.mark_ready(key);
        }
    }

    /// Registers one more client blocked on `key`.
    pub fn block_key(&mut self, key: &[u8]) {
        *self.blocking.entry(key.into()).or_default() += 1;
    }

    /// Removes one registration of `key` (a served, timed-out or disconnected client).
    pub fn unblock_key(&mut self, key: &[u8]) {
        if let Some(n) = self.blocking.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                self.blocking.remove(key);
            }
        }
    }

    /// Whether any client is blocked on a key of this database.
    pub fn has_blocked(&self) -> bool {
        !self.blocking.is_empty()
    }

    fn mark_ready(&mut self, key: &[u8]) {
        // Few keys are ready at once (those one command touched): a scan beats a set.
        if !self.ready.iter().any(|k| &k[..] == key) {
            self.ready.push(key.into());
        }
    }

    /// Takes the blocked-on keys modified since the last call, in the order they became ready.
    pub fn take_ready(&mut self) -> Vec<Key> {
        std::mem::take(&mut self.ready)
    }

    /// Queues as ready every blocked-on key that exists now: what FLUSHDB is about to take
    /// away, what SWAPDB takes away and what it brings in. The waiters themselves decide
    /// what the change means for them (the server's `blocking.rs`).
    pub fn ready_all_blocked(&mut self) {
        let keys: Vec<Key> = self.blocking.keys().filter(|k| self.map.get(k).is_some()).cloned().collect();
        for k in keys {
            self.mark_ready(&k);
        }
    }

    /// Raises the watchers of the watched keys that exist here or in `other` (FLUSHDB empties
    /// this database; SWAPDB replaces it with `other`): as Redis's `touchAllWatchedKeysInDb`,
    /// a key absent before and after is no change.
    pub fn signal_existing(&self, other: Option<&Db>) {
        for (key, flags) in &self.watched {
            if self.map.get(key).is_some() || other.is_some_and(|o| o.map.get(key).is_some()) {
                for f in flags {
                    f.store(true, Ordering::Release);
                }
            }
        }
    }
}

/// Prefetches a sketch's explicit list, up to 16 cache lines (128 values; the default
/// threshold promotes at 160): a binary search visits lines all over it.
fn prefetch_explicit(h: &abacus_hll::Hll) {
    if let Some(values) = h.explicit_values() {
        for line in values.chunks(8).take(16) {
            abacus_table::prefetch_read(line.as_ptr());
        }
        // The list need not start on a line boundary: its last line too.
        if let Some(last) = values.get(..128).and_then(|v| v.last()) {
            abacus_table::prefetch_read(last as *const i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn s(v: &str) -> Value {
        Value::str(v.as_bytes())
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
        // FLUSHDB raises only the watchers of keys that existed (as Redis).
        db.take_all();
        assert!(!f.load(Ordering::Acquire));
        db.set(b"k", s("v"), 0, 0);
        f.store(false, Ordering::Release);
        db.take_all();
        assert!(f.load(Ordering::Acquire));
        // SWAPDB: a key in neither database is no change; in the other one, it is.
        f.store(false, Ordering::Release);
        let mut other = Db::new();
        db.swap_contents(&mut other);
        assert!(!f.load(Ordering::Acquire));
        other.set(b"k", s("v"), 0, 0);
        db.swap_contents(&mut other);
        assert!(f.load(Ordering::Acquire));
        db.unwatch(b"k", &f);
        f.store(false, Ordering::Release);
        assert!(db.get(b"k", 0).is_some());
        db.signal_existing(None);
        assert!(!f.load(Ordering::Acquire));
    }

    #[test]
    fn eviction_respects_the_policy() {
        let mut db = Db::new();
        for i in 0..50 {
            db.set(format!("p{i}").as_bytes(), s("v"), 0, 1_000);
        }
        assert_eq!(
            db.evict_one(EvictionPolicy::VolatileLru, 5),
            None,
            "no key has an expiry"
        );
        db.set(b"soon", s("v"), 5_000_000, 1_000);
        db.set(b"later", s("v"), 9_000_000, 1_000);
        // volatile-ttl with a sample covering both volatile keys evicts the nearest expiry.
        assert!(db.evict_one(EvictionPolicy::VolatileTtl, 64).is_some());
        assert!(db.get(b"soon", 2_000).is_none());
        assert!(db.get(b"later", 2_000).is_some());
        // allkeys-lru with a large sample over three keys evicts the least recently used one
        // (a given key escapes 64 random draws with probability (2/3)^64).
        let mut lru = Db::new();
        for (k, at) in [
            (&b"a"[..], 3_000_000u64),
            (b"b", 1_000_000),
            (b"c", 2_000_000),
        ] {
            lru.set(k, s("v"), 0, at);
        }
        assert!(lru.evict_one(EvictionPolicy::AllKeysLru, 64).is_some());
        assert!(lru.get_shared(b"b", 0).is_none());
        assert!(lru.get_shared(b"a", 0).is_some() && lru.get_shared(b"c", 0).is_some());
        assert_eq!(lru.evicted_keys_total, 1);
        assert_eq!(db.evicted_keys_total, 1);
    }

    #[test]
    fn fifo_order_holds_across_sequence_wrap() {
        let mut db = Db::new();
        db.set_tracking(Tracking {
            policy: EvictionPolicy::AllKeysFifo,
            ..Tracking::default()
        });
        db.fifo_seq = u32::MAX - 50;
        for i in 0..100u32 {
            db.set(&i.to_be_bytes(), s("v"), 0, 0);
        }
        // Keys 0..50 were stamped before the wrap (large numbers), 51.. after (small ones):
        // wrapping ages still put the pre-wrap keys first.
        for _ in 0..40 {
            let (k, _) = db.evict_one(EvictionPolicy::AllKeysFifo, 64).unwrap();
            let i = u32::from_be_bytes(k[..].try_into().unwrap());
            assert!(
                i < 60,
                "evicted {i}, a key inserted after the wrap, while older ones remain"
            );
        }
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
            (any::<u8>(), any::<u8>(), prop_oneof![Just(0u64), 1u64..50])
                .prop_map(|(k, v, t)| Op::Set(k % 32, v, t)),
            any::<u8>().prop_map(|k| Op::Del(k % 32)),
            (any::<u8>(), 0u64..50).prop_map(|(k, t)| Op::Expire(k % 32, t)),
            any::<u8>().prop_map(|k| Op::Get(k % 32)),
            (1u64..10).prop_map(Op::Tick),
        ]
    }

    proptest! {
        /// A snapshot taken while keys are set, deleted and expired (in any interleaving with
        /// its sweep) holds exactly the keys and values of its point in time, each once.
        #[test]
        fn snapshot_is_point_in_time(
            before in proptest::collection::vec((0u8..64, any::<u8>(), any::<bool>()), 0..100),
            during in proptest::collection::vec((0u8..80, any::<u8>(), 0u8..5), 0..200),
            twice in any::<bool>(),
        ) {
            let mut db = Db::new();
            for (k, v, ttl) in &before {
                db.set(&[*k], Value::Str(vec![*v].into()), if *ttl { 1000 + *v as u64 } else { 0 }, 1);
            }
            type Got = Vec<(Vec<u8>, Vec<u8>, u64)>;
            for round in 0..if twice { 2 } else { 1 } {
                let mut expected: Got = db.map.iter().map(|(k, e)| (k.to_vec(), match e.value() { ValueRef::Str(s) => s.to_vec(), _ => unreachable!() }, 0)).collect();
                for x in expected.iter_mut() {
                    x.2 = db.expire_at(&x.0);
                }
                let got = Arc::new(std::sync::Mutex::new(Got::new()));
                let sink_got = got.clone();
                db.snapshot_begin(Box::new(move |k, e, at| {
                    let v = match e.value() { ValueRef::Str(s) => s.to_vec(), _ => unreachable!() };
                    sink_got.lock().unwrap().push((k.to_vec(), v, at));
                }));
                for (k, v, op) in &during {
                    match op {
                        0 => db.set(&[*k], Value::Str(vec![*v, round].into()), 0, 1),
                        1 => { db.remove(&[*k], 1); }
                        2 => { db.set_expire(&[*k], 5); db.get(&[*k], 10); }
                        3 => { db.set_expire(&[*k], if *v % 2 == 0 { 0 } else { 2000 + *v as u64 }); }
                        _ => { db.snapshot_step(3); }
                    }
                }
                db.finish_snapshot();
                prop_assert!(!db.snapshot_active());
                let mut got = got.lock().unwrap().clone();
                got.sort();
                expected.sort();
                prop_assert_eq!(got, expected);
            }
        }
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
                        db.set(&[k], Value::Str(vec![v].into()), at, now);
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
                        let got = db.get(&[k], now).map(|e| match e.value() { ValueRef::Str(s) => s[0], _ => unreachable!("only strings are set here") });
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

    proptest! {
        /// The index by hash slot agrees with a scan of the map under random sets, deletes,
        /// expiries (lazy and active), FLUSHDB (`take_all`) and SWAPDB, whether it was built
        /// before the operations (maintained) or after (built from the keys present).
        #[test]
        fn slot_index_matches_a_scan(ops in proptest::collection::vec(op(), 1..300), early in any::<bool>(), flush_at in 0usize..400, swap_at in 0usize..400) {
            fn slot_of(k: &[u8]) -> u16 { (k[0] % 8) as u16 }
            let mut db = Db::new();
            let mut other = Db::new();
            other.set(b"\x03", Value::Str(b"o".to_vec().into()), 0, 1);
            if early {
                db.slot_keys(0, 0, slot_of, 1);
            }
            let mut now = 1u64;
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Set(k, v, t) => db.set(&[k], Value::Str(vec![v].into()), if t == 0 { 0 } else { now + t }, now),
                    Op::Del(k) => { db.remove(&[k], now); }
                    Op::Expire(k, t) => { db.set_expire(&[k], now + t + 1); }
                    Op::Get(k) => { db.get(&[k], now); }
                    Op::Tick(d) => { now += d; db.expire_sample(5, now); }
                }
                if i == flush_at {
                    drop(db.take_all());
                }
                if i == swap_at {
                    db.swap_contents(&mut other);
                }
            }
            for d in [&mut db, &mut other] {
                d.slot_keys(0, 0, slot_of, now);
                // Every key the map holds (expired or not) is indexed once, and nothing else.
                prop_assert_eq!(d.slots.as_ref().map(|ix| ix.len()), Some(d.map.len()));
                for slot in 0..8u16 {
                    let mut want: Vec<Vec<u8>> = Vec::new();
                    d.for_each_matching(b"*", now, |k, _| if slot_of(k) == slot { want.push(k.to_vec()) });
                    want.sort();
                    let (mut got, live) = d.slot_keys(slot, usize::MAX, slot_of, now);
                    got.sort();
                    prop_assert_eq!(live, want.len());
                    prop_assert_eq!(got.iter().map(|k| k.to_vec()).collect::<Vec<_>>(), want);
                    let (few, _) = d.slot_keys(slot, 2, slot_of, now);
                    prop_assert_eq!(few.len(), live.min(2));
                }
            }
        }
    }
}
