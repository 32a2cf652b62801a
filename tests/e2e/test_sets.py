"""Set commands: SADD ... SSCAN and the algebra (SINTER, SINTERCARD, SUNION, SDIFF, STOREs).

Everything but the encoding tests runs against the real Redis too (`--target redis`); Redis
7.0 reports intset/hashtable where abacus reports bitmap/listpack/hashtable, so encodings
are asserted only in abacus_only tests. Random picks are checked with fixed draw counts and
bounds several standard deviations wide, so they do not flake.
"""

import random

import pytest

from helpers import Err, RespSet

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")
I64_MAX = 9223372036854775807
I64_MIN = -9223372036854775808


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


def members(c, key):
    return sorted(c("SMEMBERS", key))


def b(*xs):
    return sorted(str(x).encode() if not isinstance(x, bytes) else x for x in xs)


# ------------------------------------------------------------------ SADD / SREM / membership

def test_sadd_counts_new_members(c):
    assert c("SADD", "s", "a", "b", "a", "1", "1") == 3
    assert c("SADD", "s", "b", "c") == 1
    assert c("SCARD", "s") == 4
    assert members(c, "s") == b("1", "a", "b", "c")
    assert c("TYPE", "s") == "set"


def test_integer_members_keep_their_exact_bytes(c):
    # Only canonical decimal integers are integers: "01", "+1", "-0", " 1" are other members.
    weird = ["01", "+1", "-0", " 1", "1 ", "00", "1e3", "9223372036854775808", "-"]
    assert c("SADD", "s", "1", "0", "-1", str(I64_MAX), str(I64_MIN)) == 5
    assert c("SADD", "s", *weird) == len(weird)
    assert c("SCARD", "s") == 5 + len(weird)
    assert members(c, "s") == b("1", "0", "-1", I64_MAX, I64_MIN, *weird)
    for m in weird + ["1", "0", str(I64_MIN)]:
        assert c("SISMEMBER", "s", m) == 1, m
    assert c("SISMEMBER", "s", "2") == 0
    assert c("SISMEMBER", "s", "-01") == 0


def test_integer_only_set_round_trips(c):
    values = [0, 1, -1, 7, 65535, 65536, 1 << 32, -(1 << 32), I64_MAX, I64_MIN, 123456789012]
    assert c("SADD", "ints", *values) == len(values)
    assert members(c, "ints") == b(*values)
    assert c("SMISMEMBER", "ints", "65536", "65537", str(I64_MIN), "x") == [1, 0, 1, 0]


def test_binary_members(c):
    m = b"a\x00b\r\n\xff"
    assert c("SADD", "s", m, b"") == 2
    assert c("SISMEMBER", "s", m) == 1
    assert c("SISMEMBER", "s", b"") == 1
    assert members(c, "s") == sorted([m, b""])


def test_srem(c):
    assert c("SREM", "missing", "a") == 0
    c("SADD", "s", "a", "b", "1", "2")
    assert c("SREM", "s", "a", "x", "1", "1") == 2
    assert members(c, "s") == b("2", "b")
    assert c("SREM", "s", "b", "2") == 2
    assert c("EXISTS", "s") == 0, "an emptied set is deleted"


def test_sismember_smismember_scard_on_missing(c):
    assert c("SISMEMBER", "nokey", "a") == 0
    assert c("SMISMEMBER", "nokey", "a", "b") == [0, 0]
    assert c("SCARD", "nokey") == 0
    assert c("SMEMBERS", "nokey") == []


def test_arity(c):
    assert c("SADD", "s") == wrong_args("sadd")
    assert c("SREM", "s") == wrong_args("srem")
    assert c("SISMEMBER", "s") == wrong_args("sismember")
    assert c("SMISMEMBER", "s") == wrong_args("smismember")
    assert c("SCARD") == wrong_args("scard")
    assert c("SMEMBERS", "a", "b") == wrong_args("smembers")
    assert c("SMOVE", "a", "b") == wrong_args("smove")
    assert c("SINTERCARD", "1") == wrong_args("sintercard")
    assert c("SINTERSTORE", "d") == wrong_args("sinterstore")
    assert c("SUNION") == wrong_args("sunion")
    assert c("SDIFFSTORE", "d") == wrong_args("sdiffstore")
    assert c("SSCAN", "s") == wrong_args("sscan")


