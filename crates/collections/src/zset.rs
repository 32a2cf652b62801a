//! `ZSet`: the value of a Redis sorted set (member -> score, ordered by (score, member)).
//!
//! Two encodings, named as Redis 7.0 names them in OBJECT ENCODING:
//! - `listpack`: up to `zset-max-listpack-entries` (128) members of at most
//!   `zset-max-listpack-value` (64) bytes, one `Vec<(score, member)>` kept sorted. Every
//!   operation is a linear scan or a binary search of <= 128 entries, which beats any
//!   pointer structure at that size; most sorted sets (per-user top-Ks) live here.
//! - `skiplist` (what Redis reports; the structure is not one): [`Big`], built for memory
//!   first. Redis pays a skiplist node (~48-64 B), a dict entry (24 B), a bucket and an sds
//!   header per member: 100+ bytes beyond the member's bytes. Here a member costs
//!   - its bytes in one arena (`Vec<u8>`, no per-member allocation),
//!   - a 16-byte slot (score, arena location), addressed by a `u32` id,
//!   - a `u32` in an order chunk (chunks of at most 256 ids kept in (score, member) order,
//!     a Fenwick tree over the chunk lengths gives rank <-> position in O(log n)),
//!   - a `u32` in a hashbrown `HashTable` of ids that hashes and compares through the arena
//!     (member -> id -> score in O(1)).
//!
//!   About 30 bytes per member plus its bytes. The price: comparisons inside a chunk read
//!   the slots (a cache miss each, ~8 per binary search); a chunk split or removal rebuilds
//!   the Fenwick tree (O(chunks), once per >= 128 inserts); removed members leave garbage in
//!   the arena until it is compacted (when more than half is garbage), so memory stays
//!   within 2x of live bytes.
//!
//! Ordering is Redis's: by score (`<` on f64, so -0.0 == 0.0), ties by member bytes
//! (memcmp, then length: Rust's slice order). NaN never gets in: the callers refuse it and
//! [`ZSet::insert`] asserts it. As Redis 7.0's listpack (which stores scores through
//! `d2string`), a listpack turns -0.0 into 0.0 while the skiplist keeps the sign.
//!
//! The API is rank-based, so commands and GEO (scores are 52-bit geohashes) share it:
//! [`ZSet::rank_where`] gives the number of leading members satisfying a monotone predicate
//! (a score or lex bound), and [`ZSet::range`] iterates a rank range both ways.
//! Conversion goes only listpack -> skiplist, at the insert that needs it, never back.

use hashbrown::HashTable;
use rand::Rng;

use crate::random::{sample_distinct, sample_with_repeats};
use crate::{boxed_bytes, EncodingLimits};

/// Redis 7.0's `zset-max-listpack-entries` / `-value` defaults.
pub const ZSET_DEFAULT_LIMITS: EncodingLimits = EncodingLimits { max_listpack_entries: 128, max_listpack_value_bytes: 64 };

/// A sorted set. See the module documentation.
#[derive(Clone, Debug)]
pub struct ZSet {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    Listpack(Vec<(f64, Box<[u8]>)>),
    Skiplist(Box<Big>),
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet { repr: Repr::Listpack(Vec::new()) }
    }
}

/// (score, member) strictly before (score2, member2) in Redis's order.
#[inline]
fn key_lt(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && m1 < m2)
}

