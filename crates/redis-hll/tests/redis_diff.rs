//! Differential test against a real `redis-server` (Debian's, Redis 7.0).
//!
//! A model keyspace (`key -> string bytes`) implements PFADD / PFCOUNT /
//! PFMERGE on top of `abacus_redis_hll` exactly as the crate docs tell the
//! server to; every command is sent to both, and replies and the resulting
//! string bytes (`GET`) must be identical. Values built by the model are also
//! `SET` into Redis, and corrupted values are fed to both.
//!
//! The server is started on a free 127.0.0.1 port without persistence and is
//! killed by a drop guard. Without `redis-server` the test fails unless
//! `ABACUS_SKIP_REDIS=1`. `REDIS_SERVER` overrides the binary path.

use abacus_redis_hll::{HllError, RedisHll, DENSE_SIZE, HLL_REGISTERS};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- server --

struct RedisServer {
    child: Child,
    port: u16,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_redis_server() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
}

fn start_server() -> Option<RedisServer> {
    let Some(bin) = find_redis_server() else {
        if std::env::var("ABACUS_SKIP_REDIS").as_deref() == Ok("1") {
            eprintln!("redis-server not found; skipped because ABACUS_SKIP_REDIS=1");
            return None;
        }
        panic!(
            "redis-server not found (install Debian's redis-server, set REDIS_SERVER, \
             or set ABACUS_SKIP_REDIS=1 to skip this differential test)"
        );
    };
    // The port was free when picked, but something may take it before redis-server binds:
    // then the server exits at once, and a new port is tried (a few times).
    for attempt in 1..=3 {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args([
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
            ])
            .args([
                "--loglevel",
                "warning",
                "--dir",
                &std::env::temp_dir().to_string_lossy(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                assert!(attempt < 3, "redis-server exited at start ({status}) three times");
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(server);
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    unreachable!("the loop returns or panics")
}

// ------------------------------------------------------------------ RESP --

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Client {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    fn send(&mut self, args: &[&[u8]]) {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&buf).unwrap();
    }

    fn read(&mut self) -> Reply {
        let mut line = Vec::new();
        self.r
            .read_until(b'\n', &mut line)
            .expect("redis connection lost (crashed?)");
        assert!(line.ends_with(b"\r\n"), "bad RESP line {line:?}");
        let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        match line[0] {
            b'+' => Reply::Simple(text),
            b'-' => Reply::Error(text),
            b':' => Reply::Int(text.parse().unwrap()),
            b'$' => {
                let n: i64 = text.parse().unwrap();
                if n < 0 {
                    return Reply::Bulk(None);
                }
                let mut data = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut data).unwrap();
                data.truncate(n as usize);
                Reply::Bulk(Some(data))
            }
            b'*' => {
                let n: i64 = text.parse().unwrap();
                Reply::Array((0..n.max(0)).map(|_| self.read()).collect())
            }
            c => panic!("unexpected RESP type {c}"),
        }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Reply {
        self.send(args);
        self.read()
    }
}

// ----------------------------------------------------------------- model --

/// Our keyspace of string values, with the commands implemented the way the
/// crate docs prescribe.
struct Model {
    keys: HashMap<Vec<u8>, Vec<u8>>,
    max_bytes: usize,
}

fn err(e: HllError) -> Reply {
    Reply::Error(e.redis_message().to_string())
}

impl Model {
    fn pfadd(&mut self, key: &[u8], els: &[Vec<u8>]) -> Reply {
        let Some(v) = self.keys.get(key) else {
            let mut h = RedisHll::new();
            for e in els {
                h.add(e, self.max_bytes).unwrap();
            }
            h.invalidate_cache();
            self.keys.insert(key.to_vec(), h.into_bytes());
            return Reply::Int(1);
        };
        let mut h = match RedisHll::from_bytes(v.clone()) {
            Ok(h) => h,
            Err(e) => return err(e),
        };
        let mut updated = false;
        for e in els {
            match h.add(e, self.max_bytes) {
                Ok(c) => updated |= c,
                Err(e) => {
                    self.keys.insert(key.to_vec(), h.into_bytes());
                    return err(e);
                }
            }
        }
        self.keys.insert(key.to_vec(), h.into_bytes());
        Reply::Int(i64::from(updated))
    }

    fn pfcount(&mut self, keys: &[&[u8]]) -> Reply {
        if keys.len() == 1 {
            let Some(v) = self.keys.get(keys[0]) else {
                return Reply::Int(0);
            };
            let mut h = match RedisHll::from_bytes(v.clone()) {
                Ok(h) => h,
                Err(e) => return err(e),
            };
            return match h.count() {
                Ok(c) => {
                    self.keys.insert(keys[0].to_vec(), h.into_bytes());
                    Reply::Int(c as i64)
                }
                Err(e) => err(e),
            };
        }
        let mut regs = [0u8; HLL_REGISTERS];
        for k in keys {
            let Some(v) = self.keys.get(*k) else { continue };
            let h = match RedisHll::from_bytes(v.clone()) {
                Ok(h) => h,
                Err(e) => return err(e),
            };
            if let Err(e) = h.merge_into(&mut regs) {
                return err(e);
            }
        }
        Reply::Int(RedisHll::count_registers(&regs) as i64)
    }

    fn pfmerge(&mut self, dest: &[u8], srcs: &[&[u8]]) -> Reply {
        let mut regs = [0u8; HLL_REGISTERS];
        let mut use_dense = false;
        for k in std::iter::once(&dest).chain(srcs.iter()) {
            let Some(v) = self.keys.get(*k) else { continue };
            let h = match RedisHll::from_bytes(v.clone()) {
                Ok(h) => h,
                Err(e) => return err(e),
            };
            use_dense |= h.is_dense();
            if let Err(e) = h.merge_into(&mut regs) {
                return err(e);
            }
        }
        let mut d = match self.keys.get(dest) {
            Some(v) => RedisHll::from_bytes(v.clone()).unwrap(),
            None => RedisHll::new(),
        };
        if let Err(e) = d.store_merged(&regs, use_dense, self.max_bytes) {
            return err(e);
        }
        self.keys.insert(dest.to_vec(), d.into_bytes());
        Reply::Simple("OK".into())
    }
}

// ------------------------------------------------------------ the driver --

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn element(&mut self) -> Vec<u8> {
        match self.below(4) {
            // Small alphabet: plenty of duplicates.
            0 => format!("dup{}", self.below(300)).into_bytes(),
            1 => self.next().to_le_bytes().to_vec(),
            _ => {
                let len = self.below(25) as usize;
                (0..len).map(|_| self.next() as u8).collect()
            }
        }
    }
}

struct Diff {
    redis: Client,
    model: Model,
    commands: usize,
}

impl Diff {
    fn check_key(&mut self, key: &[u8], ctx: &str) {
        let got = self.redis.cmd(&[b"GET", key]);
        let want = Reply::Bulk(self.model.keys.get(key).cloned());
        if got != want {
            let (g, w) = match (&got, &want) {
                (Reply::Bulk(Some(g)), Reply::Bulk(Some(w))) => (g.clone(), w.clone()),
                _ => panic!("{ctx}: GET {key:?}: redis {got:?} model {want:?}"),
            };
            let first = g.iter().zip(&w).position(|(a, b)| a != b);
            panic!(
                "{ctx}: GET {:?} differs: redis len {} model len {}, first diff at {first:?}\n\
                 redis head {:?}\nmodel head {:?}\nredis tail {:?}\nmodel tail {:?}",
                String::from_utf8_lossy(key),
                g.len(),
                w.len(),
                &g[..g.len().min(64)],
                &w[..w.len().min(64)],
                &g[g.len().saturating_sub(16)..],
                &w[w.len().saturating_sub(16)..]
            );
        }
    }

    fn pfadd(&mut self, key: &[u8], els: &[Vec<u8>]) -> Reply {
        let mut args: Vec<&[u8]> = vec![b"PFADD", key];
        args.extend(els.iter().map(|e| e.as_slice()));
        let got = self.redis.cmd(&args);
        let want = self.model.pfadd(key, els);
        self.commands += 1;
        assert_eq!(
            got,
            want,
            "PFADD {:?} ({} elements)",
            String::from_utf8_lossy(key),
            els.len()
        );
        got
    }

    fn pfcount(&mut self, keys: &[&[u8]]) -> Reply {
        let mut args: Vec<&[u8]> = vec![b"PFCOUNT"];
        args.extend_from_slice(keys);
        let got = self.redis.cmd(&args);
        let want = self.model.pfcount(keys);
        self.commands += 1;
        assert_eq!(got, want, "PFCOUNT {keys:?}");
        got
    }

    fn pfmerge(&mut self, dest: &[u8], srcs: &[&[u8]]) -> Reply {
        let mut args: Vec<&[u8]> = vec![b"PFMERGE", dest];
        args.extend_from_slice(srcs);
        let got = self.redis.cmd(&args);
        let want = self.model.pfmerge(dest, srcs);
        self.commands += 1;
        assert_eq!(got, want, "PFMERGE {dest:?} {srcs:?}");
        self.check_key(dest, "after PFMERGE");
        got
    }

    fn set(&mut self, key: &[u8], value: Vec<u8>) {
        assert_eq!(
            self.redis.cmd(&[b"SET", key, &value]),
            Reply::Simple("OK".into())
        );
        self.model.keys.insert(key.to_vec(), value);
    }

    fn set_max_bytes(&mut self, n: usize) {
        let v = n.to_string();
        let r = self
            .redis
            .cmd(&[b"CONFIG", b"SET", b"hll-sparse-max-bytes", v.as_bytes()]);
        assert_eq!(r, Reply::Simple("OK".into()));
        self.model.max_bytes = n;
    }

    /// PFADDs `n` random elements in random batches into `key`, checking
    /// replies, bytes and counts along the way.
    fn trace(&mut self, rng: &mut Rng, key: &[u8], n: usize) {
        if n == 0 {
            self.pfadd(key, &[]);
            self.check_key(key, "PFADD no elements");
        }
        let mut added = 0;
        while added < n {
            let batch = (1 + rng.below(40) as usize).min(n - added);
            let els: Vec<Vec<u8>> = (0..batch).map(|_| rng.element()).collect();
            added += batch;
            self.pfadd(key, &els);
            let check_every = if n > 3000 { 16 } else { 2 };
            if rng.below(check_every) == 0 {
                self.check_key(key, "PFADD");
            }
            if rng.below(check_every * 2) == 0 {
                self.pfcount(&[key]);
                self.check_key(key, "PFCOUNT");
            }
        }
        self.check_key(key, "end of trace");
        self.pfcount(&[key]);
        self.pfcount(&[key]);
        self.check_key(key, "end of trace, counted");
    }
}

#[test]
fn matches_real_redis() {
    let Some(server) = start_server() else { return };
    let started = Instant::now();
    let mut d = Diff {
        redis: Client::connect(server.port),
        model: Model {
            keys: HashMap::new(),
            max_bytes: 3000,
        },
        commands: 0,
    };
    let seed = std::env::var("HLL_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = Rng(seed);
    let version = d.redis.cmd(&[b"INFO", b"server"]);
    if let Reply::Bulk(Some(info)) = &version {
        let info = String::from_utf8_lossy(info);
        let v = info
            .lines()
            .find(|l| l.starts_with("redis_version"))
            .unwrap_or("?");
        eprintln!("differential test against {v}, seed {seed}");
    }
    assert_eq!(
        d.redis.cmd(&[b"CONFIG", b"GET", b"hll-sparse-max-bytes"]),
        Reply::Array(vec![
            Reply::Bulk(Some(b"hll-sparse-max-bytes".to_vec())),
            Reply::Bulk(Some(b"3000".to_vec()))
        ])
    );

    // 1. PFADD traces of many sizes, crossing the sparse -> dense promotion.
    let sizes = [
        0usize, 1, 2, 7, 40, 150, 400, 800, 1200, 1700, 2500, 4000, 8000, 20000,
    ];
    let mut keys = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let key = format!("t{i}:{n}").into_bytes();
        d.trace(&mut rng, &key, n);
        keys.push(key);
    }
    for _ in 0..6 {
        let n = rng.below(20_000) as usize;
        let key = format!("r:{n}").into_bytes();
        d.trace(&mut rng, &key, n);
        keys.push(key);
    }
    let dense_count = keys
        .iter()
        .filter(|k| d.model.keys[*k].len() == DENSE_SIZE)
        .count();
    assert!(
        dense_count >= 3 && dense_count < keys.len(),
        "{dense_count} dense keys"
    );

    // 2. Other hll-sparse-max-bytes settings.
    for (j, max) in [0usize, 40, 500, 9000].into_iter().enumerate() {
        d.set_max_bytes(max);
        for n in [1usize, 300, 3000] {
            let key = format!("m{j}:{max}:{n}").into_bytes();
            d.trace(&mut rng, &key, n);
            keys.push(key);
        }
    }
    d.set_max_bytes(3000);

    // 3. Multi-key PFCOUNT and PFMERGE over sparse, dense and missing keys.
    let mut all: Vec<Vec<u8>> = keys.clone();
    all.push(b"missing".to_vec());
    for i in 0..60 {
        let k = 1 + rng.below(3) as usize;
        let srcs: Vec<&[u8]> = (0..k)
            .map(|_| all[rng.below(all.len() as u64) as usize].as_slice())
            .collect();
        d.pfcount(&srcs);
        let dest = format!("merge{i}").into_bytes();
        match rng.below(3) {
            0 => {}
            // Destination already holds a (sparse or dense) value.
            _ => {
                let from = &all[rng.below(keys.len() as u64) as usize];
                let v = d.model.keys[from].clone();
                d.set(&dest, v);
            }
        }
        if rng.below(4) == 0 {
            d.set_max_bytes([100, 3000, 12000][rng.below(3) as usize]);
        }
        d.pfmerge(&dest, &srcs);
        d.pfcount(&[&dest]);
        d.check_key(&dest, "PFCOUNT after PFMERGE");
        d.pfadd(&dest, &[rng.element(), rng.element()]);
        d.check_key(&dest, "PFADD after PFMERGE");
    }
    d.set_max_bytes(3000);

    // 4. Values we built (with another sparse limit) SET into Redis.
    for (i, n) in [10usize, 500, 900, 6000].into_iter().enumerate() {
        let mut h = RedisHll::new();
        for _ in 0..n {
            h.add(&rng.element(), 100_000).unwrap();
        }
        let key = format!("ours{i}").into_bytes();
        d.set(&key, h.into_bytes());
        d.pfcount(&[&key]);
        d.check_key(&key, "PFCOUNT of our value");
        let els: Vec<Vec<u8>> = (0..50).map(|_| rng.element()).collect();
        d.pfadd(&key, &els);
        d.check_key(&key, "PFADD to our value");
    }

    // 5. Hand-made dense value with every register above Q+1.
    let mut v = RedisHll::new();
    v.to_dense().unwrap();
    let mut v = v.into_bytes();
    v[16..].fill(0xff);
    v[15] |= 0x80;
    d.set(b"all63", v);
    assert_eq!(d.pfcount(&[b"all63"]), Reply::Int(i64::MIN));
    d.check_key(b"all63", "all63");
    d.pfcount(&[b"all63", b"t0:0"]);

    // 6. Corrupted values: both must answer alike (value or error).
    let base: Vec<Vec<u8>> = keys.iter().map(|k| d.model.keys[k].clone()).collect();
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for i in 0..1000 {
        let mut v = base[rng.below(base.len() as u64) as usize].clone();
        match rng.below(6) {
            0 => {
                let at = rng.below(v.len() as u64) as usize;
                v[at] ^= 1 << rng.below(8);
            }
            1 => {
                let at = 16 + rng.below((v.len() - 15) as u64) as usize;
                v.truncate(at);
            }
            2 => {
                for _ in 0..1 + rng.below(4) {
                    v.push(rng.next() as u8);
                }
            }
            3 => {
                // Corrupt the sparse body only, several bytes.
                if v.len() > 16 {
                    for _ in 0..1 + rng.below(3) {
                        let at = 16 + rng.below((v.len() - 16) as u64) as usize;
                        v[at] = rng.next() as u8;
                    }
                }
            }
            4 => {
                let at = 16 + rng.below((v.len() - 15) as u64) as usize;
                v.insert(at, rng.next() as u8);
            }
            _ => {
                let at = rng.below(v.len().min(17) as u64) as usize;
                v[at] = rng.next() as u8;
            }
        }
        if rng.below(2) == 0 {
            v[15] |= 0x80; // make sure the body gets used
        }
        let key = format!("bad{i}").into_bytes();
        if std::env::var("HLL_DIFF_DEBUG").is_ok() {
            eprintln!(
                "bad{i}: len {} tail {:?}",
                v.len(),
                &v[v.len().saturating_sub(16)..]
            );
        }
        d.set(&key, v);
        let reply = match rng.below(4) {
            0 => d.pfcount(&[&key]),
            1 => {
                let els: Vec<Vec<u8>> = (0..1 + rng.below(30)).map(|_| rng.element()).collect();
                d.pfadd(&key, &els)
            }
            2 => {
                let other = keys[rng.below(keys.len() as u64) as usize].clone();
                d.pfcount(&[&key, &other])
            }
            _ => {
                let dest = format!("baddest{i}").into_bytes();
                d.pfmerge(&dest, &[&key])
            }
        };
        d.check_key(&key, "corrupted");
        let kind = match reply {
            Reply::Error(e) => e.split(' ').next().unwrap_or("").to_string(),
            _ => "ok".to_string(),
        };
        *outcomes.entry(kind).or_default() += 1;
    }
    eprintln!("corrupted values: {outcomes:?}");
    assert!(
        outcomes.len() == 3,
        "expected ok, WRONGTYPE and INVALIDOBJ outcomes: {outcomes:?}"
    );

    eprintln!(
        "{} commands compared in {:?}",
        d.commands,
        started.elapsed()
    );
    assert_eq!(d.redis.cmd(&[b"PING"]), Reply::Simple("PONG".into()));
    drop(server);
}
