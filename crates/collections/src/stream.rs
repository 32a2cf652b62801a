//! `Stream`: the value of a Redis stream, entries kept in compact blocks.
//!
//! Why this shape: a stream is appended to at its tail, read in ID ranges, trimmed at its
//! head, and most streams hold small events (3-4 short fields whose names repeat and whose
//! values come from a handful of channels or types). Redis keeps them in a radix tree of
//! listpacks, about 36 bytes per such entry, and preallocates 4 KiB for every new node, so
//! a stream of 20 events costs it about 4 KiB. Here a stream is a `Vec` of blocks, each one
//! byte buffer of entries:
//!
//! - IDs are delta-encoded from the previous entry of the block: the time part as a varint
//!   (a few bytes for events seconds or hours apart), the sequence packed in the entry's
//!   header byte (0 for a new millisecond, or the step from the previous sequence);
//! - field names are stored once per block (its *master fields*, those of its first entry,
//!   as Redis): an entry with the same names stores only its values;
//! - integers in canonical decimal form are stored as integers (1 byte for 0..31, a zigzag
//!   varint otherwise);
//! - a block has a dictionary of up to 128 short strings (the first occurrences of its
//!   strings, kept in place): a value or field name seen before in the block costs one
//!   byte. Channels, event types, campaign names repeat, so an event of four short fields
//!   is typically 6 to 10 bytes.
//!
//! Block boundaries are Redis's own: a block is what Redis's listpack node would hold. Each
//! block keeps the size Redis's listpack would have (`lp_bytes`, computed with listpack's
//! encoding rules) and its live and deleted counts, and a new block starts exactly where
//! Redis starts a new node (`stream-node-max-bytes`, `stream-node-max-entries`). So what
//! depends on the node layout (approximate trimming with `~`, LIMIT, MINID's whole-node
//! test, XINFO's `radix-tree-keys`) answers as Redis does, byte for byte.
//!
//! Deleted entries (XDEL, exact trimming inside a block) stay as tombstones, flagged in
//! their header, as in Redis: a block goes when its last live entry does.
//!
//! Entry encoding:
//!
//! ```text
//! H [ms delta: varint] [seq: varint if H's code is 63] [n: varint, n fields] values
//! H: bit 0 deleted, bit 1 same fields as the master fields, bits 2..7 a sequence code:
//!    ms delta 0:  seq = previous seq + 1 + code      ms delta > 0: seq = code
//!    (code 63: the number follows as a varint)
//! ```
//!
//! A block's data starts with its master fields (`n`, then n fields), then its entries.
//! Values (and field names) are encoded as:
//!
//! ```text
//! 0x00..=0x7F   the block dictionary's string number 0..127
//! 0x80..=0xBF   a string of 0..63 bytes, inline (joins the dictionary if not full)
//! 0xC0..=0xDF   the integer 0..31
//! 0xE0 varint   an integer, zigzag-encoded
//! 0xE1 len data a string of 64 bytes or more
//! ```
//!
//! The dictionary is the offsets of the inline strings that joined it (those of one byte
//! or more, in the block's first 64 KiB, while it had fewer than 128); it is rebuilt from
//! the data when a snapshot is loaded, so the byte form is the blocks' data only.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use crate::parse_canonical_i64;
use crate::persist::DecodeError;
use crate::stream_group::Group;

/// A stream entry ID: milliseconds and a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self.ms == 0 && self.seq == 0
    }

    /// The next ID (Redis's streamIncrID), or None after the last possible one.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId { ms: self.ms + 1, seq: 0 })
            }
        } else {
            Some(StreamId { ms: self.ms, seq: self.seq + 1 })
        }
    }

    /// The previous ID (streamDecrID), or None before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId { ms: self.ms - 1, seq: u64::MAX })
            }
        } else {
            Some(StreamId { ms: self.ms, seq: self.seq - 1 })
        }
    }

    /// `ms-seq`, as replies show it.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        self.write_to(&mut out);
        out
    }

    pub fn write_to(self, out: &mut Vec<u8>) {
        let mut b = itoa::Buffer::new();
        out.extend_from_slice(b.format(self.ms).as_bytes());
        out.push(b'-');
        out.extend_from_slice(b.format(self.seq).as_bytes());
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Where Redis starts a new node: `stream-node-max-bytes` and `stream-node-max-entries`
/// (0 = no limit of that kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    pub node_max_bytes: u64,
    pub node_max_entries: u64,
}

impl StreamLimits {
    pub const REDIS_DEFAULT: StreamLimits = StreamLimits { node_max_bytes: 4096, node_max_entries: 100 };
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self::REDIS_DEFAULT
    }
}

/// A listpack never grows past this (Redis's STREAM_LISTPACK_MAX_SIZE): the node limit when
/// stream-node-max-bytes is 0 or larger, and the most an entry's fields and values may
/// weigh together.
pub const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// One field or value as stored: an integer (its canonical decimal is the bytes) or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Val<'_> {
    /// The bytes it stands for.
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Val::Str(s) => s.to_vec(),
            Val::Int(v) => itoa::Buffer::new().format(v).as_bytes().to_vec(),
        }
    }

    /// Appends the bytes it stands for to `out`.
    pub fn write_to(self, out: &mut Vec<u8>) {
        match self {
            Val::Str(s) => out.extend_from_slice(s),
            Val::Int(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
        }
    }

    /// Whether it stands for exactly `bytes`.
    pub fn is(self, bytes: &[u8]) -> bool {
        match self {
            Val::Str(s) => s == bytes,
            Val::Int(v) => parse_canonical_i64(bytes) == Some(v),
        }
    }
}

