//! MONITOR: every command the server executes, streamed to the clients that asked.
//!
//! A line is Redis's: `+<seconds>.<microseconds> [<db> <client address>] "arg" "arg" ...`,
//! each argument quoted as Redis's `sdscatrepr` quotes it (`\"`, `\\`, `\n`, `\r`, `\t`,
//! `\a`, `\b`, printable ASCII as is, any other byte as `\xhh`). As in Redis 7.0, a command is
//! shown once it has run (commands refused before running, by arity, authentication or as
//! unknown, are not), administrative commands (CONFIG, DEBUG, SAVE...) are never shown, the
//! arguments of AUTH and HELLO's AUTH are `(redacted)`, and a transaction shows MULTI, then
//! its queued commands when EXEC runs them, then EXEC.
//!
//! Who feeds: the connection that received the command, on its own thread, in its order.
//! Lines of different connections are in the order their connections fed them, which is
//! the order the commands ran up to the threads' interleaving.
//!
//! Cost: with no monitor connected, one relaxed atomic load per command ([`Monitors::active`]);
//! nothing is formatted. Bound: each monitor has a queue of [`QUEUE_LINES`] lines; a monitor
//! that falls that far behind (a slow reader) is cut off, as Redis cuts a client at its output
//! buffer limit, instead of holding memory for it.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::mpsc;

use abacus_protocol::Bytes;

/// Lines a monitor may have waiting before it is cut off.
pub const QUEUE_LINES: usize = 100_000;

/// The monitors of the server.
#[derive(Default)]
pub struct Monitors {
    count: AtomicUsize,
    sinks: Mutex<Vec<(u64, mpsc::Sender<Bytes>)>>,
}

impl Monitors {
    /// Whether any client is monitoring (the only cost of MONITOR when none is).
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Makes client `id` a monitor; its lines arrive on the receiver, which ends (`None`) if
    /// the monitor was cut off for falling behind.
    pub fn add(&self, id: u64) -> mpsc::Receiver<Bytes> {
        let (tx, rx) = mpsc::channel(QUEUE_LINES);
        let mut sinks = self.sinks.lock();
        sinks.retain(|(i, _)| *i != id);
        sinks.push((id, tx));
        self.count.store(sinks.len(), Ordering::Relaxed);
        rx
    }

    /// Client `id` stops monitoring (it closed, or RESET).
    pub fn remove(&self, id: u64) {
        let mut sinks = self.sinks.lock();
        sinks.retain(|(i, _)| *i != id);
        self.count.store(sinks.len(), Ordering::Relaxed);
    }

    /// Sends one command's line to every monitor (a monitor's own commands included, as in
    /// Redis).
    pub fn feed(&self, db: usize, addr: &SocketAddr, args: &[impl AsRef<[u8]>]) {
        let line = format_line(abacus_engine::shard::now_us(), db, addr, args);
        let mut sinks = self.sinks.lock();
        // A full queue: the monitor is too slow; dropping its sender ends its stream.
        sinks.retain(|(_, tx)| !matches!(tx.try_send(line.clone()), Err(mpsc::error::TrySendError::Full(_) | mpsc::error::TrySendError::Closed(_))));
        self.count.store(sinks.len(), Ordering::Relaxed);
    }
}

/// One monitor line, with Redis's simple-string framing.
pub fn format_line(now_us: u64, db: usize, addr: &SocketAddr, args: &[impl AsRef<[u8]>]) -> Bytes {
    let mut out = String::with_capacity(64 + args.iter().map(|a| a.as_ref().len() + 3).sum::<usize>());
    let _ = write!(out, "+{}.{:06} [{db} {addr}]", now_us / 1_000_000, now_us % 1_000_000);
    let redacted = redacted_args(args);
    for (i, a) in args.iter().enumerate() {
        out.push(' ');
        if redacted.contains(&i) {
            out.push_str("\"(redacted)\"");
        } else {
            quote(&mut out, a.as_ref());
        }
    }
    out.push_str("\r\n");
    Bytes::from(out)
}

/// Which arguments Redis hides: what the command's entry says (AUTH's, HELLO's after AUTH).
fn redacted_args(args: &[impl AsRef<[u8]>]) -> std::ops::Range<usize> {
    let Some(redact) = args.first().and_then(|n| crate::command::lookup(n.as_ref())).and_then(|s| s.redacted_args) else { return 0..0 };
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
    redact(&refs)
}

/// Redis's `sdscatrepr`.
fn quote(out: &mut String, a: &[u8]) {
    out.push('"');
    for &b in a {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_and_redact_as_redis() {
        let addr: SocketAddr = "127.0.0.1:52940".parse().unwrap();
        let line = format_line(1_795_690_035_483_284, 0, &addr, &[&b"set"[..], b"a b", b"x\"y\nz\\"]);
        assert_eq!(&line[..], &b"+1795690035.483284 [0 127.0.0.1:52940] \"set\" \"a b\" \"x\\\"y\\nz\\\\\"\r\n"[..]);
        let line = format_line(5_000_001, 3, &addr, &[&b"set"[..], b"q", b"\x01\xff\x07\x08\t\r"]);
        assert_eq!(&line[..], &b"+5.000001 [3 127.0.0.1:52940] \"set\" \"q\" \"\\x01\\xff\\a\\b\\t\\r\"\r\n"[..]);
        let line = format_line(0, 0, &addr, &[&b"AUTH"[..], b"user", b"pw"]);
        assert!(line.ends_with(b"\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"), "{line:?}");
        let line = format_line(0, 0, &addr, &[&b"hello"[..], b"3", b"auth", b"default", b"pw", b"setname", b"n"]);
        assert!(line.ends_with(b"\"hello\" \"3\" \"auth\" \"(redacted)\" \"(redacted)\" \"setname\" \"n\"\r\n"), "{line:?}");
    }

    #[test]
    fn a_monitor_that_falls_behind_is_cut_off() {
        let m = Monitors::default();
        assert!(!m.active());
        let mut rx = m.add(7);
        assert!(m.active());
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for _ in 0..QUEUE_LINES {
            m.feed(0, &addr, &[b"ping"]);
        }
        assert!(m.active(), "a full queue is still within the limit");
        m.feed(0, &addr, &[b"ping"]);
        assert!(!m.active(), "one line more cuts it off");
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        assert_eq!(n, QUEUE_LINES);
        assert!(matches!(rx.try_recv(), Err(mpsc::error::TryRecvError::Disconnected)));
    }
}
