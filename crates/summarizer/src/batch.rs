//! A batch of feed lines to the writes it makes, aggregated per key.
//!
//! Ten thousand click events on one campaign and day are one hash update (`count` +10000),
//! not ten thousand: the batch folds every event into one [`KeyChange`] per summary key (one
//! map lookup per event and summary, the key built in a reused buffer and copied only when
//! new), with a slot per metric: the hash's accumulators (count and sum add, min and max keep
//! the extreme, last sets), the HLL hashes of `hll(...)` metrics (postgresql-hll's
//! `hll_hash_bigint` when the value is a 64-bit integer, else `hll_hash_text`/`hll_hash_bytea`
//! of its bytes, seed 0), the members of `distinct(...)` metrics (in one buffer). The server
//! applies the changes on the shards directly (`cmd/summary.rs`); what each change means as
//! ordinary commands ([`KeyChange::commands`]: `SUMMARY.UPDATE key field op value ...`,
//! `HLL.ADDRAW key hash...` and `SADD key member...` on `key:metric`, `PEXPIREAT key ms` for a
//! summary with a `ttl`: the end of the bucket plus the ttl, or for `bucket = "none"` the
//! batch's latest event time plus the ttl) is what the log records and what the server runs
//! where it cannot apply a change directly. Commands are absolute and deterministic, so the
//! log replays them to the same state.
//!
//! Streams: a summary with a `stream` rule also yields, per update in event order, a
//! [`StreamAppend`] (the key its template names, the event time, the chosen fields' values);
//! the server appends it with an ID taken from the event time (see `cmd/summary.rs`).
//!
//! Fan-out: a summary reading a field that a `[*]` path filled gets one update per value
//! (per combination of values if it reads several such fields, at most
//! [`MAX_COMBINATIONS`] per event).

use std::cell::Cell;

use abacus_int::Number;

/// Batch maps are keyed by summary keys the server built itself: a fast non-keyed hash.
/// hashbrown's rather than std's for `entry_ref`: a key is hashed and probed once, and
/// copied only when new (std's map needs a second lookup to insert a borrowed key).
type Map<V> = hashbrown::HashMap<String, V, foldhash::fast::FixedState>;

use crate::event::{parse_line_into, Event};
use crate::keys::summary_key_into;
use crate::rules::{MetricKind, Rules, Summary};

/// Most updates one event may make to one summary through fan-out.
pub const MAX_COMBINATIONS: usize = 4096;
/// Most keys a batch's map is sized for up front (it still grows past them).
const MAX_RESERVED_KEYS: usize = 1 << 20;
/// Longest part of a rejected line kept for SUMMARY.REJECTS.
pub const REJECT_LINE_BYTES: usize = 256;

/// A hash field's accumulated change. Sums, minima and maxima are [`Number`]s: exact
/// decimals for decimal inputs (a sum keeps the most decimals seen), doubles only for values
/// that need them (see `abacus_int::Number`).
#[derive(Debug, Clone, PartialEq)]
pub enum Acc {
    Count(i64),
    Sum(Number),
    Min(Number),
    Max(Number),
    Last(String),
}

/// A rejected line: its number within the batch (1-based, after `first_line`), the reason
/// and the line's beginning.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    pub line_no: u64,
    pub reason: String,
    pub line: String,
}

/// A summary key's accumulated change: one slot per metric of its summary (in metric order).
/// The hash metrics' slots fold into the hash `key`; each `hll`/`distinct` slot is the key
/// `key:metric`.
pub struct KeyChange {
    pub summary: usize,
    pub slots: Vec<Slot>,
    /// The absolute expiry (ms) a `ttl` sets, 0 for none.
    pub expire_ms: i64,
}

/// One metric's accumulated change within a [`KeyChange`].
pub enum Slot {
    Hash(Option<Acc>),
    /// Hashes to add, as postgresql-hll computes them.
    Hll(Vec<i64>),
    /// Members to add.
    Set(Members),
}

/// Members of a distinct metric in one buffer (no allocation per member).
#[derive(Default)]
pub struct Members {
    buf: Vec<u8>,
    ends: Vec<u32>,
}

