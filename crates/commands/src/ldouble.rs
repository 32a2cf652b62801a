//! The `long double` arithmetic of Redis's INCRBYFLOAT and HINCRBYFLOAT, emulated exactly.
//!
//! Redis (on x86-64, where `long double` is the 80-bit extended format: a 64-bit significand
//! and a 15-bit exponent) reads both operands with `strtold`, adds them, and stores
//! `printf("%.17Lf")` with trailing zeros removed. The 17 decimals show the rounding of the
//! 64-bit significand, so 999.999 + 0.1 is "1000.09899999999999998" there, and 1e308 prints
//! all 309 digits of the long double nearest to it. This module rounds like the hardware and
//! glibc (to nearest, ties to even) with exact big-integer arithmetic: parse a decimal or C99
//! hexadecimal text, add, print.

use std::cmp::Ordering;

/// A `long double`: finite `(-1)^neg * mant * 2^exp`, or an infinity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ld {
    Finite { neg: bool, mant: u64, exp: i64 },
    Inf { neg: bool },
}

/// Weight (power of two) of the lowest significand bit of the smallest denormal.
const MIN_LSB: i64 = -16445;
/// Largest weight the top significand bit of a finite value may have.
const MAX_TOP: i64 = 16383;
/// Redis's MAX_LONG_DOUBLE_CHARS: longer operand texts are refused.
const MAX_CHARS: usize = 5 * 1024;

pub const ZERO: Ld = Ld::Finite { neg: false, mant: 0, exp: 0 };

