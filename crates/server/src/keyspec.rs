//! Key specs (Redis 7.0's `key_specs` in COMMAND INFO): where a command's keys are and how
//! it uses each of them, derived from the command table.
//!
//! Why derived: the table already says where keys are (`first_key`/`last_key`/`step`,
//! `numkeys_index`), and [`Spec::key_indexes`] is what routing, locking, WATCH and ACL act
//! on. Declaring key specs a second time by hand would let COMMAND INFO, COMMAND GETKEYS and
//! the server disagree. So the shapes (begin_search / find_keys) come from the table, and
//! what the table cannot say is a short annotation in the command's entry (its
//! `.key_specs(..)`, [`Doc::key_specs`](abacus_commands::command::Doc::key_specs)), in this
//! grammar: each spec's flags separated by `;`, and a spec may add its shape (`index=N`,
//! `kw=WORD,N`, `range=L,S,M`, `keynum=I,F,S`, or `unknown`), else it takes the next shape
//! derived from the table. What an annotation says:
//! - the per-key flags where they differ from the default, which is `RO access` for a
//!   read-only command and `RW update` for a write (Redis's own defaults in spirit; e.g.
//!   DEL's key is `RM delete`, LMOVE's source `RW access delete` and destination `RW insert`);
//!   a range split into several specs (SMOVE's two keys, BITOP's destination and sources)
//!   is the same range cut at the keys whose flags differ;
//! - explicit shapes for the few commands whose keys only parsing finds (XREAD's
//!   `STREAMS`, GEORADIUS's `STORE`, SORT, MIGRATE), declared as Redis declares them.
//!
//! [`keys`] evaluates the specs as Redis's `getKeysUsingKeySpecs` does; for a command with an
//! `unknown` or `incomplete` spec (SORT, MIGRATE) it takes the positions from
//! `Spec::key_indexes` (Redis's getkeys_proc) and only adds the flags. A unit test checks on
//! sample argument vectors of every command that the specs find exactly the keys that
//! `key_indexes` finds, so the two can never drift apart.
//!
//! SET's and BITFIELD's key flags depend on their options (`variable_flags`); [`keys`]
//! refines them per call as Redis's getkeys procedures do.
//!
//! The flags drive ACL key permissions too (`%R~` needs `access`, `%W~` needs
//! `insert`/`update`/`delete`, as Redis's ACLSelectorCheckKey).

use std::collections::HashMap;

use abacus_protocol::Arg;

use crate::command::{self, Spec};

/// Key spec flags (Redis's CMD_KEY_*), in Redis's reply order.
pub mod kf {
    pub const RO: u16 = 1;
    pub const RW: u16 = 1 << 1;
    pub const OW: u16 = 1 << 2;
    pub const RM: u16 = 1 << 3;
    pub const ACCESS: u16 = 1 << 4;
    pub const UPDATE: u16 = 1 << 5;
    pub const INSERT: u16 = 1 << 6;
    pub const DELETE: u16 = 1 << 7;
    pub const NOT_KEY: u16 = 1 << 8;
    pub const INCOMPLETE: u16 = 1 << 9;
    pub const VARIABLE_FLAGS: u16 = 1 << 10;
    pub const NAMES: [(u16, &str); 11] = [
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// The names of key spec flags, in Redis's order.
pub fn flag_names(flags: u16) -> impl Iterator<Item = &'static str> {
    kf::NAMES.iter().filter(move |(f, _)| flags & f != 0).map(|(_, n)| *n)
}

/// Where the search for a spec's keys begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begin {
    Index(i32),
    /// After this keyword, searched from `startfrom` (backwards from the end if negative).
    Keyword(&'static str, i32),
    Unknown,
}

/// How a spec's keys are found from where the search began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Find {
    /// `lastkey` relative to the first key (negative: from the end), `step`, and `limit`
    /// (with lastkey -1: only the first 1/limit of the remaining arguments are keys).
    Range { lastkey: i32, step: i32, limit: i32 },
    /// The count is at first + `keynumidx`, the keys start at first + `firstkey`.
    Keynum { keynumidx: i32, firstkey: i32, step: i32 },
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    pub flags: u16,
    pub begin: Begin,
    pub find: Find,
}

impl KeySpec {
    pub fn flag_names(&self) -> impl Iterator<Item = &'static str> {
        flag_names(self.flags)
    }

    /// Whether only parsing finds this spec's keys (Redis then marks it movable and runs the
    /// command's own key finder).
    fn is_parsed(&self) -> bool {
        self.begin == Begin::Unknown || self.find == Find::Unknown || self.flags & kf::INCOMPLETE != 0
    }
}


