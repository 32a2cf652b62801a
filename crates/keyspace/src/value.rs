//! Values stored under a key.
//!
//! Strings are [`StrBuf`]s: byte buffers of 24 bytes that hold up to 23 bytes inline (no heap
//! object for short values) and grow on the heap by 1.25x size classes, not 2x (`strbuf.rs`
//! says why). In the table a value is packed into 17 bytes (`packed.rs`: 16 bytes of string
//! inline) and lent out as a [`ValueRef`]. Mutation in place (APPEND, SETRANGE, SETBIT) needs an owned, growable buffer,
//! and copying a value out for GET is cheap compared with the network round trip. The encoding names OBJECT ENCODING reports are derived from the bytes the way
//! Redis chooses them at write time.
//!
//! Sets, hashes, lists, sorted sets and streams are the `abacus-collections` types ([`IdSet`],
//! [`CompactHash`], [`List`], [`ZSet`], [`Stream`]), boxed so that a `Value` stays three words whatever the
//! variant. They report their own encodings (`bitmap` / `listpack` / `hashtable` / `skiplist`;
//! `quicklist` for every list, as Redis 7.0). A key never holds an empty set, hash, list or
//! sorted set: the commands delete the key when the last member goes, as Redis does.
//!
//! A postgresql-hll sketch (`HLL.*` commands) is a string for every client-visible purpose:
//! TYPE says `string`, GET returns exactly the HLL storage specification's bytes, and SET
//! accepts bytes PostgreSQL or java-hll wrote. Re-parsing those bytes on every HLL.ADD would
//! cost a decode of the whole sketch per element, so the HLL commands keep the decoded form
//! ([`Value::Hll`]) once they have parsed a value. The two forms convert lazily, each on first
//! use by the other side:
//! - a plain string command (GET, APPEND, GETRANGE, SETBIT, LCS...) reaches the bytes only
//!   through [`Value::string_bytes_mut`], which re-serializes a decoded sketch into
//!   [`Value::Str`] first, so no string command can see anything but bytes;
//! - an HLL command on [`Value::Str`] decodes it (strictly) and stores [`Value::Hll`] back.
//!
//! Redis's own HyperLogLogs (`PF*`) are already byte-oriented (the `abacus-redis-hll` crate
//! works on the string itself), so they stay [`Value::Str`].
//!
//! Equality compares representations for strings (a `Hll` and the `Str` of its bytes are not
//! `==`) and contents for sets, hashes and lists (whatever their encodings or node layouts).

use abacus_collections::{CompactHash, IdSet, List, Series, Stream, ZSet};
use abacus_hll::Hll;

use crate::strbuf::StrBuf;

/// A stored value. `Clone` is a deep copy (COPY relies on it).
#[derive(Clone, Debug)]
pub enum Value {
    Str(StrBuf),
    /// A decoded postgresql-hll sketch: a string whose bytes are `to_bytes()`.
    Hll(Box<Hll>),
    Set(Box<IdSet>),
    Hash(Box<CompactHash>),
    List(Box<List>),
    ZSet(Box<ZSet>),
    /// A time series (TS.* commands; TYPE says `TSDB-TYPE` as RedisTimeSeries's module type).
    Series(Box<Series>),
    Stream(Box<Stream>),
}

