//! Where the server uses TLS (`abacus-tls` builds the configurations): the `tls-port`
//! listeners' handshakes, CONFIG SET's reload of the certificates (rotation), outgoing links
//! (a replica to its primary with `tls-replication`, the cluster bus with `tls-cluster`) and
//! INFO's counters.
//!
//! The handshake runs in the new connection's own task on the worker thread the acceptor
//! dealt it to, bounded by `tls-handshake-timeout`: the acceptor thread only accepts, and a
//! client that sends nothing, or plaintext, costs its task a timer and a few bytes, never a
//! shard or another client. What fails (not TLS, an untrusted or expired client certificate,
//! no common version or cipher, a timeout) is logged, counted, and the socket closed.
//!
//! Rotation: each connection takes the configuration current when it is accepted (an
//! `Arc`), so a CONFIG SET of `tls-cert-file` builds a new generation from the files and swaps
//! it in; connections already open keep theirs. A file that cannot be read or used fails the
//! CONFIG SET with Redis's error and the old generation stays.

use std::net::SocketAddr;
use std::time::Duration;

use abacus_engine::config::Config;
use abacus_engine::param;
use abacus_tls::{AuthClients, Counters, Settings, Stream, Tls};

/// The `tls-*` parameters as they would be after setting `pairs` (CONFIG SET's staged
/// values): what a reload is built from before anything is committed.
pub fn settings(config: &Config, pairs: &[(String, String)]) -> Settings {
    let get = |name: &str, id: abacus_engine::config::ParamId| -> String {
        pairs.iter().rev().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone()).unwrap_or_else(|| config.get(id))
    };
    let yes = |v: String| v.eq_ignore_ascii_case("yes");
    Settings {
        cert_file: get("tls-cert-file", param!("tls-cert-file")),
        key_file: get("tls-key-file", param!("tls-key-file")),
        key_file_pass: get("tls-key-file-pass", param!("tls-key-file-pass")),
        client_cert_file: get("tls-client-cert-file", param!("tls-client-cert-file")),
        client_key_file: get("tls-client-key-file", param!("tls-client-key-file")),
        client_key_file_pass: get("tls-client-key-file-pass", param!("tls-client-key-file-pass")),
        dh_params_file: get("tls-dh-params-file", param!("tls-dh-params-file")),
        ca_cert_file: get("tls-ca-cert-file", param!("tls-ca-cert-file")),
        ca_cert_dir: get("tls-ca-cert-dir", param!("tls-ca-cert-dir")),
        auth_clients: AuthClients::from_name(&get("tls-auth-clients", param!("tls-auth-clients")).to_ascii_lowercase()),
        protocols: get("tls-protocols", param!("tls-protocols")),
        ciphers: get("tls-ciphers", param!("tls-ciphers")),
        ciphersuites: get("tls-ciphersuites", param!("tls-ciphersuites")),
        prefer_server_ciphers: yes(get("tls-prefer-server-ciphers", param!("tls-prefer-server-ciphers"))),
        session_caching: yes(get("tls-session-caching", param!("tls-session-caching"))),
        session_cache_size: get("tls-session-cache-size", param!("tls-session-cache-size")).parse().unwrap_or(20480),
        session_cache_timeout_s: get("tls-session-cache-timeout", param!("tls-session-cache-timeout")).parse().unwrap_or(300),
        needs_ca: yes(get("tls-replication", param!("tls-replication"))) || yes(get("tls-cluster", param!("tls-cluster"))),
    }
}

/// Whether any link uses TLS with these values (as Redis, which sets TLS up only then).
fn wanted(config: &Config, pairs: &[(String, String)]) -> bool {
    let get = |name: &str, id: abacus_engine::config::ParamId| -> String {
        pairs.iter().rev().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone()).unwrap_or_else(|| config.get(id))
    };
    get("tls-port", param!("tls-port")) != "0"
        || get("tls-replication", param!("tls-replication")).eq_ignore_ascii_case("yes")
        || get("ingest-tls", param!("ingest-tls")).eq_ignore_ascii_case("yes")
        || get("metrics-tls", param!("metrics-tls")).eq_ignore_ascii_case("yes")
        || get("tls-cluster", param!("tls-cluster")).eq_ignore_ascii_case("yes")
}

/// At start: the TLS configuration, if any link uses TLS. An error stops the start.
pub fn at_startup(config: &Config) -> Result<Tls, String> {
    let tls = Tls::default();
    if wanted(config, &[]) {
        let configs = abacus_tls::build(&settings(config, &[])).map_err(|e| format!("Failed to configure TLS: {e}"))?;
        tls.install(configs);
    }
    Ok(tls)
}

