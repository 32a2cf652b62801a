//! SORT and SORT_RO: sort the elements of a list, set or sorted set, numerically or (ALPHA)
//! as strings, optionally by the values of other keys (`BY weight_*`, `BY obj_*->field`),
//! return them or other keys' values (`GET #`, `GET data_*`, `GET obj_*->field`), with LIMIT,
//! ASC/DESC, and STORE the result in a list. Semantics, replies and errors are Redis 7.0's
//! (`sort.c`).
//!
//! Why a connection-level command: BY and GET patterns name keys that only exist once the
//! elements are known, so they may live on any shard, and the command table cannot list them.
//! SORT therefore runs in the connection task and takes the shards it needs itself: every
//! shard when it has a pattern that reads other keys (flag ALL_SHARDS, so a transaction that
//! holds SORT locks them all too), otherwise just the shards of its key and STORE key. Under
//! those locks it reads the source on its shard, fetches the pattern keys in one job per
//! shard, sorts in the connection task, and writes the destination on its shard. The
//! destination is logged as `DEL dst` followed by `RPUSH dst elements...` (deterministic,
//! whatever order a set's members came in), written with the locks' record.
//!
//! Keyspace notifications: what each lookup made the keyspace record (a missing key's
//! "keymiss", an expired one's "expired") is taken from the databases' journals right after
//! that lookup, in the job, and published by the connection in Redis's order: the source,
//! then BY's lookups in the source's order, then GET's element by element, then the
//! destination's "sortstore" (or "del" when an empty result deleted it).
//!
//! What each job does on its shard (parsing, reading the source, a pattern's lookups,
//! writing the destination) is below the network layer, in `abacus_commands::sort`; this
//! file holds the table entries and the fan-out.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use abacus_commands::sort::{compare_bytes, load, parse_weight, read_pattern_value, store, store_key, substitute, take_journal, Journal, Options, Source};
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::{shutting_down, Access, Locks};
use abacus_engine::shard::{now_ms, shard_of, Shard};

const G: &str = "generic";

