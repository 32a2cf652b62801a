//! The exporter's in-process sources (`abacus_export::Source`), so the layout writers of
//! `abacus-export` serve every form of the export without a second copy of any layout:
//!
//! - `offline.rs`: a stopped server's data directory loaded read-only (`abacus export --dir`);
//! - `live.rs`: this server's own keyspace, read from a background thread by the EXPORT
//!   command (`cmd/export.rs`) into a file under `export-dir`.
//!
//! Both run the layouts' per-key reads (XRANGE, HGETALL, TS.RANGE, ...) through [`run_read`]:
//! the command table's own entries on the shard that owns the key, replies encoded as RESP2
//! and parsed back by the exporter's parser (`abacus_export::Replies`), so a key reads the
//! same whichever way it is exported. Only read-only keyed entries run; anything else is an
//! error reply (a source can never write).

pub mod live;
pub mod offline;
pub mod progress;

use abacus_engine::aof::ShardLog;
use abacus_engine::config::CmdConfig;
use abacus_engine::exec::exec_keyed_untimed;
use abacus_keyspace::Db;
use abacus_protocol::{Args, Frame};

use crate::command::flags::READONLY;
use crate::command::{Handler, Spec};

/// The entry of a read the exporter may run, or the error reply refusing it.
pub fn read_spec(args: &Args) -> Result<&'static Spec, Frame> {
    let Some(spec) = crate::command::lookup_call(args) else { return Err(Frame::error("ERR unknown command")) };
    let arity_ok = if spec.arity >= 0 { args.len() == spec.arity as usize } else { args.len() >= spec.arity.unsigned_abs() as usize };
    if !matches!(spec.handler, Handler::Keyed(_)) || spec.flags & READONLY == 0 || !arity_ok {
        return Err(Frame::error(format!("ERR '{}' is not a keyed read the exporter runs", spec.name)));
    }
    Ok(spec)
}

/// Runs one read command of database 0 on the shard holding its key (`dbs`, `log` are that
/// shard's; a read logs nothing).
pub fn run_read(dbs: &mut [Db], log: &mut ShardLog, spec: &'static Spec, args: &Args, now_ms: u64, cfg: CmdConfig) -> Frame {
    exec_keyed_untimed(dbs, log, 0, spec, args, now_ms, cfg)
}

/// The shard owning a read's key.
pub fn shard_of_read(spec: &'static Spec, args: &Args, shards: usize) -> usize {
    abacus_engine::exec::command_keys(spec, args, 0).first().map_or(0, |(_, k)| abacus_engine::shard::shard_of(k, shards))
}
