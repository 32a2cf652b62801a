use std::time::Instant;
use tikv_jemallocator::Jemalloc;
#[global_allocator]
static A: Jemalloc = Jemalloc;
use abacus_table::U64Table;
type Hb = hashbrown::HashMap<u64, u64, foldhash::fast::RandomState>;
fn keys(n: u64) -> impl Iterator<Item = u64> {
    let mut s = 0x5eedu64;
    (0..n).map(move |_| {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}
fn main() {
    let n: u64 = std::env::var("N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    let which = std::env::var("W").unwrap_or("all".into());
    let rate = |t: Instant| n as f64 / t.elapsed().as_secs_f64() / 1e6;
    if which == "p" {
        let mut t = U64Table::<u64>::with_capacity(n as usize);
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("abacus presized {:.2}M/s", rate(s));
        return;
    }
    if which == "g" {
        let mut t = U64Table::<u64>::new();
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("abacus grow     {:.2}M/s", rate(s));
        return;
    }
    if which == "all" || which == "a" {
        let mut t = U64Table::<u64>::new();
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("abacus grow     {:.2}M/s", rate(s));
        let f: f64 = std::env::var("F")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1.0);
        let mut t = U64Table::<u64>::with_capacity((n as f64 * f) as usize);
        println!(
            "cap {} load {:.2}",
            t.capacity(),
            n as f64 / t.capacity() as f64
        );
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("abacus presized {:.2}M/s", rate(s));
        let s = Instant::now();
        let mut f = 0;
        for k in keys(n) {
            f += t.get(k).is_some() as u64;
        }
        println!("abacus get      {:.2}M/s {f}", rate(s));
    }
    if which == "hp" {
        let mut t = Hb::with_capacity_and_hasher(n as usize, Default::default());
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("hb presized     {:.2}M/s", rate(s));
        return;
    }
    if which == "hg" {
        let mut t = Hb::default();
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("hb grow         {:.2}M/s", rate(s));
        return;
    }
    if which == "all" || which == "h" {
        let mut t = Hb::default();
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("hb grow         {:.2}M/s", rate(s));
        let mut t = Hb::with_capacity_and_hasher(n as usize, Default::default());
        let s = Instant::now();
        for k in keys(n) {
            t.insert(k, k);
        }
        println!("hb presized     {:.2}M/s", rate(s));
        let s = Instant::now();
        let mut f = 0;
        for k in keys(n) {
            f += t.get(&k).is_some() as u64;
        }
        println!("hb get          {:.2}M/s {f}", rate(s));
    }
}
