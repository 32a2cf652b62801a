//! PFSELFTEST: Redis's self-test of the HyperLogLog implementation, run on this crate's code.
//!
//! Like `pfselftestCommand` it checks two things and names the first failure: that dense
//! registers read back what was written (random values in every register), and that a
//! sparse and a dense HyperLogLog fed the same elements agree on the count while both stay
//! within six standard errors of the true cardinality. Redis adds 10 million elements; here
//! the checkpoints stop at one million, so the command blocks its shard for well under a
//! second instead of several.

use crate::{dense, RedisHll, DEFAULT_SPARSE_MAX_BYTES, HDR_SIZE, HLL_REGISTERS};

/// Elements added by the cardinality check (checkpoints at 10, 100, ...).
const SELF_TEST_ELEMENTS: u64 = 1_000_000;

/// Runs the self-test. `Err` carries Redis's reply text (`TESTFAILED ...`).
pub fn self_test() -> Result<(), String> {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        // xorshift64*: no dependency, and the same sequence every run.
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };

    // Registers: write random 6-bit values everywhere, read them back, five times over.
    let mut regs = vec![0u8; dense::DENSE_REGS_BYTES];
    let mut shadow = vec![0u8; HLL_REGISTERS];
    for _ in 0..5 {
        for (i, s) in shadow.iter_mut().enumerate() {
            *s = (next() & 63) as u8;
            dense::set(&mut regs, i, *s);
        }
        for (i, &s) in shadow.iter().enumerate() {
            if dense::get(&regs, i) != s {
                return Err(format!("TESTFAILED Register error at {i}"));
            }
        }
    }

    // Cardinality: one value kept sparse as long as it can be, one dense from the start.
    let mut sparse = RedisHll::new();
    let mut dense_hll = RedisHll::new();
    dense_hll.to_dense().map_err(|e| format!("TESTFAILED {e}"))?;
    debug_assert_eq!(dense_hll.as_bytes().len(), HDR_SIZE + dense::DENSE_REGS_BYTES);
    let seed = next();
    let relative_error = 1.04 / (HLL_REGISTERS as f64).sqrt();
    let mut checkpoint = 10;
    for j in 1..=SELF_TEST_ELEMENTS {
        let element = (j ^ seed).to_le_bytes();
        for h in [&mut sparse, &mut dense_hll] {
            h.add(&element, DEFAULT_SPARSE_MAX_BYTES).map_err(|e| format!("TESTFAILED {e}"))?;
        }
        if j != checkpoint {
            continue;
        }
        checkpoint *= 10;
        let count = dense_hll.count().map_err(|e| format!("TESTFAILED {e}"))?;
        let sparse_count = sparse.count().map_err(|e| format!("TESTFAILED {e}"))?;
        if count != sparse_count {
            return Err(format!("TESTFAILED dense/sparse disagree: {count} vs {sparse_count}"));
        }
        let abs_error = count.abs_diff(j) as f64;
        // Ten elements are counted exactly or off by one (linear counting).
        let max_error = if j == 10 { 1.0 } else { (relative_error * 6.0 * j as f64).ceil() };
        if abs_error > max_error {
            return Err(format!("TESTFAILED Too big error. card:{count} abserr:{abs_error:.6}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_test_passes() {
        assert_eq!(self_test(), Ok(()));
    }
}
