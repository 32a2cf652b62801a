//! Property tests across the codec: robustness against arbitrary bytes,
//! exact round trips, and truncation behaviour.
//!
//! Random bytes alone rarely reach deep parser states, so the "noise"
//! generator glues protocol fragments (`*`, `$`, CRLF, quotes, RESP3 type
//! bytes, boundary numbers) with random bytes, and the limits themselves are
//! randomised (often tiny) so every limit check is exercised too.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

use crate::*;

fn noise() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        prop::sample::select(vec![
            &b"*"[..],
            b"$",
            b"\r\n",
            b"\r",
            b"\n",
            b"-1",
            b"0",
            b"1",
            b"3",
            b"12",
            b"2147483648",
            b"\"",
            b"'",
            b"\\",
            b"\\x4",
            b" ",
            b"\0",
            b"%",
            b"|",
            b"~",
            b">",
            b"_",
            b",",
            b"#t",
            b"=",
            b"(",
            b":",
            b"+",
            b"!",
            b"?",
            b"inf",
            b"txt:",
        ])
        .prop_map(|s| s.to_vec()),
        vec(any::<u8>(), 0..8),
    ];
    vec(fragment, 0..64).prop_map(|v| v.concat())
}

fn any_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..2048), noise()]
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        Just(Limits::default()),
        (0usize..64, 0usize..8, 0usize..64).prop_map(|(b, m, i)| Limits {
            max_bulk_len: b,
            max_multibulk_len: m,
            max_inline_len: i,
            unauthenticated: false,
        }),
    ]
}

/// The RESP encoding of `cmds`, one after the other.
fn encode_all(cmds: &[Vec<Vec<u8>>]) -> BytesMut {
    let mut wire = BytesMut::new();
    for c in cmds {
        let refs: Vec<&[u8]> = c.iter().map(|a| a.as_slice()).collect();
        encode_command(&refs, &mut wire);
    }
    wire
}

/// Feeds `data` in chunks of the given (cycled) sizes, draining commands
/// after each chunk. Stops at the first error.
fn feed(
    p: &mut RequestParser,
    data: &[u8],
    sizes: &[usize],
) -> (Vec<Vec<Bytes>>, Option<ProtocolError>, BytesMut) {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        i += 1;
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        buf.extend_from_slice(chunk);
        loop {
            match p.parse(&mut buf) {
                Ok(Some(args)) => out.push(args.to_vec()),
                Ok(None) => break,
                Err(e) => return (out, Some(e), buf),
            }
        }
    }
    (out, None, buf)
}

/// [`feed`], trying [`RequestParser::parse_batch`] (at most `batch_max` commands) before each
/// [`RequestParser::parse`], as the server does.
fn feed_batches(
    p: &mut RequestParser,
    data: &[u8],
    sizes: &[usize],
    batch_max: usize,
) -> (Vec<Vec<Bytes>>, Option<ProtocolError>, BytesMut) {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        i += 1;
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        buf.extend_from_slice(chunk);
        loop {
            let mut batch = Vec::new();
            if p.parse_batch(&mut buf, batch_max, &mut batch) > 0 {
                out.extend(batch.iter().map(|a| a.to_vec()));
                continue;
            }
            match p.parse(&mut buf) {
                Ok(Some(args)) => out.push(args.to_vec()),
                Ok(None) => break,
                Err(e) => return (out, Some(e), buf),
            }
        }
    }
    (out, None, buf)
}

fn arg_lists() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    let arg = prop_oneof![
        vec(any::<u8>(), 0..40),
        prop::sample::select(vec![&b""[..], b"\r\n", b"*1\r\n", b"$-1\r\n", b"\"'"])
            .prop_map(|s| s.to_vec()),
    ];
    vec(vec(arg, 1..6), 1..10)
}

fn leaf() -> impl Strategy<Value = Frame> {
    let text = || "[a-zA-Z0-9 :.]{0,12}".prop_map(Bytes::from);
    prop_oneof![
        text().prop_map(Frame::Simple),
        text().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        vec(any::<u8>(), 0..16).prop_map(|v| Frame::Bulk(v.into())),
        Just(Frame::Null),
        Just(Frame::NullArray),
        any::<f64>()
            .prop_filter("no NaN", |d| !d.is_nan())
            .prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        "-?[1-9][0-9]{0,40}".prop_map(|s| Frame::BigNumber(s.into())),
        (any::<[u8; 3]>(), vec(any::<u8>(), 0..16)).prop_map(|(format, t)| Frame::Verbatim {
            format,
            text: t.into()
        }),
    ]
}

