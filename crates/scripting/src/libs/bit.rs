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

use mlua::{Function, Lua, MultiValue, Table, Value};

// ---- shared shim (identical in each of the four library files) ----------------------------
//
// A C library function raises errors with `luaL_error`: a plain string, prefixed with the
// position of the Lua code that called it ("user_script:1: ..."). An mlua callback that
// returns `Err` raises an mlua error object (userdata) instead, which a script's `pcall` would
// see. So each library function is a small C function (`trampoline`) holding the Rust callback
// as its upvalue: the callback *returns* its outcome, `true, ...` (the results), `false, msg`
// (an error; `false, msg, true` for one without position) or `n, t` (the results are
// t[1..n], for calls that may return thousands of values, more than an mlua callback pushes),
// and the trampoline returns the results or raises msg as luaL_error would. As the script calls a C function, as on Redis, the function names in
// "bad argument" messages and the error positions come out the same, tail calls included.

/// A failure: a Lua error message (raised as a string, after the caller's position as
/// `luaL_error` puts it), a bare one (as Lua's own errors inside a C function, such as "table
/// index is nil", come without position) or an mlua error (passed on).
#[allow(dead_code)]
enum Fail {
    Msg(String),
    Bare(String),
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail::Msg(s)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Self {
        Fail::Msg(s.to_string())
    }
}

type Res<T> = std::result::Result<T, Fail>;

/// What a library function answers.
#[allow(dead_code)]
enum Out {
    /// These values.
    Values(Vec<Value>),
    /// The values t[1..n] (many values).
    Spread(Table, usize),
}

fn one(v: Value) -> Res<Out> {
    Ok(Out::Values(vec![v]))
}

/// The arguments of one call, with `lauxlib`-like checks.
struct Args<'a> {
    lua: &'a Lua,
    v: Vec<Value>,
}

#[allow(dead_code)]
impl<'a> Args<'a> {
    fn n(&self) -> usize {
        self.v.len()
    }

    fn get(&self, i: usize) -> Value {
        self.v.get(i.wrapping_sub(1)).cloned().unwrap_or(Value::Nil)
    }

    fn is_none(&self, i: usize) -> bool {
        i == 0 || i > self.v.len()
    }

    fn is_none_or_nil(&self, i: usize) -> bool {
        matches!(self.get(i), Value::Nil)
    }

    /// `luaL_argerror`: "user_script:1: bad argument #i to 'name' (msg)", the name as Lua finds it.
    fn arg_error(&self, i: usize, msg: &str) -> Fail {
        // Level 0 is this callback, level 1 the Lua wrapper the script called.
        let (name, method) = self
            .lua
            .inspect_stack(1, |d| {
                let n = d.names();
                (
                    n.name.map(|s| s.into_owned()),
                    n.name_what == Some("method"),
                )
            })
            .unwrap_or((None, false));
        let mut i = i as i64;
        if method {
            i -= 1;
            if i == 0 {
                return Fail::Msg(format!(
                    "calling '{}' on bad self ({})",
                    name.unwrap_or_else(|| "?".into()),
                    msg
                ));
            }
        }
        Fail::Msg(format!(
            "bad argument #{} to '{}' ({})",
            i,
            name.unwrap_or_else(|| "?".into()),
            msg
        ))
    }

    fn type_name(&self, i: usize) -> &'static str {
        if self.is_none(i) {
            return "no value";
        }
        match self.get(i) {
            Value::Nil => "nil",
            Value::Boolean(_) => "boolean",
            Value::LightUserData(_) => "userdata",
            Value::Integer(_) | Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Table(_) => "table",
            Value::Function(_) => "function",
            Value::Thread(_) => "thread",
            _ => "userdata",
        }
    }

    /// `luaL_typerror`.
    fn type_error(&self, i: usize, expected: &str) -> Fail {
        let msg = format!("{} expected, got {}", expected, self.type_name(i));
        self.arg_error(i, &msg)
    }

    /// `lua_tonumber` (strings convert), `None` where Lua gives 0 and `lua_isnumber` is false.
    fn to_number(&self, i: usize) -> Res<Option<f64>> {
        Ok(match self.get(i) {
            Value::Integer(n) => Some(n as f64),
            Value::Number(n) => Some(n),
            v @ Value::String(_) => self.lua.coerce_number(v)?,
            _ => None,
        })
    }

    /// `luaL_checknumber`.
    fn check_number(&self, i: usize) -> Res<f64> {
        match self.to_number(i)? {
            Some(n) => Ok(n),
            None => Err(self.type_error(i, "number")),
        }
    }

    /// `luaL_checkinteger`: the number truncated (a C cast, saturating here).
    fn check_integer(&self, i: usize) -> Res<i64> {
        Ok(self.check_number(i)? as i64)
    }

    /// `luaL_optinteger`.
    fn opt_integer(&self, i: usize, def: i64) -> Res<i64> {
        if self.is_none_or_nil(i) {
            Ok(def)
        } else {
            self.check_integer(i)
        }
    }

    /// `luaL_checklstring`: a string, or a number turned into one.
    fn check_bytes(&self, i: usize) -> Res<Vec<u8>> {
        match self.get(i) {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            v @ (Value::Integer(_) | Value::Number(_)) => match self.lua.coerce_string(v)? {
                Some(s) => Ok(s.as_bytes().to_vec()),
                None => Err(self.type_error(i, "string")),
            },
            _ => Err(self.type_error(i, "string")),
        }
    }
}

