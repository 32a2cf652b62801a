//! What the four libraries share: each library function is a small C function
//! (`trampoline`) around its Rust callback, so that its errors are plain strings raised as
//! `luaL_error` raises them. The file's one `unsafe`: the trampoline, which runs on the Lua
//! stack through `mlua::ffi` and raises with `lua_error` only when no Rust value with a
//! destructor is live in its frame.

use mlua::{Function, Lua, MultiValue, Table, Value};

// ---- the shim ----
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
pub(super) enum Fail {
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

pub(super) type Res<T> = std::result::Result<T, Fail>;

/// What a library function answers.
#[allow(dead_code)]
pub(super) enum Out {
    /// These values.
    Values(Vec<Value>),
    /// The values t[1..n] (many values).
    Spread(Table, usize),
}

pub(super) fn one(v: Value) -> Res<Out> {
    Ok(Out::Values(vec![v]))
}

/// The arguments of one call, with `lauxlib`-like checks.
pub(super) struct Args<'a> {
    pub(super) lua: &'a Lua,
    pub(super) v: Vec<Value>,
}

#[allow(dead_code)]
impl<'a> Args<'a> {
    pub(super) fn n(&self) -> usize {
        self.v.len()
    }

    pub(super) fn get(&self, i: usize) -> Value {
        self.v.get(i.wrapping_sub(1)).cloned().unwrap_or(Value::Nil)
    }

    pub(super) fn is_none(&self, i: usize) -> bool {
        i == 0 || i > self.v.len()
    }

    pub(super) fn is_none_or_nil(&self, i: usize) -> bool {
        matches!(self.get(i), Value::Nil)
    }

    /// `luaL_argerror`: "user_script:1: bad argument #i to 'name' (msg)", the name as Lua finds it.
    pub(super) fn arg_error(&self, i: usize, msg: &str) -> Fail {
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

    pub(super) fn type_name(&self, i: usize) -> &'static str {
        if self.is_none(i) {
            return "no value";
        }
        type_name(&self.get(i))
    }

    /// `luaL_typerror`.
    pub(super) fn type_error(&self, i: usize, expected: &str) -> Fail {
        let msg = format!("{} expected, got {}", expected, self.type_name(i));
        self.arg_error(i, &msg)
    }

    /// `lua_tonumber` (strings convert), `None` where Lua gives 0 and `lua_isnumber` is false.
    pub(super) fn to_number(&self, i: usize) -> Res<Option<f64>> {
        Ok(match self.get(i) {
            Value::Integer(n) => Some(n as f64),
            Value::Number(n) => Some(n),
            v @ Value::String(_) => self.lua.coerce_number(v)?,
            _ => None,
        })
    }

    /// `luaL_checknumber`.
    pub(super) fn check_number(&self, i: usize) -> Res<f64> {
        match self.to_number(i)? {
            Some(n) => Ok(n),
            None => Err(self.type_error(i, "number")),
        }
    }

    /// `luaL_checkinteger`: the number truncated (a C cast, saturating here).
    pub(super) fn check_integer(&self, i: usize) -> Res<i64> {
        Ok(self.check_number(i)? as i64)
    }

    /// `luaL_optinteger`.
    pub(super) fn opt_integer(&self, i: usize, def: i64) -> Res<i64> {
        if self.is_none_or_nil(i) {
            Ok(def)
        } else {
            self.check_integer(i)
        }
    }

    /// `luaL_checklstring`: a string, or a number turned into one.
    pub(super) fn check_bytes(&self, i: usize) -> Res<Vec<u8>> {
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
pub(super) unsafe extern "C-unwind" fn trampoline(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
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

pub(super) type LibFn = fn(&Args) -> Res<Out>;

/// Sets `t[name]` to a library function running `f`.
pub(super) fn add_fn(
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
pub(super) fn new_lib(lua: &Lua, fns: &[(&str, LibFn)]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for &(name, f) in fns {
        add_fn(lua, &t, name, f)?;
    }
    Ok(t)
}

/// Runs `code` (which returns one value) and gives it as Lua's tostring would: the
/// libraries' tests compare it with redis-server 7.0.15's answers.
#[cfg(test)]
pub(super) fn run(lua: &Lua, code: &str) -> String {
    let f = format!("local ok, v = pcall(function() {code} end) return tostring(v)");
    lua.load(&f).set_name("@user_script").eval::<String>().unwrap()
}

/// Lua's `type()` of a value.
pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
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
