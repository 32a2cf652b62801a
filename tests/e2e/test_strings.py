"""String commands."""

import time

import pytest

from helpers import Err, wait_until

NOT_INT = Err("ERR value is not an integer or out of range")
NOT_FLOAT = Err("ERR value is not a valid float")
OVERFLOW = Err("ERR increment or decrement would overflow")
WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
SYNTAX = Err("ERR syntax error")
I64_MAX = 9223372036854775807
I64_MIN = -9223372036854775808


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


def invalid_expire(cmd):
    return Err("ERR invalid expire time in '%s' command" % cmd)


# ---------------------------------------------------------------- GET / SET

def test_get_set_basic(c):
    assert c("GET", "k") is None
    assert c("SET", "k", "v") == "OK"
    assert c("GET", "k") == b"v"
    assert c("SET", "k", "v2") == "OK"
    assert c("GET", "k") == b"v2"


def test_set_binary_safe(c):
    key = b"k\x00\r\n\xff"
    val = bytes(range(256)) * 4
    assert c("SET", key, val) == "OK"
    assert c("GET", key) == val
    assert c("SET", "", "") == "OK"
    assert c("GET", "") == b""
    assert c("EXISTS", "") == 1


def test_set_large_value(c):
    val = b"x" * (1 << 20)
    assert c("SET", "big", val) == "OK"
    assert c("GET", "big") == val
    assert c("STRLEN", "big") == 1 << 20


def test_get_set_arity(c):
    assert c("GET") == wrong_args("get")
    assert c("GET", "a", "b") == wrong_args("get")
    assert c("SET") == wrong_args("set")
    assert c("SET", "k") == wrong_args("set")


def test_set_ex_px(c):
    assert c("SET", "k", "v", "EX", "100") == "OK"
    assert 98 <= c("TTL", "k") <= 100
    assert c("SET", "k", "v", "PX", "100000") == "OK"
    assert 98000 <= c("PTTL", "k") <= 100000
    assert c("SET", "k", "v", "ex", "50") == "OK"
    assert 48 <= c("TTL", "k") <= 50


def test_set_px_expires(c):
    assert c("SET", "k", "v", "PX", "100") == "OK"
    assert wait_until(lambda: c("GET", "k") is None, timeout=5)
    assert c("EXISTS", "k") == 0


def test_set_exat_pxat(c):
    now = int(time.time())
    assert c("SET", "k", "v", "EXAT", now + 100) == "OK"
    assert 98 <= c("TTL", "k") <= 100
    assert c("EXPIRETIME", "k") == now + 100
    assert c("SET", "k", "v", "PXAT", (now + 200) * 1000) == "OK"
    assert c("PEXPIRETIME", "k") == (now + 200) * 1000


def test_set_exat_in_the_past_deletes(c):
    assert c("SET", "k", "v", "EXAT", "1") == "OK"
    assert c("GET", "k") is None
    assert c("EXISTS", "k") == 0
    assert c("SET", "k", "v", "PXAT", "1000") == "OK"
    assert c("EXISTS", "k") == 0


def test_set_invalid_expire(c):
    assert c("SET", "k", "v", "EX", "0") == invalid_expire("set")
    assert c("SET", "k", "v", "EX", "-1") == invalid_expire("set")
    assert c("SET", "k", "v", "PX", "0") == invalid_expire("set")
    assert c("SET", "k", "v", "EXAT", "0") == invalid_expire("set")
    assert c("SET", "k", "v", "PXAT", "-5") == invalid_expire("set")
    assert c("SET", "k", "v", "EX", "abc") == NOT_INT
    assert c("SET", "k", "v", "EX", "1.5") == NOT_INT
    # seconds that overflow when converted to milliseconds
    assert c("SET", "k", "v", "EX", "9223372036854775807") == invalid_expire("set")
    assert c("EXISTS", "k") == 0


def test_set_syntax_errors(c):
    assert c("SET", "k", "v", "NX", "XX") == SYNTAX
    assert c("SET", "k", "v", "EX", "10", "PX", "100") == SYNTAX
    assert c("SET", "k", "v", "EX", "10", "KEEPTTL") == SYNTAX
    assert c("SET", "k", "v", "KEEPTTL", "PXAT", "100000") == SYNTAX
    assert c("SET", "k", "v", "EXAT", "100", "PXAT", "100") == SYNTAX
    assert c("SET", "k", "v", "EX") == SYNTAX
    assert c("SET", "k", "v", "PERSIST") == SYNTAX
    assert c("SET", "k", "v", "FOO") == SYNTAX
    assert c("SET", "k", "v", "10") == SYNTAX
    # The whole syntax is checked before the time, as Redis does.
    assert c("SET", "k", "v", "EX", "0", "FOO") == SYNTAX
    assert c("SET", "k", "v", "PXAT", "abc", "NX", "XX") == SYNTAX
    assert c("SET", "k", "v", "EX", "-1", "PX", "10") == SYNTAX
    assert c("EXISTS", "k") == 0


