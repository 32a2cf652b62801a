//! The values of a JSON feed's paths pulled out of a line in one pass, without a document.
//!
//! Why: building serde_json's `Value` for every line (a map per object, a `String` per key
//! and per string, then dropping it all) was half of the instructions of a v2 ingest, for
//! the five or six values a feed reads. This scanner walks the line's bytes once, validates
//! them as JSON and records only the values at the feed's paths, as spans of the event's
//! copy of the line (a value serde_json would print differently, an escaped string or a
//! normalized number, is appended to that text).
//!
//! It is a fast path, never a second definition of the format: it accepts a line only when
//! serde_json certainly accepts it too and yields the same values, and gives up (returns
//! false) on everything else: invalid JSON, a key with an escape on a tracked object, a key
//! on a path seen twice in one object (serde_json keeps the last one), a null, object or
//! array where a path ends, a missing field, more than [`MAX_DEPTH`] levels, more than 63
//! paths. The caller then parses the line with serde_json as before, which produces the
//! values or the exact error message. Scalars come out as serde_json prints them: strings
//! as written when they hold no escape (else unescaped by serde_json), integers of up to 19
//! digits without a sign as written (serde_json's `u64`), any other number through
//! `serde_json::Number` (parse and print), `true` / `false`. Numbers serde_json may refuse
//! (an exponent, more than 300 characters: out of range) are checked by it even when no path
//! reads them. Tested against the serde_json path line by line (`tests.rs`).

use crate::event::{Event, JsonPath, Span, Step};

/// Deeper lines go to serde_json (whose own limit is 128).
const MAX_DEPTH: usize = 100;
/// Paths tracked in a `u64` mask, the time's included.
const MAX_PATHS: usize = 63;

struct Scan<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    fields: &'a [JsonPath],
    time: &'a JsonPath,
    /// [`path_keys`] of these paths.
    keys: &'a [Vec<(String, u64)>],
    /// Values found per path (index `fields.len()` is the time).
    n: [u32; MAX_PATHS + 1],
    /// The paths of `depth` steps (whose value is at that depth), per depth.
    ends: [u64; crate::event::MAX_PATH_STEPS + 1],
    /// Per path, the spans of its values in `text` (which starts with the line, so a value
    /// written plainly is its place in the line; others are appended).
    spans: &'a mut [Vec<Span>],
    text: &'a mut String,
    time_out: &'a mut Span,
}

/// The keys the paths take at each depth, each with the paths that take it (bit p for
/// `fields[p]`, bit `fields.len()` for `time`). Compiled with the rules (`Feed::path_keys`),
/// so the scanner matches an object's key with one look through the few keys of its depth,
/// not a loop over every path.
pub(crate) fn path_keys(fields: &[JsonPath], time: &JsonPath) -> Vec<Vec<(String, u64)>> {
    let mut out: Vec<Vec<(String, u64)>> = Vec::new();
    for (p, path) in fields.iter().chain(std::iter::once(time)).enumerate().take(MAX_PATHS) {
        for (d, step) in path.0.iter().enumerate() {
            if let Step::Key(k) = step {
                if out.len() <= d {
                    out.resize_with(d + 1, Vec::new);
                }
                match out[d].iter_mut().find(|(x, _)| x == k) {
                    Some((_, paths)) => *paths |= 1 << p,
                    None => out[d].push((k.clone(), 1 << p)),
                }
            }
        }
    }
    out
}

