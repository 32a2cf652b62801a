//! Cardinality estimation from a register histogram: Redis 7's `hllCount`,
//! i.e. Otmar Ertl's "improved raw estimator" (arXiv:1702.01284) with the
//! `hllSigma`/`hllTau` helpers, evaluated in the same order as the C code so
//! the IEEE-754 results (and the final `llroundl`) are identical.

use crate::{HLL_Q, HLL_REGISTERS};

/// `HLL_ALPHA_INF`: 0.5 / ln(2).
#[allow(clippy::excessive_precision)]
const ALPHA_INF: f64 = 0.721347520444481703680;

/// `hllSigma`.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prime = z;
        z += x * y;
        y += y;
        if z_prime == z {
            return z;
        }
    }
}

/// `hllTau`. `pow(1 - x, 2)` is exactly `(1 - x) * (1 - x)` (both are the
/// correctly rounded square).
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prime = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if z_prime == z {
            return z / 3.0;
        }
    }
}

/// The estimate for a histogram of register values (`histo[v]` = number of
/// registers holding `v`; values above Q+1 = 51 only come from hand-made
/// dense strings and, as in Redis, are ignored).
pub(crate) fn estimate(histo: &[u32; 64]) -> u64 {
    let m = HLL_REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[HLL_Q + 1])) / m);
    for j in (1..=HLL_Q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    c_llround_to_u64(ALPHA_INF * m * m / z)
}

/// `(uint64_t)(double) llroundl(x)` as compiled for x86-64 glibc: rounds half
/// away from zero; a result outside the `long long` range (including +inf,
/// reached when every register is above 51) yields `LLONG_MIN`, whose
/// conversion gives `0x8000000000000000`.
fn c_llround_to_u64(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let r = x.round();
    if !(-TWO_63..TWO_63).contains(&r) {
        return 1u64 << 63;
    }
    let e = r as i64 as f64; // `E` is a double holding the long long.
    if e < 0.0 {
        (e as i64) as u64
    } else {
        e as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_zero() {
        let mut h = [0u32; 64];
        h[0] = HLL_REGISTERS as u32;
        assert_eq!(estimate(&h), 0);
    }

    #[test]
    fn overflowing_estimate_is_llong_min() {
        let mut h = [0u32; 64];
        h[63] = HLL_REGISTERS as u32;
        assert_eq!(estimate(&h), 1 << 63);
    }

    #[test]
    fn one_register_set() {
        let mut h = [0u32; 64];
        h[0] = HLL_REGISTERS as u32 - 1;
        h[1] = 1;
        assert_eq!(estimate(&h), 1);
    }
}
