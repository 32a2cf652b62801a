"""Redis's HyperLogLog commands: PFADD, PFCOUNT, PFMERGE.

Every test here also passes against the real Redis (--target redis). The byte-level tests
start a second, real redis-server and compare the two servers' values byte for byte, and
move values between them with GET/SET.
"""

import random

import pytest

from helpers import Err

NOT_HLL = Err("WRONGTYPE Key is not a valid HyperLogLog string value.")
INVALIDOBJ = Err("INVALIDOBJ Corrupted HLL object detected")


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


@pytest.fixture
def rc(real_redis):
    client = real_redis.raw()
    client("FLUSHALL")
    yield client
    client.close()


# ---------------------------------------------------------------- replies

def test_pfadd_replies(c):
    assert c("PFADD", "h", "a", "b", "c") == 1
    assert c("PFADD", "h", "a") == 0
    assert c("PFADD", "h", "a", "b", "c") == 0
    assert c("PFADD", "h", "d") == 1
    # No elements: creates the key (1), or does nothing (0).
    assert c("PFADD", "h") == 0
    assert c("PFADD", "new") == 1
    assert c("PFCOUNT", "new") == 0
    assert c("TYPE", "h") == "string"
    assert c("OBJECT", "ENCODING", "h") == b"raw"
    value = c("GET", "h")
    assert value[:4] == b"HYLL" and value[4] == 1, "sparse"


def test_pfcount_replies(c):
    assert c("PFCOUNT", "missing") == 0
    assert c("PFCOUNT", "missing", "missing2") == 0
    assert c("PFADD", "h1", "a", "b", "c") == 1
    assert c("PFADD", "h2", "b", "c", "d") == 1
    assert c("PFCOUNT", "h1") == 3
    assert c("PFCOUNT", "h1", "h2") == 4
    assert c("PFCOUNT", "h1", "missing", "h2") == 4
    assert c("PFCOUNT", "h1", "h1") == 3


def test_pfcount_caches_the_cardinality(c):
    # From Redis's tests: byte 15 is the top byte of the cached cardinality, whose top bit
    # marks it stale.
    assert c("PFADD", "h", "a", "b", "c") == 1
    assert c("GETRANGE", "h", 15, 15) == b"\x80"
    assert c("PFCOUNT", "h") == 3
    assert c("GETRANGE", "h", 15, 15) == b"\x00"
    assert c("PFADD", "h", "a", "b", "c") == 0
    assert c("GETRANGE", "h", 15, 15) == b"\x00"
    assert c("PFADD", "h", "1", "2", "3") == 1
    assert c("GETRANGE", "h", 15, 15) == b"\x80"
    # Multi-key PFCOUNT neither uses nor writes the caches.
    assert c("PFCOUNT", "h", "other") == 6
    assert c("GETRANGE", "h", 15, 15) == b"\x80"


def test_pfcount_that_rewrites_the_cache_touches_watch(c, raw_conn):
    assert c("PFADD", "h", "a", "b") == 1
    assert c("WATCH", "h") == "OK"
    assert c("PFCOUNT", "h") == 2  # stale cache recomputed: a write
    assert c("MULTI") == "OK"
    assert c("PING") == "QUEUED"
    assert c("EXEC") is None
    assert c("WATCH", "h") == "OK"
    assert c("PFCOUNT", "h") == 2  # valid cache: nothing written
    assert c("MULTI") == "OK"
    assert c("PING") == "QUEUED"
    assert c("EXEC") == ["PONG"]


