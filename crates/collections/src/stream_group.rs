//! Consumer groups of a [`crate::Stream`]: each group's last delivered ID, its read counter,
//! its pending entries list (PEL: the entries delivered and not yet acknowledged, with their
//! owner, last delivery time and delivery count) and its consumers, each with its own PEL.
//!
//! As in Redis, the group's PEL and its consumers' PELs hold the same entries: a pending
//! entry's consumer is named in its [`Nack`], and the consumer's set lists its IDs. Groups
//! and consumers are kept in name order (Redis's radix trees order keys bytewise), PELs in
//! ID order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::persist::DecodeError;
use crate::stream::StreamId;

/// Redis's SCG_INVALID_ENTRIES_READ: the group's read counter is unknown.
pub const INVALID_ENTRIES_READ: i64 = -1;

/// A pending entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// Unix time of the last delivery, in milliseconds.
    pub delivery_time: i64,
    pub delivery_count: u64,
    /// The consumer that owns it.
    pub consumer: Arc<[u8]>,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix time of its last interaction (XREADGROUP, XCLAIM...), in milliseconds.
    pub seen_time: i64,
    /// The IDs it owns in the group's PEL.
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries read so far (Redis's logical read counter), [`INVALID_ENTRIES_READ`] if
    /// unknown.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group { last_id, entries_read, pel: BTreeMap::new(), consumers: BTreeMap::new() }
    }

    /// The consumer's name as the group holds it, creating the consumer (seen at `now`) if
    /// it does not exist; the second value is true when it was created.
    pub fn consumer_or_create(&mut self, name: &[u8], now: i64) -> (Arc<[u8]>, bool) {
        if let Some((k, _)) = self.consumers.get_key_value(name) {
            return (k.clone(), false);
        }
        let k: Arc<[u8]> = Arc::from(name);
        self.consumers.insert(k.clone(), Consumer { seen_time: now, pel: BTreeSet::new() });
        (k, true)
    }

    /// Creates a consumer; false if it exists.
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> bool {
        self.consumer_or_create(name, now).1
    }

    /// Deletes a consumer and its pending entries; returns how many it had, None if there
    /// was no such consumer.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Removes a pending entry from the group and its owner (XACK).
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(nack) => {
                if let Some(c) = self.consumers.get_mut(&nack.consumer[..]) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Makes `consumer` the owner of pending entry `id` (creating it if missing), and
    /// returns it for the caller to update times and counts.
    pub fn assign(&mut self, id: StreamId, consumer: &Arc<[u8]>, now: i64) -> &mut Nack {
        let prev = self.pel.get(&id).map(|n| n.consumer.clone());
        match prev {
            Some(old) if old[..] != consumer[..] => {
                if let Some(c) = self.consumers.get_mut(&old[..]) {
                    c.pel.remove(&id);
                }
            }
            _ => {}
        }
        if let Some(c) = self.consumers.get_mut(&consumer[..]) {
            c.pel.insert(id);
        }
        let nack = self.pel.entry(id).or_insert_with(|| Nack { delivery_time: now, delivery_count: 1, consumer: consumer.clone() });
        nack.consumer = consumer.clone();
        nack
    }

    pub fn heap_bytes(&self) -> usize {
        self.pel.len() * 64 + self.consumers.iter().map(|(k, c)| k.len() + 64 + c.pel.len() * 24).sum::<usize>()
    }
}

/// A bounds-checked reader over a stream's byte form.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("truncated stream")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| "truncated stream")?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| "truncated stream")?))
    }

    pub(crate) fn id(&mut self) -> Result<StreamId, DecodeError> {
        Ok(StreamId { ms: self.u64()?, seq: self.u64()? })
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// A count of items of at least `min` bytes each, bounded by what is left.
    pub(crate) fn count(&mut self, min: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.bytes.len() - self.at {
            return Err("stream count larger than its bytes");
        }
        Ok(n)
    }

    pub(crate) fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    out.extend_from_slice(&id.ms.to_le_bytes());
    out.extend_from_slice(&id.seq.to_le_bytes());
}

/// Groups: count, then per group its name, last ID, read counter, consumers (name, seen
/// time) and PEL (ID, delivery time, count, owner's index among the consumers).
pub(crate) fn serialize_groups(groups: Option<&BTreeMap<Box<[u8]>, Group>>, out: &mut Vec<u8>) {
    let Some(groups) = groups else {
        out.extend_from_slice(&0u32.to_le_bytes());
        return;
    };
    out.extend_from_slice(&(groups.len() as u32).to_le_bytes());
    for (name, g) in groups {
        put_bytes(out, name);
        put_id(out, g.last_id);
        out.extend_from_slice(&g.entries_read.to_le_bytes());
        out.extend_from_slice(&(g.consumers.len() as u32).to_le_bytes());
        for (cname, c) in &g.consumers {
            put_bytes(out, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
        }
        let index: BTreeMap<&[u8], u32> = g.consumers.keys().enumerate().map(|(i, k)| (&k[..], i as u32)).collect();
        out.extend_from_slice(&(g.pel.len() as u32).to_le_bytes());
        for (id, nack) in &g.pel {
            put_id(out, *id);
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            out.extend_from_slice(&nack.delivery_count.to_le_bytes());
            let owner = index.get(&nack.consumer[..]).copied().unwrap_or(0);
            out.extend_from_slice(&owner.to_le_bytes());
        }
    }
}

pub(crate) fn deserialize_groups(r: &mut Reader<'_>) -> Result<Option<Box<BTreeMap<Box<[u8]>, Group>>>, DecodeError> {
    // A group is at least its name's length, last ID, counter and two counts: 36 bytes.
    let n = r.count(36)?;
    if n == 0 {
        return Ok(None);
    }
    let mut groups: BTreeMap<Box<[u8]>, Group> = BTreeMap::new();
    for _ in 0..n {
        let name: Box<[u8]> = r.bytes()?.into();
        let last_id = r.id()?;
        let entries_read = r.u64()? as i64;
        let mut g = Group::new(last_id, entries_read);
        let nc = r.count(12)?;
        let mut names: Vec<Arc<[u8]>> = Vec::with_capacity(nc);
        for _ in 0..nc {
            let cname: Arc<[u8]> = Arc::from(r.bytes()?);
            let seen_time = r.u64()? as i64;
            if g.consumers.insert(cname.clone(), Consumer { seen_time, pel: BTreeSet::new() }).is_some() {
                return Err("duplicate stream consumer");
            }
            names.push(cname);
        }
        let np = r.count(36)?;
        for _ in 0..np {
            let id = r.id()?;
            let delivery_time = r.u64()? as i64;
            let delivery_count = r.u64()?;
            let owner = r.u32()? as usize;
            let consumer = names.get(owner).ok_or("stream pending entry of no consumer")?.clone();
            if let Some(c) = g.consumers.get_mut(&consumer[..]) {
                c.pel.insert(id);
            }
            if g.pel.insert(id, Nack { delivery_time, delivery_count, consumer }).is_some() {
                return Err("duplicate stream pending entry");
            }
        }
        if groups.insert(name, g).is_some() {
            return Err("duplicate stream group");
        }
    }
    Ok(Some(Box::new(groups)))
}
