//! Double-to-text formatting exactly laid out as Redis 7.2 does it.
//!
//! Redis 7.2 formats reply doubles with `fpconv_dtoa` (grisu2): the shortest
//! digits that round-trip, laid out as a plain integer when the exponent is
//! small (`3`, `10000000`), as a plain decimal for moderate negative
//! exponents (`0.1`, `0.0001`), and in exponent form otherwise (`1e+8`,
//! `1.5e-7`, `1e+300`). RESP2 double replies use that directly; RESP3 and a
//! few commands go through `d2string`, which first prints integral values
//! below 2^62 as integers (`1000000000` rather than `1e+9`).
//!
//! Trade-off: instead of porting grisu2 we take the shortest round-trip digits
//! from Rust's formatter (`{:e}`, which is exact-shortest) and apply fpconv's
//! layout rules. Grisu2 is shortest in all but a tiny fraction of inputs, so
//! output can differ from Redis only in those rare cases (by an extra digit),
//! and ours always round-trips. No heap allocation: digits go through a stack
//! buffer.

use std::fmt::{self, Write as _};

/// Formats a double as Redis 7.2's `addReplyDouble` does for RESP2
/// (`fpconv_dtoa`): shortest round-trip digits, `"inf"`, `"-inf"`, `"nan"`.
/// `3.0 -> "3"`, `0.1 -> "0.1"`, `1e8 -> "1e+8"`, `-0.0 -> "-0"`.
pub fn format_double(d: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(Repr::fpconv(d).as_bytes());
}

/// Formats like Redis 7.2's `d2string` (RESP3 doubles, scores in some
/// replies): integral values within ±2^62 print as integers, zero as `"0"`
/// or `"-0"`, everything else as [`format_double`].
pub fn format_double_d2string(d: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(Repr::d2string(d).as_bytes());
}

/// Formats a double as Redis 7.0's `addReplyDouble` does (`"%.17g"`, `inf`, `-inf`): the
/// sorted-set family's scores (ZSCORE, WITHSCORES, ZINCRBY) in both protocols, since the
/// sorted sets follow Redis 7.0 (`1.1 -> "1.1000000000000001"`, `-0.0 -> "-0"`,
/// `1e300 -> "1.0000000000000001e+300"`).
pub fn format_double_g17(d: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(Repr::g17(d).as_bytes());
}

/// A formatted double on the stack, so the encoder needs no heap buffer.
///
/// 32 bytes bound every layout: sign + 17 digits + at most 7 padding zeros
/// (plain integer/decimal forms), or sign + 17 digits + '.' + "e-324".
/// Writes past the end are dropped rather than panicking (cannot happen).
pub(crate) struct Repr {
    buf: [u8; 32],
    len: usize,
}

