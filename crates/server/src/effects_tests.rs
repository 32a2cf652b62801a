//! The replay property of effects: random write sequences (every write command of the table,
//! with random options and relative and absolute expiry times, on a few keys of every type)
//! run on one keyspace while their stated effects are collected; replaying only those effects,
//! each at the time its command ran, on an empty keyspace gives the same keyspace. This is what
//! the log (and replicas) rely on: a handler that forgets to state a non-deterministic part of
//! its write (a relative time, a random draw) makes the two differ.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use abacus_keyspace::Db;
use abacus_protocol::{Args, Bytes};

use crate::command::{self, Spec};
use abacus_engine::config::{CmdConfig, Config};
use abacus_engine::exec::run_handler;
use abacus_engine::shard::Effect;

const DATABASES: usize = 2;
const KEYS: &[&[u8]] = &[b"s", b"n", b"h", b"z", b"i", b"p", b"l", b"{t}a", b"{t}b", b"gone"];

/// Every key alive at `now`, in every database, with its expiry and value as the snapshot
/// format writes them, less two representation bytes that no reply shows as a value: "stored
/// as text" (OBJECT ENCODING's embstr for INCRBYFLOAT's result: the effect is SET, as in
/// Redis) and "a decoded sketch" (the same bytes as the string).
fn dump(dbs: &mut [Db], now: u64) -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::new();
    for (d, db) in dbs.iter_mut().enumerate() {
        let mut keys = db.keys_matching(b"*", now);
        keys.sort();
        for k in keys {
            let at = db.expire_at(&k);
            if let Some(e) = db.peek(&k, now) {
                let mut bytes = Vec::new();
                abacus_persist::entry::encode(&mut bytes, d as u16, &k, e, at);
                let flag = 2 + 4 + k.len() + 8;
                bytes[flag] = 0;
                // A sketch is a string whose bytes are the sketch's (GET, TYPE): kept decoded
                // or as text depending on which command touched it last, a read included.
                if bytes[flag + 1] == 1 {
                    bytes[flag + 1] = 0;
                }
                out.push((d, bytes));
            }
        }
    }
    out
}

fn args_of(parts: &[Vec<u8>]) -> Args {
    Args::from_vec(parts.iter().map(|p| Bytes::copy_from_slice(p)).collect())
}

fn pick<'a, T>(r: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[r.gen_range(0..xs.len())]
}

/// A time argument: relative seconds or milliseconds, or absolute ones around `now`
/// (past ones included: they delete).
fn time_arg(r: &mut StdRng, now: u64) -> (&'static str, Vec<u8>) {
    match r.gen_range(0..4) {
        0 => ("EX", r.gen_range(1..20i64).to_string().into_bytes()),
        1 => ("PX", r.gen_range(1..20_000i64).to_string().into_bytes()),
        2 => ("EXAT", ((now / 1000) as i64 + r.gen_range(-5..20i64)).to_string().into_bytes()),
        _ => ("PXAT", (now as i64 + r.gen_range(-5_000..20_000i64)).to_string().into_bytes()),
    }
}

