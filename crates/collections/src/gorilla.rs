//! Gorilla chunks: compressed runs of (timestamp, value) samples for time series.
//!
//! Why this encoding: a time series is mostly appended, read in time ranges, and its
//! timestamps are nearly regular while consecutive values share most of their bits. Facebook's
//! Gorilla paper (VLDB 2015), and RedisTimeSeries's "compressed" chunks after it, store
//! timestamps as delta-of-deltas and values as the XOR with the previous value, which takes a
//! regular 1-second counter to one or two bytes per sample instead of sixteen.
//!
//! Layout of a chunk's bit stream (most significant bit first in 64-bit words):
//! - the first sample: its timestamp (64 bits) and value bits (64 bits);
//! - every later sample: the timestamp's delta-of-delta `dod` (delta minus the previous delta;
//!   the first delta's "previous" is 0), zigzag-encoded `z`: `0` when `z == 0`, `10` + 7 bits,
//!   `110` + 9 bits, `1110` + 12 bits, `11110` + 32 bits, `11111` + 64 bits; then the value:
//!   `0` when it equals the previous value, `10` + the meaningful bits of the XOR when they fit
//!   inside the previous window (leading and trailing zero counts at least the previous ones),
//!   `11` + 6 bits of leading zeros + 6 bits of (meaningful length - 1) + the meaningful bits.
//!
//! Seek points: a range read of one day from a chunk of hundreds of samples would otherwise
//! decode from the chunk's first sample (Gorilla's stream has no random access). So every
//! `SEEK_BITS` (4096) of stream the encoder records the decoder's state after the sample it
//! just wrote (its timestamp, bit position, delta, value and XOR window: 34 bytes, about 7%
//! of the 512 bytes of stream it covers: a regular 1-second counter stays under 2 bytes per
//! sample with them), and `iter_from(t)` starts at the last seek point before `t`: a
//! read decodes at most `SEEK_BITS` of stream before its first sample. The seek points are
//! derived state (rebuilt when a chunk is re-encoded or deserialized), never serialized.
//!
//! A chunk only appends; changing a sample in the middle (an out-of-order insert, a
//! duplicate policy, a deletion) decodes the chunk and encodes it again, as RedisTimeSeries
//! does: chunks are small (4 KiB by default), so that costs microseconds.

/// One compressed chunk of samples in increasing timestamp order.
#[derive(Clone, Debug, Default)]
pub struct Chunk {
    words: Vec<u64>,
    /// Bits used in `words`.
    bits: u64,
    count: u32,
    first_ts: u64,
    last_ts: u64,
    last_delta: i64,
    last_value: u64,
    /// The previous XOR window (leading zeros, meaningful length); length 0 = none yet.
    lead: u8,
    len: u8,
    /// Each seek point's XOR window (leading zeros, length), beside `seeks`.
    seek_window: Vec<(u8, u8)>,
    /// The decoder's state after a sample, every `SEEK_BITS` of stream (see the top).
    seeks: Vec<Seek>,
}

/// Stream bits between two seek points.
const SEEK_BITS: u64 = 4096;

/// The decoder's state right after one sample (that sample's timestamp `t`).
#[derive(Clone, Copy, Debug, Default)]
struct Seek {
    t: u64,
    delta: i64,
    v: u64,
    at: u32,
    /// Samples decoded up to and including this one.
    decoded: u32,
}

impl Chunk {
    pub fn new() -> Chunk {
        Chunk::default()
    }

    /// A chunk of `samples` (increasing timestamps).
    pub fn from_samples(samples: &[(u64, f64)]) -> Chunk {
        let mut c = Chunk::new();
        for &(t, v) in samples {
            c.append(t, v);
        }
        c
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn first_ts(&self) -> u64 {
        self.first_ts
    }

    pub fn last_ts(&self) -> u64 {
        self.last_ts
    }

    pub fn last_value(&self) -> f64 {
        f64::from_bits(self.last_value)
    }

    /// Bytes the encoded stream occupies (rounded up to whole bytes).
    pub fn data_bytes(&self) -> usize {
        self.bits.div_ceil(8) as usize
    }

    /// Heap bytes held (capacity of the word buffer).
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8 + self.seeks.capacity() * std::mem::size_of::<Seek>() + self.seek_window.capacity() * 2
    }

