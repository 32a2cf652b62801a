"""List commands: LPUSH ... LMPOP (the non-blocking family).

Redis 7.0 and Abacus give the same replies, errors and OBJECT ENCODING ("quicklist") for
lists, so every test here but the persistence ones runs against the real Redis too
(`--target redis`). Replies whose RESP2 null forms matter ($-1 against *-1) are read as raw
bytes.
"""

import pytest
import redis

from helpers import Err, key_on
from test_differential_lists import Wire

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")
MUST_BE_POSITIVE = Err("ERR value is out of range, must be positive")


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


@pytest.fixture
def wire(server, r):
    """(RESP2, RESP3) raw connections: each reply as its exact bytes."""
    w2, w3 = Wire(server, False), Wire(server, True)
    yield w2, w3
    w2.close()
    w3.close()


# ------------------------------------------------------------------ push / pop

def test_push_order_and_length(c):
    assert c("LPUSH", "l", "a", "b", "c") == 3
    assert c("LRANGE", "l", 0, -1) == [b"c", b"b", b"a"]
    assert c("RPUSH", "l", "x", "y") == 5
    assert c("LRANGE", "l", 0, -1) == [b"c", b"b", b"a", b"x", b"y"]
    assert c("LLEN", "l") == 5
    assert c("LLEN", "nokey") == 0
    assert c("TYPE", "l") == "list"
    assert c("OBJECT", "ENCODING", "l") == b"quicklist"


def test_pushx_only_on_existing_lists(c):
    assert c("LPUSHX", "l", "a") == 0
    assert c("RPUSHX", "l", "a", "b") == 0
    assert c("EXISTS", "l") == 0
    c("RPUSH", "l", "m")
    assert c("LPUSHX", "l", "a", "b") == 3
    assert c("RPUSHX", "l", "z") == 4
    assert c("LRANGE", "l", 0, -1) == [b"b", b"a", b"m", b"z"]


def test_elements_round_trip_byte_exactly(c):
    values = [b"0", b"007", b"-0", b"+1", b" 1", b"1.5", b"", b"-1", b"127", b"128", b"16384",
              b"9223372036854775807", b"-9223372036854775808", b"9223372036854775808",
              b"\x00\xff\r\n", b"x" * 300, b"x" * 70000, b"-4294967297", b"4294967296"]
    assert c("RPUSH", "l", *values) == len(values)
    assert c("LRANGE", "l", 0, -1) == values
    for i, v in enumerate(values):
        assert c("LINDEX", "l", i) == v
    assert [c("LPOP", "l") for _ in values] == values


def test_pop_forms(c):
    c("RPUSH", "l", "a", "b", "c", "d", "e")
    assert c("LPOP", "l") == b"a"
    assert c("RPOP", "l") == b"e"
    assert c("LPOP", "l", 2) == [b"b", b"c"]
    assert c("RPOP", "l", 0) == []
    assert c("RPOP", "l", 10) == [b"d"]
    assert c("EXISTS", "l") == 0, "the last pop deletes the key"
    assert c("LPOP", "l") is None
    assert c("LPOP", "l", 3) is None


def test_pop_errors(c):
    c("RPUSH", "l", "a")
    assert c("LPOP", "l", -1) == MUST_BE_POSITIVE
    assert c("RPOP", "l", "abc") == MUST_BE_POSITIVE
    assert c("LPOP", "nokey", -1) == MUST_BE_POSITIVE, "the count is parsed first"
    assert c("LPOP", "l", 1, 2) == wrong_args("lpop")
    assert c("RPOP") == wrong_args("rpop")
    assert c("LLEN", "l") == 1


def test_null_forms_are_exactly_redis(wire):
    w2, w3 = wire
    w2.call(["RPUSH", "l", "a"])
    cases = [
        (["LPOP", "nokey"], b"$-1\r\n"),
        (["LPOP", "nokey", "2"], b"*-1\r\n"),
        (["RPOP", "nokey", "0"], b"*-1\r\n"),
        (["LPOP", "l", "0"], b"*0\r\n"),
        (["LINDEX", "l", "5"], b"$-1\r\n"),
        (["LINDEX", "nokey", "abc"], b"$-1\r\n"),
        (["LPOS", "l", "z"], b"$-1\r\n"),
        (["LPOS", "l", "z", "COUNT", "0"], b"*0\r\n"),
        (["LPOS", "nokey", "z", "COUNT", "1"], b"*0\r\n"),
        (["LMOVE", "nokey", "d", "LEFT", "RIGHT"], b"$-1\r\n"),
        (["RPOPLPUSH", "nokey", "d"], b"$-1\r\n"),
        (["LMPOP", "1", "nokey", "LEFT"], b"*-1\r\n"),
        (["LRANGE", "nokey", "0", "-1"], b"*0\r\n"),
    ]
    for args, want in cases:
        assert w2.call(args) == want, args
        assert w3.call(args) == (b"_\r\n" if want.endswith(b"-1\r\n") else want), args
    assert w3.call(["LMPOP", "1", "l", "RIGHT", "COUNT", "5"]) == b"*2\r\n$1\r\nl\r\n*1\r\n$1\r\na\r\n"


