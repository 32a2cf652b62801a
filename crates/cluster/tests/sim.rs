//! The state machine in a simulated network with a simulated clock: nodes meet, learn each
//! other through gossip, split the slots, and detect a node that stops answering (PFAIL,
//! then FAIL once a majority of primaries agree), deterministically, in milliseconds of real
//! time. Messages go through the real codec (encoded, then decoded) on their way.

use std::collections::HashMap;

use abacus_cluster::{Action, Cluster, Config, FailoverMode, LinkId, ReplStatus};
use abacus_cluster_bus::{decode, encode, kind, node_flags, NodeName};

const TIMEOUT: u64 = 1000;

/// A message a node was asked to deliver: (shard?, channel, message).
type Delivered = (bool, Vec<u8>, Vec<u8>);

struct Net {
    nodes: Vec<Cluster>,
    /// (node index, link id) -> (peer index, peer's link id)
    wires: HashMap<(usize, LinkId), (usize, LinkId)>,
    /// Nodes that no longer answer (their process is gone).
    dead: Vec<bool>,
    /// What each node was asked to deliver to its subscribers (shard?, channel, message).
    delivered: Vec<Vec<Delivered>>,
    /// Role changes each node was told to carry out.
    events: Vec<Vec<String>>,
    /// What each node's server reports of its replication before each tick.
    repl: Vec<ReplStatus>,
    now: u64,
}

impl Net {
    fn new(n: usize) -> Net {
        let nodes = (0..n)
            .map(|i| {
                let port = 7000 + i as u16;
                Cluster::new(Config { node_timeout_ms: TIMEOUT, port, cport: port + 10000, announce_ip: "10.0.0.1".into(), ..Config::default() }, i as u64 + 1, 0)
            })
            .collect();
        Net { nodes, wires: HashMap::new(), dead: vec![false; n], delivered: vec![Vec::new(); n], events: vec![Vec::new(); n], repl: vec![ReplStatus::default(); n], now: 0 }
    }

    fn index_of_cport(&self, cport: u16) -> usize {
        self.nodes.iter().position(|c| c.config.cport == cport).unwrap()
    }

    /// Runs every node's pending actions until the network is quiet.
    fn settle(&mut self) {
        for _ in 0..100 {
            let mut any = false;
            for i in 0..self.nodes.len() {
                let actions = self.nodes[i].take_actions();
                any |= !actions.is_empty();
                for a in actions {
                    self.carry_out(i, a);
                }
            }
            if !any {
                return;
            }
        }
    }

    fn carry_out(&mut self, i: usize, a: Action) {
        match a {
            Action::Send(link, m) => {
                let Some(&(j, peer_link)) = self.wires.get(&(i, link)) else { return };
                if self.dead[j] {
                    return;
                }
                let m = decode(&encode(&m)).expect("what encode writes decodes");
                self.nodes[j].message(peer_link, "10.0.0.1", "10.0.0.1", m, self.now);
            }
            Action::Connect { node, cport, .. } => {
                let j = self.index_of_cport(cport);
                if self.dead[j] {
                    self.nodes[i].connect_failed(node, self.now);
                    return;
                }
                let theirs = self.nodes[j].link_accepted(self.now);
                if let Some(ours) = self.nodes[i].link_connected(node, self.now) {
                    self.wires.insert((i, ours), (j, theirs));
                    self.wires.insert((j, theirs), (i, ours));
                }
            }
            Action::Close(link) => {
                if let Some((j, theirs)) = self.wires.remove(&(i, link)) {
                    self.wires.remove(&(j, theirs));
                    self.nodes[j].link_closed(theirs);
                }
            }
            Action::Deliver { shard, channel, message } => self.delivered[i].push((shard, channel, message)),
            Action::Promoted => self.events[i].push("promoted".into()),
            Action::ReplicaOf { port, .. } => self.events[i].push(format!("replica of {port}")),
            Action::PauseWrites { .. } => self.events[i].push("pause".into()),
            Action::Unpause => self.events[i].push("unpause".into()),
            Action::Log(_) => {}
            Action::SaveConfig => {}
        }
    }

    /// Advances the clock by `ms`, ticking every node every 100 ms.
    fn run(&mut self, ms: u64) {
        for _ in 0..ms / 100 {
            self.now += 100;
            for i in 0..self.nodes.len() {
                if !self.dead[i] {
                    self.nodes[i].set_repl(self.repl[i]);
                    self.nodes[i].tick(self.now);
                }
            }
            self.settle();
        }
    }

    fn name(&self, i: usize) -> NodeName {
        self.nodes[i].myself
    }
}

