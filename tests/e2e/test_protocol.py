"""Wire protocol: RESP parsing errors, inline commands, pipelining, limits,
and RESP3 reply shapes."""

import pytest

from helpers import Err, RespClient, Verbatim, encode_command, send_raw


def raw_roundtrip(server, data, nreplies=1):
    replies, cl = send_raw(server.host, server.port, data, nreplies)
    return replies, cl


def expect_protocol_error(server, data, message):
    """Send `data`; expect exactly `-ERR Protocol error: <message>` and then
    the connection being closed by the server."""
    c = RespClient(server.host, server.port)
    try:
        c.send(data)
        assert c.read_reply() == Err("ERR Protocol error: " + message)
        assert c.is_closed(), "connection should be closed after a protocol error"
    finally:
        c.close()


# ---------------------------------------------------------------- malformed RESP

@pytest.mark.parametrize("data,message", [
    (b"*abc\r\n", "invalid multibulk length"),
    (b"*-5x\r\n", "invalid multibulk length"),
    (b"*+1\r\n$4\r\nPING\r\n", "invalid multibulk length"),
    (b"*2147483648\r\n", "invalid multibulk length"),
    (b"*1\r\nfoo\r\n", "expected '$', got 'f'"),
    (b"*2\r\n$4\r\nECHO\r\n:1\r\n", "expected '$', got ':'"),
    (b"*1\r\n$abc\r\n", "invalid bulk length"),
    (b"*1\r\n$-1\r\n", "invalid bulk length"),
    (b"*1\r\n$-5\r\n", "invalid bulk length"),
    (b"*1\r\n$ 4\r\nPING\r\n", "invalid bulk length"),
    (b"*1\r\n$536870913\r\n", "invalid bulk length"),
    (b'SET a "b\r\n', "unbalanced quotes in request"),
    (b"SET a 'b\r\n", "unbalanced quotes in request"),
    (b'SET a "b"c\r\n', "unbalanced quotes in request"),
])
def test_malformed_request(server, r, data, message):
    expect_protocol_error(server, data, message)


def test_protocol_error_after_valid_commands(server, r):
    c = RespClient(server.host, server.port)
    try:
        c.send(encode_command("SET", "before", "1") + encode_command("PING") + b"*x\r\n"
               + encode_command("SET", "after", "1"))
        assert c.read_reply() == "OK"
        assert c.read_reply() == "PONG"
        assert c.read_reply() == Err("ERR Protocol error: invalid multibulk length")
        assert c.is_closed()
    finally:
        c.close()
    assert r.get("before") == b"1"
    assert r.get("after") is None


def test_too_big_inline_request(server, r):
    # an inline request line longer than 64 KiB without a newline
    expect_protocol_error(server, b"a" * 70000, "too big inline request")


def test_too_big_count_strings(server, r):
    expect_protocol_error(server, b"*" + b"1" * 70000, "too big mbulk count string")
    expect_protocol_error(server, b"*1\r\n$" + b"1" * 70000, "too big bulk count string")


def test_server_survives_protocol_errors(server, r):
    for _ in range(5):
        expect_protocol_error(server, b"*1\r\n$x\r\n", "invalid bulk length")
    assert r.ping() is True


def test_empty_multibulk_is_ignored(server, r):
    replies, c = raw_roundtrip(server, b"*0\r\n" + encode_command("PING"))
    assert replies == ["PONG"]
    c.close()


def test_command_split_across_writes(server, r):
    c = RespClient(server.host, server.port)
    try:
        data = encode_command("SET", "split", "value-" + "x" * 1000)
        for i in range(0, len(data), 7):
            c.send(data[i:i + 7])
        assert c.read_reply() == "OK"
        assert c("GET", "split") == b"value-" + b"x" * 1000
    finally:
        c.close()


def test_empty_bulk_command_name(server, r):
    replies, c = raw_roundtrip(server, b"*1\r\n$0\r\n\r\n")
    assert replies == [Err("ERR unknown command '', with args beginning with: ")]
    c.close()


# ---------------------------------------------------------------- inline commands

def test_inline_basic(server, r):
    replies, c = raw_roundtrip(server, b"PING\r\nSET a b\r\nGET a\r\n", 3)
    assert replies == ["PONG", "OK", b"b"]
    c.close()


def test_inline_lf_only_and_blank_lines(server, r):
    replies, c = raw_roundtrip(server, b"\r\n\r\nPING\nECHO hi\n   \r\nPING\r\n", 3)
    assert replies == ["PONG", b"hi", "PONG"]
    c.close()


def test_inline_quoting(server, r):
    replies, c = raw_roundtrip(
        server,
        b"SET \"hello world\" 'single quoted'\r\n"
        b"GET \"hello world\"\r\n"
        b"SET esc \"a\\x41\\n\\t\\\"b\"\r\n"
        b"GET esc\r\n"
        b"SET sq 'it\\'s'\r\n"
        b"GET sq\r\n",
        6)
    assert replies == ["OK", b"single quoted", "OK", b"aA\n\t\"b", "OK", b"it's"]
    c.close()


