//! A command's table entry: name, arity, flags, key positions and handler ([`Spec`]).
//!
//! As in Redis, one table is read by the dispatcher (arity, authentication, routing), by
//! COMMAND INFO/DOCS/LIST/COUNT, and by anything that needs a command's keys (shard routing,
//! WATCH, replication, cluster slots). A command family's file declares its own entries next
//! to its handlers. This file defines the entry; the server stitches the families of this
//! crate and its own connection-level ones into the one table (`abacus_server::command`).
//!
//! Why `Handler::Conn` holds `&dyn Any`: connection-level handlers take the server's
//! connection, shard access and call (`abacus_server::command::ConnEntry`), types this crate
//! cannot name, since it sits below the network layer. Their entries still belong in the same
//! table, so the handler is stored type-erased (a `&'static` to the server's entry, an
//! unsized coercion allowed in a `const`) and the server downcasts it once per call
//! (`downcast_ref`, a type-id compare: no unsafe, no generic parameter spreading through every
//! table and every function that reads one). Keyed handlers, the hot path, stay plain fn
//! pointers.

use abacus_protocol::{Arg, Frame};

use crate::ctx::Ctx;

/// A handler that runs on the shard owning its keys, with exclusive access to that shard's
/// databases for the duration of the call.
pub type KeyedFn = fn(&mut Ctx, &[Arg]) -> Frame;

/// The handler of a container's own entry (OBJECT, XINFO...): never called, since a container
/// runs only as one of its subcommands (the server resolves it, or replies the arity or
/// unknown-subcommand error).
pub struct Container;

