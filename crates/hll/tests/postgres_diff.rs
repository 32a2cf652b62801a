//! Differential test against a live PostgreSQL with postgresql-hll 2.17.
//!
//! Needs `ABACUS_PG_URL` (e.g. from `scripts/pg-start.sh`) and `psql` on the
//! PATH (or `ABACUS_PSQL`). Without the URL the test fails, unless
//! `ABACUS_SKIP_PG=1`. `ABACUS_PG_SEED` picks another random case set.
//!
//! Compared, for random parameters within the extension's ranges:
//! * `hll_hash_bigint` / `hll_hash_bytea` for random inputs and seeds;
//! * `hll_add_agg` over generated elements (hashed integers, hashed byte
//!   strings, raw hash values): bytes and `hll_cardinality`;
//! * our bytes read by PostgreSQL: `hll_cardinality` and `hll_add` on them;
//! * `hll_union_agg` over groups of sketches and pairwise `hll_union`.
//!
//! Cardinality is not compared where postgresql-hll is known to be wrong
//! (see the crate docs): regwidth >= 6 outside linear counting, and SPARSE
//! values whose padding it misreads as "register 0 = 0" when register 0 is set.
//! Everything runs in four psql invocations.

use abacus_hll::{hash_bigint, hash_bytes, Hll, Kind, Params};
use std::fmt::Write as _;
use std::process::Command;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        (i128::from(lo) + i128::from(self.below((i128::from(hi) - i128::from(lo) + 1) as u64)))
            as i64
    }
}

fn psql(url: &str, sql: &str) -> Vec<Vec<String>> {
    let path = std::env::temp_dir().join(format!(
        "abacus-hll-diff-{}-{}.sql",
        std::process::id(),
        sql.len()
    ));
    // hll values print as bytea (`\\x` + hex); make sure the output is hex.
    std::fs::write(
        &path,
        format!("set bytea_output = hex;\nset client_min_messages = error;\n{sql}"),
    )
    .unwrap();
    let psql = std::env::var("ABACUS_PSQL").unwrap_or_else(|_| "psql".into());
    let out = Command::new(&psql)
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-F",
            "|",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-f",
        ])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {psql}: {e}"));
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "psql failed: {stderr}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split('|')
                .map(|f| f.strip_prefix("\\x").unwrap_or(f).to_owned())
                .collect()
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// How an element is turned into a hash, on both sides.
#[derive(Clone, Copy)]
enum Elem {
    Bigint,
    /// A prefix of the element's 8 big-endian bytes, 1 to 8 bytes long.
    Bytes,
    /// The element itself is the hash value (exercises odd bit patterns).
    Raw,
}

#[derive(Clone)]
struct Case {
    params: Params,
    elem: Elem,
    n: i64,
    mult: i64,
    off: i64,
}

impl Case {
    fn value(&self, i: i64) -> i64 {
        i * self.mult + self.off
    }
    fn hash(&self, i: i64) -> i64 {
        let x = self.value(i);
        match self.elem {
            Elem::Bigint => hash_bigint(x, 0),
            Elem::Bytes => hash_bytes(&x.to_be_bytes()[..1 + (i % 8) as usize], 0),
            Elem::Raw => x,
        }
    }
    fn sql_hash(&self) -> String {
        let x = format!("(i::bigint * {} + ({}))", self.mult, self.off);
        match self.elem {
            Elem::Bigint => format!("hll_hash_bigint({x}, 0)"),
            Elem::Bytes => format!("hll_hash_bytea(substr(int8send({x}), 1, 1 + (i % 8)::int), 0)"),
            Elem::Raw => format!("{x}::hll_hashval"),
        }
    }
    fn build(&self) -> Hll {
        let mut hll = Hll::new(self.params);
        for i in 1..=self.n {
            hll.add_raw(self.hash(i));
        }
        hll
    }
    fn sql_params(&self) -> String {
        let p = self.params;
        format!(
            "{}, {}, {}, {}",
            p.log2m(),
            p.regwidth(),
            p.expthresh(),
            u8::from(p.sparseon())
        )
    }
}

fn random_params(rng: &mut Rng) -> Params {
    let log2m = if rng.below(8) == 0 {
        rng.range(13, 17)
    } else {
        rng.range(4, 12)
    };
    let regwidth = rng.range(1, 7);
    let expthresh = match rng.below(4) {
        0 => 0,
        1 => 1 << rng.range(0, 13),
        _ => -1,
    };
    Params::new(log2m, regwidth, expthresh, rng.below(4) != 0).unwrap()
}

