//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION, FCALL, FCALL_RO.
//!
//! The Lua environment is `abacus-scripting`'s; how a script runs across the shards is
//! `scripting.rs`'s. This file parses the commands, keeps the script cache and the
//! libraries (`abacus_scripting::Shared`, one per server), locks the shards and hands the
//! script to the shard that runs it.

use abacus_engine::exec::Access;
use abacus_engine::shard::{now_ms, shard_of};
use abacus_protocol::{Arg, Bytes, Frame};
use abacus_engine::recovery::Replay;
use abacus_scripting::{Libraries, Library};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use crate::scripting::{Script, ScriptRun};

const G: &str = "scripting";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("eval", -3, STALE | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| eval(conn, access, &call.args, false, false).await), G, "Executes a server-side Lua script.").with_numkeys(2)
        .docs("2.6.0", "Depends on the script that is executed.")
        .key_specs("RW access update")
        .noscript()
        .skip_monitor()
        .no_mandatory_keys()
        .runs_script()
        .args("
            script type=string
            numkeys type=integer
            key type=key key_spec_index=0 flags=optional,multiple
            arg type=string flags=optional,multiple
        "),
    Spec::conn("evalsha", -3, STALE | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| eval(conn, access, &call.args, true, false).await), G, "Executes a server-side Lua script by SHA1 digest.").with_numkeys(2)
        .docs("2.6.0", "Depends on the script that is executed.")
        .key_specs("RW access update")
        .noscript()
        .skip_monitor()
        .no_mandatory_keys()
        .runs_script()
        .args("
            sha1 type=string
            numkeys type=integer
            key type=key key_spec_index=0 flags=optional,multiple
            arg type=string flags=optional,multiple
        "),
    Spec::conn("eval_ro", -3, READONLY | STALE | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| eval(conn, access, &call.args, false, true).await), G, "Executes a read-only server-side Lua script.").with_numkeys(2)
        .docs("7.0.0", "Depends on the script that is executed.")
        .key_specs("RO access")
        .noscript()
        .skip_monitor()
        .no_mandatory_keys()
        .runs_script()
        .args("
            script type=string
            numkeys type=integer
            key type=key key_spec_index=0 flags=optional,multiple
            arg type=string flags=optional,multiple
        "),
    Spec::conn("evalsha_ro", -3, READONLY | STALE | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| eval(conn, access, &call.args, true, true).await), G, "Executes a read-only server-side Lua script by SHA1 digest.").with_numkeys(2)
        .docs("7.0.0", "Depends on the script that is executed.")
        .key_specs("RO access")
        .noscript()
        .skip_monitor()
        .no_mandatory_keys()
        .runs_script()
        .args("
            sha1 type=string
            numkeys type=integer
            key type=key key_spec_index=0 flags=optional,multiple
            arg type=string flags=optional,multiple
        "),
    Spec::conn("fcall", -3, STALE | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| fcall(conn, access, &call.args, false).await), G, "Invokes a function.").with_numkeys(2)
        .docs("7.0.0", "Depends on the function that is executed.")
        .key_specs("RW access update")
        .noscript()
        .skip_monitor()
        .no_mandatory_keys()
        .runs_script()
        .args("
            function type=string
            numkeys type=integer
            key type=key key_spec_index=0 flags=optional,multiple
            arg type=string flags=optional,multiple
        "),
    Spec::conn("fcall_ro", -3, READONLY | STALE | ALL_SHARDS, NONE, conn_fn!(|conn, access, call| fcall(conn, access, &call.args, true).await), G, "Invokes a read-only function.").with_numkeys(2)
        .docs("7.0.0", "Depends on the function that is executed.")
        .key_specs("RO access")
        .noscript()
        .skip_monitor()
        .no_mandatory_keys()
        .runs_script()
        .args("
            function type=string
            numkeys type=integer
            key type=key key_spec_index=0 flags=optional,multiple
            arg type=string flags=optional,multiple
        "),
    Spec::conn("script", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), G, "A container for Lua scripts management commands.").with_subcommands(SCRIPT)
        .docs("2.6.0", "Depends on subcommand."),
    Spec::conn("function", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), G, "A container for function commands.").with_subcommands(FUNCTION)
        .docs("7.0.0", "Depends on subcommand."),
];

