//! `abacus bench w1z`: the W1 Zipfian load generator (issue 27), run by `bench/w1z.sh`
//! against Redis and Abacus in turn.
//!
//! Preload: every key is created with a 16-byte SET, pipelined as fast as the server takes
//! it (not timed against the schedule). Then writes run open loop at a fixed rate for a fixed
//! time (see workload.rs for which key, which write, and the 16 KB cap), and every
//! `--report-secs` a row gives RSS (from /proc, when the server is on this machine),
//! `used_memory` (INFO), the payload (key plus value bytes, exact: the generator knows every
//! length), the write rate achieved, and p99.9 and max latency of the writes and of PING.
//!
//! Why the shape of the client:
//! - Open loop, so coordinated omission cannot hide a stall: write i is due at i/rate s; one
//!   writer thread wakes every millisecond, encodes every write due by then into one buffer
//!   per connection and sends each buffer with one write() (200 writes per ms at 200,000/s).
//!   A reader thread per connection matches replies in order to the writes' due times and
//!   records `reply time - due time`. When the writer falls behind (a blocked socket, a
//!   descheduled thread) the late writes are still charged from their due times, and the
//!   writer's own lag is shown apart (`behind_ms`) so a slow client is not taken for a slow
//!   server.
//! - A key always goes over the same connection (key index mod connections), so a key's
//!   writes arrive in order and each reply can be checked: an APPEND must answer the length
//!   the generator expects, a reset must answer +OK. That is the payload cross-check, on
//!   every write, for free; at the end DBSIZE and a sample of STRLENs are checked too.
//! - PING: one more connection, one PING per ms, one outstanding at a time (as
//!   bench/pinger.py), its round trip recorded; its own scheduling lateness is reported.
//! - Blocking sockets and a handful of threads (connections + 2): at 200,000 writes/s the
//!   work is a Zipf draw and ~60 bytes of encoding per write, a few percent of a core, and
//!   nothing here needs an async runtime.
//! - Bounds: the writes in flight are bounded (`--max-behind-secs` of the rate); past it the
//!   run stops with an error rather than growing the client's memory without limit. The run
//!   ends on time: writes still unsent when the time is up (the server fell behind and its
//!   socket stopped taking them) are counted as unsent, and the rate is then not held.

mod hist;
mod workload;
mod zipf;

use hist::Hist;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write as _};
use abacus_tls::BlockingStream as TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use workload::{due_count, due_ns, encode, key_name, Workload};

