//! The text form of a node's view of its cluster: one line per node, as CLUSTER NODES prints
//! it and nodes.conf stores it (Redis's `clusterGenNodeDescription`), plus nodes.conf's last
//! line, `vars currentEpoch N lastVoteEpoch M`.
//!
//! ```text
//! <name> <ip>:<port>@<cport>[,<hostname>] <flags> <primary|-> <ping-sent> <pong-recv> <config-epoch> <connected|disconnected> <slot|first-last|[slot->-name]|[slot-<-name]>...
//! ```
//!
//! Flags are Redis's words in its order (`myself,master`, `slave`, `fail?`, `fail`,
//! `handshake`, `noaddr`, `nofailover`; `noflags` for none). The bracketed forms, which only
//! the node's own line carries, are a slot it is migrating to (`->-`) or importing from
//! (`-<-`) another node. A line without `@cport` (written before Redis 4.0) has the bus port
//! at the client port + 10000, as Redis reads it. [`render`] writes exactly what Redis writes,
//! so a file Redis wrote parses and renders back byte for byte (the tests check it on files a
//! real redis-server wrote).

use abacus_cluster_bus::{node_flags, NodeName, PORT_INCR};
use thiserror::Error;

/// One node's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    pub name: NodeName,
    /// Empty until the node learns its own address (`:7000@17000`).
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    /// The announced hostname; empty: none (no `,` is written).
    pub hostname: String,
    /// [`node_flags`] bits.
    pub flags: u16,
    pub primary: Option<NodeName>,
    /// Milliseconds (Unix time) of the pending ping, 0 if none.
    pub ping_sent: u64,
    /// Milliseconds (Unix time) of the last pong.
    pub pong_received: u64,
    pub config_epoch: u64,
    pub connected: bool,
    /// Inclusive ranges, in the order written.
    pub slots: Vec<(u16, u16)>,
    /// Slots this node is moving to another node (`[slot->-name]`).
    pub migrating: Vec<(u16, NodeName)>,
    /// Slots this node is taking from another node (`[slot-<-name]`).
    pub importing: Vec<(u16, NodeName)>,
}

/// A whole nodes.conf.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodesConf {
    pub nodes: Vec<NodeEntry>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct Error {
    pub line: usize,
    pub reason: String,
}

/// Redis's flag words, in the order it writes them (representClusterNodeFlags).
const FLAG_WORDS: [(u16, &str); 8] = [
    (node_flags::MYSELF, "myself"),
    (node_flags::MASTER, "master"),
    (node_flags::SLAVE, "slave"),
    (node_flags::PFAIL, "fail?"),
    (node_flags::FAIL, "fail"),
    (node_flags::HANDSHAKE, "handshake"),
    (node_flags::NOADDR, "noaddr"),
    (node_flags::NOFAILOVER, "nofailover"),
];

pub fn flags_text(flags: u16) -> String {
    let words: Vec<&str> = FLAG_WORDS.iter().filter(|(f, _)| flags & f != 0).map(|(_, w)| *w).collect();
    if words.is_empty() {
        "noflags".to_string()
    } else {
        words.join(",")
    }
}

fn parse_flags(text: &str) -> Result<u16, String> {
    let mut flags = 0;
    for w in text.split(',') {
        match FLAG_WORDS.iter().find(|(_, word)| *word == w) {
            Some((f, _)) => flags |= f,
            None if w == "noflags" => {}
            None => return Err(format!("unknown flag {w:?}")),
        }
    }
    Ok(flags)
}

fn parse_name(text: &str) -> Result<NodeName, String> {
    NodeName::new(text.as_bytes()).ok_or_else(|| format!("bad node name {text:?}"))
}

fn num<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("bad {what} {text:?}"))
}

