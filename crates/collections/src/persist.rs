//! Byte forms of [`IdSet`] and [`CompactHash`] for snapshots.
//!
//! The encoding is kept (a bitmap set stays a bitmap, a listpack a listpack), so OBJECT
//! ENCODING answers the same after a restart and loading never re-decides conversions.
//! Bitmaps use the portable Roaring format (what CRoaring and the Java library read too);
//! members and pairs are length-prefixed. All integers are little-endian.
//!
//! Decoding is strict: a truncated or inconsistent input is an error, never a panic. The
//! snapshot reader checks a checksum first, so an error here means a bug or a forged file.

use std::io::Cursor;

use roaring::RoaringTreemap;

use crate::hash::{self};
use crate::idset::{self, Repr};
use crate::{CompactHash, IdSet};

const TAG_BITMAP: u8 = 0;
const TAG_LISTPACK: u8 = 1;
const TAG_HASHTABLE: u8 = 2;

/// Why a byte form could not be decoded.
pub type DecodeError = &'static str;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// A bounds-checked reader over a byte form.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("truncated collection")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| "truncated collection")?))
    }

    fn bytes(&mut self) -> Result<Box<[u8]>, DecodeError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.into())
    }

    /// A count of items that each take at least `min_item_bytes`: bounded by what is left, so
    /// a forged count cannot make us reserve gigabytes.
    fn count(&mut self, min_item_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item_bytes) > self.bytes.len() - self.at {
            return Err("collection count exceeds its bytes");
        }
        Ok(n)
    }

    fn finish(&self) -> Result<(), DecodeError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err("trailing bytes after collection")
        }
    }
}

impl IdSet {
    /// Appends the byte form of the set to `out`.
    pub fn serialize_into(&self, out: &mut Vec<u8>) {
        match &self.repr {
            Repr::Bitmap(bitmap) => {
                out.push(TAG_BITMAP);
                out.extend_from_slice(&(bitmap.serialized_size() as u64).to_le_bytes());
                // Writing into a Vec cannot fail.
                let _ = bitmap.serialize_into(&mut *out);
            }
            Repr::Listpack(list) => {
                out.push(TAG_LISTPACK);
                out.extend_from_slice(&(list.len() as u32).to_le_bytes());
                for m in list {
                    put_bytes(out, m);
                }
            }
            Repr::Hashtable(table) => {
                out.push(TAG_HASHTABLE);
                out.extend_from_slice(&(table.members.len() as u32).to_le_bytes());
                for m in &table.members {
                    put_bytes(out, m);
                }
            }
        }
    }

    /// Decodes what [`IdSet::serialize_into`] wrote (the whole of `bytes`).
    pub fn deserialize(bytes: &[u8]) -> Result<IdSet, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let set = match r.u8()? {
            TAG_BITMAP => {
                let n = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| "truncated collection")?);
                let n = usize::try_from(n).map_err(|_| "bitmap too large")?;
                let raw = r.take(n)?;
                let bitmap = RoaringTreemap::deserialize_from(Cursor::new(raw)).map_err(|_| "corrupt roaring bitmap")?;
                IdSet::from_bitmap(bitmap)
            }
            TAG_LISTPACK => {
                let n = r.count(4)?;
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    list.push(r.bytes()?);
                }
                IdSet { repr: Repr::Listpack(list) }
            }
            TAG_HASHTABLE => {
                let n = r.count(4)?;
                let mut table = idset::Table::with_capacity(n);
                for _ in 0..n {
                    if !table.insert(r.bytes()?) {
                        return Err("duplicate set member");
                    }
                }
                IdSet { repr: Repr::Hashtable(table) }
            }
            _ => return Err("unknown set encoding"),
        };
        r.finish()?;
        Ok(set)
    }
}

impl CompactHash {
    /// Appends the byte form of the hash to `out`.
    pub fn serialize_into(&self, out: &mut Vec<u8>) {
        out.push(if self.is_listpack() { TAG_LISTPACK } else { TAG_HASHTABLE });
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        for (f, v) in self.iter() {
            put_bytes(out, f);
            put_bytes(out, v);
        }
    }

    /// Decodes what [`CompactHash::serialize_into`] wrote (the whole of `bytes`).
    pub fn deserialize(bytes: &[u8]) -> Result<CompactHash, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let tag = r.u8()?;
        if tag != TAG_LISTPACK && tag != TAG_HASHTABLE {
            return Err("unknown hash encoding");
        }
        let n = r.count(8)?;
        let mut pairs = Vec::with_capacity(n);
        for _ in 0..n {
            let f = r.bytes()?;
            let v = r.bytes()?;
            pairs.push((f, v));
        }
        r.finish()?;
        hash::from_pairs(pairs, tag == TAG_LISTPACK).ok_or("duplicate hash field")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EncodingLimits;

    fn round_trip_set(s: &IdSet) {
        let mut out = Vec::new();
        s.serialize_into(&mut out);
        let back = IdSet::deserialize(&out).unwrap();
        assert_eq!(back.encoding(), s.encoding());
        assert_eq!(back.len(), s.len());
        assert!(s.iter().all(|m| back.contains(&m)));
        for cut in 0..out.len() {
            assert!(IdSet::deserialize(&out[..cut]).is_err(), "truncated at {cut} accepted");
        }
    }

    #[test]
    fn sets_round_trip_in_every_encoding() {
        let mut bitmap = IdSet::new();
        for i in [1u64, 5, 1 << 40, 77] {
            bitmap.insert(i.to_string().as_bytes());
        }
        round_trip_set(&bitmap);
        let mut listpack = IdSet::new();
        listpack.insert(b"a");
        listpack.insert(b"bb");
        round_trip_set(&listpack);
        let mut table = IdSet::new();
        let limits = EncodingLimits { max_listpack_entries: 2, max_listpack_value_bytes: 64 };
        for m in ["x", "y", "z", "w"] {
            table.insert_with_limits(m.as_bytes(), &limits);
        }
        assert_eq!(table.encoding(), "hashtable");
        round_trip_set(&table);
        round_trip_set(&IdSet::new());
    }

    #[test]
    fn hashes_round_trip_in_every_encoding() {
        let mut small = CompactHash::new();
        small.insert(b"f", b"v");
        small.insert(b"g", b"");
        let limits = EncodingLimits { max_listpack_entries: 1, max_listpack_value_bytes: 64 };
        let mut big = CompactHash::new();
        big.insert_with_limits(b"a", b"1", &limits);
        big.insert_with_limits(b"b", b"2", &limits);
        assert_eq!(big.encoding(), "hashtable");
        for h in [&small, &big] {
            let mut out = Vec::new();
            h.serialize_into(&mut out);
            let back = CompactHash::deserialize(&out).unwrap();
            assert_eq!(back.encoding(), h.encoding());
            assert!(h.iter().all(|(f, v)| back.get(f) == Some(v)) && back.len() == h.len());
            for cut in 0..out.len() {
                assert!(CompactHash::deserialize(&out[..cut]).is_err());
            }
        }
    }

    #[test]
    fn forged_counts_and_tags_are_errors() {
        assert!(IdSet::deserialize(&[9]).is_err());
        assert!(IdSet::deserialize(&[TAG_LISTPACK, 255, 255, 255, 255]).is_err());
        assert!(CompactHash::deserialize(&[TAG_HASHTABLE, 255, 255, 255, 255]).is_err());
        assert!(IdSet::deserialize(&[TAG_BITMAP, 3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]).is_err());
    }
}
