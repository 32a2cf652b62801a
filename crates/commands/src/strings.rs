//! The string family: GET, SET and friends, counters, ranges and LCS.
//!
//! All handlers here are keyed: they run on the shard that owns their key(s) with exclusive
//! access to it, so read-modify-write commands (INCR, APPEND, GETSET...) are atomic without
//! locks. Replies and error texts follow Redis 7 (`t_string.c`).

use abacus_keyspace::{Entry, StrMut, Value, ValueRef};
use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use super::ldouble;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Call, Ctx};

const K1: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const PAIRS: (i32, i32, i32) = (1, -1, 2);
const G: &str = "string";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("get", 2, READONLY | FAST, K1, get, G, "Returns the string value of a key.")
        .docs("1.0.0", "O(1)")
        .args("
            key type=key key_spec_index=0
        "),
    SET,
    Spec::keyed("setnx", 3, WRITE | DENYOOM | FAST, K1, setnx, G, "Set the string value of a key only when the key doesn't exist.")
        .docs("1.0.0", "O(1)")
        .key_specs("OW insert")
        .args("
            key type=key key_spec_index=0
            value type=string
        "),
    Spec::keyed("setex", 4, WRITE | DENYOOM, K1, setex, G, "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.")
        .docs("2.0.0", "O(1)")
        .key_specs("OW update")
        .args("
            key type=key key_spec_index=0
            seconds type=integer
            value type=string
        "),
    Spec::keyed("psetex", 4, WRITE | DENYOOM, K1, psetex, G, "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.")
        .docs("2.6.0", "O(1)")
        .key_specs("OW update")
        .args("
            key type=key key_spec_index=0
            milliseconds type=integer
            value type=string
        "),
    Spec::keyed("getset", 3, WRITE | DENYOOM | FAST, K1, getset, G, "Returns the previous string value of a key after setting it to a new value.")
        .docs("1.0.0", "O(1)")
        .deprecated("6.2.0", "`SET` with the `!GET` argument")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            value type=string
        "),
    Spec::keyed("getdel", 2, WRITE | FAST, K1, getdel, G, "Returns the string value of a key after deleting the key.")
        .docs("6.2.0", "O(1)")
        .key_specs("RW access delete")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("getex", -2, WRITE | FAST, K1, getex, G, "Returns the string value of a key after setting its expiration time.")
        .docs("6.2.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            expiration type=oneof flags=optional
              seconds type=integer token=EX
              milliseconds type=integer token=PX
              unix-time-seconds type=unix-time token=EXAT
              unix-time-milliseconds type=unix-time token=PXAT
              persist type=pure-token token=PERSIST
        "),
    Spec::keyed("mget", -2, READONLY | FAST, ALL, mget, G, "Atomically returns the string values of one or more keys.")
        .docs("1.0.0", "O(N) where N is the number of keys to retrieve.")
        .tips("request_policy:multi_shard")
        .args("
            key type=key key_spec_index=0 flags=multiple
        "),
    Spec::keyed("mset", -3, WRITE | DENYOOM, PAIRS, mset, G, "Atomically creates or modifies the string values of one or more keys.")
        .docs("1.0.1", "O(N) where N is the number of keys to set.")
        .tips("request_policy:multi_shard response_policy:all_succeeded")
        .key_specs("OW update")
        .args("
            key_value type=block flags=multiple
              key type=key key_spec_index=0
              value type=string
        "),
    Spec::keyed("msetnx", -3, WRITE | DENYOOM, PAIRS, msetnx, G, "Atomically modifies the string values of one or more keys only when all keys don't exist.")
        .docs("1.0.1", "O(N) where N is the number of keys to set.")
        .tips("request_policy:multi_shard response_policy:agg_min")
        .key_specs("OW insert")
        .args("
            key_value type=block flags=multiple
              key type=key key_spec_index=0
              value type=string
        "),
    Spec::keyed("append", 3, WRITE | DENYOOM | FAST | PREFETCH_VALUE, K1, append, G, "Appends a string to the value of a key. Creates the key if it doesn't exist.")
        .docs("2.0.0", "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.")
        .key_specs("RW insert")
        .args("
            key type=key key_spec_index=0
            value type=string
        "),
    Spec::keyed("strlen", 2, READONLY | FAST, K1, strlen, G, "Returns the length of a string value.")
        .docs("2.2.0", "O(1)")
        .key_specs("RO")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("getrange", 4, READONLY, K1, getrange, G, "Returns a substring of the string stored at a key.")
        .docs("2.4.0", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.")
        .args("
            key type=key key_spec_index=0
            start type=integer
            end type=integer
        "),
    Spec::keyed("substr", 4, READONLY, K1, getrange, G, "Returns a substring from a string value.")
        .docs("1.0.0", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.")
        .deprecated("2.0.0", "`GETRANGE`")
        .args("
            key type=key key_spec_index=0
            start type=integer
            end type=integer
        "),
    Spec::keyed("setrange", 4, WRITE | DENYOOM, K1, setrange, G, "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.")
        .docs("2.2.0", "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.")
        .args("
            key type=key key_spec_index=0
            offset type=integer
            value type=string
        "),
    Spec::keyed("incr", 2, WRITE | DENYOOM | FAST, K1, incr, G, "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.")
        .docs("1.0.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("decr", 2, WRITE | DENYOOM | FAST, K1, decr, G, "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.")
        .docs("1.0.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("incrby", 3, WRITE | DENYOOM | FAST, K1, incrby, G, "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.")
        .docs("1.0.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            increment type=integer
        "),
    Spec::keyed("decrby", 3, WRITE | DENYOOM | FAST, K1, decrby, G, "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.")
        .docs("1.0.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            decrement type=integer
        "),
    Spec::keyed("incrbyfloat", 3, WRITE | DENYOOM | FAST, K1, incrbyfloat, G, "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.")
        .docs("2.6.0", "O(1)")
        .key_specs("RW access update")
        .args("
            key type=key key_spec_index=0
            increment type=double
        "),
    Spec::keyed("lcs", -3, READONLY, (1, 2, 1), lcs, G, "Finds the longest common substring.")
        .docs("7.0.0", "O(N*M) where N and M are the lengths of s1 and s2, respectively")
        .args("
            key1 type=key key_spec_index=0
            key2 type=key key_spec_index=0
            len type=pure-token token=LEN flags=optional
            idx type=pure-token token=IDX flags=optional
            len type=integer token=MINMATCHLEN flags=optional
            withmatchlen type=pure-token token=WITHMATCHLEN flags=optional
        "),
];

/// Named: effect records call it (`ctx::Call::of`).
pub const SET: Spec = Spec::keyed("set", -3, WRITE | DENYOOM, K1, set, G, "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.")
    .docs("1.0.0", "O(1)")
    .history(&[
        ("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."),
        ("6.0.0", "Added the `KEEPTTL` option."),
        ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."),
        ("7.0.0", "Allowed the `NX` and `GET` options to be used together."),
    ])
    .key_specs("RW access update variable_flags")
    .args("
        key type=key key_spec_index=0
        value type=string
        condition type=oneof since=2.6.12 flags=optional
          nx type=pure-token token=NX
          xx type=pure-token token=XX
        get type=pure-token token=GET since=6.2.0 flags=optional
        expiration type=oneof flags=optional
          seconds type=integer token=EX since=2.6.12
          milliseconds type=integer token=PX since=2.6.12
          unix-time-seconds type=unix-time token=EXAT since=6.2.0
          unix-time-milliseconds type=unix-time token=PXAT since=6.2.0
          keepttl type=pure-token token=KEEPTTL since=6.0.0
    ");

/// The string stored at `key`: Ok(None) if missing, Err(WRONGTYPE) if not a string. A
/// decoded HLL sketch is a string: it is serialized in place first (see `Value`), so every
/// string command reads exactly the bytes GET returns.
pub fn read_str<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a [u8]>, Frame> {
    let now = ctx.now_ms;
    match ctx.db().get_read_mut(key, now) {
        None => Ok(None),
        Some(e) => {
            e.sketch_to_string();
            let e: &'a Entry = e;
            e.str_bytes().map(Some).ok_or_else(|| err(ERR_WRONGTYPE))
        }
    }
}

/// The string at `key` for modification, created empty if missing.
/// It is marked as modified in place (OBJECT ENCODING "raw"); WRONGTYPE if it holds anything
/// but a string or a sketch.
pub fn str_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<StrMut<'a>, Frame> {
    let now = ctx.now_ms;
    if !ctx.db().contains(key, now) {
        ctx.db().set(key, Value::Str(Default::default()), 0, now);
    }
    match ctx.db().get_mut(key, now) {
        Some(e) => {
            if !matches!(e.value(), ValueRef::Str(_) | ValueRef::Hll(_)) {
                return Err(err(ERR_WRONGTYPE));
            }
            e.set_raw_encoding(true);
            Ok(e.str_mut().expect("a string or a sketch"))
        }
        None => Err(err("ERR internal error: key vanished")),
    }
}

fn bulk_or_null(v: Option<&[u8]>) -> Frame {
    match v {
        Some(s) => Frame::Bulk(Bytes::copy_from_slice(s)),
        None => Frame::Null,
    }
}

fn get(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_str(ctx, &a[1]) {
        Ok(v) => bulk_or_null(v),
        Err(e) => e,
    }
}

/// Expiry options shared by SET and GETEX.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ExpireOpt {
    None,
    KeepTtl,
    Persist,
    At(u64),
}

/// Converts an EX/PX/EXAT/PXAT argument to an absolute time, with Redis's validation.
pub fn expire_arg(kind: &[u8], arg: &[u8], now_ms: u64, cmd: &str) -> Result<u64, Frame> {
    let v = parse_i64(arg)?;
    let invalid = || Frame::error(format!("ERR invalid expire time in '{cmd}' command"));
    if v <= 0 {
        return Err(invalid());
    }
    let (ms, relative) = if is(kind, "ex") {
        (v.checked_mul(1000).ok_or_else(invalid)?, true)
    } else if is(kind, "px") {
        (v, true)
    } else if is(kind, "exat") {
        (v.checked_mul(1000).ok_or_else(invalid)?, false)
    } else {
        (v, false)
    };
    let at = if relative { ms.checked_add(now_ms as i64).ok_or_else(invalid)? } else { ms };
    Ok(at as u64)
}

fn set(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (mut nx, mut xx, mut want_get) = (false, false, false);
    let mut expire = ExpireOpt::None;
    // Which expiry option was given: repeating the same one is allowed (the last wins, as in
    // Redis), mixing two different ones is a syntax error.
    let mut expire_kind: Option<Vec<u8>> = None;
    // The time is checked after the whole syntax, as Redis does.
    let mut timed: Option<(&Arg, &Arg)> = None;
    let mut i = 3;
    while i < a.len() {
        let o = &a[i];
        let has_next = i + 1 < a.len();
        let lower = o.to_ascii_lowercase();
        let same_or_no_expiry = expire_kind.as_ref().is_none_or(|k| *k == lower);
        if is(o, "nx") && !xx {
            nx = true;
        } else if is(o, "xx") && !nx {
            xx = true;
        } else if is(o, "get") {
            want_get = true;
        } else if is(o, "keepttl") && same_or_no_expiry {
            expire = ExpireOpt::KeepTtl;
            expire_kind = Some(lower);
        } else if (is(o, "ex") || is(o, "px") || is(o, "exat") || is(o, "pxat")) && same_or_no_expiry && has_next {
            timed = Some((o, &a[i + 1]));
            expire_kind = Some(lower);
            i += 1;
        } else {
            return err(ERR_SYNTAX);
        }
        i += 1;
    }
    if let Some((kind, v)) = timed {
        match expire_arg(kind, v, ctx.now_ms, "set") {
            Ok(at) => {
                expire = ExpireOpt::At(at);
                // Propagated with the absolute time: the same options, the expiry as PXAT.
                let mut effect: Vec<Bytes> = a[..3].iter().map(|x| Bytes::copy_from_slice(x)).collect();
                let mut j = 3;
                while j < a.len() {
                    if is(&a[j], "ex") || is(&a[j], "px") || is(&a[j], "exat") || is(&a[j], "pxat") {
                        j += 2;
                        continue;
                    }
                    effect.push(Bytes::copy_from_slice(&a[j]));
                    j += 1;
                }
                effect.push(Bytes::from_static(b"PXAT"));
                effect.push(Bytes::from(at.to_string()));
                ctx.propagate_as(Call::as_sent(effect));
            }
            Err(e) => return e,
        }
    }
    let key = &a[1];
    let now = ctx.now_ms;
    if !want_get && !nx && !xx && expire != ExpireOpt::KeepTtl {
        // The plain SET: one hash lookup. A time already past is stored as such, as Redis
        // does: the key is gone for every lookup, and reclaimed (with its "expired" event) by
        // the first one.
        let at = if let ExpireOpt::At(at) = expire { at } else { 0 };
        ctx.db().set(key, Value::str(&a[2]), at, now);
        set_events(ctx, key, at != 0);
        return Frame::ok();
    }
    // SET without GET overwrites a key of any type, and reads nothing (no keymiss event).
    let old = if want_get {
        match read_str(ctx, key) {
            Ok(v) => v.map(<[u8]>::to_vec),
            Err(e) => return e,
        }
    } else {
        None
    };
    let exists = ctx.db().contains(key, now);
    let reply_skip = if want_get { bulk_or_null(old.as_deref()) } else { Frame::Null };
    if (nx && exists) || (xx && !exists) {
        return ctx.unchanged(reply_skip);
    }
    let at = match expire {
        ExpireOpt::At(at) => at,
        ExpireOpt::KeepTtl => match ctx.db().peek(key, now) {
            Some(_) => ctx.db().expire_at(key),
            None => 0,
        },
        _ => 0,
    };
    // A time already past is stored as such (see above).
    ctx.db().set(key, Value::str(&a[2]), at, now);
    set_events(ctx, key, matches!(expire, ExpireOpt::At(_)));
    if want_get {
        bulk_or_null(old.as_deref())
    } else {
        Frame::ok()
    }
}

/// SET's keyspace events: "set", then "expire" when it was given a time.
fn set_events(ctx: &mut Ctx, key: &[u8], timed: bool) {
    ctx.notify(notify::STRING, "set", key);
    if timed {
        ctx.notify(notify::GENERIC, "expire", key);
    }
}

fn setnx(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms;
    if ctx.db().contains(&a[1], now) {
        return ctx.unchanged(Frame::Integer(0));
    }
    ctx.db().set(&a[1], Value::str(&a[2]), 0, now);
    ctx.notify(notify::STRING, "set", &a[1]);
    Frame::Integer(1)
}

fn setex_generic(ctx: &mut Ctx, a: &[Arg], kind: &str, cmd: &str) -> Frame {
    let at = match expire_arg(kind.as_bytes(), &a[2], ctx.now_ms, cmd) {
        Ok(at) => at,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    ctx.db().set(&a[1], Value::str(&a[3]), at, now);
    set_events(ctx, &a[1], true);
    ctx.propagate_as(Call::with_capacity(&SET, 4).arg(Bytes::copy_from_slice(&a[1])).arg(Bytes::copy_from_slice(&a[3])).arg(Bytes::from_static(b"PXAT")).arg(Bytes::from(at.to_string())));
    Frame::ok()
}

fn setex(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    setex_generic(ctx, a, "ex", "setex")
}

fn psetex(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    setex_generic(ctx, a, "px", "psetex")
}

fn getset(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let old = match read_str(ctx, &a[1]) {
        Ok(v) => bulk_or_null(v),
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    ctx.db().set(&a[1], Value::str(&a[2]), 0, now);
    ctx.notify(notify::STRING, "set", &a[1]);
    old
}

fn getdel(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let old = match read_str(ctx, &a[1]) {
        Ok(None) => return ctx.unchanged(Frame::Null),
        Ok(v) => bulk_or_null(v),
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    ctx.db().remove(&a[1], now);
    ctx.notify(notify::GENERIC, "del", &a[1]);
    old
}

fn getex(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    // As in Redis: repeating the same option is allowed (the last wins), mixing two different
    // ones is a syntax error, and the time is validated only once the key is found.
    let mut persist = false;
    let mut timed: Option<(&Arg, &Arg)> = None;
    let mut i = 2;
    while i < a.len() {
        let o = &a[i];
        let timed_kind = is(o, "ex") || is(o, "px") || is(o, "exat") || is(o, "pxat");
        if timed_kind && !persist && timed.is_none_or(|(k, _)| k.eq_ignore_ascii_case(o)) && i + 1 < a.len() {
            timed = Some((o, &a[i + 1]));
            i += 1;
        } else if is(o, "persist") && timed.is_none() {
            persist = true;
        } else {
            return err(ERR_SYNTAX);
        }
        i += 1;
    }
    let reply = match read_str(ctx, &a[1]) {
        Ok(None) => {
            ctx.propagate_nothing();
            return ctx.unchanged(Frame::Null);
        }
        Ok(v) => bulk_or_null(v),
        Err(e) => return e,
    };
    let expire = match timed {
        Some((kind, v)) => match expire_arg(kind, v, ctx.now_ms, "getex") {
            Ok(at) => ExpireOpt::At(at),
            Err(e) => return e,
        },
        None if persist => ExpireOpt::Persist,
        None => ExpireOpt::None,
    };
    let now = ctx.now_ms;
    match expire {
        ExpireOpt::At(at) if at <= now => {
            ctx.db().remove(&a[1], now);
            ctx.notify(notify::GENERIC, "del", &a[1]);
            ctx.propagate_as(Call::of(&crate::expiry::PEXPIREAT).arg(Bytes::copy_from_slice(&a[1])).arg(Bytes::from(at.to_string())));
        }
        ExpireOpt::At(at) => {
            ctx.db().set_expire(&a[1], at);
            ctx.notify(notify::GENERIC, "expire", &a[1]);
            ctx.propagate_as(Call::of(&crate::expiry::PEXPIREAT).arg(Bytes::copy_from_slice(&a[1])).arg(Bytes::from(at.to_string())));
        }
        // As Redis: only removing a time is a change.
        ExpireOpt::Persist if ctx.db().expire_at(&a[1]) != 0 => {
            ctx.db().set_expire(&a[1], 0);
            ctx.notify(notify::GENERIC, "persist", &a[1]);
            ctx.propagate_as(Call::of(&crate::expiry::PERSIST).arg(Bytes::copy_from_slice(&a[1])));
        }
        _ => {
            ctx.propagate_nothing();
            return ctx.unchanged(reply);
        }
    }
    reply
}

fn mget(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let out = a[1..].iter().map(|k| read_str(ctx, k).map(bulk_or_null).unwrap_or(Frame::Null)).collect();
    Frame::Array(out)
}

fn mset(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if a.len().is_multiple_of(2) {
        return Frame::error(format!("ERR wrong number of arguments for '{}' command", String::from_utf8_lossy(&a[0]).to_lowercase()));
    }
    let now = ctx.now_ms;
    for kv in a[1..].chunks(2) {
        ctx.db().set(&kv[0], Value::str(&kv[1]), 0, now);
        ctx.notify(notify::STRING, "set", &kv[0]);
    }
    Frame::ok()
}

fn msetnx(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if a.len().is_multiple_of(2) {
        return Frame::error("ERR wrong number of arguments for 'msetnx' command");
    }
    let now = ctx.now_ms;
    if a[1..].chunks(2).any(|kv| ctx.db().contains(&kv[0], now)) {
        return ctx.unchanged(Frame::Integer(0));
    }
    mset(ctx, a);
    Frame::Integer(1)
}

/// APPEND as Redis's appendCommand: one write lookup; a missing key is created from the
/// argument (encoded as SET would store it), an existing string grows in place (the
/// length limit checked first) and is "raw" from then on.
fn append(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (max, now) = (ctx.max_string_len, ctx.now_ms);
    let Some(e) = ctx.db().get_mut(&a[1], now) else {
        ctx.db().set(&a[1], Value::str(&a[2]), 0, now);
        return Frame::Integer(a[2].len() as i64);
    };
    e.sketch_to_string();
    let Some(cur_len) = e.str_bytes().map(<[u8]>::len) else { return err(ERR_WRONGTYPE) };
    if (cur_len + a[2].len()) as u64 > max {
        return err(ERR_STRING_TOO_LONG);
    }
    e.set_raw_encoding(true);
    Frame::Integer(e.append(&a[2]).expect("a string") as i64)
}

fn strlen(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match read_str(ctx, &a[1]) {
        Ok(v) => Frame::Integer(v.map(|s| s.len()).unwrap_or(0) as i64),
        Err(e) => e,
    }
}

fn getrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let (mut start, mut end) = match (parse_i64(&a[2]), parse_i64(&a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let s = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Frame::Bulk(Bytes::new()),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Frame::Bulk(Bytes::new());
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if len == 0 || start > end {
        return Frame::Bulk(Bytes::new());
    }
    Frame::Bulk(Bytes::copy_from_slice(&s[start as usize..=end as usize]))
}

fn setrange(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let offset = match parse_i64(&a[2]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    if offset < 0 {
        return err("ERR offset is out of range");
    }
    let value = &a[3];
    let cur = match read_str(ctx, &a[1]) {
        Ok(v) => v.map(|s| s.len()),
        Err(e) => return e,
    };
    if value.is_empty() {
        return ctx.unchanged(Frame::Integer(cur.unwrap_or(0) as i64));
    }
    let needed = offset as u64 + value.len() as u64;
    if needed > ctx.max_string_len {
        return err(ERR_STRING_TOO_LONG);
    }
    if cur.unwrap_or(0) < needed as usize {
        if let Err(e) = check_allocatable(needed) {
            return e;
        }
    }
    match str_mut(ctx, &a[1]) {
        Ok(mut s) => {
            let off = offset as usize;
            if s.len() < off + value.len() {
                s.resize(off + value.len(), 0);
            }
            s[off..off + value.len()].copy_from_slice(value);
            Frame::Integer(s.len() as i64)
        }
        Err(e) => e,
    }
}

fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) -> Frame {
    let cur = match read_str(ctx, key) {
        Ok(Some(s)) => match parse_i64(s) {
            Ok(v) => v,
            Err(e) => return e,
        },
        Ok(None) => 0,
        Err(e) => return e,
    };
    let Some(new) = cur.checked_add(by) else { return err(ERR_OVERFLOW) };
    let now = ctx.now_ms;
    let bytes = int_bytes(new);
    match ctx.db().get_mut(key, now) {
        Some(e) => e.set_value(Value::Str(bytes.into())),
        None => ctx.db().set(key, Value::Str(bytes.into()), 0, now),
    }
    // Redis's incrDecrCommand: "incrby" for INCR, DECR, INCRBY and DECRBY alike.
    ctx.notify(notify::STRING, "incrby", key);
    Frame::Integer(new)
}

fn incr(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    incr_by(ctx, &a[1], 1)
}

fn decr(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    incr_by(ctx, &a[1], -1)
}

fn incrby(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match parse_i64(&a[2]) {
        Ok(by) => incr_by(ctx, &a[1], by),
        Err(e) => e,
    }
}

fn decrby(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match parse_i64(&a[2]) {
        Ok(i64::MIN) => err("ERR decrement would overflow"),
        Ok(by) => incr_by(ctx, &a[1], -by),
        Err(e) => e,
    }
}

fn incrbyfloat(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    // Redis checks the key's type before the increment, and adds in `long double`.
    let cur = match read_str(ctx, &a[1]) {
        Ok(Some(s)) => match ldouble::parse(s) {
            Some(v) => v,
            None => return err(ERR_NOT_FLOAT),
        },
        Ok(None) => ldouble::ZERO,
        Err(e) => return e,
    };
    let Some(by) = ldouble::parse(&a[2]) else { return err(ERR_NOT_FLOAT) };
    let Some(new) = ldouble::add(cur, by) else {
        return err("ERR increment would produce NaN or Infinity");
    };
    let text = ldouble::to_human(new);
    let now = ctx.now_ms;
    match ctx.db().get_mut(&a[1], now) {
        Some(e) => e.set_value(Value::Str(text.clone().into())),
        None => ctx.db().set(&a[1], Value::Str(text.clone().into()), 0, now),
    }
    // Redis stores the text as it is (no integer encoding): "embstr" even for "3".
    ctx.db().set_text_encoding(&a[1]);
    // As Redis: the result is propagated, not the increment (no float arithmetic at replay).
    let text = Bytes::from(text);
    ctx.propagate_as(Call::of(&SET).arg(Bytes::copy_from_slice(&a[1])).arg(text.clone()).arg(Bytes::from_static(b"KEEPTTL")));
    Frame::Bulk(text)
}

fn lcs(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    // Redis checks the keys' types before it looks at the options.
    let sa = match read_str(ctx, &a[1]) {
        Ok(v) => v.map(<[u8]>::to_vec).unwrap_or_default(),
        Err(_) => return err("ERR The specified keys must contain string values"),
    };
    let sb = match read_str(ctx, &a[2]) {
        Ok(v) => v.map(<[u8]>::to_vec).unwrap_or_default(),
        Err(_) => return err("ERR The specified keys must contain string values"),
    };
    let (mut want_len, mut want_idx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut i = 3;
    while i < a.len() {
        let o = &a[i];
        if is(o, "idx") {
            want_idx = true;
        } else if is(o, "len") {
            want_len = true;
        } else if is(o, "withmatchlen") {
            withmatchlen = true;
        } else if is(o, "minmatchlen") && i + 1 < a.len() {
            minmatchlen = match parse_i64(&a[i + 1]) {
                Ok(v) => v.max(0),
                Err(e) => return e,
            };
            i += 1;
        } else {
            return err(ERR_SYNTAX);
        }
        i += 1;
    }
    if want_len && want_idx {
        return err("ERR If you want both the length and indexes, please just use IDX.");
    }
    let cells = (sa.len() as u64 + 1) * (sb.len() as u64 + 1);
    if cells.saturating_mul(4) > ctx.max_string_len {
        return err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    lcs_reply(&sa, &sb, want_len, want_idx, withmatchlen, minmatchlen as usize)
}

/// Redis's LCS: the dynamic-programming table, then a walk back that yields the string and
/// the matching ranges (last match first, as Redis reports them).
fn lcs_reply(a: &[u8], b: &[u8], want_len: bool, want_idx: bool, withmatchlen: bool, minmatchlen: usize) -> Frame {
    let (alen, blen) = (a.len(), b.len());
    let w = alen + 1;
    let mut t = vec![0u32; w * (blen + 1)];
    for j in 1..=blen {
        for i in 1..=alen {
            t[j * w + i] = if a[i - 1] == b[j - 1] { t[(j - 1) * w + i - 1] + 1 } else { t[(j - 1) * w + i].max(t[j * w + i - 1]) };
        }
    }
    let lcs_at = |i: usize, j: usize| t[j * w + i];
    let total = lcs_at(alen, blen) as usize;
    if want_len {
        return Frame::Integer(total as i64);
    }
    let mut result = vec![0u8; total];
    let mut idx = total;
    let (mut i, mut j) = (alen, blen);
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0usize, 0usize, 0usize);
    let mut matches = Vec::new();
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == alen {
                a_start = i - 1;
                a_end = i - 1;
                b_start = j - 1;
                b_end = j - 1;
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if lcs_at(i - 1, j) > lcs_at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        if emit {
            let match_len = a_end - a_start + 1;
            if minmatchlen == 0 || match_len >= minmatchlen {
                let mut m = vec![
                    Frame::Array(vec![Frame::Integer(a_start as i64), Frame::Integer(a_end as i64)]),
                    Frame::Array(vec![Frame::Integer(b_start as i64), Frame::Integer(b_end as i64)]),
                ];
                if withmatchlen {
                    m.push(Frame::Integer(match_len as i64));
                }
                matches.push(Frame::Array(m));
            }
            a_start = alen;
        }
    }
    if want_idx {
        Frame::Map(vec![
            (Frame::bulk(&b"matches"[..]), Frame::Array(matches)),
            (Frame::bulk(&b"len"[..]), Frame::Integer(total as i64)),
        ])
    } else {
        Frame::Bulk(Bytes::from(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcs_matches_redis_documentation() {
        // From the LCS documentation: ohmytext / mynewtext.
        assert_eq!(lcs_reply(b"ohmytext", b"mynewtext", false, false, false, 0), Frame::bulk(&b"mytext"[..]));
        assert_eq!(lcs_reply(b"ohmytext", b"mynewtext", true, false, false, 0), Frame::Integer(6));
        let Frame::Map(m) = lcs_reply(b"ohmytext", b"mynewtext", false, true, true, 4) else { panic!() };
        assert_eq!(
            m[0].1,
            Frame::Array(vec![Frame::Array(vec![
                Frame::Array(vec![Frame::Integer(4), Frame::Integer(7)]),
                Frame::Array(vec![Frame::Integer(5), Frame::Integer(8)]),
                Frame::Integer(4),
            ])])
        );
    }
}
