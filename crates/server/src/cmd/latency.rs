//! SLOWLOG and LATENCY, with Redis 7.0's replies and errors.
//!
//! The data lives elsewhere: in the engine's recorders (`Recorders::slowlog`,
//! `Recorders::latency`, reached through the connection's server; their types in
//! `slowlog.rs` and `latency.rs`), and the per-thread histograms next to INFO commandstats
//! in each shard's recorders (`stats.rs`). This file only parses the subcommands and shapes the replies. LATENCY
//! HISTOGRAM sends one job to every shard to collect its thread's histograms and merges them,
//! as INFO commandstats does.

use std::collections::BTreeMap;

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::Access;
use abacus_engine::latency::{self, Histogram, LatencyMonitor};
use abacus_engine::slowlog::SlowLog;

const S: &str = "server";
const NONE: (i32, i32, i32) = (0, 0, 0);

pub const COMMANDS: &[Spec] = &[
    Spec::conn("slowlog", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), S, "A container for slow log commands.").with_subcommands(SLOWLOG)
        .docs("2.2.12", "Depends on subcommand."),
    Spec::conn("latency", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), S, "A container for latency diagnostics commands.").with_subcommands(LATENCY)
        .docs("2.8.13", "Depends on subcommand."),
];

const SLOWLOG: &[Spec] = &[
    Spec::conn("slowlog|get", -2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| slowlog_get(slowlog(conn), &call.args)), S, "Returns the slow log's entries.")
        .docs("2.2.12", "O(N) where N is the number of entries returned")
        .history(&[("4.0.0", "Added client IP address, port and name to the reply.")])
        .tips("request_policy:all_nodes nondeterministic_output")
        .args("
            count type=integer flags=optional
        "),
    Spec::conn("slowlog|len", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| Frame::Integer(slowlog(conn).len() as i64)), S, "Returns the number of entries in the slow log.")
        .docs("2.2.12", "O(1)")
        .tips("request_policy:all_nodes response_policy:agg_sum nondeterministic_output"),
    Spec::conn("slowlog|reset", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| { slowlog(conn).reset(); Frame::ok() }), S, "Clears all entries from the slow log.")
        .docs("2.2.12", "O(N) where N is the number of entries in the slowlog")
        .tips("request_policy:all_nodes response_policy:all_succeeded"),
    Spec::conn("slowlog|help", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| help(SLOWLOG_HELP)), S, "Show helpful text about the different subcommands")
        .docs("6.2.0", "O(1)"),
];

