//! Inline command splitting, a faithful port of Redis's `sdssplitargs`.
//!
//! Inline commands (`PING\r\n`, `set "a b" 'c'\r\n`) come from telnet-style
//! clients and `redis-benchmark`'s `*_INLINE` tests. Redis splits them with
//! `sdssplitargs`, whose quirks we reproduce because clients depend on them:
//! - whitespace between tokens is C `isspace` (space, \t, \n, \v, \f, \r), but
//!   an unquoted token ends only at space, \n, \r, \t or NUL (so \v and \f
//!   inside a token are kept);
//! - `"..."` understands `\n \r \t \b \a \\ \"` and `\xHH` (other escaped
//!   characters stand for themselves); `'...'` understands only `\'`;
//! - a closing quote must be followed by whitespace or the end;
//! - quotes may start mid-token (`foo"bar"` is `foobar`);
//! - the line is a C string: a NUL byte ends it, anything after is ignored.
//!
//! Trade-off: tokens without quotes are returned as index ranges into the
//! line so the request parser can hand out zero-copy slices; only quoted
//! tokens (which need unescaping) get their own allocation. Every token is at
//! most the line's length and the line is bounded by the caller.

/// One inline argument: a range of the line, or unescaped owned bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Arg {
    Span(usize, usize),
    Owned(Vec<u8>),
}

/// The byte at `i`, or NUL past the end: models the C string's terminator so
/// the port can follow Redis's pointer logic without any fallible indexing.
fn at(line: &[u8], i: usize) -> u8 {
    line.get(i).copied().unwrap_or(0)
}

/// C `isspace` in the "C" locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits `line` into `out`. `Err(())` means unbalanced quotes (or a closing
/// quote not followed by a space), which Redis reports as
/// "unbalanced quotes in request".
pub(crate) fn split_into(line: &[u8], out: &mut Vec<Arg>) -> Result<(), ()> {
    let mut p = 0usize;
    loop {
        while at(line, p) != 0 && is_space(at(line, p)) {
            p += 1;
        }
        if at(line, p) == 0 {
            return Ok(());
        }
        let start = p;
        // Becomes Some at the first quote; until then the token is a range.
        let mut owned: Option<Vec<u8>> = None;
        let (mut inq, mut insq) = (false, false);
        let mut end = p;
        loop {
            let c = at(line, p);
            if inq {
                let buf = owned.get_or_insert_with(Vec::new);
                if c == b'\\' && at(line, p + 1) == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(at(line, p + 2)), hex_val(at(line, p + 3)))
                    {
                        buf.push(h * 16 + l);
                        p += 4;
                        continue;
                    }
                }
                if c == b'\\' && at(line, p + 1) != 0 {
                    p += 1;
                    buf.push(match at(line, p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    let next = at(line, p + 1);
                    if next != 0 && !is_space(next) {
                        return Err(());
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(());
                } else {
                    buf.push(c);
                }
            } else if insq {
                let buf = owned.get_or_insert_with(Vec::new);
                if c == b'\\' && at(line, p + 1) == b'\'' {
                    p += 1;
                    buf.push(b'\'');
                } else if c == b'\'' {
                    let next = at(line, p + 1);
                    if next != 0 && !is_space(next) {
                        return Err(());
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(());
                } else {
                    buf.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        end = p;
                        if c != 0 {
                            p += 1;
                        }
                        break;
                    }
                    b'"' | b'\'' => {
                        // Switch to owned mode, keeping the unquoted prefix.
                        owned = Some(line.get(start..p).unwrap_or(&[]).to_vec());
                        if c == b'"' {
                            inq = true;
                        } else {
                            insq = true;
                        }
                    }
                    _ => {}
                }
            }
            p += 1;
        }
        out.push(match owned {
            Some(v) => Arg::Owned(v),
            None => Arg::Span(start, end),
        });
    }
}

/// Splits a line like Redis's `sdssplitargs` (used for inline commands and
/// config-style input). `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    split_into(line, &mut args).ok()?;
    Some(
        args.into_iter()
            .map(|a| match a {
                Arg::Span(s, e) => line.get(s..e).unwrap_or(&[]).to_vec(),
                Arg::Owned(v) => v,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &[u8]) -> Option<Vec<Vec<u8>>> {
        split_args(s)
    }

    fn v(items: &[&[u8]]) -> Option<Vec<Vec<u8>>> {
        Some(items.iter().map(|i| i.to_vec()).collect())
    }

    #[test]
    fn plain_tokens() {
        assert_eq!(split(b"set foo bar"), v(&[b"set", b"foo", b"bar"]));
        assert_eq!(split(b"  ping  "), v(&[b"ping"]));
        assert_eq!(split(b"a\tb\x0bc"), v(&[b"a", b"b\x0bc"]));
        assert_eq!(split(b"\x0b\x0ca"), v(&[b"a"]));
        assert_eq!(split(b""), v(&[]));
        assert_eq!(split(b" \t "), v(&[]));
    }

    #[test]
    fn double_quotes_and_escapes() {
        assert_eq!(split(br#"set "a b" c"#), v(&[b"set", b"a b", b"c"]));
        assert_eq!(
            split(br#""\n\r\t\b\a\\\"\q""#),
            v(&[b"\n\r\t\x08\x07\\\"q"])
        );
        assert_eq!(split(br#""\x41\x7a\xff""#), v(&[b"Az\xff"]));
        // Not a valid \x escape: backslash escapes the 'x' itself.
        assert_eq!(split(br#""\xZZ""#), v(&[b"xZZ"]));
        assert_eq!(split(br#""""#), v(&[b""]));
        assert_eq!(split(br#"foo"bar baz""#), v(&[b"foobar baz"]));
    }

    #[test]
    fn single_quotes() {
        assert_eq!(split(br"'a b' 'it\'s' '\n'"), v(&[b"a b", b"it's", b"\\n"]));
        assert_eq!(split(b"''"), v(&[b""]));
    }

    #[test]
    fn unbalanced_or_glued_quotes_fail() {
        assert_eq!(split(br#""abc"#), None);
        assert_eq!(split(br#"'abc"#), None);
        assert_eq!(split(br#""abc"def"#), None);
        assert_eq!(split(br#"'abc'def"#), None);
        assert_eq!(split(br#""abc\"#), None);
    }

    #[test]
    fn nul_ends_the_line_like_a_c_string() {
        assert_eq!(split(b"a b\0c d"), v(&[b"a", b"b"]));
        assert_eq!(split(b"\"ab\0cd\""), None);
        assert_eq!(split(b"\"ab\"\0junk"), v(&[b"ab"]));
    }

    #[test]
    fn unquoted_tokens_are_ranges() {
        let mut out = Vec::new();
        split_into(b"get 'k'", &mut out).unwrap();
        assert_eq!(out, vec![Arg::Span(0, 3), Arg::Owned(b"k".to_vec())]);
    }
}