def test_set_repeated_same_option_allowed(c):
    # Redis only rejects *conflicting* options; a repeated one is accepted and
    # the last value wins
    assert c("SET", "k", "v", "EX", "10", "EX", "200") == "OK"
    assert 198 <= c("TTL", "k") <= 200
    assert c("SET", "k", "v", "NX", "NX") is None
    assert c("SET", "k", "v2", "XX", "XX") == "OK"
    assert c("SET", "k", "v3", "GET", "GET") == b"v2"


def test_set_nx_xx(c):
    assert c("SET", "k", "v", "XX") is None
    assert c("EXISTS", "k") == 0
    assert c("SET", "k", "v1", "NX") == "OK"
    assert c("SET", "k", "v2", "NX") is None
    assert c("GET", "k") == b"v1"
    assert c("SET", "k", "v3", "XX") == "OK"
    assert c("GET", "k") == b"v3"
    assert c("SET", "k", "v4", "nx", "ex", "10") is None


def test_set_clears_ttl(c):
    c("SET", "k", "v", "EX", "100")
    assert c("SET", "k", "v2") == "OK"
    assert c("TTL", "k") == -1


def test_set_keepttl(c):
    c("SET", "k", "v", "EX", "100")
    assert c("SET", "k", "v2", "KEEPTTL") == "OK"
    assert c("GET", "k") == b"v2"
    assert 98 <= c("TTL", "k") <= 100
    assert c("SET", "new", "v", "KEEPTTL") == "OK"
    assert c("TTL", "new") == -1


def test_set_get(c):
    assert c("SET", "k", "v1", "GET") is None
    assert c("GET", "k") == b"v1"
    assert c("SET", "k", "v2", "GET") == b"v1"
    assert c("GET", "k") == b"v2"
    assert c("SET", "k", "v3", "GET", "EX", "100") == b"v2"
    assert 98 <= c("TTL", "k") <= 100


def test_set_get_xx(c):
    assert c("SET", "k", "v", "XX", "GET") is None
    assert c("EXISTS", "k") == 0
    c("SET", "k", "old")
    assert c("SET", "k", "new", "XX", "GET") == b"old"
    assert c("GET", "k") == b"new"


def test_set_get_nx_allowed_in_redis7(c):
    # Redis >= 7.0 accepts NX together with GET
    assert c("SET", "k", "v1", "NX", "GET") is None
    assert c("GET", "k") == b"v1"
    assert c("SET", "k", "v2", "NX", "GET") == b"v1"
    assert c("GET", "k") == b"v1"


def test_set_redis_py(r):
    assert r.set("k", "v") is True
    assert r.set("k", "v", nx=True) is None
    assert r.set("k", "v2", xx=True, get=True) == b"v"
    assert r.get("k") == b"v2"
    assert r.set("t", "v", px=1000000) is True
    assert r.pttl("t") > 0


# ---------------------------------------------------------------- SETNX / SETEX / PSETEX

def test_setnx(c):
    assert c("SETNX", "k", "v1") == 1
    assert c("SETNX", "k", "v2") == 0
    assert c("GET", "k") == b"v1"
    assert c("SETNX", "k") == wrong_args("setnx")


def test_setex(c):
    assert c("SETEX", "k", "100", "v") == "OK"
    assert c("GET", "k") == b"v"
    assert 98 <= c("TTL", "k") <= 100
    assert c("SETEX", "k", "0", "v") == invalid_expire("setex")
    assert c("SETEX", "k", "-10", "v") == invalid_expire("setex")
    assert c("SETEX", "k", "abc", "v") == NOT_INT
    assert c("SETEX", "k", "10") == wrong_args("setex")
    assert c("GET", "k") == b"v"


def test_psetex(c):
    assert c("PSETEX", "k", "100000", "v") == "OK"
    assert 98000 <= c("PTTL", "k") <= 100000
    assert c("PSETEX", "k", "0", "v") == invalid_expire("psetex")
    assert c("PSETEX", "k", "abc", "v") == NOT_INT


def test_psetex_expires(c):
    assert c("PSETEX", "k", "50", "v") == "OK"
    assert wait_until(lambda: c("EXISTS", "k") == 0, timeout=5)


# ---------------------------------------------------------------- GETSET / GETDEL / GETEX

def test_getset(c):
    assert c("GETSET", "k", "v1") is None
    assert c("GETSET", "k", "v2") == b"v1"
    assert c("GET", "k") == b"v2"
    c("EXPIRE", "k", "100")
    c("GETSET", "k", "v3")
    assert c("TTL", "k") == -1
    assert c("GETSET", "k") == wrong_args("getset")


def test_getdel(c):
    c("SET", "k", "v")
    assert c("GETDEL", "k") == b"v"
    assert c("EXISTS", "k") == 0
    assert c("GETDEL", "k") is None
    assert c("GETDEL") == wrong_args("getdel")


