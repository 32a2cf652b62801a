//! The append-only command log.
//!
//! File: the 8-byte magic `ABACUSL1`, then records. A record is
//! `[u64: format << 56 | payload len][u32 CRC32 of payload][payload]`, and a payload is one or
//! more commands, each its time, database and arguments (see [`push_command`] for the
//! encoding written now, [`Format`] for the older one still read).
//!
//! Why records group commands: a record is the unit of atomicity on recovery. The server
//! writes one pipelined batch of a client, one MULTI/EXEC transaction or one multi-shard
//! command as one record, so a crash never leaves half a transaction in the log, and one
//! checksum and one header cover many small commands.
//!
//! Why each command carries the time it ran at: replay runs the command with that clock, so
//! lazy expiry and relative TTLs come out exactly as they did live, whatever time the
//! server restarts at. (The server also rewrites relative expiries to absolute times before
//! logging, so the log reads as Redis's does.)
//!
//! Reading ([`scan`]) tells three situations apart:
//! - clean: every record is whole and checks out;
//! - torn tail: the last record is cut short or fails its checksum and nothing follows it (a
//!   crash during a write). Everything before it is good; recovery drops the tail;
//! - corruption in the middle: a record fails and valid data follows. Recovery refuses to
//!   guess; `abacus check-aof --fix` truncates at the damage after telling what it drops.

/// First bytes of every log file.
pub const MAGIC: &[u8; 8] = b"ABACUSL1";

/// Bytes before a record's payload.
pub const HEADER_BYTES: usize = 12;

/// Largest payload a reader accepts: larger lengths can only be damage.
pub const MAX_PAYLOAD_BYTES: u64 = 1 << 40;

/// How a record's payload encodes its commands, from the top byte of the header's length
/// field (payload lengths never reach 2^56). Records of both formats may share one file: a
/// log started by an older build goes on in the new format after an upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Fixed widths: `[u64 now_ms][u16 db][u32 argc]`, then `[u32 len][bytes]` per argument.
    /// Written by builds before 2026-11-22; still read.
    Fixed,
    /// Varints ([`push_command`]). What is written now.
    Varint,
}

impl Format {
    fn from_tag(tag: u8) -> Option<Format> {
        match tag {
            0 => Some(Format::Fixed),
            1 => Some(Format::Varint),
            _ => None,
        }
    }
}

/// Command names logged as two bytes (`[0][index]`). The index is
/// part of the file format: names are only ever appended to this list.
const NAMES: [&str; 48] = [
    "SET", "APPEND", "DEL", "INCR", "INCRBY", "DECR", "DECRBY", "INCRBYFLOAT", "MSET", "SETRANGE", "SETBIT",
    "PEXPIREAT", "PERSIST", "RENAME", "COPY", "HSET", "HDEL", "HINCRBY", "HINCRBYFLOAT", "SADD", "SREM",
    "SMOVE", "ZADD", "ZREM", "ZINCRBY", "LPUSH", "RPUSH", "LPOP", "RPOP", "LSET", "LREM", "LTRIM", "PFADD",
    "PFMERGE", "HLL.ADD", "HLL.ADDINT", "HLL.ADDRAW", "HLL.UNION", "HLL.CREATE", "GETDEL", "SETNX",
    "MSETNX", "FLUSHDB", "FLUSHALL", "SELECT", "SWAPDB", "MOVE", "UNLINK",
];

/// A command name of up to 15 bytes in upper case, with its length in the last byte: equal
/// words are equal names whatever their case (and 0 is no name).
fn name_word(name: &[u8]) -> Option<u128> {
    if name.is_empty() || name.len() > 15 {
        return None;
    }
    // In registers, eight bytes at a time: bytes stored one by one and read back as a word
    // stall on store forwarding, and a byte loop over a u128 is slow (most of this
    // function's time when it did either).
    let (lo, hi) = name.split_at(name.len().min(8));
    let lo = upper_ascii(le_word(lo));
    let hi = upper_ascii(le_word(hi)) | (name.len() as u64) << 56;
    Some((hi as u128) << 64 | lo as u128)
}

