//! The codec against payloads real Redis 7.0.15 produced (`DUMP` after the commands named in
//! each case), and round trips of every encoding.

use super::*;

fn v(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// (commands that made the value, Redis 7.0.15's DUMP, the value).
fn redis_cases() -> Vec<(&'static str, Vec<u8>, RdbValue)> {
    vec![
        ("SET s bar", vec![0, 3, 98, 97, 114, 10, 0, 230, 190, 73, 96, 238, 102, 253, 23], RdbValue::String(b"bar".to_vec())),
        ("SET i 12345", vec![0, 193, 57, 48, 10, 0, 157, 148, 234, 39, 147, 252, 8, 185], RdbValue::String(b"12345".to_vec())),
        (
            "RPUSH l a 1 -1",
            vec![18, 1, 2, 15, 15, 0, 0, 0, 3, 0, 129, 97, 2, 1, 1, 223, 255, 2, 255, 10, 0, 215, 67, 219, 85, 171, 104, 70, 237],
            RdbValue::List(v(&["a", "1", "-1"])),
        ),
        (
            "SADD si 3 1 2",
            vec![11, 14, 2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 2, 0, 3, 0, 10, 0, 165, 2, 92, 226, 109, 110, 77, 27],
            RdbValue::Set(v(&["1", "2", "3"])),
        ),
        (
            "ZADD z 1.5 a 2 b",
            vec![17, 20, 20, 0, 0, 0, 4, 0, 129, 97, 2, 131, 49, 46, 53, 4, 129, 98, 2, 2, 1, 255, 10, 0, 250, 2, 180, 37, 175, 24, 135, 99],
            RdbValue::ZSet(vec![(b"a".to_vec(), 1.5), (b"b".to_vec(), 2.0)]),
        ),
        (
            "HSET h f v",
            vec![16, 13, 13, 0, 0, 0, 2, 0, 129, 102, 2, 129, 118, 2, 255, 10, 0, 32, 241, 61, 68, 35, 84, 8, 157],
            RdbValue::Hash(vec![(b"f".to_vec(), b"v".to_vec())]),
        ),
    ]
}

#[test]
fn writes_what_redis_writes() {
    for (what, bytes, value) in redis_cases() {
        assert_eq!(dump(&value, &Limits::default()), bytes, "{what}");
    }
}

#[test]
fn reads_what_redis_writes() {
    for (what, bytes, value) in redis_cases() {
        assert_eq!(restore(&bytes, &DecodeLimits::default()).unwrap(), value, "{what}");
    }
    // SET lz <50 a's>: LZF-compressed by Redis.
    let lz = [0, 195, 9, 50, 1, 97, 97, 224, 37, 0, 1, 97, 97, 10, 0, 9, 172, 72, 185, 171, 21, 251, 201];
    assert_eq!(restore(&lz, &DecodeLimits::default()).unwrap(), RdbValue::String(vec![b'a'; 50]));
}

#[test]
fn crc64_is_redis_jones() {
    // crc64.c's own test vector.
    assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
}

#[test]
fn footer_is_checked() {
    let good = dump(&RdbValue::String(b"hello".to_vec()), &Limits::default());
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 1;
        assert!(restore(&bad, &DecodeLimits::default()).is_err(), "byte {i}");
    }
    // A payload from a newer RDB version is refused even with a right checksum.
    let mut newer = good[..good.len() - 10].to_vec();
    newer.extend_from_slice(&12u16.to_le_bytes());
    let crc = crc64(&newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore(&newer, &DecodeLimits::default()), Err(Error::Footer));
    assert_eq!(restore(&[], &DecodeLimits::default()), Err(Error::Footer));
}

fn round_trip(value: &RdbValue, limits: &Limits) -> RdbValue {
    restore(&dump(value, limits), &DecodeLimits::default()).unwrap()
}

