//! The HLL family: HyperLogLog sketches byte-compatible with postgresql-hll and java-hll
//! (HLL.CREATE, HLL.ADD, HLL.ADDINT, HLL.ADDRAW, HLL.CARD, HLL.UNION, HLL.INFO, HLL.HASH,
//! HLL.HASHINT). The sketches themselves are the `abacus-hll` crate; Redis's PF* commands are
//! `pf.rs`.
//!
//! A sketch is a string whose bytes are the HLL storage specification v1.0.0, so GET returns
//! what PostgreSQL reads and SET accepts what it wrote. Re-parsing those bytes per command would
//! make an add cost a decode of the whole sketch, so the first HLL command on a string decodes
//! it and stores the decoded form back (`Value::Hll`); from then on an add is a hash and a
//! register compare. A plain string command turns it back into bytes (see the keyspace crate's
//! `value.rs`).
//!
//! Bounds: decoding is strict (`Hll::from_bytes`: corrupt, truncated or inconsistent bytes are
//! an `ERR invalid hll value: ...` naming the problem). Parameters that come from clients,
//! whether as options or inside stored bytes, must also fit the server's limits: log2m up to
//! `hll-max-log2m` (default 17, postgresql-hll's largest) because the decoded form keeps one
//! byte per register and a 3-byte header could otherwise ask for 2 GiB, and expthresh up to
//! 2^18 (`HLL_MAX_EXPTHRESH`).
//!
//! Choices the issue leaves open:
//! - HLL.ADD / ADDINT / ADDRAW accept zero elements, like PFADD: a missing key is created
//!   (reply 1), an existing one is left alone (reply 0).
//! - Arguments are validated before anything changes: one bad integer in HLL.ADDINT adds
//!   nothing. An error (parameter mismatch, corrupt value) in HLL.UNION changes nothing.
//! - HLL.CARD and HLL.UNION treat missing keys as empty sketches; HLL.UNION with no existing
//!   key at all creates an EMPTY sketch with the default parameters, like PFMERGE.
//! - HLL.CARD of an UNDEFINED sketch is null (postgresql-hll's NULL); of no sketch at all, 0.
//! - HLL.INFO of a missing key is null.