impl ZSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(v) => v.len(),
            Repr::Skiplist(b) => b.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Skiplist(_) => "skiplist",
        }
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Listpack(_))
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Listpack(v) => v.iter().find(|(_, m)| **m == *member).map(|(s, _)| *s),
            Repr::Skiplist(b) => b.find(member).map(|id| b.slots[id as usize].score),
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.score(member).is_some()
    }

    /// Sets `member`'s score (adding it if new) with the given listpack limits; returns the
    /// previous score. Converts to the skiplist first when the listpack would exceed a limit.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &EncodingLimits) -> Option<f64> {
        assert!(!score.is_nan(), "callers refuse NaN scores");
        if let Repr::Listpack(v) = &mut self.repr {
            let at = v.iter().position(|(_, m)| **m == *member);
            // As Redis: only a new member can convert (an update keeps the encoding even
            // when a lowered limit is already exceeded).
            let fits = at.is_some() || limits.fits(v.len() + 1, member.len());
            if fits {
                // As Redis 7.0's listpack (d2string): no negative zero.
                let score = score + 0.0;
                let old = at.map(|i| v.remove(i));
                let pos = v.partition_point(|(s, m)| key_lt(*s, m, score, member));
                let (old_score, boxed) = match old {
                    Some((s, m)) => (Some(s), m),
                    None => (None, member.into()),
                };
                v.insert(pos, (score, boxed));
                return old_score;
            }
            self.convert_to_skiplist();
        }
        let Repr::Skiplist(b) = &mut self.repr else { unreachable!("converted above") };
        b.insert(member, score)
    }

    /// A set built from members already in order and distinct (a computed result): a
    /// listpack if the whole result fits `limits`, else a skiplist holding the scores exactly
    /// as given (-0.0 included), as Redis builds a ZUNIONSTORE result in a skiplist and
    /// converts it only when small (`zsetConvertToListpackIfNeeded`). None if not in order.
    pub fn from_sorted(items: Vec<(Vec<u8>, f64)>, limits: &EncodingLimits) -> Option<ZSet> {
        if items.windows(2).any(|w| !key_lt(w[0].1, &w[0].0, w[1].1, &w[1].0)) || items.iter().any(|(_, s)| s.is_nan()) {
            return None;
        }
        let longest = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        if limits.fits(items.len(), longest) {
            let v = items.into_iter().map(|(m, s)| (s + 0.0, m.into_boxed_slice())).collect();
            return Some(ZSet { repr: Repr::Listpack(v) });
        }
        let mut big = Big::default();
        for (m, s) in items {
            big.push_max(&m, s);
        }
        Some(ZSet { repr: Repr::Skiplist(Box::new(big)) })
    }

    fn convert_to_skiplist(&mut self) {
        let Repr::Listpack(v) = &mut self.repr else { return };
        let mut big = Big::default();
        for (score, member) in v.drain(..) {
            big.push_max(&member, score);
        }
        self.repr = Repr::Skiplist(Box::new(big));
    }

    /// Removes `member`; its score if it was present. Never changes the encoding.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Listpack(v) => {
                let i = v.iter().position(|(_, m)| **m == *member)?;
                Some(v.remove(i).0)
            }
            Repr::Skiplist(b) => b.remove(member),
        }
    }

    /// 0-based ascending rank of `member`.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.repr {
            Repr::Listpack(v) => v.iter().position(|(_, m)| **m == *member),
            Repr::Skiplist(b) => {
                let id = b.find(member)?;
                let score = b.slots[id as usize].score;
                Some(b.rank_where(|s, m| key_lt(s, m, score, member)))
            }
        }
    }

    /// The number of leading members (in ascending order) for which `below(score, member)`
    /// holds. `below` must be monotone: true for a prefix, false after (a lower bound).
    pub fn rank_where(&self, below: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Listpack(v) => v.partition_point(|(s, m)| below(*s, m)),
            Repr::Skiplist(b) => b.rank_where(below),
        }
    }

    /// The member at ascending rank `rank`.
    pub fn get_by_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        match &self.repr {
            Repr::Listpack(v) => v.get(rank).map(|(s, m)| (&**m, *s)),
            Repr::Skiplist(b) => {
                if rank >= b.len {
                    return None;
                }
                let (ci, off) = b.locate(rank);
                let id = b.chunks[ci][off];
                Some((b.member(id), b.slots[id as usize].score))
            }
        }
    }

    /// Members of ascending ranks `start..end` (clamped to the length), as a double-ended
    /// iterator (`.rev()` for descending order).
    pub fn range(&self, start: usize, end: usize) -> Range<'_> {
        let end = end.min(self.len());
        let start = start.min(end);
        match &self.repr {
            Repr::Listpack(v) => Range::Listpack(v[start..end].iter()),
            Repr::Skiplist(b) => {
                let front = if start < b.len { b.locate(start) } else { (b.chunks.len(), 0) };
                let back = if end < b.len { b.locate(end) } else { (b.chunks.len().saturating_sub(1), b.chunks.last().map_or(0, Vec::len)) };
                Range::Skiplist { big: b, front, back, left: end - start }
            }
        }
    }

    /// Every member in ascending order.
    pub fn iter(&self) -> Range<'_> {
        self.range(0, usize::MAX)
    }

    /// Removes the members of ascending ranks `start..end` (clamped); returns them in order.
    pub fn remove_range(&mut self, start: usize, end: usize) -> Vec<(Vec<u8>, f64)> {
        let removed: Vec<(Vec<u8>, f64)> = self.range(start, end).map(|(m, s)| (m.to_vec(), s)).collect();
        match &mut self.repr {
            Repr::Listpack(v) => {
                let end = end.min(v.len());
                v.drain(start.min(end)..end);
            }
            Repr::Skiplist(b) => {
                for (m, _) in &removed {
                    b.remove(m);
                }
            }
        }
        removed
    }

    /// One uniformly random member (ZRANDMEMBER without count).
    pub fn random(&self, rng: &mut impl Rng) -> Option<(&[u8], f64)> {
        (!self.is_empty()).then(|| self.get_by_rank(rng.gen_range(0..self.len())).expect("rank < len"))
    }

    /// `count` distinct random members in random order, or all (in order) when count >= len.
    pub fn random_distinct(&self, count: usize, rng: &mut impl Rng) -> Vec<(&[u8], f64)> {
        if count >= self.len() {
            return self.iter().collect();
        }
        sample_distinct(self.len() as u64, count as u64, rng).into_iter().map(|r| self.get_by_rank(r as usize).expect("rank < len")).collect()
    }

    /// `count` independent random members, repeats allowed.
    pub fn random_with_repeats(&self, count: usize, rng: &mut impl Rng) -> Vec<(&[u8], f64)> {
        if self.is_empty() {
            return Vec::new();
        }
        sample_with_repeats(self.len() as u64, count as u64, rng).into_iter().map(|r| self.get_by_rank(r as usize).expect("rank < len")).collect()
    }

    /// One ZSCAN step: a listpack whole with cursor 0 (as Redis); a skiplist by slot ids from
    /// `cursor` upwards. A member keeps its id for as long as it is in the set, so every member
    /// present for the whole scan is returned (at least once; exactly once if nothing changes).
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(&[u8], f64)>) {
        match &self.repr {
            Repr::Listpack(_) => (0, self.iter().collect()),
            Repr::Skiplist(b) => {
                let mut id = usize::try_from(cursor).unwrap_or(usize::MAX).min(b.slots.len());
                let mut out = Vec::new();
                let mut visited = 0;
                while id < b.slots.len() && visited < count.max(1) {
                    if b.slots[id].is_live() {
                        out.push((b.member(id as u32), b.slots[id].score));
                    }
                    id += 1;
                    visited += 1;
                }
                (if id >= b.slots.len() { 0 } else { id as u64 }, out)
            }
        }
    }

    /// Approximate heap bytes owned by the set, for memory accounting: O(entries) for a listpack,
    /// O(chunks) (1/128 of the members at most) for a skiplist.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Listpack(v) => {
                v.capacity() * std::mem::size_of::<(f64, Box<[u8]>)>() + v.iter().map(|(_, m)| boxed_bytes(m.len())).sum::<usize>()
            }
            Repr::Skiplist(b) => std::mem::size_of::<Big>() + b.heap_bytes(),
        }
    }

    /// Appends the byte form: `[u8 encoding][u32 count]` then `[f64 bits][u32 len][member]`
    /// per member in order. The encoding is kept, so OBJECT ENCODING answers the same after a
    /// restart.
    pub fn serialize_into(&self, out: &mut Vec<u8>) {
        out.push(u8::from(!self.is_listpack()));
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        for (m, s) in self.iter() {
            out.extend_from_slice(&s.to_bits().to_le_bytes());
            out.extend_from_slice(&(m.len() as u32).to_le_bytes());
            out.extend_from_slice(m);
        }
    }

    /// Decodes [`ZSet::serialize_into`]'s form; strict: members must be in order, distinct,
    /// scores not NaN, the bytes exactly consumed.
    pub fn deserialize(bytes: &[u8]) -> Result<ZSet, crate::DecodeError> {
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], crate::DecodeError> {
            let end = at.checked_add(n).filter(|&e| e <= bytes.len()).ok_or("truncated sorted set")?;
            let s = &bytes[at..end];
            at = end;
            Ok(s)
        };
        let skiplist = match take(1)?[0] {
            0 => false,
            1 => true,
            _ => return Err("unknown sorted set encoding"),
        };
        let n = u32::from_le_bytes(take(4)?.try_into().map_err(|_| "truncated sorted set")?) as usize;
        if n.saturating_mul(12) > bytes.len() {
            return Err("sorted set count exceeds its bytes");
        }
        let mut z = ZSet::new();
        if skiplist {
            z.repr = Repr::Skiplist(Box::default());
        }
        let mut prev: Option<(f64, Vec<u8>)> = None;
        for _ in 0..n {
            let score = f64::from_bits(u64::from_le_bytes(take(8)?.try_into().map_err(|_| "truncated sorted set")?));
            let len = u32::from_le_bytes(take(4)?.try_into().map_err(|_| "truncated sorted set")?) as usize;
            let member = take(len)?;
            if score.is_nan() {
                return Err("NaN score in sorted set");
            }
            if let Some((ps, pm)) = &prev {
                if !key_lt(*ps, pm, score, member) || (*ps == score && **pm == *member) {
                    return Err("sorted set members out of order");
                }
            }
            match &mut z.repr {
                Repr::Listpack(v) => v.push((score, member.into())),
                Repr::Skiplist(b) => {
                    if b.find(member).is_some() {
                        return Err("duplicate sorted set member");
                    }
                    b.push_max(member, score);
                }
            }
            prev = Some((score, member.to_vec()));
        }
        if at != bytes.len() {
            return Err("trailing bytes after sorted set");
        }
        if let Repr::Listpack(v) = &z.repr {
            for (i, (_, m)) in v.iter().enumerate() {
                if v[..i].iter().any(|(_, o)| o == m) {
                    return Err("duplicate sorted set member");
                }
            }
        }
        Ok(z)
    }
}

