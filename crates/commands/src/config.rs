//! The configuration values handlers read that are not plain limits of a data structure:
//! the HLL parameters. The parameters themselves (names, defaults, CONFIG SET, INFO) are
//! declared once in the server's `config.rs`, which copies their current values into these
//! structs for each batch of commands; this crate only defines what a handler sees.

/// Largest explicit threshold an HLL.* sketch may have: java-hll's largest (2^18; postgresql-hll
/// stops at 8192). The explicit list is a sorted vector with O(n) inserts, and the storage
/// specification would allow 2^32 entries (32 GiB).
pub const HLL_MAX_EXPTHRESH: i64 = 1 << 18;

/// The HLL parameters keyed handlers need, copied from the configuration's atomics once per
/// batch (never a lock per command).
#[derive(Clone, Copy, Debug)]
pub struct HllConfig {
    /// Defaults for new HLL.* sketches (validated when used: they may exceed `max_log2m`).
    pub log2m: i64,
    pub regwidth: i64,
    pub expthresh: i64,
    pub sparseon: bool,
    /// Largest log2m accepted from clients (HLL.CREATE options and stored bytes).
    pub max_log2m: u32,
    /// PF* values: `hll-sparse-max-bytes`.
    pub sparse_max_bytes: usize,
}

impl Default for HllConfig {
    fn default() -> Self {
        HllConfig { log2m: 11, regwidth: 5, expthresh: -1, sparseon: true, max_log2m: 17, sparse_max_bytes: 3000 }
    }
}
