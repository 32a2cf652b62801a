//! Start-up and the thread layout: listeners, worker threads, shards and signals.
//!
//! `threads` worker threads each run a single-threaded tokio runtime that owns one shard (its
//! `shard_loop` task) and the connections assigned to that thread. One acceptor thread per
//! listening address accepts connections and deals them round-robin to the workers, so
//! connections spread evenly. A connection whose commands all go to another thread's shard
//! moves to that thread (`conn/migrate.rs`), through the same per-worker queue that
//! brings it new connections. The main thread waits for SIGINT/SIGTERM.
//!
//! Nothing is shared between workers but this `Server` (configuration, the shards' queues,
//! the client registry and a few counters): shard data is only reachable through its queue.

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::clients::Clients;
use abacus_engine::config::Config;
use abacus_engine::engine::Engine;
use abacus_engine::exec::Worker;
use abacus_engine::shard::{shard_loop, Shard, ShardMsg, SHARD_QUEUE_CAPACITY};
use abacus_engine::stats::ServerStats;

pub use crate::node::{Incoming, Node, Pause, PauseGuard, Server, ABACUS_VERSION, REDIS_VERSION};

/// Checks the configuration for start-up errors a user must fix.
pub fn check_startup(config: &Config) -> Result<(), String> {
    if config.get(abacus_engine::param!("dir")).trim().is_empty() {
        return Err("dir: the data directory must not be empty".into());
    }
    let binds: Vec<String> = config.get(abacus_engine::param!("bind")).split_whitespace().map(String::from).collect();
    if binds.is_empty() {
        return Err("bind: at least one address is required".into());
    }
    for b in &binds {
        let ip: IpAddr = b.trim_start_matches('-').parse().map_err(|_| format!("bind: '{b}' is not an IP address"))?;
        if !ip.is_loopback() && config.get_bool(abacus_engine::param!("protected-mode")) && config.requirepass().is_none() {
            return Err(format!(
                "refusing to listen on non-loopback address {b} without a password: anyone who can reach this \
                 address could read and change all data. Set a password with --requirepass, or, if the network \
                 is trusted, start with --protected-mode no"
            ));
        }
    }
    Ok(())
}

/// Makes a panic on a worker thread end the process. Tokio catches a panicking task and the
/// thread runs on: after a panic in a shard's loop its keys were unreachable (every command on
/// them answered "server is shutting down") while the process lived on, holding the port, with
/// nothing to tell a supervisor. Failing fast instead (after the default hook has logged the
/// panic and its backtrace) lets a supervisor restart the server and recovery reload the data.
fn abort_on_worker_panic() {
    // A static because the panic hook it guards is the process's, not a server's.
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if is_worker_thread(std::thread::current().name()) {
                tracing::error!("a worker thread panicked: aborting");
                std::process::abort();
            }
        }));
    });
}

fn is_worker_thread(name: Option<&str>) -> bool {
    name.is_some_and(|n| n.starts_with(WORKER_THREAD_PREFIX))
}

const WORKER_THREAD_PREFIX: &str = "abacus-worker-";

