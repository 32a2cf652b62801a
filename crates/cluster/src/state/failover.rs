//! Failover, both kinds, and replica migration, after Redis 7.0's `cluster.c`:
//!
//! - **Automatic** (clusterHandleSlaveFailover): a replica whose primary is FAIL waits
//!   500 ms + a random 0-500 ms (so that the FAIL reaches every primary first) + 1 s per
//!   sibling replica with a larger replication offset (its *rank*, clusterGetSlaveRank: the
//!   freshest replica asks first, so the winner is the one that lost the least), then asks
//!   every primary for its vote at a new epoch (FAILOVER_AUTH_REQUEST). A primary votes once
//!   per epoch (clusterSendFailoverAuthIfNeeded); a majority of the primaries serving slots
//!   elects the replica, which takes its primary's slots at the election's epoch. A replica
//!   whose data is too old (`cluster-replica-validity-factor`: its link to the primary down
//!   for longer than `node_timeout * factor + repl-ping-replica-period` beyond one node
//!   timeout) does not run, nor does one with `cluster-replica-no-failover`.
//! - **Manual** (CLUSTER FAILOVER): the replica sends MFSTART to its primary; the primary
//!   holds its clients' writes for twice CLUSTER_MF_TIMEOUT and pings the replica every
//!   100 ms with its offset and, once paused, the PAUSED flag; the replica waits until it
//!   has applied exactly that offset, then runs the election at once, with the FORCEACK flag
//!   (primaries vote although its primary is up). Nothing acknowledged by the old primary
//!   is lost: every write it acknowledged is in the stream the replica applied. FORCE skips
//!   the offset agreement (the primary may be unreachable); TAKEOVER skips the election too
//!   (a new config epoch without agreement, clusterBumpConfigEpochWithoutConsensus). The
//!   whole of it times out after CLUSTER_MF_TIMEOUT (5 s); the primary resumes then, or as
//!   soon as it learns it lost its slots.
//!
//! - **Replica migration** (clusterHandleSlaveMigration): a replica may move from a primary
//!   with the most working replicas to an *orphaned* one (slots, no working replica left,
//!   and it had some), as long as its primary keeps more than `cluster-migration-barrier`;
//!   `cluster-allow-replica-migration no` turns it off.
//!
//! One difference from Redis, and why: Redis's primary is single-threaded, so the offset it
//! reads right after pausing is final. Abacus's connections run on several threads, and a
//! batch admitted just before the pause may still be reaching the stream; so the primary
//! announces PAUSED only once its offset has stayed the same for [`MF_STABLE_TICKS`] ticks
//! after the pause (200 ms). A Redis replica sees the same messages, a little later.

use abacus_cluster_bus::{flags0, kind, node_flags, Body, Header, Message, NodeName};
use rand::Rng;

use super::{Action, Cluster, LinkId};

/// CLUSTER_MF_TIMEOUT: how long a manual failover may take, ms.
pub const MF_TIMEOUT_MS: u64 = 5000;
/// CLUSTER_MF_PAUSE_MULT: the primary holds writes for this many timeouts at most.
const MF_PAUSE_MULT: u64 = 2;
/// CLUSTER_SLAVE_MIGRATION_DELAY: how long a primary stays orphaned before a replica moves.
const REPLICA_MIGRATION_DELAY_MS: u64 = 5000;
/// Ticks (100 ms each) the paused primary's offset must stay put before it is announced.
pub const MF_STABLE_TICKS: u32 = 2;

/// CLUSTER FAILOVER's option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverMode {
    /// Agree on the offset with the primary, then an election.
    Default,
    /// An election without the primary's agreement.
    Force,
    /// Neither: take the slots at a new epoch.
    Takeover,
}

/// A manual failover in progress (Redis's `mf_*` fields).
#[derive(Clone, Debug, Default)]
pub(super) struct ManualFailover {
    /// When it gives up, ms; 0: none in progress.
    pub end: u64,
    /// Replica: the election may start.
    pub can_start: bool,
    /// Primary: the replica that asked (its writes are held for it).
    pub replica: Option<NodeName>,
    /// Replica: the offset its paused primary announced.
    pub primary_offset: Option<u64>,
    /// Primary: its offset at the last tick, and for how many ticks it has not moved.
    pub last_offset: u64,
    pub stable_ticks: u32,
}