// ----- Redis's listpack sizes (what a node would weigh in Redis) -----

fn lp_backlen(l: u64) -> u64 {
    if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2_097_151 {
        3
    } else if l < 268_435_455 {
        4
    } else {
        5
    }
}

/// Bytes of an integer element in a listpack (encoding and back-length).
fn lp_int(v: i64) -> u64 {
    let enc = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8_388_608..=8_388_607 => 4,
        -2_147_483_648..=2_147_483_647 => 5,
        _ => 9,
    };
    enc + lp_backlen(enc)
}

/// Bytes of a string element in a listpack: an integer when it is one (lpStringToInt64).
fn lp_str(s: &[u8]) -> u64 {
    if let Some(v) = parse_canonical_i64(s) {
        return lp_int(v);
    }
    let n = s.len() as u64;
    let enc = if n < 64 {
        1 + n
    } else if n < 4096 {
        2 + n
    } else {
        5 + n
    };
    enc + lp_backlen(enc)
}

// ----- varints -----

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn get_varint(data: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = data[*at];
        *at += 1;
        v |= u64::from(b & 0x7F) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// A bounds-checked varint read (loading untrusted bytes).
fn checked_varint(data: &[u8], at: &mut usize) -> Result<u64, DecodeError> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *data.get(*at).ok_or("truncated stream block")?;
        *at += 1;
        if shift == 63 && b > 1 {
            return Err("stream varint overflows");
        }
        v |= u64::from(b & 0x7F) << shift;
        if b < 0x80 {
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err("stream varint overflows");
        }
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

const FLAG_DELETED: u8 = 1;
const FLAG_SAME: u8 = 2;
const SEQ_ESCAPE: u8 = 63;

const TAG_STR: u8 = 0x80;
const TAG_SMALL_INT: u8 = 0xC0;
const TAG_INT: u8 = 0xE0;
const TAG_LONG_STR: u8 = 0xE1;
const DICT_MAX: usize = 128;
const SHORT_MAX: usize = 63;

/// One block: the entries Redis would keep in one listpack node.
#[derive(Clone, Debug)]
struct Block {
    /// The ID of the block's first entry (Redis's master ID, the node's key).
    master: StreamId,
    /// The ID of its last entry, deleted or not.
    last: StreamId,
    /// Live and deleted entries.
    live: u32,
    deleted: u32,
    /// What Redis's listpack for this node would weigh.
    lp_bytes: u64,
    /// Master fields, then entries (see the module comment).
    data: Vec<u8>,
    /// Offsets in `data` of the dictionary's strings (their tag byte).
    dict: Vec<u16>,
}

/// An entry's position and header, as decoded from its block.
#[derive(Clone, Copy, Debug)]
struct Raw {
    /// Offset of its header byte.
    at: usize,
    id: StreamId,
    flags: u8,
    /// Number of field/value pairs.
    n: usize,
    /// Offset of its fields (or values, with the same fields as the master).
    body: usize,
}

impl Raw {
    fn deleted(&self) -> bool {
        self.flags & FLAG_DELETED != 0
    }
}

impl Block {
    fn new(master: StreamId) -> Block {
        Block { master, last: master, live: 0, deleted: 0, lp_bytes: 7, data: Vec::new(), dict: Vec::new() }
    }

    fn total(&self) -> u64 {
        u64::from(self.live) + u64::from(self.deleted)
    }

    /// Reads one value at `*at`.
    #[inline]
    fn val(&self, at: &mut usize) -> Val<'_> {
        let d = &self.data;
        let t = d[*at];
        *at += 1;
        match t {
            0x00..=0x7F => {
                let off = self.dict[t as usize] as usize;
                let len = (d[off] & 0x3F) as usize;
                Val::Str(&d[off + 1..off + 1 + len])
            }
            0x80..=0xBF => {
                let len = (t & 0x3F) as usize;
                let s = &d[*at..*at + len];
                *at += len;
                Val::Str(s)
            }
            0xC0..=0xDF => Val::Int(i64::from(t & 0x1F)),
            TAG_INT => Val::Int(unzigzag(get_varint(d, at))),
            _ => {
                let len = get_varint(d, at) as usize;
                let s = &d[*at..*at + len];
                *at += len;
                Val::Str(s)
            }
        }
    }

    /// Skips one value at `*at`.
    #[inline]
    fn skip_val(&self, at: &mut usize) {
        let d = &self.data;
        let t = d[*at];
        *at += 1;
        match t {
            0x00..=0x7F | 0xC0..=0xDF => {}
            0x80..=0xBF => *at += (t & 0x3F) as usize,
            TAG_INT => {
                get_varint(d, at);
            }
            _ => {
                let len = get_varint(d, at) as usize;
                *at += len;
            }
        }
    }

    /// The dictionary number of `s`, if it is there.
    fn dict_find(&self, s: &[u8]) -> Option<u8> {
        let tag = TAG_STR | s.len() as u8;
        let d = &self.data;
        for (i, &off) in self.dict.iter().enumerate() {
            let off = off as usize;
            if d[off] == tag && &d[off + 1..off + 1 + s.len()] == s {
                return Some(i as u8);
            }
        }
        None
    }

    /// Appends a value (a field name or a value) in its encoding.
    fn put_val(&mut self, v: &[u8]) {
        if let Some(i) = parse_canonical_i64(v) {
            if (0..=31).contains(&i) {
                self.data.push(TAG_SMALL_INT | i as u8);
            } else {
                self.data.push(TAG_INT);
                put_varint(&mut self.data, zigzag(i));
            }
            return;
        }
        if v.len() <= SHORT_MAX {
            if !v.is_empty() {
                if let Some(i) = self.dict_find(v) {
                    self.data.push(i);
                    return;
                }
            }
            let off = self.data.len();
            self.data.push(TAG_STR | v.len() as u8);
            self.data.extend_from_slice(v);
            if !v.is_empty() && self.dict.len() < DICT_MAX && off <= u16::MAX as usize {
                self.dict.push(off as u16);
            }
            return;
        }
        self.data.push(TAG_LONG_STR);
        put_varint(&mut self.data, v.len() as u64);
        self.data.extend_from_slice(v);
    }

    /// The number of master fields and where the first entry starts.
    fn master_fields(&self) -> (usize, usize, usize) {
        let mut at = 0;
        let n = get_varint(&self.data, &mut at) as usize;
        let fields = at;
        for _ in 0..n {
            self.skip_val(&mut at);
        }
        (n, fields, at)
    }

    /// Decodes the entry at `at`, whose predecessor in the block has ID `prev`; returns it
    /// and where the next one starts.
    #[inline]
    fn raw(&self, at: usize, prev: StreamId, master_n: usize) -> (Raw, usize) {
        let d = &self.data;
        let h = d[at];
        let mut p = at + 1;
        let ms_delta = get_varint(d, &mut p);
        let code = u64::from(h >> 2);
        let s = if code == u64::from(SEQ_ESCAPE) { get_varint(d, &mut p) } else { code };
        let id = if ms_delta == 0 {
            StreamId { ms: prev.ms, seq: prev.seq.wrapping_add(1).wrapping_add(s) }
        } else {
            StreamId { ms: prev.ms.wrapping_add(ms_delta), seq: s }
        };
        let flags = h & 3;
        let (n, body, values) = if flags & FLAG_SAME != 0 {
            (master_n, p, master_n)
        } else {
            let n = get_varint(d, &mut p) as usize;
            (n, p, 2 * n)
        };
        for _ in 0..values {
            self.skip_val(&mut p);
        }
        (Raw { at, id, flags, n, body }, p)
    }

    /// The ID before the first entry, for delta decoding.
    fn before_first(&self) -> StreamId {
        StreamId { ms: self.master.ms, seq: self.master.seq.wrapping_sub(1) }
    }

    /// Every entry of the block, deleted ones included.
    fn raws(&self) -> RawIter<'_> {
        let (n, _, start) = self.master_fields();
        RawIter { block: self, at: start, prev: self.before_first(), master_n: n }
    }

    /// Appends an entry (the caller has checked the ID and the node's room).
    fn push_entry(&mut self, id: StreamId, pairs: &[&[u8]], same: bool, first: bool) {
        let prev = if first { self.before_first() } else { self.last };
        let ms_delta = id.ms.wrapping_sub(prev.ms);
        let s = if ms_delta == 0 { id.seq.wrapping_sub(prev.seq).wrapping_sub(1) } else { id.seq };
        let code = if s < u64::from(SEQ_ESCAPE) { s as u8 } else { SEQ_ESCAPE };
        let n = pairs.len() / 2;
        let need = 2 + 10 + 10 + pairs.iter().map(|p| p.len() + 2).sum::<usize>();
        reserve_grow(&mut self.data, need);
        self.data.push((code << 2) | if same { FLAG_SAME } else { 0 });
        put_varint(&mut self.data, ms_delta);
        if code == SEQ_ESCAPE {
            put_varint(&mut self.data, s);
        }
        if same {
            for pair in pairs.chunks_exact(2) {
                self.put_val(pair[1]);
            }
        } else {
            put_varint(&mut self.data, n as u64);
            for p in pairs {
                self.put_val(p);
            }
        }
        self.last = id;
    }

    /// Whether `pairs`' field names are the master fields.
    fn same_fields(&self, pairs: &[&[u8]]) -> bool {
        let mut at = 0;
        let n = get_varint(&self.data, &mut at) as usize;
        if n != pairs.len() / 2 {
            return false;
        }
        for pair in pairs.chunks_exact(2) {
            if !self.val(&mut at).is(pair[0]) {
                return false;
            }
        }
        true
    }

    /// Sets the deleted flag of the entry at `raw` and updates the counts (Redis's
    /// streamIteratorRemoveEntry: the flags byte keeps its size).
    fn mark_deleted(&mut self, raw: &Raw) {
        self.data[raw.at] |= FLAG_DELETED;
        self.lp_bytes = self.lp_bytes - lp_int(i64::from(self.live)) - lp_int(i64::from(self.deleted));
        self.live -= 1;
        self.deleted += 1;
        self.lp_bytes = self.lp_bytes + lp_int(i64::from(self.live)) + lp_int(i64::from(self.deleted));
    }

    fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.dict.capacity() * 2
    }

    /// The dictionary of `data` rebuilt (and the whole block checked), as loaded from a
    /// snapshot: every inline string that joined it when it was written.
    fn rebuild_and_check(&mut self) -> Result<(), DecodeError> {
        let d = &self.data;
        let mut dict: Vec<u16> = Vec::new();
        let mut at = 0usize;
        let check_val = |at: &mut usize, dict: &mut Vec<u16>| -> Result<(), DecodeError> {
            let t = *d.get(*at).ok_or("truncated stream block")?;
            let off = *at;
            *at += 1;
            match t {
                0x00..=0x7F => {
                    if t as usize >= dict.len() {
                        return Err("stream dictionary reference out of range");
                    }
                }
                0x80..=0xBF => {
                    let len = (t & 0x3F) as usize;
                    if *at + len > d.len() {
                        return Err("truncated stream block");
                    }
                    *at += len;
                    if len > 0 && dict.len() < DICT_MAX && off <= u16::MAX as usize {
                        dict.push(off as u16);
                    }
                }
                0xC0..=0xDF => {}
                TAG_INT => {
                    checked_varint(d, at)?;
                }
                TAG_LONG_STR => {
                    let len = checked_varint(d, at)?;
                    let end = (*at as u64).checked_add(len).filter(|&e| e <= d.len() as u64).ok_or("truncated stream block")?;
                    *at = end as usize;
                }
                _ => return Err("bad stream value tag"),
            }
            Ok(())
        };
        let master_n = checked_varint(d, &mut at)?;
        if master_n > d.len() as u64 {
            return Err("bad stream master field count");
        }
        for _ in 0..master_n {
            check_val(&mut at, &mut dict)?;
        }
        let mut prev = self.before_first();
        let (mut live, mut deleted) = (0u32, 0u32);
        let mut first = true;
        while at < d.len() {
            let h = d[at];
            at += 1;
            let ms_delta = checked_varint(d, &mut at)?;
            let code = u64::from(h >> 2);
            let s = if code == u64::from(SEQ_ESCAPE) { checked_varint(d, &mut at)? } else { code };
            let id = if ms_delta == 0 {
                StreamId { ms: prev.ms, seq: prev.seq.wrapping_add(1).wrapping_add(s) }
            } else {
                StreamId { ms: prev.ms.checked_add(ms_delta).ok_or("stream ID overflows")?, seq: s }
            };
            if first {
                if id != self.master {
                    return Err("stream block's first entry is not its master ID");
                }
                first = false;
            } else if id <= prev {
                return Err("stream IDs out of order");
            }
            let values = if h & FLAG_SAME != 0 {
                master_n
            } else {
                let n = checked_varint(d, &mut at)?;
                if n > d.len() as u64 {
                    return Err("bad stream field count");
                }
                2 * n
            };
            for _ in 0..values {
                check_val(&mut at, &mut dict)?;
            }
            if h & FLAG_DELETED != 0 {
                deleted += 1;
            } else {
                live += 1;
            }
            prev = id;
        }
        if first || live != self.live || deleted != self.deleted || prev != self.last {
            return Err("stream block counts do not match its entries");
        }
        self.dict = dict;
        Ok(())
    }
}