#[derive(clap::Args, Clone)]
pub struct Args {
    #[command(flatten)]
    server: crate::ServerArgs,
    /// Keys, all created by the preload with 16 bytes.
    #[arg(long, default_value_t = 50_000_000)]
    keys: u64,
    /// Writes per second (APPENDs of 16 bytes, and SETs for keys reset at 16 KB).
    #[arg(long, default_value_t = 200_000)]
    rate: u64,
    /// Length of the timed run.
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// The Zipf exponent of key popularity (YCSB uses 0.99).
    #[arg(long, default_value_t = 0.99)]
    exponent: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write connections (each wakes a reader thread per reply burst: on 2 cores, 2 cost the
    /// generator about two thirds of the CPU 4 do).
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// Seconds per report row.
    #[arg(long, default_value_t = 60)]
    report_secs: u64,
    /// Stop with an error once the replies lag the schedule by this many seconds of writes.
    #[arg(long, default_value_t = 30)]
    max_behind_secs: u64,
    /// The server's name in the report.
    #[arg(long, default_value = "server")]
    label: String,
    /// Print to stderr every stall over this many ms: a run of writes each later than this
    /// (one line per run: its first write's due time, how many, the worst), and every PING
    /// slower than this. Times are CLOCK_MONOTONIC seconds, the clock of
    /// `perf sched record -k mono`, so a stall can be matched with what the server's threads
    /// were doing at that moment (`perf sched timehist`).
    #[arg(long)]
    trace_over_ms: Option<f64>,
}

/// A write sent and not yet answered: when it was due (ns from the start) and the reply it
/// must get (0: +OK).
struct Pending {
    due_ns: u64,
    expect_len: u32,
}

#[derive(Default)]
struct Shared {
    writer_done: AtomicBool,
    stop_ping: AtomicBool,
    failure: Mutex<Option<String>>,
    payload_bytes: AtomicU64,
    replies: AtomicU64,
    behind_ns_max: AtomicU64,
    errors: AtomicU64,
    mismatches: AtomicU64,
    writes_hist: Mutex<Hist>,
    ping_hist: Mutex<Hist>,
    ping_late_us_max: AtomicU64,
    /// `--trace-over-ms` in ns (0: off), and CLOCK_MONOTONIC at the run's start (t0).
    trace_over_ns: u64,
    t0_mono_ns: u64,
}

impl Shared {
    fn fail(&self, why: String) {
        self.failure.lock().unwrap().get_or_insert(why);
    }
    fn failed(&self) -> bool {
        self.failure.lock().unwrap().is_some()
    }
}

pub fn run(a: Args) -> Result<(), String> {
    if a.rate == 0 || a.connections == 0 || a.report_secs == 0 || a.minutes.is_nan() || a.minutes <= 0.0 || a.exponent.is_nan() || a.exponent <= 0.0 {
        return Err("--rate, --connections, --report-secs, --minutes and --exponent must be positive".into());
    }
    let mut ctl = Control::connect(&a)?;
    if ctl.int(&[b"DBSIZE"])? != 0 {
        return Err("the server's database 0 is not empty: W1z needs an empty server".into());
    }
    let pid = info_field(&ctl.bulk(&[b"INFO", b"server"])?, "process_id").unwrap_or_default();
    let proc_dir = format!("/proc/{pid}");
    let local = !pid.is_empty() && std::path::Path::new(&proc_dir).join("status").exists();
    let mut wl = Workload::new(a.keys, a.exponent, a.seed)?;

    let t = Instant::now();
    preload(&a)?;
    let preload_s = t.elapsed().as_secs_f64();
    let dbsize = ctl.int(&[b"DBSIZE"])?;
    if dbsize != a.keys as i64 {
        return Err(format!("after the preload DBSIZE is {dbsize}, not {}", a.keys));
    }
    println!(
        "# {}: preloaded {} keys of 16 B in {:.1} s ({:.0} SET/s); RSS {}, used_memory {} MiB",
        a.label,
        a.keys,
        preload_s,
        a.keys as f64 / preload_s,
        if local { format!("{} MiB", rss_bytes(&proc_dir) >> 20) } else { "-".into() },
        info_used_memory(&mut ctl)? >> 20
    );

    let duration_ns = ((a.minutes * 60e9) as u64).max(1);
    let total = due_count(duration_ns - 1, a.rate);
    let t0 = Instant::now();
    let shared = Arc::new(Shared {
        trace_over_ns: a.trace_over_ms.map_or(0, |ms| (ms.max(0.0) * 1e6) as u64),
        t0_mono_ns: monotonic_ns(),
        ..Shared::default()
    });
    shared.payload_bytes.store(wl.payload_bytes, Relaxed);

    let mut streams = Vec::new();
    let mut readers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..a.connections {
        let s = connect(&a)?;
        let (tx, rx) = mpsc::channel::<Vec<Pending>>();
        let (rs, sh) = (s.try_clone().map_err(|e| e.to_string())?, shared.clone());
        readers.push(std::thread::spawn(move || reader(rs, rx, sh, t0)));
        streams.push(s);
        senders.push(tx);
    }
    let ping = {
        let (s, sh) = (connect(&a)?, shared.clone());
        std::thread::spawn(move || pinger(s, sh, t0))
    };
    let writer = {
        let (sh, rate, max_inflight) = (shared.clone(), a.rate, a.rate.saturating_mul(a.max_behind_secs));
        std::thread::spawn(move || {
            let sent = writer(&mut wl, streams, senders, &sh, t0, rate, total, max_inflight);
            sh.writer_done.store(true, Relaxed);
            (wl, sent)
        })
    };

    println!("# {}: {} keys, {} writes/s for {} min, Zipf exponent {}, seed {}, {} connections", a.label, a.keys, a.rate, a.minutes, a.exponent, a.seed, a.connections);
    println!(
        "{:>6} {:>8} {:>8} {:>8} {:>7} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}",
        "min", "rss_MiB", "used_MiB", "pay_MiB", "rss/pay", "rss/tgt", "writes/s", "behind", "w_p999", "w_max", "png_p999", "png_max", "srv%", "gen%"
    );
    let report_ns = a.report_secs * 1_000_000_000;
    let mut rows: Vec<Row> = Vec::new();
    let (mut last_ns, mut last_replies) = (0u64, 0u64);
    let (mut last_srv_cpu, mut last_gen_cpu) = (cpu_ticks(&proc_dir), cpu_ticks("/proc/self"));
    let mut writer = Some(writer);
    let mut wl = None;
    while last_ns < duration_ns {
        let end_ns = (last_ns + report_ns).min(duration_ns);
        let end = t0 + Duration::from_nanos(end_ns);
        while Instant::now() < end && !shared.failed() {
            std::thread::sleep((end - Instant::now().min(end)).min(Duration::from_millis(100)));
        }
        if shared.failed() {
            break;
        }
        if end_ns == duration_ns {
            // The last row also counts the replies still in flight at the end.
            wl = writer.take().map(|w| w.join().expect("writer thread"));
            for r in readers.drain(..) {
                r.join().expect("reader thread");
            }
        }
        let secs = (t0.elapsed().as_nanos() as u64 - last_ns) as f64 / 1e9;
        let replies = shared.replies.load(Relaxed);
        let (srv_cpu, gen_cpu) = (cpu_ticks(&proc_dir), cpu_ticks("/proc/self"));
        let row = Row {
            minute: end_ns as f64 / 60e9,
            rss: if local { rss_bytes(&proc_dir) } else { 0 },
            used: info_used_memory(&mut ctl)?,
            payload: shared.payload_bytes.load(Relaxed),
            rate: (replies - last_replies) as f64 / secs,
            behind_ns: shared.behind_ns_max.swap(0, Relaxed),
            writes: std::mem::take(&mut *shared.writes_hist.lock().unwrap()),
            ping: std::mem::take(&mut *shared.ping_hist.lock().unwrap()),
            srv_cpu: srv_cpu.saturating_sub(last_srv_cpu) as f64 / secs,
            gen_cpu: gen_cpu.saturating_sub(last_gen_cpu) as f64 / secs,
        };
        row.print(a.keys);
        rows.push(row);
        (last_ns, last_replies, last_srv_cpu, last_gen_cpu) = (t0.elapsed().as_nanos() as u64, replies, srv_cpu, gen_cpu);
        last_ns = last_ns.max(end_ns);
    }
    shared.stop_ping.store(true, Relaxed);
    let ping_late = {
        let _ = ping.join();
        shared.ping_late_us_max.load(Relaxed)
    };
    if let Some(why) = shared.failure.lock().unwrap().clone() {
        return Err(why);
    }
    let (mut wl, sent) = wl.expect("the writer finished");
    let (checked, wrong) = check_lengths(&mut ctl, &mut wl)?;
    let dbsize = ctl.int(&[b"DBSIZE"])?;
    let (errors, mismatches) = (shared.errors.load(Relaxed), shared.mismatches.load(Relaxed));
    println!(
        "# {}: {} writes sent of {} due ({} resets at 16 KB), {} error replies, {} replies not the expected length; DBSIZE {} ({}); {}/{} sampled STRLENs match; pinger late max {:.1} ms",
        a.label, sent, total, wl.resets, errors, mismatches, dbsize, if dbsize == a.keys as i64 { "ok" } else { "WRONG" }, checked - wrong, checked, ping_late as f64 / 1000.0
    );
    summary(&a, &rows, sent, total, preload_s);
    if errors + mismatches + wrong > 0 || dbsize != a.keys as i64 {
        return Err("the server's data differs from the generator's: see above".into());
    }
    Ok(())
}

struct Row {
    minute: f64,
    rss: u64,
    used: u64,
    payload: u64,
    rate: f64,
    behind_ns: u64,
    writes: Hist,
    ping: Hist,
    srv_cpu: f64,
    gen_cpu: f64,
}

fn target_bytes(payload: u64, keys: u64) -> f64 {
    1.15 * payload as f64 + 16.0 * keys as f64
}

impl Row {
    fn print(&self, keys: u64) {
        let ms = |us: u64| us as f64 / 1000.0;
        println!(
            "{:>6.2} {:>8} {:>8} {:>8} {:>7.3} {:>7.3} {:>9.0} {:>8.1} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>6.0} {:>6.0}",
            self.minute,
            self.rss >> 20,
            self.used >> 20,
            self.payload >> 20,
            self.rss as f64 / self.payload as f64,
            self.rss as f64 / target_bytes(self.payload, keys),
            self.rate,
            self.behind_ns as f64 / 1e6,
            ms(self.writes.quantile(0.999)),
            ms(self.writes.max),
            ms(self.ping.quantile(0.999)),
            ms(self.ping.max),
            self.srv_cpu,
            self.gen_cpu
        );
    }
}

/// The run's verdicts against issue 27's targets, and one `summary` line of key=value pairs
/// for bench/w1z.sh to compare servers with.
fn summary(a: &Args, rows: &[Row], sent: u64, total: u64, preload_s: f64) {
    let Some(last) = rows.last() else { return };
    let mut all_w = Hist::default();
    let mut all_p = Hist::default();
    for r in rows {
        all_w.merge(&r.writes);
        all_p.merge(&r.ping);
    }
    let rss_tgt_max = rows.iter().map(|r| r.rss as f64 / target_bytes(r.payload, a.keys)).fold(0.0, f64::max);
    let over_10ms = rows.iter().filter(|r| r.writes.max > 10_000 || r.ping.max > 10_000).count();
    // Every row must hold 99% of the rate, and every write due must have been sent in time.
    let rate_min = rows.iter().map(|r| r.rate).fold(f64::INFINITY, f64::min);
    let rate_held = sent == total && rows.iter().all(|r| r.rate >= 0.99 * a.rate as f64);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "# {}: RSS/(1.15 payload + 16 B/key) max {:.3} (target <= 1: {}); rows with a max latency over 10 ms: {} of {} ({}); slowest row {:.0} writes/s of {} ({})",
        a.label, rss_tgt_max, verdict(rss_tgt_max <= 1.0), over_10ms, rows.len(), verdict(over_10ms == 0), rate_min, a.rate, verdict(rate_held)
    );
    println!(
        "summary label={} keys={} rate={} minutes={} writes={} writes_unsent={} preload_s={:.1} rss_bytes={} used_memory={} payload_bytes={} rss_target_max={:.4} writes_p999_us={} writes_max_us={} ping_p999_us={} ping_max_us={} rows_over_10ms={} rate_min={:.0} srv_cpu_pct={:.0} gen_cpu_pct={:.0}",
        a.label,
        a.keys,
        a.rate,
        a.minutes,
        sent,
        total - sent,
        preload_s,
        last.rss,
        last.used,
        last.payload,
        rss_tgt_max,
        all_w.quantile(0.999),
        all_w.max,
        all_p.quantile(0.999),
        all_p.max,
        over_10ms,
        rate_min,
        rows.iter().map(|r| r.srv_cpu).sum::<f64>() / rows.len() as f64,
        rows.iter().map(|r| r.gen_cpu).sum::<f64>() / rows.len() as f64,
    );
}

