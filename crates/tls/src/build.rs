//! rustls configurations from [`Settings`]: the server side (listeners) and the client side
//! (replication, the cluster bus, MIGRATE), built together so that a rotation swaps both or
//! neither. Every error names the parameter and the file, and nothing is installed then: a
//! bad file leaves the old certificates in use.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::session::{TimedCache, TimedTickets};
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
        // rustls negotiates ECDHE only (and TLS 1.3 has no finite-field DH of a file), so DH
        // parameters have no use; the file is still read and checked, so that a wrong path or
        // a file that is not DH parameters fails as it does in Redis.
        dh_params("tls-dh-params-file", &s.dh_params_file, &read_param_file("tls-dh-params-file", &s.dh_params_file)?)?;
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
        // Bounded by size and age, as OpenSSL's cache and tickets (`session.rs`).
        let timeout = std::time::Duration::from_secs(s.session_cache_timeout_s);
        // 0: no limit, as OpenSSL's SSL_CTX_sess_set_cache_size(0) (Redis passes it on).
        let size = if s.session_cache_size == 0 { usize::MAX } else { s.session_cache_size };
        server.session_storage = TimedCache::new(size, timeout);
        let ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| format!("tls-session-caching: {e}"))?;
        server.ticketer = TimedTickets::new(ticketer, s.session_cache_timeout_s);
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
                (certs_of("tls-client-cert-file", &s.client_cert_file)?, self::key("tls-client-key-file", &s.client_key_file, &s.client_key_file_pass)?)
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
    key_of(param, path, &pem, pass)
}

/// The private key of a PEM file: a plain one (PKCS#8, PKCS#1 RSA, SEC1 EC) as is; a PKCS#8
/// "ENCRYPTED PRIVATE KEY" decrypted with `pass` (`tls-key-file-pass`,
/// `tls-client-key-file-pass`), as OpenSSL's PEM reader does for Redis. OpenSSL's legacy
/// encryption of PKCS#1/SEC1 keys (a `Proc-Type: 4,ENCRYPTED` header, MD5-based key
/// derivation) is refused with a hint to convert the key to PKCS#8.
pub(crate) fn key_of(param: &str, path: &str, pem: &[u8], pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = String::from_utf8_lossy(pem);
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "{param}: cannot use '{path}': OpenSSL's legacy key encryption (Proc-Type: 4,ENCRYPTED) is not supported: convert it to encrypted PKCS#8 with `openssl pkcs8 -topk8 -v2 aes-256-cbc -in {path}`"
        ));
    }
    let Some(start) = text.find(BEGIN) else {
        return PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("{param}: no private key in '{path}': {e}"));
    };
    let Some(len) = text[start..].find(END) else {
        return Err(format!("{param}: '{path}': no {END} line"));
    };
    let block = &text[start..start + len + END.len()];
    let pass_param = if param.contains("client") { "tls-client-key-file-pass" } else { "tls-key-file-pass" };
    if pass.is_empty() {
        return Err(format!("{param}: cannot use '{path}': it is encrypted and {pass_param} is empty"));
    }
    let (label, der) = pkcs8::der::pem::decode_vec(block.as_bytes()).map_err(|e| format!("{param}: '{path}' is not PEM: {e}"))?;
    debug_assert_eq!(label, "ENCRYPTED PRIVATE KEY");
    let info = <pkcs8::EncryptedPrivateKeyInfo as pkcs8::der::Decode>::from_der(&der)
        // pkcs5 parses only the schemes it knows: a PKCS#12 (3DES, RC2) or other scheme fails here.
        .map_err(|e| format!("{param}: cannot use '{path}': its encryption is not supported or it is damaged ({e}): PBES2 with AES-CBC is (`openssl pkcs8 -topk8 -v2 aes-256-cbc`)"))?;
    let plain = info.decrypt(pass.as_bytes()).map_err(|e| match e {
        pkcs8::Error::EncryptedPrivateKey(pkcs8::pkcs5::Error::UnsupportedAlgorithm { oid }) => {
            format!("{param}: cannot use '{path}': its encryption ({oid}) is not supported: PBES2 with AES-CBC is (`openssl pkcs8 -topk8 -v2 aes-256-cbc`)")
        }
        _ => format!("{param}: cannot decrypt '{path}' with {pass_param} (wrong password?)"),
    })?;
    Ok(PrivateKeyDer::Pkcs8(rustls_pki_types::PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec())))
}

