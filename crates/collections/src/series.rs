//! `Series`: the value of a RedisTimeSeries-style time series key.
//!
//! Samples (u64 millisecond timestamp, f64 value) live in Gorilla chunks (`gorilla.rs`), in
//! increasing timestamp order, each chunk closed once its encoded stream reaches
//! `chunk_size_bytes` (RedisTimeSeries's CHUNK_SIZE, 4096 by default). Appends (the common
//! case: a timestamp after the last one) touch only the last chunk's tail. An out-of-order
//! insert or an update of an existing timestamp (DUPLICATE_POLICY) decodes the one chunk
//! that covers the timestamp and encodes it again, splitting it when it outgrows twice the
//! chunk size, so backfill works at any position at the cost of one chunk.
//!
//! Retention (RETENTION ms, 0 = forever) is relative to the newest sample, as in
//! RedisTimeSeries: a sample older than `last - retention` is refused, and whole chunks
//! whose newest sample fell out of the window are dropped after each add.
//!
//! The series also carries its metadata (labels, policy, compaction rules and the key of its
//! source when it is a rule's destination): the server interprets them, this type only keeps
//! them and serializes them with the samples.

use crate::gorilla::Chunk;

/// A series' labels: (name, value) pairs in the order they were given.
pub type Labels = Vec<(Box<[u8]>, Box<[u8]>)>;

/// What happens when a sample arrives for a timestamp the series already has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DuplicatePolicy {
    Block,
    First,
    Last,
    Min,
    Max,
    Sum,
}

impl DuplicatePolicy {
    pub const ALL: [DuplicatePolicy; 6] = [Self::Block, Self::First, Self::Last, Self::Min, Self::Max, Self::Sum];

    /// The lower-case name TS.INFO reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::First => "first",
            Self::Last => "last",
            Self::Min => "min",
            Self::Max => "max",
            Self::Sum => "sum",
        }
    }

    /// Case-insensitive parse of a policy name.
    pub fn parse(s: &[u8]) -> Option<DuplicatePolicy> {
        Self::ALL.into_iter().find(|p| p.name().as_bytes().eq_ignore_ascii_case(s))
    }

    fn code(self) -> u8 {
        self as u8
    }

    /// The value kept when `new` arrives for a timestamp holding `old`; `None` = refused.
    pub fn resolve(self, old: f64, new: f64) -> Option<f64> {
        match self {
            Self::Block => None,
            Self::First => Some(old),
            Self::Last => Some(new),
            Self::Min => Some(if new < old { new } else { old }),
            Self::Max => Some(if new > old { new } else { old }),
            Self::Sum => Some(old + new),
        }
    }
}

/// Why an add was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The timestamp exists and the policy is BLOCK.
    Blocked,
    /// The timestamp is older than the retention window allows.
    TooOld,
}

/// A compaction rule kept on its source series.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub dest: Box<[u8]>,
    /// The aggregator's code (the server's `Aggregator` as u8).
    pub agg: u8,
    pub bucket_ms: u64,
    pub align_ms: u64,
    /// The start of the bucket still open (samples may still arrive for it), if any.
    pub open_bucket: Option<u64>,
    /// The earliest source timestamp the open bucket's aggregate covers (`u64::MAX`: none
    /// yet). RedisTimeSeries aggregates a rule's open bucket from the samples appended since
    /// the rule opened it (a rule made on a series with samples ignores those of its first
    /// bucket) and folds it again from the source after an upsert into it, from the upserted
    /// sample's bucket; the server folds the source's samples from here, which is the same.
    pub fold_from_ms: u64,
}

/// A time series value.
#[derive(Clone, Debug)]
pub struct Series {
    pub retention_ms: u64,
    pub chunk_size_bytes: u64,
    /// `None`: not set on the series (the server's default applies).
    pub duplicate_policy: Option<DuplicatePolicy>,
    /// ENCODING UNCOMPRESSED was asked for: reported as such; the samples are still stored
    /// compressed (the reply to every read is the same either way).
    pub uncompressed: bool,
    pub labels: Labels,
    pub src_key: Option<Box<[u8]>>,
    pub rules: Vec<Rule>,
    chunks: Vec<Chunk>,
    total: u64,
}

impl PartialEq for Series {
    fn eq(&self, o: &Series) -> bool {
        self.retention_ms == o.retention_ms
            && self.chunk_size_bytes == o.chunk_size_bytes
            && self.duplicate_policy == o.duplicate_policy
            && self.uncompressed == o.uncompressed
            && self.labels == o.labels
            && self.src_key == o.src_key
            && self.rules == o.rules
            && self.total == o.total
            && self.range(0, u64::MAX).zip(o.range(0, u64::MAX)).all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
    }
}