#[allow(clippy::too_many_arguments)]
/// Sends the writes due until `total` are sent or the run's time is up (a server that fell
/// behind leaves the rest unsent: the run ends on time, and the count says so). Returns the
/// writes sent.
fn writer(wl: &mut Workload, mut streams: Vec<TcpStream>, senders: Vec<mpsc::Sender<Vec<Pending>>>, sh: &Shared, t0: Instant, rate: u64, total: u64, max_inflight: u64) -> u64 {
    let conns = streams.len() as u64;
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); streams.len()];
    let mut batch = Vec::new();
    // Past 10 ms of writes at once (catching up after a stall), send in 10 ms slices.
    let slice = (rate / 100).max(1);
    let mut i = 0u64;
    let end_ns = due_ns(total, rate);
    while i < total && !sh.failed() {
        let now = t0.elapsed().as_nanos() as u64;
        // Time is up: one last pass sends what is due (at most a slice), then the run ends.
        let last_pass = now >= end_ns;
        let due = due_count(now, rate).min(total).min(i + slice);
        if i < due {
            sh.behind_ns_max.fetch_max(now - due_ns(i, rate), Relaxed);
            let mut pend: Vec<Vec<Pending>> = (0..conns).map(|_| Vec::new()).collect();
            batch.clear();
            wl.next_batch((due - i) as usize, &mut batch);
            for &w in &batch {
                let c = (w.key % conns) as usize;
                encode(w, &mut bufs[c]);
                pend[c].push(Pending { due_ns: due_ns(i, rate), expect_len: w.expect_len });
                i += 1;
            }
            sh.payload_bytes.store(wl.payload_bytes, Relaxed);
            for (c, p) in pend.into_iter().enumerate() {
                if p.is_empty() {
                    continue;
                }
                // The reader learns of a write before its reply can arrive.
                if senders[c].send(p).is_err() {
                    return i; // the reader stopped and said why
                }
                if let Err(e) = streams[c].write_all(&bufs[c]) {
                    sh.fail(format!("write to the server: {e}"));
                    return i;
                }
                bufs[c].clear();
            }
            if i.saturating_sub(sh.replies.load(Relaxed)) > max_inflight {
                sh.fail(format!("the server's replies fell {max_inflight} writes behind the schedule: stopped"));
                return i;
            }
            if !last_pass {
                continue;
            }
        }
        if last_pass {
            break;
        }
        // Sleep to the next millisecond boundary.
        let next = (now / 1_000_000 + 1) * 1_000_000;
        std::thread::sleep(Duration::from_nanos(next - now));
    }
    i
}

