//! Server configuration: one table of parameters, read from the command line, a config file
//! and CONFIG SET.
//!
//! Every parameter is declared once in [`PARAMS`] with its Redis name, default, type and
//! whether it can change at run time; command-line parsing (`--name value ...`, as
//! redis-server accepts), the config file (`name value` lines, as redis.conf) and CONFIG
//! GET/SET all go through that table, so they cannot disagree.
//!
//! Values are kept in their canonical string form (what CONFIG GET prints). Every numeric,
//! boolean or enumerated value is also mirrored into an atomic, one per parameter, indexed by
//! the parameter's position in [`PARAMS`], so the hot path reads it without a lock. Code names a
//! parameter by a constant made from its name at compile time (`param!("maxmemory")`, a
//! [`ParamId`]; the mirrors' constants likewise, [`param_index`]): a misspelt name fails the
//! build, and no read goes by a string; a name known only at run time (a client's CONFIG GET)
//! goes through [`Config::get_by_name`]. Adding a parameter is one line of [`PARAMS`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use abacus_collections::EncodingLimits;
use abacus_keyspace::glob_match;

/// The kind of a parameter's value, which decides how it is parsed and validated.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Int { min: i64, max: i64 },
    /// An integer accepted in `min..=max` and then clamped to `lo..=hi` (Redis's `hz`).
    ClampedInt { min: i64, max: i64, lo: i64, hi: i64 },
    /// A snapshot schedule: pairs `seconds changes`, or empty.
    Schedule,
    /// A byte count that accepts Redis's units: 100, 1k (1000), 1kb (1024), 1m, 1mb, 1g, 1gb.
    Memory { min: u64, max: u64 },
    Bool,
    Str,
    /// A hostname to announce (`cluster-announce-hostname`): letters, digits, hyphens and
    /// dots, or empty (Redis's rule).
    Hostname,
    Enum(&'static [&'static str]),
    /// An HLL explicit threshold: -1 (auto), 0 (off) or a power of two up to `max`.
    Expthresh { max: i64 },
    /// Redis's `client-output-buffer-limit`: `<class> <hard> <soft> <soft seconds>` groups; a
    /// set changes only the classes it names.
    OutputBufferLimit,
    /// Redis's `notify-keyspace-events` classes (`notify.rs`), shown in Redis's canonical
    /// order.
    KeyspaceEvents,
    /// `latency-tracking-info-percentiles`: numbers 0..=100 separated by spaces.
    Percentiles,
}

/// One configuration parameter.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    /// Whether CONFIG SET may change it while the server runs.
    pub mutable: bool,
    pub help: &'static str,
}

const GB: u64 = 1024 * 1024 * 1024;

