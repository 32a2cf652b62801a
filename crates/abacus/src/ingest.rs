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
//! Parallelism: the server parses a batch on the thread of the connection that sent it, so
//! one connection keeps one server thread busy. With `--connections N` a file is cut into N
//! byte ranges at line starts, each sent over its own connection as its own source
//! (`source#k/N`, offsets relative to the range), so N server threads parse at once and each
//! range stays exactly once; `--resume` must then be given the same N.
//!
//! The client speaks RESP2 over blocking sockets: a thread per connection, a few batches in
//! flight on each, nothing that needs an async runtime.

use std::io::{BufRead, BufReader, IsTerminal, Read, Seek, SeekFrom, Write};
use abacus_tls::BlockingStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Longest line the client will carry to the server (longer ones are the server's to refuse,
/// but a batch must hold at least one whole line).
const MAX_LINE_BYTES: usize = 64 << 20;

pub struct Options {
    pub feed: String,
    pub host: String,
    pub port: u16,
    pub password: Option<String>,
    /// `--tls` and the rest of redis-cli's TLS options.
    pub tls: abacus_tls::ClientOptions,
    pub batch_bytes: usize,
    pub pipeline: usize,
    pub max_rejects: Option<u64>,
    pub resume: bool,
    pub source: Option<String>,
    pub quiet: bool,
    pub connections: usize,
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
    w: BlockingStream,
    r: BufReader<BlockingStream>,
}

impl Client {
    fn connect(host: &str, port: u16, tls: &abacus_tls::ClientOptions) -> Result<Client, String> {
        let s = tls.connect(host, port)?;
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

/// Counts shared by the connections' threads (the progress display reads them).
#[derive(Default)]
struct Totals {
    events: AtomicU64,
    rejected: AtomicU64,
    bytes: AtomicU64,
    batches: AtomicU64,
}

/// One input: a file range or standard input.
struct Input {
    name: String,
    reader: Box<dyn Read + Send>,
    /// For a file range: the file, where the range starts and how long it is.
    file: Option<(String, u64, u64)>,
    source: Option<String>,
}

/// Cuts a file into `n` ranges at line starts: range k begins at the first line that starts
/// at or after k * size / n. Deterministic for a given file and n, which --resume relies on.
fn ranges(path: &str, size: u64, n: usize) -> Result<Vec<(u64, u64)>, String> {
    let mut starts = vec![0u64];
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    for k in 1..n as u64 {
        let guess = (size * k / n as u64).max(*starts.last().unwrap_or(&0));
        if guess == 0 {
            starts.push(0);
            continue;
        }
        // The line start after byte guess - 1.
        f.seek(SeekFrom::Start(guess - 1)).map_err(|e| format!("{path}: {e}"))?;
        let mut r = BufReader::new(&mut f);
        let mut skipped = Vec::new();
        r.read_until(b'\n', &mut skipped).map_err(|e| format!("{path}: {e}"))?;
        starts.push((guess - 1 + skipped.len() as u64).min(size));
    }
    starts.push(size);
    Ok(starts.windows(2).map(|w| (w[0], w[1] - w[0])).filter(|&(_, len)| len > 0).collect())
}

fn inputs(path: &str, opts: &Options) -> Result<Vec<Input>, String> {
    if path == "-" {
        return Ok(vec![Input { name: "stdin".into(), reader: Box::new(std::io::stdin()), file: None, source: opts.source.clone() }]);
    }
    let size = std::fs::metadata(path).map_err(|e| format!("cannot open {path}: {e}"))?.len();
    let canonical = std::fs::canonicalize(path).map(|p| p.display().to_string()).unwrap_or_else(|_| path.to_string());
    let base = match (&opts.source, opts.files.len()) {
        (Some(s), 1) => s.clone(),
        (Some(s), _) => format!("{s}:{canonical}"),
        (None, _) => canonical,
    };
    let n = opts.connections.max(1);
    let parts = if n > 1 { ranges(path, size, n)? } else { vec![(0, size)] };
    let mut out = Vec::new();
    for (start, len) in parts {
        let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
        f.seek(SeekFrom::Start(start)).map_err(|e| format!("{path}: {e}"))?;
        let source = if n > 1 { format!("{base}#{}/{n}", out.len()) } else { base.clone() };
        out.push(Input { name: path.to_string(), reader: Box::new(f.take(len)), file: Some((path.to_string(), start, len)), source: Some(source) });
    }
    Ok(out)
}

fn connect(opts: &Options) -> Result<Client, String> {
    let mut c = Client::connect(&opts.host, opts.port, &opts.tls)?;
    if let Some(p) = &opts.password {
        if let Reply::Err(e) = c.call(&[b"AUTH", p.as_bytes()])? {
            return Err(format!("AUTH: {e}"));
        }
    }
    Ok(c)
}

pub fn run(opts: Options) -> Result<(), String> {
    let files = if opts.files.is_empty() { vec!["-".to_string()] } else { opts.files.clone() };
    let started = Instant::now();
    let t = Totals::default();
    let progress = !opts.quiet && std::io::stderr().is_terminal();
    let total_bytes: u64 = files.iter().filter(|f| *f != "-").filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let has_stdin = files.iter().any(|f| f == "-");
    for path in &files {
        let parts = inputs(path, &opts)?;
        let done = AtomicBool::new(false);
        let result: Result<(), String> = std::thread::scope(|scope| {
            let workers: Vec<_> = parts
                .into_iter()
                .map(|input| {
                    let (opts, t) = (&opts, &t);
                    scope.spawn(move || -> Result<(), String> {
                        let mut c = connect(opts)?;
                        ingest_one(&mut c, opts, input, t)
                    })
                })
                .collect();
            while progress && !workers.iter().all(|w| w.is_finished()) && !done.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let secs = started.elapsed().as_secs_f64().max(1e-9);
                let (events, bytes) = (t.events.load(Relaxed), t.bytes.load(Relaxed));
                let eta = if has_stdin || bytes == 0 || bytes >= total_bytes { String::new() } else { format!(", ETA {:.0} s", (total_bytes - bytes) as f64 / (bytes as f64 / secs)) };
                eprint!("\r\x1b[K{path}: {events} events, {:.0} events/s, {} MiB{eta}", events as f64 / secs, bytes >> 20);
            }
            let mut first_err = None;
            for w in workers {
                if let Err(e) = w.join().unwrap_or_else(|_| Err("an ingest thread panicked".into())) {
                    first_err.get_or_insert(e);
                }
            }
            done.store(true, Relaxed);
            first_err.map_or(Ok(()), Err)
        });
        if progress {
            eprint!("\r\x1b[K");
        }
        result?;
    }
    let secs = started.elapsed().as_secs_f64();
    let events = t.events.load(Relaxed);
    println!(
        "ingested {} events ({} rejected) from {} bytes in {} batches in {:.2} s: {:.0} events/s",
        events,
        t.rejected.load(Relaxed),
        t.bytes.load(Relaxed),
        t.batches.load(Relaxed),
        secs,
        events as f64 / secs.max(1e-9)
    );
    Ok(())
}

fn ingest_one(c: &mut Client, opts: &Options, mut input: Input, t: &Totals) -> Result<(), String> {
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
    let mut in_flight = 0usize;
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
        t.bytes.fetch_add(buf.len() as u64, Relaxed);
        offset = end;
        line += lines;
        in_flight += 1;
        while in_flight >= opts.pipeline.max(1) {
            settle(c, opts, t, &input.name)?;
            in_flight -= 1;
        }
    }
    while in_flight > 0 {
        settle(c, opts, t, &input.name)?;
        in_flight -= 1;
    }
    Ok(())
}

fn settle(c: &mut Client, opts: &Options, t: &Totals, name: &str) -> Result<(), String> {
    let (e, r) = counts(c.read()?).map_err(|e| format!("{name}: {e}"))?;
    t.events.fetch_add(e, Relaxed);
    let rejected = t.rejected.fetch_add(r, Relaxed) + r;
    t.batches.fetch_add(1, Relaxed);
    if let Some(max) = opts.max_rejects {
        if rejected > max {
            return Err(format!("{name}: {rejected} lines rejected, more than --max-rejects {max}; see SUMMARY.REJECTS {}", opts.feed));
        }
    }
    Ok(())
}

/// Skips the first `n` bytes of an input (seeks in a file range, reads past them on
/// standard input).
fn skip(input: &mut Input, n: u64) -> Result<(), String> {
    if n == 0 {
        return Ok(());
    }
    if let Some((path, start, len)) = &input.file {
        if n > *len {
            return Err(format!("{path}: the server's offset {n} is past this range's {len} bytes: not the same file?"));
        }
        let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
        f.seek(SeekFrom::Start(start + n)).map_err(|e| format!("{path}: {e}"))?;
        input.reader = Box::new(f.take(len - n));
        return Ok(());
    }
    let copied = std::io::copy(&mut (&mut input.reader).take(n), &mut std::io::sink()).map_err(|e| e.to_string())?;
    if copied < n {
        return Err(format!("stdin ended at byte {copied}, before the resume offset {n}"));
    }
    Ok(())
}
