//! Stateless parser of complete RESP2/RESP3 frames of any type.
//!
//! Used by tests, benchmarks and replication to read what a server sent.
//! It is deliberately simple: each call parses from the start of the slice
//! and returns `Ok(None)` if the frame is not complete yet, so a caller that
//! feeds a large frame in many small pieces re-parses it each time (quadratic
//! in the worst case). That is acceptable off the hot path; the request path
//! uses the incremental [`crate::RequestParser`] instead.
//!
//! Hostile input is still harmless: nesting is limited to
//! [`MAX_FRAME_DEPTH`] (recursion cannot overflow the stack), counts and
//! lengths are checked against [`Limits`], aggregate capacity taken from a
//! count prefix is capped, and payloads are copied only once fully present.
//! Unlike the request parser, this one is strict about CRLF after lines and
//! payloads: a reply stream with a wrong terminator is corrupt, not a client
//! quirk to tolerate. Attributes (`|`) are parsed and dropped; streamed
//! types (`$?`, `*?`) are not supported and are reported as errors.

use bytes::Bytes;

use crate::frame::Frame;
use crate::{string2ll, Limits, ProtocolError};

/// Deepest accepted nesting of aggregates (attributes count as a level).
pub const MAX_FRAME_DEPTH: usize = 128;

/// Capacity reserved up front for an aggregate, whatever its count claims.
const MAX_PREALLOC_ITEMS: usize = 1024;

type Step<T> = Result<Option<T>, ProtocolError>;

/// Parses one complete frame from the front of `buf` with default
/// [`Limits`]: `Ok(Some((frame, consumed)))`, or `Ok(None)` if incomplete.
pub fn parse_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
    parse_frame_with(buf, &Limits::default())
}

/// [`parse_frame`] with explicit limits (`max_bulk_len` bounds bulk and
/// line lengths, `max_multibulk_len` bounds aggregate counts).
pub fn parse_frame_with(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let mut cur = Cursor {
        buf,
        pos: 0,
        limits,
    };
    Ok(cur.frame(0)?.map(|f| (f, cur.pos)))
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    limits: &'a Limits,
}