def test_pfmerge(c):
    assert c("PFADD", "h1", "a", "b", "c") == 1
    assert c("PFADD", "h2", "b", "c", "d") == 1
    assert c("PFADD", "h3", "c", "d", "e") == 1
    assert c("PFMERGE", "h", "h1", "h2", "h3") == "OK"
    assert c("PFCOUNT", "h") == 5
    # The destination's own content is part of the union.
    assert c("PFADD", "d", "x", "y") == 1
    assert c("PFMERGE", "d", "h1") == "OK"
    assert c("PFCOUNT", "d") == 5
    # Missing sources are empty; a missing destination is created.
    assert c("PFMERGE", "empty", "nosuch1", "nosuch2") == "OK"
    assert c("EXISTS", "empty") == 1
    assert c("PFCOUNT", "empty") == 0
    assert c("PFMERGE", "empty2") == "OK"
    assert c("PFCOUNT", "empty2") == 0
    # The destination as its only source.
    assert c("PFMERGE", "h1") == "OK"
    assert c("PFCOUNT", "h1") == 3
    assert c("PFMERGE", "h1", "h1", "h2") == "OK"
    assert c("PFCOUNT", "h1") == 4


def test_pfmerge_keeps_the_destination_ttl(c):
    assert c("PFADD", "d", "a") == 1
    assert c("EXPIRE", "d", 1000) == 1
    assert c("PFADD", "s", "b") == 1
    assert c("PFMERGE", "d", "s") == "OK"
    assert 0 < c("TTL", "d") <= 1000
    assert c("PFADD", "d", "c") == 1
    assert 0 < c("TTL", "d") <= 1000


def test_arity(c):
    assert c("PFADD") == wrong_args("pfadd")
    assert c("PFCOUNT") == wrong_args("pfcount")
    assert c("PFMERGE") == wrong_args("pfmerge")


# ---------------------------------------------------------------- errors

def test_not_a_hyperloglog(c):
    assert c("SET", "s", "a plain string value") == "OK"
    assert c("PFADD", "h", "a") == 1
    assert c("PFADD", "s", "a") == NOT_HLL
    assert c("PFCOUNT", "s") == NOT_HLL
    assert c("PFCOUNT", "h", "s") == NOT_HLL
    assert c("PFMERGE", "h", "s") == NOT_HLL
    assert c("PFMERGE", "s", "h") == NOT_HLL
    assert c("GET", "s") == b"a plain string value"
    assert c("PFCOUNT", "h") == 1
    # Short strings and empty strings are not HyperLogLogs either.
    assert c("SET", "e", "") == "OK"
    assert c("PFADD", "e", "a") == NOT_HLL
    assert c("SET", "hdr", "HYLL") == "OK"
    assert c("PFCOUNT", "hdr") == NOT_HLL


def test_broken_headers(c):
    # Redis's tests: broken magic, invalid encoding, dense with the wrong length.
    for offset, patch in [(0, b"0123"), (4, b"x"), (4, b"\x00")]:
        c("DEL", "h")
        assert c("PFADD", "h", "a", "b", "c") == 1
        assert c("SETRANGE", "h", offset, patch) > 0
        assert c("PFCOUNT", "h") == NOT_HLL
        assert c("PFADD", "h", "z") == NOT_HLL
        assert c("PFMERGE", "h2", "h") == NOT_HLL


def test_corrupted_sparse_body(c):
    assert c("PFADD", "h", "a", "b", "c") == 1
    assert c("APPEND", "h", "hello") > 0
    assert c("PFCOUNT", "h") == INVALIDOBJ
    assert c("PFCOUNT", "h", "h") == INVALIDOBJ
    assert c("PFMERGE", "d", "h") == INVALIDOBJ
    assert c("EXISTS", "d") == 0
    # With a valid cached cardinality PFCOUNT does not read the body, as in Redis.
    c("DEL", "h")
    assert c("PFADD", "h", "a", "b", "c") == 1
    assert c("PFCOUNT", "h") == 3
    assert c("APPEND", "h", "hello") > 0
    assert c("PFCOUNT", "h") == 3


def test_corrupted_sparse_body_from_scratch(c):
    # A sparse header whose body describes only 100 registers (XZERO:100).
    value = b"HYLL\x01\x00\x00\x00" + b"\x00" * 7 + b"\x80" + bytes([0x40, 99])
    assert c("SET", "h", value) == "OK"
    assert c("PFCOUNT", "h") == INVALIDOBJ
    assert c("PFADD", "h", "a") == INVALIDOBJ
    assert c("GET", "h") == value
    assert c("PFCOUNT", "h", "h") == INVALIDOBJ


