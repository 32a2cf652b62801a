//! The `tls-*` parameters as one value, and their parsing into rustls's terms: protocol
//! versions (`tls-protocols`) and cipher suites (`tls-ciphers` for TLS 1.2 in OpenSSL's
//! names, `tls-ciphersuites` for TLS 1.3).

use rustls::SupportedCipherSuite;

/// `tls-auth-clients`: whether a client must present a certificate the CA signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthClients {
    Yes,
    No,
    Optional,
}

impl AuthClients {
    pub fn from_name(s: &str) -> AuthClients {
        match s {
            "no" => AuthClients::No,
            "optional" => AuthClients::Optional,
            _ => AuthClients::Yes,
        }
    }
}

/// Redis 7.0's TLS parameters, as their canonical strings say.
#[derive(Clone, Debug)]
pub struct Settings {
    pub cert_file: String,
    pub key_file: String,
    pub key_file_pass: String,
    pub client_cert_file: String,
    pub client_key_file: String,
    pub client_key_file_pass: String,
    pub dh_params_file: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: AuthClients,
    pub protocols: String,
    pub ciphers: String,
    pub ciphersuites: String,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: usize,
    pub session_cache_timeout_s: u64,
    /// Outgoing links check their peer's certificate (replication and the cluster bus need a
    /// CA then, as Redis requires).
    pub needs_ca: bool,
}

/// The protocol versions `tls-protocols` allows (empty: TLS 1.2 and 1.3). TLSv1 and
/// TLSv1.1 are refused: rustls does not speak them.
pub(crate) fn protocols(s: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    if s.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut v = Vec::new();
    for p in s.split_whitespace() {
        match p.to_ascii_lowercase().as_str() {
            "tlsv1.3" => v.push(&rustls::version::TLS13),
            "tlsv1.2" => v.push(&rustls::version::TLS12),
            "tlsv1" | "tlsv1.1" => {}
            _ => return Err(format!("tls-protocols: invalid protocol '{p}'")),
        }
    }
    if v.is_empty() {
        return Err(format!("tls-protocols: none of '{s}' is supported (TLSv1.2 and TLSv1.3 are)"));
    }
    Ok(v)
}

/// The cipher suites allowed by `tls-ciphers` (TLS 1.2, OpenSSL's names separated by `:`)
/// and `tls-ciphersuites` (TLS 1.3, IANA names separated by `:`). Either empty keeps every
/// suite of its version. OpenSSL's keywords (DEFAULT, HIGH, ALL) keep every suite; its
/// exclusions (`!aNULL`, `-MD5`) exclude nothing rustls has. A list naming no suite rustls
/// has is an error: the server could then not talk to anyone with that version.
pub(crate) fn cipher_suites(ciphers: &str, ciphersuites: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = rustls::crypto::ring::ALL_CIPHER_SUITES;
    let tls13: Vec<SupportedCipherSuite> = all.iter().copied().filter(|s| matches!(s, SupportedCipherSuite::Tls13(_))).collect();
    let tls12: Vec<SupportedCipherSuite> = all.iter().copied().filter(|s| matches!(s, SupportedCipherSuite::Tls12(_))).collect();
    let pick = |list: &str, from: &[SupportedCipherSuite], name_of: &dyn Fn(&str) -> String, param: &str| -> Result<Vec<SupportedCipherSuite>, String> {
        if list.trim().is_empty() {
            return Ok(from.to_vec());
        }
        let mut picked: Vec<SupportedCipherSuite> = Vec::new();
        for item in list.split(':').map(str::trim).filter(|i| !i.is_empty()) {
            if item.starts_with('!') || item.starts_with('-') || item.starts_with('@') {
                continue;
            }
            if matches!(item.trim_start_matches('+'), "DEFAULT" | "HIGH" | "ALL" | "SECURE") {
                for s in from {
                    if !picked.iter().any(|p| p.suite() == s.suite()) {
                        picked.push(*s);
                    }
                }
                continue;
            }
            let want = name_of(item);
            if let Some(s) = from.iter().find(|s| s.suite().as_str() == Some(want.as_str())) {
                if !picked.iter().any(|p| p.suite() == s.suite()) {
                    picked.push(*s);
                }
            }
        }
        if picked.is_empty() {
            return Err(format!("{param}: no cipher suite of '{list}' is supported"));
        }
        Ok(picked)
    };
    let mut suites = pick(ciphersuites, &tls13, &|n| n.replacen("TLS_", "TLS13_", 1), "tls-ciphersuites")?;
    suites.extend(pick(ciphers, &tls12, &openssl_to_iana, "tls-ciphers")?);
    Ok(suites)
}

/// OpenSSL's name of a TLS 1.2 suite (ECDHE-RSA-AES128-GCM-SHA256) as rustls names it
/// (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); an IANA name is kept.
fn openssl_to_iana(name: &str) -> String {
    if name.starts_with("TLS_") {
        return name.to_string();
    }
    let (kx, rest) = match name.split_once('-').and_then(|(a, r)| r.split_once('-').map(|(b, r)| (format!("{a}_{b}"), r.to_string()))) {
        Some(x) => x,
        None => return name.to_string(),
    };
    let cipher = match rest.as_str() {
        "AES128-GCM-SHA256" => "AES_128_GCM_SHA256",
        "AES256-GCM-SHA384" => "AES_256_GCM_SHA384",
        "CHACHA20-POLY1305" => "CHACHA20_POLY1305_SHA256",
        _ => return name.to_string(),
    };
    format!("TLS_{kx}_WITH_{cipher}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_as_redis_names_them() {
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("TLSv1.2 TLSv1.3").unwrap().len(), 2);
        assert!(protocols("TLSv1.1").is_err());
        assert!(protocols("SSLv3").is_err());
    }

    #[test]
    fn cipher_names_map_from_openssl() {
        assert_eq!(openssl_to_iana("ECDHE-RSA-AES128-GCM-SHA256"), "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
        assert_eq!(openssl_to_iana("ECDHE-ECDSA-CHACHA20-POLY1305"), "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256");
        let s = cipher_suites("ECDHE-RSA-AES256-GCM-SHA384", "TLS_AES_128_GCM_SHA256").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].suite().as_str(), Some("TLS13_AES_128_GCM_SHA256"));
        assert_eq!(s[1].suite().as_str(), Some("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"));
        assert_eq!(cipher_suites("DEFAULT:!MEDIUM", "").unwrap().len(), rustls::crypto::ring::ALL_CIPHER_SUITES.len());
        assert!(cipher_suites("RC4-MD5", "").is_err());
        assert!(cipher_suites("", "TLS_NOPE").is_err());
    }
}
