//! The codec against a real redis-server 7.0 in cluster mode: a node made of this crate's
//! messages meets it on its bus port, reads its PONG, answers its PING, and becomes a known,
//! connected node in its CLUSTER NODES; and `key_hash_slot` agrees with CLUSTER KEYSLOT.
//!
//! Needs `redis-server` on PATH (or `REDIS_SERVER=/path`); without it each test prints one line
//! saying how to get it and passes (the README's test command installs it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use abacus_cluster_bus::{decode, encode, key_hash_slot, kind, node_flags, Body, Extension, Header, Message, NodeName, Reader, Slots, HEADER_LEN};

const WAIT: Duration = Duration::from_secs(20);

fn redis_server() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("redis-server")).find(|p| p.is_file()))
}

/// A port whose bus port (+10000) is free too.
fn free_port() -> u16 {
    for _ in 0..200 {
        let port = 20000 + (rand_u32() % 10000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair");
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    h.finish() as u32
}

fn random_name() -> NodeName {
    let hex = b"0123456789abcdef";
    let mut n = [0u8; 40];
    for c in n.iter_mut() {
        *c = hex[(rand_u32() % 16) as usize];
    }
    NodeName(n)
}

struct Redis {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Redis {
    fn start(bin: &PathBuf) -> Redis {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("abacus-cluster-bus-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let r = Redis { child, port, dir };
        let deadline = Instant::now() + WAIT;
        while r.cmd(&["PING"]).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        r
    }

    /// One command over RESP; the reply as text (an error as Err).
    fn cmd(&self, args: &[&str]) -> Result<String, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).map_err(|e| e.to_string())?;
        let (tag, rest) = line.split_at(1);
        let rest = rest.trim_end();
        match tag {
            "+" | ":" => Ok(rest.to_string()),
            "-" => Err(rest.to_string()),
            "$" => {
                let n: usize = rest.parse().unwrap();
                let mut buf = vec![0; n + 2];
                r.read_exact(&mut buf).unwrap();
                buf.truncate(n);
                Ok(String::from_utf8(buf).unwrap())
            }
            _ => panic!("unexpected reply {line:?}"),
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn read_message(s: &mut TcpStream) -> Message {
    let mut reader = Reader::new(1 << 20);
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = reader.next_message().expect("a valid message from redis-server") {
            return m;
        }
        let n = s.read(&mut buf).expect("redis-server sends a message");
        assert!(n > 0, "redis-server closed the bus link");
        reader.feed(&buf[..n]);
    }
}

/// Our node's header for a message of `kind`.
fn our_header(kind: u16, name: NodeName, port: u16, cport: u16) -> Header {
    Header { kind, port, sender: name, cport, flags: node_flags::MASTER, slots: Slots::default(), ..Header::default() }
}

#[test]
fn a_node_of_these_messages_joins_redis() {
    let Some(bin) = redis_server() else {
        eprintln!("skipped: redis-server not found (apt-get install redis-server, or REDIS_SERVER=/path)");
        return;
    };
    let redis = Redis::start(&bin);
    redis.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "100"]).unwrap();
    // Announced, it travels as a ping extension.
    redis.cmd(&["CONFIG", "SET", "cluster-announce-hostname", "bus-test.example"]).unwrap();
    let redis_id = redis.cmd(&["CLUSTER", "MYID"]).unwrap();

    // Our node: a bus listener, and a client port we announce (nothing listens there).
    let bus = TcpListener::bind("127.0.0.1:0").unwrap();
    let cport = bus.local_addr().unwrap().port();
    let port = cport.wrapping_sub(10000).max(1);
    let me = random_name();

    // MEET on Redis's bus port: it answers PONG on the same link.
    let mut link = TcpStream::connect(("127.0.0.1", redis.port + 10000)).unwrap();
    link.set_read_timeout(Some(WAIT)).unwrap();
    let meet = Message { header: our_header(kind::MEET, me, port, cport), body: Body::Ping { gossip: vec![], extensions: vec![] } };
    link.write_all(&encode(&meet)).unwrap();
    let pong = read_message(&mut link);
    assert_eq!(pong.header.kind, kind::PONG);
    assert_eq!(pong.header.sender, NodeName::new(redis_id.as_bytes()).unwrap());
    assert_eq!(pong.header.port, redis.port);
    assert_eq!(pong.header.cport, redis.port + 10000);
    assert_ne!(pong.header.flags & node_flags::MASTER, 0);
    assert!(pong.header.replica_of.is_null());
    assert_eq!(pong.header.slots.ranges(), vec![(0, 100)]);
    let Body::Ping { extensions, .. } = &pong.body else { panic!("{:?}", pong.body) };
    assert!(extensions.contains(&Extension::Hostname(b"bus-test.example".to_vec())), "{extensions:?}");

    // Redis now knows us as a node in handshake, and connects to our bus port to PING us.
    let (mut inbound, _) = accept_within(&bus);
    inbound.set_read_timeout(Some(WAIT)).unwrap();
    let ping = read_message(&mut inbound);
    assert_eq!(ping.header.kind, kind::PING);
    assert_eq!(ping.header.sender.as_bytes(), redis_id.as_bytes());
    let reply = Message { header: our_header(kind::PONG, me, port, cport), body: Body::Ping { gossip: vec![], extensions: vec![] } };
    inbound.write_all(&encode(&reply)).unwrap();

    // Our PONG ends the handshake: Redis renames its handshake node to our name.
    let me_text = String::from_utf8(me.as_bytes().to_vec()).unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let nodes = redis.cmd(&["CLUSTER", "NODES"]).unwrap();
        let line = nodes.lines().find(|l| l.starts_with(&me_text));
        if let Some(line) = line {
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!(fields[1], format!("127.0.0.1:{port}@{cport}"), "{line}");
            assert!(fields[2].contains("master") && !fields[2].contains("handshake"), "{line}");
            assert_eq!(fields[7], "connected", "{line}");
            break;
        }
        assert!(Instant::now() < deadline, "redis-server never took our node: {nodes}");
        // Keep answering its pings meanwhile.
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn accept_within(l: &TcpListener) -> (TcpStream, std::net::SocketAddr) {
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        match l.accept() {
            Ok((s, a)) => {
                s.set_nonblocking(false).unwrap();
                return (s, a);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "redis-server never connected to our bus port");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn redis_refuses_what_decode_refuses_and_takes_what_encode_writes() {
    let Some(bin) = redis_server() else {
        eprintln!("skipped: redis-server not found (apt-get install redis-server, or REDIS_SERVER=/path)");
        return;
    };
    let redis = Redis::start(&bin);
    // A PING whose gossip count disagrees with its length: decode refuses it, and Redis
    // ignores it (no PONG comes back; it logs "Bad message length").
    let me = random_name();
    let mut bad = encode(&Message { header: our_header(kind::MEET, me, 1, 2), body: Body::Ping { gossip: vec![], extensions: vec![] } });
    bad[15] = 1;
    assert!(decode(&bad).is_err());
    let mut link = TcpStream::connect(("127.0.0.1", redis.port + 10000)).unwrap();
    link.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    link.write_all(&bad).unwrap();
    let mut buf = [0u8; 16];
    match link.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("redis-server answered a malformed MEET with {n} bytes"),
        Err(e) => assert!(matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::ConnectionReset), "{e}"),
    }
    assert!(!redis.cmd(&["CLUSTER", "NODES"]).unwrap().contains("handshake"));
    // A header-only message of a type Redis does not know is taken as well formed, as decode
    // takes it: the link stays open and a MEET after it is answered.
    let mut link = TcpStream::connect(("127.0.0.1", redis.port + 10000)).unwrap();
    link.set_read_timeout(Some(WAIT)).unwrap();
    let unknown = encode(&Message { header: our_header(42, me, 1, 2), body: Body::Unknown(vec![]) });
    assert_eq!(unknown.len(), HEADER_LEN);
    link.write_all(&unknown).unwrap();
    link.write_all(&encode(&Message { header: our_header(kind::MEET, me, 1, 2), body: Body::Ping { gossip: vec![], extensions: vec![] } })).unwrap();
    assert_eq!(read_message(&mut link).header.kind, kind::PONG);
}

#[test]
fn key_hash_slot_agrees_with_cluster_keyslot() {
    let Some(bin) = redis_server() else {
        eprintln!("skipped: redis-server not found (apt-get install redis-server, or REDIS_SERVER=/path)");
        return;
    };
    let redis = Redis::start(&bin);
    let mut keys: Vec<String> = (0..300).map(|i| format!("key:{i}:{}", rand_u32())).collect();
    keys.extend(["{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{a", "a}", "é{ü}"].map(String::from));
    for k in keys {
        let slot: u16 = redis.cmd(&["CLUSTER", "KEYSLOT", &k]).unwrap().parse().unwrap();
        assert_eq!(key_hash_slot(k.as_bytes()), slot, "{k}");
    }
}
