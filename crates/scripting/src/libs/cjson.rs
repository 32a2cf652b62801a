//! `cjson`: lua-cjson 2.1.0 (Mark Pulford's lua_cjson.c as Redis 7.0 vendors it), over mlua:
//! `encode`, `decode`, `null`, `new`, the configuration functions `encode_sparse_array`,
//! `encode_max_depth`, `decode_max_depth`, `encode_number_precision`, `encode_keep_buffer`,
//! `encode_invalid_numbers`, `decode_invalid_numbers`, and `_NAME`/`_VERSION`.
//!
//! As the C: numbers are written with "%.14g" (precision configurable 1..14); strings are
//! escaped with lua-cjson's table ('"', '\\', '/', control characters and DEL; other bytes,
//! invalid UTF-8 included, pass through); a table whose keys are all positive integers is an
//! array up to its largest key (holes are null), unless excessively sparse (default: error
//! "Cannot serialise table: excessively sparse array"), any other table an object in `next`
//! order with number keys written as strings; the empty table is `{}`; NaN and Inf refuse to
//! encode by default; nesting is limited to 1000 both ways. Decoding follows the C tokenizer:
//! numbers go through a strtod-alike (hex, inf, nan, leading '+' and zeros accepted by
//! default), `null` is the NULL lightuserdata `cjson.null`, errors read "Expected value but
//! found invalid token at character 1". The configuration is per `cjson` table (`new()` gives
//! a fresh one) and persists between calls, as in Redis. Encoder and decoder are iterative, so
//! nesting costs no native stack; the C's Lua stack limit (8000 slots) is counted where very
//! deep nesting (beyond the default limits) would hit it.
//!
//! Departures from the C: `encode_keep_buffer` is accepted and reported but has no effect
//! (there is no persistent buffer). Hexadecimal fractions ("0x1.8p1") are decoded with plain
//! double arithmetic, which may differ from glibc's strtod in the last bit for more than 13
//! hex digits.

use mlua::{LightUserData, Lua, Table, Value};

use super::shim::*;
// ---- end of shared shim ---------------------------------------------------------------------

/// LUAI_MAXCSTACK: the most stack slots a C function may hold.
const MAX_C_STACK: usize = 8000;

#[derive(Clone)]
struct Config {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0: refuse, 1: "nan"/"inf", 2: null.
    encode_invalid_numbers: i32,
    decode_invalid_numbers: i32,
    encode_number_precision: i32,
    encode_keep_buffer: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            encode_number_precision: 14,
            encode_keep_buffer: 1,
        }
    }
}

type Cfg = std::sync::Arc<std::sync::Mutex<Config>>;

/// The configuration (a poisoned lock is still consistent: every update is one store).
fn lock(cfg: &Cfg) -> std::sync::MutexGuard<'_, Config> {
    cfg.lock().unwrap_or_else(|e| e.into_inner())
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// x86-64's double -> int64 conversion: out of range or NaN gives INT64_MIN.
fn cvt_i64(x: f64) -> i64 {
    if x.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// x86-64's double -> int conversion.
fn cvt_i32(x: f64) -> i32 {
    if x.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

fn num(v: &Value) -> Option<f64> {
    match *v {
        Value::Integer(i) => Some(i as f64),
        Value::Number(n) => Some(n),
        _ => None,
    }
}

/// C's `printf("%.<prec>g", x)`.
fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    fn strip(s: &str) -> &str {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            s
        }
    }
    let p = prec.max(1);
    let e = format!("{:.*e}", p - 1, x);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        format!(
            "{}e{}{:02}",
            strip(mant),
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        )
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip(&format!("{:.*}", decimals, x)).to_string()
    }
}

// ------------------------------------------------------------------------- encoding ----

fn escape(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            8 => out.extend_from_slice(b"\\b"),
            9 => out.extend_from_slice(b"\\t"),
            10 => out.extend_from_slice(b"\\n"),
            12 => out.extend_from_slice(b"\\f"),
            13 => out.extend_from_slice(b"\\r"),
            0..=31 | 127 => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

/// `json_append_number`; `what` is the Lua type for the error message.
fn append_number(out: &mut Vec<u8>, cfg: &Config, n: f64) -> Res<()> {
    if n.is_nan() || n.is_infinite() {
        match cfg.encode_invalid_numbers {
            0 => return Err("Cannot serialise number: must not be NaN or Inf".into()),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            1 => {}
            _ => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
        }
    }
    let prec = cfg.encode_number_precision.clamp(1, 14) as usize;
    out.extend_from_slice(fmt_g(n, prec).as_bytes());
    Ok(())
}

/// `lua_array_length`: Some(n) for an array of n (n may be <= 0: then an object), None for
/// an object.
fn array_length(cfg: &Config, pairs: &[(Value, Value)]) -> Res<Option<i32>> {
    let mut max: i32 = 0;
    let mut items: i64 = 0;
    for (k, _) in pairs {
        match num(k) {
            Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                if k > max as f64 {
                    max = cvt_i32(k);
                }
                items += 1;
            }
            _ => return Ok(None),
        }
    }
    if cfg.sparse_ratio > 0 && max as i64 > items * cfg.sparse_ratio as i64 && max > cfg.sparse_safe
    {
        if cfg.sparse_convert == 0 {
            return Err("Cannot serialise table: excessively sparse array".into());
        }
        return Ok(None);
    }
    Ok(Some(max))
}

enum EFrame {
    Array {
        t: Table,
        len: i32,
        i: i32,
    },
    Object {
        pairs: Vec<(Value, Value)>,
        i: usize,
    },
}

