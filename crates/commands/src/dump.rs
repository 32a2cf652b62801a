//! DUMP and RESTORE: a value in Redis's serialization format (RDB version 10, `abacus-rdb`),
//! so that `redis-cli`, MIGRATE-style tools and client libraries copy keys between Abacus and
//! Redis in either direction.
//!
//! The conversion between Abacus's values and the codec's neutral `RdbValue` lives here, in
//! two functions with one arm per value type. A type without a codec yet falls to the
//! catch-all arm and gets an error reply, never a panic: a new value type adds its arm (a
//! Redis type's RDB form, or an Abacus-only payload under `abacus_rdb::types::ABACUS` with a
//! kind byte of its own, which Redis refuses as "Bad data format").
//!
//! A postgresql-hll sketch is a string for every client-visible purpose (TYPE, GET, SET; see
//! `abacus-keyspace`'s value.rs), so it dumps as the string of its storage-specification
//! bytes: Redis restores it as that string, and Abacus's HLL commands decode it again on
//! first use. Integer sets (Roaring bitmaps here) are Redis sets and dump as intsets or
//! hashtable sets. Streams dump as Redis 7.0's STREAM_LISTPACKS_2, consumer groups included
//! (`abacus_rdb::stream`). Time series are the one Abacus-only payload (kind 1: the series'
//! own serialization), which Redis refuses as "Bad data format".
//!
//! Encodings follow this server's listpack limits (`hash-`/`zset-max-listpack-*`), so a value
//! dumps in the encoding Redis with the same configuration would hold it in.

use abacus_collections::{CompactHash, EncodingLimits, IdSet, List, Nack, Series, Stream, StreamId, StreamLimits, ZSet};
use abacus_keyspace::{Value, ValueRef};
use abacus_protocol::{Arg, Bytes, Frame};
use abacus_rdb::RdbValue;

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Call, Ctx};

const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "generic";

