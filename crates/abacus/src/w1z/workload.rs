//! What W1z sends, decided without I/O so it can be tested and replayed: which key each write
//! goes to, whether it is an APPEND or a reset, the length the server must reply, the payload
//! the keyspace should hold, and when each write is due.
//!
//! - Keys: `n` keys named `w1z:` + 12 decimal digits (16 bytes), all created by the preload
//!   with a 16-byte value, so the run holds its full key count from the first minute.
//! - Popularity: a Zipf draw over ranks 1..=n (exponent 0.99 by default, YCSB's constant),
//!   mapped to a key index by a fixed permutation (`rank * MULT mod n`) so the hot keys are
//!   not neighbours in name.
//! - Growth and its cap: a write appends 16 bytes; a key whose value has reached 16 KB (1,024
//!   appends) is reset instead, by a SET of 16 bytes, and starts to grow again. So values cycle
//!   through every size from 16 B to 16 KB (the hottest keys many times a minute), and the
//!   allocator sees 16 KB values freed and small ones made: the fragmentation case the issue
//!   asks about.
//! - Lengths are kept in units of 16 bytes in a `u16` per key (100 MB at 50 million keys), so
//!   the generator knows the payload exactly and checks every APPEND reply against it.
//! - Schedule: write i (from 0) is due at `i * 1e9 / rate` ns after the start, whatever
//!   happened before (open loop): its latency is measured from then, so a stall is charged to
//!   every write it delayed.

use super::zipf::{Rng, Zipf};

pub const VALUE: &[u8; 16] = b"0123456789abcdef";
pub const KEY_LEN: u64 = 16;
pub const UNIT_BYTES: u64 = 16;
/// 16 KB: the largest value, in units.
pub const MAX_UNITS: u16 = 1024;
const MAX_KEYS: u64 = 1_000_000_000_000;
/// The permutation's multiplier: a prime (Knuth's 2^32 / phi), so coprime with any n below it.
const MULT: u64 = 2_654_435_761;

/// One write: the key's index and the reply the server must give (`expect_len` is the
/// APPEND's integer reply; 0 means a SET, whose reply is +OK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    pub key: u64,
    pub expect_len: u32,
}

pub struct Workload {
    lens: Vec<u16>,
    zipf: Zipf,
    rng: Rng,
    n: u64,
    pub payload_bytes: u64,
    pub resets: u64,
    /// `next_batch`'s scratch.
    batch_keys: Vec<u64>,
}

impl Workload {
    /// n keys as after the preload (each holding 16 bytes).
    pub fn new(n: u64, exponent: f64, seed: u64) -> Result<Self, String> {
        if n == 0 || n >= MAX_KEYS || n >= MULT {
            return Err(format!("keys must be between 1 and {}", MULT - 1));
        }
        Ok(Workload {
            lens: vec![1; n as usize],
            zipf: Zipf::new(n, exponent),
            rng: Rng::new(seed),
            n,
            payload_bytes: n * (KEY_LEN + UNIT_BYTES),
            resets: 0,
            batch_keys: Vec::new(),
        })
    }

    pub fn keys(&self) -> u64 {
        self.n
    }

    /// The key index of popularity rank `rank` (1 = hottest).
    pub fn key_of_rank(&self, rank: u64) -> u64 {
        ((rank - 1) as u128 * MULT as u128 % self.n as u128) as u64
    }

    /// The next write, with the key's length and the payload updated as the server will have
    /// them once it is applied (the writer takes them in batches: `next_batch`).
    #[cfg(test)]
    pub fn next(&mut self) -> Write {
        let rank = self.zipf.sample(&mut self.rng);
        let key = self.key_of_rank(rank);
        self.apply(key)
    }

    /// The next `n` writes, appended to `out`: the same writes as `n` calls of `next`.
    ///
    /// Why: at 50 million keys `lens` is 100 MB, and a third of the draws (the Zipf tail) read
    /// an entry no cache holds; one at a time, each costs a full memory round trip (about
    /// 1 us on a VM, 95% of the writer's CPU in a profile), and the writer, at real-time
    /// priority, takes that time from the server it measures. Drawing the batch's keys first
    /// and reading their entries in a loop of independent loads lets the CPU overlap the
    /// misses; the writes are then applied in order, from cache.
    pub fn next_batch(&mut self, n: usize, out: &mut Vec<Write>) {
        let mut keys = std::mem::take(&mut self.batch_keys);
        keys.clear();
        keys.extend((0..n).map(|_| {
            let rank = self.zipf.sample(&mut self.rng);
            self.key_of_rank(rank)
        }));
        let warm = keys.iter().fold(0u16, |acc, &k| acc ^ self.lens[k as usize]);
        std::hint::black_box(warm);
        out.extend(keys.iter().map(|&k| self.apply(k)));
        self.batch_keys = keys;
    }

    fn apply(&mut self, key: u64) -> Write {
        let len = &mut self.lens[key as usize];
        if *len >= MAX_UNITS {
            self.payload_bytes -= (*len as u64 - 1) * UNIT_BYTES;
            *len = 1;
            self.resets += 1;
            Write { key, expect_len: 0 }
        } else {
            *len += 1;
            self.payload_bytes += UNIT_BYTES;
            Write { key, expect_len: *len as u32 * UNIT_BYTES as u32 }
        }
    }

