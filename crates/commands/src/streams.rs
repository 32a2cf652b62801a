//! The stream family: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD,
//! XREADGROUP, XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM, XINFO (STREAM, GROUPS, CONSUMERS, HELP), with Redis 7.0's
//! semantics, argument-checking order, replies and error texts (`t_stream.c`).
//!
//! A stream is an `abacus_collections::Stream` (compact blocks laid out as Redis's nodes, see
//! `stream.rs` there); this file parses, looks keys up and shapes replies. Unlike the other
//! types, a stream that loses its last entry stays (Redis keeps empty streams: they carry
//! their last ID and their groups).
//!
//! Blocking (XREAD/XREADGROUP BLOCK) is the shared mechanism's (the server's `blocking.rs`): the
//! handlers are the non-blocking forms and reply null when nothing is there. Before a call
//! waits, `$` is rewritten to the stream's last ID ([`resolve_dollar`], as Redis rewrites it),
//! and when a ready key wakes a waiter the handler runs in *serving* mode
//! ([`crate::ctx::Hooks::serving_key`]): as Redis's serveClientsBlockedOnStreamKey, it serves
//! that key alone once its last ID passed the one waited for (an XREADGROUP waiter learns
//! that its group or stream went away).
//!
//! Effects: commands are logged as sent (deterministic, IDs and delivery times included,
//! since every logged command carries the time it ran at), except approximate trims (`~`,
//! LIMIT), which depend on the node layout and are logged as the exact trim they amounted to
//! (`XADD key MAXLEN = <length> <id> ...`, `XTRIM key MAXLEN = <length>`), as Redis rewrites
//! them, and a served blocked XREADGROUP, logged as the plain XREADGROUP of the key it served.
//!
//! WATCH is signalled where Redis 7.0 signals it: XADD, XDEL and XTRIM that removed entries,
//! XGROUP CREATE MKSTREAM that created the key; not XSETID, XGROUP's other subcommands,
//! XREADGROUP, XACK or the claims, which change only group state.

