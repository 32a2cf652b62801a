//! A node's view of its cluster and the rules that keep it, after Redis 7.0's `cluster.c`:
//! the node table, the handshake (MEET, then PING/PONG renaming a handshake node to its real
//! name), gossip (learning nodes from other nodes' pings, failure reports), slot ownership
//! by config epoch (`clusterUpdateSlotsConfigWith`), failure detection (PFAIL after a node
//! timeout without a pong, FAIL on a majority of primaries' reports, broadcast as a FAIL
//! message), and the cron's pings and reconnections.
//!
//! Why a state machine without I/O: the rules are long and timing-dependent, and Redis's are
//! tested by running clusters; here every input is a call (a message arrived on a link, a
//! link opened or closed, a tick of the clock, a CLUSTER command) and every output an
//! [`Action`] the caller carries out (send, connect, close, save nodes.conf). The same code
//! then runs under a real event loop and under tests that drive it against real redis-server
//! nodes with plain sockets (`tests/join_redis.rs`).
//!
//! Elections, their ranking by replication offset, manual failover (CLUSTER FAILOVER) and
//! replica migration live in `state/failover.rs`. A node whose gossip claims slots at a
//! stale config epoch gets an UPDATE about their owner, as Redis sends it.
//!
//! Not yet here: blacklists of forgotten nodes.

use std::collections::{BTreeMap, HashMap};

use abacus_cluster_bus::{kind, node_flags, Body, Extension, Gossip, Header, Message, NodeName, Slots, SLOTS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::nodes_conf::{NodeEntry, NodesConf};

mod failover;
pub use failover::FailoverMode;

/// What the caller tells this state about a connection it holds.
pub type LinkId = u64;

/// Settings the state reads (Redis's parameters of the same names).
#[derive(Clone, Debug)]
pub struct Config {
    /// `cluster-node-timeout`, milliseconds.
    pub node_timeout_ms: u64,
    /// The client port announced.
    pub port: u16,
    /// The bus port announced.
    pub cport: u16,
    /// With `tls-cluster`: the plaintext client port (Redis's `pport`; `port` is then the TLS
    /// one), for redirecting plaintext clients; 0 = none.
    pub pport: u16,
    /// `cluster-announce-ip`; empty: learnt from the first MEET.
    pub announce_ip: String,
    /// `cluster-announce-hostname`.
    pub hostname: String,
    /// `cluster-require-full-coverage`.
    pub require_full_coverage: bool,
    /// `cluster-replica-validity-factor`: a replica whose data is older than
    /// `node_timeout_ms * factor + repl_ping_period_ms` (beyond one node timeout) does not
    /// start an automatic failover; 0: always allowed.
    pub replica_validity_factor: u64,
    /// `repl-ping-replica-period` in ms (Redis's term of the data-age limit).
    pub repl_ping_period_ms: u64,
    /// `cluster-replica-no-failover`: no automatic failover (manual ones still run).
    pub replica_no_failover: bool,
    /// `cluster-migration-barrier`: replicas a primary keeps before one may migrate.
    pub migration_barrier: u64,
    /// `cluster-allow-replica-migration`.
    pub allow_replica_migration: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            node_timeout_ms: 15_000,
            port: 6379,
            cport: 16379,
            pport: 0,
            announce_ip: String::new(),
            hostname: String::new(),
            require_full_coverage: true,
            replica_validity_factor: 10,
            repl_ping_period_ms: 10_000,
            replica_no_failover: false,
            migration_barrier: 1,
            allow_replica_migration: true,
        }
    }
}

/// What the caller must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this message on this link.
    Send(LinkId, Message),
    /// Open a link to this node's bus port; report it with [`Cluster::link_connected`] (or
    /// nothing on failure: the cron retries).
    Connect { node: NodeName, ip: String, cport: u16 },
    /// Close this link.
    Close(LinkId),
    /// Write nodes.conf ([`Cluster::nodes_conf`]) and fsync it.
    SaveConfig,
    /// Deliver a message another node published to this node's subscribers (`shard`: a
    /// shard channel, SPUBLISH).
    Deliver { shard: bool, channel: Vec<u8>, message: Vec<u8> },
    /// This replica won an election and is a primary now: stop replicating.
    Promoted,
    /// This node is a replica of the node at this client address now (its primary's slots
    /// went to another node, which it follows, as Redis's clusterSetMaster): replicate it.
    ReplicaOf { ip: String, port: u16 },
    /// A replica asked for a manual failover (MFSTART): hold clients' writes until then, so
    /// that the replica can catch up with a stream that no longer grows.
    PauseWrites { until_ms: u64 },
    /// The manual failover this primary paused for ended (done or timed out).
    Unpause,
    /// A notable event to log (Redis's serverLog lines of the same events).
    Log(String),
}

/// What the server tells the state about its replication before each event: the offset
/// (a primary's stream produced, a replica's stream applied), which goes in every header
/// and ranks replicas, and how old a replica's data may be (ms since its link to the
/// primary last worked; 0 while the link is up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplStatus {
    pub offset: u64,
    pub data_age_ms: u64,
}

/// One node as this node knows it.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: NodeName,
    pub flags: u16,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub pport: u16,
    pub hostname: String,
    pub config_epoch: u64,
    pub slots: Slots,
    pub primary: Option<NodeName>,
    pub ping_sent: u64,
    pub pong_received: u64,
    pub data_received: u64,
    pub fail_time: u64,
    /// When this node (a primary) last voted for one of this primary's replicas.
    pub voted_time: u64,
    pub repl_offset: u64,
    /// When the node entered the table (handshake timeouts).
    pub ctime: u64,
    /// Primaries that reported it failing, and when.
    pub fail_reports: Vec<(NodeName, u64)>,
    /// Since when this primary has had no working replica (replica migration); 0: not.
    pub orphaned_time: u64,
    /// The outbound link, if connected.
    pub link: Option<LinkId>,
    pub inbound_link: Option<LinkId>,
}