impl Cluster {
    /// The header's first flag byte: PAUSED from a primary held for a manual failover whose
    /// offset settled, FORCEACK on a manual failover's vote request.
    pub(super) fn mflags0(&self, msg_kind: u16) -> u8 {
        let mut f = 0;
        if self.mf.end != 0 {
            if self.me().is(node_flags::MASTER) && self.mf.replica.is_some() && self.mf.stable_ticks >= MF_STABLE_TICKS {
                f |= flags0::PAUSED;
            }
            if msg_kind == kind::FAILOVER_AUTH_REQUEST {
                f |= flags0::FORCEACK;
            }
        }
        f
    }

    /// A replica in a manual failover hears its paused primary's offset.
    pub(super) fn note_primary_paused(&mut self, sender: NodeName, h: &Header) {
        let me = self.me();
        if self.mf.end != 0 && !self.mf.can_start && me.is(node_flags::SLAVE) && me.primary == Some(sender) && h.mflags[0] & flags0::PAUSED != 0 {
            if self.mf.primary_offset != Some(h.offset) {
                self.actions.push(Action::Log(format!("Received replication offset for paused master manual failover: {}", h.offset)));
            }
            self.mf.primary_offset = Some(h.offset);
        }
    }

    /// MFSTART from one of this primary's replicas: hold writes and ping it with the offset.
    pub(super) fn mfstart_received(&mut self, sender: NodeName, now: u64) {
        let Some(n) = self.nodes.get(&sender) else { return };
        if n.primary != Some(self.myself) || !self.me().is(node_flags::MASTER) {
            return;
        }
        let link = n.link.or(n.inbound_link);
        self.reset_manual_failover();
        self.mf.end = now + MF_TIMEOUT_MS;
        self.mf.replica = Some(sender);
        self.mf.last_offset = self.repl.offset;
        self.actions.push(Action::PauseWrites { until_ms: now + MF_TIMEOUT_MS * MF_PAUSE_MULT });
        if let Some(link) = link {
            self.send_ping(link, kind::PING, now);
        }
    }

    /// Ends a manual failover, lifting the primary's pause (resetManualFailover).
    pub(crate) fn reset_manual_failover(&mut self) {
        if self.mf.replica.is_some() {
            self.actions.push(Action::Unpause);
        }
        self.mf = ManualFailover::default();
    }

    /// Whether a manual failover is in progress here.
    pub fn manual_failover_in_progress(&self) -> bool {
        self.mf.end != 0
    }

    /// CLUSTER FAILOVER [FORCE|TAKEOVER], with Redis's checks and errors.
    pub fn failover(&mut self, mode: FailoverMode, now: u64) -> Result<(), String> {
        let me = self.me();
        if me.is(node_flags::MASTER) {
            return Err("ERR You should send CLUSTER FAILOVER to a replica".into());
        }
        let Some(p) = me.primary.and_then(|p| self.nodes.get(&p)) else { return Err("ERR I'm a replica but my master is unknown to me".into()) };
        if mode == FailoverMode::Default && (p.is(node_flags::FAIL) || p.link.is_none()) {
            return Err("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE".into());
        }
        let link = p.link;
        self.reset_manual_failover();
        self.mf.end = now + MF_TIMEOUT_MS;
        match mode {
            FailoverMode::Takeover => {
                self.bump_epoch_without_consensus();
                self.replace_primary(now);
            }
            FailoverMode::Force => self.mf.can_start = true,
            FailoverMode::Default => {
                if let Some(link) = link {
                    let msg = Message { header: self.header(kind::MFSTART), body: Body::Empty };
                    self.send(link, msg);
                }
            }
        }
        Ok(())
    }

