//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
//! [AUTH2 username password] [KEYS key [key ...]]: moves keys to another server (Abacus or
//! Redis) with Redis 7.0's semantics, replies and errors (`cluster.c`, migrateCommand).
//!
//! How: under the locks of the keys' shards (so no other client's write lands between the
//! dump and the delete, as Redis's single thread guarantees), each key is serialized with
//! this server's DUMP and its remaining TTL read with PTTL, both run as ordinary keyed calls.
//! The connection task then opens a connection to the target and sends, pipelined, AUTH (or
//! AUTH2's `AUTH user pass`), `SELECT db` and one `RESTORE key ttl payload [REPLACE]` per key,
//! and reads one reply each. Unless COPY, the keys the target acknowledged are deleted here
//! with a DEL, which fires the "del" events and is what the log and replicas get (Redis
//! propagates the same DEL).
//!
//! The shards stay locked while the target answers (bounded by the timeout), as Redis's whole
//! server stays blocked. As Redis, the connection to the target is kept for 10 s for the next
//! MIGRATE to it ([`Link`], one per worker thread and target), with the database it selected.
//!
//! Errors: a connect timeout is `IOERR error or timeout connecting to the client`, a refused
//! connection (Redis finds it when it writes), a write or read failure `IOERR error or timeout writing to / reading from target instance`
//! (Redis's texts), a target's error `ERR Target instance replied with error: ...`; a value
//! DUMP cannot serialize gets DUMP's error, and nothing is sent.

use std::time::Duration;

use abacus_protocol::{Arg, Args, Bytes, Frame};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::args::*;
use crate::migrate_links::{Link, LINK_IDLE};
use crate::command::flags::*;
use crate::command::Spec;
use crate::conn::Conn;
use abacus_engine::exec::{shutting_down, Access, Call, Locks};
use abacus_engine::shard::shard_of;

const G: &str = "generic";

