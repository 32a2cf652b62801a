//! Connections to MIGRATE targets a worker thread keeps for its next MIGRATE (Redis's
//! migrate socket cache): the type [`crate::node::Node`] holds; `cmd/migrate.rs` uses them.

use std::time::Duration;

use tokio::io::BufReader;

/// How long a link to a MIGRATE target is kept unused (Redis's MIGRATE_SOCKET_CACHE_TTL).
pub const LINK_IDLE: Duration = Duration::from_secs(10);

/// A connection to a MIGRATE target, kept by the worker thread for the next MIGRATE to the
/// same host and port (redis-cli's reshard sends one per 10 keys): Redis's migrate socket
/// cache. `db`: the database last selected on it.
pub struct Link {
    pub rd: BufReader<tokio::io::ReadHalf<abacus_tls::Stream>>,
    pub wr: tokio::io::WriteHalf<abacus_tls::Stream>,
    pub db: Option<i64>,
    pub used: std::time::Instant,
}

/// A worker thread's links to MIGRATE targets, by host, port and whether over TLS.
pub type Links = std::cell::RefCell<std::collections::HashMap<(String, u16, bool), Link>>;