/// The default flags of a command's keys: `RO access` for a read-only command, `RW update`
/// for a write (what a command that reads and changes its key does).
fn default_flags(spec: &Spec) -> u16 {
    if spec.is_write() {
        kf::RW | kf::UPDATE
    } else {
        kf::RO | kf::ACCESS
    }
}

fn parse_i32s<const N: usize>(v: &str) -> Result<[i32; N], String> {
    let mut out = [0; N];
    let mut parts = v.split(',');
    for o in out.iter_mut() {
        *o = parts.next().and_then(|p| p.parse().ok()).ok_or_else(|| format!("bad numbers {v:?}"))?;
    }
    if parts.next().is_some() {
        return Err(format!("too many numbers {v:?}"));
    }
    Ok(out)
}

/// One annotated spec: its flags and, if given, its shape.
fn parse_one(text: &'static str) -> Result<(u16, Option<(Begin, Find)>), String> {
    let mut flags = 0;
    let (mut begin, mut find) = (None, None);
    for word in text.split_whitespace() {
        if let Some((f, _)) = kf::NAMES.iter().find(|(_, n)| *n == word) {
            flags |= f;
        } else if word == "unknown" {
            if begin.is_none() {
                begin = Some(Begin::Unknown);
            }
            find = Some(Find::Unknown);
        } else if let Some(v) = word.strip_prefix("index=") {
            begin = Some(Begin::Index(v.parse().map_err(|_| format!("bad index {v:?}"))?));
        } else if let Some(v) = word.strip_prefix("kw=") {
            let (kw, from) = v.split_once(',').ok_or_else(|| format!("bad keyword {v:?}"))?;
            begin = Some(Begin::Keyword(kw, from.parse().map_err(|_| format!("bad startfrom {v:?}"))?));
        } else if let Some(v) = word.strip_prefix("range=") {
            let [lastkey, step, limit] = parse_i32s(v)?;
            find = Some(Find::Range { lastkey, step, limit });
        } else if let Some(v) = word.strip_prefix("keynum=") {
            let [keynumidx, firstkey, step] = parse_i32s(v)?;
            find = Some(Find::Keynum { keynumidx, firstkey, step });
        } else {
            return Err(format!("unknown word {word:?}"));
        }
    }
    match (begin, find) {
        (None, None) => Ok((flags, None)),
        (Some(b), Some(f)) => Ok((flags, Some((b, f)))),
        _ => Err(format!("a shape needs both its begin and its find: {text:?}")),
    }
}

/// The shapes the table's key positions give, in key order.
fn derived_shapes(spec: &Spec) -> Vec<(Begin, Find)> {
    let single = Find::Range { lastkey: 0, step: 1, limit: 0 };
    let mut out = Vec::new();
    if spec.numkeys_index > 0 {
        if spec.first_key > 0 {
            out.push((Begin::Index(spec.first_key), single));
        }
        out.push((Begin::Index(spec.numkeys_index as i32), Find::Keynum { keynumidx: 0, firstkey: 1, step: 1 }));
    } else if spec.first_key > 0 && spec.key_range.is_none() {
        let lastkey = if spec.last_key < 0 { spec.last_key } else { spec.last_key - spec.first_key };
        out.push((Begin::Index(spec.first_key), Find::Range { lastkey, step: spec.step, limit: 0 }));
    }
    out
}

/// Cuts a range shape into `n` specs: one per key for the first `n - 1` keys, the rest of
/// the range last (SMOVE's two keys; BITOP's destination and its sources).
fn split(shape: (Begin, Find), n: usize) -> Option<Vec<(Begin, Find)>> {
    let (Begin::Index(first), Find::Range { lastkey, step, limit: 0 }) = shape else { return None };
    let mut out = Vec::new();
    for i in 0..n as i32 - 1 {
        out.push((Begin::Index(first + i * step), Find::Range { lastkey: 0, step: 1, limit: 0 }));
    }
    let rest = first + (n as i32 - 1) * step;
    let rest_lastkey = if lastkey < 0 { lastkey } else { lastkey - (rest - first) };
    if lastkey >= 0 && rest_lastkey < 0 {
        return None;
    }
    out.push((Begin::Index(rest), Find::Range { lastkey: rest_lastkey, step, limit: 0 }));
    Some(out)
}

