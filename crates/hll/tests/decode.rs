//! Hand-made inputs for `from_bytes`: what is rejected (with which message),
//! and the odd-but-valid values postgresql-hll 2.17 accepts, with the results
//! it gives for them (observed on a live server).

use abacus_hll::{Hll, HllError, Kind, Params};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn rejected(input: &str, fragment: &str) {
    match Hll::from_bytes(&unhex(input)) {
        Err(HllError::Corrupt(msg)) => assert!(
            msg.contains(fragment),
            "{input}: {msg:?} lacks {fragment:?}"
        ),
        other => panic!("{input}: expected a Corrupt error, got {other:?}"),
    }
}

#[test]
fn rejects_malformed_values() {
    rejected("", "shorter than the 3-byte header");
    rejected("118b", "shorter than the 3-byte header");
    rejected("218b7f", "schema version 2");
    rejected("158b7f", "unknown type 5");
    rejected("118b7f00", "empty value followed by 1 bytes");
    rejected("108b7f00", "undefined value followed by 1 bytes");
    rejected("118bff", "reserved bit 7");
    rejected("11837f", "log2m 3");
    rejected("118b22", "expthresh 8589934592"); // code 34 = 2^33
                                                // Explicit: partial value, unsorted, duplicate, too many.
    rejected("128b7f00000000000000", "not a whole number");
    rejected(
        "128b7f00000000000000020000000000000001",
        "strictly ascending",
    );
    rejected(
        "128b7f00000000000000010000000000000001",
        "strictly ascending",
    );
    rejected(
        "128b7fffffffffffffffff8000000000000000",
        "strictly ascending",
    ); // -1 before i64::MIN
    let mut big = unhex("128b7f");
    for v in 0..16384i64 {
        big.extend(v.to_be_bytes());
    }
    assert!(Hll::from_bytes(&big)
        .unwrap_err()
        .to_string()
        .contains("more than the limit of 16383"));
    // Full: wrong length, impossible register value (regwidth 6, log2m 11: max 53).
    rejected("148b7f00", "full payload is 1 bytes, expected 1280");
    let mut full = unhex("14ab7f");
    full.extend(vec![0u8; 1536]);
    full[3] = 0xfc; // register 0 = 63
    rejected(&hex(&full), "register 0 holds 63, more than the maximum 53");
    // Sparse (11, 5): 16-bit entries (index << 5 | value).
    rejected("138b7f00a10062", "strictly ascending register indexes"); // (5,1) then (3,2)
    rejected("138b7f00a100a2", "strictly ascending register indexes"); // duplicate index 5
    rejected("138b7f00a00062", "zero-valued entry"); // (5,0) then (3,2)
    rejected("138b7f00a1ff", "does not match"); // half an entry
                                                // Sparse (4, 2): 6-bit entries; 2 entries use 12 bits, 4 bits of padding.
    rejected("1324400451", "non-zero padding");
    assert!(Hll::from_bytes(&unhex("1324400450")).is_ok());
}

#[test]
fn accepts_what_postgresql_hll_accepts() {
    // An explicit value over its threshold (expthresh 1, 2 values) keeps
    // growing on add, exactly as postgresql-hll does.
    let mut h = Hll::from_bytes(&unhex("128b4100000000000000010000000000000002")).unwrap();
    assert_eq!(h.cardinality(), Some(2.0));
    h.add_raw(5);
    assert_eq!(
        hex(&h.to_bytes()),
        "128b41000000000000000100000000000000020000000000000005"
    );
    // Explicit with expthresh 0.
    let mut h = Hll::from_bytes(&unhex("128b400000000000000001")).unwrap();
    h.add_raw(5);
    assert_eq!(hex(&h.to_bytes()), "128b4000000000000000010000000000000005");
    // Explicit with no values: cardinality 0, stays explicit.
    let mut h = Hll::from_bytes(&unhex("128b7f")).unwrap();
    assert_eq!(
        (h.cardinality(), h.info().kind),
        (Some(0.0), Kind::Explicit)
    );
    h.add_raw(5);
    assert_eq!(hex(&h.to_bytes()), "128b7f0000000000000005");
    // Undefined absorbs adds and unions; its cardinality is NULL.
    let mut u = Hll::from_bytes(&unhex("108b7f")).unwrap();
    assert!(!u.add_raw(5));
    assert_eq!(u.cardinality(), None);
    let mut e = Hll::new(Params::default());
    assert!(e.union(&u).unwrap());
    assert_eq!(hex(&e.to_bytes()), "108b7f");
    // A sparse value with sparseon 0 is read, and written FULL.
    let h = Hll::from_bytes(&unhex("138b3f00a1")).unwrap();
    assert_eq!(h.info().kind, Kind::Full);
    // A FULL value that would be SPARSE is read, and written SPARSE.
    let mut full = unhex("148b7f");
    full.extend(vec![0u8; 1280]);
    full[3] = 0x08; // register 0 = 1
    assert_eq!(
        hex(&Hll::from_bytes(&full).unwrap().to_bytes()),
        "138b7f0001"
    );
}

#[test]
fn sparse_padding_is_not_an_entry() {
    // hll_add_agg over hashes 16, 17, 18 with (4, 2, 0, 1): three 6-bit
    // entries in 3 bytes, whose 6 padding bits could hold a fourth entry.
    // postgresql-hll 2.17 writes these bytes, then reads them back as four
    // entries, the last "register 0 = 0", and so reports 2.1365 instead of
    // 16 ln(16/13) = 3.3222 (its bug, not copied).
    let mut ours = Hll::new(Params::new(4, 2, 0, true).unwrap());
    for h in [16, 17, 18] {
        ours.add_raw(h);
    }
    assert_eq!(hex(&ours.to_bytes()), "132440045240");
    let back = Hll::from_bytes(&unhex("132440045240")).unwrap();
    assert_eq!(back, ours);
    assert_eq!(&back.registers().unwrap()[..4], &[1, 1, 1, 0]);
    assert!((back.cardinality().unwrap() - 16.0 * (16.0f64 / 13.0).ln()).abs() < 1e-12);
}

#[test]
fn info_reports_kind_count_and_length() {
    let mut h = Hll::new(Params::default());
    assert_eq!(h.info().kind.name(), "EMPTY");
    for v in 0..161 {
        h.add_raw(abacus_hll::hash_bigint(v, 0));
    }
    let info = h.info();
    assert_eq!(info.kind, Kind::Sparse);
    assert!(info.count > 150 && info.count <= 161);
    assert_eq!(info.serialized_len, 3 + (info.count * 16).div_ceil(8));
    let mut h = Hll::new(Params::default());
    h.add_raw(1);
    assert_eq!(
        (h.info().kind, h.info().count, h.info().serialized_len),
        (Kind::Explicit, 1, 11)
    );
}