const SCRIPT: &[Spec] = &[
    Spec::conn("script|load", 3, STALE, NONE, conn_fn!(|conn, _, call| script_load(conn, &call.args)), G, "Loads a server-side Lua script to the script cache.")
        .docs("2.6.0", "O(N) with N being the length in bytes of the script body.")
        .noscript()
        .args("
            script type=string
        ")
        .tips("request_policy:all_nodes response_policy:all_succeeded"),
    Spec::conn("script|exists", -3, 0, NONE, conn_fn!(|conn, _, call| script_exists(conn, &call.args)), G, "Determines whether server-side Lua scripts exist in the script cache.")
        .docs("2.6.0", "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).")
        .noscript()
        .args("
            sha1 type=string flags=multiple
        ")
        .tips("request_policy:all_shards response_policy:agg_logical_and"),
    Spec::conn("script|flush", -2, 0, NONE, conn_fn!(|conn, _, call| script_flush(conn, &call.args).await), G, "Removes all server-side Lua scripts from the script cache.")
        .docs("2.6.0", "O(N) with N being the number of scripts in cache")
        .noscript()
        .history(&[
            ("6.2.0", "Added the `ASYNC` and `SYNC` flushing mode modifiers."),
        ])
        .args("
            async type=oneof since=6.2.0 flags=optional
              async type=pure-token token=ASYNC
              sync type=pure-token token=SYNC
        ")
        .tips("request_policy:all_nodes response_policy:all_succeeded"),
    Spec::conn("script|kill", 2, 0, NONE, conn_fn!(|conn, _, _| kill(conn, false)), G, "Terminates a server-side Lua script during execution.")
        .docs("2.6.0", "O(1)")
        .noscript()
        .allow_busy()
        .tips("request_policy:all_shards response_policy:one_succeeded"),
    Spec::conn("script|help", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| script_help()), G, "Returns helpful text about the different subcommands.")
        .docs("5.0.0", "O(1)"),
    Spec::conn("script|debug", 3, 0, NONE, conn_fn!(|_, _, call| script_debug(&call.args)), G, "Sets the debug mode of server-side Lua scripts.")
        .docs("3.2.0", "O(1)")
        .noscript()
        .args("
            mode type=oneof
              yes type=pure-token token=YES
              sync type=pure-token token=SYNC
              no type=pure-token token=NO
        "),
];

const FUNCTION: &[Spec] = &[
    Spec::conn("function|load", -3, WRITE | DENYOOM, NONE, conn_fn!(replay = Some(replay_function_load), |conn, access, call| function_load(conn, access, &call.args).await), G, "Creates a library.")
        .docs("7.0.0", "O(1) (considering compilation time is redundant)")
        .noscript()
        .args("
            replace type=pure-token token=REPLACE flags=optional
            function-code type=string
        ")
        .tips("request_policy:all_shards response_policy:all_succeeded"),
    Spec::conn("function|list", -2, 0, NONE, conn_fn!(|conn, _, call| function_list(conn, &call.args)), G, "Returns information about all libraries.")
        .docs("7.0.0", "O(N) where N is the number of functions")
        .noscript()
        .args("
            library-name-pattern type=string token=LIBRARYNAME flags=optional
            withcode type=pure-token token=WITHCODE flags=optional
        ")
        .tips("nondeterministic_output_order"),
    Spec::conn("function|delete", 3, WRITE, NONE, conn_fn!(replay = Some(replay_function_delete), |conn, access, call| function_delete(conn, access, &call.args).await), G, "Deletes a library and its functions.")
        .docs("7.0.0", "O(1)")
        .noscript()
        .args("
            library-name type=string
        ")
        .tips("request_policy:all_shards response_policy:all_succeeded"),
    Spec::conn("function|flush", -2, WRITE, NONE, conn_fn!(replay = Some(replay_function_flush), |conn, access, call| function_flush(conn, access, &call.args).await), G, "Deletes all libraries and functions.")
        .docs("7.0.0", "O(N) where N is the number of functions deleted")
        .noscript()
        .args("
            async type=oneof flags=optional
              async type=pure-token token=ASYNC
              sync type=pure-token token=SYNC
        ")
        .tips("request_policy:all_shards response_policy:all_succeeded"),
    Spec::conn("function|dump", 2, 0, NONE, conn_fn!(|conn, _, _| function_dump(conn)), G, "Dumps all libraries into a serialized binary payload.")
        .docs("7.0.0", "O(N) where N is the number of functions")
        .noscript(),
    Spec::conn("function|restore", -3, WRITE | DENYOOM, NONE, conn_fn!(replay = Some(replay_function_restore), |conn, access, call| function_restore(conn, access, &call.args).await), G, "Restores all libraries from a payload.")
        .docs("7.0.0", "O(N) where N is the number of functions on the payload")
        .noscript()
        .args("
            serialized-value type=string
            policy type=oneof flags=optional
              flush type=pure-token token=FLUSH
              append type=pure-token token=APPEND
              replace type=pure-token token=REPLACE
        ")
        .tips("request_policy:all_shards response_policy:all_succeeded"),
    Spec::conn("function|stats", 2, 0, NONE, conn_fn!(|conn, _, _| function_stats(conn)), G, "Returns information about a function during execution.")
        .docs("7.0.0", "O(1)")
        .noscript()
        .allow_busy()
        .tips("nondeterministic_output request_policy:all_shards response_policy:special"),
    Spec::conn("function|kill", 2, 0, NONE, conn_fn!(|conn, _, _| kill(conn, true)), G, "Terminates a function during execution.")
        .docs("7.0.0", "O(1)")
        .noscript()
        .allow_busy()
        .tips("request_policy:all_shards response_policy:one_succeeded"),
    Spec::conn("function|help", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| function_help()), G, "Returns helpful text about the different subcommands.")
        .docs("7.0.0", "O(1)"),
];

/// EVAL's `numkeys`: its keys and arguments, or Redis's error.
fn split_keys(a: &[Arg]) -> Result<(Vec<Bytes>, Vec<Bytes>), Frame> {
    let n = match std::str::from_utf8(&a[2]).ok().and_then(|s| s.parse::<i64>().ok()) {
        Some(n) => n,
        None => return Err(err("ERR value is not an integer or out of range")),
    };
    if n < 0 {
        return Err(err("ERR Number of keys can't be negative"));
    }
    let n = n as usize;
    if n > a.len() - 3 {
        return Err(err("ERR Number of keys can't be greater than number of args"));
    }
    let keys = a[3..3 + n].iter().map(|k| Bytes::copy_from_slice(k)).collect();
    let args = a[3 + n..].iter().map(|k| Bytes::copy_from_slice(k)).collect();
    Ok((keys, args))
}

async fn eval(conn: &mut Conn, access: Access<'_>, a: &[Arg], by_sha: bool, ro: bool) -> Frame {
    let shared = conn.worker.server.scripts.clone();
    let (keys, args) = match split_keys(a) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let (sha, body) = if by_sha {
        let sha = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
        match shared.script(&sha) {
            Some(body) => (sha, body),
            None => return err("NOSCRIPT No matching script. Please use EVAL."),
        }
    } else {
        let sha = shared.add_script(&a[1]);
        (sha, Bytes::copy_from_slice(&a[1]))
    };
    let flags = match abacus_scripting::script_flags(&body) {
        Ok(f) => f,
        Err(e) => return Frame::error(e),
    };
    let no_writes = flags.as_ref().is_some_and(|f| f.iter().any(|x| x == "no-writes"));
    let name = sha.clone();
    run(conn, access, Script::Eval { sha, body }, keys, args, ro || no_writes, false, name).await
}

async fn fcall(conn: &mut Conn, access: Access<'_>, a: &[Arg], ro: bool) -> Frame {
    let shared = conn.worker.server.scripts.clone();
    let (keys, args) = match split_keys(a) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let name = String::from_utf8_lossy(&a[1]).into_owned();
    let (lib, no_writes) = {
        let libs = shared.libraries.read();
        match libs.function(&name) {
            Some((lib, f)) => (lib.clone(), f.flags.iter().any(|x| x == "no-writes")),
            None => return err("ERR Function not found"),
        }
    };
    if ro && !no_writes {
        return err("ERR Can not execute a script with write flag using *_ro command.");
    }
    run(conn, access, Script::Function { lib, name: name.clone() }, keys, args, no_writes, true, name).await
}

/// Runs a script: on its keys' shard alone if they are all on one, else (or if it reaches
/// further) with every shard locked, unless the caller's EXEC holds them all already (see
/// `scripting.rs`).
#[allow(clippy::too_many_arguments)]
async fn run(conn: &mut Conn, access: Access<'_>, script: Script, keys: Vec<Bytes>, args: Vec<Bytes>, read_only: bool, _function: bool, _name: String) -> Frame {
    let n = conn.worker.shards();
    let shared = conn.worker.server.scripts.clone();
    let shard = keys.first().map(|k| shard_of(k, n)).unwrap_or(conn.worker.shard_id);
    let mut run = ScriptRun {
        script,
        keys,
        args,
        db: conn.client.db,
        client: conn.client.meta.id,
        user: conn.client.user.clone(),
        read_only,
        caller_resp3: conn.client.proto == abacus_protocol::Protocol::Resp3,
        // Not for the primary's stream on a replica (it carries effects, never scripts).
        cluster: conn.worker.server.cluster.clone().filter(|_| !conn.is_master).map(|node| crate::scripting::ScriptCluster {
            node,
            engine: conn.worker.server.engine.clone(),
            asking: conn.client.asked,
            readonly: conn.client.readonly,
            tls: conn.client.tls,
        }),
    };
    let cfg = conn.worker.server.config.cmd_config();
    let durability = conn.worker.server.durability.clone();
    let held = matches!(access, Access::Locked(l) if (0..n).all(|s| l.holds(s)));
    if !held && run.keys.iter().all(|k| shard_of(k, n) == shard) {
        let (sh, d) = (shared.clone(), durability.clone());
        match conn.worker.run(Access::Free, shard, move |s| crate::scripting::run_local(s, run, sh, cfg, n, d)).await {
            Some(Ok(reply)) => return reply,
            Some(Err(back)) => run = back,
            None => return abacus_engine::exec::shutting_down(),
        }
    }
    let own;
    let locks = match access {
        Access::Locked(l) if held => l,
        _ => match conn.worker.lock(0..n).await {
            Some(l) => {
                own = l;
                &own
            }
            None => return abacus_engine::exec::shutting_down(),
        },
    };
    let remote = locks.senders_except(shard);
    let job_shared = shared.clone();
    let done = conn.worker.run(Access::Locked(locks), shard, move |s| crate::scripting::run(s, run, remote, job_shared, cfg, n, durability)).await;
    match done {
        Some(out) => {
            locks.add_log(out.log);
            out.reply
        }
        None => abacus_engine::exec::shutting_down(),
    }
}

fn script_load(conn: &mut Conn, a: &[Arg]) -> Frame {
    let shared = &conn.worker.server.scripts;
    if let Err(e) = abacus_scripting::script_flags(&a[2]) {
        return Frame::error(e);
    }
    // Compiled once here to report a syntax error as Redis does (in a throwaway state: the
    // shards' states compile it when it first runs on them).
    match abacus_scripting::Vm::new(shared.clone(), crate::node::REDIS_VERSION, crate::scripting::REDIS_VERSION_NUM) {
        Ok(mut vm) => {
            let sha = abacus_scripting::sha1_hex(&a[2]);
            if let Err(e) = vm.compile(&sha, &a[2]) {
                return e;
            }
        }
        Err(e) => return Frame::error(format!("ERR cannot start the Lua engine: {e}")),
    }
    Frame::bulk(shared.add_script(&a[2]).into_bytes())
}

fn script_exists(conn: &mut Conn, a: &[Arg]) -> Frame {
    let shared = &conn.worker.server.scripts;
    Frame::Array(a[2..].iter().map(|sha| Frame::Integer(shared.has_script(&String::from_utf8_lossy(sha)) as i64)).collect())
}

async fn script_flush(conn: &mut Conn, a: &[Arg]) -> Frame {
    if a.len() > 3 || (a.len() == 3 && !a[2].eq_ignore_ascii_case(b"async") && !a[2].eq_ignore_ascii_case(b"sync")) {
        return err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
    }
    conn.worker.server.scripts.flush_scripts();
    // Each shard's Lua state forgets its compiled scripts.
    if conn.worker.run_all(Access::Free, |s| {
        if let Some(vm) = s.lua.as_mut() {
            vm.flush_scripts();
        }
    })
    .await
    .is_none()
    {
        return abacus_engine::exec::shutting_down();
    }
    Frame::ok()
}

fn script_debug(a: &[Arg]) -> Frame {
    if a[2].eq_ignore_ascii_case(b"no") {
        return Frame::ok();
    }
    if a[2].eq_ignore_ascii_case(b"yes") || a[2].eq_ignore_ascii_case(b"sync") {
        return err("ERR Abacus has no Lua debugger (SCRIPT DEBUG NO is accepted); use redis.log to trace scripts");
    }
    err("ERR Use SCRIPT DEBUG YES/SYNC/NO")
}

/// SCRIPT KILL / FUNCTION KILL.
fn kill(conn: &mut Conn, function: bool) -> Frame {
    match conn.worker.server.scripts.kill(function) {
        Ok(()) => Frame::ok(),
        Err(e) => Frame::error(e),
    }
}

async fn function_load(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let (replace, code) = match a.len() {
        3 => (false, &a[2]),
        4 if a[2].eq_ignore_ascii_case(b"replace") => (true, &a[3]),
        4 => return Frame::error(format!("ERR Unknown option given: {}", String::from_utf8_lossy(&a[2]))),
        _ => return err("ERR wrong number of arguments for 'function|load' command"),
    };
    let lib = match compile_library(conn, access, Bytes::copy_from_slice(code)).await {
        Ok(lib) => lib,
        Err(e) => return Frame::error(e),
    };
    let name = lib.name.clone();
    match change_libraries(conn, access, a, move |libs| libs.add(lib, replace)).await {
        Ok(()) => Frame::bulk(name.into_bytes()),
        Err(e) => Frame::error(e),
    }
}

/// Changes the server's libraries with every shard held (unless EXEC holds them already)
/// and logs `args` with the change. Snapshots take the libraries with every shard held too,
/// so each change is in exactly one of a snapshot and the log after it; replicas get the
/// command from the log's stream and apply it as a client's.
async fn change_libraries(conn: &Conn, access: Access<'_>, args: &[Arg], change: impl FnOnce(&mut Libraries) -> Result<(), String>) -> Result<(), String> {
    let Some(own) = super::server::lock_all_if_free(conn, access).await else { return Err("ERR server is shutting down".into()) };
    let access = match &own {
        Some(l) => Access::Locked(l),
        None => access,
    };
    change(&mut conn.worker.server.scripts.libraries.write())?;
    super::server::log_under(access, own.as_ref(), conn.client.db, args);
    Ok(())
}

/// Compiles a library on this thread's shard's Lua state, which checks it (its header, its
/// code, the functions it registers); the server's libraries are not changed.
async fn compile_library(conn: &mut Conn, access: Access<'_>, code: Bytes) -> Result<Library, String> {
    let shared = conn.worker.server.scripts.clone();
    let checked = code.clone();
    let s2 = shared.clone();
    let shard = conn.worker.shard_id;
    let done = conn
        .worker
        .run(access, shard, move |s| {
            if s.lua.is_none() {
                match abacus_scripting::Vm::new(s2, crate::node::REDIS_VERSION, crate::scripting::REDIS_VERSION_NUM) {
                    Ok(vm) => s.lua = Some(Box::new(vm)),
                    Err(e) => return Err(format!("ERR cannot start the Lua engine: {e}")),
                }
            }
            s.lua.as_mut().map(|vm| vm.load_library(&checked)).unwrap_or_else(|| Err("ERR no Lua engine".into()))
        })
        .await
        .ok_or_else(|| "ERR server is shutting down".to_string())?;
    let (name, functions) = done?;
    Ok(Library { name, code, functions, id: shared.new_library_id() })
}

fn function_list(conn: &mut Conn, a: &[Arg]) -> Frame {
    let mut pattern: Option<&[u8]> = None;
    let mut with_code = false;
    let mut i = 2;
    while i < a.len() {
        if a[i].eq_ignore_ascii_case(b"withcode") {
            if with_code {
                return err("ERR Unknown argument withcode");
            }
            with_code = true;
            i += 1;
        } else if a[i].eq_ignore_ascii_case(b"libraryname") {
            if pattern.is_some() {
                return err("ERR library name argument was already given");
            }
            let Some(p) = a.get(i + 1) else { return err("ERR library name argument was not given") };
            pattern = Some(p);
            i += 2;
        } else {
            return Frame::error(format!("ERR Unknown argument {}", String::from_utf8_lossy(&a[i])));
        }
    }
    let libs = conn.worker.server.scripts.libraries.read();
    let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
    let mut out = Vec::new();
    for lib in libs.libs.values() {
        if let Some(p) = pattern {
            if !abacus_keyspace::glob_match(p, lib.name.as_bytes(), false) {
                continue;
            }
        }
        let functions = lib
            .functions
            .iter()
            .map(|f| {
                Frame::Map(vec![
                    (s("name"), s(&f.name)),
                    (s("description"), f.description.as_deref().map(s).unwrap_or(Frame::Null)),
                    (s("flags"), Frame::Set(f.flags.iter().map(|x| s(x)).collect())),
                ])
            })
            .collect();
        let mut fields = vec![(s("library_name"), s(&lib.name)), (s("engine"), s("LUA")), (s("functions"), Frame::Array(functions))];
        if with_code {
            fields.push((s("library_code"), Frame::Bulk(lib.code.clone())));
        }
        out.push(Frame::Map(fields));
    }
    Frame::Array(out)
}

async fn function_delete(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let name = String::from_utf8_lossy(&a[2]).into_owned();
    match change_libraries(conn, access, a, |libs| libs.remove(&name).map(drop).ok_or_else(|| "ERR Library not found".to_string())).await {
        Ok(()) => Frame::ok(),
        Err(e) => Frame::error(e),
    }
}

async fn function_flush(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    if a.len() > 3 || (a.len() == 3 && !a[2].eq_ignore_ascii_case(b"async") && !a[2].eq_ignore_ascii_case(b"sync")) {
        return err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    match change_libraries(conn, access, a, |libs| {
        *libs = Libraries::default();
        Ok(())
    })
    .await
    {
        Ok(()) => Frame::ok(),
        Err(e) => Frame::error(e),
    }
}

/// Recovery's FUNCTION LOAD: the code by its library's name (it loaded live, so it loads).
fn replay_function_load(r: &mut Replay<'_>, _db: usize, args: &[Arg], _now: u64) -> Result<(), String> {
    let code = args.last().filter(|_| args.len() >= 3).ok_or("bad FUNCTION LOAD in the log")?;
    let (name, _) = abacus_scripting::parse_library_header(code)?;
    r.functions.insert(name, Bytes::copy_from_slice(code));
    Ok(())
}

/// Recovery's FUNCTION DELETE.
fn replay_function_delete(r: &mut Replay<'_>, _db: usize, args: &[Arg], _now: u64) -> Result<(), String> {
    let name = args.get(2).ok_or("bad FUNCTION DELETE in the log")?;
    r.functions.remove(&*String::from_utf8_lossy(name));
    Ok(())
}

/// Recovery's FUNCTION FLUSH.
fn replay_function_flush(r: &mut Replay<'_>, _db: usize, _args: &[Arg], _now: u64) -> Result<(), String> {
    r.functions.clear();
    Ok(())
}

/// Recovery's FUNCTION RESTORE: the payload's libraries with the policy it ran with.
fn replay_function_restore(r: &mut Replay<'_>, _db: usize, args: &[Arg], _now: u64) -> Result<(), String> {
    let payload = args.get(2).ok_or("bad FUNCTION RESTORE in the log")?;
    let codes = restore_payload(payload).map_err(|e| format!("bad FUNCTION RESTORE in the log: {e}"))?;
    if args.get(3).is_some_and(|p| p.eq_ignore_ascii_case(b"flush")) {
        r.functions.clear();
    }
    for code in codes {
        let (name, _) = abacus_scripting::parse_library_header(&code)?;
        r.functions.insert(name, code);
    }
    Ok(())
}

/// RDB's function opcode (`RDB_OPCODE_FUNCTION2`) and the version FUNCTION DUMP stamps.
const OPCODE_FUNCTION2: u8 = 245;

fn function_dump(conn: &mut Conn) -> Frame {
    let libs = conn.worker.server.scripts.libraries.read();
    let mut out = Vec::new();
    for lib in libs.libs.values() {
        out.push(OPCODE_FUNCTION2);
        abacus_rdb::write_string(&mut out, &lib.code, false);
    }
    abacus_rdb::append_dump_footer(&mut out);
    Frame::Bulk(Bytes::from(out))
}

async fn function_restore(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let policy = match a.get(3) {
        None => "append",
        Some(p) if p.eq_ignore_ascii_case(b"append") => "append",
        Some(p) if p.eq_ignore_ascii_case(b"replace") => "replace",
        Some(p) if p.eq_ignore_ascii_case(b"flush") => "flush",
        Some(_) => return err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."),
    };
    if a.len() > 4 {
        return err("ERR syntax error");
    }
    let codes = match restore_payload(&a[2]) {
        Ok(c) => c,
        Err(e) => return err(e),
    };
    let mut compiled = Vec::new();
    for code in codes {
        match compile_library(conn, access, code).await {
            Ok(lib) => compiled.push(lib),
            Err(e) => return Frame::error(e),
        }
    }
    // All or nothing: the libraries are added to a copy, which replaces the server's only if
    // every one of them fits.
    let change = move |libs: &mut Libraries| {
        let mut next = if policy == "flush" { Libraries::default() } else { libs.clone() };
        for lib in compiled {
            if policy != "replace" && next.libs.contains_key(&lib.name) {
                // RESTORE's text (LOAD's quotes the name).
                return Err(format!("ERR Library {} already exists", lib.name));
            }
            next.add(lib, policy == "replace")?;
        }
        *libs = next;
        Ok(())
    };
    match change_libraries(conn, access, a, change).await {
        Ok(()) => Frame::ok(),
        Err(e) => Frame::error(e),
    }
}

/// The libraries' code in a FUNCTION DUMP payload; the error as Redis words it.
fn restore_payload(payload: &[u8]) -> Result<Vec<Bytes>, &'static str> {
    let Some(body) = abacus_rdb::check_dump_footer(payload) else { return Err("ERR DUMP payload version or checksum are wrong") };
    let mut codes = Vec::new();
    let mut r = abacus_rdb::Reader::new(body, abacus_rdb::DecodeLimits::default());
    while !r.is_empty() {
        match r.read_u8() {
            Ok(OPCODE_FUNCTION2) => {}
            _ => return Err("ERR given type is not a function"),
        }
        match r.read_string() {
            Ok(code) => codes.push(Bytes::from(code)),
            Err(_) => return Err("ERR DUMP payload version or checksum are wrong"),
        }
    }
    Ok(codes)
}

fn function_stats(conn: &mut Conn) -> Frame {
    let shared = &conn.worker.server.scripts;
    let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
    let running = match shared.running().into_iter().find(|r| r.function) {
        Some(r) => Frame::Map(vec![
            (s("name"), s(&r.name)),
            (s("command"), Frame::Array(vec![s("fcall"), s(&r.name)])),
            (s("duration_ms"), Frame::Integer(now_ms().saturating_sub(r.started_ms) as i64)),
        ]),
        _ => Frame::Null,
    };
    let libs = shared.libraries.read();
    let functions: usize = libs.libs.values().map(|l| l.functions.len()).sum();
    Frame::Map(vec![
        (s("running_script"), running),
        (s("engines"), Frame::Map(vec![(s("LUA"), Frame::Map(vec![(s("libraries_count"), Frame::Integer(libs.libs.len() as i64)), (s("functions_count"), Frame::Integer(functions as i64))]))])),
    ])
}

fn script_help() -> Frame {
    help(&[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DEBUG (YES|SYNC|NO)",
        "    Set the debug mode for subsequent scripts executed.",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Prints this help.",
    ])
}

fn function_help() -> Frame {
    help(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ])
}

fn help(lines: &[&str]) -> Frame {
    Frame::Array(lines.iter().map(|l| Frame::Simple(Bytes::copy_from_slice(l.as_bytes()))).collect())
}
