//! Exact decimals for the numbers a person sums: [`Dec`] (fixed point, an i128 mantissa and
//! a scale) and [`Number`] (a `Dec` where the value is one, else a double).
//!
//! Why: money summed as doubles reads `20081.069999999996`; the same inputs summed as fixed
//! point read `20081.07`. A summary's sum keeps the scale of the most decimals seen (`1.5 +
//! 2.25 = 3.75`, `1.50 + 2 = 3.50`), as SQL's DECIMAL sum does, and widens as needed: the
//! mantissa is an i128 holding at most [`MAX_DIGITS`] (38) digits, so every value fits
//! Parquet's and Arrow's `Decimal128(38, scale)` unchanged. A value that does not (more than
//! 38 significant digits, or a scale past 38: `1e-40`, `1e300`) or a sum that outgrows it is
//! a double from then on ([`Number::Float`]), printed in plain notation (never an exponent).
//!
//! Text: [`Dec::parse`] reads what a person or a feed writes (`-12.50`, `+3`, `.5`, `1e3`,
//! `2.5E-2`); [`Dec`]'s `Display` writes plain notation with exactly `scale` decimals, and
//! what it writes parses back to the same mantissa and scale. Stored sums are that text, so
//! snapshots, the log and replicas carry them as before: only the digits are exact now.
//!
//! No `unsafe` code; no allocation except `Display`'s output.

use std::cmp::Ordering;
use std::fmt;

/// Most significant digits of a [`Dec`] (Decimal128's precision).
pub const MAX_DIGITS: u32 = 38;
/// Largest scale of a [`Dec`].
pub const MAX_SCALE: u8 = 38;
/// 10^38: every mantissa's magnitude is below it.
const LIMIT: i128 = 10i128.pow(MAX_DIGITS);

/// 10^0 ..= 10^38, so a rescale is one multiplication, not a `checked_pow` loop.
const POW10: [i128; 39] = {
    let mut t = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

fn pow10(n: u32) -> Option<i128> {
    POW10.get(n as usize).copied()
}

/// A fixed-point decimal: `mantissa / 10^scale`, with `|mantissa| < 10^38` and
/// `scale <= 38`. Equality is by value and scale (`1.5 != 1.50` as `Dec`s), ordering by value
/// ([`Dec::cmp_value`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dec {
    mantissa: i128,
    scale: u8,
}

impl Dec {
    pub const ZERO: Dec = Dec { mantissa: 0, scale: 0 };

    /// `mantissa / 10^scale`; None past the limits.
    pub fn new(mantissa: i128, scale: u8) -> Option<Dec> {
        (mantissa.unsigned_abs() < LIMIT as u128 && scale <= MAX_SCALE).then_some(Dec { mantissa, scale })
    }

    pub fn mantissa(self) -> i128 {
        self.mantissa
    }

    pub fn scale(self) -> u8 {
        self.scale
    }

