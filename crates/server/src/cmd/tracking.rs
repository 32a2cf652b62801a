//! CLIENT TRACKING, TRACKINGINFO, GETREDIR and CACHING: the client-side caching commands.
//!
//! These parse and check options with Redis 7.0's rules and error texts (`clientCommand` in
//! Redis's networking.c) and leave the work to `tracking.rs`, which keeps the tracking table
//! and delivers invalidations. The connection keeps its own copy of its mode
//! (`Conn::tracking`) so that the per-command decision (remember this read's keys or not)
//! takes no lock.

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::conn::Conn;
use crate::tracking::{self, ConnTracking, Mode};

/// CLIENT TRACKING (ON|OFF) [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]
pub fn client_tracking(conn: &mut Conn, a: &[Arg]) -> Frame {
    let mut mode = Mode::default();
    let mut redirect_to = None;
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "redirect") && more {
            j += 1;
            if mode.redirect != 0 {
                return err("ERR A client can only redirect to a single other client");
            }
            let Ok(id) = parse_i64(&a[j]) else { return err("ERR value is not an integer or out of range") };
            let target = u64::try_from(id).ok().filter(|&id| id != 0).and_then(|id| conn.worker.server.clients.get(id));
            let Some(target) = target else { return err("ERR The client ID you want redirect to does not exist") };
            mode.redirect = target.id;
            redirect_to = Some(target);
        } else if is(&a[j], "bcast") {
            mode.bcast = true;
        } else if is(&a[j], "optin") {
            mode.optin = true;
        } else if is(&a[j], "optout") {
            mode.optout = true;
        } else if is(&a[j], "noloop") {
            mode.noloop = true;
        } else if is(&a[j], "prefix") && more {
            j += 1;
            mode.prefixes.push(Bytes::copy_from_slice(&a[j]));
        } else {
            return err(ERR_SYNTAX);
        }
        j += 1;
    }
    if is(&a[2], "on") {
        if !mode.bcast && !mode.prefixes.is_empty() {
            return err("ERR PREFIX option requires BCAST mode to be enabled");
        }
        let old = conn.tracking.as_deref().map(|t| t.mode.clone());
        if let Some(old) = &old {
            if old.bcast != mode.bcast {
                return err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
            }
        }
        if mode.bcast && (mode.optin || mode.optout) {
            return err("ERR OPTIN and OPTOUT are not compatible with BCAST");
        }
        if mode.optin && mode.optout {
            return err("ERR You can't specify both OPTIN mode and OPTOUT mode");
        }
        if let Some(old) = &old {
            if (mode.optin && old.optout) || (mode.optout && old.optin) {
                return err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
            }
        }
        if mode.bcast {
            let existing = old.as_ref().map(|o| o.prefixes.as_slice()).unwrap_or_default();
            if let Some(e) = tracking::prefix_collision(existing, &mode.prefixes) {
                return Frame::error(e);
            }
        }
        let mode = tracking::enable(&conn.client.meta, mode, redirect_to.as_ref());
        let caching = conn.tracking.as_deref().is_some_and(|t| t.caching);
        conn.tracking = Some(Box::new(ConnTracking { mode, caching }));
    } else if is(&a[2], "off") {
        if conn.tracking.take().is_some() {
            tracking::disable(conn.client.meta.id);
        }
    } else {
        return err(ERR_SYNTAX);
    }
    Frame::ok()
}

/// CLIENT CACHING (YES|NO)
pub fn client_caching(conn: &mut Conn, a: &[Arg]) -> Frame {
    let Some(t) = conn.tracking.as_deref_mut() else {
        return err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if is(&a[2], "yes") {
        if !t.mode.optin {
            return err("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
        }
    } else if is(&a[2], "no") {
        if !t.mode.optout {
            return err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
        }
    } else {
        return err(ERR_SYNTAX);
    }
    t.caching = true;
    Frame::ok()
}

/// CLIENT GETREDIR: the redirect id while tracking (0 = none), -1 when not tracking.
pub fn client_getredir(conn: &Conn) -> Frame {
    Frame::Integer(conn.tracking.as_deref().map_or(-1, |t| t.mode.redirect as i64))
}

/// CLIENT TRACKINGINFO: a map of flags (a set), redirect and prefixes.
pub fn client_trackinginfo(conn: &Conn) -> Frame {
    let (mode, broken) = match conn.tracking.as_deref() {
        Some(_) => tracking::info(conn.client.meta.id).unwrap_or_default(),
        None => (Mode::default(), false),
    };
    let on = conn.tracking.is_some();
    let caching = conn.tracking.as_deref().is_some_and(|t| t.caching);
    let mut flags = vec![if on { "on" } else { "off" }];
    if mode.bcast {
        flags.push("bcast");
    }
    if mode.optin {
        flags.push("optin");
        if caching {
            flags.push("caching-yes");
        }
    }
    if mode.optout {
        flags.push("optout");
        if caching {
            flags.push("caching-no");
        }
    }
    if mode.noloop {
        flags.push("noloop");
    }
    if broken {
        flags.push("broken_redirect");
    }
    let redirect = if on { mode.redirect as i64 } else { -1 };
    Frame::Map(vec![
        (Frame::bulk(&b"flags"[..]), Frame::Set(flags.into_iter().map(|f| Frame::bulk(f.as_bytes().to_vec())).collect())),
        (Frame::bulk(&b"redirect"[..]), Frame::Integer(redirect)),
        (Frame::bulk(&b"prefixes"[..]), Frame::Array(mode.prefixes.into_iter().map(Frame::Bulk).collect())),
    ])
}