/// Where a command runs.
#[derive(Clone, Copy)]
pub enum Handler {
    /// On the shard(s) owning its keys. Commands whose keys live on several shards run
    /// atomically under those shards' locks (see `exec.rs`).
    Keyed(KeyedFn),
    /// In the connection task: connection state, server state, or a fan-out over all shards.
    /// The server's `ConnEntry`, type-erased (see the top of this file), or [`Container`] for a
    /// container command's own entry.
    Conn(&'static (dyn std::any::Any + Send + Sync)),
}

pub mod flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    pub const ADMIN: u32 = 1 << 2;
    pub const FAST: u32 = 1 << 3;
    /// Allowed before authentication (AUTH, HELLO, QUIT, RESET).
    pub const NO_AUTH: u32 = 1 << 4;
    /// Refused inside MULTI ("Command not allowed inside a transaction", and EXEC then aborts):
    /// Redis 7.0's `no-multi` (SAVE, SHUTDOWN).
    pub const NO_MULTI: u32 = 1 << 5;
    pub const DENYOOM: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    /// Touches every shard (FLUSHALL, KEYS...): a transaction containing it locks all shards.
    pub const ALL_SHARDS: u32 = 1 << 9;
    /// Runs at once inside MULTI instead of being queued, because it controls the transaction
    /// (MULTI, EXEC, DISCARD, WATCH, RESET). Internal: COMMAND INFO does not list it.
    pub const CONTROLS_MULTI: u32 = 1 << 10;
    // Internal flags below: what the server does differently for a command, said in its
    // table entry instead of by its name elsewhere. COMMAND INFO lists none of them.
    /// A pipeline of it is bound by reading the value behind the slot (sketch adds, APPEND):
    /// a batch prefetches the values' first lines too (`exec.rs`).
    pub const PREFETCH_VALUE: u32 = 1 << 11;
    /// Refused with MISCONF while persistence fails although it writes nothing: PING, so that
    /// health checks notice (Redis's rule).
    pub const DENY_ON_DISK_ERROR: u32 = 1 << 12;
    /// Runs the transaction's queued commands (EXEC): a malformed one ends the transaction,
    /// and its replies wait for the log as a write's do.
    pub const RUNS_QUEUED: u32 = 1 << 13;
    /// Inside EXEC only scheduled, then started once EXEC has released its shards (BGSAVE,
    /// BGREWRITEAOF): run under EXEC's locks, the handler replies that it is scheduled, and
    /// EXEC starts it after, unless that reply was an error.
    pub const SCHEDULED_IN_EXEC: u32 = 1 << 14;
    /// Queued inside MULTI, but nothing to do when EXEC runs it (UNWATCH: EXEC unwatches
    /// everything anyway).
    pub const NOOP_IN_EXEC: u32 = 1 << 15;
    /// May block (BLPOP...; Redis's `blocking`): runs alone, outside batches, and waits in
    /// `blocking.rs` when it finds nothing to serve. Set by [`super::Spec::blocking`].
    pub const BLOCKING: u32 = 1 << 16;
    // ACL categories Redis 7.0 declares for a command beyond what its flags and group give
    // (`cmd::connection::acl_categories` in the server derives the rest). Internal: COMMAND
    // INFO shows them as categories, not flags.
    /// @connection instead of its group's category (COMMAND and its subcommands, WAIT); a
    /// container with it has categories of its own, not only @slow.
    pub const ACL_CONNECTION: u32 = 1 << 17;
    /// @keyspace although its group is the server's (DBSIZE, FLUSHALL, FLUSHDB, SWAPDB).
    pub const ACL_KEYSPACE: u32 = 1 << 18;
    /// @set, @sortedset and @list instead of its group's category (SORT, SORT_RO).
    pub const ACL_COLLECTIONS: u32 = 1 << 19;
    /// @admin without the `admin` flag (LASTSAVE, ROLE).
    pub const ACL_ADMIN: u32 = 1 << 20;
    /// @dangerous although it is no admin command (KEYS, FLUSHALL, SORT, INFO, MIGRATE, ...).
    pub const ACL_DANGEROUS: u32 = 1 << 21;
    /// A blocked waiter of it runs even when its key is gone, and gets its errors
    /// (XREADGROUP: "the stream key no longer exists", "the consumer group ... no longer
    /// exists"); other waiters are only run on a key that exists.
    pub const BLOCKED_SERVES_MISSING: u32 = 1 << 22;
    /// ACL channel arguments (Redis's channel key specs): `args[1]` is a channel a message
    /// is published to (PUBLISH, SPUBLISH).
    pub const CHANNEL_PUBLISH: u32 = 1 << 28;
    /// Every argument after the name is a channel subscribed to (SUBSCRIBE, SSUBSCRIBE).
    pub const CHANNEL_SUBSCRIBE: u32 = 1 << 29;
    /// Every argument after the name is a channel pattern subscribed to (PSUBSCRIBE).
    pub const CHANNEL_PATTERN: u32 = 1 << 30;
    /// Opens a transaction (MULTI): a replica holds what follows in the primary's stream
    /// until the command that ends it, and applies the whole as one unit.
    pub const TX_BEGIN: u32 = 1 << 25;
    /// Ends a transaction (EXEC, DISCARD): see [`TX_BEGIN`].
    pub const TX_END: u32 = 1 << 24;
    /// A message of the replication link itself (REPLCONF): in a primary's stream (GETACK)
    /// or a replica's acknowledgements (ACK) it is the link's, never applied as a write.
    pub const REPLICATION_LINK: u32 = 1 << 23;
    /// May run while a RESP2 connection is subscribed (Redis 7.0's list: (P|S)SUBSCRIBE,
    /// (P|S)UNSUBSCRIBE, PING, QUIT, RESET); anything else is refused there.
    pub const ALLOWED_SUBSCRIBED: u32 = 1 << 26;
    /// Never queued inside MULTI although it does not control the transaction: it runs at
    /// once (QUIT closes the connection inside MULTI too, as in Redis 7.0).
    pub const NEVER_QUEUED: u32 = 1 << 27;
    /// CLIENT CACHING's flag lasts over it to the next command (the CLIENT container, all
    /// of whose subcommands keep it).
    pub const KEEPS_CLIENT_CACHING: u32 = 1 << 31;
}

/// Finds a key that only parsing the options reveals ([`Spec::trailing_key`]): its index.
pub type KeyFinder = fn(&[Arg]) -> Option<usize>;