#[test]
fn every_written_encoding_round_trips() {
    let big: Vec<Vec<u8>> = (0..3000).map(|i| format!("element-{i}-{}", "x".repeat(i % 70)).into_bytes()).collect();
    let ints: Vec<Vec<u8>> = (0..600).map(|i: i64| (i * 7919 - 100_000).to_string().into_bytes()).collect();
    let long = "y".repeat(100_000).into_bytes();
    let lim = Limits::default();
    // Strings: int encodings, verbatim, LZF, incompressible, 11-char non-i32.
    for s in [&b"0"[..], b"-128", b"127", b"-32768", b"40000", b"-2147483648", b"12345678901", b"007", b"", &long] {
        assert_eq!(round_trip(&RdbValue::String(s.to_vec()), &lim), RdbValue::String(s.to_vec()));
    }
    // Lists: one node, many nodes, a huge element.
    for items in [v(&["a"]), big.clone(), vec![long.clone(), b"1".to_vec()]] {
        assert_eq!(round_trip(&RdbValue::List(items.clone()), &lim), RdbValue::List(items));
    }
    // Sets: intset (sorted on the way), hashtable (order kept).
    let small_ints = v(&["5", "-3", "100000000000"]);
    assert_eq!(round_trip(&RdbValue::Set(small_ints), &lim), RdbValue::Set(v(&["-3", "5", "100000000000"])));
    assert_eq!(round_trip(&RdbValue::Set(ints.clone()), &lim), RdbValue::Set(ints.clone()));
    assert_eq!(round_trip(&RdbValue::Set(big.clone()), &lim), RdbValue::Set(big.clone()));
    // Sorted sets: listpack (every score shape), skiplist with binary doubles.
    let scores = [0.0, -0.0, 1.0, -1.5, 1e300, -2.5e-300, f64::INFINITY, f64::NEG_INFINITY, 0.1, 123456789012345678.0, 9007199254740993.0];
    let small: Vec<(Vec<u8>, f64)> = scores.iter().enumerate().map(|(i, s)| (format!("m{i}").into_bytes(), *s)).collect();
    let mut by_score = small.clone();
    by_score.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let RdbValue::ZSet(back) = round_trip(&RdbValue::ZSet(small), &lim) else { panic!() };
    assert_eq!(back.len(), by_score.len());
    for (a, b) in back.iter().zip(&by_score) {
        assert_eq!(a.0, b.0);
        assert_eq!(a.1.to_bits(), b.1.to_bits(), "{:?}", a);
    }
    let large: Vec<(Vec<u8>, f64)> = big.iter().enumerate().map(|(i, m)| (m.clone(), i as f64 / 3.0)).collect();
    assert_eq!(round_trip(&RdbValue::ZSet(large.clone()), &lim), RdbValue::ZSet(large));
    // Hashes: listpack, hashtable.
    let hs: Vec<(Vec<u8>, Vec<u8>)> = big.iter().take(10).map(|m| (m[..8].to_vec(), b"1".to_vec())).collect();
    let hl: Vec<(Vec<u8>, Vec<u8>)> = big.iter().map(|m| (m.clone(), m.clone())).collect();
    for pairs in [hs, hl] {
        assert_eq!(round_trip(&RdbValue::Hash(pairs.clone()), &lim), RdbValue::Hash(pairs));
    }
    let ab = RdbValue::Abacus { kind: 1, data: vec![0, 1, 2, 255] };
    assert_eq!(round_trip(&ab, &lim), ab);
}

#[test]
fn encodings_follow_the_limits() {
    let lim = Limits::default();
    let t = |value: &RdbValue, lim: &Limits| dump(value, lim)[0];
    let ints: Vec<Vec<u8>> = (0..513).map(|i: i32| i.to_string().into_bytes()).collect();
    assert_eq!(t(&RdbValue::Set(ints[..512].to_vec()), &lim), types::SET_INTSET);
    assert_eq!(t(&RdbValue::Set(ints.clone()), &lim), types::SET);
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = ints.iter().map(|i| (i.clone(), i.clone())).collect();
    assert_eq!(t(&RdbValue::Hash(pairs[..128].to_vec()), &lim), types::HASH_LISTPACK);
    assert_eq!(t(&RdbValue::Hash(pairs[..129].to_vec()), &lim), types::HASH);
    assert_eq!(t(&RdbValue::Hash(vec![(b"f".to_vec(), vec![b'v'; 65])]), &lim), types::HASH);
    let z: Vec<(Vec<u8>, f64)> = ints.iter().map(|i| (i.clone(), 1.0)).collect();
    assert_eq!(t(&RdbValue::ZSet(z[..128].to_vec()), &lim), types::ZSET_LISTPACK);
    assert_eq!(t(&RdbValue::ZSet(z[..129].to_vec()), &lim), types::ZSET_2);
    let no_compress = Limits { compression: false, ..lim };
    assert_eq!(dump(&RdbValue::String(vec![b'a'; 50]), &no_compress)[1], 50);
    assert_eq!(dump(&RdbValue::String(vec![b'a'; 50]), &lim)[1], 0xC3);
}