/// Runs the server until SIGINT or SIGTERM.
pub fn run(config: Config) -> Result<(), String> {
    crate::cmd::install_table();
    check_startup(&config)?;
    let acl = crate::acl::Acl::at_startup(&config)?;
    let summarizer = crate::summarizer::Summarizer::default();
    summarizer.load_at_startup(&config)?;
    let dir = config.get(abacus_engine::param!("dir"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create data directory '{dir}': {e}"))?;
    // One server per data directory, taken before anything is read or bound: a second server
    // started on it by mistake stops here, before it could append to the same log. Held until
    // the process ends (SHUTDOWN exits without unwinding: the kernel releases it then).
    let _dir_lock = abacus_persist::dirlock::DirLock::acquire(std::path::Path::new(&dir), "abacus serve")?;
    let dir = abacus_persist::dirlock::absolute(std::path::Path::new(&dir)).display().to_string();
    let plain_port = config.get_u64(abacus_engine::param!("port")) as u16;
    let tls_port = config.get_u64(abacus_engine::param!("tls-port")) as u16;
    // As Redis: `port 0` leaves only the TLS port, which then names this server (replicas
    // announce it, the cluster bus is 10000 above it).
    // So does `tls-cluster yes`: the cluster then redirects clients to the TLS port, as Redis.
    let tls_cluster = config.get_bool(abacus_engine::param!("tls-cluster"));
    let port = if plain_port == 0 || (tls_cluster && tls_port != 0) { tls_port } else { plain_port };
    let tls = Arc::new(crate::tls::at_startup(&config)?);
    // (listener, whether it speaks TLS)
    let mut listeners = Vec::new();
    for b in config.get(abacus_engine::param!("bind")).split_whitespace() {
        let ip: IpAddr = b.trim_start_matches('-').parse().map_err(|_| format!("bind: '{b}' is not an IP address"))?;
        for (p, is_tls) in [(plain_port, false), (tls_port, true)] {
            if p == 0 {
                continue;
            }
            let addr = SocketAddr::new(ip, p);
            let l = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            listeners.push((l, is_tls));
        }
    }
    let cluster = crate::cluster::open(&config, std::path::Path::new(&dir), port)?;
    let mut metrics_listeners = crate::metrics::bind(&config)?;
    let ingest_listeners = crate::ingest_port::bind(&config)?;
    let threads = config.threads();
    let databases = config.get_u64(abacus_engine::param!("databases")) as usize;
    // Before any database exists: the key tables are created with their density.
    abacus_keyspace::set_dense_key_tables(config.get(abacus_engine::param!("keyspace-density")) == "dense");
    let dir_path = std::path::PathBuf::from(&dir);
    // The recorders first: clients may connect while the data loads, and they get -LOADING
    // (INFO shows the progress).
    let recorders = abacus_engine::recorders::Recorders::new(&config);
    recorders.loading.start(0);
    let mut senders = Vec::with_capacity(threads);
    let mut receivers = Vec::with_capacity(threads);
    let mut conn_queues = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = mpsc::channel(SHARD_QUEUE_CAPACITY);
        // Unbounded, but each entry is a socket: bounded by the descriptors the process may hold
        // (accept fails with EMFILE beyond them; maxclients closes the rest on arrival).
        let (ctx, crx) = mpsc::unbounded_channel::<Incoming>();
        senders.push(tx);
        conn_queues.push(ctx);
        receivers.push((rx, crx));
    }
    let scripts = Arc::new(abacus_scripting::Shared::default());
    scripts.heap_limit.store(config.get_u64(abacus_engine::param!("lua-heap-limit")), std::sync::atomic::Ordering::Relaxed);
    let engine = Arc::new(Engine {
        config,
        senders,
        stats: ServerStats::new(threads),
        databases,
        order: abacus_engine::order::Order::new(threads),
        durability: abacus_engine::durability::Durability::new(),
        recorders,
        scripts,
    });
    let server: Arc<Server> = Arc::new(Server {
        engine,
        conn_queues,
        clients: Clients::default(),
        started: Instant::now(),
        run_id: format!("{:040x}", rand::random::<u128>()),
        port,
        threads,
        pause: Pause::default(),
        monitors: crate::monitor::Monitors::default(),
        acl,
        client_pause: crate::client_pause::ClientPause::default(),
        summarizer,
        cluster: cluster.as_ref().map(|(node, _)| node.clone()),
        tls,
        export: crate::export::progress::Exports::default(),
    });
    if let Some((node, bus)) = cluster {
        crate::cluster::start_bus(node, bus, server.clone())?;
    }
    let registry = Arc::downgrade(&server);
    server.recorders.slowlog.set_client_lookup(Box::new(move |id| registry.upgrade()?.clients.get(id).map(|c| c.slowlog_label())));
    // Replication consumes the effects stream beside the log (`durability::Feed`).
    server.durability.set_feed(Arc::new(crate::replication::Feed));

    abort_on_worker_panic();
    for (id, (rx, mut crx)) in receivers.into_iter().enumerate() {
        let server = server.clone();
        // The metrics endpoint is served on worker 0 (`metrics.rs`).
        let metrics = if id == 0 { std::mem::take(&mut metrics_listeners) } else { Vec::new() };
        // Every worker accepts from the summarizer's line port (`ingest_port.rs`).
        let ingest: Vec<TcpListener> = ingest_listeners.iter().filter_map(|l| l.try_clone().ok()).collect();
        std::thread::Builder::new()
            .name(format!("{WORKER_THREAD_PREFIX}{id}"))
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!("worker {id}: cannot start runtime: {e}");
                        std::process::exit(1);
                    }
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let shard = Rc::new(RefCell::new(Shard::new(id, databases, server.durability.clone(), server.recorders.clone())));
                    tokio::task::spawn_local(shard_loop(shard.clone(), rx, server.engine.clone()));
                    let hops = abacus_engine::hop::Hops::new(server.engine.clone(), id, shard.clone());
                    let engine_worker = Rc::new(Worker { engine: server.engine.clone(), shard_id: id, shard, hops });
                    if id == 0 {
                        tokio::task::spawn_local(abacus_engine::snapshot::driver(engine_worker.clone()));
                    }
                    let worker = Rc::new(Node { server, worker: engine_worker, migrate_links: Default::default() });
                    for l in metrics {
                        tokio::task::spawn_local(crate::metrics::serve(worker.clone(), l));
                    }
                    for l in ingest {
                        tokio::task::spawn_local(crate::ingest_port::serve(worker.clone(), l));
                    }
                    while let Some(incoming) = crx.recv().await {
                        match incoming {
                            Incoming::New(stream, addr) => {
                                if stream.set_nonblocking(true).is_err() {
                                    continue;
                                }
                                if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                                    tokio::task::spawn_local(crate::conn::serve(worker.clone(), abacus_tls::Stream::Plain(stream), addr));
                                }
                            }
                            Incoming::NewTls(stream, addr) => {
                                if stream.set_nonblocking(true).is_err() {
                                    continue;
                                }
                                if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                                    tokio::task::spawn_local(crate::conn::serve_tls(worker.clone(), stream, addr));
                                }
                            }
                            Incoming::Moved(moved) => {
                                tokio::task::spawn_local(crate::conn::resume(worker.clone(), *moved));
                            }
                            Incoming::Run(f) => f(worker.clone()),
                        }
                    }
                });
            })
            .map_err(|e| format!("cannot start worker thread: {e}"))?;
    }

    let addrs: Vec<String> = listeners.iter().map(|(l, t)| l.local_addr().map(|a| if *t { format!("{a} (tls)") } else { a.to_string() }).unwrap_or_default()).collect();
    tracing::info!("{}", banner(&server.config, &addrs, threads, &dir));
    for (l, is_tls) in listeners {
        let server = server.clone();
        let keepalive = server.config.get_u64(abacus_engine::param!("tcp-keepalive"));
        std::thread::Builder::new()
            .name("abacus-accept".into())
            .spawn(move || {
                let mut next = 0usize;
                let mut last_warned: Option<Instant> = None;
                for stream in l.incoming() {
                    let stream = match stream {
                        Ok(s) => s,
                        Err(e) => {
                            // Out of descriptors (EMFILE) and the like: retrying at once would
                            // spin a core until a client leaves.
                            if last_warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                                tracing::warn!("Accepting client connection: {e}");
                                last_warned = Some(Instant::now());
                            }
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                    };
                    let Ok(addr) = stream.peer_addr() else { continue };
                    if keepalive > 0 {
                        let _ = set_keepalive(&stream, keepalive);
                    }
                    let queues = &server.conn_queues;
                    // Not to the thread a long script holds: the client could not even be
                    // told the server is busy.
                    if queues.len() > 1 && server.scripts.running_count.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                        let threshold = server.config.get_u64(abacus_engine::param!("busy-reply-threshold"));
                        if let Some((busy, _)) = server.scripts.busy(abacus_engine::shard::now_ms(), threshold.min(100)) {
                            if next % queues.len() == busy {
                                next = next.wrapping_add(1);
                            }
                        }
                    }
                    let incoming = if is_tls { Incoming::NewTls(stream, addr) } else { Incoming::New(stream, addr) };
                    let _ = queues[next % queues.len()].send(incoming);
                    next = next.wrapping_add(1);
                }
            })
            .map_err(|e| format!("cannot start acceptor thread: {e}"))?;
    }
    abacus_engine::memory::note_startup();
    load_data(&server, &dir_path, threads, databases)?;
    // Only now: until the data is loaded, clients that connect get -LOADING.
    for a in &addrs {
        tracing::info!("Ready to accept connections tcp on {a}");
    }
    loop {
        wait_for_signal();
        tracing::info!("Received shutdown signal, scheduling shutdown...");
        // As Redis: with snapshots scheduled and the log off, a clean stop saves a snapshot.
        if !server.config.get(abacus_engine::param!("save")).trim().is_empty() && !server.config.get_bool(abacus_engine::param!("appendonly")) {
            tracing::info!("Saving the final snapshot before exiting");
            if !abacus_engine::snapshot::final_save_blocking(&server.durability) {
                // As Redis: exiting now would lose every write since the last snapshot.
                tracing::error!("Error trying to save the DB, can't exit.");
                tracing::error!("SIGTERM received but errors trying to shut down the server, check the logs for more information");
                continue;
            }
        }
        if let Err(e) = server.durability.shutdown() {
            tracing::error!("the append-only log cannot be written ({e}): acknowledged writes would be lost, not exiting");
            tracing::error!("SIGTERM received but errors trying to shut down the server, check the logs for more information");
            continue;
        }
        break;
    }
    tracing::info!("Abacus is now ready to exit, bye bye...");
    Ok(())
}

