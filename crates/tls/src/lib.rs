//! TLS for every link Redis encrypts: client connections, replication, the cluster bus.
//!
//! What it is for: turning Redis 7.0's `tls-*` parameters ([`Settings`]) into rustls
//! configurations (`build.rs`), holding the current ones so that a CONFIG SET of a
//! certificate swaps them for new connections without a restart ([`Tls`]), counting what
//! happened to handshakes (INFO), and one stream type for a plaintext or encrypted socket
//! ([`Stream`], `stream.rs`), so that connection code is written once.
//!
//! The blocking client side of Abacus's own tools (`abacus ingest`, `export`, `bench`) with
//! redis-cli's options is here too ([`ClientOptions`], `client.rs`), so that no tool has its
//! own TLS code.
//!
//! What it is not for: deciding which listener or link uses TLS, logging, timeouts: the
//! server does (its `tls.rs`). No server types here, no I/O but reading the files named by
//! the parameters.
//!
//! Why rustls and not OpenSSL: no C library to link or keep patched, and the handshake and
//! encryption run inside the connection's own task on its worker thread (tokio-rustls), so a
//! slow or hostile peer costs that task only. The `ring` provider: it builds with a C
//! compiler only (aws-lc-rs needs cmake and a long C build).
//!
//! Redis's behaviour kept: peer certificates are checked against the CA (chain and dates) but
//! not against a host name, as Redis's OpenSSL setup (SSL_VERIFY_PEER without a host check).
//! A client certificate does not authenticate an ACL user (Redis 7.0 neither): AUTH is
//! still required where a password is set.

#![forbid(unsafe_code)]

mod build;
pub mod client;
mod session;
mod settings;
mod stream;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

pub use build::{build, Configs};
pub use client::{BlockingStream, ClientOptions};
pub use settings::{AuthClients, Settings};
pub use stream::Stream;
pub use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The name a client link sends in its ClientHello (SNI) when it has no host name: the
/// server does not check it against its certificate (see the crate comment).
pub fn server_name(host: &str) -> rustls_pki_types::ServerName<'static> {
    match rustls_pki_types::ServerName::try_from(host.to_string()) {
        Ok(n) => n,
        Err(_) => rustls_pki_types::ServerName::try_from("abacus").expect("a valid DNS name"),
    }
}

/// The TLS configurations in use and the handshake counters: one per server, built at start
/// and replaced as a whole by [`Tls::install`] (certificate rotation). A connection takes the
/// configuration current when it starts and keeps it.
#[derive(Default)]
pub struct Tls {
    current: RwLock<Option<Configs>>,
    pub counters: Counters,
}

/// What INFO shows of TLS (section stats).
#[derive(Default)]
pub struct Counters {
    /// Handshakes completed on a listener.
    pub handshakes_total: AtomicU64,
    /// Handshakes that failed: not TLS (a plaintext client), an untrusted, expired or
    /// missing client certificate, no common protocol or cipher.
    pub handshake_failures_total: AtomicU64,
    /// Handshakes not completed within `tls-handshake-timeout`.
    pub handshake_timeouts_total: AtomicU64,
    /// Successful reloads of the certificates (CONFIG SET of a `tls-*` parameter).
    pub reloads_total: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

impl Tls {
    /// Makes `configs` the ones new connections use.
    pub fn install(&self, configs: Configs) {
        *self.current.write() = Some(configs);
    }

    /// Whether a configuration is installed (some `tls-*` link is on).
    pub fn is_configured(&self) -> bool {
        self.current.read().is_some()
    }

    /// The server side of the current configuration, for one accepted connection.
    pub fn acceptor(&self) -> Option<TlsAcceptor> {
        self.current.read().as_ref().map(|c| TlsAcceptor::from(c.server.clone()))
    }

    /// The client side of the current configuration, for one outgoing link (a replica to its
    /// primary, the cluster bus, MIGRATE).
    pub fn connector(&self) -> Option<TlsConnector> {
        self.current.read().as_ref().and_then(|c| c.client.clone()).map(TlsConnector::from)
    }
}

/// Reads a whole file named by a parameter, with the parameter in the error.
fn read(param: &str, path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{param}: cannot read '{path}': {e}"))
}

pub(crate) use read as read_param_file;
pub(crate) type ArcServer = Arc<rustls::ServerConfig>;
pub(crate) type ArcClient = Arc<rustls::ClientConfig>;