#[test]
fn three_nodes_meet_share_slots_and_agree_one_failed() {
    let mut net = Net::new(3);
    // Node 0 meets 1; node 1 meets 2: node 0 learns 2 through gossip.
    net.nodes[0].meet("10.0.0.1", 7001, 17001, 0).unwrap();
    net.nodes[1].meet("10.0.0.1", 7002, 17002, 0).unwrap();
    net.run(3000);
    for i in 0..3 {
        let c = &net.nodes[i];
        assert_eq!(c.nodes.len(), 3, "node {i}: {:?}", c.nodes.keys().collect::<Vec<_>>());
        for j in 0..3 {
            let n = &c.nodes[&net.name(j)];
            assert!(!n.is(node_flags::HANDSHAKE) && n.is(node_flags::MASTER), "node {i} sees {j}: {:?}", n.flags);
            if i != j {
                assert!(n.link.is_some(), "node {i} has no link to {j}");
                assert_eq!(n.port, 7000 + j as u16);
            }
        }
    }
    // Each takes a third of the slots.
    let thirds = [(0u16, 5460u16), (5461, 10922), (10923, 16383)];
    for (i, (a, b)) in thirds.iter().enumerate() {
        let slots: Vec<u16> = (*a..=*b).collect();
        net.nodes[i].add_slots(&slots).unwrap();
    }
    assert_eq!(net.nodes[0].add_slots(&[0]).unwrap_err(), "ERR Slot 0 is already busy");
    net.run(3000);
    for i in 0..3 {
        let c = &net.nodes[i];
        assert!(c.ok, "node {i} does not see every slot served");
        for (j, (a, b)) in thirds.iter().enumerate() {
            assert_eq!(c.owner(*a), Some(net.name(j)));
            assert_eq!(c.owner(*b), Some(net.name(j)));
        }
    }
    // Node 2 stops answering: after the timeout both others suspect it, and with their two
    // votes (a majority of three primaries) it is marked failed; the cluster is down.
    net.dead[2] = true;
    net.run(TIMEOUT * 4);
    for i in 0..2 {
        let c = &net.nodes[i];
        let n = &c.nodes[&net.name(2)];
        assert!(n.is(node_flags::FAIL) && !n.is(node_flags::PFAIL), "node {i} sees {:?}", n.flags);
        assert!(!c.ok);
    }
    // It comes back: its pongs clear the failure (after the undo delay for a primary with
    // slots) and the cluster is OK again.
    net.dead[2] = false;
    net.run(TIMEOUT * 6);
    for i in 0..3 {
        let c = &net.nodes[i];
        assert!(!c.nodes[&net.name(2)].is(node_flags::FAIL), "node {i}");
        assert!(c.ok, "node {i}");
    }
}

#[test]
fn a_node_that_is_another_node_now_loses_its_address() {
    // Node 0 meets an address where node 1 answers; later node 2 answers there instead
    // (a restart with a new identity): the handshake finishes under node 1's name, then a
    // PONG under another name on that link marks node 1 NOADDR, as Redis does.
    let mut net = Net::new(3);
    net.nodes[0].meet("10.0.0.1", 7001, 17001, 0).unwrap();
    net.run(1000);
    let one = net.name(1);
    assert!(net.nodes[0].nodes.contains_key(&one));
    // Node 2 takes over node 1's bus port.
    net.nodes[1].config.cport = 1;
    net.nodes[2].config.cport = 17001;
    net.nodes[2].config.port = 7001;
    // Drop every wire so node 0 reconnects.
    let links: Vec<(usize, LinkId)> = net.wires.keys().copied().filter(|(i, _)| *i == 0).collect();
    for (i, l) in links {
        net.carry_out(i, Action::Close(l));
        net.nodes[0].link_closed(l);
    }
    net.dead[1] = true;
    net.run(1000);
    let n = &net.nodes[0].nodes[&one];
    assert!(n.is(node_flags::NOADDR), "{:?}", n.flags);
}

