//! The context a keyed handler runs in ([`Ctx`]): the databases of its shard (or of a
//! transaction's checked-out keys), the configuration values it reads, and what it states
//! about its write: the keys it modified ([`KeysModified`], for WATCH), the effect the log and
//! replicas record ([`Effect`]) and its keyspace events (`notify.rs`).
//!
//! Why handlers state their effects: the log writer and replicas must never interpret a
//! command (a relative expiry, SPOP's random draw, INCRBYFLOAT's rounding would replay
//! differently), so every write says what replays it deterministically, as Redis's
//! `alsoPropagate` and rewritten argument vectors do. The server builds a `Ctx` per command
//! (`abacus_engine::exec::run_handler`) and reads these back once the handler returns.

use abacus_keyspace::Db;
use abacus_protocol::{Bytes, Frame};

/// What a keyed command handler sees: the databases of the shard (or of a transaction's
/// checked-out keys) and the selected database.
pub struct Ctx<'a> {
    pub dbs: &'a mut [Db],
    pub db: usize,
    pub now_ms: u64,
    /// Largest string a command may create (proto-max-bulk-len), for SETRANGE/APPEND/SETBIT.
    pub max_string_len: u64,
    /// HLL defaults and limits (HLL.*, PF*).
    pub hll: crate::config::HllConfig,
    /// When sets and hashes stop being listpacks (set-/hash-max-listpack-*).
    pub set_limits: abacus_collections::EncodingLimits,
    pub hash_limits: abacus_collections::EncodingLimits,
    /// How big list nodes grow (list-max-listpack-size).
    pub list_limits: abacus_collections::ListLimits,
    pub zset_limits: abacus_collections::EncodingLimits,
    /// Where stream blocks end (stream-node-max-bytes / -entries).
    pub stream_limits: abacus_collections::StreamLimits,
    /// What the log (and later replicas) record for this command (see [`Effect`]): for a
    /// write its arguments unless the handler says otherwise, for a read nothing unless it
    /// changed stored bytes after all (PFCOUNT refreshing a sketch's cached cardinality).
    pub effect: Effect,
    /// Which of its keys a successful write modified: WATCH signals those (as Redis's
    /// `signalModifiedKey` call sites). Starts as every key; a handler that changed less
    /// says so ([`Ctx::unchanged`], [`Ctx::modified_only`]).
    pub modified: KeysModified,
    /// notify-keyspace-events' flags (0: off, see `notify.rs`).
    pub notify_flags: u32,
    /// The keyspace events this command fired so far, with the databases' own (expired, new,
    /// keymiss) merged in order; published after the command.
    pub events: Vec<crate::notify::Event>,
    /// The handler said which events its write fires (possibly none): no default event.
    pub events_said: bool,
    /// What the handlers reach in the server (see [`Hooks`]).
    pub hooks: &'static Hooks,
}

/// What a handler needs from the layer that runs it, as plain functions set by the server
/// when it builds the [`Ctx`]: this crate has no threads, so whatever runs elsewhere or
/// depends on how the command is being run is asked through here. A reference to a `static`
/// table of fn pointers: one pointer stored per command, no allocation.
pub struct Hooks {
    /// Drops a big value away from the shard's thread (UNLINK's lazy free).
    pub free_later: fn(Box<dyn Send>),
    /// Values above this many heap bytes are given to `free_later` by UNLINK.
    pub lazyfree_threshold_bytes: usize,
    /// While a blocked client's command runs because a key became ready: that key (the
    /// stream readers then answer as Redis serves a blocked client); None otherwise.
    pub serving_key: fn() -> Option<Bytes>,
    /// The cluster hash slot of a key, as the server routes it (`{hash tag}` rule): what
    /// TS.CREATERULE checks so that a rule's destination lives on its source's shard.
    pub key_slot: fn(&[u8]) -> usize,
}

impl Hooks {
    /// Frees in place and never serves a blocked client: a handler run outside a server
    /// (tests, tools), where nothing is routed, so every key is in one slot.
    pub const INLINE: Hooks = Hooks { free_later: drop, lazyfree_threshold_bytes: usize::MAX, serving_key: || None, key_slot: |_| 0 };
}

