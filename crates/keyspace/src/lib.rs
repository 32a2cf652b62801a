//! The keyspace of one shard: numbered databases of typed values with expiry.
//!
//! This crate is the interface the server's shards program against. It owns the data of one
//! shard and nothing else: it does no I/O, spawns no threads and knows nothing about the
//! protocol. The server's shard thread is its only user at run time, so nothing here is
//! synchronised.
//!
//! What it is for: lookups with lazy expiry, inserts that follow Redis's overwrite rules (an
//! overwrite clears the TTL), an expiry index with sampled active expiry, SCAN cursors, random
//! keys, glob matching, WATCH notifications, and `maxmemory` eviction by sampling (LRU, LFU,
//! FIFO, random, TTL; see `evict.rs`).
//!
//! The map underneath is `abacus-table` (segmented growth, never a whole-table rehash; keys
//! inline in the slot). What it is not: a memory meter (the embedding program decides when it
//! is over its limit, as the server does from jemalloc's figures, and calls
//! [`Db::evict_one`] until it is not) or a server.
//!
//! Embedded use (times are Unix milliseconds, passed in so that the caller owns the clock):
//!
//! ```
//! use abacus_keyspace::{Db, EvictionPolicy, Tracking, Value};
//!
//! let now = 1_700_000_000_000;
//! let mut db = Db::new();
//! db.set_tracking(Tracking { policy: EvictionPolicy::AllKeysLfu, ..Tracking::default() });
//! db.set(b"user:1", Value::str(b"16 bytes of data"), 0, now);
//! // APPEND in place (copies into the value's spare room when it fits); `str_mut` gives the
//! // string for any other change.
//! if let Some(e) = db.get_mut(b"user:1", now) {
//!     assert_eq!(e.append(b"more"), Some(20));
//!     e.str_mut().unwrap().truncate(18);
//! }
//! assert_eq!(db.get(b"user:1", now).unwrap().str_bytes(), Some(&b"16 bytes of datamo"[..]));
//! db.set(b"session:9", Value::str(b"x"), now + 60_000, now); // expires in 60 s
//! assert!(db.get(b"session:9", now + 60_000).is_none());
//! // Over the memory limit: evict by the policy; the key is returned for logging.
//! let (key, bytes_freed_estimate) = db.evict_one(EvictionPolicy::AllKeysLfu, 5).unwrap();
//! assert_eq!(&key[..], b"user:1");
//! assert!(bytes_freed_estimate > 0 && db.is_empty());
//! ```

//! Unsafe code, in two files, each stating its invariant at the top:
//! - `strbuf.rs` ([`StrBuf`], the string value): `tag` says whether `ptr` is a live heap
//!   allocation of `cap` bytes owned by the value (with `len <= cap`, bytes up to `len`
//!   initialised) or the fields are inline bytes that are never dereferenced.
//! - `packed.rs` (`PackedValue`, a value in 17 bytes): for pointer kinds the pointer bytes are
//!   the sole owner of what `Value` would own (a `StrBuf` heap buffer or a `Box::into_raw`
//!   of the kind's type), and every path that turns them back into an owner consumes them.
//!
//! Both are checked by property tests against plain models (`Vec<u8>`, `Value`) that also run
//! under Miri (`scripts/miri.sh`).

pub mod db;
pub mod evict;
#[cfg(test)]
mod evict_tests;
pub mod glob;
pub mod packed;
mod slots;
pub mod strbuf;
pub mod value;

pub use db::{observe_modifications, set_dense_key_tables, set_modified_observer, set_no_touch, Db, DbEvent, Detached, Entry, WatchFlag};
pub use evict::{EvictionPolicy, Tracking, LFU_INIT_VAL};
pub use glob::glob_match;
pub use packed::{StrMut, PACKED_INLINE_MAX};
pub use strbuf::StrBuf;
pub use value::{Value, ValueRef, ValueType};
pub use abacus_table::prefetch_read;

/// Keys are owned byte strings; boxed slices save the capacity word a `Vec` would carry.
pub type Key = Box<[u8]>;
