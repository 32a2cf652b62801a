"""Authentication (requirepass), HELLO AUTH, and start-up safety (protected mode)."""

import re

import pytest
import redis

from helpers import Err, RespClient, encode_command

PASSWORD = "s3cret-pw"
NOAUTH = Err("NOAUTH Authentication required.")
WRONGPASS = Err("WRONGPASS invalid username-password pair or user is disabled.")
HELLO_NOAUTH = Err(
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
    "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
    "select the RESP protocol version at the same time")


@pytest.fixture
def secure(server):
    """A private server started with --requirepass."""
    return server.start(["--requirepass", PASSWORD])


@pytest.fixture
def sc(secure):
    cl = RespClient(secure.host, secure.port)
    yield cl
    cl.close()


def test_commands_require_auth(sc):
    for cmd in (("PING",), ("GET", "a"), ("SET", "a", "b"), ("CLIENT", "ID"),
                ("MULTI",), ("INFO",), ("CONFIG", "GET", "timeout"), ("SELECT", "1")):
        assert sc(*cmd) == NOAUTH, cmd


def test_unknown_command_and_arity_checked_before_auth(sc):
    # Redis looks the command up (and checks its arity) before checking auth
    assert sc("NOSUCHCOMMAND") == Err(
        "ERR unknown command 'NOSUCHCOMMAND', with args beginning with: ")
    assert sc("GET") == Err("ERR wrong number of arguments for 'get' command")


def test_hello_requires_auth(sc):
    rep = sc("HELLO")
    assert isinstance(rep, Err) and rep.message.startswith("NOAUTH HELLO must be called")
    rep = sc("HELLO", "3")
    assert isinstance(rep, Err) and rep.message.startswith("NOAUTH HELLO must be called")


def test_hello_noauth_exact_message(sc):
    # Redis 7.0.x text (note: 7.0 omits "<proto>"; later versions include it)
    rep = sc("HELLO", "3")
    assert rep.message in (
        HELLO_NOAUTH.message,
        HELLO_NOAUTH.message.replace("HELLO <proto> AUTH", "HELLO AUTH"),
    )


def test_auth_wrong_password(sc):
    assert sc("AUTH", "wrong") == WRONGPASS
    assert sc("AUTH", "default", "wrong") == WRONGPASS
    assert sc("AUTH", "nosuchuser", PASSWORD) == WRONGPASS
    assert sc("PING") == NOAUTH


def test_auth_syntax(sc):
    assert sc("AUTH") == Err("ERR wrong number of arguments for 'auth' command")
    assert sc("AUTH", "a", "b", "c") == Err("ERR syntax error")


def test_auth_ok(sc):
    assert sc("AUTH", PASSWORD) == "OK"
    assert sc("PING") == "PONG"
    assert sc("SET", "a", "b") == "OK"
    assert sc("GET", "a") == b"b"


def test_auth_username_form(sc):
    assert sc("AUTH", "default", PASSWORD) == "OK"
    assert sc("PING") == "PONG"


def test_auth_is_per_connection(secure, sc):
    assert sc("AUTH", PASSWORD) == "OK"
    other = RespClient(secure.host, secure.port)
    try:
        assert other("GET", "a") == NOAUTH
    finally:
        other.close()


def test_wrong_password_after_success_keeps_auth(sc):
    assert sc("AUTH", PASSWORD) == "OK"
    assert sc("AUTH", "wrong") == WRONGPASS
    # a failed AUTH does not log the connection out
    assert sc("PING") == "PONG"


def test_quit_allowed_without_auth(sc):
    assert sc("QUIT") == "OK"
    assert sc.is_closed()


def test_hello_auth_setname(sc):
    rep = sc("HELLO", "3", "AUTH", "default", PASSWORD, "SETNAME", "authed-client")
    assert isinstance(rep, dict)
    assert rep[b"proto"] == 3
    assert b"server" in rep and b"version" in rep
    assert sc("CLIENT", "GETNAME") == b"authed-client"
    # RESP3 now: a missing key is `_`
    sc.send(encode_command("GET", "missing"))
    assert sc._readline() == b"_"


