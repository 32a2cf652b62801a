"""Hash commands: HSET ... HSCAN.

Redis 7.0 and abacus both report listpack/hashtable for hashes, so every test here runs
against the real Redis too (`--target redis`).
"""

import pytest

from helpers import Err

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
NOT_FLOAT = Err("ERR value is not a valid float")
SYNTAX = Err("ERR syntax error")
I64_MAX = 9223372036854775807
I64_MIN = -9223372036854775808


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


def as_dict(flat):
    return dict(zip(flat[::2], flat[1::2]))


# ------------------------------------------------------------------ set / get

def test_hset_hget(c):
    assert c("HSET", "h", "f1", "v1", "f2", "v2") == 2
    assert c("HSET", "h", "f1", "new", "f3", "v3") == 1, "counts only new fields"
    assert c("HGET", "h", "f1") == b"new"
    assert c("HGET", "h", "nope") is None
    assert c("HGET", "nokey", "f") is None
    assert c("HLEN", "h") == 3
    assert c("TYPE", "h") == "hash"


def test_hmset_hsetnx(c):
    assert c("HMSET", "h", "a", "1", "b", "2") == "OK"
    assert c("HSETNX", "h", "a", "x") == 0
    assert c("HSETNX", "h", "c", "3") == 1
    assert c("HSETNX", "new", "f", "v") == 1
    assert as_dict(c("HGETALL", "h")) == {b"a": b"1", b"b": b"2", b"c": b"3"}
    assert c("HGET", "new", "f") == b"v"


def test_hmget(c):
    c("HSET", "h", "a", "1", "b", "2")
    assert c("HMGET", "h", "a", "x", "b", "a") == [b"1", None, b"2", b"1"]
    assert c("HMGET", "nokey", "a", "b") == [None, None]


def test_hgetall_hkeys_hvals(c, r3):
    assert c("HGETALL", "nokey") == []
    assert c("HKEYS", "nokey") == [] and c("HVALS", "nokey") == []
    pairs = {("f%d" % i).encode(): ("v%d" % i).encode() for i in range(200)}
    c("HSET", "h", *[x for kv in pairs.items() for x in kv])
    assert as_dict(c("HGETALL", "h")) == pairs
    assert sorted(c("HKEYS", "h")) == sorted(pairs)
    assert sorted(c("HVALS", "h")) == sorted(pairs.values())
    # Keys and values come in the same order.
    assert dict(zip(c("HKEYS", "h"), c("HVALS", "h"))) == pairs
    # RESP3: a map.
    assert r3.hgetall("h") == pairs
    assert isinstance(c("HELLO", "3"), dict)
    assert c("HGETALL", "h") == pairs
    assert c("HGETALL", "nokey") == {}


def test_binary_and_empty_fields(c):
    f, v = b"f\x00\r\n\xff", b"\x00" * 100
    assert c("HSET", "h", f, v, b"", b"") == 2
    assert c("HGET", "h", f) == v
    assert c("HGET", "h", b"") == b""
    assert c("HEXISTS", "h", b"") == 1
    assert c("HSTRLEN", "h", f) == 100


def test_hdel_deletes_empty_hash(c):
    assert c("HDEL", "nokey", "a") == 0
    c("HSET", "h", "a", "1", "b", "2", "c", "3")
    assert c("HDEL", "h", "a", "x", "a") == 1
    assert c("HLEN", "h") == 2
    assert c("HDEL", "h", "b", "c") == 2
    assert c("EXISTS", "h") == 0


def test_hexists_hlen_hstrlen(c):
    c("HSET", "h", "a", "hello", "n", "-12")
    assert c("HEXISTS", "h", "a") == 1
    assert c("HEXISTS", "h", "z") == 0
    assert c("HEXISTS", "nokey", "a") == 0
    assert c("HLEN", "nokey") == 0
    assert c("HSTRLEN", "h", "a") == 5
    assert c("HSTRLEN", "h", "n") == 3
    assert c("HSTRLEN", "h", "z") == 0
    assert c("HSTRLEN", "nokey", "a") == 0


