//! Ground-truth vectors produced by the real postgresql-hll 2.17 (`tests/vectors/`, provenance
//! in its README; the format in `tests/HLL_FORMAT_NOTES.md`): every row must reproduce byte for byte, and
//! cardinalities must agree to the files' 6 decimals. The directory is
//! required: a missing vectors directory fails the test instead of skipping.

use abacus_hll::{hash_bigint, hash_bytes, Hll, Params};
use std::path::PathBuf;

fn vectors_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    assert!(
        dir.is_dir(),
        "vectors directory {} is missing (it is part of the repository)",
        dir.display()
    );
    dir
}

/// Rows of a CSV file (no quoting in these files), header checked and removed.
fn rows(name: &str, header: &str) -> Vec<Vec<String>> {
    let path = vectors_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header), "{name}: unexpected header");
    lines
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

fn unhex(s: &str) -> Vec<u8> {
    let s = s.strip_prefix("\\x").unwrap_or(s);
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("\\x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn assert_card(ours: f64, theirs: &str, what: &str) {
    let theirs: f64 = theirs.parse().unwrap();
    let tolerance = (1e-9 * theirs.abs()).max(5e-7);
    assert!(
        (ours - theirs).abs() <= tolerance,
        "{what}: cardinality {ours} vs postgresql-hll {theirs}"
    );
}

#[test]
fn hash_vectors() {
    let rows = rows("hash.csv", "kind,seed,input,hash");
    assert!(rows.len() > 50);
    for r in rows {
        let seed: i32 = r[1].parse().unwrap();
        let expected: i64 = r[3].parse().unwrap();
        let got = match r[0].as_str() {
            "bigint" => hash_bigint(r[2].parse().unwrap(), seed),
            "bytea_hex" => hash_bytes(&unhex(&r[2]), seed),
            kind => panic!("unknown kind {kind}"),
        };
        assert_eq!(got, expected, "{r:?}");
    }
}

#[test]
fn add_vectors() {
    let mut files: Vec<_> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("add_") && n.ends_with(".csv"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 6,
        "expected the add_*.csv vector files, found {files:?}"
    );
    for name in files {
        let p: Vec<i64> = name["add_".len()..name.len() - 4]
            .split('_')
            .map(|x| x.parse().unwrap())
            .collect();
        let params = Params::new(p[0], p[1], p[2], p[3] == 1).unwrap();
        let mut hll = Hll::new(params);
        let mut step = 0i64;
        let rows = rows(&name, "step,value,hash,cardinality,hll");
        for r in &rows {
            let target: i64 = r[0].parse().unwrap();
            // Replay every add, including the steps the file leaves out.
            while step < target {
                step += 1;
                let value = (step * 7919) ^ (step << 33);
                let hash = hash_bigint(value, 0);
                if step == target {
                    assert_eq!(r[1], value.to_string(), "{name} step {step}: value");
                    assert_eq!(r[2], hash.to_string(), "{name} step {step}: hash");
                }
                hll.add_raw(hash);
            }
            let what = format!("{name} step {step}");
            assert_eq!(hex(&hll.to_bytes()), r[4], "{what}: bytes");
            assert_eq!(hll.info().serialized_len, hll.to_bytes().len(), "{what}");
            assert_card(hll.cardinality().unwrap(), &r[3], &what);
            // Reading postgresql-hll's bytes gives the same sketch.
            assert_eq!(
                Hll::from_bytes(&unhex(&r[4])).unwrap(),
                hll,
                "{what}: from_bytes"
            );
        }
        assert!(step >= 300, "{name}: only {step} steps");
    }
}

#[test]
fn union_vectors() {
    let rows = rows("union_11_5_-1_1.csv", "a,b,union,union_cardinality");
    assert!(rows.len() > 50);
    for r in rows {
        let (a_bytes, b_bytes) = (unhex(&r[0]), unhex(&r[1]));
        let mut a = Hll::from_bytes(&a_bytes).unwrap();
        let b = Hll::from_bytes(&b_bytes).unwrap();
        assert_eq!(a.to_bytes(), a_bytes, "re-serializing {}", r[0]);
        assert_eq!(b.to_bytes(), b_bytes, "re-serializing {}", r[1]);
        a.union(&b).unwrap();
        let what = format!("{} + {}", &r[0][..8], &r[1][..8]);
        assert_eq!(hex(&a.to_bytes()), r[2], "{what}: bytes");
        assert_card(a.cardinality().unwrap(), &r[3], &what);
    }
}
