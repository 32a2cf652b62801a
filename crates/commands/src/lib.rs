//! Abacus's data command families: the keyed handlers of strings, keys, expiry, bits and
//! BITOP/BITFIELD, hashes, sets and their algebra, lists, sorted sets and their algebra, the
//! blocking pops of both (`blocking.rs`: the non-blocking forms the server's waits run), geo,
//! streams, HLL.* and PF*, DUMP/RESTORE (`dump.rs`, with the value codec between the keyspace
//! and `abacus-rdb`), MEMORY USAGE (`memory.rs`, an entry of the server's MEMORY container),
//! the one-series time-series commands (`timeseries.rs`: TS.CREATE, TS.ADD, TS.RANGE...,
//! with `ts_range.rs`'s range options and aggregation), with their table entries ([`command::Spec`]); and the per-shard jobs of
//! connection-level commands, SORT (`sort.rs`), ATTRIBUTE (`attribute.rs`) and the
//! multi-series time-series commands (`ts_filter.rs`: FILTER and the rows of TS.MGET,
//! TS.MRANGE, TS.QUERYINDEX; `ts_waterfall.rs`: TS.WATERFALL's groups) and of the summarizer's
//! (`summary_shard.rs`: SUMMARY.QUERY's fold, a source's record, a stream entry's ID), whose
//! fan-outs and merges are the server's.
//!
//! Why a crate of its own, below the network layer: a handler is a plain function over one
//! shard's databases ([`ctx::Ctx`]), so the families need the keyspace and the data
//! structures, never sockets, threads, tokio or the server. Kept apart, they build and test
//! alone (`cargo test -p abacus-commands`), the server cannot creep into them, and a new
//! family starts here with nothing to wire but its table.
//!
//! Layers (each points down only):
//! - `abacus-protocol`, `abacus-collections`, `abacus-hll`, `abacus-redis-hll`, `abacus-int`,
//!   `abacus-rdb`, `abacus-summarizer` (rules, events, groups): the codecs and the data
//!   structures;
//! - `abacus-keyspace`: databases, entries, expiry;
//! - this crate: the command entry ([`command`]), the handler's context and the effects it
//!   states ([`ctx`]), keyspace-event recording ([`notify`]), argument parsing ([`args`]),
//!   and one file per family;
//! - `abacus-server`: connections, worker threads and shards, routing, transactions, the log
//!   and snapshots, the connection-level and server commands; it builds the one command
//!   table from [`FAMILIES`] and its own, builds each handler's [`ctx::Ctx`] (with the
//!   [`ctx::Hooks`] through which handlers reach it) and writes the effects they state.
//!
//! What it is not: the dispatcher, the log, pub/sub publishing, blocking waits (the server's),
//! nor commands that visit every shard or coordinate several (KEYS, SCAN, SORT, ATTRIBUTE,
//! MEMORY STATS, TS.MGET..., the fan-outs: the server's `cmd/`, which calls the per-shard
//! parts here).
//!
//! Entries other code names: where the server must recognise one command it names that
//! family's `pub const` entry (`keys::TOUCH`, `keys::COPY`, `keys::DEL`, `expiry::PTTL`,
//! `dump::DUMP`, `hashes::HSET`, `streams::XADD`, `memory::USAGE`) or tests a flag
//! (`TX_BEGIN`, `TX_END`, `REPLICATION_LINK`), never a name string.

#![forbid(unsafe_code)]

pub mod args;
pub mod command;
pub mod config;
pub mod ctx;
pub mod ldouble;
pub mod notify;
pub mod testing;

pub mod attribute;
pub mod bitops;
pub mod blocking;
pub mod bits;
pub mod dump;
pub mod expiry;
pub mod geo;
pub mod hashes;
pub mod hll;
pub mod keys;
pub mod lists;
pub mod memory;
pub mod pf;
pub mod set_algebra;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod summary_shard;
pub mod timeseries;
pub mod ts_filter;
pub mod ts_links;
pub mod ts_range;
pub mod ts_waterfall;
pub mod zset_algebra;
pub mod zsets;

use command::Spec;

/// This crate's families' tables; the server's table is these and its own.
pub const FAMILIES: &[&[Spec]] = &[
    strings::COMMANDS,
    bits::COMMANDS,
    bitops::COMMANDS,
    keys::COMMANDS,
    expiry::COMMANDS,
    hll::COMMANDS,
    pf::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    set_algebra::COMMANDS,
    lists::COMMANDS,
    blocking::COMMANDS,
    zsets::COMMANDS,
    zset_algebra::COMMANDS,
    geo::COMMANDS,
    streams::COMMANDS,
    dump::COMMANDS,
    timeseries::COMMANDS,
];
