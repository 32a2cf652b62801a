//! The conversions between command replies and Lua values, as Redis 7.0 documents them
//! ("Data type conversion" in the EVAL documentation; `script_lua.c`).
//!
//! Reply → Lua (what `redis.call` returns) depends on the protocol the script chose with
//! `redis.setresp` (2 by default), not on the caller's: a command's reply is first seen as a
//! client speaking that protocol would see it, then converted. Abacus's replies have
//! variants with no RESP type of their own (scores, pairs, pre-encoded bodies); rather than
//! a second table of how each one reads in each protocol, such a reply is encoded for the
//! script's protocol and parsed back ([`canonical`]), so a script sees exactly what a
//! client would. The common plain replies (integers, bulk strings, arrays of them) skip that.
//!
//! Lua → reply (what a script returns) follows `luaReplyToRedisReply`: numbers truncate to
//! integers, `false` is a null, a table with `err`/`ok`/`double`/`big_number`/
//! `verbatim_string`/`map`/`set` is that reply, any other table an array up to its first
//! nil.

use abacus_protocol::{encode, parse_frame, Bytes, BytesMut, Frame, Protocol};
use mlua::{Lua, Result, Table, Value};

/// A reply as a client of `proto` reads it: only the variants the RESP grammar has.
pub fn canonical(frame: Frame, proto: Protocol) -> Frame {
    if is_plain(&frame, proto) {
        return frame;
    }
    let mut out = BytesMut::new();
    encode(&frame, proto, &mut out);
    match parse_frame(&out) {
        Ok(Some((f, _))) => f,
        _ => Frame::error("ERR reply could not be converted for the script"),
    }
}

/// Whether `frame` already reads the same in `proto` (no re-encoding needed).
fn is_plain(frame: &Frame, proto: Protocol) -> bool {
    match frame {
        Frame::Simple(_) | Frame::Error(_) | Frame::Integer(_) | Frame::Bulk(_) | Frame::Null | Frame::NullArray => true,
        Frame::Array(items) => items.iter().all(|f| is_plain(f, proto)),
        Frame::Map(pairs) if proto == Protocol::Resp3 => pairs.iter().all(|(k, v)| is_plain(k, proto) && is_plain(v, proto)),
        Frame::Set(items) if proto == Protocol::Resp3 => items.iter().all(|f| is_plain(f, proto)),
        Frame::Double(_) | Frame::Boolean(_) => proto == Protocol::Resp3,
        _ => false,
    }
}

/// Converts a canonical reply (see [`canonical`]) to the Lua value `redis.call` returns.
/// Errors become `{err = "..."}` tables (the caller raises them for `redis.call`).
pub fn reply_to_lua(lua: &Lua, frame: &Frame, resp3: bool) -> Result<Value> {
    Ok(match frame {
        Frame::Integer(n) => Value::Number(*n as f64),
        Frame::Bulk(b) => Value::String(lua.create_string(b)?),
        // RESP3's null is nil; RESP2's null bulk string and null array are false.
        Frame::Null | Frame::NullArray => if resp3 { Value::Nil } else { Value::Boolean(false) },
        Frame::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(s)?)?;
            Value::Table(t)
        }
        Frame::Error(e) => Value::Table(error_table(lua, e)?),
        Frame::Array(items) | Frame::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, f) in items.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, f, resp3)?)?;
            }
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let inner = lua.create_table()?;
            for (k, v) in pairs {
                inner.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            let t = lua.create_table()?;
            t.raw_set("map", inner)?;
            Value::Table(t)
        }
        Frame::Set(items) => {
            let inner = lua.create_table()?;
            for f in items {
                inner.raw_set(reply_to_lua(lua, f, resp3)?, true)?;
            }
            let t = lua.create_table()?;
            t.raw_set("set", inner)?;
            Value::Table(t)
        }
        Frame::Double(d) => {
            let t = lua.create_table()?;
            t.raw_set("double", *d)?;
            Value::Table(t)
        }
        Frame::Boolean(b) => Value::Boolean(*b),
        Frame::BigNumber(n) => {
            let t = lua.create_table()?;
            t.raw_set("big_number", lua.create_string(n)?)?;
            Value::Table(t)
        }
        Frame::Verbatim { format, text } => {
            let inner = lua.create_table()?;
            inner.raw_set("string", lua.create_string(text)?)?;
            inner.raw_set("format", lua.create_string(format)?)?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
        // Not produced by `canonical`; read as a client would, to be safe.
        other => reply_to_lua(lua, &canonical(other.clone(), if resp3 { Protocol::Resp3 } else { Protocol::Resp2 }), resp3)?,
    })
}

/// `{err = "CODE message"}` as `luaPushErrorBuff` builds it: a message without a code gets
/// `ERR`, trailing newlines are trimmed.
pub fn error_table(lua: &Lua, message: &[u8]) -> Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(normalize_error(message))?)?;
    Ok(t)
}