/// Every parameter the server knows. Names are Redis's where Redis has the same concept.
pub const PARAMS: &[Param] = &[
    Param { name: "port", default: "6379", kind: Kind::Int { min: 0, max: 65535 }, mutable: false, help: "TCP port to listen on" },
    Param { name: "bind", default: "127.0.0.1", kind: Kind::Str, mutable: false, help: "addresses to listen on, space separated" },
    Param { name: "tls-port", default: "0", kind: Kind::Int { min: 0, max: 65535 }, mutable: false, help: "TLS port to listen on, beside port (port 0: TLS only); 0 = none" },
    Param { name: "tls-cert-file", default: "", kind: Kind::Str, mutable: true, help: "the server's certificate chain (PEM), also the client certificate of outgoing links unless tls-client-cert-file; CONFIG SET reloads it for new connections" },
    Param { name: "tls-key-file", default: "", kind: Kind::Str, mutable: true, help: "the private key of tls-cert-file (PEM; an encrypted PKCS#8 key needs tls-key-file-pass)" },
    Param { name: "tls-key-file-pass", default: "", kind: Kind::Str, mutable: true, help: "password of an encrypted PKCS#8 tls-key-file (PBES2 with AES-CBC; OpenSSL's legacy Proc-Type encryption is refused)" },
    Param { name: "tls-client-cert-file", default: "", kind: Kind::Str, mutable: true, help: "the certificate outgoing links (replication, cluster bus, MIGRATE) present; empty = tls-cert-file" },
    Param { name: "tls-client-key-file", default: "", kind: Kind::Str, mutable: true, help: "the private key of tls-client-cert-file" },
    Param { name: "tls-client-key-file-pass", default: "", kind: Kind::Str, mutable: true, help: "password of an encrypted PKCS#8 tls-client-key-file" },
    Param { name: "tls-dh-params-file", default: "", kind: Kind::Str, mutable: true, help: "DH parameters (PEM); checked but not used: rustls offers only ECDHE key exchange" },
    Param { name: "tls-ca-cert-file", default: "", kind: Kind::Str, mutable: true, help: "CA certificates (PEM) that peer certificates must chain to" },
    Param { name: "tls-ca-cert-dir", default: "", kind: Kind::Str, mutable: true, help: "a directory of CA certificates (PEM files)" },
    Param { name: "tls-auth-clients", default: "yes", kind: Kind::Enum(&["no", "yes", "optional"]), mutable: true, help: "TLS clients must present a certificate the CA signed (yes), may (optional) or are not asked (no)" },
    Param { name: "tls-protocols", default: "", kind: Kind::Str, mutable: true, help: "allowed protocol versions, e.g. \"TLSv1.2 TLSv1.3\"; empty = both" },
    Param { name: "tls-ciphers", default: "", kind: Kind::Str, mutable: true, help: "TLS 1.2 cipher suites, OpenSSL names separated by ':'; empty = all" },
    Param { name: "tls-ciphersuites", default: "", kind: Kind::Str, mutable: true, help: "TLS 1.3 cipher suites separated by ':'; empty = all" },
    Param { name: "tls-prefer-server-ciphers", default: "no", kind: Kind::Bool, mutable: true, help: "choose the cipher suite by the server's order rather than the client's" },
    Param { name: "tls-session-caching", default: "yes", kind: Kind::Bool, mutable: true, help: "let TLS clients resume sessions (session cache and tickets)" },
    Param { name: "tls-session-cache-size", default: "20480", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "TLS sessions kept for resumption (0: no limit, as OpenSSL)" },
    Param { name: "tls-session-cache-timeout", default: "300", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "seconds a TLS session (cached or ticket) can be resumed" },
    Param { name: "tls-replication", default: "no", kind: Kind::Bool, mutable: true, help: "a replica connects to its primary over TLS (and a primary's tls-port serves replicas)" },
    Param { name: "tls-cluster", default: "no", kind: Kind::Bool, mutable: true, help: "the cluster bus and MIGRATE use TLS (a change applies to links opened after it)" },
    Param { name: "ingest-tls", default: "no", kind: Kind::Bool, mutable: true, help: "the ingest-port speaks TLS with the tls-* certificates (read per connection; not a Redis parameter)" },
    Param { name: "metrics-tls", default: "no", kind: Kind::Bool, mutable: true, help: "the metrics endpoint answers HTTPS with the tls-* certificates (read per connection; not a Redis parameter)" },
    Param { name: "tls-handshake-timeout", default: "10000", kind: Kind::Int { min: 1, max: i32::MAX as i64 }, mutable: true, help: "milliseconds a TLS client has to complete its handshake before it is disconnected (not a Redis parameter)" },
    Param { name: "cluster-enabled", default: "no", kind: Kind::Bool, mutable: false, help: "run as a Redis Cluster node: a cluster bus on cluster-port, CLUSTER commands, keys redirected by hash slot (-MOVED)" },
    Param { name: "cluster-config-file", default: "nodes.conf", kind: Kind::Str, mutable: false, help: "the node's view of its cluster, in the data directory (Redis's nodes.conf format), written on every change" },
    Param { name: "cluster-node-timeout", default: "15000", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "milliseconds without a pong after which a node is suspected to have failed" },
    Param { name: "cluster-fanout-timeout", default: "5000", kind: Kind::Int { min: 1, max: i32::MAX as i64 }, mutable: true, help: "milliseconds a node waits for each other node's part of a cluster-wide TS.MGET/TS.MRANGE/TS.QUERYINDEX before failing it with an error naming that node (not a Redis parameter)" },
    Param { name: "cluster-standby-deadline", default: "300", kind: Kind::Int { min: 1, max: i32::MAX as i64 }, mutable: true, help: "milliseconds a cluster-wide query waits for a primary's part before asking one of its replicas (a standby read; not a Redis parameter)" },
    Param { name: "cluster-port", default: "0", kind: Kind::Int { min: 0, max: 65535 }, mutable: false, help: "the cluster bus port; 0: the client port + 10000" },
    Param { name: "cluster-announce-ip", default: "", kind: Kind::Str, mutable: true, help: "the IP this node announces to the cluster; empty: learnt from the node that meets it" },
    Param { name: "cluster-announce-hostname", default: "", kind: Kind::Hostname, mutable: true, help: "the hostname this node announces to the cluster (a ping extension)" },
    Param { name: "cluster-require-full-coverage", default: "yes", kind: Kind::Bool, mutable: true, help: "the cluster is down (-CLUSTERDOWN) while any hash slot is unserved" },
    Param { name: "cluster-allow-reads-when-down", default: "no", kind: Kind::Bool, mutable: true, help: "while the cluster is down, still serve reads of this node's slots (writes get -CLUSTERDOWN ... only accepts read commands)" },
    Param { name: "cluster-replica-validity-factor", default: "10", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "a replica whose link to its primary has been down longer than node timeout * this factor + 10 s (beyond one node timeout) does not start an automatic failover; 0 = always may" },
    Param { name: "cluster-migration-barrier", default: "1", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "replica migration: a replica leaves its primary for an orphaned one only if its primary keeps at least this many other working replicas" },
    Param { name: "cluster-allow-replica-migration", default: "yes", kind: Kind::Bool, mutable: true, help: "replicas may migrate to orphaned primaries (and a primary that lost its last slot becomes a replica of the node that took it)" },
    Param { name: "cluster-replica-no-failover", default: "no", kind: Kind::Bool, mutable: true, help: "this replica never starts an automatic failover (CLUSTER FAILOVER still works)" },
    Param { name: "cluster-preferred-endpoint-type", default: "ip", kind: Kind::Enum(&["ip", "hostname", "unknown-endpoint"]), mutable: true, help: "the endpoint -MOVED/-ASK and CLUSTER SLOTS/SHARDS give clients: the node's ip, its announced hostname ('?' if none), or an empty one (clients reuse the address they connected to)" },
    Param { name: "cluster-announce-port", default: "0", kind: Kind::Int { min: 0, max: 65535 }, mutable: true, help: "the client port this node announces to the cluster (behind NAT or a proxy); 0 = port" },
    Param { name: "cluster-announce-bus-port", default: "0", kind: Kind::Int { min: 0, max: 65535 }, mutable: true, help: "the bus port this node announces to the cluster; 0 = the bus port it listens on" },
    Param { name: "protected-mode", default: "yes", kind: Kind::Bool, mutable: true, help: "refuse to start on a non-loopback address without requirepass" },
    Param { name: "dir", default: "./abacus-data", kind: Kind::Str, mutable: false, help: "data directory (created if missing)" },
    Param { name: "export-dir", default: "", kind: Kind::Str, mutable: true, help: "directory the EXPORT command writes its Parquet files into (a plain file name inside it); empty (the default): EXPORT is refused" },
    Param { name: "threads", default: "0", kind: Kind::Int { min: 0, max: 256 }, mutable: false, help: "worker threads, one keyspace shard each; 0 = number of cores" },
    Param { name: "databases", default: "16", kind: Kind::Int { min: 1, max: 1024 }, mutable: false, help: "number of databases (SELECT 0..N-1)" },
    Param { name: "maxclients", default: "10000", kind: Kind::Int { min: 1, max: u32::MAX as i64 }, mutable: true, help: "maximum connected clients" },
    Param { name: "requirepass", default: "", kind: Kind::Str, mutable: true, help: "password clients must AUTH with; empty = none" },
    Param { name: "timeout", default: "0", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "close clients idle for this many seconds; 0 = never" },
    Param { name: "tcp-keepalive", default: "300", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "TCP keepalive seconds for new connections; 0 = off" },
    Param { name: "proto-max-bulk-len", default: "536870912", kind: Kind::Memory { min: 1024 * 1024, max: i64::MAX as u64 }, mutable: true, help: "largest bulk string a client may send" },
    Param { name: "client-query-buffer-limit", default: "1073741824", kind: Kind::Memory { min: 1024 * 1024, max: i64::MAX as u64 }, mutable: true, help: "largest unparsed request buffer per client" },
    Param { name: "client-output-buffer-limit", default: "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", kind: Kind::OutputBufferLimit, mutable: true, help: "per client class (normal, replica, pubsub): hard limit, soft limit and soft seconds of unwritten output; a pubsub client past the hard limit, or past the soft one for longer than the seconds, is disconnected (0 = no limit)" },
    Param { name: "max-pipeline-commands", default: "1024", kind: Kind::Int { min: 1, max: 1_000_000 }, mutable: true, help: "commands parsed from one read before their replies are written" },
    Param { name: "migrate-connections-after", default: "256", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "move a connection to the worker thread that owns its keys once this many consecutive commands went to that thread's shard (no cross-thread hop per command for a client of one hot key); 0 = never" },
    Param { name: "direct-replies", default: "yes", kind: Kind::Bool, mutable: true, help: "a batch whose commands all run on another thread's shard gets its replies written to the socket by that thread, which saves waking the connection's thread for them" },
    Param { name: "relaxed-batch-order", default: "no", kind: Kind::Bool, mutable: true, help: "let a pipelined batch whose commands span shards run its shards' parts independently: faster, but other clients may see a later command of the batch take effect before an earlier one (off: such a batch takes effect at once, in order, for every client)" },
    Param { name: "hz", default: "10", kind: Kind::ClampedInt { min: 0, max: i32::MAX as i64, lo: 1, hi: 500 }, mutable: true, help: "background task frequency (active expiry); clamped to 1..500 as Redis" },
    Param { name: "loglevel", default: "notice", kind: Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]), mutable: true, help: "log verbosity" },
    Param { name: "logfile", default: "", kind: Kind::Str, mutable: false, help: "log file; empty = standard output" },
    Param { name: "enable-debug-command", default: "local", kind: Kind::Enum(&["yes", "no", "local"]), mutable: false, help: "allow DEBUG: yes, no, or local (loopback connections only)" },
    Param { name: "busy-reply-threshold", default: "5000", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "milliseconds a script may run before other clients get -BUSY and SCRIPT KILL / FUNCTION KILL may stop it (0 = never)" },
    Param { name: "lua-heap-limit", default: "256mb", kind: Kind::Memory { min: 0, max: u64::MAX }, mutable: false, help: "most memory one shard's Lua state may hold (0 = no limit); a script that needs more fails with an error" },
    Param { name: "maxmemory", default: "0", kind: Kind::Memory { min: 0, max: u64::MAX }, mutable: true, help: "memory limit in bytes (0 = none); see maxmemory-policy" },
    Param { name: "maxmemory-policy", default: "noeviction", kind: Kind::Enum(abacus_keyspace::EvictionPolicy::NAMES), mutable: true, help: "what to do at maxmemory: noeviction (refuse writes) or evict keys (allkeys-/volatile- lru, lfu, random; allkeys-fifo; volatile-ttl)" },
    Param { name: "maxmemory-samples", default: "5", kind: Kind::Int { min: 1, max: i32::MAX as i64 }, mutable: true, help: "keys sampled per eviction (approximated LRU/LFU/FIFO)" },
    Param { name: "lfu-log-factor", default: "10", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "LFU policies: how many hits raise the 8-bit frequency counter (10: ~100 hits reach 10, ~1M reach 255)" },
    Param { name: "lfu-decay-time", default: "1", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "LFU policies: minutes without access that lower the frequency counter by one (0 = never)" },
    Param { name: "appendonly", default: "yes", kind: Kind::Bool, mutable: false, help: "log every write to the append-only log in dir (recovered on start)" },
    Param { name: "appendfsync", default: "everysec", kind: Kind::Enum(&["everysec", "always", "no"]), mutable: true, help: "when the log reaches the disk: always (before replying; group commit), everysec, no (the kernel decides)" },
    Param { name: "aof-load-truncated", default: "yes", kind: Kind::Bool, mutable: true, help: "on start, drop a torn last log record with a warning (no: refuse to start)" },
    Param { name: "auto-aof-rewrite-percentage", default: "100", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "compact the log (snapshot + new segment) when the log since the last snapshot reaches this percent of the snapshot's data size before compression (INFO aof_base_data_size); 0 = never" },
    Param { name: "auto-aof-rewrite-min-size", default: "67108864", kind: Kind::Memory { min: 0, max: i64::MAX as u64 }, mutable: true, help: "...and snapshot + log are at least this big" },
    Param { name: "stop-writes-on-bgsave-error", default: "yes", kind: Kind::Bool, mutable: true, help: "refuse writes (MISCONF) while the last snapshot failed and a save schedule is set, as Redis does, so a failing disk is noticed before data is lost" },
    Param { name: "save", default: "3600 1 300 100 60 10000", kind: Kind::Schedule, mutable: true, help: "snapshot schedule: pairs 'seconds changes' (snapshot when at least that many writes happened in that many seconds); empty = none" },
    Param { name: "hll-log2m", default: "11", kind: Kind::Int { min: 4, max: 31 }, mutable: true, help: "HLL.* sketches created without LOG2M: log2 of the register count" },
    Param { name: "hll-regwidth", default: "5", kind: Kind::Int { min: 1, max: 8 }, mutable: true, help: "HLL.* sketches created without REGWIDTH: bits per register" },
    Param { name: "hll-expthresh", default: "-1", kind: Kind::Expthresh { max: HLL_MAX_EXPTHRESH }, mutable: true, help: "HLL.* sketches created without EXPTHRESH: -1 auto, 0 off, or a power of two" },
    Param { name: "hll-sparseon", default: "1", kind: Kind::Int { min: 0, max: 1 }, mutable: true, help: "HLL.* sketches created without SPARSEON: 1 to allow the sparse form" },
    Param { name: "hll-max-log2m", default: "17", kind: Kind::Int { min: 4, max: 31 }, mutable: true, help: "largest log2m an HLL.* sketch may have, created or sent by a client (memory: 2^log2m bytes)" },
    Param { name: "set-max-listpack-entries", default: "128", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "a set with a non-integer member stays a listpack up to this many members (as Redis 7.2)" },
    Param { name: "set-max-listpack-value", default: "64", kind: Kind::Memory { min: 0, max: i64::MAX as u64 }, mutable: true, help: "...and while every member is at most this many bytes" },
    Param { name: "set-max-intset-entries", default: "512", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "accepted for compatibility, no effect: integer sets are Roaring bitmaps of any size" },
    Param { name: "hash-max-listpack-entries", default: "512", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "a hash stays a listpack up to this many fields (as Redis)" },
    Param { name: "hash-max-listpack-value", default: "64", kind: Kind::Memory { min: 0, max: i64::MAX as u64 }, mutable: true, help: "...and while every field and value is at most this many bytes" },
    Param { name: "list-max-listpack-size", default: "-2", kind: Kind::Int { min: i32::MIN as i64, max: i32::MAX as i64 }, mutable: true, help: "list node size: a positive value is entries per node, -1..-5 bytes per node (4, 8, 16, 32, 64 KiB), as Redis" },
    Param { name: "list-compress-depth", default: "0", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "accepted for compatibility, no effect: list nodes are never compressed" },
    Param { name: "zset-max-listpack-entries", default: "128", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "a sorted set stays a listpack up to this many members (as Redis)" },
    Param { name: "zset-max-listpack-value", default: "64", kind: Kind::Memory { min: 0, max: i64::MAX as u64 }, mutable: true, help: "...and while every member is at most this many bytes" },
    Param { name: "stream-node-max-bytes", default: "4096", kind: Kind::Memory { min: 0, max: i64::MAX as u64 }, mutable: true, help: "a stream's entries are kept in blocks of at most this many bytes of Redis's listpack encoding (0 = no limit), where Redis starts a new node, so approximate trimming (~) removes what Redis removes" },
    Param { name: "stream-node-max-entries", default: "100", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "...and of at most this many entries, deleted ones included (0 = no limit)" },
    Param { name: "notify-keyspace-events", default: "", kind: Kind::KeyspaceEvents, mutable: true, help: "keyspace notifications published to __keyspace@<db>__:<key> (K) and __keyevent@<db>__:<event> (E), by class: g generic, $ string, l list, s set, h hash, z sorted set, x expired, e evicted, t stream, m key miss, d module, n new key, A = g$lshzxetd; empty = off" },
    Param { name: "hll-sparse-max-bytes", default: "3000", kind: Kind::Memory { min: 0, max: i64::MAX as u64 }, mutable: true, help: "PF* values: largest sparse HyperLogLog before it turns dense (as Redis)" },
    Param { name: "summarizer-rules", default: "", kind: Kind::Str, mutable: false, help: "summarizer rules file (TOML: feeds and summaries) loaded at start-up; a bad file stops the start with its line and reason; SUMMARY.RULES LOAD replaces it at run time" },
    Param { name: "slowlog-log-slower-than", default: "10000", kind: Kind::Int { min: -1, max: i64::MAX }, mutable: true, help: "SLOWLOG keeps commands that took at least this many microseconds; negative = off, 0 = every command" },
    Param { name: "slowlog-max-len", default: "128", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "SLOWLOG keeps this many of the newest slow commands" },
    Param { name: "latency-monitor-threshold", default: "0", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "LATENCY keeps events (slow commands, table growth, snapshots, log writes and fsyncs, eviction, expiry) that took at least this many milliseconds; 0 = off" },
    Param { name: "latency-tracking", default: "yes", kind: Kind::Bool, mutable: true, help: "keep a latency histogram per command (INFO latencystats, LATENCY HISTOGRAM, the metrics endpoint)" },
    Param { name: "latency-tracking-info-percentiles", default: "50 99 99.9", kind: Kind::Percentiles, mutable: true, help: "the percentiles INFO latencystats reports, space separated, each 0 to 100" },
    Param { name: "metrics-port", default: "0", kind: Kind::Int { min: 0, max: 65535 }, mutable: false, help: "TCP port of the Prometheus metrics endpoint (HTTP GET /metrics), on the same addresses as `bind`; 0 = off" },
    Param { name: "aclfile", default: "", kind: Kind::Str, mutable: false, help: "ACL users file (Redis's format: one `user <name> <rules...>` line each) loaded at start-up; ACL SAVE writes it, ACL LOAD reads it again; empty = users live in memory only" },
    Param { name: "acllog-max-len", default: "128", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "ACL LOG keeps at most this many entries (denied commands, keys, channels and failed AUTHs)" },
    Param { name: "repl-backlog-size", default: "1048576", kind: Kind::Memory { min: 1, max: i64::MAX as u64 }, mutable: true, help: "bytes of the replication stream kept for replicas to resume with a partial resync (PSYNC) after a dropped link" },
    Param { name: "repl-timeout", default: "60", kind: Kind::Int { min: 1, max: i32::MAX as i64 }, mutable: true, help: "seconds a replica waits for its primary during the handshake and the transfer" },
    Param { name: "replica-read-only", default: "yes", kind: Kind::Bool, mutable: true, help: "a replica refuses writes from its clients (READONLY)" },
    Param { name: "replica-serve-stale-data", default: "yes", kind: Kind::Bool, mutable: true, help: "a replica whose link is down keeps serving its (stale) data; no = MASTERDOWN errors" },
    Param { name: "masterauth", default: "", kind: Kind::Str, mutable: true, help: "password a replica authenticates to its primary with" },
    Param { name: "masteruser", default: "", kind: Kind::Str, mutable: true, help: "user name a replica authenticates to its primary with (AUTH user password)" },
    Param { name: "min-replicas-to-write", default: "0", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "a primary refuses writes (NOREPLICAS) unless this many replicas are online with a lag of at most min-replicas-max-lag seconds (0 = off)" },
    Param { name: "min-replicas-max-lag", default: "10", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "see min-replicas-to-write" },
    Param { name: "replica-priority", default: "100", kind: Kind::Int { min: 0, max: i32::MAX as i64 }, mutable: true, help: "shown to Sentinel (INFO slave_priority): lower is promoted first, 0 never" },
    Param { name: "replica-announce-ip", default: "", kind: Kind::Str, mutable: true, help: "address a replica announces to its primary (REPLCONF ip-address)" },
    Param { name: "replica-announce-port", default: "0", kind: Kind::Int { min: 0, max: 65535 }, mutable: true, help: "port a replica announces to its primary (0 = the port it listens on)" },
    Param { name: "tracking-table-max-keys", default: "1000000", kind: Kind::Int { min: 0, max: i64::MAX }, mutable: true, help: "CLIENT TRACKING: the most keys the tracking table remembers; past it, keys are invalidated to their clients until it fits (0 = no bound)" },
    Param { name: "summarizer-queue-batches", default: "64", kind: Kind::Int { min: 1, max: 1_048_576 }, mutable: true, help: "summarizer: parsed batches that may wait for or be applied on the shards at once; past it a batch waits (the connection stops being read), or is dropped and counted if its feed says when_full = \"drop\"" },
    Param { name: "ingest-port", default: "0", kind: Kind::Int { min: 0, max: 65535 }, mutable: false, help: "TCP port of the summarizer's raw line listener (newline-delimited feed lines, no protocol), on the same addresses as `bind`, with the same password; 0 = off" },
    Param { name: "summarizer-parse-slice-bytes", default: "32768", kind: Kind::Int { min: 0, max: 1_073_741_824 }, mutable: true, help: "summarizer: a batch is parsed in slices of about this many bytes of lines, and the connection's thread runs its shard's waiting jobs (other connections' batches) between them; 0 = the whole batch in one stretch (its shard's jobs wait until it is parsed)" },
    Param { name: "huge-pages", default: "no", kind: Kind::Enum(&["no", "yes"]), mutable: false, help: "back the heap with transparent huge pages (jemalloc's thp:always; `abacus serve` restarts itself once to set it): fewer TLB misses for reads spread over a large data set (W7's one-day waterfall: about a quarter less CPU) for a little more memory (about 2-3% of RSS); needs the kernel's THP mode `madvise` or `always`" },
    Param { name: "keyspace-density", default: "dense", kind: Kind::Enum(&["balanced", "dense"]), mutable: false, help: "how full the key tables run: dense (the default: 88% on average) or balanced (80%: about 10% more memory per small key, and less growth work for each write that creates a key)" },
];