/// A command's key specs, from its table entry and its annotation.
pub fn build(spec: &Spec, annotation: Option<&'static str>) -> Result<Vec<KeySpec>, String> {
    let mut shapes = derived_shapes(spec);
    let Some(text) = annotation else {
        let flags = default_flags(spec);
        return Ok(shapes.into_iter().map(|(begin, find)| KeySpec { flags, begin, find }).collect());
    };
    let parsed = text.split(';').map(parse_one).collect::<Result<Vec<_>, _>>()?;
    let implicit = parsed.iter().filter(|(_, s)| s.is_none()).count();
    if implicit > shapes.len() && shapes.len() == 1 {
        shapes = split(shapes[0], implicit).ok_or_else(|| format!("{}: cannot split its keys into {implicit} specs", spec.name))?;
    }
    if implicit == 0 {
        // Every spec declares its shape (keys only parsing finds): the table's range is
        // only their first key, already in the annotation.
        shapes.clear();
    }
    if implicit != shapes.len() {
        return Err(format!("{}: {implicit} annotated specs without a shape, {} derived", spec.name, shapes.len()));
    }
    let mut derived = shapes.into_iter();
    Ok(parsed
        .into_iter()
        .map(|(flags, shape)| {
            let (begin, find) = shape.unwrap_or_else(|| derived.next().expect("counted above"));
            KeySpec { flags, begin, find }
        })
        .collect())
}

/// Every command's key specs by full name: built once, with the command table's other derived
/// facts (`command::facts`).
pub fn build_all() -> HashMap<&'static str, Vec<KeySpec>> {
    let mut m = HashMap::new();
    for spec in command::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())) {
        // A malformed annotation is a programmer error the unit tests catch; at run time
        // the command keeps the derived specs rather than taking the server down.
        let note = Some(spec.doc.key_specs).filter(|n| !n.is_empty());
        let ks = build(spec, note).or_else(|_| build(spec, None)).unwrap_or_default();
        m.insert(spec.name, ks);
    }
    m
}

fn all_specs() -> &'static HashMap<&'static str, Vec<KeySpec>> {
    &command::facts().key_specs
}

/// A command's key specs (empty for a command without keys).
pub fn of(spec: &Spec) -> &'static [KeySpec] {
    all_specs().get(spec.name).map(|v| &v[..]).unwrap_or(&[])
}

/// Whether the specs say the keys move with the arguments (Redis's `movablekeys`): any spec
/// that is not a fixed index with a range.
pub fn movable(spec: &Spec) -> bool {
    of(spec).iter().any(|k| !matches!((k.begin, k.find), (Begin::Index(_), Find::Range { .. })) || k.flags & kf::INCOMPLETE != 0)
}

/// Evaluates complete specs as Redis's getKeysUsingKeySpecs: (position, flags) per key.
/// A count that is not a positive integer fitting the arguments gives no keys at all, as
/// `Spec::key_indexes` (the handler then replies the error).
fn evaluate(specs: &[KeySpec], args: &[Arg]) -> Vec<(usize, u16)> {
    let argc = args.len() as i64;
    let mut out = Vec::new();
    for k in specs {
        let first = match k.begin {
            Begin::Index(i) => i as i64,
            Begin::Keyword(kw, from) => {
                let found = if from >= 0 {
                    (from as i64..argc - 1).find(|&i| args[i as usize].eq_ignore_ascii_case(kw.as_bytes()))
                } else {
                    let start = argc + from as i64;
                    (1..=start.min(argc - 1)).rev().find(|&i| args[i as usize].eq_ignore_ascii_case(kw.as_bytes()))
                };
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            Begin::Unknown => continue,
        };
        let (first, last, step) = match k.find {
            Find::Range { lastkey, step, limit } => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit <= 1 {
                    argc + lastkey as i64
                } else {
                    first + ((argc - first) / limit as i64 + lastkey as i64)
                };
                (first, last, step.max(1) as i64)
            }
            Find::Keynum { keynumidx, firstkey, step } => {
                let count = args
                    .get((first + keynumidx as i64) as usize)
                    .and_then(|n| abacus_keyspace::value::parse_canonical_i64(n))
                    .filter(|&n| n > 0);
                let start = first + firstkey as i64;
                match count {
                    Some(n) if start.saturating_add(n.saturating_sub(1).saturating_mul(step.max(1) as i64)) < argc => (start, start + (n - 1) * step.max(1) as i64, step.max(1) as i64),
                    _ => return Vec::new(),
                }
            }
            Find::Unknown => continue,
        };
        let mut i = first;
        while i <= last {
            if i >= 1 && i < argc {
                out.push((i as usize, k.flags));
            }
            i += step;
        }
    }
    out
}

