//! The reply value model ([`Frame`]) and its encoder.
//!
//! One `Frame` type serves both dialects: command code builds the richest
//! RESP3 shape (maps, sets, doubles, booleans) and [`encode`] downgrades it
//! for RESP2 clients exactly as Redis does (map -> flat array, double -> bulk
//! string, boolean -> integer, ...). That keeps protocol knowledge out of the
//! command implementations.
//!
//! Encoding appends straight into the caller's `BytesMut` (integers through
//! `itoa`, doubles through a stack buffer) so that a reply costs no
//! intermediate allocation. Simple strings and errors cannot carry CR/LF on
//! the wire; rather than trusting every caller, the encoder replaces them
//! with spaces (as Redis does for error replies), so no `Frame` can break the
//! framing of the stream.

use bytes::{BufMut, Bytes, BytesMut};

use crate::double::Repr;
use crate::Protocol;

/// A reply (or, via [`crate::parse_frame`], any RESP value).
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+OK\r\n`
    Simple(Bytes),
    /// `-ERR message\r\n`; holds the text without the `-`.
    Error(Bytes),
    /// `:1\r\n`
    Integer(i64),
    /// `$3\r\nfoo\r\n`
    Bulk(Bytes),
    /// RESP2 `$-1\r\n`, RESP3 `_\r\n`.
    Null,
    /// RESP2 `*-1\r\n`, RESP3 `_\r\n`.
    NullArray,
    /// `*n\r\n...`
    Array(Vec<Frame>),
    /// RESP3 `%n`; RESP2 a flat array of 2n elements.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~n`; RESP2 an array.
    Set(Vec<Frame>),
    /// RESP3 `%n`; RESP2 an array of two-element arrays: XREAD's reply, a stream per key, as
    /// Redis replies it.
    KeyedPairs(Vec<(Frame, Frame)>),
    /// Pairs that may repeat (HRANDFIELD WITHVALUES): RESP3 an array of two-element arrays,
    /// RESP2 a flat array of 2n elements, as Redis replies.
    Pairs(Vec<(Frame, Frame)>),
    /// RESP3 `,<repr>` ([`crate::format_double_d2string`]); RESP2 a bulk
    /// string of [`crate::format_double`] — Redis 7.2 uses those two layouts.
    Double(f64),
    /// A sorted-set score as Redis 7.0 replies it ([`crate::format_double_g17`], `%.17g`):
    /// RESP3 `,<repr>`, RESP2 a bulk string of the same text.
    Score(f64),
    /// A double the command formatted itself (GEOPOS's coordinates, `%.17Lf` with trailing
    /// zeros trimmed, as Redis's `addReplyHumanLongDouble`): RESP3 `,<text>`, RESP2 a bulk
    /// string of the text.
    DoubleText(Bytes),
    /// RESP3 `#t`/`#f`; RESP2 integer 1/0.
    Boolean(bool),
    /// RESP3 `(digits`; RESP2 a bulk string.
    BigNumber(Bytes),
    /// RESP3 `=len\r\nfmt:text`; RESP2 a bulk string of the text only.
    Verbatim { format: [u8; 3], text: Bytes },
    /// RESP3 `>n`; RESP2 an array.
    Push(Vec<Frame>),
    /// Several replies to one command, encoded one after the other with no header of their
    /// own: SUBSCRIBE a b confirms each channel with a reply. Inside an array (EXEC's) it
    /// still counts as one element, as Redis's EXEC counts one reply per command.
    Seq(Vec<Frame>),
    /// An array of `count` bulk strings that the command encoded itself into `body`
    /// ([`BulksBuilder`]); bulk strings read the same in both protocols. Why: a long reply of
    /// plain strings (LRANGE's) would otherwise cost an allocation, a copy and a free per
    /// element on the shard's thread; this is one buffer, copied once into the output.
    Bulks { count: usize, body: Bytes },
    /// A time series sample value as RedisTimeSeries 1.10 replies it: RESP3 `,<%.17g>`;
    /// RESP2 a simple string of [`crate::format_double_ts`].
    SampleValue(f64),
    /// RESP3 `%n` (a map); RESP2 an array of two-element arrays (RedisTimeSeries's labels).
    PairMap(Vec<(Frame, Frame)>),
    /// A whole reply the command encoded itself, for the protocol the connection spoke when
    /// it ran; copied to the output as is. Why: TS.MGET's and TS.WATERFALL's replies hold
    /// hundreds of thousands of small elements, built on the shards' threads in parallel;
    /// a frame tree would cost an allocation and a free per element on the connection's.
    Encoded(Bytes),
}