impl Node {
    fn new(name: NodeName, flags: u16, now: u64) -> Node {
        Node {
            name,
            flags,
            ip: String::new(),
            port: 0,
            cport: 0,
            pport: 0,
            hostname: String::new(),
            config_epoch: 0,
            slots: Slots::default(),
            primary: None,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            voted_time: 0,
            repl_offset: 0,
            ctime: now,
            fail_reports: Vec::new(),
            orphaned_time: 0,
            link: None,
            inbound_link: None,
        }
    }

    pub fn is(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

struct Link {
    node: Option<NodeName>,
    inbound: bool,
    ctime: u64,
}

/// The cluster as this node sees it.
pub struct Cluster {
    pub config: Config,
    pub myself: NodeName,
    pub nodes: BTreeMap<NodeName, Node>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    /// Each slot's owner.
    owners: Vec<Option<NodeName>>,
    /// Bumped whenever a slot changes owner or starts or stops migrating, so that a reader
    /// keeping a copy of the slot map (the server's redirection check) copies it again only
    /// then.
    pub slots_version: u64,
    pub migrating: BTreeMap<u16, NodeName>,
    pub importing: BTreeMap<u16, NodeName>,
    /// Whether the cluster is OK from here (CLUSTER INFO's cluster_state).
    pub ok: bool,
    /// Messages sent and received by type (CLUSTER INFO).
    pub sent: [u64; kind::COUNT as usize],
    pub received: [u64; kind::COUNT as usize],
    /// A replica's election (clusterHandleSlaveFailover): when it may ask for votes, the
    /// votes it has, whether it asked, and the epoch it asked in.
    failover_auth_time: u64,
    failover_auth_count: usize,
    failover_auth_sent: bool,
    failover_auth_epoch: u64,
    /// This replica's rank among its primary's replicas by offset (0: the freshest).
    failover_auth_rank: u64,
    /// A manual failover in progress (CLUSTER FAILOVER), on either side.
    mf: failover::ManualFailover,
    /// The replication figures the server last reported ([`Cluster::set_repl`]).
    repl: ReplStatus,
    links: HashMap<LinkId, Link>,
    next_link: LinkId,
    actions: Vec<Action>,
    rng: StdRng,
    ticks: u64,
}

/// A random node name, as Redis makes one (40 hex characters).
pub fn random_name(rng: &mut impl Rng) -> NodeName {
    const HEX: &[u8] = b"0123456789abcdef";
    let mut n = [0u8; 40];
    for c in n.iter_mut() {
        *c = HEX[rng.gen_range(0..16)];
    }
    NodeName(n)
}

impl Cluster {
    /// A new one-node cluster: this node, a primary without slots.
    pub fn new(config: Config, seed: u64, now: u64) -> Cluster {
        let mut rng = StdRng::seed_from_u64(seed);
        let myself = random_name(&mut rng);
        let mut me = Node::new(myself, node_flags::MYSELF | node_flags::MASTER, now);
        me.ip = config.announce_ip.clone();
        me.port = config.port;
        me.cport = config.cport;
        me.hostname = config.hostname.clone();
        let mut nodes = BTreeMap::new();
        nodes.insert(myself, me);
        Cluster {
            config,
            myself,
            nodes,
            current_epoch: 0,
            last_vote_epoch: 0,
            owners: vec![None; SLOTS],
            slots_version: 0,
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            ok: false,
            sent: [0; kind::COUNT as usize],
            received: [0; kind::COUNT as usize],
            failover_auth_time: 0,
            failover_auth_count: 0,
            failover_auth_sent: false,
            failover_auth_epoch: 0,
            failover_auth_rank: 0,
            mf: failover::ManualFailover::default(),
            repl: ReplStatus::default(),
            links: HashMap::new(),
            next_link: 1,
            actions: Vec::new(),
            rng,
            ticks: 0,
        }
    }

    /// The cluster a nodes.conf describes (Redis's clusterLoadConfig): the node marked
    /// `myself` is this node; its ports and hostname are the configuration's now.
    pub fn load(config: Config, conf: &NodesConf, seed: u64, now: u64) -> Result<Cluster, String> {
        let me = conf.nodes.iter().find(|n| n.flags & node_flags::MYSELF != 0).ok_or("no node is myself")?;
        let mut c = Cluster::new(config, seed, now);
        let fresh = c.myself;
        c.nodes.remove(&fresh);
        c.myself = me.name;
        for e in &conf.nodes {
            let mut n = Node::new(e.name, e.flags, now);
            n.ip = e.ip.clone();
            n.port = e.port;
            n.cport = e.cport;
            n.hostname = e.hostname.clone();
            n.primary = e.primary;
            n.config_epoch = e.config_epoch;
            // Redis restarts its clocks: a node is as if just heard from.
            n.pong_received = now;
            if e.name == me.name {
                n.port = c.config.port;
                n.cport = c.config.cport;
                n.hostname = c.config.hostname.clone();
                if !c.config.announce_ip.is_empty() {
                    n.ip = c.config.announce_ip.clone();
                }
            }
            c.nodes.insert(e.name, n);
        }
        for e in &conf.nodes {
            for &(a, b) in &e.slots {
                for s in a..=b {
                    c.add_slot(e.name, s);
                }
            }
        }
        for (s, n) in &me.migrating {
            c.migrating.insert(*s, *n);
        }
        for (s, n) in &me.importing {
            c.importing.insert(*s, *n);
        }
        c.current_epoch = conf.current_epoch.max(c.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0));
        c.last_vote_epoch = conf.last_vote_epoch;
        c.update_state();
        Ok(c)
    }

    /// The server's replication figures, before each event: the offset every header
    /// carries (Redis fills the header's `offset` the same way) and the replica's data age.
    pub fn set_repl(&mut self, r: ReplStatus) {
        self.repl = r;
        let me = self.myself;
        if let Some(m) = self.nodes.get_mut(&me) {
            m.repl_offset = r.offset;
        }
    }

    /// New settings (CONFIG SET): this node's announced ports and hostname follow them.
    pub fn set_config(&mut self, config: Config) {
        let me = self.myself;
        let m = self.nodes.get_mut(&me).expect("myself");
        if m.port != config.port || m.cport != config.cport || m.hostname != config.hostname || m.pport != config.pport {
            m.port = config.port;
            m.cport = config.cport;
            m.pport = config.pport;
            m.hostname = config.hostname.clone();
            self.save();
        }
        self.config = config;
    }

    /// The actions to carry out, in order.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// Puts an action back for the caller that carries out the rest (a command takes the
    /// save it can do itself and leaves links and messages to the bus's driver).
    pub fn requeue(&mut self, a: Action) {
        self.actions.push(a);
    }

    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }

