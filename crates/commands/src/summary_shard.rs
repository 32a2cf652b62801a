//! The summarizer's per-shard parts that need only a shard's databases: SUMMARY.QUERY's fold
//! of the summary keys a shard owns into groups ([`shard_groups`]), the exactly-once record
//! of a source ([`source_position`], read by SUMMARY.SOURCE and SUMMARY.INGESTSOURCE), and
//! the ID of a summarizer stream entry ([`stream_entry_id`]). The commands themselves (the
//! server's `cmd/summary.rs`: their table entries, the ingest pipeline, the fan-out to the
//! shards and the merge of their groups) run in the connection task; these run on one
//! shard's database, with no connection. The rules, events and groups are
//! `abacus-summarizer`'s.
//!
//! Why the direct apply of an ingest batch (the server's `apply_parts`) is not here: it
//! writes the shard's log (the engine's `ShardLog`) and falls back to the ordinary keyed
//! path (the engine's `run_lone`, with commands looked up in the server's table), neither of
//! which this crate can see.

use std::collections::HashMap;

use abacus_keyspace::{Db, ValueRef};
use abacus_protocol::Frame;
use abacus_summarizer::{parse_key, Group, MetricKind, Query, Rules};

use super::args::*;

/// The (offset, next line) a source's record holds; (0, 1) when there is none.
pub fn source_position(db: &mut Db, key: &[u8], now: u64) -> Result<(u64, u64), Frame> {
    match db.get(key, now) {
        None => Ok((0, 1)),
        Some(e) => {
            let h = e.as_hash().ok_or_else(|| err(ERR_WRONGTYPE))?;
            let num = |f: &[u8]| h.get(f).and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok());
            Ok((num(b"offset").unwrap_or(0), num(b"line").unwrap_or(1)))
        }
    }
}

/// The ID of a summarizer stream entry: the event's time, taken as XADD `*` takes the clock
/// (`<ms>-0` past the stream's last ID, else the last ID's sequence plus one), so events
/// arriving out of time order still append, at the stream's latest time. The entry is then
/// an XADD with an explicit ID: the log replays it exactly.
pub fn stream_entry_id(db: &mut Db, key: &[u8], time_ms: i64, now: u64) -> Result<abacus_collections::StreamId, Frame> {
    let last = match db.get(key, now) {
        None => abacus_collections::StreamId::MIN,
        Some(e) => match e.as_stream() {
            Some(s) => s.last_id(),
            None => return Err(err(ERR_WRONGTYPE)),
        },
    };
    let t = time_ms.max(0) as u64;
    if t > last.ms {
        return Ok(abacus_collections::StreamId { ms: t, seq: 0 });
    }
    // An exhausted stream (last ID the maximum): XADD refuses it with Redis's message.
    Ok(last.incr().unwrap_or(last))
}

/// Folds the keys of the query's summary on one shard's database into groups.
pub fn shard_groups(rules: &Rules, q: &Query, db: &mut Db, now: u64) -> Result<Vec<Group>, String> {
    let s = &rules.summaries[q.summary];
    let pattern = format!("{}*", s.name);
    let mut groups: HashMap<Vec<String>, Group> = HashMap::new();
    for key in db.keys_matching(pattern.as_bytes(), now) {
        let Some(parts) = parse_key(s, &key) else { continue };
        let Some(gk) = q.group_of(s, &parts) else { continue };
        let Some(e) = db.get_shared(&key, now) else { continue };
        let g = groups.entry(gk).or_insert_with_key(|k| Group::new(s, k.clone()));
        let metric = parts.metric.as_deref().and_then(|m| s.metric(m));
        match (metric, e.value()) {
            (None, ValueRef::Hash(h)) => {
                for (f, v) in h.iter() {
                    if let Some(mi) = std::str::from_utf8(f).ok().and_then(|f| s.metric(f)).filter(|&mi| s.metrics[mi].kind.in_hash()) {
                        g.add_field(s, mi, v, parts.bucket);
                    }
                }
            }
            (Some(mi), ValueRef::Hll(h)) if matches!(s.metrics[mi].kind, MetricKind::Hll(_)) => g.add_hll(mi, h)?,
            (Some(mi), ValueRef::Str(b)) if matches!(s.metrics[mi].kind, MetricKind::Hll(_)) => {
                let h = abacus_hll::Hll::from_bytes(b).map_err(|e| format!("key '{}' is not a sketch: {e}", String::from_utf8_lossy(&key)))?;
                g.add_hll(mi, &h)?;
            }
            (Some(mi), ValueRef::Set(set)) if matches!(s.metrics[mi].kind, MetricKind::Distinct(_)) => g.add_members(mi, set.iter().map(|m| m.to_vec())),
            // A key of another type under the summary's name: not the summarizer's.
            _ => {}
        }
    }
    Ok(groups.into_values().collect())
}