    pub fn shrink(&mut self) {
        self.words.shrink_to_fit();
        self.seeks.shrink_to_fit();
        self.seek_window.shrink_to_fit();
    }

    fn put(&mut self, value: u64, n: u32) {
        if n == 0 {
            return;
        }
        debug_assert!(n <= 64);
        let value = if n == 64 { value } else { value & ((1u64 << n) - 1) };
        let used = (self.bits % 64) as u32;
        if used == 0 {
            self.words.push(0);
        }
        let free = 64 - used;
        let last = self.words.len() - 1;
        if n <= free {
            self.words[last] |= value << (free - n);
        } else {
            self.words[last] |= value >> (n - free);
            self.words.push(value << (64 - (n - free)));
        }
        self.bits += u64::from(n);
    }

    /// Appends a sample; `t` must be greater than the last timestamp (asserted).
    pub fn append(&mut self, t: u64, v: f64) {
        let vb = v.to_bits();
        if self.count == 0 {
            self.put(t, 64);
            self.put(vb, 64);
            self.first_ts = t;
            self.last_ts = t;
            self.last_value = vb;
            self.last_delta = 0;
            self.count = 1;
            return;
        }
        assert!(t > self.last_ts, "chunk appends must increase the timestamp");
        let delta = (t - self.last_ts) as i64;
        let dod = delta.wrapping_sub(self.last_delta);
        let z = ((dod << 1) ^ (dod >> 63)) as u64;
        if z == 0 {
            self.put(0, 1);
        } else if z < (1 << 7) {
            self.put(0b10, 2);
            self.put(z, 7);
        } else if z < (1 << 9) {
            self.put(0b110, 3);
            self.put(z, 9);
        } else if z < (1 << 12) {
            self.put(0b1110, 4);
            self.put(z, 12);
        } else if z < (1 << 32) {
            self.put(0b11110, 5);
            self.put(z, 32);
        } else {
            self.put(0b11111, 5);
            self.put(z, 64);
        }
        let x = vb ^ self.last_value;
        if x == 0 {
            self.put(0, 1);
        } else {
            let lead = x.leading_zeros().min(63) as u8;
            let trail = x.trailing_zeros() as u8;
            let prev_trail = 64 - self.lead as i32 - self.len as i32;
            if self.len != 0 && lead >= self.lead && trail as i32 >= prev_trail {
                self.put(0b10, 2);
                self.put(x >> prev_trail, u32::from(self.len));
            } else {
                let len = 64 - lead - trail;
                self.put(0b11, 2);
                self.put(u64::from(lead), 6);
                self.put(u64::from(len - 1), 6);
                self.put(x >> trail, u32::from(len));
                self.lead = lead;
                self.len = len;
            }
        }
        self.last_ts = t;
        self.last_delta = delta;
        self.last_value = vb;
        self.count += 1;
        let last_seek = self.seeks.last().map_or(0, |s| u64::from(s.at));
        if self.bits - last_seek >= SEEK_BITS && self.bits <= u64::from(u32::MAX) {
            // The iterator counts the samples left, which grows with later appends: the seek
            // point keeps the samples decoded so far instead.
            self.seeks.push(Seek { t, delta, v: vb, at: self.bits as u32, decoded: self.count });
            self.seek_window.push((self.lead, self.len));
        }
    }

