//! The wall clock as the engine reads it: Unix time in milliseconds (expiry, stream IDs, the
//! log's timestamps) and microseconds (MONITOR, the slow log). A leaf module, so that
//! everything below the shards can read the time without reaching the shards.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
