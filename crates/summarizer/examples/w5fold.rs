//! The connection side of W5 alone: a rules file and an event file folded into batches of
//! about 1 MB, as `SUMMARY.INGEST` does, then the batches' groups taken and dropped. For
//! counting the parse-and-fold instructions under callgrind without a server:
//!
//!   python3 bench/w5gen.py rules 0 0 > /tmp/rules.toml
//!   python3 bench/w5gen.py v1 50000 1 > /tmp/v1.csv
//!   cargo build --release -p abacus-summarizer --example w5fold
//!   valgrind --tool=callgrind target/release/examples/w5fold /tmp/rules.toml v1 /tmp/v1.csv

use abacus_summarizer::{Batch, Rules};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, rules, feed, file] = &args[..] else {
        eprintln!("usage: w5fold RULES FEED FILE");
        std::process::exit(2);
    };
    let rules =
        Rules::parse(&std::fs::read_to_string(rules).expect("rules file")).expect("valid rules");
    let fi = rules.feed(feed).expect("a feed of the rules");
    let data = std::fs::read(file).expect("event file");
    let (mut events, mut keys, mut line) = (0, 0, 1);
    let mut rest = &data[..];
    while !rest.is_empty() {
        let cut = match rest
            .get(1 << 20..)
            .and_then(|r| r.iter().position(|&b| b == b'\n'))
        {
            Some(i) => (1 << 20) + i + 1,
            None => rest.len(),
        };
        let (payload, tail) = rest.split_at(cut);
        let mut batch = Batch::new(&rules, fi);
        line = batch.add_payload(&rules, payload, line, 10);
        events += batch.events;
        keys += batch.take_groups().len();
        rest = tail;
    }
    println!("{events} events, {keys} keys");
}