fn frames() -> impl Strategy<Value = Frame> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Frame::Array),
            vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            vec(inner.clone(), 0..6).prop_map(Frame::Set),
            vec(inner, 0..6).prop_map(Frame::Push),
        ]
    })
}

/// What a RESP3 encoding parses back as: both nulls are `_`.
fn resp3_view(f: &Frame) -> Frame {
    match f {
        Frame::NullArray => Frame::Null,
        Frame::Array(v) => Frame::Array(v.iter().map(resp3_view).collect()),
        Frame::Set(v) => Frame::Set(v.iter().map(resp3_view).collect()),
        Frame::Push(v) => Frame::Push(v.iter().map(resp3_view).collect()),
        Frame::Map(v) => Frame::Map(
            v.iter()
                .map(|(k, x)| (resp3_view(k), resp3_view(x)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What a RESP2 encoding parses back as: Redis's downgrade rules.
fn resp2_view(f: &Frame) -> Frame {
    match f {
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => {
            Frame::Array(v.iter().map(resp2_view).collect())
        }
        Frame::Map(v) => Frame::Array(
            v.iter()
                .flat_map(|(k, x)| [resp2_view(k), resp2_view(x)])
                .collect(),
        ),
        Frame::Double(d) => {
            let mut s = Vec::new();
            format_double(*d, &mut s);
            Frame::Bulk(s.into())
        }
        Frame::Score(d) => {
            let mut s = Vec::new();
            crate::format_double_g17(*d, &mut s);
            Frame::Bulk(s.into())
        }
        Frame::DoubleText(t) => Frame::Bulk(t.clone()),
        Frame::PairMap(v) => Frame::Array(v.iter().map(|(a, b)| Frame::Array(vec![resp2_view(a), resp2_view(b)])).collect()),
        Frame::SampleValue(d) => {
            let mut s = Vec::new();
            crate::format_double_ts(*d, &mut s);
            Frame::Simple(s.into())
        }
        Frame::Boolean(b) => Frame::Integer(i64::from(*b)),
        Frame::BigNumber(n) => Frame::Bulk(n.clone()),
        Frame::Verbatim { text, .. } => Frame::Bulk(text.clone()),
        other => other.clone(),
    }
}

proptest! {
    #[test]
    fn argument_runs_match_their_spans(
        data in vec(any::<u8>(), 0..64),
        spans in vec((0usize..80, 0usize..80), 0..12),
        ends in vec(0usize..16, 0..6),
    ) {
        // Any spans and ends, even ones the parser never makes: no panic, every argument is
        // its span's bytes (or empty when the span is not inside the block), and the commands
        // split the list in order.
        let block = Bytes::from(data.clone());
        let mut out = Vec::new();
        Args::from_block_run(block, &spans, &ends, &mut out);
        prop_assert_eq!(out.len(), ends.len());
        let flat: Vec<Vec<u8>> = out.iter().flat_map(|c| c.iter().map(|a| a.to_vec())).collect();
        let want: Vec<Vec<u8>> = spans.iter().map(|&(s, e)| data.get(s..e).unwrap_or(&[]).to_vec()).collect();
        prop_assert!(want.starts_with(&flat));
        for c in &out {
            for i in 0..c.len() {
                prop_assert_eq!(&c.bytes(i)[..], &c[i][..]);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        data in any_input(),
        sizes in vec(1usize..300, 1..20),
        limits in limits(),
    ) {
        let mut p = RequestParser::new(limits);
        let (cmds, err, buf) = feed(&mut p, &data, &sizes);
        // Skipped commands are never surfaced as empty argument lists.
        prop_assert!(cmds.iter().all(|c| !c.is_empty()));
        prop_assert!(buf.len() <= data.len());
        if err.is_none() {
            // Everything not returned is still in the buffer, unconsumed
            // input is at most what was fed.
            let used: usize = cmds.iter().flatten().map(|a| a.len()).sum();
            prop_assert!(used <= data.len());
        }
        let _ = parse_frame(&data);
        let _ = parse_frame_with(&data, &limits);
    }

    #[test]
    fn fast_path_matches_state_machine(
        data in any_input(),
        cmds in arg_lists(),
        sizes in vec(1usize..300, 1..20),
        limits in limits(),
        unauthenticated in any::<bool>(),
    ) {
        // Well-formed commands followed by noise, so both complete commands (where the fast
        // path answers) and every malformed shape (where it must defer) occur.
        let mut wire = encode_all(&cmds);
        wire.extend_from_slice(&data);
        let limits = Limits { unauthenticated, ..limits };
        let mut fast = RequestParser::new(limits);
        let mut slow = RequestParser::new(limits);
        slow.fast_path = false;
        let (a, ea, ba) = feed(&mut fast, &wire, &sizes);
        let (b, eb, bb) = feed(&mut slow, &wire, &sizes);
        prop_assert_eq!(a, b);
        prop_assert_eq!(ea.map(|e| e.0), eb.map(|e| e.0));
        prop_assert_eq!(ba, bb);
    }

    #[test]
    fn batches_match_one_command_at_a_time(
        data in any_input(),
        cmds in arg_lists(),
        sizes in vec(1usize..300, 1..20),
        batch_max in 1usize..8,
        limits in limits(),
        unauthenticated in any::<bool>(),
    ) {
        // parse_batch for runs of commands, parse for the rest, against parse alone: the
        // same commands, error and leftover bytes.
        let mut wire = encode_all(&cmds);
        wire.extend_from_slice(&data);
        let limits = Limits { unauthenticated, ..limits };
        let mut batched = RequestParser::new(limits);
        let mut single = RequestParser::new(limits);
        let (a, ea, ba) = feed_batches(&mut batched, &wire, &sizes, batch_max);
        let (b, eb, bb) = feed(&mut single, &wire, &sizes);
        prop_assert_eq!(a, b);
        prop_assert_eq!(ea.map(|e| e.0), eb.map(|e| e.0));
        prop_assert_eq!(ba, bb);
    }

    #[test]
    fn encoded_commands_round_trip(
        cmds in arg_lists(),
        sizes in vec(1usize..200, 1..20),
    ) {
        let wire = encode_all(&cmds);
        let mut p = RequestParser::default();
        let (got, err, buf) = feed(&mut p, &wire, &sizes);
        prop_assert_eq!(err, None);
        prop_assert!(buf.is_empty());
        let got: Vec<Vec<Vec<u8>>> =
            got.iter().map(|c| c.iter().map(|a| a.to_vec()).collect()).collect();
        prop_assert_eq!(got, cmds);
    }

    #[test]
    fn inline_commands_round_trip(
        cmds in vec(vec("[a-zA-Z0-9:_-]{1,12}", 1..6), 1..8),
        sizes in vec(1usize..50, 1..10),
        crlf in any::<bool>(),
    ) {
        let mut wire = Vec::new();
        for c in &cmds {
            wire.extend_from_slice(c.join(" ").as_bytes());
            wire.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        }
        let mut p = RequestParser::default();
        let (got, err, buf) = feed(&mut p, &wire, &sizes);
        prop_assert_eq!(err, None);
        prop_assert!(buf.is_empty());
        let got: Vec<Vec<String>> = got
            .iter()
            .map(|c| c.iter().map(|a| String::from_utf8(a.to_vec()).unwrap()).collect())
            .collect();
        prop_assert_eq!(got, cmds);
    }

    #[test]
    fn truncated_command_is_incomplete_then_completes(args in vec(vec(any::<u8>(), 0..20), 1..5)) {
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let mut wire = BytesMut::new();
        encode_command(&refs, &mut wire);
        for cut in 0..wire.len() {
            let mut p = RequestParser::default();
            let mut buf = BytesMut::from(&wire[..cut]);
            prop_assert_eq!(p.parse(&mut buf), Ok(None), "cut at {}", cut);
            prop_assert_eq!(buf.len(), cut);
            buf.extend_from_slice(&wire[cut..]);
            let got = p.parse(&mut buf).unwrap().unwrap();
            let got: Vec<Vec<u8>> = got.iter().map(|a| a.to_vec()).collect();
            prop_assert_eq!(&got, &args);
            prop_assert!(buf.is_empty());
        }
    }

    #[test]
    fn frames_round_trip(f in frames(), cuts in vec(any::<Index>(), 8)) {
        let mut wire = BytesMut::new();
        encode(&f, Protocol::Resp3, &mut wire);
        let (back, n) = parse_frame(&wire).unwrap().unwrap();
        prop_assert_eq!(n, wire.len());
        prop_assert_eq!(back, resp3_view(&f));
        for cut in &cuts {
            let cut = cut.index(wire.len());
            prop_assert_eq!(parse_frame(&wire[..cut]), Ok(None), "cut at {}", cut);
        }

        let mut wire2 = BytesMut::new();
        encode(&f, Protocol::Resp2, &mut wire2);
        let (back2, n2) = parse_frame(&wire2).unwrap().unwrap();
        prop_assert_eq!(n2, wire2.len());
        prop_assert_eq!(back2, resp2_view(&f));
    }
}