/// Parses one node line.
pub fn parse_line(line: &str) -> Result<NodeEntry, String> {
    let f: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
    if f.len() < 8 {
        return Err(format!("{} fields, at least 8 needed", f.len()));
    }
    let name = parse_name(f[0])?;
    let (addr, hostname) = f[1].split_once(',').unwrap_or((f[1], ""));
    let (host_port, cport) = match addr.split_once('@') {
        Some((hp, c)) => (hp, Some(num::<u16>(c, "bus port")?)),
        None => (addr, None),
    };
    let colon = host_port.rfind(':').ok_or_else(|| format!("no port in {addr:?}"))?;
    let (ip, port) = (&host_port[..colon], num::<u16>(&host_port[colon + 1..], "port")?);
    let primary = if f[3] == "-" { None } else { Some(parse_name(f[3])?) };
    let connected = match f[7] {
        "connected" => true,
        "disconnected" => false,
        s => return Err(format!("bad link state {s:?}")),
    };
    let mut entry = NodeEntry {
        name,
        ip: ip.to_string(),
        port,
        cport: cport.unwrap_or(port.wrapping_add(PORT_INCR)),
        hostname: hostname.to_string(),
        flags: parse_flags(f[2])?,
        primary,
        ping_sent: num(f[4], "ping time")?,
        pong_received: num(f[5], "pong time")?,
        config_epoch: num(f[6], "config epoch")?,
        connected,
        slots: Vec::new(),
        migrating: Vec::new(),
        importing: Vec::new(),
    };
    for s in &f[8..] {
        if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            if let Some((slot, node)) = inner.split_once("->-") {
                entry.migrating.push((slot_num(slot)?, parse_name(node)?));
            } else if let Some((slot, node)) = inner.split_once("-<-") {
                entry.importing.push((slot_num(slot)?, parse_name(node)?));
            } else {
                return Err(format!("bad slot state {s:?}"));
            }
        } else if let Some((a, b)) = s.split_once('-') {
            let (a, b) = (slot_num(a)?, slot_num(b)?);
            if a > b {
                return Err(format!("bad slot range {s:?}"));
            }
            entry.slots.push((a, b));
        } else {
            let a = slot_num(s)?;
            entry.slots.push((a, a));
        }
    }
    Ok(entry)
}

fn slot_num(text: &str) -> Result<u16, String> {
    let n: u16 = num(text, "slot")?;
    if n as usize >= abacus_cluster_bus::SLOTS {
        return Err(format!("slot {n} out of range"));
    }
    Ok(n)
}

/// One node's line, as Redis writes it (no newline).
pub fn render_line(n: &NodeEntry) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(128);
    let _ = write!(out, "{} {}:{}@{}", String::from_utf8_lossy(n.name.as_bytes()), n.ip, n.port, n.cport);
    if !n.hostname.is_empty() {
        let _ = write!(out, ",{}", n.hostname);
    }
    let primary = n.primary.map_or("-".to_string(), |p| String::from_utf8_lossy(p.as_bytes()).into_owned());
    let link = if n.connected { "connected" } else { "disconnected" };
    let _ = write!(out, " {} {primary} {} {} {} {link}", flags_text(n.flags), n.ping_sent, n.pong_received, n.config_epoch);
    for &(a, b) in &n.slots {
        if a == b {
            let _ = write!(out, " {a}");
        } else {
            let _ = write!(out, " {a}-{b}");
        }
    }
    for (slot, node) in &n.migrating {
        let _ = write!(out, " [{slot}->-{}]", String::from_utf8_lossy(node.as_bytes()));
    }
    for (slot, node) in &n.importing {
        let _ = write!(out, " [{slot}-<-{}]", String::from_utf8_lossy(node.as_bytes()));
    }
    out
}

/// Parses a nodes.conf (or CLUSTER NODES's reply, which has no `vars` line). Blank lines are
/// skipped, as Redis skips them.
pub fn parse(text: &str) -> Result<NodesConf, Error> {
    let mut conf = NodesConf::default();
    for (i, line) in text.lines().enumerate() {
        let err = |reason: String| Error { line: i + 1, reason };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(vars) = line.strip_prefix("vars ") {
            let words: Vec<&str> = vars.split(' ').collect();
            for kv in words.chunks(2) {
                let [k, v] = kv else { return Err(err("a variable without a value".into())) };
                let v: u64 = num(v, k).map_err(err)?;
                match *k {
                    "currentEpoch" => conf.current_epoch = v,
                    "lastVoteEpoch" => conf.last_vote_epoch = v,
                    // Redis skips an unknown variable with a warning.
                    _ => {}
                }
            }
            continue;
        }
        conf.nodes.push(parse_line(line).map_err(err)?);
    }
    Ok(conf)
}

