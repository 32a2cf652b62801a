"""COMMAND GETKEYS / GETKEYSANDFLAGS: the keys of a full command, from the command table.

Every case passes against Redis 7.0 too (--target redis): the per-key flags are Redis's key
specs' (SET's key is OW update, or RW access update with GET; DEL's RM delete).
"""

import pytest

from helpers import Err

CASES = [
    (["GET", "k"], [b"k"]),
    (["SET", "a", "b", "EX", "10"], [b"a"]),
    (["MSET", "a", "1", "b", "2"], [b"a", b"b"]),
    (["DEL", "a", "b", "c"], [b"a", b"b", b"c"]),
    (["ZUNIONSTORE", "dst", "2", "a", "b", "WEIGHTS", "1", "2"], [b"dst", b"a", b"b"]),
    (["SINTERCARD", "2", "a", "b", "LIMIT", "1"], [b"a", b"b"]),
    (["LMPOP", "2", "l1", "l2", "LEFT"], [b"l1", b"l2"]),
    (["BLPOP", "a", "b", "0"], [b"a", b"b"]),
    (["GEORADIUS", "src", "0", "0", "1", "km", "STORE", "dst"], [b"src", b"dst"]),
    (["COPY", "a", "b"], [b"a", b"b"]),
    (["SORT", "k", "STORE", "d"], [b"k", b"d"]),
    (["SORT", "k", "LIMIT", "0", "1", "GET", "store", "BY", "w_*", "STORE", "d"], [b"k", b"d"]),
    (["SORT", "k", "STORE", "d1", "STORE", "d2"], [b"k", b"d2"]),
    (["SORT", "k", "DESC"], [b"k"]),
    (["MEMORY", "USAGE", "k"], [b"k"]),
    (["OBJECT", "ENCODING", "k"], [b"k"]),
    (["RESTORE", "k", "0", "payload"], [b"k"]),
    (["get", "lower"], [b"lower"]),
]


@pytest.mark.parametrize("cmd,keys", CASES, ids=[" ".join(c) for c, _ in CASES])
def test_getkeys(c, cmd, keys):
    assert c("COMMAND", "GETKEYS", *cmd) == keys


def test_getkeys_errors(c):
    assert c("COMMAND", "GETKEYS", "NOSUCH", "a") == Err("ERR Invalid command specified")
    assert c("COMMAND", "GETKEYS", "OBJECT", "NOSUCH", "k") == Err("ERR Invalid command specified")
    assert c("COMMAND", "GETKEYS", "PING", "x") == Err("ERR The command has no key arguments")
    assert c("COMMAND", "GETKEYS", "GET", "a", "b") == \
        Err("ERR Invalid number of arguments specified for command")
    assert c("COMMAND", "GETKEYS", "SINTERCARD", "0", "a") == \
        Err("ERR Invalid arguments specified for command")
    assert c("COMMAND", "GETKEYS", "SINTERCARD", "5", "a") == \
        Err("ERR Invalid arguments specified for command")
    assert c("COMMAND", "GETKEYS", "GET") == \
        Err("ERR wrong number of arguments for 'command|getkeys' command")
    assert c("COMMAND", "GETKEYSANDFLAGS", "GET") == \
        Err("ERR wrong number of arguments for 'command|getkeysandflags' command")


def test_getkeysandflags_read(c):
    assert c("COMMAND", "GETKEYSANDFLAGS", "GET", "k") == [[b"k", ["RO", "access"]]]
    assert c("COMMAND", "GETKEYSANDFLAGS", "MGET", "a", "b") == \
        [[b"a", ["RO", "access"]], [b"b", ["RO", "access"]]]


def test_getkeysandflags_write(c):
    # Per-key specs; SET's and BITFIELD's flags depend on their options (variable_flags).
    assert c("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v") == [[b"k", ["OW", "update"]]]
    assert c("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "GET") == [[b"k", ["RW", "access", "update"]]]
    assert c("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", "GET", "u8", "0") == [[b"k", ["RO", "access"]]]
    assert c("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", "SET", "u8", "0", "1") == \
        [[b"k", ["RW", "access", "update"]]]
    assert c("COMMAND", "GETKEYSANDFLAGS", "DEL", "a", "b") == [[b"a", ["RM", "delete"]], [b"b", ["RM", "delete"]]]
    assert c("COMMAND", "GETKEYSANDFLAGS", "LMOVE", "s", "d", "LEFT", "LEFT") == \
        [[b"s", ["RW", "access", "delete"]], [b"d", ["RW", "insert"]]]
