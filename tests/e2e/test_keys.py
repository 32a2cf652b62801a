"""Generic key commands: DEL UNLINK EXISTS TYPE RENAME RENAMENX KEYS SCAN
RANDOMKEY MOVE COPY TOUCH OBJECT."""

import pytest

from helpers import Err

SYNTAX = Err("ERR syntax error")
NOT_INT = Err("ERR value is not an integer or out of range")
SAME = Err("ERR source and destination objects are the same")


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


# ---------------------------------------------------------------- DEL / UNLINK / EXISTS

@pytest.mark.parametrize("cmd", ["DEL", "UNLINK"])
def test_del_unlink(c, cmd):
    c("MSET", "a", "1", "b", "2", "c", "3")
    assert c(cmd, "a") == 1
    assert c(cmd, "a") == 0
    assert c(cmd, "b", "c", "d", "b") == 2
    assert c("DBSIZE") == 0
    assert c(cmd) == wrong_args(cmd.lower())


def test_exists(c):
    c("MSET", "a", "1", "b", "2")
    assert c("EXISTS", "a") == 1
    assert c("EXISTS", "x") == 0
    assert c("EXISTS", "a", "b", "x") == 2
    assert c("EXISTS", "a", "a", "a") == 3
    assert c("EXISTS") == wrong_args("exists")


def test_del_redis_py(r):
    r.set("a", 1)
    assert r.delete("a", "b") == 1
    assert r.exists("a") == 0


# ---------------------------------------------------------------- TYPE

def test_type(c):
    c("SET", "s", "x")
    c("SET", "n", "12")
    assert c("TYPE", "s") == "string"
    assert c("TYPE", "n") == "string"
    assert c("TYPE", "missing") == "none"
    assert c("TYPE") == wrong_args("type")


# ---------------------------------------------------------------- RENAME / RENAMENX

def test_rename(c):
    c("SET", "a", "1")
    assert c("RENAME", "a", "b") == "OK"
    assert c("EXISTS", "a") == 0
    assert c("GET", "b") == b"1"


def test_rename_overwrites(c):
    c("MSET", "a", "1", "b", "2")
    c("EXPIRE", "b", "100")
    assert c("RENAME", "a", "b") == "OK"
    assert c("GET", "b") == b"1"
    assert c("TTL", "b") == -1
    assert c("DBSIZE") == 1


def test_rename_moves_ttl(c):
    c("SET", "a", "1", "EX", "100")
    assert c("RENAME", "a", "b") == "OK"
    assert 98 <= c("TTL", "b") <= 100


def test_rename_missing(c):
    assert c("RENAME", "nokey", "b") == Err("ERR no such key")
    assert c("RENAMENX", "nokey", "b") == Err("ERR no such key")
    assert c("RENAME", "nokey", "nokey") == Err("ERR no such key")


def test_rename_same_key(c):
    c("SET", "a", "1", "EX", "100")
    assert c("RENAME", "a", "a") == "OK"
    assert c("GET", "a") == b"1"
    assert 98 <= c("TTL", "a") <= 100
    assert c("RENAMENX", "a", "a") == 0


def test_renamenx(c):
    c("MSET", "a", "1", "b", "2")
    assert c("RENAMENX", "a", "b") == 0
    assert c("MGET", "a", "b") == [b"1", b"2"]
    assert c("RENAMENX", "a", "c") == 1
    assert c("MGET", "a", "c") == [None, b"1"]


def test_rename_arity(c):
    assert c("RENAME", "a") == wrong_args("rename")
    assert c("RENAMENX", "a", "b", "c") == wrong_args("renamenx")


# ---------------------------------------------------------------- KEYS

