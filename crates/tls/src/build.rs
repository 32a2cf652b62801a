//! rustls configurations from [`Settings`]: the server side (listeners) and the client side
//! (replication, the cluster bus, MIGRATE), built together so that a rotation swaps both or
//! neither. Every error names the parameter and the file, and nothing is installed then: a
//! bad file leaves the old certificates in use.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::settings::{cipher_suites, protocols, AuthClients, Settings};
use crate::{read_param_file, ArcClient, ArcServer};

/// Redis 7.0's text for a missing CA.
const NEED_CA: &str = "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!";

/// One generation of TLS configurations.
#[derive(Clone)]
pub struct Configs {
    pub server: ArcServer,
    /// None without a CA: outgoing links could not check their peer.
    pub client: Option<ArcClient>,
}

/// Builds both sides from `s`, reading every file it names.
pub fn build(s: &Settings) -> Result<Configs, String> {
    if s.cert_file.is_empty() {
        return Err("tls-cert-file must be set".into());
    }
    if s.key_file.is_empty() {
        return Err("tls-key-file must be set".into());
    }
    let certs = certs("tls-cert-file", &s.cert_file)?;
    let key = key("tls-key-file", &s.key_file, &s.key_file_pass)?;
    let roots = roots(s)?;
    if roots.is_none() && (s.auth_clients != AuthClients::No || s.needs_ca) {
        return Err(NEED_CA.into());
    }
    if !s.dh_params_file.is_empty() {
        // rustls negotiates ECDHE only, so DH parameters have no use; the file is still
        // read, so that a wrong path fails as it does in Redis.
        read_param_file("tls-dh-params-file", &s.dh_params_file)?;
    }
    // Deprecated only for lacking post-quantum key exchange, which needs aws-lc-rs.
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = cipher_suites(&s.ciphers, &s.ciphersuites)?;
    let provider = Arc::new(provider);
    let versions = protocols(&s.protocols)?;
    let verifier = match (&roots, s.auth_clients) {
        (Some(r), AuthClients::Yes) => WebPkiClientVerifier::builder_with_provider(r.clone(), provider.clone()).build(),
        (Some(r), AuthClients::Optional) => WebPkiClientVerifier::builder_with_provider(r.clone(), provider.clone()).allow_unauthenticated().build(),
        _ => Ok(WebPkiClientVerifier::no_client_auth()),
    }
    .map_err(|e| format!("tls-ca-cert-file: {e}"))?;
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls-protocols / tls-ciphers: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs.clone(), key.clone_key())
        .map_err(|e| format!("tls-cert-file / tls-key-file: {e}"))?;
    server.ignore_client_order = s.prefer_server_ciphers;
    if s.session_caching {
        server.session_storage = ServerSessionMemoryCache::new(s.session_cache_size.max(1));
        server.ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| format!("tls-session-caching: {e}"))?;
    } else {
        server.session_storage = Arc::new(NoServerSessionStorage {});
        server.send_tls13_tickets = 0;
    }
    let client = match roots {
        None => None,
        Some(r) => {
            let (ccerts, ckey) = if s.client_cert_file.is_empty() {
                (certs, key)
            } else {
                (certs_of("tls-client-cert-file", &s.client_cert_file)?, self::key("tls-client-key-file", &s.client_key_file, &s.key_file_pass)?)
            };
            let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(r, provider.clone()).build().map_err(|e| format!("tls-ca-cert-file: {e}"))?;
            let c = ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&versions)
                .map_err(|e| format!("tls-protocols / tls-ciphers: {e}"))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
                .with_client_auth_cert(ccerts, ckey)
                .map_err(|e| format!("tls-client-cert-file / tls-client-key-file: {e}"))?;
            Some(Arc::new(c))
        }
    };
    Ok(Configs { server: Arc::new(server), client })
}

fn certs(param: &str, path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    certs_of(param, path)
}

fn certs_of(param: &str, path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_param_file(param, path)?;
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&pem).collect::<Result<_, _>>().map_err(|e| format!("{param}: '{path}' is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{param}: no certificate in '{path}'"));
    }
    Ok(certs)
}