def test_getex(c):
    assert c("GETEX", "missing") is None
    assert c("GETEX", "missing", "EX", "10") is None
    assert c("EXISTS", "missing") == 0
    c("SET", "k", "v")
    assert c("GETEX", "k") == b"v"
    assert c("TTL", "k") == -1
    assert c("GETEX", "k", "EX", "100") == b"v"
    assert 98 <= c("TTL", "k") <= 100
    assert c("GETEX", "k", "PX", "200000") == b"v"
    assert 198000 <= c("PTTL", "k") <= 200000
    now = int(time.time())
    assert c("GETEX", "k", "EXAT", now + 300) == b"v"
    assert c("EXPIRETIME", "k") == now + 300
    assert c("GETEX", "k", "PXAT", (now + 400) * 1000) == b"v"
    assert c("PEXPIRETIME", "k") == (now + 400) * 1000
    assert c("GETEX", "k", "PERSIST") == b"v"
    assert c("TTL", "k") == -1


def test_getex_errors(c):
    c("SET", "k", "v")
    assert c("GETEX", "k", "EX", "0") == invalid_expire("getex")
    assert c("GETEX", "k", "PX", "-1") == invalid_expire("getex")
    assert c("GETEX", "k", "EX", "abc") == NOT_INT
    assert c("GETEX", "k", "EX", "10", "PX", "100") == SYNTAX
    assert c("GETEX", "k", "EX", "10", "PERSIST") == SYNTAX
    assert c("GETEX", "k", "PERSIST", "EX", "10") == SYNTAX
    assert c("GETEX", "k", "FOO") == SYNTAX
    assert c("GETEX", "k", "EX") == SYNTAX
    assert c("GETEX", "k", "KEEPTTL") == SYNTAX
    assert c("TTL", "k") == -1
    # The same option twice is allowed (the last wins), as in Redis.
    assert c("GETEX", "k", "PERSIST", "PERSIST") == b"v"
    assert c("GETEX", "k", "EX", "10", "EX", "100") == b"v"
    assert 98 <= c("TTL", "k") <= 100
    # On a missing key the time is not looked at: nil, not an error.
    for bad in ("0", "-1", "abc", "9223372036854775807", "9223372036854775808"):
        for opt in ("EX", "PX", "EXAT", "PXAT"):
            assert c("GETEX", "missing", opt, bad) is None


def test_getex_past_deletes(c):
    c("SET", "k", "v")
    assert c("GETEX", "k", "EXAT", "1") == b"v"
    assert c("EXISTS", "k") == 0


# ---------------------------------------------------------------- MGET / MSET / MSETNX

def test_mget(c):
    c("SET", "a", "1")
    c("SET", "c", "3")
    assert c("MGET", "a", "b", "c", "a") == [b"1", None, b"3", b"1"]
    assert c("MGET") == wrong_args("mget")


def test_mset(c):
    assert c("MSET", "a", "1", "b", "2", "a", "3") == "OK"
    assert c("MGET", "a", "b") == [b"3", b"2"]
    assert c("MSET", "a") == wrong_args("mset")
    assert c("MSET", "a", "1", "b") == wrong_args("mset")
    assert c("MSET") == wrong_args("mset")


def test_mset_clears_ttl(c):
    c("SET", "a", "1", "EX", "100")
    c("MSET", "a", "2")
    assert c("TTL", "a") == -1


def test_msetnx(c):
    assert c("MSETNX", "a", "1", "b", "2") == 1
    assert c("MSETNX", "b", "x", "c", "3") == 0
    assert c("MGET", "a", "b", "c") == [b"1", b"2", None]
    assert c("MSETNX", "a", "1", "b") == wrong_args("msetnx")


def test_mset_redis_py(r):
    assert r.mset({"x": 1, "y": 2}) is True
    assert r.mget(["x", "y", "z"]) == [b"1", b"2", None]
    assert r.msetnx({"y": 5, "w": 6}) is False


# ---------------------------------------------------------------- APPEND / STRLEN

def test_append(c):
    assert c("APPEND", "k", "Hello") == 5
    assert c("APPEND", "k", " World") == 11
    assert c("GET", "k") == b"Hello World"
    assert c("APPEND", "k", "") == 11
    assert c("APPEND", "empty", "") == 0
    assert c("EXISTS", "empty") == 1


def test_append_to_integer_and_keeps_ttl(c):
    c("SET", "n", "12", "EX", "100")
    assert c("APPEND", "n", "34") == 4
    assert c("GET", "n") == b"1234"
    assert c("INCR", "n") == 1235
    assert 0 < c("TTL", "n") <= 100