/// Fills `event`'s field `i` with the values of `fields[i]` and its time with the first value
/// of `time`, as `event.rs`'s serde_json path would; false (the event then meaningless) where
/// the line needs that path (see the module comment). `event` was [`Event::reset`] to `line`;
/// `keys`: [`path_keys`] of the paths.
pub(crate) fn extract(line: &str, fields: &[JsonPath], time: &JsonPath, keys: &[Vec<(String, u64)>], event: &mut Event) -> bool {
    if fields.len() + 1 > MAX_PATHS || event.spans.len() != fields.len() || keys.is_empty() {
        return false;
    }
    let mut ends = [0u64; crate::event::MAX_PATH_STEPS + 1];
    for (p, steps) in fields.iter().map(|f| &f.0).chain(std::iter::once(&time.0)).enumerate() {
        match ends.get_mut(steps.len()) {
            Some(e) => *e |= 1 << p,
            None => return false,
        }
    }
    let mut sc = Scan { s: line, b: line.as_bytes(), i: 0, fields, time, keys, n: [0; MAX_PATHS + 1], ends, spans: &mut event.spans, text: &mut event.text, time_out: &mut event.time };
    let all = (1u64 << (fields.len() + 1)) - 1;
    sc.ws();
    if sc.b.get(sc.i) != Some(&b'{') || sc.object(all, 0).is_none() {
        return false;
    }
    sc.ws();
    if sc.i != sc.b.len() || sc.n[fields.len()] == 0 {
        return false;
    }
    for (p, path) in fields.iter().enumerate() {
        let n = sc.n[p] as usize;
        if n == 0 && !path.fans_out() {
            return false;
        }
    }
    true
}