/// Grows `v` for `need` more bytes by about a quarter (jemalloc's size classes are 1.25x
/// apart): a block's tail is appended to one entry at a time.
fn reserve_grow(v: &mut Vec<u8>, need: usize) {
    if v.capacity() - v.len() < need {
        let extra = need.max(v.len() / 4).max(16);
        v.reserve_exact(extra);
    }
}

struct RawIter<'a> {
    block: &'a Block,
    at: usize,
    prev: StreamId,
    master_n: usize,
}

impl Iterator for RawIter<'_> {
    type Item = Raw;

    #[inline]
    fn next(&mut self) -> Option<Raw> {
        if self.at >= self.block.data.len() {
            return None;
        }
        let (raw, next) = self.block.raw(self.at, self.prev, self.master_n);
        self.at = next;
        self.prev = raw.id;
        Some(raw)
    }
}

/// How XADD/XTRIM trim (Redis's streamAddTrimArgs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Keep no entry with an ID below this one.
    MinId(StreamId),
}

/// Why an entry could not be added (XADD's errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not greater than the stream's last ID.
    IdTooSmall,
    /// The fields and values weigh more than a listpack may, or the sequence would wrap.
    TooLarge,
}

/// A stream (see the module comment).
#[derive(Clone, Debug, Default)]
pub struct Stream {
    blocks: Vec<Block>,
    len: u64,
    last_id: StreamId,
    /// Redis's `first_id`: the first live entry as last recorded (after an append to an
    /// empty stream, a trim, an XDEL of it); XINFO shows it, the lag computation reads it.
    first_id: StreamId,
    max_deleted: StreamId,
    entries_added: u64,
    /// Consumer groups by name (byte order, as Redis's radix tree), created on demand.
    groups: Option<Box<BTreeMap<Box<[u8]>, Group>>>,
}

