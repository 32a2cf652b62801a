//! Cluster mode's index of a database's keys by hash slot: what CLUSTER GETKEYSINSLOT,
//! COUNTKEYSINSLOT and CLUSTER SETSLOT's key check read while redis-cli reshards.
//!
//! Why: without it each of those scans the whole database to find one slot's keys, and a
//! reshard asks once per batch of 10 keys moved plus once per SETSLOT: O(keys) per batch,
//! which made moving 4,096 slots of 1M keys take minutes (Redis keeps the same index,
//! `slots_to_keys`, for the same reason).
//!
//! How: one hash set of keys per slot (16,384 sets, each empty until a key of its slot
//! arrives), maintained where the database's map gains or loses a key ([`crate::Db`]'s
//! insert, remove and expiry paths). It is built on first use from the keys present (one
//! scan), so a database that was replaced wholesale (loading, a full resync) needs no
//! bookkeeping by its replacer; databases that never serve these commands (every database
//! outside cluster mode) never pay for it: one branch where a key is added or removed.
//! Cost once built: one copy of each key and a set entry, ~40 bytes per key beyond the key.
//! The slot function is the caller's (the keyspace knows no cluster): CRC16 with hash tags.

use std::collections::HashSet;

use crate::Key;

type Hasher = foldhash::fast::RandomState;

/// Number of hash slots.
pub const SLOTS: usize = 16384;

pub(crate) struct SlotKeys {
    slot_of: fn(&[u8]) -> u16,
    sets: Box<[HashSet<Key, Hasher>]>,
}

impl SlotKeys {
    pub(crate) fn new(slot_of: fn(&[u8]) -> u16) -> SlotKeys {
        SlotKeys { slot_of, sets: (0..SLOTS).map(|_| HashSet::with_hasher(Hasher::default())).collect() }
    }

    fn set(&mut self, key: &[u8]) -> &mut HashSet<Key, Hasher> {
        let slot = (self.slot_of)(key) as usize % SLOTS;
        &mut self.sets[slot]
    }

    /// A key the map did not hold was added.
    pub(crate) fn added(&mut self, key: &[u8]) {
        self.set(key).insert(key.into());
    }

    /// A key left the map.
    pub(crate) fn removed(&mut self, key: &[u8]) {
        self.set(key).remove(key);
    }

    /// The map was emptied.
    pub(crate) fn clear(&mut self) {
        for s in self.sets.iter_mut().filter(|s| !s.is_empty()) {
            *s = HashSet::with_hasher(Hasher::default());
        }
    }

    pub(crate) fn keys(&self, slot: u16) -> &HashSet<Key, Hasher> {
        &self.sets[slot as usize % SLOTS]
    }

    /// Keys indexed, all slots together (the map's length, when kept right).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sets.iter().map(|s| s.len()).sum()
    }
}
