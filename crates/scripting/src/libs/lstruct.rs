//! `struct`: Roberto Ierusalimschy's struct library (lua_struct.c as Redis 7.0 ships it),
//! over mlua: `struct.pack(fmt, ...)`, `struct.unpack(fmt, data [, pos])`, `struct.size(fmt)`.
//!
//! Formats: `>` big endian, `<` little endian, `!n` maximum alignment n (default 8, must be a
//! power of 2), `x` a zero byte, `b`/`B` char, `h`/`H` short, `l`/`L` long, `T` size_t,
//! `i`/`I`/`in`/`In` int of n bytes (default 4, at most 32), `f` float, `d` double, `cn` n bytes
//! (`c0`: the whole string when packing, the previous result's length when unpacking), `s` a
//! zero-terminated string, spaces ignored. Sizes are those of x86-64 Linux (long = 8), native
//! order little endian. Errors and their wording follow the C.
//!
//! Departures from the C, all in cases where the C has undefined behaviour: a number out of
//! the 64-bit range packed as an integer gives the bytes x86-64 gives (as the C compiled there);
//! an offset so large that `pos + size` would wrap is "data string too short" here where the
//! C would read out of bounds; an invalid format byte >= 0x80 is shown as its Unicode
//! character in the error message rather than the raw byte.

use mlua::{Lua, Table, Value};

use super::shim::*;
// ---- end of shared shim ---------------------------------------------------------------------

const MAXINTSIZE: usize = 32;
/// `MAXALIGN` of the C: the alignment of a double in a struct on x86-64.
const MAXALIGN: usize = 8;
/// LUAI_MAXCSTACK: the most stack slots a C function may hold.
const MAX_C_STACK: usize = 8000;

struct Header {
    little: bool,
    align: usize,
}

impl Header {
    fn new() -> Header {
        Header {
            little: cfg!(target_endian = "little"),
            align: 1,
        }
    }
}

/// The format, read byte by byte up to its first NUL (the C reads a C string).
struct Fmt {
    b: Vec<u8>,
    at: usize,
}

impl Fmt {
    fn new(mut b: Vec<u8>) -> Fmt {
        if let Some(z) = b.iter().position(|&c| c == 0) {
            b.truncate(z);
        }
        Fmt { b, at: 0 }
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.b.get(self.at).copied();
        if c.is_some() {
            self.at += 1;
        }
        c
    }

    fn digit(&self) -> Option<u8> {
        match self.b.get(self.at) {
            Some(&c) if c.is_ascii_digit() => Some(c - b'0'),
            _ => None,
        }
    }

    /// `getnum`.
    fn getnum(&mut self, df: usize) -> Res<usize> {
        if self.digit().is_none() {
            return Ok(df);
        }
        let mut a: i32 = 0;
        while let Some(d) = self.digit() {
            let d = d as i32;
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return Err("integral size overflow".into());
            }
            a = a * 10 + d;
            self.at += 1;
        }
        Ok(a as usize)
    }
}

/// `optsize`.
fn optsize(opt: u8, fmt: &mut Fmt) -> Res<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' => 8,
        b'T' => 8,
        b'f' => 4,
        b'd' => 8,
        b'x' => 1,
        b'c' => fmt.getnum(1)?,
        b'i' | b'I' => {
            let sz = fmt.getnum(4)?;
            if sz > MAXINTSIZE {
                return Err(format!(
                    "integral size {} is larger than limit of {}",
                    sz, MAXINTSIZE
                )
                .into());
            }
            sz
        }
        _ => 0,
    })
}

/// `gettoalign`: padding before an item of `size` at offset `len` (C arithmetic, wrapping).
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    size.wrapping_sub(len & (size - 1)) & (size - 1)
}

/// `controloptions`.
fn controloptions(a: &Args, opt: u8, fmt: &mut Fmt, h: &mut Header) -> Res<()> {
    match opt {
        b' ' => {}
        b'>' => h.little = false,
        b'<' => h.little = true,
        b'!' => {
            let n = fmt.getnum(MAXALIGN)?;
            if !(n > 0 && n & (n - 1) == 0) {
                return Err(format!("alignment {} is not a power of 2", n).into());
            }
            h.align = n;
        }
        _ => {
            let msg = format!("invalid format option '{}'", opt as char);
            return Err(a.arg_error(1, &msg));
        }
    }
    Ok(())
}