pub const COMMANDS: &[Spec] = &[
    Spec::conn("sort", -2, WRITE | DENYOOM | ALL_SHARDS | ACL_COLLECTIONS | ACL_DANGEROUS, (1, 1, 1), conn_fn!(|conn, access, call| sort(conn, access, &call.args, false).await), G, "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.").with_trailing_key(store_key)
        .docs("1.0.0", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).")
        .key_specs("RO access index=1 range=0,1,0; RO access unknown; OW update unknown")
        .args("
            key type=key key_spec_index=0
            pattern type=pattern key_spec_index=1 token=BY flags=optional
            offset_count type=block token=LIMIT flags=optional
              offset type=integer
              count type=integer
            pattern type=pattern key_spec_index=1 token=GET flags=optional,multiple,multiple_token
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
            sorting type=pure-token token=ALPHA flags=optional
            destination type=key key_spec_index=2 token=STORE flags=optional
        "),
    Spec::conn("sort_ro", -2, READONLY | ALL_SHARDS | ACL_COLLECTIONS | ACL_DANGEROUS, (1, 1, 1), conn_fn!(|conn, access, call| sort(conn, access, &call.args, true).await), G, "Returns the sorted elements of a list, a set, or a sorted set.")
        .docs("7.0.0", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).")
        .key_specs("RO access index=1 range=0,1,0; RO access unknown")
        .args("
            key type=key key_spec_index=0
            pattern type=pattern key_spec_index=1 token=BY flags=optional
            offset_count type=block token=LIMIT flags=optional
              offset type=integer
              count type=integer
            pattern type=pattern key_spec_index=1 token=GET flags=optional,multiple,multiple_token
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
            sorting type=pure-token token=ALPHA flags=optional
        "),
];

/// Looks up `pattern` for every element: one job per shard holding any of the keys. Returns
/// the values and, per element, what its lookup recorded.
async fn fetch(conn: &Conn, access: Access<'_>, db: usize, pattern: &[u8], elements: &[Bytes]) -> Option<(Vec<Option<Bytes>>, Vec<Journal>)> {
    let mut journals: Vec<Journal> = elements.iter().map(|_| Journal::new()).collect();
    if &pattern[..] == b"#" {
        return Some((elements.iter().cloned().map(Some).collect(), journals));
    }
    let n = conn.worker.shards();
    let mut by_shard: BTreeMap<usize, Vec<(usize, Vec<u8>, Option<Vec<u8>>)>> = BTreeMap::new();
    for (i, e) in elements.iter().enumerate() {
        if let Some((key, field)) = substitute(pattern, e) {
            by_shard.entry(shard_of(&key, n)).or_default().push((i, key, field));
        }
    }
    let mut out: Vec<Option<Bytes>> = vec![None; elements.len()];
    for (shard, lookups) in by_shard {
        let found = conn
            .worker
            .run(access, shard, move |s: &mut Shard| {
                let now = now_ms();
                if db >= s.dbs.len() {
                    return Vec::new();
                }
                lookups
                    .into_iter()
                    .map(|(i, k, f)| {
                        let v = read_pattern_value(&mut s.dbs[db], &k, f.as_deref(), now);
                        (i, v, take_journal(&mut s.dbs))
                    })
                    .collect::<Vec<_>>()
            })
            .await?;
        for (i, v, j) in found {
            out[i] = v;
            journals[i] = j;
        }
    }
    Some((out, journals))
}

pub async fn sort(conn: &mut Conn, access: Access<'_>, a: &[Arg], read_only: bool) -> Frame {
    let o = match Options::parse(a, read_only) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let n = conn.worker.shards();
    let key = Bytes::copy_from_slice(&a[1]);
    let own: Locks;
    let locks: &Locks = match access {
        Access::Locked(l) => l,
        Access::Free => {
            let wanted: Vec<usize> = if o.reads_other_keys() {
                (0..n).collect()
            } else {
                std::iter::once(&key).chain(o.store.as_ref()).map(|k| shard_of(k, n)).collect()
            };
            match conn.worker.lock(wanted).await {
                Some(l) => {
                    own = l;
                    &own
                }
                None => return shutting_down(),
            }
        }
    };
    let access = Access::Locked(locks);
    let db = conn.client.db;
    let flags = conn.worker.server.config.cmd_config().notify;
    let source = {
        let key = key.clone();
        let loaded = conn
            .worker
            .run(access, shard_of(&key, n), move |s: &mut Shard| {
                let source = load(&mut s.dbs[db], &key, now_ms());
                (source, take_journal(&mut s.dbs))
            })
            .await;
        match loaded {
            Some((source, journal)) => {
                abacus_engine::notify::publish_all(flags, &journal);
                match source {
                    Ok(source) => source,
                    Err(e) => return e,
                }
            }
            None => return shutting_down(),
        }
    };
    let mut dont_sort = o.dont_sort;
    let mut alpha = o.alpha;
    let mut by = o.by.clone();
    let is_set = matches!(source, Source::Set(_));
    let mut elements = match source {
        Source::List(v) | Source::Set(v) | Source::ZSet(v) => v,
    };
    // A set's order is arbitrary: stored results (and replicas) must not depend on it, so
    // an unsorted set is sorted as strings when stored (Redis does the same).
    if dont_sort && is_set && o.store.is_some() {
        dont_sort = false;
        alpha = true;
        by = None;
    }
    if !dont_sort {
        let weights = match &by {
            Some(pattern) => match fetch(conn, access, db, pattern, &elements).await {
                Some((w, journals)) => {
                    journals.iter().for_each(|j| abacus_engine::notify::publish_all(flags, j));
                    Some(w)
                }
                None => return shutting_down(),
            },
            None => None,
        };
        let mut keyed: Vec<(Bytes, Option<Bytes>, f64)> = Vec::with_capacity(elements.len());
        for (i, e) in elements.drain(..).enumerate() {
            let w = weights.as_ref().and_then(|w| w[i].clone());
            let score = if alpha {
                0.0
            } else {
                match (&w, &weights) {
                    (Some(v), _) => match parse_weight(v) {
                        Some(x) => x,
                        None => return err("ERR One or more scores can't be converted into double"),
                    },
                    // BY a missing key: weight 0.
                    (None, Some(_)) => 0.0,
                    (None, None) => match parse_weight(&e) {
                        Some(x) => x,
                        None => return err("ERR One or more scores can't be converted into double"),
                    },
                }
            };
            keyed.push((e, w, score));
        }
        let by_pattern = weights.is_some();
        keyed.sort_by(|x, y| {
            let c = if !alpha {
                x.2.partial_cmp(&y.2).unwrap_or(Ordering::Equal).then_with(|| compare_bytes(&x.0, &y.0))
            } else if by_pattern {
                match (&x.1, &y.1) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(p), Some(q)) => compare_bytes(p, q),
                }
            } else {
                compare_bytes(&x.0, &y.0)
            };
            if o.desc {
                c.reverse()
            } else {
                c
            }
        });
        elements = keyed.into_iter().map(|k| k.0).collect();
    } else if o.desc && !is_set {
        // Unsorted with DESC: a list or sorted set in reverse order (a set's has no meaning).
        elements.reverse();
    }
    // LIMIT, clamped as Redis does.
    let len = elements.len() as i64;
    let start = o.limit.0.max(0);
    let mut end = if o.limit.1 < 0 { len - 1 } else { start.saturating_add(o.limit.1) - 1 };
    let start = if start >= len {
        end = len - 2;
        (len - 1).max(0)
    } else {
        start
    };
    if end >= len {
        end = len - 1;
    }
    let window: Vec<Bytes> = if end >= start { elements[start as usize..=end as usize].to_vec() } else { Vec::new() };
    // GET: one column per pattern.
    let mut out: Vec<Option<Bytes>> = Vec::with_capacity(window.len() * o.get.len().max(1));
    if o.get.is_empty() {
        out.extend(window.iter().cloned().map(Some));
    } else {
        let mut columns = Vec::with_capacity(o.get.len());
        for pattern in &o.get {
            match fetch(conn, access, db, pattern, &window).await {
                Some(c) => columns.push(c),
                None => return shutting_down(),
            }
        }
        for i in 0..window.len() {
            for (c, journals) in &columns {
                abacus_engine::notify::publish_all(flags, &journals[i]);
                out.push(c[i].clone());
            }
        }
    }
    let Some(dst) = o.store else {
        return Frame::Array(out.into_iter().map(|v| v.map_or(Frame::Null, Frame::Bulk)).collect());
    };
    let count = out.len();
    let items: Vec<Bytes> = out.into_iter().map(|v| v.unwrap_or_default()).collect();
    let limits = conn.worker.server.config.cmd_config().list_limits;
    let now = now_ms();
    let (dst_job, logged) = (dst.clone(), items.clone());
    let changed = conn
        .worker
        .run(access, shard_of(&dst, n), move |s: &mut Shard| store(&mut s.dbs, db, &dst_job, &logged, &limits, now))
        .await;
    let Some((changed, journal)) = changed else { return shutting_down() };
    abacus_engine::notify::publish_all(flags, &journal);
    if changed {
        if items.is_empty() {
            abacus_engine::notify::publish(flags, abacus_engine::notify::GENERIC, db, "del", &dst);
        } else {
            abacus_engine::notify::publish(flags, abacus_engine::notify::LIST, db, "sortstore", &dst);
        }
        locks.log_command(now, db, &[abacus_commands::keys::DEL.name.as_bytes(), &dst[..]]);
        if !items.is_empty() {
            let mut cmd: Vec<&[u8]> = Vec::with_capacity(items.len() + 2);
            cmd.push(abacus_commands::lists::RPUSH.name.as_bytes());
            cmd.push(&dst[..]);
            cmd.extend(items.iter().map(|v| &v[..]));
            locks.log_command(now, db, &cmd);
        }
        conn.worker.server.durability.note_change();
    }
    Frame::Integer(count as i64)
}