fn encode_value(cfg: &Config, v: Value) -> Res<Vec<u8>> {
    let mut out = Vec::new();
    let mut stack: Vec<EFrame> = Vec::new();
    // Lua stack slots the C would hold: the argument, then per open array the element, per
    // open object the key and value.
    let mut slots: usize = 1;
    let mut next = Some(v);
    loop {
        if let Some(v) = next.take() {
            match v {
                Value::String(s) => escape(&mut out, &s.as_bytes()),
                Value::Integer(_) | Value::Number(_) => {
                    append_number(&mut out, cfg, num(&v).unwrap_or(0.0))?
                }
                Value::Boolean(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
                Value::Nil => out.extend_from_slice(b"null"),
                Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
                Value::Table(t) => {
                    let depth = stack.len() + 1;
                    if depth > cfg.encode_max_depth.max(0) as usize || slots + 3 > MAX_C_STACK {
                        return Err(
                            format!("Cannot serialise, excessive nesting ({})", depth).into()
                        );
                    }
                    let mut pairs = Vec::new();
                    for kv in t.pairs::<Value, Value>() {
                        pairs.push(kv?);
                    }
                    match array_length(cfg, &pairs)? {
                        Some(len) if len > 0 => {
                            out.push(b'[');
                            slots += 1;
                            stack.push(EFrame::Array { t, len, i: 1 });
                        }
                        _ => {
                            out.push(b'{');
                            slots += 2;
                            stack.push(EFrame::Object { pairs, i: 0 });
                        }
                    }
                }
                other => {
                    return Err(format!(
                        "Cannot serialise {}: type not supported",
                        type_name(&other)
                    )
                    .into())
                }
            }
        }
        let Some(top) = stack.last_mut() else {
            return Ok(out);
        };
        match top {
            EFrame::Array { t, len, i } => {
                if *i > *len {
                    out.push(b']');
                    stack.pop();
                    slots -= 1;
                    continue;
                }
                if *i > 1 {
                    out.push(b',');
                }
                next = Some(t.raw_get::<Value>(*i as f64)?);
                *i += 1;
            }
            EFrame::Object { pairs, i } => {
                if *i >= pairs.len() {
                    out.push(b'}');
                    stack.pop();
                    slots -= 2;
                    continue;
                }
                if *i > 0 {
                    out.push(b',');
                }
                let (k, v) = pairs[*i].clone();
                *i += 1;
                match &k {
                    Value::Integer(_) | Value::Number(_) => {
                        out.push(b'"');
                        append_number(&mut out, cfg, num(&k).unwrap_or(0.0))?;
                        out.extend_from_slice(b"\":");
                    }
                    Value::String(s) => {
                        escape(&mut out, &s.as_bytes());
                        out.push(b':');
                    }
                    other => {
                        return Err(format!(
                            "Cannot serialise {}: table key must be a number or string",
                            type_name(other)
                        )
                        .into())
                    }
                }
                next = Some(v);
            }
        }
    }
}

fn encode(cfg: &Cfg, a: &Args) -> Res<Out> {
    if a.n() != 1 {
        return Err(a.arg_error(1, "expected 1 argument"));
    }
    let c = lock(cfg).clone();
    let out = encode_value(&c, a.get(1))?;
    one(Value::String(a.lua.create_string(&out)?))
}

// ------------------------------------------------------------------------- decoding ----

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Number => "T_NUMBER",
            Tok::Boolean => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: Tok,
    index: usize,
    string: Vec<u8>,
    number: f64,
    boolean: bool,
    err: &'static str,
}

impl Token {
    fn new(kind: Tok, index: usize) -> Token {
        Token {
            kind,
            index,
            string: Vec::new(),
            number: 0.0,
            boolean: false,
            err: "",
        }
    }
}

