//! One feed line to one event: CSV columns or JSON paths to field values, and the time.
//!
//! A line is either a whole event or a reject with a reason a user can act on: bad CSV
//! quoting, a wrong column count, invalid JSON, a missing field, a value of the wrong type
//! (an object where a scalar belongs, a non-number where a sum reads it), an unparseable or
//! out-of-range time, a line over the feed's `max_line_bytes`. Nothing of a rejected line is
//! applied, so the checks all happen here, before any summary sees the event.
//!
//! A JSON path may fan out (`$.items[*].sku`): the field then has one value per element,
//! and a summary reading it gets one update per value (see `batch.rs`); an empty array
//! gives no value and no update. A JSON `null` counts as missing.
//!
//! JSON lines go through `json.rs`'s one-pass scanner first (the values at the paths, no
//! document); where it gives up, serde_json's document (`parse_json_dom`) decides, so the
//! values and every error message are serde_json's either way.

use std::fmt;

use serde_json::Value;

use crate::rules::{Feed, Format, TimeSource};

/// A value's bounds within [`Event`]'s text.
pub(crate) type Span = (usize, usize);

/// A parsed event: the time in milliseconds and each field's values (one, or for a fanning
/// out JSON path, as many as it found).
///
/// The values are spans of one text, not a `String` each: the text starts with a copy of the
/// line, so a value written plainly in the line (an unquoted or simply quoted CSV field, a
/// JSON string without escapes, a plain integer) is just its bounds there; only a value that
/// differs from its text in the line (a CSV field with a doubled quote, an escaped JSON
/// string, a number serde_json prints otherwise) is appended after the line. Copying each
/// field into its own string was a quarter of the parse.
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub time_ms: i64,
    pub(crate) text: String,
    /// Per field, its values' spans.
    pub(crate) spans: Vec<Vec<Span>>,
    /// The time's text (JSON feeds; a CSV feed's time is a field).
    pub(crate) time: Span,
    /// Per field, its number when the checks parsed it (a numeric field with one value),
    /// so that the batch does not parse it again.
    nums: Vec<Option<f64>>,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        self.time_ms == other.time_ms && self.to_vecs() == other.to_vecs()
    }
}

impl Event {
    /// The number of fields.
    pub fn fields(&self) -> usize {
        self.spans.len()
    }

    /// The number of values of field `f`.
    #[inline]
    pub fn count(&self, f: usize) -> usize {
        self.spans[f].len()
    }

    /// Value `i` of field `f`.
    #[inline]
    pub fn value(&self, f: usize, i: usize) -> &str {
        let (a, z) = self.spans[f][i];
        &self.text[a..z]
    }

    /// The values of field `f`.
    pub fn values(&self, f: usize) -> impl Iterator<Item = &str> {
        self.spans[f].iter().map(|&(a, z)| &self.text[a..z])
    }

    /// Field `f`'s number as the checks parsed it, if they did.
    pub(crate) fn num(&self, f: usize) -> Option<f64> {
        self.nums.get(f).copied().flatten()
    }

    /// Every field's values as strings.
    pub fn to_vecs(&self) -> Vec<Vec<String>> {
        (0..self.fields()).map(|f| self.values(f).map(str::to_string).collect()).collect()
    }

    /// Starts `line`'s event: the text is the line, `nf` fields with no values.
    pub(crate) fn reset(&mut self, line: &str, nf: usize) {
        self.text.clear();
        self.text.push_str(line);
        self.spans.resize_with(nf, Vec::new);
        self.spans.iter_mut().for_each(Vec::clear);
        self.nums.clear();
        self.nums.resize(nf, None);
    }