use abacus_hll::{hash_bigint, hash_bytes, Hll, Params};
use abacus_keyspace::{Value, ValueRef};
use abacus_protocol::{Arg, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::config::{HllConfig, HLL_MAX_EXPTHRESH};
use crate::ctx::{Ctx, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const NONE: (i32, i32, i32) = (0, 0, 0);
const G: &str = "hyperloglog";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("hll.create", -2, WRITE | DENYOOM, K1, create, G, "Creates an empty postgresql-hll sketch: HLL.CREATE key [LOG2M n] [REGWIDTH n] [EXPTHRESH n] [SPARSEON 0|1].")
        .abacus_docs("O(1)")
        .key_specs("RW insert"),
    Spec::keyed("hll.add", -2, WRITE | DENYOOM | FAST | PREFETCH_VALUE, K1, add, G, "Adds elements hashed as hll_hash_bytea(element, 0) to a sketch, created with the defaults if missing.")
        .abacus_docs("O(1) for each element added."),
    Spec::keyed("hll.addint", -2, WRITE | DENYOOM | FAST | PREFETCH_VALUE, K1, addint, G, "Adds 64-bit integers hashed as hll_hash_bigint(integer, 0) to a sketch, created with the defaults if missing.")
        .abacus_docs("O(1) for each integer added."),
    Spec::keyed("hll.addraw", -2, WRITE | DENYOOM | FAST | PREFETCH_VALUE, K1, addraw, G, "Adds already-hashed signed 64-bit values to a sketch, created with the defaults if missing.")
        .abacus_docs("O(1) for each value added."),
    Spec::keyed("hll.card", -2, READONLY, ALL, card, G, "Returns the estimated cardinality of the union of the sketches, unrounded (postgresql-hll's hll_cardinality).")
        .abacus_docs("O(R) per sketch, where R is its number of registers (or explicit values)."),
    Spec::keyed("hll.union", -3, WRITE | DENYOOM, ALL, union, G, "Merges the source sketches into the destination sketch.")
        .abacus_docs("O(N*R) where N is the number of sketches and R their number of registers.")
        .key_specs("RW access update; RO access"),
    Spec::keyed("hll.info", 2, READONLY, K1, info, G, "Returns a sketch's representation, parameters, explicit values or non-zero registers, and size.")
        .abacus_docs("O(R) where R is the sketch's number of registers (or explicit values)."),
    Spec::keyed("hll.hash", -2, FAST, NONE, hash, G, "Returns hll_hash_bytea(bytes, seed) as a signed 64-bit integer: HLL.HASH bytes [SEED n].")
        .abacus_docs("O(N) where N is the length of the bytes."),
    Spec::keyed("hll.hashint", -2, FAST, NONE, hashint, G, "Returns hll_hash_bigint(integer, seed) as a signed 64-bit integer: HLL.HASHINT integer [SEED n].")
        .abacus_docs("O(1)"),
];

const ERR_KEY_EXISTS: &str = "ERR key already exists";

/// Checks parameters against the server's limits (see the file comment).
fn check_limits(p: Params, cfg: &HllConfig) -> Result<Params, Frame> {
    if p.log2m() > cfg.max_log2m {
        return Err(Frame::error(format!("ERR log2m {} exceeds the server limit hll-max-log2m {}", p.log2m(), cfg.max_log2m)));
    }
    if p.expthresh() > HLL_MAX_EXPTHRESH {
        return Err(Frame::error(format!("ERR expthresh {} exceeds the server limit {HLL_MAX_EXPTHRESH}", p.expthresh())));
    }
    Ok(p)
}

fn params(log2m: i64, regwidth: i64, expthresh: i64, sparseon: bool, cfg: &HllConfig) -> Result<Params, Frame> {
    let p = Params::new(log2m, regwidth, expthresh, sparseon).map_err(|e| Frame::error(format!("ERR {e}")))?;
    check_limits(p, cfg)
}

/// The parameters of sketches created without options (the hll-* configuration).
pub fn default_params(cfg: &HllConfig) -> Result<Params, Frame> {
    params(cfg.log2m, cfg.regwidth, cfg.expthresh, cfg.sparseon, cfg)
}

/// A string that is not a sketch at all (plain text, a number...).
pub const ERR_NOT_A_SKETCH: &str =
    "WRONGTYPE Key is not a valid HLL sketch: it holds a string that is not in the postgresql-hll storage format";
/// A Redis HyperLogLog (PFADD's format) given to an HLL.* command.
pub const ERR_REDIS_HLL: &str = "WRONGTYPE Key is not a valid HLL sketch: it holds a Redis HyperLogLog (use the PF* commands)";

/// Decodes stored bytes (from SET, or written by PostgreSQL / java-hll) within the limits.
pub fn decode(bytes: &[u8], cfg: &HllConfig) -> Result<Hll, Frame> {
    if bytes.starts_with(b"HYLL") {
        return Err(err(ERR_REDIS_HLL));
    }
    // A string that does not even start like a sketch (schema version 1, a known type) is
    // not a damaged sketch but something else: say that, as PF* commands do for theirs.
    // A sketch header with a bad body is reported as damage, naming the problem.
    match bytes.first() {
        Some(&b0) if b0 >> 4 == 1 && b0 & 0x0f <= 4 => {}
        _ => return Err(err(ERR_NOT_A_SKETCH)),
    }
    // Header byte 0 is version << 4 | type, byte 1 (regwidth - 1) << 5 | log2m. Check log2m
    // before decoding: an EMPTY or SPARSE header alone may name 2^31 registers.
    if let [b0, b1, _, ..] = bytes {
        let log2m = u32::from(b1 & 0x1f);
        if b0 >> 4 == 1 && log2m > cfg.max_log2m {
            return Err(Frame::error(format!("ERR invalid hll value: log2m {log2m} exceeds the server limit hll-max-log2m {}", cfg.max_log2m)));
        }
    }
    let h = Hll::from_bytes(bytes).map_err(|e| Frame::error(format!("ERR {e}")))?;
    check_limits(h.params(), cfg)?;
    Ok(h)
}

/// The sketch at `key`, decoding a string value once and keeping the decoded form. Ok(None) if
/// the key is missing. `read` counts the lookup in keyspace hits/misses, as reads do.
fn sketch<'a>(ctx: &'a mut Ctx, key: &[u8], read: bool) -> Result<Option<&'a mut Hll>, Frame> {
    let (now, cfg) = (ctx.now_ms, ctx.hll);
    let db = ctx.db();
    let found = if read { db.get_read_mut(key, now) } else { db.get_mut(key, now) };
    let Some(e) = found else { return Ok(None) };
    let decoded = match e.value() {
        ValueRef::Str(s) => Some(decode(s, &cfg)?),
        ValueRef::Hll(_) | ValueRef::Set(_) | ValueRef::Hash(_) | ValueRef::List(_) | ValueRef::ZSet(_) | ValueRef::Series(_) | ValueRef::Stream(_) => None,
    };
    if let Some(h) = decoded {
        e.set_value(Value::Hll(Box::new(h)));
    }
    match e.as_hll_mut() {
        Some(h) => Ok(Some(h)),
        None => Err(err(ERR_WRONGTYPE)),
    }
}

