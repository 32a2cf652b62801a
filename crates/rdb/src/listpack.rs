//! Redis's packed containers inside RDB values: listpack (Redis 7's), and for reading older
//! payloads ziplist and intset.
//!
//! Listpack layout (`listpack.c`): total bytes (u32 LE), element count (u16 LE, 65535 when
//! not known), the entries, then 0xFF. Each entry is an encoding byte with its data, then
//! "backlen", the entry's size (encoding + data) in 1 to 5 bytes read backwards. Integers
//! come in 7, 13, 16, 24, 32 and 64 bits; strings with 6-, 12- or 32-bit lengths. A writer
//! stores every string that is a canonical integer as an integer, as `lpAppend` does.
//!
//! Everything read is checked against the container's bounds: a malformed container is an
//! error, never a panic or an out-of-bounds read.

use abacus_int::string2ll;

/// Why a packed container was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Decodes a listpack into its entries (integers as their decimal text).
pub fn lp_decode(lp: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    if lp.len() < 7 {
        return Err(Malformed);
    }
    let total = u32::from_le_bytes(lp[0..4].try_into().unwrap()) as usize;
    let count = u16::from_le_bytes(lp[4..6].try_into().unwrap()) as usize;
    if total != lp.len() || lp[total - 1] != 0xFF {
        return Err(Malformed);
    }
    let body = &lp[6..total - 1];
    let mut out = Vec::with_capacity(if count == 65535 { 0 } else { count.min(body.len()) });
    let mut i = 0;
    while i < body.len() {
        let start = i;
        let b = body[i];
        let (value, len): (Vec<u8>, usize) = if b & 0x80 == 0 {
            (fmt_int((b & 0x7f) as i64), 1)
        } else if b & 0xC0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (slice(body, i + 1, n)?.to_vec(), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            let hi = ((b & 0x1f) as u64) << 8;
            let v = hi | *body.get(i + 1).ok_or(Malformed)? as u64;
            (fmt_int(sign_extend(v, 13)), 2)
        } else if b & 0xF0 == 0xE0 {
            let n = (((b & 0x0f) as usize) << 8) | *body.get(i + 1).ok_or(Malformed)? as usize;
            (slice(body, i + 2, n)?.to_vec(), 2 + n)
        } else {
            match b {
                0xF0 => {
                    let n = u32::from_le_bytes(slice(body, i + 1, 4)?.try_into().unwrap()) as usize;
                    (slice(body, i + 5, n)?.to_vec(), 5 + n)
                }
                0xF1 => (fmt_int(le_int(slice(body, i + 1, 2)?, 16)), 3),
                0xF2 => (fmt_int(le_int(slice(body, i + 1, 3)?, 24)), 4),
                0xF3 => (fmt_int(le_int(slice(body, i + 1, 4)?, 32)), 5),
                0xF4 => (fmt_int(le_int(slice(body, i + 1, 8)?, 64)), 9),
                _ => return Err(Malformed),
            }
        };
        i = start + len;
        // The backlen must say the entry's size (Redis's lpValidateNext checks it too).
        let bl = backlen_size(len);
        let back = slice(body, i, bl)?;
        if decode_backlen(back) != Some(len as u64) {
            return Err(Malformed);
        }
        i += bl;
        out.push(value);
    }
    if count != 65535 && count != out.len() {
        return Err(Malformed);
    }
    Ok(out)
}

fn slice(b: &[u8], at: usize, n: usize) -> Result<&[u8], Malformed> {
    b.get(at..at.checked_add(n).ok_or(Malformed)?).ok_or(Malformed)
}

