"""SORT and SORT_RO over lists, sets and sorted sets: numeric and ALPHA order, ASC/DESC,
LIMIT, BY and GET patterns (string keys and hash fields, on any shard), BY nosort, STORE
(and its log record: the stored list survives a restart), errors.

Runs against Redis too (`--target redis`), except the restart test.
"""

import pytest
import redis

from helpers import key_on
from test_persistence import data_dir, node  # noqa: F401 (fixture)


def test_numeric_and_alpha(r):
    r.rpush("l", 3, 1, 10, 2)
    assert r.sort("l") == [b"1", b"2", b"3", b"10"]
    assert r.sort("l", desc=True) == [b"10", b"3", b"2", b"1"]
    assert r.sort("l", alpha=True) == [b"1", b"10", b"2", b"3"]
    assert r.execute_command("SORT_RO", "l", "ALPHA", "DESC") == [b"3", b"2", b"10", b"1"]
    r.rpush("words", "b", "a", "c")
    with pytest.raises(redis.ResponseError, match="One or more scores can't be converted into double"):
        r.sort("words")
    assert r.sort("words", alpha=True) == [b"a", b"b", b"c"]


def test_equal_scores_break_ties_by_bytes(r):
    r.rpush("t", "1.0", "1", "01", "0.5")
    assert r.sort("t") == [b"0.5", b"01", b"1", b"1.0"]


@pytest.mark.parametrize("start,count,expected", [
    (0, 2, [b"1", b"2"]),
    (1, 2, [b"2", b"3"]),
    (-5, 2, [b"1", b"2"]),
    (2, -1, [b"3", b"4"]),
    (3, 10, [b"4"]),
    (4, 1, []),
    (10, 1, []),
    (0, 0, []),
])
def test_limit(r, start, count, expected):
    r.rpush("n", 4, 3, 2, 1)
    assert r.sort("n", start=start, num=count) == expected


def test_by_and_get_patterns_across_shards(r):
    r.rpush("ids", 1, 2, 3)
    # Weights and data on keys spread over both shards.
    r.mset({"w_1": 30, "w_2": 10, "w_3": 20, "d_1": "one", "d_3": "three"})
    r.hset("h_1", mapping={"f": "c", "n": 3})
    r.hset("h_2", mapping={"f": "a", "n": 1})
    r.hset("h_3", mapping={"f": "b", "n": 2})
    assert r.sort("ids", by="w_*") == [b"2", b"3", b"1"]
    assert r.sort("ids", by="h_*->n", desc=True) == [b"1", b"3", b"2"]
    assert r.sort("ids", by="h_*->f", alpha=True) == [b"2", b"3", b"1"]
    assert r.sort("ids", by="w_*", get=["#", "d_*", "h_*->f"]) == [b"2", None, b"a", b"3", b"three", b"b", b"1", b"one", b"c"]
    # A missing weight counts as 0; ties keep byte order of the elements.
    assert r.sort("ids", by="missing_*") == [b"1", b"2", b"3"]
    # A pattern without * reads no key: no sorting at all (DESC reverses the list's order).
    assert r.sort("ids", by="nosort") == [b"1", b"2", b"3"]
    assert r.sort("ids", by="nosort", desc=True) == [b"3", b"2", b"1"]
    assert r.sort("ids", by="nosort", desc=True, start=1, num=5) == [b"2", b"1"]
    assert r.sort("ids", get="fixed") == [None, None, None]
    # A hash field of a string key, a string read of a hash: nil.
    assert r.sort("ids", get="w_*->f") == [None, None, None]
    assert r.sort("ids", get="h_*") == [None, None, None]


def test_alpha_by_missing_weights_come_first(r):
    r.rpush("ids", "a", "b", "c")
    r.set("aw_b", "x")
    assert r.sort("ids", by="aw_*", alpha=True)[-1] == b"b"


def test_store(r):
    r.rpush("src", 3, 1, 2)
    r.set("dst", "old")
    r.expire("dst", 100)
    assert r.sort("src", store="dst") == 3
    assert r.lrange("dst", 0, -1) == [b"1", b"2", b"3"]
    assert r.ttl("dst") == -1
    # GET values that are missing are stored as empty strings.
    assert r.sort("src", get="none_*", store="dst") == 3
    assert r.lrange("dst", 0, -1) == [b"", b"", b""]
    # An empty result deletes the destination.
    assert r.sort("nothing", store="dst") == 0
    assert r.exists("dst") == 0
    # Destination on another shard than the source.
    dst = key_on(1, "sortdst")
    assert r.sort("src", store=dst, desc=True) == 3
    assert r.lrange(dst, 0, -1) == [b"3", b"2", b"1"]


def test_sets(r):
    r.sadd("s", 5, 3, 9)
    assert r.sort("s") == [b"3", b"5", b"9"]
    r.sadd("sw", "b", "c", "a")
    assert sorted(r.sort("sw", by="nosort")) == [b"a", b"b", b"c"]
    # Stored without sorting: sorted as strings anyway, so the result does not depend on
    # the set's internal order.
    assert r.sort("sw", by="nosort", store="swd") == 3
    assert r.lrange("swd", 0, -1) == [b"a", b"b", b"c"]


def test_sorted_sets(r):
    r.zadd("z", {"c": 1, "a": 2, "b": 3})
    assert r.sort("z", alpha=True) == [b"a", b"b", b"c"]
    assert r.sort("z", by="nosort") == [b"c", b"a", b"b"]
    assert r.sort("z", by="nosort", desc=True) == [b"b", b"a", b"c"]
    assert r.sort("z", by="nosort", start=1, num=1) == [b"a"]


def test_errors_and_missing_keys(r):
    assert r.sort("missing") == []
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.sort("str")
    r.rpush("l", 1)
    for args in (("SORT", "l", "LIMIT", 0), ("SORT", "l", "BOGUS"), ("SORT", "l", "STORE"), ("SORT_RO", "l", "STORE", "d"),
                 ("SORT", "l", "GET")):
        with pytest.raises(redis.ResponseError, match="syntax error"):
            r.execute_command(*args)
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.execute_command("SORT", "l", "LIMIT", "x", 1)


def test_sort_in_multi(r):
    r.rpush("m", 2, 1)
    p = r.pipeline(transaction=True)
    p.sort("m")
    p.sort("m", store="m2")
    p.lrange("m2", 0, -1)
    assert p.execute() == [[b"1", b"2"], 2, [b"1", b"2"]]


@pytest.mark.abacus_only("restart of a private server on its data directory")
def test_stored_result_survives_a_crash(data_dir):
    n = node(data_dir).start()
    c = n.client()
    c.rpush("src", "b", "a")
    c.set("w_a", 2)
    c.set("w_b", 1)
    assert c.sort("src", by="w_*", store="dst") == 2
    assert c.sort("src", alpha=True, store="dst2") == 2
    n.kill()
    n.start()
    c = n.client()
    assert c.lrange("dst", 0, -1) == [b"b", b"a"]
    assert c.lrange("dst2", 0, -1) == [b"a", b"b"]