/// x86-64's double -> int64 conversion (cvttsd2si): out of range or NaN gives INT64_MIN.
fn cvt_i64(x: f64) -> i64 {
    if x.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// `putinteger`: `(unsigned long)(long)n` for n < 0, else `(unsigned long)n`, as x86-64 does.
fn int_bits(n: f64) -> u64 {
    if n < 0.0 {
        cvt_i64(n) as u64
    } else if n >= 9_223_372_036_854_775_808.0 {
        (cvt_i64(n - 9_223_372_036_854_775_808.0) as u64) ^ (1 << 63)
    } else {
        cvt_i64(n) as u64
    }
}

fn putinteger(out: &mut Vec<u8>, mut value: u64, little: bool, size: usize) {
    let mut buf = vec![0u8; size];
    for i in 0..size {
        let at = if little { i } else { size - 1 - i };
        buf[at] = (value & 0xff) as u8;
        value >>= 8;
    }
    out.extend_from_slice(&buf);
}

fn pack(a: &Args) -> Res<Out> {
    let mut fmt = Fmt::new(a.check_bytes(1)?);
    // The C pushes a nil after the arguments: a missing argument right after them is "nil".
    let mut v = a.v.clone();
    v.push(Value::Nil);
    let a = &Args { lua: a.lua, v };
    let mut h = Header::new();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = fmt.next() {
        let mut size = optsize(opt, &mut fmt)?;
        let toalign = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = a.check_number(arg)?;
                arg += 1;
                putinteger(&mut out, int_bits(n), h.little, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = a.check_number(arg)? as f32;
                arg += 1;
                let b = if h.little {
                    f.to_le_bytes()
                } else {
                    f.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'd' => {
                let d = a.check_number(arg)?;
                arg += 1;
                let b = if h.little {
                    d.to_le_bytes()
                } else {
                    d.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'c' | b's' => {
                let s = a.check_bytes(arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(a.arg_error(arg, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => controloptions(a, opt, &mut fmt, &mut h)?,
        }
    }
    one(Value::String(a.lua.create_string(&out)?))
}

/// `getinteger`, as the C computes it on a 64-bit `unsigned long` (bytes past the eighth
/// shift out; the sign mask's shift count is taken modulo 64, as x86-64 does).
fn getinteger(buf: &[u8], little: bool, signed: bool) -> f64 {
    let size = buf.len();
    let mut l: u64 = 0;
    for i in 0..size {
        let b = if little { buf[size - 1 - i] } else { buf[i] };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    let shift = ((size as u32).wrapping_mul(8).wrapping_sub(1)) & 63;
    let mask = (!0u64) << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(a: &Args) -> Res<Out> {
    let mut fmt = Fmt::new(a.check_bytes(1)?);
    let data = a.check_bytes(2)?;
    let ld = data.len();
    let pos = a.opt_integer(3, 1)? as u64;
    if pos == 0 {
        return Err(a.arg_error(3, "offset must be 1 or greater"));
    }
    let mut pos = (pos - 1) as usize;
    let mut h = Header::new();
    let mut res: Vec<Value> = Vec::new();
    let too_short = |a: &Args| a.arg_error(2, "data string too short");
    while let Some(opt) = fmt.next() {
        let mut size = optsize(opt, &mut fmt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        match pos.checked_add(size) {
            Some(end) if end <= ld => {}
            _ => return Err(too_short(a)),
        }
        // luaL_checkstack(L, 2, "too many results"), the arguments still on the stack.
        if a.n() + res.len() + 2 > MAX_C_STACK {
            return Err("stack overflow (too many results)".into());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = getinteger(&data[pos..pos + size], h.little, opt.is_ascii_lowercase());
                res.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let f = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                res.push(Value::Number(f as f64));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let d = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                res.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    let prev = match res.last() {
                        Some(v @ (Value::Number(_) | Value::Integer(_) | Value::String(_))) => {
                            a.lua.coerce_number(v.clone())?
                        }
                        _ => None,
                    };
                    let Some(n) = prev else {
                        return Err("format 'c0' needs a previous size".into());
                    };
                    res.pop();
                    // (size_t) of the double, as x86-64 converts it.
                    size = int_bits(n) as usize;
                    match pos.checked_add(size) {
                        Some(end) if end <= ld => {}
                        _ => return Err(too_short(a)),
                    }
                }
                res.push(Value::String(a.lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(z) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err("unfinished string in data".into());
                };
                size = z + 1;
                res.push(Value::String(a.lua.create_string(&data[pos..pos + z])?));
            }
            _ => controloptions(a, opt, &mut fmt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    res.push(Value::Number((pos as u64).wrapping_add(1) as i64 as f64));
    let n = res.len();
    let t = a.lua.create_table_with_capacity(n, 0)?;
    for (i, v) in res.into_iter().enumerate() {
        t.raw_set(i + 1, v)?;
    }
    Ok(Out::Spread(t, n))
}

fn size(a: &Args) -> Res<Out> {
    let mut fmt = Fmt::new(a.check_bytes(1)?);
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next() {
        let size = optsize(opt, &mut fmt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if opt == b's' {
            return Err(a.arg_error(1, "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(a.arg_error(1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(a, opt, &mut fmt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    one(Value::Number(pos as f64))
}

/// The `struct` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    new_lib(lua, &[("pack", pack), ("unpack", unpack), ("size", size)])
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    use super::super::shim::run;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .set("struct", super::open(&lua).unwrap())
            .unwrap();
        lua
    }


    // Expected values are redis-server 7.0.15's answers to the same code.
    #[test]
    fn matches_redis() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<i9', 1))", "010000000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('>i9', -2))", "00fffffffffffffffe"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('<i9', '\\1\\0\\0\\0\\0\\0\\0\\0\\2'))", "1,10"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('<I9', '\\255\\255\\255\\255\\255\\255\\255\\255\\255'))", "1.844674407371e+19,10"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('<i0', 'abc'))", "0,1"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<i0', 5))", ""),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('>bBhHlLTiI', -1, 255, -2, 65535, -3, 2^40, 7, -4, 4000000000))", "fffffffefffffffffffffffffffd00000100000000000000000000000007fffffffcee6b2800"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<bBhHlLTiI', -1, 255, -2, 65535, -3, 2^40, 7, -4, 4000000000))", "fffffefffffffdffffffffffffff00000000000100000700000000000000fcffffff00286bee"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('!<bi', 1, 2))", "0100000002000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('!2<bibd', 1, 2, 3, 1.5))", "0100020000000300000000000000f83f"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('!<bdbh', 1, 0.1, 2, 3))", "01000000000000009a9999999999b93f02000300"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('!4 > b x h f', 1, 2, 1.5))", "010000023fc00000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<f', 0.1))", "cdcccc3d"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('>d', -0.0))", "8000000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('s', 'ab'))", "616200"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('c3', 'abcdef'))", "616263"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('c0', 'abcdef'))", "616263646566"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('bc0', 3, 'xyz'))", "0378797a"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<i3', -1))", "ffffff"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<i', 2^31))", "00000080"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<i', 2^32 + 1))", "01000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<l', 2^63))", "0000000000000080"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<l', -2^63))", "0000000000000080"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<L', 2^64))", "0000000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<l', 1e30))", "0000000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<l', -1e30))", "0000000000000080"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<b', 1.7))", "01"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<b', -1.7))", "ff"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('<b', '12'))", "0c"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('s', 12))", "313200"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('!8<bi3b', 1, 2, 3))", "01000002000003"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('!8<bi5b', 1, 2, 3))", "0100000000020000000003"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('!<bi16', 1, 2))", "010000000000000002000000000000000000000000000000"),
            ("return (function(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end)(struct.pack('b\\0b', 1, 2))", "01"),
            ("return struct.pack('b')", "user_script:1: bad argument #2 to 'pack' (number expected, got nil)"),
            ("return struct.pack('b', {})", "user_script:1: bad argument #2 to 'pack' (number expected, got table)"),
            ("return struct.pack('s')", "user_script:1: bad argument #2 to 'pack' (string expected, got nil)"),
            ("return struct.pack('c5', 'abc')", "user_script:1: bad argument #3 to 'pack' (string too short)"),
            ("return struct.pack('q', 1)", "user_script:1: bad argument #1 to 'pack' (invalid format option 'q')"),
            ("return struct.pack('i33', 1)", "user_script:1: integral size 33 is larger than limit of 32"),
            ("return struct.pack('!3', 1)", "user_script:1: alignment 3 is not a power of 2"),
            ("return struct.pack('!0', 1)", "user_script:1: alignment 0 is not a power of 2"),
            ("return struct.pack('i99999999999', 1)", "user_script:1: integral size overflow"),
            ("return struct.pack()", "user_script:1: bad argument #1 to 'pack' (string expected, got no value)"),
            ("return struct.pack({})", "user_script:1: bad argument #1 to 'pack' (string expected, got table)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('>bBhHlLTiI', struct.pack('>bBhHlLTiI', -1, 255, -2, 65535, -3, 2^40, 7, -4, 4000000000)))", "-1,255,-2,65535,-3,1099511627776,7,-4,4000000000,39"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('<bBhHlLTiI', struct.pack('<bBhHlLTiI', -1, 255, -2, 65535, -3, 2^40, 7, -4, 4000000000)))", "-1,255,-2,65535,-3,1099511627776,7,-4,4000000000,39"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('<fd', struct.pack('<fd', 0.1, 0.1)))", "0.10000000149012,0.1,13"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('>fd', struct.pack('>fd', 1/0, -1/0)))", "inf,-inf,13"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('sb', 'hello\\0\\5'))", "hello,5,8"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('s', 'hello'))", "user_script:1: unfinished string in data"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('bc0', '\\3abcd'))", "abc,5"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('c0', 'abcd'))", "user_script:1: format 'c0' needs a previous size"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('c1c0', '2abcd'))", "ab,4"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('c1c0', 'xabcd'))", "user_script:1: format 'c0' needs a previous size"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('bc0', '\\9abcd'))", "user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('c2', 'abcd', 3))", "cd,5"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('c2', 'abcd', 4))", "user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('b', 'abcd', 5))", "user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('', 'abcd', 5))", "5"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('', 'abcd', 6))", "6"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('b', 'abcd', 0))", "user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('b', 'abcd', -1))", "user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('b', 'abcd', 2.9))", "98,3"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('!4bi', '\\1\\0\\0\\0\\2\\0\\0\\0'))", "1,2,9"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('!4bi', '\\1\\0\\0\\0\\2\\0\\0'))", "user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('xxb', 'abc'))", "99,4"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('z', 'abc'))", "user_script:1: bad argument #1 to 'unpack' (invalid format option 'z')"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('>!2h', 'abcd', 2))", "25444,5"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('b'))", "user_script:1: bad argument #2 to 'unpack' (string expected, got no value)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('b', {}))", "user_script:1: bad argument #2 to 'unpack' (string expected, got table)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('b', 'a', 'x'))", "user_script:1: bad argument #3 to 'unpack' (number expected, got string)"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('>I3', '\\1\\2\\3'))", "66051,4"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('>i3', '\\255\\255\\254'))", "-2,4"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('<i8', '\\255\\255\\255\\255\\255\\255\\255\\127'))", "9.2233720368548e+18,9"),
            ("return (function(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ',') end)(struct.unpack('<I8', '\\255\\255\\255\\255\\255\\255\\255\\255'))", "1.844674407371e+19,9"),
            ("return select('#', struct.unpack(string.rep('b', 7997), string.rep('a', 7997)))", "7998"),
            ("return select('#', struct.unpack(string.rep('b', 7998), string.rep('a', 7998)))", "user_script:1: stack overflow (too many results)"),
            ("return struct.size('bhilfdxc3')", "31"),
            ("return struct.size('!bhilfdxc3')", "36"),
            ("return struct.size('!4bd')", "12"),
            ("return struct.size('i0')", "0"),
            ("return struct.size('z')", "0"),
            ("return struct.size('s')", "user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)"),
            ("return struct.size('c0')", "user_script:1: bad argument #1 to 'size' (option 'c0' has no fixed size)"),
            ("return struct.size('!5')", "user_script:1: alignment 5 is not a power of 2"),
            ("return struct.size('i40')", "user_script:1: integral size 40 is larger than limit of 32"),
            ("return struct.size(' <>')", "0"),
            ("return struct.size('#')", "user_script:1: bad argument #1 to 'size' (invalid format option '#')"),
            ("return struct.size()", "user_script:1: bad argument #1 to 'size' (string expected, got no value)"),
            ("return struct.pack('bbb', 1)", "user_script:1: bad argument #3 to 'pack' (number expected, got nil)"),
            ("return struct.pack('c', 1)", "1"),
        ];
        for (code, want) in cases {
            assert_eq!(&run(&lua, code), want, "{code}");
        }
    }

    #[test]
    fn errors_are_strings() {
        let lua = lua();
        let v: String = lua
            .load("local ok, e = pcall(struct.pack, 'q') return type(e) .. ':' .. e")
            .eval()
            .unwrap();
        assert_eq!(
            v,
            "string:bad argument #1 to '?' (invalid format option 'q')"
        );
    }
}
