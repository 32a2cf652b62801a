//! The Prometheus metrics endpoint: `metrics-port` (0 = off, the default), on the same
//! addresses as `bind`, answering `GET /metrics` in the text exposition format (0.0.4).
//!
//! Why no HTTP crate: the endpoint serves one fixed path to one kind of client (a scraper
//! every few seconds), and reads one request line; the tokio runtime the server already runs
//! gives the sockets and timeouts, and a hand-written reader of at most [`REQUEST_MAX`]
//! bytes is less code to trust than an HTTP stack's dependencies. Anything but a GET of
//! `/metrics` (or `/`) gets a short 404/405, and every connection closes after its reply.
//!
//! Where the figures come from: the same text INFO builds (`cmd/server.rs::info_text`,
//! `everything` plus the summarizer section), so the endpoint and INFO cannot disagree and a
//! new INFO field appears here without a second list. Each numeric `field:value` becomes
//! `abacus_<field>` (counters, known by name, get `_total`); `db<N>:keys=..` lines become
//! `abacus_db_keys{db="N"}`; commandstats become per-command counters, errorstats
//! per-code counters; and each command's latency histogram (`latency.rs`, merged from every
//! thread) becomes a Prometheus histogram in seconds with power-of-two buckets from 1 µs.
//!
//! HTTPS: with `metrics-tls yes` (Abacus's own parameter) the endpoint speaks TLS with the
//! `tls-*` certificates, client certificates per `tls-auth-clients` as on the TLS port
//! (Prometheus's `tls_config` gives its `ca_file`, `cert_file`, `key_file`); the
//! handshake runs in the connection's task under `tls-handshake-timeout`, and a failure is
//! logged and counted in INFO like the TLS port's.
//!
//! The endpoint's connections are served on worker thread 0 (where the snapshot driver
//! also runs); building the text costs one job per shard, like INFO.

use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use abacus_engine::exec::Access;
use abacus_tls::Stream;
use crate::node::Node;

/// Longest request head read (request line and headers).
pub const REQUEST_MAX: usize = 8192;
/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Most scrapes served at once; more wait for the accept loop.
const CONNECTIONS_MAX: usize = 64;

/// Binds the endpoint's listeners, when `metrics-port` is set.
pub fn bind(config: &abacus_engine::config::Config) -> Result<Vec<std::net::TcpListener>, String> {
    bind_extra_port(config, abacus_engine::param!("metrics-port"))
}

/// Binds the listeners of a side port (`metrics-port`, `ingest-port`) on the `bind`
/// addresses, when the parameter `param` is set (0 = off): the main port's addresses, so the
/// same protected-mode rules hold.
pub fn bind_extra_port(config: &abacus_engine::config::Config, param: abacus_engine::config::ParamId) -> Result<Vec<std::net::TcpListener>, String> {
    let port = config.get_u64(param) as u16;
    let param = param.name();
    if port == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for b in config.get(abacus_engine::param!("bind")).split_whitespace() {
        let ip: std::net::IpAddr = b.trim_start_matches('-').parse().map_err(|_| format!("bind: '{b}' is not an IP address"))?;
        let addr = std::net::SocketAddr::new(ip, port);
        let l = std::net::TcpListener::bind(addr).map_err(|e| format!("{param}: cannot listen on {addr}: {e}"))?;
        l.set_nonblocking(true).map_err(|e| format!("{param}: {e}"))?;
        out.push(l);
    }
    Ok(out)
}

/// Serves one listener until the server stops.
pub async fn serve(worker: Rc<Node>, listener: std::net::TcpListener) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let busy = Rc::new(std::cell::Cell::new(0usize));
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if busy.get() >= CONNECTIONS_MAX {
            continue; // dropped: the scraper retries at its next interval
        }
        busy.set(busy.get() + 1);
        let worker = worker.clone();
        let busy = busy.clone();
        tokio::task::spawn_local(async move {
            // `metrics-tls yes`: HTTPS, the handshake in this task as on the TLS port.
            let config = &worker.server.config;
            let stream = if config.get_bool(abacus_engine::param!("metrics-tls")) {
                let timeout = Duration::from_millis(config.get_u64(abacus_engine::param!("tls-handshake-timeout")));
                crate::tls::handshake(&worker.server.tls, stream, addr, timeout, "metrics").await
            } else {
                Some(Stream::Plain(stream))
            };
            if let Some(stream) = stream {
                let _ = tokio::time::timeout(REQUEST_TIMEOUT * 3, handle(&worker, stream)).await;
            }
            busy.set(busy.get() - 1);
        });
    }
}