#[test]
fn reads_old_encodings() {
    // RDB_TYPE_LIST, RDB_TYPE_ZSET with text scores, RDB_TYPE_SET_LISTPACK.
    let mut p = vec![types::LIST];
    write_length(&mut p, 2);
    write_string(&mut p, b"x", false);
    write_string(&mut p, b"7", false);
    let mut r = Reader::new(&p, DecodeLimits::default());
    let t = r.read_u8().unwrap();
    assert_eq!(r.read_object(t).unwrap(), RdbValue::List(v(&["x", "7"])));

    let mut p = vec![];
    write_length(&mut p, 3);
    write_string(&mut p, b"a", false);
    p.extend_from_slice(&[3, b'1', b'.', b'5']);
    write_string(&mut p, b"b", false);
    p.push(254);
    write_string(&mut p, b"c", false);
    p.push(255);
    let mut r = Reader::new(&p, DecodeLimits::default());
    assert_eq!(
        r.read_object(types::ZSET).unwrap(),
        RdbValue::ZSet(vec![(b"a".to_vec(), 1.5), (b"b".to_vec(), f64::INFINITY), (b"c".to_vec(), f64::NEG_INFINITY)])
    );

    let mut lp = listpack::LpWriter::new();
    lp.push(b"m");
    lp.push(b"12");
    let mut p = vec![];
    write_string(&mut p, &lp.finish(), false);
    let mut r = Reader::new(&p, DecodeLimits::default());
    assert_eq!(r.read_object(types::SET_LISTPACK).unwrap(), RdbValue::Set(v(&["m", "12"])));
}

#[test]
fn hostile_payloads_are_errors() {
    let lim = DecodeLimits { max_string_bytes: 1000, max_total_bytes: 3000 };
    // A count far beyond the payload.
    let mut p = vec![];
    write_length(&mut p, 1 << 40);
    assert!(Reader::new(&p, lim).read_object(types::SET).is_err());
    // A string over the limit, plain and LZF.
    let mut p = vec![];
    write_length(&mut p, 5000);
    p.extend(vec![0; 5000]);
    assert!(Reader::new(&p, lim).read_string().is_err());
    let mut p = vec![0xC3];
    write_length(&mut p, 3);
    write_length(&mut p, 1 << 30);
    p.extend_from_slice(&[0x00, b'a', 0xE0]);
    assert!(Reader::new(&p, lim).read_string().is_err());
    // Many strings each under the string limit, over the value's limit.
    let mut p = vec![];
    write_length(&mut p, 4);
    for _ in 0..4 {
        write_string(&mut p, &[b'a'; 900], true);
    }
    assert!(Reader::new(&p, lim).read_object(types::LIST).is_err());
    assert!(Reader::new(&p, DecodeLimits { max_total_bytes: 3600, ..lim }).read_object(types::LIST).is_ok());
    // Unknown types.
    assert_eq!(Reader::new(&[], lim).read_object(types::MODULE_2), Err(Error::Unsupported(7)));
    assert_eq!(Reader::new(&[], lim).read_object(99), Err(Error::Unsupported(99)));
    // An odd listpack for a hash.
    let mut lp = listpack::LpWriter::new();
    lp.push(b"f");
    let mut p = vec![];
    write_string(&mut p, &lp.finish(), false);
    assert!(Reader::new(&p, lim).read_object(types::HASH_LISTPACK).is_err());
    // Every truncation of a good payload's body.
    let body = &dump(&RdbValue::Hash(vec![(b"field".to_vec(), b"value".to_vec()); 200]), &Limits::default());
    let body = &body[..body.len() - 10];
    for cut in 1..body.len() {
        let mut r = Reader::new(&body[..cut], lim);
        let t = r.read_u8().unwrap();
        assert!(r.read_object(t).is_err(), "cut {cut}");
    }
}

#[test]
fn scores_print_as_redis_7_0() {
    let cases: [(f64, &str); 9] = [
        (1.5, "1.5"),
        (0.1, "0.10000000000000001"),
        (1e300, "1.0000000000000001e+300"),
        (-2.5e-300, "-2.5e-300"),
        (1.1, "1.1000000000000001"),
        (0.0001, "0.0001"),
        (4503599627370496.0, "4503599627370496"),
        (1e17, "1e+17"),
        (-3.0, "-3"),
    ];
    // Expected texts from Python's `"%.17g" % d` (C printf).
    for (d, text) in cases {
        assert_eq!(String::from_utf8(score_text(d)).unwrap(), text, "{d}");
    }
}