def test_inline_multiple_spaces(server, r):
    replies, c = raw_roundtrip(server, b"SET    k     v  \r\nGET k\r\n", 2)
    assert replies == ["OK", b"v"]
    c.close()


def test_inline_errors(server, r):
    replies, c = raw_roundtrip(server, b"GET\r\nFOO bar\r\n", 2)
    assert replies == [Err("ERR wrong number of arguments for 'get' command"),
                       Err("ERR unknown command 'FOO', with args beginning with: 'bar' ")]
    assert c("PING") == "PONG"
    c.close()


def test_inline_and_resp_mixed(server, r):
    data = b"SET a 1\r\n" + encode_command("INCR", "a") + b"GET a\r\n"
    replies, c = raw_roundtrip(server, data, 3)
    assert replies == ["OK", 2, b"2"]
    c.close()


# ---------------------------------------------------------------- pipelining

def test_pipeline_10000_commands_one_write(server, r):
    n = 10000
    parts = []
    for i in range(n):
        m = i % 4
        if m == 0:
            parts.append(encode_command("SET", "p:%d" % i, "v%d" % i))
        elif m == 1:
            parts.append(encode_command("GET", "p:%d" % (i - 1)))
        elif m == 2:
            parts.append(encode_command("INCR", "counter"))
        else:
            parts.append(b"PING\r\n")
    data = b"".join(parts)
    c = RespClient(server.host, server.port, timeout=30)
    try:
        c.send(data)
        replies = [c.read_reply() for _ in range(n)]
    finally:
        c.close()
    incr = 0
    for i, rep in enumerate(replies):
        m = i % 4
        if m == 0:
            assert rep == "OK", (i, rep)
        elif m == 1:
            assert rep == b"v%d" % (i - 1), (i, rep)
        elif m == 2:
            incr += 1
            assert rep == incr, (i, rep)
        else:
            assert rep == "PONG", (i, rep)
    assert r.get("counter") == str(n // 4).encode()
    assert r.dbsize() == n // 4 + 1


def test_pipeline_redis_py(r):
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set("k%d" % i, i)
    for i in range(1000):
        p.get("k%d" % i)
    res = p.execute()
    assert res[:1000] == [True] * 1000
    assert res[1000:] == [str(i).encode() for i in range(1000)]


def test_pipeline_errors_do_not_break_stream(server, r):
    data = (encode_command("SET", "s", "x") + encode_command("INCR", "s")
            + encode_command("GET") + encode_command("GET", "s"))
    replies, c = raw_roundtrip(server, data, 4)
    assert replies == ["OK", Err("ERR value is not an integer or out of range"),
                       Err("ERR wrong number of arguments for 'get' command"), b"x"]
    c.close()


# ---------------------------------------------------------------- limits

def test_proto_max_bulk_len(server):
    limit = 1024 * 1024
    s = server.start(["--proto-max-bulk-len", str(limit)])
    c = RespClient(s.host, s.port)
    try:
        # exactly at the limit is accepted
        assert c("SET", "k", b"x" * limit) == "OK"
        assert c("STRLEN", "k") == limit
        # string-growing commands obey the same limit
        too_big = Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
        assert c("APPEND", "k", "y") == too_big
        assert c("SETRANGE", "k", str(limit), "y") == too_big
        assert c("SETRANGE", "k", str(limit - 1), "y") == limit
        assert c("SETRANGE", "other", str(limit), "y") == too_big
        assert c("CONFIG", "GET", "proto-max-bulk-len") == [
            b"proto-max-bulk-len", str(limit).encode()]
        # one byte over the limit: protocol error, connection closed
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (limit + 1))
        assert c.read_reply() == Err("ERR Protocol error: invalid bulk length")
        assert c.is_closed()
    finally:
        c.close()
    c2 = RespClient(s.host, s.port)
    try:
        assert c2("STRLEN", "k") == limit
    finally:
        c2.close()


def test_client_query_buffer_limit(server):
    s = server.start(["--client-query-buffer-limit", str(1024 * 1024)])
    c = RespClient(s.host, s.port)
    try:
        big = b"x" * (3 * 1024 * 1024)
        data = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % len(big) + big + b"\r\n"
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        # the client is disconnected (no reply is required); the value is not stored
        assert c.is_closed(timeout=10)
    finally:
        c.close()
    c2 = RespClient(s.host, s.port)
    try:
        assert c2("EXISTS", "k") == 0
        assert c2("CONFIG", "GET", "client-query-buffer-limit") == [
            b"client-query-buffer-limit", b"1048576"]
    finally:
        c2.close()


def test_large_value_roundtrip(server, r):
    val = bytes(range(256)) * (4 * 1024 * 8)  # 8 MiB
    c = RespClient(server.host, server.port, timeout=30)
    try:
        assert c("SET", "big", val) == "OK"
        assert c("GET", "big") == val
    finally:
        c.close()


