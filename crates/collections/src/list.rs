//! `List`: the value of a Redis list, a quicklist-like deque of nodes of packed entries.
//!
//! Why this shape: a list is a queue (push and pop at the ends) far more often than an
//! array (index, insert in the middle), and lists of small integers or short strings are
//! the common case (job IDs, timestamps). A `VecDeque<Vec<u8>>` would cost 24 bytes of slot
//! plus a 32-byte allocation per element; Redis's quicklist of listpacks costs about 5
//! bytes for a small integer. Here a list is a `VecDeque` of nodes, each one `Vec<u8>` of
//! entries packed back to back, so an element costs its encoding and a share of its node's
//! ~60 bytes of overhead.
//!
//! Entry encoding (first byte = header), chosen so a small integer is 1 to 3 bytes:
//!
//! ```text
//! 0xxxxxxx                       integer 0..=127                      1 byte
//! 10xxxxxx b                     integer 0..2^14 (big-endian bits)    2 bytes
//! 110xxxxx b b                   integer 0..2^21                      3 bytes
//! 1110xxxx b b b                 integer 0..2^28                      4 bytes
//! 0xF0 i64 (LE)                  any integer                          9 bytes
//! 0xF1 u8 / 0xF2 u16 / 0xF3 u32  integer -1 - n (LE)                  2 / 3 / 5 bytes
//! 0xF4 u32 (LE)                  integer 2^28..2^32                   5 bytes
//! 0xF8 len:u8 bytes              string up to 255 bytes               2 + len
//! 0xF9 len:u32 (LE) bytes        any string                           5 + len
//! ```
//!
//! An element is stored as an integer only when its bytes are the canonical decimal form
//! Redis's `string2ll` accepts ([`crate::parse_canonical_i64`]), so decoding gives back
//! exactly the bytes sent ("007" and "+1" stay strings). RPUSH of 0..999999 costs 2.98
//! bytes per element here against about 5 in Redis 7.0.
//!
//! Entries have no back-length (Redis's listpack spends a byte per entry on one), so a node
//! is walked forwards only. Nodes are bounded (`list-max-listpack-size`: 8 KiB by default,
//! as Redis), so finding an entry in a node is a short scan. What would make that scan hot,
//! repeated RPOPs, is served from a per-node cache of entry offsets that pops and pushes at
//! the tail keep up to date (and every other change drops): built once per node, then each
//! RPOP is O(1). LPOP and LPUSH move the node's bytes (a memmove of at most a node, as in a
//! listpack).
//!
//! Nodes are split when an insert or LSET makes one exceed its limits, and never merged
//! (Redis merges small neighbours after deletions in the middle; here LREM/LTRIM may leave
//! small nodes, which costs only memory overhead per node). `list-compress-depth` (LZF of
//! inner nodes) is not implemented.
//!
//! The byte form ([`List::serialize_into`]) is the element count and the entries back to
//! back, whatever the node layout: two lists with the same elements serialize the same.

use std::collections::VecDeque;

use crate::persist::DecodeError;
use crate::parse_canonical_i64;

/// How big a node may grow: Redis's `list-max-listpack-size` (the quicklist "fill").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListLimits {
    /// At most this many entries in a node.
    pub max_entries: usize,
    /// At most this many bytes of entries in a node (a single larger entry gets a node of
    /// its own).
    pub max_bytes: usize,
}

impl ListLimits {
    /// Redis's default fill, -2: nodes of at most 8 KiB.
    pub const REDIS_DEFAULT: ListLimits = ListLimits { max_entries: usize::MAX, max_bytes: 8192 };

    /// The limits for a `list-max-listpack-size` value, as Redis reads it: a positive value
    /// is an entry count (at most 32767, and nodes still stay under the 8 KiB safety limit),
    /// -1..-5 a node size of 4, 8, 16, 32 or 64 KiB (below -5 counts as -5, 0 as 1 entry).
    pub fn from_fill(fill: i64) -> ListLimits {
        if fill >= 0 {
            ListLimits { max_entries: fill.clamp(1, 32767) as usize, max_bytes: 8192 }
        } else {
            let level = (-fill).min(5) as u32;
            ListLimits { max_entries: usize::MAX, max_bytes: 4096 << (level - 1) }
        }
    }