    pub fn iter(&self) -> ChunkIter<'_> {
        ChunkIter { c: self, at: 0, left: self.count, t: 0, delta: 0, v: 0, lead: 0, len: 0 }
    }

    /// The samples with timestamps `>= t` (and maybe a few before: the caller skips them),
    /// decoding from the last seek point before `t` instead of the chunk's start.
    pub fn iter_from(&self, t: u64) -> ChunkIter<'_> {
        let i = self.seeks.partition_point(|s| s.t < t);
        if i == 0 {
            return self.iter();
        }
        let s = self.seeks[i - 1];
        let (lead, len) = self.seek_window[i - 1];
        ChunkIter { c: self, at: u64::from(s.at), left: self.count - s.decoded, t: s.t, delta: s.delta, v: s.v, lead, len }
    }

    /// The sample at `t` exactly, if any: no decoding outside the chunk's span or at its
    /// last sample (kept decoded for appends), else from the last seek point before `t`.
    pub fn get(&self, t: u64) -> Option<f64> {
        if self.count == 0 || t < self.first_ts || t > self.last_ts {
            return None;
        }
        if t == self.last_ts {
            return Some(f64::from_bits(self.last_value));
        }
        let mut it = self.iter_from(t);
        while let Some((ts, v)) = it.next_checked() {
            if ts >= t {
                return (ts == t).then_some(v);
            }
        }
        None
    }

    /// The address of the stream word [`Chunk::iter_from`]`(t)` starts decoding at (for a
    /// prefetch; dangling but never read when the chunk has no words).
    pub fn stream_addr(&self, t: u64) -> *const u8 {
        let i = self.seeks.partition_point(|s| s.t < t);
        let at = if i == 0 { 0 } else { self.seeks[i - 1].at as usize / 64 };
        self.words.as_ptr().wrapping_add(at).cast()
    }

    /// Every sample, decoded.
    pub fn samples(&self) -> Vec<(u64, f64)> {
        self.iter().collect()
    }

    /// The byte form: count, then the stream's words (the encoder state is rebuilt by
    /// decoding, so the form stays independent of it).
    pub fn serialize_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.bits.to_le_bytes());
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// Reads what `serialize_into` wrote from the front of `bytes`; returns the chunk and
    /// the bytes consumed. Validates by decoding (increasing timestamps, exact bit count).
    pub fn deserialize(bytes: &[u8]) -> Result<(Chunk, usize), &'static str> {
        let head = bytes.get(..12).ok_or("truncated chunk")?;
        let count = u32::from_le_bytes(head[..4].try_into().unwrap());
        let bits = u64::from_le_bytes(head[4..12].try_into().unwrap());
        let nwords = bits.div_ceil(64);
        if nwords > (bytes.len() as u64) / 8 {
            return Err("truncated chunk");
        }
        let end = 12 + nwords as usize * 8;
        let body = bytes.get(12..end).ok_or("truncated chunk")?;
        let words: Vec<u64> = body.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
        let raw = Chunk { words, bits, count, ..Chunk::default() };
        // Decode with bounds checks, then re-encode to rebuild the encoder state; the result
        // must be the same stream.
        let samples = raw.checked_samples()?;
        let c = Chunk::from_samples(&samples);
        if c.bits != bits || c.words != raw.words {
            return Err("chunk stream does not re-encode to itself");
        }
        Ok((c, end))
    }

    fn checked_samples(&self) -> Result<Vec<(u64, f64)>, &'static str> {
        // A stream that is too short for its count would read past the end: bound the
        // reads by checking the position against `bits` after each sample.
        let mut it = self.iter();
        let mut out = Vec::with_capacity(self.count.min(1 << 20) as usize);
        let mut last: Option<u64> = None;
        for _ in 0..self.count {
            if it.at > self.bits {
                return Err("chunk stream shorter than its count");
            }
            let s = it.next_checked().ok_or("chunk stream shorter than its count")?;
            if last.is_some_and(|l| s.0 <= l) {
                return Err("chunk timestamps not increasing");
            }
            last = Some(s.0);
            out.push(s);
        }
        if it.at != self.bits {
            return Err("chunk stream longer than its count");
        }
        Ok(out)
    }
}

/// Decodes a chunk front to back.
pub struct ChunkIter<'a> {
    c: &'a Chunk,
    at: u64,
    left: u32,
    t: u64,
    delta: i64,
    v: u64,
    lead: u8,
    len: u8,
}

