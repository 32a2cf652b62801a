//! Redis's RDB serialization of one value, as Redis 7.0 writes it (RDB version 10), and the
//! DUMP payload built on it.
//!
//! What it is for: DUMP/RESTORE (a value travels between Abacus and Redis in Redis's own
//! format), and as the value layer of a whole-file RDB reader (migration) and of replication's
//! full sync. A file reader adds the file header, the opcodes (SELECTDB, EXPIRETIME_MS, AUX,
//! RESIZEDB, EOF) and the key strings around [`Reader::read_object`]; this crate exposes the
//! primitives it needs ([`Reader`], [`write_length`], [`write_string`]).
//!
//! The whole-file framing (header, opcodes, EOF checksum) is [`file`], over the same
//! [`Reader::read_object`]: one value decoder for DUMP payloads and RDB files.
//!
//! What it is not: a server. It does no I/O and knows nothing of Abacus's
//! keyspace: values cross this boundary as [`RdbValue`], plain owned vectors. Building them
//! costs a copy of the value, which DUMP pays anyway (it builds the whole payload in memory,
//! as Redis does); a reader of multi-gigabyte files may later want a streaming visitor.
//!
//! Reading accepts every encoding Redis 7.0 writes and the older ones a Redis 7.0 still loads
//! (linked-list lists, ziplists, quicklist v1, intsets, text-score sorted sets) and Redis
//! 7.2's listpack sets. Writing picks what Redis 7.0 would write for the same value under the
//! given [`Limits`]: int-encoded and LZF-compressed strings, quicklist v2 of listpack nodes,
//! intset or hashtable sets, listpack or skiplist sorted sets (binary doubles), listpack or
//! hashtable hashes.
//!
//! Abacus-only types (see [`RdbValue::Abacus`]) use a type byte Redis does not know, so a
//! Redis RESTORE of such a payload fails cleanly with "Bad data format".
//!
//! Every length read is checked against the bytes left and against [`DecodeLimits`], so a
//! hostile payload gets an error, never a panic or an allocation larger than the limit.
//!
//! ```
//! use abacus_rdb::{dump, restore, DecodeLimits, Limits, RdbValue};
//!
//! // What `DUMP` returns for a hash, and what `RESTORE` accepts back.
//! let value = RdbValue::Hash(vec![(b"field".to_vec(), b"42".to_vec())]);
//! let payload = dump(&value, &Limits::default());
//! assert_eq!(payload[0], abacus_rdb::types::HASH_LISTPACK);
//! assert_eq!(restore(&payload, &DecodeLimits::default()).unwrap(), value);
//! // One flipped bit fails the CRC64 footer.
//! let mut bad = payload.clone();
//! bad[3] ^= 1;
//! assert_eq!(restore(&bad, &DecodeLimits::default()), Err(abacus_rdb::Error::Footer));
//! ```

#![forbid(unsafe_code)]

pub mod file;
pub mod listpack;
pub mod lzf;
pub mod stream;
#[cfg(test)]
mod tests;

use abacus_int::string2ll;
use listpack::{intset_decode, intset_encode, lp_decode, zl_decode, LpWriter};

/// The RDB version this crate writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version a payload may carry and still be read (Redis 7.2 writes 11 for
/// the same value encodings plus listpack sets, which are read).
pub const RDB_VERSION_READ_MAX: u16 = 11;

/// Object type bytes (`rdb.h`).
pub mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// Abacus's own types: one type byte far above Redis's (which end at 21 and whose
    /// opcodes start at 245), followed by a kind byte ([`super::RdbValue::Abacus`]).
    pub const ABACUS: u8 = 200;
}

/// Quicklist v2 node containers.
const QUICKLIST_NODE_PLAIN: u64 = 1;
const QUICKLIST_NODE_PACKED: u64 = 2;

/// A value in RDB terms. Members keep the order they have in the payload (a sorted set's
/// in the payload's order, not necessarily by score).
#[derive(Clone, Debug, PartialEq)]
pub enum RdbValue {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A stream with its consumer groups ([`stream`]).
    Stream(Box<stream::RdbStream>),
    /// An Abacus-only type: `kind` names it, `data` is its own serialization (the owner of the
    /// type defines both). Written as [`types::ABACUS`], `kind`, then `data` as an RDB string.
    Abacus { kind: u8, data: Vec<u8> },
}