pub const COMMANDS: &[Spec] = &[
    DUMP,
    Spec::keyed("restore", -4, WRITE | DENYOOM | ACL_DANGEROUS, K1, restore, G, "Creates a key from the serialized representation of a value.")
        .docs("2.6.0", "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).")
        .history(&[
            ("3.0.0", "Added the `REPLACE` modifier."),
            ("5.0.0", "Added the `ABSTTL` modifier."),
            ("5.0.0", "Added the `IDLETIME` and `FREQ` options."),
        ])
        .key_specs("OW update")
        .args("
            key type=key key_spec_index=0
            ttl type=integer
            serialized-value type=string
            replace type=pure-token token=REPLACE since=3.0.0 flags=optional
            absttl type=pure-token token=ABSTTL since=5.0.0 flags=optional
            seconds type=integer token=IDLETIME since=5.0.0 flags=optional
            frequency type=integer token=FREQ since=5.0.0 flags=optional
        "),
    // What MIGRATE sends to a cluster node: RESTORE that may use a slot the node is importing
    // (the `asking` flag), as Redis's.
    Spec::keyed("restore-asking", -4, WRITE | DENYOOM | ACL_DANGEROUS, K1, restore, G, "An internal command for migrating keys in a cluster.")
        .docs("3.0.0", "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).")
        .syscmd()
        .asking()
        .history(&[
            ("3.0.0", "Added the `REPLACE` modifier."),
            ("5.0.0", "Added the `ABSTTL` modifier."),
            ("5.0.0", "Added the `IDLETIME` and `FREQ` options."),
        ])
        .key_specs("OW update")
        .args("
            key type=key key_spec_index=0
            ttl type=integer
            serialized-value type=string
            replace type=pure-token token=REPLACE since=3.0.0 flags=optional
            absttl type=pure-token token=ABSTTL since=5.0.0 flags=optional
            seconds type=integer token=IDLETIME since=5.0.0 flags=optional
            frequency type=integer token=FREQ since=5.0.0 flags=optional
        "),
];

/// DUMP's entry, named by callers that run it (MIGRATE).
pub const DUMP: Spec = Spec::keyed("dump", 2, READONLY, K1, dump, G, "Returns a serialized representation of the value stored at a key.")
    .docs("2.6.0", "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).")
    .tips("nondeterministic_output")
    .args("
        key type=key key_spec_index=0
    ");

const ERR_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
const ERR_BAD_FORMAT: &str = "ERR Bad data format";

/// The codec's encoding thresholds under this server's configuration.
fn rdb_limits(ctx: &Ctx) -> abacus_rdb::Limits {
    abacus_rdb::Limits {
        hash_max_listpack_entries: ctx.hash_limits.max_listpack_entries,
        hash_max_listpack_value: ctx.hash_limits.max_listpack_value_bytes,
        zset_max_listpack_entries: ctx.zset_limits.max_listpack_entries,
        zset_max_listpack_value: ctx.zset_limits.max_listpack_value_bytes,
        ..abacus_rdb::Limits::default()
    }
}

/// A value in RDB terms; `Err` names a type that has no serialization yet.
pub fn to_rdb(v: ValueRef<'_>) -> Result<RdbValue, &'static str> {
    #[allow(unreachable_patterns)]
    Ok(match v {
        ValueRef::Str(s) => RdbValue::String(s.to_vec()),
        ValueRef::Hll(h) => RdbValue::String(h.to_bytes()),
        ValueRef::Set(s) => RdbValue::Set(s.iter().map(|m| m.to_vec()).collect()),
        ValueRef::Hash(h) => RdbValue::Hash(h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()),
        ValueRef::List(l) => RdbValue::List(l.iter().map(|i| i.to_vec()).collect()),
        ValueRef::ZSet(z) => RdbValue::ZSet(z.iter().map(|(m, s)| (m.to_vec(), s)).collect()),
        ValueRef::Stream(st) => RdbValue::Stream(Box::new(stream_to_rdb(st))),
        ValueRef::Series(series) => {
            let mut data = Vec::new();
            series.serialize_into(&mut data);
            RdbValue::Abacus { kind: ABACUS_SERIES, data }
        }
        // A value type added later without a codec arm: refused, not a panic.
        _ => return Err(v.value_type().name()),
    })
}

/// The Abacus-only kind byte of a time series payload (its own serialization, as snapshots
/// write it: `Series::serialize_into`). Redis refuses it as "Bad data format".
const ABACUS_SERIES: u8 = 1;

fn sid(id: StreamId) -> abacus_rdb::stream::Id {
    (id.ms, id.seq)
}

/// A stream as the RDB codec sees it: live entries, IDs and counters, groups with their PELs.
fn stream_to_rdb(st: &Stream) -> abacus_rdb::stream::RdbStream {
    use abacus_rdb::stream::{RdbConsumer, RdbGroup, RdbStream};
    RdbStream {
        entries: st.iter().map(|e| (sid(e.id), e.pairs().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())).collect(),
        last_id: sid(st.last_id()),
        first_id: sid(st.first_id()),
        max_deleted_id: sid(st.max_deleted_id()),
        entries_added: st.entries_added(),
        groups: st
            .groups()
            .map(|(name, g)| RdbGroup {
                name: name.to_vec(),
                last_id: sid(g.last_id),
                entries_read: g.entries_read,
                pel: g.pel.iter().map(|(id, n)| (sid(*id), n.delivery_time, n.delivery_count)).collect(),
                consumers: g
                    .consumers
                    .iter()
                    .map(|(name, c)| RdbConsumer { name: name.to_vec(), seen_time: c.seen_time, pel: c.pel.iter().map(|id| sid(*id)).collect() })
                    .collect(),
            })
            .collect(),
    }
}

/// A stream from the codec's form; `None` where Redis's loader refuses too (entries that do
/// not append in order, a pending entry whose consumer does not claim it, duplicate names).
fn stream_from_rdb(r: abacus_rdb::stream::RdbStream, limits: &StreamLimits) -> Option<Stream> {
    let mut st = Stream::new();
    for ((ms, seq), pairs) in &r.entries {
        let flat: Vec<&[u8]> = pairs.iter().flat_map(|(f, v)| [&f[..], &v[..]]).collect();
        st.append(StreamId::new(*ms, *seq), &flat, limits).ok()?;
    }
    let last = StreamId::new(r.last_id.0, r.last_id.1);
    if last < st.last_id() {
        return None;
    }
    st.set_last_id(last);
    st.set_entries_added(r.entries_added);
    st.set_empty_first_id(StreamId::new(r.first_id.0, r.first_id.1));
    st.set_max_deleted_id(StreamId::new(r.max_deleted_id.0, r.max_deleted_id.1));
    for g in r.groups {
        if !st.create_group(&g.name, StreamId::new(g.last_id.0, g.last_id.1), g.entries_read) {
            return None;
        }
        let group = st.group_mut(&g.name)?;
        let mut owner: std::collections::BTreeMap<StreamId, (i64, u64)> =
            g.pel.iter().map(|&((ms, seq), t, n)| (StreamId::new(ms, seq), (t, n))).collect();
        for c in g.consumers {
            let (key, created) = group.consumer_or_create(&c.name, c.seen_time);
            if !created {
                return None;
            }
            for (ms, seq) in c.pel {
                let id = StreamId::new(ms, seq);
                let (delivery_time, delivery_count) = owner.remove(&id)?;
                group.pel.insert(id, Nack { delivery_time, delivery_count, consumer: key.clone() });
                group.consumers.get_mut(&key)?.pel.insert(id);
            }
        }
        // Redis refuses a group PEL entry no consumer owns.
        if !owner.is_empty() {
            return None;
        }
    }
    Some(st)
}

/// Encoding limits a restored value is built under.
pub struct BuildLimits {
    pub set: EncodingLimits,
    pub hash: EncodingLimits,
    pub zset: EncodingLimits,
    pub list: abacus_collections::ListLimits,
    pub stream: StreamLimits,
}

/// An Abacus value from an RDB value; `None` for what Redis's loader also refuses: an empty
/// collection, a duplicate member or field, an Abacus kind this server does not know.
pub fn from_rdb(v: RdbValue, limits: &BuildLimits) -> Option<Value> {
    Some(match v {
        RdbValue::String(s) => Value::str(&s),
        RdbValue::List(items) => {
            if items.is_empty() {
                return None;
            }
            let mut l = List::new();
            for i in &items {
                l.push_back(i, &limits.list);
            }
            Value::List(Box::new(l))
        }
        RdbValue::Set(members) => {
            if members.is_empty() {
                return None;
            }
            let mut s = IdSet::new();
            for m in &members {
                if !s.insert_with_limits(m, &limits.set) {
                    return None;
                }
            }
            Value::Set(Box::new(s))
        }
        RdbValue::Hash(pairs) => {
            if pairs.is_empty() {
                return None;
            }
            let mut h = CompactHash::new();
            for (f, v) in &pairs {
                if !h.insert_with_limits(f, v, &limits.hash) {
                    return None;
                }
            }
            Value::Hash(Box::new(h))
        }
        RdbValue::ZSet(items) => {
            if items.is_empty() {
                return None;
            }
            let mut z = ZSet::new();
            for (m, s) in &items {
                if s.is_nan() || z.insert(m, *s, &limits.zset).is_some() {
                    return None;
                }
            }
            Value::ZSet(Box::new(z))
        }
        RdbValue::Stream(st) => Value::Stream(Box::new(stream_from_rdb(*st, &limits.stream)?)),
        RdbValue::Abacus { kind: ABACUS_SERIES, data } => Value::Series(Box::new(Series::deserialize(&data).ok()?)),
        // A kind this server does not know (written by a newer Abacus).
        RdbValue::Abacus { .. } => return None,
    })
}

fn dump(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    let limits = rdb_limits(ctx);
    let Some(e) = ctx.db().get(&a[1], now) else { return Frame::Null };
    match to_rdb(e.value()) {
        Ok(v) => Frame::bulk(abacus_rdb::dump(&v, &limits)),
        Err(type_name) => err(&format!("ERR DUMP is not supported for values of type '{type_name}' yet")),
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency], with
/// Redis 7.0's checks in its order: options, then an existing key (BUSYKEY), then the TTL,
/// then the payload's footer, then its contents.
fn restore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle_s, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "replace") {
            replace = true;
        } else if is(&a[j], "absttl") {
            absttl = true;
        } else if is(&a[j], "idletime") && more && freq.is_none() {
            let v = match parse_i64(&a[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if v < 0 {
                return err("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle_s = Some(v);
            j += 1;
        } else if is(&a[j], "freq") && more && idle_s.is_none() {
            let v = match parse_i64(&a[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if !(0..=255).contains(&v) {
                return err("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq = Some(v);
            j += 1;
        } else {
            return err(ERR_SYNTAX);
        }
        j += 1;
    }
    let now = ctx.now_ms;
    if !replace && ctx.db().contains(&a[1], now) {
        return err("BUSYKEY Target key name already exists.");
    }
    let ttl = match parse_i64(&a[2]) {
        Ok(t) if t < 0 => return err("ERR Invalid TTL value, must be >= 0"),
        Ok(t) => t,
        Err(e) => return e,
    };
    // A string may be as long as one a command could create; a whole value up to 8 times
    // that (a compressed payload expands; see `DecodeLimits::max_total_bytes`).
    let max_string_bytes = usize::try_from(ctx.max_string_len).unwrap_or(usize::MAX);
    let decode_limits = abacus_rdb::DecodeLimits { max_string_bytes, max_total_bytes: max_string_bytes.saturating_mul(8) };
    let rdb = match abacus_rdb::restore(&a[3], &decode_limits) {
        Ok(v) => v,
        Err(abacus_rdb::Error::Footer) => return err(ERR_PAYLOAD),
        Err(_) => return err(ERR_BAD_FORMAT),
    };
    let build = BuildLimits { set: ctx.set_limits, hash: ctx.hash_limits, zset: ctx.zset_limits, list: ctx.list_limits, stream: ctx.stream_limits };
    let Some(mut value) = from_rdb(rdb, &build) else { return err(ERR_BAD_FORMAT) };
    if let Value::Series(s) = &mut value {
        crate::ts_links::unlink_series(Some(s));
    }

    let deleted = replace && ctx.db().remove_entry(&a[1]).is_some();
    let expire_at = match ttl {
        0 => 0,
        t if absttl => t as u64,
        t => now.saturating_add(t as u64),
    };
    if expire_at != 0 && expire_at <= now {
        // Already expired: the key ends up deleted (Redis propagates a DEL when one existed).
        if deleted {
            ctx.notify(notify::GENERIC, "del", &a[1]);
            ctx.propagate_as(Call::of(&crate::keys::DEL).arg(Bytes::copy_from_slice(&a[1])));
            ctx.notify_none();
            return Frame::ok();
        }
        ctx.propagate_nothing();
        return ctx.unchanged(Frame::ok());
    }
    ctx.db().set(&a[1], value, expire_at, now);
    let tracking = ctx.db().tracking();
    if let Some(e) = ctx.db().get_mut(&a[1], now) {
        // objectSetLRUOrLFU: FREQ only under an LFU policy, IDLETIME only under LRU ones.
        if tracking.policy.is_lfu() {
            if let Some(f) = freq {
                e.set_lfu(f as u8, now);
            }
        } else if !tracking.policy.is_fifo() {
            if let Some(idle) = idle_s {
                e.set_idle_s(now, idle as u64);
            }
        }
    }
    if ttl != 0 && !absttl {
        // Replayed later, a relative TTL would restart: propagate the absolute time.
        let mut cmd: Vec<Bytes> = a.iter().map(|x| Bytes::copy_from_slice(x)).collect();
        cmd[2] = Bytes::from(expire_at.to_string());
        cmd.push(Bytes::from_static(b"ABSTTL"));
        ctx.propagate_as(Call::as_sent(cmd));
    }
    ctx.notify(notify::GENERIC, "restore", &a[1]);
    Frame::ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_keyed;

    fn dbs() -> Vec<abacus_keyspace::Db> {
        (0..2).map(|_| abacus_keyspace::Db::new()).collect()
    }

    fn bulk(f: Frame) -> Vec<u8> {
        match f {
            Frame::Bulk(b) => b.to_vec(),
            other => panic!("not a bulk: {other:?}"),
        }
    }

    #[test]
    fn every_type_round_trips_through_dump_and_restore() {
        let mut d = dbs();
        let big: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
        let mut cmds: Vec<Vec<Vec<u8>>> = vec![
            vec![b"set".to_vec(), b"s".to_vec(), b"hello".to_vec()],
            vec![b"set".to_vec(), b"n".to_vec(), b"-123".to_vec()],
            vec![b"hll.add".to_vec(), b"h".to_vec(), b"1".to_vec(), b"2".to_vec()],
            vec![b"sadd".to_vec(), b"ints".to_vec(), b"1".to_vec(), b"100000".to_vec()],
        ];
        let mut sadd = vec![b"sadd".to_vec(), b"set".to_vec()];
        let mut rpush = vec![b"rpush".to_vec(), b"list".to_vec()];
        let mut zadd = vec![b"zadd".to_vec(), b"z".to_vec()];
        let mut hset = vec![b"hset".to_vec(), b"hash".to_vec()];
        for (i, m) in big.iter().enumerate() {
            sadd.push(m.clone().into_bytes());
            rpush.push(m.clone().into_bytes());
            zadd.push(format!("{}", i as f64 / 7.0).into_bytes());
            zadd.push(m.clone().into_bytes());
            hset.push(m.clone().into_bytes());
            hset.push(i.to_string().into_bytes());
        }
        cmds.extend([sadd, rpush, zadd, hset]);
        for c in &cmds {
            let args: Vec<&[u8]> = c.iter().map(|x| &x[..]).collect();
            assert!(!run_keyed(&mut d, &args).is_error(), "{:?}", String::from_utf8_lossy(&c[0]));
        }
        for key in ["s", "n", "h", "ints", "set", "list", "z", "hash"] {
            let payload = bulk(run_keyed(&mut d, &[b"dump", key.as_bytes()]));
            let copy = format!("{key}-copy");
            assert_eq!(run_keyed(&mut d, &[b"restore", copy.as_bytes(), b"0", &payload]), Frame::ok(), "{key}");
            let original = d[0].get(key.as_bytes(), 0).unwrap().value().to_value();
            let restored = d[0].get(copy.as_bytes(), 0).unwrap().value().to_value();
            // A sketch comes back as the string of its bytes.
            let original = match original {
                Value::Hll(h) => Value::str(&h.to_bytes()),
                v => v,
            };
            assert!(original == restored, "{key}");
        }
    }

    #[test]
    fn errors_are_redis_s() {
        let mut d = dbs();
        run_keyed(&mut d, &[b"set", b"k", b"v"]);
        let payload = bulk(run_keyed(&mut d, &[b"dump", b"k"]));
        let e = |f: Frame| match f {
            Frame::Error(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("not an error: {other:?}"),
        };
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"k", b"0", &payload])), "BUSYKEY Target key name already exists.");
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"-1", &payload])), "ERR Invalid TTL value, must be >= 0");
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", b"garbage"])), ERR_PAYLOAD);
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", &payload, b"bogus"])), ERR_SYNTAX);
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", &payload, b"idletime", b"-1"])), "ERR Invalid IDLETIME value, must be >= 0");
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", &payload, b"freq", b"256"])), "ERR Invalid FREQ value, must be >= 0 and <= 255");
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", &payload, b"freq", b"1", b"idletime", b"1"])), ERR_SYNTAX);
        // A well-formed footer around bytes that are no value; an empty set; an Abacus kind
        // this server does not know.
        for v in [RdbValue::Set(vec![]), RdbValue::Abacus { kind: 9, data: vec![1] }] {
            let p = abacus_rdb::dump(&v, &abacus_rdb::Limits::default());
            assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", &p])), ERR_BAD_FORMAT);
        }
        let mut p = vec![99u8];
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = abacus_rdb::crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", &p])), ERR_BAD_FORMAT);
        // Duplicate members.
        let p = abacus_rdb::dump(&RdbValue::Hash(vec![(b"f".to_vec(), b"1".to_vec()); 2]), &abacus_rdb::Limits::default());
        assert_eq!(e(run_keyed(&mut d, &[b"restore", b"x", b"0", &p])), ERR_BAD_FORMAT);
        assert_eq!(run_keyed(&mut d, &[b"dump", b"missing"]), Frame::Null);
        assert!(!d[0].contains(b"x", 0));
    }
}