impl ChunkIter<'_> {
    /// The next 64 bits of the stream from the cursor (zeros past the last word), without
    /// consuming them: a sample's control bits are read from one window, not bit by bit.
    #[inline]
    fn peek(&self) -> u64 {
        let w = (self.at / 64) as usize;
        let off = (self.at % 64) as u32;
        let words = &self.c.words;
        let first = words.get(w).copied().unwrap_or(0) << off;
        if off == 0 {
            first
        } else {
            first | (words.get(w + 1).copied().unwrap_or(0) >> (64 - off))
        }
    }

    /// Consumes `n` bits (1 to 64) and returns them.
    #[inline]
    fn take(&mut self, n: u32) -> u64 {
        let v = self.peek() >> (64 - n);
        self.at += u64::from(n);
        v
    }

    /// The next sample; `None` when none is left or the stream is malformed (too short for
    /// its count, or a value window that cannot be). Reads never go past the words: a read
    /// beyond `bits` sees zeros and is caught by the position check at the end.
    #[inline]
    fn next_checked(&mut self) -> Option<(u64, f64)> {
        if self.left == 0 {
            return None;
        }
        if self.left != self.c.count {
            if let Some(s) = self.next_fast() {
                return Some(s);
            }
        }
        self.next_slow()
    }

    /// A later sample (not the first) decoded from one 128-bit window of the stream, read
    /// once, where [`Self::next_slow`] reads the words again for every field: `None`, with
    /// nothing consumed, when the window may not hold it (a 64-bit timestamp change) or the
    /// stream is malformed there, for the slow path to decode or refuse. Past the last
    /// word the window reads zeros, as the slow path does. Why: a one-day waterfall reads ~7 samples per
    /// series from a chunk's start: callgrind counted 157 instructions per sample on the slow
    /// path (a quarter of the request's instructions), 143 on this one (its variable u128
    /// shifts take several instructions each; two u64 windows instead measured the same).
    #[inline]
    fn next_fast(&mut self) -> Option<(u64, f64)> {
        let w = (self.at / 64) as usize;
        let words = &self.c.words;
        let [a, b, c] = [w, w + 1, w + 2].map(|i| words.get(i).copied().unwrap_or(0));
        let off = (self.at % 64) as u32;
        let (hi, lo) = if off == 0 { (a, b) } else { ((a << off) | (b >> (64 - off)), (b << off) | (c >> (64 - off))) };
        let win = (u128::from(hi) << 64) | u128::from(lo);
        // The timestamp's prefix and delta-of-delta: at most 5 + 32 bits here, so that with
        // the value's at most 2 + 12 + 64 the sample fits the window's 128.
        let ones = hi.leading_ones();
        if ones >= 5 {
            return None;
        }
        let mut used = ones + 1;
        // `n` (1 to 64) bits of the window from `used`.
        let take = |used: &mut u32, n: u32| -> u64 {
            let v = ((win << *used) >> (128 - n)) as u64;
            *used += n;
            v
        };
        let z = match ones {
            0 => 0,
            1 => take(&mut used, 7),
            2 => take(&mut used, 9),
            3 => take(&mut used, 12),
            _ => take(&mut used, 32),
        };
        let dod = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let delta = self.delta.wrapping_add(dod);
        let t = self.t.wrapping_add(delta as u64);
        let (mut lead, mut len, mut v) = (self.lead, self.len, self.v);
        let ctl = take(&mut used, 1);
        if ctl == 1 {
            if take(&mut used, 1) == 1 {
                lead = take(&mut used, 6) as u8;
                len = take(&mut used, 6) as u8 + 1;
            }
            if len == 0 || u32::from(lead) + u32::from(len) > 64 {
                return None;
            }
            let trail = 64 - u32::from(lead) - u32::from(len);
            v ^= take(&mut used, u32::from(len)) << trail;
        }
        let at = self.at + u64::from(used);
        if at > self.c.bits {
            return None;
        }
        (self.at, self.t, self.delta, self.v, self.lead, self.len) = (at, t, delta, v, lead, len);
        self.left -= 1;
        Some((t, f64::from_bits(v)))
    }

    /// [`Self::next_checked`] field by field, for any sample and any stream.
    fn next_slow(&mut self) -> Option<(u64, f64)> {
        if self.left == self.c.count {
            self.t = self.take(64);
            self.v = self.take(64);
        } else {
            let ones = self.peek().leading_ones().min(5);
            // The prefix: `ones` ones, then a zero unless there are five.
            self.at += u64::from(ones) + u64::from(ones < 5);
            let z = match ones {
                0 => 0,
                1 => self.take(7),
                2 => self.take(9),
                3 => self.take(12),
                4 => self.take(32),
                _ => self.take(64),
            };
            let dod = ((z >> 1) as i64) ^ -((z & 1) as i64);
            self.delta = self.delta.wrapping_add(dod);
            self.t = self.t.wrapping_add(self.delta as u64);
            let ctl = self.peek() >> 62;
            if ctl < 2 {
                self.at += 1;
            } else {
                self.at += 2;
                if ctl == 2 {
                    if self.len == 0 {
                        return None;
                    }
                } else {
                    self.lead = self.take(6) as u8;
                    self.len = self.take(6) as u8 + 1;
                    if u32::from(self.lead) + u32::from(self.len) > 64 {
                        return None;
                    }
                }
                let trail = 64 - u32::from(self.lead) - u32::from(self.len);
                self.v ^= self.take(u32::from(self.len)) << trail;
            }
        }
        if self.at > self.c.bits {
            return None;
        }
        self.left -= 1;
        Some((self.t, f64::from_bits(self.v)))
    }
}

