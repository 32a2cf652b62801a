"""Connection commands: PING ECHO HELLO AUTH SELECT QUIT RESET CLIENT COMMAND TIME."""

import time

import pytest
import redis

from helpers import Err, Push, RespSet, encode_command, wait_until


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


# ---------------------------------------------------------------- PING / ECHO

def test_ping(c):
    assert c("PING") == "PONG"
    assert c("ping") == "PONG"
    assert c("PING", "hello world") == b"hello world"
    assert c("PING", "") == b""
    assert c("PING", "a", "b") == wrong_args("ping")


def test_ping_redis_py(r):
    assert r.ping() is True


def test_ping_resp3(c):
    assert c("HELLO", "3")[b"proto"] == 3
    assert c("PING") == "PONG"
    assert c("PING", "x") == b"x"


def test_echo(c):
    assert c("ECHO", "hello") == b"hello"
    assert c("ECHO", "") == b""
    assert c("ECHO", b"\x00\xff\r\nbin") == b"\x00\xff\r\nbin"
    assert c("ECHO") == wrong_args("echo")
    assert c("ECHO", "a", "b") == wrong_args("echo")


def test_unknown_command(c):
    assert c("NOSUCHCMD") == Err("ERR unknown command 'NOSUCHCMD', with args beginning with: ")
    assert c("nosuchcmd", "a", "b") == Err(
        "ERR unknown command 'nosuchcmd', with args beginning with: 'a' 'b' ")


def _raw_reply(server, *args):
    """The raw bytes of the reply to one command (followed by a PING to find its end)."""
    import socket
    s = socket.create_connection((server.host, server.port), timeout=10)
    try:
        s.sendall(encode_command(*args) + encode_command("PING"))
        buf = b""
        while not buf.endswith(b"+PONG\r\n"):
            data = s.recv(65536)
            assert data, "connection closed"
            buf += data
        return buf[:-len(b"+PONG\r\n")]
    finally:
        s.close()


def test_unknown_command_listing_is_redis_bytes(server):
    # The arguments are listed while the listing is under 128 bytes (each cut to keep it at
    # 128), the name is cut at 128; each stops at a NUL byte (Redis formats C strings), other
    # bytes are sent as they are, and CR/LF become spaces.
    head = b"-ERR unknown command '%s', with args beginning with: "
    args = [b"abcdefghij%d" % i for i in range(30)]
    assert _raw_reply(server, b"FOO", *args) == head % b"FOO" + (
        b"'abcdefghij0' 'abcdefghij1' 'abcdefghij2' 'abcdefghij3' 'abcdefghij4' 'abcdefghij5' "
        b"'abcdefghij6' 'abcdefghij7' 'abcdefghij8' 'ab' \r\n")
    assert _raw_reply(server, b"F\xffO\x00X", b"a\x00b", b"c\r\nd", b"\xfe") == (
        head % b"F\xffO" + b"'a' 'c  d' '\xfe' \r\n")
    assert _raw_reply(server, b"x" * 200, b"y" * 200) == (
        head % (b"x" * 128) + b"'" + b"y" * 128 + b"' \r\n")
    assert _raw_reply(server, b"BAR", b"q" * 120, b"r" * 5) == (
        head % b"BAR" + b"'" + b"q" * 120 + b"' '" + b"r" * 5 + b"' \r\n")


def test_wrong_arity_message_uses_lowercase_name(c):
    assert c("GET") == wrong_args("get")
    assert c("gEt", "a", "b") == wrong_args("get")
    assert c("SET", "a") == wrong_args("set")


# ---------------------------------------------------------------- HELLO

def _pairs_to_dict(lst):
    return {lst[i]: lst[i + 1] for i in range(0, len(lst), 2)}


def test_hello_default_is_resp2(c):
    rep = c("HELLO")
    assert isinstance(rep, list)
    d = _pairs_to_dict(rep)
    assert isinstance(d[b"server"], bytes) and d[b"server"]
    assert isinstance(d[b"version"], bytes)
    assert d[b"proto"] == 2
    assert isinstance(d[b"id"], int)
    assert d[b"mode"] == b"standalone"
    assert d[b"role"] == b"master"
    assert d[b"modules"] == []