impl fmt::Write for Repr {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Repr {
    fn new() -> Self {
        Repr {
            buf: [0; 32],
            len: 0,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    fn push(&mut self, c: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = c;
            self.len += 1;
        }
    }

    fn extend(&mut self, s: &[u8]) {
        for &c in s {
            self.push(c);
        }
    }

    fn zeros(&mut self, n: i32) {
        for _ in 0..n {
            self.push(b'0');
        }
    }

    /// `d2string`: exact integers within ±LLONG_MAX/2 via integer printing.
    pub(crate) fn d2string(d: f64) -> Repr {
        if d.is_finite() && d != 0.0 {
            let lim = (i64::MAX / 2) as f64;
            if (-lim..=lim).contains(&d) {
                let ll = d as i64;
                if ll as f64 == d {
                    let mut r = Repr::new();
                    r.extend(itoa::Buffer::new().format(ll).as_bytes());
                    return r;
                }
            }
        }
        Repr::fpconv(d)
    }

    /// C's `printf("%.17g")`: 17 significant digits (Rust's `{:.16e}` rounds exactly as
    /// glibc does), fixed notation for decimal exponents -4..=16 and exponent notation with
    /// at least two exponent digits otherwise, trailing zeros removed.
    pub(crate) fn g17(d: f64) -> Repr {
        let mut r = Repr::new();
        if d.is_nan() {
            r.extend(b"nan");
            return r;
        }
        if d.is_sign_negative() {
            r.push(b'-');
        }
        let a = d.abs();
        if a.is_infinite() {
            r.extend(b"inf");
            return r;
        }
        if a == 0.0 {
            r.push(b'0');
            return r;
        }
        let mut sci = Repr::new();
        if write!(sci, "{:.16e}", a).is_err() {
            return r; // unreachable: 32 bytes always suffice
        }
        let (digits, nd, x) = sci_digits(sci.as_bytes());
        let digits = digits.get(..nd).unwrap_or(&[]);
        if (-4..17).contains(&x) {
            let (int_part, frac): (&[u8], &[u8]) = if x >= 0 { digits.split_at((x as usize + 1).min(nd)) } else { (&b"0"[..], digits) };
            let frac_zeros = if x < 0 { (-x - 1) as usize } else { 0 };
            let trimmed = frac.len() - frac.iter().rev().take_while(|&&c| c == b'0').count();
            r.extend(int_part);
            if trimmed > 0 {
                r.push(b'.');
                r.zeros(frac_zeros as i32);
                r.extend(frac.get(..trimmed).unwrap_or(&[]));
            }
        } else {
            let (first, rest) = digits.split_at(1.min(nd));
            let trimmed = rest.len() - rest.iter().rev().take_while(|&&c| c == b'0').count();
            r.extend(first);
            if trimmed > 0 {
                r.push(b'.');
                r.extend(rest.get(..trimmed).unwrap_or(&[]));
            }
            r.push(b'e');
            r.push(if x < 0 { b'-' } else { b'+' });
            if x.abs() < 10 {
                r.push(b'0');
            }
            r.extend(itoa::Buffer::new().format(x.abs()).as_bytes());
        }
        r
    }

    /// `fpconv_dtoa` with NaN normalised to "nan" (fpconv would print
    /// "-nan" for a negative NaN; clients only know "nan").
    pub(crate) fn fpconv(d: f64) -> Repr {
        let mut r = Repr::new();
        if d.is_nan() {
            r.extend(b"nan");
            return r;
        }
        if d.is_sign_negative() {
            r.push(b'-');
        }
        let a = d.abs();
        if a.is_infinite() {
            r.extend(b"inf");
            return r;
        }
        if a == 0.0 {
            r.push(b'0');
            return r;
        }
        // Fast path for integral values below 2^53 (common scores): every
        // such integer is exactly representable, so its decimal digits with
        // trailing zeros stripped are already the shortest round-trip digits.
        if a < 9_007_199_254_740_992.0 && a.fract() == 0.0 {
            let mut ibuf = itoa::Buffer::new();
            let int = ibuf.format(a as u64).as_bytes();
            let trimmed = int.len() - int.iter().rev().take_while(|&&c| c == b'0').count();
            let digits = int.get(..trimmed).unwrap_or(int);
            r.emit_digits(digits, int.len() as i32 - 1);
            return r;
        }
        // `{:e}` yields the exact shortest round-trip digits as d.ddde<exp>.
        let mut sci = Repr::new();
        if write!(sci, "{:e}", a).is_err() {
            return r; // unreachable: 32 bytes always suffice
        }
        let (digits, nd, e10) = sci_digits(sci.as_bytes());
        r.emit_digits(digits.get(..nd).unwrap_or(&[]), e10);
        r
    }

    /// fpconv's `emit_digits`: value = `digits` × 10^(e10 - ndigits + 1).
    fn emit_digits(&mut self, digits: &[u8], e10: i32) {
        let nd = digits.len() as i32;
        if nd == 0 {
            self.push(b'0');
            return;
        }
        let k = e10 - (nd - 1);
        let exp = e10.abs();
        if k >= 0 && exp < nd + 7 {
            // Plain integer: digits followed by k zeros.
            self.extend(digits);
            self.zeros(k);
            return;
        }
        if k < 0 && (k > -7 || exp < 4) {
            let offset = nd + k; // digits before the decimal point
            if offset <= 0 {
                self.extend(b"0.");
                self.zeros(-offset);
                self.extend(digits);
            } else {
                let (int_part, frac) = digits.split_at(offset as usize);
                self.extend(int_part);
                self.push(b'.');
                self.extend(frac);
            }
            return;
        }
        // Exponent form: d[.ddd]e(+|-)x, exponent without leading zeros.
        let (first, rest) = digits.split_at(1);
        self.extend(first);
        if !rest.is_empty() {
            self.push(b'.');
            self.extend(rest);
        }
        self.push(b'e');
        self.push(if e10 < 0 { b'-' } else { b'+' });
        self.extend(itoa::Buffer::new().format(exp).as_bytes());
    }
}

/// The significant digits (up to 20), their count and the decimal exponent of a number
/// Rust printed with `{:e}` / `{:.Ne}` (`d.ddde<exp>`).
fn sci_digits(text: &[u8]) -> ([u8; 20], usize, i32) {
    let (mantissa, exponent) = match text.iter().position(|&c| c == b'e') {
        Some(i) => text.split_at(i),
        None => (text, &b"e0"[..]),
    };
    let mut digits = [0u8; 20];
    let mut nd = 0usize;
    for &c in mantissa.iter().filter(|c| c.is_ascii_digit()) {
        if let Some(slot) = digits.get_mut(nd) {
            *slot = c;
            nd += 1;
        }
    }
    (digits, nd, parse_exp(exponent.get(1..).unwrap_or(&[])))
}

/// Parses the decimal exponent Rust printed (`-7`, `300`); at most 5 digits
/// are read, far beyond f64's range, so it cannot overflow.
fn parse_exp(s: &[u8]) -> i32 {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let mut v: i32 = 0;
    for &c in digits.iter().take(5) {
        v = v * 10 + i32::from(c.wrapping_sub(b'0') % 10);
    }
    if neg {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected texts from C's printf("%.17g") (Python's `%`-formatting), for values Redis
    /// 7.0 was seen to print and random bit patterns.
    #[test]
    fn g17_is_printf_17g() {
        let cases = [
            (f64::from_bits(4607632778762754458), "1.1000000000000001"),
            (f64::from_bits(4599075939470750516), "0.30000000000000004"),
            (f64::from_bits(9094988921128908188), "1.0000000000000001e+300"),
            (f64::from_bits(4502148214488346440), "9.9999999999999995e-08"),
            (f64::from_bits(4741671816366391296), "1000000000"),
            (f64::from_bits(4862596447618666293), "1.2345678901234568e+17"),
            (f64::from_bits(4613937818241073152), "3"),
            (f64::from_bits(4596373779694328218), "0.20000000000000001"),
            (f64::from_bits(4608083138725491508), "1.2000000000000002"),
            (f64::from_bits(4846369599423283200), "10000000000000000"),
            (f64::from_bits(4861130398305394688), "1e+17"),
            (f64::from_bits(4547007122018943789), "0.0001"),
            (f64::from_bits(4548686525128629352), "0.00012344999999999999"),
            (f64::from_bits(4532020583610935537), "1.0000000000000001e-05"),
            (f64::from_bits(13836183955189006336), "-2.5"),
            (f64::from_bits(1), "4.9406564584124654e-324"),
            (f64::from_bits(9218868437227405311), "1.7976931348623157e+308"),
            (f64::from_bits(4861130398305394688), "1e+17"),
            (f64::from_bits(4602678819172646912), "0.5"),
            (f64::from_bits(4638387860618067575), "123.456"),
            (f64::from_bits(9341994084744098649), "-1e-300"),
            (f64::from_bits(4841369599423283200), "4503599627370496"),
            (f64::from_bits(17485029721327973432), "-1.989032661366619e+244"),
            (f64::from_bits(7283207964119141687), "7.761117632285041e+178"),
            (f64::from_bits(890727360438182992), "3.980498358697587e-249"),
            (f64::from_bits(15149836622520594227), "-1.5432835417340557e+88"),
            (f64::from_bits(1736392818365009963), "1.3647584518757569e-192"),
            (f64::from_bits(10750541312280087032), "-1.3701135617873088e-206"),
            (f64::from_bits(16781078052021535861), "-1.7160537630466207e+197"),
            (f64::from_bits(3960482443532127989), "6.2946752411953861e-44"),
            (f64::from_bits(1585446675937841368), "1.0613447212142254e-202"),
            (f64::from_bits(7713914763314685786), "4.7083251603875462e+207"),
            (f64::from_bits(4439448776366754703), "6.3870161585135632e-12"),
            (f64::from_bits(10165027665383847897), "-9.9731303785687331e-246"),
            (f64::from_bits(1090396360377453094), "8.7797532256802712e-236"),
            (f64::from_bits(10430779633273967791), "-5.7955032484989932e-228"),
            (f64::from_bits(17477362246067780643), "-5.9881801593860111e+243"),
            (f64::from_bits(11632994891556335705), "-1.3060523885277959e-147"),
            (f64::from_bits(10754394637803157173), "-2.4361176994848409e-206"),
            (f64::from_bits(1141153371300629929), "2.2333869991501741e-232"),
            (f64::from_bits(10801332806156616911), "-3.5152797062666699e-203"),
            (f64::from_bits(914761360679426580), "1.5987381841032883e-247"),
            (f64::from_bits(4078239883182463692), "4.6678633181812096e-36"),
            (f64::from_bits(10268654918125279152), "-8.4418727921054556e-239"),
            (f64::from_bits(2456641775679608523), "1.9015657400796622e-144"),
            (f64::from_bits(7731750658069747094), "7.370437700706684e+208"),
            (f64::from_bits(9973894190648387236), "-1.7163996725272777e-258"),
            (f64::from_bits(10531498782278263232), "-3.2367190832119987e-221"),
            (f64::from_bits(10334922596725336632), "-2.2818334634712625e-234"),
            (f64::from_bits(12580729232405932079), "-3.0536383926309363e-84"),
            (f64::from_bits(1901042282212365707), "1.3449551894627777e-181"),
            (f64::from_bits(10536861175493410705), "-7.3174959760626057e-221")

        ];
        for (d, want) in cases {
            let mut v = Vec::new();
            format_double_g17(d, &mut v);
            assert_eq!(String::from_utf8(v).unwrap(), want, "{d:e}");
        }
        for (d, want) in [(-0.0, "-0"), (0.0, "0"), (f64::INFINITY, "inf"), (f64::NEG_INFINITY, "-inf")] {
            let mut v = Vec::new();
            format_double_g17(d, &mut v);
            assert_eq!(String::from_utf8(v).unwrap(), want);
        }
    }

    fn fd(d: f64) -> String {
        let mut v = Vec::new();
        format_double(d, &mut v);
        String::from_utf8(v).unwrap()
    }

    fn d2s(d: f64) -> String {
        let mut v = Vec::new();
        format_double_d2string(d, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn fpconv_layout() {
        let cases: &[(f64, &str)] = &[
            (3.0, "3"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (0.0001, "0.0001"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (12345678.0, "12345678"),
            (10000000.0, "10000000"),
            (1e8, "1e+8"),
            (1e9, "1e+9"),
            (2.5e9, "2.5e+9"),
            (123456789.0, "123456789"),
            (123456.789, "123456.789"),
            (1e21, "1e+21"),
            (1e300, "1e+300"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (3.125, "3.125"),
            (-0.5, "-0.5"),
        ];
        for &(d, want) in cases {
            assert_eq!(fd(d), want, "formatting {d:?}");
        }
    }

    #[test]
    fn d2string_integers() {
        assert_eq!(d2s(1e9), "1000000000");
        assert_eq!(d2s(1e18), "1000000000000000000");
        assert_eq!(d2s(-42.0), "-42");
        assert_eq!(d2s(1e19), "1e+19");
        assert_eq!(d2s(-0.0), "-0");
        assert_eq!(d2s(0.0), "0");
        assert_eq!(d2s(1.25), "1.25");
        assert_eq!(d2s(f64::NEG_INFINITY), "-inf");
        assert_eq!(d2s(f64::NAN), "nan");
    }

    #[test]
    fn integer_fast_path_matches_general_path() {
        for v in [
            1.0,
            7.0,
            10.0,
            100.0,
            1200.0,
            99999999.0,
            1e8,
            123456789.0,
            4503599627370497.0,
            9007199254740991.0,
            9007199254740992.0,
            1e16,
        ] {
            let mut sci = Repr::new();
            write!(sci, "{:e}", v).unwrap();
            let (m, e) = std::str::from_utf8(sci.as_bytes())
                .unwrap()
                .split_once('e')
                .unwrap();
            let digits: Vec<u8> = m.bytes().filter(u8::is_ascii_digit).collect();
            let mut general = Repr::new();
            general.emit_digits(&digits, e.parse().unwrap());
            assert_eq!(Repr::fpconv(v).as_bytes(), general.as_bytes(), "{v}");
        }
    }

    #[test]
    fn formatted_values_round_trip() {
        let mut x = 1.0e-320f64;
        while x < 1e300 {
            for v in [x, -x, x * 1.2345678901234567, x / 3.0] {
                let s = fd(v);
                assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
                let s = d2s(v);
                assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
            }
            x *= 7.3;
        }
    }
}

/// Writes `d` in plain notation if `1 <= |d| < 1e9` and some decimal with at most six
/// digits after the point reads back as `d`: the fewest such digits are the shortest
/// round-trip form (`ryu`'s), found with a multiply, a round and a divide per candidate
/// instead of `ryu`'s 128-bit arithmetic (callgrind: ~600 instructions per value through
/// `ryu`, which a 200,000-point waterfall reply spends on every point; prices, the usual
/// series values, have a few decimals).
///
/// Why it is exact: `m / 10^k` with `m < 2^53` and `10^k` both exact is the double nearest
/// to the decimal `m / 10^k`, which is what parsing that decimal gives, so the equality test
/// is the round-trip test; below 1e9 a double's spacing (under 1.2e-7) is finer than
/// 10^-6, so at most one `k`-digit decimal reads back as `d`, and the fewest digits after
/// the point are the fewest digits in all (the integer part is the same for every
/// candidate).
fn put_short_decimal(d: f64, out: &mut Vec<u8>) -> bool {
    let a = d.abs();
    if !(1.0..1e9).contains(&a) {
        return false;
    }
    let mut p = 1.0;
    for k in 0..=6usize {
        // Rounded by truncating `a * p + 0.5` (positive, under 1e15) through `i64`, two
        // instructions on x86-64 (`f64::round` is a libm call there, and `u64` conversions
        // a dozen instructions each). Which way a tie goes cannot matter: a product that is
        // not a whole number never reads back.
        let m = (a * p + 0.5) as i64 as f64;
        if m / p == a {
            let mut buf = itoa::Buffer::new();
            let digits = buf.format(m as u64).as_bytes();
            if d < 0.0 {
                out.push(b'-');
            }
            let (int, frac) = digits.split_at(digits.len() - k);
            out.extend_from_slice(int);
            if k > 0 {
                out.push(b'.');
                out.extend_from_slice(frac);
            }
            return true;
        }
        p *= 10.0;
    }
    false
}

/// A double as RedisTimeSeries 1.10 replies a sample value in RESP2: the shortest digits
/// that round-trip, in plain notation when the decimal exponent is 0 to 15
/// (`123.456`, `1000000000000000`), else scientific with a capital `E` and no `+`
/// (`1E-1`, `1E16`, `1.2345678901234568E17`); `-0` keeps its sign.
pub fn format_double_ts(d: f64, out: &mut Vec<u8>) {
    if !d.is_finite() {
        out.extend_from_slice(if d.is_nan() { b"NaN" } else if d > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if d == 0.0 {
        out.extend_from_slice(if d.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    // The shortest round-trip digits and the decimal exponent of the first, from `ryu`'s
    // output (`1.5`, `0.001`, `1e16`, `1.2345678901234568e17`): `std`'s `{:e}` gives the
    // same digits (a property test compares the two) at about five times the cost, which a
    // TS.WATERFALL reply of 200,000 points measured as a third of its merge.
    if put_short_decimal(d, out) {
        return;
    }
    let mut rbuf = ryu::Buffer::new();
    let r = rbuf.format_finite(d).as_bytes();
    // From 1 to 1e16 `ryu` writes plain notation, ours but for an integer's `.0` (`123.45`,
    // `1000.0`): copied as is, without the digit walk below (a waterfall reply formats a
    // value per point).
    if (1.0..1e16).contains(&d.abs()) && !r.contains(&b'e') {
        out.extend_from_slice(r.strip_suffix(b".0").unwrap_or(r));
        return;
    }
    let (neg, r) = match r.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, r),
    };
    let mut digits = [0u8; 32];
    let mut nd = 0;
    let (mant, e) = match r.iter().position(|&c| c == b'e') {
        Some(i) => (&r[..i], Some(&r[i + 1..])),
        None => (r, None),
    };
    let dot = mant.iter().position(|&c| c == b'.').unwrap_or(mant.len());
    for &c in mant.iter().filter(|&&c| c != b'.') {
        if nd > 0 || c != b'0' {
            digits[nd] = c;
            nd += 1;
        }
    }
    let exp: i32 = match e {
        // `d` or `d.ddd` times ten to the exponent.
        Some(e) => {
            let (eneg, e) = match e.split_first() {
                Some((b'-', rest)) => (true, rest),
                _ => (false, e),
            };
            let v = e.iter().fold(0i32, |v, &c| v * 10 + i32::from(c - b'0'));
            if eneg {
                -v
            } else {
                v
            }
        }
        // Plain: the first nonzero digit's place.
        None => {
            let lead = mant.iter().take_while(|&&c| c == b'0' || c == b'.').filter(|&&c| c == b'0').count();
            if lead < dot {
                (dot - lead) as i32 - 1
            } else {
                -((lead - dot + 1) as i32)
            }
        }
    };
    while nd > 1 && digits[nd - 1] == b'0' {
        nd -= 1;
    }
    let digits = &digits[..nd];
    if neg {
        out.push(b'-');
    }
    if (0..16).contains(&exp) {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.extend_from_slice(digits);
            out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
        } else {
            out.extend_from_slice(&digits[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'E');
        out.extend_from_slice(itoa::Buffer::new().format(exp).as_bytes());
    }
}

#[cfg(test)]
mod ts_tests {
    use proptest::prelude::*;

    /// The formatting before `ryu`: `std`'s `{:e}` digits, as the reference.
    fn format_double_ts_std(d: f64, out: &mut Vec<u8>) {
        use std::io::Write;
        if !d.is_finite() {
            let _ = write!(out, "{}", if d.is_nan() { "NaN" } else if d > 0.0 { "inf" } else { "-inf" });
            return;
        }
        if d == 0.0 {
            out.extend_from_slice(if d.is_sign_negative() { b"-0" } else { b"0" });
            return;
        }
        // Formatted on the stack (a TS.MRANGE reply formats hundreds of thousands of values).
        let mut sci_buf = [0u8; 48];
        let sci_len = {
            let mut w = &mut sci_buf[..];
            let _ = write!(w, "{d:e}");
            48 - w.len()
        };
        let sci = std::str::from_utf8(&sci_buf[..sci_len]).expect("ASCII");
        let (mant, exp) = sci.split_once('e').expect("LowerExp has an exponent");
        let exp: i32 = exp.parse().expect("an integer exponent");
        let (neg, mant) = match mant.strip_prefix('-') {
            Some(m) => (true, m),
            None => (false, mant),
        };
        let mut digit_buf = [0u8; 48];
        let mut nd = 0;
        for &c in mant.as_bytes() {
            if c != b'.' {
                digit_buf[nd] = c;
                nd += 1;
            }
        }
        let digits = std::str::from_utf8(&digit_buf[..nd]).expect("ASCII");
        if neg {
            out.push(b'-');
        }
        if (0..16).contains(&exp) {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.extend_from_slice(digits.as_bytes());
                out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
            } else {
                out.extend_from_slice(&digits.as_bytes()[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits.as_bytes()[int_len..]);
            }
        } else {
            out.extend_from_slice(mant.as_bytes());
            let _ = write!(out, "E{exp}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn ts_format_matches_std_digits(bits in any::<u64>(), small in -1.0e6f64..1.0e6, big in -1.2e9f64..1.2e9, dec in 0u32..8) {
            // Values with a few decimals (the short-decimal path), up to and past its bound.
            let scaled = (small * 10f64.powi(dec as i32)).round() / 10f64.powi(dec as i32);
            let scaled_big = (big * 10f64.powi(dec as i32)).round() / 10f64.powi(dec as i32);
            for d in [f64::from_bits(bits), small, scaled, big, scaled_big] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                super::format_double_ts(d, &mut a);
                format_double_ts_std(d, &mut b);
                let (a, b) = (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
                // The same digits, but for an exact tie in the last one, which `ryu` rounds to
                // even (as Python's `repr` and C's `printf` do) and `std` up: both read back
                // as `d`, in the same layout.
                prop_assert_eq!(a.len(), b.len(), "{:?}: {} against {}", d, a, b);
                prop_assert!(a == b || (a[..a.len() - 1] == b[..b.len() - 1] && a.parse::<f64>().ok() == Some(d)), "{:?}: {} against {}", d, a, b);
            }
        }
    }

    #[test]
    fn ts_format_matches_redistimeseries() {
        let cases: &[(f64, &str)] = &[
            (0.1, "1E-1"), (0.5, "5E-1"), (1.5, "1.5"), (3.3333333333333335, "3.3333333333333335"), (1e300, "1E300"),
            (123456789012345678.0, "1.2345678901234568E17"), (1e15, "1000000000000000"), (1e16, "1E16"), (-0.1, "-1E-1"),
            (0.000123, "1.23E-4"), (-3.0, "-3"), (0.0, "0"), (-0.0, "-0"), (1.5e10, "15000000000"), (123.456, "123.456"),
            // The edges of the plain fast path.
            (1.0, "1"), (-1.0, "-1"), (0.9999999999999999, "9.999999999999999E-1"), (9999999999999998.0, "9999999999999998"),
            (1000000000000000.5, "1000000000000000.5"), (-1234.5, "-1234.5"),
        ];
        for (d, want) in cases {
            let mut s = Vec::new();
            super::format_double_ts(*d, &mut s);
            assert_eq!(std::str::from_utf8(&s).unwrap(), *want, "{d}");
        }
    }
}
