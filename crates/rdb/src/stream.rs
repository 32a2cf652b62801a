//! Streams in RDB: Redis 7.0's `RDB_TYPE_STREAM_LISTPACKS_2` (written and read), and the
//! older `STREAM_LISTPACKS` (Redis 5-6.2) and newer `STREAM_LISTPACKS_3` (Redis 7.2) forms
//! (read), as `rdb.c` and `t_stream.c` lay them out.
//!
//! The object: the number of nodes, then per node its master ID (16 bytes, both halves big
//! endian, as the radix tree key) and its listpack; then the length, the last ID, (v2+) the
//! first ID, the largest deleted ID and the entries ever added; then the consumer groups:
//! name, last delivered ID, (v2+) entries read, the group's PEL (raw 16-byte IDs, the last
//! delivery time as 8 little-endian bytes, the delivery count), and the consumers: name, seen
//! time (8 bytes), (v3) active time (8 bytes), and their PEL as raw IDs only.
//!
//! A node's listpack starts with the master entry: count of live entries, count of deleted
//! ones, the master fields' count and names, and a 0 terminator. Each entry follows as
//! flags, ms and seq differences from the master ID, then either the values alone (flag
//! SAMEFIELDS: its fields are the master's) or its field count and field/value pairs, then
//! its own element count (lp-count, for walking backwards). Deleted entries keep their place
//! with flag DELETED and are skipped when reading.
//!
//! Writing packs up to 100 entries per node (Redis's `stream-node-max-entries` default) and
//! starts a node before it would pass 4,096 bytes (`stream-node-max-bytes`), the node's first
//! entry giving the master fields. Integers are listpack integers wherever their text is
//! canonical, as `lpAppend` would store them.

use crate::listpack::{lp_decode, LpWriter};
use crate::{bad, write_length, write_string, Reader, Result};

/// A stream ID (ms, seq).
pub type Id = (u64, u64);

