//! CLIENT PAUSE timeout [WRITE|ALL] and CLIENT UNPAUSE (Redis 7.0): holding clients' commands
//! for a while, e.g. while a failover or a migration switches clients to another server.
//!
//! Design: one deadline and one mode, in atomics, that every connection reads before each
//! batch (one relaxed load when no pause is set, the same cost as DEBUG SLEEP's gate beside
//! it). A paused batch waits, holding nothing, until the deadline passes or CLIENT UNPAUSE
//! wakes it. As in Redis:
//! - ALL holds every command, CLIENT UNPAUSE included (a pause in ALL mode ends only at its
//!   deadline unless a command already running lifts it);
//! - WRITE holds the commands that may change data or propagate: write commands, PUBLISH and
//!   SPUBLISH, and an EXEC whose transaction holds writes. Reads run. A batch is held as a
//!   whole once it contains such a command (Redis holds the client at that command, and a
//!   client's later commands wait behind it anyway);
//! - a second pause keeps the later deadline and the stricter mode.
//!
//! Not done: Redis also stops active expiry and eviction during a pause.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use abacus_protocol::{Arg, Args, Frame};
use tokio::sync::Notify;

use abacus_commands::args::{err, is, parse_i64};
use crate::command::{self, flags};
use crate::conn::Conn;
use abacus_engine::shard::now_ms;

#[derive(Default)]
pub struct ClientPause {
    /// Wall-clock ms at which the pause ends; 0 = none.
    until_ms: AtomicU64,
    all: AtomicBool,
    wake: Notify,
}

impl ClientPause {
    /// Whether a pause may be in force (the hot path's one load).
    #[inline]
    pub fn is_set(&self) -> bool {
        self.until_ms.load(Ordering::Relaxed) != 0
    }

    /// CLIENT PAUSE: until `until_ms`; the later deadline and the stricter mode win.
    pub fn pause(&self, until_ms: u64, all: bool) {
        if all {
            self.all.store(true, Ordering::Release);
        }
        self.until_ms.fetch_max(until_ms, Ordering::AcqRel);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        self.until_ms.store(0, Ordering::Release);
        self.all.store(false, Ordering::Release);
        self.wake.notify_waiters();
    }

    /// Waits while a pause holds a batch; `writes` says whether it has a command WRITE mode
    /// holds.
    pub async fn wait(&self, writes: impl Fn() -> bool) {
        loop {
            // Registered before the state is read, so an UNPAUSE in between is not missed.
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let until = self.until_ms.load(Ordering::Acquire);
            let now = now_ms();
            if until == 0 || now >= until {
                if until != 0 {
                    // Expired: the first connection to notice clears it.
                    if self.until_ms.compare_exchange(until, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                        self.all.store(false, Ordering::Release);
                    }
                }
                return;
            }
            if !self.all.load(Ordering::Acquire) && !writes() {
                return;
            }
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep(std::time::Duration::from_millis(until - now)) => {}
            }
        }
    }
}

/// Whether a batch holds a command that CLIENT PAUSE WRITE holds.
pub fn batch_writes(conn: &Conn, calls: &[Args]) -> bool {
    calls.iter().any(|args| {
        let Some(spec) = command::lookup_call(args) else { return false };
        spec.is_write()
            || spec.has(flags::CHANNEL_PUBLISH)
            || (spec.has(flags::RUNS_QUEUED) && conn.multi.as_ref().is_some_and(|m| m.queued.iter().any(|c| c.spec.is_write())))
    })
}

/// CLIENT PAUSE timeout [WRITE|ALL].
pub fn pause_command(conn: &mut Conn, a: &[Arg]) -> Frame {
    let timeout = match parse_i64(&a[2]) {
        Ok(t) => t,
        Err(_) => return err("ERR timeout is not an integer or out of range"),
    };
    if timeout < 0 {
        return err("ERR timeout is negative");
    }
    let all = match a.get(3) {
        None => true,
        Some(m) if is(m, "all") => true,
        Some(m) if is(m, "write") => false,
        Some(_) => return err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    if a.len() > 4 {
        return Frame::error(format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.", String::from_utf8_lossy(&a[1])));
    }
    // A deadline of 0 means "none": a zero timeout still pauses until the next millisecond.
    let until = now_ms().saturating_add(timeout as u64).max(1);
    conn.worker.server.client_pause.pause(until, all);
    Frame::ok()
}

/// CLIENT UNPAUSE.
pub fn unpause_command(conn: &mut Conn) -> Frame {
    conn.worker.server.client_pause.unpause();
    Frame::ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unpause_wakes_a_held_batch() {
        let p = std::sync::Arc::new(ClientPause::default());
        assert!(!p.is_set());
        p.wait(|| true).await; // not paused: returns at once
        p.pause(now_ms() + 600_000, false);
        assert!(p.is_set());
        // WRITE mode: a batch without writes runs.
        p.wait(|| false).await;
        let held = {
            let p = p.clone();
            tokio::spawn(async move { p.wait(|| true).await })
        };
        tokio::task::yield_now().await;
        assert!(!held.is_finished());
        p.unpause();
        held.await.unwrap();
        assert!(!p.is_set());
    }

    #[tokio::test]
    async fn a_pause_ends_at_its_deadline_and_keeps_the_stricter_mode() {
        let p = ClientPause::default();
        p.pause(now_ms() + 30, true);
        p.pause(now_ms() + 1, false);
        // Still ALL, until the later deadline: then it clears itself.
        assert!(p.all.load(Ordering::Relaxed));
        p.wait(|| false).await;
        assert!(!p.is_set());
        assert!(!p.all.load(Ordering::Relaxed));
    }
}