/// The HLL parameters and limit handlers read (defined with them, in `abacus-commands`).
pub use abacus_commands::config::{HllConfig, HLL_MAX_EXPTHRESH};

/// The pubsub class of `client-output-buffer-limit`, mirrored for publishers (no lock): read by `pubsub.rs`, kept here with the
/// parameter so that the configuration needs nothing above it.
#[derive(Default)]
pub struct OutputLimit {
    hard: AtomicU64,
    soft: AtomicU64,
    soft_secs: AtomicU64,
}

impl OutputLimit {
    pub fn set(&self, hard: u64, soft: u64, soft_secs: u64) {
        self.hard.store(hard, Ordering::Relaxed);
        self.soft.store(soft, Ordering::Relaxed);
        self.soft_secs.store(soft_secs, Ordering::Relaxed);
    }

    pub fn get(&self) -> (u64, u64, u64) {
        (self.hard.load(Ordering::Relaxed), self.soft.load(Ordering::Relaxed), self.soft_secs.load(Ordering::Relaxed))
    }
}

/// The configuration values keyed handlers read, for one batch of commands.
#[derive(Clone, Copy, Debug)]
pub struct CmdConfig {
    /// proto-max-bulk-len: the largest string a command may create.
    pub max_string_len: u64,
    pub hll: HllConfig,
    /// set-max-listpack-entries / -value.
    pub set_limits: EncodingLimits,
    /// hash-max-listpack-entries / -value.
    pub hash_limits: EncodingLimits,
    /// list-max-listpack-size.
    pub list_limits: abacus_collections::ListLimits,
    /// zset-max-listpack-entries / -value.
    pub zset_limits: EncodingLimits,
    /// stream-node-max-bytes / -entries.
    pub stream_limits: abacus_collections::StreamLimits,
    /// maxmemory (0 = none), maxmemory-policy, maxmemory-samples.
    pub maxmemory: u64,
    pub eviction: abacus_keyspace::EvictionPolicy,
    pub eviction_samples: usize,
    /// lfu-log-factor, lfu-decay-time (minutes).
    pub lfu_log_factor: u32,
    pub lfu_decay_time_min: u32,
    /// notify-keyspace-events' flags (`notify.rs`), 0 when nothing is published (no K nor E).
    pub notify: u32,
}