    /// Reads `[+-]digits[.digits][(e|E)[+-]digits]` (at least one digit before the exponent;
    /// no spaces). None for anything else, and for a value past the limits (the caller may
    /// read it as a double). The scale is the number of decimals written, less the exponent
    /// (`1.50` has scale 2, `1.5e1` scale 0, `15e-3` scale 3).
    pub fn parse(s: &[u8]) -> Option<Dec> {
        let (neg, rest) = match s.split_first()? {
            (b'-', r) => (true, r),
            (b'+', r) => (false, r),
            _ => (false, s),
        };
        // Digits go into a u64 while they fit (19 of them: every usual value), then i128.
        let mut small: u64 = 0;
        let mut m: i128 = 0;
        let mut digits = 0u32; // significant digits taken (leading zeros skipped)
        let mut frac: i64 = 0;
        let mut seen = false;
        let mut dot = false;
        let mut i = 0;
        while i < rest.len() {
            let c = rest[i];
            match c {
                b'0'..=b'9' => {
                    seen = true;
                    if digits > 0 || c != b'0' {
                        digits += 1;
                        if digits > MAX_DIGITS {
                            return None;
                        }
                    }
                    if digits <= 19 {
                        small = small * 10 + u64::from(c - b'0');
                    } else {
                        if digits == 20 {
                            m = i128::from(small);
                        }
                        m = m * 10 + i128::from(c - b'0');
                    }
                    if dot {
                        frac += 1;
                    }
                }
                b'.' if !dot => dot = true,
                b'e' | b'E' => break,
                _ => return None,
            }
            i += 1;
        }
        if !seen {
            return None;
        }
        if digits <= 19 {
            m = i128::from(small);
        }
        let mut exp: i64 = 0;
        if i < rest.len() {
            let e = std::str::from_utf8(&rest[i + 1..]).ok()?;
            if e.is_empty() || e.starts_with("++") || e.starts_with("+-") || e.len() > 6 {
                return None;
            }
            exp = e.parse::<i64>().ok()?;
        }
        let mut scale = frac - exp;
        if scale < 0 {
            m = m.checked_mul(pow10(u32::try_from(-scale).ok()?)?)?;
            scale = 0;
        }
        if scale > i64::from(MAX_SCALE) {
            return None;
        }
        Dec::new(if neg { -m } else { m }, scale as u8)
    }

    /// This value with `scale` decimals (>= its own); None past the limits.
    pub fn rescale(self, scale: u8) -> Option<Dec> {
        if scale < self.scale {
            return None;
        }
        let m = self.mantissa.checked_mul(pow10(u32::from(scale - self.scale))?)?;
        Dec::new(m, scale)
    }

    /// The exact sum, with the larger scale of the two; None past the limits.
    pub fn checked_add(self, o: Dec) -> Option<Dec> {
        if self.scale == o.scale {
            // The usual case (money with its two decimals): no rescale.
            return Dec::new(self.mantissa.checked_add(o.mantissa)?, self.scale);
        }
        let scale = self.scale.max(o.scale);
        let (a, b) = (self.rescale(scale)?, o.rescale(scale)?);
        Dec::new(a.mantissa.checked_add(b.mantissa)?, scale)
    }

    /// Orders by value (`1.5 == 1.50`), exactly.
    pub fn cmp_value(self, o: Dec) -> Ordering {
        // (integer part, fraction in 38 digits), both truncated toward zero: the pair orders
        // like the value whatever the signs, and never overflows.
        let parts = |d: Dec| {
            let p = 10i128.pow(u32::from(d.scale));
            (d.mantissa / p, (d.mantissa % p) * 10i128.pow(u32::from(MAX_SCALE - d.scale)))
        };
        parts(self).cmp(&parts(o))
    }

    /// The nearest double (through the text, which Rust's parser rounds correctly).
    pub fn to_f64(self) -> f64 {
        self.to_string().parse::<f64>().unwrap_or(0.0)
    }
}

impl Dec {
    /// The text `Display` writes, appended to `out` without `core::fmt` or a `String` (the
    /// ingest writes one per sum and key: `fmt` was 5% of a v1 ingest).
    pub fn write_to(self, out: &mut Vec<u8>) {
        // At most 38 digits; 40 covers them with room.
        let mut digits = [0u8; 40];
        let mut at = digits.len();
        let mut m = self.mantissa.unsigned_abs();
        if m == 0 {
            at -= 1;
            digits[at] = b'0';
        }
        while m > u128::from(u64::MAX) {
            at -= 1;
            digits[at] = b'0' + (m % 10) as u8;
            m /= 10;
        }
        let mut m = m as u64;
        while m > 0 {
            at -= 1;
            digits[at] = b'0' + (m % 10) as u8;
            m /= 10;
        }
        let digits = &digits[at..];
        let scale = usize::from(self.scale);
        if self.mantissa < 0 {
            out.push(b'-');
        }
        if digits.len() <= scale {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', scale - digits.len()));
            out.extend_from_slice(digits);
        } else {
            let (int, frac) = digits.split_at(digits.len() - scale);
            out.extend_from_slice(int);
            if scale > 0 {
                out.push(b'.');
                out.extend_from_slice(frac);
            }
        }
    }
}

