//! Running a keyed handler outside a server, for this crate's tests (and tools): the
//! [`Ctx`] the server would build with Redis's default configuration, database 0, hooks
//! that free in place ([`Hooks::INLINE`]). The server's own runner (`exec::run_handler`)
//! adds what needs it: the log, WATCH signals, eviction, blocked clients, notifications'
//! publishing. The server's tests check that these defaults are its configuration's.

use abacus_collections::{EncodingLimits, ListLimits, StreamLimits};
use abacus_keyspace::Db;
use abacus_protocol::{Arg, Args, Bytes, Frame};

use crate::command::{Handler, Spec};
use crate::config::HllConfig;
use crate::ctx::{Ctx, Effect, Hooks, KeysModified};

/// The limits handlers see under Redis's (and Abacus's) default configuration.
pub struct Defaults {
    pub max_string_len: u64,
    pub hll: HllConfig,
    pub set_limits: EncodingLimits,
    pub hash_limits: EncodingLimits,
    pub list_limits: ListLimits,
    pub zset_limits: EncodingLimits,
    pub stream_limits: StreamLimits,
}

/// proto-max-bulk-len 512 MiB, set- and zset-max-listpack 128 entries of 64 bytes,
/// hash-max-listpack 512 of 64, list-max-listpack-size -2, stream nodes 4096 bytes / 100
/// entries: the defaults of `abacus_engine::config`.
pub fn defaults() -> Defaults {
    Defaults {
        max_string_len: 512 * 1024 * 1024,
        hll: HllConfig::default(),
        set_limits: EncodingLimits { max_listpack_entries: 128, max_listpack_value_bytes: 64 },
        hash_limits: EncodingLimits { max_listpack_entries: 512, max_listpack_value_bytes: 64 },
        list_limits: ListLimits::from_fill(-2),
        zset_limits: EncodingLimits { max_listpack_entries: 128, max_listpack_value_bytes: 64 },
        stream_limits: StreamLimits { node_max_bytes: 4096, node_max_entries: 100 },
    }
}

/// Runs one keyed command (subcommand resolved) on `dbs`, database 0, at time 1 ms: its
/// reply. Panics on an unknown or connection-level command (a test's mistake).
pub fn run_args(dbs: &mut [Db], args: &[Arg]) -> Frame {
    run_at(dbs, args, 1).0
}

/// [`run_args`] at `now_ms`: the reply and the effect the handler stated.
pub fn run_at(dbs: &mut [Db], args: &[Arg], now_ms: u64) -> (Frame, Effect) {
    let mut spec: &Spec = crate::command::lookup(&args[0]).expect("a command of this crate");
    if !spec.subcommands.is_empty() {
        spec = args.get(1).and_then(|sub| spec.subcommand(sub)).expect("a known subcommand");
    }
    run_spec_at(dbs, spec, args, now_ms)
}

/// Runs `spec`'s keyed handler on `args` as [`run_at`] does: for an entry this crate's table
/// does not hold by name (MEMORY USAGE, a subcommand of the server's MEMORY).
pub fn run_spec_at(dbs: &mut [Db], spec: &Spec, args: &[Arg], now_ms: u64) -> (Frame, Effect) {
    let Handler::Keyed(f) = spec.handler else { panic!("{} is not a keyed command", spec.name) };
    let d = defaults();
    let mut ctx = Ctx {
        dbs,
        db: 0,
        now_ms,
        max_string_len: d.max_string_len,
        hll: d.hll,
        set_limits: d.set_limits,
        hash_limits: d.hash_limits,
        list_limits: d.list_limits,
        zset_limits: d.zset_limits,
        stream_limits: d.stream_limits,
        effect: if spec.is_write() { Effect::Args } else { Effect::Nothing },
        modified: KeysModified::ALL,
        notify_flags: 0,
        events: Vec::new(),
        events_said: false,
        hooks: &Hooks::INLINE,
    };
    let reply = f(&mut ctx, args);
    (reply, ctx.effect)
}

/// [`run_args`] from byte strings.
pub fn run_keyed(dbs: &mut [Db], args: &[&[u8]]) -> Frame {
    let args = Args::from_vec(args.iter().map(|a| Bytes::copy_from_slice(a)).collect());
    run_args(dbs, &args)
}

/// [`run_spec_at`] from byte strings, at time 1 ms: the reply.
pub fn run_spec(dbs: &mut [Db], spec: &Spec, args: &[&[u8]]) -> Frame {
    let args = Args::from_vec(args.iter().map(|a| Bytes::copy_from_slice(a)).collect());
    run_spec_at(dbs, spec, &args, 1).0
}