/// A rank range of a [`ZSet`] (see [`ZSet::range`]): `(member, score)` pairs.
pub enum Range<'a> {
    Listpack(std::slice::Iter<'a, (f64, Box<[u8]>)>),
    Skiplist { big: &'a Big, front: (usize, usize), back: (usize, usize), left: usize },
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Range::Listpack(it) => it.next().map(|(s, m)| (&**m, *s)),
            Range::Skiplist { big, front, left, .. } => {
                if *left == 0 {
                    return None;
                }
                while front.1 >= big.chunks[front.0].len() {
                    *front = (front.0 + 1, 0);
                }
                let id = big.chunks[front.0][front.1];
                front.1 += 1;
                *left -= 1;
                Some((big.member(id), big.slots[id as usize].score))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Range::Listpack(it) => it.size_hint(),
            Range::Skiplist { left, .. } => (*left, Some(*left)),
        }
    }
}

impl DoubleEndedIterator for Range<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Range::Listpack(it) => it.next_back().map(|(s, m)| (&**m, *s)),
            Range::Skiplist { big, back, left, .. } => {
                if *left == 0 {
                    return None;
                }
                while back.1 == 0 {
                    back.0 -= 1;
                    back.1 = big.chunks[back.0].len();
                }
                back.1 -= 1;
                let id = big.chunks[back.0][back.1];
                *left -= 1;
                Some((big.member(id), big.slots[id as usize].score))
            }
        }
    }
}