/// Stores `h` at `key`, keeping an existing key's TTL (the sketch is modified, not replaced).
fn store(ctx: &mut Ctx, key: &[u8], h: Hll) {
    let now = ctx.now_ms;
    match ctx.db().get_mut(key, now) {
        Some(e) => e.set_value(Value::Hll(Box::new(h))),
        None => ctx.db().set(key, Value::Hll(Box::new(h)), 0, now),
    }
}

/// A key for an error message: at most 64 bytes, escaped (no CR/LF in an error line).
fn shown(key: &[u8]) -> String {
    let mut s = key[..key.len().min(64)].escape_ascii().to_string();
    if key.len() > 64 {
        s.push_str("...");
    }
    s
}

/// The union of the sketches at `keys` (missing keys are empty), or None if none exists.
fn union_of(ctx: &mut Ctx, keys: &[Arg], read: bool) -> Result<Option<Hll>, Frame> {
    let mut acc: Option<Hll> = None;
    for key in keys {
        let Some(h) = sketch(ctx, key, read)? else { continue };
        match &mut acc {
            None => acc = Some(h.clone()),
            Some(u) => {
                u.union(h).map_err(|e| Frame::error(format!("ERR {e} (key '{}')", shown(key))))?;
            }
        }
    }
    Ok(acc)
}

fn create(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let cfg = ctx.hll;
    let (mut log2m, mut regwidth, mut expthresh, mut sparseon) = (cfg.log2m, cfg.regwidth, cfg.expthresh, cfg.sparseon);
    for opt in a[2..].chunks(2) {
        let [name, value] = opt else { return err(ERR_SYNTAX) };
        let v = match parse_i64(value) {
            Ok(v) => v,
            Err(e) => return e,
        };
        if is(name, "log2m") {
            log2m = v;
        } else if is(name, "regwidth") {
            regwidth = v;
        } else if is(name, "expthresh") {
            expthresh = v;
        } else if is(name, "sparseon") {
            if v != 0 && v != 1 {
                return Frame::error(format!("ERR invalid sparseon {v}: sparseon must be 0 or 1"));
            }
            sparseon = v == 1;
        } else {
            return err(ERR_SYNTAX);
        }
    }
    let p = match params(log2m, regwidth, expthresh, sparseon, &cfg) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let now = ctx.now_ms;
    if ctx.db().contains(&a[1], now) {
        return err(ERR_KEY_EXISTS);
    }
    ctx.db().set(&a[1], Value::Hll(Box::new(Hll::new(p))), 0, now);
    Frame::ok()
}