/// Element counts chosen to land on the interesting boundaries.
fn random_count(rng: &mut Rng, p: Params) -> i64 {
    let m = p.num_registers() as f64;
    let thr = p.explicit_threshold() as i64;
    // Adds needed to fill the number of registers at the sparse/full switch.
    let k = (m * f64::from(p.regwidth()) / f64::from(p.log2m() + p.regwidth())).min(m - 1.0);
    let sparse_edge = (m * (m / (m - k)).ln()) as i64;
    let n = match rng.below(7) {
        0 => rng.range(0, 2),
        1 => rng.range((thr - 2).max(0), thr + 2),
        2 => rng.range(0, thr + 10),
        3 => rng.range(sparse_edge * 9 / 10, sparse_edge * 11 / 10 + 1),
        4 => rng.range(0, 3 * m as i64),
        _ => rng.range(0, 2000),
    };
    n.min(20_000)
}

fn random_case(rng: &mut Rng, params: Params) -> Case {
    let elem = match rng.below(3) {
        0 => Elem::Bigint,
        1 => Elem::Bytes,
        _ => Elem::Raw,
    };
    let mult = match elem {
        // Odd multipliers shifted so low bits (the register index) repeat.
        Elem::Raw => (((rng.next() & 0xff_ffff) | 1) as i64) << rng.range(0, 16),
        _ => rng.range(1, 1 << 20),
    };
    Case {
        params,
        elem,
        n: random_count(rng, params),
        mult,
        off: rng.range(-(1 << 62), 1 << 62),
    }
}

/// Whether postgresql-hll's `hll_cardinality` is trustworthy for this value.
fn pg_card_is_sane(hll: &Hll) -> bool {
    let Some(regs) = hll.registers() else {
        return true;
    };
    let p = hll.params();
    let info = hll.info();
    let chunk = (p.log2m() + p.regwidth()) as usize;
    if info.kind == Kind::Sparse && regs[0] != 0 {
        let bytes = (info.count * chunk).div_ceil(8);
        if bytes * 8 / chunk > info.count {
            return false; // padding misread as an entry that clears register 0
        }
    }
    if p.regwidth() <= 5 {
        return true;
    }
    // regwidth >= 6: only the linear-counting branch avoids the overflow.
    let m = regs.len() as f64;
    let zeros = regs.iter().filter(|&&r| r == 0).count();
    let sum: f64 = regs.iter().map(|&r| 2f64.powi(-i32::from(r))).sum();
    let alpha = match regs.len() {
        16 => 0.673,
        32 => 0.697,
        64 => 0.709,
        _ => 0.7213 / (1.0 + 1.079 / m),
    };
    zeros > 0 && alpha * m * m / sum < 2.5 * m
}

fn same_card(ours: f64, theirs: &str) -> bool {
    let theirs: f64 = theirs
        .parse()
        .unwrap_or_else(|_| panic!("bad float {theirs}"));
    (ours.is_nan() && theirs.is_nan()) || (ours - theirs).abs() <= 1e-9 * theirs.abs().max(1.0)
}