/// One entry as read: its ID and its field/value pairs.
#[derive(Clone, Copy)]
pub struct EntryView<'a> {
    pub id: StreamId,
    block: &'a Block,
    raw: Raw,
}

impl<'a> EntryView<'a> {
    /// Number of field/value pairs.
    pub fn len(&self) -> usize {
        self.raw.n
    }

    pub fn is_empty(&self) -> bool {
        self.raw.n == 0
    }

    /// The field/value pairs, in order.
    pub fn pairs(&self) -> Pairs<'a> {
        let master = if self.raw.flags & FLAG_SAME != 0 {
            let mut at = 0;
            get_varint(&self.block.data, &mut at);
            Some(at)
        } else {
            None
        };
        Pairs { block: self.block, master, at: self.raw.body, left: self.raw.n }
    }
}

/// The field/value pairs of an entry.
pub struct Pairs<'a> {
    block: &'a Block,
    /// Where the next master field is, for an entry with the master's fields.
    master: Option<usize>,
    at: usize,
    left: usize,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (Val<'a>, Val<'a>);

    #[inline]
    fn next(&mut self) -> Option<(Val<'a>, Val<'a>)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let field = match &mut self.master {
            Some(m) => self.block.val(m),
            None => self.block.val(&mut self.at),
        };
        let value = self.block.val(&mut self.at);
        Some((field, value))
    }
}

