//! One Lua 5.1 state set up as Redis 7.0 sets up its scripting engine (`script_lua.c`,
//! `eval.c`, `function_lua.c`), and the running of scripts and functions in it.
//!
//! The environment: the base, table, string and math libraries, `cjson`, `cmsgpack`, `bit`
//! and `struct`, the `redis` table; no `os`, `io`, `package`, `debug`, `loadfile`, `dofile`
//! or `print`. Globals are protected: a script's code runs with a proxy of the globals as its
//! environment, which raises "Script attempted to access nonexistent global variable" for an
//! unknown name and "Attempt to modify a readonly table" for an assignment, as Redis's
//! patched Lua does; the library tables are read-only proxies too. (Redis marks the tables
//! read-only inside its own Lua; mlua's vendored Lua 5.1 is stock, hence proxies. What a
//! proxy cannot stop: `rawset` on it, iterating a library table with `pairs`.)
//!
//! A command a script calls goes to a [`Host`] (the server: it runs the command on the shard
//! that owns its keys); the reply comes back converted by `convert.rs`. Errors carry
//! Redis's text: a failed `redis.call` raises `{err = "..."}`, and a script that fails
//! answers "<error> script: <sha>, on @user_script:<line>.", as Redis 7.0.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use abacus_protocol::{format_double_g17, Bytes, Frame, Protocol};
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use crate::convert::{canonical, error_table, lua_to_reply, normalize_error, reply_to_lua};
use crate::shared::{FunctionMeta, Libraries, Library, Shared};

/// What the server provides to a running script.
pub trait Host {
    /// Runs one command (its name first). An error reply is an error of the command;
    /// errors of the call itself (unknown command, not allowed from scripts...) are error
    /// replies too, with Redis's text.
    fn call(&mut self, args: Vec<Bytes>) -> Frame;
    /// Whether the script's user may run this command (`redis.acl_check_cmd`); None for an
    /// unknown command.
    fn acl_check(&mut self, args: &[Bytes]) -> Option<bool>;
    /// `redis.set_repl(flags)`: 0 none, 1 the log, 2 replicas, 3 both.
    fn set_repl(&mut self, flags: u8);
    /// `redis.log(level, message)`, level 0 (debug) to 3 (warning).
    fn log(&mut self, level: u8, message: &str);
}

/// How a script was invoked.
#[derive(Clone, Copy, Debug)]
pub struct Invocation<'a> {
    pub keys: &'a [Bytes],
    pub args: &'a [Bytes],
    /// The caller's protocol (how a null reads).
    pub caller_resp3: bool,
}

/// The error Redis raises from its C functions: the message goes into `{err = ...}` as is.
#[derive(Debug)]
struct RedisError(String);

impl std::fmt::Display for RedisError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedisError {}

fn redis_error(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::external(RedisError(msg.into()))
}

/// The message of an error raised from Rust: Redis's text if it is one of ours, else the
/// innermost cause's.
fn error_message(e: &mlua::Error) -> (String, bool) {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        mlua::Error::ExternalError(x) => match x.downcast_ref::<RedisError>() {
            Some(r) => (r.0.clone(), true),
            None => (x.to_string(), false),
        },
        mlua::Error::RuntimeError(s) => (s.clone(), false),
        mlua::Error::MemoryError(s) => (s.clone(), false),
        mlua::Error::SyntaxError { message, .. } => (message.clone(), false),
        other => (other.to_string(), false),
    }
}

/// Per-run state the `redis.*` functions read.
struct RunState {
    /// `redis.setresp`: the protocol replies are converted from.
    resp3: bool,
    /// Running FUNCTION LOAD's code: only `register_function` and logging are allowed.
    loading: Option<Vec<(FunctionMeta, Function)>>,
    /// Inside a script invocation (redis.call is allowed).
    in_run: bool,
}

/// The names a library table keeps while FUNCTION LOAD runs its code.
const LOAD_ALLOWED: &[&str] = &["register_function", "log", "LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING", "REDIS_VERSION", "REDIS_VERSION_NUM", "setresp"];

