//! Argument parsing shared by the command families, with Redis's exact error replies.

use abacus_protocol::Frame;

pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_NO_SUCH_KEY: &str = "ERR no such key";
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

pub fn err(msg: &str) -> Frame {
    Frame::error(msg.to_string())
}

/// Parses a signed 64-bit integer the way Redis's string2ll does (no '+', no spaces, no
/// leading zeros).
pub fn parse_i64(a: &[u8]) -> Result<i64, Frame> {
    abacus_keyspace::value::parse_canonical_i64(a).ok_or_else(|| err(ERR_NOT_INTEGER))
}

/// Parses a double the way Redis's string2ld/strtold does for INCRBYFLOAT: decimal or
/// exponent forms and inf; no spaces, no NaN.
pub fn parse_f64(a: &[u8]) -> Result<f64, Frame> {
    let s = std::str::from_utf8(a).map_err(|_| err(ERR_NOT_FLOAT))?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) || s.len() > 5000 {
        return Err(err(ERR_NOT_FLOAT));
    }
    let v: f64 = s.parse().map_err(|_| err(ERR_NOT_FLOAT))?;
    if v.is_nan() {
        return Err(err(ERR_NOT_FLOAT));
    }
    Ok(v)
}

/// Case-insensitive comparison of an argument with an option name.
pub fn is(a: &[u8], opt: &str) -> bool {
    a.eq_ignore_ascii_case(opt.as_bytes())
}

/// Formats an integer as its decimal bytes.
pub fn int_bytes(v: i64) -> Vec<u8> {
    itoa::Buffer::new().format(v).as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5").unwrap(), 1.5);
        assert_eq!(parse_f64(b"5.0e3").unwrap(), 5000.0);
        assert!(parse_f64(b" 1").is_err());
        assert!(parse_f64(b"nan").is_err());
        assert!(parse_f64(b"abc").is_err());
        assert!(parse_f64(b"inf").unwrap().is_infinite());
    }
}