/// Live entries of an ID range, forwards or backwards ([`Stream::range`]).
pub struct Range<'a> {
    stream: &'a Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    /// The block being read (forwards: the next to read; backwards: one past it).
    block: usize,
    /// Forwards: the next entry's offset and its predecessor's ID.
    at: usize,
    prev: StreamId,
    master_n: usize,
    /// Backwards: the current block's entries in range, popped from the end.
    pending: Vec<Raw>,
    done: bool,
}

impl<'a> Iterator for Range<'a> {
    type Item = EntryView<'a>;

    fn next(&mut self) -> Option<EntryView<'a>> {
        if self.done {
            return None;
        }
        if self.rev {
            self.next_rev()
        } else {
            self.next_fwd()
        }
    }
}

impl<'a> Range<'a> {
    fn next_fwd(&mut self) -> Option<EntryView<'a>> {
        loop {
            let Some(b) = self.stream.blocks.get(self.block) else {
                self.done = true;
                return None;
            };
            if self.at == 0 {
                if b.master > self.end {
                    self.done = true;
                    return None;
                }
                let (n, _, start) = b.master_fields();
                self.master_n = n;
                self.at = start;
                self.prev = b.before_first();
            }
            if self.at >= b.data.len() {
                self.block += 1;
                self.at = 0;
                continue;
            }
            let (raw, next) = b.raw(self.at, self.prev, self.master_n);
            self.at = next;
            self.prev = raw.id;
            if raw.id < self.start || raw.deleted() {
                continue;
            }
            if raw.id > self.end {
                self.done = true;
                return None;
            }
            return Some(EntryView { id: raw.id, block: b, raw });
        }
    }

    fn next_rev(&mut self) -> Option<EntryView<'a>> {
        loop {
            if let Some(raw) = self.pending.pop() {
                let b = &self.stream.blocks[self.block];
                if raw.id < self.start {
                    self.done = true;
                    return None;
                }
                return Some(EntryView { id: raw.id, block: b, raw });
            }
            if self.block == 0 {
                self.done = true;
                return None;
            }
            self.block -= 1;
            let b = &self.stream.blocks[self.block];
            if b.last < self.start {
                self.done = true;
                return None;
            }
            let (start, end) = (self.start, self.end);
            self.pending.clear();
            for raw in b.raws() {
                if raw.id > end {
                    break;
                }
                if raw.id >= start && !raw.deleted() {
                    self.pending.push(raw);
                }
            }
        }
    }
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// Redis's recorded first entry ID (see the field).
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    pub fn max_deleted_id(&self) -> StreamId {
        self.max_deleted
    }

    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// Number of nodes (XINFO's radix-tree-keys).
    pub fn nodes(&self) -> usize {
        self.blocks.len()
    }

    /// XSETID's changes (the caller checked them).
    pub fn set_last_id(&mut self, id: StreamId) {
        self.last_id = id;
    }

    /// The recorded first ID of a stream without entries, as a payload gives it (Redis
    /// records 0-0 when XDEL or XTRIM empties a stream, and a Redis 5/6 payload loads as the
    /// largest ID). A stream with entries records its first entry's ID, whatever is given.
    pub fn set_empty_first_id(&mut self, id: StreamId) {
        if self.len == 0 {
            self.first_id = id;
        }
    }

    pub fn set_entries_added(&mut self, n: u64) {
        self.entries_added = n;
    }

    pub fn set_max_deleted_id(&mut self, id: StreamId) {
        self.max_deleted = id;
    }

    /// The ID `*` gives at `now_ms` (Redis 7.0's streamNextID: the clock, or the last ID
    /// incremented as streamIncrID does: the next sequence, or after the last sequence of a
    /// millisecond the next millisecond's sequence 0). The caller refuses a stream whose last
    /// ID is [`StreamId::MAX`] before asking.
    pub fn next_auto_id(&self, now_ms: u64) -> StreamId {
        if now_ms > self.last_id.ms {
            StreamId { ms: now_ms, seq: 0 }
        } else if self.last_id.seq == u64::MAX {
            StreamId { ms: self.last_id.ms.saturating_add(1), seq: 0 }
        } else {
            StreamId { ms: self.last_id.ms, seq: self.last_id.seq + 1 }
        }
    }

    /// Appends an entry with ID `id` and `pairs` (field, value, field, value...), as Redis's
    /// streamAppendItem: the ID must be greater than the last one, and the fields and values
    /// must weigh at most [`LISTPACK_MAX_SIZE`] together.
    pub fn append(&mut self, id: StreamId, pairs: &[&[u8]], limits: &StreamLimits) -> Result<(), AppendError> {
        if id <= self.last_id {
            return Err(AppendError::IdTooSmall);
        }
        let total: u64 = pairs.iter().map(|p| p.len() as u64).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(AppendError::TooLarge);
        }
        let n = pairs.len() / 2;
        let new_node = match self.blocks.last() {
            None => true,
            Some(b) => {
                let max_bytes = if limits.node_max_bytes == 0 || limits.node_max_bytes > LISTPACK_MAX_SIZE {
                    LISTPACK_MAX_SIZE
                } else {
                    limits.node_max_bytes
                };
                b.lp_bytes + total >= max_bytes || (limits.node_max_entries != 0 && b.total() >= limits.node_max_entries)
            }
        };
        if new_node {
            if let Some(b) = self.blocks.last_mut() {
                b.data.shrink_to_fit();
                b.dict.shrink_to_fit();
            }
            let mut b = Block::new(id);
            b.data.reserve_exact(pairs.iter().map(|p| p.len() + 2).sum::<usize>() + 16);
            put_varint(&mut b.data, n as u64);
            for pair in pairs.chunks_exact(2) {
                b.put_val(pair[0]);
            }
            // count 1, deleted 0, num-fields, the fields, the 0 terminator.
            b.lp_bytes += lp_int(1) + lp_int(0) + lp_int(n as i64) + pairs.chunks_exact(2).map(|p| lp_str(p[0])).sum::<u64>() + lp_int(0);
            b.live = 1;
            if self.blocks.len() == self.blocks.capacity() {
                let grow = (self.blocks.len() / 4).max(1);
                self.blocks.reserve_exact(grow);
            }
            self.blocks.push(b);
            let b = self.blocks.last_mut().expect("just pushed");
            b.push_entry(id, pairs, true, true);
            b.lp_bytes += entry_lp_bytes(id, b.master, pairs, true);
        } else {
            let b = self.blocks.last_mut().expect("a tail block");
            b.lp_bytes = b.lp_bytes - lp_int(i64::from(b.live)) + lp_int(i64::from(b.live) + 1);
            b.live += 1;
            let same = b.same_fields(pairs);
            b.push_entry(id, pairs, same, false);
            b.lp_bytes += entry_lp_bytes(id, b.master, pairs, same);
        }
        self.len += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.len == 1 {
            self.first_id = id;
        }
        Ok(())
    }

    /// The index of the block that would hold `id`: the last one whose master ID is at most
    /// `id` (or the first, as Redis's seek falls back to).
    fn block_for(&self, id: StreamId) -> usize {
        match self.blocks.partition_point(|b| b.master <= id) {
            0 => 0,
            i => i - 1,
        }
    }

    /// Live entries with IDs in `start..=end`, in ID order or (`rev`) reversed.
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Range<'_> {
        let done = start > end || self.blocks.is_empty();
        let block = if rev {
            if done {
                0
            } else {
                self.block_for(end) + 1
            }
        } else {
            self.block_for(start)
        };
        Range { stream: self, start, end, rev, block, at: 0, prev: StreamId::MIN, master_n: 0, pending: Vec::new(), done }
    }

    /// Every live entry, in order.
    pub fn iter(&self) -> Range<'_> {
        self.range(StreamId::MIN, StreamId::MAX, false)
    }

    /// Visits every live entry in ID order with the values of the fields named in `wanted`
    /// (None where the entry has no such field; the last one where it has several), decoding
    /// each entry once: a block's master fields are matched against `wanted` once, so an
    /// entry with the master's fields costs only its values. ATTRIBUTE's scan.
    pub fn scan_fields<const N: usize>(&self, wanted: [&[u8]; N], mut f: impl FnMut(StreamId, &[Option<Val<'_>>; N])) {
        let mut master_map: Vec<Option<usize>> = Vec::new();
        for b in &self.blocks {
            let d = &b.data[..];
            let mut at = 0;
            let master_n = get_varint(d, &mut at) as usize;
            master_map.clear();
            for _ in 0..master_n {
                let name = b.val(&mut at);
                master_map.push(wanted.iter().rposition(|w| name.is(w)));
            }
            let mut prev = b.before_first();
            while at < d.len() {
                let h = d[at];
                at += 1;
                let ms_delta = get_varint(d, &mut at);
                let code = u64::from(h >> 2);
                let s = if code == u64::from(SEQ_ESCAPE) { get_varint(d, &mut at) } else { code };
                let id = if ms_delta == 0 {
                    StreamId { ms: prev.ms, seq: prev.seq.wrapping_add(1).wrapping_add(s) }
                } else {
                    StreamId { ms: prev.ms.wrapping_add(ms_delta), seq: s }
                };
                prev = id;
                let deleted = h & FLAG_DELETED != 0;
                let mut out: [Option<Val<'_>>; N] = [None; N];
                if h & FLAG_SAME != 0 {
                    for slot in master_map.iter() {
                        match (deleted, slot) {
                            (false, Some(w)) => out[*w] = Some(b.val(&mut at)),
                            _ => b.skip_val(&mut at),
                        }
                    }
                } else {
                    let n = get_varint(d, &mut at) as usize;
                    for _ in 0..n {
                        if deleted {
                            b.skip_val(&mut at);
                            b.skip_val(&mut at);
                            continue;
                        }
                        let name = b.val(&mut at);
                        match wanted.iter().rposition(|w| name.is(w)) {
                            Some(w) => out[w] = Some(b.val(&mut at)),
                            None => b.skip_val(&mut at),
                        }
                    }
                }
                if !deleted {
                    f(id, &out);
                }
            }
        }
    }

    /// The live entry `id`.
    pub fn get(&self, id: StreamId) -> Option<EntryView<'_>> {
        self.range(id, id, false).next()
    }

    /// Whether a live entry `id` exists (streamEntryExists).
    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// The last live entry's ID (streamLastValidID).
    pub fn last_valid_id(&self) -> Option<StreamId> {
        self.range(StreamId::MIN, StreamId::MAX, true).next().map(|e| e.id)
    }

    /// The first live entry's ID.
    pub fn first_valid_id(&self) -> Option<StreamId> {
        self.iter().next().map(|e| e.id)
    }

    /// Deletes the live entry `id` (streamDeleteItem): true if there was one. A block whose
    /// last live entry goes is removed, as Redis removes the node.
    fn delete_one(&mut self, id: StreamId) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let i = self.block_for(id);
        let b = &self.blocks[i];
        if id < b.master || id > b.last {
            return false;
        }
        let Some(raw) = b.raws().take_while(|r| r.id <= id).find(|r| r.id == id && !r.deleted()) else { return false };
        if b.live == 1 {
            self.blocks.remove(i);
        } else {
            self.blocks[i].mark_deleted(&raw);
        }
        self.len -= 1;
        true
    }

    /// XDEL: deletes the live entries among `ids`; returns how many, and keeps the recorded
    /// first ID and the largest deleted ID as Redis does.
    pub fn xdel(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_entry = false;
        for &id in ids {
            if self.delete_one(id) {
                if id == self.first_id {
                    first_entry = true;
                }
                if id > self.max_deleted {
                    self.max_deleted = id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.len == 0 {
                self.first_id = StreamId::MIN;
            } else if first_entry {
                self.first_id = self.first_valid_id().unwrap_or(StreamId::MAX);
            }
        }
        deleted
    }

    /// Trims the stream as Redis's streamTrim: whole blocks from the head while they can go,
    /// then (unless `approx`) single entries of the next block; at most `limit` entries when
    /// non-zero (whole blocks are counted before they go). Returns the entries removed.
    pub fn trim(&mut self, trim: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted: u64 = 0;
        let mut remove = 0usize;
        let mut partial: Option<usize> = None;
        let mut len = self.len;
        for (i, b) in self.blocks.iter().enumerate() {
            if let Trim::MaxLen(max) = trim {
                if len <= max {
                    break;
                }
            }
            let entries = u64::from(b.live);
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove_node = match trim {
                Trim::MaxLen(max) => len - entries >= max,
                Trim::MinId(min) => b.last < min,
            };
            if remove_node {
                remove = i + 1;
                len -= entries;
                deleted += entries;
                continue;
            }
            if !approx {
                partial = Some(i);
            }
            break;
        }
        if remove > 0 {
            self.blocks.drain(..remove);
        }
        self.len = len;
        if let Some(i) = partial {
            let i = i - remove;
            let b = &self.blocks[i];
            let mut marks: Vec<Raw> = Vec::new();
            let mut len = self.len;
            for raw in b.raws() {
                let stop = match trim {
                    Trim::MaxLen(max) => len <= max,
                    Trim::MinId(min) => raw.id >= min,
                };
                if stop {
                    break;
                }
                if !raw.deleted() {
                    marks.push(raw);
                    len -= 1;
                }
            }
            let b = &mut self.blocks[i];
            for raw in &marks {
                b.mark_deleted(raw);
            }
            deleted += marks.len() as u64;
            self.len = len;
        }
        if self.len == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.first_valid_id().unwrap_or(StreamId::MAX);
        }
        deleted
    }

    /// The group named `name`.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.as_ref()?.get(name)
    }

    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.as_mut()?.get_mut(name)
    }

    /// The groups, in name order.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &Group)> {
        self.groups.iter().flat_map(|g| g.iter()).map(|(k, v)| (&k[..], v))
    }

    pub fn group_count(&self) -> usize {
        self.groups.as_ref().map_or(0, |g| g.len())
    }

    /// Creates a group (false if one has that name).
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        let groups = self.groups.get_or_insert_with(Default::default);
        if groups.contains_key(name) {
            return false;
        }
        groups.insert(name.into(), Group::new(last_id, entries_read));
        true
    }

    /// Takes group `name` out (leaving an empty placeholder), so that the caller can read the
    /// entries while it changes the group; [`Stream::put_group`] puts it back.
    pub fn take_group(&mut self, name: &[u8]) -> Option<Group> {
        let g = self.groups.as_mut()?.get_mut(name)?;
        Some(std::mem::replace(g, Group::new(StreamId::MIN, crate::stream_group::INVALID_ENTRIES_READ)))
    }

    pub fn put_group(&mut self, name: &[u8], group: Group) {
        if let Some(g) = self.groups.as_mut().and_then(|gs| gs.get_mut(name)) {
            *g = group;
        }
    }

    /// Destroys a group (false if there was none).
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        let Some(groups) = self.groups.as_mut() else { return false };
        groups.remove(name).is_some()
    }

    /// Whether some deleted entry lies in `start..=end` (Redis 7.0's
    /// streamRangeHasTombstones; `None` bounds are the extremes).
    pub fn range_has_tombstones(&self, start: Option<StreamId>, end: Option<StreamId>) -> bool {
        if self.len == 0 || self.max_deleted.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted {
            return false;
        }
        let s = start.unwrap_or(StreamId::MIN);
        let e = end.unwrap_or(StreamId::MAX);
        s <= self.max_deleted && self.max_deleted <= e
    }

    /// Redis 7.0's streamEstimateDistanceFromFirstEverEntry: the logical read counter of
    /// `id`, or None when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.len == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        match id.cmp(&self.last_id) {
            Ordering::Equal => return Some(self.entries_added),
            Ordering::Greater => return None,
            Ordering::Less => {}
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            match id.cmp(&self.first_id) {
                Ordering::Less => return Some(self.entries_added - self.len),
                Ordering::Equal => return Some(self.entries_added - self.len + 1),
                Ordering::Greater => {}
            }
        }
        None
    }

    /// A consumer group's lag (Redis 7.0's streamReplyWithCGLag), None when unknown.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != crate::stream_group::INVALID_ENTRIES_READ && !self.range_has_tombstones(Some(g.last_id), None) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        self.estimate_distance(g.last_id).map(|read| self.entries_added as i64 - read as i64)
    }

    /// Bytes on the heap, for memory estimates.
    pub fn heap_bytes(&self) -> usize {
        let groups = self.groups.as_ref().map_or(0, |g| g.iter().map(|(k, v)| k.len() + 64 + v.heap_bytes()).sum());
        self.blocks.capacity() * std::mem::size_of::<Block>() + self.blocks.iter().map(Block::heap_bytes).sum::<usize>() + groups
    }

    /// Appends the byte form: the metadata, every block's counts and data, and the groups.
    pub fn serialize_into(&self, out: &mut Vec<u8>) {
        fn id(out: &mut Vec<u8>, id: StreamId) {
            out.extend_from_slice(&id.ms.to_le_bytes());
            out.extend_from_slice(&id.seq.to_le_bytes());
        }
        out.extend_from_slice(&self.len.to_le_bytes());
        id(out, self.last_id);
        id(out, self.first_id);
        id(out, self.max_deleted);
        out.extend_from_slice(&self.entries_added.to_le_bytes());
        out.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for b in &self.blocks {
            id(out, b.master);
            id(out, b.last);
            out.extend_from_slice(&b.live.to_le_bytes());
            out.extend_from_slice(&b.deleted.to_le_bytes());
            out.extend_from_slice(&b.lp_bytes.to_le_bytes());
            out.extend_from_slice(&(b.data.len() as u32).to_le_bytes());
            out.extend_from_slice(&b.data);
        }
        crate::stream_group::serialize_groups(self.groups.as_deref(), out);
    }

    /// Decodes what [`Stream::serialize_into`] wrote (all of `bytes`), checking every block.
    pub fn deserialize(bytes: &[u8]) -> Result<Stream, DecodeError> {
        let mut r = crate::stream_group::Reader::new(bytes);
        let len = r.u64()?;
        let last_id = r.id()?;
        let first_id = r.id()?;
        let max_deleted = r.id()?;
        let entries_added = r.u64()?;
        let nblocks = r.count(48)?;
        let mut blocks = Vec::with_capacity(nblocks);
        let mut live_total = 0u64;
        for _ in 0..nblocks {
            let master = r.id()?;
            let last = r.id()?;
            let live = r.u32()?;
            let deleted = r.u32()?;
            let lp_bytes = r.u64()?;
            let n = r.u32()? as usize;
            let data = r.take(n)?.to_vec();
            let mut b = Block { master, last, live, deleted, lp_bytes, data, dict: Vec::new() };
            b.rebuild_and_check()?;
            if let Some(prev) = blocks.last().map(|p: &Block| p.last) {
                if b.master <= prev {
                    return Err("stream blocks out of order");
                }
            }
            live_total += u64::from(live);
            blocks.push(b);
        }
        if live_total != len {
            return Err("stream length does not match its blocks");
        }
        if blocks.last().is_some_and(|b| b.last > last_id) {
            return Err("stream entry after its last ID");
        }
        let groups = crate::stream_group::deserialize_groups(&mut r)?;
        if !r.is_done() {
            return Err("trailing bytes after a stream");
        }
        Ok(Stream { blocks, len, last_id, first_id, max_deleted, entries_added, groups })
    }
}

