//! What the CLUSTER subcommands do to a node's view and what they answer, with Redis 7.0's
//! errors: the logic of `clusterCommand` in `cluster.c`, on [`Cluster`], without the
//! protocol (the server turns these results into replies).

use abacus_cluster_bus::{kind, node_flags, NodeName, SLOTS};

use crate::state::{Cluster, Node};

/// A SETSLOT subcommand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetSlot {
    Migrating(NodeName),
    Importing(NodeName),
    Stable,
    Node(NodeName),
}

/// One node of a CLUSTER SLOTS range: ip, port, name, hostname.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotNode {
    pub ip: String,
    pub port: u16,
    pub name: NodeName,
    pub hostname: String,
}

const TYPES: [&str; kind::COUNT as usize] = ["ping", "pong", "meet", "fail", "publish", "auth-req", "auth-ack", "update", "mfstart", "module", "publishshard"];

impl Cluster {
    /// CLUSTER INFO's text (`\r\n`-terminated lines).
    pub fn info_text(&self) -> String {
        let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
        for s in 0..SLOTS as u16 {
            if let Some(n) = self.owner(s).and_then(|o| self.nodes.get(&o)) {
                assigned += 1;
                if n.is(node_flags::FAIL) {
                    fail += 1;
                } else if n.is(node_flags::PFAIL) {
                    pfail += 1;
                } else {
                    ok += 1;
                }
            }
        }
        let me = self.me();
        let my_epoch = if me.is(node_flags::SLAVE) { me.primary.and_then(|p| self.nodes.get(&p)).map_or(me.config_epoch, |p| p.config_epoch) } else { me.config_epoch };
        let mut out = format!(
            "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
            if self.ok { "ok" } else { "fail" },
            self.nodes.len(),
            self.size(),
            self.current_epoch,
        );
        let mut sent_total = 0;
        for (i, n) in self.sent.iter().enumerate() {
            if *n > 0 {
                out.push_str(&format!("cluster_stats_messages_{}_sent:{n}\r\n", TYPES[i]));
                sent_total += n;
            }
        }
        out.push_str(&format!("cluster_stats_messages_sent:{sent_total}\r\n"));
        let mut received_total = 0;
        for (i, n) in self.received.iter().enumerate() {
            if *n > 0 {
                out.push_str(&format!("cluster_stats_messages_{}_received:{n}\r\n", TYPES[i]));
                received_total += n;
            }
        }
        out.push_str(&format!("cluster_stats_messages_received:{received_total}\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"));
        out
    }

    /// CLUSTER SLOTS: each range of slots served by one primary, the primary first, then its
    /// replicas that are not failing.
    pub fn slots_ranges(&self) -> Vec<(u16, u16, Vec<SlotNode>)> {
        let mut out: Vec<(u16, u16, Vec<SlotNode>)> = Vec::new();
        let mut start: Option<(u16, NodeName)> = None;
        for s in 0..=SLOTS as u16 {
            let owner = if (s as usize) < SLOTS { self.owner(s) } else { None };
            match (start, owner) {
                (Some((_, o)), Some(n)) if o == n => continue,
                _ => {}
            }
            if let Some((first, o)) = start.take() {
                out.push((first, s - 1, self.serving(o)));
            }
            if let Some(n) = owner {
                start = Some((s, n));
            }
        }
        out
    }

    fn serving(&self, primary: NodeName) -> Vec<SlotNode> {
        let node = |n: &Node| SlotNode { ip: n.ip.clone(), port: n.port, name: n.name, hostname: n.hostname.clone() };
        let mut v = vec![node(&self.nodes[&primary])];
        v.extend(self.nodes.values().filter(|n| n.primary == Some(primary) && !n.is(node_flags::FAIL)).map(node));
        v
    }