/// A borrowed value, as a table entry gives it out (entries store values packed, see
/// `packed.rs`, so they lend the parts rather than a `&Value`). The type, encoding and
/// equality rules of values live here, and `Value` uses them through [`Value::as_ref`].
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'a> {
    Str(&'a [u8]),
    Hll(&'a Hll),
    Set(&'a IdSet),
    Hash(&'a CompactHash),
    List(&'a List),
    ZSet(&'a ZSet),
    Series(&'a Series),
    Stream(&'a Stream),
}

impl PartialEq for ValueRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (*self, *other) {
            (ValueRef::Str(a), ValueRef::Str(b)) => a == b,
            (ValueRef::Hll(a), ValueRef::Hll(b)) => a == b,
            (ValueRef::Set(a), ValueRef::Set(b)) => {
                a.len() == b.len() && a.iter().all(|m| b.contains(&m))
            }
            (ValueRef::Hash(a), ValueRef::Hash(b)) => {
                a.len() == b.len() && a.iter().all(|(f, v)| b.get(f) == Some(v))
            }
            (ValueRef::List(a), ValueRef::List(b)) => a.len() == b.len() && a.iter().eq(b.iter()),
            // Scores compared bit for bit: -0 and 0 are different values to keep.
            (ValueRef::ZSet(a), ValueRef::ZSet(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|((ma, sa), (mb, sb))| ma == mb && sa.to_bits() == sb.to_bits())
            }
            (ValueRef::Series(a), ValueRef::Series(b)) => a == b,
            (ValueRef::Stream(a), ValueRef::Stream(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for ValueRef<'_> {}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.as_ref() == other.as_ref()
    }
}

impl Eq for Value {}

impl<'a> ValueRef<'a> {
    /// A string's encoding when Redis does not try the integer one: by length.
    pub fn text_encoding(s: &[u8]) -> &'static str {
        if s.len() <= EMBSTR_MAX_LEN {
            "embstr"
        } else {
            "raw"
        }
    }

    pub fn value_type(self) -> ValueType {
        match self {
            ValueRef::Str(_) | ValueRef::Hll(_) => ValueType::String,
            ValueRef::Set(_) => ValueType::Set,
            ValueRef::Hash(_) => ValueType::Hash,
            ValueRef::List(_) => ValueType::List,
            ValueRef::ZSet(_) => ValueType::ZSet,
            ValueRef::Series(_) => ValueType::Series,
            ValueRef::Stream(_) => ValueType::Stream,
        }
    }

    /// The encoding OBJECT ENCODING reports, as Redis would pick it for the same bytes.
    pub fn encoding(self) -> &'static str {
        match self {
            ValueRef::Str(s) => {
                if s.len() <= 20 && parse_canonical_i64(s).is_some() {
                    "int"
                } else {
                    Self::text_encoding(s)
                }
            }
            ValueRef::Hll(_) => "hll",
            ValueRef::Set(s) => s.encoding(),
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::List(l) => l.encoding(),
            ValueRef::ZSet(z) => z.encoding(),
            // A module type's object: Redis reports `raw`.
            ValueRef::Series(_) => "raw",
            ValueRef::Stream(_) => "stream",
        }
    }

    /// Heap bytes of a sketch, set or hash including its box (see [`Value::heap_bytes`]); 0
    /// for a string, whose buffer's size its owner knows.
    pub(crate) fn boxed_heap_bytes(self) -> usize {
        match self {
            ValueRef::Str(_) => 0,
            ValueRef::Hll(h) => {
                let data = h.registers().map_or(0, <[u8]>::len)
                    + h.explicit_values().map_or(0, |v| v.len() * 8);
                std::mem::size_of::<Hll>() + data
            }
            ValueRef::Set(s) => std::mem::size_of::<IdSet>() + s.heap_bytes(),
            ValueRef::Hash(h) => std::mem::size_of::<CompactHash>() + h.heap_bytes(),
            ValueRef::List(l) => std::mem::size_of::<List>() + l.heap_bytes(),
            ValueRef::ZSet(z) => std::mem::size_of::<ZSet>() + z.heap_bytes(),
            ValueRef::Series(s) => std::mem::size_of::<Series>() + s.heap_bytes(),
            ValueRef::Stream(x) => std::mem::size_of::<Stream>() + x.heap_bytes(),
        }
    }

    /// Where this value's own data starts (for prefetching before a sweep reads it): the
    /// string's bytes, or the boxed collection or sketch.
    pub fn heap_ptr(self) -> *const u8 {
        match self {
            ValueRef::Str(s) => s.as_ptr(),
            ValueRef::Hll(b) => (b as *const Hll).cast(),
            ValueRef::Set(b) => (b as *const IdSet).cast(),
            ValueRef::Hash(b) => (b as *const CompactHash).cast(),
            ValueRef::List(b) => (b as *const List).cast(),
            ValueRef::ZSet(b) => (b as *const ZSet).cast(),
            ValueRef::Series(b) => (b as *const Series).cast(),
            ValueRef::Stream(b) => (b as *const Stream).cast(),
        }
    }

    /// An owned deep copy.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::str(s),
            ValueRef::Hll(h) => Value::Hll(Box::new(h.clone())),
            ValueRef::Set(s) => Value::Set(Box::new(s.clone())),
            ValueRef::Hash(h) => Value::Hash(Box::new(h.clone())),
            ValueRef::List(l) => Value::List(Box::new(l.clone())),
            ValueRef::ZSet(z) => Value::ZSet(Box::new(z.clone())),
            ValueRef::Series(s) => Value::Series(Box::new(s.clone())),
            ValueRef::Stream(x) => Value::Stream(Box::new(x.clone())),
        }
    }

    /// The set, or `None` for any other type.
    pub fn as_set(self) -> Option<&'a IdSet> {
        match self {
            ValueRef::Set(s) => Some(s),
            _ => None,
        }
    }

    /// The hash, or `None` for any other type.
    pub fn as_hash(self) -> Option<&'a CompactHash> {
        match self {
            ValueRef::Hash(h) => Some(h),
            _ => None,
        }
    }

    /// The list, or `None` for any other type.
    pub fn as_list(self) -> Option<&'a List> {
        match self {
            ValueRef::List(l) => Some(l),
            _ => None,
        }
    }

    /// The sorted set, or `None` for any other type.
    pub fn as_zset(self) -> Option<&'a ZSet> {
        match self {
            ValueRef::ZSet(z) => Some(z),
            _ => None,
        }
    }

    /// The time series, or `None` for any other type.
    pub fn as_series(self) -> Option<&'a Series> {
        match self {
            ValueRef::Series(s) => Some(s),
            _ => None,
        }
    }

    /// The stream, or `None` for any other type.
    pub fn as_stream(self) -> Option<&'a Stream> {
        match self {
            ValueRef::Stream(x) => Some(x),
            _ => None,
        }
    }
}