/// Finds keys that only parsing the options reveals (XREAD ... STREAMS key... id...): the
/// range of their indexes, or None (a syntax error the handler will report; no keys).
pub type KeyRangeFinder = fn(&[Arg]) -> Option<(usize, usize)>;

/// Where a blocking command's timeout argument is.
#[derive(Clone, Copy, Debug)]
pub enum TimeoutArg {
    /// The last argument (BLPOP key... timeout), in seconds.
    Last,
    /// This index (BLMPOP timeout numkeys key...), in seconds.
    At(usize),
    /// Found by parsing the options (XREAD BLOCK ms): None when the call does not block (no
    /// option), else the timeout in milliseconds or its error.
    Parsed(fn(&[Arg]) -> Option<Result<u64, Frame>>),
}

/// Rewrites a blocking call's arguments before it waits, on the shard that owns some of its
/// keys (`owns` tells which): XREAD's `$` becomes the stream's last ID, so that the wait is
/// for entries after the ones that existed when it blocked. None: nothing to rewrite.
pub type WaitArgsFn = fn(dbs: &mut [abacus_keyspace::Db], db: usize, args: &[Arg], now_ms: u64, owns: &dyn Fn(&[u8]) -> bool) -> Option<Vec<abacus_protocol::Bytes>>;

/// One command.
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: N = exactly N arguments including the name; -N = at least N.
    pub arity: i32,
    pub flags: u32,
    /// First key argument index (0 = no keys), last (-1 = last argument), step.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    /// Index of a `numkeys` argument followed by that many keys (SINTERCARD), 0 if none. Such
    /// keys are "movable": the range above cannot express them, so it is (0, 0, 0) as in
    /// Redis's COMMAND INFO, and [`Spec::key_indexes`] reads the count from the arguments.
    /// A numkeys command with a destination key before the count (ZUNIONSTORE dst numkeys
    /// key...) declares the destination as its range (1, 1, 1): that key comes first.
    pub numkeys_index: usize,
    pub handler: Handler,
    /// Redis ACL category / COMMAND DOCS group.
    pub group: &'static str,
    pub summary: &'static str,
    pub subcommands: &'static [Spec],
    /// A blocking command's timeout argument (see [`Spec::blocking`]).
    pub block_timeout: Option<TimeoutArg>,
    /// A key after the declared range that only parsing the options finds (GEORADIUS ...
    /// STORE key): Redis declares it with a keyword key spec and marks the command
    /// `movablekeys`. The function returns its index, the same one the handler will use, or
    /// None (no such option, or options the handler will refuse before touching any key).
    pub trailing_key: Option<KeyFinder>,
    /// Keys found by parsing (see [`KeyRangeFinder`]); the range above is then (0, 0, 0), as
    /// Redis's COMMAND INFO shows for `movablekeys` commands.
    pub key_range: Option<KeyRangeFinder>,
    /// A blocking command's rewrite of its arguments before it waits ([`WaitArgsFn`]).
    pub wait_args: Option<WaitArgsFn>,
    /// The arguments MONITOR must not show (AUTH's, HELLO's after AUTH), as Redis's command
    /// redacts its own (`redactClientCommandArgument`).
    pub redacted_args: Option<RedactFn>,
    /// What the command's documentation says (COMMAND DOCS, COMMAND INFO's tips, key specs
    /// and informational flags): set by the builders below, next to the entry ([`Doc`]).
    pub doc: Doc,
}

/// Abacus's version: the `since` of Abacus's own commands ([`Spec::abacus_docs`]).
pub const ABACUS: &str = env!("CARGO_PKG_VERSION");