impl Scan<'_> {
    fn steps(&self, p: usize) -> &[Step] {
        match self.fields.get(p) {
            Some(f) => &f.0,
            None => &self.time.0,
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The paths of `mask` that end at `depth` (the value there is theirs).
    fn ending(&self, mask: u64, depth: usize) -> u64 {
        mask & self.ends.get(depth).copied().unwrap_or(0)
    }

    /// Appends `text` after the line, for a value that differs from its text there.
    fn own(&mut self, text: &str) -> Span {
        let a = self.text.len();
        self.text.push_str(text);
        (a, self.text.len())
    }

    /// Records `span` as a value of every path in `paths`; None where a path that does not
    /// fan out would get a second value.
    fn put(&mut self, paths: u64, span: Span) -> Option<()> {
        let mut m = paths;
        while m != 0 {
            let p = m.trailing_zeros() as usize;
            m &= m - 1;
            let n = self.n[p] as usize;
            if p == self.fields.len() {
                if n == 0 {
                    *self.time_out = span;
                }
            } else {
                if n > 0 && !self.fields[p].fans_out() {
                    return None;
                }
                self.spans[p].push(span);
            }
            self.n[p] += 1;
        }
        Some(())
    }

    /// One value at `self.i` (after whitespace); `mask`: the paths whose first `depth` steps
    /// lead here.
    fn value(&mut self, mask: u64, depth: usize) -> Option<()> {
        self.ws();
        let end = self.ending(mask, depth);
        match *self.b.get(self.i)? {
            b'{' if end == 0 => self.object(mask, depth),
            b'[' if end == 0 => self.array(mask, depth),
            b'"' => {
                let (a, z, escaped) = self.string()?;
                if end != 0 {
                    if escaped {
                        let text: String = serde_json::from_str(self.s.get(a - 1..z + 1)?).ok()?;
                        let span = self.own(&text);
                        self.put(end, span)?;
                    } else {
                        self.put(end, (a, z))?;
                    }
                }
                Some(())
            }
            b't' | b'f' => {
                let word: &[u8] = if self.b[self.i] == b't' { b"true" } else { b"false" };
                if !self.b[self.i..].starts_with(word) {
                    return None;
                }
                let at = self.i;
                self.i += word.len();
                if end != 0 {
                    self.put(end, (at, self.i))?;
                }
                Some(())
            }
            b'n' if end == 0 && self.b[self.i..].starts_with(b"null") => {
                self.i += 4;
                Some(())
            }
            b'-' | b'0'..=b'9' => {
                let (a, z, plain) = self.number()?;
                if end != 0 {
                    if plain {
                        self.put(end, (a, z))?;
                    } else {
                        let n: serde_json::Number = self.s.get(a..z)?.parse().ok()?;
                        let span = self.own(&n.to_string());
                        self.put(end, span)?;
                    }
                }
                Some(())
            }
            _ => None,
        }
    }

    fn object(&mut self, mask: u64, depth: usize) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Some(());
        }
        // Paths that took a key of this object: a second such key is a duplicate, whose
        // last occurrence is the one serde_json keeps.
        let mut seen = 0u64;
        loop {
            self.ws();
            if self.b.get(self.i) != Some(&b'"') {
                return None;
            }
            let (a, z, escaped) = self.string()?;
            if escaped && mask != 0 {
                return None;
            }
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return None;
            }
            self.i += 1;
            // The paths still alive here that take this key (keys are short: compared in
            // place rather than through `memcmp`).
            let mut sub = 0u64;
            if mask != 0 {
                let key = &self.b[a..z];
                if let Some((_, paths)) = self.keys.get(depth).and_then(|ks| ks.iter().find(|(k, _)| k.len() == key.len() && k.bytes().zip(key).all(|(x, y)| x == *y))) {
                    sub = paths & mask;
                }
            }
            if sub & seen != 0 {
                return None;
            }
            seen |= sub;
            self.value(sub, depth + 1)?;
            self.ws();
            match self.b.get(self.i)? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, mask: u64, depth: usize) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Some(());
        }
        let mut index = 0usize;
        loop {
            let mut sub = 0u64;
            let mut m = mask;
            while m != 0 {
                let p = m.trailing_zeros() as usize;
                m &= m - 1;
                match self.steps(p).get(depth) {
                    Some(Step::All) => sub |= 1 << p,
                    Some(Step::Index(n)) if *n == index => sub |= 1 << p,
                    _ => {}
                }
            }
            self.value(sub, depth + 1)?;
            self.ws();
            match self.b.get(self.i)? {
                b',' => {
                    self.i += 1;
                    index += 1;
                }
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string at `self.i` (its opening quote): the bounds of its contents and whether it
    /// holds an escape (then checked by serde_json: unknown escapes, lone surrogates).
    fn string(&mut self) -> Option<(usize, usize, bool)> {
        let a = self.i + 1;
        // Most strings hold no escape: one tight scan to the closing quote.
        let plain = self.b.get(a..)?.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if self.b[a + plain] == b'"' {
            self.i = a + plain + 1;
            return Some((a, a + plain, false));
        }
        let mut j = a + plain;
        let mut escaped = false;
        loop {
            match *self.b.get(j)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    j += 2;
                }
                0..=0x1f => return None,
                _ => j += 1,
            }
        }
        self.i = j + 1;
        if escaped {
            serde_json::from_str::<String>(self.s.get(a - 1..j + 1)?).ok()?;
        }
        Some((a, j, escaped))
    }

    /// A number at `self.i`: its bounds and whether it is a plain integer that serde_json
    /// reads as a `u64` and prints as written.
    fn number(&mut self) -> Option<(usize, usize, bool)> {
        let b = self.b;
        let a = self.i;
        let digits = |mut j: usize| {
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            j
        };
        let mut j = a;
        if b[j] == b'-' {
            j += 1;
        }
        match b.get(j)? {
            b'0' => j += 1,
            b'1'..=b'9' => j = digits(j),
            _ => return None,
        }
        let int_end = j;
        let mut exponent = false;
        if b.get(j) == Some(&b'.') {
            let d = j + 1;
            j = digits(d);
            if j == d {
                return None;
            }
        }
        if let Some(b'e' | b'E') = b.get(j) {
            exponent = true;
            j += 1;
            if let Some(b'+' | b'-') = b.get(j) {
                j += 1;
            }
            let d = j;
            j = digits(d);
            if j == d {
                return None;
            }
        }
        self.i = j;
        if exponent || j - a > 300 {
            self.s.get(a..j)?.parse::<serde_json::Number>().ok()?;
        }
        let plain = b[a] != b'-' && int_end == j && j - a <= 19;
        Some((a, j, plain))
    }
}
