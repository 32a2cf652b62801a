"""Sorted-set commands: ZADD ... ZSCAN, the algebra (ZUNION, ZINTER, ZDIFF, STOREs,
ZINTERCARD), pops, and how sorted sets live in the keyspace (TYPE, OBJECT ENCODING and the
listpack -> skiplist conversion, COPY, RENAME, EXPIRE, WRONGTYPE, persistence).

Everything but the encoding-limit and persistence tests runs against the real Redis too
(`--target redis`): the expected replies are Redis 7.0's, including its score text (`%.17g`:
1.1 is "1.1000000000000001"). Exact replies are read with the raw client `c` (RESP2 bulk
strings) and a raw RESP3 connection (doubles as `,text`); redis-py's `r`/`r3` check what
applications see. Keys on different shards: Abacus's test server runs two threads, and
`helpers.key_on` names keys on a chosen shard.
"""

import os
import socket
import time

import pytest
import redis

from helpers import Err, key_on

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
SYNTAX = Err("ERR syntax error")
NOT_FLOAT = Err("ERR value is not a valid float")
NOT_INT = Err("ERR value is not an integer or out of range")
MINMAX = Err("ERR min or max is not a float")
LEXERR = Err("ERR min or max not valid string range item")


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


def resp3(server, *args):
    """One command on a fresh RESP3 connection; the reply with doubles kept as text."""
    s = socket.create_connection((server.host, server.port), timeout=10)
    f = s.makefile("rb")

    def send(*a):
        a = [x if isinstance(x, bytes) else str(x).encode() for x in a]
        s.sendall(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
        return read()

    def read():
        line = f.readline()[:-2]
        t, rest = line[:1], line[1:]
        if t in (b"*", b"%", b"~"):
            n = int(rest)
            return None if n < 0 else [read() for _ in range(n * (2 if t == b"%" else 1))]
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = f.read(n + 2)[:-2]
            return data
        if t == b",":
            return ("double", rest)
        if t == b"_":
            return None
        if t == b":":
            return int(rest)
        if t == b"-":
            return Err(rest.decode())
        return rest

    try:
        send("HELLO", "3")
        return send(*args)
    finally:
        s.close()


# ------------------------------------------------------------------ ZADD and scores

def test_zadd_counts_and_scores_format_as_redis_7_0(c):
    assert c("ZADD", "z", "1.1", "a", "0.30000000000000004", "b", "1e300", "c", "inf", "d",
             "-inf", "e", "3", "f", "1e9", "g", "1e-7", "h") == 8
    assert c("ZADD", "z", "2", "a", "5", "new") == 1
    assert c("ZCARD", "z") == 9
    assert c("ZSCORE", "z", "c") == b"1.0000000000000001e+300"
    assert c("ZSCORE", "z", "g") == b"1000000000"
    assert c("ZSCORE", "z", "h") == b"9.9999999999999995e-08"
    assert c("ZSCORE", "z", "d") == b"inf"
    assert c("ZSCORE", "z", "e") == b"-inf"
    assert c("ZINCRBY", "z", "0.1", "a") == b"2.1000000000000001"
    assert c("ZRANGE", "z", "0", "2", "WITHSCORES") == [b"e", b"-inf", b"h", b"9.9999999999999995e-08", b"b", b"0.30000000000000004"]
    assert c("TYPE", "z") == "zset"


def test_resp3_scores_are_doubles_with_the_same_text(server, r):
    r.zadd("z", {"a": 1.1, "b": 3})
    assert resp3(server, "ZSCORE", "z", "a") == ("double", b"1.1000000000000001")
    assert resp3(server, "ZRANGE", "z", "0", "-1", "WITHSCORES") == [[b"a", ("double", b"1.1000000000000001")], [b"b", ("double", b"3")]]
    assert resp3(server, "ZMSCORE", "z", "b", "nope") == [("double", b"3"), None]
    assert resp3(server, "ZPOPMIN", "z") == [b"a", ("double", b"1.1000000000000001")]
    assert resp3(server, "ZPOPMAX", "z", "1") == [[b"b", ("double", b"3")]]


def test_redis_py_sees_floats_in_both_protocols(r, r3):
    r.zadd("z", {"a": 1.5, "b": -2})
    assert r.zrange("z", 0, -1, withscores=True) == [(b"b", -2.0), (b"a", 1.5)]
    assert r3.zrange("z", 0, -1, withscores=True) == [[b"b", -2.0], [b"a", 1.5]]
    assert r3.zscore("z", "a") == 1.5
    assert r.zincrby("z", 1, "a") == 2.5


def test_score_parsing_is_strtod_with_range_checks(c):
    for bad in ["nan", "abc", "1e400", "-1e400", "1e-400", "", "1x", "--1"]:
        assert c("ZADD", "z", bad, "m") == NOT_FLOAT, bad
    assert c("ZADD", "z", "0x10", "hex", "+inf", "pinf", "-Infinity", "ninf", "1e-310", "sub") == 4
    assert c("ZSCORE", "z", "hex") == b"16"
    assert c("ZSCORE", "z", "pinf") == b"inf"
    assert c("ZSCORE", "z", "ninf") == b"-inf"
    assert c("ZSCORE", "z", "sub") == b"9.9999999999999694e-311"
    assert c("EXISTS", "nokey") == 0


def test_zadd_options_and_their_errors(c):
    assert c("ZADD", "z", "NX", "XX", "1", "a") == Err("ERR XX and NX options at the same time are not compatible")
    for opts in (["GT", "LT"], ["NX", "GT"], ["NX", "LT"]):
        assert c("ZADD", "z", *opts, "1", "a") == Err("ERR GT, LT, and/or NX options at the same time are not compatible")
    assert c("ZADD", "z", "INCR", "1", "a", "2", "b") == Err("ERR INCR option supports a single increment-element pair")
    assert c("ZADD", "z", "1", "a", "2") == SYNTAX
    assert c("ZADD", "z", "foo", "1", "a") == SYNTAX
    assert c("ZADD", "z", "1") == wrong_args("zadd")
    assert c("ZADD", "z", "XX", "1", "a") == 0
    assert c("EXISTS", "z") == 0, "XX never creates the key"
    assert c("ZADD", "z", "XX", "INCR", "1", "a") is None
    assert c("ZADD", "z", "1", "a", "2", "b") == 2
    assert c("ZADD", "z", "NX", "5", "a", "3", "c") == 1
    assert c("ZSCORE", "z", "a") == b"1"
    assert c("ZADD", "z", "XX", "CH", "7", "a", "9", "nope") == 1
    assert c("ZADD", "z", "GT", "CH", "1", "a", "10", "b") == 1
    assert c("ZADD", "z", "LT", "CH", "100", "a", "0", "c") == 1
    assert c("ZRANGE", "z", "0", "-1", "WITHSCORES") == [b"c", b"0", b"a", b"7", b"b", b"10"]
    assert c("ZADD", "z", "CH", "0", "c", "7", "a") == 0, "same scores change nothing"
    assert c("ZADD", "z", "NX", "INCR", "1", "a") is None
    assert c("ZADD", "z", "GT", "INCR", "-1", "a") is None
    assert c("ZADD", "z", "LT", "INCR", "-1", "a") == b"6"
    assert c("ZADD", "z", "GT", "5", "new") == 1, "GT/LT still add new members"


def test_nan_results_are_refused(c):
    c("ZADD", "z", "inf", "a")
    assert c("ZINCRBY", "z", "-inf", "a") == Err("ERR resulting score is not a number (NaN)")
    assert c("ZADD", "z", "INCR", "-inf", "a") == Err("ERR resulting score is not a number (NaN)")
    assert c("ZSCORE", "z", "a") == b"inf"
    assert c("ZINCRBY", "z", "abc", "a") == NOT_FLOAT
    assert c("ZINCRBY", "z", "1", "new") == b"1"


def test_negative_zero_as_redis_keeps_it(c):
    # A listpack stores -0 as 0 (Redis 7.0's d2string); a skiplist keeps the sign.
    assert c("ZADD", "small", "-0", "m") == 1
    assert c("ZSCORE", "small", "m") == b"0"
    c("ZADD", "big", *sum([[str(i), "m%d" % i] for i in range(200)], []))
    assert c("ZADD", "big", "-0", "negzero") == 1
    assert c("ZSCORE", "big", "negzero") == b"-0"
    assert c("ZADD", "big", "0", "negzero") == 0, "-0 == 0: no update"
    assert c("ZSCORE", "big", "negzero") == b"-0"


# ------------------------------------------------------------------ reads

def test_zrem_zcard_zscore_zmscore_zrank(c):
    c("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert c("ZRANK", "z", "a") == 0
    assert c("ZREVRANK", "z", "a") == 2
    assert c("ZRANK", "z", "nope") is None
    assert c("ZRANK", "nokey", "a") is None
    assert c("ZMSCORE", "z", "c", "nope", "a") == [b"3", None, b"1"]
    assert c("ZMSCORE", "nokey", "a") == [None]
    assert c("ZSCORE", "nokey", "a") is None
    assert c("ZCARD", "nokey") == 0
    assert c("ZREM", "z", "a", "nope", "a") == 1
    assert c("ZREM", "z", "nope") == 0
    assert c("ZREM", "z", "b", "c") == 2
    assert c("EXISTS", "z") == 0, "the last ZREM deletes the key"


def test_zcount_and_zlexcount(c):
    c("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")
    assert c("ZCOUNT", "z", "-inf", "+inf") == 4
    assert c("ZCOUNT", "z", "(1", "3") == 2
    assert c("ZCOUNT", "z", "(1", "(1") == 0
    assert c("ZCOUNT", "z", "3", "1") == 0
    assert c("ZCOUNT", "z", "1e400", "1") == 0
    assert c("ZCOUNT", "z", "[1", "3") == MINMAX
    assert c("ZCOUNT", "z", "nan", "3") == MINMAX
    c("ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d")
    assert c("ZLEXCOUNT", "l", "-", "+") == 4
    assert c("ZLEXCOUNT", "l", "[b", "(d") == 2
    assert c("ZLEXCOUNT", "l", "+", "-") == 0
    assert c("ZLEXCOUNT", "l", "a", "+") == LEXERR
    assert c("ZLEXCOUNT", "nokey", "-", "+") == 0


def test_zrange_by_rank(c):
    c("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    assert c("ZRANGE", "z", "0", "-1") == [b"a", b"b", b"c", b"d", b"e"]
    assert c("ZRANGE", "z", "-2", "100") == [b"d", b"e"]
    assert c("ZRANGE", "z", "3", "1") == []
    assert c("ZRANGE", "z", "0", "1", "REV", "WITHSCORES") == [b"e", b"5", b"d", b"4"]
    assert c("ZREVRANGE", "z", "1", "2") == [b"d", b"c"]
    assert c("ZRANGE", "nokey", "0", "-1") == []
    assert c("ZRANGE", "z", "x", "1") == NOT_INT
    assert c("ZRANGE", "z", "0", "1", "LIMIT", "0", "1") == Err(
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
    assert c("ZRANGE", "z", "0", "1", "LIMIT", "0", "-1") == [b"a", b"b"], "LIMIT 0 -1 is no LIMIT"
    assert c("ZRANGE", "z", "0", "1", "LIMIT") == SYNTAX
    assert c("ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX") == SYNTAX


def test_zrange_by_score(c):
    c("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    assert c("ZRANGE", "z", "(1", "4", "BYSCORE") == [b"b", b"c", b"d"]
    assert c("ZRANGE", "z", "4", "(1", "BYSCORE", "REV") == [b"d", b"c", b"b"]
    assert c("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2", "WITHSCORES") == [b"b", b"2", b"c", b"3"]
    assert c("ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2") == [b"d", b"c"]
    assert c("ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", "-1", "2") == []
    assert c("ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", "3", "-5") == [b"d", b"e"]
    assert c("ZRANGEBYSCORE", "z", "2", "3", "WITHSCORES") == [b"b", b"2", b"c", b"3"]
    assert c("ZRANGEBYSCORE", "z", " 2", "(3") == [b"b"], "a range bound may start with spaces"
    assert c("ZREVRANGEBYSCORE", "z", "+inf", "4", "LIMIT", "0", "1") == [b"e"]
    assert c("ZRANGEBYSCORE", "z", "0", "1", "REV") == SYNTAX
    assert c("ZRANGEBYSCORE", "z", "abc", "1") == MINMAX


def test_zrange_by_lex(c):
    c("ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e")
    assert c("ZRANGE", "l", "[b", "(e", "BYLEX") == [b"b", b"c", b"d"]
    assert c("ZRANGE", "l", "(e", "[b", "BYLEX", "REV") == [b"d", b"c", b"b"]
    assert c("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "1", "2") == [b"b", b"c"]
    assert c("ZREVRANGEBYLEX", "l", "+", "-", "LIMIT", "0", "2") == [b"e", b"d"]
    assert c("ZRANGEBYLEX", "l", "-", "[") == []
    assert c("ZRANGEBYLEX", "l", "a", "+") == LEXERR
    assert c("ZRANGE", "l", "-", "+", "BYLEX", "WITHSCORES") == Err(
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX")


def test_zrangestore(c):
    c("ZADD", "src", "1", "a", "2", "b", "3", "c")
    assert c("ZRANGESTORE", "dst", "src", "0", "1") == 2
    assert c("ZRANGE", "dst", "0", "-1", "WITHSCORES") == [b"a", b"1", b"b", b"2"]
    assert c("ZRANGESTORE", "dst", "src", "(1", "+inf", "BYSCORE", "REV") == 0, "REV takes max first"
    assert c("ZRANGESTORE", "dst", "src", "+inf", "(1", "BYSCORE", "REV", "LIMIT", "0", "1") == 1
    assert c("ZRANGE", "dst", "0", "-1") == [b"c"]
    assert c("ZRANGESTORE", "dst", "src", "0", "-1", "WITHSCORES") == SYNTAX
    assert c("ZRANGESTORE", "dst", "src", "5", "9") == 0
    assert c("EXISTS", "dst") == 0, "an empty result deletes the destination"
    c("SET", "str", "v")
    assert c("ZRANGESTORE", "dst", "str", "0", "-1") == WRONGTYPE
    assert c("ZRANGESTORE", "str", "src", "0", "-1") == 3, "the destination is replaced"
    assert c("TYPE", "str") == "zset"


def test_zremrangeby(c):
    c("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    assert c("ZREMRANGEBYRANK", "z", "0", "0") == 1
    assert c("ZREMRANGEBYRANK", "z", "-1", "-1") == 1
    assert c("ZREMRANGEBYRANK", "z", "5", "1") == 0
    assert c("ZREMRANGEBYRANK", "z", "x", "1") == NOT_INT
    assert c("ZREMRANGEBYSCORE", "z", "(2", "3") == 1
    assert c("ZREMRANGEBYSCORE", "z", "x", "3") == MINMAX
    assert c("ZRANGE", "z", "0", "-1") == [b"b", b"d"]
    c("ZADD", "l", "0", "a", "0", "b", "0", "c")
    assert c("ZREMRANGEBYLEX", "l", "[a", "(c") == 2
    assert c("ZREMRANGEBYLEX", "l", "-", "+") == 1
    assert c("EXISTS", "l") == 0
    assert c("ZREMRANGEBYLEX", "l", "x", "+") == LEXERR
    assert c("ZREMRANGEBYSCORE", "nokey", "0", "1") == 0


# ------------------------------------------------------------------ random, scan, pops

def test_zrandmember(c):
    members = {b"a": b"1", b"b": b"2", b"c": b"3"}
    c("ZADD", "z", *sum([[s, m] for m, s in members.items()], []))
    assert c("ZRANDMEMBER", "z") in members
    assert c("ZRANDMEMBER", "nokey") is None
    assert c("ZRANDMEMBER", "nokey", "5") == []
    assert c("ZRANDMEMBER", "z", "0") == []
    got = c("ZRANDMEMBER", "z", "2")
    assert len(got) == 2 and len(set(got)) == 2 and set(got) <= set(members)
    assert sorted(c("ZRANDMEMBER", "z", "10")) == sorted(members)
    got = c("ZRANDMEMBER", "z", "-20", "WITHSCORES")
    assert len(got) == 40
    for m, s in zip(got[::2], got[1::2]):
        assert members[m] == s
    assert c("ZRANDMEMBER", "z", "1", "foo") == SYNTAX
    assert c("ZRANDMEMBER", "z", "x") == NOT_INT


def test_zscan(c):
    c("ZADD", "small", "1.5", "a", "2", "b")
    assert c("ZSCAN", "small", "0") == [b"0", [b"a", b"1.5", b"b", b"2"]]
    assert c("ZSCAN", "small", "0", "MATCH", "a*") == [b"0", [b"a", b"1.5"]]
    assert c("ZSCAN", "nokey", "0") == [b"0", []]
    assert c("ZSCAN", "small", "x") == Err("ERR invalid cursor")
    c("ZADD", "big", *sum([[str(i / 10), "m%d" % i] for i in range(500)], []))
    cursor, seen = b"0", {}
    for _ in range(10000):
        cursor, items = c("ZSCAN", "big", cursor, "COUNT", "37")
        seen.update(zip(items[::2], items[1::2]))
        if cursor == b"0":
            break
    assert len(seen) == 500
    assert seen[b"m1"] == b"0.10000000000000001"


def test_zpopmin_zpopmax(c):
    c("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")
    assert c("ZPOPMIN", "z") == [b"a", b"1"]
    assert c("ZPOPMAX", "z", "2") == [b"d", b"4", b"c", b"3"]
    assert c("ZPOPMIN", "z", "0") == []
    assert c("ZPOPMIN", "z", "-1") == Err("ERR value is out of range, must be positive")
    assert c("ZPOPMIN", "z", "x") == Err("ERR value is out of range, must be positive")
    assert c("ZPOPMIN", "z", "1", "2") == SYNTAX
    assert c("ZPOPMIN", "z", "10") == [b"b", b"2"]
    assert c("EXISTS", "z") == 0
    assert c("ZPOPMIN", "z") == []
    c("SET", "str", "v")
    assert c("ZPOPMIN", "str", "0") == WRONGTYPE


def test_zmpop(c):
    c("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert c("ZMPOP", "2", "nokey", "z", "MIN") == [b"z", [[b"a", b"1"]]]
    assert c("ZMPOP", "1", "z", "MAX", "COUNT", "10") == [b"z", [[b"c", b"3"], [b"b", b"2"]]]
    assert c("EXISTS", "z") == 0
    assert c("ZMPOP", "1", "z", "MIN") is None
    assert c("ZMPOP", "0", "z", "MIN") == Err("ERR numkeys should be greater than 0")
    assert c("ZMPOP", "1", "z", "MIN", "COUNT", "0") == Err("ERR count should be greater than 0")
    assert c("ZMPOP", "2", "z", "MIN") == SYNTAX
    assert c("ZMPOP", "1", "z", "MID") == SYNTAX
    assert c("ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "1") == SYNTAX
    c("SET", "str", "v")
    assert c("ZMPOP", "2", "nokey", "str", "MIN") == WRONGTYPE


# ------------------------------------------------------------------ algebra

def test_zunion_zinter_zdiff_with_sets_weights_and_aggregates(c):
    c("ZADD", "a", "1", "x", "2", "y", "3", "z")
    c("ZADD", "b", "10", "y", "20", "z", "30", "w")
    c("SADD", "s", "y", "w", "q")
    assert c("ZUNION", "3", "a", "b", "s", "WITHSCORES") == [b"q", b"1", b"x", b"1", b"y", b"13", b"z", b"23", b"w", b"31"]
    assert c("ZUNION", "2", "a", "b", "WEIGHTS", "2", "0.5", "AGGREGATE", "MAX", "WITHSCORES") == [
        b"x", b"2", b"y", b"5", b"z", b"10", b"w", b"15"]
    assert c("ZINTER", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES") == [b"y", b"2", b"z", b"3"]
    assert c("ZINTER", "3", "a", "b", "s") == [b"y"]
    assert c("ZINTER", "2", "a", "nokey") == []
    assert c("ZDIFF", "2", "a", "b", "WITHSCORES") == [b"x", b"1"]
    assert c("ZDIFF", "2", "a", "b", "WEIGHTS", "1", "1") == SYNTAX
    assert c("ZINTERCARD", "2", "a", "b") == 2
    assert c("ZINTERCARD", "2", "a", "b", "LIMIT", "1") == 1
    assert c("ZINTERCARD", "2", "a", "b", "LIMIT", "-1") == Err("ERR LIMIT can't be negative")
    # inf + -inf is 0 in a SUM, 0 * inf is 0 as a weight.
    c("ZADD", "pinf", "inf", "m")
    c("ZADD", "ninf", "-inf", "m")
    assert c("ZUNION", "2", "pinf", "ninf", "WITHSCORES") == [b"m", b"0"]
    assert c("ZUNION", "1", "pinf", "WEIGHTS", "0", "WITHSCORES") == [b"m", b"0"]


def test_algebra_errors(c):
    c("ZADD", "a", "1", "x")
    c("SET", "str", "v")
    assert c("ZUNION", "0", "a") == Err("ERR at least 1 input key is needed for 'zunion' command")
    assert c("ZINTERSTORE", "d", "0", "a") == Err("ERR at least 1 input key is needed for 'zinterstore' command")
    assert c("ZINTERCARD", "0", "a") == Err("ERR at least 1 input key is needed for 'zintercard' command")
    assert c("ZUNION", "2", "a") == SYNTAX
    assert c("ZUNION", "x", "a") == NOT_INT
    assert c("ZUNION", "1", "a", "WEIGHTS", "x") == Err("ERR weight value is not a float")
    assert c("ZUNION", "1", "a", "AGGREGATE", "avg") == SYNTAX
    assert c("ZUNIONSTORE", "d", "1", "a", "WITHSCORES") == SYNTAX
    assert c("ZUNION", "2", "a", "str") == WRONGTYPE
    assert c("ZUNION", "2", "str", "a", "AGGREGATE", "avg") == WRONGTYPE, "types before options"


def test_store_forms_replace_or_delete_the_destination(c):
    c("ZADD", "a", "1", "x", "2", "y")
    c("ZADD", "b", "5", "y")
    c("SET", "d", "old")
    assert c("ZUNIONSTORE", "d", "2", "a", "b") == 2
    assert c("ZRANGE", "d", "0", "-1", "WITHSCORES") == [b"x", b"1", b"y", b"7"]
    assert c("ZINTERSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "-1") == 1
    assert c("ZRANGE", "d", "0", "-1", "WITHSCORES") == [b"y", b"-3"]
    assert c("ZDIFFSTORE", "d", "2", "a", "a") == 0
    assert c("EXISTS", "d") == 0
    assert c("ZUNIONSTORE", "a", "2", "a", "b") == 2, "the destination may be a source"


def test_multi_key_commands_across_shards(server, c):
    if server.is_redis:
        pytest.skip("shards are Abacus's")
    k0, k1, k2 = key_on(0, "zs0"), key_on(1, "zs1"), key_on(1, "zsd")
    c("ZADD", k0, "1", "a", "2", "b")
    c("ZADD", k1, "10", "b", "20", "c")
    assert c("ZUNION", "2", k0, k1, "WITHSCORES") == [b"a", b"1", b"b", b"12", b"c", b"20"]
    assert c("ZINTERSTORE", k2, "2", k0, k1) == 1
    assert c("ZRANGE", k2, "0", "-1", "WITHSCORES") == [b"b", b"12"]
    assert c("ZDIFFSTORE", key_on(0, "zsd0"), "2", k1, k0) == 1
    assert c("ZINTERCARD", "2", k0, k1) == 1
    assert c("ZRANGESTORE", key_on(0, "zr"), k1, "0", "0") == 1
    assert c("ZMPOP", "2", key_on(0, "nokey"), k1, "MAX") == [k1.encode(), [[b"c", b"20"]]]


# ------------------------------------------------------------------ the keyspace

def test_wrongtype_both_ways(c):
    c("SET", "str", "v")
    c("ZADD", "z", "1", "a")
    for cmd in (["ZADD", "str", "1", "a"], ["ZSCORE", "str", "a"], ["ZRANGE", "str", "0", "-1"],
                ["ZCARD", "str"], ["ZPOPMIN", "str"], ["ZREM", "str", "a"], ["ZINCRBY", "str", "1", "a"],
                ["ZRANDMEMBER", "str"], ["ZSCAN", "str", "0"], ["ZCOUNT", "str", "0", "1"]):
        assert c(*cmd) == WRONGTYPE, cmd
    for cmd in (["GET", "z"], ["SADD", "z", "a"], ["HSET", "z", "f", "v"], ["SINTER", "z"], ["APPEND", "z", "x"]):
        assert c(*cmd) == WRONGTYPE, cmd


def test_type_copy_rename_expire(c):
    c("ZADD", "z", "1.5", "a", "2", "b")
    assert c("TYPE", "z") == "zset"
    assert c("COPY", "z", "z2") == 1
    c("ZADD", "z2", "3", "c")
    assert c("ZCARD", "z") == 2 and c("ZCARD", "z2") == 3, "COPY is deep"
    assert c("RENAME", "z2", "z3") == "OK"
    assert c("ZRANGE", "z3", "0", "-1", "WITHSCORES") == [b"a", b"1.5", b"b", b"2", b"c", b"3"]
    assert c("EXPIRE", "z3", "100") == 1
    assert 0 < c("TTL", "z3") <= 100
    assert c("PEXPIRE", "z", "1") == 1
    time.sleep(0.05)
    assert c("ZCARD", "z") == 0 and c("EXISTS", "z") == 0
    assert c("SCAN", "0", "TYPE", "zset")[1] == [b"z3"]


@pytest.mark.abacus_only("Redis 7.0 shares these encoding names; the limits are set here")
def test_encoding_conversion_listpack_to_skiplist(c):
    c("ZADD", "z", *sum([[str(i), "m%d" % i] for i in range(128)], []))
    assert c("OBJECT", "ENCODING", "z") == b"listpack"
    c("ZADD", "z", "1000", "one-more")
    assert c("OBJECT", "ENCODING", "z") == b"skiplist"
    c("ZREMRANGEBYRANK", "z", "0", "-3")
    assert c("OBJECT", "ENCODING", "z") == b"skiplist", "never back"
    c("ZADD", "long", "1", "x" * 65)
    assert c("OBJECT", "ENCODING", "long") == b"skiplist"
    try:
        assert c("CONFIG", "SET", "zset-max-ziplist-entries", "2") == "OK"
        assert c("CONFIG", "GET", "zset-max-listpack-entries") == [b"zset-max-listpack-entries", b"2"]
        c("ZADD", "small", "1", "a", "2", "b")
        assert c("OBJECT", "ENCODING", "small") == b"listpack"
        c("ZADD", "small", "3", "c")
        assert c("OBJECT", "ENCODING", "small") == b"skiplist"
        assert c("ZUNIONSTORE", "u", "1", "small") == 3
        assert c("OBJECT", "ENCODING", "u") == b"skiplist"
        assert c("ZRANGESTORE", "r", "small", "0", "1") == 2
        assert c("OBJECT", "ENCODING", "r") == b"listpack", "a small result is a listpack again"
        assert c("CONFIG", "SET", "zset-max-listpack-value", "3") == "OK"
        c("ZADD", "v", "1", "abcd")
        assert c("OBJECT", "ENCODING", "v") == b"skiplist"
    finally:
        c("CONFIG", "SET", "zset-max-listpack-entries", "128", "zset-max-listpack-value", "64")


def test_a_large_sorted_set(c):
    n = 20000
    for start in range(0, n, 1000):
        c("ZADD", "big", *sum([[str((i * 7919) % n), "m%d" % i] for i in range(start, start + 1000)], []))
    assert c("ZCARD", "big") == n
    assert c("ZRANGE", "big", "0", "2") == [b"m0"] + [c("ZRANGE", "big", "1", "1")[0], c("ZRANGE", "big", "2", "2")[0]]
    assert c("ZRANK", "big", "m0") == 0
    assert c("ZCOUNT", "big", "100", "(200") == 100
    assert len(c("ZRANGEBYSCORE", "big", "5000", "+inf", "LIMIT", "10", "100")) == 100
    assert c("ZREMRANGEBYSCORE", "big", "0", "(10000") == 10000
    assert c("ZCARD", "big") == 10000
    assert c("ZRANGE", "big", "0", "0", "WITHSCORES")[1] == b"10000"


@pytest.mark.abacus_only("Abacus's log and snapshot")
def test_sorted_sets_survive_restart_from_log_and_snapshot(tmp_path):
    from test_persistence import Node
    n = Node(str(tmp_path), "--appendonly", "yes")
    n.start()
    try:
        r = n.client()
        r.zadd("small", {"a": 1.1, "b": -0.0, "c": float("inf")})
        r.zadd("big", {"m%d" % i: i / 3 for i in range(1000)})
        r.zadd("big", {"negzero": -0.0})
        r.zincrby("big", 0.1, "m5")
        r.zpopmax("big", 2)
        r.zunionstore("u", ["small", "big"], aggregate="MIN")
        r.expire("u", 1000)

        def state():
            return {k: (r.execute_command("ZRANGE", k, 0, -1, "WITHSCORES"), r.object("encoding", k)) for k in ("small", "big", "u")}

        before = state()
        assert before["big"][1] == b"skiplist" and before["small"][1] == b"listpack"
        n.term()
        n.start()
        r = n.client()
        assert state() == before, "replayed from the log"
        r.bgsave()
        for _ in range(600):
            if r.info("persistence")["rdb_bgsave_in_progress"] == 0:
                break
            time.sleep(0.05)
        r.zadd("big", {"after": 5})
        before = state()
        n.kill()
        n.start()
        r = n.client()
        assert state() == before, "snapshot + log tail"
        assert r.ttl("u") > 900
    finally:
        if n.p is not None and n.p.proc.poll() is None:
            n.kill()