# ------------------------------------------------------------------ reads

def test_lrange_indices(c):
    c("RPUSH", "l", *range(10))
    assert c("LRANGE", "l", 0, 2) == [b"0", b"1", b"2"]
    assert c("LRANGE", "l", -3, -1) == [b"7", b"8", b"9"]
    assert c("LRANGE", "l", -100, 1) == [b"0", b"1"]
    assert c("LRANGE", "l", 8, 100) == [b"8", b"9"]
    assert c("LRANGE", "l", 5, 4) == []
    assert c("LRANGE", "l", 10, 20) == []
    assert c("LRANGE", "l", "a", 1) == NOT_INT
    assert c("LRANGE", "nokey", 0, "x") == NOT_INT, "indices are parsed before the lookup"
    assert c("LRANGE", "l", 0) == wrong_args("lrange")


def test_lindex(c):
    c("RPUSH", "l", "a", "b", "c")
    assert c("LINDEX", "l", 0) == b"a"
    assert c("LINDEX", "l", -1) == b"c"
    assert c("LINDEX", "l", -4) is None
    assert c("LINDEX", "l", 3) is None
    assert c("LINDEX", "l", "x") == NOT_INT
    assert c("LINDEX", "nokey", "x") is None, "the key is looked up first"
    assert c("LINDEX", "l", "9223372036854775807") is None
    assert c("LINDEX", "l", "-9223372036854775808") is None


def test_lpos(c):
    c("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c")
    assert c("LPOS", "l", "c") == 2
    assert c("LPOS", "l", "c", "RANK", 2) == 6
    assert c("LPOS", "l", "c", "RANK", -1) == 7
    assert c("LPOS", "l", "c", "COUNT", 0) == [2, 6, 7]
    assert c("LPOS", "l", "c", "COUNT", 2) == [2, 6]
    assert c("LPOS", "l", "c", "RANK", -1, "COUNT", 2) == [7, 6]
    assert c("LPOS", "l", "c", "MAXLEN", 2) is None
    assert c("LPOS", "l", "c", "COUNT", 0, "MAXLEN", 7) == [2, 6]
    assert c("LPOS", "l", "2") == 4, "integers match their text"
    assert c("LPOS", "l", "02") is None
    assert c("LPOS", "l", "x", "COUNT", 5) == []
    assert c("LPOS", "nokey", "x") is None
    assert c("LPOS", "l", "c", "RANK", 0) == Err(
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
        "or use negative to start from the end of the list")
    assert c("LPOS", "l", "c", "COUNT", -1) == Err("ERR COUNT can't be negative")
    assert c("LPOS", "l", "c", "COUNT", "x") == Err("ERR COUNT can't be negative")
    assert c("LPOS", "l", "c", "MAXLEN", -1) == Err("ERR MAXLEN can't be negative")
    assert c("LPOS", "l", "c", "RANK", "x") == NOT_INT
    assert c("LPOS", "l", "c", "RANK") == SYNTAX
    assert c("LPOS", "l", "c", "FOO", 1) == SYNTAX


# ------------------------------------------------------------------ writes in the middle

def test_lset(c):
    c("RPUSH", "l", "a", "b", "c")
    assert c("LSET", "l", 1, "B") == "OK"
    assert c("LSET", "l", -1, "x" * 1000) == "OK"
    assert c("LRANGE", "l", 0, -1) == [b"a", b"B", b"x" * 1000]
    assert c("LSET", "l", 3, "z") == Err("ERR index out of range")
    assert c("LSET", "l", "x", "z") == NOT_INT
    assert c("LSET", "nokey", 0, "z") == Err("ERR no such key")
    assert c("LSET", "nokey", "x", "z") == Err("ERR no such key"), "the key is looked up first"


