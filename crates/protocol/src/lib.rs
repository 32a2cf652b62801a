//! RESP2/RESP3 codec for Abacus.
//!
//! What this crate is for: turning client bytes into command argument lists
//! ([`RequestParser`]), turning reply values into bytes ([`Frame`], [`encode`]),
//! and, for tests, benchmarks and replication, parsing any RESP frame back
//! ([`parse_frame`]).
//!
//! What it is not: it does no I/O. It never touches sockets, never blocks and
//! never spawns anything; the server owns the connection and its buffers and
//! calls in here with bytes it has already read. That keeps the codec
//! deterministic and fuzzable on plain byte slices.
//!
//! Design rules that hold for every file of the crate:
//! - every input-driven quantity has an explicit limit ([`Limits`],
//!   [`MAX_FRAME_DEPTH`]), and a length prefix never sizes an allocation
//!   on its own (capacities are capped; memory grows only with bytes that
//!   actually arrived);
//! - nothing any input can do panics: no unchecked indexing on wire data;
//! - the request hot path allocates one argument list per command, whose
//!   arguments are zero-copy views of the read buffer ([`Args`]).
//!
//! The behaviour mirrors Redis 7.2's `networking.c` (`processMultibulkBuffer`,
//! `processInlineBuffer`), including its error texts, so existing clients and
//! test suites see the same thing.

mod args;
mod double;
mod frame;
mod inline;
mod reply;
mod request;

#[cfg(test)]
mod proptests;

pub use bytes::{Bytes, BytesMut};

pub use args::{Arg, Args};
pub use double::{format_double, format_double_d2string};
pub use frame::{encode, encode_command, Frame};
pub use inline::split_args;
pub use reply::{parse_frame, parse_frame_with, MAX_FRAME_DEPTH};
pub use request::RequestParser;

/// Which reply dialect a connection speaks (switched by `HELLO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp2,
    Resp3,
}

/// Explicit bounds on what a peer may make the parser hold or expect.
///
/// These are per-command limits; the total size of a client's buffer
/// (Redis's `client-query-buffer-limit`) is the caller's job, because the
/// caller owns the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest accepted bulk string (`proto-max-bulk-len`). Default 512 MiB.
    pub max_bulk_len: usize,
    /// Largest accepted multibulk count (arguments per command).
    /// Default `i32::MAX`, as Redis (`INT_MAX`).
    pub max_multibulk_len: usize,
    /// Longest inline request, and longest `*<n>` / `$<n>` header line, that
    /// may be buffered without a line terminator. Default 64 KiB
    /// (Redis `PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
    /// The client has not authenticated yet: as in Redis, a request may then have at most
    /// 10 arguments of at most 16 KiB each, so an unauthenticated peer cannot make the server
    /// buffer large requests.
    pub unauthenticated: bool,
}

/// Most arguments an unauthenticated request may have (Redis's limit).
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// Largest bulk an unauthenticated request may have (Redis's limit).
pub const UNAUTHENTICATED_MAX_BULK: i64 = 16384;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
            max_inline_len: 64 * 1024,
            unauthenticated: false,
        }
    }
}

/// A fatal protocol violation. Holds the text after `"Protocol error: "`,
/// e.g. `"invalid bulk length"`; the caller replies with it and closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        ProtocolError(msg.into())
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// Parses a signed 64-bit integer with exactly Redis's `string2ll` grammar:
/// optional `-`, then digits with no leading zero (except `"0"` itself),
/// no `+`, no spaces, no `"-0"`, at most 20 characters, no overflow.
///
/// Exposed because command code needs the same grammar (INCR, EXPIRE, ...)
/// and one shared definition keeps them consistent with the protocol.
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

    #[test]
    fn string2ll_grammar() {
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
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn error_display() {
        let e = ProtocolError::new("invalid bulk length");
        assert_eq!(e.to_string(), "Protocol error: invalid bulk length");
    }

    #[test]
    fn default_limits() {
        let l = Limits::default();
        assert_eq!(l.max_bulk_len, 512 << 20);
        assert_eq!(l.max_multibulk_len, i32::MAX as usize);
        assert_eq!(l.max_inline_len, 65536);
    }
}