/// glibc `strtod` (C locale) on `s[at..]`: the value and the bytes used (0: no conversion).
fn strtod(s: &[u8], at: usize) -> (f64, usize) {
    let b = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = at;
    while matches!(b(i), b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if b(i) == b'+' || b(i) == b'-' {
        neg = b(i) == b'-';
        i += 1;
    }
    let sign = |x: f64| if neg { -x } else { x };
    let lower = |j: usize, word: &[u8]| {
        word.iter()
            .enumerate()
            .all(|(k, &w)| b(j + k).to_ascii_lowercase() == w)
    };
    if lower(i, b"inf") {
        let used = if lower(i, b"infinity") { i + 8 } else { i + 3 };
        return (sign(f64::INFINITY), used - at);
    }
    if lower(i, b"nan") {
        let mut j = i + 3;
        if b(j) == b'(' {
            let mut k = j + 1;
            while b(k).is_ascii_alphanumeric() || b(k) == b'_' {
                k += 1;
            }
            if b(k) == b')' {
                j = k + 1;
            }
        }
        return (sign(f64::NAN), j - at);
    }
    if b(i) == b'0' && (b(i + 1) | 0x20) == b'x' {
        let hexval = |c: u8| (c as char).to_digit(16);
        let mut j = i + 2;
        let mut m = 0.0f64;
        let mut digits = 0;
        let mut exp: i64 = 0;
        while let Some(d) = hexval(b(j)) {
            m = m * 16.0 + d as f64;
            digits += 1;
            j += 1;
        }
        if b(j) == b'.' {
            let mut k = j + 1;
            let mut fd = 0;
            while let Some(d) = hexval(b(k)) {
                m = m * 16.0 + d as f64;
                exp -= 4;
                fd += 1;
                k += 1;
            }
            if digits + fd > 0 {
                digits += fd;
                j = k;
            }
        }
        if digits == 0 {
            // "0x" without digits: just the "0".
            return (sign(0.0), i + 1 - at);
        }
        if (b(j) | 0x20) == b'p' {
            let mut k = j + 1;
            let mut eneg = false;
            if b(k) == b'+' || b(k) == b'-' {
                eneg = b(k) == b'-';
                k += 1;
            }
            if b(k).is_ascii_digit() {
                let mut e: i64 = 0;
                while b(k).is_ascii_digit() {
                    e = (e * 10 + (b(k) - b'0') as i64).min(1 << 20);
                    k += 1;
                }
                exp += if eneg { -e } else { e };
                j = k;
            }
        }
        // ldexp, in steps whose powers of two are exact.
        let mut v = m;
        let mut e = exp.clamp(-4000, 4000);
        while e > 1000 {
            v *= 2f64.powi(1000);
            e -= 1000;
        }
        while e < -1000 {
            v *= 2f64.powi(-1000);
            e += 1000;
        }
        v *= 2f64.powi(e as i32);
        return (sign(v), j - at);
    }
    // Decimal: digits [. digits] [e [sign] digits], at least one digit in the mantissa.
    let start = i;
    let mut j = i;
    let mut digits = 0;
    while b(j).is_ascii_digit() {
        j += 1;
        digits += 1;
    }
    if b(j) == b'.' {
        let mut k = j + 1;
        while b(k).is_ascii_digit() {
            k += 1;
            digits += 1;
        }
        if digits > 0 {
            j = k;
        }
    }
    if digits == 0 {
        return (0.0, 0);
    }
    if (b(j) | 0x20) == b'e' {
        let mut k = j + 1;
        if b(k) == b'+' || b(k) == b'-' {
            k += 1;
        }
        if b(k).is_ascii_digit() {
            while b(k).is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    let text = std::str::from_utf8(&s[start..j]).unwrap_or("0");
    let mut text = text.to_string();
    if text.ends_with('.') {
        text.push('0');
    }
    if text.starts_with('.') {
        text.insert(0, '0');
    }
    let v: f64 = text.parse().unwrap_or(0.0);
    (sign(v), j - at)
}

struct Parser<'a> {
    data: &'a [u8],
    ptr: usize,
    decode_invalid_numbers: bool,
}

impl Parser<'_> {
    fn byte(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn error(&self, t: &mut Token, msg: &'static str) {
        t.kind = Tok::Error;
        t.index = self.ptr;
        t.err = msg;
    }

    /// `json_is_invalid_number`.
    fn is_invalid_number(&self) -> bool {
        let mut i = self.ptr;
        if self.byte(i) == b'+' {
            return true;
        }
        if self.byte(i) == b'-' {
            i += 1;
        }
        let c = self.byte(i);
        if c == b'0' {
            let c2 = self.byte(i + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        } else if (c as i8) <= b'9' as i8 {
            return false;
        }
        let lower3 = |w: &[u8]| (0..3).all(|k| self.byte(i + k).to_ascii_lowercase() == w[k]);
        lower3(b"inf") || lower3(b"nan")
    }

    fn number(&mut self, t: &mut Token) {
        t.kind = Tok::Number;
        let (v, used) = strtod(self.data, self.ptr);
        if used == 0 {
            self.error(t, "invalid number");
        } else {
            t.number = v;
            self.ptr += used;
        }
    }

    /// `decode_hex4`.
    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0u32;
        for k in 0..4 {
            let c = self.byte(at + k);
            let d = if c.is_ascii_digit() {
                c - b'0'
            } else {
                let l = c | 0x20;
                if (b'a'..=b'f').contains(&l) {
                    10 + l - b'a'
                } else {
                    return None;
                }
            };
            v = (v << 4) | d as u32;
        }
        Some(v)
    }

    /// `json_append_unicode_escape`: false on an invalid escape.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.ptr + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.byte(self.ptr + 6) != b'\\' || self.byte(self.ptr + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.ptr + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        if cp <= 0x7F {
            out.push(cp as u8);
        } else if cp <= 0x7FF {
            out.push(((cp >> 6) | 0xC0) as u8);
            out.push(((cp & 0x3F) | 0x80) as u8);
        } else if cp <= 0xFFFF {
            out.push(((cp >> 12) | 0xE0) as u8);
            out.push((((cp >> 6) & 0x3F) | 0x80) as u8);
            out.push(((cp & 0x3F) | 0x80) as u8);
        } else {
            out.push(((cp >> 18) | 0xF0) as u8);
            out.push((((cp >> 12) & 0x3F) | 0x80) as u8);
            out.push((((cp >> 6) & 0x3F) | 0x80) as u8);
            out.push(((cp & 0x3F) | 0x80) as u8);
        }
        self.ptr += len;
        true
    }

    fn string(&mut self, t: &mut Token) {
        self.ptr += 1;
        let mut s = Vec::new();
        loop {
            let c = self.byte(self.ptr);
            if c == b'"' {
                break;
            }
            if c == 0 {
                self.error(t, "unexpected end of string");
                return;
            }
            if c == b'\\' {
                let e = match self.byte(self.ptr + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b't' => 9,
                    b'n' => 10,
                    b'f' => 12,
                    b'r' => 13,
                    b'u' => {
                        if self.unicode_escape(&mut s) {
                            continue;
                        }
                        self.error(t, "invalid unicode escape code");
                        return;
                    }
                    _ => {
                        self.error(t, "invalid escape code");
                        return;
                    }
                };
                self.ptr += 1;
                s.push(e);
            } else {
                s.push(c);
            }
            self.ptr += 1;
        }
        self.ptr += 1;
        t.kind = Tok::Str;
        t.string = s;
    }

    /// `json_next_token`.
    fn next(&mut self) -> Token {
        while matches!(self.byte(self.ptr), b' ' | b'\t' | b'\n' | b'\r') {
            self.ptr += 1;
        }
        let at = self.ptr;
        let c = self.byte(at);
        let mut t = Token::new(Tok::Error, at);
        let single = match c {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            0 => {
                t.kind = Tok::End;
                return t;
            }
            _ => None,
        };
        if let Some(k) = single {
            t.kind = k;
            self.ptr += 1;
            return t;
        }
        let starts = |w: &[u8]| self.data.get(at..at + w.len()) == Some(w);
        match c {
            b'"' => self.string(&mut t),
            b'-' | b'0'..=b'9' => {
                if self.decode_invalid_numbers || !self.is_invalid_number() {
                    self.number(&mut t);
                } else {
                    self.error(&mut t, "invalid number");
                }
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                if starts(b"true") {
                    t.kind = Tok::Boolean;
                    t.boolean = true;
                    self.ptr += 4;
                } else if starts(b"false") {
                    t.kind = Tok::Boolean;
                    self.ptr += 5;
                } else if starts(b"null") {
                    t.kind = Tok::Null;
                    self.ptr += 4;
                } else if self.decode_invalid_numbers && self.is_invalid_number() {
                    self.number(&mut t);
                } else {
                    self.error(&mut t, "invalid token");
                }
            }
            _ => self.error(&mut t, "invalid token"),
        }
        t
    }
}

