//! Keyspace notifications (Redis's `notify-keyspace-events`, notify.c).
//!
//! Why it looks like this: every write would have to say what happened to which key, and
//! most say exactly what their name says (SADD -> "sadd" in class `s`). So handlers stay
//! silent unless Redis's event differs from the command's name or one command fires several
//! events ([`crate::ctx::Ctx::notify`]); after a successful write, every modified key
//! without an event gets the default one, the command's name in its group's class
//! ([`default_class`]). What the keyspace itself does to keys — reclaiming an expired one,
//! adding a new one, missing a read — is recorded by the databases when asked (their
//! journal, `abacus_keyspace::DbEvent`) and merged in order with the handler's events.
//!
//! Events are gathered while the command runs and published after it, from the thread that
//! ran it (the server's `exec.rs` and `notify.rs`: publishing is pub/sub's, above this crate): a command's events are consecutive, in Redis's order, and a command
//! spanning shards (run on a scratch keyspace) publishes once, like any other. With
//! notifications off (the default) the hot path pays one branch per command: the flags in
//! the server's `CmdConfig` are 0 whenever neither K nor E is set.
//!
//! Channels and messages are Redis's: `__keyspace@<db>__:<key>` with the event as the
//! message (K), then `__keyevent@<db>__:<event>` with the key as the message (E).

use abacus_keyspace::{Db, DbEvent};

/// Redis's NOTIFY_* bits (server.h), so that the numbers match Redis's.
pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m (not part of A)
pub const MODULE: u32 = 1 << 13; // d
pub const NEW: u32 = 1 << 14; // n (not part of A)
/// A: every class but m and n.
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's error for a character outside the classes.
pub const ERR_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Redis's keyspaceEventsStringToFlags: None for an unknown character.
pub fn parse_flags(classes: &str) -> Option<u32> {
    let mut flags = 0;
    for c in classes.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Redis's keyspaceEventsFlagsToString: what CONFIG GET shows. As in Redis 7.0, `n` is only
/// shown when not every class of A is set ("KEAn" reads back as "AKE", and still notifies
/// "new").
pub fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [(GENERIC, 'g'), (STRING, '$'), (LIST, 'l'), (SET, 's'), (HASH, 'h'), (ZSET, 'z'), (EXPIRED, 'x'), (EVICTED, 'e'), (STREAM, 't'), (MODULE, 'd'), (NEW, 'n')] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// The flags commands see: 0 unless K or E is set (without either nothing is published).
#[inline]
pub fn effective(flags: u32) -> u32 {
    if flags & (KEYSPACE | KEYEVENT) == 0 {
        0
    } else {
        flags
    }
}

/// Which database events to record for these flags (`abacus_keyspace::db::journal`).
pub fn journal_mask(flags: u32) -> u8 {
    use abacus_keyspace::db::journal;
    let mut m = 0;
    if flags & EXPIRED != 0 {
        m |= journal::EXPIRED;
    }
    if flags & NEW != 0 {
        m |= journal::NEW;
    }
    if flags & KEY_MISS != 0 {
        m |= journal::KEYMISS;
    }
    m
}

/// The class of a command's default event, from its group in the command table.
pub fn default_class(group: &str) -> u32 {
    match group {
        "string" | "bitmap" | "hyperloglog" => STRING,
        "list" => LIST,
        "set" => SET,
        "hash" => HASH,
        "sorted_set" => ZSET,
        "stream" => STREAM,
        _ => GENERIC,
    }
}

/// The writes whose lookups of a missing key fire "keymiss" in Redis 7.0 (they read with
/// lookupKeyRead: GET's part of GETSET/SET GET/GETDEL/GETEX, COPY's source, the sources of
/// BITOP and the set and sorted-set stores, ZRANGESTORE's and the GEO searches' sources,
/// PFMERGE's keys, BITFIELD's GETs alone, the stream group writes XREADGROUP, XACK, XCLAIM and
/// XAUTOCLAIM). Other writes' misses are dropped.
pub fn write_reads(command: &str) -> bool {
    matches!(
        command,
        "set" | "getset" | "getdel" | "getex" | "copy" | "bitop" | "bitfield" | "sinterstore" | "sunionstore" | "sdiffstore" | "pfmerge" | "zunionstore" | "zinterstore" | "zdiffstore"
            | "zrangestore" | "georadius" | "georadiusbymember" | "geosearchstore" | "xreadgroup" | "xack" | "xclaim" | "xautoclaim"
    )
}

/// One event: the database, its class, its name and the key.
#[derive(Debug)]
pub struct Event {
    pub db: usize,
    pub class: u32,
    pub name: &'static str,
    pub key: Vec<u8>,
    /// Said by the handler (not a database's journal): a modified key with such an event
    /// gets no default one.
    pub explicit: bool,
}

fn db_event(db: usize, e: DbEvent, key: &[u8]) -> Event {
    let (class, name) = match e {
        DbEvent::Expired => (EXPIRED, "expired"),
        DbEvent::New => (NEW, "new"),
        DbEvent::KeyMiss => (KEY_MISS, "keymiss"),
    };
    Event { db, class, name, key: key.to_vec(), explicit: false }
}

/// Moves the events the databases recorded into `out`, in database order.
pub fn drain_journals(dbs: &mut [Db], out: &mut Vec<Event>) {
    for (i, d) in dbs.iter_mut().enumerate() {
        if d.has_journal() {
            d.drain_journal(|e, k| out.push(db_event(i, e, k)));
        }
    }
}

/// Makes every database record what `flags` asks for (a change of the configuration).
pub fn set_journals(dbs: &mut [Db], flags: u32) {
    let mask = journal_mask(flags);
    if dbs.first().is_some_and(|d| d.journal_mask() != mask) {
        dbs.iter_mut().for_each(|d| d.set_journal(mask));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_as_redis() {
        // Values read back from redis-server 7.0.15.
        for (set, get) in [("KEA", "AKE"), ("A", "A"), ("An", "A"), ("g$lshzxetdn", "A"), ("KEm", "KEm"), ("Kx", "xK"), ("", ""), ("KEAm", "AKEm"), ("KEz", "zKE"), ("Elg", "glE"), ("n", "n"), ("KEn", "nKE"), ("tdn", "tdn"), ("$n", "$n")] {
            assert_eq!(flags_to_string(parse_flags(set).unwrap()), get, "{set}");
        }
        assert_eq!(parse_flags("KEX"), None);
        assert_eq!(parse_flags("KEAn").map(|f| f & NEW != 0), Some(true));
        assert_eq!(effective(parse_flags("A").unwrap()), 0);
        assert_eq!(effective(parse_flags("K$").unwrap()), KEYSPACE | STRING);
    }
}