const LATENCY: &[Spec] = &[
    Spec::conn("latency|latest", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| latest(monitor(conn))), S, "Returns the latest latency samples for all events.")
        .docs("2.8.13", "O(1)")
        .tips("nondeterministic_output request_policy:all_nodes response_policy:special")
        .noscript(),
    Spec::conn("latency|history", 3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| history(monitor(conn), &call.args[2])), S, "Returns timestamp-latency samples for an event.")
        .docs("2.8.13", "O(1)")
        .tips("nondeterministic_output request_policy:all_nodes response_policy:special")
        .noscript()
        .args("
            event type=string
        "),
    Spec::conn("latency|reset", -2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| reset(monitor(conn), &call.args)), S, "Resets the latency data for one or more events.")
        .docs("2.8.13", "O(1)")
        .tips("request_policy:all_nodes response_policy:all_succeeded")
        .noscript()
        .args("
            event type=string flags=optional,multiple
        "),
    Spec::conn("latency|doctor", 2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, _| verbatim(monitor(conn).doctor())), S, "Returns a human-readable latency analysis report.")
        .docs("2.8.13", "O(1)")
        .tips("nondeterministic_output request_policy:all_nodes response_policy:special")
        .noscript(),
    Spec::conn("latency|graph", 3, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, _, call| graph(monitor(conn), &call.args[2])), S, "Returns a latency graph for an event.")
        .docs("2.8.13", "O(1)")
        .tips("nondeterministic_output request_policy:all_nodes response_policy:special")
        .noscript()
        .args("
            event type=string
        "),
    Spec::conn("latency|histogram", -2, ADMIN | LOADING | STALE, NONE, conn_fn!(|conn, access, call| histogram(conn, access, &call.args).await), S, "Returns the cumulative distribution of latencies of a subset or all commands.")
        .docs("7.0.0", "O(N) where N is the number of commands with latency information being retrieved.")
        .tips("nondeterministic_output request_policy:all_nodes response_policy:special")
        .noscript()
        .args("
            command type=string flags=optional,multiple
        "),
    Spec::conn("latency|help", 2, LOADING | STALE, NONE, conn_fn!(|_, _, _| help(LATENCY_HELP)), S, "Returns helpful text about the different subcommands.")
        .docs("2.8.13", "O(1)"),
];

const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

const LATENCY_HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

fn help(lines: &[&'static str]) -> Frame {
    Frame::Array(lines.iter().map(|l| Frame::Simple(Bytes::from_static(l.as_bytes()))).collect())
}

/// The engine's slow log and latency monitor.
fn slowlog(conn: &Conn) -> &SlowLog {
    &conn.worker.server.recorders.slowlog
}

fn monitor(conn: &Conn) -> &LatencyMonitor {
    &conn.worker.server.recorders.latency
}

fn verbatim(text: String) -> Frame {
    Frame::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

/// SLOWLOG GET [count]: 10 by default, -1 for all.
fn slowlog_get(slowlog: &SlowLog, a: &[Arg]) -> Frame {
    const ERR_COUNT: &str = "ERR count should be greater than or equal to -1";
    let count = match a.get(2) {
        None => 10,
        Some(c) => match parse_i64(c) {
            Ok(-1) => usize::MAX,
            Ok(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => return err(ERR_COUNT),
        },
    };
    if a.len() > 3 {
        return err("ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.");
    }
    slowlog.get(count)
}

/// LATENCY LATEST: per event, [name, time of the latest sample, its latency, the maximum].
fn latest(monitor: &LatencyMonitor) -> Frame {
    Frame::Array(
        monitor.events()
            .into_iter()
            .filter_map(|(name, e)| {
                let last = e.samples.back()?;
                Some(Frame::Array(vec![
                    Frame::Bulk(Bytes::from_static(name.as_bytes())),
                    Frame::Integer(last.0 as i64),
                    Frame::Integer(last.1.min(i64::MAX as u64) as i64),
                    Frame::Integer(e.max_ms.min(i64::MAX as u64) as i64),
                ]))
            })
            .collect(),
    )
}

/// LATENCY HISTORY event: [time, latency] per sample, oldest first; empty for an unknown event.
fn history(monitor: &LatencyMonitor, event: &[u8]) -> Frame {
    let events = monitor.events();
    let Some((_, e)) = events.iter().find(|(n, _)| n.as_bytes() == event) else {
        return Frame::Array(Vec::new());
    };
    Frame::Array(e.samples.iter().map(|(t, ms)| Frame::Array(vec![Frame::Integer(*t as i64), Frame::Integer((*ms).min(i64::MAX as u64) as i64)])).collect())
}

fn reset(monitor: &LatencyMonitor, a: &[Arg]) -> Frame {
    let names: Vec<&[u8]> = a[2..].iter().map(|x| &x[..]).collect();
    Frame::Integer(monitor.reset(&names) as i64)
}

fn graph(monitor: &LatencyMonitor, event: &[u8]) -> Frame {
    let events = monitor.events();
    match events.iter().find(|(n, _)| n.as_bytes() == event) {
        Some((name, e)) => verbatim(latency::graph(name, e)),
        None => err_quoting("ERR No samples available for event '", event, "'"),
    }
}

/// LATENCY HISTOGRAM [command ...]: per command (all that ran when none is named), its calls
/// and the cumulative distribution of its latencies in powers of two of microseconds.
async fn histogram(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let Some(per_shard) = conn.worker.run_all(access, |s| s.rec.commands.histograms()).await else {
        return Frame::error("ERR server is shutting down");
    };
    let merged = merge(per_shard);
    let wanted = |name: &str| {
        a.len() == 2
            || a[2..].iter().any(|w| {
                let w = String::from_utf8_lossy(w).to_ascii_lowercase();
                // A container's name covers its subcommands, as Redis's.
                name == w || name.strip_prefix(w.as_str()).is_some_and(|rest| rest.starts_with('|'))
            })
    };
    Frame::Map(
        merged
            .iter()
            .filter(|(name, h)| h.total > 0 && wanted(name))
            .map(|(name, h)| {
                let cdf = h.cumulative_usec().into_iter().map(|(us, n)| (Frame::Integer(us as i64), Frame::Integer(n as i64))).collect();
                (
                    Frame::Bulk(Bytes::from_static(name.as_bytes())),
                    Frame::Map(vec![
                        (Frame::Bulk(Bytes::from_static(b"calls")), Frame::Integer(h.total as i64)),
                        (Frame::Bulk(Bytes::from_static(b"histogram_usec")), Frame::Map(cdf)),
                    ]),
                )
            })
            .collect(),
    )
}

/// Merges the threads' histograms by command.
pub fn merge(per_shard: Vec<Vec<(&'static str, Histogram)>>) -> BTreeMap<&'static str, Histogram> {
    let mut merged: BTreeMap<&'static str, Histogram> = BTreeMap::new();
    for shard in per_shard {
        for (name, h) in shard {
            match merged.get_mut(name) {
                Some(m) => m.merge(&h),
                None => {
                    merged.insert(name, h);
                }
            }
        }
    }
    merged
}
