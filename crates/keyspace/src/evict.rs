//! Eviction policies and the per-entry access metadata they read.
//!
//! Design (after Redis's `evict.c`): eviction is approximated by sampling. Each eviction draws
//! `maxmemory-samples` random keys (keys with an expiry, for the volatile policies) and removes
//! the best candidate by the policy's score; nothing is kept in a global order, so tracking an
//! access costs a few stores in the entry and no pointer chasing.
//!
//! The metadata lives in 3 bytes of the entry, Redis's 24-bit `lru` field (one field shared by
//! the policies: issue 27 took the slot from 40 to 37 bytes, and the 32-bit clock and separate
//! LFU byte were two of those bytes), read according to the policy in force:
//! - LRU (and the policies that ignore access: random, ttl, noeviction): the last access time
//!   in Unix seconds modulo 2^24 ([`lru_clock`]; OBJECT IDLETIME).
//! - LFU: Redis's layout, the last decrement time in minutes modulo 2^16 above the 8-bit
//!   logarithmic counter of [`lfu_log_incr`] / [`lfu_decayed`] ([`lfu_pack`]).
//! - FIFO: the database's insertion sequence number modulo 2^24, never touched by accesses.
//!   Ages are compared with wrapping arithmetic relative to the database's current sequence,
//!   so order is exact until 2^24 (16.7M) insertions separate two keys.
//!
//! Times are compared by [`clock_elapsed`]: the wrapping difference, where one over half the
//! clock's range reads as a clock that went backwards (0), since the server's wall-clock
//! times may step back a little between connections. So an LRU idle time is exact up to 97
//! days and an LFU decay up to 22.7 days (at the default decay time the counter is 0 after
//! 255 minutes at most; a key untouched for 22.7-45.5 days reads as decayed from its stored
//! counter for the minutes past a multiple of 45.5 days, as in Redis after 45.5 days).
//!
//! Switching policies at run time reinterprets the field, as in Redis ("LRU and LFU data will
//! take some time to adjust"): an LRU time read as LFU is an arbitrary counter and time, an
//! LFU field read as LRU an arbitrary time, and keys written under LRU/LFU and compared with
//! FIFO stamps are ordered arbitrarily until rewritten.

/// Which keys `maxmemory` may evict (Redis's policy names, plus `allkeys-fifo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionPolicy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    AllKeysFifo,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl EvictionPolicy {
    pub const NAMES: &'static [&'static str] = &[
        "noeviction",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "allkeys-fifo",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ];

    pub const ALL: &'static [EvictionPolicy] = &[
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::AllKeysFifo,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
    ];

    pub fn from_name(name: &str) -> Option<EvictionPolicy> {
        EvictionPolicy::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| EvictionPolicy::ALL[i])
    }

    pub fn name(self) -> &'static str {
        EvictionPolicy::NAMES[EvictionPolicy::ALL
            .iter()
            .position(|p| *p == self)
            .unwrap_or(0)]
    }

    /// Volatile policies only ever evict keys that have an expiry.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }

    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu
        )
    }

    pub fn is_fifo(self) -> bool {
        self == EvictionPolicy::AllKeysFifo
    }
}