def test_append_across_the_inline_and_heap_boundaries(c):
    # Values are stored inline up to 16 bytes and in size-class buffers beyond, grown in
    # place while they fit: every length from 0 to 300 must read back whole.
    want = b""
    for i in range(300):
        piece = bytes([97 + i % 26])
        want += piece
        assert c("APPEND", "grow", piece) == len(want)
        if i % 7 == 0 or i < 40:
            assert c("GET", "grow") == want
            assert c("STRLEN", "grow") == len(want)
    assert c("GETRANGE", "grow", "10", "30") == want[10:31]


def test_append_creates_the_key_as_set_would(c):
    # Redis's APPEND of a missing key stores the argument as SET does ("int", "embstr");
    # appending to an existing string makes it "raw".
    assert c("APPEND", "num", "123") == 3
    assert c("OBJECT", "ENCODING", "num") == b"int"
    assert c("APPEND", "word", "hello") == 5
    assert c("OBJECT", "ENCODING", "word") == b"embstr"
    assert c("APPEND", "word", "!") == 6
    assert c("OBJECT", "ENCODING", "word") == b"raw"
    assert c("GET", "word") == b"hello!"


def test_incr_after_append_is_a_new_object(c):
    # INCR and INCRBYFLOAT store a new object in Redis: a string made "raw" by APPEND is
    # encoded afresh.
    c("SET", "n", "1")
    c("APPEND", "n", "2")
    assert c("OBJECT", "ENCODING", "n") == b"raw"
    assert c("INCR", "n") == 13
    assert c("OBJECT", "ENCODING", "n") == b"int"
    c("SET", "f", "1.5")
    c("APPEND", "f", "0")
    assert c("OBJECT", "ENCODING", "f") == b"raw"
    assert c("INCRBYFLOAT", "f", "1") == b"2.5"
    assert c("OBJECT", "ENCODING", "f") == b"embstr"


def test_append_wrongtype_changes_nothing(c):
    c("SADD", "s", "a")
    assert c("APPEND", "s", "x") == WRONGTYPE
    assert c("SMEMBERS", "s") == [b"a"]


def test_strlen(c):
    assert c("STRLEN", "missing") == 0
    c("SET", "k", "hello")
    assert c("STRLEN", "k") == 5
    c("SET", "n", "12345")
    assert c("STRLEN", "n") == 5
    c("SET", "u", "\u00e9")
    assert c("STRLEN", "u") == 2
    assert c("STRLEN") == wrong_args("strlen")


# ---------------------------------------------------------------- GETRANGE / SUBSTR / SETRANGE

@pytest.mark.parametrize("cmd", ["GETRANGE", "SUBSTR"])
def test_getrange(c, cmd):
    c("SET", "k", "This is a string")
    assert c(cmd, "k", "0", "3") == b"This"
    assert c(cmd, "k", "-3", "-1") == b"ing"
    assert c(cmd, "k", "0", "-1") == b"This is a string"
    assert c(cmd, "k", "10", "100") == b"string"
    assert c(cmd, "k", "5", "3") == b""
    assert c(cmd, "k", "-100", "3") == b"This"
    assert c(cmd, "k", "-1", "-5") == b""
    assert c(cmd, "k", "100", "200") == b""
    assert c(cmd, "missing", "0", "-1") == b""
    assert c(cmd, "k", "a", "1") == NOT_INT
    assert c(cmd, "k", "0") == wrong_args(cmd.lower())


def test_getrange_integer_encoded(c):
    c("SET", "n", "1234567")
    assert c("GETRANGE", "n", "1", "3") == b"234"


def test_setrange(c):
    c("SET", "k", "Hello World")
    assert c("SETRANGE", "k", "6", "Redis") == 11
    assert c("GET", "k") == b"Hello Redis"
    assert c("SETRANGE", "k", "11", "!!") == 13
    assert c("GET", "k") == b"Hello Redis!!"


def test_setrange_pads_with_zero_bytes(c):
    assert c("SETRANGE", "k", "5", "abc") == 8
    assert c("GET", "k") == b"\x00\x00\x00\x00\x00abc"


def test_setrange_empty_value(c):
    assert c("SETRANGE", "missing", "10", "") == 0
    assert c("EXISTS", "missing") == 0
    c("SET", "k", "abc")
    assert c("SETRANGE", "k", "100", "") == 3
    assert c("GET", "k") == b"abc"


def test_setrange_errors(c):
    assert c("SETRANGE", "k", "-1", "x") == Err("ERR offset is out of range")
    assert c("SETRANGE", "k", "abc", "x") == NOT_INT
    too_big = Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    assert c("SETRANGE", "k", "536870912", "x") == too_big
    assert c("SETRANGE", "k", str(512 * 1024 * 1024 - 1), "xx") == too_big
    c("SET", "e", "v")
    assert c("SETRANGE", "e", "536870912", "x") == too_big
    assert c("GET", "e") == b"v"
    assert c("EXISTS", "k") == 0


def test_setrange_on_integer(c):
    c("SET", "n", "1234")
    assert c("SETRANGE", "n", "1", "9") == 4
    assert c("GET", "n") == b"1934"
    assert c("INCR", "n") == 1935