async fn handle(worker: &Node, mut stream: Stream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = tokio::time::timeout(REQUEST_TIMEOUT, async {
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&buf[..n]);
            if memchr::memmem::find(&head, b"\r\n\r\n").is_some() || memchr::memmem::find(&head, b"\n\n").is_some() {
                return Ok(true);
            }
            if head.len() > REQUEST_MAX {
                return Ok(false);
            }
        }
    })
    .await;
    if !matches!(complete, Ok(Ok(true))) {
        return respond(&mut stream, "400 Bad Request", "text/plain", b"bad request\n", false).await;
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    if method != "GET" && method != "HEAD" {
        return respond(&mut stream, "405 Method Not Allowed", "text/plain", b"only GET\n", false).await;
    }
    if path != "/metrics" && path != "/" {
        return respond(&mut stream, "404 Not Found", "text/plain", b"see /metrics\n", method == "HEAD").await;
    }
    let Some(body) = render(worker).await else {
        return respond(&mut stream, "503 Service Unavailable", "text/plain", b"shutting down\n", false).await;
    };
    respond(&mut stream, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body.as_bytes(), method == "HEAD").await
}

async fn respond(stream: &mut Stream, status: &str, content_type: &str, body: &[u8], head_only: bool) -> std::io::Result<()> {
    let header = format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    stream.write_all(header.as_bytes()).await?;
    if !head_only {
        stream.write_all(body).await?;
    }
    stream.shutdown().await
}

/// INFO fields that only grow: exposed as counters with a `_total` suffix.
const COUNTERS: &[&str] = &[
    "total_connections_received",
    "total_commands_processed",
    "total_net_input_bytes",
    "total_net_output_bytes",
    "rejected_connections",
    "expired_keys",
    "evicted_keys",
    "keyspace_hits",
    "keyspace_misses",
    "total_error_replies",
    "client_output_buffer_limit_disconnections",
    "migrated_connections",
    "direct_replies",
    "direct_replies_partial",
    "used_cpu_sys",
    "used_cpu_user",
];

/// The exposition text.
pub async fn render(worker: &Node) -> Option<String> {
    let sections = vec!["everything".to_string(), "summarizer".to_string()];
    let info = crate::cmd::server::info_text(worker, Access::Free, sections).await?;
    let hists = worker.run_all(Access::Free, |s| s.rec.commands.histograms()).await?;
    let hists = crate::cmd::latency::merge(hists);
    let mut out = String::with_capacity(16 * 1024);
    info_to_metrics(&info, &mut out);
    let _ = writeln!(out, "# HELP abacus_command_latency_seconds Latency of each command (latency-tracking; a pipelined batch's commands at their run's mean).");
    let _ = writeln!(out, "# TYPE abacus_command_latency_seconds histogram");
    for (name, h) in &hists {
        if h.total == 0 {
            continue;
        }
        for (le, n) in h.prometheus_buckets() {
            let _ = writeln!(out, "abacus_command_latency_seconds_bucket{{cmd=\"{name}\",le=\"{le}\"}} {n}");
        }
        let _ = writeln!(out, "abacus_command_latency_seconds_bucket{{cmd=\"{name}\",le=\"+Inf\"}} {}", h.total);
        // The sum from the buckets' upper bounds would overstate it; commandstats' usec is
        // the exact total.
        let usec = command_usec(&info, name).unwrap_or(0);
        let _ = writeln!(out, "abacus_command_latency_seconds_sum{{cmd=\"{name}\"}} {}", usec as f64 / 1e6);
        let _ = writeln!(out, "abacus_command_latency_seconds_count{{cmd=\"{name}\"}} {}", h.total);
    }
    let _ = writeln!(out, "# HELP abacus_slowlog_length Entries in the slow log.");
    let _ = writeln!(out, "# TYPE abacus_slowlog_length gauge");
    let _ = writeln!(out, "abacus_slowlog_length {}", worker.server.recorders.slowlog.len());
    let _ = writeln!(out, "# HELP abacus_latency_spike_milliseconds Latest latency monitor sample per event (latency-monitor-threshold).");
    let _ = writeln!(out, "# TYPE abacus_latency_spike_milliseconds gauge");
    for (event, e) in worker.server.recorders.latency.events() {
        if let Some(last) = e.samples.back() {
            let _ = writeln!(out, "abacus_latency_spike_milliseconds{{event=\"{event}\"}} {}", last.1);
        }
    }
    Some(out)
}

/// commandstats' usec of `name`, from INFO's text.
fn command_usec(info: &str, name: &str) -> Option<u64> {
    let prefix = format!("cmdstat_{name}:");
    let line = info.lines().find(|l| l.starts_with(&prefix))?;
    let fields = &line[prefix.len()..];
    fields.split(',').find_map(|f| f.strip_prefix("usec=")).and_then(|v| v.parse().ok())
}

/// A metric name from an INFO field: `abacus_` and the field with anything outside
/// `[a-zA-Z0-9_]` made `_`.
fn metric_name(field: &str) -> String {
    let mut s = String::from("abacus_");
    s.extend(field.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }));
    s
}

