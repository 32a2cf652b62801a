//! Snapshot files: a point-in-time copy of every key.
//!
//! Layout (little-endian):
//! - header: `ABACUSS1`, u32 version, u64 creation time (ms), u32 shard count of the writer,
//!   u32 CRC32 of those 24 bytes;
//! - blocks: `[u8 1][u16 shard][u32 raw len][u32 compressed len][u32 CRC32 of the header fields and the compressed bytes]
//!   [LZ4 block]`; a raw block is a run of [`crate::entry`] encodings of keys of one shard;
//! - functions (only when there are FUNCTION libraries, before the first block):
//!   `[u8 3][u32 payload len][u32 CRC32 of the payload][payload]`, the payload a run of
//!   `[u32 len][library code]`, one per library, the code as FUNCTION LOAD received it;
//! - trailer: `[u8 2][u64 keys][u64 blocks][u32 CRC32 of those 16 bytes]`.
//!
//! Why blocks: each is compressed and checked on its own, so loading can spread blocks over
//! threads (each shard loads its own blocks when the shard count is unchanged), and a
//! damaged byte is pinned to a block. Why a trailer: a file cut short (a crash while writing,
//! a full disk) has none and is rejected, even if every block it has is intact. Snapshots
//! are written to a temporary name and renamed after an fsync, so a valid name never points
//! to a partial file; the checks are for damage after the fact.
//!
//! Why LZ4 (`lz4_flex`, pure Rust): snapshots of small keys compress 2-4x and LZ4
//! decompresses at several GB/s, so loading stays bound by inserting keys, not by
//! decompression; zstd compresses more but decompresses 3-4x slower.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::entry::{self, Decoded};
use crate::Result;

pub const MAGIC: &[u8; 8] = b"ABACUSS1";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 28;
const BLOCK_HEADER_BYTES: usize = 15;
const KIND_BLOCK: u8 = 1;
const KIND_TRAILER: u8 = 2;
const KIND_FUNCTIONS: u8 = 3;

/// Largest raw block a reader accepts (writers flush at a few MiB).
pub const MAX_BLOCK_BYTES: u32 = 1 << 30;

/// Writes a snapshot.
pub struct Writer {
    out: BufWriter<File>,
    keys: u64,
    blocks: u64,
    bytes: u64,
    raw_bytes: u64,
}

/// What a finished snapshot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    pub keys: u64,
    /// The file's size.
    pub bytes: u64,
    /// The size of its blocks before compression: the data the snapshot stands for.
    pub raw_bytes: u64,
}