/// CONFIG SET, once `pairs` are set: when they touch a `tls-*` parameter and TLS is in use,
/// builds the new generation; an error installs nothing (the caller puts the old values
/// back). Returns what to install.
pub fn stage(tls: &Tls, config: &Config, pairs: &[(String, String)]) -> Result<Option<abacus_tls::Configs>, String> {
    // As Redis (its `applyTlsCfg`): a parameter of the configuration rebuilds it when some
    // link uses TLS after the change; `tls-auth-clients`, which Redis reads per connection
    // and so never refuses, rebuilds only a configuration in use (rustls keeps the client
    // check in it).
    let lower: Vec<String> = pairs.iter().map(|(n, _)| n.to_ascii_lowercase()).collect();
    const NO_REBUILD: &[&str] = &["tls-port", "tls-handshake-timeout", "tls-auth-clients"];
    // `ingest-tls` / `metrics-tls` turned on while no link used TLS: the configuration is
    // built now (a bad file refuses the CONFIG SET), as a first `tls-*` link would need.
    let applied = lower.iter().position(|n| {
        (n.starts_with("tls-") && !NO_REBUILD.contains(&n.as_str())) || (!tls.is_configured() && (n == "ingest-tls" || n == "metrics-tls"))
    });
    let auth = lower.iter().position(|n| n == "tls-auth-clients");
    // The error names the parameter as Redis does: its own (lowercase) name.
    let name = match (applied, auth) {
        (Some(i), _) if wanted(config, pairs) => &lower[i],
        (None, Some(i)) if tls.is_configured() => &lower[i],
        _ => return Ok(None),
    };
    match abacus_tls::build(&settings(config, pairs)) {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            tracing::warn!("Failed to update TLS configuration: {e}");
            Err(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - Unable to update TLS configuration. Check server logs."))
        }
    }
}

/// Installs a generation built by [`stage`].
pub fn commit(tls: &Tls, configs: abacus_tls::Configs) {
    tls.install(configs);
    Counters::add(&tls.counters.reloads_total);
    tracing::info!("TLS configuration reloaded: new connections use the new certificates");
}

/// The server side of a handshake on an accepted socket (a `tls-port` client, a cluster bus
/// link), bounded by `timeout`: the encrypted stream, or None after a log line and a count.
/// `link` names the listener in the log.
pub async fn handshake(tls: &Tls, stream: tokio::net::TcpStream, addr: SocketAddr, timeout: Duration, link: &str) -> Option<Stream> {
    let Some(acceptor) = tls.acceptor() else {
        tracing::warn!("Error accepting a {link} connection: TLS is not configured (addr={addr})");
        return None;
    };
    match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
        Ok(Ok(s)) => {
            Counters::add(&tls.counters.handshakes_total);
            Some(Stream::Server(Box::new(s)))
        }
        Ok(Err(e)) => {
            Counters::add(&tls.counters.handshake_failures_total);
            tracing::warn!("Error accepting a {link} connection: {e} (addr={addr})");
            None
        }
        Err(_) => {
            Counters::add(&tls.counters.handshake_timeouts_total);
            tracing::warn!("Error accepting a {link} connection: TLS handshake timed out after {} ms (addr={addr})", timeout.as_millis());
            None
        }
    }
}

/// Opens an outgoing link to `host:port`, over TLS when `use_tls`: a replica's link to its
/// primary, a MIGRATE target, the cluster bus. The peer's certificate must chain to the CA
/// (its name is not checked, as Redis).
pub async fn connect(tls: &Tls, host: &str, port: u16, use_tls: bool, timeout: Duration) -> Result<Stream, String> {
    let tcp = tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port)))
        .await
        .map_err(|_| "connection timed out".to_string())?
        .map_err(|e| e.to_string())?;
    if !use_tls {
        return Ok(Stream::Plain(tcp));
    }
    let connector = tls.connector().ok_or("TLS is not configured (tls-cert-file, tls-key-file, tls-ca-cert-file)")?;
    let s = tokio::time::timeout(timeout, connector.connect(abacus_tls::server_name(host), tcp))
        .await
        .map_err(|_| "TLS handshake timed out".to_string())?
        .map_err(|e| format!("TLS handshake failed: {e}"))?;
    Ok(Stream::Client(Box::new(s)))
}

/// INFO stats lines.
pub fn info_stats(tls: &Tls) -> String {
    let c = &tls.counters;
    format!(
        "tls_handshakes:{}\r\ntls_handshake_failures:{}\r\ntls_handshake_timeouts:{}\r\ntls_reloads:{}\r\n",
        Counters::get(&c.handshakes_total),
        Counters::get(&c.handshake_failures_total),
        Counters::get(&c.handshake_timeouts_total),
        Counters::get(&c.reloads_total),
    )
}
