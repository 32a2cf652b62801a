//! Persistence commands: SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE, SHUTDOWN.
//!
//! SAVE and BGSAVE both take a fork-less snapshot (`snapshot.rs`); SAVE waits for it to
//! finish, but unlike Redis's SAVE it does not stop other clients meanwhile. BGREWRITEAOF is
//! the same operation: a snapshot plus a new log segment is how the log is compacted.

use abacus_protocol::{Arg, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::Access;

const G: &str = "server";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("save", 1, ADMIN | NO_MULTI | ALL_SHARDS, NONE, conn_fn!(|conn, _, _| save(conn).await), G, "Synchronously saves the database(s) to disk.")
        .docs("1.0.0", "O(N) where N is the total number of keys in all databases")
        .noscript()
        .no_async_loading(),
    Spec::conn("bgsave", -1, ADMIN | SCHEDULED_IN_EXEC, NONE, conn_fn!(|conn, access, call| bgsave(conn, access, &call.args).await), G, "Asynchronously saves the database(s) to disk.")
        .docs("1.0.0", "O(1)")
        .history(&[("3.2.2", "Added the `SCHEDULE` option.")])
        .noscript()
        .no_async_loading()
        .args("
            schedule type=pure-token token=SCHEDULE since=3.2.2 flags=optional
        "),
    Spec::conn("bgrewriteaof", 1, ADMIN | SCHEDULED_IN_EXEC, NONE, conn_fn!(|conn, access, _| bgrewriteaof(conn, access).await), G, "Asynchronously rewrites the append-only file to disk.")
        .docs("1.0.0", "O(1)")
        .noscript()
        .no_async_loading(),
    Spec::conn("lastsave", 1, LOADING | STALE | FAST | ACL_ADMIN, NONE, conn_fn!(|conn, _, _| lastsave(conn)), G, "Returns the Unix timestamp of the last successful save to disk.")
        .docs("1.0.0", "O(1)")
        .tips("nondeterministic_output"),
    Spec::conn("shutdown", -1, ADMIN | NO_MULTI | LOADING | STALE, NONE, conn_fn!(|conn, _, call| shutdown(conn, &call.args).await), G, "Synchronously saves the database(s) to disk and shuts down the server.")
        .docs("1.0.0", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)")
        .history(&[("7.0.0", "Added the `NOW`, `FORCE` and `ABORT` modifiers.")])
        .noscript()
        .allow_busy()
        .args("
            nosave_save type=oneof flags=optional
              nosave type=pure-token token=NOSAVE
              save type=pure-token token=SAVE
            now type=pure-token token=NOW since=7.0.0 flags=optional
            force type=pure-token token=FORCE since=7.0.0 flags=optional
            abort type=pure-token token=ABORT since=7.0.0 flags=optional
        "),
];

pub async fn save(conn: &mut Conn) -> Frame {
    match abacus_engine::snapshot::start(&conn.worker, Access::Free, "SAVE").await {
        Ok(before) => match abacus_engine::snapshot::wait(&conn.worker.server.durability, before).await {
            Ok(()) => Frame::ok(),
            Err(e) => Frame::error(e),
        },
        Err(e) => Frame::error(e),
    }
}

pub async fn bgsave(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let schedule = match a.len() {
        1 => false,
        2 if is(&a[1], "schedule") => true,
        _ => return err(ERR_SYNTAX),
    };
    if let Access::Locked(_) = access {
        // Inside EXEC: only scheduled (see `SCHEDULED_IN_EXEC`).
        return Frame::simple("Background saving scheduled");
    }
    match abacus_engine::snapshot::start(&conn.worker, Access::Free, "BGSAVE").await {
        Ok(_) => Frame::simple("Background saving started"),
        Err(e) if schedule && e.contains("already in progress") => {
            // As Redis: run one as soon as the current one is over.
            if let Some(s) = conn.worker.server.durability.snapshots() {
                s.scheduled.store(true, std::sync::atomic::Ordering::Release);
            }
            Frame::simple("Background saving scheduled")
        }
        Err(e) => Frame::error(e),
    }
}

/// Starts the snapshot an EXEC scheduled, now that its locks are released; if one is already
/// running, the next starts when it ends.
pub async fn start_scheduled(conn: &mut Conn) {
    match abacus_engine::snapshot::start(&conn.worker, Access::Free, "a BGSAVE scheduled by EXEC").await {
        Ok(_) => {}
        Err(e) if e.contains("already in progress") => {
            if let Some(s) = conn.worker.server.durability.snapshots() {
                s.scheduled.store(true, std::sync::atomic::Ordering::Release);
            }
        }
        Err(e) => tracing::warn!("scheduled background save did not start: {e}"),
    }
}

pub async fn bgrewriteaof(conn: &mut Conn, access: Access<'_>) -> Frame {
    if let Access::Locked(_) = access {
        // Inside EXEC: only scheduled (see `SCHEDULED_IN_EXEC`).
        return Frame::simple("Background append only file rewriting scheduled");
    }
    match abacus_engine::snapshot::start(&conn.worker, Access::Free, "BGREWRITEAOF").await {
        Ok(_) => Frame::simple("Background append only file rewriting started"),
        Err(e) if e.contains("already in progress") => {
            Frame::error("ERR Background append only file rewriting already in progress")
        }
        Err(e) => Frame::error(e),
    }
}

pub fn lastsave(conn: &Conn) -> Frame {
    let s = conn.worker.server.durability.snapshots().map_or(0, |s| s.last_save_s.load(std::sync::atomic::Ordering::Relaxed));
    Frame::Integer(s as i64)
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: snapshots if asked to (or if a `save`
/// schedule is configured and the log is off, as Redis), makes the log durable and exits.
/// Like Redis, a successful SHUTDOWN sends no reply: the connection closes.
pub async fn shutdown(conn: &mut Conn, a: &[Arg]) -> Frame {
    let (mut save, mut nosave, mut force) = (false, false, false);
    for x in &a[1..] {
        if is(x, "save") {
            save = true;
        } else if is(x, "nosave") {
            nosave = true;
        } else if is(x, "now") {
        } else if is(x, "force") {
            force = true;
        } else if is(x, "abort") {
            return err("ERR No shutdown in progress.");
        } else {
            return err(ERR_SYNTAX);
        }
    }
    if save && nosave {
        return err(ERR_SYNTAX);
    }
    let cfg = &conn.worker.server.config;
    // Nothing to save while the data is still loading: the files on disk are the data.
    let loading = conn.worker.server.recorders.loading.active();
    let scheduled = !cfg.get(abacus_engine::param!("save")).trim().is_empty() && !cfg.get_bool(abacus_engine::param!("appendonly")) && !loading;
    if (save && !loading) || (scheduled && !nosave) {
        let result = match abacus_engine::snapshot::start(&conn.worker, Access::Free, "SHUTDOWN").await {
            Ok(before) => abacus_engine::snapshot::wait(&conn.worker.server.durability, before).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            if !force {
                tracing::warn!("SHUTDOWN refused: the snapshot failed ({e})");
                return err("ERR Errors trying to SHUTDOWN. Check logs.");
            }
        }
    }
    tracing::info!("User requested shutdown...");
    if let Err(e) = conn.worker.server.durability.shutdown() {
        if !force {
            tracing::warn!("SHUTDOWN refused: the append-only log cannot be written ({e})");
            return err("ERR Errors trying to SHUTDOWN. Check logs.");
        }
        tracing::warn!("SHUTDOWN FORCE: exiting although the append-only log cannot be written ({e})");
    }
    tracing::info!("Abacus is now ready to exit, bye bye...");
    std::process::exit(0);
}