/// Up to eight bytes as a little-endian word.
fn le_word(b: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(b) {
        Ok(w) => u64::from_le_bytes(w),
        Err(_) => b.iter().rev().fold(0, |w, &c| w << 8 | c as u64),
    }
}

/// Every byte of `x` in `a..=z` to upper case, the others unchanged.
fn upper_ascii(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let low7 = x & (0x7f * ONES);
    // Bit 7 of each byte: set where (the low 7 bits) >= 'a', and where > 'z'; no carries
    // cross bytes (0x7f + 0x1f < 0x100).
    let ge_a = low7 + (0x80 - b'a' as u64) * ONES;
    let gt_z = low7 + (0x80 - b'z' as u64 - 1) * ONES;
    let lower = ge_a & !gt_z & !x & (0x80 * ONES);
    x - (lower >> 2)
}

/// Slot of a name word in [`name_index`]'s table.
fn name_slot(w: u128) -> usize {
    ((w as u64 ^ (w >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57) as usize
}

/// The [`NAMES`] index of a command name, in any case. Every logged command asks, so this is
/// a hash lookup (about 5 ns) rather than a scan of the list with case-folding comparisons
/// (25-50 ns, 2-3% of the server's CPU on pipelined APPENDs).
fn name_index(name: &[u8]) -> Option<u8> {
    static TABLE: std::sync::OnceLock<[(u128, u8); 128]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [(0u128, 0u8); 128];
        for (i, n) in NAMES.iter().enumerate() {
            let w = name_word(n.as_bytes()).unwrap_or(0);
            let mut s = name_slot(w);
            while t[s].0 != 0 {
                s = (s + 1) % t.len();
            }
            t[s] = (w, i as u8);
        }
        t
    });
    let w = name_word(name)?;
    let mut s = name_slot(w);
    loop {
        match table[s] {
            (0, _) => return None,
            (k, i) if k == w => return Some(i),
            _ => s = (s + 1) % table.len(),
        }
    }
}

#[inline]
fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends one command to a payload being built, in [`Format::Varint`]:
/// `varint(db << 1 | has_time)`, then `varint(now_ms)` if `has_time`, `varint(argc)`, and per
/// argument `varint(len) bytes`, except the command name: `[0][index]` for a name of
/// [`NAMES`], else `varint(len + 1) bytes`.
///
/// `last_ms` is the time of the previous command in this payload, or `None` at its start or
/// after any point where the payload may be cut or joined to another one; a command that ran
/// at the same millisecond as the one before it leaves its time out. The caller resets it
/// wherever a reader could start. An APPEND of 16 bytes onto a 16-byte key costs 38 bytes
/// here (64 in [`Format::Fixed`]): the log's bytes are most of what it costs per write.
pub fn push_command<A: AsRef<[u8]>>(payload: &mut Vec<u8>, last_ms: &mut Option<u64>, now_ms: u64, db: u16, args: &[A]) {
    push_command_iter(payload, last_ms, now_ms, db, args.len(), args.iter().map(|a| a.as_ref()));
}

/// [`push_command`] with the `count` arguments from an iterator (no slice of them to build).
pub fn push_command_iter<'a, I: Iterator<Item = &'a [u8]> + Clone>(payload: &mut Vec<u8>, last_ms: &mut Option<u64>, now_ms: u64, db: u16, count: usize, args: I) {
    payload.reserve(args.clone().map(|a| a.len() + 5).sum::<usize>() + 20);
    push_reserved(payload, last_ms, now_ms, db, count, args);
}