fn reader(mut s: TcpStream, rx: mpsc::Receiver<Vec<Pending>>, sh: Arc<Shared>, t0: Instant) {
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut filled = 0;
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    // `--trace-over-ms`: the stall being traced (first due time, writes, worst latency).
    let mut stall: Option<(u64, u64, u64)> = None;
    loop {
        if pending.is_empty() {
            while let Ok(batch) = rx.try_recv() {
                pending.extend(batch);
            }
            if pending.is_empty() && sh.writer_done.load(Relaxed) {
                // The writer sends a batch before its bytes, so nothing more can come.
                match rx.try_recv() {
                    Ok(batch) => pending.extend(batch),
                    Err(_) => return,
                }
            }
        }
        if sh.failed() {
            return;
        }
        let n = match s.read(&mut buf[filled..]) {
            Ok(0) => return sh.fail("the server closed a connection".into()),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => return sh.fail(format!("read from the server: {e}")),
        };
        let now = t0.elapsed().as_nanos() as u64;
        filled += n;
        let mut start = 0;
        let mut hist = sh.writes_hist.lock().unwrap();
        let mut count = 0;
        while let Some(end) = buf[start..filled].windows(2).position(|w| w == b"\r\n") {
            let line = &buf[start..start + end];
            start += end + 2;
            if pending.is_empty() {
                match rx.recv() {
                    Ok(batch) => pending.extend(batch),
                    Err(_) => return sh.fail("a reply came for no write".into()),
                }
            }
            let p = pending.pop_front().expect("a write for each reply");
            let late = now.saturating_sub(p.due_ns);
            hist.record(late / 1000);
            if sh.trace_over_ns > 0 {
                if late > sh.trace_over_ns {
                    let st = stall.get_or_insert((p.due_ns, 0, 0));
                    st.1 += 1;
                    st.2 = st.2.max(late);
                } else if let Some((due, n, worst)) = stall.take() {
                    eprintln!("w1z: stall: writes due from {:.6} s monotonic: {n} over the threshold, worst {:.2} ms", (sh.t0_mono_ns + due) as f64 / 1e9, worst as f64 / 1e6);
                }
            }
            count += 1;
            let ok = if p.expect_len == 0 { line == b"+OK" } else { line.first() == Some(&b':') && parse_u64(&line[1..]) == Some(p.expect_len as u64) };
            if !ok {
                if line.first() == Some(&b'-') {
                    if sh.errors.fetch_add(1, Relaxed) == 0 {
                        eprintln!("w1z: first error reply: {}", String::from_utf8_lossy(line));
                    }
                } else if line.first() == Some(&b'$') || line.first() == Some(&b'*') {
                    return sh.fail(format!("unexpected reply {}", String::from_utf8_lossy(line)));
                } else if sh.mismatches.fetch_add(1, Relaxed) == 0 {
                    eprintln!("w1z: first unexpected reply: {} (expected length {})", String::from_utf8_lossy(line), p.expect_len);
                }
            }
        }
        drop(hist);
        sh.replies.fetch_add(count, Relaxed);
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            return sh.fail("a reply line longer than 64 KB".into());
        }
    }
}