    /// Appends `v` to the text as a value of field `f`.
    fn push_owned(&mut self, f: usize, v: &str) {
        let a = self.text.len();
        self.text.push_str(v);
        self.spans[f].push((a, self.text.len()));
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
    All,
}

/// A JSON path: `$` then `.key`, `["key"]`, `[n]` or `[*]` steps.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath(pub(crate) Vec<Step>);

/// Deepest path accepted.
pub(crate) const MAX_PATH_STEPS: usize = 32;

impl JsonPath {
    pub fn parse(s: &str) -> Result<JsonPath, String> {
        let Some(mut rest) = s.strip_prefix('$') else {
            return Err(format!("path '{s}' must start with '$'"));
        };
        let mut steps = Vec::new();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                if end == 0 {
                    return Err(format!("path '{s}': empty key after '.'"));
                }
                steps.push(Step::Key(r[..end].to_string()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let Some(end) = r.find(']') else { return Err(format!("path '{s}': missing ']'")) };
                let inner = &r[..end];
                if inner == "*" {
                    steps.push(Step::All);
                } else if let Some(q) = inner.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
                    steps.push(Step::Key(q.to_string()));
                } else if let Ok(n) = inner.parse::<usize>() {
                    steps.push(Step::Index(n));
                } else {
                    return Err(format!("path '{s}': '[{inner}]' is not [n], [*] or [\"key\"]"));
                }
                rest = &r[end + 1..];
            } else {
                return Err(format!("path '{s}': expected '.' or '[' at '{rest}'"));
            }
            if steps.len() > MAX_PATH_STEPS {
                return Err(format!("path '{s}' has more than {MAX_PATH_STEPS} steps"));
            }
        }
        if steps.is_empty() {
            return Err(format!("path '{s}' names the whole line; name a field"));
        }
        Ok(JsonPath(steps))
    }

    pub fn fans_out(&self) -> bool {
        self.0.contains(&Step::All)
    }

    /// The values the path reaches in `v`, in document order.
    fn collect<'v>(&self, v: &'v Value, out: &mut Vec<&'v Value>) {
        fn walk<'v>(steps: &[Step], v: &'v Value, out: &mut Vec<&'v Value>) {
            let Some((first, rest)) = steps.split_first() else {
                out.push(v);
                return;
            };
            match (first, v) {
                (Step::Key(k), Value::Object(m)) => {
                    if let Some(x) = m.get(k) {
                        walk(rest, x, out)
                    }
                }
                (Step::Index(i), Value::Array(a)) => {
                    if let Some(x) = a.get(*i) {
                        walk(rest, x, out)
                    }
                }
                (Step::All, Value::Array(a)) => a.iter().for_each(|x| walk(rest, x, out)),
                _ => {}
            }
        }
        walk(&self.0, v, out)
    }
}

/// Why a line was rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError(pub String);

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(msg: impl Into<String>) -> LineError {
    LineError(msg.into())
}

/// Splits one CSV line (RFC 4180: a field may be quoted, a quote inside is doubled) into
/// `out`. A quote inside an unquoted field, text after a closing quote and an unterminated
/// quoted field are errors.
pub fn split_csv(line: &str, out: &mut Vec<String>) -> Result<(), LineError> {
    // The strings already in `out` are reused (cleared and refilled): a parser that keeps
    // one `out` for every line allocates nothing per field once warmed up.
    let mut n = 0;
    let b = line.as_bytes();
    let mut i = 0;
    let mut next = |out: &mut Vec<String>| -> usize {
        if n == out.len() {
            out.push(String::new());
        } else {
            out[n].clear();
        }
        n += 1;
        n - 1
    };
    let result = loop {
        if b.get(i) == Some(&b'"') {
            let at = next(out);
            let field = &mut out[at];
            i += 1;
            // Runs between quotes are copied as slices: the line is UTF-8 and the splits fall
            // on ASCII quotes, so each run is UTF-8 too.
            let mut run = i;
            let closed = loop {
                match b.get(i) {
                    None => break false,
                    Some(b'"') if b.get(i + 1) == Some(&b'"') => {
                        field.push_str(&line[run..=i]);
                        i += 2;
                        run = i;
                    }
                    Some(b'"') => {
                        field.push_str(&line[run..i]);
                        i += 1;
                        break true;
                    }
                    Some(_) => i += 1,
                }
            };
            if !closed {
                break Err(bad("bad CSV quoting: unterminated quoted field"));
            }
            match b.get(i) {
                None => break Ok(()),
                Some(b',') => i += 1,
                Some(_) => break Err(bad("bad CSV quoting: text after a closing quote")),
            }
        } else {
            // One pass for the comma and a stray quote (fields are short: a byte loop beats
            // two `memchr` calls).
            let mut end = i;
            while end < b.len() && b[end] != b',' && b[end] != b'"' {
                end += 1;
            }
            if b.get(end) == Some(&b'"') {
                break Err(bad("bad CSV quoting: a quote inside an unquoted field"));
            }
            let field = &line[i..end];
            let at = next(out);
            out[at].push_str(field);
            if end == b.len() {
                break Ok(());
            }
            i = end + 1;
        }
    };
    out.truncate(n);
    result
}

