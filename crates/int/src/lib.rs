//! Redis's integer grammar, defined once.
//!
//! Redis reads every integer it is given (bulk lengths, INCR's operand, EXPIRE's seconds,
//! set members it may store as integers, configuration values) with `string2ll`, and the
//! same bytes must mean the same thing everywhere: a member `"01"` that one place took for
//! 1 and another for a string would make SMEMBERS answer with bytes the client never sent.
//! So every Abacus crate that reads an integer calls [`string2ll`] here, at the bottom of the
//! layers (it depends on nothing).
//!
//! Exact decimals ([`Dec`], [`Number`]: `number.rs`) live here too, for the same reason: a
//! sum's text means the same value in the summarizer, its queries, ATTRIBUTE and the export.
//!
//! No `unsafe` code.

#![forbid(unsafe_code)]

mod number;
pub use number::{Dec, Number, MAX_DIGITS, MAX_SCALE};
/// Numbers and byte strings in the partial states cluster nodes exchange.
pub mod wire;

/// Parses a signed 64-bit integer with exactly Redis's `string2ll` grammar: optional `-`,
/// then digits with no leading zero (except `"0"` itself), no `+`, no spaces, no `"-0"`, at
/// most 20 characters, no overflow. The accepted strings are exactly the canonical decimal
/// forms: formatting the result gives back the same bytes.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    // Redis rejects len >= LONG_STR_SIZE (21) before looking at the digits.
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &c in rest {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        // i64::MIN's magnitude is one more than i64::MAX.
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some(0u64.wrapping_sub(v) as i64)
    } else {
        i64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn grammar() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"123"), Some(123));
        assert_eq!(string2ll(b"-5"), Some(-5));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"00",
            b"-0",
            b"-01",
            b"1a",
            b"1.0",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"99999999999999999999",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    proptest! {
        #[test]
        fn every_i64_round_trips(v in any::<i64>()) {
            prop_assert_eq!(string2ll(v.to_string().as_bytes()), Some(v));
        }

        /// Whatever is accepted is canonical: its decimal form is the input itself.
        #[test]
        fn accepted_means_canonical(s in proptest::collection::vec(prop_oneof![
            Just(b'-'), Just(b'+'), Just(b' '), Just(b'0'), Just(b'1'), Just(b'9'), any::<u8>()
        ], 0..24)) {
            if let Some(v) = string2ll(&s) {
                prop_assert_eq!(v.to_string().into_bytes(), s);
            }
        }
    }
}
