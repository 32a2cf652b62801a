//! Most-significant-bit-first packing of fixed-width words into bytes.
//!
//! Both the SPARSE and FULL payloads are a sequence of words of `width` bits
//! (at most 31 + 8 = 39) written MSB first into consecutive bytes, the last
//! byte zero-padded in its low bits. A u64 accumulator holds the bits not yet
//! flushed: it never has more than 7 pending bits plus one word (< 47 bits).

/// Appends words to a byte vector.
pub(crate) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    pending: u32,
}

impl<'a> BitWriter<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        BitWriter {
            out,
            acc: 0,
            pending: 0,
        }
    }

    /// Writes the low `width` bits of `word` (`word` must fit in `width` bits).
    #[inline]
    pub(crate) fn write(&mut self, word: u64, width: u32) {
        debug_assert!(width <= 39 && word >> width == 0);
        // Bits above `pending + width` fall off the top: they were flushed.
        self.acc = (self.acc << width) | word;
        self.pending += width;
        while self.pending >= 8 {
            self.pending -= 8;
            self.out.push((self.acc >> self.pending) as u8);
        }
    }

    /// Flushes the last partial byte, zero-padded in its low bits.
    pub(crate) fn finish(self) {
        if self.pending > 0 {
            self.out.push((self.acc << (8 - self.pending)) as u8);
        }
    }
}

/// Reads words from a byte slice; the caller checks lengths beforehand, so
/// reading past the end is a bug (it yields zero bits, never panics).
pub(crate) struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    acc: u64,
    avail: u32,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        BitReader {
            bytes,
            pos: 0,
            acc: 0,
            avail: 0,
        }
    }

    /// Reads the next `width`-bit word (width <= 39).
    #[inline]
    pub(crate) fn read(&mut self, width: u32) -> u64 {
        while self.avail < width {
            let byte = self.bytes.get(self.pos).copied().unwrap_or(0);
            self.pos += 1;
            self.acc = (self.acc << 8) | u64::from(byte);
            self.avail += 8;
        }
        self.avail -= width;
        (self.acc >> self.avail) & ((1u64 << width) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_widths() {
        for width in 1..=39u32 {
            let words: Vec<u64> = (0..50u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - width))
                .collect();
            let mut out = Vec::new();
            let mut w = BitWriter::new(&mut out);
            for &x in &words {
                w.write(x, width);
            }
            w.finish();
            assert_eq!(out.len() as u32, (50 * width).div_ceil(8));
            let mut r = BitReader::new(&out);
            for &x in &words {
                assert_eq!(r.read(width), x);
            }
        }
    }

    #[test]
    fn msb_first_with_zero_padding() {
        let mut out = Vec::new();
        let mut w = BitWriter::new(&mut out);
        w.write(0b101, 3);
        w.write(0b1, 1);
        w.write(0b11, 2);
        w.finish();
        assert_eq!(out, vec![0b1011_1100]);
    }
}