# ---------------------------------------------------------------- accuracy

def test_error_bound_on_one_million_elements(r):
    """1M distinct elements (600k and 600k overlapping by 200k): every estimate within 2%
    (Redis's standard error is 0.81%)."""
    pipe = r.pipeline(transaction=False)
    for key, lo, hi in (("a", 0, 600_000), ("b", 400_000, 1_000_000)):
        for start in range(lo, hi, 1000):
            pipe.pfadd(key, *[b"element:%d" % i for i in range(start, start + 1000)])
            if len(pipe) == 100:
                assert all(x in (0, 1) for x in pipe.execute())
    pipe.execute()

    def close(estimate, exact):
        assert abs(estimate - exact) / exact < 0.02, (estimate, exact)

    close(r.pfcount("a"), 600_000)
    close(r.pfcount("b"), 600_000)
    close(r.pfcount("a", "b"), 1_000_000)
    assert r.pfmerge("m", "a", "b")
    close(r.pfcount("m"), 1_000_000)
    value = r.get("m")
    assert value[:5] == b"HYLL\x00" and len(value) == 12304, "dense"


# ---------------------------------------------------------------- byte compatibility

def random_element(rng):
    kind = rng.random()
    if kind < 0.4:
        return b"%d" % rng.randrange(1 << 40)
    if kind < 0.7:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24)))
    return b"user:%d" % rng.randrange(200_000)


def test_same_replies_and_bytes_as_redis(c, rc):
    """A random PFADD/PFCOUNT/PFMERGE script on both servers: same replies, same bytes
    (through sparse values, promotion to dense, and merges of both)."""
    rng = random.Random(20261121)
    keys = ["h1", "h2", "h3", "{x}h4"]
    dests = keys + ["m1", "m2"]
    for step in range(400):
        op = rng.random()
        if op < 0.7:
            n = rng.choice([0, 1, 2, 10, 100, 400])
            cmd = ["PFADD", rng.choice(keys)] + [random_element(rng) for _ in range(n)]
        elif op < 0.85:
            cmd = ["PFCOUNT"] + rng.sample(dests, rng.randint(1, 3))
        else:
            cmd = ["PFMERGE", rng.choice(dests)] + rng.sample(dests, rng.randint(0, 3))
        assert c(*cmd) == rc(*cmd), (step, cmd[:3])
        if step % 25 == 0 or step == 399:
            for k in dests:
                assert c("GET", k) == rc("GET", k), (step, k)
    encodings = {rc("GET", k)[4] for k in keys}
    assert encodings == {0, 1} or encodings == {0}, "the script reached dense values"


def test_sparse_max_bytes_setting(server, real_redis):
    """hll-sparse-max-bytes decides when a sparse value turns dense, as in Redis."""
    ours = server.start(["--hll-sparse-max-bytes", "200"]).raw()
    theirs = real_redis.raw()
    theirs("FLUSHALL")
    try:
        assert theirs("CONFIG", "SET", "hll-sparse-max-bytes", "200") == "OK"
        assert ours("CONFIG", "GET", "hll-sparse-max-bytes") == [b"hll-sparse-max-bytes", b"200"]
        for i in range(60):
            cmd = ["PFADD", "h"] + [b"e%d-%d" % (i, j) for j in range(5)]
            assert ours(*cmd) == theirs(*cmd)
            assert ours("GET", "h") == theirs("GET", "h"), i
        assert theirs("GETRANGE", "h", 4, 4) == b"\x00", "promoted to dense"
        assert ours("CONFIG", "SET", "hll-sparse-max-bytes", "3000") == "OK"
    finally:
        theirs("CONFIG", "SET", "hll-sparse-max-bytes", "3000")
        ours.close()
        theirs.close()