def test_arity(c):
    for args, name in ((("HSET", "h"), "hset"), (("HSET", "h", "a"), "hset"),
                       (("HSET", "h", "a", "1", "b"), "hset"),
                       (("HMSET", "h", "a", "1", "b"), "hmset"),
                       (("HSETNX", "h", "a"), "hsetnx"), (("HGET", "h"), "hget"),
                       (("HMGET", "h"), "hmget"), (("HDEL", "h"), "hdel"),
                       (("HGETALL",), "hgetall"), (("HLEN", "a", "b"), "hlen"),
                       (("HINCRBY", "h", "f"), "hincrby"),
                       (("HINCRBYFLOAT", "h", "f"), "hincrbyfloat"),
                       (("HRANDFIELD",), "hrandfield"), (("HSCAN", "h"), "hscan"),
                       (("HSTRLEN", "h"), "hstrlen"), (("HEXISTS", "h"), "hexists")):
        assert c(*args) == wrong_args(name), args
    assert c("EXISTS", "h") == 0


def test_wrongtype(c):
    c("SET", "str", "x")
    c("SADD", "set", "1")
    for key in ("str", "set"):
        for cmd in (("HSET", key, "f", "v"), ("HMSET", key, "f", "v"), ("HSETNX", key, "f", "v"),
                    ("HGET", key, "f"), ("HMGET", key, "f"), ("HGETALL", key),
                    ("HDEL", key, "f"), ("HLEN", key), ("HEXISTS", key, "f"), ("HKEYS", key),
                    ("HVALS", key), ("HSTRLEN", key, "f"), ("HINCRBY", key, "f", "1"),
                    ("HINCRBYFLOAT", key, "f", "1"), ("HRANDFIELD", key),
                    ("HRANDFIELD", key, "2", "WITHVALUES"), ("HSCAN", key, "0")):
            assert c(*cmd) == WRONGTYPE, cmd
    c("HSET", "h", "f", "v")
    assert c("GET", "h") == WRONGTYPE
    assert c("SADD", "h", "x") == WRONGTYPE
    assert c("PFADD", "h", "x") == WRONGTYPE


# ------------------------------------------------------------------ counters

def test_hincrby(c):
    assert c("HINCRBY", "h", "n", "5") == 5
    assert c("HINCRBY", "h", "n", "-7") == -2
    assert c("HGET", "h", "n") == b"-2"
    assert c("HINCRBY", "h", "n", "0") == -2
    c("HSET", "h", "big", str(I64_MAX), "small", str(I64_MIN))
    overflow = Err("ERR increment or decrement would overflow")
    assert c("HINCRBY", "h", "big", "1") == overflow
    assert c("HINCRBY", "h", "small", "-1") == overflow
    assert c("HINCRBY", "h", "small", str(I64_MAX)) == -1
    assert c("HGET", "h", "big") == str(I64_MAX).encode()


def test_hincrby_errors(c):
    c("HSET", "h", "s", "abc", "sp", " 1", "lead", "01", "f", "1.5", "n", "1")
    not_integer = Err("ERR hash value is not an integer")
    for field in ("s", "sp", "lead", "f"):
        assert c("HINCRBY", "h", field, "1") == not_integer, field
    assert c("HINCRBY", "h", "n", "x") == NOT_INT
    assert c("HINCRBY", "h", "n", "1.0") == NOT_INT
    assert c("HINCRBY", "h", "n", "99999999999999999999") == NOT_INT
    assert c("HINCRBY", "nokey", "n", "x") == NOT_INT
    assert c("EXISTS", "nokey") == 0


def test_hincrbyfloat(c):
    assert c("HINCRBYFLOAT", "h", "x", "10.5") == b"10.5"
    assert c("HINCRBYFLOAT", "h", "x", "0.1") == b"10.6"
    assert c("HINCRBYFLOAT", "h", "y", "0.1") == b"0.1"
    assert c("HINCRBYFLOAT", "h", "y", "0.2") == b"0.3"
    assert c("HINCRBYFLOAT", "h", "z", "5.0e3") == b"5000"
    assert c("HINCRBYFLOAT", "h", "z", "-5000") == b"0"
    c("HSET", "h", "i", "3")
    assert c("HINCRBYFLOAT", "h", "i", "1.5") == b"4.5"
    assert c("HGET", "h", "i") == b"4.5"
    assert c("HINCRBY", "h", "i", "1") == Err("ERR hash value is not an integer")
    # Redis reads floats with strtold, which takes C99 hexadecimal floats too.
    assert c("HINCRBYFLOAT", "h", "i", "0x1p1") == b"6.5"
    c("HSET", "h", "hex", "0x10")
    assert c("HINCRBYFLOAT", "h", "hex", "0X.8") == b"16.5"
    assert c("HINCRBYFLOAT", "h", "hex", "0xg") == NOT_FLOAT