impl Iterator for ChunkIter<'_> {
    type Item = (u64, f64);

    fn next(&mut self) -> Option<(u64, f64)> {
        self.next_checked()
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;
    use proptest::prelude::*;

    /// Every sample up to and including the first `None`: through `next_checked` (the fast
    /// path where it applies) or through the slow path alone.
    fn decode(c: &Chunk, fast: bool) -> Vec<Option<(u64, u64)>> {
        let mut it = c.iter();
        let mut out = Vec::new();
        loop {
            let s = if fast || it.left == 0 { it.next_checked() } else { it.next_slow() };
            out.push(s.map(|(t, v)| (t, v.to_bits())));
            if s.is_none() {
                return out;
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 2000 }))]

        /// The fast path decodes exactly as the slow one, on real chunks with bits flipped
        /// and on arbitrary words, counts and lengths (a corrupt RESTORE payload): the same
        /// samples, and the same first refusal.
        #[test]
        fn fast_path_decodes_as_the_slow_one(
            samples in proptest::collection::vec((0u64..1 << 40, any::<f64>(), 0u8..4), 0..60),
            flips in proptest::collection::vec(0usize..4096, 0..3),
            junk in proptest::collection::vec(any::<u64>(), 0..10),
            count in 0u32..80,
            cut in 0u64..700,
        ) {
            // Increasing timestamps with every kind of gap, values repeated or changed.
            let mut t = 0u64;
            let mut prev = 0.0;
            let samples: Vec<(u64, f64)> = samples.iter().map(|&(gap, v, kind)| {
                t += match kind { 0 => 1000, 1 => 1 + gap % 100, 2 => 1 + gap % 100_000, _ => 1 + gap };
                prev = if kind == 0 { prev } else { v };
                (t, prev)
            }).collect();
            let mut c = Chunk::from_samples(&samples);
            prop_assert_eq!(decode(&c, true), decode(&c, false));
            for f in flips {
                if let Some(w) = c.words.get_mut(f / 64) {
                    *w ^= 1 << (f % 64);
                }
            }
            prop_assert_eq!(decode(&c, true), decode(&c, false));
            let bits = cut.min(junk.len() as u64 * 64);
            let raw = Chunk { words: junk, bits, count, ..Chunk::default() };
            prop_assert_eq!(decode(&raw, true), decode(&raw, false));
        }
    }
}

#[cfg(test)]
mod fast_path_prices {
    use super::*;

    /// Daily prices with four decimals and missing days (W7's shape): every sample back,
    /// through the fast path's window reuse (`10`) and 32-bit timestamp changes.
    #[test]
    fn prices_decode() {
        let mut s = Vec::new();
        let mut x = 100.0f64;
        let mut rng = 12345u64;
        let mut t = 1_700_006_400_000u64;
        for _ in 0..400 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            t += 86_400_000 * (1 + (rng >> 62));
            x *= 1.0 + ((rng >> 20) % 2000) as f64 / 100000.0 - 0.01;
            s.push((t, (x * 10000.0).round() / 10000.0));
        }
        let c = Chunk::from_samples(&s);
        let back: Vec<(u64, f64)> = c.iter().collect();
        assert_eq!(back.len(), s.len());
        for (i, (a, b)) in back.iter().zip(&s).enumerate() {
            assert_eq!((a.0, a.1.to_bits()), (b.0, b.1.to_bits()), "sample {i}");
        }
        for &(t, v) in &s {
            assert_eq!(c.get(t).map(f64::to_bits), Some(v.to_bits()));
        }
    }
}