/// When Redis 7.0 switches encodings: the server passes its configuration. The defaults are
/// Redis 7.0's.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// set-max-intset-entries: an all-integer set up to this size is written as an intset.
    pub set_max_intset_entries: usize,
    /// hash-max-listpack-entries / -value.
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    /// zset-max-listpack-entries / -value.
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    /// list-max-listpack-size: a node holds at most this many entries when positive, at most
    /// 4, 8, 16, 32 or 64 KiB when -1 to -5.
    pub list_max_listpack_size: i64,
    /// rdbcompression: LZF for strings longer than 20 bytes.
    pub compression: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            set_max_intset_entries: 512,
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            compression: true,
        }
    }
}

/// Bounds on what a payload may make the reader allocate.
#[derive(Clone, Copy, Debug)]
pub struct DecodeLimits {
    /// The longest string (after LZF decompression) a payload may hold.
    pub max_string_bytes: usize,
    /// The most bytes of strings one value may decode to in all: LZF expands up to ~100x,
    /// so without this bound a small payload of many compressed strings could claim far
    /// more memory than it carries.
    pub max_total_bytes: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        // Redis's proto-max-bulk-len default, and 8 times that for a whole value.
        DecodeLimits { max_string_bytes: 512 << 20, max_total_bytes: 4 << 30 }
    }
}

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The DUMP footer's version is too new, or the checksum does not match (Redis: "DUMP
    /// payload version or checksum are wrong").
    Footer,
    /// The bytes are not a well-formed value (Redis: "Bad data format").
    Format(&'static str),
    /// A type this reader does not decode (modules, zipmaps, an unknown Abacus kind
    /// is the caller's to refuse).
    Unsupported(u8),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Footer => write!(f, "DUMP payload version or checksum are wrong"),
            Error::Format(why) => write!(f, "bad data format: {why}"),
            Error::Unsupported(t) => write!(f, "unsupported RDB object type {t}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn bad(why: &'static str) -> Error {
    Error::Format(why)
}

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// Redis's `crc64(0, bytes)` (Jones polynomial, reflected, as `crc64.c`).
pub fn crc64(bytes: &[u8]) -> u64 {
    CRC64.checksum(bytes)
}

// ---------------------------------------------------------------- writing

/// Appends an RDB length (`rdbSaveLen`): 6 bits, 14 bits big-endian, or a 0x80 / 0x81 byte
/// and 32 or 64 bits big-endian.
pub fn write_length(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Appends a string as `rdbSaveRawString` does: an integer encoding when the bytes are a
/// canonical integer of up to 11 characters that fits 32 bits, else LZF when `compress` and
/// the string is longer than 20 bytes and shrinks by more than 4, else verbatim.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = string2ll(s) {
            if let Ok(b) = i8::try_from(v) {
                out.extend_from_slice(&[0xC0, b as u8]);
                return;
            } else if let Ok(h) = i16::try_from(v) {
                out.push(0xC1);
                out.extend_from_slice(&h.to_le_bytes());
                return;
            } else if let Ok(w) = i32::try_from(v) {
                out.push(0xC2);
                out.extend_from_slice(&w.to_le_bytes());
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            out.push(0xC3);
            write_length(out, c.len() as u64);
            write_length(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    write_length(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A score as Redis 7.0's `d2string` prints it into a listpack: integral values strictly
/// within ±(2^52 - 1) as integers (stored then as listpack integers), `inf`/`-inf`/`nan`,
/// `-0`, otherwise C's `%.17g`.
fn score_text(d: f64) -> Vec<u8> {
    if d.is_nan() {
        return b"nan".to_vec();
    }
    if d.is_infinite() {
        return if d < 0.0 { b"-inf".to_vec() } else { b"inf".to_vec() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() { b"-0".to_vec() } else { b"0".to_vec() };
    }
    if d > -4503599627370495.0 && d < 4503599627370496.0 && d.fract() == 0.0 {
        return (d as i64).to_string().into_bytes();
    }
    g17(d).into_bytes()
}

/// C's `printf("%.17g", d)` for a finite, non-zero `d` (Rust's formatting rounds exactly, as
/// glibc does).
fn g17(d: f64) -> String {
    let e = format!("{d:.16e}");
    let (mantissa, exp) = e.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let strip = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..17).contains(&exp) {
        let m = strip(format!("{}.{}", &digits[..1], &digits[1..]));
        format!("{sign}{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else if exp < 0 {
        format!("{sign}{}", strip(format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)))
    } else {
        let point = (exp + 1) as usize;
        format!("{sign}{}", strip(format!("{}.{}", &digits[..point], &digits[point..])))
    }
}

/// Node size limit of a quicklist under list-max-listpack-size `fill`: (entries, bytes).
fn list_node_limits(fill: i64) -> (usize, usize) {
    if fill > 0 {
        // Redis still caps a counted node at 8 KiB (SIZE_SAFETY_LIMIT).
        (fill as usize, 8192)
    } else {
        let bytes = match fill {
            -1 => 4096,
            -3 => 16384,
            -4 => 32768,
            -5 => 65536,
            _ => 8192,
        };
        (usize::MAX, bytes)
    }
}

/// Appends the value's type byte and object (what follows a key in an RDB file, and what a
/// DUMP payload holds before its footer).
pub fn write_value(out: &mut Vec<u8>, v: &RdbValue, limits: &Limits) {
    let compress = limits.compression;
    match v {
        RdbValue::String(s) => {
            out.push(types::STRING);
            write_string(out, s, compress);
        }
        RdbValue::List(items) => {
            let (max_entries, max_bytes) = list_node_limits(limits.list_max_listpack_size);
            let mut nodes = Vec::new();
            let mut lp = LpWriter::new();
            for item in items {
                if lp.count() > 0 && (lp.count() >= max_entries || lp.len_bytes() + item.len() + 11 > max_bytes) {
                    nodes.push(std::mem::take(&mut lp).finish());
                }
                lp.push(item);
            }
            if lp.count() > 0 {
                nodes.push(lp.finish());
            }
            out.push(types::LIST_QUICKLIST_2);
            write_length(out, nodes.len() as u64);
            for node in &nodes {
                write_length(out, QUICKLIST_NODE_PACKED);
                write_string(out, node, compress);
            }
        }
        RdbValue::Set(members) => {
            let ints: Option<Vec<i64>> = if members.len() <= limits.set_max_intset_entries {
                members.iter().map(|m| string2ll(m)).collect()
            } else {
                None
            };
            match ints {
                Some(mut ints) => {
                    ints.sort_unstable();
                    ints.dedup();
                    out.push(types::SET_INTSET);
                    write_string(out, &intset_encode(&ints), compress);
                }
                None => {
                    out.push(types::SET);
                    write_length(out, members.len() as u64);
                    for m in members {
                        write_string(out, m, compress);
                    }
                }
            }
        }
        RdbValue::ZSet(items) => {
            let small = items.len() <= limits.zset_max_listpack_entries
                && items.iter().all(|(m, _)| m.len() <= limits.zset_max_listpack_value);
            if small {
                // A listpack keeps members ordered by (score, member), as zzlInsert does.
                let mut sorted: Vec<&(Vec<u8>, f64)> = items.iter().collect();
                sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                let mut lp = LpWriter::new();
                for (m, s) in sorted {
                    lp.push(m);
                    lp.push(&score_text(*s));
                }
                out.push(types::ZSET_LISTPACK);
                write_string(out, &lp.finish(), compress);
            } else {
                out.push(types::ZSET_2);
                write_length(out, items.len() as u64);
                for (m, s) in items {
                    write_string(out, m, compress);
                    out.extend_from_slice(&s.to_le_bytes());
                }
            }
        }
        RdbValue::Hash(pairs) => {
            let small = pairs.len() <= limits.hash_max_listpack_entries
                && pairs.iter().all(|(f, v)| f.len() <= limits.hash_max_listpack_value && v.len() <= limits.hash_max_listpack_value);
            if small {
                let mut lp = LpWriter::new();
                for (f, v) in pairs {
                    lp.push(f);
                    lp.push(v);
                }
                out.push(types::HASH_LISTPACK);
                write_string(out, &lp.finish(), compress);
            } else {
                out.push(types::HASH);
                write_length(out, pairs.len() as u64);
                for (f, v) in pairs {
                    write_string(out, f, compress);
                    write_string(out, v, compress);
                }
            }
        }
        RdbValue::Stream(st) => {
            out.push(types::STREAM_LISTPACKS_2);
            stream::write_stream(out, st, compress);
        }
        RdbValue::Abacus { kind, data } => {
            out.push(types::ABACUS);
            out.push(*kind);
            write_string(out, data, compress);
        }
    }
}

/// A DUMP payload: the value, then the footer (RDB version, u16 LE; CRC64 of everything
/// before it, u64 LE).
pub fn dump(v: &RdbValue, limits: &Limits) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, v, limits);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Appends a DUMP payload's footer (RDB version, CRC64) to `out` (FUNCTION DUMP's payload
/// has libraries before it instead of one value).
pub fn append_dump_footer(out: &mut Vec<u8>) {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The body of a payload whose footer checks out as Redis's `verifyDumpPayload` checks it.
pub fn check_dump_footer(payload: &[u8]) -> Option<&[u8]> {
    if payload.len() < 10 {
        return None;
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..10].try_into().ok()?);
    (version <= RDB_VERSION_READ_MAX && crc64(&payload[..payload.len() - 8]) == crc).then_some(body)
}

/// Checks a DUMP payload's footer as Redis's `verifyDumpPayload` does and decodes its value.
/// The value must take exactly the bytes before the footer.
pub fn restore(payload: &[u8], limits: &DecodeLimits) -> Result<RdbValue> {
    if payload.len() < 10 {
        return Err(Error::Footer);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION_READ_MAX {
        return Err(Error::Footer);
    }
    let crc = u64::from_le_bytes(footer[2..10].try_into().unwrap());
    if crc64(&payload[..payload.len() - 8]) != crc {
        return Err(Error::Footer);
    }
    let mut r = Reader::new(body, *limits);
    let t = r.read_u8()?;
    let v = r.read_object(t)?;
    if !r.is_empty() {
        return Err(bad("bytes after the value"));
    }
    Ok(v)
}

// ---------------------------------------------------------------- reading

/// Reads RDB primitives and objects from a byte slice.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    limits: DecodeLimits,
    /// Bytes of strings decoded so far (against `limits.max_total_bytes`).
    decoded_bytes: usize,
}

/// An RDB length, or the special string encoding a length byte may announce instead.
enum Len {
    Plain(u64),
    /// 0: int8, 1: int16, 2: int32, 3: LZF.
    Encoded(u8),
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], limits: DecodeLimits) -> Reader<'a> {
        Reader { buf, pos: 0, limits, decoded_bytes: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn read_u8(&mut self) -> Result<u8> {
        let b = *self.buf.get(self.pos).ok_or(bad("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn read_bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(bad("truncated"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn read_len_or_encoding(&mut self) -> Result<Len> {
        let b = self.read_u8()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain((((b & 0x3f) as u64) << 8) | self.read_u8()? as u64),
            2 => match b {
                0x80 => Len::Plain(u32::from_be_bytes(self.read_bytes(4)?.try_into().unwrap()) as u64),
                0x81 => Len::Plain(u64::from_be_bytes(self.read_bytes(8)?.try_into().unwrap())),
                _ => return Err(bad("unknown length encoding")),
            },
            _ => Len::Encoded(b & 0x3f),
        })
    }

    /// Reads a length (`rdbLoadLen`).
    pub fn read_length(&mut self) -> Result<u64> {
        match self.read_len_or_encoding()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(bad("an encoded string where a length was expected")),
        }
    }

    /// A count of items that each take at least `min_bytes`: bounded by the bytes left, so a
    /// forged count cannot make the reader preallocate more than the payload's size.
    fn read_count(&mut self, min_bytes: usize) -> Result<usize> {
        let n = self.read_length()?;
        if n > (self.remaining() / min_bytes) as u64 {
            return Err(bad("count larger than the payload"));
        }
        Ok(n as usize)
    }

    /// Counts `n` more decoded bytes against the limits.
    fn charge(&mut self, n: u64) -> Result<()> {
        if n > self.limits.max_string_bytes as u64 {
            return Err(bad("string longer than the limit"));
        }
        let total = self.decoded_bytes.saturating_add(n as usize);
        if total > self.limits.max_total_bytes {
            return Err(bad("value larger than the limit"));
        }
        self.decoded_bytes = total;
        Ok(())
    }

    /// Reads a string in any encoding (integers come back as their decimal text).
    pub fn read_string(&mut self) -> Result<Vec<u8>> {
        match self.read_len_or_encoding()? {
            Len::Plain(n) => {
                if n > self.remaining() as u64 {
                    return Err(bad("truncated"));
                }
                self.charge(n)?;
                Ok(self.read_bytes(n as usize)?.to_vec())
            }
            Len::Encoded(0) => Ok((self.read_u8()? as i8).to_string().into_bytes()),
            Len::Encoded(1) => Ok(i16::from_le_bytes(self.read_bytes(2)?.try_into().unwrap()).to_string().into_bytes()),
            Len::Encoded(2) => Ok(i32::from_le_bytes(self.read_bytes(4)?.try_into().unwrap()).to_string().into_bytes()),
            Len::Encoded(3) => {
                let clen = self.read_length()?;
                let ulen = self.read_length()?;
                self.charge(ulen)?;
                let c = self.read_bytes(usize::try_from(clen).map_err(|_| bad("truncated"))?)?;
                lzf::decompress(c, ulen as usize).ok_or(bad("invalid LZF data"))
            }
            Len::Encoded(_) => Err(bad("unknown string encoding")),
        }
    }

    fn read_binary_double(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.read_bytes(8)?.try_into().unwrap()))
    }

    /// The text double of old sorted sets: a length byte (253 nan, 254 +inf, 255 -inf).
    fn read_text_double(&mut self) -> Result<f64> {
        match self.read_u8()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_score(self.read_bytes(n as usize)?),
        }
    }

    /// Reads the object of type `t` (the type byte already read).
    pub fn read_object(&mut self, t: u8) -> Result<RdbValue> {
        use types::*;
        Ok(match t {
            STRING => RdbValue::String(self.read_string()?),
            LIST | SET => {
                let n = self.read_count(1)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.read_string()?);
                }
                if t == LIST {
                    RdbValue::List(items)
                } else {
                    RdbValue::Set(items)
                }
            }
            ZSET | ZSET_2 => {
                let n = self.read_count(2)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let m = self.read_string()?;
                    let s = if t == ZSET_2 { self.read_binary_double()? } else { self.read_text_double()? };
                    if s.is_nan() {
                        return Err(bad("NaN score"));
                    }
                    items.push((m, s));
                }
                RdbValue::ZSet(items)
            }
            HASH => {
                let n = self.read_count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let f = self.read_string()?;
                    let v = self.read_string()?;
                    pairs.push((f, v));
                }
                RdbValue::Hash(pairs)
            }
            SET_INTSET => {
                let blob = self.read_string()?;
                let ints = intset_decode(&blob).map_err(|_| bad("invalid intset"))?;
                RdbValue::Set(ints.into_iter().map(|v| v.to_string().into_bytes()).collect())
            }
            SET_LISTPACK => RdbValue::Set(self.read_packed(lp_decode)?),
            LIST_ZIPLIST => RdbValue::List(self.read_packed(zl_decode)?),
            HASH_ZIPLIST | HASH_LISTPACK => {
                let flat = self.read_packed(if t == HASH_ZIPLIST { zl_decode } else { lp_decode })?;
                RdbValue::Hash(pairs(flat)?)
            }
            ZSET_ZIPLIST | ZSET_LISTPACK => {
                let flat = self.read_packed(if t == ZSET_ZIPLIST { zl_decode } else { lp_decode })?;
                let mut items = Vec::with_capacity(flat.len() / 2);
                for (m, s) in pairs(flat)? {
                    let s = parse_score(&s)?;
                    items.push((m, s));
                }
                RdbValue::ZSet(items)
            }
            LIST_QUICKLIST | LIST_QUICKLIST_2 => {
                let nodes = self.read_count(1)?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    let container = if t == LIST_QUICKLIST_2 { self.read_length()? } else { QUICKLIST_NODE_PACKED };
                    let blob = self.read_string()?;
                    match container {
                        QUICKLIST_NODE_PLAIN => items.push(blob),
                        QUICKLIST_NODE_PACKED => {
                            let decode = if t == LIST_QUICKLIST_2 { lp_decode } else { zl_decode };
                            items.extend(decode(&blob).map_err(|_| bad("invalid quicklist node"))?);
                        }
                        _ => return Err(bad("unknown quicklist container")),
                    }
                }
                RdbValue::List(items)
            }
            STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => RdbValue::Stream(Box::new(stream::read_stream(self, t)?)),
            ABACUS => {
                let kind = self.read_u8()?;
                let data = self.read_string()?;
                RdbValue::Abacus { kind, data }
            }
            other => return Err(Error::Unsupported(other)),
        })
    }

    fn read_packed(&mut self, decode: Decoder) -> Result<Vec<Vec<u8>>> {
        let blob = self.read_string()?;
        decode(&blob).map_err(|_| bad("invalid listpack or ziplist"))
    }
}

/// A packed container's decoder (listpack or ziplist).
type Decoder = fn(&[u8]) -> std::result::Result<Vec<Vec<u8>>, listpack::Malformed>;

fn pairs(flat: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if !flat.len().is_multiple_of(2) {
        return Err(bad("odd number of entries"));
    }
    let mut it = flat.into_iter();
    let mut out = Vec::with_capacity(it.len() / 2);
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

/// A score written as text (`zzlStrtod` / `strtod`): "inf", "-inf", decimal or exponent
/// forms. NaN is refused (no sorted set holds it).
fn parse_score(s: &[u8]) -> Result<f64> {
    let text = std::str::from_utf8(s).map_err(|_| bad("invalid score"))?;
    let d: f64 = match text {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse().map_err(|_| bad("invalid score"))?,
    };
    if d.is_nan() {
        return Err(bad("NaN score"));
    }
    Ok(d)
}
