//! `return_allocation_slack` under jemalloc (the allocator `abacus serve` runs with): tables
//! whose segments hand their allocator slack back to the OS keep every entry, through
//! thousands of segment rebuilds and splits (the pages given back are past the bytes a
//! segment uses, and segments made from reused memory are unaffected).
//!
//! Not under Miri: jemalloc is a foreign library Miri cannot run (`scripts/miri.sh` stopped
//! here at the first allocation).
#![cfg(not(miri))]

use abacus_table::{return_allocation_slack, Config, Density, Table, U64Table};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn tables_keep_every_entry_with_their_slack_given_back() {
    // SAFETY: the global allocator is jemalloc (above), whose usable_size answers for every
    // live allocation it made.
    assert!(unsafe { return_allocation_slack(tikv_jemallocator::usable_size::<u8>) });
    // SAFETY: as above.
    assert!(
        !unsafe { return_allocation_slack(tikv_jemallocator::usable_size::<u8>) },
        "set once"
    );
    let n = 1_500_000u64;
    // Dense tables give their slack back; a balanced one beside them does not.
    let dense = || Config {
        density: Density::Dense,
        ..Config::default()
    };
    let mut ints: U64Table<u64> = U64Table::with_config(dense());
    let mut bytes: Table<[u8; 21]> = Table::with_config(dense());
    let mut balanced: Table<[u8; 21]> = Table::new();
    let mut value = [0u8; 21];
    for i in 0..n {
        ints.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), !i);
        value[..8].copy_from_slice(&i.to_le_bytes());
        bytes.insert(format!("key:{i}").as_bytes(), value);
        balanced.insert(format!("key:{i}").as_bytes(), value);
        if i % 3 == 0 && i > 0 {
            // Deletions too: segments rebuilt from reused memory.
            ints.remove((i - 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            bytes.remove(format!("key:{}", i - 1).as_bytes());
            balanced.remove(format!("key:{}", i - 1).as_bytes());
        }
    }
    for i in 0..n {
        let gone = i % 3 == 2 && i + 1 < n;
        assert_eq!(
            ints.get(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).copied(),
            (!gone).then_some(!i),
            "u64 key {i}"
        );
        value[..8].copy_from_slice(&i.to_le_bytes());
        assert_eq!(
            bytes.get(format!("key:{i}").as_bytes()).copied(),
            (!gone).then_some(value),
            "byte key {i}"
        );
        assert_eq!(
            balanced.get(format!("key:{i}").as_bytes()).copied(),
            (!gone).then_some(value),
            "balanced byte key {i}"
        );
    }
    eprintln!("RSS after the three tables: {} MiB", rss_kib() >> 10);
}