#[test]
fn nodes_conf_saves_and_loads_the_view() {
    let mut net = Net::new(3);
    net.nodes[0].meet("10.0.0.1", 7001, 17001, 0).unwrap();
    net.nodes[1].meet("10.0.0.1", 7002, 17002, 0).unwrap();
    net.run(3000);
    net.nodes[0].add_slots(&(0..100).collect::<Vec<_>>()).unwrap();
    net.nodes[1].add_slots(&(100..16384).collect::<Vec<_>>()).unwrap();
    net.run(2000);
    let text = abacus_cluster::nodes_conf::render(&net.nodes[0].nodes_conf(true));
    let conf = abacus_cluster::nodes_conf::parse(&text).unwrap();
    let loaded = Cluster::load(net.nodes[0].config.clone(), &conf, 99, net.now).unwrap();
    assert_eq!(loaded.myself, net.nodes[0].myself);
    assert_eq!(loaded.nodes.len(), 3);
    assert!(loaded.ok);
    for s in [0u16, 99, 100, 16383] {
        assert_eq!(loaded.owner(s), net.nodes[0].owner(s));
    }
    assert_eq!(loaded.current_epoch, net.nodes[0].current_epoch);
}

#[test]
fn publish_reaches_every_other_node_and_spublish_only_the_shard() {
    let mut net = Net::new(3);
    net.nodes[0].meet("10.0.0.1", 7001, 17001, 0).unwrap();
    net.nodes[0].meet("10.0.0.1", 7002, 17002, 0).unwrap();
    net.run(3000);
    net.nodes[0].publish(b"news", b"hello", false);
    net.settle();
    assert!(net.delivered[0].is_empty());
    for i in 1..3 {
        assert_eq!(net.delivered[i], vec![(false, b"news".to_vec(), b"hello".to_vec())]);
    }
    // Three primaries, no replicas: a shard message has nobody else to reach.
    net.nodes[1].publish(b"orders", b"x", true);
    net.settle();
    assert_eq!(net.delivered.iter().map(Vec::len).sum::<usize>(), 2);
}

#[test]
fn a_replica_replaces_its_failed_primary_which_comes_back_as_its_replica() {
    let mut net = Net::new(4);
    for p in [7001u16, 7002, 7003] {
        net.nodes[0].meet("10.0.0.1", p, p + 10000, 0).unwrap();
    }
    net.run(3000);
    let thirds = [(0u16, 5460u16), (5461, 10922), (10923, 16383)];
    for (i, (a, b)) in thirds.iter().enumerate() {
        net.nodes[i].set_config_epoch(i as i64 + 1).unwrap_or(());
        net.nodes[i].add_slots(&(*a..=*b).collect::<Vec<_>>()).unwrap();
    }
    let (two, three) = (net.name(2), net.name(3));
    net.nodes[3].replicate(two, 0).unwrap();
    net.run(3000);
    assert!(net.nodes.iter().all(|c| c.ok));
    assert!(net.nodes[0].nodes[&three].is(node_flags::SLAVE));
    // The primary of slots 10923-16383 dies: its replica is elected with the two other
    // primaries' votes and serves its slots at a newer config epoch.
    net.dead[2] = true;
    net.run(TIMEOUT * 8);
    assert_eq!(net.events[3], vec!["promoted".to_string()]);
    for i in [0, 1, 3] {
        let c = &net.nodes[i];
        assert_eq!(c.owner(10923), Some(three), "node {i}");
        assert_eq!(c.owner(16383), Some(three), "node {i}");
        assert!(c.nodes[&three].is(node_flags::MASTER), "node {i}");
        assert!(c.ok, "node {i}");
    }
    // The old primary returns: it sees its slots served at a newer epoch and follows its
    // successor as a replica.
    net.dead[2] = false;
    net.run(TIMEOUT * 6);
    assert!(net.events[2].iter().any(|e| e == "replica of 7003"), "{:?}", net.events[2]);
    let c = &net.nodes[2];
    assert!(c.me().is(node_flags::SLAVE) && c.me().primary == Some(three));
    // It came back claiming its old slots at its old epoch: the nodes that knew better told
    // it with UPDATE messages.
    assert!(c.received[kind::UPDATE as usize] > 0);
    assert!(net.nodes[0].sent[kind::UPDATE as usize] + net.nodes[1].sent[kind::UPDATE as usize] > 0);
    assert_eq!(c.owner(10923), Some(three));
    for i in [0, 1] {
        assert!(net.nodes[i].nodes[&two].is(node_flags::SLAVE), "node {i} sees the old primary as a replica");
    }
}

/// Three primaries (nodes 0-2, a third of the slots each) and `replicas` more nodes, all
/// replicas of node 2, after the cluster settled.
fn primaries_and_replicas_of_two(replicas: usize) -> Net {
    let mut net = Net::new(3 + replicas);
    for p in 1..3 + replicas as u16 {
        net.nodes[0].meet("10.0.0.1", 7000 + p, 17000 + p, 0).unwrap();
    }
    net.run(3000);
    let thirds = [(0u16, 5460u16), (5461, 10922), (10923, 16383)];
    for (i, (a, b)) in thirds.iter().enumerate() {
        net.nodes[i].add_slots(&(*a..=*b).collect::<Vec<_>>()).unwrap();
    }
    let two = net.name(2);
    for r in 3..3 + replicas {
        net.nodes[r].replicate(two, 0).unwrap();
    }
    net.run(3000);
    assert!(net.nodes.iter().all(|c| c.ok));
    net
}