fn parse_error(expected: &str, t: &Token) -> Fail {
    let found = if t.kind == Tok::Error {
        t.err
    } else {
        t.kind.name()
    };
    Fail::Msg(format!(
        "Expected {} but found {} at character {}",
        expected,
        found,
        t.index + 1
    ))
}

enum DFrame {
    Array { t: Table, i: usize },
    Object { t: Table, key: Vec<u8> },
}

fn decode_text(lua: &Lua, cfg: &Config, data: &[u8]) -> Res<Value> {
    let mut p = Parser {
        data,
        ptr: 0,
        decode_invalid_numbers: cfg.decode_invalid_numbers != 0,
    };
    let mut stack: Vec<DFrame> = Vec::new();
    // Lua stack slots the C would hold: the argument, per open array its table, per open
    // object its table and the pending key.
    let mut slots: usize = 1;
    let mut tok = p.next();
    loop {
        // `json_process_value` on `tok`.
        let mut value = match tok.kind {
            Tok::Str => Value::String(lua.create_string(&tok.string)?),
            Tok::Number => Value::Number(tok.number),
            Tok::Boolean => Value::Boolean(tok.boolean),
            Tok::Null => null(),
            Tok::ObjBegin | Tok::ArrBegin => {
                let object = tok.kind == Tok::ObjBegin;
                let depth = stack.len() + 1;
                let need = if object { 3 } else { 2 };
                if depth > cfg.decode_max_depth.max(0) as usize || slots + need > MAX_C_STACK {
                    return Err(format!(
                        "Found too many nested data structures ({}) at character {}",
                        depth, p.ptr
                    )
                    .into());
                }
                let t = lua.create_table()?;
                tok = p.next();
                let end = if object { Tok::ObjEnd } else { Tok::ArrEnd };
                if tok.kind == end {
                    Value::Table(t)
                } else if object {
                    let key = object_key(&mut p, &tok)?;
                    slots += 2;
                    stack.push(DFrame::Object { t, key });
                    tok = p.next();
                    continue;
                } else {
                    slots += 1;
                    stack.push(DFrame::Array { t, i: 1 });
                    continue;
                }
            }
            _ => return Err(parse_error("value", &tok)),
        };
        // Store the finished value, closing the containers that end after it.
        loop {
            let Some(top) = stack.last_mut() else {
                tok = p.next();
                if tok.kind != Tok::End {
                    return Err(parse_error("the end", &tok));
                }
                return Ok(value);
            };
            tok = p.next();
            let (object, ended) = match top {
                DFrame::Array { t, i } => {
                    t.raw_set(*i as f64, value)?;
                    *i += 1;
                    (false, tok.kind == Tok::ArrEnd)
                }
                DFrame::Object { t, key } => {
                    t.raw_set(lua.create_string(&key)?, value)?;
                    (true, tok.kind == Tok::ObjEnd)
                }
            };
            if ended {
                value = match stack.pop() {
                    Some(DFrame::Array { t, .. }) => {
                        slots -= 1;
                        Value::Table(t)
                    }
                    Some(DFrame::Object { t, .. }) => {
                        slots -= 2;
                        Value::Table(t)
                    }
                    None => Value::Nil,
                };
                continue;
            }
            if tok.kind != Tok::Comma {
                let what = if object {
                    "comma or object end"
                } else {
                    "comma or array end"
                };
                return Err(parse_error(what, &tok));
            }
            tok = p.next();
            if object {
                let key = object_key(&mut p, &tok)?;
                if let Some(DFrame::Object { key: k, .. }) = stack.last_mut() {
                    *k = key;
                }
                tok = p.next();
            }
            break;
        }
    }
}

/// An object's key and the colon after it; `t` is the key's token.
fn object_key(p: &mut Parser, t: &Token) -> Res<Vec<u8>> {
    if t.kind != Tok::Str {
        return Err(parse_error("object key string", t));
    }
    let colon = p.next();
    if colon.kind != Tok::Colon {
        return Err(parse_error("colon", &colon));
    }
    Ok(t.string.clone())
}

fn decode(cfg: &Cfg, a: &Args) -> Res<Out> {
    if a.n() != 1 {
        return Err(a.arg_error(1, "expected 1 argument"));
    }
    let data = a.check_bytes(1)?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err("JSON parser does not support UTF-16 or UTF-32".into());
    }
    let c = lock(cfg).clone();
    one(decode_text(a.lua, &c, &data)?)
}

// -------------------------------------------------------------------- configuration ----

/// `json_arg_init`: at most `n` arguments.
fn arg_init(a: &Args, n: usize) -> Res<()> {
    if a.n() > n {
        return Err(a.arg_error(n + 1, "found too many arguments"));
    }
    Ok(())
}

/// `json_integer_option`.
fn integer_option(a: &Args, i: usize, setting: &mut i32, min: i32, max: i32) -> Res<Value> {
    if !a.is_none_or_nil(i) {
        let v = cvt_i64(a.check_number(i)?) as i32;
        if !(min <= v && v <= max) {
            let msg = format!("expected integer between {} and {}", min, max);
            return Err(a.arg_error(1, &msg));
        }
        *setting = v;
    }
    Ok(Value::Number(*setting as f64))
}