/// Checks that `pem` holds PKCS#3 DH parameters (`openssl dhparam` writes them): a PEM "DH
/// PARAMETERS" block whose DER is a SEQUENCE of the prime, the generator and an optional
/// private value length. The parameters themselves are not used (ECDHE only).
pub(crate) fn dh_params(param: &str, path: &str, pem: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(pem);
    let bad = || format!("{param}: no DH PARAMETERS in '{path}'");
    // PKCS#3 only (`openssl dhparam`): Redis 7.0 refuses X9.42's (`-dsaparam`) too.
    for (label, max_ints) in [("DH PARAMETERS", 3)] {
        let (begin, end) = (format!("-----BEGIN {label}-----"), format!("-----END {label}-----"));
        let Some(start) = text.find(&begin) else { continue };
        let len = text[start..].find(&end).ok_or_else(bad)?;
        let (_, der) = pkcs8::der::pem::decode_vec(text[start..start + len + end.len()].as_bytes()).map_err(|_| bad())?;
        let ints: Vec<pkcs8::der::asn1::UintRef<'_>> = pkcs8::der::Decode::from_der(&der).map_err(|_| bad())?;
        return match ints.as_slice() {
            [p, g, ..] if ints.len() <= max_ints && p.as_bytes().last().is_some_and(|b| b & 1 == 1) && g.as_bytes() > [1u8].as_slice() => Ok(()),
            _ => Err(bad()),
        };
    }
    Err(bad())
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
            client_key_file_pass: String::new(),
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
    fn encrypted_keys_need_their_password_and_legacy_ones_are_refused() {
        let pem = b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let e = key_of("tls-key-file", "k.pem", pem, "").err().unwrap();
        assert!(e.contains("tls-key-file-pass is empty"), "{e}");
        let e = key_of("tls-client-key-file", "k.pem", pem, "").err().unwrap();
        assert!(e.contains("tls-client-key-file-pass is empty"), "{e}");
        let e = key_of("tls-key-file", "k.pem", pem, "secret").err().unwrap();
        assert!(e.starts_with("tls-key-file:") && e.contains("'k.pem'") && !e.contains("wrong password"), "{e}");
        let legacy = b"-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00\n\nAAAA\n-----END EC PRIVATE KEY-----\n";
        let e = key_of("tls-key-file", "k.pem", legacy, "secret").err().unwrap();
        assert!(e.contains("legacy key encryption") && e.contains("openssl pkcs8 -topk8"), "{e}");
    }

    /// Made by `openssl genpkey -algorithm EC` and `openssl pkcs8 -topk8` with the password
    /// "secret": PBES2 with PBKDF2 and AES-256-CBC (`-v2 aes-256-cbc`), with scrypt
    /// (`-scrypt`), and the legacy PKCS#12 3DES scheme (`-v1 PBE-SHA1-3DES`).
    const PLAIN: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1HZ9RSjiSYRibP2J\nz/AZN+sIyQNUFnTZMms7mlF6IEKhRANCAARLSV6pLwYDf7DfLv7m3RN1UN3ofe1u\nsCXLpq48cNksGwBrGrq7AMq7Vqrsg5IpQzYonRw1/amVhtW5Yb6oKWPi\n-----END PRIVATE KEY-----\n";
    const PBKDF2_AES: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAgpoTUv6NJ8owICCAAw\nDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEKZlOj3Gl9eVNuNBqA7Vk1oEgZDn\nmroqssaw7dcCZRppFkMzQyELc8jCdrm6sCnd/ghyUsnkPaYLED3Bipltlw77nzbY\n56urfp68f0h1dakuEfp/43ve5hIkcdsUtezfwo4iFl4Bm9eAZMunIgN3l7H45CEE\nC5q12pVqhTCjt8c3/dZLqSdcYCUEBRnkjIFreJ2q36F+/lIGPIgQy28EL+9m0Dc=\n-----END ENCRYPTED PRIVATE KEY-----\n";
    const SCRYPT_AES: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHkME8GCSqGSIb3DQEFDTBCMCEGCSsGAQQB2kcECzAUBAhqW9UZsJeAjAICQAAC\nAQgCAQEwHQYJYIZIAWUDBAEqBBCXnXGSRnol4BWdM+dkspg5BIGQ1jNDyN3o2/6L\nB1/CoJYzVZLkwWFksqy6q0X1QPqaTk8/xtaD0vhm03Ujsp/s6rxqMt7NmhZjUwMT\nqxhDtMZvU5YmCqRYjwLzO2mjNn/iiclG7Tab/0+YaPQxJ8O1LBjWPJ/Idnlwlb0y\n1ML+P2JYNKBpI+mMsv30wcVwZ+8EBGmC4HJ9no2G+VAQPx8ZwIvY\n-----END ENCRYPTED PRIVATE KEY-----\n";
    const PBE_3DES: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIGxMBwGCiqGSIb3DQEMAQMwDgQICKv0VlNmAVMCAggABIGQIxdggcyCpNA1npQR\nK8ug0LEj6eOSX3zqeYw0UwaarvhaQDYPN4/IKWig4TzoYglb9n9dBYesx9mAdukO\nf/ATcV6CWMC4HrWIwC17q+8+FxiTP0so2R6RmLVmLogw8IHuPM4F0bHTmloBf9eE\nznYTUxcM2UjtjGaPuTjv24CO66EiDS9p4QT7q2c60tngT8vC\n-----END ENCRYPTED PRIVATE KEY-----\n";

    #[test]
    fn encrypted_pkcs8_keys_decrypt_to_the_plain_key() {
        let want = PrivateKeyDer::from_pem_slice(PLAIN.as_bytes()).unwrap();
        for pem in [PBKDF2_AES, SCRYPT_AES] {
            let got = key_of("tls-key-file", "k.pem", pem.as_bytes(), "secret").unwrap();
            assert_eq!(got.secret_der(), want.secret_der());
            let e = key_of("tls-key-file", "k.pem", pem.as_bytes(), "wrong").err().unwrap();
            assert_eq!(e, "tls-key-file: cannot decrypt 'k.pem' with tls-key-file-pass (wrong password?)");
        }
        // A pass given for a plain key is not needed (OpenSSL ignores it too).
        assert!(key_of("tls-key-file", "k.pem", PLAIN.as_bytes(), "secret").is_ok());
        let e = key_of("tls-client-key-file", "k.pem", PBE_3DES.as_bytes(), "secret").err().unwrap();
        assert!(e.contains("is not supported") && e.contains("PBES2 with AES-CBC is"), "{e}");
    }

    #[test]
    fn dh_parameters_are_checked_though_unused() {
        // `openssl genpkey -genparam -algorithm DH` (PKCS#3, read) and `openssl dhparam -dsaparam`
        // (X9.42, refused as Redis 7.0 refuses it).
        let pkcs3 = "-----BEGIN DH PARAMETERS-----\nMIGHAoGBALwQT2LE2z6x7D6EKc9p0TFacec+bnvm/bRqD3Iqkxm4Vh20XZyBSxlC\n+xiAVBgdTruL4UFxlE9f3eNB2xDReabEJL3c2WU0T5UC8G0/cDRMQYM1hZtoGzH8\nT+2VTBaws+KDpT7Yh8lEFkIjg7YXRXdDx7RcWLgU31r1SKP37NkvAgEC\n-----END DH PARAMETERS-----\n";
        let x942 = "-----BEGIN X9.42 DH PARAMETERS-----\nMIIBJgKBgQDyI7kj9SUkUyBb1DoSP7qQpcyNRq9/QHxWgOIRJPTUW5jFufii4ldN\niCA8cFqpV1yglGWLkXjo8qRWbolwmwCRtLPDL89+GV0Tpc5OGgXJQO7t9cSDaolu\nQ05qMg3HRKOAEV53jwtC6WWrexb8t4PVgF7xwoSaSibet57QRhnUIQKBgDLduY10\nN81f0R7xzSE/A/0gnjy031HLLBlqr+3ZZiOdw2tuqkfhhNehaSBXXYgkwbMN4e6q\nReq83DDARq3TATlg66M7Ugzj6d6zvg99krxQw5N77AMwWE7qCsZ5D5TTiGCjKRUa\njZUjxqlOYAxg0IBBmr3L6ncK8DRNRop3N0XbAh0AnraWOkyxaq5dvyIQecgtZL+B\nqRgj0tU8peEAGw==\n-----END X9.42 DH PARAMETERS-----\n";
        assert_eq!(dh_params("tls-dh-params-file", "dh.pem", pkcs3.as_bytes()), Ok(()));
        let want = Err("tls-dh-params-file: no DH PARAMETERS in 'dh.pem'".to_string());
        assert_eq!(dh_params("tls-dh-params-file", "dh.pem", x942.as_bytes()), want);
        assert_eq!(dh_params("tls-dh-params-file", "dh.pem", PLAIN.as_bytes()), want);
        assert_eq!(dh_params("tls-dh-params-file", "dh.pem", b"-----BEGIN DH PARAMETERS-----\nMAA=\n-----END DH PARAMETERS-----\n"), want);
        assert_eq!(dh_params("tls-dh-params-file", "dh.pem", &pkcs3.as_bytes()[..60]), want);
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