/// [`split_csv`] without copies: each field's span in `text`, which must start with `line`
/// (a quoted field holding a doubled quote is unquoted into `text` after the line). Field
/// `n` goes to `out[n]` (cleared first) where there is one; returns the number of fields.
/// The same fields and errors as `split_csv` (a property test compares the two).
pub(crate) fn split_csv_spans(line: &str, text: &mut String, out: &mut [Vec<Span>]) -> Result<usize, LineError> {
    let b = line.as_bytes();
    let mut n = 0;
    let mut put = |span: Span| {
        if let Some(v) = out.get_mut(n) {
            v.clear();
            v.push(span);
        }
        n += 1;
    };
    let mut i = 0;
    loop {
        if b.get(i) == Some(&b'"') {
            i += 1;
            let start = i;
            // Where the unquoted copy starts in `text`, once a doubled quote needs one.
            let mut copy: Option<usize> = None;
            let mut run = i;
            loop {
                while i < b.len() && b[i] != b'"' {
                    i += 1;
                }
                if i == b.len() {
                    return Err(bad("bad CSV quoting: unterminated quoted field"));
                }
                if b.get(i + 1) != Some(&b'"') {
                    break;
                }
                copy.get_or_insert(text.len());
                // The runs split on ASCII quotes, so each is UTF-8.
                text.push_str(&line[run..=i]);
                i += 2;
                run = i;
            }
            let span = match copy {
                None => (start, i),
                Some(at) => {
                    text.push_str(&line[run..i]);
                    (at, text.len())
                }
            };
            put(span);
            i += 1;
            match b.get(i) {
                None => break,
                Some(b',') => i += 1,
                Some(_) => return Err(bad("bad CSV quoting: text after a closing quote")),
            }
        } else {
            let end = next_comma_or_quote(b, i);
            if b.get(end) == Some(&b'"') {
                return Err(bad("bad CSV quoting: a quote inside an unquoted field"));
            }
            put((i, end));
            if end == b.len() {
                break;
            }
            i = end + 1;
        }
    }
    Ok(n)
}

/// The index of the first ',' or '"' in `b` from `i` on, or `b.len()`: eight bytes at a
/// time (SWAR), as a byte loop took seven instructions a byte, a third of a v1 line's parse.
fn next_comma_or_quote(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let (c, q) = (w ^ (ONES * u64::from(b',')), w ^ (ONES * u64::from(b'"')));
        // A zero byte of `c` or `q` is a comma or quote. The lowest flagged byte is exact
        // (a borrow only flags bytes above a true zero), and only the lowest is used.
        let m = ((c.wrapping_sub(ONES) & !c) | (q.wrapping_sub(ONES) & !q)) & HIGH;
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && b[i] != b',' && b[i] != b'"' {
        i += 1;
    }
    i
}

/// The text of a JSON scalar; None for null; an error for an object or array.
fn scalar_text(v: &Value, field: &str) -> Result<Option<String>, LineError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Array(_) => Err(bad(format!("wrong type: field '{field}' is an array, not a value (fan out with [*])"))),
        Value::Object(_) => Err(bad(format!("wrong type: field '{field}' is an object, not a value"))),
    }
}

/// Times outside years 0..=9999 are refused: they are typos, and their buckets would be keys
/// nobody can query.
const MAX_TIME_MS: f64 = 253_402_300_800_000.0;

/// `s.trim()`, the usual case (no whitespace at either end) decided on two bytes: an ASCII
/// graphic byte is no whitespace, nor the start or end of a multi-byte one. `str::trim`
/// decodes and classifies chars from both ends, a tenth of a v1 line's parse.
pub(crate) fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

fn time_ms(feed: &Feed, text: &str) -> Result<i64, LineError> {
    let t = trim(text);
    if let Some(f) = &feed.time_format {
        let ms = f.parse_ms(t).ok_or_else(|| bad(format!("bad time '{}' (format '{f}')", shorten(t))))?;
        if !(0..MAX_TIME_MS as i64).contains(&ms) {
            return Err(bad(format!("time '{}' is out of range", shorten(t))));
        }
        return Ok(ms);
    }
    // Plain digits (Unix times) without `str::parse`'s sign and overflow handling: 18 digits
    // at most are below i64::MAX, as `parse` would read them.
    let plain = (t.len() <= 18).then(|| crate::batch::digits_u64(t.as_bytes())).flatten();
    let int = match plain {
        Some(n) => Ok(n as i64),
        None => t.parse::<i64>(),
    };
    let v = match int {
        Ok(n) => n as f64,
        Err(_) => t.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| bad(format!("bad time '{}'", shorten(t))))?,
    };
    let ms = feed.unit.to_ms(v);
    if !(0.0..MAX_TIME_MS).contains(&ms) {
        return Err(bad(format!("time '{}' is out of range", shorten(t))));
    }
    Ok(ms.floor() as i64)
}

