//! The recorders: what the engine counts and keeps about the commands it runs — error
//! replies (INFO errorstats), the loading progress, the slow log and the latency monitor —
//! as values built once at start, not statics.
//!
//! Two parts, by who writes them:
//! - [`Recorders`]: shared by every thread, one per engine (`Engine::recorders`). Its
//!   recorders are written rarely (an error reply, a command past a threshold, a stall), so
//!   each keeps a lock or atomics of its own. Their settings (`slowlog-log-slower-than`,
//!   `slowlog-max-len`, `latency-monitor-threshold`, `latency-tracking`) are atomics inside
//!   them, set from the configuration when the engine is built and after every CONFIG SET
//!   ([`Recorders::configure`]): the threads that read them (a shard's, the log's fsync
//!   thread) hold this value, not the configuration.
//! - [`ShardRecorders`]: one per shard, that is per worker thread (`Shard::rec`): INFO
//!   commandstats' table and latency histograms, which only that thread writes (no atomics,
//!   no lock, no thread-local: the shard is at hand wherever a command runs), the client of
//!   the keyed command running on it (for the slow log's entries), and a handle to the
//!   shared part. Readers (INFO, LATENCY HISTOGRAM, the metrics, CONFIG RESETSTAT) send a
//!   job to every shard and merge.
//!
//! Two engines in one process (tests) count apart.

use std::sync::Arc;
use std::time::Duration;

use abacus_commands::command::Spec;
use abacus_protocol::Arg;

use crate::config::Config;
use crate::latency::LatencyMonitor;
use crate::slowlog::{ClientLabel, SlowLog};
use crate::stats::{CommandStats, ErrorStats, Loading};

/// The engine-wide recorders (see the file comment).
#[derive(Default)]
pub struct Recorders {
    /// Error replies by code (INFO errorstats, `total_error_replies`).
    pub errors: ErrorStats,
    /// Progress of loading the data at start (INFO persistence, -LOADING).
    pub loading: Loading,
    pub slowlog: SlowLog,
    pub latency: LatencyMonitor,
}

impl Recorders {
    /// The recorders with `config`'s settings.
    pub fn new(config: &Config) -> Arc<Recorders> {
        let r = Arc::new(Recorders::default());
        r.configure(config);
        r
    }

    /// Takes the settings from `config`: at start, and after every CONFIG SET (a lowered
    /// `slowlog-max-len` trims the log at once, as Redis's CONFIG SET does).
    pub fn configure(&self, c: &Config) {
        use crate::config::*;
        self.latency.configure(c.flag(LATENCY_TRACKING), c.num(LATENCY_MONITOR_THRESHOLD));
        self.slowlog.configure(c.num(SLOWLOG_LOG_SLOWER_THAN) as i64, c.num(SLOWLOG_MAX_LEN));
    }

    /// Whether commands must be timed one by one: the slow log or the latency monitor is on.
    #[inline]
    pub fn timing_each(&self) -> bool {
        self.slowlog.enabled() || self.latency.threshold_ms() > 0
    }

    /// The shortest duration, in microseconds, that the slow log or the latency monitor
    /// records (a command must take at least this long to be seen by either); `None` when
    /// both are off.
    #[inline]
    pub fn threshold_us(&self) -> Option<u64> {
        crate::slowlog::lower_threshold_us(self.slowlog.threshold_us_setting(), self.latency.threshold_ms())
    }

    /// What follows every timed command: the slow log and the latency monitor's `command` /
    /// `fast-command` events (Redis's `call()`). `client` names the client when at hand,
    /// else it is looked up by `client_id` (0 = unknown) if the command is logged.
    #[inline]
    pub fn observe(&self, spec: &Spec, took: Duration, args: &[Arg], client: Option<&dyn Fn() -> ClientLabel>, client_id: u64) {
        self.slowlog.check(took, args, client, client_id);
        if self.latency.threshold_ms() > 0 {
            let event = if spec.has(abacus_commands::command::flags::FAST) { "fast-command" } else { "command" };
            self.latency.sample_duration(event, took);
        }
    }
}