    pub fn owner(&self, slot: u16) -> Option<NodeName> {
        self.owners[slot as usize]
    }

    fn save(&mut self) {
        if !self.actions.contains(&Action::SaveConfig) {
            self.actions.push(Action::SaveConfig);
        }
    }

    // ---- Links ----

    /// A connection accepted on the bus port.
    pub fn link_accepted(&mut self, now: u64) -> LinkId {
        self.new_link(None, true, now)
    }

    /// A connection this node opened to `node` (after [`Action::Connect`]): sends it a PING,
    /// or a MEET if the node was met with CLUSTER MEET.
    pub fn link_connected(&mut self, node: NodeName, now: u64) -> Option<LinkId> {
        let n = self.nodes.get(&node)?;
        if n.link.is_some() {
            return None;
        }
        let meet = n.is(node_flags::MEET);
        let id = self.new_link(Some(node), false, now);
        let n = self.nodes.get_mut(&node).expect("looked up above");
        n.link = Some(id);
        let old_ping_sent = n.ping_sent;
        n.flags &= !node_flags::MEET;
        self.send_ping(id, if meet { kind::MEET } else { kind::PING }, now);
        // Keep the time of a ping pending before the reconnection: the failure detector
        // measures from the first unanswered one.
        if old_ping_sent != 0 {
            if let Some(n) = self.nodes.get_mut(&node) {
                n.ping_sent = old_ping_sent;
            }
        }
        Some(id)
    }

    /// A connection to `node` could not be opened: as Redis, the attempt counts as a ping
    /// sent, so that a node nobody can reach is suspected after the node timeout.
    pub fn connect_failed(&mut self, node: NodeName, now: u64) {
        if let Some(n) = self.nodes.get_mut(&node) {
            if n.ping_sent == 0 {
                n.ping_sent = now;
            }
        }
    }

    fn new_link(&mut self, node: Option<NodeName>, inbound: bool, now: u64) -> LinkId {
        let id = self.next_link;
        self.next_link += 1;
        self.links.insert(id, Link { node, inbound, ctime: now });
        id
    }

    /// A link closed (by the peer, an error, or a [`Action::Close`]).
    pub fn link_closed(&mut self, link: LinkId) {
        let Some(l) = self.links.remove(&link) else { return };
        if let Some(n) = l.node.and_then(|name| self.nodes.get_mut(&name)) {
            if n.link == Some(link) {
                n.link = None;
            }
            if n.inbound_link == Some(link) {
                n.inbound_link = None;
            }
        }
    }

    fn close(&mut self, link: LinkId) {
        self.link_closed(link);
        self.actions.push(Action::Close(link));
    }

    // ---- Messages out ----

    /// The header this node sends (clusterBuildMessageHdr).
    fn header(&self, kind: u16) -> Header {
        let me = self.me();
        // A replica announces its primary's slots and config epoch.
        let primary = me.primary.and_then(|p| self.nodes.get(&p));
        let (slots, config_epoch) = match (me.is(node_flags::SLAVE), primary) {
            (true, Some(p)) => (p.slots.clone(), p.config_epoch),
            _ => (me.slots.clone(), me.config_epoch),
        };
        Header {
            kind,
            port: self.config.port,
            current_epoch: self.current_epoch,
            config_epoch,
            offset: self.repl.offset,
            sender: self.myself,
            slots,
            replica_of: me.primary.unwrap_or(NodeName::NULL),
            ip: self.config.announce_ip.as_bytes().to_vec(),
            pport: self.config.pport,
            cport: self.config.cport,
            flags: me.flags,
            state: if self.ok { 0 } else { 1 },
            mflags: [self.mflags0(kind), 0, 0],
        }
    }

    fn send(&mut self, link: LinkId, msg: Message) {
        if let Some(c) = self.sent.get_mut(msg.header.kind as usize) {
            *c += 1;
        }
        self.actions.push(Action::Send(link, msg));
    }

    /// PING, PONG or MEET with gossip about some other nodes (clusterSendPing).
    fn send_ping(&mut self, link: LinkId, kind: u16, now: u64) {
        let target = self.links.get(&link).and_then(|l| l.node);
        if kind == kind::PING || kind == kind::MEET {
            if let Some(n) = target.and_then(|t| self.nodes.get_mut(&t)) {
                if n.ping_sent == 0 {
                    n.ping_sent = now;
                }
            }
        }
        // About a tenth of the nodes, at least 3, never more than the others (Redis's
        // wanted/freshnodes), then every node this node suspects (PFAIL).
        let fresh = self.nodes.len().saturating_sub(2);
        let wanted = (self.nodes.len() / 10).max(3).min(fresh);
        let candidates: Vec<NodeName> = self
            .nodes
            .values()
            .filter(|n| n.name != self.myself && !n.is(node_flags::PFAIL) && !n.is(node_flags::HANDSHAKE) && !n.is(node_flags::NOADDR))
            .filter(|n| n.link.is_some() || n.slots.count() > 0)
            .map(|n| n.name)
            .collect();
        let mut chosen: Vec<NodeName> = Vec::new();
        let mut tries = wanted * 3;
        while chosen.len() < wanted && tries > 0 && !candidates.is_empty() {
            tries -= 1;
            let c = candidates[self.rng.gen_range(0..candidates.len())];
            if !chosen.contains(&c) {
                chosen.push(c);
            }
        }
        chosen.extend(self.nodes.values().filter(|n| n.is(node_flags::PFAIL) && !n.is(node_flags::HANDSHAKE) && !n.is(node_flags::NOADDR)).map(|n| n.name));
        let gossip = chosen.iter().filter_map(|c| self.nodes.get(c)).map(gossip_of).collect();
        let mut extensions = Vec::new();
        if !self.config.hostname.is_empty() {
            extensions.push(Extension::Hostname(self.config.hostname.as_bytes().to_vec()));
        }
        let msg = Message { header: self.header(kind), body: Body::Ping { gossip, extensions } };
        self.send(link, msg);
    }

