//! Tests of eviction through the [`Db`] API: each policy keeps what it should keep.
//!
//! Eviction samples at random, so these tests assert outcomes whose failure probability under
//! a correct implementation is negligible (computed in each test), while a wrong policy (for
//! example random instead of LFU) fails them with near certainty.

use crate::evict::{EvictionPolicy, Tracking, LFU_INIT_VAL};
use crate::{Db, Value};

fn v(n: usize) -> Value {
    Value::Str(vec![b'x'; n].into())
}

fn key(i: usize) -> Vec<u8> {
    format!("k:{i}").into_bytes()
}

fn db_with(policy: EvictionPolicy) -> Db {
    let mut db = Db::new();
    db.set_tracking(Tracking {
        policy,
        ..Tracking::default()
    });
    db
}

/// A minute boundary at 6,000 s: every time in these tests stays inside minute 100 unless a
/// test moves on purpose, so LFU decay only happens where a test wants it.
const T0_MS: u64 = 6_000_000;

#[test]
fn lfu_counts_accesses_logarithmically_and_object_freq_decays() {
    let mut db = db_with(EvictionPolicy::AllKeysLfu);
    db.set(b"k", v(1), 0, T0_MS);
    assert_eq!(db.peek(b"k", T0_MS).unwrap().lfu_counter(), LFU_INIT_VAL);
    for _ in 0..100 {
        db.get(b"k", T0_MS + 1_000);
    }
    let after_100 = db
        .peek(b"k", T0_MS + 1_000)
        .unwrap()
        .lfu_freq(T0_MS + 1_000, 1);
    // Redis's table for lfu-log-factor 10: about 10 after 100 hits.
    assert!((8..=12).contains(&after_100), "{after_100}");
    // Three idle minutes lower it by three (decay time 1 minute); peeking does not store it.
    let e = db.peek(b"k", T0_MS + 180_000).unwrap();
    assert_eq!(e.lfu_freq(T0_MS + 180_000, 1), after_100 - 3);
    assert_eq!(e.lfu_counter(), after_100);
    // An access applies the decay and counts itself (certain at LFU_INIT_VAL + 1 or less).
    for _ in 0..20 {
        db.get(b"k", T0_MS + 3_600_000);
    }
    // From 0, the first six accesses are certain (up to LFU_INIT_VAL + 1), then p = 1/11.
    let e = db.peek(b"k", T0_MS + 3_600_000).unwrap();
    assert!((6..=9).contains(&e.lfu_counter()), "{}", e.lfu_counter());
    // Overwriting a key keeps its frequency and counts the write (Redis's dbOverwrite).
    let before = db.peek(b"k", T0_MS + 3_600_000).unwrap().lfu_counter();
    db.set(b"k", v(2), 0, T0_MS + 3_600_000);
    assert!(db.peek(b"k", T0_MS + 3_600_000).unwrap().lfu_counter() >= before);
    // ...but not across another policy: an LRU write stores the access time in the field
    // (shared, as Redis's `lru`), and a write back under LFU starts from LFU_INIT_VAL.
    db.set_tracking(Tracking::default());
    db.set(b"k", v(3), 0, T0_MS + 3_600_000);
    assert_eq!(db.peek(b"k", T0_MS + 3_605_000).unwrap().idle_s(T0_MS + 3_605_000), 5);
    db.remove(b"k", T0_MS + 3_600_000);
    db.set_tracking(Tracking { policy: EvictionPolicy::AllKeysLfu, ..Tracking::default() });
    db.set(b"k", v(3), 0, T0_MS + 3_600_000);
    assert_eq!(db.peek(b"k", T0_MS + 3_600_000).unwrap().lfu_counter(), LFU_INIT_VAL);
}