/// `json_enum_option`; `options` None: the booleans "off"/"on".
fn enum_option(a: &Args, i: usize, setting: &mut i32, options: Option<&[&str]>) -> Res<Value> {
    let options = options.unwrap_or(&["off", "on"]);
    if !a.is_none_or_nil(i) {
        if let Value::Boolean(b) = a.get(i) {
            *setting = b as i32;
        } else {
            let name = a.check_bytes(i)?;
            match options.iter().position(|o| o.as_bytes() == name.as_slice()) {
                Some(k) => *setting = k as i32,
                None => {
                    let msg = format!("invalid option '{}'", String::from_utf8_lossy(&name));
                    return Err(a.arg_error(i, &msg));
                }
            }
        }
    }
    if *setting == 0 || *setting == 1 {
        Ok(Value::Boolean(*setting != 0))
    } else {
        let name = options.get(*setting as usize).copied().unwrap_or("");
        Ok(Value::String(a.lua.create_string(name)?))
    }
}

fn cfg_sparse(cfg: &Cfg, a: &Args) -> Res<Out> {
    arg_init(a, 3)?;
    let mut c = lock(cfg);
    let v1 = enum_option(a, 1, &mut c.sparse_convert, None)?;
    let v2 = integer_option(a, 2, &mut c.sparse_ratio, 0, i32::MAX)?;
    let v3 = integer_option(a, 3, &mut c.sparse_safe, 0, i32::MAX)?;
    Ok(Out::Values(vec![v1, v2, v3]))
}

fn cfg_int(
    cfg: &Cfg,
    a: &Args,
    field: fn(&mut Config) -> &mut i32,
    min: i32,
    max: i32,
) -> Res<Out> {
    arg_init(a, 1)?;
    let mut c = lock(cfg);
    one(integer_option(a, 1, field(&mut c), min, max)?)
}

fn cfg_enum(
    cfg: &Cfg,
    a: &Args,
    field: fn(&mut Config) -> &mut i32,
    options: Option<&[&str]>,
) -> Res<Out> {
    arg_init(a, 1)?;
    let mut c = lock(cfg);
    one(enum_option(a, 1, field(&mut c), options)?)
}