impl Ctx<'_> {
    /// Whether a blocking pop may take from `key`: always, except while a blocked client is
    /// served because one of its keys became ready, when only that key is served (Redis's
    /// serveClientsBlockedOnKey pops from the ready key alone, whatever the other keys hold).
    pub fn may_serve_from(&self, key: &[u8]) -> bool {
        (self.hooks.serving_key)().is_none_or(|k| &k[..] == key)
    }

    /// Whether a blocked client is being served now (see [`Ctx::may_serve_from`]): its pop
    /// then treats a key of another type as empty, as Redis serves only a key of the type
    /// the client waits for; outside serving, such a key is the command's WRONGTYPE error.
    pub fn serving(&self) -> bool {
        (self.hooks.serving_key)().is_some()
    }

    /// Records keyspace event `event` of `class` (a `notify::` bit) for `key` in the
    /// selected database, if that class is enabled: one branch when notifications are off.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        if self.notify_flags & class != 0 {
            self.record_event(self.db, class, event, key);
        }
    }

    /// [`Ctx::notify`] for a key of database `db` (MOVE, COPY ... DB).
    #[inline]
    pub fn notify_in(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if self.notify_flags & class != 0 {
            self.record_event(db, class, event, key);
        }
    }

    /// The write fires no event of its own, whatever it modified (PFDEBUG...); events it
    /// recorded with [`Ctx::notify`] stand.
    #[inline]
    pub fn notify_none(&mut self) {
        self.events_said = true;
    }

    #[cold]
    fn record_event(&mut self, db: usize, class: u32, name: &'static str, key: &[u8]) {
        // What the keyspace did until now (an expired key reclaimed by the lookup...) came
        // first.
        crate::notify::drain_journals(self.dbs, &mut self.events);
        self.events.push(crate::notify::Event { db, class, name, key: key.to_vec(), explicit: true });
    }

    #[inline]
    pub fn db(&mut self) -> &mut Db {
        &mut self.dbs[self.db]
    }

    /// The write changed nothing (SADD of existing members, SET NX of an existing key...):
    /// no key is signalled. Returns `reply`, for `return ctx.unchanged(reply)`.
    #[inline]
    pub fn unchanged(&mut self, reply: Frame) -> Frame {
        self.modified = KeysModified::NONE;
        reply
    }

    /// The write changed only these of its keys (positions among the command's keys).
    #[inline]
    pub fn modified_only(&mut self, modified: KeysModified) {
        self.modified = modified;
    }

    /// The write is propagated as this call instead of its own arguments (an absolute
    /// expiry for a relative one, SREM of what SPOP chose...).
    #[inline]
    pub fn propagate_as(&mut self, call: Call) {
        self.effect = Effect::As(call.0);
    }

    /// A read that changed stored bytes after all (PFCOUNT's cache refresh) is propagated as
    /// sent, as Redis does, so that replaying the log gives the same bytes.
    pub fn propagate_command(&mut self) {
        self.effect = Effect::Args;
    }

    /// The write changed nothing that needs propagating.
    #[inline]
    pub fn propagate_nothing(&mut self) {
        self.effect = Effect::Nothing;
    }
}

/// An effect record's command line: a command named by its table entry ([`Call::of`]), never
/// by a byte literal, so that what the log and the replicas replay is always a command the
/// table has (a renamed or misspelt command fails to compile, not to replay); or the
/// caller's own command with its arguments rewritten ([`Call::as_sent`]).
#[derive(Debug, PartialEq)]
pub struct Call(Vec<Bytes>);

impl Call {
    /// A call of `spec` (a top-level command: its name is the entry's, no allocation).
    pub fn of(spec: &'static crate::command::Spec) -> Call {
        Call::with_capacity(spec, 4)
    }

    /// A call of `spec` with room for `args` arguments.
    pub fn with_capacity(spec: &'static crate::command::Spec, args: usize) -> Call {
        debug_assert!(!spec.name.contains('|'), "{} is a subcommand", spec.name);
        let mut v = Vec::with_capacity(args + 1);
        v.push(Bytes::from_static(spec.name.as_bytes()));
        Call(v)
    }

    /// The command as the client sent it (its name first), with arguments rewritten.
    pub fn as_sent(args: Vec<Bytes>) -> Call {
        Call(args)
    }

    pub fn arg(mut self, a: Bytes) -> Call {
        self.0.push(a);
        self
    }

    pub fn push(&mut self, a: Bytes) {
        self.0.push(a);
    }

    /// Its number of arguments (the name not counted).
    pub fn args(&self) -> usize {
        self.0.len() - 1
    }

    /// The command line, its name first.
    pub fn into_vec(self) -> Vec<Bytes> {
        self.0
    }
}

impl Extend<Bytes> for Call {
    fn extend<I: IntoIterator<Item = Bytes>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

/// What a write propagates (Redis's rewritten argument vectors): stated by its handler, so
/// that the log writer never interprets a command. Replaying an effect gives the same state
/// whatever the clock and the random draws at replay.
#[derive(Debug, Default, PartialEq)]
pub enum Effect {
    /// The command as the client sent it: deterministic as it is (the default).
    #[default]
    Args,
    /// This command instead.
    As(Vec<Bytes>),
    /// Nothing: the write changed nothing.
    Nothing,
}

/// A set of positions among a command's keys (in [`crate::command::Spec::key_indexes`]
/// order): bit `i` for the `i`-th key. The last bit stands for every key from the 64th on,
/// so a command with more keys signals those together (never fewer than it changed).
/// A word, not a list: every write carries one, and it must not allocate.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct KeysModified(u64);

impl KeysModified {
    pub const ALL: KeysModified = KeysModified(u64::MAX);
    pub const NONE: KeysModified = KeysModified(0);

    #[inline]
    fn bit(position: usize) -> u64 {
        1 << position.min(63)
    }

    /// Just the key at `position`.
    #[inline]
    pub fn key(position: usize) -> KeysModified {
        KeysModified(Self::bit(position))
    }

    /// This set and the key at `position`.
    #[must_use]
    #[inline]
    pub fn and(self, position: usize) -> KeysModified {
        KeysModified(self.0 | Self::bit(position))
    }

    #[inline]
    pub fn contains(self, position: usize) -> bool {
        self.0 & Self::bit(position) != 0
    }

    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_modified_positions() {
        let m = KeysModified::key(1).and(3);
        assert!(m.contains(1) && m.contains(3));
        assert!(!m.contains(0) && !m.contains(2) && !m.contains(63));
        assert!(KeysModified::NONE.is_none() && !m.is_none());
        assert!((0..200).all(|i| KeysModified::ALL.contains(i)));
        // Keys from the 64th on share the last bit: one of them stands for all of them.
        assert!(KeysModified::key(100).contains(63) && KeysModified::key(63).contains(150));
        assert!(!KeysModified::key(100).contains(62));
    }

}