def test_hincrbyfloat_errors(c):
    c("HSET", "h", "s", "abc", "n", "1", "inf", "inf")
    assert c("HINCRBYFLOAT", "h", "s", "1") == Err("ERR hash value is not a float")
    assert c("HINCRBYFLOAT", "h", "n", "x") == NOT_FLOAT
    assert c("HINCRBYFLOAT", "h", "n", "inf") == Err("ERR value is NaN or Infinity")
    assert c("HINCRBYFLOAT", "h", "inf", "1") == Err("ERR increment would produce NaN or Infinity")
    assert c("HGET", "h", "n") == b"1"


# ------------------------------------------------------------------ HRANDFIELD

def test_hrandfield_forms(c):
    assert c("HRANDFIELD", "nokey") is None
    assert c("HRANDFIELD", "nokey", "3") == []
    assert c("HRANDFIELD", "nokey", "-3", "WITHVALUES") == []
    pairs = {("f%d" % i).encode(): ("v%d" % i).encode() for i in range(10)}
    c("HSET", "h", *[x for kv in pairs.items() for x in kv])
    assert c("HRANDFIELD", "h") in pairs
    assert c("HRANDFIELD", "h", "0") == []
    got = c("HRANDFIELD", "h", "4")
    assert len(set(got)) == 4 and set(got) <= set(pairs)
    assert sorted(c("HRANDFIELD", "h", "100")) == sorted(pairs)
    got = c("HRANDFIELD", "h", "-25")
    assert len(got) == 25 and set(got) <= set(pairs)
    flat = c("HRANDFIELD", "h", "3", "withvalues")
    assert len(flat) == 6 and all(pairs[f] == v for f, v in zip(flat[::2], flat[1::2]))
    flat = c("HRANDFIELD", "h", "-30", "WITHVALUES")
    assert len(flat) == 60 and all(pairs[f] == v for f, v in zip(flat[::2], flat[1::2]))
    # RESP3: WITHVALUES replies an array of [field, value] pairs.
    c("HELLO", "3")
    nested = c("HRANDFIELD", "h", "-5", "WITHVALUES")
    assert len(nested) == 5 and all(len(p) == 2 and pairs[p[0]] == p[1] for p in nested)
    nested = c("HRANDFIELD", "h", "20", "WITHVALUES")
    assert sorted(p[0] for p in nested) == sorted(pairs)


def test_hrandfield_errors(c):
    c("HSET", "h", "a", "1")
    assert c("HRANDFIELD", "h", "x") == NOT_INT
    assert c("HRANDFIELD", "h", "1", "foo") == SYNTAX
    assert c("HRANDFIELD", "h", "1", "WITHVALUES", "x") == SYNTAX
    assert c("HRANDFIELD", "h", str(I64_MIN)) == Err(
        "ERR value is out of range, value must between -9223372036854775807 and "
        "9223372036854775807")
    out_of_range = Err("ERR value is out of range")
    assert c("HRANDFIELD", "h", "5000000000000000000", "WITHVALUES") == out_of_range
    assert c("HRANDFIELD", "h", "-5000000000000000000", "WITHVALUES") == out_of_range
    # A missing key answers [] whatever the count.
    assert c("HRANDFIELD", "nokey", str(-2**62)) == []
    assert c("HRANDFIELD", "nokey", "-4000000000000000000", "WITHVALUES") == []