impl ExactSizeIterator for Range<'_> {}

/// Most ids an order chunk holds; a full chunk splits in two halves.
const CHUNK_MAX: usize = 256;
/// A member's length in a slot: 24 bits; longer members keep a u32 length prefix in the arena.
const LEN_BITS: u32 = 24;
const LEN_IN_ARENA: u64 = (1 << LEN_BITS) - 1;
/// A free slot's location.
const FREE: u64 = u64::MAX;

/// A member's slot: its score and where its bytes are (arena offset << 24 | length).
#[derive(Clone, Copy, Debug)]
struct Slot {
    score: f64,
    loc: u64,
}

impl Slot {
    fn is_live(&self) -> bool {
        self.loc != FREE
    }
}

/// The large encoding (see the module documentation).
#[derive(Clone, Default)]
pub struct Big {
    slots: Vec<Slot>,
    free: Vec<u32>,
    arena: Vec<u8>,
    /// Arena bytes of removed members, reclaimed by `compact`.
    garbage: usize,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    /// Ids in (score, member) order, each chunk non-empty and at most `CHUNK_MAX` long.
    chunks: Vec<Vec<u32>>,
    /// Fenwick tree over the chunks' lengths.
    fenwick: Vec<usize>,
    len: usize,
}

impl std::fmt::Debug for Big {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Big").field("len", &self.len).field("chunks", &self.chunks.len()).finish()
    }
}