impl Members {
    pub fn push(&mut self, m: &[u8]) {
        self.buf.extend_from_slice(m);
        self.ends.push(self.buf.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + Clone {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&e| e as usize));
        starts.zip(self.ends.iter().map(|&e| e as usize)).map(|(a, b)| &self.buf[a..b])
    }
}

/// What part of a group one key is: the hash, or the key of metric `i` (`key:name`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Part {
    Hash,
    Metric(usize),
}

impl KeyChange {
    fn new(s: &Summary, si: usize) -> KeyChange {
        let slots = s
            .metrics
            .iter()
            .map(|m| match m.kind {
                MetricKind::Hll(_) => Slot::Hll(Vec::new()),
                MetricKind::Distinct(_) => Slot::Set(Members::default()),
                _ => Slot::Hash(None),
            })
            .collect();
        KeyChange { summary: si, slots, expire_ms: 0 }
    }

    /// The keys this group writes: the hash if its summary has hash metrics, and every HLL or
    /// distinct metric that received values.
    pub fn parts(&self) -> impl Iterator<Item = Part> + '_ {
        let hash = self.slots.iter().any(|s| matches!(s, Slot::Hash(_))).then_some(Part::Hash);
        hash.into_iter().chain(self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Hll(v) if !v.is_empty() => Some(Part::Metric(i)),
            Slot::Set(m) if !m.is_empty() => Some(Part::Metric(i)),
            _ => None,
        }))
    }

    /// The key of `part`, written into `out` (cleared first).
    pub fn part_key(rules: &Rules, key: &str, g: &KeyChange, part: Part, out: &mut String) {
        out.clear();
        out.push_str(key);
        if let Part::Metric(i) = part {
            out.push(':');
            out.push_str(&rules.summaries[g.summary].metrics[i].name);
        }
    }

    /// `part` as commands (name first, each naming `part_key` in argument 1), appended to
    /// `out`: SUMMARY.UPDATE, HLL.ADDRAW or SADD (split so that none has more than
    /// `max_args` arguments), then PEXPIREAT if the summary has a ttl.
    pub fn commands(&self, rules: &Rules, part_key: &str, part: Part, max_args: usize, out: &mut Vec<Packed>) {
        // Integers are printed with itoa: `write!` through `core::fmt` was 8% of an ingest.
        let max_args = max_args.max(8);
        let s = &rules.summaries[self.summary];
        let key = part_key;
        match part {
            Part::Hash => {
                let mut c = Packed::new(b"SUMMARY.UPDATE", key, 24 * self.slots.len());
                for (m, slot) in s.metrics.iter().zip(&self.slots) {
                    let Slot::Hash(Some(acc)) = slot else { continue };
                    c.push(m.name.as_bytes());
                    c.push(acc.op());
                    acc.write_value(&mut c.buf);
                    c.end();
                }
                if c.ends.len() > 2 {
                    out.push(c);
                }
            }
            Part::Metric(i) => match &self.slots[i] {
                Slot::Hll(hashes) => {
                    let mut digits = itoa::Buffer::new();
                    for chunk in hashes.chunks(max_args - 2) {
                        let mut c = Packed::new(b"HLL.ADDRAW", key, 20 * chunk.len());
                        for h in chunk {
                            c.buf.extend_from_slice(digits.format(*h).as_bytes());
                            c.end();
                        }
                        out.push(c);
                    }
                }
                Slot::Set(members) => {
                    let all: Vec<&[u8]> = members.iter().collect();
                    for chunk in all.chunks(max_args - 2) {
                        let mut c = Packed::new(b"SADD", key, chunk.iter().map(|m| m.len()).sum());
                        for m in chunk {
                            c.push(m);
                        }
                        out.push(c);
                    }
                }
                Slot::Hash(_) => {}
            },
        }
        out.extend(self.expire_command(key));
    }

    /// `PEXPIREAT key ms` when the summary has a ttl.
    pub fn expire_command(&self, key: &str) -> Option<Packed> {
        (self.expire_ms > 0).then(|| {
            let mut c = Packed::new(b"PEXPIREAT", key, 16);
            c.buf.extend_from_slice(itoa::Buffer::new().format(self.expire_ms).as_bytes());
            c.end();
            c
        })
    }
}