#[derive(Clone, Debug, PartialEq, Default)]
pub struct RdbStream {
    /// Live entries in ID order.
    pub entries: Vec<(Id, Vec<(Vec<u8>, Vec<u8>)>)>,
    pub last_id: Id,
    pub first_id: Id,
    pub max_deleted_id: Id,
    pub entries_added: u64,
    pub groups: Vec<RdbGroup>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct RdbGroup {
    pub name: Vec<u8>,
    pub last_id: Id,
    /// -1: unknown (Redis's SCG_INVALID_ENTRIES_READ).
    pub entries_read: i64,
    /// (ID, last delivery time in ms, delivery count), in ID order.
    pub pel: Vec<(Id, i64, u64)>,
    pub consumers: Vec<RdbConsumer>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct RdbConsumer {
    pub name: Vec<u8>,
    pub seen_time: i64,
    /// The IDs it owns in the group's PEL.
    pub pel: Vec<Id>,
}

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;
const NODE_MAX_ENTRIES: usize = 100;
const NODE_MAX_BYTES: usize = 4096;

fn raw_id(out: &mut Vec<u8>, id: Id) {
    out.extend_from_slice(&id.0.to_be_bytes());
    out.extend_from_slice(&id.1.to_be_bytes());
}

fn int(lp: &mut LpWriter, v: i64) {
    lp.push(v.to_string().as_bytes());
}

/// One node's listpack for `entries` (not empty), the first entry's fields as master fields.
fn node(entries: &[(Id, Vec<(Vec<u8>, Vec<u8>)>)]) -> Vec<u8> {
    let master_id = entries[0].0;
    let master: Vec<&[u8]> = entries[0].1.iter().map(|(f, _)| &f[..]).collect();
    let mut lp = LpWriter::new();
    int(&mut lp, entries.len() as i64);
    int(&mut lp, 0);
    int(&mut lp, master.len() as i64);
    for f in &master {
        lp.push(f);
    }
    int(&mut lp, 0);
    for (id, pairs) in entries {
        let same = pairs.len() == master.len() && pairs.iter().zip(&master).all(|((f, _), m)| &f[..] == *m);
        int(&mut lp, if same { FLAG_SAMEFIELDS } else { 0 });
        int(&mut lp, id.0.wrapping_sub(master_id.0) as i64);
        int(&mut lp, id.1.wrapping_sub(master_id.1) as i64);
        if same {
            for (_, v) in pairs {
                lp.push(v);
            }
            int(&mut lp, pairs.len() as i64 + 3);
        } else {
            int(&mut lp, pairs.len() as i64);
            for (f, v) in pairs {
                lp.push(f);
                lp.push(v);
            }
            int(&mut lp, 2 * pairs.len() as i64 + 4);
        }
    }
    lp.finish()
}

/// Appends the object of type `STREAM_LISTPACKS_2` (the type byte is the caller's).
pub fn write_stream(out: &mut Vec<u8>, s: &RdbStream, compress: bool) {
    let mut nodes: Vec<(Id, Vec<u8>)> = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, (_, pairs)) in s.entries.iter().enumerate() {
        let size: usize = pairs.iter().map(|(f, v)| f.len() + v.len() + 4).sum::<usize>() + 8;
        if i > start && (i - start >= NODE_MAX_ENTRIES || bytes + size > NODE_MAX_BYTES) {
            nodes.push((s.entries[start].0, node(&s.entries[start..i])));
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < s.entries.len() {
        nodes.push((s.entries[start].0, node(&s.entries[start..])));
    }
    write_length(out, nodes.len() as u64);
    for (id, lp) in &nodes {
        let mut key = Vec::with_capacity(16);
        raw_id(&mut key, *id);
        write_string(out, &key, false);
        write_string(out, lp, compress);
    }
    write_length(out, s.entries.len() as u64);
    for v in [s.last_id.0, s.last_id.1, s.first_id.0, s.first_id.1, s.max_deleted_id.0, s.max_deleted_id.1, s.entries_added] {
        write_length(out, v);
    }
    write_length(out, s.groups.len() as u64);
    for g in &s.groups {
        write_string(out, &g.name, false);
        write_length(out, g.last_id.0);
        write_length(out, g.last_id.1);
        write_length(out, g.entries_read as u64);
        write_length(out, g.pel.len() as u64);
        for &(id, time, count) in &g.pel {
            raw_id(out, id);
            out.extend_from_slice(&time.to_le_bytes());
            write_length(out, count);
        }
        write_length(out, g.consumers.len() as u64);
        for c in &g.consumers {
            write_string(out, &c.name, false);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            write_length(out, c.pel.len() as u64);
            for &id in &c.pel {
                raw_id(out, id);
            }
        }
    }
}

fn parse_int(b: &[u8]) -> Result<i64> {
    abacus_int::string2ll(b).ok_or(bad("invalid stream listpack integer"))
}

fn read_raw_id(r: &mut Reader<'_>) -> Result<Id> {
    let b = r.read_bytes(16)?;
    Ok((u64::from_be_bytes(b[..8].try_into().unwrap()), u64::from_be_bytes(b[8..].try_into().unwrap())))
}

fn read_time(r: &mut Reader<'_>) -> Result<i64> {
    Ok(i64::from_le_bytes(r.read_bytes(8)?.try_into().unwrap()))
}

/// Decodes one node's listpack into `entries` (live entries only).
fn read_node(master_id: Id, lp: &[u8], entries: &mut Vec<(Id, Vec<(Vec<u8>, Vec<u8>)>)>) -> Result<()> {
    let items = lp_decode(lp).map_err(|_| bad("invalid stream listpack"))?;
    let mut it = items.into_iter();
    let mut next = || it.next().ok_or(bad("truncated stream listpack"));
    let _count = parse_int(&next()?)?;
    let _deleted = parse_int(&next()?)?;
    let nfields = parse_int(&next()?)?;
    if nfields < 0 {
        return Err(bad("invalid stream master entry"));
    }
    let mut master = Vec::new();
    for _ in 0..nfields {
        master.push(next()?);
    }
    if parse_int(&next()?)? != 0 {
        return Err(bad("invalid stream master entry terminator"));
    }
    loop {
        let flags = match next() {
            Ok(f) => parse_int(&f)?,
            Err(_) => break,
        };
        let ms = master_id.0.wrapping_add(parse_int(&next()?)? as u64);
        let seq = master_id.1.wrapping_add(parse_int(&next()?)? as u64);
        let mut pairs = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            for f in &master {
                pairs.push((f.clone(), next()?));
            }
        } else {
            let n = parse_int(&next()?)?;
            if n < 0 {
                return Err(bad("invalid stream entry"));
            }
            for _ in 0..n {
                let f = next()?;
                pairs.push((f, next()?));
            }
        }
        let _lp_count = next()?;
        if flags & FLAG_DELETED == 0 {
            if entries.last().is_some_and(|(last, _)| *last >= (ms, seq)) {
                return Err(bad("stream entries out of order"));
            }
            entries.push(((ms, seq), pairs));
        }
    }
    Ok(())
}

/// Reads a stream object of type `t` (15, 19 or 21), the type byte already read.
/// A group's entries-read where the payload has none (Redis 5-6.2's `STREAM_LISTPACKS`):
/// what Redis 7.0 derives on loading, `streamEstimateDistanceFromFirstEverEntry` in
/// `t_stream.c`. Such a stream has no recorded deletions (its largest deleted ID is 0-0), so
/// a group at or before the first entry, or at the last ID, has an exact count; any other
/// position is unknown (-1, Redis's SCG_INVALID_ENTRIES_READ), and XINFO shows its lag as nil.
pub fn estimate_entries_read(s: &RdbStream, id: Id) -> i64 {
    let added = s.entries_added as i64;
    if added == 0 {
        return 0;
    }
    let length = s.entries.len() as i64;
    if length == 0 && id <= s.last_id {
        return added;
    }
    if id == s.last_id {
        return added;
    }
    if id > s.last_id {
        return -1;
    }
    let no_tombstones = s.max_deleted_id == (0, 0) || s.max_deleted_id < s.first_id;
    if no_tombstones && id < s.first_id {
        return added - length;
    }
    if no_tombstones && id == s.first_id {
        return added - length + 1;
    }
    -1
}

pub fn read_stream(r: &mut Reader<'_>, t: u8) -> Result<RdbStream> {
    let mut s = RdbStream::default();
    let nodes = r.read_length()?;
    for _ in 0..nodes {
        let key = r.read_string()?;
        if key.len() != 16 {
            return Err(bad("stream node key is not 16 bytes"));
        }
        let master_id = (u64::from_be_bytes(key[..8].try_into().unwrap()), u64::from_be_bytes(key[8..].try_into().unwrap()));
        let lp = r.read_string()?;
        read_node(master_id, &lp, &mut s.entries)?;
    }
    let length = r.read_length()?;
    if length != s.entries.len() as u64 {
        return Err(bad("stream length does not match its entries"));
    }
    s.last_id = (r.read_length()?, r.read_length()?);
    if t == crate::types::STREAM_LISTPACKS {
        // As Redis 7.0's streamGetEdgeID: the first entry's ID, or the largest ID when
        // there is none.
        s.first_id = s.entries.first().map_or((u64::MAX, u64::MAX), |e| e.0);
        s.max_deleted_id = (0, 0);
        s.entries_added = length;
    } else {
        s.first_id = (r.read_length()?, r.read_length()?);
        s.max_deleted_id = (r.read_length()?, r.read_length()?);
        s.entries_added = r.read_length()?;
    }
    if s.entries.last().is_some_and(|(id, _)| *id > s.last_id) {
        return Err(bad("stream entry after the last ID"));
    }
    let groups = r.read_length()?;
    for _ in 0..groups {
        let mut g = RdbGroup { name: r.read_string()?, last_id: (r.read_length()?, r.read_length()?), entries_read: -1, ..Default::default() };
        g.entries_read = if t == crate::types::STREAM_LISTPACKS { estimate_entries_read(&s, g.last_id) } else { r.read_length()? as i64 };
        let pel = r.read_length()?;
        for _ in 0..pel {
            let id = read_raw_id(r)?;
            if g.pel.last().is_some_and(|p| p.0 >= id) {
                return Err(bad("stream PEL out of order"));
            }
            let time = read_time(r)?;
            let count = r.read_length()?;
            g.pel.push((id, time, count));
        }
        let consumers = r.read_length()?;
        for _ in 0..consumers {
            let mut c = RdbConsumer { name: r.read_string()?, seen_time: read_time(r)?, pel: Vec::new() };
            if t == crate::types::STREAM_LISTPACKS_3 {
                let _active_time = read_time(r)?;
            }
            let n = r.read_length()?;
            for _ in 0..n {
                let id = read_raw_id(r)?;
                if g.pel.binary_search_by(|p| p.0.cmp(&id)).is_err() {
                    return Err(bad("consumer PEL entry missing from the group PEL"));
                }
                c.pel.push(id);
            }
            g.consumers.push(c);
        }
        s.groups.push(g);
    }
    Ok(s)
}