    /// A PONG to every node with a link (clusterBroadcastPong(CLUSTER_BROADCAST_ALL)): a role
    /// change made by a command is known at once, not at the next pings (up to half the node
    /// timeout away), so a primary asked for its vote right after knows the requester as a
    /// replica. `now` is not read for a PONG.
    pub(crate) fn broadcast_pong(&mut self) {
        let links: Vec<LinkId> = self.nodes.values().filter(|n| n.name != self.myself && !n.is(node_flags::HANDSHAKE)).filter_map(|n| n.link).collect();
        for l in links {
            self.send_ping(l, kind::PONG, 0);
        }
    }

    fn broadcast(&mut self, msg: &Message) {
        let links: Vec<LinkId> = self.nodes.values().filter(|n| n.name != self.myself && !n.is(node_flags::HANDSHAKE)).filter_map(|n| n.link).collect();
        for l in links {
            self.send(l, msg.clone());
        }
    }

    // ---- Messages in ----

    /// A message arrived on `link`. `peer_ip` is the link's remote address, `local_ip` this
    /// end's (a node learns its own IP from the first MEET, as Redis does).
    pub fn message(&mut self, link: LinkId, peer_ip: &str, local_ip: &str, msg: Message, now: u64) {
        let Some(l) = self.links.get(&link) else { return };
        let (link_node, inbound) = (l.node, l.inbound);
        let h = &msg.header;
        if let Some(c) = self.received.get_mut(h.kind as usize) {
            *c += 1;
        }
        let kind = h.kind;
        // getNodeFromLinkAndMsg: the link's node unless it is still in handshake, else the
        // node the header names, if known.
        let handshake = |n: &NodeName| self.nodes.get(n).is_some_and(|n| n.is(node_flags::HANDSHAKE));
        let sender = match link_node {
            Some(n) if !handshake(&n) => Some(n),
            _ => (self.nodes.contains_key(&h.sender) && !handshake(&h.sender)).then_some(h.sender),
        };
        if let Some(s) = sender {
            // The inbound link is how this node hears from the sender.
            if inbound {
                if let Some(n) = self.nodes.get_mut(&s) {
                    n.inbound_link = Some(link);
                }
                if let Some(l) = self.links.get_mut(&link) {
                    l.node = Some(s);
                }
            }
            if h.current_epoch > self.current_epoch {
                self.current_epoch = h.current_epoch;
                self.save();
            }
            let n = self.nodes.get_mut(&s).expect("known sender");
            n.data_received = now;
            if h.config_epoch > n.config_epoch {
                n.config_epoch = h.config_epoch;
                self.save();
            }
            let n = self.nodes.get_mut(&s).expect("known sender");
            n.repl_offset = h.offset;
            self.note_primary_paused(s, h);
        }
        match kind {
            kind::PING | kind::PONG | kind::MEET => self.ping_like(link, link_node, inbound, sender, peer_ip, local_ip, &msg, now),
            kind::FAIL => {
                let Body::Fail { node } = &msg.body else { return };
                if sender.is_some() {
                    if let Some(f) = self.nodes.get_mut(node) {
                        if !f.is(node_flags::FAIL) && !f.is(node_flags::MYSELF) {
                            f.flags = (f.flags | node_flags::FAIL) & !node_flags::PFAIL;
                            f.fail_time = now;
                            self.update_state();
                            self.save();
                        }
                    }
                }
            }
            kind::MFSTART => {
                if let Some(s) = sender {
                    self.mfstart_received(s, now);
                }
            }
            kind::FAILOVER_AUTH_REQUEST => {
                if let Some(s) = sender {
                    self.vote_if_needed(s, &msg.header, now);
                }
            }
            kind::FAILOVER_AUTH_ACK => {
                // A vote counts from a primary serving slots, for this election's epoch.
                if let Some(n) = sender.and_then(|s| self.nodes.get(&s)) {
                    if n.is(node_flags::MASTER) && n.slots.count() > 0 && msg.header.current_epoch >= self.failover_auth_epoch {
                        self.failover_auth_count += 1;
                    }
                }
            }
            kind::PUBLISH | kind::PUBLISHSHARD => {
                // Redis delivers a publish only from a node it knows.
                if let (Some(_), Body::Publish { channel, message }) = (sender, &msg.body) {
                    self.actions.push(Action::Deliver { shard: kind == kind::PUBLISHSHARD, channel: channel.clone(), message: message.clone() });
                }
            }
            kind::UPDATE => {
                let Body::Update { config_epoch, node, slots } = &msg.body else { return };
                if sender.is_none() {
                    return;
                }
                let Some(n) = self.nodes.get(node) else { return };
                if n.config_epoch >= *config_epoch {
                    return;
                }
                if n.is(node_flags::SLAVE) {
                    self.set_as_primary(*node);
                }
                if let Some(n) = self.nodes.get_mut(node) {
                    n.config_epoch = *config_epoch;
                }
                self.update_slots_with(*node, *config_epoch, slots);
                self.save();
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn ping_like(&mut self, link: LinkId, link_node: Option<NodeName>, inbound: bool, sender: Option<NodeName>, peer_ip: &str, local_ip: &str, msg: &Message, now: u64) {
        let h = &msg.header;
        let kind = h.kind;
        if kind == kind::PING || kind == kind::MEET {
            // Learn our own address from a MEET (or the first ping) unless it is announced.
            if self.config.announce_ip.is_empty() && (kind == kind::MEET || self.me().ip.is_empty()) && !local_ip.is_empty() {
                let me = self.myself;
                if let Some(m) = self.nodes.get_mut(&me) {
                    if m.ip != local_ip {
                        m.ip = local_ip.to_string();
                        self.save();
                    }
                }
            }
            // A MEET from a node we do not know: add it in handshake, trusting its gossip.
            if sender.is_none() && kind == kind::MEET && !self.nodes.contains_key(&h.sender) {
                let name = random_name(&mut self.rng);
                let mut n = Node::new(name, node_flags::HANDSHAKE, now);
                n.ip = if h.ip.is_empty() { peer_ip.to_string() } else { String::from_utf8_lossy(&h.ip).into_owned() };
                n.port = h.port;
                n.pport = h.pport;
                n.cport = h.cport;
                self.nodes.insert(name, n);
                self.save();
                self.process_gossip(None, msg, now);
            }
            self.send_ping(link, kind::PONG, now);
        }
        if let Some(ln) = link_node {
            let in_handshake = self.nodes.get(&ln).is_some_and(|n| n.is(node_flags::HANDSHAKE));
            if in_handshake {
                if self.nodes.contains_key(&h.sender) && h.sender != ln {
                    // We already know this node under its real name: drop the handshake
                    // node (its address may be new, a later ping updates it).
                    self.nodes.remove(&ln);
                    self.close(link);
                    self.save();
                    return;
                }
                // The handshake node takes its real name.
                let mut n = self.nodes.remove(&ln).expect("handshake node");
                n.name = h.sender;
                n.flags &= !node_flags::HANDSHAKE;
                n.flags |= h.flags & (node_flags::MASTER | node_flags::SLAVE);
                self.nodes.insert(h.sender, n);
                if let Some(l) = self.links.get_mut(&link) {
                    l.node = Some(h.sender);
                }
                self.save();
            } else if ln != h.sender {
                // The node at that address is another node now: forget the address.
                if let Some(n) = self.nodes.get_mut(&ln) {
                    n.flags |= node_flags::NOADDR;
                    n.ip.clear();
                    n.port = 0;
                    n.cport = 0;
                }
                self.close(link);
                self.save();
                return;
            }
        }
        if let Some(s) = sender {
            let n = self.nodes.get_mut(&s).expect("known sender");
            n.flags = (n.flags & !node_flags::NOFAILOVER) | (h.flags & node_flags::NOFAILOVER);
            if let Some(Extension::Hostname(host)) = match &msg.body {
                Body::Ping { extensions, .. } => extensions.iter().find(|e| matches!(e, Extension::Hostname(_))),
                _ => None,
            } {
                n.hostname = String::from_utf8_lossy(host).into_owned();
            } else if matches!(&msg.body, Body::Ping { .. }) {
                n.hostname.clear();
            }
            if kind == kind::PING && !n.is(node_flags::HANDSHAKE) {
                let ip = if h.ip.is_empty() { peer_ip.to_string() } else { String::from_utf8_lossy(&h.ip).into_owned() };
                if n.ip != ip || n.port != h.port || n.cport != h.cport {
                    n.ip = ip;
                    n.port = h.port;
                    n.cport = h.cport;
                    let old = n.link.take();
                    if let Some(old) = old {
                        self.close(old);
                    }
                    self.save();
                }
            }
        }
        if !inbound && kind == kind::PONG {
            if let Some(n) = self.links.get(&link).and_then(|l| l.node).and_then(|name| self.nodes.get_mut(&name)) {
                n.pong_received = now;
                n.ping_sent = 0;
                if n.is(node_flags::PFAIL) {
                    n.flags &= !node_flags::PFAIL;
                    self.update_state();
                } else if n.is(node_flags::FAIL) {
                    let name = n.name;
                    self.clear_failure_if_needed(name, now);
                }
            }
        }
        let Some(s) = sender else { return };
        // Role changes.
        if h.replica_of.is_null() {
            self.set_as_primary(s);
        } else {
            let n = self.nodes.get_mut(&s).expect("known sender");
            if n.is(node_flags::MASTER) {
                n.flags = (n.flags & !(node_flags::MASTER | node_flags::MIGRATE_TO)) | node_flags::SLAVE;
                self.del_node_slots(s);
                self.save();
            }
            let known_primary = self.nodes_has(&h.replica_of);
            if known_primary && self.nodes[&s].primary != Some(h.replica_of) {
                let n = self.nodes.get_mut(&s).expect("known sender");
                n.primary = Some(h.replica_of);
                // A primary that has (had) a replica may receive a migrating one
                // (clusterNodeAddSlave's MIGRATE_TO).
                if let Some(p) = self.nodes.get_mut(&h.replica_of) {
                    p.flags |= node_flags::MIGRATE_TO;
                }
                self.save();
            }
        }
        // Slots: a primary claiming slots at a newer config epoch takes them.
        let sender_primary = {
            let n = &self.nodes[&s];
            if n.is(node_flags::MASTER) { Some(s) } else { n.primary }
        };
        let dirty = sender_primary.and_then(|p| self.nodes.get(&p)).is_some_and(|p| p.slots != h.slots);
        if dirty && self.nodes[&s].is(node_flags::MASTER) {
            self.update_slots_with(s, h.config_epoch, &h.slots);
        }
        // The reverse: the sender claims a slot this node knows is served at a newer config
        // epoch (a primary back from a partition, say). Tell it with an UPDATE about the
        // slot's owner, as clusterProcessPacket does (one per message).
        if dirty {
            let stale_against = h.slots.iter().find_map(|slot| {
                let o = self.owners[slot as usize].filter(|o| *o != s)?;
                (self.nodes.get(&o)?.config_epoch > h.config_epoch).then_some(o)
            });
            if let (Some(owner), Some(link)) = (stale_against, self.nodes[&s].link) {
                let o = &self.nodes[&owner];
                let body = Body::Update { config_epoch: o.config_epoch, node: owner, slots: o.slots.clone() };
                let msg = Message { header: self.header(kind::UPDATE), body };
                self.send(link, msg);
            }
        }
        // Two primaries with the same config epoch: the one with the smaller name takes a new
        // one (clusterHandleConfigEpochCollision), so that slot conflicts always resolve.
        let me = self.me();
        if me.is(node_flags::MASTER) && self.nodes[&s].is(node_flags::MASTER) && h.config_epoch == me.config_epoch && self.myself < s {
            self.current_epoch += 1;
            let epoch = self.current_epoch;
            let me = self.myself;
            self.nodes.get_mut(&me).expect("myself").config_epoch = epoch;
            self.save();
        }
        self.process_gossip(Some(s), msg, now);
    }

    fn nodes_has(&self, n: &NodeName) -> bool {
        self.nodes.contains_key(n)
    }

    fn set_as_primary(&mut self, name: NodeName) {
        let Some(n) = self.nodes.get_mut(&name) else { return };
        if n.is(node_flags::MASTER) {
            return;
        }
        // A replica promoted takes over its primary's place, replicas included
        // (clusterSetNodeAsMaster): an orphan it becomes may receive a migrating replica.
        let was_replica = n.primary.is_some() && name != self.myself;
        n.flags = (n.flags & !node_flags::SLAVE) | node_flags::MASTER | if was_replica { node_flags::MIGRATE_TO } else { 0 };
        n.primary = None;
        self.save();
    }

    /// Unassigns a slot (clusterDelSlot).
    pub(crate) fn del_slot(&mut self, slot: u16) {
        self.slots_version += 1;
        if let Some(o) = self.owners[slot as usize].take() {
            if let Some(n) = self.nodes.get_mut(&o) {
                n.slots.remove(slot);
            }
        }
    }

    /// Assigns a slot (clusterAddSlot).
    pub(crate) fn add_slot(&mut self, node: NodeName, slot: u16) {
        self.del_slot(slot);
        self.slots_version += 1;
        self.owners[slot as usize] = Some(node);
        if let Some(n) = self.nodes.get_mut(&node) {
            n.slots.insert(slot);
        }
    }

    /// After a command changed the table: the state is recomputed and nodes.conf saved.
    pub(crate) fn after_change(&mut self) {
        self.update_state();
        self.save();
    }

    /// Removes a node from the table (clusterDelNode): its slots, its links, the failure
    /// reports it made, and its replicas' link to it.
    pub(crate) fn remove_node(&mut self, name: NodeName) {
        self.del_node_slots(name);
        self.slots_version += 1;
        self.migrating.retain(|_, n| *n != name);
        self.importing.retain(|_, n| *n != name);
        if let Some(n) = self.nodes.remove(&name) {
            for l in [n.link, n.inbound_link].into_iter().flatten() {
                self.close(l);
            }
        }
        for n in self.nodes.values_mut() {
            n.fail_reports.retain(|(r, _)| *r != name);
            if n.primary == Some(name) {
                n.primary = None;
            }
        }
    }

    fn del_node_slots(&mut self, name: NodeName) {
        for s in 0..SLOTS {
            if self.owners[s] == Some(name) {
                self.owners[s] = None;
                self.slots_version += 1;
            }
        }
        if let Some(n) = self.nodes.get_mut(&name) {
            n.slots = Slots::default();
        }
    }

    /// clusterUpdateSlotsConfigWith: every slot `sender` claims whose owner is unknown or has
    /// an older config epoch moves to `sender` (except slots this node is importing).
    fn update_slots_with(&mut self, sender: NodeName, epoch: u64, slots: &Slots) {
        if sender == self.myself {
            return;
        }
        let mut changed = false;
        // The node this one serves or follows, and whether this update takes slots from it.
        let me = self.myself;
        let followed = if self.nodes[&me].is(node_flags::SLAVE) { self.nodes[&me].primary } else { Some(me) };
        let mut took_from_followed = false;
        for s in slots.iter() {
            let cur = self.owners[s as usize];
            if cur == Some(sender) || self.importing.contains_key(&s) {
                continue;
            }
            let older = cur.and_then(|c| self.nodes.get(&c)).is_none_or(|c| c.config_epoch < epoch);
            if older {
                if let Some(c) = cur.and_then(|c| self.nodes.get_mut(&c)) {
                    c.slots.remove(s);
                }
                took_from_followed |= cur.is_some() && cur == followed;
                self.owners[s as usize] = Some(sender);
                self.slots_version += 1;
                if let Some(n) = self.nodes.get_mut(&sender) {
                    n.slots.insert(s);
                }
                changed = true;
            }
        }
        if changed {
            // The node this one serves or follows lost its last slot to `sender`: follow
            // `sender` (a primary back from a failure becomes its successor's replica; its
            // other replicas follow the successor).
            if let Some(f) = followed.filter(|_| took_from_followed) {
                let lost = self.nodes.get(&f).is_some_and(|n| n.slots.count() == 0);
                if lost && f != sender && self.nodes.get(&sender).is_some_and(|n| n.is(node_flags::MASTER)) {
                    let m = self.nodes.get_mut(&me).expect("myself");
                    m.flags = (m.flags & !node_flags::MASTER) | node_flags::SLAVE;
                    m.primary = Some(sender);
                    let s = &self.nodes[&sender];
                    self.actions.push(Action::ReplicaOf { ip: s.ip.clone(), port: s.port });
                    // A primary paused for its replica's manual failover resumes (as a
                    // replica now: its clients' writes get -MOVED).
                    self.reset_manual_failover();
                }
            }
            self.update_state();
            self.save();
        }
    }

    fn process_gossip(&mut self, sender: Option<NodeName>, msg: &Message, now: u64) {
        let Body::Ping { gossip, .. } = &msg.body else { return };
        let sender_is_primary = sender.and_then(|s| self.nodes.get(&s)).is_some_and(|n| n.is(node_flags::MASTER));
        for g in gossip {
            if let Some(node) = self.nodes.get(&g.name) {
                let name = node.name;
                if let (Some(s), true) = (sender, sender_is_primary) {
                    if name != self.myself {
                        if g.flags & (node_flags::FAIL | node_flags::PFAIL) != 0 {
                            let n = self.nodes.get_mut(&name).expect("known");
                            match n.fail_reports.iter_mut().find(|(r, _)| *r == s) {
                                Some(r) => r.1 = now,
                                None => n.fail_reports.push((s, now)),
                            }
                            self.mark_failing_if_needed(name, now);
                        } else {
                            self.nodes.get_mut(&name).expect("known").fail_reports.retain(|(r, _)| *r != s);
                        }
                    }
                }
                let n = self.nodes.get_mut(&name).expect("known");
                if !n.is(node_flags::FAIL) && !n.is(node_flags::PFAIL) && n.ping_sent == 0 && n.fail_reports.is_empty() {
                    let pong = g.pong_received as u64 * 1000;
                    if pong <= now + 500 && pong > n.pong_received {
                        n.pong_received = pong;
                    }
                }
            } else if sender.is_some() && g.flags & node_flags::NOADDR == 0 {
                // A node we did not know, vouched for by a known node: trusted with its name.
                let mut n = Node::new(g.name, g.flags & !(node_flags::MYSELF | node_flags::PFAIL | node_flags::FAIL), now);
                n.flags &= node_flags::MASTER | node_flags::SLAVE | node_flags::NOFAILOVER;
                n.ip = String::from_utf8_lossy(&g.ip).into_owned();
                n.port = g.port;
                n.cport = g.cport;
                n.pport = g.pport;
                self.nodes.insert(g.name, n);
                self.save();
            }
        }
    }

    /// The failure reports still valid (younger than twice the node timeout).
    fn valid_reports(&mut self, name: NodeName, now: u64) -> usize {
        let max_age = self.config.node_timeout_ms * 2;
        let n = self.nodes.get_mut(&name).expect("known");
        n.fail_reports.retain(|(_, t)| now.saturating_sub(*t) <= max_age);
        n.fail_reports.len()
    }

    /// PFAIL becomes FAIL when a majority of the primaries with slots agree.
    fn mark_failing_if_needed(&mut self, name: NodeName, now: u64) {
        let quorum = self.size() / 2 + 1;
        let n = &self.nodes[&name];
        if !n.is(node_flags::PFAIL) || n.is(node_flags::FAIL) {
            return;
        }
        let mut failures = self.valid_reports(name, now);
        if self.me().is(node_flags::MASTER) {
            failures += 1;
        }
        if failures < quorum {
            return;
        }
        let n = self.nodes.get_mut(&name).expect("known");
        n.flags = (n.flags | node_flags::FAIL) & !node_flags::PFAIL;
        n.fail_time = now;
        if self.me().is(node_flags::MASTER) {
            let msg = Message { header: self.header(kind::FAIL), body: Body::Fail { node: name } };
            self.broadcast(&msg);
        }
        self.update_state();
        self.save();
    }

    fn clear_failure_if_needed(&mut self, name: NodeName, now: u64) {
        let undo = self.config.node_timeout_ms * 2;
        let n = self.nodes.get_mut(&name).expect("known");
        let serves = n.is(node_flags::MASTER) && n.slots.count() > 0;
        if !serves || now.saturating_sub(n.fail_time) > undo {
            n.flags &= !node_flags::FAIL;
            self.update_state();
            self.save();
        }
    }

    /// Primaries serving at least one slot (the quorum's base).
    pub fn size(&self) -> usize {
        self.nodes.values().filter(|n| n.is(node_flags::MASTER) && n.slots.count() > 0).count()
    }

    fn update_state(&mut self) {
        let mut ok = true;
        if self.config.require_full_coverage {
            // Every slot has an owner, and no owner failed (each owner looked up once).
            ok = self.owners.iter().all(|o| o.is_some())
                && self.nodes.values().filter(|n| n.is(node_flags::FAIL)).all(|n| n.slots.count() == 0);
        }
        self.ok = ok;
    }

    // ---- The cron ----

    /// Redis's clusterCron, run every 100 ms: forgets handshakes that never completed,
    /// connects to nodes without a link, pings, and marks nodes that do not answer as PFAIL.
    pub fn tick(&mut self, now: u64) {
        self.ticks += 1;
        let timeout = self.config.node_timeout_ms;
        let handshake_timeout = timeout.max(1000);
        let names: Vec<NodeName> = self.nodes.keys().copied().collect();
        for name in &names {
            let Some(n) = self.nodes.get(name) else { continue };
            if n.is(node_flags::MYSELF) || n.is(node_flags::NOADDR) {
                continue;
            }
            if n.is(node_flags::HANDSHAKE) && now.saturating_sub(n.ctime) > handshake_timeout {
                let link = n.link;
                self.nodes.remove(name);
                if let Some(l) = link {
                    self.close(l);
                }
                continue;
            }
            if n.link.is_none() && !n.ip.is_empty() {
                self.actions.push(Action::Connect { node: *name, ip: n.ip.clone(), cport: n.cport });
            }
        }
        // Every second, ping the node with the oldest pong among five random ones.
        if self.ticks.is_multiple_of(10) {
            let pingable: Vec<NodeName> = self.nodes.values().filter(|n| n.link.is_some() && n.ping_sent == 0 && !n.is(node_flags::MYSELF) && !n.is(node_flags::HANDSHAKE)).map(|n| n.name).collect();
            let mut best: Option<NodeName> = None;
            for _ in 0..5.min(pingable.len()) {
                let c = pingable[self.rng.gen_range(0..pingable.len())];
                if best.is_none_or(|b| self.nodes[&c].pong_received < self.nodes[&b].pong_received) {
                    best = Some(c);
                }
            }
            if let Some(link) = best.and_then(|b| self.nodes[&b].link) {
                self.send_ping(link, kind::PING, now);
            }
        }
        let mut state_dirty = false;
        for name in &names {
            let Some(n) = self.nodes.get(name) else { continue };
            if n.is(node_flags::MYSELF) || n.is(node_flags::NOADDR) || n.is(node_flags::HANDSHAKE) {
                continue;
            }
            // A link whose ping went unanswered for half the timeout is reopened.
            if let Some(link) = n.link {
                let ctime = self.links.get(&link).map_or(now, |l| l.ctime);
                if now.saturating_sub(ctime) > timeout && n.ping_sent != 0 && now.saturating_sub(n.ping_sent) > timeout / 2 && now.saturating_sub(n.data_received) > timeout / 2 {
                    self.close(link);
                }
            }
            let n = &self.nodes[name];
            if let Some(link) = n.link {
                // A primary in a manual failover pings the replica every tick: each ping
                // carries its offset (and, once paused, the PAUSED flag).
                if self.mf.replica == Some(*name) && self.me().is(node_flags::MASTER) {
                    self.send_ping(link, kind::PING, now);
                    continue;
                }
                if n.ping_sent == 0 && now.saturating_sub(n.pong_received) > timeout / 2 {
                    self.send_ping(link, kind::PING, now);
                    continue;
                }
            }
            let n = self.nodes.get_mut(name).expect("known");
            if n.ping_sent != 0 && now.saturating_sub(n.ping_sent) > timeout && !n.is(node_flags::PFAIL) && !n.is(node_flags::FAIL) {
                n.flags |= node_flags::PFAIL;
                state_dirty = true;
            }
        }
        if state_dirty {
            self.update_state();
        }
        self.failover_cron(now);
    }

    // ---- Commands ----

    /// PUBLISH in cluster mode (clusterPropagatePublish): the message goes to every node; a
    /// shard channel's (SPUBLISH) only to the nodes of this node's shard (its primary and
    /// that primary's replicas).
    pub fn publish(&mut self, channel: &[u8], message: &[u8], shard: bool) {
        let kind = if shard { kind::PUBLISHSHARD } else { kind::PUBLISH };
        let msg = Message { header: self.header(kind), body: Body::Publish { channel: channel.to_vec(), message: message.to_vec() } };
        if !shard {
            self.broadcast(&msg);
            return;
        }
        let me = self.me();
        let primary = if me.is(node_flags::SLAVE) { me.primary } else { Some(self.myself) };
        let links: Vec<LinkId> = self.nodes.values().filter(|n| n.name != self.myself && (Some(n.name) == primary || (n.primary.is_some() && n.primary == primary))).filter_map(|n| n.link).collect();
        for l in links {
            self.send(l, msg.clone());
        }
    }

    /// CLUSTER MEET ip port [cport]: a handshake node with the MEET flag; the cron connects.
    pub fn meet(&mut self, ip: &str, port: u16, cport: u16, now: u64) -> Result<(), String> {
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(format!("ERR Invalid node address specified: {ip}:{port}"));
        }
        if self.nodes.values().any(|n| n.is(node_flags::HANDSHAKE) && n.ip == ip && n.port == port && n.cport == cport) {
            // Already in handshake with it: Redis answers OK and does nothing.
            return Ok(());
        }
        let name = random_name(&mut self.rng);
        let mut n = Node::new(name, node_flags::HANDSHAKE | node_flags::MEET, now);
        n.ip = ip.to_string();
        n.port = port;
        n.cport = cport;
        self.nodes.insert(name, n);
        Ok(())
    }

    /// CLUSTER ADDSLOTS: every slot must be free (Redis's errors).
    pub fn add_slots(&mut self, slots: &[u16]) -> Result<(), String> {
        let mut seen = vec![false; SLOTS];
        for &s in slots {
            if s as usize >= SLOTS {
                return Err("ERR Invalid or out of range slot".into());
            }
            if self.owners[s as usize].is_some() {
                return Err(format!("ERR Slot {s} is already busy"));
            }
            if std::mem::replace(&mut seen[s as usize], true) {
                return Err(format!("ERR Slot {s} specified multiple times"));
            }
        }
        let me = self.myself;
        for &s in slots {
            self.importing.remove(&s);
            self.owners[s as usize] = Some(me);
            self.slots_version += 1;
            self.nodes.get_mut(&me).expect("myself").slots.insert(s);
        }
        self.update_state();
        self.save();
        Ok(())
    }

    /// The table as CLUSTER NODES shows it (`for_file`: as nodes.conf holds it, without the
    /// nodes still in handshake).
    pub fn nodes_conf(&self, for_file: bool) -> NodesConf {
        let nodes = self
            .nodes
            .values()
            .filter(|n| !(for_file && n.is(node_flags::HANDSHAKE)))
            .map(|n| {
                let me = n.is(node_flags::MYSELF);
                NodeEntry {
                    name: n.name,
                    ip: n.ip.clone(),
                    port: n.port,
                    cport: n.cport,
                    hostname: n.hostname.clone(),
                    flags: n.flags & !node_flags::MEET & !node_flags::MIGRATE_TO,
                    primary: n.primary,
                    ping_sent: n.ping_sent,
                    pong_received: if me { 0 } else { n.pong_received },
                    config_epoch: if n.is(node_flags::SLAVE) { n.primary.and_then(|p| self.nodes.get(&p)).map_or(n.config_epoch, |p| p.config_epoch) } else { n.config_epoch },
                    connected: me || n.link.is_some(),
                    slots: n.slots.ranges(),
                    migrating: if me { self.migrating.iter().map(|(s, n)| (*s, *n)).collect() } else { Vec::new() },
                    importing: if me { self.importing.iter().map(|(s, n)| (*s, *n)).collect() } else { Vec::new() },
                }
            })
            .collect();
        NodesConf { nodes, current_epoch: self.current_epoch, last_vote_epoch: self.last_vote_epoch }
    }
}

fn gossip_of(n: &Node) -> Gossip {
    Gossip {
        name: n.name,
        ping_sent: (n.ping_sent / 1000) as u32,
        pong_received: (n.pong_received / 1000) as u32,
        ip: n.ip.as_bytes().to_vec(),
        port: n.port,
        cport: n.cport,
        flags: n.flags,
        pport: n.pport,
    }
}