    fn allows(&self, node: &Node, extra_bytes: usize) -> bool {
        node.count == 0 || (node.count as usize + 1 <= self.max_entries && node.data.len() + extra_bytes <= self.max_bytes)
    }

    fn exceeded_by(&self, node: &Node) -> bool {
        node.count > 1 && (node.count as usize > self.max_entries || node.data.len() > self.max_bytes)
    }
}

impl Default for ListLimits {
    fn default() -> Self {
        Self::REDIS_DEFAULT
    }
}

/// One element as read from a list: an integer (stored as one) or bytes borrowed from the
/// node. [`ListItem::to_vec`] gives the element's bytes either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListItem<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl ListItem<'_> {
    /// The element's bytes (an integer in canonical decimal).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            ListItem::Int(v) => itoa::Buffer::new().format(*v).as_bytes().to_vec(),
            ListItem::Bytes(b) => b.to_vec(),
        }
    }

    /// Whether the element's bytes equal `needle`'s, without formatting integers.
    pub fn matches(&self, needle: &Needle<'_>) -> bool {
        match (self, needle.int) {
            (ListItem::Int(v), Some(n)) => *v == n,
            (ListItem::Bytes(b), None) => *b == needle.bytes,
            // A canonical integer is always stored as one, and nothing else is.
            _ => false,
        }
    }
}

/// A value to compare elements with (LREM, LPOS, LINSERT's pivot), classified once.
#[derive(Clone, Copy, Debug)]
pub struct Needle<'a> {
    bytes: &'a [u8],
    int: Option<i64>,
}

impl<'a> Needle<'a> {
    pub fn new(bytes: &'a [u8]) -> Needle<'a> {
        Needle { bytes, int: parse_canonical_i64(bytes) }
    }
}

/// A node: entries packed back to back (see the module documentation).
#[derive(Clone, Debug, Default)]
struct Node {
    data: Vec<u8>,
    count: u32,
    /// Start offsets of every entry, for pops at the tail; valid only when its length is
    /// `count` and it is non-empty (`invalidate` clears it on every other change).
    offsets: Vec<u32>,
}

impl Node {
    fn cache_valid(&self) -> bool {
        !self.offsets.is_empty() && self.offsets.len() == self.count as usize
    }

    fn invalidate(&mut self) {
        if !self.offsets.is_empty() {
            self.offsets = Vec::new();
        }
    }

    /// Offset of entry `i` (`i <= count`; `count` gives the end).
    fn offset_of(&self, i: usize) -> usize {
        if i == self.count as usize {
            return self.data.len();
        }
        if self.cache_valid() {
            return self.offsets[i] as usize;
        }
        let mut at = 0;
        for _ in 0..i {
            at += entry_len(&self.data, at);
        }
        at
    }

    fn build_cache(&mut self) {
        if self.cache_valid() {
            return;
        }
        let mut offsets = Vec::with_capacity(self.count as usize);
        let mut at = 0;
        while at < self.data.len() {
            offsets.push(at as u32);
            at += entry_len(&self.data, at);
        }
        self.offsets = offsets;
    }

    /// Appends an entry given as its two parts (a header and a body, either may be empty).
    fn push_back(&mut self, head: &[u8], body: &[u8]) {
        // Only a cache some RPOP built is kept up to date: pushes never start one (it costs
        // 4 bytes per entry).
        let valid = self.cache_valid();
        let at = self.data.len();
        self.data.extend_from_slice(head);
        self.data.extend_from_slice(body);
        self.count += 1;
        if valid {
            self.offsets.push(at as u32);
        }
    }

    fn item(&self, i: usize) -> ListItem<'_> {
        decode(&self.data, self.offset_of(i))
    }

    /// A node holding `data[range]` of this one's entries `from..to`.
    fn slice(&self, from: usize, to: usize) -> Node {
        let (a, b) = (self.offset_of(from), self.offset_of(to));
        Node { data: self.data[a..b].to_vec(), count: (to - from) as u32, offsets: Vec::new() }
    }

    fn heap_bytes(&self) -> usize {
        crate::boxed_bytes(self.data.capacity()) + crate::boxed_bytes(self.offsets.capacity() * 4)
    }
}

