//! nodes.conf and CLUSTER NODES as a real redis-server 7.0 writes them: a three-primary
//! cluster made with `redis-cli --cluster create`, a slot migrating between two of its nodes;
//! every file and reply parses, renders back byte for byte, and says what the cluster is.
//!
//! Needs `redis-server` and `redis-cli` on PATH; without them the test prints one line saying
//! how to get them and passes (the README's test command installs them).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abacus_cluster::nodes_conf::{parse, render, render_line};
use abacus_cluster_bus::node_flags;

fn on_path(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(bin)).find(|p| p.is_file()))
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().expect("redis-cli runs");
    String::from_utf8(out.stdout).unwrap().trim_end().to_string()
}

struct Nodes {
    ports: Vec<u16>,
    dir: PathBuf,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for p in &self.ports {
            let _ = Command::new("redis-cli").args(["-p", &p.to_string(), "shutdown", "nosave"]).stderr(Stdio::null()).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_base() -> u16 {
    let seed = std::process::id() as u16;
    for i in 0..100u16 {
        let base = 21000 + (seed.wrapping_add(i * 97) % 9000);
        let free = (0..3).all(|k| std::net::TcpListener::bind(("127.0.0.1", base + k)).is_ok() && std::net::TcpListener::bind(("127.0.0.1", base + k + 10000)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no free ports");
}

fn wait_for(mut ok: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn files_and_replies_of_a_real_cluster_round_trip() {
    if on_path("redis-server").is_none() || on_path("redis-cli").is_none() {
        eprintln!("skipped: redis-server and redis-cli not found (apt-get install redis-server redis-tools)");
        return;
    }
    let base = free_base();
    let dir = std::env::temp_dir().join(format!("abacus-nodes-conf-{base}-{}", std::process::id()));
    let nodes = Nodes { ports: (base..base + 3).collect(), dir: dir.clone() };
    for &p in &nodes.ports {
        let d = dir.join(p.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let status = Command::new("redis-server")
            .args(["--port", &p.to_string(), "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--save", "", "--appendonly", "no", "--daemonize", "yes"])
            .args(["--cluster-announce-hostname", &format!("node-{p}")])
            .arg("--dir")
            .arg(&d)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    }
    for &p in &nodes.ports {
        wait_for(|| cli(p, &["ping"]) == "PONG", "redis-server");
    }
    let addrs: Vec<String> = nodes.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = Command::new("redis-cli").arg("--cluster").arg("create").args(&addrs).arg("--cluster-yes").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    for &p in &nodes.ports {
        wait_for(|| cli(p, &["cluster", "info"]).contains("cluster_state:ok"), "cluster_state:ok");
    }
    let (a, b) = (nodes.ports[0], nodes.ports[1]);
    let (a_id, b_id) = (cli(a, &["cluster", "myid"]), cli(b, &["cluster", "myid"]));
    assert_eq!(cli(a, &["cluster", "setslot", "0", "migrating", &b_id]), "OK");
    assert_eq!(cli(b, &["cluster", "setslot", "0", "importing", &a_id]), "OK");
    for &p in &nodes.ports {
        assert_eq!(cli(p, &["cluster", "saveconfig"]), "OK");
    }

    for &p in &nodes.ports {
        let text = std::fs::read_to_string(Path::new(&dir).join(p.to_string()).join("nodes.conf")).unwrap();
        let conf = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(render(&conf), text);
        assert_eq!(conf.nodes.len(), 3);
        assert!(conf.current_epoch >= 3);
        let me: Vec<_> = conf.nodes.iter().filter(|n| n.flags & node_flags::MYSELF != 0).collect();
        assert_eq!(me.len(), 1);
        assert_eq!(me[0].port, p);
        assert_eq!(me[0].hostname, format!("node-{p}"));
        // Every slot is served by exactly one primary.
        let mut owned = vec![0u8; 16384];
        for n in &conf.nodes {
            assert_ne!(n.flags & node_flags::MASTER, 0);
            for &(x, y) in &n.slots {
                for s in x..=y {
                    owned[s as usize] += 1;
                }
            }
        }
        assert!(owned.iter().all(|&c| c == 1));
        if p == a {
            assert_eq!(me[0].migrating.len(), 1);
            assert_eq!(me[0].migrating[0].0, 0);
            assert_eq!(me[0].migrating[0].1.as_bytes(), b_id.as_bytes());
        }
        if p == b {
            assert_eq!(me[0].importing.len(), 1);
            assert_eq!(me[0].importing[0].1.as_bytes(), a_id.as_bytes());
        }
        // CLUSTER NODES is the same format without the vars line.
        let reply = cli(p, &["cluster", "nodes"]);
        let view = parse(&reply).unwrap();
        assert_eq!(view.nodes.iter().map(render_line).collect::<Vec<_>>().join("\n"), reply);
    }
}