/// Everything Redis's `src/commands/<name>.json` says of a command that the entry's other
/// fields do not: its documentation, tips, key spec flags, the flags that change nothing in
/// Abacus but that COMMAND INFO reports, and its argument tree. Each entry states them with
/// builder calls right after the entry (`.docs(..)`, `.key_specs(..)`, `.args(..)`), so a
/// command's facts have one home; the server derives COMMAND INFO, COMMAND DOCS and COMMAND
/// GETKEYS from them once, when it installs the table (`abacus_server::command::facts`).
///
/// The commands Abacus shares with Redis carry Redis 7.0's texts (Redis is BSD-3-Clause);
/// `scripts/command_docs.py` prints a shared command's builder calls from a running
/// Redis, and `tests/e2e/test_command_info.py` compares them with one.
#[derive(Clone, Copy, Debug)]
pub struct Doc {
    /// The version the command appeared in.
    pub since: &'static str,
    pub complexity: &'static str,
    /// COMMAND DOCS's `doc_flags`: `deprecated`, `syscmd`, or empty.
    pub doc_flags: &'static str,
    pub deprecated_since: &'static str,
    pub replaced_by: &'static str,
    /// (version, what changed), oldest first.
    pub history: &'static [(&'static str, &'static str)],
    /// COMMAND INFO's tips, space separated (`nondeterministic_output`,
    /// `request_policy:all_shards`, ...): what cluster clients and proxies read.
    pub tips: &'static str,
    /// Key spec annotation: each spec's flags separated by `;`, where the default (`RO
    /// access` for a read-only command, `RW update` for a write) does not fit, and the shape
    /// where the entry's key positions cannot give it (`abacus_server::keyspec` has the
    /// grammar). Empty: the defaults.
    pub key_specs: &'static str,
    /// Redis's flags that drive nothing here yet: [`info`] bits.
    pub info: u8,
    /// COMMAND DOCS's `arguments`: one argument a line, `name field=value...` in Redis's
    /// field order (`flags` comma separated), a `oneof` or `block` argument's own arguments
    /// indented two spaces deeper.
    pub args: &'static str,
}

/// Redis 7.0's COMMAND INFO flags that Abacus reports but that change nothing in it (there
/// is no script to run them in, no busy script to interrupt, no asynchronous replica load).
pub mod info {
    /// `noscript`: a script may not call it.
    pub const NOSCRIPT: u8 = 1;
    /// `allow_busy`: served while a script runs too long.
    pub const ALLOW_BUSY: u8 = 1 << 1;
    /// `no_async_loading`: refused while a replica loads its primary's data in the background.
    pub const NO_ASYNC_LOADING: u8 = 1 << 2;
    /// `skip_slowlog`: the slow log leaves it out (EXEC: its queued commands are logged).
    pub const SKIP_SLOWLOG: u8 = 1 << 3;
    /// `asking`: in cluster mode it may use a slot this node is importing without a
    /// preceding ASKING (RESTORE-ASKING, which MIGRATE sends). Unlike the others, cluster
    /// mode's redirection acts on it.
    pub const ASKING: u8 = 1 << 4;
    /// `skip_monitor`: MONITOR does not show it (EVAL, FCALL: the commands they run show).
    pub const SKIP_MONITOR: u8 = 1 << 5;
    /// `no_mandatory_keys`: its keys may all be missing (EVAL's `numkeys` may be 0).
    pub const NO_MANDATORY_KEYS: u8 = 1 << 6;
    /// Not one of Redis's flags (COMMAND INFO does not show it): it runs a script (EVAL,
    /// FCALL), whose reply waits for the log as a write's does.
    pub const RUNS_SCRIPT: u8 = 1 << 7;
}

impl Doc {
    /// No documentation (a test fails for an entry left so).
    pub const NONE: Doc = Doc { since: "", complexity: "", doc_flags: "", deprecated_since: "", replaced_by: "", history: &[], tips: "", key_specs: "", info: 0, args: "" };
}

/// Which of a call's arguments (the name first) are secret: MONITOR shows `(redacted)`.
pub type RedactFn = fn(args: &[&[u8]]) -> std::ops::Range<usize>;

