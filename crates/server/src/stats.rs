//! Per-thread command statistics (INFO commandstats) and server-wide counters (INFO stats).
//!
//! Command counters are thread-local: every worker thread counts the commands it executes
//! without sharing a cache line with the other threads, and INFO sums the threads' tables by
//! sending a job to each shard (one shard per thread). Server-wide counters that change once
//! per connection, not per command, are plain atomics.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Clone, Copy, Default, Debug)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

thread_local! {
    static COMMANDS: RefCell<HashMap<&'static str, CmdStat>> = RefCell::new(HashMap::new());
}

/// Counts one execution of `name`.
pub fn record(name: &'static str, took: Duration, failed: bool) {
    COMMANDS.with(|c| {
        let mut c = c.borrow_mut();
        let s = c.entry(name).or_default();
        s.calls += 1;
        s.usec += took.as_micros() as u64;
        if failed {
            s.failed_calls += 1;
        }
    });
}

/// Counts a command refused before execution (arity, auth, unknown subcommand...).
pub fn record_rejected(name: &'static str) {
    COMMANDS.with(|c| c.borrow_mut().entry(name).or_default().rejected_calls += 1);
}

/// This thread's table.
pub fn snapshot() -> HashMap<&'static str, CmdStat> {
    COMMANDS.with(|c| c.borrow().clone())
}

/// Clears this thread's table (CONFIG RESETSTAT).
pub fn reset() {
    COMMANDS.with(|c| c.borrow_mut().clear());
}

/// Server-wide counters.
#[derive(Default)]
pub struct ServerStats {
    pub connections_received_total: AtomicU64,
    pub connections_rejected_total: AtomicU64,
    pub net_input_bytes_total: AtomicU64,
    pub net_output_bytes_total: AtomicU64,
}

impl ServerStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn reset(&self) {
        for c in [&self.connections_received_total, &self.connections_rejected_total, &self.net_input_bytes_total, &self.net_output_bytes_total] {
            c.store(0, Ordering::Relaxed);
        }
    }
}