def test_many_arguments(server, r):
    n = 50000
    args = []
    for i in range(n):
        args += ["m%d" % i, "v"]
    c = RespClient(server.host, server.port, timeout=30)
    try:
        assert c("MSET", *args) == "OK"
        assert c("DBSIZE") == n
        vals = c("MGET", *["m%d" % i for i in range(n)])
        assert vals == [b"v"] * n
    finally:
        c.close()


# ---------------------------------------------------------------- RESP3 shapes

def test_resp3_reply_types(c):
    c("HELLO", "3")
    c("SET", "a", "1")
    checks = [
        (("GET", "nokey"), b"_\r\n"),
        (("MGET", "a", "nokey"), b"*2\r\n$1\r\n1\r\n_\r\n"),
        (("CONFIG", "GET", "timeout"), b"%1\r\n$7\r\ntimeout\r\n$1\r\n0\r\n"),
        (("EXISTS", "a"), b":1\r\n"),
        (("TYPE", "a"), b"+string\r\n"),
        (("SET", "x", "1", "GET"), b"_\r\n"),
        (("CLIENT", "GETNAME"), b"_\r\n"),
        (("INCRBYFLOAT", "f", "1.5"), b"$3\r\n1.5\r\n"),
        (("KEYS", "zz*"), b"*0\r\n"),
    ]
    for cmd, expected in checks:
        c.send(encode_command(*cmd))
        got = b""
        while len(got) < len(expected):
            if not c.buf:
                c._fill()
            take = min(len(expected) - len(got), len(c.buf))
            got += c.buf[:take]
            c.buf = c.buf[take:]
        assert got == expected, cmd


def test_resp3_info_is_verbatim(c):
    c("HELLO", "3")
    info = c("INFO", "server")
    assert isinstance(info, Verbatim)
    assert info.fmt == b"txt"
    assert info.startswith(b"# Server\r\n")
    cl = c("CLIENT", "LIST")
    assert isinstance(cl, Verbatim) and cl.fmt == b"txt"
    assert cl.startswith(b"id=")
    ci = c("CLIENT", "INFO")
    assert isinstance(ci, Verbatim) and ci.fmt == b"txt"


def test_resp3_redis_py(r3):
    r3.set("a", 1)
    assert r3.config_get("timeout") == {"timeout": "0"}
    assert "redis_version" in r3.info("server")
    assert r3.get("nope") is None


def test_random_garbage_never_takes_the_server_down(server, r):
    # Random bytes, random RESP fragments and random commands with random arguments: each
    # connection gets an error reply or is closed, and the server keeps serving.
    import random
    import socket

    rng = random.Random(1234)
    names = [b"SET", b"GET", b"MSET", b"SADD", b"HSET", b"PFADD", b"HLL.ADD", b"EXPIRE",
             b"SCAN", b"CLIENT", b"CONFIG", b"MULTI", b"EXEC", b"SINTERCARD", b"LCS", b"BITPOS"]
    for i in range(1500):
        kind = i % 3
        if kind == 0:
            payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
        elif kind == 1:
            payload = rng.choice([b"*", b"$", b"*2\r\n$", b"*1\r\n$-5\r\n", b"*3\r\n$3\r\nSET\r\n"]) \
                + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
        else:
            args = [rng.choice(names)] + [
                rng.choice([b"", b"-1", b"0", b"99999999999999999999", b"x" * rng.randint(1, 50),
                            str(rng.randint(-5, 5)).encode(), b"LIMIT", b"NX", b"EX"])
                for _ in range(rng.randint(0, 6))]
            payload = encode_command(*args)
        with socket.create_connection((server.host, server.port), timeout=5) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            try:
                while s.recv(65536):
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
    assert r.ping()
    r.set("still", "alive")
    assert r.get("still") == b"alive"


def test_errors_quote_arguments_byte_for_byte(c):
    # Found by test_differential_resp3.py: an argument quoted in an error reply is sent back
    # as its bytes (Redis's %s), not as U+FFFD replacement characters.
    x = b"\xff\xfe"
    checks = [
        ((b"EXPIRE", b"k", b"100", b"XX", x), b"-ERR Unsupported option \xff\xfe\r\n"),
        ((b"PEXPIREAT", b"k", b"1", x), b"-ERR Unsupported option \xff\xfe\r\n"),
        ((b"HELLO", b"3", x), b"-ERR Syntax error in HELLO option '\xff\xfe'\r\n"),
        ((b"CLIENT", b"KILL", b"TYPE", x), b"-ERR Unknown client type '\xff\xfe'\r\n"),
        ((b"DEBUG", x), b"-ERR unknown subcommand or wrong number of arguments for "
                        b"'\xff\xfe'. Try DEBUG HELP.\r\n"),
        ((b"OBJECT", x, b"k"), b"-ERR unknown subcommand '\xff\xfe'. Try OBJECT HELP.\r\n"),
        ((b"CONFIG", b"a\x00" + x), b"-ERR unknown subcommand 'a'. Try CONFIG HELP.\r\n"),
    ]
    for cmd, expected in checks:
        c.send(encode_command(*cmd))
        while len(c.buf) < len(expected):
            c._fill()
        got, c.buf = c.buf[:len(expected)], c.buf[len(expected):]
        assert got == expected, cmd