/// [`push_command`] with the arguments packed in one buffer, argument i being
/// `buf[ends[i - 1]..ends[i]]` (from 0 for the first): the room is known without a pass over
/// them (the summarizer logs each of its direct writes this way).
pub fn push_command_packed(payload: &mut Vec<u8>, last_ms: &mut Option<u64>, now_ms: u64, db: u16, buf: &[u8], ends: &[usize]) {
    payload.reserve(buf.len() + 5 * ends.len() + 20);
    let starts = std::iter::once(0).chain(ends.iter().copied());
    push_reserved(payload, last_ms, now_ms, db, ends.len(), starts.zip(ends.iter().copied()).map(|(a, b)| &buf[a..b]));
}

/// How a command name is logged, found once ([`NameCode::of`]) by a caller that logs the
/// same command many times (the summarizer's direct writes: the lookup was a fifth of the
/// encoding's instructions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameCode(Option<u8>);

impl NameCode {
    pub fn of(name: &[u8]) -> NameCode {
        NameCode(name_index(name))
    }
}

/// Begins a command of `count` arguments in all, `name` (whose code is `code`) the first:
/// its header and name, as [`push_command`] writes them; the caller then appends the other
/// `count - 1` arguments with [`push_arg`]. For a caller that builds a command's arguments
/// as it goes (the summarizer's direct writes), without packing them first.
pub fn begin_command(payload: &mut Vec<u8>, last_ms: &mut Option<u64>, now_ms: u64, db: u16, count: usize, code: NameCode, name: &[u8]) {
    debug_assert_eq!(code, NameCode::of(name));
    payload.reserve(name.len() + 30);
    push_reserved_named(payload, last_ms, now_ms, db, count, |_| code.0, std::iter::once(name));
}

/// Appends one argument of a command begun with [`begin_command`]. Inline: the summarizer
/// calls it for every argument from another crate.
#[inline]
pub fn push_arg(payload: &mut Vec<u8>, a: &[u8]) {
    push_varint(payload, a.len() as u64);
    payload.extend_from_slice(a);
}

/// The encoding of [`push_command_iter`], the room reserved.
fn push_reserved<'a>(payload: &mut Vec<u8>, last_ms: &mut Option<u64>, now_ms: u64, db: u16, count: usize, args: impl Iterator<Item = &'a [u8]>) {
    push_reserved_named(payload, last_ms, now_ms, db, count, name_index, args);
}

/// [`push_reserved`] with the first argument's [`name_index`] from `code` (the lookup itself,
/// or a code found beforehand).
fn push_reserved_named<'a>(payload: &mut Vec<u8>, last_ms: &mut Option<u64>, now_ms: u64, db: u16, count: usize, code: impl FnOnce(&[u8]) -> Option<u8>, mut args: impl Iterator<Item = &'a [u8]>) {
    let same = *last_ms == Some(now_ms);
    push_varint(payload, (db as u64) << 1 | !same as u64);
    if !same {
        push_varint(payload, now_ms);
        *last_ms = Some(now_ms);
    }
    push_varint(payload, count as u64);
    if let Some(name) = args.next() {
        match code(name) {
            Some(ix) => payload.extend_from_slice(&[0, ix]),
            None => {
                push_varint(payload, name.len() as u64 + 1);
                payload.extend_from_slice(name);
            }
        }
    }
    for a in args {
        push_varint(payload, a.len() as u64);
        payload.extend_from_slice(a);
    }
}

/// The header that frames `payload` (built by [`push_command`]) as a record.
pub fn header(payload: &[u8]) -> [u8; HEADER_BYTES] {
    // The writer asserts the limit its reader enforces: a record the reader would take for
    // damage must never be written (memory runs out long before, so this cannot fire for a
    // real payload; it documents and checks the contract).
    assert!(payload.len() as u64 <= MAX_PAYLOAD_BYTES, "log record of {} bytes exceeds the reader's limit", payload.len());
    let mut h = [0u8; HEADER_BYTES];
    h[..8].copy_from_slice(&(payload.len() as u64 | 1 << 56).to_le_bytes());
    h[8..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    h
}

/// One logged command, borrowing the payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Command<'a> {
    pub now_ms: u64,
    pub db: u16,
    pub args: Vec<&'a [u8]>,
}

