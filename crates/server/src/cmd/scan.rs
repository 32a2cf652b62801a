//! KEYS, SCAN and RANDOMKEY: the generic key commands that visit every shard from the
//! connection (the keyed ones, DEL, TYPE, RENAME..., are `abacus_commands::keys`).
//!
//! A SCAN cursor names a shard and a position in its hash space: `position | shard` (the low
//! 8 bits hold the shard), iterating shard 0 to the end, then shard 1, and so on; cursor 0
//! starts and ends.

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::Access;
use abacus_engine::shard::now_ms;

const G: &str = "generic";

pub const COMMANDS: &[Spec] = &[
    Spec::conn("keys", 2, READONLY | ALL_SHARDS | ACL_DANGEROUS, (0, 0, 0), conn_fn!(|conn, access, call| keys(conn, access, &call.args).await), G, "Returns all key names that match a pattern.")
        .docs("1.0.0", "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.")
        .tips("request_policy:all_shards nondeterministic_output_order")
        .args("
            pattern type=pattern
        "),
    Spec::conn("scan", -2, READONLY | ALL_SHARDS, (0, 0, 0), conn_fn!(|conn, access, call| scan(conn, access, &call.args).await), G, "Iterates over the key names in the database.")
        .docs("2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.")
        .history(&[("6.0.0", "Added the `TYPE` subcommand.")])
        .tips("nondeterministic_output request_policy:special")
        .args("
            cursor type=integer
            pattern type=pattern token=MATCH flags=optional
            count type=integer token=COUNT flags=optional
            type type=string token=TYPE since=6.0.0 flags=optional
        "),
    Spec::conn("randomkey", 1, READONLY | ALL_SHARDS, (0, 0, 0), conn_fn!(|conn, access, _| randomkey(conn, access).await), G, "Returns a random key name from the database.")
        .docs("1.0.0", "O(1)")
        .tips("request_policy:all_shards nondeterministic_output"),
];

pub async fn keys(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let db = conn.client.db;
    let pattern = Bytes::copy_from_slice(&a[1]);
    let Some(per_shard) = conn.worker.run_all(access, move |s| s.dbs[db].keys_matching(&pattern, now_ms())).await else {
        return abacus_engine::exec::shutting_down();
    };
    Frame::Array(per_shard.into_iter().flatten().map(|k| Frame::Bulk(Bytes::from(k.into_vec()))).collect())
}

/// The low bits of a SCAN cursor name the shard (up to 256 shards); the rest is a position
/// in that shard's hash space.
const SHARD_MASK: u64 = 0xff;

pub async fn scan(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let cursor: u64 = match parse_cursor(&a[1]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let (mut pattern, mut count, mut type_filter) = (None, 10usize, None);
    let mut i = 2;
    while i < a.len() {
        if i + 1 >= a.len() {
            return err(ERR_SYNTAX);
        }
        if is(&a[i], "match") {
            // A lone "*" matches everything, the empty key included (Redis special-cases it).
            pattern = (&a[i + 1][..] != b"*").then(|| Bytes::copy_from_slice(&a[i + 1]));
        } else if is(&a[i], "count") {
            count = match parse_i64(&a[i + 1]) {
                Ok(c) if c >= 1 => c as usize,
                Ok(_) => return err(ERR_SYNTAX),
                Err(e) => return e,
            };
        } else if is(&a[i], "type") {
            type_filter = Some(String::from_utf8_lossy(&a[i + 1]).to_ascii_lowercase());
        } else {
            return err(ERR_SYNTAX);
        }
        i += 2;
    }
    let shards = conn.worker.shards() as u64;
    let shard = cursor & SHARD_MASK;
    if shard >= shards {
        return Frame::Array(vec![Frame::bulk(&b"0"[..]), Frame::Array(vec![])]);
    }
    let mut shard = shard;
    let mut pos = cursor & !SHARD_MASK;
    let db = conn.client.db;
    let mut keys = Vec::new();
    let mut budget = count;
    // Visit `count` entries in all, moving on to the next shard when one is exhausted, so a
    // small or empty keyspace finishes in one call as in Redis.
    let next = loop {
        let (pattern, type_filter) = (pattern.clone(), type_filter.clone());
        let res = conn
            .worker
            .run(access, shard as usize, move |s| {
                let mut found = Vec::new();
                let (next, visited) = s.dbs[db].scan(pos, budget, now_ms(), |k, e| {
                    let type_ok = type_filter.as_deref().is_none_or(|t| e.value().value_type().name() == t);
                    let match_ok = pattern.as_ref().is_none_or(|p| abacus_keyspace::glob_match(p, k, false));
                    if type_ok && match_ok {
                        found.push(Bytes::copy_from_slice(k));
                    }
                });
                (next, found, visited)
            })
            .await;
        let Some((next_pos, found, visited)) = res else { return abacus_engine::exec::shutting_down() };
        keys.extend(found);
        budget = budget.saturating_sub(visited.max(1));
        if next_pos != 0 {
            // The shard's cursor is a position in hash space; its low bits make room for the
            // shard number. Rounding the position down can only revisit a few keys (SCAN may
            // return duplicates), never skip one. A position below 256 would round to the
            // shard's start and could repeat forever, so it is bumped to 256: skipping keys
            // whose 64-bit hash is below 256 has a probability of ~n/2^56.
            break (next_pos & !SHARD_MASK).max(SHARD_MASK + 1) | shard;
        }
        shard += 1;
        pos = 0;
        if shard >= shards {
            break 0;
        }
        if budget == 0 {
            break shard;
        }
    };
    Frame::Array(vec![Frame::bulk(next.to_string().into_bytes()), Frame::Array(keys.into_iter().map(Frame::Bulk).collect())])
}

pub async fn randomkey(conn: &mut Conn, access: Access<'_>) -> Frame {
    let db = conn.client.db;
    let Some(sizes) = conn.worker.run_all(access, move |s| s.dbs[db].len()).await else {
        return abacus_engine::exec::shutting_down();
    };
    let total: usize = sizes.iter().sum();
    if total == 0 {
        return Frame::Null;
    }
    // Pick a shard with probability proportional to its size, so every key is equally likely.
    let mut pick = rand::random::<usize>() % total;
    let mut shard = 0;
    for (i, n) in sizes.iter().enumerate() {
        if pick < *n {
            shard = i;
            break;
        }
        pick -= n;
    }
    match conn.worker.run(access, shard, move |s| s.dbs[db].random_key(now_ms())).await {
        Some(Some(k)) => Frame::Bulk(Bytes::from(k.into_vec())),
        Some(None) => Frame::Null,
        None => abacus_engine::exec::shutting_down(),
    }
}