fn le_int(b: &[u8], bits: u32) -> i64 {
    let mut v: u64 = 0;
    for (k, &x) in b.iter().enumerate() {
        v |= (x as u64) << (8 * k);
    }
    sign_extend(v, bits)
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    if bits == 64 {
        return v as i64;
    }
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

fn fmt_int(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Reads a backlen written forwards as `lpEncodeBacklen` lays it out (most significant group
/// first, every byte but the first with its high bit set).
fn decode_backlen(b: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for (k, &x) in b.iter().enumerate() {
        if (k > 0) != (x & 0x80 != 0) {
            return None;
        }
        v = (v << 7) | (x & 0x7f) as u64;
    }
    Some(v)
}

fn encode_backlen(out: &mut Vec<u8>, l: usize) {
    let n = backlen_size(l);
    for k in (0..n).rev() {
        let group = ((l >> (7 * k)) & 0x7f) as u8;
        out.push(if k == n - 1 { group } else { group | 0x80 });
    }
}

/// Builds a listpack incrementally, as `lpAppend` would.
pub struct LpWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for LpWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl LpWriter {
    pub fn new() -> LpWriter {
        LpWriter { buf: vec![0; 6], count: 0 }
    }

    /// Bytes the finished listpack would take now.
    pub fn len_bytes(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Appends an element: an integer when `s` is a canonical integer, else a string.
    pub fn push(&mut self, s: &[u8]) {
        let start = self.buf.len();
        match string2ll(s) {
            Some(v) => self.push_int(v),
            None => {
                let n = s.len();
                if n < 64 {
                    self.buf.push(0x80 | n as u8);
                } else if n < 4096 {
                    self.buf.push(0xE0 | (n >> 8) as u8);
                    self.buf.push(n as u8);
                } else {
                    self.buf.push(0xF0);
                    self.buf.extend_from_slice(&(n as u32).to_le_bytes());
                }
                self.buf.extend_from_slice(s);
            }
        }
        let len = self.buf.len() - start;
        encode_backlen(&mut self.buf, len);
        self.count += 1;
    }

    fn push_int(&mut self, v: i64) {
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8388608..=8388607).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if i32::try_from(v).is_ok() {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xFF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = if self.count < 65535 { self.count as u16 } else { 65535 };
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Decodes a ziplist (Redis before 7.0: lists, hashes and sorted sets of old RDB files).
pub fn zl_decode(zl: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    if zl.len() < 11 {
        return Err(Malformed);
    }
    let total = u32::from_le_bytes(zl[0..4].try_into().unwrap()) as usize;
    let count = u16::from_le_bytes(zl[8..10].try_into().unwrap()) as usize;
    if total != zl.len() || zl[total - 1] != 0xFF {
        return Err(Malformed);
    }
    let body = &zl[10..total - 1];
    let mut out = Vec::new();
    let mut i = 0;
    while i < body.len() {
        // prevlen: one byte, or 0xFE and four.
        i += if body[i] < 254 { 1 } else { 5 };
        let b = *body.get(i).ok_or(Malformed)?;
        let value = match b >> 6 {
            0 => {
                let n = (b & 0x3f) as usize;
                let v = slice(body, i + 1, n)?.to_vec();
                i += 1 + n;
                v
            }
            1 => {
                let n = (((b & 0x3f) as usize) << 8) | *body.get(i + 1).ok_or(Malformed)? as usize;
                let v = slice(body, i + 2, n)?.to_vec();
                i += 2 + n;
                v
            }
            2 => {
                let n = u32::from_be_bytes(slice(body, i + 1, 4)?.try_into().unwrap()) as usize;
                let v = slice(body, i + 5, n)?.to_vec();
                i += 5 + n;
                v
            }
            _ => {
                let (v, n) = match b {
                    0xC0 => (le_int(slice(body, i + 1, 2)?, 16), 2),
                    0xD0 => (le_int(slice(body, i + 1, 4)?, 32), 4),
                    0xE0 => (le_int(slice(body, i + 1, 8)?, 64), 8),
                    0xF0 => (le_int(slice(body, i + 1, 3)?, 24), 3),
                    0xFE => (le_int(slice(body, i + 1, 1)?, 8), 1),
                    0xF1..=0xFD => ((b & 0x0f) as i64 - 1, 0),
                    _ => return Err(Malformed),
                };
                i += 1 + n;
                fmt_int(v)
            }
        };
        out.push(value);
    }
    if count != 65535 && count != out.len() {
        return Err(Malformed);
    }
    Ok(out)
}

/// Decodes an intset: encoding width (u32 LE: 2, 4 or 8), count (u32 LE), sorted values.
pub fn intset_decode(is: &[u8]) -> Result<Vec<i64>, Malformed> {
    if is.len() < 8 {
        return Err(Malformed);
    }
    let width = u32::from_le_bytes(is[0..4].try_into().unwrap()) as usize;
    let count = u32::from_le_bytes(is[4..8].try_into().unwrap()) as usize;
    if !matches!(width, 2 | 4 | 8) || Some(is.len() - 8) != count.checked_mul(width) {
        return Err(Malformed);
    }
    let values: Vec<i64> = is[8..].chunks_exact(width).map(|c| le_int(c, 8 * width as u32)).collect();
    // Sorted and unique, as intsetValidateIntegrity's deep check requires.
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Malformed);
    }
    Ok(values)
}

/// Encodes sorted, unique integers as an intset of the narrowest width that holds them all.
pub fn intset_encode(values: &[i64]) -> Vec<u8> {
    debug_assert!(values.windows(2).all(|w| w[0] < w[1]));
    let width: usize = if values.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if values.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for &v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(items: &[&[u8]]) -> Vec<u8> {
        let mut w = LpWriter::new();
        for i in items {
            w.push(i);
        }
        w.finish()
    }

    #[test]
    fn listpack_round_trips_every_encoding() {
        let long12 = vec![b'x'; 100];
        let long32 = vec![b'y'; 5000];
        let items: Vec<&[u8]> = vec![
            b"0", b"127", b"128", b"-1", b"-4096", b"4095", b"4096", b"-32768", b"32767", b"40000",
            b"-8388608", b"8388607", b"9000000", b"2147483647", b"-2147483648", b"2147483648",
            b"9223372036854775807", b"-9223372036854775808", b"", b"abc", b"007", b"-0", &long12, &long32,
        ];
        let bytes = lp(&items);
        let back = lp_decode(&bytes).unwrap();
        assert_eq!(back, items.iter().map(|i| i.to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn listpack_bytes_match_redis() {
        // lpNew + lpAppend "a", 1, -1 as Redis 7.0 lays them out.
        let bytes = lp(&[b"a", b"1", b"-1"]);
        assert_eq!(
            bytes,
            vec![15, 0, 0, 0, 3, 0, 0x81, b'a', 2, 1, 1, 0xDF, 0xFF, 2, 0xFF]
        );
    }

    #[test]
    fn listpack_malformed_is_refused() {
        let good = lp(&[b"abc", b"12"]);
        for cut in 0..good.len() {
            assert!(lp_decode(&good[..cut]).is_err());
        }
        let mut bad = good.clone();
        bad[4] = 5; // wrong count
        assert!(lp_decode(&bad).is_err());
        let mut bad = good;
        bad[6] = 0x80 | 40; // string longer than the container
        assert!(lp_decode(&bad).is_err());
    }

    #[test]
    fn intset_round_trips_and_checks_order() {
        for vals in [vec![1i64, 2, 3], vec![-40000, 5], vec![i64::MIN, 0, i64::MAX]] {
            assert_eq!(intset_decode(&intset_encode(&vals)).unwrap(), vals);
        }
        let mut bad = intset_encode(&[1, 2]);
        bad.swap(8, 10);
        assert!(intset_decode(&bad).is_err());
    }

    #[test]
    fn ziplist_decodes() {
        // A ziplist of "a", 5 (immediate), 300 (int16) built by hand to the spec.
        let mut body = vec![0u8, 0x01, b'a', 3, 0xF6, 2, 0xC0];
        body.extend_from_slice(&300i16.to_le_bytes());
        let total = 10 + body.len() + 1;
        let mut zl = (total as u32).to_le_bytes().to_vec();
        zl.extend_from_slice(&0u32.to_le_bytes());
        zl.extend_from_slice(&3u16.to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xFF);
        assert_eq!(zl_decode(&zl).unwrap(), vec![b"a".to_vec(), b"5".to_vec(), b"300".to_vec()]);
    }
}
