//! The byte form of one key: `[u16 db][u32 key len][key][u64 expire_at_ms][u8 flags][u8 type]
//! [u32 value len][value]`, little-endian.
//!
//! Value types: a string's bytes; a postgresql-hll sketch as its storage-specification bytes
//! (the same bytes GET returns, decoded again on load so HLL.ADD does not re-parse); sets and
//! hashes in the collections crate's byte forms, which keep their encodings; lists as their
//! element count and packed entries (`List::serialize_into`); sorted sets in their byte form,
//! which keeps the encoding; streams as their blocks and consumer groups
//! (`Stream::serialize_into`).

use abacus_collections::{CompactHash, IdSet, List, ListLimits, Series, Stream, ZSet};
use abacus_hll::Hll;
use abacus_keyspace::{Detached, Entry, Value, ValueRef};

const TYPE_STR: u8 = 0;
const TYPE_HLL: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_HASH: u8 = 3;
const TYPE_LIST: u8 = 4;
const TYPE_ZSET: u8 = 5;
/// A time series: metadata, labels, rules and its Gorilla chunks (`Series::serialize_into`).
/// 10 leaves room for other families' types.
const TYPE_SERIES: u8 = 10;
const TYPE_STREAM: u8 = 6;

const FLAG_RAW: u8 = 1;

/// Appends the byte form of `key` in database `db`, with absolute expiry `expire_at_ms`
/// (0 = none), to `out`.
pub fn encode(out: &mut Vec<u8>, db: u16, key: &[u8], e: &Entry, expire_at_ms: u64) {
    out.extend_from_slice(&db.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&expire_at_ms.to_le_bytes());
    out.push(if e.raw_encoding() { FLAG_RAW } else { 0 });
    let (ty, at) = match e.value() {
        ValueRef::Str(_) => (TYPE_STR, out.len()),
        ValueRef::Hll(_) => (TYPE_HLL, out.len()),
        ValueRef::Set(_) => (TYPE_SET, out.len()),
        ValueRef::Hash(_) => (TYPE_HASH, out.len()),
        ValueRef::List(_) => (TYPE_LIST, out.len()),
        ValueRef::ZSet(_) => (TYPE_ZSET, out.len()),
        ValueRef::Series(_) => (TYPE_SERIES, out.len()),
        ValueRef::Stream(_) => (TYPE_STREAM, out.len()),
    };
    out.push(ty);
    let len_at = at + 1;
    out.extend_from_slice(&[0; 4]);
    match e.value() {
        ValueRef::Str(s) => out.extend_from_slice(s),
        ValueRef::Hll(h) => out.extend_from_slice(&h.to_bytes()),
        ValueRef::Set(s) => s.serialize_into(out),
        ValueRef::Hash(h) => h.serialize_into(out),
        ValueRef::List(l) => l.serialize_into(out),
        ValueRef::ZSet(z) => z.serialize_into(out),
        ValueRef::Series(s) => s.serialize_into(out),
        ValueRef::Stream(x) => x.serialize_into(out),
    }
    let len = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
}

/// A decoded key.
pub struct Decoded<'a> {
    pub db: u16,
    pub key: &'a [u8],
    pub entry: Detached,
}

/// Decodes one key from the front of `bytes`; returns it and the bytes it took.
pub fn decode(bytes: &[u8]) -> Result<(Decoded<'_>, usize), String> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let end = at.checked_add(n).filter(|&e| e <= bytes.len()).ok_or_else(|| "truncated entry".to_string())?;
        let s = &bytes[at..end];
        at = end;
        Ok(s)
    };
    let db = u16::from_le_bytes(take(2)?.try_into().unwrap_or_default());
    let klen = u32::from_le_bytes(take(4)?.try_into().unwrap_or_default()) as usize;
    let key = take(klen)?;
    let expire_at_ms = u64::from_le_bytes(take(8)?.try_into().unwrap_or_default());
    let flags = take(1)?[0];
    let ty = take(1)?[0];
    let vlen = u32::from_le_bytes(take(4)?.try_into().unwrap_or_default()) as usize;
    let raw = take(vlen)?;
    let value = match ty {
        TYPE_STR => Value::str(raw),
        TYPE_HLL => Value::Hll(Box::new(Hll::from_bytes(raw).map_err(|e| format!("corrupt sketch: {e}"))?)),
        TYPE_SET => Value::Set(Box::new(IdSet::deserialize(raw)?)),
        TYPE_HASH => Value::Hash(Box::new(CompactHash::deserialize(raw)?)),
        // Nodes are rebuilt at the default size (the byte form does not keep the layout).
        TYPE_LIST => Value::List(Box::new(List::deserialize(raw, &ListLimits::REDIS_DEFAULT)?)),
        TYPE_ZSET => Value::ZSet(Box::new(ZSet::deserialize(raw)?)),
        TYPE_SERIES => Value::Series(Box::new(Series::deserialize(raw)?)),
        TYPE_STREAM => Value::Stream(Box::new(Stream::deserialize(raw)?)),
        t => return Err(format!("unknown value type {t}")),
    };
    let mut entry = Entry::new(value);
    entry.set_raw_encoding(flags & FLAG_RAW != 0);
    Ok((Decoded { db, key, entry: Detached { entry, expire_at_ms } }, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_and_truncation_is_an_error() {
        let mut set = IdSet::new();
        set.insert(b"42");
        let mut hash = CompactHash::new();
        hash.insert(b"f", b"v");
        let hll = Hll::from_bytes(&[0x11, 0x8b, 0x7f]).unwrap();
        let mut e = Entry::new(Value::str(b"hello"));
        e.set_raw_encoding(true);
        let mut list = List::new();
        for v in ["1", "007", "x", "-9"] {
            list.push_back(v.as_bytes(), &ListLimits::REDIS_DEFAULT);
        }
        let mut series = Series::new();
        series.labels.push((b"l"[..].into(), b"v"[..].into()));
        for t in [5u64, 1, 9] {
            series.add(t, t as f64 * 0.5, abacus_collections::DuplicatePolicy::Block).unwrap();
        }
        let mut zset = ZSet::new();
        zset.insert(b"m", -0.0, &abacus_collections::EncodingLimits { max_listpack_entries: 0, max_listpack_value_bytes: 64 });
        zset.insert(b"n", 1.5, &abacus_collections::ZSET_DEFAULT_LIMITS);
        let entries = [e, Entry::new(Value::Hll(Box::new(hll))), Entry::new(Value::Set(Box::new(set))), Entry::new(Value::Hash(Box::new(hash))), Entry::new(Value::List(Box::new(list))), Entry::new(Value::ZSet(Box::new(zset))), Entry::new(Value::Series(Box::new(series)))];
        let expiry = |i: usize| if i == 0 { 123 } else { 0 };
        let mut out = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            encode(&mut out, i as u16, format!("k{i}").as_bytes(), e, expiry(i));
        }
        let mut at = 0;
        for (i, e) in entries.iter().enumerate() {
            let (d, n) = decode(&out[at..]).unwrap();
            assert_eq!(d.db as usize, i);
            assert_eq!(d.key, format!("k{i}").as_bytes());
            assert_eq!(d.entry.entry.value(), e.value());
            assert_eq!(d.entry.expire_at_ms, expiry(i));
            assert_eq!(d.entry.entry.raw_encoding(), e.raw_encoding());
            for cut in 0..n {
                assert!(decode(&out[at..at + cut]).is_err());
            }
            at += n;
        }
        assert_eq!(at, out.len());
    }
}
