"""WRONGTYPE behaviour of string and generic commands on non-string keys."""

import pytest

from helpers import Err

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")


@pytest.fixture
def typed(c):
    assert c("SADD", "myset", "a", "b", "c") == 3
    assert c("HSET", "myhash", "f1", "v1", "f2", "v2") == 2
    assert c("RPUSH", "mylist", "a", "1") == 2
    c("SET", "str", "hello")
    return c


STRING_COMMANDS = [
    ("GET", "{k}"),
    ("GETSET", "{k}", "v"),
    ("GETDEL", "{k}"),
    ("GETEX", "{k}"),
    ("GETEX", "{k}", "EX", "100"),
    ("APPEND", "{k}", "x"),
    ("STRLEN", "{k}"),
    ("SETRANGE", "{k}", "0", "x"),
    ("GETRANGE", "{k}", "0", "-1"),
    ("SUBSTR", "{k}", "0", "-1"),
    ("INCR", "{k}"),
    ("DECR", "{k}"),
    ("INCRBY", "{k}", "2"),
    ("DECRBY", "{k}", "2"),
    ("INCRBYFLOAT", "{k}", "1.5"),
    ("SETBIT", "{k}", "0", "1"),
    ("GETBIT", "{k}", "0"),
    ("BITCOUNT", "{k}"),
    ("BITPOS", "{k}", "1"),
    ("SET", "{k}", "v", "GET"),
]


@pytest.mark.parametrize("key", ["myset", "myhash", "mylist"])
@pytest.mark.parametrize("cmd", STRING_COMMANDS, ids=lambda c: " ".join(c))
def test_string_command_on_wrong_type(typed, key, cmd):
    args = [a.replace("{k}", key) for a in cmd]
    assert typed(*args) == WRONGTYPE
    # the key is untouched
    assert typed("TYPE", key) == key[2:]


def test_lcs_on_wrong_type(typed):
    assert typed("LCS", "myset", "str") == Err(
        "ERR The specified keys must contain string values")
    assert typed("LCS", "str", "myhash", "LEN") == Err(
        "ERR The specified keys must contain string values")


def test_type_and_encoding(typed):
    assert typed("TYPE", "myset") == "set"
    assert typed("TYPE", "myhash") == "hash"
    assert typed("TYPE", "mylist") == "list"
    assert typed("OBJECT", "ENCODING", "mylist") == b"quicklist"
    assert isinstance(typed("OBJECT", "ENCODING", "myset"), bytes)
    assert isinstance(typed("OBJECT", "ENCODING", "myhash"), bytes)


def test_mget_returns_nil_for_wrong_type(typed):
    assert typed("MGET", "str", "myset", "myhash", "mylist", "missing") == [b"hello", None, None, None, None]


def test_set_overwrites_other_types(typed):
    assert typed("SET", "myset", "now-a-string") == "OK"
    assert typed("TYPE", "myset") == "string"
    assert typed("GET", "myset") == b"now-a-string"
    assert typed("MSET", "myhash", "x") == "OK"
    assert typed("TYPE", "myhash") == "string"


def test_setex_overwrites_other_types(typed):
    assert typed("SETEX", "myset", "100", "v") == "OK"
    assert typed("GET", "myset") == b"v"


def test_nx_variants_see_existing_key(typed):
    assert typed("SETNX", "myset", "v") == 0
    assert typed("SET", "myset", "v", "NX") is None
    assert typed("MSETNX", "new", "1", "myhash", "v") == 0
    assert typed("EXISTS", "new") == 0
    assert typed("TYPE", "myset") == "set"


def test_set_xx_overwrites_other_type(typed):
    assert typed("SET", "myset", "v", "XX") == "OK"
    assert typed("TYPE", "myset") == "string"


def test_generic_commands_work_on_any_type(typed):
    assert typed("EXISTS", "myset", "myhash") == 2
    assert typed("EXPIRE", "myset", "100") == 1
    assert 98 <= typed("TTL", "myset") <= 100
    assert typed("PERSIST", "myset") == 1
    assert typed("RENAME", "myset", "s2") == "OK"
    assert typed("TYPE", "s2") == "set"
    assert typed("COPY", "s2", "s3") == 1
    assert typed("TYPE", "s3") == "set"
    assert typed("MOVE", "s3", "1") == 1
    assert typed("TOUCH", "s2", "myhash") == 2
    assert typed("DEL", "s2", "myhash") == 2
    assert typed("DBSIZE") == 2


def test_rename_string_over_set(typed):
    assert typed("RENAME", "str", "myset") == "OK"
    assert typed("TYPE", "myset") == "string"
    assert typed("GET", "myset") == b"hello"


def test_scan_type_filter(typed):
    def full(*opts):
        seen, cursor = [], b"0"
        for _ in range(10000):
            cursor, keys = typed("SCAN", cursor, *opts)
            seen += keys
            if cursor == b"0":
                return sorted(seen)
        raise AssertionError("SCAN did not terminate")

    assert full("TYPE", "set") == [b"myset"]
    assert full("TYPE", "hash") == [b"myhash"]
    assert full("TYPE", "string") == [b"str"]
    assert full("TYPE", "list") == [b"mylist"]
    assert full() == [b"myhash", b"mylist", b"myset", b"str"]


def test_wrongtype_inside_exec(typed):
    assert typed("MULTI") == "OK"
    assert typed("SET", "a", "1") == "QUEUED"
    assert typed("INCR", "myset") == "QUEUED"
    assert typed("GET", "myhash") == "QUEUED"
    assert typed("INCR", "a") == "QUEUED"
    assert typed("EXEC") == ["OK", WRONGTYPE, WRONGTYPE, 2]


def test_info_keyspace_counts_all_types(typed):
    out = typed("INFO", "keyspace").decode()
    assert "db0:keys=4," in out