/// Builds a [`Frame::Bulks`]: each pushed element is encoded at once as `$len\r\nbytes\r\n`
/// (into a plain Vec: its appends cost less than BytesMut's per element).
pub struct BulksBuilder {
    count: usize,
    body: Vec<u8>,
}

impl BulksBuilder {
    /// `elements` and `bytes` are hints for one reservation up front.
    pub fn with_capacity(elements: usize, bytes: usize) -> BulksBuilder {
        BulksBuilder { count: 0, body: Vec::with_capacity(bytes.saturating_add(elements.saturating_mul(8))) }
    }

    pub fn push(&mut self, b: &[u8]) {
        self.count += 1;
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(b.len()).as_bytes();
        self.body.reserve(digits.len() + b.len() + 5);
        self.body.push(b'$');
        self.body.extend_from_slice(digits);
        self.body.extend_from_slice(CRLF);
        self.body.extend_from_slice(b);
        self.body.extend_from_slice(CRLF);
    }

    /// An integer element as its decimal text (a list's packed integers).
    pub fn push_int(&mut self, n: i64) {
        let mut buf = itoa::Buffer::new();
        self.push(buf.format(n).as_bytes());
    }

    pub fn finish(self) -> Frame {
        Frame::Bulks { count: self.count, body: Bytes::from(self.body) }
    }
}

impl Frame {
    /// `+OK`.
    pub fn ok() -> Frame {
        Frame::simple("OK")
    }

    /// A status reply from a static string: no allocation.
    pub fn simple(s: &'static str) -> Frame {
        Frame::Simple(Bytes::from_static(s.as_bytes()))
    }

    /// An error reply; `msg` is the full text including its code, e.g.
    /// `"ERR syntax error"` or `"WRONGTYPE Operation against ..."`.
    pub fn error(msg: impl Into<String>) -> Frame {
        Frame::Error(Bytes::from(msg.into()))
    }

    /// A bulk string.
    pub fn bulk(b: impl Into<Bytes>) -> Frame {
        Frame::Bulk(b.into())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }
}

const CRLF: &[u8] = b"\r\n";

