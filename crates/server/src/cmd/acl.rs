//! ACL: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, GENPASS, LOG, SAVE, LOAD,
//! DRYRUN and HELP, with Redis 7.0's replies and error texts.
//!
//! The users, their rules, the checks and the log live in `crate::acl`; this file only
//! parses the subcommands and shapes the replies. Deleting a user (DELUSER, or ACL LOAD of a
//! file without it) disconnects its clients, as Redis does; a client deleting its own user
//! gets its reply first.

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::acl::{self, Rules};
use crate::command::flags::*;
use crate::command::{self, Spec};
use crate::conn::Conn;

const S: &str = "server";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[Spec::conn("acl", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), S, "A container for Access List Control commands.").with_subcommands(ACL)
    .docs("6.0.0", "Depends on subcommand.")];

const ACL: &[Spec] = &[
    Spec::conn("acl|cat", -2, LOADING | STALE, NONE, conn_fn!(|_, _, call| cat(&call.args)), S, "Lists the ACL categories, or the commands inside a category.")
        .docs("6.0.0", "O(1) since the categories and commands are a fixed set.")
        .noscript()
        .args("
            categoryname type=string flags=optional
        "),
    Spec::conn("acl|deluser", -3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| deluser(conn, &call.args)), S, "Deletes ACL users, and terminates their connections.")
        .docs("6.0.0", "O(1) amortized time considering the typical user.")
        .noscript()
        .args("
            username type=string flags=multiple
        "),
    Spec::conn("acl|dryrun", -4, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| dryrun(conn, &call.args)), S, "Simulates the execution of a command by a user, without executing the command.")
        .docs("7.0.0", "O(1).")
        .noscript()
        .args("
            username type=string
            command type=string
            arg type=string flags=optional,multiple
        "),
    Spec::conn("acl|genpass", -2, LOADING | STALE, NONE, conn_fn!(|_, _, call| genpass(&call.args)), S, "Generates a pseudorandom, secure password that can be used to identify ACL users.")
        .docs("6.0.0", "O(1)")
        .noscript()
        .args("
            bits type=integer flags=optional
        "),
    Spec::conn("acl|getuser", 3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| getuser(conn, &call.args)), S, "Lists the ACL rules of a user.")
        .docs("6.0.0", "O(N). Where N is the number of password, command and pattern rules that the user has.")
        .history(&[
            ("6.2.0", "Added Pub/Sub channel patterns."),
            ("7.0.0", "Added selectors and changed the format of key and channel patterns from a list to their rule representation."),
        ])
        .noscript()
        .args("
            username type=string
        "),
    Spec::conn("acl|list", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| list(conn)), S, "Dumps the effective rules in ACL file format.")
        .docs("6.0.0", "O(N). Where N is the number of configured users.")
        .noscript(),
    Spec::conn("acl|load", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| load(conn)), S, "Reloads the rules from the configured ACL file.")
        .docs("6.0.0", "O(N). Where N is the number of configured users.")
        .noscript(),
    Spec::conn("acl|log", -2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| log(conn, &call.args)), S, "Lists recent security events generated due to ACL rules.")
        .docs("6.0.0", "O(N) with N being the number of entries shown.")
        .noscript()
        .args("
            operation type=oneof flags=optional
              count type=integer
              reset type=pure-token token=RESET
        "),
    Spec::conn("acl|save", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| save(conn)), S, "Saves the effective ACL rules in the configured ACL file.")
        .docs("6.0.0", "O(N). Where N is the number of configured users.")
        .noscript(),
    Spec::conn("acl|setuser", -3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| setuser(conn, &call.args)), S, "Creates and modifies an ACL user and its rules.")
        .docs("6.0.0", "O(N). Where N is the number of rules provided.")
        .history(&[
            ("6.2.0", "Added Pub/Sub channel patterns."),
            ("7.0.0", "Added selectors and key based permissions."),
        ])
        .noscript()
        .args("
            username type=string
            rule type=string flags=optional,multiple
        "),
    Spec::conn("acl|users", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| users(conn)), S, "Lists all ACL users.")
        .docs("6.0.0", "O(N). Where N is the number of configured users.")
        .noscript(),
    Spec::conn("acl|whoami", 2, LOADING | STALE, NONE, conn_fn!(|conn, _, _| Frame::bulk(conn.client.user.name.as_bytes().to_vec())), S, "Returns the authenticated username of the current connection.")
        .docs("6.0.0", "O(1)")
        .noscript(),
    Spec::conn("acl|help", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| help()), S, "Returns helpful text about the different subcommands.")
        .docs("6.0.0", "O(1)"),
];