/// Flags a function or a script's shebang may declare.
pub const SCRIPT_FLAGS: &[&str] = &["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

/// Makes `codes` (a snapshot's, the log's or a primary's FUNCTION libraries) `shared`'s
/// libraries, compiling each on a Lua state of the caller's thread; nothing changes if one
/// does not load (the error names it).
pub fn install_libraries(shared: &Arc<Shared>, codes: Vec<Bytes>, redis_version: &str, redis_version_num: u32) -> Result<(), String> {
    if codes.is_empty() {
        *shared.libraries.write() = Libraries::default();
        return Ok(());
    }
    let mut vm = Vm::new(shared.clone(), redis_version, redis_version_num).map_err(|e| format!("cannot start the Lua engine: {e}"))?;
    let mut next = Libraries::default();
    for code in codes {
        let shown = parse_library_header(&code).map(|(n, _)| n).unwrap_or_default();
        let (name, functions) = vm.load_library(&code).map_err(|e| format!("FUNCTION library '{shown}' does not load: {e}"))?;
        next.add(Library { name, code, functions, id: shared.new_library_id() }, false).map_err(|e| format!("FUNCTION library '{shown}': {e}"))?;
    }
    *shared.libraries.write() = next;
    Ok(())
}

/// A shard's Lua state.
pub struct Vm {
    lua: Lua,
    /// The protected globals every script sees.
    env: Table,
    /// Internal state out of scripts' reach: `call`, the running script's host bridge.
    hidden: Table,
    /// `runner(f, a, b)`: calls `f(a, b)` under xpcall with the error handler.
    runner: Function,
    /// Set to stop the running script (SCRIPT KILL, or the server stepping back from a run
    /// it will redo): its hook and every `pcall` raise the error again until it ends.
    kill: Arc<std::sync::atomic::AtomicBool>,
    /// Scripts run (for the garbage collection's pace).
    runs: u64,
    /// EVAL scripts compiled here, by SHA1.
    compiled: HashMap<String, Function>,
    /// FUNCTION libraries compiled here: library id → function name → function.
    libraries: HashMap<u64, HashMap<String, Function>>,
}

impl Vm {
    pub fn new(shared: Arc<Shared>, redis_version: &str, redis_version_num: u32) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::new())?;
        let limit = shared.heap_limit.load(Ordering::Relaxed);
        if limit > 0 {
            lua.set_memory_limit(limit as usize)?;
        }
        let g = lua.globals();
        for name in ["dofile", "loadfile", "print", "module", "require"] {
            g.raw_set(name, Value::Nil)?;
        }
        crate::libs::open_all(&lua)?;
        lua.set_app_data(RunState { resp3: false, loading: None, in_run: false });
        let hidden = lua.create_table()?;
        let redis = redis_table(&lua, &shared, &hidden, redis_version, redis_version_num)?;
        g.raw_set("redis", redis)?;
        // math.random and math.randomseed as Redis's (`redisLrand48`, shared by all shards).
        let math: Table = g.raw_get("math")?;
        let sh = shared.clone();
        math.raw_set(
            "random",
            lua.create_function(move |_, args: MultiValue| {
                let r = sh.random();
                let int = |v: &Value| -> mlua::Result<i64> {
                    match v {
                        Value::Integer(n) => Ok(*n as i64),
                        Value::Number(n) => Ok(*n as i64),
                        Value::String(s) => s.to_str().ok().and_then(|s| s.trim().parse::<f64>().ok()).map(|n| n as i64).ok_or_else(|| mlua::Error::runtime("bad argument to 'random' (number expected)")),
                        _ => Err(mlua::Error::runtime("bad argument to 'random' (number expected)")),
                    }
                };
                match args.len() {
                    0 => Ok(r),
                    1 => {
                        let u = int(&args[0])?;
                        if u < 1 {
                            return Err(mlua::Error::runtime("bad argument #1 to 'random' (interval is empty)"));
                        }
                        Ok((r * u as f64).floor() + 1.0)
                    }
                    2 => {
                        let (l, u) = (int(&args[0])?, int(&args[1])?);
                        if l > u {
                            return Err(mlua::Error::runtime("bad argument #2 to 'random' (interval is empty)"));
                        }
                        Ok((r * (u - l + 1) as f64).floor() + l as f64)
                    }
                    _ => Err(mlua::Error::runtime("wrong number of arguments")),
                }
            })?,
        )?;
        let sh = shared.clone();
        math.raw_set(
            "randomseed",
            lua.create_function(move |_, seed: f64| {
                sh.randomseed(seed as i64 as i32);
                Ok(())
            })?,
        )?;
        // The internal chunk: pcall as Redis's (an error table reads as its message), the
        // protected environment and read-only library tables, and the runner.
        let kill = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let killed = {
            let k = kill.clone();
            lua.create_function(move |_, ()| Ok(k.load(Ordering::Relaxed)))?
        };
        let message_of = lua.create_function(|lua, e: Value| -> mlua::Result<Value> {
            Ok(match e {
                Value::Error(e) => Value::String(lua.create_string(error_message(&e).0)?),
                other => other,
            })
        })?;
        let handler = lua.create_function(|lua, e: Value| error_handler(lua, e))?;
        let setup: Table = lua
            .load(INTERNAL)
            .set_name("=abacus")
            .call((g.clone(), killed, message_of, handler))?;
        let env: Table = setup.raw_get("env")?;
        let runner: Function = setup.raw_get("runner")?;
        let loading_probe = {
            lua.create_function(|lua, ()| Ok(lua.app_data_ref::<RunState>().is_some_and(|s| s.loading.is_some())))?
        };
        let protect: Function = setup.raw_get("protect_libraries")?;
        let allowed = lua.create_table()?;
        for name in LOAD_ALLOWED {
            allowed.raw_set(*name, true)?;
        }
        protect.call::<()>((loading_probe, allowed))?;
        // Every 100,000 instructions: SCRIPT KILL / FUNCTION KILL asked to stop?
        let k = kill.clone();
        lua.set_hook(HookTriggers::new().every_nth_instruction(100_000), move |_, _| {
            if k.load(Ordering::Relaxed) {
                return Err(redis_error("ERR Script killed by user with SCRIPT KILL..."));
            }
            Ok(VmState::Continue)
        })?;
        Ok(Vm { lua, env, hidden, runner, kill, runs: 0, compiled: HashMap::new(), libraries: HashMap::new() })
    }

    /// This state's kill flag (see the field).
    pub fn kill_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.kill.clone()
    }

    /// Bytes this state's heap holds.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Compiles an EVAL body; the error reply Redis gives for a body that does not compile.
    pub fn compile(&mut self, sha: &str, body: &[u8]) -> Result<(), Frame> {
        if self.compiled.contains_key(sha) {
            return Ok(());
        }
        let code = strip_shebang(body);
        match self.lua.load(code).set_name("@user_script").set_environment(self.env.clone()).into_function() {
            Ok(f) => {
                self.compiled.insert(sha.to_string(), f);
                Ok(())
            }
            Err(e) => Err(Frame::error(format!("ERR Error compiling script (new function): {}", error_message(&e).0.trim_end()))),
        }
    }

    /// SCRIPT FLUSH: forgets the compiled scripts.
    pub fn flush_scripts(&mut self) {
        self.compiled.clear();
        let _ = self.lua.gc_collect();
    }

    /// Runs an EVAL script (compiling it if this state has not yet).
    pub fn eval(&mut self, sha: &str, body: &[u8], inv: Invocation<'_>, host: &mut dyn Host) -> Frame {
        if let Err(e) = self.compile(sha, body) {
            return e;
        }
        let Some(f) = self.compiled.get(sha).cloned() else { return Frame::error("ERR script vanished") };
        let set = (|| -> mlua::Result<()> {
            self.env.raw_set("KEYS", self.lua.create_sequence_from(inv.keys.iter().map(|k| self.lua.create_string(k)).collect::<mlua::Result<Vec<_>>>()?)?)?;
            self.env.raw_set("ARGV", self.lua.create_sequence_from(inv.args.iter().map(|k| self.lua.create_string(k)).collect::<mlua::Result<Vec<_>>>()?)?)?;
            Ok(())
        })();
        if let Err(e) = set {
            return Frame::error(format!("ERR {}", error_message(&e).0));
        }
        self.run(f, None, sha, inv, host)
    }

    /// Runs a FUNCTION library's function (compiling the library here if needed).
    pub fn fcall(&mut self, lib: &Library, function: &str, inv: Invocation<'_>, host: &mut dyn Host) -> Frame {
        if !self.libraries.contains_key(&lib.id) {
            match self.load_library_code(&lib.code) {
                Ok((_, functions)) => {
                    self.libraries.insert(lib.id, functions.into_iter().map(|(m, f)| (m.name, f)).collect());
                }
                Err(e) => return Frame::error(e),
            }
        }
        let Some(f) = self.libraries.get(&lib.id).and_then(|l| l.get(function)).cloned() else {
            return Frame::error("ERR Function not found");
        };
        let args = (|| -> mlua::Result<(Table, Table)> {
            Ok((
                self.lua.create_sequence_from(inv.keys.iter().map(|k| self.lua.create_string(k)).collect::<mlua::Result<Vec<_>>>()?)?,
                self.lua.create_sequence_from(inv.args.iter().map(|k| self.lua.create_string(k)).collect::<mlua::Result<Vec<_>>>()?)?,
            ))
        })();
        match args {
            Ok(a) => self.run(f, Some(a), function, inv, host),
            Err(e) => Frame::error(format!("ERR {}", error_message(&e).0)),
        }
    }

    /// Forgets libraries this state compiled that are no longer loaded.
    pub fn retain_libraries(&mut self, live: &[u64]) {
        self.libraries.retain(|id, _| live.contains(id));
    }

    /// FUNCTION LOAD's check: runs the library's code (after its `#!lua name=...` line)
    /// with only `redis.register_function` and logging available; returns the library's
    /// name and its functions. Errors are Redis's replies.
    pub fn load_library(&mut self, code: &[u8]) -> Result<(String, Vec<FunctionMeta>), String> {
        let (name, functions) = self.load_library_code(code)?;
        Ok((name, functions.into_iter().map(|(m, _)| m).collect()))
    }

    #[allow(clippy::type_complexity)]
    fn load_library_code(&mut self, code: &[u8]) -> Result<(String, Vec<(FunctionMeta, Function)>), String> {
        let (name, body) = parse_library_header(code)?;
        let f = self
            .lua
            .load(body)
            .set_name("@user_function")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", error_message(&e).0.trim_end()))?;
        if let Some(mut st) = self.lua.app_data_mut::<RunState>() {
            st.loading = Some(Vec::new());
        }
        let ran = self.runner.call::<(bool, Value)>((f, Value::Nil, Value::Nil));
        let registered = self.lua.app_data_mut::<RunState>().and_then(|mut st| st.loading.take()).unwrap_or_default();
        match ran {
            Ok((true, _)) => {}
            Ok((false, e)) => return Err(format!("ERR Error registering functions: {}", error_text(&e))),
            Err(e) => return Err(format!("ERR Error registering functions: {}", error_message(&e).0)),
        }
        if registered.is_empty() {
            return Err("ERR No functions registered".to_string());
        }
        Ok((name, registered))
    }

    fn run(&mut self, f: Function, fargs: Option<(Table, Table)>, name: &str, inv: Invocation<'_>, host: &mut dyn Host) -> Frame {
        if let Some(mut st) = self.lua.app_data_mut::<RunState>() {
            st.resp3 = false;
            st.in_run = true;
        }
        let hidden = self.hidden.clone();
        let outcome = self.lua.scope(|scope| {
            let bridge = scope.create_function_mut(|lua, (op, args): (u8, MultiValue)| -> mlua::Result<Value> {
                match op {
                    // call (raise) or pcall
                    0 | 1 => {
                        let argv = lua_args(&args)?;
                        let Some(argv) = argv else {
                            return Err(redis_error("ERR Please specify at least one argument for this redis lib call"));
                        };
                        let resp3 = lua.app_data_ref::<RunState>().is_some_and(|s| s.resp3);
                        let reply = canonical(host.call(argv), if resp3 { Protocol::Resp3 } else { Protocol::Resp2 });
                        if let Frame::Error(e) = &reply {
                            let msg = String::from_utf8_lossy(&normalize_error(e)).into_owned();
                            if op == 0 {
                                return Err(redis_error(msg));
                            }
                            return Ok(Value::Table(error_table(lua, msg.as_bytes())?));
                        }
                        reply_to_lua(lua, &reply, resp3)
                    }
                    // acl_check_cmd
                    2 => {
                        let Some(argv) = lua_args(&args)? else {
                            return Err(redis_error("ERR Please specify at least one argument for this redis lib call"));
                        };
                        match host.acl_check(&argv) {
                            Some(ok) => Ok(Value::Boolean(ok)),
                            None => Err(redis_error("ERR Invalid command passed to redis.acl_check_cmd()")),
                        }
                    }
                    // set_repl
                    3 => {
                        let flags = match args.front() {
                            Some(Value::Integer(n)) => *n as i64,
                            Some(Value::Number(n)) => *n as i64,
                            _ => -1,
                        };
                        if !(0..=3).contains(&flags) {
                            return Err(redis_error("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."));
                        }
                        host.set_repl(flags as u8);
                        Ok(Value::Nil)
                    }
                    // log
                    _ => {
                        let level = match args.front() {
                            Some(Value::Integer(n)) => *n as i64,
                            Some(Value::Number(n)) => *n as i64,
                            _ => 0,
                        };
                        let text: Vec<String> = args.iter().skip(1).filter_map(|v| match v {
                            Value::String(s) => Some(s.to_string_lossy()),
                            Value::Integer(n) => Some(n.to_string()),
                            Value::Number(n) => Some(n.to_string()),
                            _ => None,
                        }).collect();
                        host.log(level.clamp(0, 3) as u8, &text.join(" "));
                        Ok(Value::Nil)
                    }
                }
            })?;
            hidden.raw_set("bridge", bridge)?;
            let r = match fargs {
                Some((k, a)) => self.runner.call::<(bool, Value)>((f, k, a)),
                None => self.runner.call::<(bool, Value)>((f, Value::Nil, Value::Nil)),
            };
            hidden.raw_set("bridge", Value::Nil)?;
            let resp3 = self.lua.app_data_ref::<RunState>().is_some_and(|s| s.resp3);
            Ok(match r {
                Ok((true, v)) => lua_to_reply(&v, resp3, 0),
                Ok((false, e)) => script_error(&e, name),
                Err(e) => Frame::error(format!("ERR Error running script {}, {}", name, error_message(&e).0)),
            })
        });
        if let Some(mut st) = self.lua.app_data_mut::<RunState>() {
            st.in_run = false;
            st.resp3 = false;
        }
        let _ = self.env.raw_set("KEYS", Value::Nil);
        let _ = self.env.raw_set("ARGV", Value::Nil);
        self.kill.store(false, Ordering::Relaxed);
        // A step of garbage collection every 50 runs, as Redis (`LUA_GC_CYCLE_PERIOD`), keeps
        // the heap from growing between full cycles without a step per run.
        self.runs = self.runs.wrapping_add(1);
        if self.runs % 50 == 0 {
            let _ = self.lua.gc_step();
        }
        let reply = outcome.unwrap_or_else(|e| Frame::error(format!("ERR Error running script {}, {}", name, error_message(&e).0)));
        let _ = inv;
        reply
    }
}