    /// The value length the server should hold for `key`.
    pub fn value_len(&self, key: u64) -> u64 {
        self.lens[key as usize] as u64 * UNIT_BYTES
    }

    /// A uniformly drawn key index (for the final cross-check).
    pub fn random_key(&mut self) -> u64 {
        self.rng.next_u64() % self.n
    }
}

/// The 16-byte name of key `i`.
pub fn key_name(i: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"w1z:");
    let mut digits = [b'0'; 12];
    let mut v = i;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&digits);
}

/// Appends the RESP encoding of `w` to `out`.
pub fn encode(w: Write, out: &mut Vec<u8>) {
    if w.expect_len == 0 {
        out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$16\r\n");
    } else {
        out.extend_from_slice(b"*3\r\n$6\r\nAPPEND\r\n$16\r\n");
    }
    key_name(w.key, out);
    out.extend_from_slice(b"\r\n$16\r\n");
    out.extend_from_slice(VALUE);
    out.extend_from_slice(b"\r\n");
}

/// When write `i` is due, in ns from the start, at `rate` writes/s (rounded up, so that
/// `due_count(due_ns(i))` counts write i).
pub fn due_ns(i: u64, rate: u64) -> u64 {
    (i as u128 * 1_000_000_000).div_ceil(rate as u128) as u64
}

/// How many writes are due by `elapsed_ns` (writes 0..count have due_ns <= elapsed_ns).
pub fn due_count(elapsed_ns: u64, rate: u64) -> u64 {
    (elapsed_ns as u128 * rate as u128 / 1_000_000_000) as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_grows_to_16_kb_then_starts_over() {
        // One key: every write goes to it.
        let mut w = Workload::new(1, 0.99, 1).unwrap();
        assert_eq!(w.payload_bytes, 32);
        for i in 2..=1024u32 {
            assert_eq!(w.next(), Write { key: 0, expect_len: i * 16 });
        }
        assert_eq!(w.value_len(0), 16 * 1024);
        assert_eq!(w.payload_bytes, 16 + 16 * 1024);
        assert_eq!(w.next(), Write { key: 0, expect_len: 0 });
        assert_eq!((w.value_len(0), w.payload_bytes, w.resets), (16, 32, 1));
        assert_eq!(w.next(), Write { key: 0, expect_len: 32 });
    }

    #[test]
    fn payload_is_the_sum_of_key_and_value_lengths() {
        let mut w = Workload::new(1000, 0.99, 42).unwrap();
        for _ in 0..3_000_000 {
            w.next();
        }
        assert!(w.resets > 0, "the hottest keys must have reached the cap");
        let sum: u64 = (0..1000).map(|k| KEY_LEN + w.value_len(k)).sum();
        assert_eq!(w.payload_bytes, sum);
        assert!((0..1000).all(|k| (16..=16384).contains(&w.value_len(k))));
    }

    #[test]
    fn ranks_map_to_distinct_keys_and_same_seed_same_writes() {
        let w = Workload::new(10_007, 0.99, 1).unwrap();
        let mut seen = vec![false; 10_007];
        for r in 1..=10_007 {
            let k = w.key_of_rank(r) as usize;
            assert!(!seen[k]);
            seen[k] = true;
        }
        let (mut a, mut b) = (Workload::new(5000, 0.99, 9).unwrap(), Workload::new(5000, 0.99, 9).unwrap());
        assert!((0..10_000).all(|_| a.next() == b.next()));
        assert!(Workload::new(0, 0.99, 1).is_err());
        // Batches are the same writes as one at a time, whatever their sizes.
        let mut batch = Vec::new();
        for n in [1, 7, 200, 2000, 0, 33] {
            a.next_batch(n, &mut batch);
        }
        let singles: Vec<Write> = (0..batch.len()).map(|_| b.next()).collect();
        assert_eq!(batch, singles);
        assert_eq!((a.payload_bytes, a.resets), (b.payload_bytes, b.resets));
    }

    #[test]
    fn encoding_is_resp() {
        let mut out = Vec::new();
        encode(Write { key: 42, expect_len: 32 }, &mut out);
        assert_eq!(out, b"*3\r\n$6\r\nAPPEND\r\n$16\r\nw1z:000000000042\r\n$16\r\n0123456789abcdef\r\n");
        out.clear();
        encode(Write { key: 999_999_999_999, expect_len: 0 }, &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$16\r\nw1z:999999999999\r\n$16\r\n0123456789abcdef\r\n");
    }

    #[test]
    fn open_loop_schedule() {
        let rate = 200_000;
        assert_eq!(due_ns(0, rate), 0);
        assert_eq!(due_ns(200_000, rate), 1_000_000_000);
        // 200 writes due per millisecond, whatever happened before.
        for ms in 1..5000u64 {
            assert_eq!(due_count(ms * 1_000_000, rate) - due_count((ms - 1) * 1_000_000, rate), 200);
        }
        for i in [0u64, 1, 7, 199_999, 123_456_789] {
            let t = due_ns(i, rate);
            assert!(due_count(t, rate) > i);
            if t > 0 {
                assert!(due_count(t - 1, rate) <= i);
            }
        }
        // 3 per second: due at 0, 333333334 and 666666667 ns.
        assert_eq!(due_count(999_999_999, 3), 3);
    }
}
