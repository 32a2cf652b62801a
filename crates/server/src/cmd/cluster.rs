//! The cluster family: CLUSTER and its subcommands, ASKING, READONLY, READWRITE, with Redis
//! 7.0's replies and errors. Thin handlers over `abacus_cluster` (the view and its rules, in
//! `Cluster`'s methods) and `crate::cluster` (the view as the server holds it); with
//! `cluster-enabled no` every CLUSTER subcommand answers Redis's "This instance has cluster
//! support disabled" (KEYSLOT and HELP too, as Redis).

use abacus_cluster::commands::SetSlot;
use abacus_cluster::nodes_conf;
use abacus_cluster::{Cluster, FailoverMode};
use abacus_cluster_bus::{key_hash_slot, node_flags, NodeName, SLOTS};
use abacus_engine::exec::Access;
use abacus_protocol::{Arg, Bytes, Frame, Protocol};

use super::args::*;
use crate::command::flags::*;
use crate::cluster::{endpoint, endpoint_type, Endpoint};
use crate::command::Spec;
use crate::conn::Conn;

const G: &str = "cluster";
const NONE: (i32, i32, i32) = (0, 0, 0);

#[derive(Clone, Copy)]
enum Sub {
    AddSlots,
    AddSlotsRange,
    BumpEpoch,
    CountFailureReports,
    CountKeysInSlot,
    DelSlots,
    DelSlotsRange,
    Failover,
    FlushSlots,
    Forget,
    GetKeysInSlot,
    Help,
    Info,
    KeySlot,
    Links,
    Meet,
    MyId,
    Nodes,
    Replicas,
    Replicate,
    Reset,
    SaveConfig,
    SetConfigEpoch,
    SetSlot,
    Shards,
    Slots,
}

macro_rules! sub {
    ($name:literal, $arity:expr, $flags:expr, $sub:ident, $summary:literal) => {
        Spec::conn($name, $arity, $flags, NONE, conn_fn!(|conn, access, call| cluster(conn, access, &call.args, Sub::$sub).await), G, $summary)
    };
}

pub const COMMANDS: &[Spec] = &[
    Spec::conn("cluster", -2, 0, NONE, conn_fn!(|_, _, _| crate::conn::container()), G, "A container for Redis Cluster commands.")
        .with_subcommands(CLUSTER)
        .docs("3.0.0", "Depends on subcommand."),
    Spec::conn("asking", 1, FAST | ACL_CONNECTION, NONE, conn_fn!(|conn, _, _| asking(conn)), G, "Signals that a cluster client is following an -ASK redirect.").docs("3.0.0", "O(1)"),
    Spec::conn("readonly", 1, LOADING | STALE | FAST | ACL_CONNECTION, NONE, conn_fn!(|conn, _, _| readonly(conn, true)), G, "Enables read-only queries for a connection to a Redis Cluster replica node.").docs("3.0.0", "O(1)"),
    Spec::conn("abacus.local", 1, LOADING | STALE | FAST | ACL_CONNECTION, NONE, conn_fn!(|conn, _, _| local_only(conn)), G, "Makes this connection's multi-series commands answer with this node's data only: the connection a node uses to gather a cluster-wide answer (not a Redis command).").docs("7.0.0", "O(1)"),
    Spec::conn("readwrite", 1, LOADING | STALE | FAST | ACL_CONNECTION, NONE, conn_fn!(|conn, _, _| readonly(conn, false)), G, "Enables read-write queries for a connection to a Redis Cluster replica node.").docs("3.0.0", "O(1)"),
];

