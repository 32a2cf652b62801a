//! Replication commands: REPLICAOF/SLAVEOF, ROLE, REPLCONF, PSYNC, WAIT, and CONFIG REWRITE
//! (Sentinel sends it in the transaction that repoints a replica).
//!
//! Thin handlers over `replication/`: the state, the stream and the links live there. PSYNC
//! only records the request; the connection's socket loop hands its socket to the primary's
//! side of the link once the replies before it are out (a handler has no socket).

use std::sync::atomic::Ordering;
use std::time::Duration;

use abacus_protocol::{Arg, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use crate::replication::{self, primary::PsyncRequest, MasterAddr};

const G: &str = "server";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("replicaof", 3, ADMIN | STALE, NONE, conn_fn!(|conn, _, call| replicaof(conn, &call.args).await), G, "Configures a server as replica of another, or promotes it to a master.")
        .docs("5.0.0", "O(1)")
        .noscript()
        .no_async_loading()
        .args("
            args type=oneof
              host-port type=block
                host type=string
                port type=integer
              no-one type=block
                no type=pure-token token=NO
                one type=pure-token token=ONE
        "),
    Spec::conn("slaveof", 3, ADMIN | STALE, NONE, conn_fn!(|conn, _, call| replicaof(conn, &call.args).await), G, "Sets a Redis server as a replica of another, or promotes it to being a master.")
        .docs("1.0.0", "O(1)")
        .deprecated("5.0.0", "`REPLICAOF`")
        .noscript()
        .no_async_loading()
        .args("
            args type=oneof
              host-port type=block
                host type=string
                port type=integer
              no-one type=block
                no type=pure-token token=NO
                one type=pure-token token=ONE
        "),
    Spec::conn("role", 1, LOADING | STALE | FAST | ACL_ADMIN, NONE, conn_fn!(|_, _, _| replication::role()), G, "Returns the replication role.")
        .docs("2.8.12", "O(1)")
        .noscript(),
    Spec::conn("replconf", -1, ADMIN | REPLICATION_LINK | LOADING | STALE, NONE, conn_fn!(|conn, _, call| replconf(conn, &call.args)), G, "An internal command for configuring the replication stream.")
        .docs("3.0.0", "O(1)")
        .syscmd()
        .noscript()
        .allow_busy(),
    Spec::conn("psync", -3, ADMIN | NO_MULTI, NONE, conn_fn!(|conn, _, call| psync(conn, &call.args)), G, "An internal command used in replication.")
        .docs("2.8.0", "")
        .noscript()
        .no_async_loading()
        .args("
            replicationid type=string
            offset type=integer
        "),
    Spec::conn("wait", 3, ACL_CONNECTION, NONE, conn_fn!(|conn, _, call| wait(conn, &call.args).await), "generic", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.")
        .docs("3.0.0", "O(1)")
        .tips("request_policy:all_shards response_policy:agg_min")
        .noscript()
        .args("
            numreplicas type=integer
            timeout type=integer
        "),
];

async fn replicaof(conn: &mut Conn, a: &[Arg]) -> Frame {
    if conn.worker.server.cluster.is_some() {
        return err("ERR REPLICAOF not allowed in cluster mode.");
    }
    if a[1].eq_ignore_ascii_case(b"no") && a[2].eq_ignore_ascii_case(b"one") {
        let who = format!("user request from id={} addr={}", conn.client.meta.id, conn.client.meta.addr);
        promote(&conn.worker, &who).await;
        return Frame::ok();
    }
    let port = match parse_i64(&a[2]) {
        Ok(p) if (0..=65535).contains(&p) => p as u16,
        Ok(_) => return err("ERR Invalid master port"),
        Err(e) => return e,
    };
    start_replica(conn, String::from_utf8_lossy(&a[1]).into_owned(), port).await
}

/// Makes this server a replica of `host:port` (REPLICAOF, and CLUSTER REPLICATE in cluster
/// mode): the link starts, and clients blocked in a pop or a stream read are answered and
/// disconnected.
pub async fn start_replica(conn: &mut Conn, host: String, port: u16) -> Frame {
    let who = format!("user request from id={} addr={}", conn.client.meta.id, conn.client.meta.addr);
    replicate_from(&conn.worker, host, port, &who).await
}

/// [`start_replica`] for a caller without a connection (the cluster bus, when this node
/// follows a new primary): `who` says why, for the log.
pub async fn replicate_from(worker: &std::rc::Rc<crate::node::Node>, host: String, port: u16, who: &str) -> Frame {
    let repl = replication::state();
    let _applying = repl.apply_lock.lock().await;
    match replication::become_replica(MasterAddr { host: host.clone(), port }) {
        None => Frame::simple("OK Already connected to specified master"),
        Some(gen) => {
            tracing::info!("REPLICAOF {host}:{port} enabled ({who})");
            replication::replica::spawn(worker.clone(), gen);
            // Clients blocked in a pop or a stream read are answered and disconnected.
            for client in worker.server.clients.all() {
                client.request_unblock(crate::clients::UNBLOCK_ROLE);
            }
            Frame::ok()
        }
    }
}

/// Stops replicating and takes over the history (REPLICAOF NO ONE; in a cluster, a replica
/// that won its election).
pub async fn promote(worker: &std::rc::Rc<crate::node::Node>, who: &str) {
    let repl = replication::state();
    // Stop the link between two applied chunks, then take over the history.
    let _applying = repl.apply_lock.lock().await;
    if replication::become_primary(&worker.server.durability) {
        tracing::info!("MASTER MODE enabled ({who})");
    }
}

fn replconf(conn: &mut Conn, a: &[Arg]) -> Frame {
    if a.len().is_multiple_of(2) {
        return err(ERR_SYNTAX);
    }
    for pair in a[1..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        if opt.eq_ignore_ascii_case(b"listening-port") {
            match parse_i64(val) {
                Ok(p) if (0..=65535).contains(&p) => conn.repl_listening_port = p as u16,
                Ok(_) => return err("ERR value is out of range"),
                Err(e) => return e,
            }
        } else if opt.eq_ignore_ascii_case(b"ack") || opt.eq_ignore_ascii_case(b"getack") {
            // Only meaningful on a replica link (handled there); never answered here.
            return Frame::Seq(Vec::new());
        } else if opt.eq_ignore_ascii_case(b"ip-address") || opt.eq_ignore_ascii_case(b"capa") || opt.eq_ignore_ascii_case(b"rdb-only") || opt.eq_ignore_ascii_case(b"rdb-filter-only") {
        } else {
            return Frame::error(format!("ERR Unrecognized REPLCONF option: {}", String::from_utf8_lossy(opt)));
        }
    }
    Frame::ok()
}

fn psync(conn: &mut Conn, a: &[Arg]) -> Frame {
    if replication::is_replica() {
        // Chained replication: served while the link to our own primary is up.
        if replication::state().link() != replication::LinkState::Connected {
            return err("NOMASTERLINK Can't SYNC while not connected with my master");
        }
    }
    let offset = match parse_i64(&a[2]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    conn.psync = Some(PsyncRequest { replid: String::from_utf8_lossy(&a[1]).into_owned(), offset, listening_port: conn.repl_listening_port });
    // The socket loop writes the answer (+FULLRESYNC or +CONTINUE) once it hands it over.
    Frame::Seq(Vec::new())
}

async fn wait(conn: &mut Conn, a: &[Arg]) -> Frame {
    if replication::is_replica() {
        return err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let n = match parse_i64(&a[1]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let timeout = match parse_i64(&a[2]) {
        Ok(t) if t < 0 => return err("ERR timeout is negative"),
        Ok(t) => t as u64,
        Err(e) => return e,
    };
    // This connection's writes are in the stream once their log commands are flushed.
    conn.worker.shard.borrow_mut().log.flush_deferred();
    let repl = replication::state();
    let target = repl.offset();
    let acked = repl.acked(target);
    if acked as i64 >= n || conn.multi.is_some() {
        return Frame::Integer(acked as i64);
    }
    repl.request_acks(conn.worker.server.durability.log());
    let deadline = (timeout > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout));
    let killed = conn.client.meta.clone();
    loop {
        let notified = repl.acks.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let acked = repl.acked(target);
        if acked as i64 >= n || killed.killed.load(Ordering::Acquire) {
            return Frame::Integer(acked as i64);
        }
        // Woken by every ACK; re-asked every second in case a GETACK went to a replica that
        // was still syncing.
        let step = tokio::time::Instant::now() + Duration::from_secs(1);
        let until = deadline.map_or(step, |d| d.min(step));
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(until) => {
                if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    return Frame::Integer(repl.acked(target) as i64);
                }
                repl.request_acks(conn.worker.server.durability.log());
            }
        }
    }
}

/// CONFIG REWRITE: the config file's lines for runtime-settable parameters get their current
/// values, parameters changed from their defaults and absent from the file are appended;
/// comments and other lines stay. Written to a temporary file and renamed over the original.
pub fn config_rewrite(conn: &mut Conn) -> Frame {
    let cfg = &conn.worker.server.config;
    let Some(path) = cfg.config_file() else {
        return err("ERR The server is running without a config file");
    };
    let quote = |v: &str| if v.is_empty() || v.contains(char::is_whitespace) { format!("\"{v}\"") } else { v.to_string() };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return Frame::error(format!("ERR Rewriting config file: {e}")),
    };
    let mut seen = std::collections::HashSet::new();
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.lines() {
        let t = line.trim();
        let name = t.split_whitespace().next().unwrap_or("");
        match abacus_engine::config::param(name) {
            Some(p) if !t.starts_with('#') && p.mutable && seen.insert(p.name) => {
                out.push_str(&format!("{} {}\n", p.name, quote(&cfg.get_by_name(p.name).unwrap_or_default())));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for p in abacus_engine::config::PARAMS.iter().filter(|p| p.mutable && !seen.contains(p.name)) {
        let v = cfg.get_by_name(p.name).unwrap_or_default();
        if v != p.default {
            out.push_str(&format!("{} {}\n", p.name, quote(&v)));
        }
    }
    let tmp = path.with_extension("rewrite.tmp");
    let result = std::fs::write(&tmp, out.as_bytes()).and_then(|_| std::fs::rename(&tmp, path));
    match result {
        Ok(()) => Frame::ok(),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Frame::error(format!("ERR Rewriting config file: {e}"))
        }
    }
}