/// The start-up banner: what an operator needs to know about this process in one line.
pub fn banner(config: &Config, addrs: &[String], threads: usize, dir: &str) -> String {
    let maxmemory = match config.get_u64(abacus_engine::param!("maxmemory")) {
        0 => "none".to_string(),
        m => format!("{m} bytes ({:.1} MiB)", m as f64 / (1024.0 * 1024.0)),
    };
    let persistence = if config.get_bool(abacus_engine::param!("appendonly")) {
        format!("appendonly yes, appendfsync {}", config.get(abacus_engine::param!("appendfsync")))
    } else {
        "appendonly no".to_string()
    };
    let save = config.get(abacus_engine::param!("save"));
    let save = if save.trim().is_empty() { "none".to_string() } else { format!("\"{save}\"") };
    let file = match config.config_file() {
        Some(f) => format!(", config file {}", f.display()),
        None => String::new(),
    };
    format!(
        "Abacus {ABACUS_VERSION} (Redis {REDIS_VERSION} protocol) starting: pid {}, listening on {}, {threads} worker threads, \
         data directory {dir}, maxmemory {maxmemory}, maxmemory-policy {}, {persistence}, save {save}{file}",
        std::process::id(),
        addrs.join(" "),
        config.get(abacus_engine::param!("maxmemory-policy")),
    )
}