@pytest.mark.parametrize("n", [0, 1, 100, 2000, 50_000])
def test_values_move_between_redis_and_abacus(c, rc, n):
    """GET from one server, SET into the other: same counts, and further adds and merges
    give identical bytes on both sides. Both directions."""
    rng = random.Random(n)
    elements = [random_element(rng) for _ in range(n)]
    more = [random_element(rng) for _ in range(300)]
    for src, dst in ((rc, c), (c, rc)):
        src("FLUSHALL")
        dst("FLUSHALL")
        assert src("PFADD", "h") == 1
        for i in range(0, n, 1000):
            src("PFADD", "h", *elements[i:i + 1000])
        value = src("GET", "h")
        assert dst("SET", "h", value) == "OK"
        assert dst("GET", "h") == value
        assert dst("PFCOUNT", "h") == src("PFCOUNT", "h")
        assert dst("GET", "h") == src("GET", "h"), "the same cache written"
        assert dst("PFADD", "h", *more) == src("PFADD", "h", *more)
        assert dst("GET", "h") == src("GET", "h")
        for side in (src, dst):
            assert side("PFADD", "other", *more[:50]) == 1
            assert side("PFMERGE", "m", "other", "h") == "OK"
        assert dst("GET", "m") == src("GET", "m")
        assert dst("PFCOUNT", "h", "other") == src("PFCOUNT", "h", "other")


# ---------------------------------------------------------------- PFDEBUG, PFSELFTEST

def test_pfdebug_same_replies_as_redis(c, rc):
    """Every PFDEBUG subcommand on sparse, dense, corrupt and non-HLL values, and its errors:
    the same replies (and afterwards the same bytes) as the real Redis."""
    rng = random.Random(7)
    corrupt = b"HYLL\x01\x00\x00\x00" + b"\x00" * 7 + b"\x80" + bytes([0x40, 99])
    truncated = b"HYLL\x01\x00\x00\x00" + b"\x00" * 8 + bytes([0x00, 0x40])
    for srv in (c, rc):
        for name, n in (("empty", 0), ("small", 3), ("mid", 60), ("big", 700), ("dense", 5000)):
            rng.seed(n)
            srv("PFADD", name, *[random_element(rng) for _ in range(n)])
        srv("SET", "corrupt", corrupt)
        srv("SET", "truncated", truncated)
        srv("SET", "plain", "abc")
        srv("SADD", "set", "a")
    keys = ["empty", "small", "mid", "big", "dense", "corrupt", "truncated", "plain", "set", "missing"]
    for sub in ("ENCODING", "DECODE", "getreg", "TODENSE", "todense", "decode", "nosuch"):
        for key in keys:
            cmd = ("PFDEBUG", sub, key)
            assert c(*cmd) == rc(*cmd), cmd
            assert c("GET", key) == rc("GET", key) if key not in ("set", "missing") else True, cmd
    for cmd in (("PFDEBUG", "getreg"), ("PFDEBUG", "getreg", "small", "x"), ("PFDEBUG",)):
        assert c(*cmd) == rc(*cmd), cmd
    assert c("OBJECT", "ENCODING", "small") == rc("OBJECT", "ENCODING", "small")


def test_pfdebug_replies(c):
    assert c("PFADD", "h", "a", "b", "c") == 1
    assert c("PFDEBUG", "ENCODING", "h") == "sparse"
    decoded = c("PFDEBUG", "DECODE", "h")
    ops = decoded.split(b" ")
    assert sum(1 for op in ops if op.startswith(b"v:")) == 3, decoded
    regs = c("PFDEBUG", "GETREG", "h")
    assert len(regs) == 16384 and sum(1 for r in regs if r) == 3
    # GETREG converted the value, as in Redis.
    assert c("PFDEBUG", "ENCODING", "h") == "dense"
    assert c("PFDEBUG", "DECODE", "h") == Err("ERR HLL encoding is not sparse")
    assert c("PFDEBUG", "TODENSE", "h") == 0
    assert c("PFCOUNT", "h") == 3
    assert c("PFDEBUG", "ENCODING", "nokey") == Err("ERR The specified key does not exist")
    assert c("PFDEBUG", "what", "h") == Err("ERR Unknown PFDEBUG subcommand 'what'")


def test_pfselftest(c):
    assert c("PFSELFTEST") == "OK"
    assert c("PFSELFTEST", "x") == wrong_args("pfselftest")