impl fmt::Display for Dec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::with_capacity(48);
        self.write_to(&mut out);
        // Digits, '-' and '.': ASCII.
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

/// A number as the summarizer keeps it: an exact [`Dec`] where the value is one, else a
/// finite double.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Dec(Dec),
    Float(f64),
}

impl Number {
    pub const ZERO: Number = Number::Dec(Dec::ZERO);

    /// A decimal if `s` is one within the limits, else a finite double, else None.
    pub fn parse(s: &[u8]) -> Option<Number> {
        if let Some(d) = Dec::parse(s) {
            return Some(Number::Dec(d));
        }
        let x = std::str::from_utf8(s).ok()?.parse::<f64>().ok()?;
        x.is_finite().then_some(Number::Float(x))
    }

    pub fn to_f64(self) -> f64 {
        match self {
            Number::Dec(d) => d.to_f64(),
            Number::Float(x) => x,
        }
    }

    /// The sum: exact if both are decimals and it fits, else a double; None if the double is
    /// not finite.
    pub fn add(self, o: Number) -> Option<Number> {
        if let (Number::Dec(a), Number::Dec(b)) = (self, o) {
            if let Some(s) = a.checked_add(b) {
                return Some(Number::Dec(s));
            }
        }
        let x = self.to_f64() + o.to_f64();
        x.is_finite().then_some(Number::Float(x))
    }

    /// Orders by value: exactly between decimals, as doubles otherwise.
    pub fn cmp_value(self, o: Number) -> Ordering {
        match (self, o) {
            (Number::Dec(a), Number::Dec(b)) => a.cmp_value(b),
            _ => self.to_f64().total_cmp(&o.to_f64()),
        }
    }
}

impl fmt::Display for Number {
    /// A decimal with its scale; a double as the shortest digits that read back as it, in
    /// plain notation (Rust's `Display` never writes an exponent), -0 as `0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Dec(d) => d.fmt(f),
            Number::Float(x) if *x == 0.0 => f.write_str("0"),
            Number::Float(x) => write!(f, "{x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s.as_bytes()).unwrap_or_else(|| panic!("{s} parses"))
    }

    #[test]
    fn parses_and_prints() {
        for (text, m, s, shown) in [
            ("0", 0, 0, "0"),
            ("-0", 0, 0, "0"),
            ("1.50", 150, 2, "1.50"),
            ("+3", 3, 0, "3"),
            (".5", 5, 1, "0.5"),
            ("5.", 5, 0, "5"),
            ("-0.007", -7, 3, "-0.007"),
            ("1e3", 1000, 0, "1000"),
            ("2.5E-2", 25, 3, "0.025"),
            ("15e-3", 15, 3, "0.015"),
            ("1.5e1", 15, 0, "15"),
            ("0000123.4500", 1234500, 4, "123.4500"),
        ] {
            let x = d(text);
            assert_eq!((x.mantissa(), x.scale()), (m, s), "{text}");
            assert_eq!(x.to_string(), shown, "{text}");
        }
        for bad in ["", "-", ".", "e3", "1e", "1e+", "1..2", "1.2.3", " 1", "1 ", "inf", "nan", "0x10", "1e-39", "1e38", "123456789012345678901234567890123456789"] {
            assert_eq!(Dec::parse(bad.as_bytes()), None, "{bad}");
        }
        assert!(Dec::parse(b"12345678901234567890123456789012345678").is_some());
        assert!(Dec::parse(b"0.00000000000000000000000000000000000001").is_some());
    }