/// The length of the entry at `data[at..]` (the data is well formed: written by `encode`
/// or checked by `check_entry`).
#[inline]
fn entry_len(data: &[u8], at: usize) -> usize {
    match data[at] {
        0x00..=0x7F => 1,
        0x80..=0xBF => 2,
        0xC0..=0xDF => 3,
        0xE0..=0xEF => 4,
        0xF0 => 9,
        0xF1 => 2,
        0xF2 => 3,
        0xF3 | 0xF4 => 5,
        0xF8 => 2 + data[at + 1] as usize,
        _ => 5 + u32::from_le_bytes([data[at + 1], data[at + 2], data[at + 3], data[at + 4]]) as usize,
    }
}

fn decode(data: &[u8], at: usize) -> ListItem<'_> {
    let b = |k: usize| data[at + k] as i64;
    let le = |n: usize| {
        let mut v = 0u64;
        for k in 0..n {
            v |= (data[at + 1 + k] as u64) << (8 * k);
        }
        v
    };
    match data[at] {
        h @ 0x00..=0x7F => ListItem::Int(h as i64),
        h @ 0x80..=0xBF => ListItem::Int(((h as i64 & 0x3F) << 8) | b(1)),
        h @ 0xC0..=0xDF => ListItem::Int(((h as i64 & 0x1F) << 16) | (b(1) << 8) | b(2)),
        h @ 0xE0..=0xEF => ListItem::Int(((h as i64 & 0x0F) << 24) | (b(1) << 16) | (b(2) << 8) | b(3)),
        0xF0 => ListItem::Int(le(8) as i64),
        0xF1 => ListItem::Int(-1 - le(1) as i64),
        0xF2 => ListItem::Int(-1 - le(2) as i64),
        0xF3 => ListItem::Int(-1 - le(4) as i64),
        0xF4 => ListItem::Int(le(4) as i64),
        0xF8 => {
            let n = data[at + 1] as usize;
            ListItem::Bytes(&data[at + 2..at + 2 + n])
        }
        _ => {
            let n = le(4) as usize;
            ListItem::Bytes(&data[at + 5..at + 5 + n])
        }
    }
}

/// The encoding of one element, built on the stack: an integer's whole entry, or a string's
/// header with the string itself borrowed (no allocation per pushed element).
struct Encoded<'a> {
    head: [u8; 9],
    head_len: usize,
    body: &'a [u8],
}