@pytest.mark.parametrize("size", [10, 1000])
def test_hrandfield_distribution(r, size):
    r.hset("h", mapping={"f%d" % i: i for i in range(size)})
    per_bucket = size // 10
    counts = [0] * 10
    for f in r.hrandfield("h", -20000):
        counts[int(f[1:]) // per_bucket] += 1
    assert all(1600 < n < 2400 for n in counts), counts
    counts = [0] * 10
    pipe = r.pipeline(transaction=False)
    for _ in range(400):
        pipe.hrandfield("h", 5)
    for got in pipe.execute():
        assert len(set(got)) == 5
        for f in got:
            counts[int(f[1:]) // per_bucket] += 1
    assert all(120 < n < 280 for n in counts), counts


# ------------------------------------------------------------------ HSCAN

def full_hscan(c, key, *opts):
    seen, cursor = [], b"0"
    for _ in range(100000):
        cursor, page = c("HSCAN", key, cursor, *opts)
        seen += list(zip(page[::2], page[1::2]))
        if cursor == b"0":
            return seen
    raise AssertionError("HSCAN did not terminate")


@pytest.mark.parametrize("size", [5, 3000])
def test_hscan_full_iteration(c, r, size):
    pairs = {("f%d" % i).encode(): ("v%d" % i).encode() for i in range(size)}
    r.hset("h", mapping=pairs)
    seen = full_hscan(c, "h", "COUNT", "77")
    assert sorted(seen) == sorted(pairs.items())
    seen = full_hscan(c, "h", "MATCH", "f1*")
    assert sorted(seen) == sorted((f, v) for f, v in pairs.items() if f.startswith(b"f1"))


def test_hscan_errors(c):
    c("HSET", "h", "a", "1")
    assert c("HSCAN", "h", "x") == Err("ERR invalid cursor")
    # Redis reads the cursor with strtoul: "" is 0 and "-1" wraps to 2^64-1.
    assert c("HSCAN", "h", "") == [b"0", [b"a", b"1"]]
    assert c("HSCAN", "h", "-1")[0] == b"0"
    assert c("HSCAN", "h", " 0") == Err("ERR invalid cursor")
    assert c("HSCAN", "h", "0", "COUNT", "0") == SYNTAX
    assert c("HSCAN", "h", "0", "COUNT", "x") == NOT_INT
    assert c("HSCAN", "h", "0", "NOVALUES") == SYNTAX
    assert c("HSCAN", "h", "0", "MATCH") == SYNTAX
    assert c("HSCAN", "nokey", "0") == [b"0", []]
    assert c("HSCAN", "h", "0", "MATCH", "*") == [b"0", [b"a", b"1"]]


# ------------------------------------------------------------------ encodings, generic

def test_encodings(c):
    assert c("CONFIG", "GET", "hash-max-listpack-entries") == [b"hash-max-listpack-entries", b"512"]
    c("HSET", "h", *["f%d" % i for i in range(1024)])
    assert c("OBJECT", "ENCODING", "h") == b"listpack"
    c("HSET", "h", "f9999", "v")
    assert c("OBJECT", "ENCODING", "h") == b"hashtable", "513 fields"
    c("HSET", "long", "f", "v")
    assert c("OBJECT", "ENCODING", "long") == b"listpack"
    c("HSET", "long", "f", "x" * 65)
    assert c("OBJECT", "ENCODING", "long") == b"hashtable", "a 65-byte value"
    c("HSET", "lf", "y" * 65, "v")
    assert c("OBJECT", "ENCODING", "lf") == b"hashtable", "a 65-byte field"
    c("HDEL", "h", *["f%d" % i for i in range(0, 1024, 2)])
    assert c("OBJECT", "ENCODING", "h") == b"hashtable", "never converts back"


def test_listpack_limits_are_configurable(c):
    assert c("CONFIG", "SET", "hash-max-listpack-entries", "2") == "OK"
    try:
        c("HSET", "h", "a", "1", "b", "2")
        assert c("OBJECT", "ENCODING", "h") == b"listpack"
        c("HSET", "h", "c", "3")
        assert c("OBJECT", "ENCODING", "h") == b"hashtable"
    finally:
        c("CONFIG", "SET", "hash-max-listpack-entries", "512")
    assert c("CONFIG", "GET", "hash-max-listpack-value") == [b"hash-max-listpack-value", b"64"]


def test_generic_commands_on_hashes(c):
    c("HSET", "h", "a", "1")
    assert c("COPY", "h", "h2") == 1
    c("HSET", "h2", "a", "changed")
    assert c("HGET", "h", "a") == b"1", "COPY is a deep copy"
    assert c("RENAME", "h2", "h3") == "OK"
    assert c("HGET", "h3", "a") == b"changed"
    assert c("EXPIRE", "h3", "100") == 1
    c("HINCRBY", "h3", "n", "1")
    assert c("TTL", "h3") > 0, "writing fields keeps the TTL"
    assert c("MOVE", "h3", "1") == 1
    assert c("EXISTS", "h3") == 0
    assert c("DEL", "h") == 1


def test_watch_sees_hash_writes(r):
    r.hset("h", "a", 1)
    with r.pipeline() as pipe:
        pipe.watch("h")
        r.hincrby("h", "a", 1)
        pipe.multi()
        pipe.hget("h", "a")
        with pytest.raises(Exception):
            pipe.execute()