/// Hot keys are read often and then many cold keys are written after them (so the hot keys
/// are the least *recently* used): LFU must keep every hot key while evicting most cold ones.
/// A hot key is evicted only if all 5 samples are hot keys, at most (20/1020)^5 = 3e-9 per
/// eviction (the hot share is largest at the end), so under 1e-5 per run. Under LRU or random
/// eviction most hot keys go.
fn hot_keys_survive(policy: EvictionPolicy) -> usize {
    let mut db = db_with(policy);
    let hot = 20;
    for i in 0..hot {
        db.set(&key(i), v(8), 0, T0_MS);
    }
    for _ in 0..40 {
        for i in 0..hot {
            assert!(db.get(&key(i), T0_MS + 1_000).is_some());
        }
    }
    for i in hot..hot + 3_000 {
        db.set(&key(i), v(8), 0, T0_MS + 30_000);
    }
    let mut evicted = Vec::new();
    for _ in 0..2_000 {
        let (k, freed) = db.evict_one(policy, 5).expect("a candidate");
        assert!(freed > k.len());
        evicted.push(k);
    }
    assert_eq!(db.len(), hot + 3_000 - 2_000);
    assert_eq!(db.evicted_keys_total, 2_000);
    for k in &evicted {
        assert!(
            db.get_shared(k, T0_MS + 30_000).is_none(),
            "evicted key still present"
        );
    }
    (0..hot)
        .filter(|&i| db.get_shared(&key(i), T0_MS + 30_000).is_some())
        .count()
}

#[test]
fn lfu_keeps_frequently_accessed_keys_that_lru_evicts() {
    assert_eq!(hot_keys_survive(EvictionPolicy::AllKeysLfu), 20);
    // The same workload under LRU loses the hot keys first: this is what makes the LFU
    // assertion meaningful.
    assert!(hot_keys_survive(EvictionPolicy::AllKeysLru) < 5);
}

#[test]
fn lfu_decay_lets_formerly_hot_keys_go() {
    // Hot keys whose accesses stopped an hour ago have decayed to 0, below fresh keys (5).
    let mut db = db_with(EvictionPolicy::AllKeysLfu);
    for i in 0..20 {
        db.set(&key(i), v(8), 0, T0_MS);
        for _ in 0..100 {
            db.get(&key(i), T0_MS);
        }
    }
    let later = T0_MS + 3_600_000;
    for i in 20..1_020 {
        db.set(&key(i), v(8), 0, later);
    }
    for _ in 0..500 {
        db.evict_one(EvictionPolicy::AllKeysLfu, 5).unwrap();
    }
    // A stale key is evicted whenever it is sampled, so it survives the 500 evictions (1020
    // keys down to 520) with probability about (520/1020)^5 = 3.4%: 0.7 of 20 on average.
    // Without decay they would outrank the fresh keys and all 20 would stay.
    let stale_left = (0..20)
        .filter(|&i| db.get_shared(&key(i), later).is_some())
        .count();
    assert!(stale_left <= 8, "{stale_left}");
}

#[test]
fn volatile_lfu_only_evicts_keys_with_an_expiry() {
    let mut db = db_with(EvictionPolicy::VolatileLfu);
    for i in 0..100 {
        let at = if i % 2 == 0 { 0 } else { T0_MS + 1_000_000 };
        db.set(&key(i), v(8), at, T0_MS);
    }
    let mut n = 0;
    while let Some((k, _)) = db.evict_one(EvictionPolicy::VolatileLfu, 5) {
        let i: usize = std::str::from_utf8(&k[2..]).unwrap().parse().unwrap();
        assert_eq!(i % 2, 1, "a persistent key was evicted");
        n += 1;
    }
    assert_eq!((n, db.len(), db.volatile_len()), (50, 50, 0));
}

/// Writes `written` keys in order into a database that is kept at `kept` keys by FIFO
/// eviction; returns how many of the newest `kept / 2` and of the keys older than `2 * kept`
/// survive.
fn fifo_stream(policy: EvictionPolicy, kept: usize, written: usize) -> (usize, usize) {
    let mut db = db_with(policy);
    for i in 0..written {
        db.set(&key(i), v(8), 0, T0_MS);
        // Reads must not matter to FIFO: read the oldest live keys all the time.
        db.get(&key(i.saturating_sub(kept / 2)), T0_MS);
        if db.len() > kept {
            db.evict_one(policy, 5).unwrap();
        }
    }
    assert_eq!(db.len(), kept);
    let newest = (written - kept / 2..written)
        .filter(|&i| db.get_shared(&key(i), T0_MS).is_some())
        .count();
    let old = (0..written - 2 * kept)
        .filter(|&i| db.get_shared(&key(i), T0_MS).is_some())
        .count();
    (newest, old)
}