/// Redis's `string2ld`: the value of `text`, or None if it is not a valid float for Redis
/// (empty, too long, leading whitespace, not wholly a `strtold` number, NaN, or out of range:
/// overflow to infinity or underflow to zero). A literal "inf"/"infinity" is Some(Inf).
pub fn parse(text: &[u8]) -> Option<Ld> {
    if text.is_empty() || text.len() >= MAX_CHARS || matches!(text[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (neg, rest) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(Ld::Inf { neg });
    }
    let hex = rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x';
    let (radix, body) = if hex { (16u32, &rest[2..]) } else { (10, rest) };
    // mantissa digits [. digits], then the exponent (p for hex, e for decimal)
    let mut n: Big = Vec::new();
    // digits read, significant ones (after leading zeros), and those after the point
    let (mut digits, mut sig, mut frac, mut i, mut seen_dot) = (0usize, 0i64, 0i64, 0usize, false);
    while i < body.len() {
        let c = body[i];
        if c == b'.' && !seen_dot {
            seen_dot = true;
        } else if let Some(d) = (c as char).to_digit(radix) {
            mul_small_add(&mut n, radix, d);
            digits += 1;
            sig += !n.is_empty() as i64;
            frac += seen_dot as i64;
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    let mut exp: i64 = 0;
    if i < body.len() {
        if (body[i] | 0x20) != if hex { b'p' } else { b'e' } {
            return None;
        }
        i += 1;
        let eneg = match body.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        if i == body.len() {
            return None;
        }
        for &c in &body[i..] {
            if !c.is_ascii_digit() {
                return None;
            }
            exp = (exp * 10 + (c - b'0') as i64).min(1 << 40);
        }
        if eneg {
            exp = -exp;
        }
    }
    if is_zero(&n) {
        return Some(Ld::Finite { neg, mant: 0, exp: 0 });
    }
    let v = if hex {
        round(&n, exp - 4 * frac, neg)
    } else {
        let e10 = exp - frac;
        // Far out of range either way: leave before building huge powers of ten.
        let mag = e10 + sig;
        if mag > 5000 {
            return None;
        }
        if mag < -5000 {
            return None;
        }
        if e10 >= 0 {
            round(&mul(&n, &pow10(e10 as u32)), 0, neg)
        } else {
            // n / 10^-e10: a quotient of at least 66 bits plus a sticky bit for the remainder.
            let den = pow10((-e10) as u32);
            let s = (bitlen(&den) as i64 - bitlen(&n) as i64 + 66).max(0);
            let (q, r) = divmod(&shl(&n, s as u64), &den);
            let mut q2 = shl(&q, 1);
            if !is_zero(&r) {
                add_small(&mut q2, 1);
            }
            round(&q2, -s - 1, neg)
        }
    };
    match v {
        Ld::Finite { mant: 0, .. } | Ld::Inf { .. } => None, // ERANGE: underflow or overflow
        v => Some(v),
    }
}

/// `a + b` rounded to a long double; None if the sum is infinite or NaN.
pub fn add(a: Ld, b: Ld) -> Option<Ld> {
    let (Ld::Finite { neg: an, mant: am, exp: ae }, Ld::Finite { neg: bn, mant: bm, exp: be }) = (a, b) else {
        return None;
    };
    if am == 0 && bm == 0 {
        return Some(Ld::Finite { neg: an && bn, mant: 0, exp: 0 });
    }
    if am == 0 {
        return Some(b);
    }
    if bm == 0 {
        return Some(a);
    }
    let e = ae.min(be);
    let x = shl(&from_u64(am), (ae - e) as u64);
    let y = shl(&from_u64(bm), (be - e) as u64);
    let v = if an == bn {
        round(&add_big(&x, &y), e, an)
    } else {
        match cmp(&x, &y) {
            Ordering::Equal => ZERO,
            Ordering::Greater => round(&sub(&x, &y), e, an),
            Ordering::Less => round(&sub(&y, &x), e, bn),
        }
    };
    match v {
        Ld::Inf { .. } => None,
        v => Some(v),
    }
}

/// `printf("%.17Lf")` with the trailing zeros (and a trailing '.') removed, "-0" as "0": the
/// text Redis stores (ld2string's LD_STR_HUMAN mode). Infinities are never stored.
pub fn to_human(v: Ld) -> Vec<u8> {
    let Ld::Finite { neg, mant, exp } = v else {
        return if matches!(v, Ld::Inf { neg: true }) { b"-inf".to_vec() } else { b"inf".to_vec() };
    };
    // round(mant * 2^exp * 10^17), ties to even
    let n = mul(&from_u64(mant), &pow10(17));
    let q = if exp >= 0 {
        shl(&n, exp as u64)
    } else {
        let s = (-exp) as u64;
        let mut q = shr(&n, s);
        if bit(&n, s - 1) && (any_below(&n, s - 1) || bit(&q, 0)) {
            add_small(&mut q, 1);
        }
        q
    };
    let mut digits = to_decimal(&q);
    while digits.len() < 18 {
        digits.insert(0, b'0');
    }
    let point = digits.len() - 17;
    let mut out = Vec::with_capacity(digits.len() + 2);
    if neg {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[..point]);
    let frac = &digits[point..];
    let keep = frac.iter().rposition(|&c| c != b'0').map_or(0, |p| p + 1);
    if keep > 0 {
        out.push(b'.');
        out.extend_from_slice(&frac[..keep]);
    }
    if out == b"-0" {
        out.remove(0);
    }
    out
}

/// `n * 2^e` rounded to the nearest long double (ties to even), denormals and overflow to
/// infinity included.
fn round(n: &Big, e: i64, neg: bool) -> Ld {
    let bl = bitlen(n) as i64;
    if bl == 0 {
        return Ld::Finite { neg, mant: 0, exp: 0 };
    }
    let mut lsb = (e + bl - 64).max(MIN_LSB);
    let shift = lsb - e;
    let mant: u128 = if shift <= 0 {
        (low_u128(n) as u128) << (-shift)
    } else {
        let s = shift as u64;
        let mut q = low_u128(&shr(n, s));
        if bit(n, s - 1) && (any_below(n, s - 1) || q & 1 == 1) {
            q += 1;
        }
        if q == 1u128 << 64 {
            q >>= 1;
            lsb += 1;
        }
        q
    };
    if mant != 0 && lsb + (128 - mant.leading_zeros() as i64) - 1 > MAX_TOP {
        return Ld::Inf { neg };
    }
    Ld::Finite { neg, mant: mant as u64, exp: lsb }
}

// ---------------------------------------------------------------------------------------
// A minimal unsigned big integer: little-endian 32-bit limbs, no trailing zero limbs.

type Big = Vec<u32>;

fn trim(mut v: Big) -> Big {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

fn is_zero(v: &[u32]) -> bool {
    v.iter().all(|&l| l == 0)
}

fn from_u64(x: u64) -> Big {
    trim(vec![x as u32, (x >> 32) as u32])
}

fn low_u128(v: &[u32]) -> u128 {
    v.iter().take(4).enumerate().fold(0u128, |acc, (i, &l)| acc | (l as u128) << (32 * i))
}

fn bitlen(v: &[u32]) -> u64 {
    match v.iter().rposition(|&l| l != 0) {
        None => 0,
        Some(i) => i as u64 * 32 + 32 - v[i].leading_zeros() as u64,
    }
}

fn bit(v: &[u32], i: u64) -> bool {
    v.get((i / 32) as usize).is_some_and(|&l| l >> (i % 32) & 1 == 1)
}

/// Any bit set below position `i`.
fn any_below(v: &[u32], i: u64) -> bool {
    let (limbs, bits) = ((i / 32) as usize, i % 32);
    v.iter().take(limbs).any(|&l| l != 0) || (bits > 0 && v.get(limbs).is_some_and(|&l| l & ((1u32 << bits) - 1) != 0))
}

fn mul_small_add(v: &mut Big, m: u32, a: u32) {
    let mut carry = a as u64;
    for l in v.iter_mut() {
        let x = *l as u64 * m as u64 + carry;
        *l = x as u32;
        carry = x >> 32;
    }
    if carry != 0 {
        v.push(carry as u32);
    }
}

fn add_small(v: &mut Big, a: u32) {
    mul_small_add(v, 1, a);
}

fn pow10(n: u32) -> Big {
    let mut v = vec![1];
    for _ in 0..n / 9 {
        mul_small_add(&mut v, 1_000_000_000, 0);
    }
    mul_small_add(&mut v, 10u32.pow(n % 9), 0);
    v
}

fn mul(a: &[u32], b: &[u32]) -> Big {
    let mut out = vec![0u32; a.len() + b.len()];
    for (i, &x) in a.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.iter().enumerate() {
            let t = out[i + j] as u64 + x as u64 * y as u64 + carry;
            out[i + j] = t as u32;
            carry = t >> 32;
        }
        out[i + b.len()] = carry as u32;
    }
    trim(out)
}

fn shl(v: &[u32], n: u64) -> Big {
    let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
    let mut out = vec![0u32; limbs];
    let mut carry = 0u32;
    for &l in v {
        out.push(if bits == 0 { l } else { l << bits | carry });
        carry = if bits == 0 { 0 } else { l >> (32 - bits) };
    }
    out.push(carry);
    trim(out)
}

fn shr(v: &[u32], n: u64) -> Big {
    let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
    if limbs >= v.len() {
        return Vec::new();
    }
    let src = &v[limbs..];
    let out = (0..src.len())
        .map(|i| {
            let hi = if bits == 0 { 0 } else { src.get(i + 1).map_or(0, |&h| h << (32 - bits)) };
            src[i] >> bits | hi
        })
        .collect();
    trim(out)
}

fn cmp(a: &[u32], b: &[u32]) -> Ordering {
    let (a, b) = (
        &a[..a.len() - a.iter().rev().take_while(|&&l| l == 0).count()],
        &b[..b.len() - b.iter().rev().take_while(|&&l| l == 0).count()],
    );
    a.len().cmp(&b.len()).then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

fn add_big(a: &[u32], b: &[u32]) -> Big {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0u64;
    for i in 0..a.len().max(b.len()) {
        let t = *a.get(i).unwrap_or(&0) as u64 + *b.get(i).unwrap_or(&0) as u64 + carry;
        out.push(t as u32);
        carry = t >> 32;
    }
    out.push(carry as u32);
    trim(out)
}

/// `a - b`, a >= b.
fn sub(a: &[u32], b: &[u32]) -> Big {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i64;
    for i in 0..a.len() {
        let mut t = a[i] as i64 - *b.get(i).unwrap_or(&0) as i64 - borrow;
        borrow = (t < 0) as i64;
        if t < 0 {
            t += 1 << 32;
        }
        out.push(t as u32);
    }
    trim(out)
}

/// (a / b, a % b) by binary long division (the quotients here have about 67 bits).
fn divmod(a: &[u32], b: &[u32]) -> (Big, Big) {
    let mut r = trim(a.to_vec());
    let mut q: Big = Vec::new();
    let (la, lb) = (bitlen(a), bitlen(b));
    if la < lb {
        return (q, r);
    }
    for i in (0..=la - lb).rev() {
        let d = shl(b, i);
        if cmp(&r, &d) != Ordering::Less {
            r = sub(&r, &d);
            q = add_big(&q, &shl(&[1], i));
        }
    }
    (q, r)
}

fn to_decimal(v: &[u32]) -> Vec<u8> {
    let mut v = trim(v.to_vec());
    let mut chunks = Vec::new();
    while !v.is_empty() {
        let mut rem = 0u64;
        for l in v.iter_mut().rev() {
            let x = rem << 32 | *l as u64;
            *l = (x / 1_000_000_000) as u32;
            rem = x % 1_000_000_000;
        }
        chunks.push(rem as u32);
        v = trim(v);
    }
    let mut out = chunks.pop().map_or_else(|| b"0".to_vec(), |c| c.to_string().into_bytes());
    for c in chunks.iter().rev() {
        out.extend_from_slice(format!("{c:09}").as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INCRBYFLOAT's text for `a + b` (None: an error).
    fn incr(a: &str, b: &str) -> Option<String> {
        let s = add(parse(a.as_bytes())?, parse(b.as_bytes())?)?;
        Some(String::from_utf8(to_human(s)).unwrap())
    }

    #[test]
    fn matches_redis_7_on_x86_64() {
        // Expected values are redis-server 7.0's replies.
        assert_eq!(incr("0.1", "0.2").unwrap(), "0.3");
        assert_eq!(incr("10.5", "0.1").unwrap(), "10.6");
        assert_eq!(incr("999.999", "0.1").unwrap(), "1000.09899999999999998");
        assert_eq!(incr("1000", "5.0000000000000001").unwrap(), "1005.00000000000000011");
        assert_eq!(incr("18446744073709551616", "-1e-3").unwrap(), "18446744073709551616");
        assert_eq!(incr("5.0e3", "2.0e2").unwrap(), "5200");
        assert_eq!(incr("0", "1e308").unwrap(), "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048");
        assert_eq!(incr("1.7976931348623157e308", "1").unwrap(), "179769313486231569995921046774104434048386446944329178485314420765176628523124396354701868608387085564428793419425520689308708363451136055357897278026477617073498977686288394835618163294045594434929537447290627480669417384648879122776218333598953852832103282504751611691208117720159985926376802466863339536384");
        assert_eq!(incr("0", "1e400").unwrap().len(), 401);
        assert_eq!(incr("3", "-3").unwrap(), "0");
        assert_eq!(incr("-1e-30", "0").unwrap(), "0");
        assert_eq!(incr("0x10", "-0x1.8p3").unwrap(), "4");
        assert_eq!(incr("-0", "-0").unwrap(), "0");
        assert_eq!(incr("1", "inf"), None);
        assert_eq!(incr("1e4932", "1e4932"), None);
    }

    #[test]
    fn parses_like_string2ld() {
        for bad in [
            "", " 1", "1 ", "abc", "nan", "-nan", "1e", "1e+", "0x", "0x1p", ".", "1_0", "1e99999", "1e-99999",
            "infin", "--1",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse(b"inf"), Some(Ld::Inf { neg: false }));
        assert_eq!(parse(b"-Infinity"), Some(Ld::Inf { neg: true }));
        assert_eq!(parse(b"1.5"), Some(Ld::Finite { neg: false, mant: 3 << 62, exp: -63 }));
        assert_eq!(parse(b".5"), parse(b"5e-1"));
        assert_eq!(parse(b"5."), parse(b"5"));
        assert_eq!(parse(b"+5"), parse(b"5"));
        assert!(parse(b"1e-4940").is_some()); // a denormal is accepted
        let long = |n| [&b"0."[..], &vec![b'1'; n]].concat();
        assert!(parse(&long(5117)).is_some()); // 5119 characters
        assert!(parse(&long(5118)).is_none()); // 5120: Redis's buffer is too small
        let mut one = vec![b'0'; 5100];
        one.push(b'1');
        assert_eq!(parse(&one), parse(b"1"));
    }

    #[test]
    fn rounds_ties_to_even() {
        // 2^64 + 1 is halfway between 2^64 and 2^64 + 2: to even (2^64).
        assert_eq!(incr("18446744073709551616", "1").unwrap(), "18446744073709551616");
        assert_eq!(incr("18446744073709551618", "1").unwrap(), "18446744073709551620");
    }
}
