//! Unit tests of the request parser: every Redis error text, skip rules,
//! zero-copy slicing, and work counters proving that partial input is never
//! rescanned (counted bytes, not wall time, so the tests are deterministic).

use super::*;

fn parse_all(input: &[u8], limits: Limits) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
    let mut p = RequestParser::new(limits);
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    while let Some(args) = p.parse(&mut buf)? {
        out.push(args.iter().map(|a| a.to_vec()).collect());
    }
    Ok(out)
}

fn cmds(input: &[u8]) -> Vec<Vec<Vec<u8>>> {
    parse_all(input, Limits::default()).unwrap()
}

fn err(input: &[u8]) -> String {
    err_with(input, Limits::default())
}

fn err_with(input: &[u8], limits: Limits) -> String {
    parse_all(input, limits).unwrap_err().0
}

fn small() -> Limits {
    Limits {
        max_bulk_len: 10,
        max_multibulk_len: 3,
        max_inline_len: 16,
        unauthenticated: false,
    }
}

#[test]
fn multibulk_basic_and_pipelined() {
    let input = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000001\r\n$3\r\nxxx\r\n*1\r\n$4\r\nPING\r\n";
    assert_eq!(
        cmds(input),
        vec![
            vec![
                b"SET".to_vec(),
                b"key:000000000001".to_vec(),
                b"xxx".to_vec()
            ],
            vec![b"PING".to_vec()]
        ]
    );
}

#[test]
fn consumes_exactly_one_command() {
    let mut p = RequestParser::default();
    let mut buf = BytesMut::from(&b"*1\r\n$1\r\na\r\n*1\r\n$1\r\nb"[..]);
    let args = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(args, vec![Bytes::from_static(b"a")]);
    assert_eq!(&buf[..], b"*1\r\n$1\r\nb");
    assert_eq!(p.parse(&mut buf).unwrap(), None);
    assert_eq!(p.pending_bytes(), 8);
    assert_eq!(p.bulk_bytes_needed(buf.len()), Some(2));
}

#[test]
fn empty_and_binary_args() {
    assert_eq!(
        cmds(b"*2\r\n$0\r\n\r\n$2\r\n\r\n\r\n"),
        vec![vec![b"".to_vec(), b"\r\n".to_vec()]]
    );
}

#[test]
fn zero_and_negative_counts_are_skipped() {
    assert_eq!(
        cmds(b"*0\r\n*-1\r\n*-7\r\n*1\r\n$1\r\nx\r\n"),
        vec![vec![b"x".to_vec()]]
    );
    let mut p = RequestParser::default();
    let mut buf = BytesMut::from(&b"*0\r\n"[..]);
    assert_eq!(p.parse(&mut buf).unwrap(), None);
    assert!(buf.is_empty());
}

#[test]
fn payload_terminator_is_not_checked() {
    // Redis skips the two bytes after the payload blindly.
    assert_eq!(
        cmds(b"*2\r\n$1\r\naXY$1\r\nbZZ"),
        vec![vec![b"a".to_vec(), b"b".to_vec()]]
    );
}

#[test]
fn multibulk_count_errors() {
    assert_eq!(err(b"*abc\r\n"), "invalid multibulk length");
    assert_eq!(err(b"*+1\r\n"), "invalid multibulk length");
    assert_eq!(err(b"* 1\r\n"), "invalid multibulk length");
    assert_eq!(err(b"*01\r\n"), "invalid multibulk length");
    assert_eq!(err(b"*\r\n"), "invalid multibulk length");
    assert_eq!(err(b"*2147483648\r\n"), "invalid multibulk length");
    assert_eq!(err_with(b"*4\r\n", small()), "invalid multibulk length");
    assert_eq!(
        parse_all(b"*2147483647\r\n", Limits::default()).unwrap(),
        Vec::<Vec<Vec<u8>>>::new()
    );
    let mut long = b"*".to_vec();
    long.extend_from_slice(&[b'1'; 70_000]);
    assert_eq!(err(&long), "too big mbulk count string");
    assert_eq!(
        err_with(b"*11111111111111111", small()),
        "too big mbulk count string"
    );
    // Exactly at the limit is still just incomplete.
    assert!(parse_all(b"*111111111111111", small()).unwrap().is_empty());
}

