//! W8's events, as bench/w8_gen.py writes them, for machines without Python (the 16-core
//! benchmark host has none; see "Benchmark hosts" in docs/PERFORMANCE.md): USERS users with 20 events each on
//! average (5 to 35), impressions, clicks and visits from 8 channels over 30 days, 3% of the
//! users converting (a purchase with an amount, after their other events), as explicit-ID
//! XADDs in RESP for `redis-cli --pipe`, and optionally the same events as CSV.
//!
//!     rustc --edition 2021 -O -o /tmp/w8_gen bench/w8_gen.rs
//!     /tmp/w8_gen USERS SEED RESP_OUT [CSV_OUT]      # prints the number of events
//!
//! Standard library only, so one `rustc` call builds it anywhere. The distributions are
//! w8_gen.py's; the random stream is not (splitmix64 here, Mersenne Twister there), so the
//! two write different events of the same shape.

use std::fs::File;
use std::io::{BufWriter, Write};

const CHANNELS: [&str; 8] = ["google", "facebook", "email", "direct", "tiktok", "bing", "affiliate", "display"];
const KINDS: [&str; 4] = ["impression", "impression", "click", "visit"];
const T0: u64 = 1_700_000_000_000;
const DAY: u64 = 86_400_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi) (the modulo bias is below 2^-40 for these ranges).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn xadd(out: &mut impl Write, key: &[u8], id: &[u8], fields: &[&[u8]]) -> std::io::Result<()> {
    write!(out, "*{}\r\n$4\r\nXADD\r\n", 3 + fields.len())?;
    for a in [key, id].iter().chain(fields.iter()) {
        write!(out, "${}\r\n", a.len())?;
        out.write_all(a)?;
        out.write_all(b"\r\n")?;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: w8_gen USERS SEED RESP_OUT [CSV_OUT]");
        std::process::exit(2);
    }
    let users: u64 = args[1].parse().expect("USERS");
    let mut rng = Rng(args[2].parse().expect("SEED"));
    let mut resp = BufWriter::with_capacity(1 << 20, File::create(&args[3])?);
    let mut csv = match args.get(4) {
        Some(p) => Some(BufWriter::with_capacity(1 << 20, File::create(p)?)),
        None => None,
    };
    if let Some(c) = csv.as_mut() {
        c.write_all(b"user,ms,seq,channel,event,amount\n")?;
    }
    let mut n = 0u64;
    for u in 0..users {
        let key = format!("user:{u}");
        let mut t = T0 + rng.range(0, DAY);
        let events = rng.range(5, 36);
        let buyer = rng.unit() < 0.03;
        for i in 0..events {
            t += rng.range(1000, 30 * DAY / 35);
            let id = format!("{t}-0");
            if buyer && i == events - 1 {
                let amount = format!("{}.{:02}", rng.range(5, 500), rng.range(0, 100));
                xadd(&mut resp, key.as_bytes(), id.as_bytes(), &[b"event", b"purchase", b"amount", amount.as_bytes()])?;
                if let Some(c) = csv.as_mut() {
                    writeln!(c, "{u},{t},0,,purchase,{amount}")?;
                }
            } else {
                let ch = CHANNELS[rng.range(0, 8) as usize];
                let kind = KINDS[rng.range(0, 4) as usize];
                xadd(&mut resp, key.as_bytes(), id.as_bytes(), &[b"source", ch.as_bytes(), b"event", kind.as_bytes()])?;
                if let Some(c) = csv.as_mut() {
                    writeln!(c, "{u},{t},0,{ch},{kind},")?;
                }
            }
            n += 1;
        }
    }
    resp.flush()?;
    if let Some(c) = csv.as_mut() {
        c.flush()?;
    }
    println!("{n}");
    Ok(())
}