impl Spec {
    pub const fn keyed(name: &'static str, arity: i32, flags: u32, keys: (i32, i32, i32), f: KeyedFn, group: &'static str, summary: &'static str) -> Spec {
        Spec { name, arity, flags, first_key: keys.0, last_key: keys.1, step: keys.2, numkeys_index: 0, handler: Handler::Keyed(f), group, summary, subcommands: &[], block_timeout: None, trailing_key: None, key_range: None, wait_args: None, redacted_args: None, doc: Doc::NONE }
    }

    /// A connection-level entry: `f` is the server's `ConnEntry` (see `Handler::Conn`).
    pub const fn conn(name: &'static str, arity: i32, flags: u32, keys: (i32, i32, i32), f: &'static (dyn std::any::Any + Send + Sync), group: &'static str, summary: &'static str) -> Spec {
        Spec { name, arity, flags, first_key: keys.0, last_key: keys.1, step: keys.2, numkeys_index: 0, handler: Handler::Conn(f), group, summary, subcommands: &[], block_timeout: None, trailing_key: None, key_range: None, wait_args: None, redacted_args: None, doc: Doc::NONE }
    }

    /// A container command's own entry (no keys, no handler of its own) and its subcommands.
    pub const fn container(name: &'static str, arity: i32, flags: u32, group: &'static str, summary: &'static str, subs: &'static [Spec]) -> Spec {
        Spec::conn(name, arity, flags, (0, 0, 0), &Container, group, summary).with_subcommands(subs)
    }

    pub const fn with_subcommands(mut self, subs: &'static [Spec]) -> Spec {
        self.subcommands = subs;
        self
    }

    /// Declares a key that the options name (see [`Spec::trailing_key`]); it comes after the
    /// range's keys.
    pub const fn with_trailing_key(mut self, find: KeyFinder) -> Spec {
        self.trailing_key = Some(find);
        self
    }

    /// Declares the keys as `args[index]` = n followed by n keys (SINTERCARD numkeys key...).
    pub const fn with_numkeys(mut self, index: usize) -> Spec {
        self.numkeys_index = index;
        self
    }

    /// Declares a blocking command (flag BLOCKING) and where its timeout is. Its handler is
    /// the non-blocking form: it serves what it can, and replies null when it found nothing
    /// (what a transaction gets, and what a timeout replies); outside transactions the
    /// connection then waits for the keys (`blocking.rs`).
    pub const fn blocking(mut self, timeout: TimeoutArg) -> Spec {
        self.flags |= flags::BLOCKING;
        self.block_timeout = Some(timeout);
        self
    }

    /// Declares keys found by parsing the arguments ([`KeyRangeFinder`]).
    pub const fn with_key_range(mut self, find: KeyRangeFinder) -> Spec {
        self.key_range = Some(find);
        self
    }

    /// Declares the arguments MONITOR redacts ([`RedactFn`]).
    pub const fn with_redacted_args(mut self, f: RedactFn) -> Spec {
        self.redacted_args = Some(f);
        self
    }

    /// Declares the rewrite of a blocking call's arguments before it waits.
    pub const fn with_wait_args(mut self, f: WaitArgsFn) -> Spec {
        self.wait_args = Some(f);
        self
    }

    // The documentation builders ([`Doc`]).

    /// Since which version the command exists, and its complexity.
    pub const fn docs(mut self, since: &'static str, complexity: &'static str) -> Spec {
        self.doc.since = since;
        self.doc.complexity = complexity;
        self
    }

    /// One of Abacus's own commands: since this version of Abacus.
    pub const fn abacus_docs(self, complexity: &'static str) -> Spec {
        self.docs(ABACUS, complexity)
    }

    /// Deprecated since `since`; `replaced_by` says with what (markdown, as Redis's).
    pub const fn deprecated(mut self, since: &'static str, replaced_by: &'static str) -> Spec {
        self.doc.doc_flags = "deprecated";
        self.doc.deprecated_since = since;
        self.doc.replaced_by = replaced_by;
        self
    }

    /// A system command (doc flag `syscmd`: DEBUG, PFDEBUG, ...).
    pub const fn syscmd(mut self) -> Spec {
        self.doc.doc_flags = "syscmd";
        self
    }