/// A record's payload and how it is encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub range: std::ops::Range<usize>,
    pub format: Format,
}

/// Reads a payload from its start: fixed-width integers, varints, byte strings.
struct Reader<'a> {
    payload: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.payload.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.left() {
            return Err("command cut short inside a record".into());
        }
        let s = &self.payload[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().unwrap_or([0; N]))
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            if shift == 63 && b > 1 {
                break;
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("malformed varint in a record".into())
    }
}

/// The commands of a record payload, in order. Never panics, whatever the bytes.
pub fn commands(payload: &[u8], format: Format) -> Result<Vec<Command<'_>>, String> {
    let mut out = Vec::new();
    let mut r = Reader { payload, at: 0 };
    let mut last_ms = None;
    while r.left() > 0 {
        let (now_ms, db, argc) = match format {
            Format::Fixed => {
                let now_ms = u64::from_le_bytes(r.fixed()?);
                let db = u16::from_le_bytes(r.fixed()?);
                (now_ms, db, u32::from_le_bytes(r.fixed()?) as u64)
            }
            Format::Varint => {
                let head = r.varint()?;
                let db = u16::try_from(head >> 1).map_err(|_| format!("bad database number {}", head >> 1))?;
                let now_ms = if head & 1 == 1 {
                    r.varint()?
                } else {
                    last_ms.ok_or("a command without its time starts a record")?
                };
                last_ms = Some(now_ms);
                (now_ms, db, r.varint()?)
            }
        };
        // Every argument takes at least one byte (four in the fixed format).
        let min_arg = if format == Format::Fixed { 4 } else { 1 };
        if argc == 0 || argc > (r.left() / min_arg) as u64 {
            return Err(format!("bad argument count {argc}"));
        }
        let mut args = Vec::with_capacity(argc as usize);
        for i in 0..argc {
            let n = match format {
                Format::Fixed => u32::from_le_bytes(r.fixed()?) as u64,
                Format::Varint => r.varint()?,
            };
            if format == Format::Varint && i == 0 {
                if n == 0 {
                    let ix = r.take(1)?[0] as usize;
                    args.push(NAMES.get(ix).ok_or_else(|| format!("unknown command index {ix}"))?.as_bytes());
                } else {
                    args.push(r.take(usize::try_from(n - 1).unwrap_or(usize::MAX))?);
                }
                continue;
            }
            args.push(r.take(usize::try_from(n).unwrap_or(usize::MAX))?);
        }
        out.push(Command { now_ms, db, args });
    }
    Ok(out)
}

/// What is wrong with a log, if anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The file ends inside its last record, or the last record fails its checksum: a write
    /// cut short by a crash. Bytes from `offset` on are to be dropped.
    TornTail { offset: u64, dropped_bytes: u64 },
    /// A damaged record followed by more data: not a crash artefact.
    Corrupt { offset: u64, reason: String },
}

/// The result of reading a log.
#[derive(Debug, Default)]
pub struct Scan {
    /// The valid records, in order.
    pub records: Vec<Record>,
    /// End of the last valid record (the length to truncate to when the tail is torn).
    pub valid_len: u64,
    pub problem: Option<Problem>,
}

