//! Unit tests of the public API: hash vectors, the exact empty value,
//! sparse opcode layout, promotion and header validation.

use super::*;

#[test]
fn murmurhash64a_vectors() {
    // Computed with Redis's C MurmurHash64A.
    let cases: [(&[u8], u64, u64); 10] = [
        (b"", 0xd8dfea6585bc9732, 0x0000000000000000),
        (b"a", 0x53d2470a9b43b1a7, 0x071717d2d36b6b11),
        (b"ab", 0x0eaed676437142cf, 0x62be85b2fe53d1f8),
        (b"abc", 0x77ec90aeb374e502, 0x9cc9c33498a95efb),
        (b"hello", 0x0f656f01eecfe400, 0x1e68d17c457bf117),
        (b"1234567", 0x85563db163632857, 0xae9ebd2095279402),
        (b"12345678", 0x95ebb86389132953, 0x758f67d162b2d202),
        (b"123456789", 0x217532cb09f2a44d, 0x4977490251674330),
        (
            b"The quick brown fox jumps over the lazy dog",
            0x51606c5c5b561ace,
            0x5589ca33042a861b,
        ),
        (b"\xff\x00\x80", 0xfe93fc73c4134391, 0xca9776a104267ec0),
    ];
    for (key, with_seed, seed0) in cases {
        assert_eq!(murmurhash64a(key, HLL_HASH_SEED), with_seed, "{key:?}");
        assert_eq!(murmurhash64a(key, 0), seed0, "{key:?}");
    }
}

#[test]
fn empty_value_matches_create_hll_object() {
    let h = RedisHll::new();
    let mut expected = b"HYLL\x01\x00\x00\x00".to_vec();
    expected.extend_from_slice(&[0; 8]); // cache: 0, valid
    expected.extend_from_slice(&[0x7f, 0xff]); // XZERO:16384
    assert_eq!(h.as_bytes(), &expected[..]);
    assert_eq!(h.cached_count(), Some(0));
    let mut h = h;
    assert_eq!(h.count(), Ok(0));
    h.invalidate_cache();
    assert_eq!(h.as_bytes()[15], 0x80);
    assert_eq!(h.count(), Ok(0));
    assert_eq!(h.as_bytes(), &expected[..]);
}

#[test]
fn single_add_layout() {
    let mut h = RedisHll::new();
    let (index, count) = murmur::pat_len(b"a");
    assert!(h.add(b"a", DEFAULT_SPARSE_MAX_BYTES).unwrap());
    assert!(!h.add(b"a", DEFAULT_SPARSE_MAX_BYTES).unwrap());
    assert_eq!(h.cached_count(), None);
    // XZERO:index, VAL:count,1, XZERO:rest (or ZERO for short runs).
    let mut expected = Vec::new();
    let mut push = |len: usize| {
        if len > 64 {
            expected.push(0x40 | ((len - 1) >> 8) as u8);
            expected.push(((len - 1) & 0xff) as u8);
        } else if len > 0 {
            expected.push((len - 1) as u8);
        }
    };
    push(index);
    let mut tail = Vec::new();
    std::mem::swap(&mut tail, &mut expected);
    tail.push(0x80 | ((count - 1) << 2));
    let mut rest = Vec::new();
    {
        let len = HLL_REGISTERS - index - 1;
        if len > 64 {
            rest.push(0x40 | ((len - 1) >> 8) as u8);
            rest.push(((len - 1) & 0xff) as u8);
        } else if len > 0 {
            rest.push((len - 1) as u8);
        }
    }
    tail.extend(rest);
    assert_eq!(&h.as_bytes()[HDR_SIZE..], &tail[..]);
    assert_eq!(h.count(), Ok(1));
    assert_eq!(h.cached_count(), Some(1));
}

