//! The summarizer's commands: SUMMARY.INGEST, SUMMARY.INGESTSOURCE, SUMMARY.SOURCE,
//! SUMMARY.QUERY, SUMMARY.REJECTS, SUMMARY.RULES, and SUMMARY.UPDATE (the hash write the
//! others generate). The ingest's sums are INCRBYDECIMAL: exact fixed point for decimal
//! inputs, scaled to the most decimals seen (`abacus_int::Number`; a double only for values
//! that need one), stored and logged as plain text, so `20081.07` stays `20081.07`.
//! INCRBYFLOAT keeps its IEEE-double sum (the shortest text that reads back the same; not
//! HINCRBYFLOAT's emulated long double): logs written before INCRBYDECIMAL replay to the same
//! values. MIN and MAX compare exactly (decimals) and store the value as given.
//!
//! Ingest: the connection's thread parses the payload lines (`abacus-summarizer`), folds them
//! into one write per summary key, and sends each shard its writes as one job: plain commands
//! (`SUMMARY.UPDATE`, `HLL.ADDRAW`, `SADD`, `PEXPIREAT`) run through the ordinary keyed
//! path, so WATCH, keyspace events, `maxmemory` and the log treat them as any client's
//! writes, and replay needs nothing of its own. Parsing is spread over the worker threads by
//! the connections themselves (each parses on its own thread, in slices that yield to the
//! thread's shard jobs: `parse_payloads`); each key is written only by its shard. A batch
//! holds the locks of the shards it writes while its jobs run, so it takes effect at once
//! for every other client and is ONE log record: a crash keeps all of it or none.
//! Back-pressure is the connection's: it reads no more input until its batch is applied, so
//! memory is bounded by the request size limits (`proto-max-bulk-len`,
//! `client-query-buffer-limit`) times the connections.
//!
//! Exactly once: SUMMARY.INGESTSOURCE carries a source id and the batch's start and end
//! offsets. Under the same locks it checks that the source's recorded offset (the hash
//! `__summarizer:source:<id>`, an ordinary key) equals the batch's start, then records the
//! end in the same record as the batch's writes; a batch sent twice (a client that lost the
//! reply and resent) is refused rather than counted twice, and `abacus ingest --resume`
//! asks SUMMARY.SOURCE where to continue.
//!
//! Query: one job per shard folds the summary's keys it owns into groups (keys are found by
//! their name prefix; see `abacus-summarizer`'s `keys.rs`; the fold is `abacus-commands`'
//! `summary_shard.rs`, with the other per-shard parts that need only a shard's databases),
//! the coordinator merges the shards' groups and replies one row per group, sorted by the
//! group's values. The direct apply of a batch on a shard (`apply_parts`) stays here: it
//! writes the shard's log and falls back to the keyed path, both the engine's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use abacus_collections::CompactHash;
use abacus_keyspace::{Db, Value};
use abacus_persist::log::NameCode;
use abacus_protocol::{Arg, Args, Bytes, Frame};
use abacus_int::Number;
use abacus_summarizer::{Acc, Batch, Cell, Group, GroupBy, HllOptions, KeyChange, Packed, Part, Query, Rules, Slot};

use super::args::*;
use super::summary_shard::{shard_groups, source_position, stream_entry_id};
use abacus_engine::aof::ShardLog;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::{Access, Call, Locks};
use abacus_engine::notify;
use abacus_engine::shard::{now_ms, shard_of, Ctx};
use crate::summarizer;

const K1: (i32, i32, i32) = (1, 1, 1);
const NONE: (i32, i32, i32) = (0, 0, 0);
const G: &str = "summarizer";


/// The prefix of a source's exactly-once record.
pub const SOURCE_PREFIX: &str = "__summarizer:source:";
/// Longest source id.
const MAX_SOURCE_BYTES: usize = 512;
/// Most arguments of one generated command (longer member lists are split).
const MAX_GENERATED_ARGS: usize = 1024;
const ERR_NO_RULES: &str = "ERR no summarizer rules loaded (start with --summarizer-rules FILE or run SUMMARY.RULES LOAD FILE)";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("summary.update", -5, WRITE | DENYOOM | FAST, K1, update, G, "Updates a summary hash: SUMMARY.UPDATE key field INCRBY|INCRBYFLOAT|MIN|MAX|SET value [field op value ...].")
        .abacus_docs("O(N) where N is the number of field operations.")
        .key_specs("RW access update"),
    INGEST,
    Spec::conn("summary.ingestsource", -7, WRITE | DENYOOM | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| ingest(conn, access, &call.args, true).await), G, "SUMMARY.INGEST exactly once: SUMMARY.INGESTSOURCE feed source start-offset end-offset first-line payload [payload ...].")
        .abacus_docs("O(N*M) where N is the number of lines and M the number of rules each matches."),
    Spec::conn("summary.source", 2, READONLY | FAST, NONE, conn_fn!(|conn, access, call| source(conn, access, &call.args).await), G, "Returns where a source's exactly-once ingest stopped: [offset, next line].")
        .abacus_docs("O(1)"),
    Spec::conn("summary.query", -2, READONLY | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| query(conn, access, &call.args).await), G, "Merges a summary: SUMMARY.QUERY name [FROM t] [TO t] [WHERE dim value ...] [GROUPBY dim ... | GROUPBY BUCKET].")
        .abacus_docs("O(N) where N is the number of summary keys in the time range."),
    Spec::conn("summary.rejects", 2, READONLY, NONE, conn_fn!(|conn, _, call| rejects(conn, &call.args)), G, "Returns a feed's rejected line count and the first rejected lines.")
        .abacus_docs("O(1)"),
    Spec::conn("summary.rules", -2, ADMIN, NONE, conn_fn!(|conn, _, call| rules_cmd(conn, &call.args)), G, "SUMMARY.RULES LOAD path | GET: loads or shows the summarizer rules.")
        .abacus_docs("O(N) where N is the size of the rules."),
];

/// SUMMARY.INGEST's entry: the ingest port checks its producers' ACL rights against it.
pub const INGEST: Spec = Spec::conn("summary.ingest", -3, WRITE | DENYOOM | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| ingest(conn, access, &call.args, false).await), G, "Parses feed lines and updates the summaries: SUMMARY.INGEST feed payload [payload ...].")
    .abacus_docs("O(N*M) where N is the number of lines and M the number of rules each matches.");