    /// CLUSTER ADDSLOTSRANGE / DELSLOTSRANGE's pairs, validated as Redis does.
    pub fn ranges_to_slots(pairs: &[(i64, i64)]) -> Result<Vec<u16>, String> {
        let mut out = Vec::new();
        for &(a, b) in pairs {
            let (Some(a), Some(b)) = (slot_arg(a), slot_arg(b)) else { return Err("ERR Invalid or out of range slot".into()) };
            if a > b {
                return Err(format!("ERR start slot number {a} is greater than end slot number {b}"));
            }
            out.extend(a..=b);
        }
        Ok(out)
    }

    /// CLUSTER DELSLOTS: every slot must be assigned.
    pub fn del_slots(&mut self, slots: &[u16]) -> Result<(), String> {
        let mut seen = vec![false; SLOTS];
        for &s in slots {
            if self.owner(s).is_none() {
                return Err(format!("ERR Slot {s} is already unassigned"));
            }
            if std::mem::replace(&mut seen[s as usize], true) {
                return Err(format!("ERR Slot {s} specified multiple times"));
            }
        }
        for &s in slots {
            self.del_slot(s);
        }
        self.after_change();
        Ok(())
    }

    /// CLUSTER FLUSHSLOTS: only on an empty node (`keys` is its key count).
    pub fn flush_slots(&mut self, keys: u64) -> Result<(), String> {
        if keys != 0 {
            return Err("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.".into());
        }
        let me = self.myself;
        let mine: Vec<u16> = (0..SLOTS as u16).filter(|&s| self.owner(s) == Some(me)).collect();
        for s in mine {
            self.del_slot(s);
        }
        self.after_change();
        Ok(())
    }

    /// CLUSTER SETSLOT slot IMPORTING|MIGRATING|STABLE|NODE. `keys_in_slot` answers whether
    /// this node holds keys of the slot (NODE refuses to give away a slot with keys).
    pub fn set_slot(&mut self, slot: u16, how: SetSlot, keys_in_slot: u64) -> Result<(), String> {
        if self.me().is(node_flags::SLAVE) {
            return Err("ERR Please use SETSLOT only with masters.".into());
        }
        let me = self.myself;
        match how {
            SetSlot::Migrating(n) => {
                if self.owner(slot) != Some(me) {
                    return Err(format!("ERR I'm not the owner of hash slot {slot}"));
                }
                let target = self.nodes.get(&n).ok_or_else(|| format!("ERR I don't know about node {}", show(&n)))?;
                if target.is(node_flags::SLAVE) {
                    return Err("ERR Target node is not a master".into());
                }
                self.migrating.insert(slot, n);
            }
            SetSlot::Importing(n) => {
                if self.owner(slot) == Some(me) {
                    return Err(format!("ERR I'm already the owner of hash slot {slot}"));
                }
                let source = self.nodes.get(&n).ok_or_else(|| format!("ERR I don't know about node {}", show(&n)))?;
                if source.is(node_flags::SLAVE) {
                    return Err("ERR Target node is not a master".into());
                }
                self.importing.insert(slot, n);
            }
            SetSlot::Stable => {
                self.migrating.remove(&slot);
                self.importing.remove(&slot);
            }
            SetSlot::Node(n) => {
                let target = self.nodes.get(&n).ok_or_else(|| format!("ERR Unknown node {}", show(&n)))?;
                if target.is(node_flags::SLAVE) {
                    return Err("ERR Target node is not a master".into());
                }
                if self.owner(slot) == Some(me) && n != me && keys_in_slot > 0 {
                    return Err(format!("ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."));
                }
                if keys_in_slot == 0 && self.migrating.contains_key(&slot) {
                    self.migrating.remove(&slot);
                }
                // Importing a slot it is now given: the import is over, and its config epoch
                // must win over the old owner's (Redis bumps it without agreement).
                let finished_import = n == me && self.importing.remove(&slot).is_some();
                self.del_slot(slot);
                self.add_slot(n, slot);
                if finished_import {
                    self.bump_epoch();
                }
            }
        }
        // Migrations decide redirections too (-ASK).
        self.slots_version += 1;
        self.after_change();
        Ok(())
    }