def test_hello_2(c):
    d = _pairs_to_dict(c("HELLO", "2"))
    assert d[b"proto"] == 2


def test_hello_3_switches_to_resp3(c):
    rep = c("HELLO", "3")
    assert isinstance(rep, dict)
    assert rep[b"proto"] == 3
    assert set(rep) >= {b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"}
    assert rep[b"id"] == c("CLIENT", "ID")
    # a RESP3 null is sent as `_`
    c.send(encode_command("GET", "nokey"))
    assert c._readline() == b"_"
    # HGETALL-like map reply shape is checked through HELLO itself; go back
    assert isinstance(c("HELLO", "2"), list)
    c.send(encode_command("GET", "nokey"))
    assert c._readline() == b"$-1"


def test_hello_bad_protocol(c):
    assert c("HELLO", "4") == Err("NOPROTO unsupported protocol version")
    assert c("HELLO", "1") == Err("NOPROTO unsupported protocol version")
    assert c("HELLO", "0") == Err("NOPROTO unsupported protocol version")
    assert c("HELLO", "abc") == Err("ERR Protocol version is not an integer or out of range")
    # the connection is still usable and still RESP2
    assert c("PING") == "PONG"


def test_hello_setname(c):
    rep = c("HELLO", "3", "SETNAME", "myname")
    assert rep[b"proto"] == 3
    assert c("CLIENT", "GETNAME") == b"myname"


def test_hello_setname_invalid(c):
    assert c("HELLO", "3", "SETNAME", "bad name") == Err(
        "ERR Client names cannot contain spaces, newlines or special characters.")


def test_hello_syntax_error(c):
    assert c("HELLO", "3", "FOO") == Err("ERR Syntax error in HELLO option 'FOO'")
    assert c("HELLO", "3", "AUTH", "default") == Err("ERR Syntax error in HELLO option 'AUTH'")


def test_hello_auth_without_requirepass(c):
    # the default user has `nopass`: any password is accepted with the
    # two-argument form
    rep = c("HELLO", "3", "AUTH", "default", "whatever")
    assert rep[b"proto"] == 3
    assert c("HELLO", "2", "AUTH", "nosuchuser", "pw") == Err(
        "WRONGPASS invalid username-password pair or user is disabled.")


def test_redis_py_resp3(r3):
    r3.set("k", "v")
    assert r3.get("k") == b"v"
    assert r3.get("missing") is None


# ---------------------------------------------------------------- AUTH

def test_auth_without_password_configured(c):
    assert c("AUTH", "pw") == Err(
        "ERR AUTH <password> called without any password configured for the "
        "default user. Are you sure your configuration is correct?")
    assert c("AUTH", "default", "anything") == "OK"
    assert c("AUTH", "nosuchuser", "pw") == Err(
        "WRONGPASS invalid username-password pair or user is disabled.")
    assert c("AUTH") == wrong_args("auth")
    assert c("AUTH", "a", "b", "c") == Err("ERR syntax error")


# ---------------------------------------------------------------- SELECT

def test_select(c):
    for db in range(16):
        assert c("SELECT", db) == "OK"
        assert c("SET", "k", "db%d" % db) == "OK"
    for db in range(16):
        assert c("SELECT", str(db)) == "OK"
        assert c("GET", "k") == b"db%d" % db
        assert c("DBSIZE") == 1


def test_select_out_of_range(c):
    assert c("SELECT", "16") == Err("ERR DB index is out of range")
    assert c("SELECT", "-1") == Err("ERR DB index is out of range")
    assert c("SELECT", "100000") == Err("ERR DB index is out of range")
    assert c("SELECT", "abc") == Err("ERR value is not an integer or out of range")
    assert c("SELECT", "1.5") == Err("ERR value is not an integer or out of range")
    assert c("SELECT") == wrong_args("select")


def test_select_is_per_connection(c, raw_conn):
    c("SELECT", "3")
    c("SET", "k", "v")
    other = raw_conn()
    assert other("GET", "k") is None
    assert other("SELECT", "3") == "OK"
    assert other("GET", "k") == b"v"


# ---------------------------------------------------------------- QUIT / RESET

def test_quit(c):
    assert c("QUIT") == "OK"
    assert c.is_closed()


def test_quit_after_pipelined_commands(c):
    c.send(encode_command("SET", "q", "1") + encode_command("QUIT") + encode_command("SET", "q", "2"))
    assert c.read_reply() == "OK"
    assert c.read_reply() == "OK"
    assert c.is_closed()


def test_quit_value_written(r, c):
    c.send(encode_command("SET", "q", "1") + encode_command("QUIT") + encode_command("SET", "q", "2"))
    assert c.read_reply() == "OK"
    assert c.read_reply() == "OK"
    assert c.is_closed()
    assert r.get("q") == b"1"


def test_quit_inside_multi_is_not_queued(r, c):
    # Redis 7.0 runs QUIT at once inside MULTI: OK, then the connection closes
    # and the transaction is dropped
    assert c("MULTI") == "OK"
    assert c("SET", "q", "1") == "QUEUED"
    assert c("QUIT") == "OK"
    assert c.is_closed()
    assert r.get("q") is None


def test_reset(c):
    c("SELECT", "5")
    c("CLIENT", "SETNAME", "before")
    c("HELLO", "3")
    assert c("MULTI") == "OK"
    assert c("SET", "x", "1") == "QUEUED"
    assert c("RESET") == "RESET"
    # back to defaults: db 0, no name, RESP2, no transaction
    assert c("CLIENT", "GETNAME") is None
    assert c("EXEC") == Err("ERR EXEC without MULTI")
    c.send(encode_command("GET", "nokey"))
    assert c._readline() == b"$-1"
    c("SET", "where", "db0")
    assert c("SELECT", "0") == "OK"
    assert c("GET", "where") == b"db0"


def test_reset_clears_watch(c, raw_conn):
    c("SET", "w", "1")
    assert c("WATCH", "w") == "OK"
    assert c("RESET") == "RESET"
    raw_conn()("SET", "w", "2")
    assert c("MULTI") == "OK"
    assert c("GET", "w") == "QUEUED"
    assert c("EXEC") == [b"2"]


def test_reset_arity(c):
    assert c("RESET", "x") == wrong_args("reset")


# ---------------------------------------------------------------- CLIENT

def test_client_id(c, raw_conn):
    a = c("CLIENT", "ID")
    b = raw_conn()("CLIENT", "ID")
    assert isinstance(a, int) and isinstance(b, int)
    assert a > 0 and b > a
    assert c("CLIENT", "ID") == a


def test_client_setname_getname(c):
    assert c("CLIENT", "GETNAME") is None
    assert c("CLIENT", "SETNAME", "worker-1") == "OK"
    assert c("CLIENT", "GETNAME") == b"worker-1"
    assert c("CLIENT", "SETNAME", "") == "OK"
    assert c("CLIENT", "GETNAME") is None


def test_client_setname_invalid(c):
    msg = Err("ERR Client names cannot contain spaces, newlines or special characters.")
    assert c("CLIENT", "SETNAME", "a b") == msg
    assert c("CLIENT", "SETNAME", "a\nb") == msg
    assert c("CLIENT", "SETNAME", "a\x01b") == msg
    assert c("CLIENT", "SETNAME") == Err("ERR wrong number of arguments for 'client|setname' command")
    assert c("CLIENT", "GETNAME") is None


def test_client_unknown_subcommand(c):
    rep = c("CLIENT", "FOOBAR")
    assert isinstance(rep, Err)
    assert rep.message.startswith("ERR unknown subcommand 'FOOBAR'. Try CLIENT HELP.")


def test_client_list(c, raw_conn):
    c("CLIENT", "SETNAME", "lister")
    my_id = c("CLIENT", "ID")
    other = raw_conn()
    other_id = other("CLIENT", "ID")
    out = c("CLIENT", "LIST")
    assert isinstance(out, bytes)
    assert out.endswith(b"\n")
    lines = out.decode().strip("\n").split("\n")
    entries = [dict(f.split("=", 1) for f in line.split(" ") if "=" in f) for line in lines]
    by_id = {int(e["id"]): e for e in entries}
    assert my_id in by_id and other_id in by_id
    me = by_id[my_id]
    for field in ("id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "cmd"):
        assert field in me, field
    assert me["name"] == "lister"
    assert me["db"] == "0"
    assert me["cmd"] in ("client|list", "client")
    host, _, port = me["addr"].rpartition(":")
    assert host == "127.0.0.1" and port.isdigit()
    assert me["addr"] == "%s:%d" % c.sock.getsockname()


def test_client_list_id_filter(c, raw_conn):
    other = raw_conn()
    oid = other("CLIENT", "ID")
    out = c("CLIENT", "LIST", "ID", oid).decode()
    assert out.count("\n") == 1
    assert out.startswith("id=%d " % oid)
    assert c("CLIENT", "LIST", "ID", "abc") == Err("ERR Invalid client ID")
    assert c("CLIENT", "LIST", "ID", "999999999") == b""
    assert c("CLIENT", "LIST", "FOO") == Err("ERR syntax error")
    # an ID no client can have matches nothing; it is not an error
    assert c("CLIENT", "LIST", "ID", "0") == b""
    assert c("CLIENT", "LIST", "ID", "-1") == b""


def test_client_list_type(c):
    assert c("CLIENT", "LIST", "TYPE", "FOO") == Err("ERR Unknown client type 'FOO'")
    assert c("CLIENT", "LIST", "TYPE", "slave") == b""
    assert c("CLIENT", "LIST", "TYPE", "pubsub") == b""
    assert c("CLIENT", "LIST", "TYPE", "Normal").count(b"\n") >= 1
    # TYPE is a filter of its own in Redis 7.0: with anything after it, a syntax error.
    my_id = str(c("CLIENT", "ID"))
    assert c("CLIENT", "LIST", "TYPE", "master", "ID", my_id) == Err("ERR syntax error")
    assert c("CLIENT", "LIST", "TYPE", "normal", "ID", my_id) == Err("ERR syntax error")
    assert c("CLIENT", "LIST", "TYPE") == Err("ERR syntax error")
    assert c("CLIENT", "LIST", "ID") == Err("ERR syntax error")
    assert c("CLIENT", "LIST", "ID", my_id, "TYPE", "normal") == Err("ERR Invalid client ID")


def test_client_info(c):
    c("CLIENT", "SETNAME", "inf")
    out = c("CLIENT", "INFO")
    assert isinstance(out, bytes)
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    fields = dict(f.split("=", 1) for f in out.decode().strip().split(" "))
    assert int(fields["id"]) == c("CLIENT", "ID")
    assert fields["name"] == "inf"
    assert fields["cmd"] in ("client|info", "client")


def test_client_kill_by_id(c, raw_conn):
    victim = raw_conn()
    vid = victim("CLIENT", "ID")
    assert c("CLIENT", "KILL", "ID", vid) == 1
    assert victim.is_closed()
    assert c("CLIENT", "KILL", "ID", vid) == 0
    assert c("CLIENT", "KILL", "ID", "999999999") == 0
    assert c("CLIENT", "KILL", "ID", "notanumber") == Err(
        "ERR client-id should be greater than 0")


def test_client_kill_by_addr_new_form(c, raw_conn):
    victim = raw_conn()
    victim("PING")
    addr = "%s:%d" % victim.sock.getsockname()
    assert c("CLIENT", "KILL", "ADDR", addr) == 1
    assert victim.is_closed()
    assert c("CLIENT", "KILL", "ADDR", addr) == 0


def test_client_kill_by_addr_old_form(c, raw_conn):
    victim = raw_conn()
    victim("PING")
    addr = "%s:%d" % victim.sock.getsockname()
    assert c("CLIENT", "KILL", addr) == "OK"
    assert victim.is_closed()
    assert c("CLIENT", "KILL", addr) == Err("ERR No such client")


def test_client_kill_self_skipme(c):
    me = c("CLIENT", "ID")
    # SKIPME yes is the default for the filter form
    assert c("CLIENT", "KILL", "ID", me, "SKIPME", "yes") == 0
    assert c("PING") == "PONG"
    assert c("CLIENT", "KILL", "ID", me, "SKIPME", "maybe") == Err("ERR syntax error")


def test_client_kill_self_id(c):
    me = c("CLIENT", "ID")
    # killing yourself by ID without SKIPME: the reply is sent, then the
    # connection is closed
    assert c("CLIENT", "KILL", "ID", me, "SKIPME", "no") == 1
    assert c.is_closed()


def test_client_kill_syntax(c):
    assert c("CLIENT", "KILL", "FOO", "bar") == Err("ERR syntax error")
    # with exactly one argument it is the old ADDR form
    assert c("CLIENT", "KILL", "ID") == Err("ERR No such client")
    assert c("CLIENT", "KILL", "ID", "1", "ADDR") == Err("ERR syntax error")


def test_client_kill_type_and_user_filters(c, raw_conn):
    other = raw_conn()
    oid = other("CLIENT", "ID")
    assert c("CLIENT", "KILL", "TYPE", "Foo") == Err("ERR Unknown client type 'Foo'")
    assert c("CLIENT", "KILL", "USER", "nosuch") == Err("ERR No such user 'nosuch'")
    # MAXAGE is Redis 7.4's; Redis 7.0 knows no such filter
    assert c("CLIENT", "KILL", "MAXAGE", "100000") == Err("ERR syntax error")
    # no client is a pubsub/master/replica client: nothing is killed
    for t in ("pubsub", "master", "replica", "slave"):
        assert c("CLIENT", "KILL", "TYPE", t, "ID", oid) == 0
    assert other("PING") == "PONG"
    assert c("CLIENT", "KILL", "TYPE", "normal", "USER", "default", "ID", oid) == 1
    assert other.is_closed()


def test_command_info_and_docs_of_subcommand(c):
    rep = c("COMMAND", "INFO", "client|kill", "CONFIG|GET", "client|nosuch", "get|x")
    assert rep[0][0] == b"client|kill" and rep[0][1] == -3
    assert rep[1][0] == b"config|get" and rep[1][1] == -3
    assert rep[2] is None and rep[3] is None
    docs = c("COMMAND", "DOCS", "client|kill", "client|nosuch")
    assert docs[0] == b"client|kill" and len(docs) == 2


def test_client_no_evict(c):
    assert c("CLIENT", "NO-EVICT", "ON") == "OK"
    assert c("CLIENT", "NO-EVICT", "off") == "OK"
    assert c("CLIENT", "NO-EVICT", "maybe") == Err("ERR syntax error")


def test_client_no_evict_flag_in_client_info(c):
    def flags():
        fields = dict(f.split("=", 1) for f in c("CLIENT", "INFO").decode().split())
        return fields["flags"]
    assert flags() == "N"
    assert c("CLIENT", "NO-EVICT", "ON") == "OK"
    assert flags() == "e"
    assert c("CLIENT", "NO-EVICT", "OFF") == "OK"
    assert flags() == "N"


def test_client_reply_off_silences(server, r):
    c = server.raw()
    try:
        c.send(encode_command("CLIENT", "REPLY", "OFF"))
        c.send(encode_command("SET", "silent", "1"))
        c.send(encode_command("GET", "silent"))
        c.send(encode_command("NOSUCHCMD"))
        assert c.no_reply_within(0.3)
        c.send(encode_command("CLIENT", "REPLY", "ON"))
        assert c.read_reply() == "OK"
        assert c("GET", "silent") == b"1"
    finally:
        c.close()


@pytest.mark.abacus_only("Redis 7.0 sends nothing too, but then never closes: its close waits "
                         "for a reply write that CLIENT REPLY OFF suppresses")
def test_client_reply_off_protocol_error_closes_silently(server):
    c = server.raw()
    try:
        c.send(encode_command("CLIENT", "REPLY", "OFF"))
        c.send(b"*1\r\n$abc\r\n")
        # No "-ERR Protocol error" (Redis writes nothing while replies are off), then a close.
        c.sock.settimeout(5)
        received = b""
        while True:
            chunk = c.sock.recv(1 << 16)
            if not chunk:
                break
            received += chunk
        assert received == b""
    finally:
        c.close()


def test_client_reply_skip(server, r):
    c = server.raw()
    try:
        c.send(encode_command("CLIENT", "REPLY", "SKIP"))
        c.send(encode_command("SET", "skipped", "1"))
        c.send(encode_command("ECHO", "after"))
        assert c.read_reply() == b"after"
        assert r.get("skipped") == b"1"
        assert c("CLIENT", "REPLY", "ON") == "OK"
        assert c("CLIENT", "REPLY", "bogus") == Err("ERR syntax error")
    finally:
        c.close()


# ---------------------------------------------------------------- COMMAND

def test_command_count(c):
    n = c("COMMAND", "COUNT")
    assert isinstance(n, int)
    assert n > 0
    assert c("COMMAND", "COUNT", "x") == Err(
        "ERR wrong number of arguments for 'command|count' command")


def test_command_list(c):
    names = c("COMMAND", "LIST")
    assert isinstance(names, list)
    assert all(isinstance(n, bytes) for n in names)
    for cmd in (b"get", b"set", b"ping", b"multi", b"exec", b"client", b"command",
                b"expire", b"incr", b"scan", b"hello"):
        assert cmd in names
    assert len(names) == len(set(names))
    # Redis 7.0 also lists subcommands as "container|sub" (lowercase)
    assert b"client|list" in names and b"config|get" in names
    top = [n for n in names if b"|" not in n]
    assert len(top) == c("COMMAND", "COUNT")


def test_command_list_filterby_pattern(c):
    names = c("COMMAND", "LIST", "FILTERBY", "PATTERN", "getr*")
    assert names == [b"getrange"]


def test_command_acl_categories(c):
    # COMMAND INFO's categories as Redis 7.0.15 lists them (from the command's flags and
    # group), and COMMAND LIST FILTERBY ACLCAT filters by them.
    want = {
        "get": ["@read", "@string", "@fast"],
        "set": ["@write", "@string", "@slow"],
        "append": ["@write", "@string", "@fast"],
        "hset": ["@write", "@hash", "@fast"],
        "smembers": ["@read", "@set", "@slow"],
        "pfadd": ["@write", "@hyperloglog", "@fast"],
        "setbit": ["@write", "@bitmap", "@slow"],
        "del": ["@keyspace", "@write", "@slow"],
        "keys": ["@keyspace", "@read", "@slow", "@dangerous"],
        "flushall": ["@keyspace", "@write", "@slow", "@dangerous"],
        "dbsize": ["@keyspace", "@read", "@fast"],
        "ping": ["@fast", "@connection"],
        "multi": ["@fast", "@transaction"],
        "lastsave": ["@admin", "@fast", "@dangerous"],
        "client": ["@slow"],
        "client|kill": ["@admin", "@slow", "@dangerous", "@connection"],
        "command|list": ["@slow", "@connection"],
    }
    for name, cats in want.items():
        info = c("COMMAND", "INFO", name)[0]
        assert info[0] == name.encode(), name
        assert [x if isinstance(x, str) else x.decode() for x in info[6]] == cats, name
    read = c("COMMAND", "LIST", "FILTERBY", "ACLCAT", "read")
    assert b"get" in read and b"smembers" in read and b"set" not in read
    hll = c("COMMAND", "LIST", "FILTERBY", "ACLCAT", "hyperloglog")
    assert {b"pfadd", b"pfcount", b"pfmerge"} <= set(hll) and b"get" not in hll
    assert c("COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuchcategory") == []


def test_command_info_get(c):
    rep = c("COMMAND", "INFO", "GET")
    assert isinstance(rep, list) and len(rep) == 1
    info = rep[0]
    assert info[0] == b"get"
    assert info[1] == 2  # arity
    assert isinstance(info[2], list)  # flags
    assert "readonly" in info[2]
    assert info[3:6] == [1, 1, 1]  # first key, last key, step


def test_command_info_multiple_and_unknown(c):
    rep = c("COMMAND", "INFO", "set", "nosuchcommand", "mset")
    assert len(rep) == 3
    assert rep[0][0] == b"set" and rep[0][1] == -3
    assert "write" in rep[0][2]
    assert rep[1] is None
    assert rep[2][0] == b"mset" and rep[2][1] == -3
    assert rep[2][3:6] == [1, -1, 2]


def _read_bytes(c, expected):
    """The next len(expected) bytes of the reply stream, unparsed."""
    while len(c.buf) < len(expected):
        c._fill()
    got, c.buf = c.buf[:len(expected)], c.buf[len(expected):]
    return got


def test_command_info_wire_types(c):
    # Found by test_differential_resp3.py. An unknown command is a null bulk in RESP2
    # (`$-1`, Redis's addReplyNull), not a null array.
    c.send(encode_command("COMMAND", "INFO", "nosuchcommand"))
    want = b"*1\r\n$-1\r\n"
    assert _read_bytes(c, want) == want
    # RESP3: `_`; tips and key specs are sets (`~`), as in Redis 7.0, and so are the
    # subcommands when there are none (`~0`); a container's subcommands are an array.
    c("HELLO", "3")
    c.send(encode_command("COMMAND", "INFO", "nosuchcommand"))
    want = b"*1\r\n_\r\n"
    assert _read_bytes(c, want) == want
    for name in ("get", "config", "config|get"):
        info = c("COMMAND", "INFO", name)[0]
        assert info[0] == name.encode()
        assert all(isinstance(x, RespSet) for x in info[7:9]), name
        if name == "config":
            assert type(info[9]) is list
            assert {s[0] for s in info[9]} >= {b"config|get", b"config|set"}
        else:
            assert isinstance(info[9], RespSet) and info[9] == [], name


def test_command_docs_get(c):
    rep = c("COMMAND", "DOCS", "GET")
    # RESP2: flat array [name, [field, value, ...]]
    assert isinstance(rep, list) and len(rep) == 2
    assert rep[0] == b"get"
    doc = {rep[1][i]: rep[1][i + 1] for i in range(0, len(rep[1]), 2)}
    assert isinstance(doc[b"summary"], bytes) and doc[b"summary"]
    assert doc[b"group"] == b"string"
    assert b"since" in doc


def test_command_docs_resp3(c):
    c("HELLO", "3")
    rep = c("COMMAND", "DOCS", "set")
    assert isinstance(rep, dict)
    assert rep[b"set"][b"group"] == b"string"
    assert c("COMMAND", "DOCS", "nosuchcommand") == {}


def test_command_no_args(c):
    rep = c("COMMAND")
    assert isinstance(rep, list)
    assert len(rep) == c("COMMAND", "COUNT")
    names = {e[0] for e in rep}
    assert b"get" in names and b"set" in names


def test_command_unknown_subcommand(c):
    rep = c("COMMAND", "FOO")
    assert isinstance(rep, Err)
    assert rep.message.startswith("ERR unknown subcommand 'FOO'. Try COMMAND HELP.")


# ---------------------------------------------------------------- TIME

def test_time(c):
    rep = c("TIME")
    assert isinstance(rep, list) and len(rep) == 2
    secs, usecs = int(rep[0]), int(rep[1])
    assert isinstance(rep[0], bytes) and isinstance(rep[1], bytes)
    assert abs(secs - time.time()) < 60
    assert 0 <= usecs < 1_000_000
    assert c("TIME", "x") == wrong_args("time")


def test_time_redis_py(r):
    secs, usecs = r.time()
    assert abs(secs - time.time()) < 60
