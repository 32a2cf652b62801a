//! The connection family: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, TIME, CLIENT and
//! COMMAND.
//!
//! These act on the connection's own state (protocol version, database, name, reply mode) or
//! on the client registry, never on keys, so they run in the connection task.

use std::sync::atomic::Ordering;

use abacus_protocol::{Arg, Bytes, Frame, Protocol};

use super::args::*;
use crate::command_flags::acl_categories;
use crate::command::flags::*;
use crate::command::{self, Spec};
use crate::conn::{Conn, ReplyMode};
use crate::node::REDIS_VERSION;
use abacus_engine::shard::now_ms;

const G: &str = "connection";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("ping", -1, FAST | DENY_ON_DISK_ERROR | ALLOWED_SUBSCRIBED, NONE, conn_fn!(|conn, _, call| ping(conn, &call.args)), G, "Returns the server's liveliness response.")
        .docs("1.0.0", "O(1)")
        .tips("request_policy:all_shards response_policy:all_succeeded")
        .args("
            message type=string flags=optional
        "),
    Spec::conn("echo", 2, FAST | LOADING | STALE, NONE, conn_fn!(|_, _, call| Frame::Bulk(call.args.bytes(1))), G, "Returns the given string.")
        .docs("1.0.0", "O(1)")
        .args("
            message type=string
        "),
    HELLO,
    AUTH,
    Spec::conn("select", 2, FAST | LOADING | STALE, NONE, conn_fn!(|conn, _, call| select(conn, &call.args)), G, "Changes the selected database.")
        .docs("1.0.0", "O(1)")
        .args("
            index type=integer
        "),
    QUIT,
    Spec::conn("reset", 1, NO_AUTH | FAST | CONTROLS_MULTI | LOADING | STALE | ALLOWED_SUBSCRIBED, NONE, conn_fn!(|conn, _, _| reset(conn).await), G, "Resets the connection.")
        .docs("6.2.0", "O(1)")
        .noscript()
        .allow_busy(),
    Spec::conn("time", 1, FAST | LOADING | STALE, NONE, conn_fn!(|_, _, _| time()), "server", "Returns the server time.")
        .docs("2.6.0", "O(1)")
        .tips("nondeterministic_output"),
    CLIENT_ENTRY,
    Spec::conn("command", -1, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| command(&call.args, CommandSub::All)), "server", "Returns detailed information about all commands.").with_subcommands(COMMAND)
        .docs("2.8.13", "O(N) where N is the total number of Redis commands")
        .tips("nondeterministic_output_order"),
];

/// CLIENT's entry: any CLIENT subcommand keeps CLIENT CACHING's one-command flag (`conn/mod.rs`).
pub const CLIENT_ENTRY: Spec = Spec::conn("client", -2, KEEPS_CLIENT_CACHING, NONE, conn_fn!(|_, _, _| crate::conn::container()), G, "A container for client connection commands.").with_subcommands(CLIENT)
    .docs("2.4.0", "Depends on subcommand.");

/// QUIT's entry: never queued inside MULTI (`conn/admit.rs`).
pub const QUIT: Spec = Spec::conn("quit", -1, NO_AUTH | FAST | LOADING | STALE | ALLOWED_SUBSCRIBED | NEVER_QUEUED, NONE, conn_fn!(|conn, _, _| quit(conn)), G, "Closes the connection.")
    .docs("1.0.0", "O(1)")
    .noscript()
    .allow_busy();

/// AUTH's entry: MONITOR redacts its arguments (`monitor.rs`).
pub const AUTH: Spec = Spec::conn("auth", -2, NO_AUTH | FAST | LOADING | STALE, NONE, conn_fn!(|conn, _, call| auth(conn, &call.args)), G, "Authenticates the connection.").with_redacted_args(|args| 1..args.len())
    .docs("1.0.0", "O(N) where N is the number of passwords defined for the user")
    .history(&[("6.0.0", "Added ACL style (username and password).")])
    .noscript()
    .allow_busy()
    .args("
        username type=string since=6.0.0 flags=optional
        password type=string
    ");

/// HELLO's entry: MONITOR redacts its AUTH arguments (`monitor.rs`).
pub const HELLO: Spec = Spec::conn("hello", -1, NO_AUTH | FAST | LOADING | STALE, NONE, conn_fn!(|conn, _, call| hello(conn, &call.args)), G, "Handshakes with the Redis server.").with_redacted_args(hello_redacted)
    .docs("6.0.0", "O(1)")
    .history(&[("6.2.0", "`protover` made optional; when called without arguments the command reports the current connection's context.")])
    .noscript()
    .allow_busy()
    .args("
        arguments type=block flags=optional
          protover type=integer
          username_password type=block token=AUTH flags=optional
            username type=string
            password type=string
          clientname type=string token=SETNAME flags=optional
    ");

/// HELLO's secret arguments: the user name and password after AUTH (MONITOR hides them).
fn hello_redacted(args: &[&[u8]]) -> std::ops::Range<usize> {
    match args.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
        Some(at) => at + 1..(at + 3).min(args.len()),
        None => 0..0,
    }
}

const CLIENT: &[Spec] = &[
    Spec::conn("client|id", 2, LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::Id, &call.args)), G, "Returns the unique client ID of the connection.")
        .docs("5.0.0", "O(1)")
        .noscript(),
    Spec::conn("client|setname", 3, LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::SetName, &call.args)), G, "Sets the connection name.")
        .docs("2.6.9", "O(1)")
        .noscript()
        .args("
            connection-name type=string
        "),
    Spec::conn("client|getname", 2, LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::GetName, &call.args)), G, "Returns the name of the connection.")
        .docs("2.6.9", "O(1)")
        .noscript(),
    Spec::conn("client|list", -2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::List, &call.args)), G, "Lists open connections.")
        .docs("2.4.0", "O(N) where N is the number of client connections")
        .history(&[
            ("2.8.12", "Added unique client `id` field."),
            ("5.0.0", "Added optional `TYPE` filter."),
            ("6.0.0", "Added `user` field."),
            ("6.2.0", "Added `argv-mem`, `tot-mem`, `laddr` and `redir` fields and the optional `ID` filter."),
            ("7.0.0", "Added `resp`, `multi-mem`, `rbs` and `rbp` fields."),
            ("7.0.3", "Added `ssub` field."),
        ])
        .tips("nondeterministic_output")
        .noscript()
        .args("
            normal_master_replica_pubsub type=oneof token=TYPE since=5.0.0 flags=optional
              normal type=pure-token token=NORMAL
              master type=pure-token token=MASTER
              replica type=pure-token token=REPLICA
              pubsub type=pure-token token=PUBSUB
            id type=block token=ID since=6.2.0 flags=optional
              client-id type=integer flags=multiple
        "),
    Spec::conn("client|info", 2, LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::Info, &call.args)), G, "Returns information about the connection.")
        .docs("6.2.0", "O(1)")
        .tips("nondeterministic_output")
        .noscript(),
    Spec::conn("client|kill", -3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::Kill, &call.args)), G, "Terminates open connections.")
        .docs("2.4.0", "O(N) where N is the number of client connections")
        .history(&[
            ("2.8.12", "Added new filter format."),
            ("2.8.12", "`ID` option."),
            ("3.2.0", "Added `master` type in for `TYPE` option."),
            ("5.0.0", "Replaced `slave` `TYPE` with `replica`. `slave` still supported for backward compatibility."),
            ("6.2.0", "`LADDR` option."),
        ])
        .noscript()
        .args("
            filter type=oneof
              ip:port type=string deprecated_since=2.8.12
              new-format type=oneof flags=multiple
                client-id type=integer token=ID since=2.8.12 flags=optional
                normal_master_slave_pubsub type=oneof token=TYPE since=2.8.12 flags=optional
                  normal type=pure-token token=NORMAL
                  master type=pure-token token=MASTER since=3.2.0
                  slave type=pure-token token=SLAVE
                  replica type=pure-token token=REPLICA since=5.0.0
                  pubsub type=pure-token token=PUBSUB
                username type=string token=USER flags=optional
                ip:port type=string token=ADDR flags=optional
                ip:port type=string token=LADDR since=6.2.0 flags=optional
                yes/no type=string token=SKIPME flags=optional
        "),
    Spec::conn("client|unblock", -3, ADMIN | FAST | LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::Unblock, &call.args)), G, "Unblocks a client blocked by a blocking command from a different connection.")
        .docs("5.0.0", "O(log N) where N is the number of client connections")
        .noscript()
        .args("
            client-id type=integer
            timeout_error type=oneof flags=optional
              timeout type=pure-token token=TIMEOUT
              error type=pure-token token=ERROR
        "),
    Spec::conn("client|no-evict", 3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::NoEvict, &call.args)), G, "Sets the client eviction mode of the connection.")
        .docs("7.0.0", "O(1)")
        .noscript()
        .args("
            enabled type=oneof
              on type=pure-token token=ON
              off type=pure-token token=OFF
        "),
    Spec::conn("client|reply", 3, LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::Reply, &call.args)), G, "Instructs the server whether to reply to commands.")
        .docs("3.2.0", "O(1)")
        .noscript()
        .args("
            on_off_skip type=oneof
              on type=pure-token token=ON
              off type=pure-token token=OFF
              skip type=pure-token token=SKIP
        "),
    Spec::conn("client|setinfo", 4, FAST, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::SetInfo, &call.args)), G, "Sets information specific to the client or connection.")
        .docs("7.2.0", "O(1)"),
    Spec::conn("client|help", 2, LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::Help, &call.args)), G, "Returns helpful text about the different subcommands.")
        .docs("5.0.0", "O(1)"),
    Spec::conn("client|pause", -3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| crate::client_pause::pause_command(conn, &call.args)), G, "Suspends commands processing.")
        .docs("2.9.50", "O(1)")
        .history(&[("6.2.0", "`CLIENT PAUSE WRITE` mode added along with the `mode` option.")])
        .noscript()
        .args("
            timeout type=integer
            mode type=oneof since=6.2.0 flags=optional
              write type=pure-token token=WRITE
              all type=pure-token token=ALL
        "),
    Spec::conn("client|unpause", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| crate::client_pause::unpause_command(conn)), G, "Resumes processing commands from paused clients.")
        .docs("6.2.0", "O(N) Where N is the number of paused clients")
        .noscript(),
    Spec::conn("client|tracking", -3, LOADING | STALE, NONE, conn_fn!(|conn, _, call| super::tracking::client_tracking(conn, &call.args)), G, "Controls server-assisted client-side caching for the connection.")
        .docs("6.0.0", "O(1). Some options may introduce additional complexity.")
        .noscript()
        .args("
            status type=oneof
              on type=pure-token token=ON
              off type=pure-token token=OFF
            client-id type=integer token=REDIRECT flags=optional
            prefix type=string token=PREFIX flags=optional,multiple,multiple_token
            bcast type=pure-token token=BCAST flags=optional
            optin type=pure-token token=OPTIN flags=optional
            optout type=pure-token token=OPTOUT flags=optional
            noloop type=pure-token token=NOLOOP flags=optional
        "),
    Spec::conn("client|trackinginfo", 2, LOADING | STALE, NONE, conn_fn!(|conn, _, _| super::tracking::client_trackinginfo(conn)), G, "Returns information about server-assisted client-side caching for the connection.")
        .docs("6.2.0", "O(1)")
        .noscript(),
    Spec::conn("client|getredir", 2, LOADING | STALE, NONE, conn_fn!(|conn, _, _| super::tracking::client_getredir(conn)), G, "Returns the client ID to which the connection's tracking notifications are redirected.")
        .docs("6.0.0", "O(1)")
        .noscript(),
    Spec::conn("client|caching", 3, LOADING | STALE, NONE, conn_fn!(|conn, _, call| super::tracking::client_caching(conn, &call.args)), G, "Instructs the server whether to track the keys in the next request.")
        .docs("6.0.0", "O(1)")
        .noscript()
        .args("
            mode type=oneof
              yes type=pure-token token=YES
              no type=pure-token token=NO
        "),
    Spec::conn("client|no-touch", 3, LOADING | STALE, NONE, conn_fn!(|conn, _, call| client(conn, ClientSub::NoTouch, &call.args)), G, "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.")
        .docs("7.2.0", "O(1)"),
];

const COMMAND: &[Spec] = &[
    Spec::conn("command|count", 2, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| command(&call.args, CommandSub::Count)), "server", "Returns a count of commands.")
        .docs("2.8.13", "O(1)"),
    Spec::conn("command|info", -2, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| command(&call.args, CommandSub::Info)), "server", "Returns information about one, multiple or all commands.")
        .docs("2.8.13", "O(N) where N is the number of commands to look up")
        .history(&[("7.0.0", "Allowed to be called with no argument to get info on all commands.")])
        .tips("nondeterministic_output_order")
        .args("
            command-name type=string flags=optional,multiple
        "),
    Spec::conn("command|docs", -2, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| command(&call.args, CommandSub::Docs)), "server", "Returns documentary information about one, multiple or all commands.")
        .docs("7.0.0", "O(N) where N is the number of commands to look up")
        .tips("nondeterministic_output_order")
        .args("
            command-name type=string flags=optional,multiple
        "),
    Spec::conn("command|list", -2, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| command(&call.args, CommandSub::List)), "server", "Returns a list of command names.")
        .docs("7.0.0", "O(N) where N is the total number of Redis commands")
        .tips("nondeterministic_output_order")
        .args("
            filterby type=oneof token=FILTERBY flags=optional
              module-name type=string token=MODULE
              category type=string token=ACLCAT
              pattern type=pattern token=PATTERN
        "),
    Spec::conn("command|help", 2, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| command(&call.args, CommandSub::Help)), "server", "Returns helpful text about the different subcommands.")
        .docs("5.0.0", "O(1)"),
    Spec::conn("command|getkeys", -4, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| super::getkeys::getkeys(&call.args, false)), "server", "Extracts the key names from an arbitrary command.")
        .docs("2.8.13", "O(N) where N is the number of arguments to the command"),
    Spec::conn("command|getkeysandflags", -4, LOADING | STALE | ACL_CONNECTION, NONE, conn_fn!(|_, _, call| super::getkeys::getkeys(&call.args, true)), "server", "Extracts the key names and access flags for an arbitrary command.")
        .docs("7.0.0", "O(N) where N is the number of arguments to the command"),
];