    /// CLUSTER BUMPEPOCH: `(bumped, epoch)`.
    pub fn bump_epoch(&mut self) -> (bool, u64) {
        let max = self.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0).max(self.current_epoch);
        let me = self.myself;
        let mine = self.nodes[&me].config_epoch;
        if mine == 0 || mine != max || self.nodes.values().filter(|n| n.config_epoch == max).count() > 1 {
            self.current_epoch += 1;
            self.nodes.get_mut(&me).expect("myself").config_epoch = self.current_epoch;
            self.after_change();
            (true, self.current_epoch)
        } else {
            (false, mine)
        }
    }

    /// CLUSTER SET-CONFIG-EPOCH: only on a node that knows no other node, once.
    pub fn set_config_epoch(&mut self, epoch: i64) -> Result<(), String> {
        if epoch < 0 {
            return Err(format!("ERR Invalid config epoch specified: {epoch}"));
        }
        if self.nodes.len() > 1 {
            return Err("ERR The user can assign a config epoch only when the node does not know any other node.".into());
        }
        let me = self.myself;
        if self.nodes[&me].config_epoch != 0 {
            return Err("ERR Node config epoch is already non-zero".into());
        }
        self.nodes.get_mut(&me).expect("myself").config_epoch = epoch as u64;
        if self.current_epoch < epoch as u64 {
            self.current_epoch = epoch as u64;
        }
        self.after_change();
        Ok(())
    }

    /// CLUSTER FORGET.
    pub fn forget(&mut self, name: NodeName) -> Result<(), String> {
        let me = self.myself;
        let Some(n) = self.nodes.get(&name) else { return Err(format!("ERR Unknown node {}", show(&name))) };
        if name == me {
            return Err("ERR I tried hard but I can't forget myself...".into());
        }
        if self.me().is(node_flags::SLAVE) && self.me().primary == Some(name) {
            return Err("ERR Can't forget my master!".into());
        }
        let _ = n;
        self.remove_node(name);
        self.after_change();
        Ok(())
    }

    /// CLUSTER REPLICATE: become a replica of `name` (the data follows through replication,
    /// which the server starts).
    pub fn replicate(&mut self, name: NodeName, keys: u64) -> Result<(), String> {
        let me = self.myself;
        let Some(n) = self.nodes.get(&name) else { return Err(format!("ERR Unknown node {}", show(&name))) };
        if name == me {
            return Err("ERR Can't replicate myself".into());
        }
        if n.is(node_flags::SLAVE) {
            return Err("ERR I can only replicate a master, not a replica.".into());
        }
        if self.me().is(node_flags::MASTER) && (self.me().slots.count() != 0 || keys != 0) {
            return Err("ERR To set a master the node must be empty and without assigned slots.".into());
        }
        let m = self.nodes.get_mut(&me).expect("myself");
        m.flags = (m.flags & !node_flags::MASTER) | node_flags::SLAVE;
        m.primary = Some(name);
        self.migrating.clear();
        self.importing.clear();
        self.slots_version += 1;
        if let Some(p) = self.nodes.get_mut(&name) {
            p.flags |= node_flags::MIGRATE_TO;
        }
        self.after_change();
        self.broadcast_pong();
        Ok(())
    }

    /// CLUSTER COUNT-FAILURE-REPORTS.
    pub fn failure_reports(&self, name: NodeName) -> Result<usize, String> {
        self.nodes.get(&name).map(|n| n.fail_reports.len()).ok_or_else(|| format!("ERR Unknown node {}", show(&name)))
    }

    /// CLUSTER RESET [HARD|SOFT]: forget every other node and every slot; HARD also takes a
    /// new name and zeroes the epochs. A replica becomes an empty primary. `keys`: a primary
    /// holding keys is refused.
    pub fn reset(&mut self, hard: bool, keys: u64, rng_seed: u64) -> Result<(), String> {
        if self.me().is(node_flags::MASTER) && keys != 0 {
            return Err("ERR CLUSTER RESET can't be called with master nodes containing keys".into());
        }
        let me = self.myself;
        let others: Vec<NodeName> = self.nodes.keys().copied().filter(|n| *n != me).collect();
        for n in others {
            self.remove_node(n);
        }
        for s in 0..SLOTS as u16 {
            self.del_slot(s);
        }
        self.migrating.clear();
        self.importing.clear();
        let m = self.nodes.get_mut(&me).expect("myself");
        m.flags = node_flags::MYSELF | node_flags::MASTER;
        m.primary = None;
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            let mut node = self.nodes.remove(&me).expect("myself");
            node.config_epoch = 0;
            let name = crate::state::random_name(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(rng_seed));
            node.name = name;
            self.nodes.insert(name, node);
            self.myself = name;
        }
        self.after_change();
        Ok(())
    }
}