    /// clusterBumpConfigEpochWithoutConsensus: a new config epoch unless this node's is
    /// already the only greatest.
    fn bump_epoch_without_consensus(&mut self) {
        let max = self.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0).max(self.current_epoch);
        let me = self.myself;
        let mine = self.nodes[&me].config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch += 1;
            self.nodes.get_mut(&me).expect("myself").config_epoch = self.current_epoch;
            self.save();
        }
    }

    /// Run by the cron: manual failover's timeout and progress, then the replica's election.
    pub(super) fn failover_cron(&mut self, now: u64) {
        if self.mf.end != 0 && self.mf.end < now {
            self.actions.push(Action::Log(format!("Manual failover timed out (primary offset {:?}, this node's {}).", self.mf.primary_offset, self.repl.offset)));
            self.reset_manual_failover();
        }
        let me = self.myself;
        let m = self.nodes.get_mut(&me).expect("myself");
        m.flags = (m.flags & !node_flags::NOFAILOVER) | if self.config.replica_no_failover { node_flags::NOFAILOVER } else { 0 };
        if self.mf.replica.is_some() {
            if self.repl.offset == self.mf.last_offset {
                self.mf.stable_ticks = self.mf.stable_ticks.saturating_add(1);
            } else {
                self.mf.last_offset = self.repl.offset;
                self.mf.stable_ticks = 0;
            }
        }
        if self.me().is(node_flags::SLAVE) {
            // clusterHandleManualFailover: the primary is paused at an offset this replica
            // has applied now, so the election may start.
            if self.mf.end != 0 && !self.mf.can_start && self.mf.primary_offset == Some(self.repl.offset) {
                self.mf.can_start = true;
                self.actions.push(Action::Log("All master replication stream processed, manual failover can start.".into()));
            }
            self.replica_failover(now);
            if self.config.allow_replica_migration {
                self.replica_migration(now);
            }
        }
    }

    /// Working (not FAIL) replicas of `primary` (clusterCountNonFailingSlaves).
    fn ok_replicas(&self, primary: NodeName) -> usize {
        self.nodes.values().filter(|n| n.primary == Some(primary) && n.is(node_flags::SLAVE) && !n.is(node_flags::FAIL)).count()
    }

    /// Replica migration (clusterCron's orphan count, then clusterHandleSlaveMigration): a
    /// primary with slots that had replicas and has no working one left is *orphaned*; a
    /// replica of a primary with the most working replicas (at least two), the one with the
    /// smallest name among them, moves to it after it stayed orphaned for 5 s, provided its
    /// own primary keeps more than `cluster-migration-barrier` working replicas.
    fn replica_migration(&mut self, now: u64) {
        let Some(mine) = self.me().primary else { return };
        let (mut orphaned, mut max, mut this) = (0, 0, 0);
        for n in self.nodes.values().filter(|n| n.is(node_flags::MASTER) && !n.is(node_flags::FAIL)) {
            let ok = self.ok_replicas(n.name);
            if ok == 0 && n.slots.count() > 0 && n.is(node_flags::MIGRATE_TO) {
                orphaned += 1;
            }
            max = max.max(ok);
            if n.name == mine {
                this = ok;
            }
        }
        if orphaned == 0 || max < 2 || this != max || !self.ok {
            return;
        }
        let mine_ok = self.nodes.values().filter(|n| n.primary == Some(mine) && n.is(node_flags::SLAVE) && !n.is(node_flags::FAIL) && !n.is(node_flags::PFAIL)).count();
        if mine_ok as u64 <= self.config.migration_barrier {
            return;
        }
        let mut candidate = self.myself;
        let mut target: Option<NodeName> = None;
        let names: Vec<NodeName> = self.nodes.keys().copied().collect();
        for name in names {
            let n = &self.nodes[&name];
            let ok = if n.is(node_flags::MASTER) { self.ok_replicas(name) } else { 0 };
            let is_orphaned = n.is(node_flags::MASTER) && !n.is(node_flags::FAIL) && n.is(node_flags::MIGRATE_TO) && ok == 0;
            if is_orphaned && target.is_none() && n.slots.count() > 0 {
                target = Some(name);
            }
            if ok == max {
                for r in self.nodes.values().filter(|r| r.primary == Some(name) && r.is(node_flags::SLAVE)) {
                    if r.name < candidate {
                        candidate = r.name;
                    }
                }
            }
            let n = self.nodes.get_mut(&name).expect("listed above");
            if !is_orphaned {
                n.orphaned_time = 0;
            } else if n.orphaned_time == 0 {
                n.orphaned_time = now;
            }
        }
        let Some(t) = target else { return };
        if candidate != self.myself || now.saturating_sub(self.nodes[&t].orphaned_time) <= REPLICA_MIGRATION_DELAY_MS {
            return;
        }
        // clusterSetMaster: follow the orphan.
        let me = self.myself;
        self.nodes.get_mut(&me).expect("myself").primary = Some(t);
        if let Some(p) = self.nodes.get_mut(&t) {
            p.flags |= node_flags::MIGRATE_TO;
        }
        let p = &self.nodes[&t];
        self.actions.push(Action::ReplicaOf { ip: p.ip.clone(), port: p.port });
        self.reset_manual_failover();
        self.save();
    }

    /// clusterGetSlaveRank: sibling replicas (that may fail over) with a larger offset.
    pub fn replica_rank(&self) -> u64 {
        let me = self.me();
        let Some(primary) = me.primary else { return 0 };
        self.nodes.values().filter(|n| n.name != self.myself && n.primary == Some(primary) && n.is(node_flags::SLAVE) && !n.is(node_flags::NOFAILOVER) && n.repl_offset > self.repl.offset).count() as u64
    }

    /// A primary's vote for a replica asking to replace its primary
    /// (clusterSendFailoverAuthIfNeeded): one vote per epoch, none for the same primary's
    /// replicas within twice the node timeout, none if a slot it claims is served at a newer
    /// config epoch than the one it announces, and none while its primary is up unless the
    /// request is a manual failover's (FORCEACK).
    pub(super) fn vote_if_needed(&mut self, requester: NodeName, h: &Header, now: u64) {
        let me = self.me();
        if me.is(node_flags::SLAVE) || me.slots.count() == 0 {
            return;
        }
        let who = String::from_utf8_lossy(requester.as_bytes()).into_owned();
        // Redis's clusterSendFailoverAuthIfNeeded logs each refusal and each vote.
        let deny = |c: &mut Self, why: String| c.actions.push(Action::Log(format!("Failover auth denied to {who}: {why}")));
        if h.current_epoch < self.current_epoch {
            deny(self, format!("reqEpoch ({}) < curEpoch({})", h.current_epoch, self.current_epoch));
            return;
        }
        if self.last_vote_epoch == self.current_epoch {
            deny(self, format!("already voted for epoch {}", self.current_epoch));
            return;
        }
        let Some(r) = self.nodes.get(&requester) else { return };
        let Some(primary) = r.primary.filter(|_| r.is(node_flags::SLAVE)) else {
            deny(self, "it is a master node".into());
            return;
        };
        let force = h.mflags[0] & flags0::FORCEACK != 0;
        let Some(p) = self.nodes.get(&primary) else {
            deny(self, "I don't know its master".into());
            return;
        };
        if !p.is(node_flags::FAIL) && !force {
            deny(self, "its master is up".into());
            return;
        }
        if now.saturating_sub(p.voted_time) < self.config.node_timeout_ms * 2 {
            let wait = (self.config.node_timeout_ms * 2).saturating_sub(now.saturating_sub(p.voted_time));
            deny(self, format!("can't vote about this master before {wait} milliseconds"));
            return;
        }
        for s in h.slots.iter() {
            if let Some(o) = self.owners[s as usize].and_then(|o| self.nodes.get(&o)) {
                if o.config_epoch > h.config_epoch {
                    let e = o.config_epoch;
                    deny(self, format!("slot {s} epoch ({e}) > reqEpoch ({})", h.config_epoch));
                    return;
                }
            }
        }
        self.last_vote_epoch = self.current_epoch;
        if let Some(p) = self.nodes.get_mut(&primary) {
            p.voted_time = now;
        }
        self.save();
        self.actions.push(Action::Log(format!("Failover auth granted to {who} for epoch {}", self.current_epoch)));
        if let Some(link) = self.nodes.get(&requester).and_then(|n| n.link) {
            let msg = Message { header: self.header(kind::FAILOVER_AUTH_ACK), body: Body::Empty };
            self.send(link, msg);
        }
    }

    /// clusterHandleSlaveFailover: schedules the election (delay by rank; none for a manual
    /// failover), asks for votes, and with a majority takes the primary's slots.
    fn replica_failover(&mut self, now: u64) {
        let manual = self.mf.end != 0 && self.mf.can_start;
        let me = self.me();
        let Some(primary) = me.primary.filter(|_| me.is(node_flags::SLAVE)) else { return };
        let Some(p) = self.nodes.get(&primary) else { return };
        if (!manual && (!p.is(node_flags::FAIL) || self.config.replica_no_failover)) || p.slots.count() == 0 {
            return;
        }
        let timeout = self.config.node_timeout_ms;
        let mut data_age = self.repl.data_age_ms;
        if data_age > timeout {
            data_age -= timeout;
        }
        let factor = self.config.replica_validity_factor;
        if factor != 0 && data_age > self.config.repl_ping_period_ms.saturating_add(timeout.saturating_mul(factor)) && !manual {
            return;
        }
        let auth_timeout = (timeout * 2).max(2000) as i64;
        let auth_retry = auth_timeout * 2;
        let auth_age = now as i64 - self.failover_auth_time as i64;
        if self.failover_auth_time == 0 || auth_age > auth_retry {
            self.failover_auth_count = 0;
            self.failover_auth_sent = false;
            self.failover_auth_rank = self.replica_rank();
            self.failover_auth_time = now + 500 + self.rng.gen_range(0..500) + self.failover_auth_rank * 1000;
            if self.mf.end != 0 {
                self.failover_auth_time = now;
                self.failover_auth_rank = 0;
            }
            // Tell the sibling replicas this one's offset, so that their ranks are right.
            let links: Vec<LinkId> = self.nodes.values().filter(|n| n.name != self.myself && n.primary == Some(primary) && n.is(node_flags::SLAVE)).filter_map(|n| n.link).collect();
            for l in links {
                self.send_ping(l, kind::PONG, now);
            }
            return;
        }
        // A sibling's fresher offset may have arrived since: wait longer if the rank grew.
        if !self.failover_auth_sent && self.mf.end == 0 {
            let rank = self.replica_rank();
            if rank > self.failover_auth_rank {
                self.failover_auth_time += (rank - self.failover_auth_rank) * 1000;
                self.failover_auth_rank = rank;
            }
        }
        if now < self.failover_auth_time || auth_age > auth_timeout {
            return;
        }
        if !self.failover_auth_sent {
            self.current_epoch += 1;
            self.failover_auth_epoch = self.current_epoch;
            self.failover_auth_sent = true;
            self.actions.push(Action::Log(format!("Starting a failover election for epoch {}.", self.current_epoch)));
            let msg = Message { header: self.header(kind::FAILOVER_AUTH_REQUEST), body: Body::Empty };
            self.broadcast(&msg);
            self.save();
            return;
        }
        if self.failover_auth_count < self.size() / 2 + 1 {
            return;
        }
        let me_name = self.myself;
        let m = self.nodes.get_mut(&me_name).expect("myself");
        m.config_epoch = m.config_epoch.max(self.failover_auth_epoch);
        self.actions.push(Action::Log("Failover election won: I'm the new master.".into()));
        self.replace_primary(now);
    }

    /// clusterFailoverReplaceYourMaster: this replica becomes a primary with its primary's
    /// slots, stops replicating, and tells every node at once.
    fn replace_primary(&mut self, now: u64) {
        let me_name = self.myself;
        let Some(primary) = self.me().primary else { return };
        let slots: Vec<u16> = self.nodes.get(&primary).map(|p| p.slots.iter().collect()).unwrap_or_default();
        let m = self.nodes.get_mut(&me_name).expect("myself");
        m.flags = (m.flags & !node_flags::SLAVE) | node_flags::MASTER;
        m.primary = None;
        for s in slots {
            self.add_slot(me_name, s);
        }
        self.failover_auth_time = 0;
        self.update_state();
        self.save();
        self.actions.push(Action::Promoted);
        let links: Vec<LinkId> = self.nodes.values().filter(|n| n.name != me_name && !n.is(node_flags::HANDSHAKE)).filter_map(|n| n.link).collect();
        for l in links {
            self.send_ping(l, kind::PONG, now);
        }
        self.reset_manual_failover();
    }
}