const CLUSTER: &[Spec] = &[
    sub!("cluster|addslots", -3, ADMIN | STALE, AddSlots, "Assigns new hash slots to a node.")
        .docs("3.0.0", "O(N) where N is the total number of hash slot arguments")
        .no_async_loading()
        .args("
            slot type=integer flags=multiple
        "),
    sub!("cluster|addslotsrange", -4, ADMIN | STALE, AddSlotsRange, "Assigns new hash slot ranges to a node.")
        .docs("7.0.0", "O(N) where N is the total number of the slots between the start slot and end slot arguments.")
        .no_async_loading()
        .args("
            start-slot_end-slot type=block flags=multiple
              start-slot type=integer
              end-slot type=integer
        "),
    sub!("cluster|bumpepoch", 2, ADMIN | STALE, BumpEpoch, "Advances the cluster config epoch.").docs("3.0.0", "O(1)").no_async_loading().tips("nondeterministic_output"),
    sub!("cluster|count-failure-reports", 3, ADMIN | STALE, CountFailureReports, "Returns the number of active failure reports active for a node.")
        .docs("3.0.0", "O(N) where N is the number of failure reports")
        .tips("nondeterministic_output")
        .args("
            node-id type=string
        "),
    sub!("cluster|countkeysinslot", 3, STALE, CountKeysInSlot, "Returns the number of keys in a hash slot.").docs("3.0.0", "O(1)").args("
            slot type=integer
        "),
    sub!("cluster|delslots", -3, ADMIN | STALE, DelSlots, "Sets hash slots as unbound for a node.")
        .docs("3.0.0", "O(N) where N is the total number of hash slot arguments")
        .no_async_loading()
        .args("
            slot type=integer flags=multiple
        "),
    sub!("cluster|delslotsrange", -4, ADMIN | STALE, DelSlotsRange, "Sets hash slot ranges as unbound for a node.")
        .docs("7.0.0", "O(N) where N is the total number of the slots between the start slot and end slot arguments.")
        .no_async_loading()
        .args("
            start-slot_end-slot type=block flags=multiple
              start-slot type=integer
              end-slot type=integer
        "),
    sub!("cluster|failover", -2, ADMIN | STALE, Failover, "Forces a replica to perform a manual failover of its master.")
        .docs("3.0.0", "O(1)")
        .no_async_loading()
        .args("
            options type=oneof flags=optional
              force type=pure-token token=FORCE
              takeover type=pure-token token=TAKEOVER
        "),
    sub!("cluster|flushslots", 2, ADMIN | STALE, FlushSlots, "Deletes all slots information from a node.").docs("3.0.0", "O(1)").no_async_loading(),
    sub!("cluster|forget", 3, ADMIN | STALE, Forget, "Removes a node from the nodes table.").docs("3.0.0", "O(1)").no_async_loading().args("
            node-id type=string
        "),
    sub!("cluster|getkeysinslot", 4, STALE, GetKeysInSlot, "Returns the key names in a hash slot.")
        .docs("3.0.0", "O(log(N)) where N is the number of requested keys")
        .tips("nondeterministic_output")
        .args("
            slot type=integer
            count type=integer
        "),
    sub!("cluster|help", 2, LOADING | STALE, Help, "Returns helpful text about the different subcommands.").docs("5.0.0", "O(1)"),
    sub!("cluster|info", 2, STALE, Info, "Returns information about the state of a node.").docs("3.0.0", "O(1)").tips("nondeterministic_output"),
    sub!("cluster|keyslot", 3, STALE, KeySlot, "Returns the hash slot for a key.").docs("3.0.0", "O(N) where N is the number of bytes in the key").args("
            key type=string
        "),
    sub!("cluster|links", 2, STALE, Links, "Returns a list of all TCP links to and from peer nodes.").docs("7.0.0", "O(N) where N is the total number of Cluster nodes").tips("nondeterministic_output"),
    sub!("cluster|meet", -4, ADMIN | STALE, Meet, "Forces a node to handshake with another node.")
        .docs("3.0.0", "O(1)")
        .no_async_loading()
        .history(&[("4.0.0", "Added the optional `cluster_bus_port` argument.")])
        .args("
            ip type=string
            port type=integer
            cluster_bus_port type=integer since=4.0.0 flags=optional
        "),
    sub!("cluster|myid", 2, STALE, MyId, "Returns the ID of a node.").docs("3.0.0", "O(1)"),
    sub!("cluster|nodes", 2, STALE, Nodes, "Returns the cluster configuration for a node.").docs("3.0.0", "O(N) where N is the total number of Cluster nodes").tips("nondeterministic_output"),
    sub!("cluster|replicas", 3, ADMIN | STALE, Replicas, "Lists the replica nodes of a master node.")
        .docs("5.0.0", "O(1)")
        .tips("nondeterministic_output")
        .args("
            node-id type=string
        "),
    sub!("cluster|replicate", 3, ADMIN | STALE, Replicate, "Configure a node as replica of a master node.").docs("3.0.0", "O(1)").no_async_loading().args("
            node-id type=string
        "),
    sub!("cluster|reset", -2, ADMIN | STALE, Reset, "Resets a node.")
        .docs("3.0.0", "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.")
        .noscript()
        .args("
            hard_soft type=oneof flags=optional
              hard type=pure-token token=HARD
              soft type=pure-token token=SOFT
        "),
    sub!("cluster|saveconfig", 2, ADMIN | STALE, SaveConfig, "Forces a node to save the cluster configuration to disk.").docs("3.0.0", "O(1)").no_async_loading(),
    sub!("cluster|set-config-epoch", 3, ADMIN | STALE, SetConfigEpoch, "Sets the configuration epoch for a new node.").docs("3.0.0", "O(1)").no_async_loading().args("
            config-epoch type=integer
        "),
    sub!("cluster|setslot", -4, ADMIN | STALE, SetSlot, "Binds a hash slot to a node.")
        .docs("3.0.0", "O(1)")
        .no_async_loading()
        .args("
            slot type=integer
            subcommand type=oneof
              node-id type=string token=IMPORTING
              node-id type=string token=MIGRATING
              node-id type=string token=NODE
              stable type=pure-token token=STABLE
        "),
    sub!("cluster|shards", 2, STALE, Shards, "Returns the mapping of cluster slots to shards.").docs("7.0.0", "O(N) where N is the total number of cluster nodes").tips("nondeterministic_output"),
    sub!("cluster|slaves", 3, ADMIN | STALE, Replicas, "Lists the replica nodes of a master node.")
        .docs("3.0.0", "O(1)")
        .deprecated("5.0.0", "`CLUSTER REPLICAS`")
        .tips("nondeterministic_output")
        .args("
            node-id type=string
        "),
    sub!("cluster|slots", 2, STALE, Slots, "Returns the mapping of cluster slots to nodes.")
        .docs("3.0.0", "O(N) where N is the total number of Cluster nodes")
        .deprecated("7.0.0", "`CLUSTER SHARDS`")
        .history(&[("4.0.0", "Added node IDs."), ("7.0.0", "Added additional networking metadata field.")])
        .tips("nondeterministic_output"),
];

fn asking(conn: &mut Conn) -> Frame {
    if conn.worker.server.cluster.is_none() {
        return err("ERR This instance has cluster support disabled");
    }
    conn.client.asking = true;
    Frame::ok()
}

fn local_only(conn: &mut Conn) -> Frame {
    if conn.worker.server.cluster.is_none() {
        return err("ERR This instance has cluster support disabled");
    }
    conn.client.local_only = true;
    Frame::ok()
}

fn readonly(conn: &mut Conn, on: bool) -> Frame {
    if on && conn.worker.server.cluster.is_none() {
        return err("ERR This instance has cluster support disabled");
    }
    conn.client.readonly = on;
    Frame::ok()
}

fn text(conn: &Conn, s: String) -> Frame {
    match conn.client.proto {
        Protocol::Resp3 => Frame::Verbatim { format: *b"txt", text: Bytes::from(s) },
        Protocol::Resp2 => Frame::Bulk(Bytes::from(s)),
    }
}

fn name_arg(a: &[u8]) -> Result<NodeName, Frame> {
    NodeName::new(a).ok_or_else(|| err_quoting("ERR Unknown node ", a, ""))
}

fn slot_arg(a: &[u8]) -> Result<u16, Frame> {
    match parse_i64(a) {
        Ok(n) if (0..SLOTS as i64).contains(&n) => Ok(n as u16),
        _ => Err(err("ERR Invalid or out of range slot")),
    }
}

fn node_name(n: &NodeName) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(n.as_bytes()))
}

fn result(r: Result<(), String>) -> Frame {
    match r {
        Ok(()) => Frame::ok(),
        Err(e) => Frame::error(e),
    }
}

async fn cluster(conn: &mut Conn, access: Access<'_>, a: &[Arg], sub: Sub) -> Frame {
    let Some(node) = conn.worker.server.cluster.clone() else { return err("ERR This instance has cluster support disabled") };
    let now = crate::cluster::now_ms();
    match sub {
        Sub::Help => Frame::Array(HELP.iter().map(|l| Frame::simple(*l)).collect()),
        Sub::MyId => node.with(|c| node_name(&c.myself)),
        Sub::Info => {
            let s = node.with(|c| c.info_text());
            text(conn, s)
        }
        Sub::Nodes => {
            let s = node.with(|c| nodes_text(c));
            text(conn, s)
        }
        Sub::KeySlot => Frame::Integer(key_hash_slot(&a[2]) as i64),
        Sub::Meet => {
            let ip = String::from_utf8_lossy(&a[2]).into_owned();
            let (Ok(port), cport) = (parse_i64(&a[3]), a.get(4).map(|c| parse_i64(c))) else { return err("ERR Invalid base port specified: ") };
            let cport = match cport {
                Some(Ok(c)) => c,
                Some(Err(_)) => return err("ERR Invalid bus port specified: "),
                None => port + abacus_cluster_bus::PORT_INCR as i64,
            };
            if !(0..=65535).contains(&port) || !(0..=65535).contains(&cport) {
                return err(&format!("ERR Invalid node address specified: {ip}:{port}"));
            }
            result(node.with(|c| c.meet(&ip, port as u16, cport as u16, now)))
        }
        Sub::AddSlots | Sub::DelSlots => {
            let mut slots = Vec::new();
            for x in &a[2..] {
                match slot_arg(x) {
                    Ok(s) => slots.push(s),
                    Err(e) => return e,
                }
            }
            result(node.with(|c| if matches!(sub, Sub::AddSlots) { c.add_slots(&slots) } else { c.del_slots(&slots) }))
        }
        Sub::AddSlotsRange | Sub::DelSlotsRange => {
            if a.len() % 2 != 0 {
                return err(&format!("ERR wrong number of arguments for 'cluster|{}' command", if matches!(sub, Sub::AddSlotsRange) { "addslotsrange" } else { "delslotsrange" }));
            }
            let mut pairs = Vec::new();
            for p in a[2..].chunks(2) {
                match (parse_i64(&p[0]), parse_i64(&p[1])) {
                    (Ok(x), Ok(y)) => pairs.push((x, y)),
                    _ => return err("ERR Invalid or out of range slot"),
                }
            }
            let slots = match Cluster::ranges_to_slots(&pairs) {
                Ok(s) => s,
                Err(e) => return Frame::error(e),
            };
            result(node.with(|c| if matches!(sub, Sub::AddSlotsRange) { c.add_slots(&slots) } else { c.del_slots(&slots) }))
        }
        Sub::Failover => {
            let mode = match a.get(2) {
                _ if a.len() > 3 => return err(&format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.", String::from_utf8_lossy(&a[1]))),
                None => FailoverMode::Default,
                Some(x) if is(x, "force") => FailoverMode::Force,
                Some(x) if is(x, "takeover") => FailoverMode::Takeover,
                Some(_) => return err("ERR syntax error"),
            };
            result(node.with(|c| c.failover(mode, now)))
        }
        Sub::FlushSlots => {
            let keys = total_keys(conn, access).await;
            result(node.with(|c| c.flush_slots(keys)))
        }
        Sub::BumpEpoch => {
            let (bumped, epoch) = node.with(|c| c.bump_epoch());
            Frame::Simple(Bytes::from(format!("{} {epoch}", if bumped { "BUMPED" } else { "STILL" })))
        }
        Sub::SetConfigEpoch => match parse_i64(&a[2]) {
            Ok(e) => result(node.with(|c| c.set_config_epoch(e))),
            Err(_) => err(&format!("ERR Invalid config epoch specified: {}", String::from_utf8_lossy(&a[2]))),
        },
        Sub::Forget => match name_arg(&a[2]) {
            Ok(n) => result(node.with(|c| c.forget(n))),
            Err(e) => e,
        },
        Sub::CountFailureReports => match name_arg(&a[2]) {
            Ok(n) => match node.with(|c| c.failure_reports(n)) {
                Ok(k) => Frame::Integer(k as i64),
                Err(e) => Frame::error(e),
            },
            Err(e) => e,
        },
        Sub::Replicate => match name_arg(&a[2]) {
            Ok(n) => {
                let keys = total_keys(conn, access).await;
                let r = node.with(|c| c.replicate(n, keys).map(|()| (c.nodes[&n].ip.clone(), c.nodes[&n].port)));
                match r {
                    // The data follows through replication from the primary's client port.
                    Ok((ip, port)) => super::replication::start_replica(conn, ip, port).await,
                    Err(e) => Frame::error(e),
                }
            }
            Err(e) => e,
        },
        Sub::Replicas => match name_arg(&a[2]) {
            Ok(n) => node.with(|c| match c.nodes.get(&n) {
                None => err_quoting("ERR Unknown node ", &a[2], ""),
                Some(p) if p.is(node_flags::SLAVE) => err("ERR The specified node is not a master"),
                Some(_) => {
                    let conf = c.nodes_conf(false);
                    Frame::Array(conf.nodes.iter().filter(|e| e.primary == Some(n)).map(|e| Frame::Bulk(Bytes::from(nodes_conf::render_line(e)))).collect())
                }
            }),
            Err(e) => e,
        },
        Sub::Reset => {
            let hard = match a.get(2) {
                None => false,
                Some(x) if is(x, "hard") => true,
                Some(x) if is(x, "soft") => false,
                Some(_) => return err("ERR syntax error"),
            };
            let keys = total_keys(conn, access).await;
            result(node.with(|c| c.reset(hard, keys, rand::random())))
        }
        Sub::SaveConfig => {
            node.with(|c| c.requeue(abacus_cluster::Action::SaveConfig));
            Frame::ok()
        }
        Sub::SetSlot => {
            let slot = match slot_arg(&a[2]) {
                Ok(s) => s,
                Err(e) => return e,
            };
            let how = if is(&a[3], "stable") && a.len() == 4 {
                SetSlot::Stable
            } else if a.len() == 5 {
                let Ok(n) = name_arg(&a[4]) else { return err_quoting("ERR I don't know about node ", &a[4], "") };
                if is(&a[3], "migrating") {
                    SetSlot::Migrating(n)
                } else if is(&a[3], "importing") {
                    SetSlot::Importing(n)
                } else if is(&a[3], "node") {
                    SetSlot::Node(n)
                } else {
                    return err("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP");
                }
            } else {
                return err("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP");
            };
            // Only NODE checks the slot's keys here.
            let keys = if matches!(how, SetSlot::Node(_)) { keys_in_slot(conn, access, slot, 0).await.1 as u64 } else { 0 };
            // Commands admitted while the slot was served here, not migrating, ran without
            // a key check: MIGRATING, and NODE of a slot served here, wait for them to reach
            // their shard (`admission_barrier`). The others change nothing such a command
            // decided (an importing slot, or a migrating one, is decided under the lock).
            let barrier = matches!(how, SetSlot::Migrating(_)) || (matches!(how, SetSlot::Node(_)) && node.serves(slot));
            let r = node.with(|c| c.set_slot(slot, how, keys));
            if r.is_ok() && barrier {
                let shard = slot as usize % conn.worker.shards();
                crate::cluster::admission_barrier(&conn.worker.server, shard).await;
            }
            result(r)
        }
        Sub::CountKeysInSlot => match parse_i64(&a[2]) {
            Ok(s) if (0..SLOTS as i64).contains(&s) => Frame::Integer(keys_in_slot(conn, access, s as u16, 0).await.1 as i64),
            _ => err("ERR Invalid slot"),
        },
        Sub::GetKeysInSlot => {
            let (slot, count) = match (parse_i64(&a[2]), parse_i64(&a[3])) {
                (Ok(s), Ok(n)) if n >= 0 && (0..SLOTS as i64).contains(&s) => (s as u16, n as usize),
                (Ok(_), Ok(n)) if n < 0 => return err("ERR Invalid number of keys"),
                _ => return err("ERR Invalid slot or number of keys"),
            };
            let (keys, _) = keys_in_slot(conn, access, slot, count).await;
            Frame::Array(keys.into_iter().map(Frame::Bulk).collect())
        }
        Sub::Slots => node.with(|c| {
            // The preferred endpoint first (cluster-preferred-endpoint-type), then the other
            // addresses known in a map (Redis's addNodeToNodeReply).
            let kind = endpoint_type(&conn.worker.server.config);
            Frame::Array(
                c.slots_ranges()
                    .into_iter()
                    .map(|(a, b, nodes)| {
                        let mut row = vec![Frame::Integer(a as i64), Frame::Integer(b as i64)];
                        row.extend(nodes.into_iter().map(|n| {
                            let mut meta = Vec::new();
                            if kind != Endpoint::Ip {
                                meta.push((Frame::bulk(b"ip".to_vec()), Frame::bulk(n.ip.clone().into_bytes())));
                            }
                            if kind != Endpoint::Hostname && !n.hostname.is_empty() {
                                meta.push((Frame::bulk(b"hostname".to_vec()), Frame::bulk(n.hostname.clone().into_bytes())));
                            }
                            let endpoint = match kind {
                                Endpoint::Ip => Frame::bulk(n.ip.into_bytes()),
                                Endpoint::Hostname if !n.hostname.is_empty() => Frame::bulk(n.hostname.into_bytes()),
                                Endpoint::Hostname => Frame::bulk(b"?".to_vec()),
                                Endpoint::Unknown => Frame::Null,
                            };
                            Frame::Array(vec![endpoint, Frame::Integer(n.port as i64), node_name(&n.name), Frame::Map(meta)])
                        }));
                        Frame::Array(row)
                    })
                    .collect(),
            )
        }),
        Sub::Shards => node.with(|c| shards(c, &conn.worker.server.config)),
        Sub::Links => node.with(|c| {
            Frame::Array(
                c.nodes
                    .values()
                    .filter(|n| !n.is(node_flags::MYSELF))
                    .flat_map(|n| [(n.link, "to"), (n.inbound_link, "from")].into_iter().filter_map(move |(l, dir)| l.map(|_| (n, dir))))
                    .map(|(n, dir)| {
                        let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
                        Frame::Map(vec![
                            (s("direction"), s(dir)),
                            (s("node"), node_name(&n.name)),
                            (s("create-time"), Frame::Integer(n.ctime as i64)),
                            (s("events"), s(if dir == "to" { "rw" } else { "r" })),
                            (s("send-buffer-allocated"), Frame::Integer(0)),
                            (s("send-buffer-used"), Frame::Integer(0)),
                        ])
                    })
                    .collect(),
            )
        }),
    }
}

/// CLUSTER NODES's text: one line per node, each ending with a newline.
fn nodes_text(c: &Cluster) -> String {
    let mut out = String::new();
    for e in &c.nodes_conf(false).nodes {
        out.push_str(&nodes_conf::render_line(e));
        out.push('\n');
    }
    out
}

/// CLUSTER SHARDS: per primary with slots (and nodes without), its slot ranges and nodes.
fn shards(c: &Cluster, config: &abacus_engine::Config) -> Frame {
    let s = |v: &str| Frame::bulk(v.as_bytes().to_vec());
    let primaries: Vec<&abacus_cluster::state::Node> = c.nodes.values().filter(|n| n.is(node_flags::MASTER)).collect();
    Frame::Array(
        primaries
            .iter()
            .map(|p| {
                let slots: Vec<Frame> = p.slots.ranges().into_iter().flat_map(|(a, b)| [Frame::Integer(a as i64), Frame::Integer(b as i64)]).collect();
                let members = std::iter::once(*p).chain(c.nodes.values().filter(|n| n.primary == Some(p.name)));
                let nodes: Vec<Frame> = members
                    .map(|n| {
                        let mut f = vec![
                            (s("id"), node_name(&n.name)),
                            (s("port"), Frame::Integer(n.port as i64)),
                            (s("ip"), s(&n.ip)),
                            (s("endpoint"), s(&endpoint(n, config))),
                        ];
                        if !n.hostname.is_empty() {
                            f.push((s("hostname"), s(&n.hostname)));
                        }
                        f.push((s("role"), s(if n.is(node_flags::SLAVE) { "replica" } else { "master" })));
                        f.push((s("replication-offset"), Frame::Integer(n.repl_offset as i64)));
                        let health = if n.is(node_flags::FAIL) { "fail" } else { "online" };
                        f.push((s("health"), s(health)));
                        Frame::Map(f)
                    })
                    .collect();
                Frame::Map(vec![(s("slots"), Frame::Array(slots)), (s("nodes"), Frame::Array(nodes))])
            })
            .collect(),
    )
}

/// Every key of every database (CLUSTER FLUSHSLOTS, REPLICATE and RESET need an empty node).
async fn total_keys(conn: &mut Conn, access: Access<'_>) -> u64 {
    match conn.worker.run_all(access, |s| s.dbs.iter().map(|d| d.len() as u64).sum::<u64>()).await {
        Some(v) => v.into_iter().sum(),
        None => 0,
    }
}

/// The keys of `slot` in the connection's database, read on the shard that owns the slot
/// (every key of a slot lives on one shard: `shard::key_slot` routes by slot).
/// Up to `count` keys of `slot` here, and how many it has (the database's index by slot,
/// `abacus_keyspace`'s `slots.rs`, built by the first call).
async fn keys_in_slot(conn: &mut Conn, access: Access<'_>, slot: u16, count: usize) -> (Vec<Bytes>, usize) {
    let db = conn.client.db;
    let shard = slot as usize % conn.worker.shards();
    let now = abacus_engine::shard::now_ms();
    conn.worker
        .run(access, shard, move |s| {
            let (keys, live) = s.dbs[db].slot_keys(slot, count, key_hash_slot, now);
            (keys.into_iter().map(Bytes::from).collect(), live)
        })
        .await
        .unwrap_or_default()
}

const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "HELP",
    "    Print this help.",
];