fn key(param: &str, path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    if path.is_empty() {
        return Err(format!("{param} must be set"));
    }
    let pem = read_param_file(param, path)?;
    if pem.windows(9).any(|w| w == b"ENCRYPTED") {
        // rustls reads plain keys only; decrypting PKCS#8 would need another crypto library.
        let why = if pass.is_empty() { "it is encrypted and tls-key-file-pass is empty" } else { "encrypted keys are not supported: decrypt it with `openssl pkey`" };
        return Err(format!("{param}: cannot use '{path}': {why}"));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("{param}: no private key in '{path}': {e}"))
}

/// The CA certificates of `tls-ca-cert-file` and every file of `tls-ca-cert-dir`; None when
/// neither is set.
fn roots(s: &Settings) -> Result<Option<Arc<RootCertStore>>, String> {
    if s.ca_cert_file.is_empty() && s.ca_cert_dir.is_empty() {
        return Ok(None);
    }
    let mut store = RootCertStore::empty();
    if !s.ca_cert_file.is_empty() {
        for c in certs_of("tls-ca-cert-file", &s.ca_cert_file)? {
            store.add(c).map_err(|e| format!("tls-ca-cert-file: '{}': {e}", s.ca_cert_file))?;
        }
    }
    if !s.ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&s.ca_cert_dir).map_err(|e| format!("tls-ca-cert-dir: cannot read '{}': {e}", s.ca_cert_dir))?;
        for entry in dir.flatten() {
            // OpenSSL's hashed directories hold other files too: what is not a certificate
            // is skipped.
            let Ok(pem) = std::fs::read(entry.path()) else { continue };
            for c in CertificateDer::pem_slice_iter(&pem).flatten() {
                let _ = store.add(c);
            }
        }
    }
    if store.is_empty() {
        return Err("tls-ca-cert-file / tls-ca-cert-dir: no CA certificate found".into());
    }
    Ok(Some(Arc::new(store)))
}

/// Checks a server's certificate chain against the CA, dates included, but not its name: as
/// Redis, whose links verify the peer (SSL_VERIFY_PEER) without a host name check, so that a
/// replica may reach its primary by any address.
#[derive(Debug)]
pub(crate) struct ChainOnly(pub(crate) Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            r => r,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &std::path::Path) -> Settings {
        let p = |n: &str| dir.join(n).display().to_string();
        Settings {
            cert_file: p("server.crt"),
            key_file: p("server.key"),
            key_file_pass: String::new(),
            client_cert_file: String::new(),
            client_key_file: String::new(),
            dh_params_file: String::new(),
            ca_cert_file: String::new(),
            ca_cert_dir: String::new(),
            auth_clients: AuthClients::No,
            protocols: String::new(),
            ciphers: String::new(),
            ciphersuites: String::new(),
            prefer_server_ciphers: false,
            session_caching: true,
            session_cache_size: 20480,
            session_cache_timeout_s: 300,
            needs_ca: false,
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("abacus-tls-{name}-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        d
    }

    #[test]
    fn errors_name_the_parameter_and_the_file() {
        let d = scratch("errors");
        let mut s = settings(&d);
        s.cert_file.clear();
        assert_eq!(build(&s).err().unwrap(), "tls-cert-file must be set");
        let s = settings(&d);
        let e = build(&s).err().unwrap();
        assert!(e.starts_with("tls-cert-file: cannot read") && e.contains("server.crt"), "{e}");
        std::fs::write(d.join("server.crt"), "no pem here\n").unwrap();
        let e = build(&s).err().unwrap();
        assert!(e.starts_with("tls-cert-file: no certificate in"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn encrypted_keys_are_refused_with_a_hint() {
        let d = scratch("encrypted");
        std::fs::write(d.join("k.pem"), "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n").unwrap();
        let path = d.join("k.pem").display().to_string();
        let e = key("tls-key-file", &path, "secret").err().unwrap();
        assert!(e.contains("decrypt it with `openssl pkey`"), "{e}");
        let e = key("tls-key-file", &path, "").err().unwrap();
        assert!(e.contains("tls-key-file-pass is empty"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_ca_directory_must_hold_a_certificate() {
        let d = scratch("ca");
        let mut s = settings(&d);
        s.auth_clients = AuthClients::Yes;
        s.ca_cert_dir = d.join("empty-dir").display().to_string();
        std::fs::create_dir_all(&s.ca_cert_dir).unwrap();
        assert!(roots(&s).is_err(), "an empty CA directory holds no CA");
        s.ca_cert_dir.clear();
        assert!(roots(&s).unwrap().is_none());
        let _ = std::fs::remove_dir_all(&d);
    }
}