    #[test]
    fn sums_keep_the_most_decimals() {
        assert_eq!(d("1.5").checked_add(d("2.25")).map(|x| x.to_string()).as_deref(), Some("3.75"));
        assert_eq!(d("1.50").checked_add(d("2")).map(|x| x.to_string()).as_deref(), Some("3.50"));
        assert_eq!(d("0.1").checked_add(d("0.2")).map(|x| x.to_string()).as_deref(), Some("0.3"));
        assert_eq!(d("-0.1").checked_add(d("0.1")).map(|x| x.to_string()).as_deref(), Some("0.0"));
        let big = d("99999999999999999999999999999999999999");
        assert_eq!(big.checked_add(d("1")), None);
        assert_eq!(Number::Dec(big).add(Number::Dec(d("1"))), Some(Number::Float(1e38)));
        assert_eq!(Number::Dec(d("1.25")).add(Number::Float(0.5)), Some(Number::Float(1.75)));
        assert_eq!(Number::Float(f64::MAX).add(Number::Float(f64::MAX)), None);
    }

    #[test]
    fn numbers_print_plain() {
        assert_eq!(Number::parse(b"1e300").map(|n| n.to_string().len()), Some(301));
        assert_eq!(Number::Float(-0.0).to_string(), "0");
        assert_eq!(Number::Float(1.5e-7).to_string(), "0.00000015");
        assert_eq!(Number::parse(b"20081.07").map(|n| n.to_string()).as_deref(), Some("20081.07"));
        assert_eq!(Number::parse(b"x"), None);
        assert_eq!(Number::parse(b"inf"), None);
    }

    fn arb_dec() -> impl Strategy<Value = Dec> {
        // Mantissas up to 10^29 and scales up to 8: sums of two never leave i128, nor does
        // a sum at scale 8 (the tests' reference: 2 x 10^29 x 10^8). With 10^30 the
        // reference itself overflowed for two large mantissas at scale 0.
        (-(10i128.pow(29))..10i128.pow(29), 0u8..=8).prop_map(|(m, s)| Dec::new(m, s).unwrap())
    }

    proptest! {
        #[test]
        fn text_round_trips(x in arb_dec()) {
            prop_assert_eq!(Dec::parse(x.to_string().as_bytes()), Some(x));
        }

        #[test]
        fn text_is_the_i128_digits(m in any::<i128>(), s in 0u8..=38) {
            let m = m % LIMIT;
            let x = Dec::new(m, s).unwrap();
            // The reference: the integer's own digits, zero-padded, the point put in.
            let digits = format!("{:0>width$}", m.unsigned_abs(), width = usize::from(s) + 1);
            let (int, frac) = digits.split_at(digits.len() - usize::from(s));
            let want = format!("{}{}{}{}", if m < 0 { "-" } else { "" }, int, if s > 0 { "." } else { "" }, frac);
            prop_assert_eq!(x.to_string(), want);
            prop_assert_eq!(Dec::parse(x.to_string().as_bytes()), Some(x));
        }

        #[test]
        fn add_is_i128_math(a in arb_dec(), b in arb_dec()) {
            // The reference: both at scale 8 (exact for these inputs), added as i128.
            let at8 = |x: Dec| x.mantissa() * 10i128.pow(8 - u32::from(x.scale()));
            let sum = a.checked_add(b).unwrap();
            prop_assert_eq!(sum.scale(), a.scale().max(b.scale()));
            prop_assert_eq!(at8(sum), at8(a) + at8(b));
            prop_assert_eq!(a.cmp_value(b), at8(a).cmp(&at8(b)));
        }

        #[test]
        fn add_refuses_only_past_the_limit(a in any::<i128>(), b in any::<i128>(), s in 0u8..=38) {
            let (a, b) = (a % LIMIT, b % LIMIT);
            let (x, y) = (Dec::new(a, s).unwrap(), Dec::new(b, s).unwrap());
            let exact = a.checked_add(b).filter(|m| m.unsigned_abs() < LIMIT as u128);
            prop_assert_eq!(x.checked_add(y).map(Dec::mantissa), exact);
        }

        #[test]
        fn to_f64_is_the_nearest_double(m in -(10i128.pow(17))..10i128.pow(17), s in 0u8..=12) {
            let x = Dec::new(m, s).unwrap();
            let text = x.to_string();
            prop_assert_eq!(x.to_f64(), text.parse::<f64>().unwrap());
        }
    }
}
