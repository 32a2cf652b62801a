//! `cmsgpack`: lua-cmsgpack 0.4.0 (Salvatore Sanfilippo's lua_cmsgpack.c as Redis 7.0 ships
//! it), over mlua: `pack(...)`, `unpack(s)`, `unpack_one(s [, offset])`,
//! `unpack_limit(s, limit [, offset])`, and the `_NAME`, `_VERSION`, `_COPYRIGHT`,
//! `_DESCRIPTION` strings.
//!
//! Encoding: a number equal to its int64 conversion is the smallest msgpack integer holding
//! it, else a float32 when exact, else a float64; strings are fixstr/str8/str16/str32; a table
//! whose keys are exactly 1..n is an array (the empty table too), any other a map in `next`
//! order; tables nested 16 deep (LUACMSGPACK_MAX_NESTING), and values msgpack has no type for
//! (functions, userdata, threads), are nil. Decoding accepts what lua-cmsgpack 0.4.0 does (no
//! bin or ext types: "Bad data format in input."); uint64 is read as a signed int64, as the C
//! does. The C's Lua stack limits are counted, so that deep or long input fails where Redis's
//! does, with its messages ("stack overflow (too many return values at once; ...)", "stack
//! overflow (in function mp_decode_to_lua_array)"); the decoder is iterative, so nesting
//! costs no native stack.
//!
//! Departures from the C: with close to 4000 arguments (the C's limit, "Too many arguments for
//! MessagePack pack.", is kept), tables among them would in the C fail a Lua stack check
//! mid-encoding; here they encode.

use mlua::{Lua, Table, Value};

use super::shim::*;
// ---- end of shared shim ---------------------------------------------------------------------

const MAX_NESTING: usize = 16;
/// LUAI_MAXCSTACK: the most stack slots a C function may hold.
const MAX_C_STACK: usize = 8000;
const TOO_MANY: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";

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