def test_linsert(c):
    c("RPUSH", "l", "a", "c")
    assert c("LINSERT", "l", "BEFORE", "c", "b") == 3
    assert c("LINSERT", "l", "after", "c", "d") == 4
    assert c("LINSERT", "l", "before", "a", "0") == 5
    assert c("LRANGE", "l", 0, -1) == [b"0", b"a", b"b", b"c", b"d"]
    assert c("LINSERT", "l", "BEFORE", "zz", "x") == -1
    assert c("LINSERT", "nokey", "BEFORE", "a", "x") == 0
    assert c("LINSERT", "l", "MIDDLE", "a", "x") == SYNTAX
    assert c("LINSERT", "nokey", "MIDDLE", "a", "x") == SYNTAX


def test_lrem(c):
    c("RPUSH", "l", "a", "b", "a", "c", "a", "b")
    assert c("LREM", "l", 2, "a") == 2
    assert c("LRANGE", "l", 0, -1) == [b"b", b"c", b"a", b"b"]
    c("RPUSH", "l", "b", "x", "b")
    assert c("LREM", "l", -2, "b") == 2
    assert c("LRANGE", "l", 0, -1) == [b"b", b"c", b"a", b"b", b"x"]
    assert c("LREM", "l", 0, "b") == 2
    assert c("LREM", "l", 0, "zz") == 0
    assert c("LREM", "l", "x", "a") == NOT_INT
    assert c("LREM", "nokey", 0, "a") == 0
    assert c("LREM", "l", 0, "c") == 1
    assert c("LREM", "l", 0, "a") == 1
    assert c("LREM", "l", 0, "x") == 1
    assert c("EXISTS", "l") == 0


def test_ltrim(c):
    c("RPUSH", "l", *range(10))
    assert c("LTRIM", "l", 2, -3) == "OK"
    assert c("LRANGE", "l", 0, -1) == [b"%d" % i for i in range(2, 8)]
    assert c("LTRIM", "l", -100, 100) == "OK"
    assert c("LLEN", "l") == 6
    assert c("LTRIM", "l", "a", 1) == NOT_INT
    assert c("LTRIM", "nokey", 0, 1) == "OK"
    assert c("LTRIM", "l", 5, 1) == "OK"
    assert c("EXISTS", "l") == 0, "an empty range deletes the key"


def test_big_list_middle_operations(c, r):
    n = 100000
    p = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        p.rpush("big", *range(i, i + 1000))
    p.execute()
    assert c("LLEN", "big") == n
    assert c("LINDEX", "big", 54321) == b"54321"
    assert c("LINDEX", "big", -1) == b"99999"
    assert c("LRANGE", "big", 49998, 50001) == [b"49998", b"49999", b"50000", b"50001"]
    assert c("LINSERT", "big", "AFTER", "50000", "mid") == n + 1
    assert c("LINDEX", "big", 50001) == b"mid"
    assert c("LSET", "big", 70000, "y" * 5000) == "OK"
    assert c("LINDEX", "big", 70000) == b"y" * 5000
    assert c("LPOS", "big", "99999") == n
    assert c("LREM", "big", 0, "mid") == 1
    assert c("LTRIM", "big", 10, -11) == "OK"
    assert c("LLEN", "big") == n - 20
    assert c("RPOP", "big", 3) == [b"99989", b"99988", b"99987"]
    assert c("LPOP", "big") == b"10"


# ------------------------------------------------------------------ moves

def test_lmove_directions(c):
    c("RPUSH", "s", "1", "2", "3", "4")
    assert c("LMOVE", "s", "d", "LEFT", "RIGHT") == b"1"
    assert c("LMOVE", "s", "d", "right", "left") == b"4"
    assert c("LMOVE", "s", "d", "LEFT", "LEFT") == b"2"
    assert c("LMOVE", "s", "d", "RIGHT", "RIGHT") == b"3"
    assert c("LRANGE", "d", 0, -1) == [b"2", b"4", b"1", b"3"]
    assert c("EXISTS", "s") == 0, "the emptied source is deleted"
    assert c("LMOVE", "s", "d", "LEFT", "RIGHT") is None
    assert c("LMOVE", "d", "d", "LEFT", "RIGHT") == b"2", "same key: a rotation"
    assert c("LRANGE", "d", 0, -1) == [b"4", b"1", b"3", b"2"]
    assert c("LMOVE", "d", "x", "UP", "LEFT") == SYNTAX
    assert c("LMOVE", "d", "x", "LEFT") == wrong_args("lmove")
    c("RPUSH", "one", "x")
    assert c("LMOVE", "one", "one", "LEFT", "LEFT") == b"x"
    assert c("LRANGE", "one", 0, -1) == [b"x"]