impl CmdConfig {
    /// How the keyspace tracks accesses under this configuration.
    pub fn tracking(&self) -> abacus_keyspace::Tracking {
        abacus_keyspace::Tracking { policy: self.eviction, lfu_log_factor: self.lfu_log_factor, lfu_decay_time_min: self.lfu_decay_time_min }
    }
}

/// Redis 7.0's old names of parameters Abacus has (alias, parameter).
const ALIASES: &[(&str, &str)] = &[
    ("lua-time-limit", "busy-reply-threshold"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// Looks a parameter up by name or alias (case-insensitive, as Redis).
pub fn param(name: &str) -> Option<&'static Param> {
    param_as_named(name).map(|(p, _)| p)
}

/// The parameter and the name errors show for it: an alias as such, as in Redis 7.0.
fn param_as_named(name: &str) -> Option<(&'static Param, &'static str)> {
    match ALIASES.iter().find(|(alias, _)| alias.eq_ignore_ascii_case(name)) {
        Some((alias, target)) => PARAMS.iter().find(|p| p.name == *target).map(|p| (p, *alias)),
        None => PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name)).map(|p| (p, p.name)),
    }
}

/// Whether a CONFIG GET pattern has glob characters; one without is a name, looked up
/// exactly (case-insensitively; `h\z` is not `hz`), as Redis 7.0.
pub fn is_glob(pattern: &[u8]) -> bool {
    pattern.iter().any(|c| b"[*?".contains(c))
}

/// Whether a CONFIG GET pattern matches a parameter's name.
pub fn pattern_matches(pattern: &[u8], name: &str) -> bool {
    if is_glob(pattern) {
        glob_match(pattern, name.as_bytes(), true)
    } else {
        pattern.eq_ignore_ascii_case(name.as_bytes())
    }
}

/// Parses a memory amount with Redis's units.
/// Like Redis's memtoull: leading digits then an optional unit; no sign or spaces; no digits
/// reads as 0 (`""`, `"gb"`); a number past u64 saturates as strtoull does, and the unit's
/// multiplication wraps as Redis's does (`17179869184gb` is 0).
pub fn parse_memory(s: &str) -> Option<u64> {
    let split = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mul = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1024 * 1024,
        "g" => 1_000_000_000,
        "gb" => GB,
        _ => return None,
    };
    if num.len() >= 128 {
        return None;
    }
    let n: u64 = if num.is_empty() { 0 } else { num.parse().unwrap_or(u64::MAX) };
    Some(n.wrapping_mul(mul))
}

/// A numeric parameter's value, read like Redis's string2ll (no '+', spaces or leading
/// zeros).
fn parse_int(value: &str) -> Result<i64, String> {
    abacus_keyspace::value::parse_canonical_i64(value.as_bytes()).ok_or_else(|| "argument couldn't be parsed into an integer".to_string())
}