def test_wrongtype_everywhere(c):
    c("SET", "str", "x")
    c("HSET", "h", "f", "v")
    c("SADD", "s", "1")
    for key in ("str", "h"):
        for cmd in (("SADD", key, "a"), ("SREM", key, "a"), ("SISMEMBER", key, "a"),
                    ("SMISMEMBER", key, "a"), ("SCARD", key), ("SMEMBERS", key),
                    ("SRANDMEMBER", key), ("SRANDMEMBER", key, "2"), ("SPOP", key),
                    ("SPOP", key, "2"), ("SSCAN", key, "0"), ("SINTER", "s", key),
                    ("SINTERCARD", "2", "s", key), ("SUNION", "s", key), ("SDIFF", "s", key),
                    ("SINTERSTORE", "d", "s", key), ("SUNIONSTORE", "d", key),
                    ("SDIFFSTORE", "d", "s", key), ("SMOVE", key, "s", "1"),
                    ("SMOVE", "s", key, "1")):
            assert c(*cmd) == WRONGTYPE, cmd
    # Every operand is type-checked, even after a missing one.
    assert c("SINTER", "nokey", "str") == WRONGTYPE
    assert c("SDIFF", "nokey", "h") == WRONGTYPE
    assert c("SINTERCARD", "2", "nokey", "h") == WRONGTYPE
    assert c("EXISTS", "d") == 0
    assert c("GET", "str") == b"x"


def test_string_commands_reject_sets(c):
    c("SADD", "s", "1", "a")
    assert c("GET", "s") == WRONGTYPE
    assert c("INCR", "s") == WRONGTYPE
    assert c("PFADD", "s", "x") == WRONGTYPE
    assert c("PFCOUNT", "s") == WRONGTYPE
    assert c("SET", "s", "v") == "OK"
    assert c("TYPE", "s") == "string"


# ------------------------------------------------------------------ SMEMBERS, RESP3

def test_smembers_and_algebra_are_resp3_sets(c):
    c("SADD", "s", "1", "2", "a")
    c("SADD", "t", "2", "a", "z")
    assert isinstance(c("HELLO", "3"), dict)
    for cmd in (("SMEMBERS", "s"), ("SINTER", "s", "t"), ("SUNION", "s", "t"),
                ("SDIFF", "s", "t"), ("SPOP", "s", "0"), ("SMEMBERS", "nokey")):
        assert isinstance(c(*cmd), RespSet), cmd
    assert sorted(c("SINTER", "s", "t")) == b("2", "a")
    # SRANDMEMBER with a count is an array (it may repeat members).
    reply = c("SRANDMEMBER", "s", "-5")
    assert isinstance(reply, list) and not isinstance(reply, RespSet) and len(reply) == 5


# ------------------------------------------------------------------ SRANDMEMBER

def test_srandmember_forms(c):
    assert c("SRANDMEMBER", "nokey") is None
    assert c("SRANDMEMBER", "nokey", "3") == []
    assert c("SRANDMEMBER", "nokey", "-3") == []
    all_members = b(*range(10)) + [b"x"]
    c("SADD", "s", *all_members)
    assert c("SRANDMEMBER", "s") in all_members
    assert c("SRANDMEMBER", "s", "0") == []
    got = c("SRANDMEMBER", "s", "4")
    assert len(got) == 4 and len(set(got)) == 4 and set(got) <= set(all_members)
    assert sorted(c("SRANDMEMBER", "s", "11")) == all_members
    assert sorted(c("SRANDMEMBER", "s", "1000")) == all_members
    got = c("SRANDMEMBER", "s", "-30")
    assert len(got) == 30 and set(got) <= set(all_members)
    assert c("SCARD", "s") == 11, "SRANDMEMBER never removes"