def test_hello_2_auth(sc):
    rep = sc("HELLO", "2", "AUTH", "default", PASSWORD)
    assert isinstance(rep, list)
    assert sc("PING") == "PONG"


def test_hello_auth_wrong(sc):
    assert sc("HELLO", "3", "AUTH", "default", "bad") == WRONGPASS
    assert sc("HELLO", "3", "AUTH", "default", "bad", "SETNAME", "x") == WRONGPASS
    assert sc("PING") == NOAUTH


def test_reset_deauthenticates(sc):
    assert sc("AUTH", PASSWORD) == "OK"
    assert sc("RESET") == "RESET"
    assert sc("PING") == NOAUTH


def test_unauthenticated_request_size_limits(secure):
    # before authentication, big requests are refused outright
    for data, msg in ((b"*11\r\n", "unauthenticated multibulk length"),
                      (b"*2\r\n$16385\r\n", "unauthenticated bulk length")):
        cl = RespClient(secure.host, secure.port)
        try:
            cl.send(data)
            assert cl.read_reply() == Err("ERR Protocol error: " + msg)
            assert cl.is_closed()
        finally:
            cl.close()


def test_authenticated_no_size_limits(secure):
    cl = RespClient(secure.host, secure.port)
    try:
        assert cl("AUTH", PASSWORD) == "OK"
        args = []
        for i in range(20):
            args += ["k%d" % i, "x" * 20000]
        assert cl("MSET", *args) == "OK"
    finally:
        cl.close()


def test_redis_py_auth(secure):
    good = secure.client(password=PASSWORD)
    try:
        assert good.ping() is True
        good.set("x", "1")
        assert good.get("x") == b"1"
    finally:
        good.close()
    bad = secure.client()
    try:
        with pytest.raises(redis.AuthenticationError):
            bad.get("x")
    finally:
        bad.close()
    wrong = secure.client(password="nope")
    try:
        with pytest.raises(redis.AuthenticationError):
            wrong.ping()
    finally:
        wrong.close()


def test_redis_py_resp3_auth(secure):
    cl = secure.client(password=PASSWORD, protocol=3, client_name="py3")
    try:
        assert cl.ping() is True
        assert cl.client_getname() == b"py3"
    finally:
        cl.close()


# ---------------------------------------------------------------- start-up safety

@pytest.mark.abacus_only(
    "Redis 7.0 starts with --bind 0.0.0.0 and no password and instead rejects "
    "non-loopback clients at connect time (protected mode); abacus refuses to start")
def test_bind_all_without_password_refuses_to_start(server):
    p = server.start(["--bind", "0.0.0.0"], wait=False)
    code = p.wait_exit(20)
    assert code is not None, "server kept running with --bind 0.0.0.0 and no password"
    assert code != 0
    out = p.log()
    assert out.strip(), "server exited without explaining why"
    assert re.search(r"protected|requirepass|password", out, re.I), out


def test_bind_all_with_protected_mode_no_starts(server):
    s = server.start(["--bind", "0.0.0.0", "--protected-mode", "no"])
    cl = RespClient("127.0.0.1", s.port)
    try:
        assert cl("PING") == "PONG"
    finally:
        cl.close()


def test_bind_all_with_password_starts(server):
    s = server.start(["--bind", "0.0.0.0", "--requirepass", PASSWORD])
    cl = RespClient("127.0.0.1", s.port)
    try:
        assert cl("PING") == NOAUTH
        assert cl("AUTH", PASSWORD) == "OK"
        assert cl("PING") == "PONG"
    finally:
        cl.close()


def test_explicit_loopback_bind(server):
    s = server.start(["--bind", "127.0.0.1"])
    cl = RespClient("127.0.0.1", s.port)
    try:
        assert cl("PING") == "PONG"
        assert cl("CONFIG", "GET", "bind") == [b"bind", b"127.0.0.1"]
    finally:
        cl.close()
