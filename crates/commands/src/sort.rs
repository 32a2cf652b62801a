//! SORT and SORT_RO's per-shard parts: parsing the call, finding STORE's key for the table,
//! reading the source's elements, one BY/GET pattern's lookups, the comparisons, and writing
//! the destination list. Each runs on one shard's databases, with no connection.
//!
//! Why SORT itself is not here: BY and GET patterns name keys that only exist once the
//! elements are known, so they may live on any shard; the command runs in the connection
//! task (the server's `cmd/sort.rs`), takes the shards it needs and calls these in one job
//! per shard. Semantics, replies and errors are Redis 7.0's (`sort.c`).

use std::cmp::Ordering;

use abacus_collections::{List, ListLimits};
use abacus_keyspace::{Db, Value, ValueRef};
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;

/// STORE's key, found as Redis's `sortGetKeys` finds it (so ACL key rules, COMMAND GETKEYS
/// and transactions see the destination): LIMIT skips two arguments, GET and BY one, and the
/// last STORE followed by an argument wins.
pub fn store_key(a: &[Arg]) -> Option<usize> {
    let mut found = None;
    let mut i = 2;
    while i < a.len() {
        if is(&a[i], "limit") {
            i += 2;
        } else if is(&a[i], "get") || is(&a[i], "by") {
            i += 1;
        } else if is(&a[i], "store") && i + 1 < a.len() {
            found = Some(i + 1);
        }
        i += 1;
    }
    found
}

/// A parsed SORT call.
pub struct Options {
    pub desc: bool,
    pub alpha: bool,
    /// LIMIT offset count (Redis's defaults: 0, -1).
    pub limit: (i64, i64),
    pub by: Option<Bytes>,
    /// BY names no key (no `*`, or `nosort`): keep the source's order.
    pub dont_sort: bool,
    pub get: Vec<Bytes>,
    pub store: Option<Bytes>,
}

impl Options {
    pub fn parse(a: &[Arg], read_only: bool) -> Result<Options, Frame> {
        let mut o = Options { desc: false, alpha: false, limit: (0, -1), by: None, dont_sort: false, get: Vec::new(), store: None };
        let mut j = 2;
        while j < a.len() {
            let left = a.len() - j - 1;
            if is(&a[j], "asc") {
                o.desc = false;
            } else if is(&a[j], "desc") {
                o.desc = true;
            } else if is(&a[j], "alpha") {
                o.alpha = true;
            } else if is(&a[j], "limit") && left >= 2 {
                let start = parse_i64(&a[j + 1]).map_err(|_| err(ERR_NOT_INTEGER))?;
                let count = parse_i64(&a[j + 2]).map_err(|_| err(ERR_NOT_INTEGER))?;
                o.limit = (start, count);
                j += 2;
            } else if is(&a[j], "store") && left >= 1 && !read_only {
                o.store = Some(Bytes::copy_from_slice(&a[j + 1]));
                j += 1;
            } else if is(&a[j], "by") && left >= 1 {
                let pattern = Bytes::copy_from_slice(&a[j + 1]);
                // No `*`: there is nothing to sort by (`BY nosort` is the idiom).
                o.dont_sort = !pattern.contains(&b'*');
                o.by = Some(pattern);
                j += 1;
            } else if is(&a[j], "get") && left >= 1 {
                o.get.push(Bytes::copy_from_slice(&a[j + 1]));
                j += 1;
            } else {
                return Err(err(ERR_SYNTAX));
            }
            j += 1;
        }
        Ok(o)
    }

    /// Whether a pattern reads keys other than the sorted one.
    pub fn reads_other_keys(&self) -> bool {
        self.by.as_ref().is_some_and(|p| p.contains(&b'*')) || self.get.iter().any(|p| &p[..] != b"#" && p.contains(&b'*'))
    }
}

/// What the keyspace recorded during one lookup: the connection publishes it in Redis's order
/// (see the server's `cmd/sort.rs`).
pub type Journal = Vec<crate::notify::Event>;

