//! The blocking client side for Abacus's own tools (`abacus ingest`, `abacus export`,
//! `abacus bench`): one TCP connection, plaintext or TLS, with redis-cli's options
//! ([`ClientOptions`]: `--tls --cacert --cacertdir --cert --key --sni --insecure`).
//!
//! Why blocking and not tokio-rustls: the tools are plain threads over blocking sockets (a
//! reader thread and a writer thread per connection in the bench), and a [`BlockingStream`]
//! is a drop-in for `std::net::TcpStream`: `try_clone` gives another handle to the same
//! connection, so one thread may read while another writes, as with TCP.
//!
//! How two threads share one TLS connection: the rustls state sits behind a mutex held only
//! while bytes are encrypted or decrypted, never across a blocking socket call, so a writer
//! blocked on a full socket does not stop the reader from draining replies (which would
//! deadlock against a server that stops reading while its replies are unread). A second
//! mutex orders the writes of encrypted records on the socket; a third keeps reads whole.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// How long a tool waits for the server's side of the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// redis-cli's TLS options, as the tools take them.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// `--tls`: connect over TLS (the other options need it).
    pub tls: bool,
    /// `--cacert FILE`: CA certificates the server's must chain to.
    pub cacert: Option<PathBuf>,
    /// `--cacertdir DIR`: every certificate in this directory is a CA.
    pub cacertdir: Option<PathBuf>,
    /// `--cert FILE` and `--key FILE`: a client certificate (for `tls-auth-clients yes`).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// `--sni NAME`: the name sent in the ClientHello (default: the host, if a name).
    pub sni: Option<String>,
    /// `--insecure`: do not check the server's certificate at all.
    pub insecure: bool,
}

impl ClientOptions {
    /// The rustls configuration these options make: None without `--tls`. Errors name the
    /// option and the file.
    pub fn config(&self) -> Result<Option<Arc<ClientConfig>>, String> {
        if !self.tls {
            if self.cacert.is_some() || self.cacertdir.is_some() || self.cert.is_some() || self.key.is_some() || self.sni.is_some() || self.insecure {
                return Err("--cacert, --cacertdir, --cert, --key, --sni and --insecure need --tls".into());
            }
            return Ok(None);
        }
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?;
        let builder = if self.insecure {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        } else {
            let roots = Arc::new(self.roots()?);
            let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider).build().map_err(|e| format!("--cacert: {e}"))?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(crate::build::ChainOnly(inner)))
        };
        let config = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => {
                let certs = certs("--cert", c)?;
                let pem = std::fs::read(k).map_err(|e| format!("--key: cannot read '{}': {e}", k.display()))?;
                let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("--key: no private key in '{}': {e}", k.display()))?;
                builder.with_client_auth_cert(certs, key).map_err(|e| format!("--cert / --key: {e}"))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => return Err("--cert and --key go together".into()),
        };
        Ok(Some(Arc::new(config)))
    }

    /// The CAs of `--cacert` and `--cacertdir`; without either, OpenSSL's defaults as
    /// redis-cli uses them (`SSL_CERT_FILE`, else the system bundle).
    fn roots(&self) -> Result<RootCertStore, String> {
        let mut store = RootCertStore::empty();
        let mut add = |opt: &str, path: &std::path::Path, must: bool| -> Result<(), String> {
            match std::fs::read(path) {
                Ok(pem) => {
                    for c in CertificateDer::pem_slice_iter(&pem).flatten() {
                        let _ = store.add(c);
                    }
                    Ok(())
                }
                Err(e) if must => Err(format!("{opt}: cannot read '{}': {e}", path.display())),
                Err(_) => Ok(()),
            }
        };
        if let Some(f) = &self.cacert {
            add("--cacert", f, true)?;
        }
        if let Some(d) = &self.cacertdir {
            let dir = std::fs::read_dir(d).map_err(|e| format!("--cacertdir: cannot read '{}': {e}", d.display()))?;
            for entry in dir.flatten() {
                add("--cacertdir", &entry.path(), false)?;
            }
        }
        if self.cacert.is_none() && self.cacertdir.is_none() {
            let default = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
            add("SSL_CERT_FILE", &default, false)?;
        }
        if store.is_empty() {
            return Err("no CA certificate: give --cacert or --cacertdir (or --insecure)".into());
        }
        Ok(store)
    }

    /// Connects to `host:port`, with TLS when `--tls` (the handshake done here).
    pub fn connect(&self, host: &str, port: u16) -> Result<BlockingStream, String> {
        let config = self.config()?;
        connect(config.as_ref(), self.sni.as_deref(), host, port)
    }
}