impl Big {
    fn hash(hasher: &foldhash::fast::RandomState, bytes: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        hasher.hash_one(bytes)
    }

    /// The bytes of member `id` (a live slot).
    fn member(&self, id: u32) -> &[u8] {
        member_bytes(&self.arena, self.slots[id as usize].loc)
    }

    fn find(&self, member: &[u8]) -> Option<u32> {
        let h = Self::hash(&self.hasher, member);
        self.index.find(h, |&id| member_bytes(&self.arena, self.slots[id as usize].loc) == member).copied()
    }

    fn alloc(&mut self, member: &[u8], score: f64) -> u32 {
        let off = self.arena.len() as u64;
        let loc = if (member.len() as u64) < LEN_IN_ARENA {
            (off << LEN_BITS) | member.len() as u64
        } else {
            self.arena.extend_from_slice(&(member.len() as u32).to_le_bytes());
            (off << LEN_BITS) | LEN_IN_ARENA
        };
        self.arena.extend_from_slice(member);
        let slot = Slot { score, loc };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        let h = Self::hash(&self.hasher, member);
        let (slots, arena, hasher) = (&self.slots, &self.arena, &self.hasher);
        self.index.insert_unique(h, id, |&i| Self::hash(hasher, member_bytes(arena, slots[i as usize].loc)));
        id
    }