/// `let Some(x) = expr? else { return Ok(None) }` without the noise.
macro_rules! need {
    ($e:expr) => {
        match $e? {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}

impl<'a> Cursor<'a> {
    fn frame(&mut self, depth: usize) -> Step<Frame> {
        if depth > MAX_FRAME_DEPTH {
            return Err(ProtocolError::new("too deep"));
        }
        loop {
            let Some(&kind) = self.buf.get(self.pos) else {
                return Ok(None);
            };
            self.pos += 1;
            let frame = match kind {
                b'+' => Frame::Simple(Bytes::copy_from_slice(need!(self.line()))),
                b'-' => Frame::Error(Bytes::copy_from_slice(need!(self.line()))),
                b':' => {
                    let line = need!(self.line());
                    Frame::Integer(
                        string2ll(line).ok_or_else(|| ProtocolError::new("invalid integer"))?,
                    )
                }
                b'$' => match need!(self.blob_len()) {
                    None => Frame::Null,
                    Some(len) => Frame::Bulk(Bytes::copy_from_slice(need!(self.payload(len)))),
                },
                b'!' => match need!(self.blob_len()) {
                    None => return Err(ProtocolError::new("invalid bulk length")),
                    Some(len) => Frame::Error(Bytes::copy_from_slice(need!(self.payload(len)))),
                },
                b'=' => match need!(self.blob_len()) {
                    Some(len) if len >= 4 => {
                        let p = need!(self.payload(len));
                        match p {
                            [a, b, c, b':', text @ ..] => Frame::Verbatim {
                                format: [*a, *b, *c],
                                text: Bytes::copy_from_slice(text),
                            },
                            _ => return Err(ProtocolError::new("invalid verbatim string")),
                        }
                    }
                    _ => return Err(ProtocolError::new("invalid verbatim string")),
                },
                b'_' => {
                    if !need!(self.line()).is_empty() {
                        return Err(ProtocolError::new("invalid null"));
                    }
                    Frame::Null
                }
                b'#' => match need!(self.line()) {
                    b"t" => Frame::Boolean(true),
                    b"f" => Frame::Boolean(false),
                    _ => return Err(ProtocolError::new("invalid boolean")),
                },
                b',' => {
                    let line = need!(self.line());
                    let d = std::str::from_utf8(line)
                        .ok()
                        .filter(|s| !s.is_empty())
                        .and_then(|s| s.parse::<f64>().ok())
                        .ok_or_else(|| ProtocolError::new("invalid double"))?;
                    Frame::Double(d)
                }
                b'(' => {
                    let line = need!(self.line());
                    let digits = line.strip_prefix(b"-").unwrap_or(line);
                    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                        return Err(ProtocolError::new("invalid big number"));
                    }
                    Frame::BigNumber(Bytes::copy_from_slice(line))
                }
                b'*' => match need!(self.count()) {
                    None => Frame::NullArray,
                    Some(n) => Frame::Array(need!(self.items(n, depth))),
                },
                b'~' => {
                    let n = need!(self.some_count());
                    Frame::Set(need!(self.items(n, depth)))
                }
                b'>' => {
                    let n = need!(self.some_count());
                    Frame::Push(need!(self.items(n, depth)))
                }
                b'%' => {
                    let n = need!(self.some_count());
                    Frame::Map(need!(self.pairs(n, depth)))
                }
                b'|' => {
                    // Attribute: metadata about the next frame. Parse and drop
                    // it, then loop for the frame itself (no recursion, so a
                    // chain of attributes cannot grow the stack).
                    let n = need!(self.some_count());
                    need!(self.pairs(n, depth));
                    continue;
                }
                other => {
                    return Err(ProtocolError(format!(
                        "unknown frame type '{}'",
                        other as char
                    )));
                }
            };
            return Ok(Some(frame));
        }
    }

    /// A CRLF-terminated line starting at `pos`; moves past the CRLF.
    fn line(&mut self) -> Step<&'a [u8]> {
        let buf: &'a [u8] = self.buf;
        let rest = buf.get(self.pos..).unwrap_or(&[]);
        let Some(i) = memchr::memchr(b'\r', rest) else {
            if rest.len() > self.limits.max_bulk_len {
                return Err(ProtocolError::new("too big line"));
            }
            return Ok(None);
        };
        match rest.get(i + 1) {
            None => Ok(None),
            Some(b'\n') => {
                self.pos += i + 2;
                Ok(rest.get(..i))
            }
            Some(_) => Err(ProtocolError::new("expected CRLF")),
        }
    }

    /// A count line for `*`: `None` inside means the `-1` null.
    fn count(&mut self) -> Step<Option<usize>> {
        let line = need!(self.line());
        match string2ll(line) {
            Some(-1) => Ok(Some(None)),
            Some(n) if n >= 0 && n as u64 <= self.limits.max_multibulk_len as u64 => {
                Ok(Some(Some(n as usize)))
            }
            _ => Err(ProtocolError::new("invalid multibulk length")),
        }
    }

    /// A count line for RESP3 aggregates, which have no null form.
    fn some_count(&mut self) -> Step<usize> {
        match need!(self.count()) {
            Some(n) => Ok(Some(n)),
            None => Err(ProtocolError::new("invalid multibulk length")),
        }
    }

    /// A length line for blob types: `None` inside means the `-1` null.
    fn blob_len(&mut self) -> Step<Option<usize>> {
        let line = need!(self.line());
        if line == b"?" {
            return Err(ProtocolError::new("streamed strings are not supported"));
        }
        match string2ll(line) {
            Some(-1) => Ok(Some(None)),
            Some(n) if n >= 0 && n as u64 <= self.limits.max_bulk_len as u64 => {
                Ok(Some(Some(n as usize)))
            }
            _ => Err(ProtocolError::new("invalid bulk length")),
        }
    }

    /// `len` payload bytes followed by CRLF.
    fn payload(&mut self, len: usize) -> Step<&'a [u8]> {
        let buf: &'a [u8] = self.buf;
        let end = self.pos.saturating_add(len);
        let Some(term) = buf.get(end..end.saturating_add(2)) else {
            return Ok(None);
        };
        if term != b"\r\n" {
            return Err(ProtocolError::new("expected CRLF after bulk"));
        }
        let data = buf.get(self.pos..end);
        self.pos = end + 2;
        Ok(data)
    }

    fn items(&mut self, n: usize, depth: usize) -> Step<Vec<Frame>> {
        let mut items = Vec::with_capacity(n.min(MAX_PREALLOC_ITEMS));
        for _ in 0..n {
            items.push(need!(self.frame(depth + 1)));
        }
        Ok(Some(items))
    }

    fn pairs(&mut self, n: usize, depth: usize) -> Step<Vec<(Frame, Frame)>> {
        let mut pairs = Vec::with_capacity(n.min(MAX_PREALLOC_ITEMS));
        for _ in 0..n {
            let k = need!(self.frame(depth + 1));
            let v = need!(self.frame(depth + 1));
            pairs.push((k, v));
        }
        Ok(Some(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(input: &[u8]) -> Frame {
        let (f, n) = parse_frame(input).unwrap().unwrap();
        assert_eq!(n, input.len(), "consumed");
        f
    }

    fn err(input: &[u8]) -> String {
        parse_frame(input).unwrap_err().0
    }

    #[test]
    fn scalars() {
        assert_eq!(one(b"+OK\r\n"), Frame::ok());
        assert_eq!(one(b"-ERR x\r\n"), Frame::error("ERR x"));
        assert_eq!(one(b":-5\r\n"), Frame::Integer(-5));
        assert_eq!(one(b"$3\r\nfoo\r\n"), Frame::bulk("foo"));
        assert_eq!(one(b"$-1\r\n"), Frame::Null);
        assert_eq!(one(b"*-1\r\n"), Frame::NullArray);
        assert_eq!(one(b"_\r\n"), Frame::Null);
        assert_eq!(one(b"#t\r\n"), Frame::Boolean(true));
        assert_eq!(one(b",1.5\r\n"), Frame::Double(1.5));
        assert_eq!(one(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
        assert_eq!(one(b",1e+300\r\n"), Frame::Double(1e300));
        assert_eq!(
            one(b"(-123\r\n"),
            Frame::BigNumber(Bytes::from_static(b"-123"))
        );
        assert_eq!(one(b"!5\r\nERR x\r\n"), Frame::error("ERR x"));
        assert_eq!(
            one(b"=8\r\nmkd:a\r\nb\r\n"),
            Frame::Verbatim {
                format: *b"mkd",
                text: Bytes::from_static(b"a\r\nb")
            }
        );
    }

    #[test]
    fn aggregates_and_attributes() {
        assert_eq!(
            one(b"%1\r\n+k\r\n*2\r\n:1\r\n~1\r\n>0\r\n"),
            Frame::Map(vec![(
                Frame::simple("k"),
                Frame::Array(vec![
                    Frame::Integer(1),
                    Frame::Set(vec![Frame::Push(vec![])])
                ])
            )])
        );
        assert_eq!(
            one(b"|1\r\n+ttl\r\n:3\r\n|0\r\n$1\r\nx\r\n"),
            Frame::bulk("x")
        );
    }

    #[test]
    fn incomplete_is_none() {
        let full = b"*2\r\n$3\r\nfoo\r\n%1\r\n+a\r\n,2.5\r\n";
        for cut in 0..full.len() {
            assert_eq!(parse_frame(&full[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert!(parse_frame(full).unwrap().is_some());
    }

    #[test]
    fn leaves_following_bytes() {
        let (f, n) = parse_frame(b":1\r\n:2\r\n").unwrap().unwrap();
        assert_eq!((f, n), (Frame::Integer(1), 4));
    }

    #[test]
    fn errors() {
        assert_eq!(err(b"?\r\n"), "unknown frame type '?'");
        assert_eq!(err(b":1x\r\n"), "invalid integer");
        assert_eq!(err(b"$-2\r\n"), "invalid bulk length");
        assert_eq!(err(b"$?\r\n"), "streamed strings are not supported");
        assert_eq!(err(b"*-2\r\n"), "invalid multibulk length");
        assert_eq!(err(b"%-1\r\n"), "invalid multibulk length");
        assert_eq!(err(b"$3\r\nfooXY"), "expected CRLF after bulk");
        assert_eq!(err(b"+OK\rX"), "expected CRLF");
        assert_eq!(err(b"#x\r\n"), "invalid boolean");
        assert_eq!(err(b",\r\n"), "invalid double");
        assert_eq!(err(b",abc\r\n"), "invalid double");
        assert_eq!(err(b"(12a\r\n"), "invalid big number");
        assert_eq!(err(b"_x\r\n"), "invalid null");
        assert_eq!(err(b"=3\r\ntxt\r\n"), "invalid verbatim string");
        assert_eq!(err(b"=4\r\ntxtx\r\n"), "invalid verbatim string");
        let limits = Limits {
            max_bulk_len: 4,
            max_multibulk_len: 2,
            max_inline_len: 4,
            unauthenticated: false,
        };
        assert_eq!(
            parse_frame_with(b"$5\r\n", &limits).unwrap_err().0,
            "invalid bulk length"
        );
        assert_eq!(
            parse_frame_with(b"*3\r\n", &limits).unwrap_err().0,
            "invalid multibulk length"
        );
        assert_eq!(
            parse_frame_with(b"+abcde", &limits).unwrap_err().0,
            "too big line"
        );
    }

    #[test]
    fn depth_is_bounded() {
        let mut deep = b"*1\r\n".repeat(MAX_FRAME_DEPTH);
        deep.extend_from_slice(b":1\r\n");
        assert!(parse_frame(&deep).unwrap().is_some());
        let mut too_deep = b"*1\r\n".repeat(MAX_FRAME_DEPTH + 1);
        too_deep.extend_from_slice(b":1\r\n");
        assert_eq!(parse_frame(&too_deep).unwrap_err().0, "too deep");
        // Hostile depth far beyond the limit fails cleanly, no stack overflow.
        assert_eq!(err(&b"*1\r\n".repeat(1_000_000)), "too deep");
        assert_eq!(err(&b"|1\r\n".repeat(1_000_000)), "too deep");
    }

    #[test]
    fn huge_counts_do_not_preallocate() {
        assert_eq!(parse_frame(b"*2147483647\r\n:1\r\n").unwrap(), None);
        assert_eq!(parse_frame(b"$536870912\r\nabc").unwrap(), None);
    }
}
