"""MONITOR: the stream of executed commands, compared with the real Redis's for the same
sequence (the timestamp and the client's port are the only parts that may differ)."""

import re
import socket

import pytest

from conftest import ServerProcess
from helpers import Err, RespClient, encode_command
from test_differential import redis_and_abacus

LINE = re.compile(rb"^\+(\d+)\.(\d{6}) \[(\d+) 127\.0\.0\.1:\d+\] (.*)\r\n$")


class Monitor:
    """A raw connection in MONITOR mode, read line by line."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.s.sendall(encode_command("MONITOR"))
        assert self.line() == b"+OK\r\n"

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.s.recv(65536)
            assert data, "monitor connection closed"
            self.buf += data
        i = self.buf.index(b"\r\n") + 2
        line, self.buf = self.buf[:i], self.buf[i:]
        return line

    def commands(self, n):
        """The next n lines as (db, quoted arguments), checked against Redis's format."""
        out = []
        for _ in range(n):
            line = self.line()
            m = LINE.match(line)
            assert m, line
            out.append((int(m.group(3)), m.group(4).decode()))
        return out

    def close(self):
        self.s.close()


def run_sequence(port):
    """Commands of every kind MONITOR treats differently; the last one is a marker."""
    c = RespClient("127.0.0.1", port)
    c("SET", "a b", 'x"y\nz\\')
    c("NOSUCHCOMMAND", "x")          # refused before running: not shown
    c("GET")                         # arity: not shown
    c("CONFIG", "GET", "maxmemory")  # administrative: not shown
    c("AUTH", "secret")              # shown, redacted (fails: no password set)
    c("HELLO", "2", "AUTH", "default", "pw")  # shown, redacted
    c("SET", "n", "1")
    c("INCR", "n")
    c("MULTI")
    c("SET", "k", "v")
    c("INCR", "k")                   # fails inside EXEC: still ran, shown
    assert c("EXEC")[0] == "OK"
    c("MULTI")
    c("SET", "k", "w")
    c("DISCARD")                     # queued SET never ran: not shown
    c("SELECT", "3")
    c("SET", "q", b"\x01\xff\t")
    c("MGET", "q", "{t}x", "{t}y")
    c("ECHO", "done")
    c.close()


EXPECTED = [
    (0, r'"SET" "a b" "x\"y\nz\\"'),
    (0, r'"AUTH" "(redacted)"'),
    (0, r'"HELLO" "2" "AUTH" "(redacted)" "(redacted)"'),
    (0, r'"SET" "n" "1"'),
    (0, r'"INCR" "n"'),
    (0, r'"MULTI"'),
    (0, r'"SET" "k" "v"'),
    (0, r'"INCR" "k"'),
    (0, r'"EXEC"'),
    (0, r'"MULTI"'),
    (0, r'"DISCARD"'),
    (3, r'"SELECT" "3"'),
    (3, r'"SET" "q" "\x01\xff\t"'),
    (3, r'"MGET" "q" "{t}x" "{t}y"'),
    (3, r'"ECHO" "done"'),
]


def test_monitor_shows_what_redis_shows(server):
    m = Monitor(server.port)
    try:
        run_sequence(server.port)
        assert m.commands(len(EXPECTED)) == EXPECTED
    finally:
        m.close()


@pytest.mark.abacus_only("compares Abacus with the real Redis")
def test_monitor_output_matches_redis_line_for_line():
    with redis_and_abacus() as servers:
        seen = []
        for proc in servers:
            m = Monitor(proc.port)
            run_sequence(proc.port)
            seen.append(m.commands(len(EXPECTED)))
            m.close()
        assert seen[0] == seen[1]


def test_monitor_sees_every_client_and_its_own_commands(server):
    m = Monitor(server.port)
    try:
        other = RespClient("127.0.0.1", server.port)
        for i in range(50):
            other("SET", "key:%d" % i, i)
        other.close()
        got = m.commands(50)
        assert got == [(0, '"SET" "key:%d" "%d"' % (i, i)) for i in range(50)]
        m.s.sendall(encode_command("PING"))
        lines = {m.line(), m.line()}
        assert b"+PONG\r\n" in lines, lines
        assert any(LINE.match(l) and l.endswith(b'"PING"\r\n') for l in lines), lines
    finally:
        m.close()


def test_reset_ends_monitoring(server):
    m = Monitor(server.port)
    try:
        m.s.sendall(encode_command("RESET"))
        assert m.line() == b"+RESET\r\n"
        c = RespClient("127.0.0.1", server.port)
        c("SET", "after-reset", "1")
        c.close()
        # Not a monitor any more: its next bytes are its own reply, no line of the SET.
        m.s.sendall(encode_command("ECHO", "x"))
        assert m.line() == b"$1\r\n"
    finally:
        m.close()


def test_monitor_inside_exec_is_refused(c):
    assert c("MULTI") == "OK"
    assert c("MONITOR") == "QUEUED"
    assert c("EXEC") == [Err("ERR MONITOR isn't allowed for DENY BLOCKING client")]