impl Value {
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Str(s) => ValueRef::Str(s),
            Value::Hll(h) => ValueRef::Hll(h),
            Value::Set(s) => ValueRef::Set(s),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::List(l) => ValueRef::List(l),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Series(s) => ValueRef::Series(s),
            Value::Stream(x) => ValueRef::Stream(x),
        }
    }

    /// Where this value's own data starts (see [`ValueRef::heap_ptr`]).
    pub fn heap_ptr(&self) -> *const u8 {
        self.as_ref().heap_ptr()
    }
}

/// The empty string: what a free table slot holds (no allocation).
impl Default for Value {
    fn default() -> Value {
        Value::Str(StrBuf::new())
    }
}

// Three words whatever the variant: `StrBuf`'s tag byte leaves a niche for the other
// variants' discriminant. (Table entries store values packed in 17 bytes: `packed.rs`.)
const _: () = assert!(std::mem::size_of::<Value>() == 24);

/// The type names TYPE reports and SCAN's TYPE option matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    String,
    Set,
    Hash,
    List,
    ZSet,
    Series,
    Stream,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Set => "set",
            ValueType::Hash => "hash",
            ValueType::List => "list",
            ValueType::ZSet => "zset",
            ValueType::Series => "TSDB-TYPE",
            ValueType::Stream => "stream",
        }
    }
}

/// Redis stores strings up to 44 bytes in one allocation with the object header ("embstr").
const EMBSTR_MAX_LEN: usize = 44;

impl Value {
    /// A string value holding a copy of `bytes`.
    pub fn str(bytes: &[u8]) -> Value {
        Value::Str(StrBuf::from_slice(bytes))
    }

    pub fn value_type(&self) -> ValueType {
        self.as_ref().value_type()
    }

