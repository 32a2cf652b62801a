//! The summarizer's data plane without I/O: rules files, feed lines to events, events to
//! summary updates, and the merge of stored summaries for queries.
//!
//! What this crate is for: turning the text a user writes (a TOML rules file, CSV and JSON
//! lines) into plain values the server applies to its keys, and nothing else. A rules file
//! ([`Rules::parse`]) names feeds (how to read a line: CSV columns or JSON paths, where the
//! time is) and summaries (which feed, a `where` filter, dimensions, a time bucket, metrics).
//! A batch of lines ([`Batch::add_payload`]) becomes, per summary key, the aggregated change
//! the batch makes to it: counters and sums added, minima and maxima, the last value, HLL
//! hashes, distinct members. The server applies those on the shard owning each key and logs
//! them as ordinary commands, so the log, snapshots and replicas see plain writes.
//!
//! What it is not: it opens no file and no socket, knows nothing of shards or the keyspace,
//! and keeps no state between batches (the server counts rejects and rates).
//!
//! Keys (see `keys.rs`): a summary's hash is `name:dim1:dim2:bucket` (the bucket is its start,
//! in Unix seconds, left out for `bucket = "none"`), an `hll(...)` or `distinct(...)` metric
//! is that key followed by `:metric`. A `:` or `%` inside a dimension value is escaped as
//! `%3A` / `%25`, so a key always splits back into its parts.
#![forbid(unsafe_code)]

mod batch;
mod event;
mod filter;
mod json;
mod keys;
mod query;
mod rules;
mod timefmt;

pub use batch::{fmt_f64, incr_number, keeps_extreme, write_f64, write_number, Acc, Batch, KeyChange, Members, Packed, Part, Reject, Slot, StreamAppend};
pub use event::{parse_line, parse_line_into, split_csv, Event, JsonPath, LineError};
pub use filter::{Expr, FilterError};
pub use keys::{escape, parse_key, summary_key, KeyParts};
pub use query::{Cell, Group, GroupBy, Query, QueryError};
pub use rules::{parse_duration_ms, Bucket, Feed, Format, HllOptions, Metric, MetricKind, Rules, RulesError, StreamRule, Summary, TemplatePart, TimeSource, Unit};

pub use timefmt::TimeFormat;

#[cfg(test)]
mod tests;