/// CLOCK_MONOTONIC in ns: what `Instant` reads on Linux, which it does not expose, and the
/// clock `perf sched record -k mono` stamps events with (`--trace-over-ms`).
fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |v, &d| d.is_ascii_digit().then(|| v * 10 + (d - b'0') as u64))
}

fn pinger(mut s: TcpStream, sh: Arc<Shared>, t0: Instant) {
    let mut next = Instant::now();
    let mut buf = [0u8; 64];
    while !sh.stop_ping.load(Relaxed) && !sh.failed() {
        let now = Instant::now();
        if now < next {
            std::thread::sleep(next - now);
        }
        let sent = Instant::now();
        sh.ping_late_us_max.fetch_max(sent.saturating_duration_since(next).as_micros() as u64, Relaxed);
        if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
            return sh.fail("PING connection: write failed".into());
        }
        let mut got = 0;
        while !buf[..got].ends_with(b"\r\n") {
            match s.read(&mut buf[got..]) {
                Ok(0) | Err(_) => return sh.fail("PING connection: read failed".into()),
                Ok(n) => got += n,
            }
            if got == buf.len() {
                return sh.fail("PING connection: reply too long".into());
            }
        }
        let took = sent.elapsed();
        sh.ping_hist.lock().unwrap().record(took.as_micros() as u64);
        if sh.trace_over_ns > 0 && took.as_nanos() as u64 > sh.trace_over_ns {
            let at = sh.t0_mono_ns + sent.saturating_duration_since(t0).as_nanos() as u64;
            eprintln!("w1z: slow PING sent at {:.6} s monotonic: {:.2} ms", at as f64 / 1e9, took.as_secs_f64() * 1e3);
        }
        next = (next + Duration::from_millis(1)).max(Instant::now());
    }
}