/// Reads a whole log file's bytes. Never panics, whatever the bytes.
pub fn scan(bytes: &[u8]) -> Scan {
    let mut scan = Scan::default();
    let len = bytes.len();
    if len < MAGIC.len() {
        if MAGIC.starts_with(bytes) {
            scan.problem = (len > 0).then_some(Problem::TornTail { offset: 0, dropped_bytes: len as u64 });
        } else {
            scan.problem = Some(Problem::Corrupt { offset: 0, reason: "not an Abacus log (bad magic)".into() });
        }
        return scan;
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        scan.problem = Some(Problem::Corrupt { offset: 0, reason: "not an Abacus log (bad magic)".into() });
        return scan;
    }
    let mut at = MAGIC.len();
    scan.valid_len = at as u64;
    let torn = |at: usize| Problem::TornTail { offset: at as u64, dropped_bytes: (len - at) as u64 };
    while at < len {
        if len - at < HEADER_BYTES {
            scan.problem = Some(torn(at));
            break;
        }
        let word = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
        let crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap_or_default());
        let (format, plen) = (Format::from_tag((word >> 56) as u8), word & ((1 << 56) - 1));
        let Some(format) = format.filter(|_| plen != 0 && plen <= MAX_PAYLOAD_BYTES) else {
            // Zero-filled space after the last write (some filesystems leave it after a
            // crash) is a torn tail; anything else is damage.
            scan.problem = Some(if bytes[at..].iter().all(|&b| b == 0) {
                torn(at)
            } else {
                Problem::Corrupt { offset: at as u64, reason: format!("impossible record header {word:#x}") }
            });
            break;
        };
        let start = at + HEADER_BYTES;
        let Some(end) = start.checked_add(plen as usize).filter(|&e| e <= len) else {
            scan.problem = Some(torn(at));
            break;
        };
        let payload = &bytes[start..end];
        if crc32fast::hash(payload) != crc {
            scan.problem = Some(if end == len {
                torn(at)
            } else {
                Problem::Corrupt { offset: at as u64, reason: "record checksum mismatch".into() }
            });
            break;
        }
        if let Err(e) = commands(payload, format) {
            scan.problem = Some(Problem::Corrupt { offset: at as u64, reason: e });
            break;
        }
        scan.records.push(Record { range: start..end, format });
        at = end;
        scan.valid_len = at as u64;
    }
    scan
}

/// `abacus check-aof [--fix] [--print] FILE`: reports on a log and, with `fix`, truncates it
/// to its last valid record; with `print`, first writes the valid records' commands there
/// ([`print_commands`]). Returns the report; an error if the file cannot be read or written.
pub fn check_file(path: &std::path::Path, fix: bool, print: Option<&mut dyn std::io::Write>) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let scan = scan(&bytes);
    if let Some(out) = print {
        print_commands(&bytes, &scan, out)?;
    }
    let commands: usize = scan.records.iter().map(|r| commands(&bytes[r.range.clone()], r.format).map_or(0, |c| c.len())).sum();
    let mut report = format!(
        "{}: {} bytes, {} valid records ({} commands) in the first {} bytes\n",
        path.display(),
        bytes.len(),
        scan.records.len(),
        commands,
        scan.valid_len
    );
    match &scan.problem {
        None => report.push_str("log is valid\n"),
        Some(Problem::TornTail { offset, dropped_bytes }) => {
            report.push_str(&format!("torn tail at offset {offset}: the last {dropped_bytes} bytes are an incomplete record\n"))
        }
        Some(Problem::Corrupt { offset, reason }) => report.push_str(&format!(
            "corruption at offset {offset}: {reason}; {} bytes after it would be lost by --fix\n",
            bytes.len() as u64 - offset
        )),
    }
    if fix && scan.problem.is_some() {
        let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        f.set_len(scan.valid_len).and_then(|_| f.sync_all()).map_err(|e| format!("cannot truncate {}: {e}", path.display()))?;
        report.push_str(&format!("fixed: truncated to {} bytes\n", scan.valid_len));
    }
    Ok(report)
}