/// Connects to `host:port`; over TLS with `config` (from [`ClientOptions::config`], built
/// once for many connections), completing the handshake before returning.
pub fn connect(config: Option<&Arc<ClientConfig>>, sni: Option<&str>, host: &str, port: u16) -> Result<BlockingStream, String> {
    let mut sock = TcpStream::connect((host, port)).map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    let Some(config) = config else {
        return Ok(BlockingStream { sock, tls: None });
    };
    let name = match sni {
        Some(n) => ServerName::try_from(n.to_string()).map_err(|_| format!("--sni: '{n}' is not a valid server name"))?,
        None => crate::server_name(host),
    };
    let mut conn = ClientConnection::new(config.clone(), name).map_err(|e| format!("TLS: {e}"))?;
    // A server that never answers (a plaintext port reading the ClientHello as a command
    // and waiting for its end) fails the handshake instead of hanging the tool.
    let failed = |e: io::Error| {
        let e = if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) { format!("no answer within {} s (not a TLS port?)", HANDSHAKE_TIMEOUT.as_secs()) } else { e.to_string() };
        format!("TLS handshake with {host}:{port} failed: {e}")
    };
    sock.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).map_err(|e| e.to_string())?;
    sock.set_write_timeout(Some(HANDSHAKE_TIMEOUT)).map_err(|e| e.to_string())?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(failed)?;
    }
    // What the handshake sent last (a client Finished under TLS 1.2) may still wait.
    while conn.wants_write() {
        conn.write_tls(&mut sock).map_err(failed)?;
    }
    sock.set_read_timeout(None).map_err(|e| e.to_string())?;
    sock.set_write_timeout(None).map_err(|e| e.to_string())?;
    let shared = Shared { conn: Mutex::new(conn), rd: Mutex::new(RawIn { buf: vec![0; 32 << 10], pos: 0, len: 0, eof: false }), wr: Mutex::new(()) };
    Ok(BlockingStream { sock, tls: Some(Arc::new(shared)) })
}

/// A connection of a tool: plaintext TCP or TLS over it. `Read + Write` as a `TcpStream`;
/// [`BlockingStream::try_clone`] gives another handle to the same connection.
pub struct BlockingStream {
    sock: TcpStream,
    tls: Option<Arc<Shared>>,
}

struct Shared {
    conn: Mutex<ClientConnection>,
    /// Encrypted bytes read from the socket and not yet given to rustls.
    rd: Mutex<RawIn>,
    /// Held while encrypted records go to the socket, so they go in order.
    wr: Mutex<()>,
}

struct RawIn {
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl BlockingStream {
    pub fn try_clone(&self) -> io::Result<BlockingStream> {
        Ok(BlockingStream { sock: self.sock.try_clone()?, tls: self.tls.clone() })
    }

    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.sock.set_nodelay(on)
    }

    /// Bounds each wait for the socket (a read then fails with WouldBlock or TimedOut; what
    /// was read of a TLS record is kept for the next read).
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(t)
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Sends what rustls has to send (records, alerts): the caller holds the connection.
    fn send_pending(&self, t: &Shared, mut conn: MutexGuard<'_, ClientConnection>) -> io::Result<()> {
        if !conn.wants_write() {
            return Ok(());
        }
        let mut out = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut out)?;
        }
        // Order: the socket is taken before the connection is let go.
        let _w = lock(&t.wr);
        drop(conn);
        (&self.sock).write_all(&out)
    }
}

impl Read for BlockingStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(t) = self.tls.clone() else { return self.sock.read(buf) };
        if buf.is_empty() {
            return Ok(0);
        }
        let mut rd = lock(&t.rd);
        loop {
            {
                let mut conn = lock(&t.conn);
                match conn.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if rd.pos < rd.len || rd.eof {
                    if rd.pos == rd.len {
                        // The peer closed TCP and rustls has seen it: no more data.
                        return Ok(0);
                    }
                    let (pos, len) = (rd.pos, rd.len);
                    let n = conn.read_tls(&mut &rd.buf[pos..len])?;
                    rd.pos += n;
                    let processed = conn.process_new_packets();
                    // A reply rustls owes (an alert, a key update) goes out now if no
                    // writer is busy, else with the next write.
                    if conn.wants_write() && t.wr.try_lock().is_ok() {
                        self.send_pending(&t, conn)?;
                    }
                    processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    continue;
                }
            }
            // Nothing buffered: wait for the socket, without holding the connection.
            let n = (&self.sock).read(&mut rd.buf)?;
            rd.pos = 0;
            rd.len = n;
            if n == 0 {
                rd.eof = true;
                let mut conn = lock(&t.conn);
                let _ = conn.read_tls(&mut &[][..]);
                conn.process_new_packets().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                return match conn.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    Err(e) => Err(e),
                };
            }
        }
    }
}