/// The chunk size RedisTimeSeries uses when none is given.
pub const DEFAULT_CHUNK_SIZE_BYTES: u64 = 4096;

impl Default for Series {
    fn default() -> Self {
        Series::new()
    }
}

impl Series {
    pub fn new() -> Series {
        Series {
            retention_ms: 0,
            chunk_size_bytes: DEFAULT_CHUNK_SIZE_BYTES,
            duplicate_policy: None,
            uncompressed: false,
            labels: Vec::new(),
            src_key: None,
            rules: Vec::new(),
            chunks: Vec::new(),
            total: 0,
        }
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub fn chunk_count(&self) -> usize {
        self.chunks.len().max(1)
    }

    /// The oldest timestamp a read sees: the newest sample minus RETENTION (0 with none).
    /// Samples older than it may still sit in a chunk not yet dropped (retention drops whole
    /// chunks) and count for TS.DEL, but every read skips them, as the module's.
    pub fn retention_floor(&self) -> u64 {
        match self.last() {
            Some((l, _)) if self.retention_ms != 0 => l.saturating_sub(self.retention_ms),
            _ => 0,
        }
    }

    /// How many samples a read sees (TS.INFO's totalSamples): those at or after
    /// [`Series::retention_floor`].
    pub fn len_in_window(&self) -> u64 {
        let floor = self.retention_floor();
        let i = self.chunks.partition_point(|c| c.last_ts() < floor);
        let Some(c) = self.chunks.get(i) else { return 0 };
        let partial = c.iter().filter(|s| s.0 >= floor).count() as u64;
        partial + self.chunks[i + 1..].iter().map(|c| c.len() as u64).sum::<u64>()
    }

    pub fn first(&self) -> Option<(u64, f64)> {
        self.range(0, u64::MAX).next()
    }

    pub fn last(&self) -> Option<(u64, f64)> {
        self.chunks.last().filter(|c| !c.is_empty()).map(|c| (c.last_ts(), c.last_value()))
    }

    pub fn label(&self, name: &[u8]) -> Option<&[u8]> {
        self.labels.iter().find(|(n, _)| &**n == name).map(|(_, v)| &**v)
    }

    /// Bytes of encoded samples (the streams only), for bytes-per-sample figures.
    pub fn data_bytes(&self) -> usize {
        self.chunks.iter().map(Chunk::data_bytes).sum()
    }

    pub fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.heap_bytes() + std::mem::size_of::<Chunk>()).sum::<usize>()
            + self.labels.iter().map(|(a, b)| a.len() + b.len() + 32).sum::<usize>()
            + self.rules.iter().map(|r| r.dest.len() + std::mem::size_of::<Rule>()).sum::<usize>()
            + self.src_key.as_ref().map_or(0, |k| k.len())
    }

    /// Adds a sample under `policy` (the caller resolves ON_DUPLICATE / the series' policy /
    /// the default). Returns the value now stored at `t`.
    pub fn add(&mut self, t: u64, v: f64, policy: DuplicatePolicy) -> Result<f64, AddError> {
        let Some((last_t, _)) = self.last() else {
            let mut c = Chunk::new();
            c.append(t, v);
            self.chunks = vec![c];
            self.total = 1;
            return Ok(v);
        };
        if self.retention_ms != 0 && t < last_t.saturating_sub(self.retention_ms) {
            return Err(AddError::TooOld);
        }
        if t > last_t {
            let full = self.chunks.last().is_some_and(|c| c.data_bytes() as u64 >= self.chunk_size_bytes);
            if full {
                if let Some(c) = self.chunks.last_mut() {
                    c.shrink();
                }
                self.chunks.push(Chunk::new());
            }
            self.chunks.last_mut().expect("a chunk").append(t, v);
            self.total += 1;
            self.trim();
            return Ok(v);
        }
        let i = self.chunks.partition_point(|c| c.first_ts() <= t).saturating_sub(1);
        let mut samples = self.chunks[i].samples();
        let stored = match samples.binary_search_by_key(&t, |s| s.0) {
            Ok(j) => {
                let nv = policy.resolve(samples[j].1, v).ok_or(AddError::Blocked)?;
                samples[j].1 = nv;
                nv
            }
            Err(j) => {
                samples.insert(j, (t, v));
                self.total += 1;
                v
            }
        };
        self.replace_chunk(i, &samples);
        Ok(stored)
    }

    /// Re-encodes chunk `i` from `samples` (splitting in two when it grew past twice the
    /// chunk size; removing it when empty).
    fn replace_chunk(&mut self, i: usize, samples: &[(u64, f64)]) {
        if samples.is_empty() {
            self.chunks.remove(i);
            return;
        }
        let c = Chunk::from_samples(samples);
        if c.data_bytes() as u64 > 2 * self.chunk_size_bytes && samples.len() > 1 {
            let mid = samples.len() / 2;
            self.chunks[i] = Chunk::from_samples(&samples[..mid]);
            self.chunks.insert(i + 1, Chunk::from_samples(&samples[mid..]));
        } else {
            self.chunks[i] = c;
        }
    }

    /// Drops whole chunks that fell out of the retention window.
    fn trim(&mut self) {
        if self.retention_ms == 0 {
            return;
        }
        let Some((last_t, _)) = self.last() else { return };
        let min = last_t.saturating_sub(self.retention_ms);
        let n = self.chunks.iter().take(self.chunks.len() - 1).take_while(|c| c.last_ts() < min).count();
        if n > 0 {
            self.total -= self.chunks[..n].iter().map(|c| c.len() as u64).sum::<u64>();
            self.chunks.drain(..n);
        }
    }

    /// Applies a new retention (TS.ALTER) and trims.
    pub fn set_retention(&mut self, ms: u64) {
        self.retention_ms = ms;
        self.trim();
    }

    /// Deletes the samples in `[from, to]`; returns how many.
    pub fn delete_range(&mut self, from: u64, to: u64) -> u64 {
        let mut removed = 0;
        let mut i = 0;
        while i < self.chunks.len() {
            let c = &self.chunks[i];
            if c.last_ts() < from || c.first_ts() > to {
                i += 1;
                continue;
            }
            let before = c.len();
            let kept: Vec<(u64, f64)> = c.iter().filter(|s| s.0 < from || s.0 > to).collect();
            removed += (before - kept.len()) as u64;
            if kept.is_empty() {
                self.chunks.remove(i);
            } else {
                self.chunks[i] = Chunk::from_samples(&kept);
                i += 1;
            }
        }
        self.total -= removed;
        removed
    }

    /// Every sample stored in `[from, to]`, also those before the retention floor that wait
    /// for their chunk to go (what TS.DEL counts).
    pub fn range_stored(&self, from: u64, to: u64) -> RangeIter<'_> {
        let i = self.chunks.partition_point(|c| c.last_ts() < from);
        RangeIter { chunks: &self.chunks[i..], cur: None, from, to }
    }

    /// The samples with timestamps in `[from, to]` a read sees (none before the retention
    /// floor), oldest first.
    pub fn range(&self, from: u64, to: u64) -> RangeIter<'_> {
        let from = from.max(self.retention_floor());
        let i = self.chunks.partition_point(|c| c.last_ts() < from);
        RangeIter { chunks: &self.chunks[i..], cur: None, from, to }
    }

    /// The sample at `t` exactly, if any.
    pub fn get(&self, t: u64) -> Option<f64> {
        if self.retention_ms != 0 && t < self.retention_floor() {
            return None;
        }
        let i = self.chunks.partition_point(|c| c.last_ts() < t);
        self.chunks.get(i)?.get(t)
    }

    /// A batch read's prefetch addresses (the waterfall's walk), each step taken a few series
    /// after the one before, once what it reads has arrived: the series' chunk list header
    /// (reads nothing), then the chunk list (reads the header), then the stream word where
    /// [`Series::get`]`(t)` starts decoding (reads the list and the chunk's seek points).
    pub fn head_addr(&self) -> *const u8 {
        (&self.chunks as *const Vec<Chunk>).cast()
    }

    pub fn chunks_addr(&self) -> *const u8 {
        self.chunks.as_ptr().cast()
    }

    pub fn stream_addr(&self, t: u64) -> *const u8 {
        let i = self.chunks.partition_point(|c| c.last_ts() < t);
        self.chunks.get(i).map_or(std::ptr::null(), |c| c.stream_addr(t))
    }

    /// The newest sample before `t`, if any.
    pub fn before(&self, t: u64) -> Option<(u64, f64)> {
        let i = self.chunks.partition_point(|c| c.first_ts() < t);
        if i == 0 {
            return None;
        }
        let floor = self.retention_floor();
        self.chunks[i - 1].iter().take_while(|s| s.0 < t).last().filter(|s| s.0 >= floor)
    }

    /// The oldest sample after `t`, if any.
    pub fn after(&self, t: u64) -> Option<(u64, f64)> {
        if t == u64::MAX {
            return None;
        }
        self.range(t + 1, u64::MAX).next()
    }

    /// The byte form (metadata, then chunks).
    pub fn serialize_into(&self, out: &mut Vec<u8>) {
        let put = |out: &mut Vec<u8>, b: &[u8]| {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        };
        out.extend_from_slice(&self.retention_ms.to_le_bytes());
        out.extend_from_slice(&self.chunk_size_bytes.to_le_bytes());
        out.push(self.duplicate_policy.map_or(255, DuplicatePolicy::code));
        out.push(u8::from(self.uncompressed));
        out.extend_from_slice(&(self.labels.len() as u32).to_le_bytes());
        for (n, v) in &self.labels {
            put(out, n);
            put(out, v);
        }
        match &self.src_key {
            Some(k) => {
                out.push(1);
                put(out, k);
            }
            None => out.push(0),
        }
        out.extend_from_slice(&(self.rules.len() as u32).to_le_bytes());
        for r in &self.rules {
            put(out, &r.dest);
            out.push(r.agg);
            out.extend_from_slice(&r.bucket_ms.to_le_bytes());
            out.extend_from_slice(&r.align_ms.to_le_bytes());
            out.extend_from_slice(&r.open_bucket.map_or(u64::MAX, |b| b).to_le_bytes());
            // 0/1: no open bucket / one, folded from its start (the form before
            // `fold_from_ms`); 2/3: the same, followed by `fold_from_ms`.
            let default_from = r.open_bucket.unwrap_or(u64::MAX);
            if r.fold_from_ms == default_from {
                out.push(u8::from(r.open_bucket.is_some()));
            } else {
                out.push(2 + u8::from(r.open_bucket.is_some()));
                out.extend_from_slice(&r.fold_from_ms.to_le_bytes());
            }
        }
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        for c in &self.chunks {
            c.serialize_into(out);
        }
    }

    /// Decodes what [`Series::serialize_into`] wrote (the whole of `bytes`).
    pub fn deserialize(bytes: &[u8]) -> Result<Series, &'static str> {
        let mut r = Reader { b: bytes, at: 0 };
        let mut s = Series::new();
        s.retention_ms = r.u64()?;
        s.chunk_size_bytes = r.u64()?;
        let p = r.u8()?;
        s.duplicate_policy = match p {
            255 => None,
            p => Some(*DuplicatePolicy::ALL.get(p as usize).ok_or("bad duplicate policy")?),
        };
        s.uncompressed = r.u8()? != 0;
        for _ in 0..r.u32()? {
            let n = r.bytes()?;
            let v = r.bytes()?;
            s.labels.push((n, v));
        }
        if r.u8()? != 0 {
            s.src_key = Some(r.bytes()?);
        }
        for _ in 0..r.u32()? {
            let dest = r.bytes()?;
            let agg = r.u8()?;
            let bucket_ms = r.u64()?;
            let align_ms = r.u64()?;
            let open = r.u64()?;
            let form = r.u8()?;
            if form > 3 {
                return Err("bad rule form");
            }
            let open_bucket = (form & 1 != 0).then_some(open);
            let fold_from_ms = if form >= 2 { r.u64()? } else { open_bucket.unwrap_or(u64::MAX) };
            s.rules.push(Rule { dest, agg, bucket_ms, align_ms, open_bucket, fold_from_ms });
        }
        let n = r.u32()?;
        let mut last: Option<u64> = None;
        for _ in 0..n {
            let (c, used) = Chunk::deserialize(&bytes[r.at..])?;
            r.at += used;
            if c.is_empty() || last.is_some_and(|l| c.first_ts() <= l) {
                return Err("series chunks out of order");
            }
            last = Some(c.last_ts());
            s.total += c.len() as u64;
            s.chunks.push(c);
        }
        if r.at != bytes.len() {
            return Err("trailing bytes after series");
        }
        Ok(s)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or("truncated series")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn bytes(&mut self) -> Result<Box<[u8]>, &'static str> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.into())
    }
}

/// Samples of a time range, oldest first, decoding one chunk at a time.
pub struct RangeIter<'a> {
    chunks: &'a [Chunk],
    cur: Option<crate::gorilla::ChunkIter<'a>>,
    from: u64,
    to: u64,
}

impl Iterator for RangeIter<'_> {
    type Item = (u64, f64);

    fn next(&mut self) -> Option<(u64, f64)> {
        loop {
            if let Some(it) = &mut self.cur {
                for s in it.by_ref() {
                    if s.0 > self.to {
                        self.chunks = &[];
                        self.cur = None;
                        return None;
                    }
                    if s.0 >= self.from {
                        return Some(s);
                    }
                }
                self.cur = None;
            }
            let (c, rest) = self.chunks.split_first()?;
            if c.first_ts() > self.to {
                self.chunks = &[];
                return None;
            }
            self.chunks = rest;
            self.cur = Some(c.iter_from(self.from));
        }
    }
}