fn slot_arg(n: i64) -> Option<u16> {
    (0..SLOTS as i64).contains(&n).then_some(n as u16)
}

fn show(n: &NodeName) -> String {
    String::from_utf8_lossy(n.as_bytes()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Config;

    #[test]
    fn slots_ranges_and_errors() {
        let mut c = Cluster::new(Config::default(), 1, 0);
        assert_eq!(Cluster::ranges_to_slots(&[(5, 3)]).unwrap_err(), "ERR start slot number 5 is greater than end slot number 3");
        assert_eq!(Cluster::ranges_to_slots(&[(0, 16384)]).unwrap_err(), "ERR Invalid or out of range slot");
        c.add_slots(&Cluster::ranges_to_slots(&[(0, 99), (200, 200)]).unwrap()).unwrap();
        let r = c.slots_ranges();
        assert_eq!(r.iter().map(|(a, b, _)| (*a, *b)).collect::<Vec<_>>(), vec![(0, 99), (200, 200)]);
        assert_eq!(c.del_slots(&[150]).unwrap_err(), "ERR Slot 150 is already unassigned");
        c.del_slots(&[0, 1]).unwrap();
        assert_eq!(c.owner(0), None);
        assert!(c.info_text().contains("cluster_slots_assigned:99\r\n"));
        assert!(c.info_text().starts_with("cluster_state:fail\r\n"));
        assert_eq!(c.flush_slots(3).unwrap_err(), "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.");
        c.flush_slots(0).unwrap();
        assert!(c.slots_ranges().is_empty());
    }

    #[test]
    fn epochs() {
        let mut c = Cluster::new(Config::default(), 1, 0);
        assert_eq!(c.bump_epoch(), (true, 1));
        assert_eq!(c.bump_epoch(), (false, 1));
        let mut d = Cluster::new(Config::default(), 2, 0);
        d.set_config_epoch(7).unwrap();
        assert_eq!(d.set_config_epoch(8).unwrap_err(), "ERR Node config epoch is already non-zero");
        assert_eq!(d.current_epoch, 7);
        assert!(d.info_text().contains("cluster_my_epoch:7\r\n"));
    }

    #[test]
    fn reset_forgets_and_renames() {
        let mut c = Cluster::new(Config::default(), 1, 0);
        c.add_slots(&[1, 2, 3]).unwrap();
        assert!(c.reset(false, 5, 9).is_err());
        let before = c.myself;
        c.reset(false, 0, 9).unwrap();
        assert_eq!(c.myself, before);
        assert!(c.slots_ranges().is_empty());
        c.reset(true, 0, 9).unwrap();
        assert_ne!(c.myself, before);
        assert_eq!(c.nodes.len(), 1);
        assert!(c.forget(c.myself).unwrap_err().contains("can't forget myself"));
    }
}