fn enc_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn enc_number(out: &mut Vec<u8>, n: f64) {
    if !n.is_infinite() && cvt_i64(n) as f64 == n {
        enc_int(out, cvt_i64(n));
        return;
    }
    let f = n as f32;
    if f as f64 == n {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Array and map headers: fix (< 16), 16-bit, 32-bit.
fn enc_len(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn enc_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// `table_is_an_array`: every key a number, > 0, equal to its (32-bit) int conversion, and
/// the largest equal to the count.
fn is_array(pairs: &[(Value, Value)]) -> bool {
    let mut max: i32 = 0;
    let mut count: i64 = 0;
    for (k, _) in pairs {
        let Some(n) = num(k) else { return false };
        if n <= 0.0 || cvt_i32(n) as f64 != n {
            return false;
        }
        if n > max as f64 {
            max = cvt_i32(n);
        }
        count += 1;
    }
    max as i64 == count
}

/// `mp_encode_lua_type`; recursion is bounded by the nesting limit.
fn encode(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => enc_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => enc_number(out, num(v).unwrap_or(0.0)),
        Value::Table(t) if level < MAX_NESTING => {
            let mut pairs = Vec::new();
            for kv in t.pairs::<Value, Value>() {
                pairs.push(kv?);
            }
            if is_array(&pairs) {
                let len = t.raw_len();
                enc_len(out, len, 0x90, 0xdc, 0xdd);
                for i in 1..=len {
                    let item: Value = t.raw_get(i)?;
                    encode(out, &item, level + 1)?;
                }
            } else {
                enc_len(out, pairs.len(), 0x80, 0xde, 0xdf);
                for (k, val) in &pairs {
                    encode(out, k, level + 1)?;
                    encode(out, val, level + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack(a: &Args) -> Res<Out> {
    if a.n() == 0 {
        return Err(a.arg_error(0, "MessagePack pack needs input."));
    }
    // lua_checkstack(L, nargs), with the nargs arguments on the stack.
    if a.n() * 2 > MAX_C_STACK {
        return Err(a.arg_error(0, "Too many arguments for MessagePack pack."));
    }
    let mut out = Vec::new();
    for i in 1..=a.n() {
        encode(&mut out, &a.get(i), 0)?;
    }
    one(Value::String(a.lua.create_string(&out)?))
}

enum DErr {
    Eof,
    BadFmt,
    Fail(Fail),
}

impl From<mlua::Error> for DErr {
    fn from(e: mlua::Error) -> Self {
        DErr::Fail(Fail::Lua(e))
    }
}

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cur<'_> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DErr> {
        if self.left() < n {
            return Err(DErr::Eof);
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64, DErr> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &x| (a << 8) | x as u64))
    }
}

/// A container being filled while decoding.
enum Open {
    Array {
        t: Table,
        left: u64,
        next: u64,
    },
    /// `key`: the key read, waiting for its value.
    Map {
        t: Table,
        left: u64,
        key: Option<Value>,
    },
}

/// `mp_decode_to_lua_type`: one whole value. `slots` models the C's Lua stack height: a
/// decoded value, a container's table, an array's pending index and a map's pending key each
/// hold one slot until `lua_settable` pops them.
fn decode(lua: &Lua, c: &mut Cur, slots: &mut usize) -> Result<Value, DErr> {
    let mut open: Vec<Open> = Vec::new();
    loop {
        // luaL_checkstack(L, 1, ...) at the start of every value.
        if *slots + 1 > MAX_C_STACK {
            return Err(DErr::Fail(Fail::Msg(TOO_MANY.into())));
        }
        let t = c.take(1)?[0];
        let nv = |x: f64| Value::Number(x);
        let mut value = match t {
            0x00..=0x7f => nv(t as f64),
            0xe0..=0xff => nv(t as i8 as f64),
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xcc => nv(c.be(1)? as f64),
            0xcd => nv(c.be(2)? as f64),
            0xce => nv(c.be(4)? as f64),
            0xcf => nv(c.be(8)? as i64 as f64),
            0xd0 => nv(c.be(1)? as u8 as i8 as f64),
            0xd1 => nv(c.be(2)? as u16 as i16 as f64),
            0xd2 => nv(c.be(4)? as u32 as i32 as f64),
            0xd3 => nv(c.be(8)? as i64 as f64),
            0xca => nv(f32::from_bits(c.be(4)? as u32) as f64),
            0xcb => nv(f64::from_bits(c.be(8)?)),
            0xa0..=0xbf | 0xd9 | 0xda | 0xdb => {
                let len = match t {
                    0xd9 => c.be(1)?,
                    0xda => c.be(2)?,
                    0xdb => c.be(4)?,
                    _ => (t & 0x1f) as u64,
                } as usize;
                Value::String(lua.create_string(c.take(len)?)?)
            }
            0x90..=0x9f | 0xdc | 0xdd => {
                let len = match t {
                    0xdc => c.be(2)?,
                    0xdd => c.be(4)?,
                    _ => (t & 0x0f) as u64,
                };
                let table = lua.create_table()?;
                *slots += 1;
                if *slots + 1 > MAX_C_STACK {
                    return Err(DErr::Fail(Fail::Msg(
                        "stack overflow (in function mp_decode_to_lua_array)".into(),
                    )));
                }
                if len > 0 {
                    *slots += 1; // the first index
                    open.push(Open::Array {
                        t: table,
                        left: len,
                        next: 1,
                    });
                    continue;
                }
                *slots -= 1; // counted again below, as every finished value
                Value::Table(table)
            }
            0x80..=0x8f | 0xde | 0xdf => {
                let len = match t {
                    0xde => c.be(2)?,
                    0xdf => c.be(4)?,
                    _ => (t & 0x0f) as u64,
                };
                let table = lua.create_table()?;
                if len > 0 {
                    *slots += 1;
                    open.push(Open::Map {
                        t: table,
                        left: len,
                        key: None,
                    });
                    continue;
                }
                Value::Table(table)
            }
            _ => return Err(DErr::BadFmt),
        };
        *slots += 1;
        // A finished value (holding a slot): store it in the innermost open container,
        // closing the containers it fills (their tables keep their slots, as values).
        loop {
            let Some(top) = open.last_mut() else {
                return Ok(value);
            };
            let done = match top {
                Open::Array { t, left, next } => {
                    t.raw_set(*next as f64, value)?;
                    *slots -= 2;
                    *next += 1;
                    *left -= 1;
                    if *left > 0 {
                        *slots += 1; // the next index
                    }
                    *left == 0
                }
                Open::Map { t, left, key } => match key.take() {
                    None => {
                        *key = Some(value);
                        break;
                    }
                    Some(k) => {
                        match k {
                            Value::Nil => {
                                return Err(DErr::Fail(Fail::Bare("table index is nil".into())))
                            }
                            Value::Number(n) if n.is_nan() => {
                                return Err(DErr::Fail(Fail::Bare("table index is NaN".into())))
                            }
                            _ => {}
                        }
                        t.raw_set(k, value)?;
                        *slots -= 2;
                        *left -= 1;
                        *left == 0
                    }
                },
            };
            if !done {
                break;
            }
            value = match open.pop() {
                Some(Open::Array { t, .. }) | Some(Open::Map { t, .. }) => Value::Table(t),
                None => Value::Nil,
            };
        }
    }
}

/// `mp_unpack_full`.
fn unpack_full(a: &Args, limit: i32, offset: i32, mut slots: usize) -> Res<Out> {
    let s = a.check_bytes(1)?;
    let len = s.len();
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset, len as i32
        )
        .into());
    }
    if offset as usize > len {
        return Err(format!(
            "Start offset {} greater than input length {}.",
            offset, len as i32
        )
        .into());
    }
    let limit = if decode_all { i32::MAX } else { limit };
    let mut c = Cur {
        b: &s,
        at: offset as usize,
    };
    let mut vals: Vec<Value> = Vec::new();
    let mut cnt = 0;
    while c.left() > 0 && cnt < limit {
        match decode(a.lua, &mut c, &mut slots) {
            Ok(v) => vals.push(v),
            Err(DErr::Eof) => return Err("Missing bytes in input.".into()),
            Err(DErr::BadFmt) => return Err("Bad data format in input.".into()),
            Err(DErr::Fail(f)) => return Err(f),
        }
        cnt += 1;
    }
    let mut first = None;
    if !decode_all {
        if slots + 1 > MAX_C_STACK {
            return Err("stack overflow (in function mp_unpack_full)".into());
        }
        first = Some(if c.left() == 0 {
            -1.0
        } else {
            (len - c.left()) as i32 as f64
        });
    }
    let n = vals.len() + first.is_some() as usize;
    let t = a.lua.create_table_with_capacity(n, 0)?;
    let mut i = 1;
    if let Some(f) = first {
        t.raw_set(i, f)?;
        i += 1;
    }
    for v in vals {
        t.raw_set(i, v)?;
        i += 1;
    }
    Ok(Out::Spread(t, n))
}

fn unpack(a: &Args) -> Res<Out> {
    unpack_full(a, 0, 0, a.n())
}

fn unpack_one(a: &Args) -> Res<Out> {
    let offset = a.opt_integer(2, 0)? as i32;
    unpack_full(a, 1, offset, 1)
}

fn unpack_limit(a: &Args) -> Res<Out> {
    let limit = a.check_integer(2)? as i32;
    let offset = a.opt_integer(3, 0)? as i32;
    unpack_full(a, limit, offset, 1)
}

/// The `cmsgpack` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = new_lib(
        lua,
        &[
            ("pack", pack),
            ("unpack", unpack),
            ("unpack_one", unpack_one),
            ("unpack_limit", unpack_limit),
        ],
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    use super::super::shim::run;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .set("cmsgpack", super::open(&lua).unwrap())
            .unwrap();
        lua
    }


    // Expected values are redis-server 7.0.15's answers to the same code.
    #[test]
    fn matches_redis() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, 2^53))", "00017fcc80ccffcd0100cdffffce00010000ceffffffffcf0000000100000000cf0020000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1, -2^53))", "ffe0d0dfd080d1ff7fd18000d2ffff7fffd280000000d3ffffffff7fffffffd3ffe0000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(2^63))", "ca5f000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(-2^63))", "d38000000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(2^64))", "ca5f800000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(1e300))", "cb7e37e43c8800759c"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(0.5, 0.1, -1.5, 1/0, -1/0))", "ca3f000000cb3fb999999999999acabfc00000ca7f800000caff800000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(0/0))", "cbfff8000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(-0.0))", "00"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(3.25))", "ca40500000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(nil, true, false))", "c0c3c2"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(''))", "a0"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack('abc'))", "a3616263"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(string.rep('x', 31)))", "bf78787878787878787878787878787878787878787878787878787878787878"),
            ("return #cmsgpack.pack(string.rep('x', 32))", "34"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(string.sub(cmsgpack.pack(string.rep('x', 32)), 1, 3))", "d92078"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(string.sub(cmsgpack.pack(string.rep('x', 256)), 1, 4))", "da010078"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(string.sub(cmsgpack.pack(string.rep('x', 65536)), 1, 6))", "db0001000078"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({}))", "90"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({1, 2, 3}))", "93010203"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({1, nil, 3}))", "8201010303"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({[1] = 1, [3] = 3}))", "8201010303"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({a = 1}))", "81a16101"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({[1.5] = 1}))", "81ca3fc0000001"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({[0] = 1}))", "810001"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({[-1] = 1}))", "81ff01"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({1, 2, x = 3}))", "8301010202a17803"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(string.sub(cmsgpack.pack({1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}), 1, 3))", "dc0010"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({{{}}}))", "919190"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({[true] = false}))", "81c3c2"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({[{}] = 1}))", "819001"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(1, 'a', {2}))", "01a1619102"),
            ("return (function() local t = {} local c = t for i = 1, 20 do c[1] = {} c = c[1] end return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(t)) end)()", "91919191919191919191919191919191c0"),
            ("return (function() local t = {} t[1] = t return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(t)) end)()", "91919191919191919191919191919191c0"),
            ("return (function() local t = {} t.a = t return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack(t)) end)()", "81a16181a16181a16181a16181a16181a16181a16181a16181a16181a16181a16181a16181a16181a16181a16181a161c0"),
            ("return cmsgpack.pack()", "user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack(cmsgpack.pack(1, -1, 0.5, 'x', true, false)))", "1,-1,0.5,x,true,false"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack(cmsgpack.pack(nil)))", "nil"),
            ("return select('#', cmsgpack.unpack(cmsgpack.pack(nil, nil)))", "2"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\204\\255\\205\\1\\0\\206\\0\\1\\0\\0\\207\\0\\0\\0\\1\\0\\0\\0\\0'))", "255,256,65536,4294967296"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\208\\255\\209\\255\\0\\210\\255\\255\\255\\0\\211\\255\\255\\255\\255\\255\\255\\255\\0'))", "-1,-256,-256,-256"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255'))", "-1"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\211\\128\\0\\0\\0\\0\\0\\0\\0'))", "-9.2233720368548e+18"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\202\\63\\192\\0\\0\\203\\63\\185\\153\\153\\153\\153\\153\\154'))", "1.5,0.1"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\217\\3abc\\218\\0\\2de\\219\\0\\0\\0\\1f'))", "abc,de,f"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\196\\2ab\\197\\0\\1c\\198\\0\\0\\0\\1d'))", "user_script:1: Bad data format in input."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\224\\255\\127\\0'))", "-32,-1,127,0"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\193'))", "user_script:1: Bad data format in input."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\199\\1\\1a'))", "user_script:1: Bad data format in input."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\212\\1\\1'))", "user_script:1: Bad data format in input."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\145'))", "user_script:1: Missing bytes in input."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\205\\1'))", "user_script:1: Missing bytes in input."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack('\\163ab'))", "user_script:1: Missing bytes in input."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack(''))", ""),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack())", "user_script:1: bad argument #1 to 'unpack' (string expected, got no value)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack({}))", "user_script:1: bad argument #1 to 'unpack' (string expected, got table)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack(12))", "49,50"),
            ("return (function() local t = cmsgpack.unpack(cmsgpack.pack({1, 2, {a = 'b'}})) return t[1] .. t[2] .. t[3].a end)()", "12b"),
            ("return (function() local t = cmsgpack.unpack('\\147\\1\\192\\3') return tostring(t[1]) .. tostring(t[2]) .. tostring(t[3]) .. #t end)()", "1nil31"),
            ("return (function() local t = cmsgpack.unpack('\\130\\1\\2\\192\\3') return 'x' end)()", "table index is nil"),
            ("return (function() local t = cmsgpack.unpack('\\129\\1\\192') return tostring(next(t)) end)()", "nil"),
            ("return (function() local t = cmsgpack.unpack('\\129\\203\\127\\248\\0\\0\\0\\0\\0\\0\\1') return 'x' end)()", "table index is NaN"),
            ("return (function() local t = cmsgpack.unpack('\\129\\145\\1\\2') local k, v = next(t) return type(k) .. k[1] .. v end)()", "table12"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3)))", "1,1"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 1))", "2,2"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 2))", "-1,3"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 3))", "-1"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 4))", "user_script:1: Start offset 4 greater than input length 3."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), -1))", "user_script:1: Invalid request to unpack with offset of -1 and limit of 3."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one('', 0))", "-1"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2))", "2,1,2"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 1))", "-1,2,3"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0))", "1,2,3"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0, 1))", "1"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 5))", "-1,1,2,3"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), -1, 1))", "user_script:1: Invalid request to unpack with offset of 1 and limit of 3."),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 1.9, 1.9))", "2,2"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3)))", "user_script:1: bad argument #2 to 'unpack_limit' (number expected, got no value)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 'x'))", "user_script:1: bad argument #2 to 'unpack_limit' (number expected, got string)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 'x'))", "user_script:1: bad argument #2 to 'unpack_one' (number expected, got string)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(cmsgpack.unpack_one('\\145'))", "user_script:1: Missing bytes in input."),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7999)))", "7999"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 8000)))", "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7999), 1))", "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
            ("return select('#', cmsgpack.unpack_limit(string.rep('a', 8000), 7998))", "7999"),
            ("return select('#', cmsgpack.unpack_limit(string.rep('a', 8000), 7999))", "user_script:1: stack overflow (in function mp_unpack_full)"),
            ("return select('#', cmsgpack.unpack_limit(string.rep('a', 8000), 7997, 1))", "7998"),
            ("return type(cmsgpack.unpack(string.rep(string.char(0x91), 3999) .. string.char(0)))", "table"),
            ("return cmsgpack.unpack(string.rep(string.char(0x91), 4000) .. string.char(0))", "user_script:1: stack overflow (in function mp_decode_to_lua_array)"),
            ("return type(cmsgpack.unpack(string.rep(string.char(0x81, 0), 3999) .. string.char(0)))", "table"),
            ("return cmsgpack.unpack(string.rep(string.char(0x81, 0), 4000) .. string.char(0))", "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
            ("return type(cmsgpack.unpack(string.rep(string.char(0x81), 3999) .. string.char(0) .. string.rep(string.char(0), 3999)))", "table"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7998) .. string.char(0x91, 0)))", "user_script:1: stack overflow (in function mp_decode_to_lua_array)"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7997) .. string.char(0x91, 0x91, 0)))", "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7996) .. string.char(0x81, 0, 0)))", "7997"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7997) .. string.char(0x81, 0, 0)))", "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7998) .. string.char(0x81, 0, 0)))", "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
            ("return select('#', cmsgpack.unpack(string.rep('a', 7998) .. string.char(0x81, 0x91, 0, 0)))", "user_script:1: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
            ("return cmsgpack._NAME .. ' ' .. cmsgpack._VERSION .. ' ' .. cmsgpack._COPYRIGHT .. ' ' .. cmsgpack._DESCRIPTION", "cmsgpack lua-cmsgpack 0.4.0 Copyright (C) 2012, Salvatore Sanfilippo MessagePack C implementation for Lua"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({a = 1, b = 2, c = 3, d = 4, e = {f = 5, g = {6, 7}}, [10.5] = 'x', [-3] = 'y'}))", "87a16101a16303a16202a16582a167920607a16605a16404fda179ca41280000a178"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(cmsgpack.pack({name = 'n', list = {1, 2, 3}, map = {k1 = 'v1', k2 = 'v2', k3 = 'v3'}, flag = true}))", "84a36d617083a26b31a27631a26b33a27633a26b32a27632a4666c6167c3a46e616d65a16ea46c69737493010203"),
        ];
        for (code, want) in cases {
            assert_eq!(&run(&lua, code), want, "{code}");
        }
    }

    #[test]
    fn deep_key_nesting_and_types() {
        let lua = lua();
        let v: String = lua
            .load(
                "local s = string.rep(string.char(0x81), 4000) .. string.char(0) .. string.rep(string.char(0), 4000)
                 local t = cmsgpack.unpack(s) return type(t)",
            )
            .eval()
            .unwrap();
        assert_eq!(v, "table");
        let v: String = lua
            .load("local s = cmsgpack.pack(print, coroutine.create(function() end)) return (string.gsub(s, '.', function(c) return string.format('%02x', c:byte()) end))")
            .eval()
            .unwrap();
        assert_eq!(v, "c0c0");
    }
}
