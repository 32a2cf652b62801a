//! The append-only command log.
//!
//! File: the 8-byte magic `ABACUSL1`, then records. A record is
//! `[u64 payload len][u32 CRC32 of payload][payload]`, and a payload is one or more commands,
//! each `[u64 now_ms][u16 db][u32 argc]` then `argc` times `[u32 len][bytes]`.
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

/// Appends one command to a payload being built.
pub fn push_command<A: AsRef<[u8]>>(payload: &mut Vec<u8>, now_ms: u64, db: u16, args: &[A]) {
    payload.extend_from_slice(&now_ms.to_le_bytes());
    payload.extend_from_slice(&db.to_le_bytes());
    payload.extend_from_slice(&(args.len() as u32).to_le_bytes());
    for a in args {
        let a = a.as_ref();
        payload.extend_from_slice(&(a.len() as u32).to_le_bytes());
        payload.extend_from_slice(a);
    }
}

/// The header that frames `payload` as a record.
pub fn header(payload: &[u8]) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..8].copy_from_slice(&(payload.len() as u64).to_le_bytes());
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

/// The commands of a record payload, in order.
pub fn commands(payload: &[u8]) -> Result<Vec<Command<'_>>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Result<&[u8], String> {
        let end = at.checked_add(n).filter(|&e| e <= payload.len()).ok_or("command cut short inside a record")?;
        let s = &payload[*at..end];
        *at = end;
        Ok(s)
    };
    while at < payload.len() {
        let now_ms = u64::from_le_bytes(take(&mut at, 8)?.try_into().unwrap_or_default());
        let db = u16::from_le_bytes(take(&mut at, 2)?.try_into().unwrap_or_default());
        let argc = u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap_or_default()) as usize;
        if argc == 0 || argc > (payload.len() - at) / 4 {
            return Err(format!("bad argument count {argc}"));
        }
        let mut args = Vec::with_capacity(argc);
        for _ in 0..argc {
            let n = u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap_or_default()) as usize;
            args.push(take(&mut at, n)?);
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
    /// Payload byte ranges of the valid records, in order.
    pub records: Vec<std::ops::Range<usize>>,
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
        let plen = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
        let crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap_or_default());
        if plen == 0 || plen > MAX_PAYLOAD_BYTES {
            // Zero-filled space after the last write (some filesystems leave it after a
            // crash) is a torn tail; anything else is damage.
            scan.problem = Some(if bytes[at..].iter().all(|&b| b == 0) {
                torn(at)
            } else {
                Problem::Corrupt { offset: at as u64, reason: format!("impossible record length {plen}") }
            });
            break;
        }
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
        if let Err(e) = commands(payload) {
            scan.problem = Some(Problem::Corrupt { offset: at as u64, reason: e });
            break;
        }
        scan.records.push(start..end);
        at = end;
        scan.valid_len = at as u64;
    }
    scan
}

/// `abacus check-aof [--fix] FILE`: reports on a log and, with `fix`, truncates it to its
/// last valid record. Returns the report; an error if the file cannot be read or written.
pub fn check_file(path: &std::path::Path, fix: bool) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let scan = scan(&bytes);
    let commands: usize = scan.records.iter().map(|r| commands(&bytes[r.clone()]).map_or(0, |c| c.len())).sum();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(out: &mut Vec<u8>, cmds: &[(&[&[u8]], u64)]) {
        let mut payload = Vec::new();
        for (args, now) in cmds {
            push_command(&mut payload, *now, 0, args);
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
    fn a_clean_log_reads_back_every_command() {
        let (log, _) = sample();
        let s = scan(&log);
        assert_eq!(s.problem, None);
        assert_eq!(s.records.len(), 5);
        let c = commands(&log[s.records[3].clone()]).unwrap();
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
        let report = check_file(&p, true).unwrap();
        assert!(report.contains("torn tail"), "{report}");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), ends[4]);
        assert!(check_file(&p, false).unwrap().contains("log is valid"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let mut log = MAGIC.to_vec();
            log.extend_from_slice(&bytes);
            let _ = scan(&log);
            let _ = scan(&bytes);
        }
    }
}