impl<'a> Encoded<'a> {
    fn new(v: &'a [u8]) -> Encoded<'a> {
        let mut head = [0u8; 9];
        let Some(i) = parse_canonical_i64(v) else {
            let head_len = match u8::try_from(v.len()) {
                Ok(n) => {
                    head[..2].copy_from_slice(&[0xF8, n]);
                    2
                }
                Err(_) => {
                    head[0] = 0xF9;
                    // Elements are bounded by proto-max-bulk-len; one of 4 GiB or more would
                    // not fit the u32 (clients cannot send one with the default limits).
                    head[1..5].copy_from_slice(&(v.len() as u32).to_le_bytes());
                    5
                }
            };
            return Encoded { head, head_len, body: v };
        };
        let mut put = |bytes: &[u8]| {
            head[..bytes.len()].copy_from_slice(bytes);
            bytes.len()
        };
        let head_len = match i {
            0..=0x7F => put(&[i as u8]),
            0x80..=0x3FFF => put(&[0x80 | (i >> 8) as u8, i as u8]),
            0x4000..=0x1F_FFFF => put(&[0xC0 | (i >> 16) as u8, (i >> 8) as u8, i as u8]),
            0x20_0000..=0x0FFF_FFFF => put(&[0xE0 | (i >> 24) as u8, (i >> 16) as u8, (i >> 8) as u8, i as u8]),
            0x1000_0000..=0xFFFF_FFFF => {
                let b = (i as u32).to_le_bytes();
                put(&[0xF4, b[0], b[1], b[2], b[3]])
            }
            -0x100..=-1 => put(&[0xF1, (-1 - i) as u8]),
            -0x1_0000..=-0x101 => {
                let b = ((-1 - i) as u16).to_le_bytes();
                put(&[0xF2, b[0], b[1]])
            }
            -0x1_0000_0000..=-0x1_0001 => {
                let b = ((-1 - i) as u32).to_le_bytes();
                put(&[0xF3, b[0], b[1], b[2], b[3]])
            }
            _ => {
                let b = i.to_le_bytes();
                put(&[0xF0, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            }
        };
        Encoded { head, head_len, body: &[] }
    }

    fn head(&self) -> &[u8] {
        &self.head[..self.head_len]
    }

    fn len(&self) -> usize {
        self.head_len + self.body.len()
    }

    /// Writes the entry into `data` at byte offset `at`, replacing `data[at..at + replace]`.
    fn splice_into(&self, data: &mut Vec<u8>, at: usize, replace: usize) {
        data.splice(at..at + replace, self.head().iter().chain(self.body).copied());
    }
}

/// The length of a well-formed entry at the front of `bytes`, or an error (snapshot input).
fn check_entry(bytes: &[u8]) -> Result<usize, DecodeError> {
    let h = *bytes.first().ok_or("truncated list")?;
    let n = match h {
        0xF5..=0xF7 | 0xFA..=0xFF => return Err("unknown list entry encoding"),
        0xF8 => 2 + *bytes.get(1).ok_or("truncated list")? as usize,
        0xF9 => {
            let len: [u8; 4] = bytes.get(1..5).ok_or("truncated list")?.try_into().map_err(|_| "truncated list")?;
            5usize.checked_add(u32::from_le_bytes(len) as usize).ok_or("list entry too long")?
        }
        _ => entry_len(&[h, 0, 0, 0, 0], 0),
    };
    if n > bytes.len() {
        return Err("truncated list");
    }
    Ok(n)
}

/// A Redis list value. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct List {
    nodes: VecDeque<Node>,
    len: usize,
}

impl List {
    pub fn new() -> List {
        List::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What OBJECT ENCODING reports: Redis 7.0 says "quicklist" for every list.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    pub fn push_back(&mut self, v: &[u8], limits: &ListLimits) {
        let enc = Encoded::new(v);
        self.push_back_parts(enc.head(), enc.body, limits);
    }

    fn push_back_parts(&mut self, head: &[u8], body: &[u8], limits: &ListLimits) {
        let fits = self.nodes.back().is_some_and(|n| limits.allows(n, head.len() + body.len()));
        if !fits {
            // The old tail is no longer popped from: its offsets go.
            if let Some(n) = self.nodes.back_mut() {
                n.invalidate();
            }
            self.nodes.push_back(Node::default());
        }
        if let Some(n) = self.nodes.back_mut() {
            n.push_back(head, body);
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, v: &[u8], limits: &ListLimits) {
        let enc = Encoded::new(v);
        let fits = self.nodes.front().is_some_and(|n| limits.allows(n, enc.len()));
        if !fits {
            self.nodes.push_front(Node::default());
        }
        if let Some(n) = self.nodes.front_mut() {
            enc.splice_into(&mut n.data, 0, 0);
            n.count += 1;
            n.invalidate();
        }
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let node = self.nodes.front_mut()?;
        let n = entry_len(&node.data, 0);
        let v = decode(&node.data, 0).to_vec();
        node.data.drain(..n);
        node.count -= 1;
        node.invalidate();
        if node.count == 0 {
            self.nodes.pop_front();
        }
        self.len -= 1;
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let node = self.nodes.back_mut()?;
        node.build_cache();
        let at = node.offsets.pop().map_or(0, |a| a as usize);
        let v = decode(&node.data, at).to_vec();
        node.data.truncate(at);
        node.count -= 1;
        if node.count == 0 {
            self.nodes.pop_back();
        }
        self.len -= 1;
        Some(v)
    }

    /// The node holding element `index` (< len) and the index within it, walking from the
    /// nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        debug_assert!(index < self.len);
        if index < self.len / 2 {
            let mut i = index;
            for (ni, n) in self.nodes.iter().enumerate() {
                if i < n.count as usize {
                    return (ni, i);
                }
                i -= n.count as usize;
            }
        } else {
            let mut from_end = self.len - 1 - index;
            for (ni, n) in self.nodes.iter().enumerate().rev() {
                if from_end < n.count as usize {
                    return (ni, n.count as usize - 1 - from_end);
                }
                from_end -= n.count as usize;
            }
        }
        unreachable!("node counts add up to len")
    }

    /// Element `index` (0-based from the head), if `index < len`.
    pub fn get(&self, index: usize) -> Option<ListItem<'_>> {
        if index >= self.len {
            return None;
        }
        let (ni, i) = self.locate(index);
        Some(self.nodes[ni].item(i))
    }

    /// Replaces element `index`; false (nothing changed) if out of range.
    pub fn set(&mut self, index: usize, v: &[u8], limits: &ListLimits) -> bool {
        if index >= self.len {
            return false;
        }
        let (ni, i) = self.locate(index);
        let enc = Encoded::new(v);
        let node = &mut self.nodes[ni];
        let at = node.offset_of(i);
        let n = entry_len(&node.data, at);
        enc.splice_into(&mut node.data, at, n);
        node.invalidate();
        self.rebalance(ni, limits);
        true
    }

    /// Inserts `v` so that it becomes element `index` (`index <= len`).
    pub fn insert(&mut self, index: usize, v: &[u8], limits: &ListLimits) {
        if index == 0 {
            return self.push_front(v, limits);
        }
        if index >= self.len {
            return self.push_back(v, limits);
        }
        let (ni, i) = self.locate(index);
        let enc = Encoded::new(v);
        let node = &mut self.nodes[ni];
        let at = node.offset_of(i);
        enc.splice_into(&mut node.data, at, 0);
        node.count += 1;
        node.invalidate();
        self.len += 1;
        self.rebalance(ni, limits);
    }

    /// Splits node `ni` in halves, recursively, while it exceeds `limits` with more than
    /// one entry.
    fn rebalance(&mut self, ni: usize, limits: &ListLimits) {
        if !limits.exceeded_by(&self.nodes[ni]) {
            return;
        }
        let node = &self.nodes[ni];
        let mid = node.count as usize / 2;
        let (left, right) = (node.slice(0, mid), node.slice(mid, node.count as usize));
        self.nodes[ni] = left;
        self.nodes.insert(ni + 1, right);
        self.rebalance(ni + 1, limits);
        self.rebalance(ni, limits);
    }

    /// The index of the first element equal to `pivot`, if any (LINSERT).
    pub fn position(&self, pivot: &[u8]) -> Option<usize> {
        let needle = Needle::new(pivot);
        self.iter().position(|item| item.matches(&needle))
    }

    /// Removes elements equal to `v` (LREM): the first `count` from the head if `count > 0`,
    /// the last `-count` if `count < 0`, all if 0. Returns how many were removed.
    pub fn remove(&mut self, v: &[u8], count: i64) -> usize {
        let needle = Needle::new(v);
        let total = if count < 0 { self.iter().filter(|i| i.matches(&needle)).count() } else { 0 };
        // Matches to skip before removing (from-tail removal keeps the first ones), and the
        // most to remove.
        let (mut skip, mut budget) = match count {
            0 => (0, usize::MAX),
            c if c > 0 => (0, usize::try_from(c).unwrap_or(usize::MAX)),
            c => {
                let want = usize::try_from(c.unsigned_abs()).unwrap_or(usize::MAX).min(total);
                (total - want, want)
            }
        };
        let mut removed = 0;
        for node in self.nodes.iter_mut() {
            if budget == 0 {
                break;
            }
            let mut kept = Vec::with_capacity(node.data.len());
            let mut at = 0;
            let mut dropped = 0u32;
            while at < node.data.len() {
                let n = entry_len(&node.data, at);
                let hit = budget > 0 && decode(&node.data, at).matches(&needle);
                let gone = hit && skip == 0;
                if hit && skip > 0 {
                    skip -= 1;
                }
                if gone {
                    budget -= 1;
                    dropped += 1;
                } else {
                    kept.extend_from_slice(&node.data[at..at + n]);
                }
                at += n;
            }
            if dropped > 0 {
                node.data = kept;
                node.count -= dropped;
                node.invalidate();
                removed += dropped as usize;
            }
        }
        self.nodes.retain(|n| n.count > 0);
        self.len -= removed;
        removed
    }

    /// Keeps elements `start..end` (LTRIM with its indices resolved), dropping the rest.
    pub fn retain_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.len);
        if start >= end {
            *self = List::new();
            return;
        }
        self.drop_back(self.len - end);
        self.drop_front(start);
    }