/// What an entry adds to Redis's listpack: flags, the ID deltas from the master ID (as
/// int64, wrapping as Redis's unsigned subtraction does), the fields unless they are the
/// master's, the values, and the lp-count.
fn entry_lp_bytes(id: StreamId, master: StreamId, pairs: &[&[u8]], same: bool) -> u64 {
    let n = (pairs.len() / 2) as i64;
    let mut bytes = lp_int(if same { 2 } else { 0 }) + lp_int(id.ms.wrapping_sub(master.ms) as i64) + lp_int(id.seq.wrapping_sub(master.seq) as i64);
    let mut lp_count = n + 3;
    if !same {
        bytes += lp_int(n);
        lp_count += n + 1;
    }
    for (i, p) in pairs.iter().enumerate() {
        if !same || i % 2 == 1 {
            bytes += lp_str(p);
        }
    }
    bytes + lp_int(lp_count)
}

impl PartialEq for Stream {
    /// Same entries, metadata and groups (whatever the byte layout).
    fn eq(&self, other: &Stream) -> bool {
        self.len == other.len
            && self.last_id == other.last_id
            && self.first_id == other.first_id
            && self.max_deleted == other.max_deleted
            && self.entries_added == other.entries_added
            && self.blocks.len() == other.blocks.len()
            && self.iter().zip(other.iter()).all(|(a, b)| a.id == b.id && a.pairs().map(|(f, v)| (f.to_vec(), v.to_vec())).eq(b.pairs().map(|(f, v)| (f.to_vec(), v.to_vec()))))
            && self.groups().eq(other.groups())
    }
}

impl Eq for Stream {}
