//! The cluster state machine as a node of a real Redis 7.0 cluster: three redis-server
//! primaries made with `redis-cli --cluster create`, then a node run by [`Cluster`] over plain
//! sockets is met by one of them. It must learn every node and slot owner through the
//! handshake and gossip, be known and connected on every Redis node (they learn it from
//! gossip too), agree with Redis on names, addresses, flags, slots and epochs, and, when one
//! primary is killed, see it fail (PFAIL, then FAIL on the primaries' reports) as Redis does.
//!
//! Needs `redis-server` and `redis-cli` on PATH; without them it prints one line and passes
//! (the README's test command installs them).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use abacus_cluster::nodes_conf::{parse, render_line};
use abacus_cluster::{Action, Cluster, Config, LinkId};
use abacus_cluster_bus::{encode, node_flags, NodeName, Reader};

const NODE_TIMEOUT_MS: u64 = 2000;

fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(bin).is_file()))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().expect("redis-cli runs");
    String::from_utf8(out.stdout).unwrap().trim_end().to_string()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Ports p..p+n free, and their bus ports too.
fn free_ports(n: u16) -> u16 {
    let seed = (std::process::id() as u16).wrapping_mul(31);
    for i in 0..200u16 {
        let base = 22000 + (seed.wrapping_add(i * 131) % 9000);
        if (0..n).all(|k| TcpListener::bind(("127.0.0.1", base + k)).is_ok() && TcpListener::bind(("127.0.0.1", base + k + 10000)).is_ok()) {
            return base;
        }
    }
    panic!("no free ports");
}

struct Redis {
    children: Vec<(u16, Child)>,
    dir: std::path::PathBuf,
}