#[test]
fn headers_carry_the_offset_and_the_freshest_replica_is_elected() {
    let mut net = primaries_and_replicas_of_two(2);
    let (three, four) = (net.name(3), net.name(4));
    net.repl[3].offset = 100;
    net.repl[4].offset = 500;
    net.run(3000);
    // Every node learnt each replica's offset from its headers.
    assert_eq!(net.nodes[0].nodes[&four].repl_offset, 500);
    assert_eq!(net.nodes[4].nodes[&three].repl_offset, 100);
    assert_eq!(net.nodes[3].replica_rank(), 1);
    assert_eq!(net.nodes[4].replica_rank(), 0);
    net.dead[2] = true;
    net.run(TIMEOUT * 8);
    // The replica that lost less waited less and won; the other follows it.
    assert_eq!(net.events[4], vec!["promoted".to_string()]);
    assert!(!net.events[3].iter().any(|e| e == "promoted"), "{:?}", net.events[3]);
    for i in [0, 1, 3, 4] {
        assert_eq!(net.nodes[i].owner(16383), Some(four), "node {i}");
    }
    assert_eq!(net.nodes[3].me().primary, Some(four));
}

#[test]
fn a_replica_with_stale_data_fails_over_only_with_validity_factor_zero() {
    let mut net = primaries_and_replicas_of_two(1);
    let (two, three) = (net.name(2), net.name(3));
    // Its link has been down for a minute: beyond node timeout * 10 + the 10 s ping period.
    net.repl[3].data_age_ms = 60_000;
    net.dead[2] = true;
    net.run(TIMEOUT * 10);
    assert!(net.nodes[0].nodes[&two].is(node_flags::FAIL));
    assert!(net.events[3].is_empty(), "{:?}", net.events[3]);
    assert_eq!(net.nodes[0].owner(16383), Some(two));
    net.nodes[3].config.replica_validity_factor = 0;
    net.run(TIMEOUT * 8);
    assert_eq!(net.events[3], vec!["promoted".to_string()]);
    assert_eq!(net.nodes[0].owner(16383), Some(three));
}

#[test]
fn replica_no_failover_stops_the_automatic_failover() {
    let mut net = primaries_and_replicas_of_two(1);
    net.nodes[3].config.replica_no_failover = true;
    net.run(1000);
    let three = net.name(3);
    // The flag is announced, so the other nodes see it too.
    assert!(net.nodes[0].nodes[&three].is(node_flags::NOFAILOVER));
    net.dead[2] = true;
    net.run(TIMEOUT * 10);
    assert!(net.events[3].is_empty(), "{:?}", net.events[3]);
}

#[test]
fn manual_failover_waits_for_the_primary_offset_then_swaps_roles() {
    let mut net = primaries_and_replicas_of_two(1);
    let (two, three) = (net.name(2), net.name(3));
    assert_eq!(net.nodes[0].failover(FailoverMode::Default, net.now).unwrap_err(), "ERR You should send CLUSTER FAILOVER to a replica");
    net.repl[2].offset = 1000;
    net.repl[3].offset = 900;
    net.run(1000);
    net.nodes[3].failover(FailoverMode::Default, net.now).unwrap();
    net.settle();
    // The primary holds its writes at once.
    assert_eq!(net.events[2], vec!["pause".to_string()]);
    net.run(1000);
    // The replica has not applied the paused primary's offset yet: no election.
    assert!(net.events[3].is_empty(), "{:?}", net.events[3]);
    assert!(net.nodes[3].me().is(node_flags::SLAVE));
    net.repl[3].offset = 1000;
    net.run(1000);
    assert_eq!(net.events[3], vec!["promoted".to_string()]);
    assert!(net.events[2].iter().any(|e| e == "replica of 7003"), "{:?}", net.events[2]);
    assert_eq!(net.events[2].last().map(String::as_str), Some("unpause"));
    for i in 0..4 {
        let c = &net.nodes[i];
        assert_eq!(c.owner(16383), Some(three), "node {i}");
        assert!(c.nodes[&two].is(node_flags::SLAVE) && c.nodes[&two].primary == Some(three), "node {i}");
        assert!(!c.nodes[&two].is(node_flags::FAIL) && !c.nodes[&two].is(node_flags::PFAIL), "node {i}: no failure was involved");
    }
}

