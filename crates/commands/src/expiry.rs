//! The expiry family: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME,
//! PEXPIRETIME, PERSIST.
//!
//! Expiry times are stored as absolute Unix milliseconds (the form the append-only log will
//! record, so a replay never stretches a TTL). Relative forms are converted here, with Redis's
//! overflow checks. Setting a time already past deletes the key at once, as Redis does.

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::notify;
use crate::ctx::{Call, Ctx};

const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "generic";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("expire", -3, WRITE | FAST, K1, expire, G, "Sets the expiration time of a key in seconds.")
        .docs("1.0.0", "O(1)")
        .history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")])
        .args("
            key type=key key_spec_index=0
            seconds type=integer
            condition type=oneof since=7.0.0 flags=optional
              nx type=pure-token token=NX
              xx type=pure-token token=XX
              gt type=pure-token token=GT
              lt type=pure-token token=LT
        "),
    Spec::keyed("pexpire", -3, WRITE | FAST, K1, pexpire, G, "Sets the expiration time of a key in milliseconds.")
        .docs("2.6.0", "O(1)")
        .history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")])
        .args("
            key type=key key_spec_index=0
            milliseconds type=integer
            condition type=oneof since=7.0.0 flags=optional
              nx type=pure-token token=NX
              xx type=pure-token token=XX
              gt type=pure-token token=GT
              lt type=pure-token token=LT
        "),
    Spec::keyed("expireat", -3, WRITE | FAST, K1, expireat, G, "Sets the expiration time of a key to a Unix timestamp.")
        .docs("1.2.0", "O(1)")
        .history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")])
        .args("
            key type=key key_spec_index=0
            unix-time-seconds type=unix-time
            condition type=oneof since=7.0.0 flags=optional
              nx type=pure-token token=NX
              xx type=pure-token token=XX
              gt type=pure-token token=GT
              lt type=pure-token token=LT
        "),
    PEXPIREAT,
    Spec::keyed("ttl", 2, READONLY | FAST, K1, ttl, G, "Returns the expiration time in seconds of a key.")
        .docs("1.0.0", "O(1)")
        .history(&[("2.8.0", "Added the -2 reply.")])
        .tips("nondeterministic_output")
        .args("
            key type=key key_spec_index=0
        "),
    PTTL,
    Spec::keyed("expiretime", 2, READONLY | FAST, K1, expiretime, G, "Returns the expiration time of a key as a Unix timestamp.")
        .docs("7.0.0", "O(1)")
        .args("
            key type=key key_spec_index=0
        "),
    Spec::keyed("pexpiretime", 2, READONLY | FAST, K1, pexpiretime, G, "Returns the expiration time of a key as a Unix milliseconds timestamp.")
        .docs("7.0.0", "O(1)")
        .args("
            key type=key key_spec_index=0
        "),
    PERSIST,
];

/// Named: effect records call it (`ctx::Call::of`).
pub const PERSIST: Spec = Spec::keyed("persist", 2, WRITE | FAST, K1, persist, G, "Removes the expiration time of a key.")
    .docs("2.2.0", "O(1)")
    .args("
        key type=key key_spec_index=0
    ");

/// Named: effect records call it (`ctx::Call::of`).
pub const PEXPIREAT: Spec = Spec::keyed("pexpireat", -3, WRITE | FAST, K1, pexpireat, G, "Sets the expiration time of a key to a Unix milliseconds timestamp.")
    .docs("2.6.0", "O(1)")
    .history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")])
    .args("
        key type=key key_spec_index=0
        unix-time-milliseconds type=unix-time
        condition type=oneof since=7.0.0 flags=optional
          nx type=pure-token token=NX
          xx type=pure-token token=XX
          gt type=pure-token token=GT
          lt type=pure-token token=LT
    ");

/// PTTL's entry, named by callers that run it (MIGRATE).
pub const PTTL: Spec = Spec::keyed("pttl", 2, READONLY | FAST, K1, pttl, G, "Returns the expiration time in milliseconds of a key.")
    .docs("2.6.0", "O(1)")
    .history(&[("2.8.0", "Added the -2 reply.")])
    .tips("nondeterministic_output")
    .args("
        key type=key key_spec_index=0
    ");

fn expire_generic(ctx: &mut Ctx, a: &[Arg], unit_ms: i64, relative: bool, cmd: &str) -> Frame {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for o in &a[3..] {
        if is(o, "nx") {
            nx = true;
        } else if is(o, "xx") {
            xx = true;
        } else if is(o, "gt") {
            gt = true;
        } else if is(o, "lt") {
            lt = true;
        } else {
            return err_quoting("ERR Unsupported option ", o, "");
        }
    }
    if nx && (xx || gt || lt) {
        return err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return err("ERR GT and LT options at the same time are not compatible");
    }
    // Redis checks the options before the time.
    let when = match parse_i64(&a[2]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let invalid = || Frame::error(format!("ERR invalid expire time in '{cmd}' command"));
    let Some(mut at) = when.checked_mul(unit_ms) else { return invalid() };
    if relative {
        let Some(v) = at.checked_add(ctx.now_ms as i64) else { return invalid() };
        at = v;
    }
    let now = ctx.now_ms;
    if ctx.db().get(&a[1], now).is_none() {
        {
        ctx.propagate_nothing();
        return ctx.unchanged(Frame::Integer(0));
    }
    }
    let current = ctx.db().expire_at(&a[1]);
    let has_ttl = current != 0;
    if (nx && has_ttl) || (xx && !has_ttl) {
        {
        ctx.propagate_nothing();
        return ctx.unchanged(Frame::Integer(0));
    }
    }
    if gt && (!has_ttl || at <= current as i64) {
        {
        ctx.propagate_nothing();
        return ctx.unchanged(Frame::Integer(0));
    }
    }
    if lt && has_ttl && at >= current as i64 {
        {
        ctx.propagate_nothing();
        return ctx.unchanged(Frame::Integer(0));
    }
    }
    if at <= now as i64 {
        ctx.db().remove(&a[1], now);
        ctx.notify(notify::GENERIC, "del", &a[1]);
    } else {
        ctx.db().set_expire(&a[1], at as u64);
        ctx.notify(notify::GENERIC, "expire", &a[1]);
    }
    // Propagated with the absolute time, options resolved: exact at any replay time.
    ctx.propagate_as(Call::of(&PEXPIREAT).arg(Bytes::copy_from_slice(&a[1])).arg(Bytes::from(at.to_string())));
    Frame::Integer(1)
}

fn expire(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    expire_generic(ctx, a, 1000, true, "expire")
}

fn pexpire(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    expire_generic(ctx, a, 1, true, "pexpire")
}

fn expireat(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    expire_generic(ctx, a, 1000, false, "expireat")
}

fn pexpireat(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    expire_generic(ctx, a, 1, false, "pexpireat")
}

/// -2 if missing, -1 if no expiry, else the absolute expiry in ms.
fn expire_of(ctx: &mut Ctx, key: &[u8]) -> i64 {
    let now = ctx.now_ms;
    if ctx.db().peek(key, now).is_none() {
        // Redis's TTL looks the key up for reading (a miss; PERSIST's is dropped as a
        // write's: see `notify.rs`).
        ctx.notify(notify::KEY_MISS, "keymiss", key);
        return -2;
    }
    match ctx.db().expire_at(key) {
        0 => -1,
        at => at as i64,
    }
}

fn ttl(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms as i64;
    Frame::Integer(match expire_of(ctx, &a[1]) {
        at if at < 0 => at,
        at => ((at - now).max(0) + 500) / 1000,
    })
}

fn pttl(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let now = ctx.now_ms as i64;
    Frame::Integer(match expire_of(ctx, &a[1]) {
        at if at < 0 => at,
        at => (at - now).max(0),
    })
}

fn expiretime(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    Frame::Integer(match expire_of(ctx, &a[1]) {
        at if at < 0 => at,
        at => at / 1000,
    })
}

fn pexpiretime(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    Frame::Integer(expire_of(ctx, &a[1]))
}

fn persist(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if expire_of(ctx, &a[1]) < 0 {
        return ctx.unchanged(Frame::Integer(0));
    }
    ctx.db().set_expire(&a[1], 0);
    Frame::Integer(1)
}

#[cfg(test)]
mod tests {
    use abacus_keyspace::Db;
    use abacus_protocol::Frame;

    use crate::testing::run_keyed as run;

    #[test]
    fn unsupported_option_is_echoed_byte_for_byte() {
        // Redis formats the option with %s: its bytes, not U+FFFD replacements.
        let mut dbs = vec![Db::new()];
        for cmd in [&b"expire"[..], b"pexpire", b"expireat", b"pexpireat"] {
            let Frame::Error(e) = run(&mut dbs, &[cmd, b"k", b"100000", b"xx", b"\xff\xfe"]) else { panic!() };
            assert_eq!(&e[..], b"ERR Unsupported option \xff\xfe");
        }
    }
}