def test_keys_patterns(c):
    names = ["hello", "hallo", "hxllo", "hllo", "heeeello", "hbllo", "hcllo", "hdllo",
             "h*llo", "h?llo", "h[llo", "other"]
    for n in names:
        c("SET", n, "1")

    def keys(p):
        return sorted(k.decode() for k in c("KEYS", p))

    assert keys("*") == sorted(names)
    assert keys("h?llo") == sorted(["hello", "hallo", "hxllo", "hbllo", "hcllo", "hdllo",
                                    "h*llo", "h?llo", "h[llo"])
    assert keys("h*llo") == sorted(n for n in names if n != "other")
    assert keys("h[ae]llo") == ["hallo", "hello"]
    assert keys("h[^e]llo") == sorted(["hallo", "hxllo", "hbllo", "hcllo", "hdllo",
                                       "h*llo", "h?llo", "h[llo"])
    assert keys("h[a-c]llo") == ["hallo", "hbllo", "hcllo"]
    assert keys("h[c-a]llo") == ["hallo", "hbllo", "hcllo"]
    assert keys("h\\*llo") == ["h*llo"]
    assert keys("h\\?llo") == ["h?llo"]
    assert keys("h\\[llo") == ["h[llo"]
    assert keys("hello") == ["hello"]
    assert keys("HELLO") == []
    assert keys("nomatch*") == []
    assert keys("*er") == ["other"]


def test_keys_per_db_and_arity(c):
    c("SET", "a", "1")
    c("SELECT", "1")
    assert c("KEYS", "*") == []
    assert c("KEYS") == wrong_args("keys")


# ---------------------------------------------------------------- SCAN

def full_scan(c, *opts):
    seen = []
    cursor = b"0"
    for _ in range(100000):
        rep = c("SCAN", cursor, *opts)
        assert isinstance(rep, list) and len(rep) == 2
        cursor, keys = rep
        assert isinstance(cursor, bytes)
        seen.extend(keys)
        if cursor == b"0":
            return seen
    raise AssertionError("SCAN did not terminate")


def test_scan_full_iteration_exactly_once(c):
    n = 1000
    for i in range(0, n, 100):
        args = []
        for j in range(i, i + 100):
            args += ["key:%d" % j, str(j)]
        c("MSET", *args)
    seen = full_scan(c)
    assert len(seen) == n
    assert set(seen) == {b"key:%d" % i for i in range(n)}


def test_scan_count(c):
    for i in range(0, 300, 100):
        args = []
        for j in range(i, i + 100):
            args += ["k%d" % j, "v"]
        c("MSET", *args)
    seen = full_scan(c, "COUNT", "7")
    assert sorted(seen) == sorted(b"k%d" % i for i in range(300))
    seen = full_scan(c, "COUNT", "1000")
    assert sorted(seen) == sorted(b"k%d" % i for i in range(300))


def test_scan_match(c):
    for i in range(200):
        c("SET", ("user:%d" if i % 2 else "item:%d") % i, "v")
    seen = full_scan(c, "MATCH", "user:*", "COUNT", "10")
    assert len(seen) == 100
    assert all(k.startswith(b"user:") for k in seen)
    assert len(set(seen)) == 100
    assert sorted(full_scan(c, "MATCH", "user:1?")) == \
        sorted(b"user:%d" % i for i in range(11, 20, 2))


def test_scan_type(c):
    for i in range(50):
        c("SET", "s%d" % i, "v")
    assert sorted(full_scan(c, "TYPE", "string")) == sorted(b"s%d" % i for i in range(50))
    assert full_scan(c, "TYPE", "list") == []
    assert full_scan(c, "TYPE", "nosuchtype") == []
    assert sorted(full_scan(c, "TYPE", "STRING", "MATCH", "s1*")) == \
        sorted([b"s1"] + [b"s1%d" % i for i in range(10)])


def test_scan_empty_db(c):
    assert c("SCAN", "0") == [b"0", []]


def test_scan_errors(c):
    assert c("SCAN", "abc") == Err("ERR invalid cursor")
    # Redis reads the cursor with strtoul: "" is 0 and "-1" wraps to 2^64-1.
    c("SET", "a", "1")
    assert c("SCAN", "") == [b"0", [b"a"]]
    assert c("SCAN", "-1", "COUNT", "1000")[0] == b"0"
    assert c("SCAN", " 0") == Err("ERR invalid cursor")
    assert c("SCAN", "1-") == Err("ERR invalid cursor")
    c("DEL", "a")
    assert c("SCAN", "0", "COUNT", "0") == SYNTAX
    assert c("SCAN", "0", "COUNT", "-1") == SYNTAX
    assert c("SCAN", "0", "COUNT", "x") == NOT_INT
    assert c("SCAN", "0", "MATCH") == SYNTAX
    assert c("SCAN", "0", "FOO", "bar") == SYNTAX
    assert c("SCAN") == wrong_args("scan")