# ---------------------------------------------------------------- INCR family

def test_incr_decr(c):
    assert c("INCR", "n") == 1
    assert c("INCR", "n") == 2
    assert c("DECR", "n") == 1
    assert c("DECR", "m") == -1
    assert c("INCRBY", "n", "10") == 11
    assert c("INCRBY", "n", "-20") == -9
    assert c("DECRBY", "n", "1") == -10
    assert c("DECRBY", "n", "-100") == 90
    assert c("GET", "n") == b"90"
    assert c("TYPE", "n") == "string"


def test_incr_preserves_ttl(c):
    c("SET", "n", "5", "EX", "100")
    assert c("INCR", "n") == 6
    assert 98 <= c("TTL", "n") <= 100


@pytest.mark.parametrize("value", ["abc", "1.5", " 1", "1 ", "", "0x10", "1e3",
                                    "007", "+1", "9223372036854775808", "--1"])
def test_incr_not_integer(c, value):
    c("SET", "n", value)
    assert c("INCR", "n") == NOT_INT
    assert c("DECR", "n") == NOT_INT
    assert c("INCRBY", "n", "1") == NOT_INT
    assert c("GET", "n") == value.encode()


@pytest.mark.parametrize("incr", ["abc", "1.0", "", "9223372036854775808", " 5"])
def test_incrby_bad_increment(c, incr):
    assert c("INCRBY", "n", incr) == NOT_INT
    assert c("DECRBY", "n", incr) == NOT_INT
    assert c("EXISTS", "n") == 0


def test_incr_overflow(c):
    c("SET", "n", str(I64_MAX))
    assert c("INCR", "n") == OVERFLOW
    assert c("INCRBY", "n", "1") == OVERFLOW
    assert c("GET", "n") == str(I64_MAX).encode()
    assert c("DECRBY", "n", str(I64_MAX)) == 0
    c("SET", "m", str(I64_MIN))
    assert c("DECR", "m") == OVERFLOW
    assert c("INCRBY", "m", "-1") == OVERFLOW
    assert c("INCRBY", "m", str(I64_MAX)) == -1
    c("SET", "p", "1")
    assert c("INCRBY", "p", str(I64_MAX)) == OVERFLOW
    assert c("DECRBY", "p", str(I64_MAX)) == I64_MIN + 2


def test_decrby_min_value(c):
    # -(INT64_MIN) cannot be represented: refused before any arithmetic
    assert c("DECRBY", "n", str(I64_MIN)) == Err("ERR decrement would overflow")
    assert c("EXISTS", "n") == 0
    assert c("INCRBY", "n", str(I64_MIN)) == I64_MIN


def test_incr_boundaries(c):
    c("SET", "n", str(I64_MAX - 1))
    assert c("INCR", "n") == I64_MAX
    c("SET", "m", "-0")
    assert c("INCR", "m") == NOT_INT


def test_incr_arity(c):
    assert c("INCR") == wrong_args("incr")
    assert c("INCRBY", "n") == wrong_args("incrby")
    assert c("DECRBY", "n") == wrong_args("decrby")


# ---------------------------------------------------------------- INCRBYFLOAT

def test_incrbyfloat(c):
    c("SET", "f", "10.50")
    assert c("INCRBYFLOAT", "f", "0.1") == b"10.6"
    assert c("INCRBYFLOAT", "f", "-5") == b"5.6"
    c("SET", "g", "5.0e3")
    assert c("INCRBYFLOAT", "g", "2.0e2") == b"5200"
    assert c("GET", "g") == b"5200"
    assert c("INCRBYFLOAT", "new", "3") == b"3"
    assert c("INCRBYFLOAT", "new", "-3") == b"0"
    assert c("INCRBYFLOAT", "new", "1.5") == b"1.5"
    # Redis reads floats with strtold, which takes C99 hexadecimal floats too.
    assert c("INCRBYFLOAT", "new", "0x10") == b"17.5"
    assert c("INCRBYFLOAT", "new", "-0x1.8p3") == b"5.5"
    c("SET", "hex", "0x10")
    assert c("INCRBYFLOAT", "hex", "1") == b"17"
    assert c("INCRBYFLOAT", "hex", "0x") == NOT_FLOAT
    assert c("INCRBYFLOAT", "hex", "0x1p") == NOT_FLOAT


def test_incrbyfloat_formatting(c):
    assert c("INCRBYFLOAT", "f", "0.1") == b"0.1"
    assert c("INCRBYFLOAT", "f", "0.2") == b"0.3"
    c("SET", "i", "1")
    assert c("INCRBYFLOAT", "i", "1") == b"2"
    assert c("INCRBYFLOAT", "i", "-0.5") == b"1.5"
    assert c("INCRBYFLOAT", "i", "1e10") == b"10000000001.5"