/// Adds hashed values to the sketch at `key`, creating it with the defaults if missing.
/// Reply 1 if the key was created or the sketch changed.
fn add_hashes(ctx: &mut Ctx, key: &[u8], hashes: impl Iterator<Item = i64>) -> Frame {
    match sketch(ctx, key, false) {
        Err(e) => return e,
        Ok(Some(h)) => {
            // As PFADD: a sketch that did not change is not signalled (WATCH).
            let changed = hashes.fold(false, |changed, x| h.add_raw(x) | changed);
            return if changed { Frame::Integer(1) } else { ctx.unchanged(Frame::Integer(0)) };
        }
        Ok(None) => {}
    }
    let mut h = match default_params(&ctx.hll) {
        Ok(p) => Hll::new(p),
        Err(e) => return e,
    };
    for x in hashes {
        h.add_raw(x);
    }
    let now = ctx.now_ms;
    ctx.db().set(key, Value::Hll(Box::new(h)), 0, now);
    Frame::Integer(1)
}

fn add(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    add_hashes(ctx, &a[1], a[2..].iter().map(|x| hash_bytes(x, 0)))
}

/// Parses every integer argument first, so that a bad one adds nothing.
fn add_integers(ctx: &mut Ctx, a: &[Arg], hash: fn(i64) -> i64) -> Frame {
    if let Some(Err(e)) = a[2..].iter().map(|x| parse_i64(x)).find(Result::is_err) {
        return e;
    }
    add_hashes(ctx, &a[1], a[2..].iter().filter_map(|x| parse_i64(x).ok()).map(hash))
}

fn addint(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    add_integers(ctx, a, |x| hash_bigint(x, 0))
}

fn addraw(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    add_integers(ctx, a, |x| x)
}

/// The estimate as a person reads it: the shortest digits in plain notation
/// (`10201.940365826425`, not `1.0201940365826425e+4`); a RESP3 double. Not finite (a
/// saturated sketch's NaN) as any double.
fn card_reply(card: Option<f64>) -> Frame {
    match card {
        Some(v) if v.is_finite() => number_frame(abacus_int::Number::Float(v)),
        Some(v) => Frame::Double(v),
        None => Frame::Null,
    }
}

fn card(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    if a.len() == 2 {
        return match sketch(ctx, &a[1], true) {
            Ok(Some(h)) => card_reply(h.cardinality()),
            Ok(None) => Frame::Double(0.0),
            Err(e) => e,
        };
    }
    match union_of(ctx, &a[1..], true) {
        Ok(Some(h)) => card_reply(h.cardinality()),
        Ok(None) => Frame::Double(0.0),
        Err(e) => e,
    }
}

fn union(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    // The destination's own content comes first: it is part of the union, and its
    // parameters are the ones the sources must match.
    let result = match union_of(ctx, &a[1..], false) {
        Ok(Some(h)) => h,
        Ok(None) => match default_params(&ctx.hll) {
            Ok(p) => Hll::new(p),
            Err(e) => return e,
        },
        Err(e) => return e,
    };
    store(ctx, &a[1], result);
    // As PFMERGE: the destination is signalled, never the sources.
    ctx.modified_only(KeysModified::key(0));
    Frame::ok()
}

fn info(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let h = match sketch(ctx, &a[1], true) {
        Ok(Some(h)) => h,
        Ok(None) => return Frame::Null,
        Err(e) => return e,
    };
    let (i, p) = (h.info(), h.params());
    let explicit = if i.kind == abacus_hll::Kind::Explicit { i.count } else { 0 };
    let nonzero = if matches!(i.kind, abacus_hll::Kind::Sparse | abacus_hll::Kind::Full) { i.count } else { 0 };
    let field = |name: &'static str, v: Frame| (Frame::bulk(name.as_bytes()), v);
    let int = |v: i64| Frame::Integer(v);
    Frame::Map(vec![
        field("representation", Frame::bulk(i.kind.name().as_bytes())),
        field("log2m", int(p.log2m().into())),
        field("regwidth", int(p.regwidth().into())),
        field("expthresh", int(p.expthresh())),
        field("explicit_threshold", int(p.explicit_threshold() as i64)),
        field("sparseon", int(p.sparseon().into())),
        field("explicit_values", int(explicit as i64)),
        field("nonzero_registers", int(nonzero as i64)),
        field("bytes", int(i.serialized_len as i64)),
    ])
}