def test_scan_redis_py(r):
    for i in range(100):
        r.set("k%d" % i, i)
    assert sorted(r.scan_iter(match="k1*", count=10)) == \
        sorted([b"k1"] + [b"k1%d" % i for i in range(10)])


# ---------------------------------------------------------------- RANDOMKEY

def test_randomkey(c):
    assert c("RANDOMKEY") is None
    c("SET", "only", "1")
    assert c("RANDOMKEY") == b"only"
    c("MSET", "a", "1", "b", "2")
    for _ in range(20):
        assert c("RANDOMKEY") in (b"only", b"a", b"b")
    assert c("RANDOMKEY", "x") == wrong_args("randomkey")


# ---------------------------------------------------------------- MOVE

def test_move(c):
    c("SET", "a", "1", "EX", "100")
    assert c("MOVE", "a", "1") == 1
    assert c("EXISTS", "a") == 0
    c("SELECT", "1")
    assert c("GET", "a") == b"1"
    assert 98 <= c("TTL", "a") <= 100


def test_move_target_exists(c):
    c("SET", "a", "src")
    c("SELECT", "2")
    c("SET", "a", "dst")
    c("SELECT", "0")
    assert c("MOVE", "a", "2") == 0
    assert c("GET", "a") == b"src"
    assert c("MOVE", "missing", "2") == 0


def test_move_errors(c):
    c("SET", "a", "1")
    assert c("MOVE", "a", "0") == SAME
    assert c("MOVE", "a", "16") == Err("ERR DB index is out of range")
    assert c("MOVE", "a", "-1") == Err("ERR DB index is out of range")
    assert c("MOVE", "a", "x") == NOT_INT
    assert c("MOVE", "a") == wrong_args("move")
    # A DB index is a C int: past it, Redis's range error, not "DB index is out of range".
    int_range = Err("ERR value is out of range, value must between -2147483648 and 2147483647")
    assert c("MOVE", "a", "2147483648") == int_range
    assert c("MOVE", "a", "-9223372036854775808") == int_range
    assert c("MOVE", "a", "2147483647") == Err("ERR DB index is out of range")
    assert c("COPY", "a", "b", "DB", "9223372036854775807") == int_range
    assert c("SELECT", "-2147483649") == int_range
    assert c("SWAPDB", "9223372036854775807", "0") == Err("ERR invalid first DB index")
    assert c("SWAPDB", "0", "-9223372036854775807") == Err("ERR invalid second DB index")


# ---------------------------------------------------------------- COPY

def test_copy(c):
    c("SET", "a", "1", "EX", "100")
    assert c("COPY", "a", "b") == 1
    assert c("MGET", "a", "b") == [b"1", b"1"]
    assert 98 <= c("TTL", "b") <= 100
    # the copy is independent
    c("APPEND", "b", "x")
    assert c("MGET", "a", "b") == [b"1", b"1x"]


def test_copy_existing_destination(c):
    c("MSET", "a", "1", "b", "2")
    assert c("COPY", "a", "b") == 0
    assert c("GET", "b") == b"2"
    assert c("COPY", "a", "b", "REPLACE") == 1
    assert c("GET", "b") == b"1"
    assert c("COPY", "missing", "b") == 0
    assert c("COPY", "missing", "b", "REPLACE") == 0
    assert c("GET", "b") == b"1"


def test_copy_db(c):
    c("SET", "a", "1")
    assert c("COPY", "a", "a", "DB", "3") == 1
    assert c("COPY", "a", "a", "DB", "3") == 0
    assert c("COPY", "a", "x", "DB", "3", "REPLACE") == 1
    c("SELECT", "3")
    assert sorted(c("KEYS", "*")) == [b"a", b"x"]


def test_copy_errors(c):
    c("SET", "a", "1")
    assert c("COPY", "a", "a") == SAME
    assert c("COPY", "a", "a", "DB", "0") == SAME
    assert c("COPY", "a", "b", "DB", "16") == Err("ERR DB index is out of range")
    assert c("COPY", "a", "b", "DB", "x") == NOT_INT
    assert c("COPY", "a", "b", "DB") == SYNTAX
    assert c("COPY", "a", "b", "FOO") == SYNTAX
    assert c("COPY", "a") == wrong_args("copy")
    assert c("EXISTS", "b") == 0