fn canonical(p: &Param, value: &str) -> Result<String, String> {
    match p.kind {
        Kind::Int { min, max } => {
            let v = parse_int(value)?;
            if v < min || v > max {
                return Err(format!("argument must be between {min} and {max} inclusive"));
            }
            Ok(v.to_string())
        }
        Kind::ClampedInt { min, max, lo, hi } => {
            let v = parse_int(value)?;
            if v < min || v > max {
                return Err(format!("argument must be between {min} and {max} inclusive"));
            }
            Ok(v.clamp(lo, hi).to_string())
        }
        Kind::Schedule => parse_schedule(value).map(|_| value.to_string()).map_err(|_| "Invalid save parameters".to_string()),
        Kind::Memory { min, max } => {
            let v = parse_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            if v < min || v > max {
                return Err(format!("argument must be between {min} and {max} inclusive"));
            }
            Ok(v.to_string())
        }
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Str => Ok(value.to_string()),
        Kind::Hostname => {
            if value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') {
                Ok(value.to_string())
            } else {
                Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into())
            }
        }
        Kind::Enum(choices) => {
            let v = value.to_ascii_lowercase();
            if choices.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err("argument(s) must be one of the following: ".to_string() + &choices.join(", "))
            }
        }
        Kind::OutputBufferLimit => parse_output_limits(value).map(|_| value.to_string()),
        Kind::KeyspaceEvents => abacus_commands::notify::parse_flags(value).map(abacus_commands::notify::flags_to_string).ok_or_else(|| abacus_commands::notify::ERR_CLASS.to_string()),
        Kind::Percentiles => crate::latency::canonical_percentiles(value),
        Kind::Expthresh { max } => {
            let v = parse_int(value)?;
            let power_of_two = v > 0 && v & (v - 1) == 0;
            if v == -1 || v == 0 || (power_of_two && v <= max) {
                Ok(v.to_string())
            } else {
                Err(format!("argument must be -1 (auto), 0 (off) or a power of two up to {max}"))
            }
        }
    }
}

/// The classes of `client-output-buffer-limit`, in CONFIG GET's order.
const OUTPUT_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// One class's limits: hard bytes, soft bytes, soft seconds.
pub type OutputLimits = (u64, u64, u64);

/// Parses `client-output-buffer-limit` groups as Redis 7.0 does, with its error texts:
/// (class index in [`OUTPUT_CLASSES`], limits) per group.
fn parse_output_limits(value: &str) -> Result<Vec<(usize, OutputLimits)>, String> {
    // Split at every single space, as Redis 7.0 splits a multi-argument parameter for CONFIG
    // SET (so " " is two empty arguments, and "" none).
    let args: Vec<&str> = if value.is_empty() { Vec::new() } else { value.split(' ').collect() };
    if args.len() % 4 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut out = Vec::new();
    for g in args.chunks(4) {
        let class = match g[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
        };
        let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string();
        let hard = parse_memory(g[1]).ok_or_else(bad)?;
        let soft = parse_memory(g[2]).ok_or_else(bad)?;
        // strtoll: an optional sign, then digits to the end.
        let secs: i64 = g[3].parse().map_err(|_| bad())?;
        if secs < 0 {
            return Err(bad());
        }
        out.push((class, (hard, soft, secs as u64)));
    }
    Ok(out)
}

/// Every class's limits in `value` (a canonical `client-output-buffer-limit`).
pub fn output_limits(value: &str) -> [OutputLimits; 3] {
    let mut all = [(0, 0, 0); 3];
    for (class, l) in parse_output_limits(value).unwrap_or_default() {
        all[class] = l;
    }
    all
}

/// `current` with the classes `set` names replaced, in CONFIG GET's form.
fn merge_output_limits(current: &str, set: &str) -> String {
    let mut all = output_limits(current);
    for (class, l) in parse_output_limits(set).unwrap_or_default() {
        all[class] = l;
    }
    OUTPUT_CLASSES.iter().zip(all).map(|(c, (h, s, secs))| format!("{c} {h} {s} {secs}")).collect::<Vec<_>>().join(" ")
}

/// A value to show in a usage hint: the default, or a placeholder where it is empty.
fn example_value(p: &Param) -> String {
    if p.default.is_empty() {
        "VALUE".to_string()
    } else if p.default.contains(' ') {
        format!("\"{}\"", p.default)
    } else {
        p.default.to_string()
    }
}

/// The live configuration.
pub struct Config {
    values: RwLock<BTreeMap<&'static str, String>>,
    /// Each parameter's numeric form ([`numeric`]), refreshed on every successful set: what
    /// the hot path reads.
    nums: [AtomicU64; PARAMS.len()],
    /// The config file the parameters were read from (absolute), for the banner and INFO.
    config_file: Option<std::path::PathBuf>,
    /// `client-output-buffer-limit`'s pubsub class, for publishers (`pubsub.rs`).
    pub pubsub_limit: std::sync::Arc<OutputLimit>,
    /// `notify-keyspace-events` as set (its flags, `n` included), for [`CmdConfig::notify`].
    keyspace_events: AtomicU64,
}

impl Default for Config {
    fn default() -> Self {
        let values = PARAMS.iter().map(|p| (p.name, p.default.to_string())).collect();
        let c = Config { values: RwLock::new(values), nums: [const { AtomicU64::new(0) }; PARAMS.len()], config_file: None, pubsub_limit: Default::default(), keyspace_events: AtomicU64::new(0) };
        c.refresh_hot();
        c
    }
}

/// A parameter, by its position in [`PARAMS`]: made by [`param!`] from the parameter's name at
/// compile time, so that every read goes through the parameter's declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamId(pub usize);

impl ParamId {
    /// The parameter named `name`; in a constant (what [`param!`] makes), an unknown name is a
    /// build error.
    pub const fn of(name: &str) -> ParamId {
        ParamId(param_index(name))
    }

    pub fn name(self) -> &'static str {
        PARAMS[self.0].name
    }
}

/// The [`ParamId`] of a parameter named by a literal, checked at compile time:
/// `config.get(param!("maxmemory"))`.
///
/// ```
/// let c = abacus_engine::Config::default();
/// assert_eq!(c.get(abacus_engine::param!("maxmemory-policy")), "noeviction");
/// ```
///
/// A name no parameter has does not build (it used to read an empty value):
///
/// ```compile_fail
/// let _ = abacus_engine::param!("maxmemory-polcy");
/// ```
#[macro_export]
macro_rules! param {
    ($name:literal) => {
        const { $crate::config::ParamId::of($name) }
    };
}