pub fn ping(conn: &mut Conn, a: &[Arg]) -> Frame {
    if conn.client.proto == Protocol::Resp2 && conn.pubsub.is_some() && a.len() <= 2 {
        // Subscribed (RESP2): a message-shaped reply, as Redis's.
        return Frame::Array(vec![Frame::bulk(&b"pong"[..]), Frame::Bulk(a.get(1).map_or_else(Bytes::new, |m| Bytes::copy_from_slice(m)))]);
    }
    match a.len() {
        1 => Frame::simple("PONG"),
        2 => Frame::Bulk(Bytes::copy_from_slice(&a[1])),
        _ => crate::conn::error_arity("ping"),
    }
}

/// Authenticates the connection as `user` with `pass` (ACL users, `acl.rs`); a failure
/// is logged in ACL LOG as Redis logs it.
fn authenticate(conn: &mut Conn, user: &[u8], pass: &[u8]) -> bool {
    match conn.worker.server.acl.authenticate(user, pass) {
        Some(u) => {
            conn.set_user(u);
            conn.client.authenticated = true;
            true
        }
        None => {
            let context = if conn.multi.is_some() { "multi" } else { "toplevel" };
            conn.acl_log_as("auth", context, b"AUTH".to_vec(), user);
            false
        }
    }
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

pub fn auth(conn: &mut Conn, a: &[Arg]) -> Frame {
    if a.len() > 3 {
        return err(ERR_SYNTAX);
    }
    if a.len() == 2 && conn.worker.server.acl.default_user().rules().nopass {
        return err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    }
    let (user, pass) = if a.len() == 3 { (&a[1][..], &a[2][..]) } else { (&b"default"[..], &a[1][..]) };
    if authenticate(conn, user, pass) {
        Frame::ok()
    } else {
        err(WRONGPASS)
    }
}

fn valid_client_name(n: &[u8]) -> bool {
    n.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

pub fn hello(conn: &mut Conn, a: &[Arg]) -> Frame {
    let mut proto = None;
    if a.len() >= 2 {
        match parse_i64(&a[1]) {
            Ok(2) => proto = Some(Protocol::Resp2),
            Ok(3) => proto = Some(Protocol::Resp3),
            Ok(_) => return err("NOPROTO unsupported protocol version"),
            Err(_) => return err("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut i = 2;
    let mut name = None;
    while i < a.len() {
        if is(&a[i], "auth") && i + 2 < a.len() {
            if !authenticate(conn, &a[i + 1], &a[i + 2]) {
                return err(WRONGPASS);
            }
            i += 3;
        } else if is(&a[i], "setname") && i + 1 < a.len() {
            if !valid_client_name(&a[i + 1]) {
                return err("ERR Client names cannot contain spaces, newlines or special characters.");
            }
            name = Some(String::from_utf8_lossy(&a[i + 1]).into_owned());
            i += 2;
        } else {
            return err_quoting("ERR Syntax error in HELLO option '", &a[i], "'");
        }
    }
    if !conn.client.authenticated && conn.worker.server.acl.auth_required() {
        return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(n) = name {
        *conn.client.meta.name.lock() = if n.is_empty() { None } else { Some(n) };
    }
    if let Some(p) = proto {
        conn.client.proto = p;
        conn.client.meta.resp.store(if p == Protocol::Resp3 { 3 } else { 2 }, Ordering::Relaxed);
    }
    let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
    Frame::Map(vec![
        (s("server"), s("redis")),
        (s("version"), s(REDIS_VERSION)),
        (s("proto"), Frame::Integer(if conn.client.proto == Protocol::Resp3 { 3 } else { 2 })),
        (s("id"), Frame::Integer(conn.client.meta.id as i64)),
        (s("mode"), s("standalone")),
        (s("role"), s("master")),
        (s("modules"), Frame::Array(vec![])),
    ])
}

pub fn select(conn: &mut Conn, a: &[Arg]) -> Frame {
    let n = match parse_i32(&a[1]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if conn.worker.server.cluster.is_some() && n != 0 {
        return err("ERR SELECT is not allowed in cluster mode");
    }
    if n < 0 || n as usize >= conn.worker.server.databases {
        return err("ERR DB index is out of range");
    }
    conn.client.db = n as usize;
    conn.client.meta.db.store(conn.client.db, Ordering::Relaxed);
    Frame::ok()
}

pub fn quit(conn: &mut Conn) -> Frame {
    conn.close_after_reply = true;
    Frame::ok()
}

pub async fn reset(conn: &mut Conn) -> Frame {
    if conn.monitor.take().is_some() {
        conn.worker.server.monitors.remove(conn.client.meta.id);
    }
    conn.multi = None;
    conn.client.meta.multi_len.store(usize::MAX, Ordering::Relaxed);
    conn.client.meta.multi_mem.store(0, Ordering::Relaxed);
    conn.unwatch_all().await;
    // Messages published before the RESET still go out, before its reply.
    conn.take_messages(usize::MAX);
    conn.leave_pubsub();
    conn.client.db = 0;
    conn.client.meta.db.store(0, Ordering::Relaxed);
    conn.client.proto = Protocol::Resp2;
    conn.client.meta.resp.store(2, Ordering::Relaxed);
    *conn.client.meta.name.lock() = None;
    conn.client.reply_mode = ReplyMode::On;
    conn.client.meta.no_evict.store(false, Ordering::Relaxed);
    conn.client.meta.no_touch.store(false, Ordering::Relaxed);
    if conn.tracking.take().is_some() {
        crate::tracking::disable(conn.client.meta.id);
    }
    let default = conn.worker.server.acl.default_user();
    conn.set_user(default);
    conn.client.authenticated = !conn.worker.server.acl.auth_required();
    Frame::simple("RESET")
}

pub fn time() -> Frame {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Frame::Array(vec![
        Frame::bulk(d.as_secs().to_string().into_bytes()),
        Frame::bulk(d.subsec_micros().to_string().into_bytes()),
    ])
}

fn verbatim(text: String) -> Frame {
    Frame::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

/// CLIENT's subcommands (each table entry names its own).
#[derive(Clone, Copy)]
pub enum ClientSub {
    Id,
    SetName,
    GetName,
    Info,
    List,
    Kill,
    Unblock,
    NoEvict,
    Reply,
    SetInfo,
    Help,
    NoTouch,
}

pub fn client(conn: &mut Conn, sub: ClientSub, a: &[Arg]) -> Frame {
    match sub {
        ClientSub::Id => Frame::Integer(conn.client.meta.id as i64),
        ClientSub::SetName => {
            if !valid_client_name(&a[2]) {
                return err("ERR Client names cannot contain spaces, newlines or special characters.");
            }
            let n = String::from_utf8_lossy(&a[2]).into_owned();
            *conn.client.meta.name.lock() = if n.is_empty() { None } else { Some(n) };
            Frame::ok()
        }
        ClientSub::GetName => match conn.client.meta.name.lock().clone() {
            Some(n) => Frame::bulk(n.into_bytes()),
            None => Frame::Null,
        },
        ClientSub::Info => verbatim(conn.client.meta.info_line(now_ms()) + "\n"),
        ClientSub::List => client_list(conn, a),
        ClientSub::Kill => client_kill(conn, a),
        ClientSub::Unblock => {
            let Ok(id) = parse_i64(&a[2]) else { return err("ERR value is not an integer or out of range") };
            let mode = match a.get(3) {
                None => crate::clients::UNBLOCK_TIMEOUT,
                Some(r) if is(r, "timeout") => crate::clients::UNBLOCK_TIMEOUT,
                Some(r) if is(r, "error") => crate::clients::UNBLOCK_ERROR,
                Some(_) => return err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
            };
            let target = u64::try_from(id).ok().and_then(|id| conn.worker.server.clients.get(id));
            Frame::Integer(target.is_some_and(|t| t.request_unblock(mode)).into())
        }
        ClientSub::NoEvict => {
            if is(&a[2], "on") {
                conn.client.meta.no_evict.store(true, Ordering::Relaxed);
            } else if is(&a[2], "off") {
                conn.client.meta.no_evict.store(false, Ordering::Relaxed);
            } else {
                return err(ERR_SYNTAX);
            }
            Frame::ok()
        }
        // Redis 7.2: while on, the client's commands (but TOUCH) leave the access times of
        // the keys they look up alone (`exec::untouching`).
        ClientSub::NoTouch => {
            if is(&a[2], "on") {
                conn.client.meta.no_touch.store(true, Ordering::Relaxed);
            } else if is(&a[2], "off") {
                conn.client.meta.no_touch.store(false, Ordering::Relaxed);
            } else {
                return err(ERR_SYNTAX);
            }
            Frame::ok()
        }
        ClientSub::Reply => {
            if is(&a[2], "on") {
                conn.client.reply_mode = ReplyMode::On;
            } else if is(&a[2], "off") {
                conn.client.reply_mode = ReplyMode::Off;
            } else if is(&a[2], "skip") {
                // Suppress this reply and the next command's.
                if conn.client.reply_mode != ReplyMode::Off {
                    conn.client.reply_mode = ReplyMode::Skip(2);
                }
            } else {
                return err(ERR_SYNTAX);
            }
            Frame::ok()
        }
        ClientSub::SetInfo => {
            let v = String::from_utf8_lossy(&a[3]).into_owned();
            if is(&a[2], "lib-name") || is(&a[2], "lib-ver") {
                if !valid_client_name(&a[3]) {
                    return err("ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.");
                }
                if is(&a[2], "lib-name") {
                    *conn.client.meta.lib_name.lock() = Some(v);
                }
                Frame::ok()
            } else {
                Frame::error(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(&a[2])))
            }
        }
        ClientSub::Help => Frame::Array(
            ["CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "ID", "SETNAME <name>", "GETNAME", "LIST [TYPE <type>] [ID <id> ...]", "INFO", "KILL <ip:port> | <filter> <value> ...", "UNBLOCK <clientid> [TIMEOUT|ERROR]", "NO-EVICT (ON|OFF)", "NO-TOUCH (ON|OFF)", "REPLY (ON|OFF|SKIP)", "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]", "TRACKINGINFO", "GETREDIR", "CACHING (YES|NO)", "HELP"]
                .iter()
                .map(|l| Frame::Simple(Bytes::from_static(l.as_bytes())))
                .collect(),
        ),
    }
}

/// CLIENT LIST [TYPE type | ID id ...], as Redis 7.0 parses it: TYPE only as the sole
/// filter, ID taking every argument after it, anything else a syntax error.
fn client_list(conn: &Conn, a: &[Arg]) -> Frame {
    let mut of_type = None;
    let ids: Option<Vec<u64>> = if a.len() == 4 && is(&a[2], "type") {
        match client_type(&a[3]) {
            Ok(t) => {
                of_type = Some(t);
                None
            }
            Err(e) => return e,
        }
    } else if a.len() > 3 && is(&a[2], "id") {
        let mut v = Vec::new();
        for arg in &a[3..] {
            // Any integer: an ID no client has (0, -1) just matches nothing, as in Redis.
            match parse_i64(arg) {
                Ok(id) => v.extend(u64::try_from(id).ok()),
                _ => return err("ERR Invalid client ID"),
            }
        }
        Some(v)
    } else if a.len() != 2 {
        return err(ERR_SYNTAX);
    } else {
        None
    };
    let now = now_ms();
    let mut out = String::new();
    for c in conn.worker.server.clients.all() {
        if ids.as_ref().is_none_or(|v| v.contains(&c.id)) && of_type.is_none_or(|t| t == ClientType::of(&c)) {
            out.push_str(&c.info_line(now));
            out.push('\n');
        }
    }
    verbatim(out)
}

/// Redis's client types (CLIENT LIST/KILL TYPE).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    PubSub,
    Master,
    Replica,
}

impl ClientType {
    /// A client with a subscription is of type pubsub (Redis's CLIENT_PUBSUB), any other normal.
    fn of(c: &crate::clients::ClientMeta) -> ClientType {
        match c.repl_kind.load(std::sync::atomic::Ordering::Relaxed) {
            crate::clients::REPL_MASTER => return ClientType::Master,
            crate::clients::REPL_REPLICA => return ClientType::Replica,
            _ => {}
        }
        if c.is_pubsub() {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

/// A CLIENT LIST/KILL TYPE value, or Redis's error for a name that is no client type.
fn client_type(t: &[u8]) -> Result<ClientType, Frame> {
    if is(t, "normal") {
        Ok(ClientType::Normal)
    } else if is(t, "pubsub") {
        Ok(ClientType::PubSub)
    } else if is(t, "master") {
        Ok(ClientType::Master)
    } else if ["replica", "slave"].iter().any(|n| is(t, n)) {
        Ok(ClientType::Replica)
    } else {
        Err(err_quoting("ERR Unknown client type '", t, "'"))
    }
}

fn client_kill(conn: &mut Conn, a: &[Arg]) -> Frame {
    let clients = conn.worker.server.clients.all();
    if a.len() == 3 {
        // Old form: CLIENT KILL addr:port.
        let addr = String::from_utf8_lossy(&a[2]);
        return match clients.iter().find(|c| c.addr.to_string() == addr) {
            Some(c) => {
                c.kill();
                if c.id == conn.client.meta.id {
                    conn.close_after_reply = true;
                }
                Frame::ok()
            }
            None => err("ERR No such client"),
        };
    }
    let (mut id, mut addr, mut laddr, mut skipme, mut of_type) = (None, None, None, true, None);
    let mut i = 2;
    while i + 1 < a.len() {
        let v = String::from_utf8_lossy(&a[i + 1]).into_owned();
        if is(&a[i], "id") {
            match parse_i64(&a[i + 1]) {
                Ok(n) if n > 0 => id = Some(n as u64),
                _ => return err("ERR client-id should be greater than 0"),
            }
        } else if is(&a[i], "addr") {
            addr = Some(v);
        } else if is(&a[i], "laddr") {
            laddr = Some(v);
        } else if is(&a[i], "skipme") {
            skipme = match v.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return err(ERR_SYNTAX),
            };
        } else if is(&a[i], "type") {
            match client_type(&a[i + 1]) {
                Ok(t) => of_type = Some(t),
                Err(e) => return e,
            }
        } else if is(&a[i], "user") {
            // Every client here is the default user's; there are no others.
            if &a[i + 1][..] != b"default" {
                return Frame::error(format!("ERR No such user '{v}'"));
            }
        } else {
            return err(ERR_SYNTAX);
        }
        i += 2;
    }
    if i != a.len() {
        return err(ERR_SYNTAX);
    }
    let mut killed = 0;
    for c in clients {
        if of_type.is_some_and(|t| t != ClientType::of(&c)) || id.is_some_and(|x| x != c.id) || addr.as_ref().is_some_and(|x| *x != c.addr.to_string()) || laddr.as_ref().is_some_and(|x| *x != c.laddr.to_string()) {
            continue;
        }
        if c.id == conn.client.meta.id {
            if skipme {
                continue;
            }
            conn.close_after_reply = true;
        }
        c.kill();
        killed += 1;
    }
    Frame::Integer(killed)
}

/// COMMAND INFO's flags in Redis's order (`addReplyCommandFlags`): the command table's, with
/// the ones that change nothing here (`command_flags`) in their places.
fn flag_names(spec: &Spec) -> Vec<Frame> {
    use crate::command_flags::{extra, Position};
    let mut names: Vec<&'static str> = Vec::new();
    let table = |list: &[(u32, &'static str)], names: &mut Vec<&'static str>| names.extend(list.iter().filter(|(f, _)| spec.has(*f)).map(|(_, n)| *n));
    table(&[(WRITE, "write"), (READONLY, "readonly"), (DENYOOM, "denyoom"), (ADMIN, "admin")], &mut names);
    names.extend(extra(spec, Position::AfterAdmin));
    table(&[(BLOCKING, "blocking"), (LOADING, "loading"), (STALE, "stale")], &mut names);
    names.extend(extra(spec, Position::AfterStale));
    table(&[(FAST, "fast"), (NO_AUTH, "no_auth")], &mut names);
    names.extend(extra(spec, Position::AfterNoAuth));
    table(&[(NO_MULTI, "no_multi")], &mut names);
    if crate::keyspec::movable(spec) {
        names.push("movablekeys");
    }
    names.extend(extra(spec, Position::Last));
    names.into_iter().map(|n| Frame::Simple(Bytes::from_static(n.as_bytes()))).collect()
}

fn command_info(spec: &Spec) -> Frame {
    Frame::Array(vec![
        Frame::bulk(spec.name.as_bytes().to_vec()),
        Frame::Integer(spec.arity as i64),
        Frame::Set(flag_names(spec)),
        Frame::Integer(spec.first_key as i64),
        Frame::Integer(spec.last_key as i64),
        Frame::Integer(spec.step as i64),
        Frame::Set(acl_categories(spec).into_iter().map(|c| Frame::Simple(Bytes::from(format!("@{c}")))).collect()),
        // tips and key specs: sets in RESP3, as Redis 7.0 replies them; subcommands an
        // empty set when there are none, else an array (Redis's addReplyCommandSubCommands)
        Frame::Set(spec.doc.tips.split_whitespace().map(|t| Frame::bulk(t.as_bytes().to_vec())).collect()),
        Frame::Set(crate::keyspec::of(spec).iter().map(key_spec_frame).collect()),
        if spec.subcommands.is_empty() {
            Frame::Set(vec![])
        } else {
            Frame::Array(spec.subcommands.iter().map(command_info).collect())
        },
    ])
}

/// One key spec as Redis 7.0's addReplyCommandKeySpecs replies it: a map of flags,
/// begin_search and find_keys.
fn key_spec_frame(k: &crate::keyspec::KeySpec) -> Frame {
    use crate::keyspec::{Begin, Find};
    let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
    let i = |v: i32| Frame::Integer(v as i64);
    let typed = |t: &str, spec: Vec<(Frame, Frame)>| Frame::Map(vec![(s("type"), s(t)), (s("spec"), Frame::Map(spec))]);
    let begin = match k.begin {
        Begin::Index(n) => typed("index", vec![(s("index"), i(n))]),
        Begin::Keyword(kw, from) => typed("keyword", vec![(s("keyword"), s(kw)), (s("startfrom"), i(from))]),
        Begin::Unknown => typed("unknown", vec![]),
    };
    let find = match k.find {
        Find::Range { lastkey, step, limit } => typed("range", vec![(s("lastkey"), i(lastkey)), (s("keystep"), i(step)), (s("limit"), i(limit))]),
        Find::Keynum { keynumidx, firstkey, step } => typed("keynum", vec![(s("keynumidx"), i(keynumidx)), (s("firstkey"), i(firstkey)), (s("keystep"), i(step))]),
        Find::Unknown => typed("unknown", vec![]),
    };
    Frame::Map(vec![
        (s("flags"), Frame::Set(k.flag_names().map(|f| Frame::Simple(Bytes::from_static(f.as_bytes()))).collect())),
        (s("begin_search"), begin),
        (s("find_keys"), find),
    ])
}

fn command_docs(spec: &Spec) -> Frame {
    let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
    let d = &spec.doc;
    let mut fields = vec![(s("summary"), s(spec.summary)), (s("since"), s(d.since)), (s("group"), s(spec.group))];
    if !d.complexity.is_empty() {
        fields.push((s("complexity"), s(d.complexity)));
    }
    if !d.doc_flags.is_empty() {
        fields.push((s("doc_flags"), Frame::Set(d.doc_flags.split_whitespace().map(|f| Frame::Simple(Bytes::from_static(f.as_bytes()))).collect())));
    }
    if !d.deprecated_since.is_empty() {
        fields.push((s("deprecated_since"), s(d.deprecated_since)));
        fields.push((s("replaced_by"), s(d.replaced_by)));
    }
    if !d.history.is_empty() {
        fields.push((s("history"), Frame::Array(d.history.iter().map(|(v, t)| Frame::Array(vec![s(v), s(t)])).collect())));
    }
    let arguments = crate::command_docs::of(spec.name);
    if !arguments.is_empty() {
        fields.push((s("arguments"), argument_frames(arguments)));
    }
    if !spec.subcommands.is_empty() {
        fields.push((s("subcommands"), Frame::Map(spec.subcommands.iter().map(|c| (s(c.name), command_docs(c))).collect())));
    }
    Frame::Map(fields)
}

/// COMMAND DOCS's `arguments`: each argument a map of its fields as Redis's
/// addReplyCommandArgList replies them (`key_spec_index` an integer, `flags` a set).
fn argument_frames(args: &[crate::command_docs::Argument]) -> Frame {
    let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
    Frame::Array(
        args.iter()
            .map(|a| {
                let mut map: Vec<(Frame, Frame)> = a
                    .fields
                    .iter()
                    .map(|&(k, v)| {
                        let value = match k {
                            "key_spec_index" => Frame::Integer(v.parse().unwrap_or(-1)),
                            "flags" => Frame::Set(v.split(',').map(|f| Frame::Simple(Bytes::from(f.to_string()))).collect()),
                            _ => s(v),
                        };
                        (s(k), value)
                    })
                    .collect();
                if !a.arguments.is_empty() {
                    map.push((s("arguments"), argument_frames(&a.arguments)));
                }
                Frame::Map(map)
            })
            .collect(),
    )
}

fn sorted_commands() -> Vec<&'static Spec> {
    let mut all: Vec<&'static Spec> = command::all().collect();
    all.sort_by_key(|s| s.name);
    all
}

/// A command by name, or a subcommand by its full name (`client|kill`), as Redis's
/// COMMAND INFO/DOCS look names up.
fn lookup_full(name: &[u8]) -> Option<&'static Spec> {
    command::lookup(name).or_else(|| {
        let bar = name.iter().position(|&b| b == b'|')?;
        command::lookup(&name[..bar])?.subcommands.iter().find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
    })
}

/// COMMAND and its subcommands.
#[derive(Clone, Copy)]
pub enum CommandSub {
    All,
    Count,
    Info,
    Docs,
    List,
    Help,
}

pub fn command(a: &[Arg], sub: CommandSub) -> Frame {
    match sub {
        CommandSub::All => Frame::Array(sorted_commands().into_iter().map(command_info).collect()),
        CommandSub::Count => Frame::Integer(command::all().count() as i64),
        CommandSub::Info => {
            if a.len() == 2 {
                return Frame::Array(sorted_commands().into_iter().map(command_info).collect());
            }
            // an unknown name is a null (RESP2 `$-1`, as Redis's addReplyNull)
            Frame::Array(a[2..].iter().map(|n| lookup_full(n).map(command_info).unwrap_or(Frame::Null)).collect())
        }
        CommandSub::Docs => {
            let specs: Vec<&'static Spec> = if a.len() == 2 { sorted_commands() } else { a[2..].iter().filter_map(|n| lookup_full(n)).collect() };
            Frame::Map(specs.into_iter().map(|c| (Frame::bulk(c.name.as_bytes().to_vec()), command_docs(c))).collect())
        }
        CommandSub::List => {
            // Redis lists subcommands too ("client|list"), though COMMAND COUNT does not count them.
            let mut names: Vec<&'static Spec> = sorted_commands().into_iter().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())).collect();
            if a.len() >= 3 {
                if a.len() != 5 || !is(&a[2], "filterby") {
                    return err(ERR_SYNTAX);
                }
                let v = String::from_utf8_lossy(&a[4]).to_ascii_lowercase();
                if is(&a[3], "pattern") {
                    names.retain(|c| abacus_keyspace::glob_match(v.as_bytes(), c.name.as_bytes(), true));
                } else if is(&a[3], "aclcat") {
                    names.retain(|c| acl_categories(c).contains(&v.as_str()));
                } else if is(&a[3], "module") {
                    names.clear();
                } else {
                    return err(ERR_SYNTAX);
                }
            }
            Frame::Array(names.into_iter().map(|c| Frame::bulk(c.name.as_bytes().to_vec())).collect())
        }
        CommandSub::Help => Frame::Array(
            ["COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "(no subcommand)", "COUNT", "INFO [<command-name> ...]", "DOCS [<command-name> ...]", "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]", "GETKEYS <full-command>", "GETKEYSANDFLAGS <full-command>", "HELP"]
                .iter()
                .map(|l| Frame::Simple(Bytes::from_static(l.as_bytes())))
                .collect(),
        ),
    }
}
