"""DUMP and RESTORE in Redis's serialization format (RDB version 10).

The round-trip tests start a real redis-server beside the server under test: every shared
type, in every encoding Redis 7.0 writes (small and large), is built in Redis, DUMPed there,
RESTOREd into the server under test, compared value for value, then DUMPed from the server
under test and RESTOREd back into Redis, and compared again. Everything here also passes
against Redis itself (--target redis), except what is marked abacus_only.
"""

import random

import pytest
import redis

from helpers import Err


@pytest.fixture
def ref(real_redis):
    client = real_redis.client(decode_responses=False)
    client.flushall()
    yield client
    client.close()


def read_value(client, key):
    """The whole value, in a form that compares byte for byte across servers."""
    t = client.type(key)
    if t == b"string":
        return (t, client.get(key))
    if t == b"list":
        return (t, client.lrange(key, 0, -1))
    if t == b"set":
        return (t, sorted(client.smembers(key)))
    if t == b"zset":
        # Scores compared through their reply text: the exact double Redis prints.
        raw = client.execute_command("ZRANGE", key, 0, -1, "WITHSCORES", NEVER_DECODE=True)
        return (t, raw)
    if t == b"hash":
        return (t, sorted(client.hgetall(key).items()))
    return (t, None)


def build_cases(rng):
    """(key, commands) for every type and encoding Redis 7.0 keeps and dumps."""
    long_text = "".join(rng.choice("abcdefghij") for _ in range(5000))
    incompressible = bytes(rng.getrandbits(8) for _ in range(3000))
    big_members = ["m:%d:%s" % (i, "x" * (i % 90)) for i in range(2000)]
    cases = {
        "str:short": [("SET", "str:short", "hello")],
        "str:int8": [("SET", "str:int8", "-12")],
        "str:int16": [("SET", "str:int16", "30000")],
        "str:int32": [("SET", "str:int32", "-2000000000")],
        "str:int64": [("SET", "str:int64", "9223372036854775807")],
        "str:empty": [("SET", "str:empty", "")],
        "str:lzf": [("SET", "str:lzf", "a" * 10000)],
        "str:text": [("SET", "str:text", long_text)],
        "str:binary": [("SET", "str:binary", incompressible)],
        "list:small": [("RPUSH", "list:small", "a", "1", "-1", "", "x" * 70)],
        "list:large": [("RPUSH", "list:large", *big_members)],
        "list:huge-item": [("RPUSH", "list:huge-item", "y" * 20000, "z", "12")],
        "set:intset": [("SADD", "set:intset", 5, -3, 100000, 2 ** 40, -(2 ** 63))],
        "set:intset-max": [("SADD", "set:intset-max", *range(512))],
        "set:ints-large": [("SADD", "set:ints-large", *range(0, 5000, 3))],
        "set:strings": [("SADD", "set:strings", "a", "b", "12", "c")],
        "set:large": [("SADD", "set:large", *big_members)],
        "zset:listpack": [("ZADD", "zset:listpack", 1.5, "a", 2, "b", "-inf", "c", "inf", "d",
                           0.1, "e", 1e300, "f", -2.5e-300, "g", 0, "h", 12345678901, "i")],
        "zset:skiplist": [("ZADD", "zset:skiplist",
                           *[x for i, m in enumerate(big_members) for x in (i / 7.0, m)])],
        "zset:long-member": [("ZADD", "zset:long-member", 3, "q" * 100, 4, "r")],
        "hash:listpack": [("HSET", "hash:listpack", "f", "v", "n", "12", "neg", "-5000000", "e", "")],
        "hash:hashtable": [("HSET", "hash:hashtable",
                            *[x for i, m in enumerate(big_members) for x in (m, i)])],
        "hash:long-value": [("HSET", "hash:long-value", "f", "v" * 100)],
    }
    return cases


def test_redis_dumps_restore_here_and_back(r, ref):
    cases = build_cases(random.Random(29))
    for key, commands in cases.items():
        for cmd in commands:
            ref.execute_command(*cmd)
        original = read_value(ref, key)
        assert original[1] is not None, key
        payload = ref.dump(key)
        assert r.restore(key, 0, payload) == b"OK", key
        assert read_value(r, key) == original, key
        # And back: the server under test's own DUMP restores in Redis to the same value.
        ours = r.dump(key)
        back = key + ":back"
        assert ref.restore(back, 0, ours) == b"OK", key
        assert read_value(ref, back) == original, key


def test_encodings_survive_the_round_trip(r, ref):
    """The value Redis gets back is in the encoding Redis would have chosen."""
    cases = build_cases(random.Random(7))
    for key, commands in cases.items():
        for cmd in commands:
            ref.execute_command(*cmd)
        r.restore(key, 0, ref.dump(key))
        ref.restore(key + ":back", 0, r.dump(key))
        assert ref.object("encoding", key + ":back") == ref.object("encoding", key), key


def test_dump_missing_key_is_nil(r):
    assert r.dump("nope") is None