fn text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

// ---------------------------------------------------------------------------------------
// SUMMARY.UPDATE

enum Op {
    Incr(i64),
    IncrF(f64),
    IncrDec(Number),
    Min(Number),
    Max(Number),
    Set,
}

fn parse_f64(a: &[u8]) -> Option<f64> {
    std::str::from_utf8(a).ok()?.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// The hash at `key` for writing, created empty unless `exists` (the caller just looked).
fn summary_hash<'a>(ctx: &'a mut Ctx, key: &[u8], exists: bool) -> Result<&'a mut CompactHash, Frame> {
    let now = ctx.now_ms;
    if !exists {
        ctx.db().set(key, Value::Hash(Box::new(CompactHash::new())), 0, now);
    }
    match ctx.db().get_mut(key, now) {
        Some(e) => e.as_hash_mut().ok_or_else(|| err(ERR_WRONGTYPE)),
        None => Err(err("ERR internal error: key vanished")),
    }
}

/// SUMMARY.UPDATE key field op value [...]: every operation is checked, and every new value
/// computed from the current ones, before anything is written, so an error changes nothing.
/// Replies the number of fields whose value changed.
fn update(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if !(a.len() - 2).is_multiple_of(3) {
        return Frame::error("ERR wrong number of arguments for 'summary.update' command");
    }
    let mut ops = Vec::with_capacity((a.len() - 2) / 3);
    for t in a[2..].chunks(3) {
        let op = if t[1].eq_ignore_ascii_case(b"incrby") {
            match parse_i64(&t[2]) {
                Ok(n) => Op::Incr(n),
                Err(e) => return e,
            }
        } else if t[1].eq_ignore_ascii_case(b"incrbyfloat") {
            match parse_f64(&t[2]) {
                Some(v) => Op::IncrF(v),
                None => return err(ERR_NOT_FLOAT),
            }
        } else if t[1].eq_ignore_ascii_case(b"incrbydecimal") {
            match Number::parse(&t[2]) {
                Some(v) => Op::IncrDec(v),
                None => return err(ERR_NOT_FLOAT),
            }
        } else if t[1].eq_ignore_ascii_case(b"min") || t[1].eq_ignore_ascii_case(b"max") {
            let Some(x) = Number::parse(&t[2]) else { return err(ERR_NOT_FLOAT) };
            if t[1].eq_ignore_ascii_case(b"min") {
                Op::Min(x)
            } else {
                Op::Max(x)
            }
        } else if t[1].eq_ignore_ascii_case(b"set") {
            Op::Set
        } else {
            return err(ERR_SYNTAX);
        };
        ops.push(op);
    }
    let now = ctx.now_ms;
    let current: Option<&CompactHash> = match ctx.db().get(&a[1], now) {
        None => None,
        Some(e) => match e.as_hash() {
            Some(h) => Some(h),
            None => return err(ERR_WRONGTYPE),
        },
    };
    let mut writes: Vec<(usize, Vec<u8>)> = Vec::with_capacity(ops.len());
    for (i, (t, op)) in a[2..].chunks(3).zip(&ops).enumerate() {
        // A field named twice in one call sees its earlier new value.
        let old: Option<Vec<u8>> = writes.iter().rev().find(|(j, _)| a[2 + j * 3] == t[0]).map(|(_, v)| v.clone()).or_else(|| current.and_then(|h| h.get(&t[0])).map(<[u8]>::to_vec));
        let new = match op {
            Op::Incr(n) => {
                let cur = match &old {
                    None => 0,
                    Some(v) => match abacus_keyspace::value::parse_canonical_i64(v) {
                        Some(c) => c,
                        None => return err("ERR hash value is not an integer"),
                    },
                };
                let Some(sum) = cur.checked_add(*n) else { return err(ERR_OVERFLOW) };
                itoa::Buffer::new().format(sum).as_bytes().to_vec()
            }
            Op::IncrF(by) => {
                let cur = match &old {
                    None => 0.0,
                    Some(v) => match parse_f64(v) {
                        Some(c) => c,
                        None => return err("ERR hash value is not a float"),
                    },
                };
                let sum = cur + by;
                if !sum.is_finite() {
                    return err("ERR increment would produce NaN or Infinity");
                }
                abacus_summarizer::fmt_f64(sum).into_bytes()
            }
            Op::IncrDec(by) => {
                let mut out = Vec::new();
                if !abacus_summarizer::incr_number(old.as_deref(), *by, &mut out) {
                    return match old.as_deref().map(Number::parse) {
                        Some(None) => err("ERR hash value is not a float"),
                        _ => err("ERR increment would produce NaN or Infinity"),
                    };
                }
                out
            }
            Op::Min(x) | Op::Max(x) => {
                let keep_old = match &old {
                    None => false,
                    Some(v) => match abacus_summarizer::keeps_extreme(v, *x, matches!(op, Op::Min(_))) {
                        Some(keep) => keep,
                        None => return err("ERR hash value is not a float"),
                    },
                };
                if keep_old {
                    continue;
                }
                t[2].to_vec()
            }
            Op::Set => t[2].to_vec(),
        };
        if old.as_deref() != Some(&new[..]) {
            writes.push((i, new));
        }
    }
    let current_exists = current.is_some();
    if writes.is_empty() {
        // Nothing changed: no signal, and nothing for the log to replay.
        ctx.propagate_nothing();
        ctx.notify_none();
        return ctx.unchanged(Frame::Integer(0));
    }
    let limits = ctx.hash_limits;
    let hash = match summary_hash(ctx, &a[1], current_exists) {
        Ok(h) => h,
        Err(e) => return e,
    };
    for (i, v) in &writes {
        hash.insert_with_limits(&a[2 + i * 3], v, &limits);
    }
    ctx.notify(notify::HASH, "summary.update", &a[1]);
    Frame::Integer(writes.len() as i64)
}

// ---------------------------------------------------------------------------------------
// SUMMARY.INGEST / SUMMARY.INGESTSOURCE

fn parse_u64_arg(a: &[u8], what: &str) -> Result<u64, Frame> {
    std::str::from_utf8(a).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| Frame::error(format!("ERR {what} must be a non-negative integer")))
}

