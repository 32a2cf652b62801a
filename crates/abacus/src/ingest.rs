//! `abacus ingest`: feeds files or standard input to a server's summarizer.
//!
//! Lines are read in batches of about `--batch-bytes`, cut at a line end, and sent as
//! `SUMMARY.INGESTSOURCE feed source start end first-line payload`, up to `--pipeline`
//! batches in flight on one connection (the server applies a connection's batches in order,
//! and each waits for the previous one: that is the back-pressure). A file's source id is its
//! canonical path unless `--source` names one; every batch carries its byte range, and the
//! server records the end with the batch's own writes, so a batch is applied exactly once:
//! `--resume` asks the server where the source stopped (SUMMARY.SOURCE) and continues there
//! after a crash of either side; without `--resume` a source the server already has is
//! refused rather than counted twice. Standard input without `--source` is sent with plain
//! SUMMARY.INGEST (nothing to resume).
//!
//! The client speaks RESP2 over a blocking socket: one connection, a few batches in flight,
//! nothing that needs an async runtime.

use std::io::{BufRead, BufReader, IsTerminal, Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::time::Instant;

/// Longest line the client will carry to the server (longer ones are the server's to refuse,
/// but a batch must hold at least one whole line).
const MAX_LINE_BYTES: usize = 64 << 20;

pub struct Options {
    pub feed: String,
    pub host: String,
    pub port: u16,
    pub password: Option<String>,
    pub batch_bytes: usize,
    pub pipeline: usize,
    pub max_rejects: Option<u64>,
    pub resume: bool,
    pub source: Option<String>,
    pub quiet: bool,
    pub files: Vec<String>,
}

// Every reply kind is parsed (a server may answer anything); not every payload is read.
#[allow(dead_code)]
enum Reply {
    Ok(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
    Err(String),
}

struct Client {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Client {
    fn connect(host: &str, port: u16) -> Result<Client, String> {
        let s = TcpStream::connect((host, port)).map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        let _ = s.set_nodelay(true);
        let r = BufReader::with_capacity(64 << 10, s.try_clone().map_err(|e| e.to_string())?);
        Ok(Client { w: s, r })
    }

    fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut head = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            head.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            if a.len() > 4096 {
                // A payload goes out from its own buffer, not copied into this one.
                self.w.write_all(&head).map_err(|e| e.to_string())?;
                self.w.write_all(a).map_err(|e| e.to_string())?;
                head.clear();
                head.extend_from_slice(b"\r\n");
            } else {
                head.extend_from_slice(a);
                head.extend_from_slice(b"\r\n");
            }
        }
        self.w.write_all(&head).map_err(|e| e.to_string())
    }

    fn read(&mut self) -> Result<Reply, String> {
        let mut line = Vec::new();
        self.r.read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
        if line.len() < 3 {
            return Err("the server closed the connection".into());
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        match line[0] {
            b'+' => Ok(Reply::Ok(body)),
            b'-' => Ok(Reply::Err(body)),
            b':' => body.parse().map(Reply::Int).map_err(|_| format!("bad integer reply '{body}'")),
            b'$' => {
                let n: i64 = body.parse().map_err(|_| "bad bulk length".to_string())?;
                if n < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let mut buf = vec![0; n as usize + 2];
                self.r.read_exact(&mut buf).map_err(|e| e.to_string())?;
                buf.truncate(n as usize);
                Ok(Reply::Bulk(Some(buf)))
            }
            b'*' => {
                let n: i64 = body.parse().map_err(|_| "bad array length".to_string())?;
                let mut v = Vec::new();
                for _ in 0..n.max(0) {
                    v.push(self.read()?);
                }
                Ok(Reply::Array(v))
            }
            _ => Err(format!("unexpected reply '{}'", String::from_utf8_lossy(&line))),
        }
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.send(args)?;
        self.read()
    }
}

/// What the server answered to one batch: (events, rejected).
fn counts(r: Reply) -> Result<(u64, u64), String> {
    match r {
        Reply::Array(v) => match v.as_slice() {
            [Reply::Int(e), Reply::Int(r)] => Ok((*e as u64, *r as u64)),
            _ => Err("unexpected reply to SUMMARY.INGEST".into()),
        },
        Reply::Err(e) => Err(e),
        _ => Err("unexpected reply to SUMMARY.INGEST".into()),
    }
}

struct Totals {
    events: u64,
    rejected: u64,
    bytes: u64,
    batches: u64,
    started: Instant,
    last_progress: Instant,
}

/// One input: a file (seekable, with a size) or standard input.
struct Input {
    name: String,
    reader: Box<dyn Read>,
    size: Option<u64>,
    source: Option<String>,
    stdin: bool,
}

fn open(path: &str, opts: &Options) -> Result<Input, String> {
    if path == "-" {
        return Ok(Input { name: "stdin".into(), reader: Box::new(std::io::stdin().lock()), size: None, source: opts.source.clone(), stdin: true });
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    let size = f.metadata().ok().map(|m| m.len());
    let canonical = std::fs::canonicalize(path).map(|p| p.display().to_string()).unwrap_or_else(|_| path.to_string());
    let source = match (&opts.source, opts.files.len()) {
        (Some(s), 1) => s.clone(),
        (Some(s), _) => format!("{s}:{canonical}"),
        (None, _) => canonical,
    };
    Ok(Input { name: path.to_string(), reader: Box::new(f), size, source: Some(source), stdin: false })
}

pub fn run(opts: Options) -> Result<(), String> {
    let mut c = Client::connect(&opts.host, opts.port)?;
    if let Some(p) = &opts.password {
        if let Reply::Err(e) = c.call(&[b"AUTH", p.as_bytes()])? {
            return Err(format!("AUTH: {e}"));
        }
    }
    let files = if opts.files.is_empty() { vec!["-".to_string()] } else { opts.files.clone() };
    let now = Instant::now();
    let mut t = Totals { events: 0, rejected: 0, bytes: 0, batches: 0, started: now, last_progress: now };
    let progress = !opts.quiet && std::io::stderr().is_terminal();
    for path in &files {
        let input = open(path, &opts)?;
        ingest_one(&mut c, &opts, input, &mut t, progress)?;
    }
    if progress {
        eprint!("\r\x1b[K");
    }
    let secs = t.started.elapsed().as_secs_f64();
    println!(
        "ingested {} events ({} rejected) from {} bytes in {} batches in {:.2} s: {:.0} events/s",
        t.events,
        t.rejected,
        t.bytes,
        t.batches,
        secs,
        t.events as f64 / secs.max(1e-9)
    );
    Ok(())
}

fn ingest_one(c: &mut Client, opts: &Options, mut input: Input, t: &mut Totals, progress: bool) -> Result<(), String> {
    // Where to start: the server's record of this source.
    let (mut offset, mut line) = (0u64, 1u64);
    if let Some(src) = &input.source {
        let (o, l) = match c.call(&[b"SUMMARY.SOURCE", src.as_bytes()])? {
            Reply::Array(v) => match v.as_slice() {
                [Reply::Int(o), Reply::Int(l)] => (*o as u64, *l as u64),
                _ => return Err("unexpected reply to SUMMARY.SOURCE".into()),
            },
            Reply::Err(e) => return Err(format!("SUMMARY.SOURCE: {e}")),
            _ => return Err("unexpected reply to SUMMARY.SOURCE".into()),
        };
        if o > 0 && !opts.resume {
            return Err(format!("{}: the server already has source '{src}' up to byte {o}; use --resume to continue it, or --source to name a new source", input.name));
        }
        if opts.resume {
            (offset, line) = (o, l);
            skip(&mut input, o)?;
        }
    }
    let mut carry: Vec<u8> = Vec::new();
    let mut in_flight: std::collections::VecDeque<()> = std::collections::VecDeque::new();
    let mut eof = false;
    while !eof || !carry.is_empty() {
        // Fill a batch: the carried partial line, then up to batch_bytes more.
        let mut buf = std::mem::take(&mut carry);
        let want = opts.batch_bytes.max(1);
        let start = buf.len();
        buf.resize(start + want, 0);
        let mut filled = start;
        while filled < buf.len() && !eof {
            match input.reader.read(&mut buf[filled..]) {
                Ok(0) => eof = true,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("{}: {e}", input.name)),
            }
        }
        buf.truncate(filled);
        if buf.is_empty() {
            break;
        }
        // Cut at the last line end; the rest waits for the next batch (or ends the input).
        let cut = if eof { buf.len() } else { buf.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) };
        if cut == 0 {
            if buf.len() > MAX_LINE_BYTES {
                return Err(format!("{}: a line longer than {MAX_LINE_BYTES} bytes at byte {offset}", input.name));
            }
            carry = buf;
            continue;
        }
        carry = buf.split_off(cut);
        let lines = buf.iter().filter(|&&b| b == b'\n').count() as u64 + u64::from(buf.last() != Some(&b'\n'));
        let end = offset + buf.len() as u64;
        match &input.source {
            Some(src) => c.send(&[
                b"SUMMARY.INGESTSOURCE",
                opts.feed.as_bytes(),
                src.as_bytes(),
                offset.to_string().as_bytes(),
                end.to_string().as_bytes(),
                line.to_string().as_bytes(),
                &buf,
            ])?,
            None => c.send(&[b"SUMMARY.INGEST", opts.feed.as_bytes(), &buf])?,
        }
        t.bytes += buf.len() as u64;
        offset = end;
        line += lines;
        in_flight.push_back(());
        while in_flight.len() >= opts.pipeline.max(1) {
            settle(c, opts, t, &input.name)?;
            in_flight.pop_front();
        }
        if progress && t.last_progress.elapsed().as_millis() >= 250 {
            t.last_progress = Instant::now();
            let secs = t.started.elapsed().as_secs_f64().max(1e-9);
            let rate = t.events as f64 / secs;
            let eta = match input.size {
                Some(size) if offset > 0 && offset < size => format!(", ETA {:.0} s", (size - offset) as f64 / (offset as f64 / secs)),
                _ => String::new(),
            };
            eprint!("\r\x1b[K{}: {} events, {:.0} events/s, {} MiB{eta}", input.name, t.events, rate, t.bytes >> 20);
        }
    }
    while in_flight.pop_front().is_some() {
        settle(c, opts, t, &input.name)?;
    }
    Ok(())
}

fn settle(c: &mut Client, opts: &Options, t: &mut Totals, name: &str) -> Result<(), String> {
    let (e, r) = counts(c.read()?).map_err(|e| format!("{name}: {e}"))?;
    t.events += e;
    t.rejected += r;
    t.batches += 1;
    if let Some(max) = opts.max_rejects {
        if t.rejected > max {
            return Err(format!("{name}: {} lines rejected, more than --max-rejects {max}; see SUMMARY.REJECTS {}", t.rejected, opts.feed));
        }
    }
    Ok(())
}

/// Skips the first `n` bytes of an input (seeks a file, reads past them on standard input).
fn skip(input: &mut Input, n: u64) -> Result<(), String> {
    if n == 0 {
        return Ok(());
    }
    if !input.stdin {
        let mut f = std::fs::File::open(&input.name).map_err(|e| format!("cannot open {}: {e}", input.name))?;
        f.seek(SeekFrom::Start(n)).map_err(|e| format!("{}: {e}", input.name))?;
        input.reader = Box::new(f);
        return Ok(());
    }
    let copied = std::io::copy(&mut (&mut input.reader).take(n), &mut std::io::sink()).map_err(|e| e.to_string())?;
    if copied < n {
        return Err(format!("stdin ended at byte {copied}, before the resume offset {n}"));
    }
    Ok(())
}