/// One random write, mostly well-formed (a few malformed ones check that failures propagate
/// nothing).
fn gen_command(r: &mut StdRng, writes: &[&'static Spec], now: u64) -> Vec<Vec<u8>> {
    let key = |r: &mut StdRng| pick(r, KEYS).to_vec();
    let val = |r: &mut StdRng| -> Vec<u8> {
        match r.gen_range(0..4) {
            0 => r.gen_range(-5..50i64).to_string().into_bytes(),
            1 => format!("{:.3}", r.gen_range(-5.0..5.0f64)).into_bytes(),
            2 => b"x".repeat(r.gen_range(0..40)),
            _ => vec![b'a' + r.gen_range(0..3u8)],
        }
    };
    let v = |s: &str| s.as_bytes().to_vec();
    match r.gen_range(0..25) {
        0 => {
            let mut c = vec![v("SET"), key(r), val(r)];
            for _ in 0..r.gen_range(0..3) {
                match r.gen_range(0..5) {
                    0 => c.push(v("NX")),
                    1 => c.push(v("XX")),
                    2 => c.push(v("GET")),
                    3 => c.push(v("KEEPTTL")),
                    _ => {
                        let (k, t) = time_arg(r, now);
                        c.push(v(k));
                        c.push(t);
                    }
                }
            }
            c
        }
        1 => vec![v(*pick(r, &["SETEX", "PSETEX"])), key(r), r.gen_range(1..20_000i64).to_string().into_bytes(), val(r)],
        2 => {
            let mut c = vec![v("GETEX"), key(r)];
            if r.gen_bool(0.3) {
                c.push(v("PERSIST"));
            } else if r.gen_bool(0.8) {
                let (k, t) = time_arg(r, now);
                c.push(v(k));
                c.push(t);
            }
            c
        }
        3 => {
            let name = pick(r, &["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]);
            let t = match *name {
                "EXPIRE" => r.gen_range(-2..20i64),
                "PEXPIRE" => r.gen_range(-2000..20_000i64),
                "EXPIREAT" => (now / 1000) as i64 + r.gen_range(-5..20i64),
                _ => now as i64 + r.gen_range(-5_000..20_000i64),
            };
            let mut c = vec![v(*name), key(r), t.to_string().into_bytes()];
            if r.gen_bool(0.4) {
                c.push(v(*pick(r, &["NX", "XX", "GT", "LT"])));
            }
            c
        }
        4 => {
            let mut c = vec![v("SPOP"), key(r)];
            if r.gen_bool(0.5) {
                c.push(r.gen_range(0..5).to_string().into_bytes());
            }
            c
        }
        5 => vec![v("SADD"), key(r), val(r), val(r), r.gen_range(0..1000).to_string().into_bytes()],
        6 => vec![v("INCRBYFLOAT"), key(r), format!("{:.4}", r.gen_range(-3.0..3.0f64)).into_bytes()],
        7 => vec![v("HINCRBYFLOAT"), key(r), val(r), format!("{:.4}", r.gen_range(-3.0..3.0f64)).into_bytes()],
        8 => vec![v("HSET"), key(r), val(r), val(r)],
        9 => vec![v("PFADD"), key(r), val(r), val(r)],
        10 => vec![v("HLL.ADD"), key(r), val(r)],
        11 => vec![v("PERSIST"), key(r)],
        16 => {
            let mut c = vec![v(*pick(r, &["RPUSH", "LPUSH", "RPUSHX"])), key(r)];
            c.extend((0..r.gen_range(1..8)).map(|_| val(r)));
            c
        }
        17 => match r.gen_range(0..6) {
            // LMPOP is propagated as the LPOP/RPOP with the count it took.
            0 => vec![v("LMPOP"), v("2"), key(r), key(r), v(*pick(r, &["LEFT", "RIGHT"])), v("COUNT"), r.gen_range(1..3i64).to_string().into_bytes()],
            1 => vec![v("LMOVE"), key(r), key(r), v(*pick(r, &["LEFT", "RIGHT"])), v(*pick(r, &["LEFT", "RIGHT"]))],
            2 => vec![v(*pick(r, &["LPOP", "RPOP"])), key(r), r.gen_range(0..3i64).to_string().into_bytes()],
            3 => vec![v("LREM"), key(r), r.gen_range(-2..3i64).to_string().into_bytes(), val(r)],
            4 => vec![v("LTRIM"), key(r), r.gen_range(-3..3i64).to_string().into_bytes(), r.gen_range(-3..3i64).to_string().into_bytes()],
            _ => vec![v("LINSERT"), key(r), v(*pick(r, &["BEFORE", "AFTER"])), val(r), val(r)],
        },
        12 => vec![v(*pick(r, &["SELECT-NOT-A-COMMAND", "INCR", "APPEND", "DEL", "RENAME", "COPY", "SMOVE", "SINTERSTORE", "GETDEL"])), key(r), key(r), val(r)],
        18 => {
            // ZADD with options and float scores (INCR sums must replay to the same bits).
            let mut c = vec![v("ZADD"), key(r)];
            for o in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
                if r.gen_bool(0.12) {
                    c.push(v(o));
                }
            }
            for _ in 0..r.gen_range(1..4) {
                c.push(format!("{:.3}", r.gen_range(-5.0..5.0f64)).into_bytes());
                c.push(val(r));
            }
            c
        }
        19 => vec![v("ZINCRBY"), key(r), format!("{:.4}", r.gen_range(-3.0..3.0f64)).into_bytes(), val(r)],
        20 => match r.gen_range(0..6) {
            0 => vec![v(*pick(r, &["ZPOPMIN", "ZPOPMAX"])), key(r), r.gen_range(0..4).to_string().into_bytes()],
            1 => vec![v("ZMPOP"), v("2"), key(r), key(r), v(*pick(r, &["MIN", "MAX"])), v("COUNT"), r.gen_range(1..4).to_string().into_bytes()],
            2 => vec![v(*pick(r, &["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])), key(r), v("2"), key(r), key(r)],
            3 => vec![v("ZRANGESTORE"), key(r), key(r), v("0"), r.gen_range(-2..5).to_string().into_bytes()],
            4 => vec![v(*pick(r, &["ZREMRANGEBYRANK", "ZREMRANGEBYSCORE"])), key(r), v("0"), v("1")],
            _ => vec![v("ZREM"), key(r), val(r), val(r)],
        },
        21 => {
            // GEO: GEOADD (propagated as ZADD) and the stores (propagated as sent).
            let coord = |r: &mut StdRng| format!("{:.5}", r.gen_range(-1.0..1.0f64)).into_bytes();
            match r.gen_range(0..4) {
                0 | 1 => {
                    let mut c = vec![v("GEOADD"), key(r)];
                    for o in ["NX", "XX", "CH"] {
                        if r.gen_bool(0.1) {
                            c.push(v(o));
                        }
                    }
                    for _ in 0..r.gen_range(1..4) {
                        c.push(coord(r));
                        c.push(coord(r));
                        c.push(val(r));
                    }
                    c
                }
                2 => {
                    let (lon, lat) = (coord(r), coord(r));
                    vec![v("GEORADIUS"), key(r), lon, lat, v("100"), v("km"), v(*pick(r, &["STORE", "STOREDIST"])), key(r), v("COUNT"), v("3")]
                }
                _ => vec![v("GEOSEARCHSTORE"), key(r), key(r), v("FROMMEMBER"), val(r), v("BYBOX"), v("200"), v("100"), v("km"), v("STOREDIST")],
            }
        }
        22 => {
            // RESTORE of a string, with a relative or absolute TTL (propagated as ABSTTL).
            let payload = abacus_rdb::dump(&abacus_rdb::RdbValue::String(val(r)), &abacus_rdb::Limits::default());
            let mut c = vec![v("RESTORE"), key(r)];
            match r.gen_range(0..3) {
                0 => c.extend([v("0"), payload]),
                1 => c.extend([r.gen_range(1..20_000i64).to_string().into_bytes(), payload]),
                _ => c.extend([(now as i64 + r.gen_range(-5_000..20_000i64)).to_string().into_bytes(), payload, v("ABSTTL")]),
            }
            if r.gen_bool(0.6) {
                c.push(v("REPLACE"));
            }
            c
        }
        23 | 24 => {
            // Streams: automatic IDs (the clock), approximate trims (the node layout), and
            // consumer groups (delivery and seen times).
            let id = |r: &mut StdRng| match r.gen_range(0..4) {
                0 => v("*"),
                1 => format!("{}-*", now - r.gen_range(0..3000)).into_bytes(),
                2 => format!("{}-{}", now - r.gen_range(0..3000), r.gen_range(0..3)).into_bytes(),
                _ => r.gen_range(0..3).to_string().into_bytes(),
            };
            let g = |r: &mut StdRng| v(*pick(r, &["g1", "g2"]));
            let c = |r: &mut StdRng| v(*pick(r, &["alice", "bob"]));
            match r.gen_range(0..12) {
                0..=3 => {
                    let mut x = vec![v("XADD"), key(r)];
                    if r.gen_bool(0.4) {
                        x.push(v(*pick(r, &["MAXLEN", "MINID"])));
                        x.push(v(*pick(r, &["~", "=", "~"])));
                        x.push(if r.gen_bool(0.5) { r.gen_range(0..150).to_string().into_bytes() } else { format!("{}", now - r.gen_range(0..3000)).into_bytes() });
                        if r.gen_bool(0.3) {
                            x.push(v("LIMIT"));
                            x.push(r.gen_range(0..200).to_string().into_bytes());
                        }
                    }
                    x.push(id(r));
                    for _ in 0..r.gen_range(1..4) {
                        x.push(v(*pick(r, &["f", "g", "h"])));
                        x.push(val(r));
                    }
                    x
                }
                4 => vec![v("XTRIM"), key(r), v(*pick(r, &["MAXLEN", "MINID"])), v(*pick(r, &["~", "="])), r.gen_range(0..150).to_string().into_bytes()],
                5 => vec![v("XDEL"), key(r), id(r)],
                6 => vec![v("XGROUP"), v("CREATE"), key(r), g(r), v(*pick(r, &["$", "0"])), v("MKSTREAM")],
                7 => vec![v("XGROUP"), v(*pick(r, &["CREATECONSUMER", "DELCONSUMER"])), key(r), g(r), c(r)],
                8 => vec![v("XREADGROUP"), v("GROUP"), g(r), c(r), v("COUNT"), r.gen_range(1..4).to_string().into_bytes(), v("STREAMS"), key(r), v(*pick(r, &[">", ">", "0"]))],
                9 => vec![v("XCLAIM"), key(r), g(r), c(r), r.gen_range(0..3000).to_string().into_bytes(), id(r), v(*pick(r, &["IDLE", "TIME", "RETRYCOUNT"])), r.gen_range(0..5000).to_string().into_bytes(), v("FORCE")],
                10 => vec![v("XAUTOCLAIM"), key(r), g(r), c(r), r.gen_range(0..3000).to_string().into_bytes(), v("0"), v("COUNT"), v("2")],
                _ => vec![v("XACK"), key(r), g(r), id(r)],
            }
        }
        _ => {
            // Any write of the table, with arguments drawn from the keys and values.
            let spec = pick(r, writes);
            let mut c = vec![spec.name.as_bytes().to_vec()];
            for _ in 0..r.gen_range(1..5) {
                c.push(if r.gen_bool(0.5) { key(r) } else { val(r) });
            }
            c
        }
    }
}

fn replay_property(seed: u64, commands: usize) {
    let mut r = StdRng::seed_from_u64(seed);
    let cfg: CmdConfig = Config::default().cmd_config();
    let writes: Vec<&'static Spec> = command::all()
        .flat_map(|s| std::iter::once(s).chain(s.subcommands.iter()))
        .filter(|s| s.is_write() && matches!(s.handler, command::Handler::Keyed(_)))
        .collect();
    let mut live: Vec<Db> = (0..DATABASES).map(|_| Db::new()).collect();
    let mut effects: Vec<(u64, usize, Vec<Bytes>)> = Vec::new();
    let mut now: u64 = 1_800_000_000_000;
    for i in 0..commands {
        now += r.gen_range(0..1500);
        let db = r.gen_range(0..DATABASES);
        let parts = gen_command(&mut r, &writes, now);
        let args = args_of(&parts);
        let Some(spec) = crate::command::lookup(&args[0]) else { continue };
        let spec = match spec.subcommands.is_empty() {
            true => spec,
            false => continue,
        };
        if !spec.arity_ok(args.len()) || !matches!(spec.handler, command::Handler::Keyed(_)) {
            continue;
        }
        let (_, _, effect) = run_handler(&mut live, db, spec, &args, now, cfg);

        match effect {
            Some(Effect::Args) => effects.push((now, db, args.to_vec())),
            Some(Effect::As(command)) => effects.push((now, db, command)),
            Some(Effect::Nothing) | None => {}
        }
        let _ = i;
    }
    let mut replayed: Vec<Db> = (0..DATABASES).map(|_| Db::new()).collect();
    for (at, db, command) in &effects {
        let args = Args::from_vec(command.clone());
        let spec = crate::command::lookup_call(&args).expect("an effect is a known command");
        let (reply, _, _) = run_handler(&mut replayed, *db, spec, &args, *at, cfg);
        assert!(!reply.is_error(), "seed {seed}: replaying {command:?} at {at} failed: {reply:?}");
    }
    let (a, b) = (dump(&mut live, now), dump(&mut replayed, now));
    if a != b {
        let only_live: Vec<_> = a.iter().filter(|x| !b.contains(x)).collect();
        let only_replayed: Vec<_> = b.iter().filter(|x| !a.contains(x)).collect();
        panic!("seed {seed}: the replayed keyspace differs\nlive only: {only_live:?}\nreplayed only: {only_replayed:?}");
    }
}

#[test]
fn replaying_the_stated_effects_gives_the_same_keyspace() {
    for seed in 0..24 {
        replay_property(seed, 1500);
    }
}