def test_incrbyfloat_is_long_double_arithmetic(c):
    # Redis adds in x86-64 `long double` (64-bit significand) and prints "%.17Lf": the last
    # decimals show its rounding, and values beyond double's range are fine.
    c("SET", "f", "999.999")
    assert c("INCRBYFLOAT", "f", "0.1") == b"1000.09899999999999998"
    c("SET", "f", "18446744073709551616")
    assert c("INCRBYFLOAT", "f", "-1e-3") == b"18446744073709551616"
    assert c("INCRBYFLOAT", "big", "1e308") == (
        b"99999999999999999996685879655845645660560099847415567207797047994921734868838061"
        b"87210012692188853932044674722505401322315213474959396058359742081443019641876795"
        b"91000196031907786631096045071066679391533957889389145605435630612683649016186302"
        b"17086589253444881623791300855757318142424510452728255046343928578048")
    assert len(c("INCRBYFLOAT", "huge", "1e400")) == 401
    c("HSET", "h", "x", "999.999")
    assert c("HINCRBYFLOAT", "h", "x", "0.1") == b"1000.09899999999999998"
    assert c("INCRBYFLOAT", "under", "1e-5000") == NOT_FLOAT


def test_incrbyfloat_errors(c):
    c("SET", "s", "abc")
    assert c("INCRBYFLOAT", "s", "1") == NOT_FLOAT
    assert c("INCRBYFLOAT", "f", "abc") == NOT_FLOAT
    assert c("INCRBYFLOAT", "f", "") == NOT_FLOAT
    assert c("INCRBYFLOAT", "f", "1.5x") == NOT_FLOAT
    assert c("INCRBYFLOAT", "f", "inf") == Err(
        "ERR increment would produce NaN or Infinity")
    assert c("INCRBYFLOAT", "f", "nan") == NOT_FLOAT
    # The key's type is checked before the increment.
    c("SADD", "set", "a")
    assert c("INCRBYFLOAT", "set", "abc") == WRONGTYPE
    assert c("EXISTS", "f") == 0
    assert c("INCRBYFLOAT", "f") == wrong_args("incrbyfloat")


def test_incrbyfloat_keeps_ttl(c):
    c("SET", "f", "1", "EX", "100")
    c("INCRBYFLOAT", "f", "1.5")
    assert 98 <= c("TTL", "f") <= 100


def test_incrbyfloat_redis_py(r):
    assert r.incrbyfloat("f", 2.5) == 2.5


# ---------------------------------------------------------------- LCS

def test_lcs_basic(c):
    c("MSET", "key1", "ohmytext", "key2", "mynewtext")
    assert c("LCS", "key1", "key2") == b"mytext"
    assert c("LCS", "key1", "key2", "LEN") == 6
    assert c("LCS", "key1", "missing") == b""
    assert c("LCS", "missing", "missing2", "LEN") == 0


def test_lcs_idx(c):
    c("MSET", "key1", "ohmytext", "key2", "mynewtext")
    assert c("LCS", "key1", "key2", "IDX") == [
        b"matches", [[[4, 7], [5, 8]], [[2, 3], [0, 1]]],
        b"len", 6]
    assert c("LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4") == [
        b"matches", [[[4, 7], [5, 8]]],
        b"len", 6]
    assert c("LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4]],
        b"len", 6]
    assert c("LCS", "key1", "key2", "IDX", "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4], [[2, 3], [0, 1], 2]],
        b"len", 6]


def test_lcs_idx_resp3(c):
    c("HELLO", "3")
    c("MSET", "key1", "ohmytext", "key2", "mynewtext")
    assert c("LCS", "key1", "key2", "IDX") == {
        b"matches": [[[4, 7], [5, 8]], [[2, 3], [0, 1]]],
        b"len": 6}


def test_lcs_errors(c):
    c("MSET", "a", "abc", "b", "abd")
    assert c("LCS", "a", "b", "LEN", "IDX") == Err(
        "ERR If you want both the length and indexes, please just use IDX.")
    assert c("LCS", "a", "b", "MINMATCHLEN", "x") == NOT_INT
    assert c("LCS", "a", "b", "MINMATCHLEN") == SYNTAX
    assert c("LCS", "a", "b", "FOO") == SYNTAX
    assert c("LCS", "a") == wrong_args("lcs")
    # The keys' types are checked before the options.
    c("SADD", "s", "x")
    not_strings = Err("ERR The specified keys must contain string values")
    assert c("LCS", "a", "s", "FOO") == not_strings
    assert c("LCS", "s", "b", "LEN", "IDX") == not_strings
    assert c("LCS", "s", "b", "MINMATCHLEN", "x") == not_strings


# ---------------------------------------------------------------- SETBIT / GETBIT

