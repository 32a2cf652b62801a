//! Session resumption bounded as Redis bounds it: `tls-session-cache-size` sessions kept and
//! none resumed after `tls-session-cache-timeout` seconds (OpenSSL's `SSL_CTX_set_timeout`,
//! which covers both its session cache and its tickets).
//!
//! rustls has the pieces but not the timeout: its memory cache evicts by size only and its
//! ticketer's keys roll every few hours. So: [`TimedCache`] (TLS 1.2 session IDs, and TLS
//! 1.3 stateful resumption) stores each session with the time it was made and answers none
//! older than the timeout; [`TimedTickets`] puts the issue time inside the encrypted ticket
//! (rustls's ticketer authenticates it, so a client cannot change it) and refuses an old one.
//! A refused session is a full handshake, never an error.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::server::{ProducesTickets, StoresServerSessions};

/// The server's session cache: at most `size` sessions, each answered for `timeout` after it
/// was stored.
#[derive(Debug)]
pub struct TimedCache {
    inner: Mutex<Entries>,
    size: usize,
    timeout: Duration,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Vec<u8>, (Vec<u8>, Instant)>,
    /// Keys in the order they were stored (a key stored again appears twice; the older
    /// mention is skipped when it comes up for eviction).
    order: VecDeque<(Vec<u8>, Instant)>,
}

impl TimedCache {
    pub fn new(size: usize, timeout: Duration) -> Arc<TimedCache> {
        Arc::new(TimedCache { inner: Mutex::new(Entries::default()), size: size.max(1), timeout })
    }

    fn fresh(&self, at: Instant) -> bool {
        at.elapsed() < self.timeout
    }
}

impl StoresServerSessions for TimedCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let now = Instant::now();
        let mut e = self.inner.lock();
        e.map.insert(key.clone(), (value, now));
        e.order.push_back((key, now));
        // Oldest first: expired ones, then any beyond the size.
        while let Some((k, at)) = e.order.front().cloned() {
            let current = e.map.get(&k).is_some_and(|(_, t)| *t == at);
            if !current {
                e.order.pop_front();
            } else if e.map.len() > self.size || !self.fresh(at) {
                e.order.pop_front();
                e.map.remove(&k);
            } else {
                break;
            }
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let e = self.inner.lock();
        e.map.get(key).filter(|(_, at)| self.fresh(*at)).map(|(v, _)| v.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mut e = self.inner.lock();
        e.map.remove(key).filter(|(_, at)| self.fresh(*at)).map(|(v, _)| v)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// Tickets that carry their issue time (seconds since the Unix epoch, 8 bytes) inside the
/// encryption, and are refused once `timeout` old.
#[derive(Debug)]
pub struct TimedTickets {
    inner: Arc<dyn ProducesTickets>,
    timeout_s: u64,
}

impl TimedTickets {
    pub fn new(inner: Arc<dyn ProducesTickets>, timeout_s: u64) -> Arc<TimedTickets> {
        Arc::new(TimedTickets { inner, timeout_s })
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl ProducesTickets for TimedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.inner.lifetime().min(self.timeout_s.min(u32::MAX as u64) as u32)
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut m = Vec::with_capacity(8 + plain.len());
        m.extend_from_slice(&unix_now().to_be_bytes());
        m.extend_from_slice(plain);
        self.inner.encrypt(&m)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let m = self.inner.decrypt(cipher)?;
        let issued = u64::from_be_bytes(m.get(..8)?.try_into().ok()?);
        // A clock that went back counts as age 0.
        if unix_now().saturating_sub(issued) >= self.timeout_s {
            return None;
        }
        Some(m[8..].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_at_most_its_size_newest_first() {
        let c = TimedCache::new(2, Duration::from_secs(300));
        assert!(c.put(b"a".to_vec(), b"1".to_vec()));
        c.put(b"b".to_vec(), b"2".to_vec());
        c.put(b"a".to_vec(), b"3".to_vec());
        c.put(b"c".to_vec(), b"4".to_vec());
        assert_eq!(c.get(b"b"), None, "the oldest went");
        assert_eq!(c.get(b"a"), Some(b"3".to_vec()));
        assert_eq!(c.take(b"c"), Some(b"4".to_vec()));
        assert_eq!(c.get(b"c"), None);
    }

    #[test]
    fn a_zero_timeout_resumes_nothing() {
        let c = TimedCache::new(10, Duration::ZERO);
        c.put(b"a".to_vec(), b"1".to_vec());
        assert_eq!(c.get(b"a"), None);
        let t = TimedTickets::new(rustls::crypto::ring::Ticketer::new().unwrap(), 0);
        let ticket = t.encrypt(b"state").unwrap();
        assert_eq!(t.decrypt(&ticket), None);
        assert_eq!(t.lifetime(), 0);
    }

    #[test]
    fn tickets_round_trip_within_the_timeout_and_resist_tampering() {
        let t = TimedTickets::new(rustls::crypto::ring::Ticketer::new().unwrap(), 300);
        let mut ticket = t.encrypt(b"state").unwrap();
        assert_eq!(t.decrypt(&ticket), Some(b"state".to_vec()));
        assert_eq!(t.lifetime(), 300);
        let last = ticket.len() - 1;
        ticket[last] ^= 1;
        assert_eq!(t.decrypt(&ticket), None);
        assert_eq!(t.decrypt(b""), None);
    }
}