/// Writes every command of a log's valid records, one per line: `<time in ms> <db> <arguments>`, each argument in double quotes with `\\`, `\"`
/// and non-printable bytes escaped (`\xNN`), as redis-cli prints strings.
fn print_commands(bytes: &[u8], scan: &Scan, out: &mut dyn std::io::Write) -> Result<(), String> {
    let mut line = Vec::new();
    for r in &scan.records {
        for c in commands(&bytes[r.range.clone()], r.format)? {
            line.clear();
            line.extend_from_slice(format!("{} {}", c.now_ms, c.db).as_bytes());
            for a in &c.args {
                line.extend_from_slice(b" \"");
                for &b in *a {
                    match b {
                        b'"' | b'\\' => line.extend_from_slice(&[b'\\', b]),
                        0x20..=0x7e => line.push(b),
                        _ => line.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                    }
                }
                line.push(b'"');
            }
            line.push(b'\n');
            out.write_all(&line).map_err(|e| format!("cannot write: {e}"))?;
        }
    }
    out.flush().map_err(|e| format!("cannot write: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(out: &mut Vec<u8>, cmds: &[(&[&[u8]], u64)]) {
        let mut payload = Vec::new();
        let mut last = None;
        for (args, now) in cmds {
            push_command(&mut payload, &mut last, *now, 0, args);
        }
        out.extend_from_slice(&header(&payload));
        out.extend_from_slice(&payload);
    }

    fn sample() -> (Vec<u8>, Vec<u64>) {
        let mut log = MAGIC.to_vec();
        let mut ends = vec![log.len() as u64];
        for i in 0..5u64 {
            let v = i.to_string();
            record(&mut log, &[(&[b"SET", b"k", v.as_bytes()], 1000 + i), (&[b"INCR", b"n"], 1000 + i)]);
            ends.push(log.len() as u64);
        }
        (log, ends)
    }

    #[test]
    fn a_name_coded_beforehand_encodes_as_the_lookup_does() {
        for args in [&[&b"SUMMARY.UPDATE"[..], b"k", b"n", b"INCRBY", b"1"][..], &[b"HLL.ADDRAW", b"k:u", b"-12"], &[b"sadd", b"k"], &[b"X"]] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut buf = Vec::new();
            let mut ends = Vec::new();
            for x in args {
                buf.extend_from_slice(x);
                ends.push(buf.len());
            }
            push_command(&mut a, &mut None, 7, 1, args);
            push_command_packed(&mut b, &mut None, 7, 1, &buf, &ends);
            assert_eq!(a, b);
            // Argument by argument, twice (the second without its time).
            let (mut c, mut last) = (Vec::new(), None);
            for _ in 0..2 {
                begin_command(&mut c, &mut last, 7, 1, args.len(), NameCode::of(args[0]), args[0]);
                args[1..].iter().for_each(|x| push_arg(&mut c, x));
            }
            let mut d = Vec::new();
            let mut last = None;
            push_command(&mut d, &mut last, 7, 1, args);
            push_command(&mut d, &mut last, 7, 1, args);
            assert_eq!(c, d);
        }
    }

    #[test]
    fn packed_arguments_encode_as_a_slice_of_them() {
        let cmds: [(&[&[u8]], u64); 3] = [(&[b"SUMMARY.UPDATE", b"k", b"n", b"INCRBY", b"1"], 5), (&[b"SADD", b"k:u", b""], 5), (&[b"NOTACOMMAND", b"x"], 9)];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut la, mut lb) = (None, None);
        for (args, now) in cmds {
            push_command(&mut a, &mut la, now, 3, args);
            let mut buf = Vec::new();
            let mut ends = Vec::new();
            for x in args {
                buf.extend_from_slice(x);
                ends.push(buf.len());
            }
            push_command_packed(&mut b, &mut lb, now, 3, &buf, &ends);
        }
        assert_eq!(a, b);
        let c = commands(&b, Format::Varint).unwrap();
        assert_eq!(c[1], Command { now_ms: 5, db: 3, args: vec![&b"SADD"[..], b"k:u", b""] });
    }

    #[test]
    fn a_clean_log_reads_back_every_command() {
        let (log, _) = sample();
        let s = scan(&log);
        assert_eq!(s.problem, None);
        assert_eq!(s.records.len(), 5);
        let c = commands(&log[s.records[3].range.clone()], Format::Varint).unwrap();
        assert_eq!(c[0], Command { now_ms: 1003, db: 0, args: vec![&b"SET"[..], b"k", b"3"] });
        assert_eq!(c[1].args, vec![&b"INCR"[..], b"n"]);
    }

    #[test]
    fn a_tear_at_every_offset_keeps_every_whole_record_before_it() {
        let (log, ends) = sample();
        for cut in 0..log.len() {
            let s = scan(&log[..cut]);
            let whole = ends.iter().filter(|&&e| e <= cut as u64).count().saturating_sub(1);
            assert_eq!(s.records.len(), whole, "cut at {cut}");
            let expected = if cut == 0 {
                None
            } else if cut < MAGIC.len() {
                Some(Problem::TornTail { offset: 0, dropped_bytes: cut as u64 })
            } else if cut as u64 == ends[whole] {
                None
            } else {
                Some(Problem::TornTail { offset: ends[whole], dropped_bytes: cut as u64 - ends[whole] })
            };
            assert_eq!(s.problem, expected, "cut at {cut}");
        }
    }

    #[test]
    fn damage_in_the_last_record_is_a_tear_and_in_the_middle_is_corruption() {
        let (log, ends) = sample();
        let mut last = log.clone();
        let n = last.len();
        last[n - 2] ^= 0xff;
        assert_eq!(scan(&last).problem, Some(Problem::TornTail { offset: ends[4], dropped_bytes: ends[5] - ends[4] }));
        assert_eq!(scan(&last).records.len(), 4);
        let mut middle = log.clone();
        middle[ends[2] as usize + 20] ^= 0xff;
        assert!(matches!(scan(&middle).problem, Some(Problem::Corrupt { offset, .. }) if offset == ends[2]));
        let mut zeros = log.clone();
        zeros.extend_from_slice(&[0; 100]);
        assert_eq!(scan(&zeros).problem, Some(Problem::TornTail { offset: ends[5], dropped_bytes: 100 }));
        assert!(matches!(scan(b"GARBAGE!xyz").problem, Some(Problem::Corrupt { offset: 0, .. })));
    }

    #[test]
    fn check_fix_truncates_to_the_last_valid_record() {
        let (mut log, ends) = sample();
        log.truncate(log.len() - 3);
        let dir = std::env::temp_dir().join(format!("abacus-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.aof");
        std::fs::write(&p, &log).unwrap();
        let report = check_file(&p, true, None).unwrap();
        assert!(report.contains("torn tail"), "{report}");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), ends[4]);
        assert!(check_file(&p, false, None).unwrap().contains("log is valid"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A record in the fixed-width format of older builds.
    fn fixed_record(out: &mut Vec<u8>, now_ms: u64, db: u16, args: &[&[u8]]) {
        let mut p = Vec::new();
        p.extend_from_slice(&now_ms.to_le_bytes());
        p.extend_from_slice(&db.to_le_bytes());
        p.extend_from_slice(&(args.len() as u32).to_le_bytes());
        for a in args {
            p.extend_from_slice(&(a.len() as u32).to_le_bytes());
            p.extend_from_slice(a);
        }
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
        out.extend_from_slice(&p);
    }

    #[test]
    fn records_of_older_builds_read_before_and_between_new_ones() {
        let mut log = MAGIC.to_vec();
        fixed_record(&mut log, 7, 3, &[b"SET", b"old", b"1"]);
        record(&mut log, &[(&[b"append", b"new", b"2"], 9)]);
        fixed_record(&mut log, 11, 0, &[b"DEL", b"old"]);
        let s = scan(&log);
        assert_eq!(s.problem, None);
        let got: Vec<_> = s.records.iter().flat_map(|r| commands(&log[r.range.clone()], r.format).unwrap()).collect();
        assert_eq!(
            got,
            vec![
                Command { now_ms: 7, db: 3, args: vec![&b"SET"[..], b"old", b"1"] },
                // A known command name comes back in upper case, as replay reads it anyway.
                Command { now_ms: 9, db: 0, args: vec![&b"APPEND"[..], b"new", b"2"] },
                Command { now_ms: 11, db: 0, args: vec![&b"DEL"[..], b"old"] },
            ]
        );
        assert_eq!([s.records[0].format, s.records[1].format], [Format::Fixed, Format::Varint]);
    }

    #[test]
    fn an_append_of_16_bytes_costs_38_bytes_and_6_more_with_its_time() {
        let mut p = Vec::new();
        let mut last = None;
        push_command(&mut p, &mut last, 1_790_000_000_000, 0, &[&b"APPEND"[..], &[b'k'; 16], &[b'v'; 16]]);
        assert_eq!(p.len(), 44);
        push_command(&mut p, &mut last, 1_790_000_000_000, 0, &[&b"APPEND"[..], &[b'k'; 16], &[b'v'; 16]]);
        assert_eq!(p.len(), 44 + 38);
    }

    #[test]
    fn upper_ascii_changes_only_lower_case_letters() {
        for b in 0..=255u8 {
            let w = u64::from_le_bytes([b, b'a', b'z', b'`', b'{', b'A', 0xe1, b]);
            let u = upper_ascii(w).to_le_bytes();
            assert_eq!(u, [b.to_ascii_uppercase(), b'A', b'Z', b'`', b'{', b'A', 0xe1, b.to_ascii_uppercase()]);
        }
    }

    #[test]
    fn every_name_has_its_own_index_in_any_case() {
        for (i, n) in NAMES.iter().enumerate() {
            assert!(n.len() <= 15, "{n}");
            assert_eq!(name_index(n.as_bytes()), Some(i as u8));
            assert_eq!(name_index(n.to_ascii_lowercase().as_bytes()), Some(i as u8));
        }
        for n in [&b""[..], b"SE", b"SETT", b"SET\0", b"xyzzy", b"HLL.ADDX", b"APPENDAPPENDAPPEND"] {
            assert_eq!(name_index(n), None, "{:?}", n);
        }
    }

    #[test]
    fn a_record_must_not_start_without_a_time() {
        let mut p = Vec::new();
        push_command(&mut p, &mut Some(5), 5, 0, &[&b"SET"[..], b"k", b"v"]);
        assert!(commands(&p, Format::Varint).unwrap_err().contains("without its time"));
        assert!(commands(&[0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], Format::Varint).is_err());
        assert!(commands(&[0x03, 0x01, 0x01, 0x00, 200], Format::Varint).unwrap_err().contains("unknown command index"));
    }

    fn arg() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::sample::select(NAMES.to_vec()).prop_map(|n| n.to_ascii_lowercase().into_bytes()),
        ]
    }

    proptest::proptest! {
        #[test]
        fn commands_read_back_as_written(
            cmds in proptest::collection::vec(
                (0u64..4, proptest::prelude::any::<u16>(), proptest::collection::vec(arg(), 1..5)),
                1..20,
            ),
            base in proptest::prelude::any::<u64>(),
        ) {
            let mut p = Vec::new();
            let mut last = None;
            let mut now = base;
            for (dt, db, args) in &cmds {
                now = now.wrapping_add(*dt);
                push_command(&mut p, &mut last, now, *db, args);
            }
            let got = commands(&p, Format::Varint).unwrap();
            proptest::prop_assert_eq!(got.len(), cmds.len());
            let mut now = base;
            for (g, (dt, db, args)) in got.iter().zip(&cmds) {
                now = now.wrapping_add(*dt);
                proptest::prop_assert_eq!(g.now_ms, now);
                proptest::prop_assert_eq!(g.db, *db);
                proptest::prop_assert_eq!(g.args.len(), args.len());
                for (i, (a, b)) in g.args.iter().zip(args).enumerate() {
                    if i == 0 {
                        proptest::prop_assert!(a.eq_ignore_ascii_case(b));
                    } else {
                        proptest::prop_assert_eq!(*a, &b[..]);
                    }
                }
            }
        }

        #[test]
        fn random_payloads_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = commands(&bytes, Format::Varint);
            let _ = commands(&bytes, Format::Fixed);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let mut log = MAGIC.to_vec();
            log.extend_from_slice(&bytes);
            let _ = scan(&log);
            let _ = scan(&bytes);
        }
    }
}