/// Creates every key with 16 bytes: one thread per connection, each sending the SETs of its
/// keys (index mod connections) in pipelined batches and reading the batch's replies.
fn preload(a: &Args) -> Result<(), String> {
    const BATCH: u64 = 4096;
    let threads: Vec<_> = (0..a.connections as u64)
        .map(|c| {
            let (a, conns) = (a.clone(), a.connections as u64);
            std::thread::spawn(move || -> Result<(), String> {
                let s = connect(&a)?;
                let mut r = BufReader::with_capacity(1 << 16, s.try_clone().map_err(|e| e.to_string())?);
                let mut w = s;
                let mut out = Vec::with_capacity(BATCH as usize * 64);
                let mut key = c;
                let mut line = Vec::new();
                while key < a.keys {
                    let mut n = 0;
                    while n < BATCH && key < a.keys {
                        encode(workload::Write { key, expect_len: 0 }, &mut out);
                        key += conns;
                        n += 1;
                    }
                    w.write_all(&out).map_err(|e| e.to_string())?;
                    out.clear();
                    for _ in 0..n {
                        line.clear();
                        r.read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
                        if line != b"+OK\r\n" {
                            return Err(format!("preload SET replied {}", String::from_utf8_lossy(&line).trim_end()));
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "preload thread panicked".to_string())??;
    }
    Ok(())
}

/// STRLEN of 1,000 keys drawn at random, against the lengths the generator expects.
fn check_lengths(ctl: &mut Control, wl: &mut Workload) -> Result<(u64, u64), String> {
    let mut wrong = 0;
    let n = 1000.min(wl.keys());
    for _ in 0..n {
        let k = wl.random_key();
        let mut name = Vec::new();
        key_name(k, &mut name);
        let len = ctl.int(&[b"STRLEN", &name])?;
        if len != wl.value_len(k) as i64 {
            if wrong == 0 {
                eprintln!("w1z: STRLEN {} is {len}, expected {}", String::from_utf8_lossy(&name), wl.value_len(k));
            }
            wrong += 1;
        }
    }
    Ok((n, wrong))
}

fn connect(a: &Args) -> Result<TcpStream, String> {
    let a = &a.server;
    // Plaintext or TLS (`--tls`, redis-cli's options): `abacus-tls`'s client stream, whose
    // clones share one connection as a TcpStream's do (a reader and a writer thread).
    let mut s = a.tls.options().connect(&a.host, a.port)?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    if let Some(pw) = &a.password {
        let mut cmd = Vec::new();
        resp(&[b"AUTH", pw.as_bytes()], &mut cmd);
        s.write_all(&cmd).map_err(|e| e.to_string())?;
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if !buf[..n].starts_with(b"+OK") {
            return Err(format!("AUTH: {}", String::from_utf8_lossy(&buf[..n]).trim_end()));
        }
    }
    Ok(s)
}

fn resp(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The control connection: one command at a time (DBSIZE, INFO, STRLEN).
struct Control {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Control {
    fn connect(a: &Args) -> Result<Self, String> {
        let w = connect(a)?;
        let r = BufReader::new(w.try_clone().map_err(|e| e.to_string())?);
        Ok(Control { w, r })
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<Vec<u8>, String> {
        let mut cmd = Vec::new();
        resp(args, &mut cmd);
        self.w.write_all(&cmd).map_err(|e| e.to_string())?;
        let mut line = Vec::new();
        self.r.read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        match line.first() {
            Some(b'$') => {
                let len: usize = text[1..].parse().map_err(|_| format!("bad reply {text}"))?;
                let mut body = vec![0u8; len + 2];
                self.r.read_exact(&mut body).map_err(|e| e.to_string())?;
                body.truncate(len);
                Ok(body)
            }
            Some(b'-') => Err(format!("{} replied {text}", String::from_utf8_lossy(args[0]))),
            _ => Ok(text.into_bytes()),
        }
    }

    fn int(&mut self, args: &[&[u8]]) -> Result<i64, String> {
        let r = self.call(args)?;
        let text = String::from_utf8_lossy(&r);
        text.strip_prefix(':').and_then(|t| t.parse().ok()).ok_or_else(|| format!("expected an integer, got {text}"))
    }

    fn bulk(&mut self, args: &[&[u8]]) -> Result<String, String> {
        Ok(String::from_utf8_lossy(&self.call(args)?).into_owned())
    }
}

fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(|v| v.trim().to_string()))
}

fn info_used_memory(ctl: &mut Control) -> Result<u64, String> {
    let info = ctl.bulk(&[b"INFO", b"memory"])?;
    info_field(&info, "used_memory").and_then(|v| v.parse().ok()).ok_or_else(|| "INFO memory has no used_memory".into())
}

fn rss_bytes(proc_dir: &str) -> u64 {
    let status = std::fs::read_to_string(format!("{proc_dir}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// A process's user + system CPU time, in percent-seconds (Linux's USER_HZ is 100, so one
/// tick is 1% of a core for one second); 0 when unreadable.
fn cpu_ticks(proc_dir: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("{proc_dir}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}