/// A call's keys with the flags of the spec that names each: COMMAND GETKEYSANDFLAGS and the
/// ACL key check read it. Positions are `Spec::key_indexes`'s (the unit tests check that the
/// specs agree); a key only parsing finds takes the flags of the command's last parsed spec.
pub fn keys(spec: &Spec, args: &[Arg]) -> Vec<(usize, u16)> {
    let mut out = keys_as_declared(spec, args);
    for (_, f) in out.iter_mut() {
        *f = refine_variable(spec, args, *f);
    }
    out
}

fn keys_as_declared(spec: &Spec, args: &[Arg]) -> Vec<(usize, u16)> {
    let specs = of(spec);
    if !specs.iter().any(KeySpec::is_parsed) && spec.trailing_key.is_none() && spec.key_range.is_none() {
        return evaluate(specs, args);
    }
    let complete: Vec<KeySpec> = specs.iter().filter(|k| !k.is_parsed()).copied().collect();
    let found = evaluate(&complete, args);
    let fallback = specs.iter().rev().find(|k| k.is_parsed()).or(specs.last()).map(|k| k.flags).unwrap_or_else(|| default_flags(spec));
    spec.key_indexes(args).map(|i| (i, found.iter().find(|(j, _)| *j == i).map(|(_, f)| *f).unwrap_or(fallback))).collect()
}

/// The flags of a `variable_flags` key for this call, as Redis's getkeys procedures refine
/// them (setGetKeys, bitfieldGetKeys): SET overwrites unless GET reads the old value first;
/// BITFIELD only reads unless a SET or INCRBY operation is given.
fn refine_variable(spec: &Spec, args: &[Arg], flags: u16) -> u16 {
    if flags & kf::VARIABLE_FLAGS == 0 {
        return flags;
    }
    let is = |a: &Arg, w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    match spec.name {
        "set" => {
            if args.iter().skip(3).any(|a| is(a, "get")) {
                kf::RW | kf::ACCESS | kf::UPDATE
            } else {
                kf::OW | kf::UPDATE
            }
        }
        "bitfield" => {
            let mut i = 2;
            while i < args.len() {
                let rem = args.len() - i - 1;
                if is(&args[i], "get") && rem >= 2 {
                    i += 2;
                } else if (is(&args[i], "set") || is(&args[i], "incrby")) && rem >= 3 {
                    return kf::RW | kf::ACCESS | kf::UPDATE;
                } else if is(&args[i], "overflow") && rem >= 1 {
                    i += 1;
                }
                i += 1;
            }
            kf::RO | kf::ACCESS
        }
        _ => flags,
    }
}

