//! The blocking forms of the list and sorted-set pops: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
//! BLMPOP (lists) and BZPOPMIN, BZPOPMAX, BZMPOP (sorted sets).
//!
//! Each handler is the command's non-blocking form, as Redis runs it inside MULTI: it checks
//! the timeout first (Redis replies a bad timeout before anything else), then serves from the
//! first key that has something, or replies null and changes nothing. Waiting, waking in
//! order, timeouts and CLIENT UNBLOCK are the blocking mechanism's (the server's `blocking.rs`), which
//! runs these same handlers when a key becomes ready. The pops themselves are the families'
//! (`lists.rs`, `zsets.rs`); what a served pop propagates is a plain pop (BLPOP as LPOP,
//! BLMOVE as LMOVE...), as Redis rewrites it, so the log never holds a blocking command.

use abacus_protocol::{Arg, Bytes, Frame};

use super::lists::{self, End};
use super::zsets;
use crate::command::parse_timeout;
use crate::command::flags::*;
use crate::command::{Spec, TimeoutArg};
use crate::ctx::{Call, Ctx};

const LAST_BEFORE_TIMEOUT: (i32, i32, i32) = (1, -2, 1);
const K2: (i32, i32, i32) = (1, 2, 1);

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("blpop", -3, WRITE, LAST_BEFORE_TIMEOUT, blpop, "list", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.").blocking(TimeoutArg::Last)
        .docs("2.0.0", "O(N) where N is the number of provided keys.")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")])
        .key_specs("RW access delete")
        .noscript()
        .args("
            key type=key key_spec_index=0 flags=multiple
            timeout type=double
        "),
    Spec::keyed("brpop", -3, WRITE, LAST_BEFORE_TIMEOUT, brpop, "list", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.").blocking(TimeoutArg::Last)
        .docs("2.0.0", "O(N) where N is the number of provided keys.")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")])
        .key_specs("RW access delete")
        .noscript()
        .args("
            key type=key key_spec_index=0 flags=multiple
            timeout type=double
        "),
    Spec::keyed("blmove", 6, WRITE | DENYOOM, K2, blmove, "list", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.").blocking(TimeoutArg::Last)
        .docs("6.2.0", "O(1)")
        .key_specs("RW access delete; RW insert")
        .noscript()
        .args("
            source type=key key_spec_index=0
            destination type=key key_spec_index=1
            wherefrom type=oneof
              left type=pure-token token=LEFT
              right type=pure-token token=RIGHT
            whereto type=oneof
              left type=pure-token token=LEFT
              right type=pure-token token=RIGHT
            timeout type=double
        "),
    Spec::keyed("brpoplpush", 4, WRITE | DENYOOM, K2, brpoplpush, "list", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.").blocking(TimeoutArg::Last)
        .docs("2.2.0", "O(1)")
        .deprecated("6.2.0", "`BLMOVE` with the `RIGHT` and `LEFT` arguments")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")])
        .key_specs("RW access delete; RW insert")
        .noscript()
        .args("
            source type=key key_spec_index=0
            destination type=key key_spec_index=1
            timeout type=double
        "),
    Spec::keyed("blmpop", -5, WRITE, (0, 0, 0), blmpop, "list", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.").with_numkeys(2).blocking(TimeoutArg::At(1))
        .docs("7.0.0", "O(N+M) where N is the number of provided keys and M is the number of elements returned.")
        .key_specs("RW access delete")
        .args("
            timeout type=double
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            where type=oneof
              left type=pure-token token=LEFT
              right type=pure-token token=RIGHT
            count type=integer token=COUNT flags=optional
        "),
    Spec::keyed("bzpopmin", -3, WRITE | FAST, LAST_BEFORE_TIMEOUT, bzpopmin, zsets::G, "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.").blocking(TimeoutArg::Last)
        .docs("5.0.0", "O(log(N)) with N being the number of elements in the sorted set.")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")])
        .key_specs("RW access delete")
        .noscript()
        .args("
            key type=key key_spec_index=0 flags=multiple
            timeout type=double
        "),
    Spec::keyed("bzpopmax", -3, WRITE | FAST, LAST_BEFORE_TIMEOUT, bzpopmax, zsets::G, "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.").blocking(TimeoutArg::Last)
        .docs("5.0.0", "O(log(N)) with N being the number of elements in the sorted set.")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")])
        .key_specs("RW access delete")
        .noscript()
        .args("
            key type=key key_spec_index=0 flags=multiple
            timeout type=double
        "),
    Spec::keyed("bzmpop", -5, WRITE, (0, 0, 0), bzmpop, zsets::G, "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.").with_numkeys(2).blocking(TimeoutArg::At(1))
        .docs("7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.")
        .key_specs("RW access delete")
        .args("
            timeout type=double
            numkeys type=integer
            key type=key key_spec_index=0 flags=multiple
            where type=oneof
              min type=pure-token token=MIN
              max type=pure-token token=MAX
            count type=integer token=COUNT flags=optional
        "),
];

/// The timeout's error, if it is bad: checked before anything else.
fn bad_timeout(ctx: &mut Ctx, arg: &[u8]) -> Option<Frame> {
    parse_timeout(arg).err().map(|e| {
        ctx.propagate_nothing();
        e
    })
}

/// Nothing served: the null reply, no effect, no key signalled.
fn nothing(ctx: &mut Ctx, null: Frame) -> Frame {
    ctx.propagate_nothing();
    ctx.unchanged(null)
}

fn bpop(ctx: &mut Ctx, a: &[Arg], end: End) -> Frame {
    if let Some(e) = bad_timeout(ctx, &a[a.len() - 1]) {
        return e;
    }
    match lists::pop_from_first(ctx, &a[1..a.len() - 1], end, None) {
        Some(reply) => reply,
        None => nothing(ctx, Frame::NullArray),
    }
}

fn blpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    bpop(ctx, a, End::Left)
}

fn brpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    bpop(ctx, a, End::Right)
}

/// BLMOVE src dst from to timeout / BRPOPLPUSH src dst timeout: propagated as LMOVE.
fn bmove(ctx: &mut Ctx, a: &[Arg], from: End, to: End) -> Frame {
    // Served because its destination became ready: it waits on its source alone, and on a
    // source that holds a list (another type is no list to pop from while it waits).
    if !ctx.may_serve_from(&a[1]) || (ctx.serving() && lists::holds_other_type(ctx, &a[1])) {
        return nothing(ctx, Frame::Null);
    }
    match lists::lmove_once(ctx, &a[1], &a[2], from, to) {
        Ok(Some(reply)) => {
            let side = |e: End| Bytes::from_static(if e == End::Left { b"LEFT" } else { b"RIGHT" });
            ctx.propagate_as(Call::with_capacity(&lists::LMOVE, 4).arg(Bytes::copy_from_slice(&a[1])).arg(Bytes::copy_from_slice(&a[2])).arg(side(from)).arg(side(to)));
            reply
        }
        Ok(None) => nothing(ctx, Frame::Null),
        Err(e) => {
            ctx.propagate_nothing();
            e
        }
    }
}

fn blmove(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    // Redis parses the directions before the timeout.
    let (from, to) = match (End::parse(&a[3]), End::parse(&a[4])) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    if let Some(e) = bad_timeout(ctx, &a[5]) {
        return e;
    }
    bmove(ctx, a, from, to)
}

fn brpoplpush(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if let Some(e) = bad_timeout(ctx, &a[3]) {
        return e;
    }
    bmove(ctx, a, End::Right, End::Left)
}

/// BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT n]: LMPOP's arguments after the timeout.
fn blmpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if let Some(e) = bad_timeout(ctx, &a[1]) {
        return e;
    }
    let reply = lists::lmpop(ctx, &a[1..]);
    if crate::command::is_null(&reply) {
        return nothing(ctx, reply);
    }
    reply
}

/// BZPOPMIN / BZPOPMAX key... timeout: [key, member, score], propagated as ZPOPMIN/ZPOPMAX.
fn bzpop(ctx: &mut Ctx, a: &[Arg], max: bool) -> Frame {
    if let Some(e) = bad_timeout(ctx, &a[a.len() - 1]) {
        return e;
    }
    let keys = &a[1..a.len() - 1];
    match zsets::pop_from_first(ctx, keys, max, 1) {
        Ok(Some(p)) => zsets::bzpop_reply(&keys[p.key_index], &p),
        Ok(None) => nothing(ctx, Frame::NullArray),
        Err(e) => {
            ctx.propagate_nothing();
            e
        }
    }
}

fn bzpopmin(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    bzpop(ctx, a, false)
}

fn bzpopmax(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    bzpop(ctx, a, true)
}

/// BZMPOP timeout numkeys key... MIN|MAX [COUNT n]: ZMPOP's arguments after the timeout.
fn bzmpop(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if let Some(e) = bad_timeout(ctx, &a[1]) {
        return e;
    }
    let (keys, max, count) = match zsets::parse_zmpop(a, 2) {
        Ok(parsed) => parsed,
        Err(e) => {
            ctx.propagate_nothing();
            return e;
        }
    };
    let keys = &a[keys];
    match zsets::pop_from_first(ctx, keys, max, count) {
        Ok(Some(p)) => zsets::zmpop_reply(&keys[p.key_index], &p),
        Ok(None) => nothing(ctx, Frame::NullArray),
        Err(e) => {
            ctx.propagate_nothing();
            e
        }
    }
}