def test_restore_errors(r, c):
    r.set("k", "v")
    payload = r.dump("k")
    assert c("RESTORE", "k", "0", payload) == Err("BUSYKEY Target key name already exists.")
    assert c("RESTORE", "x", "-1", payload) == Err("ERR Invalid TTL value, must be >= 0")
    assert c("RESTORE", "x", "abc", payload) == Err("ERR value is not an integer or out of range")
    assert c("RESTORE", "x", "0", "garbage-bytes-here") == \
        Err("ERR DUMP payload version or checksum are wrong")
    assert c("RESTORE", "x", "0", b"x") == Err("ERR DUMP payload version or checksum are wrong")
    broken = bytearray(payload)
    broken[1] ^= 0xFF
    assert c("RESTORE", "x", "0", bytes(broken)) == \
        Err("ERR DUMP payload version or checksum are wrong")
    assert c("RESTORE", "x", "0", payload, "bogus") == Err("ERR syntax error")
    assert c("RESTORE", "x", "0", payload, "IDLETIME", "-1") == \
        Err("ERR Invalid IDLETIME value, must be >= 0")
    assert c("RESTORE", "x", "0", payload, "FREQ", "256") == \
        Err("ERR Invalid FREQ value, must be >= 0 and <= 255")
    assert c("RESTORE", "x", "0", payload, "FREQ", "1", "IDLETIME", "2") == Err("ERR syntax error")
    assert c("RESTORE", "x", "0", payload, "IDLETIME") == Err("ERR syntax error")
    assert c("RESTORE", "x", "0") == Err("ERR wrong number of arguments for 'restore' command")
    assert c("DUMP") == Err("ERR wrong number of arguments for 'dump' command")
    # A right footer around bytes that are no value.
    assert c("RESTORE", "x", "0", with_footer(bytes([99, 1, 2]))) == Err("ERR Bad data format")
    # A newer RDB version than Redis 7.2's.
    assert c("RESTORE", "x", "0", with_footer(b"\x00\x01a", version=12)) == \
        Err("ERR DUMP payload version or checksum are wrong")
    assert r.exists("x") == 0


def test_restore_replace_ttl_and_absttl(r):
    r.rpush("src", "a", "b")
    payload = r.dump("src")
    r.set("dst", "old")
    assert r.restore("dst", 0, payload, replace=True)
    assert r.lrange("dst", 0, -1) == [b"a", b"b"]
    assert r.ttl("dst") == -1
    assert r.restore("t", 100000, payload)
    assert 0 < r.pttl("t") <= 100000
    far = 4102444800000  # 2100-01-01 in ms
    assert r.restore("abs", far, payload, absttl=True)
    assert r.pexpiretime("abs") == far
    # An absolute time in the past: OK, and no key (an existing one is deleted).
    assert r.restore("gone", 1, payload, absttl=True)
    assert r.exists("gone") == 0
    r.set("gone", "x")
    assert r.restore("gone", 1, payload, absttl=True, replace=True)
    assert r.exists("gone") == 0


def test_restore_idletime_and_freq(r):
    r.set("s", "v")
    payload = r.dump("s")
    assert r.restore("idle", 0, payload, idletime=5000)
    idle = r.object("idletime", "idle")
    assert 5000 <= idle < 5000 + 600
    old = r.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        r.config_set("maxmemory-policy", "allkeys-lfu")
        assert r.restore("hot", 0, payload, frequency=200)
        # Decay takes a minute per step (lfu-decay-time 1): at most one step in this test.
        assert r.object("freq", "hot") in (199, 200)
    finally:
        r.config_set("maxmemory-policy", old)


def test_dump_payload_shape(r):
    """Type byte first, then the RDB version 10 and a CRC64 (checked by recomputing it)."""
    r.set("k", "bar")
    payload = r.dump("k")
    assert payload[:5] == b"\x00\x03bar"
    assert payload[5:7] == b"\x0a\x00"
    assert int.from_bytes(payload[7:], "little") == crc64(payload[:7])


@pytest.mark.abacus_only("postgresql-hll sketches are an Abacus type")
def test_hll_sketch_dumps_as_its_string(r, ref):
    r.execute_command("HLL.ADD", "sk", *range(100))
    payload = r.dump("sk")
    assert ref.restore("sk", 0, payload)
    assert ref.get("sk") == r.get("sk")
    # Restored here, it is a sketch again for the HLL commands.
    assert r.restore("sk2", 0, payload)
    assert r.execute_command("HLL.CARD", "sk2") == r.execute_command("HLL.CARD", "sk")


def test_abacus_only_payload_is_refused_cleanly(r, ref):
    """A payload of an Abacus-only type (type byte 200) is refused by Redis and by a server
    that does not know its kind with "Bad data format", not a crash."""
    payload = with_footer(bytes([200, 250, 3]) + b"abc")
    for client in (r, ref):
        with pytest.raises(redis.ResponseError, match="^Bad data format$"):
            client.restore("ab", 0, payload)
        assert client.ping()