#[test]
fn fifo_evicts_the_oldest_insertions_first() {
    // Simulated for sample size 5: about 99% of the newest half survive and nothing older
    // than twice the kept size does. Random eviction keeps about 79% of the newest half and
    // about 12% (e^-2 .. e^-8 of each key) of the older ones.
    let (newest, old) = fifo_stream(EvictionPolicy::AllKeysFifo, 1_000, 8_000);
    assert!(newest >= 475, "{newest}");
    assert!(old <= 10, "{old}");
    let (newest, old) = fifo_stream(EvictionPolicy::AllKeysRandom, 1_000, 8_000);
    assert!(
        newest < 475 || old > 10,
        "random eviction is indistinguishable from FIFO: {newest} {old}"
    );
}

#[test]
fn fifo_ranks_keys_written_before_the_switch_oldest() {
    // Keys written under LRU carry a Unix time in the clock; after switching to FIFO they are
    // older than every FIFO insertion, so they go first.
    let mut db = db_with(EvictionPolicy::AllKeysLru);
    for i in 0..100 {
        db.set(&key(i), v(8), 0, T0_MS);
    }
    db.set_tracking(Tracking {
        policy: EvictionPolicy::AllKeysFifo,
        ..Tracking::default()
    });
    for i in 100..1_100 {
        db.set(&key(i), v(8), 0, T0_MS);
    }
    for _ in 0..600 {
        db.evict_one(EvictionPolicy::AllKeysFifo, 5).unwrap();
    }
    // Simulated: about 2 of the 100 remain (at most 6 in 200 runs); if they ranked newest
    // all 100 would, and random eviction would keep about 45.
    let pre = (0..100)
        .filter(|&i| db.get_shared(&key(i), T0_MS).is_some())
        .count();
    assert!(pre <= 15, "{pre}");
}

#[test]
fn noeviction_and_empty_databases_evict_nothing() {
    let mut db = db_with(EvictionPolicy::NoEviction);
    db.set(b"a", v(1), 0, T0_MS);
    assert_eq!(db.evict_one(EvictionPolicy::NoEviction, 5), None);
    let mut empty = Db::new();
    for &p in EvictionPolicy::ALL {
        assert_eq!(empty.evict_one(p, 5), None, "{p:?}");
    }
    assert_eq!(db.len(), 1);
}