/// The whole file, as Redis writes it: the node lines, then the `vars` line.
pub fn render(conf: &NodesConf) -> String {
    let mut out = String::new();
    for n in &conf.nodes {
        out.push_str(&render_line(n));
        out.push('\n');
    }
    out.push_str(&format!("vars currentEpoch {} lastVoteEpoch {}\n", conf.current_epoch, conf.last_vote_epoch));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by redis-server 7.0.15 (three primaries made with `redis-cli --cluster
    /// create`, announced hostnames, slot 0 migrating), and CLUSTER NODES of a fourth node
    /// before it met anyone.
    const REDIS_WROTE: &str = "d114e714dc0fb3d63e742678ca01e5672c9bf942 127.0.0.1:31001@41001,host-31001 myself,master - 0 1796658410000 1 connected 0-5460 [0->-386532062e6fc85a51ce4ebf3060f017dc3ec729]
386532062e6fc85a51ce4ebf3060f017dc3ec729 127.0.0.1:31002@41002,host-31002 master - 0 1796658412809 2 connected 5461-10922
5b12879ff3cbe7e47ce37a4d542c7535acc61875 127.0.0.1:31003@41003,host-31003 master - 0 1796658411805 3 connected 10923-16383
vars currentEpoch 3 lastVoteEpoch 0
";

    #[test]
    fn a_file_redis_wrote_round_trips() {
        let conf = parse(REDIS_WROTE).unwrap();
        assert_eq!(conf.nodes.len(), 3);
        assert_eq!(conf.current_epoch, 3);
        let me = &conf.nodes[0];
        assert_eq!(me.flags, node_flags::MYSELF | node_flags::MASTER);
        assert_eq!((me.ip.as_str(), me.port, me.cport, me.hostname.as_str()), ("127.0.0.1", 31001, 41001, "host-31001"));
        assert_eq!(me.slots, vec![(0, 5460)]);
        assert_eq!(me.migrating, vec![(0, conf.nodes[1].name)]);
        assert_eq!(render(&conf), REDIS_WROTE);
    }

    #[test]
    fn lines_of_every_shape() {
        for line in [
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 :31004@41004 myself,master - 0 0 0 connected",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 127.0.0.1:31004@41004 myself,slave d114e714dc0fb3d63e742678ca01e5672c9bf942 0 0 1 connected",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 ::1:7000@17000 master,fail?,nofailover - 1796658410000 1796658411000 4 disconnected 1 3-5 16383",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 10.0.0.2:7000@17000 handshake,noaddr - 0 0 0 disconnected",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 10.0.0.2:7000@17000 noflags - 0 0 0 disconnected [7-<-d114e714dc0fb3d63e742678ca01e5672c9bf942]",
        ] {
            assert_eq!(render_line(&parse_line(line).unwrap()), line);
        }
        let ipv6 = parse_line("69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 ::1:7000@17000 master - 0 0 0 connected").unwrap();
        assert_eq!((ipv6.ip.as_str(), ipv6.port), ("::1", 7000));
        // Before Redis 4.0 there was no @cport: the bus port is the port + 10000.
        let old = parse_line("69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 10.0.0.2:7000 master - 0 0 0 connected").unwrap();
        assert_eq!(old.cport, 17000);
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line_number() {
        for bad in [
            "short line",
            "nothex 127.0.0.1:1@2 master - 0 0 0 connected",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 127.0.0.1 master - 0 0 0 connected",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 127.0.0.1:1@2 boss - 0 0 0 connected",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 127.0.0.1:1@2 master - 0 0 0 linked",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 127.0.0.1:1@2 master - 0 0 0 connected 16384",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 127.0.0.1:1@2 master - 0 0 0 connected 9-3",
            "69f2148ee4936dfa0bfad69d0566fa9f07aaa0b3 127.0.0.1:1@2 master - 0 0 0 connected [5-x]",
        ] {
            let e = parse(&format!("\n{bad}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{bad}: {e}");
        }
        assert_eq!(parse("vars currentEpoch").unwrap_err().line, 1);
    }
}
