//! A blocking RESP2 client for the exporter: one connection, pipelined calls (send many
//! commands, then read their replies in order), and SCAN to a sorted key list.
//!
//! Why its own and not a client library: the exporter needs five reply types and
//! pipelining, nothing async; a blocking socket keeps the exporter one thread whose memory
//! is what it holds.

use std::io::{BufRead, BufReader, Write};
use abacus_tls::{BlockingStream, ClientOptions};

use abacus_int::string2ll;

/// A reply, RESP2.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply, or the server's error as ours.
    pub fn ok(self, what: &str) -> Result<Reply, String> {
        match self {
            Reply::Err(e) => Err(format!("{what}: {e}")),
            r => Ok(r),
        }
    }

    pub fn array(self, what: &str) -> Result<Vec<Reply>, String> {
        match self.ok(what)? {
            Reply::Array(Some(v)) => Ok(v),
            Reply::Array(None) => Ok(Vec::new()),
            r => Err(format!("{what}: expected an array, got {r:?}")),
        }
    }

    /// A bulk or simple string's bytes; None for a nil.
    pub fn bytes(self, what: &str) -> Result<Option<Vec<u8>>, String> {
        match self.ok(what)? {
            Reply::Bulk(b) => Ok(b),
            Reply::Simple(s) => Ok(Some(s.into_bytes())),
            Reply::Int(n) => Ok(Some(n.to_string().into_bytes())),
            r => Err(format!("{what}: expected a string, got {r:?}")),
        }
    }

    pub fn int(self, what: &str) -> Result<i64, String> {
        match self.ok(what)? {
            Reply::Int(n) => Ok(n),
            r => Err(format!("{what}: expected an integer, got {r:?}")),
        }
    }
}

/// Most commands sent before their replies are read.
pub const PIPELINE: usize = 256;

pub struct Client {
    w: BlockingStream,
    r: BufReader<BlockingStream>,
    out: Vec<u8>,
    line: Vec<u8>,
}

impl Client {
    /// Connects (over TLS with `tls.tls`: `abacus-tls`'s client) and authenticates
    /// (`AUTH [user] pass`).
    pub fn connect(host: &str, port: u16, tls: &ClientOptions, user: Option<&str>, pass: Option<&str>) -> Result<Client, String> {
        let s = tls.connect(host, port)?;
        let _ = s.set_nodelay(true);
        let r = BufReader::with_capacity(1 << 20, s.try_clone().map_err(|e| e.to_string())?);
        let mut c = Client { w: s, r, out: Vec::new(), line: Vec::with_capacity(64) };
        match (user, pass) {
            (Some(u), Some(p)) => {
                c.call(&[b"AUTH", u.as_bytes(), p.as_bytes()])?.ok("AUTH")?;
            }
            (None, Some(p)) => {
                c.call(&[b"AUTH", p.as_bytes()])?.ok("AUTH")?;
            }
            (Some(_), None) => return Err("--user needs --pass".into()),
            (None, None) => {}
        }
        Ok(c)
    }

    /// Queues a command (sent by the next [`Client::flush`] or [`Client::call`]).
    pub fn queue(&mut self, args: &[&[u8]]) {
        self.out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.out.extend_from_slice(a);
            self.out.extend_from_slice(b"\r\n");
        }
    }

    pub fn flush(&mut self) -> Result<(), String> {
        self.w.write_all(&self.out).map_err(|e| format!("sending to the server: {e}"))?;
        self.out.clear();
        Ok(())
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.queue(args);
        self.flush()?;
        self.read()
    }

    /// The same command over many keys, pipelined: `args(key)` gives each one's arguments.
    pub fn each<K: AsRef<[u8]>>(&mut self, keys: &[K], args: impl Fn(&[u8]) -> Vec<Vec<u8>>) -> Result<Vec<Reply>, String> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(PIPELINE) {
            for k in chunk {
                let a = args(k.as_ref());
                let refs: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
                self.queue(&refs);
            }
            self.flush()?;
            for _ in chunk {
                out.push(self.read()?);
            }
        }
        Ok(out)
    }

    pub fn read(&mut self) -> Result<Reply, String> {
        read_reply(&mut self.r, &mut self.line)
    }

    /// Every key matching `pattern` (of `kind`, a TYPE name, if given), sorted.
    pub fn scan(&mut self, pattern: &[u8], kind: Option<&str>) -> Result<Vec<Vec<u8>>, String> {
        let mut cursor = b"0".to_vec();
        let mut keys = Vec::new();
        loop {
            let mut args: Vec<&[u8]> = vec![b"SCAN", &cursor, b"MATCH", pattern, b"COUNT", b"1000"];
            if let Some(k) = kind {
                args.extend([&b"TYPE"[..], k.as_bytes()]);
            }
            let mut r = self.call(&args)?.array("SCAN")?.into_iter();
            let next = r.next().ok_or("SCAN: empty reply")?.bytes("SCAN")?.unwrap_or_default();
            for k in r.next().ok_or("SCAN: no keys")?.array("SCAN")? {
                if let Some(k) = k.bytes("SCAN")? {
                    keys.push(k);
                }
            }
            if next == b"0" {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}

/// One RESP2 reply from `r`. `line` is one buffer for every header line: a reply of a
/// million fields costs no allocation per length line (the exporter reads little else).
/// Shared by the client (a socket) and the in-process sources (their replies encoded).
pub fn read_reply<R: BufRead>(r: &mut R, line: &mut Vec<u8>) -> Result<Reply, String> {
    line.clear();
    let read = r.read_until(b'\n', line);
    let kind = line.first().copied();
    let body_ok = line.len() >= 3 && line.ends_with(b"\r\n");
    let body: &[u8] = if body_ok { &line[1..line.len() - 2] } else { &[] };
    let len = string2ll(body);
    let text = || String::from_utf8_lossy(body).into_owned();
    match (read, body_ok, kind) {
        (Err(e), _, _) => Err(format!("reading from the server: {e}")),
        (_, false, _) => Err("the server closed the connection".into()),
        (_, _, Some(b'+')) => Ok(Reply::Simple(text())),
        (_, _, Some(b'-')) => Ok(Reply::Err(text())),
        (_, _, Some(b':')) => len.map(Reply::Int).ok_or_else(|| format!("bad integer in reply '{}'", text())),
        (_, _, Some(b'$')) => match len {
            Some(n) if n < 0 => Ok(Reply::Bulk(None)),
            Some(n) => {
                let mut buf = vec![0; n as usize + 2];
                match r.read_exact(&mut buf) {
                    Ok(()) => {
                        buf.truncate(n as usize);
                        Ok(Reply::Bulk(Some(buf)))
                    }
                    Err(e) => Err(format!("reading from the server: {e}")),
                }
            }
            None => Err(format!("bad length in reply '{}'", text())),
        },
        (_, _, Some(b'*')) => match len {
            Some(n) if n < 0 => Ok(Reply::Array(None)),
            Some(n) => {
                let mut v = Vec::with_capacity((n as usize).min(1 << 16));
                for _ in 0..n {
                    v.push(read_reply(r, line)?);
                }
                Ok(Reply::Array(Some(v)))
            }
            None => Err(format!("bad length in reply '{}'", text())),
        },
        _ => Err(format!("unexpected reply '{}'", String::from_utf8_lossy(line))),
    }
}

/// `text` as a SCAN pattern matching exactly it (glob characters escaped).
pub fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_escape_matches_only_the_text() {
        assert_eq!(glob_escape("by_campaign"), "by_campaign");
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