    /// Appends a member known to sort after every present one (conversion, loading).
    fn push_max(&mut self, member: &[u8], score: f64) {
        let id = self.alloc(member, score);
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK_MAX => c.push(id),
            _ => self.chunks.push(vec![id]),
        }
        self.len += 1;
        self.rebuild_fenwick_lazy();
    }

    fn rebuild_fenwick_lazy(&mut self) {
        // Called per push while loading: rebuild only when the chunk count changed.
        if self.fenwick.len() != self.chunks.len() {
            self.rebuild_fenwick();
        } else if let Some(last) = self.chunks.len().checked_sub(1) {
            self.fenwick_add(last, 1);
        }
    }

    fn rebuild_fenwick(&mut self) {
        let n = self.chunks.len();
        self.fenwick.clear();
        self.fenwick.extend(self.chunks.iter().map(Vec::len));
        for i in 0..n {
            let j = i | (i + 1);
            if j < n {
                self.fenwick[j] += self.fenwick[i];
            }
        }
    }

    fn fenwick_add(&mut self, mut i: usize, delta: isize) {
        while i < self.fenwick.len() {
            self.fenwick[i] = self.fenwick[i].wrapping_add_signed(delta);
            i |= i + 1;
        }
    }

    /// Members in chunks `0..i`.
    fn prefix(&self, i: usize) -> usize {
        let (mut sum, mut i) = (0, i);
        while i > 0 {
            sum += self.fenwick[i - 1];
            i &= i - 1;
        }
        sum
    }

    /// (chunk, offset) of ascending rank `rank < len`.
    fn locate(&self, mut rank: usize) -> (usize, usize) {
        let n = self.fenwick.len();
        let mut pos = 0;
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next <= n && self.fenwick[next - 1] <= rank {
                pos = next;
                rank -= self.fenwick[next - 1];
            }
            step >>= 1;
        }
        (pos, rank)
    }

    fn rank_where(&self, below: impl Fn(f64, &[u8]) -> bool) -> usize {
        let key = |id: u32| (self.slots[id as usize].score, self.member(id));
        // The first chunk whose last member is not below: the boundary is inside it.
        let ci = self.chunks.partition_point(|c| {
            let (s, m) = key(*c.last().expect("chunks are never empty"));
            below(s, m)
        });
        if ci == self.chunks.len() {
            return self.len;
        }
        let off = self.chunks[ci].partition_point(|&id| {
            let (s, m) = key(id);
            below(s, m)
        });
        self.prefix(ci) + off
    }

    /// Inserts `id` (a live slot, not in the order) at its place.
    fn place(&mut self, id: u32) {
        if self.chunks.is_empty() {
            self.chunks.push(vec![id]);
            self.rebuild_fenwick();
            return;
        }
        // The search borrows the arena; the position is known before anything moves.
        let (ci, off) = {
            let (score, member) = (self.slots[id as usize].score, self.member(id));
            let below = |s: f64, m: &[u8]| key_lt(s, m, score, member);
            let key = |id: u32| (self.slots[id as usize].score, self.member(id));
            let ci = self
                .chunks
                .partition_point(|c| {
                    let (s, m) = key(*c.last().expect("chunks are never empty"));
                    below(s, m)
                })
                .min(self.chunks.len() - 1);
            let off = self.chunks[ci].partition_point(|&i| {
                let (s, m) = key(i);
                below(s, m)
            });
            (ci, off)
        };
        self.chunks[ci].insert(off, id);
        if self.chunks[ci].len() > CHUNK_MAX {
            let tail = self.chunks[ci].split_off(CHUNK_MAX / 2);
            self.chunks[ci].shrink_to(CHUNK_MAX);
            self.chunks.insert(ci + 1, tail);
            self.rebuild_fenwick();
        } else {
            self.fenwick_add(ci, 1);
        }
    }

    /// Takes `id` (live, with its current score) out of the order.
    fn unplace(&mut self, id: u32) {
        let rank = {
            let (score, member) = (self.slots[id as usize].score, self.member(id));
            self.rank_where(|s, m| key_lt(s, m, score, member))
        };
        let (ci, off) = self.locate(rank);
        debug_assert_eq!(self.chunks[ci][off], id);
        self.chunks[ci].remove(off);
        if self.chunks[ci].is_empty() {
            self.chunks.remove(ci);
            self.rebuild_fenwick();
        } else {
            self.fenwick_add(ci, -1);
        }
    }

    fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        if let Some(id) = self.find(member) {
            let old = self.slots[id as usize].score;
            // As Redis: an equal score (-0.0 == 0.0 included) leaves the member as it is.
            if old != score {
                self.unplace(id);
                self.slots[id as usize].score = score;
                self.place(id);
            }
            return Some(old);
        }
        let id = self.alloc(member, score);
        self.place(id);
        self.len += 1;
        None
    }

    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let id = self.find(member)?;
        self.unplace(id);
        let h = Self::hash(&self.hasher, member);
        if let Ok(entry) = self.index.find_entry(h, |&i| i == id) {
            entry.remove();
        }
        let slot = std::mem::replace(&mut self.slots[id as usize], Slot { score: 0.0, loc: FREE });
        self.garbage += member.len() + if (member.len() as u64) < LEN_IN_ARENA { 0 } else { 4 };
        self.free.push(id);
        self.len -= 1;
        if self.len == 0 {
            // Drop everything: an empty set is about to be deleted or refilled.
            let hasher = self.hasher;
            *self = Big { hasher, ..Big::default() };
        } else if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
        Some(slot.score)
    }

    /// Rewrites the arena with only live members (ids and the index stay valid).
    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for slot in self.slots.iter_mut().filter(|s| s.is_live()) {
            let bytes = member_bytes(&self.arena, slot.loc);
            let off = arena.len() as u64;
            let len_field = slot.loc & LEN_IN_ARENA;
            if len_field == LEN_IN_ARENA {
                arena.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            }
            arena.extend_from_slice(bytes);
            slot.loc = (off << LEN_BITS) | len_field;
        }
        self.arena = arena;
        self.garbage = 0;
    }

    fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.free.capacity() * 4
            + self.arena.capacity()
            + self.index.capacity() * 4 * 8 / 7
            + self.index.capacity() * 8 / 7
            + self.chunks.capacity() * 24
            + self.chunks.iter().map(|c| c.capacity() * 4).sum::<usize>()
            + self.fenwick.capacity() * 8
    }
}

fn member_bytes(arena: &[u8], loc: u64) -> &[u8] {
    let off = (loc >> LEN_BITS) as usize;
    let len = loc & LEN_IN_ARENA;
    if len == LEN_IN_ARENA {
        let n = u32::from_le_bytes(arena[off..off + 4].try_into().expect("4 bytes")) as usize;
        &arena[off + 4..off + 4 + n]
    } else {
        &arena[off..off + len as usize]
    }
}