mod model {
    //! Property test: random operation sequences against a reference model.
    //!
    //! The model is a `BTreeMap` of every entry the table holds, expired-but-unreclaimed ones
    //! included (no active expiry here, so reclamation is deterministic: a read of an
    //! expired key or a delete). Keys come from a range of 4,096 and bulk inserts add up to
    //! 600 at once, so sequences cross several table growth steps and shrink again through
    //! evictions.

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    enum Op {
        /// key, value byte, ttl in ms (0 = none)
        Set(u16, u8, u64),
        /// first key, count, ttl for all of them
        Bulk(u16, u16, u64),
        Del(u16),
        Expire(u16, u64),
        Persist(u16),
        Get(u16),
        /// count, samples
        Evict(u16, u8),
        Policy(usize),
        Tick(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let k = 0u16..4096;
        let ttl = prop_oneof![3 => Just(0u64), 2 => 1u64..100_000];
        prop_oneof![
            6 => (k.clone(), any::<u8>(), ttl.clone()).prop_map(|(k, v, t)| Op::Set(k, v, t)),
            2 => (k.clone(), 1u16..600, ttl).prop_map(|(k, n, t)| Op::Bulk(k, n, t)),
            2 => k.clone().prop_map(Op::Del),
            2 => (k.clone(), 1u64..100_000).prop_map(|(k, t)| Op::Expire(k, t)),
            1 => k.clone().prop_map(Op::Persist),
            4 => k.prop_map(Op::Get),
            3 => (1u16..300, 1u8..16).prop_map(|(n, s)| Op::Evict(n, s)),
            1 => (0..EvictionPolicy::ALL.len()).prop_map(Op::Policy),
            2 => (1u64..200_000).prop_map(Op::Tick),
        ]
    }

    fn kb(k: u16) -> [u8; 2] {
        k.to_be_bytes()
    }

    /// (value byte, absolute expiry or 0)
    type Model = BTreeMap<u16, (u8, u64)>;

    fn live(m: &Model, k: u16, now: u64) -> Option<u8> {
        m.get(&k)
            .filter(|&&(_, at)| at == 0 || at > now)
            .map(|&(v, _)| v)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn eviction_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
            let mut db = Db::new();
            let mut m = Model::new();
            let mut policy = EvictionPolicy::NoEviction;
            let mut now = 1_700_000_000_000u64;
            let (mut evicted_total, mut expired_total) = (0u64, 0u64);
            for op in ops {
                match op {
                    Op::Set(k, v, t) => {
                        let at = if t == 0 { 0 } else { now + t };
                        db.set(&kb(k), Value::Str(vec![v].into()), at, now);
                        m.insert(k, (v, at));
                    }
                    Op::Bulk(k, n, t) => {
                        let at = if t == 0 { 0 } else { now + t };
                        for i in 0..n {
                            let k = k.wrapping_add(i) % 4096;
                            db.set(&kb(k), Value::Str(vec![k as u8].into()), at, now);
                            m.insert(k, (k as u8, at));
                        }
                    }
                    Op::Del(k) => {
                        let was_live = live(&m, k, now).is_some();
                        if m.remove(&k).is_some() && !was_live {
                            expired_total += 1;
                        }
                        prop_assert_eq!(db.remove(&kb(k), now), was_live);
                    }
                    Op::Expire(k, t) => {
                        if live(&m, k, now).is_some() {
                            prop_assert!(db.set_expire(&kb(k), now + t));
                            m.get_mut(&k).unwrap().1 = now + t;
                        }
                    }
                    Op::Persist(k) => {
                        if live(&m, k, now).is_some() {
                            prop_assert!(db.set_expire(&kb(k), 0));
                            m.get_mut(&k).unwrap().1 = 0;
                        }
                    }
                    Op::Get(k) => {
                        let want = live(&m, k, now);
                        if want.is_none() && m.remove(&k).is_some() {
                            expired_total += 1;
                        }
                        let got = db.get(&kb(k), now).map(|e| match e.value() {
                            crate::ValueRef::Str(s) => s[0],
                            _ => unreachable!("only strings are stored"),
                        });
                        prop_assert_eq!(got, want);
                    }
                    Op::Evict(n, samples) => {
                        for _ in 0..n {
                            let candidates = m.values().filter(|&&(_, at)| !policy.volatile_only() || at != 0).count();
                            match db.evict_one(policy, samples as usize) {
                                None => prop_assert!(
                                    candidates == 0 || policy == EvictionPolicy::NoEviction,
                                    "no eviction with {} candidates under {:?}", candidates, policy
                                ),
                                Some((key, freed)) => {
                                    prop_assert!(policy != EvictionPolicy::NoEviction);
                                    let k = u16::from_be_bytes([key[0], key[1]]);
                                    let (_, at) = m.remove(&k).expect("the evicted key was in the database");
                                    prop_assert!(!policy.volatile_only() || at != 0, "{:?} evicted persistent key {}", policy, k);
                                    prop_assert!(freed >= key.len());
                                    prop_assert!(db.get_shared(&key, 0).is_none(), "evicted key {} still present", k);
                                    evicted_total += 1;
                                }
                            }
                        }
                    }
                    Op::Policy(i) => {
                        policy = EvictionPolicy::ALL[i];
                        db.set_tracking(Tracking { policy, ..Tracking::default() });
                    }
                    Op::Tick(d) => now += d,
                }
                prop_assert_eq!(db.len(), m.len());
                prop_assert_eq!(db.volatile_len(), m.values().filter(|&&(_, at)| at != 0).count());
                prop_assert_eq!(db.evicted_keys_total, evicted_total);
                prop_assert_eq!(db.expired_keys_total, expired_total);
            }
            // Every key of the model is there with its value, and nothing else is.
            for (&k, &(v, at)) in &m {
                let e = db.get_shared(&kb(k), 0).expect("model key present");
                prop_assert_eq!(e.value(), crate::ValueRef::Str(&[v]));
                prop_assert_eq!(db.expire_at(&kb(k)), at);
            }
            let mut seen = 0;
            let mut cursor = 0;
            loop {
                cursor = db.scan(cursor, 64, 0, |k, _| {
                    assert!(m.contains_key(&u16::from_be_bytes([k[0], k[1]])));
                    seen += 1;
                }).0;
                if cursor == 0 { break; }
            }
            prop_assert_eq!(seen, m.len());
        }
    }
}

