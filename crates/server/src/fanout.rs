//! Cluster-wide answers of the analytics commands (issue 50): TS.MGET, TS.MRANGE,
//! TS.MREVRANGE, TS.QUERYINDEX, TS.WATERFALL, SUMMARY.QUERY and ATTRIBUTE MATCH asked of any node of a
//! cluster answer for the whole cluster, equal to one node holding all the data.
//!
//! How: the node a client asks (the coordinator) sends the same command, as received, to one
//! node of every other shard group (the primary serving those slots) over a connection of its
//! own, marked with `ABACUS.LOCAL` so that the peer answers with its own data and does not
//! fan out again; meanwhile it computes its own part on its shards. The parts are the rows of
//! one reply, each sorted by key, so they merge in key order (`cmd/ts_multi.rs`'s
//! `merge_rows`), as one node's shards' parts do. With GROUPBY, the peers return their matching
//! series' samples with the group label (`SELECTED_LABELS`), and the coordinator groups and
//! reduces everything, so a group spread over nodes is reduced once over all of its series.
//!
//! Why a connection per query rather than the cluster bus: a query's partial result can be
//! megabytes, which the bus (one link per node pair, gossip and failure detection on it)
//! should never queue behind; a client connection is the Redis protocol both ends already
//! speak, over TLS when `tls-cluster yes`, authenticated as replication is (`masteruser` /
//! `masterauth`).
//!
//! Standby reads: a primary that does not answer within `cluster-standby-deadline` (300 ms),
//! or fails, is replaced by one of its replicas, which holds the same data in the same order,
//! possibly slightly behind (timeline consistency, as HBase's standby region replicas); INFO
//! cluster counts them (`cluster_fanout_standby_answers`) and the log names the nodes. A group
//! none of whose nodes answers within `cluster-fanout-timeout` fails the query with an error
//! naming its primary: a partial answer is never returned as a whole one. Not built yet: the
//! replica's offset in the reply, an explicit option for partial answers.

use std::sync::Arc;
use std::time::Duration;

