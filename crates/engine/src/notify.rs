//! Keyspace notifications, the server's part: publishing the events handlers and databases
//! recorded (`abacus_commands::notify`, re-exported here, holds the classes, the flags and the
//! recording; the design is described there). Publishing is pub/sub's, which lives in this
//! crate with the connections, so it stays above the command families.

pub use abacus_commands::notify::*;

use abacus_keyspace::Db;

/// Publishes one event as Redis's notifyKeyspaceEvent: keyspace channel first, then
/// keyevent, each when its flag is set and the class is enabled.
pub fn publish(flags: u32, class: u32, db: usize, event: &str, key: &[u8]) {
    if flags & class == 0 {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        crate::pubsub::publish(&channel, event.as_bytes());
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@{db}__:{event}");
        crate::pubsub::publish(channel.as_bytes(), key);
    }
}

/// Publishes `events` in order.
pub fn publish_all(flags: u32, events: &[Event]) {
    for e in events {
        publish(flags, e.class, e.db, e.name, &e.key);
    }
}

/// Publishes what the databases recorded outside any command (active expiry, keys reclaimed
/// by a fan-out or a check-out), after setting their journals to `flags`.
pub fn publish_journals(dbs: &mut [Db], flags: u32) {
    set_journals(dbs, flags);
    if flags == 0 {
        return;
    }
    let mut events = Vec::new();
    drain_journals(dbs, &mut events);
    publish_all(flags, &events);
}