# ---------------------------------------------------------------- TOUCH

def test_touch(c):
    c("MSET", "a", "1", "b", "2")
    assert c("TOUCH", "a", "b", "c") == 2
    assert c("TOUCH", "a", "a") == 2
    assert c("TOUCH", "missing") == 0
    assert c("TOUCH") == wrong_args("touch")


# ---------------------------------------------------------------- OBJECT

def test_object_encoding(c):
    c("SET", "int", "123")
    c("SET", "neg", "-5")
    c("SET", "short", "hello")
    c("SET", "raw", "x" * 45)
    c("SET", "edge", "x" * 44)
    c("SET", "lead0", "0123")
    c("SET", "huge", "12345678901234567890")
    assert c("OBJECT", "ENCODING", "int") == b"int"
    assert c("OBJECT", "ENCODING", "neg") == b"int"
    assert c("OBJECT", "ENCODING", "short") == b"embstr"
    assert c("OBJECT", "ENCODING", "edge") == b"embstr"
    assert c("OBJECT", "ENCODING", "raw") == b"raw"
    assert c("OBJECT", "ENCODING", "lead0") == b"embstr"
    assert c("OBJECT", "ENCODING", "huge") == b"embstr"
    assert c("OBJECT", "ENCODING", "missing") is None


def test_object_encoding_after_incr_and_append(c):
    c("SET", "n", "abc")
    c("SET", "m", "10")
    c("INCR", "m")
    assert c("OBJECT", "ENCODING", "m") == b"int"
    c("APPEND", "n", "def")
    assert c("OBJECT", "ENCODING", "n") == b"raw"
    c("SETRANGE", "s", "0", "x")
    assert c("OBJECT", "ENCODING", "s") in (b"raw", b"embstr")


def test_object_refcount_idletime(c):
    c("SET", "k", "value")
    rc = c("OBJECT", "REFCOUNT", "k")
    assert isinstance(rc, int) and rc >= 1
    idle = c("OBJECT", "IDLETIME", "k")
    assert isinstance(idle, int) and 0 <= idle < 60
    assert c("OBJECT", "REFCOUNT", "missing") is None
    assert c("OBJECT", "IDLETIME", "missing") is None


def test_object_freq_requires_lfu(c):
    c("SET", "k", "v")
    assert c("OBJECT", "FREQ", "k") == Err(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
        "Please note that when switching between policies at runtime LRU and LFU "
        "data will take some time to adjust.")


def test_object_freq_with_lfu_policy(c):
    c("SET", "k", "v")
    assert c("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == "OK"
    try:
        freq = c("OBJECT", "FREQ", "k")
        assert isinstance(freq, int) and freq >= 0
        assert c("OBJECT", "FREQ", "missing") is None
        assert c("OBJECT", "IDLETIME", "k") == Err(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. "
            "Please note that when switching between policies at runtime LRU and "
            "LFU data will take some time to adjust.")
    finally:
        c("CONFIG", "SET", "maxmemory-policy", "noeviction")


def test_object_errors(c):
    c("SET", "k", "v")
    rep = c("OBJECT", "FOO", "k")
    assert isinstance(rep, Err)
    assert rep.message.startswith("ERR unknown subcommand 'FOO'. Try OBJECT HELP.")
    assert c("OBJECT", "ENCODING") == Err(
        "ERR wrong number of arguments for 'object|encoding' command")
    assert isinstance(c("OBJECT", "HELP"), list)


def test_unlink_of_large_values(c):
    # large values are freed in the background; the keys are gone at once
    c("SETRANGE", "big", str(4 * 1024 * 1024), "x")
    c("SADD", "ids", *[str(i) for i in range(100000)])
    c("SET", "small", "v")
    assert c("UNLINK", "big", "ids", "small", "missing") == 3
    assert c("EXISTS", "big", "ids", "small") == 0
    c("SET", "big", "again")
    assert c("GET", "big") == b"again"