use abacus_commands::ts_filter::Rows;
use abacus_protocol::{parse_frame, Bytes, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::conn::Conn;
use crate::node::Server;

/// A node of another shard group, asked for its part.
#[derive(Clone)]
pub struct Peer {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Peer {
    fn label(&self) -> String {
        format!("{} ({}:{})", self.name, self.host, self.port)
    }
}

/// Another shard group a cluster-wide query asks: its primary, and its replicas for a
/// standby read.
#[derive(Clone)]
pub struct Group {
    pub primary: Peer,
    pub replicas: Vec<Peer>,
}

/// The other shard groups a cluster-wide query from `conn` asks: none outside cluster mode,
/// on a connection marked `ABACUS.LOCAL` (a coordinator's), or from the primary's stream.
pub fn peers(conn: &Conn) -> Vec<Group> {
    use abacus_cluster_bus::node_flags::{FAIL, PFAIL};
    let Some(cluster) = &conn.worker.server.cluster else { return Vec::new() };
    if conn.client.local_only || conn.is_master {
        return Vec::new();
    }
    let peer = |name: &abacus_cluster_bus::NodeName, n: &abacus_cluster::state::Node| Peer { name: String::from_utf8_lossy(&name.0).into_owned(), host: n.ip.clone(), port: n.port };
    cluster.with(|c| {
        let me = c.me();
        // This node's group: its data is here (a replica holds its primary's).
        let own = if me.primary.is_some() { me.primary } else { Some(c.myself) };
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for slot in 0..abacus_cluster_bus::SLOTS as u16 {
            let Some(owner) = c.owner(slot) else { continue };
            if Some(owner) == own || !seen.insert(owner) {
                continue;
            }
            let Some(n) = c.nodes.get(&owner) else { continue };
            let replicas = c
                .nodes
                .iter()
                .filter(|(_, r)| r.primary == Some(owner) && r.flags & (FAIL | PFAIL) == 0 && r.port != 0)
                .map(|(name, r)| peer(name, r))
                .collect();
            out.push(Group { primary: peer(&owner, n), replicas });
        }
        out
    })
}

/// Asks every group at once (each on a task of this thread): the replies, in the groups'
/// order, or the first failure as the error reply to give. A primary that does not answer
/// within `cluster-standby-deadline` (or fails) is replaced by its replicas, one after the
/// other (a standby read: the replica's data may be slightly behind, in the same order); a
/// group none of whose nodes answers within `cluster-fanout-timeout` fails the query.
pub async fn ask_all(server: &Arc<Server>, groups: &[Group], args: Vec<Vec<u8>>, resp3: bool) -> Result<Vec<Bytes>, Frame> {
    let ms = |name| Duration::from_millis(server.config.get_u64(name).max(1));
    let timeout = ms(abacus_engine::param!("cluster-fanout-timeout"));
    let deadline = ms(abacus_engine::param!("cluster-standby-deadline")).min(timeout);
    if let Some(c) = &server.cluster {
        c.fanout_queries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let args = Arc::new(args);
    let tasks: Vec<_> = groups
        .iter()
        .map(|g| {
            let (server, g, args) = (server.clone(), g.clone(), args.clone());
            tokio::task::spawn_local(async move {
                let started = tokio::time::Instant::now();
                let first = if g.replicas.is_empty() { timeout } else { deadline };
                let primary = match tokio::time::timeout(first, ask(&server, &g.primary, &args, resp3, first)).await {
                    Ok(Ok(r)) => return Ok(r),
                    Ok(Err(e)) => e,
                    Err(_) => format!("no answer within {} ms", first.as_millis()),
                };
                for r in &g.replicas {
                    let left = timeout.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    if let Ok(Ok(reply)) = tokio::time::timeout(left, ask(&server, r, &args, resp3, left)).await {
                        if let Some(c) = &server.cluster {
                            c.fanout_standby.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        tracing::info!("Cluster-wide query: node {} answered for its primary {} ({primary})", r.label(), g.primary.label());
                        return Ok(reply);
                    }
                }
                Err(primary)
            })
        })
        .collect();
    let mut replies = Vec::with_capacity(tasks.len());
    for (g, t) in groups.iter().zip(tasks) {
        let failed = |e: String| Frame::error(format!("CLUSTERDOWN node {} did not answer the cluster-wide query: {e}", g.primary.label()));
        match t.await {
            Ok(Ok(r)) => replies.push(r),
            Ok(Err(e)) => return Err(failed(e)),
            Err(e) => return Err(failed(e.to_string())),
        }
    }
    Ok(replies)
}

/// One peer's reply to `args`: the raw bytes of one frame (an error reply is an error).
async fn ask(server: &Server, p: &Peer, args: &[Vec<u8>], resp3: bool, timeout: Duration) -> Result<Bytes, String> {
    let use_tls = server.config.get_bool(abacus_engine::param!("tls-cluster"));
    let mut s = crate::tls::connect(&server.tls, &p.host, p.port, use_tls, timeout).await?;
    let _ = s.tcp().set_nodelay(true);
    let mut out = Vec::new();
    let pass = server.config.get(abacus_engine::param!("masterauth"));
    let mut expect = 1;
    if !pass.is_empty() {
        let user = server.config.get(abacus_engine::param!("masteruser"));
        if user.is_empty() {
            resp(&mut out, &[b"AUTH", pass.as_bytes()]);
        } else {
            resp(&mut out, &[b"AUTH", user.as_bytes(), pass.as_bytes()]);
        }
        expect += 1;
    }
    if resp3 {
        resp(&mut out, &[&b"HELLO"[..], b"3"]);
        expect += 1;
    }
    resp(&mut out, &[b"ABACUS.LOCAL"]);
    expect += 1;
    let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
    resp(&mut out, &argv);
    s.write_all(&out).await.map_err(|e| format!("write error: {e}"))?;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut at = 0;
    let mut last = None;
    while expect > 0 {
        match parse_frame(&buf[at..]) {
            Ok(Some((f, used))) => {
                expect -= 1;
                if let Frame::Error(e) = &f {
                    return Err(String::from_utf8_lossy(e).into_owned());
                }
                last = Some((at, at + used));
                at += used;
                continue;
            }
            Ok(None) => {}
            Err(e) => return Err(format!("bad reply: {e}")),
        }
        let mut chunk = [0u8; 64 * 1024];
        let n = s.read(&mut chunk).await.map_err(|e| format!("read error: {e}"))?;
        if n == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let (a, b) = last.ok_or("no reply")?;
    Ok(Bytes::copy_from_slice(&buf[a..b]))
}

use crate::replication::push_resp as resp;

/// The rows of one reply (an array, a map or a set of rows, each keyed by a series' name),
/// as the shards' parts are, to merge with them in key order. A RESP2 row is an array whose
/// first element is the key, or the key itself; a RESP3 map's row is its key and value.
pub fn rows(reply: &[u8]) -> Result<Rows, Frame> {
    let bad = || Frame::error("ERR a node's part of the cluster-wide query is malformed");
    let kind = *reply.first().ok_or_else(bad)?;
    let line = reply.iter().position(|&b| b == b'\n').ok_or_else(bad)?;
    let n: usize = std::str::from_utf8(&reply[1..line.saturating_sub(1)]).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let mut at = line + 1;
    let mut out = Rows::default();
    let next = |at: &mut usize| -> Result<(Frame, usize, usize), Frame> {
        let (f, used) = parse_frame(&reply[*at..]).ok().flatten().ok_or_else(bad)?;
        let start = *at;
        *at += used;
        Ok((f, start, *at))
    };
    for _ in 0..n {
        let (key, start, end) = match kind {
            b'%' => {
                let (k, start, _) = next(&mut at)?;
                let (_, _, end) = next(&mut at)?;
                (k, start, end)
            }
            b'*' | b'~' => {
                let (f, start, end) = next(&mut at)?;
                match f {
                    Frame::Array(mut v) if !v.is_empty() => (v.swap_remove(0), start, end),
                    other => (other, start, end),
                }
            }
            _ => return Err(bad()),
        };
        let Frame::Bulk(key) = key else { return Err(bad()) };
        let r = out.start(&key);
        out.buf.extend_from_slice(&reply[start..end]);
        out.end(r);
    }
    Ok(out)
}

/// The samples of a series in a RESP3 TS.MRANGE reply: `[[ts, value], ...]`.
pub fn samples(f: &Frame) -> Option<Vec<(u64, f64)>> {
    let Frame::Array(v) = f else { return None };
    v.iter()
        .map(|s| match s {
            Frame::Array(p) if p.len() == 2 => {
                let t = match &p[0] {
                    Frame::Integer(t) => u64::try_from(*t).ok()?,
                    _ => return None,
                };
                let x = match &p[1] {
                    Frame::Double(x) | Frame::Score(x) => *x,
                    Frame::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok()?,
                    _ => return None,
                };
                Some((t, x))
            }
            _ => None,
        })
        .collect()
}