/// A `cjson` table with its own configuration.
fn new_module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg: Cfg = std::sync::Arc::new(std::sync::Mutex::new(Config::default()));
    let c = cfg.clone();
    add_fn(lua, &t, "encode", move |a| encode(&c, a))?;
    let c = cfg.clone();
    add_fn(lua, &t, "decode", move |a| decode(&c, a))?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_sparse_array", move |a| cfg_sparse(&c, a))?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_max_depth", move |a| {
        cfg_int(&c, a, |c| &mut c.encode_max_depth, 1, i32::MAX)
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "decode_max_depth", move |a| {
        cfg_int(&c, a, |c| &mut c.decode_max_depth, 1, i32::MAX)
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_number_precision", move |a| {
        cfg_int(&c, a, |c| &mut c.encode_number_precision, 1, 14)
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_keep_buffer", move |a| {
        cfg_enum(&c, a, |c| &mut c.encode_keep_buffer, None)
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_invalid_numbers", move |a| {
        cfg_enum(
            &c,
            a,
            |c| &mut c.encode_invalid_numbers,
            Some(&["off", "on", "null"]),
        )
    })?;
    let c = cfg;
    add_fn(lua, &t, "decode_invalid_numbers", move |a| {
        cfg_enum(&c, a, |c| &mut c.decode_invalid_numbers, None)
    })?;
    add_fn(lua, &t, "new", |a| one(Value::Table(new_module(a.lua)?)))?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// The `cjson` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    new_module(lua)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    use super::super::shim::run;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .set("cjson", super::open(&lua).unwrap())
            .unwrap();
        lua
    }


    #[test]
    fn fmt_g_like_printf() {
        use super::fmt_g;
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(1e300, 14), "1e+300");
        assert_eq!(fmt_g(123456.0, 3), "1.23e+05");
        assert_eq!(fmt_g(9.99999999999999e14, 14), "1e+15");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(-0.0, 14), "-0");
    }

    // Expected values are redis-server 7.0.15's answers to the same code, run in the same
    // order in one Lua state (the configuration calls carry over, as there).
    #[test]
    fn matches_redis() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("return cjson.encode({1, 2, {a = 1}})", "[1,2,{\"a\":1}]"),
            ("return cjson.encode({})", "{}"),
            ("return cjson.encode({{}, {{}}})", "[{},[{}]]"),
            ("return cjson.encode('a/b\"c\\\\d')", "\"a\\/b\\\"c\\\\d\""),
            ("return cjson.encode('\\0\\1\\2\\7\\8\\9\\10\\11\\12\\13\\14\\31\\127 ~')", "\"\\u0000\\u0001\\u0002\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u001f\\u007f ~\""),
            ("return cjson.encode('h\\195\\169llo \\226\\130\\172 \\240\\159\\152\\128')", "\"h\u{e9}llo \u{20ac} \u{1f600}\""),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cjson.encode('\\255\\254'))", "22fffe22"),
            ("return cjson.encode(0.1)", "0.1"),
            ("return cjson.encode(1e300)", "1e+300"),
            ("return cjson.encode(-0.0)", "-0"),
            ("return cjson.encode(0)", "0"),
            ("return cjson.encode(123456789012345678)", "1.2345678901235e+17"),
            ("return cjson.encode(2^53)", "9.007199254741e+15"),
            ("return cjson.encode(1/3)", "0.33333333333333"),
            ("return cjson.encode(100000000000000)", "1e+14"),
            ("return cjson.encode(1e15)", "1e+15"),
            ("return cjson.encode(1e-5)", "1e-05"),
            ("return cjson.encode(0.0001)", "0.0001"),
            ("return cjson.encode(-1.5e-7)", "-1.5e-07"),
            ("return cjson.encode(123.456)", "123.456"),
            ("return cjson.encode(3.14159265358979)", "3.1415926535898"),
            ("return cjson.encode(-1.7976931348623157e308)", "-1.7976931348623e+308"),
            ("return cjson.encode(5e-324)", "4.9406564584125e-324"),
            ("return cjson.encode(1/0)", "user_script:1: Cannot serialise number: must not be NaN or Inf"),
            ("return cjson.encode(-1/0)", "user_script:1: Cannot serialise number: must not be NaN or Inf"),
            ("return cjson.encode(0/0)", "user_script:1: Cannot serialise number: must not be NaN or Inf"),
            ("return cjson.encode({1/0})", "user_script:1: Cannot serialise number: must not be NaN or Inf"),
            ("return cjson.encode({a = 0/0})", "user_script:1: Cannot serialise number: must not be NaN or Inf"),
            ("return cjson.encode(true)", "true"),
            ("return cjson.encode(false)", "false"),
            ("return cjson.encode(nil)", "null"),
            ("return cjson.encode(cjson.null)", "null"),
            ("return cjson.encode({cjson.null, 1})", "[null,1]"),
            ("return cjson.encode(function() end)", "user_script:1: Cannot serialise function: type not supported"),
            ("return cjson.encode({f = function() end})", "user_script:1: Cannot serialise function: type not supported"),
            ("return cjson.encode(coroutine.create(function() end))", "user_script:1: Cannot serialise thread: type not supported"),
            ("return cjson.encode({[true] = 1})", "user_script:1: Cannot serialise boolean: table key must be a number or string"),
            ("return cjson.encode({[{}] = 1})", "user_script:1: Cannot serialise table: table key must be a number or string"),
            ("return cjson.encode({[1.5] = 1})", "{\"1.5\":1}"),
            ("return cjson.encode({[0] = 'a'})", "{\"0\":\"a\"}"),
            ("return cjson.encode({[-1] = 'a'})", "{\"-1\":\"a\"}"),
            ("return cjson.encode({[2^40] = 1})", "{\"1099511627776\":1}"),
            ("return cjson.encode({[1] = 'a', [2] = 'b', [4] = 'd'})", "[\"a\",\"b\",null,\"d\"]"),
            ("return cjson.encode({[1] = 'a', [3] = 'c'})", "[\"a\",null,\"c\"]"),
            ("return cjson.encode({[10] = 1})", "[null,null,null,null,null,null,null,null,null,1]"),
            ("return cjson.encode({[11] = 1})", "user_script:1: Cannot serialise table: excessively sparse array"),
            ("return cjson.encode({[20] = 1, [1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1, [6] = 1, [7] = 1, [8] = 1, [9] = 1})", "[1,1,1,1,1,1,1,1,1,null,null,null,null,null,null,null,null,null,null,1]"),
            ("return cjson.encode({[21] = 1, [1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1, [6] = 1, [7] = 1, [8] = 1, [9] = 1, [10] = 1})", "[1,1,1,1,1,1,1,1,1,1,null,null,null,null,null,null,null,null,null,null,1]"),
            ("return cjson.encode({[22] = 1, [1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1, [6] = 1, [7] = 1, [8] = 1, [9] = 1, [10] = 1})", "[1,1,1,1,1,1,1,1,1,1,null,null,null,null,null,null,null,null,null,null,null,1]"),
            ("return cjson.encode({1, 2, x = 3})", "{\"1\":1,\"2\":2,\"x\":3}"),
            ("return cjson.encode({a = {b = {c = {}}}})", "{\"a\":{\"b\":{\"c\":{}}}}"),
            ("return cjson.encode({['a/b'] = 'c\\n'})", "{\"a\\/b\":\"c\\n\"}"),
            ("return cjson.encode({[1] = 'x', ['1'] = 'y'})", "{\"1\":\"x\",\"1\":\"y\"}"),
            ("return cjson.encode()", "user_script:1: bad argument #1 to 'encode' (expected 1 argument)"),
            ("return cjson.encode(1, 2)", "user_script:1: bad argument #1 to 'encode' (expected 1 argument)"),
            ("return cjson.encode(12, nil)", "user_script:1: bad argument #1 to 'encode' (expected 1 argument)"),
            ("return (function() local t = {} local c = t for i = 1, 999 do c[1] = {} c = c[1] end return #cjson.encode(t) end)()", "2000"),
            ("return (function() local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end return #cjson.encode(t) end)()", "user_script:1: Cannot serialise, excessive nesting (1001)"),
            ("return (function() local t = {} t[1] = t return cjson.encode(t) end)()", "user_script:1: Cannot serialise, excessive nesting (1001)"),
            ("return (function() local t = {} t.a = t return cjson.encode(t) end)()", "user_script:1: Cannot serialise, excessive nesting (1001)"),
            ("return (function() local t = {} local c = t for i = 1, 1000 do c.x = {} c = c.x end return cjson.encode(t) end)()", "user_script:1: Cannot serialise, excessive nesting (1001)"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\":1,\"b\":[1,2,3],\"c\":{\"d\":null},\"e\":true,\"f\":false}'))", "{a=number:1,b={1=number:1,2=number:2,3=number:3},c={d=userdata:userdata: (nil)},e=boolean:true,f=boolean:false}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[]'))", "{}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{}'))", "{}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1,null,3]'))", "{1=number:1,2=userdata:userdata: (nil),3=number:3}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('  \\t\\r\\n [ 1 , 2 ] \\n '))", "{1=number:1,2=number:2}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"a\\\\/b\\\\\"c\\\\\\\\d\\\\b\\\\f\\\\n\\\\r\\\\t\"'))", "\"a/b\\\"c\\\\d\x08\x0c\\\x0a\\r\x09\""),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\u0041\\\\u00e9\\\\u20AC\\\\ud83d\\\\ude00\"'))", "\"A\u{e9}\u{20ac}\u{1f600}\""),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\u0000\"'))", "\"\\000\""),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\ud83d\"'))", "user_script:1: Expected value but found invalid unicode escape code at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\ude00\"'))", "user_script:1: Expected value but found invalid unicode escape code at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\ud83d\\\\u0041\"'))", "user_script:1: Expected value but found invalid unicode escape code at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\u12\"'))", "user_script:1: Expected value but found invalid unicode escape code at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\u12G4\"'))", "user_script:1: Expected value but found invalid unicode escape code at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\x\"'))", "user_script:1: Expected value but found invalid escape code at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"abc'))", "user_script:1: Expected value but found unexpected end of string at character 5"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"a\\1b\"'))", "\"a\x01b\""),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\195\\169\"'))", "\"\u{e9}\""),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('123'))", "number:123"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('-0'))", "number:-0"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1.5e3'))", "number:1500"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1E-2'))", "number:0.01"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('0x10'))", "number:16"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('-0x10'))", "number:-16"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('+1'))", "number:1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('01'))", "number:1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1.'))", "number:1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('.5'))", "user_script:1: Expected value but found invalid token at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1e'))", "user_script:1: Expected the end but found invalid token at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1e400'))", "number:inf"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('-1e400'))", "number:-inf"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1e-400'))", "number:0"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('inf'))", "number:inf"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('-inf'))", "number:-inf"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('Infinity'))", "number:inf"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('-Infinity'))", "number:-inf"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('nan'))", "number:nan"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('NaN'))", "number:nan"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('-nan'))", "number:-nan"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('infinity'))", "number:inf"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1,2,]'))", "user_script:1: Expected value but found T_ARR_END at character 6"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\":1,}'))", "user_script:1: Expected object key string but found T_OBJ_END at character 8"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\" 1}'))", "user_script:1: Expected colon but found T_NUMBER at character 6"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{1:2}'))", "user_script:1: Expected object key string but found T_NUMBER at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1 2]'))", "user_script:1: Expected comma or array end but found T_NUMBER at character 4"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\":1 \"b\":2}'))", "user_script:1: Expected comma or object end but found T_STRING at character 8"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(''))", "user_script:1: Expected value but found T_END at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('   '))", "user_script:1: Expected value but found T_END at character 4"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('x'))", "user_script:1: Expected value but found invalid token at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1] x'))", "user_script:1: Expected the end but found invalid token at character 5"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1] [2]'))", "user_script:1: Expected the end but found T_ARR_BEGIN at character 5"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('tru'))", "user_script:1: Expected value but found invalid token at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('truex'))", "user_script:1: Expected the end but found invalid token at character 5"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('nul'))", "user_script:1: Expected value but found invalid token at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('falsey'))", "user_script:1: Expected the end but found invalid token at character 6"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('['))", "user_script:1: Expected value but found T_END at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{'))", "user_script:1: Expected object key string but found T_END at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\"'))", "user_script:1: Expected colon but found T_END at character 5"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\":'))", "user_script:1: Expected value but found T_END at character 6"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(']'))", "user_script:1: Expected value but found T_ARR_END at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(':'))", "user_script:1: Expected value but found T_COLON at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(','))", "user_script:1: Expected value but found T_COMMA at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1]\\0garbage'))", "{1=number:1}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\\0'))", "user_script:1: Expected value but found T_END at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('a\\0'))", "user_script:1: JSON parser does not support UTF-16 or UTF-32"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\\0a'))", "user_script:1: JSON parser does not support UTF-16 or UTF-32"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\":1,\"a\":2}'))", "{a=number:2}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"1\":1}'))", "{1=number:1}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(123))", "number:123"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode())", "user_script:1: bad argument #1 to 'decode' (expected 1 argument)"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode({}))", "user_script:1: bad argument #1 to 'decode' (string expected, got table)"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1', 2))", "user_script:1: bad argument #1 to 'decode' (expected 1 argument)"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)) ~= nil)", "boolean:true"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001)))", "user_script:1: Found too many nested data structures (1001) at character 1001"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\":' .. string.rep('[', 1000)))", "user_script:1: Found too many nested data structures (1001) at character 1005"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode(string.rep('{\"a\":', 1001)))", "user_script:1: Found too many nested data structures (1001) at character 5001"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('\"\\\\u00\"'))", "user_script:1: Expected value but found invalid unicode escape code at character 2"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1,2,3'))", "user_script:1: Expected comma or array end but found T_END at character 7"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('{\"a\":[1,{\"b\":null}]}'))", "{a={1=number:1,2={b=userdata:userdata: (nil)}}}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('-'))", "user_script:1: Expected value but found invalid number at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('--1'))", "user_script:1: Expected value but found invalid number at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('- 1'))", "user_script:1: Expected value but found invalid number at character 1"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('1.5.5'))", "user_script:1: Expected the end but found invalid token at character 4"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('[1e5,-2.5E+2,0.000001]'))", "{1=number:100000,2=number:-250,3=number:1e-06}"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('18446744073709551616'))", "number:1.844674407371e+19"),
            ("return (function(v) local function d(x) if type(x) == 'table' then local ks = {} for k in pairs(x) do ks[#ks + 1] = k end table.sort(ks, function(a, b) return tostring(a) < tostring(b) end) local p = {} for _, k in ipairs(ks) do p[#p + 1] = tostring(k) .. '=' .. d(x[k]) end return '{' .. table.concat(p, ',') .. '}' elseif type(x) == 'string' then return string.format('%q', x) else return type(x) .. ':' .. tostring(x) end end return d(v) end)(cjson.decode('0.1'))", "number:0.1"),
            ("return cjson.decode('null') == cjson.null", "true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array())", "false,2,10"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_max_depth())", "1000"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_max_depth())", "1000"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_number_precision())", "14"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_keep_buffer())", "true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_invalid_numbers())", "false"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_invalid_numbers())", "true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array(true, 3, 5), cjson.encode({[1] = 1, [100] = 2}), cjson.encode_sparse_array(false, 2, 10))", "true,{\"1\":1,\"100\":2},false,2,10"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array(true), cjson.encode({[1] = 1, [100] = 2}), cjson.encode_sparse_array(false))", "true,{\"1\":1,\"100\":2},false,2,10"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array(nil, 0), cjson.encode({[1] = 1, [100] = 2}), cjson.encode_sparse_array(nil, 2))", "false,[1,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,2],false,2,10"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array(nil, 1), cjson.encode({[1] = 1, [12] = 2}), cjson.encode_sparse_array(nil, 2))", "user_script:1: Cannot serialise table: excessively sparse array"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array('x'))", "user_script:1: bad argument #1 to 'encode_sparse_array' (invalid option 'x')"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array('on'))", "true,1,10"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array(false, -1))", "user_script:1: bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array(false, 'a'))", "user_script:1: bad argument #2 to 'encode_sparse_array' (number expected, got string)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_sparse_array(1, 2, 3, 4))", "user_script:1: bad argument #4 to 'encode_sparse_array' (found too many arguments)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_number_precision(3), cjson.encode(math.pi), cjson.encode(123456), cjson.encode_number_precision(14))", "3,3.14,1.23e+05,14"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_number_precision(0))", "user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_number_precision(15))", "user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_number_precision('5'), cjson.encode_number_precision(14))", "5,14"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_number_precision(2.9), cjson.encode_number_precision(14))", "2,14"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_max_depth(2), pcall(cjson.encode, {{{}}}), cjson.encode({{}}), cjson.encode_max_depth(1000))", "2,false,[{}],1000"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_max_depth(0))", "user_script:1: bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_max_depth(2), pcall(cjson.decode, '[[[]]]'), cjson.decode_max_depth(1000))", "2,false,1000"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_max_depth(-1))", "user_script:1: bad argument #1 to 'decode_max_depth' (expected integer between 1 and 2147483647)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_keep_buffer(false), cjson.encode_keep_buffer(true))", "false,true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_keep_buffer('on'), cjson.encode_keep_buffer(true))", "true,true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_keep_buffer(1))", "user_script:1: bad argument #1 to 'encode_keep_buffer' (invalid option '1')"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_invalid_numbers(true), cjson.encode(0/0), cjson.encode(1/0), cjson.encode(-1/0), cjson.encode_invalid_numbers(false))", "true,nan,inf,-inf,false"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_invalid_numbers('null'), cjson.encode({0/0, 1/0}), cjson.encode_invalid_numbers('off'))", "null,[null,null],false"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_invalid_numbers('on'), cjson.encode_invalid_numbers('off'))", "true,false"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_invalid_numbers('x'))", "user_script:1: bad argument #1 to 'encode_invalid_numbers' (invalid option 'x')"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_invalid_numbers(1))", "user_script:1: bad argument #1 to 'encode_invalid_numbers' (invalid option '1')"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_invalid_numbers(false), pcall(cjson.decode, 'nan'), pcall(cjson.decode, '0x10'), pcall(cjson.decode, '01'), pcall(cjson.decode, '+1'), pcall(cjson.decode, 'inf'), cjson.decode_invalid_numbers(true))", "false,false,false,false,false,false,true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_invalid_numbers('off'), cjson.decode_invalid_numbers('on'))", "false,true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_invalid_numbers('null'))", "user_script:1: bad argument #1 to 'decode_invalid_numbers' (invalid option 'null')"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.decode_invalid_numbers(nil))", "true"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson.encode_max_depth(nil))", "1000"),
            ("return type(cjson.new)", "function"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cjson._NAME, cjson._VERSION, cjson.version)", "cjson,2.1.0,nil"),
            ("return (function() local c = cjson.new() c.encode_number_precision(2) local r = c.encode(math.pi) .. cjson.encode(math.pi) return r end)()", "3.13.1415926535898"),
            ("return type(cjson.new().null)", "userdata"),
            ("return cjson.encode({'a', 'b', 'c'}) .. cjson.encode({x = {1, {y = 'z'}}})", "[\"a\",\"b\",\"c\"]{\"x\":[1,{\"y\":\"z\"}]}"),
            ("return cjson.encode({a = 1, b = 2, c = 3, d = 4, e = {f = 5, g = {6, 7}}, [10.5] = 'x', [-3] = 'y'})", "{\"a\":1,\"c\":3,\"b\":2,\"e\":{\"g\":[6,7],\"f\":5},\"d\":4,\"-3\":\"y\",\"10.5\":\"x\"}"),
            ("return cjson.encode({name = 'n', list = {1, 2, 3}, map = {k1 = 'v1', k2 = 'v2', k3 = 'v3'}, flag = true, none = cjson.null})", "{\"map\":{\"k1\":\"v1\",\"k3\":\"v3\",\"k2\":\"v2\"},\"name\":\"n\",\"list\":[1,2,3],\"flag\":true,\"none\":null}"),
            ("return cjson.encode(cjson.decode('{\"z\":1,\"y\":2,\"x\":3,\"w\":[{\"b\":1,\"a\":2}],\"v\":\"\\\\u00e9\"}'))", "{\"y\":2,\"x\":3,\"z\":1,\"w\":[{\"a\":2,\"b\":1}],\"v\":\"\u{e9}\"}"),
        ];
        for (code, want) in cases {
            assert_eq!(&run(&lua, code), want, "{code}");
        }
    }
}
