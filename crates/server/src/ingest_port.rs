//! The summarizer's raw line port: `ingest-port` (0 = off, the default), on the same
//! addresses as `bind`, for producers that can only write lines (a log shipper, `nc`).
//!
//! Why a second port rather than a mode of the main one: a producer writing bare CSV or JSON
//! lines speaks no protocol at all, so nothing on the Redis port could tell its first line
//! from a command. The rules of the main port apply: the same `bind` addresses (so the same
//! protected-mode check at start-up), and the same password: when the main port would answer
//! NOAUTH, the first line must be `AUTH password` or `AUTH user password`, checked as AUTH
//! checks it, and the user must be allowed SUMMARY.INGEST. Then an optional `FEED name` line
//! names the feed (without it, the rules must have exactly one feed). Everything after that is
//! feed lines.
//!
//! Each connection is served on a worker thread (every worker accepts from the listener, so
//! parsing spreads over them as the main port's connections do) and runs the lines through
//! SUMMARY.INGEST's own code (`cmd/summary.rs::ingest_on`): one batch per read of complete
//! lines (at most [`READ_BYTES`]), the next read only once the batch is applied, so a fast
//! producer is slowed by TCP's flow control (back-pressure), and the queue's `when_full` rule
//! applies as for any batch. A line longer than the feed's `max_line_bytes` is rejected
//! (counted, kept by SUMMARY.REJECTS with its line number) and skipped to its end without being
//! buffered. The server writes nothing while lines flow; when the producer closes its side, it
//! answers `+OK <events> <rejected>` (with `appendfsync always`, once the log holds them on
//! disk) and closes. An error (no rules, an unknown feed, a write the server refuses) is one
//! `-ERR ...` line, then the connection closes.
//!
//! TLS: with `ingest-tls yes` (Abacus's own parameter; Redis has no such port) the port
//! speaks TLS with the `tls-*` certificates, as the TLS port does (client certificates per
//! `tls-auth-clients`, the handshake in the connection's task under `tls-handshake-timeout`,
//! failures logged and counted in INFO). The producer ends its stream with close_notify (or
//! by closing TCP, [`end_is_eof`]) and reads the `+OK` line as before.
//!
//! Limits, as the main port's: each connection is a client of the registry (it counts towards
//! `maxclients`, shows in CLIENT LIST, CLIENT KILL closes it between batches); the header
//! lines must arrive within [`HEADER_TIMEOUT`]; the `timeout` setting closes an idle
//! producer; the read buffer is allocated only once the header is accepted. Before each batch
//! the checks a write on the main port passes: loading, a read-only or stale replica,
//! `min-replicas-to-write`, and CLIENT PAUSE (a paused server holds the batch).

use std::rc::Rc;

use abacus_protocol::{Args, Bytes, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use abacus_engine::exec::Access;
use abacus_tls::Stream;
use crate::node::Node;

/// Bytes read at most per batch (more where a feed's `max_line_bytes` is larger).
pub const READ_BYTES: usize = 256 * 1024;
/// Longest `AUTH` or `FEED` line.
const HEADER_LINE_BYTES: usize = 1024;
/// How long a new connection may take to send its header lines (or its first line).
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Binds the port's listeners, when `ingest-port` is set.
pub fn bind(config: &abacus_engine::config::Config) -> Result<Vec<std::net::TcpListener>, String> {
    crate::metrics::bind_extra_port(config, abacus_engine::param!("ingest-port"))
}

/// Serves one listener (each worker thread serves its own handle of it) until the server stops.
pub async fn serve(worker: Rc<Node>, listener: std::net::TcpListener) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let worker = worker.clone();
        tokio::task::spawn_local(async move {
            let server = worker.server.clone();
            let laddr = stream.local_addr().unwrap_or(addr);
            // `ingest-tls yes`: the handshake first, in this task, bounded as on the TLS
            // port; a failure is logged and counted (INFO) and closes the socket.
            let mut stream = if server.config.get_bool(abacus_engine::param!("ingest-tls")) {
                let timeout = std::time::Duration::from_millis(server.config.get_u64(abacus_engine::param!("tls-handshake-timeout")));
                match crate::tls::handshake(&server.tls, stream, addr, timeout, "ingest-port").await {
                    Some(s) => s,
                    None => return,
                }
            } else {
                Stream::Plain(stream)
            };
            let Some(meta) = server.clients.register(addr, laddr, server.config.maxclients() as usize, abacus_engine::shard::now_ms()) else {
                let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                return;
            };
            if let Err(message) = handle(&worker, &mut stream, addr, &meta).await {
                let _ = stream.write_all(format!("-{message}\r\n").as_bytes()).await;
            }
            let _ = stream.shutdown().await;
            server.clients.unregister(meta.id);
        });
    }
}