#[test]
fn manual_failover_times_out_and_the_primary_resumes() {
    let mut net = primaries_and_replicas_of_two(1);
    net.repl[2].offset = 1000;
    net.repl[3].offset = 900;
    net.run(1000);
    net.nodes[3].failover(FailoverMode::Default, net.now).unwrap();
    net.run(7000);
    assert!(net.events[3].is_empty(), "{:?}", net.events[3]);
    assert_eq!(net.events[2], vec!["pause".to_string(), "unpause".to_string()]);
    assert!(!net.nodes[3].manual_failover_in_progress() && !net.nodes[2].manual_failover_in_progress());
    assert!(net.nodes[3].me().is(node_flags::SLAVE));
}

#[test]
fn failover_force_and_takeover() {
    let mut net = primaries_and_replicas_of_two(2);
    let (three, four) = (net.name(3), net.name(4));
    // FORCE: an election without the offset agreement (the offsets differ here).
    net.repl[2].offset = 1000;
    net.nodes[3].failover(FailoverMode::Force, net.now).unwrap();
    net.run(2000);
    assert_eq!(net.events[3], vec!["promoted".to_string()]);
    assert!(net.events[2].iter().all(|e| e != "pause"));
    for i in 0..5 {
        assert_eq!(net.nodes[i].owner(16383), Some(three), "node {i}");
    }
    // TAKEOVER: node 4 (now a replica of 3) takes the slots at once at a new epoch, no vote.
    net.run(1000);
    assert_eq!(net.nodes[4].me().primary, Some(three));
    let before = net.nodes[4].current_epoch;
    net.nodes[4].failover(FailoverMode::Takeover, net.now).unwrap();
    assert_eq!(net.nodes[4].owner(16383), Some(four));
    assert!(net.nodes[4].me().config_epoch > before);
    net.run(2000);
    for i in 0..5 {
        assert_eq!(net.nodes[i].owner(16383), Some(four), "node {i}");
    }
    assert_eq!(net.nodes[3].me().primary, Some(four));
}

#[test]
fn a_replica_migrates_to_an_orphaned_primary_unless_forbidden() {
    // Primaries 0-2; node 3 replicates 0, nodes 4 and 5 replicate 1.
    let mut net = Net::new(6);
    for p in 1..6u16 {
        net.nodes[0].meet("10.0.0.1", 7000 + p, 17000 + p, 0).unwrap();
    }
    net.run(3000);
    let thirds = [(0u16, 5460u16), (5461, 10922), (10923, 16383)];
    for (i, (a, b)) in thirds.iter().enumerate() {
        net.nodes[i].add_slots(&(*a..=*b).collect::<Vec<_>>()).unwrap();
    }
    let (zero, one) = (net.name(0), net.name(1));
    net.nodes[3].replicate(zero, 0).unwrap();
    net.nodes[4].replicate(one, 0).unwrap();
    net.nodes[5].replicate(one, 0).unwrap();
    for i in [4, 5] {
        net.nodes[i].config.allow_replica_migration = false;
    }
    net.run(3000);
    assert!(net.nodes.iter().all(|c| c.ok));
    // Node 0's only replica dies: node 0 is orphaned.
    net.dead[3] = true;
    net.run(TIMEOUT * 10);
    assert!(net.nodes[4].nodes[&net.name(3)].is(node_flags::FAIL));
    assert!(net.events[4].is_empty() && net.events[5].is_empty(), "cluster-allow-replica-migration no: nobody moves");
    for i in [4, 5] {
        net.nodes[i].config.allow_replica_migration = true;
    }
    net.run(8000);
    // Exactly one of node 1's two replicas (the smaller name) moved to node 0.
    let moved: Vec<usize> = [4, 5].into_iter().filter(|&i| net.nodes[i].me().primary == Some(zero)).collect();
    assert_eq!(moved.len(), 1, "{:?} {:?}", net.events[4], net.events[5]);
    let m = moved[0];
    assert_eq!(net.events[m], vec!["replica of 7000".to_string()]);
    let other = 9 - m;
    assert_eq!(net.nodes[other].me().primary, Some(one));
    assert!(net.name(m) < net.name(other));
    // The others learn it from its pings; node 1, left with one replica, keeps it (barrier 1).
    net.run(2000);
    assert_eq!(net.nodes[2].nodes[&net.name(m)].primary, Some(zero));
    assert!(net.events[other].is_empty());
}