impl Writer {
    pub fn create(path: &Path, created_ms: u64, shards: u32) -> Result<Writer> {
        let file = File::create(path).map_err(|e| format!("cannot create snapshot {}: {e}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut h = Vec::with_capacity(HEADER_BYTES);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&created_ms.to_le_bytes());
        h.extend_from_slice(&shards.to_le_bytes());
        let crc = crc32fast::hash(&h);
        h.extend_from_slice(&crc.to_le_bytes());
        out.write_all(&h).map_err(|e| format!("cannot write snapshot: {e}"))?;
        Ok(Writer { out, keys: 0, blocks: 0, bytes: HEADER_BYTES as u64, raw_bytes: 0 })
    }

    /// Writes the FUNCTION libraries' code (nothing when there is none, so a snapshot
    /// without libraries stays readable by a reader that predates them). At most once, before
    /// the first block.
    pub fn write_functions<C: AsRef<[u8]>>(&mut self, codes: &[C]) -> Result<()> {
        if codes.is_empty() {
            return Ok(());
        }
        let mut payload = Vec::new();
        for c in codes {
            let c = c.as_ref();
            payload.extend_from_slice(&(c.len() as u32).to_le_bytes());
            payload.extend_from_slice(c);
        }
        if payload.len() > MAX_BLOCK_BYTES as usize {
            return Err(format!("FUNCTION libraries of {} bytes are larger than the {MAX_BLOCK_BYTES} bytes a reader accepts", payload.len()));
        }
        let mut h = Vec::with_capacity(9);
        h.push(KIND_FUNCTIONS);
        h.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        h.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        self.out.write_all(&h).and_then(|_| self.out.write_all(&payload)).map_err(|e| format!("cannot write snapshot: {e}"))?;
        self.bytes += (h.len() + payload.len()) as u64;
        Ok(())
    }

    /// Compresses and writes one block of `keys` encoded keys of `shard`.
    /// A block larger than [`MAX_BLOCK_BYTES`] is refused: the reader would reject it, and
    /// with it the whole snapshot.
    pub fn write_block(&mut self, shard: u16, raw: &[u8], keys: u64) -> Result<()> {
        if raw.is_empty() {
            return Ok(());
        }
        if raw.len() > MAX_BLOCK_BYTES as usize {
            return Err(format!("a snapshot block of {} bytes is larger than the {MAX_BLOCK_BYTES} bytes a reader accepts", raw.len()));
        }
        let compressed = lz4_flex::block::compress(raw);
        let mut h = [0u8; BLOCK_HEADER_BYTES];
        h[0] = KIND_BLOCK;
        h[1..3].copy_from_slice(&shard.to_le_bytes());
        h[3..7].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        h[7..11].copy_from_slice(&(compressed.len() as u32).to_le_bytes());
        let crc = block_crc(&h[..11], &compressed);
        h[11..15].copy_from_slice(&crc.to_le_bytes());
        self.out.write_all(&h).and_then(|_| self.out.write_all(&compressed)).map_err(|e| format!("cannot write snapshot: {e}"))?;
        self.keys += keys;
        self.blocks += 1;
        self.bytes += (BLOCK_HEADER_BYTES + compressed.len()) as u64;
        self.raw_bytes += raw.len() as u64;
        Ok(())
    }

    /// Writes the trailer and makes the file durable.
    pub fn finish(mut self) -> Result<Written> {
        let mut t = Vec::with_capacity(21);
        t.push(KIND_TRAILER);
        t.extend_from_slice(&self.keys.to_le_bytes());
        t.extend_from_slice(&self.blocks.to_le_bytes());
        let crc = crc32fast::hash(&t[1..]);
        t.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&t).map_err(|e| format!("cannot write snapshot: {e}"))?;
        let file = self.out.into_inner().map_err(|e| format!("cannot write snapshot: {e}"))?;
        file.sync_all().map_err(|e| format!("cannot fsync snapshot: {e}"))?;
        Ok(Written { keys: self.keys, bytes: self.bytes + t.len() as u64, raw_bytes: self.raw_bytes })
    }
}

/// A block's checksum covers its header fields too: a flipped shard number must not load
/// keys into the wrong shard.
fn block_crc(header: &[u8], compressed: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(compressed);
    h.finalize()
}

/// Where a block is and how to check it.
#[derive(Clone, Debug)]
pub struct BlockRef {
    pub shard: u16,
    pub offset: u64,
    pub raw_len: u32,
    pub compressed_len: u32,
    pub crc: u32,
}

/// A snapshot's structure, read and checked without decompressing anything.
#[derive(Debug)]
pub struct Index {
    pub created_ms: u64,
    pub shards: u32,
    pub keys: u64,
    pub blocks: Vec<BlockRef>,
    pub file_bytes: u64,
    /// The FUNCTION libraries' code, in the order written (empty for a snapshot without).
    pub functions: Vec<Vec<u8>>,
}

impl Index {
    /// The size of the blocks before compression (see [`Written::raw_bytes`]).
    pub fn raw_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| b.raw_len as u64).sum()
    }
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> String {
    format!("snapshot {} is corrupt: {what}", path.display())
}

