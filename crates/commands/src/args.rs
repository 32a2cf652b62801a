//! Argument parsing shared by the command families, with Redis's exact error replies.

use abacus_protocol::{Arg, Bytes, Frame};

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

/// An error that quotes a client's argument as Redis's `%s` does: its bytes as sent, not a
/// lossy UTF-8 copy (the encoder still turns CR and LF into spaces, as Redis).
pub fn err_quoting(prefix: &str, arg: &[u8], suffix: &str) -> Frame {
    Frame::Error([prefix.as_bytes(), arg, suffix.as_bytes()].concat().into())
}

/// Checks that a string of `len` bytes can be allocated at all, before a command that a
/// client sizes (SETRANGE, SETBIT, DEBUG POPULATE) grows one to it: with `proto-max-bulk-len`
/// raised toward its 2^63 maximum (Redis allows it), the allocation would otherwise abort the
/// process. Strings up to 16 MiB pass without a probe; larger ones are reserved (untouched,
/// so no page is faulted in) and freed again. A real shortage later still aborts, as in Redis.
pub fn check_allocatable(len: u64) -> Result<(), Frame> {
    if len <= 16 << 20 {
        return Ok(());
    }
    let fits = usize::try_from(len).is_ok_and(|n| Vec::<u8>::new().try_reserve_exact(n).is_ok());
    if fits {
        Ok(())
    } else {
        Err(Frame::error(format!("ERR out of memory: cannot allocate a string of {len} bytes")))
    }
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
    let v: f64 = match s.parse() {
        Ok(v) => v,
        // strtold also reads C99 hexadecimal floats ("0x10", "-0x1.8p3").
        Err(_) => parse_hex_f64(s).ok_or_else(|| err(ERR_NOT_FLOAT))?,
    };
    if v.is_nan() {
        return Err(err(ERR_NOT_FLOAT));
    }
    Ok(v)
}

/// A C `int` argument (a DB index), with Redis's `getIntFromObjectOrReply` errors.
pub fn parse_i32(a: &[u8]) -> Result<i64, Frame> {
    match parse_i64(a)? {
        v if v < i32::MIN as i64 || v > i32::MAX as i64 => {
            Err(err("ERR value is out of range, value must between -2147483648 and 2147483647"))
        }
        v => Ok(v),
    }
}

/// A C99 hexadecimal float as strtold reads it: [sign] 0x hexdigits [. hexdigits] [p [sign] digits],
/// with at least one hex digit; the whole text must be used.
fn parse_hex_f64(s: &str) -> Option<f64> {
    let (neg, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let rest = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X"))?;
    let (mant, exp) = match rest.find(['p', 'P']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = mant.split_once('.').unwrap_or((mant, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut m = 0f64;
    for c in int_part.chars().chain(frac_part.chars()) {
        m = m * 16.0 + c.to_digit(16)? as f64;
    }
    let mut e: i64 = -4 * frac_part.len() as i64;
    if let Some(exp) = exp {
        let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let x: i64 = digits.parse().unwrap_or(i64::MAX / 2).min(1 << 20);
        e += if exp.starts_with('-') { -x } else { x };
    }
    let v = if m == 0.0 { 0.0 } else { m * 2f64.powi(e.clamp(-1 << 20, 1 << 20) as i32) };
    Some(if neg { -v } else { v })
}

/// SRANDMEMBER / HRANDFIELD counts: any i64 but i64::MIN, whose negation (a count with
/// repeats) would not fit. The text, typo included, is Redis's.
pub fn parse_random_count(a: &[u8]) -> Result<i64, Frame> {
    match parse_i64(a)? {
        i64::MIN => Err(err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")),
        v => Ok(v),
    }
}

/// Most members a negative SRANDMEMBER / HRANDFIELD count may ask for. Redis has no bound
/// and will try to build a reply of 9.2e18 elements; here the reply is built in memory first,
/// so it is bounded like every other buffer (16M bulk strings: about 1 GiB of reply).
pub const RANDOM_WITH_REPEATS_MAX: u64 = 1 << 24;

pub fn err_too_many_repeats() -> Frame {
    Frame::error(format!("ERR count with repeats exceeds the server limit ({RANDOM_WITH_REPEATS_MAX})"))
}

/// The cursor of SSCAN/HSCAN: an unsigned 64-bit decimal.
/// Parsed like Redis's `strtoul`: an optional sign (`-n` wraps to 2^64 - n) and an empty
/// string is cursor 0; leading spaces, trailing bytes and overflow are invalid.
pub fn parse_cursor(a: &[u8]) -> Result<u64, Frame> {
    let invalid = || err("ERR invalid cursor");
    let (neg, digits) = match a.first() {
        None => return Ok(0),
        Some(b'-') => (true, &a[1..]),
        Some(b'+') => (false, &a[1..]),
        Some(_) => (false, a),
    };
    if digits.is_empty() {
        return Err(invalid());
    }
    let v: u64 = std::str::from_utf8(digits).ok().filter(|d| d.bytes().all(|b| b.is_ascii_digit())).and_then(|d| d.parse().ok()).ok_or_else(invalid)?;
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// The options of SSCAN/HSCAN after the cursor (`args[3..]`): MATCH pattern, COUNT n.
pub struct ScanOpts {
    /// None when absent or a lone `*` (matches everything, as Redis special-cases it).
    pub pattern: Option<Bytes>,
    pub count: usize,
}

impl ScanOpts {
    pub fn parse(opts: &[Arg]) -> Result<ScanOpts, Frame> {
        let mut parsed = ScanOpts { pattern: None, count: 10 };
        for pair in opts.chunks(2) {
            match pair {
                [name, value] if is(name, "count") => {
                    parsed.count = match parse_i64(value)? {
                        c if c >= 1 => usize::try_from(c).unwrap_or(usize::MAX),
                        _ => return Err(err(ERR_SYNTAX)),
                    };
                }
                [name, value] if is(name, "match") => {
                    parsed.pattern = (&value[..] != b"*").then(|| Bytes::copy_from_slice(value));
                }
                _ => return Err(err(ERR_SYNTAX)),
            }
        }
        Ok(parsed)
    }

    pub fn matches(&self, member: &[u8]) -> bool {
        self.pattern.as_ref().is_none_or(|p| abacus_keyspace::glob_match(p, member, false))
    }
}

/// The reply of a SCAN-like command: the next cursor and the elements.
pub fn scan_reply(cursor: u64, items: Vec<Frame>) -> Frame {
    Frame::Array(vec![Frame::bulk(itoa::Buffer::new().format(cursor).as_bytes().to_vec()), Frame::Array(items)])
}

/// A bulk string copied from borrowed bytes.
/// A number as a person reads it: plain notation, the exact digits of a decimal (`12055.32`,
/// not `1.2055320000000002e+4`); a RESP3 double, a bulk string in RESP2.
pub fn number_frame(x: abacus_int::Number) -> Frame {
    Frame::DoubleText(Bytes::from(x.to_string()))
}

pub fn bulk(bytes: &[u8]) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(bytes))
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
        assert_eq!(parse_f64(b"0x10").unwrap(), 16.0);
        assert_eq!(parse_f64(b"-0x1.8p3").unwrap(), -12.0);
        assert_eq!(parse_f64(b"0X.8").unwrap(), 0.5);
        assert!(parse_f64(b"0x").is_err());
        assert!(parse_f64(b"0x1p").is_err());
        assert!(parse_f64(b"0x1g").is_err());
    }
}
