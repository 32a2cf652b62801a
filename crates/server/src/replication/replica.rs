//! The replica's side: the link task that REPLICAOF starts.
//!
//! It connects, does Redis's handshake (PING, AUTH with `masteruser`/`masterauth`,
//! REPLCONF listening-port / ip-address / capa, PSYNC with our replication ID and offset),
//! then either continues (`+CONTINUE`) or receives a full sync (`+FULLRESYNC`): the snapshot
//! goes to a temporary file, is read back whole (every block's checksum and every entry) and
//! only then replaces the data set, under every shard's lock, so no client ever reads a
//! half-loaded or damaged one. A bad stream, a closed link or a refused handshake ends the
//! attempt with a log line and the task tries again a second later, with PSYNC, so a dropped
//! link resumes from the primary's backlog.
//!
//! A real Redis primary (migration) sends an RDB file instead of a snapshot, possibly framed
//! for a diskless transfer (`$EOF:<mark>`); `from_redis.rs` loads it with the same care.
//!
//! The stream is applied by an ordinary connection (`Conn::for_master`): commands take
//! effect in stream order, its replies are discarded. A transaction in the stream is held
//! back until its EXEC has arrived, so the offset only ever counts whole, applied
//! transactions, and the link stops (for REPLICAOF NO ONE or another REPLICAOF) only
//! between two applied chunks.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use abacus_persist::snapshot;
use abacus_protocol::{Args, Bytes, BytesMut, Limits, RequestParser};
use tokio::io::AsyncReadExt;
use abacus_tls::Stream;

use super::{generation, psync_position, push_resp, set_link, state, LinkState, MasterAddr};
use crate::command::flags;
use crate::conn::Conn;
use abacus_engine::exec::Access;
use crate::node::Node;
use abacus_engine::shard::{shard_of, Shard};

/// Commands applied per chunk at most.
const CHUNK_COMMANDS: usize = 1024;
/// Handshake replies longer than this are garbage.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Starts the link task for generation `gen` on this worker's thread.
pub fn spawn(worker: Rc<Node>, gen: u64) {
    tokio::task::spawn_local(run(worker, gen));
}