/// The `redis` table.
fn redis_table(lua: &Lua, _shared: &Arc<Shared>, hidden: &Table, version: &str, version_num: u32) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let via = |op: u8, who: &'static str| -> mlua::Result<Function> {
        let hidden = hidden.clone();
        lua.create_function(move |lua, args: MultiValue| -> mlua::Result<Value> {
            match hidden.raw_get::<Value>("bridge")? {
                Value::Function(f) => f.call::<Value>((op, args)),
                _ => {
                    let _ = lua;
                    Err(redis_error(format!("ERR {who} can only be called inside a script invocation")))
                }
            }
        })
    };
    t.raw_set("call", via(0, "redis.call/pcall")?)?;
    t.raw_set("pcall", via(1, "redis.call/pcall")?)?;
    t.raw_set("acl_check_cmd", via(2, "redis.acl_check_cmd")?)?;
    let set_repl = via(3, "redis.set_repl")?;
    t.raw_set(
        "set_repl",
        lua.create_function(move |_, args: MultiValue| {
            if args.len() != 1 {
                return Err(redis_error("ERR redis.set_repl() requires two arguments."));
            }
            set_repl.call::<Value>(args)
        })?,
    )?;
    let log = via(4, "redis.log")?;
    t.raw_set(
        "log",
        lua.create_function(move |_, args: MultiValue| {
            if args.len() < 2 {
                return Err(redis_error("ERR redis.log() requires two arguments or more."));
            }
            let level = match &args[0] {
                Value::Integer(n) => *n as f64,
                Value::Number(n) => *n,
                Value::String(s) => match s.to_str().ok().and_then(|s| s.trim().parse::<f64>().ok()) {
                    Some(n) => n,
                    None => return Err(redis_error("ERR First argument must be a number (log level).")),
                },
                _ => return Err(redis_error("ERR First argument must be a number (log level).")),
            };
            if !(0.0..=3.0).contains(&level) {
                return Err(redis_error("ERR Invalid debug level."));
            }
            // Outside a run (FUNCTION LOAD's code) there is no host: the line is dropped.
            let _ = log.call::<Value>(args);
            Ok(())
        })?,
    )?;
    for (name, level) in [("LOG_DEBUG", 0), ("LOG_VERBOSE", 1), ("LOG_NOTICE", 2), ("LOG_WARNING", 3)] {
        t.raw_set(name, level)?;
    }
    for (name, flags) in [("REPL_NONE", 0), ("REPL_AOF", 1), ("REPL_SLAVE", 2), ("REPL_REPLICA", 2), ("REPL_ALL", 3)] {
        t.raw_set(name, flags)?;
    }
    t.raw_set("REDIS_VERSION", version)?;
    t.raw_set("REDIS_VERSION_NUM", version_num)?;
    t.raw_set(
        "setresp",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(redis_error("ERR redis.setresp() requires one argument."));
            }
            let resp = match &args[0] {
                Value::Integer(n) => *n as i64,
                Value::Number(n) => *n as i64,
                _ => 0,
            };
            if resp != 2 && resp != 3 {
                return Err(redis_error("ERR RESP version must be 2 or 3."));
            }
            if let Some(mut st) = lua.app_data_mut::<RunState>() {
                if !st.in_run && st.loading.is_none() {
                    return Err(redis_error("ERR redis.setresp can only be called inside a script invocation"));
                }
                st.resp3 = resp == 3;
            }
            Ok(())
        })?,
    )?;
    t.raw_set(
        "sha1hex",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return Err(redis_error("ERR wrong number of arguments"));
            }
            let bytes: Vec<u8> = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(n) => n.to_string().into_bytes(),
                Value::Number(n) => lua_number_string(*n).into_bytes(),
                _ => Vec::new(),
            };
            Ok(crate::shared::sha1_hex(&bytes))
        })?,
    )?;
    t.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| -> mlua::Result<Value> {
            match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => {
                    let b = s.as_bytes();
                    let mut msg = Vec::with_capacity(b.len() + 1);
                    if b.first() != Some(&b'-') {
                        msg.push(b'-');
                    }
                    msg.extend_from_slice(&b);
                    Ok(Value::Table(error_table(lua, &msg)?))
                }
                _ => Ok(Value::Table(error_table(lua, b"wrong number or type of arguments")?)),
            }
        })?,
    )?;
    t.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| -> mlua::Result<Value> {
            match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => {
                    let t = lua.create_table()?;
                    t.raw_set("ok", s.clone())?;
                    Ok(Value::Table(t))
                }
                _ => Ok(Value::Table(error_table(lua, b"wrong number or type of arguments")?)),
            }
        })?,
    )?;
    t.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    t.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    t.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    t.raw_set(
        "register_function",
        lua.create_function(|lua, args: MultiValue| -> mlua::Result<()> {
            let (meta, f) = register_args(&args)?;
            let mut st = lua.app_data_mut::<RunState>().ok_or_else(|| redis_error("ERR internal"))?;
            let Some(list) = st.loading.as_mut() else {
                return Err(redis_error("ERR redis.register_function can only be called on FUNCTION LOAD command"));
            };
            if list.iter().any(|(m, _)| m.name == meta.name) {
                return Err(redis_error("ERR Function already exists in the library"));
            }
            list.push((meta, f));
            Ok(())
        })?,
    )?;
    Ok(t)
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=...,
/// callback=..., flags={...}, description=...}`.
fn register_args(args: &MultiValue) -> mlua::Result<(FunctionMeta, Function)> {
    let (name, f, flags, description) = match (args.len(), args.front(), args.get(1)) {
        (2, Some(Value::String(n)), Some(Value::Function(f))) => (n.to_string_lossy(), f.clone(), Vec::new(), None),
        (2, Some(Value::String(_)), _) => return Err(redis_error("ERR callback argument given to redis.register_function must be a function")),
        (1, Some(Value::Table(t)), _) => {
            let mut name = None;
            let mut f = None;
            let mut flags = Vec::new();
            let mut description = None;
            for (k, v) in t.pairs::<Value, Value>().flatten() {
                let Value::String(k) = k else { return Err(redis_error("ERR named argument key given to redis.register_function is not a string")) };
                match (&*k.to_string_lossy(), v) {
                    ("function_name", Value::String(s)) => name = Some(s.to_string_lossy()),
                    ("function_name", _) => return Err(redis_error("ERR function_name argument given to redis.register_function must be a string")),
                    ("callback", Value::Function(c)) => f = Some(c),
                    ("callback", _) => return Err(redis_error("ERR callback argument given to redis.register_function must be a function")),
                    ("description", Value::String(s)) => description = Some(s.to_string_lossy()),
                    ("description", _) => return Err(redis_error("ERR description argument given to redis.register_function must be a string")),
                    ("flags", Value::Table(fl)) => {
                        for v in fl.sequence_values::<Value>() {
                            match v? {
                                Value::String(s) if SCRIPT_FLAGS.contains(&&*s.to_string_lossy()) => flags.push(s.to_string_lossy()),
                                _ => return Err(redis_error("ERR unknown flag given")),
                            }
                        }
                    }
                    ("flags", _) => return Err(redis_error("ERR flags argument to redis.register_function must be a table representing function flags")),
                    (other, _) => return Err(redis_error(format!("ERR unknown argument given to redis.register_function: {other}"))),
                }
            }
            let Some(name) = name else { return Err(redis_error("ERR redis.register_function must get a function name argument")) };
            let Some(f) = f else { return Err(redis_error("ERR redis.register_function must get a callback argument")) };
            (name, f, flags, description)
        }
        _ => return Err(redis_error("ERR wrong number of arguments to redis.register_function")),
    };
    if !valid_name(&name) {
        return Err(redis_error("ERR Function names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    Ok((FunctionMeta { name, description, flags }, f))
}

/// Library and function names: letters, digits and underscores, at least one.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Splits `#!lua name=<name>\n<code>`; errors as Redis's FUNCTION LOAD.
pub fn parse_library_header(code: &[u8]) -> Result<(String, &[u8]), String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for p in parts {
        match p.split_once('=') {
            Some(("name", v)) => name = Some(v.to_string()),
            _ => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let Some(name) = name else { return Err("ERR Library name was not given".into()) };
    if !valid_name(&name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    // The code keeps its first line's place (as an empty line), so line numbers match.
    Ok((name, &code[end..]))
}

/// The flags of an EVAL script's shebang (`#!lua flags=no-writes,...`); None without one.
pub fn script_flags(body: &[u8]) -> Result<Option<Vec<String>>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = Vec::new();
    for p in parts {
        match p.split_once('=') {
            Some(("flags", v)) => {
                for f in v.split(',').filter(|f| !f.is_empty()) {
                    if !SCRIPT_FLAGS.contains(&f) {
                        return Err(format!("ERR Unexpected flag in script shebang: {f}"));
                    }
                    flags.push(f.to_string());
                }
            }
            _ => return Err(format!("ERR Unknown lua shebang option: {p}")),
        }
    }
    Ok(Some(flags))
}

fn strip_shebang(body: &[u8]) -> &[u8] {
    if body.starts_with(b"#!") {
        let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
        &body[end..]
    } else {
        body
    }
}

/// A command's arguments from Lua values: strings as they are, numbers as `%.17g`. None
/// for no arguments.
fn lua_args(args: &MultiValue) -> mlua::Result<Option<Vec<Bytes>>> {
    if args.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(args.len());
    for v in args.iter() {
        match v {
            Value::String(s) => out.push(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(n) => out.push(Bytes::from(n.to_string())),
            Value::Number(n) => {
                let mut b = Vec::new();
                format_double_g17(*n, &mut b);
                out.push(Bytes::from(b));
            }
            _ => return Err(redis_error("ERR Lua redis lib command arguments must be strings or integers")),
        }
    }
    Ok(Some(out))
}

/// Lua's own `%.14g` of a number (tostring).
fn lua_number_string(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The error handler (`__redis__err__handler`): makes every error a table with `err`,
/// and the script's `source` and `line` where it was raised.
fn error_handler(lua: &Lua, e: Value) -> mlua::Result<Value> {
    let t = match &e {
        Value::Table(t) if matches!(t.raw_get::<Value>("err"), Ok(Value::String(_))) => t.clone(),
        Value::Error(err) => {
            let (msg, ours) = error_message(err);
            let t = lua.create_table()?;
            t.raw_set("err", if ours { msg } else { format!("ERR {msg}") })?;
            t
        }
        Value::String(s) => {
            let t = lua.create_table()?;
            let mut m = b"ERR ".to_vec();
            m.extend_from_slice(&s.as_bytes());
            t.raw_set("err", lua.create_string(m)?)?;
            t
        }
        other => {
            let t = lua.create_table()?;
            let text = match other {
                Value::Nil => "nil".to_string(),
                Value::Boolean(b) => b.to_string(),
                Value::Integer(n) => n.to_string(),
                Value::Number(n) => lua_number_string(*n),
                v => format!("{}: {:p}", v.type_name(), v.to_pointer()),
            };
            t.raw_set("err", format!("ERR {text}"))?;
            t
        }
    };
    // The first frame of the script's own code: skip C functions (error, redis.call).
    for level in 1..6 {
        let found = lua.inspect_stack(level, |d| {
            let s = d.source();
            if s.what == "C" || s.source.as_deref() == Some("=abacus") {
                None
            } else {
                Some((s.source.map(|x| x.into_owned()), d.current_line()))
            }
        });
        match found {
            None => break,
            Some(None) => continue,
            Some(Some((source, line))) => {
                if let Some(source) = source {
                    t.raw_set("source", source)?;
                }
                if let Some(line) = line {
                    t.raw_set("line", line)?;
                }
                break;
            }
        }
    }
    Ok(Value::Table(t))
}

/// The reply to a script that raised an error: "<err> script: <name>, on <source>:<line>."
fn script_error(e: &Value, name: &str) -> Frame {
    match e {
        Value::Table(t) => {
            let err = match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => s.to_string_lossy(),
                _ => "ERR unknown error".to_string(),
            };
            let source = t.raw_get::<Value>("source").ok().and_then(|v| match v {
                Value::String(s) => Some(s.to_string_lossy()),
                _ => None,
            });
            let line = t.raw_get::<Value>("line").ok().and_then(|v| match v {
                Value::Integer(n) => Some(n.to_string()),
                Value::Number(n) => Some((n as i64).to_string()),
                Value::String(s) => Some(s.to_string_lossy()),
                _ => None,
            });
            match (source, line) {
                (Some(s), Some(l)) => Frame::error(format!("{err} script: {name}, on {s}:{l}.")),
                _ => Frame::error(err),
            }
        }
        other => Frame::error(format!("ERR Error running script {}, {:.100}", name, error_text(other))),
    }
}

fn error_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string_lossy(),
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => s.to_string_lossy(),
            _ => "execution failure".into(),
        },
        Value::Error(e) => error_message(e).0,
        _ => "execution failure".into(),
    }
}

/// The internal chunk, run once per state: Redis's `pcall`, the protected environment, the
/// read-only library tables and the runner.
const INTERNAL: &str = r#"
local G, killed, message_of, handler = ...
local rawget, rawset, error, type, tostring, select, xpcall, opcall, setmetatable =
      rawget, rawset, error, type, tostring, select, xpcall, pcall, setmetatable

-- pcall as Redis's: an error table reads as its message; a script killed stays killed.
local function fix(ok, ...)
  if ok then return true, ... end
  if killed() then error((...), 0) end
  local e = ...
  if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then return false, rawget(e, 'err') end
  if type(e) == 'userdata' then return false, message_of(e) end
  return false, e
end
rawset(G, 'pcall', function(...) return fix(opcall(...)) end)

-- The environment scripts run in: reads fall through to the globals (an unknown name is an
-- error), writes are refused.
local env = {}
setmetatable(env, {
  __index = function(_, k)
    local v = rawget(G, k)
    if v == nil then error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2) end
    return v
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
rawset(G, '_G', env)

local function readonly(t, filter)
  local mt = { __newindex = function() error("Attempt to modify a readonly table", 2) end, __metatable = false }
  if filter then
    mt.__index = function(_, k) return filter(t, k) end
  else
    mt.__index = t
  end
  return setmetatable({}, mt)
end

local function protect_libraries(loading, allowed)
  for _, name in ipairs({'string', 'math', 'table', 'cjson', 'bit', 'struct', 'cmsgpack'}) do
    local lib = rawget(G, name)
    if lib then rawset(G, name, readonly(lib)) end
  end
  local redis = rawget(G, 'redis')
  rawset(G, 'redis', readonly(redis, function(t, k)
    if loading() and not allowed[k] then return nil end
    return rawget(t, k)
  end))
end

local function runner(f, a, b)
  if a == nil then return xpcall(f, handler) end
  return xpcall(function() return f(a, b) end, handler)
end

return { env = env, runner = runner, protect_libraries = protect_libraries }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo(Vec<Vec<Bytes>>);

    impl Host for Echo {
        fn call(&mut self, args: Vec<Bytes>) -> Frame {
            self.0.push(args.clone());
            match &args[0][..] {
                b"get" => Frame::Bulk(Bytes::from_static(b"v")),
                b"incr" => Frame::error("ERR value is not an integer or out of range"),
                b"nil" => Frame::Null,
                _ => Frame::ok(),
            }
        }
        fn acl_check(&mut self, _: &[Bytes]) -> Option<bool> {
            Some(true)
        }
        fn set_repl(&mut self, _: u8) {}
        fn log(&mut self, _: u8, _: &str) {}
    }

    fn eval(vm: &mut Vm, body: &str, keys: &[&str]) -> Frame {
        let keys: Vec<Bytes> = keys.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect();
        let sha = crate::shared::sha1_hex(body.as_bytes());
        vm.eval(&sha, body.as_bytes(), Invocation { keys: &keys, args: &[], caller_resp3: false }, &mut Echo(Vec::new()))
    }

    fn vm() -> Vm {
        Vm::new(Arc::new(Shared::default()), "7.0.15", 0x07000f).unwrap()
    }

    fn err(f: Frame) -> String {
        match f {
            Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn errors_read_as_redis_7_0() {
        let mut vm = vm();
        assert_eq!(err(eval(&mut vm, "return x", &[])), "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 03c387736bb5cc009ff35151572cee04677aa374, on @user_script:1.");
        assert_eq!(err(eval(&mut vm, "x = 1", &[])), "ERR user_script:1: Attempt to modify a readonly table script: 34bce5f775de97f557a34088509c8bfe1ea17e52, on @user_script:1.");
        assert_eq!(err(eval(&mut vm, "return redis.call('incr',KEYS[1])", &["s"])), "ERR value is not an integer or out of range script: 6f5ade10a69975e903c6d07b10ea44c6382381a5, on @user_script:1.");
        assert_eq!(err(eval(&mut vm, "error('boom')", &[])), "ERR user_script:1: boom script: 82903a0434f1503e152f89c03c9acd881a0e8150, on @user_script:1.");
        assert_eq!(err(eval(&mut vm, "error({err='MY err'})", &[])), "MY err script: 648c64a0f76d70364d8d680b48b1c2f282eb8600, on @user_script:1.");
        assert_eq!(err(eval(&mut vm, "return redis.call()", &[])), "ERR Please specify at least one argument for this redis lib call script: 0a907e1429221a4d85516cab7fd219a82a9439d8, on @user_script:1.");
        assert_eq!(err(eval(&mut vm, "return (", &[])), "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'");
        assert_eq!(err(eval(&mut vm, "return os.time()", &[])), "ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: 13dea82ee9da896aebcd10f5e36f4a1eeb839b48, on @user_script:1.");
    }

    #[test]
    fn replies_and_pcall() {
        let mut vm = vm();
        assert_eq!(eval(&mut vm, "return redis.call('get','k')", &[]), Frame::Bulk(Bytes::from_static(b"v")));
        assert_eq!(eval(&mut vm, "return redis.pcall('incr','k')", &[]), Frame::error("ERR value is not an integer or out of range"));
        assert_eq!(
            eval(&mut vm, "local ok, e = pcall(redis.call, 'incr', 's'); return {tostring(ok), e}", &[]),
            Frame::Array(vec![Frame::Bulk(Bytes::from_static(b"false")), Frame::Bulk(Bytes::from_static(b"ERR value is not an integer or out of range"))])
        );
        assert_eq!(eval(&mut vm, "return redis.call('nil') == false", &[]), Frame::Integer(1));
        assert_eq!(eval(&mut vm, "return 3.99", &[]), Frame::Integer(3));
        assert_eq!(eval(&mut vm, "return redis.sha1hex('')", &[]), Frame::Bulk(Bytes::from_static(b"da39a3ee5e6b4b0d3255bfef95601890afd80709")));
        assert_eq!(eval(&mut vm, "return string.rep('x', 3)", &[]), Frame::Bulk(Bytes::from_static(b"xxx")));
        assert_eq!(eval(&mut vm, "return KEYS[1]", &["a"]), Frame::Bulk(Bytes::from_static(b"a")));
    }

    #[test]
    fn libraries_load_and_run() {
        let mut vm = vm();
        let (name, fs) = vm.load_library(b"#!lua name=lib1\nredis.register_function('f1', function(keys, args) return keys[1] end)").unwrap();
        assert_eq!(name, "lib1");
        assert_eq!(fs[0].name, "f1");
        assert_eq!(vm.load_library(b"redis.register_function('f1', function() end)").unwrap_err(), "ERR Missing library metadata");
        let lib = Library { name, code: Bytes::from_static(b"#!lua name=lib1\nredis.register_function('f1', function(keys, args) return keys[1] end)"), functions: fs, id: 7 };
        let keys = [Bytes::from_static(b"kk")];
        let f = vm.fcall(&lib, "f1", Invocation { keys: &keys, args: &[], caller_resp3: false }, &mut Echo(Vec::new()));
        assert_eq!(f, Frame::Bulk(Bytes::from_static(b"kk")));
    }
}
