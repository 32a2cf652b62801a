//! MEMORY USAGE: the one keyed subcommand of MEMORY, run on the shard that owns its key. The
//! container and its server-wide subcommands (STATS, DOCTOR, MALLOC-STATS, PURGE, HELP) read
//! the allocator and every shard, so they stay in the server (`cmd/memory.rs`), whose
//! subcommand list includes [`USAGE`].
//!
//! A key's size is the measure eviction uses for what removing it frees
//! (`Db::key_memory_bytes`: its slot and table overhead, the key, the value's heap bytes,
//! which every collection type counts exactly). Redis estimates a collection's size from
//! `SAMPLES` elements because walking it costs; Abacus's figure is exact and cheap for
//! strings, listpacks and bitmaps, and SAMPLES is parsed and checked as Redis does but does
//! not change it.

use abacus_protocol::{Arg, Frame};

use super::args::*;
use crate::command::flags::*;
use crate::command::Spec;
use crate::ctx::Ctx;

/// MEMORY USAGE's entry, for the server's MEMORY container (a `const`, so the server's
/// `const` subcommand list can hold it by value).
pub const USAGE: Spec = Spec::keyed("memory|usage", -3, READONLY, (2, 2, 1), usage, "server", "Estimates the memory usage of a key.")
    .docs("4.0.0", "O(N) where N is the number of samples.")
    .key_specs("RO")
    .args("
        key type=key key_spec_index=0
        count type=integer token=SAMPLES flags=optional
    ");

/// MEMORY USAGE key [SAMPLES count]: bytes, or nil for a missing key.
fn usage(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "samples") && j + 1 < a.len() {
            match parse_i64(&a[j + 1]) {
                Ok(n) if n < 0 => return err(ERR_SYNTAX),
                Ok(_) => {}
                Err(e) => return e,
            }
            j += 2;
        } else {
            return err(ERR_SYNTAX);
        }
    }
    let now = ctx.now_ms;
    match ctx.db().key_memory_bytes(&a[2], now) {
        Some(n) => Frame::Integer(n as i64),
        None => Frame::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{run_keyed, run_spec};

    /// Runs MEMORY USAGE (a subcommand of the server's container, not in this crate's table).
    fn usage_of(dbs: &mut [abacus_keyspace::Db], args: &[&[u8]]) -> Frame {
        run_spec(dbs, &USAGE, args)
    }

    #[test]
    fn usage_grows_with_the_value_and_checks_samples() {
        let mut d: Vec<abacus_keyspace::Db> = (0..1).map(|_| abacus_keyspace::Db::new()).collect();
        run_keyed(&mut d, &[b"set", b"small", b"v"]);
        let big = vec![b'x'; 10_000];
        run_keyed(&mut d, &[b"set", b"big", &big]);
        let size = |d: &mut Vec<abacus_keyspace::Db>, k: &[u8]| match usage_of(d, &[b"memory", b"usage", k]) {
            Frame::Integer(n) => n,
            other => panic!("{other:?}"),
        };
        let (small, large) = (size(&mut d, b"small"), size(&mut d, b"big"));
        assert!(small > 0 && large >= small + 10_000, "{small} {large}");
        assert_eq!(usage_of(&mut d, &[b"memory", b"usage", b"missing"]), Frame::Null);
        assert_eq!(usage_of(&mut d, &[b"memory", b"usage", b"big", b"samples", b"0"]), Frame::Integer(large));
        assert_eq!(usage_of(&mut d, &[b"memory", b"usage", b"big", b"samples", b"-1"]), err(ERR_SYNTAX));
        assert_eq!(usage_of(&mut d, &[b"memory", b"usage", b"big", b"samples"]), err(ERR_SYNTAX));
        assert_eq!(usage_of(&mut d, &[b"memory", b"usage", b"big", b"foo"]), err(ERR_SYNTAX));
    }
}