def stream_state(client, key):
    """Everything a stream's DUMP carries, in a form equal across servers (idle times left out:
    they move with the clock)."""
    info = client.execute_command("XINFO", "STREAM", key, "FULL")
    info = dict(zip(info[::2], info[1::2]))
    groups = []
    for g in info[b"groups"]:
        g = dict(zip(g[::2], g[1::2]))
        consumers = []
        for c in g[b"consumers"]:
            c = dict(zip(c[::2], c[1::2]))
            consumers.append((c[b"name"], c[b"pel-count"], [p[0] for p in c[b"pending"]]))
        groups.append((g[b"name"], g[b"last-delivered-id"], g[b"entries-read"], g[b"lag"],
                       g[b"pel-count"], [(p[0], p[1], p[3]) for p in g[b"pending"]], consumers))
    return (client.xrange(key), info[b"length"], info[b"last-generated-id"],
            info[b"max-deleted-entry-id"], info[b"entries-added"], groups)


def build_stream(client, key, rng):
    """Entries with shared and different fields, integers and strings, over several nodes,
    deletions (tombstones in Redis's nodes), two groups with pending entries and consumers."""
    for i in range(350):
        if i % 3 == 0:
            fields = {"kind": "click", "n": i, "price": "%d.%02d" % (i, i % 100)}
        elif i % 3 == 1:
            fields = {"kind": "view", "n": -i * 1000003, "url": "https://x/%d" % rng.randrange(10 ** 9)}
        else:
            fields = {"other": "x" * rng.randrange(0, 300), "": "empty field name"}
        client.xadd(key, fields, id="%d-%d" % (1700000000000 + i // 2, i % 2))
    client.xdel(key, "1700000000000-0", "1700000000050-1", "1700000000174-1")
    client.xgroup_create(key, "g1", id="0")
    client.xgroup_create(key, "g2", id="1700000000100-0")
    client.xreadgroup("g1", "alice", {key: ">"}, count=5)
    client.xreadgroup("g1", "bob", {key: ">"}, count=3)
    client.xreadgroup("g2", "carol", {key: ">"}, count=2, noack=True)
    client.xreadgroup("g2", "dave", {key: ">"}, count=4)
    client.xack(key, "g1", "1700000000001-0")
    client.xgroup_createconsumer(key, "g1", "idle-one")
    # Delivered twice: a delivery count of 2.
    client.xclaim(key, "g1", "bob", 0, ["1700000000001-1"])


def test_stream_round_trips_with_redis(r, ref):
    build_stream(ref, "st", random.Random(5))
    original = stream_state(ref, "st")
    assert r.restore("st", 0, ref.dump("st")) == b"OK"
    assert stream_state(r, "st") == original
    assert ref.restore("st:back", 0, r.dump("st")) == b"OK"
    assert stream_state(ref, "st:back") == original
    # Built here first, then into Redis and back.
    build_stream(r, "mine", random.Random(6))
    here = stream_state(r, "mine")
    assert ref.restore("mine", 0, r.dump("mine")) == b"OK"
    assert stream_state(ref, "mine") == here
    # The restored stream keeps working: IDs continue after the last one, groups deliver.
    r.xadd("st", {"k": "v"})
    got = r.xreadgroup("g1", "alice", {"st": ">"}, count=1)[0][1][0]
    assert got == ref.xrange("st", got[0], got[0])[0]


def test_empty_stream_with_groups_and_setid_round_trips(r, ref):
    ref.xadd("e", {"a": "1"}, id="5-5")
    ref.xdel("e", "5-5")
    ref.xgroup_create("e", "g", id="$")
    ref.execute_command("XSETID", "e", "9-9", "ENTRIESADDED", 7, "MAXDELETEDID", "6-0")
    original = stream_state(ref, "e")
    assert r.restore("e", 0, ref.dump("e")) == b"OK"
    assert stream_state(r, "e") == original
    assert ref.restore("e2", 0, r.dump("e")) == b"OK"
    assert stream_state(ref, "e2") == original


@pytest.mark.abacus_only("time series are an Abacus type (RedisTimeSeries commands)")
def test_series_dumps_as_an_abacus_payload(r, ref):
    r.execute_command("TS.CREATE", "ts", "RETENTION", 0, "LABELS", "sensor", "a")
    for t in range(1, 200):
        r.execute_command("TS.ADD", "ts", t * 1000, t * 0.5)
    payload = r.dump("ts")
    assert payload[0] == 200
    assert r.restore("ts2", 0, payload) == b"OK"
    assert r.execute_command("TS.RANGE", "ts2", "-", "+") == r.execute_command("TS.RANGE", "ts", "-", "+")
    assert r.type("ts2") == r.type("ts")
    with pytest.raises(redis.ResponseError, match="^Bad data format$"):
        ref.restore("ts", 0, payload)


# ---------------------------------------------------------------- CRC64 (Redis's crc64.c)

_POLY = 0x95AC9329AC4BC9B5  # 0xad93d23594c935a9 reflected


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _table()


def crc64(data):
    crc = 0
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def test_crc64_vector():
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


def with_footer(body, version=10):
    p = body + version.to_bytes(2, "little")
    return p + crc64(p).to_bytes(8, "little")