impl Acc {
    /// SUMMARY.UPDATE's operation for this change.
    pub fn op(&self) -> &'static [u8] {
        match self {
            Acc::Count(_) => b"INCRBY",
            Acc::Sum(_) => b"INCRBYDECIMAL",
            Acc::Min(_) => b"MIN",
            Acc::Max(_) => b"MAX",
            Acc::Last(_) => b"SET",
        }
    }

    /// Appends the operation's argument to `buf`: the integer, the number as [`write_number`]
    /// writes it, or the text.
    pub fn write_value(&self, buf: &mut Vec<u8>) {
        match self {
            Acc::Count(n) => buf.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
            Acc::Sum(x) | Acc::Min(x) | Acc::Max(x) => write_number(*x, buf),
            Acc::Last(t) => buf.extend_from_slice(t.as_bytes()),
        }
    }
}

/// SUMMARY.UPDATE's INCRBYDECIMAL on one field: the stored text `old` (none: 0) plus `by`,
/// written to `out`; false when `old` is not a number or the sum is not finite. One
/// definition for the command and the ingest's direct apply, so both store the same text.
pub fn incr_number(old: Option<&[u8]>, by: Number, out: &mut Vec<u8>) -> bool {
    let cur = match old {
        None => Number::ZERO,
        Some(v) => match Number::parse(v) {
            Some(c) => c,
            None => return false,
        },
    };
    match cur.add(by) {
        Some(n) => {
            write_number(n, out);
            true
        }
        None => false,
    }
}

/// SUMMARY.UPDATE's MIN/MAX on one field: whether the stored text `old` stays (it is at or
/// past `x`); None when `old` is not a number.
pub fn keeps_extreme(old: &[u8], x: Number, min: bool) -> Option<bool> {
    let c = Number::parse(old)?;
    let o = c.cmp_value(x);
    Some(if min { o.is_le() } else { o.is_ge() })
}

/// A [`Number`] appended to `buf`: a decimal with its scale, a double as [`write_f64`]
/// writes it (plain notation; "inf" for an overflowed sum, which SUMMARY.UPDATE refuses).
pub fn write_number(x: Number, buf: &mut Vec<u8>) {
    match x {
        Number::Dec(d) => d.write_to(buf),
        Number::Float(f) => write_f64(f, buf),
    }
}

/// [`fmt_f64`] appended to `buf`, without a `String`.
///
/// The text is `std`'s `Display` of the double (shortest digits that read back the same,
/// never an exponent), which the summaries' stored sums and the log have always used, with
/// -0 written "0". `core::fmt` took 4% of a v1 ingest; `zmij` (Schubfach: the same shortest,
/// closest digits) writes the usual values several times faster. It writes an exponent
/// outside 1e-5..1e16 and "1.0" for an integral value; the first case falls back to
/// `Display`, the second drops the ".0". The two may also pick a different last digit where
/// the double lies exactly halfway between two shortest candidates (1394865425023536.25:
/// zmij ".2", `Display` ".3"), which takes 16 digits or more: those fall back too, so the
/// text stays `Display`'s. A test compares the two over random doubles.
pub fn write_f64(x: f64, buf: &mut Vec<u8>) {
    if x == 0.0 {
        // 0 and -0 alike.
        buf.push(b'0');
        return;
    }
    let mut b = zmij::Buffer::new();
    let text = b.format(x);
    let bytes = text.as_bytes();
    let leading = bytes.iter().take_while(|&&c| matches!(c, b'-' | b'0' | b'.')).count();
    let digits = bytes[leading..].iter().filter(|c| c.is_ascii_digit()).count();
    if digits >= 16 || bytes.contains(&b'e') {
        use std::io::Write;
        let _ = write!(buf, "{x}");
        return;
    }
    buf.extend_from_slice(text.strip_suffix(".0").unwrap_or(text).as_bytes());
}