def test_rpoplpush(c):
    c("RPUSH", "s", "a", "b")
    assert c("RPOPLPUSH", "s", "d") == b"b"
    assert c("RPOPLPUSH", "s", "d") == b"a"
    assert c("LRANGE", "d", 0, -1) == [b"a", b"b"]
    assert c("RPOPLPUSH", "s", "d") is None
    assert c("RPOPLPUSH", "d", "d") == b"b"
    assert c("LRANGE", "d", 0, -1) == [b"b", b"a"]


def test_lmove_across_shards(c):
    # Abacus runs with two shards: these keys live on different ones (the executor's
    # multi-shard path); on Redis it is just two keys.
    src, dst = key_on(0, "src"), key_on(1, "dst")
    c("RPUSH", src, "a", "b", "c")
    assert c("LMOVE", src, dst, "LEFT", "LEFT") == b"a"
    assert c("RPOPLPUSH", src, dst) == b"c"
    assert c("LMOVE", src, dst, "RIGHT", "RIGHT") == b"b"
    assert c("EXISTS", src) == 0
    assert c("LRANGE", dst, 0, -1) == [b"c", b"a", b"b"]
    c("SET", src, "string")
    assert c("LMOVE", dst, src, "LEFT", "LEFT") == WRONGTYPE
    assert c("LLEN", dst) == 3, "nothing moved"


def test_lmpop(c):
    c("RPUSH", "a", "1", "2", "3")
    c("RPUSH", "b", "x")
    assert c("LMPOP", 2, "nokey", "a", "LEFT") == [b"a", [b"1"]]
    assert c("LMPOP", 2, "a", "b", "RIGHT", "COUNT", 10) == [b"a", [b"3", b"2"]]
    assert c("EXISTS", "a") == 0
    assert c("LMPOP", 2, "a", "b", "left", "count", 1) == [b"b", [b"x"]]
    assert c("LMPOP", 2, "a", "b", "LEFT") is None
    assert c("LMPOP", 0, "a", "LEFT") == Err("ERR numkeys should be greater than 0")
    assert c("LMPOP", "x", "a", "LEFT") == Err("ERR numkeys should be greater than 0")
    assert c("LMPOP", 3, "a", "LEFT") == SYNTAX
    assert c("LMPOP", 1, "a", "MIDDLE") == SYNTAX
    assert c("LMPOP", 1, "a", "LEFT", "COUNT", 0) == Err("ERR count should be greater than 0")
    assert c("LMPOP", 1, "a", "LEFT", "COUNT", "x") == Err("ERR count should be greater than 0")
    assert c("LMPOP", 1, "a", "LEFT", "COUNT", 1, "COUNT", 1) == SYNTAX
    assert c("LMPOP", 1, "a", "LEFT", "COUNT") == SYNTAX
    assert c("LMPOP", 1, "a") == wrong_args("lmpop")


def test_lmpop_across_shards_and_wrongtype_order(c):
    k0, k1 = key_on(0, "mp"), key_on(1, "mp")
    c("RPUSH", k1, "v1", "v2")
    assert c("LMPOP", 2, k0, k1, "RIGHT", "COUNT", 1) == [k1.encode(), [b"v2"]]
    c("SET", k0, "s")
    assert c("LMPOP", 2, k0, k1, "LEFT") == WRONGTYPE, "keys are checked in order"
    assert c("LMPOP", 2, k1, k0, "LEFT") == [k1.encode(), [b"v1"]], "a list before it is served"


# ------------------------------------------------------------------ types and generic commands

def test_wrongtype_everywhere(c):
    c("SET", "s", "v")
    for args in [("LPUSH", "s", "a"), ("RPUSH", "s", "a"), ("LPUSHX", "s", "a"), ("RPUSHX", "s", "a"),
                 ("LPOP", "s"), ("RPOP", "s", 2), ("LLEN", "s"), ("LRANGE", "s", 0, 1), ("LINDEX", "s", 0),
                 ("LSET", "s", 0, "x"), ("LINSERT", "s", "BEFORE", "a", "b"), ("LREM", "s", 0, "a"),
                 ("LTRIM", "s", 0, 1), ("LPOS", "s", "a"), ("LMOVE", "s", "d", "LEFT", "LEFT"),
                 ("RPOPLPUSH", "s", "d"), ("LMPOP", 1, "s", "LEFT")]:
        assert c(*args) == WRONGTYPE, args
    assert c("GET", "s") == b"v"
    c("RPUSH", "l", "a")
    for args in [("GET", "l"), ("SADD", "l", "x"), ("HSET", "l", "f", "v"), ("APPEND", "l", "x"),
                 ("INCR", "l"), ("PFADD", "l", "x"), ("SETRANGE", "l", 0, "x"), ("STRLEN", "l"),
                 ("SMEMBERS", "l"), ("HGETALL", "l")]:
        assert c(*args) == WRONGTYPE, args
    assert c("LMOVE", "l", "s", "LEFT", "LEFT") == WRONGTYPE
    assert c("LLEN", "l") == 1