#[test]
fn no_touch_lookups_leave_access_time_and_counter_alone() {
    // CLIENT NO-TOUCH: with the thread's flag set, reads and writes count hits but update
    // neither the LRU time nor the LFU counter; clearing it restores both.
    let mut db = db_with(EvictionPolicy::AllKeysLfu);
    db.set(b"k", v(1), 0, T0_MS);
    assert!(!crate::set_no_touch(true));
    for _ in 0..10 {
        db.get(b"k", T0_MS + 60_000);
    }
    db.get_mut(b"k", T0_MS + 60_000);
    let e = db.peek(b"k", T0_MS + 60_000).unwrap();
    // Neither the counter nor its minute (one minute on, it reads one decay period lower).
    assert_eq!(e.lfu_counter(), LFU_INIT_VAL);
    assert_eq!(e.lfu_freq(T0_MS + 60_000, 1), LFU_INIT_VAL - 1);
    assert!(crate::set_no_touch(false));
    db.get(b"k", T0_MS + 60_000);
    let e = db.peek(b"k", T0_MS + 60_000).unwrap();
    assert_eq!(e.lfu_freq(T0_MS + 60_000, 1), e.lfu_counter(), "touched this minute");
    // Under LRU the same field holds the access time.
    db.set_tracking(Tracking { policy: EvictionPolicy::AllKeysLru, ..Tracking::default() });
    db.get(b"k", T0_MS + 60_000);
    assert!(!crate::set_no_touch(true));
    db.get(b"k", T0_MS + 90_000);
    assert!(crate::set_no_touch(false));
    assert_eq!(db.peek(b"k", T0_MS + 90_000).unwrap().idle_s(T0_MS + 90_000), 30);
    db.get(b"k", T0_MS + 95_000);
    assert_eq!(db.peek(b"k", T0_MS + 99_000).unwrap().idle_s(T0_MS + 99_000), 4);
}

#[test]
fn loaded_entries_start_fresh_under_the_policy_in_force() {
    // A snapshot's entry carries no access field: it reads as a key created at load time
    // (Redis's loaded objects), whatever date the 24-bit clock wraps at.
    for day in [0u64, 100, 150, 193] {
        let now = T0_MS + day * 86_400_000;
        let mut lru = db_with(EvictionPolicy::AllKeysLru);
        lru.insert_loaded(b"k", crate::Detached { entry: crate::Entry::new(v(1)), expire_at_ms: 0 }, now);
        assert_eq!(lru.peek(b"k", now + 7_000).unwrap().idle_s(now + 7_000), 7, "day {day}");
        let mut lfu = db_with(EvictionPolicy::AllKeysLfu);
        lfu.insert_loaded(b"k", crate::Detached { entry: crate::Entry::new(v(1)), expire_at_ms: 0 }, now);
        assert_eq!(lfu.peek(b"k", now).unwrap().lfu_freq(now, 1), LFU_INIT_VAL, "day {day}");
    }
}