/// One entry a stream rule appends: to `key`, at the event's time, `fields` (the rule's field
/// names, see [`crate::StreamRule`]) with these values.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamAppend {
    pub summary: usize,
    pub key: String,
    pub time_ms: i64,
    pub values: Vec<String>,
}

/// The aggregated writes of a batch of lines of one feed.
pub struct Batch {
    feed: usize,
    groups: Map<KeyChange>,
    /// Stream entries, in event order.
    pub streams: Vec<StreamAppend>,
    pub events: u64,
    pub rejects: Vec<Reject>,
    pub rejected: u64,
    /// Updates (events after filter and fan-out) per summary, indexed like `Rules::summaries`.
    pub updates: Vec<u64>,
    /// Bytes of lines read.
    pub bytes: u64,
    /// The event each line is parsed into, reused (see `parse_line_into`).
    event: Event,
    key_buf: String,
    /// The current event's fields as numbers, parsed on first use (None: not yet), shared
    /// by its summaries' filters and sums (single-valued events only).
    nums: Vec<Cell<Option<Option<f64>>>>,
}

fn hll_hash(v: &str) -> i64 {
    match canonical_i64(v.as_bytes()) {
        // Only the canonical form: "007" is text to postgresql-hll's callers too.
        Some(n) => abacus_hll::hash_bigint(n, 0),
        None => abacus_hll::hash_bytes(v.as_bytes(), 0),
    }
}

/// `v` as an i64 when it is written the way the integer prints (no `+`, no leading zeros,
/// no `-0`); None otherwise. One pass: `str::parse` and a second look at the digits were
/// 40% of the HLL metrics' cost.
pub(crate) fn canonical_i64(v: &[u8]) -> Option<i64> {
    let (neg, digits) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    match digits {
        [b'0'] if !neg => return Some(0),
        [] | [b'0', ..] | [_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, ..] => return None,
        _ => {}
    }
    let n = digits_u64(digits)?;
    if neg {
        0i64.checked_sub_unsigned(n)
    } else {
        i64::try_from(n).ok()
    }
}

/// `digits` (1 to 19 ASCII digits, leading zeros allowed) as their value; None for anything
/// else.
pub(crate) fn digits_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    // At most 19 digits: no overflow in a u64.
    let mut n: u64 = 0;
    let mut chunks = digits.chunks_exact(8);
    for chunk in &mut chunks {
        n = n * 100_000_000 + eight_digits(chunk.try_into().expect("eight bytes"))?;
    }
    for &c in chunks.remainder() {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    Some(n)
}