/// The position of parameter `name` in [`PARAMS`]. Evaluated at compile time where it makes a
/// constant, so an unknown name is a build error, not a zero read at run time.
pub const fn param_index(name: &str) -> usize {
    let mut i = 0;
    while i < PARAMS.len() {
        if const_eq(PARAMS[i].name.as_bytes(), name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("no such configuration parameter")
}

const fn const_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The parameters the server's code reads through the numeric mirrors.
pub const PROTO_MAX_BULK_LEN: usize = param_index("proto-max-bulk-len");
pub const CLIENT_QUERY_BUFFER_LIMIT: usize = param_index("client-query-buffer-limit");
pub const MAXCLIENTS: usize = param_index("maxclients");
pub const TIMEOUT: usize = param_index("timeout");
pub const MAX_PIPELINE_COMMANDS: usize = param_index("max-pipeline-commands");
pub const MIGRATE_CONNECTIONS_AFTER: usize = param_index("migrate-connections-after");
pub const DIRECT_REPLIES: usize = param_index("direct-replies");
pub const RELAXED_BATCH_ORDER: usize = param_index("relaxed-batch-order");
pub const HLL_LOG2M: usize = param_index("hll-log2m");
pub const HLL_REGWIDTH: usize = param_index("hll-regwidth");
pub const HLL_EXPTHRESH: usize = param_index("hll-expthresh");
pub const HLL_SPARSEON: usize = param_index("hll-sparseon");
pub const HLL_MAX_LOG2M: usize = param_index("hll-max-log2m");
pub const HLL_SPARSE_MAX_BYTES: usize = param_index("hll-sparse-max-bytes");
pub const SET_MAX_LISTPACK_ENTRIES: usize = param_index("set-max-listpack-entries");
pub const SET_MAX_LISTPACK_VALUE: usize = param_index("set-max-listpack-value");
pub const HASH_MAX_LISTPACK_ENTRIES: usize = param_index("hash-max-listpack-entries");
pub const HASH_MAX_LISTPACK_VALUE: usize = param_index("hash-max-listpack-value");
pub const LIST_MAX_LISTPACK_SIZE: usize = param_index("list-max-listpack-size");
pub const ZSET_MAX_LISTPACK_ENTRIES: usize = param_index("zset-max-listpack-entries");
pub const ZSET_MAX_LISTPACK_VALUE: usize = param_index("zset-max-listpack-value");
pub const STREAM_NODE_MAX_BYTES: usize = param_index("stream-node-max-bytes");
pub const STREAM_NODE_MAX_ENTRIES: usize = param_index("stream-node-max-entries");
pub const MAXMEMORY: usize = param_index("maxmemory");
pub const MAXMEMORY_POLICY: usize = param_index("maxmemory-policy");
pub const MAXMEMORY_SAMPLES: usize = param_index("maxmemory-samples");
pub const LFU_LOG_FACTOR: usize = param_index("lfu-log-factor");
pub const LFU_DECAY_TIME: usize = param_index("lfu-decay-time");
pub const SLOWLOG_LOG_SLOWER_THAN: usize = param_index("slowlog-log-slower-than");
pub const SLOWLOG_MAX_LEN: usize = param_index("slowlog-max-len");
pub const LATENCY_MONITOR_THRESHOLD: usize = param_index("latency-monitor-threshold");
pub const LATENCY_TRACKING: usize = param_index("latency-tracking");
pub const TRACKING_TABLE_MAX_KEYS: usize = param_index("tracking-table-max-keys");

/// A canonical value's numeric form, by the parameter's kind: integers and memory sizes as
/// their value (signed ones as two's complement), booleans as 0/1, enumerations as the
/// index of the choice; 0 for strings and schedules (read those with [`Config::get`]).
fn numeric(p: &Param, value: &str) -> u64 {
    match p.kind {
        Kind::Int { .. } | Kind::ClampedInt { .. } | Kind::Expthresh { .. } => value.parse::<i64>().unwrap_or(0) as u64,
        Kind::Memory { .. } => value.parse().unwrap_or(0),
        Kind::Bool => u64::from(value == "yes"),
        Kind::Enum(names) => names.iter().position(|n| *n == value).unwrap_or(0) as u64,
        Kind::Str | Kind::Hostname | Kind::Schedule | Kind::OutputBufferLimit | Kind::Percentiles => 0,
        // The flags as set are kept in `Config::keyspace_events` instead: the canonical
        // string omits `n` next to `A`, as Redis's does.
        Kind::KeyspaceEvents => abacus_commands::notify::parse_flags(value).unwrap_or(0).into(),
    }
}

impl Config {
    /// Builds a configuration from an optional config file's text and `--name value` args.
    /// Command-line values override the file's.
    pub fn from_sources(file_text: Option<&str>, args: &[String]) -> Result<Config, String> {
        let c = Config::default();
        if let Some(text) = file_text {
            for (lineno, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (name, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                let value = unquote(value.trim());
                c.set_startup(name, &value).map_err(|e| format!("config file line {}: {e}", lineno + 1))?;
            }
        }
        let mut i = 0;
        while i < args.len() {
            let Some(name) = args[i].strip_prefix("--") else {
                return Err(format!("unexpected argument '{}': parameters are given as --name value", args[i]));
            };
            let mut j = i + 1;
            while j < args.len() && !args[j].starts_with("--") {
                j += 1;
            }
            if j == i + 1 {
                // `--port` alone (or followed by the next `--name`): say so rather than let
                // an empty value fail as "not an integer" or pass as an empty string.
                let p = param(name).ok_or_else(|| format!("unknown configuration parameter '{name}'"))?;
                return Err(format!("--{} needs a value (for example --{} {}); give \"\" for an empty one", p.name, p.name, example_value(p)));
            }
            let value = args[i + 1..j].join(" ");
            c.set_startup(name, &value)?;
            i = j;
        }
        Ok(c)
    }

    /// Records the config file the parameters came from.
    pub fn set_config_file(&mut self, path: std::path::PathBuf) {
        self.config_file = Some(path);
    }

    pub fn config_file(&self) -> Option<&std::path::Path> {
        self.config_file.as_deref()
    }

    fn set_startup(&self, name: &str, value: &str) -> Result<(), String> {
        let p = param(name).ok_or_else(|| format!("unknown configuration parameter '{name}'"))?;
        // A config file or command line separates arguments by any run of blanks.
        let value = match p.kind {
            Kind::OutputBufferLimit => value.split_whitespace().collect::<Vec<_>>().join(" "),
            _ => value.to_string(),
        };
        let v = canonical(p, &value).map_err(|e| format!("invalid value for '{}': {e}", p.name))?;
        let v = self.merged(p, v);
        self.values.write().insert(p.name, v);
        self.refresh_hot();
        self.note_raw(p, &value);
        Ok(())
    }

    /// CONFIG SET of several parameters, all or nothing. The error text is Redis's.
    /// As Redis, every name is checked (unknown, immutable, duplicate) before any value; those
    /// errors show the name as given (`TIMEOUT`), value errors the parameter's own name.
    pub fn set_many(&self, pairs: &[(String, String)]) -> Result<(), String> {
        // (parameter, the name errors show: an alias as such, as in Redis 7.0)
        let mut params: Vec<(&'static Param, &'static str)> = Vec::with_capacity(pairs.len());
        for (name, _) in pairs {
            let Some((p, shown)) = param_as_named(name) else {
                return Err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"));
            };
            if !p.mutable {
                return Err(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"));
            }
            if params.iter().any(|(_, q)| *q == shown) {
                return Err(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"));
            }
            params.push((p, shown));
        }
        let mut staged = Vec::with_capacity(pairs.len());
        for ((p, shown), (_, value)) in params.into_iter().zip(pairs) {
            let v = canonical(p, value).map_err(|e| format!("ERR CONFIG SET failed (possibly related to argument '{shown}') - {e}"))?;
            staged.push((p.name, self.merged(p, v)));
        }
        let mut values = self.values.write();
        for (n, v) in staged {
            values.insert(n, v);
        }
        drop(values);
        self.refresh_hot();
        for (name, value) in pairs {
            if let Some(p) = param(name) {
                self.note_raw(p, value);
            }
        }
        Ok(())
    }

    /// Keeps what the canonical form loses of a value just set (`n` beside `A` in
    /// `notify-keyspace-events`).
    fn note_raw(&self, p: &Param, value: &str) {
        if let Kind::KeyspaceEvents = p.kind {
            let flags = abacus_commands::notify::parse_flags(value).unwrap_or(0);
            self.keyspace_events.store(u64::from(flags), Ordering::Relaxed);
        }
    }

    /// CONFIG GET: (name, value) of every parameter matching any of the glob patterns.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(&'static str, String)> {
        let values = self.values.read();
        // Redis 7.0 lists the aliases too, under their own names.
        let aliases = ALIASES.iter().filter_map(|(alias, target)| values.get(target).map(|v| (alias, v)));
        values
            .iter()
            .chain(aliases)
            .filter(|(n, _)| patterns.iter().any(|p| pattern_matches(p, n)))
            .map(|(n, v)| (*n, v.clone()))
            .collect()
    }

    /// A parameter's canonical value (CONFIG GET's form). `p` comes from [`param!`], so a
    /// misspelt name fails the build instead of reading empty.
    pub fn get(&self, p: ParamId) -> String {
        self.values.read().get(PARAMS[p.0].name).cloned().unwrap_or_default()
    }

    /// A parameter by a name known only at run time (a client's CONFIG GET, a rewrite of the
    /// config file): None for a name no parameter has.
    pub fn get_by_name(&self, name: &str) -> Option<String> {
        self.values.read().get(name).cloned()
    }

    /// A numeric parameter's value (0 for one that is not a plain number, or is negative).
    /// Integers, sizes and yes/no read the parameter's lock-free mirror (one atomic load: a
    /// write's checks read some on every command); other kinds parse the stored text.
    pub fn get_u64(&self, p: ParamId) -> u64 {
        match PARAMS[p.0].kind {
            Kind::Int { .. } | Kind::ClampedInt { .. } | Kind::Expthresh { .. } => u64::try_from(self.num(p.0) as i64).unwrap_or(0),
            Kind::Memory { .. } | Kind::Bool => self.num(p.0),
            _ => self.get(p).parse().unwrap_or(0),
        }
    }

    /// A yes/no parameter's value (from its mirror, see [`Config::get_u64`]).
    pub fn get_bool(&self, p: ParamId) -> bool {
        match PARAMS[p.0].kind {
            Kind::Bool => self.num(p.0) != 0,
            _ => self.get(p) == "yes",
        }
    }

    /// A set value as stored: `client-output-buffer-limit` keeps the classes the set does not
    /// name, as Redis's.
    fn merged(&self, p: &Param, v: String) -> String {
        match p.kind {
            Kind::OutputBufferLimit => merge_output_limits(&self.get_by_name(p.name).unwrap_or_default(), &v),
            _ => v,
        }
    }

    fn refresh_hot(&self) {
        let values = self.values.read();
        for (i, p) in PARAMS.iter().enumerate() {
            let v = values.get(p.name).map_or(p.default, |v| v.as_str());
            self.nums[i].store(numeric(p, v), Ordering::Relaxed);
        }
        let (hard, soft, secs) = output_limits(values.get("client-output-buffer-limit").map_or("", |v| v.as_str()))[2];
        self.pubsub_limit.set(hard, soft, secs);
    }

    /// Parameter `i`'s numeric form (see [`numeric`]); `i` is one of this module's constants.
    #[inline]
    pub fn num(&self, i: usize) -> u64 {
        self.nums[i].load(Ordering::Relaxed)
    }

    /// [`Config::num`] of a boolean parameter.
    #[inline]
    pub fn flag(&self, i: usize) -> bool {
        self.num(i) != 0
    }

    fn num_usize(&self, i: usize) -> usize {
        usize::try_from(self.num(i)).unwrap_or(usize::MAX)
    }

    fn num_u32(&self, i: usize) -> u32 {
        u32::try_from(self.num(i)).unwrap_or(u32::MAX)
    }

    /// What keyed handlers need, read from the mirrors (no lock).
    pub fn cmd_config(&self) -> CmdConfig {
        CmdConfig {
            max_string_len: self.num(PROTO_MAX_BULK_LEN),
            hll: HllConfig {
                log2m: self.num(HLL_LOG2M) as i64,
                regwidth: self.num(HLL_REGWIDTH) as i64,
                expthresh: self.num(HLL_EXPTHRESH) as i64,
                sparseon: self.flag(HLL_SPARSEON),
                max_log2m: self.num_u32(HLL_MAX_LOG2M),
                sparse_max_bytes: self.num_usize(HLL_SPARSE_MAX_BYTES),
            },
            set_limits: EncodingLimits {
                max_listpack_entries: self.num_usize(SET_MAX_LISTPACK_ENTRIES),
                max_listpack_value_bytes: self.num_usize(SET_MAX_LISTPACK_VALUE),
            },
            hash_limits: EncodingLimits {
                max_listpack_entries: self.num_usize(HASH_MAX_LISTPACK_ENTRIES),
                max_listpack_value_bytes: self.num_usize(HASH_MAX_LISTPACK_VALUE),
            },
            list_limits: abacus_collections::ListLimits::from_fill(self.num(LIST_MAX_LISTPACK_SIZE) as i64),
            zset_limits: EncodingLimits {
                max_listpack_entries: self.num_usize(ZSET_MAX_LISTPACK_ENTRIES),
                max_listpack_value_bytes: self.num_usize(ZSET_MAX_LISTPACK_VALUE),
            },
            stream_limits: abacus_collections::StreamLimits {
                node_max_bytes: self.num(STREAM_NODE_MAX_BYTES),
                node_max_entries: self.num(STREAM_NODE_MAX_ENTRIES),
            },
            maxmemory: self.num(MAXMEMORY),
            eviction: abacus_keyspace::EvictionPolicy::ALL
                .get(self.num_usize(MAXMEMORY_POLICY))
                .copied()
                .unwrap_or(abacus_keyspace::EvictionPolicy::NoEviction),
            eviction_samples: self.num_usize(MAXMEMORY_SAMPLES),
            lfu_log_factor: self.num_u32(LFU_LOG_FACTOR),
            lfu_decay_time_min: self.num_u32(LFU_DECAY_TIME),
            notify: abacus_commands::notify::effective(self.keyspace_events.load(Ordering::Relaxed) as u32),
        }
    }

    // Named readers for the connection path (each one line over the mirror).
    pub fn proto_max_bulk_len(&self) -> u64 {
        self.num(PROTO_MAX_BULK_LEN)
    }
    pub fn query_buffer_limit(&self) -> u64 {
        self.num(CLIENT_QUERY_BUFFER_LIMIT)
    }
    pub fn maxclients(&self) -> u64 {
        self.num(MAXCLIENTS)
    }
    pub fn tracking_table_max_keys(&self) -> u64 {
        self.num(TRACKING_TABLE_MAX_KEYS)
    }
    pub fn timeout_s(&self) -> u64 {
        self.num(TIMEOUT)
    }
    pub fn max_pipeline(&self) -> usize {
        self.num_usize(MAX_PIPELINE_COMMANDS)
    }
    pub fn direct_replies(&self) -> bool {
        self.flag(DIRECT_REPLIES)
    }
    /// `relaxed-batch-order`: multi-shard batches run without the ordering (see `exec.rs`).
    pub fn relaxed_batch_order(&self) -> bool {
        self.flag(RELAXED_BATCH_ORDER)
    }
    /// 0 = never.
    pub fn migrate_after(&self) -> u64 {
        self.num(MIGRATE_CONNECTIONS_AFTER)
    }

    /// The password clients must give, if any.
    pub fn requirepass(&self) -> Option<String> {
        let p = self.get(crate::param!("requirepass"));
        (!p.is_empty()).then_some(p)
    }

    /// Worker thread count with 0 resolved to the number of cores.
    pub fn threads(&self) -> usize {
        match self.get_u64(crate::param!("threads")) {
            0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            n => n as usize,
        }
    }
}

fn unquote(v: &str) -> String {
    let b = v.as_bytes();
    if b.len() >= 2 && ((b[0] == b'"' && b[b.len() - 1] == b'"') || (b[0] == b'\'' && b[b.len() - 1] == b'\'')) {
        v[1..v.len() - 1].to_string()
    } else {
        v.to_string()
    }
}

/// The `save` schedule: pairs of (seconds, changes).
pub fn parse_schedule(s: &str) -> Result<Vec<(u64, u64)>, String> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    if !parts.len().is_multiple_of(2) {
        return Err("save: expected pairs of 'seconds changes'".into());
    }
    parts
        .chunks(2)
        .map(|p| match (p[0].parse::<u64>(), p[1].parse::<u64>()) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            _ => Err(format!("save: '{} {}' is not a pair of integers", p[0], p[1])),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_is_found_by_name_and_mirrored() {
        let c = Config::default();
        for (i, p) in PARAMS.iter().enumerate() {
            assert_eq!(param_index(p.name), i, "{} declared twice", p.name);
            assert_eq!(c.num(i), numeric(p, p.default), "{}", p.name);
        }
        c.set_many(&[("maxmemory".into(), "1mb".into()), ("maxmemory-policy".into(), "allkeys-lru".into())]).unwrap();
        let cmd = c.cmd_config();
        assert_eq!((cmd.maxmemory, cmd.eviction), (1 << 20, abacus_keyspace::EvictionPolicy::AllKeysLru));
        c.set_many(&[("hll-expthresh".into(), "-1".into()), ("direct-replies".into(), "no".into())]).unwrap();
        assert_eq!(c.cmd_config().hll.expthresh, -1);
        assert!(!c.direct_replies());
        let c = Config::from_sources(Some("hll-expthresh 1024\nset-max-listpack-value 1kb"), &[]).unwrap();
        assert_eq!(c.cmd_config().hll.expthresh, 1024);
        assert_eq!(c.cmd_config().set_limits.max_listpack_value_bytes, 1024);
    }

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn start_up_values_are_checked_as_config_set_checks_them() {
        // A schedule that does not parse is refused at start-up, not ignored.
        assert!(Config::from_sources(None, &args("--save abc")).is_err());
        assert!(Config::from_sources(Some("save 60\n"), &[]).is_err());
        let c = Config::from_sources(Some("save \"\"\n"), &args("--hz 1000")).unwrap();
        assert_eq!(c.get(crate::param!("save")), "");
        // hz is clamped to 1..=500 as Redis does, at start-up and by CONFIG SET alike.
        assert_eq!(c.get(crate::param!("hz")), "500");
        c.set_many(&[("hz".into(), "0".into())]).unwrap();
        assert_eq!(c.get(crate::param!("hz")), "1");
        assert!(c.set_many(&[("save".into(), "1 2 3".into())]).unwrap_err().ends_with("Invalid save parameters"));
        // An alias is found, and errors name it as given.
        assert!(c.set_many(&[("hash-max-ziplist-entries".into(), "x".into())]).unwrap_err().contains("'hash-max-ziplist-entries'"));
    }

    #[test]
    fn command_line_overrides_file() {
        let c = Config::from_sources(Some("port 7000\n# comment\nrequirepass \"pw\"\n"), &args("--port 7001 --bind 127.0.0.1 ::1")).unwrap();
        assert_eq!(c.get(crate::param!("port")), "7001");
        assert_eq!(c.get(crate::param!("bind")), "127.0.0.1 ::1");
        assert_eq!(c.requirepass().as_deref(), Some("pw"));
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("100mb"), Some(100 * 1024 * 1024));
        assert_eq!(parse_memory("4GB"), Some(4 * GB));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("12"), Some(12));
        assert_eq!(parse_memory("x"), None);
        // the unit's multiplication wraps, as Redis's memtoull
        assert_eq!(parse_memory("17179869184gb"), Some(0));
        let c = Config::from_sources(None, &args("--proto-max-bulk-len 2mb")).unwrap();
        assert_eq!(c.proto_max_bulk_len(), 2 * 1024 * 1024);
    }

    #[test]
    fn bad_values_are_refused_with_the_name() {
        let e = Config::from_sources(None, &args("--port 70000")).err().unwrap();
        assert!(e.contains("port"), "{e}");
        assert!(Config::from_sources(None, &args("--nosuch 1")).is_err());
        assert!(Config::from_sources(None, &args("port 1")).is_err());
    }

    #[test]
    fn hll_parameters() {
        let c = Config::default();
        let h = c.cmd_config().hll;
        assert_eq!((h.log2m, h.regwidth, h.expthresh, h.sparseon, h.max_log2m, h.sparse_max_bytes), (11, 5, -1, true, 17, 3000));
        let set = |n: &str, v: &str| c.set_many(&[(n.to_string(), v.to_string())]);
        set("hll-expthresh", "1024").unwrap();
        set("hll-sparseon", "0").unwrap();
        set("hll-sparse-max-bytes", "1kb").unwrap();
        let h = c.cmd_config().hll;
        assert_eq!((h.expthresh, h.sparseon, h.sparse_max_bytes), (1024, false, 1024));
        for bad in ["3", "-2", "524288", "x"] {
            assert!(set("hll-expthresh", bad).is_err(), "{bad}");
        }
        assert!(set("hll-log2m", "32").is_err());
        assert!(set("hll-sparseon", "2").is_err());
    }

    #[test]
    fn listpack_limits() {
        let c = Config::default();
        assert_eq!(c.cmd_config().set_limits, EncodingLimits::REDIS_DEFAULT);
        assert_eq!(c.cmd_config().hash_limits, EncodingLimits { max_listpack_entries: 512, max_listpack_value_bytes: 64 });
        assert_eq!(c.cmd_config().zset_limits, abacus_collections::ZSET_DEFAULT_LIMITS);
        c.set_many(&[("set-max-listpack-entries".into(), "4".into()), ("hash-max-listpack-value".into(), "1kb".into())]).unwrap();
        assert_eq!(c.cmd_config().set_limits.max_listpack_entries, 4);
        assert_eq!(c.cmd_config().hash_limits.max_listpack_value_bytes, 1024);
        assert!(c.set_many(&[("set-max-listpack-entries".into(), "-1".into())]).is_err());
    }

    #[test]
    fn eviction_parameters() {
        use abacus_keyspace::EvictionPolicy;
        let c = Config::default();
        let t = c.cmd_config().tracking();
        assert_eq!((t.policy, t.lfu_log_factor, t.lfu_decay_time_min), (EvictionPolicy::NoEviction, 10, 1));
        let set = |n: &str, v: &str| c.set_many(&[(n.to_string(), v.to_string())]);
        for &p in EvictionPolicy::ALL {
            set("maxmemory-policy", &p.name().to_uppercase()).unwrap();
            assert_eq!(c.cmd_config().eviction, p);
            assert_eq!(c.get(crate::param!("maxmemory-policy")), p.name());
        }
        set("lfu-log-factor", "0").unwrap();
        set("lfu-decay-time", "30").unwrap();
        let t = c.cmd_config().tracking();
        assert_eq!((t.lfu_log_factor, t.lfu_decay_time_min), (0, 30));
        assert!(set("lfu-log-factor", "-1").is_err());
        assert!(set("lfu-decay-time", "x").is_err());
        assert!(set("maxmemory-policy", "volatile-fifo").is_err());
    }

    #[test]
    fn output_buffer_limits_set_the_classes_named() {
        let c = Config::default();
        assert_eq!(c.pubsub_limit.get(), (32 << 20, 8 << 20, 60));
        let set = |v: &str| c.set_many(&[("client-output-buffer-limit".into(), v.into())]);
        set("PUBSUB 1mb 2k 5").unwrap();
        assert_eq!(c.get(crate::param!("client-output-buffer-limit")), "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2000 5");
        assert_eq!(c.pubsub_limit.get(), (1 << 20, 2000, 5));
        set("replica 1 2 3 normal 4 5 6").unwrap();
        assert_eq!(c.get(crate::param!("client-output-buffer-limit")), "normal 4 5 6 slave 1 2 3 pubsub 1048576 2000 5");
        set("").unwrap();
        assert_eq!(c.get(crate::param!("client-output-buffer-limit")), "normal 4 5 6 slave 1 2 3 pubsub 1048576 2000 5");
        for (bad, why) in [("pubsub 1 2", "Wrong number"), (" ", "Wrong number"), ("pubsub  1 2 3", "Wrong number"), ("master 1 2 3", "Invalid client class"), ("pubsub x 2 3", "Error in hard"), ("pubsub 1 2 -3", "Error in hard"), ("pubsub 1 2 3x", "Error in hard")] {
            let e = set(bad).unwrap_err();
            assert!(e.contains("(possibly related to argument 'client-output-buffer-limit') - ") && e.contains(why), "{bad}: {e}");
        }
        assert_eq!(c.pubsub_limit.get(), (1 << 20, 2000, 5));
        let c = Config::from_sources(Some("client-output-buffer-limit pubsub  10 20\t30\n"), &[]).unwrap();
        assert_eq!(c.pubsub_limit.get(), (10, 20, 30));
    }

    #[test]
    fn config_set_is_all_or_nothing() {
        let c = Config::default();
        let pairs = vec![("timeout".to_string(), "5".to_string()), ("port".to_string(), "1".to_string())];
        assert!(c.set_many(&pairs).unwrap_err().contains("immutable"));
        assert_eq!(c.timeout_s(), 0);
        c.set_many(&pairs[..1]).unwrap();
        assert_eq!(c.timeout_s(), 5);
        let got = c.get_matching(&[b"time*"]);
        assert_eq!(got, vec![("timeout", "5".to_string())]);
    }
}