    /// The encoding OBJECT ENCODING reports, as Redis would pick it for the same bytes.
    pub fn encoding(&self) -> &'static str {
        self.as_ref().encoding()
    }

    /// Bytes this value occupies on the heap, for memory estimates. O(1) for strings and
    /// hashtables; a bitmap set walks its containers (about 1,500 for 10M IDs below 100M), so
    /// callers estimate on request (INFO, MEMORY), never on every write.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.heap_bytes(),
            other => other.as_ref().boxed_heap_bytes(),
        }
    }

    /// The bytes of a string value for reading or modification. A decoded sketch is
    /// serialized and becomes [`Value::Str`] (its bytes are what clients must see, and a
    /// modification makes them a plain string). `None` for sets and hashes: the caller replies
    /// WRONGTYPE.
    pub fn string_bytes_mut(&mut self) -> Option<&mut StrBuf> {
        if let Value::Hll(h) = self {
            *self = Value::Str(h.to_bytes().into());
        }
        match self {
            Value::Str(s) => Some(s),
            Value::Hll(_) | Value::Set(_) | Value::Hash(_) | Value::List(_) | Value::ZSet(_) | Value::Series(_) | Value::Stream(_) => None,
        }
    }

    /// The set, or `None` for any other type.
    pub fn as_set(&self) -> Option<&IdSet> {
        match self {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_set_mut(&mut self) -> Option<&mut IdSet> {
        match self {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }

    /// The hash, or `None` for any other type.
    pub fn as_hash(&self) -> Option<&CompactHash> {
        match self {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }

    pub fn as_hash_mut(&mut self) -> Option<&mut CompactHash> {
        match self {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }

    /// The list, or `None` for any other type.
    pub fn as_list_mut(&mut self) -> Option<&mut List> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The sorted set, or `None` for any other type.
    pub fn as_zset_mut(&mut self) -> Option<&mut ZSet> {
        match self {
            Value::ZSet(z) => Some(z),
            _ => None,
        }
    }

    /// The time series, or `None` for any other type.
    pub fn as_series_mut(&mut self) -> Option<&mut Series> {
        match self {
            Value::Series(s) => Some(s),
            _ => None,
        }
    }

    /// The stream, or `None` for any other type.
    pub fn as_stream_mut(&mut self) -> Option<&mut Stream> {
        match self {
            Value::Stream(x) => Some(x),
            _ => None,
        }
    }
}

/// Parses `s` as a signed 64-bit integer in canonical decimal form (no sign '+', no leading
/// zeros, no spaces): Redis's `string2ll`, the one definition.
pub use abacus_int::string2ll as parse_canonical_i64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(Value::str(b"123").encoding(), "int");
        assert_eq!(Value::str(b"0123").encoding(), "embstr");
        assert_eq!(Value::str(&[b'a'; 44]).encoding(), "embstr");
        assert_eq!(Value::str(&[b'a'; 45]).encoding(), "raw");
    }

    #[test]
    fn sets_and_hashes_are_typed_and_never_strings() {
        let mut set = IdSet::new();
        set.insert(b"42");
        let mut v = Value::Set(Box::new(set.clone()));
        assert_eq!((v.value_type().name(), v.encoding()), ("set", "bitmap"));
        assert!(v.string_bytes_mut().is_none());
        set.insert(b"x");
        let copy = Value::Set(Box::new(set));
        assert_ne!(v, copy);
        v.as_set_mut().unwrap().insert(b"x");
        assert_eq!(v, copy, "equal contents, different encodings");
        let mut h = CompactHash::new();
        h.insert(b"f", b"v");
        let mut v = Value::Hash(Box::new(h));
        assert_eq!((v.value_type().name(), v.encoding()), ("hash", "listpack"));
        assert!(v.string_bytes_mut().is_none());
        assert!(v.heap_bytes() > 0);
    }

    #[test]
    fn a_decoded_sketch_is_a_string_of_its_bytes() {
        let mut h = Hll::new(abacus_hll::Params::default());
        for i in 0..1000 {
            h.add_raw(abacus_hll::hash_bigint(i, 0));
        }
        let bytes = h.to_bytes();
        let mut v = Value::Hll(Box::new(h.clone()));
        assert_eq!(v.value_type(), ValueType::String);
        assert_eq!(v.encoding(), "hll");
        assert!(v.heap_bytes() >= 2048, "one byte per register at least");
        // A string command sees exactly the serialized bytes, and the value becomes a string.
        assert_eq!(v.string_bytes_mut().unwrap(), &bytes);
        assert_eq!(v, Value::str(&bytes));
        // ...which decodes back to the same sketch.
        assert_eq!(Hll::from_bytes(&bytes).unwrap(), h);
        // Modifying the bytes modifies the string, not a cached copy.
        v.string_bytes_mut().unwrap().push(0);
        assert_eq!(v, Value::str(&[bytes, vec![0]].concat()));
    }
}
