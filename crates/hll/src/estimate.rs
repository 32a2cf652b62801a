//! Cardinality estimate of a register array, as postgresql-hll's `multiset_card`.
//!
//! The arithmetic is done in the same order as the C code (registers summed
//! in index order, each term an exact power of two, the same constants and
//! association), so results are normally bit-identical to postgresql-hll.
//! One deliberate difference: the large-range cutoff uses 2^L with
//! L = 2^regwidth - 2 + log2m computed in floating point. postgresql-hll
//! computes it as `1ULL << L`, which overflows for regwidth >= 6 (L >= 66), so
//! its estimates there are garbage (NaN once past the linear-counting range).

use crate::params::Params;

/// 2^exp as an exact f64 (valid for -1022 <= exp <= 1023).
#[inline]
fn pow2(exp: i32) -> f64 {
    f64::from_bits(((1023 + exp) as u64) << 52)
}

pub(crate) fn estimate(regs: &[u8], params: Params) -> f64 {
    let m = regs.len() as f64;
    let mut sum = 0.0f64;
    let mut zeros = 0usize;
    for &r in regs {
        sum += pow2(-i32::from(r));
        zeros += usize::from(r == 0);
    }

    // alpha * m^2, associated as in the C code: (alpha * m) * m.
    let alpha_m2 = match regs.len() {
        16 => 0.673 * m * m,
        32 => 0.697 * m * m,
        64 => 0.709 * m * m,
        _ => (0.7213 / (1.0 + 1.079 / m)) * m * m,
    };
    let estimator = alpha_m2 / sum;

    let two_to_l = pow2((1 << params.regwidth()) - 2 + params.log2m() as i32);
    if zeros != 0 && estimator < 5.0 * m / 2.0 {
        // Linear counting for the small range.
        m * (m / zeros as f64).ln()
    } else if estimator <= two_to_l / 30.0 {
        estimator
    } else {
        // Large-range correction for hash collisions in 2^L values.
        -two_to_l * (1.0 - estimator / two_to_l).ln()
    }
}