async fn ingest(conn: &mut Conn, access: Access<'_>, a: &[Arg], with_source: bool) -> Frame {
    let label = format!("client {}", conn.client.meta.id);
    ingest_on(&conn.worker, conn.client.db, access, a, with_source, label, 1).await
}

/// SUMMARY.INGEST / SUMMARY.INGESTSOURCE (`a` as their arguments) for any connection: a
/// client's, or the raw line port's (`ingest_port.rs`). `label` names the lines' source in
/// SUMMARY.REJECTS when the batch has no source id, `first_line` the number of its first line.
#[allow(clippy::too_many_arguments)]
pub async fn ingest_on(worker: &crate::node::Node, db: usize, access: Access<'_>, a: &[Arg], with_source: bool, label: String, first_line: u64) -> Frame {
    let Some(rules) = worker.server.summarizer.rules() else { return err(ERR_NO_RULES) };
    let feed_name = text(&a[1]);
    let Some(fi) = rules.feed(&feed_name) else { return Frame::error(format!("ERR no such feed '{feed_name}'")) };
    let mut source = None;
    let (mut first_line, mut payload_at) = (first_line, 2);
    if with_source {
        if a[2].is_empty() || a[2].len() > MAX_SOURCE_BYTES {
            return Frame::error(format!("ERR a source id is 1 to {MAX_SOURCE_BYTES} bytes"));
        }
        let (start, end) = match (parse_u64_arg(&a[3], "start-offset"), parse_u64_arg(&a[4], "end-offset")) {
            (Ok(s), Ok(e)) if e >= s => (s, e),
            (Ok(_), Ok(_)) => return err("ERR end-offset is before start-offset"),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        first_line = match parse_u64_arg(&a[5], "first-line") {
            Ok(l) if l >= 1 => l,
            Ok(_) => return err("ERR first-line starts at 1"),
            Err(e) => return e,
        };
        source = Some((format!("{SOURCE_PREFIX}{}", text(&a[2])), text(&a[2]), start, end));
        payload_at = 6;
    }
    if let Some(refused) = abacus_engine::snapshot::refusing_writes(&worker.server.durability, &worker.server.config) {
        return Frame::error(refused);
    }
    let mut batch = Batch::new(&rules, fi);
    let slice_bytes = worker.server.config.get_u64(abacus_engine::param!("summarizer-parse-slice-bytes")) as usize;
    let line = parse_payloads(&mut batch, &rules, &a[payload_at..], first_line, if matches!(access, Access::Free) { slice_bytes } else { 0 }).await;
    // The bounded queue between parsers and shards (`summarizer-queue-batches`): a parsed
    // batch takes a place until it is applied. A feed with `when_full = "drop"` drops a batch
    // that finds no place (counted; its events are not applied); the others wait, and so does
    // an exactly-once batch (a dropped one would be a gap in its source). Inside a
    // transaction the shards are already held: no place is taken, as waiting could deadlock.
    let capacity = worker.server.config.get_u64(abacus_engine::param!("summarizer-queue-batches")).max(1) as usize;
    let _place = match access {
        Access::Locked(_) => None,
        Access::Free if rules.feeds[fi].drop_when_full && source.is_none() => match worker.server.summarizer.queue_try_enter(capacity) {
            Some(p) => Some(p),
            None => {
                let label = match &source {
                    Some((_, id, ..)) => id.clone(),
                    None => label,
                };
                worker.server.summarizer.record_dropped(&rules, fi, &batch, &label);
                return Frame::Array(vec![Frame::Integer(0), Frame::Integer(batch.rejected as i64)]);
            }
        },
        Access::Free => Some(worker.server.summarizer.queue_enter(capacity).await),
    };
    let n = worker.shards();
    let mut per_shard: BTreeMap<usize, ShardWork> = BTreeMap::new();
    // The folded changes go to the shards as they are (shared, read-only): each shard gets
    // the list of (change, part) it owns. The key of a part is computed here once, for
    // routing, and kept in one buffer for all the shards (a part names its range of it).
    let groups = Arc::new(batch.take_groups());
    let mut part_key = String::new();
    let mut keys = String::new();
    for (gi, (key, g)) in groups.iter().enumerate() {
        for part in g.parts() {
            KeyChange::part_key(&rules, key, g, part, &mut part_key);
            let at = keys.len();
            keys.push_str(&part_key);
            per_shard.entry(shard_of(part_key.as_bytes(), n)).or_default().parts.push(PartWork { group: gi, part, key: at..keys.len() });
        }
    }
    let keys = Arc::new(keys);
    for x in batch.streams.drain(..) {
        let st = rules.summaries[x.summary].stream.as_ref().expect("a stream append comes from a stream rule");
        let mut head = vec![Bytes::from_static(b"XADD"), Bytes::from(x.key.into_bytes())];
        if let Some(max) = st.maxlen {
            head.extend([Bytes::from_static(b"MAXLEN"), Bytes::from_static(b"~"), Bytes::from(max.to_string())]);
        }
        let mut tail = Vec::with_capacity(2 * st.fields.len());
        for (name, v) in st.field_names.iter().zip(x.values) {
            tail.push(Bytes::from(name.clone()));
            tail.push(Bytes::from(v.into_bytes()));
        }
        per_shard.entry(shard_of(&head[1], n)).or_default().streams.push(StreamWork { head, time_ms: x.time_ms, tail });
    }
    if let Some((key, ..)) = &source {
        per_shard.entry(shard_of(key.as_bytes(), n)).or_default();
    }
    let source_label = match &source {
        Some((_, id, ..)) => id.clone(),
        None => label,
    };
    if per_shard.is_empty() {
        worker.server.summarizer.record(&rules, fi, &batch, &source_label);
        return ingest_reply(&batch);
    }
    let own_locks;
    let locks: &Locks = match access {
        Access::Locked(l) if per_shard.keys().all(|s| l.holds(*s)) => l,
        _ => match worker.lock(per_shard.keys().copied()).await {
            Some(l) => {
                own_locks = l;
                &own_locks
            }
            None => return abacus_engine::exec::shutting_down(),
        },
    };
    if let Some((key, _, start, end)) = &source {
        let shard = shard_of(key.as_bytes(), n);
        let k = key.clone().into_bytes();
        let Some(at) = worker.run(Access::Locked(locks), shard, move |s| source_position(&mut s.dbs[db], &k, now_ms())).await else {
            return abacus_engine::exec::shutting_down();
        };
        match at {
            Err(e) => return e,
            Ok((offset, _)) if offset != *start => {
                return Frame::error(format!("ERR source '{}' is at offset {offset}, this batch starts at {start}: nothing applied", text(&a[2])));
            }
            Ok(_) => {}
        }
        let args = Args::from_vec(vec![
            Bytes::from_static(b"HSET"),
            Bytes::from(key.clone()),
            Bytes::from_static(b"offset"),
            Bytes::from(end.to_string()),
            Bytes::from_static(b"line"),
            Bytes::from(line.to_string()),
        ]);
        let spec = &abacus_commands::hashes::HSET;
        per_shard.entry(shard).or_default().calls.push(Call { spec, args, client: 0, no_touch: false });
    }
    let cfg = worker.server.config.cmd_config();
    let xadd = &abacus_commands::streams::XADD;
    let mut jobs = Vec::with_capacity(per_shard.len());
    for (shard, work) in per_shard {
        let (groups, keys, rules) = (groups.clone(), keys.clone(), rules.clone());
        let job = worker
            .spawn_job(Access::Locked(locks), shard, move |s| {
                let now = now_ms();
                let mut failed = (0u64, None);
                let mut log = apply_parts(&mut s.dbs, &mut s.log, &mut s.rec, db, &rules, &groups, &keys, &work.parts, now, cfg, n, &mut failed);
                for c in &work.calls {
                    if let Frame::Error(e) = abacus_engine::exec::run_lone(&mut s.dbs, &mut s.log, &mut s.rec, db, c.spec, &c.args, now, cfg, n) {
                        failed.0 += 1;
                        failed.1.get_or_insert(e);
                    }
                }
                for w in work.streams {
                    let reply = match stream_entry_id(&mut s.dbs[db], &w.head[1], w.time_ms, now) {
                        Ok(id) => {
                            let mut args = w.head;
                            args.push(Bytes::from(id.to_bytes()));
                            args.extend(w.tail);
                            abacus_engine::exec::run_lone(&mut s.dbs, &mut s.log, &mut s.rec, db, xadd, &Args::from_vec(args), now, cfg, n)
                        }
                        Err(e) => e,
                    };
                    if let Frame::Error(e) = reply {
                        failed.0 += 1;
                        failed.1.get_or_insert(e);
                    }
                }
                // The direct writes' log commands, then those of the commands run through the
                // keyed path (each key's come in its order: a direct write before its ttl's
                // PEXPIREAT, a key that took the keyed path has all its commands there).
                let pending = s.log.take_pending();
                if log.is_empty() {
                    log = pending;
                } else {
                    log.extend_from_slice(&pending);
                }
                (log, failed)
            })
            .await;
        match job {
            Some(rx) => jobs.push(rx),
            None => return abacus_engine::exec::shutting_down(),
        }
    }
    let mut failed = (0u64, None);
    for rx in jobs {
        let Ok((log, (count, first))) = rx.await else { return abacus_engine::exec::shutting_down() };
        locks.add_log(log);
        failed.0 += count;
        if failed.1.is_none() {
            failed.1 = first;
        }
    }
    worker.server.summarizer.record(&rules, fi, &batch, &source_label);
    if let (count, Some(first)) = failed {
        return Frame::error(format!("ERR {count} summary writes failed, the first with: {}", String::from_utf8_lossy(&first)));
    }
    ingest_reply(&batch)
}

/// Parses and folds `payloads` into `batch`; returns the number of the line after them.
///
/// Why in slices: the connection's thread is also the thread of one shard, whose jobs (the
/// other connections' batches being applied, any client's commands) wait while it parses. A
/// 1 MB batch is tens of milliseconds of parsing; done in one stretch, every batch of another
/// connection that writes this shard stalls until it ends, and with two connections on two
/// threads each one's apply waits for the other's parse: the two cores took turns instead of
/// working together (their threads wanted 1.5 cores under `bench/w5.sh`). Yielding every
/// `slice_bytes` (`summarizer-parse-slice-bytes`, 32 KiB: about 700 v1 or 200 v2 lines, well
/// under a millisecond) lets those jobs run in between (1.9 cores wanted). Not under a
/// transaction's locks (`slice_bytes` 0): nothing else may run on the shards it holds anyway.
async fn parse_payloads(batch: &mut Batch, rules: &Rules, payloads: &[Arg], first_line: u64, slice_bytes: usize) -> u64 {
    let mut line = first_line;
    if slice_bytes == 0 || payloads.iter().map(|p| p.len()).sum::<usize>() <= slice_bytes {
        for p in payloads {
            line = batch.add_payload(rules, p, line, summarizer::REJECTS_KEPT);
        }
        return line;
    }
    let lines: usize = payloads.iter().map(|p| newlines(p) + 1).sum();
    batch.reserve_lines(rules, lines);
    for p in payloads {
        let mut rest: &[u8] = p;
        while !rest.is_empty() {
            // A slice ends at a line end (or the payload's end), so the lines and their
            // numbers are those of the whole payload.
            let cut = if rest.len() <= slice_bytes {
                rest.len()
            } else {
                match rest[slice_bytes..].iter().position(|&b| b == b'\n') {
                    Some(i) => slice_bytes + i + 1,
                    None => rest.len(),
                }
            };
            let (slice, tail) = rest.split_at(cut);
            line = batch.add_payload(rules, slice, line, summarizer::REJECTS_KEPT);
            rest = tail;
            if !rest.is_empty() {
                tokio::task::yield_now().await;
            }
        }
    }
    line
}

fn newlines(p: &[u8]) -> usize {
    p.iter().filter(|&&b| b == b'\n').count()
}

// ---------------------------------------------------------------------------------------
// Applying a batch's folded changes on a shard

/// The commands the direct writes log, by [`Logged`].
const LOGGED: [&[u8]; 4] = [b"SUMMARY.UPDATE", b"HLL.ADDRAW", b"SADD", b"HLL.CREATE"];

/// Which of [`LOGGED`] a log command is.
#[derive(Clone, Copy)]
enum Logged {
    Update,
    AddRaw,
    Sadd,
    HllCreate,
}

/// Buffers reused across the keys of one shard job.
struct Scratch {
    /// Whether the log records effects (else nothing is encoded).
    logging: bool,
    /// How the log writes each of [`LOGGED`]'s names, found once per job.
    codes: [NameCode; 4],
    /// The command being encoded: where it starts in `log` and the time before it (to drop
    /// it), the arguments it has and must have.
    open: Option<(usize, Option<u64>)>,
    args: usize,
    count: usize,
    /// A hash field's operand as SUMMARY.UPDATE states it.
    text: Vec<u8>,
    /// New hash values: (field, start, end in `vals`).
    vals: Vec<u8>,
    writes: Vec<(usize, usize, usize)>,
    packed: Vec<Packed>,
    /// The log commands of the direct writes, encoded here as they are built (no argument
    /// list packed first) rather than in the shard's pending log buffer: sized for the batch
    /// up front and handed to the coordinator as it is (the pending buffer grew by `realloc`
    /// and was moved down over its reserved header by `ShardLog::take_pending`, 3% of a v1
    /// ingest in copies).
    log: Vec<u8>,
    log_last_ms: Option<u64>,
}

impl Scratch {
    fn new(logging: bool) -> Scratch {
        Scratch {
            logging,
            codes: LOGGED.map(NameCode::of),
            open: None,
            args: 0,
            count: 0,
            text: Vec::new(),
            vals: Vec::new(),
            writes: Vec::new(),
            packed: Vec::new(),
            log: Vec::new(),
            log_last_ms: None,
        }
    }

    /// Begins the log command `cmd key ...` of `count` arguments in all; [`Scratch::push`]
    /// adds the others, then [`Scratch::log`] ends it or [`Scratch::drop_open`] drops it.
    fn start(&mut self, cmd: Logged, key: &[u8], count: usize, now: u64, db: usize) {
        self.drop_open();
        self.open = Some((self.log.len(), self.log_last_ms));
        (self.args, self.count) = (2, count);
        if self.logging {
            abacus_persist::log::begin_command(&mut self.log, &mut self.log_last_ms, now, db as u16, count, self.codes[cmd as usize], LOGGED[cmd as usize]);
            abacus_persist::log::push_arg(&mut self.log, key);
        }
    }

    fn push(&mut self, a: &[u8]) {
        self.args += 1;
        if self.logging {
            abacus_persist::log::push_arg(&mut self.log, a);
        }
    }

    /// [`Scratch::push`] of `text`.
    fn push_text(&mut self) {
        self.args += 1;
        if self.logging {
            abacus_persist::log::push_arg(&mut self.log, &self.text);
        }
    }

    /// Ends the command begun (it stays in the log) and counts the change for `save`.
    fn log(&mut self, log: &mut ShardLog) {
        // A command of another length than its header says would garble the log.
        assert_eq!(self.args, self.count, "summarizer log command of {} arguments, {} announced", self.args, self.count);
        self.open = None;
        log.note_change();
    }

    /// Drops a command begun and not ended (nothing changed, or the keyed path runs it).
    fn drop_open(&mut self) {
        if let Some((len, last_ms)) = self.open.take() {
            self.log.truncate(len);
            self.log_last_ms = last_ms;
        }
    }
}

/// Applies a shard's parts of a batch. The usual case (no `maxmemory`, no keyspace
/// notifications, each key absent or of its type, no value that makes the command fail)
/// is applied directly from the folded change: one lookup per key, no argument vector, no
/// command dispatch, the log command encoded from the accumulators. That command is the one
/// the generic path would run (SUMMARY.UPDATE, HLL.ADDRAW, SADD), so replay is unchanged,
/// and WATCH is signalled as those commands signal it. Anything else runs the generated
/// commands through the ordinary keyed path (`run_lone`), which then gives the same result
/// or error as before; so does a ttl's PEXPIREAT. Returns the direct writes' log commands
/// (a log payload; the keyed path's are in the shard's pending buffer, after them).
#[allow(clippy::too_many_arguments)]
fn apply_parts(dbs: &mut [Db], log: &mut ShardLog, rec: &mut abacus_engine::recorders::ShardRecorders, db: usize, rules: &Rules, groups: &[(String, KeyChange)], keys: &str, parts: &[PartWork], now: u64, cfg: abacus_engine::config::CmdConfig, shards: usize, failed: &mut (u64, Option<Bytes>)) -> Vec<u8> {
    let direct = cfg.maxmemory == 0 && cfg.notify == 0;
    if direct {
        // As `exec::run_handler`: lookups maintain the metadata the eviction policy needs.
        let tracking = cfg.tracking();
        if dbs.first().is_some_and(|d| d.tracking() != tracking) {
            dbs.iter_mut().for_each(|d| d.set_tracking(tracking));
        }
    }
    if dbs[db].is_empty() {
        // Every part is a key of its own, so an empty database gets exactly `parts.len()`
        // new ones: its table is sized once for them instead of growing step by step (each
        // step moves a segment's entries: 8% of the first 50,000 v1 events' instructions).
        dbs[db].reserve(parts.len());
    }
    let mut sc = Scratch::new(log.durability().effects_on());
    if sc.logging {
        // About what a key's log command takes in the W5 data (key, name, two fields).
        sc.log.reserve(parts.len() * 96);
    }
    for w in parts {
        let (g, part, pk) = (&groups[w.group].1, w.part, &keys[w.key.clone()]);
        let applied = direct
            && match part {
                Part::Hash => apply_hash(&mut dbs[db], log, db, rules, g, pk.as_bytes(), now, &cfg, &mut sc),
                Part::Metric(i) => match &g.slots[i] {
                    Slot::Hll(hashes) => apply_hll(&mut dbs[db], log, db, hashes, &rules.summaries[g.summary].metrics[i].hll, pk.as_bytes(), now, &cfg, &mut sc),
                    Slot::Set(members) => apply_set(&mut dbs[db], log, db, members, pk.as_bytes(), now, &cfg, &mut sc),
                    Slot::Hash(_) => true,
                },
            };
        sc.drop_open();
        if applied && g.expire_ms <= 0 {
            // No ttl: nothing to run through the keyed path (`expire_command` is None).
            continue;
        }
        let mut cmds = std::mem::take(&mut sc.packed);
        cmds.clear();
        if applied {
            cmds.extend(g.expire_command(pk));
        } else {
            // A metric with its own HLL parameters is created with them first, as the direct
            // path does (HLL.ADDRAW alone would create it with the defaults).
            if let Part::Metric(i) = part {
                let opts = &rules.summaries[g.summary].metrics[i].hll;
                if matches!(g.slots[i], Slot::Hll(_)) && !opts.is_default() && !dbs[db].contains(pk.as_bytes(), now) {
                    if let Err(e) = metric_hll_params(opts, &cfg.hll) {
                        // Not created with the defaults instead: the metric's values are lost
                        // and counted as a failed write.
                        failed.0 += 1;
                        failed.1.get_or_insert_with(|| Bytes::from(format!("ERR {e}")));
                        sc.packed = cmds;
                        continue;
                    }
                    cmds.push(hll_create_command(pk.as_bytes(), opts, &cfg.hll));
                }
            }
            g.commands(rules, pk, part, MAX_GENERATED_ARGS, &mut cmds);
        }
        for c in cmds.drain(..) {
            let reply = match crate::command::lookup(&c.buf[..c.ends[0]]) {
                Some(spec) => {
                    // One buffer per command; the arguments are slices of it.
                    let buf = Bytes::from(c.buf);
                    let mut start = 0;
                    let args = Args::from_vec(
                        c.ends
                            .iter()
                            .map(|&end| {
                                let a = buf.slice(start..end);
                                start = end;
                                a
                            })
                            .collect(),
                    );
                    abacus_engine::exec::run_lone(dbs, log, rec, db, spec, &args, now, cfg, shards)
                }
                None => err("ERR internal error: the summarizer generated an unknown command"),
            };
            if let Frame::Error(e) = reply {
                failed.0 += 1;
                failed.1.get_or_insert(e);
            }
        }
        sc.packed = cmds;
    }
    sc.log
}

/// The new values of a summary hash's fields (into `sc.vals`/`sc.writes`) and the
/// SUMMARY.UPDATE that states them (into the log command begun), from the current hash; false where
/// SUMMARY.UPDATE would fail (a field that is not a number, an overflow, a NaN/Infinity).
fn hash_writes(h: Option<&CompactHash>, s: &abacus_summarizer::Summary, g: &KeyChange, sc: &mut Scratch) -> bool {
    sc.vals.clear();
    sc.writes.clear();
    for (mi, (m, slot)) in s.metrics.iter().zip(&g.slots).enumerate() {
        let Slot::Hash(Some(acc)) = slot else { continue };
        let name = m.name.as_bytes();
        sc.push(name);
        sc.push(acc.op());
        sc.text.clear();
        acc.write_value(&mut sc.text);
        sc.push_text();
        let old = h.and_then(|h| h.get(name));
        let start = sc.vals.len();
        match acc {
            // A new field's value is the command's own (0 + n, 0.0 + x): copied, not computed
            // and printed again.
            Acc::Count(_) if old.is_none() => sc.vals.extend_from_slice(&sc.text),
            Acc::Count(n) => {
                let cur = match old {
                    None => 0,
                    Some(v) => match abacus_keyspace::value::parse_canonical_i64(v) {
                        Some(c) => c,
                        None => return false,
                    },
                };
                let Some(sum) = cur.checked_add(*n) else { return false };
                sc.vals.extend_from_slice(itoa::Buffer::new().format(sum).as_bytes());
            }
            Acc::Sum(x) => {
                // The value as the logged command carries it, read back as SUMMARY.UPDATE
                // reads it, so the direct apply and a replay store the same text. A decimal
                // reads back as itself (its text round-trips exactly): not parsed again.
                let by = match x {
                    Number::Dec(_) => *x,
                    Number::Float(_) => match Number::parse(&sc.text) {
                        Some(n) => n,
                        None => return false,
                    },
                };
                if !abacus_summarizer::incr_number(old, by, &mut sc.vals) {
                    return false;
                }
            }
            Acc::Min(_) | Acc::Max(_) => {
                let Some(x) = Number::parse(&sc.text) else { return false };
                if let Some(v) = old {
                    match abacus_summarizer::keeps_extreme(v, x, matches!(acc, Acc::Min(_))) {
                        None => return false,
                        Some(true) => continue,
                        Some(false) => {}
                    }
                }
                sc.vals.extend_from_slice(&sc.text);
            }
            Acc::Last(t) => sc.vals.extend_from_slice(t.as_bytes()),
        }
        if old != Some(&sc.vals[start..]) {
            sc.writes.push((mi, start, sc.vals.len()));
        }
    }
    true
}

/// SUMMARY.UPDATE applied directly (see [`apply_parts`]); false to run the command instead.
#[allow(clippy::too_many_arguments)]
fn apply_hash(d: &mut Db, log: &mut ShardLog, db: usize, rules: &Rules, g: &KeyChange, key: &[u8], now: u64, cfg: &abacus_engine::config::CmdConfig, sc: &mut Scratch) -> bool {
    let s = &rules.summaries[g.summary];
    let fields = g.slots.iter().filter(|x| matches!(x, Slot::Hash(Some(_)))).count();
    sc.start(Logged::Update, key, 2 + 3 * fields, now, db);
    let created = match d.get_mut(key, now) {
        Some(e) => {
            let Some(h) = e.as_hash_mut() else { return false };
            if !hash_writes(Some(h), s, g, sc) {
                return false;
            }
            if sc.writes.is_empty() {
                return true;
            }
            for &(mi, a, b) in &sc.writes {
                h.insert_with_limits(s.metrics[mi].name.as_bytes(), &sc.vals[a..b], &cfg.hash_limits);
            }
            false
        }
        None => {
            if !hash_writes(None, s, g, sc) {
                return false;
            }
            if sc.writes.is_empty() {
                return true;
            }
            true
        }
    };
    if created {
        let mut h = CompactHash::with_capacity(sc.writes.len());
        for &(mi, a, b) in &sc.writes {
            h.insert_with_limits(s.metrics[mi].name.as_bytes(), &sc.vals[a..b], &cfg.hash_limits);
        }
        d.set(key, Value::Hash(Box::new(h)), 0, now);
    }
    d.signal_modified(key);
    sc.log(log);
    true
}

/// An HLL metric's parameters: its own where it names them, the `hll-*` defaults for the
/// rest, checked as HLL.CREATE checks them (postgresql-hll's ranges, `hll-max-log2m`).
fn metric_hll_params(opts: &HllOptions, cfg: &abacus_engine::config::HllConfig) -> Result<abacus_hll::Params, String> {
    let p = abacus_hll::Params::new(
        opts.log2m.unwrap_or(cfg.log2m),
        opts.regwidth.unwrap_or(cfg.regwidth),
        opts.expthresh.unwrap_or(cfg.expthresh),
        opts.sparseon.unwrap_or(cfg.sparseon),
    )
    .map_err(|e| e.to_string())?;
    if p.log2m() > cfg.max_log2m {
        return Err(format!("log2m {} exceeds the server limit hll-max-log2m {}", p.log2m(), cfg.max_log2m));
    }
    if p.expthresh() > abacus_engine::config::HLL_MAX_EXPTHRESH {
        return Err(format!("expthresh {} exceeds the server limit {}", p.expthresh(), abacus_engine::config::HLL_MAX_EXPTHRESH));
    }
    Ok(p)
}

/// `HLL.CREATE key LOG2M n REGWIDTH n EXPTHRESH n SPARSEON n` for a metric with its own
/// parameters (checked by the caller), every one stated: the log replays it whatever the
/// defaults are then.
fn hll_create_command(key: &[u8], opts: &HllOptions, cfg: &abacus_engine::config::HllConfig) -> Packed {
    let mut c = Packed { buf: Vec::with_capacity(64 + key.len()), ends: Vec::with_capacity(10) };
    let push = |c: &mut Packed, a: &[u8]| {
        c.buf.extend_from_slice(a);
        c.ends.push(c.buf.len());
    };
    push(&mut c, b"HLL.CREATE");
    push(&mut c, key);
    let values = match metric_hll_params(opts, cfg) {
        Ok(p) => [i64::from(p.log2m()), i64::from(p.regwidth()), p.expthresh(), i64::from(p.sparseon())],
        Err(_) => [opts.log2m.unwrap_or(cfg.log2m), opts.regwidth.unwrap_or(cfg.regwidth), opts.expthresh.unwrap_or(cfg.expthresh), i64::from(opts.sparseon.unwrap_or(cfg.sparseon))],
    };
    for (name, v) in [&b"LOG2M"[..], b"REGWIDTH", b"EXPTHRESH", b"SPARSEON"].into_iter().zip(values) {
        push(&mut c, name);
        push(&mut c, itoa::Buffer::new().format(v).as_bytes());
    }
    c
}

/// HLL.ADDRAW applied directly; false to run the command instead (a key holding a string,
/// which the command decodes, or another type; parameters the server refuses).
#[allow(clippy::too_many_arguments)]
fn apply_hll(d: &mut Db, log: &mut ShardLog, db: usize, hashes: &[i64], opts: &HllOptions, key: &[u8], now: u64, cfg: &abacus_engine::config::CmdConfig, sc: &mut Scratch) -> bool {
    let changed = match d.get_mut(key, now) {
        Some(e) => match e.as_hll_mut() {
            Some(h) => hashes.iter().fold(false, |changed, &x| h.add_raw(x) | changed),
            None => return false,
        },
        None => {
            let p = if opts.is_default() {
                let Ok(p) = super::hll::default_params(&cfg.hll) else { return false };
                p
            } else {
                let Ok(p) = metric_hll_params(opts, &cfg.hll) else { return false };
                // The log creates the sketch with the metric's parameters before adding.
                let create = hll_create_command(key, opts, &cfg.hll);
                sc.start(Logged::HllCreate, key, create.ends.len(), now, db);
                create.args().skip(2).for_each(|a| sc.push(a));
                sc.log(log);
                p
            };
            let mut h = abacus_hll::Hll::new(p);
            for &x in hashes {
                h.add_raw(x);
            }
            d.set(key, Value::Hll(Box::new(h)), 0, now);
            true
        }
    };
    // As HLL.ADDRAW (and PFADD): a sketch that did not change is not signalled.
    if changed {
        d.signal_modified(key);
        let mut digits = itoa::Buffer::new();
        for chunk in hashes.chunks(MAX_GENERATED_ARGS - 2) {
            sc.start(Logged::AddRaw, key, 2 + chunk.len(), now, db);
            for &x in chunk {
                sc.push(digits.format(x).as_bytes());
            }
            sc.log(log);
        }
    }
    true
}

/// SADD applied directly; false to run the command instead (a key of another type).
#[allow(clippy::too_many_arguments)]
fn apply_set(d: &mut Db, log: &mut ShardLog, db: usize, members: &abacus_summarizer::Members, key: &[u8], now: u64, cfg: &abacus_engine::config::CmdConfig, sc: &mut Scratch) -> bool {
    let all: Vec<&[u8]> = members.iter().collect();
    let added = match d.get_mut(key, now) {
        Some(e) => match e.as_set_mut() {
            Some(set) => set.insert_many_with_limits(&all, &cfg.set_limits),
            None => return false,
        },
        None => {
            let mut set = abacus_collections::IdSet::new();
            let added = set.insert_many_with_limits(&all, &cfg.set_limits);
            d.set(key, Value::Set(Box::new(set)), 0, now);
            added
        }
    };
    if added > 0 {
        d.signal_modified(key);
        for chunk in all.chunks(MAX_GENERATED_ARGS - 2) {
            sc.start(Logged::Sadd, key, 2 + chunk.len(), now, db);
            for m in chunk {
                sc.push(m);
            }
            sc.log(log);
        }
    }
    true
}

/// A shard's part of a batch: the folded changes it owns (index into the batch's changes,
/// which part), commands (the source's record), then stream entries (in event order).
#[derive(Default)]
struct ShardWork {
    parts: Vec<PartWork>,
    calls: Vec<Call>,
    streams: Vec<StreamWork>,
}

/// One key a shard writes: `part` of the batch's change `group`, the key's range of the
/// batch's buffer of keys.
struct PartWork {
    group: usize,
    part: Part,
    key: std::ops::Range<usize>,
}

/// An XADD waiting for its ID: `head` is `XADD key [MAXLEN ~ n]`, `tail` the field-value pairs.
struct StreamWork {
    head: Vec<Bytes>,
    time_ms: i64,
    tail: Vec<Bytes>,
}

/// [events applied, lines rejected].
fn ingest_reply(batch: &Batch) -> Frame {
    Frame::Array(vec![Frame::Integer(batch.events as i64), Frame::Integer(batch.rejected as i64)])
}

async fn source(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let key = format!("{SOURCE_PREFIX}{}", text(&a[1])).into_bytes();
    let db = conn.client.db;
    let shard = shard_of(&key, conn.worker.shards());
    match conn.worker.run(access, shard, move |s| source_position(&mut s.dbs[db], &key, now_ms())).await {
        Some(Ok((offset, line))) => Frame::Array(vec![Frame::Integer(offset as i64), Frame::Integer(line as i64)]),
        Some(Err(e)) => e,
        None => abacus_engine::exec::shutting_down(),
    }
}

// ---------------------------------------------------------------------------------------
// SUMMARY.QUERY

async fn query(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let Some(rules) = conn.worker.server.summarizer.rules() else { return err(ERR_NO_RULES) };
    let args: Vec<&[u8]> = a[1..].iter().map(|x| &x[..]).collect();
    let q = match Query::parse(&rules, &args) {
        Ok(q) => Arc::new(q),
        Err(e) => return Frame::error(e.0),
    };
    let db = conn.client.db;
    let (r, q2) = (rules.clone(), q.clone());
    // Cluster mode: the other shard groups' groups, as partial states (`fanout.rs`), asked
    // while this node folds its own; outside cluster mode, inside MULTI and on a
    // coordinator's connection, none.
    let peers = async {
        let groups = if matches!(access, Access::Locked(_)) { Vec::new() } else { crate::fanout::peers(conn) };
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        crate::fanout::ask_all(&conn.worker.server, &groups, a.iter().map(|x| x.to_vec()).collect(), false).await
    };
    let (parts, peers) = tokio::join!(conn.worker.run_all(access, move |s| shard_groups(&r, &q2, &mut s.dbs[db], now_ms())), peers);
    let Some(mut parts) = parts else {
        return abacus_engine::exec::shutting_down();
    };
    let s = &rules.summaries[q.summary];
    match peers {
        Ok(replies) => {
            for reply in replies {
                let Some(groups) = peer_groups(s, &reply) else { return err("ERR a node's part of the cluster-wide query is malformed") };
                parts.push(Ok(groups));
            }
        }
        Err(e) => return e,
    }
    let mut merged: HashMap<Vec<String>, Group> = HashMap::new();
    for part in parts {
        let part = match part {
            Ok(p) => p,
            Err(e) => return Frame::error(format!("ERR {e}")),
        };
        for g in part {
            match merged.remove(&g.key) {
                Some(mut mine) => {
                    if let Err(e) = mine.merge(s, g) {
                        return Frame::error(format!("ERR {e}"));
                    }
                    merged.insert(mine.key.clone(), mine);
                }
                None => {
                    merged.insert(g.key.clone(), g);
                }
            }
        }
    }
    if conn.client.local_only {
        // A coordinator's request: this node's groups as partial states, merged there.
        return Frame::Array(merged.into_values().map(|g| Frame::Bulk(Bytes::from(g.to_wire()))).collect());
    }
    let mut rows: Vec<Group> = merged.into_values().collect();
    if q.group == GroupBy::Bucket {
        rows.sort_by_key(|g| g.key[0].parse::<i64>().unwrap_or(0));
    } else {
        rows.sort_by(|x, y| x.key.cmp(&y.key));
    }
    let names = q.group_names(s);
    Frame::Array(
        rows.into_iter()
            .map(|g| {
                let mut row: Vec<(Frame, Frame)> = names.iter().zip(&g.key).map(|(n, v)| (bulk(n.as_bytes()), bulk(v.as_bytes()))).collect();
                if q.group == GroupBy::Bucket {
                    // The bucket start as an integer, like the counts.
                    if let Some((_, v)) = row.first_mut() {
                        *v = Frame::Integer(g.key[0].parse().unwrap_or(0));
                    }
                }
                for (name, cell) in g.cells(s) {
                    let v = match cell {
                        Cell::Int(n) => Frame::Integer(n),
                        // Plain notation in both protocols, exact digits; a RESP3 double.
                        Cell::Num(x) => Frame::DoubleText(Bytes::from(x.to_string())),
                        Cell::Text(t) => bulk(t.as_bytes()),
                    };
                    row.push((bulk(name.as_bytes()), v));
                }
                Frame::Map(row)
            })
            .collect(),
    )
}

/// A peer's groups (see `query`): an array of partial states.
fn peer_groups(s: &abacus_summarizer::Summary, reply: &[u8]) -> Option<Vec<Group>> {
    let (Frame::Array(items), _) = abacus_protocol::parse_frame(reply).ok()?? else { return None };
    items
        .into_iter()
        .map(|f| match f {
            Frame::Bulk(b) => Group::from_wire(s, &b),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// SUMMARY.REJECTS, SUMMARY.RULES

fn rejects(conn: &Conn, a: &[Arg]) -> Frame {
    let summarizer = &conn.worker.server.summarizer;
    let Some(rules) = summarizer.rules() else { return err(ERR_NO_RULES) };
    let feed = text(&a[1]);
    if rules.feed(&feed).is_none() {
        return Frame::error(format!("ERR no such feed '{feed}'"));
    }
    let (count, kept) = summarizer.rejects(&feed);
    let lines = kept
        .into_iter()
        .map(|r| {
            Frame::Map(vec![
                (bulk(b"source"), bulk(r.source.as_bytes())),
                (bulk(b"line"), Frame::Integer(r.line_no as i64)),
                (bulk(b"reason"), bulk(r.reason.as_bytes())),
                (bulk(b"text"), bulk(r.line.as_bytes())),
            ])
        })
        .collect();
    Frame::Map(vec![(bulk(b"rejected"), Frame::Integer(count as i64)), (bulk(b"lines"), Frame::Array(lines))])
}

fn rules_cmd(conn: &Conn, a: &[Arg]) -> Frame {
    let summarizer = &conn.worker.server.summarizer;
    if a[1].eq_ignore_ascii_case(b"load") && a.len() == 3 {
        return match summarizer.load(&text(&a[2])) {
            Ok(()) => Frame::ok(),
            Err(e) => Frame::error(format!("ERR {e}")),
        };
    }
    if a[1].eq_ignore_ascii_case(b"get") && a.len() == 2 {
        return match summarizer.rules() {
            Some(r) => bulk(r.text.as_bytes()),
            None => Frame::Null,
        };
    }
    err(ERR_SYNTAX)
}

fn bulk(b: &[u8]) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(b))
}