/// Eight ASCII digits (the first the most significant) as their value; None if a byte is
/// not a digit. SWAR: a user ID's 19 digits one at a time were most of an HLL hash's cost.
fn eight_digits(chunk: [u8; 8]) -> Option<u64> {
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    let w = u64::from_le_bytes(chunk);
    // Every byte in 0x30..=0x3F, then its value minus 0x30 (no borrow) at most 9.
    let d = w.wrapping_sub(ZEROS);
    if w & HIGH_NIBBLES != ZEROS || d.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES != 0 {
        return None;
    }
    // Pairs, then quads, then the eight digits (little-endian: byte 0 is the first digit).
    let d = (d * 10 + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    let d = (d * 100 + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((d * 10_000 + (d >> 32)) & 0xFFFF_FFFF)
}

/// A field's text trimmed and parsed as a number (what filters compare and sums add).
fn parse_num(v: &str) -> Option<f64> {
    crate::event::trim(v).parse::<f64>().ok()
}

/// The number in a field's text: an exact decimal where it is one, else the double `x`
/// (`parse_line` checked every field a sum, min or max reads; 0 otherwise).
pub(crate) fn field_number(v: &str, x: impl FnOnce() -> Option<f64>) -> Number {
    match Number::parse(crate::event::trim(v).as_bytes()) {
        Some(n) => n,
        None => Number::Float(x().unwrap_or(0.0)),
    }
}

/// The sum of two numbers; an overflow past the doubles is infinity, which SUMMARY.UPDATE
/// refuses as it refused an infinite double sum.
pub(crate) fn add_numbers(a: Number, b: Number) -> Number {
    a.add(b).unwrap_or(Number::Float(f64::INFINITY))
}

/// Folds one value into a hash metric's accumulator: `v` the field's text, `x` its number
/// as a double (see [`field_number`]).
fn fold(acc: &mut Option<Acc>, kind: MetricKind, v: Option<&str>, x: impl FnOnce() -> Option<f64>) {
    let num = || field_number(v.unwrap_or(""), x);
    match (kind, acc.as_mut(), v) {
        (MetricKind::Count, Some(Acc::Count(n)), _) => *n += 1,
        (MetricKind::Count, None, _) => *acc = Some(Acc::Count(1)),
        (MetricKind::Sum(_), Some(Acc::Sum(s)), Some(_)) => *s = add_numbers(*s, num()),
        (MetricKind::Sum(_), None, Some(_)) => *acc = Some(Acc::Sum(num())),
        (MetricKind::Min(_), Some(Acc::Min(m)), Some(_)) => {
            let x = num();
            if x.cmp_value(*m).is_lt() {
                *m = x;
            }
        }
        (MetricKind::Min(_), None, Some(_)) => *acc = Some(Acc::Min(num())),
        (MetricKind::Max(_), Some(Acc::Max(m)), Some(_)) => {
            let x = num();
            if x.cmp_value(*m).is_gt() {
                *m = x;
            }
        }
        (MetricKind::Max(_), None, Some(_)) => *acc = Some(Acc::Max(num())),
        (MetricKind::Last(_), Some(Acc::Last(t)), Some(v)) => {
            t.clear();
            t.push_str(v);
        }
        (MetricKind::Last(_), _, Some(v)) => *acc = Some(Acc::Last(v.to_string())),
        _ => {}
    }
}

/// `payload` split at each '\n', as `split` does (a piece after a final '\n' included), with
/// memchr: lines are found a word at a time, not tested byte by byte.
pub(crate) fn lines(payload: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(payload);
    std::iter::from_fn(move || {
        let r = rest?;
        match memchr::memchr(b'\n', r) {
            Some(k) => {
                rest = Some(&r[k + 1..]);
                Some(&r[..k])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

impl Batch {
    pub fn new(rules: &Rules, feed: usize) -> Batch {
        Batch {
            feed,
            groups: Map::default(),
            streams: Vec::new(),
            events: 0,
            rejects: Vec::new(),
            rejected: 0,
            updates: vec![0; rules.summaries.len()],
            bytes: 0,
            event: Event::default(),
            key_buf: String::new(),
            nums: vec![Cell::new(None); rules.feeds[feed].fields.len()],
        }
    }

    /// Sizes the key map once for `lines` lines of this feed, as [`Batch::add_payload`] does
    /// for its payload: a caller that feeds one payload in slices calls this first with the
    /// whole payload's line count, so the map is not grown and rehashed slice by slice.
    pub fn reserve_lines(&mut self, rules: &Rules, lines: usize) {
        let per_line = rules.feeds[self.feed].summaries.len().max(1);
        self.groups.reserve((lines.saturating_mul(per_line) / 2).min(MAX_RESERVED_KEYS));
    }

    /// Parses every line of `payload` (lines end with `\n`, an optional `\r` before it is
    /// dropped, empty lines are skipped) and folds the events in. Line numbers continue from
    /// `first_line` (the number of the payload's first line). Keeps at most `keep_rejects`
    /// rejected lines (all are counted). Returns the number of the next line.
    pub fn add_payload(&mut self, rules: &Rules, payload: &[u8], first_line: u64, keep_rejects: usize) -> u64 {
        let mut line_no = first_line;
        if self.groups.is_empty() {
            // Sized once for the payload's keys (about one per line and summary when most
            // keys are new, as in the W5 data), not grown and rehashed step by step.
            let lines = memchr::memchr_iter(b'\n', payload).count() + 1;
            self.reserve_lines(rules, lines);
        }
        self.bytes += payload.len() as u64;
        let mut event = std::mem::take(&mut self.event);
        let whole_utf8 = std::str::from_utf8(payload).ok();
        for raw in lines(payload) {
            let n = line_no;
            line_no += 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.is_empty() {
                continue;
            }
            // A whole payload of UTF-8 (the usual case) is checked once; its lines, cut at
            // an ASCII '\n', are UTF-8 too.
            let at = raw.as_ptr() as usize - payload.as_ptr() as usize;
            let text = match whole_utf8.and_then(|w| w.get(at..at + raw.len())) {
                Some(line) => Ok(line),
                None => std::str::from_utf8(raw),
            };
            let parsed = match text {
                Ok(line) => parse_line_into(&rules.feeds[self.feed], line, &mut event).map_err(|e| e.0),
                Err(_) => Err("not UTF-8".to_string()),
            };
            match parsed {
                Ok(true) => self.add_event(rules, &event),
                Ok(false) => {}
                Err(reason) => {
                    self.rejected += 1;
                    if self.rejects.len() < keep_rejects {
                        let mut end = raw.len().min(REJECT_LINE_BYTES);
                        let text = String::from_utf8_lossy(&raw[..end]).into_owned();
                        end = text.len();
                        self.rejects.push(Reject { line_no: n, reason, line: text[..end].to_string() });
                    }
                }
            }
        }
        self.event = event;
        // The split above yields one piece after a final '\n': it was not a line.
        if payload.last() == Some(&b'\n') {
            line_no -= 1;
        }
        line_no
    }

    /// Folds one event into every summary of its feed.
    pub fn add_event(&mut self, rules: &Rules, event: &Event) {
        self.events += 1;
        // Every field with exactly one value (any CSV line, most JSON ones): no summary needs
        // the fan-out's list of fields, which cost 2.5% of a v1 ingest to build per summary.
        let single = (0..event.fields()).all(|f| event.count(f) == 1);
        let nums = std::mem::take(&mut self.nums);
        // Seeded with the numbers the line's checks parsed (sums' fields): not parsed twice.
        nums.iter().enumerate().for_each(|(f, c)| c.set(event.num(f).map(Some)));
        for &si in &rules.feeds[self.feed].summaries {
            let s = &rules.summaries[si];
            if single {
                let pick = |f: usize| event.value(f, 0);
                let num = |f: usize| match nums.get(f).and_then(Cell::get) {
                    Some(x) => x,
                    None => {
                        let x = parse_num(pick(f));
                        if let Some(c) = nums.get(f) {
                            c.set(Some(x));
                        }
                        x
                    }
                };
                self.add_one(s, si, event.time_ms, &pick, &num);
                continue;
            }
            // Fields the summary reads that do not hold exactly one value (fan-out).
            let multi: Vec<usize> = s.uses.iter().copied().filter(|&f| event.count(f) != 1).collect();
            if multi.is_empty() {
                let pick = |f: usize| event.value(f, 0);
                self.add_one(s, si, event.time_ms, &pick, &|f| parse_num(pick(f)));
                continue;
            }
            if multi.iter().any(|&f| event.count(f) == 0) {
                continue;
            }
            let mut idx = vec![0usize; multi.len()];
            let mut done = 0;
            loop {
                let pick = |f: usize| match multi.iter().position(|&m| m == f) {
                    Some(p) => event.value(f, idx[p]),
                    None => event.value(f, 0),
                };
                self.add_one(s, si, event.time_ms, &pick, &|f| parse_num(pick(f)));
                done += 1;
                if done >= MAX_COMBINATIONS {
                    break;
                }
                // Next combination, odometer style.
                let mut p = 0;
                loop {
                    if p == multi.len() {
                        break;
                    }
                    idx[p] += 1;
                    if idx[p] < event.count(multi[p]) {
                        break;
                    }
                    idx[p] = 0;
                    p += 1;
                }
                if p == multi.len() {
                    break;
                }
            }
        }
        self.nums = nums;
    }

    fn add_one<'v>(&mut self, s: &Summary, si: usize, time_ms: i64, value: &impl Fn(usize) -> &'v str, num: &impl Fn(usize) -> Option<f64>) {
        if let Some(f) = &s.filter {
            if !f.eval_with(value, num) {
                return;
            }
        }
        self.updates[si] += 1;
        if let Some(st) = &s.stream {
            let mut key = String::new();
            for part in &st.key {
                match part {
                    crate::rules::TemplatePart::Text(t) => key.push_str(t),
                    crate::rules::TemplatePart::Field(f) => key.push_str(value(*f)),
                }
            }
            let values = st.fields.iter().map(|&f| value(f).to_string()).collect();
            self.streams.push(StreamAppend { summary: si, key, time_ms, values });
        }
        let bucket = s.bucket.start(time_ms);
        let expire_ms = match (s.ttl_ms, bucket) {
            (None, _) => 0,
            (Some(ttl), Some(b)) => (b + s.bucket.seconds()) * 1000 + ttl,
            (Some(ttl), None) => time_ms + ttl,
        };
        // The key is built in a reused buffer and copied only when new to the batch: one
        // map lookup per (event, summary), whatever the number of metrics.
        let mut key = std::mem::take(&mut self.key_buf);
        summary_key_into(&mut key, s, s.dims.iter().map(|&d| value(d)), bucket);
        let g = self.groups.entry_ref(key.as_str()).or_insert_with(|| KeyChange::new(s, si));
        g.expire_ms = g.expire_ms.max(expire_ms);
        for (m, slot) in s.metrics.iter().zip(g.slots.iter_mut()) {
            match (slot, m.kind) {
                (Slot::Hll(v), MetricKind::Hll(f)) => v.push(hll_hash(value(f))),
                (Slot::Set(members), MetricKind::Distinct(f)) => members.push(value(f).as_bytes()),
                (Slot::Hash(acc), kind) => fold(acc, kind, kind.field().map(value), || kind.field().and_then(num)),
                _ => {}
            }
        }
        self.key_buf = key;
    }

    /// Whether the batch writes nothing.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.streams.is_empty()
    }

    /// Takes the batch's groups: each summary key (the hash's name) and its change.
    pub fn take_groups(&mut self) -> Vec<(String, KeyChange)> {
        self.groups.drain().collect()
    }

    /// The batch's writes as commands (name first). Each command names one key, in
    /// argument 1; `max_args` bounds the arguments of one command (a longer list of hashes
    /// or members is split).
    pub fn commands(&self, rules: &Rules, max_args: usize) -> Vec<Vec<Vec<u8>>> {
        self.packed_commands(rules, max_args).iter().map(|c| c.args().map(<[u8]>::to_vec).collect()).collect()
    }

    /// [`Batch::commands`], each command's arguments packed in one buffer.
    pub fn packed_commands(&self, rules: &Rules, max_args: usize) -> Vec<Packed> {
        let mut out = Vec::with_capacity(self.groups.len());
        let mut part_key = String::new();
        for (key, g) in &self.groups {
            for part in g.parts() {
                KeyChange::part_key(rules, key, g, part, &mut part_key);
                g.commands(rules, &part_key, part, max_args, &mut out);
            }
        }
        out
    }
}

/// A command's arguments in one buffer: argument i is `buf[ends[i - 1]..ends[i]]`.
pub struct Packed {
    pub buf: Vec<u8>,
    pub ends: Vec<usize>,
}

impl Packed {
    fn new(name: &[u8], key: &str, more: usize) -> Packed {
        let mut c = Packed { buf: Vec::with_capacity(name.len() + key.len() + more), ends: Vec::with_capacity(8) };
        c.push(name);
        c.push(key.as_bytes());
        c
    }

    /// Appends a whole argument.
    fn push(&mut self, a: &[u8]) {
        self.buf.extend_from_slice(a);
        self.end();
    }

    /// Ends the argument written into `buf` since the last end.
    fn end(&mut self) {
        self.ends.push(self.buf.len());
    }

    /// The arguments, name first.
    pub fn args(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(a, b)| &self.buf[a..b])
    }
}

/// A double as the shortest text that reads back as the same value (Rust's `Display`), which
/// every float parser on the way back accepts.
pub fn fmt_f64(x: f64) -> String {
    let mut b = Vec::with_capacity(24);
    write_f64(x, &mut b);
    String::from_utf8(b).unwrap_or_default()
}