/// A label value with `\`, `"` and newlines escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// INFO's text as metrics (see the module comment).
pub fn info_to_metrics(info: &str, out: &mut String) {
    let mut section = String::new();
    let mut commands = Vec::new();
    let mut errors = Vec::new();
    let mut dbs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for line in info.lines() {
        let line = line.trim_end();
        if let Some(name) = line.strip_prefix("# ") {
            section = name.to_ascii_lowercase();
            continue;
        }
        let Some((field, value)) = line.split_once(':') else { continue };
        match section.as_str() {
            "commandstats" => {
                if let Some(cmd) = field.strip_prefix("cmdstat_") {
                    commands.push((cmd.to_string(), value.to_string()));
                }
            }
            "errorstats" => {
                if let Some(code) = field.strip_prefix("errorstat_") {
                    errors.push((code.to_string(), value.trim_start_matches("count=").to_string()));
                }
            }
            "keyspace" => dbs.push((field.trim_start_matches("db").to_string(), value.to_string())),
            // Percentiles are in the histograms already.
            "latencystats" => {}
            _ => {
                let Ok(v) = value.parse::<f64>() else { continue };
                if !seen.insert(field.to_string()) {
                    continue; // one family per name, whatever the sections repeat
                }
                if COUNTERS.contains(&field) {
                    let name = metric_name(field.trim_start_matches("total_"));
                    let _ = writeln!(out, "# TYPE {name}_total counter\n{name}_total {v}");
                } else {
                    let name = metric_name(field);
                    let _ = writeln!(out, "# TYPE {name} gauge\n{name} {v}");
                }
            }
        }
    }
    let _ = writeln!(out, "# HELP abacus_db_keys Keys per database.\n# TYPE abacus_db_keys gauge");
    for (db, v) in &dbs {
        if let Some(keys) = v.split(',').find_map(|f| f.strip_prefix("keys=")) {
            let _ = writeln!(out, "abacus_db_keys{{db=\"{}\"}} {keys}", label(db));
        }
    }
    let _ = writeln!(out, "# HELP abacus_db_keys_expiring Keys with a time to live per database.\n# TYPE abacus_db_keys_expiring gauge");
    for (db, v) in &dbs {
        if let Some(n) = v.split(',').find_map(|f| f.strip_prefix("expires=")) {
            let _ = writeln!(out, "abacus_db_keys_expiring{{db=\"{}\"}} {n}", label(db));
        }
    }
    for (metric, field, help) in [
        ("abacus_commands_total", "calls", "Calls per command."),
        ("abacus_commands_duration_seconds_total", "usec", "Time spent per command."),
        ("abacus_commands_rejected_total", "rejected_calls", "Calls refused before running."),
        ("abacus_commands_failed_total", "failed_calls", "Calls that replied an error."),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
        for (cmd, v) in &commands {
            if let Some(n) = v.split(',').find_map(|f| f.strip_prefix(field).and_then(|r| r.strip_prefix('='))) {
                let n: f64 = n.parse().unwrap_or(0.0);
                let n = if field == "usec" { n / 1e6 } else { n };
                let _ = writeln!(out, "{metric}{{cmd=\"{}\"}} {n}", label(cmd));
            }
        }
    }
    let _ = writeln!(out, "# HELP abacus_errors_total Error replies per error code.\n# TYPE abacus_errors_total counter");
    for (code, n) in &errors {
        let _ = writeln!(out, "abacus_errors_total{{err=\"{}\"}} {n}", label(code));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_text_becomes_metrics() {
        let info = "# Server\r\nredis_version:7.0.15\r\nuptime_in_seconds:12\r\n\r\n# Stats\r\ntotal_commands_processed:7\r\nkeyspace_hits:3\r\n\r\n# Commandstats\r\ncmdstat_get:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=1\r\ncmdstat_config|get:calls=1,usec=4,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n\r\n# Errorstats\r\nerrorstat_WRONGTYPE:count=2\r\n\r\n# Keyspace\r\ndb0:keys=4,expires=1,avg_ttl=0\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n";
        let mut out = String::new();
        info_to_metrics(info, &mut out);
        for want in [
            "abacus_uptime_in_seconds 12\n",
            "abacus_commands_processed_total 7\n",
            "abacus_keyspace_hits_total 3\n",
            "abacus_commands_total{cmd=\"get\"} 5\n",
            "abacus_commands_total{cmd=\"config|get\"} 1\n",
            "abacus_commands_duration_seconds_total{cmd=\"get\"} 0.00001\n",
            "abacus_commands_failed_total{cmd=\"get\"} 1\n",
            "abacus_errors_total{err=\"WRONGTYPE\"} 2\n",
            "abacus_db_keys{db=\"0\"} 4\n",
            "abacus_db_keys{db=\"3\"} 1\n",
            "abacus_db_keys_expiring{db=\"0\"} 1\n",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        // A version string is no number: not a metric.
        assert!(!out.contains("redis_version"));
    }
}
