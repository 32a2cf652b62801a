"""redis-cli against the server (stock client compatibility)."""

import shutil
import subprocess

import pytest

from helpers import encode_command

REDIS_CLI = shutil.which("redis-cli")

pytestmark = pytest.mark.skipif(
    REDIS_CLI is None, reason="redis-cli not installed (apt-get install redis-tools)")


def cli(server, *args, stdin=None, timeout=30, extra=()):
    """Run redis-cli; return (exit code, stdout bytes, stderr bytes)."""
    argv = [REDIS_CLI, "-h", server.host, "-p", str(server.port)] + list(extra) + \
        [str(a) for a in args]
    p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def test_cli_set_get(server, r):
    rc, out, err = cli(server, "SET", "a", "b")
    assert rc == 0, err
    assert out == b"OK\n"
    rc, out, _ = cli(server, "GET", "a")
    assert rc == 0
    assert out == b"b\n"
    assert r.get("a") == b"b"


def test_cli_nil_and_integer(server, r):
    assert cli(server, "GET", "missing")[1] == b"\n"
    assert cli(server, "INCR", "n")[1] == b"1\n"
    assert cli(server, "INCRBY", "n", "41")[1] == b"42\n"


def test_cli_error_reply(server, r):
    r.set("s", "abc")
    _, out, _ = cli(server, "INCR", "s")
    assert out.strip() == b"ERR value is not an integer or out of range"


def test_cli_ping_resp3(server, r):
    rc, out, err = cli(server, "ping", extra=["-3"])
    assert rc == 0, err
    assert out == b"PONG\n"


def test_cli_hello_resp3(server, r):
    rc, out, err = cli(server, "HELLO", "3", extra=["-3"])
    assert rc == 0, err
    text = out.decode()
    assert "proto" in text and "3" in text
    assert "server" in text


def test_cli_info_server(server, r):
    rc, out, err = cli(server, "INFO", "server")
    assert rc == 0, err
    text = out.decode()
    assert text.startswith("# Server")
    assert "redis_version:" in text
    assert "tcp_port:%d" % server.port in text


def test_cli_select_db(server, r):
    assert cli(server, "SET", "x", "in2", extra=["-n", "2"])[1] == b"OK\n"
    assert r.get("x") is None
    assert cli(server, "GET", "x", extra=["-n", "2"])[1] == b"in2\n"


def test_cli_repeat(server, r):
    rc, out, _ = cli(server, "INCR", "cnt", extra=["-r", "5"])
    assert out == b"1\n2\n3\n4\n5\n"
    assert r.get("cnt") == b"5"


def test_cli_commands_from_stdin(server, r):
    rc, out, err = cli(server, stdin=b"SET a 1\nINCR a\nGET a\n")
    assert rc == 0, err
    assert out == b"OK\n2\n2\n"


def test_cli_pipe_mass_insert(server, r):
    n = 1000
    data = b"".join(encode_command("SET", "mass:%d" % i, "value-%d" % i) for i in range(n))
    rc, out, err = cli(server, stdin=data, extra=["--pipe"])
    assert rc == 0, (out, err)
    text = (out + err).decode()
    assert "errors: 0, replies: %d" % n in text, text
    assert r.dbsize() == n
    assert r.get("mass:0") == b"value-0"
    assert r.get("mass:999") == b"value-999"


def test_cli_pipe_reports_errors(server, r):
    data = encode_command("SET", "a", "1") + encode_command("INCR", "nope", "x") + \
        encode_command("SET", "b", "2")
    rc, out, err = cli(server, stdin=data, extra=["--pipe"])
    text = (out + err).decode()
    assert "errors: 1, replies: 3" in text, text
    assert r.mget("a", "b") == [b"1", b"2"]


def test_cli_scan(server, r):
    r.mset({"user:%d" % i: i for i in range(50)})
    r.mset({"other:%d" % i: i for i in range(10)})
    rc, out, _ = cli(server, extra=["--scan", "--pattern", "user:*"])
    assert rc == 0
    keys = sorted(out.decode().split())
    assert keys == sorted("user:%d" % i for i in range(50))


def test_cli_dbsize_and_flush(server, r):
    r.mset({"a": 1, "b": 2})
    assert cli(server, "DBSIZE")[1] == b"2\n"
    assert cli(server, "FLUSHALL")[1] == b"OK\n"
    assert r.dbsize() == 0


def test_cli_auth(server):
    s = server.start(["--requirepass", "clipw"])
    _, out, _ = cli(s, "GET", "a")
    assert b"NOAUTH Authentication required." in out
    rc, out, err = cli(s, "SET", "a", "1", extra=["-a", "clipw", "--no-auth-warning"])
    assert rc == 0, err
    assert out == b"OK\n"
    _, out, _ = cli(s, "GET", "a", extra=["--user", "default", "--pass", "clipw",
                                         "--no-auth-warning"])
    assert out == b"1\n"
