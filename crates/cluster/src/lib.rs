//! A Redis Cluster node's view of its cluster, as Redis 7.0 keeps it: for now the text form of
//! that view (CLUSTER NODES's lines and nodes.conf, [`nodes_conf`]). The node table itself,
//! gossip, failure detection and failover (Redis's `cluster.c`) are to come here, on top of
//! the bus messages of `abacus-cluster-bus`; this crate does no I/O, so its logic is tested
//! with simulated time and links.

pub mod commands;
pub mod nodes_conf;
pub mod state;

pub use nodes_conf::{NodeEntry, NodesConf};
pub use state::{Action, Cluster, Config, FailoverMode, LinkId, ReplStatus};