/// Takes what the databases recorded since the last call (nothing, without allocating, when
/// notifications are off).
pub fn take_journal(dbs: &mut [Db]) -> Journal {
    let mut j = Journal::new();
    crate::notify::drain_journals(dbs, &mut j);
    j
}

/// The source's elements, in its own order.
pub enum Source {
    List(Vec<Bytes>),
    Set(Vec<Bytes>),
    ZSet(Vec<Bytes>),
}

/// Reads the source key's elements (a missing key is an empty list).
pub fn load(db: &mut Db, key: &[u8], now: u64) -> Result<Source, Frame> {
    let Some(e) = db.get(key, now) else { return Ok(Source::List(Vec::new())) };
    match e.value() {
        ValueRef::List(l) => Ok(Source::List(l.iter().map(|item| Bytes::from(item.to_vec())).collect())),
        ValueRef::Set(s) => Ok(Source::Set(s.iter().map(|m| Bytes::copy_from_slice(&m)).collect())),
        ValueRef::ZSet(z) => Ok(Source::ZSet(z.iter().map(|(m, _)| Bytes::copy_from_slice(m)).collect())),
        _ => Err(err(ERR_WRONGTYPE)),
    }
}

/// The key a pattern names for `element`, and the hash field after `->` if any; None when
/// the pattern has no `*` (Redis's `lookupKeyByPattern`: a fixed key is never read).
pub fn substitute(pattern: &[u8], element: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after.windows(2).position(|w| w == b"->").filter(|&p| p + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(p) => (&after[..p], Some(after[p + 2..].to_vec())),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(postfix);
    Some((key, field))
}

/// One pattern lookup's value: a string key's bytes, a hash field; None for anything else.
pub fn read_pattern_value(db: &mut Db, key: &[u8], field: Option<&[u8]>, now: u64) -> Option<Bytes> {
    let e = db.get(key, now)?;
    match (e.value(), field) {
        (ValueRef::Hash(h), Some(f)) => h.get(f).map(Bytes::copy_from_slice),
        (ValueRef::Str(s), None) => Some(Bytes::copy_from_slice(s)),
        (ValueRef::Hll(h), None) => Some(Bytes::from(h.to_bytes())),
        _ => None,
    }
}

/// Redis's `compareStringObjects`: bytes, then length.
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

/// A numeric weight as Redis's `strtod` with its checks: the whole string, no NaN.
pub fn parse_weight(v: &[u8]) -> Option<f64> {
    parse_f64(v).ok()
}

/// Writes SORT ... STORE's result on the destination's shard: the list of `items` replacing
/// any value and TTL (Redis's setKey: an existing key fires no "new"), or, for an empty
/// result, the key deleted. Returns whether the key changed, and what the keyspace recorded.
pub fn store(dbs: &mut [Db], db: usize, dst: &[u8], items: &[Bytes], limits: &ListLimits, now: u64) -> (bool, Journal) {
    let Some(d) = dbs.get_mut(db) else { return (false, Journal::new()) };
    if items.is_empty() {
        let existed = d.remove(dst, now);
        if existed {
            d.signal_modified(dst);
        }
        return (existed, take_journal(dbs));
    }
    let mut list = List::new();
    for v in items {
        list.push_back(v, limits);
    }
    d.set(dst, Value::List(Box::new(list)), 0, now);
    d.signal_modified(dst);
    (true, take_journal(dbs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_substitute_the_first_star_and_split_hash_fields() {
        assert_eq!(substitute(b"w_*", b"3"), Some((b"w_3".to_vec(), None)));
        assert_eq!(substitute(b"o_*->f", b"a"), Some((b"o_a".to_vec(), Some(b"f".to_vec()))));
        // `->` at the end is part of the key name.
        assert_eq!(substitute(b"o_*->", b"a"), Some((b"o_a->".to_vec(), None)));
        assert_eq!(substitute(b"*_*", b"x"), Some((b"x_*".to_vec(), None)));
        assert_eq!(substitute(b"fixed", b"x"), None);
    }
}