#[test]
fn promotion_at_sparse_max_bytes() {
    let mut h = RedisHll::new();
    let mut i = 0u32;
    while !h.is_dense() {
        let before = h.as_bytes().len();
        h.add(format!("el:{i}").as_bytes(), 300).unwrap();
        if !h.is_dense() {
            assert!(h.as_bytes().len() <= 300);
            assert!(h.as_bytes().len() <= before + 3);
        }
        i += 1;
        assert!(i < 10_000);
    }
    assert_eq!(h.as_bytes().len(), DENSE_SIZE);
    assert!(i > 50, "promoted after {i} elements");
    let approx = h.count().unwrap() as f64;
    assert!((approx - f64::from(i)).abs() / f64::from(i) < 0.1);
    // The registers survived the conversion.
    let mut sparse = RedisHll::new();
    for j in 0..i {
        sparse
            .add(format!("el:{j}").as_bytes(), usize::MAX)
            .unwrap();
    }
    assert!(!sparse.is_dense());
    let (mut a, mut b) = ([0u8; HLL_REGISTERS], [0u8; HLL_REGISTERS]);
    h.merge_into(&mut a).unwrap();
    sparse.merge_into(&mut b).unwrap();
    assert_eq!(a, b);
    assert_eq!(sparse.count(), h.count());
    sparse.to_dense().unwrap();
    assert_eq!(&sparse.as_bytes()[HDR_SIZE..], &h.as_bytes()[HDR_SIZE..]);
}

#[test]
fn sparse_and_dense_agree_on_counts() {
    for n in [0u32, 1, 10, 100, 1000, 5000] {
        let mut s = RedisHll::new();
        let mut d = RedisHll::new();
        d.to_dense().unwrap();
        for i in 0..n {
            let e = i.to_le_bytes();
            assert_eq!(s.add(&e, usize::MAX), d.add(&e, 0));
        }
        assert_eq!(s.count(), d.count(), "n={n}");
        assert_eq!(RedisHll::count_union(&[&s, &d]), d.count());
    }
}

#[test]
fn header_validation() {
    let good = RedisHll::new().into_bytes();
    assert!(RedisHll::from_bytes(good.clone()).is_ok());
    assert_eq!(
        RedisHll::from_bytes(good[..15].to_vec()),
        Err(HllError::NotHll)
    );
    let mut bad = good.clone();
    bad[0] = b'h';
    assert_eq!(RedisHll::from_bytes(bad), Err(HllError::NotHll));
    let mut bad = good.clone();
    bad[4] = 2;
    assert_eq!(RedisHll::from_bytes(bad), Err(HllError::NotHll));
    let mut dense = RedisHll::new();
    dense.to_dense().unwrap();
    let dense = dense.into_bytes();
    assert_eq!(dense.len(), DENSE_SIZE);
    assert!(RedisHll::from_bytes(dense.clone()).is_ok());
    assert_eq!(
        RedisHll::from_bytes(dense[..DENSE_SIZE - 1].to_vec()),
        Err(HllError::NotHll)
    );
    // A header-only sparse value is accepted but corrupt when used.
    let mut h = RedisHll::from_bytes(good[..16].to_vec()).unwrap();
    assert_eq!(h.validate(), Err(HllError::Corrupted));
    assert_eq!(h.count(), Ok(0)); // valid cache, as in Redis
    h.invalidate_cache();
    assert_eq!(h.count(), Err(HllError::Corrupted));
    assert_eq!(h.add(b"x", 3000), Err(HllError::Corrupted));
}

#[test]
fn pfmerge_dense_if_any_dense() {
    let mut a = RedisHll::new();
    let mut b = RedisHll::new();
    for i in 0..100u32 {
        a.add(&i.to_be_bytes(), 3000).unwrap();
        b.add(&(i + 50).to_be_bytes(), 3000).unwrap();
    }
    let m = RedisHll::pfmerge(None, &[&a, &b], 3000).unwrap();
    assert!(!m.is_dense());
    b.to_dense().unwrap();
    let mut md = RedisHll::pfmerge(None, &[&a, &b], 3000).unwrap();
    assert!(md.is_dense());
    let mut m = m;
    assert_eq!(m.count(), md.count());
    assert_eq!(RedisHll::count_union(&[&a, &b]), md.count());
}