const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn bulk(s: impl Into<Vec<u8>>) -> Frame {
    Frame::Bulk(Bytes::from(s.into()))
}

fn cat(a: &[Arg]) -> Frame {
    if a.len() == 2 {
        return Frame::Array(acl::CATEGORIES.iter().map(|c| bulk(*c)).collect());
    }
    if a.len() > 3 {
        return err("ERR unknown subcommand or wrong number of arguments for 'cat'. Try ACL HELP.");
    }
    let name = String::from_utf8_lossy(&a[2]).to_ascii_lowercase();
    match acl::category(&name) {
        Some(specs) => Frame::Array(specs.iter().map(|s| bulk(s.name)).collect()),
        None => err(&format!("ERR Unknown category '{}'", String::from_utf8_lossy(&a[2]))),
    }
}

/// Disconnects every client authenticated as `name`; this connection gets its reply first.
fn kill_clients_of(conn: &mut Conn, name: &str) {
    for c in conn.worker.server.clients.all() {
        if &**c.user.lock() != name {
            continue;
        }
        if c.id == conn.client.meta.id {
            conn.close_after_reply = true;
        }
        c.kill();
    }
}

fn deluser(conn: &mut Conn, a: &[Arg]) -> Frame {
    if a[2..].iter().any(|n| &n[..] == b"default") {
        return err("ERR The 'default' user cannot be removed");
    }
    let mut removed = 0;
    for name in &a[2..] {
        if let Some(user) = conn.worker.server.acl.remove(name) {
            kill_clients_of(conn, &user.name);
            removed += 1;
        }
    }
    Frame::Integer(removed)
}

fn dryrun(conn: &mut Conn, a: &[Arg]) -> Frame {
    let Some(user) = conn.worker.server.acl.get(&a[2]) else {
        return err(&format!("ERR User '{}' not found", String::from_utf8_lossy(&a[2])));
    };
    let call = &a[3..];
    let Some(root) = command::lookup(&call[0]) else {
        return err(&format!("ERR Command '{}' not found", String::from_utf8_lossy(&call[0])));
    };
    let spec = match conn.resolve(root, call) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let rules = user.rules();
    match acl::check(&rules, spec, call) {
        Ok(()) => Frame::ok(),
        Err(acl::Denied::Command) => bulk(format!("This user has no permissions to run the '{}' command", spec.name)),
        Err(acl::Denied::Key(i)) => bulk([&b"This user has no permissions to access the '"[..], &call[i], b"' key"].concat()),
        Err(acl::Denied::Channel(i)) => bulk([&b"This user has no permissions to access the '"[..], &call[i], b"' channel"].concat()),
    }
}

fn genpass(a: &[Arg]) -> Frame {
    if a.len() > 3 {
        return err("ERR unknown subcommand or wrong number of arguments for 'genpass'. Try ACL HELP.");
    }
    let bits = match a.get(2) {
        None => 256,
        Some(b) => match parse_i64(b) {
            Ok(n) => n,
            Err(e) => return e,
        },
    };
    if !(1..=4096).contains(&bits) {
        return err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
    }
    // Hex digits of random bytes from the thread's CSPRNG (ChaCha, seeded by the OS).
    let chars = ((bits + 3) / 4) as usize;
    let bytes: Vec<u8> = (0..chars.div_ceil(2)).map(|_| rand::random::<u8>()).collect();
    let mut hex = acl::hex(&bytes);
    hex.truncate(chars);
    bulk(hex)
}

fn getuser(conn: &mut Conn, a: &[Arg]) -> Frame {
    let Some(user) = conn.worker.server.acl.get(&a[2]) else { return Frame::Null };
    let r = user.rules();
    Frame::Map(vec![
        (bulk("flags"), Frame::Array(r.flag_names().into_iter().map(bulk).collect())),
        (bulk("passwords"), Frame::Array(r.passwords.iter().map(|p| bulk(acl::hex(p))).collect())),
        (bulk("commands"), bulk(r.describe_commands())),
        (bulk("keys"), bulk(r.describe_keys())),
        (bulk("channels"), bulk(r.describe_channels())),
        (
            bulk("selectors"),
            Frame::Array(
                r.selectors
                    .iter()
                    .map(|sel| Frame::Map(vec![(bulk("commands"), bulk(sel.describe_commands())), (bulk("keys"), bulk(sel.describe_keys())), (bulk("channels"), bulk(sel.describe_channels()))]))
                    .collect(),
            ),
        ),
    ])
}

