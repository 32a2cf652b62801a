//! The list family: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET,
//! LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP. (The blocking forms, BLPOP, BRPOP,
//! BLMOVE, BRPOPLPUSH and BLMPOP, live with the blocking mechanism and call the functions
//! below.)
//!
//! A list is an `abacus_collections::List`: a quicklist-like deque of nodes of packed
//! entries (small integers in 1-3 bytes), nodes sized by `list-max-listpack-size`. This file
//! only parses arguments, looks keys up and shapes replies, with Redis 7.0's semantics,
//! argument-checking order and error texts (`t_list.c`); a key never holds an empty list
//! (the last pop, LREM or LTRIM deletes it).
//!
//! For the blocking commands (they run these on a shard's `Ctx` when a client is served,
//! at once or on wake-up):
//! - [`pop_from_first`]`(ctx, keys, end, count)`: pops from the first key of `keys` that
//!   holds a non-empty list, as BLPOP/BRPOP (`count` None: reply `[key, element]`) or
//!   BLMPOP (`count` Some(n): reply `[key, [elements...]]`, at most n). Returns None when
//!   every key is missing (nothing changed, nothing propagated), Some(WRONGTYPE error) when
//!   a key before the first list holds another type, as Redis checks them in order. On a pop
//!   it states the effect as Redis propagates it (`LPOP key` / `RPOP key`, or with the count
//!   actually taken) and that only that key was modified (its position in `keys`).
//! - [`lmove_once`]`(ctx, src, dst, from, to)`: one LMOVE step. Ok(Some(element reply)) on
//!   a move, Ok(None) when the source is missing (nothing changed), Err(WRONGTYPE) when
//!   either key holds another type. It leaves the effect alone (LMOVE as sent is
//!   deterministic; BLMOVE/BRPOPLPUSH propagate as LMOVE/RPOPLPUSH, which the caller states).
//!
//! Effects: every list write is deterministic, so the command is logged as sent, except
//! where nothing changed (`ctx.unchanged` and no propagation) and LMPOP, logged as the
//! LPOP/RPOP with the count actually taken, as Redis does.