def test_setbit_getbit(c):
    assert c("SETBIT", "b", "7", "1") == 0
    assert c("GET", "b") == b"\x01"
    assert c("GETBIT", "b", "7") == 1
    assert c("GETBIT", "b", "0") == 0
    assert c("GETBIT", "b", "100") == 0
    assert c("SETBIT", "b", "7", "0") == 1
    assert c("GET", "b") == b"\x00"
    assert c("SETBIT", "b", "0", "1") == 0
    assert c("GET", "b") == b"\x80"
    assert c("SETBIT", "b", "23", "1") == 0
    assert c("GET", "b") == b"\x80\x00\x01"
    assert c("GETBIT", "missing", "5") == 0


def test_setbit_errors(c):
    bad_off = Err("ERR bit offset is not an integer or out of range")
    bad_bit = Err("ERR bit is not an integer or out of range")
    assert c("SETBIT", "b", "-1", "1") == bad_off
    assert c("SETBIT", "b", "4294967296", "1") == bad_off
    assert c("SETBIT", "b", "abc", "1") == bad_off
    assert c("SETBIT", "b", "0", "2") == bad_bit
    assert c("SETBIT", "b", "0", "-1") == bad_bit
    assert c("SETBIT", "b", "0", "x") == bad_bit
    assert c("GETBIT", "b", "-1") == bad_off
    assert c("GETBIT", "b", "4294967296") == bad_off
    assert c("EXISTS", "b") == 0


def test_setbit_on_integer_string(c):
    c("SET", "n", "1")  # 0x31
    assert c("GETBIT", "n", "2") == 1
    assert c("GETBIT", "n", "7") == 1
    assert c("SETBIT", "n", "6", "1") == 0
    assert c("GET", "n") == b"3"


# ---------------------------------------------------------------- BITCOUNT

def test_bitcount(c):
    c("SET", "k", "foobar")
    assert c("BITCOUNT", "k") == 26
    assert c("BITCOUNT", "k", "0", "0") == 4
    assert c("BITCOUNT", "k", "1", "1") == 6
    assert c("BITCOUNT", "k", "1", "1", "BYTE") == 6
    assert c("BITCOUNT", "k", "5", "30", "BIT") == 17
    assert c("BITCOUNT", "k", "-2", "-1") == 7
    assert c("BITCOUNT", "k", "0", "-1") == 26
    assert c("BITCOUNT", "k", "3", "1") == 0
    assert c("BITCOUNT", "k", "0", "1000") == 26
    assert c("BITCOUNT", "k", "-1000", "1000") == 26
    assert c("BITCOUNT", "missing") == 0
    assert c("BITCOUNT", "missing", "0", "-1") == 0


def test_bitcount_errors(c):
    c("SET", "k", "foobar")
    assert c("BITCOUNT", "k", "0") == SYNTAX
    assert c("BITCOUNT", "k", "0", "1", "WORD") == SYNTAX
    assert c("BITCOUNT", "k", "0", "1", "BIT", "x") == SYNTAX
    assert c("BITCOUNT", "k", "a", "1") == NOT_INT
    assert c("BITCOUNT") == wrong_args("bitcount")
    # Redis 7.0 answers an empty range of two negative indexes before it reads the unit.
    assert c("BITCOUNT", "k", "-1", "-5", "WORD") == 0
    assert c("BITCOUNT", "k", "-5", "-1", "WORD") == SYNTAX


def test_bitcount_bitpos_look_the_key_up_before_the_range(c):
    # Redis 7.0 answers a missing key (0, or BITPOS's -1/0) and a wrong type before it reads
    # the range arguments (7.2 parses them first).
    c("SADD", "s", "a")
    assert c("BITCOUNT", "missing", "a", "b") == 0
    assert c("BITCOUNT", "missing", "1") == 0
    assert c("BITCOUNT", "missing", "0", "1", "bad") == 0
    assert c("BITCOUNT", "s", "a", "b") == WRONGTYPE
    assert c("BITPOS", "missing", "1", "a") == -1
    assert c("BITPOS", "missing", "0", "0", "1", "bad") == 0
    assert c("BITPOS", "missing", "1", "0", "1", "BIT", "x") == -1
    assert c("BITPOS", "s", "1", "a") == WRONGTYPE
    # The bit argument is still checked first.
    assert c("BITPOS", "missing", "2") == Err("ERR The bit argument must be 1 or 0.")


# ---------------------------------------------------------------- BITPOS

def test_bitpos(c):
    c("SET", "k", b"\xff\xf0\x00")
    assert c("BITPOS", "k", "0") == 12
    c("SET", "k", b"\x00\xff\xf0")
    assert c("BITPOS", "k", "1", "0") == 8
    assert c("BITPOS", "k", "1", "2") == 16
    assert c("BITPOS", "k", "1", "2", "-1", "BYTE") == 16
    assert c("BITPOS", "k", "1", "7", "15", "BIT") == 8
    assert c("BITPOS", "k", "1", "7", "-3", "BIT") == 8
    c("SET", "z", b"\x00\x00\x00")
    assert c("BITPOS", "z", "1") == -1
    assert c("BITPOS", "z", "0") == 0
    # Two negative indexes past the start both clamp to 0 (BITPOS, unlike BITCOUNT, has no
    # empty-range shortcut for start > end).
    c("SET", "k", b"\x20\x00\x00")
    assert c("BITPOS", "k", "1", "-8", "-10") == 2
    assert c("BITPOS", "k", "1", "-8", "-10", "BIT") == -1