/// How lookups and inserts maintain the access metadata: the policy in force and Redis's two
/// LFU tunables. The server hands the current values to each database before it runs a
/// command ([`crate::Db::set_tracking`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tracking {
    pub policy: EvictionPolicy,
    /// `lfu-log-factor`: how many hits it takes to raise the counter (Redis default 10: about
    /// 100 hits reach 10, a million reach 255).
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`: minutes of no access that lower the counter by one (0: never decay).
    pub lfu_decay_time_min: u32,
}

impl Default for Tracking {
    fn default() -> Tracking {
        Tracking {
            policy: EvictionPolicy::NoEviction,
            lfu_log_factor: LFU_LOG_FACTOR_DEFAULT,
            lfu_decay_time_min: LFU_DECAY_TIME_MIN_DEFAULT,
        }
    }
}

/// Redis's LFU_INIT_VAL: new keys start here so that they are not evicted before they had a
/// chance to be accessed.
pub const LFU_INIT_VAL: u8 = 5;
pub const LFU_LOG_FACTOR_DEFAULT: u32 = 10;
pub const LFU_DECAY_TIME_MIN_DEFAULT: u32 = 1;

/// Mask of the 24-bit access field (Redis's LRU_CLOCK_MAX).
pub const CLOCK_MASK: u32 = (1 << 24) - 1;
/// Mask of LFU's 16-bit time in minutes.
pub const LFU_MINUTES_MASK: u32 = (1 << 16) - 1;

/// The LRU clock: Unix seconds modulo 2^24 (Redis's LRU_CLOCK at its 1 s resolution).
#[inline]
pub fn lru_clock(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32 & CLOCK_MASK
}

/// LFU's time: Unix minutes modulo 2^16 (Redis's LFUGetTimeInMinutes).
#[inline]
pub fn lfu_minutes(now_ms: u64) -> u32 {
    (now_ms / 60_000) as u32 & LFU_MINUTES_MASK
}

/// LFU's access field: the time in minutes above the counter (Redis's `lru` under LFU).
#[inline]
pub fn lfu_pack(minutes: u32, counter: u8) -> u32 {
    (minutes & LFU_MINUTES_MASK) << 8 | counter as u32
}

/// `now - then` on a clock that wraps at `mask + 1`; a difference over half the range reads
/// as a clock that went backwards, 0 (see the module documentation).
#[inline]
pub fn clock_elapsed(now: u32, then: u32, mask: u32) -> u32 {
    let d = now.wrapping_sub(then) & mask;
    if d > mask / 2 {
        0
    } else {
        d
    }
}

/// The counter after decay: one less per `decay_time_min` whole minutes elapsed between the
/// last decrement time `ldt_min` and `now_min` (both [`lfu_minutes`]). Redis's
/// `LFUDecrAndReturn`.
pub fn lfu_decayed(counter: u8, ldt_min: u32, now_min: u32, decay_time_min: u32) -> u8 {
    if decay_time_min == 0 {
        return counter;
    }
    let elapsed_min = clock_elapsed(now_min, ldt_min, LFU_MINUTES_MASK);
    let periods = elapsed_min / decay_time_min;
    counter.saturating_sub(periods.min(255) as u8)
}

/// One access: the counter grows with probability
/// `1 / ((counter - LFU_INIT_VAL) * log_factor + 1)`, so it grows logarithmically with the
/// number of accesses and saturates at 255.
/// `uniform` is a random draw in [0, 1). Redis's `LFULogIncr`.
pub fn lfu_log_incr(counter: u8, log_factor: u32, uniform: f64) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if uniform < p {
        counter + 1
    } else {
        counter
    }
}

/// A small, fast random source for the LFU increments (SplitMix64): one per database, so an
/// access costs a few arithmetic instructions rather than a thread-local RNG call.
#[derive(Clone, Debug, Default)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    /// A uniform draw in [0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(EvictionPolicy::NAMES.len(), EvictionPolicy::ALL.len());
        for &p in EvictionPolicy::ALL {
            assert_eq!(EvictionPolicy::from_name(p.name()), Some(p));
        }
        assert_eq!(
            EvictionPolicy::from_name("allkeys-lfu"),
            Some(EvictionPolicy::AllKeysLfu)
        );
        assert_eq!(EvictionPolicy::from_name("volatile-fifo"), None);
    }

    #[test]
    fn decay_counts_whole_minutes_like_redis() {
        // 12:00:59 -> 12:01:00 crosses a minute boundary: one period, as in Redis.
        let m = |ms: u64| lfu_minutes(ms);
        assert_eq!(lfu_decayed(10, m(59_000), m(60_000), 1), 9);
        assert_eq!(lfu_decayed(10, m(0), m(59_000), 1), 10);
        assert_eq!(lfu_decayed(10, m(0), m(600_000), 1), 0);
        assert_eq!(lfu_decayed(10, m(0), m(600_000), 2), 5);
        assert_eq!(lfu_decayed(10, m(0), m(6_000_000), 0), 10, "decay time 0 never decays");
        assert_eq!(lfu_decayed(200, m(0), m(30_000 * 60_000), 1), 0);
        // A clock that went backwards does not lower the counter (nor raise it).
        assert_eq!(lfu_decayed(7, m(600_000), m(0), 1), 7);
        // The 16-bit minutes wrap (45.5 days): the difference is taken modulo 2^16.
        let wrap_ms = 65_536 * 60_000u64;
        assert_eq!(lfu_decayed(10, m(wrap_ms - 120_000), m(wrap_ms + 60_000), 1), 7);
    }

    #[test]
    fn clocks_wrap_and_step_back_to_zero() {
        assert_eq!(clock_elapsed(5, CLOCK_MASK - 4, CLOCK_MASK), 10, "across the wrap");
        assert_eq!(clock_elapsed(100, 101, CLOCK_MASK), 0, "one second back");
        assert_eq!(clock_elapsed(CLOCK_MASK / 2, 0, CLOCK_MASK), CLOCK_MASK / 2);
        assert_eq!(clock_elapsed(CLOCK_MASK / 2 + 1, 0, CLOCK_MASK), 0);
        assert_eq!(lru_clock(1_000 * (1 << 24) + 3_999), 3);
        assert_eq!(lfu_pack(lfu_minutes(65_537 * 60_000), 9), 1 << 8 | 9);
    }

    #[test]
    fn increment_is_certain_at_init_then_logarithmic() {
        assert_eq!(lfu_log_incr(LFU_INIT_VAL, 10, 0.999), LFU_INIT_VAL + 1);
        assert_eq!(lfu_log_incr(0, 10, 0.999), 1);
        assert_eq!(lfu_log_incr(255, 0, 0.0), 255);
        // counter 6: p = 1/11.
        assert_eq!(lfu_log_incr(6, 10, 0.09), 7);
        assert_eq!(lfu_log_incr(6, 10, 0.0910), 6);
        // Factor 0: every access counts.
        assert_eq!(lfu_log_incr(100, 0, 0.999), 101);
    }

    #[test]
    fn hits_needed_match_redis_table() {
        // Redis's redis.conf table for lfu-log-factor 10: 100 hits -> 10, 1K -> 18, 100K -> 142
        // (approximately; starting from LFU_INIT_VAL). The draws are a fixed deterministic
        // sequence, so this is reproducible.
        let mut rng = SplitMix(42);
        let mut c = LFU_INIT_VAL;
        let mut at = std::collections::BTreeMap::new();
        for hit in 1..=100_000u32 {
            c = lfu_log_incr(c, 10, rng.uniform());
            if [100, 1000, 100_000].contains(&hit) {
                at.insert(hit, c);
            }
        }
        assert!((8..=12).contains(&at[&100]), "{at:?}");
        assert!((15..=21).contains(&at[&1000]), "{at:?}");
        assert!((130..=155).contains(&at[&100_000]), "{at:?}");
    }
}
