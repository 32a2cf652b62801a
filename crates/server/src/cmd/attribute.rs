//! ATTRIBUTE: multi-touch attribution computed over event streams, in the server.
//!
//! ```text
//! ATTRIBUTE MATCH pattern | KEY key
//!           CHANNEL field  CONVERSION field value  [VALUE field]
//!           MODELS model [model ...]  [HALFLIFE duration]  [LOOKBACK duration]
//! ```
//!
//! Models: `first`, `last`, `linear`, `position` (40/20/40) and `decay` (credit halves every
//! HALFLIFE before the conversion, default 7d); touches count only within LOOKBACK before a
//! conversion (default 30d) and after the user's previous conversion. Durations are a number
//! with `ms`, `s`, `m`, `h` or `d` (a bare number is milliseconds). The rules are
//! `abacus_collections::attribution`'s.
//!
//! MATCH runs over every stream whose key matches the pattern, on every shard at once (each
//! shard sums its own users, the connection adds the sums; in cluster mode, every node's,
//! `fanout.rs`): the reply is a map of `users`,
//! `events`, `conversions`, `unattributed` (conversions without a touch in their window),
//! `skipped` (entries without the conversion field, or touches without the channel field)
//! and `models`: per model (in the order asked), every channel seen in a touch, in name
//! order, as `[channel, credited conversions, credited value]`. KEY computes one user's
//! stream and adds `paths`: per conversion its ID, value, touches (`[id, channel]`) and each
//! model's shares of it, per touch. Keys of other types are ignored by MATCH and refused
//! by KEY (WRONGTYPE).
//!
//! What runs on one shard (parsing, each shard's job, the reply's frames) is below the
//! network layer, in `abacus_commands::attribute`; this file holds the table entry and the
//! fan-out over the shards.

use abacus_collections::attribution::Attribution;
use abacus_commands::attribute::{bulk_str, key_job, match_job, parse, path_frame, summary, Scope};
use abacus_protocol::{Arg, Frame};

use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::Access;
use abacus_engine::shard::{now_ms, shard_of, Shard};

pub const COMMANDS: &[Spec] = &[Spec::conn(
    "attribute",
    -8,
    READONLY | ALL_SHARDS,
    (0, 0, 0),
    conn_fn!(|conn, access, call| attribute(conn, access, &call.args).await),
    super::streams::G,
    "Computes multi-touch attribution (first, last, linear, position, decay) over event streams.",
)
    .abacus_docs("O(N) where N is the number of events read from the streams.")];

async fn attribute(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let (scope, q) = match parse(a) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let db = conn.client.db;
    match scope {
        Scope::Key(key) => {
            let shard = shard_of(&key, conn.worker.shards());
            let q2 = q.clone();
            let done = conn
                .worker
                .run(access, shard, move |s: &mut Shard| key_job(&mut s.dbs[db], &key, &q2, now_ms()))
                .await;
            match done {
                None => abacus_engine::exec::shutting_down(),
                Some(Err(e)) => e,
                Some(Ok((a, paths))) => {
                    let mut m = summary(&a, &q);
                    m.push((bulk_str("paths"), Frame::Array(paths.iter().map(|p| path_frame(p, &q)).collect())));
                    Frame::Map(m)
                }
            }
        }
        Scope::Match(pattern) => {
            let q2 = q.clone();
            // Cluster mode: the other shard groups' sums (`fanout.rs`), asked meanwhile.
            let peers = async {
                let groups = if matches!(access, Access::Locked(_)) { Vec::new() } else { crate::fanout::peers(conn) };
                if groups.is_empty() {
                    return Ok(Vec::new());
                }
                crate::fanout::ask_all(&conn.worker.server, &groups, a.iter().map(|x| x.to_vec()).collect(), false).await
            };
            let (per_shard, peers) = tokio::join!(conn.worker.run_all(access, move |s: &mut Shard| match_job(&mut s.dbs[db], &pattern, &q2, now_ms())), peers);
            let Some(per_shard) = per_shard else { return abacus_engine::exec::shutting_down() };
            let mut total = Attribution::new(&q);
            for a in &per_shard {
                total.merge(a);
            }
            if conn.client.local_only {
                // A coordinator's request: this node's sums, merged there.
                return Frame::Bulk(abacus_protocol::Bytes::from(total.to_wire()));
            }
            match peers {
                Ok(replies) => {
                    for reply in replies {
                        let part = match abacus_protocol::parse_frame(&reply) {
                            Ok(Some((Frame::Bulk(b), _))) => Attribution::from_wire(&q, &b),
                            _ => None,
                        };
                        let Some(part) = part else { return Frame::error("ERR a node's part of the cluster-wide query is malformed") };
                        total.merge(&part);
                    }
                }
                Err(e) => return e,
            }
            Frame::Map(summary(&total, &q))
        }
    }
}