def test_bitpos_clear_bit_past_end(c):
    c("SET", "k", b"\xff\xff\xff")
    # looking for 0 without an explicit end: the string is padded with zeros
    assert c("BITPOS", "k", "0") == 24
    assert c("BITPOS", "k", "0", "1") == 24
    # with an explicit end the range is not padded
    assert c("BITPOS", "k", "0", "0", "-1") == -1
    assert c("BITPOS", "k", "0", "0", "-1", "BIT") == -1


def test_bitpos_missing_key(c):
    assert c("BITPOS", "missing", "0") == 0
    assert c("BITPOS", "missing", "1") == -1


def test_bitpos_errors(c):
    c("SET", "k", "a")
    assert c("BITPOS", "k", "2") == Err("ERR The bit argument must be 1 or 0.")
    assert c("BITPOS", "k", "x") == NOT_INT
    assert c("BITPOS", "k", "1", "0", "1", "FOO") == SYNTAX
    assert c("BITPOS", "k", "1", "x") == NOT_INT
    # The unit is read before end.
    assert c("BITPOS", "k", "1", "0", "x", "FOO") == SYNTAX
    assert c("BITPOS", "k") == wrong_args("bitpos")


# ------------------------------------------- values across the inline/heap boundary

def test_string_commands_agree_with_a_model_across_value_sizes(c):
    """Abacus keeps strings of up to 17 bytes inside the entry and longer ones on the heap,
    growing by size classes; every string command must see the same bytes whichever form a
    value is in and however often it moved. A byte-at-a-time APPEND walks the value across
    the boundary and through many heap growths, and the other commands edit it at the
    boundary and beyond, each checked against a Python model."""
    import random
    rng = random.Random(23)
    model = bytearray()
    for i in range(300):
        b = bytes([rng.randrange(256)])
        assert c("APPEND", "s", b) == len(model) + 1
        model += b
        assert c("STRLEN", "s") == len(model)
        if i % 7 == 0 or 20 <= len(model) <= 26:
            assert c("GET", "s") == bytes(model)
            lo = rng.randrange(len(model))
            hi = rng.randrange(lo, len(model))
            assert c("GETRANGE", "s", lo, hi) == bytes(model[lo:hi + 1])
    # SETRANGE and SETBIT growing a short value past the inline size, and editing in place.
    for start_len, offset in [(0, 22), (5, 23), (23, 0), (23, 23), (10, 40), (24, 3)]:
        c("DEL", "t")
        model = bytearray(b"x" * start_len)
        if start_len:
            c("SET", "t", bytes(model))
        piece = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
        assert c("SETRANGE", "t", offset, piece) == max(start_len, offset + len(piece))
        if len(model) < offset + len(piece):
            model += bytes(offset + len(piece) - len(model))
        model[offset:offset + len(piece)] = piece
        assert c("GET", "t") == bytes(model)
        bit = rng.randrange(8 * (len(model) + 8))
        old = (model[bit // 8] >> (7 - bit % 8)) & 1 if bit // 8 < len(model) else 0
        assert c("SETBIT", "t", bit, 1) == old
        if bit // 8 >= len(model):
            model += bytes(bit // 8 + 1 - len(model))
        model[bit // 8] |= 1 << (7 - bit % 8)
        assert c("GET", "t") == bytes(model)
        assert c("STRLEN", "t") == len(model)
    # Counters are short strings; INCR over a value made long by APPEND and back.
    c("SET", "n", "9" * 18)
    assert c("INCR", "n") == 10**18
    assert c("APPEND", "n", "0" * 10) == 29
    assert c("INCR", "n") == NOT_INT
    c("SET", "n", "-5")
    assert c("INCRBY", "n", 10**17) == 10**17 - 5
    assert c("GET", "n") == str(10**17 - 5).encode()


def test_incrbyfloat_result_is_not_int_encoded(c):
    # Redis stores INCRBYFLOAT's text without trying the integer encoding; INCR re-encodes.
    assert c("INCRBYFLOAT", "f", "2") == b"2"
    assert c("OBJECT", "ENCODING", "f") == b"embstr"
    assert c("RENAME", "f", "g") == "OK"
    assert c("OBJECT", "ENCODING", "g") == b"embstr"
    assert c("INCR", "g") == 3
    assert c("OBJECT", "ENCODING", "g") == b"int"
    assert c("INCRBYFLOAT", "g", "1e50") == b"100000000000000000003583830118858923890798487404544"
    assert c("OBJECT", "ENCODING", "g") == b"raw"
    assert c("SET", "g", "7") == "OK"
    assert c("OBJECT", "ENCODING", "g") == b"int"