/// An error message with its code, as Redis stores it in an error table.
pub fn normalize_error(message: &[u8]) -> Vec<u8> {
    let m = message.strip_prefix(b"-").unwrap_or(message);
    let mut end = m.len();
    while end > 0 && (m[end - 1] == b'\n' || m[end - 1] == b'\r') {
        end -= 1;
    }
    let m = &m[..end];
    let has_code = m.iter().position(|&b| b == b' ').is_some_and(|sp| sp > 0 && m[..sp].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-'));
    if has_code || (message.first() == Some(&b'-') && m.iter().all(|&b| b != b' ')) {
        if m.iter().all(|&b| b != b' ') {
            // "-CODE" alone: Redis keeps "ERR" as the code and the word as the message.
            let mut v = b"ERR ".to_vec();
            v.extend_from_slice(m);
            return v;
        }
        m.to_vec()
    } else {
        let mut v = b"ERR ".to_vec();
        v.extend_from_slice(m);
        v
    }
}

/// A Lua number as an integer reply: C's `(long long)` cast, which on x86-64 gives the
/// minimum for NaN and values out of range (Redis replies -9223372036854775808 to
/// `return 1e20`).
pub fn number_to_integer(n: f64) -> i64 {
    if n.is_nan() || n >= 9_223_372_036_854_775_808.0 || n < -9_223_372_036_854_775_808.0 {
        i64::MIN
    } else {
        n as i64
    }
}

/// Converts what a script returned into its reply. `script_resp3`: the protocol the script
/// chose (`redis.setresp`), which decides how booleans read.
pub fn lua_to_reply(value: &Value, script_resp3: bool, depth: usize) -> Frame {
    if depth > 1000 {
        return Frame::error("ERR reached lua stack limit");
    }
    match value {
        Value::String(s) => Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) => {
            if script_resp3 {
                Frame::Boolean(*b)
            } else if *b {
                Frame::Integer(1)
            } else {
                Frame::Null
            }
        }
        Value::Integer(n) => Frame::Integer(*n as i64),
        Value::Number(n) => Frame::Integer(number_to_integer(*n)),
        Value::Table(t) => table_to_reply(t, script_resp3, depth),
        _ => Frame::Null,
    }
}

fn string_field(t: &Table, name: &str) -> Option<Vec<u8>> {
    match t.raw_get::<Value>(name).ok()? {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn table_to_reply(t: &Table, resp3: bool, depth: usize) -> Frame {
    if let Some(err) = string_field(t, "err") {
        return Frame::Error(Bytes::from(err));
    }
    if let Some(ok) = string_field(t, "ok") {
        let ok: Vec<u8> = ok.into_iter().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
        return Frame::Simple(Bytes::from(ok));
    }
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        return Frame::Double(d);
    }
    if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
        return Frame::Double(d as f64);
    }
    if let Some(n) = string_field(t, "big_number") {
        let n: Vec<u8> = n.into_iter().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
        return Frame::BigNumber(Bytes::from(n));
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Some(format), Some(text)) = (string_field(&v, "format"), string_field(&v, "string")) {
            let mut f = [b' '; 3];
            for (i, b) in format.iter().take(3).enumerate() {
                f[i] = *b;
            }
            return Frame::Verbatim { format: f, text: Bytes::from(text) };
        }
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let mut pairs = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            pairs.push((lua_to_reply(&k, resp3, depth + 1), lua_to_reply(&v, resp3, depth + 1)));
        }
        return Frame::Map(pairs);
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let mut items = Vec::new();
        for (k, _) in s.pairs::<Value, Value>().flatten() {
            items.push(lua_to_reply(&k, resp3, depth + 1));
        }
        return Frame::Set(items);
    }
    let mut items = Vec::new();
    let mut i = 1usize;
    loop {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(lua_to_reply(&v, resp3, depth + 1)),
        }
        i += 1;
    }
    Frame::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_as_redis_builds_them() {
        assert_eq!(normalize_error(b"-WRONGTYPE Operation against"), b"WRONGTYPE Operation against".to_vec());
        assert_eq!(normalize_error(b"ERR value is not"), b"ERR value is not".to_vec());
        assert_eq!(normalize_error(b"my error\r\n"), b"ERR my error".to_vec());
        assert_eq!(normalize_error(b"-FOO"), b"ERR FOO".to_vec());
    }

    #[test]
    fn numbers_truncate_as_c_casts() {
        assert_eq!(number_to_integer(3.99), 3);
        assert_eq!(number_to_integer(-3.7), -3);
        assert_eq!(number_to_integer(1e20), i64::MIN);
        assert_eq!(number_to_integer(f64::NAN), i64::MIN);
    }

    #[test]
    fn tables_become_replies() {
        let lua = Lua::new();
        let v: Value = lua.load("return {1, 'a', {ok='fine'}, {err='E x'}, false, nil, 5}").eval().unwrap();
        let f = lua_to_reply(&v, false, 0);
        assert_eq!(
            f,
            Frame::Array(vec![Frame::Integer(1), Frame::Bulk(Bytes::from_static(b"a")), Frame::Simple(Bytes::from_static(b"fine")), Frame::Error(Bytes::from_static(b"E x")), Frame::Null])
        );
        let v: Value = lua.load("return true").eval().unwrap();
        assert_eq!(lua_to_reply(&v, true, 0), Frame::Boolean(true));
        assert_eq!(lua_to_reply(&v, false, 0), Frame::Integer(1));
    }
}