fn shorten(s: &str) -> &str {
    let mut end = s.len().min(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Parses one line of `feed` (without its line end). Ok(None) for a CSV header line.
pub fn parse_line(feed: &Feed, line: &str) -> Result<Option<Event>, LineError> {
    let mut event = Event::default();
    Ok(parse_line_into(feed, line, &mut event)?.then_some(event))
}

/// [`parse_line`] into an event that is reused from line to line (its text and vectors keep
/// their capacity, so a warmed-up parser allocates nothing per line). Ok(false) for a CSV
/// header line; after an error `event` holds no meaningful values.
pub fn parse_line_into(feed: &Feed, line: &str, event: &mut Event) -> Result<bool, LineError> {
    if line.len() > feed.max_line_bytes {
        return Err(bad(format!("line longer than {} bytes", feed.max_line_bytes)));
    }
    let nf = feed.fields.len();
    if feed.format == Format::Csv && line == feed.header {
        return Ok(false);
    }
    event.reset(line, nf);
    let time = match feed.format {
        Format::Csv => {
            let n = split_csv_spans(line, &mut event.text, &mut event.spans)?;
            if n != nf {
                let what = if n < nf { "missing field" } else { "extra field" };
                return Err(bad(format!("{what}: expected {nf} columns, found {n}")));
            }
            let TimeSource::Column(tc) = feed.time else { unreachable!("a csv feed's time is a column") };
            event.spans[tc][0]
        }
        Format::Jsonl => {
            let TimeSource::Path(tp) = &feed.time else { unreachable!("a jsonl feed's time is a path") };
            if !crate::json::extract(line, &feed.paths, tp, &feed.path_keys, event) {
                // The scanner gave up: serde_json decides, and words any error.
                parse_json_dom(feed, tp, line, event)?;
            }
            event.time
        }
    };
    for i in 0..nf {
        if feed.numeric[i] {
            for (k, &(a, z)) in event.spans[i].iter().enumerate() {
                let v = &event.text[a..z];
                match trim(v).parse::<f64>() {
                    Ok(x) if x.is_finite() => {
                        if k == 0 {
                            event.nums[i] = Some(x);
                        }
                    }
                    _ => return Err(bad(format!("wrong type: field '{}' is not a number: '{}'", feed.fields[i], shorten(v)))),
                }
            }
            if event.spans[i].len() != 1 {
                event.nums[i] = None;
            }
        }
    }
    event.time_ms = time_ms(feed, &event.text[time.0..time.1])?;
    Ok(true)
}

/// A JSON line's field values and time text (into `event`, which [`Event::reset`] started)
/// through serde_json's document: the reference for `json.rs`'s scanner, and the path for
/// every line it leaves.
pub(crate) fn parse_json_dom(feed: &Feed, tp: &JsonPath, line: &str, event: &mut Event) -> Result<(), LineError> {
    let v: Value = serde_json::from_str(line).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    if !v.is_object() {
        return Err(bad("invalid JSON: a line must be an object"));
    }
    let mut found = Vec::new();
    tp.collect(&v, &mut found);
    let time = match found.first() {
        Some(t) => match scalar_text(t, "time")? {
            Some(t) => t,
            None => return Err(bad("missing field: time")),
        },
        None => return Err(bad("missing field: time")),
    };
    let a = event.text.len();
    event.text.push_str(&time);
    event.time = (a, event.text.len());
    for (f, (name, path)) in feed.fields.iter().zip(&feed.paths).enumerate() {
        found.clear();
        path.collect(&v, &mut found);
        if found.is_empty() && !path.fans_out() {
            return Err(bad(format!("missing field: {name}")));
        }
        event.spans[f].clear();
        for x in &found {
            match scalar_text(x, name)? {
                Some(s) => event.push_owned(f, &s),
                None if path.fans_out() => {}
                None => return Err(bad(format!("missing field: {name} (null)"))),
            }
        }
    }
    Ok(())
}
