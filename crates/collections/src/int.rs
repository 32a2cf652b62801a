//! Canonical integer members and the member type handed to callers.
//!
//! A set member is stored in the bitmap only when its bytes are exactly what
//! Redis's `string2ll` accepts, so that formatting the integer back gives the
//! same bytes the client sent: optional '-', no '+', no leading zeros except
//! "0" itself, no "-0", no spaces, at most 20 bytes, inside i64. Anything else
//! ("01", "+1", " 1", "1e3") is an ordinary byte string and forces the general
//! encoding; if we stored "01" as 1 we would answer SMEMBERS with "1".
//!
//! Roaring stores unsigned 64-bit values, so an i64 `v` is stored as
//! `(v as u64) ^ (1 << 63)`: flipping the sign bit keeps signed order as
//! unsigned order, so bitmap iteration (and the SSCAN cursor built on it) walks
//! members from i64::MIN upward.
//!
//! [`Member`] lets iteration hand out bitmap members without a heap
//! allocation each: the decimal digits live inline in the value (20 bytes fit
//! i64::MIN), and it derefs to `[u8]` like a borrowed general member.

use std::fmt;
use std::ops::Deref;

/// Parses `bytes` as a canonical decimal i64: Redis's `string2ll`, the one definition.
pub use abacus_int::string2ll as parse_canonical_i64;

/// The bitmap key of an integer member (sign bit flipped: signed order).
pub(crate) const fn key_of(value: i64) -> u64 {
    (value as u64) ^ (1 << 63)
}

/// The integer member a bitmap key stands for.
pub(crate) const fn value_of(key: u64) -> i64 {
    (key ^ (1 << 63)) as i64
}

/// An integer member with its canonical decimal bytes stored inline.
#[derive(Clone, Copy)]
pub struct IntMember {
    value: i64,
    len: u8,
    digits: [u8; 20],
}

impl IntMember {
    pub fn new(value: i64) -> Self {
        let mut buffer = itoa::Buffer::new();
        let text = buffer.format(value).as_bytes();
        let mut digits = [0u8; 20];
        digits[..text.len()].copy_from_slice(text);
        Self {
            value,
            len: text.len() as u8,
            digits,
        }
    }

    pub(crate) fn from_key(key: u64) -> Self {
        Self::new(value_of(key))
    }

    pub fn value(&self) -> i64 {
        self.value
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[..usize::from(self.len)]
    }
}

/// One set member as handed out by iteration, scans and random picks:
/// either borrowed from a general set or an integer from a bitmap set.
/// Derefs to the member's bytes either way.
#[derive(Clone, Copy)]
pub enum Member<'a> {
    Bytes(&'a [u8]),
    Int(IntMember),
}

impl Member<'_> {
    /// The integer value when the member came from a bitmap set. (A general
    /// set's member "7" is `Bytes`, even though it parses.)
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Member::Int(int) => Some(int.value()),
            Member::Bytes(_) => None,
        }
    }
}

impl Deref for Member<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Member::Bytes(bytes) => bytes,
            Member::Int(int) => int.as_bytes(),
        }
    }
}

impl AsRef<[u8]> for Member<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for Member<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Member<'_> {}

impl PartialEq<[u8]> for Member<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl fmt::Debug for Member<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_grammar_matches_string2ll() {
        for (text, want) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("-7", Some(-7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("99999999999999999999", None),
            ("", None),
            ("-", None),
            ("-0", None),
            ("00", None),
            ("01", None),
            ("-01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("1a", None),
            ("1.0", None),
        ] {
            assert_eq!(parse_canonical_i64(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn keys_keep_signed_order_and_round_trip() {
        let values = [i64::MIN, -5, -1, 0, 1, 5, i64::MAX];
        for pair in values.windows(2) {
            assert!(key_of(pair[0]) < key_of(pair[1]));
        }
        for value in values {
            assert_eq!(value_of(key_of(value)), value);
            let member = IntMember::new(value);
            assert_eq!(member.as_bytes(), value.to_string().as_bytes());
            assert_eq!(parse_canonical_i64(member.as_bytes()), Some(value));
        }
    }
}