#[test]
fn from_vec_gives_the_bytes_back_on_error() {
    let not_hll = b"hello, not a HyperLogLog".to_vec();
    let (e, back) = RedisHll::from_vec(not_hll.clone()).unwrap_err();
    assert_eq!(e, HllError::NotHll);
    assert_eq!(back, not_hll);
    let good = RedisHll::new().into_bytes();
    assert_eq!(RedisHll::from_vec(good.clone()).unwrap().into_bytes(), good);
}

#[test]
fn add_all_matches_one_add_per_element() {
    // Batches of every size through sparse, the promotion and dense, with repeats: the bytes
    // and the "changed" flag must be what adding one element at a time gives.
    let elements: Vec<Vec<u8>> = (0..6000u32).map(|i| format!("el:{}", i % 4500).into_bytes()).collect();
    let mut one = RedisHll::new();
    let mut all = RedisHll::new();
    let mut start = 0;
    let mut size = 1;
    while start < elements.len() {
        let batch = &elements[start..(start + size).min(elements.len())];
        let mut want = false;
        for e in batch {
            want |= one.add(e, DEFAULT_SPARSE_MAX_BYTES).unwrap();
        }
        let got = all.add_all(batch.iter().map(|e| &e[..]), DEFAULT_SPARSE_MAX_BYTES).unwrap();
        assert_eq!(got, want, "batch at {start}");
        assert_eq!(all.as_bytes(), one.as_bytes(), "batch at {start}");
        if start % 3 == 0 {
            // A valid cache in between, so that invalidation is checked too.
            assert_eq!(all.count(), one.count());
        }
        start += size;
        size = size % 37 + 1;
    }
    assert!(all.is_dense());
}

#[test]
fn add_all_on_a_corrupt_body_keeps_earlier_elements() {
    // XZERO:100 with a valid cache: elements in registers 0..100 are added, the first one
    // beyond is an error, exactly as with one add per element.
    let mut value = b"HYLL\x01\x00\x00\x00".to_vec();
    value.extend_from_slice(&[0; 8]);
    value.extend_from_slice(&[0x40, 99]);
    let elements: Vec<Vec<u8>> = (0..5000u32).map(|i| i.to_string().into_bytes()).collect();
    let low = elements.iter().find(|e| murmur::pat_len(e).0 < 100).unwrap();
    let high = elements.iter().find(|e| murmur::pat_len(e).0 >= 100).unwrap();
    let mut one = RedisHll::from_bytes(value.clone()).unwrap();
    assert_eq!(one.add(low, DEFAULT_SPARSE_MAX_BYTES), Ok(true));
    assert_eq!(one.add(high, DEFAULT_SPARSE_MAX_BYTES), Err(HllError::Corrupted));
    let mut all = RedisHll::from_bytes(value).unwrap();
    let batch = [&low[..], &high[..], &low[..]];
    assert_eq!(all.add_all(batch, DEFAULT_SPARSE_MAX_BYTES), Err(HllError::Corrupted));
    assert_eq!(all.as_bytes(), one.as_bytes());
    assert_eq!(all.cached_count(), None);
}

#[test]
fn pfdebug_views() {
    let mut h = RedisHll::new();
    assert_eq!(h.describe_sparse().as_deref(), Some("Z:16384"));
    assert_eq!(h.dense_registers(), None);
    assert!(h.add(b"a", DEFAULT_SPARSE_MAX_BYTES).unwrap());
    let (index, count) = murmur::pat_len(b"a");
    let text = h.describe_sparse().unwrap();
    let expected = format!("Z:{index} v:{count},1 Z:{}", HLL_REGISTERS - index - 1);
    assert_eq!(text, expected.replace("Z:0 ", ""));
    h.to_dense().unwrap();
    assert_eq!(h.describe_sparse(), None);
    let regs = h.dense_registers().unwrap();
    assert_eq!(regs.len(), HLL_REGISTERS);
    assert_eq!(regs[index], count);
    assert_eq!(regs.iter().filter(|&&r| r != 0).count(), 1);
}
