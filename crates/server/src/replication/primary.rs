//! The primary's side of one replica's link: the connection that sent PSYNC.
//!
//! PSYNC's handler only records the request; once the connection's earlier replies are out,
//! its socket loop hands the socket here ([`serve`]), and it stays a replica link until it
//! closes: `+CONTINUE` and the missed bytes from the backlog, or `+FULLRESYNC`, the snapshot
//! as a bulk and the replica's queue after it. From then on this task writes the replica's
//! queue to the socket and reads its `REPLCONF ACK`s. CLIENT KILL TYPE replica (or slave)
//! ends it like any client's kill; a replica whose queue passes its limit is closed (it will
//! ask again, and resume from the backlog if it can).

use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use abacus_protocol::{BytesMut, Limits, RequestParser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use abacus_tls::Stream;

use super::{state, try_partial, wait_for_snapshot, Psync, ReplicaInfo, Waiter, ONLINE, SEND_BULK};
use crate::conn::Conn;
use abacus_engine::exec::Access;
use abacus_engine::shard::now_ms;

/// What a PSYNC asked for, kept on the connection until its socket is handed over.
pub struct PsyncRequest {
    pub replid: String,
    pub offset: i64,
    pub listening_port: u16,
}

/// Bytes of the snapshot file sent per write.
const FILE_CHUNK_BYTES: usize = 256 * 1024;

/// Serves a replica on `stream` until the link ends. `rbuf` holds what it sent after PSYNC.
pub async fn serve(conn: &mut Conn, mut stream: Stream, mut rbuf: BytesMut, req: PsyncRequest) {
    let repl = state();
    let meta = conn.client.meta.clone();
    meta.repl_kind.store(crate::clients::REPL_REPLICA, Ordering::Release);
    let info = Arc::new(ReplicaInfo {
        client_id: meta.id,
        ip: meta.addr.ip().to_string(),
        port: std::sync::atomic::AtomicU64::new(req.listening_port as u64),
        state: std::sync::atomic::AtomicU8::new(super::WAIT_BGSAVE),
        ack_offset: std::sync::atomic::AtomicU64::new(0),
        ack_ms: std::sync::atomic::AtomicU64::new(now_ms()),
        queued: std::sync::atomic::AtomicU64::new(0),
        overflowed: std::sync::atomic::AtomicBool::new(false),
    });
    if !super::is_replica() {
        // A replica forwards its primary's stream; its own log records never feed one.
        repl.start_feeding(&conn.worker.server.durability);
    }
    let result = async {
        let mut rx = match try_partial(&info, &req.replid, req.offset) {
            Psync::Continue { replid, missed, rx } => {
                tracing::info!("Partial resynchronization request from {} accepted: sending {} bytes of backlog", meta.addr, missed.len());
                stream.send(format!("+CONTINUE {replid}\r\n").as_bytes()).await?;
                stream.send(&missed).await?;
                rx
            }
            Psync::Full => {
                tracing::info!("Full resync requested by replica {}", meta.addr);
                full_sync(conn, &mut stream, &info).await?
            }
        };
        stream_to(&mut stream, &mut rbuf, &mut rx, &info, &meta).await
    }
    .await;
    repl.detach(&info);
    meta.repl_kind.store(0, Ordering::Release);
    if let Err(e) = result {
        tracing::info!("Connection with replica {} lost: {e}", meta.addr);
    }
}

/// A full sync: waits for a snapshot's point in time, sends `+FULLRESYNC`, the file, and
/// returns the queue that has gathered the stream since that point.
async fn full_sync(conn: &mut Conn, stream: &mut Stream, info: &Arc<ReplicaInfo>) -> std::io::Result<tokio::sync::mpsc::UnboundedReceiver<abacus_protocol::Bytes>> {
    let repl = state();
    // The replica's stream queue: bounded by `client-output-buffer-limit replica` (the feeder
    // closes a link whose queued bytes pass it, `Repl::feed`); unbounded only where that limit is
    // set to 0, as in Redis.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (at_tx, at_rx) = tokio::sync::oneshot::channel();
    // On a replica (chained replication), the snapshot's point in time must fall between two
    // applied chunks: the stream is held while the snapshot starts.
    let paused = if super::is_replica() { Some(repl.apply_lock.lock().await) } else { None };
    if paused.is_some() {
        repl.sync_point.store(true, Ordering::Release);
    }
    wait_for_snapshot(Waiter { info: info.clone(), tx, at: at_tx });
    repl.sync_full.fetch_add(1, Ordering::Relaxed);
    // A snapshot of our own; or, if one is running, the next one (which we start when it is
    // done: the running one's point in time came before we asked).
    let started = loop {
        match abacus_engine::snapshot::start(&conn.worker, Access::Free, "a replica's full sync").await {
            Ok(before) => break Ok(before),
            Err(_) => {
                if conn.client.meta.killed.load(Ordering::Acquire) {
                    break Err(std::io::Error::other("killed"));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    if paused.is_some() {
        repl.sync_point.store(false, Ordering::Release);
    }
    drop(paused);
    let before = started?;
    let (offset, name, db) = at_rx.await.map_err(|_| std::io::Error::other("the snapshot did not include this replica"))?;
    let replid = repl.replid();
    let db = db.map(|d| format!(" {d}")).unwrap_or_default();
    stream.send(format!("+FULLRESYNC {replid} {offset}{db}\r\n").as_bytes()).await?;
    // Keep the link alive while the snapshot is written (Redis sends newlines likewise).
    let done = abacus_engine::snapshot::wait(&conn.worker.server.durability, before);
    tokio::pin!(done);
    let result = loop {
        tokio::select! {
            r = &mut done => break r,
            _ = tokio::time::sleep(Duration::from_secs(1)) => stream.send(b"\n").await?,
        }
    };
    result.map_err(std::io::Error::other)?;
    let dir = conn.worker.server.durability.snapshots().map(|s| s.dir.clone()).ok_or_else(|| std::io::Error::other("no snapshots"))?;
    let mut file = std::fs::File::open(dir.join(&name))?;
    let len = file.metadata()?.len();
    info.state.store(SEND_BULK, Ordering::Release);
    tracing::info!("Synchronization with replica {}: sending snapshot {name} ({len} bytes) at offset {offset}", conn.client.meta.addr);
    stream.send(format!("${len}\r\n").as_bytes()).await?;
    let mut buf = vec![0u8; FILE_CHUNK_BYTES];
    let mut left = len;
    while left > 0 {
        let n = file.read(&mut buf[..FILE_CHUNK_BYTES.min(left as usize)])?;
        if n == 0 {
            return Err(std::io::Error::other("the snapshot file ended early"));
        }
        stream.send(&buf[..n]).await?;
        left -= n as u64;
    }
    info.ack_offset.store(offset, Ordering::Release);
    info.ack_ms.store(now_ms(), Ordering::Relaxed);
    info.state.store(ONLINE, Ordering::Release);
    tracing::info!("Synchronization with replica {} succeeded", conn.client.meta.addr);
    Ok(rx)
}

/// Writes the stream to the replica and reads its ACKs, until the link ends.
async fn stream_to(
    stream: &mut Stream,
    rbuf: &mut BytesMut,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<abacus_protocol::Bytes>,
    info: &Arc<ReplicaInfo>,
    meta: &Arc<crate::clients::ClientMeta>,
) -> std::io::Result<()> {
    let repl = state();
    let mut parser = RequestParser::new(Limits::default());
    let killed = meta.kill.notified();
    tokio::pin!(killed);
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut out: Vec<u8> = Vec::new();
    loop {
        if meta.killed.load(Ordering::Acquire) {
            return Err(std::io::Error::other("killed by CLIENT KILL"));
        }
        // ACKs that arrived with the PSYNC or since.
        while let Some(args) = parser.parse(rbuf).map_err(|e| std::io::Error::other(e.to_string()))? {
            let link = crate::command::lookup(&args[0]).is_some_and(|spec| spec.has(crate::command::flags::REPLICATION_LINK));
            if args.len() >= 3 && link && args[1].eq_ignore_ascii_case(b"ack") {
                if let Some(off) = std::str::from_utf8(&args[2]).ok().and_then(|s| s.parse::<u64>().ok()) {
                    info.ack_offset.fetch_max(off, Ordering::AcqRel);
                    info.ack_ms.store(now_ms(), Ordering::Relaxed);
                    meta.last_interaction_ms.store(now_ms(), Ordering::Relaxed);
                    repl.acks.notify_waiters();
                }
            }
        }
        if info.overflowed.load(Ordering::Acquire) {
            return Err(std::io::Error::other("its queue passed client-output-buffer-limit replica"));
        }
        tokio::select! {
            chunk = rx.recv() => {
                let Some(chunk) = chunk else {
                    return Err(std::io::Error::other("detached"));
                };
                out.clear();
                out.extend_from_slice(&chunk);
                let mut taken = chunk.len() as u64;
                while out.len() < FILE_CHUNK_BYTES {
                    match rx.try_recv() {
                        Ok(more) => {
                            out.extend_from_slice(&more);
                            taken += more.len() as u64;
                        }
                        Err(_) => break,
                    }
                }
                wr.write_all(&out).await?;
                // Over TLS the last record may wait in rustls's buffer until flushed.
                wr.flush().await?;
                info.queued.fetch_sub(taken, Ordering::AcqRel);
            }
            n = rd.read_buf(rbuf) => {
                if n? == 0 {
                    return Err(std::io::Error::other("closed by the replica"));
                }
            }
            _ = &mut killed => return Err(std::io::Error::other("killed by CLIENT KILL")),
        }
    }
}