#[test]
fn bulk_header_errors() {
    assert_eq!(err(b"*1\r\n:3\r\n"), "expected '$', got ':'");
    assert_eq!(err(b"*1\r\nfoo\r\n"), "expected '$', got 'f'");
    assert_eq!(err(b"*1\r\n$x\r\n"), "invalid bulk length");
    assert_eq!(err(b"*1\r\n$-1\r\n"), "invalid bulk length");
    assert_eq!(err(b"*1\r\n$+3\r\n"), "invalid bulk length");
    assert_eq!(err(b"*1\r\n$\r\n"), "invalid bulk length");
    assert_eq!(err(b"*1\r\n$536870913\r\n"), "invalid bulk length");
    assert_eq!(err_with(b"*1\r\n$11\r\n", small()), "invalid bulk length");
    assert_eq!(cmds(b"*1\r\n$0\r\n\r\n"), vec![vec![Vec::new()]]);
    let mut long = b"*1\r\n$".to_vec();
    long.extend_from_slice(&[b'1'; 70_000]);
    assert_eq!(err(&long), "too big bulk count string");
    assert_eq!(
        err_with(b"*1\r\nxxxxxxxxxxxxxxxxxxxx", small()),
        "too big bulk count string"
    );
    // Without its line end, a bad header byte is not reported yet (Redis order).
    assert!(parse_all(b"*1\r\nxxxx", small()).unwrap().is_empty());
}

#[test]
fn inline_commands() {
    assert_eq!(cmds(b"PING\r\n"), vec![vec![b"PING".to_vec()]]);
    assert_eq!(
        cmds(b"set a 'b c'\n"),
        vec![vec![b"set".to_vec(), b"a".to_vec(), b"b c".to_vec()]]
    );
    assert_eq!(cmds(b"\r\n\n  \r\nPING\n"), vec![vec![b"PING".to_vec()]]);
    assert_eq!(
        cmds(b"echo \"a\\x00b\"\r\n"),
        vec![vec![b"echo".to_vec(), b"a\0b".to_vec()]]
    );
    // Inline and multibulk can alternate on one connection.
    assert_eq!(
        cmds(b"PING\r\n*1\r\n$4\r\nPING\r\nPING\n"),
        vec![vec![b"PING".to_vec()]; 3]
    );
    assert_eq!(err(b"set \"a\r\n"), "unbalanced quotes in request");
    assert_eq!(err(b"set 'a'b\r\n"), "unbalanced quotes in request");
    let long = vec![b'a'; 70_000];
    assert_eq!(err(&long), "too big inline request");
    assert_eq!(
        err_with(b"12345678901234567", small()),
        "too big inline request"
    );
    assert!(parse_all(b"1234567890123456", small()).unwrap().is_empty());
    // A long line that arrived complete is accepted, as in Redis.
    let mut ok = vec![b'a'; 20];
    ok.push(b'\n');
    assert_eq!(parse_all(&ok, small()).unwrap(), vec![vec![vec![b'a'; 20]]]);
}

#[test]
fn inline_args_share_the_buffer() {
    let mut p = RequestParser::default();
    let mut buf = BytesMut::from(&b"get key\r\n"[..]);
    let args = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(
        args,
        vec![Bytes::from_static(b"get"), Bytes::from_static(b"key")]
    );
    assert!(buf.is_empty());
}

#[test]
fn byte_at_a_time() {
    let input = b"*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\nPING\r\n";
    let mut p = RequestParser::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for &b in input.iter() {
        buf.extend_from_slice(&[b]);
        while let Some(args) = p.parse(&mut buf).unwrap() {
            out.push(args);
        }
    }
    assert_eq!(out.len(), 2);
    assert_eq!(
        out[0],
        vec![
            Bytes::from_static(b"GET"),
            Bytes::from_static(b"0123456789")
        ]
    );
    assert_eq!(out[1], vec![Bytes::from_static(b"PING")]);
    assert!(buf.is_empty());
    // Every header byte looked at once; payload bytes never.
    assert!(
        p.scanned <= input.len(),
        "scanned {} of {}",
        p.scanned,
        input.len()
    );
}