use abacus_collections::{List, ListItem, Needle};
use abacus_keyspace::Value;
use abacus_protocol::{Arg, Bytes, BulksBuilder, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Call, Ctx, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
const K2: (i32, i32, i32) = (1, 2, 1);
const G: &str = "list";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("lpush", -3, WRITE | DENYOOM | FAST, K1, lpush, G, "Prepends one or more elements to a list. Creates the key if it doesn't exist.")
        .docs("1.0.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .history(&[("2.4.0", "Accepts multiple `element` arguments.")])
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            element type=string flags=multiple
        "),
    RPUSH,
    Spec::keyed("lpushx", -3, WRITE | DENYOOM | FAST, K1, lpushx, G, "Prepends one or more elements to a list only when the list exists.")
        .docs("2.2.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .history(&[("4.0.0", "Accepts multiple `element` arguments.")])
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            element type=string flags=multiple
        "),
    Spec::keyed("rpushx", -3, WRITE | DENYOOM | FAST, K1, rpushx, G, "Appends an element to a list only when the list exists.")
        .docs("2.2.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .history(&[("4.0.0", "Accepts multiple `element` arguments.")])
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            element type=string flags=multiple
        "),
    LPOP,
    RPOP,
    Spec::keyed("llen", 2, READONLY | FAST, K1, llen, G, "Returns the length of a list.")
        .docs("1.0.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("lrange", 4, READONLY, K1, lrange, G, "Returns a range of elements from a list.")
        .docs("1.0.0", "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.")
        .args("
            key type=key key_spec_index=0
            start type=integer
            stop type=integer
        "),
    Spec::keyed("lindex", 3, READONLY, K1, lindex, G, "Returns an element from a list by its index.")
        .docs("1.0.0", "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).")
        .args("
            key type=key key_spec_index=0
            index type=integer
        "),
    Spec::keyed("lset", 4, WRITE | DENYOOM, K1, lset, G, "Sets the value of an element in a list by its index.")
        .docs("1.0.0", "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).")
        .args("
            key type=key key_spec_index=0
            index type=integer
            element type=string
        "),
    Spec::keyed("linsert", 5, WRITE | DENYOOM, K1, linsert, G, "Inserts an element before or after another element in a list.")
        .docs("2.2.0", "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).")
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            where type=oneof
              before type=pure-token token=BEFORE
              after type=pure-token token=AFTER
            pivot type=string
            element type=string
        "),
    Spec::keyed("lrem", 4, WRITE, K1, lrem, G, "Removes elements from a list. Deletes the list if the last element was removed.")
        .docs("1.0.0", "O(N+M) where N is the length of the list and M is the number of elements removed.")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            count type=integer
            element type=string
        "),
    Spec::keyed("ltrim", 4, WRITE, K1, ltrim, G, "Removes elements from both ends a list. Deletes the list if all elements were trimmed.")
        .docs("1.0.0", "O(N) where N is the number of elements to be removed by the operation.")
        .key_specs("RW delete")
        .args("
            key type=key key_spec_index=0
            start type=integer
            stop type=integer
        "),
    Spec::keyed("lpos", -3, READONLY, K1, lpos, G, "Returns the index of matching elements in a list.")
        .docs("6.0.6", "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.")
        .args("
            key type=key key_spec_index=0
            element type=string
            rank type=integer token=RANK flags=optional
            num-matches type=integer token=COUNT flags=optional
            len type=integer token=MAXLEN flags=optional
        "),
    LMOVE,
    Spec::keyed("rpoplpush", 3, WRITE | DENYOOM, K2, rpoplpush, G, "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.")
        .docs("1.2.0", "O(1)")
        .deprecated("6.2.0", "`LMOVE` with the `RIGHT` and `LEFT` arguments")
        .key_specs("RW access delete; RW insert")
        .args("
            source type=key key_spec_index=0
            destination type=key key_spec_index=1
        "),
    Spec::keyed("lmpop", -4, WRITE, (0, 0, 0), lmpop, G, "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.").with_numkeys(1)
        .docs("7.0.0", "O(N+M) where N is the number of provided keys and M is the number of elements returned.")
        .key_specs("RW access delete")
        .args("
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            where type=oneof
              left type=pure-token token=LEFT
              right type=pure-token token=RIGHT
            count type=integer token=COUNT flags=optional
        "),
];

/// Named: effect records call it (`ctx::Call::of`).
pub const RPUSH: Spec = Spec::keyed("rpush", -3, WRITE | DENYOOM | FAST, K1, rpush, G, "Appends one or more elements to a list. Creates the key if it doesn't exist.")
    .docs("1.0.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
    .history(&[("2.4.0", "Accepts multiple `element` arguments.")])
    .key_specs("RW insert")
    .args("
        key type=key key_spec_index=0
        element type=string flags=multiple
    ");

/// Named: effect records call it (`ctx::Call::of`).
pub const RPOP: Spec = Spec::keyed("rpop", -2, WRITE | FAST, K1, rpop, G, "Returns and removes the last elements of a list. Deletes the list if the last element was popped.")
    .docs("1.0.0", "O(N) where N is the number of elements returned")
    .history(&[("6.2.0", "Added the `count` argument.")])
    .key_specs("RW access delete")
    .args("
        key type=key key_spec_index=0
        count type=integer since=6.2.0 flags=optional
    ");

/// Named: effect records call it (`ctx::Call::of`).
pub const LPOP: Spec = Spec::keyed("lpop", -2, WRITE | FAST, K1, lpop, G, "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.")
    .docs("1.0.0", "O(N) where N is the number of elements returned")
    .history(&[("6.2.0", "Added the `count` argument.")])
    .key_specs("RW access delete")
    .args("
        key type=key key_spec_index=0
        count type=integer since=6.2.0 flags=optional
    ");

/// Named: effect records call it (`ctx::Call::of`).
pub const LMOVE: Spec = Spec::keyed("lmove", 5, WRITE | DENYOOM, K2, lmove, G, "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.")
    .docs("6.2.0", "O(1)")
    .key_specs("RW access delete; RW insert")
    .args("
        source type=key key_spec_index=0
        destination type=key key_spec_index=1
        wherefrom type=oneof
          left type=pure-token token=LEFT
          right type=pure-token token=RIGHT
        whereto type=oneof
          left type=pure-token token=LEFT
          right type=pure-token token=RIGHT
    ");

/// Which end of a list (LEFT is the head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

impl End {
    /// LEFT or RIGHT, case-insensitive (Redis's `getListPositionFromObjectOrReply`).
    pub fn parse(a: &[u8]) -> Result<End, Frame> {
        if is(a, "left") {
            Ok(End::Left)
        } else if is(a, "right") {
            Ok(End::Right)
        } else {
            Err(err(ERR_SYNTAX))
        }
    }

    fn pop_command(self) -> &'static Spec {
        if self == End::Left { &LPOP } else { &RPOP }
    }

    /// The keyspace event of a pop from this end (also LMOVE's source, LMPOP, BLPOP...).
    fn pop_event(self) -> &'static str {
        if self == End::Left { "lpop" } else { "rpop" }
    }

    /// The keyspace event of a push to this end (LPUSHX fires "lpush", as in Redis).
    fn push_event(self) -> &'static str {
        if self == End::Left { "lpush" } else { "rpush" }
    }
}

/// The list at `key` for reading, counted in keyspace hits/misses. Ok(None) if missing.
fn read_list<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a List>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get(key, now) {
        None => Ok(None),
        Some(e) => e.as_list().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// The list at `key` for modification (not counted). Ok(None) if missing.
fn list_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut List>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        None => Ok(None),
        Some(e) => e.as_list_mut().map(Some).ok_or_else(|| err(ERR_WRONGTYPE)),
    }
}

/// Whether `key` holds a value that is not a list (a blocked move's source being served).
pub fn holds_other_type(ctx: &mut Ctx, key: &[u8]) -> bool {
    list_mut(ctx, key).is_err()
}

/// Stores a new list (callers never store an empty one).
fn store_new(ctx: &mut Ctx, key: &[u8], list: List) {
    debug_assert!(!list.is_empty(), "a key never holds an empty list");
    let now = ctx.now_ms;
    ctx.db().set(key, Value::List(Box::new(list)), 0, now);
}

/// Deletes `key` after its list became empty, with Redis's "del" event.
fn delete(ctx: &mut Ctx, key: &[u8]) {
    let now = ctx.now_ms;
    ctx.db().remove(key, now);
    ctx.notify(notify::GENERIC, "del", key);
}

/// Nothing changed: no key signalled, nothing propagated.
fn no_change(ctx: &mut Ctx, reply: Frame) -> Frame {
    ctx.propagate_nothing();
    ctx.unchanged(reply)
}

fn item_frame(item: ListItem<'_>) -> Frame {
    Frame::Bulk(Bytes::from(item.to_vec()))
}

fn push(list: &mut List, end: End, v: &[u8], limits: &abacus_collections::ListLimits) {
    match end {
        End::Left => list.push_front(v, limits),
        End::Right => list.push_back(v, limits),
    }
}

fn pop(list: &mut List, end: End) -> Option<Vec<u8>> {
    match end {
        End::Left => list.pop_front(),
        End::Right => list.pop_back(),
    }
}

/// LPUSH / RPUSH / LPUSHX / RPUSHX: the new length.
fn push_command(ctx: &mut Ctx, a: &[Arg], end: End, only_existing: bool) -> Frame {
    let limits = ctx.list_limits;
    match list_mut(ctx, &a[1]) {
        Err(e) => e,
        Ok(Some(list)) => {
            for v in &a[2..] {
                push(list, end, v, &limits);
            }
            let len = list.len();
            ctx.notify(notify::LIST, end.push_event(), &a[1]);
            Frame::Integer(len as i64)
        }
        Ok(None) if only_existing => no_change(ctx, Frame::Integer(0)),
        Ok(None) => {
            let mut list = List::new();
            for v in &a[2..] {
                push(&mut list, end, v, &limits);
            }
            let len = list.len();
            store_new(ctx, &a[1], list);
            ctx.notify(notify::LIST, end.push_event(), &a[1]);
            Frame::Integer(len as i64)
        }
    }
}

fn lpush(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    push_command(ctx, a, End::Left, false)
}

fn rpush(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    push_command(ctx, a, End::Right, false)
}

fn lpushx(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    push_command(ctx, a, End::Left, true)
}

fn rpushx(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    push_command(ctx, a, End::Right, true)
}

/// Pops up to `count` elements from the list at `key` (which exists), deleting the key if
/// it empties.
fn pop_many(ctx: &mut Ctx, key: &[u8], end: End, count: usize) -> Vec<Frame> {
    let (popped, now_empty) = match list_mut(ctx, key) {
        Ok(Some(list)) => {
            let n = count.min(list.len());
            let popped: Vec<Frame> = (0..n).filter_map(|_| pop(list, end)).map(|v| Frame::Bulk(v.into())).collect();
            (popped, list.is_empty())
        }
        _ => (Vec::new(), false),
    };
    if !popped.is_empty() {
        ctx.notify(notify::LIST, end.pop_event(), key);
    }
    if now_empty {
        delete(ctx, key);
    }
    popped
}

/// LPOP / RPOP key [count].
fn pop_command(ctx: &mut Ctx, a: &[Arg], end: End) -> Frame {
    if a.len() > 3 {
        return err(&format!("ERR wrong number of arguments for '{}' command", if end == End::Left { "lpop" } else { "rpop" }));
    }
    let count = match a.get(2).map(|c| parse_i64(c)) {
        Some(Ok(n)) if n >= 0 => Some(n as u64),
        Some(_) => return err("ERR value is out of range, must be positive"),
        None => None,
    };
    match list_mut(ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return no_change(ctx, if count.is_some() { Frame::NullArray } else { Frame::Null }),
        Ok(Some(_)) => {}
    }
    match count {
        Some(0) => no_change(ctx, Frame::Array(Vec::new())),
        Some(n) => Frame::Array(pop_many(ctx, &a[1], end, usize::try_from(n).unwrap_or(usize::MAX))),
        None => pop_many(ctx, &a[1], end, 1).pop().unwrap_or(Frame::Null),
    }
}

fn lpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    pop_command(ctx, a, End::Left)
}

fn rpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    pop_command(ctx, a, End::Right)
}

fn llen(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_list(ctx, &a[1]) {
        Ok(list) => Frame::Integer(list.map_or(0, List::len) as i64),
        Err(e) => e,
    }
}

/// Resolves LRANGE/LTRIM's inclusive `start..=end` (negative from the tail) against `len`:
/// the half-open range of existing elements, empty when they miss the list.
fn resolve_range(start: i64, end: i64, len: usize) -> std::ops::Range<usize> {
    let len_i = len as i64;
    let start = if start < 0 { (start + len_i).max(0) } else { start };
    let end = if end < 0 { end + len_i } else { end };
    if start > end || start >= len_i {
        return 0..0;
    }
    let end = end.min(len_i - 1);
    start as usize..end as usize + 1
}

fn lrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (start, end) = match (parse_i64(&a[2]), parse_i64(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match read_list(ctx, &a[1]) {
        Ok(Some(list)) => {
            let range = resolve_range(start, end, list.len());
            // Encoded here, element by element, into one buffer (see Frame::Bulks).
            let mut out = BulksBuilder::with_capacity(range.len(), range.len().saturating_mul(8));
            for item in list.iter_from(range.start).take(range.len()) {
                match item {
                    ListItem::Int(n) => out.push_int(n),
                    ListItem::Bytes(b) => out.push(b),
                }
            }
            out.finish()
        }
        Ok(None) => Frame::Array(Vec::new()),
        Err(e) => e,
    }
}

/// A list index (negative from the tail) resolved against `len`, if it names an element.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { index.checked_add(len as i64)? } else { index };
    usize::try_from(i).ok().filter(|&i| i < len)
}

fn lindex(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    // As Redis: the key is looked up (and typed) before the index is parsed.
    let list = match read_list(ctx, &a[1]) {
        Ok(Some(list)) => list,
        Ok(None) => return Frame::Null,
        Err(e) => return e,
    };
    let index = match parse_i64(&a[2]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    resolve_index(index, list.len()).and_then(|i| list.get(i)).map_or(Frame::Null, item_frame)
}

fn lset(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let limits = ctx.list_limits;
    let list = match list_mut(ctx, &a[1]) {
        Ok(Some(list)) => list,
        Ok(None) => return err(ERR_NO_SUCH_KEY),
        Err(e) => return e,
    };
    let index = match parse_i64(&a[2]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    match resolve_index(index, list.len()) {
        Some(i) if list.set(i, &a[3], &limits) => Frame::ok(),
        _ => err("ERR index out of range"),
    }
}

fn linsert(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let after = if is(&a[2], "after") {
        true
    } else if is(&a[2], "before") {
        false
    } else {
        return err(ERR_SYNTAX);
    };
    let limits = ctx.list_limits;
    let list = match list_mut(ctx, &a[1]) {
        Ok(Some(list)) => list,
        Ok(None) => return no_change(ctx, Frame::Integer(0)),
        Err(e) => return e,
    };
    let Some(at) = list.position(&a[3]) else {
        return no_change(ctx, Frame::Integer(-1));
    };
    list.insert(at + usize::from(after), &a[4], &limits);
    Frame::Integer(list.len() as i64)
}

fn lrem(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let count = match parse_i64(&a[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let (removed, now_empty) = match list_mut(ctx, &a[1]) {
        Ok(Some(list)) => (list.remove(&a[3], count), list.is_empty()),
        Ok(None) => return no_change(ctx, Frame::Integer(0)),
        Err(e) => return e,
    };
    if removed == 0 {
        return no_change(ctx, Frame::Integer(0));
    }
    ctx.notify(notify::LIST, "lrem", &a[1]);
    if now_empty {
        delete(ctx, &a[1]);
    }
    Frame::Integer(removed as i64)
}

fn ltrim(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (start, end) = match (parse_i64(&a[2]), parse_i64(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let (trimmed, now_empty) = match list_mut(ctx, &a[1]) {
        Ok(Some(list)) => {
            let len = list.len();
            let range = resolve_range(start, end, len);
            list.retain_range(range.start, range.end);
            (len - list.len(), list.is_empty())
        }
        Ok(None) => return no_change(ctx, Frame::ok()),
        Err(e) => return e,
    };
    ctx.notify(notify::LIST, "ltrim", &a[1]);
    if now_empty {
        delete(ctx, &a[1]);
    }
    if trimmed == 0 {
        // As Redis: the key is still signalled (WATCH), but nothing is propagated.
        ctx.propagate_nothing();
    }
    Frame::ok()
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
fn lpos(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (mut rank, mut count, mut maxlen): (i64, Option<i64>, i64) = (1, None, 0);
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "rank") && more {
            rank = match parse_i64(&a[j + 1]) {
                Ok(0) => return err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"),
                Ok(r) => r,
                Err(e) => return e,
            };
        } else if is(&a[j], "count") && more {
            count = match parse_i64(&a[j + 1]) {
                Ok(c) if c >= 0 => Some(c),
                _ => return err("ERR COUNT can't be negative"),
            };
        } else if is(&a[j], "maxlen") && more {
            maxlen = match parse_i64(&a[j + 1]) {
                Ok(m) if m >= 0 => m,
                _ => return err("ERR MAXLEN can't be negative"),
            };
        } else {
            return err(ERR_SYNTAX);
        }
        j += 2;
    }
    let list = match read_list(ctx, &a[1]) {
        Ok(Some(list)) => list,
        Ok(None) => return if count.is_some() { Frame::Array(Vec::new()) } else { Frame::Null },
        Err(e) => return e,
    };
    // As Redis (wrapping arithmetic included, so RANK i64::MIN behaves as there): a negative
    // rank scans from the tail.
    let from_tail = rank < 0;
    if from_tail {
        rank = rank.wrapping_neg();
    }
    let len = list.len();
    let needle = Needle::new(&a[2]);
    let items: Box<dyn Iterator<Item = ListItem<'_>>> = if from_tail { Box::new(list.iter_rev()) } else { Box::new(list.iter()) };
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    for (scanned, item) in items.enumerate() {
        if maxlen != 0 && scanned as i64 >= maxlen {
            break;
        }
        if !item.matches(&needle) {
            continue;
        }
        matches += 1;
        if matches >= rank {
            found.push(if from_tail { (len - 1 - scanned) as i64 } else { scanned as i64 });
            match count {
                None => break,
                Some(c) if c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c => break,
                Some(_) => {}
            }
        }
    }
    match count {
        Some(_) => Frame::Array(found.into_iter().map(Frame::Integer).collect()),
        None => found.first().map_or(Frame::Null, |&i| Frame::Integer(i)),
    }
}

/// One LMOVE from `src` to `dst` (see the module documentation).
pub fn lmove_once(ctx: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) -> Result<Option<Frame>, Frame> {
    let limits = ctx.list_limits;
    // As Redis: a missing source answers nil before the destination's type is checked.
    if list_mut(ctx, src)?.is_none() {
        return Ok(None);
    }
    list_mut(ctx, dst)?;
    let (value, src_empty) = match list_mut(ctx, src)? {
        Some(list) => match pop(list, from) {
            Some(v) => {
                if src == dst {
                    // A rotation: the list never empties in between.
                    push(list, to, &v, &limits);
                }
                (v, list.is_empty())
            }
            None => return Ok(None),
        },
        None => return Ok(None),
    };
    if src != dst {
        if src_empty {
            // Removed before the push, so that a new destination's memory is counted
            // after the source's is released; the events below keep Redis's order.
            let now = ctx.now_ms;
            ctx.db().remove(src, now);
        }
        match list_mut(ctx, dst)? {
            Some(list) => push(list, to, &value, &limits),
            None => {
                let mut list = List::new();
                push(&mut list, to, &value, &limits);
                store_new(ctx, dst, list);
            }
        }
    }
    // Redis's order (lmoveGenericCommand): the push, the pop, then the source's "del".
    ctx.notify(notify::LIST, to.push_event(), dst);
    ctx.notify(notify::LIST, from.pop_event(), src);
    if src_empty {
        ctx.notify(notify::GENERIC, "del", src);
    }
    Ok(Some(Frame::Bulk(Bytes::from(value))))
}

fn lmove(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (from, to) = match (End::parse(&a[3]), End::parse(&a[4])) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    move_command(ctx, a, from, to)
}

fn rpoplpush(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    move_command(ctx, a, End::Right, End::Left)
}

fn move_command(ctx: &mut Ctx, a: &[Arg], from: End, to: End) -> Frame {
    match lmove_once(ctx, &a[1], &a[2], from, to) {
        Ok(Some(reply)) => reply,
        Ok(None) => no_change(ctx, Frame::Null),
        Err(e) => e,
    }
}

/// Pops from the first non-empty list among `keys` (see the module documentation).
pub fn pop_from_first(ctx: &mut Ctx, keys: &[Arg], end: End, count: Option<usize>) -> Option<Frame> {
    let serving = ctx.serving();
    for (position, key) in keys.iter().enumerate() {
        if !ctx.may_serve_from(key) {
            continue;
        }
        match list_mut(ctx, key) {
            Err(_) if serving => continue,
            Err(e) => return Some(e),
            Ok(None) => continue,
            Ok(Some(list)) if list.is_empty() => continue,
            Ok(Some(_)) => {}
        }
        let key_frame = Frame::Bulk(Bytes::copy_from_slice(key));
        let popped = pop_many(ctx, key, end, count.unwrap_or(1));
        ctx.modified_only(KeysModified::key(position));
        let mut effect = Call::of(end.pop_command()).arg(Bytes::copy_from_slice(key));
        if count.is_some() {
            effect.push(Bytes::from(popped.len().to_string()));
        }
        ctx.propagate_as(effect);
        return Some(match count {
            Some(_) => Frame::Array(vec![key_frame, Frame::Array(popped)]),
            None => Frame::Array(vec![key_frame, popped.into_iter().next().unwrap_or(Frame::Null)]),
        });
    }
    None
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
pub fn lmpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let numkeys = match parse_i64(&a[1]) {
        Ok(n) if n > 0 => n as u64,
        _ => return err("ERR numkeys should be greater than 0"),
    };
    let where_at = match usize::try_from(numkeys).ok().and_then(|n| n.checked_add(2)) {
        Some(w) if w < a.len() => w,
        _ => return err(ERR_SYNTAX),
    };
    let end = match End::parse(&a[where_at]) {
        Ok(e) => e,
        Err(e) => return e,
    };
    let mut count: Option<usize> = None;
    let mut j = where_at + 1;
    while j < a.len() {
        if count.is_none() && is(&a[j], "count") && j + 1 < a.len() {
            count = match parse_i64(&a[j + 1]) {
                Ok(c) if c > 0 => Some(usize::try_from(c).unwrap_or(usize::MAX)),
                _ => return err("ERR count should be greater than 0"),
            };
            j += 2;
        } else {
            return err(ERR_SYNTAX);
        }
    }
    match pop_from_first(ctx, &a[2..where_at], end, Some(count.unwrap_or(1))) {
        Some(reply) => reply,
        None => no_change(ctx, Frame::NullArray),
    }
}

#[cfg(test)]
mod tests {
    use abacus_keyspace::Db;
    use abacus_protocol::Frame;

    use crate::testing::run_keyed;

    fn run(dbs: &mut [Db], line: &str) -> Frame {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        run_keyed(dbs, &args)
    }

    #[test]
    fn a_key_never_holds_an_empty_list() {
        let mut dbs = vec![Db::new()];
        for line in ["rpush l a b", "lpop l 5", "rpush l a", "rpop l", "rpush l x y", "lrem l 0 x", "lrem l 0 y", "rpush l 1", "ltrim l 5 10", "rpush m 1", "lmove m n left left", "lmpop 1 n right count 9", "rpush a 1", "rpoplpush a a", "rpop a"] {
            assert!(!run(&mut dbs, line).is_error(), "{line}");
        }
        assert!(dbs[0].is_empty(), "{} keys left", dbs[0].len());
    }

    #[test]
    fn resolve_range_clamps_as_redis() {
        use super::resolve_range;
        assert_eq!(resolve_range(0, -1, 5), 0..5);
        assert_eq!(resolve_range(-100, 100, 5), 0..5);
        assert_eq!(resolve_range(3, 1, 5), 0..0);
        assert_eq!(resolve_range(5, 9, 5), 0..0);
        assert_eq!(resolve_range(-2, -1, 5), 3..5);
        assert_eq!(resolve_range(0, i64::MIN, 5), 0..0);
        assert_eq!(resolve_range(i64::MIN, i64::MAX, 5), 0..5);
    }
}

#[cfg(test)]
mod memory_tests {
    use abacus_keyspace::Db;

    use crate::testing::run_keyed;

    #[test]
    fn a_million_small_integers_take_about_three_bytes_each() {
        let mut dbs = vec![Db::new()];
        for chunk in 0..1000 {
            let values: Vec<Vec<u8>> = (chunk * 1000..chunk * 1000 + 1000).map(|i: i64| i.to_string().into_bytes()).collect();
            let mut args: Vec<&[u8]> = vec![b"rpush", b"l"];
            args.extend(values.iter().map(Vec::as_slice));
            run_keyed(&mut dbs, &args);
        }
        let bytes = dbs[0].peek(b"l", 1).map_or(0, |e| e.heap_bytes());
        assert!(bytes < 3_300_000, "{bytes} heap bytes");
    }
}