impl Drop for Redis {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The node: a [`Cluster`] driven by a thread over nonblocking sockets, every 100 ms.
struct Driver {
    cluster: Arc<Mutex<Cluster>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Conn {
    stream: TcpStream,
    reader: Reader,
}

fn drive(port: u16) -> Driver {
    let listener = TcpListener::bind(("127.0.0.1", port + 10000)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let config = Config { node_timeout_ms: NODE_TIMEOUT_MS, port, cport: port + 10000, hostname: "abacus-node".into(), ..Config::default() };
    let cluster = Arc::new(Mutex::new(Cluster::new(config, now_ms(), now_ms())));
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (cluster.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        let mut conns: std::collections::HashMap<LinkId, Conn> = std::collections::HashMap::new();
        let mut last_tick = 0;
        while !s.load(Ordering::Relaxed) {
            let now = now_ms();
            let mut cl = c.lock().unwrap();
            while let Ok((stream, _)) = listener.accept() {
                stream.set_nonblocking(true).unwrap();
                let id = cl.link_accepted(now);
                conns.insert(id, Conn { stream, reader: Reader::new(1 << 20) });
            }
            let mut closed = Vec::new();
            for (id, conn) in conns.iter_mut() {
                let mut buf = [0u8; 16384];
                loop {
                    match conn.stream.read(&mut buf) {
                        Ok(0) => {
                            closed.push(*id);
                            break;
                        }
                        Ok(n) => conn.reader.feed(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(_) => {
                            closed.push(*id);
                            break;
                        }
                    }
                }
                loop {
                    match conn.reader.next_message() {
                        Ok(Some(m)) => {
                            let peer = conn.stream.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                            let local = conn.stream.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                            cl.message(*id, &peer, &local, m, now);
                        }
                        Ok(None) => break,
                        Err(_) => {
                            closed.push(*id);
                            break;
                        }
                    }
                }
            }
            for id in closed {
                conns.remove(&id);
                cl.link_closed(id);
            }
            if now - last_tick >= 100 {
                cl.tick(now);
                last_tick = now;
            }
            // Carry out the actions (a connection's first PING is itself an action).
            loop {
                let actions = cl.take_actions();
                if actions.is_empty() {
                    break;
                }
                for a in actions {
                    match a {
                        Action::Send(id, m) => {
                            let failed = match conns.get_mut(&id) {
                                Some(conn) => {
                                    conn.stream.set_nonblocking(false).unwrap();
                                    let r = conn.stream.write_all(&encode(&m));
                                    conn.stream.set_nonblocking(true).unwrap();
                                    r.is_err()
                                }
                                None => false,
                            };
                            if failed {
                                conns.remove(&id);
                                cl.link_closed(id);
                            }
                        }
                        Action::Connect { node, ip, cport } => {
                            match TcpStream::connect_timeout(&format!("{ip}:{cport}").parse().unwrap(), Duration::from_millis(200)) {
                                Ok(stream) => {
                                    stream.set_nonblocking(true).unwrap();
                                    if let Some(id) = cl.link_connected(node, now) {
                                        conns.insert(id, Conn { stream, reader: Reader::new(1 << 20) });
                                    }
                                }
                                Err(_) => cl.connect_failed(node, now),
                            }
                        }
                        Action::Close(id) => {
                            conns.remove(&id);
                        }
                        Action::Deliver { .. } | Action::Promoted | Action::ReplicaOf { .. } | Action::PauseWrites { .. } | Action::Unpause | Action::Log(_) => {}
                        Action::SaveConfig => {
                            // What would be written parses back (the file's own test is in
                            // nodes_conf.rs).
                            let text = abacus_cluster::nodes_conf::render(&cl.nodes_conf(true));
                            assert!(parse(&text).is_ok(), "{text}");
                        }
                    }
                }
            }
            drop(cl);
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    Driver { cluster, stop, thread: Some(thread) }
}

/// A CLUSTER NODES line without the ping/pong times and the link state, which differ from
/// one observer to another.
fn comparable(line: &str) -> String {
    let f: Vec<&str> = line.split(' ').collect();
    let flags = f[2].replace("myself,", "");
    [f[0], f[1], &flags, f[3], f[6]].iter().chain(f[8..].iter()).copied().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_state_machine_node_joins_a_redis_cluster_and_sees_a_primary_fail() {
    if !on_path("redis-server") || !on_path("redis-cli") {
        eprintln!("skipped: redis-server and redis-cli not found (apt-get install redis-server redis-tools)");
        return;
    }
    let base = free_ports(4);
    let dir = std::env::temp_dir().join(format!("abacus-join-redis-{base}-{}", std::process::id()));
    let mut redis = Redis { children: Vec::new(), dir: dir.clone() };
    let ports: Vec<u16> = (base..base + 3).collect();
    for &p in &ports {
        let d = dir.join(p.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &p.to_string(), "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--save", "", "--appendonly", "no"])
            .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
            .arg("--dir")
            .arg(&d)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        redis.children.push((p, child));
    }
    for &p in &ports {
        wait_for("redis-server", || cli(p, &["ping"]) == "PONG");
    }
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = Command::new("redis-cli").arg("--cluster").arg("create").args(&addrs).arg("--cluster-yes").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    for &p in &ports {
        wait_for("cluster_state:ok", || cli(p, &["cluster", "info"]).contains("cluster_state:ok"));
    }

    // Our node, met by the first Redis node.
    let our_port = base + 3;
    let node = drive(our_port);
    let me = node.cluster.lock().unwrap().myself;
    let me_text = String::from_utf8(me.as_bytes().to_vec()).unwrap();
    assert_eq!(cli(ports[0], &["cluster", "meet", "127.0.0.1", &our_port.to_string()]), "OK");

    // It learns all three primaries and every slot's owner; the cluster is OK from here.
    wait_for("our node to learn the cluster", || {
        let c = node.cluster.lock().unwrap();
        c.ok && c.nodes.len() == 4 && c.nodes.values().all(|n| !n.is(node_flags::HANDSHAKE) && (n.is(node_flags::MYSELF) || n.link.is_some()))
    });
    // Every Redis node knows it, connected, with its address and hostname.
    for &p in &ports {
        wait_for("redis to know our node", || {
            cli(p, &["cluster", "nodes"]).lines().any(|l| l.starts_with(&me_text) && l.contains(" connected") && l.contains(&format!("127.0.0.1:{our_port}@{},abacus-node", our_port + 10000)))
        });
    }
    // The same view as Redis's, line for line (times and link states aside).
    let redis_view: Vec<String> = {
        let mut v: Vec<String> = cli(ports[0], &["cluster", "nodes"]).lines().map(comparable).collect();
        v.sort();
        v
    };
    wait_for("our view to equal redis's", || {
        let c = node.cluster.lock().unwrap();
        let mut ours: Vec<String> = c.nodes_conf(false).nodes.iter().map(|n| comparable(&render_line(n))).collect();
        ours.sort();
        ours == redis_view
    });

    // Kill a primary: our node marks it PFAIL, then FAIL (its own vote and the other
    // primaries' reports, or their FAIL message), and the cluster is down from here, as from
    // Redis's side.
    let (victim_port, mut victim) = redis.children.remove(2);
    let victim_id = cli(victim_port, &["cluster", "myid"]);
    victim.kill().unwrap();
    victim.wait().unwrap();
    let victim_name = NodeName::new(victim_id.as_bytes()).unwrap();
    wait_for("our node to see the primary fail", || {
        let c = node.cluster.lock().unwrap();
        c.nodes.get(&victim_name).is_some_and(|n| n.is(node_flags::FAIL)) && !c.ok
    });
    wait_for("redis to see it fail too", || cli(ports[0], &["cluster", "nodes"]).lines().any(|l| l.starts_with(&victim_id) && l.contains("fail") && !l.contains("fail?")));
    assert!(cli(ports[0], &["cluster", "info"]).contains("cluster_state:fail"));
}