use abacus_collections::{AppendError, EntryView, Group, Stream, StreamId, Trim, INVALID_ENTRIES_READ};
use abacus_keyspace::{Db, Value};
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::{Spec, TimeoutArg};
use crate::notify;
use crate::ctx::{Call, Ctx, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
const K2: (i32, i32, i32) = (2, 2, 1);
pub const G: &str = "stream";

pub const COMMANDS: &[Spec] = &[
    XADD,
    Spec::keyed("xrange", -4, READONLY, K1, xrange, G, "Return a range of elements in a stream, with IDs matching the specified IDs interval")
        .docs("5.0.0", "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).")
        .history(&[("6.2.0", "Added exclusive ranges.")])
        .args("
            key type=key key_spec_index=0
            start type=string
            end type=string
            count type=integer token=COUNT flags=optional
        "),
    Spec::keyed("xrevrange", -4, READONLY, K1, xrevrange, G, "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE")
        .docs("5.0.0", "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).")
        .history(&[("6.2.0", "Added exclusive ranges.")])
        .args("
            key type=key key_spec_index=0
            end type=string
            start type=string
            count type=integer token=COUNT flags=optional
        "),
    Spec::keyed("xlen", 2, READONLY | FAST, K1, xlen, G, "Return the number of entries in a stream")
        .docs("5.0.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("xdel", -3, WRITE | FAST, K1, xdel, G, "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.")
        .docs("5.0.0", "O(1) for each single item to delete in the stream, regardless of the stream size.")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            id type=string flags=multiple
        "),
    XTRIM,
    Spec::keyed("xsetid", -3, WRITE | DENYOOM | FAST, K1, xsetid, G, "An internal command for replicating stream values")
        .docs("5.0.0", "O(1)")
        .history(&[("7.0.0", "Added the `entries_added` and `max_deleted_entry_id` arguments.")])
        .args("
            key type=key key_spec_index=0
            last-id type=string
            entries_added type=integer token=ENTRIESADDED since=7.0.0 flags=optional
            max_deleted_entry_id type=string token=MAXDELETEDID since=7.0.0 flags=optional
        "),
    Spec::keyed("xread", -4, READONLY, (0, 0, 0), xread, G, "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.")
        .with_key_range(streams_keys)
        .blocking(TimeoutArg::Parsed(block_option))
        .with_wait_args(resolve_dollar)
        .docs("5.0.0", "For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.")
        .key_specs("RO access kw=STREAMS,1 range=-1,1,2")
        .args("
            count type=integer token=COUNT flags=optional
            milliseconds type=integer token=BLOCK flags=optional
            streams type=block token=STREAMS
              key type=key key_spec_index=0 flags=multiple
              id type=string flags=multiple
        "),
    XREADGROUP,
    Spec::container("xgroup", -2, 0, G, "A container for consumer groups commands", XGROUP)
        .docs("5.0.0", "Depends on subcommand."),
    Spec::keyed("xack", -4, WRITE | FAST, K1, xack, G, "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.")
        .docs("5.0.0", "O(1) for each message ID processed.")
        .args("
            key type=key key_spec_index=0
            group type=string
            id type=string flags=multiple
        "),
    Spec::keyed("xpending", -3, READONLY, K1, xpending, G, "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.")
        .docs("5.0.0", "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.")
        .history(&[("6.2.0", "Added the `IDLE` option and exclusive range intervals.")])
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            group type=string
            filters type=block flags=optional
              min-idle-time type=integer token=IDLE since=6.2.0 flags=optional
              start type=string
              end type=string
              count type=integer
              consumer type=string flags=optional
        "),
    Spec::keyed("xclaim", -6, WRITE | FAST, K1, xclaim, G, "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.")
        .docs("5.0.0", "O(log N) with N being the number of messages in the PEL of the consumer group.")
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            group type=string
            consumer type=string
            min-idle-time type=string
            id type=string flags=multiple
            ms type=integer token=IDLE flags=optional
            unix-time-milliseconds type=unix-time token=TIME flags=optional
            count type=integer token=RETRYCOUNT flags=optional
            force type=pure-token token=FORCE flags=optional
            justid type=pure-token token=JUSTID flags=optional
            id type=string token=LASTID flags=optional
        "),
    Spec::keyed("xautoclaim", -6, WRITE | FAST, K1, xautoclaim, G, "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.")
        .docs("6.2.0", "O(1) if COUNT is small.")
        .history(&[("7.0.0", "Added an element to the reply array, containing deleted entries the command cleared from the PEL")])
        .tips("nondeterministic_output")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            group type=string
            consumer type=string
            min-idle-time type=string
            start type=string
            count type=integer token=COUNT flags=optional
            justid type=pure-token token=JUSTID flags=optional
        "),
    Spec::container("xinfo", -2, 0, G, "A container for stream introspection commands", XINFO)
        .docs("5.0.0", "Depends on subcommand."),
];

/// Named: effect records call it (`ctx::Call::of`).
pub const XREADGROUP: Spec = Spec::keyed("xreadgroup", -7, WRITE | BLOCKED_SERVES_MISSING, (0, 0, 0), xreadgroup, G, "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.")
    .with_key_range(streams_keys)
    .blocking(TimeoutArg::Parsed(block_option))
    .docs("5.0.0", "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.")
    .key_specs("RO access kw=STREAMS,4 range=-1,1,2")
    .args("
        group_consumer type=block token=GROUP
          group type=string
          consumer type=string
        count type=integer token=COUNT flags=optional
        milliseconds type=integer token=BLOCK flags=optional
        noack type=pure-token token=NOACK flags=optional
        streams type=block token=STREAMS
          key type=key key_spec_index=0 flags=multiple
          id type=string flags=multiple
    ");

/// Named: effect records call it (`ctx::Call::of`).
pub const XTRIM: Spec = Spec::keyed("xtrim", -4, WRITE, K1, xtrim, G, "Trims the stream to (approximately if '~' is passed) a certain size")
    .docs("5.0.0", "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.")
    .history(&[("6.2.0", "Added the `MINID` trimming strategy and the `LIMIT` option.")])
    .tips("nondeterministic_output")
    .key_specs("RW delete")
    .args("
        key type=key key_spec_index=0
        trim type=block
          strategy type=oneof
            maxlen type=pure-token token=MAXLEN
            minid type=pure-token token=MINID since=6.2.0
          operator type=oneof flags=optional
            equal type=pure-token token==
            approximately type=pure-token token=~
          threshold type=string
          count type=integer token=LIMIT since=6.2.0 flags=optional
    ");

/// XADD's entry, named by callers that run it (the summarizer's raw-event streams).
pub const XADD: Spec = Spec::keyed("xadd", -5, WRITE | DENYOOM | FAST, K1, xadd, G, "Appends a new entry to a stream")
    .docs("5.0.0", "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.")
    .history(&[
        ("6.2.0", "Added the `NOMKSTREAM` option, `MINID` trimming strategy and the `LIMIT` option."),
        ("7.0.0", "Added support for the `<ms>-*` explicit ID form."),
    ])
    .tips("nondeterministic_output")
    .args("
        key type=key key_spec_index=0
        nomkstream type=pure-token token=NOMKSTREAM since=6.2.0 flags=optional
        trim type=block flags=optional
          strategy type=oneof
            maxlen type=pure-token token=MAXLEN
            minid type=pure-token token=MINID since=6.2.0
          operator type=oneof flags=optional
            equal type=pure-token token==
            approximately type=pure-token token=~
          threshold type=string
          count type=integer token=LIMIT since=6.2.0 flags=optional
        id_or_auto type=oneof
          auto_id type=pure-token token=*
          id type=string
        field_value type=block flags=multiple
          field type=string
          value type=string
    ");

const XGROUP: &[Spec] = &[
    Spec::keyed("xgroup|create", -5, WRITE | DENYOOM, K2, xgroup, G, "Create a consumer group.")
        .docs("5.0.0", "O(1)")
        .history(&[("7.0.0", "Added the `entries_read` named argument.")])
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            groupname type=string
            id type=oneof
              id type=string
              new_id type=pure-token token=$
            mkstream type=pure-token token=MKSTREAM flags=optional
            entries_read type=integer token=ENTRIESREAD flags=optional
        "),
    Spec::keyed("xgroup|setid", -5, WRITE, K2, xgroup, G, "Set a consumer group to an arbitrary last delivered ID value.")
        .docs("5.0.0", "O(1)")
        .history(&[("7.0.0", "Added the optional `entries_read` argument.")])
        .args("
            key type=key key_spec_index=0
            groupname type=string
            id type=oneof
              id type=string
              new_id type=pure-token token=$
            entries_read type=integer token=ENTRIESREAD flags=optional
        "),
    Spec::keyed("xgroup|destroy", 4, WRITE, K2, xgroup, G, "Destroy a consumer group.")
        .docs("5.0.0", "O(N) where N is the number of entries in the group's pending entries list (PEL).")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            groupname type=string
        "),
    Spec::keyed("xgroup|createconsumer", 5, WRITE | DENYOOM, K2, xgroup, G, "Create a consumer in a consumer group.")
        .docs("6.2.0", "O(1)")
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            groupname type=string
            consumername type=string
        "),
    Spec::keyed("xgroup|delconsumer", 5, WRITE, K2, xgroup, G, "Delete a consumer from a consumer group.")
        .docs("5.0.0", "O(1)")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            groupname type=string
            consumername type=string
        "),
    Spec::keyed("xgroup|help", 2, LOADING | STALE, (0, 0, 0), xgroup_help, G, "Show helpful text about the different subcommands")
        .docs("5.0.0", "O(1)"),
];

const XINFO: &[Spec] = &[
    Spec::keyed("xinfo|consumers", 4, READONLY, K2, xinfo, G, "List the consumers in a consumer group")
        .docs("5.0.0", "O(1)")
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
            groupname type=string
        "),
    Spec::keyed("xinfo|groups", 3, READONLY, K2, xinfo, G, "List the consumer groups of a stream")
        .docs("5.0.0", "O(1)")
        .history(&[("7.0.0", "Added the `entries-read` and `lag` fields")])
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("xinfo|stream", -3, READONLY, K2, xinfo, G, "Get information about a stream")
        .docs("5.0.0", "O(1)")
        .history(&[
            ("6.0.0", "Added the `FULL` modifier."),
            ("7.0.0", "Added the `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`, `entries-read` and `lag` fields"),
        ])
        .args("
            key type=key key_spec_index=0
            full type=block token=FULL flags=optional
              count type=integer token=COUNT flags=optional
        "),
    Spec::keyed("xinfo|help", 2, LOADING | STALE, (0, 0, 0), xinfo_help, G, "Show helpful text about the different subcommands")
        .docs("5.0.0", "O(1)"),
];

const ERR_INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

// ----- argument parsing -----

/// glibc's `strtoull` in base 10 over the whole string: leading white space, a sign (a '-'
/// negates, wrapping), at least one digit, nothing after; None on overflow.
fn strtoull(s: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    if i == s.len() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in &s[i..] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's string2ull: a canonical integer (not negative), else strtoull.
fn string2ull(s: &[u8]) -> Option<u64> {
    match abacus_keyspace::value::parse_canonical_i64(s) {
        Some(v) if v < 0 => None,
        Some(v) => Some(v as u64),
        None => strtoull(s),
    }
}

/// Redis's streamGenericParseIDOrReply: `ms-seq`, `ms` (the sequence is `missing_seq`), `-`
/// and `+` unless `strict`, and with `seq_star` the `ms-*` form (the second value is false
/// then: the sequence is to be generated).
fn parse_id_full(a: &[u8], missing_seq: u64, strict: bool, seq_star: bool) -> Result<(StreamId, bool), Frame> {
    let invalid = || err(ERR_INVALID_ID);
    if a.len() > 127 {
        return Err(invalid());
    }
    // A C string: an embedded NUL ends it.
    let buf = &a[..memchr::memchr(0, a).unwrap_or(a.len())];
    if strict && (buf == b"-" || buf == b"+") {
        return Err(invalid());
    }
    if buf == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if buf == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms, seq) = match memchr::memchr(b'-', buf) {
        Some(dash) => (&buf[..dash], Some(&buf[dash + 1..])),
        None => (buf, None),
    };
    let ms = string2ull(ms).ok_or_else(invalid)?;
    match seq {
        Some(b"*") if seq_star => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((StreamId::new(ms, string2ull(seq).ok_or_else(invalid)?), true)),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

/// A strict ID (no `-` / `+`).
fn parse_strict_id(a: &[u8], missing_seq: u64) -> Result<StreamId, Frame> {
    parse_id_full(a, missing_seq, true, false).map(|(id, _)| id)
}

/// An ID that may be `-` or `+`.
fn parse_id(a: &[u8], missing_seq: u64) -> Result<StreamId, Frame> {
    parse_id_full(a, missing_seq, false, false).map(|(id, _)| id)
}

/// A range bound (streamParseIntervalIDOrReply): `(id` is exclusive (and strict).
fn parse_interval(a: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Frame> {
    if a.len() > 1 && a[0] == b'(' {
        Ok((parse_strict_id(&a[1..], missing_seq)?, true))
    } else {
        Ok((parse_id(a, missing_seq)?, false))
    }
}

/// A range's start and end from their arguments, exclusive bounds moved inward.
fn parse_range(start: &[u8], end: &[u8]) -> Result<(StreamId, StreamId), Frame> {
    let (mut s, sx) = parse_interval(start, 0)?;
    if sx {
        s = s.incr().ok_or_else(|| err("ERR invalid start ID for the interval"))?;
    }
    let (mut e, ex) = parse_interval(end, u64::MAX)?;
    if ex {
        e = e.decr().ok_or_else(|| err("ERR invalid end ID for the interval"))?;
    }
    Ok((s, e))
}

// ----- replies -----

fn id_frame(id: StreamId) -> Frame {
    Frame::Bulk(Bytes::from(id.to_bytes()))
}

/// `[id, [field, value, ...]]`.
fn entry_frame(e: &EntryView<'_>) -> Frame {
    let mut fv = Vec::with_capacity(e.len() * 2);
    for (f, v) in e.pairs() {
        fv.push(Frame::Bulk(Bytes::from(f.to_vec())));
        fv.push(Frame::Bulk(Bytes::from(v.to_vec())));
    }
    Frame::Array(vec![id_frame(e.id), Frame::Array(fv)])
}

fn bulk_str(s: &'static str) -> Frame {
    Frame::Bulk(Bytes::from_static(s.as_bytes()))
}

fn subcommand_syntax_error(a: &[Arg], container: &str) -> Frame {
    let name = &a[1][..a[1].len().min(128)];
    err_quoting("ERR unknown subcommand or wrong number of arguments for '", name, &format!("'. Try {container} HELP."))
}

// ----- lookups -----

/// The stream at `key` for reading (counted as a hit or miss). Ok(None) if missing.
fn read_stream<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a Stream>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get(key, now) {
        None => Ok(None),
        Some(e) => e.as_stream().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// The stream at `key` for modification. Ok(None) if missing.
fn stream_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut Stream>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        None => Ok(None),
        Some(e) => e.as_stream_mut().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// Nothing changed: no key signalled, nothing propagated.
fn no_change(ctx: &mut Ctx, reply: Frame) -> Frame {
    ctx.propagate_nothing();
    ctx.unchanged(reply)
}

fn failed(ctx: &mut Ctx, e: Frame) -> Frame {
    ctx.propagate_nothing();
    e
}

// ----- XADD / XTRIM -----

/// Parsed XADD/XTRIM options (Redis's streamAddTrimArgs).
struct AddTrim {
    /// XADD's ID: None for `*`; the bool is false for `ms-*`.
    id: Option<(StreamId, bool)>,
    no_mkstream: bool,
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    /// Where the ID is (XADD).
    idpos: usize,
}

/// Redis's streamParseAddOrTrimArgsOrReply.
fn parse_add_trim(a: &[Arg], xadd: bool, node_max_entries: u64) -> Result<AddTrim, Frame> {
    let mut p = AddTrim { id: None, no_mkstream: false, trim: None, approx: false, limit: 0, idpos: 0 };
    let mut limit_given = false;
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i][..];
        if xadd && opt == b"*" {
            break;
        } else if is(opt, "maxlen") && more > 0 {
            if p.trim.is_some() {
                return Err(err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            p.approx = false;
            let next = &a[i + 1][..];
            if more >= 2 && next == b"~" {
                p.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let maxlen = parse_i64(&a[i + 1])?;
            if maxlen < 0 {
                return Err(err("ERR The MAXLEN argument must be >= 0."));
            }
            i += 1;
            p.trim = Some(Trim::MaxLen(maxlen as u64));
        } else if is(opt, "minid") && more > 0 {
            if p.trim.is_some() {
                return Err(err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            p.approx = false;
            let next = &a[i + 1][..];
            if more >= 2 && next == b"~" {
                p.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let min = parse_strict_id(&a[i + 1], 0)?;
            i += 1;
            p.trim = Some(Trim::MinId(min));
        } else if is(opt, "limit") && more > 0 {
            let limit = parse_i64(&a[i + 1])?;
            if limit < 0 {
                return Err(err("ERR The LIMIT argument must be >= 0."));
            }
            p.limit = limit as u64;
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            p.no_mkstream = true;
        } else if xadd {
            p.id = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(err(ERR_SYNTAX));
        }
        i += 1;
    }
    if p.limit != 0 && p.trim.is_none() {
        return Err(err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && p.trim.is_none() {
        return Err(err("ERR syntax error, XTRIM must be called with a trimming strategy"));
    }
    if limit_given {
        if !p.approx {
            return Err(err("ERR syntax error, LIMIT cannot be used without the special ~ option"));
        }
    } else if p.approx {
        p.limit = node_max_entries.saturating_mul(100);
    } else {
        p.limit = 0;
    }
    p.idpos = i;
    Ok(p)
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value...
fn xadd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let limits = ctx.stream_limits;
    let p = match parse_add_trim(a, true, limits.node_max_entries) {
        Ok(p) => p,
        Err(e) => return failed(ctx, e),
    };
    let field_pos = p.idpos + 1;
    if a.len() < field_pos + 2 || (a.len() - field_pos) % 2 == 1 {
        return failed(ctx, err("ERR wrong number of arguments for 'xadd' command"));
    }
    if let Some((id, true)) = p.id {
        if id.is_zero() {
            return failed(ctx, err("ERR The ID specified in XADD must be greater than 0-0"));
        }
    }
    let pairs: Vec<&[u8]> = a[field_pos..].iter().map(|x| &x[..]).collect();
    let total: u64 = pairs.iter().map(|x| x.len() as u64).sum();
    if total > abacus_collections::LISTPACK_MAX_SIZE {
        return failed(ctx, err("ERR Elements are too large to be stored"));
    }
    let key = &a[1];
    let now = ctx.now_ms;
    let existing = match stream_mut(ctx, key) {
        Err(e) => return failed(ctx, e),
        Ok(s) => s.is_some(),
    };
    if !existing {
        if p.no_mkstream {
            return no_change(ctx, Frame::Null);
        }
        ctx.db().set(key, Value::Stream(Box::new(Stream::new())), 0, now);
    }
    let s = match stream_mut(ctx, key) {
        Ok(Some(s)) => s,
        _ => return failed(ctx, err(ERR_WRONGTYPE)),
    };
    if s.last_id() == StreamId::MAX {
        return failed(ctx, err("ERR The stream has exhausted the last possible ID, unable to add more items"));
    }
    let id = match p.id {
        None => s.next_auto_id(now),
        Some((id, true)) => id,
        Some((id, false)) => {
            let last = s.last_id();
            if last.ms == id.ms {
                if last.seq == u64::MAX {
                    return failed(ctx, err("ERR Elements are too large to be stored"));
                }
                StreamId::new(id.ms, last.seq + 1)
            } else {
                id
            }
        }
    };
    match s.append(id, &pairs, &limits) {
        Ok(()) => {}
        Err(AppendError::IdTooSmall) => return failed(ctx, err("ERR The ID specified in XADD is equal or smaller than the target stream top item")),
        Err(AppendError::TooLarge) => return failed(ctx, err("ERR Elements are too large to be stored")),
    }
    let mut trimmed = 0;
    if let Some(trim) = p.trim {
        trimmed = s.trim(trim, p.approx, p.limit);
    }
    let len = s.len();
    ctx.notify(notify::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    if p.trim.is_some() && p.approx {
        // What `~` and LIMIT removed depends on the node layout: the log gets the exact
        // trim it amounted to, with the ID that was added.
        let mut cmd = Call::with_capacity(&XADD, 5 + a.len() - field_pos).arg(Bytes::copy_from_slice(key)).arg(Bytes::from_static(b"MAXLEN")).arg(Bytes::from_static(b"=")).arg(Bytes::from(int_bytes(len as i64))).arg(Bytes::from(id.to_bytes()));
        cmd.extend(a[field_pos..].iter().map(|x| Bytes::copy_from_slice(x)));
        ctx.propagate_as(cmd);
    } else if a[field_pos - 1].contains(&b'*') {
        // An ID the server chose (`*`, `ms-*`) depends on the clock: the log and the
        // replication stream get the ID that was added, as Redis propagates it.
        let mut cmd: Vec<Bytes> = a[..field_pos - 1].iter().map(|x| Bytes::copy_from_slice(x)).collect();
        cmd.push(Bytes::from(id.to_bytes()));
        cmd.extend(a[field_pos..].iter().map(|x| Bytes::copy_from_slice(x)));
        ctx.propagate_as(Call::as_sent(cmd));
    }
    id_frame(id)
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
fn xtrim(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let p = match parse_add_trim(a, false, ctx.stream_limits.node_max_entries) {
        Ok(p) => p,
        Err(e) => return failed(ctx, e),
    };
    let key = &a[1];
    let s = match stream_mut(ctx, key) {
        Err(e) => return failed(ctx, e),
        Ok(None) => return no_change(ctx, Frame::Integer(0)),
        Ok(Some(s)) => s,
    };
    let deleted = s.trim(p.trim.expect("XTRIM has a strategy"), p.approx, p.limit);
    let len = s.len();
    if deleted == 0 {
        return no_change(ctx, Frame::Integer(0));
    }
    if p.approx {
        ctx.propagate_as(Call::of(&XTRIM).arg(Bytes::copy_from_slice(key)).arg(Bytes::from_static(b"MAXLEN")).arg(Bytes::from_static(b"=")).arg(Bytes::from(int_bytes(len as i64))));
    }
    Frame::Integer(deleted as i64)
}

// ----- XRANGE / XREVRANGE / XLEN / XDEL / XSETID -----

fn range_command(ctx: &mut Ctx, a: &[Arg], rev: bool) -> Frame {
    let (start_arg, end_arg) = if rev { (&a[3], &a[2]) } else { (&a[2], &a[3]) };
    let (start, end) = match parse_range(start_arg, end_arg) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < a.len() {
        if is(&a[j], "count") && j + 1 < a.len() {
            count = match parse_i64(&a[j + 1]) {
                Ok(c) => c.max(0),
                Err(e) => return e,
            };
            j += 2;
        } else {
            return err(ERR_SYNTAX);
        }
    }
    let s = match read_stream(ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Frame::Array(Vec::new()),
        Ok(Some(s)) => s,
    };
    if count == 0 {
        return Frame::NullArray;
    }
    let limit = if count < 0 { usize::MAX } else { count as usize };
    Frame::Array(s.range(start, end, rev).take(limit).map(|e| entry_frame(&e)).collect())
}

fn xrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_command(ctx, a, false)
}

fn xrevrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    range_command(ctx, a, true)
}

fn xlen(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_stream(ctx, &a[1]) {
        Err(e) => e,
        Ok(None) => Frame::Integer(0),
        Ok(Some(s)) => Frame::Integer(s.len() as i64),
    }
}

/// XDEL key id...: the key is looked up before the IDs are parsed (a missing key answers 0
/// whatever they are).
fn xdel(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match stream_mut(ctx, &a[1]) {
        Err(e) => return failed(ctx, e),
        Ok(None) => return no_change(ctx, Frame::Integer(0)),
        Ok(Some(_)) => {}
    }
    let mut ids = Vec::with_capacity(a.len() - 2);
    for x in &a[2..] {
        match parse_strict_id(x, 0) {
            Ok(id) => ids.push(id),
            Err(e) => return failed(ctx, e),
        }
    }
    let Ok(Some(s)) = stream_mut(ctx, &a[1]) else { return failed(ctx, err(ERR_WRONGTYPE)) };
    let deleted = s.xdel(&ids);
    if deleted == 0 {
        return no_change(ctx, Frame::Integer(0));
    }
    Frame::Integer(deleted as i64)
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
fn xsetid(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let id = match parse_strict_id(&a[2], 0) {
        Ok(id) => id,
        Err(e) => return failed(ctx, e),
    };
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < a.len() {
        let more = a.len() - 1 - i;
        if is(&a[i], "entriesadded") && more > 0 {
            entries_added = match parse_i64(&a[i + 1]) {
                Ok(n) if n < 0 => return failed(ctx, err("ERR entries_added must be positive")),
                Ok(n) => n,
                Err(e) => return failed(ctx, e),
            };
            i += 2;
        } else if is(&a[i], "maxdeletedid") && more > 0 {
            max_xdel = match parse_strict_id(&a[i + 1], 0) {
                Ok(m) if id < m => return failed(ctx, err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")),
                Ok(m) => m,
                Err(e) => return failed(ctx, e),
            };
            i += 2;
        } else {
            return failed(ctx, err(ERR_SYNTAX));
        }
    }
    let key = &a[1];
    let s = match stream_mut(ctx, key) {
        Err(e) => return failed(ctx, e),
        Ok(None) => return failed(ctx, err(ERR_NO_SUCH_KEY)),
        Ok(Some(s)) => s,
    };
    if s.len() > 0 {
        let max = s.last_valid_id().unwrap_or(StreamId::MIN);
        if id < max {
            return failed(ctx, err("ERR The ID specified in XSETID is smaller than the target stream top item"));
        }
        if entries_added != -1 && s.len() > entries_added as u64 {
            return failed(ctx, err("ERR The entries_added specified in XSETID is smaller than the target stream length"));
        }
    }
    s.set_last_id(id);
    if entries_added != -1 {
        s.set_entries_added(entries_added as u64);
    }
    if !max_xdel.is_zero() {
        s.set_max_deleted_id(max_xdel);
    }
    ctx.notify(notify::STREAM, "xsetid", key);
    ctx.modified_only(KeysModified::NONE);
    Frame::ok()
}

// ----- XREAD / XREADGROUP -----

/// Where XREAD/XREADGROUP's STREAMS argument is (Redis's xreadGetKeys): the options before
/// it are skipped by their shape.
fn streams_pos(a: &[Arg]) -> Option<usize> {
    let mut i = 1;
    while i < a.len() {
        let o = &a[i][..];
        if is(o, "block") || is(o, "count") {
            i += 1;
        } else if is(o, "group") {
            i += 2;
        } else if is(o, "noack") {
        } else if is(o, "streams") {
            return Some(i);
        } else {
            return None;
        }
        i += 1;
    }
    None
}

/// The keys of XREAD/XREADGROUP: the first half of the arguments after STREAMS.
fn streams_keys(a: &[Arg]) -> Option<(usize, usize)> {
    let pos = streams_pos(a)?;
    let num = a.len() - pos - 1;
    if num == 0 || num % 2 != 0 {
        return None;
    }
    Some((pos + 1, pos + 1 + num / 2))
}

/// Redis 7.0's getTimeoutFromObjectOrReply in milliseconds.
fn parse_block_ms(a: &[u8]) -> Result<u64, Frame> {
    let ms = abacus_keyspace::value::parse_canonical_i64(a).ok_or_else(|| err("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(err("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

/// XREAD/XREADGROUP's BLOCK option, if given before STREAMS (see [`TimeoutArg::Parsed`]).
fn block_option(a: &[Arg]) -> Option<Result<u64, Frame>> {
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - i - 1;
        let o = &a[i][..];
        if is(o, "block") && more > 0 {
            return Some(parse_block_ms(&a[i + 1]));
        } else if is(o, "count") && more > 0 {
            i += 2;
        } else if is(o, "group") && more >= 2 {
            i += 3;
        } else if is(o, "noack") {
            i += 1;
        } else {
            return None;
        }
    }
    None
}

/// Before an XREAD waits: each `$` of a key this shard owns becomes the stream's last ID
/// (0-0 for a missing key), as Redis rewrites the command when it blocks.
fn resolve_dollar(dbs: &mut [Db], db: usize, a: &[Arg], now: u64, owns: &dyn Fn(&[u8]) -> bool) -> Option<Vec<Bytes>> {
    let (start, end) = streams_keys(a)?;
    let n = end - start;
    let mut out: Option<Vec<Bytes>> = None;
    for i in 0..n {
        let (key, id) = (&a[start + i], &a[end + i]);
        if &id[..] != b"$" || !owns(key) {
            continue;
        }
        let last = match dbs.get(db).and_then(|d| d.get_shared(key, now)) {
            None => StreamId::MIN,
            Some(e) => match e.as_stream() {
                Some(s) => s.last_id(),
                None => continue,
            },
        };
        let v = out.get_or_insert_with(|| a.iter().map(|x| Bytes::copy_from_slice(x)).collect());
        v[end + i] = Bytes::from(last.to_bytes());
    }
    out
}

struct ReadArgs {
    count: usize,
    noack: bool,
    group: Option<(usize, usize)>,
    /// Index of the first key; as many IDs follow the keys.
    keys: usize,
    n: usize,
}

fn parse_read(a: &[Arg], group_cmd: bool) -> Result<ReadArgs, Frame> {
    let mut r = ReadArgs { count: 0, noack: false, group: None, keys: 0, n: 0 };
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - i - 1;
        let o = &a[i][..];
        if is(o, "block") && more > 0 {
            i += 1;
            parse_block_ms(&a[i])?;
        } else if is(o, "count") && more > 0 {
            i += 1;
            r.count = parse_i64(&a[i])?.max(0) as usize;
        } else if is(o, "streams") && more > 0 {
            r.keys = i + 1;
            let rest = a.len() - r.keys;
            if rest % 2 != 0 {
                return Err(err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            r.n = rest / 2;
            break;
        } else if is(o, "group") && more >= 2 {
            if !group_cmd {
                return Err(err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.group = Some((i + 1, i + 2));
            i += 2;
        } else if is(o, "noack") {
            if !group_cmd {
                return Err(err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.noack = true;
        } else {
            return Err(err(ERR_SYNTAX));
        }
        i += 1;
    }
    if r.keys == 0 {
        return Err(err(ERR_SYNTAX));
    }
    if group_cmd && r.group.is_none() {
        return Err(err("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// What an XREADGROUP reads from one stream for one consumer: the reply's entries, and
/// whether the group changed (something to propagate).
fn read_for_group(s: &Stream, g: &mut Group, consumer: &std::sync::Arc<[u8]>, start: StreamId, count: usize, noack: bool, now: i64) -> (Vec<Frame>, bool) {
    let mut out = Vec::new();
    let mut changed = false;
    for e in s.range(start, StreamId::MAX, false) {
        if e.id > g.last_id {
            if g.entries_read != INVALID_ENTRIES_READ && !s.range_has_tombstones(Some(e.id), None) {
                g.entries_read += 1;
            } else if s.entries_added() != 0 {
                g.entries_read = s.estimate_distance(e.id).map_or(INVALID_ENTRIES_READ, |v| v as i64);
            }
            g.last_id = e.id;
            changed = true;
        }
        out.push(entry_frame(&e));
        if !noack {
            let nack = g.assign(e.id, consumer, now);
            nack.delivery_time = now;
            nack.delivery_count = 1;
            changed = true;
        }
        if count != 0 && out.len() == count {
            break;
        }
    }
    (out, changed)
}

/// A consumer's history (streamReplyWithRangeFromConsumerPEL): its pending entries from
/// `start`, each delivered once more; one deleted from the stream shows as `[id, nil]`.
fn read_history(s: &Stream, g: &mut Group, consumer: &[u8], start: StreamId, count: usize, now: i64) -> (Vec<Frame>, bool) {
    let ids: Vec<StreamId> = match g.consumers.get(consumer) {
        Some(c) => c.pel.range(start..).take(if count == 0 { usize::MAX } else { count }).copied().collect(),
        None => Vec::new(),
    };
    let mut out = Vec::with_capacity(ids.len());
    let mut changed = false;
    for id in ids {
        match s.get(id) {
            Some(e) => {
                out.push(entry_frame(&e));
                if let Some(nack) = g.pel.get_mut(&id) {
                    nack.delivery_time = now;
                    nack.delivery_count += 1;
                    changed = true;
                }
            }
            None => out.push(Frame::Array(vec![id_frame(id), Frame::NullArray])),
        }
    }
    (out, changed)
}

fn xread(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    read_command(ctx, a, false)
}

fn xreadgroup(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    read_command(ctx, a, true)
}

/// What an ID argument asks for.
#[derive(Clone, Copy)]
enum After {
    Id(StreamId),
    /// `>`: what the group has not delivered yet.
    New,
}

fn read_command(ctx: &mut Ctx, a: &[Arg], group_cmd: bool) -> Frame {
    let r = match parse_read(a, group_cmd) {
        Ok(r) => r,
        Err(e) => return failed(ctx, e),
    };
    if let Some(key) = (ctx.hooks.serving_key)() {
        return serve_blocked(ctx, a, &r, &key);
    }
    let now = ctx.now_ms;
    let group_name: Option<&[u8]> = r.group.map(|(g, _)| &a[g][..]);
    // Every key is checked, and its ID parsed, before anything is served (Redis's order).
    let mut afters: Vec<After> = Vec::with_capacity(r.n);
    for i in 0..r.n {
        let (key, id) = (&a[r.keys + i], &a[r.keys + r.n + i]);
        let (exists, last, has_group) = match read_stream(ctx, key) {
            Err(e) => return failed(ctx, e),
            Ok(None) => (false, StreamId::MIN, false),
            Ok(Some(s)) => (true, s.last_id(), group_name.is_some_and(|g| s.group(g).is_some())),
        };
        if let Some(g) = group_name {
            if !exists || !has_group {
                let mut m = b"NOGROUP No such key '".to_vec();
                m.extend_from_slice(key);
                m.extend_from_slice(b"' or consumer group '");
                m.extend_from_slice(g);
                m.extend_from_slice(b"' in XREADGROUP with GROUP option");
                return failed(ctx, Frame::Error(m.into()));
            }
        }
        if &id[..] == b"$" {
            if group_cmd {
                return failed(ctx, err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            afters.push(After::Id(last));
        } else if &id[..] == b">" {
            if !group_cmd {
                return failed(ctx, err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            afters.push(After::New);
        } else {
            match parse_strict_id(id, 0) {
                // Redis marks `>` with the last possible ID: given explicitly, it means `>`.
                Ok(StreamId::MAX) if group_cmd => afters.push(After::New),
                Ok(id) => afters.push(After::Id(id)),
                Err(e) => return failed(ctx, e),
            }
        }
    }
    let mut results: Vec<(Frame, Frame)> = Vec::new();
    let mut changed = false;
    for (i, after) in afters.into_iter().enumerate() {
        let key = &a[r.keys + i];
        match r.group {
            None => {
                let Ok(Some(s)) = read_stream(ctx, key) else { continue };
                let After::Id(gt) = after else { continue };
                if s.len() == 0 || s.last_valid_id().is_none_or(|max| max <= gt) {
                    continue;
                }
                let Some(start) = gt.incr() else { continue };
                let limit = if r.count == 0 { usize::MAX } else { r.count };
                let entries: Vec<Frame> = s.range(start, StreamId::MAX, false).take(limit).map(|e| entry_frame(&e)).collect();
                results.push((Frame::Bulk(Bytes::copy_from_slice(key)), Frame::Array(entries)));
            }
            Some((g, c)) => {
                let (gname, cname) = (&a[g][..], &a[c][..]);
                let Ok(Some(s)) = stream_mut(ctx, key) else { continue };
                let Some(mut group) = s.take_group(gname) else { continue };
                let (serve, history, gt) = match after {
                    After::Id(id) => (true, true, id),
                    After::New => {
                        let newer = s.len() > 0 && s.last_valid_id().is_some_and(|max| max > group.last_id);
                        (newer, false, group.last_id)
                    }
                };
                // Redis 7.0 looks the consumer up (creating it) only for a stream it serves.
                let mut entries = Vec::new();
                let mut created = false;
                if serve {
                    let (consumer, new) = group.consumer_or_create(cname, now as i64);
                    created = new;
                    // The consumer was seen: its seen time is state the log must carry.
                    changed = true;
                    if let Some(c) = group.consumers.get_mut(cname) {
                        c.seen_time = now as i64;
                    }
                    // Redis's streamIncrID wraps the last possible ID to 0-0.
                    {
                        let start = gt.incr().unwrap_or(StreamId::MIN);
                        let (e, ch) = if history { read_history(s, &mut group, cname, start, r.count, now as i64) } else { read_for_group(s, &mut group, &consumer, start, r.count, r.noack, now as i64) };
                        entries = e;
                        changed |= ch;
                    }
                }
                s.put_group(gname, group);
                if created {
                    changed = true;
                    ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
                }
                if serve {
                    results.push((Frame::Bulk(Bytes::copy_from_slice(key)), Frame::Array(entries)));
                }
            }
        }
    }
    if group_cmd {
        ctx.modified_only(KeysModified::NONE);
        // A read that served no stream changed nothing (Redis 7.0 does not even look its
        // consumer up): not logged, as the try of a blocking XREADGROUP that then waits.
        if !changed {
            ctx.propagate_nothing();
        }
    }
    if results.is_empty() {
        return Frame::NullArray;
    }
    Frame::KeyedPairs(results)
}

/// A blocked XREAD/XREADGROUP served because `key` became ready (Redis 7.0's
/// serveClientsBlockedOnStreamKey): that key alone, once its last ID is past the one waited
/// for; null to keep waiting.
fn serve_blocked(ctx: &mut Ctx, a: &[Arg], r: &ReadArgs, key: &[u8]) -> Frame {
    let now = ctx.now_ms as i64;
    let Some(i) = (0..r.n).find(|&i| &a[r.keys + i][..] == key) else { return no_change(ctx, Frame::NullArray) };
    let id_arg = &a[r.keys + r.n + i];
    let exists = matches!(read_stream(ctx, key), Ok(Some(_)));
    let Some((g, c)) = r.group else {
        let Ok(Some(s)) = read_stream(ctx, key) else { return Frame::NullArray };
        let Ok(gt) = parse_strict_id(id_arg, 0) else { return Frame::NullArray };
        if s.last_id() <= gt {
            return Frame::NullArray;
        }
        let Some(start) = gt.incr() else { return Frame::NullArray };
        let limit = if r.count == 0 { usize::MAX } else { r.count };
        let entries: Vec<Frame> = s.range(start, StreamId::MAX, false).take(limit).map(|e| entry_frame(&e)).collect();
        return Frame::KeyedPairs(vec![(Frame::Bulk(Bytes::copy_from_slice(key)), Frame::Array(entries))]);
    };
    if !exists {
        return failed(ctx, err("UNBLOCKED the stream key no longer exists"));
    }
    let (gname, cname) = (&a[g][..], &a[c][..]);
    let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err("UNBLOCKED the stream key no longer exists")) };
    let Some(mut group) = s.take_group(gname) else {
        return failed(ctx, err("NOGROUP the consumer group this client was blocked on no longer exists"));
    };
    let gt = match parse_strict_id(id_arg, 0) {
        Ok(id) if id != StreamId::MAX => id,
        _ => group.last_id,
    };
    if s.last_id() <= gt {
        s.put_group(gname, group);
        return no_change(ctx, Frame::NullArray);
    }
    let (consumer, created) = group.consumer_or_create(cname, now);
    if let Some(c) = group.consumers.get_mut(cname) {
        c.seen_time = now;
    }
    let entries = match gt.incr() {
        Some(start) => read_for_group(s, &mut group, &consumer, start, r.count, r.noack, now).0,
        None => Vec::new(),
    };
    s.put_group(gname, group);
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.modified_only(KeysModified::NONE);
    // The log gets the plain read of this key that the wake-up amounted to.
    let mut cmd = Call::with_capacity(&XREADGROUP, 8).arg(Bytes::from_static(b"GROUP")).arg(Bytes::copy_from_slice(gname)).arg(Bytes::copy_from_slice(cname));
    if r.count != 0 {
        cmd.push(Bytes::from_static(b"COUNT"));
        cmd.push(Bytes::from(int_bytes(r.count as i64)));
    }
    if r.noack {
        cmd.push(Bytes::from_static(b"NOACK"));
    }
    cmd.extend([Bytes::from_static(b"STREAMS"), Bytes::copy_from_slice(key), Bytes::from_static(b">")]);
    ctx.propagate_as(cmd);
    Frame::KeyedPairs(vec![(Frame::Bulk(Bytes::copy_from_slice(key)), Frame::Array(entries))])
}

// ----- XGROUP -----

fn xgroup_help(_ctx: &mut Ctx, _a: &[Arg]) -> Frame {
    help(&[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Prints this help.",
    ])
}

fn help(lines: &[&'static str]) -> Frame {
    Frame::Array(lines.iter().map(|l| Frame::Simple(Bytes::from_static(l.as_bytes()))).collect())
}

fn nogroup_for_key(group: &[u8], key: &[u8]) -> Frame {
    let mut m = b"NOGROUP No such consumer group '".to_vec();
    m.extend_from_slice(group);
    m.extend_from_slice(b"' for key name '");
    m.extend_from_slice(key);
    m.push(b'\'');
    Frame::Error(m.into())
}

/// Redis's xgroupCommand: one parser for every subcommand (its option and arity checks come
/// before the key's), then the subcommand.
fn xgroup(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let sub = &a[1][..];
    let create = is(sub, "create");
    let setid = is(sub, "setid");
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < a.len() {
        if create && is(&a[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && is(&a[i], "entriesread") && i + 1 < a.len() {
            entries_read = match parse_i64(&a[i + 1]) {
                Ok(n) if n < 0 && n != INVALID_ENTRIES_READ => return failed(ctx, err("ERR value for ENTRIESREAD must be positive or -1")),
                Ok(n) => n,
                Err(e) => return failed(ctx, e),
            };
            i += 2;
        } else {
            return failed(ctx, subcommand_syntax_error(a, "XGROUP"));
        }
    }
    let (key, gname) = (&a[2], &a[3][..]);
    let now = ctx.now_ms;
    let (exists, has_group, last) = match stream_mut(ctx, key) {
        Err(e) => return failed(ctx, e),
        Ok(None) => (false, false, StreamId::MIN),
        Ok(Some(s)) => (true, s.group(gname).is_some(), s.last_id()),
    };
    if !mkstream {
        if !exists {
            return failed(ctx, err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
        }
        if !has_group && (setid || is(sub, "createconsumer") || is(sub, "delconsumer")) {
            return failed(ctx, nogroup_for_key(gname, key));
        }
    }
    if create && (5..=8).contains(&a.len()) {
        let id = if &a[4][..] == b"$" {
            last
        } else {
            match parse_strict_id(&a[4], 0) {
                Ok(id) => id,
                Err(e) => return failed(ctx, e),
            }
        };
        if !exists {
            ctx.db().set(key, Value::Stream(Box::new(Stream::new())), 0, now);
        }
        let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err(ERR_WRONGTYPE)) };
        if !s.create_group(gname, id, entries_read) {
            // (A stream created just now has no group: only an existing one gets here.)
            return failed(ctx, Frame::error("BUSYGROUP Consumer Group name already exists"));
        }
        ctx.notify(notify::STREAM, "xgroup-create", key);
        ctx.modified_only(if exists { KeysModified::NONE } else { KeysModified::key(0) });
        return Frame::ok();
    }
    if setid && (a.len() == 5 || a.len() == 7) {
        let id = if &a[4][..] == b"$" {
            last
        } else {
            match parse_id(&a[4], 0) {
                Ok(id) => id,
                Err(e) => return failed(ctx, e),
            }
        };
        let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err(ERR_WRONGTYPE)) };
        if let Some(g) = s.group_mut(gname) {
            g.last_id = id;
            g.entries_read = entries_read;
        }
        ctx.notify(notify::STREAM, "xgroup-setid", key);
        ctx.modified_only(KeysModified::NONE);
        return Frame::ok();
    }
    if is(sub, "destroy") && a.len() == 4 {
        let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err(ERR_WRONGTYPE)) };
        if !s.destroy_group(gname) {
            return no_change(ctx, Frame::Integer(0));
        }
        ctx.notify(notify::STREAM, "xgroup-destroy", key);
        // Blocked XREADGROUPs of the group learn that it is gone; WATCH is not signalled.
        ctx.db().signal_ready(key);
        ctx.modified_only(KeysModified::NONE);
        return Frame::Integer(1);
    }
    if is(sub, "createconsumer") && a.len() == 5 {
        let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err(ERR_WRONGTYPE)) };
        let created = s.group_mut(gname).is_some_and(|g| g.create_consumer(&a[4], now as i64));
        if !created {
            return no_change(ctx, Frame::Integer(0));
        }
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
        ctx.modified_only(KeysModified::NONE);
        return Frame::Integer(1);
    }
    if is(sub, "delconsumer") && a.len() == 5 {
        let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err(ERR_WRONGTYPE)) };
        let Some(pending) = s.group_mut(gname).and_then(|g| g.delete_consumer(&a[4])) else {
            return no_change(ctx, Frame::Integer(0));
        };
        ctx.notify(notify::STREAM, "xgroup-delconsumer", key);
        ctx.modified_only(KeysModified::NONE);
        return Frame::Integer(pending as i64);
    }
    failed(ctx, subcommand_syntax_error(a, "XGROUP"))
}

// ----- XACK / XPENDING / XCLAIM / XAUTOCLAIM -----

fn nogroup(key: &[u8], group: &[u8]) -> Frame {
    let mut m = b"NOGROUP No such key '".to_vec();
    m.extend_from_slice(key);
    m.extend_from_slice(b"' or consumer group '");
    m.extend_from_slice(group);
    m.push(b'\'');
    Frame::Error(m.into())
}

/// Whether `key` holds a stream with group `group` (read lookup, counted): Err for another
/// type.
fn has_group(ctx: &mut Ctx, key: &[u8], group: &[u8]) -> Result<bool, Frame> {
    Ok(read_stream(ctx, key)?.is_some_and(|s| s.group(group).is_some()))
}

/// XACK key group id...: a missing key or group answers 0 before the IDs are parsed.
fn xack(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match has_group(ctx, &a[1], &a[2]) {
        Err(e) => return failed(ctx, e),
        Ok(false) => return no_change(ctx, Frame::Integer(0)),
        Ok(true) => {}
    }
    let mut ids = Vec::with_capacity(a.len() - 3);
    for x in &a[3..] {
        match parse_strict_id(x, 0) {
            Ok(id) => ids.push(id),
            Err(e) => return failed(ctx, e),
        }
    }
    let Ok(Some(s)) = stream_mut(ctx, &a[1]) else { return failed(ctx, err(ERR_WRONGTYPE)) };
    let Some(g) = s.group_mut(&a[2]) else { return no_change(ctx, Frame::Integer(0)) };
    let acked = ids.iter().filter(|&&id| g.ack(id)).count();
    ctx.modified_only(KeysModified::NONE);
    if acked == 0 {
        ctx.propagate_nothing();
    }
    Frame::Integer(acked as i64)
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]]
fn xpending(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let summary = a.len() == 3;
    if a.len() != 3 && (a.len() < 6 || a.len() > 9) {
        return err(ERR_SYNTAX);
    }
    let mut start = StreamId::MIN;
    let mut end = StreamId::MAX;
    let mut count: i64 = 0;
    let mut min_idle: i64 = 0;
    let mut consumer: Option<&[u8]> = None;
    if a.len() >= 6 {
        let mut at = 3;
        if is(&a[3], "idle") {
            min_idle = match parse_i64(&a[4]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if a.len() < 8 {
                return err(ERR_SYNTAX);
            }
            at += 2;
        }
        count = match parse_i64(&a[at + 2]) {
            Ok(v) => v.max(0),
            Err(e) => return e,
        };
        (start, end) = match parse_range(&a[at], &a[at + 1]) {
            Ok(r) => r,
            Err(e) => return e,
        };
        if at + 3 < a.len() {
            consumer = Some(&a[at + 3]);
        }
    }
    let now = ctx.now_ms as i64;
    let s = match read_stream(ctx, &a[1]) {
        Err(e) => return e,
        Ok(s) => s,
    };
    let Some(g) = s.and_then(|s| s.group(&a[2])) else { return nogroup(&a[1], &a[2]) };
    if summary {
        if g.pel.is_empty() {
            return Frame::Array(vec![Frame::Integer(0), Frame::Null, Frame::Null, Frame::NullArray]);
        }
        let first = *g.pel.keys().next().expect("not empty");
        let last = *g.pel.keys().next_back().expect("not empty");
        let consumers: Vec<Frame> = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(name, c)| Frame::Array(vec![Frame::Bulk(Bytes::copy_from_slice(name)), Frame::Bulk(Bytes::from(int_bytes(c.pel.len() as i64)))]))
            .collect();
        return Frame::Array(vec![Frame::Integer(g.pel.len() as i64), id_frame(first), id_frame(last), Frame::Array(consumers)]);
    }
    if let Some(name) = consumer {
        if !g.consumers.contains_key(name) {
            return Frame::Array(Vec::new());
        }
    }
    let mut out = Vec::new();
    if start > end {
        return Frame::Array(out);
    }
    for (id, nack) in g.pel.range(start..=end) {
        if count == 0 {
            break;
        }
        if consumer.is_some_and(|c| c != &nack.consumer[..]) {
            continue;
        }
        if min_idle != 0 && now - nack.delivery_time < min_idle {
            continue;
        }
        count -= 1;
        out.push(Frame::Array(vec![id_frame(*id), Frame::Bulk(Bytes::copy_from_slice(&nack.consumer)), Frame::Integer((now - nack.delivery_time).max(0)), Frame::Integer(nack.delivery_count as i64)]));
    }
    Frame::Array(out)
}

/// XCLAIM key group consumer min-idle-time id... [IDLE ms] [TIME unix-ms] [RETRYCOUNT n]
/// [FORCE] [JUSTID] [LASTID id]
fn xclaim(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match has_group(ctx, &a[1], &a[2]) {
        Err(e) => return failed(ctx, e),
        Ok(false) => return failed(ctx, nogroup(&a[1], &a[2])),
        Ok(true) => {}
    }
    let min_idle = match abacus_keyspace::value::parse_canonical_i64(&a[4]) {
        Some(v) => v.max(0),
        None => return failed(ctx, err("ERR Invalid min-idle-time argument for XCLAIM")),
    };
    let mut ids = Vec::new();
    let mut j = 5;
    while j < a.len() {
        match parse_strict_id(&a[j], 0) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms as i64;
    let (mut force, mut justid) = (false, false);
    let mut retrycount: i64 = -1;
    let mut delivery: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < a.len() {
        let more = a.len() - 1 - j;
        let opt = &a[j][..];
        let num = |x: &[u8], what: &str| abacus_keyspace::value::parse_canonical_i64(x).ok_or_else(|| Frame::error(format!("ERR Invalid {what} option argument for XCLAIM")));
        if is(opt, "force") {
            force = true;
        } else if is(opt, "justid") {
            justid = true;
        } else if is(opt, "idle") && more > 0 {
            j += 1;
            delivery = match num(&a[j], "IDLE") {
                Ok(v) => now.wrapping_sub(v),
                Err(e) => return failed(ctx, e),
            };
        } else if is(opt, "time") && more > 0 {
            j += 1;
            delivery = match num(&a[j], "TIME") {
                Ok(v) => v,
                Err(e) => return failed(ctx, e),
            };
        } else if is(opt, "retrycount") && more > 0 {
            j += 1;
            retrycount = match num(&a[j], "RETRYCOUNT") {
                Ok(v) => v,
                Err(e) => return failed(ctx, e),
            };
        } else if is(opt, "lastid") && more > 0 {
            j += 1;
            last_id = match parse_strict_id(&a[j], 0) {
                Ok(id) => id,
                Err(e) => return failed(ctx, e),
            };
        } else {
            return failed(ctx, err_quoting("ERR Unrecognized XCLAIM option '", opt, "'"));
        }
        j += 1;
    }
    let delivery = if delivery != -1 && (0..=now).contains(&delivery) { delivery } else { now };
    let key = &a[1];
    let (gname, cname) = (&a[2][..], &a[3][..]);
    let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err(ERR_WRONGTYPE)) };
    let Some(mut g) = s.take_group(gname) else { return failed(ctx, nogroup(key, gname)) };
    let mut changed = false;
    if last_id > g.last_id {
        g.last_id = last_id;
        changed = true;
    }
    let mut consumer: Option<std::sync::Arc<[u8]>> = None;
    let mut created = false;
    let mut out = Vec::new();
    for id in ids {
        let pending = g.pel.contains_key(&id);
        if !s.contains(id) {
            // Gone from the stream: it leaves the PEL too.
            if pending {
                g.ack(id);
                changed = true;
            }
            continue;
        }
        if !pending && !force {
            continue;
        }
        if pending && min_idle != 0 && now - g.pel[&id].delivery_time < min_idle {
            continue;
        }
        let c = match &consumer {
            Some(c) => c.clone(),
            None => {
                let (c, new) = g.consumer_or_create(cname, now);
                created |= new;
                if let Some(cs) = g.consumers.get_mut(cname) {
                    cs.seen_time = now;
                }
                consumer = Some(c.clone());
                c
            }
        };
        let nack = g.assign(id, &c, now);
        nack.delivery_time = delivery;
        if retrycount >= 0 {
            nack.delivery_count = retrycount as u64;
        } else if !justid && pending {
            nack.delivery_count += 1;
        } else if !justid {
            // A FORCEd entry starts at 1, then counts this delivery (Redis creates it at 1
            // and increments).
            nack.delivery_count = 2;
        } else if !pending {
            nack.delivery_count = 1;
        }
        changed = true;
        if justid {
            out.push(id_frame(id));
        } else if let Some(e) = s.get(id) {
            out.push(entry_frame(&e));
        }
    }
    s.put_group(gname, g);
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.modified_only(KeysModified::NONE);
    if !changed && !created {
        ctx.propagate_nothing();
    }
    Frame::Array(out)
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
fn xautoclaim(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let min_idle = match abacus_keyspace::value::parse_canonical_i64(&a[4]) {
        Some(v) => v.max(0),
        None => return failed(ctx, err("ERR Invalid min-idle-time argument for XAUTOCLAIM")),
    };
    let (mut start, ex) = match parse_interval(&a[5], 0) {
        Ok(r) => r,
        Err(e) => return failed(ctx, e),
    };
    if ex {
        start = match start.incr() {
            Some(s) => s,
            None => return failed(ctx, err("ERR invalid start ID for the interval")),
        };
    }
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    // Redis bounds COUNT so that its buffers' sizes cannot overflow.
    const MAX_COUNT: i64 = i64::MAX / 16;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if is(&a[j], "count") && more > 0 {
            count = match abacus_keyspace::value::parse_canonical_i64(&a[j + 1]) {
                Some(c) if (1..=MAX_COUNT).contains(&c) => c,
                _ => return failed(ctx, err("ERR COUNT must be > 0")),
            };
            j += 1;
        } else if is(&a[j], "justid") {
            justid = true;
        } else {
            return failed(ctx, err(ERR_SYNTAX));
        }
        j += 1;
    }
    match has_group(ctx, &a[1], &a[2]) {
        Err(e) => return failed(ctx, e),
        Ok(false) => return failed(ctx, nogroup(&a[1], &a[2])),
        Ok(true) => {}
    }
    // Redis allocates COUNT IDs up front: a count no allocator can give fails as there.
    if count > (1i64 << 36) {
        return failed(ctx, err("ERR Insufficient memory, failed allocating transient memory, COUNT too high."));
    }
    let now = ctx.now_ms as i64;
    let key = &a[1];
    let (gname, cname) = (&a[2][..], &a[3][..]);
    let Ok(Some(s)) = stream_mut(ctx, key) else { return failed(ctx, err(ERR_WRONGTYPE)) };
    let Some(mut g) = s.take_group(gname) else { return failed(ctx, nogroup(key, gname)) };
    // Redis 7.0 looks the consumer up (creating it) when it claims its first entry.
    let mut consumer: Option<std::sync::Arc<[u8]>> = None;
    let mut created = false;
    let mut attempts = count.saturating_mul(10);
    let mut left = count;
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut changed = false;
    let mut cursor = start;
    let mut next = StreamId::MIN;
    loop {
        let Some((&id, _)) = g.pel.range(cursor..).next() else {
            next = StreamId::MIN;
            break;
        };
        if attempts == 0 || left == 0 {
            next = id;
            break;
        }
        attempts -= 1;
        cursor = match id.incr() {
            Some(c) => c,
            None => {
                // The last possible ID: nothing after it.
                StreamId::MAX
            }
        };
        if !s.contains(id) {
            g.ack(id);
            deleted.push(id_frame(id));
            left -= 1;
            changed = true;
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        if min_idle != 0 && now - g.pel[&id].delivery_time < min_idle {
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        let c = match &consumer {
            Some(c) => c.clone(),
            None => {
                let (c, new) = g.consumer_or_create(cname, now);
                created = new;
                if let Some(cs) = g.consumers.get_mut(cname) {
                    cs.seen_time = now;
                }
                consumer = Some(c.clone());
                c
            }
        };
        let nack = g.assign(id, &c, now);
        nack.delivery_time = now;
        if !justid {
            nack.delivery_count += 1;
        }
        changed = true;
        if justid {
            claimed.push(id_frame(id));
        } else if let Some(e) = s.get(id) {
            claimed.push(entry_frame(&e));
        }
        left -= 1;
        if id == StreamId::MAX {
            break;
        }
    }
    s.put_group(gname, g);
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.modified_only(KeysModified::NONE);
    if !changed {
        ctx.propagate_nothing();
    }
    Frame::Array(vec![id_frame(next), Frame::Array(claimed), Frame::Array(deleted)])
}

// ----- XINFO -----

fn xinfo_help(_ctx: &mut Ctx, _a: &[Arg]) -> Frame {
    help(&[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
        "HELP",
        "    Prints this help.",
    ])
}

fn lag_frame(s: &Stream, g: &Group) -> Frame {
    match s.group_lag(g) {
        Some(lag) => Frame::Integer(lag),
        None => Frame::Null,
    }
}

fn entries_read_frame(g: &Group) -> Frame {
    if g.entries_read == INVALID_ENTRIES_READ {
        Frame::Null
    } else {
        Frame::Integer(g.entries_read)
    }
}

fn xinfo(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let sub = &a[1][..];
    let now = ctx.now_ms as i64;
    let s = match read_stream(ctx, &a[2]) {
        Err(e) => return e,
        Ok(None) => return err(ERR_NO_SUCH_KEY),
        Ok(Some(s)) => s,
    };
    if is(sub, "consumers") && a.len() == 4 {
        let Some(g) = s.group(&a[3]) else { return nogroup_for_key(&a[3], &a[2]) };
        return Frame::Array(
            g.consumers
                .iter()
                .map(|(name, c)| {
                    Frame::Map(vec![
                        (bulk_str("name"), Frame::Bulk(Bytes::copy_from_slice(name))),
                        (bulk_str("pending"), Frame::Integer(c.pel.len() as i64)),
                        (bulk_str("idle"), Frame::Integer((now - c.seen_time).max(0))),
                    ])
                })
                .collect(),
        );
    }
    if is(sub, "groups") && a.len() == 3 {
        return Frame::Array(
            s.groups()
                .map(|(name, g)| {
                    Frame::Map(vec![
                        (bulk_str("name"), Frame::Bulk(Bytes::copy_from_slice(name))),
                        (bulk_str("consumers"), Frame::Integer(g.consumers.len() as i64)),
                        (bulk_str("pending"), Frame::Integer(g.pel.len() as i64)),
                        (bulk_str("last-delivered-id"), id_frame(g.last_id)),
                        (bulk_str("entries-read"), entries_read_frame(g)),
                        (bulk_str("lag"), lag_frame(s, g)),
                    ])
                })
                .collect(),
        );
    }
    if is(sub, "stream") {
        return xinfo_stream(s, a);
    }
    subcommand_syntax_error(a, "XINFO")
}

/// XINFO STREAM key [FULL [COUNT count]]
fn xinfo_stream(s: &Stream, a: &[Arg]) -> Frame {
    let opts = &a[3..];
    let mut full = false;
    let mut count: i64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "full") {
            return subcommand_syntax_error(a, "XINFO");
        }
        full = true;
        if opts.len() == 3 {
            if !is(&opts[1], "count") {
                return subcommand_syntax_error(a, "XINFO");
            }
            count = match parse_i64(&opts[2]) {
                Ok(c) if c < 0 => 10,
                Ok(c) => c,
                Err(e) => return e,
            };
        }
    }
    // Redis counts its radix tree's nodes; one per block plus the root is the shape of a
    // small tree (Abacus keeps a sorted vector of blocks, not a radix tree).
    let nodes = s.nodes() as i64 + 1;
    let mut m = vec![
        (bulk_str("length"), Frame::Integer(s.len() as i64)),
        (bulk_str("radix-tree-keys"), Frame::Integer(s.nodes() as i64)),
        (bulk_str("radix-tree-nodes"), Frame::Integer(nodes)),
        (bulk_str("last-generated-id"), id_frame(s.last_id())),
        (bulk_str("max-deleted-entry-id"), id_frame(s.max_deleted_id())),
        (bulk_str("entries-added"), Frame::Integer(s.entries_added() as i64)),
        (bulk_str("recorded-first-entry-id"), id_frame(s.first_id())),
    ];
    if !full {
        m.push((bulk_str("groups"), Frame::Integer(s.group_count() as i64)));
        let first = s.iter().next().map_or(Frame::Null, |e| entry_frame(&e));
        let last = s.range(StreamId::MIN, StreamId::MAX, true).next().map_or(Frame::Null, |e| entry_frame(&e));
        m.push((bulk_str("first-entry"), first));
        m.push((bulk_str("last-entry"), last));
        return Frame::Map(m);
    }
    let limit = if count == 0 { usize::MAX } else { count as usize };
    m.push((bulk_str("entries"), Frame::Array(s.iter().take(limit).map(|e| entry_frame(&e)).collect())));
    let groups: Vec<Frame> = s
        .groups()
        .map(|(name, g)| {
            let pending: Vec<Frame> = g
                .pel
                .iter()
                .take(limit)
                .map(|(id, n)| Frame::Array(vec![id_frame(*id), Frame::Bulk(Bytes::copy_from_slice(&n.consumer)), Frame::Integer(n.delivery_time), Frame::Integer(n.delivery_count as i64)]))
                .collect();
            let consumers: Vec<Frame> = g
                .consumers
                .iter()
                .map(|(cname, c)| {
                    let cp: Vec<Frame> = c
                        .pel
                        .iter()
                        .take(limit)
                        .map(|id| {
                            let n = &g.pel[id];
                            Frame::Array(vec![id_frame(*id), Frame::Integer(n.delivery_time), Frame::Integer(n.delivery_count as i64)])
                        })
                        .collect();
                    Frame::Map(vec![
                        (bulk_str("name"), Frame::Bulk(Bytes::copy_from_slice(cname))),
                        (bulk_str("seen-time"), Frame::Integer(c.seen_time)),
                        (bulk_str("pel-count"), Frame::Integer(c.pel.len() as i64)),
                        (bulk_str("pending"), Frame::Array(cp)),
                    ])
                })
                .collect();
            Frame::Map(vec![
                (bulk_str("name"), Frame::Bulk(Bytes::copy_from_slice(name))),
                (bulk_str("last-delivered-id"), id_frame(g.last_id)),
                (bulk_str("entries-read"), entries_read_frame(g)),
                (bulk_str("lag"), lag_frame(s, g)),
                (bulk_str("pel-count"), Frame::Integer(g.pel.len() as i64)),
                (bulk_str("pending"), Frame::Array(pending)),
                (bulk_str("consumers"), Frame::Array(consumers)),
            ])
        })
        .collect();
    m.push((bulk_str("groups"), Frame::Array(groups)));
    Frame::Map(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis() {
        let p = |s: &str| parse_id_full(s.as_bytes(), 0, true, true).ok();
        assert_eq!(p("5-*"), Some((StreamId::new(5, 0), false)));
        assert_eq!(p("05-1"), Some((StreamId::new(5, 1), true)));
        assert_eq!(p("+5-2"), Some((StreamId::new(5, 2), true)));
        assert_eq!(p(" 1"), Some((StreamId::new(1, 0), true)));
        assert_eq!(p("5-+2"), Some((StreamId::new(5, 2), true)));
        assert_eq!(p("- 1"), None);
        // Split at the first dash, as strchr: " " is no number.
        assert_eq!(p(" -1"), None);
        assert_eq!(p("1- 2"), Some((StreamId::new(1, 2), true)));
        for bad in ["-5", "5-", "-5-1", "5--", "-", "+", "", "1-2-3", "18446744073709551616", "x", "1-x"] {
            assert_eq!(p(bad), None, "{bad}");
        }
        assert_eq!(parse_id(b"-", 0).unwrap(), StreamId::MIN);
        assert_eq!(parse_id(b"+", 0).unwrap(), StreamId::MAX);
        assert_eq!(parse_interval(b"(5", 0).unwrap(), (StreamId::new(5, 0), true));
        assert!(parse_interval(b"(-", 0).is_err());
        assert_eq!(parse_interval(b"(", 0).unwrap_err(), err(ERR_INVALID_ID));
    }

    #[test]
    fn xread_keys_are_found_after_streams() {
        let args = |s: &str| abacus_protocol::Args::from_vec(s.split(' ').map(|x| Bytes::copy_from_slice(x.as_bytes())).collect());
        assert_eq!(streams_keys(&args("xread count 2 block 0 streams a b 0 0")), Some((6, 8)));
        assert_eq!(streams_keys(&args("xreadgroup group streams c streams a >")), Some((5, 6)));
        assert_eq!(streams_keys(&args("xread streams a")), None);
        assert_eq!(streams_keys(&args("xread foo streams a 0")), None);
        assert!(block_option(&args("xread count 2 streams a 0")).is_none());
        assert_eq!(block_option(&args("xread count 2 block 10 streams a 0")).unwrap().unwrap(), 10);
        assert!(block_option(&args("xread block x streams a 0")).unwrap().is_err());
    }
}
