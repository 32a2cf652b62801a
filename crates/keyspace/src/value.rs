//! Values stored under a key.
//!
//! Strings are plain byte vectors: mutation in place (APPEND, SETRANGE, SETBIT) needs an
//! owned, growable buffer, and copying a value out for GET is cheap compared with the network
//! round trip. The encoding names OBJECT ENCODING reports are derived from the bytes the way
//! Redis chooses them at write time. Hashes and sets join as variants in their own issues.
//!
//! A postgresql-hll sketch (`HLL.*` commands) is a string for every client-visible purpose:
//! TYPE says `string`, GET returns exactly the HLL storage specification's bytes, and SET
//! accepts bytes PostgreSQL or java-hll wrote. Re-parsing those bytes on every HLL.ADD would
//! cost a decode of the whole sketch per element, so the HLL commands keep the decoded form
//! ([`Value::Hll`]) once they have parsed a value. The two forms convert lazily, each on first
//! use by the other side:
//! - a plain string command (GET, APPEND, GETRANGE, SETBIT, LCS...) reaches the bytes only
//!   through [`Value::string_bytes_mut`], which re-serializes a decoded sketch into
//!   [`Value::Str`] first, so no string command can see anything but bytes;
//! - an HLL command on [`Value::Str`] decodes it (strictly) and stores [`Value::Hll`] back.
//!
//! Redis's own HyperLogLogs (`PF*`) are already byte-oriented (the `abacus-redis-hll` crate
//! works on the string itself), so they stay [`Value::Str`].
//!
//! Equality compares representations: a `Hll` and the `Str` of its bytes are not `==`.

use abacus_hll::Hll;

/// A stored value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(Vec<u8>),
    /// A decoded postgresql-hll sketch: a string whose bytes are `to_bytes()`.
    Hll(Box<Hll>),
}

/// The type names TYPE reports and SCAN's TYPE option matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    String,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
        }
    }
}

/// Redis stores strings up to 44 bytes in one allocation with the object header ("embstr").
const EMBSTR_MAX_LEN: usize = 44;

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Str(_) | Value::Hll(_) => ValueType::String,
        }
    }

    /// The encoding OBJECT ENCODING reports, as Redis would pick it for the same bytes.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => {
                if s.len() <= 20 && parse_canonical_i64(s).is_some() {
                    "int"
                } else if s.len() <= EMBSTR_MAX_LEN {
                    "embstr"
                } else {
                    "raw"
                }
            }
            Value::Hll(_) => "hll",
        }
    }

    /// Bytes this value occupies on the heap, for memory estimates.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.capacity(),
            Value::Hll(h) => {
                let data = h.registers().map_or(0, <[u8]>::len) + h.explicit_values().map_or(0, |v| v.len() * 8);
                std::mem::size_of::<Hll>() + data
            }
        }
    }

    /// The bytes of a string value for reading or modification. A decoded sketch is
    /// serialized and becomes [`Value::Str`] (its bytes are what clients must see, and a
    /// modification makes them a plain string). `None` for non-string types (none exist yet).
    pub fn string_bytes_mut(&mut self) -> Option<&mut Vec<u8>> {
        if let Value::Hll(h) = self {
            *self = Value::Str(h.to_bytes());
        }
        match self {
            Value::Str(s) => Some(s),
            Value::Hll(_) => None,
        }
    }
}

/// Parses `s` as a signed 64-bit integer in canonical decimal form (no sign '+', no leading
/// zeros, no spaces), as Redis's string2ll does. `None` otherwise.
pub fn parse_canonical_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = (c - b'0') as i64;
        v = v.checked_mul(10)?;
        v = if neg { v.checked_sub(d)? } else { v.checked_add(d)? };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers() {
        assert_eq!(parse_canonical_i64(b"0"), Some(0));
        assert_eq!(parse_canonical_i64(b"-1"), Some(-1));
        assert_eq!(parse_canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_canonical_i64(b"9223372036854775808"), None);
        for bad in [&b""[..], b"01", b"+1", b" 1", b"1 ", b"-", b"-0", b"1a", b"00"] {
            assert_eq!(parse_canonical_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn encodings() {
        assert_eq!(Value::Str(b"123".to_vec()).encoding(), "int");
        assert_eq!(Value::Str(b"0123".to_vec()).encoding(), "embstr");
        assert_eq!(Value::Str(vec![b'a'; 44]).encoding(), "embstr");
        assert_eq!(Value::Str(vec![b'a'; 45]).encoding(), "raw");
    }

    #[test]
    fn a_decoded_sketch_is_a_string_of_its_bytes() {
        let mut h = Hll::new(abacus_hll::Params::default());
        for i in 0..1000 {
            h.add_raw(abacus_hll::hash_bigint(i, 0));
        }
        let bytes = h.to_bytes();
        let mut v = Value::Hll(Box::new(h.clone()));
        assert_eq!(v.value_type(), ValueType::String);
        assert_eq!(v.encoding(), "hll");
        assert!(v.heap_bytes() >= 2048, "one byte per register at least");
        // A string command sees exactly the serialized bytes, and the value becomes a string.
        assert_eq!(v.string_bytes_mut().unwrap(), &bytes);
        assert_eq!(v, Value::Str(bytes.clone()));
        // ...which decodes back to the same sketch.
        assert_eq!(Hll::from_bytes(&bytes).unwrap(), h);
        // Modifying the bytes modifies the string, not a cached copy.
        v.string_bytes_mut().unwrap().push(0);
        assert_eq!(v, Value::Str([bytes, vec![0]].concat()));
    }
}
