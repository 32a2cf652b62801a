//! Values stored under a key.
//!
//! Only strings exist in this version; hashes, sets and sketches join as variants of [`Value`]
//! in their own issues. Strings are plain byte vectors: mutation in place (APPEND, SETRANGE,
//! SETBIT) needs an owned, growable buffer, and copying a value out for GET is cheap compared
//! with the network round trip. The encoding names OBJECT ENCODING reports are derived from the
//! bytes the way Redis chooses them at write time.

/// A stored value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(Vec<u8>),
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
            Value::Str(_) => ValueType::String,
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
        }
    }

    /// Bytes this value occupies on the heap, for memory estimates.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.capacity(),
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
}