/// Reads a snapshot's header, block headers and trailer. Any inconsistency is an error
/// naming the file and the problem.
pub fn index(path: &Path) -> Result<Index> {
    let mut f = File::open(path).map_err(|e| format!("cannot open snapshot {}: {e}", path.display()))?;
    let file_bytes = f.metadata().map_err(|e| format!("cannot stat {}: {e}", path.display()))?.len();
    let mut h = [0u8; HEADER_BYTES];
    f.read_exact(&mut h).map_err(|_| corrupt(path, "shorter than its header"))?;
    if &h[..8] != MAGIC {
        return Err(corrupt(path, "not an Abacus snapshot (bad magic)"));
    }
    if crc32fast::hash(&h[..24]).to_le_bytes() != h[24..28] {
        return Err(corrupt(path, "header checksum mismatch"));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().unwrap_or_default());
    if version != VERSION {
        return Err(format!("snapshot {} has format version {version}; this Abacus reads version {VERSION}", path.display()));
    }
    let created_ms = u64::from_le_bytes(h[12..20].try_into().unwrap_or_default());
    let shards = u32::from_le_bytes(h[20..24].try_into().unwrap_or_default());
    let mut blocks = Vec::new();
    let mut functions = Vec::new();
    let mut at = HEADER_BYTES as u64;
    loop {
        let mut kind = [0u8; 1];
        f.read_exact(&mut kind).map_err(|_| corrupt(path, format!("ends at byte {at} without a trailer (truncated)")))?;
        match kind[0] {
            KIND_BLOCK => {
                let mut b = [0u8; BLOCK_HEADER_BYTES - 1];
                f.read_exact(&mut b).map_err(|_| corrupt(path, format!("block header at byte {at} cut short")))?;
                let r = BlockRef {
                    shard: u16::from_le_bytes(b[0..2].try_into().unwrap_or_default()),
                    offset: at + BLOCK_HEADER_BYTES as u64,
                    raw_len: u32::from_le_bytes(b[2..6].try_into().unwrap_or_default()),
                    compressed_len: u32::from_le_bytes(b[6..10].try_into().unwrap_or_default()),
                    crc: u32::from_le_bytes(b[10..14].try_into().unwrap_or_default()),
                };
                if r.raw_len > MAX_BLOCK_BYTES || r.offset + r.compressed_len as u64 > file_bytes {
                    return Err(corrupt(path, format!("block at byte {at} runs past the end of the file")));
                }
                at = r.offset + r.compressed_len as u64;
                f.seek(SeekFrom::Start(at)).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                blocks.push(r);
            }
            KIND_FUNCTIONS if blocks.is_empty() && functions.is_empty() => {
                let mut h = [0u8; 8];
                f.read_exact(&mut h).map_err(|_| corrupt(path, format!("functions header at byte {at} cut short")))?;
                let len = u32::from_le_bytes(h[0..4].try_into().unwrap_or_default());
                if len > MAX_BLOCK_BYTES || at + 9 + len as u64 > file_bytes {
                    return Err(corrupt(path, format!("functions at byte {at} run past the end of the file")));
                }
                let mut payload = vec![0u8; len as usize];
                f.read_exact(&mut payload).map_err(|_| corrupt(path, format!("functions at byte {at} cut short")))?;
                if crc32fast::hash(&payload).to_le_bytes() != h[4..8] {
                    return Err(corrupt(path, format!("checksum mismatch in the functions at byte {at}")));
                }
                functions = split_functions(&payload).ok_or_else(|| corrupt(path, format!("functions at byte {at} are malformed")))?;
                at += 9 + len as u64;
            }
            KIND_TRAILER => {
                let mut t = [0u8; 20];
                f.read_exact(&mut t).map_err(|_| corrupt(path, "trailer cut short"))?;
                if crc32fast::hash(&t[..16]).to_le_bytes() != t[16..20] {
                    return Err(corrupt(path, "trailer checksum mismatch"));
                }
                let keys = u64::from_le_bytes(t[0..8].try_into().unwrap_or_default());
                let count = u64::from_le_bytes(t[8..16].try_into().unwrap_or_default());
                if count != blocks.len() as u64 {
                    return Err(corrupt(path, format!("trailer counts {count} blocks, the file has {}", blocks.len())));
                }
                if at + 21 != file_bytes {
                    return Err(corrupt(path, "bytes after the trailer"));
                }
                return Ok(Index { created_ms, shards, keys, blocks, file_bytes, functions });
            }
            k => return Err(corrupt(path, format!("unknown record kind {k} at byte {at}"))),
        }
    }
}

/// The libraries' code from a functions record's payload; None if it is malformed.
fn split_functions(mut payload: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !payload.is_empty() {
        let len = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
        out.push(payload.get(4..4 + len)?.to_vec());
        payload = &payload[4 + len..];
    }
    Some(out)
}

/// Reads, checks and decompresses one block.
pub fn read_block(f: &File, path: &Path, b: &BlockRef) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut compressed = vec![0u8; b.compressed_len as usize];
    f.read_exact_at(&mut compressed, b.offset).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut h = [0u8; 11];
    h[0] = KIND_BLOCK;
    h[1..3].copy_from_slice(&b.shard.to_le_bytes());
    h[3..7].copy_from_slice(&b.raw_len.to_le_bytes());
    h[7..11].copy_from_slice(&b.compressed_len.to_le_bytes());
    if block_crc(&h, &compressed) != b.crc {
        return Err(corrupt(path, format!("checksum mismatch in the block at byte {}", b.offset)));
    }
    let raw = lz4_flex::block::decompress(&compressed, b.raw_len as usize)
        .map_err(|e| corrupt(path, format!("block at byte {} does not decompress: {e}", b.offset)))?;
    if raw.len() != b.raw_len as usize {
        return Err(corrupt(path, format!("block at byte {} has the wrong length", b.offset)));
    }
    Ok(raw)
}