/// The C function a script calls: runs the Rust callback (upvalue 1), then returns its results
/// or raises its error message as `luaL_error` does. No Rust value with a destructor is live
/// when Lua unwinds (longjmp) through this frame.
unsafe extern "C-unwind" fn trampoline(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    let nargs = ffi::lua_gettop(l);
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
    ffi::lua_insert(l, 1);
    ffi::lua_call(l, nargs, ffi::LUA_MULTRET);
    let nres = ffi::lua_gettop(l);
    if nres >= 1 && ffi::lua_type(l, 1) == ffi::LUA_TBOOLEAN {
        if ffi::lua_toboolean(l, 1) != 0 {
            return nres - 1;
        }
        ffi::lua_checkstack(l, 4);
        if ffi::lua_toboolean(l, 3) != 0 {
            ffi::lua_pushvalue(l, 2);
        } else {
            ffi::luaL_where(l, 1);
            ffi::lua_pushvalue(l, 2);
            ffi::lua_concat(l, 2);
        }
        ffi::lua_error(l);
    }
    // `n, t`: spread t[1..n].
    let n = ffi::lua_tointeger(l, 1) as std::os::raw::c_int;
    ffi::lua_settop(l, 2);
    ffi::lua_remove(l, 1);
    if n < 0 || ffi::lua_checkstack(l, n) == 0 {
        ffi::lua_pushstring(l, c"stack overflow (too many results)".as_ptr());
        ffi::lua_error(l);
    }
    for i in 1..=n {
        ffi::lua_rawgeti(l, 1, i as _);
    }
    n
}

type LibFn = fn(&Args) -> Res<Out>;

/// Sets `t[name]` to a library function running `f`.
fn add_fn(
    lua: &Lua,
    t: &Table,
    name: &str,
    f: impl Fn(&Args) -> Res<Out> + Send + 'static,
) -> mlua::Result<()> {
    let raw = lua.create_function(move |lua, mv: MultiValue| {
        let args = Args {
            lua,
            v: mv.into_vec(),
        };
        match f(&args) {
            Ok(Out::Values(mut v)) => {
                v.insert(0, Value::Boolean(true));
                Ok(MultiValue::from_vec(v))
            }
            Ok(Out::Spread(t, n)) => Ok(MultiValue::from_vec(vec![
                Value::Number(n as f64),
                Value::Table(t),
            ])),
            Err(Fail::Msg(m)) => Ok(MultiValue::from_vec(vec![
                Value::Boolean(false),
                Value::String(lua.create_string(m)?),
            ])),
            Err(Fail::Bare(m)) => Ok(MultiValue::from_vec(vec![
                Value::Boolean(false),
                Value::String(lua.create_string(m)?),
                Value::Boolean(true),
            ])),
            Err(Fail::Lua(e)) => Err(e),
        }
    })?;
    // SAFETY: the closure is built on the stack exec_raw gives, from the one value pushed.
    let wrapped: Function =
        unsafe { lua.exec_raw(raw, |l| mlua::ffi::lua_pushcclosure(l, trampoline, 1))? };
    t.raw_set(name, wrapped)
}

/// A new table holding the library functions `fns`.
#[allow(dead_code)]
fn new_lib(lua: &Lua, fns: &[(&str, LibFn)]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for &(name, f) in fns {
        add_fn(lua, &t, name, f)?;
    }
    Ok(t)
}
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

    /// Runs `code` (which returns one value) and gives it as Lua's tostring would.
    fn run(lua: &Lua, code: &str) -> String {
        let f = format!("local ok, v = pcall(function() {code} end) return tostring(v)");
        lua.load(&f)
            .set_name("@user_script")
            .eval::<String>()
            .unwrap()
    }

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