fn list(conn: &mut Conn) -> Frame {
    Frame::Array(conn.worker.server.acl.list().into_iter().map(bulk).collect())
}

fn users(conn: &mut Conn) -> Frame {
    Frame::Array(conn.worker.server.acl.users().iter().map(|u| bulk(u.name.as_bytes().to_vec())).collect())
}

fn setuser(conn: &mut Conn, a: &[Arg]) -> Frame {
    let name = &a[2];
    if name.iter().any(|&c| c == b' ' || c == 0) {
        return err("ERR Usernames can't contain spaces or null characters");
    }
    let Ok(name) = std::str::from_utf8(name) else { return err("ERR Usernames can't contain spaces or null characters") };
    let raw: Vec<&[u8]> = a[3..].iter().map(|o| &o[..]).collect();
    let merged = match acl::merge_selector_args(&raw) {
        Ok(m) => m,
        Err(i) => return Frame::Error(Bytes::from([&b"ERR Unmatched parenthesis in acl selector starting at '"[..], raw[i], b"'."].concat())),
    };
    let ops: Vec<&[u8]> = merged.iter().map(|o| &o[..]).collect();
    match conn.worker.server.acl.set_user(name, &ops) {
        Ok(()) => Frame::ok(),
        Err((i, e)) => Frame::Error(Bytes::from([&b"ERR Error in ACL SETUSER modifier '"[..], ops[i], b"': ", e.text().as_bytes()].concat())),
    }
}

fn log(conn: &mut Conn, a: &[Arg]) -> Frame {
    let acl = &conn.worker.server.acl;
    let mut count = 10usize;
    if a.len() == 3 {
        if is(&a[2], "reset") {
            acl.log_reset();
            return Frame::ok();
        }
        match parse_i64(&a[2]) {
            Ok(n) => count = usize::try_from(n).unwrap_or(0),
            Err(e) => return e,
        }
    } else if a.len() > 3 {
        return err("ERR unknown subcommand or wrong number of arguments for 'log'. Try ACL HELP.");
    }
    let now = abacus_engine::shard::now_ms();
    acl.log_entries(count, |entries| {
        Frame::Array(
            entries
                .map(|e| {
                    Frame::Map(vec![
                        (bulk("count"), Frame::Integer(e.count as i64)),
                        (bulk("reason"), bulk(e.reason)),
                        (bulk("context"), bulk(e.context)),
                        (bulk("object"), bulk(e.object.clone())),
                        (bulk("username"), bulk(e.username.clone())),
                        (bulk("age-seconds"), Frame::Double(now.saturating_sub(e.created_ms) as f64 / 1000.0)),
                        (bulk("client-info"), bulk(e.client_info.clone())),
                    ])
                })
                .collect(),
        )
    })
}

fn save(conn: &mut Conn) -> Frame {
    let path = conn.worker.server.config.get(abacus_engine::param!("aclfile"));
    if path.is_empty() {
        return err(NO_ACLFILE);
    }
    match acl::save_file(&conn.worker.server.acl, &path) {
        Ok(()) => Frame::ok(),
        Err(e) => {
            tracing::warn!("ACL SAVE to '{path}' failed: {e}");
            err("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
        }
    }
}

fn load(conn: &mut Conn) -> Frame {
    let path = conn.worker.server.config.get(abacus_engine::param!("aclfile"));
    if path.is_empty() {
        return err(NO_ACLFILE);
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return err(&format!("ERR Error loading ACLs, opening file '{path}': {e}")),
    };
    let users: Vec<(String, Rules)> = match acl::parse_file(&path, &text) {
        Ok(u) => u,
        Err(e) => return err(&format!("ERR {e}")),
    };
    for gone in conn.worker.server.acl.replace_all(users) {
        kill_clients_of(conn, &gone);
    }
    Frame::ok()
}

fn help() -> Frame {
    let lines = [
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Print this help.",
    ];
    Frame::Array(lines.iter().map(|l| Frame::Simple(Bytes::from_static(l.as_bytes()))).collect())
}