#[test]
fn shrunken_buffer_restarts_instead_of_panicking() {
    let mut p = RequestParser::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$3"[..]);
    assert_eq!(p.parse(&mut buf).unwrap(), None);
    let mut other = BytesMut::from(&b"*1\r\n$1\r\nx\r\n"[..]);
    assert_eq!(
        p.parse(&mut other).unwrap().map(|a| a.to_vec()),
        Some(vec![Bytes::from_static(b"x")])
    );
}

#[test]
fn million_args_in_1k_chunks_is_linear() {
    const N: usize = 1_000_000;
    let mut wire = BytesMut::new();
    let args: Vec<&[u8]> = vec![b"v"; N];
    crate::encode_command(&args, &mut wire);
    let wire = wire.freeze();
    let mut p = RequestParser::default();
    let mut buf = BytesMut::new();
    let mut calls = 0usize;
    let mut fed = 0usize;
    let mut result = None;
    let chunks: Vec<&[u8]> = wire.chunks(1024).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        buf.extend_from_slice(chunk);
        calls += 1;
        let r = p.parse(&mut buf).unwrap();
        fed += chunk.len();
        // Checked on every call so that a rescanning parser fails at
        // once instead of grinding through quadratic work.
        assert!(
            p.scanned <= fed,
            "scanned {} bytes after {} fed",
            p.scanned,
            fed
        );
        if i + 1 < chunks.len() {
            assert!(r.is_none(), "completed early at chunk {i}");
        } else {
            result = r;
        }
    }
    assert_eq!(calls, chunks.len());
    let result = result.expect("complete after the last chunk");
    assert_eq!(result.len(), N);
    assert!(result.iter().all(|a| &a[..] == b"v"));
    // Header lines are scanned once in total; payloads are not scanned:
    // strictly less than the input, which quadratic rescanning would
    // exceed by orders of magnitude.
    assert!(
        p.scanned <= wire.len(),
        "scanned {} bytes of {}",
        p.scanned,
        wire.len()
    );
    assert!(buf.is_empty());
}

#[test]
fn big_bulk_in_64k_pieces_is_not_rescanned() {
    let len = 8 << 20;
    let mut head = BytesMut::new();
    head.extend_from_slice(format!("*1\r\n${len}\r\n").as_bytes());
    let mut p = RequestParser::default();
    let mut buf = head;
    assert_eq!(p.parse(&mut buf).unwrap(), None);
    let piece = vec![b'z'; 64 * 1024];
    for _ in 0..len / piece.len() {
        buf.extend_from_slice(&piece);
        assert_eq!(p.parse(&mut buf).unwrap(), None);
    }
    assert_eq!(p.bulk_bytes_needed(buf.len()), Some(2));
    buf.extend_from_slice(b"\r\n");
    let args = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(args[0].len(), len);
    assert!(p.scanned < 32, "payload was scanned: {}", p.scanned);
}