/// The optional `SEED n` of HLL.HASH / HLL.HASHINT (a 32-bit integer, as in postgresql-hll).
fn seed(a: &[Arg]) -> Result<i32, Frame> {
    match a {
        [_, _] => Ok(0),
        [_, _, opt, n] if is(opt, "seed") => i32::try_from(parse_i64(n)?).map_err(|_| err(ERR_NOT_INTEGER)),
        _ => Err(err(ERR_SYNTAX)),
    }
}

fn hash(_ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match seed(a) {
        Ok(s) => Frame::Integer(hash_bytes(&a[1], s)),
        Err(e) => e,
    }
}

fn hashint(_ctx: &mut Ctx, a: &[Arg]) -> Frame {
    match (parse_i64(&a[1]), seed(a)) {
        (Ok(v), Ok(s)) => Frame::Integer(hash_bigint(v, s)),
        (Err(e), _) | (_, Err(e)) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abacus_keyspace::Db;
    use abacus_protocol::Bytes;

    use crate::testing::run_keyed as run;

    #[test]
    fn a_sketch_stays_decoded_until_a_string_command_reads_it() {
        let mut dbs = vec![Db::new()];
        assert_eq!(run(&mut dbs, &[b"hll.addint", b"k", b"1", b"2"]), Frame::Integer(1));
        assert!(matches!(dbs[0].peek(b"k", 1).unwrap().value(), ValueRef::Hll(_)));
        let Frame::Bulk(bytes) = run(&mut dbs, &[b"get", b"k"]) else { panic!() };
        assert_eq!(bytes[0], 0x12, "EXPLICIT");
        assert!(matches!(dbs[0].peek(b"k", 1).unwrap().value(), ValueRef::Str(_)));
        assert_eq!(run(&mut dbs, &[b"hll.card", b"k"]), Frame::DoubleText(Bytes::from_static(b"2")));
        assert!(matches!(dbs[0].peek(b"k", 1).unwrap().value(), ValueRef::Hll(_)));
        // A string command that modifies the bytes makes them a plain (invalid) string.
        assert_eq!(run(&mut dbs, &[b"append", b"k", b"x"]), Frame::Integer(bytes.len() as i64 + 1));
        let Frame::Error(e) = run(&mut dbs, &[b"hll.card", b"k"]) else { panic!() };
        assert!(e.starts_with(b"ERR invalid hll value"), "{e:?}");
    }

    #[test]
    fn a_string_that_is_not_a_sketch_is_named_so() {
        let mut dbs = vec![Db::new()];
        for value in [&b"hello"[..], b"", b"12345", b"HYLL\x01"] {
            run(&mut dbs, &[b"set", b"k", value]);
            let Frame::Error(e) = run(&mut dbs, &[b"hll.add", b"k", b"x"]) else { panic!() };
            assert!(e.starts_with(b"WRONGTYPE Key is not a valid HLL sketch: it holds a "), "{value:?}: {e:?}");
        }
        // A sketch's header with a damaged body is damage, not another type.
        run(&mut dbs, &[b"set", b"k", b"\x12\x8b\x7f\x00"]);
        let Frame::Error(e) = run(&mut dbs, &[b"hll.card", b"k"]) else { panic!() };
        assert!(e.starts_with(b"ERR invalid hll value: "), "{e:?}");
    }

    #[test]
    fn limits_apply_to_stored_bytes() {
        let mut dbs = vec![Db::new()];
        // An EMPTY header naming 2^31 registers: refused before anything is allocated.
        run(&mut dbs, &[b"set", b"k", &[0x11, 0x9f, 0x7f]]);
        let Frame::Error(e) = run(&mut dbs, &[b"hll.add", b"k", b"x"]) else { panic!() };
        assert_eq!(&e[..], b"ERR invalid hll value: log2m 31 exceeds the server limit hll-max-log2m 17");
        let Frame::Error(e) = run(&mut dbs, &[b"hll.create", b"k2", b"expthresh", b"524288"]) else { panic!() };
        assert_eq!(&e[..], b"ERR expthresh 524288 exceeds the server limit 262144");
    }
}