/// The flags of a key spec for ACL: whether the key is read (`access`) and whether it is
/// written (`insert`, `update` or `delete`), as Redis's ACLSelectorCheckKey asks.
pub fn acl_needs(flags: u16) -> (bool, bool) {
    (flags & kf::ACCESS != 0, flags & (kf::INSERT | kf::UPDATE | kf::DELETE) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_command() -> impl Iterator<Item = &'static Spec> {
        command::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
    }

    #[test]
    fn annotations_parse() {
        let mut annotated = 0;
        for spec in every_command().filter(|s| !s.doc.key_specs.is_empty()) {
            build(spec, Some(spec.doc.key_specs)).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            annotated += 1;
        }
        assert!(annotated > 100, "{annotated}");
    }

    #[test]
    fn specs_exist_exactly_for_commands_with_keys() {
        for spec in every_command() {
            let has_keys = spec.first_key > 0 || spec.numkeys_index > 0 || spec.key_range.is_some() || spec.trailing_key.is_some();
            assert_eq!(!of(spec).is_empty(), has_keys, "{}", spec.name);
            // Redis's movablekeys, which COMMAND INFO shows, follows from the specs.
            let parsed = spec.numkeys_index > 0 || spec.key_range.is_some() || spec.trailing_key.is_some();
            if parsed {
                assert!(movable(spec), "{}", spec.name);
            }
        }
    }

    fn argv(words: &[String]) -> abacus_protocol::Args {
        abacus_protocol::Args::from_vec(words.iter().map(|a| abacus_protocol::Bytes::copy_from_slice(a.as_bytes())).collect())
    }

    /// Sample argument vectors for a command: every length from its arity to five more, with
    /// a count of 1, 2 or 3 where the table says a count is.
    fn samples(spec: &Spec) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let head: Vec<String> = spec.name.split('|').map(str::to_string).collect();
        if head.len() == 1 && !spec.subcommands.is_empty() {
            return out;
        }
        let min = spec.arity.unsigned_abs() as usize;
        for len in min..min + 6 {
            if spec.arity > 0 && len != min {
                break;
            }
            for count in 1..=3 {
                let mut v = head.clone();
                while v.len() < len {
                    v.push(format!("a{}", v.len()));
                }
                if spec.numkeys_index > 0 && spec.numkeys_index < v.len() {
                    v[spec.numkeys_index] = count.to_string();
                }
                out.push(v);
            }
        }
        out
    }

    /// Calls whose keys only options reveal, in their valid forms.
    const PARSED: &[&str] = &[
        "xread streams a b 0 0",
        "xread count 2 block 0 streams a 0",
        "xreadgroup group g c count 1 streams a b c > > >",
        "georadius src 0 0 1 km store dst",
        "georadius src 0 0 1 km withdist storedist dst",
        "georadiusbymember src m 1 km store dst",
        "georadiusbymember src m 1 km storedist dst",
        "zunionstore d 2 a b weights 1 2",
        "zdiffstore d 1 a",
        "lmpop 2 a b left count 3",
        "blmpop 0 2 a b left",
        "bzmpop 0 3 a b c min",
        "sintercard 2 a b limit 1",
        "zintercard 1 a",
        "mset a 1 b 2 c 3",
        "ts.madd a 1 1 b 2 2",
        "bitop and d a b c",
        "hll.union d a b",
    ];

    #[test]
    fn specs_find_the_keys_key_indexes_finds() {
        let mut checked = 0;
        let mut vectors: Vec<Vec<String>> = PARSED.iter().map(|l| l.split(' ').map(str::to_string).collect()).collect();
        for spec in every_command() {
            vectors.extend(samples(spec));
        }
        for words in &vectors {
            let args = argv(words);
            let Some(spec) = command::lookup_call(&args) else { panic!("{words:?}") };
            let specs = of(spec);
            let expected: Vec<usize> = spec.key_indexes(&args).filter(|&i| i < args.len()).collect();
            if specs.iter().any(KeySpec::is_parsed) {
                // Found by the command's own parser; the specs only give the flags.
                assert_eq!(keys(spec, &args).into_iter().map(|(i, _)| i).collect::<Vec<_>>(), expected, "{words:?}");
                continue;
            }
            let mut by_specs: Vec<usize> = evaluate(specs, &args).into_iter().map(|(i, _)| i).collect();
            let mut sorted = expected.clone();
            sorted.sort_unstable();
            by_specs.sort_unstable();
            assert_eq!(by_specs, sorted, "{words:?}: key specs {specs:?}");
            checked += 1;
        }
        assert!(checked > 300, "{checked}");
    }

    #[test]
    fn flags_of_moving_and_storing_commands() {
        let line = |l: &str| argv(&l.split(' ').map(str::to_string).collect::<Vec<_>>());
        let args = line("lmove src dst left right");
        let spec = command::lookup_call(&args).unwrap();
        assert_eq!(keys(spec, &args), vec![(1, kf::RW | kf::ACCESS | kf::DELETE), (2, kf::RW | kf::INSERT)]);
        let args = line("sort k by w_* store d");
        let spec = command::lookup_call(&args).unwrap();
        assert_eq!(keys(spec, &args), vec![(1, kf::RO | kf::ACCESS), (5, kf::OW | kf::UPDATE)]);
        let args = line("georadius s 0 0 1 km store d");
        let spec = command::lookup_call(&args).unwrap();
        assert_eq!(keys(spec, &args), vec![(1, kf::RO | kf::ACCESS), (7, kf::OW | kf::UPDATE)]);
        let spec = command::lookup(b"get").unwrap();
        assert_eq!(of(spec), &[KeySpec { flags: kf::RO | kf::ACCESS, begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]);
        let spec = command::lookup(b"mset").unwrap();
        assert_eq!(of(spec)[0].find, Find::Range { lastkey: -1, step: 2, limit: 0 });
    }
}
