//! `bit`: LuaBitOp 1.0.2 (Mike Pall's lua_bit.c, as Redis 7.0 loads it), over mlua.
//!
//! All operations work on 32-bit integers; arguments are normalised as LuaBitOp does on
//! doubles: `x + 2^52 + 2^51`, low 32 bits of the result, so fractions round to nearest
//! even and numbers wrap modulo 2^32. Results are signed 32-bit numbers (`tohex` excepted).
//! Non-numbers raise "user_script:1: bad argument #n to 'f' (number expected, got t)"; strings that look like
//! numbers are converted, as `lua_tonumber` does.
//!
//! Departures from the C: none in results. `tohex` with a count of -2^31 (where the C would
//! negate past the int range and push a string of huge length) returns "" here.

use mlua::{Lua, Table, Value};

use super::shim::*;
// ---- end of shared shim ---------------------------------------------------------------------

/// LuaBitOp's `barg`: the argument as 32 bits, by adding 2^52+2^51 to the double.
fn norm(x: f64) -> u32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32
}

fn barg(a: &Args, i: usize) -> Res<u32> {
    let n = a.to_number(i)?.unwrap_or(0.0);
    let b = norm(n);
    if b == 0 && a.to_number(i)?.is_none() {
        return Err(a.type_error(i, "number"));
    }
    Ok(b)
}

fn bret(b: u32) -> Res<Out> {
    one(Value::Number(b as i32 as f64))
}

fn tobit(a: &Args) -> Res<Out> {
    bret(barg(a, 1)?)
}

fn bnot(a: &Args) -> Res<Out> {
    bret(!barg(a, 1)?)
}

fn fold(a: &Args, op: fn(u32, u32) -> u32) -> Res<Out> {
    let mut b = barg(a, 1)?;
    let mut i = a.n();
    while i > 1 {
        b = op(b, barg(a, i)?);
        i -= 1;
    }
    bret(b)
}

fn band(a: &Args) -> Res<Out> {
    fold(a, |x, y| x & y)
}

fn bor(a: &Args) -> Res<Out> {
    fold(a, |x, y| x | y)
}

fn bxor(a: &Args) -> Res<Out> {
    fold(a, |x, y| x ^ y)
}

fn shift(a: &Args, op: fn(u32, u32) -> u32) -> Res<Out> {
    let b = barg(a, 1)?;
    let n = barg(a, 2)? & 31;
    bret(op(b, n))
}

fn lshift(a: &Args) -> Res<Out> {
    shift(a, |b, n| b << n)
}

fn rshift(a: &Args) -> Res<Out> {
    shift(a, |b, n| b >> n)
}

fn arshift(a: &Args) -> Res<Out> {
    shift(a, |b, n| ((b as i32) >> n) as u32)
}

fn rol(a: &Args) -> Res<Out> {
    shift(a, |b, n| b.rotate_left(n))
}

fn ror(a: &Args) -> Res<Out> {
    shift(a, |b, n| b.rotate_right(n))
}

fn bswap(a: &Args) -> Res<Out> {
    bret(barg(a, 1)?.swap_bytes())
}

fn tohex(a: &Args) -> Res<Out> {
    let mut b = barg(a, 1)?;
    let mut n: i32 = if a.is_none(2) { 8 } else { barg(a, 2)? as i32 };
    let mut digits: &[u8; 16] = b"0123456789abcdef";
    if n < 0 {
        n = n.wrapping_neg();
        digits = b"0123456789ABCDEF";
    }
    let n = n.clamp(0, 8) as usize;
    let mut buf = vec![0u8; n];
    for i in (0..n).rev() {
        buf[i] = digits[(b & 15) as usize];
        b >>= 4;
    }
    one(Value::String(a.lua.create_string(&buf)?))
}

/// The `bit` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    new_lib(
        lua,
        &[
            ("tobit", tobit),
            ("bnot", bnot),
            ("band", band),
            ("bor", bor),
            ("bxor", bxor),
            ("lshift", lshift),
            ("rshift", rshift),
            ("arshift", arshift),
            ("rol", rol),
            ("ror", ror),
            ("bswap", bswap),
            ("tohex", tohex),
        ],
    )
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .set("bit", super::open(&lua).unwrap())
            .unwrap();
        lua
    }

    use super::super::shim::run;

    // Expected values are redis-server 7.0.15's answers.
    #[test]
    fn matches_redis() {
        let lua = lua();
        let cases: &[(&str, &str)] = &[
            ("return bit.tobit(0xffffffff)", "-1"),
            ("return bit.tobit(2^32 + 5)", "5"),
            ("return bit.tobit(-1)", "-1"),
            ("return bit.tobit(1.5)", "2"),
            ("return bit.tobit(2.5)", "2"),
            ("return bit.tobit(-2.5)", "-2"),
            ("return bit.tobit(2^40 + 3)", "3"),
            ("return bit.tobit(2^53)", "0"),
            ("return bit.tobit('10')", "10"),
            ("return bit.tobit('0x10')", "16"),
            ("return bit.bnot(0)", "-1"),
            ("return bit.bnot(-5)", "4"),
            ("return bit.band(0xff, 0x0f, 0x3)", "3"),
            ("return bit.bor(1, 2, 4, 2^31)", "-2147483641"),
            ("return bit.bxor(-1, 0xf0)", "-241"),
            ("return bit.lshift(1, 31)", "-2147483648"),
            ("return bit.lshift(1, 32)", "1"),
            ("return bit.lshift(1, -1)", "-2147483648"),
            ("return bit.rshift(-1, 28)", "15"),
            ("return bit.arshift(-256, 4)", "-16"),
            ("return bit.rol(0x12345678, 8)", "878082066"),
            ("return bit.ror(0x12345678, 8)", "2014458966"),
            ("return bit.bswap(0x12345678)", "2018915346"),
            ("return bit.tohex(255)", "000000ff"),
            ("return bit.tohex(-1)", "ffffffff"),
            ("return bit.tohex(255, -4)", "00FF"),
            ("return bit.tohex(0x12345678, 2)", "78"),
            ("return bit.tohex(1, 20)", "00000001"),
            ("return bit.tohex(1, 0)", ""),
            ("return bit.tohex(2^32 + 10)", "0000000a"),
            (
                "return bit.band()",
                "user_script:1: bad argument #1 to 'band' (number expected, got no value)",
            ),
            (
                "return bit.band(1, 'x')",
                "user_script:1: bad argument #2 to 'band' (number expected, got string)",
            ),
            (
                "return bit.tobit({})",
                "user_script:1: bad argument #1 to 'tobit' (number expected, got table)",
            ),
            (
                "return bit.tobit(nil)",
                "user_script:1: bad argument #1 to 'tobit' (number expected, got nil)",
            ),
            (
                "return select(2, pcall(bit.bnot))",
                "bad argument #1 to '?' (number expected, got no value)",
            ),
            ("return type(select(2, pcall(bit.bnot)))", "string"),
        ];
        for (code, want) in cases {
            assert_eq!(&run(&lua, code), want, "{code}");
        }
    }
}