impl Write for BlockingStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(t) = self.tls.clone() else { return self.sock.write(buf) };
        let mut conn = lock(&t.conn);
        let n = conn.writer().write(buf)?;
        self.send_pending(&t, conn)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.tls.clone() {
            None => self.sock.flush(),
            Some(t) => {
                let conn = lock(&t.conn);
                self.send_pending(&t, conn)
            }
        }
    }
}

fn certs(opt: &str, path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{opt}: cannot read '{}': {e}", path.display()))?;
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&pem).collect::<Result<_, _>>().map_err(|e| format!("{opt}: '{}' is not PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{opt}: no certificate in '{}'", path.display()));
    }
    Ok(certs)
}

/// `--insecure`: any certificate is accepted (the handshake's signatures are still checked,
/// so the key exchange is with the holder of the certificate's key).
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>, _: &[u8], _: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A self-signed certificate for 127.0.0.1 valid until 2126 (`openssl req -x509 -days
    /// 36500`, EC P-256), and its key.
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBmzCCAUGgAwIBAgIUfOIvYuti1CUvYEl9GbNeqx2gUOMwCgYIKoZIzj0EAwIw\nFDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwODAxMTQwMVoYDzIxMjYxMTE0\nMDExNDAxWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO\nPQMBBwNCAASD0Z6U3J7dsaCfwgESyGXiSi90uMPYh7mU3gIO+SE4fcJXtFTgqpnB\nGkjIdJFEwWg09zwmyz5RgOYcLYDoBSKHo28wbTAdBgNVHQ4EFgQUsfws2LR0UhQw\nHFJSXNRLJ2Ucd40wHwYDVR0jBBgwFoAUsfws2LR0UhQwHFJSXNRLJ2Ucd40wDwYD\nVR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI\nzj0EAwIDSAAwRQIgBqCgMDcJhqK5q3bDcX7swyUiF/onTGVpVygjjy1v8SkCIQDe\nonNa2Cw7lsRJMwCcWUxlC06opQUaOk6ylLghfoAWqw==\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgek1XZURLiYVIFskU\n+59lMvE6J+ohQaBmfYvCE5fWmlChRANCAASD0Z6U3J7dsaCfwgESyGXiSi90uMPY\nh7mU3gIO+SE4fcJXtFTgqpnBGkjIdJFEwWg09zwmyz5RgOYcLYDoBSKH\n-----END PRIVATE KEY-----\n";

    /// A TLS echo server for one connection on a thread: it reads, then writes back what it
    /// read, blocking, so while its write waits on a client that does not read, it reads
    /// nothing either.
    fn echo_server() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let certs = CertificateDer::pem_slice_iter(CERT.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).unwrap();
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider).with_safe_default_protocol_versions().unwrap().with_no_client_auth().with_single_cert(certs, key).unwrap();
        std::thread::spawn(move || {
            let (sock, _) = l.accept().unwrap();
            let conn = rustls::ServerConnection::new(Arc::new(config)).unwrap();
            let mut s = rustls::StreamOwned::new(conn, sock);
            let mut buf = vec![0u8; 16 << 10];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if s.write_all(&buf[..n]).and_then(|_| s.flush()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        port
    }

    #[test]
    fn a_reader_and_a_writer_thread_share_one_tls_connection_without_deadlock() {
        let port = echo_server();
        let opts = ClientOptions { tls: true, insecure: true, ..ClientOptions::default() };
        let s = opts.connect("127.0.0.1", port).unwrap();
        assert!(s.is_tls());
        // Far more than the sockets' buffers hold: the writer blocks on a full socket while
        // the server blocks writing the echo, and only the reader, decrypting while the
        // writer waits, lets both go on.
        let total = 32usize << 20;
        let data: Vec<u8> = (0..total).map(|i| (i * 7 + i / 4096) as u8).collect();
        let expect = data.clone();
        let mut w = s.try_clone().unwrap();
        let mut r = s;
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for chunk in data.chunks(100_000) {
                w.write_all(chunk).unwrap();
            }
        });
        std::thread::spawn(move || {
            let mut got = Vec::with_capacity(total);
            let mut buf = vec![0u8; 50_000];
            while got.len() < total {
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = done_tx.send(got);
        });
        let got = done_rx.recv_timeout(Duration::from_secs(120)).expect("deadlocked: no echo within 120 s");
        assert_eq!(got.len(), expect.len());
        assert!(got == expect, "the echo differs");
    }

    #[test]
    fn options_without_tls_refuse_tls_flags_and_plaintext_connects() {
        let opts = ClientOptions { cacert: Some(PathBuf::from("ca.crt")), ..ClientOptions::default() };
        assert_eq!(opts.config().err().unwrap(), "--cacert, --cacertdir, --cert, --key, --sni and --insecure need --tls");
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let s = ClientOptions::default().connect("127.0.0.1", port).unwrap();
        assert!(!s.is_tls());
    }
}