#[test]
fn postgres_differential() {
    let Ok(url) = std::env::var("ABACUS_PG_URL") else {
        if std::env::var("ABACUS_SKIP_PG").as_deref() == Ok("1") {
            eprintln!("postgres_differential: SKIPPED (ABACUS_SKIP_PG=1, no ABACUS_PG_URL)");
            return;
        }
        panic!(
            "ABACUS_PG_URL is not set. Start a server with `crates/hll/scripts/pg-start.sh` and set \
             ABACUS_PG_URL to the URL it prints, or set ABACUS_SKIP_PG=1 to skip this test."
        );
    };
    let seed: u64 = std::env::var("ABACUS_PG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_171_117);
    eprintln!("postgres_differential: seed {seed} (set ABACUS_PG_SEED to change)");
    let mut rng = Rng(seed);
    let mut card_skipped = 0;

    // 1. Hash functions.
    let mut sql = String::new();
    let mut expected = Vec::new();
    for i in 0..300 {
        let seed = match rng.below(4) {
            0 => 0,
            1 => rng.range(i64::from(i32::MIN), -1) as i32,
            _ => rng.range(0, i64::from(i32::MAX)) as i32,
        };
        if i % 2 == 0 {
            let v = match rng.below(5) {
                0 => [0, 1, -1, i64::MIN, i64::MAX][rng.below(5) as usize],
                _ => rng.next() as i64,
            };
            writeln!(sql, "select {i}, hll_hash_bigint({v}, {seed});").unwrap();
            expected.push(hash_bigint(v, seed));
        } else {
            let bytes: Vec<u8> = (0..rng.below(48)).map(|_| rng.next() as u8).collect();
            writeln!(
                sql,
                "select {i}, hll_hash_bytea('\\x{}'::bytea, {seed});",
                hex(&bytes)
            )
            .unwrap();
            expected.push(hash_bytes(&bytes, seed));
        }
    }
    let rows = psql(&url, &sql);
    assert_eq!(rows.len(), expected.len());
    for (row, want) in rows.iter().zip(&expected) {
        assert_eq!(row[1], want.to_string(), "hash case {}", row[0]);
    }

    // 2. hll_add_agg: bytes and cardinality.
    let cases: Vec<Case> = (0..240)
        .map(|_| {
            let params = random_params(&mut rng);
            random_case(&mut rng, params)
        })
        .collect();
    let mut sql = String::new();
    for (id, c) in cases.iter().enumerate() {
        let agg = format!(
            "coalesce(hll_add_agg({}, {p}), hll_empty({p}))",
            c.sql_hash(),
            p = c.sql_params()
        );
        writeln!(
            sql,
            "select {id}, {agg}, hll_cardinality({agg}) from generate_series(1, {}) i;",
            c.n
        )
        .unwrap();
    }
    let rows = psql(&url, &sql);
    assert_eq!(rows.len(), cases.len());
    let sketches: Vec<Hll> = cases.iter().map(Case::build).collect();
    let mut kinds = std::collections::BTreeMap::new();
    for ((row, c), hll) in rows.iter().zip(&cases).zip(&sketches) {
        let what = format!("add case {} {:?} n={}", row[0], c.params, c.n);
        assert_eq!(hex(&hll.to_bytes()), row[1], "{what}: bytes");
        *kinds.entry(hll.info().kind.name()).or_insert(0) += 1;
        if pg_card_is_sane(hll) {
            assert!(
                same_card(hll.cardinality().unwrap(), &row[2]),
                "{what}: cardinality {:?} vs {}",
                hll.cardinality(),
                row[2]
            );
        } else {
            card_skipped += 1;
        }
    }

    // 3. PostgreSQL reads our bytes: cardinality, and one more add.
    let mut sql = String::new();
    let mut after_add = Vec::new();
    for (id, hll) in sketches.iter().enumerate() {
        let extra = rng.next() as i64;
        let ours = format!("decode('{}', 'hex')::hll", hex(&hll.to_bytes()));
        writeln!(
            sql,
            "select {id}, hll_cardinality({ours}), hll_add({ours}, '{extra}'::hll_hashval);"
        )
        .unwrap();
        let mut h = hll.clone();
        h.add_raw(extra);
        after_add.push(h);
    }
    let rows = psql(&url, &sql);
    assert_eq!(rows.len(), sketches.len());
    for ((row, hll), added) in rows.iter().zip(&sketches).zip(&after_add) {
        if !pg_card_is_sane(hll) {
            card_skipped += 1;
            continue; // its unpack is the broken step, so hll_add differs too
        }
        let what = format!("read-back case {} {:?}", row[0], hll.params());
        assert!(
            same_card(hll.cardinality().unwrap(), &row[1]),
            "{what}: cardinality {:?} vs {}",
            hll.cardinality(),
            row[1]
        );
        assert_eq!(hex(&added.to_bytes()), row[2], "{what}: hll_add");
    }

    // 4. Unions: hll_union_agg over groups, and pairwise hll_union.
    let mut sql = String::new();
    let mut expected = Vec::new();
    for g in 0..70 {
        let params = random_params(&mut rng);
        let members: Vec<Hll> = (0..rng.range(2, 5))
            .map(|_| random_case(&mut rng, params).build())
            .collect();
        let mut all = Hll::new(params);
        let mut values = Vec::new();
        for h in &members {
            all.union(h).unwrap();
            values.push(format!("(decode('{}', 'hex')::hll)", hex(&h.to_bytes())));
        }
        writeln!(
            sql,
            "select {g}, hll_union_agg(h), hll_cardinality(hll_union_agg(h)) from (values {}) s(h);",
            values.join(", ")
        )
        .unwrap();
        let mut pair = members[0].clone();
        pair.union(&members[1]).unwrap();
        writeln!(sql, "select {g}, hll_union({}, {});", values[0], values[1]).unwrap();
        expected.push((all, pair));
    }
    let rows = psql(&url, &sql);
    assert_eq!(rows.len(), 2 * expected.len());
    for (pair_rows, (all, pair)) in rows.chunks(2).zip(&expected) {
        let what = format!("union group {} {:?}", pair_rows[0][0], all.params());
        assert_eq!(
            hex(&all.to_bytes()),
            pair_rows[0][1],
            "{what}: hll_union_agg bytes"
        );
        if pg_card_is_sane(all) {
            assert!(
                same_card(all.cardinality().unwrap(), &pair_rows[0][2]),
                "{what}: cardinality"
            );
        } else {
            card_skipped += 1;
        }
        assert_eq!(
            hex(&pair.to_bytes()),
            pair_rows[1][1],
            "{what}: hll_union bytes"
        );
    }

    eprintln!(
        "postgres_differential: 300 hashes, {} add_agg cases {kinds:?}, {} read-backs, {} union groups agree; \
         {card_skipped} cardinality comparisons skipped (known postgresql-hll bugs)",
        cases.len(),
        sketches.len(),
        expected.len()
    );
}