/// `XADD s 1-1 a 1 b x; XADD s 2-0 a 2 b y; XADD s 2-1 c 3; XDEL s 2-0; XGROUP CREATE s g 0;
/// XREADGROUP GROUP g c1 COUNT 1 STREAMS s >`, as Redis 7.0.15 dumped it (one node holding a
/// deleted entry, an entry with the master fields and one with its own).
const REDIS_STREAM: [u8; 170] = [
    19, 1, 16, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 63, 63, 0, 0, 0, 25, 0, 2, 1, 1, 1, 2, 1, 129, 97, 2, 129, 98, 2, 0, 1, 2,
    1, 0, 1, 0, 1, 1, 1, 129, 120, 2, 5, 1, 3, 1, 1, 1, 223, 255, 2, 2, 1, 129, 121, 2, 5, 1, 0, 1, 1, 1, 0, 1, 1, 1, 129, 99, 2, 3, 1,
    6, 1, 255, 2, 2, 1, 1, 1, 2, 0, 3, 1, 1, 103, 1, 1, 129, 255, 255, 255, 255, 255, 255, 255, 255, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0,
    0, 0, 0, 0, 0, 1, 155, 73, 110, 25, 162, 1, 0, 0, 1, 1, 2, 99, 49, 155, 73, 110, 25, 162, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0,
    0, 0, 0, 0, 0, 0, 1, 10, 0, 14, 136, 115, 207, 192, 144, 149, 162,
];

fn redis_stream_value() -> stream::RdbStream {
    let t = i64::from_le_bytes([155, 73, 110, 25, 162, 1, 0, 0]);
    let pair = |f: &str, v: &str| (f.as_bytes().to_vec(), v.as_bytes().to_vec());
    stream::RdbStream {
        entries: vec![((1, 1), vec![pair("a", "1"), pair("b", "x")]), ((2, 1), vec![pair("c", "3")])],
        last_id: (2, 1),
        first_id: (1, 1),
        max_deleted_id: (2, 0),
        entries_added: 3,
        groups: vec![stream::RdbGroup {
            name: b"g".to_vec(),
            last_id: (1, 1),
            entries_read: -1,
            pel: vec![((1, 1), t, 1)],
            consumers: vec![stream::RdbConsumer { name: b"c1".to_vec(), seen_time: t, pel: vec![(1, 1)] }],
        }],
    }
}

#[test]
fn reads_the_stream_redis_writes() {
    let got = restore(&REDIS_STREAM, &DecodeLimits::default()).unwrap();
    assert_eq!(got, RdbValue::Stream(Box::new(redis_stream_value())));
}

#[test]
fn streams_round_trip_over_several_nodes() {
    let mut s = redis_stream_value();
    // 250 more entries: three nodes of at most 100, fields changing every 7.
    for i in 0..250u64 {
        let f = if i % 7 == 0 { "other" } else { "a" };
        s.entries.push(((10 + i, i % 3), vec![(f.as_bytes().to_vec(), (i as i64 - 100).to_string().into_bytes())]));
    }
    s.last_id = (300, 0);
    let v = RdbValue::Stream(Box::new(s));
    assert_eq!(round_trip(&v, &Limits::default()), v);
    // A stream with no entries and no groups.
    let empty = RdbValue::Stream(Box::default());
    assert_eq!(round_trip(&empty, &Limits::default()), empty);
}

#[test]
fn truncated_or_damaged_streams_are_errors() {
    let body = &REDIS_STREAM[..REDIS_STREAM.len() - 10];
    for cut in 1..body.len() {
        let mut r = Reader::new(&body[..cut], DecodeLimits::default());
        let t = r.read_u8().unwrap();
        assert!(r.read_object(t).is_err() || !r.is_empty(), "cut at {cut}");
    }
    // Every single-byte change either fails or decodes to something (never a panic).
    for at in 1..body.len() {
        for x in [1u8, 0x80, 0xff] {
            let mut b = body.to_vec();
            b[at] ^= x;
            let mut r = Reader::new(&b, DecodeLimits::default());
            let t = r.read_u8().unwrap();
            let _ = r.read_object(t);
        }
    }
}
