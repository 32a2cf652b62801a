//! The random parts of W1z: a seeded 64-bit generator and a Zipf sampler over key ranks.
//!
//! The sampler is rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion to
//! generate variates from monotone discrete distributions", 1996), the method of Apache
//! Commons' `RejectionInversionZipfSampler` and `rand_distr::Zipf`: constant time and memory
//! per sample whatever the number of ranks (50 million here), no table of probabilities,
//! usually one `exp` and one `ln` per draw. It is written out here (about forty lines) rather
//! than taken from `rand_distr` so the binary gains no dependency and the same seed gives the
//! same sequence on every machine, for Redis and for Abacus alike.
//!
//! P(rank = k) is proportional to 1 / k^s for k in 1..=n.

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for load generation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

pub struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    /// Ranks 1..=n with exponent `exponent` (> 0).
    pub fn new(n: u64, exponent: f64) -> Self {
        assert!(n >= 1 && exponent > 0.0, "Zipf needs n >= 1 and an exponent > 0");
        let mut z = Zipf { n: n as f64, exponent, h_integral_x1: 0.0, h_integral_n: 0.0, s: 0.0 };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A rank in 1..=n.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.next_f64() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// ln(1 + x) / x, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x - 1) / x, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sampled frequencies of the first ranks match 1/k^s / H(n, s) within a few percent,
    /// and no sample falls outside 1..=n.
    #[test]
    fn frequencies_follow_the_law() {
        for &(n, s) in &[(1000u64, 0.99f64), (50u64, 1.0), (100_000u64, 1.2)] {
            let z = Zipf::new(n, s);
            let mut rng = Rng::new(7);
            let draws = 2_000_000u64;
            let mut counts = [0u64; 11];
            for _ in 0..draws {
                let k = z.sample(&mut rng);
                assert!((1..=n).contains(&k));
                if k <= 10 {
                    counts[k as usize] += 1;
                }
            }
            let norm: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            for k in [1usize, 2, 5, 10] {
                let want = (k as f64).powf(-s) / norm * draws as f64;
                let got = counts[k] as f64;
                assert!((got - want).abs() / want < 0.05, "n={n} s={s} rank {k}: {got} draws, want {want:.0}");
            }
        }
    }

    #[test]
    fn one_rank_is_always_rank_one() {
        let z = Zipf::new(1, 0.99);
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| z.sample(&mut rng) == 1));
    }

    #[test]
    fn uniform_floats_stay_in_range() {
        let mut rng = Rng::new(3);
        let mean = (0..100_000).map(|_| rng.next_f64()).inspect(|x| assert!((0.0..1.0).contains(x))).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.01);
    }
}
