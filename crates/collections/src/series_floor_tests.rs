//! The floor of a waterfall's per-series inner loop (issue 24, W7), measured on this machine
//! before building it into the server: `cargo test --release -p abacus-collections
//! series_floor -- --ignored --nocapture` (INSTRUMENTS, default 5000: x 40 fields x 5
//! sources, 16 daily samples each, every source covering part of the days).
//!
//! Why a test and not a criterion bench: it needs a million real `Series` (Gorilla chunks)
//! built once, then a few timed passes of three layouts of the same loop: (a) series reached
//! by name through a hash map (what the keyspace lookup costs), (b) series reached by index id
//! in a Vec (a side array addressed by id), (c) only a per-series time index held in the
//! side array (first timestamp and value of each day's sample, no body read). Each pass looks
//! up one day, groups by (instrument id, field id), picks the first source by rank and
//! encodes the reply into one buffer; the three must produce the same bytes.

use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

use crate::series::{DuplicatePolicy, Series};

const FIELDS: usize = 40;
const SOURCES: usize = 5;
const DAYS: u64 = 16;
const DAY_MS: u64 = 86_400_000;

fn put_len(out: &mut Vec<u8>, p: u8, n: usize) {
    out.push(p);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn put_bulk(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Encodes one group's chosen point (if any) as the waterfall reply does.
fn encode(out: &mut Vec<u8>, name: &[u8], labels: [(&[u8], &[u8]); 2], pt: Option<(u64, f64)>) {
    put_len(out, b'*', 3);
    put_bulk(out, name);
    put_len(out, b'*', 2);
    for (l, v) in labels {
        put_len(out, b'*', 2);
        put_bulk(out, l);
        put_bulk(out, v);
    }
    put_len(out, b'*', pt.is_some() as usize);
    if let Some((t, v)) = pt {
        put_len(out, b'*', 2);
        out.push(b':');
        out.extend_from_slice(itoa::Buffer::new().format(t).as_bytes());
        out.extend_from_slice(b"\r\n+");
        let _ = write!(out, "{v}");
        out.extend_from_slice(b"\r\n");
    }
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture in release"]
fn series_floor() {
    let instruments: usize = std::env::var("INSTRUMENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(5000);
    let n = instruments * FIELDS * SOURCES;
    let t0 = Instant::now();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut bodies: Vec<Series> = Vec::with_capacity(n);
    let mut by_name: HashMap<Box<[u8]>, Box<Series>, foldhash::fast::FixedState> = HashMap::default();
    let mut keys: Vec<Box<[u8]>> = Vec::with_capacity(n);
    // Per id: group (instrument * FIELDS + field) and rank; the side time index: per id, day
    // slot -> (ts, value) of that day, NaN-free by construction.
    let mut group = Vec::with_capacity(n);
    let mut rank = Vec::with_capacity(n);
    let mut day_index: Vec<[(u64, f64); DAYS as usize]> = Vec::with_capacity(n);
    let mut has: Vec<u16> = Vec::with_capacity(n);
    for i in 0..instruments {
        for f in 0..FIELDS {
            let mut px = 100.0;
            for s in 0..SOURCES {
                let mut se = Series::new();
                let mut di = [(0u64, 0f64); DAYS as usize];
                let mut mask = 0u16;
                for d in 0..DAYS {
                    px += ((next() % 200) as f64 - 100.0) / 10_000.0;
                    if next() % 100 < 50 + 9 * s as u64 {
                        let v = (px * 10_000.0).round() / 10_000.0;
                        se.add(d * DAY_MS, v, DuplicatePolicy::Last).unwrap();
                        di[d as usize] = (d * DAY_MS, v);
                        mask |= 1 << d;
                    }
                }
                let key = format!("px:I{i:05}:F{f:02}:S{s}").into_bytes().into_boxed_slice();
                by_name.insert(key.clone(), Box::new(se.clone()));
                keys.push(key);
                bodies.push(se);
                group.push((i * FIELDS + f) as u32);
                rank.push(s as u32);
                day_index.push(di);
                has.push(mask);
            }
        }
    }
    let names: Vec<Vec<u8>> = (0..instruments * FIELDS).map(|g| format!("field=F{:02},instrument=I{:05}", g % FIELDS, g / FIELDS).into_bytes()).collect();
    let ivals: Vec<Vec<u8>> = (0..instruments).map(|i| format!("I{i:05}").into_bytes()).collect();
    let fvals: Vec<Vec<u8>> = (0..FIELDS).map(|f| format!("F{f:02}").into_bytes()).collect();
    eprintln!("built {n} series in {:?}", t0.elapsed());
    let day = 7 * DAY_MS;
    let ngroups = instruments * FIELDS;
    // The candidate ids in id order (as the index returns them), visited in that order; the
    // group slot array (by group id) keeps the best (rank, point) seen.
    let run = |label: &str, pick: &dyn Fn(usize) -> Option<(u64, f64)>| {
        let mut best: Vec<(u32, u64, f64)> = vec![(u32::MAX, 0, 0.0); ngroups];
        let t = Instant::now();
        for id in 0..n {
            if let Some((ts, v)) = pick(id) {
                let g = &mut best[group[id] as usize];
                if rank[id] < g.0 {
                    *g = (rank[id], ts, v);
                }
            }
        }
        let gather = t.elapsed();
        let mut out = Vec::with_capacity(ngroups * 120);
        put_len(&mut out, b'*', ngroups);
        for (g, b) in best.iter().enumerate() {
            let pt = (b.0 != u32::MAX).then_some((b.1, b.2));
            encode(&mut out, &names[g], [(b"field", &fvals[g % FIELDS]), (b"instrument", &ivals[g / FIELDS])], pt);
        }
        let all = t.elapsed();
        eprintln!(
            "{label}: gather {:.1} ns/series, with encode {:.1} ns/series ({} ms for {n} series, {} reply bytes)",
            gather.as_nanos() as f64 / n as f64,
            all.as_nanos() as f64 / n as f64,
            all.as_millis(),
            out.len()
        );
        out
    };
    for _ in 0..2 {
        let a = run("(a) by name through a hash map", &|id| by_name[&keys[id]].range(day, day).next());
        let b = run("(b) by id in a Vec of bodies", &|id| bodies[id].range(day, day).next());
        let c = run("(c) side time index by id", &|id| (has[id] & (1 << 7) != 0).then(|| day_index[id][7]));
        assert!(a == b && b == c);
    }
}