/// Decodes every key of a raw block, calling `f` for each.
pub fn for_each_entry<'a>(raw: &'a [u8], mut f: impl FnMut(Decoded<'a>)) -> Result<u64> {
    let mut at = 0;
    let mut n = 0;
    while at < raw.len() {
        let (d, used) = entry::decode(&raw[at..]).map_err(|e| format!("snapshot entry cannot be decoded: {e}"))?;
        f(d);
        at += used;
        n += 1;
    }
    Ok(n)
}

/// `abacus check-snapshot FILE`: reads everything and reports, or says what is wrong.
pub fn check_file(path: &Path) -> Result<String> {
    let idx = index(path)?;
    let f = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut keys = 0;
    for b in &idx.blocks {
        keys += for_each_entry(&read_block(&f, path, b)?, |_| {})?;
    }
    if keys != idx.keys {
        return Err(corrupt(path, format!("trailer counts {} keys, the blocks hold {keys}", idx.keys)));
    }
    Ok(format!(
        "{}: valid snapshot, {keys} keys in {} blocks, {} bytes, written by {} shards at {} ms\n",
        path.display(),
        idx.blocks.len(),
        idx.file_bytes,
        idx.shards,
        idx.created_ms
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use abacus_keyspace::{Entry, Value};

    fn write(path: &Path, keys: u64) -> Written {
        let mut w = Writer::create(path, 42, 2).unwrap();
        w.write_functions(&[&b"#!lua name=a\nreturn 1"[..], b"#!lua name=b\n"]).unwrap();
        let mut raw = Vec::new();
        let mut raw_total = 0;
        for i in 0..keys {
            entry::encode(&mut raw, 0, format!("key:{i}").as_bytes(), &Entry::new(Value::str(format!("value:{i}").as_bytes())), 0);
            if raw.len() > 1000 {
                w.write_block((i % 2) as u16, &raw, 0).unwrap();
                raw_total += raw.len() as u64;
                raw.clear();
            }
        }
        w.write_block(0, &raw, 0).unwrap();
        raw_total += raw.len() as u64;
        let written = w.finish().unwrap();
        assert_eq!(written.raw_bytes, raw_total);
        assert_eq!(written.bytes, std::fs::metadata(path).unwrap().len());
        written
    }

    fn load(path: &Path) -> Result<Vec<Vec<u8>>> {
        let idx = index(path)?;
        let f = File::open(path).unwrap();
        let mut keys = Vec::new();
        for b in &idx.blocks {
            let raw = read_block(&f, path, b)?;
            for_each_entry(&raw, |d| keys.push(d.key.to_vec()))?;
        }
        Ok(keys)
    }

    #[test]
    fn round_trip_and_every_damage_is_detected() {
        let dir = std::env::temp_dir().join(format!("abacus-snap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.abs");
        let written = write(&p, 500);
        assert_eq!(index(&p).unwrap().raw_bytes(), written.raw_bytes);
        assert_eq!(index(&p).unwrap().functions, vec![b"#!lua name=a\nreturn 1".to_vec(), b"#!lua name=b\n".to_vec()]);
        let keys = load(&p).unwrap();
        assert_eq!(keys.len(), 500);
        assert_eq!(keys[499], b"key:499");
        let good = std::fs::read(&p).unwrap();
        let bad = dir.join("bad.abs");
        // Truncation anywhere is detected.
        for cut in (0..good.len()).step_by(37) {
            std::fs::write(&bad, &good[..cut]).unwrap();
            assert!(load(&bad).is_err(), "truncated at {cut} accepted");
        }
        // So is a flipped byte anywhere (header, block headers, data, trailer).
        for at in (0..good.len()).step_by(13) {
            let mut b = good.clone();
            b[at] ^= 0x5a;
            std::fs::write(&bad, &b).unwrap();
            assert!(load(&bad).is_err(), "flip at {at} accepted");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