    pub const fn history(mut self, history: &'static [(&'static str, &'static str)]) -> Spec {
        self.doc.history = history;
        self
    }

    pub const fn tips(mut self, tips: &'static str) -> Spec {
        self.doc.tips = tips;
        self
    }

    pub const fn key_specs(mut self, annotation: &'static str) -> Spec {
        self.doc.key_specs = annotation;
        self
    }

    pub const fn noscript(mut self) -> Spec {
        self.doc.info |= info::NOSCRIPT;
        self
    }

    pub const fn skip_monitor(mut self) -> Spec {
        self.doc.info |= info::SKIP_MONITOR;
        self
    }

    pub const fn runs_script(mut self) -> Spec {
        self.doc.info |= info::RUNS_SCRIPT;
        self
    }

    pub const fn no_mandatory_keys(mut self) -> Spec {
        self.doc.info |= info::NO_MANDATORY_KEYS;
        self
    }

    pub const fn allow_busy(mut self) -> Spec {
        self.doc.info |= info::ALLOW_BUSY;
        self
    }

    pub const fn no_async_loading(mut self) -> Spec {
        self.doc.info |= info::NO_ASYNC_LOADING;
        self
    }

    pub const fn skip_slowlog(mut self) -> Spec {
        self.doc.info |= info::SKIP_SLOWLOG;
        self
    }

    pub const fn asking(mut self) -> Spec {
        self.doc.info |= info::ASKING;
        self
    }

    pub const fn args(mut self, args: &'static str) -> Spec {
        self.doc.args = args;
        self
    }

    /// A blocking call's timeout in milliseconds (0 = forever), or its error; None when the
    /// call does not block (not a blocking command, or XREAD without BLOCK).
    pub fn block_timeout_ms(&self, args: &[Arg]) -> Option<Result<u64, Frame>> {
        match self.block_timeout? {
            TimeoutArg::Last => args.last().map(|a| parse_timeout(a)),
            TimeoutArg::At(i) => args.get(i).map(|a| parse_timeout(a)),
            TimeoutArg::Parsed(f) => f(args),
        }
    }

    /// Whether this call may block: a blocking command, and for those whose blocking is an
    /// option (XREAD BLOCK), the option is given. A call that may not block runs as any
    /// other (in batches).
    #[inline]
    pub fn blocks(&self, args: &[Arg]) -> bool {
        match self.block_timeout {
            None => false,
            Some(TimeoutArg::Parsed(f)) => f(args).is_some(),
            Some(_) => true,
        }
    }

    #[inline]
    pub fn is_write(&self) -> bool {
        self.flags & flags::WRITE != 0
    }