def test_srandmember_errors(c):
    c("SADD", "s", "a")
    assert c("SRANDMEMBER", "s", "abc") == NOT_INT
    assert c("SRANDMEMBER", "s", "1", "2") == SYNTAX
    assert c("SRANDMEMBER", "s", str(I64_MIN)) == Err(
        "ERR value is out of range, value must between -9223372036854775807 and "
        "9223372036854775807")
    # A missing key answers [] whatever the count.
    assert c("SRANDMEMBER", "nokey", str(-2**62)) == []
    assert c("SRANDMEMBER", "nokey", str(-I64_MAX)) == []


@pytest.mark.parametrize("kind", ["ints", "strings", "small"])
def test_srandmember_distribution(r, kind):
    if kind == "ints":        # a bitmap in abacus
        pool = [str(i * 7919) for i in range(2000)]
    elif kind == "strings":   # a hashtable
        pool = ["m%d" % i for i in range(2000)]
    else:                     # a listpack / intset
        pool = [str(i) for i in range(10)]
    r.sadd("s", *pool)
    index = {m.encode(): i for i, m in enumerate(pool)}
    buckets = 10
    per_bucket = len(pool) // buckets

    # Negative count: 20,000 independent draws; each bucket expects 2,000 (sd ~42).
    counts = [0] * buckets
    for m in r.srandmember("s", -20000):
        counts[index[m] // per_bucket] += 1
    assert all(1600 < n < 2400 for n in counts), counts

    # Positive count: 400 calls of 5 distinct members; each bucket expects 200 (sd ~14).
    counts = [0] * buckets
    pipe = r.pipeline(transaction=False)
    for _ in range(400):
        pipe.srandmember("s", 5)
    for got in pipe.execute():
        assert len(set(got)) == 5
        for m in got:
            counts[index[m] // per_bucket] += 1
    assert all(120 < n < 280 for n in counts), counts


# ------------------------------------------------------------------ SPOP

def test_spop_forms(c):
    assert c("SPOP", "nokey") is None
    assert c("SPOP", "nokey", "2") == []
    c("SADD", "s", "1", "2", "3", "a", "b")
    popped = c("SPOP", "s")
    assert c("SCARD", "s") == 4 and c("SISMEMBER", "s", popped) == 0
    assert c("SPOP", "s", "0") == []
    two = c("SPOP", "s", "2")
    assert len(set(two)) == 2 and c("SCARD", "s") == 2
    assert not set(two) & set(c("SMEMBERS", "s"))
    rest = c("SPOP", "s", "10")
    assert len(rest) == 2 and sorted([popped] + two + rest) == b(1, 2, 3, "a", "b")
    assert c("EXISTS", "s") == 0, "popping the last member deletes the set"
    c("SADD", "t", "x")
    assert c("SPOP", "t") == b"x"
    assert c("EXISTS", "t") == 0


def test_spop_errors(c):
    c("SADD", "s", "a")
    positive = Err("ERR value is out of range, must be positive")
    assert c("SPOP", "s", "-1") == positive
    assert c("SPOP", "s", "abc") == positive
    assert c("SPOP", "nokey", "-1") == positive
    assert c("SPOP", "s", "1", "2") == SYNTAX
    assert c("SCARD", "s") == 1


def test_spop_distribution(r):
    # 500 rounds of SPOP from {0..4} (a bitmap) and {a..e} (a listpack): each member ~100
    # times (sd ~9).
    for pool in (["0", "1", "2", "3", "4"], ["a", "b", "c", "d", "e"]):
        counts = {m.encode(): 0 for m in pool}
        pipe = r.pipeline(transaction=False)
        for _ in range(500):
            pipe.delete("s")
            pipe.sadd("s", *pool)
            pipe.spop("s")
        replies = pipe.execute()
        for m in replies[2::3]:
            counts[m] += 1
        assert all(55 < n < 145 for n in counts.values()), counts


def test_spop_with_count_on_large_sets(r):
    r.sadd("ints", *range(5000))
    r.sadd("strs", *["m%d" % i for i in range(5000)])
    for key in ("ints", "strs"):
        got = r.spop(key, 4000)
        assert len(set(got)) == 4000
        rest = r.smembers(key)
        assert len(rest) == 1000 and not rest & set(got)


# ------------------------------------------------------------------ SMOVE

def test_smove(c):
    c("SADD", "src", "a", "1", "2")
    c("SADD", "dst", "x")
    assert c("SMOVE", "src", "dst", "a") == 1
    assert members(c, "src") == b(1, 2) and members(c, "dst") == b("a", "x")
    assert c("SMOVE", "src", "dst", "nope") == 0
    assert c("SMOVE", "nokey", "dst", "a") == 0
    assert c("SMOVE", "src", "new", "1") == 1
    assert members(c, "new") == [b"1"]
    c("SADD", "dst", "2")
    assert c("SMOVE", "src", "dst", "2") == 1, "already in the destination still counts"
    assert c("EXISTS", "src") == 0, "the emptied source is deleted"
    assert c("SMOVE", "dst", "dst", "x") == 1
    assert c("SMOVE", "dst", "dst", "zz") == 0
    assert members(c, "dst") == b(2, "a", "x")


def test_smove_types(c):
    c("SADD", "s", "1")
    c("SET", "str", "v")
    assert c("SMOVE", "nokey", "str", "1") == 0, "a missing source answers before the type check"
    assert c("SMOVE", "s", "str", "1") == WRONGTYPE
    assert c("SMOVE", "str", "s", "1") == WRONGTYPE
    assert c("SCARD", "s") == 1


# ------------------------------------------------------------------ algebra

@pytest.fixture
def abc(c):
    c("SADD", "a", "1", "2", "3", "4", "x", "y")
    c("SADD", "b", "2", "3", "5", "y", "z")
    c("SADD", "c", "3", "y", "q")
    return c


def test_sinter(abc):
    c = abc
    assert sorted(c("SINTER", "a", "b")) == b(2, 3, "y")
    assert sorted(c("SINTER", "a", "b", "c")) == b(3, "y")
    assert sorted(c("SINTER", "a")) == members(c, "a")
    assert c("SINTER", "a", "nokey") == []
    assert c("SINTER", "nokey") == []


def test_sunion(abc):
    c = abc
    assert sorted(c("SUNION", "a", "b")) == b(1, 2, 3, 4, 5, "x", "y", "z")
    assert sorted(c("SUNION", "a", "nokey", "c")) == b(1, 2, 3, 4, "x", "y", "q")
    assert c("SUNION", "nokey") == []


def test_sdiff(abc):
    c = abc
    assert sorted(c("SDIFF", "a", "b")) == b(1, 4, "x")
    assert sorted(c("SDIFF", "a", "b", "c")) == b(1, 4, "x")
    assert sorted(c("SDIFF", "a", "nokey")) == members(c, "a")
    assert c("SDIFF", "nokey", "a") == []
    assert c("SDIFF", "a", "a") == []


def test_sintercard(abc):
    c = abc
    assert c("SINTERCARD", "2", "a", "b") == 3
    assert c("SINTERCARD", "3", "a", "b", "c") == 2
    assert c("SINTERCARD", "1", "a") == 6
    assert c("SINTERCARD", "2", "a", "b", "LIMIT", "2") == 2
    assert c("SINTERCARD", "2", "a", "b", "limit", "0") == 3
    assert c("SINTERCARD", "2", "a", "b", "LIMIT", "100") == 3
    assert c("SINTERCARD", "2", "a", "b", "LIMIT", "1", "LIMIT", "2") == 2
    assert c("SINTERCARD", "2", "a", "nokey") == 0
    # The keys after numkeys are options, not keys.
    assert c("SINTERCARD", "1", "a", "LIMIT", "4") == 4


def test_sintercard_errors(abc):
    c = abc
    numkeys = Err("ERR numkeys should be greater than 0")
    assert c("SINTERCARD", "0", "a") == numkeys
    assert c("SINTERCARD", "-1", "a") == numkeys
    assert c("SINTERCARD", "x", "a") == numkeys
    assert c("SINTERCARD", "3", "a", "b") == Err(
        "ERR Number of keys can't be greater than number of args")
    negative = Err("ERR LIMIT can't be negative")
    assert c("SINTERCARD", "1", "a", "LIMIT", "-1") == negative
    assert c("SINTERCARD", "1", "a", "LIMIT", "x") == negative
    assert c("SINTERCARD", "1", "a", "LIMIT") == SYNTAX
    assert c("SINTERCARD", "1", "a", "FOO", "1") == SYNTAX


@pytest.mark.parametrize("cmd,want", [
    ("SINTERSTORE", [b"3", b"y"]),
    ("SUNIONSTORE", b(1, 2, 3, 4, 5, "q", "x", "y", "z")),
    ("SDIFFSTORE", [b"1", b"4", b"x"]),
])
def test_store_commands(abc, cmd, want):
    c = abc
    assert c(cmd, "dst", "a", "b", "c") == len(want)
    assert members(c, "dst") == want
    # The destination is replaced whatever its type, and loses its TTL.
    c("SET", "dst", "string")
    c("EXPIRE", "dst", "100")
    assert c(cmd, "dst", "a", "b", "c") == len(want)
    assert c("TYPE", "dst") == "set" and c("TTL", "dst") == -1
    # An empty result deletes the destination.
    assert c(cmd, "dst", "nokey1", "nokey2") == 0
    assert c("EXISTS", "dst") == 0
    c("SET", "dst", "string")
    assert c(cmd, "dst", "nokey") == 0
    assert c("EXISTS", "dst") == 0
    # The destination may be an operand.
    c("SADD", "self", "1", "2")
    c("SADD", "other", "2", "3")
    n = c(cmd, "self", "self", "other")
    assert n == {"SINTERSTORE": 1, "SUNIONSTORE": 3, "SDIFFSTORE": 1}[cmd]
    assert c("SCARD", "self") == n


def test_algebra_matches_python_on_large_sets(r):
    rng = random.Random(6)
    xs = [rng.randrange(200000) for _ in range(30000)]
    ys = [rng.randrange(200000) for _ in range(30000)]
    strs = ["s%d" % rng.randrange(50000) for _ in range(3000)]
    for key, values in (("x", xs), ("y", ys), ("mix", ys[:5000] + strs)):
        pipe = r.pipeline(transaction=False)
        for i in range(0, len(values), 1000):
            pipe.sadd(key, *values[i:i + 1000])
        pipe.execute()
    X, Y = {str(v).encode() for v in xs}, {str(v).encode() for v in ys}
    MIX = {str(v).encode() for v in ys[:5000]} | {s.encode() for s in strs}
    assert r.scard("x") == len(X)
    assert r.sintercard(2, ["x", "y"]) == len(X & Y)
    assert r.sintercard(2, ["x", "y"], limit=10) == 10
    assert r.sintercard(2, ["x", "mix"]) == len(X & MIX)
    assert r.sinter("x", "y") == X & Y
    assert r.sinter("mix", "x") == X & MIX
    assert r.sunionstore("u", "x", "y") == len(X | Y)
    assert r.smembers("u") == X | Y
    assert r.sdiffstore("d", "x", "y") == len(X - Y)
    assert r.smembers("d") == X - Y
    assert r.sdiffstore("d2", "mix", "x") == len(MIX - X)
    assert r.smembers("d2") == MIX - X
    assert r.sunion("mix", "x") == MIX | X
    assert r.sdiff("x", "mix", "y") == X - MIX - Y


def test_algebra_across_shards(r):
    # Abacus runs 2 shards in the tests: these keys land on both, and every command must
    # behave as if they were local (atomic check-out of the operands).
    keys = ["k%d" % i for i in range(12)]
    for i, k in enumerate(keys):
        r.sadd(k, *range(i, i + 10), "shared")
    for i in range(len(keys) - 1):
        a, b2 = keys[i], keys[i + 1]
        assert r.sintercard(2, [a, b2]) == 10
        assert r.sunionstore("dest%d" % i, a, b2) == 12
        assert r.sdiffstore("diff%d" % i, a, b2) == 1
        assert r.sinterstore("inter%d" % i, a, b2) == 10
    assert r.sinter(*keys) == {b"shared"}
    for i in range(len(keys) - 1):
        assert r.smove(keys[i], keys[i + 1], "shared") is True
        assert not r.sismember(keys[i], "shared")
    assert r.smembers(keys[-1]) >= {b"shared"}


def test_algebra_in_transaction_and_watch(r):
    r.sadd("a", 1, 2, 3)
    r.sadd("b", 2, 3, 4)
    pipe = r.pipeline(transaction=True)
    pipe.sinterstore("d", "a", "b")
    pipe.sintercard(2, ["a", "b"])
    pipe.sadd("a", 9)
    pipe.sunion("a", "b")
    assert pipe.execute() == [2, 2, 1, {b"1", b"2", b"3", b"4", b"9"}]

    with r.pipeline() as pipe:
        pipe.watch("a")
        r.sadd("a", 10)  # another client modifies the watched set
        pipe.multi()
        pipe.scard("a")
        with pytest.raises(Exception):
            pipe.execute()


# ------------------------------------------------------------------ SSCAN

def full_sscan(c, key, *opts):
    seen, cursor = [], b"0"
    for _ in range(100000):
        cursor, page = c("SSCAN", key, cursor, *opts)
        seen += page
        if cursor == b"0":
            return seen
    raise AssertionError("SSCAN did not terminate")


@pytest.mark.parametrize("kind", ["ints", "strings", "small"])
def test_sscan_full_iteration(c, r, kind):
    if kind == "ints":
        values = [str(v * 31) for v in range(-500, 3000)]
    elif kind == "strings":
        values = ["m%d" % v for v in range(3000)]
    else:
        values = ["1", "2", "a"]
    r.sadd("s", *values)
    seen = full_sscan(c, "s", "COUNT", "97")
    assert sorted(seen) == sorted(v.encode() for v in values)
    seen = full_sscan(c, "s")
    assert sorted(seen) == sorted(v.encode() for v in values)


def test_sscan_match_and_errors(c, r):
    r.sadd("s", *["a%d" % i for i in range(300)], *["b%d" % i for i in range(300)])
    seen = full_sscan(c, "s", "MATCH", "a1*", "COUNT", "50")
    assert sorted(seen) == sorted(m for m in (b"a%d" % i for i in range(300)) if m.startswith(b"a1"))
    assert c("SSCAN", "s", "x") == Err("ERR invalid cursor")
    assert c("SSCAN", "s", "18446744073709551616") == Err("ERR invalid cursor")
    # Redis reads the cursor with strtoul: "" is 0 and "-1" wraps to 2^64-1.
    assert c("SSCAN", "s", " 0") == Err("ERR invalid cursor")
    assert c("SSCAN", "s", "-") == Err("ERR invalid cursor")
    assert c("SSCAN", "nokey", "") == [b"0", []]
    assert c("SSCAN", "nokey", "-1") == [b"0", []]
    assert c("SSCAN", "s", "-1", "COUNT", "1000")[0] == b"0"
    assert c("SSCAN", "s", "0", "COUNT", "0") == SYNTAX
    assert c("SSCAN", "s", "0", "COUNT", "x") == NOT_INT
    assert c("SSCAN", "s", "0", "TYPE", "set") == SYNTAX
    assert c("SSCAN", "s", "0", "MATCH") == SYNTAX
    assert c("SSCAN", "nokey", "0") == [b"0", []]


def test_sscan_survives_concurrent_changes(c, r):
    stable = ["%d" % (i * 3) for i in range(2000)]
    r.sadd("s", *stable)
    seen, cursor, step = set(), b"0", 0
    while True:
        cursor, page = c("SSCAN", "s", cursor, "COUNT", "50")
        seen.update(page)
        if cursor == b"0":
            break
        step += 1
        r.sadd("s", *["%d" % (100000 + step * 10 + j) for j in range(5)])
        assert step < 10000
    assert {m.encode() for m in stable} <= seen


# ------------------------------------------------------------------ generic commands

def test_generic_commands_on_sets(c):
    c("SADD", "s", "1", "a")
    assert c("COPY", "s", "s2") == 1
    c("SADD", "s2", "extra")
    assert members(c, "s") == b(1, "a"), "COPY is a deep copy"
    assert c("RENAME", "s2", "s3") == "OK"
    assert members(c, "s3") == b(1, "a", "extra")
    assert c("EXPIRE", "s3", "100") == 1
    assert c("SADD", "s3", "more") == 1
    assert c("TTL", "s3") > 0, "adding members keeps the TTL"
    assert c("PEXPIRE", "s3", "1") == 1
    import time
    time.sleep(0.05)
    assert c("SCARD", "s3") == 0 and c("EXISTS", "s3") == 0
    assert c("DEL", "s") == 1


# ------------------------------------------------------------------ encodings (abacus)

@pytest.mark.abacus_only("Redis 7.0 has intset/hashtable; abacus has bitmap/listpack/hashtable")
def test_encodings(c):
    c("SADD", "s", *range(1000))
    assert c("OBJECT", "ENCODING", "s") == b"bitmap"
    c("SADD", "s", "a")
    assert c("OBJECT", "ENCODING", "s") == b"hashtable", "1001 members do not fit a listpack"
    assert c("SCARD", "s") == 1001 and c("SISMEMBER", "s", "999") == 1

    c("SADD", "small", "1", "2", "-5")
    assert c("OBJECT", "ENCODING", "small") == b"bitmap"
    c("SADD", "small", "x")
    assert c("OBJECT", "ENCODING", "small") == b"listpack"
    assert c("SMEMBERS", "small") == [b"-5", b"1", b"2", b"x"]
    c("SADD", "small", *["m%d" % i for i in range(130)])
    assert c("OBJECT", "ENCODING", "small") == b"hashtable"

    c("SADD", "long", "y" * 65)
    assert c("OBJECT", "ENCODING", "long") == b"hashtable"
    c("SADD", "noncanonical", "01")
    assert c("OBJECT", "ENCODING", "noncanonical") == b"listpack"
    # Removing never converts back.
    c("SREM", "small", "x")
    assert c("OBJECT", "ENCODING", "small") == b"hashtable"


@pytest.mark.abacus_only("bitmap results")
def test_algebra_result_encodings(c):
    c("SADD", "i1", *range(0, 300))
    c("SADD", "i2", *range(100, 400))
    c("SADD", "mixed", *range(0, 50), "a")
    for cmd in ("SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"):
        c(cmd, "d", "i1", "i2")
        assert c("OBJECT", "ENCODING", "d") == b"bitmap", cmd
    c("SINTERSTORE", "d", "mixed", "i1")
    assert c("OBJECT", "ENCODING", "d") == b"bitmap", "an all-integer result is a bitmap"
    c("SUNIONSTORE", "d", "mixed", "i1")
    assert c("OBJECT", "ENCODING", "d") == b"hashtable"


@pytest.mark.abacus_only("set-max-listpack-* are Redis 7.2's")
def test_listpack_limits_are_configurable(c):
    assert c("CONFIG", "GET", "set-max-listpack-entries") == [b"set-max-listpack-entries", b"128"]
    assert c("CONFIG", "SET", "set-max-listpack-entries", "2") == "OK"
    try:
        c("SADD", "s", "a", "b")
        assert c("OBJECT", "ENCODING", "s") == b"listpack"
        c("SADD", "s", "c")
        assert c("OBJECT", "ENCODING", "s") == b"hashtable"
    finally:
        c("CONFIG", "SET", "set-max-listpack-entries", "128")
    assert c("CONFIG", "SET", "set-max-listpack-value", "3") == "OK"
    try:
        c("SADD", "t", "abcd")
        assert c("OBJECT", "ENCODING", "t") == b"hashtable"
    finally:
        c("CONFIG", "SET", "set-max-listpack-value", "64")
    assert c("CONFIG", "SET", "set-max-intset-entries", "1000") == "OK"
    c("CONFIG", "SET", "set-max-intset-entries", "512")


def test_sintercard_command_info(c):
    info = c("COMMAND", "INFO", "sintercard")[0]
    assert info[0] == b"sintercard" and info[1] == -3
    assert "movablekeys" in info[2]
    assert info[3:6] == [0, 0, 0]