/// The end of a producer's stream: over TLS, its close_notify (a read of 0) or, as many
/// producers close the TCP connection without one, a bare end of the socket (rustls's
/// UnexpectedEof), which a plaintext producer's end is too. Every record before it was
/// authenticated, so what was read is what the producer sent.
fn end_is_eof(r: std::io::Result<usize>) -> std::io::Result<usize> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
        r => r,
    }
}

/// Reads one header line (`AUTH ...`, `FEED ...`) if the buffered input starts with that
/// word; returns its words, and drops it from `buf`.
async fn header(stream: &mut Stream, buf: &mut Vec<u8>, word: &str) -> Result<Option<Vec<String>>, String> {
    loop {
        let starts = buf.len() > word.len() && buf[..word.len()].eq_ignore_ascii_case(word.as_bytes()) && buf[word.len()] == b' ';
        if buf.len() > word.len() && !starts {
            return Ok(None);
        }
        if let Some(end) = buf.iter().position(|&b| b == b'\n') {
            if !starts {
                return Ok(None);
            }
            let line = String::from_utf8_lossy(&buf[..end]).trim_end_matches('\r').to_string();
            buf.drain(..=end);
            return Ok(Some(line.split_whitespace().map(String::from).collect()));
        }
        if buf.len() > HEADER_LINE_BYTES {
            return Err(format!("ERR {word} line longer than {HEADER_LINE_BYTES} bytes"));
        }
        let mut chunk = [0u8; 1024];
        let n = end_is_eof(stream.read(&mut chunk).await).map_err(|e| format!("ERR {e}"))?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// [`header`] within what is left of [`HEADER_TIMEOUT`].
async fn header_by(deadline: tokio::time::Instant, stream: &mut Stream, buf: &mut Vec<u8>, word: &str) -> Result<Option<Vec<String>>, String> {
    tokio::time::timeout_at(deadline, header(stream, buf, word)).await.map_err(|_| format!("ERR no {word} line within {} s", HEADER_TIMEOUT.as_secs()))?
}

/// The checks a write passes on the main port before it runs (`conn/admit.rs`), for one
/// batch: Err with the refusal.
async fn admit_batch(worker: &Node) -> Result<(), String> {
    let server = &worker.server;
    if server.recorders.loading.active() {
        return Err("LOADING Abacus is loading the dataset in memory".into());
    }
    if let Some(Frame::Error(e)) = crate::replication::refuse(&server.config, true, false, false) {
        return Err(String::from_utf8_lossy(&e).into_owned());
    }
    server.pause.wait().await;
    if server.client_pause.is_set() {
        server.client_pause.wait(|| true).await;
    }
    Ok(())
}

async fn handle(worker: &Node, stream: &mut Stream, addr: std::net::SocketAddr, meta: &crate::clients::ClientMeta) -> Result<(), String> {
    let server = &worker.server;
    admit_batch(worker).await?;
    let deadline = tokio::time::Instant::now() + HEADER_TIMEOUT;
    // Small until the header is accepted: an unauthenticated connection holds 1 KiB.
    let mut buf: Vec<u8> = Vec::new();
    let mut user = server.acl.default_user();
    match header_by(deadline, stream, &mut buf, "AUTH").await? {
        Some(words) => {
            let (name, pass) = match &words[1..] {
                [pass] => ("default", pass.as_str()),
                [name, pass] => (name.as_str(), pass.as_str()),
                _ => return Err("ERR syntax error".into()),
            };
            user = server.acl.authenticate(name.as_bytes(), pass.as_bytes()).ok_or("WRONGPASS invalid username-password pair or user is disabled.")?;
        }
        None if server.acl.auth_required() => return Err("NOAUTH Authentication required.".into()),
        None => {}
    }
    let rules = worker.server.summarizer.rules().ok_or("ERR no summarizer rules loaded (start with --summarizer-rules FILE or run SUMMARY.RULES LOAD FILE)")?;
    let feed = match header_by(deadline, stream, &mut buf, "FEED").await? {
        Some(words) if words.len() == 2 => words[1].clone(),
        Some(_) => return Err("ERR syntax error: FEED name".into()),
        None if rules.feeds.len() == 1 => rules.feeds[0].name.clone(),
        None => return Err("ERR the rules have several feeds: name one with a first line FEED <name>".into()),
    };
    let Some(fi) = rules.feed(&feed) else { return Err(format!("ERR no such feed '{feed}'")) };
    let spec = &crate::cmd::summary::INGEST;
    let check = Args::from_vec(vec![Bytes::from_static(b"SUMMARY.INGEST"), Bytes::from(feed.clone()), Bytes::new()]);
    if let Err(denied) = user.check(spec, &check) {
        return Err(denied.error(spec));
    }
    let max_line = rules.feeds[fi].max_line_bytes;
    let capacity = READ_BYTES.max(max_line + 2);
    drop(rules);
    let label = format!("ingest-port {addr}");
    let (mut events, mut rejected, mut line) = (0i64, 0i64, 1u64);
    // Skipping the rest of a line already rejected as too long.
    let mut skipping = false;
    let mut eof = false;
    let idle = match server.config.get_u64(abacus_engine::param!("timeout")) {
        0 => None,
        s => Some(std::time::Duration::from_secs(s)),
    };
    loop {
        if meta.killed.load(std::sync::atomic::Ordering::Acquire) {
            return Err("ERR killed by CLIENT KILL".into());
        }
        if !eof && buf.len() < capacity {
            let at = buf.len();
            buf.resize(capacity, 0);
            let read = stream.read(&mut buf[at..]);
            let n = match idle {
                Some(t) => tokio::time::timeout(t, read).await.map_err(|_| "ERR idle longer than 'timeout'".to_string())?,
                None => read.await,
            };
            let n = end_is_eof(n).map_err(|e| format!("ERR {e}"))?;
            buf.truncate(at + n);
            eof = n == 0;
            meta.last_interaction_ms.store(abacus_engine::shard::now_ms(), std::sync::atomic::Ordering::Relaxed);
        }
        if skipping {
            match buf.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    buf.drain(..=end);
                    skipping = false;
                }
                None => {
                    buf.clear();
                    if eof {
                        break;
                    }
                    continue;
                }
            }
        }
        // The complete lines (at the end of the input, the last one too), or an overlong
        // line's first bytes, which the feed rejects for its length.
        let take = match buf.iter().rposition(|&b| b == b'\n') {
            _ if eof => buf.len(),
            Some(end) => end + 1,
            None if buf.len() > max_line => {
                skipping = true;
                buf.truncate(max_line + 1);
                buf.push(b'\n');
                buf.len()
            }
            None => continue,
        };
        if take == 0 {
            if eof {
                break;
            }
            continue;
        }
        let payload: Vec<u8> = buf.drain(..take).collect();
        let lines = payload.iter().filter(|&&b| b == b'\n').count() as u64 + u64::from(payload.last() != Some(&b'\n'));
        let args = Args::from_vec(vec![Bytes::from_static(b"SUMMARY.INGEST"), Bytes::from(feed.clone()), Bytes::from(payload)]);
        admit_batch(worker).await?;
        match crate::cmd::summary::ingest_on(worker, 0, Access::Free, &args, false, label.clone(), line).await {
            Frame::Array(v) => {
                if let [Frame::Integer(e), Frame::Integer(r)] = v[..] {
                    events += e;
                    rejected += r;
                }
            }
            Frame::Error(e) => return Err(String::from_utf8_lossy(&e).into_owned()),
            _ => {}
        }
        line += lines;
    }
    // With `appendfsync always`, OK only once the batches' log records are on disk, as the
    // main port's replies to writes.
    if let Some(aof) = worker.server.durability.log() {
        if aof.mode() == abacus_engine::aof::Fsync::Always {
            aof.wait_durable(aof.appended()).await;
        }
    }
    stream.write_all(format!("+OK {events} {rejected}\r\n").as_bytes()).await.map_err(|e| format!("ERR {e}"))?;
    Ok(())
}