    #[inline]
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Whether `argc` arguments (including the name) satisfy the arity.
    #[inline]
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = self.arity as i64;
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    /// Indexes of the key arguments in `args` (the name included). The single source of a
    /// call's keys: shard routing, the atomic multi-shard path, MULTI/EXEC locking and WATCH
    /// signals all read it. A numkeys command whose count is not a positive integer that fits
    /// the arguments has no keys; it then runs anywhere and its handler replies the error.
    #[inline]
    pub fn key_indexes(&self, args: &[Arg]) -> KeyIndexes {
        let argc = args.len();
        if self.numkeys_index == 0 && self.first_key == 1 && self.last_key == 1 {
            // The common shape, one key right after the name: no arithmetic to do.
            let trail = match self.trailing_key {
                None => 0,
                Some(find) => find(args).filter(|&i| i > 1 && i < argc).unwrap_or(0),
            };
            return KeyIndexes { next: 1, end: argc.min(2), step: 1, lead: 0, trail };
        }
        if let Some(find) = self.key_range {
            return match find(args) {
                Some((start, end)) if start <= end && end <= argc => KeyIndexes { next: start, end, step: 1, lead: 0, trail: 0 },
                _ => KeyIndexes { next: 0, end: 0, step: 1, lead: 0, trail: 0 },
            };
        }
        let (start, end, step) = if self.numkeys_index > 0 {
            let count = args
                .get(self.numkeys_index)
                .and_then(|n| abacus_keyspace::value::parse_canonical_i64(n))
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n > 0 && n <= argc.saturating_sub(self.numkeys_index + 1));
            match count {
                Some(n) => {
                    let lead = if self.first_key > 0 { self.first_key as usize } else { 0 };
                    return KeyIndexes { next: self.numkeys_index + 1, end: self.numkeys_index + 1 + n, step: 1, lead, trail: 0 };
                }
                None => (0, 0, 1),
            }
        } else if self.first_key <= 0 {
            (0, 0, 1)
        } else {
            let first = self.first_key as i64;
            let last = if self.last_key < 0 { argc as i64 + self.last_key as i64 } else { self.last_key as i64 };
            let end = (last.min(argc as i64 - 1) + 1).max(first);
            (first as usize, end as usize, self.step.max(1) as usize)
        };
        KeyIndexes { next: start, end, step, lead: 0, trail: 0 }
    }

    /// The subcommand spec named by `args[1]`, for container commands.
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static Spec> {
        self.subcommands.iter().find(|s| s.name.rsplit('|').next().is_some_and(|n| n.as_bytes().eq_ignore_ascii_case(name)))
    }
}

/// The argument positions of a call's keys ([`Spec::key_indexes`]): `next`, `next + step`,
/// ... below `end`. (A plain struct: `StepBy` costs a few branches more per call, and every
/// keyed command asks two or three times.)
#[derive(Clone, Debug)]
pub struct KeyIndexes {
    next: usize,
    end: usize,
    step: usize,
    /// A key before the range (a numkeys command's destination), 0 if none or already given.
    lead: usize,
    /// A key after the range ([`Spec::trailing_key`]), 0 if none or already given.
    trail: usize,
}

impl Iterator for KeyIndexes {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.lead != 0 {
            return Some(std::mem::take(&mut self.lead));
        }
        if self.next < self.end {
            let i = self.next;
            self.next += self.step;
            Some(i)
        } else if self.trail != 0 {
            Some(std::mem::take(&mut self.trail))
        } else {
            None
        }
    }
}

/// Whether `input` names the command whose (lower-case) table name is `lower`, in any case:
/// `lower.eq_ignore_ascii_case(input)` for a lower-case `lower`, one compare per byte for a
/// client that sends names as stored (a pipeline repeats this check for every command).
#[inline]
pub fn is_name(lower: &[u8], input: &[u8]) -> bool {
    lower.len() == input.len() && lower.iter().zip(input).all(|(&l, &c)| l == c || (l.is_ascii_lowercase() && c == l - 32))
}

/// Finds a command of this crate's families by name, case-insensitively (a linear search:
/// for tests and tools; the server's table is the one the dispatcher reads).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    crate::FAMILIES.iter().flat_map(|f| f.iter()).find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Redis's null replies: what a blocking command's handler answers when it served nothing.
#[inline]
pub fn is_null(reply: &Frame) -> bool {
    matches!(reply, Frame::Null | Frame::NullArray)
}

/// A blocking command's timeout in milliseconds (0 = forever), parsed as Redis 7.0's
/// `getTimeoutFromObjectOrReply` with seconds: a decimal number of seconds, rounded up to
/// the millisecond, with its error texts. Handlers check it before anything else (Redis
/// replies a bad timeout before WRONGTYPE).
pub fn parse_timeout(arg: &[u8]) -> Result<u64, Frame> {
    let secs = crate::args::parse_f64(arg).map_err(|_| Frame::error("ERR timeout is not a float or out of range"))?;
    let ms = secs * 1000.0;
    if ms > i64::MAX as f64 {
        return Err(Frame::error("ERR timeout is out of range"));
    }
    let ms = ms.ceil();
    if ms < 0.0 {
        return Err(Frame::error("ERR timeout is negative"));
    }
    Ok(ms as u64)
}