#[test]
fn unauthenticated_limits_match_redis() {
    let limits = Limits { unauthenticated: true, ..Limits::default() };
    let mut p = RequestParser::new(limits);
    let mut buf = BytesMut::from(&b"*11\r\n"[..]);
    assert_eq!(p.parse(&mut buf).unwrap_err().0, "unauthenticated multibulk length");
    let mut p = RequestParser::new(limits);
    let mut buf = BytesMut::from(&b"*2\r\n$4\r\nAUTH\r\n$16385\r\n"[..]);
    assert_eq!(p.parse(&mut buf).unwrap_err().0, "unauthenticated bulk length");
    let mut p = RequestParser::new(limits);
    let mut buf = BytesMut::from(&b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"[..]);
    assert_eq!(p.parse(&mut buf).unwrap().unwrap().len(), 2);
}

/// Parses `input` whole with the fast path on and off: both must give the same commands,
/// error and leftover bytes.
fn fast_and_slow(input: &[u8]) {
    let run = |fast: bool| {
        let mut p = RequestParser::new(Limits::default());
        p.fast_path = fast;
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        let err = loop {
            match p.parse(&mut buf) {
                Ok(Some(args)) => out.push(args.iter().map(|a| a.to_vec()).collect::<Vec<_>>()),
                Ok(None) => break None,
                Err(e) => break Some(e.0),
            }
        };
        (out, err, buf.to_vec())
    };
    assert_eq!(run(true), run(false), "{:?}", String::from_utf8_lossy(input));
}

#[test]
fn fast_header_numbers_agree_with_string2ll() {
    // Shapes the fast path's digit loop must accept exactly as string2ll does, or defer.
    for input in [
        &b"*1\r\n$0\r\n\r\n"[..],
        b"*01\r\n$4\r\nPING\r\n",
        b"*1\r\n$04\r\nPING\r\n",
        b"*1\r\n$00\r\n\r\n",
        b"*1\r\n$-0\r\n\r\n",
        b"*1\r\n$+4\r\nPING\r\n",
        b"*-1\r\n*1\r\n$4\r\nPING\r\n",
        b"*1\r\n$ 4\r\nPING\r\n",
        b"*1\r\n$4 \r\nPING\r\n",
        b"*1\r\n$\r\nPING\r\n",
        b"*\r\n",
        b"*1\r\n$1234567890123456789\r\nx\r\n",
        b"*1\r\n$99999999999999999999\r\nx\r\n",
        b"*1\r\n$123456789012345678\r\nx\r\n",
        b"*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n*1\r\n$4\r\nPING\r\n",
        b"*1\r\n$4\rXPING\r\n",
        b"*1\r\n$4",
        b"*1\r\n$4\r",
        b"*1\r\n$12\r",
        b"*1\r\n$12",
        b"*1\r\n$5\r\nhello\r\n",
        b"*1\r\n$10\r\n0123456789\r\n",
        b"*1\r\n$1\r\n\r\r\n",
        b"*9\r\n$1\r\na\r\n",
        b"*2\r\n$1\r\na\r\n$99\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n",
    ] {
        fast_and_slow(input);
    }
}

#[test]
fn parse_batch_takes_a_pipeline_in_one_split() {
    let mut p = RequestParser::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n*1\r\n$4\r\nPI"[..]);
    let mut out = Vec::new();
    // At most two, then the third; the fourth is incomplete.
    assert_eq!(p.parse_batch(&mut buf, 2, &mut out), 2);
    assert_eq!(p.parse_batch(&mut buf, 2, &mut out), 1);
    assert_eq!(p.parse_batch(&mut buf, 2, &mut out), 0);
    let got: Vec<Vec<&[u8]>> = out.iter().map(|c| c.iter().map(|a| &a[..]).collect()).collect();
    assert_eq!(got, vec![vec![&b"GET"[..], b"a"], vec![b"PING"], vec![b"GET", b"b"]]);
    assert_eq!(&buf[..], b"*1\r\n$4\r\nPI");
    // The incomplete command goes through the state machine; a batch never starts inside it.
    assert_eq!(p.parse(&mut buf).unwrap(), None);
    buf.extend_from_slice(b"NG\r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(p.parse_batch(&mut buf, 10, &mut out), 0);
    assert_eq!(p.parse(&mut buf).unwrap().unwrap(), vec![Bytes::from_static(b"PING")]);
    assert_eq!(p.parse_batch(&mut buf, 10, &mut out), 1);
    assert!(buf.is_empty());
    // Inline commands and errors are left to parse.
    let mut buf = BytesMut::from(&b"PING\r\n"[..]);
    assert_eq!(p.parse_batch(&mut buf, 10, &mut out), 0);
    assert_eq!(&buf[..], b"PING\r\n");
}
