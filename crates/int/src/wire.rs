//! The little-endian layout of the partial states cluster nodes send each other for a
//! cluster-wide query (the server's `fanout.rs`: summary groups, attribution sums, waterfall
//! parts): fixed-width integers, length-prefixed (u32) byte strings, and numbers exactly
//! (a decimal as its mantissa and scale, a double as its bits). A [`Reader`] answers None
//! for bytes that end early or do not decode, never panics.

use crate::{Dec, Number};

pub fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len());
    out.extend_from_slice(b);
}

pub fn put_number(out: &mut Vec<u8>, x: Number) {
    match x {
        Number::Dec(d) => {
            out.push(0);
            out.extend_from_slice(&d.mantissa().to_le_bytes());
            out.push(d.scale());
        }
        Number::Float(f) => {
            out.push(1);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
    }
}

/// Reads what the `put_*` functions wrote, front to back.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// A length or count written by [`put_u32`].
    pub fn len(&mut self) -> Option<usize> {
        Some(self.u32()? as usize)
    }

    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn f64(&mut self) -> Option<f64> {
        Some(f64::from_bits(self.u64()?))
    }

    /// A byte string written by [`put_bytes`].
    pub fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.len()?;
        Some(self.take(n)?.to_vec())
    }

    /// A number written by [`put_number`].
    pub fn number(&mut self) -> Option<Number> {
        match self.byte()? {
            0 => {
                let m = i128::from_le_bytes(self.take(16)?.try_into().ok()?);
                Some(Number::Dec(Dec::new(m, self.byte()?)?))
            }
            1 => Some(Number::Float(self.f64()?)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_input() {
        let mut out = Vec::new();
        put_bytes(&mut out, b"abc");
        put_number(&mut out, Number::parse(b"20081.07").unwrap());
        put_number(&mut out, Number::Float(0.1 + 0.2));
        out.extend_from_slice(&7i64.to_le_bytes());
        let mut r = Reader(&out);
        assert_eq!(r.bytes().unwrap(), b"abc");
        assert_eq!(r.number(), Number::parse(b"20081.07"));
        assert_eq!(r.number(), Some(Number::Float(0.1 + 0.2)));
        assert_eq!(r.i64(), Some(7));
        assert!(r.is_empty());
        for cut in 0..out.len() {
            let mut r = Reader(&out[..cut]);
            let whole = r.bytes().is_some() && r.number().is_some() && r.number().is_some() && r.i64().is_some();
            assert!(!whole, "cut at {cut}");
        }
    }
}