def test_generic_commands_on_lists(c):
    c("RPUSH", "l", "a", "1")
    assert c("COPY", "l", "l2") == 1
    c("RPUSH", "l2", "changed")
    assert c("LRANGE", "l", 0, -1) == [b"a", b"1"], "COPY is a deep copy"
    assert c("RENAME", "l2", "l3") == "OK"
    assert c("LRANGE", "l3", 0, -1) == [b"a", b"1", b"changed"]
    assert c("EXPIRE", "l3", "100") == 1
    c("LPUSH", "l3", "x")
    c("LPOP", "l3")
    assert c("TTL", "l3") > 0, "pushing and popping keep the TTL"
    assert c("TYPE", "l3") == "list"
    assert c("OBJECT", "ENCODING", "l3") == b"quicklist"
    assert c("SCAN", 0, "TYPE", "list", "COUNT", 100)[1] in ([b"l", b"l3"], [b"l3", b"l"])
    assert c("MOVE", "l3", "1") == 1
    assert c("EXISTS", "l3") == 0
    assert c("DEL", "l") == 1
    c("RPUSH", "e", "a")
    assert c("PEXPIRE", "e", 1) == 1
    import time
    time.sleep(0.05)
    assert c("LLEN", "e") == 0
    assert c("LPOP", "e") is None


def test_transactions_with_lists(c):
    assert c("MULTI") == "OK"
    for args in [("RPUSH", "l", "a", "b"), ("LMOVE", "l", "m", "LEFT", "RIGHT"), ("LPOP", "l"),
                 ("LLEN", "m")]:
        assert c(*args) == "QUEUED"
    assert c("EXEC") == [2, b"a", b"b", 1]


def test_watch_sees_list_writes(r):
    r.rpush("l", "a")
    for write in (lambda c: c.rpush("l", "b"), lambda c: c.lpop("l"), lambda c: c.lset("l", 0, "z"),
                  lambda c: c.lmove("l", "other", "LEFT", "LEFT")):
        r.delete("l", "other")
        r.rpush("l", "a", "b")
        p = r.pipeline()
        p.watch("l")
        write(r)
        p.multi()
        p.get("x")
        with pytest.raises(redis.WatchError):
            p.execute()
    # A write that changes nothing (LREM of a missing element) does not abort.
    p = r.pipeline()
    p.watch("l")
    r.lrem("l", 0, "nothing")
    p.multi()
    p.llen("l")
    assert p.execute() == [r.llen("l")]


def test_config_list_parameters(c):
    assert c("CONFIG", "GET", "list-max-listpack-size") == [b"list-max-listpack-size", b"-2"]
    assert c("CONFIG", "GET", "list-max-ziplist-size") == [b"list-max-ziplist-size", b"-2"]
    assert c("CONFIG", "GET", "list-compress-depth") == [b"list-compress-depth", b"0"]
    try:
        assert c("CONFIG", "SET", "list-max-listpack-size", "3") == "OK"
        c("RPUSH", "l", *range(20))
        assert c("LRANGE", "l", 0, -1) == [b"%d" % i for i in range(20)]
        assert c("CONFIG", "GET", "list-max-ziplist-size") == [b"list-max-ziplist-size", b"3"]
        assert c("CONFIG", "SET", "list-compress-depth", "1") == "OK"
        assert c("CONFIG", "SET", "list-max-listpack-size", "abc") == Err(
            "ERR CONFIG SET failed (possibly related to argument 'list-max-listpack-size') - argument couldn't be parsed into an integer")
    finally:
        c("CONFIG", "SET", "list-max-listpack-size", "-2")
        c("CONFIG", "SET", "list-compress-depth", "0")


def test_resp3_replies(r3):
    r3.rpush("l", "a", "b", "c")
    assert r3.lrange("l", 0, -1) == [b"a", b"b", b"c"]
    assert r3.lpop("l", 2) == [b"a", b"b"]
    assert r3.lpop("nokey") is None
    assert r3.execute_command("LMPOP", 1, "l", "LEFT") == [b"l", [b"c"]]
