//! The pub/sub family: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB's introspection.
//!
//! These act on the connection's subscriptions and on the process-wide registry
//! (`pubsub.rs`), never on keys, so they run in the connection task. SSUBSCRIBE, SUNSUBSCRIBE
//! and SPUBLISH declare their channels as keys in COMMAND INFO, as Redis 7.0 does (for cluster
//! clients); here they are not routed by them: a standalone server has one shard-channel name
//! space.
//!
//! Replies are Redis 7.0's: one confirmation per channel (a `Frame::Seq` of pushes, so that
//! they bypass CLIENT REPLY OFF/SKIP as Redis's pushes do, and inside EXEC count as one reply
//! per command as Redis's do), `[unsubscribe, nil, count]` for an unsubscribe of everything
//! with nothing subscribed, and counts of channels plus patterns for (P)SUBSCRIBE, of shard
//! channels for SSUBSCRIBE.

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::Access;
use abacus_engine::pubsub::{registry, Kind, Subscriptions};

const G: &str = "pubsub";
const NONE: (i32, i32, i32) = (0, 0, 0);
const ALL_ARGS: (i32, i32, i32) = (1, -1, 1);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("subscribe", -2, LOADING | STALE | ALLOWED_SUBSCRIBED | CHANNEL_SUBSCRIBE, NONE, conn_fn!(|conn, _, call| subscribe(conn, Kind::Channel, &call.args)), G, "Listens for messages published to channels.")
        .docs("2.0.0", "O(N) where N is the number of channels to subscribe to.")
        .noscript()
        .args("
            channel type=string flags=multiple
        "),
    Spec::conn("unsubscribe", -1, LOADING | STALE | ALLOWED_SUBSCRIBED, NONE, conn_fn!(|conn, _, call| unsubscribe(conn, Kind::Channel, &call.args)), G, "Stops listening to messages posted to channels.")
        .docs("2.0.0", "O(N) where N is the number of clients already subscribed to a channel.")
        .noscript()
        .args("
            channel type=string flags=optional,multiple
        "),
    Spec::conn("psubscribe", -2, LOADING | STALE | ALLOWED_SUBSCRIBED | CHANNEL_PATTERN, NONE, conn_fn!(|conn, _, call| subscribe(conn, Kind::Pattern, &call.args)), G, "Listens for messages published to channels that match one or more patterns.")
        .docs("2.0.0", "O(N) where N is the number of patterns the client is already subscribed to.")
        .noscript()
        .args("
            pattern type=block flags=multiple
              pattern type=pattern
        "),
    Spec::conn("punsubscribe", -1, LOADING | STALE | ALLOWED_SUBSCRIBED, NONE, conn_fn!(|conn, _, call| unsubscribe(conn, Kind::Pattern, &call.args)), G, "Stops listening to messages published to channels that match one or more patterns.")
        .docs("2.0.0", "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).")
        .noscript()
        .args("
            pattern type=pattern flags=optional,multiple
        "),
    Spec::conn("ssubscribe", -2, LOADING | STALE | ALLOWED_SUBSCRIBED | CHANNEL_SUBSCRIBE, ALL_ARGS, conn_fn!(|conn, access, call| ssubscribe(conn, access, &call.args)), G, "Listens for messages published to shard channels.")
        .docs("7.0.0", "O(N) where N is the number of shard channels to subscribe to.")
        .key_specs("not_key")
        .noscript()
        .args("
            shardchannel type=string flags=multiple
        "),
    Spec::conn("sunsubscribe", -1, LOADING | STALE | ALLOWED_SUBSCRIBED, ALL_ARGS, conn_fn!(|conn, _, call| unsubscribe(conn, Kind::Shard, &call.args)), G, "Stops listening to messages posted to shard channels.")
        .docs("7.0.0", "O(N) where N is the number of clients already subscribed to a shard channel.")
        .key_specs("not_key")
        .noscript()
        .args("
            shardchannel type=string flags=optional,multiple
        "),
    Spec::conn("publish", 3, LOADING | STALE | FAST | CHANNEL_PUBLISH, NONE, conn_fn!(|conn, _, call| publish(conn, Kind::Channel, &call.args)), G, "Posts a message to a channel.")
        .docs("2.0.0", "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).")
        .args("
            channel type=string
            message type=string
        "),
    Spec::conn("spublish", 3, LOADING | STALE | FAST | CHANNEL_PUBLISH, (1, 1, 1), conn_fn!(|conn, _, call| publish(conn, Kind::Shard, &call.args)), G, "Post a message to a shard channel")
        .docs("7.0.0", "O(N) where N is the number of clients subscribed to the receiving shard channel.")
        .key_specs("not_key")
        .args("
            shardchannel type=string
            message type=string
        "),
    Spec::conn("pubsub", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), G, "A container for Pub/Sub commands.").with_subcommands(PUBSUB)
        .docs("2.8.0", "Depends on subcommand."),
];

const PUBSUB: &[Spec] = &[
    Spec::conn("pubsub|channels", -2, LOADING | STALE, NONE, conn_fn!(|_, _, call| channels(Kind::Channel, &call.args)), G, "Returns the active channels.")
        .docs("2.8.0", "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)")
        .args("
            pattern type=pattern flags=optional
        "),
    Spec::conn("pubsub|numsub", -2, LOADING | STALE, NONE, conn_fn!(|_, _, call| numsub(Kind::Channel, &call.args)), G, "Returns a count of subscribers to channels.")
        .docs("2.8.0", "O(N) for the NUMSUB subcommand, where N is the number of requested channels")
        .args("
            channel type=string flags=optional,multiple
        "),
    Spec::conn("pubsub|numpat", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| Frame::Integer(registry().counts().1 as i64)), G, "Returns a count of unique pattern subscriptions.")
        .docs("2.8.0", "O(1)"),
    Spec::conn("pubsub|shardchannels", -2, LOADING | STALE, NONE, conn_fn!(|_, _, call| channels(Kind::Shard, &call.args)), G, "Returns the active shard channels.")
        .docs("7.0.0", "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).")
        .args("
            pattern type=pattern flags=optional
        "),
    Spec::conn("pubsub|shardnumsub", -2, LOADING | STALE, NONE, conn_fn!(|_, _, call| numsub(Kind::Shard, &call.args)), G, "Returns the count of subscribers of shard channels.")
        .docs("7.0.0", "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels")
        .args("
            shardchannel type=string flags=optional,multiple
        "),
    Spec::conn("pubsub|help", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| help()), G, "Returns helpful text about the different subcommands.")
        .docs("6.2.0", "O(1)"),
];

fn confirmation(verb: &'static str, name: Option<&[u8]>, count: usize) -> Frame {
    Frame::Push(vec![
        Frame::Bulk(Bytes::from_static(verb.as_bytes())),
        name.map_or(Frame::Null, |n| Frame::Bulk(Bytes::copy_from_slice(n))),
        Frame::Integer(count as i64),
    ])
}

fn subscribe(conn: &mut Conn, kind: Kind, a: &[Arg]) -> Frame {
    let (meta, limit) = (conn.client.meta.clone(), conn.worker.server.config.pubsub_limit.clone());
    let subs = conn.pubsub.get_or_insert_with(|| Box::new(Subscriptions::new(meta, limit)));
    let verb = kind.subscribe_verb();
    Frame::Seq(
        a[1..]
            .iter()
            .map(|name| {
                subs.subscribe(kind, name);
                confirmation(verb, Some(name), subs.count(kind))
            })
            .collect(),
    )
}

/// SSUBSCRIBE: refused inside EXEC, as Redis 7.0 refuses it for a client that may not block.
fn ssubscribe(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    if matches!(access, Access::Locked(_)) {
        return err("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
    }
    subscribe(conn, Kind::Shard, a)
}

fn unsubscribe(conn: &mut Conn, kind: Kind, a: &[Arg]) -> Frame {
    let verb = kind.unsubscribe_verb();
    let names: Vec<Bytes> = if a.len() == 1 {
        conn.pubsub.as_ref().map(|s| s.names(kind)).unwrap_or_default()
    } else {
        a[1..].iter().map(|n| Bytes::copy_from_slice(n)).collect()
    };
    let mut replies = Vec::with_capacity(names.len().max(1));
    for name in &names {
        let count = match &mut conn.pubsub {
            Some(s) => {
                s.unsubscribe(kind, name);
                s.count(kind)
            }
            None => 0,
        };
        replies.push(confirmation(verb, Some(name), count));
    }
    if names.is_empty() {
        replies.push(confirmation(verb, None, conn.pubsub.as_ref().map_or(0, |s| s.count(kind))));
    }
    // Messages published before these unsubscriptions took effect go out before their
    // confirmations, as they would in Redis.
    conn.take_messages(usize::MAX);
    if conn.pubsub.as_ref().is_some_and(|s| s.total() == 0) {
        conn.leave_pubsub();
    }
    Frame::Seq(replies)
}

fn publish(conn: &mut Conn, kind: Kind, a: &[Arg]) -> Frame {
    let n = match kind {
        Kind::Shard => abacus_engine::pubsub::spublish(&a[1], &a[2]),
        _ => abacus_engine::pubsub::publish(&a[1], &a[2]),
    };
    // In a cluster the other nodes' subscribers get it over the bus; the reply counts this
    // node's receivers only, as Redis's.
    if let Some(cluster) = &conn.worker.server.cluster {
        cluster.with(|c| c.publish(&a[1], &a[2], kind == Kind::Shard));
    }
    // A (RESP3) subscriber publishing to itself gets the message before the reply, as in
    // Redis, where PUBLISH writes it to the output first.
    if conn.pubsub.is_some() {
        conn.take_messages(usize::MAX);
    }
    Frame::Integer(n as i64)
}

fn channels(kind: Kind, a: &[Arg]) -> Frame {
    if a.len() > 3 {
        let name = if kind == Kind::Shard { "shardchannels" } else { "channels" };
        return Frame::error(format!("ERR unknown subcommand or wrong number of arguments for '{name}'. Try PUBSUB HELP."));
    }
    let names = registry().channel_names(kind, a.get(2).map(|p| &p[..]));
    Frame::Array(names.into_iter().map(Frame::Bulk).collect())
}

fn numsub(kind: Kind, a: &[Arg]) -> Frame {
    let r = registry();
    Frame::Array(a[2..].iter().flat_map(|c| [Frame::Bulk(Bytes::copy_from_slice(c)), Frame::Integer(r.numsub(kind, c) as i64)]).collect())
}

fn help() -> Frame {
    Frame::Array(
        [
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        ]
        .iter()
        .map(|l| Frame::Simple(Bytes::from_static(l.as_bytes())))
        .collect(),
    )
}