pub const COMMANDS: &[Spec] = &[Spec::conn(
    "migrate",
    -6,
    WRITE | ACL_DANGEROUS,
    (3, 3, 1),
    conn_fn!(|conn, access, call| migrate(conn, access, &call.args).await),
    G,
    "Atomically transfers a key from one Redis instance to another.",
)
.with_key_range(key_range)
    .docs("2.6.0", "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.")
    .history(&[
        ("3.0.0", "Added the `COPY` and `REPLACE` options."),
        ("3.0.6", "Added the `KEYS` option."),
        ("4.0.7", "Added the `AUTH` option."),
        ("6.0.0", "Added the `AUTH2` option."),
    ])
    .tips("nondeterministic_output")
    .key_specs("RW access delete index=3 range=0,1,0; RW access delete incomplete kw=KEYS,-2 range=-1,1,0")
    .args("
        host type=string
        port type=integer
        key_or_empty_string type=oneof
          key type=key key_spec_index=0
          empty_string type=pure-token token=
        destination-db type=integer
        timeout type=integer
        copy type=pure-token token=COPY since=3.0.0 flags=optional
        replace type=pure-token token=REPLACE since=3.0.0 flags=optional
        authentication type=oneof flags=optional
          password type=string token=AUTH since=4.0.7 flags=optional
          username_password type=block token=AUTH2 since=6.0.0 flags=optional
            username type=string
            password type=string
        key type=key key_spec_index=1 token=KEYS since=3.0.6 flags=optional,multiple
    ")];

/// The keys: `args[3]`, or after KEYS when `args[3]` is empty (Redis's migrateGetKeys).
fn key_range(a: &[Arg]) -> Option<(usize, usize)> {
    if a.len() < 6 {
        return None;
    }
    if a[3].is_empty() {
        let k = (6..a.len()).find(|&j| is(&a[j], "keys"))?;
        return Some((k + 1, a.len()));
    }
    Some((3, 4))
}

struct Options {
    copy: bool,
    replace: bool,
    /// AUTH's arguments: [password] or [username, password].
    auth: Vec<Bytes>,
    keys: Vec<Bytes>,
}

fn parse(a: &[Arg]) -> Result<Options, Frame> {
    let mut o = Options { copy: false, replace: false, auth: Vec::new(), keys: Vec::new() };
    let mut j = 6;
    let mut keys_at = None;
    while j < a.len() {
        let more = a.len() - j - 1;
        if is(&a[j], "copy") {
            o.copy = true;
        } else if is(&a[j], "replace") {
            o.replace = true;
        } else if is(&a[j], "auth") && more >= 1 {
            o.auth = vec![Bytes::copy_from_slice(&a[j + 1])];
            j += 1;
        } else if is(&a[j], "auth2") && more >= 2 {
            o.auth = vec![Bytes::copy_from_slice(&a[j + 1]), Bytes::copy_from_slice(&a[j + 2])];
            j += 2;
        } else if is(&a[j], "keys") {
            if !a[3].is_empty() {
                return Err(err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"));
            }
            keys_at = Some(j + 1);
            break;
        } else {
            return Err(err(ERR_SYNTAX));
        }
        j += 1;
    }
    o.keys = match keys_at {
        Some(k) => a[k..].iter().map(|k| Bytes::copy_from_slice(k)).collect(),
        None => vec![Bytes::copy_from_slice(&a[3])],
    };
    Ok(o)
}

use crate::replication::push_resp as resp;

/// Runs `spec` as a keyed call under `locks`, with `rest` after its name.
async fn call(conn: &mut Conn, locks: &Locks, spec: &'static Spec, rest: impl IntoIterator<Item = Bytes>) -> Frame {
    let args: Vec<Bytes> = std::iter::once(Bytes::from_static(spec.name.as_bytes())).chain(rest).collect();
    let db = conn.client.db;
    conn.worker.run_keyed(Access::Locked(locks), db, Call { spec, args: Args::from_vec(args), client: conn.client.meta.id, no_touch: conn.client.meta.no_touch() }).await
}

/// Keeps `link` for the next MIGRATE to `target`, and closes it once idle for
/// [`LINK_IDLE`] (a timer task on this thread).
fn keep_link(conn: &Conn, target: (String, u16, bool), mut link: Link) {
    link.used = std::time::Instant::now();
    conn.worker.migrate_links.borrow_mut().insert(target.clone(), link);
    let worker = conn.worker.clone();
    tokio::task::spawn_local(async move {
        tokio::time::sleep(LINK_IDLE).await;
        let mut links = worker.migrate_links.borrow_mut();
        if links.get(&target).is_some_and(|l| l.used.elapsed() >= LINK_IDLE) {
            links.remove(&target);
        }
    });
}

/// Sends `request` and reads `expect` reply lines (the target answers AUTH, SELECT and
/// RESTORE with +OK or -error). Err: the reply to give, and whether any line came back.
async fn exchange(link: &mut Link, request: &[u8], expect: usize, timeout: Duration) -> Result<Vec<String>, (Frame, bool)> {
    let write = async {
        link.wr.write_all(request).await?;
        link.wr.flush().await
    };
    match tokio::time::timeout(timeout, write).await {
        Ok(Ok(())) => {}
        _ => return Err((err("IOERR error or timeout writing to target instance"), false)),
    }
    let mut lines = Vec::with_capacity(expect);
    for _ in 0..expect {
        let mut line = String::new();
        match tokio::time::timeout(timeout, link.rd.read_line(&mut line)).await {
            Ok(Ok(got)) if got > 0 => lines.push(line),
            // Keys already acknowledged stay here too: Redis deletes nothing on an I/O error.
            _ => return Err((err("IOERR error or timeout reading to target instance"), !lines.is_empty())),
        }
    }
    Ok(lines)
}

pub async fn migrate(conn: &mut Conn, access: Access<'_>, a: &[Arg]) -> Frame {
    let o = match parse(a) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let Ok(port) = parse_i64(&a[2]) else { return err(ERR_NOT_INTEGER) };
    let Ok(db) = parse_i64(&a[4]) else { return err(ERR_NOT_INTEGER) };
    let Ok(timeout) = parse_i64(&a[5]) else { return err(ERR_NOT_INTEGER) };
    // Redis: a timeout of 0 or less means one second.
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let host = String::from_utf8_lossy(&a[1]).into_owned();

    let n = conn.worker.shards();
    let own: Locks;
    let locks: &Locks = match access {
        Access::Locked(l) => l,
        Access::Free => match conn.worker.lock(o.keys.iter().map(|k| shard_of(k, n))).await {
            Some(l) => {
                own = l;
                &own
            }
            None => return shutting_down(),
        },
    };

    // Serialize what exists; a missing key is skipped (Redis: NOKEY when none is left). One
    // job per shard runs DUMP and PTTL for all of that shard's keys (a job per call cost a
    // round trip to the locked shard's thread per key and per call).
    let here = conn.client.db;
    let cfg = conn.worker.engine.config.cmd_config();
    let (client, no_touch) = (conn.client.meta.id, conn.client.meta.no_touch());
    let mut by_shard: std::collections::BTreeMap<usize, Vec<(usize, Bytes)>> = Default::default();
    for (i, k) in o.keys.iter().enumerate() {
        by_shard.entry(shard_of(k, n)).or_default().push((i, k.clone()));
    }
    let mut dumped: Vec<(usize, Bytes, Frame, Frame)> = Vec::with_capacity(o.keys.len());
    for (shard, keys) in by_shard {
        let run = move |s: &mut abacus_engine::shard::Shard| {
            let now = abacus_engine::shard::now_ms();
            let one = |s: &mut abacus_engine::shard::Shard, spec: &'static Spec, k: &Bytes| {
                let args = Args::from_vec(vec![Bytes::from_static(spec.name.as_bytes()), k.clone()]);
                abacus_engine::exec::run_on_shard(s, here, &Call { spec, args, client, no_touch }, now, cfg, n)
            };
            keys.into_iter()
                .map(|(i, k)| {
                    let payload = one(s, &abacus_commands::dump::DUMP, &k);
                    let ttl = one(s, &abacus_commands::expiry::PTTL, &k);
                    (i, k, payload, ttl)
                })
                .collect::<Vec<_>>()
        };
        match conn.worker.run(Access::Locked(locks), shard, run).await {
            Some(d) => dumped.extend(d),
            None => return shutting_down(),
        }
    }
    dumped.sort_by_key(|d| d.0);
    let mut found: Vec<(Bytes, i64, Bytes)> = Vec::new();
    for (_, k, payload, ttl) in dumped {
        let payload = match payload {
            Frame::Bulk(p) => p,
            Frame::Null => continue,
            e @ Frame::Error(_) => return e,
            _ => continue,
        };
        let ttl = match ttl {
            Frame::Integer(t) if t > 0 => t,
            _ => 0,
        };
        found.push((k, ttl, payload));
    }
    if found.is_empty() {
        return Frame::simple("NOKEY");
    }

    let restore: &[u8] = if conn.worker.server.cluster.is_some() { b"RESTORE-ASKING" } else { b"RESTORE" };
    let request = |select: bool| {
        let mut out = Vec::new();
        if !o.auth.is_empty() {
            let auth: Vec<&[u8]> = std::iter::once(&b"AUTH"[..]).chain(o.auth.iter().map(|b| &b[..])).collect();
            resp(&mut out, &auth);
        }
        if select {
            resp(&mut out, &[b"SELECT", db.to_string().as_bytes()]);
        }
        for (k, ttl, payload) in &found {
            let ttl_s = ttl.to_string();
            // A cluster node's target is importing the slot: RESTORE-ASKING, as Redis sends.
            let mut cmd: Vec<&[u8]> = vec![restore, k, ttl_s.as_bytes(), payload];
            if o.replace {
                cmd.push(b"REPLACE");
            }
            resp(&mut out, &cmd);
        }
        out
    };

    // As Redis: with `tls-cluster yes` the target is reached over TLS (`tls.rs`).
    let use_tls = conn.worker.server.config.get_bool(abacus_engine::param!("tls-cluster"));
    let target = (host.clone(), port.clamp(0, 65535) as u16, use_tls);
    // A link kept from an earlier MIGRATE to the same target is tried first; if it fails
    // before any reply (the target closed it meanwhile), once more on a new one, as Redis
    // retries a cached socket.
    let mut cached = conn.worker.migrate_links.borrow_mut().remove(&target).filter(|l| l.used.elapsed() < LINK_IDLE);
    let (mut link, lines) = loop {
        let reused = cached.is_some();
        let mut link = match cached.take() {
            Some(l) => l,
            None => match crate::tls::connect(&conn.worker.server.tls, &target.0, target.1, use_tls, timeout).await {
                Ok(s) => {
                    let _ = s.tcp().set_nodelay(true);
                    let (rd, wr) = tokio::io::split(s);
                    Link { rd: BufReader::new(rd), wr, db: None, used: std::time::Instant::now() }
                }
                Err(e) if e.contains("timed out") => return err("IOERR error or timeout connecting to the client"),
                // Redis connects without blocking and learns of a refusal when it writes.
                Err(_) => return err("IOERR error or timeout writing to target instance"),
            },
        };
        let select = link.db != Some(db);
        let expect = usize::from(!o.auth.is_empty()) + usize::from(select) + found.len();
        match exchange(&mut link, &request(select), expect, timeout).await {
            Ok(lines) => {
                if select {
                    link.db = Some(db);
                }
                break (link, lines);
            }
            Err((e, replied)) if !reused || replied => return e,
            Err(_) => continue,
        }
    };
    let target_error = |line: &str| err(&format!("ERR Target instance replied with error: {}", line.trim_end()[1..].trim_start()));
    let head = lines.len() - found.len();
    if let Some(e) = lines[..head].iter().find(|l| l.starts_with('-')) {
        // A refused AUTH or SELECT: the link's database is unknown.
        link.db = None;
        keep_link(conn, target, link);
        return target_error(e);
    }
    let mut first_error = None;
    let mut moved = Vec::new();
    for ((k, _, _), line) in found.iter().zip(&lines[head..]) {
        if line.starts_with('-') {
            first_error.get_or_insert_with(|| target_error(line));
        } else {
            moved.push(k.clone());
        }
    }
    keep_link(conn, target, link);
    if !o.copy && !moved.is_empty() {
        // One DEL per shard, so each runs on its shard under the locks held.
        let mut by_shard: std::collections::BTreeMap<usize, Vec<Bytes>> = Default::default();
        for k in moved {
            by_shard.entry(shard_of(&k, n)).or_default().push(k);
        }
        for (_, keys) in by_shard {
            call(conn, locks, &abacus_commands::keys::DEL, keys).await;
        }
    }
    first_error.unwrap_or_else(Frame::ok)
}