/// Recovers the data directory into the running shards, then opens the log and ends the
/// loading state. Loading happens on this thread into shards of its own, which then replace
/// the workers' empty shards (no write reaches a worker while loading: they are refused).
fn load_data(server: &Arc<Server>, dir_path: &std::path::Path, threads: usize, databases: usize) -> Result<(), String> {
    let config = &server.config;
    let recovered = abacus_engine::recovery::recover(config, dir_path, threads, databases, crate::conn::handler::replayer(), &server.recorders)?;
    let mut manifest = recovered.manifest;
    abacus_scripting::install_libraries(&server.scripts, recovered.functions, crate::node::REDIS_VERSION, crate::node::REDIS_VERSION_NUM)?;
    let (ack_tx, ack_rx) = std::sync::mpsc::channel();
    for (id, shard) in recovered.shards.into_iter().enumerate() {
        let ack = ack_tx.clone();
        let job: abacus_engine::shard::Job = Box::new(move |s: &mut Shard| {
            // The data only: the worker's shard keeps its own log buffer and server handle.
            s.dbs = shard.dbs;
            let _ = ack.send(());
        });
        server.senders[id].blocking_send(ShardMsg::Run(job)).map_err(|_| "a worker stopped while loading".to_string())?;
    }
    for _ in 0..threads {
        ack_rx.recv().map_err(|_| "a worker stopped while loading".to_string())?;
    }
    if config.get_bool(abacus_engine::param!("appendonly")) {
        // Keep appending to the last segment (its torn tail, if any, was cut off), or start
        // the first one.
        let segment = match manifest.logs.last() {
            Some(last) => last.clone(),
            None => {
                let seq = manifest.files().map(|f| abacus_engine::aof::file_seq(f)).max().unwrap_or(0) + 1;
                let name = abacus_engine::aof::segment_name(seq);
                manifest.logs.push(name.clone());
                manifest.write(dir_path)?;
                name
            }
        };
        server.durability.start_log(dir_path, &segment, abacus_engine::aof::Fsync::from_name(&config.get(abacus_engine::param!("appendfsync"))), server.recorders.clone())?;
    }
    server.durability.init_snapshots(dir_path.to_path_buf(), manifest);
    crate::replication::configure(config);
    if let Some(p) = &recovered.position {
        crate::replication::restore(p, &server.durability);
    }
    server.recorders.loading.finish();
    Ok(())
}

fn set_keepalive(stream: &std::net::TcpStream, secs: u64) -> std::io::Result<()> {
    // Detects peers that vanished without closing (crashed hosts, dropped NAT state).
    let ka = socket2::TcpKeepalive::new().with_time(std::time::Duration::from_secs(secs));
    socket2::SockRef::from(stream).set_tcp_keepalive(&ka)
}

fn wait_for_signal() {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(_) => loop {
            std::thread::park();
        },
    };
    rt.block_on(async {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
    });
}

#[cfg(test)]
mod panic_tests {
    use super::*;

    #[test]
    fn only_worker_threads_abort_on_panic() {
        assert!(is_worker_thread(Some("abacus-worker-0")));
        assert!(is_worker_thread(Some(&format!("{WORKER_THREAD_PREFIX}17"))));
        assert!(!is_worker_thread(Some("abacus-accept")));
        assert!(!is_worker_thread(Some("main")));
        assert!(!is_worker_thread(None));
    }
}