    fn drop_front(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.front_mut() else { return };
            if n >= node.count as usize {
                n -= node.count as usize;
                self.nodes.pop_front();
            } else {
                let at = node.offset_of(n);
                node.data.drain(..at);
                node.count -= n as u32;
                node.invalidate();
                n = 0;
            }
        }
    }

    fn drop_back(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.back_mut() else { return };
            if n >= node.count as usize {
                n -= node.count as usize;
                self.nodes.pop_back();
            } else {
                let keep = node.count as usize - n;
                let at = node.offset_of(keep);
                node.data.truncate(at);
                node.count = keep as u32;
                node.invalidate();
                n = 0;
            }
        }
    }

    /// The elements from the head.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// The elements from `index` to the tail.
    pub fn iter_from(&self, index: usize) -> Iter<'_> {
        if index >= self.len {
            return Iter { list: self, node: self.nodes.len(), at: 0, left: 0 };
        }
        let (ni, i) = self.locate(index);
        Iter { list: self, node: ni, at: self.nodes[ni].offset_of(i), left: self.len - index }
    }

    /// The elements from the tail to the head.
    pub fn iter_rev(&self) -> RevIter<'_> {
        RevIter { list: self, node: self.nodes.len(), offsets: Vec::new() }
    }

    /// Approximate heap bytes owned by the list, for memory accounting: O(nodes).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>() + self.nodes.iter().map(Node::heap_bytes).sum::<usize>()
    }

    /// Appends the byte form of the list to `out`: the element count (u64, little-endian)
    /// and the entries back to back, whatever the node layout.
    pub fn serialize_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.len as u64).to_le_bytes());
        out.reserve(self.nodes.iter().map(|n| n.data.len()).sum());
        for n in &self.nodes {
            out.extend_from_slice(&n.data);
        }
    }

    /// Decodes what [`List::serialize_into`] wrote (the whole of `bytes`), into nodes of
    /// `limits`.
    pub fn deserialize(bytes: &[u8], limits: &ListLimits) -> Result<List, DecodeError> {
        let count: [u8; 8] = bytes.get(..8).ok_or("truncated list")?.try_into().map_err(|_| "truncated list")?;
        let count = u64::from_le_bytes(count);
        let mut list = List::new();
        let mut rest = &bytes[8..];
        while !rest.is_empty() {
            let n = check_entry(rest)?;
            list.push_back_parts(&rest[..n], &[], limits);
            rest = &rest[n..];
        }
        if list.len as u64 != count {
            return Err("list count does not match its entries");
        }
        if let Some(n) = list.nodes.back_mut() {
            n.invalidate();
        }
        Ok(list)
    }
}