/// A shard's recorders (see the file comment): its thread's command table and the shared
/// recorders (through `Deref`).
pub struct ShardRecorders {
    pub commands: CommandStats,
    /// The client whose keyed command this shard runs (0 = unknown), for the slow log's
    /// entries of commands timed where only the arguments reach (`exec::exec_keyed`); set
    /// around each such command by its caller.
    pub client: u64,
    shared: Arc<Recorders>,
}

impl ShardRecorders {
    pub fn new(shared: Arc<Recorders>) -> ShardRecorders {
        ShardRecorders { commands: CommandStats::default(), client: 0, shared }
    }

    /// The shared recorders.
    pub fn shared(&self) -> &Arc<Recorders> {
        &self.shared
    }

    /// Sets the client of the keyed commands this shard runs next; returns the previous one.
    #[inline]
    pub fn set_client(&mut self, id: u64) -> u64 {
        std::mem::replace(&mut self.client, id)
    }

    /// Counts `calls` executions of `name` that took `took` together, `failed` of them with
    /// an error (see `CommandStats::record_many`).
    #[inline]
    pub fn record_many(&mut self, name: &'static str, calls: u64, took: Duration, failed: u64) {
        let tracking = self.shared.latency.tracking();
        self.commands.record_many(name, calls, took, failed, tracking);
    }

    /// Counts one execution of `name`.
    #[inline]
    pub fn record(&mut self, name: &'static str, took: Duration, failed: bool) {
        self.record_many(name, 1, took, u64::from(failed));
    }

    /// A command timed alone: counted, then offered to the slow log and the latency monitor
    /// as a command of this shard's current client.
    #[inline]
    pub fn timed(&mut self, spec: &'static Spec, took: Duration, args: &[Arg], failed: bool) {
        self.record(spec.name, took, failed);
        let client = self.client;
        self.shared.observe(spec, took, args, None, client);
    }
}

impl std::ops::Deref for ShardRecorders {
    type Target = Recorders;

    fn deref(&self) -> &Recorders {
        &self.shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&'static [u8]]) -> abacus_protocol::Args {
        abacus_protocol::Args::from_vec(v.iter().map(|a| abacus_protocol::Bytes::from_static(a)).collect())
    }

    #[test]
    fn two_engines_count_apart_and_take_their_settings() {
        let config = Config::from_sources(None, &["--slowlog-log-slower-than".into(), "0".into(), "--slowlog-max-len".into(), "2".into()]).expect("config");
        let (a, b) = (Recorders::new(&config), Arc::new(Recorders::default()));
        assert_eq!(a.threshold_us(), Some(0));
        assert_eq!(b.threshold_us(), Some(10_000));
        a.slowlog.set_client_lookup(Box::new(|id| Some((format!("addr{id}"), String::new()))));
        let mut shard = ShardRecorders::new(a.clone());
        let spec: &'static Spec = &abacus_commands::keys::DEL;
        shard.set_client(7);
        for _ in 0..3 {
            shard.timed(spec, Duration::from_micros(5), &args(&[b"del", b"k"]), false);
        }
        // The newest two (slowlog-max-len), named by the shard's client.
        assert_eq!(a.slowlog.len(), 2);
        assert_eq!(b.slowlog.len(), 0);
        let abacus_protocol::Frame::Array(entries) = a.slowlog.get(10) else { panic!("not an array") };
        let abacus_protocol::Frame::Array(first) = &entries[0] else { panic!("not an entry") };
        assert_eq!(first[4], abacus_protocol::Frame::Bulk(abacus_protocol::Bytes::from_static(b"addr7")));
        assert_eq!(shard.commands.snapshot()["del"].calls, 3);
        assert_eq!(shard.commands.calls_total(), 3);
        // A lowered length trims at once.
        let config = Config::from_sources(None, &["--slowlog-max-len".into(), "1".into()]).expect("config");
        a.configure(&config);
        assert_eq!(a.slowlog.len(), 1);
        assert_eq!(a.threshold_us(), Some(10_000));
        shard.commands.reset();
        assert!(shard.commands.snapshot().is_empty());
        assert_eq!(shard.commands.calls_total(), 3);
    }
}