/// Appends the encoding of `frame` for `proto` to `out`.
///
/// Recursion follows the frame tree; frames are built by our own command
/// code (or parsed with a depth limit), so their depth is already bounded.
pub fn encode(frame: &Frame, proto: Protocol, out: &mut BytesMut) {
    let resp3 = proto == Protocol::Resp3;
    match frame {
        Frame::Simple(s) => line(b'+', s, out),
        Frame::Error(e) => line(b'-', e, out),
        Frame::Integer(n) => int_line(b':', *n, out),
        Frame::Bulk(b) => bulk(b, out),
        Frame::Null if resp3 => out.put_slice(b"_\r\n"),
        Frame::Null => out.put_slice(b"$-1\r\n"),
        Frame::NullArray if resp3 => out.put_slice(b"_\r\n"),
        Frame::NullArray => out.put_slice(b"*-1\r\n"),
        Frame::Array(items) => aggregate(b'*', items, proto, out),
        Frame::Set(items) => aggregate(if resp3 { b'~' } else { b'*' }, items, proto, out),
        Frame::Push(items) => aggregate(if resp3 { b'>' } else { b'*' }, items, proto, out),
        Frame::Seq(items) => items.iter().for_each(|f| encode(f, proto, out)),
        Frame::Bulks { count, body } => {
            len_line(b'*', *count, out);
            out.extend_from_slice(body);
        }
        Frame::Pairs(pairs) => {
            len_line(b'*', if resp3 { pairs.len() } else { pairs.len().saturating_mul(2) }, out);
            for (k, v) in pairs {
                if resp3 {
                    len_line(b'*', 2, out);
                }
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Frame::KeyedPairs(pairs) => {
            len_line(if resp3 { b'%' } else { b'*' }, pairs.len(), out);
            for (k, v) in pairs {
                if !resp3 {
                    len_line(b'*', 2, out);
                }
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Frame::Map(pairs) => {
            if resp3 {
                len_line(b'%', pairs.len(), out);
            } else {
                len_line(b'*', pairs.len().saturating_mul(2), out);
            }
            for (k, v) in pairs {
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Frame::Double(d) => {
            // Formatted on the stack: no heap buffer per double.
            if resp3 {
                let repr = Repr::d2string(*d);
                out.reserve(repr.as_bytes().len() + 3);
                out.put_u8(b',');
                out.put_slice(repr.as_bytes());
                out.put_slice(CRLF);
            } else {
                bulk(Repr::fpconv(*d).as_bytes(), out);
            }
        }
        Frame::Score(d) => {
            let repr = Repr::g17(*d);
            if resp3 {
                out.reserve(repr.as_bytes().len() + 3);
                out.put_u8(b',');
                out.put_slice(repr.as_bytes());
                out.put_slice(CRLF);
            } else {
                bulk(repr.as_bytes(), out);
            }
        }
        Frame::SampleValue(d) => {
            if resp3 {
                let repr = Repr::g17(*d);
                line(b',', repr.as_bytes(), out);
            } else {
                let mut s = Vec::new();
                crate::format_double_ts(*d, &mut s);
                line(b'+', &s, out);
            }
        }
        Frame::Encoded(body) => out.extend_from_slice(body),
        Frame::PairMap(pairs) => {
            len_line(if resp3 { b'%' } else { b'*' }, pairs.len(), out);
            for (k, v) in pairs {
                if !resp3 {
                    len_line(b'*', 2, out);
                }
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Frame::DoubleText(t) if resp3 => line(b',', t, out),
        Frame::DoubleText(t) => bulk(t, out),
        Frame::Boolean(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Frame::Boolean(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
        Frame::BigNumber(n) if resp3 => line(b'(', n, out),
        Frame::BigNumber(n) => bulk(n, out),
        Frame::Verbatim { format, text } => {
            if resp3 {
                len_line(b'=', text.len().saturating_add(4), out);
                out.reserve(text.len() + 6);
                out.put_slice(format);
                out.put_u8(b':');
                out.put_slice(text);
                out.put_slice(CRLF);
            } else {
                bulk(text, out);
            }
        }
    }
}

/// Encodes a command as a RESP multibulk of bulk strings.
pub fn encode_command(args: &[&[u8]], out: &mut BytesMut) {
    // Exact size up front: one reservation for the whole command.
    let payload: usize = args.iter().map(|a| a.len() + 16).sum();
    out.reserve(payload + 16);
    len_line(b'*', args.len(), out);
    for a in args {
        bulk(a, out);
    }
}

fn aggregate(prefix: u8, items: &[Frame], proto: Protocol, out: &mut BytesMut) {
    len_line(prefix, items.len(), out);
    for item in items {
        encode(item, proto, out);
    }
}

fn bulk(b: &[u8], out: &mut BytesMut) {
    len_line(b'$', b.len(), out);
    out.reserve(b.len() + 2);
    out.put_slice(b);
    out.put_slice(CRLF);
}

fn len_line(prefix: u8, n: usize, out: &mut BytesMut) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n).as_bytes();
    out.reserve(digits.len() + 3);
    out.put_u8(prefix);
    out.put_slice(digits);
    out.put_slice(CRLF);
}

fn int_line(prefix: u8, n: i64, out: &mut BytesMut) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n).as_bytes();
    out.reserve(digits.len() + 3);
    out.put_u8(prefix);
    out.put_slice(digits);
    out.put_slice(CRLF);
}

/// A one-line frame; CR/LF inside would end the line early, so they become
/// spaces (Redis does the same to error texts).
fn line(prefix: u8, text: &[u8], out: &mut BytesMut) {
    out.reserve(text.len() + 3);
    out.put_u8(prefix);
    if memchr::memchr2(b'\r', b'\n', text).is_none() {
        out.put_slice(text);
    } else {
        for &c in text {
            out.put_u8(if c == b'\r' || c == b'\n' { b' ' } else { c });
        }
    }
    out.put_slice(CRLF);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: &Frame, p: Protocol) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(f, p, &mut out);
        out.to_vec()
    }

    #[test]
    fn bulks_encode_as_an_array_of_bulk_strings() {
        let elements: Vec<Vec<u8>> = vec![b"a".to_vec(), Vec::new(), b"x\r\ny".to_vec(), vec![7u8; 300], b"-12".to_vec()];
        let mut b = BulksBuilder::with_capacity(0, 0);
        for e in &elements[..4] {
            b.push(e);
        }
        b.push_int(-12);
        let built = b.finish();
        let plain = Frame::Array(elements.iter().map(|e| Frame::Bulk(Bytes::from(e.clone()))).collect());
        for p in [Protocol::Resp2, Protocol::Resp3] {
            assert_eq!(enc(&built, p), enc(&plain, p));
            // Nested (an EXEC reply) too.
            assert_eq!(enc(&Frame::Array(vec![built.clone(), Frame::Integer(1)]), p), enc(&Frame::Array(vec![plain.clone(), Frame::Integer(1)]), p));
        }
        assert_eq!(enc(&BulksBuilder::with_capacity(4, 4).finish(), Protocol::Resp2), b"*0\r\n");
    }

    #[test]
    fn scalars_both_protocols() {
        use Protocol::*;
        let cases: Vec<(Frame, &[u8], &[u8])> = vec![
            (Frame::ok(), b"+OK\r\n", b"+OK\r\n"),
            (
                Frame::error("ERR syntax error"),
                b"-ERR syntax error\r\n",
                b"-ERR syntax error\r\n",
            ),
            (Frame::Integer(-12), b":-12\r\n", b":-12\r\n"),
            (Frame::bulk("foo"), b"$3\r\nfoo\r\n", b"$3\r\nfoo\r\n"),
            (Frame::bulk(""), b"$0\r\n\r\n", b"$0\r\n\r\n"),
            (Frame::Null, b"$-1\r\n", b"_\r\n"),
            (Frame::NullArray, b"*-1\r\n", b"_\r\n"),
            (Frame::Double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n"),
            (Frame::Double(1e9), b"$4\r\n1e+9\r\n", b",1000000000\r\n"),
            (Frame::Double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n"),
            (Frame::Boolean(true), b":1\r\n", b"#t\r\n"),
            (Frame::Boolean(false), b":0\r\n", b"#f\r\n"),
            (
                Frame::BigNumber(Bytes::from_static(b"-123")),
                b"$4\r\n-123\r\n",
                b"(-123\r\n",
            ),
            (
                Frame::Verbatim {
                    format: *b"txt",
                    text: Bytes::from_static(b"hi"),
                },
                b"$2\r\nhi\r\n",
                b"=6\r\ntxt:hi\r\n",
            ),
        ];
        for (f, r2, r3) in cases {
            assert_eq!(enc(&f, Resp2), r2, "{f:?} resp2");
            assert_eq!(enc(&f, Resp3), r3, "{f:?} resp3");
        }
    }

    #[test]
    fn aggregates_downgrade_in_resp2() {
        let m = Frame::Map(vec![
            (Frame::bulk("a"), Frame::Integer(1)),
            (Frame::bulk("b"), Frame::Set(vec![Frame::Boolean(true)])),
        ]);
        assert_eq!(
            enc(&m, Protocol::Resp2),
            b"*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n*1\r\n:1\r\n"
        );
        assert_eq!(
            enc(&m, Protocol::Resp3),
            b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n~1\r\n#t\r\n"
        );
        let p = Frame::Push(vec![Frame::bulk("message")]);
        assert_eq!(enc(&p, Protocol::Resp2), b"*1\r\n$7\r\nmessage\r\n");
        assert_eq!(enc(&p, Protocol::Resp3), b">1\r\n$7\r\nmessage\r\n");
        let seq = Frame::Array(vec![Frame::Seq(vec![p.clone(), Frame::Integer(1)])]);
        assert_eq!(enc(&seq, Protocol::Resp3), b"*1\r\n>1\r\n$7\r\nmessage\r\n:1\r\n");
        let pairs = Frame::Pairs(vec![(Frame::bulk("f"), Frame::bulk("v")), (Frame::bulk("f"), Frame::bulk("v"))]);
        assert_eq!(enc(&pairs, Protocol::Resp2), b"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nf\r\n$1\r\nv\r\n");
        assert_eq!(enc(&pairs, Protocol::Resp3), b"*2\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
        let keyed = Frame::KeyedPairs(vec![(Frame::bulk("k"), Frame::Array(vec![]))]);
        assert_eq!(enc(&keyed, Protocol::Resp2), b"*1\r\n*2\r\n$1\r\nk\r\n*0\r\n");
        assert_eq!(enc(&keyed, Protocol::Resp3), b"%1\r\n$1\r\nk\r\n*0\r\n");
    }

    #[test]
    fn line_frames_cannot_break_framing() {
        let f = Frame::error("ERR bad\r\nthing\n");
        assert_eq!(enc(&f, Protocol::Resp2), b"-ERR bad  thing \r\n");
        assert!(f.is_error());
        assert!(!Frame::ok().is_error());
    }

    #[test]
    fn command_encoding() {
        let mut out = BytesMut::new();
        encode_command(&[b"SET", b"k", b""], &mut out);
        assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }
}