/// Forward iterator over a [`List`]'s elements; see [`List::iter_from`].
pub struct Iter<'a> {
    list: &'a List,
    node: usize,
    at: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = ListItem<'a>;

    fn next(&mut self) -> Option<ListItem<'a>> {
        loop {
            let node = self.list.nodes.get(self.node)?;
            if self.at < node.data.len() {
                let item = decode(&node.data, self.at);
                self.at += entry_len(&node.data, self.at);
                self.left -= 1;
                return Some(item);
            }
            self.node += 1;
            self.at = 0;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// Backward iterator over a [`List`]'s elements: each node's offsets are collected once
/// (nodes are walked forwards only).
pub struct RevIter<'a> {
    list: &'a List,
    node: usize,
    offsets: Vec<usize>,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = ListItem<'a>;

    fn next(&mut self) -> Option<ListItem<'a>> {
        loop {
            if let Some(at) = self.offsets.pop() {
                return Some(decode(&self.list.nodes[self.node].data, at));
            }
            if self.node == 0 {
                return None;
            }
            self.node -= 1;
            let data = &self.list.nodes[self.node].data;
            let mut at = 0;
            while at < data.len() {
                self.offsets.push(at);
                at += entry_len(data, at);
            }
        }
    }
}

#[cfg(test)]
pub(crate) fn node_count(list: &List) -> usize {
    list.nodes.len()
}

#[cfg(test)]
pub(crate) fn check_invariants(list: &List, limits: &ListLimits) {
    assert_eq!(list.nodes.iter().map(|n| n.count as usize).sum::<usize>(), list.len);
    for n in &list.nodes {
        assert!(n.count > 0, "an empty node");
        let mut at = 0;
        let mut count = 0;
        while at < n.data.len() {
            if n.cache_valid() {
                assert_eq!(n.offsets[count] as usize, at);
            }
            at += check_entry(&n.data[at..]).expect("well-formed entries");
            count += 1;
        }
        assert_eq!((at, count), (n.data.len(), n.count as usize));
        assert!(!limits.exceeded_by(n), "node over its limits");
    }
}

#[cfg(test)]
pub(crate) fn encoded_len(v: &[u8]) -> usize {
    Encoded::new(v).len()
}