async fn run(worker: Rc<Node>, gen: u64) {
    loop {
        if generation() != gen {
            return;
        }
        let Some(master) = state().master() else { return };
        match link_once(&worker, gen, &master).await {
            Ok(()) => {}
            Err(e) => tracing::warn!("Replication link with {}:{}: {e}", master.host, master.port),
        }
        if !set_link(gen, LinkState::Connect) {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Reads one reply line (without its CRLF), skipping the newlines a primary sends to keep
/// the link alive.
async fn read_line(s: &mut Stream, rbuf: &mut BytesMut, timeout: Duration) -> Result<String, String> {
    loop {
        while rbuf.first() == Some(&b'\n') {
            let _ = rbuf.split_to(1);
        }
        if let Some(i) = memchr::memchr(b'\n', rbuf) {
            let line = rbuf.split_to(i + 1);
            let text = String::from_utf8_lossy(&line[..i]).trim_end_matches('\r').to_string();
            return Ok(text);
        }
        if rbuf.len() > MAX_LINE_BYTES {
            return Err("the primary sent a line too long for a handshake reply".into());
        }
        match tokio::time::timeout(timeout, s.read_buf(rbuf)).await {
            Err(_) => return Err("timeout waiting for the primary".into()),
            Ok(Err(e)) => return Err(format!("read error: {e}")),
            Ok(Ok(0)) => return Err("the primary closed the connection".into()),
            Ok(Ok(_)) => {}
        }
    }
}

async fn command(s: &mut Stream, rbuf: &mut BytesMut, args: &[&[u8]], timeout: Duration) -> Result<String, String> {
    let mut out = Vec::new();
    push_resp(&mut out, args);
    s.send(&out).await.map_err(|e| format!("write error: {e}"))?;
    read_line(s, rbuf, timeout).await
}

async fn link_once(worker: &Rc<Node>, gen: u64, master: &MasterAddr) -> Result<(), String> {
    let server = worker.server.clone();
    let config = &server.config;
    let timeout = Duration::from_secs(config.get(abacus_engine::param!("repl-timeout")).parse::<u64>().unwrap_or(60).max(1));
    set_link(gen, LinkState::Connecting);
    // `tls-replication yes`: the primary is reached on its TLS port (`tls.rs`).
    let use_tls = config.get_bool(abacus_engine::param!("tls-replication"));
    let mut s = crate::tls::connect(&server.tls, &master.host, master.port, use_tls, timeout).await.map_err(|e| format!("cannot connect: {e}"))?;
    let _ = s.tcp().set_nodelay(true);
    let mut rbuf = BytesMut::with_capacity(64 * 1024);
    // The handshake below is this server speaking as a client to another server (Redis or
    // Abacus): its command names are the protocol's, spelled as Redis's replica sends them,
    // not lookups in this server's table (which says how this server answers them).
    let pong = command(&mut s, &mut rbuf, &[b"PING"], timeout).await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") {
        return Err(format!("error reply to PING: {pong}"));
    }
    let pass = config.get(abacus_engine::param!("masterauth"));
    if !pass.is_empty() {
        let user = config.get(abacus_engine::param!("masteruser"));
        let reply = if user.is_empty() {
            command(&mut s, &mut rbuf, &[b"AUTH", pass.as_bytes()], timeout).await?
        } else {
            command(&mut s, &mut rbuf, &[b"AUTH", user.as_bytes(), pass.as_bytes()], timeout).await?
        };
        if reply.starts_with('-') {
            return Err(format!("unable to AUTH to the primary: {reply}"));
        }
    }
    let announce_port = config.get(abacus_engine::param!("replica-announce-port")).parse::<u16>().unwrap_or(0);
    // Over TLS, the port the primary (and Sentinel) should reach this replica on is its TLS
    // port, as Redis announces it.
    let tls_port = config.get_u64(abacus_engine::param!("tls-port")) as u16;
    let own = if use_tls && tls_port != 0 { tls_port } else { server.port };
    let port = if announce_port > 0 { announce_port } else { own };
    command(&mut s, &mut rbuf, &[b"REPLCONF", b"listening-port", port.to_string().as_bytes()], timeout).await?;
    let ip = config.get(abacus_engine::param!("replica-announce-ip"));
    if !ip.is_empty() {
        command(&mut s, &mut rbuf, &[b"REPLCONF", b"ip-address", ip.as_bytes()], timeout).await?;
    }
    command(&mut s, &mut rbuf, &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"], timeout).await?;
    let (replid, offset, master_db) = psync_position();
    let (id_arg, off_arg) = if offset == 0 { ("?".to_string(), "-1".to_string()) } else { (replid, (offset + 1).to_string()) };
    let reply = command(&mut s, &mut rbuf, &[b"PSYNC", id_arg.as_bytes(), off_arg.as_bytes()], timeout).await?;
    let db;
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut parts = rest.split(' ');
        let (Some(id), Some(off)) = (parts.next(), parts.next().and_then(|o| o.parse::<u64>().ok())) else {
            return Err(format!("bad FULLRESYNC reply: {reply}"));
        };
        if id.len() != 40 {
            return Err(format!("bad replication ID in FULLRESYNC: {id}"));
        }
        set_link(gen, LinkState::Sync);
        tracing::info!("Full resync from primary {}:{}: {id}:{off}", master.host, master.port);
        let path = receive_snapshot(&mut s, &mut rbuf, timeout, gen, &server.durability).await?;
        // A third word: the database the stream is in (a replica serving us: see "Chained").
        let stream_db = parts.next().and_then(|d| d.parse::<usize>().ok()).unwrap_or(0);
        super::set_stream_db(gen, stream_db);
        // A real Redis primary sends an RDB file (migration, `from_redis.rs`).
        let result = if super::from_redis::is_rdb(&path) { super::from_redis::load(worker, &path, gen, id, off).await } else { load(worker, &path, gen, id, off).await };
        let _ = std::fs::remove_file(&path);
        let keys = result?;
        tracing::info!("MASTER <-> REPLICA sync: finished with success ({keys} keys loaded)");
        db = stream_db;
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let id = rest.trim();
        if id.len() == 40 {
            super::switch_id(id);
        }
        tracing::info!("Successful partial resynchronization with primary {}:{}", master.host, master.port);
        db = master_db;
    } else {
        return Err(format!("unexpected reply to PSYNC: {reply}"));
    }
    if !set_link(gen, LinkState::Connected) {
        return Ok(());
    }
    super::touch_io();
    apply_stream(worker, gen, s, rbuf, db).await
}

/// Length of the end mark of Redis's diskless transfer (`$EOF:<mark>`).
const EOF_MARK_BYTES: usize = 40;

/// Receives the snapshot bulk into a temporary file: `$<len>\r\n<bytes>`, or, from a Redis
/// primary's diskless sync (we announce `capa eof`), `$EOF:<40-byte mark>\r\n<bytes><mark>`
/// (Redis sends nothing after the mark until our first ACK).
async fn receive_snapshot(s: &mut Stream, rbuf: &mut BytesMut, timeout: Duration, gen: u64, durability: &abacus_engine::durability::Durability) -> Result<PathBuf, String> {
    let line = read_line(s, rbuf, timeout).await?;
    let bad_header = || format!("bad snapshot header from the primary: {}", &line[..line.len().min(64)]);
    let mark: Option<Vec<u8>> = match line.strip_prefix("$EOF:") {
        Some(m) if m.len() == EOF_MARK_BYTES => Some(m.as_bytes().to_vec()),
        Some(_) => return Err(bad_header()),
        None => None,
    };
    let len: u64 = match &mark {
        Some(_) => u64::MAX,
        None => line.strip_prefix('$').and_then(|l| l.parse().ok()).ok_or_else(bad_header)?,
    };
    let dir = durability.snapshots().map(|g| g.dir.clone()).ok_or("snapshots are not initialised")?;
    let path = dir.join(format!("replica-sync-{gen}.tmp"));
    let mut f = std::fs::File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut left = len;
    let result = async {
        use std::io::Write;
        loop {
            if let Some(mark) = &mark {
                // Everything but the last mark-length bytes is payload; the transfer ends
                // when those are the mark.
                if rbuf.len() > EOF_MARK_BYTES {
                    let take = rbuf.len() - EOF_MARK_BYTES;
                    f.write_all(&rbuf.split_to(take)).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                }
                if rbuf[..] == mark[..] {
                    rbuf.clear();
                    break;
                }
            } else {
                let take = (rbuf.len() as u64).min(left) as usize;
                if take > 0 {
                    f.write_all(&rbuf.split_to(take)).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    left -= take as u64;
                }
                if left == 0 {
                    break;
                }
            }
            match tokio::time::timeout(timeout, s.read_buf(rbuf)).await {
                Err(_) => return Err("timeout receiving the snapshot".to_string()),
                Ok(Err(e)) => return Err(format!("read error receiving the snapshot: {e}")),
                Ok(Ok(0)) if mark.is_some() => return Err("the primary closed the connection before the end of the snapshot".to_string()),
                Ok(Ok(0)) => return Err(format!("the primary closed the connection with {left} bytes of the snapshot missing")),
                Ok(Ok(_)) => super::touch_io(),
            }
        }
        f.sync_data().map_err(|e| format!("cannot sync {}: {e}", path.display()))
    }
    .await;
    if let Err(e) = result {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok(path)
}

/// Checks the received snapshot whole, then replaces the data set with it, holding every
/// shard. Returns the keys loaded.
async fn load(worker: &Rc<Node>, path: &std::path::Path, gen: u64, replid: &str, offset: u64) -> Result<u64, String> {
    // Read back everything first: a damaged transfer must not cost the current data set.
    let checked = path.to_path_buf();
    let (keys, functions) = tokio::task::spawn_blocking(move || -> Result<(u64, Vec<Vec<u8>>), String> {
        let idx = snapshot::index(&checked)?;
        let f = std::fs::File::open(&checked).map_err(|e| e.to_string())?;
        let mut keys = 0;
        for b in &idx.blocks {
            let raw = snapshot::read_block(&f, &checked, b)?;
            keys += snapshot::for_each_entry(&raw, |_| {})?;
        }
        Ok((keys, idx.functions))
    })
    .await
    .map_err(|e| format!("checking the snapshot failed: {e}"))??;
    let n = worker.shards();
    let locks = worker.lock(0..n).await.ok_or("server is shutting down")?;
    // The primary's FUNCTION libraries replace ours, as Redis's full sync does; first, so a
    // library that does not load here leaves the data set as it was.
    abacus_scripting::install_libraries(&worker.server.scripts, functions.into_iter().map(Bytes::from).collect(), crate::node::REDIS_VERSION, crate::node::REDIS_VERSION_NUM)?;
    let p = path.to_path_buf();
    let loaded = worker
        .run_all(Access::Locked(&locks), move |s: &mut Shard| -> Result<u64, String> {
            let olds: Vec<_> = s.dbs.iter_mut().map(|d| d.take_all()).collect();
            abacus_engine::memory::free_later(olds);
            let idx = snapshot::index(&p)?;
            let f = std::fs::File::open(&p).map_err(|e| e.to_string())?;
            let id = s.id;
            let now = abacus_engine::shard::now_ms();
            let mut loaded = 0;
            for b in &idx.blocks {
                let raw = snapshot::read_block(&f, &p, b)?;
                snapshot::for_each_entry(&raw, |d| {
                    if shard_of(d.key, n) == id {
                        if let Some(db) = s.dbs.get_mut(d.db as usize) {
                            db.insert_loaded(d.key, d.entry, now);
                            loaded += 1;
                        }
                    }
                })?;
            }
            Ok(loaded)
        })
        .await
        .ok_or("server is shutting down")?;
    let loaded = loaded.into_iter().collect::<Result<Vec<u64>, String>>()?.into_iter().sum::<u64>();
    if loaded != keys {
        tracing::warn!("{} keys of the primary's snapshot are in databases this server does not have (raise 'databases')", keys - loaded);
    }
    super::finish_full_sync(worker, &locks, gen, replid, offset, "a full sync from the primary").await?;
    drop(locks);
    Ok(loaded)
}

/// Applies the primary's stream until the link ends or REPLICAOF changes.
async fn apply_stream(worker: &Rc<Node>, gen: u64, mut s: Stream, mut rbuf: BytesMut, db: usize) -> Result<(), String> {
    let repl = state();
    let peer = s.tcp().peer_addr().map_err(|e| e.to_string())?;
    let mut conn = Conn::for_master(worker.clone(), peer, s.tcp().local_addr().unwrap_or(peer), db).ok_or("max number of clients reached")?;
    let meta = conn.client.meta.clone();
    let mut parser = RequestParser::new(Limits { max_bulk_len: worker.server.config.proto_max_bulk_len() as usize, ..Limits::default() });
    let mut ack_at = tokio::time::Instant::now();
    // A transaction being received: its commands and bytes, applied once EXEC arrives.
    let mut open_tx: Option<(Vec<Args>, Vec<u8>)> = None;
    let mut calls: Vec<Args> = Vec::new();
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        if generation() != gen {
            return Ok(());
        }
        if meta.killed.load(Ordering::Acquire) {
            return Err("link killed by CLIENT KILL".into());
        }
        // Parse what arrived: whole commands (and whole transactions) are applied in chunks.
        let mut getack = false;
        loop {
            let args = match parser.parse(&mut rbuf) {
                Ok(Some(a)) => a,
                Ok(None) => break,
                Err(e) => return Err(format!("protocol error in the primary's stream: {e}")),
            };
            if args.is_empty() {
                continue;
            }
            let mut enc = Vec::new();
            push_resp(&mut enc, &args);
            // What the table says of the command decides how the stream treats it: the
            // link's own messages (REPLCONF), a transaction's bounds (MULTI, EXEC/DISCARD).
            let table_flags = crate::command::lookup(&args[0]).map_or(0, |spec| spec.flags);
            if args.len() >= 2 && table_flags & flags::REPLICATION_LINK != 0 {
                // REPLCONF GETACK *: answered once everything before it is applied.
                if args[1].eq_ignore_ascii_case(b"getack") {
                    getack = true;
                }
                apply(gen, &mut conn, &mut calls, &mut bytes, &s).await;
                repl_feed(gen, &conn, &enc);
                continue;
            }
            if let Some((tx_calls, tx_bytes)) = &mut open_tx {
                tx_calls.push(args);
                tx_bytes.extend_from_slice(&enc);
                if table_flags & flags::TX_END != 0 {
                    let (c, b) = open_tx.take().unwrap_or_default();
                    calls.extend(c);
                    bytes.extend_from_slice(&b);
                }
            } else if table_flags & flags::TX_BEGIN != 0 {
                open_tx = Some((vec![args], enc));
            } else {
                calls.push(args);
                bytes.extend_from_slice(&enc);
            }
            if calls.len() >= CHUNK_COMMANDS {
                apply(gen, &mut conn, &mut calls, &mut bytes, &s).await;
            }
        }
        apply(gen, &mut conn, &mut calls, &mut bytes, &s).await;
        let now = tokio::time::Instant::now();
        if getack || now >= ack_at {
            send_ack(&mut s).await?;
            ack_at = now + Duration::from_secs(1);
        }
        let relink = repl.relink.notified();
        let killed = meta.kill.notified();
        tokio::select! {
            n = s.read_buf(&mut rbuf) => {
                match n {
                    Ok(0) => return Err("the primary closed the connection".into()),
                    Ok(_) => super::touch_io(),
                    Err(e) => return Err(format!("read error: {e}")),
                }
            }
            _ = tokio::time::sleep_until(ack_at) => {}
            _ = relink => {}
            _ = killed => {}
        }
    }
}

/// Applies the gathered commands through the master's connection; their bytes then count.
async fn apply(gen: u64, conn: &mut Conn, calls: &mut Vec<Args>, bytes: &mut Vec<u8>, s: &Stream) {
    if calls.is_empty() {
        return;
    }
    let _applying = state().apply_lock.lock().await;
    if generation() != gen {
        // REPLICAOF changed while the chunk was read: it is not applied, nor counted.
        calls.clear();
        bytes.clear();
        return;
    }
    // The commands' names, to report one that fails here (the primary executed it).
    let names: Vec<Vec<u8>> = calls.iter().map(|c| c[0].to_vec()).collect();
    conn.process(calls, s, false).await;
    let errors = super::from_redis::count_errors(&names, conn.output());
    if errors > 0 {
        state().apply_errors.fetch_add(errors, Ordering::Relaxed);
    }
    conn.discard_output();
    // The chunk's position goes to the log after its effects (see "Restarts" in mod.rs).
    {
        let mut shard = conn.worker.shard.borrow_mut();
        super::log_applied_position(&mut shard.log, bytes.len(), conn.client.db);
        shard.log.flush_pending();
    }
    repl_feed(gen, conn, bytes);
    bytes.clear();
}

fn repl_feed(gen: u64, conn: &Conn, bytes: &[u8]) {
    super::feed_applied(gen, bytes, conn.client.db);
}

async fn send_ack(s: &mut Stream) -> Result<(), String> {
    let off = state().offset().to_string();
    let mut out = Vec::new();
    push_resp(&mut out, &[&b"REPLCONF"[..], b"ACK", off.as_bytes()]);
    s.send(&out).await.map_err(|e| format!("write error: {e}"))
}
